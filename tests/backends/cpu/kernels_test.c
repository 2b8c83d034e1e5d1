/* Every non-collective built-in kernel, run over 8 devices on 2 workers,
 * checked against a plain C reference on fixed-seed random inputs. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cpu_test_support.h"
#include "support/test_allocators.h"

TestSuite(cpu_kernels, .fini = pw_test_check_leaks);

typedef struct kfix_t {
  pw_test_allocator_t counting;
  pw_backend_t backend;
  pw_mesh_shape_t mesh;
  uint64_t rng;
} kfix_t;

static void kfix_init(kfix_t* f, uint32_t mesh_rank) {
  pw_test_allocator_init(&f->counting);
  cr_assert_null(cpu_create(pw_test_allocator(&f->counting), 8, 2, 0, &f->backend));
  uint32_t one[] = {8};
  uint32_t two[] = {2, 4};
  f->mesh = mesh_rank == 1 ? pw_mesh_shape_make(1, one) : pw_mesh_shape_make(2, two);
  f->rng = 42;
}

static void kfix_fini(kfix_t* f) {
  cpu_destroy(f->backend);
  cr_assert_eq(pw_test_allocator_live(&f->counting), 0);
}

static void run_ok(kfix_t* f, const char* text, const void* const* in, void* const* out) {
  pw_status_t s = cpu_run_text(f->backend, text, &f->mesh, in, out);
  cr_assert_null(s, "%s\n-> %s", text, pw_status_message(s));
}

static void expect_close(const float* got, const float* want, size_t n, float tolerance,
                         const char* what) {
  for (size_t i = 0; i < n; ++i) {
    float scale = fabsf(want[i]) > 1 ? fabsf(want[i]) : 1;
    cr_assert(fabsf(got[i] - want[i]) <= tolerance * scale, "%s[%zu]: got %.9g want %.9g",
              what, i, got[i], want[i]);
  }
}

/*---------------------------------------------------------------------------
 * Elementwise
 *-------------------------------------------------------------------------*/

enum { N = 48 }; /* f32[16,3] split(0,all) over 8 devices */

static float ref_sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }

Test(cpu_kernels, elementwise_f32_split) {
  kfix_t f;
  kfix_init(&f, 1);
  float a[N], b[N], out[N], want[N];
  cpu_random_fill(&f.rng, a, N);
  cpu_random_fill(&f.rng, b, N);
  const void* in[] = {a, b};
  void* outs[] = {out};
  static const struct {
    const char* kernel;
    int inputs;
    const char* attr;
  } cases[] = {
      {"add", 2, ""},       {"sub", 2, ""},          {"mul", 2, ""},
      {"scale", 1, "attr alpha 0.75\n"},             {"axpy", 2, "attr alpha -1.5\n"},
      {"sgd_update", 2, "attr lr 0.1\n"},            {"relu", 1, ""},
      {"relu_grad", 2, ""}, {"sigmoid", 1, ""},      {"logistic_loss", 2, ""},
      {"logistic_loss_grad", 2, "attr scale 0.125\n"},
  };
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
    char text[512];
    snprintf(text, sizeof(text), "kernel %s\n%s%soutput f32[16,3] split(0,all)\n%s",
             cases[c].kernel, "input f32[16,3] split(0,all)\n",
             cases[c].inputs == 2 ? "input f32[16,3] split(0,all)\n" : "", cases[c].attr);
    memset(out, 0, sizeof(out));
    run_ok(&f, text, in, outs);
    for (int i = 0; i < N; ++i) {
      float x = a[i], y = b[i];
      switch (c) {
        case 0: want[i] = x + y; break;
        case 1: want[i] = x - y; break;
        case 2: want[i] = x * y; break;
        case 3: want[i] = 0.75f * x; break;
        case 4: want[i] = -1.5f * x + y; break;
        case 5: want[i] = x - 0.1f * y; break;
        case 6: want[i] = x > 0 ? x : 0; break;
        case 7: want[i] = x > 0 ? y : 0; break;
        case 8: want[i] = ref_sigmoid(x); break;
        case 9: want[i] = (x > 0 ? x : 0) - x * y + log1pf(expf(-fabsf(x))); break;
        default: want[i] = (ref_sigmoid(x) - y) * 0.125f; break;
      }
    }
    expect_close(out, want, N, 1e-6f, cases[c].kernel);
  }
  kfix_fini(&f);
}

