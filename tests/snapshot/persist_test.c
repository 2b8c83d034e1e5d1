/* Snapshots through the store plug: a round trip through the dir store in
 * a temporary directory, keep-K in the store, torn and corrupt snapshots
 * detected and the previous one used with a log line, fuzz-like damage
 * (flipped bytes, truncation, deleted values), failing stores. */
#define _DEFAULT_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/checks.h"
#include "snapshot/snap_fixture.h"
#include "support/metric_lookup.h"
#include "support/test_allocators.h"

TestSuite(persist, .fini = pw_test_check_leaks);

enum { ROWS = 40, COLS = 128 }; /* 20480 bytes of f32: 5 chunks of 4096 */

typedef struct env_t {
  snap_world_t w;
  pw_vslice_t vs;
  char dir[256];
  snap_log_t log;
  pw_array_spec_t spec;
} env_t;

static void env_init(env_t* e) {
  OK(snap_world_init(&e->w, 2, 2));
  OK(snap_vslice(&e->w, 0, 1, &e->vs));
  snap_tempdir(e->dir);
  cr_assert(e->dir[0] != '\0');
  snap_log_init(&e->log);
  e->spec = (pw_array_spec_t){PW_DTYPE_F32, {2, {ROWS, COLS}}, pw_sharding_split(0, 0)};
}

static void env_deinit(env_t* e) {
  snap_world_deinit(&e->w);
  snap_rmdir(e->dir);
}

static pw_snapshotter_t* env_snapshotter(env_t* e, uint32_t keep) {
  pw_snapshotter_options_t o;
  pw_snapshotter_options_init(&o);
  o.keep = keep;
  o.chunk_bytes = 4096;
  o.logger = snap_log_logger(&e->log);
  OK(snap_dir_store(e->dir, &o.store));
  pw_snapshotter_t* s = NULL;
  OK(pw_snapshotter_create(e->w.client, &o, &s));
  return s;
}

/* The state of |step|: buffer 0 compressible, buffer 1 noise. */
static void state_of(uint64_t step, float* a, float* b) {
  for (int i = 0; i < ROWS * COLS; ++i) a[i] = (float)((uint64_t)i % 7 + step);
  snap_fill(b, ROWS * COLS * sizeof(float), step);
}

static void take_step(env_t* e, pw_snapshotter_t* s, uint64_t step) {
  static float a[ROWS * COLS], b[ROWS * COLS];
  state_of(step, a, b);
  pw_buffer_t bufs[2];
  OK(pw_buffer_from_host(e->w.client, e->vs, &e->spec, a, sizeof(a), &bufs[0]));
  OK(pw_buffer_from_host(e->w.client, e->vs, &e->spec, b, sizeof(b), &bufs[1]));
  const char* names[2] = {"weights", "noise"};
  pw_event_t* persisted;
  OK(pw_snapshot_take(s, step, bufs, names, 2, NULL, &persisted));
  OK(pw_buffer_release(e->w.client, bufs[0]));
  OK(pw_buffer_release(e->w.client, bufs[1]));
  OK(pw_event_wait(persisted, pw_deadline_from_timeout(10000000000LL)));
  pw_event_release(persisted);
}

/* Loads the latest into a fresh snapshotter; checks it is |want| and its
 * state restores bit for bit. */
