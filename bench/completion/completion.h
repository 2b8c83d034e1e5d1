/* Bench-side (bench/completion, not in libpathways): lock-free completion
 * tracking, kept as the subject of `pw-bench completion` and its tests; the
 * dispatcher does not use it.
 *
 * Two pieces live here.
 *
 * 1. Dependency nodes (pw_completion_node_t). A node is one op of a graph:
 *    it becomes due when its |pending| counter of unresolved inputs reaches
 *    zero, and resolves exactly once, OK or FAILED.
 *
 *    - One atomic decrement per edge. Resolving a node decrements each
 *      successor's |pending| once; the thread whose decrement reaches zero
 *      is the only one that sees the successor become due, and it gets the
 *      successor back in a caller-provided list (pw_completion_list_t) to
 *      launch or enqueue: no hand-off, no lock, no second atomic.
 *    - No recursion. pw_completion_complete never launches anything: it
 *      appends due nodes to the caller's list and returns. A caller that
 *      completes ops inline (the no-op and simulated backends) drains that
 *      list in a loop (pw_completion_drain: a trampoline), so a 100k-node
 *      chain runs in constant stack.
 *    - Errors. A failed input fails its dependents transitively; a failed
 *      dependent does not run but still resolves exactly once. A node waits
 *      for all its inputs before resolving (so its storage is never touched
 *      by a late input) and keeps the first failure it saw, as an owned
 *      status naming the failed input and the root cause:
 *        depth 1:  input node 3 ("load") failed: <original message>
 *        depth 2+: input node 7 ("matmul") failed: input node 3 ("load")
 *                  failed: <original message>
 *      Messages stay bounded on long chains (two levels, not one per hop).
 *      The cascade of failures runs iteratively inside the completing call:
 *      failed dependents are resolved, fanned out, and also appended to the
 *      caller's list (state FAILED) so the caller can report them.
 *    - Parts. A gang op finished by several devices is a node with |parts|
 *      > 1: each device completes one part; the last one resolves the node
 *      with the first error any part reported.
 *    - Memory. Nodes and successor arrays belong to the caller (embedded in
 *      its op records or in an array it allocated): nothing here allocates,
 *      except the status of a failed dependent (a failure path).
 *
 * 2. The completion queue (pw_completion_queue_t), for observers: backend
 *    threads post completion records (pointers, e.g. resolved nodes), one
 *    observer thread drains them. A shared MPSC queue costs a contended
 *    atomic RMW per post and bounces one cache line between all producers;
 *    instead each producer owns an SPSC ring (pw_completion_producer_t), so
 *    a post is an SPSC push: a read of the observer's index (which changes
 *    once per drain), one store of the item and one release store of the
 *    producer's index, on lines only that producer writes. The observer
 *    drains the rings round-robin with batch pops (one index update per
 *    ring per drain). A full ring is back-pressure (false or
 *    RESOURCE_EXHAUSTED naming the ring), never a drop.
 *    Waking a sleeping observer needs a store-load fence on the producer
 *    side, which would double the cost of a post, so it is separate:
 *    pw_completion_producer_flush, once per batch or before the producer
 *    goes idle. pw_completion_queue_wait takes a deadline: an observer
 *    that cannot rely on every producer flushing waits with a finite one,
 *    so a missed flush delays, never hangs.
 *
 * Thread-safety is stated per function. Atomics come from base/atomics.h
 * only, so the tsan preset sees C11 atomics.
 */
#ifndef PW_BENCH_COMPLETION_H_
#define PW_BENCH_COMPLETION_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/atomics.h"
#include "pathways/allocator.h"
#include "pathways/clock.h"
#include "pathways/status.h"
#include "completion/ring.h"

/* ------------------------------------------------------------------------
 * Dependency nodes
 * ------------------------------------------------------------------------ */

typedef enum pw_completion_state_e {
  PW_COMPLETION_WAITING = 0, /* not due yet (or being failed by a cascade) */
  PW_COMPLETION_READY = 1,   /* every input OK: due to launch, or running */
  PW_COMPLETION_OK = 2,      /* resolved OK */
  PW_COMPLETION_FAILED = 3,  /* resolved with an error, its own or an input's */
} pw_completion_state_t;

typedef struct pw_completion_node_t pw_completion_node_t;

/* Embed in the op record; treat every field as private (use the functions).
 * The layout is public only so callers can embed it and allocate arrays. */
struct pw_completion_node_t {
  /* Written concurrently by completing threads. */
  pw_atomic_u32_t pending; /* inputs not yet resolved */
  pw_atomic_u32_t parts;   /* parts not yet completed (after launch) */
  pw_atomic_ptr_t error;   /* first failure seen (owned), else NULL */
  pw_atomic_u32_t state;   /* pw_completion_state_t */
  /* Written with |error| by whoever records it, read by the holder. */
  uint32_t cause_offset;   /* see completion.c */
  /* Owned by the thread holding the node (the one that made it due). */
  pw_completion_node_t* next; /* pw_completion_list_t link */
  pw_status_t status;         /* final status once resolved (owned) */
  /* Read-only after init. */
  pw_completion_node_t* const* successors;
  uint32_t successor_count;
  uint32_t id;
  const char* name;
  void* user;
};