Test(cpu_kernels, elementwise_f64_replicated_on_2x4) {
  kfix_t f;
  kfix_init(&f, 2);
  double a[12], b[12], out[12];
  cpu_random_fill_f64(&f.rng, a, 12);
  cpu_random_fill_f64(&f.rng, b, 12);
  const void* in[] = {a, b};
  void* outs[] = {out};
  run_ok(&f,
         "kernel axpy\ninput f64[3,4] split(1,1)\ninput f64[3,4] split(1,1)\n"
         "output f64[3,4] split(1,1)\nattr alpha 2\n",
         in, outs);
  for (int i = 0; i < 12; ++i) cr_assert_eq(out[i], 2.0 * a[i] + b[i], "%d", i);
  run_ok(&f, "kernel sigmoid\ninput f64[3,4] replicated\noutput f64[3,4] replicated\n", in,
         outs);
  for (int i = 0; i < 12; ++i) {
    cr_assert(fabs(out[i] - 1.0 / (1.0 + exp(-a[i]))) < 1e-15, "%d", i);
  }
  kfix_fini(&f);
}

Test(cpu_kernels, copy_fill_and_bias_add) {
  kfix_t f;
  kfix_init(&f, 1);
  uint8_t bytes[32], bytes_out[32];
  for (int i = 0; i < 32; ++i) bytes[i] = (uint8_t)(i * 7 + 3);
  const void* in_u8[] = {bytes};
  void* out_u8[] = {bytes_out};
  run_ok(&f, "kernel copy\ninput u8[8,4] split(0,all)\noutput u8[8,4] split(0,all)\n", in_u8,
         out_u8);
  cr_assert(memcmp(bytes, bytes_out, 32) == 0);

  int32_t filled[16];
  void* out_i32[] = {filled};
  run_ok(&f, "kernel fill\noutput i32[16] split(0,all)\nattr value -7\n", NULL, out_i32);
  for (int i = 0; i < 16; ++i) cr_assert_eq(filled[i], -7);
  double filled64[3];
  void* out_f64[] = {filled64};
  run_ok(&f, "kernel fill\noutput f64[3] replicated\nattr value 0.1\n", NULL, out_f64);
  for (int i = 0; i < 3; ++i) cr_assert_eq(filled64[i], 0.1);

  float x[40], bias[5], y[40];
  cpu_random_fill(&f.rng, x, 40);
  cpu_random_fill(&f.rng, bias, 5);
  const void* in[] = {x, bias};
  void* outs[] = {y};
  run_ok(&f,
         "kernel bias_add\ninput f32[8,5] split(0,all)\ninput f32[5] replicated\n"
         "output f32[8,5] split(0,all)\n",
         in, outs);
  for (int i = 0; i < 40; ++i) cr_assert_eq(y[i], x[i] + bias[i % 5], "%d", i);
  kfix_fini(&f);
}

/* spin copies its input after its wall-clock wait (the wait itself is not
 * asserted: no timing in tests), and refuses an ns that is missing,
 * negative, fractional or over 10 s. */
Test(cpu_kernels, spin_copies_and_checks_its_ns) {
  kfix_t f;
  kfix_init(&f, 1);
  float x[16], y[16];
  cpu_random_fill(&f.rng, x, 16);
  const void* in[] = {x};
  void* out[] = {y};
  run_ok(&f, "kernel spin\ninput f32[16] split(0,all)\noutput f32[16] split(0,all)\n"
             "attr ns 2000\n", in, out);
  cr_assert(memcmp(x, y, sizeof(x)) == 0);
  static const char* const bad[] = {"", "attr ns -1\n", "attr ns 1.5\n", "attr ns 2e10\n"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    char text[160];
    snprintf(text, sizeof(text),
             "kernel spin\ninput f32[16] split(0,all)\noutput f32[16] split(0,all)\n%s", bad[i]);
    pw_status_t s = cpu_run_text(f.backend, text, &f.mesh, in, out);
    cr_assert_not_null(s, "'%s' accepted", bad[i]);
    cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT, "%s", pw_status_message(s));
    pw_status_free(s);
  }
  kfix_fini(&f);
}

/*---------------------------------------------------------------------------
 * matmul
 *-------------------------------------------------------------------------*/

/* c[m,n] = op(a) op(b) with a stored [m,k] (or [k,m] if ta), b [k,n] (or
 * [n,k] if tb). */
static void ref_matmul(const float* a, const float* b, float* c, int m, int k, int n,
                       bool ta, bool tb) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      float acc = 0;
      for (int p = 0; p < k; ++p) {
        float av = ta ? a[p * m + i] : a[i * k + p];
        float bv = tb ? b[j * k + p] : b[p * n + j];
        acc += av * bv;
      }
      c[i * n + j] = acc;
    }
  }
}

