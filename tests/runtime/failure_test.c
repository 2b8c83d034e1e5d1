/* Slices lost and back (include/pathways/runtime.h, "Failure"): a failed
 * device loses its slice, the slice's work resolves typed (UNAVAILABLE
 * there, ABORTED on a gang's other parts), its buffers are DATA_LOSS,
 * other slices' work is untouched, clients are told through topology
 * callbacks, and the slice comes back through health or the host. On the
 * CPU backend (pool and streams mode) and on the test double where a
 * launch must never complete (deferred completion). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cts/double_backend.h"
#include "pathways/backends/cpu.h"
#include "pathways/pathways.h"
#include "runtime/checks.h"
#include "support/test_allocators.h"

TestSuite(failure, .fini = pw_test_check_leaks);

#define WAIT_NS (10 * 1000000000ll)
#define MAX_EVENTS 16

/* What a topology callback saw. */
typedef struct seen_s {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint32_t count;
  pw_topology_event_t events[MAX_EVENTS];
  pw_status_code_t causes[MAX_EVENTS];
  char cause_text[MAX_EVENTS][256];
  pw_client_t* destroy_me; /* tried from inside the callback */
  pw_status_code_t destroy_code;
} seen_t;

static void seen_init(seen_t* s) {
  memset(s, 0, sizeof(*s));
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->cond, NULL);
}

static void seen_deinit(seen_t* s) {
  pthread_cond_destroy(&s->cond);
  pthread_mutex_destroy(&s->lock);
}

static void on_topology(void* user, const pw_topology_event_t* e) {
  seen_t* s = user;
  if (s->destroy_me != NULL) {
    pw_status_t st = pw_client_destroy(s->destroy_me);
    s->destroy_code = pw_status_code(st);
    pw_status_free(st);
  }
  pthread_mutex_lock(&s->lock);
  if (s->count < MAX_EVENTS) {
    s->events[s->count] = *e;
    s->events[s->count].slice_name = NULL; /* valid during the call only */
    s->events[s->count].cause = NULL;
    s->causes[s->count] = pw_status_code(e->cause);
    snprintf(s->cause_text[s->count], sizeof(s->cause_text[0]), "%s",
             e->cause != NULL ? pw_status_message(e->cause) : "");
  }
  s->count++;
  pthread_cond_broadcast(&s->cond);
  pthread_mutex_unlock(&s->lock);
}

/* Waits until |s| saw |n| events; false on timeout. */
static bool seen_wait(seen_t* s, uint32_t n) {
  pw_time_t until = pw_clock_now() + WAIT_NS;
  pthread_mutex_lock(&s->lock);
  while (s->count < n && pw_clock_now() < until) {
    pthread_mutex_unlock(&s->lock);
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&s->lock);
  }
  bool ok = s->count >= n;
  pthread_mutex_unlock(&s->lock);
  return ok;
}

typedef struct env_s {
  pw_runtime_t* runtime;
  pw_client_t* client;
  pw_backend_t backend;
  pw_double_backend_t* dbl;
  bool cpu;
  uint32_t per_slice;
} env_t;

typedef struct env_cfg_s {
  bool cpu;               /* else the test double */
  uint32_t stream_depth;  /* cpu: streams mode */
  pw_double_completion_t completion;
  uint32_t slices, per_slice;
  uint64_t health_poll_ns, loss_grace_ns, launch_deadline_ns;
  bool deadline_loses_slice;
} env_cfg_t;

static void env_init(env_t* e, const env_cfg_t* c) {
  memset(e, 0, sizeof(*e));
  e->cpu = c->cpu;
  e->per_slice = c->per_slice;
  if (c->cpu) {
    pw_cpu_backend_options_t o;
    pw_cpu_backend_options_init(&o);
    o.device_count = c->slices * c->per_slice;
    o.worker_count = 2;
    o.stream_depth = c->stream_depth;
    OK(pw_cpu_backend_create(&o, &e->backend));
  } else {
    pw_double_options_t o;
    pw_double_options_init(&o);
    o.device_count = c->slices * c->per_slice;
    o.completion = c->completion;
    OK(pw_double_backend_create(&o, &e->backend));
    e->dbl = pw_double_backend_from(&e->backend);
  }
  pw_slice_desc_t slices[8];
  char names[8][16];
  for (uint32_t s = 0; s < c->slices; ++s) {
    snprintf(names[s], sizeof(names[s]), "s%u", s);
    memset(&slices[s], 0, sizeof(slices[s]));
    slices[s].name = names[s];
    slices[s].mesh = pw_mesh_shape_make(1, (const uint32_t[]){c->per_slice});
    slices[s].first_device = s * c->per_slice;
  }
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &e->backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = c->slices;
  ro.health_poll_ns = c->health_poll_ns;
  ro.loss_grace_ns = c->loss_grace_ns;
  ro.launch_deadline_ns = c->launch_deadline_ns;
  ro.deadline_loses_slice = c->deadline_loses_slice;
  OK(pw_runtime_create(&ro, &e->runtime));
  OK(pw_client_create(e->runtime, NULL, &e->client));
}

