#define _POSIX_C_SOURCE 200809L
/* The data plane (lib/ucx/ucx_link.h): PEER connects to another worker
 * (or to the controller, for host transfers), COPY SEND packs the source
 * rows (or sends straight from a contiguous, host-accessible range) and
 * sends them with the copy's tag, COPY RECV receives them and unpacks them
 * into the destination rows, CANCEL fails the post of a tag. A COPY RECV
 * that cannot place its bytes (unknown memory, bad range) still receives
 * the message into a 1-byte buffer, so that the sender's post completes
 * (UCX cannot take back a send). One link per registration: its address
 * goes into HELLO, and closing it at the session's end fails what is
 * outstanding with CANCELLED. */
#include <stdio.h>
#include <string.h>

#include "plugin/backend_call.h"
#include "ucx/ucx_link.h"
#include "worker/worker_internal.h"

struct pw_worker_dp_s {
  pw_ucx_link_t* link;
  pthread_mutex_t lock;   /* the peer map */
  pw_ucx_peer_t* peers;   /* by worker index */
  bool* connected;
  uint32_t capacity;
  pw_ucx_peer_t controller;
  bool controller_connected;
};

typedef struct pw_worker_remote_t {
  pw_worker_t* w;
  uint64_t id;
  bool recv;
  pw_worker_mem_t* mem;
  size_t offset;
  pw_worker_rows_t rows;
  void* temp;             /* the packed rows, NULL when moved in place */
  size_t received;
  pw_status_t failure;    /* a RECV that could not be placed: drained, then this */
  uint8_t drain[1];
} pw_worker_remote_t;

pw_status_t pw__worker_dp_open(pw_worker_t* w) {
  if (w->no_data_plane || w->dp != NULL) return NULL;
  pw_worker_dp_t* dp = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(w->allocator, sizeof(*dp), 0, (void**)&dp));
  char name[96];
  snprintf(name, sizeof(name), "worker %s", w->name);
  pw_ucx_link_options_t o = {.struct_size = sizeof(o), .allocator = w->allocator,
                             .logger = w->logger, .name = name};
  pw_status_t s = pw__ucx_link_create(&o, &dp->link);
  if (s != NULL) {
    pw_allocator_free(w->allocator, dp, sizeof(*dp));
    return s;
  }
  pthread_mutex_init(&dp->lock, NULL);
  w->dp = dp;
  return NULL;
}

void pw__worker_dp_address(pw_worker_t* w, const void** out_bytes, size_t* out_size) {
  *out_bytes = NULL;
  *out_size = 0;
  if (w->dp != NULL) pw__ucx_link_address(w->dp->link, out_bytes, out_size);
}

void pw__worker_dp_close(pw_worker_t* w) {
  pw_worker_dp_t* dp = w->dp;
  if (dp == NULL) return;
  pw__ucx_link_destroy(dp->link); /* outstanding copies complete CANCELLED */
  w->dp = NULL;
  pw_allocator_free(w->allocator, dp->peers, dp->capacity * sizeof(pw_ucx_peer_t));
  pw_allocator_free(w->allocator, dp->connected, dp->capacity * sizeof(bool));
  pthread_mutex_destroy(&dp->lock);
  pw_allocator_free(w->allocator, dp, sizeof(*dp));
}

static pw_status_t pw_worker_dp_grow(pw_worker_t* w, pw_worker_dp_t* dp, uint32_t index) {
  uint32_t capacity = dp->capacity ? dp->capacity : 16;
  while (capacity <= index) capacity *= 2;
  pw_ucx_peer_t* peers = NULL;
  bool* connected = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc_array(w->allocator, capacity, sizeof(*peers), 0,
                                               (void**)&peers));
  pw_status_t s =
      pw_allocator_calloc_array(w->allocator, capacity, sizeof(bool), 0, (void**)&connected);
  if (s != NULL) {
    pw_allocator_free(w->allocator, peers, capacity * sizeof(*peers));
    return s;
  }
  if (dp->capacity > 0) {
    memcpy(peers, dp->peers, dp->capacity * sizeof(*peers));
    memcpy(connected, dp->connected, dp->capacity * sizeof(bool));
  }
  pw_allocator_free(w->allocator, dp->peers, dp->capacity * sizeof(*peers));
  pw_allocator_free(w->allocator, dp->connected, dp->capacity * sizeof(bool));
  dp->peers = peers;
  dp->connected = connected;
  dp->capacity = capacity;
  return NULL;
}

