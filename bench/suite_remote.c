/* pw-bench remote: the multi-host runtime (include/pathways/remote.h)
 * against the same work in one process, measured in one run. This file
 * owns the suite, its options and parts 1 and 2; parts 3-5 are in
 * remote_transfer.c, remote_detect.c and remote_fig5.c (remote_bench.h),
 * the fleets in remote_fleet.c, the UCX peer in remote_ucx.c.
 *
 * The "workers" side runs the CPU (or sim) backend inside pathways-worker
 * processes on loopback (--worker PATH, default ../tools/pathways-worker
 * beside this binary), each a proxy backend of a runtime here; the
 * "in-process" side runs the same backend, with the same options, in
 * this process. Reps are interleaved (in-process, workers, then workers,
 * in-process, ...); medians are quoted, with the 1-minute load average at
 * the start and end of the run in every line.
 *
 *   1 launch    ops/s of a --launch-ops chain of a tiny kernel (copy,
 *               f32[8] split over 8 devices: one float each) on one slice
 *               of 8 CPU devices (streams mode, depth 8: the worker's
 *               default), submitted once, so the runtime launches ahead.
 *   2 chain     a --chain-ops chain of the CPU backend's spin kernel
 *               (--kernel-us of wall-clock busy-wait, then a copy;
 *               docs/backends.md) on a one-device slice: wall time, and
 *               workers / in-process (target 1.1: no round trip per op).
 *   3 transfer  remote_transfer.c.  4 detect  remote_detect.c.
 *   5 fig5      remote_fig5.c.
 *
 * Usage: pw-bench remote [--worker PATH] [--quick] [--reps 9]
 *          [--only launch,chain,transfer,detect,fig5] [--launch-ops 2000]
 *          [--launch-devices 8]
 *          [--chain-ops 100] [--kernel-us 50] [--sizes-mib 1,256]
 *          [--heartbeat-ms 50] [--misses 4] [--detect-runs 3]
 *          [--fig5-workers 1,2,4] [--computations 128] [--timeout-s 600]
 *        pw-bench remote --ucx-peer R,W,BYTES   (the UCX peer's receiver) */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_try.h"
#include "bench_util.h"
#include "pathways/backends/cpu.h"
#include "pathways/pathways.h"
#include "remote_bench.h"
#include "remote_fleet.h"
#include "remote_ucx.h"
#include "suites.h"

#define PW_RB_TRY(expr, what) PW_BENCH_TRY("remote", (expr), (what))
#define PW_RB_S 1000000000LL

double pw_rbench_load(void) {
  double load = -1;
  FILE* f = fopen("/proc/loadavg", "r");
  if (f == NULL) return load;
  if (fscanf(f, "%lf", &load) != 1) load = -1;
  fclose(f);
  return load;
}

double pw_rbench_median(double* values, uint32_t n) { return pw_bench_median(values, n); }

/* ---- parts 1 and 2: a chain of one kernel on one slice ---- */

typedef struct pw_rchain_s {
  pw_runtime_t* rt;
  pw_client_t* c;
  pw_vslice_t vs;
  pw_executable_t exe;
  pw_graph_t g;
  pw_buffer_t seed;
} pw_rchain_t;

