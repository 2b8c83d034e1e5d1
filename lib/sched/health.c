/* Slice health: losing a physical slice and getting it back, and telling
 * clients (include/pathways/runtime.h, "Failure").
 *
 * State. A physical slice's |lost| is 1 while it is lost and its |losses|
 * counts the losses; a composite's |lost| counts its lost parts and its
 * |losses| their losses. Both change under runtime->lock, which is also
 * what composites are made under (vslice.c counts a new one's lost
 * parts), so the two never disagree. The transitions of all slices are
 * serialised by the health state's change lock: the events they queue
 * are in the order the changes happened.
 *
 * What a loss does at once (pw_health_lose_locked): the flags, a log
 * line, and a grace deadline on every launch outstanding on the slice
 * (the watchdog fails those the backend does not complete in time with
 * UNAVAILABLE, so a backend that dropped them cannot hang a run). From
 * then on the dispatcher refuses every launch that reaches the slice
 * (pw__health_refusal, one load of the op's slice's |lost| per launch
 * while nothing is lost): the op resolves UNAVAILABLE there and ABORTED
 * on a gang's other parts, and its dependents fail with it. Buffers made
 * before the loss compare their |losses| (pw__buffer_lost).
 *
 * Delivery. Events queue here and the health thread (started by the
 * first event, the first callback or health polling) calls every
 * listener for each, under the deliver lock, which setting or clearing a
 * callback takes too: once it is cleared no call to it is running. A
 * listener may set callbacks from inside its call (the thread already
 * holds the lock); entries cleared then are compacted later. The same
 * thread polls health every health_poll_ns when that is set. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "observe/observe.h"
#include "plugin/backend_call.h"
#include "sched/dispatch_internal.h"
#include "sched/token.h"

typedef struct pw_health_event_s {
  struct pw_health_event_s* next;
  pw_topology_event_t event;
  char slice_name[64];
} pw_health_event_t;

typedef struct pw_health_listener_s {
  pw_client_t* client;
  pw_topology_fn_t fn; /* NULL: cleared during a delivery, compacted later */
  void* user;
} pw_health_listener_t;

typedef struct pw_health_s {
  pw_runtime_t* runtime;
  pthread_mutex_t change_lock;
  /* The queue and the thread. */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  pw_health_event_t* head;
  pw_health_event_t* tail;
  bool started;
  bool stop;
  pthread_t thread;
  /* Listeners, under deliver_lock (held while delivering). */
  pthread_mutex_t deliver_lock;
  pw_health_listener_t* listeners;
  uint32_t listener_count;
  uint32_t listener_capacity;
} pw_health_t;

/* The health state whose listeners this thread is calling, if any. */
static _Thread_local pw_health_t* pw_health_delivering;

bool pw__health_in_callback(void) { return pw_health_delivering != NULL; }

const char* pw_slice_state_name(pw_slice_state_t state) {
  switch (state) {
    case PW_SLICE_ONLINE: return "online";
    case PW_SLICE_LOST: return "lost";
  }
  return "unknown";
}

const char* pw_topology_change_name(pw_topology_change_t change) {
  switch (change) {
    case PW_TOPOLOGY_SLICE_LOST: return "slice lost";
    case PW_TOPOLOGY_SLICE_BACK: return "slice back";
  }
  return "unknown";
}

pw_device_health_t pw__slice_worst_health(pw_slice_t* slice) {
  pw_device_health_t worst = PW_DEVICE_HEALTHY;
  for (uint32_t i = 0; i < slice->device_count; ++i) {
    pw_device_health_t h = pw__backend_health(slice->backend, slice->group_devices[i]);
    if (h > worst) worst = h;
  }
  return worst;
}

/* The mesh index of |slice|'s first device whose backend reports FAILED
 * (or worse), UINT32_MAX when none does. */
static uint32_t pw_health_failed_device(pw_slice_t* slice) {
  for (uint32_t i = 0; i < slice->device_count; ++i) {
    if (pw__backend_health(slice->backend, slice->group_devices[i]) >= PW_DEVICE_FAILED) return i;
  }
  return UINT32_MAX;
}

/* ---- the thread -------------------------------------------------------- */

