/* pw-bench streams and pw-bench streams-latency: queue-ordered launch
 * (include/pathways/backend.h) against the same workload through today's
 * protocol (pw_runtime_options_t.disable_queued_launch) in the same
 * process, reps interleaved (on, off, then off, on, ...), medians quoted.
 * This file owns both suites and their shared harness: a runtime over one
 * device, a chain of dependent ops on it, the device-side figures.
 *
 * Backends (one device each):
 *   cpu-streams  the CPU backend's streams mode (the reference stream
 *                backend) with depth --depth; the kernel "bench.spin"
 *                spins the kernel time and copies its input to its output,
 *                and logs when it started and ended (pw_clock_now), so
 *                the device-side gap is measured where it happens. done
 *                runs on the stream's own thread, so even with the
 *                capability off the next launch is enqueued from there.
 *   wrapper      the queue wrapper (tests/support/queue_wrapper.h) over
 *                the test double's no-op mode: the wrapper's worker is the
 *                device (it spins the kernel time), and completions come
 *                back through a separate completer thread --done-delay-us
 *                after the device finished (launches reach the device
 *                --launch-delay-us after they were made): a host that
 *                hears of a completion late, as a GPU's host does.
 *
 * pw-bench streams [--ops 1000] [--kernel-us 50] [--depth 64] [--reps 5]
 *                  [--done-delay-us 20] [--fill 200] [--fill-kernel-us 200]
 *   back to back: the chain on cpu-streams and on the wrapper; then the
 *   fill: --fill independent submissions of a one-op graph of
 *   --fill-kernel-us on the wrapper, the most launches outstanding at
 *   once (the wrapper's max_outstanding) with the capability on and off.
 * pw-bench streams-latency [--chains 1,10,100] [--kernel-us 50]
 *                          [--delay-us 100] [--depth 128] [--reps 5]
 *   latency does not stack: the wrapper with --delay-us each way (launch
 *   and completion), a chain of N ops per --chains entry: the cost, the
 *   model N x kernel + one round trip, and the capability-off run, whose
 *   model is N x (kernel + round trip). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_try.h"
#include "bench_util.h"
#include "cts/double_backend.h"
#include "pathways/backends/cpu.h"
#include "pathways/pathways.h"
#include "suites.h"
#include "support/queue_wrapper.h"

/* What bench.spin logs: its spin time and each run's start and end. */
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

#define PW_STREAMS_TRY(expr, what) PW_BENCH_TRY("streams", (expr), (what))

typedef enum pw_streams_kind_e { PW_STREAMS_CPU = 0, PW_STREAMS_WRAPPER = 1 } pw_streams_kind_t;

static const char* const pw_streams_kind_names[] = {"cpu-streams", "wrapper"};

typedef struct pw_streams_cfg_s {
  pw_streams_kind_t kind;
  uint32_t depth;
  uint64_t kernel_ns;        /* wrapper: spun by the wrapper's device */
  uint64_t launch_delay_ns;  /* wrapper only */
  uint64_t done_delay_ns;    /* wrapper only */
} pw_streams_cfg_t;

/* One runtime over one device of |cfg|'s backend. */
typedef struct pw_streams_rt_s {
  pw_streams_cfg_t cfg;
  bool queued;
  pw_streams_log_t* log;   /* cpu-streams */
  pw_queue_wrapper_t* qw;  /* wrapper */
  pw_runtime_t* rt;
  pw_client_t* c;
  pw_vslice_t vs;
  pw_executable_t exe;
  pw_array_spec_t spec;
} pw_streams_rt_t;

/* One run's figures: wall time, and the device's busy time, span
 * (first start to last end), median gap between consecutive ops (-1 when
 * unknown) and most launches outstanding (wrapper only; 0 otherwise). */
typedef struct pw_streams_run_s {
  double wall_ns, busy_ns, span_ns, gap_p50_ns;
  uint32_t max_outstanding;
} pw_streams_run_t;

