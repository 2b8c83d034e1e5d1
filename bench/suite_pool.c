/* pw-bench pool: the CPU backend's worker pool, spinning against parking
 * (pathways/backends/cpu.h, WORKER POOL). Three measurements, each on a
 * fresh backend of 2 workers, for spin_us = PW_CPU_SPIN_OFF (park at once:
 * the pool before options v3) and for --spin (default: the default):
 *
 *   pingpong       backend only: a host thread launches one `copy`, waits
 *                  for its done by spinning on a flag (no futex on its
 *                  side), and launches the next: the round trip through
 *                  the pool, i.e. the cost of handing a task to an idle
 *                  worker; ns per round trip.
 *   fork_join      backend only: a chain of steps, each two `spin` launches
 *                  of --work-us (default 20) on one device made from the
 *                  previous step's last done: one is that worker's
 *                  continuation, the other goes through the queue to the
 *                  other worker (or, if that one is slow to wake, back to
 *                  the first). Ideal: the work time per step; ns per step.
 *   runtime_chain  a runtime over that backend, one 2-device slice, a
 *                  graph of --chain `copy` ops in a chain (each op a 2-device
 *                  gang: one launch per worker), submitted and waited for;
 *                  ns per op.
 *   idle           after that work, the runtime sits idle --idle-s seconds
 *                  (default 10); the process's CPU time over that time, in
 *                  percent of one CPU. 0 skips it.
 *
 * The two settings alternate within each of --rounds rounds (default 7);
 * medians are reported, with the ratio parked/spinning per round's median.
 * Output: JSON lines {"bench":"pool","case",...} on stdout, a table on
 * stderr, with /proc/loadavg at start and end. */
#define _GNU_SOURCE /* nanosleep, CLOCK_PROCESS_CPUTIME_ID */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_try.h"
#include "bench_util.h"
#include "pathways/backends/cpu.h"
#include "pathways/pathways.h"
#include "suites.h"

#define PW_POOL_SUITE "pool"
#define PW_POOL_MAX_ROUNDS 64

static void pw_pool_loadavg(char* out, size_t capacity) {
  snprintf(out, capacity, "?");
  FILE* f = fopen("/proc/loadavg", "r");
  if (f == NULL) return;
  double a = 0, b = 0, c = 0;
  if (fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3) snprintf(out, capacity, "%.2f %.2f %.2f", a, b, c);
  fclose(f);
}

static int64_t pw_pool_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static pw_status_t pw_pool_backend(uint32_t spin_us, uint32_t devices, pw_backend_t* out) {
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = devices;
  o.worker_count = 2;
  o.spin_us = spin_us;
  return pw_cpu_backend_create(&o, out);
}

/*---------------------------------------------------------------------------
 * fork_join: backend only
 *-------------------------------------------------------------------------*/

typedef struct pw_pool_fj_t {
  pw_backend_t backend;
  pw_backend_executable_t exe;
  pw_backend_memory_t in, out[2];
  uint32_t group[1];
  long long steps, step;
  atomic_uint pending;
  atomic_int failed;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  bool finished;
} pw_pool_fj_t;

static void pw_pool_fj_launch(pw_pool_fj_t* f);

static void pw_pool_fj_done(void* user, pw_status_t status) {
  pw_pool_fj_t* f = user;
  if (status != NULL) {
    pw_status_free(status);
    atomic_store(&f->failed, 1);
  }
  if (atomic_fetch_sub(&f->pending, 1) != 1) return;
  if (++f->step < f->steps && !atomic_load(&f->failed)) {
    pw_pool_fj_launch(f);
    return;
  }
  pthread_mutex_lock(&f->mutex);
  f->finished = true;
  pthread_cond_signal(&f->cond);
  pthread_mutex_unlock(&f->mutex);
}

static void pw_pool_fj_launch(pw_pool_fj_t* f) {
  atomic_store(&f->pending, 2);
  for (int b = 0; b < 2; ++b) {
    pw_backend_launch_t l = {.struct_size = sizeof(l), .executable = f->exe, .device = 0,
                             .group_devices = f->group, .group_size = 1, .gang_id = 1,
                             .inputs = &f->in, .input_count = 1, .outputs = &f->out[b],
                             .output_count = 1, .done = pw_pool_fj_done, .done_user = f};
    pw_status_t s = f->backend.vtable->launch(f->backend.self, &l);
    if (s != NULL) pw_pool_fj_done(f, s);
  }
}