static void pw_health_deliver(pw_health_t* h, const pw_topology_event_t* event) {
  pthread_mutex_lock(&h->deliver_lock);
  pw_health_delivering = h;
  /* The count is read again each time: a listener may add one. */
  for (uint32_t i = 0; i < h->listener_count; ++i) {
    pw_topology_fn_t fn = h->listeners[i].fn;
    if (fn != NULL) fn(h->listeners[i].user, event);
  }
  pw_health_delivering = NULL;
  /* Compact entries cleared during the calls. */
  uint32_t kept = 0;
  for (uint32_t i = 0; i < h->listener_count; ++i) {
    if (h->listeners[i].fn != NULL) h->listeners[kept++] = h->listeners[i];
  }
  h->listener_count = kept;
  pthread_mutex_unlock(&h->deliver_lock);
}

static void pw_health_free_event(pw_health_event_t* e) {
  pw_status_free(e->event.cause);
  free(e);
}

static void* pw_health_main(void* arg) {
  pw_health_t* h = arg;
  pw_runtime_t* rt = h->runtime;
  pthread_mutex_lock(&h->lock);
  for (;;) {
    if (h->head != NULL) {
      pw_health_event_t* e = h->head;
      h->head = NULL;
      h->tail = NULL;
      pthread_mutex_unlock(&h->lock);
      while (e != NULL) {
        pw_health_event_t* next = e->next;
        pw_health_deliver(h, &e->event);
        pw_health_free_event(e);
        e = next;
      }
      pthread_mutex_lock(&h->lock);
      continue;
    }
    if (h->stop) break;
    if (rt->health_poll_ns == 0) {
      pthread_cond_wait(&h->cond, &h->lock);
      continue;
    }
    pw_time_t until = pw_clock_now() + (pw_time_t)rt->health_poll_ns;
    struct timespec ts = {(time_t)(until / 1000000000), (long)(until % 1000000000)};
    if (pthread_cond_timedwait(&h->cond, &h->lock, &ts) == ETIMEDOUT && !h->stop) {
      pthread_mutex_unlock(&h->lock);
      (void)pw__health_check(rt);
      pthread_mutex_lock(&h->lock);
    }
  }
  pthread_mutex_unlock(&h->lock);
  return NULL;
}

/* Starts the thread if it is not running (h->lock held). Logged when it
 * cannot: events then wait in the queue for a later start. */
static void pw_health_start_locked(pw_health_t* h) {
  if (h->started || h->stop) return;
  if (pthread_create(&h->thread, NULL, pw_health_main, h) != 0) {
    pw_log(&h->runtime->logger, PW_LOG_ERROR, "health",
           "cannot start the health thread (pthread_create failed): topology events wait");
    return;
  }
  h->started = true;
}

pw_status_t pw__health_create(pw_runtime_t* rt) {
  pw_health_t* h = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(rt->allocator, sizeof(*h), 0, (void**)&h));
  h->runtime = rt;
  pthread_mutex_init(&h->change_lock, NULL);
  pthread_mutex_init(&h->lock, NULL);
  pthread_mutex_init(&h->deliver_lock, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* pw_clock_now's */
  pthread_cond_init(&h->cond, &attr);
  pthread_condattr_destroy(&attr);
  rt->health = h;
  if (rt->health_poll_ns != 0) {
    pthread_mutex_lock(&h->lock);
    pw_health_start_locked(h);
    bool started = h->started;
    pthread_mutex_unlock(&h->lock);
    if (!started) {
      return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                            "cannot start the health thread for health_poll_ns");
    }
  }
  return NULL;
}

void pw__health_destroy(pw_runtime_t* rt) {
  pw_health_t* h = rt->health;
  if (h == NULL) return;
  pthread_mutex_lock(&h->lock);
  h->stop = true;
  bool started = h->started;
  pthread_cond_signal(&h->cond);
  pthread_mutex_unlock(&h->lock);
  if (started) pthread_join(h->thread, NULL);
  /* Events the thread never started on (no clients are left to tell). */
  while (h->head != NULL) {
    pw_health_event_t* e = h->head;
    h->head = e->next;
    pw_health_free_event(e);
  }
  for (uint32_t s = 0; s < rt->slice_count; ++s) {
    pw_status_free(rt->slices[s].lost_cause);
    rt->slices[s].lost_cause = NULL;
  }
  pthread_cond_destroy(&h->cond);
  pthread_mutex_destroy(&h->deliver_lock);
  pthread_mutex_destroy(&h->lock);
  pthread_mutex_destroy(&h->change_lock);
  pw_allocator_free(rt->allocator, h->listeners,
                    h->listener_capacity * sizeof(pw_health_listener_t));
  pw_allocator_free(rt->allocator, h, sizeof(*h));
  rt->health = NULL;
}

