/* The metrics observer (lib/observe/metrics.c) fed synthetic events on a
 * real runtime (two slices of two test-double devices): exact counts per
 * slice and per client, device busy time (reported, else launch to
 * done), the in-flight gauge, the window's waiting ops, histogram
 * buckets and sums; the Prometheus text (lines, escaping, +Inf); the
 * compile cache's counters; every bad input; and the HTTP endpoint (200
 * with the 0.0.4 content type, 404, 405, 503 after disable, port in use,
 * a bad address, a server left running at runtime destroy). */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/runtime.h"
#include "metrics/metrics_support.h"
#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(metrics, .fini = pw_test_check_leaks);

enum { kAlice = 1 };
static const char kS0[] = "slice=0,slice_name=slice0";
static const char kS1[] = "slice=1,slice_name=slice1";
static const char kAliceLabels[] = "client=alice,client_tag=1";

static pw_obs_event_t ev(uint32_t kind, uint32_t slice, uint32_t device, uint32_t count) {
  return (pw_obs_event_t){.kind = kind, .slice = slice, .device = device, .count = count,
                          .client = kAlice, .ts_ns = 10000000000ull};
}

static void init(pw_fixture_t* f, uint32_t window) {
  if (window == 0) {
    OK(pw_fixture_init(f, PW_FIXTURE_DOUBLE_INLINE, 2, "2", pw_allocator_system()));
  } else {
    OK(pw_fixture_init_sched(f, PW_FIXTURE_DOUBLE_INLINE, 2, "2", pw_allocator_system(),
                             pw_sched_policy_fifo(), window));
  }
  cr_assert_str_eq(f->runtime->slices[0].name, "slice0");
  OK(pw_runtime_metrics_enable(f->runtime, NULL));
  pw__observe_name_client(f->runtime->observer, kAlice, "alice");
}

/* The events of one small scenario; what they must count is checked in
 * counts_per_slice_and_client and in the text test. */
static void scenario(pw_runtime_t* rt) {
  pw_obs_event_t e = ev(PW_OBS_SUBMIT, UINT32_MAX, UINT32_MAX, 3);
  mt_event(rt, e);
  for (int i = 0; i < 2; ++i) mt_event(rt, ev(PW_OBS_ADMIT, 0, UINT32_MAX, 0));
  mt_event(rt, ev(PW_OBS_LAUNCH, 0, 0, 1));
  mt_event(rt, ev(PW_OBS_LAUNCH, 0, 1, 1));
  mt_event(rt, ev(PW_OBS_LAUNCH, 1, 0, 2)); /* a lane of two */
  e = ev(PW_OBS_LAUNCH_DONE, 0, 0, 1);      /* 3 us, no device time */
  e.since_ns = e.ts_ns - 3000;
  mt_event(rt, e);
  e = ev(PW_OBS_LAUNCH_DONE, 1, 0, 2); /* 2 ms, device time 500 ns, failed */
  e.since_ns = e.ts_ns - 2000000;
  e.start_ns = 100;
  e.end_ns = 600;
  e.flags = PW_OBS_FAILED;
  mt_event(rt, e);
  e = ev(PW_OBS_COPY, 1, 0, 1);
  e.bytes = 4096;
  mt_event(rt, e);
  e.kind = PW_OBS_COPY_DONE;
  e.since_ns = e.ts_ns - 20000; /* 20 us */
  mt_event(rt, e);
  e = ev(PW_OBS_OP_DONE, 0, UINT32_MAX, 0);
  e.ts_ns = 2000000000;
  e.since_ns = e.ts_ns - 1000000001; /* just over 1 s */
  mt_event(rt, e);
  e = ev(PW_OBS_OP_DONE, 1, UINT32_MAX, 0);
  e.since_ns = e.ts_ns - 50;
  e.flags = PW_OBS_FAILED;
  mt_event(rt, e);
  mt_event(rt, ev(PW_OBS_EXEC_DONE, UINT32_MAX, UINT32_MAX, 0));
  mt_event(rt, ev(PW_OBS_DEADLINE, 1, 0, 2));
  mt_event(rt, ev(PW_OBS_FLOW, 1, 0, 2));
  /* Out of range: counted nowhere, harmless. */
  e = ev(PW_OBS_LAUNCH, 99, 0, 1);
  e.client = 5000;
  mt_event(rt, e);
  e = ev(PW_OBS_SUBMIT, UINT32_MAX, UINT32_MAX, 7);
  e.client = 5000;
  mt_event(rt, e);
}

