/* Failures of real worker processes under elastic training (issue 24).
 *
 * A controller in this process and four pathways-worker processes (CPU
 * backend, 2 devices each, one slice each) on loopback. The elastic
 * helper (pathways/elastic.h) runs a deterministic job over every slice
 * in use: each step adds 1 to the state (on the first slice) and has every
 * other slice double a step-seeded input that the step reads back and
 * checks; a snapshot every 3 steps. Mid-step (the inputs written, the
 * launches sent) worker w2 is cut off:
 *
 *   stop       SIGSTOP (then SIGCONT)
 *   partition  w2 runs in a network namespace behind a veth pair; the
 *              host side is set down (then up). The controller listens on
 *              the host side's address; w2 has no data plane (the job
 *              moves no bytes between workers).
 *
 * Checked: w2's slice is LOST within 10 x the heartbeat bound (the time
 * is printed, never asserted tighter); every outstanding launch and read
 * resolves with a typed status (UNAVAILABLE, DATA_LOSS, ABORTED or
 * CANCELLED; a wait hitting its deadline is a hang and fails the test);
 * the helper re-meshes onto 3 slices and goes on; after the heal w2
 * registers again, its slice comes back, the helper grows back to 4
 * (its GROWN event) and runs steps on w2's slice; the final state equals
 * an uninterrupted run's exactly. At the end every child is reaped, each
 * worker stopped by SIGTERM exits 0, and no pwf* namespace or veth is
 * left. When namespaces cannot be made the partition case exits 77
 * (ctest SKIP_RETURN_CODE) saying why.
 *
 * Usage: test_remote_faults PATH_TO_PATHWAYS_WORKER stop|partition */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "faults_netns.h"
#include "pathways/elastic.h"
#include "pathways/pathways.h"

#define F_WORKERS 4
#define F_MS 1000000LL
#define F_SKIP 77
enum { kLen = 8, kSteps = 24, kEvery = 3, kFaultAt = 7, kHealAt = 13, kVictim = 2, kX0 = 1000 };
static const char kToken[] = "faults-token";
static const pw_array_spec_t kSpec = {PW_DTYPE_I32, {1, {kLen}},
                                      PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};

static pid_t g_children[F_WORKERS];
static pwf_netns_t g_ns;

/* Every exit path: children killed and reaped, namespace deleted. Only
 * async-signal-safe calls (the signal handler runs it). */
static void f_cleanup(void) {
  for (int i = 0; i < F_WORKERS; ++i) {
    if (g_children[i] > 0) {
      kill(g_children[i], SIGKILL);
      while (waitpid(g_children[i], NULL, 0) < 0 && errno == EINTR) {
      }
      g_children[i] = 0;
    }
  }
  pwf_netns_destroy(&g_ns);
}

static void f_on_signal(int sig) {
  f_cleanup();
  signal(sig, SIG_DFL);
  raise(sig);
}

#define F_CHECK(expr)                                                                 \
  do {                                                                                \
    pw_status_t st_ = (expr);                                                         \
    if (st_ != NULL) {                                                                \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,                   \
              pw_status_message(st_));                                                \
      exit(1); /* atexit: f_cleanup */                                                \
    }                                                                                 \
  } while (0)
#define F_EXPECT(cond, ...)                                                           \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "%s:%d: expected %s: ", __FILE__, __LINE__, #cond);             \
      fprintf(stderr, __VA_ARGS__);                                                   \
      fprintf(stderr, "\n");                                                          \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

typedef enum { F_STOP, F_PARTITION } f_mode_t;

static pid_t f_spawn(const char* binary, const char* url, int index, bool in_netns) {
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* a SIGKILLed test leaves no worker */
    if (in_netns && pwf_netns_enter(&g_ns) != 0) {
      perror("setns into the test's network namespace");
      _exit(126);
    }
    char name[16];
    snprintf(name, sizeof(name), "w%d", index);
    setenv("PATHWAYS_TOKEN", kToken, 1);
    const char* level = getenv("PW_LOG"); /* the controller's level, for the workers too */
    const char* argv[16] = {binary, "--controller", url, "--name", name, "--backend", "cpu",
                            "--devices", "2", "--log-level", level != NULL ? level : "warn"};
    if (in_netns) argv[11] = "--no-data-plane";
    execv(binary, (char* const*)argv);
    perror("exec pathways-worker");
    _exit(127);
  }
  return pid;
}

