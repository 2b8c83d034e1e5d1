/* The CPU backend's kernels on the dtypes beyond f32/f64: every integer
 * dtype (add, sub, mul, reduce_sum, all_reduce_sum, bit-exact against
 * arithmetic modulo 2^bits), f16 and bf16 (every float elementwise kernel,
 * bias_add, reductions and all-reduces, bit-exact against "widen to f32,
 * compute the same expression, round to nearest even once", with NaN, inf,
 * overflow and rounding ties among the inputs), c64 arithmetic, fill and
 * data movement for bool, f8 and c64, and the dtypes each kernel refuses. */
#include <complex.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cpu_test_support.h"
#include "support/test_allocators.h"

TestSuite(cpu_dtype_kernels, .fini = pw_test_check_leaks);

enum { N = 48 }; /* [16,3] split(0,all) over 8 devices */

typedef struct dfix_t {
  pw_test_allocator_t counting;
  pw_backend_t backend;
  pw_mesh_shape_t mesh;
  uint64_t rng;
} dfix_t;

static void dfix_init(dfix_t* f) {
  pw_test_allocator_init(&f->counting);
  cr_assert_null(cpu_create(pw_test_allocator(&f->counting), 8, 2, 0, &f->backend));
  uint32_t eight[] = {8};
  f->mesh = pw_mesh_shape_make(1, eight);
  f->rng = 7;
}

static void dfix_fini(dfix_t* f) {
  cpu_destroy(f->backend);
  cr_assert_eq(pw_test_allocator_live(&f->counting), 0);
}

static uint64_t next_u64(uint64_t* state) {
  *state = *state * 6364136223846793005u + 1442695040888963407u;
  return *state ^ (*state >> 29);
}

static void run_ok(dfix_t* f, const char* text, const void* const* in, void* const* out) {
  pw_status_t s = cpu_run_text(f->backend, text, &f->mesh, in, out);
  cr_assert_null(s, "%s\n-> %s", text, pw_status_message(s));
}

static void compile_fails(dfix_t* f, const char* text, const char* needle) {
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig;
  pw_status_t s = cpu_load_text(f->backend, text, &f->mesh, &exe, &sig);
  cr_assert_not_null(s, "%s compiled", text);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT, "%s", pw_status_message(s));
  cr_assert(strstr(pw_status_message(s), needle) != NULL, "'%s' lacks '%s'",
            pw_status_message(s), needle);
  pw_status_free(s);
}

static const pw_dtype_t integer_dtypes[] = {PW_DTYPE_I8,  PW_DTYPE_I16, PW_DTYPE_I32,
                                            PW_DTYPE_I64, PW_DTYPE_U8,  PW_DTYPE_U16,
                                            PW_DTYPE_U32, PW_DTYPE_U64};
#define INTEGER_COUNT (sizeof(integer_dtypes) / sizeof(integer_dtypes[0]))

/* Element |i| of a little-endian integer array of |width| bytes, zero-
 * extended, and its store (the low |width| bytes). */
static uint64_t get_int(const unsigned char* data, size_t width, size_t i) {
  uint64_t v = 0;
  memcpy(&v, data + i * width, width);
  return v;
}
static void put_int(unsigned char* data, size_t width, size_t i, uint64_t v) {
  memcpy(data + i * width, &v, width);
}

/* Random bytes with the extremes (0, -1 / max, the sign bit, ...) first. */
static void fill_integers(dfix_t* f, unsigned char* data, size_t width, size_t n) {
  const uint64_t top = UINT64_C(1) << (8 * width - 1);
  const uint64_t edges[] = {0, 1, top, top - 1, ~UINT64_C(0), top + 1, 2, top};
  for (size_t i = 0; i < n; ++i) {
    put_int(data, width, i, i < 8 ? edges[i] : next_u64(&f->rng));
  }
}

