/* The dtype table (values, names, sizes, parsing, bad values) and the
 * narrow float conversions (bf16, f16, f8e4m3fn, f8e5m2): hand-picked edge
 * cases (NaN, infinities, overflow, subnormals, rounding ties), exhaustive
 * round trips of every bit pattern, and, where the compiler has _Float16,
 * agreement with its conversions on random inputs. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "pathways/pathways.h"
#include "support/test_allocators.h"

TestSuite(dtype, .fini = pw_test_check_leaks);

static const struct {
  pw_dtype_t dtype;
  int value;
  const char* name;
  const char* numpy_name;
  size_t size;
} every_dtype[] = {
    {PW_DTYPE_F32, 1, "f32", "float32", 4},
    {PW_DTYPE_F64, 2, "f64", "float64", 8},
    {PW_DTYPE_I32, 3, "i32", "int32", 4},
    {PW_DTYPE_I64, 4, "i64", "int64", 8},
    {PW_DTYPE_U8, 5, "u8", "uint8", 1},
    {PW_DTYPE_BF16, 6, "bf16", "bfloat16", 2},
    {PW_DTYPE_F16, 7, "f16", "float16", 2},
    {PW_DTYPE_I8, 8, "i8", "int8", 1},
    {PW_DTYPE_I16, 9, "i16", "int16", 2},
    {PW_DTYPE_U16, 10, "u16", "uint16", 2},
    {PW_DTYPE_U32, 11, "u32", "uint32", 4},
    {PW_DTYPE_U64, 12, "u64", "uint64", 8},
    {PW_DTYPE_BOOL, 13, "bool", "bool", 1},
    {PW_DTYPE_F8E4M3FN, 14, "f8e4m3fn", "float8_e4m3fn", 1},
    {PW_DTYPE_F8E5M2, 15, "f8e5m2", "float8_e5m2", 1},
    {PW_DTYPE_C64, 16, "c64", "complex64", 8},
};
#define DTYPE_ROWS (sizeof(every_dtype) / sizeof(every_dtype[0]))

Test(dtype, every_value_name_and_size_is_the_documented_one) {
  cr_assert_eq(DTYPE_ROWS, PW_DTYPE_COUNT - 1, "a dtype without a test row");
  for (size_t i = 0; i < DTYPE_ROWS; ++i) {
    pw_dtype_t d = every_dtype[i].dtype;
    cr_assert_eq((int)d, every_dtype[i].value, "%s changed value", every_dtype[i].name);
    cr_assert_str_eq(pw_dtype_name(d), every_dtype[i].name);
    cr_assert_str_eq(pw_dtype_numpy_name(d), every_dtype[i].numpy_name);
    cr_assert_eq(pw_dtype_size(d), every_dtype[i].size, "%s", every_dtype[i].name);
  }
}

Test(dtype, both_spellings_parse_and_nothing_else_does) {
  for (size_t i = 0; i < DTYPE_ROWS; ++i) {
    pw_dtype_t got = PW_DTYPE_INVALID;
    const char* n = every_dtype[i].name;
    cr_assert(pw_dtype_parse(n, strlen(n), &got), "%s", n);
    cr_assert_eq(got, every_dtype[i].dtype);
    got = PW_DTYPE_INVALID;
    n = every_dtype[i].numpy_name;
    cr_assert(pw_dtype_parse(n, strlen(n), &got), "%s", n);
    cr_assert_eq(got, every_dtype[i].dtype);
  }
  static const char* bad[] = {"invalid", "", "F32", "float", "f3", "f32 ", "bfloat",
                              "float8", "f8", "complex128", "c128", "bool_", "u128",
                              "float8_e4m3", "e4m3fn"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    pw_dtype_t got = PW_DTYPE_F64;
    cr_assert_not(pw_dtype_parse(bad[i], strlen(bad[i]), &got), "'%s' parsed", bad[i]);
    cr_assert_eq(got, PW_DTYPE_F64, "'%s' touched the out-param", bad[i]);
  }
  pw_dtype_t got = PW_DTYPE_INVALID;
  cr_assert(pw_dtype_parse("u16[4]", 3, &got)); /* length-bounded */
  cr_assert_eq(got, PW_DTYPE_U16);
  cr_assert_not(pw_dtype_parse(NULL, 3, &got));
  cr_assert_not(pw_dtype_parse("f32", 3, NULL));
}

