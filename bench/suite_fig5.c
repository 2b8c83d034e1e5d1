/* pw-bench fig5: the Pathways paper's Fig. 5 (dispatch overhead of a
 * gang op as the fleet grows) on the sim fleet. This file owns the suite.
 *
 * One slice of D simulated chips (mesh [D], --devices-per-host chips per
 * host, default 8), D from --min-devices (8) by a factor of --step (4)
 * up to --max-devices (16384, always run). The computation is the paper's: a scalar
 * all-reduce then a scalar add (one f32 per chip: all_reduce_sum, then a
 * compute op, each --kernel-ns of virtual time, default 100; fig5_graph.h,
 * shared with `pw-bench remote`). Three ways
 * to run --computations of them (default 128), as in the paper:
 *   opbyop   a graph of one computation (2 gang ops), submitted once per
 *            computation, each reading the previous one's output buffer;
 *   chained  one graph of all the computations (2 x N gang ops in a
 *            chain), submitted once;
 *   fused    one graph of one gang op that does the N computations (an
 *            all_reduce_sum of N x the kernel time), submitted once.
 * The sim runs INLINE (its host infinitely fast: a launch completes inside
 * the backend's launch call) with VIRTUAL memory, so the whole run, the
 * runtime's dispatch and the sim's per-device work, happens on the one
 * thread that submits: the controller thread. Its time per gang op is the
 * thread's CPU time (CLOCK_THREAD_CPUTIME_ID) of the run over the gang
 * ops it made; wall time is printed beside it.
 *
 * --backend noop runs the same over the test double's no-op backend with
 * host launch (every launch completes OK inline and keeps only counts; a
 * host launch checks each device's host and nothing else): what the
 * runtime's dispatcher itself costs the controller, apart from the sim's
 * per-device work (which a real fleet does on each host's executor, and
 * which the sim, in process, does on the controller thread).
 *
 * Each size runs twice per rep, interleaved: "host" (the sim's
 * launch_host: one launch per host and op, backend.h "Host launch") and
 * "device" (pw_runtime_options_t.disable_host_launch: one launch per
 * device and op, the runtime before host launch). Figures, medians over
 * --reps: ns per gang op, per gang op and host, per gang op and device,
 * and per computation (fused: per op / N). The summary gives, per mode
 * and launch, the spread of ns per gang op and host over the sizes
 * (max / min) and host/device ratios at the largest size.
 *
 * Usage: pw-bench fig5 [--min-devices 8] [--max-devices 16384] [--step 4]
 *                      [--devices-per-host 8] [--computations 128]
 *                      [--reps 5] [--kernel-ns 100] [--backend sim|noop] */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_try.h"
#include "bench_util.h"
#include "cts/double_backend.h"
#include "fig5_graph.h"
#include "pathways/backends/sim.h"
#include "pathways/pathways.h"
#include "suites.h"

#define PW_FIG5_TRY(expr, what) PW_BENCH_TRY("fig5", (expr), (what))

enum { PW_FIG5_OPBYOP, PW_FIG5_CHAINED, PW_FIG5_FUSED, PW_FIG5_MODES };
static const char* const pw_fig5_mode_names[PW_FIG5_MODES] = {"opbyop", "chained", "fused"};

typedef struct pw_fig5_cfg_s {
  uint32_t devices, per_host, computations;
  uint64_t kernel_ns;
  bool host_launch;
  bool noop; /* --backend noop: the test double's no-op backend */
} pw_fig5_cfg_t;

typedef struct pw_fig5_s {
  pw_fig5_cfg_t cfg;
  pw_backend_t backend; /* owned by the runtime */
  pw_runtime_t* rt;
  pw_client_t* c;
  pw_vslice_t vs;
  pw_fig5_exes_t exes;
  pw_array_spec_t spec;
  pw_graph_t graphs[PW_FIG5_MODES];
  pw_buffer_t seed; /* the first computation's input */
} pw_fig5_t;

/* A graph: parameter -> |count| x (reduce -> add) -> output, or (fused)
 * parameter -> fused -> output (fig5_graph.h). */
