/* The sim backend's event queue: a binary min-heap of decided completions
 * ordered by (virtual time, gang id, device, arrival sequence), delivered
 * in that order by the host's stepping calls (MANUAL) or by a simulator
 * thread (THREADED). INLINE backends never queue.
 *
 * A part reserves its heap slot when launch accepts it, so a push (which
 * may happen for a whole collective group at once, on whatever thread
 * completes it) never allocates and never fails. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "backends/sim/sim_internal.h"

static bool pw_sim_part_before(const pw_sim__part_t* a, const pw_sim__part_t* b) {
  if (a->time != b->time) return a->time < b->time;
  if (a->gang_id != b->gang_id) return a->gang_id < b->gang_id;
  if (a->device != b->device) return a->device < b->device;
  return a->seq < b->seq;
}

/* Heap operations; queue_mutex held. */
static void pw_sim_heap_push(pw_sim__backend_t* b, pw_sim__part_t* part) {
  size_t i = b->heap_count++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!pw_sim_part_before(part, b->heap[parent])) break;
    b->heap[i] = b->heap[parent];
    i = parent;
  }
  b->heap[i] = part;
}

static pw_sim__part_t* pw_sim_heap_pop(pw_sim__backend_t* b) {
  pw_sim__part_t* top = b->heap[0];
  pw_sim__part_t* last = b->heap[--b->heap_count];
  size_t n = b->heap_count;
  size_t i = 0;
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && pw_sim_part_before(b->heap[child + 1], b->heap[child])) ++child;
    if (!pw_sim_part_before(b->heap[child], last)) break;
    b->heap[i] = b->heap[child];
    i = child;
  }
  if (n > 0) b->heap[i] = last;
  return top;
}

pw_status_t pw_sim__queue_reserve(pw_sim__backend_t* b) {
  pthread_mutex_lock(&b->queue_mutex);
  size_t need = b->heap_count + b->heap_reserved + 1;
  if (need > b->heap_capacity) {
    size_t capacity = b->heap_capacity ? b->heap_capacity * 2 : 64;
    while (capacity < need) capacity *= 2;
    void* grown = NULL;
    pw_status_t status = pw_allocator_malloc(b->allocator, capacity * sizeof(pw_sim__part_t*),
                                             0, &grown);
    if (status != NULL) {
      pthread_mutex_unlock(&b->queue_mutex);
      return pw_status_annotate(status, "sim event queue growing to %zu entries", capacity);
    }
    if (b->heap_count > 0) memcpy(grown, b->heap, b->heap_count * sizeof(pw_sim__part_t*));
    if (b->heap != NULL) {
      pw_allocator_free(b->allocator, b->heap, b->heap_capacity * sizeof(pw_sim__part_t*));
    }
    b->heap = grown;
    b->heap_capacity = capacity;
  }
  b->heap_reserved++;
  pthread_mutex_unlock(&b->queue_mutex);
  return NULL;
}

void pw_sim__queue_unreserve(pw_sim__backend_t* b) {
  pthread_mutex_lock(&b->queue_mutex);
  b->heap_reserved--;
  pthread_mutex_unlock(&b->queue_mutex);
}

void pw_sim__queue_push(pw_sim__backend_t* b, pw_sim__part_t* part) {
  pthread_mutex_lock(&b->queue_mutex);
  part->seq = b->next_seq++;
  b->heap_reserved--;
  pw_sim_heap_push(b, part);
  if (b->mode == PW_SIM_MODE_THREADED) pthread_cond_signal(&b->queue_wake);
  pthread_mutex_unlock(&b->queue_mutex);
}

uint64_t pw_sim__queue_length(pw_sim__backend_t* b) {
  if (b->mode == PW_SIM_MODE_INLINE) return 0;
  pthread_mutex_lock(&b->queue_mutex);
  uint64_t n = b->heap_count + b->delivering;
  pthread_mutex_unlock(&b->queue_mutex);
  return n;
}

/*---------------------------------------------------------------------------
 * Parts to reuse: every queued, collective or ordered launch keeps a part
 * until delivery; a list of freed ones spares the allocator (and its
 * failure) on that path. The list is capped so a burst does not pin its
 * peak for the backend's life.
 *-------------------------------------------------------------------------*/

#define PW_SIM_FREE_PARTS_MAX 4096u

static void pw_sim_parts_lock(pw_sim__backend_t* b) {
  for (;;) {
    if (atomic_exchange_explicit(&b->parts_lock, 1u, memory_order_acquire) == 0u) return;
    while (atomic_load_explicit(&b->parts_lock, memory_order_relaxed) != 0u) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }
}

static void pw_sim_parts_unlock(pw_sim__backend_t* b) {
  atomic_store_explicit(&b->parts_lock, 0u, memory_order_release);
}

