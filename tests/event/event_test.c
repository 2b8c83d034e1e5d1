/* Unit tests of pw_event_t: completion, waiting, polling, callbacks,
 * lifetime and bad input. Combinators: event_combinators_test.c; allocation
 * failure sweeps: event_alloc_test.c. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event/event_internal.h"
#include "pathways/pathways.h"
#include "support/test_allocators.h"

TestSuite(event, .fini = pw_test_check_leaks);

static pw_test_allocator_t g_counting;

static pw_event_t* new_event(void) {
  pw_event_t* ev = NULL;
  cr_assert_null(pw_event_create(pw_test_allocator(&g_counting), &ev));
  cr_assert_not_null(ev);
  return ev;
}

static void expect_no_live_allocations(void) {
  cr_expect_eq(pw_test_allocator_live(&g_counting), 0, "%zu live allocations",
               pw_test_allocator_live(&g_counting));
  cr_expect_eq(atomic_load(&g_counting.size_mismatches), 0);
}

static void expect_code(pw_status_t s, pw_status_code_t code, const char* text) {
  cr_expect_eq(pw_status_code(s), code, "got %s (%s), want %s",
               pw_status_code_string(pw_status_code(s)), pw_status_message(s),
               pw_status_code_string(code));
  if (text != NULL) {
    cr_expect(strstr(pw_status_message(s), text) != NULL,
              "message \"%s\" lacks \"%s\"", pw_status_message(s), text);
  }
  pw_status_free(s);
}

/* Callback recorder: order of calls and the statuses received. */
typedef struct recorder_t {
  atomic_int calls;
  int order[8];
  pw_status_code_t codes[8];
  char messages[8][64];
  pw_status_t raw[8];
  bool was_null[8];
  bool keep; /* keep the statuses in raw[] instead of freeing them */
} recorder_t;

typedef struct tagged_t {
  recorder_t* rec;
  int tag;
} tagged_t;

static void record_cb(void* user, pw_status_t status) {
  tagged_t* t = user;
  int n = atomic_fetch_add(&t->rec->calls, 1);
  if (n < 8) {
    t->rec->order[n] = t->tag;
    t->rec->codes[n] = pw_status_code(status);
    t->rec->was_null[n] = status == NULL;
    snprintf(t->rec->messages[n], 64, "%s", pw_status_message(status));
    if (t->rec->keep) {
      t->rec->raw[n] = status; /* freed by the test */
      return;
    }
  }
  pw_status_free(status);
}

Test(event, signal_completes_ok_once) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* ev = new_event();
  bool ready = true;
  cr_expect_not(pw_event_is_ready(ev));
  cr_expect_null(pw_event_query(ev, &ready));
  cr_expect_not(ready);
  cr_assert_null(pw_event_signal(ev));
  cr_expect(pw_event_is_ready(ev));
  cr_expect_null(pw_event_query(ev, &ready));
  cr_expect(ready);
  cr_expect_null(pw_event_wait(ev, PW_IMMEDIATE_PAST));
  cr_expect_null(pw_event_wait(ev, PW_INFINITE_FUTURE));
  pw_event_release(ev);
  expect_no_live_allocations();
}

Test(event, fail_keeps_code_and_message_and_hands_out_copies) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* ev = new_event();
  cr_assert_null(pw_event_fail(
      ev, pw_status_make(PW_STATUS_DATA_LOSS, "device %d lost", 3)));
  pw_status_t a = pw_event_wait(ev, PW_IMMEDIATE_PAST);
  bool ready = false;
  pw_status_t b = pw_event_query(ev, &ready);
  cr_expect(ready);
  cr_expect_neq(a, b, "each caller gets its own copy");
  expect_code(a, PW_STATUS_DATA_LOSS, "device 3 lost");
  expect_code(b, PW_STATUS_DATA_LOSS, "device 3 lost");
  /* Still there after the copies were freed. */
  expect_code(pw_event_wait(ev, PW_INFINITE_FUTURE), PW_STATUS_DATA_LOSS,
              "device 3 lost");
  pw_event_release(ev);
  expect_no_live_allocations();
}

