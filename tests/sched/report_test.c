/* What the dispatcher reports to the runtime's observers (lib/sched/
 * report.c, lib/observe/observe.h): a capturing observer installed on a
 * real runtime sees, for every run of a graph (compute on one slice, a
 * transfer to another, compute there), exactly one SUBMIT and EXEC_DONE,
 * one OP_DONE per op, one LAUNCH (or COPY) per unit of dispatch and op,
 * each closed by exactly one LAUNCH_DONE (COPY_DONE) on the same unit
 * after it, the graph's edges as FLOWs, failures flagged with their code;
 * on every kind of backend the tests have (inline, threaded, queued,
 * lanes, queued lanes, the CPU backend queued). Nothing is reported while
 * no observer is installed. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/client.h"
#include "observe/observe.h"
#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(report, .fini = pw_test_check_leaks);

typedef struct seen_t {
  pw_obs_event_t e;
  char name[32];
} seen_t;

typedef struct capture_t {
  pw_observer_t base;
  pthread_mutex_t lock;
  seen_t* events;
  size_t count, capacity;
} capture_t;

static void capture_record(pw_observer_t* self, const pw_obs_event_t* e) {
  capture_t* c = (capture_t*)self;
  pthread_mutex_lock(&c->lock);
  if (c->count == c->capacity) {
    c->capacity = c->capacity ? 2 * c->capacity : 1024;
    c->events = realloc(c->events, c->capacity * sizeof(seen_t));
    cr_assert_not_null(c->events);
  }
  seen_t* s = &c->events[c->count++];
  s->e = *e;
  s->e.name = NULL;
  snprintf(s->name, sizeof(s->name), "%s", e->name != NULL ? e->name : "");
  pthread_mutex_unlock(&c->lock);
}

static void capture_destroy(pw_observer_t* self) {
  capture_t* c = (capture_t*)self;
  pthread_mutex_destroy(&c->lock);
  free(c->events);
  free(c);
}

static capture_t* capture_install(pw_runtime_t* rt) {
  capture_t* c = calloc(1, sizeof(*c));
  cr_assert_not_null(c);
  c->base.record = capture_record;
  c->base.destroy = capture_destroy;
  pthread_mutex_init(&c->lock, NULL);
  /* The metrics' slot: the runtime frees it at destroy. */
  pw__observe_install(rt->observer, &rt->observer->metrics, &c->base);
  return c;
}

static size_t count_kind(const capture_t* c, uint32_t kind, uint32_t slice) {
  size_t n = 0;
  for (size_t i = 0; i < c->count; ++i) {
    if (c->events[i].e.kind == kind && (slice == UINT32_MAX || c->events[i].e.slice == slice)) n++;
  }
  return n;
}

static const char* kCopy8 = "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n";
/* The CPU backend's copy of positive data. */
static const char* kRelu8 =
    "kernel relu\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n";

typedef struct env_t {
  pw_fixture_t f;
  pw_vslice_t vs[2];
  pw_executable_t copy, fail;
  pw_array_spec_t spec;
  uint32_t slice_of[2];
  uint32_t units;  /* units of dispatch per slice */
} env_t;

static void env_init(env_t* e, pw_fixture_backend_t kind) {
  memset(e, 0, sizeof(*e));
  OK(pw_fixture_init(&e->f, kind, 2, "2x4", pw_allocator_system()));
  for (int s = 0; s < 2; ++s) {
    OK(pw_fixture_vslice(&e->f, "2x4", &e->vs[s]));
    pw_mesh_shape_t mesh;
    OK(pw_vslice_binding(e->f.client, e->vs[s], &e->slice_of[s], &mesh));
  }
  cr_assert_neq(e->slice_of[0], e->slice_of[1], "the two virtual slices share a slice");
  bool cpu = kind == PW_FIXTURE_CPU || kind == PW_FIXTURE_CPU_QUEUED;
  OK(pw_fixture_compile(&e->f, e->vs[0], cpu ? kRelu8 : kCopy8, &e->copy));
  OK(pw_fixture_compile(&e->f, e->vs[0],
                        cpu ? kRelu8
                            : "fail 14\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n",
                        &e->fail));
  int64_t dims[1] = {8};
  e->spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  e->units = pw_fixture_kind_lanes(kind) ? 4 : 8;
}

static void env_deinit(env_t* e) {
  OK(pw_executable_release(e->f.client, e->copy));
  OK(pw_executable_release(e->f.client, e->fail));
  pw_fixture_deinit(&e->f);
}

/* param -> "first" (|first| on slice 0) -> "hop" (to slice 1) -> "second"
 * (copy on slice 1) -> output. */
