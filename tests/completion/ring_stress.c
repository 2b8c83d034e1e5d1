/* Stress: P producers x C consumers push and pop a million items through
 * SPSC, MPSC and MPMC rings (small rings, so full and empty are hit all the
 * time). Checks that every item is popped exactly once, that the sum of
 * what came out equals the sum of what went in, and that each consumer
 * sees each producer's items in the order they were pushed.
 *
 * Plain main(), not Criterion, so it runs under TSan too.
 * Usage: stress_queue_ring [percent]   (default 100: 1e6 items a config)
 * Prints one summary line; exits non-zero on any violation. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pathways/clock.h"
#include "completion/ring.h"

enum { kMaxThreads = 8, kBatch = 32 };

typedef struct config_t {
  const char* label;
  pw_ring_kind_t kind;
  int producers;
  int consumers;
  bool batch; /* SPSC batch operations */
  size_t capacity;
} config_t;

typedef struct consumer_state_t {
  uint8_t* seen;       /* per item index: times this consumer popped it */
  uint64_t* last;      /* per producer: last sequence number + 1 seen */
  uint64_t sum;
  uint64_t count;
  uint64_t order_violations;
} consumer_state_t;

typedef struct shared_t {
  const config_t* config;
  pw_ring_t* ring;
  size_t per_producer;
  atomic_int producers_done;
  pthread_barrier_t start;
  consumer_state_t consumers[kMaxThreads];
  atomic_int ids; /* producers take 0..P-1, then consumers P..P+C-1 */
} shared_t;

/* Item = index + 1 (never NULL); index = producer * per_producer + seq. */
static void* encode(const shared_t* s, int producer, size_t seq) {
  return (void*)(uintptr_t)((size_t)producer * s->per_producer + seq + 1);
}

static bool push_one(shared_t* s, void* item) {
  switch (s->config->kind) {
    case PW_RING_SPSC: return pw_ring_push_spsc(s->ring, item);
    case PW_RING_MPSC: return pw_ring_push_mpsc(s->ring, item);
    case PW_RING_MPMC: return pw_ring_push_mpmc(s->ring, item);
  }
  return false;
}

static size_t pop_some(shared_t* s, void** out) {
  switch (s->config->kind) {
    case PW_RING_SPSC:
      if (s->config->batch) return pw_ring_pop_batch_spsc(s->ring, out, kBatch);
      return pw_ring_pop_spsc(s->ring, out) ? 1 : 0;
    case PW_RING_MPSC: return pw_ring_pop_mpsc(s->ring, out) ? 1 : 0;
    case PW_RING_MPMC: return pw_ring_pop_mpmc(s->ring, out) ? 1 : 0;
  }
  return 0;
}

static void* producer_main(void* arg) {
  shared_t* s = arg;
  int id = atomic_fetch_add(&s->ids, 1);
  pthread_barrier_wait(&s->start);
  size_t seq = 0;
  void* batch[kBatch];
  while (seq < s->per_producer) {
    if (s->config->batch) {
      size_t n = 0;
      while (n < kBatch && seq + n < s->per_producer) {
        batch[n] = encode(s, id, seq + n);
        ++n;
      }
      size_t pushed = pw_ring_push_batch_spsc(s->ring, batch, n);
      seq += pushed;
      if (pushed == 0) sched_yield();
    } else if (push_one(s, encode(s, id, seq))) {
      ++seq;
    } else {
      sched_yield(); /* full: back-pressure */
    }
  }
  atomic_fetch_add(&s->producers_done, 1);
  return NULL;
}

static void consume(shared_t* s, consumer_state_t* c, void* item) {
  size_t index = (size_t)(uintptr_t)item - 1;
  size_t producer = index / s->per_producer;
  uint64_t seq = index % s->per_producer;
  c->seen[index]++;
  c->sum += (uint64_t)index;
  c->count++;
  if (seq + 1 <= c->last[producer]) c->order_violations++;
  c->last[producer] = seq + 1;
}

static void* consumer_main(void* arg) {
  shared_t* s = arg;
  int id = atomic_fetch_add(&s->ids, 1) - s->config->producers;
  consumer_state_t* c = &s->consumers[id];
  pthread_barrier_wait(&s->start);
  void* out[kBatch];
  for (;;) {
    size_t n = pop_some(s, out);
    if (n == 0) {
      /* Everything pushed before producers_done was published; one more
       * pop after seeing it decides between "empty" and "not yet". */
      if (atomic_load(&s->producers_done) == s->config->producers) {
        n = pop_some(s, out);
        if (n == 0) break;
      } else {
        sched_yield();
        continue;
      }
    }
    for (size_t i = 0; i < n; ++i) consume(s, c, out[i]);
  }
  return NULL;
}

