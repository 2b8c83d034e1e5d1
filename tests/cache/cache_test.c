#define _POSIX_C_SOURCE 200809L
/* The compilation cache on its own: memory tier (hits, LRU by bytes,
 * oversized values, errors, invalidation, stats), the persistent tier over
 * a dir store (hits across cache instances, every kind of bad entry is a
 * logged miss that gets rewritten), broken store plugs, compile keys and
 * the framed entry format, and a failing-allocator sweep over lookups. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache_internal.h"
#include "cache/cache_util.h"
#include "runtime/checks.h"
#include "support/test_allocators.h"

TestSuite(cache, .fini = pw_test_check_leaks);

typedef struct fill_t {
  int calls;
  size_t size;
  uint64_t seed;
  pw_status_code_t fail; /* OK = succeed */
} fill_t;

static pw_status_t fill_fn(void* user, pw_allocator_t a, void** out, size_t* out_size) {
  fill_t* f = user;
  f->calls++;
  if (f->fail != PW_STATUS_OK) return pw_status_make(f->fail, "fill failed on purpose");
  if (f->size == 0) return NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(a, f->size, 0, out));
  cu_fill_value(*out, f->size, f->seed);
  *out_size = f->size;
  return NULL;
}

static pw_cache_stats_t stats(pw_cache_t* c) {
  pw_cache_stats_t s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  OK(pw_cache_stats(c, &s));
  return s;
}

/* Looks |key| up with |f| and checks the value matches |f|'s. */
static pw_cache_origin_t lookup(pw_cache_t* c, uint64_t key, fill_t* f) {
  pw_cache_key_t k = cu_key(key);
  pw_cache_entry_t* e = NULL;
  pw_cache_origin_t origin;
  OK(pw_cache_lookup(c, &k, fill_fn, f, &e, &origin));
  size_t size;
  const uint8_t* data = pw_cache_entry_data(e, &size);
  cr_assert_eq(size, f->size);
  uint8_t* want = malloc(size + 1);
  cu_fill_value(want, size, f->seed);
  cr_assert(size == 0 || memcmp(data, want, size) == 0, "wrong value for key %llu",
            (unsigned long long)key);
  free(want);
  pw_cache_entry_release(e);
  return origin;
}

Test(cache, memory_tier_hits_and_counts) {
  pw_cache_t* c = cu_cache(NULL, 0, (pw_logger_t){0});
  fill_t f = {0, 1000, 7, PW_STATUS_OK};
  cr_assert_eq(lookup(c, 1, &f), PW_CACHE_FROM_FILL);
  cr_assert_eq(lookup(c, 1, &f), PW_CACHE_FROM_MEMORY);
  cr_assert_eq(lookup(c, 1, &f), PW_CACHE_FROM_MEMORY);
  cr_assert_eq(f.calls, 1);
  fill_t empty = {0, 0, 0, PW_STATUS_OK};
  cr_assert_eq(lookup(c, 2, &empty), PW_CACHE_FROM_FILL);
  cr_assert_eq(lookup(c, 2, &empty), PW_CACHE_FROM_MEMORY);
  pw_cache_stats_t s = stats(c);
  cr_assert_eq(s.lookups, 5);
  cr_assert_eq(s.memory_hits, 3);
  cr_assert_eq(s.misses, 2);
  cr_assert_eq(s.memory_entries, 2);
  cr_assert_eq(s.memory_bytes, 1000);
  cr_assert_eq(s.store_writes, 0);
  /* A caller built against a later, larger struct gets this version's
   * part, and struct_size says how much that is. */
  struct {
    pw_cache_stats_t s;
    uint64_t later[2];
  } big;
  memset(&big, 0xAB, sizeof(big));
  big.s.struct_size = sizeof(big);
  OK(pw_cache_stats(c, &big.s));
  cr_assert_eq(big.s.struct_size, sizeof(pw_cache_stats_t));
  cr_assert_eq(big.s.memory_hits, 3);
  cr_assert_eq(big.later[0], 0xABABABABABABABABull);
  pw_cache_stats_t small;
  small.struct_size = 4;
  FAILS(pw_cache_stats(c, &small), PW_STATUS_INVALID_ARGUMENT, "smaller than v1");
  pw_cache_release(c);
}

