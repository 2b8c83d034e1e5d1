/* The controller's end of the data plane (lib/ucx/ucx_link.h): host
 * copies of large buffers between this process and a worker without the
 * control plane carrying the bytes. The controller has one link; at each
 * attach it connects to the worker's address and sends the worker a PEER
 * with index PW_WIRE_PEER_CONTROLLER and its own address.
 *
 * A host write is a COPY RECV on the worker (the bytes from the
 * controller, with the copy's tag) and a send of the caller's buffer; a
 * host read is a receive posted here into the caller's buffer and a COPY
 * SEND on the worker to the controller. Both are one pw_remote_copy_t of
 * two parts (the worker's DONE and the local post) and block until both
 * are done: a worker that is lost resolves its part UNAVAILABLE, its
 * endpoint here is closed (the local send fails) and the local receive is
 * cancelled, so the wait ends within the heartbeat bound. A worker that
 * cannot place the bytes still takes the message (copy_remote.c), so a
 * local send always completes. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <string.h>

#include "remote/remote_internal.h"
#include "ucx/ucx_link.h"

#define PW_LOG_SUB "remote"

struct pw_remote_dp_s {
  pw_ucx_link_t* link;
};

void pw__remote_dp_open(pw_remote_t* remote) {
  pw_remote_dp_t* dp = NULL;
  pw_status_t s = pw_allocator_calloc(remote->allocator, sizeof(*dp), 0, (void**)&dp);
  if (s == NULL) {
    pw_ucx_link_options_t o = {.struct_size = sizeof(o), .allocator = remote->allocator,
                               .logger = remote->logger, .name = "controller"};
    s = pw__ucx_link_create(&o, &dp->link);
  }
  if (s != NULL) {
    pw_log(&remote->logger, PW_LOG_WARN, PW_LOG_SUB,
           "no data plane in the controller (%s): host copies go over the control plane",
           pw_status_message(s));
    pw_status_free(s);
    if (dp != NULL) pw_allocator_free(remote->allocator, dp, sizeof(*dp));
    return;
  }
  remote->dp = dp;
}

void pw__remote_dp_close(pw_remote_t* remote) {
  pw_remote_dp_t* dp = remote->dp;
  if (dp == NULL) return;
  pw__ucx_link_destroy(dp->link);
  remote->dp = NULL;
  pw_allocator_free(remote->allocator, dp, sizeof(*dp));
}

void pw__remote_dp_attach(pw_remote_worker_t* w) {
  pw_remote_t* remote = w->remote;
  if (remote->dp == NULL || w->ucx_size == 0) return;
  pw_ucx_peer_t peer = 0;
  pw_status_t s = pw__ucx_link_connect(remote->dp->link, w->ucx_address, w->ucx_size, w->label,
                                       &peer);
  if (s != NULL) {
    pw_log(&remote->logger, PW_LOG_WARN, PW_LOG_SUB,
           "%s: no data plane to it (%s): host copies go over the control plane", w->label,
           pw_status_message(s));
    pw_status_free(s);
    return;
  }
  pthread_mutex_lock(&w->mu);
  bool had = w->dp_connected;
  pw_ucx_peer_t old = w->dp_peer;
  w->dp_peer = peer;
  w->dp_connected = true;
  pthread_mutex_unlock(&w->mu);
  if (had) pw__ucx_link_disconnect(remote->dp->link, old);
  const void* address = NULL;
  size_t size = 0;
  pw__ucx_link_address(remote->dp->link, &address, &size);
  static const char kName[] = "controller";
  pw_wire_msg_t msg = {.type = PW_WIRE_PEER};
  msg.u[PW_WIRE_PEER_INDEX] = PW_WIRE_PEER_CONTROLLER;
  msg.blob[PW_WIRE_PEER_B_NAME] = (pw_wire_blob_t){kName, sizeof(kName) - 1};
  msg.blob[PW_WIRE_PEER_B_UCX] = (pw_wire_blob_t){address, size};
  pw_status_free(pw__remote_send(w, 0, &msg, 0));
}

void pw__remote_dp_detach(pw_remote_worker_t* w) {
  if (w->remote->dp == NULL) return;
  pthread_mutex_lock(&w->mu);
  bool had = w->dp_connected;
  w->dp_connected = false;
  pthread_mutex_unlock(&w->mu);
  if (had) pw__ucx_link_disconnect(w->remote->dp->link, w->dp_peer); /* its sends fail */
}

bool pw__remote_dp_usable(pw_remote_worker_t* w) {
  if (w->remote->dp == NULL) return false;
  pthread_mutex_lock(&w->mu);
  bool usable = w->dp_connected && w->state == PW_RWORKER_ATTACHED;
  pthread_mutex_unlock(&w->mu);
  return usable;
}

