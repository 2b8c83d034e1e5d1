/* Queue-ordered launch (lib/sched/queued.c) and launch deadlines
 * (lib/sched/watchdog.c), on the test double behind the queue-ordered
 * wrapper (tests/support/queue_wrapper.h): one device, chains of copies
 * and independent runs, failures and lost launches injected by queue_seq. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <string.h>

#include "cts/double_backend.h"
#include "pathways/pathways.h"
#include "support/queue_wrapper.h"
#include "support/test_allocators.h"

#define PW_NS_PER_MS INT64_C(1000000)
#define PW_NS_PER_S INT64_C(1000000000)

typedef struct qt_s {
  pw_runtime_t* rt;
  pw_client_t* client;
  pw_queue_wrapper_t* qw;
  pw_vslice_t vs;
  pw_executable_t copy;
  pw_array_spec_t spec;
} qt_t;

static atomic_int g_errors_logged;

static void qt_log(pw_log_level_t level, const char* subsystem, const char* message,
                   void* user) {
  (void)subsystem;
  (void)user;
  (void)message;
  if (level >= PW_LOG_ERROR) atomic_fetch_add(&g_errors_logged, 1);
}

static void ok(pw_status_t s, const char* what) {
  if (s != NULL) {
    char m[512];
    pw_status_format(s, m, sizeof(m));
    pw_status_free(s);
    cr_assert_fail("%s: %s", what, m);
  }
}

/* One device behind the wrapper; |off|: queued launch turned off. */
static void qt_init(qt_t* t, pw_queue_wrapper_options_t qo, bool off, uint64_t launch_deadline,
                    uint64_t drain_deadline) {
  memset(t, 0, sizeof(*t));
  atomic_store(&g_errors_logged, 0);
  pw_double_options_t o;
  pw_double_options_init(&o);
  o.device_count = 1;
  o.completion = PW_DOUBLE_COMPLETE_INLINE;
  pw_backend_t inner, backend;
  ok(pw_double_backend_create(&o, &inner), "double");
  ok(pw_queue_wrapper_create(&qo, inner, &backend), "wrapper");
  t->qw = pw_queue_wrapper_from(&backend);
  pw_slice_desc_t slice = {.name = "q", .mesh = pw_mesh_shape_make(1, (const uint32_t[]){1})};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = &slice;
  ro.slice_count = 1;
  ro.logger = (pw_logger_t){qt_log, NULL, PW_LOG_ERROR};
  ro.disable_queued_launch = off;
  ro.launch_deadline_ns = launch_deadline;
  ro.drain_deadline_ns = drain_deadline;
  ok(pw_runtime_create(&ro, &t->rt), "runtime");
  ok(pw_client_create(t->rt, NULL, &t->client), "client");
  ok(pw_vslice_create(t->client, &slice.mesh, 0, &t->vs), "vslice");
  const char* copy = "copy\n";
  ok(pw_executable_compile(t->client, t->vs, copy, strlen(copy), NULL, &t->copy), "compile");
  int64_t one = 1;
  t->spec = (pw_array_spec_t){PW_DTYPE_U8, pw_shape_make(1, &one), pw_sharding_replicated()};
}

static void qt_deinit(qt_t* t) {
  ok(pw_executable_release(t->client, t->copy), "release");
  ok(pw_vslice_release(t->client, t->vs), "vslice release");
  ok(pw_client_destroy(t->client), "client destroy");
  ok(pw_runtime_destroy(t->rt), "runtime destroy");
}

/* param -> copy x n -> output. */
static pw_graph_t qt_chain(qt_t* t, uint32_t n) {
  pw_graph_t g;
  ok(pw_graph_create(t->client, &g), "graph");
  uint32_t node;
  ok(pw_graph_add_parameter(t->client, g, t->vs, &t->spec, &node), "param");
  for (uint32_t k = 0; k < n; ++k) {
    pw_value_t in = pw_value(node, 0);
    ok(pw_graph_add_compute(t->client, g, "copy", t->copy, t->vs, &in, 1, &node), "copy");
  }
  ok(pw_graph_add_output(t->client, g, pw_value(node, 0)), "output");
  return g;
}

