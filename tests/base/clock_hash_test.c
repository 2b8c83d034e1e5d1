#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "base/atomics.h"
#include "base/hash.h"
#include "pathways/pathways.h"
#include "support/test_allocators.h"

TestSuite(clock, .fini = pw_test_check_leaks);
TestSuite(hash, .fini = pw_test_check_leaks);
TestSuite(atomics, .fini = pw_test_check_leaks);
TestSuite(version, .fini = pw_test_check_leaks);

Test(clock, monotonic_and_deadlines_saturate) {
  pw_time_t a = pw_clock_now();
  pw_time_t b = pw_clock_now();
  cr_assert_geq(b, a);
  cr_assert_gt(a, 0);
  cr_assert_eq(pw_deadline_from_timeout(-1), PW_IMMEDIATE_PAST);
  cr_assert_eq(pw_deadline_from_timeout(INT64_MAX), PW_INFINITE_FUTURE);
  pw_time_t d = pw_deadline_from_timeout(1000000000);
  cr_assert_geq(d, b + 1000000000);
  cr_assert_eq(pw_deadline_remaining(PW_IMMEDIATE_PAST), 0);
  cr_assert_eq(pw_deadline_remaining(PW_INFINITE_FUTURE), INT64_MAX);
  cr_assert_leq(pw_deadline_remaining(d), 1000000000);
  cr_assert_gt(pw_deadline_remaining(d), 0);
}

Test(hash, xxh3_known_values_and_streaming_matches_one_shot) {
  /* XXH3_64bits("") with seed 0 is 0x2D06800538D394C2 (xxHash test vector). */
  cr_assert_eq(pw__hash64("", 0, 0), 0x2D06800538D394C2ULL);
  /* XXH64("") with seed 0 is 0xEF46DB3751D8E999. */
  cr_assert_eq(pw__xxh64("", 0, 0), 0xEF46DB3751D8E999ULL);
  const char text[] = "libpathways hashes programs and graphs";
  pw_hash128_t one = pw__hash128(text, sizeof(text) - 1, 7);
  pw_hasher_t h;
  pw__hasher_init(&h, 7);
  pw__hasher_update(&h, text, 10);
  pw__hasher_update(&h, text + 10, sizeof(text) - 1 - 10);
  pw_hash128_t streamed = pw__hasher_final(&h);
  cr_assert(pw__hash128_equal(one, streamed));
  pw_hash128_t other = pw__hash128(text, sizeof(text) - 1, 8);
  cr_assert_not(pw__hash128_equal(one, other));
  char hex[33];
  pw__hash128_to_hex(one, hex);
  cr_assert_eq(strlen(hex), 32);
  pw__hasher_init(&h, 0);
  pw__hasher_update_u64(&h, 0x0102030405060708ULL);
  unsigned char le[8] = {8, 7, 6, 5, 4, 3, 2, 1};
  cr_assert(pw__hash128_equal(pw__hasher_final(&h), pw__hash128(le, 8, 0)));
}

Test(atomics, operations_have_their_documented_results) {
  pw_atomic_u32_t a;
  pw_atomic_init_u32(&a, 5);
  cr_assert_eq(pw_atomic_fetch_add_u32(&a, 3), 5);
  cr_assert_eq(pw_atomic_fetch_sub_u32(&a, 2), 8);
  cr_assert_eq(pw_atomic_load_u32_acquire(&a), 6);
  cr_assert_eq(pw_atomic_fetch_or_u32(&a, 0x10), 6);
  cr_assert_eq(pw_atomic_exchange_u32(&a, 1), 0x16);
  uint32_t expected = 2;
  cr_assert_not(pw_atomic_cas_u32(&a, &expected, 9));
  cr_assert_eq(expected, 1);
  cr_assert(pw_atomic_cas_u32(&a, &expected, 9));
  cr_assert_eq(pw_atomic_load_u32_relaxed(&a), 9);

  pw_atomic_u64_t b;
  pw_atomic_init_u64(&b, UINT64_C(1) << 40);
  cr_assert_eq(pw_atomic_fetch_add_u64(&b, 1), UINT64_C(1) << 40);
  cr_assert_eq(pw_atomic_fetch_sub_u64(&b, 2), (UINT64_C(1) << 40) + 1);
  pw_atomic_store_u64_release(&b, 3);
  cr_assert_eq(pw_atomic_exchange_u64(&b, 4), 3);
  uint64_t e64 = 4;
  cr_assert(pw_atomic_cas_u64(&b, &e64, 10));
  cr_assert_eq(pw_atomic_load_u64_acquire(&b), 10);

  int x = 0, y = 0;
  pw_atomic_ptr_t p;
  pw_atomic_init_ptr(&p, &x);
  cr_assert_eq(pw_atomic_exchange_ptr(&p, &y), &x);
  void* ep = &x;
  cr_assert_not(pw_atomic_cas_ptr(&p, &ep, NULL));
  cr_assert_eq(ep, &y);
  cr_assert(pw_atomic_cas_ptr(&p, &ep, NULL));
  cr_assert_null(pw_atomic_load_ptr_acquire(&p));
}

Test(version, linked_library_matches_headers) {
  cr_assert_str_eq(pw_version_string(), PW_VERSION_STRING);
  cr_assert_eq(pw_version_number(), PW_VERSION_NUMBER);
  char expect[32];
  snprintf(expect, sizeof(expect), "%d.%d.%d", PW_VERSION_MAJOR, PW_VERSION_MINOR, PW_VERSION_PATCH);
  cr_assert_str_eq(pw_version_string(), expect);
}
