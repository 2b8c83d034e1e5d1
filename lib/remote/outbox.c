#define _POSIX_C_SOURCE 200809L
/* Corking the controller's sends (remote_internal.h): what one thread
 * sends while it handles a frame of completions leaves as one frame per
 * worker when it is done, instead of one network message each.
 *
 * The outboxes are the workers' (pw_remote_worker_t.out); this file only
 * remembers, per thread, which ones it left unsent. Another thread that
 * sends to such a worker meanwhile flushes the corked messages with its
 * own, in order: corking delays, never reorders. */
#include "remote/remote_internal.h"

#define PW_CORK_MAX 16u

static _Thread_local bool pw_cork_on;
static _Thread_local uint32_t pw_cork_count;
static _Thread_local pw_remote_worker_t* pw_cork_workers[PW_CORK_MAX];

void pw__remote_cork(void) {
  pw_cork_on = true;
  pw_cork_count = 0;
}

bool pw__remote_corked(pw_remote_worker_t* worker) {
  if (!pw_cork_on) return false;
  for (uint32_t i = 0; i < pw_cork_count; ++i) {
    if (pw_cork_workers[i] == worker) return true;
  }
  if (pw_cork_count == PW_CORK_MAX) return false; /* sent at once */
  pw_cork_workers[pw_cork_count++] = worker;
  return true;
}

void pw__remote_flush(pw_remote_worker_t* worker) {
  pthread_mutex_lock(&worker->mu);
  bool ok = worker->state == PW_RWORKER_ATTACHED && worker->session_open;
  nng_socket socket = worker->session;
  uint64_t current = worker->epoch;
  pthread_mutex_unlock(&worker->mu);
  pw_status_t status = NULL;
  pthread_mutex_lock(&worker->out.mu);
  if (!ok || worker->out_epoch != current) {
    pw__wire_outbox_discard_locked(&worker->out); /* the loss completed them */
  } else {
    status = pw__wire_outbox_flush_locked(&worker->out, socket, 0, worker->label);
  }
  pthread_mutex_unlock(&worker->out.mu);
  if (status != NULL) {
    pw__remote_session_lose(worker, current, pw_status_message(status));
    pw_status_free(status);
  }
}

void pw__remote_uncork(void) {
  pw_cork_on = false;
  for (uint32_t i = 0; i < pw_cork_count; ++i) pw__remote_flush(pw_cork_workers[i]);
  pw_cork_count = 0;
}
