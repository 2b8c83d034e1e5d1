/* Stress: host-launch lanes (lib/sched/lanes.c) from several submitting
 * threads, with failures injected.
 *
 * Two slices of 8 devices on the test double with launch_host and two
 * devices per host (4 lanes a slice), run twice:
 *   - threaded: the threaded double; every 8th run of a thread arms the
 *     double's fail_launch (a host launch refused, or completing with
 *     DATA_LOSS, alternately);
 *   - queued: the inline double behind the queue wrapper (depth 4; every
 *     37th launch of a device fails with DATA_LOSS, every 211th is lost),
 *     a launch deadline of 200 ms.
 * T threads (even ones with their own client, odd ones sharing one) each
 * submit a chain x -> copy x4 -> y again and again, four runs in flight;
 * every fourth thread on a virtual slice spanning both slices (16
 * devices, 8 lanes), the others on one slice. Every run must resolve
 * exactly once: OK with y == x, DATA_LOSS, or (queued) DEADLINE_EXCEEDED
 * or the wrapper's RESOURCE_EXHAUSTED for a slot a deadline gave back
 * while the wrapper still held it (see stress_queued.c); nothing else, no
 * hang (30 s per run), no leak (the counting allocator, runtime and
 * double), host launches made, and every outcome of the configuration
 * observed. Plain executable (TSan cannot run Criterion).
 * Usage: stress_runtime_lanes [iterations-per-thread] [threads] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cts/double_backend.h"
#include "pathways/pathways.h"
#include "support/queue_wrapper.h"
#include "support/test_allocators.h"

#define NAME "stress_runtime_lanes"
#define N 16
#define PER_SLICE 8
#define MAX_THREADS 8
#define IN_FLIGHT 4
#define CHAIN 4
#define WAIT_NS INT64_C(30000000000)

static int g_iterations = 400;
static int g_threads = 4;
static bool g_queued;
static pw_runtime_t* g_runtime;
static pw_client_t* g_shared;
static pw_double_backend_t* g_dbl;
static atomic_int g_failures;
static atomic_long g_ok, g_data_loss, g_deadline, g_refused;

static bool ok(pw_status_t s, const char* what, int thread) {
  if (s == NULL) return true;
  char m[512];
  pw_status_format(s, m, sizeof(m));
  fprintf(stderr, NAME ": %s: thread %d: %s: %s\n", g_queued ? "queued" : "threaded", thread,
          what, m);
  pw_status_free(s);
  atomic_fetch_add(&g_failures, 1);
  return false;
}

#define TRY(expr, what)                       \
  do {                                        \
    if (!ok((expr), (what), index)) goto out; \
  } while (0)

typedef struct flight_t {
  pw_buffer_t x, y;
  pw_event_t* done;
  float want[N];
} flight_t;

/* Resolves |f|: one of the allowed outcomes, counted; releases it. */
static void land(pw_client_t* client, flight_t* f, int index) {
  pw_status_t st = pw_event_wait(f->done, pw_deadline_from_timeout(WAIT_NS));
  pw_event_release(f->done);
  f->done = NULL;
  pw_status_code_t code = pw_status_code(st);
  if (st == NULL) {
    float back[N] = {0};
    if (ok(pw_buffer_to_host(client, f->y, back, sizeof(back), PW_INFINITE_FUTURE), "to_host",
           index)) {
      if (memcmp(back, f->want, sizeof(back)) != 0) {
        fprintf(stderr, NAME ": thread %d: wrong output (first %g, want %g)\n", index,
                (double)back[0], (double)f->want[0]);
        atomic_fetch_add(&g_failures, 1);
      }
      atomic_fetch_add(&g_ok, 1);
    }
  } else if (code == PW_STATUS_DATA_LOSS) {
    atomic_fetch_add(&g_data_loss, 1);
    pw_status_free(st);
  } else if (g_queued && code == PW_STATUS_DEADLINE_EXCEEDED) {
    atomic_fetch_add(&g_deadline, 1);
    pw_status_free(st);
  } else if (g_queued && code == PW_STATUS_RESOURCE_EXHAUSTED &&
             strstr(pw_status_message(st), "launches outstanding (its depth)") != NULL) {
    atomic_fetch_add(&g_refused, 1);
    pw_status_free(st);
  } else {
    (void)ok(st, "run (not an allowed outcome)", index);
  }
  (void)ok(pw_buffer_release(client, f->x), "release x", index);
  (void)ok(pw_buffer_release(client, f->y), "release y", index);
}

