/* The snapshotter: create/destroy, take, and its two threads. The copy
 * thread takes queued snapshots in order and, buffer by buffer, waits for
 * the buffer (or the destroy's cancel event) and copies its global array
 * into host memory; a complete snapshot enters the ring and, with a store,
 * the persist thread's queue. Events are completed with no lock held (their
 * callbacks may call back in). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "snapshot/snapshot_internal.h"
#include "core/client.h"
#include "observe/observe.h"
#include "plugin/store_call.h"

void pw_snapshotter_options_init(pw_snapshotter_options_t* out_options) {
  if (out_options == NULL) return;
  memset(out_options, 0, sizeof(*out_options));
  out_options->struct_size = sizeof(*out_options);
}

static bool pw_snap_prefix_valid(const char* p) {
  size_t n = strlen(p);
  if (n == 0 || n > PW_SNAPSHOT_PREFIX_MAX) return false;
  for (size_t i = 0; i < n; ++i) {
    char c = p[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

static pw_status_t pw_snap_options_check(const pw_snapshotter_options_t* o) {
  const char* call = "pw_snapshotter_create";
  if (o->allocator.alloc != NULL || o->allocator.free != NULL) {
    if (!pw_allocator_is_valid(o->allocator)) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: allocator lacks a method", call);
    }
  }
  if (o->keep > PW_SNAPSHOT_MAX_KEEP) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: keep %u exceeds %u", call, o->keep,
                          PW_SNAPSHOT_MAX_KEEP);
  }
  if (o->key_prefix != NULL && !pw_snap_prefix_valid(o->key_prefix)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: key_prefix '%.40s' is not 1 to %u bytes of [A-Za-z0-9_-]", call,
                          o->key_prefix, PW_SNAPSHOT_PREFIX_MAX);
  }
  if (o->chunk_bytes != 0 && o->chunk_bytes < PW_SNAPSHOT_MIN_CHUNK) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: chunk_bytes %" PRIu64 " is below %u",
                          call, o->chunk_bytes, PW_SNAPSHOT_MIN_CHUNK);
  }
  if (o->store.vtable != NULL) {
    PW_RETURN_IF_ERROR_CTX(pw__store_check(&o->store), "%s: store", call);
  }
  return NULL;
}

static void* pw_snap_copy_main(void* arg);
static void* pw_snap_persist_main(void* arg);

static void pw_snap_stop_threads(pw_snapshotter_t* s) {
  pthread_mutex_lock(&s->mutex);
  s->stopping = true;
  pthread_cond_broadcast(&s->cond);
  pthread_mutex_unlock(&s->mutex);
  if (s->cancel != NULL) pw_status_ignore(pw_event_signal(s->cancel));
  if (s->copy_started) pthread_join(s->copy_thread, NULL);
  pthread_mutex_lock(&s->mutex);
  s->copy_done = true;
  pthread_cond_broadcast(&s->cond);
  pthread_mutex_unlock(&s->mutex);
  if (s->persist_started) pthread_join(s->persist_thread, NULL);
  s->copy_started = s->persist_started = false;
}

static void pw_snap_free_all(pw_snapshotter_t* s) {
  pw_snap_stop_threads(s);
  for (uint32_t i = 0; i < s->held; ++i) pw__snap_release(s, s->ring[i]);
  s->held = 0;
  if (s->ring != NULL) pw_allocator_free(s->allocator, s->ring, (s->keep + 1) * sizeof(*s->ring));
  pw_event_release(s->cancel);
  pw__store_destroy(&s->store);
  pthread_cond_destroy(&s->cond);
  pthread_mutex_destroy(&s->mutex);
  pw_allocator_free(s->allocator, s, sizeof(*s));
}

pw_status_t pw_snapshotter_create(pw_client_t* client, const pw_snapshotter_options_t* options,
                                  pw_snapshotter_t** out_snapshotter) {
  pw_snapshotter_options_t defaults;
  pw_snapshotter_options_init(&defaults);
  pw_store_t store = {NULL, NULL};
  if (options != NULL && options->struct_size >= PW_SNAPSHOTTER_OPTIONS_SIZE_V1) {
    store = options->store;
  }
  pw_status_t status = NULL;
  if (out_snapshotter == NULL || client == NULL) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "pw_snapshotter_create: client or out_snapshotter is NULL");
  } else if (options != NULL) {
    status = PW_STRUCT_CHECK(options, pw_snapshotter_options_t, PW_SNAPSHOTTER_OPTIONS_SIZE_V1,
                             "pw_snapshotter_create");
  }
  if (out_snapshotter != NULL) *out_snapshotter = NULL;
  const pw_snapshotter_options_t* o = options != NULL ? options : &defaults;
  if (status == NULL) status = pw_snap_options_check(o);
  pw_allocator_t allocator = pw_allocator_is_valid(o->allocator) ? o->allocator
                                                                  : pw_allocator_system();
  pw_snapshotter_t* s = NULL;
  if (status == NULL) status = pw_allocator_calloc(allocator, sizeof(*s), 0, (void**)&s);
  if (status != NULL) {
    pw__store_destroy(&store);
    return status;
  }
  s->allocator = allocator;
  s->logger = o->logger.fn != NULL ? o->logger : pw_logger_default();
  s->client = client;
  s->store = store;
  snprintf(s->prefix, sizeof(s->prefix), "%s", o->key_prefix ? o->key_prefix : "snapshot");
  s->keep = o->keep ? o->keep : PW_SNAPSHOT_DEFAULT_KEEP;
  s->max_in_flight = o->max_in_flight ? o->max_in_flight : PW_SNAPSHOT_DEFAULT_IN_FLIGHT;
  s->level = o->compression_level ? o->compression_level : 1;
  s->chunk_bytes = o->chunk_bytes ? o->chunk_bytes : PW_SNAPSHOT_DEFAULT_CHUNK;
  pthread_mutex_init(&s->mutex, NULL);
  pthread_cond_init(&s->cond, NULL);
  status = pw_allocator_calloc_array(allocator, s->keep + 1, sizeof(*s->ring), 0,
                                     (void**)&s->ring);
  if (status == NULL) status = pw_event_create(allocator, &s->cancel);
  if (status == NULL && pthread_create(&s->copy_thread, NULL, pw_snap_copy_main, s) != 0) {
    status = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                            "pw_snapshotter_create: cannot start the copy thread");
  }
  if (status == NULL) s->copy_started = true;
  if (status == NULL && pthread_create(&s->persist_thread, NULL, pw_snap_persist_main, s) != 0) {
    status = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                            "pw_snapshotter_create: cannot start the persist thread");
  }
  if (status == NULL) s->persist_started = true;
  if (status != NULL) {
    pw_snap_free_all(s);
    return status;
  }
  *out_snapshotter = s;
  return NULL;
}

pw_status_t pw_snapshotter_destroy(pw_snapshotter_t* s) {
  if (s == NULL) return NULL;
  pthread_t self = pthread_self();
  if ((s->copy_started && pthread_equal(self, s->copy_thread)) ||
      (s->persist_started && pthread_equal(self, s->persist_thread))) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "pw_snapshotter_destroy: called on one of the snapshotter's own "
                          "threads (from a callback of an event it completes)");
  }
  pw_snap_free_all(s);
  return NULL;
}

/* ---- take ---------------------------------------------------------------------- */

