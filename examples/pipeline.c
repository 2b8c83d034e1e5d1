/* pathways-pipeline: a 4-stage pipeline (MPMD) on 4 slices of the CPU
 * backend, M microbatches, GPipe and 1F1B schedules, checked against the
 * same training step on a single slice.
 *
 * Model: a 4-layer MLP, stage s holds layer s (an 8x8 weight matrix):
 *   a_s = relu(a_{s-1} W_s) for s < 3, out = a_2 W_3, loss = |out - t|^2/2.
 * Activations flow forward and gradients backward between the slices
 * through transfer nodes. Weight gradients are accumulated over the
 * microbatches in microbatch order, then each stage applies SGD.
 *
 * The schedule is the order in which the graph's nodes are added: the
 * runtime keeps that order in each slice's sequence wherever dependencies
 * allow. GPipe runs all forwards, then all backwards; 1F1B starts S-s-1
 * forwards on stage s, then alternates one forward and one backward. Both
 * compute the same numbers; the single-slice run (every stage on one
 * slice, transfers become local copies) is the reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pathways/pathways.h"

#define PW_EXAMPLE_NAME "pathways-pipeline"
#include "example_check.h"

enum { S = 4, M = 4, B = 8, H = 8 };
static const double kLearningRate = 0.1;

typedef struct programs_t {
  pw_executable_t mm, mm_ta, mm_tb, relu, relu_grad, sub, scale, add, sgd;
} programs_t;

static pw_executable_t compile(pw_client_t* c, pw_vslice_t vs, const char* kernel,
                               int inputs, const char* attrs) {
  char text[512];
  snprintf(text, sizeof(text), "kernel %s\n%s%soutput f32[8,8] replicated\n%s", kernel,
           "input f32[8,8] replicated\n", inputs > 1 ? "input f32[8,8] replicated\n" : "",
           attrs);
  pw_executable_t exe;
  CHECK(pw_executable_compile(c, vs, text, strlen(text), NULL, &exe));
  return exe;
}

/* Executables for a 1-device mesh work on every such virtual slice. */
static programs_t compile_all(pw_client_t* c, pw_vslice_t vs) {
  programs_t p;
  char attr[64];
  p.mm = compile(c, vs, "matmul", 2, "");
  p.mm_ta = compile(c, vs, "matmul", 2, "attr transpose_a 1\n");
  p.mm_tb = compile(c, vs, "matmul", 2, "attr transpose_b 1\n");
  p.relu = compile(c, vs, "relu", 1, "");
  p.relu_grad = compile(c, vs, "relu_grad", 2, "");
  p.sub = compile(c, vs, "sub", 2, "");
  snprintf(attr, sizeof(attr), "attr alpha %.17g\n", 1.0 / (B * M));
  p.scale = compile(c, vs, "scale", 1, attr);
  p.add = compile(c, vs, "add", 2, "");
  snprintf(attr, sizeof(attr), "attr lr %.17g\n", kLearningRate);
  p.sgd = compile(c, vs, "sgd_update", 2, attr);
  return p;
}

/* The graph being built: parameter and value node ids. */
typedef struct builder_t {
  pw_client_t* c;
  pw_graph_t g;
  const programs_t* p;
  pw_vslice_t vs[S];
  uint32_t W[S], x[M], t[M];
  uint32_t in[M][S];     /* stage input on slice s */
  uint32_t act[M][S];    /* stage output (activation) */
  uint32_t dprev[M][S];  /* gradient w.r.t. the stage input */
  uint32_t acc[S];
  bool has_acc[S];
} builder_t;

static uint32_t op(builder_t* b, const char* name, pw_executable_t exe, int s, uint32_t x0,
                   int has_x1, uint32_t x1) {
  pw_value_t ins[2] = {pw_value(x0, 0), pw_value(x1, 0)};
  uint32_t node;
  CHECK(pw_graph_add_compute(b->c, b->g, name, exe, b->vs[s], ins, has_x1 ? 2 : 1, &node));
  return node;
}

static uint32_t xfer(builder_t* b, const char* name, uint32_t value, int to) {
  uint32_t node;
  CHECK(pw_graph_add_transfer(b->c, b->g, name, pw_value(value, 0), b->vs[to],
                              pw_sharding_replicated(), &node));
  return node;
}

static void forward(builder_t* b, int m, int s) {
  b->in[m][s] = s == 0 ? b->x[m] : xfer(b, "act_xfer", b->act[m][s - 1], s);
  uint32_t z = op(b, "fwd_mm", b->p->mm, s, b->in[m][s], 1, b->W[s]);
  b->act[m][s] = s < S - 1 ? op(b, "fwd_relu", b->p->relu, s, z, 0, 0) : z;
}