static mt_samples_t g_s;

Test(metrics, counts_per_slice_and_client) {
  pw_fixture_t f;
  init(&f, 0);
  scenario(f.runtime);
  OK(mt_read(f.runtime, &g_s));
  cr_assert_eq(mt_value(&g_s, "pathways_executions_submitted_total", ""), 2);
  cr_assert_eq(mt_value(&g_s, "pathways_executions_completed_total", ""), 1);
  cr_assert_eq(mt_value(&g_s, "pathways_executions_failed_total", ""), 0);
  cr_assert_eq(mt_series_of(&g_s, "pathways_client_ops_submitted_total"), 1);
  cr_assert_eq(mt_value(&g_s, "pathways_client_ops_submitted_total", kAliceLabels), 3);
  cr_assert_eq(mt_value(&g_s, "pathways_client_ops_launched_total", kAliceLabels), 2);
  cr_assert_eq(mt_value(&g_s, "pathways_client_ops_completed_total", kAliceLabels), 1);
  cr_assert_eq(mt_value(&g_s, "pathways_client_ops_failed_total", kAliceLabels), 1);
  cr_assert_eq(mt_value(&g_s, "pathways_ops_launched_total", kS0), 1);
  cr_assert_eq(mt_value(&g_s, "pathways_ops_launched_total", kS1), 1);
  cr_assert_eq(mt_value(&g_s, "pathways_ops_completed_total", kS0), 1);
  cr_assert_eq(mt_value(&g_s, "pathways_ops_completed_total", kS1), 0);
  cr_assert_eq(mt_value(&g_s, "pathways_ops_failed_total", kS1), 1);
  cr_assert_eq(mt_value(&g_s, "pathways_unit_launches_total", kS0), 2);
  cr_assert_eq(mt_value(&g_s, "pathways_unit_launches_total", kS1), 1);
  cr_assert_eq(mt_value(&g_s, "pathways_device_launches_total", kS0), 2);
  cr_assert_eq(mt_value(&g_s, "pathways_device_launches_total", kS1), 2);
  cr_assert_eq(mt_value(&g_s, "pathways_launches_failed_total", kS1), 1);
  cr_assert_eq(mt_value(&g_s, "pathways_launches_in_flight", kS0), 1);
  cr_assert_eq(mt_value(&g_s, "pathways_launches_in_flight", kS1), 0);
  /* 3 us of launch-to-done on one device; 500 ns reported x 2 devices. */
  cr_assert_float_eq(mt_value(&g_s, "pathways_device_busy_seconds_total", kS0), 3e-6, 1e-15);
  cr_assert_float_eq(mt_value(&g_s, "pathways_device_busy_seconds_total", kS1), 1e-6, 1e-15);
  cr_assert_eq(mt_value(&g_s, "pathways_launch_deadlines_total", kS1), 1);
  cr_assert_eq(mt_value(&g_s, "pathways_transfers_total", kS1), 1);
  cr_assert_eq(mt_value(&g_s, "pathways_transfer_bytes_total", kS1), 4096);
  cr_assert_eq(mt_value(&g_s, "pathways_transfer_bytes_total", kS0), 0);
  cr_assert_eq(mt_value(&g_s, "pathways_sched_admitted_total", kS0), 2);
  /* No window: nothing waits for one, the family is absent; no cache. */
  cr_assert_eq(mt_series_of(&g_s, "pathways_sched_waiting_ops"), 0);
  cr_assert_eq(mt_series_of(&g_s, "pathways_compile_cache_lookups_total"), 0);
  pw_fixture_deinit(&f);
}

