/* One worker's session: the pair0 socket, its reader thread, the pending
 * table of requests, launches and copy parts, heartbeats and loss. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <inttypes.h>
#include <pthread.h>
#include <time.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include <nng/nng.h>
#include <nng/protocol/pair0/pair.h>

#include "remote/remote_internal.h"
#include "wire/wire_nng.h"

#define PW_LOG_SUB "remote"
/* The session reader's receive timeout: how soon it sees a closed pipe
 * (and a stopping remote). 10 ms: a killed worker is lost within it; an
 * idle session costs 100 wake-ups a second. */
#define PW_SESSION_POLL_MS 10

static uint32_t pw_pending_bucket(uint64_t id) {
  return (uint32_t)((id * 0x9E3779B97F4A7C15ull) >> 56) % PW_PENDING_BUCKETS;
}

pw_status_t pw__remote_status(const pw_remote_worker_t* worker, uint64_t code,
                              const pw_wire_blob_t* message) {
  char text[512];
  pw__wire_blob_text(message, text, sizeof(text));
  pw_status_code_t c = code < PW_STATUS_CODE_COUNT ? (pw_status_code_t)code : PW_STATUS_UNKNOWN;
  if (c == PW_STATUS_OK) c = PW_STATUS_INTERNAL;
  return pw_status_make(c, "%s: %s", worker->label, text[0] ? text : "(no message)");
}

uint64_t pw__remote_epoch(pw_remote_worker_t* worker) {
  pthread_mutex_lock(&worker->mu);
  uint64_t epoch = worker->state == PW_RWORKER_ATTACHED ? worker->epoch : 0;
  pthread_mutex_unlock(&worker->mu);
  return epoch;
}

pw_status_t pw__remote_pending_add(pw_remote_worker_t* worker, uint64_t epoch,
                                   pw_pending_t* entry) {
  pthread_mutex_lock(&worker->mu);
  if (worker->state != PW_RWORKER_ATTACHED || (epoch != 0 && epoch != worker->epoch)) {
    pthread_mutex_unlock(&worker->mu);
    return pw_status_make(PW_STATUS_UNAVAILABLE, "%s is lost (not attached)", worker->label);
  }
  uint32_t b = pw_pending_bucket(entry->id);
  entry->next = worker->pending[b];
  worker->pending[b] = entry;
  pthread_mutex_unlock(&worker->mu);
  return NULL;
}

/* Unlinks |entry| from its bucket; caller holds mu. */
static bool pw_pending_unlink(pw_remote_worker_t* worker, pw_pending_t* entry) {
  for (pw_pending_t** p = &worker->pending[pw_pending_bucket(entry->id)]; *p; p = &(*p)->next) {
    if (*p == entry) {
      *p = entry->next;
      entry->next = NULL;
      return true;
    }
  }
  return false;
}

bool pw__remote_pending_take(pw_remote_worker_t* worker, pw_pending_t* entry) {
  pthread_mutex_lock(&worker->mu);
  bool found = pw_pending_unlink(worker, entry);
  pthread_mutex_unlock(&worker->mu);
  return found;
}

/* Finds and unlinks the entry with |id| if it answers to a REPLY
 * (|reply| true: a request) or to a DONE (a launch or copy part); caller
 * holds mu. */
static pw_pending_t* pw_pending_find(pw_remote_worker_t* worker, uint64_t id, bool reply) {
  for (pw_pending_t** p = &worker->pending[pw_pending_bucket(id)]; *p; p = &(*p)->next) {
    if ((*p)->id == id) {
      pw_pending_t* e = *p;
      if ((e->kind == PW_PENDING_REQUEST) != reply) return NULL;
      *p = e->next;
      e->next = NULL;
      return e;
    }
  }
  return NULL;
}

