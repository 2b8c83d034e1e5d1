/* pathways-mlp-2d: a two-layer MLP trained with 2-D (data x model)
 * parallelism on one 2x4 slice of the CPU backend, the mesh's axes named
 * "data" (2) and "model" (4).
 *
 * Model: p(y=1|x) = sigmoid(relu(x W1) W2), logistic loss, full-batch SGD.
 * Shardings (PartitionSpecs over the named mesh):
 *   X[B,D]   P(data, None)      the batch over data, replicated over model
 *   y[B,1]   P(data, None)
 *   W1[D,H]  P(None, model)     hidden units over model, replicated over data
 *   W2[H,1]  P(model, None)
 * One training step is one graph:
 *   pre  = X @ W1                 [B,H] P(data, model)
 *   h    = relu(pre)
 *   zp   = h @ W2                 [B,1] P(data) unreduced(model): partial sums
 *   z    = all_reduce_sum(zp) over model
 *   dz   = logistic_loss_grad(z, y) / B
 *   dW2p = h^T @ dz               [H,1] P(model) unreduced(data)
 *   dW2  = all_reduce_sum(dW2p) over data        gradients: over data only
 *   dh   = dz @ W2^T              [B,H] P(data, model)
 *   dpre = relu_grad(pre, dh)
 *   dW1p = X^T @ dpre             [D,H] P(None, model) unreduced(data)
 *   dW1  = all_reduce_sum(dW1p) over data
 *   W1', W2' = sgd_update(W, dW)
 *   loss = all_reduce_sum(reduce_sum(logistic_loss(z, y))) over data, / B
 * Steps are submitted back to back (each step's weights are the previous
 * step's output futures, donated). The final weights are checked against a
 * plain C single-device reference (double accumulation) within 1e-4, and
 * the loss must decrease.
 *
 * Usage: pathways-mlp-2d [--graph-file FILE]
 *   --graph-file FILE  also writes the step graph as a graph file (CBOR,
 *                      docs/formats.md); `pathways-graph validate FILE`
 *                      checks it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pathways/backends/cpu.h"
#include "pathways/graph_format.h"
#include "pathways/pathways.h"

#define PW_EXAMPLE_NAME "pathways-mlp-2d"
#include "example_check.h"

enum { kB = 64, kD = 8, kH = 16, kSteps = 40 };
static const double kLearningRate = 0.5;

/* ---- the plain C reference ---------------------------------------------- */

typedef struct mlp_t {
  float w1[kD * kH];
  float w2[kH];
} mlp_t;

static double mlp_forward(const mlp_t* m, const float* x, double* pre, double* h) {
  double z = 0;
  for (int j = 0; j < kH; ++j) {
    double a = 0;
    for (int k = 0; k < kD; ++k) a += (double)x[k] * m->w1[k * kH + j];
    pre[j] = a;
    h[j] = a > 0 ? a : 0;
    z += h[j] * m->w2[j];
  }
  return z;
}

/* One full-batch SGD step; returns the mean loss before the update. */
static double mlp_reference_step(mlp_t* m, const float* x, const float* y) {
  double g1[kD * kH] = {0}, g2[kH] = {0}, loss = 0;
  for (int i = 0; i < kB; ++i) {
    double pre[kH], h[kH];
    double z = mlp_forward(m, x + i * kD, pre, h);
    loss += fmax(z, 0) - z * y[i] + log1p(exp(-fabs(z)));
    double dz = (1.0 / (1.0 + exp(-z)) - y[i]) / kB;
    for (int j = 0; j < kH; ++j) {
      g2[j] += h[j] * dz;
      double dpre = pre[j] > 0 ? dz * m->w2[j] : 0;
      for (int k = 0; k < kD; ++k) g1[k * kH + j] += (double)x[i * kD + k] * dpre;
    }
  }
  for (int i = 0; i < kD * kH; ++i) m->w1[i] = (float)(m->w1[i] - kLearningRate * g1[i]);
  for (int j = 0; j < kH; ++j) m->w2[j] = (float)(m->w2[j] - kLearningRate * g2[j]);
  return loss / kB;
}