/* Runs |g| on byte |x|; returns the run's status, and checks the output
 * carries |x| when it succeeded. */
static pw_status_t qt_run(qt_t* t, pw_graph_t g, uint8_t x, const pw_submit_options_t* opts) {
  pw_buffer_t in, out;
  ok(pw_buffer_from_host(t->client, t->vs, &t->spec, &x, 1, &in), "from_host");
  pw_event_t* done = NULL;
  ok(pw_graph_submit(t->client, g, &in, 1, opts, &out, 1, &done), "submit");
  pw_status_t st = pw_event_wait(done, pw_clock_now() + 10 * PW_NS_PER_S);
  pw_event_release(done);
  if (st == NULL) {
    uint8_t y = 0;
    ok(pw_buffer_to_host(t->client, out, &y, 1, PW_INFINITE_FUTURE), "to_host");
    cr_expect_eq(y, x, "the chain's output");
  }
  ok(pw_buffer_release(t->client, in), "release in");
  ok(pw_buffer_release(t->client, out), "release out");
  return st;
}

Test(queued, chain_is_launched_ahead_in_queue_order) {
  qt_t t;
  qt_init(&t, (pw_queue_wrapper_options_t){.depth = 8, .kernel_ns = 200000, .ordered = true},
          false, 0, 0);
  pw_graph_t g = qt_chain(&t, 40);
  ok(qt_run(&t, g, 7, NULL), "run");
  pw_queue_wrapper_stats_t st = pw_queue_wrapper_stats(t.qw, 0);
  cr_expect_eq(st.launches, 40);
  cr_expect_eq(st.out_of_order, 0, "queue_seq 1, 2, 3, ...");
  cr_expect_eq(st.max_outstanding, 8, "the queue filled to its depth (got %u)",
               st.max_outstanding);
  cr_expect_eq(st.refused, 0, "never beyond the depth");
  ok(pw_graph_release(t.client, g), "graph release");
  qt_deinit(&t);
}

Test(queued, capability_off_launches_one_at_a_time) {
  qt_t t;
  qt_init(&t, (pw_queue_wrapper_options_t){.depth = 8, .kernel_ns = 100000, .ordered = true},
          true, 0, 0);
  pw_graph_t g = qt_chain(&t, 20);
  ok(qt_run(&t, g, 9, NULL), "run");
  pw_queue_wrapper_stats_t st = pw_queue_wrapper_stats(t.qw, 0);
  cr_expect_eq(st.launches, 20);
  cr_expect_eq(st.max_outstanding, 1);
  ok(pw_graph_release(t.client, g), "graph release");
  qt_deinit(&t);
}

Test(queued, independent_submissions_fill_the_queue) {
  qt_t t;
  qt_init(&t, (pw_queue_wrapper_options_t){.depth = 16, .kernel_ns = 200000, .ordered = true},
          false, 0, 0);
  pw_graph_t g = qt_chain(&t, 1);
  enum { kRuns = 64 };
  pw_buffer_t in[kRuns], out[kRuns];
  pw_event_t* done[kRuns];
  for (int i = 0; i < kRuns; ++i) {
    uint8_t x = (uint8_t)i;
    ok(pw_buffer_from_host(t.client, t.vs, &t.spec, &x, 1, &in[i]), "from_host");
    ok(pw_graph_submit(t.client, g, &in[i], 1, NULL, &out[i], 1, &done[i]), "submit");
  }
  for (int i = 0; i < kRuns; ++i) {
    ok(pw_event_wait(done[i], pw_clock_now() + 10 * PW_NS_PER_S), "wait");
    pw_event_release(done[i]);
    uint8_t y = 0;
    ok(pw_buffer_to_host(t.client, out[i], &y, 1, PW_INFINITE_FUTURE), "to_host");
    cr_expect_eq(y, (uint8_t)i);
    ok(pw_buffer_release(t.client, in[i]), "release");
    ok(pw_buffer_release(t.client, out[i]), "release");
  }
  pw_queue_wrapper_stats_t st = pw_queue_wrapper_stats(t.qw, 0);
  cr_expect_eq(st.max_outstanding, 16, "got %u", st.max_outstanding);
  cr_expect_eq(st.refused, 0);
  ok(pw_graph_release(t.client, g), "graph release");
  qt_deinit(&t);
}

