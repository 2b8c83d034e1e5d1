/* The CPU backend's worker pool: a fixed number of host threads draining one
 * FIFO of tasks. Never a thread per device: devices are data, and a
 * collective never parks a worker (see collective.c), so one worker can run
 * any number of devices.
 *
 * One mutex guards the queue. A task is popped under it and run outside it,
 * so a task may push more tasks (a done callback that launches again).
 *
 * Continuations. A task that a worker pushes while it runs a task, when the
 * queue is empty, is that worker's continuation: it runs next on the same
 * thread, and no other worker is woken for it. A chain of ops (each op's
 * completion launches the next) then stays on one worker instead of
 * handing every op to another thread (a futex wake-up each, and for Python
 * kernels a GIL hand-off). Only one task waits in the slot: the next push
 * of the same task goes to the queue and wakes a worker, so the other
 * launches of a gang still run in parallel; and a push while tasks are
 * queued goes behind them, so a long chain cannot starve queued work. The
 * slot is thread-local and run right after the current task returns: tasks
 * never block waiting for other tasks (collectives rendezvous without
 * parking, see collective.c).
 *
 * Spin-then-park (pathways/backends/cpu.h, WORKER POOL). A worker that
 * finds the FIFO empty first spins on |queued| without the mutex, then
 * parks on |wake|. The protocol that keeps a wake-up from being lost: a
 * pusher holds the mutex while it enqueues and reads |sleepers| and
 * |spinning|; a worker leaves the spinning count and re-checks the FIFO
 * under the same mutex before it parks (and counts itself a sleeper under
 * it). So a push either sees the worker spinning, and the worker will see
 * the task when it re-checks, or sees it parked, and signals. A push
 * signals only when the queued tasks outnumber the spinners: a spinner
 * takes the task without a futex wake-up on either side. */
#include <errno.h>
#include <stdalign.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "pathways/clock.h"

/* The pool whose task this worker thread is running, and its continuation
 * (see the file comment). */
static _Thread_local struct {
  pw_cpu__pool_t* pool;
  pw_cpu__task_t* next;
} pw_cpu_worker;

/* Polls between two reads of the clock while spinning. */
#define PW_CPU_SPIN_POLLS 32
/* The smallest budget is the largest over this. */
#define PW_CPU_SPIN_RANGE 16

static inline void pw_cpu_pool_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static uint64_t pw_cpu_pool_now_ns(void) { return (uint64_t)pw_clock_now(); }

/* Runs |task|, then the continuations it and its successors leave. */
static void pw_cpu_pool_run(pw_cpu__pool_t* pool, pw_cpu__task_t* task) {
  pw_cpu_worker.pool = pool;
  while (task != NULL) {
    task->next = NULL;
    task->fn(task);
    task = pw_cpu_worker.next;
    pw_cpu_worker.next = NULL;
  }
  pw_cpu_worker.pool = NULL;
}

/* Under the mutex: the FIFO's first task, or NULL. */
static pw_cpu__task_t* pw_cpu_pool_pop_locked(pw_cpu__pool_t* pool) {
  pw_cpu__task_t* task = pool->head;
  if (task == NULL) return NULL;
  pool->head = task->next;
  if (pool->head == NULL) pool->tail = NULL;
  atomic_store_explicit(&pool->queued, atomic_load_explicit(&pool->queued, memory_order_relaxed) - 1,
                        memory_order_relaxed);
  return task;
}

/* Called with the mutex held and the FIFO empty; returns with it held.
 * Spins for up to |budget_ns| (unless the spinner cap is reached) and
 * returns true if work (or stop) showed up meanwhile. */
