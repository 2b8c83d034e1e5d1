/* Internal: the PW_ATOMICS_C11 (tsan preset) ring layout and its SPSC
 * operations. Include ring.h, never this file. Every shared access goes
 * through base/atomics.h, so ThreadSanitizer sees each synchronisation.
 *
 * SPSC: free-running 64-bit indices, |tail| written by the producer and
 * |head| by the consumer, each on its own cache line with the owner's cached
 * copy of the other side's index; the other side's line is read (acquire)
 * only when the cached copy says full/empty. Slots are plain pointers: a
 * slot is written before the release store of |tail| that publishes it and
 * read before the release store of |head| that frees it.
 *
 * MPSC/MPMC rings use |cells| and the same |tail|/|head| lines as Vyukov
 * tickets (ring_vyukov.h). */
#ifndef PW_BENCH_RING_C11_H_
#define PW_BENCH_RING_C11_H_

#ifndef PW_BENCH_RING_H_
#error "include completion/ring.h, not completion/ring_c11.h"
#endif

struct pw_ring_t {
  /* Read-only after creation. */
  void** slots;           /* SPSC: capacity slots */
  pw__ring_cell_t* cells; /* MPSC/MPMC: capacity cells */
  uint64_t mask;
  uint32_t capacity;
  pw_ring_kind_t kind;
  const char* name;
  pw_allocator_t allocator;
  size_t alloc_size;
  /* Producer line. */
  _Alignas(PW_CACHE_LINE) pw_atomic_u64_t tail;
  uint64_t cached_head; /* SPSC producer's last view of |head| */
  /* Consumer line. */
  _Alignas(PW_CACHE_LINE) pw_atomic_u64_t head;
  uint64_t cached_tail; /* SPSC consumer's last view of |tail| */
};

#define PW__RING_STORAGE_SLOTS(kind, capacity) (capacity)
#define PW__RING_SLOT_SIZE(kind) \
  ((kind) == PW_RING_SPSC ? sizeof(void*) : sizeof(pw__ring_cell_t))

static inline size_t pw__ring_spsc_size(pw_ring_t* ring) {
  uint64_t head = pw_atomic_load_u64_acquire(&ring->head);
  uint64_t tail = pw_atomic_load_u64_acquire(&ring->tail);
  return (size_t)(tail - head);
}

static inline bool pw_ring_push_spsc(pw_ring_t* ring, void* item) {
  PW__RING_CHECK_KIND(ring, PW_RING_SPSC);
  uint64_t tail = pw_atomic_load_u64_relaxed(&ring->tail);
  if (PW_UNLIKELY(tail - ring->cached_head >= ring->capacity)) {
    ring->cached_head = pw_atomic_load_u64_acquire(&ring->head);
    if (tail - ring->cached_head >= ring->capacity) return false;
  }
  ring->slots[tail & ring->mask] = item;
  pw_atomic_store_u64_release(&ring->tail, tail + 1);
  return true;
}

static inline bool pw_ring_pop_spsc(pw_ring_t* ring, void** out_item) {
  PW__RING_CHECK_KIND(ring, PW_RING_SPSC);
  uint64_t head = pw_atomic_load_u64_relaxed(&ring->head);
  if (PW_UNLIKELY(head == ring->cached_tail)) {
    ring->cached_tail = pw_atomic_load_u64_acquire(&ring->tail);
    if (head == ring->cached_tail) return false;
  }
  *out_item = ring->slots[head & ring->mask];
  pw_atomic_store_u64_release(&ring->head, head + 1);
  return true;
}

static inline size_t pw_ring_push_batch_spsc(pw_ring_t* ring,
                                             void* const* items,
                                             size_t count) {
  PW__RING_CHECK_KIND(ring, PW_RING_SPSC);
  uint64_t tail = pw_atomic_load_u64_relaxed(&ring->tail);
  uint64_t room = ring->capacity - (tail - ring->cached_head);
  if (room < count) {
    ring->cached_head = pw_atomic_load_u64_acquire(&ring->head);
    room = ring->capacity - (tail - ring->cached_head);
  }
  size_t n = count < room ? count : (size_t)room;
  if (n == 0) return 0;
  for (size_t i = 0; i < n; ++i) {
    ring->slots[(tail + i) & ring->mask] = items[i];
  }
  pw_atomic_store_u64_release(&ring->tail, tail + n);
  return n;
}

static inline size_t pw_ring_pop_batch_spsc(pw_ring_t* ring,
                                            void** out_items, size_t max) {
  PW__RING_CHECK_KIND(ring, PW_RING_SPSC);
  uint64_t head = pw_atomic_load_u64_relaxed(&ring->head);
  uint64_t avail = ring->cached_tail - head;
  if (avail < max) {
    ring->cached_tail = pw_atomic_load_u64_acquire(&ring->tail);
    avail = ring->cached_tail - head;
  }
  size_t n = max < avail ? max : (size_t)avail;
  if (n == 0) return 0;
  for (size_t i = 0; i < n; ++i) {
    out_items[i] = ring->slots[(head + i) & ring->mask];
  }
  pw_atomic_store_u64_release(&ring->head, head + n);
  return n;
}

/* Called by pw_ring_create for an SPSC ring on fresh memory. */
static inline void pw__ring_spsc_init(pw_ring_t* ring, void* storage,
                                      size_t capacity) {
  ring->slots = (void**)storage;
  ring->mask = capacity - 1;
  pw_atomic_init_u64(&ring->tail, 0);
  pw_atomic_init_u64(&ring->head, 0);
  ring->cached_head = 0;
  ring->cached_tail = 0;
}

#endif /* PW_BENCH_RING_C11_H_ */
