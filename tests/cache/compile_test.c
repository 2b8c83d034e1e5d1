#define _POSIX_C_SOURCE 200809L
/* Compiling through the cache: a runtime with a compile cache compiles a
 * program once (memory hit afterwards), a new runtime and cache over the
 * same directory get a persistent hit (a new process would), the cached
 * executable is the same and runs, different inputs do not collide, and
 * cached bytes the backend cannot load are dropped and compiled afresh. */
#include <stdio.h>
#include <stdlib.h>

#include "cache/cache_internal.h"
#include "cache/cache_util.h"
#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(cache_compile, .fini = pw_test_check_leaks);

#define COPY8 "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n"

static pw_cache_stats_t stats(pw_cache_t* c) {
  pw_cache_stats_t s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  OK(pw_cache_stats(c, &s));
  return s;
}

typedef struct rt_t {
  pw_fixture_t f;
  pw_cache_t* cache;
  pw_vslice_t vs;
} rt_t;

static void rt_init(rt_t* r, const char* dir, cu_log_t* log) {
  OK(pw_fixture_init(&r->f, PW_FIXTURE_DOUBLE_INLINE, 2, "2x4", pw_allocator_system()));
  r->cache = cu_cache(dir, 0, log ? cu_logger(log) : (pw_logger_t){0});
  cr_assert_not_null(r->cache);
  OK(pw_runtime_set_compile_cache(r->f.runtime, r->cache));
  OK(pw_fixture_vslice(&r->f, "2x4", &r->vs));
}

static void rt_deinit(rt_t* r) {
  pw_fixture_deinit(&r->f);
  pw_cache_release(r->cache);
}

static void bytes_of(rt_t* r, pw_executable_t e, uint8_t* out, size_t* size) {
  const void* b;
  OK(pw_executable_bytes(r->f.client, e, &b, size));
  memcpy(out, b, *size);
}