Test(event, second_completion_is_rejected_and_never_overwrites) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* ev = new_event();
  cr_assert_null(pw_event_signal(ev));
  expect_code(pw_event_signal(ev), PW_STATUS_FAILED_PRECONDITION,
              "already completed");
  /* The rejected status is freed (LeakSanitizer checks), not stored. */
  expect_code(pw_event_fail(ev, pw_status_make(PW_STATUS_INTERNAL, "late")),
              PW_STATUS_FAILED_PRECONDITION, "pw_event_fail");
  cr_expect_null(pw_event_wait(ev, PW_IMMEDIATE_PAST));
  pw_event_release(ev);

  ev = new_event();
  cr_assert_null(pw_event_fail(ev, pw_status_make(PW_STATUS_ABORTED, "first")));
  expect_code(pw_event_signal(ev), PW_STATUS_FAILED_PRECONDITION, "ABORTED");
  expect_code(pw_event_fail(ev, NULL), PW_STATUS_FAILED_PRECONDITION, NULL);
  expect_code(pw_event_wait(ev, PW_IMMEDIATE_PAST), PW_STATUS_ABORTED, "first");
  pw_event_release(ev);

  ev = NULL;
  cr_assert_null(pw_event_create_completed(pw_test_allocator(&g_counting),
                                           NULL, &ev));
  expect_code(pw_event_signal(ev), PW_STATUS_FAILED_PRECONDITION, NULL);
  pw_event_release(ev);
  expect_no_live_allocations();
}

Test(event, wait_times_out_at_the_deadline) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* ev = new_event();
  pw_time_t start = pw_clock_now();
  expect_code(pw_event_wait(ev, PW_IMMEDIATE_PAST),
              PW_STATUS_DEADLINE_EXCEEDED, NULL);
  expect_code(pw_event_wait(ev, start - 1000), PW_STATUS_DEADLINE_EXCEEDED,
              NULL);
  pw_time_t deadline = pw_deadline_from_timeout(20 * 1000 * 1000);
  expect_code(pw_event_wait(ev, deadline), PW_STATUS_DEADLINE_EXCEEDED,
              "deadline");
  pw_time_t end = pw_clock_now();
  cr_expect_geq(end, deadline, "returned %lld ns early",
                (long long)(deadline - end));
  cr_expect_lt(end - start, 2000LL * 1000 * 1000, "took %lld ns",
               (long long)(end - start));
  cr_expect_eq(pw__event_parked_waiters(ev), 0, "a timed-out waiter left");
  cr_expect_not(pw_event_is_ready(ev));
  /* A timeout does not complete the event. */
  cr_assert_null(pw_event_signal(ev));
  cr_expect_null(pw_event_wait(ev, PW_IMMEDIATE_PAST));
  pw_event_release(ev);
  expect_no_live_allocations();
}

typedef struct waiter_arg_t {
  pw_event_t* ev;
  pw_status_t result;
} waiter_arg_t;

static void* waiter_main(void* p) {
  waiter_arg_t* w = p;
  w->result = pw_event_wait(w->ev, pw_deadline_from_timeout(30LL * 1000000000));
  return NULL;
}

Test(event, parked_waiters_are_woken_with_the_status) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* ev = new_event();
  enum { kWaiters = 3 };
  waiter_arg_t args[kWaiters];
  pthread_t threads[kWaiters];
  for (int i = 0; i < kWaiters; ++i) {
    args[i].ev = ev;
    args[i].result = NULL;
    cr_assert_eq(pthread_create(&threads[i], NULL, waiter_main, &args[i]), 0);
  }
  /* Synchronise on the waiters' own announcement, not on a sleep. */
  while (pw__event_parked_waiters(ev) < kWaiters) sched_yield();
  cr_expect_not(pw_event_is_ready(ev));
  cr_assert_null(pw_event_fail(
      ev, pw_status_make(PW_STATUS_UNAVAILABLE, "slice 2 offline")));
  for (int i = 0; i < kWaiters; ++i) {
    pthread_join(threads[i], NULL);
    expect_code(args[i].result, PW_STATUS_UNAVAILABLE, "slice 2 offline");
  }
  cr_expect_eq(pw__event_parked_waiters(ev), 0);
  pw_event_release(ev);
  expect_no_live_allocations();
}