static void env_deinit(env_t* e) {
  OK(pw_client_destroy(e->client));
  OK(pw_runtime_destroy(e->runtime));
}

/* A virtual slice of |client| pinned to physical slice |slice|. */
static pw_vslice_t pinned(env_t* e, pw_client_t* client, uint32_t slice) {
  pw_vslice_span_t span;
  memset(&span, 0, sizeof(span));
  span.struct_size = sizeof(span);
  span.mesh = pw_mesh_shape_make(1, (const uint32_t[]){e->per_slice});
  span.slice_count = 1;
  span.slices = &slice;
  pw_vslice_t vs;
  OK(pw_vslice_create_spanning(client, &span, &vs));
  return vs;
}

static pw_array_spec_t spec8(uint32_t per) {
  (void)per;
  pw_array_spec_t s = {PW_DTYPE_F32, {1, {8}}, pw_sharding_split(0, PW_MESH_AXIS_ALL)};
  return s;
}

/* copy: f32[8] split over the whole mesh, in the backend's program text. */
static pw_executable_t compile_kernel(env_t* e, pw_client_t* client, pw_vslice_t vs,
                                      const char* kernel) {
  char text[256];
  snprintf(text, sizeof(text), "%s%s\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n",
           e->cpu ? "kernel " : "", kernel);
  pw_executable_t exe;
  OK(pw_executable_compile(client, vs, text, strlen(text), NULL, &exe));
  return exe;
}

/* A graph of |n| chained |exe| nodes on |vs| (one parameter, one output). */
static pw_graph_t chain_graph(pw_client_t* client, pw_vslice_t vs, pw_executable_t exe,
                              uint32_t n) {
  pw_graph_t g;
  OK(pw_graph_create(client, &g));
  pw_array_spec_t spec = spec8(0);
  uint32_t prev;
  OK(pw_graph_add_parameter(client, g, vs, &spec, &prev));
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t node;
    OK(pw_graph_add_compute(client, g, "step", exe, vs, &(pw_value_t){prev, 0}, 1, &node));
    prev = node;
  }
  OK(pw_graph_add_output(client, g, pw_value(prev, 0)));
  return g;
}

static pw_buffer_t upload(pw_client_t* client, pw_vslice_t vs, float base) {
  float v[8];
  for (int i = 0; i < 8; ++i) v[i] = base + (float)i;
  pw_array_spec_t spec = spec8(0);
  pw_buffer_t b;
  OK(pw_buffer_from_host(client, vs, &spec, v, sizeof(v), &b));
  return b;
}

/* Runs |g| on |arg|; the run's status (its output released). */
static pw_status_t run(pw_client_t* client, pw_graph_t g, pw_buffer_t arg, float* out) {
  pw_buffer_t res;
  pw_event_t* done = NULL;
  PW_RETURN_IF_ERROR(pw_graph_submit(client, g, &arg, 1, NULL, &res, 1, &done));
  pw_status_t status = pw_event_wait(done, pw_clock_now() + WAIT_NS);
  pw_event_release(done);
  if (status == NULL && out != NULL) {
    status = pw_buffer_to_host(client, res, out, 8 * sizeof(float), pw_clock_now() + WAIT_NS);
  }
  OK(pw_buffer_release(client, res));
  return status;
}

static pw_slice_info_t slice_info(env_t* e, uint32_t slice) {
  pw_slice_info_t info = {.struct_size = sizeof(pw_slice_info_t)};
  OK(pw_runtime_slice_info(e->runtime, slice, &info));
  return info;
}