static void check_buckets(const mt_series_t* h, const uint64_t* want, uint32_t n) {
  cr_assert_not_null(h);
  cr_assert_eq(h->bucket_count, 22);
  cr_assert_float_eq(h->bounds[0], 1e-6, 1e-18);
  cr_assert_float_eq(h->bounds[21], 10.0, 1e-12);
  for (uint32_t b = 0; b < n; ++b) {
    cr_assert_eq(h->buckets[b], want[b], "%s bucket le=%g: %llu, want %llu", h->family,
                 h->bounds[b], (unsigned long long)h->buckets[b], (unsigned long long)want[b]);
  }
}

Test(metrics, histogram_buckets_and_sums) {
  pw_fixture_t f;
  init(&f, 0);
  scenario(f.runtime);
  OK(mt_read(f.runtime, &g_s));
  /* Launch latency: 3 us (le 5e-6, index 2) and 2 ms (le 2.5e-3, index 10). */
  const mt_series_t* h = mt_find(&g_s, "pathways_launch_latency_seconds", "");
  uint64_t launch[22] = {0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
  check_buckets(h, launch, 22);
  cr_assert_eq(h->count, 2);
  cr_assert_float_eq(h->value, 0.002003, 1e-12);
  /* Op latency: 50 ns (le 1e-6) and 1.000000001 s (le 2.5: index 19). */
  h = mt_find(&g_s, "pathways_op_latency_seconds", "");
  uint64_t op[22] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2};
  check_buckets(h, op, 22);
  cr_assert_eq(h->count, 2);
  cr_assert_float_eq(h->value, 1.000000051, 1e-12);
  /* Transfer: 20 us (le 2.5e-5, index 4). */
  h = mt_find(&g_s, "pathways_transfer_seconds", "");
  cr_assert_eq(h->buckets[3], 0);
  cr_assert_eq(h->buckets[4], 1);
  cr_assert_eq(h->count, 1);
  /* An observation past the last bound is only in +Inf. */
  pw_obs_event_t e = ev(PW_OBS_COPY_DONE, 0, 0, 1);
  e.ts_ns = 100000000000ull; /* 100 s */
  e.since_ns = 1;
  mt_event(f.runtime, e);
  OK(mt_read(f.runtime, &g_s));
  h = mt_find(&g_s, "pathways_transfer_seconds", "");
  cr_assert_eq(h->buckets[21], 1);
  cr_assert_eq(h->count, 2);
  pw_fixture_deinit(&f);
}

static bool has_line(const char* text, const char* line) {
  size_t n = strlen(line);
  for (const char* p = text; (p = strstr(p, line)) != NULL; p += n) {
    if ((p == text || p[-1] == '\n') && p[n] == '\n') return true;
  }
  return false;
}

Test(metrics, prometheus_text) {
  pw_fixture_t f;
  init(&f, 0);
  pw__observe_name_client(f.runtime->observer, 2, "we\"ird\\na\nme");
  scenario(f.runtime);
  pw_obs_event_t e = ev(PW_OBS_SUBMIT, UINT32_MAX, UINT32_MAX, 1);
  e.client = 2;
  mt_event(f.runtime, e);
  mt_text_t t = {0};
  OK(pw_runtime_metrics_write_prometheus(f.runtime, mt_text_sink, &t));
  const char* want[] = {
      "# HELP pathways_executions_submitted_total Executions (graph or executable runs) "
      "submitted.",
      "# TYPE pathways_executions_submitted_total counter",
      "pathways_executions_submitted_total 3",
      "# TYPE pathways_launches_in_flight gauge",
      "pathways_launches_in_flight{slice=\"0\",slice_name=\"slice0\"} 1",
      "pathways_client_ops_submitted_total{client=\"alice\",client_tag=\"1\"} 3",
      "pathways_client_ops_submitted_total{client=\"we\\\"ird\\\\na\\nme\",client_tag=\"2\"} 1",
      "pathways_device_busy_seconds_total{slice=\"0\",slice_name=\"slice0\"} 3e-06",
      "# TYPE pathways_launch_latency_seconds histogram",
      "pathways_launch_latency_seconds_bucket{le=\"1e-06\"} 0",
      "pathways_launch_latency_seconds_bucket{le=\"5e-06\"} 1",
      "pathways_launch_latency_seconds_bucket{le=\"0.0025\"} 2",
      "pathways_launch_latency_seconds_bucket{le=\"10\"} 2",
      "pathways_launch_latency_seconds_bucket{le=\"+Inf\"} 2",
      "pathways_launch_latency_seconds_sum 0.002003",
      "pathways_launch_latency_seconds_count 2",
  };
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); ++i) {
    cr_assert(has_line(t.data, want[i]), "missing line:\n%s\nin:\n%s", want[i], t.data);
  }
  /* One HELP and one TYPE per family, even with several series. */
  const char* p = t.data;
  int types = 0;
  while ((p = strstr(p, "# TYPE pathways_ops_completed_total ")) != NULL) ++types, ++p;
  cr_assert_eq(types, 1);
  mt_text_free(&t);
  pw_fixture_deinit(&f);
}