/* Queues |change| of |slice| (change lock held, so in order). Events are
 * allocated with malloc, as statuses are: a loss is reported even when
 * the runtime's allocator is exhausted, or logged when malloc fails too. */
static void pw_health_enqueue(pw_health_t* h, pw_slice_t* slice, pw_topology_change_t change,
                              pw_status_t cause) {
  pw_health_event_t* e = calloc(1, sizeof(*e));
  if (e == NULL) {
    pw_log(&h->runtime->logger, PW_LOG_ERROR, "health",
           "slice '%s': out of memory for the '%s' event: clients are not told", slice->name,
           pw_topology_change_name(change));
    return;
  }
  snprintf(e->slice_name, sizeof(e->slice_name), "%s", slice->name);
  e->event.struct_size = sizeof(e->event);
  e->event.change = change;
  e->event.slice = slice->index;
  e->event.slice_name = e->slice_name;
  e->event.losses = pw_atomic_load_u32_relaxed(&slice->losses);
  e->event.cause = pw_status_clone(cause);
  e->event.time_ns = (uint64_t)pw_clock_now();
  pw_obs_event_t ev = {.ts_ns = e->event.time_ns, .slice = slice->index, .device = UINT32_MAX,
                       .client = UINT32_MAX, .name = slice->name,
                       .kind = change == PW_TOPOLOGY_SLICE_LOST ? PW_OBS_SLICE_LOST
                                                                : PW_OBS_SLICE_BACK,
                       .status_code = (uint32_t)pw_status_code(cause)};
  pw__observe_note(h->runtime, &ev);
  pthread_mutex_lock(&h->lock);
  if (h->tail != NULL) {
    h->tail->next = e;
  } else {
    h->head = e;
  }
  h->tail = e;
  pw_health_start_locked(h);
  pthread_cond_signal(&h->cond);
  pthread_mutex_unlock(&h->lock);
}

/* ---- transitions --------------------------------------------------------- */

/* Adds |delta| (+1 lost, -1 back) to the lost count of |slice| and of
 * every composite it is part of; a loss also counts in their losses.
 * Runtime lock held. */
static void pw_health_mark(pw_runtime_t* rt, pw_slice_t* slice, int delta) {
  pw_atomic_store_u32_release(&slice->lost, delta > 0 ? 1 : 0);
  if (delta > 0) pw_atomic_fetch_add_u32(&slice->losses, 1);
  for (pw_slice_t* c = rt->composites; c != NULL; c = c->composite_next) {
    if (c->span_position[slice->index] == UINT32_MAX) continue;
    if (delta > 0) {
      pw_atomic_fetch_add_u32(&c->lost, 1);
      pw_atomic_fetch_add_u32(&c->losses, 1);
    } else {
      pw_atomic_fetch_sub_u32(&c->lost, 1);
    }
  }
}

typedef struct pw_health_grace_s {
  uint64_t ns;
  uint32_t armed;
} pw_health_grace_t;

static void pw_health_grace_token(pw_completion_token_t* t, pw_health_grace_t* g) {
  if (pw_atomic_load_u32_acquire(&t->state) & 1) return; /* not outstanding */
  pw__watchdog_arm(t, g->ns);
  g->armed++;
}

/* Gives every launch outstanding on |slice| until the grace passes. The
 * tokens' deadlines are honoured from now on (deadlines_used): a launch
 * reusing a token clears a stale one. */
static uint32_t pw_health_arm_grace(pw_slice_t* slice) {
  pw_runtime_t* rt = slice->runtime;
  pw_atomic_store_u32_release(&rt->deadlines_used, 1);
  pw_health_grace_t g = {rt->loss_grace_ns, 0};
  for (uint32_t i = 0; i < slice->lane_count; ++i) {
    pw_device_t* d = &slice->devices[i];
    for (uint32_t k = 0; k < PW_DEVICE_TOKENS; ++k) pw_health_grace_token(&d->tokens[k], &g);
    for (uint32_t k = 0; k < 2 * d->queue_depth; ++k) {
      pw_health_grace_token(&d->queue_tokens[k], &g);
    }
  }
  return g.armed;
}

