/* Host-memory snapshots on the CPU backend: take and restore bit for bit,
 * asynchrony (the take returns before the producer finishes), producers'
 * errors, restore onto fewer slices and smaller meshes with other
 * shardings, keep-last-K, and bad input of every kind. */
#include <criterion/criterion.h>
#include <string.h>

#include "runtime/checks.h"
#include "snapshot/snap_fixture.h"
#include "support/test_allocators.h"

TestSuite(snapshot, .fini = pw_test_check_leaks);

static pw_snapshotter_t* make_snapshotter(snap_world_t* w, uint32_t keep) {
  pw_snapshotter_options_t o;
  pw_snapshotter_options_init(&o);
  o.keep = keep;
  pw_snapshotter_t* s = NULL;
  OK(pw_snapshotter_create(w->client, &o, &s));
  return s;
}

static pw_status_t wait_event(pw_event_t* e) {
  pw_status_t status = pw_event_wait(e, pw_deadline_from_timeout(10000000000LL));
  pw_event_release(e);
  return status;
}

/* Downloads |b| and compares it with |want|. */
static void expect_bytes(snap_world_t* w, pw_buffer_t b, const void* want, size_t size) {
  void* got = malloc(size);
  OK(pw_buffer_to_host(w->client, b, got, size, PW_INFINITE_FUTURE));
  cr_assert_eq(memcmp(got, want, size), 0, "restored bytes differ");
  free(got);
}

Test(snapshot, take_and_restore_are_bit_exact_for_several_dtypes) {
  snap_world_t w;
  OK(snap_world_init(&w, 2, 2));
  pw_vslice_t vs;
  OK(snap_vslice(&w, 0, 1, &vs));
  const pw_dtype_t dtypes[] = {PW_DTYPE_F32, PW_DTYPE_F64, PW_DTYPE_BF16, PW_DTYPE_I8,
                               PW_DTYPE_U64, PW_DTYPE_C64, PW_DTYPE_F8E4M3FN};
  enum { N = sizeof(dtypes) / sizeof(dtypes[0]) };
  pw_buffer_t bufs[N];
  void* data[N];
  size_t sizes[N];
  const char* names[N] = {"f32", "f64", "bf16", "i8", NULL, "c64", "f8"};
  for (uint32_t i = 0; i < N; ++i) {
    pw_array_spec_t spec = {dtypes[i], {2, {6, 5}},
                            i % 2 ? pw_sharding_split(0, 0) : pw_sharding_replicated()};
    OK(pw_shape_byte_size(spec.dtype, &spec.shape, &sizes[i]));
    data[i] = malloc(sizes[i]);
    snap_fill(data[i], sizes[i], i + 1);
    OK(pw_buffer_from_host(w.client, vs, &spec, data[i], sizes[i], &bufs[i]));
  }
  pw_snapshotter_t* s = make_snapshotter(&w, 2);
  pw_event_t *copied, *persisted;
  OK(pw_snapshot_take(s, 7, bufs, names, N, &copied, &persisted));
  OK(wait_event(copied));
  FAILS(wait_event(persisted), PW_STATUS_FAILED_PRECONDITION, "no store");
  uint64_t latest = 0;
  OK(pw_snapshotter_latest_step(s, &latest));
  cr_assert_eq(latest, 7);
  pw_snapshot_info_t info = {.struct_size = sizeof(info)};
  OK(pw_snapshot_info(s, 7, &info));
  cr_assert_eq(info.buffer_count, N);
  size_t total = 0;
  for (uint32_t i = 0; i < N; ++i) total += sizes[i];
  cr_assert_eq(info.total_bytes, total);
  cr_assert(!info.persisted && !info.loaded);
  for (uint32_t i = 0; i < N; ++i) {
    pw_snapshot_buffer_info_t bi = {.struct_size = sizeof(bi)};
    OK(pw_snapshot_buffer_info(s, 7, i, &bi));
    cr_assert_str_eq(bi.name, names[i] ? names[i] : "");
    cr_assert_eq(bi.spec.dtype, dtypes[i]);
    cr_assert_eq(bi.spec.sharding.kind, i % 2 ? PW_SHARDING_SPLIT : PW_SHARDING_REPLICATED);
    cr_assert_eq(bi.bytes, sizes[i]);
    pw_buffer_t r;
    OK(pw_snapshot_restore(s, 7, i, w.client, vs, NULL, &r));
    expect_bytes(&w, r, data[i], sizes[i]);
    OK(pw_buffer_release(w.client, r));
  }
  uint32_t index = 99;
  OK(pw_snapshot_find_buffer(s, 7, "c64", &index));
  cr_assert_eq(index, 5);
  FAILS(pw_snapshot_find_buffer(s, 7, "nope", &index), PW_STATUS_NOT_FOUND, "nope");
  OK(pw_snapshotter_destroy(s));
  for (uint32_t i = 0; i < N; ++i) {
    OK(pw_buffer_release(w.client, bufs[i]));
    free(data[i]);
  }
  snap_world_deinit(&w);
}

