/* Criterion assertions on statuses, shared by the runtime and scheduler
 * suites. OK(expr): |expr| returns OK (else the test fails with the
 * status). FAILS(expr, code, needle): |expr| fails with |code| and a
 * message containing |needle|. */
#ifndef PW_TESTS_RUNTIME_CHECKS_H_
#define PW_TESTS_RUNTIME_CHECKS_H_

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "pathways/status.h"

#define OK(expr)                                                         \
  do {                                                                   \
    pw_status_t s_ = (expr);                                             \
    char m_[512];                                                        \
    pw_status_format(s_, m_, sizeof(m_));                                \
    pw_status_free(s_);                                                  \
    cr_assert_null(s_, "%s failed: %s", #expr, m_);                      \
  } while (0)

#define FAILS(expr, code, needle)                                             \
  do {                                                                        \
    pw_status_t s_ = (expr);                                                  \
    cr_assert_not_null(s_, "%s unexpectedly succeeded", #expr);               \
    cr_assert_eq(pw_status_code(s_), (code), "%s: got %s: %s", #expr,         \
                 pw_status_code_string(pw_status_code(s_)),                   \
                 pw_status_message(s_));                                      \
    cr_assert(strstr(pw_status_message(s_), (needle)) != NULL,                \
              "%s: message \"%s\" lacks \"%s\"", #expr, pw_status_message(s_), \
              (needle));                                                      \
    pw_status_free(s_);                                                       \
  } while (0)

/* Ends one path of a failing-allocator sweep (pw_test_allocator_sweep):
 * true when |s| is what the path should end with: RESOURCE_EXHAUSTED
 * under an injected failure, else OK with |results_ok|. Says why not on
 * stderr, naming |path|; frees |s|. */
static inline bool pw_sweep_path_end(pw_status_t s, bool expect_failure, bool results_ok,
                                     const char* path) {
  bool ok = expect_failure ? pw_status_code(s) == PW_STATUS_RESOURCE_EXHAUSTED
                           : (s == NULL && results_ok);
  if (!ok) {
    char m[256];
    pw_status_format(s, m, sizeof(m));
    fprintf(stderr, "%s: %s%s\n", path, m, s == NULL ? " (wrong results)" : "");
  }
  pw_status_free(s);
  return ok;
}

#endif /* PW_TESTS_RUNTIME_CHECKS_H_ */
