/* Conversions between f32 and the narrow float dtypes (bf16, f16,
 * f8e4m3fn, f8e5m2), written once for any small binary format with E
 * exponent and M mantissa bits: round to nearest even from f32's bits,
 * exact widening with ldexpf. Kernels that compute on a narrow type
 * convert to f32, compute, and come back through these. */
#include <math.h>
#include <string.h>

#include "pathways/types.h"

typedef struct pw_minifloat_t {
  unsigned exponent_bits;
  unsigned mantissa_bits;
  int bias;
  /* false: no infinity, the all-ones exponent holds finite values and only
   * the all-ones pattern (per sign) is NaN (the "fn" formats). */
  bool ieee;
} pw_minifloat_t;

static const pw_minifloat_t pw_fmt_bf16 = {8, 7, 127, true};
static const pw_minifloat_t pw_fmt_f16 = {5, 10, 15, true};
static const pw_minifloat_t pw_fmt_e4m3fn = {4, 3, 7, false};
static const pw_minifloat_t pw_fmt_e5m2 = {5, 2, 15, true};

static uint32_t pw_f32_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return bits;
}

/* |x| / 2^|shift| rounded to nearest, ties to even. */
static uint32_t pw_round_shift(uint32_t x, unsigned shift) {
  if (shift == 0) return x;
  if (shift >= 32) return 0; /* callers pass x < 2^31: below one half */
  uint32_t q = x >> shift;
  uint32_t rem = x & ((UINT32_C(1) << shift) - 1);
  uint32_t half = UINT32_C(1) << (shift - 1);
  if (rem > half || (rem == half && (q & 1u) != 0)) ++q;
  return q;
}

static uint32_t pw_minifloat_from_f32(const pw_minifloat_t* f, float value) {
  const unsigned m = f->mantissa_bits;
  const uint32_t all_ones = (UINT32_C(1) << f->exponent_bits) - 1;
  const uint32_t sign = (pw_f32_bits(value) >> 31) << (f->exponent_bits + m);
  const uint32_t nan = f->ieee ? (all_ones << m) | (UINT32_C(1) << (m - 1))
                               : (all_ones << m) | ((UINT32_C(1) << m) - 1);
  const uint32_t inf = f->ieee ? all_ones << m : nan;
  /* The largest finite encoding (without sign). */
  const uint32_t max_finite = f->ieee ? (all_ones << m) - 1 : nan - 1;
  if (isnan(value)) return sign | nan;
  if (isinf(value)) return sign | inf;
  const uint32_t bits = pw_f32_bits(value) & 0x7FFFFFFFu;
  const int f32_exponent = (int)(bits >> 23);
  const uint32_t f32_mantissa = bits & 0x7FFFFFu;
  if (bits == 0) return sign;
  /* Unbiased exponent, and the significand with its implicit bit. */
  const int e = f32_exponent == 0 ? -126 : f32_exponent - 127;
  const uint32_t significand =
      f32_exponent == 0 ? f32_mantissa : f32_mantissa | (UINT32_C(1) << 23);
  const int biased = e + f->bias;
  uint32_t result;
  if (f32_exponent != 0 && biased >= 1) {
    /* Normal in the target: round exponent|mantissa together, so a carry
     * out of the mantissa bumps the exponent (and may reach overflow). */
    const uint32_t combined = ((uint32_t)biased << 23) | f32_mantissa;
    result = pw_round_shift(combined, 23u - m);
  } else {
    /* Subnormal in the target: count units of 2^(1 - bias - m). A result
     * of 2^m is the smallest normal, which the encoding reads correctly. */
    const int shift = 23 + (1 - f->bias) - (int)m - e;
    result = pw_round_shift(significand, shift < 0 ? 0u : (unsigned)shift);
  }
  if (result > max_finite) return sign | inf;
  return sign | result;
}

static float pw_minifloat_to_f32(const pw_minifloat_t* f, uint32_t bits) {
  const unsigned m = f->mantissa_bits;
  const uint32_t all_ones = (UINT32_C(1) << f->exponent_bits) - 1;
  const bool negative = ((bits >> (f->exponent_bits + m)) & 1u) != 0;
  const uint32_t exponent = (bits >> m) & all_ones;
  const uint32_t mantissa = bits & ((UINT32_C(1) << m) - 1);
  float magnitude;
  if (f->ieee && exponent == all_ones) {
    magnitude = mantissa == 0 ? INFINITY : NAN;
  } else if (!f->ieee && exponent == all_ones && mantissa == (UINT32_C(1) << m) - 1) {
    magnitude = NAN;
  } else if (exponent == 0) {
    magnitude = ldexpf((float)mantissa, 1 - f->bias - (int)m);
  } else {
    magnitude = ldexpf((float)(mantissa | (UINT32_C(1) << m)),
                       (int)exponent - f->bias - (int)m);
  }
  return negative ? -magnitude : magnitude;
}

float pw_bf16_to_f32(uint16_t bits) {
  /* bf16 is f32's top half: widening is a shift (NaN payloads kept). */
  const uint32_t wide = (uint32_t)bits << 16;
  float value;
  memcpy(&value, &wide, sizeof(value));
  return value;
}

uint16_t pw_f32_to_bf16(float value) {
  return (uint16_t)pw_minifloat_from_f32(&pw_fmt_bf16, value);
}

float pw_f16_to_f32(uint16_t bits) { return pw_minifloat_to_f32(&pw_fmt_f16, bits); }

uint16_t pw_f32_to_f16(float value) {
  return (uint16_t)pw_minifloat_from_f32(&pw_fmt_f16, value);
}

float pw_f8e4m3fn_to_f32(uint8_t bits) { return pw_minifloat_to_f32(&pw_fmt_e4m3fn, bits); }

uint8_t pw_f32_to_f8e4m3fn(float value) {
  return (uint8_t)pw_minifloat_from_f32(&pw_fmt_e4m3fn, value);
}

float pw_f8e5m2_to_f32(uint8_t bits) { return pw_minifloat_to_f32(&pw_fmt_e5m2, bits); }

uint8_t pw_f32_to_f8e5m2(float value) {
  return (uint8_t)pw_minifloat_from_f32(&pw_fmt_e5m2, value);
}
