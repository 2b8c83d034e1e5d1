/* libpathways: events, the completion of anything.
 *
 * A pw_event_t completes exactly once, either OK or with a status. Anything
 * asynchronous in the library (a buffer becoming ready, an execution
 * finishing) is observed through one. Waiters spin briefly and then park; a
 * completion pays for a wake-up only when somebody is parked.
 *
 * Thread-safety: every function may be called from any thread, concurrently,
 * on the same event. Nothing here takes a lock: completion, registration and
 * polling are lock-free; only pw_event_wait blocks (and, for a few
 * instructions, a registration or completion that races a completion in
 * progress).
 * Lifetime: refcounted; every create returns one reference, which the
 * caller owns. Arguments are borrowed: the caller holds a reference for
 * the duration of the call. Completion does not need that reference to
 * outlive its callbacks: they run under an internal reference, so a
 * callback may release the last user reference, the completing caller's
 * included.
 */
#ifndef PATHWAYS_EVENT_H_
#define PATHWAYS_EVENT_H_

#include "pathways/allocator.h"
#include "pathways/api.h"
#include "pathways/clock.h"
#include "pathways/status.h"

PW_EXTERN_C_BEGIN

typedef struct pw_event_s pw_event_t;

/* Runs once when the event completes. |status| is owned by the callback
 * (NULL = OK; otherwise a copy of the event's error that the callback must
 * free or consume). Runs on the completing thread, or inline in
 * pw_event_on_ready if the event had already completed; never under a lock
 * of the library's, so it may call any pw_event_* function, including on
 * this event (a callback registered on this event from inside it runs
 * inline). Callbacks registered before completion run in registration
 * order. */
typedef void (*pw_event_callback_fn_t)(void* user, pw_status_t status);

/* Creates an incomplete event holding one reference. Memory (the event and
 * its callback records) comes from |allocator|, which must outlive the
 * event. INVALID_ARGUMENT if |out_event| is NULL or |allocator| lacks a
 * method; RESOURCE_EXHAUSTED if allocation fails. |*out_event| is NULL on
 * failure. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_event_create(pw_allocator_t allocator,
                                                      pw_event_t** out_event);

/* Creates an event that is already complete with |status| (consumed; NULL
 * for OK). On failure |status| is freed and |*out_event| is NULL. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_event_create_completed(
    pw_allocator_t allocator, pw_status_t status, pw_event_t** out_event);

/* Adds a reference. NULL is a no-op. */
PW_API void pw_event_retain(pw_event_t* event);

/* Drops a reference; the last one frees the event. NULL is a no-op.
 * Dropping the last reference of an event that has not completed while
 * callbacks are registered on it (nobody can complete it any more)
 * completes it CANCELLED ("event released before it completed"), so that
 * those callbacks still run exactly once, on this thread. */
PW_API void pw_event_release(pw_event_t* event);

/* Completes |event| OK. Returns FAILED_PRECONDITION if it had already
 * completed (the first completion stands; the event is then ready).
 * Callbacks run on this thread before the call returns, except when this
 * call is itself made from callbacks nested more than 32 completions deep:
 * then they run on this thread when the outer completion unwinds, before
 * the outermost pw_event_signal/pw_event_fail returns, so that chains of any
 * length do not grow the stack. With no callback and no waiter, completion
 * costs two atomic read-modify-writes and no system call. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_event_signal(pw_event_t* event);

/* Completes |event| with |status|, which it consumes in every case (a NULL
 * |status| is the same as pw_event_signal). FAILED_PRECONDITION if it had
 * already completed; |status| is then freed, not stored. Callbacks run as
 * for pw_event_signal. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_event_fail(pw_event_t* event,
                                                    pw_status_t status);

/* True once |event| has completed (OK or not). Never blocks. False for
 * NULL. */
PW_API bool pw_event_is_ready(pw_event_t* event);

/* If complete, returns a copy of the event's status (NULL for OK) and sets
 * |*out_ready| true; otherwise returns NULL with |*out_ready| false. Never
 * blocks. A NULL argument gives INVALID_ARGUMENT with |*out_ready| false
 * (when |out_ready| is not the NULL one). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_event_query(pw_event_t* event,
                                                     bool* out_ready);

/* Blocks until |event| completes or |deadline| (absolute, pw_clock_now
 * time) passes. Returns a copy of the event's status (NULL for OK), or
 * DEADLINE_EXCEEDED. PW_IMMEDIATE_PAST polls; PW_INFINITE_FUTURE waits for
 * ever. The caller must hold a reference for the whole wait. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_event_wait(pw_event_t* event,
                                                    pw_time_t deadline);

/* Registers |fn(user, status)| to run exactly once when |event| completes;
 * inline, before this returns, if it already has. Any number may be
 * registered, from any thread, including from inside another callback of
 * the same event. If this call fails (INVALID_ARGUMENT for a NULL |event| or
 * |fn|, RESOURCE_EXHAUSTED), |fn| never runs. The record is allocated from
 * the event's allocator and freed before |fn| runs. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_event_on_ready(
    pw_event_t* event, pw_event_callback_fn_t fn, void* user);

/* All-of: a new event that completes when every one of |events| has. Its
 * status is a copy of the first error observed (in completion order); every
 * input is still awaited before it completes. |count| may be 0 (already OK).
 * Inputs are borrowed and may be released right after the call: the join
 * keeps what it needs (an input dropped before completing counts as
 * CANCELLED, see pw_event_release). The same event may appear more than
 * once. Memory comes from |allocator|. INVALID_ARGUMENT naming the argument
 * for a NULL |out_event|, |events| or entry ("events[3] is NULL");
 * RESOURCE_EXHAUSTED if allocation fails, in which case nothing was
 * registered on any input. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_event_join(pw_allocator_t allocator,
                                                    pw_event_t* const* events,
                                                    size_t count,
                                                    pw_event_t** out_event);

/* Any-of: a new event that completes with (a copy of) the status of the
 * first of |events| to complete, OK or not. |count| must be >= 1. Inputs,
 * memory and errors as for pw_event_join; its bookkeeping is freed once
 * every input has completed. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_event_any(pw_allocator_t allocator,
                                                   pw_event_t* const* events,
                                                   size_t count,
                                                   pw_event_t** out_event);

PW_EXTERN_C_END

#endif /* PATHWAYS_EVENT_H_ */
