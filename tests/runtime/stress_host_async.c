/* Stress: asynchronous host transfers (include/pathways/buffer.h) from
 * several threads at once, with graph runs consuming the buffers they make.
 *
 * T threads (even ones with a client of their own, odd ones sharing one)
 * each run |iterations| rounds on a 2-device CPU slice. A round makes a
 * batch x of N floats (values unique to the thread and round) in one of
 * six ways: pw_buffer_from_host_async or pw_buffer_create_empty +
 * pw_buffer_fill_from_host, each with the three host semantics; an empty
 * buffer goes into pw_graph_submit before its fill, so the graph waits for
 * it. The graph computes y = x + x; pw_buffer_to_host_async reads both y
 * and x back; x's handle is released at once (the submission and the read
 * keep it), y's after its read was issued. Every third round also makes an
 * empty buffer, submits a graph on it and releases it unfilled: the graph
 * and a read of its output must fail CANCELLED.
 *
 * Up to IN_FLIGHT rounds per thread are outstanding. The host memory is
 * poisoned (NaNs) and freed as soon as its host-done event completes (for
 * the two copying semantics right after the round started, for zero copy
 * when the round lands), and the outputs read back must be exactly 2x
 * and x, every element. A runtime that read host
 * memory after its host-done event shows up as a wrong value (or, under
 * ASan, a use after free); a race in the transfer thread, the fill claim
 * or the read jobs as a TSan report; a lost completion as a hang (the
 * deadline); a leaked job or buffer through the counting allocator.
 * Plain executable (TSan cannot run Criterion).
 * Usage: stress_runtime_host_async [iterations-per-thread] [threads] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fixture.h"
#include "support/test_allocators.h"

#define MAX_THREADS 8
#define N 1024
#define IN_FLIGHT 3
#define DEADLINE_NS 60000000000LL
#define STRESS_NAME "stress_runtime_host_async"

static _Atomic int g_failures;
static _Atomic long g_checked;   /* rounds whose outputs were all right */
static _Atomic long g_cancelled; /* unfilled buffers whose dependents failed right */
static int g_iterations = 200;
static int g_threads = 4;
static pw_runtime_t* g_runtime;
static pw_client_t* g_shared;

static bool ok(pw_status_t s, const char* what, int thread) {
  if (s == NULL) return true;
  char m[512];
  pw_status_format(s, m, sizeof(m));
  fprintf(stderr, STRESS_NAME ": thread %d: %s: %s\n", thread, what, m);
  pw_status_free(s);
  g_failures++;
  return false;
}

#define TRY(expr, what)                       \
  do {                                        \
    if (!ok((expr), (what), index)) goto out; \
  } while (0)

static pw_status_t wait_release(pw_event_t* ev) {
  pw_status_t s = pw_event_wait(ev, pw_deadline_from_timeout(DEADLINE_NS));
  pw_event_release(ev);
  return s;
}

/* One round in flight. */
typedef struct round_t {
  float* host;             /* the batch's host memory, until host_done */
  float* back_x;           /* x read back */
  float* back_y;           /* y read back */
  pw_event_t* host_done;
  pw_event_t* done;        /* the graph's */
  pw_event_t* read_x;
  pw_event_t* read_y;
  float base;
  bool live;
} round_t;

/* Fills |r->host| with the round's values. */
static void round_values(round_t* r) {
  for (int e = 0; e < N; ++e) r->host[e] = r->base + (float)e;
}

/* Waits for the round's host-done event, then poisons and frees its host
 * memory: the runtime must not read it any more. */
static bool free_host(round_t* r, int index) {
  if (r->host == NULL) return true;
  bool good = ok(wait_release(r->host_done), "host_done", index);
  r->host_done = NULL;
  memset(r->host, 0xff, N * sizeof(float));
  free(r->host);
  r->host = NULL;
  return good;
}

/* The memory rules, then the values. */
static bool land(round_t* r, int index) {
  bool good = free_host(r, index);
  good &= ok(wait_release(r->done), "graph", index);
  good &= ok(wait_release(r->read_x), "read x", index);
  good &= ok(wait_release(r->read_y), "read y", index);
  for (int e = 0; good && e < N; ++e) {
    float want = r->base + (float)e;
    if (r->back_x[e] != want || r->back_y[e] != 2 * want) {
      fprintf(stderr, STRESS_NAME ": thread %d: element %d: x %g y %g, want %g and %g\n", index,
              e, (double)r->back_x[e], (double)r->back_y[e], (double)want, (double)(2 * want));
      g_failures++;
      good = false;
    }
  }
  if (good) g_checked++;
  free(r->back_x);
  free(r->back_y);
  r->back_x = r->back_y = NULL;
  r->live = false;
  return good;
}

