/* Shared by the examples: synthetic logistic-regression data, the plain
 * C reference training loop the examples check their weights against, and
 * the gradient part of a training step as CPU-backend programs and graph
 * nodes. */
#ifndef PW_EXAMPLES_LOGREG_COMMON_H_
#define PW_EXAMPLES_LOGREG_COMMON_H_

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pathways/pathways.h"

/* Deterministic data: |n| examples of |d| features, x ~ U(-1,1), labels
 * from fixed true weights. |x| is n*d row-major, |y| n. */
static inline void pw_example_logreg_data(int n, int d, float* x, float* y) {
  uint64_t state = 0x9E3779B97F4A7C15ULL;
  for (int i = 0; i < n; ++i) {
    float dot = 0;
    for (int k = 0; k < d; ++k) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      x[i * d + k] = (float)((double)(state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
      float true_w = (float)(k % 2 ? -1.0 : 1.0) * (float)(k + 1) / (float)d;
      dot += x[i * d + k] * true_w;
    }
    y[i] = dot > 0 ? 1.0f : 0.0f;
  }
}

/* |steps| of full-batch gradient descent with learning rate |lr| from |w|
 * (d weights, updated in place); |*last_loss| gets the last step's mean
 * loss (computed before that step's update). Double accumulation. */
static inline void pw_example_logreg_reference(int n, int d, const float* x, const float* y,
                                               int steps, double lr, float* w,
                                               float* last_loss) {
  for (int step = 0; step < steps; ++step) {
    double grad[64] = {0};
    double loss = 0;
    for (int i = 0; i < n; ++i) {
      double z = 0;
      for (int k = 0; k < d; ++k) z += (double)x[i * d + k] * w[k];
      double p = 1.0 / (1.0 + exp(-z));
      loss += fmax(z, 0) - z * y[i] + log1p(exp(-fabs(z)));
      for (int k = 0; k < d; ++k) grad[k] += (p - y[i]) / n * x[i * d + k];
    }
    for (int k = 0; k < d; ++k) w[k] = (float)(w[k] - lr * grad[k]);
    *last_loss = (float)(loss / n);
  }
}

/* The mean loss of weights |w| over |n| examples (host side, for logs). */
static inline float pw_example_logreg_loss(int n, int d, const float* x, const float* y,
                                           const float* w) {
  double loss = 0;
  for (int i = 0; i < n; ++i) {
    double z = 0;
    for (int k = 0; k < d; ++k) z += (double)x[i * d + k] * w[k];
    loss += fmax(z, 0) - z * y[i] + log1p(exp(-fabs(z)));
  }
  return (float)(loss / n);
}

/* The programs of one gradient step over |rows| examples of |d| features
 * split over the |devices| devices of a virtual slice (loss scaled by
 * 1 / |batch|, the whole batch across slices), and the SGD update. */
typedef struct pw_example_logreg_programs_t {
  pw_executable_t logits, dloss, grad_partial, grad_reduce, sgd;
} pw_example_logreg_programs_t;

static inline pw_status_t pw_example_compile(pw_client_t* c, pw_vslice_t vs, const char* text,
                                             pw_executable_t* out) {
  return pw_executable_compile(c, vs, text, strlen(text), NULL, out);
}

static inline pw_status_t pw_example_logreg_compile(pw_client_t* c, pw_vslice_t vs, int rows,
                                                    int d, int devices, int batch, double lr,
                                                    pw_example_logreg_programs_t* p) {
  char text[512];
  snprintf(text, sizeof(text),
           "kernel matmul\ninput f32[%d,%d] split(0,all)\ninput f32[%d,1] replicated\n"
           "output f32[%d,1] split(0,all)\n", rows, d, d, rows);
  PW_RETURN_IF_ERROR(pw_example_compile(c, vs, text, &p->logits));
  snprintf(text, sizeof(text),
           "kernel logistic_loss_grad\ninput f32[%d,1] split(0,all)\n"
           "input f32[%d,1] split(0,all)\noutput f32[%d,1] split(0,all)\nattr scale %.17g\n",
           rows, rows, rows, 1.0 / batch);
  PW_RETURN_IF_ERROR(pw_example_compile(c, vs, text, &p->dloss));
  snprintf(text, sizeof(text),
           "kernel matmul\ninput f32[%d,%d] split(0,all)\ninput f32[%d,1] split(0,all)\n"
           "output f32[%d,%d,1] split(0,all)\nattr transpose_a 1\n", rows, d, rows, devices, d);
  PW_RETURN_IF_ERROR(pw_example_compile(c, vs, text, &p->grad_partial));
  snprintf(text, sizeof(text),
           "kernel all_reduce_sum\ninput f32[%d,%d,1] split(0,all)\noutput f32[%d,1] replicated\n",
           devices, d, d);
  PW_RETURN_IF_ERROR(pw_example_compile(c, vs, text, &p->grad_reduce));
  snprintf(text, sizeof(text),
           "kernel sgd_update\ninput f32[%d,1] replicated\ninput f32[%d,1] replicated\n"
           "output f32[%d,1] replicated\nattr lr %.17g\n", d, d, d, lr);
  return pw_example_compile(c, vs, text, &p->sgd);
}

/* Adds logits z = X w, dz = dloss(z, y), the per-device partial gradients
 * X^T dz and their all-reduce on |vs|; |*out_z| and |*out_g| get the
 * logits and gradient nodes. */
static inline pw_status_t pw_example_logreg_gradient(pw_client_t* c, pw_graph_t g,
                                                     pw_vslice_t vs,
                                                     const pw_example_logreg_programs_t* p,
                                                     uint32_t X, uint32_t Y, uint32_t W,
                                                     uint32_t* out_z, uint32_t* out_g) {
  uint32_t dz, gp;
  pw_value_t in[2] = {pw_value(X, 0), pw_value(W, 0)};
  PW_RETURN_IF_ERROR(pw_graph_add_compute(c, g, "logits", p->logits, vs, in, 2, out_z));
  in[0] = pw_value(*out_z, 0), in[1] = pw_value(Y, 0);
  PW_RETURN_IF_ERROR(pw_graph_add_compute(c, g, "dloss", p->dloss, vs, in, 2, &dz));
  in[0] = pw_value(X, 0), in[1] = pw_value(dz, 0);
  PW_RETURN_IF_ERROR(pw_graph_add_compute(c, g, "grad_partial", p->grad_partial, vs, in, 2, &gp));
  in[0] = pw_value(gp, 0);
  return pw_graph_add_compute(c, g, "grad_allreduce", p->grad_reduce, vs, in, 1, out_g);
}

#endif /* PW_EXAMPLES_LOGREG_COMMON_H_ */
