/* Metrics end to end: real workloads (chains of computes on one 2x4 slice)
 * on the CPU backend, the threaded test double, host-launch lanes and a
 * scheduler window; after the runs' done events, the metrics the
 * dispatcher's reports (lib/sched/report.c) produced equal the exact
 * counts of what was submitted: executions, ops per client and slice,
 * unit and device launches, latencies observed, nothing in flight or
 * waiting; a failing op and its dependents count as failed. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "core/client.h"
#include "metrics/metrics_support.h"
#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(metrics_e2e, .fini = pw_test_check_leaks);

static const char* kCopy8 = "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n";
static const char* kRelu8 = "kernel relu\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n";
static const char* kFail8 = "fail 14\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n";
static const char kS0[] = "slice=0,slice_name=slice0";
static mt_samples_t g_s;

/* The test double's failing program when |fail| (the CPU backend has
 * none), else nothing. */
static pw_executable_t copy_or_fail(pw_fixture_t* f, pw_vslice_t vs, bool fail) {
  pw_executable_t e = {0};
  if (fail) OK(pw_fixture_compile(f, vs, kFail8, &e));
  return e;
}

/* A graph: parameter -> |n| computes (the first one failing when
 * |fail_first|). */
static pw_graph_t chain(pw_fixture_t* f, pw_vslice_t vs, uint32_t n, bool fail_first) {
  pw_executable_t copy, fail = copy_or_fail(f, vs, fail_first);
  /* The CPU backend's kernel, the test double's copy. */
  OK(pw_fixture_compile(f, vs, f->dbl != NULL ? kCopy8 : kRelu8, &copy));
  pw_graph_t g;
  OK(pw_graph_create(f->client, &g));
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t prev;
  OK(pw_graph_add_parameter(f->client, g, vs, &spec, &prev));
  for (uint32_t i = 0; i < n; ++i) {
    pw_value_t in = pw_value(prev, 0);
    OK(pw_graph_add_compute(f->client, g, "op", i == 0 && fail_first ? fail : copy, vs, &in, 1,
                            &prev));
  }
  OK(pw_graph_add_output(f->client, g, pw_value(prev, 0)));
  return g;
}

/* Runs the chain |runs| times, waiting for each; returns how many failed. */
static uint32_t run(pw_fixture_t* f, pw_vslice_t vs, pw_graph_t g, uint32_t runs) {
  int64_t dims[1] = {8};
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8}; /* relu keeps them */
  pw_buffer_t arg;
  OK(pw_fixture_f32(f, vs, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), data, &arg));
  uint32_t failed = 0;
  for (uint32_t r = 0; r < runs; ++r) {
    pw_buffer_t out;
    pw_event_t* done = NULL;
    OK(pw_graph_submit(f->client, g, &arg, 1, NULL, &out, 1, &done));
    pw_status_t s = pw_fixture_wait(done);
    failed += s != NULL;
    pw_status_free(s);
    OK(pw_buffer_release(f->client, out));
  }
  OK(pw_buffer_release(f->client, arg));
  return failed;
}

static void client_labels(pw_fixture_t* f, char out[128]) {
  snprintf(out, 128, "client=%s,client_tag=%u", pw_client_name(f->client), f->client->tag);
}

/* |units|: units of dispatch of the 2x4 slice (8 devices, or 4 lanes). */
static void exact_counts(pw_fixture_backend_t kind, uint32_t window, uint32_t units) {
  enum { kOps = 7, kRuns = 9 };
  pw_fixture_t f;
  if (window == 0) {
    OK(pw_fixture_init(&f, kind, 1, "2x4", pw_allocator_system()));
  } else {
    OK(pw_fixture_init_sched(&f, kind, 1, "2x4", pw_allocator_system(), pw_sched_policy_fifo(),
                             window));
  }
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2x4", &vs));
  pw_graph_t g = chain(&f, vs, kOps, false);
  OK(pw_runtime_metrics_enable(f.runtime, NULL));
  cr_assert_eq(run(&f, vs, g, kRuns), 0);
  OK(mt_read(f.runtime, &g_s));
  char client[128];
  client_labels(&f, client);
  double ops = kOps * kRuns;
  cr_assert_eq(mt_value(&g_s, "pathways_executions_submitted_total", ""), kRuns);
  cr_assert_eq(mt_value(&g_s, "pathways_executions_completed_total", ""), kRuns);
  cr_assert_eq(mt_value(&g_s, "pathways_executions_failed_total", ""), 0);
  cr_assert_eq(mt_value(&g_s, "pathways_client_ops_submitted_total", client), ops, "%s: %g",
               client, mt_value(&g_s, "pathways_client_ops_submitted_total", client));
  cr_assert_eq(mt_value(&g_s, "pathways_client_ops_launched_total", client), ops);
  cr_assert_eq(mt_value(&g_s, "pathways_client_ops_completed_total", client), ops);
  cr_assert_eq(mt_value(&g_s, "pathways_client_ops_failed_total", client), 0);
  cr_assert_eq(mt_value(&g_s, "pathways_ops_launched_total", kS0), ops);
  cr_assert_eq(mt_value(&g_s, "pathways_ops_completed_total", kS0), ops);
  cr_assert_eq(mt_value(&g_s, "pathways_unit_launches_total", kS0), ops * units);
  cr_assert_eq(mt_value(&g_s, "pathways_device_launches_total", kS0), ops * 8);
  cr_assert_eq(mt_value(&g_s, "pathways_launches_in_flight", kS0), 0);
  cr_assert_gt(mt_value(&g_s, "pathways_device_busy_seconds_total", kS0), 0);
  const mt_series_t* h = mt_find(&g_s, "pathways_launch_latency_seconds", "");
  cr_assert_eq(h->count, (uint64_t)ops * units);
  h = mt_find(&g_s, "pathways_op_latency_seconds", "");
  cr_assert_eq(h->count, (uint64_t)ops);
  if (window != 0) {
    cr_assert_eq(mt_value(&g_s, "pathways_sched_admitted_total", kS0), ops);
    cr_assert_eq(mt_value(&g_s, "pathways_sched_waiting_ops", client), 0);
  } else {
    cr_assert_eq(mt_value(&g_s, "pathways_sched_admitted_total", kS0), 0);
  }
  OK(pw_graph_release(f.client, g));
  pw_fixture_deinit(&f);
}

