#define _POSIX_C_SOURCE 200809L
/* A fixed pool of host threads running parallel-for jobs. Jobs are queued
 * on a mutex-protected list; each job hands out indices with an atomic
 * counter, so the caller and every worker claim work until none is left
 * (the caller never waits idle while its own job has work). */
#include "runtime/workers.h"

#include <string.h>

#include "base/atomics.h"

typedef struct pw_workers_job_s {
  struct pw_workers_job_s* next;
  uint32_t count;
  pw_status_t (*fn)(void* user, uint32_t i);
  void* user;
  pw_atomic_u32_t next_index;
  uint32_t active;        /* workers inside the job (pool lock) */
  pthread_mutex_t lock;   /* guards |error| and |error_index| */
  pw_status_t error;
  uint32_t error_index;
} pw_workers_job_t;

struct pw_workers_s {
  pw_allocator_t allocator;
  uint32_t count;
  uint32_t capacity;
  pthread_t* threads;
  pthread_mutex_t lock;
  pthread_cond_t cond;       /* work arrived or stopping */
  pthread_cond_t left_cond;  /* a worker left a job */
  pw_workers_job_t* head;  /* jobs with indices left */
  bool stopping;
};

/* Claims and runs indices of |job| until none is left. */
static void pw_workers_run_job(pw_workers_job_t* job) {
  for (;;) {
    uint32_t i = pw_atomic_fetch_add_u32(&job->next_index, 1);
    if (i >= job->count) return;
    pw_status_t status = job->fn(job->user, i);
    pthread_mutex_lock(&job->lock);
    if (status != NULL) {
      if (job->error == NULL || i < job->error_index) {
        pw_status_free(job->error);
        job->error = status;
        job->error_index = i;
      } else {
        pw_status_free(status);
      }
    }
    pthread_mutex_unlock(&job->lock);
  }
}

static void* pw_workers_main(void* arg) {
  pw_workers_t* w = arg;
  pthread_mutex_lock(&w->lock);
  while (!w->stopping) {
    pw_workers_job_t* job = w->head;
    if (job == NULL) {
      pthread_cond_wait(&w->cond, &w->lock);
      continue;
    }
    if (pw_atomic_load_u32_relaxed(&job->next_index) >= job->count) {
      w->head = job->next; /* exhausted: unlink */
      continue;
    }
    job->active++;
    pthread_mutex_unlock(&w->lock);
    pw_workers_run_job(job);
    pthread_mutex_lock(&w->lock);
    if (--job->active == 0) pthread_cond_broadcast(&w->left_cond);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

pw_status_t pw__workers_create(pw_allocator_t allocator, uint32_t count,
                               pw_workers_t** out_workers) {
  *out_workers = NULL;
  if (count == 0) return NULL;
  if (count > 256) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "worker_count %u exceeds the maximum 256", count);
  }
  pw_workers_t* w = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(allocator, sizeof(*w), 0, (void**)&w));
  w->allocator = allocator;
  w->capacity = count;
  pw_status_t status = pw_allocator_calloc_array(allocator, count, sizeof(pthread_t), 0,
                                                 (void**)&w->threads);
  if (status != NULL) {
    pw_allocator_free(allocator, w, sizeof(*w));
    return status;
  }
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->cond, NULL);
  pthread_cond_init(&w->left_cond, NULL);
  for (uint32_t i = 0; i < count; ++i) {
    int rc = pthread_create(&w->threads[i], NULL, pw_workers_main, w);
    if (rc != 0) {
      status = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                              "could not start runtime worker %u of %u (error %d)", i,
                              count, rc);
      break;
    }
    w->count++;
  }
  if (status != NULL) {
    pw__workers_destroy(w);
    return status;
  }
  *out_workers = w;
  return NULL;
}

void pw__workers_destroy(pw_workers_t* w) {
  if (w == NULL) return;
  pthread_mutex_lock(&w->lock);
  w->stopping = true;
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->lock);
  for (uint32_t i = 0; i < w->count; ++i) pthread_join(w->threads[i], NULL);
  pthread_cond_destroy(&w->left_cond);
  pthread_cond_destroy(&w->cond);
  pthread_mutex_destroy(&w->lock);
  pw_allocator_t a = w->allocator;
  pw_allocator_free(a, w->threads, w->capacity * sizeof(pthread_t));
  pw_allocator_free(a, w, sizeof(*w));
}

pw_status_t pw__workers_parallel_for(pw_workers_t* w, uint32_t count,
                                     pw_status_t (*fn)(void* user, uint32_t i),
                                     void* user) {
  if (w == NULL || count <= 1) {
    for (uint32_t i = 0; i < count; ++i) PW_RETURN_IF_ERROR(fn(user, i));
    return NULL;
  }
  pw_workers_job_t job;
  memset(&job, 0, sizeof(job));
  job.count = count;
  job.fn = fn;
  job.user = user;
  pw_atomic_init_u32(&job.next_index, 0);
  pthread_mutex_init(&job.lock, NULL);
  pthread_mutex_lock(&w->lock);
  job.next = w->head;
  w->head = &job;
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->lock);
  pw_workers_run_job(&job);
  /* Unlink, then wait for workers still inside the job: they finish the
   * indices they claimed before leaving, so afterwards all are done. */
  pthread_mutex_lock(&w->lock);
  for (pw_workers_job_t** p = &w->head; *p; p = &(*p)->next) {
    if (*p == &job) {
      *p = job.next;
      break;
    }
  }
  while (job.active != 0) pthread_cond_wait(&w->left_cond, &w->lock);
  pthread_mutex_unlock(&w->lock);
  pthread_mutex_destroy(&job.lock);
  return job.error;
}