pw_status_t pw__remote_send(pw_remote_worker_t* worker, uint64_t epoch,
                            const pw_wire_msg_t* msg, int flags) {
  pthread_mutex_lock(&worker->mu);
  bool ok = worker->state == PW_RWORKER_ATTACHED && worker->session_open &&
            (epoch == 0 || epoch == worker->epoch);
  nng_socket socket = worker->session;
  uint64_t current = worker->epoch;
  pthread_mutex_unlock(&worker->mu);
  if (!ok) {
    return pw_status_make(PW_STATUS_UNAVAILABLE, "%s is lost (not attached)", worker->label);
  }
  bool now = (flags & PW_REMOTE_SEND_NOW) != 0;
  int nng_flags = flags & ~PW_REMOTE_SEND_NOW;
  pthread_mutex_lock(&worker->out.mu);
  if (worker->out_epoch != current) {
    /* What an earlier session left unsent died with it (its pending
     * entries were completed by the loss). */
    pw__wire_outbox_discard_locked(&worker->out);
    worker->out_epoch = current;
  }
  pw_status_t status = pw__wire_outbox_append_locked(&worker->out, msg, worker->label);
  bool hold = status == NULL && !now && pw__remote_corked(worker) &&
              !pw__wire_outbox_full_locked(&worker->out);
  /* A non-blocking message alone in the frame may be dropped (a
   * heartbeat); with others it must not be: it blocks like them. */
  if (worker->out.count > 1) nng_flags &= ~NNG_FLAG_NONBLOCK;
  bool lost_ok = (nng_flags & NNG_FLAG_NONBLOCK) != 0;
  if (status == NULL && !hold) {
    status = pw__wire_outbox_flush_locked(&worker->out, socket, nng_flags, worker->label);
  }
  pthread_mutex_unlock(&worker->out.mu);
  if (status != NULL && pw_status_code(status) != PW_STATUS_INTERNAL && !lost_ok) {
    pw__remote_session_lose(worker, current, pw_status_message(status));
    return pw_status_annotate(status, "%s lost", worker->label);
  }
  return status;
}

pw_status_t pw__remote_call(pw_remote_worker_t* worker, uint64_t epoch,
                            const pw_wire_msg_t* request, nng_msg** out_raw,
                            pw_wire_msg_t* out_reply) {
  *out_raw = NULL;
  pw_pending_t entry;
  memset(&entry, 0, sizeof(entry));
  entry.id = request->u[0];
  entry.kind = PW_PENDING_REQUEST;
  PW_RETURN_IF_ERROR(pw__remote_pending_add(worker, epoch, &entry));
  pw_status_t status = pw__remote_send(worker, epoch, request, PW_REMOTE_SEND_NOW);
  pw_time_t deadline = pw_deadline_from_timeout(worker->remote->call_timeout_ns);
  pthread_mutex_lock(&worker->mu);
  if (status != NULL) {
    if (!entry.finished) pw_pending_unlink(worker, &entry);
  }
  while (status == NULL && !entry.finished) {
    pw_duration_t left = pw_deadline_remaining(deadline);
    if (left <= 0) {
      pw_pending_unlink(worker, &entry);
      status = pw_status_make(PW_STATUS_DEADLINE_EXCEEDED, "%s: no reply to %s within %" PRId64
                              " ms", worker->label, pw__wire_type_name(request->type),
                              worker->remote->call_timeout_ns / 1000000);
      break;
    }
    int64_t step = left < 50000000 ? left : 50000000;
    struct timespec ts = pw__remote_abstime(step);
    pthread_cond_timedwait(&worker->cond, &worker->mu, &ts);
  }
  pthread_mutex_unlock(&worker->mu);
  if (status != NULL) {
    /* A reply may have landed before the send error was seen. */
    if (entry.finished) pw__wire_nng_release(entry.raw, &entry.reply, worker->remote->allocator);
    pw_status_free(entry.status);
    return status;
  }
  if (entry.status != NULL) return entry.status;
  if (entry.reply.u[PW_WIRE_REPLY_CODE] != 0) {
    status = pw__remote_status(worker, entry.reply.u[PW_WIRE_REPLY_CODE],
                               &entry.reply.blob[PW_WIRE_REPLY_B_MESSAGE]);
    pw__wire_nng_release(entry.raw, &entry.reply, worker->remote->allocator);
    return status;
  }
  *out_raw = entry.raw;
  *out_reply = entry.reply;
  return NULL;
}