static void* submitter(void* arg) {
  int index = (int)(intptr_t)arg;
  pw_client_t* client = g_shared;
  bool own = index % 2 == 0;
  flight_t flights[IN_FLIGHT];
  memset(flights, 0, sizeof(flights));
  pw_graph_t g = {0};
  pw_vslice_t vs = {0};
  pw_executable_t copy = {0};
  if (own && !ok(pw_client_create(g_runtime, NULL, &client), "client", index)) return NULL;
  if (index % 4 == 3) {
    pw_vslice_span_t req = {.struct_size = sizeof(req),
                            .mesh = pw_mesh_shape_make(1, (const uint32_t[]){2 * PER_SLICE}),
                            .slice_count = 2};
    TRY(pw_vslice_create_spanning(client, &req, &vs), "spanning vslice");
  } else {
    pw_mesh_shape_t mesh = pw_mesh_shape_make(1, (const uint32_t[]){PER_SLICE});
    TRY(pw_vslice_create(client, &mesh, 0, &vs), "vslice");
  }
  const char* text = "copy\ninput f32[16] split(0,all)\noutput f32[16] split(0,all)\n";
  TRY(pw_executable_compile(client, vs, text, strlen(text), NULL, &copy), "compile");
  TRY(pw_graph_create(client, &g), "graph");
  int64_t dims[1] = {N};
  pw_array_spec_t spec = {PW_DTYPE_F32, pw_shape_make(1, dims),
                          pw_sharding_split(0, PW_MESH_AXIS_ALL)};
  uint32_t node;
  TRY(pw_graph_add_parameter(client, g, vs, &spec, &node), "param");
  for (int k = 0; k < CHAIN; ++k) {
    pw_value_t in = pw_value(node, 0);
    TRY(pw_graph_add_compute(client, g, "copy", copy, vs, &in, 1, &node), "copy");
  }
  TRY(pw_graph_add_output(client, g, pw_value(node, 0)), "output");
  for (int i = 0; i < g_iterations; ++i) {
    flight_t* f = &flights[i % IN_FLIGHT];
    if (f->done != NULL) land(client, f, index);
    for (int e = 0; e < N; ++e) f->want[e] = (float)(index * 100000 + i * 17 + e);
    if (!g_queued && i % 8 == 7) {
      pw_double_backend_fail_launch(g_dbl, 3, PW_STATUS_DATA_LOSS,
                                    (i / 8) % 2 ? PW_DOUBLE_FAIL_AT_COMPLETION
                                                : PW_DOUBLE_FAIL_AT_LAUNCH);
    }
    TRY(pw_buffer_from_host(client, vs, &spec, f->want, sizeof(f->want), &f->x), "from_host");
    pw_status_t st = pw_graph_submit(client, g, &f->x, 1, NULL, &f->y, 1, &f->done);
    if (st != NULL) {
      pw_status_free(pw_buffer_release(client, f->x));
      TRY(st, "submit");
    }
  }
out:
  for (int k = 0; k < IN_FLIGHT; ++k) {
    if (flights[k].done != NULL) land(client, &flights[k], index);
  }
  if (g.id) (void)ok(pw_graph_release(client, g), "graph release", index);
  if (copy.id) (void)ok(pw_executable_release(client, copy), "executable release", index);
  if (vs.id) (void)ok(pw_vslice_release(client, vs), "vslice release", index);
  if (own) (void)ok(pw_client_destroy(client), "client destroy", index);
  return NULL;
}

/* The backend of one configuration, on |t|. */
static pw_status_t make_backend(pw_test_allocator_t* t, pw_backend_t* out) {
  pw_double_options_t o;
  pw_double_options_init(&o);
  o.device_count = 2 * PER_SLICE;
  o.completion = g_queued ? PW_DOUBLE_COMPLETE_INLINE : PW_DOUBLE_COMPLETE_THREADED;
  o.worker_count = 2;
  o.allocator = pw_test_allocator(t);
  o.host_launch = true;
  o.devices_per_host = 2;
  pw_backend_t dbl;
  PW_RETURN_IF_ERROR(pw_double_backend_create(&o, &dbl));
  g_dbl = pw_double_backend_from(&dbl);
  if (!g_queued) {
    *out = dbl;
    return NULL;
  }
  pw_queue_wrapper_options_t qo = {.depth = 4, .ordered = true, .fail_every = 37,
                                   .lose_every = 211};
  return pw_queue_wrapper_create(&qo, dbl, out);
}