Test(snapshot, take_returns_before_the_producer_finishes_and_the_caller_may_release) {
  snap_world_t w;
  OK(snap_world_init(&w, 1, 2));
  pw_vslice_t vs;
  OK(snap_vslice(&w, 0, 1, &vs));
  pw_array_spec_t spec = {PW_DTYPE_I32, {1, {64}}, pw_sharding_split(0, 0)};
  int32_t data[64];
  snap_fill(data, sizeof(data), 3);
  pw_buffer_t in, out;
  OK(pw_buffer_from_host(w.client, vs, &spec, data, sizeof(data), &in));
  snap_gate_close();
  OK(snap_produce(&w, vs, &spec, "gate", in, &out));
  pw_snapshotter_t* s = make_snapshotter(&w, 2);
  pw_event_t* copied;
  OK(pw_snapshot_take(s, 1, &out, NULL, 1, &copied, NULL));
  /* The cut is the values at the call: our handles may go at once. */
  OK(pw_buffer_release(w.client, out));
  OK(pw_buffer_release(w.client, in));
  cr_assert(!pw_event_is_ready(copied), "the copy finished before its producer ran");
  uint64_t latest;
  FAILS(pw_snapshotter_latest_step(s, &latest), PW_STATUS_NOT_FOUND, "no complete snapshot");
  FAILS(pw_snapshot_take(s, 1, &in, NULL, 1, NULL, NULL), PW_STATUS_NOT_FOUND, "buffers[0]");
  snap_gate_open();
  OK(wait_event(copied));
  pw_buffer_t r;
  OK(pw_snapshot_restore(s, 1, 0, w.client, vs, NULL, &r));
  expect_bytes(&w, r, data, sizeof(data));
  OK(pw_buffer_release(w.client, r));
  OK(pw_snapshotter_destroy(s));
  cr_assert_eq(pw_client_live_handles(w.client), 1, "only the vslice is left");
  snap_world_deinit(&w);
}

Test(snapshot, a_failed_producer_fails_the_snapshot_naming_the_buffer) {
  snap_world_t w;
  OK(snap_world_init(&w, 1, 2));
  pw_vslice_t vs;
  OK(snap_vslice(&w, 0, 1, &vs));
  pw_array_spec_t spec = {PW_DTYPE_F32, {1, {8}}, pw_sharding_replicated()};
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  pw_buffer_t bufs[2];
  OK(pw_buffer_from_host(w.client, vs, &spec, data, sizeof(data), &bufs[0]));
  OK(snap_produce(&w, vs, &spec, "boom", bufs[0], &bufs[1]));
  pw_snapshotter_t* s = make_snapshotter(&w, 2);
  const char* names[2] = {"ok", "w"};
  pw_event_t *copied, *persisted;
  OK(pw_snapshot_take(s, 5, bufs, names, 2, &copied, &persisted));
  pw_status_t st = wait_event(copied);
  cr_assert_not_null(st);
  cr_assert(strstr(pw_status_message(st), "step 5: buffer 1 ('w')") != NULL, "%s",
            pw_status_message(st));
  cr_assert(strstr(pw_status_message(st), "boom") != NULL, "%s", pw_status_message(st));
  pw_status_free(st);
  FAILS(wait_event(persisted), PW_STATUS_INTERNAL, "not persisted");
  uint64_t latest;
  FAILS(pw_snapshotter_latest_step(s, &latest), PW_STATUS_NOT_FOUND, "no complete");
  /* A failed step may be taken again. */
  OK(pw_snapshot_take(s, 5, bufs, NULL, 1, &copied, NULL));
  OK(wait_event(copied));
  OK(pw_snapshotter_latest_step(s, &latest));
  cr_assert_eq(latest, 5);
  OK(pw_snapshotter_destroy(s));
  OK(pw_buffer_release(w.client, bufs[0]));
  OK(pw_buffer_release(w.client, bufs[1]));
  snap_world_deinit(&w);
}