static pw_graph_t hop_graph(env_t* e, pw_executable_t first) {
  pw_client_t* cl = e->f.client;
  pw_graph_t g;
  OK(pw_graph_create(cl, &g));
  uint32_t p, a, t, b;
  OK(pw_graph_add_parameter(cl, g, e->vs[0], &e->spec, &p));
  pw_value_t v = pw_value(p, 0);
  OK(pw_graph_add_compute(cl, g, "first", first, e->vs[0], &v, 1, &a));
  OK(pw_graph_add_transfer(cl, g, "hop", pw_value(a, 0), e->vs[1],
                           pw_sharding_split(0, PW_MESH_AXIS_ALL), &t));
  v = pw_value(t, 0);
  OK(pw_graph_add_compute(cl, g, "second", e->copy, e->vs[1], &v, 1, &b));
  OK(pw_graph_add_output(cl, g, pw_value(b, 0)));
  OK(pw_graph_finalize(cl, g));
  return g;
}

static void run_graph(env_t* e, pw_graph_t g, uint32_t runs, bool fails) {
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t dims[1] = {8};
  pw_buffer_t arg;
  OK(pw_fixture_f32(&e->f, e->vs[0], 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), data, &arg));
  for (uint32_t r = 0; r < runs; ++r) {
    pw_buffer_t out;
    pw_event_t* done = NULL;
    OK(pw_graph_submit(e->f.client, g, &arg, 1, NULL, &out, 1, &done));
    pw_status_t status = pw_fixture_wait(done);
    cr_assert_eq(status != NULL, fails, "run %u", r);
    pw_status_free(status);
    OK(pw_buffer_release(e->f.client, out));
  }
  OK(pw_buffer_release(e->f.client, arg));
}

/* Each LAUNCH (COPY) is closed by one LAUNCH_DONE (COPY_DONE) of the same
 * op on the same unit, later, naming when it started. */
static void check_pairs(const capture_t* c, uint32_t open_kind, uint32_t close_kind) {
  for (size_t i = 0; i < c->count; ++i) {
    const pw_obs_event_t* a = &c->events[i].e;
    if (a->kind != open_kind) continue;
    size_t closes = 0;
    for (size_t j = 0; j < c->count; ++j) {
      const pw_obs_event_t* b = &c->events[j].e;
      if (b->kind != close_kind || b->gang != a->gang || b->slice != a->slice ||
          b->device != a->device) {
        continue;
      }
      closes++;
      cr_assert_gt(j, i, "a %u came before its %u", close_kind, open_kind);
      cr_assert_eq(b->since_ns, a->ts_ns, "the close names its launch's time");
      cr_assert_geq(b->ts_ns, a->ts_ns);
      cr_assert_eq(b->count, a->count);
    }
    cr_assert_eq(closes, 1, "gang %llu slice %u device %u: %zu closes",
                 (unsigned long long)a->gang, a->slice, a->device, closes);
  }
}