void pw__worker_on_peer(pw_worker_t* w, const pw_wire_msg_t* msg) {
  uint64_t index = msg->u[PW_WIRE_PEER_INDEX];
  char name[64];
  pw__wire_blob_text(&msg->blob[PW_WIRE_PEER_B_NAME], name, sizeof(name));
  pw_worker_dp_t* dp = w->dp;
  if (dp == NULL) {
    pw_log(&w->logger, PW_LOG_DEBUG, "worker", "worker %s: PEER %s ignored: no data plane",
           w->name, name);
    return;
  }
  if (index != PW_WIRE_PEER_CONTROLLER && index >= (1u << 20)) {
    pw__worker_drop(w, "PEER", pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                                              "worker index %llu", (unsigned long long)index));
    return;
  }
  const pw_wire_blob_t* address = &msg->blob[PW_WIRE_PEER_B_UCX];
  pw_ucx_peer_t peer = 0;
  pw_status_t s = pw__ucx_link_connect(dp->link, address->data, address->size, name, &peer);
  if (s == NULL) {
    pthread_mutex_lock(&dp->lock);
    if (index == PW_WIRE_PEER_CONTROLLER) {
      if (dp->controller_connected) pw__ucx_link_disconnect(dp->link, dp->controller);
      dp->controller = peer;
      dp->controller_connected = true;
    } else {
      if (index >= dp->capacity) s = pw_worker_dp_grow(w, dp, (uint32_t)index);
      if (s == NULL) {
        if (dp->connected[index]) pw__ucx_link_disconnect(dp->link, dp->peers[index]);
        dp->peers[index] = peer;
        dp->connected[index] = true;
      }
    }
    pthread_mutex_unlock(&dp->lock);
    if (s != NULL) pw__ucx_link_disconnect(dp->link, peer);
  }
  if (s != NULL) {
    pw_log(&w->logger, PW_LOG_WARN, "worker", "worker %s: PEER %s (index %llu): %s", w->name,
           name, (unsigned long long)index, pw_status_message(s));
    pw_status_free(s);
  }
}

static void pw_worker_remote_finish(pw_worker_remote_t* op, pw_status_t status) {
  pw_worker_t* w = op->w;
  if (op->failure != NULL) { /* drained: the drain's own status says nothing */
    pw_status_free(status);
    status = op->failure;
  }
  if (status == NULL && op->recv && op->received != op->rows.total) {
    status = pw_status_make(PW_STATUS_DATA_LOSS, "COPY %llu: received %zu bytes of %zu",
                            (unsigned long long)op->id, op->received, op->rows.total);
  }
  if (status == NULL && op->recv && op->temp != NULL) {
    status = pw__worker_rows_unpack(w, &op->rows, op->mem, op->offset, op->temp);
  }
  pw_atomic_fetch_add_u64(&w->n_copies, 1);
  pw__worker_done(w, op->id, status);
  pw__worker_mem_unpin(w, op->mem);
  pw_allocator_free(w->allocator, op->temp, op->rows.total);
  pw_allocator_free(w->allocator, op, sizeof(*op));
  pw__worker_inflight_done(w); /* last: the worker may go once it is 0 */
}

static void pw_worker_remote_done(void* user, pw_status_t status) {
  pw_worker_remote_finish(user, status);
}

