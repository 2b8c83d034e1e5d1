/* Stress: slices lost and back while clients work.
 *
 * Three slices of two CPU devices (pool mode, then streams mode with
 * queued launch). A worker thread per slice, each with its own client,
 * uploads a fresh argument and runs a chain of copies on its slice again
 * and again, several runs in flight. A chaos thread meanwhile fails and
 * repairs a device of slice 1 (through the backend's health and health
 * checks) and loses and restores slice 2 (through the host calls), while
 * the health thread delivers the changes to a topology callback of every
 * client. Checked: every run resolves (no hang past the deadline) with OK
 * and the right values or a typed failure (UNAVAILABLE, ABORTED,
 * DATA_LOSS; uploads to a lost slice UNAVAILABLE); slice 0 never fails;
 * each slice's events alternate lost/back, starting with lost; nothing
 * leaks (counting allocator). Plain executable (TSan cannot run
 * Criterion). Usage: stress_runtime_failure [iterations-per-thread] */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pathways/backends/cpu.h"
#include "pathways/pathways.h"
#include "support/test_allocators.h"

#define SLICES 3
#define PER_SLICE 2
#define CHAIN 6
#define IN_FLIGHT 3
#define DEADLINE_NS 30000000000LL

static int g_iterations = 300;

typedef struct shared_s {
  pw_runtime_t* runtime;
  pw_backend_t backend;
  pthread_mutex_t lock;
  uint32_t last_change[SLICES]; /* 0 none yet, else the last change seen */
  uint32_t events[SLICES];
  int errors;
  atomic_int stop;
} shared_t;

typedef struct worker_s {
  shared_t* shared;
  uint32_t slice;
  pw_client_t* client;
  pw_vslice_t vs;
  uint64_t ok, failed;
} worker_t;

static void fail(shared_t* s, const char* what, pw_status_t status) {
  pthread_mutex_lock(&s->lock);
  s->errors++;
  fprintf(stderr, "stress_runtime_failure: %s: %s\n", what,
          status != NULL ? pw_status_message(status) : "(no status)");
  pthread_mutex_unlock(&s->lock);
}

static bool typed(pw_status_t status) {
  pw_status_code_t c = pw_status_code(status);
  return c == PW_STATUS_UNAVAILABLE || c == PW_STATUS_ABORTED || c == PW_STATUS_DATA_LOSS;
}

/* One listener per client; every client sees every change. Only client
 * 0's listener keeps the order per slice (the others count). */
typedef struct listener_s {
  shared_t* shared;
  bool order;
} listener_t;

static void on_topology(void* user, const pw_topology_event_t* e) {
  listener_t* l = user;
  shared_t* s = l->shared;
  if (!l->order) return;
  pthread_mutex_lock(&s->lock);
  uint32_t last = s->last_change[e->slice];
  bool fine = e->change == PW_TOPOLOGY_SLICE_LOST ? last != PW_TOPOLOGY_SLICE_LOST
                                                   : last == PW_TOPOLOGY_SLICE_LOST;
  if (!fine || e->slice == 0) {
    s->errors++;
    fprintf(stderr, "stress_runtime_failure: slice %u: %s after %u\n", e->slice,
            pw_topology_change_name(e->change), last);
  }
  s->last_change[e->slice] = e->change;
  s->events[e->slice]++;
  pthread_mutex_unlock(&s->lock);
}

static void nap_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

