/* The elastic helper (pathways/elastic.h) on the CPU backend: a counter
 * state (x + 1 per step, exact in f32, split over every device of the
 * job's spanning mesh) survives slices lost through a failing step,
 * through a topology event between steps and through the host, restores
 * onto fewer slices (resharded), grows back, waits for a quick return;
 * the final state equals an uninterrupted run's bit for bit; misuse and
 * too few slices are clear errors. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pathways/pathways.h"
#include "runtime/checks.h"
#include "support/metric_lookup.h"
#include "support/test_allocators.h"

TestSuite(elastic, .fini = pw_test_check_leaks);

enum { kSlices = 4, kPer = 2, kLen = 24, kMaxEvents = 64 };

typedef struct job_s {
  pw_client_t* client;
  pw_runtime_t* runtime;
  pw_backend_t backend;
  pw_vslice_t vs;
  pw_executable_t add;
  pw_graph_t graph;
  pw_buffer_t ones;
  bool built;
  uint32_t setups, restoring_setups, teardowns;
  uint32_t last_count;
  /* Injections, by step (-1: none). */
  int fail_device_at, fail_device, lose_after, lose_slice, repair_at;
  int bad_step_at;
  bool skip_place;
  pw_elastic_event_kind_t events[kMaxEvents];
  uint64_t event_steps[kMaxEvents];
  uint32_t event_count;
} job_t;

static const pw_array_spec_t kSpec = {PW_DTYPE_F32, {1, {kLen}},
                                      PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};

static void job_release(job_t* j) {
  if (!j->built) return;
  if (j->graph.id) OK(pw_graph_release(j->client, j->graph));
  if (j->add.id) OK(pw_executable_release(j->client, j->add));
  if (j->ones.id) OK(pw_buffer_release(j->client, j->ones));
  OK(pw_vslice_release(j->client, j->vs));
  j->graph.id = j->add.id = j->ones.id = 0;
  j->built = false;
}

static pw_status_t job_setup(void* user, pw_elastic_t* e, const uint32_t* slices, uint32_t count,
                             bool restoring) {
  job_t* j = user;
  j->setups++;
  j->restoring_setups += restoring;
  j->last_count = count;
  for (uint32_t i = 1; i < count; ++i) cr_assert_lt(slices[i - 1], slices[i], "ascending");
  pw_vslice_span_t span = {0};
  span.struct_size = sizeof(span);
  span.mesh = (pw_mesh_shape_t)PW_MESH_SHAPE_INIT(1, count * kPer);
  span.slice_count = count;
  span.slices = slices;
  PW_RETURN_IF_ERROR(pw_vslice_create_spanning(j->client, &span, &j->vs));
  j->built = true;
  const char* text = "kernel add\ninput f32[24] split(0,all)\ninput f32[24] split(0,all)\n"
                     "output f32[24] split(0,all)\n";
  PW_RETURN_IF_ERROR(pw_executable_compile(j->client, j->vs, text, strlen(text), NULL, &j->add));
  PW_RETURN_IF_ERROR(pw_graph_create(j->client, &j->graph));
  uint32_t x, one, y;
  PW_RETURN_IF_ERROR(pw_graph_add_parameter(j->client, j->graph, j->vs, &kSpec, &x));
  PW_RETURN_IF_ERROR(pw_graph_add_parameter(j->client, j->graph, j->vs, &kSpec, &one));
  pw_value_t in[2] = {pw_value(x, 0), pw_value(one, 0)};
  PW_RETURN_IF_ERROR(pw_graph_add_compute(j->client, j->graph, "inc", j->add, j->vs, in, 2, &y));
  PW_RETURN_IF_ERROR(pw_graph_add_output(j->client, j->graph, pw_value(y, 0)));
  float v[kLen];
  for (int i = 0; i < kLen; ++i) v[i] = 1.0f;
  PW_RETURN_IF_ERROR(pw_buffer_from_host(j->client, j->vs, &kSpec, v, sizeof(v), &j->ones));
  if (j->skip_place) return NULL;
  PW_RETURN_IF_ERROR(pw_elastic_place(e, 0, j->vs, &kSpec));
  if (!restoring) {
    for (int i = 0; i < kLen; ++i) v[i] = (float)(i * 100);
    pw_buffer_t x0;
    PW_RETURN_IF_ERROR(pw_buffer_from_host(j->client, j->vs, &kSpec, v, sizeof(v), &x0));
    PW_RETURN_IF_ERROR(pw_elastic_set_state(e, 0, x0));
  }
  return NULL;
}

