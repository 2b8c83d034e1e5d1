/* Dispatch end to end: graphs submitted to the test double and to the CPU
 * backend; results, error propagation, gang order, deep chains. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(dispatch, .fini = pw_test_check_leaks);

static const char* kCopy8 =
    "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n";

/* A chain of |n| copies on one 2x4 slice; the value must come out intact. */
static void run_chain(pw_fixture_backend_t kind, uint32_t n) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, kind, 1, "2x4", pw_allocator_system()));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2x4", &vs));
  pw_executable_t copy;
  OK(pw_fixture_compile(&f, vs, kCopy8, &copy));
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t prev;
  OK(pw_graph_add_parameter(f.client, g, vs, &spec, &prev));
  for (uint32_t i = 0; i < n; ++i) {
    pw_value_t in = pw_value(prev, 0);
    OK(pw_graph_add_compute(f.client, g, "copy", copy, vs, &in, 1, &prev));
  }
  OK(pw_graph_add_output(f.client, g, pw_value(prev, 0)));
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  pw_buffer_t arg;
  OK(pw_fixture_f32(&f, vs, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), data, &arg));
  pw_buffer_t out;
  pw_event_t* done = NULL;
  OK(pw_graph_submit(f.client, g, &arg, 1, NULL, &out, 1, &done));
  OK(pw_fixture_wait(done));
  float back[8] = {0};
  OK(pw_buffer_to_host(f.client, out, back, sizeof(back), PW_INFINITE_FUTURE));
  cr_assert_eq(memcmp(back, data, sizeof(data)), 0);
  if (f.dbl) {
    for (uint32_t d = 0; d < 8; ++d) {
      cr_assert_eq(pw_double_backend_launch_count(f.dbl, d), n, "device %u", d);
    }
  }
  /* Lanes: one host launch per op and host (4 hosts of 2), none on the
   * other kinds. */
  uint64_t want_host = pw_fixture_kind_lanes(kind) ? (uint64_t)n * 4 : 0;
  cr_assert_eq(pw_fixture_host_launches(&f), want_host);
  OK(pw_buffer_release(f.client, out));
  OK(pw_buffer_release(f.client, arg));
  pw_fixture_deinit(&f);
}

Test(dispatch, chain_inline_completion) { run_chain(PW_FIXTURE_DOUBLE_INLINE, 50); }
Test(dispatch, chain_threaded_completion) { run_chain(PW_FIXTURE_DOUBLE_THREADED, 50); }
Test(dispatch, chain_lanes) { run_chain(PW_FIXTURE_DOUBLE_LANES, 50); }
Test(dispatch, chain_lanes_queued) { run_chain(PW_FIXTURE_DOUBLE_LANES_QUEUED, 50); }
Test(dispatch, long_chain_on_queued_lanes) { run_chain(PW_FIXTURE_DOUBLE_LANES_QUEUED, 5000); }
Test(dispatch, long_chain_completing_inline_uses_constant_stack) {
  /* 100k ops whose launches complete inside launch: recursion would
   * overflow the stack; the trampoline must not. */
  run_chain(PW_FIXTURE_DOUBLE_INLINE, 100000);
}