Test(event, callbacks_before_completion_run_once_in_order_with_own_status) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* ev = new_event();
  recorder_t rec = {0};
  rec.keep = true;
  tagged_t tags[3] = {{&rec, 0}, {&rec, 1}, {&rec, 2}};
  for (int i = 0; i < 3; ++i) {
    cr_assert_null(pw_event_on_ready(ev, record_cb, &tags[i]));
  }
  cr_expect_eq(atomic_load(&rec.calls), 0);
  cr_expect_eq(pw_test_allocator_live(&g_counting), 4, "event + 3 records");
  cr_assert_null(pw_event_fail(
      ev, pw_status_make(PW_STATUS_CANCELLED, "step %d cancelled", 7)));
  cr_expect_eq(atomic_load(&rec.calls), 3);
  cr_expect_eq(pw_test_allocator_live(&g_counting), 1, "records freed");
  for (int i = 0; i < 3; ++i) {
    cr_expect_eq(rec.order[i], i);
    cr_expect_eq(rec.codes[i], PW_STATUS_CANCELLED);
    cr_expect_str_eq(rec.messages[i], "step 7 cancelled");
  }
  /* Three live, independent copies (freeing each is checked by ASan). */
  cr_expect_neq(rec.raw[0], rec.raw[1]);
  cr_expect_neq(rec.raw[1], rec.raw[2]);
  cr_expect_neq(rec.raw[0], rec.raw[2]);
  for (int i = 0; i < 3; ++i) pw_status_free(rec.raw[i]);
  pw_event_release(ev);
  cr_expect_eq(atomic_load(&rec.calls), 3);
  expect_no_live_allocations();
}

Test(event, callback_after_completion_runs_inline) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* ev = new_event();
  cr_assert_null(pw_event_signal(ev));
  recorder_t rec = {0};
  tagged_t tag = {&rec, 5};
  cr_assert_null(pw_event_on_ready(ev, record_cb, &tag));
  cr_expect_eq(atomic_load(&rec.calls), 1, "ran before on_ready returned");
  cr_expect_eq(rec.codes[0], PW_STATUS_OK);
  cr_expect(rec.was_null[0], "OK is passed as NULL");
  cr_expect_eq(pw_test_allocator_live(&g_counting), 1, "no record needed");
  pw_event_release(ev);

  pw_event_t* done = NULL;
  cr_assert_null(pw_event_create_completed(
      pw_test_allocator(&g_counting),
      pw_status_make(PW_STATUS_NOT_FOUND, "no executable \"mm\""), &done));
  cr_assert_null(pw_event_on_ready(done, record_cb, &tag));
  cr_expect_eq(atomic_load(&rec.calls), 2);
  cr_expect_eq(rec.codes[1], PW_STATUS_NOT_FOUND);
  cr_expect_str_eq(rec.messages[1], "no executable \"mm\"");
  pw_event_release(done);
  expect_no_live_allocations();
}

/* Registers another callback on the same event from inside a callback. */
typedef struct nesting_t {
  pw_event_t* ev;
  atomic_int outer;
  atomic_int inner;
  bool inner_ran_inline;
  bool signal_rejected;
  bool ready_inside;
} nesting_t;

static void inner_cb(void* user, pw_status_t status) {
  nesting_t* n = user;
  atomic_fetch_add(&n->inner, 1);
  pw_status_free(status);
}

static void outer_cb(void* user, pw_status_t status) {
  nesting_t* n = user;
  atomic_fetch_add(&n->outer, 1);
  n->ready_inside = pw_event_is_ready(n->ev);
  int before = atomic_load(&n->inner);
  pw_status_ignore(pw_event_on_ready(n->ev, inner_cb, n));
  n->inner_ran_inline = atomic_load(&n->inner) == before + 1;
  pw_status_t again = pw_event_signal(n->ev);
  n->signal_rejected = pw_status_code(again) == PW_STATUS_FAILED_PRECONDITION;
  pw_status_free(again);
  pw_status_free(status);
}

