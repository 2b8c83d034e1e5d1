/* Shared by the examples: synthetic logistic-regression data and the plain
 * C reference training loop the examples check their weights against. */
#ifndef PW_EXAMPLES_LOGREG_COMMON_H_
#define PW_EXAMPLES_LOGREG_COMMON_H_

#include <math.h>
#include <stdint.h>

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

#endif /* PW_EXAMPLES_LOGREG_COMMON_H_ */