/* One slice the job runs on: a vslice bound to it, `add`, a graph. */
typedef struct f_slice_s {
  uint32_t slice;
  pw_vslice_t vs;
  pw_executable_t add;
  pw_graph_t graph;
  bool vs_made, add_made, graph_made;
} f_slice_t;

typedef struct f_job_s {
  f_mode_t mode;
  pw_client_t* client;
  pw_runtime_t* runtime;
  pw_duration_t bound;       /* period x misses */
  f_slice_t on[F_WORKERS];
  uint32_t count;
  pw_buffer_t ones;
  bool ones_made;
  bool faulted, healed;
  uint32_t fault_failures;   /* typed failures seen in the faulted step */
  uint32_t bad;              /* untyped failures, or a wait that hit its deadline */
  uint32_t victim_steps;     /* steps run on the victim's slice after the heal */
  uint32_t lost_events, remeshed_to, grown_to, back_events;
} f_job_t;

static void f_job_release(f_job_t* j) {
  if (j->ones_made) pw_status_free(pw_buffer_release(j->client, j->ones));
  j->ones_made = false;
  for (uint32_t i = 0; i < j->count; ++i) {
    f_slice_t* s = &j->on[i];
    if (s->graph_made) pw_status_free(pw_graph_release(j->client, s->graph));
    if (s->add_made) pw_status_free(pw_executable_release(j->client, s->add));
    if (s->vs_made) pw_status_free(pw_vslice_release(j->client, s->vs));
    memset(s, 0, sizeof(*s));
  }
  j->count = 0;
}

static pw_status_t f_slice_build(f_job_t* j, f_slice_t* s) {
  static const char kAdd[] =
      "kernel add\ninput i32[8] split(0,all)\ninput i32[8] split(0,all)\n"
      "output i32[8] split(0,all)\n";
  pw_vslice_span_t span = {0};
  span.struct_size = sizeof(span);
  span.mesh = (pw_mesh_shape_t)PW_MESH_SHAPE_INIT(1, 2);
  span.slice_count = 1;
  span.slices = &s->slice;
  PW_RETURN_IF_ERROR(pw_vslice_create_spanning(j->client, &span, &s->vs));
  s->vs_made = true;
  PW_RETURN_IF_ERROR(pw_executable_compile(j->client, s->vs, kAdd, strlen(kAdd), NULL, &s->add));
  s->add_made = true;
  PW_RETURN_IF_ERROR(pw_graph_create(j->client, &s->graph));
  s->graph_made = true;
  uint32_t a, b, c;
  PW_RETURN_IF_ERROR(pw_graph_add_parameter(j->client, s->graph, s->vs, &kSpec, &a));
  PW_RETURN_IF_ERROR(pw_graph_add_parameter(j->client, s->graph, s->vs, &kSpec, &b));
  pw_value_t in[2] = {pw_value(a, 0), pw_value(b, 0)};
  PW_RETURN_IF_ERROR(pw_graph_add_compute(j->client, s->graph, "add", s->add, s->vs, in, 2, &c));
  PW_RETURN_IF_ERROR(pw_graph_add_output(j->client, s->graph, pw_value(c, 0)));
  return pw_graph_finalize(j->client, s->graph);
}

static pw_status_t f_setup(void* user, pw_elastic_t* e, const uint32_t* slices, uint32_t count,
                           bool restoring) {
  f_job_t* j = user;
  for (uint32_t i = 0; i < count; ++i) {
    memset(&j->on[i], 0, sizeof(j->on[i]));
    j->on[i].slice = slices[i];
    j->count = i + 1;
    PW_RETURN_IF_ERROR(f_slice_build(j, &j->on[i]));
  }
  int32_t host[kLen];
  for (int k = 0; k < kLen; ++k) host[k] = 1;
  PW_RETURN_IF_ERROR(pw_buffer_from_host(j->client, j->on[0].vs, &kSpec, host, sizeof(host),
                                         &j->ones));
  j->ones_made = true;
  PW_RETURN_IF_ERROR(pw_elastic_place(e, 0, j->on[0].vs, &kSpec));
  if (!restoring) {
    for (int k = 0; k < kLen; ++k) host[k] = kX0 + k;
    pw_buffer_t x;
    PW_RETURN_IF_ERROR(pw_buffer_from_host(j->client, j->on[0].vs, &kSpec, host, sizeof(host), &x));
    PW_RETURN_IF_ERROR(pw_elastic_set_state(e, 0, x));
  }
  return NULL;
}

