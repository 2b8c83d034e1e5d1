/* Stress: several threads launch copy and all-reduce gangs concurrently on
 * a backend while faults are injected (Nth-launch failures, a device
 * flapping between FAILED and HEALTHY), and check the async contract:
 * a launch that returned an error never calls done; every other launch
 * calls done exactly once; nothing hangs. Runs against the test double in
 * threaded mode and, when it is built, the CPU backend.
 *
 * Usage: stress_cts_launch [milliseconds per backend, default 1500].
 * Plain executable (no Criterion) so that it runs under TSan too. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cts/double_backend.h"
#include "plugin/backend_call.h"
#ifdef PW_CTS_HAVE_CPU
#include "pathways/backends/cpu.h"
#endif

enum { kThreads = 4, kDevices = 4, kGangs = 6, kElements = 8 };

typedef struct stress_thread_t stress_thread_t;

typedef struct stress_record_t {
  stress_thread_t* owner;
  _Atomic uint32_t calls;
  _Atomic int code;
  bool accepted;
} stress_record_t;

typedef struct stress_backend_t {
  const char* name;
  pw_backend_t backend;
  pw_backend_executable_t copy;
  pw_backend_executable_t all_reduce;
  void (*set_health)(pw_backend_t* backend, uint32_t device, pw_device_health_t health);
  void (*inject)(pw_backend_t* backend, uint64_t round);
} stress_backend_t;

struct stress_thread_t {
  stress_backend_t* b;
  uint32_t index;
  uint64_t deadline_ns;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  uint32_t outstanding;
  uint32_t devices[kDevices];
  pw_backend_memory_t inputs[kGangs][kDevices];
  pw_backend_memory_t outputs[kGangs][kDevices];
  pw_backend_launch_t launches[kGangs][kDevices];
  stress_record_t records[kGangs][kDevices];
  uint64_t rounds;
  uint64_t launched;
  uint64_t refused;
  uint64_t completed_error;
};

static _Atomic uint64_t stress_failures;
static _Atomic uint64_t stress_done_calls;
static _Atomic uint64_t stress_accepted;

#define STRESS_FAIL(...)                      \
  do {                                        \
    fprintf(stderr, "stress_cts_launch: " __VA_ARGS__); \
    fputc('\n', stderr);                      \
    atomic_fetch_add(&stress_failures, 1);    \
  } while (0)

static uint64_t stress_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void stress_done(void* user, pw_status_t status) {
  stress_record_t* r = user;
  atomic_store(&r->code, (int)pw_status_code(status));
  pw_status_free(status);
  atomic_fetch_add(&r->calls, 1);
  atomic_fetch_add(&stress_done_calls, 1);
  stress_thread_t* t = r->owner;
  pthread_mutex_lock(&t->mutex);
  t->outstanding--;
  pthread_cond_broadcast(&t->cond);
  pthread_mutex_unlock(&t->mutex);
}

static bool stress_ok(pw_status_t status, const char* what) {
  if (status == NULL) return true;
  STRESS_FAIL("%s: %s", what, pw_status_message(status));
  pw_status_free(status);
  return false;
}

/* One round: kGangs gangs (alternately copy and all-reduce) over every
 * device, launched part by part, then wait and check. */