/* Data-parallel state on 4 slices (2 devices each), restored onto 3 slices
 * and onto one, with the same and other shardings. */
Test(snapshot, restores_state_from_4_slices_onto_3_and_onto_a_smaller_mesh) {
  snap_world_t w;
  OK(snap_world_init(&w, 4, 2));
  pw_vslice_t four, three, one;
  OK(snap_vslice(&w, 0, 4, &four));
  enum { R = 24, C = 3 };
  pw_array_spec_t rep = {PW_DTYPE_F32, {2, {R, C}}, pw_sharding_replicated()};
  pw_array_spec_t split = {PW_DTYPE_F32, {2, {R, C}}, pw_sharding_split(0, PW_MESH_AXIS_ALL)};
  float params[R * C], shards[R * C];
  snap_fill(params, sizeof(params), 11);
  snap_fill(shards, sizeof(shards), 12);
  pw_buffer_t in[2], state[2];
  OK(pw_buffer_from_host(w.client, four, &rep, params, sizeof(params), &in[0]));
  OK(pw_buffer_from_host(w.client, four, &split, shards, sizeof(shards), &in[1]));
  OK(snap_produce(&w, four, &rep, "copy", in[0], &state[0]));
  OK(snap_produce(&w, four, &split, "copy", in[1], &state[1]));
  pw_snapshotter_t* s = make_snapshotter(&w, 2);
  pw_event_t* copied;
  const char* names[2] = {"params", "opt"};
  OK(pw_snapshot_take(s, 100, state, names, 2, &copied, NULL));
  OK(wait_event(copied));
  /* Slice 3 is gone: 3 slices, 6 devices (24 splits in 6). */
  OK(snap_vslice(&w, 0, 3, &three));
  pw_buffer_t r[2];
  OK(pw_snapshot_restore_all(s, 100, w.client, three, NULL, 2, r));
  expect_bytes(&w, r[0], params, sizeof(params));
  expect_bytes(&w, r[1], shards, sizeof(shards));
  pw_array_spec_t got;
  OK(pw_buffer_spec(w.client, r[1], &got));
  cr_assert(pw_array_spec_equal(&got, &split));
  /* The restored state computes on the new mesh. */
  pw_buffer_t again;
  OK(snap_produce(&w, three, &split, "copy", r[1], &again));
  expect_bytes(&w, again, shards, sizeof(shards));
  OK(pw_buffer_release(w.client, again));
  OK(pw_buffer_release(w.client, r[0]));
  OK(pw_buffer_release(w.client, r[1]));
  /* The split state onto one slice (a 2-device mesh), split along the
   * other axis; and replicated. */
  OK(snap_vslice(&w, 0, 1, &one));
  pw_array_spec_t cols = {PW_DTYPE_F32, {2, {R, C}}, pw_sharding_split(0, 0)};
  OK(pw_snapshot_restore(s, 100, 1, w.client, one, &cols, &r[0]));
  expect_bytes(&w, r[0], shards, sizeof(shards));
  OK(pw_snapshot_restore(s, 100, 1, w.client, one, &rep, &r[1]));
  expect_bytes(&w, r[1], shards, sizeof(shards));
  OK(pw_buffer_release(w.client, r[0]));
  OK(pw_buffer_release(w.client, r[1]));
  OK(pw_snapshotter_destroy(s));
  for (int i = 0; i < 2; ++i) {
    OK(pw_buffer_release(w.client, in[i]));
    OK(pw_buffer_release(w.client, state[i]));
  }
  snap_world_deinit(&w);
}

