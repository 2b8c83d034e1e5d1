/* pw_event_t: a lock-free, refcounted, complete-once event.
 *
 * State (all in the event, nothing global):
 *
 *   callbacks  Treiber stack (LIFO) of pw__event_node_t, pushed with CAS.
 *              Completion publishes by swapping the head for PW_EVENT_CLOSED
 *              (one CAS): an event is complete exactly when its head reads
 *              CLOSED. Pushes are the only other writes and nothing is ever
 *              popped singly, so there is no ABA.
 *   state      32-bit futex word. CLAIMED (bit 1): a public completion
 *              (pw_event_signal/fail) claimed the event; a second one finds
 *              it set and is rejected (FAILED_PRECONDITION) without touching
 *              |status|. Bits 2..31 count the waiters that have announced
 *              themselves parked (or about to park). COMPLETED (bit 0) is set
 *              by a completer that found waiters, before it wakes them: it
 *              changes the word FUTEX_WAIT re-checks in the kernel.
 *   status     plain field, written by the completer before the CAS that
 *              publishes, read only after an acquire load that saw CLOSED.
 *
 * Completion: [claim: fetch_or(state, CLAIMED)] -> store status -> CAS(head,
 * CLOSED) -> load state: waiters? fetch_or(COMPLETED) and FUTEX_WAKE -> run
 * the captured callbacks in registration order (the stack reversed). A
 * waiter adds itself to state, then loads the head: both sides do a locked
 * RMW on one word and then load the other's (a Dekker pair), so a waiter
 * the completer does not count sees CLOSED and does not park. Events the
 * runtime completes (done and ready events, PW__EVENT_RUNTIME) have one
 * completer by construction and skip the claim: the public calls reject
 * them. With neither waiters nor callbacks such a completion is one CAS and
 * no syscall; a public one adds the claim.
 *
 * A registration that finds CLOSED runs its callback inline: the status is
 * already published.
 *
 * Callbacks run with an internal reference held, so a callback may drop the
 * last user reference. Nested completions (a callback completing another
 * event) run inline up to PW_EVENT_MAX_INLINE_DEPTH deep; deeper ones are
 * queued on a per-thread trampoline and drained by the outermost completion,
 * so arbitrarily long chains (join of join of ...) do not grow the stack. */
#define _GNU_SOURCE /* syscall(2) */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdalign.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/atomics.h"
#include "event/event_internal.h"
#include "pathways/event.h"

#define PW_EVENT_COMPLETED 1u /* set when waiters had to be woken */
#define PW_EVENT_CLAIMED 2u   /* a public completion claimed the event */
#define PW_EVENT_WAITER 4u    /* one unit of the parked-waiter count */

/* Head value of a completed event's callback stack: never a node address
 * (nodes are at least pointer-aligned). */
#define PW_EVENT_CLOSED ((void*)(uintptr_t)1)

/* Polls before parking: at most a few microseconds, enough to catch a
 * completion already in flight on another core, short enough not to steal
 * a core the completer needs (machines here have two). */
#define PW_EVENT_SPIN_ITERATIONS 64

/* Nested completions that run their callbacks inline before the rest are
 * deferred to the trampoline. */
#define PW_EVENT_MAX_INLINE_DEPTH 32

struct pw_event_s {
  pw_atomic_u32_t state;
  pw_atomic_u32_t refs;
  pw_atomic_ptr_t callbacks;
  pw_status_t status;
  pw_allocator_t allocator;
  uint32_t flags; /* PW__EVENT_RUNTIME: completed by the runtime only */
  /* Trampoline link, used only while this event's callbacks are deferred. */
  pw_event_t* deferred_next;
  pw__event_node_t* deferred_nodes;
};

/* Completions running callbacks on this thread, and those deferred. Empty
 * whenever no completion is in progress on the thread. */
typedef struct pw_event_trampoline_t {
  uint32_t depth;
  pw_event_t* head;
  pw_event_t* tail;
} pw_event_trampoline_t;

