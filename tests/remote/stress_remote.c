/* Stress of the multi-host runtime in one process, for ThreadSanitizer and
 * ASan: a controller (lib/remote) and two workers (lib/worker, each a CPU
 * backend of 2 devices on its own thread, with the UCX data plane) on
 * loopback. Three client threads run rounds of a graph across the two
 * remote slices (a chain of adds on one, a transfer to the other, an add
 * there) and read the result back, some rounds with a buffer large
 * enough for the data plane's host copies; meanwhile a chaos thread cuts
 * the workers' sessions (pw_remote_disconnect) one after the other, and
 * they register again.
 *
 * Checked: every round resolves within its deadline, with the right
 * values or a typed error of the failure path (UNAVAILABLE, ABORTED,
 * DATA_LOSS, CANCELLED; RESOURCE_EXHAUSTED for a virtual slice pinned to
 * a lost slice); after the chaos every worker is attached again,
 * and rounds then succeed on both slices. Exit 0 on success.
 *
 * Usage: stress_remote [ROUNDS_PER_THREAD [CUTS]] */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pathways/pathways.h"
#include "pathways/remote.h"
#include "pathways/worker.h"

#define MS 1000000LL
enum { kWorkers = 2, kThreads = 3, kSmall = 8, kLarge = 1 << 16 };
static const char kToken[] = "stress-token";

static pw_remote_t* g_remote;
static pw_runtime_t* g_runtime;
static int g_rounds = 40;
static atomic_int g_failed;          /* a check failed */
static atomic_int g_ok, g_typed;     /* rounds that succeeded / failed typed */
static atomic_bool g_chaos_done;

#define FAIL(...)                        \
  do {                                   \
    fprintf(stderr, "stress_remote: "); \
    fprintf(stderr, __VA_ARGS__);        \
    fprintf(stderr, "\n");               \
    atomic_store(&g_failed, 1);          \
  } while (0)

static void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * MS};
  nanosleep(&ts, NULL);
}

/* A status of the failure path is fine during the chaos; anything else is
 * a bug. Consumes |s|; true when |s| was OK. */
static bool round_status(pw_status_t s, const char* what) {
  if (s == NULL) return true;
  pw_status_code_t code = pw_status_code(s);
  /* A virtual slice pinned to a lost slice is refused as exhausted. */
  bool lost_slice = code == PW_STATUS_RESOURCE_EXHAUSTED &&
                    strstr(pw_status_message(s), "has failed devices") != NULL;
  if (code == PW_STATUS_UNAVAILABLE || code == PW_STATUS_ABORTED || code == PW_STATUS_DATA_LOSS ||
      code == PW_STATUS_CANCELLED || lost_slice) {
    if (atomic_fetch_add(&g_typed, 1) % 16 == 0 && getenv("STRESS_REMOTE_VERBOSE") != NULL) {
      fprintf(stderr, "stress_remote: %s (typed): %s\n", what, pw_status_message(s));
    }
  } else {
    FAIL("%s: unexpected %s: %s", what, pw_status_code_string(code), pw_status_message(s));
  }
  pw_status_free(s);
  return false;
}

typedef struct round_s {
  pw_client_t* client;
  pw_vslice_t vs[2];
  pw_executable_t add[2];
  pw_graph_t graph;
  pw_buffer_t in, out;
  bool has_in, has_out;
} round_t;

static void round_release(round_t* r) {
  if (r->has_out) pw_status_free(pw_buffer_release(r->client, r->out));
  if (r->has_in) pw_status_free(pw_buffer_release(r->client, r->in));
  if (r->graph.id) pw_status_free(pw_graph_release(r->client, r->graph));
  for (int i = 0; i < 2; ++i) {
    if (r->add[i].id) pw_status_free(pw_executable_release(r->client, r->add[i]));
    if (r->vs[i].id) pw_status_free(pw_vslice_release(r->client, r->vs[i]));
  }
}

/* One round from slice |from| to the other: ((x + x) + (x + x)) moved,
 * then doubled there: 8x. */