Test(metrics, waiting_for_the_window) {
  pw_fixture_t f;
  init(&f, 2);
  mt_event(f.runtime, ev(PW_OBS_SUBMIT, UINT32_MAX, UINT32_MAX, 5));
  mt_event(f.runtime, ev(PW_OBS_ADMIT, 0, UINT32_MAX, 0));
  mt_event(f.runtime, ev(PW_OBS_ADMIT, 1, UINT32_MAX, 0));
  OK(mt_read(f.runtime, &g_s));
  cr_assert_eq(mt_value(&g_s, "pathways_sched_waiting_ops", kAliceLabels), 3);
  cr_assert_eq(mt_value(&g_s, "pathways_sched_admitted_total", kS1), 1);
  /* A completion seen without its launch (metrics enabled in between)
   * leaves the gauge at 0, not below. */
  mt_event(f.runtime, ev(PW_OBS_LAUNCH_DONE, 0, 0, 1));
  OK(mt_read(f.runtime, &g_s));
  cr_assert_eq(mt_value(&g_s, "pathways_launches_in_flight", kS0), 0);
  /* ...and, its start unknown (since_ns 0), no latency. */
  cr_assert_eq(mt_find(&g_s, "pathways_launch_latency_seconds", "")->count, 0);
  pw_fixture_deinit(&f);
}

static const char* kCopy8 = "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n";

Test(metrics, compile_cache_hits_and_misses) {
  pw_fixture_t f;
  init(&f, 0);
  pw_cache_options_t co;
  pw_cache_options_init(&co);
  pw_cache_t* cache = NULL;
  OK(pw_cache_create(&co, &cache));
  OK(pw_runtime_set_compile_cache(f.runtime, cache));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2", &vs));
  pw_executable_t a, b;
  OK(pw_fixture_compile(&f, vs, kCopy8, &a));
  OK(pw_fixture_compile(&f, vs, kCopy8, &b));
  OK(mt_read(f.runtime, &g_s));
  cr_assert_eq(mt_value(&g_s, "pathways_compile_cache_lookups_total", ""), 2);
  cr_assert_eq(mt_value(&g_s, "pathways_compile_cache_misses_total", ""), 1);
  cr_assert_eq(mt_value(&g_s, "pathways_compile_cache_hits_total", "tier=memory"), 1);
  cr_assert_eq(mt_value(&g_s, "pathways_compile_cache_hits_total", "tier=store"), 0);
  OK(pw_runtime_set_compile_cache(f.runtime, NULL));
  pw_fixture_deinit(&f);
  pw_cache_release(cache);
}

static pw_status_t stop_at_third(void* user, const pw_metric_sample_t* sample) {
  (void)sample;
  int* n = user;
  if (++*n == 3) return pw_status_make(PW_STATUS_CANCELLED, "visitor stops at 3");
  return NULL;
}

static pw_status_t sink_fails(void* user, const char* data, size_t size) {
  (void)user, (void)data, (void)size;
  return pw_status_make(PW_STATUS_DATA_LOSS, "sink is full");
}