Test(cpu_dtype_kernels, integer_add_sub_mul_wrap_exactly) {
  dfix_t f;
  dfix_init(&f);
  static const char* kernels[] = {"add", "sub", "mul"};
  for (size_t d = 0; d < INTEGER_COUNT; ++d) {
    const char* name = pw_dtype_name(integer_dtypes[d]);
    size_t w = pw_dtype_size(integer_dtypes[d]);
    unsigned char a[N * 8], b[N * 8], out[N * 8];
    fill_integers(&f, a, w, N);
    fill_integers(&f, b, w, N);
    put_int(b, w, 0, ~UINT64_C(0)); /* 0 op -1 */
    const void* in[] = {a, b};
    void* outs[] = {out};
    for (int k = 0; k < 3; ++k) {
      char text[256];
      snprintf(text, sizeof(text),
               "kernel %s\ninput %s[16,3] split(0,all)\ninput %s[16,3] split(0,all)\n"
               "output %s[16,3] split(0,all)\n", kernels[k], name, name, name);
      memset(out, 0xAB, sizeof(out));
      run_ok(&f, text, in, outs);
      for (size_t i = 0; i < N; ++i) {
        uint64_t x = get_int(a, w, i), y = get_int(b, w, i);
        uint64_t want = k == 0 ? x + y : k == 1 ? x - y : x * y;
        uint64_t mask = w == 8 ? ~UINT64_C(0) : (UINT64_C(1) << (8 * w)) - 1;
        cr_assert_eq(get_int(out, w, i), want & mask, "%s %s [%zu]", kernels[k], name, i);
      }
    }
  }
  dfix_fini(&f);
}

Test(cpu_dtype_kernels, integer_reductions_wrap_exactly) {
  dfix_t f;
  dfix_init(&f);
  for (size_t d = 0; d < INTEGER_COUNT; ++d) {
    const char* name = pw_dtype_name(integer_dtypes[d]);
    size_t w = pw_dtype_size(integer_dtypes[d]);
    uint64_t mask = w == 8 ? ~UINT64_C(0) : (UINT64_C(1) << (8 * w)) - 1;
    unsigned char x[N * 8], y[N * 8];
    fill_integers(&f, x, w, N);
    const void* in[] = {x};
    void* outs[] = {y};
    /* reduce_sum over the unsplit axis 1: y[16] split(0,all). */
    char text[256];
    snprintf(text, sizeof(text),
             "kernel reduce_sum\ninput %s[16,3] split(0,all)\noutput %s[16] split(0,all)\n"
             "attr axis 1\n", name, name);
    run_ok(&f, text, in, outs);
    for (size_t r = 0; r < 16; ++r) {
      uint64_t want = get_int(x, w, 3 * r) + get_int(x, w, 3 * r + 1) + get_int(x, w, 3 * r + 2);
      cr_assert_eq(get_int(y, w, r), want & mask, "reduce_sum %s [%zu]", name, r);
    }
    /* all_reduce_sum: x[8,6] split(0,all) -> y[6] replicated. */
    snprintf(text, sizeof(text),
             "kernel all_reduce_sum\ninput %s[8,6] split(0,all)\noutput %s[6] replicated\n",
             name, name);
    run_ok(&f, text, in, outs);
    for (size_t c = 0; c < 6; ++c) {
      uint64_t want = 0;
      for (size_t g = 0; g < 8; ++g) want += get_int(x, w, g * 6 + c);
      cr_assert_eq(get_int(y, w, c), want & mask, "all_reduce_sum %s [%zu]", name, c);
    }
  }
  dfix_fini(&f);
}

/*---------------------------------------------------------------------------
 * f16 and bf16
 *-------------------------------------------------------------------------*/

typedef struct half_t {
  pw_dtype_t dtype;
  float (*widen)(uint16_t);
  uint16_t (*narrow)(float);
} half_t;

static const half_t halves[] = {{PW_DTYPE_F16, pw_f16_to_f32, pw_f32_to_f16},
                                {PW_DTYPE_BF16, pw_bf16_to_f32, pw_f32_to_bf16}};

/* Random values of the half type in about [-4, 4), edge cases first: NaN,
 * +-inf, the largest finite, a subnormal, zeros, and values whose sums and
 * products tie or overflow. */
static void fill_half(dfix_t* f, const half_t* h, uint16_t* out, size_t n) {
  const bool is_f16 = h->dtype == PW_DTYPE_F16;
  const float edges[] = {NAN, INFINITY, -INFINITY, is_f16 ? 65504.0f : 0x1.fep127f,
                         is_f16 ? 0x1p-24f : 0x1p-133f, -0.0f, 1.0f,
                         is_f16 ? 0x1p-11f : 0x1p-8f /* half an ulp of 1 */};
  for (size_t i = 0; i < n; ++i) {
    float v = i < 8 ? edges[i] : (float)((int64_t)(next_u64(&f->rng) >> 40) - (1 << 23)) / (1 << 21);
    out[i] = h->narrow(v);
  }
}