static pw_vslice_info_t vslice_info(pw_client_t* client, pw_vslice_t vs) {
  pw_vslice_info_t info = {.struct_size = sizeof(pw_vslice_info_t)};
  OK(pw_vslice_info(client, vs, &info));
  return info;
}

Test(failure, a_failed_device_loses_its_slice_and_spares_the_others) {
  env_t e;
  env_init(&e, &(env_cfg_t){.cpu = true, .slices = 2, .per_slice = 2});
  pw_client_t* other;
  OK(pw_client_create(e.runtime, &(pw_client_options_t){sizeof(pw_client_options_t), "other", 0, 0},
                      &other));
  seen_t seen, seen_other;
  seen_init(&seen);
  seen_init(&seen_other);
  OK(pw_client_set_topology_callback(e.client, on_topology, &seen));
  OK(pw_client_set_topology_callback(other, on_topology, &seen_other));
  pw_vslice_t a = pinned(&e, e.client, 0);
  pw_vslice_t b = pinned(&e, other, 1);
  pw_executable_t copy_a = compile_kernel(&e, e.client, a, "copy");
  pw_executable_t copy_b = compile_kernel(&e, other, b, "copy");
  pw_graph_t ga = chain_graph(e.client, a, copy_a, 3);
  pw_graph_t gb = chain_graph(other, b, copy_b, 3);
  pw_buffer_t xa = upload(e.client, a, 1), xb = upload(other, b, 10);
  float out[8];
  OK(run(e.client, ga, xa, out));
  cr_assert_float_eq(out[7], 8.0f, 1e-6);

  /* Device 1 (slice s0's second) fails: the next run there fails naming
   * it, and the slice is lost. */
  OK(pw_cpu_backend_set_health(e.backend, 1, PW_DEVICE_FAILED));
  FAILS(run(e.client, ga, xa, NULL), PW_STATUS_UNAVAILABLE, "device 1");
  pw_slice_info_t si = slice_info(&e, 0);
  cr_assert_eq(si.state, PW_SLICE_LOST);
  cr_assert_eq(si.losses, 1);
  cr_assert_eq(si.health, PW_DEVICE_FAILED);
  cr_assert_str_eq(pw_slice_state_name(si.state), "lost");
  cr_assert_eq(slice_info(&e, 1).state, PW_SLICE_ONLINE);
  /* Both clients hear of it, once, with the cause. */
  cr_assert(seen_wait(&seen, 1));
  cr_assert(seen_wait(&seen_other, 1));
  cr_assert_eq(seen.events[0].change, PW_TOPOLOGY_SLICE_LOST);
  cr_assert_eq(seen.events[0].slice, 0);
  cr_assert_eq(seen.events[0].losses, 1);
  cr_assert_geq(seen.events[0].struct_size, PW_TOPOLOGY_EVENT_SIZE_V1);
  cr_assert_eq(seen.causes[0], PW_STATUS_UNAVAILABLE);
  cr_assert(strstr(seen.cause_text[0], "reports FAILED") != NULL, "%s", seen.cause_text[0]);
  cr_assert_eq(seen_other.events[0].slice, 0);
  /* The virtual slice says so; its buffers are gone. */
  pw_vslice_info_t vi = vslice_info(e.client, a);
  cr_assert_eq(vi.slice_count, 1);
  cr_assert_eq(vi.lost_slices, 1);
  cr_assert_eq(vi.first_lost_slice, 0);
  cr_assert(vi.lost_since_bound);
  cr_assert_eq(vslice_info(other, b).lost_slices, 0);
  cr_assert_eq(vslice_info(other, b).first_lost_slice, UINT32_MAX);
  FAILS(pw_buffer_to_host(e.client, xa, out, sizeof(out), pw_clock_now() + WAIT_NS),
        PW_STATUS_DATA_LOSS, "slice 's0', which is lost");
  FAILS(run(e.client, ga, xa, NULL), PW_STATUS_DATA_LOSS, "args[0]");
  pw_buffer_t fresh;
  pw_array_spec_t spec = spec8(0);
  FAILS(pw_buffer_from_host(e.client, a, &spec, out, sizeof(out), &fresh), PW_STATUS_UNAVAILABLE,
        "slice 's0'");
  /* Nothing new binds to it. */
  pw_client_t* third;
  OK(pw_client_create(e.runtime, NULL, &third));
  pw_vslice_t any;
  FAILS(pw_vslice_create(third, &(pw_mesh_shape_t)PW_MESH_SHAPE_INIT(1, 2), PW_VSLICE_EXCLUSIVE, &any),
        PW_STATUS_RESOURCE_EXHAUSTED, "unhealthy");
  /* The other client's work on s1 goes on. */
  for (int i = 0; i < 3; ++i) {
    OK(run(other, gb, xb, out));
    cr_assert_float_eq(out[0], 10.0f, 1e-6);
  }

  /* The device comes back: a health check brings the slice back; its old
   * buffers stay lost, new ones work. */
  OK(pw_cpu_backend_set_health(e.backend, 1, PW_DEVICE_HEALTHY));
  uint32_t changes = 99;
  OK(pw_runtime_check_health(e.runtime, &changes));
  cr_assert_eq(changes, 1);
  cr_assert(seen_wait(&seen, 2));
  cr_assert_eq(seen.events[1].change, PW_TOPOLOGY_SLICE_BACK);
  cr_assert_eq(seen.causes[1], PW_STATUS_OK);
  cr_assert_eq(slice_info(&e, 0).state, PW_SLICE_ONLINE);
  cr_assert_eq(slice_info(&e, 0).losses, 1);
  vi = vslice_info(e.client, a);
  cr_assert_eq(vi.lost_slices, 0);
  cr_assert(vi.lost_since_bound);
  FAILS(pw_buffer_to_host(e.client, xa, out, sizeof(out), pw_clock_now() + WAIT_NS),
        PW_STATUS_DATA_LOSS, "the slice is back; the data is not");
  pw_buffer_t xa2 = upload(e.client, a, 5);
  OK(run(e.client, ga, xa2, out));
  cr_assert_float_eq(out[3], 8.0f, 1e-6);
  OK(pw_vslice_create(third, &(pw_mesh_shape_t)PW_MESH_SHAPE_INIT(1, 2), 0, &any));
  OK(pw_client_destroy(third));
  OK(pw_runtime_check_health(e.runtime, &changes));
  cr_assert_eq(changes, 0);

  OK(pw_buffer_release(e.client, xa));
  OK(pw_buffer_release(e.client, xa2));
  OK(pw_buffer_release(other, xb));
  OK(pw_graph_release(e.client, ga));
  OK(pw_graph_release(other, gb));
  OK(pw_executable_release(e.client, copy_a));
  OK(pw_executable_release(other, copy_b));
  OK(pw_client_destroy(other));
  env_deinit(&e);
  cr_assert_eq(seen_other.count, 2);
  seen_deinit(&seen);
  seen_deinit(&seen_other);
}

