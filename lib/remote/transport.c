/* The remote transport: copies within a worker (COPY LOCAL), between
 * workers on their data plane (COPY SEND + COPY RECV with one tag, both
 * DONEs counted), and between a worker and a backend of this process, or
 * between two workers without a data plane, through host copies (row by
 * row, inline). Copies between local backends go to an inproc transport. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <string.h>

#include "pathways/transports/inproc.h"
#include "remote/remote_internal.h"

typedef struct pw_rtransport_s {
  pw_remote_t* remote;
  pw_transport_t inner;
} pw_rtransport_t;

void pw__remote_copy_part_done(pw_remote_copy_t* copy, pw_remote_worker_t* from,
                               pw_status_t status) {
  if (status != NULL) {
    pw_status_t expected = NULL;
    if (from != NULL && copy->local_part) pw__remote_dp_cancel(from->remote, copy->tag);
    if (atomic_compare_exchange_strong(&copy->first_error, &expected, status)) {
      /* The other side may wait for bytes that will never come. */
      for (int i = 0; i < 2; ++i) {
        pw_remote_worker_t* other = copy->side[i];
        if (other == NULL || other == from) continue;
        pw_wire_msg_t cancel = {.type = PW_WIRE_CANCEL};
        cancel.u[PW_WIRE_CANCEL_TAG] = copy->tag;
        pw_status_free(pw__remote_send(other, 0, &cancel, NNG_FLAG_NONBLOCK));
      }
    } else {
      pw_status_free(status);
    }
  }
  if (atomic_fetch_sub(&copy->parts_left, 1) != 1) return;
  pw_status_t first = atomic_load(&copy->first_error);
  pw_transport_done_fn_t done = copy->done;
  void* user = copy->done_user;
  pw_allocator_t a = copy->side[0]->remote->allocator;
  pw_allocator_free(a, copy, sizeof(*copy));
  done(user, first);
}

bool pw__remote_copy_send_part(pw_remote_worker_t* w, uint64_t epoch, pw_remote_copy_t* copy,
                               pw_wire_msg_t* msg) {
  pw_allocator_t a = w->remote->allocator;
  pw_pending_t* entry = NULL;
  pw_status_t status = pw_allocator_calloc(a, sizeof(*entry), 0, (void**)&entry);
  if (status == NULL) {
    entry->id = pw__remote_next_id(w->remote);
    entry->kind = PW_PENDING_COPY;
    entry->copy = copy;
    status = pw__remote_pending_add(w, epoch, entry);
    if (status != NULL) {
      pw_allocator_free(a, entry, sizeof(*entry));
      entry = NULL;
    }
  }
  if (status == NULL) {
    msg->u[PW_WIRE_COPY_ID] = entry->id;
    status = pw__remote_send(w, epoch, msg, 0);
    if (status != NULL) {
      if (!pw__remote_pending_take(w, entry)) {
        pw_status_free(status); /* the loss path completes it */
        return false;
      }
      pw_allocator_free(a, entry, sizeof(*entry));
    }
  }
  if (status == NULL) return true;
  pw__remote_copy_part_done(copy, w, status);
  return false;
}

static void pw_rt_strides(const pw_transport_copy_t* c, uint64_t* list, uint32_t* count) {
  *count = 0;
  if (c->struct_size < PW_TRANSPORT_COPY_SIZE_V2) return;
  for (uint32_t i = 0; i < c->stride_count && i < PW_TRANSPORT_MAX_STRIDES; ++i) {
    list[(*count)++] = c->strides[i].count;
    list[(*count)++] = c->strides[i].src_stride;
    list[(*count)++] = c->strides[i].dst_stride;
  }
}

