/* Stress: lifetimes under concurrency, for TSan.
 *
 * Phase 1: a backend and a transport that hand every completion to two
 * threads calling done at once (tests/runtime/hostile.c), while two
 * clients submit compute -> transfer -> compute graphs from two threads:
 * one call of each pair wins the launch's (or copy's) once-flag, the
 * other is reported and ignored; every run resolves, OK or INTERNAL.
 * Phase 2: one thread creates a client, runs the graph, destroys the
 * client (which pins the slices' tails to give back their blocks' device
 * memory), again and again, while another client's thread keeps appending
 * to the same slices (displacing those tails). Every device allocation is
 * gone once the clients are.
 * Plain executable (TSan cannot run Criterion).
 * Usage: stress_runtime_lifecycle [iterations] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fixture.h"
#include "runtime/hostile.h"

static int g_iterations = 200;
static pw_runtime_t* g_runtime;
static pw_double_backend_t* g_double;
static atomic_int g_failures;
static atomic_int g_phase2_done;

static bool ok(pw_status_t s, const char* what) {
  if (s == NULL) return true;
  char m[512];
  pw_status_format(s, m, sizeof(m));
  fprintf(stderr, "stress_runtime_lifecycle: %s: %s\n", what, m);
  pw_status_free(s);
  atomic_fetch_add(&g_failures, 1);
  return false;
}

#define TRY(expr, what)           \
  do {                            \
    if (!ok((expr), (what))) goto out; \
  } while (0)

static const char* kCopy4 = "copy\ninput f32[4] split(0,all)\noutput f32[4] split(0,all)\n";

typedef struct job_t {
  pw_client_t* client;
  pw_graph_t graph;
  pw_buffer_t arg;
} job_t;

/* |client|'s graph: compute on a -> transfer to b -> compute on b, or only
 * the first compute when |short_graph|. */
static pw_status_t job_init(job_t* j, pw_client_t* client, bool short_graph) {
  memset(j, 0, sizeof(*j));
  j->client = client;
  pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(1, 4);
  pw_vslice_t a, b;
  PW_RETURN_IF_ERROR(pw_vslice_create(client, &mesh, 0, &a));
  if (!short_graph) PW_RETURN_IF_ERROR(pw_vslice_create(client, &mesh, 0, &b));
  pw_executable_t ca, cb;
  PW_RETURN_IF_ERROR(pw_executable_compile(client, a, kCopy4, strlen(kCopy4), NULL, &ca));
  if (!short_graph) {
    PW_RETURN_IF_ERROR(pw_executable_compile(client, b, kCopy4, strlen(kCopy4), NULL, &cb));
  }
  PW_RETURN_IF_ERROR(pw_graph_create(client, &j->graph));
  int64_t dims[1] = {4};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t p, x, t, y;
  PW_RETURN_IF_ERROR(pw_graph_add_parameter(client, j->graph, a, &spec, &p));
  pw_value_t in = pw_value(p, 0);
  PW_RETURN_IF_ERROR(pw_graph_add_compute(client, j->graph, "first", ca, a, &in, 1, &x));
  uint32_t last = x;
  if (!short_graph) {
    PW_RETURN_IF_ERROR(pw_graph_add_transfer(client, j->graph, "ship", pw_value(x, 0), b,
                                             pw_sharding_split(0, PW_MESH_AXIS_ALL), &t));
    in = pw_value(t, 0);
    PW_RETURN_IF_ERROR(pw_graph_add_compute(client, j->graph, "second", cb, b, &in, 1, &y));
    last = y;
  }
  PW_RETURN_IF_ERROR(pw_graph_add_output(client, j->graph, pw_value(last, 0)));
  float data[4] = {1, 2, 3, 4};
  return pw_buffer_from_host(client, a, &spec, data, sizeof(data), &j->arg);
}

