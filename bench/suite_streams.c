/* pw-bench streams: queue-ordered launch on the CPU backend's streams mode
 * (the reference stream backend), against the same workload through
 * today's protocol (pw_runtime_options_t.disable_queued_launch) in the
 * same run.
 *
 * A chain of --ops dependent ops on one device, each a registered kernel
 * "bench.spin" that spins --kernel-us microseconds and copies its input to
 * its output, submitted as one graph and run --reps times. The kernel
 * records when it started and ended (pw_clock_now), so the device-side
 * gap between two dependent ops is measured where it happens. Printed per
 * mode: wall time of a run over ops x kernel time (1.00 = back to back),
 * and the median gap; then the ratio of the two modes' wall times.
 *
 * Usage: pw-bench streams [--ops 1000] [--kernel-us 50] [--depth 64]
 *                         [--reps 5] */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pathways/backends/cpu.h"
#include "pathways/pathways.h"
#include "suites.h"

typedef struct pw_streams_log_s {
  uint64_t spin_ns;
  atomic_uint next;
  uint32_t capacity;
  uint64_t* start;
  uint64_t* end;
} pw_streams_log_t;

static pw_status_t pw_streams_spin(const pw_cpu_kernel_call_t* call) {
  pw_streams_log_t* log = call->user;
  uint64_t t0 = (uint64_t)pw_clock_now();
  while ((uint64_t)pw_clock_now() - t0 < log->spin_ns) {
  }
  memcpy(call->outputs[0].data, call->inputs[0].data, call->outputs[0].size);
  uint32_t k = atomic_fetch_add(&log->next, 1);
  if (k < log->capacity) {
    log->start[k] = t0;
    log->end[k] = (uint64_t)pw_clock_now();
  }
  return NULL;
}

