#define _POSIX_C_SOURCE 200809L
/* The runtime's transfer thread (host_xfer.h): a FIFO of jobs under one
 * mutex, one thread that takes them. Transfers are few and each is a
 * copy of whole arrays, so one lock per job costs nothing next to it;
 * one thread keeps the background copies off every core but one, which
 * is what overlapping them with compute needs. */
#include "runtime/host_xfer.h"

#include <pthread.h>

typedef struct pw_host_xfer_s {
  pw_allocator_t allocator;
  pthread_mutex_t lock;
  pthread_cond_t cond;        /* a job queued, or stopping */
  pw_host_xfer_job_t* head;
  pw_host_xfer_job_t* tail;
  bool stopping;
  bool started;               /* |thread| runs */
  pthread_t thread;
} pw_host_xfer_t;

/* Takes jobs until stopped and the queue is empty. */
static void* pw_host_xfer_main(void* arg) {
  pw_host_xfer_t* x = arg;
  pthread_mutex_lock(&x->lock);
  for (;;) {
    pw_host_xfer_job_t* job = x->head;
    if (job == NULL) {
      if (x->stopping) break;
      pthread_cond_wait(&x->cond, &x->lock);
      continue;
    }
    x->head = job->next;
    if (x->head == NULL) x->tail = NULL;
    pthread_mutex_unlock(&x->lock);
    job->run(job);
    pthread_mutex_lock(&x->lock);
  }
  pthread_mutex_unlock(&x->lock);
  return NULL;
}

/* Made once, under the runtime's lock: the start path is cold. */
pw_status_t pw__host_xfer_start(pw_runtime_t* rt) {
  if (pw_atomic_load_ptr_acquire(&rt->host_xfer) != NULL) return NULL;
  pw_status_t status = NULL;
  pthread_mutex_lock(&rt->lock);
  if (pw_atomic_load_ptr_acquire(&rt->host_xfer) == NULL) {
    pw_host_xfer_t* x = NULL;
    status = pw_allocator_calloc(rt->allocator, sizeof(*x), 0, (void**)&x);
    if (status == NULL) {
      x->allocator = rt->allocator;
      pthread_mutex_init(&x->lock, NULL);
      pthread_cond_init(&x->cond, NULL);
      if (pthread_create(&x->thread, NULL, pw_host_xfer_main, x) != 0) {
        pthread_cond_destroy(&x->cond);
        pthread_mutex_destroy(&x->lock);
        pw_allocator_free(rt->allocator, x, sizeof(*x));
        status = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                                "the runtime's host transfer thread could not be started");
      } else {
        x->started = true;
        pw_atomic_store_ptr_release(&rt->host_xfer, x);
      }
    }
  }
  pthread_mutex_unlock(&rt->lock);
  return status;
}

void pw__host_xfer_enqueue(pw_runtime_t* rt, pw_host_xfer_job_t* job) {
  pw_host_xfer_t* x = pw_atomic_load_ptr_acquire(&rt->host_xfer);
  job->next = NULL;
  pthread_mutex_lock(&x->lock);
  if (x->tail != NULL) {
    x->tail->next = job;
  } else {
    x->head = job;
  }
  x->tail = job;
  pthread_cond_signal(&x->cond);
  pthread_mutex_unlock(&x->lock);
}

void pw__host_xfer_stop(pw_runtime_t* rt) {
  pw_host_xfer_t* x = pw_atomic_load_ptr_acquire(&rt->host_xfer);
  if (x == NULL) return;
  pthread_mutex_lock(&x->lock);
  x->stopping = true;
  pthread_cond_broadcast(&x->cond);
  pthread_mutex_unlock(&x->lock);
  /* The thread drains the queue before it sees |stopping|. */
  if (x->started) pthread_join(x->thread, NULL);
  pw_atomic_store_ptr_release(&rt->host_xfer, NULL);
  pthread_cond_destroy(&x->cond);
  pthread_mutex_destroy(&x->lock);
  pw_allocator_free(x->allocator, x, sizeof(*x));
}