pw_status_t pw_sim__part_alloc(pw_sim__backend_t* b, pw_sim__part_t** out) {
  *out = NULL;
  pw_sim_parts_lock(b);
  pw_sim__part_t* part = b->free_parts;
  if (part != NULL) {
    b->free_parts = part->next;
    b->free_count--;
  }
  pw_sim_parts_unlock(b);
  if (part != NULL) {
    memset(part, 0, sizeof(*part));
    *out = part;
    return NULL;
  }
  void* memory = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(b->allocator, sizeof(pw_sim__part_t),
                                         alignof(pw_sim__part_t), &memory));
  *out = memory;
  return NULL;
}

void pw_sim__part_recycle(pw_sim__backend_t* b, pw_sim__part_t* part) {
  pw_sim_parts_lock(b);
  bool keep = !b->parts_closed && b->free_count < PW_SIM_FREE_PARTS_MAX;
  if (keep) {
    part->next = b->free_parts;
    b->free_parts = part;
    b->free_count++;
  }
  pw_sim_parts_unlock(b);
  if (!keep) pw_allocator_free(b->allocator, part, sizeof(*part));
}

void pw_sim__parts_shutdown(pw_sim__backend_t* b) {
  pw_sim_parts_lock(b);
  pw_sim__part_t* list = b->free_parts;
  b->free_parts = NULL;
  b->free_count = 0;
  b->parts_closed = true;
  pw_sim_parts_unlock(b);
  while (list != NULL) {
    pw_sim__part_t* next = list->next;
    pw_allocator_free(b->allocator, list, sizeof(*list));
    list = next;
  }
}

bool pw_sim__queue_is_sim_thread(pw_sim__backend_t* b) {
  return b->thread_started && pthread_equal(pthread_self(), b->thread);
}

/* Pops the earliest part if its time is <= |limit|; queue_mutex held. */
static pw_sim__part_t* pw_sim_take(pw_sim__backend_t* b, uint64_t limit) {
  if (b->heap_count == 0 || b->heap[0]->time > limit) return NULL;
  b->delivering++;
  return pw_sim_heap_pop(b);
}

/* Delivers |part| (taken with pw_sim_take) and settles the counters. */
static void pw_sim_deliver_taken(pw_sim__backend_t* b, pw_sim__part_t* part) {
  if (b->mode == PW_SIM_MODE_MANUAL) pw_sim__raise(&b->now, part->time);
  pw_sim__deliver(b, part);
  pthread_mutex_lock(&b->queue_mutex);
  b->delivering--;
  if (b->heap_count == 0 && b->delivering == 0) pthread_cond_broadcast(&b->queue_idle);
  pthread_mutex_unlock(&b->queue_mutex);
}

static void* pw_sim_thread_main(void* arg) {
  pw_sim__backend_t* b = arg;
  pthread_mutex_lock(&b->queue_mutex);
  for (;;) {
    while (b->heap_count == 0 && !b->stopping) pthread_cond_wait(&b->queue_wake, &b->queue_mutex);
    pw_sim__part_t* part = pw_sim_take(b, PW_SIM_TIME_NEVER);
    if (part == NULL) break; /* stopping and drained */
    pthread_mutex_unlock(&b->queue_mutex);
    pw_sim_deliver_taken(b, part);
    pthread_mutex_lock(&b->queue_mutex);
  }
  pthread_mutex_unlock(&b->queue_mutex);
  return NULL;
}

pw_status_t pw_sim__queue_init(pw_sim__backend_t* b) {
  if (b->mode != PW_SIM_MODE_THREADED) return NULL;
  int rc = pthread_create(&b->thread, NULL, pw_sim_thread_main, b);
  if (rc != 0) {
    return pw_status_make(rc == EAGAIN ? PW_STATUS_RESOURCE_EXHAUSTED : PW_STATUS_INTERNAL,
                          "sim backend: could not start the simulator thread (%s)",
                          strerror(rc));
  }
  b->thread_started = true;
  return NULL;
}

void pw_sim__queue_shutdown(pw_sim__backend_t* b) {
  if (b->thread_started) {
    pthread_mutex_lock(&b->queue_mutex);
    b->stopping = true;
    pthread_cond_broadcast(&b->queue_wake);
    pthread_mutex_unlock(&b->queue_mutex);
    pthread_join(b->thread, NULL);
    b->thread_started = false;
  }
  /* MANUAL: what the host never stepped to is delivered CANCELLED. */
  for (;;) {
    pthread_mutex_lock(&b->queue_mutex);
    pw_sim__part_t* part = pw_sim_take(b, PW_SIM_TIME_NEVER);
    pthread_mutex_unlock(&b->queue_mutex);
    if (part == NULL) break;
    pw_status_free(part->status);
    part->status = pw_status_make(PW_STATUS_CANCELLED,
                                  "sim backend destroyed before op '%s' (gang %llu) on device "
                                  "%u completed at virtual time %llu ns",
                                  part->executable->program.name,
                                  (unsigned long long)part->gang_id, part->device,
                                  (unsigned long long)part->time);
    part->kind = PW_SIM_EVENT_CANCELLED;
    pw_sim_deliver_taken(b, part);
  }
  if (b->heap != NULL) {
    pw_allocator_free(b->allocator, b->heap, b->heap_capacity * sizeof(pw_sim__part_t*));
    b->heap = NULL;
  }
  b->heap_capacity = 0;
}

