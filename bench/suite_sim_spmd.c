/* pw-bench sim-spmd: dispatch of SPMD steps over a simulated fleet.
 *
 * A runtime over the sim backend (INLINE delivery, VIRTUAL memory) with
 * |slices| slices of |devices| chips; one client with a virtual slice per
 * physical slice; one step graph per slice: a single compute op on every
 * chip of the slice (1 ms of virtual time, no parameters). The timed loop
 * submits every slice's step graph, |steps| times; with INLINE delivery
 * each submission is dispatched, launched on every chip, completed and
 * retired before it returns, so the wall time covers the whole path: the
 * slice-sequence append, the per-chip cursor advance and launch, the
 * backend's launch (timeline, trace chain, done), the per-op completion
 * count, and the execution's retirement.
 *
 * Figures (JSON line "bench":"sim-spmd"; medians over --reps runs):
 *   launches     chip launches per run (slices * devices * steps)
 *   ns_per_launch  wall time of the timed loop / launches
 *   baseline_ns  the floor measured in the same run over as many devices:
 *                per device one atomic decrement (an op's remaining count)
 *                and one store (its cursor), per device and step
 *   ratio        ns_per_launch / baseline_ns
 * --span K places each step on a virtual slice spanning K consecutive
 * slices (slices must be a multiple of K): one op of K * devices chips,
 * appended to K slice sequences at once; the launch count is unchanged.
 * --backend noop runs the same loop over the test double's no-op backend
 * (completes inline, keeps only a launch count), which separates the
 * dispatcher's share from the sim's. A table with every run goes to stderr. Setup (backend, runtime,
 * compile, graphs) and a warm-up step are not timed; the virtual clock and
 * event count are checked after the runs. Build with the release preset
 * for figures worth quoting.
 *
 * --queued DEPTH makes the sim devices queue-ordered (queue_depth): the
 * runtime launches through its queued path and the sim keeps each
 * device's launches in queue order. It runs INLINE, like the default, so
 * the two compare the host's cost per launch like for like.
 * --dispatch-latency NS sets the sim's dispatch latency, which only
 * means something when the host acts at the virtual time of the
 * completion it reacts to: it runs the sim in MANUAL mode, where the
 * timed loop submits everything and steps the simulation to the end
 * (run_all), and ns_per_launch covers both. --mode inline|manual
 * overrides the choice (manual with --queued and no latency isolates the
 * cost of MANUAL delivery). device_utilisation (every mode) is the
 * devices' busy virtual time over devices x the virtual span
 * (pw_sim_stats_t v2). INLINE's host is infinitely fast in virtual time
 * (no op ever waits for it), so there it is 1 by construction, queued or
 * not; it shows what the dispatch protocol costs the devices only with a
 * dispatch latency: with one launch at a time each op waits for the
 * host's reaction plus the latency, with a runtime that launches ahead
 * into queued devices they run back to back. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "cts/double_backend.h"
#include "pathways/backends/sim.h"
#include "pathways/pathways.h"
#include "suites.h"

typedef struct pw_spmd_t {
  pw_runtime_t* runtime;
  pw_client_t* client;
  pw_backend_t backend; /* owned by the runtime */
  pw_executable_t executable;
  pw_graph_t* graphs;
  uint32_t slices;
  uint32_t devices;
  uint32_t span;   /* slices per step op (--span) */
  uint32_t groups; /* slices / span: one step graph each */
  bool noop; /* --backend noop: the test double's no-op backend instead */
  uint32_t queued;  /* --queued: sim queue_depth */
  uint64_t latency; /* --dispatch-latency: sim dispatch_latency_ns */
  bool manual;      /* either: MANUAL delivery, stepped by the loop */
} pw_spmd_t;

static void pw_spmd_check(pw_status_t status, const char* what) {
  if (status == NULL) return;
  fprintf(stderr, "pw-bench sim-spmd: %s failed: %s\n", what, pw_status_message(status));
  pw_status_free(status);
  exit(1);
}