static void expect_load(env_t* e, uint64_t want) {
  pw_snapshotter_t* s = env_snapshotter(e, 3);
  uint64_t step = 0;
  OK(pw_snapshotter_load_latest(s, &step));
  cr_assert_eq(step, want, "loaded step %llu, want %llu", (unsigned long long)step,
               (unsigned long long)want);
  static float a[ROWS * COLS], b[ROWS * COLS], got[ROWS * COLS];
  state_of(want, a, b);
  pw_buffer_t r[2];
  pw_array_spec_t rep = e->spec;
  rep.sharding = pw_sharding_replicated();
  pw_array_spec_t specs[2] = {rep, e->spec};
  OK(pw_snapshot_restore_all(s, step, e->w.client, e->vs, specs, 2, r));
  OK(pw_buffer_to_host(e->w.client, r[0], got, sizeof(got), PW_INFINITE_FUTURE));
  cr_assert_eq(memcmp(got, a, sizeof(a)), 0);
  OK(pw_buffer_to_host(e->w.client, r[1], got, sizeof(got), PW_INFINITE_FUTURE));
  cr_assert_eq(memcmp(got, b, sizeof(b)), 0);
  OK(pw_buffer_release(e->w.client, r[0]));
  OK(pw_buffer_release(e->w.client, r[1]));
  pw_snapshot_info_t info = {.struct_size = sizeof(info)};
  OK(pw_snapshot_info(s, step, &info));
  cr_assert(info.loaded && info.persisted);
  OK(pw_snapshotter_destroy(s));
}

static void path_of(env_t* e, const char* key, char* out) {
  snprintf(out, 512, "%s/%s", e->dir, key);
}

static uint32_t count_files(env_t* e, const char* needle) {
  DIR* d = opendir(e->dir);
  uint32_t n = 0;
  struct dirent* ent;
  while ((ent = readdir(d)) != NULL) n += strstr(ent->d_name, needle) != NULL;
  closedir(d);
  return n;
}

Test(persist, round_trip_through_the_dir_store) {
  env_t e;
  env_init(&e);
  OK(pw_runtime_metrics_enable(e.w.rt, NULL));
  pw_snapshotter_t* s = env_snapshotter(&e, 3);
  take_step(&e, s, 10);
  take_step(&e, s, 20);
  pw_snapshot_info_t info = {.struct_size = sizeof(info)}, info10 = {.struct_size = sizeof(info10)};
  OK(pw_snapshot_info(s, 10, &info10));
  OK(pw_snapshot_info(s, 20, &info));
  uint64_t n = 0;
  cr_assert_eq(pw_test_metric(e.w.rt, "pathways_snapshot_persists_total", NULL, NULL), 2);
  cr_assert_eq(pw_test_metric(e.w.rt, "pathways_snapshot_stored_bytes_total", NULL, NULL),
               (double)(info.stored_bytes + info10.stored_bytes));
  cr_assert_geq(pw_test_metric(e.w.rt, "pathways_snapshot_persist_seconds", NULL, &n), 0);
  cr_assert_eq(n, 2);
  cr_assert(info.persisted && !info.loaded);
  cr_assert_gt(info.stored_bytes, 0);
  cr_assert_eq(info.total_bytes, 2 * ROWS * COLS * sizeof(float));
  pw_snapshot_buffer_info_t bi = {.struct_size = sizeof(bi)};
  OK(pw_snapshot_buffer_info(s, 20, 0, &bi));
  cr_assert_neq(bi.xxh64, 0);
  OK(pw_snapshotter_destroy(s));
  cr_assert_eq(count_files(&e, ".manifest"), 2);
  cr_assert_eq(count_files(&e, "snapshot-00000000000000000020-"), 10, "5 chunks per buffer");
  expect_load(&e, 20);
  env_deinit(&e);
}

Test(persist, the_store_keeps_the_last_k) {
  env_t e;
  env_init(&e);
  pw_snapshotter_t* s = env_snapshotter(&e, 2);
  for (uint64_t step = 1; step <= 4; ++step) take_step(&e, s, step);
  OK(pw_snapshotter_destroy(s));
  cr_assert_eq(count_files(&e, ".manifest"), 2);
  cr_assert_eq(count_files(&e, "-00000000000000000001"), 0);
  cr_assert_eq(count_files(&e, "-00000000000000000002"), 0);
  cr_assert_eq(count_files(&e, "-00000000000000000003"), 11);
  cr_assert_eq(count_files(&e, "-00000000000000000004"), 11);
  expect_load(&e, 4);
  env_deinit(&e);
}

