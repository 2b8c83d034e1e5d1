/* Transfer nodes: resharding between slices through the transport, with
 * only the needed shard-to-shard copies. A counting wrapper around the
 * bundled inproc transport records how many copies and bytes moved. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "pathways/transports/inproc.h"
#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(transfer, .fini = pw_test_check_leaks);

typedef struct counting_t {
  pw_transport_t inner;
  atomic_ulong copies;
  atomic_ulong bytes;
} counting_t;

static void counting_destroy(void* self) {
  counting_t* c = self;
  c->inner.vtable->destroy(c->inner.self);
}

static pw_status_t counting_copy(void* self, const pw_transport_copy_t* copy) {
  counting_t* c = self;
  atomic_fetch_add(&c->copies, 1);
  atomic_fetch_add(&c->bytes, copy->size);
  return c->inner.vtable->copy(c->inner.self, copy);
}

static const pw_transport_vtable_t counting_vtable = {
    .struct_size = sizeof(pw_transport_vtable_t),
    .name = "counting",
    .version = 1,
    .destroy = counting_destroy,
    .copy = counting_copy,
};

typedef struct world_t {
  pw_runtime_t* rt;
  pw_client_t* client;
  pw_vslice_t a;  /* mesh 4, devices 0..3 */
  pw_vslice_t b;  /* mesh 2x4, devices 4..11 */
  pw_backend_t backend;
  counting_t counter;
} world_t;

static void world_init(world_t* w) {
  memset(w, 0, sizeof(*w));
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = 12;
  pw_backend_t backend;
  OK(pw_cpu_backend_create(&o, &backend));
  w->backend = backend;
  OK(pw_inproc_transport_create(NULL, &w->counter.inner));
  pw_slice_desc_t slices[2] = {{"a", PW_MESH_SHAPE_INIT(1, 4), 0, 0, 0}, {"b", PW_MESH_SHAPE_INIT(2, 2, 4), 0, 4, 1}};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = 2;
  ro.transport = (pw_transport_t){&counting_vtable, &w->counter};
  OK(pw_runtime_create(&ro, &w->rt));
  OK(pw_client_create(w->rt, NULL, &w->client));
  pw_mesh_shape_t m4 = PW_MESH_SHAPE_INIT(1, 4), m24 = PW_MESH_SHAPE_INIT(2, 2, 4);
  OK(pw_vslice_create(w->client, &m4, 0, &w->a));
  OK(pw_vslice_create(w->client, &m24, 0, &w->b));
}

static void world_deinit(world_t* w) {
  pw_client_destroy(w->client);
  pw_runtime_destroy(w->rt);
}

Test(transfer, reshards_across_slices_with_only_the_needed_copies) {
  world_t w;
  world_init(&w);
  enum { R = 8, C = 8 };
  pw_array_spec_t xs = {PW_DTYPE_F32, {2, {R, C}}, PW_SHARDING_SPLIT_INIT(0, 0)};
  pw_graph_t g;
  OK(pw_graph_create(w.client, &g));
  uint32_t x, rep, col, back;
  OK(pw_graph_add_parameter(w.client, g, w.a, &xs, &x));
  /* split(0) over 4 -> replicated over 8 */
  OK(pw_graph_add_transfer(w.client, g, "to_b", pw_value(x, 0), w.b, pw_sharding_replicated(),
                           &rep));
  /* replicated over 8 -> split(1) over mesh axis 1 (4 parts) */
  OK(pw_graph_add_transfer(w.client, g, "cols", pw_value(rep, 0), w.b, pw_sharding_split(1, 1),
                           &col));
  /* back to slice a, split(1) over its 4 devices */
  OK(pw_graph_add_transfer(w.client, g, "home", pw_value(col, 0), w.a, pw_sharding_split(1, 0),
                           &back));
  OK(pw_graph_add_output(w.client, g, pw_value(rep, 0)));
  OK(pw_graph_add_output(w.client, g, pw_value(col, 0)));
  OK(pw_graph_add_output(w.client, g, pw_value(back, 0)));
  float data[R * C];
  for (int i = 0; i < R * C; ++i) data[i] = (float)i;
  pw_buffer_t arg, outs[3];
  OK(pw_buffer_from_host(w.client, w.a, &xs, data, sizeof(data), &arg));
  pw_event_t* done;
  OK(pw_graph_submit(w.client, g, &arg, 1, NULL, outs, 3, &done));
  OK(pw_fixture_wait(done));
  /* Completions are counted per op's slice ("home" runs on a, "to_b" and
   * "cols" on b) by the time the done event fires. */
  pw_client_slice_stats_t on_a = {.struct_size = sizeof(pw_client_slice_stats_t)},
                          on_b = {.struct_size = sizeof(pw_client_slice_stats_t)};
  OK(pw_client_slice_stats(w.client, 0, &on_a));
  OK(pw_client_slice_stats(w.client, 1, &on_b));
  cr_assert_eq(on_a.ops_completed, 1);
  cr_assert_eq(on_b.ops_completed, 2);
  for (int k = 0; k < 3; ++k) {
    float got[R * C];
    OK(pw_buffer_to_host(w.client, outs[k], got, sizeof(got), PW_INFINITE_FUTURE));
    cr_assert_eq(memcmp(got, data, sizeof(data)), 0, "output %d differs", k);
  }
  /* Copies: to_b: each of 8 devices gets the 4 source blocks (2 rows of 8
   * contiguous floats each) = 32 copies of 64 bytes; cols: each of 8
   * devices copies its 2 columns out of a full replica: 8 runs of 8 bytes
   * = 64 copies; home: each of 4 devices receives one whole shard of
   * 'cols', laid out exactly like its own (8 rows x 2 columns): one run of
   * 64 bytes each = 4 copies. Every byte moves once per destination. */
  cr_assert_eq(atomic_load(&w.counter.copies), 32 + 64 + 4);
  cr_assert_eq(atomic_load(&w.counter.bytes), 8 * 256 + 8 * 64 + 4 * 64);
  world_deinit(&w);
}