/* Completes a launch or copy part taken from the table (no lock held). */
static void pw_pending_complete(pw_remote_worker_t* worker, pw_pending_t* entry,
                                pw_status_t status, const pw_backend_timing_t* timing) {
  pw_allocator_t a = worker->remote->allocator;
  if (entry->kind == PW_PENDING_LAUNCH) {
    if (entry->done_timed != NULL) {
      entry->done_timed(entry->done_user, status, timing);
    } else {
      entry->done(entry->done_user, status);
    }
  } else {
    pw__remote_copy_part_done(entry->copy, worker, status);
  }
  pw_allocator_free(a, entry, sizeof(*entry));
}

void pw__remote_session_lose(pw_remote_worker_t* worker, uint64_t epoch, const char* reason) {
  pw_remote_t* remote = worker->remote;
  pthread_mutex_lock(&worker->mu);
  if (epoch != worker->epoch || worker->state == PW_RWORKER_LOST) {
    pthread_mutex_unlock(&worker->mu);
    return;
  }
  bool was_attached = worker->state == PW_RWORKER_ATTACHED;
  worker->state = PW_RWORKER_LOST;
  worker->losses++;
  for (uint32_t d = 0; d < worker->device_count; ++d) worker->health[d] = PW_DEVICE_FAILED;
  pw_pending_t* taken = NULL;
  for (uint32_t b = 0; b < PW_PENDING_BUCKETS; ++b) {
    pw_pending_t* e = worker->pending[b];
    worker->pending[b] = NULL;
    while (e != NULL) {
      pw_pending_t* next = e->next;
      if (e->kind == PW_PENDING_REQUEST) {
        e->status = pw_status_make(PW_STATUS_UNAVAILABLE, "%s lost: %s", worker->label, reason);
        e->finished = true;
        e->next = NULL;
      } else {
        e->next = taken;
        taken = e;
      }
      e = next;
    }
  }
  /* The reader closes the socket on its way out (within its
   * PW_SESSION_POLL_MS receive timeout): nng_close under mu, or from a
   * thread nng waits on, can deadlock. */
  worker->session_open = false;
  pthread_cond_broadcast(&worker->cond);
  pthread_mutex_unlock(&worker->mu);
  /* A sender holding the outbox may be blocked in nng up to the send
   * timeout: then the next send's epoch check discards what is left. */
  if (pthread_mutex_trylock(&worker->out.mu) == 0) {
    if (worker->out_epoch == epoch) pw__wire_outbox_discard_locked(&worker->out);
    pthread_mutex_unlock(&worker->out.mu);
  }

  pw_log(&remote->logger, PW_LOG_WARN, PW_LOG_SUB, "%s (session %" PRIu64 ") lost: %s",
         worker->label, epoch, reason);
  if (was_attached) {
    pthread_mutex_lock(&remote->mu);
    remote->attached--;
    pthread_cond_broadcast(&remote->cond);
    pthread_mutex_unlock(&remote->mu);
  }
  pw__remote_dp_detach(worker);
  while (taken != NULL) {
    pw_pending_t* next = taken->next;
    pw_pending_complete(worker, taken,
                        pw_status_make(PW_STATUS_UNAVAILABLE, "%s lost: %s", worker->label,
                                       reason),
                        NULL);
    taken = next;
  }
}