static void expect_same_half(const half_t* h, const uint16_t* got, const uint16_t* want,
                             size_t n, const char* what) {
  for (size_t i = 0; i < n; ++i) {
    bool both_nan = isnan(h->widen(got[i])) && isnan(h->widen(want[i]));
    cr_assert(both_nan || got[i] == want[i], "%s %s[%zu]: got 0x%04x (%a) want 0x%04x (%a)",
              pw_dtype_name(h->dtype), what, i, got[i], (double)h->widen(got[i]), want[i],
              (double)h->widen(want[i]));
  }
}

static float ref_kernel(int k, float a, float b) {
  switch (k) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    case 3: return 0.75f * a;
    case 4: return -1.5f * a + b;
    case 5: return a - 0.125f * b;
    case 6: return a > 0 ? a : 0;
    case 7: return a > 0 ? b : 0;
    case 8: return 1 / (1 + expf(-a));
    case 9: return (a > 0 ? a : 0) - a * b + log1pf(expf(-fabsf(a)));
    default: return (1 / (1 + expf(-a)) - b) * 0.5f;
  }
}

Test(cpu_dtype_kernels, half_elementwise_is_f32_rounded_once) {
  dfix_t f;
  dfix_init(&f);
  static const struct {
    const char* kernel;
    int inputs;
    const char* attr;
  } cases[] = {
      {"add", 2, ""},  {"sub", 2, ""},       {"mul", 2, ""},
      {"scale", 1, "attr alpha 0.75\n"},     {"axpy", 2, "attr alpha -1.5\n"},
      {"sgd_update", 2, "attr lr 0.125\n"},  {"relu", 1, ""},
      {"relu_grad", 2, ""}, {"sigmoid", 1, ""}, {"logistic_loss", 2, ""},
      {"logistic_loss_grad", 2, "attr scale 0.5\n"},
  };
  for (size_t h = 0; h < 2; ++h) {
    const half_t* t = &halves[h];
    const char* name = pw_dtype_name(t->dtype);
    uint16_t a[N], b[N], out[N], want[N];
    fill_half(&f, t, a, N);
    fill_half(&f, t, b, N);
    b[3] = a[3];       /* largest + largest overflows to inf */
    b[6] = t->narrow(t->dtype == PW_DTYPE_F16 ? 0x1p-11f : 0x1p-8f); /* 1 + half ulp: tie */
    const void* in[] = {a, b};
    void* outs[] = {out};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
      char text[512];
      snprintf(text, sizeof(text), "kernel %s\ninput %s[16,3] split(0,all)\n%soutput %s[16,3] "
               "split(0,all)\n%s", cases[c].kernel, name,
               cases[c].inputs == 2 ? (h == 0 ? "input f16[16,3] split(0,all)\n"
                                              : "input bf16[16,3] split(0,all)\n") : "",
               name, cases[c].attr);
      run_ok(&f, text, in, outs);
      for (size_t i = 0; i < N; ++i) {
        want[i] = t->narrow(ref_kernel((int)c, t->widen(a[i]), cases[c].inputs == 2
                                                                  ? t->widen(b[i]) : 0.0f));
      }
      expect_same_half(t, out, want, N, cases[c].kernel);
    }
    /* The edge cases did what IEEE says. */
    memcpy(out, a, sizeof(out));
    run_ok(&f, h == 0 ? "kernel add\ninput f16[16,3] split(0,all)\ninput f16[16,3] "
                        "split(0,all)\noutput f16[16,3] split(0,all)\n"
                      : "kernel add\ninput bf16[16,3] split(0,all)\ninput bf16[16,3] "
                        "split(0,all)\noutput bf16[16,3] split(0,all)\n",
           in, outs);
    cr_assert(isnan(t->widen(out[0])));
    cr_assert_eq(t->widen(out[3]), INFINITY, "%s: max + max", name);
    cr_assert_eq(t->widen(out[6]), 1.0f, "%s: 1 + half an ulp ties to even", name);
  }
  dfix_fini(&f);
}