Test(transfer, unchanged_sharding_copies_each_shard_once_and_errors_propagate) {
  world_t w;
  world_init(&w);
  pw_array_spec_t xs = {PW_DTYPE_F32, {1, {16}}, PW_SHARDING_SPLIT_INIT(0, 0)};
  pw_graph_t g;
  OK(pw_graph_create(w.client, &g));
  uint32_t x, y;
  OK(pw_graph_add_parameter(w.client, g, w.a, &xs, &x));
  OK(pw_graph_add_transfer(w.client, g, "same", pw_value(x, 0), w.a, pw_sharding_split(0, 0), &y));
  OK(pw_graph_add_output(w.client, g, pw_value(y, 0)));
  float data[16] = {0};
  pw_buffer_t arg, out;
  OK(pw_buffer_from_host(w.client, w.a, &xs, data, sizeof(data), &arg));
  pw_event_t* done;
  OK(pw_graph_submit(w.client, g, &arg, 1, NULL, &out, 1, &done));
  OK(pw_fixture_wait(done));
  cr_assert_eq(atomic_load(&w.counter.copies), 4);
  /* A destination sharding that does not divide is an error naming the node. */
  pw_graph_t bad;
  OK(pw_graph_create(w.client, &bad));
  OK(pw_graph_add_parameter(w.client, bad, w.a, &xs, &x));
  OK(pw_graph_add_transfer(w.client, bad, "odd", pw_value(x, 0), w.b, pw_sharding_split(0, PW_MESH_AXIS_ALL), &y));
  OK(pw_graph_finalize(w.client, bad));
  pw_graph_t bad2;
  pw_array_spec_t odd = {PW_DTYPE_F32, {1, {12}}, PW_SHARDING_SPLIT_INIT(0, 0)};
  OK(pw_graph_create(w.client, &bad2));
  OK(pw_graph_add_parameter(w.client, bad2, w.a, &odd, &x));
  OK(pw_graph_add_transfer(w.client, bad2, "odd", pw_value(x, 0), w.b, pw_sharding_split(0, PW_MESH_AXIS_ALL), &y));
  FAILS(pw_graph_finalize(w.client, bad2), PW_STATUS_INVALID_ARGUMENT,
        "graph node 1 (\"odd\"): destination sharding on slice 'b': dimension 0 (size 12) is "
        "not divisible into 8 shards");
  /* A transfer whose input failed fails too, naming the input. */
  pw_graph_t chain;
  OK(pw_graph_create(w.client, &chain));
  pw_executable_t fill;
  OK(pw_executable_compile(w.client, w.a,
                           "kernel all_reduce_sum\ninput f32[4,4] split(0,0)\noutput f32[4] replicated\n",
                           strlen("kernel all_reduce_sum\ninput f32[4,4] split(0,0)\noutput f32[4] replicated\n"),
                           NULL, &fill));
  pw_array_spec_t s44 = {PW_DTYPE_F32, {2, {4, 4}}, PW_SHARDING_SPLIT_INIT(0, 0)};
  uint32_t p, r, t;
  OK(pw_graph_add_parameter(w.client, chain, w.a, &s44, &p));
  OK(pw_graph_add_compute(w.client, chain, "sum", fill, w.a, &(pw_value_t){p, 0}, 1, &r));
  OK(pw_graph_add_transfer(w.client, chain, "ship", pw_value(r, 0), w.b, pw_sharding_replicated(), &t));
  OK(pw_graph_add_output(w.client, chain, pw_value(t, 0)));
  float m[16] = {0};
  pw_buffer_t marg, mout;
  OK(pw_buffer_from_host(w.client, w.a, &s44, m, sizeof(m), &marg));
  OK(pw_cpu_backend_set_health(w.backend, 1, PW_DEVICE_FAILED));
  pw_event_t* d2;
  OK(pw_graph_submit(w.client, chain, &marg, 1, NULL, &mout, 1, &d2));
  pw_status_t s = pw_fixture_wait(d2);
  cr_assert_eq(pw_status_code(s), PW_STATUS_UNAVAILABLE, "%s", pw_status_message(s));
  pw_status_free(s);
  float got[4];
  FAILS(pw_buffer_to_host(w.client, mout, got, sizeof(got), PW_INFINITE_FUTURE),
        PW_STATUS_UNAVAILABLE, "input node 1 (\"sum\") failed");
  world_deinit(&w);
}

