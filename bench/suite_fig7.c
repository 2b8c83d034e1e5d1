/* pw-bench fig7: the Pathways paper's Fig. 7 (parallel asynchronous
 * dispatch) in the sim's device time. This file owns the suite.
 *
 * A pipeline of --stages stages (default 16), one slice each (--devices
 * chips per slice, default 4), over --microbatches microbatches (default
 * 64): microbatch m runs stage 0 (a compute op of --kernel-us virtual
 * microseconds on every chip of slice 0), is transferred to slice 1
 * (pw_graph_add_transfer: priced by the sim at DCN rates), runs stage 1
 * there, and so on: GPipe's forward pass, the pipelined stages of the
 * paper's Fig. 7. The sim (MANUAL delivery, queue_depth --queued, default
 * 32) has a dispatch latency of --dispatch-latency-us (default 50): no
 * launch starts before its launch time + the latency, and the host acts at
 * the virtual time of the completion it reacts to.
 *
 * Three runs, each on a fresh runtime and sim (virtual times are
 * deterministic; wall times are printed for information):
 *   whole         the pipeline submitted as one graph, queue-ordered launch
 *   whole-off     the same with pw_runtime_options_t.disable_queued_launch
 *                 (a device is handed its next op after the host heard
 *                 of the previous one's completion)
 *   stage-by-stage  one graph per stage (its microbatches' transfers from
 *                 the previous stage's outputs and its computes), each
 *                 submitted after the one before completed (queue-ordered)
 * Figures, in virtual time: the span; the utilisation over the whole
 * fleet (busy / (devices x span): the pipeline's fill and drain count as
 * idle, so it tends to M / (M + S - 1)); per stage, the utilisation over
 * the stage's own active span [its first start, its last end] (the
 * minimum and median over stages: "every stage's devices busy" once
 * working); and the mean step between consecutive stages' first starts,
 * less the work that must precede it (whole: one kernel; stage-by-stage:
 * the previous stage's M kernels): the latency each stage adds.
 *
 * Usage: pw-bench fig7 [--stages 16] [--devices 4] [--microbatches 64]
 *                      [--kernel-us 200] [--dispatch-latency-us 50]
 *                      [--queued 32] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_try.h"
#include "bench_util.h"
#include "pathways/backends/sim.h"
#include "pathways/pathways.h"
#include "suites.h"

#define PW_FIG7_TRY(expr, what) PW_BENCH_TRY("fig7", (expr), (what))

typedef struct pw_fig7_cfg_s {
  uint32_t stages, devices, micro, depth;
  uint64_t kernel_ns, latency_ns;
} pw_fig7_cfg_t;

typedef struct pw_fig7_s {
  pw_fig7_cfg_t cfg;
  pw_backend_t backend; /* owned by the runtime */
  pw_runtime_t* rt;
  pw_client_t* c;
  pw_vslice_t* vs;       /* one per stage */
  pw_executable_t first; /* stage 0: no input */
  pw_executable_t stage; /* later stages: one input */
  pw_array_spec_t spec;
} pw_fig7_t;

typedef struct pw_fig7_result_s {
  double wall_ns, span_ns, util, stage_util_min, stage_util_median, stage_lag_ns;
} pw_fig7_result_t;

static int pw_fig7_open(const pw_fig7_cfg_t* cfg, bool queued, pw_fig7_t* f) {
  memset(f, 0, sizeof(*f));
  f->cfg = *cfg;
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.slice_count = cfg->stages;
  o.devices_per_slice = cfg->devices;
  o.mode = PW_SIM_MODE_MANUAL;
  o.queue_depth = cfg->depth;
  o.dispatch_latency_ns = cfg->latency_ns;
  PW_FIG7_TRY(pw_sim_backend_create(&o, &f->backend), "sim backend");
  pw_slice_desc_t* descs = calloc(cfg->stages, sizeof(*descs));
  f->vs = calloc(cfg->stages, sizeof(*f->vs));
  if (descs == NULL || f->vs == NULL) return -1;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &cfg->devices);
  for (uint32_t s = 0; s < cfg->stages; ++s) {
    descs[s].mesh = mesh;
    descs[s].first_device = s * cfg->devices;
    descs[s].host = s;
  }
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &f->backend;
  ro.backend_count = 1;
  ro.slices = descs;
  ro.slice_count = cfg->stages;
  ro.disable_queued_launch = !queued;
  pw_status_t st = pw_runtime_create(&ro, &f->rt);
  free(descs);
  PW_FIG7_TRY(st, "runtime");
  PW_FIG7_TRY(pw_client_create(f->rt, NULL, &f->c), "client");
  for (uint32_t s = 0; s < cfg->stages; ++s) {
    PW_FIG7_TRY(pw_vslice_create(f->c, &mesh, PW_VSLICE_DEFAULT, &f->vs[s]), "vslice");
  }
  int64_t n = 16 * (int64_t)cfg->devices;
  f->spec = (pw_array_spec_t){PW_DTYPE_F32, pw_shape_make(1, &n), pw_sharding_split(0, 0)};
  char text[256];
  snprintf(text, sizeof(text), "op stage0\ntime %lluns\noutput f32[%lld] split(0,0)\n",
           (unsigned long long)cfg->kernel_ns, (long long)n);
  PW_FIG7_TRY(pw_executable_compile(f->c, f->vs[0], text, strlen(text), NULL, &f->first),
              "compile stage 0");
  snprintf(text, sizeof(text),
           "op stage\ntime %lluns\ninput f32[%lld] split(0,0)\noutput f32[%lld] split(0,0)\n",
           (unsigned long long)cfg->kernel_ns, (long long)n, (long long)n);
  PW_FIG7_TRY(pw_executable_compile(f->c, f->vs[0], text, strlen(text), NULL, &f->stage),
              "compile stage");
  return 0;
}