Test(cache, memory_tier_evicts_least_recently_used_by_bytes) {
  pw_cache_t* c = cu_cache(NULL, 3000, (pw_logger_t){0});
  fill_t f[5];
  for (int i = 0; i < 5; ++i) f[i] = (fill_t){0, 1000, (uint64_t)i, PW_STATUS_OK};
  for (int i = 0; i < 3; ++i) lookup(c, (uint64_t)i, &f[i]);
  lookup(c, 0, &f[0]);       /* 0 is now the most recent; 1 the least */
  lookup(c, 3, &f[3]);       /* evicts 1 */
  cr_assert_eq(lookup(c, 0, &f[0]), PW_CACHE_FROM_MEMORY);
  cr_assert_eq(lookup(c, 2, &f[2]), PW_CACHE_FROM_MEMORY);
  cr_assert_eq(lookup(c, 3, &f[3]), PW_CACHE_FROM_MEMORY);
  cr_assert_eq(lookup(c, 1, &f[1]), PW_CACHE_FROM_FILL);
  pw_cache_stats_t s = stats(c);
  cr_assert_eq(s.memory_evictions, 2);
  cr_assert_eq(s.memory_bytes, 3000);
  /* A value larger than the whole tier is returned but not kept. */
  fill_t big = {0, 5000, 9, PW_STATUS_OK};
  cr_assert_eq(lookup(c, 9, &big), PW_CACHE_FROM_FILL);
  cr_assert_eq(lookup(c, 9, &big), PW_CACHE_FROM_FILL);
  cr_assert_eq(stats(c).memory_bytes, 3000);
  pw_cache_release(c);
}

Test(cache, fill_errors_are_returned_and_not_kept) {
  pw_cache_t* c = cu_cache(NULL, 0, (pw_logger_t){0});
  fill_t f = {0, 100, 1, PW_STATUS_INVALID_ARGUMENT};
  pw_cache_key_t k = cu_key(1);
  pw_cache_entry_t* e = (pw_cache_entry_t*)&f;
  FAILS(pw_cache_lookup(c, &k, fill_fn, &f, &e, NULL), PW_STATUS_INVALID_ARGUMENT,
        "fill failed on purpose");
  cr_assert_null(e);
  f.fail = PW_STATUS_OK;
  cr_assert_eq(lookup(c, 1, &f), PW_CACHE_FROM_FILL);
  cr_assert_eq(f.calls, 2);
  cr_assert_eq(stats(c).fill_errors, 1);
  FAILS(pw_cache_lookup(NULL, &k, fill_fn, &f, &e, NULL), PW_STATUS_INVALID_ARGUMENT, "NULL");
  pw_cache_release(c);
}

Test(cache, entries_outlive_the_cache_and_invalidation) {
  char dir[256];
  cr_assert(cu_make_dir(dir, sizeof(dir)));
  pw_cache_t* c = cu_cache(dir, 0, (pw_logger_t){0});
  fill_t f = {0, 4096, 3, PW_STATUS_OK};
  pw_cache_key_t k = cu_key(5);
  pw_cache_entry_t* e;
  OK(pw_cache_lookup(c, &k, fill_fn, &f, &e, NULL));
  cr_assert_eq(cu_count_files(dir, ""), 1);
  OK(pw_cache_invalidate(c, &k));
  cr_assert_eq(cu_count_files(dir, ""), 0);
  OK(pw_cache_invalidate(c, &k)); /* absent: fine */
  cr_assert_eq(lookup(c, 5, &f), PW_CACHE_FROM_FILL);
  pw_cache_release(c);
  size_t size;
  const uint8_t* data = pw_cache_entry_data(e, &size);
  cr_assert_eq(size, 4096);
  uint8_t want[4096];
  cu_fill_value(want, sizeof(want), 3);
  cr_assert(memcmp(data, want, size) == 0);
  pw_cache_entry_release(e);
  cu_remove_dir(dir);
}

