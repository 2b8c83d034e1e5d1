/* Stress: T threads (each its own client, plus threads sharing one client)
 * submit interleaved graphs onto the same three slices of a threaded test
 * double. Each graph runs a collective on one slice, then moves its result
 * onto a virtual slice spanning two or three slices (a different set per
 * thread: {0,1}, {1,2}, {0,2}, {0,1,2}) and all-reduces it there, one gang
 * across the slices. Checks: every execution completes OK, every output
 * holds the right values, every device of a slice launched the same gang
 * ids in the same order, any two slices ran the gangs they share in the
 * same relative order, and nothing leaks. Plain executable (TSan cannot
 * run Criterion). Usage: stress_runtime_submit [iterations-per-thread] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fixture.h"
#include "support/test_allocators.h"

#define THREADS 4
#define SLICES 3
#define MAX_ORDER 65536
#define N 24 /* elements: divisible by 4, 8 and 12 devices */

static int g_iterations = 200;
static int g_threads = THREADS;
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
  /* The spanning virtual slice: slices {0,1}, {1,2}, {0,2} or {0,1,2}. */
  static const uint32_t sets[THREADS][SLICES] = {{0, 1}, {1, 2}, {0, 2}, {0, 1, 2}};
  uint32_t span_count = index == 3 ? 3 : 2;
  pw_vslice_span_t span;
  memset(&span, 0, sizeof(span));
  span.struct_size = sizeof(span);
  span.mesh = pw_mesh_shape_make(1, (const uint32_t[]){4 * span_count});
  span.slice_count = span_count;
  span.slices = sets[index];
  pw_vslice_t wide;
  CHECK(ok(pw_vslice_create_spanning(client, &span, &wide), "spanning vslice"), "span");
  const char* prog = "copy\ninput f32[24] split(0,all)\noutput f32[24] split(0,all)\n";
  pw_executable_t copy, reduce, wide_reduce;
  CHECK(ok(pw_executable_compile(client, vs, prog, strlen(prog), NULL, &copy), "compile"), "c");
  /* A collective over every device of the slice, then one over every
   * device of the spanning virtual slice. */
  const char* allreduce =
      "all_reduce_sum\ninput f32[24] split(0,all)\noutput f32[24] split(0,all)\n";
  CHECK(ok(pw_executable_compile(client, vs, allreduce, strlen(allreduce), NULL, &reduce),
           "compile"), "c");
  CHECK(ok(pw_executable_compile(client, wide, allreduce, strlen(allreduce), NULL,
                                 &wide_reduce), "compile spanning"), "c");
  pw_graph_t g;
  CHECK(ok(pw_graph_create(client, &g), "graph"), "g");
  int64_t dims[1] = {N};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t p, a, b, t, w;
  CHECK(ok(pw_graph_add_parameter(client, g, vs, &spec, &p), "param"), "p");
  pw_value_t in = pw_value(p, 0);
  CHECK(ok(pw_graph_add_compute(client, g, "a", copy, vs, &in, 1, &a), "a"), "a");
  in = pw_value(a, 0);
  CHECK(ok(pw_graph_add_compute(client, g, "b", reduce, vs, &in, 1, &b), "b"), "b");
  CHECK(ok(pw_graph_add_transfer(client, g, "t", pw_value(b, 0), wide,
                                 pw_sharding_split(0, PW_MESH_AXIS_ALL), &t), "t"), "t");
  in = pw_value(t, 0);
  CHECK(ok(pw_graph_add_compute(client, g, "w", wide_reduce, wide, &in, 1, &w), "w"), "w");
  CHECK(ok(pw_graph_add_output(client, g, pw_value(w, 0)), "out"), "o");
  float data[N];
  for (int k = 0; k < N; ++k) data[k] = (float)(index * 100 + k);
  /* Expected: b sums the 4 local shards (6 elements each) elementwise; w
   * sums the 4 * span_count shards of b elementwise. */
  float local[N], want[N];
  for (int k = 0; k < N; ++k) {
    local[k] = 0;
    for (int d = 0; d < 4; ++d) local[k] += data[d * 6 + k % 6];
  }
  int devices = 4 * (int)span_count, shard = N / devices;
  for (int k = 0; k < N; ++k) {
    want[k] = 0;
    for (int d = 0; d < devices; ++d) want[k] += local[d * shard + k % shard];
  }
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
  float back[N];
  CHECK(ok(pw_buffer_to_host(client, y, back, sizeof(back), pw_deadline_from_timeout(30000000000LL)),
           "to_host"), "t");
  for (int k = 0; k < N; ++k) {
    CHECK(back[k] == want[k], "thread %d: element %d is %f, want %f", index, k, back[k], want[k]);
  }
  CHECK(ok(pw_buffer_release(client, y), "release"), "r");
  CHECK(ok(pw_buffer_release(client, x), "release"), "r");
  CHECK(ok(pw_graph_release(client, g), "graph release"), "g");
  CHECK(ok(pw_vslice_release(client, vs), "vslice release"), "v");
  CHECK(ok(pw_vslice_release(client, wide), "vslice release"), "v");
  if (own) pw_client_destroy(client);
  return NULL;
}

