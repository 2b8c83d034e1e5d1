/* Stress: armed graphs (pw_graph_exec_t) under concurrency, on a threaded
 * test double (completions on its helper threads) with three 2x2 slices.
 *
 *   thread 0  armed, shared client, slice 0
 *   thread 1  armed, shared client, two armed graphs: slices 0 and 1
 *   thread 2  armed, its own client, slice 0
 *   thread 3  armed, its own client, slice 2 (no other thread there)
 *   thread 4  pw_graph_submit, shared client, slices 0 and 1
 *   thread 5  churn, shared client: arms a graph on slice 0 or 1 (every
 *             other time a new graph whose handle it releases at once),
 *             submits 1-4 runs without waiting, destroys the armed graph
 *             while they are in flight, again and again
 *   thread 6  churn, its own client, slice 1
 *
 * Thread 3 leaves its armed graph, with runs in flight, to
 * pw_client_destroy. The shared client's threads on slice 0 (0, 1, 4, 5)
 * share one graph, not finalized before they start: several armed graphs
 * of one graph, and handle submissions of it, at once.
 *
 * Every graph is x -> copy -> copy -> y on one slice, every run on a fresh
 * argument of values unique to the thread and run. The armed threads keep
 * up to 6 runs in flight (more than the two armed blocks, so runs also
 * take blocks from the client's cache), land them oldest first and now
 * and then all at once, and submit some runs with no done event at all.
 * A callback on every done event counts completions on the completing
 * thread.
 *
 * Checks: every run's output holds its argument; every done event
 * completes OK (counted by the callbacks, each exactly once); after
 * pw_graph_exec_destroy every run the armed graph submitted has completed
 * (its contract); every device launched exactly 2 gangs per run on its
 * slice, all devices of a slice in the same order; each client's
 * ops_completed per slice is 2 per run; nothing leaks (counting
 * allocator). Twice: without a scheduler window and with FIFO window 2.
 * Plain executable (TSan cannot run Criterion).
 * Usage: stress_graph_exec [iterations-per-thread] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fixture.h"
#include "support/test_allocators.h"

#define SLICES 3
#define DEVICES_PER_SLICE 4
#define THREADS 7
#define N 8
#define IN_FLIGHT 6
#define MAX_ORDER 65536
#define DEADLINE_NS 60000000000LL
#define STRESS_NAME "stress_graph_exec"
#include "stress_flights.h"

static const char* kCopy = "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n";

static int g_iterations = 300;
static pw_runtime_t* g_runtime;
static pw_client_t* g_shared;
static pw_vslice_t g_shared_vs[SLICES];
/* The shared client's graph on slice 0, made (not finalized) in main:
 * threads 0 and 1 arm it, thread 4 submits it by handle, thread 5 arms it
 * every other time. */
static pw_graph_t g_shared_graph;
static _Atomic long g_runs[SLICES];        /* runs on each slice, all clients */
static _Atomic long g_shared_runs[SLICES]; /* runs of the shared client */
static _Atomic long g_events;              /* done events asked for */
static _Atomic long g_callbacks_ok, g_callbacks_failed;
static _Atomic long g_destroys;            /* armed graphs destroyed with runs in flight */

static void count_completion(void* user, pw_status_t status) {
  (void)user;
  if (status == NULL) {
    g_callbacks_ok++;
  } else {
    g_callbacks_failed++;
    pw_status_free(status);
  }
}

/* What one thread uses on one slice: a client, a vslice pinned to the
 * slice, the graph, its armed form (NULL for the handle thread). */
typedef struct lane_t {
  pw_client_t* client;
  uint32_t slice;
  pw_vslice_t vs;
  pw_executable_t copy;
  pw_graph_t g;
  pw_graph_exec_t* exec;
  pw_array_spec_t spec;
  long runs;
} lane_t;

