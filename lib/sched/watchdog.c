/* Launch deadlines: the watchdog thread that fails a launch its backend
 * did not complete in time, and pw_client_destroy's sweep of launches
 * lost for good.
 *
 * A launch with a deadline (its run's, or the runtime's default) stores
 * it in its completion token (pw_token_set_deadline, at launch); no
 * deadline costs the launch one store and no clock read. The first such
 * launch starts the runtime's watchdog, which wakes every tenth of the
 * shortest deadline it was given (at least 50 us, at most 100 ms), scans
 * every launch token of the runtime's devices (each device's
 * PW_DEVICE_TOKENS and its queue tokens), and expires those still
 * outstanding past their deadline: it completes them with
 * DEADLINE_EXCEEDED through the same claim as the backend's done, so
 * whichever comes first wins and the other is dropped (a late done of an
 * expired launch is logged as a completion after the first, and
 * ignored). The completion path names node, slice and device.
 *
 * A token's state is read before its deadline: a use armed after the
 * read has a state the claim no longer matches, so a stale deadline
 * never expires a newer launch. pw_client_destroy's sweep
 * (pw__dispatch_snapshot_launches / pw__dispatch_fail_stale) works the
 * same way without deadlines: a token whose state is the same use,
 * outstanding, after the whole drain wait, was never completed. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "plugin/backend_call.h"
#include "sched/dispatch_internal.h"
#include "sched/token.h"

typedef struct pw_watchdog_s {
  pw_runtime_t* runtime;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool stop;
  pw_atomic_u64_t period_ns;
} pw_watchdog_t;

enum { PW_WATCHDOG_MIN_PERIOD_NS = 50 * 1000, PW_WATCHDOG_MAX_PERIOD_NS = 100 * 1000 * 1000 };

/* Calls |fn| for every launch token of |rt|'s physical slices. */
static void pw_watchdog_each_token(pw_runtime_t* rt,
                                   void (*fn)(pw_completion_token_t* t, void* ctx), void* ctx) {
  for (uint32_t s = 0; s < rt->slice_count; ++s) {
    pw_slice_t* slice = &rt->slices[s];
    for (uint32_t i = 0; i < slice->lane_count; ++i) {
      pw_device_t* d = &slice->devices[i];
      for (uint32_t k = 0; k < PW_DEVICE_TOKENS; ++k) fn(&d->tokens[k], ctx);
      for (uint32_t k = 0; k < 2 * d->queue_depth; ++k) fn(&d->queue_tokens[k], ctx);
    }
  }
}

/* The |done_user| of |t|'s use in |state|. */
static void* pw_watchdog_user(pw_completion_token_t* t, uint32_t state) {
  return (void*)((uintptr_t)t + (state >> 1));
}

static void pw_watchdog_check(pw_completion_token_t* t, void* ctx) {
  uint64_t now = *(const uint64_t*)ctx;
  uint32_t state = pw_atomic_load_u32_acquire(&t->state);
  if (state & 1) return;
  uint64_t deadline = pw_atomic_load_u64_relaxed(&t->deadline);
  if (deadline == 0 || now < deadline) return;
  pw_slice_t* slice = t->device->slice;
  if (pw_atomic_load_u32_acquire(&slice->lost) != 0) {
    /* The grace a loss gave it (health.c), or a deadline that passed
     * since: the backend did not fail it. */
    pw__dispatch_expire(pw_watchdog_user(t, state),
                        pw_status_make(PW_STATUS_UNAVAILABLE,
                                       "slice '%s' is lost and backend '%s' did not complete "
                                       "the launch outstanding there",
                                       slice->name, pw__backend_name(slice->backend)));
    return;
  }
  if (slice->runtime->deadline_loses_slice) {
    (void)pw__health_lose(slice,
                          pw_status_make(PW_STATUS_UNAVAILABLE,
                                         "a launch on device %u did not complete by its "
                                         "deadline (backend '%s'; %.3f ms late)",
                                         t->device->mesh_index, pw__backend_name(slice->backend),
                                         (double)(now - deadline) / 1e6),
                          false);
  }
  pw__dispatch_expire(pw_watchdog_user(t, state),
                      pw_status_make(PW_STATUS_DEADLINE_EXCEEDED,
                                     "the launch did not complete by its deadline (backend "
                                     "'%s'; %.3f ms late)",
                                     pw__backend_name(slice->backend),
                                     (double)(now - deadline) / 1e6));
}

