/* Stress: several threads make the first submission of the same fresh
 * graph at once, round after round, so that they race to finalize it and
 * to derive and publish its dispatch data (lib/sched/plan.c: one CAS
 * publishes, the losers free their copies). Half of them submit through
 * pw_graph_submit, half through an armed graph each (pw_graph_exec_create
 * on the fresh graph, then its first submission). Checks: every
 * submission succeeds, every output holds the input, and nothing leaks
 * (the dispatch data goes with the graph). Without and with a scheduler
 * window. Plain executable (TSan cannot run Criterion). Usage:
 * stress_runtime_first_submit [rounds] [threads] */
#define _POSIX_C_SOURCE 200809L /* pthread_barrier_t */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fixture.h"
#include "support/test_allocators.h"

#define MAX_THREADS 16
#define N 24
#define RUNS 3 /* submissions per thread per round, the first one racing */

static int g_rounds = 200;
static int g_threads = 4;
static pw_client_t* g_client;
static pw_vslice_t g_vs;
static pw_graph_t g_graph;
static pw_buffer_t g_x;
static float g_data[N];
static pthread_barrier_t g_start, g_end;
static _Atomic int g_failures;

static bool ok(pw_status_t s, const char* what) {
  if (s == NULL) return true;
  char m[512];
  pw_status_format(s, m, sizeof(m));
  fprintf(stderr, "stress_runtime_first_submit: %s: %s\n", what, m);
  pw_status_free(s);
  g_failures++;
  return false;
}

static void check_output(pw_buffer_t y, pw_event_t* done) {
  if (!ok(pw_fixture_wait(done), "run")) return;
  float back[N];
  if (ok(pw_buffer_to_host(g_client, y, back, sizeof(back),
                           pw_deadline_from_timeout(30000000000LL)),
         "to_host") &&
      memcmp(back, g_data, sizeof(back)) != 0) {
    fprintf(stderr, "stress_runtime_first_submit: wrong output\n");
    g_failures++;
  }
  (void)ok(pw_buffer_release(g_client, y), "release");
}

/* This round's submissions of |index|: the first races the other threads'. */
static void submit_round(int index) {
  pw_graph_exec_t* exec = NULL;
  bool armed = index % 2 == 1;
  if (armed && !ok(pw_graph_exec_create(g_client, g_graph, &exec), "exec create")) return;
  for (int i = 0; i < RUNS; ++i) {
    pw_buffer_t y = {0};
    pw_event_t* done = NULL;
    pw_status_t s = armed ? pw_graph_exec_submit(exec, &g_x, 1, NULL, &y, 1, &done)
                          : pw_graph_submit(g_client, g_graph, &g_x, 1, NULL, &y, 1, &done);
    if (!ok(s, armed ? "exec submit" : "submit")) break;
    check_output(y, done);
  }
  if (exec != NULL) (void)ok(pw_graph_exec_destroy(exec), "exec destroy");
}

static void* submitter(void* arg) {
  int index = (int)(intptr_t)arg;
  for (int r = 0; r < g_rounds; ++r) {
    pthread_barrier_wait(&g_start);
    submit_round(index);
    pthread_barrier_wait(&g_end);
  }
  return NULL;
}

/* A fresh graph: x -> copy -> output, not finalized. */
static bool make_graph(pw_executable_t copy) {
  memset(&g_graph, 0, sizeof(g_graph));
  if (!ok(pw_graph_create(g_client, &g_graph), "graph")) return false;
  int64_t dims[1] = {N};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t p, c;
  if (!ok(pw_graph_add_parameter(g_client, g_graph, g_vs, &spec, &p), "param")) return false;
  pw_value_t in = pw_value(p, 0);
  if (!ok(pw_graph_add_compute(g_client, g_graph, "copy", copy, g_vs, &in, 1, &c), "compute")) {
    return false;
  }
  return ok(pw_graph_add_output(g_client, g_graph, pw_value(c, 0)), "output");
}

static int run_config(const char* label, pw_sched_policy_t policy, uint32_t window) {
  g_failures = 0;
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_fixture_t f;
  if (!ok(pw_fixture_init_sched(&f, PW_FIXTURE_DOUBLE_THREADED, 1, "2x2", pw_test_allocator(&t),
                                policy, window),
          "fixture")) {
    return 1;
  }
  g_client = f.client;
  pw_executable_t copy;
  int64_t dims[1] = {N};
  bool ready = ok(pw_fixture_vslice(&f, "2x2", &g_vs), "vslice") &&
               ok(pw_fixture_compile(&f, g_vs,
                                     "copy\ninput f32[24] split(0,all)\n"
                                     "output f32[24] split(0,all)\n",
                                     &copy),
                  "compile") &&
               ok(pw_fixture_f32(&f, g_vs, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL),
                                 g_data, &g_x),
                  "buffer");
  if (!ready) {
    pw_fixture_deinit(&f);
    return 1;
  }
  pthread_barrier_init(&g_start, NULL, (unsigned)g_threads + 1);
  pthread_barrier_init(&g_end, NULL, (unsigned)g_threads + 1);
  pthread_t threads[MAX_THREADS];
  for (int i = 0; i < g_threads; ++i) {
    pthread_create(&threads[i], NULL, submitter, (void*)(intptr_t)i);
  }
  for (int r = 0; r < g_rounds; ++r) {
    /* The threads go on through failed rounds (counted): they wait at
     * the barriers either way. */
    (void)make_graph(copy);
    pthread_barrier_wait(&g_start);
    pthread_barrier_wait(&g_end);
    if (g_graph.id != 0) (void)ok(pw_graph_release(g_client, g_graph), "graph release");
  }
  for (int i = 0; i < g_threads; ++i) pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&g_start);
  pthread_barrier_destroy(&g_end);
  (void)ok(pw_buffer_release(g_client, g_x), "release x");
  pw_fixture_deinit(&f);
  if (pw_test_allocator_live(&t) != 0) {
    fprintf(stderr, "stress_runtime_first_submit: %zu allocations leaked\n",
            pw_test_allocator_live(&t));
    g_failures++;
  }
  printf("stress_runtime_first_submit [%s]: %d threads x %d fresh graphs, failures=%d\n", label,
         g_threads, g_rounds, (int)g_failures);
  return g_failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1) g_rounds = atoi(argv[1]);
  if (argc > 2) g_threads = atoi(argv[2]);
  if (g_threads < 1 || g_threads > MAX_THREADS) g_threads = 4;
  for (int k = 0; k < N; ++k) g_data[k] = (float)(k * 3 + 1);
  pw_sched_policy_t none = {NULL, NULL};
  int rc = run_config("no window", none, 0);
  rc |= run_config("fifo, window 2", pw_sched_policy_fifo(), 2);
  return rc;
}
