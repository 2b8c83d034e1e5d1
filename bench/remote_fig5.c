/* pw-bench remote, part 5: the Pathways paper's Fig. 5 across processes.
 * The computation is `pw-bench fig5`'s (fig5_graph.h: a scalar
 * all_reduce_sum and an add per computation, --computations of them
 * fused into one gang op of the sim), here once per slice of 8 sim chips:
 *   workers  W pathways-worker processes (--backend sim --devices 8, queue
 *            depth 8), one slice each, W in --fig5-workers (1, 2, 4);
 *   flat     one sim backend in this process with the same W slices of 8
 *            chips (8 x W devices, 8 per host, queue depth 8: the
 *            worker's options).
 * One run submits one graph (per slice: parameter -> fused -> output) and
 * waits for it; figures, medians over --reps: wall time per run and fused
 * computations per second (computations x W / wall). The sim's chips take
 * virtual time, so this is dispatch: the controller, the wire and the
 * workers' launches, against the same dispatch in one process. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_try.h"
#include "bench_util.h"
#include "fig5_graph.h"
#include "pathways/backends/sim.h"
#include "pathways/pathways.h"
#include "remote_bench.h"
#include "remote_fleet.h"

#define PW_RF_TRY(expr, what) PW_BENCH_TRY("remote", (expr), (what))
#define PW_RF_DEVICES 8u

typedef struct pw_rf_side_s {
  pw_runtime_t* rt;
  pw_client_t* c;
  uint32_t slices;
  pw_vslice_t vs[PW_RFLEET_MAX];
  pw_fig5_exes_t exes[PW_RFLEET_MAX];
  pw_buffer_t seeds[PW_RFLEET_MAX];
  pw_graph_t g;
} pw_rf_side_t;

static int pw_rf_open(pw_runtime_t* rt, uint32_t slices, uint32_t computations,
                      pw_rf_side_t* x) {
  memset(x, 0, sizeof(*x));
  x->rt = rt;
  x->slices = slices;
  PW_RF_TRY(pw_client_create(rt, NULL, &x->c), "client");
  uint32_t d = PW_RF_DEVICES;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &d);
  pw_array_spec_t spec = pw_fig5_spec(PW_RF_DEVICES);
  PW_RF_TRY(pw_graph_create(x->c, &x->g), "graph");
  float zeros[PW_RF_DEVICES] = {0};
  for (uint32_t k = 0; k < slices; ++k) {
    PW_RF_TRY(pw_vslice_create(x->c, &mesh, PW_VSLICE_DEFAULT, &x->vs[k]), "vslice");
    if (pw_fig5_compile_all("remote", x->c, x->vs[k], false, PW_RF_DEVICES, 100, computations,
                            &x->exes[k]) != 0) {
      return -1;
    }
    uint32_t node;
    PW_RF_TRY(pw_graph_add_parameter(x->c, x->g, x->vs[k], &spec, &node), "parameter");
    if (pw_fig5_add_chain("remote", x->c, x->g, x->vs[k], &x->exes[k], 1, true, node, &node) !=
        0) {
      return -1;
    }
    PW_RF_TRY(pw_graph_add_output(x->c, x->g, pw_value(node, 0)), "output");
    PW_RF_TRY(pw_buffer_from_host(x->c, x->vs[k], &spec, zeros, sizeof(zeros), &x->seeds[k]),
              "seed");
  }
  PW_RF_TRY(pw_graph_finalize(x->c, x->g), "finalize");
  return 0;
}

static int pw_rf_run(pw_rf_side_t* x, double* out_ns) {
  pw_buffer_t outs[PW_RFLEET_MAX];
  pw_event_t* done = NULL;
  int64_t t0 = pw_bench_now_ns();
  PW_RF_TRY(pw_graph_submit(x->c, x->g, x->seeds, x->slices, NULL, outs, x->slices, &done),
            "submit");
  pw_status_t st = pw_event_wait(done, pw_clock_now() + 60 * (pw_time_t)1000000000);
  *out_ns = (double)(pw_bench_now_ns() - t0);
  pw_event_release(done);
  PW_RF_TRY(st, "fused run");
  for (uint32_t k = 0; k < x->slices; ++k) PW_RF_TRY(pw_buffer_release(x->c, outs[k]), "release");
  return 0;
}

static int pw_rf_close(pw_rf_side_t* x) {
  int rc = 0;
  if (x->c != NULL) {
    for (uint32_t k = 0; k < x->slices; ++k) {
      if (x->seeds[k].id != 0 &&
          pw_bench_failed("remote", "release", pw_buffer_release(x->c, x->seeds[k]))) {
        rc = -1;
      }
      if (pw_fig5_release_all("remote", x->c, &x->exes[k]) != 0) rc = -1;
    }
    if (x->g.id != 0 && pw_bench_failed("remote", "release", pw_graph_release(x->c, x->g))) {
      rc = -1;
    }
    if (pw_bench_failed("remote", "client", pw_client_destroy(x->c))) rc = -1;
  }
  if (x->rt != NULL && pw_bench_failed("remote", "runtime", pw_runtime_destroy(x->rt))) rc = -1;
  memset(x, 0, sizeof(*x));
  return rc;
}

/* Flat [0] and workers [1] for W workers; medians into |med|. */
static int pw_rf_pair(const pw_rbench_opts_t* o, uint32_t workers, double med[2]) {
  pw_rf_side_t x[2];
  memset(x, 0, sizeof(x));
  pw_rfleet_t fleet;
  pw_rfleet_cfg_t cfg = {.worker = o->worker, .backend = "sim", .workers = workers,
                         .devices = PW_RF_DEVICES, .stream_depth = 8};
  if (pw_rfleet_start(&cfg, &fleet) != 0) return -1;
  pw_sim_backend_options_t so;
  pw_sim_backend_options_init(&so);
  so.slice_count = workers;
  so.devices_per_slice = PW_RF_DEVICES;
  so.device_memory_bytes = (uint64_t)1024 << 20;
  so.queue_depth = 8;
  pw_backend_t sim;
  pw_runtime_t* rt = NULL;
  int rc = 0;
  if (pw_bench_failed("remote", "sim backend", pw_sim_backend_create(&so, &sim)) ||
      pw_rfleet_local_runtime(sim, workers, PW_RF_DEVICES, &rt) != 0 ||
      pw_rf_open(rt, workers, o->computations, &x[0]) != 0) {
    rc = -1;
  }
  rt = NULL;
  if (rc == 0 && (pw_rfleet_runtime(&fleet, 0, &rt) != 0 ||
                  pw_rf_open(rt, workers, o->computations, &x[1]) != 0)) {
    rc = -1;
  }
  double* t = calloc(2 * (size_t)o->reps, sizeof(double));
  if (t == NULL) rc = -1;
  for (int64_t r = -1; rc == 0 && r < (int64_t)o->reps; ++r) {
    for (int k = 0; rc == 0 && k < 2; ++k) {
      int side = (r & 1) ? 1 - k : k;
      double ns = 0;
      rc = pw_rf_run(&x[side], &ns);
      if (r >= 0) t[(size_t)side * o->reps + (size_t)r] = ns;
    }
  }
  if (rc == 0) {
    med[0] = pw_rbench_median(t, o->reps);
    med[1] = pw_rbench_median(t + o->reps, o->reps);
  }
  free(t);
  if (pw_rf_close(&x[1]) != 0) rc = -1;
  pw_rfleet_stop(&fleet);
  if (pw_rf_close(&x[0]) != 0) rc = -1;
  return rc;
}

