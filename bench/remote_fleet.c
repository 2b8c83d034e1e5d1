/* Worker fleets for `pw-bench remote` (remote_fleet.h). */
#define _GNU_SOURCE
#include "remote_fleet.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_try.h"

#define PW_RFLEET_TRY(expr, what) PW_BENCH_TRY("remote", (expr), (what))
#define PW_RFLEET_MS 1000000LL

static const char kPwRfleetToken[] = "pw-bench-remote";

/* Every child alive, for the atexit sweep. */
static pid_t pw_rfleet_live[64];

static void pw_rfleet_sweep(void) {
  for (size_t i = 0; i < sizeof(pw_rfleet_live) / sizeof(pw_rfleet_live[0]); ++i) {
    if (pw_rfleet_live[i] > 0) {
      kill(pw_rfleet_live[i], SIGKILL);
      waitpid(pw_rfleet_live[i], NULL, 0);
      pw_rfleet_live[i] = 0;
    }
  }
}

static void pw_rfleet_track(pid_t pid, bool add) {
  static bool registered;
  if (!registered) {
    atexit(pw_rfleet_sweep);
    registered = true;
  }
  for (size_t i = 0; i < sizeof(pw_rfleet_live) / sizeof(pw_rfleet_live[0]); ++i) {
    if (add ? pw_rfleet_live[i] == 0 : pw_rfleet_live[i] == pid) {
      pw_rfleet_live[i] = add ? pid : 0;
      return;
    }
  }
}

const char* pw_rfleet_default_worker(void) {
  static char path[PATH_MAX];
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "pathways-worker";
  self[n] = '\0';
  snprintf(path, sizeof(path), "%s/../tools/pathways-worker", dirname(self));
  return path;
}