static void* worker_main(void* arg) {
  worker_t* w = arg;
  shared_t* s = w->shared;
  pw_client_t* c = w->client;
  pw_vslice_t vs = w->vs;
  pw_status_t st = NULL;
  const char* text = "kernel copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n";
  pw_executable_t exe;
  st = pw_executable_compile(c, vs, text, strlen(text), NULL, &exe);
  pw_graph_t g;
  pw_array_spec_t spec = {PW_DTYPE_F32, {1, {8}}, pw_sharding_split(0, PW_MESH_AXIS_ALL)};
  if (st == NULL) st = pw_graph_create(c, &g);
  uint32_t prev = 0;
  if (st == NULL) st = pw_graph_add_parameter(c, g, vs, &spec, &prev);
  for (uint32_t i = 0; st == NULL && i < CHAIN; ++i) {
    uint32_t node;
    st = pw_graph_add_compute(c, g, "copy", exe, vs, &(pw_value_t){prev, 0}, 1, &node);
    prev = node;
  }
  if (st == NULL) st = pw_graph_add_output(c, g, pw_value(prev, 0));
  if (st != NULL) {
    fail(s, "graph", st);
    pw_status_free(st);
    return NULL;
  }
  typedef struct flight_s {
    pw_buffer_t in, out;
    pw_event_t* done;
    float base;
    bool used;
  } flight_t;
  flight_t f[IN_FLIGHT];
  memset(f, 0, sizeof(f));
  for (int it = 0; it < g_iterations + IN_FLIGHT; ++it) {
    flight_t* x = &f[it % IN_FLIGHT];
    if (x->used) {
      /* Resolve the run submitted IN_FLIGHT iterations ago. */
      pw_status_t r = pw_event_wait(x->done, pw_clock_now() + DEADLINE_NS);
      float got[8];
      if (r == NULL) {
        r = pw_buffer_to_host(c, x->out, got, sizeof(got), pw_clock_now() + DEADLINE_NS);
      }
      if (r == NULL) {
        for (int k = 0; k < 8; ++k) {
          if (got[k] != x->base + (float)k) {
            fail(s, "wrong value", NULL);
            break;
          }
        }
        w->ok++;
      } else if (typed(r) && w->slice != 0) {
        w->failed++;
      } else {
        fail(s, w->slice == 0 ? "slice 0 failed" : "untyped failure", r);
      }
      pw_status_free(r);
      pw_event_release(x->done);
      pw_status_free(pw_buffer_release(c, x->out));
      pw_status_free(pw_buffer_release(c, x->in));
      x->used = false;
    }
    if (it >= g_iterations) continue;
    float v[8];
    x->base = (float)(it % 97);
    for (int k = 0; k < 8; ++k) v[k] = x->base + (float)k;
    st = pw_buffer_from_host(c, vs, &spec, v, sizeof(v), &x->in);
    if (st != NULL) {
      if (pw_status_code(st) != PW_STATUS_UNAVAILABLE || w->slice == 0) fail(s, "upload", st);
      pw_status_free(st);
      w->failed++;
      nap_us(100);
      continue;
    }
    st = pw_graph_submit(c, g, &x->in, 1, NULL, &x->out, 1, &x->done);
    if (st != NULL) {
      if (!typed(st) || w->slice == 0) fail(s, "submit", st);
      pw_status_free(st);
      pw_status_free(pw_buffer_release(c, x->in));
      w->failed++;
      continue;
    }
    x->used = true;
  }
  pw_status_free(pw_graph_release(c, g));
  pw_status_free(pw_executable_release(c, exe));
  pw_status_free(pw_vslice_release(c, vs));
  return NULL;
}

static void* chaos_main(void* arg) {
  shared_t* s = arg;
  uint32_t round = 0;
  while (!atomic_load(&s->stop)) {
    /* Slice 1 through its device's health, slice 2 through the host. */
    pw_status_free(pw_cpu_backend_set_health(s->backend, PER_SLICE + 1, PW_DEVICE_FAILED));
    if (round % 2) pw_status_free(pw_runtime_check_health(s->runtime, NULL));
    pw_status_free(pw_runtime_lose_slice(s->runtime, 2, "chaos"));
    nap_us(1000 + 200 * (round % 5));
    pw_status_free(pw_cpu_backend_set_health(s->backend, PER_SLICE + 1, PW_DEVICE_HEALTHY));
    pw_status_free(pw_runtime_check_health(s->runtime, NULL));
    pw_status_free(pw_runtime_restore_slice(s->runtime, 2));
    nap_us(3000 + 500 * (round % 3));
    round++;
  }
  return NULL;
}

