/* Internal: callback records of pw_event_t, shared by event.c and the
 * combinators (event_combinators.c). Not installed.
 *
 * A record (node) is what pw_event_on_ready pushes onto an event's lock-free
 * callback stack. Public registrations allocate one node each from the
 * event's allocator; the combinators embed their nodes in their own state so
 * that, once that state is allocated, registering on every input cannot
 * fail (a join must never be left half-registered). */
#ifndef PW_EVENT_EVENT_INTERNAL_H_
#define PW_EVENT_EVENT_INTERNAL_H_

#include "pathways/event.h"

/* The completer frees the node with the event's allocator before it calls
 * |fn| (public pw_event_on_ready records). Without it the node belongs to
 * whoever registered it and is never touched after |fn| starts. */
#define PW__EVENT_NODE_OWNED 1u

typedef struct pw__event_node_s {
  struct pw__event_node_s* next;
  pw_event_callback_fn_t fn;
  void* user;
  uint32_t flags;
} pw__event_node_t;

/* Registers |node| (fn, user and flags set by the caller; next is
 * overwritten) on |event|. Cannot fail. If |event| has already completed,
 * runs node->fn inline before returning and, with PW__EVENT_NODE_OWNED,
 * frees the node. Otherwise node->fn runs exactly once when |event|
 * completes (or is abandoned: see pw_event_release). The caller must keep a
 * non-owned |node| alive until its fn has started. |event| is borrowed. */
void pw__event_add_node(pw_event_t* event, pw__event_node_t* node);

/* pw_event_t.flags: the runtime completes the event, once, with
 * pw__event_complete_runtime; pw_event_signal and pw_event_fail reject it
 * (FAILED_PRECONDITION). */
#define PW__EVENT_RUNTIME 1u

/* pw_event_create for an event the runtime completes (PW__EVENT_RUNTIME:
 * an execution's done event, a buffer's ready event), with |refs|
 * references (>= 1) to begin with: an owner that hands references out at
 * once (an execution and its submitter) needs no locked add per extra
 * reference. */
pw_status_t pw__event_create_runtime(pw_allocator_t allocator, uint32_t refs,
                                     pw_event_t** out_event);

/* Completes a PW__EVENT_RUNTIME event with |status| (consumed). Its one
 * completer calls it once, holding a reference: no claim, so with neither
 * waiters nor callbacks it is a single CAS. */
void pw__event_complete_runtime(pw_event_t* event, pw_status_t status);

/* If the caller's reference is the only one left on |event| (so nothing
 * else can reach it: callbacks still running or deferred hold their own),
 * resets it in place to a new, incomplete event with |refs| references
 * and returns true; otherwise leaves it alone and returns false. For an
 * owner that keeps its event across uses (an execution block). */
bool pw__event_recycle(pw_event_t* event, uint32_t refs);

/* Event callbacks running on this thread (nested ones counted): not 0
 * while a callback runs, on whatever thread completes its event. The
 * destroy functions that wait for work refuse to run inside one (the work
 * they wait for may need this very callback to return). */
uint32_t pw__event_callback_depth(void);

/* Waiters currently announced as parked (or about to park) on |event|. A
 * snapshot, for tests and diagnostics: lets a test know a waiter has
 * reached the futex path without sleeping. */
uint32_t pw__event_parked_waiters(pw_event_t* event);

#endif /* PW_EVENT_EVENT_INTERNAL_H_ */
