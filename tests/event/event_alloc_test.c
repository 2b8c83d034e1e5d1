/* Allocation failure sweeps: every create path of the event API (create,
 * create_completed, on_ready, join, any) reports RESOURCE_EXHAUSTED when any
 * one of its allocations fails, leaks nothing, and never runs a callback
 * whose registration failed. pw_test_allocator_sweep fails allocation 1..N
 * in turn and checks that nothing is left live after each run. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "pathways/pathways.h"
#include "support/test_allocators.h"

TestSuite(event_alloc, .fini = pw_test_check_leaks);

/* Steps of one sweep body: each either succeeds or fails with
 * RESOURCE_EXHAUSTED; with an injected failure exactly one step must have
 * failed, without one none may. */
typedef struct steps_t {
  int failures;
  bool bad; /* a step failed with another code, or a check failed */
} steps_t;

static bool step(steps_t* st, pw_status_t s) {
  if (s == NULL) return true;
  if (pw_status_code(s) == PW_STATUS_RESOURCE_EXHAUSTED) {
    ++st->failures;
  } else {
    fprintf(stderr, "unexpected status %s: %s\n",
            pw_status_code_string(pw_status_code(s)), pw_status_message(s));
    st->bad = true;
  }
  pw_status_free(s);
  return false;
}

static bool verdict(const steps_t* st, bool expect_failure) {
  return !st->bad && st->failures == (expect_failure ? 1 : 0);
}

static void count_cb(void* user, pw_status_t status) {
  atomic_fetch_add((atomic_int*)user, 1);
  pw_status_free(status);
}

static void run_sweep(pw_test_sweep_fn_t body, int min_points) {
  char why[256] = "";
  int points = pw_test_allocator_sweep(body, NULL, why);
  cr_assert_geq(points, min_points, "sweep: %s", why);
}

static bool sweep_create(pw_allocator_t a, bool expect_failure, void* user) {
  steps_t st = {0};
  pw_event_t* ev = (pw_event_t*)&st;
  if (step(&st, pw_event_create(a, &ev))) {
    st.bad |= pw_event_signal(ev) != NULL;
    pw_event_release(ev);
  } else {
    st.bad |= ev != NULL;
  }
  return verdict(&st, expect_failure);
}

Test(event_alloc, create_sweep) { run_sweep(sweep_create, 1); }

static bool sweep_create_completed(pw_allocator_t a, bool expect_failure,
                                   void* user) {
  steps_t st = {0};
  pw_event_t* ev = NULL;
  /* The status is consumed either way (LeakSanitizer checks). */
  if (step(&st, pw_event_create_completed(
                    a, pw_status_make(PW_STATUS_DATA_LOSS, "lost"), &ev))) {
    pw_status_t s = pw_event_wait(ev, PW_IMMEDIATE_PAST);
    st.bad |= pw_status_code(s) != PW_STATUS_DATA_LOSS;
    pw_status_free(s);
    pw_event_release(ev);
  } else {
    st.bad |= ev != NULL;
  }
  return verdict(&st, expect_failure);
}

Test(event_alloc, create_completed_sweep) {
  run_sweep(sweep_create_completed, 1);
}

static bool sweep_on_ready(pw_allocator_t a, bool expect_failure, void* user) {
  steps_t st = {0};
  pw_event_t* ev = NULL;
  if (!step(&st, pw_event_create(a, &ev))) return verdict(&st, expect_failure);
  enum { kCallbacks = 3 };
  atomic_int calls[kCallbacks + 1] = {0};
  bool registered[kCallbacks] = {false};
  for (int i = 0; i < kCallbacks; ++i) {
    registered[i] = step(&st, pw_event_on_ready(ev, count_cb, &calls[i]));
  }
  st.bad |= pw_event_signal(ev) != NULL;
  for (int i = 0; i < kCallbacks; ++i) {
    st.bad |= atomic_load(&calls[i]) != (registered[i] ? 1 : 0);
  }
  /* After completion no record is allocated: this cannot fail. */
  st.bad |= pw_event_on_ready(ev, count_cb, &calls[kCallbacks]) != NULL;
  st.bad |= atomic_load(&calls[kCallbacks]) != 1;
  pw_event_release(ev);
  for (int i = 0; i < kCallbacks; ++i) {
    st.bad |= atomic_load(&calls[i]) != (registered[i] ? 1 : 0);
  }
  return verdict(&st, expect_failure);
}