/* Both ends on workers with a data plane (or on one worker). */
static pw_status_t pw_rt_remote_copy(pw_rtransport_t* t, const pw_transport_copy_t* c,
                                     pw_remote_worker_t* ws, pw_remote_worker_t* wd) {
  const pw_remote_mem_t* src = (const pw_remote_mem_t*)c->src.memory;
  const pw_remote_mem_t* dst = (const pw_remote_mem_t*)c->dst.memory;
  uint64_t es = pw__remote_epoch(ws), ed = pw__remote_epoch(wd);
  PW_RETURN_IF_ERROR(pw__remote_mem_check(ws, src, es));
  PW_RETURN_IF_ERROR(pw__remote_mem_check(wd, dst, ed));
  pw_remote_copy_t* copy = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(t->remote->allocator, sizeof(*copy), 0, (void**)&copy));
  bool local = ws == wd;
  atomic_init(&copy->parts_left, local ? 1u : 2u);
  atomic_init(&copy->first_error, NULL);
  copy->done = c->done;
  copy->done_user = c->done_user;
  copy->tag = pw__remote_next_id(t->remote);
  copy->side[0] = ws;
  copy->side[1] = local ? NULL : wd;
  uint64_t strides[3 * PW_TRANSPORT_MAX_STRIDES];
  uint32_t stride_words = 0;
  pw_rt_strides(c, strides, &stride_words);
  pw_wire_msg_t msg = {.type = PW_WIRE_COPY, .list = strides, .list_count = stride_words};
  msg.u[PW_WIRE_COPY_SRC_MEM] = src->id;
  msg.u[PW_WIRE_COPY_SRC_OFFSET] = c->src.offset;
  msg.u[PW_WIRE_COPY_DST_MEM] = dst->id;
  msg.u[PW_WIRE_COPY_DST_OFFSET] = c->dst.offset;
  msg.u[PW_WIRE_COPY_SIZE] = c->size;
  msg.u[PW_WIRE_COPY_TAG] = copy->tag;
  if (local) {
    msg.u[PW_WIRE_COPY_ROLE] = PW_WIRE_COPY_LOCAL;
    msg.u[PW_WIRE_COPY_PEER] = ws->index;
    (void)pw__remote_copy_send_part(ws, es, copy, &msg);
    return NULL;
  }
  /* The receive first: the bytes then find it posted (either order works). */
  pw_wire_msg_t recv = msg;
  recv.u[PW_WIRE_COPY_ROLE] = PW_WIRE_COPY_RECV;
  recv.u[PW_WIRE_COPY_PEER] = ws->index;
  msg.u[PW_WIRE_COPY_ROLE] = PW_WIRE_COPY_SEND;
  msg.u[PW_WIRE_COPY_PEER] = wd->index;
  (void)pw__remote_copy_send_part(wd, ed, copy, &recv);
  (void)pw__remote_copy_send_part(ws, es, copy, &msg);
  return NULL;
}

/* One row through the host: read |size| bytes of |ep| at |offset|. */
static pw_status_t pw_rt_row_read(const pw_transport_endpoint_t* ep, size_t offset, void* buf,
                                  size_t size) {
  pw_remote_worker_t* w = pw__remote_proxy_worker(ep->backend);
  if (w != NULL) return pw__remote_read(w, (const pw_remote_mem_t*)ep->memory, offset, buf, size);
  const pw_backend_vtable_t* v = ep->backend->vtable;
  if (v->copy_to_host == NULL) {
    return pw_status_make(PW_STATUS_UNIMPLEMENTED, "backend '%s' has no copy_to_host", v->name);
  }
  return v->copy_to_host(ep->backend->self, ep->device, ep->memory, offset, buf, size);
}

static pw_status_t pw_rt_row_write(const pw_transport_endpoint_t* ep, size_t offset,
                                   const void* buf, size_t size) {
  pw_remote_worker_t* w = pw__remote_proxy_worker(ep->backend);
  if (w != NULL) return pw__remote_write(w, (const pw_remote_mem_t*)ep->memory, offset, buf, size);
  const pw_backend_vtable_t* v = ep->backend->vtable;
  if (v->copy_to_device == NULL) {
    return pw_status_make(PW_STATUS_UNIMPLEMENTED, "backend '%s' has no copy_to_device", v->name);
  }
  return v->copy_to_device(ep->backend->self, ep->device, ep->memory, offset, buf, size);
}

/* Through this process, row by row; done inline. */
static pw_status_t pw_rt_host_copy(pw_rtransport_t* t, const pw_transport_copy_t* c) {
  pw_allocator_t a = t->remote->allocator;
  uint32_t levels = c->struct_size >= PW_TRANSPORT_COPY_SIZE_V2 ? c->stride_count : 0;
  size_t src_extent = c->size, dst_extent = c->size;
  if (levels > 0) PW_RETURN_IF_ERROR(pw_transport_copy_extent(c, &src_extent, &dst_extent));
  void* row = NULL;
  if (c->size > 0) PW_RETURN_IF_ERROR(pw_allocator_malloc(a, c->size, 0, &row));
  size_t idx[PW_TRANSPORT_MAX_STRIDES] = {0};
  size_t so = c->src.offset, d_o = c->dst.offset;
  pw_status_t status = NULL;
  do {
    if (c->size == 0) break;
    status = pw_rt_row_read(&c->src, so, row, c->size);
    if (status == NULL) status = pw_rt_row_write(&c->dst, d_o, row, c->size);
  } while (status == NULL && levels > 0 &&
           pw_transport_stride_next(levels, c->strides, idx, &so, &d_o));
  if (row != NULL) pw_allocator_free(a, row, c->size);
  c->done(c->done_user, status);
  return NULL;
}

