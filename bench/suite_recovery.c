/* pw-bench recovery: how long an elastic job (include/pathways/elastic.h)
 * takes to get going again after it loses a slice, against a plain memcpy
 * of its state measured in the same process, runs interleaved.
 *
 * The job, on the CPU backend: --slices slices of --per-slice devices, one
 * spanning virtual slice over every healthy slice, a state of --state-mib
 * MiB of f32 split over all its devices (its length a multiple of the
 * device counts of both meshes, so it splits evenly over slices x per and
 * (slices - 1) x per), and one step: state + 1 (the kernel "bench.inc",
 * registered here; a unary kernel, so setup loads no second buffer of the
 * state's size that the recovery would also pay for). The helper snapshots
 * every --snapshot-every steps (default 4); at step --fail-at (default 6)
 * one device of slice --slices - 2 fails:
 *   injected  the step marks the device FAILED (pw_cpu_backend_set_health)
 *             before it submits; its launch there completes UNAVAILABLE
 *             and the runtime loses the slice;
 *   watchdog  bench.inc hangs on that device (the backend loses the
 *             launch: it never completes); the runtime's launch deadline
 *             (--deadline-ms; default max(50 ms, 4 x memcpy_cold_ms)) with
 *             deadline_loses_slice fails it and loses the slice. The hung
 *             kernel is let go after the run without touching its buffers
 *             (its late completion is ignored by the runtime), and holds
 *             one pool worker meanwhile, so this mode runs one worker more.
 * The helper restores the snapshot of step --snapshot-every x k onto the
 * smaller mesh and replays from there; the run ends after step --fail-at
 * on the smaller mesh. Each run gets a fresh backend and runtime (not
 * timed); the final state is checked (every element = step count).
 *
 * Figures per run: total_ms, from the failure (just before the failing
 * step's submission) to the end of the first completed step on the smaller
 * mesh, split with pw_elastic_stats into drain_ms (the job's outstanding
 * work resolving), restore_ms (teardown, setup on the new slices and the
 * snapshot's restore; setup_ms of it is the job's own setup) and
 * first_step_ms; detect_ms is the rest (the failing step resolving, the
 * runtime and then the helper seeing the loss; detect_event_ms of it is
 * the helper's last_detect_ns, from the topology event to the helper
 * acting). recovery_ms is drain + restore + first step for injected
 * failures (detection excluded), total_ms for the watchdog (detection and
 * its deadline included). memcpy_ms: a warmed memcpy of the state's bytes,
 * median of 3, measured before each run. ratio = recovery_ms / memcpy_ms;
 * the target (issue 22) is 2.
 *
 * pw-bench recovery [--state-mib 64] [--slices 4] [--per-slice 2] [--runs 5]
 *                   [--detect injected|watchdog] [--snapshot-every 4]
 *                   [--fail-at 6] [--workers 2] [--deadline-ms D] [--json]
 *                   [--block-cache-mib N]  (the CPU backend's block cache:
 *                   0 off; default the backend's default, one device's memory)
 * stderr: one row per run and the medians; stdout: one JSON summary
 * ("bench":"recovery"; medians, min and max), and with --json one JSON
 * line per run too ("bench":"recovery-run"). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_try.h"
#include "bench_util.h"
#include "pathways/backends/cpu.h"
#include "pathways/elastic.h"
#include "pathways/pathways.h"
#include "suites.h"

#define PW_REC_TRY(expr, what) PW_BENCH_TRY("recovery", (expr), (what))

enum { PW_REC_MAX_SLICES = 64, PW_REC_MEMCPY_REPS = 3, PW_REC_MAX_STEPS = 1000 };

/* The lost launch of the watchdog mode: bench.inc on |device| waits until
 * |released|. */
typedef struct pw_rec_hang_s {
  atomic_int device;           /* -1: none */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool released;
} pw_rec_hang_t;