/* Takes |rt| (one slice of |devices|); a graph of |ops| x |kernel|. */
static int pw_rchain_open(pw_runtime_t* rt, uint32_t devices, const char* kernel, uint32_t ops,
                          pw_rchain_t* ch) {
  memset(ch, 0, sizeof(*ch));
  ch->rt = rt;
  PW_RB_TRY(pw_client_create(rt, NULL, &ch->c), "client");
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &devices);
  PW_RB_TRY(pw_vslice_create(ch->c, &mesh, PW_VSLICE_DEFAULT, &ch->vs), "vslice");
  char text[256];
  snprintf(text, sizeof(text), "%s\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n",
           kernel);
  PW_RB_TRY(pw_executable_compile(ch->c, ch->vs, text, strlen(text), NULL, &ch->exe), kernel);
  pw_array_spec_t spec = {PW_DTYPE_F32, {1, {8}}, pw_sharding_split(0, PW_MESH_AXIS_ALL)};
  PW_RB_TRY(pw_graph_create(ch->c, &ch->g), "graph");
  uint32_t node;
  PW_RB_TRY(pw_graph_add_parameter(ch->c, ch->g, ch->vs, &spec, &node), "parameter");
  for (uint32_t i = 0; i < ops; ++i) {
    pw_value_t v = pw_value(node, 0);
    PW_RB_TRY(pw_graph_add_compute(ch->c, ch->g, "op", ch->exe, ch->vs, &v, 1, &node), "op");
  }
  PW_RB_TRY(pw_graph_add_output(ch->c, ch->g, pw_value(node, 0)), "output");
  PW_RB_TRY(pw_graph_finalize(ch->c, ch->g), "finalize");
  float host[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  PW_RB_TRY(pw_buffer_from_host(ch->c, ch->vs, &spec, host, sizeof(host), &ch->seed), "seed");
  return 0;
}

/* One run: submit, wait; its wall time. The output must equal the seed
 * (every kernel here copies). */
static int pw_rchain_run(pw_rchain_t* ch, double* out_ns) {
  pw_buffer_t out = {0};
  pw_event_t* done = NULL;
  int64_t t0 = pw_bench_now_ns();
  PW_RB_TRY(pw_graph_submit(ch->c, ch->g, &ch->seed, 1, NULL, &out, 1, &done), "submit");
  pw_status_t st = pw_event_wait(done, pw_clock_now() + 120 * PW_RB_S);
  *out_ns = (double)(pw_bench_now_ns() - t0);
  pw_event_release(done);
  PW_RB_TRY(st, "chain");
  float host[8];
  PW_RB_TRY(pw_buffer_to_host(ch->c, out, host, sizeof(host), pw_clock_now() + 60 * PW_RB_S),
            "read back");
  PW_RB_TRY(pw_buffer_release(ch->c, out), "release");
  for (int i = 0; i < 8; ++i) {
    if (host[i] != (float)(i + 1)) {
      fprintf(stderr, "pw-bench remote: chain output[%d] = %g, expected %d\n", i,
              (double)host[i], i + 1);
      return -1;
    }
  }
  return 0;
}

static int pw_rchain_close(pw_rchain_t* ch) {
  int rc = 0;
  if (ch->c != NULL) {
    if (ch->seed.id != 0 && pw_bench_failed("remote", "release", pw_buffer_release(ch->c, ch->seed))) rc = -1;
    if (ch->g.id != 0 && pw_bench_failed("remote", "release", pw_graph_release(ch->c, ch->g))) rc = -1;
    if (ch->exe.id != 0 &&
        pw_bench_failed("remote", "release", pw_executable_release(ch->c, ch->exe))) {
      rc = -1;
    }
    if (pw_bench_failed("remote", "client", pw_client_destroy(ch->c))) rc = -1;
  }
  if (ch->rt != NULL && pw_bench_failed("remote", "runtime", pw_runtime_destroy(ch->rt))) rc = -1;
  memset(ch, 0, sizeof(*ch));
  return rc;
}

