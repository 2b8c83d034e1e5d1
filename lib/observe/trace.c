/* The trace recorder (include/pathways/trace.h): an observer (observe.h)
 * that keeps each event it is handed in the reporting thread's ring, and
 * the public calls that start, stop and write a trace.
 *
 * Rings: each thread that records gets one the first time (found through
 * a thread-local cache keyed by the trace's serial, else under the
 * trace's lock), written by that thread alone; a full ring overwrites its
 * oldest events. The ring headers live as long as the trace object (to
 * the runtime's destroy: a thread may still be about to record into a
 * trace just stopped); their records go when the trace is replaced.
 *
 * Stopping is a Dekker handshake with every writer: a writer raises its
 * ring's |writing|, fences, and records only if the trace is still on;
 * stop clears |on|, fences, and waits for every ring's |writing| to fall.
 * After that nobody writes a record, so writing reads them unlocked. The
 * fence is asymmetric where Linux offers membarrier(2) (private
 * expedited): writers only keep the compiler from reordering, and stop
 * makes every running thread of the process execute a full barrier (a
 * writer's fence cost most of what recording cost: measured with
 * `pw-bench shapes --trace`, docs/observability.md). Elsewhere writers
 * fence. */
#define _DEFAULT_SOURCE 1 /* syscall(2) */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "observe/observe.h"
#include "observe/trace_internal.h"
#include "observe/trace_record.h"
#include "pathways/clock.h"
#include "pathways/struct_size.h"
#include "pathways/trace.h"
#include "plugin/backend_call.h"

/* Whether membarrier(2) private expedited is registered for this process
 * (0 unknown, 1 yes, 2 no; decided at the first start, never changes). */
static pw_atomic_u32_t pw_trace_membarrier;

static bool pw_trace_asymmetric(void) {
  uint32_t known = pw_atomic_load_u32_acquire(&pw_trace_membarrier);
  if (known != 0) return known == 1;
  bool ok = false;
#if defined(__linux__) && defined(SYS_membarrier)
  ok = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
#endif
  pw_atomic_store_u32_release(&pw_trace_membarrier, ok ? 1 : 2);
  return ok;
}

/* The stopper's side of the handshake: a full barrier on every thread. */
static void pw_trace_barrier_all(bool asymmetric) {
#if defined(__linux__) && defined(SYS_membarrier)
  if (asymmetric && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) return;
#endif
  (void)asymmetric;
  pw_atomic_fence_seq_cst();
}

static _Thread_local struct {
  uint64_t serial;
  pw_trace_ring_t* ring;
} pw_trace_tls;

static uint64_t pw_trace_now(const pw_trace_t* t) {
  return t->clock != NULL ? t->clock(t->clock_user) : (uint64_t)pw_clock_now();
}

/* This thread's ring of |t|, made on its first record. */
static pw_trace_ring_t* pw_trace_ring(pw_trace_t* t) {
  if (pw_trace_tls.serial == t->serial) return pw_trace_tls.ring;
  pthread_t self = pthread_self();
  pthread_mutex_lock(&t->lock);
  pw_trace_ring_t* r = t->rings;
  while (r != NULL && !pthread_equal(r->thread, self)) r = r->next;
  if (r == NULL) {
    pw_allocator_t a = t->runtime->allocator;
    pw_status_t status = pw_allocator_calloc(a, sizeof(*r), PW_CACHE_LINE, (void**)&r);
    if (status == NULL) {
      status = pw_allocator_malloc(a, (size_t)t->capacity * sizeof(pw_trace_record_t), 0,
                                   (void**)&r->records);
      pw_status_free(status); /* records NULL: this thread's events are lost, counted */
      r->thread = self;
      r->index = t->ring_count++;
      r->next = t->rings;
      t->rings = r;
    } else {
      pw_status_free(status);
      r = NULL;
    }
  }
  pthread_mutex_unlock(&t->lock);
  if (r != NULL) {
    pw_trace_tls.serial = t->serial;
    pw_trace_tls.ring = r;
  }
  return r;
}

static void pw_trace_copy_name(char* out, const char* name) {
  size_t n = 0;
  if (name != NULL) {
    while (n < PW_TRACE_NAME_MAX - 1 && name[n] != '\0') ++n;
    memcpy(out, name, n);
  }
  out[n] = '\0';
}

