/* pathways-demo: data-parallel training on one 2x4 slice of the CPU
 * backend (8 devices on a pool of 2 host threads).
 *
 * Model: logistic regression, p(y=1|x) = sigmoid(x . w), on synthetic data
 * (N examples, D features) generated from known weights. The batch is split
 * over the 8 devices (split(0,all)); the weights are replicated. One
 * training step is one graph, built once and resubmitted:
 *
 *   z     = matmul(X, w)                      per-device logits
 *   dz    = logistic_loss_grad(z, y) / N
 *   gpart = matmul(X^T, dz)                   per-device partial gradients
 *   g     = all_reduce_sum(gpart)             gradients all-reduced
 *   w'    = sgd_update(w, g)                  lr
 *   lpart = reduce_mean(logistic_loss(z, y))  per-device partial losses
 *   loss  = all_reduce_sum(lpart)
 *
 * The weights of step k feed step k+1 before step k has finished
 * (asynchronous dispatch; the submit returns futures), and are donated.
 * At the end the weights are checked against a plain C reference.
 *
 * Usage: pathways-demo [--trace FILE]
 *   --trace FILE  records the run and writes it as Chrome Trace Event JSON
 *                 (open it in ui.perfetto.dev or chrome://tracing;
 *                 docs/observability.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pathways/backends/cpu.h"
#include "logreg_common.h"
#include "pathways/pathways.h"

#define PW_EXAMPLE_NAME "pathways-demo"
#include "example_check.h"

enum { kN = 256, kD = 8, kDevices = 8, kSteps = 30 };
static const double kLearningRate = 0.5;

static int pw_demo_usage(const char* bad) {
  fprintf(stderr, "pathways-demo: unknown argument '%s'\nusage: pathways-demo [--trace FILE]\n",
          bad);
  return 2;
}

int main(int argc, char** argv) {
  const char* trace_path = NULL;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc) {
      trace_path = argv[++i];
    } else {
      return pw_demo_usage(argv[i]);
    }
  }
  printf("libpathways %s: data-parallel logistic regression on one 2x4 CPU slice\n",
         pw_version_string());

  /* The fleet: one CPU backend with 8 devices, one 2x4 slice. */
  pw_cpu_backend_options_t cpu;
  pw_cpu_backend_options_init(&cpu);
  cpu.device_count = kDevices;
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
  if (trace_path != NULL) CHECK(pw_runtime_trace_start(runtime, NULL));
  pw_slice_info_t info = {.struct_size = sizeof(pw_slice_info_t)};
  CHECK(pw_runtime_slice_info(runtime, 0, &info));
  printf("slice '%s': %u devices (%s backend), health %s\n", info.name, info.device_count,
         info.backend, pw_device_health_name(info.health));

  pw_client_t* client;
  CHECK(pw_client_create(runtime, NULL, &client));
  pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(2, 2, 4);
  pw_vslice_t vs;
  CHECK(pw_vslice_create(client, &mesh, 0, &vs));

  /* Programs in the CPU backend's text format (see backends/cpu.h and
   * logreg_common.h for the gradient step's). */
  pw_example_logreg_programs_t prog;
  CHECK(pw_example_logreg_compile(client, vs, kN, kD, 8, kN, kLearningRate, &prog));
  pw_executable_t loss = pw_example_compile_text(client, vs,
      "kernel logistic_loss\ninput f32[256,1] split(0,all)\ninput f32[256,1] split(0,all)\n"
      "output f32[256,1] split(0,all)\n");
  pw_executable_t loss_mean = pw_example_compile_text(client, vs,
      "kernel reduce_mean\ninput f32[256,1] split(0,all)\noutput f32[8,1] split(0,all)\n"
      "attr axis 0\n");
  pw_executable_t allreduce_l = pw_example_compile_text(client, vs,
      "kernel all_reduce_sum\ninput f32[8,1] split(0,all)\noutput f32[1] replicated\n");

  /* One training step as a graph: parameters X, y, w. */
  pw_graph_t step;
  CHECK(pw_graph_create(client, &step));
  pw_array_spec_t xs = {PW_DTYPE_F32, {2, {kN, kD}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
  pw_array_spec_t ys = {PW_DTYPE_F32, {2, {kN, 1}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
  pw_array_spec_t ws = {PW_DTYPE_F32, {2, {kD, 1}}, PW_SHARDING_REPLICATED_INIT};
  uint32_t X, Y, W, z, g, w2, l, lpart, lsum;
  CHECK(pw_graph_add_parameter(client, step, vs, &xs, &X));
  CHECK(pw_graph_add_parameter(client, step, vs, &ys, &Y));
  CHECK(pw_graph_add_parameter(client, step, vs, &ws, &W));
  CHECK(pw_example_logreg_gradient(client, step, vs, &prog, X, Y, W, &z, &g));
  pw_value_t in[2] = {pw_value(W, 0), pw_value(g, 0)};
  CHECK(pw_graph_add_compute(client, step, "sgd", prog.sgd, vs, in, 2, &w2));
  in[0] = pw_value(z, 0), in[1] = pw_value(Y, 0);
  CHECK(pw_graph_add_compute(client, step, "loss", loss, vs, in, 2, &l));
  in[0] = pw_value(l, 0);
  CHECK(pw_graph_add_compute(client, step, "loss_partial", loss_mean, vs, in, 1, &lpart));
  in[0] = pw_value(lpart, 0);
  CHECK(pw_graph_add_compute(client, step, "loss_allreduce", allreduce_l, vs, in, 1, &lsum));
  CHECK(pw_graph_add_output(client, step, pw_value(w2, 0)));
  CHECK(pw_graph_add_output(client, step, pw_value(lsum, 0)));
  CHECK(pw_graph_finalize(client, step));

  static float x[kN * kD], y[kN];
  pw_example_logreg_data(kN, kD, x, y);
  float w0[kD] = {0};
  pw_buffer_t args[3];
  CHECK(pw_buffer_from_host(client, vs, &xs, x, sizeof(x), &args[0]));
  CHECK(pw_buffer_from_host(client, vs, &ys, y, sizeof(y), &args[1]));
  CHECK(pw_buffer_from_host(client, vs, &ws, w0, sizeof(w0), &args[2]));

  /* Arm the step once (handle look-up and finalize checks paid here),
   * then submit every step up front: each step's weights are the previous
   * step's output future, donated to the next step. */
  pw_graph_exec_t* armed = NULL;
  CHECK(pw_graph_exec_create(client, step, &armed));
  pw_buffer_t losses[kSteps];
  pw_event_t* done[kSteps];
  bool donate[3] = {false, false, true};
  pw_submit_options_t opts = {.struct_size = sizeof(opts), .donate = donate};
  for (int s = 0; s < kSteps; ++s) {
    pw_buffer_t outs[2];
    CHECK(pw_graph_exec_submit(armed, args, 3, s ? &opts : NULL, outs, 2, &done[s]));
    if (s == 0) CHECK(pw_buffer_release(client, args[2]));
    args[2] = outs[0];
    losses[s] = outs[1];
  }
  float first_loss = 0, last_loss = 0;
  for (int s = 0; s < kSteps; ++s) {
    CHECK(pw_event_wait(done[s], pw_deadline_from_timeout(30000000000LL)));
    pw_event_release(done[s]);
    float value;
    CHECK(pw_buffer_to_host(client, losses[s], &value, sizeof(value), PW_INFINITE_FUTURE));
    CHECK(pw_buffer_release(client, losses[s]));
    printf("step %d loss %.6f\n", s, value);
    if (s == 0) first_loss = value;
    last_loss = value;
  }
  float w[kD];
  CHECK(pw_buffer_to_host(client, args[2], w, sizeof(w), PW_INFINITE_FUTURE));
  if (trace_path != NULL) {
    CHECK(pw_runtime_trace_stop(runtime));
    CHECK(pw_runtime_trace_write_file(runtime, trace_path));
    pw_trace_stats_t ts = {.struct_size = sizeof(ts)};
    CHECK(pw_runtime_trace_stats(runtime, &ts));
    printf("trace: %llu events (%llu dropped) written to %s (open it in ui.perfetto.dev or "
           "chrome://tracing)\n",
           (unsigned long long)ts.events, (unsigned long long)ts.dropped, trace_path);
  }

  float ref_w[kD] = {0}, ref_loss = 0;
  pw_example_logreg_reference(kN, kD, x, y, kSteps, kLearningRate, ref_w, &ref_loss);
  double max_err = 0;
  for (int d = 0; d < kD; ++d) max_err = fmax(max_err, fabs((double)w[d] - ref_w[d]));
  printf("final weights:");
  for (int d = 0; d < kD; ++d) printf(" %.4f", w[d]);
  printf("\nreference    :");
  for (int d = 0; d < kD; ++d) printf(" %.4f", ref_w[d]);
  printf("\nmax |w - reference| = %.2e; loss %.4f -> %.4f\n", max_err, first_loss, last_loss);

  pw_graph_exec_destroy(armed);
  pw_client_destroy(client);
  pw_runtime_destroy(runtime);
  bool ok = max_err < 1e-4 && last_loss < first_loss;
  printf("%s\n", ok ? "OK: loss decreased and weights match the plain C reference"
                    : "FAILED: weights differ from the reference or loss did not decrease");
  return ok ? 0 : 1;
}