/* ---- strided plans -------------------------------------------------------
 * A transfer's plan has one record per intersecting pair of shards,
 * however many rows it moves; the transport walks the rows (copy_strided)
 * or, for a transport without it, the dispatcher issues one copy per row. */

typedef struct strided_t {
  pw_transport_t inner;
  bool strided;           /* offer copy_strided */
  atomic_ulong copies;    /* copy calls */
  atomic_ulong strided_copies;
  atomic_ulong rows;      /* rows moved, both kinds */
  atomic_ulong bytes;
  atomic_ulong two_level;  /* strided copies with two levels */
} strided_t;

static void strided_destroy(void* self) {
  strided_t* c = self;
  c->inner.vtable->destroy(c->inner.self);
}

static pw_status_t strided_copy(void* self, const pw_transport_copy_t* copy) {
  strided_t* c = self;
  atomic_fetch_add(&c->copies, 1);
  atomic_fetch_add(&c->rows, 1);
  atomic_fetch_add(&c->bytes, copy->size);
  return c->inner.vtable->copy(c->inner.self, copy);
}

static pw_status_t strided_copy_strided(void* self, const pw_transport_copy_t* copy) {
  strided_t* c = self;
  unsigned long rows = 1;
  for (uint32_t k = 0; k < copy->stride_count; ++k) rows *= copy->strides[k].count;
  atomic_fetch_add(&c->strided_copies, 1);
  if (copy->stride_count == 2) atomic_fetch_add(&c->two_level, 1);
  atomic_fetch_add(&c->rows, rows);
  atomic_fetch_add(&c->bytes, rows * copy->size);
  return c->inner.vtable->copy_strided(c->inner.self, copy);
}

static const pw_transport_vtable_t strided_vtable = {
    .struct_size = sizeof(pw_transport_vtable_t),
    .name = "strided",
    .version = 2,
    .destroy = strided_destroy,
    .copy = strided_copy,
    .copy_strided = strided_copy_strided,
};

/* Without copy_strided: a v1 transport (its vtable ends before it). */
static const pw_transport_vtable_t rows_vtable = {
    .struct_size = PW_TRANSPORT_VTABLE_SIZE_V1,
    .name = "rows",
    .version = 1,
    .destroy = strided_destroy,
    .copy = strided_copy,
};

typedef struct world2_t {
  pw_test_allocator_t counter;
  pw_runtime_t* rt;
  pw_client_t* client;
  pw_vslice_t a;   /* mesh 4, devices 0..3 */
  pw_vslice_t b;   /* mesh 2x4, devices 4..11 */
  pw_vslice_t c;   /* mesh 2, devices 12..13 */
  pw_vslice_t d;   /* mesh 2, devices 14..15 */
  strided_t transport;
} world2_t;

