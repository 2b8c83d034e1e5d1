#define _POSIX_C_SOURCE 200809L
/* The session: attach, the reader loop, heartbeats, loss and cleanup
 * (docs/remote.md, "Heartbeats and loss"). */
#include <nng/nng.h>
#include <nng/protocol/pair0/pair.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pathways/clock.h"
#include "plugin/backend_call.h"
#include "wire/wire_nng.h"
#include "worker/worker_internal.h"

/* Defaults for a WELCOME that leaves the heartbeat fields 0. */
#define PW_WORKER_DEFAULT_HEARTBEAT_NS 1000000000ull
#define PW_WORKER_DEFAULT_MISSES 3u

static pw_wire_blob_t pw_worker_status_text(pw_status_t status) {
  const char* text = status != NULL ? pw_status_message(status) : "";
  size_t n = strlen(text);
  return (pw_wire_blob_t){text, n > 4000 ? 4000 : n};
}

void pw__worker_reply(pw_worker_t* w, uint64_t id, pw_status_t status, const void* payload,
                      size_t payload_size, const uint64_t* list, uint32_t list_count) {
  pw_wire_msg_t msg = {.type = PW_WIRE_REPLY, .list = list, .list_count = list_count};
  msg.u[PW_WIRE_REPLY_ID] = id;
  msg.u[PW_WIRE_REPLY_CODE] = (uint64_t)pw_status_code(status);
  msg.blob[PW_WIRE_REPLY_B_MESSAGE] = pw_worker_status_text(status);
  msg.blob[PW_WIRE_REPLY_B_PAYLOAD] = (pw_wire_blob_t){payload, payload_size};
  pw__worker_send(w, &msg);
  pw_status_free(status);
}

void pw__worker_done(pw_worker_t* w, uint64_t id, pw_status_t status) {
  pw_wire_msg_t msg = {.type = PW_WIRE_DONE};
  msg.u[PW_WIRE_DONE_ID] = id;
  msg.u[PW_WIRE_DONE_CODE] = (uint64_t)pw_status_code(status);
  msg.blob[PW_WIRE_DONE_B_MESSAGE] = pw_worker_status_text(status);
  pw__worker_send(w, &msg);
  pw_status_free(status);
}

void pw__worker_drop(pw_worker_t* w, const char* what, pw_status_t status) {
  pw__worker_count_refused(w);
  pw_log(&w->logger, PW_LOG_WARN, "worker", "worker %s: dropped %s from %s: %s", w->name, what,
         w->peer, status != NULL ? pw_status_message(status) : "unexpected");
  pw_status_free(status);
}

void pw__worker_inflight_add(pw_worker_t* w) {
  pthread_mutex_lock(&w->lock);
  w->inflight++;
  pthread_mutex_unlock(&w->lock);
}

void pw__worker_inflight_done(pw_worker_t* w) {
  pthread_mutex_lock(&w->lock);
  if (--w->inflight == 0) pthread_cond_broadcast(&w->idle);
  pthread_mutex_unlock(&w->lock);
}

/* The session's pipe: noted when added, and when that one goes the
 * session is closed (a pipe nng drops while connecting is not). */
static void pw_worker_pipe_event(nng_pipe pipe, nng_pipe_ev ev, void* arg) {
  pw_worker_t* w = arg;
  uint32_t id = (uint32_t)nng_pipe_id(pipe);
  if (ev == NNG_PIPE_EV_ADD_POST) {
    pw_atomic_store_u32_release(&w->pipe, id);
  } else if (ev == NNG_PIPE_EV_REM_POST && pw_atomic_load_u32_acquire(&w->pipe) == id) {
    pw_atomic_store_u32_release(&w->closed, 1);
  }
}

static void pw_worker_heartbeat(pw_worker_t* w) {
  uint64_t health[256];
  uint64_t* list = health;
  if (w->device_count > 256 &&
      pw_allocator_calloc_array(w->allocator, w->device_count, sizeof(uint64_t), 0,
                                (void**)&list) != NULL) {
    return; /* no memory for it now: the next period tries again */
  }
  for (uint32_t d = 0; d < w->device_count; ++d) {
    list[d] = (uint64_t)pw__backend_health(&w->backend, d);
  }
  pw_wire_msg_t msg = {.type = PW_WIRE_HEARTBEAT, .list = list, .list_count = w->device_count};
  msg.u[PW_WIRE_HEARTBEAT_SEQ] = ++w->heartbeat_seq;
  pw__worker_send(w, &msg);
  if (list != health) pw_allocator_free(w->allocator, list, sizeof(uint64_t) * w->device_count);
}

