/* Stress: producers complete, consumers wait.
 *
 * Events are made in batches. For every event of a batch, kProducers
 * threads race to complete it (exactly one must win, the others get
 * FAILED_PRECONDITION and must then see it ready), one of kConsumers threads
 * waits on it with pw_event_wait, and one on_ready callback registered
 * beforehand counts it. Producers do a little work before each completion,
 * so consumers usually get there first and park: a lost wake-up shows as a
 * wait that reaches its (10 s) deadline. Every completion must be observed
 * exactly once by its consumer and by its callback, with the right status,
 * and the counting allocator must end with nothing live.
 *
 * Usage: stress_event_wait [events]   (default 1000000)
 * Prints one summary line; exits non-zero on any violation. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event/event_internal.h"
#include "pathways/pathways.h"
#include "support/test_allocators.h"

enum { kBatch = 4096, kProducers = 2, kConsumers = 2, kProducerDelay = 200 };

typedef struct stress_t {
  pw_test_allocator_t counting;
  pw_event_t* events[kBatch];
  atomic_int callbacks[kBatch];
  atomic_int observed[kBatch];
  atomic_int winners[kBatch];
  size_t base; /* global index of events[0] */
  size_t size; /* events in the current batch */
  pthread_barrier_t start;
  pthread_barrier_t end;
  atomic_bool stop;
  atomic_size_t violations;
  atomic_size_t rejected;  /* losing completions (FAILED_PRECONDITION) */
  atomic_size_t blocked;   /* waits that began before completion */
  atomic_size_t woke;      /* completions that found a parked waiter */
} stress_t;

static stress_t g;

static void violation(const char* what, size_t index) {
  if (atomic_fetch_add(&g.violations, 1) < 10) {
    fprintf(stderr, "stress_event_wait: VIOLATION at event %zu: %s\n", index,
            what);
  }
}

/* Every fifth event fails, with a message that names it. */
static bool should_fail(size_t global) { return global % 5 == 3; }

static bool status_matches(pw_status_t s, size_t global) {
  if (!should_fail(global)) return s == NULL;
  char want[48];
  snprintf(want, sizeof(want), "event %zu", global);
  return pw_status_code(s) == PW_STATUS_DATA_LOSS &&
         strcmp(pw_status_message(s), want) == 0;
}

static void delay(unsigned n) {
  for (volatile unsigned k = 0; k < n; ++k) {
  }
}

static void on_ready_cb(void* user, pw_status_t status) {
  size_t i = (size_t)(uintptr_t)user;
  if (!status_matches(status, g.base + i)) violation("callback status", i);
  atomic_fetch_add(&g.callbacks[i], 1);
  pw_status_free(status);
}

static void produce(size_t p) {
  for (size_t i = 0; i < g.size; ++i) {
    /* Every 16th event comes late enough for its waiter to park. */
    delay(kProducerDelay + (unsigned)(p * 37) + (i % 16 == 0 ? 20000u : 0u));
    pw_event_t* ev = g.events[i];
    if (pw__event_parked_waiters(ev) > 0) atomic_fetch_add(&g.woke, 1);
    size_t global = g.base + i;
    pw_status_t s =
        should_fail(global)
            ? pw_event_fail(ev, pw_status_make(PW_STATUS_DATA_LOSS,
                                               "event %zu", global))
            : pw_event_signal(ev);
    if (s == NULL) {
      atomic_fetch_add(&g.winners[i], 1);
    } else if (pw_status_code(s) == PW_STATUS_FAILED_PRECONDITION) {
      atomic_fetch_add(&g.rejected, 1);
      if (!pw_event_is_ready(ev)) violation("rejected but not ready", i);
    } else {
      violation(pw_status_message(s), i);
    }
    pw_status_free(s);
  }
}

