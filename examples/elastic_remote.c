/* pathways-elastic-remote: elastic data-parallel training across worker
 * processes, checked bit for bit against the same job in one process.
 *
 * Four slices of two CPU devices, each slice in its own pathways-worker
 * process (the multi-host runtime: include/pathways/remote.h). A virtual
 * slice spans one backend only, so across hosts the job is data parallel
 * the Pathways way: every slice computes the gradient of its share of the
 * batch (240 examples) with an all-reduce over its own devices, the
 * partial gradients move to the first slice through transfer nodes (the
 * data plane, worker to worker), are summed there and update the weights,
 * which move back to every slice for the next step. The elastic helper
 * (pathways/elastic.h) snapshots the weights every 5 steps.
 *
 * The job runs twice with the same failure schedule: first in this
 * process (one CPU backend of 8 devices; at step 12 a device of slice 2
 * fails, at step 20 it is repaired), then across the workers (at step 12
 * the worker of slice 2 is killed with SIGKILL, at step 20 a new one is
 * started under the same name and registers again). Both runs lose slice
 * 2, restore the snapshot of step 10 onto the other 3, and grow back to 4
 * at the next snapshot boundary. Every step's loss and the final weights
 * must be equal bit for bit between the two runs, and the weights must
 * match the plain C reference (an uninterrupted full-batch descent)
 * within 1e-4. Every worker process is reaped on every exit.
 *
 * Usage: pathways-elastic-remote [--worker PATH] [--steps N]
 *        [--kill-at K] [--repair-at R]
 * PATH defaults to ../tools/pathways-worker next to this binary. */
#define _POSIX_C_SOURCE 200809L
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "elastic_common.h"
#include "logreg_common.h"
#include "pathways/elastic.h"
#include "pathways/pathways.h"
#include "pathways/remote.h"

#define PW_EXAMPLE_NAME "pathways-elastic-remote"
#include "example_check.h"

enum { kN = 240, kD = 8, kPer = 2, kSlices = 4, kVictim = 2, kMaxSteps = 1000 };
static const double kLearningRate = 0.5;
static const char kToken[] = "pathways-elastic-remote";
#define MS 1000000LL

static const pw_array_spec_t kWs = {PW_DTYPE_F32, {2, {kD, 1}}, PW_SHARDING_REPLICATED_INIT};

/* How the run makes slice kVictim fail and come back. */
typedef struct fault_s {
  pw_backend_t cpu;          /* in one process: the CPU backend */
  pw_remote_t* remote;       /* across processes: the controller */
  const char* worker_path;
} fault_t;

/* The worker processes, by slice: reaped at exit whatever happened. */
static pid_t g_workers[kSlices];

static void reap_workers(void) {
  for (int s = 0; s < kSlices; ++s) {
    if (g_workers[s] > 0) {
      kill(g_workers[s], SIGKILL);
      waitpid(g_workers[s], NULL, 0);
      g_workers[s] = 0;
    }
  }
}

static void start_worker(const fault_t* f, int slice) {
  char name[16], devices[8];
  snprintf(name, sizeof(name), "w%d", slice);
  snprintf(devices, sizeof(devices), "%d", kPer);
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    perror(PW_EXAMPLE_NAME ": fork");
    exit(1);
  }
  if (pid == 0) {
    setenv("PATHWAYS_TOKEN", kToken, 1);
    execl(f->worker_path, f->worker_path, "--controller", pw_remote_url(f->remote), "--name",
          name, "--backend", "cpu", "--devices", devices, "--log-level", "error", (char*)NULL);
    fprintf(stderr, "%s: cannot run %s\n", PW_EXAMPLE_NAME, f->worker_path);
    _exit(127);
  }
  g_workers[slice] = pid;
}

typedef struct job_s {
  pw_client_t* client;
  pw_runtime_t* runtime;
  fault_t* fault;
  const float* x;
  const float* y;
  /* Built by setup on the current slices. */
  uint32_t count;
  pw_vslice_t vs[kSlices];
  pw_example_logreg_programs_t prog[kSlices];
  pw_executable_t add;
  pw_graph_t graph;
  pw_buffer_t X[kSlices], Y[kSlices];
  bool built;
  int kill_at, repair_at;
  float losses[kMaxSteps];
} job_t;