/* Both sides of a chain part: [0] in process, [1] on one worker. */
static int pw_rchain_pair(const pw_rbench_opts_t* o, uint32_t devices, const char* kernel,
                          uint32_t ops, double med[2]) {
  pw_rchain_t ch[2];
  memset(ch, 0, sizeof(ch));
  pw_rfleet_t fleet;
  pw_rfleet_cfg_t cfg = {.worker = o->worker, .backend = "cpu", .workers = 1,
                         .devices = devices, .stream_depth = 8};
  if (pw_rfleet_start(&cfg, &fleet) != 0) return -1;
  int rc = 0;
  pw_cpu_backend_options_t co;
  pw_cpu_backend_options_init(&co);
  co.device_count = devices;
  co.stream_depth = 8;
  co.device_memory_bytes = (uint64_t)1024 << 20; /* the worker's --memory-mib default */
  pw_backend_t local;
  pw_runtime_t* rt[2] = {NULL, NULL};
  if (pw_bench_failed("remote", "cpu backend", pw_cpu_backend_create(&co, &local)) ||
      pw_rfleet_local_runtime(local, 1, devices, &rt[0]) != 0 ||
      pw_rchain_open(rt[0], devices, kernel, ops, &ch[0]) != 0 ||
      pw_rfleet_runtime(&fleet, 0, &rt[1]) != 0 ||
      pw_rchain_open(rt[1], devices, kernel, ops, &ch[1]) != 0) {
    rc = -1;
  }
  if (ch[0].rt == NULL && rt[0] != NULL) (void)pw_runtime_destroy(rt[0]);
  if (ch[1].rt == NULL && rt[1] != NULL) (void)pw_runtime_destroy(rt[1]);
  double* t = calloc(2 * (size_t)o->reps, sizeof(double));
  if (t == NULL) rc = -1;
  for (int64_t r = -1; rc == 0 && r < (int64_t)o->reps; ++r) {
    for (int k = 0; rc == 0 && k < 2; ++k) {
      int side = (r & 1) ? 1 - k : k; /* interleaved: 0,1 then 1,0 */
      double ns = 0;
      rc = pw_rchain_run(&ch[side], &ns);
      if (r >= 0) t[(size_t)side * o->reps + (size_t)r] = ns;
    }
  }
  if (rc == 0) {
    med[0] = pw_rbench_median(t, o->reps);
    med[1] = pw_rbench_median(t + o->reps, o->reps);
  }
  free(t);
  if (pw_rchain_close(&ch[1]) != 0) rc = -1;
  pw_rfleet_stop(&fleet);
  if (pw_rchain_close(&ch[0]) != 0) rc = -1;
  return rc;
}

static void pw_rb_json_head(pw_bench_json_t* j, const char* bench, const char* backend,
                            const char* where, const pw_rbench_opts_t* o) {
  pw_bench_json_begin(j, bench);
  pw_bench_json_str(j, "backend", backend);
  pw_bench_json_str(j, "where", where);
  pw_bench_json_int(j, "reps", o->reps);
  pw_bench_json_num(j, "load", o->load_start);
}

static int pw_rb_launch(const pw_rbench_opts_t* o) {
  double med[2];
  uint32_t d = o->launch_devices;
  if (pw_rchain_pair(o, d, "kernel copy", o->launch_ops, med) != 0) return -1;
  static const char* const where[2] = {"in-process", "workers"};
  for (int k = 0; k < 2; ++k) {
    double ops_s = o->launch_ops / (med[k] / 1e9);
    fprintf(stderr, "launch   cpu %-10s %u devices, %u ops of copy: %10.0f ops/s (%.2f ms)\n",
            where[k], d, o->launch_ops, ops_s, med[k] / 1e6);
    pw_bench_json_t j;
    pw_rb_json_head(&j, "remote-launch", "cpu", where[k], o);
    pw_bench_json_int(&j, "devices", d);
    pw_bench_json_int(&j, "ops", o->launch_ops);
    pw_bench_json_str(&j, "kernel", "copy");
    pw_bench_json_num(&j, "wall_ms", med[k] / 1e6);
    pw_bench_json_num(&j, "ops_per_s", ops_s);
    if (k == 1) pw_bench_json_num(&j, "vs_in_process", med[0] / med[1]);
    pw_bench_json_end(&j);
  }
  fprintf(stderr, "launch   cpu workers / in-process ops/s: %.3f\n", med[0] / med[1]);
  return 0;
}

