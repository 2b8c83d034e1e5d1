/* The link's sends and receives: posting them to UCX, UCX's callbacks,
 * cancellation and the delivery of each op's done exactly once
 * (ucx_link_internal.h says who holds the lock when). */
#include <string.h>

#include "ucx/ucx_link_internal.h"

void pw__ucx_list_init(pw_ucx_op_t* sentinel) {
  sentinel->prev = sentinel;
  sentinel->next = sentinel;
}

void pw__ucx_list_push(pw_ucx_op_t* sentinel, pw_ucx_op_t* op) {
  op->prev = sentinel->prev;
  op->next = sentinel;
  sentinel->prev->next = op;
  sentinel->prev = op;
}

void pw__ucx_list_remove(pw_ucx_op_t* op) {
  op->prev->next = op->next;
  op->next->prev = op->prev;
  op->prev = op;
  op->next = op;
}

static const char* pw_ucx_peer_name(const pw_ucx_link_t* link, pw_ucx_peer_t peer) {
  if (peer < link->peer_count && link->peers[peer] != NULL) return link->peers[peer]->name;
  return "?";
}

/* UCX gave the op back (|mu| held: callbacks run inside ucp calls). */
static void pw_ucx_op_finish(pw_ucx_op_t* op, ucs_status_t status) {
  if (op->abandoned) return;
  pw_ucx_link_t* link = op->link;
  op->ucx_status = status;
  op->finished = true;
  pw__ucx_list_remove(op);
  link->outstanding_count--;
  pw__ucx_list_push(&link->finished, op);
}

static void pw_ucx_send_cb(void* request, ucs_status_t status, void* user_data) {
  (void)request;
  pw_ucx_op_finish((pw_ucx_op_t*)user_data, status);
}

static void pw_ucx_recv_cb(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                           void* user_data) {
  (void)request;
  pw_ucx_op_t* op = (pw_ucx_op_t*)user_data;
  if (info != NULL && (status == UCS_OK || status == UCS_ERR_MESSAGE_TRUNCATED)) {
    op->received = info->length;
  }
  pw_ucx_op_finish(op, status);
}

pw_status_t pw__ucx_op_status(const pw_ucx_link_t* link, const pw_ucx_op_t* op) {
  const char* what = op->kind == PW_UCX_OP_SEND ? "send" : "receive";
  unsigned long long tag = (unsigned long long)op->tag;
  if (op->cancelled) {
    return pw_status_make(PW_STATUS_CANCELLED, "ucx link %s: %s tag %llu cancelled", link->name,
                          what, tag);
  }
  if (op->kind == PW_UCX_OP_SEND) {
    const pw_ucx_peer_s* peer = op->peer < link->peer_count ? link->peers[op->peer] : NULL;
    const char* name = pw_ucx_peer_name(link, op->peer);
    if (peer != NULL && peer->state == PW_UCX_PEER_FAILED) {
      return pw_status_make(PW_STATUS_UNAVAILABLE,
                            "ucx link %s: send tag %llu to peer %s: endpoint failed: %s",
                            link->name, tag, name, peer->failure);
    }
    if (peer != NULL && peer->state == PW_UCX_PEER_CLOSED) {
      return pw_status_make(PW_STATUS_CANCELLED,
                            "ucx link %s: send tag %llu to peer %s: peer disconnected",
                            link->name, tag, name);
    }
    if (op->ucx_status == UCS_OK) return NULL;
    return pw_status_make(PW_STATUS_UNAVAILABLE, "ucx link %s: send tag %llu to peer %s: %s",
                          link->name, tag, name, ucs_status_string(op->ucx_status));
  }
  switch (op->ucx_status) {
    case UCS_OK:
      return NULL;
    case UCS_ERR_MESSAGE_TRUNCATED:
      return pw_status_make(PW_STATUS_OUT_OF_RANGE,
                            "ucx link %s: receive tag %llu: the message (%zu bytes) is larger "
                            "than the buffer of %zu bytes",
                            link->name, tag, op->received, op->capacity);
    case UCS_ERR_CANCELED:
      return pw_status_make(PW_STATUS_CANCELLED, "ucx link %s: receive tag %llu cancelled",
                            link->name, tag);
    default:
      return pw_status_make(PW_STATUS_UNAVAILABLE, "ucx link %s: receive tag %llu: %s",
                            link->name, tag, ucs_status_string(op->ucx_status));
  }
}