static pw_status_t pw_snap_take_check(pw_snapshotter_t* s, const pw_buffer_t* buffers,
                                      const char* const* names, uint32_t count) {
  if (s == NULL || buffers == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_snapshot_take: snapshotter or buffers is NULL");
  }
  if (count == 0 || count > PW_SNAPSHOT_MAX_BUFFERS) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_snapshot_take: count %u is not 1 to %u", count,
                          PW_SNAPSHOT_MAX_BUFFERS);
  }
  for (uint32_t i = 0; names != NULL && i < count; ++i) {
    if (names[i] != NULL && strlen(names[i]) >= PW_SNAPSHOT_NAME_MAX) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "pw_snapshot_take: names[%u] is longer than %u bytes", i,
                            PW_SNAPSHOT_NAME_MAX - 1);
    }
  }
  return NULL;
}

/* Pins buffer |i| and records its name, spec and size. */
static pw_status_t pw_snap_take_buffer(pw_snapshotter_t* s, pw_snap_t* snap, uint32_t i,
                                       pw_buffer_t buffer, const char* name) {
  pw_snap_buffer_t* b = &snap->buffers[i];
  if (name != NULL) snprintf(b->name, sizeof(b->name), "%s", name);
  PW_RETURN_IF_ERROR(pw_buffer_retain(s->client, buffer, &b->pin));
  PW_RETURN_IF_ERROR(pw_buffer_spec(s->client, b->pin, &b->spec));
  PW_RETURN_IF_ERROR(pw_buffer_mesh(s->client, b->pin, &b->mesh));
  size_t bytes = 0;
  PW_RETURN_IF_ERROR(pw_buffer_byte_size(s->client, b->pin, &bytes));
  b->bytes = bytes;
  return NULL;
}

