/* pw-bench remote, part 3: a cross-host transfer. A graph of one transfer
 * node (parameter on slice 0 -> transfer to slice 1 -> output) moves an
 * f32 array of --sizes-mib between two one-device CPU slices:
 *   workers     slices on two pathways-worker processes: the controller
 *               sends COPY to both, the bytes go worker to worker on
 *               their UCX data plane (lib/ucx), both answer DONE;
 *   ucx         the same bytes between two processes in plain UCX
 *               (remote_ucx.h: a tagged send of a registered buffer into
 *               a registered buffer and an 8-byte ack; the same endpoint
 *               mode and UCX_TLS);
 *   ucx-fresh   the same, received into memory malloc'd for each transfer
 *               (new pages, as the CPU backend's output memory is: on
 *               this VM first-touch faults cost ~10-18 us a page);
 *   in-process  the same graph over one CPU backend of two devices
 *               (a memcpy between its devices), for scale.
 * Time: submit to the done event (workers, in-process), send posted to
 * ack received (ucx). Target: workers within 1.2x of ucx. The graph's
 * output is read back and compared once per size (in the warm-up). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_try.h"
#include "bench_util.h"
#include "pathways/backends/cpu.h"
#include "pathways/pathways.h"
#include "remote_bench.h"
#include "remote_fleet.h"
#include "remote_ucx.h"

#define PW_RX_TRY(expr, what) PW_BENCH_TRY("remote", (expr), (what))
#define PW_RX_S 1000000000LL

typedef struct pw_rx_side_s {
  pw_runtime_t* rt;
  pw_client_t* c;
  pw_vslice_t vs[2];
  pw_graph_t g;
  pw_buffer_t seed;
} pw_rx_side_t;

static int pw_rx_open(pw_runtime_t* rt, pw_rx_side_t* x) {
  memset(x, 0, sizeof(*x));
  x->rt = rt;
  PW_RX_TRY(pw_client_create(rt, NULL, &x->c), "client");
  uint32_t one = 1;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &one);
  for (int k = 0; k < 2; ++k) {
    PW_RX_TRY(pw_vslice_create(x->c, &mesh, PW_VSLICE_DEFAULT, &x->vs[k]), "vslice");
  }
  return 0;
}

/* The graph and its argument for |bytes| (a multiple of 4). */
static int pw_rx_prepare(pw_rx_side_t* x, size_t bytes, const float* host) {
  if (x->g.id != 0) PW_RX_TRY(pw_graph_release(x->c, x->g), "release");
  if (x->seed.id != 0) PW_RX_TRY(pw_buffer_release(x->c, x->seed), "release");
  x->g.id = 0, x->seed.id = 0;
  int64_t n = (int64_t)(bytes / sizeof(float));
  pw_array_spec_t spec = {PW_DTYPE_F32, pw_shape_make(1, &n), pw_sharding_replicated()};
  PW_RX_TRY(pw_graph_create(x->c, &x->g), "graph");
  uint32_t param, moved;
  PW_RX_TRY(pw_graph_add_parameter(x->c, x->g, x->vs[0], &spec, &param), "parameter");
  PW_RX_TRY(pw_graph_add_transfer(x->c, x->g, "move", pw_value(param, 0), x->vs[1],
                                  pw_sharding_replicated(), &moved),
            "transfer");
  PW_RX_TRY(pw_graph_add_output(x->c, x->g, pw_value(moved, 0)), "output");
  PW_RX_TRY(pw_graph_finalize(x->c, x->g), "finalize");
  PW_RX_TRY(pw_buffer_from_host(x->c, x->vs[0], &spec, host, bytes, &x->seed), "upload");
  pw_event_t* ready = NULL;
  PW_RX_TRY(pw_buffer_ready_event(x->c, x->seed, &ready), "ready");
  pw_status_t st = pw_event_wait(ready, pw_clock_now() + 120 * PW_RX_S);
  pw_event_release(ready);
  PW_RX_TRY(st, "upload");
  return 0;
}