void pw__ucx_deliver(pw_ucx_link_t* link) {
  for (;;) {
    pthread_mutex_lock(&link->mu);
    if (link->finished.next == &link->finished) {
      pthread_mutex_unlock(&link->mu);
      return;
    }
    /* Take the whole list; compute the statuses while the peers' states
     * are stable, and give the requests back to UCX. */
    pw_ucx_op_t* first = link->finished.next;
    link->finished.prev->next = NULL;
    pw__ucx_list_init(&link->finished);
    for (pw_ucx_op_t* op = first; op != NULL; op = op->next) {
      op->result = pw__ucx_op_status(link, op);
      if (op->request != NULL) {
        ucp_request_free(op->request);
        op->request = NULL;
      }
    }
    pthread_mutex_unlock(&link->mu);
    pw_ucx_op_t* op = first;
    while (op != NULL) {
      pw_ucx_op_t* next = op->next;
      if (op->kind == PW_UCX_OP_RECV && op->out_size != NULL) {
        *op->out_size = op->result == NULL ? op->received : 0;
      }
      pw_ucx_done_fn_t done = op->done;
      void* user = op->user;
      pw_status_t status = op->result;
      pw_allocator_free(link->allocator, op, sizeof(*op));
      done(user, status);
      op = next;
    }
  }
}

void pw__ucx_cancel_all(pw_ucx_link_t* link) {
  pw_ucx_op_t* op = link->outstanding.next;
  while (op != &link->outstanding) {
    pw_ucx_op_t* next = op->next;
    op->cancelled = true;
    /* A receive still waiting for its message completes inline (its
     * callback moves it); UCX cannot cancel a send: it is given back when
     * its bytes left or its endpoint closed. */
    if (op->kind == PW_UCX_OP_RECV && op->request != NULL) {
      ucp_request_cancel(link->worker, op->request);
    }
    op = next;
  }
}

void pw__ucx_abandon_all(pw_ucx_link_t* link) {
  for (pw_ucx_op_t* op = link->outstanding.next; op != &link->outstanding; op = op->next) {
    op->abandoned = true;
    if (op->kind == PW_UCX_OP_RECV && op->out_size != NULL) *op->out_size = 0;
    op->done(op->user, pw_status_make(PW_STATUS_CANCELLED,
                                      "ucx link %s: %s tag %llu cancelled (link destroyed)",
                                      link->name, op->kind == PW_UCX_OP_SEND ? "send" : "receive",
                                      (unsigned long long)op->tag));
  }
}

void pw__ucx_free_abandoned(pw_ucx_link_t* link) {
  pw_ucx_op_t* op = link->outstanding.next;
  while (op != &link->outstanding) {
    pw_ucx_op_t* next = op->next;
    pw_allocator_free(link->allocator, op, sizeof(*op));
    op = next;
  }
  pw__ucx_list_init(&link->outstanding);
  link->outstanding_count = 0;
}

/* Allocates and fills an op; the caller links it under |mu|. */
static pw_status_t pw_ucx_op_new(pw_ucx_link_t* link, pw_ucx_op_kind_t kind, uint64_t tag,
                                 pw_ucx_done_fn_t done, void* user, pw_ucx_op_t** out_op) {
  *out_op = NULL;
  if (done == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "ucx link %s: %s tag %llu: no done callback",
                          link->name, kind == PW_UCX_OP_SEND ? "send" : "receive",
                          (unsigned long long)tag);
  }
  pw_ucx_op_t* op = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(link->allocator, sizeof(*op), 0, (void**)&op));
  op->link = link;
  op->kind = kind;
  op->tag = tag;
  op->done = done;
  op->user = user;
  op->prev = op;
  op->next = op;
  *out_op = op;
  return NULL;
}

/* Links |op| and hands it to UCX through |post| (|mu| held). On an error
 * the op is unlinked and the caller frees it. */
static pw_status_t pw_ucx_op_started(pw_ucx_link_t* link, pw_ucx_op_t* op, void* request) {
  if (UCS_PTR_IS_ERR(request)) {
    if (!op->finished) {
      pw__ucx_list_remove(op);
      link->outstanding_count--;
    }
    return pw_status_make(PW_STATUS_UNAVAILABLE, "ucx link %s: %s tag %llu%s%s: %s", link->name,
                          op->kind == PW_UCX_OP_SEND ? "send" : "receive",
                          (unsigned long long)op->tag,
                          op->kind == PW_UCX_OP_SEND ? " to peer " : "",
                          op->kind == PW_UCX_OP_SEND ? pw_ucx_peer_name(link, op->peer) : "",
                          ucs_status_string(UCS_PTR_STATUS(request)));
  }
  op->request = request;
  return NULL;
}

