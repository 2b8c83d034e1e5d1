/* Stress for the CPU backend's streams mode: several host threads launch
 * onto one streams-mode backend (4 devices, depth 8) at once. Each thread
 * owns one device and numbers its launches there (queue_seq 1, 2, ...):
 * copy chains through buffers, longer than the depth, so launches are
 * refused for depth at times (and retried with the next number). All
 * threads also launch all-reduce gangs over every device of a second
 * streams backend (queue_seq 0: unnumbered), under one lock so that every
 * device sees the gangs in one order, as a runtime launches them
 * (blocking collectives launched in conflicting orders deadlock, as on
 * chips), while another thread flips one device of that backend between
 * FAILED and HEALTHY.
 * Checks: every accepted launch completes exactly once, numbered dones come
 * in queue_seq order, chains carry the right data, a gang either succeeds
 * everywhere with the right sum or fails with a typed status, and destroy
 * returns. Plain executable (no Criterion) so that it runs under TSan.
 *
 * Usage: stress_cpu_streams [milliseconds, default 1000] */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_test_support.h"

#define DEVICES 4
#define DEPTH 8
#define ELEMS 32
#define CHAIN 12

static atomic_int g_failures;
static atomic_uint_fast64_t g_dones;
static atomic_uint_fast64_t g_refused;
static atomic_uint_fast64_t g_gang_errors;
static atomic_bool g_stop;

#define FAIL(...)                                        \
  do {                                                   \
    fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                        \
    fprintf(stderr, "\n");                               \
    atomic_fetch_add(&g_failures, 1);                    \
  } while (0)

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One launch's completion record. */
typedef struct record_t {
  struct thread_t* owner;
  uint64_t seq;
  atomic_uint calls;
  atomic_int code;
} record_t;

typedef struct thread_t {
  uint32_t device;
  pw_backend_t chains;  /* numbered streams, shared by all threads */
  pw_backend_t gangs;   /* unnumbered streams, shared */
  pw_backend_executable_t copy;
  pw_backend_executable_t reduce;
  pw_backend_memory_t buf[CHAIN + 1];
  pw_backend_memory_t gang_in[DEVICES];
  pw_backend_memory_t gang_out[DEVICES];
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  uint32_t outstanding;
  uint64_t last_done_seq;
  uint64_t next_seq;
  record_t chain_records[CHAIN];
  record_t gang_records[DEVICES];
  uint64_t rounds;
} thread_t;

static pthread_mutex_t g_gang_mutex = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint_fast64_t g_gang_id = 1;

static void stress_done(void* user, pw_status_t status) {
  record_t* r = user;
  thread_t* t = r->owner;
  atomic_store(&r->code, (int)pw_status_code(status));
  pw_status_free(status);
  if (atomic_fetch_add(&r->calls, 1) != 0) FAIL("a launch completed twice (seq %llu)",
                                                 (unsigned long long)r->seq);
  atomic_fetch_add(&g_dones, 1);
  pthread_mutex_lock(&t->mutex);
  if (r->seq != 0) {
    if (r->seq <= t->last_done_seq) {
      FAIL("device %u: done for queue_seq %llu after %llu", t->device,
           (unsigned long long)r->seq, (unsigned long long)t->last_done_seq);
    }
    t->last_done_seq = r->seq;
  }
  t->outstanding--;
  pthread_cond_broadcast(&t->cond);
  pthread_mutex_unlock(&t->mutex);
}

static void stress_done_timed(void* user, pw_status_t status, const pw_backend_timing_t* timing) {
  if (timing == NULL || timing->start_ns > timing->end_ns) FAIL("bad timing");
  stress_done(user, status);
}

/* Waits until |t| has no launch outstanding; false after 20 s. */
static bool wait_idle(thread_t* t) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 20;
  pthread_mutex_lock(&t->mutex);
  int rc = 0;
  while (t->outstanding > 0 && rc == 0) rc = pthread_cond_timedwait(&t->cond, &t->mutex, &deadline);
  bool idle = t->outstanding == 0;
  pthread_mutex_unlock(&t->mutex);
  return idle;
}