static void backward(builder_t* b, int m, int s) {
  uint32_t da;
  if (s == S - 1) {
    uint32_t diff = op(b, "loss_diff", b->p->sub, s, b->act[m][s], 1, b->t[m]);
    da = op(b, "loss_scale", b->p->scale, s, diff, 0, 0);
  } else {
    da = xfer(b, "grad_xfer", b->dprev[m][s + 1], s);
  }
  uint32_t dz = s < S - 1 ? op(b, "bwd_relu", b->p->relu_grad, s, b->act[m][s], 1, da) : da;
  uint32_t dw = op(b, "bwd_dw", b->p->mm_ta, s, b->in[m][s], 1, dz);
  b->acc[s] = b->has_acc[s] ? op(b, "dw_acc", b->p->add, s, b->acc[s], 1, dw) : dw;
  b->has_acc[s] = true;
  if (s > 0) b->dprev[m][s] = op(b, "bwd_dx", b->p->mm_tb, s, dz, 1, b->W[s]);
}

typedef enum schedule_e { GPIPE, ONE_F_ONE_B } schedule_t;

/* Per-stage op lists merged into one insertion order: round-robin over the
 * stages, each adding its next op once what it needs has been added. */
static void build_schedule(builder_t* b, schedule_t schedule) {
  int kind[S][2 * M], micro[S][2 * M], count[S], next[S];
  for (int s = 0; s < S; ++s) {
    int n = 0;
    if (schedule == GPIPE) {
      for (int m = 0; m < M; ++m) kind[s][n] = 0, micro[s][n++] = m;
      for (int m = 0; m < M; ++m) kind[s][n] = 1, micro[s][n++] = m;
    } else {
      int warm = S - s - 1 < M ? S - s - 1 : M;
      for (int m = 0; m < warm; ++m) kind[s][n] = 0, micro[s][n++] = m;
      for (int i = 0; i < M - warm; ++i) {
        kind[s][n] = 0, micro[s][n++] = warm + i;
        kind[s][n] = 1, micro[s][n++] = i;
      }
      for (int m = M - warm; m < M; ++m) kind[s][n] = 1, micro[s][n++] = m;
    }
    count[s] = n;
    next[s] = 0;
  }
  /* Show the last stage's order: there the schedules differ most. */
  printf("  %s last stage order:", schedule == GPIPE ? "GPipe" : "1F1B ");
  for (int i = 0; i < count[S - 1]; ++i) {
    printf(" %c%d", kind[S - 1][i] ? 'B' : 'F', micro[S - 1][i]);
  }
  printf("\n");
  bool fwd_done[M][S] = {{false}}, bwd_done[M][S] = {{false}};
  int remaining = 2 * M * S;
  while (remaining > 0) {
    bool progressed = false;
    for (int s = 0; s < S; ++s) {
      if (next[s] == count[s]) continue;
      int k = kind[s][next[s]], m = micro[s][next[s]];
      bool ready = k == 0 ? (s == 0 || fwd_done[m][s - 1])
                          : (fwd_done[m][s] && (s == S - 1 || bwd_done[m][s + 1]));
      if (!ready) continue;
      if (k == 0) {
        forward(b, m, s);
        fwd_done[m][s] = true;
      } else {
        backward(b, m, s);
        bwd_done[m][s] = true;
      }
      next[s]++;
      remaining--;
      progressed = true;
    }
    if (!progressed) {
      fprintf(stderr, "pathways-pipeline: schedule cannot progress\n");
      exit(1);
    }
  }
}

/* One training step on |vs| (4 pipeline slices, or the same slice 4
 * times); returns the updated weights. */