static void world2_init(world2_t* w, bool strided) {
  memset(w, 0, sizeof(*w));
  pw_test_allocator_init(&w->counter);
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = 16;
  pw_backend_t backend;
  OK(pw_cpu_backend_create(&o, &backend));
  OK(pw_inproc_transport_create(NULL, &w->transport.inner));
  w->transport.strided = strided;
  pw_slice_desc_t slices[4] = {{"a", PW_MESH_SHAPE_INIT(1, 4), 0, 0, 0},
                               {"b", PW_MESH_SHAPE_INIT(2, 2, 4), 0, 4, 1},
                               {"c", PW_MESH_SHAPE_INIT(1, 2), 0, 12, 2},
                               {"d", PW_MESH_SHAPE_INIT(1, 2), 0, 14, 3}};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.allocator = pw_test_allocator(&w->counter);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = 4;
  ro.transport = (pw_transport_t){strided ? &strided_vtable : &rows_vtable, &w->transport};
  OK(pw_runtime_create(&ro, &w->rt));
  OK(pw_client_create(w->rt, NULL, &w->client));
  pw_mesh_shape_t m4 = PW_MESH_SHAPE_INIT(1, 4), m24 = PW_MESH_SHAPE_INIT(2, 2, 4), m2 = PW_MESH_SHAPE_INIT(1, 2);
  OK(pw_vslice_create(w->client, &m4, 0, &w->a));
  OK(pw_vslice_create(w->client, &m24, 0, &w->b));
  OK(pw_vslice_create(w->client, &m2, 0, &w->c));
  OK(pw_vslice_create(w->client, &m2, 0, &w->d));
}

static void world2_deinit(world2_t* w) {
  pw_client_destroy(w->client);
  pw_runtime_destroy(w->rt);
  cr_assert_eq(pw_test_allocator_live(&w->counter), 0);
}

Test(transfer, row_heavy_transfer_plans_one_record_per_shard_pair) {
  /* u8[2^22, 2] split(1) over 2 -> replicated over 2: every destination
   * device reads 2^22 one-byte rows from each source block. A plan of one
   * record per row took 1.5 GiB and 4 s to finalize. */
  enum { ROWS = 1 << 22 };
  world2_t w;
  world2_init(&w, true);
  pw_array_spec_t xs = {PW_DTYPE_U8, {2, {ROWS, 2}}, PW_SHARDING_SPLIT_INIT(1, 0)};
  pw_graph_t g;
  OK(pw_graph_create(w.client, &g));
  uint32_t x, y;
  OK(pw_graph_add_parameter(w.client, g, w.c, &xs, &x));
  OK(pw_graph_add_transfer(w.client, g, "gather", pw_value(x, 0), w.d, pw_sharding_replicated(),
                           &y));
  OK(pw_graph_add_output(w.client, g, pw_value(y, 0)));
  size_t before = atomic_load(&w.counter.live_bytes);
  atomic_store(&w.counter.peak_bytes, before);
  OK(pw_graph_finalize(w.client, g));
  size_t plan = atomic_load(&w.counter.peak_bytes) - before;
  cr_assert_leq(plan, 64u << 10, "finalizing took %zu bytes", plan);
  unsigned char* data = malloc(2 * ROWS);
  unsigned char* got = malloc(2 * ROWS);
  cr_assert(data != NULL && got != NULL);
  for (size_t i = 0; i < 2u * ROWS; ++i) data[i] = (unsigned char)(i * 131 + (i >> 9));
  pw_buffer_t arg, out;
  OK(pw_buffer_from_host(w.client, w.c, &xs, data, 2 * ROWS, &arg));
  pw_event_t* done;
  OK(pw_graph_submit(w.client, g, &arg, 1, NULL, &out, 1, &done));
  OK(pw_fixture_wait(done));
  /* 2 destinations x 2 source blocks, each one strided copy of 2^22 rows. */
  cr_assert_eq(atomic_load(&w.transport.strided_copies), 4);
  cr_assert_eq(atomic_load(&w.transport.copies), 0);
  cr_assert_eq(atomic_load(&w.transport.rows), 4ul * ROWS);
  cr_assert_eq(atomic_load(&w.transport.bytes), 4ul * ROWS);
  OK(pw_buffer_to_host(w.client, out, got, 2 * ROWS, PW_INFINITE_FUTURE));
  cr_assert_eq(memcmp(got, data, 2 * ROWS), 0);
  free(data);
  free(got);
  world2_deinit(&w);
}

/* Shardings of an array of |shape| over |mesh| (|axes| mesh axes to split
 * over, PW_MESH_AXIS_ALL included), at most 32. */
static uint32_t shardings_of(const pw_shape_t* shape, const pw_mesh_shape_t* mesh,
                             pw_sharding_t* out) {
  uint32_t n = 0;
  out[n++] = pw_sharding_replicated();
  for (uint32_t t = 0; t < shape->rank; ++t) {
    for (uint32_t a = 0; a <= mesh->rank; ++a) {
      uint32_t axis = a == mesh->rank ? PW_MESH_AXIS_ALL : a;
      if (a == mesh->rank && mesh->rank == 1) continue;
      pw_sharding_t s = pw_sharding_split(t, axis);
      pw_status_t st = pw_sharding_check(&s, shape, mesh);
      if (st == NULL) out[n++] = s;
      pw_status_free(st);
    }
  }
  return n;
}