static _Thread_local pw_event_trampoline_t pw_event_trampoline;

/* Callbacks running on this thread (pw__event_callback_depth). */
static _Thread_local uint32_t pw_event_callback_depth;

uint32_t pw__event_callback_depth(void) { return pw_event_callback_depth; }

/* Calls a callback, counted in pw_event_callback_depth while it runs. */
static void pw_event_call(pw_event_callback_fn_t fn, void* user, pw_status_t status) {
  ++pw_event_callback_depth;
  fn(user, status);
  --pw_event_callback_depth;
}

/*---------------------------------------------------------------------------
 * Parking
 *-------------------------------------------------------------------------*/

static uint32_t* pw_event_futex_word(pw_event_t* event) {
  /* The wrapper struct's only member is the 32-bit word. */
  return (uint32_t*)(void*)&event->state;
}

/* Sleeps while the state word equals |expected|, until woken or |deadline|.
 * Returns false once |deadline| has passed, true otherwise (woken, value
 * changed, signal): the caller re-reads the word. */
static bool pw_event_futex_wait(pw_event_t* event, uint32_t expected,
                                pw_time_t deadline) {
  struct timespec ts;
  struct timespec* timeout = NULL;
  if (deadline != PW_INFINITE_FUTURE) {
    if (deadline <= 0) return false;
    /* FUTEX_WAIT_BITSET without FUTEX_CLOCK_REALTIME takes an absolute
     * CLOCK_MONOTONIC time, the clock of pw_time_t. */
    ts.tv_sec = (time_t)(deadline / 1000000000);
    ts.tv_nsec = (long)(deadline % 1000000000);
    timeout = &ts;
  }
  long rc = syscall(SYS_futex, pw_event_futex_word(event),
                    FUTEX_WAIT_BITSET_PRIVATE, expected, timeout, NULL,
                    FUTEX_BITSET_MATCH_ANY);
  if (rc == 0) return true;
  if (errno == ETIMEDOUT) return false;
  /* EAGAIN (word changed) or EINTR: the caller re-checks; make sure a
   * deadline that passed meanwhile is still noticed. */
  return timeout == NULL || pw_clock_now() < deadline;
}

static void pw_event_futex_wake_all(pw_event_t* event) {
  (void)syscall(SYS_futex, pw_event_futex_word(event), FUTEX_WAKE_PRIVATE,
                INT_MAX, NULL, NULL, 0);
}

static bool pw_event_published(pw_event_t* event) {
  return pw_atomic_load_ptr_acquire(&event->callbacks) == PW_EVENT_CLOSED;
}

/* Waits until |event| has published its completion or |deadline| passes.
 * Returns true if complete; the status may then be read. The caller holds a
 * reference. */
static bool pw_event_block(pw_event_t* event, pw_time_t deadline) {
  if (pw_event_published(event)) return true;
  if (deadline == PW_IMMEDIATE_PAST) return false;
  for (int i = 0; i < PW_EVENT_SPIN_ITERATIONS; ++i) {
    pw_atomic_cpu_relax();
    if (pw_event_published(event)) return true;
  }
  /* Announce before sleeping, then look at the head (seq_cst, after the
   * locked add): a completer that does not see the count published before
   * it loaded the count, so we see CLOSED; one that sees it sets COMPLETED
   * in the word before waking, so a FUTEX_WAIT on the value we read before
   * returns EAGAIN or is woken. */
  uint32_t seen =
      pw_atomic_fetch_add_u32(&event->state, PW_EVENT_WAITER) + PW_EVENT_WAITER;
  bool in_time = true;
  while (pw_atomic_load_ptr_seq_cst(&event->callbacks) != PW_EVENT_CLOSED && in_time) {
    in_time = pw_event_futex_wait(event, seen, deadline);
    seen = pw_atomic_load_u32_seq_cst(&event->state);
  }
  pw_atomic_fetch_sub_u32(&event->state, PW_EVENT_WAITER);
  return pw_event_published(event);
}