static void job_release(job_t* j) {
  if (!j->built) return;
  for (uint32_t i = 0; i < j->count; ++i) {
    pw_status_free(pw_buffer_release(j->client, j->X[i]));
    pw_status_free(pw_buffer_release(j->client, j->Y[i]));
    pw_executable_t* exes[] = {&j->prog[i].logits, &j->prog[i].dloss, &j->prog[i].grad_partial,
                               &j->prog[i].grad_reduce, &j->prog[i].sgd};
    for (size_t k = 0; k < sizeof(exes) / sizeof(exes[0]); ++k) {
      if (exes[k]->id != 0) pw_status_free(pw_executable_release(j->client, *exes[k]));
    }
    if (j->vs[i].id != 0) pw_status_free(pw_vslice_release(j->client, j->vs[i]));
  }
  if (j->add.id != 0) pw_status_free(pw_executable_release(j->client, j->add));
  if (j->graph.id != 0) pw_status_free(pw_graph_release(j->client, j->graph));
  memset(j->vs, 0, sizeof(j->vs));
  memset(j->prog, 0, sizeof(j->prog));
  memset(j->X, 0, sizeof(j->X));
  memset(j->Y, 0, sizeof(j->Y));
  memset(&j->add, 0, sizeof(j->add));
  memset(&j->graph, 0, sizeof(j->graph));
  j->built = false;
}

/* The step's graph: the weights (on the first slice) move to every slice,
 * each slice's gradient of its rows moves back and they are summed. */