static void* pw_watchdog_main(void* arg) {
  pw_watchdog_t* w = arg;
  pthread_mutex_lock(&w->lock);
  while (!w->stop) {
    uint64_t period = pw_atomic_load_u64_relaxed(&w->period_ns);
    pw_time_t until = pw_clock_now() + (pw_time_t)period;
    struct timespec ts = {(time_t)(until / 1000000000), (long)(until % 1000000000)};
    int rc = pthread_cond_timedwait(&w->cond, &w->lock, &ts);
    if (w->stop) break;
    if (rc != ETIMEDOUT && rc != 0) continue;
    pthread_mutex_unlock(&w->lock);
    uint64_t now = (uint64_t)pw_clock_now();
    pw_watchdog_each_token(w->runtime, pw_watchdog_check, &now);
    pthread_mutex_lock(&w->lock);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

/* Starts |rt|'s watchdog (once; under watchdog_lock). NULL if it cannot:
 * logged, and deadlines are not enforced. */
static pw_watchdog_t* pw_watchdog_start(pw_runtime_t* rt) {
  pthread_mutex_lock(&rt->watchdog_lock);
  pw_watchdog_t* w = pw_atomic_load_ptr_acquire(&rt->watchdog);
  if (w == NULL) {
    pw_status_t status = pw_allocator_calloc(rt->allocator, sizeof(*w), 0, (void**)&w);
    if (status == NULL) {
      w->runtime = rt;
      pw_atomic_init_u64(&w->period_ns, PW_WATCHDOG_MAX_PERIOD_NS);
      pthread_mutex_init(&w->lock, NULL);
      pthread_condattr_t attr;
      pthread_condattr_init(&attr);
      pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* pw_clock_now's */
      pthread_cond_init(&w->cond, &attr);
      pthread_condattr_destroy(&attr);
      if (pthread_create(&w->thread, NULL, pw_watchdog_main, w) != 0) {
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        pw_allocator_free(rt->allocator, w, sizeof(*w));
        w = NULL;
        status = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "pthread_create failed");
      }
    }
    if (status != NULL) {
      char text[160];
      pw_status_format(status, text, sizeof(text));
      pw_status_free(status);
      pw_log(&rt->logger, PW_LOG_ERROR, "dispatch",
             "cannot start the launch watchdog (%s): launch deadlines are not enforced", text);
    } else {
      pw_atomic_store_ptr_release(&rt->watchdog, w);
    }
  }
  pthread_mutex_unlock(&rt->watchdog_lock);
  return w;
}

void pw__watchdog_arm(pw_completion_token_t* t, uint64_t ns) {
  pw_runtime_t* rt = t->device->slice->runtime;
  pw_watchdog_t* w = pw_atomic_load_ptr_acquire(&rt->watchdog);
  if (w == NULL) w = pw_watchdog_start(rt);
  uint64_t now = (uint64_t)pw_clock_now();
  pw_atomic_store_u64_relaxed(&t->deadline, ns > UINT64_MAX - now ? UINT64_MAX : now + ns);
  if (w == NULL) return;
  /* Wake often enough to be within a tenth of the shortest deadline. */
  uint64_t period = ns / 10;
  if (period < PW_WATCHDOG_MIN_PERIOD_NS) period = PW_WATCHDOG_MIN_PERIOD_NS;
  uint64_t old = pw_atomic_load_u64_relaxed(&w->period_ns);
  while (period < old && !pw_atomic_cas_u64(&w->period_ns, &old, period)) {
  }
}

void pw__watchdog_stop(pw_runtime_t* rt) {
  pw_watchdog_t* w = pw_atomic_load_ptr_acquire(&rt->watchdog);
  if (w == NULL) return;
  pthread_mutex_lock(&w->lock);
  w->stop = true;
  pthread_cond_signal(&w->cond);
  pthread_mutex_unlock(&w->lock);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->cond);
  pthread_mutex_destroy(&w->lock);
  pw_atomic_store_ptr_relaxed(&rt->watchdog, NULL);
  pw_allocator_free(rt->allocator, w, sizeof(*w));
}

