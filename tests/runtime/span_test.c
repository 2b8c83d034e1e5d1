/* Virtual slices spanning several physical slices: binding, numerics of a
 * collective that crosses slices (CPU backend), transfers in and out, the
 * graph's placement checks, every refusal with its culprit named, and a
 * failing-allocator sweep over the spanning path. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(span, .fini = pw_test_check_leaks);

static pw_vslice_span_t span_of(const char* mesh, uint32_t count, const uint32_t* slices) {
  pw_vslice_span_t s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  pw_status_t status = pw_mesh_shape_parse(mesh, &s.mesh);
  cr_assert_null(status);
  s.slice_count = count;
  s.slices = slices;
  return s;
}

Test(span, binds_slices_in_index_order_and_reports_them) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 3, "4", pw_allocator_system()));
  /* Pinned, given out of order: mesh order is ascending slice index. */
  const uint32_t pinned[2] = {2, 0};
  pw_vslice_span_t req = span_of("2x4", 2, pinned);
  pw_vslice_t wide;
  OK(pw_vslice_create_spanning(f.client, &req, &wide));
  uint32_t got[4] = {99, 99, 99, 99}, count = 0;
  OK(pw_vslice_slices(f.client, wide, got, 4, &count));
  cr_assert_eq(count, 2);
  cr_assert_eq(got[0], 0);
  cr_assert_eq(got[1], 2);
  cr_assert_eq(got[2], 99, "wrote past the count");
  uint32_t first = 99;
  pw_mesh_shape_t mesh;
  OK(pw_vslice_binding(f.client, wide, &first, &mesh));
  cr_assert_eq(first, 0);
  cr_assert_eq(mesh.rank, 2);
  /* Capacity 0 just counts. */
  OK(pw_vslice_slices(f.client, wide, NULL, 0, &count));
  cr_assert_eq(count, 2);
  /* Chosen by the resource manager: every slice, and a per-slice virtual
   * slice of the same client does not stand in the way. */
  pw_vslice_t one;
  OK(pw_fixture_vslice(&f, "4", &one));
  req = span_of("12", 3, NULL);
  pw_vslice_t all;
  OK(pw_vslice_create_spanning(f.client, &req, &all));
  OK(pw_vslice_slices(f.client, all, got, 4, &count));
  cr_assert_eq(count, 3);
  for (uint32_t i = 0; i < 3; ++i) cr_assert_eq(got[i], i);
  /* Bindings: wide on 0 and 2, all on 0..2, one on |one_at|. */
  uint32_t one_at = 99;
  OK(pw_vslice_binding(f.client, one, &one_at, NULL));
  pw_slice_info_t info = {.struct_size = sizeof(pw_slice_info_t)};
  for (uint32_t i = 0; i < 3; ++i) {
    OK(pw_runtime_slice_info(f.runtime, i, &info));
    uint32_t want = 1 + (i != 1) + (i == one_at);
    cr_assert_eq(info.bound_vslices, want, "slice %u holds %u bindings, want %u", i,
                 info.bound_vslices, want);
  }
  OK(pw_vslice_release(f.client, all));
  OK(pw_vslice_release(f.client, wide));
  for (uint32_t i = 0; i < 3; ++i) {
    OK(pw_runtime_slice_info(f.runtime, i, &info));
    cr_assert_eq(info.bound_vslices, i == one_at, "slice %u after release", i);
  }
  /* slice_count 1 without slices is pw_vslice_create. */
  req = span_of("4", 1, NULL);
  pw_vslice_t single;
  OK(pw_vslice_create_spanning(f.client, &req, &single));
  OK(pw_vslice_slices(f.client, single, got, 4, &count));
  cr_assert_eq(count, 1);
  pw_fixture_deinit(&f);
}