static void flip(const char* path, long offset) {
  FILE* f = fopen(path, "r+b");
  cr_assert_not_null(f, "%s", path);
  fseek(f, offset, SEEK_SET);
  int c = fgetc(f);
  fseek(f, offset, SEEK_SET);
  fputc(c ^ 0x20, f);
  fclose(f);
}

static long file_size(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Three snapshots; the newest one damaged by |damage|; load must fall back
 * to step 2 and log why step 3 was skipped (unless |silent|: a torn
 * snapshot without a manifest is simply not there). */
static void damaged(void (*damage)(env_t*), const char* why, bool silent) {
  env_t e;
  env_init(&e);
  pw_snapshotter_t* s = env_snapshotter(&e, 3);
  for (uint64_t step = 1; step <= 3; ++step) take_step(&e, s, step);
  OK(pw_snapshotter_destroy(s));
  damage(&e);
  expect_load(&e, 2);
  if (!silent) {
    cr_assert(snap_log_has(&e.log, "snapshot step 3 in store 'dir' is unusable"), "%s",
              e.log.text);
    cr_assert(snap_log_has(&e.log, why), "log lacks '%s': %s", why, e.log.text);
  } else {
    cr_assert(!snap_log_has(&e.log, "unusable"), "%s", e.log.text);
  }
  env_deinit(&e);
}

static void delete_value(env_t* e) {
  char p[512];
  path_of(e, "snapshot-00000000000000000003-00001-000002", p);
  cr_assert_eq(unlink(p), 0);
}
static void delete_manifest(env_t* e) {
  char p[512];
  path_of(e, "snapshot-00000000000000000003.manifest", p);
  cr_assert_eq(unlink(p), 0);
}
static void flip_manifest(env_t* e) {
  char p[512];
  path_of(e, "snapshot-00000000000000000003.manifest", p);
  flip(p, file_size(p) - 3);
}
static void flip_payload(env_t* e) {
  char p[512];
  path_of(e, "snapshot-00000000000000000003-00000-000001", p);
  flip(p, 70);
}
static void truncate_value(env_t* e) {
  char p[512];
  path_of(e, "snapshot-00000000000000000003-00001-000004", p);
  cr_assert_eq(truncate(p, file_size(p) - 1), 0);
}
static void swap_values(env_t* e) {
  char a[512], b[512], t[512];
  path_of(e, "snapshot-00000000000000000003-00001-000000", a);
  path_of(e, "snapshot-00000000000000000003-00001-000001", b);
  path_of(e, "swap", t);
  cr_assert_eq(rename(a, t), 0);
  cr_assert_eq(rename(b, a), 0);
  cr_assert_eq(rename(t, b), 0);
}
static void garbage_manifest(env_t* e) {
  char p[512];
  path_of(e, "snapshot-00000000000000000003.manifest", p);
  FILE* f = fopen(p, "wb");
  fputs("PWSNAPM\nnot really", f);
  fclose(f);
}

Test(persist, a_missing_value_falls_back) { damaged(delete_value, "is missing (torn snapshot)", false); }
Test(persist, a_missing_manifest_is_a_torn_snapshot) { damaged(delete_manifest, "", true); }
Test(persist, a_flipped_manifest_byte_falls_back) { damaged(flip_manifest, "manifest checksum mismatch", false); }
Test(persist, a_flipped_payload_byte_falls_back) { damaged(flip_payload, "payload checksum mismatch", false); }
Test(persist, a_truncated_value_falls_back) { damaged(truncate_value, "bytes, the manifest says", false); }
Test(persist, swapped_values_fall_back) { damaged(swap_values, "disagrees with the manifest", false); }
Test(persist, a_garbage_manifest_falls_back) { damaged(garbage_manifest, "not a snapshot manifest", false); }

/* Every byte of a small snapshot's files flipped in turn (and every
 * truncation of its manifest): load gives step 2 intact or step 1, never
 * a wrong state, a crash or a leak. */
Test(persist, fuzzed_damage_never_gives_a_wrong_state) {
  env_t e;
  env_init(&e);
  pw_snapshotter_options_t o;
  pw_snapshotter_options_init(&o);
  OK(snap_dir_store(e.dir, &o.store));
  o.logger = snap_log_logger(&e.log);
  pw_snapshotter_t* s;
  OK(pw_snapshotter_create(e.w.client, &o, &s));
  pw_array_spec_t spec = {PW_DTYPE_I32, {1, {6}}, pw_sharding_replicated()};
  for (int32_t step = 1; step <= 2; ++step) {
    int32_t v[6] = {step, step, step, 4, 5, 6};
    pw_buffer_t b;
    OK(pw_buffer_from_host(e.w.client, e.vs, &spec, v, sizeof(v), &b));
    const char* names[1] = {"v"};
    pw_event_t* persisted;
    OK(pw_snapshot_take(s, (uint64_t)step, &b, names, 1, NULL, &persisted));
    OK(pw_buffer_release(e.w.client, b));
    OK(pw_event_wait(persisted, PW_INFINITE_FUTURE));
    pw_event_release(persisted);
  }
  OK(pw_snapshotter_destroy(s));
  const char* files[2] = {"snapshot-00000000000000000002.manifest",
                          "snapshot-00000000000000000002-00000-000000"};
  for (int f = 0; f < 2; ++f) {
    char p[512];
    path_of(&e, files[f], p);
    long size = file_size(p);
    for (long off = 0; off < size; ++off) {
      flip(p, off);
      pw_snapshotter_options_t lo;
      pw_snapshotter_options_init(&lo);
      OK(snap_dir_store(e.dir, &lo.store));
      lo.logger = snap_log_logger(&e.log);
      OK(pw_snapshotter_create(e.w.client, &lo, &s));
      uint64_t step = 0;
      OK(pw_snapshotter_load_latest(s, &step));
      cr_assert(step == 1, "%s byte %ld flipped: loaded step %llu", files[f], off,
                (unsigned long long)step);
      pw_buffer_t r;
      OK(pw_snapshot_restore(s, step, 0, e.w.client, e.vs, NULL, &r));
      int32_t got[6];
      OK(pw_buffer_to_host(e.w.client, r, got, sizeof(got), PW_INFINITE_FUTURE));
      cr_assert(got[0] == 1 && got[5] == 6);
      OK(pw_buffer_release(e.w.client, r));
      OK(pw_snapshotter_destroy(s));
      flip(p, off);
    }
  }
  char p[512];
  path_of(&e, files[0], p);
  long size = file_size(p);
  for (long n = 0; n < size; n += 7) {
    char t[512];
    path_of(&e, "snapshot-00000000000000000003.manifest", t);
    FILE* in = fopen(p, "rb");
    FILE* out = fopen(t, "wb");
    for (long i = 0; i < n; ++i) fputc(fgetc(in), out);
    fclose(in);
    fclose(out);
    pw_snapshotter_options_t lo;
    pw_snapshotter_options_init(&lo);
    OK(snap_dir_store(e.dir, &lo.store));
    OK(pw_snapshotter_create(e.w.client, &lo, &s));
    uint64_t step = 0;
    OK(pw_snapshotter_load_latest(s, &step));
    cr_assert_eq(step, 2, "a manifest of step 3 truncated to %ld bytes", n);
    OK(pw_snapshotter_destroy(s));
    unlink(t);
  }
  env_deinit(&e);
}

/* ---- failing stores ------------------------------------------------------------------- */

typedef struct flaky_t {
  pw_store_t inner;
  int puts_left;     /* put fails (UNAVAILABLE) once it reaches 0 */
  int destroyed;
} flaky_t;

static void flaky_destroy(void* self) {
  flaky_t* f = self;
  f->inner.vtable->destroy(f->inner.self);
  f->destroyed++;
}
static pw_status_t flaky_get(void* self, const char* key, pw_allocator_t a, void** out,
                             size_t* size) {
  flaky_t* f = self;
  return f->inner.vtable->get(f->inner.self, key, a, out, size);
}
static pw_status_t flaky_put(void* self, const char* key, const void* bytes, size_t size) {
  flaky_t* f = self;
  if (f->puts_left-- <= 0) return pw_status_make(PW_STATUS_UNAVAILABLE, "flaky: disk on fire");
  return f->inner.vtable->put(f->inner.self, key, bytes, size);
}
static pw_status_t flaky_remove(void* self, const char* key) {
  flaky_t* f = self;
  return f->inner.vtable->remove(f->inner.self, key);
}
static pw_status_t flaky_list(void* self, pw_store_list_fn_t fn, void* user) {
  flaky_t* f = self;
  return f->inner.vtable->list(f->inner.self, fn, user);
}
static const pw_store_vtable_t flaky_vtable = {sizeof(pw_store_vtable_t), "flaky", flaky_destroy,
                                               flaky_get, flaky_put, flaky_remove, flaky_list};

Test(persist, store_errors_fail_the_persist_and_leave_no_manifest) {
  env_t e;
  env_init(&e);
  OK(pw_runtime_metrics_enable(e.w.rt, NULL));
  flaky_t f = {.puts_left = 3};
  OK(snap_dir_store(e.dir, &f.inner));
  pw_snapshotter_options_t o;
  pw_snapshotter_options_init(&o);
  o.chunk_bytes = 4096;
  o.store = (pw_store_t){&flaky_vtable, &f};
  o.logger = snap_log_logger(&e.log);
  pw_snapshotter_t* s;
  OK(pw_snapshotter_create(e.w.client, &o, &s));
  float a[ROWS * COLS] = {0};
  pw_buffer_t b;
  OK(pw_buffer_from_host(e.w.client, e.vs, &e.spec, a, sizeof(a), &b));
  pw_event_t *copied, *persisted;
  OK(pw_snapshot_take(s, 9, &b, NULL, 1, &copied, &persisted));
  OK(pw_event_wait(copied, PW_INFINITE_FUTURE));
  pw_status_t st = pw_event_wait(persisted, PW_INFINITE_FUTURE);
  cr_assert_eq(pw_status_code(st), PW_STATUS_UNAVAILABLE);
  cr_assert(strstr(pw_status_message(st), "step 9 to store 'flaky'") != NULL, "%s",
            pw_status_message(st));
  pw_status_free(st);
  pw_event_release(copied);
  pw_event_release(persisted);
  cr_assert(snap_log_has(&e.log, "disk on fire"));
  cr_assert_eq(pw_test_metric(e.w.rt, "pathways_snapshot_persists_failed_total", NULL, NULL), 1);
  cr_assert_eq(pw_test_metric(e.w.rt, "pathways_snapshots_total", NULL, NULL), 1);
  /* Still held in memory; nothing half-written left in the store. */
  uint64_t latest;
  OK(pw_snapshotter_latest_step(s, &latest));
  cr_assert_eq(count_files(&e, "snapshot-"), 0);
  FAILS(pw_snapshotter_load_latest(s, &latest), PW_STATUS_NOT_FOUND, "0 unusable");
  OK(pw_snapshotter_destroy(s));
  cr_assert_eq(f.destroyed, 1);
  OK(pw_buffer_release(e.w.client, b));
  env_deinit(&e);
}

Test(persist, a_bad_store_vtable_is_refused_and_destroyed) {
  env_t e;
  env_init(&e);
  flaky_t f = {.puts_left = 100};
  OK(snap_dir_store(e.dir, &f.inner));
  pw_store_vtable_t small = flaky_vtable;
  small.struct_size = 8;
  pw_snapshotter_options_t o;
  pw_snapshotter_options_init(&o);
  o.store = (pw_store_t){&small, &f};
  pw_snapshotter_t* s = NULL;
  FAILS(pw_snapshotter_create(e.w.client, &o, &s), PW_STATUS_INVALID_ARGUMENT, "store");
  cr_assert_eq(f.destroyed, 0, "a vtable too small is not called");
  f.inner.vtable->destroy(f.inner.self);
  /* A store without list: load says UNIMPLEMENTED. */
  OK(snap_dir_store(e.dir, &f.inner));
  pw_store_vtable_t nolist = flaky_vtable;
  nolist.list = NULL;
  o.store = (pw_store_t){&nolist, &f};
  OK(pw_snapshotter_create(e.w.client, &o, &s));
  uint64_t step;
  FAILS(pw_snapshotter_load_latest(s, &step), PW_STATUS_UNIMPLEMENTED, "list");
  OK(pw_snapshotter_destroy(s));
  cr_assert_eq(f.destroyed, 1);
  env_deinit(&e);
}

/* ---- failing allocator on the persist and load paths ----------------------------------- */

typedef struct load_ctx_t {
  env_t* e;
} load_ctx_t;

static bool sweep_persist_load(pw_allocator_t allocator, bool expect_failure, void* user) {
  env_t* e = ((load_ctx_t*)user)->e;
  snap_rmdir(e->dir);
  mkdir(e->dir, 0700);
  pw_snapshotter_options_t o;
  pw_snapshotter_options_init(&o);
  o.allocator = allocator;
  o.chunk_bytes = 8192;
  OK(snap_dir_store(e->dir, &o.store));
  pw_snapshotter_t* s = NULL;
  pw_status_t st = pw_snapshotter_create(e->w.client, &o, &s);
  if (st != NULL) return pw_sweep_path_end(st, expect_failure, false, "create");
  static float a[ROWS * COLS];
  snap_fill(a, sizeof(a), 5);
  pw_buffer_t b;
  OK(pw_buffer_from_host(e->w.client, e->vs, &e->spec, a, sizeof(a), &b));
  pw_event_t* persisted = NULL;
  st = pw_snapshot_take(s, 1, &b, NULL, 1, NULL, &persisted);
  pw_status_ignore(pw_buffer_release(e->w.client, b));
  if (st == NULL) st = pw_event_wait(persisted, PW_INFINITE_FUTURE);
  pw_event_release(persisted);
  pw_status_ignore(pw_snapshotter_destroy(s));
  if (st != NULL) return pw_sweep_path_end(st, expect_failure, false, "persist");
  /* Load it back with the same allocator. */
  pw_snapshotter_options_init(&o);
  o.allocator = allocator;
  OK(snap_dir_store(e->dir, &o.store));
  st = pw_snapshotter_create(e->w.client, &o, &s);
  if (st != NULL) return pw_sweep_path_end(st, expect_failure, false, "create 2");
  uint64_t step = 0;
  st = pw_snapshotter_load_latest(s, &step);
  bool ok = step == 1;
  pw_buffer_t r = {0};
  if (st == NULL) st = pw_snapshot_restore(s, 1, 0, e->w.client, e->vs, NULL, &r);
  if (st == NULL) {
    static float got[ROWS * COLS];
    st = pw_buffer_to_host(e->w.client, r, got, sizeof(got), PW_INFINITE_FUTURE);
    ok = ok && memcmp(got, a, sizeof(a)) == 0;
    pw_status_ignore(pw_buffer_release(e->w.client, r));
  }
  pw_status_ignore(pw_snapshotter_destroy(s));
  return pw_sweep_path_end(st, expect_failure, ok, "load");
}

Test(persist, every_allocation_failure_is_reported_and_leaks_nothing) {
  env_t e;
  env_init(&e);
  load_ctx_t c = {&e};
  char why[256] = "";
  int swept = pw_test_allocator_sweep(sweep_persist_load, &c, why);
  cr_assert(swept > 10, "sweep: %d (%s)", swept, why);
  env_deinit(&e);
}