Test(queued, a_failure_mid_queue_fails_what_depends_on_it_only) {
  qt_t t;
  qt_init(&t, (pw_queue_wrapper_options_t){.depth = 8, .kernel_ns = 50000, .ordered = true},
          false, 0, 0);
  pw_graph_t g = qt_chain(&t, 10);
  /* Launch 4 of the first run fails: 5..10 ran behind it, on its output. */
  pw_queue_wrapper_fail(t.qw, 0, 4, PW_STATUS_DATA_LOSS);
  pw_status_t st = qt_run(&t, g, 3, NULL);
  cr_assert(st != NULL, "the run fails");
  cr_expect_eq(pw_status_code(st), PW_STATUS_DATA_LOSS, "with the failure's code");
  cr_expect(strstr(pw_status_message(st), "injected failure of launch 4") != NULL, "%s",
            pw_status_message(st));
  pw_status_free(st);
  pw_queue_wrapper_stats_t s1 = pw_queue_wrapper_stats(t.qw, 0);
  cr_expect_eq(s1.launches, 10, "every op behind it still ran and completed");
  /* The runtime stays usable: the next run is whole. */
  ok(qt_run(&t, g, 5, NULL), "next run");
  ok(pw_graph_release(t.client, g), "graph release");
  qt_deinit(&t);
}

Test(queued, a_lost_launch_ends_in_deadline_exceeded) {
  qt_t t;
  qt_init(&t, (pw_queue_wrapper_options_t){.depth = 4, .ordered = true}, false,
          50 * PW_NS_PER_MS, 0);
  pw_graph_t g = qt_chain(&t, 6);
  pw_queue_wrapper_lose(t.qw, 0, 3);
  pw_time_t t0 = pw_clock_now();
  pw_status_t st = qt_run(&t, g, 1, NULL);
  cr_assert(st != NULL);
  cr_expect_eq(pw_status_code(st), PW_STATUS_DEADLINE_EXCEEDED, "%s", pw_status_message(st));
  cr_expect(strstr(pw_status_message(st), "slice 'q' device 0") != NULL, "names the device: %s",
            pw_status_message(st));
  cr_expect(strstr(pw_status_message(st), "\"copy\"") != NULL, "names the node: %s",
            pw_status_message(st));
  pw_status_free(st);
  cr_expect(pw_clock_now() - t0 < 5 * PW_NS_PER_S, "no hang");
  ok(qt_run(&t, g, 2, NULL), "usable after");
  ok(pw_graph_release(t.client, g), "graph release");
  qt_deinit(&t);
}

Test(queued, a_submission_deadline_overrides_none) {
  qt_t t;
  qt_init(&t, (pw_queue_wrapper_options_t){.depth = 4, .ordered = true}, false, 0, 0);
  pw_graph_t g = qt_chain(&t, 3);
  pw_queue_wrapper_lose(t.qw, 0, 2);
  pw_submit_options_t opts = {.struct_size = sizeof(opts),
                              .launch_deadline_ns = 30 * PW_NS_PER_MS};
  pw_status_t st = qt_run(&t, g, 1, &opts);
  cr_assert(st != NULL);
  cr_expect_eq(pw_status_code(st), PW_STATUS_DEADLINE_EXCEEDED, "%s", pw_status_message(st));
  pw_status_free(st);
  ok(pw_graph_release(t.client, g), "graph release");
  qt_deinit(&t);
}