/* In the child: enter |netns| (as `ip netns exec` does), exec the worker. */
static void pw_rfleet_exec(const pw_rfleet_cfg_t* cfg, const char* url, uint32_t k) {
  /* A bench killed from outside (a ctest timeout) takes its workers along. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (cfg->netns != NULL) {
    char ns[PATH_MAX];
    snprintf(ns, sizeof(ns), "/var/run/netns/%s", cfg->netns);
    int fd = open(ns, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
      fprintf(stderr, "pw-bench remote: cannot enter netns %s: %s\n", cfg->netns,
              strerror(errno));
      _exit(126);
    }
    close(fd);
  }
  char name[16], devices[16], depth[16], memory[16];
  snprintf(name, sizeof(name), "w%u", k);
  snprintf(devices, sizeof(devices), "%u", cfg->devices);
  snprintf(depth, sizeof(depth), "%u", cfg->stream_depth);
  snprintf(memory, sizeof(memory), "%u", cfg->memory_mib ? cfg->memory_mib : 1024);
  setenv("PATHWAYS_TOKEN", kPwRfleetToken, 1);
  execl(cfg->worker, cfg->worker, "--controller", url, "--name", name, "--backend",
        cfg->backend, "--devices", devices, "--stream-depth", depth, "--memory-mib", memory,
        "--log-level", "error", (char*)NULL);
  fprintf(stderr, "pw-bench remote: cannot run %s: %s (--worker PATH)\n", cfg->worker,
          strerror(errno));
  _exit(127);
}

int pw_rfleet_start(const pw_rfleet_cfg_t* cfg, pw_rfleet_t* out) {
  memset(out, 0, sizeof(*out));
  out->cfg = *cfg;
  if (cfg->workers < 1 || cfg->workers > PW_RFLEET_MAX) {
    fprintf(stderr, "pw-bench remote: %u workers (1 to %u)\n", cfg->workers, PW_RFLEET_MAX);
    return -1;
  }
  if (access(cfg->worker, X_OK) != 0) {
    fprintf(stderr, "pw-bench remote: no worker binary at %s (--worker PATH)\n", cfg->worker);
    return -1;
  }
  signal(SIGPIPE, SIG_IGN);
  pw_remote_options_t o;
  pw_remote_options_init(&o);
  o.token = kPwRfleetToken;
  o.token_size = strlen(kPwRfleetToken);
  o.heartbeat_ns = cfg->heartbeat_ns;
  o.heartbeat_misses = cfg->misses;
  o.listen_url = cfg->listen_url;
  PW_RFLEET_TRY(pw_remote_create(&o, &out->remote), "remote create");
  fflush(NULL);
  for (uint32_t k = 0; k < cfg->workers; ++k) {
    pid_t pid = fork();
    if (pid == 0) pw_rfleet_exec(cfg, pw_remote_url(out->remote), k);
    if (pid < 0) {
      fprintf(stderr, "pw-bench remote: fork: %s\n", strerror(errno));
      pw_rfleet_stop(out);
      return -1;
    }
    out->pids[k] = pid;
    pw_rfleet_track(pid, true);
  }
  pw_status_t st = pw_remote_wait_workers(out->remote, cfg->workers, 30000 * PW_RFLEET_MS);
  for (uint32_t i = 0; st == NULL && i < cfg->workers; ++i) {
    pw_remote_worker_info_t info = {.struct_size = sizeof(info)};
    st = pw_remote_worker_info(out->remote, i, &info);
    unsigned k = 0;
    if (st == NULL && (sscanf(info.name, "w%u", &k) != 1 || k >= cfg->workers)) {
      st = pw_status_make(PW_STATUS_INTERNAL, "a worker named '%s' registered", info.name);
    }
    if (st == NULL) out->index[k] = i;
  }
  if (pw_bench_failed("remote", "workers", st)) {
    pw_rfleet_stop(out);
    return -1;
  }
  return 0;
}

static int pw_rfleet_assemble(const pw_backend_t* backends, uint32_t backend_count,
                              uint32_t slices, uint32_t devices, pw_transport_t transport,
                              pw_duration_t health_poll_ns, pw_runtime_t** out) {
  pw_slice_desc_t desc[PW_RFLEET_MAX];
  for (uint32_t k = 0; k < slices; ++k) {
    bool one = backend_count == 1;
    desc[k] = (pw_slice_desc_t){NULL, pw_mesh_shape_make(1, &devices), one ? 0 : k,
                                one ? k * devices : 0, k + 1};
  }
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = backends;
  ro.backend_count = backend_count;
  ro.slices = desc;
  ro.slice_count = slices;
  ro.transport = transport;
  ro.health_poll_ns = health_poll_ns;
  PW_RFLEET_TRY(pw_runtime_create(&ro, out), "runtime");
  return 0;
}

int pw_rfleet_runtime(pw_rfleet_t* f, pw_duration_t health_poll_ns, pw_runtime_t** out) {
  pw_backend_t proxies[PW_RFLEET_MAX];
  for (uint32_t k = 0; k < f->cfg.workers; ++k) {
    pw_status_t st = pw_remote_backend(f->remote, f->index[k], &proxies[k]);
    if (st != NULL) {
      for (uint32_t j = 0; j < k; ++j) proxies[j].vtable->destroy(proxies[j].self);
      PW_RFLEET_TRY(st, "proxy");
    }
  }
  pw_transport_t transport;
  pw_status_t st = pw_remote_transport(f->remote, &transport);
  if (st != NULL) {
    for (uint32_t j = 0; j < f->cfg.workers; ++j) proxies[j].vtable->destroy(proxies[j].self);
    PW_RFLEET_TRY(st, "transport");
  }
  return pw_rfleet_assemble(proxies, f->cfg.workers, f->cfg.workers, f->cfg.devices, transport,
                            health_poll_ns, out);
}

int pw_rfleet_local_runtime(pw_backend_t backend, uint32_t slices, uint32_t devices,
                            pw_runtime_t** out) {
  return pw_rfleet_assemble(&backend, 1, slices, devices, (pw_transport_t){NULL, NULL}, 0, out);
}

void pw_rfleet_signal(pw_rfleet_t* f, uint32_t worker, int sig) {
  if (worker < PW_RFLEET_MAX && f->pids[worker] > 0) kill(f->pids[worker], sig);
}

void pw_rfleet_reap(pw_rfleet_t* f, uint32_t worker) {
  if (worker >= PW_RFLEET_MAX || f->pids[worker] <= 0) return;
  waitpid(f->pids[worker], NULL, 0);
  pw_rfleet_track(f->pids[worker], false);
  f->pids[worker] = 0;
}

void pw_rfleet_stop(pw_rfleet_t* f) {
  pw_remote_destroy(f->remote); /* BYE: the workers would register again */
  f->remote = NULL;
  for (uint32_t k = 0; k < PW_RFLEET_MAX; ++k) {
    if (f->pids[k] > 0) {
      kill(f->pids[k], SIGCONT); /* a stopped one too */
      kill(f->pids[k], SIGTERM);
    }
  }
  for (uint32_t k = 0; k < PW_RFLEET_MAX; ++k) {
    if (f->pids[k] <= 0) continue;
    int64_t waited = 0;
    while (waitpid(f->pids[k], NULL, WNOHANG) == 0) {
      if (waited >= 2000) {
        kill(f->pids[k], SIGKILL);
        waitpid(f->pids[k], NULL, 0);
        break;
      }
      struct timespec ts = {0, 10 * PW_RFLEET_MS};
      nanosleep(&ts, NULL);
      waited += 10;
    }
    pw_rfleet_track(f->pids[k], false);
    f->pids[k] = 0;
  }
}