/* Queues |snap| for the copy thread, unless the step is taken or too many
 * are in flight. */
static pw_status_t pw_snap_enqueue(pw_snapshotter_t* s, pw_snap_t* snap) {
  pw_status_t status = NULL;
  pthread_mutex_lock(&s->mutex);
  if (s->stopping) {
    status = pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                            "pw_snapshot_take: the snapshotter is being destroyed");
  } else if (pw__snap_step_busy_locked(s, snap->step)) {
    status = pw_status_make(PW_STATUS_ALREADY_EXISTS,
                            "pw_snapshot_take: step %" PRIu64 " is held or being taken",
                            snap->step);
  } else if (s->in_flight >= s->max_in_flight) {
    status = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                            "pw_snapshot_take: %u snapshots are still being copied "
                            "(max_in_flight %u)",
                            s->in_flight, s->max_in_flight);
  } else {
    snap->next = NULL;
    if (s->copy_tail != NULL) {
      s->copy_tail->next = snap;
    } else {
      s->copy_head = snap;
    }
    s->copy_tail = snap;
    s->in_flight++;
    s->outstanding++;
    pthread_cond_broadcast(&s->cond);
  }
  pthread_mutex_unlock(&s->mutex);
  return status;
}

pw_status_t pw_snapshot_take(pw_snapshotter_t* s, uint64_t step, const pw_buffer_t* buffers,
                             const char* const* names, uint32_t count, pw_event_t** out_copied,
                             pw_event_t** out_persisted) {
  if (out_copied != NULL) *out_copied = NULL;
  if (out_persisted != NULL) *out_persisted = NULL;
  PW_RETURN_IF_ERROR(pw_snap_take_check(s, buffers, names, count));
  pw_snap_t* snap = NULL;
  PW_RETURN_IF_ERROR_CTX(pw__snap_create(s, step, count, &snap), "pw_snapshot_take");
  pw_status_t status = NULL;
  for (uint32_t i = 0; status == NULL && i < count; ++i) {
    status = pw_snap_take_buffer(s, snap, i, buffers[i], names ? names[i] : NULL);
    if (status != NULL) status = pw_status_annotate(status, "pw_snapshot_take: buffers[%u]", i);
  }
  snap->taken_at = pw_clock_now();
  /* The events go out before the copy thread may complete them. */
  if (status == NULL && out_copied != NULL) {
    pw_event_retain(snap->copied);
    *out_copied = snap->copied;
  }
  if (status == NULL && out_persisted != NULL) {
    pw_event_retain(snap->persisted);
    *out_persisted = snap->persisted;
  }
  if (status == NULL) status = pw_snap_enqueue(s, snap);
  if (status != NULL) {
    if (out_copied != NULL && *out_copied != NULL) {
      pw_event_release(*out_copied);
      *out_copied = NULL;
    }
    if (out_persisted != NULL && *out_persisted != NULL) {
      pw_event_release(*out_persisted);
      *out_persisted = NULL;
    }
    pw__snap_release(s, snap);
  }
  return status;
}

