#define _GNU_SOURCE
#include "bench_util.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int64_t pw_bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int pw_bench_cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

double pw_bench_percentile(double* values, size_t n, double pct) {
  if (n == 0) return NAN;
  qsort(values, n, sizeof(double), pw_bench_cmp_double);
  double rank = pct / 100.0 * (double)(n - 1);
  size_t lo = (size_t)rank;
  size_t hi = lo + 1 < n ? lo + 1 : lo;
  double frac = rank - (double)lo;
  return values[lo] + (values[hi] - values[lo]) * frac;
}

double pw_bench_median(double* values, size_t n) {
  return pw_bench_percentile(values, n, 50.0);
}

void pw_bench_pause(void) {
  static _Thread_local unsigned spins;
  if (++spins % 64 == 0) {
    sched_yield();
  } else {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

void pw_bench_pin(int cpu) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu <= 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET((int)(cpu % ncpu), &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

__attribute__((format(printf, 2, 3)))
static void pw_bench_json_append(pw_bench_json_t* j, const char* fmt, ...) {
  if (j->length >= sizeof(j->text)) return;
  va_list args;
  va_start(args, fmt);
  int n = vsnprintf(j->text + j->length, sizeof(j->text) - j->length, fmt, args);
  va_end(args);
  if (n > 0) j->length += (size_t)n;
  if (j->length > sizeof(j->text) - 1) j->length = sizeof(j->text) - 1;
}

static void pw_bench_json_key(pw_bench_json_t* j, const char* key) {
  pw_bench_json_append(j, "%s\"%s\":", j->first ? "" : ",", key);
  j->first = false;
}

void pw_bench_json_begin(pw_bench_json_t* j, const char* bench) {
  j->length = 0;
  j->text[0] = '\0';
  j->first = true;
  pw_bench_json_append(j, "{");
  pw_bench_json_str(j, "bench", bench);
}

void pw_bench_json_str(pw_bench_json_t* j, const char* key, const char* value) {
  pw_bench_json_key(j, key);
  pw_bench_json_append(j, "\"");
  for (const char* p = value; *p; ++p) {
    if (*p == '"' || *p == '\\') {
      pw_bench_json_append(j, "\\%c", *p);
    } else if ((unsigned char)*p < 0x20) {
      pw_bench_json_append(j, "\\u%04x", (unsigned)*p);
    } else {
      pw_bench_json_append(j, "%c", *p);
    }
  }
  pw_bench_json_append(j, "\"");
}

void pw_bench_json_int(pw_bench_json_t* j, const char* key, long long value) {
  pw_bench_json_key(j, key);
  pw_bench_json_append(j, "%lld", value);
}

void pw_bench_json_num(pw_bench_json_t* j, const char* key, double value) {
  pw_bench_json_key(j, key);
  if (isfinite(value)) {
    pw_bench_json_append(j, "%.4g", value);
  } else {
    pw_bench_json_append(j, "null");
  }
}

void pw_bench_json_null(pw_bench_json_t* j, const char* key) {
  pw_bench_json_key(j, key);
  pw_bench_json_append(j, "null");
}

void pw_bench_json_end(pw_bench_json_t* j) {
  pw_bench_json_append(j, "}");
  fprintf(stdout, "%s\n", j->text);
  fflush(stdout);
}

const char* pw_bench_opt_value(int argc, char** argv, const char* name) {
  size_t len = strlen(name);
  for (int i = 0; i < argc; ++i) {
    if (strncmp(argv[i], "--", 2) != 0 || strncmp(argv[i] + 2, name, len) != 0) continue;
    const char* rest = argv[i] + 2 + len;
    if (*rest == '=') return rest + 1;
    if (*rest == '\0') return i + 1 < argc ? argv[i + 1] : "";
  }
  return NULL;
}

long long pw_bench_opt_int(int argc, char** argv, const char* name,
                           long long fallback) {
  const char* v = pw_bench_opt_value(argc, argv, name);
  if (v == NULL) return fallback;
  char* end = NULL;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || x < 0) {
    fprintf(stderr, "pw-bench: --%s expects a non-negative integer, got '%s'\n", name, v);
    exit(2);
  }
  return x;
}

bool pw_bench_opt_flag(int argc, char** argv, const char* name) {
  size_t len = strlen(name);
  for (int i = 0; i < argc; ++i) {
    if (strncmp(argv[i], "--", 2) == 0 && strcmp(argv[i] + 2, name) == 0 && len) return true;
  }
  return false;
}
