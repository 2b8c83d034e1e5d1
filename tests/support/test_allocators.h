/* Test allocators: a counting allocator that detects leaks and double frees,
 * and a failing allocator that fails the Nth allocation (for sweeps that
 * prove every create path returns RESOURCE_EXHAUSTED cleanly). Both wrap the
 * system allocator and are thread-safe. */
#ifndef PW_TESTS_SUPPORT_TEST_ALLOCATORS_H_
#define PW_TESTS_SUPPORT_TEST_ALLOCATORS_H_

#include <stdatomic.h>

#include "pathways/allocator.h"

typedef struct pw_test_allocator_t {
  atomic_size_t allocations;   /* successful allocs */
  atomic_size_t frees;
  atomic_size_t live_bytes;
  atomic_size_t peak_bytes;
  atomic_size_t attempts;      /* alloc calls, failed ones included */
  atomic_size_t size_mismatches; /* free called with a size != alloc size */
  /* Fail the allocation whose 1-based attempt number equals fail_at (0 =
   * never). With fail_after set, every attempt from fail_at on fails. */
  size_t fail_at;
  bool fail_after;
} pw_test_allocator_t;

/* Resets counters and the failure point. */
void pw_test_allocator_init(pw_test_allocator_t* t);

/* A pw_allocator_t routed through |t|. */
pw_allocator_t pw_test_allocator(pw_test_allocator_t* t);

/* Live allocations: allocations - frees. */
size_t pw_test_allocator_live(pw_test_allocator_t* t);

/* Runs |body(allocator, user)| once with no failure to count its allocation
 * attempts N, then N more times failing attempt 1..N in turn. |body| must
 * return true when it behaved correctly (for an injected failure: reported
 * RESOURCE_EXHAUSTED and cleaned up). After each run the allocator must have
 * no live allocation. Returns the number of failure points swept, or -1 and
 * fills |why| (if non-NULL, 256 bytes) on the first violation. */
typedef bool (*pw_test_sweep_fn_t)(pw_allocator_t allocator, bool expect_failure,
                                   void* user);
int pw_test_allocator_sweep(pw_test_sweep_fn_t body, void* user, char* why);



/* Criterion suites declare `TestSuite(name, .fini = pw_test_check_leaks)`:
 * under ASan it fails the test if LeakSanitizer finds a leak. */
void pw_test_check_leaks(void);

#endif /* PW_TESTS_SUPPORT_TEST_ALLOCATORS_H_ */