/* Loses physical |slice| for |cause| (owned). Change lock held. */
static bool pw_health_lose_locked(pw_slice_t* slice, pw_status_t cause, bool by_health) {
  pw_runtime_t* rt = slice->runtime;
  pthread_mutex_lock(&rt->lock);
  if (pw_atomic_load_u32_relaxed(&slice->lost) != 0) {
    pthread_mutex_unlock(&rt->lock);
    pw_status_free(cause);
    return false;
  }
  pw_health_mark(rt, slice, +1);
  pthread_mutex_unlock(&rt->lock);
  pw_status_free(slice->lost_cause);
  slice->lost_cause = cause;
  slice->lost_by_health = by_health;
  uint32_t outstanding = slice->devices != NULL ? pw_health_arm_grace(slice) : 0;
  char text[256];
  pw_status_format(cause, text, sizeof(text));
  pw_log(&rt->logger, PW_LOG_ERROR, "health",
         "slice '%s' lost (loss %u): %s; %u launches outstanding there get %.3f s to complete",
         slice->name, pw_atomic_load_u32_relaxed(&slice->losses), text, outstanding,
         (double)rt->loss_grace_ns / 1e9);
  pw_health_enqueue(rt->health, slice, PW_TOPOLOGY_SLICE_LOST, cause);
  return true;
}

/* Brings |slice| back. Change lock held. */
static bool pw_health_back_locked(pw_slice_t* slice) {
  pw_runtime_t* rt = slice->runtime;
  pthread_mutex_lock(&rt->lock);
  if (pw_atomic_load_u32_relaxed(&slice->lost) == 0) {
    pthread_mutex_unlock(&rt->lock);
    return false;
  }
  pw_health_mark(rt, slice, -1);
  pthread_mutex_unlock(&rt->lock);
  pw_status_free(slice->lost_cause);
  slice->lost_cause = NULL;
  slice->lost_by_health = false;
  pw_log(&rt->logger, PW_LOG_INFO, "health", "slice '%s' back online (after loss %u)",
         slice->name, pw_atomic_load_u32_relaxed(&slice->losses));
  pw_health_enqueue(rt->health, slice, PW_TOPOLOGY_SLICE_BACK, NULL);
  return true;
}

bool pw__health_lose(pw_slice_t* slice, pw_status_t cause, bool by_health) {
  pw_health_t* h = slice->runtime->health;
  pthread_mutex_lock(&h->change_lock);
  bool changed = pw_health_lose_locked(slice, cause, by_health);
  pthread_mutex_unlock(&h->change_lock);
  return changed;
}

uint32_t pw__health_check(pw_runtime_t* rt) {
  pw_health_t* h = rt->health;
  uint32_t changes = 0;
  for (uint32_t s = 0; s < rt->slice_count; ++s) {
    pw_slice_t* slice = &rt->slices[s];
    uint32_t failed = pw_health_failed_device(slice);
    pthread_mutex_lock(&h->change_lock);
    bool lost = pw_atomic_load_u32_relaxed(&slice->lost) != 0;
    if (!lost && failed != UINT32_MAX) {
      pw_status_t cause = pw_status_make(
          PW_STATUS_UNAVAILABLE, "device %u of slice '%s' (backend '%s' device %u) reports FAILED",
          failed, slice->name, pw__backend_name(slice->backend), slice->group_devices[failed]);
      changes += pw_health_lose_locked(slice, cause, true);
    } else if (lost && slice->lost_by_health && failed == UINT32_MAX) {
      changes += pw_health_back_locked(slice);
    }
    pthread_mutex_unlock(&h->change_lock);
  }
  return changes;
}

void pw__health_launch_failed(pw_device_t* d, pw_status_t status) {
  pw_slice_t* slice = d->slice; /* physical: devices belong to their part */
  if (pw_atomic_load_u32_relaxed(&slice->lost) != 0) return;
  /* A part of a collective whose peer failed fails with UNAVAILABLE too:
   * a backend that reports health decides which slice lost a device. */
  bool has_health = PW__BACKEND_HAS(slice->backend, health);
  uint32_t failed = has_health ? pw_health_failed_device(slice) : UINT32_MAX;
  if (has_health && failed == UINT32_MAX) return;
  pw_status_t cause =
      has_health
          ? pw_status_make(PW_STATUS_UNAVAILABLE,
                           "device %u of slice '%s' reports FAILED after a launch failed: %s",
                           failed, slice->name, pw_status_message(status))
          : pw_status_make(PW_STATUS_UNAVAILABLE,
                           "a launch on slice '%s' failed with UNAVAILABLE (backend '%s' reports "
                           "no health): %s",
                           slice->name, pw__backend_name(slice->backend),
                           pw_status_message(status));
  (void)pw__health_lose(slice, cause, has_health);
}