static void pw_trace_record(pw_observer_t* self, const pw_obs_event_t* e) {
  pw_trace_t* t = (pw_trace_t*)self;
  if (!pw_atomic_load_u32_relaxed(&t->on)) return;
  pw_trace_ring_t* r = pw_trace_ring(t);
  if (r == NULL) {
    pw_atomic_fetch_add_u64(&t->lost, 1);
    return;
  }
  pw_atomic_store_u32_relaxed(&r->writing, 1);
  if (t->asymmetric) {
    atomic_signal_fence(memory_order_seq_cst); /* stop's membarrier is the fence */
  } else {
    pw_atomic_fence_seq_cst();
  }
  /* Records are read only from here: once on, stop has not passed its
   * fence, so a restart cannot have freed them. */
  if (pw_atomic_load_u32_relaxed(&t->on) && r->records == NULL) {
    pw_atomic_fetch_add_u64(&t->lost, 1);
  } else if (pw_atomic_load_u32_relaxed(&t->on)) {
    uint64_t head = pw_atomic_load_u64_relaxed(&r->head);
    pw_trace_record_t* rec = &r->records[head & (t->capacity - 1)];
    /* A host clock of its own: times are stamped on it, and what closes
     * an earlier time on the host clock cannot say so (since_ns 0). */
    rec->ts_ns = t->clock != NULL ? pw_trace_now(t) : e->ts_ns;
    rec->since_ns = t->clock != NULL ? 0 : e->since_ns;
    rec->exec = e->exec;
    rec->gang = e->gang;
    rec->from_gang = e->from_gang;
    rec->start_ns = e->start_ns;
    rec->end_ns = e->end_ns;
    rec->bytes = e->bytes;
    rec->kind = e->kind;
    rec->flags = e->flags;
    rec->slice = e->slice;
    rec->device = e->device;
    rec->count = e->count;
    rec->client = e->client;
    rec->node = e->node;
    rec->status_code = e->status_code;
    rec->thread = r->index;
    pw_trace_copy_name(rec->name, e->name);
    pw_atomic_store_u64_relaxed(&r->head, head + 1);
  }
  pw_atomic_store_u32_release(&r->writing, 0);
}

static void pw_trace_free_records(pw_trace_t* t) {
  for (pw_trace_ring_t* r = t->rings; r != NULL; r = r->next) {
    pw_allocator_free(t->runtime->allocator, r->records,
                      (size_t)t->capacity * sizeof(pw_trace_record_t));
    r->records = NULL;
  }
}

static void pw_trace_destroy(pw_observer_t* self) {
  pw_trace_t* t = (pw_trace_t*)self;
  pw_allocator_t a = t->runtime->allocator;
  pw_trace_free_records(t);
  while (t->rings != NULL) {
    pw_trace_ring_t* next = t->rings->next;
    pw_allocator_free(a, t->rings, sizeof(*t->rings));
    t->rings = next;
  }
  pthread_mutex_destroy(&t->lock);
  pw_allocator_free(a, t, sizeof(*t));
}

/* The trace kept: the one recording, or the last one stopped. */
static pw_trace_t* pw_trace_kept(pw_observe_t* o) { return (pw_trace_t*)o->kept_trace; }

static pw_status_t pw_trace_check_options(const pw_trace_options_t* options, uint32_t* capacity) {
  *capacity = PW_TRACE_DEFAULT_EVENTS;
  if (options == NULL) return NULL;
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(options, pw_trace_options_t, PW_TRACE_OPTIONS_SIZE_V1,
                                     "pw_runtime_trace_start"));
  if (options->events_per_thread > PW_TRACE_MAX_EVENTS) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_runtime_trace_start: events_per_thread %u is more than %u",
                          options->events_per_thread, PW_TRACE_MAX_EVENTS);
  }
  if (options->clock == NULL && options->clock_user != NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_runtime_trace_start: clock_user is set but clock is NULL");
  }
  if (options->events_per_thread != 0) {
    uint32_t c = 1;
    while (c < options->events_per_thread) c <<= 1;
    *capacity = c;
  }
  return NULL;
}

static pw_status_t pw_trace_start(pw_runtime_t* runtime, const pw_trace_options_t* options) {
  uint32_t capacity = 0;
  PW_RETURN_IF_ERROR(pw_trace_check_options(options, &capacity));
  pw_observe_t* o = runtime->observer;
  pthread_mutex_lock(&o->lock);
  bool recording = pw_atomic_load_ptr_relaxed(&o->trace) != NULL;
  pthread_mutex_unlock(&o->lock);
  if (recording) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "pw_runtime_trace_start: a trace is recording already (stop it first)");
  }
  pw_trace_t* t = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(runtime->allocator, sizeof(*t), 0, (void**)&t));
  static pw_atomic_u64_t serials; /* 0 is the empty cache's */
  t->base.record = pw_trace_record;
  t->base.destroy = pw_trace_destroy;
  t->runtime = runtime;
  t->serial = pw_atomic_fetch_add_u64(&serials, 1) + 1;
  t->capacity = capacity;
  t->asymmetric = pw_trace_asymmetric();
  if (options != NULL && options->clock != NULL) {
    t->clock = options->clock;
    t->clock_user = options->clock_user;
  }
  const char* clock_name = options != NULL && options->clock_name != NULL ? options->clock_name
                           : t->clock != NULL ? "host clock" : "host monotonic";
  snprintf(t->clock_name, sizeof(t->clock_name), "%s", clock_name);
  pthread_mutex_init(&t->lock, NULL);
  t->origin_ns = pw_trace_now(t);
  pw_atomic_store_u32_relaxed(&t->on, 1);
  pthread_mutex_lock(&o->lock);
  pw_trace_t* old = pw_trace_kept(o);
  o->kept_trace = &t->base;
  pthread_mutex_unlock(&o->lock);
  if (old != NULL) {
    pw_trace_free_records(old); /* stopped: nobody writes them */
    pw__observe_retire(o, &old->base);
  }
  pw__observe_install(o, &o->trace, &t->base);
  return NULL;
}

