/* Host launch (lib/sched/lanes.c): a slice's devices of one host are one
 * unit of dispatch, launched with one launch_host per op. On the sim
 * (HOST memory, so collectives and copies compute real values) with
 * devices_per_host chips per host: every op is one host launch per lane
 * and no per-device launch (the sim's stats count both), values equal
 * those of the same graphs with disable_host_launch; lanes of unequal
 * sizes (a slice that starts mid-host); transfers into lanes (split and
 * resharded); a spanning virtual slice over two slices of lanes;
 * queue-ordered lanes; a chip failure reported once for its lane, naming
 * the lane, then repaired; THREADED completions from many submissions. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <string.h>

#include "pathways/backends/sim.h"
#include "pathways/pathways.h"
#include "runtime/checks.h"
#include "support/test_allocators.h"

TestSuite(lanes, .fini = pw_test_check_leaks);

#define PW_WAIT_NS (30 * (pw_time_t)1000000000)

typedef struct env_t {
  pw_runtime_t* rt;
  pw_backend_t sim; /* a copy, for stats; the runtime owns it */
  pw_client_t* client;
  pw_vslice_t vs[2];
  uint32_t devices;  /* per runtime slice */
} env_t;

typedef struct env_cfg_t {
  uint32_t sim_slices, per_sim_slice, per_host;
  uint32_t slices, devices, first_device; /* runtime slices of |devices| from first_device */
  uint32_t queue_depth;
  pw_sim_mode_t mode;
  bool no_host_launch;
} env_cfg_t;

static void env_init(env_t* e, const env_cfg_t* c) {
  memset(e, 0, sizeof(*e));
  pw_sim_backend_options_t so;
  pw_sim_backend_options_init(&so);
  so.slice_count = c->sim_slices;
  so.devices_per_slice = c->per_sim_slice;
  so.devices_per_host = c->per_host;
  so.mode = c->mode;
  so.queue_depth = c->queue_depth;
  OK(pw_sim_backend_create(&so, &e->sim));
  pw_slice_desc_t descs[2];
  memset(descs, 0, sizeof(descs));
  for (uint32_t s = 0; s < c->slices; ++s) {
    descs[s].mesh = pw_mesh_shape_make(1, &c->devices);
    descs[s].first_device = c->first_device + s * c->devices;
    descs[s].host = s;
  }
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &e->sim;
  ro.backend_count = 1;
  ro.slices = descs;
  ro.slice_count = c->slices;
  ro.disable_host_launch = c->no_host_launch;
  OK(pw_runtime_create(&ro, &e->rt));
  OK(pw_client_create(e->rt, NULL, &e->client));
  e->devices = c->devices;
  for (uint32_t s = 0; s < c->slices; ++s) {
    OK(pw_vslice_create(e->client, &descs[s].mesh, PW_VSLICE_DEFAULT, &e->vs[s]));
  }
}

static void env_deinit(env_t* e) {
  for (uint32_t s = 0; s < 2; ++s) {
    if (e->vs[s].id != 0) OK(pw_vslice_release(e->client, e->vs[s]));
  }
  OK(pw_client_destroy(e->client));
  OK(pw_runtime_destroy(e->rt));
}

static pw_sim_stats_t env_stats(env_t* e) {
  pw_sim_stats_t st = {.struct_size = sizeof(pw_sim_stats_t)};
  OK(pw_sim_backend_stats(e->sim, &st));
  return st;
}

/* f32[n] split over the mesh's axis 0 (one element per device). */
static pw_array_spec_t spec_split(uint32_t n) {
  int64_t dim = n;
  return (pw_array_spec_t){PW_DTYPE_F32, pw_shape_make(1, &dim), pw_sharding_split(0, 0)};
}

static pw_executable_t compile(env_t* e, pw_vslice_t vs, const char* kind, uint32_t n) {
  char text[256];
  snprintf(text, sizeof(text),
           "op %s\nkind %s\ntime 1us\ninput f32[%u] split(0,0)\noutput f32[%u] split(0,0)\n",
           kind, kind, n, n);
  pw_executable_t exe;
  OK(pw_executable_compile(e->client, vs, text, strlen(text), NULL, &exe));
  return exe;
}

