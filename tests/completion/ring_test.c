/* Unit tests of the bounded rings (bench/completion/ring.h): FIFO order, full and
 * empty behaviour, back-pressure statuses, capacity validation, batch
 * operations, and allocation failure during creation. Single-threaded; the
 * concurrent properties are in ring_stress.c. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "completion/ring.h"
#include "support/test_allocators.h"

TestSuite(ring, .fini = pw_test_check_leaks);

static const pw_ring_kind_t kAllKinds[] = {PW_RING_SPSC, PW_RING_MPSC,
                                           PW_RING_MPMC};
#define PW_KIND_COUNT (sizeof(kAllKinds) / sizeof(kAllKinds[0]))

static void* item(uintptr_t i) { return (void*)(i * 8 + 8); }

/* Single-item operations of whichever flavour |ring| is. */
static bool push_any(pw_ring_t* ring, void* value) {
  switch (pw_ring_kind(ring)) {
    case PW_RING_SPSC: return pw_ring_push_spsc(ring, value);
    case PW_RING_MPSC: return pw_ring_push_mpsc(ring, value);
    case PW_RING_MPMC: return pw_ring_push_mpmc(ring, value);
  }
  return false;
}

static bool pop_any(pw_ring_t* ring, void** out) {
  switch (pw_ring_kind(ring)) {
    case PW_RING_SPSC: return pw_ring_pop_spsc(ring, out);
    case PW_RING_MPSC: return pw_ring_pop_mpsc(ring, out);
    case PW_RING_MPMC: return pw_ring_pop_mpmc(ring, out);
  }
  return false;
}

static pw_status_t push_any_or_status(pw_ring_t* ring, void* value) {
  switch (pw_ring_kind(ring)) {
    case PW_RING_SPSC: return pw_ring_push_spsc_or_status(ring, value);
    case PW_RING_MPSC: return pw_ring_push_mpsc_or_status(ring, value);
    case PW_RING_MPMC: return pw_ring_push_mpmc_or_status(ring, value);
  }
  return NULL;
}

static pw_ring_t* make_ring(pw_allocator_t a, pw_ring_kind_t kind,
                            const char* name, size_t capacity) {
  pw_ring_t* ring = NULL;
  pw_status_t s = pw_ring_create(a, kind, name, capacity, &ring);
  cr_assert_null(s, "%s", pw_status_message(s));
  cr_assert_not_null(ring);
  return ring;
}

Test(ring, fifo_order_across_many_wraps) {
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  for (size_t k = 0; k < PW_KIND_COUNT; ++k) {
    pw_ring_t* ring = make_ring(pw_test_allocator(&t), kAllKinds[k], "fifo", 8);
    cr_assert_eq(pw_ring_capacity(ring), 8);
    cr_assert_eq(pw_ring_kind(ring), kAllKinds[k]);
    uintptr_t next_in = 0, next_out = 0;
    /* Vary the fill level so the indices wrap at every offset. */
    for (int round = 0; round < 200; ++round) {
      size_t fill = (size_t)(round % 9);
      for (size_t i = 0; i < fill; ++i) {
        cr_assert(push_any(ring, item(next_in)), "kind %d round %d", kAllKinds[k], round);
        ++next_in;
      }
      cr_assert_eq(pw_ring_size_approx(ring), fill);
      void* out = NULL;
      while (pop_any(ring, &out)) {
        cr_assert_eq(out, item(next_out), "kind %d: got %p, want %p",
                     kAllKinds[k], out, item(next_out));
        ++next_out;
      }
      cr_assert_eq(next_out, next_in);
    }
    pw_ring_destroy(ring);
  }
  cr_assert_eq(pw_test_allocator_live(&t), 0);
}