static void f_teardown(void* user, pw_elastic_t* e) {
  (void)e;
  f_job_release(user);
}

static void f_on_event(void* user, const pw_elastic_event_t* ev) {
  f_job_t* j = user;
  printf("  event %s: step %llu slice %u, %u slices in use%s%s\n", pw_elastic_event_name(ev->kind),
         (unsigned long long)ev->step, ev->slice, ev->slice_count, ev->cause != NULL ? ": " : "",
         ev->cause != NULL ? pw_status_message(ev->cause) : "");
  if (ev->kind == PW_ELASTIC_SLICE_LOST && ev->slice == kVictim) j->lost_events++;
  if (ev->kind == PW_ELASTIC_SLICE_BACK && ev->slice == kVictim) j->back_events++;
  if (ev->kind == PW_ELASTIC_REMESHED) j->remeshed_to = ev->slice_count;
  if (ev->kind == PW_ELASTIC_GROWN && j->remeshed_to != 0) j->grown_to = ev->slice_count;
}

static pw_slice_state_t f_slice_state(f_job_t* j, uint32_t slice) {
  pw_slice_info_t si = {.struct_size = sizeof(si)};
  F_CHECK(pw_runtime_slice_info(j->runtime, slice, &si));
  return si.state;
}

/* Polls the victim's slice until it is in |want| or |timeout| passes;
 * the time it took. */
static pw_duration_t f_await_slice(f_job_t* j, pw_slice_state_t want, pw_duration_t timeout) {
  pw_time_t start = pw_clock_now();
  pw_time_t deadline = pw_deadline_from_timeout(timeout);
  while (f_slice_state(j, kVictim) != want && pw_deadline_remaining(deadline) > 0) {
    struct timespec ts = {0, 2 * F_MS};
    nanosleep(&ts, NULL);
  }
  F_EXPECT(f_slice_state(j, kVictim) == want, "slice %d still %s after %lld ms", kVictim,
           pw_slice_state_name(f_slice_state(j, kVictim)), (long long)(timeout / F_MS));
  return pw_clock_now() - start;
}

/* Cuts the victim off (|cut|) or heals it; returns when that took hold. */
static void f_fault(f_job_t* j, bool cut) {
  if (j->mode == F_STOP) {
    pid_t pid = g_children[kVictim];
    F_EXPECT(kill(pid, cut ? SIGSTOP : SIGCONT) == 0, "kill: %s", strerror(errno));
    int st = 0;
    pid_t got;
    while ((got = waitpid(pid, &st, cut ? WUNTRACED : WCONTINUED)) < 0 && errno == EINTR) {
    }
    F_EXPECT(got == pid && (cut ? WIFSTOPPED(st) : WIFCONTINUED(st)), "worker w%d not %s",
             kVictim, cut ? "stopped" : "continued");
  } else {
    F_EXPECT(pwf_netns_link(&g_ns, !cut), "ip link set %s %s failed", g_ns.host_if,
             cut ? "down" : "up");
  }
}

/* Keeps the first failure (returned by the step), checks each is typed. */
static void f_note(f_job_t* j, pw_status_t status, pw_status_t* first, bool faulting) {
  if (status == NULL) return;
  pw_status_code_t code = pw_status_code(status);
  bool typed = code == PW_STATUS_UNAVAILABLE || code == PW_STATUS_DATA_LOSS ||
               code == PW_STATUS_ABORTED || code == PW_STATUS_CANCELLED;
  if (!typed) {
    fprintf(stderr, "untyped failure (a hang if DEADLINE_EXCEEDED): %s\n",
            pw_status_message(status));
    j->bad++;
  }
  if (faulting) j->fault_failures++;
  if (*first == NULL) {
    *first = status;
  } else {
    pw_status_free(status);
  }
}

/* Step |step|'s input for slice position |i|. */
static void f_input(uint64_t step, uint32_t slice, int32_t out[kLen]) {
  for (int k = 0; k < kLen; ++k) out[k] = (int32_t)(step * 100 + slice * 10 + (uint64_t)k);
}