static void consume(size_t c) {
  for (size_t i = c; i < g.size; i += kConsumers) {
    pw_event_t* ev = g.events[i];
    if (!pw_event_is_ready(ev)) atomic_fetch_add(&g.blocked, 1);
    pw_status_t s = pw_event_wait(ev, pw_deadline_from_timeout(10000000000LL));
    if (pw_status_code(s) == PW_STATUS_DEADLINE_EXCEEDED) {
      violation("wait hit its deadline: lost wake-up", i);
    } else if (!status_matches(s, g.base + i)) {
      violation("wait status", i);
    }
    pw_status_free(s);
    atomic_fetch_add(&g.observed[i], 1);
  }
}

typedef struct role_t {
  bool producer;
  size_t index;
} role_t;

static void* worker_main(void* arg) {
  role_t* role = arg;
  for (;;) {
    pthread_barrier_wait(&g.start);
    if (atomic_load(&g.stop)) return NULL;
    if (role->producer) {
      produce(role->index);
    } else {
      consume(role->index);
    }
    pthread_barrier_wait(&g.end);
  }
}

static void run_batch(void) {
  pw_allocator_t allocator = pw_test_allocator(&g.counting);
  for (size_t i = 0; i < g.size; ++i) {
    atomic_store(&g.callbacks[i], 0);
    atomic_store(&g.observed[i], 0);
    atomic_store(&g.winners[i], 0);
    pw_status_t s = pw_event_create(allocator, &g.events[i]);
    if (s == NULL) s = pw_event_on_ready(g.events[i], on_ready_cb,
                                          (void*)(uintptr_t)i);
    if (s != NULL) {
      fprintf(stderr, "setup failed: %s\n", pw_status_message(s));
      exit(2);
    }
  }
  pthread_barrier_wait(&g.start);
  pthread_barrier_wait(&g.end);
  for (size_t i = 0; i < g.size; ++i) {
    if (atomic_load(&g.winners[i]) != 1) violation("winners != 1", i);
    if (atomic_load(&g.observed[i]) != 1) violation("observed != 1", i);
    if (atomic_load(&g.callbacks[i]) != 1) violation("callbacks != 1", i);
    pw_event_release(g.events[i]);
  }
}

int main(int argc, char** argv) {
  size_t total = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
  if (total == 0) total = 1;
  pw_test_allocator_init(&g.counting);
  pthread_barrier_init(&g.start, NULL, kProducers + kConsumers + 1);
  pthread_barrier_init(&g.end, NULL, kProducers + kConsumers + 1);
  pthread_t threads[kProducers + kConsumers];
  role_t roles[kProducers + kConsumers];
  for (size_t t = 0; t < kProducers + kConsumers; ++t) {
    roles[t].producer = t < kProducers;
    roles[t].index = t < kProducers ? t : t - kProducers;
    if (pthread_create(&threads[t], NULL, worker_main, &roles[t]) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      return 2;
    }
  }
  pw_time_t began = pw_clock_now();
  for (g.base = 0; g.base < total; g.base += kBatch) {
    g.size = total - g.base < kBatch ? total - g.base : kBatch;
    run_batch();
  }
  atomic_store(&g.stop, true);
  pthread_barrier_wait(&g.start);
  for (size_t t = 0; t < kProducers + kConsumers; ++t) {
    pthread_join(threads[t], NULL);
  }
  double seconds = (double)(pw_clock_now() - began) / 1e9;
  size_t live = pw_test_allocator_live(&g.counting);
  if (live != 0) violation("allocations still live at the end", live);
  if (atomic_load(&g.rejected) != total * (kProducers - 1)) {
    violation("rejected completions != events * (producers - 1)", 0);
  }
  size_t bad = atomic_load(&g.violations);
  printf("stress_event_wait: %zu events, %d producers x %d consumers, "
         "%zu duplicate completions rejected, %zu waits blocked, %zu "
         "completions woke parked waiters, %zu live allocations, %.2f s: %s\n",
         total, kProducers, kConsumers, atomic_load(&g.rejected),
         atomic_load(&g.blocked), atomic_load(&g.woke), live, seconds,
         bad == 0 ? "OK" : "FAILED");
  pthread_barrier_destroy(&g.start);
  pthread_barrier_destroy(&g.end);
  return bad == 0 ? 0 : 1;
}