Test(span, refusals_name_the_culprit_and_leave_the_runtime_usable) {
  pw_cpu_backend_options_t co;
  pw_cpu_backend_options_init(&co);
  co.device_count = 16;
  pw_backend_t backends[2];
  OK(pw_cpu_backend_create(&co, &backends[0]));
  pw_double_options_t dopt;
  pw_double_options_init(&dopt);
  dopt.device_count = 4;
  OK(pw_double_backend_create(&dopt, &backends[1]));
  /* cpu: a(4) b(4) c(8); double: d(4). */
  pw_slice_desc_t slices[4] = {{"a", PW_MESH_SHAPE_INIT(1, 4), 0, 0, 0},
                               {"b", PW_MESH_SHAPE_INIT(1, 4), 0, 4, 0},
                               {"c", PW_MESH_SHAPE_INIT(1, 8), 0, 8, 0},
                               {"d", PW_MESH_SHAPE_INIT(1, 4), 1, 0, 1}};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = backends;
  ro.backend_count = 2;
  ro.slices = slices;
  ro.slice_count = 4;
  pw_runtime_t* rt;
  OK(pw_runtime_create(&ro, &rt));
  pw_client_t* client;
  OK(pw_client_create(rt, NULL, &client));
  pw_vslice_t out;
  pw_vslice_span_t req = span_of("8", 2, NULL);
  FAILS(pw_vslice_create_spanning(NULL, &req, &out), PW_STATUS_INVALID_ARGUMENT, "is NULL");
  FAILS(pw_vslice_create_spanning(client, NULL, &out), PW_STATUS_INVALID_ARGUMENT, "is NULL");
  FAILS(pw_vslice_create_spanning(client, &req, NULL), PW_STATUS_INVALID_ARGUMENT, "is NULL");
  req.struct_size = 8;
  FAILS(pw_vslice_create_spanning(client, &req, &out), PW_STATUS_INVALID_ARGUMENT,
        "struct_size 8 is smaller");
  req = span_of("8", 0, NULL);
  FAILS(pw_vslice_create_spanning(client, &req, &out), PW_STATUS_INVALID_ARGUMENT,
        "slice_count 0 does not divide the 8 devices of mesh 8");
  req = span_of("8", 3, NULL);
  FAILS(pw_vslice_create_spanning(client, &req, &out), PW_STATUS_INVALID_ARGUMENT,
        "slice_count 3 does not divide");
  req = span_of("8", 2, NULL);
  req.flags = 0x40;
  FAILS(pw_vslice_create_spanning(client, &req, &out), PW_STATUS_INVALID_ARGUMENT,
        "unknown flags 0x40");
  req = span_of("40", 5, NULL);
  FAILS(pw_vslice_create_spanning(client, &req, &out), PW_STATUS_INVALID_ARGUMENT,
        "slice_count 5 exceeds the runtime's 4 slices");
  const uint32_t out_of_range[2] = {0, 7};
  req = span_of("8", 2, out_of_range);
  FAILS(pw_vslice_create_spanning(client, &req, &out), PW_STATUS_INVALID_ARGUMENT,
        "slices[1] = 7 does not exist (4 slices)");
  const uint32_t repeated[2] = {1, 1};
  req = span_of("8", 2, repeated);
  FAILS(pw_vslice_create_spanning(client, &req, &out), PW_STATUS_INVALID_ARGUMENT,
        "slices[0] and slices[1] are both slice 1");
  const uint32_t wrong_size[2] = {0, 2};
  req = span_of("8", 2, wrong_size);
  FAILS(pw_vslice_create_spanning(client, &req, &out), PW_STATUS_INVALID_ARGUMENT,
        "slices[1] (slice 'c') has 8 devices; the mesh over 2 slices needs 4 on each");
  const uint32_t two_backends[2] = {0, 3};
  req = span_of("8", 2, two_backends);
  FAILS(pw_vslice_create_spanning(client, &req, &out), PW_STATUS_INVALID_ARGUMENT,
        "a gang cannot span backends");
  /* Three 4-device slices exist, but only two on one backend. */
  req = span_of("12", 3, NULL);
  FAILS(pw_vslice_create_spanning(client, &req, &out), PW_STATUS_RESOURCE_EXHAUSTED,
        "at most 2 usable on one backend");
  /* Exclusive: a and b are free until someone binds one of them. */
  pw_vslice_t ab;
  req = span_of("2x4", 2, NULL);
  req.flags = PW_VSLICE_EXCLUSIVE;
  OK(pw_vslice_create_spanning(client, &req, &ab));
  FAILS(pw_vslice_create_spanning(client, &req, &out), PW_STATUS_RESOURCE_EXHAUSTED,
        "2 shared with other virtual slices (exclusive requested)");
  const uint32_t pin_a[2] = {0, 1};
  req.slices = pin_a;
  FAILS(pw_vslice_create_spanning(client, &req, &out), PW_STATUS_RESOURCE_EXHAUSTED,
        "slice 'a' is bound to 1 virtual slice(s) and exclusive was requested");
  const uint32_t pin_single[1] = {3};
  req = span_of("4", 1, pin_single);
  pw_vslice_t d;
  OK(pw_vslice_create_spanning(client, &req, &d));
  FAILS(pw_vslice_create_spanning(client, &req, &out), PW_STATUS_RESOURCE_EXHAUSTED,
        "slice 'd' is already bound to client");
  uint32_t count;
  FAILS(pw_vslice_slices(client, ab, NULL, 2, &count), PW_STATUS_INVALID_ARGUMENT,
        "out_slices is NULL with capacity 2");
  FAILS(pw_vslice_slices(client, (pw_vslice_t){12345}, NULL, 0, &count),
        PW_STATUS_INVALID_ARGUMENT, "vslice");
  /* Still usable: a non-exclusive spanning request over the same pair. */
  req = span_of("8", 2, pin_a);
  pw_vslice_t again;
  OK(pw_vslice_create_spanning(client, &req, &again));
  cr_assert_eq(pw_client_live_handles(client), 3);
  pw_client_destroy(client);
  pw_runtime_destroy(rt);
}