/* An empty buffer released unfilled: its graph and the read of the
 * graph's output fail CANCELLED. */
static bool cancel_round(pw_client_t* client, pw_vslice_t vs, const pw_array_spec_t* spec,
                         pw_graph_t g, int index) {
  pw_buffer_t x, y;
  pw_event_t *done = NULL, *read = NULL;
  if (!ok(pw_buffer_create_empty(client, vs, spec, &x), "create_empty (cancel)", index)) {
    return false;
  }
  pw_status_t s = pw_graph_submit(client, g, &x, 1, NULL, &y, 1, &done);
  if (s != NULL) {
    pw_status_free(pw_buffer_release(client, x));
    return ok(s, "submit (cancel)", index);
  }
  float* back = malloc(N * sizeof(float));
  bool good = ok(pw_buffer_to_host_async(client, y, back, N * sizeof(float), &read),
                 "to_host_async (cancel)", index);
  good &= ok(pw_buffer_release(client, y), "release y (cancel)", index);
  good &= ok(pw_buffer_release(client, x), "release x (cancel)", index);
  pw_event_t* evs[2] = {done, read};
  for (int k = 0; k < 2; ++k) {
    if (evs[k] == NULL) continue;
    s = wait_release(evs[k]);
    if (pw_status_code(s) != PW_STATUS_CANCELLED) {
      fprintf(stderr, STRESS_NAME ": thread %d: an unfilled argument's %s ended with code %d, "
              "want CANCELLED\n", index, k == 0 ? "graph" : "read", (int)pw_status_code(s));
      g_failures++;
      good = false;
    }
    pw_status_free(s);
  }
  free(back);
  if (good) g_cancelled++;
  return good;
}

/* Starts round |i| into |r|. */
static bool start_round(pw_client_t* client, pw_vslice_t vs, const pw_array_spec_t* spec,
                        pw_graph_t g, int i, round_t* r, int index) {
  memset(r, 0, sizeof(*r));
  r->base = (float)(index * 1000003 + i * 4099);
  r->host = malloc(N * sizeof(float));
  r->back_x = malloc(N * sizeof(float));
  r->back_y = malloc(N * sizeof(float));
  if (r->host == NULL || r->back_x == NULL || r->back_y == NULL) {
    free(r->host);
    free(r->back_x);
    free(r->back_y);
    return ok(pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "out of memory"), "malloc", index);
  }
  round_values(r);
  r->live = true;
  static const pw_host_semantics_t kSem[3] = {PW_HOST_COPY_BEFORE_RETURN,
                                              PW_HOST_IMMUTABLE_UNTIL_TRANSFER_COMPLETES,
                                              PW_HOST_ZERO_COPY};
  pw_host_transfer_options_t o;
  pw_host_transfer_options_init(&o);
  o.semantics = kSem[i % 3];
  bool fill = (i / 3) % 2 == 1;
  pw_buffer_t x = {0}, y = {0};
  bool good = true;
  if (!fill) {
    good = ok(pw_buffer_from_host_async(client, vs, spec, r->host, N * sizeof(float), &o, &x,
                                        &r->host_done),
              "from_host_async", index);
    good = good && ok(pw_graph_submit(client, g, &x, 1, NULL, &y, 1, &r->done), "submit", index);
  } else {
    /* Submitted before the fill: the graph waits for it. */
    good = ok(pw_buffer_create_empty(client, vs, spec, &x), "create_empty", index);
    good = good && ok(pw_graph_submit(client, g, &x, 1, NULL, &y, 1, &r->done), "submit", index);
    good = good && ok(pw_buffer_fill_from_host(client, x, r->host, N * sizeof(float), &o,
                                               &r->host_done),
                      "fill_from_host", index);
  }
  if (good) {
    good = ok(pw_buffer_to_host_async(client, x, r->back_x, N * sizeof(float), &r->read_x),
              "to_host_async x", index);
  }
  if (good) {
    good = ok(pw_buffer_to_host_async(client, y, r->back_y, N * sizeof(float), &r->read_y),
              "to_host_async y", index);
  }
  if (x.id != 0) good &= ok(pw_buffer_release(client, x), "release x", index);
  if (y.id != 0) good &= ok(pw_buffer_release(client, y), "release y", index);
  if (!good) {
    /* Only what was started is waited for; the memory then goes. */
    pw_event_t* evs[4] = {r->host_done, r->done, r->read_x, r->read_y};
    for (int k = 0; k < 4; ++k) {
      if (evs[k] != NULL) pw_status_free(wait_release(evs[k]));
    }
    free(r->host);
    free(r->back_x);
    free(r->back_y);
    r->live = false;
  }
  return good;
}