/* ns per step of |steps| fork-join steps on a fresh backend. */
static int pw_pool_fork_join(uint32_t spin_us, long long steps, long long work_us,
                             double* out_ns) {
  pw_pool_fj_t f;
  memset(&f, 0, sizeof(f));
  PW_BENCH_TRY(PW_POOL_SUITE, pw_pool_backend(spin_us, 1, &f.backend), "create");
  const pw_backend_vtable_t* vt = f.backend.vtable;
  char text[160];
  snprintf(text, sizeof(text),
           "kernel spin\ninput f32[1] replicated\noutput f32[1] replicated\nattr ns %lld\n",
           work_us * 1000);
  pw_mesh_shape_t one = pw_mesh_shape_make(1, (uint32_t[]){1});
  void* bytes = NULL;
  size_t size = 0;
  pw_allocator_t system = pw_allocator_system();
  PW_BENCH_TRY(PW_POOL_SUITE, vt->compile(f.backend.self, text, strlen(text), &one, "", system,
                                           &bytes, &size),
               "compile");
  pw_executable_signature_t sig = {.struct_size = sizeof(sig)};
  pw_status_t s = vt->load(f.backend.self, bytes, size, &f.exe, &sig);
  pw_allocator_free(system, bytes, size);
  PW_BENCH_TRY(PW_POOL_SUITE, s, "load");
  PW_BENCH_TRY(PW_POOL_SUITE, vt->allocate(f.backend.self, 0, 4, &f.in), "allocate");
  PW_BENCH_TRY(PW_POOL_SUITE, vt->allocate(f.backend.self, 0, 4, &f.out[0]), "allocate");
  PW_BENCH_TRY(PW_POOL_SUITE, vt->allocate(f.backend.self, 0, 4, &f.out[1]), "allocate");
  pthread_mutex_init(&f.mutex, NULL);
  pthread_cond_init(&f.cond, NULL);
  f.steps = steps;
  /* A short warm-up run, then the timed one. */
  for (int pass = 0; pass < 2; ++pass) {
    f.step = 0;
    f.finished = false;
    f.steps = pass == 0 ? (steps / 10 > 0 ? steps / 10 : 1) : steps;
    int64_t t0 = pw_bench_now_ns();
    pw_pool_fj_launch(&f);
    pthread_mutex_lock(&f.mutex);
    while (!f.finished) pthread_cond_wait(&f.cond, &f.mutex);
    pthread_mutex_unlock(&f.mutex);
    *out_ns = (double)(pw_bench_now_ns() - t0) / (double)f.steps;
  }
  vt->deallocate(f.backend.self, 0, f.in);
  vt->deallocate(f.backend.self, 0, f.out[0]);
  vt->deallocate(f.backend.self, 0, f.out[1]);
  vt->unload(f.backend.self, f.exe);
  vt->destroy(f.backend.self);
  pthread_cond_destroy(&f.cond);
  pthread_mutex_destroy(&f.mutex);
  if (atomic_load(&f.failed)) {
    fprintf(stderr, "pw-bench pool: a fork-join launch failed\n");
    return -1;
  }
  return 0;
}

/*---------------------------------------------------------------------------
 * pingpong: host thread <-> an idle worker
 *-------------------------------------------------------------------------*/

static void pw_pool_pp_done(void* user, pw_status_t status) {
  atomic_int* flag = user;
  atomic_store_explicit(flag, status == NULL ? 1 : 2, memory_order_release);
  pw_status_free(status);
}