/* Brings |part| back if it was lost through its devices' health and
 * they all answer usable now; true when it is (still) lost. Change lock
 * held. */
static bool pw_health_recheck_locked(pw_slice_t* part) {
  if (pw_atomic_load_u32_relaxed(&part->lost) == 0) return false;
  if (!part->lost_by_health || pw_health_failed_device(part) != UINT32_MAX) return true;
  (void)pw_health_back_locked(part);
  return false;
}

bool pw__health_still_lost(pw_slice_t* slice) {
  pw_health_t* h = slice->runtime->health;
  bool lost = false;
  for (uint32_t p = 0; p < slice->span_count; ++p) {
    pw_slice_t* part = slice->span[p];
    if (pw_atomic_load_u32_acquire(&part->lost) == 0) continue;
    pthread_mutex_lock(&h->change_lock);
    lost |= pw_health_recheck_locked(part);
    pthread_mutex_unlock(&h->change_lock);
  }
  return lost;
}

void pw__health_refresh(pw_runtime_t* rt) {
  for (uint32_t s = 0; s < rt->slice_count; ++s) {
    if (pw_atomic_load_u32_acquire(&rt->slices[s].lost) != 0) {
      (void)pw__health_still_lost(&rt->slices[s]);
    }
  }
}

/* UNAVAILABLE for a launch on lost |part| (change lock held), naming the
 * loss and its cause. */
static pw_status_t pw_health_lost_status(pw_slice_t* part) {
  return pw_status_make(PW_STATUS_UNAVAILABLE, "slice '%s' is lost (loss %u: %s)", part->name,
                        pw_atomic_load_u32_relaxed(&part->losses),
                        part->lost_cause != NULL ? pw_status_message(part->lost_cause) : "?");
}

pw_status_t pw__health_refusal(const pw_device_t* d, const pw_op_t* op) {
  pw_health_t* h = d->slice->runtime->health;
  const pw_slice_t* slice = op->slice;
  pw_status_t refused = NULL;
  pthread_mutex_lock(&h->change_lock);
  if (pw_health_recheck_locked(d->slice)) {
    refused = pw_health_lost_status(d->slice);
  } else {
    for (uint32_t p = 0; p < slice->span_count && refused == NULL; ++p) {
      pw_slice_t* other = slice->span[p];
      if (other != d->slice && pw_health_recheck_locked(other)) {
        refused = pw_status_make(PW_STATUS_ABORTED,
                                 "not launched on slice '%s': the gang's part on slice '%s' is "
                                 "lost (loss %u)",
                                 d->slice->name, other->name,
                                 pw_atomic_load_u32_relaxed(&other->losses));
      }
    }
  }
  pthread_mutex_unlock(&h->change_lock);
  return refused; /* NULL: back meanwhile */
}

pw_status_t pw__buffer_lost(const pw_buffer_obj_t* b, const char* what) {
  pw_slice_t* slice = b->slice;
  if (__builtin_expect(pw_atomic_load_u32_acquire(&slice->losses) == b->losses, 1)) return NULL;
  for (uint32_t p = 0; p < slice->span_count; ++p) {
    if (pw_atomic_load_u32_acquire(&slice->span[p]->lost) != 0) {
      return pw_status_make(PW_STATUS_DATA_LOSS,
                            "%s: its shards lived on slice '%s', which is lost", what,
                            slice->span[p]->name);
    }
  }
  return pw_status_make(PW_STATUS_DATA_LOSS,
                        "%s: its shards lived on slice '%s', lost since it was made (the slice "
                        "is back; the data is not)",
                        what, slice->name);
}

/* ---- listeners ------------------------------------------------------------- */

