/* Stress: queue-ordered launch with failures and lost launches injected
 * mid-queue, under launch deadlines, from several submitting threads.
 *
 * The CPU backend behind the queue-ordered wrapper (depth 8; every 37th
 * launch of a device fails with DATA_LOSS, every 211th is lost: its done
 * never comes), four one-device slices, a launch deadline of 200 ms. T
 * threads (even ones with their own client, odd ones sharing one) each
 * submit a chain x -> relu x8 -> y again and again, four runs in flight,
 * each on its thread's slice. Every run must resolve exactly once: OK
 * with y == x (relu is the identity on positive x), or DATA_LOSS (a failed
 * launch in its chain), or DEADLINE_EXCEEDED (a lost one, or one only
 * slow past the deadline on a loaded machine), or RESOURCE_EXHAUSTED from
 * the wrapper (a slow launch failed by its deadline gave back a queue
 * slot the backend still held: the documented cost of a deadline shorter
 * than the slowest launch, counted apart); nothing else,
 * no hang (a 30 s wait per run), no leak (the counting allocator), and
 * each outcome must have happened. Then the clients and the runtime are
 * destroyed while the wrapper may still hold lost launches.
 * Plain executable (TSan cannot run Criterion).
 * Usage: stress_runtime_queued [iterations-per-thread] [threads] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pathways/backends/cpu.h"
#include "pathways/pathways.h"
#include "support/queue_wrapper.h"
#include "support/test_allocators.h"

#define N 8
#define SLICES 4
#define MAX_THREADS 8
#define IN_FLIGHT 4
#define CHAIN 8
#define WAIT_NS INT64_C(30000000000)

static int g_iterations = 200;
static int g_threads = 4;
static pw_runtime_t* g_runtime;
static pw_client_t* g_shared;
static atomic_int g_failures;
static atomic_long g_ok, g_data_loss, g_deadline, g_refused;

static bool ok(pw_status_t s, const char* what, int thread) {
  if (s == NULL) return true;
  char m[512];
  pw_status_format(s, m, sizeof(m));
  fprintf(stderr, "stress_runtime_queued: thread %d: %s: %s\n", thread, what, m);
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
  float want;
} flight_t;

/* Resolves |f|: one of the three outcomes, counted. */
static void land(pw_client_t* client, flight_t* f, int index) {
  pw_status_t st = pw_event_wait(f->done, pw_deadline_from_timeout(WAIT_NS));
  pw_event_release(f->done);
  f->done = NULL;
  if (st == NULL) {
    float back[N] = {0};
    if (ok(pw_buffer_to_host(client, f->y, back, sizeof(back), PW_INFINITE_FUTURE), "to_host",
           index)) {
      for (int e = 0; e < N; ++e) {
        if (back[e] != f->want) {
          fprintf(stderr, "stress_runtime_queued: thread %d: element %d is %g, want %g\n", index,
                  e, (double)back[e], (double)f->want);
          atomic_fetch_add(&g_failures, 1);
          break;
        }
      }
      atomic_fetch_add(&g_ok, 1);
    }
  } else if (pw_status_code(st) == PW_STATUS_DATA_LOSS) {
    atomic_fetch_add(&g_data_loss, 1);
    pw_status_free(st);
  } else if (pw_status_code(st) == PW_STATUS_DEADLINE_EXCEEDED) {
    atomic_fetch_add(&g_deadline, 1);
    pw_status_free(st);
  } else if (pw_status_code(st) == PW_STATUS_RESOURCE_EXHAUSTED &&
             strstr(pw_status_message(st), "launches outstanding (its depth)") != NULL) {
    atomic_fetch_add(&g_refused, 1);
    pw_status_free(st);
  } else {
    (void)ok(st, "run (neither OK, DATA_LOSS nor DEADLINE_EXCEEDED)", index);
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
  pw_executable_t relu = {0};
  if (own && !ok(pw_client_create(g_runtime, NULL, &client), "client", index)) return NULL;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, (const uint32_t[]){1});
  TRY(pw_vslice_create(client, &mesh, 0, &vs), "vslice");
  const char* text = "kernel relu\ninput f32[8] replicated\noutput f32[8] replicated\n";
  TRY(pw_executable_compile(client, vs, text, strlen(text), NULL, &relu), "compile");
  TRY(pw_graph_create(client, &g), "graph");
  int64_t dims[1] = {N};
  pw_array_spec_t spec = {PW_DTYPE_F32, pw_shape_make(1, dims), pw_sharding_replicated()};
  uint32_t node;
  TRY(pw_graph_add_parameter(client, g, vs, &spec, &node), "param");
  for (int k = 0; k < CHAIN; ++k) {
    pw_value_t in = pw_value(node, 0);
    TRY(pw_graph_add_compute(client, g, "relu", relu, vs, &in, 1, &node), "relu");
  }
  TRY(pw_graph_add_output(client, g, pw_value(node, 0)), "output");
  for (int i = 0; i < g_iterations; ++i) {
    flight_t* f = &flights[i % IN_FLIGHT];
    if (f->done != NULL) land(client, f, index);
    float x[N];
    f->want = (float)(index * 100000 + i + 1);
    for (int e = 0; e < N; ++e) x[e] = f->want;
    TRY(pw_buffer_from_host(client, vs, &spec, x, sizeof(x), &f->x), "from_host");
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
  if (relu.id) (void)ok(pw_executable_release(client, relu), "executable release", index);
  if (vs.id) (void)ok(pw_vslice_release(client, vs), "vslice release", index);
  if (own) (void)ok(pw_client_destroy(client), "client destroy", index);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 1) g_iterations = atoi(argv[1]);
  if (argc > 2) g_threads = atoi(argv[2]);
  if (g_threads < 1) g_threads = 1;
  if (g_threads > MAX_THREADS) g_threads = MAX_THREADS;
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_cpu_backend_options_t co;
  pw_cpu_backend_options_init(&co);
  co.device_count = SLICES;
  co.worker_count = 2;
  co.allocator = pw_test_allocator(&t);
  pw_backend_t cpu, backend;
  pw_queue_wrapper_options_t qo = {.depth = 8, .ordered = true, .fail_every = 37,
                                   .lose_every = 211};
  pw_status_t s = pw_cpu_backend_create(&co, &cpu);
  if (s == NULL) s = pw_queue_wrapper_create(&qo, cpu, &backend);
  pw_slice_desc_t slices[SLICES];
  for (uint32_t i = 0; i < SLICES; ++i) {
    slices[i] = (pw_slice_desc_t){.mesh = pw_mesh_shape_make(1, (const uint32_t[]){1}),
                                  .first_device = i, .host = i};
  }
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.allocator = pw_test_allocator(&t);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = SLICES;
  ro.launch_deadline_ns = 200 * 1000 * 1000;
  ro.drain_deadline_ns = 1000 * 1000 * 1000;
  if (s == NULL) s = pw_runtime_create(&ro, &g_runtime);
  if (s == NULL) s = pw_client_create(g_runtime, NULL, &g_shared);
  if (!ok(s, "setup", -1)) return 1;
  pthread_t threads[MAX_THREADS];
  for (int i = 0; i < g_threads; ++i) {
    pthread_create(&threads[i], NULL, submitter, (void*)(intptr_t)i);
  }
  for (int i = 0; i < g_threads; ++i) pthread_join(threads[i], NULL);
  (void)ok(pw_client_destroy(g_shared), "shared client destroy", -1);
  (void)ok(pw_runtime_destroy(g_runtime), "runtime destroy", -1);
  long want = (long)g_threads * g_iterations;
  long got = atomic_load(&g_ok) + atomic_load(&g_data_loss) + atomic_load(&g_deadline) +
             atomic_load(&g_refused);
  if (got != want) {
    fprintf(stderr, "stress_runtime_queued: %ld runs resolved, want %ld\n", got, want);
    g_failures++;
  }
  if (atomic_load(&g_ok) == 0 || atomic_load(&g_data_loss) == 0 ||
      atomic_load(&g_deadline) == 0) {
    fprintf(stderr, "stress_runtime_queued: every outcome must occur (ok %ld, data loss %ld, "
            "deadline %ld)\n", atomic_load(&g_ok), atomic_load(&g_data_loss),
            atomic_load(&g_deadline));
    g_failures++;
  }
  if (pw_test_allocator_live(&t) != 0) {
    fprintf(stderr, "stress_runtime_queued: %zu allocations leaked\n",
            pw_test_allocator_live(&t));
    g_failures++;
  }
  printf("stress_runtime_queued: %d threads x %d runs of a %d-op chain, queued (depth 8), "
         "ok %ld, data loss %ld, deadline %ld, refused %ld, failures=%d\n",
         g_threads, g_iterations, CHAIN, atomic_load(&g_ok), atomic_load(&g_data_loss),
         atomic_load(&g_deadline), atomic_load(&g_refused), atomic_load(&g_failures));
  return atomic_load(&g_failures) == 0 ? 0 : 1;
}
