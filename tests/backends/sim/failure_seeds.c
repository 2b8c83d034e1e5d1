/* Deterministic simulation of failures, one seed at a time.
 *
 * Each seed builds a sim fleet (2-4 slices of 2 or 4 chips, INLINE or
 * THREADED delivery, an optional scheduler window) with seeded random chip
 * and slice failures at random virtual times, two clients with random
 * graphs (chains, fans, collectives, transfers between two slices and
 * back) submitted several times each, and checks on every seed:
 *   - every run resolves, none past its deadline (no hang);
 *   - every failure is typed: UNAVAILABLE, ABORTED or DATA_LOSS (a
 *     submission or upload refused on a lost slice, likewise);
 *   - exactly once: the runtime reports no second completion (its log);
 *   - gang order on every slice: any two chips of a slice ran the gangs
 *     they both ran in the same order (the sim's trace);
 *   - slices the sim failed are lost, slices it did not are online;
 *   - no leak (a counting allocator under the runtime and the backend).
 * A failing seed prints its number; `sim_failure_seeds SEED 1` replays it
 * alone. Usage: sim_failure_seeds [first-seed] [count] (scripts/sim-seeds
 * runs many more). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pathways/backends/sim.h"
#include "pathways/pathways.h"
#include "support/test_allocators.h"

enum { kMaxSlices = 4, kMaxDevices = 16, kMaxRuns = 4, kMaxNodes = 24, kLen = 16 };

static uint64_t g_seed;
static uint64_t g_totals[3]; /* runs ok, failed, refused */
static int g_failed;

#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "sim_failure_seeds: seed %llu: ",               \
              (unsigned long long)g_seed);                            \
      fprintf(stderr, __VA_ARGS__);                                   \
      fprintf(stderr, "\n");                                          \
      g_failed = 1;                                                   \
      return;                                                         \
    }                                                                 \
  } while (0)

/* splitmix64: the seed's own stream of choices. */
static uint64_t g_rng;
static uint32_t pick(uint32_t n) {
  uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (uint32_t)((z ^ (z >> 31)) % n);
}

/* What the sim ran, per chip, in completion order. */
typedef struct trace_s {
  pthread_mutex_t lock;
  uint64_t* gangs[kMaxDevices];
  size_t count[kMaxDevices], capacity[kMaxDevices];
} trace_t;

static void on_sim_event(void* user, const pw_sim_event_t* e) {
  trace_t* t = user;
  if (e->gang_id == 0 || e->device >= kMaxDevices) return; /* transfers */
  pthread_mutex_lock(&t->lock);
  size_t* n = &t->count[e->device];
  if (*n == t->capacity[e->device]) {
    size_t cap = t->capacity[e->device] ? 2 * t->capacity[e->device] : 64;
    uint64_t* grown = realloc(t->gangs[e->device], cap * sizeof(uint64_t));
    if (grown == NULL) abort();
    t->gangs[e->device] = grown;
    t->capacity[e->device] = cap;
  }
  t->gangs[e->device][(*n)++] = e->gang_id;
  pthread_mutex_unlock(&t->lock);
}

/* Second completions and other dispatcher errors, from the runtime's log. */
typedef struct log_s {
  pthread_mutex_t lock;
  uint32_t twice;
  char first[256];
} log_t;

static void on_log(pw_log_level_t level, const char* subsystem, const char* message, void* user) {
  (void)subsystem;
  log_t* l = user;
  if (level < PW_LOG_ERROR) return;
  if (strstr(message, "twice") == NULL && strstr(message, "after the first") == NULL) return;
  pthread_mutex_lock(&l->lock);
  if (l->twice++ == 0) snprintf(l->first, sizeof(l->first), "%s", message);
  pthread_mutex_unlock(&l->lock);
}