/* Runs one configuration; returns the number of violations. */
static int run_config(const config_t* config, size_t items, double* out_ns) {
  shared_t s;
  memset(&s, 0, sizeof(s));
  s.config = config;
  s.per_producer = items / (size_t)config->producers;
  size_t total = s.per_producer * (size_t)config->producers;
  pw_status_t status = pw_ring_create(pw_allocator_system(), config->kind,
                                      config->label, config->capacity, &s.ring);
  if (status != NULL) {
    fprintf(stderr, "%s: %s\n", config->label, pw_status_message(status));
    pw_status_free(status);
    return 1;
  }
  for (int i = 0; i < config->consumers; ++i) {
    s.consumers[i].seen = calloc(total, 1);
    s.consumers[i].last = calloc((size_t)config->producers, sizeof(uint64_t));
  }
  int threads = config->producers + config->consumers;
  pthread_barrier_init(&s.start, NULL, (unsigned)threads + 1);
  pthread_t tids[2 * kMaxThreads];
  for (int i = 0; i < config->producers; ++i) {
    pthread_create(&tids[i], NULL, producer_main, &s);
  }
  /* Consumers take ids after every producer has taken its own. */
  while (atomic_load(&s.ids) < config->producers) sched_yield();
  for (int i = 0; i < config->consumers; ++i) {
    pthread_create(&tids[config->producers + i], NULL, consumer_main, &s);
  }
  pthread_barrier_wait(&s.start);
  pw_time_t t0 = pw_clock_now();
  for (int i = 0; i < threads; ++i) pthread_join(tids[i], NULL);
  *out_ns = (double)(pw_clock_now() - t0) / (double)total;

  int violations = 0;
  uint64_t count = 0, sum = 0, order = 0;
  for (int i = 0; i < config->consumers; ++i) {
    count += s.consumers[i].count;
    sum += s.consumers[i].sum;
    order += s.consumers[i].order_violations;
  }
  size_t missing = 0, duplicated = 0;
  for (size_t index = 0; index < total; ++index) {
    unsigned times = 0;
    for (int i = 0; i < config->consumers; ++i) times += s.consumers[i].seen[index];
    if (times == 0) ++missing;
    if (times > 1) ++duplicated;
  }
  uint64_t want_sum = (uint64_t)total * (total - 1) / 2;
  if (missing || duplicated || count != total || sum != want_sum || order ||
      pw_ring_size_approx(s.ring) != 0) {
    fprintf(stderr,
            "%s: VIOLATION: %zu items, popped %llu, missing %zu, duplicated %zu, "
            "sum %llu (want %llu), %llu out of order\n",
            config->label, total, (unsigned long long)count, missing, duplicated,
            (unsigned long long)sum, (unsigned long long)want_sum,
            (unsigned long long)order);
    violations = 1;
  }
  for (int i = 0; i < config->consumers; ++i) {
    free(s.consumers[i].seen);
    free(s.consumers[i].last);
  }
  pthread_barrier_destroy(&s.start);
  pw_ring_destroy(s.ring);
  return violations;
}

int main(int argc, char** argv) {
  long percent = argc > 1 ? strtol(argv[1], NULL, 10) : 100;
  if (percent <= 0) percent = 100;
  size_t items = (size_t)(1000000 * percent / 100);
  alarm(300); /* a hang is a failure, not a stuck CI job */

  static const config_t configs[] = {
      {"spsc 1x1", PW_RING_SPSC, 1, 1, false, 256},
      {"spsc 1x1 batch", PW_RING_SPSC, 1, 1, true, 256},
      {"mpsc 4x1", PW_RING_MPSC, 4, 1, false, 64},
      {"mpmc 1x1", PW_RING_MPMC, 1, 1, false, 256},
      {"mpmc 2x2", PW_RING_MPMC, 2, 2, false, 64},
      {"mpmc 4x4", PW_RING_MPMC, 4, 4, false, 16},
  };
  size_t config_count = sizeof(configs) / sizeof(configs[0]);
  int violations = 0;
  char summary[512];
  size_t used = 0;
  for (size_t i = 0; i < config_count; ++i) {
    double ns = 0;
    violations += run_config(&configs[i], items, &ns);
    used += (size_t)snprintf(summary + used, sizeof(summary) - used, "%s%s %.1f",
                             i ? ", " : "", configs[i].label, ns);
  }
  printf("ring stress (%s): %zu configs x %zu items, each popped once, in "
         "order per producer; ns/item: %s: %s\n",
#if defined(PW_ATOMICS_C11)
         "C11 atomics",
#else
         "ck_pr",
#endif
         config_count, items, summary, violations ? "FAILED" : "OK");
  return violations ? 1 : 0;
}