Test(event, callback_registered_during_completion_runs_exactly_once) {
  pw_test_allocator_init(&g_counting);
  nesting_t n = {0};
  n.ev = new_event();
  cr_assert_null(pw_event_on_ready(n.ev, outer_cb, &n));
  cr_assert_null(pw_event_on_ready(n.ev, outer_cb, &n));
  cr_assert_null(pw_event_signal(n.ev));
  cr_expect_eq(atomic_load(&n.outer), 2);
  cr_expect_eq(atomic_load(&n.inner), 2);
  cr_expect(n.inner_ran_inline);
  cr_expect(n.signal_rejected);
  cr_expect(n.ready_inside);
  pw_event_release(n.ev);
  cr_expect_eq(atomic_load(&n.inner), 2);
  expect_no_live_allocations();
}

typedef struct last_ref_t {
  pw_event_t* ev;
  atomic_int calls;
} last_ref_t;

static void release_cb(void* user, pw_status_t status) {
  last_ref_t* l = user;
  atomic_fetch_add(&l->calls, 1);
  pw_status_free(status);
  pw_event_release(l->ev); /* the last user reference */
}

static void touch_cb(void* user, pw_status_t status) {
  last_ref_t* l = user;
  atomic_fetch_add(&l->calls, 1);
  pw_status_free(status);
}

Test(event, callback_may_release_the_last_reference) {
  pw_test_allocator_init(&g_counting);
  last_ref_t l = {0};
  l.ev = new_event();
  cr_assert_null(pw_event_on_ready(l.ev, release_cb, &l));
  cr_assert_null(pw_event_on_ready(l.ev, touch_cb, &l)); /* runs after it */
  /* The completing caller borrows the reference the callback drops. */
  cr_assert_null(pw_event_fail(l.ev, pw_status_make(PW_STATUS_INTERNAL, "x")));
  cr_expect_eq(atomic_load(&l.calls), 2);
  expect_no_live_allocations();
}

Test(event, abandoned_event_runs_its_callbacks_cancelled) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* ev = new_event();
  recorder_t rec = {0};
  tagged_t tag = {&rec, 1};
  cr_assert_null(pw_event_on_ready(ev, record_cb, &tag));
  pw_event_retain(ev);
  pw_event_release(ev);
  cr_expect_eq(atomic_load(&rec.calls), 0, "a reference is still held");
  pw_event_release(ev);
  cr_expect_eq(atomic_load(&rec.calls), 1);
  cr_expect_eq(rec.codes[0], PW_STATUS_CANCELLED);
  cr_expect(strstr(rec.messages[0], "released before it completed") != NULL);
  expect_no_live_allocations();
  /* Without callbacks an abandoned event is simply freed. */
  pw_event_release(new_event());
  expect_no_live_allocations();
}

/* A chain of 100k events where each callback completes the next one:
 * completion must not recurse 100k frames deep. */
typedef struct chain_t {
  pw_event_t** events;
  size_t count;
  size_t next;
  atomic_size_t ran;
} chain_t;

static void chain_cb(void* user, pw_status_t status) {
  chain_t* c = user;
  size_t i = c->next++;
  atomic_fetch_add(&c->ran, 1);
  if (i + 1 < c->count) {
    pw_status_ignore(pw_event_fail(c->events[i + 1], status));
  } else {
    pw_status_free(status);
  }
}

Test(event, long_callback_chains_do_not_grow_the_stack) {
  pw_test_allocator_init(&g_counting);
  chain_t c = {0};
  c.count = 100000;
  c.events = calloc(c.count, sizeof(pw_event_t*));
  cr_assert_not_null(c.events);
  for (size_t i = 0; i < c.count; ++i) {
    c.events[i] = new_event();
    cr_assert_null(pw_event_on_ready(c.events[i], chain_cb, &c));
  }
  cr_assert_null(
      pw_event_fail(c.events[0], pw_status_make(PW_STATUS_ABORTED, "head")));
  cr_expect_eq(atomic_load(&c.ran), c.count);
  expect_code(pw_event_wait(c.events[c.count - 1], PW_IMMEDIATE_PAST),
              PW_STATUS_ABORTED, "head");
  for (size_t i = 0; i < c.count; ++i) pw_event_release(c.events[i]);
  free(c.events);
  expect_no_live_allocations();
}