static void job_teardown(void* user, pw_elastic_t* e) {
  (void)e;
  job_t* j = user;
  j->teardowns++;
  job_release(j);
}

static pw_status_t job_step(void* user, pw_elastic_t* e, uint64_t step) {
  job_t* j = user;
  if ((int)step == j->bad_step_at) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "the job's own bug");
  }
  if ((int)step == j->fail_device_at) {
    OK(pw_cpu_backend_set_health(j->backend, (uint32_t)j->fail_device, PW_DEVICE_FAILED));
    j->fail_device_at = -1;
  }
  if ((int)step == j->repair_at) {
    OK(pw_cpu_backend_set_health(j->backend, (uint32_t)j->fail_device, PW_DEVICE_HEALTHY));
    j->repair_at = -1;
  }
  pw_buffer_t args[2] = {{0}, j->ones};
  PW_RETURN_IF_ERROR(pw_elastic_state(e, 0, &args[0]));
  pw_buffer_t next;
  pw_event_t* done;
  PW_RETURN_IF_ERROR(pw_graph_submit(j->client, j->graph, args, 2, NULL, &next, 1, &done));
  pw_status_t status = pw_event_wait(done, pw_deadline_from_timeout(10000000000LL));
  pw_event_release(done);
  if (status != NULL) {
    OK(pw_buffer_release(j->client, next));
    return status;
  }
  PW_RETURN_IF_ERROR(pw_elastic_set_state(e, 0, next));
  if ((int)step == j->lose_after) {
    /* Lost between steps: the helper learns of it from the topology event. */
    OK(pw_runtime_lose_slice(j->runtime, (uint32_t)j->lose_slice, "between steps"));
    j->lose_after = -1;
  }
  return NULL;
}

static void job_event(void* user, const pw_elastic_event_t* ev) {
  job_t* j = user;
  cr_assert_geq(ev->struct_size, PW_ELASTIC_EVENT_SIZE_V1);
  if (j->event_count < kMaxEvents) {
    j->events[j->event_count] = ev->kind;
    j->event_steps[j->event_count] = ev->step;
  }
  j->event_count++;
}

typedef struct env_s {
  pw_runtime_t* runtime;
  pw_client_t* client;
  pw_backend_t backend;
  job_t job;
} env_t;

static void env_init(env_t* env, uint64_t health_poll_ns) {
  memset(env, 0, sizeof(*env));
  pw_cpu_backend_options_t cpu;
  pw_cpu_backend_options_init(&cpu);
  cpu.device_count = kSlices * kPer;
  OK(pw_cpu_backend_create(&cpu, &env->backend));
  pw_slice_desc_t slices[kSlices];
  for (int s = 0; s < kSlices; ++s) {
    slices[s] = (pw_slice_desc_t){NULL, PW_MESH_SHAPE_INIT(1, kPer), 0, (uint32_t)(s * kPer), 0};
  }
  pw_runtime_options_t ro = {0};
  ro.struct_size = sizeof(ro);
  ro.backends = &env->backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = kSlices;
  ro.health_poll_ns = health_poll_ns;
  OK(pw_runtime_create(&ro, &env->runtime));
  OK(pw_client_create(env->runtime, NULL, &env->client));
  job_t* j = &env->job;
  j->client = env->client;
  j->runtime = env->runtime;
  j->backend = env->backend;
  j->fail_device_at = j->lose_after = j->repair_at = j->bad_step_at = -1;
}

static void env_deinit(env_t* env) {
  OK(pw_client_destroy(env->client));
  OK(pw_runtime_destroy(env->runtime));
}

