#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pathways/pathways.h"
#include "support/test_allocators.h"

TestSuite(allocator, .fini = pw_test_check_leaks);

Test(allocator, system_allocates_aligned_zeroed_memory) {
  pw_allocator_t a = pw_allocator_system();
  cr_assert(pw_allocator_is_valid(a));
  size_t alignments[] = {0, 1, 8, 16, 64, 256, 4096};
  for (size_t i = 0; i < sizeof(alignments) / sizeof(alignments[0]); ++i) {
    void* p = NULL;
    pw_status_t s = pw_allocator_calloc(a, 100, alignments[i], &p);
    cr_assert_null(s, "alignment %zu", alignments[i]);
    size_t want = alignments[i] ? alignments[i] : 16;
    cr_assert_eq((uintptr_t)p % want, 0);
    unsigned char zero[100] = {0};
    cr_assert_eq(memcmp(p, zero, sizeof(zero)), 0);
    pw_allocator_free(a, p, 100);
  }
  pw_allocator_free(a, NULL, 0);
}

Test(allocator, bad_requests_name_the_problem) {
  pw_allocator_t a = pw_allocator_system();
  void* p = (void*)1;
  pw_status_t s = pw_allocator_malloc(a, 0, 0, &p);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  cr_assert_null(p);
  cr_assert(strstr(pw_status_message(s), "0 bytes"));
  pw_status_free(s);
  s = pw_allocator_malloc(a, 8, 3, &p);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(pw_status_message(s), "alignment 3"));
  pw_status_free(s);
  s = pw_allocator_calloc_array(a, SIZE_MAX / 2, 4, 0, &p);
  cr_assert_eq(pw_status_code(s), PW_STATUS_OUT_OF_RANGE);
  cr_assert(strstr(pw_status_message(s), "overflows"));
  pw_status_free(s);
  pw_allocator_t empty = {0};
  s = pw_allocator_malloc(empty, 8, 0, &p);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  s = pw_allocator_malloc(a, 8, 0, NULL);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
}

Test(allocator, counting_allocator_tracks_live_and_peak) {
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_allocator_t a = pw_test_allocator(&t);
  void* p1 = NULL;
  void* p2 = NULL;
  cr_assert_null(pw_allocator_malloc(a, 100, 0, &p1));
  cr_assert_null(pw_allocator_malloc(a, 50, 64, &p2));
  cr_assert_eq((uintptr_t)p2 % 64, 0);
  cr_assert_eq(pw_test_allocator_live(&t), 2);
  cr_assert_eq(atomic_load(&t.live_bytes), 150);
  pw_allocator_free(a, p1, 100);
  cr_assert_eq(pw_test_allocator_live(&t), 1);
  cr_assert_eq(atomic_load(&t.peak_bytes), 150);
  pw_allocator_free(a, p2, 49); /* wrong size: detected */
  cr_assert_eq(atomic_load(&t.size_mismatches), 1);
  cr_assert_eq(pw_test_allocator_live(&t), 0);
}

Test(allocator, failing_allocator_fails_exactly_the_nth) {
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  t.fail_at = 2;
  pw_allocator_t a = pw_test_allocator(&t);
  void* p[3] = {0};
  cr_assert_null(pw_allocator_malloc(a, 8, 0, &p[0]));
  pw_status_t s = pw_allocator_malloc(a, 8, 0, &p[1]);
  cr_assert_eq(pw_status_code(s), PW_STATUS_RESOURCE_EXHAUSTED);
  cr_assert(strstr(pw_status_message(s), "8 bytes"));
  cr_assert_null(p[1]);
  pw_status_free(s);
  cr_assert_null(pw_allocator_malloc(a, 8, 0, &p[2]));
  pw_allocator_free(a, p[0], 8);
  pw_allocator_free(a, p[2], 8);
  cr_assert_eq(pw_test_allocator_live(&t), 0);
}

/* A body that allocates three blocks and frees them, failing cleanly. */
static bool three_blocks(pw_allocator_t a, bool expect_failure, void* user) {
  (void)user;
  void* blocks[3] = {0};
  pw_status_t s = NULL;
  for (int i = 0; i < 3 && s == NULL; ++i) {
    s = pw_allocator_malloc(a, 16 + (size_t)i, 0, &blocks[i]);
  }
  for (int i = 0; i < 3; ++i) pw_allocator_free(a, blocks[i], 16 + (size_t)i);
  bool ok = expect_failure ? pw_status_code(s) == PW_STATUS_RESOURCE_EXHAUSTED : s == NULL;
  pw_status_free(s);
  return ok;
}

static bool leaky(pw_allocator_t a, bool expect_failure, void* user) {
  (void)expect_failure;
  void** keep = user;
  pw_status_t s = pw_allocator_malloc(a, 8, 0, keep);
  pw_status_free(s);
  return true;
}

Test(allocator, sweep_visits_every_failure_point_and_catches_leaks) {
  char why[256] = "";
  cr_assert_eq(pw_test_allocator_sweep(three_blocks, NULL, why), 3, "%s", why);
  void* kept = NULL;
  cr_assert_eq(pw_test_allocator_sweep(leaky, &kept, why), -1);
  cr_assert(strstr(why, "leaked"), "%s", why);
  free((unsigned char*)kept - 16); /* the test allocator's header offset */
}