static pw_status_t pw_rec_inc(const pw_cpu_kernel_call_t* call) {
  pw_rec_hang_t* hang = call->user;
  if (atomic_load(&hang->device) == (int)call->device) {
    pthread_mutex_lock(&hang->lock);
    while (!hang->released) pthread_cond_wait(&hang->cond, &hang->lock);
    pthread_mutex_unlock(&hang->lock);
    /* The runtime failed this launch long ago and may have freed its
     * buffers: touch nothing. */
    return pw_status_make(PW_STATUS_UNAVAILABLE, "device %u: bench.inc was lost (hung)",
                          call->device);
  }
  const float* x = call->inputs[0].data;
  float* y = call->outputs[0].data;
  size_t n = call->outputs[0].size / sizeof(float);
  for (size_t i = 0; i < n; ++i) y[i] = x[i] + 1.0f;
  return NULL;
}

static void pw_rec_release_hang(pw_rec_hang_t* hang) {
  pthread_mutex_lock(&hang->lock);
  hang->released = true;
  pthread_cond_broadcast(&hang->cond);
  pthread_mutex_unlock(&hang->lock);
}

typedef struct pw_rec_cfg_s {
  uint32_t slices, per;
  uint64_t len;                /* elements of the state */
  bool watchdog;
  uint32_t snapshot_every, fail_at, workers;
  uint64_t deadline_ns;        /* watchdog only */
  long long block_cache_mib;   /* -1: the backend's default; 0: off */
} pw_rec_cfg_t;

/* One run's figures, in ns. */
typedef struct pw_rec_run_s {
  double total, detect, detect_event, drain, restore, setup, upload, first_step, step, recovery;
  double memcpy_ns, memcpy_cold_ns;
  uint64_t replayed;
} pw_rec_run_t;

typedef struct pw_rec_job_s {
  const pw_rec_cfg_t* cfg;
  pw_client_t* client;
  pw_backend_t backend;
  pw_rec_hang_t* hang;
  const float* zeros;          /* the initial state, len elements */
  pw_array_spec_t spec;
  pw_vslice_t vs;
  pw_executable_t exe;
  pw_graph_t graph;
  bool built, failed, restored, timed;
  pw_time_t fail_ns, first_end_ns;
  uint64_t setup_ns;           /* the restoring setup */
  double step_ns[PW_REC_MAX_STEPS]; /* healthy steps 1 .. fail_at - 1 */
  uint32_t steps_timed;
} pw_rec_job_t;

static void pw_rec_job_release(pw_rec_job_t* j) {
  if (!j->built) return;
  if (j->graph.id != 0) pw_status_free(pw_graph_release(j->client, j->graph));
  if (j->exe.id != 0) pw_status_free(pw_executable_release(j->client, j->exe));
  pw_status_free(pw_vslice_release(j->client, j->vs));
  j->graph.id = j->exe.id = 0;
  j->built = false;
}

static pw_status_t pw_rec_setup(void* user, pw_elastic_t* e, const uint32_t* slices,
                                uint32_t count, bool restoring) {
  pw_rec_job_t* j = user;
  pw_time_t t0 = pw_clock_now();
  pw_vslice_span_t span = {0};
  span.struct_size = sizeof(span);
  span.mesh = (pw_mesh_shape_t)PW_MESH_SHAPE_INIT(1, count * j->cfg->per);
  span.slice_count = count;
  span.slices = slices;
  PW_RETURN_IF_ERROR(pw_vslice_create_spanning(j->client, &span, &j->vs));
  j->built = true;
  char text[256];
  snprintf(text, sizeof(text),
           "kernel bench.inc\ninput f32[%llu] split(0,all)\noutput f32[%llu] split(0,all)\n",
           (unsigned long long)j->cfg->len, (unsigned long long)j->cfg->len);
  PW_RETURN_IF_ERROR(pw_executable_compile(j->client, j->vs, text, strlen(text), NULL, &j->exe));
  PW_RETURN_IF_ERROR(pw_graph_create(j->client, &j->graph));
  uint32_t x, y;
  PW_RETURN_IF_ERROR(pw_graph_add_parameter(j->client, j->graph, j->vs, &j->spec, &x));
  pw_value_t in = pw_value(x, 0);
  PW_RETURN_IF_ERROR(pw_graph_add_compute(j->client, j->graph, "inc", j->exe, j->vs, &in, 1, &y));
  PW_RETURN_IF_ERROR(pw_graph_add_output(j->client, j->graph, pw_value(y, 0)));
  PW_RETURN_IF_ERROR(pw_graph_finalize(j->client, j->graph));
  PW_RETURN_IF_ERROR(pw_elastic_place(e, 0, j->vs, &j->spec));
  if (restoring) {
    j->restored = true;
    j->setup_ns = (uint64_t)(pw_clock_now() - t0);
    return NULL;
  }
  pw_buffer_t x0;
  PW_RETURN_IF_ERROR(pw_buffer_from_host(j->client, j->vs, &j->spec, j->zeros,
                                         (size_t)j->cfg->len * sizeof(float), &x0));
  return pw_elastic_set_state(e, 0, x0);
}