static int pw_streams_backend(const pw_streams_cfg_t* cfg, pw_streams_log_t* log,
                              pw_backend_t* out) {
  if (cfg->kind == PW_STREAMS_CPU) {
    pw_cpu_backend_options_t o;
    pw_cpu_backend_options_init(&o);
    o.device_count = 1;
    o.stream_depth = cfg->depth;
    PW_STREAMS_TRY(pw_cpu_backend_create(&o, out), "cpu backend");
    pw_cpu_param_spec_t p = {"x", PW_CPU_DTYPES_ANY, -1};
    pw_cpu_kernel_def_t def = {.struct_size = sizeof(def), .name = "bench.spin",
                               .input_count = 1, .inputs = &p, .output_count = 1,
                               .outputs = &p, .flags = PW_CPU_KERNEL_SAME_DTYPE,
                               .run = pw_streams_spin, .user = log};
    pw_status_t reg = pw_cpu_backend_register_kernel(*out, &def);
    if (reg != NULL) out->vtable->destroy(out->self);
    PW_STREAMS_TRY(reg, "register bench.spin");
    return 0;
  }
  pw_double_options_t d;
  pw_double_options_init(&d);
  d.device_count = 1;
  d.no_op = true;
  pw_backend_t inner;
  PW_STREAMS_TRY(pw_double_backend_create(&d, &inner), "no-op double");
  pw_queue_wrapper_options_t w = {.depth = cfg->depth, .launch_delay_ns = cfg->launch_delay_ns,
                                  .done_delay_ns = cfg->done_delay_ns,
                                  .kernel_ns = cfg->kernel_ns, .ordered = true};
  PW_STREAMS_TRY(pw_queue_wrapper_create(&w, inner, out), "queue wrapper");
  return 0;
}

static int pw_streams_open(const pw_streams_cfg_t* cfg, bool queued, pw_streams_log_t* log,
                           pw_streams_rt_t* r) {
  memset(r, 0, sizeof(*r));
  r->cfg = *cfg;
  r->queued = queued;
  r->log = log;
  pw_backend_t backend;
  if (pw_streams_backend(cfg, log, &backend) != 0) return -1;
  r->qw = pw_queue_wrapper_from(&backend);
  pw_slice_desc_t slice = {.name = "s", .mesh = pw_mesh_shape_make(1, (const uint32_t[]){1})};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = &slice;
  ro.slice_count = 1;
  ro.disable_queued_launch = !queued;
  PW_STREAMS_TRY(pw_runtime_create(&ro, &r->rt), "runtime");
  PW_STREAMS_TRY(pw_client_create(r->rt, NULL, &r->c), "client");
  PW_STREAMS_TRY(pw_vslice_create(r->c, &slice.mesh, 0, &r->vs), "vslice");
  const char* text = cfg->kind == PW_STREAMS_CPU
                         ? "kernel bench.spin\ninput f32[16] replicated\n"
                           "output f32[16] replicated\n"
                         : "noop\ninput f32[16] replicated\noutput f32[16] replicated\n";
  PW_STREAMS_TRY(pw_executable_compile(r->c, r->vs, text, strlen(text), NULL, &r->exe), "compile");
  int64_t n = 16;
  r->spec = (pw_array_spec_t){PW_DTYPE_F32, pw_shape_make(1, &n), pw_sharding_replicated()};
  return 0;
}

static int pw_streams_close(pw_streams_rt_t* r) {
  if (r->rt == NULL) return 0;
  if (r->exe.id != 0) PW_STREAMS_TRY(pw_executable_release(r->c, r->exe), "exe release");
  if (r->vs.id != 0) PW_STREAMS_TRY(pw_vslice_release(r->c, r->vs), "vslice release");
  if (r->c != NULL) PW_STREAMS_TRY(pw_client_destroy(r->c), "client destroy");
  PW_STREAMS_TRY(pw_runtime_destroy(r->rt), "runtime destroy");
  r->rt = NULL;
  return 0;
}