static int pw_fig5_graph(pw_fig5_t* f, uint32_t count, bool fused, pw_graph_t* out) {
  PW_FIG5_TRY(pw_graph_create(f->c, out), "graph");
  uint32_t node;
  PW_FIG5_TRY(pw_graph_add_parameter(f->c, *out, f->vs, &f->spec, &node), "parameter");
  if (pw_fig5_add_chain("fig5", f->c, *out, f->vs, &f->exes, count, fused, node, &node) != 0) {
    return -1;
  }
  PW_FIG5_TRY(pw_graph_add_output(f->c, *out, pw_value(node, 0)), "output");
  PW_FIG5_TRY(pw_graph_finalize(f->c, *out), "finalize");
  return 0;
}

static int pw_fig5_open(const pw_fig5_cfg_t* cfg, pw_fig5_t* f) {
  memset(f, 0, sizeof(*f));
  f->cfg = *cfg;
  if (cfg->noop) {
    pw_double_options_t d;
    pw_double_options_init(&d);
    d.device_count = cfg->devices;
    d.no_op = true;
    d.host_launch = true;
    d.devices_per_host = cfg->per_host;
    PW_FIG5_TRY(pw_double_backend_create(&d, &f->backend), "no-op backend");
  } else {
    pw_sim_backend_options_t o;
    pw_sim_backend_options_init(&o);
    o.slice_count = 1;
    o.devices_per_slice = cfg->devices;
    o.devices_per_host = cfg->per_host;
    o.mode = PW_SIM_MODE_INLINE;
    o.memory = PW_SIM_MEMORY_VIRTUAL;
    PW_FIG5_TRY(pw_sim_backend_create(&o, &f->backend), "sim backend");
  }
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &cfg->devices);
  pw_slice_desc_t desc;
  memset(&desc, 0, sizeof(desc));
  desc.mesh = mesh;
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &f->backend;
  ro.backend_count = 1;
  ro.slices = &desc;
  ro.slice_count = 1;
  ro.disable_host_launch = !cfg->host_launch;
  PW_FIG5_TRY(pw_runtime_create(&ro, &f->rt), "runtime");
  PW_FIG5_TRY(pw_client_create(f->rt, NULL, &f->c), "client");
  PW_FIG5_TRY(pw_vslice_create(f->c, &mesh, PW_VSLICE_DEFAULT, &f->vs), "vslice");
  f->spec = pw_fig5_spec(cfg->devices);
  if (pw_fig5_compile_all("fig5", f->c, f->vs, cfg->noop, cfg->devices, cfg->kernel_ns,
                          cfg->computations, &f->exes) != 0 ||
      pw_fig5_graph(f, 1, false, &f->graphs[PW_FIG5_OPBYOP]) != 0 ||
      pw_fig5_graph(f, cfg->computations, false, &f->graphs[PW_FIG5_CHAINED]) != 0 ||
      pw_fig5_graph(f, 1, true, &f->graphs[PW_FIG5_FUSED]) != 0) {
    return -1;
  }
  float* zeros = calloc(cfg->devices, sizeof(float));
  if (zeros == NULL) return -1;
  pw_status_t st = pw_buffer_from_host(f->c, f->vs, &f->spec, zeros,
                                       cfg->devices * sizeof(float), &f->seed);
  free(zeros);
  PW_FIG5_TRY(st, "seed buffer");
  return 0;
}

static int pw_fig5_close(pw_fig5_t* f) {
  for (int m = 0; m < PW_FIG5_MODES; ++m) {
    if (f->graphs[m].id != 0) PW_FIG5_TRY(pw_graph_release(f->c, f->graphs[m]), "release");
  }
  if (f->seed.id != 0) PW_FIG5_TRY(pw_buffer_release(f->c, f->seed), "release");
  if (pw_fig5_release_all("fig5", f->c, &f->exes) != 0) return -1;
  if (f->vs.id != 0) PW_FIG5_TRY(pw_vslice_release(f->c, f->vs), "vslice release");
  if (f->c != NULL) PW_FIG5_TRY(pw_client_destroy(f->c), "client destroy");
  if (f->rt != NULL) PW_FIG5_TRY(pw_runtime_destroy(f->rt), "runtime destroy");
  return 0;
}

static int64_t pw_fig5_thread_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Submits |g| on |in|, the output to |*out|; waits when |wait|. */
static int pw_fig5_submit(pw_fig5_t* f, pw_graph_t g, pw_buffer_t in, pw_buffer_t* out,
                          bool wait) {
  pw_event_t* done = NULL;
  PW_FIG5_TRY(pw_graph_submit(f->c, g, &in, 1, NULL, out, 1, wait ? &done : NULL), "submit");
  if (!wait) return 0;
  pw_status_t st = pw_event_wait(done, pw_clock_now() + 60 * (pw_time_t)1000000000);
  pw_event_release(done);
  PW_FIG5_TRY(st, "run");
  return 0;
}