/* Builds: param -> a (fail or copy) -> b (copy) -> c (copy); output c. */
static void failed_op_fails_dependents(pw_fixture_backend_t kind) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, kind, 1, "2x4", pw_allocator_system()));
  bool lanes = pw_fixture_kind_lanes(kind);
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2x4", &vs));
  pw_executable_t copy, fail;
  OK(pw_fixture_compile(&f, vs, kCopy8, &copy));
  OK(pw_fixture_compile(&f, vs, "fail 14\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n", &fail));
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t p, a, b, c;
  OK(pw_graph_add_parameter(f.client, g, vs, &spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(f.client, g, "flaky", fail, vs, &in, 1, &a));
  in = pw_value(a, 0);
  OK(pw_graph_add_compute(f.client, g, "after", copy, vs, &in, 1, &b));
  in = pw_value(b, 0);
  OK(pw_graph_add_compute(f.client, g, "last", copy, vs, &in, 1, &c));
  OK(pw_graph_add_output(f.client, g, pw_value(c, 0)));
  OK(pw_graph_add_output(f.client, g, pw_value(p, 0)));
  float data[8] = {0};
  pw_buffer_t arg, outs[2];
  OK(pw_fixture_f32(&f, vs, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), data, &arg));
  pw_event_t* done = NULL;
  OK(pw_graph_submit(f.client, g, &arg, 1, NULL, outs, 2, &done));
  pw_status_t s = pw_fixture_wait(done);
  cr_assert_eq(pw_status_code(s), PW_STATUS_UNAVAILABLE, "%s", pw_status_message(s));
  cr_assert(strstr(pw_status_message(s), "node 1 (\"flaky\")"), "%s", pw_status_message(s));
  /* A lane's failure names the lane's devices and host. */
  cr_assert(!lanes || strstr(pw_status_message(s), "(host "), "%s", pw_status_message(s));
  pw_status_free(s);
  float back[8];
  s = pw_buffer_to_host(f.client, outs[0], back, sizeof(back), PW_INFINITE_FUTURE);
  cr_assert_eq(pw_status_code(s), PW_STATUS_UNAVAILABLE);
  const char* m = pw_status_message(s);
  cr_assert(strstr(m, "input node 2 (\"after\") failed: input node 1 (\"flaky\") failed"), "%s", m);
  pw_status_free(s);
  /* The parameter passed through is fine. */
  OK(pw_buffer_to_host(f.client, outs[1], back, sizeof(back), PW_INFINITE_FUTURE));
  /* The dependents did not run: only the failing op launched. On a
   * queued slice they may have been queued behind it before it failed
   * (they then fail with its status, as checked above). */
  bool queued = kind == PW_FIXTURE_DOUBLE_LANES_QUEUED;
  uint64_t most = queued ? 3 : 1;
  for (uint32_t d = 0; d < 8; ++d) {
    uint64_t n = pw_double_backend_launch_count(f.dbl, d);
    cr_assert(n >= 1 && n <= most, "device %u launched %llu times", d, (unsigned long long)n);
  }
  uint64_t host_before = pw_fixture_host_launches(&f);
  cr_assert(lanes ? host_before >= 4 && host_before <= 4 * most : host_before == 0,
            "%llu host launches", (unsigned long long)host_before);
  /* The runtime stays usable: a healthy graph on the same slice runs. */
  pw_graph_t g2;
  OK(pw_graph_create(f.client, &g2));
  OK(pw_graph_add_parameter(f.client, g2, vs, &spec, &p));
  in = pw_value(p, 0);
  OK(pw_graph_add_compute(f.client, g2, "ok", copy, vs, &in, 1, &a));
  OK(pw_graph_add_output(f.client, g2, pw_value(a, 0)));
  pw_buffer_t out2;
  OK(pw_graph_submit(f.client, g2, &arg, 1, NULL, &out2, 1, &done));
  OK(pw_fixture_wait(done));
  cr_assert_eq(pw_fixture_host_launches(&f), host_before + (lanes ? 4 : 0));
  pw_fixture_deinit(&f);
}

Test(dispatch, failed_op_fails_dependents_naming_the_node) {
  failed_op_fails_dependents(PW_FIXTURE_DOUBLE_THREADED);
}
Test(dispatch, failed_op_fails_dependents_naming_the_lane) {
  failed_op_fails_dependents(PW_FIXTURE_DOUBLE_LANES);
}
Test(dispatch, failed_op_fails_dependents_naming_the_lane_queued) {
  failed_op_fails_dependents(PW_FIXTURE_DOUBLE_LANES_QUEUED);
}

/* Deferred completion: launches queue up and run when the test says, so
 * ops from several executions interleave as much as they can. The lane
 * kinds complete on their own (threaded, or through the queue wrapper). */
