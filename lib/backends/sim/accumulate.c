/* The sim backend's accumulate (v6, pathways/backend.h): dst += src on
 * one chip, the reduction of partial sums in a transfer. The cost model
 * charges one add per element at chip_flops_per_s, from when both inputs
 * are ready, and the destination is ready when it ends (its device time
 * counts it). In HOST memory mode the bytes are really added, as the CPU
 * backend does (integers wrap, bf16/f16 summed in f32); in VIRTUAL mode
 * only the time moves. bool and the fp8 types have no sum: refused
 * naming the dtype. */
#include <math.h>
#include <string.h>

#include "backends/sim/sim_internal.h"

static pw_status_t pw_sim_accumulate_dtype(pw_dtype_t dtype) {
  switch (dtype) {
    case PW_DTYPE_F32: case PW_DTYPE_F64: case PW_DTYPE_C64: case PW_DTYPE_BF16:
    case PW_DTYPE_F16: case PW_DTYPE_I8: case PW_DTYPE_I16: case PW_DTYPE_I32:
    case PW_DTYPE_I64: case PW_DTYPE_U8: case PW_DTYPE_U16: case PW_DTYPE_U32:
    case PW_DTYPE_U64:
      return NULL;
    default:
      break;
  }
  const char* name = pw_dtype_name(dtype);
  return pw_status_make(PW_STATUS_UNIMPLEMENTED, "sim accumulate: dtype %s has no sum",
                        name ? name : "(unknown)");
}

#define PW_SIM_ADD(type, wide)                                                  \
  do {                                                                          \
    type* d = (type*)(void*)dst;                                                \
    const type* s = (const type*)(const void*)src;                              \
    for (size_t i = 0; i < n; ++i) d[i] = (type)((wide)d[i] + (wide)s[i]);      \
  } while (0)

static void pw_sim_accumulate_run(pw_dtype_t dtype, unsigned char* dst, const unsigned char* src,
                                  size_t n) {
  switch (dtype) {
    case PW_DTYPE_F32: PW_SIM_ADD(float, float); return;
    case PW_DTYPE_C64: n *= 2; PW_SIM_ADD(float, float); return;
    case PW_DTYPE_F64: PW_SIM_ADD(double, double); return;
    case PW_DTYPE_I8: PW_SIM_ADD(int8_t, uint32_t); return;
    case PW_DTYPE_I16: PW_SIM_ADD(int16_t, uint32_t); return;
    case PW_DTYPE_I32: PW_SIM_ADD(int32_t, uint32_t); return;
    case PW_DTYPE_I64: PW_SIM_ADD(int64_t, uint64_t); return;
    case PW_DTYPE_U8: PW_SIM_ADD(uint8_t, uint32_t); return;
    case PW_DTYPE_U16: PW_SIM_ADD(uint16_t, uint32_t); return;
    case PW_DTYPE_U32: PW_SIM_ADD(uint32_t, uint32_t); return;
    case PW_DTYPE_U64: PW_SIM_ADD(uint64_t, uint64_t); return;
    case PW_DTYPE_BF16:
    case PW_DTYPE_F16: {
      uint16_t* d = (uint16_t*)(void*)dst;
      const uint16_t* s = (const uint16_t*)(const void*)src;
      bool bf = dtype == PW_DTYPE_BF16;
      for (size_t i = 0; i < n; ++i) {
        float sum = bf ? pw_bf16_to_f32(d[i]) + pw_bf16_to_f32(s[i])
                       : pw_f16_to_f32(d[i]) + pw_f16_to_f32(s[i]);
        d[i] = bf ? pw_f32_to_bf16(sum) : pw_f32_to_f16(sum);
      }
      return;
    }
    default:
      return;
  }
}

static pw_status_t pw_sim_accumulate_range(pw_backend_memory_t m, size_t offset, size_t bytes,
                                           const char* which) {
  if (offset > m->size || bytes > m->size - offset) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE,
                          "sim accumulate: %s bytes [%zu, %zu + %zu) do not fit the %zu-byte "
                          "allocation on device %u",
                          which, offset, offset, bytes, m->size, m->device);
  }
  return NULL;
}

pw_status_t pw_sim__accumulate(void* self, uint32_t device, pw_dtype_t dtype,
                               pw_backend_memory_t dst, size_t dst_offset,
                               pw_backend_memory_t src, size_t src_offset, size_t count) {
  pw_sim__backend_t* b = self;
  if (device >= b->device_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim accumulate: device %u does not exist (the backend has %u)", device,
                          b->device_count);
  }
  PW_RETURN_IF_ERROR(pw_sim_accumulate_dtype(dtype));
  if (count == 0 && dst == NULL && src == NULL) return NULL; /* the dtype probe */
  PW_RETURN_IF_ERROR(pw_sim__check_memory(b, device, dst, "accumulate destination"));
  PW_RETURN_IF_ERROR(pw_sim__check_memory(b, device, src, "accumulate source"));
  size_t elem = pw_dtype_size(dtype);
  if (count > SIZE_MAX / elem) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE, "sim accumulate: %zu elements overflow",
                          count);
  }
  size_t bytes = count * elem;
  PW_RETURN_IF_ERROR(pw_sim_accumulate_range(dst, dst_offset, bytes, "destination"));
  PW_RETURN_IF_ERROR(pw_sim_accumulate_range(src, src_offset, bytes, "source"));
  uint64_t start = atomic_load_explicit(&b->now, memory_order_relaxed);
  uint64_t ready[2] = {atomic_load_explicit(&dst->ready_at, memory_order_relaxed),
                       atomic_load_explicit(&src->ready_at, memory_order_relaxed)};
  for (int i = 0; i < 2; ++i) start = ready[i] > start ? ready[i] : start;
  double ns = b->chip_flops_per_s > 0 ? ceil((double)count / b->chip_flops_per_s * 1e9) : 0;
  uint64_t end = start + (ns < PW_SIM__MAX_NS ? (uint64_t)ns : (uint64_t)PW_SIM__MAX_NS);
  uint64_t f = atomic_load_explicit(&b->devices[device].fail_at, memory_order_relaxed);
  if (f <= start || f < end) {
    char name[64];
    pw_sim__device_name(b, device, name, sizeof(name));
    return pw_status_make(PW_STATUS_UNAVAILABLE,
                          "sim accumulate of %zu elements on device %u: %s failed at virtual "
                          "time %llu ns",
                          count, device, name, (unsigned long long)f);
  }
  if (dst->data != NULL && src->data != NULL && count > 0) {
    pw_sim_accumulate_run(dtype, dst->data + dst_offset, src->data + src_offset, count);
  }
  pw_sim__raise(&dst->ready_at, end);
  pw_sim__account(b, device, start, end, PW_SIM_EVENT_TRANSFER, 0);
  return NULL;
}
