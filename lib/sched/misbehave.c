/* A plugin's second completion of one launch: what the dispatcher reports
 * and does (lib/sched/dispatch.c calls it when a completion loses its
 * token's claim; see "Async contract" in include/pathways/backend.h). Cold
 * path. */
#include <stdio.h>

#include "plugin/backend_call.h"
#include "sched/dispatch_internal.h"
#include "sched/token.h"

/* A second completion of the launch whose token is |t| (done called again,
 * or an error returned from launch after done): reported, never acted on.
 * If the first completion is still queued on this thread's frame (the
 * backend completed twice inside its launch call, the usual case), the op
 * fails with INTERNAL; otherwise the device may have moved on and nothing
 * of it is touched but its immutable fields. Consumes |status|. */
void pw__dispatch_completed_again(void* user, pw_status_t status, const char* how) {
  pw_completion_token_t* t = pw_token_of(user);
  pw_device_t* d = t->device;
  const pw_slice_t* slice = d->slice;
  const char* backend = pw__backend_name(slice->backend);
  char again[160];
  pw_status_format(status, again, sizeof(again));
  pw_status_free(status);
  /* Its first completion is still queued on this thread's frame (only
   * this thread changes that queue) when |d| is in it as a done item:
   * that is the completion of |d|'s current launch, |t|'s current use. */
  /* (A queued launch's first completion was acted on at once.) */
  bool queued_here = !t->queued && pw_token_current(user) && pw__dispatch_done_queued_here(d);
  if (queued_here) {
    char first[160];
    pw_status_format(d->done_status, first, sizeof(first));
    pw_status_free(d->done_status);
    d->done_status = pw_status_make(PW_STATUS_INTERNAL,
                                    "backend '%s' completed one launch twice: it %s (first "
                                    "completion: %s; second: %s)",
                                    backend, how, first, again);
    pw_log(&slice->runtime->logger, PW_LOG_ERROR, "dispatch",
           "backend '%s' completed one launch on slice '%s' device %u twice: it %s (first: %s; "
           "second: %s); the op fails with INTERNAL",
           backend, slice->name, d->mesh_index, how, first, again);
    return;
  }
  pw_log(&slice->runtime->logger, PW_LOG_ERROR, "dispatch",
         "backend '%s' completed a launch on slice '%s' device %u again after its completion "
         "was handled: it %s (%s); ignored",
         backend, slice->name, d->mesh_index, how, again);
}