static pw_status_t f_step(void* user, pw_elastic_t* e, uint64_t step) {
  f_job_t* j = user;
  if (step == kHealAt && j->faulted && !j->healed) {
    f_fault(j, false);
    j->healed = true;
    pw_duration_t back = f_await_slice(j, PW_SLICE_ONLINE, 30000 * F_MS);
    printf("  healed at step %llu: slice %d online again after %lld ms\n",
           (unsigned long long)step, kVictim, (long long)(back / F_MS));
  }
  pw_time_t deadline = pw_deadline_from_timeout(20000 * F_MS);
  pw_buffer_t in[F_WORKERS] = {{0}}, out[F_WORKERS] = {{0}};
  pw_event_t* done[F_WORKERS] = {0};
  pw_status_t first = NULL;
  /* Inputs first, so the fault finds launches and reads outstanding. */
  for (uint32_t i = 1; i < j->count && first == NULL; ++i) {
    int32_t d[kLen];
    f_input(step, j->on[i].slice, d);
    first = pw_buffer_from_host(j->client, j->on[i].vs, &kSpec, d, sizeof(d), &in[i]);
  }
  bool faulting = first == NULL && step == kFaultAt && !j->faulted && j->count == F_WORKERS;
  pw_time_t cut_at = pw_clock_now();
  if (faulting) {
    f_fault(j, true);
    j->faulted = true;
  }
  for (uint32_t i = 0; i < j->count && first == NULL; ++i) {
    pw_buffer_t args[2] = {in[i], in[i]};
    if (i == 0) {
      F_CHECK(pw_elastic_state(e, 0, &args[0]));
      args[1] = j->ones;
    }
    f_note(j, pw_graph_submit(j->client, j->on[i].graph, args, 2, NULL, &out[i], 1, &done[i]),
           &first, faulting);
  }
  if (faulting) {
    pw_duration_t lost = f_await_slice(j, PW_SLICE_LOST, 10 * (j->bound + 100 * F_MS));
    printf("  step %llu: w%d cut off; its slice lost after %lld ms (period x misses %lld ms)\n",
           (unsigned long long)step, kVictim, (long long)((pw_clock_now() - cut_at) / F_MS),
           (long long)(j->bound / F_MS));
    (void)lost;
  }
  for (uint32_t i = 0; i < j->count; ++i) {
    if (done[i] != NULL) f_note(j, pw_event_wait(done[i], deadline), &first, faulting);
  }
  bool used_victim = false;
  for (uint32_t i = 1; i < j->count; ++i) {
    if (out[i].id == 0) continue;
    int32_t got[kLen], want[kLen];
    pw_status_t s = pw_buffer_to_host(j->client, out[i], got, sizeof(got), deadline);
    f_input(step, j->on[i].slice, want);
    for (int k = 0; k < kLen && s == NULL; ++k) {
      if (got[k] != 2 * want[k]) {
        fprintf(stderr, "step %llu slice %u: element %d is %d, not %d\n",
                (unsigned long long)step, j->on[i].slice, k, got[k], 2 * want[k]);
        exit(1);
      }
    }
    if (s == NULL && j->on[i].slice == kVictim) used_victim = true;
    f_note(j, s, &first, faulting);
  }
  for (uint32_t i = 0; i < F_WORKERS; ++i) {
    if (done[i] != NULL) pw_event_release(done[i]);
    if (in[i].id != 0) pw_status_free(pw_buffer_release(j->client, in[i]));
    if (i > 0 && out[i].id != 0) pw_status_free(pw_buffer_release(j->client, out[i]));
  }
  if (first != NULL) {
    if (out[0].id != 0) pw_status_free(pw_buffer_release(j->client, out[0]));
    printf("  step %llu failed: %s\n", (unsigned long long)step, pw_status_message(first));
    return first;
  }
  if (used_victim && j->healed) j->victim_steps++;
  return pw_elastic_set_state(e, 0, out[0]);
}