uint32_t pw__event_parked_waiters(pw_event_t* event) {
  return pw_atomic_load_u32_acquire(&event->state) / PW_EVENT_WAITER;
}

/*---------------------------------------------------------------------------
 * Callbacks
 *-------------------------------------------------------------------------*/

static pw__event_node_t* pw_event_reverse(pw__event_node_t* node) {
  pw__event_node_t* reversed = NULL;
  while (node != NULL) {
    pw__event_node_t* next = node->next;
    node->next = reversed;
    reversed = node;
    node = next;
  }
  return reversed;
}

/* Runs one node. Its memory may be gone (owned: freed here; not owned: the
 * registrant may free it from inside fn) once fn starts. */
static void pw_event_run_node(pw_event_t* event, pw__event_node_t* node) {
  pw_event_callback_fn_t fn = node->fn;
  void* user = node->user;
  if (node->flags & PW__EVENT_NODE_OWNED) {
    pw_allocator_free(event->allocator, node, sizeof(*node));
  }
  pw_event_call(fn, user, pw_status_clone(event->status));
}

static void pw_event_run_list(pw_event_t* event, pw__event_node_t* node) {
  while (node != NULL) {
    pw__event_node_t* next = node->next;
    pw_event_run_node(event, node);
    node = next;
  }
}

/* Runs |nodes| (in order) of a published |event| and drops the reference
 * the completer took for them; or defers both to the thread's trampoline
 * when already deep in nested completions. */
static void pw_event_dispatch(pw_event_t* event, pw__event_node_t* nodes) {
  pw_event_trampoline_t* t = &pw_event_trampoline;
  if (t->depth >= PW_EVENT_MAX_INLINE_DEPTH) {
    event->deferred_nodes = nodes;
    event->deferred_next = NULL;
    if (t->tail != NULL) {
      t->tail->deferred_next = event;
    } else {
      t->head = event;
    }
    t->tail = event;
    return;
  }
  ++t->depth;
  pw_event_run_list(event, nodes);
  pw_event_release(event);
  if (t->depth == 1) {
    while (t->head != NULL) {
      pw_event_t* next = t->head;
      t->head = next->deferred_next;
      if (t->head == NULL) t->tail = NULL;
      pw_event_run_list(next, next->deferred_nodes);
      pw_event_release(next);
    }
  }
  --t->depth;
}

void pw__event_add_node(pw_event_t* event, pw__event_node_t* node) {
  void* head = pw_atomic_load_ptr_relaxed(&event->callbacks);
  for (;;) {
    if (head == PW_EVENT_CLOSED) {
      /* Completed: its status is published (this acquire load pairs with
       * the publishing CAS; |head| may come from a relaxed load). */
      (void)pw_event_published(event);
      pw_event_run_node(event, node);
      return;
    }
    node->next = head;
    /* Sequentially consistent CAS: releases the node's fields to the
     * completer's exchange. On failure |head| is reloaded. */
    if (pw_atomic_cas_ptr(&event->callbacks, &head, node)) return;
  }
}

/*---------------------------------------------------------------------------
 * Completion
 *-------------------------------------------------------------------------*/

/* Completes |event| with |status| (consumed). |who| names the public entry
 * point in errors. The caller holds a reference. */
/* Publishes |status| (consumed) as |event|'s, wakes its waiters and runs
 * its callbacks. The caller is the event's only completer and holds a
 * reference. */
static void pw_event_publish(pw_event_t* event, pw_status_t status) {
  event->status = status;
  /* With callbacks, take the reference they run under before publishing:
   * once CLOSED is visible a waiter may drop the last user reference. The
   * head only ever grows until this CAS, so a head seen non-NULL stays so. */
  void* head = pw_atomic_load_ptr_relaxed(&event->callbacks);
  bool held = false;
  for (;;) {
    if (head != NULL && !held) {
      pw_event_retain(event);
      held = true;
    }
    if (pw_atomic_cas_ptr(&event->callbacks, &head, PW_EVENT_CLOSED)) break;
  }
  if (pw_atomic_load_u32_seq_cst(&event->state) >= PW_EVENT_WAITER) {
    pw_atomic_fetch_or_u32(&event->state, PW_EVENT_COMPLETED);
    pw_event_futex_wake_all(event);
  }
  if (held) pw_event_dispatch(event, pw_event_reverse(head));
}