static void gang_order_on(pw_fixture_backend_t kind) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, kind, 1, "2x4", pw_allocator_system()));
  bool deferred = kind == PW_FIXTURE_DOUBLE_DEFERRED;
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2x4", &vs));
  pw_executable_t copy;
  OK(pw_fixture_compile(&f, vs, kCopy8, &copy));
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  /* Two independent ops per graph: x -> a, x -> b. */
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  uint32_t p, a, b;
  OK(pw_graph_add_parameter(f.client, g, vs, &spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(f.client, g, "a", copy, vs, &in, 1, &a));
  OK(pw_graph_add_compute(f.client, g, "b", copy, vs, &in, 1, &b));
  OK(pw_graph_add_output(f.client, g, pw_value(a, 0)));
  OK(pw_graph_add_output(f.client, g, pw_value(b, 0)));
  float data[8] = {0};
  pw_buffer_t arg;
  OK(pw_fixture_f32(&f, vs, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), data, &arg));
  enum { kExecs = 20 };
  pw_event_t* done[kExecs];
  pw_buffer_t outs[kExecs][2];
  for (int e = 0; e < kExecs; ++e) {
    OK(pw_graph_submit(f.client, g, &arg, 1, NULL, outs[e], 2, &done[e]));
    /* Run a few launches between submissions. */
    if (deferred) pw_double_backend_run_deferred(f.dbl, (size_t)(e % 5));
  }
  while (deferred && pw_double_backend_run_deferred(f.dbl, 0) > 0) {
  }
  for (int e = 0; e < kExecs; ++e) OK(pw_fixture_wait(done[e]));
  uint64_t order0[2 * kExecs], order[2 * kExecs];
  size_t n0 = pw_double_backend_launch_order(f.dbl, 0, order0, 2 * kExecs);
  cr_assert_eq(n0, 2 * kExecs);
  for (size_t i = 1; i < n0; ++i) cr_assert_lt(order0[i - 1], order0[i], "sequence order");
  for (uint32_t d = 1; d < 8; ++d) {
    size_t n = pw_double_backend_launch_order(f.dbl, d, order, 2 * kExecs);
    cr_assert_eq(n, n0);
    cr_assert_eq(memcmp(order, order0, n * sizeof(uint64_t)), 0, "device %u order differs", d);
  }
  cr_assert_eq(pw_fixture_host_launches(&f), pw_fixture_kind_lanes(kind) ? 2 * kExecs * 4 : 0);
  pw_fixture_deinit(&f);
}

Test(dispatch, gang_order_is_identical_on_every_device_of_a_slice) {
  gang_order_on(PW_FIXTURE_DOUBLE_DEFERRED);
}
Test(dispatch, gang_order_is_identical_on_every_device_of_lanes) {
  gang_order_on(PW_FIXTURE_DOUBLE_LANES);
}
Test(dispatch, gang_order_is_identical_on_every_device_of_queued_lanes) {
  gang_order_on(PW_FIXTURE_DOUBLE_LANES_QUEUED);
}

/* A deferred-completion double with one 2x4 slice, and a graph that
 * copies its f32[8] parameter (node "a"), its result a graph output when
 * |output|. */
static void deferred_copy_graph(pw_fixture_t* f, pw_vslice_t* vs, pw_graph_t* g, bool output) {
  OK(pw_fixture_init(f, PW_FIXTURE_DOUBLE_DEFERRED, 1, "2x4", pw_allocator_system()));
  OK(pw_fixture_vslice(f, "2x4", vs));
  pw_executable_t copy;
  OK(pw_fixture_compile(f, *vs, kCopy8, &copy));
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  OK(pw_graph_create(f->client, g));
  uint32_t p, a;
  OK(pw_graph_add_parameter(f->client, *g, *vs, &spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(f->client, *g, "a", copy, *vs, &in, 1, &a));
  if (output) OK(pw_graph_add_output(f->client, *g, pw_value(a, 0)));
}

/* deferred_copy_graph with its result a graph output, and |arg|: an
 * f32[8] argument on |vs| holding |data|. */
static void deferred_copy_with_arg(pw_fixture_t* f, pw_vslice_t* vs, pw_graph_t* g,
                                   const float data[8], pw_buffer_t* arg) {
  deferred_copy_graph(f, vs, g, true);
  int64_t dims[1] = {8};
  OK(pw_fixture_f32(f, *vs, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), data, arg));
}