/* A graph: one parameter, |ops| ops each reading the one before, one output. */
static int pw_streams_chain(pw_streams_rt_t* r, uint32_t ops, pw_graph_t* out) {
  PW_STREAMS_TRY(pw_graph_create(r->c, out), "graph");
  uint32_t node;
  PW_STREAMS_TRY(pw_graph_add_parameter(r->c, *out, r->vs, &r->spec, &node), "parameter");
  for (uint32_t k = 0; k < ops; ++k) {
    pw_value_t in = pw_value(node, 0);
    PW_STREAMS_TRY(pw_graph_add_compute(r->c, *out, "op", r->exe, r->vs, &in, 1, &node), "op");
  }
  PW_STREAMS_TRY(pw_graph_add_output(r->c, *out, pw_value(node, 0)), "output");
  PW_STREAMS_TRY(pw_graph_finalize(r->c, *out), "finalize");
  return 0;
}

/* Device-side figures of the run just made, and a reset for the next. */
static void pw_streams_device(pw_streams_rt_t* r, uint32_t ops, pw_streams_run_t* out) {
  out->gap_p50_ns = -1;
  out->max_outstanding = 0;
  if (r->qw != NULL) {
    pw_queue_wrapper_stats_t st = pw_queue_wrapper_stats(r->qw, 0);
    out->busy_ns = (double)st.busy_ns;
    out->span_ns = (double)(st.last_end_ns - st.first_start_ns);
    /* The wrapper counts a gap only when the next launch was queued
     * before the device finished the one before (never one at a time). */
    if (st.gaps * 2 >= (uint64_t)ops) out->gap_p50_ns = (double)st.gap_ns_median;
    out->max_outstanding = st.max_outstanding;
    pw_queue_wrapper_reset_stats(r->qw);
    return;
  }
  pw_streams_log_t* log = r->log;
  uint32_t m = atomic_load(&log->next);
  if (m > log->capacity) m = log->capacity;
  out->busy_ns = out->span_ns = 0;
  if (m == 0) return;
  uint64_t* gaps = malloc(m * sizeof(uint64_t));
  uint32_t g = 0;
  for (uint32_t k = 0; k < m; ++k) {
    out->busy_ns += (double)(log->end[k] - log->start[k]);
    if (k > 0 && gaps != NULL) {
      gaps[g++] = log->start[k] > log->end[k - 1] ? log->start[k] - log->end[k - 1] : 0;
    }
  }
  out->span_ns = (double)(log->end[m - 1] - log->start[0]);
  if (gaps != NULL && g > 0) {
    qsort(gaps, g, sizeof(uint64_t), pw_streams_cmp);
    out->gap_p50_ns = (double)gaps[g / 2];
  }
  free(gaps);
  atomic_store(&log->next, 0);
}

/* Waits until |b| is ready (pw_buffer_from_host may copy asynchronously),
 * so no timed run waits for its arguments. */
static int pw_streams_ready(pw_client_t* c, pw_buffer_t b) {
  pw_event_t* e = NULL;
  PW_STREAMS_TRY(pw_buffer_ready_event(c, b, &e), "ready event");
  pw_status_t s = pw_event_wait(e, PW_INFINITE_FUTURE);
  pw_event_release(e);
  PW_STREAMS_TRY(s, "input ready");
  return 0;
}

/* Submits |g| (a chain of |ops|) once and waits for it. */
static int pw_streams_run_chain(pw_streams_rt_t* r, pw_graph_t g, uint32_t ops,
                                pw_streams_run_t* out) {
  float x[16] = {1};
  pw_buffer_t in, y;
  PW_STREAMS_TRY(pw_buffer_from_host(r->c, r->vs, &r->spec, x, sizeof(x), &in), "from_host");
  if (pw_streams_ready(r->c, in) != 0) return -1;
  if (r->log != NULL) atomic_store(&r->log->next, 0);
  if (r->qw != NULL) pw_queue_wrapper_reset_stats(r->qw);
  pw_event_t* done = NULL;
  pw_time_t t0 = pw_clock_now();
  PW_STREAMS_TRY(pw_graph_submit(r->c, g, &in, 1, NULL, &y, 1, &done), "submit");
  PW_STREAMS_TRY(pw_event_wait(done, PW_INFINITE_FUTURE), "run");
  out->wall_ns = (double)(pw_clock_now() - t0);
  pw_event_release(done);
  PW_STREAMS_TRY(pw_buffer_release(r->c, in), "release");
  PW_STREAMS_TRY(pw_buffer_release(r->c, y), "release");
  pw_streams_device(r, ops, out);
  return 0;
}