static void* worker(void* arg) {
  int index = (int)(intptr_t)arg;
  pw_client_t* client = g_shared;
  bool own = index % 2 == 0;
  round_t rounds[IN_FLIGHT];
  memset(rounds, 0, sizeof(rounds));
  pw_graph_t g = {0};
  pw_vslice_t vs = {0};
  pw_executable_t add = {0};
  if (own && !ok(pw_client_create(g_runtime, NULL, &client), "client", index)) return NULL;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, (const uint32_t[]){2});
  TRY(pw_vslice_create(client, &mesh, PW_VSLICE_SHARE_OWN, &vs), "vslice");
  const char* text =
      "kernel add\ninput f32[1024] split(0,all)\ninput f32[1024] split(0,all)\n"
      "output f32[1024] split(0,all)\n";
  TRY(pw_executable_compile(client, vs, text, strlen(text), NULL, &add), "compile");
  TRY(pw_graph_create(client, &g), "graph");
  int64_t dims[1] = {N};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t p, a;
  TRY(pw_graph_add_parameter(client, g, vs, &spec, &p), "param");
  pw_value_t in[2] = {pw_value(p, 0), pw_value(p, 0)};
  TRY(pw_graph_add_compute(client, g, "x+x", add, vs, in, 2, &a), "add");
  TRY(pw_graph_add_output(client, g, pw_value(a, 0)), "output");
  for (int i = 0; i < g_iterations; ++i) {
    round_t* r = &rounds[i % IN_FLIGHT];
    if (r->live && !land(r, index)) goto out;
    if (!start_round(client, vs, &spec, g, i, r, index)) goto out;
    /* The copy semantics give the memory back as soon as it is copied: free
     * it then, while the graph and the reads may still be queued. (Zero
     * copy gives it back only once the buffer is gone: at landing.) */
    if (i % 3 != 2 && !free_host(r, index)) goto out;
    if (i % 3 == 2 && !cancel_round(client, vs, &spec, g, index)) goto out;
  }
out:
  for (int k = 0; k < IN_FLIGHT; ++k) {
    if (rounds[k].live) land(&rounds[k], index);
  }
  if (g.id) (void)ok(pw_graph_release(client, g), "graph release", index);
  if (add.id) (void)ok(pw_executable_release(client, add), "executable release", index);
  if (vs.id) (void)ok(pw_vslice_release(client, vs), "vslice release", index);
  if (own) (void)ok(pw_client_destroy(client), "client destroy", index);
  return NULL;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1) g_iterations = atoi(argv[1]);
  if (argc > 2) g_threads = atoi(argv[2]);
  if (g_iterations < 1) g_iterations = 200;
  if (g_threads < 1 || g_threads > MAX_THREADS) g_threads = 4;
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_fixture_t f;
  pw_status_t s = pw_fixture_init(&f, PW_FIXTURE_CPU, 1, "2", pw_test_allocator(&t));
  if (!ok(s, "fixture", -1)) return 1;
  g_runtime = f.runtime;
  g_shared = f.client;
  pthread_t threads[MAX_THREADS];
  for (int i = 0; i < g_threads; ++i) {
    pthread_create(&threads[i], NULL, worker, (void*)(intptr_t)i);
  }
  for (int i = 0; i < g_threads; ++i) pthread_join(threads[i], NULL);
  pw_fixture_deinit(&f);
  if (pw_test_allocator_live(&t) != 0) {
    fprintf(stderr, STRESS_NAME ": %zu allocations leaked\n", pw_test_allocator_live(&t));
    g_failures++;
  }
  long want = (long)g_threads * g_iterations;
  long want_cancelled = (long)g_threads * (g_iterations / 3);
  if (g_failures == 0 && (g_checked != want || g_cancelled != want_cancelled)) {
    fprintf(stderr, STRESS_NAME ": %ld rounds checked (want %ld), %ld cancellations (want %ld)\n",
            (long)g_checked, want, (long)g_cancelled, want_cancelled);
    g_failures++;
  }
  printf(STRESS_NAME ": %d threads x %d rounds (from_host_async / create_empty + fill, 3 "
         "semantics, to_host_async, graphs), %ld checked, %ld cancelled, failures=%d\n",
         g_threads, g_iterations, (long)g_checked, (long)g_cancelled, (int)g_failures);
  return g_failures == 0 ? 0 : 1;
}