/* ns per round trip of |trips| launches, each waited for by spinning. */
static int pw_pool_pingpong(uint32_t spin_us, long long trips, double* out_ns) {
  pw_backend_t b;
  PW_BENCH_TRY(PW_POOL_SUITE, pw_pool_backend(spin_us, 1, &b), "create");
  const pw_backend_vtable_t* vt = b.vtable;
  const char* text = "kernel copy\ninput f32[1] replicated\noutput f32[1] replicated\n";
  pw_mesh_shape_t one = pw_mesh_shape_make(1, (uint32_t[]){1});
  void* bytes = NULL;
  size_t size = 0;
  pw_allocator_t system = pw_allocator_system();
  PW_BENCH_TRY(PW_POOL_SUITE, vt->compile(b.self, text, strlen(text), &one, "", system, &bytes,
                                           &size),
               "compile");
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(sig)};
  pw_status_t s = vt->load(b.self, bytes, size, &exe, &sig);
  pw_allocator_free(system, bytes, size);
  PW_BENCH_TRY(PW_POOL_SUITE, s, "load");
  pw_backend_memory_t in, out;
  PW_BENCH_TRY(PW_POOL_SUITE, vt->allocate(b.self, 0, 4, &in), "allocate");
  PW_BENCH_TRY(PW_POOL_SUITE, vt->allocate(b.self, 0, 4, &out), "allocate");
  uint32_t group[1] = {0};
  atomic_int flag;
  bool failed = false;
  for (int pass = 0; pass < 2 && !failed; ++pass) { /* warm-up, then timed */
    long long n = pass == 0 ? (trips / 10 > 0 ? trips / 10 : 1) : trips;
    int64_t t0 = pw_bench_now_ns();
    for (long long i = 0; i < n && !failed; ++i) {
      atomic_store(&flag, 0);
      pw_backend_launch_t l = {.struct_size = sizeof(l), .executable = exe, .device = 0,
                               .group_devices = group, .group_size = 1, .gang_id = 1,
                               .inputs = &in, .input_count = 1, .outputs = &out,
                               .output_count = 1, .done = pw_pool_pp_done, .done_user = &flag};
      s = vt->launch(b.self, &l);
      if (s != NULL) {
        pw_status_free(s);
        failed = true;
        break;
      }
      int v;
      while ((v = atomic_load_explicit(&flag, memory_order_acquire)) == 0) pw_bench_pause();
      failed = v != 1;
    }
    *out_ns = (double)(pw_bench_now_ns() - t0) / (double)n;
  }
  vt->deallocate(b.self, 0, in);
  vt->deallocate(b.self, 0, out);
  vt->unload(b.self, exe);
  vt->destroy(b.self);
  if (failed) {
    fprintf(stderr, "pw-bench pool: a ping-pong launch failed\n");
    return -1;
  }
  return 0;
}

/*---------------------------------------------------------------------------
 * runtime_chain and idle
 *-------------------------------------------------------------------------*/

/* Runs a |chain|-op graph |reps| times (ns per op into |out_ns|), then,
 * when |idle_s| > 0, idles the runtime and reports CPU % of one CPU. */