/* |count| independent submissions of |g| (one op) at once, then the wait. */
static int pw_streams_run_fill(pw_streams_rt_t* r, pw_graph_t g, uint32_t count,
                               pw_streams_run_t* out) {
  float x[16] = {1};
  pw_buffer_t* bufs = calloc((size_t)count * 2, sizeof(pw_buffer_t));
  pw_event_t** done = calloc(count, sizeof(pw_event_t*));
  if (bufs == NULL || done == NULL) {
    fprintf(stderr, "pw-bench streams: out of memory for %u submissions\n", count);
    free(bufs);
    free(done);
    return -1;
  }
  for (uint32_t k = 0; k < count; ++k) {
    PW_STREAMS_TRY(pw_buffer_from_host(r->c, r->vs, &r->spec, x, sizeof(x), &bufs[2 * k]),
                   "from_host");
    if (pw_streams_ready(r->c, bufs[2 * k]) != 0) return -1;
  }
  pw_queue_wrapper_reset_stats(r->qw);
  pw_time_t t0 = pw_clock_now();
  for (uint32_t k = 0; k < count; ++k) {
    PW_STREAMS_TRY(pw_graph_submit(r->c, g, &bufs[2 * k], 1, NULL, &bufs[2 * k + 1], 1, &done[k]),
                   "submit");
  }
  for (uint32_t k = 0; k < count; ++k) {
    PW_STREAMS_TRY(pw_event_wait(done[k], PW_INFINITE_FUTURE), "run");
    pw_event_release(done[k]);
  }
  out->wall_ns = (double)(pw_clock_now() - t0);
  for (uint32_t k = 0; k < 2 * count; ++k) {
    PW_STREAMS_TRY(pw_buffer_release(r->c, bufs[k]), "release");
  }
  free(bufs);
  free(done);
  pw_streams_device(r, count, out);
  return 0;
}

/* Medians over reps of each figure (max_outstanding: the largest). */
static pw_streams_run_t pw_streams_median(const pw_streams_run_t* runs, uint32_t n) {
  double* v = calloc(n, sizeof(double));
  pw_streams_run_t m = {0};
  if (v == NULL) return m;
  for (uint32_t f = 0; f < 4; ++f) {
    for (uint32_t k = 0; k < n; ++k) {
      const pw_streams_run_t* x = &runs[k];
      v[k] = f == 0 ? x->wall_ns : f == 1 ? x->busy_ns : f == 2 ? x->span_ns : x->gap_p50_ns;
    }
    double med = pw_bench_median(v, n);
    if (f == 0) m.wall_ns = med;
    if (f == 1) m.busy_ns = med;
    if (f == 2) m.span_ns = med;
    if (f == 3) m.gap_p50_ns = med;
  }
  for (uint32_t k = 0; k < n; ++k) {
    if (runs[k].max_outstanding > m.max_outstanding) m.max_outstanding = runs[k].max_outstanding;
  }
  free(v);
  return m;
}

typedef int (*pw_streams_body_t)(pw_streams_rt_t* r, pw_graph_t g, uint32_t n,
                                 pw_streams_run_t* out);

/* Runs |body| on both runtimes (index 0 queued, 1 off), one warm-up each,
 * then |reps| interleaved rounds (the order alternates), and writes the
 * medians to |out|[2]. |g| holds each runtime's graph. */