static int pw_fig7_close(pw_fig7_t* f) {
  int rc = 0;
  if (f->c != NULL) {
    /* MANUAL: deliver everything before the client waits for it. */
    PW_FIG7_TRY(pw_sim_backend_run_all(f->backend, NULL), "sim run_all");
    for (uint32_t s = 0; s < f->cfg.stages; ++s) {
      if (f->vs[s].id != 0) PW_FIG7_TRY(pw_vslice_release(f->c, f->vs[s]), "vslice release");
    }
    if (f->first.id != 0) PW_FIG7_TRY(pw_executable_release(f->c, f->first), "release");
    if (f->stage.id != 0) PW_FIG7_TRY(pw_executable_release(f->c, f->stage), "release");
    PW_FIG7_TRY(pw_client_destroy(f->c), "client destroy");
  }
  if (f->rt != NULL) PW_FIG7_TRY(pw_runtime_destroy(f->rt), "runtime destroy");
  free(f->vs);
  return rc;
}

/* Submits |g|, steps the simulation to the end, and checks the run. */
static int pw_fig7_submit_run(pw_fig7_t* f, pw_graph_t g, const pw_buffer_t* args,
                              uint32_t arg_count, pw_buffer_t* outs, uint32_t out_count) {
  pw_event_t* done = NULL;
  PW_FIG7_TRY(pw_graph_submit(f->c, g, args, arg_count, NULL, outs, out_count, &done), "submit");
  pw_status_t st = pw_sim_backend_run_all(f->backend, NULL);
  if (st == NULL) st = pw_event_wait(done, pw_clock_now() + 10 * (pw_time_t)1000000000);
  pw_event_release(done);
  PW_FIG7_TRY(st, "run");
  return 0;
}

/* Microbatch |m|'s op on stage |s| reading |in| (stage 0: none). */
static int pw_fig7_add_stage(pw_fig7_t* f, pw_graph_t g, uint32_t s, const uint32_t* in,
                             uint32_t* out_node) {
  if (s == 0) {
    PW_FIG7_TRY(pw_graph_add_compute(f->c, g, "stage0", f->first, f->vs[0], NULL, 0, out_node),
                "stage 0");
    return 0;
  }
  uint32_t t;
  PW_FIG7_TRY(pw_graph_add_transfer(f->c, g, "hop", pw_value(*in, 0), f->vs[s],
                                    pw_sharding_split(0, 0), &t),
              "transfer");
  pw_value_t v = pw_value(t, 0);
  PW_FIG7_TRY(pw_graph_add_compute(f->c, g, "stage", f->stage, f->vs[s], &v, 1, out_node),
              "stage");
  return 0;
}

/* The whole pipeline as one graph. */
static int pw_fig7_whole(pw_fig7_t* f) {
  pw_graph_t g;
  PW_FIG7_TRY(pw_graph_create(f->c, &g), "graph");
  for (uint32_t m = 0; m < f->cfg.micro; ++m) {
    uint32_t node = 0;
    for (uint32_t s = 0; s < f->cfg.stages; ++s) {
      if (pw_fig7_add_stage(f, g, s, &node, &node) != 0) return -1;
    }
  }
  int rc = pw_fig7_submit_run(f, g, NULL, 0, NULL, 0);
  PW_FIG7_TRY(pw_graph_release(f->c, g), "graph release");
  return rc;
}