Test(snapshot, keeps_the_last_k) {
  snap_world_t w;
  OK(snap_world_init(&w, 1, 1));
  pw_vslice_t vs;
  OK(snap_vslice(&w, 0, 1, &vs));
  pw_array_spec_t spec = {PW_DTYPE_U8, {1, {16}}, pw_sharding_replicated()};
  pw_snapshotter_t* s = make_snapshotter(&w, 3);
  uint8_t data[16];
  for (uint64_t step = 1; step <= 6; ++step) {
    memset(data, (int)step, sizeof(data));
    pw_buffer_t b;
    OK(pw_buffer_from_host(w.client, vs, &spec, data, sizeof(data), &b));
    pw_event_t* copied;
    OK(pw_snapshot_take(s, step * 10, &b, NULL, 1, &copied, NULL));
    OK(pw_buffer_release(w.client, b));
    OK(wait_event(copied));
  }
  uint64_t steps[8];
  uint32_t count = 0;
  OK(pw_snapshotter_steps(s, steps, 8, &count));
  cr_assert_eq(count, 3);
  cr_assert(steps[0] == 40 && steps[1] == 50 && steps[2] == 60);
  OK(pw_snapshotter_steps(s, NULL, 0, &count));
  cr_assert_eq(count, 3);
  pw_buffer_t r;
  FAILS(pw_snapshot_restore(s, 30, 0, w.client, vs, NULL, &r), PW_STATUS_NOT_FOUND,
        "held: 40, 50, 60");
  /* A step below the ring's lowest completes and is dropped at once. */
  memset(data, 1, sizeof(data));
  pw_buffer_t b;
  OK(pw_buffer_from_host(w.client, vs, &spec, data, sizeof(data), &b));
  pw_event_t* copied;
  OK(pw_snapshot_take(s, 5, &b, NULL, 1, &copied, NULL));
  OK(wait_event(copied));
  OK(pw_snapshotter_steps(s, steps, 8, &count));
  cr_assert(count == 3 && steps[0] == 40);
  FAILS(pw_snapshot_take(s, 60, &b, NULL, 1, NULL, NULL), PW_STATUS_ALREADY_EXISTS, "step 60");
  OK(pw_buffer_release(w.client, b));
  memset(data, 6, sizeof(data));
  OK(pw_snapshot_restore(s, 60, 0, w.client, vs, NULL, &r));
  expect_bytes(&w, r, data, sizeof(data));
  OK(pw_buffer_release(w.client, r));
  OK(pw_snapshotter_destroy(s));
  snap_world_deinit(&w);
}