/* Streams mode: launches queued on the devices ahead of the loss fail in
 * the backend, those behind it are never handed over; every run resolves. */
Test(failure, queued_launches_resolve_when_the_slice_is_lost) {
  env_t e;
  env_init(&e, &(env_cfg_t){.cpu = true, .stream_depth = 8, .slices = 2, .per_slice = 2});
  pw_vslice_t a = pinned(&e, e.client, 0);
  pw_executable_t copy = compile_kernel(&e, e.client, a, "copy");
  pw_graph_t g = chain_graph(e.client, a, copy, 16);
  pw_buffer_t x = upload(e.client, a, 0);
  enum { RUNS = 40 };
  pw_buffer_t outs[RUNS];
  pw_event_t* done[RUNS];
  int submitted = 0;
  uint32_t refused = 0;
  for (int r = 0; r < RUNS; ++r) {
    /* Once the loss is seen, x is lost: later submissions are refused. */
    pw_status_t status = pw_graph_submit(e.client, g, &x, 1, NULL, &outs[submitted], 1,
                                         &done[submitted]);
    if (status != NULL) {
      cr_assert_eq(pw_status_code(status), PW_STATUS_DATA_LOSS, "%s", pw_status_message(status));
      pw_status_free(status);
      refused++;
    } else {
      submitted++;
    }
    if (r == RUNS / 4) OK(pw_cpu_backend_set_health(e.backend, 0, PW_DEVICE_FAILED));
  }
  uint32_t ok = 0, unavailable = refused;
  for (int r = 0; r < submitted; ++r) {
    pw_status_t status = pw_event_wait(done[r], pw_clock_now() + WAIT_NS);
    cr_assert(status == NULL || pw_status_code(status) == PW_STATUS_UNAVAILABLE, "run %d: %s", r,
              pw_status_message(status));
    if (status == NULL) ok++; else unavailable++;
    pw_status_free(status);
    pw_event_release(done[r]);
    OK(pw_buffer_release(e.client, outs[r]));
  }
  cr_assert_gt(unavailable, RUNS / 2, "%u of %d runs failed", unavailable, RUNS);
  cr_assert_eq(slice_info(&e, 0).state, PW_SLICE_LOST);
  OK(pw_client_wait_idle(e.client, pw_clock_now() + WAIT_NS));
  OK(pw_cpu_backend_set_health(e.backend, 0, PW_DEVICE_HEALTHY));
  OK(pw_buffer_release(e.client, x));
  OK(pw_graph_release(e.client, g));
  OK(pw_executable_release(e.client, copy));
  env_deinit(&e);
  (void)ok;
}