Test(cache, persistent_tier_serves_new_cache_instances) {
  char dir[256];
  cr_assert(cu_make_dir(dir, sizeof(dir)));
  fill_t f = {0, 200000, 11, PW_STATUS_OK};
  pw_cache_t* c = cu_cache(dir, 0, (pw_logger_t){0});
  cr_assert_eq(lookup(c, 1, &f), PW_CACHE_FROM_FILL);
  pw_cache_stats_t s = stats(c);
  cr_assert_eq(s.store_writes, 1);
  cr_assert_eq(s.store_raw_bytes_written, 200000);
  cr_assert_lt(s.store_bytes_written, 200000 / 2, "zstd kept %llu of 200000 bytes",
               (unsigned long long)s.store_bytes_written);
  pw_cache_release(c);
  c = cu_cache(dir, 0, (pw_logger_t){0});
  cr_assert_eq(lookup(c, 1, &f), PW_CACHE_FROM_STORE);
  cr_assert_eq(lookup(c, 1, &f), PW_CACHE_FROM_MEMORY);
  cr_assert_eq(f.calls, 1);
  s = stats(c);
  cr_assert_eq(s.store_hits, 1);
  cr_assert_eq(s.misses, 0);
  cr_assert_eq(s.store_writes, 0);
  pw_cache_release(c);
  cu_remove_dir(dir);
}

/* Rewrites the file of key 1 in |dir| with |mutate|, then checks that a
 * new cache treats it as a logged miss and rewrites it. */
typedef void (*mutate_fn_t)(const char* path, const char* other_path);

static void flip_payload(const char* path, const char* other) {
  (void)other;
  FILE* f = fopen(path, "r+b");
  fseek(f, 100, SEEK_SET);
  int c = fgetc(f);
  fseek(f, 100, SEEK_SET);
  fputc(c ^ 0x40, f);
  fclose(f);
}
static void truncate_half(const char* path, const char* other) {
  (void)other;
  struct stat st;
  stat(path, &st);
  cr_assert_eq(truncate(path, st.st_size / 2), 0);
}
static void make_empty(const char* path, const char* other) {
  (void)other;
  cr_assert_eq(truncate(path, 0), 0);
}
static void garbage(const char* path, const char* other) {
  (void)other;
  FILE* f = fopen(path, "wb");
  for (int i = 0; i < 10; ++i) fputs("#!/bin/sh\necho this is not a cache entry\n", f);
  fclose(f);
}
static void foreign(const char* path, const char* other) {
  cr_assert_eq(rename(other, path), 0);
}
static void other_version(const char* path, const char* other) {
  (void)other;
  FILE* f = fopen(path, "r+b");
  fseek(f, 8, SEEK_SET);
  fputc(2, f);
  fclose(f);
}

