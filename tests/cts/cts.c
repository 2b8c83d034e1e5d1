/* Criterion helpers for cts_shim_test.c and double_test.c; see cts.h. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "cts/cts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --- Status assertions. --- */

void pw_cts_assert_ok(pw_status_t status, const char* what) {
  if (status == NULL) return;
  char text[512];
  pw_status_format(status, text, sizeof(text));
  pw_status_free(status);
  cr_assert_fail("%s failed: %s", what, text);
}

pw_status_code_t pw_cts_assert_error(pw_status_t status, const pw_status_code_t* allowed,
                                     size_t count, const char* what) {
  cr_assert_not_null(status, "%s succeeded; an error was expected", what);
  pw_status_code_t code = pw_status_code(status);
  char text[512];
  pw_status_format(status, text, sizeof(text));
  size_t message_length = strlen(pw_status_message(status));
  pw_status_free(status);
  bool ok = false;
  for (size_t i = 0; i < count; ++i) ok = ok || code == allowed[i];
  cr_assert(ok, "%s: unexpected error %s", what, text);
  cr_assert_gt(message_length, 0, "%s: error %s has no message", what,
               pw_status_code_string(code));
  return code;
}

/* --- Completion tracking. --- */

void pw_cts_tracker_init(pw_cts_tracker_t* tracker, size_t count) {
  memset(tracker, 0, sizeof(*tracker));
  pthread_mutex_init(&tracker->mutex, NULL);
  pthread_cond_init(&tracker->cond, NULL);
  tracker->count = count;
  tracker->slots = calloc(count ? count : 1, sizeof(pw_cts_slot_t));
  tracker->order = calloc(count ? count : 1, sizeof(size_t));
  cr_assert_not_null(tracker->slots);
  cr_assert_not_null(tracker->order);
  for (size_t i = 0; i < count; ++i) {
    tracker->slots[i].tracker = tracker;
    atomic_init(&tracker->slots[i].calls, 0);
    atomic_init(&tracker->slots[i].code, -1);
    atomic_init(&tracker->slots[i].timed, 0);
  }
}

void pw_cts_tracker_free(pw_cts_tracker_t* tracker) {
  pthread_mutex_destroy(&tracker->mutex);
  pthread_cond_destroy(&tracker->cond);
  free(tracker->slots);
  free(tracker->order);
  tracker->slots = NULL;
  tracker->order = NULL;
}

void pw_cts_done(void* user, pw_status_t status) {
  pw_cts_slot_t* slot = user;
  int expected = -1;
  atomic_compare_exchange_strong(&slot->code, &expected, (int)pw_status_code(status));
  pw_status_free(status); /* done owns the status */
  atomic_fetch_add(&slot->calls, 1);
  if (slot->then != NULL) slot->then(slot);
  pw_cts_tracker_t* tracker = slot->tracker;
  pthread_mutex_lock(&tracker->mutex);
  if (tracker->completed < tracker->count) {
    tracker->order[tracker->completed] = (size_t)(slot - tracker->slots);
  }
  tracker->completed++;
  pthread_cond_broadcast(&tracker->cond);
  pthread_mutex_unlock(&tracker->mutex);
}

void pw_cts_done_timed(void* user, pw_status_t status, const pw_backend_timing_t* timing) {
  pw_cts_slot_t* slot = user;
  if (timing != NULL) {
    slot->start_ns = timing->start_ns;
    slot->end_ns = timing->end_ns;
    atomic_store(&slot->timed, 1);
  }
  pw_cts_done(user, status);
}

void pw_cts_tracker_wait_slots(pw_cts_tracker_t* tracker, size_t first, size_t count,
                               const char* what) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += (time_t)(PW_CTS_TIMEOUT_NS / 1000000000ull);
  pthread_mutex_lock(&tracker->mutex);
  size_t waiting = first;
  int rc = 0;
  for (;;) {
    while (waiting < first + count && atomic_load(&tracker->slots[waiting].calls) > 0) ++waiting;
    if (waiting == first + count || rc == ETIMEDOUT) break;
    rc = pthread_cond_timedwait(&tracker->cond, &tracker->mutex, &deadline);
  }
  pthread_mutex_unlock(&tracker->mutex);
  cr_assert_eq(waiting, first + count, "%s: launch %zu did not complete in %llu s (hang)",
               what, waiting, PW_CTS_TIMEOUT_NS / 1000000000ull);
}

void pw_cts_tracker_wait(pw_cts_tracker_t* tracker, size_t target, const char* what) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += (time_t)(PW_CTS_TIMEOUT_NS / 1000000000ull);
  pthread_mutex_lock(&tracker->mutex);
  int rc = 0;
  while (tracker->completed < target && rc != ETIMEDOUT) {
    rc = pthread_cond_timedwait(&tracker->cond, &tracker->mutex, &deadline);
  }
  size_t completed = tracker->completed;
  pthread_mutex_unlock(&tracker->mutex);
  cr_assert_geq(completed, target, "%s: only %zu of %zu launches completed in %llu s (hang)",
                what, completed, target, PW_CTS_TIMEOUT_NS / 1000000000ull);
}

void pw_cts_tracker_expect_calls(pw_cts_tracker_t* tracker, size_t i, uint32_t want_calls) {
  uint32_t calls = atomic_load(&tracker->slots[i].calls);
  cr_assert_eq(calls, want_calls, "launch %zu: done called %u times, expected %u", i, calls,
               want_calls);
}