/* x -> copy "a" -> copy "b" -> output, on |lane->vs|. */
static pw_status_t lane_graph(lane_t* lane, pw_graph_t* out) {
  pw_client_t* c = lane->client;
  PW_RETURN_IF_ERROR(pw_graph_create(c, out));
  uint32_t p, a, b;
  PW_RETURN_IF_ERROR(pw_graph_add_parameter(c, *out, lane->vs, &lane->spec, &p));
  pw_value_t in = pw_value(p, 0);
  PW_RETURN_IF_ERROR(pw_graph_add_compute(c, *out, "a", lane->copy, lane->vs, &in, 1, &a));
  in = pw_value(a, 0);
  PW_RETURN_IF_ERROR(pw_graph_add_compute(c, *out, "b", lane->copy, lane->vs, &in, 1, &b));
  return pw_graph_add_output(c, *out, pw_value(b, 0));
}

/* Pins a vslice of |client| to |slice| (the shared client's are made once,
 * in main). */
static pw_status_t pinned_vslice(pw_client_t* client, uint32_t slice, pw_vslice_t* out) {
  pw_vslice_span_t span;
  memset(&span, 0, sizeof(span));
  span.struct_size = sizeof(span);
  span.mesh = pw_mesh_shape_make(2, (const uint32_t[]){2, 2});
  span.slice_count = 1;
  span.slices = &slice;
  return pw_vslice_create_spanning(client, &span, out);
}

static pw_status_t lane_init(lane_t* lane, pw_client_t* client, uint32_t slice, bool armed) {
  memset(lane, 0, sizeof(*lane));
  lane->client = client;
  lane->slice = slice;
  int64_t dims[1] = {N};
  lane->spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  if (client == g_shared) {
    lane->vs = g_shared_vs[slice];
  } else {
    PW_RETURN_IF_ERROR(pinned_vslice(client, slice, &lane->vs));
  }
  PW_RETURN_IF_ERROR(
      pw_executable_compile(client, lane->vs, kCopy, strlen(kCopy), NULL, &lane->copy));
  if (client == g_shared && slice == 0 && g_shared_graph.id != 0) {
    lane->g = g_shared_graph;
  } else {
    PW_RETURN_IF_ERROR(lane_graph(lane, &lane->g));
  }
  if (armed) PW_RETURN_IF_ERROR(pw_graph_exec_create(client, lane->g, &lane->exec));
  return NULL;
}

/* Counts a run of |lane| (submitted OK). */
static void lane_count(lane_t* lane) {
  lane->runs++;
  g_runs[lane->slice]++;
  if (lane->client == g_shared) g_shared_runs[lane->slice]++;
}

/* Submits a run of |lane| on a fresh argument (armed unless |handle|),
 * into |f|; |keep|: ask for the done event and keep the buffers. */
static bool submit(lane_t* lane, flight_t* f, int index, int i, bool keep, bool handle) {
  float x[N];
  for (int e = 0; e < N; ++e) {
    x[e] = (float)(index * 200000 + (i % 20000) * N + e + 1);
    f->want[e] = x[e];
  }
  if (!ok(pw_buffer_from_host(lane->client, lane->vs, &lane->spec, x, sizeof(x), &f->x),
          "from_host", index)) {
    return false;
  }
  pw_event_t** done = keep ? &f->done : NULL;
  pw_status_t s = handle
                      ? pw_graph_submit(lane->client, lane->g, &f->x, 1, NULL, &f->y, 1, done)
                      : pw_graph_exec_submit(lane->exec, &f->x, 1, NULL, &f->y, 1, done);
  if (!ok(s, handle ? "pw_graph_submit" : "pw_graph_exec_submit", index)) {
    pw_status_free(pw_buffer_release(lane->client, f->x));
    f->x.id = 0;
    return false;
  }
  lane_count(lane);
  if (keep) {
    g_events++;
    if (!ok(pw_event_on_ready(f->done, count_completion, NULL), "on_ready", index)) return false;
    return true;
  }
  bool good = ok(pw_buffer_release(lane->client, f->x), "release x", index);
  good &= ok(pw_buffer_release(lane->client, f->y), "release y", index);
  f->x.id = f->y.id = 0;
  return good;
}

