#ifndef PW_BENCH_SUITES_H_
#define PW_BENCH_SUITES_H_

typedef struct pw_bench_suite_t {
  const char* name;
  const char* description;
  int (*run)(int argc, char** argv); /* argv: the options after the suite name */
} pw_bench_suite_t;

int pw_bench_suite_completion(int argc, char** argv);

#endif /* PW_BENCH_SUITES_H_ */