static void pw_rec_teardown(void* user, pw_elastic_t* e) {
  (void)e;
  pw_rec_job_release(user);
}

static pw_status_t pw_rec_step(void* user, pw_elastic_t* e, uint64_t step) {
  pw_rec_job_t* j = user;
  if (step == j->cfg->fail_at && !j->failed) {
    j->failed = true;
    uint32_t device = (j->cfg->slices - 2) * j->cfg->per;
    j->fail_ns = pw_clock_now();
    if (j->cfg->watchdog) {
      atomic_store(&j->hang->device, (int)device);
    } else {
      PW_RETURN_IF_ERROR(pw_cpu_backend_set_health(j->backend, device, PW_DEVICE_FAILED));
    }
  }
  pw_buffer_t x, next;
  PW_RETURN_IF_ERROR(pw_elastic_state(e, 0, &x));
  pw_event_t* done;
  pw_time_t t0 = pw_clock_now();
  PW_RETURN_IF_ERROR(pw_graph_submit(j->client, j->graph, &x, 1, NULL, &next, 1, &done));
  pw_status_t status = pw_event_wait(done, pw_deadline_from_timeout(120000000000LL));
  pw_event_release(done);
  if (status != NULL) {
    pw_status_free(pw_buffer_release(j->client, next));
    return status;
  }
  PW_RETURN_IF_ERROR(pw_elastic_set_state(e, 0, next));
  if (!j->failed && step > 0 && j->steps_timed < PW_REC_MAX_STEPS) {
    j->step_ns[j->steps_timed++] = (double)(pw_clock_now() - t0);
  }
  if (j->restored && !j->timed) {
    j->timed = true;
    j->first_end_ns = pw_clock_now();
  }
  return NULL;
}

/* A backend, runtime and client for one run. */
typedef struct pw_rec_env_s {
  pw_backend_t backend;
  pw_runtime_t* rt;
  pw_client_t* c;
} pw_rec_env_t;

static int pw_rec_env_open(const pw_rec_cfg_t* cfg, pw_rec_hang_t* hang, pw_rec_env_t* env) {
  memset(env, 0, sizeof(*env));
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = cfg->slices * cfg->per;
  o.worker_count = cfg->workers + (cfg->watchdog ? 1 : 0);
  /* Each device holds at most a few of its shards of the state (the
   * state, the next one, the restored one): the whole state is plenty. */
  uint64_t bytes = cfg->len * sizeof(float);
  o.device_memory_bytes = bytes > (UINT64_C(1) << 30) ? bytes : (UINT64_C(1) << 30);
  if (cfg->block_cache_mib >= 0) {
    o.block_cache_bytes =
        cfg->block_cache_mib == 0 ? PW_CPU_BLOCK_CACHE_OFF : (uint64_t)cfg->block_cache_mib << 20;
  }
  PW_REC_TRY(pw_cpu_backend_create(&o, &env->backend), "cpu backend");
  pw_cpu_param_spec_t p = {"x", PW_CPU_DTYPE_BIT(PW_DTYPE_F32), 1};
  pw_cpu_kernel_def_t def = {.struct_size = sizeof(def), .name = "bench.inc", .input_count = 1,
                             .inputs = &p, .output_count = 1, .outputs = &p,
                             .flags = PW_CPU_KERNEL_SAME_DTYPE, .run = pw_rec_inc, .user = hang};
  pw_status_t reg = pw_cpu_backend_register_kernel(env->backend, &def);
  if (reg != NULL) env->backend.vtable->destroy(env->backend.self);
  PW_REC_TRY(reg, "register bench.inc");
  pw_slice_desc_t slices[PW_REC_MAX_SLICES];
  for (uint32_t s = 0; s < cfg->slices; ++s) {
    slices[s] = (pw_slice_desc_t){NULL, PW_MESH_SHAPE_INIT(1, cfg->per), 0, s * cfg->per, 0};
  }
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &env->backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = cfg->slices;
  if (cfg->watchdog) {
    ro.launch_deadline_ns = cfg->deadline_ns;
    ro.deadline_loses_slice = true;
  }
  PW_REC_TRY(pw_runtime_create(&ro, &env->rt), "runtime");
  PW_REC_TRY(pw_client_create(env->rt, NULL, &env->c), "client");
  return 0;
}