/* A resubmitted graph reuses its execution block, and the block keeps its
 * last run's done event: it is recycled when the submitter has released
 * it, and left alone (a fresh event is made) while the submitter holds
 * it. Either way every run's event is incomplete until that run is done,
 * and carries that run's status only. */
Test(dispatch, done_events_of_reruns_are_fresh_whether_recycled_or_not) {
  pw_fixture_t f;
  pw_vslice_t vs;
  pw_graph_t g;
  deferred_copy_graph(&f, &vs, &g, false);
  int64_t dims[1] = {8};
  OK(pw_graph_finalize(f.client, g));
  float data[8] = {0};
  pw_buffer_t arg;
  OK(pw_fixture_f32(&f, vs, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), data, &arg));
  /* Run 1, kept by the test across run 2. */
  pw_event_t* first = NULL;
  OK(pw_graph_submit(f.client, g, &arg, 1, NULL, NULL, 0, &first));
  cr_assert(!pw_event_is_ready(first));
  while (pw_double_backend_run_deferred(f.dbl, 0) > 0) {
  }
  OK(pw_event_wait(first, pw_deadline_from_timeout(5000000000LL)));
  /* Runs 2..7: 3 and 5 fail on one device. A run's event is released
   * before the next submission only from run 3 on. */
  pw_event_t* held = NULL;
  for (int run = 2; run <= 7; ++run) {
    if (run == 3 || run == 5) {
      pw_double_backend_fail_launch(f.dbl, 2, PW_STATUS_DATA_LOSS, PW_DOUBLE_FAIL_AT_LAUNCH);
    }
    pw_event_t* done = NULL;
    OK(pw_graph_submit(f.client, g, &arg, 1, NULL, NULL, 0, &done));
    cr_assert_neq(done, first, "run %d got the event run 1's submitter still holds", run);
    cr_assert(!pw_event_is_ready(done), "run %d: event complete before its run", run);
    cr_assert(pw_event_is_ready(first), "run 1's event was reset under its holder");
    while (pw_double_backend_run_deferred(f.dbl, 0) > 0) {
    }
    pw_status_t st = pw_event_wait(done, pw_deadline_from_timeout(5000000000LL));
    if (run == 3 || run == 5) {
      cr_assert_eq(pw_status_code(st), PW_STATUS_DATA_LOSS, "run %d", run);
      pw_status_free(st);
    } else {
      cr_assert_null(st, "run %d carries an earlier run's failure", run);
    }
    if (run == 2) {
      held = done; /* released after run 3 is submitted */
    } else {
      pw_event_release(done);
      if (held != NULL) {
        pw_event_release(held);
        held = NULL;
      }
    }
  }
  pw_status_t st = pw_event_wait(first, 0);
  cr_assert_null(st);
  pw_event_release(first);
  OK(pw_buffer_release(f.client, arg));
  pw_fixture_deinit(&f);
}

/* An append claims the devices already idle at the old tail before it
 * links the old tail, and links it only when some device is still busy
 * there (pw_dispatch_append_part). Run 2 is submitted while three of the
 * eight devices have finished run 1: those three start run 2 at once,
 * the other five reach it through the link when they finish run 1. Run 3
 * finds every device idle: no link, all claimed. Every device runs every
 * run once, in order, and every result is right. */