Test(cpu_kernels, matmul_row_split_and_transposes) {
  kfix_t f;
  kfix_init(&f, 1);
  float a[16 * 6], b[6 * 5], c[16 * 5], want[16 * 5];
  cpu_random_fill(&f.rng, a, 16 * 6);
  cpu_random_fill(&f.rng, b, 6 * 5);
  const void* in[] = {a, b};
  void* outs[] = {c};
  run_ok(&f,
         "kernel matmul\ninput f32[16,6] split(0,all)\ninput f32[6,5] replicated\n"
         "output f32[16,5] split(0,all)\n",
         in, outs);
  ref_matmul(a, b, want, 16, 6, 5, false, false);
  expect_close(c, want, 16 * 5, 1e-6f, "row split");

  /* transpose_b, everything replicated: a[4,6] x b[5,6]^T. */
  run_ok(&f,
         "kernel matmul\ninput f32[4,6] replicated\ninput f32[5,6] replicated\n"
         "output f32[4,5] replicated\nattr transpose_b 1\n",
         in, outs);
  ref_matmul(a, b, want, 4, 6, 5, false, true);
  expect_close(c, want, 4 * 5, 1e-6f, "transpose_b");

  /* Column split of b: a[2,6] x b[6,16] split(1,all). */
  float bw[6 * 16], cw[2 * 16], ww[2 * 16];
  cpu_random_fill(&f.rng, bw, 6 * 16);
  const void* in2[] = {a, bw};
  void* outs2[] = {cw};
  run_ok(&f,
         "kernel matmul\ninput f32[2,6] replicated\ninput f32[6,16] split(1,all)\n"
         "output f32[2,16] split(1,all)\n",
         in2, outs2);
  ref_matmul(a, bw, ww, 2, 6, 16, false, false);
  expect_close(cw, ww, 2 * 16, 1e-6f, "column split");
  kfix_fini(&f);
}

Test(cpu_kernels, matmul_partial_products_of_a_split_contraction) {
  kfix_t f;
  kfix_init(&f, 1);
  /* dW = X^T dz with X[16,6] and dz[16,3] split by rows: partials [8,6,3]. */
  float x[16 * 6], dz[16 * 3], partial[8 * 6 * 3], want[6 * 3];
  cpu_random_fill(&f.rng, x, 16 * 6);
  cpu_random_fill(&f.rng, dz, 16 * 3);
  const void* in[] = {x, dz};
  void* outs[] = {partial};
  run_ok(&f,
         "kernel matmul\ninput f32[16,6] split(0,all)\ninput f32[16,3] split(0,all)\n"
         "output f32[8,6,3] split(0,all)\nattr transpose_a 1\n",
         in, outs);
  ref_matmul(x, dz, want, 6, 16, 3, true, false);
  for (int d = 0; d < 8; ++d) {
    /* Device d's partial: its two rows of x and dz. */
    float local[6 * 3];
    ref_matmul(x + d * 2 * 6, dz + d * 2 * 3, local, 6, 2, 3, true, false);
    expect_close(partial + d * 18, local, 18, 1e-6f, "partial");
  }
  float sum[6 * 3] = {0};
  for (int d = 0; d < 8; ++d) {
    for (int i = 0; i < 18; ++i) sum[i] += partial[d * 18 + i];
  }
  expect_close(sum, want, 18, 1e-5f, "sum of partials");
  kfix_fini(&f);
}

/*---------------------------------------------------------------------------
 * Reductions
 *-------------------------------------------------------------------------*/

Test(cpu_kernels, reduce_sum_and_mean) {
  kfix_t f;
  kfix_init(&f, 1);
  float x[16 * 6], y[16], partial[8 * 6];
  cpu_random_fill(&f.rng, x, 16 * 6);
  const void* in[] = {x};
  void* outs[] = {y};
  run_ok(&f,
         "kernel reduce_sum\ninput f32[16,6] split(0,all)\noutput f32[16] split(0,all)\n"
         "attr axis 1\n",
         in, outs);
  for (int r = 0; r < 16; ++r) {
    float acc = 0;
    for (int c = 0; c < 6; ++c) acc += x[r * 6 + c];
    cr_assert_eq(y[r], acc, "row %d", r);
  }
  /* Mean over the split axis: partials that sum to the mean. */
  void* outs2[] = {partial};
  run_ok(&f,
         "kernel reduce_mean\ninput f32[16,6] split(0,all)\noutput f32[8,6] split(0,all)\n"
         "attr axis 0\n",
         in, outs2);
  for (int c = 0; c < 6; ++c) {
    float mean = 0, total = 0;
    for (int r = 0; r < 16; ++r) mean += x[r * 6 + c];
    mean /= 16;
    for (int d = 0; d < 8; ++d) total += partial[d * 6 + c];
    cr_assert(fabsf(total - mean) < 1e-6f, "column %d: %g vs %g", c, total, mean);
  }
  /* Rank 1 -> scalar. */
  float scalar = 0;
  void* outs3[] = {&scalar};
  run_ok(&f, "kernel reduce_mean\ninput f32[6] replicated\noutput f32[] replicated\nattr axis 0\n",
         in, outs3);
  float mean = 0;
  for (int i = 0; i < 6; ++i) mean += x[i];
  cr_assert_eq(scalar, mean / 6);
  kfix_fini(&f);
}