Test(cache, bad_entries_are_logged_misses_and_get_rewritten) {
  struct {
    mutate_fn_t fn;
    const char* why;
  } cases[] = {
      {flip_payload, "payload checksum mismatch"},
      {truncate_half, "truncated"},
      {make_empty, "shorter than its 72-byte header"},
      {garbage, "bad magic"},
      {foreign, "a foreign entry"},
      {other_version, "entry format version 2"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    char dir[256];
    cr_assert(cu_make_dir(dir, sizeof(dir)));
    fill_t f = {0, 50000, 21, PW_STATUS_OK};
    fill_t g = {0, 50000, 22, PW_STATUS_OK};
    pw_cache_t* c = cu_cache(dir, 0, (pw_logger_t){0});
    lookup(c, 1, &f);
    lookup(c, 2, &g);
    pw_cache_release(c);
    char hex1[33], hex2[33], path1[512], path2[512];
    pw_cache_key_t k1 = cu_key(1), k2 = cu_key(2);
    pw_cache_key_format(&k1, hex1);
    pw_cache_key_format(&k2, hex2);
    snprintf(path1, sizeof(path1), "%s/%s", dir, hex1);
    snprintf(path2, sizeof(path2), "%s/%s", dir, hex2);
    cases[i].fn(path1, path2);

    cu_log_t log;
    c = cu_cache(dir, 0, cu_logger(&log));
    f.calls = 0;
    cr_assert_eq(lookup(c, 1, &f), PW_CACHE_FROM_FILL, "case %zu", i);
    cr_assert_eq(f.calls, 1);
    pw_cache_stats_t s = stats(c);
    cr_assert_eq(s.bad_entries, 1, "case %zu (%s)", i, cases[i].why);
    cr_assert_eq(s.store_writes, 1);
    cr_assert_eq(log.warnings, 1, "case %zu", i);
    cr_assert(strstr(log.last, cases[i].why) != NULL && strstr(log.last, hex1) != NULL,
              "case %zu: %s", i, log.last);
    pw_cache_release(c);
    c = cu_cache(dir, 0, (pw_logger_t){0});
    cr_assert_eq(lookup(c, 1, &f), PW_CACHE_FROM_STORE, "case %zu: not rewritten", i);
    pw_cache_release(c);
    cu_remove_dir(dir);
  }
}

/* ---- store plugs that misbehave ------------------------------------------- */

typedef struct fake_store_t {
  int destroyed;
  int gets, puts;
} fake_store_t;

static void fake_destroy(void* self) { ((fake_store_t*)self)->destroyed++; }
static pw_status_t fake_get(void* self, const char* key, pw_allocator_t a, void** out,
                            size_t* out_size) {
  (void)key, (void)a, (void)out, (void)out_size;
  ((fake_store_t*)self)->gets++;
  return pw_status_make(PW_STATUS_UNAVAILABLE, "disk on fire");
}
static pw_status_t fake_put(void* self, const char* key, const void* bytes, size_t size) {
  (void)key, (void)bytes, (void)size;
  ((fake_store_t*)self)->puts++;
  return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "disk full");
}

Test(cache, failing_and_incomplete_stores_cost_hits_not_correctness) {
  fake_store_t fs = {0, 0, 0};
  pw_store_vtable_t vt;
  memset(&vt, 0, sizeof(vt));
  vt.struct_size = sizeof(vt);
  vt.name = "fake";
  vt.destroy = fake_destroy;
  vt.get = fake_get;
  vt.put = fake_put;
  pw_cache_options_t o;
  pw_cache_options_init(&o);
  o.store = (pw_store_t){&vt, &fs};
  cu_log_t log;
  o.logger = cu_logger(&log);
  pw_cache_t* c;
  OK(pw_cache_create(&o, &c));
  fill_t f = {0, 100, 1, PW_STATUS_OK};
  cr_assert_eq(lookup(c, 1, &f), PW_CACHE_FROM_FILL);
  cr_assert_eq(lookup(c, 1, &f), PW_CACHE_FROM_MEMORY);
  cr_assert_eq(stats(c).store_errors, 2);
  cr_assert_eq(log.warnings, 2);
  cr_assert(strstr(log.last, "store 'fake': writing entry") && strstr(log.last, "disk full"),
            "%s", log.last);
  /* remove is missing (NULL): invalidation says so. */
  pw_cache_key_t k = cu_key(1);
  FAILS(pw_cache_invalidate(c, &k), PW_STATUS_UNIMPLEMENTED,
        "store 'fake' does not implement remove");
  pw_cache_release(c);
  cr_assert_eq(fs.destroyed, 1);
  cr_assert_eq(fs.gets, 1);
  cr_assert_eq(fs.puts, 1);

  /* A vtable without the v1 methods is refused, and destroyed. */
  vt.struct_size = offsetof(pw_store_vtable_t, list);
  o.store = (pw_store_t){&vt, &fs};
  FAILS(pw_cache_create(&o, &c), PW_STATUS_INVALID_ARGUMENT,
        "store 'fake': vtable struct_size");
  cr_assert_null(c);
  cr_assert_eq(fs.destroyed, 2);
}

