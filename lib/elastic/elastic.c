/* The elastic helper (include/pathways/elastic.h): steps on the healthy
 * slices of one mesh, snapshots at boundaries, re-mesh and restore after
 * a loss, growth at a boundary after a return.
 *
 * Built on the public API only (runtime.h, buffer.h, snapshot.h), as a
 * host application would write it. The client's topology callback (the
 * runtime's health thread) only records a loss under |lock|; the driving
 * thread acts on it between steps, and on a step's failure. Returns are
 * found by a health check at each snapshot boundary (the event may come
 * after the boundary it should have grown at). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "observe/observe.h"
#include "pathways/elastic.h"
#include "pathways/snapshot.h"

enum { PW_ELASTIC_MAX_STATE = 1024, PW_ELASTIC_NAME = 64 };

typedef struct pw_elastic_place_s {
  pw_vslice_t vslice;
  pw_array_spec_t spec;
  bool placed;
} pw_elastic_place_t;

struct pw_elastic_s {
  pw_client_t* client;
  pw_runtime_t* runtime;
  pw_elastic_options_t options;
  pw_elastic_job_t job;
  pw_snapshotter_t* snapshotter;
  uint32_t state_count;
  pw_buffer_t* state;              /* id 0: none */
  pw_elastic_place_t* places;
  char (*names)[PW_ELASTIC_NAME];
  const char** name_ptrs;          /* NULL when no names were given */
  /* In use, ascending; written under |lock| (the callback reads them). */
  uint32_t* slices;
  uint32_t slice_count;
  /* Per physical slice, the losses already acted on (|lock|): a topology
   * event about one of them comes late and is ignored. */
  uint32_t* handled;
  bool set_up;
  bool in_setup;
  bool restoring;
  /* What the topology callback saw (under |lock|). */
  pthread_mutex_t lock;
  bool loss_pending;
  uint32_t lost_slice;             /* the first lost slice in use seen */
  pw_status_t loss_cause;          /* its cause (owned) */
  uint64_t loss_time_ns;
  pw_elastic_stats_t stats;        /* under |lock| */
  bool time_first_step;
};

const char* pw_elastic_event_name(pw_elastic_event_kind_t kind) {
  switch (kind) {
    case PW_ELASTIC_SNAPSHOT: return "snapshot";
    case PW_ELASTIC_SLICE_LOST: return "slice lost";
    case PW_ELASTIC_SLICE_BACK: return "slice back";
    case PW_ELASTIC_RESTORED: return "restored";
    case PW_ELASTIC_REMESHED: return "re-meshed";
    case PW_ELASTIC_GROWN: return "grown";
  }
  return "unknown";
}

void pw_elastic_options_init(pw_elastic_options_t* out_options) {
  if (out_options == NULL) return;
  memset(out_options, 0, sizeof(*out_options));
  out_options->struct_size = sizeof(*out_options);
}

/* ---- topology ------------------------------------------------------------ */

static bool pw_elastic_uses(const pw_elastic_t* e, uint32_t slice) {
  for (uint32_t i = 0; i < e->slice_count; ++i) {
    if (e->slices[i] == slice) return true;
  }
  return false;
}

static void pw_elastic_on_topology(void* user, const pw_topology_event_t* event) {
  pw_elastic_t* e = user;
  pthread_mutex_lock(&e->lock);
  if (event->change == PW_TOPOLOGY_SLICE_LOST && pw_elastic_uses(e, event->slice) &&
      event->losses > e->handled[event->slice]) {
    if (!e->loss_pending) {
      e->loss_pending = true;
      e->lost_slice = event->slice;
      pw_status_free(e->loss_cause);
      e->loss_cause = pw_status_clone(event->cause);
      e->loss_time_ns = event->time_ns;
    }
  }
  pthread_mutex_unlock(&e->lock);
}

/* The re-mesh onto e->slice_count slices from the snapshot of |step|, for
 * traces and metrics (observe.h, PW_OBS_ELASTIC). */
static void pw_elastic_observe(pw_elastic_t* e, uint64_t step, uint64_t since_ns, bool grown) {
  pw_obs_event_t ev = {.since_ns = since_ns, .exec = step, .kind = PW_OBS_ELASTIC,
                       .flags = grown ? PW_OBS_GROWN : 0, .slice = UINT32_MAX,
                       .device = UINT32_MAX, .count = e->slice_count, .client = UINT32_MAX,
                       .name = grown ? "grown" : "recovered"};
  pw__observe_note(e->runtime, &ev);
}

