/* pathways-dp-two-slices: the training demo, data-parallel across two 2x4
 * slices of the CPU backend (16 devices).
 *
 * Each slice holds half of the batch, split over its 8 devices, and a
 * replica of the weights. A step:
 *   on each slice s:  z = X_s w;  dz = dloss(z, y_s) / N;
 *                     g_s = all_reduce(X_s^T dz)          (within the slice)
 *   across slices:    g_0 -> slice 1 and g_1 -> slice 0   (transfer nodes)
 *   on each slice s:  w' = w - lr (g_s + g_other)         (same on both)
 * so the gradients are reduced across slices through transfers, and both
 * replicas of the weights stay equal. The final weights are checked
 * against a plain C single-batch reference (the same math as one slice
 * holding the whole batch).
 *
 * Then the same training again as one gang across both slices: a virtual
 * slice spanning them (mesh 2x2x4, 16 devices) holds the whole batch, and
 * the gradient all-reduce is a single collective over all 16 devices of
 * the two slices. Its weights must match the transfer version's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logreg_common.h"
#include "pathways/pathways.h"

#define PW_EXAMPLE_NAME "pathways-dp-two-slices"
#include "example_check.h"

enum { kN = 256, kHalf = kN / 2, kD = 8, kSteps = 30 };
static const double kLearningRate = 0.5;

/* The whole step on a virtual slice spanning both physical slices; returns
 * the final weights in |w|. */
