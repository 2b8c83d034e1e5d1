/* pw-bench suites that drive libpathways: PW_BENCH_TRY fails the calling
 * function (returns -1) when a call returns an error status, after
 * printing "pw-bench SUITE: WHAT: status" on stderr (the status freed).
 * Apart from bench_util.h, which the peer drivers share without the
 * library. */
#ifndef PW_BENCH_TRY_H_
#define PW_BENCH_TRY_H_

#include <stdbool.h>
#include <stdio.h>

#include "pathways/status.h"

static inline bool pw_bench_failed(const char* suite, const char* what, pw_status_t status) {
  if (status == NULL) return false;
  char m[512];
  pw_status_format(status, m, sizeof(m));
  pw_status_free(status);
  fprintf(stderr, "pw-bench %s: %s: %s\n", suite, what, m);
  return true;
}

#define PW_BENCH_TRY(suite, expr, what)                      \
  do {                                                       \
    if (pw_bench_failed((suite), (what), (expr))) return -1; \
  } while (0)

#endif /* PW_BENCH_TRY_H_ */
