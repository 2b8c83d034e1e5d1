/* Internal: Dmitry Vyukov's bounded MPMC queue, the MPSC and MPMC flavours
 * of ring.h in every build. Include ring.h, never this file.
 *
 * Cell i carries a sequence number: seq == pos means "free for the producer
 * of ticket pos", seq == pos + 1 "holds the item of ticket pos". Producers
 * claim tickets by CAS on |tail|, consumers on |head| (the single consumer
 * of MPSC owns |head| and skips the CAS); the item is published by a release
 * store of the cell's seq. Holds exactly |capacity| items (>= 2).
 *
 * Why not ck_ring's multi-producer enqueue: it publishes in ticket order, so
 * every producer spins until the producers with earlier tickets have
 * committed. With more producer threads than free cores a producer
 * preempted between its reservation and its commit stalls all the others
 * for a scheduler time slice, and the stalls convoy: 4 producers on 2 busy
 * cores took minutes for 1e6 items in ring_stress (0.2 s when it did not
 * convoy). Here a preempted producer delays only the consumer of its own
 * cell ("empty" until it publishes); other producers keep going.
 *
 * Every access goes through base/atomics.h: ck_pr in the default build, C11
 * atomics under PW_ATOMICS_C11 (TSan-clean). The ring struct provides
 * |cells|, |mask|, |tail| and |head|. */
#ifndef PW_BENCH_RING_VYUKOV_H_
#define PW_BENCH_RING_VYUKOV_H_

#ifndef PW_BENCH_RING_H_
#error "include completion/ring.h, not completion/ring_vyukov.h"
#endif

struct pw__ring_cell_t {
  pw_atomic_u64_t seq;
  void* data; /* published by the release store of |seq| */
};

static inline bool pw__ring_vyukov_push(pw_ring_t* ring, void* item) {
  uint64_t pos = pw_atomic_load_u64_relaxed(&ring->tail);
  pw__ring_cell_t* cell;
  for (;;) {
    cell = &ring->cells[pos & ring->mask];
    uint64_t seq = pw_atomic_load_u64_acquire(&cell->seq);
    int64_t diff = (int64_t)(seq - pos);
    if (diff == 0) {
      if (pw_atomic_cas_u64(&ring->tail, &pos, pos + 1)) break;
      /* Lost the ticket: |pos| now holds the current tail. */
    } else if (diff < 0) {
      return false; /* the cell still holds the item of the previous lap */
    } else {
      pos = pw_atomic_load_u64_relaxed(&ring->tail);
    }
  }
  cell->data = item;
  pw_atomic_store_u64_release(&cell->seq, pos + 1);
  return true;
}

static inline bool pw__ring_vyukov_pop(pw_ring_t* ring, void** out_item) {
  uint64_t pos = pw_atomic_load_u64_relaxed(&ring->head);
  pw__ring_cell_t* cell;
  for (;;) {
    cell = &ring->cells[pos & ring->mask];
    uint64_t seq = pw_atomic_load_u64_acquire(&cell->seq);
    int64_t diff = (int64_t)(seq - (pos + 1));
    if (diff == 0) {
      if (pw_atomic_cas_u64(&ring->head, &pos, pos + 1)) break;
    } else if (diff < 0) {
      return false; /* not yet published: empty as far as we can tell */
    } else {
      pos = pw_atomic_load_u64_relaxed(&ring->head);
    }
  }
  *out_item = cell->data;
  pw_atomic_store_u64_release(&cell->seq, pos + ring->mask + 1);
  return true;
}

/* The single consumer owns |head|: no CAS. */
static inline bool pw__ring_vyukov_pop_sc(pw_ring_t* ring, void** out_item) {
  uint64_t pos = pw_atomic_load_u64_relaxed(&ring->head);
  pw__ring_cell_t* cell = &ring->cells[pos & ring->mask];
  if (pw_atomic_load_u64_acquire(&cell->seq) != pos + 1) return false;
  *out_item = cell->data;
  pw_atomic_store_u64_release(&cell->seq, pos + ring->mask + 1);
  pw_atomic_store_u64_relaxed(&ring->head, pos + 1);
  return true;
}

static inline size_t pw__ring_vyukov_size(pw_ring_t* ring) {
  uint64_t head = pw_atomic_load_u64_acquire(&ring->head);
  uint64_t tail = pw_atomic_load_u64_acquire(&ring->tail);
  /* A consumer may have claimed past the snapshot of |tail|. */
  return tail > head ? (size_t)(tail - head) : 0;
}

static inline void pw__ring_vyukov_init(pw_ring_t* ring, void* storage,
                                        size_t capacity) {
  ring->cells = (pw__ring_cell_t*)storage;
  ring->mask = capacity - 1;
  pw_atomic_init_u64(&ring->tail, 0);
  pw_atomic_init_u64(&ring->head, 0);
  for (size_t i = 0; i < capacity; ++i) {
    pw_atomic_init_u64(&ring->cells[i].seq, i);
    ring->cells[i].data = NULL;
  }
}

static inline bool pw_ring_push_mpsc(pw_ring_t* ring, void* item) {
  PW__RING_CHECK_KIND(ring, PW_RING_MPSC);
  return pw__ring_vyukov_push(ring, item);
}

static inline bool pw_ring_pop_mpsc(pw_ring_t* ring, void** out_item) {
  PW__RING_CHECK_KIND(ring, PW_RING_MPSC);
  return pw__ring_vyukov_pop_sc(ring, out_item);
}

static inline bool pw_ring_push_mpmc(pw_ring_t* ring, void* item) {
  PW__RING_CHECK_KIND(ring, PW_RING_MPMC);
  return pw__ring_vyukov_push(ring, item);
}

static inline bool pw_ring_pop_mpmc(pw_ring_t* ring, void** out_item) {
  PW__RING_CHECK_KIND(ring, PW_RING_MPMC);
  return pw__ring_vyukov_pop(ring, out_item);
}

#endif /* PW_BENCH_RING_VYUKOV_H_ */