/* One graph per stage, each submitted when the one before has completed. */
static int pw_fig7_stagewise(pw_fig7_t* f) {
  uint32_t mb = f->cfg.micro;
  pw_buffer_t* bufs = calloc((size_t)mb * 2, sizeof(pw_buffer_t));
  uint32_t* params = calloc(mb, sizeof(uint32_t));
  if (bufs == NULL || params == NULL) return -1;
  pw_buffer_t* in = bufs;
  pw_buffer_t* out = bufs + mb;
  int rc = 0;
  for (uint32_t s = 0; rc == 0 && s < f->cfg.stages; ++s) {
    pw_graph_t g;
    PW_FIG7_TRY(pw_graph_create(f->c, &g), "graph");
    for (uint32_t m = 0; rc == 0 && m < mb; ++m) {
      if (s > 0) {
        PW_FIG7_TRY(pw_graph_add_parameter(f->c, g, f->vs[s - 1], &f->spec, &params[m]),
                    "parameter");
      }
      uint32_t node;
      rc = pw_fig7_add_stage(f, g, s, &params[m], &node);
      if (rc == 0) PW_FIG7_TRY(pw_graph_add_output(f->c, g, pw_value(node, 0)), "output");
    }
    if (rc == 0) rc = pw_fig7_submit_run(f, g, s > 0 ? in : NULL, s > 0 ? mb : 0, out, mb);
    PW_FIG7_TRY(pw_graph_release(f->c, g), "graph release");
    for (uint32_t m = 0; rc == 0 && s > 0 && m < mb; ++m) {
      PW_FIG7_TRY(pw_buffer_release(f->c, in[m]), "buffer release");
    }
    pw_buffer_t* t = in;
    in = out;
    out = t;
  }
  for (uint32_t m = 0; rc == 0 && m < mb; ++m) {
    PW_FIG7_TRY(pw_buffer_release(f->c, in[m]), "buffer release");
  }
  free(bufs);
  free(params);
  return rc;
}

static int pw_fig7_cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* The virtual-time figures of the run just made. |precede_ns|: the work
 * that must run on a stage before the next can start. */
static int pw_fig7_measure(pw_fig7_t* f, double precede_ns, pw_fig7_result_t* r) {
  const pw_fig7_cfg_t* cfg = &f->cfg;
  pw_sim_stats_t stats = {.struct_size = sizeof(stats)};
  PW_FIG7_TRY(pw_sim_backend_stats(f->backend, &stats), "sim stats");
  uint64_t want = (uint64_t)cfg->stages * cfg->devices * cfg->micro;
  if (stats.failed != 0 || stats.busy_ns != want * cfg->kernel_ns) {
    fprintf(stderr, "pw-bench fig7: the simulation disagrees: %llu failed, busy %llu ns "
                    "(expected %llu)\n", (unsigned long long)stats.failed,
            (unsigned long long)stats.busy_ns, (unsigned long long)(want * cfg->kernel_ns));
    return -1;
  }
  r->span_ns = (double)(stats.span_end - stats.span_start);
  r->util = (double)stats.busy_ns / ((double)cfg->stages * cfg->devices * r->span_ns);
  double* utils = calloc(cfg->stages, sizeof(double));
  if (utils == NULL) return -1;
  double lag = 0, prev_start = 0;
  for (uint32_t s = 0; s < cfg->stages; ++s) {
    double busy = 0, active = 0, first = -1;
    for (uint32_t d = 0; d < cfg->devices; ++d) {
      pw_sim_device_state_t ds = {.struct_size = sizeof(ds)};
      PW_FIG7_TRY(pw_sim_backend_device_state(f->backend, s * cfg->devices + d, &ds), "state");
      busy += (double)ds.busy_ns;
      active += (double)(ds.last_end - ds.first_start);
      if (first < 0 || (double)ds.first_start < first) first = (double)ds.first_start;
    }
    utils[s] = active > 0 ? busy / active : 0;
    if (s > 0) lag += first - prev_start - precede_ns;
    prev_start = first;
  }
  r->stage_lag_ns = cfg->stages > 1 ? lag / (cfg->stages - 1) : 0;
  qsort(utils, cfg->stages, sizeof(double), pw_fig7_cmp);
  r->stage_util_min = utils[0];
  r->stage_util_median = utils[cfg->stages / 2];
  free(utils);
  return 0;
}