/* A per-slice vslice feeds a spanning one through a transfer; an
 * all-reduce runs across the 8 devices of two slices; the result comes
 * back to a single slice. Numbers checked against plain C. */
Test(span, collective_across_two_slices_matches_reference) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_CPU, 3, "4", pw_allocator_system()));
  pw_vslice_t local;
  OK(pw_fixture_vslice(&f, "4", &local));
  uint32_t home = 0;
  OK(pw_vslice_binding(f.client, local, &home, NULL));
  const uint32_t pair[2] = {home, (home + 1) % 3};
  pw_vslice_span_t req = span_of("2x4", 2, pair);
  pw_vslice_t wide, wide_again;
  OK(pw_vslice_create_spanning(f.client, &req, &wide));
  OK(pw_vslice_create_spanning(f.client, &req, &wide_again));
  pw_executable_t reduce, scale;
  OK(pw_fixture_compile(&f, wide,
                        "kernel all_reduce_sum\ninput f32[8,3] split(0,all)\n"
                        "output f32[3] replicated\n",
                        &reduce));
  OK(pw_fixture_compile(&f, wide,
                        "kernel scale\ninput f32[3] replicated\noutput f32[3] replicated\n"
                        "attr alpha 0.5\n",
                        &scale));
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  int64_t dims[2] = {8, 3};
  pw_array_spec_t xs = pw_fixture_spec_f32(2, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t x, t, r, h, back;
  OK(pw_graph_add_parameter(f.client, g, local, &xs, &x));
  OK(pw_graph_add_transfer(f.client, g, "spread", pw_value(x, 0), wide,
                           pw_sharding_split(0, PW_MESH_AXIS_ALL), &t));
  pw_value_t in = pw_value(t, 0);
  OK(pw_graph_add_compute(f.client, g, "sum", reduce, wide, &in, 1, &r));
  /* The same slices through another handle: no transfer needed. */
  in = pw_value(r, 0);
  OK(pw_graph_add_compute(f.client, g, "half", scale, wide_again, &in, 1, &h));
  OK(pw_graph_add_transfer(f.client, g, "home", pw_value(h, 0), local,
                           pw_sharding_replicated(), &back));
  OK(pw_graph_add_output(f.client, g, pw_value(h, 0)));
  OK(pw_graph_add_output(f.client, g, pw_value(back, 0)));
  float data[24], want[3] = {0, 0, 0};
  for (int i = 0; i < 24; ++i) data[i] = (float)(i * 3 % 7) - 2.5f;
  for (int i = 0; i < 24; ++i) want[i % 3] += data[i];
  for (int k = 0; k < 3; ++k) want[k] *= 0.5f;
  pw_buffer_t arg, outs[2];
  OK(pw_fixture_f32(&f, local, 2, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), data, &arg));
  for (int run = 0; run < 3; ++run) {
    pw_event_t* done;
    OK(pw_graph_submit(f.client, g, &arg, 1, NULL, outs, 2, &done));
    OK(pw_fixture_wait(done));
    for (int k = 0; k < 2; ++k) {
      float got[3];
      OK(pw_buffer_to_host(f.client, outs[k], got, sizeof(got), PW_INFINITE_FUTURE));
      for (int i = 0; i < 3; ++i) {
        cr_assert_float_eq(got[i], want[i], 1e-5, "run %d output %d [%d]: %f vs %f", run, k,
                           i, got[i], want[i]);
      }
      OK(pw_buffer_release(f.client, outs[k]));
    }
  }
  /* A node on the spanning slice cannot read a single slice's value
   * directly. */
  pw_graph_t bad;
  OK(pw_graph_create(f.client, &bad));
  uint32_t p2, n2;
  OK(pw_graph_add_parameter(f.client, bad, local, &xs, &p2));
  in = pw_value(p2, 0);
  OK(pw_graph_add_compute(f.client, bad, "sum", reduce, wide, &in, 1, &n2));
  char want_msg[160];
  snprintf(want_msg, sizeof(want_msg), "input 0 lives on slice 'slice%u', the node runs on "
           "slice 'slice%u+slice%u'", home, pair[0] < pair[1] ? pair[0] : pair[1],
           pair[0] < pair[1] ? pair[1] : pair[0]);
  FAILS(pw_graph_finalize(f.client, bad), PW_STATUS_INVALID_ARGUMENT, want_msg);
  pw_fixture_deinit(&f);
}