static bool pw_cpu_pool_spin(pw_cpu__pool_t* pool, uint64_t budget_ns) {
  if (atomic_fetch_add(&pool->spinning, 1) >= pool->spinner_cap) {
    atomic_fetch_sub(&pool->spinning, 1);
    return false;
  }
  pthread_mutex_unlock(&pool->mutex);
  uint64_t start = pw_cpu_pool_now_ns();
  bool found = false;
  while (!found) {
    for (int i = 0; i < PW_CPU_SPIN_POLLS; ++i) {
      if (atomic_load_explicit(&pool->queued, memory_order_relaxed) != 0 ||
          atomic_load_explicit(&pool->stopping, memory_order_relaxed)) {
        found = true;
        break;
      }
      pw_cpu_pool_pause();
    }
    if (!found && pw_cpu_pool_now_ns() - start >= budget_ns) break;
  }
  pthread_mutex_lock(&pool->mutex);
  /* Under the mutex, so a pusher from now on sees us as not spinning and
   * we re-check the FIFO before parking (file comment). */
  atomic_fetch_sub(&pool->spinning, 1);
  return found;
}

static void* pw_cpu_pool_main(void* arg) {
  pw_cpu__pool_t* pool = arg;
  uint64_t max_ns = pool->spin_max_ns;
  uint64_t min_ns = max_ns / PW_CPU_SPIN_RANGE;
  uint64_t budget = max_ns;
  pthread_mutex_lock(&pool->mutex);
  for (;;) {
    pw_cpu__task_t* task = pw_cpu_pool_pop_locked(pool);
    if (task != NULL) {
      pthread_mutex_unlock(&pool->mutex);
      pw_cpu_pool_run(pool, task);
      pthread_mutex_lock(&pool->mutex);
      continue;
    }
    if (atomic_load_explicit(&pool->stopping, memory_order_relaxed)) break;
    if (budget > 0 && pw_cpu_pool_spin(pool, budget)) {
      budget = budget * 2 < max_ns ? budget * 2 : max_ns;
      continue;
    }
    /* Park. A wake-up soon after parking means a longer spin would have
     * caught the task; a long park means spinning was wasted. */
    uint64_t parked = max_ns > 0 ? pw_cpu_pool_now_ns() : 0;
    pool->sleepers++;
    while (pool->head == NULL && !atomic_load_explicit(&pool->stopping, memory_order_relaxed)) {
      pthread_cond_wait(&pool->wake, &pool->mutex);
    }
    pool->sleepers--;
    if (max_ns > 0) {
      if (pw_cpu_pool_now_ns() - parked < max_ns) {
        budget = budget * 2 < max_ns ? budget * 2 : max_ns;
      } else {
        budget = budget / 2 > min_ns ? budget / 2 : min_ns;
      }
    }
  }
  /* Stopping and drained. */
  pthread_mutex_unlock(&pool->mutex);
  return NULL;
}

static void pw_cpu_pool_free_arrays(pw_cpu__pool_t* pool) {
  if (pool->threads != NULL) {
    /* Sized for the requested count; free with that size. */
    pw_allocator_free(pool->allocator, pool->threads, pool->capacity * sizeof(pthread_t));
    pool->threads = NULL;
  }
  if (pool->cpus != NULL) {
    pw_allocator_free(pool->allocator, pool->cpus, pool->cpu_count * sizeof(uint32_t));
    pool->cpus = NULL;
  }
}

static pw_status_t pw_cpu_pool_init_sync(pw_cpu__pool_t* pool) {
  int rc = pthread_mutex_init(&pool->mutex, NULL);
  if (rc != 0) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "cpu backend: pthread_mutex_init failed (%s)", strerror(rc));
  }
  rc = pthread_cond_init(&pool->wake, NULL);
  if (rc != 0) {
    pthread_mutex_destroy(&pool->mutex);
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "cpu backend: pthread_cond_init failed (%s)", strerror(rc));
  }
  return NULL;
}

