/* Bounded rings: creation, validation and the slow paths. The operations
 * themselves are inline in ring.h and its two implementations. */
#include "completion/ring.h"

#include <stdio.h>
#include <string.h>

/* One block: [pw_ring_t][slots][name NUL], the struct cache-line aligned so
 * the producer and consumer indices keep their own lines. */
static size_t pw_ring_round_up(size_t value, size_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}

static const char* pw_ring_kind_string(pw_ring_kind_t kind) {
  switch (kind) {
    case PW_RING_SPSC: return "SPSC";
    case PW_RING_MPSC: return "MPSC";
    case PW_RING_MPMC: return "MPMC";
  }
  return "?";
}

static pw_status_t pw_ring_validate(pw_ring_kind_t kind, const char* name,
                                    size_t capacity) {
  if (kind != PW_RING_SPSC && kind != PW_RING_MPSC && kind != PW_RING_MPMC) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "ring \"%s\": unknown ring kind %d", name,
                          (int)kind);
  }
  if (capacity < 2) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "ring \"%s\": capacity %zu is too small (a power "
                          "of two >= 2 is required)",
                          name, capacity);
  }
  if ((capacity & (capacity - 1)) != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "ring \"%s\": capacity %zu is not a power of two",
                          name, capacity);
  }
  if (capacity > PW_RING_MAX_CAPACITY) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "ring \"%s\": capacity %zu exceeds the maximum %zu",
                          name, capacity, PW_RING_MAX_CAPACITY);
  }
  return NULL;
}

pw_status_t pw_ring_create(pw_allocator_t allocator, pw_ring_kind_t kind,
                           const char* name, size_t capacity,
                           pw_ring_t** out_ring) {
  if (out_ring == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_ring_create: out_ring is NULL");
  }
  *out_ring = NULL;
  if (name == NULL) name = "";
  PW_RETURN_IF_ERROR(pw_ring_validate(kind, name, capacity));

  size_t name_size = strlen(name) + 1;
  size_t slots_offset = pw_ring_round_up(sizeof(pw_ring_t), PW_CACHE_LINE);
  size_t slots_size = PW__RING_STORAGE_SLOTS(kind, capacity) * PW__RING_SLOT_SIZE(kind);
  size_t total = slots_offset + slots_size + name_size;

  void* block = NULL;
  PW_RETURN_IF_ERROR_CTX(
      pw_allocator_malloc(allocator, total, PW_CACHE_LINE, &block),
      "creating %s ring \"%s\" of capacity %zu", pw_ring_kind_string(kind),
      name, capacity);

  pw_ring_t* ring = (pw_ring_t*)block;
  memset(ring, 0, sizeof(*ring));
  ring->capacity = (uint32_t)capacity;
  ring->kind = kind;
  ring->allocator = allocator;
  ring->alloc_size = total;
  char* name_copy = (char*)block + slots_offset + slots_size;
  memcpy(name_copy, name, name_size);
  ring->name = name_copy;
  void* storage = (char*)block + slots_offset;
  if (kind == PW_RING_SPSC) {
    pw__ring_spsc_init(ring, storage, capacity);
  } else {
    pw__ring_vyukov_init(ring, storage, capacity);
  }

  *out_ring = ring;
  return NULL;
}

void pw_ring_destroy(pw_ring_t* ring) {
  if (ring == NULL) return;
  pw_allocator_t allocator = ring->allocator;
  pw_allocator_free(allocator, ring, ring->alloc_size);
}

pw_status_t pw_ring_full_status(const pw_ring_t* ring) {
  return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                        "ring \"%s\" is full (capacity %zu)", ring->name,
                        (size_t)ring->capacity);
}