static void train_spanning(pw_client_t* client, const float* x, const float* y, float* w) {
  pw_vslice_span_t span = {0};
  span.struct_size = sizeof(span);
  span.mesh = (pw_mesh_shape_t)PW_MESH_SHAPE_INIT(3, 2, 2, 4);
  span.slice_count = 2;
  pw_vslice_t vs;
  CHECK(pw_vslice_create_spanning(client, &span, &vs));
  pw_example_logreg_programs_t prog;
  CHECK(pw_example_logreg_compile(client, vs, kN, kD, 16, kN, kLearningRate, &prog));
  pw_graph_t step;
  CHECK(pw_graph_create(client, &step));
  pw_array_spec_t xs = {PW_DTYPE_F32, {2, {kN, kD}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
  pw_array_spec_t ys = {PW_DTYPE_F32, {2, {kN, 1}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
  pw_array_spec_t ws = {PW_DTYPE_F32, {2, {kD, 1}}, PW_SHARDING_REPLICATED_INIT};
  uint32_t X, Y, W, z, gr, w2;
  CHECK(pw_graph_add_parameter(client, step, vs, &xs, &X));
  CHECK(pw_graph_add_parameter(client, step, vs, &ys, &Y));
  CHECK(pw_graph_add_parameter(client, step, vs, &ws, &W));
  CHECK(pw_example_logreg_gradient(client, step, vs, &prog, X, Y, W, &z, &gr));
  pw_value_t in[2] = {pw_value(W, 0), pw_value(gr, 0)};
  CHECK(pw_graph_add_compute(client, step, "sgd", prog.sgd, vs, in, 2, &w2));
  CHECK(pw_graph_add_output(client, step, pw_value(w2, 0)));
  float w0[kD] = {0};
  pw_buffer_t args[3];
  CHECK(pw_buffer_from_host(client, vs, &xs, x, sizeof(float) * kN * kD, &args[0]));
  CHECK(pw_buffer_from_host(client, vs, &ys, y, sizeof(float) * kN, &args[1]));
  CHECK(pw_buffer_from_host(client, vs, &ws, w0, sizeof(w0), &args[2]));
  bool donate[3] = {false, false, true};
  pw_submit_options_t opts = {.struct_size = sizeof(opts), .donate = donate};
  pw_event_t* last = NULL;
  for (int s = 0; s < kSteps; ++s) {
    pw_event_t* done;
    pw_buffer_t next;
    CHECK(pw_graph_submit(client, step, args, 3, &opts, &next, 1, &done));
    args[2] = next;
    pw_event_release(last);
    last = done;
  }
  CHECK(pw_event_wait(last, pw_deadline_from_timeout(60000000000LL)));
  pw_event_release(last);
  CHECK(pw_buffer_to_host(client, args[2], w, sizeof(float) * kD, PW_INFINITE_FUTURE));
  uint32_t parts[2], count = 0;
  CHECK(pw_vslice_slices(client, vs, parts, 2, &count));
  printf("one gang across slices %u and %u (16 devices): weights", parts[0], parts[1]);
  for (int k = 0; k < kD; ++k) printf(" %.4f", w[k]);
  printf("\n");
}

int main(void) {
  printf("libpathways %s: data parallelism across two 2x4 CPU slices\n", pw_version_string());
  pw_cpu_backend_options_t cpu;
  pw_cpu_backend_options_init(&cpu);
  cpu.device_count = 16;
  cpu.worker_count = 2;
  pw_backend_t backend;
  CHECK(pw_cpu_backend_create(&cpu, &backend));
  pw_slice_desc_t slices[2] = {{"east", PW_MESH_SHAPE_INIT(2, 2, 4), 0, 0, 0}, {"west", PW_MESH_SHAPE_INIT(2, 2, 4), 0, 8, 1}};
  pw_runtime_options_t ro = {0};
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = 2;
  pw_runtime_t* runtime;
  CHECK(pw_runtime_create(&ro, &runtime));
  pw_client_t* client;
  CHECK(pw_client_create(runtime, NULL, &client));
  pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(2, 2, 4);
  pw_vslice_t vs[2];
  CHECK(pw_vslice_create(client, &mesh, 0, &vs[0]));
  CHECK(pw_vslice_create(client, &mesh, 0, &vs[1]));
  pw_example_logreg_programs_t prog[2];
  pw_executable_t add[2];
  for (int s = 0; s < 2; ++s) {
    CHECK(pw_example_logreg_compile(client, vs[s], kHalf, kD, 8, kN, kLearningRate, &prog[s]));
    add[s] = pw_example_compile_text(client, vs[s],
                     "kernel add\ninput f32[8,1] replicated\ninput f32[8,1] replicated\n"
                     "output f32[8,1] replicated\n");
  }

  pw_graph_t step;
  CHECK(pw_graph_create(client, &step));
  pw_array_spec_t xs = {PW_DTYPE_F32, {2, {kHalf, kD}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
  pw_array_spec_t ys = {PW_DTYPE_F32, {2, {kHalf, 1}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
  pw_array_spec_t ws = {PW_DTYPE_F32, {2, {kD, 1}}, PW_SHARDING_REPLICATED_INIT};
  /* Parameters: X0 Y0 W0 (slice 0), X1 Y1 W1 (slice 1). */
  uint32_t X[2], Y[2], W[2], G[2], T[2], S[2], W2[2];
  for (int s = 0; s < 2; ++s) {
    CHECK(pw_graph_add_parameter(client, step, vs[s], &xs, &X[s]));
    CHECK(pw_graph_add_parameter(client, step, vs[s], &ys, &Y[s]));
    CHECK(pw_graph_add_parameter(client, step, vs[s], &ws, &W[s]));
  }
  for (int s = 0; s < 2; ++s) {
    uint32_t z;
    CHECK(pw_example_logreg_gradient(client, step, vs[s], &prog[s], X[s], Y[s], W[s], &z, &G[s]));
  }
  /* Cross-slice reduction: each slice receives the other's gradient. */
  for (int s = 0; s < 2; ++s) {
    CHECK(pw_graph_add_transfer(client, step, s ? "grad_to_west" : "grad_to_east",
                                pw_value(G[1 - s], 0), vs[s], pw_sharding_replicated(), &T[s]));
  }
  for (int s = 0; s < 2; ++s) {
    pw_value_t in[2] = {pw_value(G[s], 0), pw_value(T[s], 0)};
    CHECK(pw_graph_add_compute(client, step, "grad_sum", add[s], vs[s], in, 2, &S[s]));
    in[0] = pw_value(W[s], 0), in[1] = pw_value(S[s], 0);
    CHECK(pw_graph_add_compute(client, step, "sgd", prog[s].sgd, vs[s], in, 2, &W2[s]));
    CHECK(pw_graph_add_output(client, step, pw_value(W2[s], 0)));
  }
  CHECK(pw_graph_finalize(client, step));

  static float x[kN * kD], y[kN];
  pw_example_logreg_data(kN, kD, x, y);
  float w0[kD] = {0};
  pw_buffer_t args[6];
  for (int s = 0; s < 2; ++s) {
    CHECK(pw_buffer_from_host(client, vs[s], &xs, x + s * kHalf * kD, sizeof(float) * kHalf * kD,
                              &args[3 * s]));
    CHECK(pw_buffer_from_host(client, vs[s], &ys, y + s * kHalf, sizeof(float) * kHalf,
                              &args[3 * s + 1]));
    CHECK(pw_buffer_from_host(client, vs[s], &ws, w0, sizeof(w0), &args[3 * s + 2]));
  }
  /* All steps submitted up front; each step's weights are the previous
   * step's output futures, donated. */
  bool donate[6] = {false, false, true, false, false, true};
  pw_submit_options_t opts = {.struct_size = sizeof(opts), .donate = donate};
  pw_event_t* last = NULL;
  for (int s = 0; s < kSteps; ++s) {
    pw_buffer_t outs[2];
    pw_event_t* done;
    CHECK(pw_graph_submit(client, step, args, 6, &opts, outs, 2, &done));
    args[2] = outs[0];
    args[5] = outs[1];
    pw_event_release(last);
    last = done;
  }
  CHECK(pw_event_wait(last, pw_deadline_from_timeout(60000000000LL)));
  pw_event_release(last);
  float w[2][kD];
  CHECK(pw_buffer_to_host(client, args[2], w[0], sizeof(w[0]), PW_INFINITE_FUTURE));
  CHECK(pw_buffer_to_host(client, args[5], w[1], sizeof(w[1]), PW_INFINITE_FUTURE));

  float ref[kD] = {0}, ref_loss;
  pw_example_logreg_reference(kN, kD, x, y, kSteps, kLearningRate, ref, &ref_loss);
  double err = 0, replica_gap = 0;
  for (int k = 0; k < kD; ++k) {
    err = fmax(err, fabs((double)w[0][k] - ref[k]));
    replica_gap = fmax(replica_gap, fabs((double)w[0][k] - w[1][k]));
  }
  printf("weights east:");
  for (int k = 0; k < kD; ++k) printf(" %.4f", w[0][k]);
  printf("\nweights west:");
  for (int k = 0; k < kD; ++k) printf(" %.4f", w[1][k]);
  printf("\nreference   :");
  for (int k = 0; k < kD; ++k) printf(" %.4f", ref[k]);
  printf("\nmax |w - reference| = %.2e, replicas differ by %.2e (loss of the reference: %.4f)\n",
         err, replica_gap, ref_loss);
  float wg[kD];
  train_spanning(client, x, y, wg);
  double gang_gap = 0;
  for (int k = 0; k < kD; ++k) gang_gap = fmax(gang_gap, fabs((double)wg[k] - ref[k]));
  printf("max |w_gang - reference| = %.2e\n", gang_gap);
  pw_client_destroy(client);
  pw_runtime_destroy(runtime);
  bool ok = err < 1e-4 && replica_gap == 0 && gang_gap < 1e-4;
  printf("%s\n", ok ? "OK: two-slice data parallelism (transfers, and one gang spanning both "
                      "slices) matches the single-batch reference"
                    : "FAILED");
  return ok ? 0 : 1;
}