static void never_cb(void* user, pw_status_t status) {
  atomic_fetch_add((atomic_int*)user, 1);
  pw_status_free(status);
}

Test(event, bad_arguments_name_the_argument) {
  pw_test_allocator_init(&g_counting);
  pw_allocator_t a = pw_test_allocator(&g_counting);
  expect_code(pw_event_create(a, NULL), PW_STATUS_INVALID_ARGUMENT,
              "out_event is NULL");
  pw_event_t* ev = (pw_event_t*)&g_counting;
  pw_allocator_t empty = {0};
  expect_code(pw_event_create(empty, &ev), PW_STATUS_INVALID_ARGUMENT,
              "allocator");
  cr_expect_null(ev, "out param cleared on failure");
  /* Consumed statuses are freed even on bad input (LSan checks). */
  expect_code(pw_event_create_completed(
                  a, pw_status_make(PW_STATUS_INTERNAL, "x"), NULL),
              PW_STATUS_INVALID_ARGUMENT, "out_event is NULL");
  expect_code(pw_event_create_completed(
                  empty, pw_status_make(PW_STATUS_INTERNAL, "x"), &ev),
              PW_STATUS_INVALID_ARGUMENT, "allocator");
  expect_code(pw_event_signal(NULL), PW_STATUS_INVALID_ARGUMENT,
              "event is NULL");
  expect_code(pw_event_fail(NULL, pw_status_make(PW_STATUS_INTERNAL, "x")),
              PW_STATUS_INVALID_ARGUMENT, "event is NULL");
  expect_code(pw_event_wait(NULL, PW_INFINITE_FUTURE),
              PW_STATUS_INVALID_ARGUMENT, "event is NULL");
  bool ready = true;
  expect_code(pw_event_query(NULL, &ready), PW_STATUS_INVALID_ARGUMENT,
              "event is NULL");
  cr_expect_not(ready);
  cr_expect_not(pw_event_is_ready(NULL));
  pw_event_retain(NULL);
  pw_event_release(NULL);

  atomic_int calls = 0;
  expect_code(pw_event_on_ready(NULL, never_cb, &calls),
              PW_STATUS_INVALID_ARGUMENT, "event is NULL");
  ev = new_event();
  expect_code(pw_event_query(ev, NULL), PW_STATUS_INVALID_ARGUMENT,
              "out_ready is NULL");
  expect_code(pw_event_on_ready(ev, NULL, &calls), PW_STATUS_INVALID_ARGUMENT,
              "fn is NULL");
  cr_assert_null(pw_event_signal(ev));
  cr_expect_eq(atomic_load(&calls), 0);
  pw_event_release(ev);
  expect_no_live_allocations();
}

/* ---- events the runtime completes (PW__EVENT_RUNTIME) ------------------- */

static pw_event_t* new_runtime_event(uint32_t refs) {
  pw_event_t* ev = NULL;
  cr_assert_null(pw__event_create_runtime(pw_test_allocator(&g_counting), refs, &ev));
  cr_assert_not_null(ev);
  return ev;
}

Test(event, runtime_event_rejects_public_completion_and_keeps_its_own) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* ev = new_runtime_event(1);
  expect_code(pw_event_signal(ev), PW_STATUS_FAILED_PRECONDITION,
              "pw_event_signal: this event is completed by the runtime");
  expect_code(pw_event_fail(ev, pw_status_make(PW_STATUS_INTERNAL, "user")),
              PW_STATUS_FAILED_PRECONDITION, "pw_event_fail: this event is completed by");
  cr_expect_not(pw_event_is_ready(ev), "a rejected completion must not complete it");
  pw__event_complete_runtime(ev, pw_status_make(PW_STATUS_ABORTED, "op 3 failed"));
  cr_expect(pw_event_is_ready(ev));
  expect_code(pw_event_wait(ev, PW_IMMEDIATE_PAST), PW_STATUS_ABORTED, "op 3 failed");
  /* After completion too: rejected, and the runtime's status stands. */
  expect_code(pw_event_signal(ev), PW_STATUS_FAILED_PRECONDITION, "completed by the runtime");
  expect_code(pw_event_wait(ev, PW_IMMEDIATE_PAST), PW_STATUS_ABORTED, "op 3 failed");
  pw_event_release(ev);
  expect_no_live_allocations();
}