pw_status_t pw_runtime_trace_start(pw_runtime_t* runtime, const pw_trace_options_t* options) {
  if (runtime == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_runtime_trace_start: runtime is NULL");
  }
  pthread_mutex_lock(&runtime->observer->control_lock);
  pw_status_t status = pw_trace_start(runtime, options);
  pthread_mutex_unlock(&runtime->observer->control_lock);
  return status;
}

static pw_status_t pw_trace_stop(pw_observe_t* o) {
  pthread_mutex_lock(&o->lock);
  pw_trace_t* t = pw_atomic_load_ptr_relaxed(&o->trace);
  pthread_mutex_unlock(&o->lock);
  if (t == NULL) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "pw_runtime_trace_stop: no trace is recording");
  }
  pw__observe_install(o, &o->trace, NULL);
  pw_atomic_store_u32_relaxed(&t->on, 0);
  pw_trace_barrier_all(t->asymmetric);
  pthread_mutex_lock(&t->lock);
  for (pw_trace_ring_t* r = t->rings; r != NULL; r = r->next) {
    for (uint32_t spins = 0; pw_atomic_load_u32_acquire(&r->writing) != 0; ++spins) {
      if (spins > 64) sched_yield();
    }
  }
  pthread_mutex_unlock(&t->lock);
  return NULL;
}

pw_status_t pw_runtime_trace_stop(pw_runtime_t* runtime) {
  if (runtime == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_runtime_trace_stop: runtime is NULL");
  }
  pthread_mutex_lock(&runtime->observer->control_lock);
  pw_status_t status = pw_trace_stop(runtime->observer);
  pthread_mutex_unlock(&runtime->observer->control_lock);
  return status;
}

uint64_t pw__trace_ring_kept(const pw_trace_t* t, pw_trace_ring_t* r) {
  if (r->records == NULL) return 0;
  uint64_t head = pw_atomic_load_u64_relaxed(&r->head);
  return head < t->capacity ? head : t->capacity;
}

void pw__trace_counts(pw_trace_t* t, pw_trace_stats_t* s) {
  pthread_mutex_lock(&t->lock);
  for (pw_trace_ring_t* r = t->rings; r != NULL; r = r->next) {
    uint64_t head = pw_atomic_load_u64_relaxed(&r->head); /* while recording: a moment's */
    uint64_t kept = r->records == NULL ? 0 : head < t->capacity ? head : t->capacity;
    s->events += kept;
    s->dropped += head - kept;
  }
  s->threads = t->ring_count;
  pthread_mutex_unlock(&t->lock);
  s->dropped += pw_atomic_load_u64_relaxed(&t->lost);
  s->recording = pw_atomic_load_u32_relaxed(&t->on);
}

pw_status_t pw_runtime_trace_stats(pw_runtime_t* runtime, pw_trace_stats_t* out_stats) {
  if (runtime == NULL || out_stats == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_runtime_trace_stats: %s is NULL",
                          runtime == NULL ? "runtime" : "out_stats");
  }
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(out_stats, pw_trace_stats_t, PW_TRACE_STATS_SIZE_V1,
                                     "pw_runtime_trace_stats"));
  pw_observe_t* o = runtime->observer;
  pthread_mutex_lock(&o->control_lock); /* a start frees the kept trace's records */
  pthread_mutex_lock(&o->lock);
  pw_trace_t* t = (pw_trace_t*)pw_trace_kept(o);
  pthread_mutex_unlock(&o->lock);
  if (t == NULL) {
    pthread_mutex_unlock(&o->control_lock);
    return pw_status_make(PW_STATUS_NOT_FOUND, "pw_runtime_trace_stats: no trace was started");
  }
  pw_trace_stats_t s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  pw__trace_counts(t, &s);
  pthread_mutex_unlock(&o->control_lock);
  pw_struct_fill(out_stats, &s, sizeof(s));
  return NULL;
}