Test(snapshot, bad_input_gets_clear_statuses) {
  snap_world_t w;
  OK(snap_world_init(&w, 2, 1));
  pw_vslice_t vs;
  OK(snap_vslice(&w, 0, 1, &vs));
  pw_array_spec_t spec = {PW_DTYPE_F32, {2, {4, 2}}, pw_sharding_replicated()};
  float data[8] = {0};
  pw_buffer_t b;
  OK(pw_buffer_from_host(w.client, vs, &spec, data, sizeof(data), &b));
  pw_snapshotter_t* s = NULL;
  FAILS(pw_snapshotter_create(NULL, NULL, &s), PW_STATUS_INVALID_ARGUMENT, "NULL");
  FAILS(pw_snapshotter_create(w.client, NULL, NULL), PW_STATUS_INVALID_ARGUMENT, "NULL");
  pw_snapshotter_options_t o;
  pw_snapshotter_options_init(&o);
  o.struct_size = 8;
  FAILS(pw_snapshotter_create(w.client, &o, &s), PW_STATUS_INVALID_ARGUMENT, "struct_size");
  pw_snapshotter_options_init(&o);
  o.key_prefix = "bad/prefix";
  FAILS(pw_snapshotter_create(w.client, &o, &s), PW_STATUS_INVALID_ARGUMENT, "key_prefix");
  pw_snapshotter_options_init(&o);
  o.chunk_bytes = 100;
  FAILS(pw_snapshotter_create(w.client, &o, &s), PW_STATUS_INVALID_ARGUMENT, "chunk_bytes");
  pw_snapshotter_options_init(&o);
  o.keep = 100000;
  FAILS(pw_snapshotter_create(w.client, &o, &s), PW_STATUS_INVALID_ARGUMENT, "keep");
  pw_snapshotter_options_init(&o);
  o.allocator.alloc = pw_allocator_system().alloc;
  FAILS(pw_snapshotter_create(w.client, &o, &s), PW_STATUS_INVALID_ARGUMENT, "allocator");
  cr_assert_null(s);
  OK(pw_snapshotter_destroy(NULL));

  s = make_snapshotter(&w, 2);
  FAILS(pw_snapshot_take(NULL, 1, &b, NULL, 1, NULL, NULL), PW_STATUS_INVALID_ARGUMENT, "NULL");
  FAILS(pw_snapshot_take(s, 1, NULL, NULL, 1, NULL, NULL), PW_STATUS_INVALID_ARGUMENT, "NULL");
  FAILS(pw_snapshot_take(s, 1, &b, NULL, 0, NULL, NULL), PW_STATUS_INVALID_ARGUMENT, "count 0");
  char longname[100];
  memset(longname, 'a', sizeof(longname) - 1);
  longname[99] = '\0';
  const char* names[1] = {longname};
  FAILS(pw_snapshot_take(s, 1, &b, names, 1, NULL, NULL), PW_STATUS_INVALID_ARGUMENT, "names[0]");
  pw_buffer_t forged = {b.id ^ 0x5555};
  FAILS(pw_snapshot_take(s, 1, &forged, NULL, 1, NULL, NULL), PW_STATUS_NOT_FOUND, "buffers[0]");
  /* Another client's buffer. */
  pw_client_t* other;
  OK(pw_client_create(w.rt, NULL, &other));
  pw_vslice_t ovs;
  pw_mesh_shape_t m1 = PW_MESH_SHAPE_INIT(1, 1);
  OK(pw_vslice_create(other, &m1, 0, &ovs));
  pw_buffer_t ob;
  OK(pw_buffer_from_host(other, ovs, &spec, data, sizeof(data), &ob));
  pw_buffer_t two[2] = {b, ob};
  FAILS(pw_snapshot_take(s, 1, two, NULL, 2, NULL, NULL), PW_STATUS_PERMISSION_DENIED,
        "buffers[1]");
  cr_assert_eq(pw_client_live_handles(w.client), 2, "a failed take leaves no pin behind");
  /* A snapshot of our client restores onto the other client's vslice. */
  pw_event_t* copied;
  OK(pw_snapshot_take(s, 1, &b, NULL, 1, &copied, NULL));
  OK(wait_event(copied));
  pw_buffer_t r;
  OK(pw_snapshot_restore(s, 1, 0, other, ovs, NULL, &r));
  OK(pw_buffer_release(other, r));
  OK(pw_buffer_release(other, ob));
  OK(pw_client_destroy(other));
  /* Restore errors. */
  FAILS(pw_snapshot_restore(s, 2, 0, w.client, vs, NULL, &r), PW_STATUS_NOT_FOUND, "step 2");
  FAILS(pw_snapshot_restore(s, 1, 1, w.client, vs, NULL, &r), PW_STATUS_OUT_OF_RANGE, "buffer 1");
  FAILS(pw_snapshot_restore(NULL, 1, 0, w.client, vs, NULL, &r), PW_STATUS_INVALID_ARGUMENT, "NULL");
  FAILS(pw_snapshot_restore(s, 1, 0, NULL, vs, NULL, &r), PW_STATUS_INVALID_ARGUMENT, "NULL");
  pw_array_spec_t wrong = spec;
  wrong.dtype = PW_DTYPE_I32;
  FAILS(pw_snapshot_restore(s, 1, 0, w.client, vs, &wrong, &r), PW_STATUS_INVALID_ARGUMENT,
        "buffer 0 ('') of step 1 is f32[4,2]; the spec asks for i32[4,2]");
  wrong = spec;
  wrong.shape.dims[0] = 2;
  wrong.shape.dims[1] = 4;
  FAILS(pw_snapshot_restore(s, 1, 0, w.client, vs, &wrong, &r), PW_STATUS_INVALID_ARGUMENT,
        "f32[2,4]");
  wrong = spec;
  wrong.sharding = pw_sharding_split(1, 3);
  FAILS(pw_snapshot_restore(s, 1, 0, w.client, vs, &wrong, &r), PW_STATUS_INVALID_ARGUMENT,
        "buffer 0");
  pw_buffer_t rs[2];
  FAILS(pw_snapshot_restore_all(s, 1, w.client, vs, NULL, 2, rs), PW_STATUS_INVALID_ARGUMENT,
        "count 2");
  cr_assert_eq(rs[0].id, 0);
  /* Queries. */
  uint64_t step;
  uint32_t count;
  FAILS(pw_snapshotter_latest_step(NULL, &step), PW_STATUS_INVALID_ARGUMENT, "NULL");
  FAILS(pw_snapshotter_steps(s, NULL, 3, &count), PW_STATUS_INVALID_ARGUMENT, "NULL");
  pw_snapshot_info_t info = {.struct_size = 4};
  FAILS(pw_snapshot_info(s, 1, &info), PW_STATUS_INVALID_ARGUMENT, "struct_size");
  FAILS(pw_snapshot_info(s, 1, NULL), PW_STATUS_INVALID_ARGUMENT, "NULL");
  pw_snapshot_buffer_info_t bi = {.struct_size = sizeof(bi)};
  FAILS(pw_snapshot_buffer_info(s, 1, 3, &bi), PW_STATUS_OUT_OF_RANGE, "buffer 3");
  /* A newer caller's bigger struct: the bytes past ours are left alone. */
  struct {
    pw_snapshot_info_t info;
    uint64_t future;
  } big;
  memset(&big, 0xAB, sizeof(big));
  big.info.struct_size = sizeof(big);
  OK(pw_snapshot_info(s, 1, &big.info));
  cr_assert_eq(big.info.buffer_count, 1);
  cr_assert_eq(big.info.struct_size, sizeof(big));
  cr_assert_eq(big.future, 0xABABABABABABABABull);
  FAILS(pw_snapshotter_load_latest(s, &step), PW_STATUS_FAILED_PRECONDITION, "no store");
  FAILS(pw_snapshotter_flush(NULL, PW_INFINITE_FUTURE), PW_STATUS_INVALID_ARGUMENT, "NULL");
  /* Copies may still run (they are asynchronous): wait, then an
   * immediate flush of an idle snapshotter is OK. */
  OK(pw_snapshotter_flush(s, pw_clock_now() + 10000000000ll));
  OK(pw_snapshotter_flush(s, PW_IMMEDIATE_PAST));
  OK(pw_snapshotter_destroy(s));
  OK(pw_buffer_release(w.client, b));
  snap_world_deinit(&w);
}

