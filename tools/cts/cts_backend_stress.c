/* pathways-cts backend case launch_stress: several threads launch copy
 * (and, with an all-reduce program, all-reduce) gangs concurrently on one
 * backend, a fixed number of rounds, and check the async contract: a
 * launch that returned an error never calls done, every other launch
 * calls done exactly once, outputs are right when a gang succeeded, and
 * nothing hangs. Counts, never timings. Ported from the in-tree stress
 * test (which also injects faults through the test double's own API). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cts_backend.h"

enum { kThreads = 4, kMaxDevices = 4, kMaxGangs = 6, kElements = 8, kRounds = 25 };

typedef struct stress_thread_t stress_thread_t;

typedef struct stress_record_t {
  stress_thread_t* owner;
  _Atomic uint32_t calls;
  _Atomic int code;
  bool accepted;
} stress_record_t;

typedef struct stress_shared_t {
  const pw_backend_t* backend;
  pw_backend_executable_t copy;
  pw_backend_executable_t all_reduce; /* NULL: copies only */
  uint32_t devices;                   /* per gang */
  uint32_t gangs;                     /* per round and thread */
  bool ordered;                       /* queue-ordered: collectives from thread 0 only */
  _Atomic uint64_t accepted;
  _Atomic uint64_t done_calls;
  _Atomic uint64_t failures;
  char first_failure[256];
  pthread_mutex_t failure_mutex;
} stress_shared_t;

struct stress_thread_t {
  stress_shared_t* s;
  uint32_t index;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  uint32_t outstanding;
  bool hung;
  uint32_t devices[kMaxDevices];
  pw_backend_memory_t inputs[kMaxGangs][kMaxDevices];
  pw_backend_memory_t outputs[kMaxGangs][kMaxDevices];
  pw_backend_launch_t launches[kMaxGangs][kMaxDevices];
  stress_record_t records[kMaxGangs][kMaxDevices];
};

#define STRESS_FAIL(s, ...)                                                            \
  do {                                                                                 \
    pthread_mutex_lock(&(s)->failure_mutex);                                           \
    if (atomic_fetch_add(&(s)->failures, 1) == 0) {                                    \
      snprintf((s)->first_failure, sizeof((s)->first_failure), __VA_ARGS__);           \
    }                                                                                  \
    pthread_mutex_unlock(&(s)->failure_mutex);                                         \
  } while (0)

static void stress_done(void* user, pw_status_t status) {
  stress_record_t* r = user;
  atomic_store(&r->code, (int)pw_status_code(status));
  pw_status_free(status);
  atomic_fetch_add(&r->calls, 1);
  stress_thread_t* t = r->owner;
  atomic_fetch_add(&t->s->done_calls, 1);
  pthread_mutex_lock(&t->mutex);
  t->outstanding--;
  pthread_cond_broadcast(&t->cond);
  pthread_mutex_unlock(&t->mutex);
}

static float stress_input(const stress_thread_t* t, uint32_t g, uint32_t m, uint32_t i) {
  return (float)(t->index + g + m + i);
}

static void stress_describe(stress_thread_t* t, uint32_t g, uint64_t gang_id, bool collective) {
  stress_shared_t* s = t->s;
  for (uint32_t m = 0; m < s->devices; ++m) {
    stress_record_t* r = &t->records[g][m];
    r->owner = t;
    atomic_store(&r->calls, 0);
    atomic_store(&r->code, -1);
    pw_backend_launch_t* l = &t->launches[g][m];
    memset(l, 0, sizeof(*l));
    l->struct_size = sizeof(*l);
    l->executable = collective ? s->all_reduce : s->copy;
    l->device = t->devices[m];
    l->mesh_index = m;
    l->group_devices = t->devices;
    l->group_size = s->devices;
    l->gang_id = gang_id;
    l->inputs = &t->inputs[g][m];
    l->input_count = 1;
    l->outputs = &t->outputs[g][m];
    l->output_count = 1;
    l->done = stress_done;
    l->done_user = r;
  }
}

/* Waits for every accepted launch of the round; false on a hang. */
static bool stress_wait(stress_thread_t* t) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += (time_t)(PW_CTS_TIMEOUT_NS / 1000000000ull);
  pthread_mutex_lock(&t->mutex);
  int rc = 0;
  while (t->outstanding != 0 && rc != ETIMEDOUT) {
    rc = pthread_cond_timedwait(&t->cond, &t->mutex, &deadline);
  }
  uint32_t left = t->outstanding;
  pthread_mutex_unlock(&t->mutex);
  if (left != 0) STRESS_FAIL(t->s, "thread %u: %u launches never completed (hang)", t->index, left);
  return left == 0;
}