Test(queued, destroy_fails_a_lost_launch_after_the_drain_deadline) {
  qt_t t;
  qt_init(&t, (pw_queue_wrapper_options_t){.depth = 4, .ordered = true}, false, 0,
          100 * PW_NS_PER_MS);
  pw_graph_t g = qt_chain(&t, 3);
  pw_queue_wrapper_lose(t.qw, 0, 2);
  uint8_t x = 4;
  pw_buffer_t in, out;
  ok(pw_buffer_from_host(t.client, t.vs, &t.spec, &x, 1, &in), "from_host");
  pw_event_t* done = NULL;
  ok(pw_graph_submit(t.client, g, &in, 1, NULL, &out, 1, &done), "submit");
  pw_status_t early = pw_event_wait(done, pw_clock_now() + 20 * PW_NS_PER_MS);
  cr_expect(early != NULL, "the run cannot finish on its own");
  pw_status_free(early);
  ok(pw_buffer_release(t.client, in), "release");
  ok(pw_buffer_release(t.client, out), "release");
  ok(pw_graph_release(t.client, g), "graph release");
  ok(pw_executable_release(t.client, t.copy), "release");
  ok(pw_vslice_release(t.client, t.vs), "vslice release");
  pw_time_t t0 = pw_clock_now();
  ok(pw_client_destroy(t.client), "client destroy returns");
  cr_expect(pw_clock_now() - t0 < 5 * PW_NS_PER_S, "within the drain deadline and a bit");
  cr_expect(atomic_load(&g_errors_logged) >= 1, "and says so");
  pw_status_t st = pw_event_wait(done, PW_IMMEDIATE_PAST);
  cr_assert(st != NULL, "the run failed");
  cr_expect_eq(pw_status_code(st), PW_STATUS_DEADLINE_EXCEEDED, "%s", pw_status_message(st));
  pw_status_free(st);
  pw_event_release(done);
  ok(pw_runtime_destroy(t.rt), "runtime destroy");
}

/* Creating a runtime whose slices are queue-ordered (their queue tokens)
 * fails cleanly at every allocation: RESOURCE_EXHAUSTED, nothing leaked
 * (the wrapper's own memory is not the allocator's). */
static bool qt_create_body(pw_allocator_t allocator, bool expect_failure, void* user) {
  (void)user;
  pw_double_options_t o;
  pw_double_options_init(&o);
  o.device_count = 4;
  o.allocator = allocator;
  pw_backend_t inner, backend;
  pw_status_t st = pw_double_backend_create(&o, &inner);
  if (st == NULL) {
    st = pw_queue_wrapper_create(&(pw_queue_wrapper_options_t){.depth = 16, .ordered = true},
                                 inner, &backend);
  }
  pw_runtime_t* rt = NULL;
  if (st == NULL) {
    pw_slice_desc_t slices[2] = {
        {.mesh = pw_mesh_shape_make(1, (const uint32_t[]){2}), .first_device = 0},
        {.mesh = pw_mesh_shape_make(1, (const uint32_t[]){2}), .first_device = 2}};
    pw_runtime_options_t ro;
    memset(&ro, 0, sizeof(ro));
    ro.struct_size = sizeof(ro);
    ro.allocator = allocator;
    ro.backends = &backend;
    ro.backend_count = 1;
    ro.slices = slices;
    ro.slice_count = 2;
    st = pw_runtime_create(&ro, &rt);
  }
  if (st == NULL) {
    pw_status_t d = pw_runtime_destroy(rt);
    pw_status_free(d);
    return !expect_failure && d == NULL;
  }
  bool good = expect_failure && pw_status_code(st) == PW_STATUS_RESOURCE_EXHAUSTED;
  pw_status_free(st);
  return good;
}

Test(queued, runtime_create_over_queued_slices_sweeps_allocation_failures) {
  char why[256] = "";
  int swept = pw_test_allocator_sweep(qt_create_body, NULL, why);
  cr_assert(swept > 0, "%s", why);
}
