/* Internal: the runtime's transfer thread, which runs the copies of
 * asynchronous host transfers (lib/runtime/buffer_async.c) so that they
 * never run on the caller's thread. One thread per runtime, started by
 * the first transfer (pw__host_xfer_start), joined by pw_runtime_destroy
 * (pw__host_xfer_stop); jobs run one at a time, in the order queued. Not
 * installed. */
#ifndef PW_RUNTIME_HOST_XFER_H_
#define PW_RUNTIME_HOST_XFER_H_

#include "core/runtime.h"

/* One queued job. The queuer owns it; |run| is called once on the
 * transfer thread, with no lock held, and may free it. */
typedef struct pw_host_xfer_job_s {
  struct pw_host_xfer_job_s* next;
  void (*run)(struct pw_host_xfer_job_s* job);
} pw_host_xfer_job_t;

/* Starts |rt|'s transfer thread unless it runs already. An error
 * (RESOURCE_EXHAUSTED: no thread could be started) means no job can be
 * queued. Any thread. */
pw_status_t pw__host_xfer_start(pw_runtime_t* rt);

/* Queues |job| on |rt|'s transfer thread, which pw__host_xfer_start must
 * have started. Cannot fail; any thread (a ready callback's included). */
void pw__host_xfer_enqueue(pw_runtime_t* rt, pw_host_xfer_job_t* job);

/* Runs the jobs still queued, then joins the thread (pw_runtime_destroy:
 * the clients are gone, so nothing queues more). No-op if never started. */
void pw__host_xfer_stop(pw_runtime_t* rt);

#endif /* PW_RUNTIME_HOST_XFER_H_ */