static pw_status_t pw_ucx_check_peer(const pw_ucx_link_t* link, pw_ucx_peer_t peer,
                                     uint64_t tag) {
  unsigned long long t = (unsigned long long)tag;
  if (link->stopping) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "ucx link %s: send tag %llu: the link is being destroyed", link->name,
                          t);
  }
  if (peer >= link->peer_count || link->peers[peer] == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "ucx link %s: send tag %llu: no peer %u (%u connected)", link->name, t,
                          (unsigned)peer, (unsigned)link->peer_count);
  }
  const pw_ucx_peer_s* p = link->peers[peer];
  if (p->state == PW_UCX_PEER_FAILED) {
    return pw_status_make(PW_STATUS_UNAVAILABLE,
                          "ucx link %s: send tag %llu to peer %s: endpoint failed: %s",
                          link->name, t, p->name, p->failure);
  }
  if (p->state == PW_UCX_PEER_CLOSED) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "ucx link %s: send tag %llu to peer %s: peer disconnected",
                          link->name, t, p->name);
  }
  return NULL;
}

pw_status_t pw__ucx_link_send(pw_ucx_link_t* link, pw_ucx_peer_t peer, uint64_t tag,
                              const void* bytes, size_t size, pw_ucx_done_fn_t done,
                              void* user) {
  if (link == NULL) return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "ucx send: NULL link");
  if (bytes == NULL && size > 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "ucx link %s: send tag %llu: NULL bytes of size %zu", link->name,
                          (unsigned long long)tag, size);
  }
  static const uint8_t kEmpty[1] = {0};
  pw_ucx_op_t* op = NULL;
  PW_RETURN_IF_ERROR(pw_ucx_op_new(link, PW_UCX_OP_SEND, tag, done, user, &op));
  op->peer = peer;
  op->capacity = size;
  pthread_mutex_lock(&link->mu);
  pw_status_t status = pw_ucx_check_peer(link, peer, tag);
  if (status == NULL) {
    pw__ucx_list_push(&link->outstanding, op);
    link->outstanding_count++;
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.send = pw_ucx_send_cb;
    param.user_data = op;
    void* request = ucp_tag_send_nbx(link->peers[peer]->ep, bytes != NULL ? bytes : kEmpty, size,
                                     tag, &param);
    status = pw_ucx_op_started(link, op, request);
  }
  pthread_mutex_unlock(&link->mu);
  if (status != NULL) {
    pw_allocator_free(link->allocator, op, sizeof(*op));
    return status;
  }
  pthread_cond_signal(&link->wake);
  pw__ucx_deliver(link);
  return NULL;
}

pw_status_t pw__ucx_link_recv(pw_ucx_link_t* link, uint64_t tag, void* buffer, size_t capacity,
                              size_t* out_size, pw_ucx_done_fn_t done, void* user) {
  if (link == NULL) return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "ucx receive: NULL link");
  if (out_size != NULL) *out_size = 0;
  if (buffer == NULL && capacity > 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "ucx link %s: receive tag %llu: NULL buffer of capacity %zu",
                          link->name, (unsigned long long)tag, capacity);
  }
  static uint8_t empty[1];
  pw_ucx_op_t* op = NULL;
  PW_RETURN_IF_ERROR(pw_ucx_op_new(link, PW_UCX_OP_RECV, tag, done, user, &op));
  op->capacity = capacity;
  op->out_size = out_size;
  pw_status_t status = NULL;
  pthread_mutex_lock(&link->mu);
  if (link->stopping) {
    status = pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                            "ucx link %s: receive tag %llu: the link is being destroyed",
                            link->name, (unsigned long long)tag);
  } else {
    pw__ucx_list_push(&link->outstanding, op);
    link->outstanding_count++;
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = pw_ucx_recv_cb;
    param.user_data = op;
    void* request = ucp_tag_recv_nbx(link->worker, buffer != NULL ? buffer : empty, capacity, tag,
                                     UINT64_MAX, &param);
    status = pw_ucx_op_started(link, op, request);
  }
  pthread_mutex_unlock(&link->mu);
  if (status != NULL) {
    pw_allocator_free(link->allocator, op, sizeof(*op));
    return status;
  }
  pthread_cond_signal(&link->wake);
  pw__ucx_deliver(link);
  return NULL;
}

void pw__ucx_link_cancel_tag(pw_ucx_link_t* link, uint64_t tag) {
  if (link == NULL) return;
  pthread_mutex_lock(&link->mu);
  pw_ucx_op_t* op = link->outstanding.next;
  while (op != &link->outstanding) {
    pw_ucx_op_t* next = op->next;
    if (op->tag == tag) {
      op->cancelled = true;
      if (op->kind == PW_UCX_OP_RECV && op->request != NULL) {
        ucp_request_cancel(link->worker, op->request);
      }
    }
    op = next;
  }
  pthread_mutex_unlock(&link->mu);
  pw__ucx_deliver(link);
}