/* ---- keys and entries ----------------------------------------------------- */

Test(cache, compile_keys_cover_every_input_and_are_pinned) {
  pw_mesh_shape_t m24 = PW_MESH_SHAPE_INIT(2, 2, 4, 0, 0);
  pw_mesh_shape_t m8 = PW_MESH_SHAPE_INIT(1, 8, 0, 0, 0);
  const char* prog = "kernel relu\n";
  pw_cache_key_t base, k;
  OK(pw_cache_compile_key("cpu", 1, &m24, prog, strlen(prog), NULL, &base));
  char hex[33];
  pw_cache_key_format(&base, hex);
  /* Pinned: keys are persisted, so the function must never change
   * silently (a change needs a new domain tag, docs/formats.md). */
  cr_assert_str_eq(hex, PW_TEST_COMPILE_KEY_GOLDEN);
  OK(pw_cache_compile_key("cpu", 1, &m24, prog, strlen(prog), "", &k));
  cr_assert(memcmp(&k, &base, 16) == 0, "NULL and \"\" options differ");
  OK(pw_cache_compile_key("cpu", 2, &m24, prog, strlen(prog), NULL, &k));
  cr_assert(memcmp(&k, &base, 16) != 0, "version not in the key");
  OK(pw_cache_compile_key("cpv", 1, &m24, prog, strlen(prog), NULL, &k));
  cr_assert(memcmp(&k, &base, 16) != 0, "backend name not in the key");
  OK(pw_cache_compile_key("cpu", 1, &m8, prog, strlen(prog), NULL, &k));
  cr_assert(memcmp(&k, &base, 16) != 0, "mesh not in the key");
  OK(pw_cache_compile_key("cpu", 1, &m24, prog, strlen(prog), "-O3", &k));
  cr_assert(memcmp(&k, &base, 16) != 0, "options not in the key");
  OK(pw_cache_compile_key("cpu", 1, &m24, prog, strlen(prog) - 1, NULL, &k));
  cr_assert(memcmp(&k, &base, 16) != 0, "program not in the key");
  /* Fields cannot run into each other. */
  pw_cache_key_t a, b;
  OK(pw_cache_compile_key("cp", 1, &m24, "ux", 2, NULL, &a));
  OK(pw_cache_compile_key("cpu", 1, &m24, "x", 1, NULL, &b));
  cr_assert(memcmp(&a, &b, 16) != 0);
}

