/* See pwpy_support.h. */
#include "pwpy_support.h"

#include <stdatomic.h>
#include <stdlib.h>

/* Each block carries a header with its size so that a free with a wrong
 * size is detected (the allocator contract passes the size back). */
#define PWPY_HEADER 64u

/* |refs| is one for the owner (dropped by destroy) plus one per live
 * block: objects allocated from a runtime (an execution's done event, say)
 * may outlive it in Python, and their last free then frees the counter. */
struct pwpy_counting_allocator_s {
  pw_allocator_t system;
  atomic_llong refs;
  atomic_llong live_blocks;
  atomic_llong live_bytes;
  atomic_llong peak_bytes;
  atomic_llong allocations;
  atomic_llong failed_allocations;
  atomic_llong mismatched_frees;
};

static void* pwpy_counting_alloc(void* self, size_t size, size_t alignment) {
  pwpy_counting_allocator_t* c = self;
  if (alignment < PWPY_HEADER) alignment = PWPY_HEADER;
  /* The header is |alignment| bytes so the user block keeps the alignment. */
  if (size > SIZE_MAX - alignment) {
    atomic_fetch_add(&c->failed_allocations, 1);
    return NULL;
  }
  unsigned char* raw = c->system.alloc(c->system.self, size + alignment, alignment);
  if (raw == NULL) {
    atomic_fetch_add(&c->failed_allocations, 1);
    return NULL;
  }
  unsigned char* user = raw + alignment;
  size_t* header = (size_t*)(void*)(user - 2 * sizeof(size_t));
  header[0] = size;
  header[1] = alignment;
  atomic_fetch_add(&c->refs, 1);
  atomic_fetch_add(&c->allocations, 1);
  atomic_fetch_add(&c->live_blocks, 1);
  long long live = atomic_fetch_add(&c->live_bytes, (long long)size) + (long long)size;
  long long peak = atomic_load(&c->peak_bytes);
  while (live > peak && !atomic_compare_exchange_weak(&c->peak_bytes, &peak, live)) {
  }
  return user;
}

static void pwpy_counting_free(void* self, void* ptr, size_t size) {
  pwpy_counting_allocator_t* c = self;
  unsigned char* user = ptr;
  size_t* header = (size_t*)(void*)(user - 2 * sizeof(size_t));
  size_t real_size = header[0];
  size_t alignment = header[1];
  if (real_size != size) atomic_fetch_add(&c->mismatched_frees, 1);
  atomic_fetch_sub(&c->live_blocks, 1);
  atomic_fetch_sub(&c->live_bytes, (long long)real_size);
  c->system.free(c->system.self, user - alignment, real_size + alignment);
  pwpy_counting_allocator_destroy(c);  /* drops this block's reference */
}

pwpy_counting_allocator_t* pwpy_counting_allocator_create(void) {
  pwpy_counting_allocator_t* c = calloc(1, sizeof(*c));
  if (c == NULL) return NULL;
  c->system = pw_allocator_system();
  atomic_init(&c->refs, 1);
  atomic_init(&c->live_blocks, 0);
  atomic_init(&c->live_bytes, 0);
  atomic_init(&c->peak_bytes, 0);
  atomic_init(&c->allocations, 0);
  atomic_init(&c->failed_allocations, 0);
  atomic_init(&c->mismatched_frees, 0);
  return c;
}

void pwpy_counting_allocator_destroy(pwpy_counting_allocator_t* counter) {
  if (atomic_fetch_sub(&counter->refs, 1) == 1) free(counter);
}

pw_allocator_t pwpy_counting_allocator_get(pwpy_counting_allocator_t* counter) {
  pw_allocator_t a = {counter, pwpy_counting_alloc, pwpy_counting_free};
  return a;
}

void pwpy_counting_allocator_stats(const pwpy_counting_allocator_t* counter,
                                   pwpy_memory_stats_t* out_stats) {
  /* atomic_load takes a non-const pointer in C11. */
  pwpy_counting_allocator_t* c = (pwpy_counting_allocator_t*)counter;
  out_stats->live_blocks = atomic_load(&c->live_blocks);
  out_stats->live_bytes = atomic_load(&c->live_bytes);
  out_stats->peak_bytes = atomic_load(&c->peak_bytes);
  out_stats->allocations = atomic_load(&c->allocations);
  out_stats->failed_allocations = atomic_load(&c->failed_allocations);
  out_stats->mismatched_frees = atomic_load(&c->mismatched_frees);
}

pw_status_t pwpy_status_make(pw_status_code_t code, const char* message) {
  if (code == PW_STATUS_OK) code = PW_STATUS_UNKNOWN;
  return pw_status_make(code, "%s", message ? message : "");
}

void pwpy_backend_destroy(pw_backend_t backend) {
  if (backend.vtable != NULL && backend.vtable->destroy != NULL) {
    backend.vtable->destroy(backend.self);
  }
}