Test(dtype, unknown_values_have_no_size_and_no_name) {
  const int bad[] = {0, PW_DTYPE_COUNT, PW_DTYPE_COUNT + 1, 255, -1, 0x7FFFFFFF};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    pw_dtype_t d = (pw_dtype_t)bad[i];
    cr_assert_eq(pw_dtype_size(d), 0, "value %d", bad[i]);
    cr_assert_str_eq(pw_dtype_name(d), "invalid");
    cr_assert_str_eq(pw_dtype_numpy_name(d), "invalid");
    pw_shape_t s = pw_shape_make(1, (const int64_t[]){4});
    size_t bytes = 1;
    pw_status_t st = pw_shape_byte_size(d, &s, &bytes);
    cr_assert_eq(pw_status_code(st), PW_STATUS_INVALID_ARGUMENT, "value %d", bad[i]);
    cr_assert_eq(bytes, 0);
    pw_status_free(st);
  }
}

Test(dtype, shapes_format_and_size_with_the_new_dtypes) {
  pw_shape_t s = pw_shape_make(2, (const int64_t[]){3, 5});
  char text[64];
  pw_shape_format(PW_DTYPE_F8E4M3FN, &s, text, sizeof(text));
  cr_assert_str_eq(text, "f8e4m3fn[3,5]");
  pw_shape_format(PW_DTYPE_BOOL, &s, text, sizeof(text));
  cr_assert_str_eq(text, "bool[3,5]");
  for (size_t i = 0; i < DTYPE_ROWS; ++i) {
    size_t bytes = 0;
    cr_assert_null(pw_shape_byte_size(every_dtype[i].dtype, &s, &bytes));
    cr_assert_eq(bytes, 15 * every_dtype[i].size, "%s", every_dtype[i].name);
  }
  /* c64 at the byte limit: 2^60 elements of 8 bytes exceed 2^63 - 1. */
  pw_shape_t huge = pw_shape_make(2, (const int64_t[]){INT64_C(1) << 30, INT64_C(1) << 30});
  size_t bytes = 1;
  pw_status_t st = pw_shape_byte_size(PW_DTYPE_C64, &huge, &bytes);
  cr_assert_eq(pw_status_code(st), PW_STATUS_INVALID_ARGUMENT);
  cr_assert_eq(bytes, 0);
  pw_status_free(st);
  huge.dims[1] = INT64_C(1) << 29;
  cr_assert_null(pw_shape_byte_size(PW_DTYPE_C64, &huge, &bytes));
  cr_assert_eq(bytes, (size_t)1 << 62);
}

/*---------------------------------------------------------------------------
 * Narrow float conversions
 *-------------------------------------------------------------------------*/

