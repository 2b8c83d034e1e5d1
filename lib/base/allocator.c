#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "pathways/allocator.h"

static void* pw_system_alloc(void* self, size_t size, size_t alignment) {
  (void)self;
  if (alignment <= alignof(max_align_t)) return malloc(size);
  /* aligned_alloc wants size to be a multiple of alignment. */
  size_t rounded = (size + alignment - 1) & ~(alignment - 1);
  if (rounded < size) return NULL;
  return aligned_alloc(alignment, rounded);
}

static void pw_system_free(void* self, void* ptr, size_t size) {
  (void)self;
  (void)size;
  free(ptr);
}

pw_allocator_t pw_allocator_system(void) {
  pw_allocator_t allocator = {NULL, pw_system_alloc, pw_system_free};
  return allocator;
}

static bool pw_alignment_is_valid(size_t alignment) {
  return alignment != 0 && alignment <= 4096 &&
         (alignment & (alignment - 1)) == 0;
}

pw_status_t pw_allocator_malloc(pw_allocator_t allocator, size_t size,
                                size_t alignment, void** out_ptr) {
  if (out_ptr == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_allocator_malloc: out_ptr is NULL");
  }
  *out_ptr = NULL;
  if (!pw_allocator_is_valid(allocator)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "allocator has no alloc/free method");
  }
  if (size == 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "allocation of 0 bytes requested");
  }
  if (alignment == 0) alignment = alignof(max_align_t);
  if (!pw_alignment_is_valid(alignment)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "alignment %zu is not a power of two <= 4096",
                          alignment);
  }
  void* ptr = allocator.alloc(allocator.self, size, alignment);
  if (ptr == NULL) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "out of memory allocating %zu bytes", size);
  }
  *out_ptr = ptr;
  return NULL;
}

pw_status_t pw_allocator_calloc(pw_allocator_t allocator, size_t size,
                                size_t alignment, void** out_ptr) {
  PW_RETURN_IF_ERROR(pw_allocator_malloc(allocator, size, alignment, out_ptr));
  memset(*out_ptr, 0, size);
  return NULL;
}

pw_status_t pw_allocator_calloc_array(pw_allocator_t allocator, size_t count,
                                      size_t element_size, size_t alignment,
                                      void** out_ptr) {
  if (out_ptr) *out_ptr = NULL;
  if (element_size != 0 && count > SIZE_MAX / element_size) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE,
                          "array of %zu x %zu bytes overflows size_t", count,
                          element_size);
  }
  return pw_allocator_calloc(allocator, count * element_size, alignment,
                             out_ptr);
}

void pw_allocator_free(pw_allocator_t allocator, void* ptr, size_t size) {
  if (ptr == NULL || allocator.free == NULL) return;
  allocator.free(allocator.self, ptr, size);
}