Test(metrics_e2e, cpu_backend) { exact_counts(PW_FIXTURE_CPU, 0, 8); }
Test(metrics_e2e, threaded_double) { exact_counts(PW_FIXTURE_DOUBLE_THREADED, 0, 8); }
Test(metrics_e2e, host_lanes) { exact_counts(PW_FIXTURE_DOUBLE_LANES, 0, 4); }
Test(metrics_e2e, queued_cpu) { exact_counts(PW_FIXTURE_CPU_QUEUED, 0, 8); }
Test(metrics_e2e, scheduler_window) { exact_counts(PW_FIXTURE_CPU, 2, 8); }

Test(metrics_e2e, failed_ops_and_executions) {
  enum { kOps = 3, kRuns = 4 };
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_THREADED, 1, "2x4", pw_allocator_system()));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2x4", &vs));
  pw_graph_t g = chain(&f, vs, kOps, true);
  OK(pw_runtime_metrics_enable(f.runtime, NULL));
  cr_assert_eq(run(&f, vs, g, kRuns), kRuns);
  OK(mt_read(f.runtime, &g_s));
  char client[128];
  client_labels(&f, client);
  cr_assert_eq(mt_value(&g_s, "pathways_executions_failed_total", ""), kRuns);
  cr_assert_eq(mt_value(&g_s, "pathways_executions_completed_total", ""), 0);
  /* The failing op and the two after it (their input failed). */
  cr_assert_eq(mt_value(&g_s, "pathways_client_ops_failed_total", client), kOps * kRuns);
  cr_assert_eq(mt_value(&g_s, "pathways_ops_failed_total", kS0), kOps * kRuns);
  cr_assert_eq(mt_value(&g_s, "pathways_launches_failed_total", kS0), 8 * kRuns);
  cr_assert_eq(mt_value(&g_s, "pathways_launches_in_flight", kS0), 0);
  OK(pw_graph_release(f.client, g));
  pw_fixture_deinit(&f);
}

static double both_slices(const char* family) {
  return mt_value(&g_s, family, kS0) + mt_value(&g_s, family, "slice=1,slice_name=slice1");
}

Test(metrics_e2e, transfers_count_parts_and_bytes) {
  /* split(0) over slice 0's 8 devices -> replicated over slice 1's: each
   * of the 8 receiving devices gets the whole 32-byte array. */
  enum { kRuns = 5 };
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_CPU, 2, "2x4", pw_allocator_system()));
  pw_vslice_t a, b;
  OK(pw_fixture_vslice(&f, "2x4", &a));
  OK(pw_fixture_vslice(&f, "2x4", &b));
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t x, y;
  OK(pw_graph_add_parameter(f.client, g, a, &spec, &x));
  OK(pw_graph_add_transfer(f.client, g, "spread", pw_value(x, 0), b, pw_sharding_replicated(), &y));
  OK(pw_graph_add_output(f.client, g, pw_value(y, 0)));
  OK(pw_runtime_metrics_enable(f.runtime, NULL));
  cr_assert_eq(run(&f, a, g, kRuns), 0);
  OK(mt_read(f.runtime, &g_s));
  char client[128];
  client_labels(&f, client);
  cr_assert_eq(mt_value(&g_s, "pathways_client_ops_submitted_total", client), kRuns);
  cr_assert_eq(mt_value(&g_s, "pathways_client_ops_completed_total", client), kRuns);
  cr_assert_eq(mt_value(&g_s, "pathways_client_ops_launched_total", client), 0); /* no compute */
  cr_assert_eq(both_slices("pathways_transfers_total"), 8 * kRuns);
  cr_assert_eq(both_slices("pathways_transfer_bytes_total"), 8 * 32 * kRuns);
  cr_assert_eq(both_slices("pathways_transfers_failed_total"), 0);
  cr_assert_eq(mt_find(&g_s, "pathways_transfer_seconds", "")->count, 8 * kRuns);
  OK(pw_graph_release(f.client, g));
  pw_fixture_deinit(&f);
}