/* One run of |mode|: the thread's CPU and wall time, and its gang ops. */
static int pw_fig5_run(pw_fig5_t* f, int mode, double* cpu_ns, double* wall_ns,
                       uint64_t* gang_ops) {
  uint32_t n = f->cfg.computations;
  int64_t w0 = pw_bench_now_ns(), c0 = pw_fig5_thread_ns();
  pw_buffer_t prev = f->seed, out = {0};
  if (mode == PW_FIG5_OPBYOP) {
    for (uint32_t i = 0; i < n; ++i) {
      if (pw_fig5_submit(f, f->graphs[mode], prev, &out, i + 1 == n) != 0) return -1;
      if (prev.id != f->seed.id) PW_FIG5_TRY(pw_buffer_release(f->c, prev), "release");
      prev = out;
    }
    *gang_ops = 2 * (uint64_t)n;
  } else {
    if (pw_fig5_submit(f, f->graphs[mode], prev, &out, true) != 0) return -1;
    prev = out;
    *gang_ops = mode == PW_FIG5_CHAINED ? 2 * (uint64_t)n : 1;
  }
  PW_FIG5_TRY(pw_buffer_release(f->c, prev), "release");
  *cpu_ns = (double)(pw_fig5_thread_ns() - c0);
  *wall_ns = (double)(pw_bench_now_ns() - w0);
  return 0;
}

typedef struct pw_fig5_row_s {
  uint32_t devices;
  int mode;
  bool host;
  double op_ns, wall_op_ns;
} pw_fig5_row_t;

/* Runs every mode on both runtimes of |f| (host launch, per-device
 * launch), a warm-up and then |reps| reps, interleaved: each rep runs
 * every (launch, mode) once before the next rep. Medians into |rows|
 * (launch-major, then mode). |cpu| and |wall| hold 2 x modes x reps. */
static int pw_fig5_measure(pw_fig5_t f[2], long long reps, double* cpu, double* wall,
                           pw_fig5_row_t* rows) {
  for (long long r = -1; r < reps; ++r) {
    for (int h = 0; h < 2; ++h) {
      for (int m = 0; m < PW_FIG5_MODES; ++m) {
        uint64_t ops = 0;
        double c, w;
        if (pw_fig5_run(&f[h], m, &c, &w, &ops) != 0) return -1;
        if (r < 0) continue; /* warm-up */
        size_t at = ((size_t)h * PW_FIG5_MODES + (size_t)m) * (size_t)reps + (size_t)r;
        cpu[at] = c / (double)ops;
        wall[at] = w / (double)ops;
      }
    }
  }
  for (int h = 0; h < 2; ++h) {
    for (int m = 0; m < PW_FIG5_MODES; ++m) {
      size_t k = (size_t)h * PW_FIG5_MODES + (size_t)m;
      rows[k].devices = f[h].cfg.devices;
      rows[k].mode = m;
      rows[k].host = f[h].cfg.host_launch;
      rows[k].op_ns = pw_bench_median(&cpu[k * (size_t)reps], (size_t)reps);
      rows[k].wall_op_ns = pw_bench_median(&wall[k * (size_t)reps], (size_t)reps);
    }
  }
  return 0;
}

/* The sim saw what the runs asked for: every launch of every device, and
 * host launches exactly when they were on. */
static int pw_fig5_check(pw_fig5_t* f, long long reps) {
  pw_sim_stats_t stats = {.struct_size = sizeof(pw_sim_stats_t)};
  if (f->cfg.noop) {
    pw_double_backend_t* d = pw_double_backend_from(&f->backend);
    stats.events = pw_double_backend_total_launches(d);
    stats.host_launches = pw_double_backend_total_host_launches(d);
  } else {
    PW_FIG5_TRY(pw_sim_backend_stats(f->backend, &stats), "sim stats");
  }
  uint64_t per_rep = 4 * (uint64_t)f->cfg.computations + 1; /* opbyop + chained + fused */
  uint64_t want = per_rep * (uint64_t)(reps + 1) * f->cfg.devices;
  uint64_t hosts = f->cfg.devices / f->cfg.per_host;
  uint64_t want_host = f->cfg.host_launch && f->cfg.per_host > 1 ? want / f->cfg.per_host : 0;
  if (stats.events != want || stats.failed != 0 || stats.host_launches != want_host) {
    fprintf(stderr, "pw-bench fig5: the simulation disagrees at %u devices (%llu hosts): %llu "
                    "launches (expected %llu), %llu failed, %llu host launches (expected "
                    "%llu)\n",
            f->cfg.devices, (unsigned long long)hosts, (unsigned long long)stats.events,
            (unsigned long long)want, (unsigned long long)stats.failed,
            (unsigned long long)stats.host_launches, (unsigned long long)want_host);
    return -1;
  }
  return 0;
}