/* Tells the new worker of every attached one and them of it. */
static void pw_session_announce(pw_remote_worker_t* worker) {
  pw_remote_t* remote = worker->remote;
  pw_remote_worker_t* others[PW_REMOTE_MAX_WORKERS];
  uint32_t n = 0;
  pthread_mutex_lock(&remote->mu);
  for (uint32_t i = 0; i < remote->worker_count; ++i) {
    if (remote->workers[i] != worker) others[n++] = remote->workers[i];
  }
  pthread_mutex_unlock(&remote->mu);
  if (worker->ucx_size == 0) return;
  for (uint32_t i = 0; i < n; ++i) {
    pw_remote_worker_t* o = others[i];
    pthread_mutex_lock(&o->mu);
    bool live = o->state == PW_RWORKER_ATTACHED && o->ucx_size > 0;
    pthread_mutex_unlock(&o->mu);
    if (!live) continue;
    pw_wire_msg_t to_new = {.type = PW_WIRE_PEER};
    to_new.u[PW_WIRE_PEER_INDEX] = o->index;
    to_new.blob[PW_WIRE_PEER_B_NAME] = (pw_wire_blob_t){o->name, strlen(o->name)};
    to_new.blob[PW_WIRE_PEER_B_UCX] = (pw_wire_blob_t){o->ucx_address, o->ucx_size};
    pw_status_free(pw__remote_send(worker, 0, &to_new, 0));
    pw_wire_msg_t to_old = {.type = PW_WIRE_PEER};
    to_old.u[PW_WIRE_PEER_INDEX] = worker->index;
    to_old.blob[PW_WIRE_PEER_B_NAME] = (pw_wire_blob_t){worker->name, strlen(worker->name)};
    to_old.blob[PW_WIRE_PEER_B_UCX] = (pw_wire_blob_t){worker->ucx_address, worker->ucx_size};
    pw_status_free(pw__remote_send(o, 0, &to_old, 0));
  }
}

/* The first message of a session: ATTACH with the index and nonce. */
static bool pw_session_attach(pw_remote_worker_t* worker, uint64_t epoch, nng_msg* raw,
                              const pw_wire_msg_t* msg) {
  pw_remote_t* remote = worker->remote;
  bool match = msg->type == PW_WIRE_ATTACH && msg->u[PW_WIRE_ATTACH_INDEX] == worker->index &&
               msg->blob[PW_WIRE_ATTACH_B_NONCE].size == PW_WIRE_NONCE_SIZE;
  uint8_t diff = 0;
  if (match) {
    const uint8_t* got = msg->blob[PW_WIRE_ATTACH_B_NONCE].data;
    for (uint32_t i = 0; i < PW_WIRE_NONCE_SIZE; ++i) diff |= (uint8_t)(got[i] ^ worker->nonce[i]);
  }
  if (!match || diff != 0) {
    pw_log(&remote->logger, PW_LOG_WARN, PW_LOG_SUB,
           "%s session: refused a peer that sent %s without the session's nonce",
           worker->label, pw__wire_type_name(msg->type));
    nng_pipe_close(nng_msg_get_pipe(raw));
    return false;
  }
  pthread_mutex_lock(&worker->mu);
  bool current = worker->epoch == epoch && worker->state == PW_RWORKER_WELCOMED;
  if (current) {
    worker->state = PW_RWORKER_ATTACHED;
    worker->sessions++;
    worker->pipe_id = nng_pipe_id(nng_msg_get_pipe(raw));
    for (uint32_t d = 0; d < worker->device_count; ++d) worker->health[d] = PW_DEVICE_HEALTHY;
    atomic_store(&worker->last_rx, pw_clock_now());
  }
  pthread_mutex_unlock(&worker->mu);
  if (!current) return false;
  pthread_mutex_lock(&remote->mu);
  remote->attached++;
  pthread_cond_broadcast(&remote->cond);
  pthread_mutex_unlock(&remote->mu);
  pw_log(&remote->logger, PW_LOG_INFO, PW_LOG_SUB, "%s attached (session %" PRIu64 ", %u devices)",
         worker->label, epoch, worker->device_count);
  pw__remote_dp_attach(worker);
  pw_session_announce(worker);
  return true;
}