/* Deterministic data and initial weights. Labels come from a fixed
 * nonlinear rule the MLP can learn. */
static uint64_t rng_state = 0x243F6A8885A308D3ULL;
static float rng_uniform(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void mlp_data(float* x, float* y, mlp_t* m) {
  for (int i = 0; i < kB; ++i) {
    double s = 0;
    for (int k = 0; k < kD; ++k) {
      x[i * kD + k] = rng_uniform();
      s += (k % 2 ? -1.0 : 1.0) * x[i * kD + k] * x[i * kD + (k + 1) % kD];
    }
    y[i] = s > 0 ? 1.0f : 0.0f;
  }
  for (int i = 0; i < kD * kH; ++i) m->w1[i] = 0.5f * rng_uniform();
  for (int j = 0; j < kH; ++j) m->w2[j] = 0.5f * rng_uniform();
}

/* ---- the parallel step -------------------------------------------------- */

typedef struct step_t {
  pw_client_t* client;
  pw_vslice_t vs;
  pw_mesh_shape_t mesh;
} step_t;

/* An f32 array spec of |rank| dims with |sharding| parsed over the mesh. */
static pw_array_spec_t spec(const step_t* s, uint32_t rank, int64_t d0, int64_t d1,
                            const char* sharding) {
  int64_t dims[2] = {d0, d1};
  pw_array_spec_t out;
  memset(&out, 0, sizeof(out));
  out.dtype = PW_DTYPE_F32;
  out.shape = pw_shape_make(rank, dims);
  CHECK(pw_sharding_parse(sharding, strlen(sharding), rank, &s->mesh, &out.sharding));
  CHECK(pw_array_spec_check(&out, &s->mesh));
  return out;
}

/* Compiles a kernel program and adds it as a node of |g|. */
static uint32_t node(const step_t* s, pw_graph_t g, const char* name, const char* program,
                     const uint32_t* inputs, uint32_t input_count) {
  pw_executable_t exe = pw_example_compile_text(s->client, s->vs, program);
  pw_value_t in[2];
  for (uint32_t i = 0; i < input_count; ++i) in[i] = pw_value(inputs[i], 0);
  uint32_t id;
  CHECK(pw_graph_add_compute(s->client, g, name, exe, s->vs, in, input_count, &id));
  CHECK(pw_executable_release(s->client, exe));
  return id;
}

/* Builds the step graph: parameters X, y, W1, W2; outputs W1', W2', the
 * summed loss. */
static pw_graph_t build_step(const step_t* s) {
  char p[512];
  pw_graph_t g;
  CHECK(pw_graph_create(s->client, &g));
  pw_array_spec_t xs = spec(s, 2, kB, kD, "P(data, None)");
  pw_array_spec_t ys = spec(s, 2, kB, 1, "P(data, None)");
  pw_array_spec_t w1s = spec(s, 2, kD, kH, "P(None, model)");
  pw_array_spec_t w2s = spec(s, 2, kH, 1, "P(model, None)");
  uint32_t X, Y, W1, W2;
  CHECK(pw_graph_add_parameter(s->client, g, s->vs, &xs, &X));
  CHECK(pw_graph_add_parameter(s->client, g, s->vs, &ys, &Y));
  CHECK(pw_graph_add_parameter(s->client, g, s->vs, &w1s, &W1));
  CHECK(pw_graph_add_parameter(s->client, g, s->vs, &w2s, &W2));

  snprintf(p, sizeof(p),
           "kernel matmul\ninput f32[%d,%d] P(data, None)\ninput f32[%d,%d] P(None, model)\n"
           "output f32[%d,%d] P(data, model)\n", kB, kD, kD, kH, kB, kH);
  uint32_t pre = node(s, g, "pre", p, (uint32_t[]){X, W1}, 2);
  snprintf(p, sizeof(p), "kernel relu\ninput f32[%d,%d] P(data, model)\n"
           "output f32[%d,%d] P(data, model)\n", kB, kH, kB, kH);
  uint32_t h = node(s, g, "h", p, (uint32_t[]){pre}, 1);
  snprintf(p, sizeof(p),
           "kernel matmul\ninput f32[%d,%d] P(data, model)\ninput f32[%d,1] P(model, None)\n"
           "output f32[%d,1] P(data, None) unreduced(model)\n", kB, kH, kH, kB);
  uint32_t zp = node(s, g, "z_partial", p, (uint32_t[]){h, W2}, 2);
  snprintf(p, sizeof(p), "kernel all_reduce_sum\ninput f32[%d,1] P(data, None) unreduced(model)\n"
           "output f32[%d,1] P(data, None)\nover model\n", kB, kB);
  uint32_t z = node(s, g, "z", p, (uint32_t[]){zp}, 1);
  snprintf(p, sizeof(p), "kernel logistic_loss_grad\ninput f32[%d,1] P(data, None)\n"
           "input f32[%d,1] P(data, None)\noutput f32[%d,1] P(data, None)\nattr scale %.17g\n",
           kB, kB, kB, 1.0 / kB);
  uint32_t dz = node(s, g, "dz", p, (uint32_t[]){z, Y}, 2);
  snprintf(p, sizeof(p),
           "kernel matmul\ninput f32[%d,%d] P(data, model)\ninput f32[%d,1] P(data, None)\n"
           "output f32[%d,1] P(model, None) unreduced(data)\nattr transpose_a 1\n",
           kB, kH, kB, kH);
  uint32_t dw2p = node(s, g, "dW2_partial", p, (uint32_t[]){h, dz}, 2);
  snprintf(p, sizeof(p), "kernel all_reduce_sum\ninput f32[%d,1] P(model, None) unreduced(data)\n"
           "output f32[%d,1] P(model, None)\nover data\n", kH, kH);
  uint32_t dw2 = node(s, g, "dW2", p, (uint32_t[]){dw2p}, 1);
  snprintf(p, sizeof(p),
           "kernel matmul\ninput f32[%d,1] P(data, None)\ninput f32[%d,1] P(model, None)\n"
           "output f32[%d,%d] P(data, model)\nattr transpose_b 1\n", kB, kH, kB, kH);
  uint32_t dh = node(s, g, "dh", p, (uint32_t[]){dz, W2}, 2);
  snprintf(p, sizeof(p), "kernel relu_grad\ninput f32[%d,%d] P(data, model)\n"
           "input f32[%d,%d] P(data, model)\noutput f32[%d,%d] P(data, model)\n",
           kB, kH, kB, kH, kB, kH);
  uint32_t dpre = node(s, g, "dpre", p, (uint32_t[]){pre, dh}, 2);
  snprintf(p, sizeof(p),
           "kernel matmul\ninput f32[%d,%d] P(data, None)\ninput f32[%d,%d] P(data, model)\n"
           "output f32[%d,%d] P(None, model) unreduced(data)\nattr transpose_a 1\n",
           kB, kD, kB, kH, kD, kH);
  uint32_t dw1p = node(s, g, "dW1_partial", p, (uint32_t[]){X, dpre}, 2);
  snprintf(p, sizeof(p), "kernel all_reduce_sum\ninput f32[%d,%d] P(None, model) unreduced(data)\n"
           "output f32[%d,%d] P(None, model)\nover data\n", kD, kH, kD, kH);
  uint32_t dw1 = node(s, g, "dW1", p, (uint32_t[]){dw1p}, 1);
  snprintf(p, sizeof(p), "kernel sgd_update\ninput f32[%d,%d] P(None, model)\n"
           "input f32[%d,%d] P(None, model)\noutput f32[%d,%d] P(None, model)\nattr lr %.17g\n",
           kD, kH, kD, kH, kD, kH, kLearningRate);
  uint32_t w1n = node(s, g, "sgd_W1", p, (uint32_t[]){W1, dw1}, 2);
  snprintf(p, sizeof(p), "kernel sgd_update\ninput f32[%d,1] P(model, None)\n"
           "input f32[%d,1] P(model, None)\noutput f32[%d,1] P(model, None)\nattr lr %.17g\n",
           kH, kH, kH, kLearningRate);
  uint32_t w2n = node(s, g, "sgd_W2", p, (uint32_t[]){W2, dw2}, 2);
  snprintf(p, sizeof(p), "kernel logistic_loss\ninput f32[%d,1] P(data, None)\n"
           "input f32[%d,1] P(data, None)\noutput f32[%d,1] P(data, None)\n", kB, kB, kB);
  uint32_t l = node(s, g, "loss", p, (uint32_t[]){z, Y}, 2);
  snprintf(p, sizeof(p), "kernel reduce_sum\ninput f32[%d,1] P(data, None)\n"
           "output f32[1] P() unreduced(data)\nattr axis 0\n", kB);
  uint32_t lp = node(s, g, "loss_partial", p, (uint32_t[]){l}, 1);
  snprintf(p, sizeof(p), "kernel all_reduce_sum\ninput f32[1] P() unreduced(data)\n"
           "output f32[1] replicated\nover data\n");
  uint32_t ls = node(s, g, "loss_sum", p, (uint32_t[]){lp}, 1);
  CHECK(pw_graph_add_output(s->client, g, pw_value(w1n, 0)));
  CHECK(pw_graph_add_output(s->client, g, pw_value(w2n, 0)));
  CHECK(pw_graph_add_output(s->client, g, pw_value(ls, 0)));
  CHECK(pw_graph_finalize(s->client, g));
  return g;
}

static void write_graph_file(const step_t* s, pw_graph_t g, const char* path) {
  void* bytes = NULL;
  size_t size = 0;
  CHECK(pw_graph_encode(s->client, g, NULL, pw_allocator_system(), &bytes, &size));
  FILE* f = fopen(path, "wb");
  if (f == NULL || fwrite(bytes, 1, size, f) != size || fclose(f) != 0) {
    fprintf(stderr, "pathways-mlp-2d: cannot write %s\n", path);
    exit(1);
  }
  pw_allocator_free(pw_allocator_system(), bytes, size);
  printf("step graph written to %s (%zu bytes)\n", path, size);
}

int main(int argc, char** argv) {
  const char* graph_path = NULL;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--graph-file") == 0 && i + 1 < argc) {
      graph_path = argv[++i];
    } else {
      fprintf(stderr, "pathways-mlp-2d: unknown argument '%s'\n"
              "usage: pathways-mlp-2d [--graph-file FILE]\n", argv[i]);
      return 2;
    }
  }
  printf("libpathways %s: a 2-layer MLP, data x model parallel on a 2x4 CPU slice\n",
         pw_version_string());
  pw_cpu_backend_options_t cpu;
  pw_cpu_backend_options_init(&cpu);
  cpu.device_count = 8;
  cpu.worker_count = 2;
  pw_backend_t backend;
  CHECK(pw_cpu_backend_create(&cpu, &backend));
  pw_slice_desc_t slice = {"tpu-like-0", PW_MESH_SHAPE_INIT(2, 2, 4), 0, 0, 0};
  pw_runtime_options_t ro = {0};
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = &slice;
  ro.slice_count = 1;
  pw_runtime_t* runtime;
  CHECK(pw_runtime_create(&ro, &runtime));
  step_t s;
  CHECK(pw_client_create(runtime, NULL, &s.client));
  CHECK(pw_mesh_shape_parse("data=2,model=4", &s.mesh));
  CHECK(pw_vslice_create(s.client, &s.mesh, 0, &s.vs));

  pw_graph_t step = build_step(&s);
  if (graph_path != NULL) write_graph_file(&s, step, graph_path);

  static float x[kB * kD], y[kB];
  mlp_t init;
  mlp_data(x, y, &init);
  pw_array_spec_t specs[4] = {spec(&s, 2, kB, kD, "P(data, None)"),
                              spec(&s, 2, kB, 1, "P(data, None)"),
                              spec(&s, 2, kD, kH, "P(None, model)"),
                              spec(&s, 2, kH, 1, "P(model, None)")};
  pw_buffer_t args[4];
  CHECK(pw_buffer_from_host(s.client, s.vs, &specs[0], x, sizeof(x), &args[0]));
  CHECK(pw_buffer_from_host(s.client, s.vs, &specs[1], y, sizeof(y), &args[1]));
  CHECK(pw_buffer_from_host(s.client, s.vs, &specs[2], init.w1, sizeof(init.w1), &args[2]));
  CHECK(pw_buffer_from_host(s.client, s.vs, &specs[3], init.w2, sizeof(init.w2), &args[3]));

  pw_graph_exec_t* armed = NULL;
  CHECK(pw_graph_exec_create(s.client, step, &armed));
  pw_buffer_t losses[kSteps];
  pw_event_t* done[kSteps];
  bool donate[4] = {false, false, true, true};
  pw_submit_options_t opts = {.struct_size = sizeof(opts), .donate = donate};
  for (int k = 0; k < kSteps; ++k) {
    pw_buffer_t outs[3];
    CHECK(pw_graph_exec_submit(armed, args, 4, k ? &opts : NULL, outs, 3, &done[k]));
    if (k == 0) {
      CHECK(pw_buffer_release(s.client, args[2]));
      CHECK(pw_buffer_release(s.client, args[3]));
    }
    args[2] = outs[0];
    args[3] = outs[1];
    losses[k] = outs[2];
  }
  mlp_t ref = init;
  double first_loss = 0, last_loss = 0, max_loss_err = 0;
  for (int k = 0; k < kSteps; ++k) {
    CHECK(pw_event_wait(done[k], pw_deadline_from_timeout(30000000000LL)));
    pw_event_release(done[k]);
    float sum;
    CHECK(pw_buffer_to_host(s.client, losses[k], &sum, sizeof(sum), PW_INFINITE_FUTURE));
    CHECK(pw_buffer_release(s.client, losses[k]));
    double loss = (double)sum / kB, ref_loss = mlp_reference_step(&ref, x, y);
    max_loss_err = fmax(max_loss_err, fabs(loss - ref_loss));
    if (k % 10 == 0 || k == kSteps - 1) {
      printf("step %2d loss %.6f (reference %.6f)\n", k, loss, ref_loss);
    }
    if (k == 0) first_loss = loss;
    last_loss = loss;
  }
  mlp_t got;
  CHECK(pw_buffer_to_host(s.client, args[2], got.w1, sizeof(got.w1), PW_INFINITE_FUTURE));
  CHECK(pw_buffer_to_host(s.client, args[3], got.w2, sizeof(got.w2), PW_INFINITE_FUTURE));
  double max_err = 0;
  for (int i = 0; i < kD * kH; ++i) max_err = fmax(max_err, fabs((double)got.w1[i] - ref.w1[i]));
  for (int j = 0; j < kH; ++j) max_err = fmax(max_err, fabs((double)got.w2[j] - ref.w2[j]));
  printf("max |W - reference| = %.2e, max |loss - reference| = %.2e; loss %.4f -> %.4f\n",
         max_err, max_loss_err, first_loss, last_loss);

  for (int i = 0; i < 4; ++i) CHECK(pw_buffer_release(s.client, args[i]));
  pw_graph_exec_destroy(armed);
  CHECK(pw_graph_release(s.client, step));
  pw_client_destroy(s.client);
  pw_runtime_destroy(runtime);
  bool ok = max_err < 1e-4 && max_loss_err < 1e-4 && last_loss < first_loss;
  printf("%s\n", ok ? "OK: loss decreased and weights match the single-device reference"
                    : "FAILED: weights differ from the reference or loss did not decrease");
  return ok ? 0 : 1;
}