/* One transfer; with |check| the output is read back and compared. */
static int pw_rx_run(pw_rx_side_t* x, size_t bytes, const float* host, bool check,
                     double* out_ns) {
  pw_buffer_t out = {0};
  pw_event_t* done = NULL;
  int64_t t0 = pw_bench_now_ns();
  PW_RX_TRY(pw_graph_submit(x->c, x->g, &x->seed, 1, NULL, &out, 1, &done), "submit");
  pw_status_t st = pw_event_wait(done, pw_clock_now() + 120 * PW_RX_S);
  *out_ns = (double)(pw_bench_now_ns() - t0);
  pw_event_release(done);
  PW_RX_TRY(st, "transfer");
  int rc = 0;
  if (check) {
    float* back = malloc(bytes);
    if (back == NULL) return -1;
    pw_status_t rs = pw_buffer_to_host(x->c, out, back, bytes, pw_clock_now() + 120 * PW_RX_S);
    if (pw_bench_failed("remote", "read back", rs)) {
      rc = -1;
    } else if (memcmp(back, host, bytes) != 0) {
      fprintf(stderr, "pw-bench remote: the transferred %zu bytes differ\n", bytes);
      rc = -1;
    }
    free(back);
  }
  PW_RX_TRY(pw_buffer_release(x->c, out), "release");
  return rc;
}

static int pw_rx_close(pw_rx_side_t* x) {
  int rc = 0;
  if (x->c != NULL) {
    if (x->g.id != 0 && pw_bench_failed("remote", "release", pw_graph_release(x->c, x->g))) {
      rc = -1;
    }
    if (x->seed.id != 0 &&
        pw_bench_failed("remote", "release", pw_buffer_release(x->c, x->seed))) {
      rc = -1;
    }
    if (pw_bench_failed("remote", "client", pw_client_destroy(x->c))) rc = -1;
  }
  if (x->rt != NULL && pw_bench_failed("remote", "runtime", pw_runtime_destroy(x->rt))) rc = -1;
  memset(x, 0, sizeof(*x));
  return rc;
}

enum { PW_RX_LOCAL, PW_RX_WORKERS, PW_RX_UCX, PW_RX_UCX_FRESH, PW_RX_KINDS };
static const char* const pw_rx_names[PW_RX_KINDS] = {"in-process", "workers", "ucx",
                                                     "ucx-fresh"};
static const char* const pw_rx_peer[PW_RX_KINDS] = {
    NULL, NULL, "ucp_tag_send_nbx/recv_nbx, registered buffers (memh), 8-byte ack",
    "ucp_tag_send_nbx/recv_nbx, received into a new malloc each time, 8-byte ack"};

/* Every size, reps interleaved over the three kinds (rotating the order). */
static int pw_rx_measure(const pw_rbench_opts_t* o, pw_rx_side_t x[2], pw_rucx_t* u,
                         float* host, double* t) {
  for (uint32_t s = 0; s < o->size_count; ++s) {
    size_t bytes = (size_t)o->sizes_mib[s] << 20;
    for (int k = 0; k < 2; ++k) {
      if (pw_rx_prepare(&x[k], bytes, host) != 0) return -1;
    }
    for (int64_t r = -1; r < (int64_t)o->reps; ++r) {
      for (int i = 0; i < PW_RX_KINDS; ++i) {
        int kind = (int)((i + (r < 0 ? 0 : r)) % PW_RX_KINDS);
        double ns = 0;
        if (kind == PW_RX_UCX || kind == PW_RX_UCX_FRESH) {
          ns = pw_rucx_transfer(u, bytes, kind == PW_RX_UCX_FRESH);
          if (ns < 0) return -1;
        } else if (pw_rx_run(&x[kind], bytes, host, r < 0, &ns) != 0) {
          return -1;
        }
        if (r >= 0) t[((size_t)s * PW_RX_KINDS + (size_t)kind) * o->reps + (size_t)r] = ns;
      }
    }
  }
  return 0;
}