pw_status_t pw_cpu__pool_start(pw_cpu__pool_t* pool, pw_allocator_t allocator,
                               const pw_cpu__pool_config_t* config) {
  memset(pool, 0, sizeof(*pool));
  uint32_t thread_count = config->thread_count;
  pool->allocator = allocator;
  pool->logger = config->logger;
  pool->spin_max_ns = (uint64_t)config->spin_us * 1000u;
  uint32_t cpus = pw_cpu__allowed_cpu_count();
  pool->spinner_cap = cpus / 2 > 1 ? cpus / 2 : 1;
  atomic_init(&pool->queued, 0);
  atomic_init(&pool->stopping, false);
  atomic_init(&pool->spinning, 0);
  PW_RETURN_IF_ERROR(pw_cpu__affinity_resolve(allocator, config, &pool->cpus, &pool->cpu_count));
  void* threads = NULL;
  pw_status_t status = pw_allocator_calloc_array(
      allocator, thread_count, sizeof(pthread_t), alignof(pthread_t), &threads);
  if (status != NULL) {
    pw_cpu_pool_free_arrays(pool);
    return pw_status_annotate(status, "cpu backend: worker pool of %u threads",
                              thread_count);
  }
  pool->threads = threads;
  pool->capacity = thread_count;
  status = pw_cpu_pool_init_sync(pool);
  if (status != NULL) {
    pw_cpu_pool_free_arrays(pool);
    return status;
  }
  for (uint32_t i = 0; i < thread_count; ++i) {
    int rc = pthread_create(&pool->threads[i], NULL, pw_cpu_pool_main, pool);
    if (rc != 0) {
      /* Stop the ones already running; they have nothing to do. */
      pool->thread_count = i;
      pw_cpu__pool_stop(pool);
      return pw_status_make(
          rc == EAGAIN ? PW_STATUS_RESOURCE_EXHAUSTED : PW_STATUS_INTERNAL,
          "cpu backend: could not start worker thread %u of %u (%s)", i + 1,
          thread_count, strerror(rc));
    }
    pool->thread_count = i + 1;
    if (pool->cpus != NULL) {
      pw_cpu__affinity_pin(pool->threads[i], i, pool->cpus[i % pool->cpu_count],
                           pool->logger);
    }
  }
  return NULL;
}

void pw_cpu__pool_push(pw_cpu__pool_t* pool, pw_cpu__task_t* task) {
  task->next = NULL;
  bool continuation = pw_cpu_worker.pool == pool && pw_cpu_worker.next == NULL;
  pthread_mutex_lock(&pool->mutex);
  if (continuation && pool->head == NULL) {
    pthread_mutex_unlock(&pool->mutex);
    pw_cpu_worker.next = task;
    return;
  }
  if (pool->tail != NULL) {
    pool->tail->next = task;
  } else {
    pool->head = task;
  }
  pool->tail = task;
  uint32_t queued = atomic_load_explicit(&pool->queued, memory_order_relaxed) + 1;
  atomic_store_explicit(&pool->queued, queued, memory_order_relaxed);
  /* One task wakes one parked worker, unless a spinning one will take it.
   * Signalling under the mutex keeps the wake-up ordered with the push. */
  if (pool->sleepers > 0 && queued > atomic_load(&pool->spinning)) {
    pthread_cond_signal(&pool->wake);
  }
  pthread_mutex_unlock(&pool->mutex);
}

void pw_cpu__pool_stop(pw_cpu__pool_t* pool) {
  if (pool->threads == NULL) return;
  pthread_mutex_lock(&pool->mutex);
  atomic_store(&pool->stopping, true);
  pthread_cond_broadcast(&pool->wake);
  pthread_mutex_unlock(&pool->mutex);
  for (uint32_t i = 0; i < pool->thread_count; ++i) {
    pthread_join(pool->threads[i], NULL);
  }
  /* Workers drain the queue before they exit; with none started, run what
   * is left here so nothing queued is lost. */
  while (pool->head != NULL) {
    pw_cpu__task_t* task = pool->head;
    pool->head = task->next;
    task->next = NULL;
    task->fn(task);
  }
  pool->tail = NULL;
  atomic_store(&pool->queued, 0);
  pthread_cond_destroy(&pool->wake);
  pthread_mutex_destroy(&pool->mutex);
  pw_cpu_pool_free_arrays(pool);
  pool->thread_count = 0;
}

bool pw_cpu__pool_is_worker(pw_cpu__pool_t* pool) {
  pthread_t self = pthread_self();
  for (uint32_t i = 0; i < pool->thread_count; ++i) {
    if (pthread_equal(self, pool->threads[i])) return true;
  }
  return false;
}