/* ---- pw_client_destroy's sweep ------------------------------------------- */

typedef struct pw_snapshot_walk_s {
  pw_launch_snapshot_t* snap;
  size_t index;   /* of the token visited */
  size_t from;    /* first index this pass takes */
  size_t until;   /* first index it does not */
} pw_snapshot_walk_t;

static void pw_snapshot_count(pw_completion_token_t* t, void* ctx) {
  (void)t;
  ++*(size_t*)ctx;
}

static void pw_snapshot_take(pw_completion_token_t* t, void* ctx) {
  pw_snapshot_walk_t* w = ctx;
  size_t index = w->index++;
  pw_launch_snapshot_t* snap = w->snap;
  if (index < w->from || index >= w->until || snap->count == PW_LAUNCH_SNAPSHOT_MAX) return;
  uint32_t state = pw_atomic_load_u32_acquire(&t->state);
  snap->next = index + 1;
  if (state & 1) return;
  snap->entries[snap->count].token = t;
  snap->entries[snap->count].state = state;
  snap->count++;
}

void pw__dispatch_snapshot_launches(pw_runtime_t* rt, pw_launch_snapshot_t* snap) {
  size_t total = 0;
  pw_watchdog_each_token(rt, pw_snapshot_count, &total);
  size_t start = total != 0 ? snap->next % total : 0;
  snap->count = 0;
  /* From |start| to the end, then from the beginning. */
  pw_snapshot_walk_t walk = {snap, 0, start, total};
  pw_watchdog_each_token(rt, pw_snapshot_take, &walk);
  if (snap->count < PW_LAUNCH_SNAPSHOT_MAX && start != 0) {
    walk = (pw_snapshot_walk_t){snap, 0, 0, start};
    pw_watchdog_each_token(rt, pw_snapshot_take, &walk);
  }
}

uint32_t pw__dispatch_fail_stale(pw_runtime_t* rt, const pw_launch_snapshot_t* snap,
                                 uint64_t waited_ns) {
  uint32_t failed = 0;
  for (size_t i = 0; i < snap->count; ++i) {
    pw_completion_token_t* t = snap->entries[i].token;
    uint32_t state = snap->entries[i].state;
    if (pw_atomic_load_u32_acquire(&t->state) != state) continue; /* completed since */
    const pw_slice_t* slice = t->device->slice;
    pw_log(&rt->logger, PW_LOG_ERROR, "dispatch",
           "pw_client_destroy: a launch on slice '%s' device %u (backend '%s') was still "
           "outstanding after %.3f s: failed with DEADLINE_EXCEEDED",
           slice->name, t->device->mesh_index, pw__backend_name(slice->backend),
           (double)waited_ns / 1e9);
    pw__dispatch_expire(pw_watchdog_user(t, state),
                        pw_status_make(PW_STATUS_DEADLINE_EXCEEDED,
                                       "the launch was still outstanding when its client was "
                                       "destroyed, %.3f s later (backend '%s' lost it?)",
                                       (double)waited_ns / 1e9,
                                       pw__backend_name(slice->backend)));
    failed++;
  }
  return failed;
}