/*---------------------------------------------------------------------------
 * Stepping
 *-------------------------------------------------------------------------*/

static pw_status_t pw_sim_stepping(pw_backend_t backend, const char* who,
                                   pw_sim__backend_t** out) {
  pw_sim__backend_t* b = pw_sim__from_backend(backend);
  *out = b;
  if (b == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: not a sim backend", who);
  }
  if (b->mode == PW_SIM_MODE_THREADED) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "%s: the backend is THREADED (its simulator thread delivers)", who);
  }
  if (pw_sim__in_done_callback()) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "%s: called from a done callback (step from the host's own loop)",
                          who);
  }
  return NULL;
}

/* Delivers up to |max_count| parts with time <= |limit|. */
static uint64_t pw_sim_run(pw_sim__backend_t* b, uint64_t limit, uint64_t max_count) {
  uint64_t delivered = 0;
  pthread_mutex_lock(&b->step_mutex);
  while (delivered < max_count) {
    pthread_mutex_lock(&b->queue_mutex);
    pw_sim__part_t* part = pw_sim_take(b, limit);
    pthread_mutex_unlock(&b->queue_mutex);
    if (part == NULL) break;
    pw_sim_deliver_taken(b, part);
    ++delivered;
  }
  pthread_mutex_unlock(&b->step_mutex);
  return delivered;
}

pw_status_t pw_sim_backend_run_until(pw_backend_t backend, pw_sim_time_t time,
                                     uint64_t* out_delivered) {
  if (out_delivered != NULL) *out_delivered = 0;
  pw_sim__backend_t* b = NULL;
  PW_RETURN_IF_ERROR(pw_sim_stepping(backend, "pw_sim_backend_run_until", &b));
  if (time >= PW_SIM_TIME_NOW) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_sim_backend_run_until: time %llu is not a virtual time (use "
                          "pw_sim_backend_run_all)",
                          (unsigned long long)time);
  }
  uint64_t delivered = b->mode == PW_SIM_MODE_MANUAL ? pw_sim_run(b, time, UINT64_MAX) : 0;
  pw_sim__raise(&b->now, time);
  if (out_delivered != NULL) *out_delivered = delivered;
  return NULL;
}

pw_status_t pw_sim_backend_run_all(pw_backend_t backend, uint64_t* out_delivered) {
  if (out_delivered != NULL) *out_delivered = 0;
  pw_sim__backend_t* b = NULL;
  PW_RETURN_IF_ERROR(pw_sim_stepping(backend, "pw_sim_backend_run_all", &b));
  uint64_t delivered =
      b->mode == PW_SIM_MODE_MANUAL ? pw_sim_run(b, PW_SIM_TIME_NEVER, UINT64_MAX) : 0;
  if (out_delivered != NULL) *out_delivered = delivered;
  return NULL;
}

pw_status_t pw_sim_backend_step(pw_backend_t backend, uint64_t* out_delivered) {
  if (out_delivered != NULL) *out_delivered = 0;
  pw_sim__backend_t* b = NULL;
  PW_RETURN_IF_ERROR(pw_sim_stepping(backend, "pw_sim_backend_step", &b));
  uint64_t delivered = b->mode == PW_SIM_MODE_MANUAL ? pw_sim_run(b, PW_SIM_TIME_NEVER, 1) : 0;
  if (out_delivered != NULL) *out_delivered = delivered;
  return NULL;
}

bool pw_sim_backend_wait_idle(pw_backend_t backend, uint64_t timeout_ns) {
  pw_sim__backend_t* b = pw_sim__from_backend(backend);
  if (b == NULL) return false;
  if (b->mode == PW_SIM_MODE_INLINE) return true;
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  uint64_t ns = (uint64_t)deadline.tv_nsec + timeout_ns % 1000000000ull;
  deadline.tv_sec += (time_t)(timeout_ns / 1000000000ull + ns / 1000000000ull);
  deadline.tv_nsec = (long)(ns % 1000000000ull);
  pthread_mutex_lock(&b->queue_mutex);
  int rc = 0;
  while (b->mode == PW_SIM_MODE_THREADED && (b->heap_count > 0 || b->delivering > 0) &&
         rc != ETIMEDOUT) {
    rc = pthread_cond_timedwait(&b->queue_idle, &b->queue_mutex, &deadline);
  }
  bool idle = b->heap_count == 0 && b->delivering == 0;
  pthread_mutex_unlock(&b->queue_mutex);
  return idle;
}