static int run_mode(uint32_t stream_depth) {
  pw_test_allocator_t counting;
  pw_test_allocator_init(&counting);
  shared_t s;
  memset(&s, 0, sizeof(s));
  pthread_mutex_init(&s.lock, NULL);
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = SLICES * PER_SLICE;
  o.worker_count = 2;
  o.stream_depth = stream_depth;
  o.allocator = pw_test_allocator(&counting);
  pw_status_t st = pw_cpu_backend_create(&o, &s.backend);
  pw_slice_desc_t slices[SLICES];
  for (uint32_t i = 0; i < SLICES; ++i) {
    slices[i] = (pw_slice_desc_t){NULL, PW_MESH_SHAPE_INIT(1, PER_SLICE), 0, i * PER_SLICE, 0};
  }
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.allocator = pw_test_allocator(&counting);
  ro.backends = &s.backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = SLICES;
  ro.health_poll_ns = 200000; /* the health thread polls too */
  ro.loss_grace_ns = 50000000;
  if (st == NULL) st = pw_runtime_create(&ro, &s.runtime);
  if (st != NULL) {
    fprintf(stderr, "stress_runtime_failure: setup: %s\n", pw_status_message(st));
    pw_status_free(st);
    return 1;
  }
  worker_t w[SLICES];
  listener_t listeners[SLICES];
  pthread_t threads[SLICES], chaos;
  for (uint32_t i = 0; i < SLICES; ++i) {
    w[i] = (worker_t){&s, i, NULL, {0}, 0, 0};
    listeners[i] = (listener_t){&s, i == 0};
    st = pw_client_create(s.runtime, NULL, &w[i].client);
    if (st == NULL) st = pw_client_set_topology_callback(w[i].client, on_topology, &listeners[i]);
    pw_vslice_span_t span;
    memset(&span, 0, sizeof(span));
    span.struct_size = sizeof(span);
    span.mesh = pw_mesh_shape_make(1, (const uint32_t[]){PER_SLICE});
    span.slice_count = 1;
    span.slices = &w[i].slice;
    if (st == NULL) st = pw_vslice_create_spanning(w[i].client, &span, &w[i].vs);
    if (st != NULL) {
      fail(&s, "client", st);
      pw_status_free(st);
      return 1;
    }
  }
  pthread_create(&chaos, NULL, chaos_main, &s);
  for (uint32_t i = 0; i < SLICES; ++i) pthread_create(&threads[i], NULL, worker_main, &w[i]);
  for (uint32_t i = 0; i < SLICES; ++i) pthread_join(threads[i], NULL);
  atomic_store(&s.stop, 1);
  pthread_join(chaos, NULL);
  for (uint32_t i = 0; i < SLICES; ++i) {
    st = pw_client_destroy(w[i].client);
    if (st != NULL) fail(&s, "client destroy", st);
    pw_status_free(st);
  }
  st = pw_runtime_destroy(s.runtime);
  if (st != NULL) fail(&s, "runtime destroy", st);
  pw_status_free(st);
  printf("stress_runtime_failure: stream_depth %u: ok %llu/%llu/%llu, failed -/%llu/%llu; "
         "events s1 %u, s2 %u\n",
         stream_depth, (unsigned long long)w[0].ok, (unsigned long long)w[1].ok,
         (unsigned long long)w[2].ok, (unsigned long long)w[1].failed,
         (unsigned long long)w[2].failed, s.events[1], s.events[2]);
  if (w[0].failed != 0 || w[0].ok != (uint64_t)g_iterations) fail(&s, "slice 0 lost runs", NULL);
  if (s.events[2] == 0) fail(&s, "slice 2 never changed", NULL);
  if (pw_test_allocator_live(&counting) != 0) {
    fprintf(stderr, "stress_runtime_failure: %zu blocks leaked\n",
            pw_test_allocator_live(&counting));
    s.errors++;
  }
  pthread_mutex_destroy(&s.lock);
  return s.errors != 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1) g_iterations = atoi(argv[1]);
  if (g_iterations < 1) g_iterations = 1;
  int rc = run_mode(0);
  rc |= run_mode(4);
  return rc;
}
