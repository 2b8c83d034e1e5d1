/* The CPU backend's cache of freed device blocks: reuse, the fit rule, the
 * byte budget and eviction, capacity accounting, off, and that destroy
 * frees every kept block. The budget is set explicitly: the default is off
 * in AddressSanitizer builds. */
#include <criterion/criterion.h>
#include <string.h>

#include "cpu_test_support.h"
#include "pathways/backends/cpu.h"
#include "support/test_allocators.h"

TestSuite(cpu_block_cache, .fini = pw_test_check_leaks);

#define KIB ((size_t)1 << 10)

static pw_backend_t make(pw_test_allocator_t* counting, uint64_t budget) {
  pw_test_allocator_init(counting);
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.allocator = pw_test_allocator(counting);
  o.device_count = 2;
  o.worker_count = 1;
  o.device_memory_bytes = 64 << 20;
  o.block_cache_bytes = budget;
  pw_backend_t b;
  pw_status_t s = pw_cpu_backend_create(&o, &b);
  cr_assert_null(s, "%s", s ? pw_status_message(s) : "");
  return b;
}

static pw_cpu_block_cache_stats_t stats(pw_backend_t b) {
  pw_cpu_block_cache_stats_t st = {.struct_size = sizeof(st)};
  pw_status_t s = pw_cpu_backend_block_cache_stats(b, &st);
  cr_assert_null(s, "%s", s ? pw_status_message(s) : "");
  return st;
}

static pw_backend_memory_t alloc(pw_backend_t b, uint32_t device, size_t size) {
  pw_backend_memory_t m = NULL;
  pw_status_t s = b.vtable->allocate(b.self, device, size, &m);
  cr_assert_null(s, "%s", s ? pw_status_message(s) : "");
  return m;
}

Test(cpu_block_cache, a_freed_block_is_reused_across_devices) {
  pw_test_allocator_t counting;
  pw_backend_t b = make(&counting, 8 << 20);
  const pw_backend_vtable_t* vt = b.vtable;
  pw_backend_memory_t m = alloc(b, 0, 1 << 20);
  unsigned char* first = vt->host_pointer(b.self, 0, m);
  vt->deallocate(b.self, 0, m);
  cr_assert_eq(stats(b).cached_blocks, 1);
  size_t live = pw_test_allocator_live(&counting);
  /* Same size on the other device: the same pages. */
  pw_backend_memory_t n = alloc(b, 1, 1 << 20);
  cr_assert_eq(vt->host_pointer(b.self, 1, n), first);
  cr_assert_eq(pw_test_allocator_live(&counting), live, "served without the allocator");
  pw_cpu_block_cache_stats_t st = stats(b);
  cr_assert_eq(st.hits, 1);
  cr_assert_eq(st.cached_blocks, 0);
  /* The memory works and is the requested size. */
  unsigned char data[64];
  memset(data, 7, sizeof(data));
  cr_assert_null(vt->copy_to_device(b.self, 1, n, (1 << 20) - 64, data, 64));
  pw_status_t past = vt->copy_to_device(b.self, 1, n, (1 << 20) - 63, data, 64);
  cr_assert_not_null(past, "a block taken from the cache has the requested size");
  cr_assert_eq(pw_status_code(past), PW_STATUS_OUT_OF_RANGE);
  pw_status_free(past);
  vt->deallocate(b.self, 1, n);
  cpu_destroy(b);
  cr_assert_eq(pw_test_allocator_live(&counting), 0, "destroy frees the kept blocks");
}