/* The client's ops_completed on |lane|'s slice went up by 2 per run. */
static void check_ops(lane_t* lane, uint64_t before, long runs, int index) {
  pw_client_slice_stats_t st = {.struct_size = sizeof(pw_client_slice_stats_t)};
  if (!ok(pw_client_slice_stats(lane->client, lane->slice, &st), "stats", index)) return;
  if (st.ops_completed - before != (uint64_t)(2 * runs)) {
    fprintf(stderr, "stress_graph_exec: thread %d: slice %u counted %llu ops, want %ld\n",
            index, lane->slice, (unsigned long long)(st.ops_completed - before), 2 * runs);
    g_failures++;
  }
}

/* Threads 0-4: |lanes| lanes (armed, or the handle thread's), runs
 * alternating between them, up to IN_FLIGHT each in flight. */
static void run_lanes(lane_t* lanes, int count, int index, bool handle) {
  flight_t flights[2][IN_FLIGHT];
  memset(flights, 0, sizeof(flights));
  int next[2] = {0, 0};
  for (int i = 0; i < g_iterations; ++i) {
    int l = i % count;
    flight_t* f = &flights[l][next[l]];
    next[l] = (next[l] + 1) % IN_FLIGHT;
    if (f->done != NULL && !land(lanes[l].client, f, index)) return;
    /* Every fifth run without an event; every 13th iteration, land all. */
    if (!submit(&lanes[l], f, index, i, i % 5 != 3, handle)) return;
    if (i % 13 == 12) {
      for (int k = 0; k < IN_FLIGHT; ++k) {
        if (flights[l][k].done != NULL && !land(lanes[l].client, &flights[l][k], index)) return;
      }
    }
  }
  for (int l = 0; l < count; ++l) {
    for (int k = 0; k < IN_FLIGHT; ++k) {
      if (flights[l][k].done != NULL) land(lanes[l].client, &flights[l][k], index);
    }
  }
}

/* Threads 5 and 6: arm, submit 1-4 runs, destroy while they are in
 * flight; destroy must have waited for every one of them. */
static void churn(pw_client_t* client, const uint32_t* slices, int slice_count, int index) {
  lane_t lanes[2];
  memset(lanes, 0, sizeof(lanes));
  uint64_t before[2] = {0, 0};
  int unwaited = 0;
  for (int l = 0; l < slice_count; ++l) {
    pw_client_slice_stats_t st = {.struct_size = sizeof(pw_client_slice_stats_t)};
    TRY(lane_init(&lanes[l], client, slices[l], false), "lane");
    TRY(pw_client_slice_stats(client, slices[l], &st), "stats");
    before[l] = st.ops_completed;
  }
  for (int i = 0; i < g_iterations / 2; ++i) {
    lane_t* lane = &lanes[i % slice_count];
    pw_graph_t fresh = {0};
    if (i % 2 == 1) {
      TRY(lane_graph(lane, &fresh), "graph");
      TRY(pw_graph_exec_create(client, fresh, &lane->exec), "arm fresh");
      TRY(pw_graph_release(client, fresh), "release graph");
    } else {
      TRY(pw_graph_exec_create(client, lane->g, &lane->exec), "arm");
    }
    flight_t flights[4];
    memset(flights, 0, sizeof(flights));
    int runs = 1 + i % 4;
    int submitted = 0;
    for (int r = 0; r < runs; ++r) {
      if (!submit(lane, &flights[r], index, i * 4 + r, true, false)) break;
      submitted++;
    }
    bool in_flight = submitted > 0 && !pw_event_is_ready(flights[submitted - 1].done);
    pw_graph_exec_destroy(lane->exec);
    lane->exec = NULL;
    if (in_flight) g_destroys++;
    for (int r = 0; r < submitted; ++r) {
      if (!pw_event_is_ready(flights[r].done)) {
        if (unwaited++ < 3) {
          fprintf(stderr, "stress_graph_exec: thread %d: run %d of %d still in flight after "
                          "pw_graph_exec_destroy returned\n", index, r + 1, submitted);
        }
        g_failures++;
      }
    }
    for (int r = 0; r < submitted; ++r) land(client, &flights[r], index);
    if (submitted < runs) goto out;
  }
out:
  if (unwaited > 0) {
    fprintf(stderr, "stress_graph_exec: thread %d: %d runs in flight after "
                    "pw_graph_exec_destroy returned\n", index, unwaited);
  }
  if (client != g_shared) {
    if (ok(pw_client_wait_idle(client, pw_deadline_from_timeout(DEADLINE_NS)), "idle", index)) {
      for (int l = 0; l < slice_count; ++l) check_ops(&lanes[l], before[l], lanes[l].runs, index);
    }
  }
}