/* A FIFO of due nodes, linked through the nodes: no memory of its own.
 * Owned by one thread (typically a local variable). */
typedef struct pw_completion_list_t {
  pw_completion_node_t* head;
  pw_completion_node_t* tail;
} pw_completion_list_t;

#define PW_COMPLETION_LIST_INIT {NULL, NULL}

static inline void pw_completion_list_init(pw_completion_list_t* list) {
  list->head = NULL;
  list->tail = NULL;
}

static inline bool pw_completion_list_is_empty(const pw_completion_list_t* list) {
  return list->head == NULL;
}

/* Appends |node| (which must be in no list). */
static inline void pw_completion_list_push(pw_completion_list_t* list,
                                           pw_completion_node_t* node) {
  node->next = NULL;
  if (list->tail != NULL) {
    list->tail->next = node;
  } else {
    list->head = node;
  }
  list->tail = node;
}

/* Removes and returns the oldest node, or NULL if |list| is empty. */
static inline pw_completion_node_t* pw_completion_list_pop(
    pw_completion_list_t* list) {
  pw_completion_node_t* node = list->head;
  if (node != NULL) {
    list->head = node->next;
    if (list->head == NULL) list->tail = NULL;
    node->next = NULL;
  }
  return node;
}

/* Initializes |node| with |input_count| inputs, |successor_count| successors
 * in |successors| (borrowed: the array and the successors must stay valid
 * until |node| has resolved) and one part. |name| (may be NULL) is borrowed
 * for the node's lifetime and used in error messages with |id|. |user| is
 * the caller's. A node with 0 inputs starts READY: the caller launches it
 * (or pushes it onto its ready list) itself; otherwise WAITING.
 * Not thread-safe: initialize the whole graph before any of it runs. To
 * wire a node while its inputs may already be completing, give it one
 * extra input and release it with pw_completion_signal_input once wired. */
void pw_completion_node_init(pw_completion_node_t* node, uint32_t id,
                             const char* name, uint32_t input_count,
                             pw_completion_node_t* const* successors,
                             uint32_t successor_count, void* user);

/* Sets the number of pw_completion_complete calls that resolve |node|
 * (devices of a gang op; >= 1, default 1). Call before the node is launched
 * (before it can be completed), from the thread that holds it. */
void pw_completion_node_set_parts(pw_completion_node_t* node, uint32_t parts);

/* Frees the statuses |node| still owns (its final status unless taken, or a
 * recorded input failure if it never resolved). The node is then invalid.
 * Not thread-safe: call when nothing can signal or complete it. */
void pw_completion_node_deinit(pw_completion_node_t* node);

/* The node's state. OK/FAILED are set (release) after every successor has
 * been notified, so once a poller sees them nothing in the library touches
 * the node again. Any thread. */
static inline pw_completion_state_t pw_completion_node_state(
    pw_completion_node_t* node) {
  return (pw_completion_state_t)pw_atomic_load_u32_acquire(&node->state);
}

/* The final status of a resolved node (NULL for OK), borrowed: valid until
 * taken or the node is deinitialized. Call only once the node has resolved,
 * from a thread that observed that. */
static inline pw_status_t pw_completion_node_status(
    const pw_completion_node_t* node) {
  return node->status;
}

/* Moves the final status out of a resolved node: the caller owns the result
 * (NULL for OK) and the node keeps NULL. Same rules as
 * pw_completion_node_status. */
PW_MUST_USE_RESULT pw_status_t pw_completion_node_take_status(
    pw_completion_node_t* node);

/* Completes one part of the READY (launched) |node| with |status|
 * (consumed; NULL = OK). The last part resolves the node: OK, or FAILED
 * with the first error of any part. Resolving decrements every successor
 * once; successors that become due are appended to |ready|: READY ones to
 * launch, and FAILED ones (an input failed, transitively) already resolved
 * and fanned out, for the caller to report. Never calls back, never
 * recurses, never allocates except failure statuses.
 * Returns true if this call resolved the node (it completed the last part):
 * exactly one call per node does, so that caller reports the resolution.
 * Thread-safety: any thread, concurrently with completions of other nodes
 * and of other parts of this node; |ready| is the calling thread's. Each
 * part is completed exactly once (asserted in debug builds). */
bool pw_completion_complete(pw_completion_node_t* node, pw_status_t status,
                            pw_completion_list_t* ready);

/* Completes one part of each of |nodes[0..count)| as pw_completion_complete
 * would, with |statuses[i]| (each consumed; |statuses| may be NULL for all
 * OK; the array is not modified) and one failure cascade pass at the end.
 * Returns how many of the nodes this call resolved. For backends that reap
 * many ops per poll. */
size_t pw_completion_complete_batch(pw_completion_node_t* const* nodes,
                                    const pw_status_t* statuses, size_t count,
                                    pw_completion_list_t* ready);

/* Resolves one input of |node| that is not a node of the graph (a buffer
 * made elsewhere, or the extra "still wiring" input of
 * pw_completion_node_init): |input_status| (consumed; NULL = OK) becomes the
 * node's failure if it is the first. If this was the last input, |node| is
 * appended to |ready| (READY, or FAILED with its dependents cascaded).
 * Thread-safety as pw_completion_complete. */
