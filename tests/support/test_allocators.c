#include "support/test_allocators.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each block carries a small header with its size so a mismatched free size
 * is caught. */
typedef struct pw_test_block_header_t {
  size_t size;
  size_t offset; /* from the raw pointer to the user pointer */
} pw_test_block_header_t;

void pw_test_allocator_init(pw_test_allocator_t* t) {
  memset(t, 0, sizeof(*t));
}

static void pw_test_note_peak(pw_test_allocator_t* t, size_t live) {
  size_t peak = atomic_load(&t->peak_bytes);
  while (live > peak && !atomic_compare_exchange_weak(&t->peak_bytes, &peak, live)) {
  }
}

static void* pw_test_alloc(void* self, size_t size, size_t alignment) {
  pw_test_allocator_t* t = self;
  size_t attempt = atomic_fetch_add(&t->attempts, 1) + 1;
  if (t->fail_at != 0 &&
      (attempt == t->fail_at || (t->fail_after && attempt > t->fail_at))) {
    return NULL;
  }
  if (alignment < sizeof(pw_test_block_header_t)) alignment = sizeof(pw_test_block_header_t);
  size_t offset = alignment; /* header sits just before the user pointer */
  unsigned char* raw = aligned_alloc(alignment, ((offset + size + alignment - 1) / alignment) * alignment);
  if (raw == NULL) return NULL;
  unsigned char* user = raw + offset;
  pw_test_block_header_t* h = (pw_test_block_header_t*)(user - sizeof(*h));
  h->size = size;
  h->offset = offset;
  atomic_fetch_add(&t->allocations, 1);
  size_t live = atomic_fetch_add(&t->live_bytes, size) + size;
  pw_test_note_peak(t, live);
  return user;
}

static void pw_test_free(void* self, void* ptr, size_t size) {
  pw_test_allocator_t* t = self;
  unsigned char* user = ptr;
  pw_test_block_header_t* h = (pw_test_block_header_t*)(user - sizeof(*h));
  if (h->size != size) atomic_fetch_add(&t->size_mismatches, 1);
  atomic_fetch_add(&t->frees, 1);
  atomic_fetch_sub(&t->live_bytes, h->size);
  free(user - h->offset);
}

pw_allocator_t pw_test_allocator(pw_test_allocator_t* t) {
  pw_allocator_t a = {t, pw_test_alloc, pw_test_free};
  return a;
}

size_t pw_test_allocator_live(pw_test_allocator_t* t) {
  return atomic_load(&t->allocations) - atomic_load(&t->frees);
}

int pw_test_allocator_sweep(pw_test_sweep_fn_t body, void* user, char* why) {
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  if (!body(pw_test_allocator(&t), false, user)) {
    if (why) snprintf(why, 256, "body failed without any injected failure");
    return -1;
  }
  if (pw_test_allocator_live(&t) != 0) {
    if (why) snprintf(why, 256, "%zu allocations leaked without injected failure",
                      pw_test_allocator_live(&t));
    return -1;
  }
  size_t total = atomic_load(&t.attempts);
  for (size_t n = 1; n <= total; ++n) {
    pw_test_allocator_init(&t);
    t.fail_at = n;
    if (!body(pw_test_allocator(&t), true, user)) {
      if (why) snprintf(why, 256, "body misbehaved when allocation %zu of %zu failed", n, total);
      return -1;
    }
    if (pw_test_allocator_live(&t) != 0 || atomic_load(&t.size_mismatches) != 0) {
      if (why) snprintf(why, 256, "allocation %zu of %zu failed: %zu leaked, %zu size mismatches",
                        n, total, pw_test_allocator_live(&t), atomic_load(&t.size_mismatches));
      return -1;
    }
  }
  return (int)total;
}
