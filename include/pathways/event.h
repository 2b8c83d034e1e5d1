/* libpathways: events, the completion of anything.
 *
 * A pw_event_t completes exactly once, either OK or with a status. Anything
 * asynchronous in the library (a buffer becoming ready, an execution
 * finishing) is observed through one. Waiters spin briefly and then park; a
 * completion pays for a wake-up only when somebody is parked.
 *
 * Thread-safety: every function may be called from any thread, concurrently,
 * on the same event.
 * Lifetime: refcounted; pw_event_create returns one reference. Completion
 * does not need the caller's reference to stay alive past the call.
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
 * this event. */
typedef void (*pw_event_callback_fn_t)(void* user, pw_status_t status);

/* Creates an incomplete event holding one reference. Memory (the event and
 * its callback records) comes from |allocator|. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_event_create(pw_allocator_t allocator,
                                                      pw_event_t** out_event);

/* Creates an event that is already complete with |status| (consumed; NULL
 * for OK). On failure |status| is freed. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_event_create_completed(
    pw_allocator_t allocator, pw_status_t status, pw_event_t** out_event);

PW_API void pw_event_retain(pw_event_t* event);
PW_API void pw_event_release(pw_event_t* event);

/* Completes |event| OK. Returns FAILED_PRECONDITION if it had already
 * completed (the first completion stands). Callbacks run on this thread
 * before the call returns. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_event_signal(pw_event_t* event);

/* Completes |event| with |status|, which it consumes in every case (a NULL
 * |status| is the same as pw_event_signal). FAILED_PRECONDITION if it had
 * already completed; |status| is then freed, not stored. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_event_fail(pw_event_t* event,
                                                    pw_status_t status);

/* True once |event| has completed (OK or not). Never blocks. */
PW_API bool pw_event_is_ready(pw_event_t* event);

/* If complete, returns a copy of the event's status (NULL for OK) and sets
 * |*out_ready| true; otherwise returns NULL with |*out_ready| false. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_event_query(pw_event_t* event,
                                                     bool* out_ready);

/* Blocks until |event| completes or |deadline| (absolute, pw_clock_now
 * time) passes. Returns a copy of the event's status (NULL for OK), or
 * DEADLINE_EXCEEDED. PW_IMMEDIATE_PAST polls. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_event_wait(pw_event_t* event,
                                                    pw_time_t deadline);

/* Registers |fn(user, status)| to run exactly once when |event| completes;
 * inline, before this returns, if it already has. Any number may be
 * registered. If this call fails (RESOURCE_EXHAUSTED), |fn| never runs. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_event_on_ready(
    pw_event_t* event, pw_event_callback_fn_t fn, void* user);

/* All-of: a new event that completes when every one of |events| has. Its
 * status is the first error observed (in completion order); every input is
 * still awaited before it completes. |count| may be 0 (already OK). Inputs
 * are borrowed: the join keeps what it needs. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_event_join(pw_allocator_t allocator,
                                                    pw_event_t* const* events,
                                                    size_t count,
                                                    pw_event_t** out_event);

/* Any-of: a new event that completes with the status of the first of
 * |events| to complete. |count| must be >= 1. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_event_any(pw_allocator_t allocator,
                                                   pw_event_t* const* events,
                                                   size_t count,
                                                   pw_event_t** out_event);

PW_EXTERN_C_END

#endif /* PATHWAYS_EVENT_H_ */
