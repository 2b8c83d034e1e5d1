/* Unit tests of the observers' completion queue (bench/completion/completion.h):
 * per-producer order, back-pressure, batches, waiting with deadlines,
 * wake-ups, validation and allocation failure during creation. */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>

#include "completion/completion.h"
#include "support/test_allocators.h"

TestSuite(completion_queue, .fini = pw_test_check_leaks);

static void* rec(uintptr_t producer, uintptr_t seq) {
  return (void*)((producer << 32) | (seq + 1));
}

static pw_completion_queue_t* make_queue(pw_allocator_t a, size_t producers,
                                         size_t capacity) {
  pw_completion_queue_t* q = NULL;
  pw_status_t s = pw_completion_queue_create(a, "observer", producers, capacity, &q);
  cr_assert_null(s, "%s", pw_status_message(s));
  return q;
}

Test(completion_queue, records_of_each_producer_come_out_in_order) {
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_completion_queue_t* q = make_queue(pw_test_allocator(&t), 3, 16);
  for (uintptr_t seq = 0; seq < 10; ++seq) {
    for (uintptr_t p = 0; p < 3; ++p) {
      cr_assert(pw_completion_producer_post(pw_completion_queue_producer(q, p), rec(p, seq)));
    }
  }
  void* out[64];
  uintptr_t next[3] = {0, 0, 0};
  size_t total = 0;
  for (int round = 0; round < 10 && total < 30; ++round) {
    size_t n = pw_completion_queue_drain(q, out, 7); /* small: several rounds */
    cr_assert_leq(n, 7);
    for (size_t i = 0; i < n; ++i) {
      uintptr_t p = (uintptr_t)out[i] >> 32;
      cr_assert_lt(p, 3);
      cr_assert_eq(out[i], rec(p, next[p]), "producer %zu out of order", (size_t)p);
      next[p]++;
    }
    total += n;
  }
  cr_assert_eq(total, 30);
  cr_assert_eq(pw_completion_queue_drain(q, out, 64), 0);
  pw_completion_queue_destroy(q);
  cr_assert_eq(pw_test_allocator_live(&t), 0);
}

Test(completion_queue, a_full_producer_ring_is_back_pressure_with_a_named_status) {
  pw_completion_queue_t* q = make_queue(pw_allocator_system(), 2, 4);
  pw_completion_producer_t* p1 = pw_completion_queue_producer(q, 1);
  for (uintptr_t i = 0; i < 4; ++i) cr_assert(pw_completion_producer_post(p1, rec(1, i)));
  cr_assert_not(pw_completion_producer_post(p1, rec(1, 4)));
  pw_status_t s = pw_completion_producer_post_or_status(p1, rec(1, 4));
  cr_assert_eq(pw_status_code(s), PW_STATUS_RESOURCE_EXHAUSTED);
  cr_assert_str_eq(pw_status_message(s), "ring \"observer/producer 1\" is full (capacity 4)");
  pw_status_free(s);
  /* The other producer is unaffected. */
  cr_assert_null(pw_completion_producer_post_or_status(pw_completion_queue_producer(q, 0), rec(0, 0)));
  void* out[8];
  cr_assert_eq(pw_completion_queue_drain(q, out, 8), 5);
  cr_assert(pw_completion_producer_post(p1, rec(1, 4)));
  pw_completion_queue_destroy(q);
}

Test(completion_queue, batch_posts_publish_what_fits) {
  pw_completion_queue_t* q = make_queue(pw_allocator_system(), 1, 8);
  pw_completion_producer_t* p = pw_completion_queue_producer(q, 0);
  void* in[12];
  for (uintptr_t i = 0; i < 12; ++i) in[i] = rec(0, i);
  cr_assert_eq(pw_completion_producer_post_batch(p, in, 12), 8);
  void* out[12];
  cr_assert_eq(pw_completion_queue_drain(q, out, 3), 3);
  cr_assert_eq(pw_completion_producer_post_batch(p, in + 8, 4), 3);
  cr_assert_eq(pw_completion_queue_drain(q, out + 3, 12), 8);
  for (size_t i = 0; i < 11; ++i) cr_assert_eq(out[i], in[i]);
  pw_completion_queue_destroy(q);
}

