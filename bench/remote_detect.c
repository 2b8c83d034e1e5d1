/* pw-bench remote, part 4: how fast a lost worker is noticed. One worker
 * (CPU backend, one device) under a controller with --heartbeat-ms x
 * --misses, a runtime over it polling health every 5 ms; then the worker
 *   kill       gets SIGKILL (its sockets close: the controller should
 *              notice at once, not after the heartbeat bound);
 *   stop       gets SIGSTOP (silent: heartbeat period x misses);
 *   partition  (as root, with `ip netns`) runs in a network namespace
 *              of its own joined by a veth pair, whose end in the
 *              namespace is then taken down: traffic stops silently, as
 *              with a cut cable.
 * Figures, medians over --detect-runs (a fresh worker each): the time from
 * the signal (the end of the cut's `ip` command) to the remote marking the worker detached
 * (pw_remote_worker_info), and to its slice being LOST
 * (pw_runtime_slice_info), polled every 0.5 ms, against the bound. Every
 * worker is reaped and the namespace and links removed. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_try.h"
#include "bench_util.h"
#include "remote_bench.h"
#include "remote_fleet.h"

#define PW_RD_MS 1000000LL

enum { PW_RD_KILL, PW_RD_STOP, PW_RD_PARTITION, PW_RD_KINDS };
static const char* const pw_rd_names[PW_RD_KINDS] = {"kill", "stop", "partition"};

/* The namespace of the partition runs: names carry our pid. */
typedef struct pw_rd_net_s {
  char ns[32], host_if[16], ns_if[16];
  bool up;
} pw_rd_net_t;

static pw_rd_net_t pw_rd_net;