void pw__remote_dp_cancel(pw_remote_t* remote, uint64_t tag) {
  if (remote->dp != NULL) pw__ucx_link_cancel_tag(remote->dp->link, tag);
}

/* One blocking host copy: the caller's stack holds it until both parts. */
typedef struct pw_dp_call_s {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool finished;
  pw_status_t status;
  pw_remote_copy_t* copy;
  pw_remote_worker_t* w;
  bool write;
  size_t size;
  size_t received;
} pw_dp_call_t;

static void pw_dp_call_done(void* user, pw_status_t status) {
  pw_dp_call_t* call = user;
  pthread_mutex_lock(&call->mu);
  call->status = status;
  call->finished = true;
  pthread_cond_broadcast(&call->cv);
  pthread_mutex_unlock(&call->mu);
}

static void pw_dp_local_done(void* user, pw_status_t status) {
  pw_dp_call_t* call = user;
  if (status == NULL && !call->write && call->received != call->size) {
    status = pw_status_make(PW_STATUS_DATA_LOSS, "%s: host read got %zu of %zu bytes",
                            call->w->label, call->received, call->size);
  }
  pw__remote_copy_part_done(call->copy, NULL, status);
}

pw_status_t pw__remote_dp_host_copy(pw_remote_worker_t* w, const pw_remote_mem_t* mem,
                                    size_t offset, void* buf, size_t size, bool write) {
  pw_remote_t* remote = w->remote;
  pthread_mutex_lock(&w->mu);
  pw_ucx_peer_t peer = w->dp_peer;
  pthread_mutex_unlock(&w->mu);
  pw_dp_call_t call = {.w = w, .write = write, .size = size};
  PW_RETURN_IF_ERROR(pw_allocator_calloc(remote->allocator, sizeof(*call.copy), 0,
                                         (void**)&call.copy));
  pw_remote_copy_t* copy = call.copy;
  atomic_init(&copy->parts_left, 2u);
  atomic_init(&copy->first_error, NULL);
  copy->done = pw_dp_call_done;
  copy->done_user = &call;
  copy->tag = pw__remote_next_id(remote);
  copy->side[0] = w;
  copy->local_part = true;
  pthread_mutex_init(&call.mu, NULL);
  pthread_cond_init(&call.cv, NULL);
  pw_wire_msg_t msg = {.type = PW_WIRE_COPY};
  msg.u[PW_WIRE_COPY_ROLE] = write ? PW_WIRE_COPY_RECV : PW_WIRE_COPY_SEND;
  msg.u[write ? PW_WIRE_COPY_DST_MEM : PW_WIRE_COPY_SRC_MEM] = mem->id;
  msg.u[write ? PW_WIRE_COPY_DST_OFFSET : PW_WIRE_COPY_SRC_OFFSET] = offset;
  msg.u[PW_WIRE_COPY_SIZE] = size;
  msg.u[PW_WIRE_COPY_PEER] = PW_WIRE_PEER_CONTROLLER;
  msg.u[PW_WIRE_COPY_TAG] = copy->tag;
  pw_status_t posted = NULL;
  if (write) {
    /* The worker's receive first; the send whenever its COPY went out
     * (a worker that fails it still drains the message). */
    if (!pw__remote_copy_send_part(w, mem->epoch, copy, &msg)) {
      posted = pw_status_make(PW_STATUS_CANCELLED, "%s: host write not started", w->label);
    } else {
      posted = pw__ucx_link_send(remote->dp->link, peer, copy->tag, buf, size, pw_dp_local_done,
                                 &call);
    }
    if (posted != NULL) pw__remote_copy_part_done(copy, NULL, posted);
  } else {
    /* The receive here first (it can be cancelled), then the worker's send. */
    posted = pw__ucx_link_recv(remote->dp->link, copy->tag, buf, size, &call.received,
                               pw_dp_local_done, &call);
    if (posted != NULL) {
      pw__remote_copy_part_done(copy, NULL, posted); /* the COPY is never sent */
      pw__remote_copy_part_done(copy, w, NULL);
    } else {
      pw__remote_copy_send_part(w, mem->epoch, copy, &msg);
    }
  }
  pthread_mutex_lock(&call.mu);
  while (!call.finished) pthread_cond_wait(&call.cv, &call.mu);
  pthread_mutex_unlock(&call.mu);
  pthread_mutex_destroy(&call.mu);
  pthread_cond_destroy(&call.cv);
  return call.status;
}