static void stress_check(stress_thread_t* t, uint32_t g, bool collective) {
  stress_shared_t* s = t->s;
  bool all_ok = true;
  for (uint32_t m = 0; m < s->devices; ++m) {
    stress_record_t* r = &t->records[g][m];
    uint32_t calls = atomic_load(&r->calls);
    if (calls != (r->accepted ? 1u : 0u)) {
      STRESS_FAIL(s, "gang %u part %u: %s launch had %u done calls", g, m,
                  r->accepted ? "an accepted" : "a refused", calls);
    }
    all_ok = all_ok && r->accepted && atomic_load(&r->code) == PW_STATUS_OK;
  }
  if (!all_ok) return;
  float values[kElements];
  for (uint32_t m = 0; m < s->devices; ++m) {
    pw_status_t status = pw_cts_backend_copy_to_host(s->backend, t->devices[m], t->outputs[g][m],
                                                     0, values, sizeof(values));
    if (status != NULL) {
      STRESS_FAIL(s, "copy_to_host: %s", pw_status_message(status));
      pw_status_free(status);
      return;
    }
    for (uint32_t i = 0; i < kElements; ++i) {
      float want = stress_input(t, g, m, i);
      if (collective) {
        want = 0.0f;
        for (uint32_t k = 0; k < s->devices; ++k) want += stress_input(t, g, k, i);
      }
      if (values[i] != want) {
        STRESS_FAIL(s, "thread %u gang %u part %u element %u is %g, expected %g", t->index, g,
                    m, i, (double)values[i], (double)want);
        return;
      }
    }
  }
}

/* Whether gang |g| of |t| is an all-reduce. On a queue-ordered backend
 * the parts of a collective wait in each device's FIFO for the others, so
 * gangs from several threads in different orders would deadlock (the
 * runtime orders them the same way on every device): there only thread 0
 * launches collectives. */
static bool pw_stress_collective(const stress_thread_t* t, uint32_t g) {
  return t->s->all_reduce != NULL && g % 2 == 1 && (!t->s->ordered || t->index == 0);
}

/* One round: |gangs| gangs (alternately copy and all-reduce) launched
 * part by part, then wait and check. False when the round hung (the
 * backend may still hold pointers into |t|: stop). */
static bool stress_round(stress_thread_t* t, uint32_t round) {
  stress_shared_t* s = t->s;
  float values[kElements];
  for (uint32_t g = 0; g < s->gangs; ++g) {
    for (uint32_t m = 0; m < s->devices; ++m) {
      for (uint32_t i = 0; i < kElements; ++i) values[i] = stress_input(t, g, m, i);
      pw_status_t status = pw_cts_backend_copy_to_device(s->backend, t->devices[m],
                                                         t->inputs[g][m], 0, values,
                                                         sizeof(values));
      if (status != NULL) STRESS_FAIL(s, "copy_to_device: %s", pw_status_message(status));
      pw_status_free(status);
    }
  }
  for (uint32_t g = 0; g < s->gangs; ++g) {
    bool collective = pw_stress_collective(t, g);
    uint64_t gang_id = ((uint64_t)(t->index + 1) << 40) | ((uint64_t)round * kMaxGangs + g + 1);
    stress_describe(t, g, gang_id, collective);
    for (uint32_t m = 0; m < s->devices; ++m) {
      pthread_mutex_lock(&t->mutex);
      t->outstanding++;
      pthread_mutex_unlock(&t->mutex);
      pw_status_t status = pw_cts_backend_launch(s->backend, &t->launches[g][m]);
      t->records[g][m].accepted = status == NULL;
      if (status != NULL) {
        pw_status_free(status);
        pthread_mutex_lock(&t->mutex);
        t->outstanding--;
        pthread_mutex_unlock(&t->mutex);
      } else {
        atomic_fetch_add(&s->accepted, 1);
      }
    }
  }
  if (!stress_wait(t)) return false;
  for (uint32_t g = 0; g < s->gangs; ++g) {
    stress_check(t, g, pw_stress_collective(t, g));
  }
  return true;
}