/* The runtime over the four workers' proxies: slice k on worker "wk". */
static pw_runtime_t* f_runtime(pw_remote_t* remote) {
  pw_backend_t proxies[F_WORKERS];
  uint32_t by_name[F_WORKERS];
  for (uint32_t i = 0; i < F_WORKERS; ++i) {
    pw_remote_worker_info_t info = {.struct_size = sizeof(info)};
    F_CHECK(pw_remote_worker_info(remote, i, &info));
    F_EXPECT(info.device_count == 2 && info.attached && info.name[0] == 'w' &&
                 info.name[1] >= '0' && info.name[1] < '0' + F_WORKERS,
             "worker %u ('%s'): %u devices", i, info.name, info.device_count);
    by_name[info.name[1] - '0'] = i;
  }
  for (uint32_t k = 0; k < F_WORKERS; ++k) F_CHECK(pw_remote_backend(remote, by_name[k], &proxies[k]));
  pw_slice_desc_t slices[F_WORKERS];
  for (uint32_t k = 0; k < F_WORKERS; ++k) {
    slices[k] = (pw_slice_desc_t){NULL, PW_MESH_SHAPE_INIT(1, 2), k, 0, k};
  }
  pw_runtime_options_t ro = {0};
  ro.struct_size = sizeof(ro);
  ro.backends = proxies;
  ro.backend_count = F_WORKERS;
  ro.slices = slices;
  ro.slice_count = F_WORKERS;
  F_CHECK(pw_remote_transport(remote, &ro.transport));
  ro.health_poll_ns = 20 * F_MS;
  pw_runtime_t* runtime = NULL;
  F_CHECK(pw_runtime_create(&ro, &runtime));
  return runtime;
}

/* Runs the elastic job and checks what it did. */
static void f_train(f_job_t* j, pw_remote_t* remote) {
  pw_elastic_options_t eo;
  pw_elastic_options_init(&eo);
  eo.slice_mesh = (pw_mesh_shape_t)PW_MESH_SHAPE_INIT(1, 2);
  eo.min_slices = 2;
  eo.snapshot_every = kEvery;
  eo.state_count = 1;
  eo.drain_deadline_ns = 20000 * F_MS;
  pw_elastic_job_t cb = {sizeof(cb), j, f_setup, f_teardown, f_step, f_on_event};
  pw_elastic_t* elastic = NULL;
  F_CHECK(pw_elastic_create(j->client, &eo, &cb, &elastic));
  F_CHECK(pw_elastic_run(elastic, 0, kSteps));
  pw_buffer_t x;
  int32_t got[kLen];
  F_CHECK(pw_elastic_state(elastic, 0, &x));
  F_CHECK(pw_buffer_to_host(j->client, x, got, sizeof(got), pw_deadline_from_timeout(20000 * F_MS)));
  for (int k = 0; k < kLen; ++k) {
    F_EXPECT(got[k] == kX0 + k + kSteps, "state[%d] = %d, an uninterrupted run gives %d", k,
             got[k], kX0 + k + kSteps);
  }
  pw_elastic_stats_t stats = {.struct_size = sizeof(stats)};
  F_CHECK(pw_elastic_stats(elastic, &stats));
  uint32_t final_count = pw_elastic_slice_count(elastic);
  F_CHECK(pw_elastic_destroy(elastic));
  printf("  %llu steps (%llu replayed), %u recoveries, %u growths, %u snapshots; %u typed "
         "failures in the cut step; %u steps on w%d's slice after it came back\n",
         (unsigned long long)stats.steps_completed, (unsigned long long)stats.steps_replayed,
         stats.recoveries, stats.growths, stats.snapshots, j->fault_failures, j->victim_steps,
         kVictim);
  F_EXPECT(j->faulted && j->healed, "the fault was not injected (faulted %d healed %d)",
           j->faulted, j->healed);
  F_EXPECT(j->bad == 0, "%u failures were not typed (see above)", j->bad);
  F_EXPECT(j->fault_failures >= 1, "nothing outstanding on the cut worker failed");
  F_EXPECT(j->lost_events >= 1, "no SLICE_LOST event for slice %d", kVictim);
  F_EXPECT(j->remeshed_to == F_WORKERS - 1, "re-meshed to %u slices, not %d", j->remeshed_to,
           F_WORKERS - 1);
  F_EXPECT(j->grown_to == F_WORKERS, "grew back to %u slices, not %d", j->grown_to, F_WORKERS);
  F_EXPECT(final_count == F_WORKERS, "the run ended on %u slices", final_count);
  F_EXPECT(j->victim_steps >= 1, "no step ran on slice %d after it came back", kVictim);
  F_EXPECT(stats.recoveries >= 1 && stats.growths >= 1, "%u recoveries, %u growths",
           stats.recoveries, stats.growths);
  for (uint32_t i = 0; i < F_WORKERS; ++i) {
    pw_remote_worker_info_t info = {.struct_size = sizeof(info)};
    F_CHECK(pw_remote_worker_info(remote, i, &info));
    bool victim = info.name[1] - '0' == kVictim;
    F_EXPECT(info.attached && info.sessions == (victim ? 2u : 1u) &&
                 info.losses == (victim ? 1u : 0u),
             "worker %s: attached %d, %u sessions, %u losses", info.name, info.attached,
             info.sessions, info.losses);
  }
}

