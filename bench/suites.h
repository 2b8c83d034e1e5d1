#ifndef PW_BENCH_SUITES_H_
#define PW_BENCH_SUITES_H_

typedef struct pw_bench_suite_t {
  const char* name;
  const char* description;
  int (*run)(int argc, char** argv); /* argv: the options after the suite name */
} pw_bench_suite_t;

/* Adds |suite| to `pw-bench list`. Called before main by PW_BENCH_SUITE. */
void pw_bench_register_suite(const pw_bench_suite_t* suite);

/* Defines and registers a suite from a bench/suite_*.c file (every such
 * file is compiled into pw-bench by bench/CMakeLists.txt). */
#define PW_BENCH_SUITE(ident, name, description, fn)                     \
  static const pw_bench_suite_t pw_bench_suite_def_##ident = {name, description, fn}; \
  __attribute__((constructor)) static void pw_bench_register_##ident(void) { \
    pw_bench_register_suite(&pw_bench_suite_def_##ident);                    \
  }

#endif /* PW_BENCH_SUITES_H_ */