Test(cpu_dtype_kernels, half_bias_add_and_reductions_sum_in_f32) {
  dfix_t f;
  dfix_init(&f);
  for (size_t h = 0; h < 2; ++h) {
    const half_t* t = &halves[h];
    const char* name = pw_dtype_name(t->dtype);
    uint16_t x[N], bias[3], y[N], want[N];
    fill_half(&f, t, x, N);
    for (size_t i = 0; i < 8; ++i) x[i] = t->narrow((float)i - 3.5f); /* finite sums */
    fill_half(&f, t, bias, 3);
    bias[0] = t->narrow(0.25f);
    char text[512];
    snprintf(text, sizeof(text), "kernel bias_add\ninput %s[16,3] split(0,all)\ninput %s[3] "
             "replicated\noutput %s[16,3] split(0,all)\n", name, name, name);
    const void* in2[] = {x, bias};
    void* outs[] = {y};
    run_ok(&f, text, in2, outs);
    for (size_t i = 0; i < N; ++i) want[i] = t->narrow(t->widen(x[i]) + t->widen(bias[i % 3]));
    expect_same_half(t, y, want, N, "bias_add");
    const void* in[] = {x};
    for (int mean = 0; mean < 2; ++mean) {
      /* reduce over the unsplit axis 1 */
      snprintf(text, sizeof(text), "kernel %s\ninput %s[16,3] split(0,all)\noutput %s[16] "
               "split(0,all)\nattr axis 1\n", mean ? "reduce_mean" : "reduce_sum", name, name);
      run_ok(&f, text, in, outs);
      for (size_t r = 0; r < 16; ++r) {
        float s = 0.0f;
        for (size_t c = 0; c < 3; ++c) s += t->widen(x[3 * r + c]);
        want[r] = t->narrow(mean ? s / 3.0f : s);
      }
      expect_same_half(t, y, want, 16, mean ? "reduce_mean" : "reduce_sum");
      /* all-reduce: x[8,6] split(0,all) -> y[6], summed in mesh order */
      snprintf(text, sizeof(text), "kernel %s\ninput %s[8,6] split(0,all)\noutput %s[6] "
               "replicated\n", mean ? "all_reduce_mean" : "all_reduce_sum", name, name);
      run_ok(&f, text, in, outs);
      for (size_t c = 0; c < 6; ++c) {
        float s = 0.0f;
        for (size_t g = 0; g < 8; ++g) s += t->widen(x[g * 6 + c]);
        want[c] = t->narrow(mean ? s / 8.0f : s);
      }
      expect_same_half(t, y, want, 6, mean ? "all_reduce_mean" : "all_reduce_sum");
    }
  }
  dfix_fini(&f);
}

/*---------------------------------------------------------------------------
 * c64, bool, f8: arithmetic where it makes sense, fill and movement
 *-------------------------------------------------------------------------*/

Test(cpu_dtype_kernels, c64_add_and_mul_are_complex_arithmetic) {
  dfix_t f;
  dfix_init(&f);
  float complex a[N], b[N], out[N];
  for (size_t i = 0; i < N; ++i) {
    a[i] = (float)i - 0.5f * I * (float)i;
    b[i] = 0.25f + I * (float)(N - i);
  }
  const void* in[] = {a, b};
  void* outs[] = {out};
  run_ok(&f, "kernel mul\ninput c64[16,3] split(0,all)\ninput complex64[16,3] split(0,all)\n"
             "output c64[16,3] split(0,all)\n", in, outs);
  for (size_t i = 0; i < N; ++i) {
    float complex want = a[i] * b[i];
    cr_assert(crealf(out[i]) == crealf(want) && cimagf(out[i]) == cimagf(want), "[%zu]", i);
  }
  run_ok(&f, "kernel add\ninput c64[16,3] split(0,all)\ninput c64[16,3] split(0,all)\n"
             "output c64[16,3] split(0,all)\n", in, outs);
  for (size_t i = 0; i < N; ++i) {
    cr_assert(crealf(out[i]) == crealf(a[i]) + 0.25f && cimagf(out[i]) == cimagf(a[i] + b[i]));
  }
  dfix_fini(&f);
}

