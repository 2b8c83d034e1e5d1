/* Stress for the inproc transport, a plain executable so that it also
 * runs under ThreadSanitizer: several threads issue copies between CPU
 * backends (host pointers, one side, staging) on a pool of workers, some
 * from inside done callbacks; every copy completes exactly once with the
 * right bytes.
 *
 * Usage: stress_inproc_transport [copies per thread] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pathways/backends/cpu.h"
#include "pathways/transports/inproc.h"

#define CHECK(cond, ...)                                       \
  do {                                                         \
    if (!(cond)) {                                             \
      fprintf(stderr, "stress_inproc_transport: " __VA_ARGS__); \
      fprintf(stderr, "\n");                                   \
      abort();                                                 \
    }                                                          \
  } while (0)

static void check_ok(pw_status_t status, const char* what) {
  CHECK(status == NULL, "%s: %s", what, pw_status_message(status));
}

enum { kThreads = 3, kSlot = 48 };

typedef struct stress_t {
  pw_transport_t transport;
  pw_backend_t backends[2];      /* a CPU backend, and the same without host pointers */
  pw_backend_vtable_t shim;
  pw_backend_memory_t src;       /* on backends[0] device 0 */
  pw_backend_memory_t dst[kThreads]; /* per thread, on backends[t % 2] device 1 */
  long copies;
  _Atomic long completed;
  _Atomic long errors;
} stress_t;

typedef struct job_t {
  stress_t* s;
  uint32_t thread;
  long index;
  bool again; /* issue one more copy from done */
} job_t;

static void stress_done(void* user, pw_status_t status);

static pw_status_t stress_issue(stress_t* s, job_t* job) {
  uint32_t t = job->thread;
  /* Sources are shared (reads only); every copy has its own destination. */
  size_t slot = (size_t)(job->index % 64);
  pw_transport_copy_t c;
  memset(&c, 0, sizeof(c));
  c.struct_size = sizeof(c);
  c.src = (pw_transport_endpoint_t){&s->backends[0], 0, s->src, slot * kSlot};
  c.dst = (pw_transport_endpoint_t){&s->backends[t % 2], 1, s->dst[t],
                                    (size_t)job->index * kSlot};
  c.size = kSlot;
  c.done = stress_done;
  c.done_user = job;
  c.tag = (uint64_t)t << 32 | (uint64_t)job->index;
  return s->transport.vtable->copy(s->transport.self, &c);
}

static void stress_done(void* user, pw_status_t status) {
  job_t* job = user;
  if (status != NULL) atomic_fetch_add(&job->s->errors, 1);
  pw_status_free(status);
  atomic_fetch_add(&job->s->completed, 1);
  if (job->again) {
    job->again = false;
    job_t* next = job + 1; /* the caller reserved it */
    check_ok(stress_issue(job->s, next), "copy from done");
  }
}

typedef struct thread_arg_t {
  stress_t* s;
  uint32_t thread;
  job_t* jobs;
} thread_arg_t;

static void* stress_thread(void* p) {
  thread_arg_t* a = p;
  for (long i = 0; i < a->s->copies; i += 2) {
    job_t* job = &a->jobs[i];
    *job = (job_t){a->s, a->thread, i, true};
    a->jobs[i + 1] = (job_t){a->s, a->thread, i + 1, false};
    check_ok(stress_issue(a->s, job), "copy");
  }
  return NULL;
}

int main(int argc, char** argv) {
  long copies = argc > 1 ? strtol(argv[1], NULL, 10) : 2000;
  if (copies < 2) copies = 2;
  copies += copies % 2;
  stress_t s;
  memset(&s, 0, sizeof(s));
  s.copies = copies;
  pw_cpu_backend_options_t co;
  pw_cpu_backend_options_init(&co);
  co.device_count = 2;
  co.worker_count = 1;
  check_ok(pw_cpu_backend_create(&co, &s.backends[0]), "cpu backend");
  check_ok(pw_cpu_backend_create(&co, &s.backends[1]), "cpu backend");
  s.shim = *s.backends[1].vtable;
  s.shim.host_pointer = NULL;
  s.backends[1].vtable = &s.shim;
  pw_inproc_transport_options_t o;
  pw_inproc_transport_options_init(&o);
  o.worker_count = 2;
  o.staging_bytes = 16;
  check_ok(pw_inproc_transport_create(&o, &s.transport), "transport");
  size_t bytes = 64 * kSlot;
  size_t dst_bytes = (size_t)copies * kSlot;
  check_ok(s.backends[0].vtable->allocate(s.backends[0].self, 0, bytes, &s.src), "allocate");
  unsigned char* pattern = malloc(bytes);
  for (size_t i = 0; i < bytes; ++i) pattern[i] = (unsigned char)(i * 7 + 3);
  check_ok(s.backends[0].vtable->copy_to_device(s.backends[0].self, 0, s.src, 0, pattern, bytes),
           "fill");
  for (uint32_t t = 0; t < kThreads; ++t) {
    pw_backend_t* b = &s.backends[t % 2];
    check_ok(b->vtable->allocate(b->self, 1, dst_bytes, &s.dst[t]), "allocate");
  }
  pthread_t ids[kThreads];
  thread_arg_t args[kThreads];
  for (uint32_t t = 0; t < kThreads; ++t) {
    args[t] = (thread_arg_t){&s, t, calloc((size_t)copies, sizeof(job_t))};
    pthread_create(&ids[t], NULL, stress_thread, &args[t]);
  }
  for (uint32_t t = 0; t < kThreads; ++t) pthread_join(ids[t], NULL);
  s.transport.vtable->destroy(s.transport.self); /* drains */
  CHECK(atomic_load(&s.completed) == kThreads * copies, "%ld of %ld copies completed",
        atomic_load(&s.completed), kThreads * copies);
  CHECK(atomic_load(&s.errors) == 0, "%ld copies failed", atomic_load(&s.errors));
  unsigned char* got = malloc(dst_bytes);
  for (uint32_t t = 0; t < kThreads; ++t) {
    pw_backend_t* b = &s.backends[t % 2];
    check_ok(b->vtable->copy_to_host(b->self, 1, s.dst[t], 0, got, dst_bytes), "read back");
    for (long i = 0; i < copies; ++i) {
      CHECK(memcmp(got + i * kSlot, pattern + (i % 64) * kSlot, kSlot) == 0,
            "thread %u copy %ld: wrong bytes", t, i);
    }
    b->vtable->deallocate(b->self, 1, s.dst[t]);
    free(args[t].jobs);
  }
  s.backends[0].vtable->deallocate(s.backends[0].self, 0, s.src);
  s.backends[0].vtable->destroy(s.backends[0].self);
  s.backends[1].vtable->destroy(s.backends[1].self);
  free(pattern);
  free(got);
  printf("stress_inproc_transport: %ld copies OK\n", kThreads * copies);
  return 0;
}