/* A gang spanning two slices, one lost by the host: the lost part is
 * UNAVAILABLE, the healthy part ABORTED; restored, the gang runs again. */
Test(failure, a_gang_over_a_lost_slice_aborts_its_other_parts) {
  env_t e;
  env_init(&e, &(env_cfg_t){.cpu = true, .slices = 2, .per_slice = 2});
  seen_t seen;
  seen_init(&seen);
  OK(pw_client_set_topology_callback(e.client, on_topology, &seen));
  pw_vslice_span_t span;
  memset(&span, 0, sizeof(span));
  span.struct_size = sizeof(span);
  span.mesh = pw_mesh_shape_make(1, (const uint32_t[]){4});
  span.slice_count = 2;
  pw_vslice_t wide;
  OK(pw_vslice_create_spanning(e.client, &span, &wide));
  const char* text =
      "kernel all_reduce_sum\ninput f32[4,2] split(0,0)\noutput f32[2] replicated\n";
  pw_executable_t sum;
  OK(pw_executable_compile(e.client, wide, text, strlen(text), NULL, &sum));
  pw_graph_t g;
  OK(pw_graph_create(e.client, &g));
  pw_array_spec_t in = {PW_DTYPE_F32, {2, {4, 2}}, pw_sharding_split(0, 0)};
  uint32_t p, r;
  OK(pw_graph_add_parameter(e.client, g, wide, &in, &p));
  OK(pw_graph_add_compute(e.client, g, "sum", sum, wide, &(pw_value_t){p, 0}, 1, &r));
  OK(pw_graph_add_output(e.client, g, pw_value(r, 0)));
  float v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, got[2];
  pw_buffer_t x;
  OK(pw_buffer_from_host(e.client, wide, &in, v, sizeof(v), &x));

  OK(pw_runtime_lose_slice(e.runtime, 1, "host 7 stopped answering"));
  OK(pw_runtime_lose_slice(e.runtime, 1, "again")); /* already lost: nothing */
  cr_assert_eq(slice_info(&e, 1).losses, 1);
  cr_assert(seen_wait(&seen, 1));
  cr_assert(strstr(seen.cause_text[0], "host 7 stopped answering") != NULL);
  pw_vslice_info_t vi = vslice_info(e.client, wide);
  cr_assert_eq(vi.slice_count, 2);
  cr_assert_eq(vi.lost_slices, 1);
  cr_assert_eq(vi.first_lost_slice, 1);
  /* x lived on both: lost. A run on new data is refused part by part. */
  FAILS(pw_buffer_to_host(e.client, x, v, sizeof(v), pw_clock_now() + WAIT_NS),
        PW_STATUS_DATA_LOSS, "slice 's1', which is lost");
  pw_buffer_t res;
  pw_event_t* done;
  FAILS(pw_graph_submit(e.client, g, &x, 1, NULL, &res, 1, &done), PW_STATUS_DATA_LOSS,
        "args[0]");
  /* A health check does not bring back what the host lost. */
  uint32_t changes = 9;
  OK(pw_runtime_check_health(e.runtime, &changes));
  cr_assert_eq(changes, 0);
  cr_assert_eq(slice_info(&e, 1).state, PW_SLICE_LOST);
  OK(pw_buffer_release(e.client, x));

  OK(pw_runtime_restore_slice(e.runtime, 1));
  OK(pw_runtime_restore_slice(e.runtime, 1)); /* online: nothing */
  cr_assert(seen_wait(&seen, 2));
  cr_assert_eq(seen.events[1].change, PW_TOPOLOGY_SLICE_BACK);
  cr_assert_eq(seen.count, 2);
  OK(pw_buffer_from_host(e.client, wide, &in, v, sizeof(v), &x));
  OK(pw_graph_submit(e.client, g, &x, 1, NULL, &res, 1, &done));
  OK(pw_event_wait(done, pw_clock_now() + WAIT_NS));
  pw_event_release(done);
  OK(pw_buffer_to_host(e.client, res, got, sizeof(got), pw_clock_now() + WAIT_NS));
  cr_assert_float_eq(got[0], 16.0f, 1e-6);
  OK(pw_buffer_release(e.client, res));
  OK(pw_buffer_release(e.client, x));
  OK(pw_buffer_from_host(e.client, wide, &in, v, sizeof(v), &x));

  /* A device of s1 fails unseen: the gang's launch there fails, which
   * loses s1; its other parts fail in the backend's collective or are
   * not launched (ABORTED): the run fails typed, naming s1's device. */
  OK(pw_cpu_backend_set_health(e.backend, 3, PW_DEVICE_FAILED));
  OK(pw_graph_submit(e.client, g, &x, 1, NULL, &res, 1, &done));
  pw_status_t status = pw_event_wait(done, pw_clock_now() + WAIT_NS);
  pw_event_release(done);
  cr_assert(pw_status_code(status) == PW_STATUS_UNAVAILABLE ||
                pw_status_code(status) == PW_STATUS_ABORTED,
            "%s", pw_status_message(status));
  cr_assert(strstr(pw_status_message(status), "s1") != NULL, "%s", pw_status_message(status));
  pw_status_free(status);
  cr_assert_eq(slice_info(&e, 1).state, PW_SLICE_LOST);
  cr_assert_eq(slice_info(&e, 0).state, PW_SLICE_ONLINE);
  OK(pw_runtime_check_health(e.runtime, &changes));
  cr_assert_eq(changes, 0, "lost already");
  FAILS(pw_runtime_restore_slice(e.runtime, 1), PW_STATUS_FAILED_PRECONDITION,
        "device 1 of slice 's1'");
  OK(pw_buffer_release(e.client, res));
  OK(pw_buffer_release(e.client, x));
  OK(pw_graph_release(e.client, g));
  OK(pw_executable_release(e.client, sum));
  env_deinit(&e);
  seen_deinit(&seen);
}