static void stress_round(stress_thread_t* t) {
  const pw_backend_t* b = &t->b->backend;
  float values[kElements];
  for (uint32_t g = 0; g < kGangs; ++g) {
    for (uint32_t m = 0; m < kDevices; ++m) {
      for (uint32_t i = 0; i < kElements; ++i) values[i] = (float)(t->index + g + m + i);
      stress_ok(pw__backend_copy_to_device(b, t->devices[m], t->inputs[g][m], 0, values,
                                           sizeof(values)),
                "copy_to_device");
    }
  }
  for (uint32_t g = 0; g < kGangs; ++g) {
    bool collective = g % 2 == 1;
    uint64_t gang_id = ((uint64_t)t->index << 48) | (t->rounds * kGangs + g + 1);
    for (uint32_t m = 0; m < kDevices; ++m) {
      stress_record_t* r = &t->records[g][m];
      r->owner = t;
      atomic_store(&r->calls, 0);
      atomic_store(&r->code, -1);
      pw_backend_launch_t* l = &t->launches[g][m];
      memset(l, 0, sizeof(*l));
      l->struct_size = sizeof(*l);
      l->executable = collective ? t->b->all_reduce : t->b->copy;
      l->device = t->devices[m];
      l->mesh_index = m;
      l->group_devices = t->devices;
      l->group_size = kDevices;
      l->gang_id = gang_id;
      l->inputs = &t->inputs[g][m];
      l->input_count = 1;
      l->outputs = &t->outputs[g][m];
      l->output_count = 1;
      l->done = stress_done;
      l->done_user = r;
    }
    for (uint32_t m = 0; m < kDevices; ++m) {
      pthread_mutex_lock(&t->mutex);
      t->outstanding++;
      pthread_mutex_unlock(&t->mutex);
      pw_status_t status = pw__backend_launch(b, &t->launches[g][m]);
      t->records[g][m].accepted = status == NULL;
      t->launched++;
      if (status != NULL) {
        t->refused++;
        pw_status_free(status);
        pthread_mutex_lock(&t->mutex);
        t->outstanding--;
        pthread_mutex_unlock(&t->mutex);
      } else {
        atomic_fetch_add(&stress_accepted, 1);
      }
    }
  }
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 60;
  pthread_mutex_lock(&t->mutex);
  int rc = 0;
  while (t->outstanding != 0 && rc != ETIMEDOUT) {
    rc = pthread_cond_timedwait(&t->cond, &t->mutex, &deadline);
  }
  uint32_t left = t->outstanding;
  pthread_mutex_unlock(&t->mutex);
  if (left != 0) {
    STRESS_FAIL("%s thread %u: %u launches never completed (hang)", t->b->name, t->index, left);
    exit(1); /* the backend still holds pointers into |t| */
  }
  for (uint32_t g = 0; g < kGangs; ++g) {
    bool all_ok = true;
    for (uint32_t m = 0; m < kDevices; ++m) {
      stress_record_t* r = &t->records[g][m];
      uint32_t calls = atomic_load(&r->calls);
      if (calls != (r->accepted ? 1u : 0u)) {
        STRESS_FAIL("%s: gang part %u/%u %s launch had %u done calls", t->b->name, g, m,
                    r->accepted ? "accepted" : "refused", calls);
      }
      all_ok = all_ok && r->accepted && atomic_load(&r->code) == PW_STATUS_OK;
      if (r->accepted && atomic_load(&r->code) != PW_STATUS_OK) t->completed_error++;
    }
    if (!all_ok) continue;
    for (uint32_t m = 0; m < kDevices; ++m) {
      stress_ok(pw__backend_copy_to_host(b, t->devices[m], t->outputs[g][m], 0, values,
                                         sizeof(values)),
                "copy_to_host");
      for (uint32_t i = 0; i < kElements; ++i) {
        float want = g % 2 == 0 ? (float)(t->index + g + m + i)
                                : (float)(kDevices * (t->index + g + i)) + 6.0f;
        if (values[i] != want) {
          STRESS_FAIL("%s: gang %u part %u element %u is %g, expected %g", t->b->name, g, m, i,
                      (double)values[i], (double)want);
          break;
        }
      }
    }
  }
  t->rounds++;
}

static void* stress_thread_main(void* arg) {
  stress_thread_t* t = arg;
  while (stress_now_ns() < t->deadline_ns && atomic_load(&stress_failures) == 0) {
    /* Thread 0 injects faults between its rounds; the others run on. */
    if (t->index == 0 && t->b->inject != NULL) t->b->inject(&t->b->backend, t->rounds);
    stress_round(t);
  }
  return NULL;
}

static pw_backend_executable_t stress_load(const pw_backend_t* b, const char* text) {
  uint32_t n = kDevices;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &n);
  void* bytes = NULL;
  size_t size = 0;
  pw_backend_executable_t e = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  if (!stress_ok(pw__backend_compile(b, text, strlen(text), &mesh, NULL, pw_allocator_system(),
                                     &bytes, &size),
                 "compile")) {
    return NULL;
  }
  stress_ok(pw__backend_load(b, bytes, size, &e, &sig), "load");
  pw_allocator_free(pw_allocator_system(), bytes, size);
  return e;
}

static void stress_run(stress_backend_t* sb, const char* copy, const char* all_reduce,
                       uint64_t duration_ns) {
  const pw_backend_t* b = &sb->backend;
  sb->copy = stress_load(b, copy);
  sb->all_reduce = stress_load(b, all_reduce);
  if (sb->copy == NULL || sb->all_reduce == NULL) {
    pw__backend_unload(b, sb->copy);
    pw__backend_unload(b, sb->all_reduce);
    pw__backend_destroy(b);
    return;
  }
  stress_thread_t* threads = calloc(kThreads, sizeof(*threads));
  pthread_t ids[kThreads];
  uint64_t deadline = stress_now_ns() + duration_ns;
  for (uint32_t i = 0; i < kThreads; ++i) {
    stress_thread_t* t = &threads[i];
    t->b = sb;
    t->index = i;
    t->deadline_ns = deadline;
    pthread_mutex_init(&t->mutex, NULL);
    pthread_cond_init(&t->cond, NULL);
    /* Each thread's gangs use the devices in a different rotation. */
    for (uint32_t m = 0; m < kDevices; ++m) t->devices[m] = (m + i) % kDevices;
    for (uint32_t g = 0; g < kGangs; ++g) {
      for (uint32_t m = 0; m < kDevices; ++m) {
        stress_ok(pw__backend_allocate(b, t->devices[m], kElements * sizeof(float),
                                       &t->inputs[g][m]), "allocate");
        stress_ok(pw__backend_allocate(b, t->devices[m], kElements * sizeof(float),
                                       &t->outputs[g][m]), "allocate");
      }
    }
  }
  for (uint32_t i = 0; i < kThreads; ++i) pthread_create(&ids[i], NULL, stress_thread_main, &threads[i]);
  uint64_t rounds = 0, launched = 0, refused = 0, errors = 0;
  for (uint32_t i = 0; i < kThreads; ++i) {
    pthread_join(ids[i], NULL);
    stress_thread_t* t = &threads[i];
    rounds += t->rounds;
    launched += t->launched;
    refused += t->refused;
    errors += t->completed_error;
    for (uint32_t g = 0; g < kGangs; ++g) {
      for (uint32_t m = 0; m < kDevices; ++m) {
        pw__backend_deallocate(b, t->devices[m], t->inputs[g][m]);
        pw__backend_deallocate(b, t->devices[m], t->outputs[g][m]);
      }
    }
  }
  pw__backend_unload(b, sb->copy);
  pw__backend_unload(b, sb->all_reduce);
  pw__backend_destroy(b);
  /* After destroy (which joins the backend's threads) no done call may
   * still arrive: every accepted launch was called back exactly once. */
  uint64_t accepted = atomic_exchange(&stress_accepted, 0);
  uint64_t calls = atomic_exchange(&stress_done_calls, 0);
  if (accepted != calls) {
    STRESS_FAIL("%s: %llu launches accepted, %llu done calls", sb->name,
                (unsigned long long)accepted, (unsigned long long)calls);
  }
  for (uint32_t i = 0; i < kThreads; ++i) {
    pthread_mutex_destroy(&threads[i].mutex);
    pthread_cond_destroy(&threads[i].cond);
  }
  free(threads);
  printf("%s: %llu rounds, %llu launches (%llu refused, %llu completed with an error)\n",
         sb->name, (unsigned long long)rounds, (unsigned long long)launched,
         (unsigned long long)refused, (unsigned long long)errors);
}