static int pw_rb_chain(const pw_rbench_opts_t* o) {
  char kernel[64];
  snprintf(kernel, sizeof(kernel), "kernel spin\nattr ns %llu",
           (unsigned long long)o->kernel_ns);
  double med[2];
  if (pw_rchain_pair(o, 1, kernel, o->chain_ops, med) != 0) return -1;
  static const char* const where[2] = {"in-process", "workers"};
  double ideal = (double)o->chain_ops * (double)o->kernel_ns;
  for (int k = 0; k < 2; ++k) {
    fprintf(stderr, "chain    cpu %-10s %u x spin %.0f us: %8.3f ms (kernels alone %.3f ms)\n",
            where[k], o->chain_ops, o->kernel_ns / 1e3, med[k] / 1e6, ideal / 1e6);
    pw_bench_json_t j;
    pw_rb_json_head(&j, "remote-chain", "cpu", where[k], o);
    pw_bench_json_int(&j, "devices", 1);
    pw_bench_json_int(&j, "ops", o->chain_ops);
    pw_bench_json_num(&j, "kernel_us", o->kernel_ns / 1e3);
    pw_bench_json_num(&j, "wall_ms", med[k] / 1e6);
    pw_bench_json_num(&j, "kernels_ms", ideal / 1e6);
    if (k == 1) {
      pw_bench_json_num(&j, "vs_in_process", med[1] / med[0]);
      pw_bench_json_num(&j, "target", 1.1);
    }
    pw_bench_json_end(&j);
  }
  fprintf(stderr, "chain    cpu workers / in-process time: %.3f (target <= 1.1)\n",
          med[1] / med[0]);
  return 0;
}

/* ---- options ---- */

static int pw_rb_list(const char* text, const char* name, uint32_t max_value, uint32_t* out,
                      uint32_t cap, uint32_t* count) {
  *count = 0;
  const char* p = text;
  while (*p != '\0') {
    char* end = NULL;
    unsigned long v = strtoul(p, &end, 10);
    if (end == p || v == 0 || v > max_value || *count == cap || (*end != ',' && *end != '\0')) {
      fprintf(stderr, "pw-bench remote: --%s is up to %u numbers from 1 to %u, not '%s'\n",
              name, cap, max_value, text);
      return -1;
    }
    out[(*count)++] = (uint32_t)v;
    p = *end == ',' ? end + 1 : end;
  }
  return *count > 0 ? 0 : -1;
}

static bool pw_rb_wants(const char* only, const char* part) {
  if (only == NULL) return true;
  size_t n = strlen(part);
  for (const char* p = only; (p = strstr(p, part)) != NULL; p += n) {
    bool starts = p == only || p[-1] == ',';
    if (starts && (p[n] == ',' || p[n] == '\0')) return true;
  }
  return false;
}

static int pw_rb_parse(int argc, char** argv, pw_rbench_opts_t* o) {
  memset(o, 0, sizeof(*o));
  o->quick = pw_bench_opt_flag(argc, argv, "quick");
  o->worker = pw_bench_opt_value(argc, argv, "worker");
  if (o->worker == NULL || o->worker[0] == '\0') o->worker = pw_rfleet_default_worker();
  o->reps = (uint32_t)pw_bench_opt_int(argc, argv, "reps", o->quick ? 1 : 9);
  o->launch_ops = (uint32_t)pw_bench_opt_int(argc, argv, "launch-ops", o->quick ? 100 : 2000);
  o->launch_devices = (uint32_t)pw_bench_opt_int(argc, argv, "launch-devices", 8);
  o->chain_ops = (uint32_t)pw_bench_opt_int(argc, argv, "chain-ops", o->quick ? 20 : 100);
  o->kernel_ns = (uint64_t)pw_bench_opt_int(argc, argv, "kernel-us", 50) * 1000;
  o->heartbeat_ns = (uint64_t)pw_bench_opt_int(argc, argv, "heartbeat-ms", 50) * 1000000;
  o->misses = (uint32_t)pw_bench_opt_int(argc, argv, "misses", 4);
  o->detect_runs = (uint32_t)pw_bench_opt_int(argc, argv, "detect-runs", o->quick ? 1 : 3);
  o->computations = (uint32_t)pw_bench_opt_int(argc, argv, "computations", 128);
  const char* sizes = pw_bench_opt_value(argc, argv, "sizes-mib");
  const char* fig5 = pw_bench_opt_value(argc, argv, "fig5-workers");
  if (pw_rb_list(sizes ? sizes : (o->quick ? "1" : "1,256"), "sizes-mib", 1024, o->sizes_mib, 4,
                 &o->size_count) != 0 ||
      pw_rb_list(fig5 ? fig5 : (o->quick ? "1,2" : "1,2,4"), "fig5-workers", PW_RFLEET_MAX,
                 o->fig5_workers, 4, &o->fig5_count) != 0) {
    return -1;
  }
  if (o->reps < 1 || o->reps > 1000 || o->launch_devices < 1 || o->launch_devices > 8 ||
      o->launch_ops < 1 || o->launch_ops > 100000 ||
      o->chain_ops < 1 || o->chain_ops > 100000 || o->kernel_ns > 10 * PW_RB_S ||
      o->heartbeat_ns < 1000000 || o->misses < 1 || o->detect_runs < 1 ||
      o->detect_runs > 100 || o->computations < 1 || o->computations > 4096) {
    fprintf(stderr, "pw-bench remote: need 1 <= --reps <= 1000, 1 <= --launch-devices <= 8, 1 <= --launch-ops, "
                    "--chain-ops <= 100000, --kernel-us <= 10 s, --heartbeat-ms >= 1, "
                    "--misses >= 1, 1 <= --detect-runs <= 100, 1 <= --computations <= 4096\n");
    return -1;
  }
  return 0;
}