Test(dispatch, an_append_claims_idle_devices_and_links_for_the_busy_ones) {
  pw_fixture_t f;
  pw_vslice_t vs;
  pw_graph_t g;
  const float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  pw_buffer_t arg;
  deferred_copy_with_arg(&f, &vs, &g, data, &arg);
  pw_buffer_t out[3];
  pw_event_t* done[3];
  OK(pw_graph_submit(f.client, g, &arg, 1, NULL, &out[0], 1, &done[0]));
  for (uint32_t d = 0; d < 8; ++d) cr_assert_eq(pw_double_backend_launch_count(f.dbl, d), 1);
  cr_assert_eq(pw_double_backend_run_deferred(f.dbl, 3), 3);
  OK(pw_graph_submit(f.client, g, &arg, 1, NULL, &out[1], 1, &done[1]));
  /* The three idle devices were claimed by the append and launched run 2;
   * the five busy ones are still in run 1. */
  uint32_t started = 0;
  for (uint32_t d = 0; d < 8; ++d) {
    uint64_t n = pw_double_backend_launch_count(f.dbl, d);
    cr_assert(n == 1 || n == 2, "device %u launched %llu times", d, (unsigned long long)n);
    started += n == 2;
  }
  cr_assert_eq(started, 3, "%u devices started run 2 at its append", started);
  cr_assert(!pw_event_is_ready(done[1]));
  while (pw_double_backend_run_deferred(f.dbl, 0) > 0) {
  }
  OK(pw_fixture_wait(done[0]));
  OK(pw_fixture_wait(done[1]));
  /* Every device idle at run 2's op: run 3 claims all eight at once. */
  OK(pw_graph_submit(f.client, g, &arg, 1, NULL, &out[2], 1, &done[2]));
  for (uint32_t d = 0; d < 8; ++d) cr_assert_eq(pw_double_backend_launch_count(f.dbl, d), 3);
  while (pw_double_backend_run_deferred(f.dbl, 0) > 0) {
  }
  OK(pw_fixture_wait(done[2]));
  uint64_t order0[3], order[3];
  cr_assert_eq(pw_double_backend_launch_order(f.dbl, 0, order0, 3), 3);
  cr_assert(order0[0] < order0[1] && order0[1] < order0[2], "runs out of order on device 0");
  for (uint32_t d = 1; d < 8; ++d) {
    cr_assert_eq(pw_double_backend_launch_order(f.dbl, d, order, 3), 3);
    cr_assert_eq(memcmp(order, order0, sizeof(order)), 0, "device %u order differs", d);
  }
  for (int r = 0; r < 3; ++r) {
    float back[8] = {0};
    OK(pw_buffer_to_host(f.client, out[r], back, sizeof(back), PW_INFINITE_FUTURE));
    cr_assert_eq(memcmp(back, data, sizeof(data)), 0, "run %d", r + 1);
    OK(pw_buffer_release(f.client, out[r]));
  }
  OK(pw_buffer_release(f.client, arg));
  pw_fixture_deinit(&f);
}

Test(dispatch, outputs_of_one_execution_feed_the_next_before_they_are_ready) {
  /* Parallel asynchronous dispatch: the second submit happens while the
   * first execution's output (its argument) is still pending. */
  pw_fixture_t f;
  pw_vslice_t vs;
  pw_graph_t g;
  const float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  pw_buffer_t x, y, z;
  deferred_copy_with_arg(&f, &vs, &g, data, &x);
  pw_event_t *d1, *d2;
  OK(pw_graph_submit(f.client, g, &x, 1, NULL, &y, 1, &d1));
  OK(pw_graph_submit(f.client, g, &y, 1, NULL, &z, 1, &d2));
  cr_assert_not(pw_event_is_ready(d1));
  cr_assert_not(pw_event_is_ready(d2));
  bool donate[1] = {true};
  pw_submit_options_t opts = {.struct_size = sizeof(opts), .donate = donate};
  pw_buffer_t w;
  pw_event_t* d3;
  OK(pw_graph_submit(f.client, g, &z, 1, &opts, &w, 1, &d3));
  /* z was donated: its handle is gone. */
  pw_array_spec_t got;
  pw_status_t s = pw_buffer_spec(f.client, z, &got);
  cr_assert_eq(pw_status_code(s), PW_STATUS_NOT_FOUND);
  pw_status_free(s);
  while (pw_double_backend_run_deferred(f.dbl, 0) > 0) {
  }
  OK(pw_fixture_wait(d1));
  OK(pw_fixture_wait(d2));
  OK(pw_fixture_wait(d3));
  float back[8];
  OK(pw_buffer_to_host(f.client, w, back, sizeof(back), PW_INFINITE_FUTURE));
  cr_assert_eq(memcmp(back, data, sizeof(data)), 0);
  pw_fixture_deinit(&f);
}