static void reports_every_event(pw_fixture_backend_t kind) {
  env_t e;
  env_init(&e, kind);
  pw_graph_t g = hop_graph(&e, e.copy);
  run_graph(&e, g, 2, false); /* not observed: nothing to see */
  capture_t* c = capture_install(e.f.runtime);
  const uint32_t runs = 20;
  run_graph(&e, g, runs, false);
  pw__observe_install(e.f.runtime->observer, &e.f.runtime->observer->metrics, NULL);
  pw__observe_retire(e.f.runtime->observer, &c->base); /* the runtime frees it */
  size_t seen = c->count;
  run_graph(&e, g, 2, false); /* removed: nothing more */
  cr_assert_eq(c->count, seen);
  uint32_t s0 = e.slice_of[0], s1 = e.slice_of[1], u = e.units;
  cr_assert_eq(count_kind(c, PW_OBS_SUBMIT, UINT32_MAX), runs);
  cr_assert_eq(count_kind(c, PW_OBS_EXEC_DONE, UINT32_MAX), runs);
  cr_assert_eq(count_kind(c, PW_OBS_OP_DONE, UINT32_MAX), 3 * runs);
  cr_assert_eq(count_kind(c, PW_OBS_LAUNCH, s0), runs * u);
  cr_assert_eq(count_kind(c, PW_OBS_LAUNCH, s1), runs * u);
  cr_assert_eq(count_kind(c, PW_OBS_LAUNCH_DONE, UINT32_MAX), 2 * runs * u);
  cr_assert_eq(count_kind(c, PW_OBS_COPY, s1), runs * u);
  cr_assert_eq(count_kind(c, PW_OBS_COPY_DONE, s1), runs * u);
  /* hop reads first, second reads hop: one edge per unit of slice 1 each. */
  cr_assert_eq(count_kind(c, PW_OBS_FLOW, s1), 2 * runs * u);
  cr_assert_eq(count_kind(c, PW_OBS_FLOW, s0), 0);
  check_pairs(c, PW_OBS_LAUNCH, PW_OBS_LAUNCH_DONE);
  check_pairs(c, PW_OBS_COPY, PW_OBS_COPY_DONE);
  for (size_t i = 0; i < c->count; ++i) {
    const seen_t* s = &c->events[i];
    cr_assert_eq(s->e.flags & PW_OBS_FAILED, 0u, "event %zu failed", i);
    if (s->e.kind == PW_OBS_LAUNCH || s->e.kind == PW_OBS_LAUNCH_DONE) {
      cr_assert(strcmp(s->name, "first") == 0 || strcmp(s->name, "second") == 0, "%s", s->name);
      cr_assert_eq((s->e.flags & PW_OBS_HOST) != 0, pw_fixture_kind_lanes(kind));
      cr_assert_eq(s->e.count, 8 / u);
      cr_assert_eq(s->e.device % (8 / u), 0u);
    }
    if (s->e.kind == PW_OBS_COPY) {
      cr_assert_str_eq(s->name, "hop");
      cr_assert_eq(s->e.bytes, (uint64_t)sizeof(float) * (8 / u));
    }
    if (s->e.kind == PW_OBS_FLOW) {
      cr_assert_eq(s->e.gang, s->e.from_gang + 1, "edges go from the op before");
    }
    if (s->e.kind == PW_OBS_OP_DONE || s->e.kind == PW_OBS_EXEC_DONE) {
      cr_assert_neq(s->e.since_ns, 0);
      cr_assert_leq(s->e.since_ns, s->e.ts_ns);
    }
    cr_assert_eq(s->e.client, e.f.client->tag);
  }
  OK(pw_graph_release(e.f.client, g));
  env_deinit(&e);
}

Test(report, inline_double) { reports_every_event(PW_FIXTURE_DOUBLE_INLINE); }
Test(report, threaded_double) { reports_every_event(PW_FIXTURE_DOUBLE_THREADED); }
Test(report, queued_double) { reports_every_event(PW_FIXTURE_DOUBLE_QUEUED); }
Test(report, cpu_queued) { reports_every_event(PW_FIXTURE_CPU_QUEUED); }
Test(report, lanes) { reports_every_event(PW_FIXTURE_DOUBLE_LANES); }
Test(report, queued_lanes) { reports_every_event(PW_FIXTURE_DOUBLE_LANES_QUEUED); }

/* A failing op: its launches close FAILED with its code, it and the ops
 * after it resolve failed (the transfer and the second compute never
 * launch), the execution too. */
static void reports_failures(pw_fixture_backend_t kind) {
  env_t e;
  env_init(&e, kind);
  pw_graph_t g = hop_graph(&e, e.fail);
  capture_t* c = capture_install(e.f.runtime);
  run_graph(&e, g, 3, true);
  uint32_t u = e.units;
  size_t failed_launches = 0, failed_ops = 0, failed_execs = 0;
  for (size_t i = 0; i < c->count; ++i) {
    const pw_obs_event_t* ev = &c->events[i].e;
    if (!(ev->flags & PW_OBS_FAILED)) continue;
    cr_assert_eq(ev->status_code, (uint32_t)PW_STATUS_UNAVAILABLE, "kind %u code %u", ev->kind,
                 ev->status_code);
    failed_launches += ev->kind == PW_OBS_LAUNCH_DONE;
    failed_ops += ev->kind == PW_OBS_OP_DONE;
    failed_execs += ev->kind == PW_OBS_EXEC_DONE;
  }
  cr_assert_eq(failed_launches, 3 * u);
  cr_assert_eq(failed_ops, 3 * 3);
  cr_assert_eq(failed_execs, 3);
  cr_assert_eq(count_kind(c, PW_OBS_LAUNCH, e.slice_of[1]), 0, "dependents never launch");
  check_pairs(c, PW_OBS_LAUNCH, PW_OBS_LAUNCH_DONE);
  OK(pw_graph_release(e.f.client, g));
  env_deinit(&e);
}

Test(report, failures_inline) { reports_failures(PW_FIXTURE_DOUBLE_INLINE); }
Test(report, failures_queued_lanes) { reports_failures(PW_FIXTURE_DOUBLE_LANES_QUEUED); }
