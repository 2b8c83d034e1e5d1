/* The sim backend's device memory: allocation against a per-chip capacity,
 * host copies (real bytes in HOST mode, none in VIRTUAL mode), host
 * pointers, and the accounting of transfers made by transports. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backends/sim/sim_internal.h"

/* Device memory is aligned for any vector load; the handle sits in front. */
#define PW_SIM_MEMORY_ALIGN 64u
#define PW_SIM_MEMORY_HEADER \
  ((sizeof(struct pw_backend_memory_s) + PW_SIM_MEMORY_ALIGN - 1) & ~(size_t)(PW_SIM_MEMORY_ALIGN - 1))

pw_status_t pw_sim__check_memory(pw_sim__backend_t* b, uint32_t device,
                                 pw_backend_memory_t memory, const char* who) {
  if (device >= b->device_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim %s: device %u does not exist (the backend has %u)", who, device,
                          b->device_count);
  }
  if (memory == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "sim %s: memory handle is NULL", who);
  }
  if (memory->magic != PW_SIM__MEMORY_MAGIC || memory->backend != b) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim %s: memory handle is not an allocation of this sim backend", who);
  }
  if (memory->device != device) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim %s: memory belongs to device %u, not device %u", who,
                          memory->device, device);
  }
  return NULL;
}

pw_status_t pw_sim__allocate(void* self, uint32_t device, size_t size,
                             pw_backend_memory_t* out_memory) {
  pw_sim__backend_t* b = self;
  *out_memory = NULL;
  if (device >= b->device_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim allocate: device %u does not exist (the backend has %u)", device,
                          b->device_count);
  }
  pw_sim__device_t* d = &b->devices[device];
  bool too_large = (uint64_t)size > b->capacity ||
                   (!b->virtual_memory && size > SIZE_MAX - PW_SIM_MEMORY_HEADER);
  if (too_large ||
      atomic_fetch_add(&d->used_bytes, (uint64_t)size) > b->capacity - (uint64_t)size) {
    char name[64];
    pw_sim__device_name(b, device, name, sizeof(name));
    if (!too_large) atomic_fetch_sub(&d->used_bytes, (uint64_t)size);
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "sim allocate: %zu bytes on %s exceed its free memory (capacity "
                          "%llu bytes, %llu in use)",
                          size, name, (unsigned long long)b->capacity,
                          (unsigned long long)atomic_load(&d->used_bytes));
  }
  size_t alloc_size = PW_SIM_MEMORY_HEADER + (b->virtual_memory ? 0 : size);
  void* memory = NULL;
  pw_status_t status = pw_allocator_malloc(b->allocator, alloc_size, PW_SIM_MEMORY_ALIGN, &memory);
  if (status != NULL) {
    atomic_fetch_sub(&d->used_bytes, (uint64_t)size);
    return pw_status_annotate(status, "sim allocate of %zu bytes on device %u", size, device);
  }
  pw_backend_memory_t m = memory;
  memset(m, 0, sizeof(*m));
  m->magic = PW_SIM__MEMORY_MAGIC;
  m->device = device;
  m->size = size;
  m->alloc_size = alloc_size;
  m->backend = b;
  atomic_init(&m->ready_at, 0);
  m->data = b->virtual_memory ? NULL : (unsigned char*)memory + PW_SIM_MEMORY_HEADER;
  atomic_fetch_add(&b->live_memories, 1);
  *out_memory = m;
  return NULL;
}

void pw_sim__deallocate(void* self, uint32_t device, pw_backend_memory_t memory) {
  pw_sim__backend_t* b = self;
  pw_status_t status = pw_sim__check_memory(b, device, memory, "deallocate");
  if (status != NULL) {
    pw_log(&b->logger, PW_LOG_ERROR, PW_SIM_LOG, "%s (ignored)", pw_status_message(status));
    pw_status_free(status);
    return;
  }
  atomic_fetch_sub(&b->devices[device].used_bytes, (uint64_t)memory->size);
  atomic_fetch_sub(&b->live_memories, 1);
  memory->magic = 0;
  pw_allocator_free(b->allocator, memory, memory->alloc_size);
}

static pw_status_t pw_sim_check_range(pw_backend_memory_t m, size_t offset, size_t size,
                                      const char* who) {
  if (offset > m->size || size > m->size - offset) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE,
                          "sim %s: %zu bytes at offset %zu do not fit the %zu-byte allocation "
                          "on device %u",
                          who, size, offset, m->size, m->device);
  }
  return NULL;
}

pw_status_t pw_sim__copy_to_device(void* self, uint32_t device, pw_backend_memory_t dst,
                                   size_t offset, const void* src, size_t size) {
  pw_sim__backend_t* b = self;
  PW_RETURN_IF_ERROR(pw_sim__check_memory(b, device, dst, "copy_to_device"));
  PW_RETURN_IF_ERROR(pw_sim_check_range(dst, offset, size, "copy_to_device"));
  if (size > 0 && src == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "sim copy_to_device: source is NULL");
  }
  if (dst->data != NULL && size > 0) memcpy(dst->data + offset, src, size);
  return NULL;
}