static pw_elastic_options_t options(uint32_t every) {
  pw_elastic_options_t o;
  pw_elastic_options_init(&o);
  o.slice_mesh = (pw_mesh_shape_t)PW_MESH_SHAPE_INIT(1, kPer);
  o.snapshot_every = every;
  o.state_count = 1;
  return o;
}

static pw_elastic_job_t callbacks(job_t* j) {
  pw_elastic_job_t cb = {sizeof(cb), j, job_setup, job_teardown, job_step, job_event};
  return cb;
}

/* The state after |steps| steps: i * 100 + steps, exactly. */
static void check_state(env_t* env, pw_elastic_t* e, int steps) {
  pw_buffer_t b;
  OK(pw_elastic_state(e, 0, &b));
  float v[kLen];
  OK(pw_buffer_to_host(env->client, b, v, sizeof(v), PW_INFINITE_FUTURE));
  for (int i = 0; i < kLen; ++i) {
    cr_assert_eq(v[i], (float)(i * 100 + steps), "element %d: %f after %d steps", i, v[i], steps);
  }
}

static bool saw(const job_t* j, pw_elastic_event_kind_t kind) {
  for (uint32_t i = 0; i < j->event_count && i < kMaxEvents; ++i) {
    if (j->events[i] == kind) return true;
  }
  return false;
}

Test(elastic, uninterrupted_runs_every_step_once) {
  env_t env;
  env_init(&env, 0);
  pw_elastic_options_t o = options(4);
  pw_elastic_job_t cb = callbacks(&env.job);
  pw_elastic_t* e;
  OK(pw_elastic_create(env.client, &o, &cb, &e));
  OK(pw_elastic_run(e, 0, 10));
  check_state(&env, e, 10);
  pw_elastic_stats_t st = {.struct_size = sizeof(st)};
  OK(pw_elastic_stats(e, &st));
  cr_assert_eq(st.steps_completed, 10);
  cr_assert_eq(st.steps_replayed, 0);
  cr_assert_eq(st.recoveries, 0);
  cr_assert_eq(st.snapshots, 3, "steps 0, 4, 8");
  cr_assert_eq(st.slice_count, kSlices);
  /* Run more steps on the same set-up. */
  OK(pw_elastic_run(e, 10, 3));
  check_state(&env, e, 13);
  cr_assert_eq(env.job.setups, 1);
  OK(pw_elastic_destroy(e));
  cr_assert_eq(env.job.teardowns, 1);
  env_deinit(&env);
}

Test(elastic, a_failing_step_restores_on_fewer_slices_and_grows_back) {
  env_t env;
  env_init(&env, 1000000);
  env.job.fail_device_at = 7;
  env.job.fail_device = 2 * kPer; /* slice 2 */
  env.job.repair_at = 11;
  pw_elastic_options_t o = options(5);
  pw_elastic_job_t cb = callbacks(&env.job);
  pw_elastic_t* e;
  OK(pw_elastic_create(env.client, &o, &cb, &e));
  OK(pw_elastic_run(e, 0, 30));
  check_state(&env, e, 30);
  pw_elastic_stats_t st = {.struct_size = sizeof(st)};
  OK(pw_elastic_stats(e, &st));
  cr_assert_eq(st.recoveries, 1);
  cr_assert_eq(st.growths, 1);
  /* Steps 5 and 6 run again after restoring step 5; or, when the loss
   * came before the snapshot of step 5 had copied slice 2's shards (that
   * snapshot then fails and the one of step 0 stands), steps 0-6. */
  cr_assert(st.steps_replayed == 2 || st.steps_replayed == 7,
            "replayed %llu steps: neither from the snapshot of step 5 nor of step 0",
            (unsigned long long)st.steps_replayed);
  cr_assert_eq(st.steps_completed, 30 + st.steps_replayed);
  cr_assert_eq(st.slice_count, kSlices);
  cr_assert_gt(st.last_restore_ns, 0);
  cr_assert(saw(&env.job, PW_ELASTIC_SLICE_LOST));
  cr_assert(saw(&env.job, PW_ELASTIC_RESTORED));
  cr_assert(saw(&env.job, PW_ELASTIC_REMESHED));
  cr_assert(saw(&env.job, PW_ELASTIC_SLICE_BACK));
  cr_assert(saw(&env.job, PW_ELASTIC_GROWN));
  cr_assert_eq(env.job.restoring_setups, 2);
  OK(pw_elastic_destroy(e));
  env_deinit(&env);
}

