#define _POSIX_C_SOURCE 200809L
/* The rows of a COPY (size bytes per row, up to PW_TRANSPORT_MAX_STRIDES
 * levels of strides, include/pathways/transport.h) and COPY LOCAL: both
 * memories on this worker. */
#include <string.h>

#include "plugin/backend_call.h"
#include "worker/worker_internal.h"

pw_status_t pw__worker_rows_parse(const pw_wire_msg_t* msg, pw_worker_rows_t* out_rows) {
  memset(out_rows, 0, sizeof(*out_rows));
  unsigned long long id = (unsigned long long)msg->u[PW_WIRE_COPY_ID];
  if (msg->list_count % 3 != 0 || msg->list_count / 3 > PW_TRANSPORT_MAX_STRIDES) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "COPY %llu: %u stride values (3 per level, at most %d levels)", id,
                          msg->list_count, PW_TRANSPORT_MAX_STRIDES);
  }
  out_rows->size = (size_t)msg->u[PW_WIRE_COPY_SIZE];
  out_rows->levels = msg->list_count / 3;
  out_rows->rows = 1;
  for (uint32_t k = 0; k < out_rows->levels; ++k) {
    pw_transport_stride_t* st = &out_rows->strides[k];
    st->count = (size_t)msg->list[3 * k];
    st->src_stride = (size_t)msg->list[3 * k + 1];
    st->dst_stride = (size_t)msg->list[3 * k + 2];
    if (st->count == 0 || out_rows->rows > SIZE_MAX / st->count) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "COPY %llu: stride level %u counts %zu",
                            id, k, st->count);
    }
    out_rows->rows *= st->count;
  }
  if (out_rows->size != 0 && out_rows->rows > SIZE_MAX / out_rows->size) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE, "COPY %llu: %zu rows of %zu bytes", id,
                          out_rows->rows, out_rows->size);
  }
  out_rows->total = out_rows->rows * out_rows->size;
  return NULL;
}

pw_status_t pw__worker_rows_check(const pw_worker_rows_t* rows, const pw_worker_mem_t* mem,
                                  size_t offset, bool src, const char* what) {
  pw_transport_copy_t c = {.struct_size = sizeof(c), .size = rows->size,
                           .stride_count = rows->levels};
  memcpy(c.strides, rows->strides, sizeof(c.strides));
  size_t src_extent = 0, dst_extent = 0;
  PW_RETURN_IF_ERROR_CTX(pw_transport_copy_extent(&c, &src_extent, &dst_extent), "%s", what);
  size_t extent = src ? src_extent : dst_extent;
  if (offset > mem->size || extent > mem->size - offset) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE,
                          "%s: rows span %zu bytes from offset %zu of memory %llu (%zu bytes)",
                          what, extent, offset, (unsigned long long)mem->id, mem->size);
  }
  return NULL;
}

/* Moves every row between |mem| (strided) and |packed| (contiguous). */
static pw_status_t pw_worker_rows_move(pw_worker_t* w, const pw_worker_rows_t* rows,
                                       const pw_worker_mem_t* mem, size_t offset, void* packed,
                                       bool pack) {
  if (rows->total == 0) return NULL;
  uint8_t* host = pw__backend_host_pointer(&w->backend, mem->device, mem->memory);
  size_t idx[PW_TRANSPORT_MAX_STRIDES] = {0};
  size_t mem_off = offset, dummy = 0;
  uint8_t* out = packed;
  do {
    if (host != NULL) {
      if (pack) {
        memcpy(out, host + mem_off, rows->size);
      } else {
        memcpy(host + mem_off, out, rows->size);
      }
    } else if (pack) {
      PW_RETURN_IF_ERROR(pw__backend_copy_to_host(&w->backend, mem->device, mem->memory, mem_off,
                                                  out, rows->size));
    } else {
      PW_RETURN_IF_ERROR(pw__backend_copy_to_device(&w->backend, mem->device, mem->memory,
                                                    mem_off, out, rows->size));
    }
    out += rows->size;
    /* Packing walks the source side's strides, unpacking the destination's. */
    if (pack) {
      if (!pw_transport_stride_next(rows->levels, rows->strides, idx, &mem_off, &dummy)) break;
    } else {
      if (!pw_transport_stride_next(rows->levels, rows->strides, idx, &dummy, &mem_off)) break;
    }
  } while (rows->levels > 0);
  return NULL;
}

pw_status_t pw__worker_rows_pack(pw_worker_t* w, const pw_worker_rows_t* rows,
                                 const pw_worker_mem_t* mem, size_t offset, void* packed) {
  return pw_worker_rows_move(w, rows, mem, offset, packed, true);
}