Test(ring, full_ring_refuses_and_keeps_its_items) {
  for (size_t k = 0; k < PW_KIND_COUNT; ++k) {
    pw_ring_t* ring = make_ring(pw_allocator_system(), kAllKinds[k], "dispatch.slice0", 4);
    for (uintptr_t i = 0; i < 4; ++i) cr_assert(push_any(ring, item(i)));
    cr_assert_not(push_any(ring, item(99)), "kind %d accepted a 5th item", kAllKinds[k]);
    cr_assert_eq(pw_ring_size_approx(ring), 4);

    pw_status_t s = push_any_or_status(ring, item(99));
    cr_assert_eq(pw_status_code(s), PW_STATUS_RESOURCE_EXHAUSTED);
    cr_assert_str_eq(pw_status_message(s),
                     "ring \"dispatch.slice0\" is full (capacity 4)");
    pw_status_free(s);

    void* out = NULL;
    cr_assert(pop_any(ring, &out));
    cr_assert_eq(out, item(0), "a refused push changed the ring");
    cr_assert_null(push_any_or_status(ring, item(4)));
    for (uintptr_t i = 1; i <= 4; ++i) {
      cr_assert(pop_any(ring, &out));
      cr_assert_eq(out, item(i));
    }
    pw_ring_destroy(ring);
  }
}

Test(ring, empty_ring_pops_nothing_and_null_is_an_item) {
  for (size_t k = 0; k < PW_KIND_COUNT; ++k) {
    pw_ring_t* ring = make_ring(pw_allocator_system(), kAllKinds[k], NULL, 2);
    cr_assert_str_eq(pw_ring_name(ring), "");
    void* out = (void*)0x1234;
    cr_assert_not(pop_any(ring, &out));
    cr_assert_eq(out, (void*)0x1234, "a failed pop wrote its out-param");
    cr_assert(push_any(ring, NULL));
    cr_assert(pop_any(ring, &out));
    cr_assert_null(out);
    cr_assert_not(pop_any(ring, &out));
    cr_assert_eq(pw_ring_size_approx(ring), 0);
    pw_ring_destroy(ring);
  }
}

Test(ring, capacity_must_be_a_power_of_two_of_at_least_two) {
  struct { size_t capacity; const char* needle; } bad[] = {
      {0, "capacity 0 is too small"},
      {1, "capacity 1 is too small"},
      {3, "capacity 3 is not a power of two"},
      {12, "capacity 12 is not a power of two"},
      {1000, "capacity 1000 is not a power of two"},
      {PW_RING_MAX_CAPACITY * 2, "exceeds the maximum"},
  };
  for (size_t k = 0; k < PW_KIND_COUNT; ++k) {
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
      pw_ring_t* ring = (pw_ring_t*)0x1;
      pw_status_t s = pw_ring_create(pw_allocator_system(), kAllKinds[k],
                                     "cq", bad[i].capacity, &ring);
      cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT,
                   "capacity %zu", bad[i].capacity);
      cr_assert(strstr(pw_status_message(s), bad[i].needle), "%s",
                pw_status_message(s));
      cr_assert(strstr(pw_status_message(s), "ring \"cq\""), "%s",
                pw_status_message(s));
      cr_assert_null(ring, "out_ring not cleared on failure");
      pw_status_free(s);
    }
  }
  pw_ring_t* ring = NULL;
  pw_status_t s = pw_ring_create(pw_allocator_system(), (pw_ring_kind_t)7, "k", 8, &ring);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(pw_status_message(s), "unknown ring kind 7"), "%s", pw_status_message(s));
  pw_status_free(s);
  s = pw_ring_create(pw_allocator_system(), PW_RING_SPSC, "k", 8, NULL);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  pw_allocator_t none = {0};
  s = pw_ring_create(none, PW_RING_SPSC, "k", 8, &ring);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  cr_assert_null(ring);
  pw_status_free(s);
}

Test(ring, name_is_copied) {
  char name[16];
  strcpy(name, "before");
  pw_ring_t* ring = make_ring(pw_allocator_system(), PW_RING_MPMC, name, 16);
  strcpy(name, "after");
  cr_assert_str_eq(pw_ring_name(ring), "before");
  pw_ring_destroy(ring);
  pw_ring_destroy(NULL);
}

