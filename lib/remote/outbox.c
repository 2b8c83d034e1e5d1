#define _POSIX_C_SOURCE 200809L
/* Corking the controller's sends (remote_internal.h): what one thread
 * sends while it is in a batch (lib/base/defer.h: an outermost dispatch
 * frame, such as a graph submission or the completions one backend
 * callback releases; a session reader's frame of messages) leaves as one
 * frame per worker when the batch ends, instead of one network message
 * each.
 *
 * The outboxes are the workers' (pw_remote_worker_t.out); the batch only
 * remembers which ones it left unsent. Another thread that sends to such
 * a worker meanwhile flushes the corked messages with its own, in order:
 * corking delays, never reorders. */
#include "base/defer.h"
#include "remote/remote_internal.h"

void pw__remote_cork(void) { pw__defer_begin(); }

void pw__remote_uncork(void) { pw__defer_end(); }

static void pw_remote_flush_deferred(void* ctx) { pw__remote_flush(ctx); }

bool pw__remote_corked(pw_remote_worker_t* worker) {
  return pw__defer_add(pw_remote_flush_deferred, worker);
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
