/* The CPU backend's accumulate (v6, pathways/backend.h): dst += src
 * elementwise on one device, the reduction of partial sums in a transfer
 * (docs/architecture.md, "Resharding"). Every dtype the kernels compute
 * has a sum: integers wrap modulo 2^bits (computed unsigned, as the
 * kernels do, cpu_dtypes.h), bf16/f16 are summed in f32 and rounded once,
 * c64 adds its real and imaginary parts. bool and the fp8 types have no
 * sum here and are refused naming the dtype. */
#include <string.h>

#include "backends/cpu/cpu_dtypes.h"
#include "backends/cpu/cpu_internal.h"

static pw_status_t pw_cpu_accumulate_check(pw_cpu__backend_t* backend, uint32_t device,
                                           pw_backend_memory_t memory, size_t offset,
                                           size_t bytes, const char* which) {
  if (memory == NULL || memory->magic != PW_CPU__MEMORY_MAGIC || memory->backend != backend) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu accumulate: %s %p is not device memory of this backend", which,
                          (void*)memory);
  }
  if (memory->device != device) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu accumulate: the %s memory belongs to device %u, not device %u",
                          which, memory->device, device);
  }
  if (offset > memory->size || bytes > memory->size - offset) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE,
                          "cpu accumulate: %s bytes [%zu, %zu + %zu) are outside the %zu-byte "
                          "memory of device %u",
                          which, offset, offset, bytes, memory->size, device);
  }
  return NULL;
}

/* Whether |dtype| has a sum here. */
static pw_status_t pw_cpu_accumulate_dtype(pw_dtype_t dtype) {
  switch (dtype) {
    case PW_DTYPE_F32:
    case PW_DTYPE_F64:
    case PW_DTYPE_C64:
    case PW_DTYPE_BF16:
    case PW_DTYPE_F16:
#define PW_CPU_INT_CASE(dt, type, wide) case dt:
      PW_CPU__FOR_EACH_INT(PW_CPU_INT_CASE)
#undef PW_CPU_INT_CASE
      return NULL;
    default:
      break;
  }
  const char* name = pw_dtype_name(dtype);
  return pw_status_make(PW_STATUS_UNIMPLEMENTED,
                        "cpu accumulate: dtype %s has no sum (partial sums of %s cannot be "
                        "reduced)",
                        name ? name : "(unknown)", name ? name : "(unknown)");
}

static void pw_cpu_accumulate_run(pw_dtype_t dtype, unsigned char* dst, const unsigned char* src,
                                  size_t count) {
  switch (dtype) {
    case PW_DTYPE_F32: {
      float* d = (float*)(void*)dst;
      const float* s = (const float*)(const void*)src;
      for (size_t i = 0; i < count; ++i) d[i] += s[i];
      return;
    }
    case PW_DTYPE_C64: {
      float* d = (float*)(void*)dst;
      const float* s = (const float*)(const void*)src;
      for (size_t i = 0; i < 2 * count; ++i) d[i] += s[i];
      return;
    }
    case PW_DTYPE_F64: {
      double* d = (double*)(void*)dst;
      const double* s = (const double*)(const void*)src;
      for (size_t i = 0; i < count; ++i) d[i] += s[i];
      return;
    }
    case PW_DTYPE_BF16:
    case PW_DTYPE_F16:
      for (size_t i = 0; i < count; ++i) {
        float sum = pw_cpu__half_load(dtype, dst, i) + pw_cpu__half_load(dtype, src, i);
        pw_cpu__half_store(dtype, dst, i, sum);
      }
      return;
#define PW_CPU_INT_ADD(dt, type, wide)                                   \
  case dt: {                                                             \
    type* d = (type*)(void*)dst;                                         \
    const type* s = (const type*)(const void*)src;                       \
    for (size_t i = 0; i < count; ++i) {                                 \
      d[i] = (type)((wide)d[i] + (wide)s[i]);                            \
    }                                                                    \
    return;                                                              \
  }
      PW_CPU__FOR_EACH_INT(PW_CPU_INT_ADD)
#undef PW_CPU_INT_ADD
    default:
      return;
  }
}

pw_status_t pw_cpu__accumulate(void* self, uint32_t device, pw_dtype_t dtype,
                               pw_backend_memory_t dst, size_t dst_offset,
                               pw_backend_memory_t src, size_t src_offset, size_t count) {
  pw_cpu__backend_t* backend = self;
  if (device >= backend->device_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu accumulate: device %u does not exist (the backend has %u)", device,
                          backend->device_count);
  }
  PW_RETURN_IF_ERROR(pw_cpu_accumulate_dtype(dtype));
  if (count == 0 && dst == NULL && src == NULL) return NULL; /* the dtype probe */
  size_t elem = pw_dtype_size(dtype);
  if (count > SIZE_MAX / elem) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE, "cpu accumulate: %zu elements of %s overflow",
                          count, pw_dtype_name(dtype));
  }
  size_t bytes = count * elem;
  PW_RETURN_IF_ERROR(pw_cpu_accumulate_check(backend, device, dst, dst_offset, bytes, "dst"));
  PW_RETURN_IF_ERROR(pw_cpu_accumulate_check(backend, device, src, src_offset, bytes, "src"));
  PW_RETURN_IF_ERROR(pw_cpu__device_status(backend, device));
  if (dst == src && dst_offset < src_offset + bytes && src_offset < dst_offset + bytes) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu accumulate: dst and src overlap on device %u", device);
  }
  if (count > 0) pw_cpu_accumulate_run(dtype, dst->data + dst_offset, src->data + src_offset, count);
  return NULL;
}