/* Launches step |k| of the chain (buf[k] -> buf[k+1]) on the thread's own
 * device, retrying while the stream is full. */
static void launch_chain_step(thread_t* t, uint32_t k) {
  record_t* r = &t->chain_records[k];
  uint32_t group[1] = {t->device};
  for (;;) {
    uint64_t seq = t->next_seq++;
    r->owner = t;
    r->seq = seq;
    atomic_store(&r->calls, 0);
    pw_backend_launch_t l = {
        .struct_size = sizeof(l), .executable = t->copy, .device = t->device,
        .group_devices = group, .group_size = 1, .inputs = &t->buf[k], .input_count = 1,
        .outputs = &t->buf[k + 1], .output_count = 1, .done = stress_done, .done_user = r,
        .queue_seq = seq, .done_timed = stress_done_timed};
    pthread_mutex_lock(&t->mutex);
    t->outstanding++;
    pthread_mutex_unlock(&t->mutex);
    pw_status_t s = t->chains.vtable->launch(t->chains.self, &l);
    if (s == NULL) return;
    pthread_mutex_lock(&t->mutex);
    t->outstanding--;
    pthread_mutex_unlock(&t->mutex);
    if (pw_status_code(s) != PW_STATUS_RESOURCE_EXHAUSTED) {
      FAIL("device %u chain step %u: %s", t->device, k, pw_status_message(s));
      pw_status_free(s);
      return;
    }
    pw_status_free(s);
    atomic_fetch_add(&g_refused, 1);
    /* Full: wait for one done of ours (the refused number is spent). */
    pthread_mutex_lock(&t->mutex);
    uint32_t seen = t->outstanding;
    while (t->outstanding >= seen && t->outstanding > 0) pthread_cond_wait(&t->cond, &t->mutex);
    pthread_mutex_unlock(&t->mutex);
  }
}

static void run_chain(thread_t* t) {
  float x[ELEMS];
  for (uint32_t i = 0; i < ELEMS; ++i) x[i] = (float)(t->rounds * 31 + t->device * 7 + i);
  pw_status_t s = t->chains.vtable->copy_to_device(t->chains.self, t->device, t->buf[0], 0, x,
                                                   sizeof(x));
  if (s != NULL) FAIL("copy_to_device: %s", pw_status_message(s));
  pw_status_free(s);
  for (uint32_t k = 0; k < CHAIN; ++k) launch_chain_step(t, k);
  if (!wait_idle(t)) FAIL("device %u: chain did not finish in 20 s", t->device);
  float y[ELEMS];
  s = t->chains.vtable->copy_to_host(t->chains.self, t->device, t->buf[CHAIN], 0, y, sizeof(y));
  pw_status_free(s);
  for (uint32_t k = 0; k < CHAIN; ++k) {
    if (atomic_load(&t->chain_records[k].code) != PW_STATUS_OK) FAIL("chain step failed");
  }
  if (memcmp(x, y, sizeof(x)) != 0) FAIL("device %u: chain carried wrong data", t->device);
}