static pw_status_t pw_rt_dispatch(void* self, const pw_transport_copy_t* c, bool strided) {
  pw_rtransport_t* t = self;
  if (c == NULL || c->struct_size < PW_TRANSPORT_COPY_SIZE_V1 || c->done == NULL ||
      c->src.backend == NULL || c->dst.backend == NULL || c->src.memory == NULL ||
      c->dst.memory == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "remote transport: malformed copy");
  }
  pw_remote_worker_t* ws = pw__remote_proxy_worker(c->src.backend);
  pw_remote_worker_t* wd = pw__remote_proxy_worker(c->dst.backend);
  if (ws == NULL && wd == NULL) {
    const pw_transport_vtable_t* v = t->inner.vtable;
    return strided ? v->copy_strided(t->inner.self, c) : v->copy(t->inner.self, c);
  }
  size_t src_extent = c->size, dst_extent = c->size;
  if (strided) PW_RETURN_IF_ERROR(pw_transport_copy_extent(c, &src_extent, &dst_extent));
  const pw_remote_mem_t* src = ws ? (const pw_remote_mem_t*)c->src.memory : NULL;
  const pw_remote_mem_t* dst = wd ? (const pw_remote_mem_t*)c->dst.memory : NULL;
  if ((src && (c->src.offset > src->size || src_extent > src->size - c->src.offset)) ||
      (dst && (c->dst.offset > dst->size || dst_extent > dst->size - c->dst.offset))) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE,
                          "remote transport: copy of %zu bytes outside its memory", c->size);
  }
  bool plane = ws && wd && (ws == wd || (ws->ucx_size > 0 && wd->ucx_size > 0));
  return plane ? pw_rt_remote_copy(t, c, ws, wd) : pw_rt_host_copy(t, c);
}

static pw_status_t pw_rt_copy(void* self, const pw_transport_copy_t* c) {
  return pw_rt_dispatch(self, c, false);
}

static pw_status_t pw_rt_copy_strided(void* self, const pw_transport_copy_t* c) {
  if (c != NULL && c->struct_size < PW_TRANSPORT_COPY_SIZE_V2) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "remote transport: strided copy with a v1 descriptor");
  }
  return pw_rt_dispatch(self, c, true);
}

static bool pw_rt_can_copy(void* self, const pw_backend_t* src, uint32_t src_device,
                           const pw_backend_t* dst, uint32_t dst_device) {
  (void)self;
  (void)src_device;
  (void)dst_device;
  return src != NULL && dst != NULL;
}

static void pw_rt_destroy(void* self) {
  pw_rtransport_t* t = self;
  t->inner.vtable->destroy(t->inner.self);
  pw_allocator_free(t->remote->allocator, t, sizeof(*t));
}

static const pw_transport_vtable_t pw_rt_vtable = {
    .struct_size = sizeof(pw_transport_vtable_t),
    .name = "remote",
    .version = 1,
    .destroy = pw_rt_destroy,
    .copy = pw_rt_copy,
    .can_copy = pw_rt_can_copy,
    .copy_strided = pw_rt_copy_strided,
};

pw_status_t pw_remote_transport(pw_remote_t* remote, pw_transport_t* out_transport) {
  if (remote == NULL || out_transport == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_remote_transport: NULL argument");
  }
  *out_transport = (pw_transport_t){NULL, NULL};
  pw_rtransport_t* t = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(remote->allocator, sizeof(*t), 0, (void**)&t));
  t->remote = remote;
  pw_inproc_transport_options_t io;
  pw_inproc_transport_options_init(&io);
  io.allocator = remote->allocator;
  io.logger = remote->logger;
  pw_status_t status = pw_inproc_transport_create(&io, &t->inner);
  if (status != NULL) {
    pw_allocator_free(remote->allocator, t, sizeof(*t));
    return status;
  }
  *out_transport = (pw_transport_t){&pw_rt_vtable, t};
  return NULL;
}