static int cmp_pair(const void* a, const void* b) {
  const uint64_t* x = a;
  const uint64_t* y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Whether chips |a| and |b| ran their common gangs in the same order. */
static bool same_order(const trace_t* t, uint32_t a, uint32_t b) {
  size_t na = t->count[a];
  uint64_t* index = malloc((na ? na : 1) * 2 * sizeof(uint64_t));
  if (index == NULL) abort();
  for (size_t i = 0; i < na; ++i) {
    index[2 * i] = t->gangs[a][i];
    index[2 * i + 1] = i;
  }
  qsort(index, na, 2 * sizeof(uint64_t), cmp_pair);
  bool ok = true;
  uint64_t last = 0;
  bool any = false;
  for (size_t j = 0; j < t->count[b] && ok; ++j) {
    uint64_t key[2] = {t->gangs[b][j], 0};
    uint64_t* hit = bsearch(key, index, na, 2 * sizeof(uint64_t), cmp_pair);
    if (hit == NULL) continue;
    if (any && hit[1] <= last) ok = false;
    last = hit[1];
    any = true;
  }
  free(index);
  return ok;
}

static bool typed(pw_status_t s) {
  pw_status_code_t c = pw_status_code(s);
  return c == PW_STATUS_UNAVAILABLE || c == PW_STATUS_ABORTED || c == PW_STATUS_DATA_LOSS;
}

typedef struct job_s {
  pw_client_t* client;
  pw_vslice_t a, b;
  pw_graph_t graph;
  pw_executable_t exes[4]; /* compute a, collective a, compute b, collective b */
} job_t;

static const pw_array_spec_t kSpec = {PW_DTYPE_F32, {1, {kLen}},
                                      PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};

/* A random graph over vslices a (its parameter and output) and b. */
static pw_status_t job_build(job_t* j, uint32_t per) {
  static const char* kinds[2] = {"compute", "collective"};
  for (int k = 0; k < 4; ++k) {
    char text[256];
    snprintf(text, sizeof(text),
             "op %s%d\nkind %s\ntime %uus\ninput f32[%d] split(0,all)\noutput f32[%d] split(0,all)\n",
             kinds[k % 2], k, kinds[k % 2], 5 + pick(20), kLen, kLen);
    PW_RETURN_IF_ERROR(pw_executable_compile(j->client, k < 2 ? j->a : j->b, text, strlen(text),
                                             NULL, &j->exes[k]));
  }
  (void)per;
  PW_RETURN_IF_ERROR(pw_graph_create(j->client, &j->graph));
  uint32_t on_a[kMaxNodes], on_b[kMaxNodes], na = 0, nb = 0, node;
  PW_RETURN_IF_ERROR(pw_graph_add_parameter(j->client, j->graph, j->a, &kSpec, &on_a[na++]));
  uint32_t nodes = 3 + pick(kMaxNodes - 4);
  for (uint32_t i = 0; i < nodes; ++i) {
    uint32_t what = pick(nb > 0 ? 6 : 4);
    if (what <= 1 || (what >= 4 && nb == 0)) { /* compute / collective on a: chain or fan */
      pw_value_t in = pw_value(on_a[pick(na)], 0);
      PW_RETURN_IF_ERROR(pw_graph_add_compute(j->client, j->graph, "a", j->exes[what & 1], j->a,
                                              &in, 1, &node));
      on_a[na++] = node;
    } else if (what <= 3) { /* a -> b */
      PW_RETURN_IF_ERROR(pw_graph_add_transfer(j->client, j->graph, "to_b",
                                               pw_value(on_a[pick(na)], 0), j->b,
                                               pw_sharding_split(0, PW_MESH_AXIS_ALL), &node));
      on_b[nb++] = node;
    } else if (what == 4) { /* on b */
      pw_value_t in = pw_value(on_b[pick(nb)], 0);
      PW_RETURN_IF_ERROR(pw_graph_add_compute(j->client, j->graph, "b", j->exes[2 + pick(2)], j->b,
                                              &in, 1, &node));
      on_b[nb++] = node;
    } else { /* b -> a */
      PW_RETURN_IF_ERROR(pw_graph_add_transfer(j->client, j->graph, "to_a",
                                               pw_value(on_b[pick(nb)], 0), j->a,
                                               pw_sharding_split(0, PW_MESH_AXIS_ALL), &node));
      on_a[na++] = node;
    }
    if (na == kMaxNodes || nb == kMaxNodes) break;
  }
  return pw_graph_add_output(j->client, j->graph, pw_value(on_a[na - 1], 0));
}

static void job_release(job_t* j) {
  if (j->graph.id) pw_status_free(pw_graph_release(j->client, j->graph));
  for (int k = 0; k < 4; ++k) {
    if (j->exes[k].id) pw_status_free(pw_executable_release(j->client, j->exes[k]));
  }
}

static pw_vslice_t pinned(pw_client_t* c, uint32_t slice, uint32_t per) {
  pw_vslice_span_t span;
  memset(&span, 0, sizeof(span));
  span.struct_size = sizeof(span);
  span.mesh = pw_mesh_shape_make(1, (const uint32_t[]){per});
  span.slice_count = 1;
  span.slices = &slice;
  pw_vslice_t vs = {0};
  pw_status_t s = pw_vslice_create_spanning(c, &span, &vs);
  pw_status_free(s);
  return vs;
}

static void run_seed(uint64_t seed) {
  g_seed = seed;
  g_rng = seed * 0x2545F4914F6CDD1Dull + 1;
  uint32_t slices = 2 + pick(3), per = pick(2) ? 4 : 2;
  pw_sim_mode_t mode = pick(2) ? PW_SIM_MODE_THREADED : PW_SIM_MODE_INLINE;
  uint32_t window = pick(3) == 0 ? 1 + pick(3) : 0;
  pw_test_allocator_t counting;
  pw_test_allocator_init(&counting);
  trace_t trace;
  memset(&trace, 0, sizeof(trace));
  pthread_mutex_init(&trace.lock, NULL);
  log_t log;
  memset(&log, 0, sizeof(log));
  pthread_mutex_init(&log.lock, NULL);

  pw_sim_backend_options_t so;
  pw_sim_backend_options_init(&so);
  so.allocator = pw_test_allocator(&counting);
  so.slice_count = slices;
  so.devices_per_slice = per;
  so.mode = mode;
  so.seed = seed;
  so.random_chip_failures = pick(3);
  so.random_slice_failures = pick(2);
  so.failure_window_ns = 50000 + pick(2000000);
  so.trace = on_sim_event;
  so.trace_user = &trace;
  pw_backend_t backend;
  pw_status_t st = pw_sim_backend_create(&so, &backend);
  if (st != NULL) {
    fprintf(stderr, "sim_failure_seeds: seed %llu: sim: %s\n", (unsigned long long)seed,
            pw_status_message(st));
    pw_status_free(st);
    g_failed = 1;
    return;
  }
  pw_slice_desc_t descs[kMaxSlices];
  for (uint32_t s = 0; s < slices; ++s) {
    descs[s] = (pw_slice_desc_t){NULL, PW_MESH_SHAPE_INIT(1, per), 0, s * per, s};
  }
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.allocator = pw_test_allocator(&counting);
  ro.logger = (pw_logger_t){on_log, &log, PW_LOG_ERROR};
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = descs;
  ro.slice_count = slices;
  ro.sched_window = window;
  pw_runtime_t* rt = NULL;
  st = pw_runtime_create(&ro, &rt);
  job_t jobs[2];
  memset(jobs, 0, sizeof(jobs));
  for (int c = 0; st == NULL && c < 2; ++c) {
    st = pw_client_create(rt, NULL, &jobs[c].client);
    if (st != NULL) break;
    jobs[c].a = pinned(jobs[c].client, (uint32_t)c % slices, per);
    jobs[c].b = pinned(jobs[c].client, (uint32_t)(c + 1) % slices, per);
    if (jobs[c].a.id == 0 || jobs[c].b.id == 0) {
      st = pw_status_make(PW_STATUS_INTERNAL, "vslice of client %d", c);
      break;
    }
    st = job_build(&jobs[c], per);
  }
  if (st != NULL) {
    fprintf(stderr, "sim_failure_seeds: seed %llu: setup: %s\n", (unsigned long long)seed,
            pw_status_message(st));
    pw_status_free(st);
    g_failed = 1;
    return;
  }
  /* Submit everything up front, interleaving the clients. */
  pw_event_t* done[2][kMaxRuns];
  pw_buffer_t outs[2][kMaxRuns], args[2][kMaxRuns];
  uint32_t runs = 1 + pick(kMaxRuns), refused = 0;
  memset(done, 0, sizeof(done));
  memset(outs, 0, sizeof(outs));
  memset(args, 0, sizeof(args));
  float v[kLen] = {0};
  for (uint32_t r = 0; r < runs; ++r) {
    for (int c = 0; c < 2; ++c) {
      job_t* j = &jobs[c];
      st = pw_buffer_from_host(j->client, j->a, &kSpec, v, sizeof(v), &args[c][r]);
      if (st == NULL) st = pw_graph_submit(j->client, j->graph, &args[c][r], 1, NULL, &outs[c][r], 1,
                                           &done[c][r]);
      if (st != NULL) {
        CHECK(typed(st), "submit: untyped failure %s: %s",
              pw_status_code_string(pw_status_code(st)), pw_status_message(st));
        pw_status_free(st);
        refused++;
      }
    }
  }
  if (mode == PW_SIM_MODE_THREADED) (void)0; /* delivered by the sim's thread */
  uint32_t ok = 0, failed = 0;
  for (uint32_t r = 0; r < runs; ++r) {
    for (int c = 0; c < 2; ++c) {
      if (done[c][r] == NULL) continue;
      pw_status_t s = pw_event_wait(done[c][r], pw_clock_now() + 20000000000ll);
      CHECK(pw_status_code(s) != PW_STATUS_DEADLINE_EXCEEDED || strstr(pw_status_message(s), "deadline") != NULL,
            "run %u of client %d hung", r, c);
      CHECK(s == NULL || typed(s), "run %u of client %d: untyped failure %s: %s", r, c,
            pw_status_code_string(pw_status_code(s)), pw_status_message(s));
      if (s == NULL) ok++; else failed++;
      pw_status_free(s);
      pw_event_release(done[c][r]);
      pw_status_free(pw_buffer_release(jobs[c].client, outs[c][r]));
    }
  }
  for (int c = 0; c < 2; ++c) {
    for (uint32_t r = 0; r < runs; ++r) {
      if (args[c][r].id) pw_status_free(pw_buffer_release(jobs[c].client, args[c][r]));
    }
    st = pw_client_wait_idle(jobs[c].client, pw_clock_now() + 20000000000ll);
    CHECK(st == NULL, "client %d not idle: %s", c, pw_status_message(st));
  }
  if (mode == PW_SIM_MODE_THREADED) {
    CHECK(pw_sim_backend_wait_idle(backend, 20000000000ull), "the sim did not drain");
  }
  /* Gang order on every slice, and the losses match the sim's failures. */
  for (uint32_t s = 0; s < slices; ++s) {
    for (uint32_t m = 1; m < per; ++m) {
      CHECK(same_order(&trace, s * per, s * per + m), "slice %u: chips %u and %u ran gangs in "
            "different orders", s, s * per, s * per + m);
    }
    pw_slice_info_t info = {.struct_size = sizeof(pw_slice_info_t)};
    st = pw_runtime_slice_info(rt, s, &info);
    CHECK(st == NULL, "slice info");
    CHECK(info.health != PW_DEVICE_HEALTHY || info.state == PW_SLICE_ONLINE,
          "slice %u is lost but its chips are healthy", s);
  }
  CHECK(log.twice == 0, "%u second completions: %s", log.twice, log.first);
  for (int c = 0; c < 2; ++c) {
    job_release(&jobs[c]);
    st = pw_client_destroy(jobs[c].client);
    CHECK(st == NULL, "client destroy: %s", pw_status_message(st));
  }
  st = pw_runtime_destroy(rt);
  CHECK(st == NULL, "runtime destroy: %s", pw_status_message(st));
  CHECK(pw_test_allocator_live(&counting) == 0, "%zu blocks leaked",
        pw_test_allocator_live(&counting));
  pthread_mutex_destroy(&trace.lock);
  pthread_mutex_destroy(&log.lock);
  g_totals[0] += ok;
  g_totals[1] += failed;
  g_totals[2] += refused;
  if (getenv("PW_SIM_SEEDS_VERBOSE") != NULL) {
    size_t events = 0;
    for (int d = 0; d < kMaxDevices; ++d) events += trace.count[d];
    printf("seed %llu: %u slices x %u, %s, window %u, %u chip + %u slice failures: runs ok %u, "
           "failed %u, refused %u; %zu launches\n", (unsigned long long)seed, slices, per,
           mode == PW_SIM_MODE_THREADED ? "threaded" : "inline", window, so.random_chip_failures,
           so.random_slice_failures, ok, failed, refused, events);
  }
  for (int d = 0; d < kMaxDevices; ++d) free(trace.gangs[d]);
}

int main(int argc, char** argv) {
  uint64_t first = argc > 1 ? strtoull(argv[1], NULL, 10) : 0;
  uint64_t count = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000;
  uint64_t bad = 0;
  for (uint64_t s = first; s < first + count; ++s) {
    g_failed = 0;
    run_seed(s);
    if (g_failed) {
      fprintf(stderr, "sim_failure_seeds: seed %llu FAILED (replay: sim_failure_seeds %llu 1)\n",
              (unsigned long long)s, (unsigned long long)s);
      if (++bad >= 5) break;
    }
  }
  printf("sim_failure_seeds: seeds %llu..%llu: %llu failed; runs ok %llu, failed typed %llu, "
         "refused at submit %llu\n",
         (unsigned long long)first, (unsigned long long)(first + count - 1),
         (unsigned long long)bad, (unsigned long long)g_totals[0],
         (unsigned long long)g_totals[1], (unsigned long long)g_totals[2]);
  return bad != 0;
}
