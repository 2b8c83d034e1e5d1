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
 * parking, see collective.c). */
#include <errno.h>
#include <stdalign.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"

/* The pool whose task this worker thread is running, and its continuation
 * (see the file comment). */
static _Thread_local struct {
  pw_cpu__pool_t* pool;
  pw_cpu__task_t* next;
} pw_cpu_worker;

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

static void* pw_cpu_pool_main(void* arg) {
  pw_cpu__pool_t* pool = arg;
  for (;;) {
    pthread_mutex_lock(&pool->mutex);
    while (pool->head == NULL && !pool->stopping) {
      pthread_cond_wait(&pool->wake, &pool->mutex);
    }
    pw_cpu__task_t* task = pool->head;
    if (task == NULL) {
      /* Stopping and drained. */
      pthread_mutex_unlock(&pool->mutex);
      return NULL;
    }
    pool->head = task->next;
    if (pool->head == NULL) pool->tail = NULL;
    pthread_mutex_unlock(&pool->mutex);
    pw_cpu_pool_run(pool, task);
  }
}

pw_status_t pw_cpu__pool_start(pw_cpu__pool_t* pool, pw_allocator_t allocator,
                               uint32_t thread_count) {
  memset(pool, 0, sizeof(*pool));
  pool->allocator = allocator;
  void* threads = NULL;
  pw_status_t status = pw_allocator_calloc_array(
      allocator, thread_count, sizeof(pthread_t), alignof(pthread_t), &threads);
  if (status != NULL) {
    return pw_status_annotate(status, "cpu backend: worker pool of %u threads",
                              thread_count);
  }
  pool->threads = threads;
  pool->capacity = thread_count;
  int rc = pthread_mutex_init(&pool->mutex, NULL);
  if (rc != 0) {
    pw_allocator_free(allocator, threads, thread_count * sizeof(pthread_t));
    pool->threads = NULL;
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "cpu backend: pthread_mutex_init failed (%s)",
                          strerror(rc));
  }
  rc = pthread_cond_init(&pool->wake, NULL);
  if (rc != 0) {
    pthread_mutex_destroy(&pool->mutex);
    pw_allocator_free(allocator, threads, thread_count * sizeof(pthread_t));
    pool->threads = NULL;
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "cpu backend: pthread_cond_init failed (%s)",
                          strerror(rc));
  }
  for (uint32_t i = 0; i < thread_count; ++i) {
    rc = pthread_create(&pool->threads[i], NULL, pw_cpu_pool_main, pool);
    if (rc != 0) {
      /* Stop the ones already running; they have nothing to do. */
      uint32_t started = i;
      pool->thread_count = started;
      pw_cpu__pool_stop(pool);
      return pw_status_make(
          rc == EAGAIN ? PW_STATUS_RESOURCE_EXHAUSTED : PW_STATUS_INTERNAL,
          "cpu backend: could not start worker thread %u of %u (%s)", i + 1,
          thread_count, strerror(rc));
    }
    pool->thread_count = i + 1;
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
  /* One task wakes one worker; signalling under the mutex keeps the wake-up
   * ordered with the push. */
  pthread_cond_signal(&pool->wake);
  pthread_mutex_unlock(&pool->mutex);
}

void pw_cpu__pool_stop(pw_cpu__pool_t* pool) {
  if (pool->threads == NULL) return;
  pthread_mutex_lock(&pool->mutex);
  pool->stopping = true;
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
  pthread_cond_destroy(&pool->wake);
  pthread_mutex_destroy(&pool->mutex);
  /* The array was sized for the requested count; free with that size. */
  pw_allocator_free(pool->allocator, pool->threads,
                    pool->capacity * sizeof(pthread_t));
  pool->threads = NULL;
  pool->thread_count = 0;
}

bool pw_cpu__pool_is_worker(pw_cpu__pool_t* pool) {
  pthread_t self = pthread_self();
  for (uint32_t i = 0; i < pool->thread_count; ++i) {
    if (pthread_equal(self, pool->threads[i])) return true;
  }
  return false;
}