/* --timeout-s: a run that outlives it (a hang, as nng 1.5.2's close can)
 * ends with status 3; the workers die with it (PR_SET_PDEATHSIG). */
static void pw_rb_on_alarm(int sig) {
  (void)sig;
  static const char text[] = "pw-bench remote: --timeout-s passed; giving up\n";
  ssize_t n = write(2, text, sizeof(text) - 1);
  (void)n;
  _exit(3);
}

static int pw_bench_remote_main(int argc, char** argv) {
  const char* peer = pw_bench_opt_value(argc, argv, "ucx-peer");
  if (peer != NULL) return pw_rucx_peer_main(peer);
  pw_rbench_opts_t o;
  if (pw_rb_parse(argc, argv, &o) != 0) return 2;
  const char* only = pw_bench_opt_value(argc, argv, "only");
  long long timeout_s = pw_bench_opt_int(argc, argv, "timeout-s", 600);
  if (timeout_s > 0) {
    signal(SIGALRM, pw_rb_on_alarm);
    alarm((unsigned)timeout_s);
  }
  o.load_start = pw_rbench_load();
  const char* tls = getenv("UCX_TLS");
  fprintf(stderr, "pw-bench remote: worker %s, %u reps%s, load %.2f, UCX_TLS %s\n", o.worker,
          o.reps, o.quick ? " (quick)" : "", o.load_start, tls ? tls : "unset");
  int rc = 0;
  if (rc == 0 && pw_rb_wants(only, "launch")) rc = pw_rb_launch(&o);
  if (rc == 0 && pw_rb_wants(only, "chain")) rc = pw_rb_chain(&o);
  if (rc == 0 && pw_rb_wants(only, "transfer")) rc = pw_rbench_transfer(&o);
  if (rc == 0 && pw_rb_wants(only, "detect")) rc = pw_rbench_detect(&o);
  if (rc == 0 && pw_rb_wants(only, "fig5")) rc = pw_rbench_fig5(&o);
  double load_end = pw_rbench_load();
  pw_bench_json_t j;
  pw_bench_json_begin(&j, "remote-summary");
  pw_bench_json_str(&j, "status", rc == 0 ? "ok" : "failed");
  pw_bench_json_num(&j, "load", o.load_start);
  pw_bench_json_num(&j, "load_end", load_end);
  pw_bench_json_str(&j, "ucx_tls", tls ? tls : "unset");
  pw_bench_json_end(&j);
  fprintf(stderr, "pw-bench remote: %s, load %.2f -> %.2f\n", rc == 0 ? "done" : "FAILED",
          o.load_start, load_end);
  return rc == 0 ? 0 : 1;
}

PW_BENCH_SUITE(remote, "remote",
               "multi-host runtime vs one process: launch rate, a 100-op chain, cross-worker "
               "transfers vs plain UCX, failure detection, Fig. 5 on 1/2/4 workers",
               pw_bench_remote_main)