static void pw_elastic_emit(pw_elastic_t* e, pw_elastic_event_kind_t kind, uint64_t step,
                            uint32_t slice, pw_status_t cause, uint64_t elapsed_ns) {
  if (e->job.on_event == NULL) return;
  pw_elastic_event_t event;
  memset(&event, 0, sizeof(event));
  event.struct_size = sizeof(event);
  event.kind = kind;
  event.step = step;
  event.slice = slice;
  event.slice_count = e->slice_count;
  event.cause = cause;
  event.elapsed_ns = elapsed_ns;
  e->job.on_event(e->job.user, &event);
}

/* ---- create / destroy ------------------------------------------------------- */

static pw_status_t pw_elastic_check(const pw_elastic_options_t* o, const pw_elastic_job_t* job) {
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(o, pw_elastic_options_t, PW_ELASTIC_OPTIONS_SIZE_V1,
                                     "pw_elastic_create: options"));
  PW_RETURN_IF_ERROR(
      PW_STRUCT_CHECK(job, pw_elastic_job_t, PW_ELASTIC_JOB_SIZE_V1, "pw_elastic_create: job"));
  if (job->setup == NULL || job->teardown == NULL || job->step == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_elastic_create: job.%s is NULL (setup, teardown and step are "
                          "required)",
                          job->setup == NULL ? "setup" : job->teardown == NULL ? "teardown" : "step");
  }
  PW_RETURN_IF_ERROR_CTX(pw_mesh_shape_check(&o->slice_mesh), "pw_elastic_create: slice_mesh");
  if (o->state_count == 0 || o->state_count > PW_ELASTIC_MAX_STATE) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_elastic_create: state_count %u is not in 1..%u", o->state_count,
                          PW_ELASTIC_MAX_STATE);
  }
  if (o->max_slices != 0 && o->min_slices > o->max_slices) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_elastic_create: min_slices %u exceeds max_slices %u",
                          o->min_slices, o->max_slices);
  }
  for (uint32_t i = 0; o->state_names != NULL && i < o->state_count; ++i) {
    if (o->state_names[i] != NULL && strlen(o->state_names[i]) >= PW_ELASTIC_NAME) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "pw_elastic_create: state_names[%u] is longer than %d bytes", i,
                            PW_ELASTIC_NAME - 1);
    }
  }
  return NULL;
}

static void pw_elastic_free(pw_elastic_t* e) {
  free(e->state);
  free(e->places);
  free(e->names);
  free(e->name_ptrs);
  free(e->slices);
  free(e->handled);
  pw_status_free(e->loss_cause);
  pthread_mutex_destroy(&e->lock);
  free(e);
}