static void pw_spmd_setup(pw_spmd_t* b) {
  if (b->noop) {
    pw_double_options_t d;
    pw_double_options_init(&d);
    d.device_count = b->slices * b->devices;
    d.no_op = true;
    pw_spmd_check(pw_double_backend_create(&d, &b->backend), "no-op backend");
  } else {
    pw_sim_backend_options_t o;
    pw_sim_backend_options_init(&o);
    o.slice_count = b->slices;
    o.devices_per_slice = b->devices;
    o.mode = b->manual ? PW_SIM_MODE_MANUAL : PW_SIM_MODE_INLINE;
    o.memory = PW_SIM_MEMORY_VIRTUAL;
    o.queue_depth = b->queued;
    o.dispatch_latency_ns = b->latency;
    pw_spmd_check(pw_sim_backend_create(&o, &b->backend), "sim backend");
  }
  pw_slice_desc_t* descs = calloc(b->slices, sizeof(*descs));
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &b->devices);
  for (uint32_t s = 0; s < b->slices; ++s) {
    descs[s].mesh = mesh;
    descs[s].first_device = s * b->devices;
    descs[s].host = s;
  }
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &b->backend;
  ro.backend_count = 1;
  ro.slices = descs;
  ro.slice_count = b->slices;
  pw_spmd_check(pw_runtime_create(&ro, &b->runtime), "runtime");
  free(descs);
  pw_spmd_check(pw_client_create(b->runtime, NULL, &b->client), "client");
  b->groups = b->slices / b->span;
  pw_vslice_t* vslices = calloc(b->groups, sizeof(*vslices));
  uint32_t* members = calloc(b->span, sizeof(uint32_t));
  for (uint32_t s = 0; s < b->groups; ++s) {
    if (b->span == 1) {
      pw_spmd_check(pw_vslice_create(b->client, &mesh, PW_VSLICE_DEFAULT, &vslices[s]),
                    "vslice");
      continue;
    }
    for (uint32_t k = 0; k < b->span; ++k) members[k] = s * b->span + k;
    pw_vslice_span_t span;
    memset(&span, 0, sizeof(span));
    span.struct_size = sizeof(span);
    uint32_t chips = b->span * b->devices;
    span.mesh = pw_mesh_shape_make(1, &chips);
    span.slice_count = b->span;
    span.slices = members;
    pw_spmd_check(pw_vslice_create_spanning(b->client, &span, &vslices[s]), "spanning vslice");
  }
  free(members);
  static const char sim_program[] = "op spmd_step\ntime 1ms\n";
  static const char noop_program[] = "noop\n";
  const char* program = b->noop ? noop_program : sim_program;
  pw_spmd_check(pw_executable_compile(b->client, vslices[0], program, strlen(program), NULL,
                                      &b->executable),
                "compile");
  b->graphs = calloc(b->groups, sizeof(*b->graphs));
  for (uint32_t s = 0; s < b->groups; ++s) {
    pw_spmd_check(pw_graph_create(b->client, &b->graphs[s]), "graph");
    pw_spmd_check(pw_graph_add_compute(b->client, b->graphs[s], "step", b->executable,
                                       vslices[s], NULL, 0, NULL),
                  "graph node");
    pw_spmd_check(pw_graph_finalize(b->client, b->graphs[s]), "finalize");
    pw_spmd_check(pw_vslice_release(b->client, vslices[s]), "vslice release");
  }
  free(vslices);
}

static void pw_spmd_teardown(pw_spmd_t* b) {
  for (uint32_t s = 0; s < b->groups; ++s) {
    pw_spmd_check(pw_graph_release(b->client, b->graphs[s]), "graph release");
  }
  pw_spmd_check(pw_executable_release(b->client, b->executable), "executable release");
  free(b->graphs);
  pw_client_destroy(b->client);
  pw_runtime_destroy(b->runtime);
}

/* Submits every slice's step |steps| times; returns the wall time in ns. */
static int64_t pw_spmd_run(pw_spmd_t* b, long long steps) {
  int64_t t0 = pw_bench_now_ns();
  for (long long i = 0; i < steps; ++i) {
    for (uint32_t s = 0; s < b->groups; ++s) {
      pw_spmd_check(pw_graph_submit(b->client, b->graphs[s], NULL, 0, NULL, NULL, 0, NULL),
                    "submit");
    }
  }
  if (b->manual) pw_spmd_check(pw_sim_backend_run_all(b->backend, NULL), "sim run_all");
  return pw_bench_now_ns() - t0;
}

/* The floor: per device and step, one atomic decrement of its op's
 * remaining count and one store of its cursor. */
typedef struct pw_spmd_baseline_t {
  _Atomic uint32_t* remaining;   /* one per slice */
  _Atomic uintptr_t* cursors;    /* one per device */
} pw_spmd_baseline_t;

