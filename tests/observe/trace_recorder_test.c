/* The trace recorder's control calls (include/pathways/trace.h,
 * lib/observe/trace.c): start, stop and stats, their misuse, the ring
 * per thread and what a full ring drops, a host clock, and that a
 * stopped trace records nothing more. */
#include <criterion/criterion.h>
#include <string.h>

#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(trace_recorder, .fini = pw_test_check_leaks);

static const char* kCopy8 = "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n";

typedef struct env_t {
  pw_fixture_t f;
  pw_vslice_t vs;
  pw_executable_t copy;
  pw_graph_t chain;
  pw_buffer_t arg;
} env_t;

/* A chain of |n| copies on one 2x4 slice of |kind|. */
static void env_init(env_t* e, pw_fixture_backend_t kind, uint32_t n) {
  memset(e, 0, sizeof(*e));
  OK(pw_fixture_init(&e->f, kind, 1, "2x4", pw_allocator_system()));
  OK(pw_fixture_vslice(&e->f, "2x4", &e->vs));
  OK(pw_fixture_compile(&e->f, e->vs, kCopy8, &e->copy));
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  OK(pw_graph_create(e->f.client, &e->chain));
  uint32_t prev;
  OK(pw_graph_add_parameter(e->f.client, e->chain, e->vs, &spec, &prev));
  for (uint32_t i = 0; i < n; ++i) {
    pw_value_t in = pw_value(prev, 0);
    OK(pw_graph_add_compute(e->f.client, e->chain, "copy", e->copy, e->vs, &in, 1, &prev));
  }
  OK(pw_graph_add_output(e->f.client, e->chain, pw_value(prev, 0)));
  OK(pw_graph_finalize(e->f.client, e->chain));
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  OK(pw_fixture_f32(&e->f, e->vs, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), data, &e->arg));
}

static void env_run(env_t* e, uint32_t runs) {
  for (uint32_t r = 0; r < runs; ++r) {
    pw_buffer_t out;
    pw_event_t* done = NULL;
    OK(pw_graph_submit(e->f.client, e->chain, &e->arg, 1, NULL, &out, 1, &done));
    OK(pw_fixture_wait(done));
    OK(pw_buffer_release(e->f.client, out));
  }
}

static void env_deinit(env_t* e) {
  OK(pw_buffer_release(e->f.client, e->arg));
  OK(pw_graph_release(e->f.client, e->chain));
  OK(pw_executable_release(e->f.client, e->copy));
  pw_fixture_deinit(&e->f);
}

static pw_trace_stats_t stats_of(pw_runtime_t* rt) {
  pw_trace_stats_t s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  OK(pw_runtime_trace_stats(rt, &s));
  return s;
}

/* Events per run of a chain of |n| copies on 8 devices (inline double:
 * one thread): SUBMIT, EXEC_DONE, n OP_DONE, 8n LAUNCH, 8n LAUNCH_DONE,
 * 8(n-1) FLOW. */
static uint64_t events_per_run(uint64_t n) { return 2 + n + 16 * n + 8 * (n - 1); }

Test(trace_recorder, counts_what_it_records) {
  env_t e;
  env_init(&e, PW_FIXTURE_DOUBLE_INLINE, 4);
  pw_runtime_t* rt = e.f.runtime;
  FAILS(pw_runtime_trace_stats(rt, &(pw_trace_stats_t){.struct_size = sizeof(pw_trace_stats_t)}),
        PW_STATUS_NOT_FOUND, "no trace was started");
  FAILS(pw_runtime_trace_stop(rt), PW_STATUS_FAILED_PRECONDITION, "no trace is recording");
  OK(pw_runtime_trace_start(rt, NULL));
  FAILS(pw_runtime_trace_start(rt, NULL), PW_STATUS_FAILED_PRECONDITION, "recording already");
  env_run(&e, 10);
  pw_trace_stats_t s = stats_of(rt);
  cr_assert_eq(s.recording, 1);
  cr_assert_eq(s.events, 10 * events_per_run(4));
  cr_assert_eq(s.dropped, 0);
  cr_assert_eq(s.threads, 1);
  OK(pw_runtime_trace_stop(rt));
  env_run(&e, 3); /* stopped: not recorded */
  s = stats_of(rt);
  cr_assert_eq(s.recording, 0);
  cr_assert_eq(s.events, 10 * events_per_run(4));
  /* A new start drops the old trace. */
  OK(pw_runtime_trace_start(rt, NULL));
  env_run(&e, 1);
  OK(pw_runtime_trace_stop(rt));
  cr_assert_eq(stats_of(rt).events, events_per_run(4));
  env_deinit(&e);
}

Test(trace_recorder, full_ring_drops_the_oldest) {
  env_t e;
  env_init(&e, PW_FIXTURE_DOUBLE_INLINE, 4);
  pw_runtime_t* rt = e.f.runtime;
  pw_trace_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.events_per_thread = 100; /* rounded up to 128 */
  OK(pw_runtime_trace_start(rt, &o));
  env_run(&e, 10);
  OK(pw_runtime_trace_stop(rt));
  pw_trace_stats_t s = stats_of(rt);
  cr_assert_eq(s.events, 128);
  cr_assert_eq(s.dropped, 10 * events_per_run(4) - 128);
  env_deinit(&e);
}

static uint64_t fake_now;
/* Called from the backend's threads too. */
static uint64_t fake_clock(void* user) {
  return __atomic_add_fetch((uint64_t*)user, 1, __ATOMIC_RELAXED);
}

Test(trace_recorder, options_checked_and_clock_used) {
  env_t e;
  env_init(&e, PW_FIXTURE_DOUBLE_THREADED, 2);
  pw_runtime_t* rt = e.f.runtime;
  pw_trace_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = 4;
  FAILS(pw_runtime_trace_start(rt, &o), PW_STATUS_INVALID_ARGUMENT, "pw_trace_options_t");
  o.struct_size = sizeof(o);
  o.events_per_thread = (1u << 24) + 1;
  FAILS(pw_runtime_trace_start(rt, &o), PW_STATUS_INVALID_ARGUMENT, "events_per_thread");
  o.events_per_thread = 0;
  o.clock_user = &fake_now;
  FAILS(pw_runtime_trace_start(rt, &o), PW_STATUS_INVALID_ARGUMENT, "clock is NULL");
  FAILS(pw_runtime_trace_start(NULL, NULL), PW_STATUS_INVALID_ARGUMENT, "runtime is NULL");
  FAILS(pw_runtime_trace_stop(NULL), PW_STATUS_INVALID_ARGUMENT, "runtime is NULL");
  FAILS(pw_runtime_trace_stats(rt, NULL), PW_STATUS_INVALID_ARGUMENT, "out_stats is NULL");
  o.clock = fake_clock;
  fake_now = 1000;
  OK(pw_runtime_trace_start(rt, &o));
  env_run(&e, 5);
  OK(pw_runtime_trace_stop(rt));
  pw_trace_stats_t s = stats_of(rt);
  /* The threaded double completes on its own threads: more than one ring. */
  cr_assert_eq(s.events, 5 * events_per_run(2));
  cr_assert_geq(s.threads, 2);
  /* The clock was read once at start and once per event. */
  cr_assert_eq(__atomic_load_n(&fake_now, __ATOMIC_RELAXED), 1000 + 1 + s.events);
  /* Left recording: the runtime's destroy frees it. */
  OK(pw_runtime_trace_start(rt, NULL));
  env_run(&e, 1);
  env_deinit(&e);
}
