/* Criterion helpers for the tests of the runtime's checked backend calls
 * (cts_shim_test.c) and of the test double itself (double_test.c): status
 * assertions and completion tracking.
 *
 * The backend conformance cases themselves live in pathways-cts
 * (tools/cts, docs/plugins.md "The conformance suite"), which ctest runs
 * against the bundled cpu and sim modules and against the test double
 * built as a plugin library (double_plugin.c); see CMakeLists.txt here. */
#ifndef PW_TESTS_CTS_CTS_H_
#define PW_TESTS_CTS_CTS_H_

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>

#include "pathways/pathways.h"
#include "plugin/backend_call.h"
#include "support/test_allocators.h"

/* How long any wait for a completion may take before the case fails as a
 * hang. Generous: sanitizer builds on two busy cores are slow. */
#define PW_CTS_TIMEOUT_NS (20ull * 1000 * 1000 * 1000)

/* Fails the test unless |status| is OK (the status is freed). */
void pw_cts_assert_ok(pw_status_t status, const char* what);
#define PW_CTS_OK(expr) pw_cts_assert_ok((expr), #expr)

/* Fails the test unless |status| is an error whose code is one of the
 * |count| codes in |allowed| and whose message is not empty; frees it.
 * Returns the code. */
pw_status_code_t pw_cts_assert_error(pw_status_t status, const pw_status_code_t* allowed,
                                     size_t count, const char* what);
#define PW_CTS_ERROR(expr, ...)                                               \
  pw_cts_assert_error((expr), (const pw_status_code_t[]){__VA_ARGS__},         \
                      sizeof((const pw_status_code_t[]){__VA_ARGS__}) /       \
                          sizeof(pw_status_code_t),                           \
                      #expr)

/* Completion tracking: one slot per launch; its done counts calls and keeps
 * the first status code; the tracker wakes waiters. */
typedef struct pw_cts_tracker_t pw_cts_tracker_t;
typedef struct pw_cts_slot_t {
  pw_cts_tracker_t* tracker;
  _Atomic uint32_t calls;
  _Atomic int code;
  /* Optional hook run inside done after counting (launch_from_done). */
  void (*then)(struct pw_cts_slot_t* slot);
  void* user;
  /* Set by pw_cts_done_timed when the backend gave a timing. */
  _Atomic int timed;
  uint64_t start_ns;
  uint64_t end_ns;
} pw_cts_slot_t;

struct pw_cts_tracker_t {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  size_t completed; /* done calls so far */
  size_t count;
  pw_cts_slot_t* slots;
  size_t* order;    /* slot indices in the order their dones came */
};

void pw_cts_tracker_init(pw_cts_tracker_t* tracker, size_t count);
void pw_cts_tracker_free(pw_cts_tracker_t* tracker);
/* The done callback: |user| is a pw_cts_slot_t*. */
void pw_cts_done(void* user, pw_status_t status);
/* The v2 done_timed callback: records |timing| in the slot, then as
 * pw_cts_done. */
void pw_cts_done_timed(void* user, pw_status_t status, const pw_backend_timing_t* timing);
/* Waits until slots [first, first + count) have each been called; fails
 * the test on timeout naming the first slot still waiting. */
void pw_cts_tracker_wait_slots(pw_cts_tracker_t* tracker, size_t first, size_t count,
                               const char* what);
/* Waits until |target| done calls happened; fails the test on timeout. */
void pw_cts_tracker_wait(pw_cts_tracker_t* tracker, size_t target, const char* what);
/* Asserts slot |i| completed exactly once (|calls| == |want_calls|). */
void pw_cts_tracker_expect_calls(pw_cts_tracker_t* tracker, size_t i, uint32_t want_calls);

#endif /* PW_TESTS_CTS_CTS_H_ */