static void* worker(void* arg) {
  int index = (int)(intptr_t)arg;
  pw_client_t* client = g_shared;
  bool own = index == 2 || index == 3 || index == 6;
  if (own && !ok(pw_client_create(g_runtime, NULL, &client), "client", index)) return NULL;
  if (index == 5) {
    churn(client, (const uint32_t[]){0, 1}, 2, index);
  } else if (index == 6) {
    churn(client, (const uint32_t[]){1}, 1, index);
  } else {
    static const uint32_t slices[5][2] = {{0}, {0, 1}, {0}, {2}, {0, 1}};
    int count = index == 1 || index == 4 ? 2 : 1;
    bool handle = index == 4;
    lane_t lanes[2];
    memset(lanes, 0, sizeof(lanes));
    uint64_t before[2] = {0, 0};
    for (int l = 0; l < count; ++l) {
      pw_client_slice_stats_t st = {.struct_size = sizeof(pw_client_slice_stats_t)};
      TRY(lane_init(&lanes[l], client, slices[index][l], !handle), "lane");
      TRY(pw_client_slice_stats(client, slices[index][l], &st), "stats");
      before[l] = st.ops_completed;
    }
    run_lanes(lanes, count, index, handle);
    /* Destroy waits for the runs submitted without an event (thread 3
     * leaves its armed graph to pw_client_destroy, below). */
    if (index != 3) {
      for (int l = 0; l < count; ++l) {
        pw_graph_exec_destroy(lanes[l].exec);
        lanes[l].exec = NULL;
      }
    }
    if (own && ok(pw_client_wait_idle(client, pw_deadline_from_timeout(DEADLINE_NS)), "idle",
                  index)) {
      for (int l = 0; l < count; ++l) check_ops(&lanes[l], before[l], lanes[l].runs, index);
    }
    if (index == 3) {
      /* Runs in flight, no events kept, the armed graph alive: the
       * client's destroy waits for them and destroys it. */
      for (int i = 0; i < 4; ++i) {
        flight_t f;
        memset(&f, 0, sizeof(f));
        if (!submit(&lanes[0], &f, index, g_iterations + i, false, false)) break;
      }
    }
  }
out:
  if (own) pw_client_destroy(client);
  return NULL;
}