pw_status_t pw__worker_rows_unpack(pw_worker_t* w, const pw_worker_rows_t* rows,
                                   const pw_worker_mem_t* mem, size_t offset,
                                   const void* packed) {
  return pw_worker_rows_move(w, rows, mem, offset, (void*)packed, false);
}

/* Row by row between two memories of this worker: memmove through host
 * pointers when both have one (the ranges may overlap), else through a
 * one-row temporary. */
static pw_status_t pw_worker_copy_rows(pw_worker_t* w, const pw_worker_rows_t* rows,
                                       const pw_worker_mem_t* src, size_t src_off,
                                       const pw_worker_mem_t* dst, size_t dst_off) {
  if (rows->total == 0) return NULL;
  uint8_t* sh = pw__backend_host_pointer(&w->backend, src->device, src->memory);
  uint8_t* dh = pw__backend_host_pointer(&w->backend, dst->device, dst->memory);
  void* temp = NULL;
  if (sh != NULL && dh != NULL) {
    if (PW__BACKEND_HAS(&w->backend, record_copy)) {
      PW_RETURN_IF_ERROR(w->backend.vtable->record_copy(w->backend.self, src->device,
                                                        src->memory, dst->device, dst->memory,
                                                        rows->total));
    }
  } else if (rows->size > 0) {
    PW_RETURN_IF_ERROR(pw_allocator_malloc(w->allocator, rows->size, 0, &temp));
  }
  size_t idx[PW_TRANSPORT_MAX_STRIDES] = {0};
  pw_status_t s = NULL;
  do {
    if (temp == NULL) {
      memmove(dh + dst_off, sh + src_off, rows->size);
    } else {
      s = pw__backend_copy_to_host(&w->backend, src->device, src->memory, src_off, temp,
                                   rows->size);
      if (s == NULL) {
        s = pw__backend_copy_to_device(&w->backend, dst->device, dst->memory, dst_off, temp,
                                       rows->size);
      }
    }
  } while (s == NULL && rows->levels > 0 &&
           pw_transport_stride_next(rows->levels, rows->strides, idx, &src_off, &dst_off));
  pw_allocator_free(w->allocator, temp, rows->size);
  return s;
}

static pw_status_t pw_worker_copy_local(pw_worker_t* w, const pw_wire_msg_t* msg,
                                        const pw_worker_rows_t* rows) {
  pw_worker_mem_t* src = NULL;
  pw_worker_mem_t* dst = NULL;
  size_t src_off = (size_t)msg->u[PW_WIRE_COPY_SRC_OFFSET];
  size_t dst_off = (size_t)msg->u[PW_WIRE_COPY_DST_OFFSET];
  pw_status_t s = pw__worker_mem_pin(w, msg->u[PW_WIRE_COPY_SRC_MEM], &src);
  if (s == NULL) s = pw__worker_mem_pin(w, msg->u[PW_WIRE_COPY_DST_MEM], &dst);
  if (s == NULL) s = pw__worker_rows_check(rows, src, src_off, true, "COPY LOCAL source");
  if (s == NULL) s = pw__worker_rows_check(rows, dst, dst_off, false, "COPY LOCAL destination");
  if (s == NULL) s = pw_worker_copy_rows(w, rows, src, src_off, dst, dst_off);
  pw__worker_mem_unpin(w, src);
  pw__worker_mem_unpin(w, dst);
  return s;
}

void pw__worker_on_copy(pw_worker_t* w, const pw_wire_msg_t* msg) {
  uint64_t id = msg->u[PW_WIRE_COPY_ID];
  if (id == 0) {
    pw__worker_drop(w, "COPY", pw_status_make(PW_STATUS_INVALID_ARGUMENT, "copy id 0"));
    return;
  }
  pw_worker_rows_t rows;
  pw_status_t s = pw__worker_rows_parse(msg, &rows);
  uint64_t role = msg->u[PW_WIRE_COPY_ROLE];
  if (s == NULL && role == PW_WIRE_COPY_LOCAL) {
    s = pw_worker_copy_local(w, msg, &rows);
  } else if (s == NULL && (role == PW_WIRE_COPY_SEND || role == PW_WIRE_COPY_RECV)) {
    pw__worker_copy_remote(w, msg, &rows);
    return;
  } else if (s == NULL) {
    s = pw_status_make(PW_STATUS_INVALID_ARGUMENT, "COPY %llu: unknown role %llu",
                       (unsigned long long)id, (unsigned long long)role);
  }
  if (pw_status_code(s) == PW_STATUS_INVALID_ARGUMENT) pw__worker_count_refused(w);
  pw_atomic_fetch_add_u64(&w->n_copies, 1);
  pw__worker_done(w, id, s);
}
