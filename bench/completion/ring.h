/* Bench-side (bench/completion, not in libpathways): bounded lock-free rings
 * of pointer-sized items, used by completion.h and its benchmark.
 *
 * A ring holds up to |capacity| items (a power of two, >= 2) in FIFO order.
 * Its flavour is fixed at creation and every operation says its concurrency
 * in its name, as Concurrency Kit does:
 *
 *   PW_RING_SPSC  one producer thread, one consumer thread at a time:
 *                 pw_ring_push_spsc / pw_ring_pop_spsc and the batch forms.
 *   PW_RING_MPSC  any number of producers, one consumer at a time:
 *                 pw_ring_push_mpsc / pw_ring_pop_mpsc.
 *   PW_RING_MPMC  any number of producers and consumers:
 *                 pw_ring_push_mpmc / pw_ring_pop_mpmc.
 *
 * Calling an operation of another flavour is a bug (asserted in debug
 * builds): the flavours do not share a memory layout in every build.
 *
 * Back-pressure, never a silent drop: a push on a full ring returns false
 * and leaves the ring unchanged; the _or_status forms return
 * RESOURCE_EXHAUSTED naming the ring and its capacity instead. A pop on an
 * empty ring returns false. Items are opaque pointers; NULL is a valid item.
 *
 * Implementations behind this one API:
 *   SPSC, default build: Concurrency Kit's ck_ring (ring_ck.h, the only file
 *     that includes <ck_ring.h>).
 *   SPSC, PW_ATOMICS_C11 (the tsan preset): C11 acquire/release indices with
 *     cached copies of the other side's index (ring_c11.h). TSan cannot see
 *     ck_pr's inline asm and reports false races on ck_ring (docs/toolchain.md).
 *   MPSC/MPMC, every build: Dmitry Vyukov's bounded MPMC queue with per-cell
 *     sequence numbers (ring_vyukov.h), on base/atomics.h (ck_pr by default,
 *     C11 under PW_ATOMICS_C11). ck_ring's multi-producer enqueue commits in
 *     ticket order and convoys when producers outnumber free cores; see
 *     ring_vyukov.h.
 *
 * Capacity is exact: a ring never holds more than |capacity| items, and on a
 * quiescent ring a push fails exactly when it holds |capacity|. A push may
 * also report "full" while a pop on another thread is between
 * claiming and releasing that slot, and an MPxC pop "empty" while the
 * producer of the oldest claimed slot has not published it yet; callers
 * treat false as "retry later". No item is ever lost or duplicated.
 * SPSC operations are wait-free.
 *
 * Memory: one block from the creating pw_allocator_t (ring, slots and a copy
 * of the name); nothing is allocated after creation.
 */
#ifndef PW_BENCH_RING_H_
#define PW_BENCH_RING_H_

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/atomics.h"
#include "pathways/allocator.h"
#include "pathways/status.h"

typedef enum pw_ring_kind_e {
  PW_RING_SPSC = 1,
  PW_RING_MPSC = 2,
  PW_RING_MPMC = 3,
} pw_ring_kind_t;

/* Largest capacity a ring accepts (ck_ring counts slots in unsigned int and
 * the default build gives an SPSC ck_ring twice the capacity). */
#define PW_RING_MAX_CAPACITY ((size_t)1 << 30)

typedef struct pw_ring_t pw_ring_t;

/* Creates an empty ring of |kind| holding up to |capacity| items into
 * |*out_ring|. |capacity| must be a power of two in [2, PW_RING_MAX_CAPACITY]
 * (INVALID_ARGUMENT naming the value otherwise). |name| (may be NULL) is
 * copied and appears in error messages. Memory comes from |allocator|, which
 * must outlive the ring; RESOURCE_EXHAUSTED if it fails. |*out_ring| is
 * cleared first and set only on success. Not thread-safe with respect to
 * |*out_ring|; the ring may be shared with other threads once returned. */
PW_MUST_USE_RESULT pw_status_t pw_ring_create(pw_allocator_t allocator,
                                              pw_ring_kind_t kind,
                                              const char* name,
                                              size_t capacity,
                                              pw_ring_t** out_ring);

/* Frees |ring| with its allocator. Items still inside are dropped (they are
 * the caller's pointers: drain first if they own anything). No operation may
 * run concurrently or afterwards. NULL is a no-op. */
void pw_ring_destroy(pw_ring_t* ring);

/* The item capacity given at creation. Thread-safe. */
static inline size_t pw_ring_capacity(const pw_ring_t* ring);

/* The flavour given at creation. Thread-safe. */
static inline pw_ring_kind_t pw_ring_kind(const pw_ring_t* ring);

/* The name given at creation ("" if none); valid while |ring| lives. */
static inline const char* pw_ring_name(const pw_ring_t* ring);