Test(event, runtime_completion_wakes_parked_waiters_and_runs_callbacks_in_order) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* ev = new_runtime_event(1);
  enum { kWaiters = 3 };
  waiter_arg_t args[kWaiters];
  pthread_t threads[kWaiters];
  for (int i = 0; i < kWaiters; ++i) {
    args[i].ev = ev;
    args[i].result = NULL;
    cr_assert_eq(pthread_create(&threads[i], NULL, waiter_main, &args[i]), 0);
  }
  recorder_t rec = {0};
  tagged_t tags[3] = {{&rec, 0}, {&rec, 1}, {&rec, 2}};
  for (int i = 0; i < 3; ++i) cr_assert_null(pw_event_on_ready(ev, record_cb, &tags[i]));
  while (pw__event_parked_waiters(ev) < kWaiters) sched_yield();
  cr_expect_eq(atomic_load(&rec.calls), 0);
  pw__event_complete_runtime(ev, pw_status_make(PW_STATUS_UNAVAILABLE, "slice 1 lost"));
  for (int i = 0; i < kWaiters; ++i) {
    pthread_join(threads[i], NULL);
    expect_code(args[i].result, PW_STATUS_UNAVAILABLE, "slice 1 lost");
  }
  cr_expect_eq(atomic_load(&rec.calls), 3);
  for (int i = 0; i < 3; ++i) {
    cr_expect_eq(rec.order[i], i, "callback %d ran in position %d", rec.order[i], i);
    cr_expect_eq(rec.codes[i], PW_STATUS_UNAVAILABLE);
  }
  cr_expect_eq(pw__event_parked_waiters(ev), 0);
  /* A callback registered afterwards runs inline with the status. */
  tagged_t late = {&rec, 7};
  cr_assert_null(pw_event_on_ready(ev, record_cb, &late));
  cr_expect_eq(atomic_load(&rec.calls), 4);
  cr_expect_eq(rec.order[3], 7);
  pw_event_release(ev);
  expect_no_live_allocations();
}

/* The completer's callbacks may drop the last reference: the completion
 * holds its own while they run. */
static void release_event_cb(void* user, pw_status_t status) {
  pw_status_free(status);
  pw_event_release(user);
}

Test(event, runtime_event_callback_may_release_the_last_reference) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* ev = new_runtime_event(2); /* the completer's and the callback's */
  cr_assert_null(pw_event_on_ready(ev, release_event_cb, ev));
  pw__event_complete_runtime(ev, NULL);
  pw_event_release(ev); /* the completer's: the last one */
  expect_no_live_allocations();
}

Test(event, recycled_runtime_event_is_incomplete_again_and_still_rejects_users) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* ev = new_runtime_event(1);
  pw__event_complete_runtime(ev, pw_status_make(PW_STATUS_INTERNAL, "first run"));
  cr_assert(pw__event_recycle(ev, 2));
  cr_expect_not(pw_event_is_ready(ev));
  expect_code(pw_event_wait(ev, PW_IMMEDIATE_PAST), PW_STATUS_DEADLINE_EXCEEDED, NULL);
  expect_code(pw_event_signal(ev), PW_STATUS_FAILED_PRECONDITION, "completed by the runtime");
  pw__event_complete_runtime(ev, NULL);
  cr_expect_null(pw_event_wait(ev, PW_IMMEDIATE_PAST));
  cr_expect_not(pw__event_recycle(ev, 1), "two references: not recyclable");
  pw_event_release(ev);
  pw_event_release(ev);
  expect_no_live_allocations();
}