static void train_step(pw_client_t* c, const programs_t* p, const pw_vslice_t* vs,
                       schedule_t schedule, const float (*w0)[H * H],
                       const float (*x)[B * H], const float (*t)[B * H], float (*w_out)[H * H]) {
  builder_t b;
  memset(&b, 0, sizeof(b));
  b.c = c;
  b.p = p;
  memcpy(b.vs, vs, sizeof(b.vs));
  CHECK(pw_graph_create(c, &b.g));
  pw_array_spec_t spec = {PW_DTYPE_F32, {2, {8, 8}}, PW_SHARDING_REPLICATED_INIT};
  /* Parameters: W0..W3, x0..x{M-1} (stage 0), t0..t{M-1} (last stage). */
  for (int s = 0; s < S; ++s) CHECK(pw_graph_add_parameter(c, b.g, vs[s], &spec, &b.W[s]));
  for (int m = 0; m < M; ++m) CHECK(pw_graph_add_parameter(c, b.g, vs[0], &spec, &b.x[m]));
  for (int m = 0; m < M; ++m) CHECK(pw_graph_add_parameter(c, b.g, vs[S - 1], &spec, &b.t[m]));
  build_schedule(&b, schedule);
  uint32_t w_new[S];
  for (int s = 0; s < S; ++s) {
    w_new[s] = op(&b, "sgd", p->sgd, s, b.W[s], 1, b.acc[s]);
    CHECK(pw_graph_add_output(c, b.g, pw_value(w_new[s], 0)));
  }
  pw_buffer_t args[S + 2 * M], outs[S];
  for (int s = 0; s < S; ++s) {
    CHECK(pw_buffer_from_host(c, vs[s], &spec, w0[s], sizeof(w0[s]), &args[s]));
  }
  for (int m = 0; m < M; ++m) {
    CHECK(pw_buffer_from_host(c, vs[0], &spec, x[m], sizeof(x[m]), &args[S + m]));
    CHECK(pw_buffer_from_host(c, vs[S - 1], &spec, t[m], sizeof(t[m]), &args[S + M + m]));
  }
  pw_event_t* done;
  CHECK(pw_graph_submit(c, b.g, args, S + 2 * M, NULL, outs, S, &done));
  CHECK(pw_event_wait(done, pw_deadline_from_timeout(30000000000LL)));
  pw_event_release(done);
  for (int s = 0; s < S; ++s) {
    CHECK(pw_buffer_to_host(c, outs[s], w_out[s], sizeof(w_out[s]), PW_INFINITE_FUTURE));
    CHECK(pw_buffer_release(c, outs[s]));
  }
  for (int i = 0; i < S + 2 * M; ++i) CHECK(pw_buffer_release(c, args[i]));
  pw_graph_counts_t counts = {.struct_size = sizeof(pw_graph_counts_t)};
  CHECK(pw_graph_counts(c, b.g, &counts));
  printf("  %s on %s: %u ops (computes and transfers), %u edges\n",
         schedule == GPIPE ? "GPipe" : "1F1B ", vs[0].id == vs[1].id ? "1 slice " : "4 slices",
         counts.computes, counts.edges);
  CHECK(pw_graph_release(c, b.g));
}

int main(void) {
  printf("libpathways %s: a %d-stage pipeline, %d microbatches\n", pw_version_string(), S, M);
  pw_cpu_backend_options_t cpu;
  pw_cpu_backend_options_init(&cpu);
  cpu.device_count = S + 1;
  pw_backend_t backend;
  CHECK(pw_cpu_backend_create(&cpu, &backend));
  pw_slice_desc_t slices[S + 1];
  for (int s = 0; s <= S; ++s) {
    slices[s] = (pw_slice_desc_t){NULL, PW_MESH_SHAPE_INIT(1, 1), 0, (uint32_t)s, 0};
  }
  pw_runtime_options_t ro = {0};
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = S + 1;
  pw_runtime_t* runtime;
  CHECK(pw_runtime_create(&ro, &runtime));
  pw_client_t* c;
  CHECK(pw_client_create(runtime, NULL, &c));
  pw_mesh_shape_t one = PW_MESH_SHAPE_INIT(1, 1);
  pw_vslice_t stages[S], solo;
  for (int s = 0; s < S; ++s) CHECK(pw_vslice_create(c, &one, 0, &stages[s]));
  CHECK(pw_vslice_create(c, &one, 0, &solo));
  programs_t p = compile_all(c, stages[0]);

  static float w0[S][H * H], x[M][B * H], t[M][B * H];
  uint64_t state = 12345;
  for (int s = 0; s < S; ++s) {
    for (int i = 0; i < H * H; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      w0[s][i] = (float)((double)(state >> 11) / 9007199254740992.0 - 0.5) * 0.8f;
    }
  }
  for (int m = 0; m < M; ++m) {
    for (int i = 0; i < B * H; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      x[m][i] = (float)((double)(state >> 11) / 9007199254740992.0 * 2 - 1);
      t[m][i] = (float)sin(x[m][i] * 3.0);
    }
  }
  static float gpipe[S][H * H], f1b1[S][H * H], single[S][H * H];
  pw_vslice_t one_slice[S] = {solo, solo, solo, solo};
  train_step(c, &p, stages, GPIPE, w0, x, t, gpipe);
  train_step(c, &p, stages, ONE_F_ONE_B, w0, x, t, f1b1);
  train_step(c, &p, one_slice, GPIPE, w0, x, t, single);
  double diff_gpipe = 0, diff_1f1b = 0, moved = 0;
  for (int s = 0; s < S; ++s) {
    for (int i = 0; i < H * H; ++i) {
      diff_gpipe = fmax(diff_gpipe, fabs((double)gpipe[s][i] - single[s][i]));
      diff_1f1b = fmax(diff_1f1b, fabs((double)f1b1[s][i] - single[s][i]));
      moved = fmax(moved, fabs((double)single[s][i] - w0[s][i]));
    }
  }
  printf("max |GPipe - single slice| = %.2e, max |1F1B - single slice| = %.2e, "
         "largest weight update %.2e\n",
         diff_gpipe, diff_1f1b, moved);
  pw_client_destroy(c);
  pw_runtime_destroy(runtime);
  bool ok = diff_gpipe == 0 && diff_1f1b == 0 && moved > 0;
  printf("%s\n", ok ? "OK: both pipeline schedules match the single-slice run"
                    : "FAILED: the pipeline's numbers differ from the single-slice run");
  return ok ? 0 : 1;
}
