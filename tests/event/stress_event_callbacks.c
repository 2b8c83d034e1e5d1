/* Stress: on_ready registration racing completion.
 *
 * In rounds of kBatch events, kRegistrars threads register callbacks on
 * every event while kCompleters threads race to complete the same events
 * (in opposite orders, so some registrations land before completion, some
 * after, some while the completion is in progress). Each registration
 * retains the event and hands that reference to its callback, which drops
 * it; some callbacks register a further callback on the same event from
 * inside. A join and an any-of over each round's events are checked too.
 *
 * Checks: every callback runs exactly once with the event's status, exactly
 * one completion per event wins, the join ends with the batch's error and
 * the any-of is complete, and the counting allocator ends with nothing live.
 *
 * Usage: stress_event_callbacks [events]   (default 200000)
 * Prints one summary line; exits non-zero on any violation. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pathways/pathways.h"
#include "support/test_allocators.h"

enum {
  kBatch = 64,
  kRegistrars = 2,
  kCompleters = 2,
  kPerEvent = 3, /* registrations per event per registrar */
  kThreads = kRegistrars + kCompleters,
};

typedef struct slot_t {
  pw_event_t* event;
  size_t global;
  atomic_int calls;
  atomic_int nested;
  atomic_int winners;
} slot_t;

typedef struct stress_t {
  pw_test_allocator_t counting;
  slot_t slots[kBatch];
  size_t base;
  size_t size;
  pthread_barrier_t start;
  pthread_barrier_t end;
  atomic_bool stop;
  atomic_size_t violations;
  atomic_size_t inline_runs; /* callbacks that ran inside on_ready */
  atomic_size_t callbacks;
} stress_t;

static stress_t g;

static void violation(const char* what, size_t global) {
  if (atomic_fetch_add(&g.violations, 1) < 10) {
    fprintf(stderr, "stress_event_callbacks: VIOLATION at event %zu: %s\n",
            global, what);
  }
}

static bool should_fail(size_t global) { return global % 3 == 0; }

static void check_status(slot_t* slot, pw_status_t status) {
  pw_status_code_t want =
      should_fail(slot->global) ? PW_STATUS_ABORTED : PW_STATUS_OK;
  if (pw_status_code(status) != want) violation("callback status", slot->global);
  pw_status_free(status);
}

static void nested_cb(void* user, pw_status_t status) {
  slot_t* slot = user;
  atomic_fetch_add(&slot->nested, 1);
  atomic_fetch_add(&g.callbacks, 1);
  check_status(slot, status);
}

/* Owns one reference to slot->event (taken by the registrar). */
static void owning_cb(void* user, pw_status_t status) {
  slot_t* slot = user;
  atomic_fetch_add(&slot->calls, 1);
  atomic_fetch_add(&g.callbacks, 1);
  check_status(slot, status);
  pw_event_release(slot->event);
}

/* Registers a nested callback on its own event, then drops its reference. */
static void nesting_cb(void* user, pw_status_t status) {
  slot_t* slot = user;
  atomic_fetch_add(&slot->calls, 1);
  atomic_fetch_add(&g.callbacks, 1);
  check_status(slot, status);
  int before = atomic_load(&slot->nested);
  pw_status_t s = pw_event_on_ready(slot->event, nested_cb, slot);
  if (s != NULL) violation(pw_status_message(s), slot->global);
  pw_status_free(s);
  if (atomic_load(&slot->nested) <= before) {
    violation("nested callback did not run inline", slot->global);
  }
  pw_event_release(slot->event);
}

static void register_all(void) {
  for (size_t i = 0; i < g.size; ++i) {
    slot_t* slot = &g.slots[i];
    for (int k = 0; k < kPerEvent; ++k) {
      pw_event_retain(slot->event);
      bool ready = pw_event_is_ready(slot->event); /* then it runs inline */
      pw_status_t s = pw_event_on_ready(
          slot->event, k == 0 && i % 4 == 0 ? nesting_cb : owning_cb, slot);
      if (s != NULL) {
        violation(pw_status_message(s), slot->global);
        pw_status_free(s);
        pw_event_release(slot->event);
      } else if (ready) {
        atomic_fetch_add(&g.inline_runs, 1);
      }
    }
  }
}