static pw_buffer_t upload(env_t* e, pw_vslice_t vs, const float* values, uint32_t n) {
  pw_array_spec_t spec = spec_split(n);
  pw_buffer_t b;
  OK(pw_buffer_from_host(e->client, vs, &spec, values, n * sizeof(float), &b));
  return b;
}

static void download(env_t* e, pw_buffer_t b, float* out, uint32_t n) {
  OK(pw_buffer_to_host(e->client, b, out, n * sizeof(float), pw_clock_now() + PW_WAIT_NS));
}

/* Runs |g| on |arg| into one output, waits, returns it. */
static pw_buffer_t run1(env_t* e, pw_graph_t g, pw_buffer_t arg) {
  pw_buffer_t out;
  pw_event_t* done = NULL;
  OK(pw_graph_submit(e->client, g, &arg, 1, NULL, &out, 1, &done));
  OK(pw_event_wait(done, pw_clock_now() + PW_WAIT_NS));
  pw_event_release(done);
  return out;
}

/* parameter -> copy -> all_reduce_sum -> output, on |vs|. */
static pw_graph_t reduce_graph(env_t* e, pw_vslice_t vs, uint32_t n, pw_executable_t* exes) {
  exes[0] = compile(e, vs, "copy", n);
  exes[1] = compile(e, vs, "all_reduce_sum", n);
  pw_graph_t g;
  OK(pw_graph_create(e->client, &g));
  pw_array_spec_t spec = spec_split(n);
  uint32_t p, a, b;
  OK(pw_graph_add_parameter(e->client, g, vs, &spec, &p));
  pw_value_t v = pw_value(p, 0);
  OK(pw_graph_add_compute(e->client, g, "copy", exes[0], vs, &v, 1, &a));
  v = pw_value(a, 0);
  OK(pw_graph_add_compute(e->client, g, "reduce", exes[1], vs, &v, 1, &b));
  OK(pw_graph_add_output(e->client, g, pw_value(b, 0)));
  OK(pw_graph_finalize(e->client, g));
  return g;
}

/* The sum 1 + 2 + ... + n on every device after the reduce graph. */
static void check_reduce(env_t* e, pw_vslice_t vs, uint32_t n, uint64_t want_host_launches,
                         uint64_t want_launches) {
  pw_executable_t exes[2];
  pw_graph_t g = reduce_graph(e, vs, n, exes);
  float in[64], out[64];
  for (uint32_t i = 0; i < n; ++i) in[i] = (float)(i + 1);
  pw_buffer_t arg = upload(e, vs, in, n);
  pw_sim_stats_t before = env_stats(e);
  pw_buffer_t res = run1(e, g, arg);
  download(e, res, out, n);
  pw_sim_stats_t after = env_stats(e);
  for (uint32_t i = 0; i < n; ++i) {
    cr_assert_float_eq(out[i], (float)(n * (n + 1) / 2), 1e-3, "device %u: %f", i, out[i]);
  }
  cr_assert_eq(after.host_launches - before.host_launches, want_host_launches,
               "host launches: %llu, want %llu",
               (unsigned long long)(after.host_launches - before.host_launches),
               (unsigned long long)want_host_launches);
  cr_assert_eq(after.events - before.events, want_launches, "device launches: %llu, want %llu",
               (unsigned long long)(after.events - before.events),
               (unsigned long long)want_launches);
  OK(pw_buffer_release(e->client, arg));
  OK(pw_buffer_release(e->client, res));
  OK(pw_graph_release(e->client, g));
  OK(pw_executable_release(e->client, exes[0]));
  OK(pw_executable_release(e->client, exes[1]));
}

Test(lanes, one_host_launch_per_lane_and_op) {
  /* 8 devices, 4 per host: 2 lanes; 2 ops -> 4 host launches, 16 parts. */
  env_t e;
  env_init(&e, &(env_cfg_t){1, 8, 4, 1, 8, 0, 0, PW_SIM_MODE_INLINE, false});
  check_reduce(&e, e.vs[0], 8, 4, 16);
  env_deinit(&e);
}

Test(lanes, turned_off_launches_per_device) {
  env_t e;
  env_init(&e, &(env_cfg_t){1, 8, 4, 1, 8, 0, 0, PW_SIM_MODE_INLINE, true});
  check_reduce(&e, e.vs[0], 8, 0, 16);
  env_deinit(&e);
}

