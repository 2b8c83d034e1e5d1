/* Stress: chains on one-device slices, resubmitted from several threads,
 * completing on the CPU backend's pool threads.
 *
 * One-device slices take the dispatcher's quiet path: the device that
 * completes an op readies its successor on the same slice with a plain
 * store and arrives there itself, and every op re-arms its own counters at
 * completion so a resubmitted graph reuses its execution block without a
 * pass over its ops. This test drives exactly that with real values: T
 * threads (even ones with their own client, odd ones sharing one) each
 * build a graph
 *
 *   x -> relu x6 -> add(r5, r3) -> transfer -> relu x4 -> add(s3, s1)
 *     -> transfer back -> add(back, r5) -> y
 *
 * (one-producer ops, two-producer joins, transfers to the thread's second
 * virtual slice and back, so that the first slice runs the graph in two
 * appends and r5's successor enters its sequence late), and submit it
 * again and again with a new argument each time, several executions in
 * flight, reading every output back: y must be 5x (x is positive, relu is
 * the identity there). Twice: without a scheduler window (whole runs
 * appended at once) and with FIFO window 2 (op by op, so a device often
 * finds its op at the tail). A wrong order,
 * a stale counter or a reused block read too early shows up as a wrong
 * value, a hang (the deadline) or a leak (the counting allocator).
 * Plain executable (TSan cannot run Criterion).
 * Usage: stress_runtime_chain [iterations-per-thread] [threads] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fixture.h"
#include "support/queue_wrapper.h"
#include "support/test_allocators.h"

#define MAX_THREADS 8
#define SLICES 4
#define N 8
#define IN_FLIGHT 4
#define DEADLINE_NS 30000000000LL
#define STRESS_NAME "stress_runtime_chain"
#include "stress_flights.h"

static int g_iterations = 300;
static int g_threads = 4;
static pw_runtime_t* g_runtime;
static pw_client_t* g_shared;

static void* submitter(void* arg) {
  int index = (int)(intptr_t)arg;
  pw_client_t* client = g_shared;
  bool own = index % 2 == 0;
  flight_t flights[IN_FLIGHT];
  memset(flights, 0, sizeof(flights));
  pw_graph_t g = {0};
  pw_vslice_t a = {0}, b = {0};
  if (own && !ok(pw_client_create(g_runtime, NULL, &client), "client", index)) return NULL;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, (const uint32_t[]){1});
  TRY(pw_vslice_create(client, &mesh, 0, &a), "vslice a");
  TRY(pw_vslice_create(client, &mesh, 0, &b), "vslice b");
  const char* relu = "kernel relu\ninput f32[8] replicated\noutput f32[8] replicated\n";
  const char* add =
      "kernel add\ninput f32[8] replicated\ninput f32[8] replicated\n"
      "output f32[8] replicated\n";
  pw_executable_t relu_a, add_a, relu_b, add_b;
  TRY(pw_executable_compile(client, a, relu, strlen(relu), NULL, &relu_a), "compile");
  TRY(pw_executable_compile(client, a, add, strlen(add), NULL, &add_a), "compile");
  TRY(pw_executable_compile(client, b, relu, strlen(relu), NULL, &relu_b), "compile");
  TRY(pw_executable_compile(client, b, add, strlen(add), NULL, &add_b), "compile");
  TRY(pw_graph_create(client, &g), "graph");
  int64_t dims[1] = {N};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_replicated());
  uint32_t node, r[6], s[4], j, t;
  TRY(pw_graph_add_parameter(client, g, a, &spec, &node), "param");
  for (int k = 0; k < 6; ++k) {
    pw_value_t in = pw_value(k ? r[k - 1] : node, 0);
    TRY(pw_graph_add_compute(client, g, "r", relu_a, a, &in, 1, &r[k]), "relu");
  }
  pw_value_t pair[2] = {pw_value(r[5], 0), pw_value(r[3], 0)};
  TRY(pw_graph_add_compute(client, g, "join a", add_a, a, pair, 2, &j), "add");
  TRY(pw_graph_add_transfer(client, g, "move", pw_value(j, 0), b, pw_sharding_replicated(), &t),
      "transfer");
  for (int k = 0; k < 4; ++k) {
    pw_value_t in = pw_value(k ? s[k - 1] : t, 0);
    TRY(pw_graph_add_compute(client, g, "s", relu_b, b, &in, 1, &s[k]), "relu");
  }
  pair[0] = pw_value(s[3], 0);
  pair[1] = pw_value(s[1], 0);
  TRY(pw_graph_add_compute(client, g, "join b", add_b, b, pair, 2, &j), "add");
  TRY(pw_graph_add_transfer(client, g, "back", pw_value(j, 0), a, pw_sharding_replicated(), &t),
      "transfer");
  pair[0] = pw_value(t, 0);
  pair[1] = pw_value(r[5], 0);
  TRY(pw_graph_add_compute(client, g, "join c", add_a, a, pair, 2, &j), "add");
  TRY(pw_graph_add_output(client, g, pw_value(j, 0)), "output");
  for (int i = 0; i < g_iterations; ++i) {
    flight_t* f = &flights[i % IN_FLIGHT];
    if (f->done != NULL && !land(client, f, index)) goto out;
    float x[N];
    for (int e = 0; e < N; ++e) {
      x[e] = (float)(index * 4096 + i * N + e + 1);
      f->want[e] = 5 * x[e];
    }
    TRY(pw_buffer_from_host(client, a, &spec, x, sizeof(x), &f->x), "from_host");
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
  if (a.id) (void)ok(pw_vslice_release(client, a), "vslice release", index);
  if (b.id) (void)ok(pw_vslice_release(client, b), "vslice release", index);
  if (own) pw_client_destroy(client);
  return NULL;
}

static int run_config_on(const char* label, pw_fixture_backend_t kind, pw_sched_policy_t policy,
                         uint32_t window);
static int run_config(const char* label, pw_sched_policy_t policy, uint32_t window) {
  return run_config_on(label, PW_FIXTURE_CPU, policy, window);
}

static int run_config_on(const char* label, pw_fixture_backend_t kind, pw_sched_policy_t policy,
                         uint32_t window) {
  g_failures = 0;
  g_checked = 0;
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_fixture_t f;
  pw_status_t s = pw_fixture_init_sched(&f, kind, SLICES, "1", pw_test_allocator(&t),
                                        policy, window);
  if (s != NULL) {
    char m[512];
    pw_status_format(s, m, sizeof(m));
    pw_status_free(s);
    fprintf(stderr, "stress_runtime_chain: fixture: %s\n", m);
    return 1;
  }
  g_runtime = f.runtime;
  g_shared = f.client;
  pthread_t threads[MAX_THREADS];
  for (int i = 0; i < g_threads; ++i) {
    pthread_create(&threads[i], NULL, submitter, (void*)(intptr_t)i);
  }
  for (int i = 0; i < g_threads; ++i) pthread_join(threads[i], NULL);
  if (f.qw != NULL) {
    /* Launched ahead: some device held more than one launch at once, and
     * every device got its launches in queue_seq order. */
    uint32_t most = 0;
    uint64_t out_of_order = 0;
    for (uint32_t d = 0; d < SLICES; ++d) {
      pw_queue_wrapper_stats_t st = pw_queue_wrapper_stats(f.qw, d);
      if (st.max_outstanding > most) most = st.max_outstanding;
      out_of_order += st.out_of_order;
    }
    if (most < 2 || out_of_order != 0) {
      fprintf(stderr, "stress_runtime_chain [%s]: at most %u launches outstanding on a device, "
              "%llu out of queue order\n", label, most, (unsigned long long)out_of_order);
      g_failures++;
    }
  }
  pw_fixture_deinit(&f);
  if (pw_test_allocator_live(&t) != 0) {
    fprintf(stderr, "stress_runtime_chain: %zu allocations leaked\n", pw_test_allocator_live(&t));
    g_failures++;
  }
  long want = (long)g_threads * g_iterations;
  if (g_failures == 0 && g_checked != want) {
    fprintf(stderr, "stress_runtime_chain: %ld outputs checked, want %ld\n", (long)g_checked,
            want);
    g_failures++;
  }
  printf("stress_runtime_chain [%s]: %d threads x %d submissions of a 15-op graph on "
         "one-device slices, %ld outputs checked, failures=%d\n",
         label, g_threads, g_iterations, (long)g_checked, (int)g_failures);
  return g_failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1) g_iterations = atoi(argv[1]);
  if (argc > 2) g_threads = atoi(argv[2]);
  if (g_threads < 1 || g_threads > MAX_THREADS) g_threads = 4;
  pw_sched_policy_t none = {NULL, NULL};
  int rc = run_config("no window", none, 0);
  rc |= run_config("fifo, window 2", pw_sched_policy_fifo(), 2);
  /* Queue-ordered launch: the same chains launched ahead of completion. */
  rc |= run_config_on("queued, no window", PW_FIXTURE_CPU_QUEUED, none, 0);
  rc |= run_config_on("queued, fifo, window 2", PW_FIXTURE_CPU_QUEUED, pw_sched_policy_fifo(), 2);
  return rc;
}