typedef struct gang_at_t {
  uint64_t gang;
  size_t position;
} gang_at_t;

static int gang_at_compare(const void* a, const void* b) {
  uint64_t x = ((const gang_at_t*)a)->gang, y = ((const gang_at_t*)b)->gang;
  return x < y ? -1 : x > y;
}

/* Counts pairs of gangs present in both sequences that appear in opposite
 * orders (0 when consistent); |*out_common| gets how many are in both.
 * Gangs missing from one sequence (not recorded) are ignored. */
static int64_t consistent_order(const uint64_t* a, size_t na, const uint64_t* b, size_t nb,
                                uint64_t* out_common) {
  static gang_at_t sorted[MAX_ORDER];
  for (size_t i = 0; i < nb; ++i) sorted[i] = (gang_at_t){b[i], i};
  qsort(sorted, nb, sizeof(gang_at_t), gang_at_compare);
  int64_t inversions = 0;
  uint64_t common = 0;
  size_t last = 0;
  for (size_t i = 0; i < na; ++i) {
    gang_at_t key = {a[i], 0};
    gang_at_t* hit = bsearch(&key, sorted, nb, sizeof(gang_at_t), gang_at_compare);
    if (hit == NULL) continue;
    if (common > 0 && hit->position < last) inversions++;
    last = hit->position;
    common++;
  }
  *out_common = common;
  return inversions;
}

/* One configuration: a policy and a window. */
static int run_config(const char* label, pw_sched_policy_t policy, uint32_t window) {
  g_failures = 0;
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_fixture_t f;
  if (!ok(pw_fixture_init_sched(&f, PW_FIXTURE_DOUBLE_THREADED, SLICES, "2x2",
                                pw_test_allocator(&t), policy, window),
          "fixture")) {
    return 1;
  }
  g_runtime = f.runtime;
  g_shared = f.client;
  pthread_t threads[THREADS];
  for (int i = 0; i < g_threads; ++i) {
    pthread_create(&threads[i], NULL, submitter, (void*)(intptr_t)i);
  }
  for (int i = 0; i < g_threads; ++i) pthread_join(threads[i], NULL);
  /* Gang order: devices of each slice launched identical sequences. */
  static uint64_t first[SLICES][MAX_ORDER], other[MAX_ORDER];
  size_t lengths[SLICES];
  uint64_t launches = 0;
  for (uint32_t s = 0; s < SLICES; ++s) {
    size_t n0 = pw_double_backend_launch_order(f.dbl, s * 4, first[s], MAX_ORDER);
    if (n0 > MAX_ORDER) n0 = MAX_ORDER;
    lengths[s] = n0;
    launches += n0;
    for (uint32_t d = 1; d < 4; ++d) {
      size_t n = pw_double_backend_launch_order(f.dbl, s * 4 + d, other, MAX_ORDER);
      if (n > MAX_ORDER) n = MAX_ORDER;
      if (n != n0 || memcmp(first[s], other, n * sizeof(uint64_t)) != 0) {
        fprintf(stderr, "stress_runtime_submit: slice %u device %u order differs\n", s, d);
        g_failures++;
      }
    }
  }
  /* Across slices: the gangs two slices share ran in the same relative
   * order on both (no cycle of waits between slices). */
  uint64_t shared_gangs = 0;
  for (uint32_t s = 0; s < SLICES; ++s) {
    for (uint32_t u = s + 1; u < SLICES; ++u) {
      uint64_t common = 0;
      int64_t inversions = consistent_order(first[s], lengths[s], first[u], lengths[u], &common);
      shared_gangs += common;
      if (inversions != 0) {
        fprintf(stderr, "stress_runtime_submit: slices %u and %u ran shared gangs in "
                        "different orders (%lld inversions)\n", s, u, (long long)inversions);
        g_failures++;
      }
    }
  }
  pw_fixture_deinit(&f);
  if (shared_gangs == 0) {
    fprintf(stderr, "stress_runtime_submit: no gang ran on two slices\n");
    g_failures++;
  }
  if (pw_test_allocator_live(&t) != 0) {
    fprintf(stderr, "stress_runtime_submit: %zu allocations leaked\n", pw_test_allocator_live(&t));
    g_failures++;
  }
  printf("stress_runtime_submit [%s]: %d threads x %d submissions, %llu launches per "
         "device sequence checked, %llu gangs shared by two slices, failures=%d\n",
         label, g_threads, g_iterations, (unsigned long long)launches,
         (unsigned long long)shared_gangs, (int)g_failures);
  return g_failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1) g_iterations = atoi(argv[1]);
  if (argc > 2) g_threads = atoi(argv[2]);
  pw_sched_policy_t none = {NULL, NULL};
  int rc = run_config("fifo, no window", none, 0);
  rc |= run_config("fifo, window 1", pw_sched_policy_fifo(), 1);
  rc |= run_config("fifo, window 2", pw_sched_policy_fifo(), 2);
  rc |= run_config("priority, window 2", pw_sched_policy_priority(), 2);
  rc |= run_config("fair share, window 3", pw_sched_policy_fair_share(), 3);
  return rc;
}