/* Runs one configuration; false on any failure. */
static bool run_config(bool queued) {
  g_queued = queued;
  atomic_store(&g_failures, 0);
  atomic_store(&g_ok, 0);
  atomic_store(&g_data_loss, 0);
  atomic_store(&g_deadline, 0);
  atomic_store(&g_refused, 0);
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_backend_t backend;
  pw_status_t s = make_backend(&t, &backend);
  pw_slice_desc_t slices[2];
  for (uint32_t i = 0; i < 2; ++i) {
    slices[i] = (pw_slice_desc_t){.mesh = pw_mesh_shape_make(1, (const uint32_t[]){PER_SLICE}),
                                  .first_device = i * PER_SLICE, .host = i};
  }
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.allocator = pw_test_allocator(&t);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = 2;
  ro.launch_deadline_ns = queued ? 200 * 1000 * 1000 : 0;
  ro.drain_deadline_ns = 1000 * 1000 * 1000;
  if (s == NULL) s = pw_runtime_create(&ro, &g_runtime);
  if (s == NULL) s = pw_client_create(g_runtime, NULL, &g_shared);
  if (!ok(s, "setup", -1)) return false;
  pthread_t threads[MAX_THREADS];
  for (int i = 0; i < g_threads; ++i) {
    pthread_create(&threads[i], NULL, submitter, (void*)(intptr_t)i);
  }
  for (int i = 0; i < g_threads; ++i) pthread_join(threads[i], NULL);
  uint64_t host_launches = pw_double_backend_total_host_launches(g_dbl);
  (void)ok(pw_client_destroy(g_shared), "shared client destroy", -1);
  (void)ok(pw_runtime_destroy(g_runtime), "runtime destroy", -1);
  const char* cfg = queued ? "queued" : "threaded";
  long want = (long)g_threads * g_iterations;
  long ok_runs = atomic_load(&g_ok), lost = atomic_load(&g_data_loss);
  long late = atomic_load(&g_deadline), refused = atomic_load(&g_refused);
  if (ok_runs + lost + late + refused != want) {
    fprintf(stderr, NAME ": %s: %ld runs resolved, want %ld\n", cfg,
            ok_runs + lost + late + refused, want);
    atomic_fetch_add(&g_failures, 1);
  }
  if (ok_runs == 0 || lost == 0 || (queued && late == 0)) {
    fprintf(stderr, NAME ": %s: every outcome must occur (ok %ld, data loss %ld, deadline %ld)\n",
            cfg, ok_runs, lost, late);
    atomic_fetch_add(&g_failures, 1);
  }
  /* Every op launched through its lanes: at least 4 host launches for
   * each op that ran OK. */
  if (host_launches < (uint64_t)ok_runs * CHAIN * 4) {
    fprintf(stderr, NAME ": %s: %llu host launches for %ld good runs\n", cfg,
            (unsigned long long)host_launches, ok_runs);
    atomic_fetch_add(&g_failures, 1);
  }
  if (pw_test_allocator_live(&t) != 0) {
    fprintf(stderr, NAME ": %s: %zu allocations leaked\n", cfg, pw_test_allocator_live(&t));
    atomic_fetch_add(&g_failures, 1);
  }
  printf(NAME ": %s: %d threads x %d runs of a %d-op chain on lanes, ok %ld, data loss %ld, "
         "deadline %ld, refused %ld, host launches %llu, failures=%d\n",
         cfg, g_threads, g_iterations, CHAIN, ok_runs, lost, late, refused,
         (unsigned long long)host_launches, atomic_load(&g_failures));
  return atomic_load(&g_failures) == 0;
}

int main(int argc, char** argv) {
  if (argc > 1) g_iterations = atoi(argv[1]);
  if (argc > 2) g_threads = atoi(argv[2]);
  if (g_threads < 1) g_threads = 1;
  if (g_threads > MAX_THREADS) g_threads = MAX_THREADS;
  bool threaded_ok = run_config(false);
  bool queued_ok = run_config(true);
  return threaded_ok && queued_ok ? 0 : 1;
}