Test(lanes, one_device_per_host_keeps_launch) {
  env_t e;
  env_init(&e, &(env_cfg_t){1, 8, 1, 1, 8, 0, 0, PW_SIM_MODE_INLINE, false});
  check_reduce(&e, e.vs[0], 8, 0, 16);
  env_deinit(&e);
}

Test(lanes, unequal_lanes_from_mid_host) {
  /* Sim hosts of 4 chips; the runtime slice is chips 2..9: lanes of 2, 4
   * and 2 (hosts 0, 1, 2): 3 host launches per op. */
  env_t e;
  env_init(&e, &(env_cfg_t){2, 8, 4, 1, 8, 2, 0, PW_SIM_MODE_INLINE, false});
  check_reduce(&e, e.vs[0], 8, 6, 16);
  env_deinit(&e);
}

Test(lanes, queued_lanes) {
  env_t e;
  env_init(&e, &(env_cfg_t){1, 8, 4, 1, 8, 0, 4, PW_SIM_MODE_INLINE, false});
  check_reduce(&e, e.vs[0], 8, 4, 16);
  env_deinit(&e);
}

Test(lanes, threaded_many_submissions) {
  env_t e;
  env_init(&e, &(env_cfg_t){1, 8, 2, 1, 8, 0, 0, PW_SIM_MODE_THREADED, false});
  pw_executable_t exes[2];
  pw_graph_t g = reduce_graph(&e, e.vs[0], 8, exes);
  float in[8], out[8];
  for (uint32_t i = 0; i < 8; ++i) in[i] = (float)i;
  pw_buffer_t arg = upload(&e, e.vs[0], in, 8);
  enum { kRuns = 200 };
  pw_buffer_t outs[kRuns];
  pw_event_t* done[kRuns];
  pw_sim_stats_t before = env_stats(&e);
  for (int r = 0; r < kRuns; ++r) {
    OK(pw_graph_submit(e.client, g, &arg, 1, NULL, &outs[r], 1, &done[r]));
  }
  for (int r = 0; r < kRuns; ++r) {
    OK(pw_event_wait(done[r], pw_clock_now() + PW_WAIT_NS));
    pw_event_release(done[r]);
    download(&e, outs[r], out, 8);
    for (uint32_t i = 0; i < 8; ++i) cr_assert_float_eq(out[i], 28.0f, 1e-3);
    OK(pw_buffer_release(e.client, outs[r]));
  }
  pw_sim_stats_t after = env_stats(&e);
  cr_assert_eq(after.host_launches - before.host_launches, 2u * 4u * kRuns);
  cr_assert_eq(after.events - before.events, 2u * 8u * kRuns);
  OK(pw_buffer_release(e.client, arg));
  OK(pw_graph_release(e.client, g));
  OK(pw_executable_release(e.client, exes[0]));
  OK(pw_executable_release(e.client, exes[1]));
  env_deinit(&e);
}

/* A transfer from slice 0 to slice 1 (both of lanes) with |sharding|, a
 * copy there, the result read back: the input's values. */
static void check_transfer(env_t* e, pw_sharding_t sharding) {
  uint32_t n = e->devices;
  char text[256];
  bool replicated = sharding.kind == PW_SHARDING_REPLICATED;
  snprintf(text, sizeof(text), "op copy\nkind copy\ninput f32[%u] %s\noutput f32[%u] %s\n", n,
           replicated ? "replicated" : "split(0,0)", n, replicated ? "replicated" : "split(0,0)");
  pw_executable_t copy;
  OK(pw_executable_compile(e->client, e->vs[1], text, strlen(text), NULL, &copy));
  pw_graph_t g;
  OK(pw_graph_create(e->client, &g));
  pw_array_spec_t spec = spec_split(n);
  uint32_t p, t, c;
  OK(pw_graph_add_parameter(e->client, g, e->vs[0], &spec, &p));
  OK(pw_graph_add_transfer(e->client, g, "hop", pw_value(p, 0), e->vs[1], sharding, &t));
  pw_value_t v = pw_value(t, 0);
  OK(pw_graph_add_compute(e->client, g, "copy", copy, e->vs[1], &v, 1, &c));
  OK(pw_graph_add_output(e->client, g, pw_value(c, 0)));
  OK(pw_graph_finalize(e->client, g));
  float in[64], out[64];
  for (uint32_t i = 0; i < n; ++i) in[i] = 10.0f + (float)i;
  pw_buffer_t arg = upload(e, e->vs[0], in, n);
  pw_buffer_t res = run1(e, g, arg);
  download(e, res, out, n);
  for (uint32_t i = 0; i < n; ++i) cr_assert_float_eq(out[i], in[i], 1e-6, "element %u", i);
  OK(pw_buffer_release(e->client, arg));
  OK(pw_buffer_release(e->client, res));
  OK(pw_graph_release(e->client, g));
  OK(pw_executable_release(e->client, copy));
}