static int pw_streams_pair(pw_streams_rt_t rts[2], const pw_graph_t g[2], uint32_t n,
                           uint32_t reps, pw_streams_body_t body, pw_streams_run_t out[2]) {
  pw_streams_run_t* runs = calloc((size_t)reps * 2, sizeof(*runs));
  if (runs == NULL) return -1;
  pw_streams_run_t warm = {0};
  int rc = body(&rts[0], g[0], n, &warm);
  if (rc == 0) rc = body(&rts[1], g[1], n, &warm);
  for (uint32_t k = 0; rc == 0 && k < reps; ++k) {
    for (uint32_t i = 0; rc == 0 && i < 2; ++i) {
      uint32_t which = (k & 1) ? 1 - i : i;
      rc = body(&rts[which], g[which], n, &runs[which * reps + k]);
    }
  }
  if (rc == 0) {
    out[0] = pw_streams_median(runs, reps);
    out[1] = pw_streams_median(runs + reps, reps);
  }
  free(runs);
  return rc;
}

static void pw_streams_load(double* out) {
  FILE* f = fopen("/proc/loadavg", "r");
  out[0] = -1;
  if (f == NULL) return;
  if (fscanf(f, "%lf", out) != 1) out[0] = -1;
  fclose(f);
}

/* Prints one chain result row pair (queued, off) and its JSON line. */
static void pw_streams_report_chain(const char* bench, const pw_streams_cfg_t* cfg, uint32_t ops,
                                    uint32_t reps, const pw_streams_run_t m[2],
                                    double model_on_ns, double model_off_ns) {
  double load;
  pw_streams_load(&load);
  double nominal = (double)ops * (double)cfg->kernel_ns;
  static const char* const modes[2] = {"queued launch", "one at a time (off)"};
  for (int i = 0; i < 2; ++i) {
    double model = i == 0 ? model_on_ns : model_off_ns;
    fprintf(stderr, "%-12s %-20s %6u %10.3f %9.4f %9.4f %9.4f %9.2f %9.2f\n",
            pw_streams_kind_names[cfg->kind], modes[i], ops, m[i].wall_ns / 1e6,
            m[i].wall_ns / nominal, m[i].wall_ns / m[i].busy_ns, m[i].wall_ns / model,
            m[i].gap_p50_ns < 0 ? -1 : m[i].gap_p50_ns / 1e3,
            ops > 1 ? (m[i].span_ns - m[i].busy_ns) / (ops - 1) / 1e3 : 0.0);
  }
  fprintf(stderr, "%-12s ratio queued / off: %.4f (load %.2f)\n", pw_streams_kind_names[cfg->kind],
          m[0].wall_ns / m[1].wall_ns, load);
  pw_bench_json_t j;
  pw_bench_json_begin(&j, bench);
  pw_bench_json_str(&j, "backend", pw_streams_kind_names[cfg->kind]);
  pw_bench_json_int(&j, "ops", ops);
  pw_bench_json_num(&j, "kernel_us", (double)cfg->kernel_ns / 1e3);
  pw_bench_json_int(&j, "depth", cfg->depth);
  pw_bench_json_num(&j, "launch_delay_us", (double)cfg->launch_delay_ns / 1e3);
  pw_bench_json_num(&j, "done_delay_us", (double)cfg->done_delay_ns / 1e3);
  pw_bench_json_int(&j, "reps", reps);
  static const char* const pre[2] = {"queued_", "off_"};
  char key[64];
  for (int i = 0; i < 2; ++i) {
#define PW_STREAMS_KEY(name) (snprintf(key, sizeof(key), "%s%s", pre[i], name), key)
    pw_bench_json_num(&j, PW_STREAMS_KEY("wall_ns"), m[i].wall_ns);
    pw_bench_json_num(&j, PW_STREAMS_KEY("x_kernel"), m[i].wall_ns / nominal);
    pw_bench_json_num(&j, PW_STREAMS_KEY("x_measured"), m[i].wall_ns / m[i].busy_ns);
    pw_bench_json_num(&j, PW_STREAMS_KEY("x_model"),
                      m[i].wall_ns / (i ? model_off_ns : model_on_ns));
    pw_bench_json_num(&j, PW_STREAMS_KEY("gap_p50_ns"), m[i].gap_p50_ns);
    pw_bench_json_num(&j, PW_STREAMS_KEY("idle_mean_ns"),
                      ops > 1 ? (m[i].span_ns - m[i].busy_ns) / (ops - 1) : 0.0);
#undef PW_STREAMS_KEY
  }
  pw_bench_json_num(&j, "ratio", m[0].wall_ns / m[1].wall_ns);
  pw_bench_json_num(&j, "load", load);
  pw_bench_json_end(&j);
}