static void stress_double_inject(pw_backend_t* backend, uint64_t round) {
  pw_double_backend_t* d = pw_double_backend_from(backend);
  pw_double_backend_fail_launch(d, 1 + round % 13, PW_STATUS_ABORTED,
                                round % 2 ? PW_DOUBLE_FAIL_AT_LAUNCH
                                          : PW_DOUBLE_FAIL_AT_COMPLETION);
  pw_double_backend_set_health(d, kDevices - 1,
                               round % 4 == 1 ? PW_DEVICE_FAILED : PW_DEVICE_HEALTHY);
}

#ifdef PW_CTS_HAVE_CPU
static void stress_cpu_inject(pw_backend_t* backend, uint64_t round) {
  pw_status_ignore(pw_cpu_backend_set_health(
      *backend, kDevices - 1, round % 4 == 1 ? PW_DEVICE_FAILED : PW_DEVICE_HEALTHY));
}
#endif

int main(int argc, char** argv) {
  uint64_t ms = argc > 1 ? strtoull(argv[1], NULL, 10) : 1500;
  uint64_t duration = ms * 1000000ull;

  pw_double_options_t options;
  pw_double_options_init(&options);
  options.device_count = kDevices;
  options.completion = PW_DOUBLE_COMPLETE_THREADED;
  options.worker_count = 2;
  options.failed_device_mode = PW_DOUBLE_FAIL_AT_COMPLETION;
  stress_backend_t dbl = {.name = "double-threaded", .inject = stress_double_inject};
  if (!stress_ok(pw_double_backend_create(&options, &dbl.backend), "double create")) return 1;
  stress_run(&dbl, "copy\ninput f32[8] replicated\noutput f32[8] replicated\n",
             "all_reduce_sum\ninput f32[8] replicated\noutput f32[8] replicated\n", duration);

  options.completion = PW_DOUBLE_COMPLETE_INLINE;
  options.failed_device_mode = PW_DOUBLE_FAIL_AT_LAUNCH;
  stress_backend_t inl = {.name = "double-inline", .inject = stress_double_inject};
  if (!stress_ok(pw_double_backend_create(&options, &inl.backend), "double create")) return 1;
  stress_run(&inl, "copy\ninput f32[8] replicated\noutput f32[8] replicated\n",
             "all_reduce_sum\ninput f32[8] replicated\noutput f32[8] replicated\n",
             duration / 2);

#ifdef PW_CTS_HAVE_CPU
  pw_cpu_backend_options_t cpu_options;
  pw_cpu_backend_options_init(&cpu_options);
  cpu_options.device_count = kDevices;
  cpu_options.worker_count = 2;
  stress_backend_t cpu = {.name = "cpu", .inject = stress_cpu_inject};
  if (!stress_ok(pw_cpu_backend_create(&cpu_options, &cpu.backend), "cpu create")) return 1;
  stress_run(&cpu, "kernel copy\ninput f32[32] split(0,all)\noutput f32[32] split(0,all)\n",
             "kernel all_reduce_sum\ninput f32[4,8] split(0,all)\noutput f32[8] replicated\n",
             duration);
#else
  printf("cpu: not built yet, skipped\n");
#endif

  uint64_t failures = atomic_load(&stress_failures);
  if (failures != 0) {
    fprintf(stderr, "stress_cts_launch: %llu failures\n", (unsigned long long)failures);
    return 1;
  }
  printf("stress_cts_launch: OK\n");
  return 0;
}