Test(cache, entry_frames_detect_every_corruption) {
  pw_allocator_t sys = pw_allocator_system();
  pw_cache_key_t key = cu_key(3);
  uint8_t value[600];
  cu_fill_value(value, sizeof(value), 5);
  for (int compressible = 0; compressible < 2; ++compressible) {
    if (!compressible) {
      for (size_t i = 0; i < sizeof(value); ++i) value[i] = (uint8_t)(i * 7919u >> 3 ^ i * 31u);
    }
    void* entry;
    size_t size, capacity;
    OK(pw__cache_entry_encode(&key, value, sizeof(value), 1234, 3, sys, NULL, &entry, &size,
                              &capacity));
    void* out;
    size_t out_size;
    uint64_t ns;
    OK(pw__cache_entry_decode(&key, entry, size, sys, NULL, &out, &out_size, &ns));
    cr_assert_eq(out_size, sizeof(value));
    cr_assert(memcmp(out, value, sizeof(value)) == 0);
    cr_assert_eq(ns, 1234);
    pw_allocator_free(sys, out, out_size);
    uint8_t* e = entry;
    for (size_t i = 0; i < size; ++i) {
      for (int bit = 0; bit < 8; bit += 3) {
        e[i] ^= (uint8_t)(1u << bit);
        pw_status_t s = pw__cache_entry_decode(&key, e, size, sys, NULL, &out, &out_size, &ns);
        cr_assert_not_null(s, "flipping bit %d of byte %zu went unnoticed", bit, i);
        cr_assert_eq(pw_status_code(s), PW_STATUS_DATA_LOSS, "%s", pw_status_message(s));
        pw_status_free(s);
        e[i] ^= (uint8_t)(1u << bit);
      }
    }
    for (size_t n = 0; n < size; ++n) {
      pw_status_t s = pw__cache_entry_decode(&key, e, n, sys, NULL, &out, &out_size, &ns);
      cr_assert_eq(pw_status_code(s), PW_STATUS_DATA_LOSS, "truncation to %zu went unnoticed", n);
      pw_status_free(s);
    }
    pw_cache_key_t other = cu_key(4);
    FAILS(pw__cache_entry_decode(&other, e, size, sys, NULL, &out, &out_size, &ns), PW_STATUS_DATA_LOSS,
          "foreign");
    pw_allocator_free(sys, entry, capacity);
  }
  void* entry;
  size_t size, capacity;
  OK(pw__cache_entry_encode(&key, NULL, 0, 0, 3, sys, NULL, &entry, &size, &capacity));
  void* out = (void*)&size;
  size_t out_size = 1;
  uint64_t ns;
  OK(pw__cache_entry_decode(&key, entry, size, sys, NULL, &out, &out_size, &ns));
  cr_assert_null(out);
  cr_assert_eq(out_size, 0);
  pw_allocator_free(sys, entry, capacity);
}

typedef struct sweep_t {
  const char* dir;
  bool warm;  /* the store already has the entry */
} sweep_t;

static bool sweep_body(pw_allocator_t allocator, bool expect_failure, void* user) {
  const sweep_t* sw = user;
  pw_cache_options_t o;
  pw_cache_options_init(&o);
  o.allocator = allocator;
  pw_dir_store_options_t so;
  pw_dir_store_options_init(&so);
  so.path = sw->dir;
  so.allocator = allocator;
  pw_status_t s = pw_dir_store_create(&so, &o.store);
  pw_cache_t* c = NULL;
  if (s == NULL) s = pw_cache_create(&o, &c);
  fill_t f = {0, 70000, 8, PW_STATUS_OK};
  pw_cache_entry_t* e = NULL;
  pw_cache_key_t k = cu_key(77);
  if (s == NULL) s = pw_cache_lookup(c, &k, fill_fn, &f, &e, NULL);
  bool ok;
  if (s == NULL) {
    size_t size;
    pw_cache_entry_data(e, &size);
    ok = size == 70000;
  } else {
    ok = expect_failure && pw_status_code(s) == PW_STATUS_RESOURCE_EXHAUSTED;
    pw_status_free(s);
  }
  pw_cache_entry_release(e);
  pw_cache_release(c);
  if (!sw->warm) {
    char hex[33], path[512];
    pw_cache_key_format(&k, hex);
    snprintf(path, sizeof(path), "%s/%s", sw->dir, hex);
    unlink(path);
  }
  return ok;
}

Test(cache, every_allocation_failure_in_a_lookup_is_reported_cleanly) {
  char dir[256];
  cr_assert(cu_make_dir(dir, sizeof(dir)));
  char why[256] = "";
  sweep_t cold = {dir, false};
  cr_assert_gt(pw_test_allocator_sweep(sweep_body, &cold, why), 5, "cold: %s", why);
  sweep_t warm = {dir, true};
  sweep_body(pw_allocator_system(), false, &warm); /* fill the store */
  cr_assert_gt(pw_test_allocator_sweep(sweep_body, &warm, why), 5, "warm: %s", why);
  cu_remove_dir(dir);
}
