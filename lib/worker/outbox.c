#define _POSIX_C_SOURCE 200809L
/* What the worker sends on a session, framed (wire/outbox.h).
 *
 * Every message but a launch's DONE leaves at once (with whatever DONEs
 * wait before it, in order). A DONE waits while other launches or copies
 * of the session still run, for at most done_hold_ns, so completions that
 * end close together share one frame: the controller then also answers
 * with one frame of the launches they release. The flusher thread ends a
 * wait that nothing else ends; it sleeps while the outbox is empty. */
#include <time.h>

#include "pathways/clock.h"
#include "worker/worker_internal.h"

static void pw_outbox_flush_locked(pw_worker_t* w) {
  w->flush_armed = false;
  if (pw_atomic_load_u32_acquire(&w->dead)) {
    pw__wire_outbox_discard_locked(&w->out);
    return;
  }
  pw_status_t s = pw__wire_outbox_flush_locked(&w->out, w->session, 0, w->peer);
  if (s != NULL) {
    pw_log(&w->logger, PW_LOG_WARN, "worker", "worker %s: %s", w->name, pw_status_message(s));
    pw_status_free(s);
  }
}

static void pw_outbox_append_locked(pw_worker_t* w, const pw_wire_msg_t* msg) {
  pw_status_t s = pw__wire_outbox_append_locked(&w->out, msg, w->peer);
  if (s != NULL) {
    pw_log(&w->logger, PW_LOG_WARN, "worker", "worker %s: %s not sent: %s", w->name,
           pw__wire_type_name(msg->type), pw_status_message(s));
    pw_status_free(s);
  }
}

void pw__worker_send(pw_worker_t* w, const pw_wire_msg_t* msg) {
  if (pw_atomic_load_u32_acquire(&w->dead)) return;
  pthread_mutex_lock(&w->out.mu);
  pw_outbox_append_locked(w, msg);
  pw_outbox_flush_locked(w);
  pthread_mutex_unlock(&w->out.mu);
}

void pw__worker_send_held(pw_worker_t* w, const pw_wire_msg_t* msg, uint64_t others) {
  if (pw_atomic_load_u32_acquire(&w->dead)) return;
  pthread_mutex_lock(&w->out.mu);
  pw_outbox_append_locked(w, msg);
  bool hold = others > 0 && w->done_hold_ns != UINT64_MAX && w->flush_running &&
              !pw__wire_outbox_full_locked(&w->out) && w->out.frame != NULL;
  if (!hold) {
    pw_outbox_flush_locked(w);
  } else if (!w->flush_armed) {
    w->flush_armed = true;
    w->flush_deadline = pw_clock_now() + (pw_time_t)w->done_hold_ns;
    pthread_cond_signal(&w->flush_cv);
  }
  pthread_mutex_unlock(&w->out.mu);
}

static void* pw_outbox_flusher_main(void* arg) {
  pw_worker_t* w = arg;
  pthread_mutex_lock(&w->out.mu);
  while (!w->flush_stop) {
    if (!w->flush_armed) {
      pthread_cond_wait(&w->flush_cv, &w->out.mu);
      continue;
    }
    pw_duration_t left = w->flush_deadline - pw_clock_now();
    if (left > 0) {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      ts.tv_sec += (time_t)(left / 1000000000);
      ts.tv_nsec += (long)(left % 1000000000);
      if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec += 1;
        ts.tv_nsec -= 1000000000L;
      }
      pthread_cond_timedwait(&w->flush_cv, &w->out.mu, &ts);
      continue;
    }
    pw_outbox_flush_locked(w);
  }
  pthread_mutex_unlock(&w->out.mu);
  return NULL;
}

void pw__worker_outbox_init(pw_worker_t* w) {
  pw__wire_outbox_init(&w->out);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&w->flush_cv, &attr);
  pthread_condattr_destroy(&attr);
}

void pw__worker_outbox_destroy(pw_worker_t* w) {
  pw__wire_outbox_destroy(&w->out);
  pthread_cond_destroy(&w->flush_cv);
}

void pw__worker_outbox_start(pw_worker_t* w) {
  pthread_mutex_lock(&w->out.mu);
  pw__wire_outbox_discard_locked(&w->out); /* an earlier session's */
  w->flush_armed = false;
  w->flush_stop = false;
  pthread_mutex_unlock(&w->out.mu);
  /* Without the thread DONEs simply never wait. */
  w->flush_running = pthread_create(&w->flush_thread, NULL, pw_outbox_flusher_main, w) == 0;
}

void pw__worker_outbox_stop(pw_worker_t* w) {
  pthread_mutex_lock(&w->out.mu);
  bool running = w->flush_running;
  w->flush_stop = true;
  w->flush_running = false;
  pw__wire_outbox_discard_locked(&w->out); /* the session is dead */
  pthread_cond_signal(&w->flush_cv);
  pthread_mutex_unlock(&w->out.mu);
  if (running) pthread_join(w->flush_thread, NULL);
}

uint32_t pw__worker_outbox_waiting(pw_worker_t* w) {
  pthread_mutex_lock(&w->out.mu);
  uint32_t n = w->out.count;
  pthread_mutex_unlock(&w->out.mu);
  return n;
}