/* One all-reduce gang over every device of the gang backend. */
static void run_gang(thread_t* t) {
  uint32_t group[DEVICES];
  for (uint32_t d = 0; d < DEVICES; ++d) group[d] = d;
  uint32_t accepted = 0;
  pthread_mutex_lock(&g_gang_mutex);
  uint64_t gang = atomic_fetch_add(&g_gang_id, 1);
  for (uint32_t d = 0; d < DEVICES; ++d) {
    record_t* r = &t->gang_records[d];
    r->owner = t;
    r->seq = 0;
    atomic_store(&r->calls, 0);
    atomic_store(&r->code, -1);
    pw_backend_launch_t l = {
        .struct_size = sizeof(l), .executable = t->reduce, .device = d, .mesh_index = d,
        .group_devices = group, .group_size = DEVICES, .gang_id = gang,
        .inputs = &t->gang_in[d], .input_count = 1, .outputs = &t->gang_out[d],
        .output_count = 1, .done = stress_done, .done_user = r, .done_timed = stress_done_timed};
    pthread_mutex_lock(&t->mutex);
    t->outstanding++;
    pthread_mutex_unlock(&t->mutex);
    pw_status_t s = t->gangs.vtable->launch(t->gangs.self, &l);
    if (s != NULL) {
      if (pw_status_code(s) != PW_STATUS_RESOURCE_EXHAUSTED) FAIL("gang part: %s", pw_status_message(s));
      pw_status_free(s);
      atomic_store(&r->calls, 1); /* refused: no done will come */
      pthread_mutex_lock(&t->mutex);
      t->outstanding--;
      pthread_mutex_unlock(&t->mutex);
      atomic_fetch_add(&g_refused, 1);
    } else {
      ++accepted;
    }
  }
  pthread_mutex_unlock(&g_gang_mutex);
  if (!wait_idle(t)) FAIL("gang %llu did not finish in 20 s", (unsigned long long)gang);
  bool all_ok = accepted == DEVICES;
  for (uint32_t d = 0; d < DEVICES; ++d) {
    int code = atomic_load(&t->gang_records[d].code);
    if (code == -1) continue; /* refused */
    if (code != PW_STATUS_OK) {
      all_ok = false;
      if (code != PW_STATUS_UNAVAILABLE && code != PW_STATUS_ABORTED) FAIL("gang code %d", code);
    }
  }
  if (!all_ok) {
    atomic_fetch_add(&g_gang_errors, 1);
    return;
  }
  for (uint32_t d = 0; d < DEVICES; ++d) {
    float y[ELEMS];
    pw_status_t s = t->gangs.vtable->copy_to_host(t->gangs.self, d, t->gang_out[d], 0, y,
                                                  sizeof(y));
    pw_status_free(s);
    for (uint32_t i = 0; i < ELEMS; ++i) {
      float want = (float)(DEVICES * (int)i + (0 + 1 + 2 + 3));
      if (y[i] != want) {
        FAIL("gang %llu device %u element %u: %g, expected %g", (unsigned long long)gang, d, i,
             (double)y[i], (double)want);
        return;
      }
    }
  }
}

static void* thread_main(void* arg) {
  thread_t* t = arg;
  while (!atomic_load(&g_stop)) {
    run_chain(t);
    run_gang(t);
    t->rounds++;
  }
  return NULL;
}

static void* flapper_main(void* arg) {
  pw_backend_t* gangs = arg;
  uint64_t n = 0;
  while (!atomic_load(&g_stop)) {
    pw_status_t s = pw_cpu_backend_set_health(*gangs, 2, n++ % 2 ? PW_DEVICE_HEALTHY
                                                                 : PW_DEVICE_FAILED);
    pw_status_free(s);
    struct timespec pause = {0, 2 * 1000 * 1000};
    nanosleep(&pause, NULL); /* pacing, not synchronisation */
  }
  pw_status_t s = pw_cpu_backend_set_health(*gangs, 2, PW_DEVICE_HEALTHY);
  pw_status_free(s);
  return NULL;
}

static pw_backend_t make_backend(void) {
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = DEVICES;
  o.device_memory_bytes = 1 << 20;
  o.stream_depth = DEPTH;
  pw_backend_t b = {0};
  pw_status_t s = pw_cpu_backend_create(&o, &b);
  if (s != NULL) {
    fprintf(stderr, "create: %s\n", pw_status_message(s));
    exit(1);
  }
  return b;
}