static void pw_session_heartbeat(pw_remote_worker_t* worker, const pw_wire_msg_t* msg) {
  if (msg->list_count != worker->device_count) return;
  pthread_mutex_lock(&worker->mu);
  if (worker->state == PW_RWORKER_ATTACHED) {
    for (uint32_t d = 0; d < worker->device_count; ++d) {
      uint64_t h = msg->list[d];
      worker->health[d] = (uint8_t)(h <= PW_DEVICE_FAILED ? h : PW_DEVICE_FAILED);
    }
  }
  pthread_mutex_unlock(&worker->mu);
}

/* DONE: completes the launch or copy part with that id. */
static void pw_session_done(pw_remote_worker_t* worker, const pw_wire_msg_t* msg) {
  pthread_mutex_lock(&worker->mu);
  pw_pending_t* e = pw_pending_find(worker, msg->u[PW_WIRE_DONE_ID], false);
  pthread_mutex_unlock(&worker->mu);
  if (e == NULL) {
    pw_log(&worker->remote->logger, PW_LOG_WARN, PW_LOG_SUB,
           "%s: DONE for unknown id %" PRIu64 " ignored", worker->label, msg->u[PW_WIRE_DONE_ID]);
    return;
  }
  pw_status_t status = NULL;
  if (msg->u[PW_WIRE_DONE_CODE] != 0) {
    status = pw__remote_status(worker, msg->u[PW_WIRE_DONE_CODE], &msg->blob[PW_WIRE_DONE_B_MESSAGE]);
  }
  pw_backend_timing_t timing = {sizeof(timing), msg->u[PW_WIRE_DONE_START_NS],
                                msg->u[PW_WIRE_DONE_END_NS], msg->u[PW_WIRE_DONE_BUSY_NS]};
  bool timed = timing.end_ns >= timing.start_ns && timing.end_ns != 0;
  pw_pending_complete(worker, e, status, timed ? &timing : NULL);
}

/* REPLY: hands the message to the waiting request. True if it took |raw|. */
static bool pw_session_reply(pw_remote_worker_t* worker, nng_msg* raw, const pw_wire_msg_t* msg) {
  pthread_mutex_lock(&worker->mu);
  pw_pending_t* e = pw_pending_find(worker, msg->u[PW_WIRE_REPLY_ID], true);
  bool taken = false;
  if (e != NULL) {
    e->raw = raw;
    e->reply = *msg;
    e->finished = true;
    taken = true;
    pthread_cond_broadcast(&worker->cond);
  }
  pthread_mutex_unlock(&worker->mu);
  if (!taken) {
    pw_log(&worker->remote->logger, PW_LOG_DEBUG, PW_LOG_SUB,
           "%s: REPLY for id %" PRIu64 " nobody waits for (timed out?)", worker->label,
           msg->u[PW_WIRE_REPLY_ID]);
  }
  return taken;
}

typedef struct pw_reader_arg_s {
  pw_remote_worker_t* worker;
  uint64_t epoch;
  nng_socket socket;
} pw_reader_arg_t;

/* Handles one decoded message of an attached session; true if it kept
 * |raw|. */
static bool pw_session_dispatch(pw_remote_worker_t* worker, uint64_t epoch, nng_msg* raw,
                                pw_wire_msg_t* msg) {
  switch (msg->type) {
    case PW_WIRE_HEARTBEAT:
      pw_session_heartbeat(worker, msg);
      return false;
    case PW_WIRE_DONE:
      pw_session_done(worker, msg);
      return false;
    case PW_WIRE_REPLY:
      return pw_session_reply(worker, raw, msg);
    case PW_WIRE_BYE: {
      char reason[256], text[300];
      pw__wire_blob_text(&msg->blob[PW_WIRE_REASON_B], reason, sizeof(reason));
      snprintf(text, sizeof(text), "the worker ended the session (%s)", reason);
      pw__remote_session_lose(worker, epoch, text);
      return false;
    }
    default:
      pw_log(&worker->remote->logger, PW_LOG_WARN, PW_LOG_SUB,
             "%s: unexpected %s message dropped", worker->label, pw__wire_type_name(msg->type));
      return false;
  }
}