Test(metrics, bad_input_names_the_culprit) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 1, "2", pw_allocator_system()));
  pw_runtime_t* rt = f.runtime;
  FAILS(pw_runtime_metrics_enable(NULL, NULL), PW_STATUS_INVALID_ARGUMENT, "runtime is NULL");
  pw_metrics_options_t o;
  pw_metrics_options_init(&o);
  o.struct_size = 4;
  FAILS(pw_runtime_metrics_enable(rt, &o), PW_STATUS_INVALID_ARGUMENT, "struct_size");
  pw_metrics_options_init(&o);
  o.flags = 4;
  FAILS(pw_runtime_metrics_enable(rt, &o), PW_STATUS_INVALID_ARGUMENT, "flags");
  FAILS(pw_runtime_metrics_disable(rt), PW_STATUS_FAILED_PRECONDITION, "metrics are off");
  FAILS(pw_runtime_metrics_disable(NULL), PW_STATUS_INVALID_ARGUMENT, "runtime is NULL");
  FAILS(mt_read(rt, &g_s), PW_STATUS_FAILED_PRECONDITION, "metrics are off");
  mt_text_t t = {0};
  FAILS(pw_runtime_metrics_write_prometheus(rt, mt_text_sink, &t), PW_STATUS_FAILED_PRECONDITION,
        "metrics are off");
  pw_metrics_server_t* server = (pw_metrics_server_t*)&t;
  FAILS(pw_metrics_server_start(rt, NULL, &server), PW_STATUS_FAILED_PRECONDITION,
        "pw_runtime_metrics_enable first");
  cr_assert_null(server);
  pw_metrics_options_init(&o);
  OK(pw_runtime_metrics_enable(rt, &o));
  FAILS(pw_runtime_metrics_enable(rt, NULL), PW_STATUS_FAILED_PRECONDITION, "already on");
  FAILS(pw_runtime_metrics_visit(rt, NULL, NULL), PW_STATUS_INVALID_ARGUMENT, "fn is NULL");
  FAILS(pw_runtime_metrics_visit(NULL, mt_collect, &g_s), PW_STATUS_INVALID_ARGUMENT, "runtime");
  FAILS(pw_runtime_metrics_write_prometheus(rt, NULL, NULL), PW_STATUS_INVALID_ARGUMENT,
        "sink is NULL");
  int n = 0;
  FAILS(pw_runtime_metrics_visit(rt, stop_at_third, &n), PW_STATUS_CANCELLED, "stops at 3");
  cr_assert_eq(n, 3);
  FAILS(pw_runtime_metrics_write_prometheus(rt, sink_fails, NULL), PW_STATUS_DATA_LOSS, "full");
  FAILS(pw_metrics_server_start(rt, NULL, NULL), PW_STATUS_INVALID_ARGUMENT, "out_server");
  FAILS(pw_metrics_server_start(NULL, NULL, &server), PW_STATUS_INVALID_ARGUMENT, "runtime");
  pw_metrics_server_options_t so;
  pw_metrics_server_options_init(&so);
  so.struct_size = 8;
  FAILS(pw_metrics_server_start(rt, &so, &server), PW_STATUS_INVALID_ARGUMENT, "struct_size");
  pw_metrics_server_options_init(&so);
  so.address = "localhost";
  FAILS(pw_metrics_server_start(rt, &so, &server), PW_STATUS_INVALID_ARGUMENT,
        "\"localhost\" is not an IPv4 or IPv6 literal");
  cr_assert_eq(pw_metrics_server_port(NULL), 0);
  pw_metrics_server_stop(NULL);
  /* Off and on again: counting starts from zero. */
  mt_event(rt, ev(PW_OBS_EXEC_DONE, UINT32_MAX, UINT32_MAX, 0));
  OK(pw_runtime_metrics_disable(rt));
  mt_event(rt, ev(PW_OBS_EXEC_DONE, UINT32_MAX, UINT32_MAX, 0)); /* not counted */
  OK(pw_runtime_metrics_enable(rt, NULL));
  OK(mt_read(rt, &g_s));
  cr_assert_eq(mt_value(&g_s, "pathways_executions_completed_total", ""), 0);
  pw_fixture_deinit(&f);
}