/* SIGTERM to every worker: each must exit 0 within a generous bound. */
static void f_stop_workers(void) {
  for (int i = 0; i < F_WORKERS; ++i) kill(g_children[i], SIGTERM);
  pw_time_t deadline = pw_deadline_from_timeout(15000 * F_MS);
  for (int i = 0; i < F_WORKERS; ++i) {
    int st = 0;
    pid_t got = 0;
    while ((got = waitpid(g_children[i], &st, WNOHANG)) == 0 && pw_deadline_remaining(deadline) > 0) {
      struct timespec ts = {0, 5 * F_MS};
      nanosleep(&ts, NULL);
    }
    F_EXPECT(got == g_children[i], "worker w%d did not exit within 15 s of SIGTERM", i);
    g_children[i] = 0;
    F_EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker w%d: %s %d", i,
             WIFEXITED(st) ? "exit status" : "killed by signal",
             WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
  }
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[2], "stop") != 0 && strcmp(argv[2], "partition") != 0)) {
    fprintf(stderr, "usage: test_remote_faults PATH_TO_PATHWAYS_WORKER stop|partition\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN);
  atexit(f_cleanup);
  static const int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGABRT};
  for (size_t i = 0; i < sizeof(kSignals) / sizeof(kSignals[0]); ++i) {
    signal(kSignals[i], f_on_signal);
  }
  f_job_t job = {0};
  job.mode = strcmp(argv[2], "stop") == 0 ? F_STOP : F_PARTITION;
  char listen[64] = "tcp://127.0.0.1:0";
  if (job.mode == F_PARTITION) {
    char why[256] = "";
    if (!pwf_netns_create(&g_ns, why, sizeof(why))) {
      printf("SKIPPED: remote_faults partition: cannot make a network namespace: %s\n", why);
      return F_SKIP;
    }
    snprintf(listen, sizeof(listen), "tcp://%s:0", g_ns.host_ip);
    printf("namespace %s: %s (%s) <-> %s (%s)\n", g_ns.name, g_ns.host_if, g_ns.host_ip,
           g_ns.peer_if, g_ns.peer_ip);
  }
  pw_remote_options_t o;
  pw_remote_options_init(&o);
  o.listen_url = listen;
  o.token = kToken;
  o.token_size = strlen(kToken);
  o.heartbeat_ns = 50 * F_MS;
  o.heartbeat_misses = 10; /* 500 ms: a loaded 2-core machine stalls a process for 300 */
  pw_remote_t* remote = NULL;
  F_CHECK(pw_remote_create(&o, &remote));
  for (int i = 0; i < F_WORKERS; ++i) {
    g_children[i] = f_spawn(argv[1], pw_remote_url(remote), i,
                            job.mode == F_PARTITION && i == kVictim);
    F_EXPECT(g_children[i] > 0, "fork: %s", strerror(errno));
  }
  F_CHECK(pw_remote_wait_workers(remote, F_WORKERS, 30000 * F_MS));
  job.runtime = f_runtime(remote);
  job.bound = o.heartbeat_ns * o.heartbeat_misses;
  F_CHECK(pw_client_create(job.runtime, NULL, &job.client));
  printf("remote faults (%s): 4 workers at %s, w%d cut off at step %d, healed at step %d\n",
         argv[2], pw_remote_url(remote), kVictim, kFaultAt, kHealAt);
  f_train(&job, remote);
  F_CHECK(pw_client_destroy(job.client));
  F_CHECK(pw_runtime_destroy(job.runtime));
  pw_remote_destroy(remote);
  f_stop_workers();
  pwf_netns_destroy(&g_ns);
  /* Nothing left behind: no child, no namespace, no veth. */
  errno = 0;
  F_EXPECT(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD, "a child is left (%s)",
           strerror(errno));
  F_EXPECT(!pwf_netns_exists(&g_ns), "namespace %s or veth %s is left", g_ns.name, g_ns.host_if);
  printf("OK: remote faults (%s)\n", argv[2]);
  return 0;
}