Test(snapshot, too_many_in_flight_and_destroy_cancels_waiting_takes) {
  snap_world_t w;
  OK(snap_world_init(&w, 1, 1));
  pw_vslice_t vs;
  OK(snap_vslice(&w, 0, 1, &vs));
  pw_array_spec_t spec = {PW_DTYPE_F32, {1, {4}}, pw_sharding_replicated()};
  float data[4] = {1, 2, 3, 4};
  pw_buffer_t in, out;
  OK(pw_buffer_from_host(w.client, vs, &spec, data, sizeof(data), &in));
  snap_gate_close();
  OK(snap_produce(&w, vs, &spec, "gate", in, &out));
  pw_snapshotter_options_t o;
  pw_snapshotter_options_init(&o);
  o.max_in_flight = 2;
  pw_snapshotter_t* s;
  OK(pw_snapshotter_create(w.client, &o, &s));
  pw_event_t *c1, *c2;
  OK(pw_snapshot_take(s, 1, &out, NULL, 1, &c1, NULL));
  OK(pw_snapshot_take(s, 2, &out, NULL, 1, &c2, NULL));
  FAILS(pw_snapshot_take(s, 3, &out, NULL, 1, NULL, NULL), PW_STATUS_RESOURCE_EXHAUSTED,
        "max_in_flight 2");
  FAILS(pw_snapshotter_flush(s, pw_deadline_from_timeout(1000000)), PW_STATUS_DEADLINE_EXCEEDED,
        "2 snapshots");
  OK(pw_snapshotter_destroy(s));
  FAILS(wait_event(c1), PW_STATUS_CANCELLED, "destroyed");
  FAILS(wait_event(c2), PW_STATUS_CANCELLED, "destroyed");
  snap_gate_open();
  OK(pw_buffer_release(w.client, in));
  OK(pw_buffer_release(w.client, out));
  OK(pw_client_wait_idle(w.client, PW_INFINITE_FUTURE));
  snap_world_deinit(&w);
}