static void pw_streams_header(void) {
  fprintf(stderr, "%-12s %-20s %6s %10s %9s %9s %9s %9s %9s\n", "backend", "mode", "ops",
          "wall_ms", "x_kernel", "x_meas", "x_model", "gap_p50", "idle_us");
}

/* Opens both runtimes of |cfg|, builds a chain of |ops| on each. */
static int pw_streams_open_pair(const pw_streams_cfg_t* cfg, pw_streams_log_t* log,
                                pw_streams_rt_t rts[2]) {
  if (pw_streams_open(cfg, true, log, &rts[0]) != 0) return -1;
  if (pw_streams_open(cfg, false, log, &rts[1]) != 0) return -1;
  return 0;
}

static int pw_streams_chain_pair(const char* bench, const pw_streams_cfg_t* cfg,
                                 pw_streams_log_t* log, uint32_t ops, uint32_t reps) {
  pw_streams_rt_t rts[2];
  pw_graph_t g[2];
  pw_streams_run_t m[2] = {{0}};
  int rc = pw_streams_open_pair(cfg, log, rts);
  for (int i = 0; rc == 0 && i < 2; ++i) rc = pw_streams_chain(&rts[i], ops, &g[i]);
  if (rc == 0) rc = pw_streams_pair(rts, g, ops, reps, pw_streams_run_chain, m);
  if (rc == 0) {
    double nominal = (double)ops * (double)cfg->kernel_ns;
    double trip = (double)(cfg->launch_delay_ns + cfg->done_delay_ns);
    pw_streams_report_chain(bench, cfg, ops, reps, m, nominal + trip,
                            nominal + ops * trip);
  }
  for (int i = 0; rc == 0 && i < 2; ++i) PW_STREAMS_TRY(pw_graph_release(rts[i].c, g[i]), "graph");
  for (int i = 0; i < 2; ++i) {
    if (pw_streams_close(&rts[i]) != 0) rc = -1;
  }
  return rc;
}

static int pw_streams_fill_pair(const pw_streams_cfg_t* cfg, uint32_t count, uint32_t reps) {
  pw_streams_rt_t rts[2];
  pw_graph_t g[2];
  pw_streams_run_t m[2] = {{0}};
  int rc = pw_streams_open_pair(cfg, NULL, rts);
  for (int i = 0; rc == 0 && i < 2; ++i) rc = pw_streams_chain(&rts[i], 1, &g[i]);
  if (rc == 0) rc = pw_streams_pair(rts, g, count, reps, pw_streams_run_fill, m);
  if (rc == 0) {
    double load;
    pw_streams_load(&load);
    double nominal = (double)count * (double)cfg->kernel_ns;
    fprintf(stderr, "fill: %u independent submissions of %.0f us on the wrapper (depth %u, "
                    "done delay %.0f us): max outstanding queued %u, off %u; wall x_kernel "
                    "queued %.4f, off %.4f, ratio %.4f (load %.2f)\n",
            count, (double)cfg->kernel_ns / 1e3, cfg->depth, (double)cfg->done_delay_ns / 1e3,
            m[0].max_outstanding, m[1].max_outstanding, m[0].wall_ns / nominal,
            m[1].wall_ns / nominal, m[0].wall_ns / m[1].wall_ns, load);
    pw_bench_json_t j;
    pw_bench_json_begin(&j, "streams-fill");
    pw_bench_json_str(&j, "backend", "wrapper");
    pw_bench_json_int(&j, "submissions", count);
    pw_bench_json_num(&j, "kernel_us", (double)cfg->kernel_ns / 1e3);
    pw_bench_json_int(&j, "depth", cfg->depth);
    pw_bench_json_num(&j, "done_delay_us", (double)cfg->done_delay_ns / 1e3);
    pw_bench_json_int(&j, "queued_max_outstanding", m[0].max_outstanding);
    pw_bench_json_int(&j, "off_max_outstanding", m[1].max_outstanding);
    pw_bench_json_num(&j, "queued_x_kernel", m[0].wall_ns / nominal);
    pw_bench_json_num(&j, "off_x_kernel", m[1].wall_ns / nominal);
    pw_bench_json_num(&j, "ratio", m[0].wall_ns / m[1].wall_ns);
    pw_bench_json_num(&j, "load", load);
    pw_bench_json_end(&j);
  }
  for (int i = 0; rc == 0 && i < 2; ++i) PW_STREAMS_TRY(pw_graph_release(rts[i].c, g[i]), "graph");
  for (int i = 0; i < 2; ++i) {
    if (pw_streams_close(&rts[i]) != 0) rc = -1;
  }
  return rc;
}

