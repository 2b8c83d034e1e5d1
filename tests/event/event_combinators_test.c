/* Unit tests of pw_event_join (all-of) and pw_event_any (any-of). */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "pathways/pathways.h"
#include "support/test_allocators.h"

TestSuite(event_join, .fini = pw_test_check_leaks);
TestSuite(event_any, .fini = pw_test_check_leaks);

static pw_test_allocator_t g_counting;

static pw_allocator_t counting(void) { return pw_test_allocator(&g_counting); }

static void make_events(pw_event_t** events, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    events[i] = NULL;
    cr_assert_null(pw_event_create(counting(), &events[i]));
  }
}

static void release_events(pw_event_t** events, size_t n) {
  for (size_t i = 0; i < n; ++i) pw_event_release(events[i]);
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

static void expect_no_live_allocations(void) {
  cr_expect_eq(pw_test_allocator_live(&g_counting), 0, "%zu live allocations",
               pw_test_allocator_live(&g_counting));
  cr_expect_eq(atomic_load(&g_counting.size_mismatches), 0);
}

Test(event_join, of_zero_events_is_already_ok) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* join = NULL;
  cr_assert_null(pw_event_join(counting(), NULL, 0, &join));
  cr_assert_not_null(join);
  cr_expect(pw_event_is_ready(join));
  cr_expect_null(pw_event_wait(join, PW_IMMEDIATE_PAST));
  pw_event_release(join);
  expect_no_live_allocations();
}

Test(event_join, completes_only_after_every_input) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* in[3];
  make_events(in, 3);
  pw_event_t* join = NULL;
  cr_assert_null(pw_event_join(counting(), in, 3, &join));
  cr_assert_null(pw_event_signal(in[2]));
  cr_assert_null(pw_event_signal(in[0]));
  cr_expect_not(pw_event_is_ready(join));
  expect_code(pw_event_wait(join, pw_deadline_from_timeout(20000000)),
              PW_STATUS_DEADLINE_EXCEEDED, NULL);
  cr_assert_null(pw_event_signal(in[1]));
  cr_expect(pw_event_is_ready(join));
  cr_expect_null(pw_event_wait(join, PW_IMMEDIATE_PAST));
  release_events(in, 3);
  pw_event_release(join);
  expect_no_live_allocations();
}

Test(event_join, first_error_in_completion_order_wins_after_all_inputs) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* in[4];
  make_events(in, 4);
  pw_event_t* join = NULL;
  cr_assert_null(pw_event_join(counting(), in, 4, &join));
  cr_assert_null(pw_event_signal(in[0]));
  cr_assert_null(pw_event_fail(
      in[3], pw_status_make(PW_STATUS_DATA_LOSS, "shard 3 corrupt")));
  cr_assert_null(pw_event_fail(
      in[1], pw_status_make(PW_STATUS_UNAVAILABLE, "slice 1 offline")));
  cr_expect_not(pw_event_is_ready(join), "in[2] is still pending");
  cr_assert_null(pw_event_signal(in[2]));
  cr_expect(pw_event_is_ready(join));
  /* in[3] failed first (not in[1], which comes first in the array). */
  expect_code(pw_event_wait(join, PW_IMMEDIATE_PAST), PW_STATUS_DATA_LOSS,
              "shard 3 corrupt");
  /* The inputs keep their own statuses. */
  expect_code(pw_event_wait(in[1], PW_IMMEDIATE_PAST), PW_STATUS_UNAVAILABLE,
              "slice 1 offline");
  release_events(in, 4);
  pw_event_release(join);
  expect_no_live_allocations();
}