static pw_status_t round_build(round_t* r, uint32_t from, uint64_t n) {
  char text[256];
  snprintf(text, sizeof(text),
           "kernel add\ninput f32[%llu] split(0,all)\ninput f32[%llu] split(0,all)\n"
           "output f32[%llu] split(0,all)\n",
           (unsigned long long)n, (unsigned long long)n, (unsigned long long)n);
  for (uint32_t i = 0; i < 2; ++i) {
    uint32_t slice = i == 0 ? from : 1 - from;
    pw_vslice_span_t span = {.struct_size = sizeof(span), .mesh = PW_MESH_SHAPE_INIT(1, 2),
                             .slice_count = 1, .slices = &slice};
    PW_RETURN_IF_ERROR(pw_vslice_create_spanning(r->client, &span, &r->vs[i]));
    PW_RETURN_IF_ERROR(pw_executable_compile(r->client, r->vs[i], text, strlen(text), NULL,
                                             &r->add[i]));
  }
  pw_array_spec_t spec = {PW_DTYPE_F32, {1, {n}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
  PW_RETURN_IF_ERROR(pw_graph_create(r->client, &r->graph));
  pw_graph_t g = r->graph;
  uint32_t x, a, b, t, c;
  PW_RETURN_IF_ERROR(pw_graph_add_parameter(r->client, g, r->vs[0], &spec, &x));
  pw_value_t in[2] = {pw_value(x, 0), pw_value(x, 0)};
  PW_RETURN_IF_ERROR(pw_graph_add_compute(r->client, g, "a", r->add[0], r->vs[0], in, 2, &a));
  in[0] = in[1] = pw_value(a, 0);
  PW_RETURN_IF_ERROR(pw_graph_add_compute(r->client, g, "b", r->add[0], r->vs[0], in, 2, &b));
  PW_RETURN_IF_ERROR(pw_graph_add_transfer(r->client, g, "t", pw_value(b, 0), r->vs[1],
                                           pw_sharding_split(0, PW_MESH_AXIS_ALL), &t));
  in[0] = in[1] = pw_value(t, 0);
  PW_RETURN_IF_ERROR(pw_graph_add_compute(r->client, g, "c", r->add[1], r->vs[1], in, 2, &c));
  PW_RETURN_IF_ERROR(pw_graph_add_output(r->client, g, pw_value(c, 0)));
  return pw_graph_finalize(r->client, g);
}

/* Builds, submits and checks one round; NULL or the round's error. */
static pw_status_t round_run(round_t* r, uint32_t from, uint64_t n, float* host) {
  PW_RETURN_IF_ERROR(round_build(r, from, n));
  for (uint64_t i = 0; i < n; ++i) host[i] = (float)(i % 97) + 0.5f;
  pw_array_spec_t spec = {PW_DTYPE_F32, {1, {n}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
  PW_RETURN_IF_ERROR(pw_buffer_from_host(r->client, r->vs[0], &spec, host, n * sizeof(float), &r->in));
  r->has_in = true;
  pw_event_t* done = NULL;
  PW_RETURN_IF_ERROR(pw_graph_submit(r->client, r->graph, &r->in, 1, NULL, &r->out, 1, &done));
  r->has_out = true;
  pw_status_t s = pw_event_wait(done, pw_deadline_from_timeout(60000 * MS));
  pw_event_release(done);
  if (pw_status_code(s) == PW_STATUS_DEADLINE_EXCEEDED) {
    FAIL("a round did not resolve in 60 s");
  }
  PW_RETURN_IF_ERROR(s);
  PW_RETURN_IF_ERROR(pw_buffer_to_host(r->client, r->out, host, n * sizeof(float),
                                       pw_deadline_from_timeout(60000 * MS)));
  for (uint64_t i = 0; i < n; ++i) {
    float want = 8.0f * ((float)(i % 97) + 0.5f);
    if (host[i] != want) {
      FAIL("element %llu: %g, want %g", (unsigned long long)i, (double)host[i], (double)want);
      break;
    }
  }
  return NULL;
}

static void* client_main(void* arg) {
  int index = (int)(intptr_t)arg;
  float* host = malloc(kLarge * sizeof(float));
  pw_client_t* client = NULL;
  pw_status_t s = pw_client_create(g_runtime, NULL, &client);
  if (s != NULL || host == NULL) {
    FAIL("thread %d: no client: %s", index, s ? pw_status_message(s) : "out of memory");
    pw_status_free(s);
    free(host);
    return NULL;
  }
  for (int k = 0; k < g_rounds && !atomic_load(&g_failed); ++k) {
    round_t r = {.client = client};
    uint64_t n = (k % 4 == 3) ? kLarge : kSmall;
    if (round_status(round_run(&r, (uint32_t)((index + k) % 2), n, host), "round")) {
      atomic_fetch_add(&g_ok, 1);
    } else {
      nap_ms(10); /* a slice is lost: give it time to come back */
    }
    round_release(&r);
  }
  pw_status_free(pw_client_destroy(client));
  free(host);
  return NULL;
}

static void* chaos_main(void* arg) {
  int cuts = (int)(intptr_t)arg;
  for (int i = 0; i < cuts && !atomic_load(&g_failed); ++i) {
    nap_ms(150);
    pw_status_t s = pw_remote_disconnect(g_remote, (uint32_t)(i % kWorkers));
    if (s != NULL && pw_status_code(s) != PW_STATUS_UNAVAILABLE) {
      FAIL("disconnect: %s", pw_status_message(s));
    }
    pw_status_free(s);
    /* Let it come back before the next cut. */
    s = pw_remote_wait_workers(g_remote, kWorkers, 30000 * MS);
    if (s != NULL) FAIL("a cut worker did not come back: %s", pw_status_message(s));
    pw_status_free(s);
  }
  atomic_store(&g_chaos_done, true);
  return NULL;
}

typedef struct worker_thread_s {
  pw_worker_t* worker;
  pthread_t thread;
  pw_status_t status;
} worker_thread_t;

static void* worker_main(void* arg) {
  worker_thread_t* t = arg;
  t->status = pw_worker_run(t->worker);
  return NULL;
}

static int start_workers(worker_thread_t* threads) {
  for (int i = 0; i < kWorkers; ++i) {
    pw_cpu_backend_options_t cpu;
    pw_cpu_backend_options_init(&cpu);
    cpu.device_count = 2;
    cpu.stream_depth = 8;
    cpu.device_memory_bytes = 64u << 20;
    pw_worker_options_t o;
    pw_worker_options_init(&o);
    o.controller_url = pw_remote_url(g_remote);
    o.token = kToken;
    o.token_size = strlen(kToken);
    char name[16];
    snprintf(name, sizeof(name), "s%d", i);
    o.name = name;
    o.retry_min_ns = 10 * MS;
    o.retry_max_ns = 50 * MS;
    pw_status_t s = pw_cpu_backend_create(&cpu, &o.backend);
    if (s == NULL) s = pw_worker_create(&o, &threads[i].worker);
    if (s != NULL) {
      fprintf(stderr, "stress_remote: worker %d: %s\n", i, pw_status_message(s));
      pw_status_free(s);
      return 1;
    }
    pthread_create(&threads[i].thread, NULL, worker_main, &threads[i]);
  }
  return 0;
}

static void stop_workers(worker_thread_t* threads) {
  for (int i = 0; i < kWorkers; ++i) {
    if (threads[i].worker == NULL) continue;
    pw_worker_stop(threads[i].worker);
    pthread_join(threads[i].thread, NULL);
    if (threads[i].status != NULL) {
      FAIL("worker %d ended with %s", i, pw_status_message(threads[i].status));
      pw_status_free(threads[i].status);
    }
    pw_worker_destroy(threads[i].worker);
  }
}

/* The runtime over the workers' proxies, slice k on the worker "sk". */
static pw_status_t make_runtime(void) {
  pw_backend_t proxies[kWorkers];
  for (uint32_t i = 0; i < kWorkers; ++i) {
    pw_remote_worker_info_t info = {.struct_size = sizeof(info)};
    PW_RETURN_IF_ERROR(pw_remote_worker_info(g_remote, i, &info));
    PW_RETURN_IF_ERROR(pw_remote_backend(g_remote, i, &proxies[info.name[1] - '0']));
  }
  pw_slice_desc_t slices[kWorkers];
  for (uint32_t k = 0; k < kWorkers; ++k) {
    slices[k] = (pw_slice_desc_t){NULL, PW_MESH_SHAPE_INIT(1, 2), k, 0, k};
  }
  pw_transport_t transport;
  PW_RETURN_IF_ERROR(pw_remote_transport(g_remote, &transport));
  pw_runtime_options_t ro = {0};
  ro.struct_size = sizeof(ro);
  ro.backends = proxies;
  ro.backend_count = kWorkers;
  ro.slices = slices;
  ro.slice_count = kWorkers;
  ro.transport = transport;
  ro.health_poll_ns = 5 * MS;
  return pw_runtime_create(&ro, &g_runtime);
}

/* After the chaos: both slices back, and a round each way succeeds. */
static void check_recovered(void) {
  pw_time_t deadline = pw_deadline_from_timeout(30000 * MS);
  for (uint32_t k = 0; k < kWorkers; ++k) {
    pw_slice_info_t si = {.struct_size = sizeof(si)};
    for (;;) {
      pw_status_t s = pw_runtime_check_health(g_runtime, NULL);
      pw_status_free(s);
      s = pw_runtime_slice_info(g_runtime, k, &si);
      pw_status_free(s);
      if (si.state != PW_SLICE_LOST || pw_deadline_remaining(deadline) <= 0) break;
      nap_ms(5);
    }
    if (si.state == PW_SLICE_LOST) FAIL("slice %u still lost after the chaos", k);
  }
  pw_client_t* client = NULL;
  pw_status_t s = pw_client_create(g_runtime, NULL, &client);
  float* host = malloc(kLarge * sizeof(float));
  for (uint32_t from = 0; s == NULL && host != NULL && from < 2; ++from) {
    round_t r = {.client = client};
    pw_status_t rs = round_run(&r, from, kLarge, host);
    if (rs != NULL) FAIL("a round after the chaos failed: %s", pw_status_message(rs));
    pw_status_free(rs);
    round_release(&r);
  }
  if (s != NULL) FAIL("client: %s", pw_status_message(s));
  pw_status_free(s);
  pw_status_free(pw_client_destroy(client));
  free(host);
}

int main(int argc, char** argv) {
  int cuts = 6;
  if (argc > 1) g_rounds = atoi(argv[1]);
  if (argc > 2) cuts = atoi(argv[2]);
  pw_remote_options_t o;
  pw_remote_options_init(&o);
  o.token = kToken;
  o.token_size = strlen(kToken);
  o.heartbeat_ns = 50 * MS;
  o.heartbeat_misses = 20; /* generous: sanitizers are slow */
  pw_status_t s = pw_remote_create(&o, &g_remote);
  if (s != NULL) {
    fprintf(stderr, "stress_remote: %s\n", pw_status_message(s));
    return 1;
  }
  worker_thread_t workers[kWorkers] = {{0}};
  int rc = start_workers(workers);
  if (rc == 0) s = pw_remote_wait_workers(g_remote, kWorkers, 60000 * MS);
  if (rc == 0 && s == NULL) s = make_runtime();
  if (s != NULL) {
    fprintf(stderr, "stress_remote: %s\n", pw_status_message(s));
    pw_status_free(s);
    rc = 1;
  }
  if (rc == 0) {
    pthread_t clients[kThreads], chaos;
    for (int i = 0; i < kThreads; ++i) {
      pthread_create(&clients[i], NULL, client_main, (void*)(intptr_t)i);
    }
    pthread_create(&chaos, NULL, chaos_main, (void*)(intptr_t)cuts);
    for (int i = 0; i < kThreads; ++i) pthread_join(clients[i], NULL);
    pthread_join(chaos, NULL);
    if (!atomic_load(&g_failed)) check_recovered();
    pw_status_free(pw_runtime_destroy(g_runtime));
  }
  stop_workers(workers);
  pw_remote_destroy(g_remote);
  int failed = atomic_load(&g_failed);
  printf("stress_remote: %d rounds ok, %d failed typed, %d cuts: %s\n", atomic_load(&g_ok),
         atomic_load(&g_typed), cuts, rc == 0 && !failed ? "ok" : "FAILED");
  return rc == 0 && !failed ? 0 : 1;
}
