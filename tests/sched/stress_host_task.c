/* Stress: host nodes between compute ops, resubmitted from several
 * threads (even ones with their own client, odd ones sharing one) onto
 * four 2-device CPU slices (a shared client binds each once), with
 * several runs in flight:
 *
 *   x -> scale 2 -> host (+1) -> scale 3 -> host (+1) -> y = 6x + 4
 *
 * then a host node with no inputs behind a last scale (on a queued slice
 * it waits for the device queues to drain, not for a producer),
 * and every eighth iteration a graph whose host task fails, whose done
 * event must carry its error. Without a window, with FIFO window 2, and
 * queue-ordered. A host task running before its producer completed, or a
 * later op running before the task, shows as a wrong value; a lost
 * completion as a hang (the deadline); a leak through the counting
 * allocator. Plain executable (TSan cannot run Criterion).
 * Usage: stress_sched_host_task [iterations-per-thread] [threads] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fixture.h"
#include "support/test_allocators.h"

#define MAX_THREADS 8
#define N 8
#define IN_FLIGHT 4
#define DEADLINE_NS 30000000000LL
#define STRESS_NAME "stress_sched_host_task"
#include "runtime/stress_flights.h"

static int g_iterations = 200;
static int g_threads = 4;
static pw_runtime_t* g_runtime;
static pw_client_t* g_shared;
static _Atomic long g_calls;

static pw_status_t plus_one(void* user, const pw_host_task_context_t* c) {
  (void)user;
  g_calls++;
  for (uint32_t m = 0; m < c->device_count; ++m) {
    const float* in = c->inputs[0][m];
    float* out = c->outputs[0][m];
    for (size_t i = 0; i < c->output_bytes[0] / sizeof(float); ++i) out[i] = in[i] + 1.0f;
  }
  return NULL;
}

static pw_status_t tick(void* user, const pw_host_task_context_t* c) {
  (void)user;
  (void)c;
  g_calls++;
  return NULL;
}

static pw_status_t fails(void* user, const pw_host_task_context_t* c) {
  (void)user;
  (void)c;
  return pw_status_make(PW_STATUS_DATA_LOSS, "injected");
}

static void* submitter(void* arg) {
  int index = (int)(intptr_t)arg;
  pw_client_t* client = g_shared;
  bool own = index % 2 == 0;
  flight_t flights[IN_FLIGHT];
  memset(flights, 0, sizeof(flights));
  pw_graph_t g = {0}, bad = {0};
  pw_vslice_t a = {0};
  if (own && !ok(pw_client_create(g_runtime, NULL, &client), "client", index)) return NULL;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, (const uint32_t[]){2});
  TRY(pw_vslice_create(client, &mesh, 0, &a), "vslice");
  const char* s2 =
      "kernel scale\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\nattr alpha 2\n";
  const char* s3 =
      "kernel scale\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\nattr alpha 3\n";
  pw_executable_t e2, e3;
  TRY(pw_executable_compile(client, a, s2, strlen(s2), NULL, &e2), "compile");
  TRY(pw_executable_compile(client, a, s3, strlen(s3), NULL, &e3), "compile");
  int64_t dims[1] = {N};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  pw_host_task_t inc = {sizeof(inc), plus_one, NULL, NULL};
  pw_host_task_t boom = {sizeof(boom), fails, NULL, NULL};
  uint32_t x, n1, n2, n3, n4;
  TRY(pw_graph_create(client, &g), "graph");
  TRY(pw_graph_add_parameter(client, g, a, &spec, &x), "param");
  TRY(pw_graph_add_compute(client, g, "s2", e2, a, (pw_value_t[]){pw_value(x, 0)}, 1, &n1), "c");
  TRY(pw_graph_add_host(client, g, "h1", &inc, a, (pw_value_t[]){pw_value(n1, 0)}, 1, &spec, 1,
                        &n2), "host");
  TRY(pw_graph_add_compute(client, g, "s3", e3, a, (pw_value_t[]){pw_value(n2, 0)}, 1, &n3), "c");
  TRY(pw_graph_add_host(client, g, "h2", &inc, a, (pw_value_t[]){pw_value(n3, 0)}, 1, &spec, 1,
                        &n4), "host");
  TRY(pw_graph_add_output(client, g, pw_value(n4, 0)), "output");
  pw_host_task_t ticker = {sizeof(ticker), tick, NULL, NULL};
  TRY(pw_graph_add_compute(client, g, "s2b", e2, a, (pw_value_t[]){pw_value(n4, 0)}, 1, &n1), "c");
  TRY(pw_graph_add_host(client, g, "tick", &ticker, a, NULL, 0, NULL, 0, &n2), "host");
  TRY(pw_graph_create(client, &bad), "graph");
  TRY(pw_graph_add_parameter(client, bad, a, &spec, &x), "param");
  TRY(pw_graph_add_host(client, bad, "boom", &boom, a, (pw_value_t[]){pw_value(x, 0)}, 1, &spec, 1,
                        &n1), "host");
  TRY(pw_graph_add_compute(client, bad, "after", e2, a, (pw_value_t[]){pw_value(n1, 0)}, 1, &n2),
      "c");
  for (int i = 0; i < g_iterations; ++i) {
    flight_t* f = &flights[i % IN_FLIGHT];
    if (f->done != NULL && !land(client, f, index)) goto out;
    float v[N];
    for (int e = 0; e < N; ++e) {
      v[e] = (float)(index * 64 + (i % 64) * N + e);
      f->want[e] = 6 * v[e] + 4;
    }
    TRY(pw_buffer_from_host(client, a, &spec, v, sizeof(v), &f->x), "from_host");
    pw_status_t st = pw_graph_submit(client, g, &f->x, 1, NULL, &f->y, 1, &f->done);
    if (st != NULL) {
      pw_status_free(pw_buffer_release(client, f->x));
      TRY(st, "submit");
    }
    if (i % 8 == 7) {
      pw_event_t* done = NULL;
      TRY(pw_graph_submit(client, bad, &f->x, 1, NULL, NULL, 0, &done), "submit bad");
      pw_status_t failed = pw_event_wait(done, pw_deadline_from_timeout(DEADLINE_NS));
      pw_event_release(done);
      if (failed == NULL || pw_status_code(failed) != PW_STATUS_DATA_LOSS ||
          strstr(pw_status_message(failed), "(\"boom\")") == NULL) {
        fprintf(stderr, STRESS_NAME ": thread %d: the failing run ended with %s\n", index,
                failed ? pw_status_message(failed) : "OK");
        g_failures++;
      }
      pw_status_free(failed);
    }
  }
out:
  for (int k = 0; k < IN_FLIGHT; ++k) {
    if (flights[k].done != NULL) land(client, &flights[k], index);
  }
  if (g.id) (void)ok(pw_graph_release(client, g), "graph release", index);
  if (bad.id) (void)ok(pw_graph_release(client, bad), "graph release", index);
  if (a.id) (void)ok(pw_vslice_release(client, a), "vslice release", index);
  if (own) pw_client_destroy(client);
  return NULL;
}

static int run_config(const char* label, pw_fixture_backend_t kind, pw_sched_policy_t policy,
                      uint32_t window) {
  g_failures = 0;
  g_checked = 0;
  g_calls = 0;
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_fixture_t f;
  pw_status_t s = pw_fixture_init_sched(&f, kind, 4, "2", pw_test_allocator(&t), policy, window);
  if (s != NULL) {
    char m[512];
    pw_status_format(s, m, sizeof(m));
    pw_status_free(s);
    fprintf(stderr, STRESS_NAME ": fixture: %s\n", m);
    return 1;
  }
  g_runtime = f.runtime;
  g_shared = f.client;
  pthread_t threads[MAX_THREADS];
  for (int i = 0; i < g_threads; ++i) {
    pthread_create(&threads[i], NULL, submitter, (void*)(intptr_t)i);
  }
  for (int i = 0; i < g_threads; ++i) pthread_join(threads[i], NULL);
  pw_fixture_deinit(&f);
  if (pw_test_allocator_live(&t) != 0) {
    fprintf(stderr, STRESS_NAME ": %zu allocations leaked\n", pw_test_allocator_live(&t));
    g_failures++;
  }
  long want = (long)g_threads * g_iterations;
  if (g_failures == 0 && (g_checked != want || g_calls != 3 * want)) {
    fprintf(stderr, STRESS_NAME ": %ld outputs checked and %ld host calls, want %ld and %ld\n",
            (long)g_checked, (long)g_calls, want, 3 * want);
    g_failures++;
  }
  printf(STRESS_NAME " [%s]: %d threads x %d runs of compute and host ops, %ld outputs "
         "checked, failures=%d\n",
         label, g_threads, g_iterations, (long)g_checked, (int)g_failures);
  return g_failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1) g_iterations = atoi(argv[1]);
  if (argc > 2) g_threads = atoi(argv[2]);
  if (g_threads < 1 || g_threads > MAX_THREADS) g_threads = 4;
  pw_sched_policy_t none = {NULL, NULL};
  int rc = run_config("no window", PW_FIXTURE_CPU, none, 0);
  rc |= run_config("fifo, window 2", PW_FIXTURE_CPU, pw_sched_policy_fifo(), 2);
  rc |= run_config("queued", PW_FIXTURE_CPU_QUEUED, none, 0);
  return rc;
}