Test(cpu_dtype_kernels, fill_converts_and_checks_the_value) {
  dfix_t f;
  dfix_init(&f);
  static const struct {
    const char* dtype;
    const char* value;
    uint64_t bits; /* of one element */
  } cases[] = {
      {"i8", "-128", 0x80},          {"i16", "-2", 0xFFFE},       {"u16", "65535", 0xFFFF},
      {"u32", "4294967295", 0xFFFFFFFFu}, {"u64", "9007199254740992", UINT64_C(1) << 53},
      {"bool", "1", 1},              {"f16", "0.1", 0x2E66},      {"bf16", "-3", 0xC040},
      {"f8e4m3fn", "448", 0x7E},     {"f8e4m3fn", "1000", 0x7F},  {"f8e5m2", "-0.5", 0xB8},
      {"float8_e5m2", "1e9", 0x7C},  {"c64", "2.5", 0x40200000u}, /* real 2.5, imag 0 */
  };
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
    pw_dtype_t dtype;
    cr_assert(pw_dtype_parse(cases[c].dtype, strlen(cases[c].dtype), &dtype));
    size_t w = pw_dtype_size(dtype);
    unsigned char out[N * 8];
    memset(out, 0xCD, sizeof(out));
    void* outs[] = {out};
    char text[256];
    snprintf(text, sizeof(text), "kernel fill\noutput %s[16,3] split(0,all)\nattr value %s\n",
             cases[c].dtype, cases[c].value);
    run_ok(&f, text, NULL, outs);
    for (size_t i = 0; i < N; ++i) {
      cr_assert_eq(get_int(out, w, i), cases[c].bits, "fill %s %s [%zu]: 0x%llx", cases[c].dtype,
                   cases[c].value, i, (unsigned long long)get_int(out, w, i));
    }
  }
  compile_fails(&f, "kernel fill\noutput i8[8] replicated\nattr value 128\n", "value");
  compile_fails(&f, "kernel fill\noutput u16[8] replicated\nattr value -1\n", "value");
  compile_fails(&f, "kernel fill\noutput bool[8] replicated\nattr value 2\n", "value");
  compile_fails(&f, "kernel fill\noutput u8[8] replicated\nattr value 0.5\n", "value");
  dfix_fini(&f);
}

Test(cpu_dtype_kernels, copy_and_all_gather_move_every_dtype) {
  dfix_t f;
  dfix_init(&f);
  for (int d = 1; d < PW_DTYPE_COUNT; ++d) {
    const char* name = pw_dtype_name((pw_dtype_t)d);
    size_t bytes = 16 * pw_dtype_size((pw_dtype_t)d);
    unsigned char x[16 * 8], y[16 * 8];
    for (size_t i = 0; i < bytes; ++i) x[i] = (unsigned char)next_u64(&f.rng);
    const void* in[] = {x};
    void* outs[] = {y};
    char text[256];
    snprintf(text, sizeof(text), "kernel all_gather\ninput %s[16] split(0,all)\noutput %s[16] "
             "replicated\n", name, name);
    memset(y, 0, sizeof(y));
    run_ok(&f, text, in, outs);
    cr_assert(memcmp(x, y, bytes) == 0, "all_gather %s", name);
    snprintf(text, sizeof(text), "kernel copy\ninput %s[16] split(0,all)\noutput %s[16] "
             "split(0,all)\n", name, name);
    memset(y, 0, sizeof(y));
    run_ok(&f, text, in, outs);
    cr_assert(memcmp(x, y, bytes) == 0, "copy %s", name);
  }
  dfix_fini(&f);
}

Test(cpu_dtype_kernels, unsupported_dtypes_are_refused_naming_kernel_and_dtype) {
  dfix_t f;
  dfix_init(&f);
  compile_fails(&f, "kernel add\ninput bool[8] replicated\ninput bool[8] replicated\n"
                    "output bool[8] replicated\n", "kernel 'add' does not take dtype bool");
  compile_fails(&f, "kernel mul\ninput f8e5m2[8] replicated\ninput f8e5m2[8] replicated\n"
                    "output f8e5m2[8] replicated\n", "kernel 'mul' does not take dtype f8e5m2");
  compile_fails(&f, "kernel sigmoid\ninput i32[8] replicated\noutput i32[8] replicated\n",
                "kernel 'sigmoid' does not take dtype i32");
  compile_fails(&f, "kernel all_reduce_sum\ninput c64[8,2] split(0,all)\n"
                    "output c64[2] replicated\n", "kernel 'all_reduce_sum' does not take dtype c64");
  compile_fails(&f, "kernel all_reduce_mean\ninput u32[8,2] split(0,all)\n"
                    "output u32[2] replicated\n", "kernel 'all_reduce_mean' does not take dtype u32");
  compile_fails(&f, "kernel matmul\ninput f16[4,4] replicated\ninput f16[4,4] replicated\n"
                    "output f16[4,4] replicated\n", "kernel 'matmul' does not take dtype f16");
  dfix_fini(&f);
}