Test(event_join, already_complete_and_repeated_inputs) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* done = NULL;
  cr_assert_null(pw_event_create_completed(counting(), NULL, &done));
  pw_event_t* failed = NULL;
  cr_assert_null(pw_event_create_completed(
      counting(), pw_status_make(PW_STATUS_ABORTED, "aborted early"), &failed));
  pw_event_t* in[3] = {done, failed, done};
  pw_event_t* join = NULL;
  cr_assert_null(pw_event_join(counting(), in, 3, &join));
  cr_expect(pw_event_is_ready(join), "every input had completed");
  expect_code(pw_event_wait(join, PW_IMMEDIATE_PAST), PW_STATUS_ABORTED,
              "aborted early");
  pw_event_release(join);

  pw_event_t* pending = NULL;
  cr_assert_null(pw_event_create(counting(), &pending));
  pw_event_t* twice[2] = {pending, pending};
  cr_assert_null(pw_event_join(counting(), twice, 2, &join));
  cr_expect_not(pw_event_is_ready(join));
  cr_assert_null(pw_event_signal(pending));
  cr_expect_null(pw_event_wait(join, PW_IMMEDIATE_PAST));
  pw_event_release(join);
  pw_event_release(pending);
  pw_event_release(done);
  pw_event_release(failed);
  expect_no_live_allocations();
}

Test(event_join, inputs_may_be_released_right_after_the_call) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* in[2];
  make_events(in, 2);
  pw_event_t* producer_ref = in[0];
  pw_event_retain(producer_ref); /* the producer keeps its own reference */
  pw_event_t* join = NULL;
  cr_assert_null(pw_event_join(counting(), in, 2, &join));
  pw_event_release(in[0]);
  /* in[1] loses its last reference without completing: CANCELLED. */
  pw_event_release(in[1]);
  cr_expect_not(pw_event_is_ready(join));
  cr_assert_null(pw_event_signal(producer_ref));
  pw_event_release(producer_ref);
  expect_code(pw_event_wait(join, PW_IMMEDIATE_PAST), PW_STATUS_CANCELLED,
              "released before it completed");
  pw_event_release(join);
  expect_no_live_allocations();
}

Test(event_join, join_may_be_released_before_its_inputs_complete) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* in[2];
  make_events(in, 2);
  pw_event_t* join = NULL;
  cr_assert_null(pw_event_join(counting(), in, 2, &join));
  pw_event_release(join);
  cr_assert_null(pw_event_signal(in[0]));
  cr_assert_null(pw_event_fail(in[1], pw_status_make(PW_STATUS_INTERNAL, "x")));
  release_events(in, 2);
  expect_no_live_allocations();
}

/* join(join(join(...))) 50k deep: completing the innermost input completes
 * them all without recursing 50k frames (see the trampoline in event.c). */
Test(event_join, long_join_chains_complete_without_deep_recursion) {
  pw_test_allocator_init(&g_counting);
  enum { kDepth = 50000 };
  pw_event_t** chain = calloc(kDepth, sizeof(pw_event_t*));
  cr_assert_not_null(chain);
  cr_assert_null(pw_event_create(counting(), &chain[0]));
  for (size_t i = 1; i < kDepth; ++i) {
    cr_assert_null(pw_event_join(counting(), &chain[i - 1], 1, &chain[i]));
  }
  cr_assert_null(pw_event_fail(
      chain[0], pw_status_make(PW_STATUS_DATA_LOSS, "root cause")));
  expect_code(pw_event_wait(chain[kDepth - 1], PW_IMMEDIATE_PAST),
              PW_STATUS_DATA_LOSS, "root cause");
  for (size_t i = 0; i < kDepth; ++i) pw_event_release(chain[i]);
  free(chain);
  expect_no_live_allocations();
}

Test(event_join, bad_arguments_name_the_argument) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* in[5];
  make_events(in, 5);
  pw_event_t* join = (pw_event_t*)&g_counting;
  expect_code(pw_event_join(counting(), in, 5, NULL),
              PW_STATUS_INVALID_ARGUMENT, "out_event is NULL");
  expect_code(pw_event_join(counting(), NULL, 2, &join),
              PW_STATUS_INVALID_ARGUMENT, "events is NULL");
  cr_expect_null(join, "out param cleared on failure");
  pw_event_t* saved = in[3];
  in[3] = NULL;
  expect_code(pw_event_join(counting(), in, 5, &join),
              PW_STATUS_INVALID_ARGUMENT, "events[3] is NULL");
  in[3] = saved;
  pw_allocator_t empty = {0};
  expect_code(pw_event_join(empty, in, 5, &join), PW_STATUS_INVALID_ARGUMENT,
              "allocator");
  /* Nothing was registered: completing the inputs touches no join. */
  for (int i = 0; i < 5; ++i) cr_assert_null(pw_event_signal(in[i]));
  release_events(in, 5);
  expect_no_live_allocations();
}