Test(cache_compile, compiles_once_then_hits_memory_then_the_store) {
  char dir[256];
  cr_assert(cu_make_dir(dir, sizeof(dir)));
  rt_t r;
  rt_init(&r, dir, NULL);
  pw_executable_t a, b;
  OK(pw_fixture_compile(&r.f, r.vs, COPY8, &a));
  OK(pw_fixture_compile(&r.f, r.vs, COPY8, &b));
  pw_cache_stats_t s = stats(r.cache);
  cr_assert_eq(s.misses, 1);
  cr_assert_eq(s.memory_hits, 1);
  cr_assert_eq(s.store_writes, 1);
  uint8_t first[4096], second[4096];
  size_t n1, n2;
  bytes_of(&r, a, first, &n1);
  bytes_of(&r, b, second, &n2);
  cr_assert(n1 == n2 && memcmp(first, second, n1) == 0);
  rt_deinit(&r);

  /* A fresh runtime and cache over the directory: what another process
   * sees. */
  rt_init(&r, dir, NULL);
  pw_executable_t c;
  OK(pw_fixture_compile(&r.f, r.vs, COPY8, &c));
  s = stats(r.cache);
  cr_assert_eq(s.store_hits, 1);
  cr_assert_eq(s.misses, 0);
  cr_assert_gt(s.fill_ns_saved, 0);
  bytes_of(&r, c, second, &n2);
  cr_assert(n1 == n2 && memcmp(first, second, n1) == 0);
  /* ... and it runs. */
  pw_graph_t g;
  OK(pw_graph_create(r.f.client, &g));
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t p, n;
  OK(pw_graph_add_parameter(r.f.client, g, r.vs, &spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(r.f.client, g, "c", c, r.vs, &in, 1, &n));
  OK(pw_graph_add_output(r.f.client, g, pw_value(n, 0)));
  float host[8] = {8, 7, 6, 5, 4, 3, 2, 1}, back[8];
  pw_buffer_t arg, out;
  OK(pw_fixture_f32(&r.f, r.vs, 1, dims, spec.sharding, host, &arg));
  pw_event_t* done;
  OK(pw_graph_submit(r.f.client, g, &arg, 1, NULL, &out, 1, &done));
  OK(pw_fixture_wait(done));
  OK(pw_buffer_to_host(r.f.client, out, back, sizeof(back), pw_deadline_from_timeout(5000000000LL)));
  cr_assert(memcmp(host, back, sizeof(host)) == 0);
  rt_deinit(&r);
  cu_remove_dir(dir);
}

Test(cache_compile, different_inputs_are_different_entries) {
  rt_t r;
  rt_init(&r, NULL, NULL);
  pw_vslice_t flat;
  OK(pw_fixture_vslice(&r.f, "8", &flat));
  pw_executable_t e;
  OK(pw_fixture_compile(&r.f, r.vs, COPY8, &e));
  OK(pw_fixture_compile(&r.f, flat, COPY8, &e));                      /* mesh */
  OK(pw_executable_compile(r.f.client, r.vs, COPY8, strlen(COPY8), "x", &e)); /* options */
  OK(pw_fixture_compile(&r.f, r.vs, COPY8 "# comment\n", &e));        /* program bytes */
  cr_assert_eq(stats(r.cache).misses, 4);
  cr_assert_eq(stats(r.cache).memory_hits, 0);
  /* Compile errors are returned and not cached. */
  FAILS(pw_fixture_compile(&r.f, r.vs, "frobnicate\n", &e), PW_STATUS_INVALID_ARGUMENT,
        "compiling on slice");
  FAILS(pw_fixture_compile(&r.f, r.vs, "frobnicate\n", &e), PW_STATUS_INVALID_ARGUMENT,
        "compiling on slice");
  cr_assert_eq(stats(r.cache).fill_errors, 2);
  rt_deinit(&r);
}

Test(cache_compile, cached_bytes_that_do_not_load_are_compiled_again) {
  char dir[256];
  cr_assert(cu_make_dir(dir, sizeof(dir)));
  /* Plant a well-framed entry under the program's key whose executable
   * bytes the backend rejects (as after a backend change without a
   * version bump). */
  pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(2, 2, 4, 0, 0);
  pw_cache_key_t key;
  OK(pw_cache_compile_key(PW_DOUBLE_BACKEND_NAME, PW_DOUBLE_BACKEND_VERSION, &mesh, COPY8,
                          strlen(COPY8), NULL, &key));
  void* framed;
  size_t size, capacity;
  OK(pw__cache_entry_encode(&key, "PWDB garbage", 12, 0, 3, pw_allocator_system(), NULL, &framed,
                            &size, &capacity));
  char hex[33], path[512];
  pw_cache_key_format(&key, hex);
  snprintf(path, sizeof(path), "%s/%s", dir, hex);
  FILE* f = fopen(path, "wb");
  cr_assert_eq(fwrite(framed, 1, size, f), size);
  fclose(f);
  pw_allocator_free(pw_allocator_system(), framed, capacity);

  cu_log_t log;
  rt_t r;
  rt_init(&r, dir, &log);
  pw_executable_t e;
  OK(pw_fixture_compile(&r.f, r.vs, COPY8, &e));
  cr_assert_eq(stats(r.cache).store_hits, 1);
  cr_assert_geq(log.warnings, 1);
  cr_assert(strstr(log.last, "cached executable does not load"), "%s", log.last);
  /* The bad entry is gone: the next compile is a miss that stores good
   * bytes, which a new cache then loads. */
  OK(pw_fixture_compile(&r.f, r.vs, COPY8, &e));
  cr_assert_eq(stats(r.cache).misses, 1);
  rt_deinit(&r);
  rt_init(&r, dir, NULL);
  OK(pw_fixture_compile(&r.f, r.vs, COPY8, &e));
  cr_assert_eq(stats(r.cache).store_hits, 1);
  cr_assert_eq(stats(r.cache).misses, 0);
  rt_deinit(&r);
  cu_remove_dir(dir);
}