pw_status_t pw_elastic_create(pw_client_t* client, const pw_elastic_options_t* options,
                              const pw_elastic_job_t* job, pw_elastic_t** out_elastic) {
  bool have_store = options != NULL &&
                    options->struct_size >= PW_ELASTIC_OPTIONS_SIZE_V1 &&
                    options->store.vtable != NULL;
  pw_status_t status = NULL;
  if (client == NULL || out_elastic == NULL) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_elastic_create: %s is NULL",
                            client == NULL ? "client" : "out_elastic");
  }
  if (status == NULL) status = pw_elastic_check(options, job);
  if (status != NULL) {
    if (have_store) options->store.vtable->destroy(options->store.self);
    if (out_elastic != NULL) *out_elastic = NULL;
    return status;
  }
  *out_elastic = NULL;
  pw_elastic_t* e = calloc(1, sizeof(*e));
  pw_runtime_t* rt = pw_client_runtime(client);
  uint32_t n = options->state_count;
  if (e != NULL) {
    pthread_mutex_init(&e->lock, NULL);
    e->state = calloc(n, sizeof(*e->state));
    e->places = calloc(n, sizeof(*e->places));
    e->slices = calloc(pw_runtime_slice_count(rt), sizeof(*e->slices));
    e->handled = calloc(pw_runtime_slice_count(rt), sizeof(*e->handled));
    if (options->state_names != NULL) {
      e->names = calloc(n, sizeof(*e->names));
      e->name_ptrs = calloc(n, sizeof(*e->name_ptrs));
    }
  }
  if (e == NULL || e->state == NULL || e->places == NULL || e->slices == NULL ||
      e->handled == NULL ||
      (options->state_names != NULL && (e->names == NULL || e->name_ptrs == NULL))) {
    if (e != NULL) pw_elastic_free(e);
    if (have_store) options->store.vtable->destroy(options->store.self);
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "pw_elastic_create: out of memory");
  }
  e->client = client;
  e->runtime = rt;
  e->options = *options;
  e->options.store = (pw_store_t){0};
  e->job = *job;
  e->state_count = n;
  if (e->options.min_slices == 0) e->options.min_slices = 1;
  if (e->options.snapshot_every == 0) e->options.snapshot_every = 10;
  if (e->options.drain_deadline_ns == 0) e->options.drain_deadline_ns = UINT64_C(30000000000);
  if (e->options.max_recoveries == 0) e->options.max_recoveries = 100;
  for (uint32_t i = 0; options->state_names != NULL && i < n; ++i) {
    snprintf(e->names[i], PW_ELASTIC_NAME, "%s",
             options->state_names[i] != NULL ? options->state_names[i] : "");
    e->name_ptrs[i] = e->names[i];
  }
  e->options.state_names = NULL;
  e->stats.struct_size = sizeof(e->stats);
  pw_snapshotter_options_t so;
  pw_snapshotter_options_init(&so);
  so.keep = options->keep;
  so.store = options->store; /* taken over, also on failure */
  so.key_prefix = options->key_prefix;
  status = pw_snapshotter_create(client, &so, &e->snapshotter);
  if (status == NULL) status = pw_client_set_topology_callback(client, pw_elastic_on_topology, e);
  if (status != NULL) {
    pw_status_free(pw_snapshotter_destroy(e->snapshotter));
    pw_elastic_free(e);
    return pw_status_annotate(status, "pw_elastic_create");
  }
  *out_elastic = e;
  return NULL;
}

static void pw_elastic_drop_state(pw_elastic_t* e) {
  for (uint32_t i = 0; i < e->state_count; ++i) {
    if (e->state[i].id != 0) pw_status_free(pw_buffer_release(e->client, e->state[i]));
    e->state[i].id = 0;
  }
}

static void pw_elastic_teardown(pw_elastic_t* e) {
  if (!e->set_up) return;
  pw_elastic_drop_state(e);
  e->job.teardown(e->job.user, e);
  for (uint32_t i = 0; i < e->state_count; ++i) e->places[i].placed = false;
  e->set_up = false;
}

pw_status_t pw_elastic_destroy(pw_elastic_t* elastic) {
  if (elastic == NULL) return NULL;
  pw_status_t status = pw_client_set_topology_callback(elastic->client, NULL, NULL);
  pw_elastic_teardown(elastic);
  pw_status_t snap = pw_snapshotter_destroy(elastic->snapshotter);
  if (status == NULL) {
    status = snap;
  } else {
    pw_status_free(snap);
  }
  pw_elastic_free(elastic);
  return status;
}

/* ---- what setup and step call ------------------------------------------------ */

pw_status_t pw_elastic_place(pw_elastic_t* e, uint32_t index, pw_vslice_t vslice,
                             const pw_array_spec_t* spec) {
  if (e == NULL || spec == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_elastic_place: %s is NULL",
                          e == NULL ? "elastic" : "spec");
  }
  if (!e->in_setup) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "pw_elastic_place: only from the job's setup");
  }
  if (index >= e->state_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_elastic_place: index %u out of range (%u state buffers)", index,
                          e->state_count);
  }
  pw_mesh_shape_t mesh;
  PW_RETURN_IF_ERROR_CTX(pw_vslice_binding(e->client, vslice, NULL, &mesh),
                         "pw_elastic_place: state %u", index);
  PW_RETURN_IF_ERROR_CTX(pw_array_spec_check(spec, &mesh), "pw_elastic_place: state %u", index);
  e->places[index] = (pw_elastic_place_t){vslice, *spec, true};
  return NULL;
}

