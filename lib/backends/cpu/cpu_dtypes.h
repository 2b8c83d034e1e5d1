/* Internal to the CPU backend: how its kernels loop over the dtypes.
 * Integer types compute in an unsigned type at least as wide as int and
 * wrap modulo 2^bits (C leaves signed overflow undefined; numpy and XLA
 * wrap). The narrow floats (f16, bf16) are read into f32, computed there
 * and rounded back to nearest even (pathways/types.h conversions), once
 * per result. */
#ifndef PW_BACKENDS_CPU_CPU_DTYPES_H_
#define PW_BACKENDS_CPU_CPU_DTYPES_H_

#include "pathways/types.h"

/* X(dtype, element type, unsigned compute type) for every integer dtype. */
#define PW_CPU__FOR_EACH_INT(X)          \
  X(PW_DTYPE_I8, int8_t, uint32_t)       \
  X(PW_DTYPE_I16, int16_t, uint32_t)     \
  X(PW_DTYPE_I32, int32_t, uint32_t)     \
  X(PW_DTYPE_I64, int64_t, uint64_t)     \
  X(PW_DTYPE_U8, uint8_t, uint32_t)      \
  X(PW_DTYPE_U16, uint16_t, uint32_t)    \
  X(PW_DTYPE_U32, uint32_t, uint32_t)    \
  X(PW_DTYPE_U64, uint64_t, uint64_t)

/* Element |i| of a narrow float array (f16 or bf16), as f32. */
static inline float pw_cpu__half_load(pw_dtype_t dtype, const void* data, size_t i) {
  uint16_t bits = ((const uint16_t*)data)[i];
  return dtype == PW_DTYPE_BF16 ? pw_bf16_to_f32(bits) : pw_f16_to_f32(bits);
}

/* Stores |value| rounded to the narrow float |dtype| as element |i|. */
static inline void pw_cpu__half_store(pw_dtype_t dtype, void* data, size_t i, float value) {
  ((uint16_t*)data)[i] = dtype == PW_DTYPE_BF16 ? pw_f32_to_bf16(value) : pw_f32_to_f16(value);
}

static inline bool pw_cpu__is_half(pw_dtype_t dtype) {
  return dtype == PW_DTYPE_F16 || dtype == PW_DTYPE_BF16;
}

#endif /* PW_BACKENDS_CPU_CPU_DTYPES_H_ */