static double metric(pw_runtime_t* rt, const char* family, const char* label, uint64_t* count) {
  double v = pw_test_metric(rt, family, label, count);
  cr_assert_geq(v, 0, "no series %s{%s}", family, label ? label : "");
  return v;
}

typedef struct text_s {
  char* data;
  size_t size, capacity;
} text_t;

static pw_status_t text_append(void* user, const char* bytes, size_t size) {
  text_t* t = user;
  if (t->size + size + 1 > t->capacity) {
    t->capacity = (t->size + size + 1) * 2;
    t->data = realloc(t->data, t->capacity);
    cr_assert_not_null(t->data);
  }
  memcpy(t->data + t->size, bytes, size);
  t->size += size;
  t->data[t->size] = '\0';
  return NULL;
}

/* The same loss and growth, seen by the metrics and in a trace. */
Test(elastic, losses_snapshots_and_re_meshes_are_counted_and_traced) {
  env_t env;
  env_init(&env, 1000000);
  env.job.fail_device_at = 7;
  env.job.fail_device = 2 * kPer; /* slice 2 */
  env.job.repair_at = 11;
  OK(pw_runtime_metrics_enable(env.runtime, NULL));
  OK(pw_runtime_trace_start(env.runtime, NULL));
  pw_elastic_options_t o = options(5);
  pw_elastic_job_t cb = callbacks(&env.job);
  pw_elastic_t* e;
  OK(pw_elastic_create(env.client, &o, &cb, &e));
  OK(pw_elastic_run(e, 0, 30));
  pw_elastic_stats_t st = {.struct_size = sizeof(st)};
  OK(pw_elastic_stats(e, &st));
  OK(pw_elastic_destroy(e));
  OK(pw_runtime_trace_stop(env.runtime));
  pw_runtime_t* rt = env.runtime;
  cr_assert_eq(metric(rt, "pathways_slice_losses_total", "2", NULL), 1);
  cr_assert_eq(metric(rt, "pathways_slice_returns_total", "2", NULL), 1);
  cr_assert_eq(metric(rt, "pathways_slice_losses_total", "1", NULL), 0);
  cr_assert_eq(metric(rt, "pathways_elastic_recoveries_total", NULL, NULL), 1);
  cr_assert_eq(metric(rt, "pathways_elastic_growths_total", NULL, NULL), 1);
  uint64_t n = 0;
  cr_assert_gt(metric(rt, "pathways_elastic_recovery_seconds", NULL, &n), 0);
  cr_assert_eq(n, 1);
  /* The snapshot of step 5 fails when slice 2 is lost before its shards
   * were copied (then step 0's is restored and 7 steps replay). */
  cr_assert(st.steps_replayed == 2 || st.steps_replayed == 7, "replayed %llu",
            (unsigned long long)st.steps_replayed);
  double failed = st.steps_replayed == 7 ? 1 : 0;
  double snaps = metric(rt, "pathways_snapshots_total", NULL, NULL);
  cr_assert_eq(metric(rt, "pathways_snapshots_failed_total", NULL, NULL), failed);
  cr_assert_eq(snaps + failed, st.snapshots, "%g snapshots counted, %g failed, %u taken", snaps,
               failed, st.snapshots);
  cr_assert_eq(metric(rt, "pathways_snapshot_bytes_total", NULL, NULL), snaps * kLen * sizeof(float));
  (void)metric(rt, "pathways_snapshot_seconds", NULL, &n);
  cr_assert_eq(n, snaps);
  cr_assert_eq(metric(rt, "pathways_snapshot_persists_total", NULL, NULL), 0,
               "no store: nothing persisted");
  text_t json = {0};
  OK(pw_runtime_trace_write(env.runtime, text_append, &json));
  cr_assert_not_null(json.data);
  cr_assert_not_null(strstr(json.data, "\"slice 2 lost\""));
  cr_assert_not_null(strstr(json.data, "\"slice 2 back\""));
  cr_assert_not_null(strstr(json.data, "\"snapshot of step 5\""));
  cr_assert_not_null(strstr(json.data, st.steps_replayed == 2
                                           ? "\"recovered onto 3 slices (step 5)\""
                                           : "\"recovered onto 3 slices (step 0)\""),
                     "replayed %llu", (unsigned long long)st.steps_replayed);
  cr_assert_not_null(strstr(json.data, "\"grown onto 4 slices"));
  cr_assert_not_null(strstr(json.data, "\"name\":\"runtime\""), "the runtime track is named");
#ifdef PW_TRACE_DIR
  OK(pw_runtime_trace_write_file(env.runtime, PW_TRACE_DIR "/elastic_loss.json"));
#endif
  free(json.data);
  env_deinit(&env);
}