/* One run (|mode|: 0 whole, 1 whole-off, 2 stage-by-stage) on a fresh sim. */
static int pw_fig7_run(const pw_fig7_cfg_t* cfg, int mode, pw_fig7_result_t* r) {
  pw_fig7_t f;
  int rc = pw_fig7_open(cfg, mode != 1, &f);
  int64_t t0 = pw_bench_now_ns();
  if (rc == 0) rc = mode == 2 ? pw_fig7_stagewise(&f) : pw_fig7_whole(&f);
  r->wall_ns = (double)(pw_bench_now_ns() - t0);
  double precede = (double)cfg->kernel_ns * (mode == 2 ? cfg->micro : 1);
  if (rc == 0) rc = pw_fig7_measure(&f, precede, r);
  if (pw_fig7_close(&f) != 0) rc = -1;
  return rc;
}

static int pw_bench_fig7_main(int argc, char** argv) {
  long long stages = pw_bench_opt_int(argc, argv, "stages", 16);
  long long devices = pw_bench_opt_int(argc, argv, "devices", 4);
  long long micro = pw_bench_opt_int(argc, argv, "microbatches", 64);
  long long kernel_us = pw_bench_opt_int(argc, argv, "kernel-us", 200);
  long long latency_us = pw_bench_opt_int(argc, argv, "dispatch-latency-us", 50);
  long long depth = pw_bench_opt_int(argc, argv, "queued", 32);
  if (stages < 2 || devices < 1 || micro < 1 || micro > 100000 || kernel_us < 1 ||
      kernel_us > 1000000000 || latency_us < 0 || latency_us > 1000000000 || depth < 1 ||
      depth > PW_BACKEND_MAX_QUEUE_DEPTH || stages > PW_SIM_MAX_DEVICES ||
      devices > PW_SIM_MAX_DEVICES || stages * devices > PW_SIM_MAX_DEVICES) {
    fprintf(stderr, "usage: pw-bench fig7 [--stages 16 (>= 2)] [--devices 4] "
                    "[--microbatches 64 (<= 100000)] [--kernel-us 200 (>= 1)] "
                    "[--dispatch-latency-us 50] "
                    "[--queued 32 (1..%u)]\n", (unsigned)PW_BACKEND_MAX_QUEUE_DEPTH);
    return 2;
  }
  pw_fig7_cfg_t cfg = {(uint32_t)stages, (uint32_t)devices, (uint32_t)micro, (uint32_t)depth,
                       (uint64_t)kernel_us * 1000, (uint64_t)latency_us * 1000};
  static const char* const modes[3] = {"whole", "whole-off", "stage-by-stage"};
  fprintf(stderr, "sim (MANUAL, queue depth %lld, dispatch latency %lld us): %lld stages x %lld "
                  "chips, %lld microbatches of %lld us per stage; virtual time\n",
          depth, latency_us, stages, devices, micro, kernel_us);
  fprintf(stderr, "%-15s %10s %8s %12s %12s %12s %9s\n", "submission", "span_ms", "util",
          "stage_min", "stage_p50", "stage_lag_us", "wall_ms");
  for (int mode = 0; mode < 3; ++mode) {
    pw_fig7_result_t r = {0};
    if (pw_fig7_run(&cfg, mode, &r) != 0) return 1;
    fprintf(stderr, "%-15s %10.3f %8.4f %12.4f %12.4f %12.2f %9.2f\n", modes[mode],
            r.span_ns / 1e6, r.util, r.stage_util_min, r.stage_util_median, r.stage_lag_ns / 1e3,
            r.wall_ns / 1e6);
    pw_bench_json_t j;
    pw_bench_json_begin(&j, "fig7");
    pw_bench_json_str(&j, "backend", "sim");
    pw_bench_json_str(&j, "submission", modes[mode]);
    pw_bench_json_int(&j, "stages", stages);
    pw_bench_json_int(&j, "devices", devices);
    pw_bench_json_int(&j, "microbatches", micro);
    pw_bench_json_int(&j, "kernel_ns", (long long)cfg.kernel_ns);
    pw_bench_json_int(&j, "dispatch_latency_ns", (long long)cfg.latency_ns);
    pw_bench_json_int(&j, "queued", depth);
    pw_bench_json_num(&j, "span_ns", r.span_ns);
    pw_bench_json_num(&j, "utilisation", r.util);
    pw_bench_json_num(&j, "stage_utilisation_min", r.stage_util_min);
    pw_bench_json_num(&j, "stage_utilisation_median", r.stage_util_median);
    pw_bench_json_num(&j, "stage_lag_ns", r.stage_lag_ns);
    pw_bench_json_num(&j, "wall_ns", r.wall_ns);
    pw_bench_json_end(&j);
  }
  return 0;
}

PW_BENCH_SUITE(fig7, "fig7",
               "Pathways Fig. 7 on the sim: a pipeline submitted whole vs stage by stage, in "
               "virtual device time",
               pw_bench_fig7_main)