static int pw_rec_env_close(pw_rec_env_t* env) {
  if (env->c != NULL) PW_REC_TRY(pw_client_destroy(env->c), "client destroy");
  env->c = NULL;
  if (env->rt != NULL) PW_REC_TRY(pw_runtime_destroy(env->rt), "runtime destroy");
  env->rt = NULL;
  return 0;
}

/* A warmed memcpy of |bytes|: the median of PW_REC_MEMCPY_REPS, in ns. */
static double pw_rec_memcpy(void* dst, const void* src, size_t bytes) {
  double t[PW_REC_MEMCPY_REPS];
  memcpy(dst, src, bytes);
  for (int k = 0; k < PW_REC_MEMCPY_REPS; ++k) {
    int64_t t0 = pw_bench_now_ns();
    memcpy(dst, src, bytes);
    t[k] = (double)(pw_bench_now_ns() - t0);
  }
  return pw_bench_median(t, PW_REC_MEMCPY_REPS);
}

/* The same into memory just allocated (its pages faulted in by the copy,
 * as a restore's new device memory is), freed after: median, in ns. */
static double pw_rec_memcpy_cold(const void* src, size_t bytes) {
  double t[PW_REC_MEMCPY_REPS];
  for (int k = 0; k < PW_REC_MEMCPY_REPS; ++k) {
    int64_t t0 = pw_bench_now_ns();
    void* dst = malloc(bytes);
    if (dst == NULL) return -1;
    memcpy(dst, src, bytes);
    /* The copy is dead to the compiler (freed unread): keep it. */
    __asm__ volatile("" : : "r"(dst) : "memory");
    t[k] = (double)(pw_bench_now_ns() - t0);
    free(dst);
  }
  return pw_bench_median(t, PW_REC_MEMCPY_REPS);
}

/* What the restore's copy costs alone: one pw_buffer_from_host of the
 * state onto the smaller mesh's vslice (released after), in ns. */
static int pw_rec_upload(pw_rec_job_t* j, double* out_ns) {
  pw_buffer_t b;
  pw_time_t t0 = pw_clock_now();
  PW_REC_TRY(pw_buffer_from_host(j->client, j->vs, &j->spec, j->zeros,
                                 (size_t)j->cfg->len * sizeof(float), &b),
             "upload");
  pw_event_t* ready = NULL;
  pw_status_t s = pw_buffer_ready_event(j->client, b, &ready);
  if (s == NULL) s = pw_event_wait(ready, PW_INFINITE_FUTURE);
  pw_event_release(ready);
  *out_ns = (double)(pw_clock_now() - t0);
  pw_status_free(pw_buffer_release(j->client, b));
  PW_REC_TRY(s, "upload ready");
  return 0;
}

/* The final state must be the step count everywhere (|host|: len floats). */
static int pw_rec_check_state(pw_client_t* c, pw_elastic_t* e, const pw_rec_cfg_t* cfg,
                              float* host) {
  pw_buffer_t b;
  PW_REC_TRY(pw_elastic_state(e, 0, &b), "final state");
  PW_REC_TRY(pw_buffer_to_host(c, b, host, (size_t)cfg->len * sizeof(float), PW_INFINITE_FUTURE),
             "final state to host");
  float expect = (float)(cfg->fail_at + 1);
  for (uint64_t i = 0; i < cfg->len; ++i) {
    if (host[i] != expect) {
      fprintf(stderr, "pw-bench recovery: element %llu of the final state is %g, expected %g\n",
              (unsigned long long)i, (double)host[i], (double)expect);
      return -1;
    }
  }
  return 0;
}

