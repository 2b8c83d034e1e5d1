/* Stress: backend-like producer threads post completion records to one
 * observer thread through a pw_completion_queue_t, which sleeps in
 * pw_completion_queue_wait between bursts. Checks that every record is
 * drained exactly once and in per-producer order, with and without batch
 * posts, and reports the observed cost per record (1 -> 1 is the benchmark
 * case: one producer, one observer).
 *
 * Plain main(), not Criterion, so it runs under TSan too.
 * Usage: stress_queue_completion_queue [percent]   (default 100: 1e6 records
 * a configuration). Prints one summary line; exits non-zero on violation. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "completion/completion.h"
#include "pathways/clock.h"

enum { kMaxProducers = 4, kPostBatch = 64, kDrain = 256 };

typedef struct config_t {
  const char* label;
  int producers;
  bool batch;
  size_t capacity;
} config_t;

typedef struct shared_t {
  const config_t* config;
  pw_completion_queue_t* queue;
  size_t per_producer;
  atomic_int next_id;
  atomic_int done;
  pthread_barrier_t start;
} shared_t;

static void* record(size_t producer, size_t seq) {
  return (void*)(uintptr_t)(((uint64_t)producer << 40) | (uint64_t)(seq + 1));
}

static void* producer_main(void* arg) {
  shared_t* s = arg;
  int id = atomic_fetch_add(&s->next_id, 1);
  pw_completion_producer_t* p = pw_completion_queue_producer(s->queue, (size_t)id);
  pthread_barrier_wait(&s->start);
  void* batch[kPostBatch];
  size_t seq = 0;
  while (seq < s->per_producer) {
    size_t posted;
    if (s->config->batch) {
      size_t n = 0;
      while (n < kPostBatch && seq + n < s->per_producer) {
        batch[n] = record((size_t)id, seq + n);
        ++n;
      }
      posted = pw_completion_producer_post_batch(p, batch, n);
    } else {
      /* One post per record, a flush per 64: the backend's reaping loop. */
      posted = 0;
      while (posted < kPostBatch && seq + posted < s->per_producer &&
             pw_completion_producer_post(p, record((size_t)id, seq + posted))) {
        ++posted;
      }
    }
    seq += posted;
    pw_completion_producer_flush(p);
    if (posted == 0) sched_yield(); /* full: the observer is behind */
  }
  atomic_fetch_add(&s->done, 1);
  pw_completion_queue_wake(s->queue); /* so the observer's last wait ends */
  return NULL;
}

static int run_config(const config_t* config, size_t items, double* out_ns) {
  shared_t s;
  memset(&s, 0, sizeof(s));
  s.config = config;
  s.per_producer = items / (size_t)config->producers;
  pw_status_t status = pw_completion_queue_create(
      pw_allocator_system(), config->label, (size_t)config->producers,
      config->capacity, &s.queue);
  if (status != NULL) {
    fprintf(stderr, "%s: %s\n", config->label, pw_status_message(status));
    pw_status_free(status);
    return 1;
  }
  pthread_barrier_init(&s.start, NULL, (unsigned)config->producers + 1);
  pthread_t threads[kMaxProducers];
  for (int i = 0; i < config->producers; ++i) {
    pthread_create(&threads[i], NULL, producer_main, &s);
  }
  size_t next[kMaxProducers] = {0};
  size_t total = 0, bad = 0;
  void* out[kDrain];
  pthread_barrier_wait(&s.start);
  pw_time_t t0 = pw_clock_now();
  for (;;) {
    /* Read before draining: once every producer is done, an empty drain
     * means everything was drained. */
    bool finished = atomic_load(&s.done) == config->producers;
    size_t n = pw_completion_queue_drain(s.queue, out, kDrain);
    for (size_t i = 0; i < n; ++i) {
      uint64_t v = (uint64_t)(uintptr_t)out[i];
      size_t producer = (size_t)(v >> 40);
      size_t seq = (size_t)(v & ((1ull << 40) - 1)) - 1;
      if (producer >= (size_t)config->producers || seq != next[producer]) {
        ++bad;
      } else {
        next[producer]++;
      }
    }
    total += n;
    if (n > 0) continue;
    if (finished) break;
    /* A bounded wait: the flushes wake us; the deadline only guards. */
    pw_completion_queue_wait(s.queue, pw_deadline_from_timeout(100 * 1000 * 1000));
  }
  *out_ns = (double)(pw_clock_now() - t0) / (double)(total ? total : 1);
  for (int i = 0; i < config->producers; ++i) pthread_join(threads[i], NULL);
  size_t want = s.per_producer * (size_t)config->producers;
  int violations = 0;
  if (bad || total != want) {
    fprintf(stderr, "%s: VIOLATION: drained %zu of %zu, %zu out of order or unknown\n",
            config->label, total, want, bad);
    violations = 1;
  }
  pthread_barrier_destroy(&s.start);
  pw_completion_queue_destroy(s.queue);
  return violations;
}

int main(int argc, char** argv) {
  long percent = argc > 1 ? strtol(argv[1], NULL, 10) : 100;
  if (percent <= 0) percent = 100;
  size_t items = (size_t)(1000000 * percent / 100);
  alarm(300); /* a hang is a failure */
  static const config_t configs[] = {
      {"1->1", 1, false, 1024},
      {"1->1 batch", 1, true, 1024},
      {"3->1", 3, false, 256},
      {"4->1 batch", 4, true, 64},
  };
  size_t count = sizeof(configs) / sizeof(configs[0]);
  int violations = 0;
  char summary[256];
  size_t used = 0;
  for (size_t i = 0; i < count; ++i) {
    double ns = 0;
    violations += run_config(&configs[i], items, &ns);
    used += (size_t)snprintf(summary + used, sizeof(summary) - used, "%s%s %.1f",
                             i ? ", " : "", configs[i].label, ns);
  }
  printf("completion queue stress: %zu configs x %zu records, each drained once "
         "in producer order; ns/record: %s: %s\n",
         count, items, summary, violations ? "FAILED" : "OK");
  return violations ? 1 : 0;
}