/* One run: OK, or INTERNAL when |internal_ok| (a plugin completed twice). */
static bool job_run(job_t* j, bool internal_ok) {
  pw_buffer_t out;
  pw_event_t* done = NULL;
  if (!ok(pw_graph_submit(j->client, j->graph, &j->arg, 1, NULL, &out, 1, &done), "submit")) {
    return false;
  }
  pw_status_t s = pw_event_wait(done, pw_deadline_from_timeout(30000000000LL));
  pw_event_release(done);
  bool fine = s == NULL || (internal_ok && pw_status_code(s) == PW_STATUS_INTERNAL);
  if (!fine) return ok(s, "run");
  pw_status_free(s);
  return ok(pw_buffer_release(j->client, out), "release");
}

static void* racing_submitter(void* arg) {
  (void)arg;
  pw_client_t* client = NULL;
  job_t j;
  TRY(pw_client_create(g_runtime, NULL, &client), "client");
  TRY(job_init(&j, client, false), "job");
  for (int i = 0; i < g_iterations; ++i) {
    if (!job_run(&j, true)) break;
  }
out:
  ok(pw_client_destroy(client), "destroy");
  return NULL;
}

static void* destroyer(void* arg) {
  (void)arg;
  for (int i = 0; i < g_iterations / 4 + 1; ++i) {
    pw_client_t* client = NULL;
    job_t j;
    TRY(pw_client_create(g_runtime, NULL, &client), "client");
    TRY(job_init(&j, client, false), "job");
    for (int k = 0; k < 2; ++k) {
      if (!job_run(&j, false)) break;
    }
  out:
    ok(pw_client_destroy(client), "destroy");
  }
  atomic_store(&g_phase2_done, 1);
  return NULL;
}

static void* appender(void* arg) {
  (void)arg;
  pw_client_t* client = NULL;
  job_t j;
  TRY(pw_client_create(g_runtime, NULL, &client), "client");
  TRY(job_init(&j, client, false), "job");
  while (!atomic_load(&g_phase2_done)) {
    if (!job_run(&j, false)) break;
  }
out:
  ok(pw_client_destroy(client), "destroy");
  return NULL;
}

static void run_pair(void* (*a)(void*), void* (*b)(void*)) {
  pthread_t ta, tb;
  pthread_create(&ta, NULL, a, NULL);
  pthread_create(&tb, NULL, b, NULL);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
}

int main(int argc, char** argv) {
  if (argc > 1) g_iterations = atoi(argv[1]);
  pw_double_options_t o;
  pw_double_options_init(&o);
  o.device_count = 8;
  o.completion = PW_DOUBLE_COMPLETE_THREADED;
  o.worker_count = 2;
  pw_backend_t inner, backend;
  if (!ok(pw_double_backend_create(&o, &inner), "backend")) return 1;
  g_double = pw_double_backend_from(&inner);
  pw_hostile_backend_wrap(inner, &backend);
  pw_transport_t transport;
  if (!ok(pw_hostile_transport_create(&transport), "transport")) return 1;
  pw_slice_desc_t slices[2] = {{"a", PW_MESH_SHAPE_INIT(1, 4), 0, 0, 0}, {"b", PW_MESH_SHAPE_INIT(1, 4), 0, 4, 0}};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = 2;
  ro.transport = transport;
  if (!ok(pw_runtime_create(&ro, &g_runtime), "runtime")) return 1;

  pw_hostile_backend_arm(PW_HOSTILE_DONE_TWICE_RACING, 1ll << 40);
  pw_hostile_transport_arm(PW_HOSTILE_DONE_TWICE_RACING, 1ll << 40);
  run_pair(racing_submitter, racing_submitter);
  pw_hostile_backend_arm(PW_HOSTILE_OFF, 0);
  pw_hostile_transport_arm(PW_HOSTILE_OFF, 0);
  pw_hostile_quiesce();

  run_pair(destroyer, appender);
  size_t left = pw_double_backend_live_allocations(g_double);
  if (left != 0) {
    fprintf(stderr, "stress_runtime_lifecycle: %zu device allocations left by destroyed clients\n",
            left);
    atomic_fetch_add(&g_failures, 1);
  }
  ok(pw_runtime_destroy(g_runtime), "runtime destroy");
  int failures = atomic_load(&g_failures);
  printf("stress_runtime_lifecycle: %d iterations, %d failures\n", g_iterations, failures);
  return failures == 0 ? 0 : 1;
}