/* Moves |shape| (i32, element i holds i) from every sharding on slice a to
 * every sharding on slice b and back to a replicated; every output must
 * read back as the input. Returns the rows the transport moved. */
static unsigned long reshard_everything(world2_t* w, const pw_shape_t* shape) {
  pw_mesh_shape_t m4 = PW_MESH_SHAPE_INIT(1, 4), m24 = PW_MESH_SHAPE_INIT(2, 2, 4);
  pw_sharding_t from[32], to[32];
  uint32_t nf = shardings_of(shape, &m4, from), nt = shardings_of(shape, &m24, to);
  int64_t count = pw_shape_element_count(shape);
  int32_t* data = malloc((size_t)count * sizeof(int32_t));
  int32_t* got = malloc((size_t)count * sizeof(int32_t));
  for (int64_t i = 0; i < count; ++i) data[i] = (int32_t)i;
  size_t bytes = (size_t)count * sizeof(int32_t);
  char text[128];
  pw_shape_format(PW_DTYPE_I32, shape, text, sizeof(text));
  for (uint32_t i = 0; i < nf; ++i) {
    for (uint32_t j = 0; j < nt; ++j) {
      pw_array_spec_t xs = {PW_DTYPE_I32, *shape, from[i]};
      pw_graph_t g;
      OK(pw_graph_create(w->client, &g));
      uint32_t x, y, z;
      OK(pw_graph_add_parameter(w->client, g, w->a, &xs, &x));
      OK(pw_graph_add_transfer(w->client, g, "there", pw_value(x, 0), w->b, to[j], &y));
      OK(pw_graph_add_transfer(w->client, g, "back", pw_value(y, 0), w->a,
                               pw_sharding_replicated(), &z));
      OK(pw_graph_add_output(w->client, g, pw_value(y, 0)));
      OK(pw_graph_add_output(w->client, g, pw_value(z, 0)));
      pw_buffer_t arg, outs[2];
      OK(pw_buffer_from_host(w->client, w->a, &xs, data, bytes, &arg));
      pw_event_t* done;
      OK(pw_graph_submit(w->client, g, &arg, 1, NULL, outs, 2, &done));
      OK(pw_fixture_wait(done));
      for (int k = 0; k < 2; ++k) {
        memset(got, 0xff, bytes);
        OK(pw_buffer_to_host(w->client, outs[k], got, bytes, PW_INFINITE_FUTURE));
        char a[64], b[64];
        pw_sharding_format(&from[i], a, sizeof(a));
        pw_sharding_format(&to[j], b, sizeof(b));
        cr_assert_eq(memcmp(got, data, bytes), 0, "%s %s -> %s: output %d differs", text, a, b,
                     k);
        OK(pw_buffer_release(w->client, outs[k]));
      }
      OK(pw_buffer_release(w->client, arg));
      OK(pw_graph_release(w->client, g));
    }
  }
  free(data);
  free(got);
  return atomic_load(&w->transport.rows);
}

Test(transfer, strided_runs_are_byte_exact_for_every_pair_of_shardings) {
  unsigned long two_level = 0;
  /* Rank, then dimensions. */
  static const int64_t shapes[][6] = {
      {1, 8}, {2, 8, 12}, {3, 4, 8, 6}, {3, 8, 2, 4}, {4, 2, 4, 8, 3}, {5, 2, 8, 1, 4, 2}};
  for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); ++s) {
    pw_shape_t shape = pw_shape_make((uint32_t)shapes[s][0], &shapes[s][1]);
    /* With copy_strided and with one copy per row: the same rows. */
    world2_t strided, rows;
    world2_init(&strided, true);
    world2_init(&rows, false);
    unsigned long a = reshard_everything(&strided, &shape);
    unsigned long b = reshard_everything(&rows, &shape);
    cr_assert_eq(a, b, "rank %u: %lu rows strided, %lu one by one", shape.rank, a, b);
    /* Rank 1: every intersection is one contiguous run. */
    if (shape.rank > 1) cr_assert_gt(atomic_load(&strided.transport.strided_copies), 0);
    two_level += atomic_load(&strided.transport.two_level);
    cr_assert_eq(atomic_load(&rows.transport.strided_copies), 0);
    world2_deinit(&strided);
    world2_deinit(&rows);
  }
  /* Splits along two axes that are not the outermost need both levels. */
  cr_assert_gt(two_level, 0);
}