pw_status_t pw_elastic_set_state(pw_elastic_t* e, uint32_t index, pw_buffer_t buffer) {
  if (e == NULL) return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_elastic_set_state: elastic is NULL");
  if (index >= e->state_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_elastic_set_state: index %u out of range (%u state buffers)", index,
                          e->state_count);
  }
  if (e->in_setup && e->restoring) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "pw_elastic_set_state: state %u comes from the snapshot when restoring",
                          index);
  }
  pw_array_spec_t spec;
  PW_RETURN_IF_ERROR_CTX(pw_buffer_spec(e->client, buffer, &spec), "pw_elastic_set_state: state %u",
                         index);
  if (e->state[index].id != 0 && e->state[index].id != buffer.id) {
    pw_status_free(pw_buffer_release(e->client, e->state[index]));
  }
  e->state[index] = buffer;
  return NULL;
}

pw_status_t pw_elastic_state(pw_elastic_t* e, uint32_t index, pw_buffer_t* out_buffer) {
  if (e == NULL || out_buffer == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_elastic_state: %s is NULL",
                          e == NULL ? "elastic" : "out_buffer");
  }
  out_buffer->id = 0;
  if (index >= e->state_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_elastic_state: index %u out of range (%u state buffers)", index,
                          e->state_count);
  }
  if (e->state[index].id == 0) {
    return pw_status_make(PW_STATUS_NOT_FOUND, "pw_elastic_state: state %u is not set", index);
  }
  *out_buffer = e->state[index];
  return NULL;
}

uint32_t pw_elastic_slice_count(const pw_elastic_t* e) { return e != NULL ? e->slice_count : 0; }

pw_status_t pw_elastic_stats(pw_elastic_t* e, pw_elastic_stats_t* out_stats) {
  if (e == NULL) return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_elastic_stats: elastic is NULL");
  PW_RETURN_IF_ERROR(
      PW_STRUCT_CHECK(out_stats, pw_elastic_stats_t, PW_ELASTIC_STATS_SIZE_V1, "pw_elastic_stats"));
  pthread_mutex_lock(&e->lock);
  pw_elastic_stats_t stats = e->stats;
  pthread_mutex_unlock(&e->lock);
  stats.slice_count = e->slice_count;
  pw_struct_fill(out_stats, &stats, sizeof(stats));
  return NULL;
}

/* ---- re-meshing ---------------------------------------------------------------- */

/* Physical slice |s|'s info; false when the query fails. */
static bool pw_elastic_slice_info(pw_elastic_t* e, uint32_t s, pw_slice_info_t* info) {
  memset(info, 0, sizeof(*info));
  info->struct_size = sizeof(*info);
  pw_status_t status = pw_runtime_slice_info(e->runtime, s, info);
  pw_status_free(status);
  return status == NULL;
}

/* The healthy physical slices of the job's mesh, ascending, at most
 * max_slices, into |out| (after a health check). */
static uint32_t pw_elastic_pick(pw_elastic_t* e, uint32_t* out) {
  pw_status_free(pw_runtime_check_health(e->runtime, NULL));
  uint32_t n = 0, total = pw_runtime_slice_count(e->runtime);
  for (uint32_t s = 0; s < total; ++s) {
    if (e->options.max_slices != 0 && n == e->options.max_slices) break;
    pw_slice_info_t info;
    if (!pw_elastic_slice_info(e, s, &info)) continue;
    if (!pw_mesh_shape_equal(&info.mesh, &e->options.slice_mesh)) continue;
    if (info.state != PW_SLICE_ONLINE || info.health >= PW_DEVICE_FAILED) continue;
    out[n++] = s;
  }
  return n;
}

/* Runs the job's setup on |slices| and checks what it must do. */
static pw_status_t pw_elastic_setup(pw_elastic_t* e, const uint32_t* slices, uint32_t count,
                                    bool restoring) {
  pthread_mutex_lock(&e->lock);
  if (slices != e->slices) memcpy(e->slices, slices, count * sizeof(*slices));
  e->slice_count = count;
  pthread_mutex_unlock(&e->lock);
  e->in_setup = true;
  e->restoring = restoring;
  pw_status_t status = e->job.setup(e->job.user, e, e->slices, count, restoring);
  e->in_setup = false;
  e->restoring = false;
  e->set_up = true; /* teardown runs after a failed setup too */
  for (uint32_t i = 0; status == NULL && i < e->state_count; ++i) {
    if (!e->places[i].placed) {
      status = pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                              "the job's setup did not place state %u (pw_elastic_place)", i);
    } else if (!restoring && e->state[i].id == 0) {
      status = pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                              "the job's setup did not set state %u (pw_elastic_set_state)", i);
    }
  }
  return status != NULL ? pw_status_annotate(status, "setup on %u slices", count) : NULL;
}