static void http_get(uint16_t port, const char* method, const char* path, int want_status,
                     char** body, char content_type[128]) {
  int status = 0;
  cr_assert(mt_http(port, method, path, &status, content_type, 128, body), "%s %s failed",
            method, path);
  cr_assert_eq(status, want_status, "%s %s: %d, want %d", method, path, status, want_status);
}

Test(metrics, http_endpoint) {
  pw_fixture_t f;
  init(&f, 0);
  scenario(f.runtime);
  pw_metrics_server_t* server = NULL;
  OK(pw_metrics_server_start(f.runtime, NULL, &server));
  uint16_t port = pw_metrics_server_port(server);
  cr_assert_neq(port, 0);
  char* body = NULL;
  char type[128];
  http_get(port, "GET", "/metrics", 200, &body, type);
  cr_assert(strncmp(type, "text/plain; version=0.0.4", 25) == 0, "Content-Type: %s", type);
  cr_assert(has_line(body, "pathways_client_ops_submitted_total{client=\"alice\",client_tag=\"1\"} 3"),
            "%s", body);
  free(body);
  http_get(port, "GET", "/", 404, &body, type);
  free(body);
  http_get(port, "GET", "/metricsx", 404, &body, type);
  free(body);
  http_get(port, "POST", "/metrics", 405, &body, type);
  free(body);
  /* The port is taken now: a second server there says so. */
  pw_metrics_server_options_t so;
  pw_metrics_server_options_init(&so);
  so.port = port;
  pw_metrics_server_t* second = NULL;
  char needle[64];
  snprintf(needle, sizeof(needle), "cannot listen on 127.0.0.1 port %u", port);
  FAILS(pw_metrics_server_start(f.runtime, &so, &second), PW_STATUS_UNAVAILABLE, needle);
  cr_assert_null(second);
  /* Metrics off: 503; the server stays until stopped. */
  OK(pw_runtime_metrics_disable(f.runtime));
  http_get(port, "GET", "/metrics", 503, &body, type);
  cr_assert(strstr(body, "metrics are off") != NULL, "%s", body);
  free(body);
  pw_metrics_server_stop(server);
  pw_fixture_deinit(&f);
}

Test(metrics, port_in_use_by_another_socket) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  cr_assert_geq(fd, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  cr_assert_eq(bind(fd, (struct sockaddr*)&addr, sizeof(addr)), 0);
  cr_assert_eq(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  cr_assert_eq(getsockname(fd, (struct sockaddr*)&addr, &len), 0);
  pw_fixture_t f;
  init(&f, 0);
  pw_metrics_server_options_t so;
  pw_metrics_server_options_init(&so);
  so.port = ntohs(addr.sin_port);
  pw_metrics_server_t* server = NULL;
  FAILS(pw_metrics_server_start(f.runtime, &so, &server), PW_STATUS_UNAVAILABLE, "in use");
  close(fd);
  pw_fixture_deinit(&f);
}

Test(metrics, servers_left_running_go_with_the_runtime) {
  /* Two servers, one of them on metrics turned off and on again: the
   * runtime's destroy stops and frees both (LeakSanitizer checks). */
  pw_fixture_t f;
  init(&f, 0);
  pw_metrics_server_t* a = NULL;
  pw_metrics_server_t* b = NULL;
  OK(pw_metrics_server_start(f.runtime, NULL, &a));
  OK(pw_runtime_metrics_disable(f.runtime));
  OK(pw_runtime_metrics_enable(f.runtime, NULL));
  pw_metrics_server_options_t so;
  pw_metrics_server_options_init(&so);
  so.address = "::1";
  pw_status_t s = pw_metrics_server_start(f.runtime, &so, &b);
  if (s != NULL) { /* no IPv6 loopback here: a clear UNAVAILABLE */
    cr_assert_eq(pw_status_code(s), PW_STATUS_UNAVAILABLE, "%s", pw_status_message(s));
    pw_status_free(s);
    OK(pw_metrics_server_start(f.runtime, NULL, &b));
  }
  cr_assert_neq(pw_metrics_server_port(b), 0);
  pw_fixture_deinit(&f);
}