static int pw_rd_sh(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static int pw_rd_sh(const char* fmt, ...) {
  char cmd[512];
  va_list args;
  va_start(args, fmt);
  vsnprintf(cmd, sizeof(cmd), fmt, args);
  va_end(args);
  char quiet[600];
  snprintf(quiet, sizeof(quiet), "%s >/dev/null 2>&1", cmd);
  return system(quiet);
}

static void pw_rd_net_down(void) {
  if (!pw_rd_net.up) return;
  pw_rd_sh("ip link del %s", pw_rd_net.host_if);
  pw_rd_sh("ip netns del %s", pw_rd_net.ns);
  pw_rd_net.up = false;
}

/* 10.213.<pid % 250>.1 here, .2 in the namespace. NULL or why not. */
static const char* pw_rd_net_up(char* url, size_t url_size) {
  if (geteuid() != 0) return "not root";
  pw_rd_net_t* n = &pw_rd_net;
  unsigned id = (unsigned)getpid() % 100000;
  snprintf(n->ns, sizeof(n->ns), "pwbench%u", id);
  snprintf(n->host_if, sizeof(n->host_if), "pwb%uh", id);
  snprintf(n->ns_if, sizeof(n->ns_if), "pwb%un", id);
  unsigned net = (unsigned)getpid() % 250;
  if (pw_rd_sh("ip netns add %s", n->ns) != 0) return "ip netns add failed";
  n->up = true;
  static bool registered;
  if (!registered) {
    atexit(pw_rd_net_down);
    registered = true;
  }
  if (pw_rd_sh("ip link add %s type veth peer name %s", n->host_if, n->ns_if) != 0 ||
      pw_rd_sh("ip link set %s netns %s", n->ns_if, n->ns) != 0 ||
      pw_rd_sh("ip addr add 10.213.%u.1/30 dev %s", net, n->host_if) != 0 ||
      pw_rd_sh("ip link set %s up", n->host_if) != 0 ||
      pw_rd_sh("ip netns exec %s ip addr add 10.213.%u.2/30 dev %s", n->ns, net, n->ns_if) != 0 ||
      pw_rd_sh("ip netns exec %s ip link set %s up", n->ns, n->ns_if) != 0 ||
      pw_rd_sh("ip netns exec %s ip link set lo up", n->ns) != 0) {
    pw_rd_net_down();
    return "veth setup failed";
  }
  snprintf(url, url_size, "tcp://10.213.%u.1:0", net);
  return NULL;
}

/* The cut: the namespace's end of the veth goes down, so the worker's
 * routes go and the controller's packets to it are dropped (the host end
 * loses carrier); no FIN or RST crosses. Nothing outside the pair and the
 * namespace this suite made changes. */
static int pw_rd_cut(void) {
  if (pw_rd_sh("ip netns exec %s ip link set %s down", pw_rd_net.ns, pw_rd_net.ns_if) != 0) {
    fprintf(stderr, "pw-bench remote: cannot take %s down in %s\n", pw_rd_net.ns_if,
            pw_rd_net.ns);
    return -1;
  }
  return 0;
}

static void pw_rd_heal(void) {
  pw_rd_sh("ip netns exec %s ip link set %s up", pw_rd_net.ns, pw_rd_net.ns_if);
}

static void pw_rd_sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

/* One run of |kind|: detached and slice-lost times in ns. */
static int pw_rd_once(const pw_rbench_opts_t* o, int kind, const char* url, double* detach,
                      double* lost) {
  pw_rfleet_cfg_t cfg = {.worker = o->worker, .backend = "cpu", .workers = 1, .devices = 1,
                         .stream_depth = 8, .heartbeat_ns = o->heartbeat_ns,
                         .misses = o->misses, .listen_url = url,
                         .netns = kind == PW_RD_PARTITION ? pw_rd_net.ns : NULL};
  pw_rfleet_t f;
  if (pw_rfleet_start(&cfg, &f) != 0) return -1;
  pw_runtime_t* rt = NULL;
  int rc = pw_rfleet_runtime(&f, 5 * PW_RD_MS, &rt);
  /* A few heartbeats first: the session is in its steady state. */
  if (rc == 0) pw_rd_sleep_us((long)(3 * o->heartbeat_ns / 1000));
  /* The clock starts when the failure is in place: after the signal, or
   * when `ip` (tens of ms to start) has taken the link down. */
  int64_t t0 = pw_bench_now_ns();
  if (rc == 0) {
    if (kind == PW_RD_PARTITION) {
      rc = pw_rd_cut();
      t0 = pw_bench_now_ns();
    } else {
      pw_rfleet_signal(&f, 0, kind == PW_RD_KILL ? SIGKILL : SIGSTOP);
    }
  }
  *detach = *lost = -1;
  int64_t limit = t0 + 20 * (int64_t)(o->heartbeat_ns * o->misses) + 5000 * PW_RD_MS;
  while (rc == 0 && (*detach < 0 || *lost < 0) && pw_bench_now_ns() < limit) {
    pw_remote_worker_info_t info = {.struct_size = sizeof(info)};
    pw_slice_info_t si = {.struct_size = sizeof(si)};
    if (pw_bench_failed("remote", "worker info", pw_remote_worker_info(f.remote, f.index[0], &info)) ||
        pw_bench_failed("remote", "slice info", pw_runtime_slice_info(rt, 0, &si))) {
      rc = -1;
      break;
    }
    int64_t now = pw_bench_now_ns();
    if (*detach < 0 && !info.attached) *detach = (double)(now - t0);
    if (*lost < 0 && si.state == PW_SLICE_LOST) *lost = (double)(now - t0);
    pw_rd_sleep_us(500);
  }
  if (rc == 0 && (*detach < 0 || *lost < 0)) {
    fprintf(stderr, "pw-bench remote: %s: the worker was not lost within %lld ms\n",
            pw_rd_names[kind], (long long)((limit - t0) / PW_RD_MS));
    rc = -1;
  }
  if (kind == PW_RD_PARTITION) {
    pw_rfleet_signal(&f, 0, SIGKILL);
    pw_rd_heal();
  }
  if (rt != NULL && pw_bench_failed("remote", "runtime", pw_runtime_destroy(rt))) rc = -1;
  pw_rfleet_stop(&f);
  return rc;
}

int pw_rbench_detect(const pw_rbench_opts_t* o) {
  double bound = (double)o->heartbeat_ns * o->misses;
  double* t = calloc(2 * (size_t)o->detect_runs, sizeof(double));
  if (t == NULL) return -1;
  int rc = 0;
  for (int kind = 0; rc == 0 && kind < PW_RD_KINDS; ++kind) {
    char url[64];
    const char* url_p = NULL;
    const char* why = NULL;
    if (kind == PW_RD_PARTITION) {
      why = pw_rd_net_up(url, sizeof(url));
      url_p = url;
    }
    pw_bench_json_t j;
    if (why != NULL) {
      fprintf(stderr, "detect   cpu %-9s not measured: %s\n", pw_rd_names[kind], why);
      pw_bench_json_begin(&j, "remote-detect");
      pw_bench_json_str(&j, "backend", "cpu");
      pw_bench_json_str(&j, "failure", pw_rd_names[kind]);
      pw_bench_json_str(&j, "not_measured", why);
      pw_bench_json_end(&j);
      continue;
    }
    for (uint32_t r = 0; rc == 0 && r < o->detect_runs; ++r) {
      rc = pw_rd_once(o, kind, url_p, &t[r], &t[o->detect_runs + r]);
    }
    if (kind == PW_RD_PARTITION) pw_rd_net_down();
    if (rc != 0) break;
    double detach = pw_rbench_median(t, o->detect_runs);
    double lost = pw_rbench_median(t + o->detect_runs, o->detect_runs);
    fprintf(stderr,
            "detect   cpu %-9s detached %8.1f ms, slice lost %8.1f ms; bound %.0f ms "
            "(%.0f ms x %u): %.2f of it\n",
            pw_rd_names[kind], detach / 1e6, lost / 1e6, bound / 1e6, o->heartbeat_ns / 1e6,
            o->misses, lost / bound);
    pw_bench_json_begin(&j, "remote-detect");
    pw_bench_json_str(&j, "backend", "cpu");
    pw_bench_json_str(&j, "failure", pw_rd_names[kind]);
    pw_bench_json_int(&j, "runs", o->detect_runs);
    pw_bench_json_num(&j, "load", o->load_start);
    pw_bench_json_num(&j, "heartbeat_ms", o->heartbeat_ns / 1e6);
    pw_bench_json_int(&j, "misses", o->misses);
    pw_bench_json_num(&j, "bound_ms", bound / 1e6);
    pw_bench_json_num(&j, "detached_ms", detach / 1e6);
    pw_bench_json_num(&j, "slice_lost_ms", lost / 1e6);
    pw_bench_json_num(&j, "vs_bound", lost / bound);
    pw_bench_json_end(&j);
  }
  pw_rd_net_down();
  free(t);
  return rc;
}