static int pw_pool_runtime(uint32_t spin_us, long long chain, long long reps, long long idle_s,
                           double* out_ns, double* out_idle_pct) {
  pw_backend_t backend;
  PW_BENCH_TRY(PW_POOL_SUITE, pw_pool_backend(spin_us, 2, &backend), "create");
  pw_slice_desc_t slice = {"pool", PW_MESH_SHAPE_INIT(1, 2), 0, 0, 0};
  pw_runtime_options_t ro = {0};
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = &slice;
  ro.slice_count = 1;
  pw_runtime_t* runtime = NULL;
  PW_BENCH_TRY(PW_POOL_SUITE, pw_runtime_create(&ro, &runtime), "runtime");
  pw_client_t* client = NULL;
  PW_BENCH_TRY(PW_POOL_SUITE, pw_client_create(runtime, NULL, &client), "client");
  pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(1, 2);
  pw_vslice_t vs;
  PW_BENCH_TRY(PW_POOL_SUITE, pw_vslice_create(client, &mesh, 0, &vs), "vslice");
  const char* text = "kernel copy\ninput f32[2] split(0,all)\noutput f32[2] split(0,all)\n";
  pw_executable_t exe;
  PW_BENCH_TRY(PW_POOL_SUITE, pw_executable_compile(client, vs, text, strlen(text), NULL, &exe),
               "compile");
  pw_graph_t g;
  PW_BENCH_TRY(PW_POOL_SUITE, pw_graph_create(client, &g), "graph");
  pw_array_spec_t spec = {PW_DTYPE_F32, {1, {2}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
  uint32_t node;
  PW_BENCH_TRY(PW_POOL_SUITE, pw_graph_add_parameter(client, g, vs, &spec, &node), "param");
  for (long long i = 0; i < chain; ++i) {
    pw_value_t in = pw_value(node, 0);
    PW_BENCH_TRY(PW_POOL_SUITE, pw_graph_add_compute(client, g, "copy", exe, vs, &in, 1, &node),
                 "compute");
  }
  PW_BENCH_TRY(PW_POOL_SUITE, pw_graph_add_output(client, g, pw_value(node, 0)), "output");
  PW_BENCH_TRY(PW_POOL_SUITE, pw_graph_finalize(client, g), "finalize");
  float host[2] = {1, 2};
  pw_buffer_t arg;
  PW_BENCH_TRY(PW_POOL_SUITE, pw_buffer_from_host(client, vs, &spec, host, sizeof(host), &arg),
               "buffer");
  double best = 0;
  double samples[PW_POOL_MAX_ROUNDS];
  long long n = reps < PW_POOL_MAX_ROUNDS ? reps : PW_POOL_MAX_ROUNDS;
  for (long long r = 0; r < n + 1; ++r) { /* the first is a warm-up */
    pw_buffer_t out;
    pw_event_t* done = NULL;
    int64_t t0 = pw_bench_now_ns();
    PW_BENCH_TRY(PW_POOL_SUITE, pw_graph_submit(client, g, &arg, 1, NULL, &out, 1, &done),
                 "submit");
    PW_BENCH_TRY(PW_POOL_SUITE, pw_event_wait(done, pw_deadline_from_timeout(60000000000LL)),
                 "wait");
    if (r > 0) samples[r - 1] = (double)(pw_bench_now_ns() - t0) / (double)chain;
    pw_event_release(done);
    PW_BENCH_TRY(PW_POOL_SUITE, pw_buffer_release(client, out), "release");
  }
  best = pw_bench_median(samples, (size_t)n);
  *out_ns = best;
  *out_idle_pct = -1;
  if (idle_s > 0) {
    int64_t c0 = pw_pool_cpu_ns(), t0 = pw_bench_now_ns();
    struct timespec rest = {(time_t)idle_s, 0};
    nanosleep(&rest, NULL);
    int64_t c1 = pw_pool_cpu_ns(), t1 = pw_bench_now_ns();
    *out_idle_pct = 100.0 * (double)(c1 - c0) / (double)(t1 - t0);
  }
  PW_BENCH_TRY(PW_POOL_SUITE, pw_buffer_release(client, arg), "release");
  PW_BENCH_TRY(PW_POOL_SUITE, pw_graph_release(client, g), "graph release");
  PW_BENCH_TRY(PW_POOL_SUITE, pw_executable_release(client, exe), "exe release");
  PW_BENCH_TRY(PW_POOL_SUITE, pw_vslice_release(client, vs), "vslice release");
  PW_BENCH_TRY(PW_POOL_SUITE, pw_client_destroy(client), "client destroy");
  PW_BENCH_TRY(PW_POOL_SUITE, pw_runtime_destroy(runtime), "runtime destroy");
  return 0;
}

/*---------------------------------------------------------------------------
 * The suite
 *-------------------------------------------------------------------------*/

static void pw_pool_report(const char* which, const char* unit, uint32_t spin_on, double* off,
                           double* on, long long rounds, long long size) {
  double ratio[PW_POOL_MAX_ROUNDS];
  for (long long r = 0; r < rounds; ++r) ratio[r] = off[r] / on[r];
  double m_off = pw_bench_median(off, (size_t)rounds);
  double m_on = pw_bench_median(on, (size_t)rounds);
  double m_ratio = pw_bench_median(ratio, (size_t)rounds);
  pw_bench_json_t j;
  pw_bench_json_begin(&j, PW_POOL_SUITE);
  pw_bench_json_str(&j, "case", which);
  pw_bench_json_str(&j, "backend", "cpu");
  pw_bench_json_int(&j, "workers", 2);
  pw_bench_json_int(&j, "size", size);
  pw_bench_json_int(&j, "rounds", rounds);
  pw_bench_json_int(&j, "spin_us", spin_on);
  pw_bench_json_num(&j, "parked_median", m_off);
  pw_bench_json_num(&j, "spinning_median", m_on);
  pw_bench_json_num(&j, "parked_over_spinning", m_ratio);
  pw_bench_json_str(&j, "unit", unit);
  pw_bench_json_end(&j);
  fprintf(stderr, "%-14s %10.0f %-8s parked  %10.0f %-8s spinning (%u us)  ratio %.2fx\n", which,
          m_off, unit, m_on, unit, spin_on, m_ratio);
}

static int pw_bench_suite_pool(int argc, char** argv) {
  long long steps = pw_bench_opt_int(argc, argv, "steps", 5000);
  long long work_us = pw_bench_opt_int(argc, argv, "work-us", 20);
  long long trips = pw_bench_opt_int(argc, argv, "trips", 5000);
  long long rounds = pw_bench_opt_int(argc, argv, "rounds", 7);
  long long chain = pw_bench_opt_int(argc, argv, "chain", 200);
  long long reps = pw_bench_opt_int(argc, argv, "reps", 15);
  long long idle_s = pw_bench_opt_int(argc, argv, "idle-s", 10);
  long long spin = pw_bench_opt_int(argc, argv, "spin", PW_CPU_DEFAULT_SPIN_US);
  if (work_us < 0 || work_us > 10000 || trips < 1) {
    fprintf(stderr, "pw-bench pool: --work-us 0..10000, --trips >= 1\n");
    return 2;
  }
  if (steps < 1 || rounds < 1 || rounds > PW_POOL_MAX_ROUNDS || chain < 1 || reps < 1 ||
      idle_s < 0 || spin < 1 || spin > PW_CPU_MAX_SPIN_US) {
    fprintf(stderr, "pw-bench pool: --steps >= 1, --rounds 1..%d, --chain >= 1, --reps >= 1, "
                    "--idle-s >= 0, --spin 1..%u\n",
            PW_POOL_MAX_ROUNDS, PW_CPU_MAX_SPIN_US);
    return 2;
  }
  uint32_t spin_on = (uint32_t)spin;
  char load0[64], load1[64];
  pw_pool_loadavg(load0, sizeof(load0));
  double pp[2][PW_POOL_MAX_ROUNDS], fj[2][PW_POOL_MAX_ROUNDS], rc[2][PW_POOL_MAX_ROUNDS];
  for (long long r = 0; r < rounds; ++r) {
    for (int k = 0; k < 2; ++k) {
      /* Alternate which setting goes first, round by round. */
      int which = (int)((r + k) % 2);
      uint32_t setting = which == 0 ? PW_CPU_SPIN_OFF : spin_on;
      double idle_unused = 0;
      if (pw_pool_pingpong(setting, trips, &pp[which][r]) != 0) return 1;
      if (pw_pool_fork_join(setting, steps, work_us, &fj[which][r]) != 0) return 1;
      if (pw_pool_runtime(setting, chain, reps, 0, &rc[which][r], &idle_unused) != 0) return 1;
    }
  }
  pw_pool_report("pingpong", "ns/trip", spin_on, pp[0], pp[1], rounds, trips);
  pw_pool_report("fork_join", "ns/step", spin_on, fj[0], fj[1], rounds, steps);
  pw_pool_report("runtime_chain", "ns/op", spin_on, rc[0], rc[1], rounds, chain);
  if (idle_s > 0) {
    for (int which = 0; which < 2; ++which) {
      uint32_t setting = which == 0 ? PW_CPU_SPIN_OFF : spin_on;
      double ns = 0, pct = 0;
      if (pw_pool_runtime(setting, chain, reps, idle_s, &ns, &pct) != 0) return 1;
      pw_bench_json_t j;
      pw_bench_json_begin(&j, PW_POOL_SUITE);
      pw_bench_json_str(&j, "case", "idle");
      pw_bench_json_str(&j, "backend", "cpu");
      pw_bench_json_int(&j, "workers", 2);
      pw_bench_json_int(&j, "spin_us", which == 0 ? 0 : spin_on);
      pw_bench_json_int(&j, "seconds", idle_s);
      pw_bench_json_num(&j, "cpu_pct_of_one_cpu", pct);
      pw_bench_json_end(&j);
      fprintf(stderr, "idle %-9s %.3f%% of one CPU over %lld s\n",
              which == 0 ? "parked" : "spinning", pct, idle_s);
    }
  }
  pw_pool_loadavg(load1, sizeof(load1));
  pw_bench_json_t j;
  pw_bench_json_begin(&j, PW_POOL_SUITE);
  pw_bench_json_str(&j, "case", "machine");
  pw_bench_json_str(&j, "loadavg_start", load0);
  pw_bench_json_str(&j, "loadavg_end", load1);
  pw_bench_json_end(&j);
  fprintf(stderr, "load average: start %s, end %s\n", load0, load1);
  return 0;
}

PW_BENCH_SUITE(pool, "pool",
               "CPU backend pool: hand-off between 2 workers and idle CPU, spinning vs parking",
               pw_bench_suite_pool)