static uint64_t pw_worker_period(const pw_worker_t* w) {
  return w->heartbeat_ns ? w->heartbeat_ns : PW_WORKER_DEFAULT_HEARTBEAT_NS;
}

/* Sends a heartbeat every period until told to stop. */
static void* pw_worker_heartbeat_main(void* arg) {
  pw_worker_t* w = arg;
  uint64_t period = pw_worker_period(w);
  uint64_t slice = period < 10000000ull ? period : 10000000ull;
  while (!pw_atomic_load_u32_acquire(&w->heartbeat_stop)) {
    pw_worker_heartbeat(w);
    pw_time_t next = pw_clock_now() + (pw_time_t)period;
    while (!pw_atomic_load_u32_acquire(&w->heartbeat_stop)) {
      pw_duration_t left = next - pw_clock_now();
      if (left <= 0) break;
      if ((uint64_t)left > slice) left = (pw_duration_t)slice;
      struct timespec ts = {(time_t)(left / 1000000000), (long)(left % 1000000000)};
      nanosleep(&ts, NULL);
    }
  }
  return NULL;
}

static void pw_worker_heartbeat_join(pw_worker_t* w) {
  if (!w->heartbeat_running) return;
  pw_atomic_store_u32_release(&w->heartbeat_stop, 1);
  pthread_join(w->heartbeat_thread, NULL);
  w->heartbeat_running = false;
}

/* Handles one message; false when it ends the session (BYE). */
static bool pw_worker_dispatch(pw_worker_t* w, const pw_wire_msg_t* msg) {
  switch (msg->type) {
    case PW_WIRE_HEARTBEAT: return true;
    case PW_WIRE_PEER: pw__worker_on_peer(w, msg); return true;
    case PW_WIRE_ALLOC: pw__worker_on_alloc(w, msg); return true;
    case PW_WIRE_FREE: pw__worker_on_free(w, msg); return true;
    case PW_WIRE_WRITE: pw__worker_on_write(w, msg); return true;
    case PW_WIRE_READ: pw__worker_on_read(w, msg); return true;
    case PW_WIRE_COMPILE: pw__worker_on_compile(w, msg); return true;
    case PW_WIRE_LOAD: pw__worker_on_load(w, msg); return true;
    case PW_WIRE_UNLOAD: pw__worker_on_unload(w, msg); return true;
    case PW_WIRE_LAUNCH: pw__worker_on_launch(w, msg); return true;
    case PW_WIRE_COPY: pw__worker_on_copy(w, msg); return true;
    case PW_WIRE_CANCEL: pw__worker_on_cancel(w, msg); return true;
    case PW_WIRE_BYE: {
      char reason[256];
      pw__wire_blob_text(&msg->blob[PW_WIRE_REASON_B], reason, sizeof(reason));
      pw_log(&w->logger, PW_LOG_INFO, "worker", "worker %s: %s ended the session: %s", w->name,
             w->peer, reason);
      return false;
    }
    default:
      pw__worker_drop(w, pw__wire_type_name(msg->type),
                      pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                                     "a controller does not send %s on a session",
                                     pw__wire_type_name(msg->type)));
      return true;
  }
}

/* Handles every message of one received frame, in order; false when
 * one ends the session (BYE). */
static bool pw_worker_frame(pw_worker_t* w, nng_msg* raw) {
  const unsigned char* body = nng_msg_body(raw);
  size_t size = nng_msg_len(raw), offset = 0;
  bool more = true;
  while (more && offset < size) {
    pw_wire_msg_t msg;
    pw_status_t s = pw__wire_decode_next(body, size, &offset, 0, w->allocator, &msg);
    if (s != NULL) {
      pw__worker_drop(w, "a malformed message", pw_status_annotate(s, "from %s", w->peer));
      continue;
    }
    more = pw_worker_dispatch(w, &msg);
    pw__wire_msg_release(&msg, w->allocator);
  }
  return more;
}

/* Reads the session until loss or stop. The controller is silent only
 * when a receive finds nothing queued: messages that waited behind a
 * slow request (a compile, a PEER connect under load) are signs of life. */