/* The figures of a finished run from the helper's stats and the job. */
static int pw_rec_figures(pw_elastic_t* e, const pw_rec_job_t* j, pw_rec_run_t* out) {
  pw_elastic_stats_t st = {.struct_size = sizeof(st)};
  PW_REC_TRY(pw_elastic_stats(e, &st), "stats");
  if (st.recoveries != 1 || !j->timed || st.slice_count != j->cfg->slices - 1) {
    fprintf(stderr, "pw-bench recovery: expected one recovery onto %u slices; got %u "
            "recoveries, %u slices (a spurious deadline? try a larger --deadline-ms)\n",
            j->cfg->slices - 1, st.recoveries, st.slice_count);
    return -1;
  }
  out->total = (double)(j->first_end_ns - j->fail_ns);
  out->drain = (double)st.last_drain_ns;
  out->restore = (double)st.last_restore_ns;
  out->setup = (double)j->setup_ns;
  out->first_step = (double)st.last_first_step_ns;
  out->detect_event = (double)st.last_detect_ns;
  out->detect = out->total - out->drain - out->restore - out->first_step;
  out->recovery = j->cfg->watchdog ? out->total : out->drain + out->restore + out->first_step;
  out->replayed = st.steps_replayed;
  double steps[PW_REC_MAX_STEPS];
  memcpy(steps, j->step_ns, j->steps_timed * sizeof(double));
  out->step = j->steps_timed > 0 ? pw_bench_median(steps, j->steps_timed) : 0;
  return 0;
}

/* One run: a fresh runtime, the job from step 0 through fail_at (the
 * recovery in between), the state checked. |host|: len floats of scratch. */
