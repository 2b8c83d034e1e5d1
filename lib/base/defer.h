/* Internal: flushes deferred to the end of a batch, per thread.
 *
 * A batch is what one thread does between pw__defer_begin and the
 * matching pw__defer_end (nested pairs make one batch): the scheduler
 * opens one around each outermost dispatch frame (lib/sched/dispatch.c),
 * a remote session reader around each frame of messages it handles. A
 * sender that would rather send once per batch than once per message
 * (lib/remote/outbox.c: launches to a worker) adds its flush during the
 * batch; the outermost end runs each added (fn, ctx) once, in the order
 * they were added. Nothing here knows what is flushed, so a module low in
 * the stack opens batches that a module above it fills. */
#ifndef PW_BASE_DEFER_H_
#define PW_BASE_DEFER_H_

#include <stdbool.h>

typedef void (*pw_defer_fn_t)(void* ctx);

void pw__defer_begin(void);
/* Ends the batch; the outermost end runs the flushes added in it. A flush
 * may itself open and end batches (they run their own flushes). */
void pw__defer_end(void);
/* True inside a batch. */
bool pw__defer_active(void);
/* Adds fn(ctx) to the batch's flushes (once per pair). False outside a
 * batch or when the batch holds PW_DEFER_MAX already: then the caller
 * sends at once. */
bool pw__defer_add(pw_defer_fn_t fn, void* ctx);

#define PW_DEFER_MAX 16

#endif /* PW_BASE_DEFER_H_ */
