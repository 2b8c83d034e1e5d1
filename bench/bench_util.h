/* pw-bench helpers: JSON lines on stdout (one object per result), a
 * human-readable table on stderr, timing and order statistics. */
#ifndef PW_BENCH_UTIL_H_
#define PW_BENCH_UTIL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Monotonic nanoseconds. */
int64_t pw_bench_now_ns(void);

/* Median / percentile (0-100) of |n| values; sorts |values| in place. */
double pw_bench_median(double* values, size_t n);
double pw_bench_percentile(double* values, size_t n, double pct);

/* One step of a spin-wait: a pause instruction, and every 64th call a
 * sched_yield, so a waiter that shares a core with the thread it waits for
 * (3 threads on 2 cores in the 2->1 runs) lets it run. */
void pw_bench_pause(void);

/* Pins the calling thread to |cpu| modulo the number of CPUs (best effort). */
void pw_bench_pin(int cpu);

/* One JSON object, built field by field and printed as one line. */
typedef struct pw_bench_json_t {
  char text[2048];
  size_t length;
  bool first;
} pw_bench_json_t;

void pw_bench_json_begin(pw_bench_json_t* j, const char* bench);
void pw_bench_json_str(pw_bench_json_t* j, const char* key, const char* value);
void pw_bench_json_int(pw_bench_json_t* j, const char* key, long long value);
void pw_bench_json_num(pw_bench_json_t* j, const char* key, double value);
void pw_bench_json_null(pw_bench_json_t* j, const char* key);
/* Prints the object on stdout followed by a newline and flushes. */
void pw_bench_json_end(pw_bench_json_t* j);

/* Option parsing shared by suites: --name=value or --name value. Returns
 * |fallback| when absent; exits with a message naming the option when the
 * value does not parse. */
long long pw_bench_opt_int(int argc, char** argv, const char* name,
                           long long fallback);
bool pw_bench_opt_flag(int argc, char** argv, const char* name);
/* The value of --name=value or --name value ("" when --name ends the
 * line), or NULL when absent. */
const char* pw_bench_opt_value(int argc, char** argv, const char* name);

#endif /* PW_BENCH_UTIL_H_ */