/* Snapshots the state as of |step| (the state entering it). At most one
 * snapshot is in flight: the previous one's copy is waited for first (a
 * stall only when copies take longer than snapshot_every steps), so a
 * loss always finds a complete snapshot at most two boundaries back. The
 * first one is waited for too: until it is copied there is nothing to
 * restore. */
static pw_status_t pw_elastic_snapshot(pw_elastic_t* e, uint64_t step, bool first) {
  uint64_t latest = 0;
  pw_status_t status = pw_snapshotter_latest_step(e->snapshotter, &latest);
  if (status == NULL && latest == step) return NULL; /* restored from it: held */
  pw_status_free(status);
  pw_time_t deadline = pw_clock_now() + (pw_time_t)e->options.drain_deadline_ns;
  PW_RETURN_IF_ERROR(pw_snapshotter_flush(e->snapshotter, deadline));
  status = pw_snapshot_take(e->snapshotter, step, e->state, e->name_ptrs, e->state_count, NULL,
                            NULL);
  if (status != NULL && pw_status_code(status) == PW_STATUS_RESOURCE_EXHAUSTED) {
    /* Copies lag: wait for them once, then take. */
    pw_status_free(status);
    PW_RETURN_IF_ERROR(pw_snapshotter_flush(
        e->snapshotter, pw_clock_now() + (pw_time_t)e->options.drain_deadline_ns));
    status = pw_snapshot_take(e->snapshotter, step, e->state, e->name_ptrs, e->state_count, NULL,
                              NULL);
  }
  if (status != NULL && pw_status_code(status) == PW_STATUS_ALREADY_EXISTS) {
    pw_status_free(status);
    return NULL;
  }
  PW_RETURN_IF_ERROR_CTX(status, "snapshot of step %llu", (unsigned long long)step);
  if (first) PW_RETURN_IF_ERROR(pw_snapshotter_flush(e->snapshotter, deadline));
  pthread_mutex_lock(&e->lock);
  e->stats.snapshots++;
  pthread_mutex_unlock(&e->lock);
  pw_elastic_emit(e, PW_ELASTIC_SNAPSHOT, step, UINT32_MAX, NULL, 0);
  return NULL;
}

/* Tears down, sets up on |slices| restoring, restores the latest complete
 * snapshot into the placements; |*out_step| its step. */
static pw_status_t pw_elastic_remesh(pw_elastic_t* e, const uint32_t* slices, uint32_t count,
                                     uint64_t* out_step) {
  PW_RETURN_IF_ERROR(pw_snapshotter_flush(
      e->snapshotter, pw_clock_now() + (pw_time_t)e->options.drain_deadline_ns));
  uint64_t step = 0;
  PW_RETURN_IF_ERROR_CTX(pw_snapshotter_latest_step(e->snapshotter, &step),
                         "no complete snapshot to restore");
  pw_elastic_teardown(e);
  pw_status_t status = pw_elastic_setup(e, slices, count, true);
  for (uint32_t i = 0; status == NULL && i < e->state_count; ++i) {
    status = pw_snapshot_restore(e->snapshotter, step, i, e->client, e->places[i].vslice,
                                 &e->places[i].spec, &e->state[i]);
    if (status != NULL) status = pw_status_annotate(status, "restoring state %u", i);
  }
  *out_step = step;
  return status;
}

static bool pw_elastic_typed_loss(pw_status_t status) {
  pw_status_code_t c = pw_status_code(status);
  return c == PW_STATUS_UNAVAILABLE || c == PW_STATUS_ABORTED || c == PW_STATUS_DATA_LOSS ||
         c == PW_STATUS_DEADLINE_EXCEEDED;
}

/* Whether a slice in use is lost now (a step failed without an event yet). */
static bool pw_elastic_any_lost(pw_elastic_t* e, uint32_t* out_slice) {
  for (uint32_t i = 0; i < e->slice_count; ++i) {
    pw_slice_info_t info;
    if (pw_elastic_slice_info(e, e->slices[i], &info) && info.state == PW_SLICE_LOST) {
      *out_slice = e->slices[i];
      return true;
    }
  }
  return false;
}

static void pw_elastic_nap(void) {
  struct timespec ts = {0, 1000000};
  nanosleep(&ts, NULL);
}

/* After a loss: drain, wait for a return, re-mesh onto the healthy slices
 * and restore. |*step| becomes the snapshot's step. */