void pw_completion_signal_input(pw_completion_node_t* node,
                                pw_status_t input_status,
                                pw_completion_list_t* ready);

/* Launches a READY node. Typically starts the op and returns; an op that
 * completes inline calls pw_completion_complete(node, status, ready) with
 * the |ready| passed here, so due successors join the drain loop instead
 * of recursing. */
typedef void (*pw_completion_launch_fn_t)(void* user,
                                          pw_completion_node_t* node,
                                          pw_completion_list_t* ready);

/* Reports a node that resolved FAILED without running because an input
 * failed. Its status is readable (and may be taken). */
typedef void (*pw_completion_failed_fn_t)(void* user,
                                          pw_completion_node_t* node);

/* The trampoline: pops |ready| until empty, calling |launch| on READY nodes
 * and |on_failed| (may be NULL) on FAILED ones. Nodes appended during the
 * drain are drained too, in FIFO order, on this thread, in constant stack.
 * Returns the number of nodes popped. */
size_t pw_completion_drain(pw_completion_list_t* ready,
                           pw_completion_launch_fn_t launch,
                           pw_completion_failed_fn_t on_failed, void* user);

/* ------------------------------------------------------------------------
 * Completion queue: producers post records, one observer drains them.
 * ------------------------------------------------------------------------ */

typedef struct pw_completion_queue_t pw_completion_queue_t;

/* One producer's end: used by one thread at a time. */
typedef struct pw_completion_producer_t {
  pw_ring_t* ring; /* SPSC */
  pw_completion_queue_t* queue;
} pw_completion_producer_t;

/* Creates a queue with |producer_count| (>= 1) producer ends, each holding
 * up to |capacity| (a power of two >= 2) undrained records, into
 * |*out_queue| (cleared first). |name| (may be NULL) is copied into the
 * rings' names ("<name>/producer <i>"). Memory comes from |allocator|,
 * which must outlive the queue. INVALID_ARGUMENT naming a bad count or
 * capacity; RESOURCE_EXHAUSTED if allocation fails. */
PW_MUST_USE_RESULT pw_status_t pw_completion_queue_create(
    pw_allocator_t allocator, const char* name, size_t producer_count,
    size_t capacity, pw_completion_queue_t** out_queue);

/* Frees |queue|; undrained records are dropped (they are the caller's
 * pointers). Nothing may use the queue concurrently or afterwards. NULL is
 * a no-op. */
void pw_completion_queue_destroy(pw_completion_queue_t* queue);

/* Producer end |index| (< producer_count), valid while |queue| lives.
 * Each end must be used by at most one thread at a time. */
pw_completion_producer_t* pw_completion_queue_producer(
    pw_completion_queue_t* queue, size_t index);

/* Posts |record|; false if this producer's ring is full (back-pressure:
 * the observer is behind). Does not wake a sleeping observer: call
 * pw_completion_producer_flush after a batch. The producer's thread only. */
static inline bool pw_completion_producer_post(
    pw_completion_producer_t* producer, void* record) {
  return pw_ring_push_spsc(producer->ring, record);
}

/* As pw_completion_producer_post; RESOURCE_EXHAUSTED naming the ring and
 * its capacity when full. */
static inline pw_status_t pw_completion_producer_post_or_status(
    pw_completion_producer_t* producer, void* record) {
  return pw_ring_push_spsc_or_status(producer->ring, record);
}

/* Posts up to |count| records in order with one publication; returns how
 * many fit. The producer's thread only. */
static inline size_t pw_completion_producer_post_batch(
    pw_completion_producer_t* producer, void* const* records, size_t count) {
  return pw_ring_push_batch_spsc(producer->ring, records, count);
}

/* Makes this producer's posts so far wake the observer if it sleeps in
 * pw_completion_queue_wait. Costs a full fence (and a lock and a signal only
 * when the observer sleeps). The producer's thread only. */
void pw_completion_producer_flush(pw_completion_producer_t* producer);

/* Moves up to |max| posted records into |out_records|; returns how many.
 * Records of one producer come out in the order posted; producers are
 * visited round-robin. The observer thread only (one at a time). */
size_t pw_completion_queue_drain(pw_completion_queue_t* queue,
                                 void** out_records, size_t max);

/* Blocks the observer until a record is posted and flushed, the queue is
 * woken, or |deadline| (pw_clock_now time; PW_IMMEDIATE_PAST polls,
 * PW_INFINITE_FUTURE waits forever) passes. Returns true if records may be
 * available or pw_completion_queue_wake was called, false on the deadline.
 * The observer thread only. */
bool pw_completion_queue_wait(pw_completion_queue_t* queue,
                              pw_time_t deadline);

/* Wakes the observer out of pw_completion_queue_wait (e.g. to shut down);
 * if it is not waiting, its next wait returns at once. Any thread. */
void pw_completion_queue_wake(pw_completion_queue_t* queue);

#endif /* PW_BENCH_COMPLETION_H_ */