int main(int argc, char** argv) {
  int ms = argc > 1 ? atoi(argv[1]) : 1000;
  pw_backend_t chains = make_backend();
  pw_backend_t gangs = make_backend();
  const pw_backend_vtable_t* vt = chains.vtable;
  uint32_t one = 1, all = DEVICES;
  pw_mesh_shape_t mesh1 = pw_mesh_shape_make(1, &one);
  pw_mesh_shape_t mesh4 = pw_mesh_shape_make(1, &all);
  pw_backend_executable_t copy = NULL, reduce = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(sig)};
  pw_status_t s = cpu_load_text(chains, "kernel copy\ninput f32[32] replicated\n"
                                        "output f32[32] replicated\n", &mesh1, &copy, &sig);
  if (s == NULL) {
    s = cpu_load_text(gangs, "kernel all_reduce_sum\ninput f32[4,32] split(0,all)\n"
                             "output f32[32] replicated\n", &mesh4, &reduce, &sig);
  }
  if (s != NULL) {
    fprintf(stderr, "load: %s\n", pw_status_message(s));
    return 1;
  }
  static thread_t threads[DEVICES];
  pthread_t ids[DEVICES + 1];
  for (uint32_t t = 0; t < DEVICES; ++t) {
    thread_t* th = &threads[t];
    th->device = t;
    th->chains = chains;
    th->gangs = gangs;
    th->copy = copy;
    th->reduce = reduce;
    th->next_seq = 1;
    pthread_mutex_init(&th->mutex, NULL);
    pthread_cond_init(&th->cond, NULL);
    for (uint32_t k = 0; k <= CHAIN; ++k) {
      pw_status_free(vt->allocate(chains.self, t, ELEMS * sizeof(float), &th->buf[k]));
    }
    for (uint32_t d = 0; d < DEVICES; ++d) {
      float x[ELEMS];
      for (uint32_t i = 0; i < ELEMS; ++i) x[i] = (float)(i + d);
      pw_status_free(vt->allocate(gangs.self, d, sizeof(x), &th->gang_in[d]));
      pw_status_free(vt->allocate(gangs.self, d, sizeof(x), &th->gang_out[d]));
      pw_status_free(vt->copy_to_device(gangs.self, d, th->gang_in[d], 0, x, sizeof(x)));
    }
  }
  for (uint32_t t = 0; t < DEVICES; ++t) pthread_create(&ids[t], NULL, thread_main, &threads[t]);
  pthread_create(&ids[DEVICES], NULL, flapper_main, &gangs);
  uint64_t end = now_ns() + (uint64_t)ms * 1000000ull;
  while (now_ns() < end) {
    struct timespec pause = {0, 10 * 1000 * 1000};
    nanosleep(&pause, NULL); /* the run's length, not synchronisation */
  }
  atomic_store(&g_stop, true);
  for (uint32_t t = 0; t <= DEVICES; ++t) pthread_join(ids[t], NULL);
  uint64_t rounds = 0;
  for (uint32_t t = 0; t < DEVICES; ++t) {
    thread_t* th = &threads[t];
    rounds += th->rounds;
    for (uint32_t k = 0; k <= CHAIN; ++k) vt->deallocate(chains.self, t, th->buf[k]);
    for (uint32_t d = 0; d < DEVICES; ++d) {
      vt->deallocate(gangs.self, d, th->gang_in[d]);
      vt->deallocate(gangs.self, d, th->gang_out[d]);
    }
    pthread_mutex_destroy(&th->mutex);
    pthread_cond_destroy(&th->cond);
  }
  vt->unload(chains.self, copy);
  vt->unload(gangs.self, reduce);
  vt->destroy(chains.self);
  vt->destroy(gangs.self);
  int failures = atomic_load(&g_failures);
  printf("stress_cpu_streams: %llu rounds, %llu dones, %llu refused for depth, %llu gangs "
         "failed by injection, %d failures\n",
         (unsigned long long)rounds, (unsigned long long)atomic_load(&g_dones),
         (unsigned long long)atomic_load(&g_refused),
         (unsigned long long)atomic_load(&g_gang_errors), failures);
  if (rounds == 0) {
    fprintf(stderr, "FAIL: no round completed\n");
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