static int pw_streams_cmp(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

static int pw_streams_cmp_d(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

#define PW_STREAMS_TRY(expr, what)                                          \
  do {                                                                     \
    pw_status_t s_ = (expr);                                               \
    if (s_ != NULL) {                                                      \
      char m_[512];                                                        \
      pw_status_format(s_, m_, sizeof(m_));                                \
      pw_status_free(s_);                                                  \
      fprintf(stderr, "pw-bench streams: %s: %s\n", what, m_);             \
      return -1;                                                           \
    }                                                                      \
  } while (0)

typedef struct pw_streams_result_s {
  double wall_ns;     /* median over reps */
  double gap_ns;      /* median device-side gap between dependent ops */
  double gap_mean_ns; /* their mean (median over reps) */
} pw_streams_result_t;

/* One mode: a runtime over a 1-device streams-mode CPU backend. */
static int pw_streams_run(bool queued, uint32_t ops, uint32_t depth, uint32_t reps,
                          pw_streams_log_t* log, pw_streams_result_t* out) {
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = 1;
  o.stream_depth = depth;
  pw_backend_t backend;
  PW_STREAMS_TRY(pw_cpu_backend_create(&o, &backend), "cpu backend");
  pw_cpu_param_spec_t p = {"x", PW_CPU_DTYPES_ANY, -1};
  pw_cpu_kernel_def_t def = {.struct_size = sizeof(def), .name = "bench.spin",
                             .input_count = 1, .inputs = &p, .output_count = 1, .outputs = &p,
                             .flags = PW_CPU_KERNEL_SAME_DTYPE, .run = pw_streams_spin,
                             .user = log};
  pw_status_t reg = pw_cpu_backend_register_kernel(backend, &def);
  if (reg != NULL) backend.vtable->destroy(backend.self);
  PW_STREAMS_TRY(reg, "register");
  pw_slice_desc_t slice = {.name = "s", .mesh = pw_mesh_shape_make(1, (const uint32_t[]){1})};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = &slice;
  ro.slice_count = 1;
  ro.disable_queued_launch = !queued;
  pw_runtime_t* rt = NULL;
  pw_client_t* c = NULL;
  PW_STREAMS_TRY(pw_runtime_create(&ro, &rt), "runtime");
  PW_STREAMS_TRY(pw_client_create(rt, NULL, &c), "client");
  pw_vslice_t vs;
  PW_STREAMS_TRY(pw_vslice_create(c, &slice.mesh, 0, &vs), "vslice");
  const char* text = "kernel bench.spin\ninput f32[16] replicated\noutput f32[16] replicated\n";
  pw_executable_t exe;
  PW_STREAMS_TRY(pw_executable_compile(c, vs, text, strlen(text), NULL, &exe), "compile");
  int64_t n = 16;
  pw_array_spec_t spec = {PW_DTYPE_F32, pw_shape_make(1, &n), pw_sharding_replicated()};
  pw_graph_t g;
  PW_STREAMS_TRY(pw_graph_create(c, &g), "graph");
  uint32_t node;
  PW_STREAMS_TRY(pw_graph_add_parameter(c, g, vs, &spec, &node), "param");
  for (uint32_t k = 0; k < ops; ++k) {
    pw_value_t in = pw_value(node, 0);
    PW_STREAMS_TRY(pw_graph_add_compute(c, g, "spin", exe, vs, &in, 1, &node), "op");
  }
  PW_STREAMS_TRY(pw_graph_add_output(c, g, pw_value(node, 0)), "output");
  float x[16] = {1};
  double* walls = calloc(reps, sizeof(double));
  uint64_t* gaps = calloc(ops, sizeof(uint64_t));
  double* gap_medians = calloc(reps, sizeof(double));
  double* gap_means = calloc(reps, sizeof(double));
  for (uint32_t r = 0; r < reps + 1; ++r) { /* the first run warms up */
    pw_buffer_t in, y;
    PW_STREAMS_TRY(pw_buffer_from_host(c, vs, &spec, x, sizeof(x), &in), "from_host");
    atomic_store(&log->next, 0);
    pw_event_t* done = NULL;
    pw_time_t t0 = pw_clock_now();
    PW_STREAMS_TRY(pw_graph_submit(c, g, &in, 1, NULL, &y, 1, &done), "submit");
    PW_STREAMS_TRY(pw_event_wait(done, PW_INFINITE_FUTURE), "run");
    pw_time_t t1 = pw_clock_now();
    pw_event_release(done);
    PW_STREAMS_TRY(pw_buffer_release(c, in), "release");
    PW_STREAMS_TRY(pw_buffer_release(c, y), "release");
    if (r == 0) continue;
    walls[r - 1] = (double)(t1 - t0);
    uint32_t m = 0;
    double sum = 0;
    for (uint32_t k = 1; k < ops && k < log->capacity; ++k) {
      gaps[m] = log->start[k] > log->end[k - 1] ? log->start[k] - log->end[k - 1] : 0;
      sum += (double)gaps[m++];
    }
    gap_means[r - 1] = m ? sum / m : 0;
    qsort(gaps, m, sizeof(uint64_t), pw_streams_cmp);
    gap_medians[r - 1] = m ? (double)gaps[m / 2] : 0;
  }
  qsort(walls, reps, sizeof(double), pw_streams_cmp_d);
  qsort(gap_medians, reps, sizeof(double), pw_streams_cmp_d);
  qsort(gap_means, reps, sizeof(double), pw_streams_cmp_d);
  out->gap_mean_ns = gap_means[reps / 2];
  free(gap_means);
  out->wall_ns = walls[reps / 2];
  out->gap_ns = gap_medians[reps / 2];
  free(walls);
  free(gaps);
  free(gap_medians);
  PW_STREAMS_TRY(pw_graph_release(c, g), "graph release");
  PW_STREAMS_TRY(pw_executable_release(c, exe), "exe release");
  PW_STREAMS_TRY(pw_vslice_release(c, vs), "vslice release");
  PW_STREAMS_TRY(pw_client_destroy(c), "client destroy");
  PW_STREAMS_TRY(pw_runtime_destroy(rt), "runtime destroy");
  return 0;
}

static int pw_streams_main(int argc, char** argv) {
  uint32_t ops = 1000, depth = 64, reps = 5;
  double kernel_us = 50;
  for (int i = 0; i < argc; ++i) {
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--ops") && v) {
      ops = (uint32_t)atoi(v), ++i;
    } else if (!strcmp(argv[i], "--kernel-us") && v) {
      kernel_us = atof(v), ++i;
    } else if (!strcmp(argv[i], "--depth") && v) {
      depth = (uint32_t)atoi(v), ++i;
    } else if (!strcmp(argv[i], "--reps") && v) {
      reps = (uint32_t)atoi(v), ++i;
    } else {
      fprintf(stderr, "usage: pw-bench streams [--ops 1000] [--kernel-us 50] [--depth 64] "
                      "[--reps 5]\n");
      return 2;
    }
  }
  if (ops < 2 || depth == 0 || reps == 0 || kernel_us < 0) {
    fprintf(stderr, "pw-bench streams: --ops >= 2, --depth and --reps >= 1\n");
    return 2;
  }
  pw_streams_log_t log = {.spin_ns = (uint64_t)(kernel_us * 1000), .capacity = ops};
  log.start = calloc(ops, sizeof(uint64_t));
  log.end = calloc(ops, sizeof(uint64_t));
  if (log.start == NULL || log.end == NULL) return 1;
  pw_streams_result_t on, off;
  int rc = pw_streams_run(true, ops, depth, reps, &log, &on);
  if (rc == 0) rc = pw_streams_run(false, ops, depth, reps, &log, &off);
  free(log.start);
  free(log.end);
  if (rc != 0) return 1;
  double ideal = (double)ops * kernel_us * 1000;
  fprintf(stderr, "cpu backend, streams mode (depth %u), one device; chain of %u ops of %.0f us; "
                  "median of %u runs\n", depth, ops, kernel_us, reps);
  fprintf(stderr, "%-22s %12s %10s %12s %12s\n", "mode", "wall_ms", "x_kernel", "gap_p50_us",
          "gap_mean_us");
  fprintf(stderr, "%-22s %12.3f %10.4f %12.2f %12.2f\n", "queued launch", on.wall_ns / 1e6,
          on.wall_ns / ideal, on.gap_ns / 1e3, on.gap_mean_ns / 1e3);
  fprintf(stderr, "%-22s %12.3f %10.4f %12.2f %12.2f\n", "one at a time (off)",
          off.wall_ns / 1e6, off.wall_ns / ideal, off.gap_ns / 1e3, off.gap_mean_ns / 1e3);
  fprintf(stderr, "ratio queued / off: %.3f\n", on.wall_ns / off.wall_ns);
  printf("{\"bench\":\"streams\",\"backend\":\"cpu-streams\",\"ops\":%u,\"kernel_us\":%g,"
         "\"depth\":%u,\"reps\":%u,\"queued_wall_ns\":%.0f,\"queued_x_kernel\":%.4f,"
         "\"queued_gap_ns\":%.0f,\"off_wall_ns\":%.0f,\"off_x_kernel\":%.4f,"
         "\"off_gap_ns\":%.0f,\"ratio\":%.4f}\n",
         ops, kernel_us, depth, reps, on.wall_ns, on.wall_ns / ideal, on.gap_ns, off.wall_ns,
         off.wall_ns / ideal, off.gap_ns, on.wall_ns / off.wall_ns);
  return 0;
}

PW_BENCH_SUITE(streams, "streams",
               "queue-ordered launch on the CPU backend's streams mode vs one launch at a time",
               pw_streams_main)