pw_status_t pw_sim__copy_to_host(void* self, uint32_t device, pw_backend_memory_t src,
                                 size_t offset, void* dst, size_t size) {
  pw_sim__backend_t* b = self;
  PW_RETURN_IF_ERROR(pw_sim__check_memory(b, device, src, "copy_to_host"));
  PW_RETURN_IF_ERROR(pw_sim_check_range(src, offset, size, "copy_to_host"));
  if (size > 0 && dst == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "sim copy_to_host: destination is NULL");
  }
  if (size == 0) return NULL;
  if (src->data != NULL) {
    memcpy(dst, src->data + offset, size);
  } else {
    memset(dst, 0, size);
  }
  return NULL;
}

void* pw_sim__host_pointer(void* self, uint32_t device, pw_backend_memory_t memory) {
  pw_sim__backend_t* b = self;
  pw_status_t status = pw_sim__check_memory(b, device, memory, "host_pointer");
  if (status != NULL) {
    pw_status_free(status);
    return NULL;
  }
  return memory->data;
}

/*---------------------------------------------------------------------------
 * Transfers
 *-------------------------------------------------------------------------*/

static uint64_t pw_sim_transfer_ns(const pw_sim__backend_t* b, uint32_t src, uint32_t dst,
                                   uint64_t bytes) {
  if (src == dst) return 0;
  bool same_slice = b->devices[src].slice == b->devices[dst].slice;
  double rate = same_slice ? b->ici_bytes_per_s : b->dcn_bytes_per_s;
  double ns = (double)(same_slice ? b->ici_latency_ns : b->dcn_latency_ns);
  if (rate > 0) ns += (double)bytes / rate * 1e9;
  ns = ceil(ns);
  return ns < PW_SIM__MAX_NS ? (uint64_t)ns : (uint64_t)PW_SIM__MAX_NS;
}

pw_status_t pw_sim_backend_transfer_cost(pw_backend_t backend, uint32_t src_device,
                                         uint32_t dst_device, uint64_t bytes,
                                         pw_sim_time_t* out_cost) {
  pw_sim__backend_t* b = pw_sim__from_backend(backend);
  if (b == NULL || out_cost == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_sim_backend_transfer_cost: not a sim backend, or out_cost is NULL");
  }
  *out_cost = 0;
  if (src_device >= b->device_count || dst_device >= b->device_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_sim_backend_transfer_cost: device %u or %u does not exist (the "
                          "backend has %u)",
                          src_device, dst_device, b->device_count);
  }
  *out_cost = pw_sim_transfer_ns(b, src_device, dst_device, bytes);
  return NULL;
}

/* The accounting of a copy between two of |b|'s devices (record_copy and
 * pw_sim_backend_record_transfer). */
static pw_status_t pw_sim_record(pw_sim__backend_t* b, uint32_t src_device,
                                 pw_backend_memory_t src_memory, uint32_t dst_device,
                                 pw_backend_memory_t dst_memory, uint64_t bytes,
                                 pw_sim_time_t* out_end) {
  PW_RETURN_IF_ERROR(pw_sim__check_memory(b, src_device, src_memory, "record_transfer source"));
  PW_RETURN_IF_ERROR(pw_sim__check_memory(b, dst_device, dst_memory,
                                          "record_transfer destination"));
  uint64_t ready = atomic_load_explicit(&src_memory->ready_at, memory_order_relaxed);
  uint64_t now = atomic_load_explicit(&b->now, memory_order_relaxed);
  uint64_t start = ready > now ? ready : now;
  uint64_t end = start + pw_sim_transfer_ns(b, src_device, dst_device, bytes);
  uint32_t ends[2] = {src_device, dst_device};
  for (int i = 0; i < 2; ++i) {
    uint64_t f = atomic_load_explicit(&b->devices[ends[i]].fail_at, memory_order_relaxed);
    if (f <= start || f < end) {
      char name[64];
      pw_sim__device_name(b, ends[i], name, sizeof(name));
      return pw_status_make(PW_STATUS_UNAVAILABLE,
                            "sim transfer of %llu bytes from device %u to device %u: %s failed "
                            "at virtual time %llu ns",
                            (unsigned long long)bytes, src_device, dst_device, name,
                            (unsigned long long)f);
    }
  }
  pw_sim__raise(&dst_memory->ready_at, end);
  pw_sim__account(b, dst_device, PW_SIM_TIME_NEVER, end, PW_SIM_EVENT_TRANSFER, 0);
  atomic_fetch_add(&b->transfer_events, 1);
  if (b->trace != NULL) {
    pw_sim_event_t event = {end, start, dst_device, PW_SIM_EVENT_TRANSFER, 0, "transfer"};
    b->trace(b->trace_user, &event);
  }
  if (out_end != NULL) *out_end = end;
  return NULL;
}

pw_status_t pw_sim_backend_record_transfer(pw_backend_t backend, uint32_t src_device,
                                           pw_backend_memory_t src_memory, uint32_t dst_device,
                                           pw_backend_memory_t dst_memory, uint64_t bytes,
                                           pw_sim_time_t* out_end) {
  pw_sim__backend_t* b = pw_sim__from_backend(backend);
  if (out_end != NULL) *out_end = 0;
  if (b == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_sim_backend_record_transfer: not a sim backend");
  }
  return pw_sim_record(b, src_device, src_memory, dst_device, dst_memory, bytes, out_end);
}

pw_status_t pw_sim__record_copy(void* self, uint32_t src_device, pw_backend_memory_t src,
                                uint32_t dst_device, pw_backend_memory_t dst, size_t bytes) {
  return pw_sim_record(self, src_device, src, dst_device, dst, bytes, NULL);
}