Test(ring, spsc_batches_fill_partially_and_keep_order) {
  pw_ring_t* ring = make_ring(pw_allocator_system(), PW_RING_SPSC, "batch", 16);
  void* in[40];
  void* out[40];
  for (uintptr_t i = 0; i < 40; ++i) in[i] = item(i);
  cr_assert_eq(pw_ring_push_batch_spsc(ring, in, 10), 10);
  cr_assert_eq(pw_ring_push_batch_spsc(ring, in + 10, 10), 6, "only 6 slots were free");
  cr_assert_eq(pw_ring_push_batch_spsc(ring, in + 16, 4), 0);
  cr_assert_not(pw_ring_push_spsc(ring, in[16]));
  cr_assert_eq(pw_ring_pop_batch_spsc(ring, out, 5), 5);
  for (size_t i = 0; i < 5; ++i) cr_assert_eq(out[i], in[i]);
  /* Wraps around the end of the slot array. */
  cr_assert_eq(pw_ring_push_batch_spsc(ring, in + 16, 24), 5);
  cr_assert_eq(pw_ring_pop_batch_spsc(ring, out, 40), 16);
  for (size_t i = 0; i < 16; ++i) cr_assert_eq(out[i], in[5 + i], "slot %zu", i);
  cr_assert_eq(pw_ring_pop_batch_spsc(ring, out, 40), 0);
  cr_assert_eq(pw_ring_push_batch_spsc(ring, in, 0), 0);
  /* Singles and batches interleave in one FIFO. */
  cr_assert(pw_ring_push_spsc(ring, in[0]));
  cr_assert_eq(pw_ring_push_batch_spsc(ring, in + 1, 2), 2);
  void* one = NULL;
  cr_assert(pw_ring_pop_spsc(ring, &one));
  cr_assert_eq(one, in[0]);
  cr_assert_eq(pw_ring_pop_batch_spsc(ring, out, 1), 1);
  cr_assert_eq(out[0], in[1]);
  cr_assert(pw_ring_pop_spsc(ring, &one));
  cr_assert_eq(one, in[2]);
  pw_ring_destroy(ring);
}

Test(ring, large_capacity_round_trip) {
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  size_t capacity = 1u << 16;
  pw_ring_t* ring = make_ring(pw_test_allocator(&t), PW_RING_MPMC, "big", capacity);
  for (uintptr_t i = 0; i < capacity; ++i) cr_assert(pw_ring_push_mpmc(ring, item(i)));
  cr_assert_not(pw_ring_push_mpmc(ring, item(0)));
  for (uintptr_t i = 0; i < capacity; ++i) {
    void* out = NULL;
    cr_assert(pw_ring_pop_mpmc(ring, &out));
    cr_assert_eq(out, item(i));
  }
  pw_ring_destroy(ring);
  cr_assert_eq(pw_test_allocator_live(&t), 0);
  cr_assert_eq(atomic_load(&t.size_mismatches), 0);
}

/* Sweep body: create, use and destroy one ring of the kind in |user|. */
static bool create_use_destroy(pw_allocator_t a, bool expect_failure, void* user) {
  pw_ring_kind_t kind = *(const pw_ring_kind_t*)user;
  pw_ring_t* ring = (pw_ring_t*)0x1;
  pw_status_t s = pw_ring_create(a, kind, "sweep", 64, &ring);
  if (expect_failure) {
    bool ok = pw_status_code(s) == PW_STATUS_RESOURCE_EXHAUSTED && ring == NULL &&
              strstr(pw_status_message(s), "ring \"sweep\" of capacity 64") != NULL;
    pw_status_free(s);
    return ok;
  }
  if (s != NULL || ring == NULL) {
    pw_status_free(s);
    return false;
  }
  bool ok = push_any(ring, item(1));
  void* out = NULL;
  ok = ok && pop_any(ring, &out) && out == item(1);
  pw_ring_destroy(ring);
  return ok;
}

Test(ring, allocation_failure_sweep_over_creation) {
  for (size_t k = 0; k < PW_KIND_COUNT; ++k) {
    char why[256] = "";
    pw_ring_kind_t kind = kAllKinds[k];
    int points = pw_test_allocator_sweep(create_use_destroy, &kind, why);
    cr_assert_gt(points, 0, "kind %d: %s", kind, why);
  }
}