/* A REPLY that is not the last message of its frame gets a copy of the
 * frame to own (its blobs rebased), so the reader can go on reading. */
static nng_msg* pw_session_reply_copy(nng_msg* raw, pw_wire_msg_t* msg) {
  nng_msg* copy = NULL;
  if (nng_msg_dup(&copy, raw) != 0) return NULL;
  const unsigned char* from = nng_msg_body(raw);
  unsigned char* to = nng_msg_body(copy);
  for (uint32_t i = 0; i < PW_WIRE_MAX_BLOB; ++i) {
    if (msg->blob[i].data != NULL) {
      msg->blob[i].data = to + ((const unsigned char*)msg->blob[i].data - from);
    }
  }
  return copy;
}

/* Handles every message of one received frame, corked: the launches its
 * completions release leave together. Returns whether the session is
 * attached after it (the first message of a session must be ATTACH). */
static bool pw_session_frame(pw_remote_worker_t* worker, uint64_t epoch, nng_msg* raw,
                             bool attached) {
  pw_remote_t* remote = worker->remote;
  const unsigned char* body = nng_msg_body(raw);
  size_t size = nng_msg_len(raw), offset = 0;
  uint64_t count = 0;
  bool raw_kept = false;
  atomic_fetch_add(&worker->frames_received, 1);
  pw__remote_cork();
  while (offset < size && !raw_kept) {
    pw_wire_msg_t msg;
    pw_status_t status =
        pw__wire_decode_next(body, size, &offset, 0, remote->allocator, &msg);
    if (status != NULL) {
      pw_log(&remote->logger, PW_LOG_WARN, PW_LOG_SUB, "%s: dropped a bad message: %s",
             worker->label, pw_status_message(status));
      pw_status_free(status);
      continue;
    }
    ++count;
    atomic_fetch_add(&worker->messages_received, 1);
    if (!attached) {
      /* Only a frame's first message may attach. */
      attached = count == 1 && pw_session_attach(worker, epoch, raw, &msg);
      pw__wire_msg_release(&msg, remote->allocator);
      if (!attached) break;
      continue;
    }
    atomic_store(&worker->last_rx, pw_clock_now());
    bool last = offset == size;
    nng_msg* own = raw;
    if (msg.type == PW_WIRE_REPLY && !last) own = pw_session_reply_copy(raw, &msg);
    bool kept = own != NULL && pw_session_dispatch(worker, epoch, own, &msg);
    if (kept && own == raw) raw_kept = true;
    if (!kept) {
      if (own != NULL && own != raw) nng_msg_free(own);
      pw__wire_msg_release(&msg, remote->allocator);
    }
  }
  pw__remote_uncork();
  if (!raw_kept) nng_msg_free(raw);
  return attached;
}

static bool pw_session_peer_closed(pw_remote_worker_t* worker, uint64_t epoch);

static void* pw_session_reader(void* arg) {
  pw_reader_arg_t a = *(pw_reader_arg_t*)arg;
  pw_remote_worker_t* worker = a.worker;
  pw_remote_t* remote = worker->remote;
  pw_allocator_free(remote->allocator, arg, sizeof(pw_reader_arg_t));
  bool attached = false;
  for (;;) {
    nng_msg* raw = NULL;
    int rv = nng_recvmsg(a.socket, &raw, 0);
    if (rv == NNG_ETIMEDOUT && attached && pw_session_peer_closed(worker, a.epoch)) {
      pw__remote_session_lose(worker, a.epoch, "the connection closed");
      break;
    }
    if (rv == NNG_ETIMEDOUT) {
      pthread_mutex_lock(&worker->mu);
      bool gone = worker->epoch != a.epoch || worker->state == PW_RWORKER_LOST;
      pthread_mutex_unlock(&worker->mu);
      if (gone || atomic_load(&remote->stopping)) break;
      continue;
    }
    if (rv != 0) {
      char text[128];
      snprintf(text, sizeof(text), "session receive failed: %s", nng_strerror(rv));
      pw__remote_session_lose(worker, a.epoch, text);
      break;
    }
    attached = pw_session_frame(worker, a.epoch, raw, attached);
  }
  /* The peer's pipe first: no message arrives after the drain that
   * pw__wire_nng_close does, so nng_close has none to wait for. */
  pthread_mutex_lock(&worker->mu);
  int pipe_id = worker->epoch == a.epoch ? worker->pipe_id : 0;
  pthread_mutex_unlock(&worker->mu);
  if (pipe_id > 0) nng_pipe_close((nng_pipe){.id = (uint32_t)pipe_id});
  pw__wire_nng_close(a.socket);
  return NULL;
}

