/* Helpers the plugin suites share: a scratch directory per test (Criterion
 * forks each test) and status assertions on code and message substrings. */
#ifndef PW_TESTS_PLUGIN_TEST_UTIL_H_
#define PW_TESTS_PLUGIN_TEST_UTIL_H_

#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pathways/pathways.h"

void pw_test_check_leaks(void);

static inline int pw_pt_remove_one(const char* path, const struct stat* st, int flag,
                                   struct FTW* ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

/* Makes /tmp/pw-plugin-XXXXXX into |buffer| (at least 64 bytes). */
static inline void pw_pt_tmpdir(char* buffer) {
  strcpy(buffer, "/tmp/pw-plugin-XXXXXX");
  cr_assert_not_null(mkdtemp(buffer));
}

static inline void pw_pt_rmtree(const char* dir) {
  nftw(dir, pw_pt_remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Asserts |s| has |code| and its message every one of the NULL-terminated
 * substrings; frees it. */
static inline void pw_pt_expect_impl(pw_status_t s, pw_status_code_t code,
                                     const char* const* parts) {
  cr_assert_not_null(s, "expected %s, got OK", pw_status_code_string(code));
  const char* msg = pw_status_message(s);
  cr_assert_eq(pw_status_code(s), code, "expected %s, got %s: %s", pw_status_code_string(code),
               pw_status_code_string(pw_status_code(s)), msg);
  for (size_t i = 0; parts[i] != NULL; ++i) {
    cr_assert(strstr(msg, parts[i]) != NULL, "message '%s' lacks '%s'", msg, parts[i]);
  }
  pw_status_free(s);
}
#define PW_PT_EXPECT(status, code, ...) \
  pw_pt_expect_impl((status), (code), (const char* const[]){__VA_ARGS__, NULL})

#define PW_PT_OK(expr)                                                                    \
  do {                                                                                    \
    pw_status_t pw_pt_s = (expr);                                                         \
    cr_assert_null(pw_pt_s, "%s: %s", #expr, pw_status_message(pw_pt_s));               \
  } while (0)

#endif /* PW_TESTS_PLUGIN_TEST_UTIL_H_ */