/* A launch the backend never completes: a loss gives it loss_grace_ns,
 * then it fails UNAVAILABLE; with deadline_loses_slice a missed deadline
 * loses the slice itself. */
Test(failure, outstanding_launches_fail_after_the_loss_grace) {
  env_t e;
  env_init(&e, &(env_cfg_t){.completion = PW_DOUBLE_COMPLETE_DEFERRED, .slices = 2,
                            .per_slice = 2, .loss_grace_ns = 20 * 1000000});
  pw_vslice_t a = pinned(&e, e.client, 0);
  pw_executable_t copy = compile_kernel(&e, e.client, a, "copy");
  pw_graph_t g = chain_graph(e.client, a, copy, 2);
  pw_buffer_t x = upload(e.client, a, 0);
  pw_buffer_t res;
  pw_event_t* done;
  OK(pw_graph_submit(e.client, g, &x, 1, NULL, &res, 1, &done));
  cr_assert(!pw_event_is_ready(done));
  pw_time_t lost_at = pw_clock_now();
  OK(pw_runtime_lose_slice(e.runtime, 0, "test"));
  FAILS(pw_event_wait(done, pw_clock_now() + WAIT_NS), PW_STATUS_UNAVAILABLE,
        "did not complete the launch outstanding there");
  cr_assert_geq(pw_clock_now() - lost_at, 20 * 1000000, "failed before the grace passed");
  pw_event_release(done);
  /* The backend completing it late is ignored. */
  pw_double_backend_run_deferred(e.dbl, 0);
  OK(pw_buffer_release(e.client, res));
  OK(pw_buffer_release(e.client, x));
  OK(pw_graph_release(e.client, g));
  OK(pw_executable_release(e.client, copy));
  env_deinit(&e);
}