static int run_config(const char* label, pw_sched_policy_t policy, uint32_t window) {
  g_failures = 0;
  g_events = g_callbacks_ok = g_callbacks_failed = g_checked = g_destroys = 0;
  for (int s = 0; s < SLICES; ++s) g_runs[s] = g_shared_runs[s] = 0;
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_fixture_t f;
  int index = -1;
  if (!ok(pw_fixture_init_sched(&f, PW_FIXTURE_DOUBLE_THREADED, SLICES, "2x2",
                                pw_test_allocator(&t), policy, window),
          "fixture", index)) {
    return 1;
  }
  g_runtime = f.runtime;
  g_shared = f.client;
  uint64_t shared_before[SLICES];
  for (uint32_t s = 0; s < SLICES; ++s) {
    pw_client_slice_stats_t st = {.struct_size = sizeof(pw_client_slice_stats_t)};
    if (!ok(pinned_vslice(g_shared, s, &g_shared_vs[s]), "shared vslice", index) ||
        !ok(pw_client_slice_stats(g_shared, s, &st), "stats", index)) {
      pw_fixture_deinit(&f);
      return 1;
    }
    shared_before[s] = st.ops_completed;
  }
  {
    lane_t lane;
    memset(&lane, 0, sizeof(lane));
    g_shared_graph.id = 0;
    if (!ok(lane_init(&lane, g_shared, 0, false), "shared graph", index)) {
      pw_fixture_deinit(&f);
      return 1;
    }
    g_shared_graph = lane.g;
  }
  pthread_t threads[THREADS];
  for (int i = 0; i < THREADS; ++i) {
    pthread_create(&threads[i], NULL, worker, (void*)(intptr_t)i);
  }
  for (int i = 0; i < THREADS; ++i) pthread_join(threads[i], NULL);
  (void)ok(pw_graph_release(g_shared, g_shared_graph), "release shared graph", index);
  g_shared_graph.id = 0;
  /* The shared client's counts, once its runs (some without an event)
   * are all done. */
  if (ok(pw_client_wait_idle(g_shared, pw_deadline_from_timeout(DEADLINE_NS)), "idle", index)) {
    for (uint32_t s = 0; s < SLICES; ++s) {
      pw_client_slice_stats_t st = {.struct_size = sizeof(pw_client_slice_stats_t)};
      if (!ok(pw_client_slice_stats(g_shared, s, &st), "stats", index)) continue;
      if (st.ops_completed - shared_before[s] != (uint64_t)(2 * g_shared_runs[s])) {
        fprintf(stderr, "stress_graph_exec: shared client, slice %u: %llu ops, want %ld\n", s,
                (unsigned long long)(st.ops_completed - shared_before[s]),
                2 * (long)g_shared_runs[s]);
        g_failures++;
      }
    }
  }
  /* Launches: 2 gangs per run on every device of the run's slice, the
   * same order on all of them. */
  static uint64_t first[MAX_ORDER], other[MAX_ORDER];
  for (uint32_t s = 0; s < SLICES; ++s) {
    uint64_t want = 2 * (uint64_t)g_runs[s];
    size_t n0 = 0;
    for (uint32_t d = 0; d < DEVICES_PER_SLICE; ++d) {
      uint32_t device = s * DEVICES_PER_SLICE + d;
      uint64_t got = pw_double_backend_launch_count(f.dbl, device);
      if (got != want) {
        fprintf(stderr, "stress_graph_exec: device %u launched %llu gangs, want %llu\n", device,
                (unsigned long long)got, (unsigned long long)want);
        g_failures++;
      }
      size_t n = pw_double_backend_launch_order(f.dbl, device, d == 0 ? first : other,
                                                MAX_ORDER);
      if (n > MAX_ORDER) n = MAX_ORDER;
      if (d == 0) {
        n0 = n;
      } else if (n != n0 || memcmp(first, other, n * sizeof(uint64_t)) != 0) {
        fprintf(stderr, "stress_graph_exec: slice %u device %u launch order differs\n", s, d);
        g_failures++;
      }
    }
  }
  if (g_callbacks_ok != g_events || g_callbacks_failed != 0) {
    fprintf(stderr, "stress_graph_exec: %ld done events, %ld callbacks OK, %ld failed\n",
            (long)g_events, (long)g_callbacks_ok, (long)g_callbacks_failed);
    g_failures++;
  }
  if (g_destroys == 0) {
    fprintf(stderr, "stress_graph_exec: no armed graph was destroyed with runs in flight\n");
    g_failures++;
  }
  pw_fixture_deinit(&f);
  if (pw_test_allocator_live(&t) != 0) {
    fprintf(stderr, "stress_graph_exec: %zu allocations leaked\n", pw_test_allocator_live(&t));
    g_failures++;
  }
  printf("stress_graph_exec [%s]: %d threads, runs per slice %ld/%ld/%ld, %ld events, %ld "
         "outputs checked, %ld destroys with runs in flight, failures=%d\n",
         label, THREADS, (long)g_runs[0], (long)g_runs[1], (long)g_runs[2], (long)g_events,
         (long)g_checked, (long)g_destroys, (int)g_failures);
  return g_failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1) g_iterations = atoi(argv[1]);
  if (g_iterations < 8) g_iterations = 8;
  pw_sched_policy_t none = {NULL, NULL};
  int rc = run_config("no window", none, 0);
  rc |= run_config("fifo, window 2", pw_sched_policy_fifo(), 2);
  return rc;
}