static void pw_worker_serve(pw_worker_t* w) {
  uint64_t period = pw_worker_period(w);
  uint64_t misses = w->misses ? w->misses : PW_WORKER_DEFAULT_MISSES;
  uint64_t poll = period / 4 < PW_WORKER_POLL_NS ? period / 4 : PW_WORKER_POLL_NS;
  if (poll < 1000000) poll = 1000000;
  nng_socket_set_ms(w->session, NNG_OPT_RECVTIMEO, (nng_duration)(poll / 1000000));
  pw_time_t last_rx = pw_clock_now();
  bool lost = true;
  for (;;) {
    if (pw__worker_stopping(w)) {
      pw_wire_msg_t bye = {.type = PW_WIRE_BYE};
      bye.blob[PW_WIRE_REASON_B] = (pw_wire_blob_t){"worker stopping", 15};
      pw__worker_send(w, &bye);
      lost = false;
      break;
    }
    if (pw_atomic_load_u32_acquire(&w->closed)) {
      pw_log(&w->logger, PW_LOG_WARN, "worker", "worker %s: %s closed the session", w->name,
             w->peer);
      break;
    }
    nng_msg* raw = NULL;
    int rv = nng_recvmsg(w->session, &raw, 0);
    pw_status_t s = rv == 0 ? NULL : pw__wire_nng_status(rv, "receive from", w->peer);
    pw_status_code_t code = pw_status_code(s);
    if (code == PW_STATUS_DEADLINE_EXCEEDED) {
      pw_status_free(s);
      pw_time_t now = pw_clock_now();
      if ((uint64_t)(now - last_rx) > period * misses) {
        pw_log(&w->logger, PW_LOG_WARN, "worker",
               "worker %s: lost %s: nothing for %llu ms (%llu heartbeats)", w->name, w->peer,
               (unsigned long long)((uint64_t)(now - last_rx) / 1000000),
               (unsigned long long)misses);
        break;
      }
      continue;
    }
    if (s != NULL) {
      pw_log(&w->logger, PW_LOG_WARN, "worker", "worker %s: session: %s", w->name,
             pw_status_message(s));
      pw_status_free(s);
      break;
    }
    last_rx = pw_clock_now(); /* any message is a sign of life, even a malformed one */
    bool more = pw_worker_frame(w, raw);
    nng_msg_free(raw);
    if (!more) break;
  }
  if (lost) pw_atomic_fetch_add_u64(&w->n_losses, 1);
}

/* nng 1.5's close can wait forever for a pipe that still holds a message
 * (wire_nng.c drains what it can first; a worker resumed after SIGSTOP
 * with a backlog hit it). The close runs on a thread of its own, waited
 * for up to PW_WORKER_CLOSE_NS: past that the socket is left to it
 * (logged) and the worker goes on to register again instead of hanging. */
static void pw_worker_close_session(pw_worker_t* w) {
  /* The controller's pipe first: what it still holds is dropped with it,
   * and nothing arrives after the drain (docs/toolchain.md, nng 1.5.2). */
  uint32_t pipe = pw_atomic_load_u32_acquire(&w->pipe);
  if (pipe != 0) nng_pipe_close((nng_pipe){.id = pipe});
  if (!pw__wire_nng_close_within(w->session, PW_WORKER_CLOSE_NS)) {
    pw_log(&w->logger, PW_LOG_WARN, "worker",
           "worker %s: closing the session's socket still blocks after %llu ms; left behind",
           w->name, (unsigned long long)(PW_WORKER_CLOSE_NS / 1000000));
  }
}

/* After the session: no more sends, the socket closed, the data plane's
 * copies cancelled, the backend's launches waited for, every memory and
 * executable freed. */