/* Completes |event| with |status| (consumed) from a public entry point
 * (|who| names it in errors): claims it first, so that a second
 * completion is rejected. The caller holds a reference. */
static pw_status_t pw_event_complete(pw_event_t* event, pw_status_t status,
                                     const char* who) {
  if (event->flags & PW__EVENT_RUNTIME) {
    pw_status_free(status);
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "%s: this event is completed by the runtime (an execution's done "
                          "event or a buffer's ready event)",
                          who);
  }
  if (pw_atomic_fetch_or_u32(&event->state, PW_EVENT_CLAIMED) & PW_EVENT_CLAIMED) {
    pw_status_free(status);
    /* "Already completed" must also mean "ready": let the first completer
     * finish publishing. */
    (void)pw_event_block(event, PW_INFINITE_FUTURE);
    return pw_status_make(
        PW_STATUS_FAILED_PRECONDITION,
        "%s: event already completed (%s); the first completion stands", who,
        pw_status_code_string(pw_status_code(event->status)));
  }
  pw_event_publish(event, status);
  return NULL;
}

void pw__event_complete_runtime(pw_event_t* event, pw_status_t status) {
  pw_event_publish(event, status);
}

/*---------------------------------------------------------------------------
 * Lifetime
 *-------------------------------------------------------------------------*/

static pw_status_t pw_event_allocate(pw_allocator_t allocator, const char* who,
                                     pw_event_t** out_event) {
  *out_event = NULL;
  if (!pw_allocator_is_valid(allocator)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: allocator has no alloc/free method", who);
  }
  void* memory = NULL;
  pw_status_t status = pw_allocator_malloc(allocator, sizeof(pw_event_t),
                                           alignof(pw_event_t), &memory);
  if (status != NULL) return pw_status_annotate(status, "%s", who);
  pw_event_t* event = memory;
  pw_atomic_init_u32(&event->state, 0);
  pw_atomic_init_u32(&event->refs, 1);
  pw_atomic_init_ptr(&event->callbacks, NULL);
  event->status = NULL;
  event->allocator = allocator;
  event->flags = 0;
  event->deferred_next = NULL;
  event->deferred_nodes = NULL;
  *out_event = event;
  return NULL;
}

static void pw_event_destroy(pw_event_t* event) {
  void* head = pw_atomic_load_ptr_acquire(&event->callbacks);
  if (head != NULL && head != PW_EVENT_CLOSED) {
    /* Abandoned: nobody is left to complete it, yet its callbacks must run
     * exactly once. Nobody else can reach it, so resurrect it for the
     * completion; the final release below comes back here, completed. */
    pw_atomic_store_u32_relaxed(&event->refs, 1);
    pw_event_publish(event, pw_status_make(PW_STATUS_CANCELLED,
                                           "event released before it completed"));
    pw_event_release(event);
    return;
  }
  pw_status_free(event->status);
  pw_allocator_t allocator = event->allocator;
  pw_allocator_free(allocator, event, sizeof(*event));
}

pw_status_t pw_event_create(pw_allocator_t allocator, pw_event_t** out_event) {
  if (out_event == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_event_create: out_event is NULL");
  }
  return pw_event_allocate(allocator, "pw_event_create", out_event);
}

pw_status_t pw__event_create_runtime(pw_allocator_t allocator, uint32_t refs,
                                     pw_event_t** out_event) {
  PW_RETURN_IF_ERROR(pw_event_allocate(allocator, "pw_event_create", out_event));
  pw_atomic_init_u32(&(*out_event)->refs, refs);
  (*out_event)->flags = PW__EVENT_RUNTIME;
  return NULL;
}