Test(elastic, a_loss_between_steps_is_seen_through_the_topology_event) {
  env_t env;
  env_init(&env, 0);
  env.job.lose_after = 6;
  env.job.lose_slice = 1;
  pw_elastic_options_t o = options(3);
  o.max_slices = 3; /* slices 0-2: slice 3 stays spare */
  pw_elastic_job_t cb = callbacks(&env.job);
  pw_elastic_t* e;
  OK(pw_elastic_create(env.client, &o, &cb, &e));
  OK(pw_elastic_run(e, 0, 12));
  check_state(&env, e, 12);
  /* The spare slice 3 replaced the lost one: still 3 slices. */
  cr_assert_eq(pw_elastic_slice_count(e), 3);
  cr_assert_eq(env.job.last_count, 3);
  cr_assert(saw(&env.job, PW_ELASTIC_RESTORED));
  cr_assert(!saw(&env.job, PW_ELASTIC_REMESHED), "same slice count: no shrink");
  OK(pw_elastic_destroy(e));
  env_deinit(&env);
}

static void* restore_later(void* arg) {
  env_t* env = arg;
  struct timespec ts = {0, 1000000};
  for (int i = 0; i < 20000; ++i) { /* until the job lost it */
    pw_slice_info_t info = {.struct_size = sizeof(pw_slice_info_t)};
    OK(pw_runtime_slice_info(env->runtime, 1, &info));
    if (info.state == PW_SLICE_LOST) break;
    nanosleep(&ts, NULL);
  }
  ts.tv_nsec = 30 * 1000000;
  nanosleep(&ts, NULL);
  OK(pw_runtime_restore_slice(env->runtime, 1));
  return NULL;
}

Test(elastic, a_quick_return_is_waited_for) {
  env_t env;
  env_init(&env, 0);
  env.job.lose_after = 4;
  env.job.lose_slice = 1;
  pw_elastic_options_t o = options(2);
  o.return_wait_ns = 5000000000ull;
  pw_elastic_job_t cb = callbacks(&env.job);
  pw_elastic_t* e;
  OK(pw_elastic_create(env.client, &o, &cb, &e));
  pthread_t t;
  pthread_create(&t, NULL, restore_later, &env);
  OK(pw_elastic_run(e, 0, 10));
  pthread_join(t, NULL);
  check_state(&env, e, 10);
  cr_assert_eq(pw_elastic_slice_count(e), kSlices, "waited for the slice instead of shrinking");
  cr_assert(!saw(&env.job, PW_ELASTIC_REMESHED));
  pw_elastic_stats_t st = {.struct_size = sizeof(st)};
  OK(pw_elastic_stats(e, &st));
  cr_assert_eq(st.recoveries, 1);
  OK(pw_elastic_destroy(e));
  env_deinit(&env);
}