int pw_rbench_fig5(const pw_rbench_opts_t* o) {
  static const char* const where[2] = {"flat", "workers"};
  for (uint32_t i = 0; i < o->fig5_count; ++i) {
    uint32_t w = o->fig5_workers[i];
    double med[2];
    if (pw_rf_pair(o, w, med) != 0) return -1;
    for (int k = 0; k < 2; ++k) {
      double per_s = (double)o->computations * w / (med[k] / 1e9);
      fprintf(stderr, "fig5     sim %-10s %u x 8 devices: %8.1f us per run, %10.0f fused "
                      "computations/s\n",
              where[k], w, med[k] / 1e3, per_s);
      pw_bench_json_t j;
      pw_bench_json_begin(&j, "remote-fig5");
      pw_bench_json_str(&j, "backend", "sim");
      pw_bench_json_str(&j, "where", where[k]);
      pw_bench_json_str(&j, "mode", "fused");
      pw_bench_json_int(&j, "reps", o->reps);
      pw_bench_json_num(&j, "load", o->load_start);
      pw_bench_json_int(&j, "workers", w);
      pw_bench_json_int(&j, "devices", 8 * w);
      pw_bench_json_int(&j, "computations", o->computations);
      pw_bench_json_num(&j, "us_per_run", med[k] / 1e3);
      pw_bench_json_num(&j, "computations_per_s", per_s);
      if (k == 1) pw_bench_json_num(&j, "vs_flat", med[0] / med[1]);
      pw_bench_json_end(&j);
    }
    fprintf(stderr, "fig5     sim workers / flat computations/s at %u workers: %.3f\n", w,
            med[0] / med[1]);
  }
  return 0;
}