/* Lanes under a spanning vslice: two 4-device slices of two hosts each
 * (the lane kinds: 2 devices per host), a per-slice vslice feeding the
 * spanning one through a transfer, an all-reduce over the 8 devices (a
 * collective across host launches of both slices), and the result
 * brought back. Every run is one host launch per lane (4) and no other
 * launch; the values are the sums of plain C. */
static void collective_over_lane_slices(pw_fixture_backend_t kind) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, kind, 2, "4", pw_allocator_system()));
  pw_vslice_t local, wide;
  OK(pw_fixture_vslice(&f, "4", &local));
  pw_vslice_span_t req = span_of("8", 2, NULL);
  OK(pw_vslice_create_spanning(f.client, &req, &wide));
  pw_executable_t reduce;
  OK(pw_fixture_compile(&f, wide,
                        "all_reduce_sum\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n",
                        &reduce));
  int64_t dims[1] = {8};
  pw_sharding_t split = pw_sharding_split(0, PW_MESH_AXIS_ALL);
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, split);
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  uint32_t x, t, r, back;
  OK(pw_graph_add_parameter(f.client, g, local, &spec, &x));
  OK(pw_graph_add_transfer(f.client, g, "spread", pw_value(x, 0), wide, split, &t));
  pw_value_t in = pw_value(t, 0);
  OK(pw_graph_add_compute(f.client, g, "sum", reduce, wide, &in, 1, &r));
  OK(pw_graph_add_transfer(f.client, g, "home", pw_value(r, 0), local,
                           pw_sharding_replicated(), &back));
  OK(pw_graph_add_output(f.client, g, pw_value(back, 0)));
  enum { RUNS = 5 };
  for (int run = 0; run < RUNS; ++run) {
    float data[8], want = 0;
    for (int i = 0; i < 8; ++i) {
      data[i] = (float)(i * 3 % 7 + run) - 2.5f;
      want += data[i];
    }
    pw_buffer_t arg, out;
    OK(pw_fixture_f32(&f, local, 1, dims, split, data, &arg));
    pw_event_t* done;
    OK(pw_graph_submit(f.client, g, &arg, 1, NULL, &out, 1, &done));
    OK(pw_fixture_wait(done));
    float got[8];
    OK(pw_buffer_to_host(f.client, out, got, sizeof(got), PW_INFINITE_FUTURE));
    for (int i = 0; i < 8; ++i) {
      cr_assert_float_eq(got[i], want, 1e-5, "run %d [%d]: %f vs %f", run, i, got[i], want);
    }
    OK(pw_buffer_release(f.client, out));
    OK(pw_buffer_release(f.client, arg));
  }
  cr_assert_eq(pw_fixture_host_launches(&f), 4 * RUNS);
  cr_assert_eq(pw_double_backend_total_launches(f.dbl), 8 * RUNS, "only the lanes' parts");
  pw_fixture_deinit(&f);
}