static pw_status_t pw_elastic_recover(pw_elastic_t* e, uint64_t failed_at, uint64_t* step) {
  pw_time_t t0 = pw_clock_now();
  /* Every loss so far is acted on now (its event may still come). */
  uint32_t total = pw_runtime_slice_count(e->runtime);
  uint32_t* losses = malloc(total * sizeof(*losses));
  if (losses == NULL) return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "recover: out of memory");
  for (uint32_t s = 0; s < total; ++s) {
    pw_slice_info_t info;
    losses[s] = pw_elastic_slice_info(e, s, &info) ? info.losses : 0;
  }
  pthread_mutex_lock(&e->lock);
  memcpy(e->handled, losses, total * sizeof(*losses));
  free(losses);
  uint32_t lost = e->lost_slice;
  pw_status_t cause = e->loss_cause;
  e->loss_cause = NULL;
  uint64_t lost_at = e->loss_pending ? e->loss_time_ns : 0;
  e->loss_pending = false;
  uint32_t recoveries = ++e->stats.recoveries;
  pthread_mutex_unlock(&e->lock);
  if (lost_at == 0) (void)pw_elastic_any_lost(e, &lost);
  pw_elastic_emit(e, PW_ELASTIC_SLICE_LOST, failed_at, lost, cause, 0);
  pw_status_free(cause);
  if (recoveries > e->options.max_recoveries) {
    return pw_status_make(PW_STATUS_UNAVAILABLE, "gave up after %u recoveries",
                          e->options.max_recoveries);
  }
  /* Outstanding work resolves (the runtime fails what the lost slice
   * held within its grace). */
  pw_status_t status = pw_client_wait_idle(e->client, t0 + (pw_time_t)e->options.drain_deadline_ns);
  PW_RETURN_IF_ERROR_CTX(status, "waiting for outstanding work after the loss");
  pw_time_t t1 = pw_clock_now();
  uint32_t* picked = malloc(total * sizeof(*picked));
  if (picked == NULL) return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "recover: out of memory");
  uint32_t before = e->slice_count;
  uint32_t count = pw_elastic_pick(e, picked);
  pw_time_t until = t1 + (pw_time_t)e->options.return_wait_ns;
  while (count < before && pw_clock_now() < until) {
    pw_elastic_nap();
    count = pw_elastic_pick(e, picked);
  }
  if (count < e->options.min_slices) {
    free(picked);
    return pw_status_make(PW_STATUS_UNAVAILABLE,
                          "%u healthy slices of the job's mesh, below min_slices %u", count,
                          e->options.min_slices);
  }
  pw_time_t t2 = pw_clock_now();
  status = pw_elastic_remesh(e, picked, count, step);
  free(picked);
  PW_RETURN_IF_ERROR_CTX(status, "re-mesh onto %u slices", count);
  pw_time_t t3 = pw_clock_now();
  pthread_mutex_lock(&e->lock);
  e->stats.last_detect_ns = lost_at != 0 && (uint64_t)t0 > lost_at ? (uint64_t)t0 - lost_at : 0;
  e->stats.last_drain_ns = (uint64_t)(t1 - t0);
  e->stats.last_restore_ns = (uint64_t)(t3 - t2);
  pthread_mutex_unlock(&e->lock);
  e->time_first_step = true;
  pw_elastic_observe(e, *step, lost_at != 0 && lost_at < (uint64_t)t0 ? lost_at : (uint64_t)t0,
                     false);
  pw_elastic_emit(e, PW_ELASTIC_RESTORED, *step, UINT32_MAX, NULL, (uint64_t)(t3 - t2));
  if (count != before) {
    pw_elastic_emit(e, count < before ? PW_ELASTIC_REMESHED : PW_ELASTIC_GROWN, *step,
                    UINT32_MAX, NULL, (uint64_t)(t3 - t2));
  }
  return NULL;
}