Test(failure, a_missed_deadline_loses_the_slice_when_asked_to) {
  env_t e;
  env_init(&e, &(env_cfg_t){.completion = PW_DOUBLE_COMPLETE_DEFERRED, .slices = 2,
                            .per_slice = 2, .launch_deadline_ns = 20 * 1000000,
                            .deadline_loses_slice = true});
  seen_t seen;
  seen_init(&seen);
  OK(pw_client_set_topology_callback(e.client, on_topology, &seen));
  pw_vslice_t a = pinned(&e, e.client, 0);
  pw_executable_t copy = compile_kernel(&e, e.client, a, "copy");
  pw_graph_t g = chain_graph(e.client, a, copy, 2);
  pw_buffer_t x = upload(e.client, a, 0);
  pw_buffer_t res;
  pw_event_t* done;
  OK(pw_graph_submit(e.client, g, &x, 1, NULL, &res, 1, &done));
  FAILS(pw_event_wait(done, pw_clock_now() + WAIT_NS), PW_STATUS_DEADLINE_EXCEEDED,
        "did not complete by its deadline");
  pw_event_release(done);
  cr_assert(seen_wait(&seen, 1));
  cr_assert_eq(seen.events[0].change, PW_TOPOLOGY_SLICE_LOST);
  cr_assert(strstr(seen.cause_text[0], "did not complete by its deadline") != NULL, "%s",
            seen.cause_text[0]);
  cr_assert_eq(slice_info(&e, 0).state, PW_SLICE_LOST);
  cr_assert_eq(slice_info(&e, 1).state, PW_SLICE_ONLINE);
  uint64_t launches = pw_double_backend_total_launches(e.dbl);
  pw_buffer_t res2;
  FAILS(pw_graph_submit(e.client, g, &x, 1, NULL, &res2, 1, &done), PW_STATUS_DATA_LOSS,
        "args[0]");
  cr_assert_eq(pw_double_backend_total_launches(e.dbl), launches);
  pw_double_backend_run_deferred(e.dbl, 0); /* late: ignored */
  OK(pw_buffer_release(e.client, res));
  OK(pw_buffer_release(e.client, x));
  OK(pw_graph_release(e.client, g));
  OK(pw_executable_release(e.client, copy));
  env_deinit(&e);
  seen_deinit(&seen);
}

/* The health thread finds a failure on an idle slice, and the recovery. */
Test(failure, health_polling_sees_idle_slices_fail_and_recover) {
  env_t e;
  env_init(&e, &(env_cfg_t){.cpu = true, .slices = 2, .per_slice = 2,
                            .health_poll_ns = 1000000});
  seen_t seen;
  seen_init(&seen);
  OK(pw_client_set_topology_callback(e.client, on_topology, &seen));
  OK(pw_cpu_backend_set_health(e.backend, 2, PW_DEVICE_FAILED));
  cr_assert(seen_wait(&seen, 1), "no loss seen by polling");
  cr_assert_eq(seen.events[0].slice, 1);
  cr_assert_eq(seen.events[0].change, PW_TOPOLOGY_SLICE_LOST);
  OK(pw_cpu_backend_set_health(e.backend, 2, PW_DEVICE_HEALTHY));
  cr_assert(seen_wait(&seen, 2), "no return seen by polling");
  cr_assert_eq(seen.events[1].change, PW_TOPOLOGY_SLICE_BACK);
  cr_assert_eq(slice_info(&e, 1).state, PW_SLICE_ONLINE);
  cr_assert_eq(slice_info(&e, 1).losses, 1);
  env_deinit(&e);
  seen_deinit(&seen);
}