Test(dispatch, host_transfers_split_and_gather_every_sharding) {
  /* 512 x 256 f32 = 512 KiB: large enough to use the runtime's workers. */
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 1, "2x4", pw_allocator_system()));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2x4", &vs));
  enum { R = 512, C = 256 };
  float* data = malloc(sizeof(float) * R * C);
  float* back = malloc(sizeof(float) * R * C);
  for (int i = 0; i < R * C; ++i) data[i] = (float)i;
  int64_t dims[2] = {R, C};
  pw_sharding_t shardings[] = {pw_sharding_replicated(), pw_sharding_split(0, 0),
                               pw_sharding_split(1, 1), pw_sharding_split(1, PW_MESH_AXIS_ALL),
                               pw_sharding_split(0, PW_MESH_AXIS_ALL)};
  for (size_t k = 0; k < sizeof(shardings) / sizeof(shardings[0]); ++k) {
    pw_buffer_t b;
    OK(pw_fixture_f32(&f, vs, 2, dims, shardings[k], data, &b));
    memset(back, 0, sizeof(float) * R * C);
    OK(pw_buffer_to_host(f.client, b, back, sizeof(float) * R * C, PW_INFINITE_FUTURE));
    cr_assert_eq(memcmp(back, data, sizeof(float) * R * C), 0, "sharding %zu", k);
    size_t size = 0;
    OK(pw_buffer_byte_size(f.client, b, &size));
    cr_assert_eq(size, sizeof(float) * R * C);
    pw_status_t s = pw_buffer_to_host(f.client, b, back, 4, PW_INFINITE_FUTURE);
    cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
    pw_status_free(s);
    OK(pw_buffer_release(f.client, b));
  }
  /* A split that does not divide is rejected, naming the numbers. */
  int64_t odd[2] = {R, 6};
  pw_buffer_t b;
  pw_status_t s = pw_fixture_f32(&f, vs, 2, odd, pw_sharding_split(1, 1), data, &b);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(pw_status_message(s), "(size 6) is not divisible into 4 shards"), "%s",
            pw_status_message(s));
  pw_status_free(s);
  free(data);
  free(back);
  pw_fixture_deinit(&f);
}

/* A resubmitted graph reuses its execution block: every op's counters and
 * statuses are re-armed by its own completion, failed or not. One-device
 * slices take the quiet path (an op's completion readies its successor on
 * the same device without a locked instruction). Run: a clean run, a run
 * whose argument failed (every op fails, naming the argument), then clean
 * runs again, on the inline and threaded doubles; the values and launch
 * counts must be those of the clean runs only. */