Test(event_alloc, on_ready_sweep) { run_sweep(sweep_on_ready, 4); }

/* Shared body of the combinator sweeps. */
typedef pw_status_t (*combinator_fn_t)(pw_allocator_t, pw_event_t* const*,
                                       size_t, pw_event_t**);

static bool sweep_combinator(pw_allocator_t a, bool expect_failure,
                             combinator_fn_t combine) {
  steps_t st = {0};
  enum { kInputs = 3 };
  pw_event_t* in[kInputs] = {NULL};
  size_t made = 0;
  while (made < kInputs && step(&st, pw_event_create(a, &in[made]))) ++made;
  if (made < kInputs) {
    for (size_t i = 0; i < made; ++i) pw_event_release(in[i]);
    return verdict(&st, expect_failure);
  }
  pw_event_t* out = (pw_event_t*)&st;
  bool created = step(&st, combine(a, in, kInputs, &out));
  if (!created) st.bad |= out != NULL;
  atomic_int calls = 0;
  bool watched = created && step(&st, pw_event_on_ready(out, count_cb, &calls));
  st.bad |= pw_event_fail(in[1], pw_status_make(PW_STATUS_ABORTED, "one")) !=
            NULL;
  st.bad |= pw_event_signal(in[0]) != NULL;
  st.bad |= pw_event_signal(in[2]) != NULL;
  if (created) {
    pw_status_t s = pw_event_wait(out, PW_IMMEDIATE_PAST);
    st.bad |= pw_status_code(s) != PW_STATUS_ABORTED;
    pw_status_free(s);
    pw_event_release(out);
  }
  st.bad |= atomic_load(&calls) != (watched ? 1 : 0);
  for (size_t i = 0; i < kInputs; ++i) pw_event_release(in[i]);
  return verdict(&st, expect_failure);
}

static bool sweep_join(pw_allocator_t a, bool expect_failure, void* user) {
  return sweep_combinator(a, expect_failure, pw_event_join);
}

static bool sweep_any(pw_allocator_t a, bool expect_failure, void* user) {
  return sweep_combinator(a, expect_failure, pw_event_any);
}

/* 3 inputs + the output + its state + the on_ready record on it. */
Test(event_alloc, join_sweep) { run_sweep(sweep_join, 6); }
Test(event_alloc, any_sweep) { run_sweep(sweep_any, 6); }

/* A pw_test_allocator that fails every allocation: nothing is created,
 * nothing runs, nothing leaks. */
Test(event_alloc, exhausted_allocator_fails_every_create_path) {
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  t.fail_at = 1;
  t.fail_after = true;
  pw_allocator_t a = pw_test_allocator(&t);
  pw_event_t* ev = NULL;
  pw_status_t s = pw_event_create(a, &ev);
  cr_expect_eq(pw_status_code(s), PW_STATUS_RESOURCE_EXHAUSTED);
  cr_expect(strstr(pw_status_message(s), "pw_event_create") != NULL, "%s",
            pw_status_message(s));
  pw_status_free(s);
  cr_expect_null(ev);

  pw_test_allocator_t ok;
  pw_test_allocator_init(&ok);
  pw_event_t* in = NULL;
  cr_assert_null(pw_event_create(pw_test_allocator(&ok), &in));
  s = pw_event_join(a, &in, 1, &ev);
  cr_expect_eq(pw_status_code(s), PW_STATUS_RESOURCE_EXHAUSTED);
  pw_status_free(s);
  s = pw_event_any(a, &in, 1, &ev);
  cr_expect_eq(pw_status_code(s), PW_STATUS_RESOURCE_EXHAUSTED);
  pw_status_free(s);
  cr_expect_null(ev);
  cr_assert_null(pw_event_signal(in));
  pw_event_release(in);
  cr_expect_eq(pw_test_allocator_live(&ok), 0);
  cr_expect_eq(pw_test_allocator_live(&t), 0);
}