Test(cpu_block_cache, fit_rule_small_blocks_and_capacity) {
  pw_test_allocator_t counting;
  pw_backend_t b = make(&counting, 8 << 20);
  const pw_backend_vtable_t* vt = b.vtable;
  pw_backend_memory_t m = alloc(b, 0, 1 << 20);
  vt->deallocate(b.self, 0, m);
  /* More than a quarter smaller: not served from the 1 MiB block. */
  pw_backend_memory_t small = alloc(b, 0, 512 * KIB);
  cr_assert_eq(stats(b).hits, 0);
  cr_assert_eq(stats(b).cached_blocks, 1);
  /* Within a quarter: served. */
  pw_backend_memory_t close = alloc(b, 0, 900 * KIB);
  cr_assert_eq(stats(b).hits, 1);
  /* Below 64 KiB nothing is kept. */
  pw_backend_memory_t tiny = alloc(b, 0, 1000);
  vt->deallocate(b.self, 0, tiny);
  cr_assert_eq(stats(b).cached_blocks, 0);
  /* Kept blocks count toward no device's capacity: the whole device is
   * allocatable while 1.4 MiB sit in the cache. */
  vt->deallocate(b.self, 0, small);
  vt->deallocate(b.self, 0, close);
  cr_assert_eq(stats(b).cached_blocks, 2);
  pw_backend_memory_t whole = alloc(b, 0, 64 << 20);
  vt->deallocate(b.self, 0, whole);
  cpu_destroy(b);
  cr_assert_eq(pw_test_allocator_live(&counting), 0);
}

Test(cpu_block_cache, the_budget_evicts_the_oldest_block) {
  pw_test_allocator_t counting;
  pw_backend_t b = make(&counting, 3 << 20);
  const pw_backend_vtable_t* vt = b.vtable;
  pw_backend_memory_t m[4];
  for (int i = 0; i < 4; ++i) m[i] = alloc(b, 0, 1 << 20);
  unsigned char* oldest = vt->host_pointer(b.self, 0, m[0]);
  for (int i = 0; i < 4; ++i) vt->deallocate(b.self, 0, m[i]);
  pw_cpu_block_cache_stats_t st = stats(b);
  cr_assert_leq(st.cached_bytes, 3u << 20);
  cr_assert_eq(st.cached_blocks, 2, "three 1 MiB + header blocks do not fit 3 MiB");
  cr_assert_eq(st.evictions, 2);
  /* The survivors are the newest two: the first block's pages are gone. */
  pw_backend_memory_t a = alloc(b, 0, 1 << 20), c = alloc(b, 0, 1 << 20);
  cr_assert_neq(vt->host_pointer(b.self, 0, a), oldest);
  cr_assert_neq(vt->host_pointer(b.self, 0, c), oldest);
  cr_assert_eq(stats(b).hits, 2);
  vt->deallocate(b.self, 0, a);
  vt->deallocate(b.self, 0, c);
  /* A block larger than the whole budget is never kept, and evicts
   * nothing. */
  uint64_t kept = stats(b).cached_bytes;
  pw_backend_memory_t huge = alloc(b, 1, 4 << 20);
  vt->deallocate(b.self, 1, huge);
  cr_assert_eq(stats(b).cached_bytes, kept);
  cr_assert_eq(stats(b).cached_blocks, 2, "the 4 MiB block went back to the allocator");
  cr_assert_eq(stats(b).evictions, 2);
  cpu_destroy(b);
  cr_assert_eq(pw_test_allocator_live(&counting), 0);
}

Test(cpu_block_cache, off_and_bad_calls) {
  pw_test_allocator_t counting;
  pw_backend_t b = make(&counting, PW_CPU_BLOCK_CACHE_OFF);
  const pw_backend_vtable_t* vt = b.vtable;
  size_t before = pw_test_allocator_live(&counting);
  pw_backend_memory_t m = alloc(b, 0, 1 << 20);
  vt->deallocate(b.self, 0, m);
  cr_assert_eq(pw_test_allocator_live(&counting), before, "freed at once when off");
  pw_cpu_block_cache_stats_t st = stats(b);
  cr_assert_eq(st.budget_bytes, 0);
  cr_assert_eq(st.cached_blocks, 0);
  pw_cpu_block_cache_stats_t small = {.struct_size = 4};
  pw_status_t s = pw_cpu_backend_block_cache_stats(b, &small);
  cr_assert_not_null(s);
  cr_assert(strstr(pw_status_message(s), "struct_size") != NULL);
  pw_status_free(s);
  pw_backend_t none = {0};
  s = pw_cpu_backend_block_cache_stats(none, &st);
  cr_assert_not_null(s);
  cr_assert(strstr(pw_status_message(s), "not a CPU backend") != NULL);
  pw_status_free(s);
  cpu_destroy(b);
  cr_assert_eq(pw_test_allocator_live(&counting), 0);
}
