/* Stress: traces started and stopped while threads submit and backend
 * threads complete (lib/observe/trace.c's handshake between recording
 * threads and stop).
 *
 * One runtime on |kind| (threaded double, or queue-ordered lanes), two
 * 2x4 slices, T submitting threads each running a chain of 6 copies on
 * its slice again and again (two runs in flight). A controller thread
 * starts a trace (a small ring, so rings wrap), lets it record a little,
 * stops it, and checks that a stopped trace does not grow: its counts
 * read twice, with work going on between, are equal. Every run must
 * complete OK. Run under TSan (plain executable: TSan cannot run
 * Criterion) and ASan. Usage: stress_trace [rounds] [threads] */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/fixture.h"
#include "support/test_allocators.h"

#define CHAIN 6
#define MAX_THREADS 8

static const char* kCopy8 = "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n";

typedef struct shared_t {
  pw_fixture_t f;
  pw_vslice_t vs[2];
  pw_executable_t copy;
  pw_graph_t chain[2];
  atomic_int stop;
  atomic_int failures;
  atomic_long runs;
} shared_t;

static bool ok(shared_t* s, pw_status_t status, const char* what) {
  if (status == NULL) return true;
  char m[512];
  pw_status_format(status, m, sizeof(m));
  fprintf(stderr, "stress_trace: %s: %s\n", what, m);
  pw_status_free(status);
  atomic_fetch_add(&s->failures, 1);
  return false;
}

static void nap_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

typedef struct worker_t {
  shared_t* s;
  int index;
} worker_t;

static void* submitter(void* arg) {
  worker_t* w = arg;
  shared_t* s = w->s;
  int side = w->index % 2;
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t dims[1] = {8};
  pw_buffer_t x;
  if (!ok(s, pw_fixture_f32(&s->f, s->vs[side], 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL),
                            data, &x), "argument")) {
    return NULL;
  }
  pw_buffer_t out[2];
  pw_event_t* done[2] = {NULL, NULL};
  for (long i = 0; !atomic_load(&s->stop); ++i) {
    int k = (int)(i % 2);
    if (done[k] != NULL) {
      bool good = ok(s, pw_fixture_wait(done[k]), "run"); /* releases it */
      done[k] = NULL;
      ok(s, pw_buffer_release(s->f.client, out[k]), "release");
      if (!good) break;
      atomic_fetch_add(&s->runs, 1);
    }
    if (!ok(s, pw_graph_submit(s->f.client, s->chain[side], &x, 1, NULL, &out[k], 1, &done[k]),
            "submit")) {
      break;
    }
  }
  for (int k = 0; k < 2; ++k) {
    if (done[k] == NULL) continue;
    ok(s, pw_fixture_wait(done[k]), "last run");
    ok(s, pw_buffer_release(s->f.client, out[k]), "release");
  }
  ok(s, pw_buffer_release(s->f.client, x), "release argument");
  return NULL;
}

static pw_trace_stats_t stats_of(shared_t* s) {
  pw_trace_stats_t st;
  memset(&st, 0, sizeof(st));
  st.struct_size = sizeof(st);
  ok(s, pw_runtime_trace_stats(s->f.runtime, &st), "stats");
  return st;
}

static void controller(shared_t* s, int rounds) {
  pw_trace_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.events_per_thread = 256;
  for (int r = 0; r < rounds; ++r) {
    if (!ok(s, pw_runtime_trace_start(s->f.runtime, &o), "start")) return;
    nap_us(200 + 50 * (r % 7));
    if (!ok(s, pw_runtime_trace_stop(s->f.runtime), "stop")) return;
    pw_trace_stats_t a = stats_of(s);
    nap_us(300);
    pw_trace_stats_t b = stats_of(s);
    if (a.recording != 0 || a.events != b.events || a.dropped != b.dropped ||
        a.events > (uint64_t)a.threads * 256) {
      fprintf(stderr,
              "stress_trace: round %d: a stopped trace changed or overflowed (%llu+%llu "
              "then %llu+%llu events, %u threads, recording %u)\n",
              r, (unsigned long long)a.events, (unsigned long long)a.dropped,
              (unsigned long long)b.events, (unsigned long long)b.dropped, a.threads,
              a.recording);
      atomic_fetch_add(&s->failures, 1);
      return;
    }
  }
}

static int run(pw_fixture_backend_t kind, const char* name, int rounds, int threads) {
  shared_t* s = calloc(1, sizeof(*s));
  if (s == NULL) return 1;
  pw_test_allocator_t counting;
  pw_test_allocator_init(&counting);
  bool built = ok(s, pw_fixture_init(&s->f, kind, 2, "2x4", pw_test_allocator(&counting)),
                  "fixture");
  for (int k = 0; built && k < 2; ++k) built = ok(s, pw_fixture_vslice(&s->f, "2x4", &s->vs[k]), "vslice");
  if (built) built = ok(s, pw_fixture_compile(&s->f, s->vs[0], kCopy8, &s->copy), "compile");
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  for (int k = 0; built && k < 2; ++k) {
    pw_client_t* c = s->f.client;
    uint32_t prev;
    built = ok(s, pw_graph_create(c, &s->chain[k]), "graph") &&
            ok(s, pw_graph_add_parameter(c, s->chain[k], s->vs[k], &spec, &prev), "param");
    for (int i = 0; built && i < CHAIN; ++i) {
      pw_value_t in = pw_value(prev, 0);
      built = ok(s, pw_graph_add_compute(c, s->chain[k], "copy", s->copy, s->vs[k], &in, 1, &prev),
                 "compute");
    }
    built = built && ok(s, pw_graph_add_output(c, s->chain[k], pw_value(prev, 0)), "output") &&
            ok(s, pw_graph_finalize(c, s->chain[k]), "finalize");
  }
  if (built) {
    pthread_t th[MAX_THREADS];
    worker_t w[MAX_THREADS];
    for (int t = 0; t < threads; ++t) {
      w[t] = (worker_t){s, t};
      pthread_create(&th[t], NULL, submitter, &w[t]);
    }
    controller(s, rounds);
    atomic_store(&s->stop, 1);
    for (int t = 0; t < threads; ++t) pthread_join(th[t], NULL);
    /* One left recording at destroy. */
    ok(s, pw_runtime_trace_start(s->f.runtime, NULL), "last start");
    for (int k = 0; k < 2; ++k) ok(s, pw_graph_release(s->f.client, s->chain[k]), "graph release");
    ok(s, pw_executable_release(s->f.client, s->copy), "executable release");
    pw_fixture_deinit(&s->f);
  }
  int failures = atomic_load(&s->failures);
  if (pw_test_allocator_live(&counting) != 0) {
    fprintf(stderr, "stress_trace: %s: %llu bytes leaked\n", name,
            (unsigned long long)pw_test_allocator_live(&counting));
    failures++;
  }
  printf("stress_trace: %s: %d rounds, %ld runs, %d failures\n", name, rounds,
         atomic_load(&s->runs), failures);
  free(s);
  return failures != 0;
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 200;
  int threads = argc > 2 ? atoi(argv[2]) : 3;
  if (rounds < 1 || threads < 1 || threads > MAX_THREADS) {
    fprintf(stderr, "usage: stress_trace [rounds >= 1] [threads 1..%d]\n", MAX_THREADS);
    return 2;
  }
  int bad = run(PW_FIXTURE_DOUBLE_THREADED, "threaded double", rounds, threads);
  bad |= run(PW_FIXTURE_DOUBLE_LANES_QUEUED, "queued lanes", rounds, threads);
  return bad;
}