Test(failure, callbacks_are_cleared_and_refuse_destroys) {
  env_t e;
  env_init(&e, &(env_cfg_t){.cpu = true, .slices = 2, .per_slice = 2});
  seen_t seen;
  seen_init(&seen);
  seen.destroy_me = e.client;
  OK(pw_client_set_topology_callback(e.client, on_topology, &seen));
  OK(pw_runtime_lose_slice(e.runtime, 0, "one"));
  cr_assert(seen_wait(&seen, 1));
  cr_assert_eq(seen.destroy_code, PW_STATUS_FAILED_PRECONDITION,
               "pw_client_destroy from a topology callback must refuse");
  /* Cleared: no more calls. */
  OK(pw_client_set_topology_callback(e.client, NULL, NULL));
  OK(pw_client_set_topology_callback(e.client, NULL, NULL));
  OK(pw_runtime_restore_slice(e.runtime, 0));
  OK(pw_runtime_lose_slice(e.runtime, 1, "two"));
  /* The health thread delivers in order: a new listener set now sees only
   * what is queued from here on, so wait through another client. */
  pw_client_t* other;
  OK(pw_client_create(e.runtime, NULL, &other));
  seen_t later;
  seen_init(&later);
  OK(pw_client_set_topology_callback(other, on_topology, &later));
  OK(pw_runtime_restore_slice(e.runtime, 1));
  cr_assert(seen_wait(&later, 1));
  cr_assert_eq(later.events[later.count - 1].change, PW_TOPOLOGY_SLICE_BACK);
  cr_assert_eq(seen.count, 1, "a cleared callback was called");
  OK(pw_client_destroy(other)); /* its callback is removed with it */
  OK(pw_runtime_lose_slice(e.runtime, 1, "three"));
  OK(pw_runtime_restore_slice(e.runtime, 1));
  env_deinit(&e);
  seen_deinit(&seen);
  seen_deinit(&later);
}

Test(failure, bad_arguments_name_the_culprit) {
  env_t e;
  env_init(&e, &(env_cfg_t){.cpu = true, .slices = 1, .per_slice = 2});
  FAILS(pw_client_set_topology_callback(NULL, on_topology, NULL), PW_STATUS_INVALID_ARGUMENT,
        "client is NULL");
  FAILS(pw_runtime_check_health(NULL, NULL), PW_STATUS_INVALID_ARGUMENT, "runtime is NULL");
  FAILS(pw_runtime_lose_slice(NULL, 0, "x"), PW_STATUS_INVALID_ARGUMENT, "runtime is NULL");
  FAILS(pw_runtime_lose_slice(e.runtime, 1, "x"), PW_STATUS_OUT_OF_RANGE, "slice 1");
  FAILS(pw_runtime_restore_slice(NULL, 0), PW_STATUS_INVALID_ARGUMENT, "runtime is NULL");
  FAILS(pw_runtime_restore_slice(e.runtime, 7), PW_STATUS_OUT_OF_RANGE, "slice 7");
  pw_vslice_t a = pinned(&e, e.client, 0);
  pw_vslice_info_t vi = {.struct_size = 8};
  FAILS(pw_vslice_info(e.client, a, &vi), PW_STATUS_INVALID_ARGUMENT, "struct_size");
  FAILS(pw_vslice_info(e.client, a, NULL), PW_STATUS_INVALID_ARGUMENT, "out_info");
  FAILS(pw_vslice_info(NULL, a, &vi), PW_STATUS_INVALID_ARGUMENT, "client");
  vi.struct_size = sizeof(vi);
  OK(pw_vslice_release(e.client, a));
  pw_vslice_t gone = a;
  FAILS(pw_vslice_info(e.client, gone, &vi), PW_STATUS_NOT_FOUND, "vslice");
  /* A v1 slice info is filled as far as it goes. */
  pw_slice_info_t v1;
  memset(&v1, 0xAB, sizeof(v1));
  v1.struct_size = PW_SLICE_INFO_SIZE_V1;
  OK(pw_runtime_slice_info(e.runtime, 0, &v1));
  cr_assert_eq((unsigned)v1.state, 0xABABABABu, "wrote past a v1 struct_size");
  cr_assert_str_eq(pw_topology_change_name(PW_TOPOLOGY_SLICE_BACK), "slice back");
  cr_assert_str_eq(pw_slice_state_name((pw_slice_state_t)9), "unknown");
  env_deinit(&e);
  /* health_poll_ns below the minimum. */
  pw_backend_t backend;
  OK(pw_cpu_backend_create(NULL, &backend));
  pw_slice_desc_t slice = {"s", PW_MESH_SHAPE_INIT(1, 2), 0, 0, 0};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = &slice;
  ro.slice_count = 1;
  ro.health_poll_ns = 10;
  pw_runtime_t* rt;
  FAILS(pw_runtime_create(&ro, &rt), PW_STATUS_INVALID_ARGUMENT, "health_poll_ns");
}