/* A pipe closed: noted for the reader (nng_close may not run inside a
 * pipe callback), which loses the session if it was the attached peer's
 * at its next receive timeout: a worker whose connection closes (killed,
 * crashed) is lost within PW_SESSION_POLL_MS, not after the heartbeat
 * bound. */
static void pw_session_pipe_event(nng_pipe pipe, nng_pipe_ev event, void* arg) {
  (void)event;
  pw_remote_worker_t* worker = arg;
  atomic_store(&worker->closed_pipe, nng_pipe_id(pipe));
}

/* True if the attached peer's pipe closed. */
static bool pw_session_peer_closed(pw_remote_worker_t* worker, uint64_t epoch) {
  int closed = atomic_load(&worker->closed_pipe);
  if (closed <= 0) return false;
  pthread_mutex_lock(&worker->mu);
  bool gone = worker->epoch == epoch && worker->state == PW_RWORKER_ATTACHED &&
              worker->pipe_id == closed;
  pthread_mutex_unlock(&worker->mu);
  return gone;
}

void pw__remote_session_join(pw_remote_worker_t* worker) {
  pthread_mutex_lock(&worker->mu);
  bool joinable = worker->reader_joinable;
  pthread_t reader = worker->reader;
  worker->reader_joinable = false;
  pthread_mutex_unlock(&worker->mu);
  if (!joinable) return;
  /* Bounded: nng 1.5.2's close of a session whose peer was stopped
   * (SIGSTOP, a full TCP window) can block for ever. A reader touches
   * nothing of the worker once it is closing, so it is left behind
   * (logged) rather than keeping the worker from registering again or
   * the remote from going. */
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += PW_SESSION_JOIN_S;
  if (pthread_timedjoin_np(reader, NULL, &until) != 0) {
    pthread_detach(reader);
    pw_log(&worker->remote->logger, PW_LOG_ERROR, PW_LOG_SUB,
           "%s: the old session's reader still closes its socket after %d s (nng); left behind",
           worker->label, PW_SESSION_JOIN_S);
  }
}

static pw_status_t pw_session_socket(pw_remote_worker_t* worker, nng_socket* out_socket,
                                     nng_listener* out_listener, char* url, size_t capacity) {
  pw_remote_t* remote = worker->remote;
  nng_socket s;
  int rv = nng_pair0_open(&s);
  if (rv != 0) return pw__wire_nng_status(rv, "session socket for", worker->label);
  pw_status_t status = pw__wire_nng_limit(s);
  pw_duration_t bound = remote->heartbeat_ns * (pw_duration_t)remote->heartbeat_misses;
  if (status == NULL) {
    nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, PW_SESSION_POLL_MS);
    nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, (nng_duration)(bound / 1000000 + 1));
    nng_socket_set_int(s, NNG_OPT_SENDBUF, 8192);
    nng_socket_set_int(s, NNG_OPT_RECVBUF, 8192);
    nng_pipe_notify(s, NNG_PIPE_EV_REM_POST, pw_session_pipe_event, worker);
    char listen[256];
    snprintf(listen, sizeof(listen), "%s://%s:0", remote->scheme, remote->host);
    nng_listener l;
    rv = nng_listener_create(&l, s, listen);
    if (rv == 0) status = pw__remote_tls_listener(remote, l, "session listener");
    if (rv == 0 && status == NULL) rv = nng_listener_start(l, 0);
    int port = 0;
    if (rv == 0 && status == NULL) rv = nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &port);
    if (rv != 0) {
      status = pw__wire_nng_status(rv, "session listener for", worker->label);
    } else if (status == NULL) {
      snprintf(url, capacity, "%s://%s:%d", remote->scheme, remote->host, port);
      *out_listener = l;
    }
  }
  if (status != NULL) {
    nng_close(s);
    return status;
  }
  *out_socket = s;
  return NULL;
}