static const char* pw_fig5_backend = "sim";

static void pw_fig5_print(const pw_fig5_row_t* r, uint32_t per_host, uint32_t computations) {
  uint32_t hosts = r->devices / per_host;
  double per_comp = r->mode == PW_FIG5_FUSED ? r->op_ns / computations : r->op_ns / 2;
  fprintf(stderr, "%-8s %6s %8u %6u %14.0f %14.0f %12.1f %12.2f %14.1f\n",
          pw_fig5_mode_names[r->mode], r->host ? "host" : "device", r->devices, hosts, r->op_ns,
          r->wall_op_ns, r->op_ns / hosts, r->op_ns / r->devices, per_comp);
  pw_bench_json_t j;
  pw_bench_json_begin(&j, "fig5");
  pw_bench_json_str(&j, "backend", pw_fig5_backend);
  pw_bench_json_str(&j, "mode", pw_fig5_mode_names[r->mode]);
  pw_bench_json_str(&j, "launch", r->host ? "host" : "device");
  pw_bench_json_int(&j, "devices", r->devices);
  pw_bench_json_int(&j, "hosts", hosts);
  pw_bench_json_num(&j, "ns_per_gang_op", r->op_ns);
  pw_bench_json_num(&j, "wall_ns_per_gang_op", r->wall_op_ns);
  pw_bench_json_num(&j, "ns_per_gang_op_per_host", r->op_ns / hosts);
  pw_bench_json_num(&j, "ns_per_gang_op_per_device", r->op_ns / r->devices);
  pw_bench_json_num(&j, "ns_per_computation", per_comp);
  pw_bench_json_end(&j);
}

/* Per mode and launch kind: ns per gang op and host at the smallest and
 * the largest size and their ratio (growth: the controller's work per
 * host as the fleet grows), the spread over all sizes (max / min), and
 * host vs device launch at the largest size. */
static void pw_fig5_summary(const pw_fig5_row_t* rows, size_t n, uint32_t per_host) {
  for (int m = 0; m < PW_FIG5_MODES; ++m) {
    for (int h = 1; h >= 0; --h) {
      double lo = 0, hi = 0, first = 0, last = 0, last_other = 0;
      uint32_t last_d = 0;
      for (size_t k = 0; k < n; ++k) {
        const pw_fig5_row_t* r = &rows[k];
        if (r->mode != m) continue;
        if (r->host != (h == 1)) {
          last_other = r->op_ns;
          continue;
        }
        double v = r->op_ns / (r->devices / per_host);
        if (lo == 0 || v < lo) lo = v;
        if (v > hi) hi = v;
        if (first == 0) first = v;
        last = r->op_ns;
        last_d = r->devices;
      }
      double last_per_host = last / (last_d / per_host);
      fprintf(stderr, "%-8s %6s: ns per gang op and host %.1f at %u devices, %.1f at %u: "
                      "growth %.2f, spread %.2f; %s/%s at %u %.3f\n",
              pw_fig5_mode_names[m], h ? "host" : "device", first, rows[0].devices,
              last_per_host, last_d, last_per_host / first, hi / lo, h ? "host" : "device",
              h ? "device" : "host", last_d, last / last_other);
      pw_bench_json_t j;
      pw_bench_json_begin(&j, "fig5-summary");
      pw_bench_json_str(&j, "backend", pw_fig5_backend);
      pw_bench_json_str(&j, "mode", pw_fig5_mode_names[m]);
      pw_bench_json_str(&j, "launch", h ? "host" : "device");
      pw_bench_json_num(&j, "per_host_smallest_ns", first);
      pw_bench_json_num(&j, "per_host_largest_ns", last_per_host);
      pw_bench_json_num(&j, "per_host_growth", last_per_host / first);
      pw_bench_json_num(&j, "per_host_spread", hi / lo);
      pw_bench_json_num(&j, "vs_other_launch_at_largest", last / last_other);
      pw_bench_json_end(&j);
    }
  }
}

