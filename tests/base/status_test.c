#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "pathways/pathways.h"
#include "support/test_allocators.h"

TestSuite(status, .fini = pw_test_check_leaks);

Test(status, ok_is_null) {
  pw_status_t ok = pw_ok_status();
  cr_assert_null(ok);
  cr_assert(pw_status_is_ok(ok));
  cr_assert_eq(pw_status_code(ok), PW_STATUS_OK);
  cr_assert_str_eq(pw_status_message(ok), "");
  char buf[16];
  cr_assert_eq(pw_status_format(ok, buf, sizeof(buf)), 2);
  cr_assert_str_eq(buf, "OK");
  pw_status_free(ok);
  pw_status_ignore(ok);
}

Test(status, every_code_round_trips_with_its_name) {
  static const char* names[] = {
      "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
      "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
      "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  cr_assert_eq(sizeof(names) / sizeof(names[0]), PW_STATUS_CODE_COUNT);
  for (int code = 0; code < PW_STATUS_CODE_COUNT; ++code) {
    cr_assert_str_eq(pw_status_code_string((pw_status_code_t)code), names[code]);
  }
  for (int code = 1; code < PW_STATUS_CODE_COUNT; ++code) {
    pw_status_t s = pw_status_make((pw_status_code_t)code, "failure %d of %s", code, "x");
    cr_assert_not_null(s);
    cr_assert_eq(pw_status_code(s), (pw_status_code_t)code);
    char expected[64];
    snprintf(expected, sizeof(expected), "failure %d of x", code);
    cr_assert_str_eq(pw_status_message(s), expected);
    char formatted[128];
    char want[128];
    snprintf(want, sizeof(want), "%s: %s", names[code], expected);
    size_t n = pw_status_format(s, formatted, sizeof(formatted));
    cr_assert_eq(n, strlen(want));
    cr_assert_str_eq(formatted, want);
    pw_status_free(s);
  }
  cr_assert_str_eq(pw_status_code_string((pw_status_code_t)17), "UNKNOWN_CODE");
  cr_assert_str_eq(pw_status_code_string((pw_status_code_t)-1), "UNKNOWN_CODE");
}

Test(status, invalid_code_becomes_unknown_naming_the_value) {
  pw_status_t s = pw_status_make((pw_status_code_t)42, "boom");
  cr_assert_eq(pw_status_code(s), PW_STATUS_UNKNOWN);
  cr_assert(strstr(pw_status_message(s), "invalid code 42") != NULL);
  cr_assert(strstr(pw_status_message(s), "boom") != NULL);
  pw_status_free(s);
  s = pw_status_make(PW_STATUS_OK, "not an error");
  cr_assert_eq(pw_status_code(s), PW_STATUS_UNKNOWN);
  cr_assert(strstr(pw_status_message(s), "invalid code 0") != NULL);
  pw_status_free(s);
}

Test(status, format_truncates_like_snprintf) {
  pw_status_t s = pw_status_make(PW_STATUS_NOT_FOUND, "no executable named %s", "matmul");
  char small[10];
  size_t n = pw_status_format(s, small, sizeof(small));
  cr_assert_eq(n, strlen("NOT_FOUND: no executable named matmul"));
  cr_assert_str_eq(small, "NOT_FOUND");
  cr_assert_eq(pw_status_format(s, NULL, 0), n);
  pw_status_free(s);
}

Test(status, annotate_chains_context_outermost_first) {
  pw_status_t s = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                                 "refers to buffer %d, which does not exist", 9);
  s = pw_status_annotate(s, "nodes[%d].inputs[%d]", 3, 1);
  s = pw_status_annotate(s, "while decoding graph");
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  cr_assert_str_eq(pw_status_message(s),
                   "while decoding graph: nodes[3].inputs[1]: refers to buffer "
                   "9, which does not exist");
  pw_status_free(s);
  cr_assert_null(pw_status_annotate(NULL, "context %d", 1));
}

Test(status, long_messages_are_kept_whole) {
  char big[5000];
  memset(big, 'a', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  pw_status_t s = pw_status_make(PW_STATUS_INTERNAL, "%s", big);
  cr_assert_eq(strlen(pw_status_message(s)), sizeof(big) - 1);
  s = pw_status_annotate(s, "ctx");
  cr_assert_eq(strlen(pw_status_message(s)), sizeof(big) - 1 + 5);
  pw_status_free(s);
}

Test(status, clone_is_independent) {
  pw_status_t a = pw_status_make(PW_STATUS_DATA_LOSS, "shard %d corrupt", 7);
  pw_status_t b = pw_status_clone(a);
  cr_assert_neq(a, b);
  pw_status_free(a);
  cr_assert_eq(pw_status_code(b), PW_STATUS_DATA_LOSS);
  cr_assert_str_eq(pw_status_message(b), "shard 7 corrupt");
  pw_status_free(b);
  cr_assert_null(pw_status_clone(NULL));
}

static pw_status_t fails_with(pw_status_code_t code) {
  if (code == PW_STATUS_OK) return NULL;
  return pw_status_make(code, "inner");
}

static pw_status_t propagate(pw_status_code_t code, int* reached_end) {
  PW_RETURN_IF_ERROR(fails_with(code));
  *reached_end = 1;
  return NULL;
}

static pw_status_t propagate_ctx(pw_status_code_t code) {
  PW_RETURN_IF_ERROR_CTX(fails_with(code), "step %d", 2);
  return NULL;
}

Test(status, return_if_error_propagates_and_annotates) {
  int reached = 0;
  cr_assert_null(propagate(PW_STATUS_OK, &reached));
  cr_assert_eq(reached, 1);
  reached = 0;
  pw_status_t s = propagate(PW_STATUS_ABORTED, &reached);
  cr_assert_eq(reached, 0);
  cr_assert_eq(pw_status_code(s), PW_STATUS_ABORTED);
  pw_status_free(s);
  s = propagate_ctx(PW_STATUS_CANCELLED);
  cr_assert_str_eq(pw_status_message(s), "step 2: inner");
  pw_status_free(s);
  cr_assert_null(propagate_ctx(PW_STATUS_OK));
}
