/* Stress: handle owners under concurrency. T threads each keep a runtime
 * of their own with a main client and a graph, publish that graph's id,
 * and loop: create a client (its tag taken while other runtimes take
 * theirs and their salts), make a graph in it, check that its own and the
 * main client's handles resolve only in their owner, that every other
 * thread's published id is PERMISSION_DENIED here, then destroy it; every
 * 25 iterations the thread replaces its whole runtime (its salt goes back
 * while the others take theirs). Fewer than 1,023 runtimes are made in
 * all (at the default counts), so no salt comes round. Plain executable
 * (TSan cannot run Criterion). Usage: stress_runtime_handles [iterations] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/fixture.h"

#define THREADS 4

static int g_iterations = 200;
static _Atomic uint64_t g_published[THREADS];
static _Atomic int g_failures;

#define CHECK(cond, ...)                                         \
  do {                                                           \
    if (!(cond)) {                                               \
      fprintf(stderr, "stress_runtime_handles: " __VA_ARGS__);   \
      fprintf(stderr, "\n");                                     \
      g_failures++;                                              \
      return false;                                              \
    }                                                            \
  } while (0)

static bool ok(pw_status_t s, const char* what) {
  if (s == NULL) return true;
  char m[512];
  pw_status_format(s, m, sizeof(m));
  fprintf(stderr, "stress_runtime_handles: %s: %s\n", what, m);
  pw_status_free(s);
  return false;
}

/* |graph| resolved through |client|: true when the outcome is |code|. */
static bool resolves_as(pw_client_t* client, uint64_t graph, pw_status_code_t code) {
  pw_graph_counts_t counts = {.struct_size = sizeof(pw_graph_counts_t)};
  pw_status_t s = pw_graph_counts(client, (pw_graph_t){graph}, &counts);
  bool same = pw_status_code(s) == code;
  if (!same) {
    char m[512];
    pw_status_format(s, m, sizeof(m));
    fprintf(stderr, "stress_runtime_handles: graph 0x%016llx: want %s, got %s\n",
            (unsigned long long)graph, pw_status_code_string(code), m);
  }
  pw_status_free(s);
  return same;
}

typedef struct world_t {
  pw_fixture_t f;
  pw_graph_t g;
} world_t;

static bool world_init(world_t* w, int index) {
  CHECK(ok(pw_fixture_init(&w->f, PW_FIXTURE_DOUBLE_INLINE, 1, "1", pw_allocator_system()),
           "fixture"),
        "thread %d: no runtime", index);
  CHECK(ok(pw_graph_create(w->f.client, &w->g), "graph"), "thread %d: no graph", index);
  atomic_store(&g_published[index], w->g.id);
  return true;
}

static void world_deinit(world_t* w, int index) {
  atomic_store(&g_published[index], 0);
  pw_fixture_deinit(&w->f);
}

static bool one_client(world_t* w, int index) {
  pw_client_t* c = NULL;
  CHECK(ok(pw_client_create(w->f.runtime, NULL, &c), "client"), "thread %d: no client", index);
  pw_graph_t g;
  bool good = ok(pw_graph_create(c, &g), "graph in client");
  good = good && resolves_as(c, g.id, PW_STATUS_OK);
  good = good && resolves_as(w->f.client, g.id, PW_STATUS_PERMISSION_DENIED);
  good = good && resolves_as(c, w->g.id, PW_STATUS_PERMISSION_DENIED);
  good = good && resolves_as(w->f.client, w->g.id, PW_STATUS_OK);
  for (int t = 0; good && t < THREADS; ++t) {
    uint64_t theirs = t == index ? 0 : atomic_load(&g_published[t]);
    if (theirs == 0) continue;
    good = resolves_as(c, theirs, PW_STATUS_PERMISSION_DENIED) &&
           resolves_as(w->f.client, theirs, PW_STATUS_PERMISSION_DENIED);
  }
  pw_client_destroy(c);
  CHECK(good, "thread %d: a handle resolved outside its owner", index);
  return true;
}

static void* worker(void* arg) {
  int index = (int)(intptr_t)arg;
  world_t w;
  if (!world_init(&w, index)) return NULL;
  for (int i = 0; i < g_iterations; ++i) {
    if (!one_client(&w, index)) break;
    if (i % 25 == 24) {
      world_deinit(&w, index);
      if (!world_init(&w, index)) return NULL;
    }
  }
  world_deinit(&w, index);
  return NULL;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1) g_iterations = atoi(argv[1]);
  pthread_t threads[THREADS];
  for (int t = 0; t < THREADS; ++t) {
    if (pthread_create(&threads[t], NULL, worker, (void*)(intptr_t)t) != 0) {
      fprintf(stderr, "stress_runtime_handles: pthread_create failed\n");
      return 1;
    }
  }
  for (int t = 0; t < THREADS; ++t) pthread_join(threads[t], NULL);
  if (g_failures != 0) {
    fprintf(stderr, "stress_runtime_handles: %d failures\n", (int)g_failures);
    return 1;
  }
  printf("stress_runtime_handles: %d threads x %d clients: every handle resolved only in its "
         "owner\n", THREADS, g_iterations);
  return 0;
}