static void complete_all(size_t completer) {
  for (size_t n = 0; n < g.size; ++n) {
    size_t i = completer % 2 == 0 ? n : g.size - 1 - n;
    slot_t* slot = &g.slots[i];
    pw_status_t s =
        should_fail(slot->global)
            ? pw_event_fail(slot->event,
                            pw_status_make(PW_STATUS_ABORTED, "round error"))
            : pw_event_signal(slot->event);
    if (s == NULL) {
      atomic_fetch_add(&slot->winners, 1);
    } else if (pw_status_code(s) != PW_STATUS_FAILED_PRECONDITION) {
      violation(pw_status_message(s), slot->global);
    }
    pw_status_free(s);
  }
}

static void* worker_main(void* arg) {
  size_t index = (size_t)(uintptr_t)arg;
  for (;;) {
    pthread_barrier_wait(&g.start);
    if (atomic_load(&g.stop)) return NULL;
    if (index < kRegistrars) {
      register_all();
    } else {
      complete_all(index - kRegistrars);
    }
    pthread_barrier_wait(&g.end);
  }
}

static void die_on(pw_status_t s) {
  if (s == NULL) return;
  fprintf(stderr, "setup failed: %s\n", pw_status_message(s));
  exit(2);
}

static void run_round(void) {
  pw_allocator_t allocator = pw_test_allocator(&g.counting);
  pw_event_t* events[kBatch];
  bool any_fails = false;
  for (size_t i = 0; i < g.size; ++i) {
    slot_t* slot = &g.slots[i];
    slot->global = g.base + i;
    atomic_store(&slot->calls, 0);
    atomic_store(&slot->nested, 0);
    atomic_store(&slot->winners, 0);
    die_on(pw_event_create(allocator, &slot->event));
    events[i] = slot->event;
    any_fails |= should_fail(slot->global);
  }
  pw_event_t* join = NULL;
  pw_event_t* any = NULL;
  die_on(pw_event_join(allocator, events, g.size, &join));
  die_on(pw_event_any(allocator, events, g.size, &any));
  pthread_barrier_wait(&g.start);
  pthread_barrier_wait(&g.end);
  for (size_t i = 0; i < g.size; ++i) {
    slot_t* slot = &g.slots[i];
    int want_nested = i % 4 == 0 ? kRegistrars : 0;
    if (atomic_load(&slot->calls) != kRegistrars * kPerEvent) {
      violation("callback count", slot->global);
    }
    if (atomic_load(&slot->nested) != want_nested) {
      violation("nested callback count", slot->global);
    }
    if (atomic_load(&slot->winners) != 1) violation("winners", slot->global);
    pw_event_release(slot->event);
  }
  pw_status_t js = pw_event_wait(join, PW_IMMEDIATE_PAST);
  if (pw_status_code(js) != (any_fails ? PW_STATUS_ABORTED : PW_STATUS_OK)) {
    violation("join status", g.base);
  }
  pw_status_free(js);
  if (!pw_event_is_ready(any)) violation("any-of not ready", g.base);
  pw_event_release(join);
  pw_event_release(any);
}

int main(int argc, char** argv) {
  size_t total = argc > 1 ? strtoull(argv[1], NULL, 10) : 200000;
  if (total == 0) total = 1;
  pw_test_allocator_init(&g.counting);
  pthread_barrier_init(&g.start, NULL, kThreads + 1);
  pthread_barrier_init(&g.end, NULL, kThreads + 1);
  pthread_t threads[kThreads];
  for (size_t t = 0; t < kThreads; ++t) {
    if (pthread_create(&threads[t], NULL, worker_main, (void*)(uintptr_t)t)) {
      fprintf(stderr, "pthread_create failed\n");
      return 2;
    }
  }
  pw_time_t began = pw_clock_now();
  for (g.base = 0; g.base < total; g.base += kBatch) {
    g.size = total - g.base < kBatch ? total - g.base : kBatch;
    run_round();
  }
  atomic_store(&g.stop, true);
  pthread_barrier_wait(&g.start);
  for (size_t t = 0; t < kThreads; ++t) pthread_join(threads[t], NULL);
  double seconds = (double)(pw_clock_now() - began) / 1e9;
  size_t live = pw_test_allocator_live(&g.counting);
  if (live != 0) violation("allocations still live at the end", live);
  size_t bad = atomic_load(&g.violations);
  printf("stress_event_callbacks: %zu events, %d registrars x %d completers, "
         "%zu callbacks (%zu ran inline in on_ready), %zu live allocations, "
         "%.2f s: %s\n",
         total, kRegistrars, kCompleters, atomic_load(&g.callbacks),
         atomic_load(&g.inline_runs), live, seconds,
         bad == 0 ? "OK" : "FAILED");
  pthread_barrier_destroy(&g.start);
  pthread_barrier_destroy(&g.end);
  return bad == 0 ? 0 : 1;
}
