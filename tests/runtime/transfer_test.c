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
  pw_slice_desc_t slices[2] = {{"a", {1, {4}}, 0, 0, 0}, {"b", {2, {2, 4}}, 0, 4, 1}};
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
  pw_mesh_shape_t m4 = {1, {4}}, m24 = {2, {2, 4}};
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
  pw_array_spec_t xs = {PW_DTYPE_F32, {2, {R, C}}, {PW_SHARDING_SPLIT, 0, 0}};
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
  pw_client_slice_stats_t on_a, on_b;
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
  pw_array_spec_t xs = {PW_DTYPE_F32, {1, {16}}, {PW_SHARDING_SPLIT, 0, 0}};
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
  pw_array_spec_t odd = {PW_DTYPE_F32, {1, {12}}, {PW_SHARDING_SPLIT, 0, 0}};
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
  pw_array_spec_t s44 = {PW_DTYPE_F32, {2, {4, 4}}, {PW_SHARDING_SPLIT, 0, 0}};
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