Test(lanes, transfers_into_lanes) {
  env_t e;
  env_init(&e, &(env_cfg_t){2, 8, 4, 2, 8, 0, 0, PW_SIM_MODE_INLINE, false});
  check_transfer(&e, pw_sharding_split(0, 0));
  check_transfer(&e, pw_sharding_replicated());
  env_deinit(&e);
}

Test(lanes, spanning_vslice_over_lanes) {
  /* Two slices of 8 (hosts of 4): a spanning op is one gang of 16 over 4
   * lanes; its all-reduce sums all 16. */
  env_t e;
  env_init(&e, &(env_cfg_t){2, 8, 4, 2, 8, 0, 0, PW_SIM_MODE_INLINE, false});
  pw_vslice_span_t span;
  memset(&span, 0, sizeof(span));
  span.struct_size = sizeof(span);
  uint32_t chips = 16;
  span.mesh = pw_mesh_shape_make(1, &chips);
  span.slice_count = 2;
  span.slices = (const uint32_t[]){0, 1};
  pw_vslice_t wide;
  OK(pw_vslice_create_spanning(e.client, &span, &wide));
  check_reduce(&e, wide, 16, 8, 32);
  OK(pw_vslice_release(e.client, wide));
  env_deinit(&e);
}

Test(lanes, chip_failure_fails_its_lane_once) {
  env_t e;
  env_init(&e, &(env_cfg_t){1, 8, 4, 1, 8, 0, 0, PW_SIM_MODE_INLINE, false});
  pw_executable_t exes[2];
  pw_graph_t g = reduce_graph(&e, e.vs[0], 8, exes);
  float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
  pw_buffer_t arg = upload(&e, e.vs[0], in, 8);
  OK(pw_sim_backend_fail(e.sim, PW_SIM_FAIL_CHIP, 6, PW_SIM_TIME_NOW));
  pw_buffer_t res;
  pw_event_t* done = NULL;
  OK(pw_graph_submit(e.client, g, &arg, 1, NULL, &res, 1, &done));
  FAILS(pw_event_wait(done, pw_clock_now() + PW_WAIT_NS), PW_STATUS_UNAVAILABLE,
        "devices 4-7 (host 1)");
  pw_event_release(done);
  OK(pw_buffer_release(e.client, res));
  /* The slice is lost with the chip, and |arg|'s shards with it. */
  FAILS(pw_graph_submit(e.client, g, &arg, 1, NULL, &res, 1, &done), PW_STATUS_DATA_LOSS,
        "args[0]: its shards lived on slice 'slice0', which is lost");
  /* Repaired, the slice comes back when it is used again and the same
   * graph runs on a new upload, through the same lanes. */
  OK(pw_sim_backend_repair(e.sim, PW_SIM_FAIL_CHIP, 6));
  OK(pw_buffer_release(e.client, arg));
  arg = upload(&e, e.vs[0], in, 8);
  res = run1(&e, g, arg);
  download(&e, res, out, 8);
  for (uint32_t i = 0; i < 8; ++i) cr_assert_float_eq(out[i], 36.0f, 1e-3);
  OK(pw_buffer_release(e.client, res));
  OK(pw_buffer_release(e.client, arg));
  OK(pw_graph_release(e.client, g));
  OK(pw_executable_release(e.client, exes[0]));
  OK(pw_executable_release(e.client, exes[1]));
  env_deinit(&e);
}