Test(completion_queue, wait_honours_deadlines_and_wake) {
  pw_completion_queue_t* q = make_queue(pw_allocator_system(), 2, 8);
  cr_assert_not(pw_completion_queue_wait(q, PW_IMMEDIATE_PAST));
  pw_time_t start = pw_clock_now();
  cr_assert_not(pw_completion_queue_wait(q, pw_deadline_from_timeout(20 * 1000 * 1000)));
  cr_assert_geq(pw_clock_now() - start, 20 * 1000 * 1000, "returned before the deadline");
  pw_completion_queue_wake(q);
  cr_assert(pw_completion_queue_wait(q, PW_INFINITE_FUTURE), "a pending wake is kept");
  cr_assert(pw_completion_producer_post(pw_completion_queue_producer(q, 1), rec(1, 0)));
  cr_assert(pw_completion_queue_wait(q, PW_IMMEDIATE_PAST), "a posted record is seen");
  void* out[2];
  cr_assert_eq(pw_completion_queue_drain(q, out, 2), 1);
  pw_completion_queue_destroy(q);
}

typedef struct poster_t {
  pw_completion_queue_t* q;
  size_t count;
} poster_t;

static void* post_then_flush(void* p) {
  poster_t* a = p;
  pw_completion_producer_t* producer = pw_completion_queue_producer(a->q, 0);
  for (size_t i = 0; i < a->count; ++i) {
    while (!pw_completion_producer_post(producer, rec(0, i))) {
      pw_completion_producer_flush(producer);
      sched_yield();
    }
    if (i % 16 == 15) pw_completion_producer_flush(producer);
  }
  pw_completion_producer_flush(producer);
  return NULL;
}

Test(completion_queue, a_flush_wakes_an_observer_waiting_forever) {
  pw_completion_queue_t* q = make_queue(pw_allocator_system(), 1, 32);
  poster_t arg = {q, 5000};
  pthread_t thread;
  pthread_create(&thread, NULL, post_then_flush, &arg);
  size_t seen = 0;
  void* out[64];
  while (seen < arg.count) {
    /* No deadline: only the producer's flushes can end these waits. */
    cr_assert(pw_completion_queue_wait(q, PW_INFINITE_FUTURE));
    size_t n = pw_completion_queue_drain(q, out, 64);
    for (size_t i = 0; i < n; ++i) cr_assert_eq(out[i], rec(0, seen + i));
    seen += n;
  }
  pthread_join(thread, NULL);
  cr_assert_eq(seen, arg.count);
  pw_completion_queue_destroy(q);
}

Test(completion_queue, bad_arguments_are_named) {
  pw_completion_queue_t* q = (pw_completion_queue_t*)0x1;
  pw_status_t s = pw_completion_queue_create(pw_allocator_system(), "cq", 0, 8, &q);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(pw_status_message(s), "producer count 0"), "%s", pw_status_message(s));
  cr_assert_null(q);
  pw_status_free(s);
  s = pw_completion_queue_create(pw_allocator_system(), "cq", 2, 12, &q);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(pw_status_message(s), "capacity 12 is not a power of two"), "%s",
            pw_status_message(s));
  cr_assert(strstr(pw_status_message(s), "completion queue \"cq\""), "%s", pw_status_message(s));
  cr_assert_null(q);
  pw_status_free(s);
  s = pw_completion_queue_create(pw_allocator_system(), "cq", 2, 8, NULL);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  pw_completion_queue_destroy(NULL);
}

static bool create_queue_body(pw_allocator_t a, bool expect_failure, void* user) {
  (void)user;
  pw_completion_queue_t* q = (pw_completion_queue_t*)0x1;
  pw_status_t s = pw_completion_queue_create(a, "sweep", 3, 16, &q);
  if (expect_failure) {
    bool ok = pw_status_code(s) == PW_STATUS_RESOURCE_EXHAUSTED && q == NULL &&
              strstr(pw_status_message(s), "completion queue \"sweep\"") != NULL;
    pw_status_free(s);
    return ok;
  }
  if (s != NULL) {
    pw_status_free(s);
    return false;
  }
  bool ok = pw_completion_producer_post(pw_completion_queue_producer(q, 2), rec(2, 0));
  void* out[1];
  ok = ok && pw_completion_queue_drain(q, out, 1) == 1;
  pw_completion_queue_destroy(q);
  return ok;
}

Test(completion_queue, allocation_failure_sweep_over_creation) {
  char why[256] = "";
  int points = pw_test_allocator_sweep(create_queue_body, NULL, why);
  cr_assert_eq(points, 4, "%s (points %d)", why, points);
}