Test(span, collective_over_lane_slices) { collective_over_lane_slices(PW_FIXTURE_DOUBLE_LANES); }
Test(span, collective_over_queued_lane_slices) {
  collective_over_lane_slices(PW_FIXTURE_DOUBLE_LANES_QUEUED);
}

/* Spanning creation and a run on it, one allocation failing at a time
 * (on the fixture kind |user| points to). */
static bool spanning_path(pw_allocator_t a, bool expect_failure, void* user) {
  pw_fixture_t f;
  pw_status_t s = pw_fixture_init(&f, *(const pw_fixture_backend_t*)user, 2, "4", a);
  bool have_fixture = s == NULL;
  pw_vslice_t wide = {0};
  pw_executable_t reduce = {0};
  pw_graph_t g = {0};
  pw_buffer_t x = {0}, y = {0};
  pw_event_t* done = NULL;
  pw_vslice_span_t req = span_of("8", 2, NULL);
  if (s == NULL) s = pw_vslice_create_spanning(f.client, &req, &wide);
  if (s == NULL) {
    s = pw_fixture_compile(&f, wide,
                           "all_reduce_sum\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n",
                           &reduce);
  }
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t p = 0, c = 0;
  if (s == NULL) s = pw_graph_create(f.client, &g);
  if (s == NULL) s = pw_graph_add_parameter(f.client, g, wide, &spec, &p);
  pw_value_t in = pw_value(p, 0);
  if (s == NULL) s = pw_graph_add_compute(f.client, g, "r", reduce, wide, &in, 1, &c);
  if (s == NULL) s = pw_graph_add_output(f.client, g, pw_value(c, 0));
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  if (s == NULL) s = pw_fixture_f32(&f, wide, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), data, &x);
  if (s == NULL) s = pw_graph_submit(f.client, g, &x, 1, NULL, &y, 1, &done);
  if (s == NULL) s = pw_fixture_wait(done);
  float back[8];
  if (s == NULL) s = pw_buffer_to_host(f.client, y, back, sizeof(back), PW_INFINITE_FUTURE);
  /* A part of the gang whose launch failed for the injected allocation
   * failure ABORTs the others (the runtime's "a part's launch was
   * refused", or the double's rendezvous "collective gang N was aborted"
   * when the part failed after joining it); which part the run reports
   * first is a race, so the others' ABORTED stands for the exhausted
   * part. */
  if (expect_failure && pw_status_code(s) == PW_STATUS_ABORTED &&
      (strstr(pw_status_message(s), "a part's launch was refused") != NULL ||
       strstr(pw_status_message(s), "was aborted") != NULL)) {
    pw_status_free(s);
    s = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "a part's launch was refused (aborted)");
  }
  bool ok = pw_sweep_path_end(s, expect_failure, s == NULL && back[0] == 36 && back[7] == 36,
                              "spanning_path");
  if (have_fixture) pw_fixture_deinit(&f);
  return ok;
}

Test(span, failing_allocator_sweep_over_spanning_path) {
  char why[256] = "";
  pw_fixture_backend_t kind = PW_FIXTURE_DOUBLE_INLINE;
  int points = pw_test_allocator_sweep(spanning_path, &kind, why);
  cr_assert_gt(points, 20, "%s", why);
}

Test(span, failing_allocator_sweep_over_spanning_lanes) {
  char why[256] = "";
  pw_fixture_backend_t kind = PW_FIXTURE_DOUBLE_LANES;
  int points = pw_test_allocator_sweep(spanning_path, &kind, why);
  cr_assert_gt(points, 20, "%s", why);
}