/* Sets |client|'s entry (fn NULL: clears it). deliver_lock held. */
static pw_status_t pw_health_set_listener(pw_health_t* h, pw_client_t* client,
                                          pw_topology_fn_t fn, void* user) {
  bool delivering = pw_health_delivering == h;
  for (uint32_t i = 0; i < h->listener_count; ++i) {
    pw_health_listener_t* l = &h->listeners[i];
    if (l->client != client) continue;
    if (fn != NULL || delivering) {
      l->fn = fn; /* cleared during a delivery: compacted after it */
      l->user = user;
    } else {
      memmove(l, l + 1, (h->listener_count - i - 1) * sizeof(*l));
      h->listener_count--;
    }
    return NULL;
  }
  if (fn == NULL) return NULL;
  if (h->listener_count == h->listener_capacity) {
    pw_allocator_t a = h->runtime->allocator;
    uint32_t capacity = h->listener_capacity ? 2 * h->listener_capacity : 4;
    pw_health_listener_t* grown = NULL;
    PW_RETURN_IF_ERROR(pw_allocator_calloc_array(a, capacity, sizeof(*grown), 0, (void**)&grown));
    if (h->listener_count) memcpy(grown, h->listeners, h->listener_count * sizeof(*grown));
    pw_allocator_free(a, h->listeners, h->listener_capacity * sizeof(*grown));
    h->listeners = grown;
    h->listener_capacity = capacity;
  }
  h->listeners[h->listener_count++] = (pw_health_listener_t){client, fn, user};
  return NULL;
}

pw_status_t pw_client_set_topology_callback(pw_client_t* client, pw_topology_fn_t fn,
                                            void* user) {
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_client_set_topology_callback: client is NULL");
  }
  pw_health_t* h = client->runtime->health;
  bool delivering = pw_health_delivering == h;
  if (!delivering) pthread_mutex_lock(&h->deliver_lock);
  pw_status_t status = pw_health_set_listener(h, client, fn, user);
  if (!delivering) pthread_mutex_unlock(&h->deliver_lock);
  if (status == NULL && fn != NULL) {
    pthread_mutex_lock(&h->lock);
    pw_health_start_locked(h);
    pthread_mutex_unlock(&h->lock);
  }
  return pw_status_annotate(status, "pw_client_set_topology_callback: client '%s'",
                            client->name);
}

void pw__health_forget(pw_client_t* client) {
  pw_health_t* h = client->runtime->health;
  pthread_mutex_lock(&h->deliver_lock);
  (void)pw_health_set_listener(h, client, NULL, NULL); /* removing cannot fail */
  pthread_mutex_unlock(&h->deliver_lock);
}

/* ---- public calls ------------------------------------------------------------ */

pw_status_t pw_runtime_check_health(pw_runtime_t* runtime, uint32_t* out_changes) {
  if (out_changes != NULL) *out_changes = 0;
  if (runtime == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_runtime_check_health: runtime is NULL");
  }
  uint32_t changes = pw__health_check(runtime);
  if (out_changes != NULL) *out_changes = changes;
  return NULL;
}

/* INVALID_ARGUMENT / OUT_OF_RANGE naming |call| for a bad runtime or slice. */
static pw_status_t pw_health_check_slice_arg(const pw_runtime_t* runtime, uint32_t slice,
                                             const char* call) {
  if (runtime == NULL) return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: runtime is NULL", call);
  if (slice >= runtime->slice_count) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE, "%s: slice %u does not exist (%u slices)", call,
                          slice, runtime->slice_count);
  }
  return NULL;
}

pw_status_t pw_runtime_lose_slice(pw_runtime_t* runtime, uint32_t slice, const char* reason) {
  PW_RETURN_IF_ERROR(pw_health_check_slice_arg(runtime, slice, "pw_runtime_lose_slice"));
  pw_slice_t* s = &runtime->slices[slice];
  (void)pw__health_lose(s,
                        pw_status_make(PW_STATUS_UNAVAILABLE, "slice '%s' lost by the host: %s",
                                       s->name, reason != NULL ? reason : "(no reason given)"),
                        false);
  return NULL;
}

pw_status_t pw_runtime_restore_slice(pw_runtime_t* runtime, uint32_t slice) {
  PW_RETURN_IF_ERROR(pw_health_check_slice_arg(runtime, slice, "pw_runtime_restore_slice"));
  pw_slice_t* s = &runtime->slices[slice];
  pw_health_t* h = runtime->health;
  pthread_mutex_lock(&h->change_lock);
  uint32_t failed = pw_health_failed_device(s);
  pw_status_t status = NULL;
  if (failed != UINT32_MAX) {
    status = pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                            "pw_runtime_restore_slice: device %u of slice '%s' (backend '%s' "
                            "device %u) still reports FAILED",
                            failed, s->name, pw__backend_name(s->backend), s->group_devices[failed]);
  } else {
    (void)pw_health_back_locked(s);
  }
  pthread_mutex_unlock(&h->change_lock);
  return status;
}