static void* stress_main(void* arg) {
  stress_thread_t* t = arg;
  for (uint32_t r = 0; r < kRounds && atomic_load(&t->s->failures) == 0; ++r) {
    if (!stress_round(t, r)) {
      t->hung = true;
      break;
    }
  }
  return NULL;
}

void pw_cts_case_launch_stress(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t count = pw_cts_backend_device_count(&b);
  PW_CTS_ASSERT_GEQ(count, 1);
  stress_shared_t s;
  memset(&s, 0, sizeof(s));
  pthread_mutex_init(&s.failure_mutex, NULL);
  s.backend = &b;
  s.devices = count < kMaxDevices ? count : kMaxDevices;
  /* A queue-ordered backend holds at most |depth| launches per device:
   * stay within it over all threads, as the runtime does. */
  uint32_t depth = pw_cts_queue_depth(&b);
  s.ordered = depth != 0;
  s.gangs = kMaxGangs;
  if (depth != 0 && depth / kThreads < s.gangs) s.gangs = depth / kThreads;
  if (s.gangs == 0) s.gangs = 1;
  uint32_t threads_used = depth != 0 && depth < kThreads ? depth : kThreads;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &s.devices);
  s.copy = pw_cts_load(&b, f->copy_program, &mesh, kElements, 1, 1);
  if (f->all_reduce_program != NULL && s.devices >= 2) {
    s.all_reduce = pw_cts_load(&b, f->all_reduce_program, &mesh, kElements, 1, 1);
  }
  stress_thread_t* threads = calloc(kThreads, sizeof(*threads));
  PW_CTS_ASSERT_NOT_NULL(threads);
  pthread_t ids[kThreads];
  for (uint32_t i = 0; i < threads_used; ++i) {
    stress_thread_t* t = &threads[i];
    t->s = &s;
    t->index = i;
    pthread_mutex_init(&t->mutex, NULL);
    pthread_cond_init(&t->cond, NULL);
    /* Each thread's gangs use the devices in a different rotation. */
    for (uint32_t m = 0; m < s.devices; ++m) t->devices[m] = (m + i) % s.devices;
    for (uint32_t g = 0; g < s.gangs; ++g) {
      for (uint32_t m = 0; m < s.devices; ++m) {
        PW_CTS_OK(pw_cts_backend_allocate(&b, t->devices[m], kElements * sizeof(float),
                                          &t->inputs[g][m]));
        PW_CTS_OK(pw_cts_backend_allocate(&b, t->devices[m], kElements * sizeof(float),
                                          &t->outputs[g][m]));
      }
    }
  }
  for (uint32_t i = 0; i < threads_used; ++i) {
    PW_CTS_ASSERT_EQ(pthread_create(&ids[i], NULL, stress_main, &threads[i]), 0);
  }
  bool hung = false;
  for (uint32_t i = 0; i < threads_used; ++i) {
    pthread_join(ids[i], NULL);
    hung = hung || threads[i].hung;
  }
  /* A hung backend still holds pointers into |threads|: report, no teardown. */
  PW_CTS_ASSERT(!hung, "%s", s.first_failure);
  for (uint32_t i = 0; i < threads_used; ++i) {
    for (uint32_t g = 0; g < s.gangs; ++g) {
      for (uint32_t m = 0; m < s.devices; ++m) {
        pw_cts_backend_deallocate(&b, threads[i].devices[m], threads[i].inputs[g][m]);
        pw_cts_backend_deallocate(&b, threads[i].devices[m], threads[i].outputs[g][m]);
      }
    }
  }
  pw_cts_backend_unload(&b, s.copy);
  pw_cts_backend_unload(&b, s.all_reduce);
  pw_cts_destroy(&b);
  /* After destroy no done may still arrive: every accepted launch was
   * called back exactly once. */
  uint64_t accepted = atomic_load(&s.accepted);
  uint64_t calls = atomic_load(&s.done_calls);
  PW_CTS_ASSERT_EQ(atomic_load(&s.failures), 0, "%s", s.first_failure);
  PW_CTS_ASSERT_EQ(accepted, calls, "%llu launches accepted, %llu done calls",
                   (unsigned long long)accepted, (unsigned long long)calls);
  PW_CTS_ASSERT_GT(accepted, 0, "every launch was refused");
  for (uint32_t i = 0; i < threads_used; ++i) {
    pthread_mutex_destroy(&threads[i].mutex);
    pthread_cond_destroy(&threads[i].cond);
  }
  free(threads);
  pthread_mutex_destroy(&s.failure_mutex);
}