static int pw_rec_run_once(const pw_rec_cfg_t* cfg, const float* zeros, float* host,
                           pw_rec_run_t* out) {
  pw_rec_hang_t hang = {.released = false};
  atomic_init(&hang.device, -1);
  pthread_mutex_init(&hang.lock, NULL);
  pthread_cond_init(&hang.cond, NULL);
  pw_rec_env_t env;
  int rc = pw_rec_env_open(cfg, &hang, &env);
  pw_elastic_t* e = NULL;
  pw_rec_job_t job = {.cfg = cfg, .client = env.c, .backend = env.backend, .hang = &hang,
                      .zeros = zeros};
  int64_t len = (int64_t)cfg->len;
  job.spec = (pw_array_spec_t){PW_DTYPE_F32, pw_shape_make(1, &len),
                               PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
  if (rc == 0) {
    pw_elastic_options_t o;
    pw_elastic_options_init(&o);
    o.slice_mesh = (pw_mesh_shape_t)PW_MESH_SHAPE_INIT(1, cfg->per);
    o.min_slices = cfg->slices - 1;
    o.snapshot_every = cfg->snapshot_every;
    o.state_count = 1;
    pw_elastic_job_t cb = {sizeof(cb), &job, pw_rec_setup, pw_rec_teardown, pw_rec_step, NULL};
    pw_status_t s = pw_elastic_create(env.c, &o, &cb, &e);
    if (pw_bench_failed("recovery", "elastic create", s)) rc = -1;
  }
  if (rc == 0 && pw_bench_failed("recovery", "elastic run", pw_elastic_run(e, 0, cfg->fail_at + 1))) {
    rc = -1;
  }
  pw_rec_release_hang(&hang);
  if (rc == 0) rc = pw_rec_figures(e, &job, out);
  if (rc == 0) rc = pw_rec_upload(&job, &out->upload);
  if (rc == 0) rc = pw_rec_check_state(env.c, e, cfg, host);
  if (e != NULL && pw_bench_failed("recovery", "elastic destroy", pw_elastic_destroy(e))) rc = -1;
  if (pw_rec_env_close(&env) != 0) rc = -1;
  pthread_mutex_destroy(&hang.lock);
  pthread_cond_destroy(&hang.cond);
  return rc;
}

static double pw_rec_load(void) {
  double load = -1;
  FILE* f = fopen("/proc/loadavg", "r");
  if (f == NULL) return load;
  if (fscanf(f, "%lf", &load) != 1) load = -1;
  fclose(f);
  return load;
}

/* The figures of a run, in the order of pw_rec_fields. */
static double pw_rec_field(const pw_rec_run_t* r, int f) {
  switch (f) {
    case 0: return r->recovery;
    case 1: return r->total;
    case 2: return r->detect;
    case 3: return r->detect_event;
    case 4: return r->drain;
    case 5: return r->restore;
    case 6: return r->setup;
    case 7: return r->upload;
    case 8: return r->first_step;
    case 9: return r->step;
    case 10: return r->memcpy_ns;
    case 11: return r->memcpy_cold_ns;
    case 12: return r->recovery / r->memcpy_ns;
    default: return r->recovery / r->memcpy_cold_ns;
  }
}

/* Table headings (stderr), the same fields. */
static const char* const pw_rec_heads[] = {
    "recovery", "total", "detect", "det.event", "drain", "restore", "(setup)", "(upload)",
    "1st step", "(step)", "memcpy", "memcpy0", "ratio", "ratio0"};

static const char* const pw_rec_fields[] = {
    "recovery_ms", "total_ms", "detect_ms", "detect_event_ms", "drain_ms", "restore_ms",
    "setup_ms", "upload_ms", "first_step_ms", "step_ms", "memcpy_ms", "memcpy_cold_ms", "ratio",
    "ratio_cold"};
enum { PW_REC_FIELDS = 14 };

/* The two ratios come last and are not scaled to ms. */
static double pw_rec_scaled(const pw_rec_run_t* r, int f) {
  double v = pw_rec_field(r, f);
  return f >= PW_REC_FIELDS - 2 ? v : v / 1e6;
}

static void pw_rec_json_head(pw_bench_json_t* j, const char* bench, const pw_rec_cfg_t* cfg,
                             double load) {
  pw_bench_json_begin(j, bench);
  pw_bench_json_str(j, "backend", "cpu");
  pw_bench_json_str(j, "detect", cfg->watchdog ? "watchdog" : "injected");
  pw_bench_json_num(j, "state_mib", (double)(cfg->len * sizeof(float)) / (1024.0 * 1024.0));
  pw_bench_json_int(j, "state_bytes", (long long)(cfg->len * sizeof(float)));
  pw_bench_json_int(j, "slices", cfg->slices);
  pw_bench_json_int(j, "per_slice", cfg->per);
  pw_bench_json_int(j, "workers", cfg->workers + (cfg->watchdog ? 1 : 0));
  pw_bench_json_int(j, "snapshot_every", cfg->snapshot_every);
  pw_bench_json_int(j, "fail_at", cfg->fail_at);
  if (cfg->watchdog) {
    pw_bench_json_num(j, "deadline_ms", (double)cfg->deadline_ns / 1e6);
  } else {
    pw_bench_json_null(j, "deadline_ms");
  }
  pw_bench_json_num(j, "load", load);
}

static void pw_rec_report_run(const pw_rec_cfg_t* cfg, uint32_t k, const pw_rec_run_t* r,
                              bool json, double load) {
  fprintf(stderr, "%4u", k);
  for (int f = 0; f < PW_REC_FIELDS; ++f) {
    fprintf(stderr, " %8.2f", pw_rec_scaled(r, f));
  }
  fprintf(stderr, "\n");
  if (!json) return;
  pw_bench_json_t j;
  pw_rec_json_head(&j, "recovery-run", cfg, load);
  pw_bench_json_int(&j, "run", k);
  for (int f = 0; f < PW_REC_FIELDS; ++f) {
    pw_bench_json_num(&j, pw_rec_fields[f], pw_rec_scaled(r, f));
  }
  pw_bench_json_int(&j, "steps_replayed", (long long)r->replayed);
  pw_bench_json_end(&j);
}

static void pw_rec_report(const pw_rec_cfg_t* cfg, const pw_rec_run_t* runs, uint32_t n,
                          double load_start, double load_end) {
  double* v = calloc(n, sizeof(double));
  if (v == NULL) return;
  pw_bench_json_t j;
  pw_rec_json_head(&j, "recovery", cfg, load_start);
  pw_bench_json_num(&j, "load_end", load_end);
  pw_bench_json_int(&j, "runs", n);
  fprintf(stderr, "med ");
  double med[PW_REC_FIELDS];
  for (int f = 0; f < PW_REC_FIELDS; ++f) {
    double lo = 0, hi = 0;
    for (uint32_t k = 0; k < n; ++k) {
      v[k] = pw_rec_scaled(&runs[k], f);
      lo = k == 0 || v[k] < lo ? v[k] : lo;
      hi = k == 0 || v[k] > hi ? v[k] : hi;
    }
    med[f] = pw_bench_median(v, n);
    fprintf(stderr, " %8.2f", med[f]);
    char key[64];
    pw_bench_json_num(&j, pw_rec_fields[f], med[f]);
    snprintf(key, sizeof(key), "%s_min", pw_rec_fields[f]);
    pw_bench_json_num(&j, key, lo);
    snprintf(key, sizeof(key), "%s_max", pw_rec_fields[f]);
    pw_bench_json_num(&j, key, hi);
  }
  fprintf(stderr, "\nrecovery %s: %.1f ms; memcpy %.1f ms (into new memory %.1f ms); ratio "
          "%.2f (to new memory %.2f; target 2: %s); load %.2f at start, %.2f at end\n",
          cfg->watchdog ? "(detection and deadline included)" : "(detection excluded)", med[0],
          med[10], med[11], med[12], med[13], med[12] <= 2.0 ? "met" : "NOT met", load_start,
          load_end);
  pw_bench_json_num(&j, "target_ratio", 2.0);
  pw_bench_json_end(&j);
  free(v);
}

/* Parses the options into |cfg|; 2 on bad ones (message printed). */
static int pw_rec_options(int argc, char** argv, pw_rec_cfg_t* cfg, long long* mib,
                          long long* runs, long long* deadline_ms) {
  *mib = pw_bench_opt_int(argc, argv, "state-mib", 64);
  long long slices = pw_bench_opt_int(argc, argv, "slices", 4);
  long long per = pw_bench_opt_int(argc, argv, "per-slice", 2);
  *runs = pw_bench_opt_int(argc, argv, "runs", 5);
  long long every = pw_bench_opt_int(argc, argv, "snapshot-every", 4);
  long long fail_at = pw_bench_opt_int(argc, argv, "fail-at", 6);
  long long workers = pw_bench_opt_int(argc, argv, "workers", 2);
  *deadline_ms = pw_bench_opt_int(argc, argv, "deadline-ms", 0);
  long long cache_mib = pw_bench_opt_int(argc, argv, "block-cache-mib", -1);
  const char* detect = pw_bench_opt_value(argc, argv, "detect");
  if (detect == NULL) detect = "injected";
  if (strcmp(detect, "injected") != 0 && strcmp(detect, "watchdog") != 0) {
    fprintf(stderr, "pw-bench recovery: --detect '%s': injected or watchdog\n", detect);
    return 2;
  }
  if (*mib < 1 || *mib > 16384 || slices < 2 || slices > PW_REC_MAX_SLICES || per < 1 ||
      slices * per > 256 || *runs < 1 || *runs > 1000 || every < 1 || fail_at <= every ||
      fail_at > 1000 || workers < 1 || workers > 64 || *deadline_ms < 0 || cache_mib < -1 ||
      cache_mib > (1 << 20)) {
    fprintf(stderr, "pw-bench recovery: --state-mib 1..16384, --slices 2..%d, --per-slice >= 1 "
            "(at most 256 devices), --runs 1..1000, --snapshot-every >= 1, --fail-at above "
            "--snapshot-every (a snapshot to restore besides step 0's) up to 1000, "
            "--workers 1..64, --deadline-ms >= 0, --block-cache-mib 0..2^20\n",
            PW_REC_MAX_SLICES);
    return 2;
  }
  memset(cfg, 0, sizeof(*cfg));
  cfg->block_cache_mib = cache_mib;
  cfg->slices = (uint32_t)slices;
  cfg->per = (uint32_t)per;
  cfg->watchdog = strcmp(detect, "watchdog") == 0;
  cfg->snapshot_every = (uint32_t)every;
  cfg->fail_at = (uint32_t)fail_at;
  cfg->workers = (uint32_t)workers;
  /* A length that splits evenly over both meshes. */
  uint64_t a = (uint64_t)(slices * per), b = (uint64_t)((slices - 1) * per), g = a, r = b;
  while (r != 0) {
    uint64_t t = g % r;
    g = r;
    r = t;
  }
  uint64_t lcm = a / g * b;
  cfg->len = (uint64_t)*mib * 1024 * 1024 / sizeof(float) / lcm * lcm;
  return 0;
}

static int pw_bench_suite_recovery(int argc, char** argv) {
  pw_rec_cfg_t cfg;
  long long mib, runs, deadline_ms;
  if (pw_rec_options(argc, argv, &cfg, &mib, &runs, &deadline_ms) != 0) return 2;
  size_t bytes = (size_t)cfg.len * sizeof(float);
  float* zeros = calloc(cfg.len, sizeof(float));
  float* host = malloc(bytes);
  float* src = malloc(bytes);
  pw_rec_run_t* out = calloc((size_t)runs, sizeof(*out));
  if (zeros == NULL || host == NULL || src == NULL || out == NULL) {
    fprintf(stderr, "pw-bench recovery: out of memory for a %lld MiB state\n", mib);
    free(zeros);
    free(host);
    free(src);
    free(out);
    return 1;
  }
  memset(src, 1, bytes);
  memset(host, 0, bytes);
  double load_start = pw_rec_load();
  (void)pw_rec_memcpy(host, src, bytes);
  if (cfg.watchdog) {
    /* A healthy launch writes new device memory: the copy into new
     * memory, not the warmed one, says how long it may take. */
    double d = deadline_ms > 0 ? (double)deadline_ms * 1e6 : 4 * pw_rec_memcpy_cold(src, bytes);
    cfg.deadline_ns = d > 50e6 ? (uint64_t)d : UINT64_C(50000000);
  }
  fprintf(stderr, "pw-bench recovery: backend cpu, %u slices x %u devices, state %.1f MiB f32 "
          "(%llu elements), snapshot every %u steps, failure at step %u, detect %s",
          cfg.slices, cfg.per, (double)bytes / (1024.0 * 1024.0), (unsigned long long)cfg.len,
          cfg.snapshot_every, cfg.fail_at, cfg.watchdog ? "watchdog" : "injected");
  if (cfg.watchdog) fprintf(stderr, " (deadline %.1f ms)", (double)cfg.deadline_ns / 1e6);
  fprintf(stderr, ", load %.2f\n run", load_start);
  for (int f = 0; f < PW_REC_FIELDS; ++f) fprintf(stderr, " %8s", pw_rec_heads[f]);
  fprintf(stderr, "\n    (ms; memcpy0: into new memory; ratio = recovery / memcpy, ratio0 = "
          "recovery / memcpy0; (setup), (upload): parts of restore, (step): a healthy step)");
  fprintf(stderr, "\n");
  int rc = 0;
  bool json = pw_bench_opt_flag(argc, argv, "json");
  for (uint32_t k = 0; rc == 0 && k < (uint32_t)runs; ++k) {
    double m = pw_rec_memcpy(host, src, bytes), m0 = pw_rec_memcpy_cold(src, bytes);
    rc = pw_rec_run_once(&cfg, zeros, host, &out[k]);
    out[k].memcpy_ns = m;
    out[k].memcpy_cold_ns = m0;
    if (rc == 0) pw_rec_report_run(&cfg, k, &out[k], json, pw_rec_load());
  }
  if (rc == 0) pw_rec_report(&cfg, out, (uint32_t)runs, load_start, pw_rec_load());
  free(zeros);
  free(host);
  free(src);
  free(out);
  return rc == 0 ? 0 : 1;
}

PW_BENCH_SUITE(recovery, "recovery",
               "an elastic job's recovery from a lost slice (CPU backend) against a memcpy of "
               "its state: --state-mib N [--detect injected|watchdog] [--runs R]",
               pw_bench_suite_recovery)