/* ---- failing allocator ------------------------------------------------------------ */

typedef struct sweep_ctx_t {
  snap_world_t* w;
  pw_vslice_t vs;
  pw_buffer_t bufs[2];
  const void* data[2];
  size_t sizes[2];
} sweep_ctx_t;

static bool sweep_take_restore(pw_allocator_t allocator, bool expect_failure, void* user) {
  sweep_ctx_t* c = user;
  pw_snapshotter_options_t o;
  pw_snapshotter_options_init(&o);
  o.allocator = allocator;
  o.keep = 1;
  pw_snapshotter_t* s = NULL;
  pw_status_t st = pw_snapshotter_create(c->w->client, &o, &s);
  if (st != NULL) return pw_sweep_path_end(st, expect_failure, false, "create");
  pw_event_t* copied = NULL;
  bool ok = true;
  st = pw_snapshot_take(s, 1, c->bufs, NULL, 2, &copied, NULL);
  if (st == NULL) st = wait_event(copied);
  pw_buffer_t r[2] = {{0}, {0}};
  if (st == NULL) st = pw_snapshot_restore_all(s, 1, c->w->client, c->vs, NULL, 2, r);
  for (int i = 0; st == NULL && i < 2; ++i) {
    void* got = malloc(c->sizes[i]);
    st = pw_buffer_to_host(c->w->client, r[i], got, c->sizes[i], PW_INFINITE_FUTURE);
    ok = ok && memcmp(got, c->data[i], c->sizes[i]) == 0;
    free(got);
  }
  for (int i = 0; i < 2; ++i) {
    if (r[i].id != 0) pw_status_ignore(pw_buffer_release(c->w->client, r[i]));
  }
  pw_status_ignore(pw_snapshotter_destroy(s));
  return pw_sweep_path_end(st, expect_failure, ok, "take/restore");
}

Test(snapshot, every_allocation_failure_is_reported_and_leaks_nothing) {
  snap_world_t w;
  OK(snap_world_init(&w, 1, 2));
  sweep_ctx_t c = {.w = &w};
  OK(snap_vslice(&w, 0, 1, &c.vs));
  pw_array_spec_t spec = {PW_DTYPE_F32, {1, {32}}, pw_sharding_split(0, 0)};
  float a[32], b[32];
  snap_fill(a, sizeof(a), 1);
  snap_fill(b, sizeof(b), 2);
  OK(pw_buffer_from_host(w.client, c.vs, &spec, a, sizeof(a), &c.bufs[0]));
  OK(pw_buffer_from_host(w.client, c.vs, &spec, b, sizeof(b), &c.bufs[1]));
  c.data[0] = a;
  c.data[1] = b;
  c.sizes[0] = c.sizes[1] = sizeof(a);
  char why[256] = "";
  int swept = pw_test_allocator_sweep(sweep_take_restore, &c, why);
  cr_assert(swept > 5, "sweep: %d (%s)", swept, why);
  OK(pw_buffer_release(w.client, c.bufs[0]));
  OK(pw_buffer_release(w.client, c.bufs[1]));
  snap_world_deinit(&w);
}