/* A count or duration option in [min, 10,000,000]; -1 (and a message
 * naming it) if out of range. */
static long long pw_streams_opt(int argc, char** argv, const char* name, long long fallback,
                                long long min) {
  long long v = pw_bench_opt_int(argc, argv, name, fallback);
  if (v < min || v > 10000000) {
    fprintf(stderr, "pw-bench streams: --%s must be in [%lld, 10000000] (got %lld)\n", name,
            min, v);
    return -1;
  }
  return v;
}

static int pw_streams_main(int argc, char** argv) {
  long long ops = pw_streams_opt(argc, argv, "ops", 1000, 2);
  long long kernel_us = pw_streams_opt(argc, argv, "kernel-us", 50, 0);
  long long depth = pw_streams_opt(argc, argv, "depth", 64, 1);
  long long reps = pw_streams_opt(argc, argv, "reps", 5, 1);
  long long done_us = pw_streams_opt(argc, argv, "done-delay-us", 20, 0);
  long long fill = pw_streams_opt(argc, argv, "fill", 200, 1);
  long long fill_us = pw_streams_opt(argc, argv, "fill-kernel-us", 200, 0);
  if (ops < 0 || kernel_us < 0 || depth < 0 || reps < 0 || done_us < 0 || fill < 0 ||
      fill_us < 0 || depth > PW_BACKEND_MAX_QUEUE_DEPTH) {
    fprintf(stderr, "usage: pw-bench streams [--ops 1000] [--kernel-us 50] [--depth 64 (<= %u)] "
                    "[--reps 5] [--done-delay-us 20] [--fill 200] [--fill-kernel-us 200]\n",
            (unsigned)PW_BACKEND_MAX_QUEUE_DEPTH);
    return 2;
  }
  pw_streams_log_t log = {.spin_ns = (uint64_t)kernel_us * 1000, .capacity = (uint32_t)ops};
  log.start = calloc((size_t)ops, sizeof(uint64_t));
  log.end = calloc((size_t)ops, sizeof(uint64_t));
  if (log.start == NULL || log.end == NULL) return 1;
  fprintf(stderr, "chain of %lld dependent ops of %lld us on one device, median of %lld "
                  "interleaved reps; x_kernel = wall / (ops x kernel), x_meas = wall / the "
                  "device's measured kernel intervals, x_model = wall / (ops x kernel + one "
                  "round trip queued, ops round trips off); gap_p50 (us) the median gap "
                  "between consecutive ops on the device (-1: not measured), idle_us the "
                  "mean idle time between them\n", ops, kernel_us, reps);
  pw_streams_header();
  pw_streams_cfg_t cpu = {.kind = PW_STREAMS_CPU, .depth = (uint32_t)depth,
                          .kernel_ns = (uint64_t)kernel_us * 1000};
  int rc = pw_streams_chain_pair("streams", &cpu, &log, (uint32_t)ops, (uint32_t)reps);
  pw_streams_cfg_t wrap = {.kind = PW_STREAMS_WRAPPER, .depth = (uint32_t)depth,
                           .kernel_ns = (uint64_t)kernel_us * 1000,
                           .done_delay_ns = (uint64_t)done_us * 1000};
  if (rc == 0) rc = pw_streams_chain_pair("streams", &wrap, NULL, (uint32_t)ops, (uint32_t)reps);
  pw_streams_cfg_t filler = wrap;
  filler.kernel_ns = (uint64_t)fill_us * 1000;
  if (rc == 0) rc = pw_streams_fill_pair(&filler, (uint32_t)fill, (uint32_t)reps);
  free(log.start);
  free(log.end);
  return rc == 0 ? 0 : 1;
}