Test(event_any, first_completion_wins_ok_or_error) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* in[3];
  make_events(in, 3);
  pw_event_t* any = NULL;
  cr_assert_null(pw_event_any(counting(), in, 3, &any));
  cr_expect_not(pw_event_is_ready(any));
  cr_assert_null(pw_event_fail(
      in[1], pw_status_make(PW_STATUS_UNAVAILABLE, "host 4 unreachable")));
  cr_expect(pw_event_is_ready(any));
  cr_assert_null(pw_event_signal(in[0]));
  expect_code(pw_event_wait(any, PW_IMMEDIATE_PAST), PW_STATUS_UNAVAILABLE,
              "host 4 unreachable");
  pw_event_release(any);
  cr_assert_null(pw_event_signal(in[2]));
  release_events(in, 3);
  expect_no_live_allocations();

  make_events(in, 2);
  cr_assert_null(pw_event_any(counting(), in, 2, &any));
  cr_assert_null(pw_event_signal(in[1]));
  cr_assert_null(pw_event_fail(in[0], pw_status_make(PW_STATUS_INTERNAL, "x")));
  cr_expect_null(pw_event_wait(any, PW_IMMEDIATE_PAST));
  pw_event_release(any);
  release_events(in, 2);
  expect_no_live_allocations();
}

Test(event_any, an_already_complete_input_completes_it_at_once) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* in[2];
  make_events(in, 1);
  cr_assert_null(pw_event_create_completed(
      counting(), pw_status_make(PW_STATUS_NOT_FOUND, "gone"), &in[1]));
  pw_event_t* any = NULL;
  cr_assert_null(pw_event_any(counting(), in, 2, &any));
  expect_code(pw_event_wait(any, PW_IMMEDIATE_PAST), PW_STATUS_NOT_FOUND,
              "gone");
  /* Its bookkeeping stays until the pending input completes. */
  cr_assert_null(pw_event_signal(in[0]));
  pw_event_release(any);
  release_events(in, 2);
  expect_no_live_allocations();
}

Test(event_any, waiting_on_any_wakes_on_first) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* in[2];
  make_events(in, 2);
  pw_event_t* any = NULL;
  cr_assert_null(pw_event_any(counting(), in, 2, &any));
  expect_code(pw_event_wait(any, pw_deadline_from_timeout(20000000)),
              PW_STATUS_DEADLINE_EXCEEDED, NULL);
  cr_assert_null(pw_event_signal(in[1]));
  cr_expect_null(pw_event_wait(any, PW_INFINITE_FUTURE));
  pw_event_release(any);
  release_events(in, 2);
  expect_no_live_allocations();
}

Test(event_any, bad_arguments_name_the_argument) {
  pw_test_allocator_init(&g_counting);
  pw_event_t* in[4];
  make_events(in, 4);
  pw_event_t* any = (pw_event_t*)&g_counting;
  expect_code(pw_event_any(counting(), in, 0, &any),
              PW_STATUS_INVALID_ARGUMENT, "count is 0");
  cr_expect_null(any);
  expect_code(pw_event_any(counting(), NULL, 0, &any),
              PW_STATUS_INVALID_ARGUMENT, "count is 0");
  expect_code(pw_event_any(counting(), in, 4, NULL),
              PW_STATUS_INVALID_ARGUMENT, "out_event is NULL");
  expect_code(pw_event_any(counting(), NULL, 1, &any),
              PW_STATUS_INVALID_ARGUMENT, "events is NULL");
  pw_event_t* saved = in[2];
  in[2] = NULL;
  expect_code(pw_event_any(counting(), in, 4, &any),
              PW_STATUS_INVALID_ARGUMENT, "events[2] is NULL");
  in[2] = saved;
  for (int i = 0; i < 4; ++i) cr_assert_null(pw_event_signal(in[i]));
  release_events(in, 4);
  expect_no_live_allocations();
}