/* Finds the peer, pins the memory, packs (SEND) or makes room (RECV). */
static pw_status_t pw_worker_remote_prepare(pw_worker_t* w, const pw_wire_msg_t* msg,
                                            pw_worker_remote_t* op, pw_ucx_peer_t* out_peer,
                                            uint8_t** out_bytes) {
  pw_worker_dp_t* dp = w->dp;
  if (!op->recv) {
    uint64_t index = msg->u[PW_WIRE_COPY_PEER];
    pthread_mutex_lock(&dp->lock);
    bool to_controller = index == PW_WIRE_PEER_CONTROLLER;
    bool known = to_controller ? dp->controller_connected
                               : index < dp->capacity && dp->connected[index];
    if (known) *out_peer = to_controller ? dp->controller : dp->peers[index];
    pthread_mutex_unlock(&dp->lock);
    if (!known && to_controller) {
      return pw_status_make(PW_STATUS_NOT_FOUND,
                            "COPY %llu: %s has no data-plane address of the controller",
                            (unsigned long long)op->id, w->name);
    }
    if (!known) {
      return pw_status_make(PW_STATUS_NOT_FOUND, "COPY %llu: worker %llu is not a peer of %s",
                            (unsigned long long)op->id, (unsigned long long)index, w->name);
    }
  }
  uint64_t mem = msg->u[op->recv ? PW_WIRE_COPY_DST_MEM : PW_WIRE_COPY_SRC_MEM];
  op->offset = (size_t)msg->u[op->recv ? PW_WIRE_COPY_DST_OFFSET : PW_WIRE_COPY_SRC_OFFSET];
  PW_RETURN_IF_ERROR(pw__worker_mem_pin(w, mem, &op->mem));
  PW_RETURN_IF_ERROR(pw__worker_rows_check(&op->rows, op->mem, op->offset, !op->recv,
                                           op->recv ? "COPY RECV destination"
                                                    : "COPY SEND source"));
  uint8_t* host = pw__backend_host_pointer(&w->backend, op->mem->device, op->mem->memory);
  if (op->rows.levels == 0 && host != NULL) {
    *out_bytes = host + op->offset;
    return NULL;
  }
  PW_RETURN_IF_ERROR(pw_allocator_malloc(w->allocator, op->rows.total, 0, &op->temp));
  *out_bytes = op->temp;
  if (!op->recv) return pw__worker_rows_pack(w, &op->rows, op->mem, op->offset, op->temp);
  return NULL;
}

void pw__worker_copy_remote(pw_worker_t* w, const pw_wire_msg_t* msg,
                            const pw_worker_rows_t* rows) {
  uint64_t id = msg->u[PW_WIRE_COPY_ID];
  if (w->dp == NULL) {
    pw_atomic_fetch_add_u64(&w->n_copies, 1);
    pw__worker_done(w, id, pw_status_make(PW_STATUS_UNIMPLEMENTED,
                                          "worker %s: COPY %llu: no data plane", w->name,
                                          (unsigned long long)id));
    return;
  }
  pw_worker_remote_t* op = NULL;
  pw_status_t s = pw_allocator_calloc(w->allocator, sizeof(*op), 0, (void**)&op);
  if (s != NULL) {
    pw_atomic_fetch_add_u64(&w->n_copies, 1);
    pw__worker_done(w, id, s);
    return;
  }
  op->w = w;
  op->id = id;
  op->recv = msg->u[PW_WIRE_COPY_ROLE] == PW_WIRE_COPY_RECV;
  op->rows = *rows;
  pw__worker_inflight_add(w);
  pw_ucx_peer_t peer = 0;
  uint8_t* bytes = NULL;
  s = pw_worker_remote_prepare(w, msg, op, &peer, &bytes);
  uint64_t tag = msg->u[PW_WIRE_COPY_TAG];
  if (s != NULL && op->recv && rows->total > 0) {
    /* Take the message anyway (truncated): the sender's post completes. */
    op->failure = s;
    s = pw__ucx_link_recv(w->dp->link, tag, op->drain, sizeof(op->drain), NULL,
                          pw_worker_remote_done, op);
    if (s != NULL) pw_worker_remote_finish(op, s);
    return;
  }
  if (s != NULL || rows->total == 0) {
    pw_worker_remote_finish(op, s);
    return;
  }
  if (op->recv) {
    s = pw__ucx_link_recv(w->dp->link, tag, bytes, rows->total, &op->received,
                          pw_worker_remote_done, op);
  } else {
    s = pw__ucx_link_send(w->dp->link, peer, tag, bytes, rows->total, pw_worker_remote_done,
                          op);
  }
  if (s != NULL) pw_worker_remote_finish(op, s); /* done never comes for a refused post */
}

void pw__worker_on_cancel(pw_worker_t* w, const pw_wire_msg_t* msg) {
  if (w->dp != NULL) pw__ucx_link_cancel_tag(w->dp->link, msg->u[PW_WIRE_CANCEL_TAG]);
}