/* Number of items in |ring|: exact when no push or pop runs concurrently, a
 * snapshot otherwise. Any thread. */
static inline size_t pw_ring_size_approx(pw_ring_t* ring);

/* RESOURCE_EXHAUSTED: `ring "<name>" is full (capacity <N>)`. The caller
 * owns the result. Any thread. Out of line: only the slow path needs it. */
PW_MUST_USE_RESULT pw_status_t pw_ring_full_status(const pw_ring_t* ring);

/* --- SPSC: one producer thread and one consumer thread at a time. --- */

/* Appends |item|; false if the ring is full. Producer side only. */
static inline bool pw_ring_push_spsc(pw_ring_t* ring, void* item);

/* Removes the oldest item into |*out_item|; false if the ring is empty
 * (|*out_item| untouched). Consumer side only. */
static inline bool pw_ring_pop_spsc(pw_ring_t* ring, void** out_item);

/* Appends up to |count| items from |items| in order, publishing them with
 * one index update; returns how many fit (0 when full). Producer only. */
static inline size_t pw_ring_push_batch_spsc(pw_ring_t* ring,
                                             void* const* items,
                                             size_t count);

/* Removes up to |max| of the oldest items into |out_items| with one index
 * update; returns how many (0 when empty). Consumer only. */
static inline size_t pw_ring_pop_batch_spsc(pw_ring_t* ring,
                                            void** out_items, size_t max);

/* --- MPSC: any producers, one consumer thread at a time. --- */

/* Appends |item|; false if the ring is full. Any producer thread. */
static inline bool pw_ring_push_mpsc(pw_ring_t* ring, void* item);

/* Removes the oldest item into |*out_item|; false if there is none or its
 * producer has not finished publishing it. Consumer only. */
static inline bool pw_ring_pop_mpsc(pw_ring_t* ring, void** out_item);

/* --- MPMC: any producers and consumers. --- */

/* Appends |item|; false if the ring is full. Any thread. */
static inline bool pw_ring_push_mpmc(pw_ring_t* ring, void* item);

/* Removes the oldest unclaimed item into |*out_item|; false if there is
 * none or its producer has not finished publishing it. Any thread. */
static inline bool pw_ring_pop_mpmc(pw_ring_t* ring, void** out_item);

/* --- Status-returning pushes: NULL, or RESOURCE_EXHAUSTED from
 * pw_ring_full_status. Same thread rules as the plain forms. --- */
static inline pw_status_t pw_ring_push_spsc_or_status(pw_ring_t* ring,
                                                      void* item);
static inline pw_status_t pw_ring_push_mpsc_or_status(pw_ring_t* ring,
                                                      void* item);
static inline pw_status_t pw_ring_push_mpmc_or_status(pw_ring_t* ring,
                                                      void* item);

/* The implementations: ring_ck.h or ring_c11.h define struct pw_ring_t and
 * the SPSC operations, ring_vyukov.h the MPSC/MPMC ones. */
#define PW__RING_CHECK_KIND(ring, want) assert((ring)->kind == (want))

typedef struct pw__ring_cell_t pw__ring_cell_t;

#if defined(PW_ATOMICS_C11)
#include "completion/ring_c11.h"
#else
#include "completion/ring_ck.h"
#endif
#include "completion/ring_vyukov.h"

static inline size_t pw_ring_size_approx(pw_ring_t* ring) {
  if (ring->kind == PW_RING_SPSC) return pw__ring_spsc_size(ring);
  return pw__ring_vyukov_size(ring);
}

static inline size_t pw_ring_capacity(const pw_ring_t* ring) {
  return ring->capacity;
}

static inline pw_ring_kind_t pw_ring_kind(const pw_ring_t* ring) {
  return ring->kind;
}

static inline const char* pw_ring_name(const pw_ring_t* ring) {
  return ring->name;
}

static inline pw_status_t pw_ring_push_spsc_or_status(pw_ring_t* ring,
                                                      void* item) {
  if (PW_LIKELY(pw_ring_push_spsc(ring, item))) return NULL;
  return pw_ring_full_status(ring);
}

static inline pw_status_t pw_ring_push_mpsc_or_status(pw_ring_t* ring,
                                                      void* item) {
  if (PW_LIKELY(pw_ring_push_mpsc(ring, item))) return NULL;
  return pw_ring_full_status(ring);
}

static inline pw_status_t pw_ring_push_mpmc_or_status(pw_ring_t* ring,
                                                      void* item) {
  if (PW_LIKELY(pw_ring_push_mpmc(ring, item))) return NULL;
  return pw_ring_full_status(ring);
}

#endif /* PW_BENCH_RING_H_ */