static float from_bits(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

static uint32_t to_bits(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  return bits;
}

Test(dtype, f16_edge_cases) {
  static const struct {
    float in;
    uint16_t out;
  } cases[] = {
      {1.0f, 0x3C00}, {-2.0f, 0xC000}, {0.0f, 0x0000}, {-0.0f, 0x8000},
      {65504.0f, 0x7BFF},                  /* largest finite */
      {65519.0f, 0x7BFF},                  /* below the halfway point */
      {65520.0f, 0x7C00},                  /* tie to even: overflows to inf */
      {1e10f, 0x7C00}, {-1e10f, 0xFC00}, {INFINITY, 0x7C00}, {-INFINITY, 0xFC00},
      {0x1p-14f, 0x0400},                  /* smallest normal */
      {0x1p-24f, 0x0001},                  /* smallest subnormal */
      {0x1p-25f, 0x0000},                  /* tie between 0 and 1 unit: to even 0 */
      {0x1.8p-25f, 0x0001},                /* above the tie */
      {0x3p-25f, 0x0002},                  /* 1.5 units: tie to even 2 */
      {0x3FFp-24f, 0x03FF},                /* largest subnormal */
      {0x1.ffcp-15f, 0x0400},              /* rounds up into the normals */
      {1.0f + 0x1p-11f, 0x3C00},           /* tie: mantissa 0 is even */
      {1.0f + 0x3p-11f, 0x3C02},           /* tie: mantissa 1 is odd, up */
      {1.0f + 0x1.01p-11f, 0x3C01},        /* just above a tie */
      {0x1p-149f, 0x0000}, {-0x1p-140f, 0x8000}, /* f32 subnormals underflow */
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    cr_assert_eq(pw_f32_to_f16(cases[i].in), cases[i].out, "%a -> 0x%04x, want 0x%04x",
                 (double)cases[i].in, pw_f32_to_f16(cases[i].in), cases[i].out);
  }
  uint16_t nan = pw_f32_to_f16(NAN);
  cr_assert_eq(nan & 0x7C00, 0x7C00);
  cr_assert_neq(nan & 0x03FF, 0);
  cr_assert_eq(pw_f32_to_f16(-NAN) & 0x8000, 0x8000);
  cr_assert(isnan(pw_f16_to_f32(0x7E00)) && isnan(pw_f16_to_f32(0xFC01)));
  cr_assert_eq(pw_f16_to_f32(0x7C00), INFINITY);
  cr_assert_eq(pw_f16_to_f32(0x0001), 0x1p-24f);
  cr_assert_eq(pw_f16_to_f32(0x8001), -0x1p-24f);
  cr_assert_eq(pw_f16_to_f32(0x7BFF), 65504.0f);
}

Test(dtype, bf16_edge_cases) {
  static const struct {
    uint32_t in;
    uint16_t out;
  } cases[] = {
      {0x3F800000, 0x3F80},             /* 1.0 */
      {0x3F808000, 0x3F80},             /* tie, even stays */
      {0x3F818000, 0x3F82},             /* tie, odd goes up */
      {0x3F808001, 0x3F81},             /* above the tie */
      {0x3F807FFF, 0x3F80},             /* below the tie */
      {0x7F7F0000, 0x7F7F},             /* largest finite bf16 */
      {0x7F7FFFFF, 0x7F80},             /* FLT_MAX rounds to inf */
      {0x7F800000, 0x7F80}, {0xFF800000, 0xFF80},
      {0x00010000, 0x0001},             /* smallest subnormal */
      {0x00008000, 0x0000},             /* tie between 0 and it: 0 */
      {0x00018000, 0x0002},             /* tie, odd goes up */
      {0x007F8000, 0x0080},             /* largest subnormal rounds to min normal */
      {0x80000000, 0x8000},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    cr_assert_eq(pw_f32_to_bf16(from_bits(cases[i].in)), cases[i].out,
                 "0x%08x -> 0x%04x, want 0x%04x", cases[i].in,
                 pw_f32_to_bf16(from_bits(cases[i].in)), cases[i].out);
  }
  cr_assert(isnan(pw_bf16_to_f32(pw_f32_to_bf16(NAN))));
  cr_assert(isnan(pw_bf16_to_f32(pw_f32_to_bf16(from_bits(0x7F800001))))); /* low payload */
  cr_assert_eq(to_bits(pw_bf16_to_f32(0x0001)), 0x00010000u);
  /* Against the classic bit trick, on every 2^-11th f32 pattern. */
  for (uint64_t b = 0; b <= 0xFFFFFFFFu; b += 2039) {
    uint32_t bits = (uint32_t)b;
    if (isnan(from_bits(bits))) continue;
    uint16_t want = (uint16_t)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
    cr_assert_eq(pw_f32_to_bf16(from_bits(bits)), want, "0x%08x", bits);
  }
}

Test(dtype, f8_edge_cases) {
  /* e4m3fn: bias 7, no infinity, NaN only S.1111.111, max 448. */
  cr_assert_eq(pw_f32_to_f8e4m3fn(1.0f), 0x38);
  cr_assert_eq(pw_f32_to_f8e4m3fn(448.0f), 0x7E);
  cr_assert_eq(pw_f32_to_f8e4m3fn(464.0f), 0x7E);  /* tie to even */
  cr_assert_eq(pw_f32_to_f8e4m3fn(480.0f), 0x7F);  /* overflow: NaN */
  cr_assert_eq(pw_f32_to_f8e4m3fn(-1e6f), 0xFF);
  cr_assert_eq(pw_f32_to_f8e4m3fn(INFINITY), 0x7F);
  cr_assert_eq(pw_f32_to_f8e4m3fn(NAN) & 0x7F, 0x7F);
  cr_assert_eq(pw_f32_to_f8e4m3fn(0x1p-9f), 0x01);  /* smallest subnormal */
  cr_assert_eq(pw_f32_to_f8e4m3fn(0x1p-10f), 0x00); /* tie to even 0 */
  cr_assert_eq(pw_f32_to_f8e4m3fn(0x3p-10f), 0x02); /* tie to even 2 */
  cr_assert_eq(pw_f8e4m3fn_to_f32(0x78), 256.0f);   /* exponent 1111 is finite */
  cr_assert_eq(pw_f8e4m3fn_to_f32(0x7E), 448.0f);
  cr_assert(isnan(pw_f8e4m3fn_to_f32(0x7F)) && isnan(pw_f8e4m3fn_to_f32(0xFF)));
  cr_assert_eq(pw_f8e4m3fn_to_f32(0x07), 0x7p-9f);
  /* e5m2: bias 15, IEEE-like, max 57344. */
  cr_assert_eq(pw_f32_to_f8e5m2(1.0f), 0x3C);
  cr_assert_eq(pw_f32_to_f8e5m2(57344.0f), 0x7B);
  cr_assert_eq(pw_f32_to_f8e5m2(61440.0f), 0x7C); /* tie to even: inf */
  cr_assert_eq(pw_f32_to_f8e5m2(61439.0f), 0x7B);
  cr_assert_eq(pw_f32_to_f8e5m2(-INFINITY), 0xFC);
  cr_assert_eq(pw_f32_to_f8e5m2(0x1p-16f), 0x01);
  cr_assert_eq(pw_f32_to_f8e5m2(0x1p-17f), 0x00);
  cr_assert_eq(pw_f8e5m2_to_f32(0x7C), INFINITY);
  cr_assert(isnan(pw_f8e5m2_to_f32(0x7D)) && isnan(pw_f8e5m2_to_f32(pw_f32_to_f8e5m2(NAN))));
}

Test(dtype, every_narrow_pattern_round_trips_through_f32) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    float f = pw_f16_to_f32((uint16_t)b);
    if (isnan(f)) {
      cr_assert_eq(b & 0x7C00, 0x7C00, "0x%04x", b);
      cr_assert(isnan(pw_f16_to_f32(pw_f32_to_f16(f))));
    } else {
      cr_assert_eq(pw_f32_to_f16(f), b, "f16 0x%04x -> %a", b, (double)f);
    }
    f = pw_bf16_to_f32((uint16_t)b);
    if (isnan(f)) {
      cr_assert(isnan(pw_bf16_to_f32(pw_f32_to_bf16(f))));
    } else {
      cr_assert_eq(pw_f32_to_bf16(f), b, "bf16 0x%04x", b);
    }
  }
  for (uint32_t b = 0; b <= 0xFF; ++b) {
    float f = pw_f8e4m3fn_to_f32((uint8_t)b);
    if (isnan(f)) {
      cr_assert_eq(b & 0x7F, 0x7F, "0x%02x", b);
    } else {
      cr_assert_eq(pw_f32_to_f8e4m3fn(f), b, "e4m3fn 0x%02x -> %a", b, (double)f);
    }
    f = pw_f8e5m2_to_f32((uint8_t)b);
    if (isnan(f)) {
      cr_assert_eq(b & 0x7C, 0x7C, "0x%02x", b);
    } else {
      cr_assert_eq(pw_f32_to_f8e5m2(f), b, "e5m2 0x%02x -> %a", b, (double)f);
    }
  }
  /* Widening is monotonic over the positive finite patterns. */
  for (uint32_t b = 1; b < 0x7C00; ++b) {
    cr_assert_lt(pw_f16_to_f32((uint16_t)(b - 1)), pw_f16_to_f32((uint16_t)b));
  }
}

#if defined(__FLT16_MAX__)
/* The compiler's own f32 -> _Float16 conversion is an independent
 * round-to-nearest-even reference. */
Test(dtype, f16_agrees_with_the_compilers_float16) {
  uint64_t state = 0x9E3779B97F4A7C15u;
  for (int i = 0; i < 1 << 20; ++i) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    uint32_t bits = (uint32_t)(state >> 32);
    /* Bias towards f16's range: keep the exponent within 2^-30 .. 2^17. */
    if (i & 1) bits = (bits & 0x807FFFFFu) | ((uint32_t)(97 + (state >> 8) % 48) << 23);
    float f = from_bits(bits);
    if (isnan(f)) continue;
    _Float16 h = (_Float16)f;
    uint16_t want;
    memcpy(&want, &h, sizeof(want));
    cr_assert_eq(pw_f32_to_f16(f), want, "%a (0x%08x)", (double)f, bits);
  }
}
#endif