Test(elastic, too_few_slices_and_job_errors_end_the_run) {
  env_t env;
  env_init(&env, 0);
  pw_elastic_options_t o = options(2);
  o.min_slices = 4;
  env.job.lose_after = 1;
  env.job.lose_slice = 3;
  pw_elastic_job_t cb = callbacks(&env.job);
  pw_elastic_t* e;
  OK(pw_elastic_create(env.client, &o, &cb, &e));
  FAILS(pw_elastic_run(e, 0, 6), PW_STATUS_UNAVAILABLE, "below min_slices 4");
  OK(pw_elastic_destroy(e));
  OK(pw_runtime_restore_slice(env.runtime, 3));
  /* A step's own error is the run's, naming the step. */
  o.min_slices = 0;
  env.job.bad_step_at = 3;
  OK(pw_elastic_create(env.client, &o, &cb, &e));
  FAILS(pw_elastic_run(e, 0, 6), PW_STATUS_INVALID_ARGUMENT, "step 3: the job's own bug");
  OK(pw_elastic_destroy(e));
  /* A setup that does not place its state. */
  env.job.bad_step_at = -1;
  env.job.skip_place = true;
  OK(pw_elastic_create(env.client, &o, &cb, &e));
  FAILS(pw_elastic_run(e, 0, 6), PW_STATUS_FAILED_PRECONDITION, "did not place state 0");
  OK(pw_elastic_destroy(e));
  env_deinit(&env);
}

Test(elastic, bad_arguments_name_the_culprit) {
  env_t env;
  env_init(&env, 0);
  pw_elastic_options_t o = options(2);
  pw_elastic_job_t cb = callbacks(&env.job);
  pw_elastic_t* e = (pw_elastic_t*)1;
  FAILS(pw_elastic_create(NULL, &o, &cb, &e), PW_STATUS_INVALID_ARGUMENT, "client is NULL");
  FAILS(pw_elastic_create(env.client, NULL, &cb, &e), PW_STATUS_INVALID_ARGUMENT, "options");
  cr_assert_null(e);
  pw_elastic_job_t bad = cb;
  bad.step = NULL;
  FAILS(pw_elastic_create(env.client, &o, &bad, &e), PW_STATUS_INVALID_ARGUMENT, "job.step");
  o.state_count = 0;
  FAILS(pw_elastic_create(env.client, &o, &cb, &e), PW_STATUS_INVALID_ARGUMENT, "state_count 0");
  o.state_count = 1;
  o.min_slices = 3;
  o.max_slices = 2;
  FAILS(pw_elastic_create(env.client, &o, &cb, &e), PW_STATUS_INVALID_ARGUMENT,
        "min_slices 3 exceeds max_slices 2");
  o = options(2);
  OK(pw_elastic_create(env.client, &o, &cb, &e));
  FAILS(pw_elastic_place(e, 0, (pw_vslice_t){0}, &kSpec), PW_STATUS_FAILED_PRECONDITION,
        "only from the job's setup");
  pw_buffer_t b;
  FAILS(pw_elastic_state(e, 0, &b), PW_STATUS_NOT_FOUND, "state 0 is not set");
  FAILS(pw_elastic_state(e, 5, &b), PW_STATUS_INVALID_ARGUMENT, "index 5");
  FAILS(pw_elastic_set_state(e, 9, b), PW_STATUS_INVALID_ARGUMENT, "index 9");
  FAILS(pw_elastic_set_state(e, 0, (pw_buffer_t){0}), PW_STATUS_INVALID_ARGUMENT, "state 0");
  pw_elastic_stats_t st = {.struct_size = 4};
  FAILS(pw_elastic_stats(e, &st), PW_STATUS_INVALID_ARGUMENT, "struct_size");
  FAILS(pw_elastic_run(NULL, 0, 1), PW_STATUS_INVALID_ARGUMENT, "elastic is NULL");
  cr_assert_str_eq(pw_elastic_event_name(PW_ELASTIC_GROWN), "grown");
  OK(pw_elastic_destroy(e));
  OK(pw_elastic_destroy(NULL));
  env_deinit(&env);
}