/* At a boundary, after a return: snapshot, re-mesh onto the larger set. */
static pw_status_t pw_elastic_grow(pw_elastic_t* e, uint64_t step) {
  uint32_t total = pw_runtime_slice_count(e->runtime);
  uint32_t* picked = malloc(total * sizeof(*picked));
  if (picked == NULL) return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "grow: out of memory");
  uint32_t count = pw_elastic_pick(e, picked);
  pw_status_t status = NULL;
  if (count > e->slice_count) {
    for (uint32_t i = 0; i < count; ++i) {
      if (!pw_elastic_uses(e, picked[i])) {
        pw_elastic_emit(e, PW_ELASTIC_SLICE_BACK, step, picked[i], NULL, 0);
      }
    }
    pw_time_t t0 = pw_clock_now();
    status = pw_elastic_snapshot(e, step, true);
    uint64_t restored = step;
    if (status == NULL) status = pw_elastic_remesh(e, picked, count, &restored);
    if (status == NULL && restored != step) {
      status = pw_status_make(PW_STATUS_INTERNAL,
                              "grow: the snapshot of step %llu did not complete (latest %llu)",
                              (unsigned long long)step, (unsigned long long)restored);
    }
    if (status == NULL) {
      pthread_mutex_lock(&e->lock);
      e->stats.growths++;
      pthread_mutex_unlock(&e->lock);
      pw_elastic_observe(e, step, (uint64_t)t0, true);
      pw_elastic_emit(e, PW_ELASTIC_GROWN, step, UINT32_MAX, NULL,
                      (uint64_t)(pw_clock_now() - t0));
    }
  }
  free(picked);
  return status != NULL ? pw_status_annotate(status, "growing at step %llu",
                                             (unsigned long long)step)
                        : NULL;
}

pw_status_t pw_elastic_run(pw_elastic_t* e, uint64_t first_step, uint64_t step_count) {
  if (e == NULL) return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_elastic_run: elastic is NULL");
  pw_status_t status = NULL;
  if (!e->set_up) {
    uint32_t* picked = malloc(pw_runtime_slice_count(e->runtime) * sizeof(*picked));
    if (picked == NULL) return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "run: out of memory");
    uint32_t count = pw_elastic_pick(e, picked);
    if (count < e->options.min_slices) {
      status = pw_status_make(PW_STATUS_UNAVAILABLE,
                              "%u healthy slices of the job's mesh, below min_slices %u", count,
                              e->options.min_slices);
    } else {
      status = pw_elastic_setup(e, picked, count, false);
    }
    free(picked);
    if (status != NULL) {
      pw_elastic_teardown(e);
      return pw_status_annotate(status, "pw_elastic_run");
    }
  }
  uint64_t end = first_step + step_count, step = first_step, high = first_step;
  bool boundary_done = false;
  while (step < end) {
    uint32_t every = e->options.snapshot_every;
    if (!boundary_done && (step == first_step || step % every == 0)) {
      /* Growth is checked at every boundary below max_slices (a health
       * check of the runtime's slices), not only after a return event:
       * the event may come after the boundary. */
      uint32_t max = e->options.max_slices;
      if (step != first_step && (max == 0 || e->slice_count < max)) {
        status = pw_elastic_grow(e, step);
      }
      if (status == NULL) status = pw_elastic_snapshot(e, step, step == first_step);
      if (status != NULL) break;
      boundary_done = true;
    }
    pthread_mutex_lock(&e->lock);
    bool loss = e->loss_pending;
    pthread_mutex_unlock(&e->lock);
    pw_status_t failure = NULL;
    pw_time_t started = pw_clock_now();
    if (!loss) failure = e->job.step(e->job.user, e, step);
    uint32_t lost = 0;
    if (!loss && failure == NULL) {
      pthread_mutex_lock(&e->lock);
      e->stats.steps_completed++;
      if (step < high) e->stats.steps_replayed++;
      if (e->time_first_step) e->stats.last_first_step_ns = (uint64_t)(pw_clock_now() - started);
      pthread_mutex_unlock(&e->lock);
      e->time_first_step = false;
      step++;
      if (step > high) high = step;
      boundary_done = false;
      continue;
    }
    pthread_mutex_lock(&e->lock);
    loss = loss || e->loss_pending;
    pthread_mutex_unlock(&e->lock);
    if (failure != NULL &&
        !(pw_elastic_typed_loss(failure) && (loss || pw_elastic_any_lost(e, &lost)))) {
      status = pw_status_annotate(failure, "step %llu", (unsigned long long)step);
      break;
    }
    pw_status_free(failure);
    status = pw_elastic_recover(e, step, &step);
    if (status != NULL) break;
    boundary_done = true; /* the restored snapshot is this boundary's */
  }
  return status != NULL ? pw_status_annotate(status, "pw_elastic_run") : NULL;
}