bool pw__event_recycle(pw_event_t* event, uint32_t refs) {
  if (pw_atomic_load_u32_acquire(&event->refs) != 1) return false;
  pw_status_free(event->status);
  event->status = NULL;
  event->deferred_next = NULL;
  event->deferred_nodes = NULL;
  pw_atomic_store_ptr_relaxed(&event->callbacks, NULL);
  pw_atomic_store_u32_relaxed(&event->state, 0);
  /* Published to other threads by whatever hands the event out. */
  pw_atomic_store_u32_relaxed(&event->refs, refs);
  return true;
}

pw_status_t pw_event_create_completed(pw_allocator_t allocator,
                                      pw_status_t status,
                                      pw_event_t** out_event) {
  if (out_event == NULL) {
    pw_status_free(status);
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_event_create_completed: out_event is NULL");
  }
  pw_event_t* event = NULL;
  pw_status_t result =
      pw_event_allocate(allocator, "pw_event_create_completed", &event);
  if (result != NULL) {
    pw_status_free(status);
    return result;
  }
  event->status = status;
  pw_atomic_init_ptr(&event->callbacks, PW_EVENT_CLOSED);
  pw_atomic_init_u32(&event->state, PW_EVENT_COMPLETED | PW_EVENT_CLAIMED);
  *out_event = event;
  return NULL;
}

void pw_event_retain(pw_event_t* event) {
  if (event != NULL) (void)pw_atomic_fetch_add_u32(&event->refs, 1);
}

void pw_event_release(pw_event_t* event) {
  if (event == NULL) return;
  if (pw_atomic_fetch_sub_u32(&event->refs, 1) == 1) pw_event_destroy(event);
}

/*---------------------------------------------------------------------------
 * Public operations
 *-------------------------------------------------------------------------*/

pw_status_t pw_event_signal(pw_event_t* event) {
  if (event == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_event_signal: event is NULL");
  }
  return pw_event_complete(event, NULL, "pw_event_signal");
}

pw_status_t pw_event_fail(pw_event_t* event, pw_status_t status) {
  if (event == NULL) {
    pw_status_free(status);
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_event_fail: event is NULL");
  }
  return pw_event_complete(event, status, "pw_event_fail");
}

bool pw_event_is_ready(pw_event_t* event) {
  return event != NULL && pw_event_published(event);
}

pw_status_t pw_event_query(pw_event_t* event, bool* out_ready) {
  if (out_ready == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_event_query: out_ready is NULL");
  }
  *out_ready = false;
  if (event == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_event_query: event is NULL");
  }
  if (!pw_event_published(event)) return NULL;
  *out_ready = true;
  return pw_status_clone(event->status);
}

pw_status_t pw_event_wait(pw_event_t* event, pw_time_t deadline) {
  if (event == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_event_wait: event is NULL");
  }
  if (!pw_event_block(event, deadline)) {
    return pw_status_make(PW_STATUS_DEADLINE_EXCEEDED,
                          "pw_event_wait: event not complete by the deadline");
  }
  return pw_status_clone(event->status);
}

pw_status_t pw_event_on_ready(pw_event_t* event, pw_event_callback_fn_t fn,
                              void* user) {
  if (event == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_event_on_ready: event is NULL");
  }
  if (fn == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_event_on_ready: fn is NULL");
  }
  if (pw_event_published(event)) {
    pw_event_call(fn, user, pw_status_clone(event->status)); /* no record needed */
    return NULL;
  }
  void* memory = NULL;
  pw_status_t status = pw_allocator_malloc(
      event->allocator, sizeof(pw__event_node_t), alignof(pw__event_node_t),
      &memory);
  if (status != NULL) return pw_status_annotate(status, "pw_event_on_ready");
  pw__event_node_t* node = memory;
  node->next = NULL;
  node->fn = fn;
  node->user = user;
  node->flags = PW__EVENT_NODE_OWNED;
  pw__event_add_node(event, node);
  return NULL;
}
