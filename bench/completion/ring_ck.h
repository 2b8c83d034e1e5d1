/* Internal: the default build's ring layout and its SPSC operations, on
 * Concurrency Kit's ck_ring. Include ring.h, never this file. The only file
 * of bench/completion that includes <ck_ring.h>.
 *
 * ck_ring keeps one slot free (a ring of size S holds S - 1 items), so the
 * ck ring gets 2 * capacity slots and the exact |capacity| bound is checked
 * here: a push reserves a slot (which reads the fill level and changes
 * nothing), refuses it when |capacity| items are in, else fills and commits
 * it. The batch operations have no ck_ring counterpart: they touch the same
 * ck_ring fields with the ck_pr loads, stores and fences that ck_ring's
 * single-producer/single-consumer paths use.
 *
 * MPSC/MPMC rings use the Vyukov fields (ring_vyukov.h). */
#ifndef PW_BENCH_RING_CK_H_
#define PW_BENCH_RING_CK_H_

#ifndef PW_BENCH_RING_H_
#error "include completion/ring.h, not completion/ring_ck.h"
#endif

#include <ck_pr.h>
#include <ck_ring.h>

struct pw_ring_t {
  /* Read-only after creation. */
  ck_ring_buffer_t* buffer; /* SPSC: 2 * capacity slots */
  pw__ring_cell_t* cells;   /* MPSC/MPMC: capacity cells */
  uint64_t mask;            /* MPSC/MPMC */
  uint32_t capacity;
  pw_ring_kind_t kind;
  const char* name;
  pw_allocator_t allocator;
  size_t alloc_size;
  /* SPSC: ck_ring puts the consumer and the producer indices on their own
   * cache lines. */
  _Alignas(PW_CACHE_LINE) ck_ring_t ck;
  /* MPSC/MPMC: producers' and consumers' tickets, a line each. */
  _Alignas(PW_CACHE_LINE) pw_atomic_u64_t tail;
  _Alignas(PW_CACHE_LINE) pw_atomic_u64_t head;
};

#define PW__RING_STORAGE_SLOTS(kind, capacity) \
  ((kind) == PW_RING_SPSC ? (capacity) * 2 : (capacity))
#define PW__RING_SLOT_SIZE(kind) \
  ((kind) == PW_RING_SPSC ? sizeof(ck_ring_buffer_t) : sizeof(pw__ring_cell_t))

static inline size_t pw__ring_spsc_size(pw_ring_t* ring) {
  unsigned int consumer = ck_pr_load_uint(&ring->ck.c_head);
  ck_pr_fence_load();
  unsigned int producer = ck_pr_load_uint(&ring->ck.p_tail);
  return (size_t)(producer - consumer);
}

static inline bool pw_ring_push_spsc(pw_ring_t* ring, void* item) {
  PW__RING_CHECK_KIND(ring, PW_RING_SPSC);
  unsigned int used;
  ck_ring_buffer_t* slot = (ck_ring_buffer_t*)ck_ring_enqueue_reserve_spsc_size(
      &ring->ck, ring->buffer, &used);
  if (PW_UNLIKELY(slot == NULL || used >= ring->capacity)) return false;
  slot->value = item;
  ck_ring_enqueue_commit_spsc(&ring->ck);
  return true;
}

static inline bool pw_ring_pop_spsc(pw_ring_t* ring, void** out_item) {
  PW__RING_CHECK_KIND(ring, PW_RING_SPSC);
  return ck_ring_dequeue_spsc(&ring->ck, ring->buffer, out_item);
}

static inline size_t pw_ring_push_batch_spsc(pw_ring_t* ring,
                                             void* const* items,
                                             size_t count) {
  PW__RING_CHECK_KIND(ring, PW_RING_SPSC);
  unsigned int consumer = ck_pr_load_uint(&ring->ck.c_head);
  /* The slot writes below must not move before this load: the consumer may
   * still be reading those slots. */
  ck_pr_fence_acquire();
  unsigned int producer = ring->ck.p_tail; /* only this thread writes it */
  size_t room = ring->capacity - (size_t)(producer - consumer);
  size_t n = count < room ? count : room;
  if (n == 0) return 0;
  const unsigned int mask = ring->ck.mask;
  for (size_t i = 0; i < n; ++i) {
    ring->buffer[(producer + (unsigned int)i) & mask].value = items[i];
  }
  ck_pr_fence_store();
  ck_pr_store_uint(&ring->ck.p_tail, producer + (unsigned int)n);
  return n;
}

static inline size_t pw_ring_pop_batch_spsc(pw_ring_t* ring,
                                            void** out_items, size_t max) {
  PW__RING_CHECK_KIND(ring, PW_RING_SPSC);
  unsigned int consumer = ring->ck.c_head; /* only this thread writes it */
  unsigned int producer = ck_pr_load_uint(&ring->ck.p_tail);
  size_t avail = (size_t)(producer - consumer);
  size_t n = max < avail ? max : avail;
  if (n == 0) return 0;
  ck_pr_fence_load();
  const unsigned int mask = ring->ck.mask;
  for (size_t i = 0; i < n; ++i) {
    out_items[i] = ring->buffer[(consumer + (unsigned int)i) & mask].value;
  }
  /* The slot reads complete before the producer may reuse the slots. */
  ck_pr_fence_release();
  ck_pr_store_uint(&ring->ck.c_head, consumer + (unsigned int)n);
  return n;
}

/* Called by pw_ring_create for an SPSC ring on fresh memory. */
static inline void pw__ring_spsc_init(pw_ring_t* ring, void* storage,
                                      size_t capacity) {
  ring->buffer = (ck_ring_buffer_t*)storage;
  ck_ring_init(&ring->ck, (unsigned int)(capacity * 2));
}

#endif /* PW_BENCH_RING_CK_H_ */