static void pw_rx_print(const pw_rbench_opts_t* o, double* t) {
  const char* tls = getenv("UCX_TLS");
  for (uint32_t s = 0; s < o->size_count; ++s) {
    double med[PW_RX_KINDS];
    for (int k = 0; k < PW_RX_KINDS; ++k) {
      med[k] = pw_rbench_median(&t[((size_t)s * PW_RX_KINDS + (size_t)k) * o->reps], o->reps);
    }
    double mib = o->sizes_mib[s];
    for (int k = 0; k < PW_RX_KINDS; ++k) {
      bool ucx = k == PW_RX_UCX || k == PW_RX_UCX_FRESH;
      fprintf(stderr, "transfer %-4s %-10s %4u MiB: %9.3f ms %8.0f MiB/s\n", ucx ? "ucx" : "cpu",
              pw_rx_names[k], o->sizes_mib[s], med[k] / 1e6, mib / (med[k] / 1e9));
      pw_bench_json_t j;
      pw_bench_json_begin(&j, "remote-transfer");
      pw_bench_json_str(&j, "backend", ucx ? "ucx" : "cpu");
      pw_bench_json_str(&j, "where", pw_rx_names[k]);
      pw_bench_json_int(&j, "reps", o->reps);
      pw_bench_json_num(&j, "load", o->load_start);
      pw_bench_json_int(&j, "mib", o->sizes_mib[s]);
      pw_bench_json_num(&j, "ms", med[k] / 1e6);
      pw_bench_json_num(&j, "mib_per_s", mib / (med[k] / 1e9));
      pw_bench_json_str(&j, "ucx_tls", tls ? tls : "unset");
      if (ucx) pw_bench_json_str(&j, "peer", pw_rx_peer[k]);
      if (k == PW_RX_WORKERS) {
        pw_bench_json_num(&j, "vs_ucx", med[PW_RX_WORKERS] / med[PW_RX_UCX]);
        pw_bench_json_num(&j, "vs_ucx_fresh", med[PW_RX_WORKERS] / med[PW_RX_UCX_FRESH]);
        pw_bench_json_num(&j, "target", 1.2);
      }
      pw_bench_json_end(&j);
    }
    fprintf(stderr, "transfer cpu workers / ucx at %u MiB: %.3f (target <= 1.2); / ucx-fresh "
                    "%.3f\n",
            o->sizes_mib[s], med[PW_RX_WORKERS] / med[PW_RX_UCX],
            med[PW_RX_WORKERS] / med[PW_RX_UCX_FRESH]);
  }
}

int pw_rbench_transfer(const pw_rbench_opts_t* o) {
  size_t max_bytes = 0;
  for (uint32_t s = 0; s < o->size_count; ++s) {
    size_t b = (size_t)o->sizes_mib[s] << 20;
    if (b > max_bytes) max_bytes = b;
  }
  float* host = malloc(max_bytes);
  double* t = calloc((size_t)o->size_count * PW_RX_KINDS * o->reps, sizeof(double));
  if (host == NULL || t == NULL) {
    free(host);
    free(t);
    return -1;
  }
  for (size_t i = 0; i < max_bytes / sizeof(float); ++i) host[i] = (float)(i % 4093);
  uint32_t memory_mib = (uint32_t)(max_bytes >> 20) * 2 + 64;
  pw_rfleet_t fleet;
  pw_rfleet_cfg_t cfg = {.worker = o->worker, .backend = "cpu", .workers = 2, .devices = 1,
                         .stream_depth = 8, .memory_mib = memory_mib};
  pw_rx_side_t x[2];
  memset(x, 0, sizeof(x));
  int rc = pw_rfleet_start(&cfg, &fleet);
  if (rc != 0) {
    free(host);
    free(t);
    return -1;
  }
  pw_cpu_backend_options_t co;
  pw_cpu_backend_options_init(&co);
  co.device_count = 2;
  co.stream_depth = 8;
  co.device_memory_bytes = (uint64_t)memory_mib << 20;
  pw_backend_t local;
  pw_runtime_t* rt = NULL;
  if (pw_bench_failed("remote", "cpu backend", pw_cpu_backend_create(&co, &local)) ||
      pw_rfleet_local_runtime(local, 2, 1, &rt) != 0 || pw_rx_open(rt, &x[PW_RX_LOCAL]) != 0) {
    rc = -1;
  }
  rt = NULL;
  if (rc == 0 && (pw_rfleet_runtime(&fleet, 0, &rt) != 0 || pw_rx_open(rt, &x[PW_RX_WORKERS]) != 0)) {
    rc = -1;
  }
  pw_rucx_t* u = rc == 0 ? pw_rucx_start(max_bytes) : NULL;
  if (rc == 0 && u == NULL) rc = -1;
  if (rc == 0) rc = pw_rx_measure(o, x, u, host, t);
  if (rc == 0) pw_rx_print(o, t);
  pw_rucx_stop(u);
  if (pw_rx_close(&x[PW_RX_WORKERS]) != 0) rc = -1;
  pw_rfleet_stop(&fleet);
  if (pw_rx_close(&x[PW_RX_LOCAL]) != 0) rc = -1;
  free(host);
  free(t);
  return rc;
}
