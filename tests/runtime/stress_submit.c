/* Stress: T threads (each its own client, plus threads sharing one client)
 * submit interleaved graphs onto the same two slices of a threaded test
 * double. Checks: every execution completes OK, every output holds the
 * right bytes, every device of a slice launched the same gang ids in the
 * same order, and nothing leaks. Plain executable (TSan cannot run
 * Criterion). Usage: stress_runtime_submit [iterations-per-thread] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fixture.h"
#include "support/test_allocators.h"

#define THREADS 4
#define MAX_ORDER 65536

static int g_iterations = 200;
static pw_runtime_t* g_runtime;
static pw_client_t* g_shared;
static _Atomic int g_failures;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "stress_runtime_submit: " __VA_ARGS__); \
      fprintf(stderr, "\n");                               \
      g_failures++;                                        \
      return NULL;                                         \
    }                                                      \
  } while (0)

static bool ok(pw_status_t s, const char* what) {
  if (s == NULL) return true;
  char m[512];
  pw_status_format(s, m, sizeof(m));
  fprintf(stderr, "stress_runtime_submit: %s: %s\n", what, m);
  pw_status_free(s);
  return false;
}

static void* submitter(void* arg) {
  int index = (int)(intptr_t)arg;
  pw_client_t* client = g_shared;
  bool own = index % 2 == 0;
  if (own) CHECK(ok(pw_client_create(g_runtime, NULL, &client), "client"), "no client");
  pw_mesh_shape_t mesh;
  CHECK(ok(pw_mesh_shape_parse("2x2", &mesh), "mesh"), "mesh");
  pw_vslice_t vs;
  CHECK(ok(pw_vslice_create(client, &mesh, 0, &vs), "vslice"), "vslice");
  const char* prog = "copy\ninput f32[4] split(0,all)\noutput f32[4] split(0,all)\n";
  pw_executable_t copy, reduce;
  CHECK(ok(pw_executable_compile(client, vs, prog, strlen(prog), NULL, &copy), "compile"), "c");
  /* A collective spanning every device of the slice. */
  const char* allreduce =
      "all_reduce_sum\ninput f32[4] split(0,all)\noutput f32[4] split(0,all)\n";
  CHECK(ok(pw_executable_compile(client, vs, allreduce, strlen(allreduce), NULL, &reduce),
           "compile"), "c");
  pw_graph_t g;
  CHECK(ok(pw_graph_create(client, &g), "graph"), "g");
  int64_t dims[1] = {4};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t p, a, b;
  CHECK(ok(pw_graph_add_parameter(client, g, vs, &spec, &p), "param"), "p");
  pw_value_t in = pw_value(p, 0);
  CHECK(ok(pw_graph_add_compute(client, g, "a", copy, vs, &in, 1, &a), "a"), "a");
  in = pw_value(a, 0);
  CHECK(ok(pw_graph_add_compute(client, g, "b", reduce, vs, &in, 1, &b), "b"), "b");
  CHECK(ok(pw_graph_add_output(client, g, pw_value(b, 0)), "out"), "o");
  float data[4] = {(float)index, 1, 2, 3};
  pw_buffer_t x;
  CHECK(ok(pw_buffer_from_host(client, vs, &spec, data, sizeof(data), &x), "from_host"), "x");
  pw_buffer_t y = {0};
  for (int i = 0; i < g_iterations; ++i) {
    if (y.id) CHECK(ok(pw_buffer_release(client, y), "release"), "r");
    pw_event_t* done;
    CHECK(ok(pw_graph_submit(client, g, &x, 1, NULL, &y, 1, &done), "submit"), "s");
    if (i % 16 == 15) {
      CHECK(ok(pw_fixture_wait(done), "wait"), "w");
    } else {
      pw_event_release(done);
    }
  }
  float back[4];
  CHECK(ok(pw_buffer_to_host(client, y, back, sizeof(back), pw_deadline_from_timeout(30000000000LL)),
           "to_host"), "t");
  float sum = data[0] + data[1] + data[2] + data[3];
  for (int k = 0; k < 4; ++k) CHECK(back[k] == sum, "thread %d: element %d is %f, want %f", index, k, back[k], sum);
  CHECK(ok(pw_buffer_release(client, y), "release"), "r");
  CHECK(ok(pw_buffer_release(client, x), "release"), "r");
  CHECK(ok(pw_graph_release(client, g), "graph release"), "g");
  CHECK(ok(pw_vslice_release(client, vs), "vslice release"), "v");
  if (own) pw_client_destroy(client);
  return NULL;
}

/* One configuration: a policy and a window. */
static int run_config(const char* label, pw_sched_policy_t policy, uint32_t window) {
  g_failures = 0;
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_fixture_t f;
  if (!ok(pw_fixture_init_sched(&f, PW_FIXTURE_DOUBLE_THREADED, 2, "2x2",
                                pw_test_allocator(&t), policy, window),
          "fixture")) {
    return 1;
  }
  g_runtime = f.runtime;
  g_shared = f.client;
  pthread_t threads[THREADS];
  for (int i = 0; i < THREADS; ++i) {
    pthread_create(&threads[i], NULL, submitter, (void*)(intptr_t)i);
  }
  for (int i = 0; i < THREADS; ++i) pthread_join(threads[i], NULL);
  /* Gang order: devices of each slice launched identical sequences. */
  static uint64_t first[MAX_ORDER], other[MAX_ORDER];
  uint64_t launches = 0;
  for (uint32_t s = 0; s < 2; ++s) {
    size_t n0 = pw_double_backend_launch_order(f.dbl, s * 4, first, MAX_ORDER);
    if (n0 > MAX_ORDER) n0 = MAX_ORDER;
    launches += n0;
    for (uint32_t d = 1; d < 4; ++d) {
      size_t n = pw_double_backend_launch_order(f.dbl, s * 4 + d, other, MAX_ORDER);
      if (n > MAX_ORDER) n = MAX_ORDER;
      if (n != n0 || memcmp(first, other, n * sizeof(uint64_t)) != 0) {
        fprintf(stderr, "stress_runtime_submit: slice %u device %u order differs\n", s, d);
        g_failures++;
      }
    }
  }
  pw_fixture_deinit(&f);
  if (pw_test_allocator_live(&t) != 0) {
    fprintf(stderr, "stress_runtime_submit: %zu allocations leaked\n", pw_test_allocator_live(&t));
    g_failures++;
  }
  printf("stress_runtime_submit [%s]: %d threads x %d submissions, %llu launches per "
         "device sequence checked, failures=%d\n",
         label, THREADS, g_iterations, (unsigned long long)launches, (int)g_failures);
  return g_failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc > 1) g_iterations = atoi(argv[1]);
  pw_sched_policy_t none = {NULL, NULL};
  int rc = run_config("fifo, no window", none, 0);
  rc |= run_config("fifo, window 2", pw_sched_policy_fifo(), 2);
  rc |= run_config("priority, window 2", pw_sched_policy_priority(), 2);
  rc |= run_config("fair share, window 3", pw_sched_policy_fair_share(), 3);
  return rc;
}