static void run_rerun_after_failure(pw_fixture_backend_t kind) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, kind, 2, "1", pw_allocator_system()));
  pw_vslice_t vs, other;
  OK(pw_fixture_vslice(&f, "1", &vs));
  OK(pw_fixture_vslice(&f, "1", &other));
  pw_executable_t copy, fail;
  const char* copy8 = "copy\ninput f32[8] replicated\noutput f32[8] replicated\n";
  OK(pw_fixture_compile(&f, vs, copy8, &copy));
  OK(pw_fixture_compile(&f, vs, "fail 14\ninput f32[8] replicated\noutput f32[8] replicated\n",
                        &fail));
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_replicated());
  /* The chain: p -> c0 -> c1 -> ... -> c7 (one producer each), then j =
   * noop(c7, c3) (two producers: the counted path), then j -> k. Outputs:
   * c7 (its values are checked) and k. */
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  uint32_t p, prev, c3 = 0;
  OK(pw_graph_add_parameter(f.client, g, vs, &spec, &p));
  prev = p;
  for (uint32_t i = 0; i < 8; ++i) {
    pw_value_t in = pw_value(prev, 0);
    OK(pw_graph_add_compute(f.client, g, "c", copy, vs, &in, 1, &prev));
    if (i == 3) c3 = prev;
  }
  const char* copy_two =
      "noop\ninput f32[8] replicated\ninput f32[8] replicated\noutput f32[8] replicated\n";
  pw_executable_t copy2;
  OK(pw_fixture_compile(&f, vs, copy_two, &copy2));
  uint32_t j, k;
  pw_value_t ins[2] = {pw_value(prev, 0), pw_value(c3, 0)};
  OK(pw_graph_add_compute(f.client, g, "join", copy2, vs, ins, 2, &j));
  pw_value_t in = pw_value(j, 0);
  OK(pw_graph_add_compute(f.client, g, "k", copy, vs, &in, 1, &k));
  OK(pw_graph_add_output(f.client, g, pw_value(prev, 0)));
  OK(pw_graph_add_output(f.client, g, pw_value(k, 0)));
  /* A failed buffer: the output of a graph whose only op fails. */
  pw_graph_t bad;
  OK(pw_graph_create(f.client, &bad));
  uint32_t bp, bf;
  OK(pw_graph_add_parameter(f.client, bad, vs, &spec, &bp));
  in = pw_value(bp, 0);
  OK(pw_graph_add_compute(f.client, bad, "broken", fail, vs, &in, 1, &bf));
  OK(pw_graph_add_output(f.client, bad, pw_value(bf, 0)));
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  pw_buffer_t arg, failed;
  OK(pw_fixture_f32(&f, vs, 1, dims, pw_sharding_replicated(), data, &arg));
  pw_event_t* done = NULL;
  OK(pw_graph_submit(f.client, bad, &arg, 1, NULL, &failed, 1, &done));
  pw_status_t s = pw_fixture_wait(done);
  cr_assert_eq(pw_status_code(s), PW_STATUS_UNAVAILABLE);
  pw_status_free(s);
  for (int run = 0; run < 6; ++run) {
    bool failing = run == 1 || run == 3;
    float want[8];
    for (int e = 0; e < 8; ++e) want[e] = data[e] + (float)run;
    pw_buffer_t x = failed, outs[2];
    if (!failing) OK(pw_fixture_f32(&f, vs, 1, dims, pw_sharding_replicated(), want, &x));
    uint64_t before = f.dbl ? pw_double_backend_launch_count(f.dbl, 0) : 0;
    OK(pw_graph_submit(f.client, g, &x, 1, NULL, outs, 2, &done));
    s = pw_fixture_wait(done);
    float back[8] = {0};
    pw_status_t read = pw_buffer_to_host(f.client, outs[0], back, sizeof(back), PW_INFINITE_FUTURE);
    pw_event_t* k_ready = NULL;
    OK(pw_buffer_ready_event(f.client, outs[1], &k_ready));
    pw_status_t k_status = pw_fixture_wait(k_ready);
    if (failing) {
      cr_assert_eq(pw_status_code(s), PW_STATUS_UNAVAILABLE, "run %d", run);
      cr_assert(strstr(pw_status_message(s), "argument of node 1 (\"c\") failed"), "run %d: %s",
                run, pw_status_message(s));
      cr_assert_eq(pw_status_code(read), PW_STATUS_UNAVAILABLE, "run %d", run);
      cr_assert_eq(pw_status_code(k_status), PW_STATUS_UNAVAILABLE, "run %d", run);
      cr_assert(strstr(pw_status_message(k_status), "input node 9 (\"join\") failed"), "%s",
                pw_status_message(k_status));
      pw_status_free(s);
      pw_status_free(read);
      pw_status_free(k_status);
      /* Nothing launched: every op failed before launch. */
      cr_assert_eq(pw_double_backend_launch_count(f.dbl, 0), before, "run %d", run);
    } else {
      cr_assert_null(s, "run %d: %s", run, pw_status_message(s));
      cr_assert_null(read);
      cr_assert_null(k_status);
      cr_assert_eq(memcmp(back, want, sizeof(want)), 0, "run %d", run);
      cr_assert_eq(pw_double_backend_launch_count(f.dbl, 0), before + 10, "run %d", run);
      OK(pw_buffer_release(f.client, x));
    }
    OK(pw_buffer_release(f.client, outs[0]));
    OK(pw_buffer_release(f.client, outs[1]));
  }
  OK(pw_buffer_release(f.client, failed));
  OK(pw_buffer_release(f.client, arg));
  pw_fixture_deinit(&f);
}

Test(dispatch, reruns_after_a_failed_run_on_one_device_slices_inline) {
  run_rerun_after_failure(PW_FIXTURE_DOUBLE_INLINE);
}
Test(dispatch, reruns_after_a_failed_run_on_one_device_slices_threaded) {
  run_rerun_after_failure(PW_FIXTURE_DOUBLE_THREADED);
}