static void pw_worker_cleanup(pw_worker_t* w) {
  pw_atomic_store_u32_release(&w->dead, 1);
  pw_worker_heartbeat_join(w);
  pw__worker_outbox_stop(w);
  pw_worker_close_session(w);
  pw__worker_dp_close(w);
  /* Bounded: a backend launch that never returns must not keep the
   * worker from its next controller. What is still running then keeps its
   * pins (its memory is freed when it finishes) and its DONE is dropped
   * (launch.c). */
  pw_time_t deadline = pw_deadline_from_timeout((pw_duration_t)w->drain_ns);
  pthread_mutex_lock(&w->lock);
  while (w->inflight > 0 && pw_deadline_remaining(deadline) > 0) {
    pw_duration_t left = pw_deadline_remaining(deadline);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = ts.tv_nsec + (left < 1000000000 ? left : 1000000000);
    ts.tv_sec += ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    (void)pthread_cond_timedwait(&w->idle, &w->lock, &ts);
  }
  uint64_t left_behind = w->inflight;
  pthread_mutex_unlock(&w->lock);
  if (left_behind > 0) {
    pw_log(&w->logger, PW_LOG_ERROR, "worker",
           "worker %s: %llu launches of the lost session still running after %llu ms: "
           "registering again without them (their memory is freed when they finish)",
           w->name, (unsigned long long)left_behind,
           (unsigned long long)(w->drain_ns / 1000000));
  }
  pw__worker_tables_clear(w);
  w->session_open = false;
}

void pw__worker_session(pw_worker_t* w, const char* url, const void* nonce) {
  int rv = nng_pair0_open(&w->session);
  if (rv != 0) {
    pw_log(&w->logger, PW_LOG_WARN, "worker", "worker %s: session socket: %s", w->name,
           nng_strerror(rv));
    return;
  }
  w->session_open = true;
  pw_atomic_store_u64_release(&w->session_gen, pw_atomic_load_u64_acquire(&w->session_gen) + 1);
  pw_atomic_store_u32_release(&w->dead, 0);
  pw_atomic_store_u32_release(&w->closed, 0);
  w->heartbeat_seq = 0;
  /* queue_seq goes on from the last session: the backend's queues
   * outlive it, and a number it has seen again would be refused. */
  pw_status_t s = pw__wire_nng_limit(w->session);
  pw_status_ignore(s);
  nng_socket_set_ms(w->session, NNG_OPT_SENDTIMEO, PW_WORKER_SEND_TIMEOUT_MS);
  /* DONEs and heartbeats queue while the controller is busy reading. */
  nng_socket_set_int(w->session, NNG_OPT_SENDBUF, 1024);
  /* A session is one connection: when it drops the session is over, so
   * the dialer never redials (an hour is never here). */
  nng_socket_set_ms(w->session, NNG_OPT_RECONNMINT, 3600000);
  nng_socket_set_ms(w->session, NNG_OPT_RECONNMAXT, 3600000);
  pw_atomic_store_u32_release(&w->pipe, 0);
  nng_pipe_notify(w->session, NNG_PIPE_EV_ADD_POST, pw_worker_pipe_event, w);
  nng_pipe_notify(w->session, NNG_PIPE_EV_REM_POST, pw_worker_pipe_event, w);
  nng_dialer dialer;
  s = pw__worker_tls_dialer(w, w->session, url, &dialer);
  rv = s == NULL ? nng_dialer_start(dialer, 0) : NNG_EINVAL;
  if (rv != 0) {
    pw_log(&w->logger, PW_LOG_WARN, "worker", "worker %s: dial session %s of %s: %s%s", w->name,
           url, w->peer, s != NULL ? pw_status_message(s) : nng_strerror(rv),
           rv == NNG_ECRYPTO || rv == NNG_EPEERAUTH ? " (the TLS handshake failed)" : "");
    pw_status_free(s);
    pw_worker_cleanup(w);
    return;
  }
  pw_atomic_fetch_add_u64(&w->n_sessions, 1);
  pw__worker_outbox_start(w);
  pw_wire_msg_t attach = {.type = PW_WIRE_ATTACH};
  attach.u[PW_WIRE_ATTACH_INDEX] = w->index;
  attach.blob[PW_WIRE_ATTACH_B_NONCE] = (pw_wire_blob_t){nonce, PW_WIRE_NONCE_SIZE};
  pw__worker_send(w, &attach);
  pw_atomic_store_u32_release(&w->heartbeat_stop, 0);
  int hb = pthread_create(&w->heartbeat_thread, NULL, pw_worker_heartbeat_main, w);
  w->heartbeat_running = hb == 0;
  if (hb != 0) {
    pw_log(&w->logger, PW_LOG_WARN, "worker",
           "worker %s: no heartbeat thread (error %d): session ended, registering again",
           w->name, hb);
  } else {
    pw_worker_serve(w);
  }
  pw_worker_cleanup(w);
}
