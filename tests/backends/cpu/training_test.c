/* End to end: data-parallel logistic regression trained with the built-in
 * kernels over 8 devices (2 workers), checked against a single-process C
 * reference step by step, and for learning (loss falls, accuracy high). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "cpu_test_support.h"
#include "support/test_allocators.h"

TestSuite(cpu_training, .fini = pw_test_check_leaks);

enum { B = 64, D = 4, G = 8, STEPS = 40 };

typedef struct step_programs_t {
  pw_backend_executable_t exe[6];
  pw_executable_signature_t sig[6];
} step_programs_t;

static const char* const kPrograms[6] = {
    /* 0: z = X w */
    "kernel matmul\ninput f32[64,4] split(0,all)\ninput f32[4,1] replicated\n"
    "output f32[64,1] split(0,all)\n",
    /* 1: dz = (sigmoid(z) - y) / B */
    "kernel logistic_loss_grad\ninput f32[64,1] split(0,all)\ninput f32[64,1] split(0,all)\n"
    "output f32[64,1] split(0,all)\nattr scale 0.015625\n",
    /* 2: partial gradients X^T dz per device */
    "kernel matmul\ninput f32[64,4] split(0,all)\ninput f32[64,1] split(0,all)\n"
    "output f32[8,4,1] split(0,all)\nattr transpose_a 1\n",
    /* 3: g = sum of partials */
    "kernel all_reduce_sum\ninput f32[8,4,1] split(0,all)\noutput f32[4,1] replicated\n",
    /* 4: w' = w - lr g */
    "kernel sgd_update\ninput f32[4,1] replicated\ninput f32[4,1] replicated\n"
    "output f32[4,1] replicated\nattr lr 0.5\n",
    /* 5: per-example loss */
    "kernel logistic_loss\ninput f32[64,1] split(0,all)\ninput f32[64,1] split(0,all)\n"
    "output f32[64,1] split(0,all)\n",
};

static float sigmoidf(float z) { return 1.0f / (1.0f + expf(-z)); }

Test(cpu_training, logistic_regression_matches_reference_and_learns) {
  pw_test_allocator_t counting;
  pw_test_allocator_init(&counting);
  pw_backend_t b;
  cr_assert_null(cpu_create(pw_test_allocator(&counting), G, 2, 0, &b));
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, (uint32_t[]){G});
  step_programs_t p;
  for (int i = 0; i < 6; ++i) {
    pw_status_t s = cpu_load_text(b, kPrograms[i], &mesh, &p.exe[i], &p.sig[i]);
    cr_assert_null(s, "program %d: %s", i, pw_status_message(s));
  }
  /* Linearly separable data: label = (x . true_w > 0). */
  uint64_t rng = 2024;
  float x[B * D], y[B];
  const float true_w[D] = {1.5f, -2.0f, 0.5f, 1.0f};
  cpu_random_fill(&rng, x, B * D);
  for (int r = 0; r < B; ++r) {
    float dot = 0;
    for (int c = 0; c < D; ++c) dot += x[r * D + c] * true_w[c];
    y[r] = dot > 0 ? 1.0f : 0.0f;
  }
  float w[D] = {0}, ref_w[D] = {0};
  float z[B], dz[B], partial[G * D], grad[D], next_w[D], loss[B];
  float first_loss = 0, last_loss = 0;
  for (int step = 0; step < STEPS; ++step) {
    uint64_t gang = 100 + (uint64_t)step * 10;
    const void* in0[] = {x, w};
    void* out0[] = {z};
    cr_assert_null(cpu_run(b, p.exe[0], &p.sig[0], NULL, gang + 0, in0, out0));
    const void* in1[] = {z, y};
    void* out1[] = {dz};
    cr_assert_null(cpu_run(b, p.exe[1], &p.sig[1], NULL, gang + 1, in1, out1));
    const void* in2[] = {x, dz};
    void* out2[] = {partial};
    cr_assert_null(cpu_run(b, p.exe[2], &p.sig[2], NULL, gang + 2, in2, out2));
    const void* in3[] = {partial};
    void* out3[] = {grad};
    cr_assert_null(cpu_run(b, p.exe[3], &p.sig[3], NULL, gang + 3, in3, out3));
    const void* in4[] = {w, grad};
    void* out4[] = {next_w};
    cr_assert_null(cpu_run(b, p.exe[4], &p.sig[4], NULL, gang + 4, in4, out4));
    const void* in5[] = {z, y};
    void* out5[] = {loss};
    cr_assert_null(cpu_run(b, p.exe[5], &p.sig[5], NULL, gang + 5, in5, out5));
    float mean_loss = 0;
    for (int r = 0; r < B; ++r) mean_loss += loss[r];
    mean_loss /= B;
    if (step == 0) first_loss = mean_loss;
    last_loss = mean_loss;
    memcpy(w, next_w, sizeof(w));

    /* The reference: the same step on one "device". Device blocks of 8 rows
     * are summed per device, then across devices in order, as the kernels
     * do. */
    float ref_grad[D] = {0};
    for (int d = 0; d < G; ++d) {
      float local[D] = {0};
      for (int r = d * (B / G); r < (d + 1) * (B / G); ++r) {
        float zr = 0;
        for (int c = 0; c < D; ++c) zr += x[r * D + c] * ref_w[c];
        float dzr = (sigmoidf(zr) - y[r]) * 0.015625f;
        for (int c = 0; c < D; ++c) local[c] += x[r * D + c] * dzr;
      }
      for (int c = 0; c < D; ++c) ref_grad[c] = d == 0 ? local[c] : ref_grad[c] + local[c];
    }
    for (int c = 0; c < D; ++c) {
      ref_w[c] = ref_w[c] - 0.5f * ref_grad[c];
      cr_assert(fabsf(ref_w[c] - w[c]) <= 1e-5f, "step %d w[%d]: %g vs reference %g", step, c,
                w[c], ref_w[c]);
    }
  }
  cr_assert_lt(last_loss, first_loss * 0.6f, "loss %g -> %g", first_loss, last_loss);
  int correct = 0;
  for (int r = 0; r < B; ++r) {
    float dot = 0;
    for (int c = 0; c < D; ++c) dot += x[r * D + c] * w[c];
    correct += (dot > 0) == (y[r] > 0.5f);
  }
  cr_assert_geq(correct, B * 9 / 10, "accuracy %d/%d", correct, B);
  for (int i = 0; i < 6; ++i) b.vtable->unload(b.self, p.exe[i]);
  cpu_destroy(b);
  cr_assert_eq(pw_test_allocator_live(&counting), 0);
}
