/* Linked into every Criterion binary. Under LeakSanitizer a leak inside a
 * Criterion test is printed but the test still passes (docs/toolchain.md); every
 * suite therefore declares `.fini = pw_test_check_leaks`, which runs in the
 * test's worker process and crashes the test if LSan finds a leak. Without
 * ASan it is a no-op. */
#include <stdio.h>
#include <stdlib.h>

#include "support/test_allocators.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PW_HAVE_LSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define PW_HAVE_LSAN 1
#endif

#ifdef PW_HAVE_LSAN
#include <sanitizer/lsan_interface.h>
#endif

void pw_test_check_leaks(void) {
#ifdef PW_HAVE_LSAN
  if (__lsan_do_recoverable_leak_check() != 0) {
    fprintf(stderr, "LeakSanitizer reported a leak in this test\n");
    abort();
  }
#endif
}
