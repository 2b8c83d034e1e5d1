/* libpathways: pluggable memory allocation.
 *
 * Every object the library creates takes a pw_allocator_t (or the system
 * default) and frees itself with it; nothing is allocated behind the host's
 * back (statuses excepted, see status.h). The struct is passed by value and
 * copied into the objects that use it; |self| must outlive them.
 *
 * Methods:
 *   alloc(self, size, alignment): |alignment| is a power of two no larger
 *     than 4096; returns NULL on failure. |size| is never 0.
 *   free(self, ptr, size): |size| is the size passed to alloc, so counting or
 *     pool allocators need no headers. |ptr| is never NULL.
 * Both must be callable from any thread.
 */
#ifndef PATHWAYS_ALLOCATOR_H_
#define PATHWAYS_ALLOCATOR_H_

#include "pathways/api.h"
#include "pathways/status.h"

PW_EXTERN_C_BEGIN

typedef struct pw_allocator_t {
  void* self;
  void* (*alloc)(void* self, size_t size, size_t alignment);
  void (*free)(void* self, void* ptr, size_t size);
} pw_allocator_t;

/* The C library's allocator (aligned_alloc/free). */
PW_API pw_allocator_t pw_allocator_system(void);

/* True when |allocator| has both methods set. */
static inline bool pw_allocator_is_valid(pw_allocator_t allocator) {
  return allocator.alloc != NULL && allocator.free != NULL;
}

/* Allocates |size| bytes aligned to |alignment| (0 means max_align_t) into
 * |*out_ptr|. Returns RESOURCE_EXHAUSTED naming |size| on failure, with
 * |*out_ptr| set to NULL. A |size| of 0 is INVALID_ARGUMENT. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_allocator_malloc(
    pw_allocator_t allocator, size_t size, size_t alignment, void** out_ptr);

/* As pw_allocator_malloc, with the memory zeroed. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_allocator_calloc(
    pw_allocator_t allocator, size_t size, size_t alignment, void** out_ptr);

/* Allocates |count| * |element_size| zeroed bytes; the product is checked
 * for overflow (OUT_OF_RANGE). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_allocator_calloc_array(
    pw_allocator_t allocator, size_t count, size_t element_size,
    size_t alignment, void** out_ptr);

/* Frees |ptr| of |size| bytes; NULL is a no-op. */
PW_API void pw_allocator_free(pw_allocator_t allocator, void* ptr, size_t size);

PW_EXTERN_C_END

#endif /* PATHWAYS_ALLOCATOR_H_ */
