/* Host copies to and from a worker's memory (the proxy's copy_to_device /
 * copy_to_host, and the transport's rows through this process), blocking.
 * Buffers of PW_REMOTE_DP_MIN_BYTES and more move on the data plane
 * (dataplane.c: a COPY RECV or COPY SEND with the controller as the
 * peer) when both sides have one; smaller ones, and every one without a
 * data plane, as WRITE / READ requests of at most PW_REMOTE_CHUNK bytes. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <string.h>

#include "remote/remote_internal.h"
#include "wire/wire_nng.h"

/* WRITE / READ move at most this many bytes per request. */
#define PW_REMOTE_CHUNK ((size_t)16 << 20)

static pw_status_t pw_host_copy_range(pw_remote_worker_t* w, const pw_remote_mem_t* mem,
                                      size_t offset, size_t size) {
  if (mem == NULL) return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: NULL memory", w->label);
  if (offset > mem->size || size > mem->size - offset) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE,
                          "%s: %zu bytes at %zu outside memory %" PRIu64 " of %zu bytes", w->label,
                          size, offset, mem->id, mem->size);
  }
  return NULL;
}

pw_status_t pw__remote_write(pw_remote_worker_t* w, const pw_remote_mem_t* mem, size_t offset,
                             const void* src, size_t size) {
  PW_RETURN_IF_ERROR(pw_host_copy_range(w, mem, offset, size));
  if (size >= PW_REMOTE_DP_MIN_BYTES && pw__remote_dp_usable(w)) {
    PW_RETURN_IF_ERROR(pw__remote_dp_host_copy(w, mem, offset, (void*)src, size, true));
    atomic_fetch_add(&w->host_bytes_dp, size);
    return NULL;
  }
  for (size_t done = 0; done < size || (size == 0 && done == 0);) {
    size_t n = size - done < PW_REMOTE_CHUNK ? size - done : PW_REMOTE_CHUNK;
    pw_wire_msg_t req = {.type = PW_WIRE_WRITE};
    req.u[PW_WIRE_WRITE_ID] = pw__remote_next_id(w->remote);
    req.u[PW_WIRE_WRITE_MEM] = mem->id;
    req.u[PW_WIRE_WRITE_OFFSET] = offset + done;
    req.blob[PW_WIRE_WRITE_B_BYTES] = (pw_wire_blob_t){(const uint8_t*)src + done, n};
    nng_msg* raw = NULL;
    pw_wire_msg_t reply;
    PW_RETURN_IF_ERROR(pw__remote_call(w, mem->epoch, &req, &raw, &reply));
    pw__wire_nng_release(raw, &reply, w->remote->allocator);
    atomic_fetch_add(&w->host_bytes_cp, n);
    if (size == 0) break;
    done += n;
  }
  return NULL;
}

pw_status_t pw__remote_read(pw_remote_worker_t* w, const pw_remote_mem_t* mem, size_t offset,
                            void* dst, size_t size) {
  PW_RETURN_IF_ERROR(pw_host_copy_range(w, mem, offset, size));
  if (size >= PW_REMOTE_DP_MIN_BYTES && pw__remote_dp_usable(w)) {
    PW_RETURN_IF_ERROR(pw__remote_dp_host_copy(w, mem, offset, dst, size, false));
    atomic_fetch_add(&w->host_bytes_dp, size);
    return NULL;
  }
  for (size_t done = 0; done < size;) {
    size_t n = size - done < PW_REMOTE_CHUNK ? size - done : PW_REMOTE_CHUNK;
    pw_wire_msg_t req = {.type = PW_WIRE_READ};
    req.u[PW_WIRE_READ_ID] = pw__remote_next_id(w->remote);
    req.u[PW_WIRE_READ_MEM] = mem->id;
    req.u[PW_WIRE_READ_OFFSET] = offset + done;
    req.u[PW_WIRE_READ_SIZE] = n;
    nng_msg* raw = NULL;
    pw_wire_msg_t reply;
    PW_RETURN_IF_ERROR(pw__remote_call(w, mem->epoch, &req, &raw, &reply));
    const pw_wire_blob_t* bytes = &reply.blob[PW_WIRE_REPLY_B_PAYLOAD];
    pw_status_t status = NULL;
    if (bytes->size != n) {
      status = pw_status_make(PW_STATUS_DATA_LOSS, "%s: READ of %zu bytes returned %zu", w->label,
                              n, bytes->size);
    } else {
      memcpy((uint8_t*)dst + done, bytes->data, n);
    }
    pw__wire_nng_release(raw, &reply, w->remote->allocator);
    PW_RETURN_IF_ERROR(status);
    atomic_fetch_add(&w->host_bytes_cp, n);
    done += n;
  }
  return NULL;
}