static int pw_bench_fig5_main(int argc, char** argv) {
  long long min_d = pw_bench_opt_int(argc, argv, "min-devices", 8);
  long long max_d = pw_bench_opt_int(argc, argv, "max-devices", 16384);
  long long step = pw_bench_opt_int(argc, argv, "step", 4);
  long long per_host = pw_bench_opt_int(argc, argv, "devices-per-host", 8);
  long long comps = pw_bench_opt_int(argc, argv, "computations", 128);
  long long reps = pw_bench_opt_int(argc, argv, "reps", 5);
  long long kernel = pw_bench_opt_int(argc, argv, "kernel-ns", 100);
  const char* backend = pw_bench_opt_value(argc, argv, "backend");
  if (backend == NULL) backend = "sim";
  if (strcmp(backend, "sim") != 0 && strcmp(backend, "noop") != 0) {
    fprintf(stderr, "pw-bench fig5: --backend is sim or noop, not '%s'\n", backend);
    return 2;
  }
  pw_fig5_backend = backend;
  if (per_host < 1 || min_d < per_host || max_d < min_d || max_d > PW_SIM_MAX_DEVICES ||
      step < 2 || comps < 1 || comps > 4096 || reps < 1 || reps > 1000 || kernel < 1 ||
      min_d % per_host != 0) {
    fprintf(stderr, "pw-bench fig5: need 1 <= --devices-per-host <= --min-devices <= "
                    "--max-devices <= %u, --min-devices a multiple of --devices-per-host, "
                    "--step >= 2, 1 <= --computations <= 4096, 1 <= --reps <= 1000, "
                    "--kernel-ns >= 1\n",
            PW_SIM_MAX_DEVICES);
    return 2;
  }
  pw_bench_pin(0);
  /* Sizes: min, min x step, ..., and max itself. */
  size_t sizes = 1;
  for (long long d = min_d; d < max_d; d = d * step < max_d ? d * step : max_d) sizes++;
  pw_fig5_row_t* rows = calloc(sizes * 2 * PW_FIG5_MODES, sizeof(*rows));
  double* cpu = calloc((size_t)reps * 2 * PW_FIG5_MODES, sizeof(double));
  double* wall = calloc((size_t)reps * 2 * PW_FIG5_MODES, sizeof(double));
  if (rows == NULL || cpu == NULL || wall == NULL) return 1;
  fprintf(stderr, "%-8s %6s %8s %6s %14s %14s %12s %12s %14s\n", "mode", "launch", "devices",
          "hosts", "ns/gang_op", "wall_ns/op", "ns/op/host", "ns/op/device", "ns/computation");
  size_t n = 0;
  int rc = 0;
  for (long long d = min_d, last = 0; rc == 0 && !last; d = d * step < max_d ? d * step : max_d) {
    last = d == max_d;
    /* Host launch [0] and per-device launch [1], each on a fresh runtime. */
    pw_fig5_t f[2];
    memset(f, 0, sizeof(f));
    for (int h = 0; h < 2 && rc == 0; ++h) {
      pw_fig5_cfg_t cfg = {(uint32_t)d, (uint32_t)per_host, (uint32_t)comps, (uint64_t)kernel,
                           h == 0, strcmp(backend, "noop") == 0};
      rc = pw_fig5_open(&cfg, &f[h]);
    }
    if (rc == 0) rc = pw_fig5_measure(f, reps, cpu, wall, &rows[n]);
    for (int h = 0; h < 2 && rc == 0; ++h) rc = pw_fig5_check(&f[h], reps);
    for (int h = 0; h < 2; ++h) {
      if (pw_fig5_close(&f[h]) != 0) rc = -1;
    }
    for (size_t k = n; rc == 0 && k < n + 2 * PW_FIG5_MODES; ++k) {
      pw_fig5_print(&rows[k], (uint32_t)per_host, (uint32_t)comps);
    }
    n += 2 * PW_FIG5_MODES;
  }
  if (rc == 0) pw_fig5_summary(rows, n, (uint32_t)per_host);
  free(rows);
  free(cpu);
  free(wall);
  return rc == 0 ? 0 : 1;
}

PW_BENCH_SUITE(fig5, "fig5",
               "the Pathways paper's Fig. 5: controller time per gang op, 8..16,384 sim devices, "
               "host launch vs per-device launch",
               pw_bench_fig5_main)