/* pw-bench streams-latency: see the top of the file. */
static int pw_streams_latency_main(int argc, char** argv) {
  long long kernel_us = pw_streams_opt(argc, argv, "kernel-us", 50, 0);
  long long delay_us = pw_streams_opt(argc, argv, "delay-us", 100, 0);
  long long depth = pw_streams_opt(argc, argv, "depth", 128, 1);
  long long reps = pw_streams_opt(argc, argv, "reps", 5, 1);
  const char* chains = pw_bench_opt_value(argc, argv, "chains");
  if (chains == NULL) chains = "1,10,100";
  if (kernel_us < 0 || delay_us < 0 || depth < 0 || reps < 0 ||
      depth > PW_BACKEND_MAX_QUEUE_DEPTH) {
    fprintf(stderr, "usage: pw-bench streams-latency [--chains 1,10,100] [--kernel-us 50] "
                    "[--delay-us 100] [--depth 128 (<= %u)] [--reps 5]\n",
            (unsigned)PW_BACKEND_MAX_QUEUE_DEPTH);
    return 2;
  }
  pw_streams_cfg_t cfg = {.kind = PW_STREAMS_WRAPPER, .depth = (uint32_t)depth,
                          .kernel_ns = (uint64_t)kernel_us * 1000,
                          .launch_delay_ns = (uint64_t)delay_us * 1000,
                          .done_delay_ns = (uint64_t)delay_us * 1000};
  fprintf(stderr, "queue wrapper over the no-op double, %lld us kernels, %lld us launch and "
                  "%lld us completion delay; x_model = wall / (N x kernel + one round trip) "
                  "queued, / (N x (kernel + round trip)) off; median of %lld interleaved reps\n",
          kernel_us, delay_us, delay_us, reps);
  for (int run = 0; run < 2; ++run) { /* 0: check the whole list, 1: run it */
    if (run == 1) pw_streams_header();
    const char* p = chains;
    do {
      char* end = NULL;
      long n = strtol(p, &end, 10);
      if (end == p || n < 1 || n > 1000000 || (*end != ',' && *end != '\0')) {
        fprintf(stderr, "pw-bench streams-latency: --chains is a list of counts in [1, 1000000] "
                        "like 1,10,100, not '%s'\n", chains);
        return 2;
      }
      if (run == 1 &&
          pw_streams_chain_pair("streams-latency", &cfg, NULL, (uint32_t)n, (uint32_t)reps) != 0) {
        return 1;
      }
      p = *end == ',' ? end + 1 : end;
    } while (*p != '\0');
  }
  return 0;
}

PW_BENCH_SUITE(streams, "streams",
               "queue-ordered launch back to back (CPU streams mode, queue wrapper) and queue "
               "fill, vs one launch at a time",
               pw_streams_main)
PW_BENCH_SUITE(streams_latency, "streams-latency",
               "queue-ordered launch with injected launch/completion delays: N x kernel + one "
               "round trip, vs N round trips",
               pw_streams_latency_main)