static pw_status_t job_graph(job_t* j) {
  pw_client_t* c = j->client;
  PW_RETURN_IF_ERROR(pw_graph_create(c, &j->graph));
  pw_graph_t g = j->graph;
  int rows = kN / (int)j->count;
  pw_array_spec_t xs = {PW_DTYPE_F32, {2, {(uint64_t)rows, kD}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
  pw_array_spec_t ys = {PW_DTYPE_F32, {2, {(uint64_t)rows, 1}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
  uint32_t X[kSlices], Y[kSlices], W, sum = 0;
  PW_RETURN_IF_ERROR(pw_graph_add_parameter(c, g, j->vs[0], &kWs, &W));
  for (uint32_t i = 0; i < j->count; ++i) {
    PW_RETURN_IF_ERROR(pw_graph_add_parameter(c, g, j->vs[i], &xs, &X[i]));
    PW_RETURN_IF_ERROR(pw_graph_add_parameter(c, g, j->vs[i], &ys, &Y[i]));
  }
  for (uint32_t i = 0; i < j->count; ++i) {
    uint32_t Wi = W, z, gi;
    if (i > 0) {
      PW_RETURN_IF_ERROR(pw_graph_add_transfer(c, g, "weights_out", pw_value(W, 0), j->vs[i],
                                               pw_sharding_replicated(), &Wi));
    }
    PW_RETURN_IF_ERROR(
        pw_example_logreg_gradient(c, g, j->vs[i], &j->prog[i], X[i], Y[i], Wi, &z, &gi));
    if (i == 0) {
      sum = gi;
      continue;
    }
    uint32_t back;
    PW_RETURN_IF_ERROR(pw_graph_add_transfer(c, g, "gradient_in", pw_value(gi, 0), j->vs[0],
                                             pw_sharding_replicated(), &back));
    pw_value_t in[2] = {pw_value(sum, 0), pw_value(back, 0)};
    PW_RETURN_IF_ERROR(pw_graph_add_compute(c, g, "gradient_sum", j->add, j->vs[0], in, 2, &sum));
  }
  uint32_t w2;
  pw_value_t in[2] = {pw_value(W, 0), pw_value(sum, 0)};
  PW_RETURN_IF_ERROR(pw_graph_add_compute(c, g, "sgd", j->prog[0].sgd, j->vs[0], in, 2, &w2));
  PW_RETURN_IF_ERROR(pw_graph_add_output(c, g, pw_value(w2, 0)));
  return pw_graph_finalize(c, g);
}

static pw_status_t job_setup(void* user, pw_elastic_t* e, const uint32_t* slices, uint32_t count,
                             bool restoring) {
  job_t* j = user;
  j->count = count;
  j->built = true;
  int rows = kN / (int)count;
  for (uint32_t i = 0; i < count; ++i) {
    pw_vslice_span_t span = {0};
    span.struct_size = sizeof(span);
    span.mesh = (pw_mesh_shape_t)PW_MESH_SHAPE_INIT(1, kPer);
    span.slice_count = 1;
    span.slices = &slices[i];
    PW_RETURN_IF_ERROR(pw_vslice_create_spanning(j->client, &span, &j->vs[i]));
    PW_RETURN_IF_ERROR(pw_example_logreg_compile(j->client, j->vs[i], rows, kD, kPer, kN,
                                                 kLearningRate, &j->prog[i]));
    /* The data loader: this slice's rows of the batch. */
    pw_array_spec_t xs = {PW_DTYPE_F32, {2, {(uint64_t)rows, kD}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
    pw_array_spec_t ys = {PW_DTYPE_F32, {2, {(uint64_t)rows, 1}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
    PW_RETURN_IF_ERROR(pw_buffer_from_host(j->client, j->vs[i], &xs, j->x + (size_t)i * rows * kD,
                                           sizeof(float) * (size_t)rows * kD, &j->X[i]));
    PW_RETURN_IF_ERROR(pw_buffer_from_host(j->client, j->vs[i], &ys, j->y + (size_t)i * rows,
                                           sizeof(float) * (size_t)rows, &j->Y[i]));
  }
  static const char kAdd[] =
      "kernel add\ninput f32[8,1] replicated\ninput f32[8,1] replicated\n"
      "output f32[8,1] replicated\n";
  PW_RETURN_IF_ERROR(pw_example_compile(j->client, j->vs[0], kAdd, &j->add));
  PW_RETURN_IF_ERROR(job_graph(j));
  PW_RETURN_IF_ERROR(pw_elastic_place(e, 0, j->vs[0], &kWs));
  if (!restoring) {
    float w0[kD] = {0};
    pw_buffer_t w;
    PW_RETURN_IF_ERROR(pw_buffer_from_host(j->client, j->vs[0], &kWs, w0, sizeof(w0), &w));
    PW_RETURN_IF_ERROR(pw_elastic_set_state(e, 0, w));
  }
  return NULL;
}

static void job_teardown(void* user, pw_elastic_t* e) {
  (void)e;
  job_release(user);
}

/* Waits (30 s at most) until the runtime sees slice kVictim lost (|lost|)
 * or back, so that both runs change their mesh at the same step. */
static pw_status_t job_await_victim(job_t* j, bool lost) {
  pw_time_t deadline = pw_deadline_from_timeout(30000 * MS);
  for (;;) {
    pw_slice_info_t si = {.struct_size = sizeof(si)};
    PW_RETURN_IF_ERROR(pw_runtime_slice_info(j->runtime, kVictim, &si));
    if ((si.state == PW_SLICE_LOST) == lost) return NULL;
    if (pw_deadline_remaining(deadline) <= 0) {
      return pw_status_make(PW_STATUS_DEADLINE_EXCEEDED, "slice %d still %s after 30 s", kVictim,
                            pw_slice_state_name(si.state));
    }
    struct timespec ts = {0, 2 * MS};
    nanosleep(&ts, NULL);
  }
}

static pw_status_t job_fault(job_t* j, uint64_t step) {
  fault_t* f = j->fault;
  if ((int)step == j->kill_at) {
    j->kill_at = -1;
    if (f->remote == NULL) {
      printf("step %llu: device %d (slice %d) fails\n", (unsigned long long)step,
             kVictim * kPer + 1, kVictim);
      PW_RETURN_IF_ERROR(pw_cpu_backend_set_health(f->cpu, kVictim * kPer + 1, PW_DEVICE_FAILED));
    } else {
      printf("step %llu: the worker of slice %d is killed (SIGKILL)\n", (unsigned long long)step,
             kVictim);
      kill(g_workers[kVictim], SIGKILL);
      waitpid(g_workers[kVictim], NULL, 0);
      g_workers[kVictim] = 0;
    }
    PW_RETURN_IF_ERROR(job_await_victim(j, true));
  }
  if ((int)step == j->repair_at) {
    j->repair_at = -1;
    if (f->remote == NULL) {
      printf("step %llu: device %d repaired\n", (unsigned long long)step, kVictim * kPer + 1);
      PW_RETURN_IF_ERROR(pw_cpu_backend_set_health(f->cpu, kVictim * kPer + 1, PW_DEVICE_HEALTHY));
    } else {
      printf("step %llu: a new worker for slice %d starts\n", (unsigned long long)step, kVictim);
      start_worker(f, kVictim);
    }
    PW_RETURN_IF_ERROR(job_await_victim(j, false));
  }
  return NULL;
}

static pw_status_t job_step(void* user, pw_elastic_t* e, uint64_t step) {
  job_t* j = user;
  PW_RETURN_IF_ERROR(job_fault(j, step));
  pw_buffer_t args[1 + 2 * kSlices];
  PW_RETURN_IF_ERROR(pw_elastic_state(e, 0, &args[0]));
  for (uint32_t i = 0; i < j->count; ++i) {
    args[1 + 2 * i] = j->X[i];
    args[2 + 2 * i] = j->Y[i];
  }
  pw_buffer_t next;
  pw_event_t* done;
  PW_RETURN_IF_ERROR(
      pw_graph_submit(j->client, j->graph, args, 1 + 2 * j->count, NULL, &next, 1, &done));
  pw_status_t status = pw_event_wait(done, pw_deadline_from_timeout(30000 * MS));
  pw_event_release(done);
  float w[kD];
  if (status == NULL) {
    status = pw_buffer_to_host(j->client, next, w, sizeof(w), pw_deadline_from_timeout(30000 * MS));
  }
  if (status != NULL) {
    pw_status_free(pw_buffer_release(j->client, next));
    return status;
  }
  PW_RETURN_IF_ERROR(pw_elastic_set_state(e, 0, next));
  j->losses[step] = pw_example_logreg_loss(kN, kD, j->x, j->y, w);
  printf("step %llu loss %.6f slices %u\n", (unsigned long long)step, j->losses[step],
         pw_elastic_slice_count(e));
  return NULL;
}

static void job_event(void* user, const pw_elastic_event_t* ev) {
  (void)user;
  pw_example_elastic_print_event(ev);
}

typedef struct run_result_s {
  float w[kD];
  pw_elastic_stats_t stats;
  uint32_t final_slices;
} run_result_t;

/* The whole elastic run on |runtime|'s 4 slices. */
static void run_job(pw_runtime_t* runtime, fault_t* f, job_t* job, int steps, run_result_t* out) {
  pw_client_t* client;
  CHECK(pw_client_create(runtime, NULL, &client));
  job->client = client;
  job->runtime = runtime;
  job->fault = f;
  const char* state_names[1];
  pw_elastic_options_t eo = pw_example_elastic_options(kPer, state_names);
  pw_elastic_job_t cb = {sizeof(cb), job, job_setup, job_teardown, job_step, job_event};
  pw_elastic_t* elastic;
  CHECK(pw_elastic_create(client, &eo, &cb, &elastic));
  CHECK(pw_elastic_run(elastic, 0, (uint64_t)steps));
  pw_buffer_t wbuf;
  CHECK(pw_elastic_state(elastic, 0, &wbuf));
  CHECK(pw_buffer_to_host(client, wbuf, out->w, sizeof(out->w), pw_deadline_from_timeout(30000 * MS)));
  out->stats = (pw_elastic_stats_t){.struct_size = sizeof(out->stats)};
  CHECK(pw_elastic_stats(elastic, &out->stats));
  out->final_slices = pw_elastic_slice_count(elastic);
  CHECK(pw_elastic_destroy(elastic));
  CHECK(pw_client_destroy(client));
}

static pw_runtime_t* make_runtime(const pw_backend_t* backends, uint32_t backend_count,
                                  pw_transport_t transport) {
  pw_slice_desc_t slices[kSlices];
  static char names[kSlices][16];
  for (uint32_t s = 0; s < kSlices; ++s) {
    snprintf(names[s], sizeof(names[s]), "slice%u", s);
    bool one = backend_count == 1;
    slices[s] = (pw_slice_desc_t){names[s], PW_MESH_SHAPE_INIT(1, kPer), one ? 0 : s, one ? s * kPer : 0, s};
  }
  pw_runtime_options_t ro = {0};
  ro.struct_size = sizeof(ro);
  ro.backends = backends;
  ro.backend_count = backend_count;
  ro.slices = slices;
  ro.slice_count = kSlices;
  ro.transport = transport;
  ro.health_poll_ns = 1 * MS; /* sees the slice come back */
  pw_runtime_t* runtime;
  CHECK(pw_runtime_create(&ro, &runtime));
  return runtime;
}

/* The same job in this process: one CPU backend of 8 devices. */
static void run_local(job_t* job, int steps, run_result_t* out) {
  pw_cpu_backend_options_t cpu;
  pw_cpu_backend_options_init(&cpu);
  cpu.device_count = kSlices * kPer;
  cpu.worker_count = 2;
  fault_t f = {0};
  CHECK(pw_cpu_backend_create(&cpu, &f.cpu));
  pw_runtime_t* runtime = make_runtime(&f.cpu, 1, (pw_transport_t){NULL, NULL});
  run_job(runtime, &f, job, steps, out);
  CHECK(pw_runtime_destroy(runtime));
}

/* Across 4 worker processes, slice s on the worker named "ws". */
static void run_remote(const char* worker_path, job_t* job, int steps, run_result_t* out) {
  pw_remote_options_t o;
  pw_remote_options_init(&o);
  o.token = kToken;
  o.token_size = strlen(kToken);
  o.heartbeat_ns = 100 * MS;
  o.heartbeat_misses = 5;
  fault_t f = {0};
  f.worker_path = worker_path;
  CHECK(pw_remote_create(&o, &f.remote));
  for (int s = 0; s < kSlices; ++s) start_worker(&f, s);
  CHECK(pw_remote_wait_workers(f.remote, kSlices, 30000 * MS));
  pw_backend_t proxies[kSlices];
  for (uint32_t i = 0; i < kSlices; ++i) {
    pw_remote_worker_info_t info = {.struct_size = sizeof(info)};
    CHECK(pw_remote_worker_info(f.remote, i, &info));
    int slice = info.name[0] == 'w' ? atoi(info.name + 1) : -1;
    if (slice < 0 || slice >= kSlices || info.device_count != kPer) {
      fprintf(stderr, "%s: unexpected worker '%s' (%u devices)\n", PW_EXAMPLE_NAME, info.name,
              info.device_count);
      exit(1);
    }
    CHECK(pw_remote_backend(f.remote, i, &proxies[slice]));
  }
  printf("%d workers registered at %s\n", kSlices, pw_remote_url(f.remote));
  pw_transport_t transport;
  CHECK(pw_remote_transport(f.remote, &transport));
  pw_runtime_t* runtime = make_runtime(proxies, kSlices, transport);
  run_job(runtime, &f, job, steps, out);
  CHECK(pw_runtime_destroy(runtime));
  pw_remote_destroy(f.remote);
  reap_workers();
}

static const char* default_worker_path(char* buf, size_t size) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "pathways-worker";
  self[n] = '\0';
  snprintf(buf, size, "%s/../tools/pathways-worker", dirname(self));
  return buf;
}

/* 0 when |got| matches |want| bit for bit (and the reference), else 1. */
static int compare_runs(const job_t* local, const job_t* remote, const run_result_t* want,
                        const run_result_t* got, const float* ref, int steps) {
  int bad = 0;
  for (int s = 0; s < steps; ++s) {
    if (memcmp(&local->losses[s], &remote->losses[s], sizeof(float)) != 0) {
      fprintf(stderr, "%s: step %d: loss %.9g across workers, %.9g in one process\n",
              PW_EXAMPLE_NAME, s, (double)remote->losses[s], (double)local->losses[s]);
      bad = 1;
    }
  }
  if (memcmp(want->w, got->w, sizeof(want->w)) != 0) {
    fprintf(stderr, "%s: the final weights differ from the run in one process\n", PW_EXAMPLE_NAME);
    bad = 1;
  }
  double worst = 0;
  for (int k = 0; k < kD; ++k) worst = fmax(worst, fabs((double)got->w[k] - ref[k]));
  printf("final loss %.6f, max weight difference to the uninterrupted reference %.2e; "
         "across workers: %u recoveries, %u growths, %llu steps replayed, %u slices at the end\n",
         (double)remote->losses[steps - 1], worst, got->stats.recoveries, got->stats.growths,
         (unsigned long long)got->stats.steps_replayed, got->final_slices);
  if (worst > 1e-4) {
    fprintf(stderr, "%s: the weights differ from the uninterrupted reference\n", PW_EXAMPLE_NAME);
    bad = 1;
  }
  if (got->stats.recoveries != want->stats.recoveries || got->stats.growths != want->stats.growths) {
    fprintf(stderr, "%s: %u recoveries and %u growths across workers, %u and %u in one process\n",
            PW_EXAMPLE_NAME, got->stats.recoveries, got->stats.growths, want->stats.recoveries,
            want->stats.growths);
    bad = 1;
  }
  return bad;
}

static int usage(const char* bad) {
  fprintf(stderr, "%s: unknown argument '%s'\nusage: %s [--worker PATH] [--steps N] "
          "[--kill-at K] [--repair-at R]\n", PW_EXAMPLE_NAME, bad, PW_EXAMPLE_NAME);
  return 2;
}

int main(int argc, char** argv) {
  int steps = 40, kill_at = 12, repair_at = 20;
  char path_buf[PATH_MAX + 32];
  const char* worker_path = default_worker_path(path_buf, sizeof(path_buf));
  for (int i = 1; i < argc; ++i) {
    if (i + 1 < argc && strcmp(argv[i], "--worker") == 0) {
      worker_path = argv[++i];
    } else if (i + 1 < argc && strcmp(argv[i], "--steps") == 0) {
      steps = atoi(argv[++i]);
    } else if (i + 1 < argc && strcmp(argv[i], "--kill-at") == 0) {
      kill_at = atoi(argv[++i]);
    } else if (i + 1 < argc && strcmp(argv[i], "--repair-at") == 0) {
      repair_at = atoi(argv[++i]);
    } else {
      return usage(argv[i]);
    }
  }
  if (steps < 1 || steps > kMaxSteps) {
    fprintf(stderr, "%s: --steps must be 1 to %d\n", PW_EXAMPLE_NAME, kMaxSteps);
    return 2;
  }
  if (access(worker_path, X_OK) != 0) {
    fprintf(stderr, "%s: no worker binary at %s (give --worker PATH)\n", PW_EXAMPLE_NAME,
            worker_path);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  atexit(reap_workers);
  float* x = malloc(sizeof(float) * kN * kD);
  float* y = malloc(sizeof(float) * kN);
  static job_t local, remote;
  if (x == NULL || y == NULL) return 1;
  pw_example_logreg_data(kN, kD, x, y);
  local = (job_t){.x = x, .y = y, .kill_at = kill_at, .repair_at = repair_at};
  remote = local;
  run_result_t want, got;
  printf("libpathways %s: elastic training on %d CPU slices of %d devices, in one process\n",
         pw_version_string(), kSlices, kPer);
  run_local(&local, steps, &want);
  printf("the same across %d pathways-worker processes (%s)\n", kSlices, worker_path);
  run_remote(worker_path, &remote, steps, &got);
  float ref[kD] = {0}, ref_loss = 0;
  pw_example_logreg_reference(kN, kD, x, y, steps, kLearningRate, ref, &ref_loss);
  int bad = compare_runs(&local, &remote, &want, &got, ref, steps);
  free(x);
  free(y);
  if (kill_at >= 0 && kill_at < steps && got.stats.recoveries == 0) {
    fprintf(stderr, "%s: FAILED: the lost worker was not recovered from\n", PW_EXAMPLE_NAME);
    return 1;
  }
  if (bad) {
    fprintf(stderr, "%s: FAILED\n", PW_EXAMPLE_NAME);
    return 1;
  }
  printf("OK: training across workers equals the run in one process bit for bit\n");
  return 0;
}