pw_status_t pw_snapshotter_flush(pw_snapshotter_t* s, pw_time_t deadline) {
  if (s == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_snapshotter_flush: snapshotter is NULL");
  }
  pthread_mutex_lock(&s->mutex);
  while (s->outstanding > 0) {
    if (deadline == PW_INFINITE_FUTURE) {
      pthread_cond_wait(&s->cond, &s->mutex);
      continue;
    }
    pw_time_t now = pw_clock_now();
    if (now >= deadline) break;
    /* pw_clock_now is CLOCK_MONOTONIC; the condvar waits on the realtime
     * clock, so wait in slices of at most 10 ms. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t wait = deadline - now;
    if (wait > 10000000u) wait = 10000000u;
    ts.tv_nsec += (long)wait;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec += 1;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&s->cond, &s->mutex, &ts);
  }
  uint32_t left = s->outstanding;
  pthread_mutex_unlock(&s->mutex);
  if (left > 0) {
    return pw_status_make(PW_STATUS_DEADLINE_EXCEEDED,
                          "pw_snapshotter_flush: %u snapshots still being copied or persisted",
                          left);
  }
  return NULL;
}

/* ---- the copy thread --------------------------------------------------------------- */

/* Waits for buffer |i| of |snap| (or the cancel event) and copies it. */
static pw_status_t pw_snap_copy_buffer(pw_snapshotter_t* s, pw_snap_t* snap, uint32_t i) {
  pw_snap_buffer_t* b = &snap->buffers[i];
  pw_event_t* ready = NULL;
  PW_RETURN_IF_ERROR(pw_buffer_ready_event(s->client, b->pin, &ready));
  pw_event_t* both[2] = {ready, s->cancel};
  pw_event_t* any = NULL;
  pw_status_t status = pw_event_any(s->allocator, both, 2, &any);
  if (status == NULL) {
    pw_status_ignore(pw_event_wait(any, PW_INFINITE_FUTURE));
    pw_event_release(any);
    if (!pw_event_is_ready(ready)) {
      status = pw_status_make(PW_STATUS_CANCELLED,
                              "the snapshotter was destroyed while waiting for the buffer");
    }
  }
  pw_event_release(ready);
  pw_time_t ready_at = pw_clock_now();
  if (status == NULL && b->bytes > 0) {
    status = pw_allocator_malloc(s->allocator, (size_t)b->bytes, 64, &b->data);
  }
  if (status == NULL) {
    /* The buffer is ready: this returns its producer's error, or copies. */
    status = pw_buffer_to_host(s->client, b->pin, b->data, (size_t)b->bytes, PW_IMMEDIATE_PAST);
  }
  pw_time_t done_at = pw_clock_now();
  pw_status_ignore(pw_buffer_release(s->client, b->pin));
  b->pin.id = 0;
  pthread_mutex_lock(&s->mutex);
  snap->info.wait_ns = ready_at - snap->taken_at;
  snap->info.copy_ns += done_at - ready_at;
  snap->info.total_bytes += b->bytes;
  pthread_mutex_unlock(&s->mutex);
  return status;
}

/* After the copy of |snap| (|status| its result): ring, persist queue,
 * events. Consumes |status| and the queue's reference. */
/* A snapshot's copy or write, for traces and metrics (observe.h). */
static void pw_snap_observe(pw_snapshotter_t* s, const pw_snap_t* snap, uint32_t kind,
                            uint64_t since_ns, uint64_t bytes, pw_status_t status) {
  pw_obs_event_t ev = {.since_ns = since_ns, .exec = snap->step, .bytes = bytes, .kind = kind,
                       .flags = status != NULL ? PW_OBS_FAILED : 0, .slice = UINT32_MAX,
                       .device = UINT32_MAX, .count = snap->count, .client = UINT32_MAX,
                       .status_code = (uint32_t)pw_status_code(status), .name = "snapshot"};
  pw__observe_note(s->client->runtime, &ev);
}

static void pw_snap_copied(pw_snapshotter_t* s, pw_snap_t* snap, pw_status_t status) {
  bool has_store = s->store.vtable != NULL;
  pthread_mutex_lock(&s->mutex);
  uint64_t copied_bytes = snap->info.total_bytes;
  pthread_mutex_unlock(&s->mutex);
  pw_snap_observe(s, snap, PW_OBS_SNAPSHOT, (uint64_t)snap->taken_at, copied_bytes, status);
  pw_snap_t* dropped = NULL;
  pthread_mutex_lock(&s->mutex);
  s->copying = NULL;
  s->in_flight--;
  if (status == NULL) {
    dropped = pw__snap_ring_insert_locked(s, snap);
  } else {
    snap->state = PW_SNAP_GONE;
  }
  if (status == NULL && has_store) {
    pw__snap_retain_locked(snap);
    snap->next = NULL;
    if (s->persist_tail != NULL) {
      s->persist_tail->next = snap;
    } else {
      s->persist_head = snap;
    }
    s->persist_tail = snap;
  }
  bool finished = !(status == NULL && has_store);
  pthread_mutex_unlock(&s->mutex);
  if (status != NULL) {
    pw_log(&s->logger, PW_LOG_WARN, PW_SNAPSHOT_LOG, "%s", pw_status_message(status));
    pw_status_ignore(pw_event_fail(snap->persisted,
                                   pw_status_annotate(pw_status_clone(status), "not persisted")));
    pw_status_ignore(pw_event_fail(snap->copied, status));
  } else {
    if (!has_store) {
      pw_status_ignore(pw_event_fail(
          snap->persisted, pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                                          "snapshot of step %" PRIu64
                                          " not persisted: the snapshotter has no store",
                                          snap->step)));
    }
    pw_status_ignore(pw_event_signal(snap->copied));
  }
  /* Counted out after the events: a flush that returns sees them done. */
  pthread_mutex_lock(&s->mutex);
  if (finished) s->outstanding--;
  pthread_cond_broadcast(&s->cond);
  pthread_mutex_unlock(&s->mutex);
  pw__snap_release(s, dropped);
  pw__snap_release(s, snap);
}

static void* pw_snap_copy_main(void* arg) {
  pw_snapshotter_t* s = arg;
  for (;;) {
    pthread_mutex_lock(&s->mutex);
    while (s->copy_head == NULL && !s->stopping) pthread_cond_wait(&s->cond, &s->mutex);
    pw_snap_t* snap = s->copy_head;
    if (snap == NULL) {
      pthread_mutex_unlock(&s->mutex);
      return NULL;
    }
    s->copy_head = snap->next;
    if (s->copy_head == NULL) s->copy_tail = NULL;
    snap->next = NULL;
    s->copying = snap;
    pthread_mutex_unlock(&s->mutex);
    pw_status_t status = NULL;
    for (uint32_t i = 0; status == NULL && i < snap->count; ++i) {
      status = pw_snap_copy_buffer(s, snap, i);
      if (status != NULL) {
        status = pw_status_annotate(status, "snapshot of step %" PRIu64 ": buffer %u ('%s')",
                                    snap->step, i, snap->buffers[i].name);
      }
    }
    pw_snap_copied(s, snap, status);
  }
}

/* ---- the persist thread ------------------------------------------------------------- */

static void* pw_snap_persist_main(void* arg) {
  pw_snapshotter_t* s = arg;
  for (;;) {
    pthread_mutex_lock(&s->mutex);
    while (s->persist_head == NULL && !s->copy_done) pthread_cond_wait(&s->cond, &s->mutex);
    pw_snap_t* snap = s->persist_head;
    if (snap == NULL) {
      pthread_mutex_unlock(&s->mutex);
      return NULL;
    }
    s->persist_head = snap->next;
    if (s->persist_head == NULL) s->persist_tail = NULL;
    snap->next = NULL;
    bool gone = snap->state == PW_SNAP_GONE;
    pthread_mutex_unlock(&s->mutex);
    pw_status_t status = NULL;
    if (gone) {
      status = pw_status_make(PW_STATUS_CANCELLED,
                              "snapshot of step %" PRIu64
                              " was dropped from the ring (keep %u) before it was persisted",
                              snap->step, s->keep);
    } else {
      pw_time_t start = pw_clock_now();
      status = pw__snap_persist(s, snap);
      pthread_mutex_lock(&s->mutex);
      snap->info.persist_ns = pw_clock_now() - start;
      uint64_t stored = snap->info.stored_bytes;
      pthread_mutex_unlock(&s->mutex);
      pw_snap_observe(s, snap, PW_OBS_SNAPSHOT_PERSIST, (uint64_t)start, stored, status);
      if (status != NULL) {
        status = pw_status_annotate(status, "persisting the snapshot of step %" PRIu64
                                    " to store '%s'", snap->step, pw__store_name(&s->store));
        pw_log(&s->logger, PW_LOG_WARN, PW_SNAPSHOT_LOG, "%s", pw_status_message(status));
      }
    }
    pw_status_ignore(pw_event_fail(snap->persisted, status));
    pthread_mutex_lock(&s->mutex);
    s->outstanding--;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mutex);
    pw__snap_release(s, snap);
  }
}