static int64_t pw_spmd_baseline(pw_spmd_baseline_t* z, uint32_t slices, uint32_t devices,
                                long long steps) {
  int64_t t0 = pw_bench_now_ns();
  for (long long i = 0; i < steps; ++i) {
    for (uint32_t s = 0; s < slices; ++s) {
      atomic_store_explicit(&z->remaining[s], devices, memory_order_relaxed);
      _Atomic uintptr_t* cursors = &z->cursors[(size_t)s * devices];
      for (uint32_t d = 0; d < devices; ++d) {
        atomic_fetch_sub_explicit(&z->remaining[s], 1, memory_order_acq_rel);
        atomic_store_explicit(&cursors[d], (uintptr_t)i, memory_order_release);
      }
    }
  }
  return pw_bench_now_ns() - t0;
}

static int pw_bench_sim_spmd_main(int argc, char** argv) {
  pw_spmd_t b;
  memset(&b, 0, sizeof(b));
  b.slices = (uint32_t)pw_bench_opt_int(argc, argv, "slices", 64);
  b.devices = (uint32_t)pw_bench_opt_int(argc, argv, "devices", 256);
  long long span = pw_bench_opt_int(argc, argv, "span", 1);
  long long steps = pw_bench_opt_int(argc, argv, "steps", 50);
  long long reps = pw_bench_opt_int(argc, argv, "reps", 5);
  long long queued = pw_bench_opt_int(argc, argv, "queued", 0);
  long long latency = pw_bench_opt_int(argc, argv, "dispatch-latency", 0);
  const char* backend = "sim";
  const char* mode = pw_bench_opt_value(argc, argv, "mode");
  for (int i = 0; i + 1 < argc; ++i) {
    if (strcmp(argv[i], "--backend") == 0) backend = argv[i + 1];
    if (strncmp(argv[i], "--backend=", 10) == 0) backend = argv[i] + 10;
  }
  if (argc > 0 && strncmp(argv[argc - 1], "--backend=", 10) == 0) backend = argv[argc - 1] + 10;
  if (strcmp(backend, "sim") != 0 && strcmp(backend, "noop") != 0) {
    fprintf(stderr, "pw-bench sim-spmd: --backend is sim or noop, not '%s'\n", backend);
    return 2;
  }
  b.noop = strcmp(backend, "noop") == 0;
  if (queued < 0 || queued > PW_BACKEND_MAX_QUEUE_DEPTH || latency < 0 ||
      (b.noop && (queued > 0 || latency > 0))) {
    fprintf(stderr, "pw-bench sim-spmd: --queued is 0..%u and --dispatch-latency >= 0, both "
                    "for --backend sim only\n",
            (unsigned)PW_BACKEND_MAX_QUEUE_DEPTH);
    return 2;
  }
  b.queued = (uint32_t)queued;
  b.latency = (uint64_t)latency;
  b.manual = latency > 0;
  if (mode != NULL && strcmp(mode, "inline") != 0 && strcmp(mode, "manual") != 0) {
    fprintf(stderr, "pw-bench sim-spmd: --mode is inline or manual, not '%s'\n", mode);
    return 2;
  }
  if (mode != NULL) b.manual = strcmp(mode, "manual") == 0;
  if (b.noop && b.manual) {
    fprintf(stderr, "pw-bench sim-spmd: --mode manual is for --backend sim only\n");
    return 2;
  }
  if (b.slices == 0 || b.devices == 0 || steps == 0 || reps == 0 || span < 1 ||
      b.slices % (uint32_t)span != 0 ||
      (uint64_t)b.slices * b.devices > PW_SIM_MAX_DEVICES) {
    fprintf(stderr, "pw-bench sim-spmd: --slices, --devices, --steps, --reps and --span must "
                    "be >= 1, --span must divide --slices, and slices x devices <= %u\n",
            PW_SIM_MAX_DEVICES);
    return 2;
  }
  b.span = (uint32_t)span;
  pw_bench_pin(0);
  pw_spmd_setup(&b);
  pw_spmd_run(&b, 1); /* warm-up: pages, caches, the first appends */
  size_t total = (size_t)b.slices * b.devices;
  pw_spmd_baseline_t z;
  z.remaining = calloc(b.slices, sizeof(*z.remaining));
  z.cursors = calloc(total, sizeof(*z.cursors));
  pw_spmd_baseline(&z, b.slices, b.devices, 1);
  double launches = (double)total * (double)steps;
  double* ns = calloc((size_t)reps, sizeof(double));
  double* base = calloc((size_t)reps, sizeof(double));
  fprintf(stderr, "%-6s %8s %8s %12s %14s %12s %8s\n", "run", "slices", "devices", "launches",
          "ns_per_launch", "baseline_ns", "ratio");
  for (long long r = 0; r < reps; ++r) {
    ns[r] = (double)pw_spmd_run(&b, steps) / launches;
    base[r] = (double)pw_spmd_baseline(&z, b.slices, b.devices, steps) / launches;
    fprintf(stderr, "%-6lld %8u %8u %12.0f %14.2f %12.2f %8.2f\n", r + 1, b.slices, b.devices,
            launches, ns[r], base[r], ns[r] / base[r]);
  }
  pw_sim_stats_t stats = {.struct_size = sizeof(pw_sim_stats_t)};
  uint64_t want_events = (uint64_t)total * (uint64_t)(steps * reps + 1);
  uint64_t want_clock = (uint64_t)(steps * reps + 1) * 1000000u;
  uint64_t want_busy = want_events * 1000000u;
  if (b.noop) {
    stats.events = pw_double_backend_total_launches(pw_double_backend_from(&b.backend));
    stats.clock = want_clock;
    stats.busy_ns = want_busy;
    stats.span_end = want_clock;
  } else {
    pw_spmd_check(pw_sim_backend_stats(b.backend, &stats), "sim stats");
  }
  /* Every chip ran every step for 1 ms; the clock is that only when
   * nothing waits between steps (INLINE's infinitely fast host). */
  if (stats.events != want_events || stats.failed != 0 || stats.busy_ns != want_busy ||
      (!b.manual && stats.clock != want_clock)) {
    fprintf(stderr, "pw-bench sim-spmd: the simulation disagrees: %llu events (expected %llu), "
                    "%llu failed, busy %llu ns (expected %llu), clock %llu ns (expected %llu)\n",
            (unsigned long long)stats.events, (unsigned long long)want_events,
            (unsigned long long)stats.failed, (unsigned long long)stats.busy_ns,
            (unsigned long long)want_busy, (unsigned long long)stats.clock,
            (unsigned long long)want_clock);
    return 1;
  }
  uint64_t vspan = stats.span_end - stats.span_start;
  double utilisation = vspan > 0 ? (double)stats.busy_ns / ((double)total * (double)vspan) : 0;
  fprintf(stderr, "device utilisation %.4f (busy %llu ns over %zu devices x span %llu ns; %s, "
                  "queue depth %u, dispatch latency %llu ns)\n",
          utilisation, (unsigned long long)stats.busy_ns, total, (unsigned long long)vspan,
          b.manual ? "MANUAL" : "INLINE", b.queued, (unsigned long long)b.latency);
  double median = pw_bench_median(ns, (size_t)reps);
  double median_base = pw_bench_median(base, (size_t)reps);
  fprintf(stderr, "%-6s %8u %8u %12.0f %14.2f %12.2f %8.2f\n", "median", b.slices, b.devices,
          launches, median, median_base, median / median_base);
  pw_bench_json_t j;
  pw_bench_json_begin(&j, "sim-spmd");
  pw_bench_json_str(&j, "backend", backend);
  pw_bench_json_int(&j, "slices", b.slices);
  pw_bench_json_int(&j, "devices", b.devices);
  pw_bench_json_int(&j, "span", b.span);
  pw_bench_json_int(&j, "steps", steps);
  pw_bench_json_int(&j, "reps", reps);
  pw_bench_json_int(&j, "launches", (long long)launches);
  pw_bench_json_num(&j, "ns_per_launch", median);
  pw_bench_json_num(&j, "baseline_ns", median_base);
  pw_bench_json_num(&j, "ratio", median / median_base);
  pw_bench_json_int(&j, "virtual_clock_ns", (long long)stats.clock);
  pw_bench_json_int(&j, "queued", b.queued);
  pw_bench_json_int(&j, "dispatch_latency_ns", (long long)b.latency);
  pw_bench_json_str(&j, "delivery", b.noop ? "noop" : b.manual ? "manual" : "inline");
  pw_bench_json_num(&j, "device_utilisation", utilisation);
  pw_bench_json_end(&j);
  free(ns);
  free(base);
  free(z.remaining);
  free(z.cursors);
  pw_spmd_teardown(&b);
  return 0;
}

PW_BENCH_SUITE(sim_spmd, "sim-spmd",
               "SPMD steps dispatched over a simulated fleet (ns per device launch)",
               pw_bench_sim_spmd_main)