pw_status_t pw__remote_session_open(pw_remote_worker_t* worker, char* url, size_t capacity) {
  pw__remote_session_join(worker);
  nng_socket s;
  nng_listener l = NNG_LISTENER_INITIALIZER;
  PW_RETURN_IF_ERROR(pw_session_socket(worker, &s, &l, url, capacity));
  uint8_t nonce[PW_WIRE_NONCE_SIZE];
  if (getrandom(nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce)) {
    nng_close(s);
    return pw_status_make(PW_STATUS_UNAVAILABLE, "no random bytes for %s's nonce", worker->label);
  }
  pw_reader_arg_t* arg = NULL;
  pw_status_t status = pw_allocator_malloc(worker->remote->allocator, sizeof(*arg), 0,
                                           (void**)&arg);
  if (status != NULL) {
    nng_close(s);
    return status;
  }
  pthread_mutex_lock(&worker->mu);
  worker->epoch++;
  worker->state = PW_RWORKER_WELCOMED;
  worker->session = s;
  worker->session_open = true;
  worker->session_listener = l;
  worker->tls_refused = 0;
  worker->welcomed_at = pw_clock_now();
  memcpy(worker->nonce, nonce, sizeof(nonce));
  *arg = (pw_reader_arg_t){worker, worker->epoch, s};
  int rv = pthread_create(&worker->reader, NULL, pw_session_reader, arg);
  worker->reader_joinable = rv == 0;
  if (rv != 0) {
    worker->state = PW_RWORKER_LOST;
    worker->session_open = false;
  }
  pthread_mutex_unlock(&worker->mu);
  if (rv != 0) {
    nng_close(s);
    pw_allocator_free(worker->remote->allocator, arg, sizeof(*arg));
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "no thread for %s's session",
                          worker->label);
  }
  return NULL;
}

void pw__remote_session_tick(pw_remote_worker_t* worker, pw_time_t now) {
  pw_remote_t* remote = worker->remote;
  pthread_mutex_lock(&worker->mu);
  pw_rworker_state_t state = worker->state;
  uint64_t epoch = worker->epoch;
  pw_time_t welcomed = worker->welcomed_at;
  uint64_t seq = ++worker->heartbeat_seq;
  pthread_mutex_unlock(&worker->mu);
  pw_duration_t bound = remote->heartbeat_ns * (pw_duration_t)remote->heartbeat_misses;
  if (state == PW_RWORKER_WELCOMED) {
    pw_duration_t attach_bound = bound > 5000000000 ? bound : 5000000000;
    if (now - welcomed > attach_bound) {
      pw__remote_session_lose(worker, epoch, "did not attach after registering");
    }
    return;
  }
  if (state != PW_RWORKER_ATTACHED) return;
  pw_duration_t silent = now - atomic_load(&worker->last_rx);
  if (silent > bound) {
    char text[160];
    snprintf(text, sizeof(text), "no message for %" PRId64 " ms (%u heartbeats of %" PRId64
             " ms missed)", silent / 1000000, remote->heartbeat_misses,
             remote->heartbeat_ns / 1000000);
    pw__remote_session_lose(worker, epoch, text);
    return;
  }
  pw_wire_msg_t hb = {.type = PW_WIRE_HEARTBEAT};
  hb.u[PW_WIRE_HEARTBEAT_SEQ] = seq;
  pw_status_free(pw__remote_send(worker, epoch, &hb, NNG_FLAG_NONBLOCK));
}
