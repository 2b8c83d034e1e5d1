/* Internal: the runtime's host worker threads (pw_runtime_options_t
 * .worker_count). They run runtime-side host work that parallelizes across
 * devices — today the per-device shard copies of large host transfers —
 * never device execution and never dispatch (that runs on the completing
 * thread). With 0 workers the work runs on the calling thread. */
#ifndef PW_RUNTIME_WORKERS_H_
#define PW_RUNTIME_WORKERS_H_

#include <pthread.h>

#include "pathways/allocator.h"
#include "pathways/status.h"

typedef struct pw_workers_s pw_workers_t;

pw_status_t pw__workers_create(pw_allocator_t allocator, uint32_t count,
                               pw_workers_t** out_workers);
/* Joins the threads; nothing may be running. NULL is a no-op. */
void pw__workers_destroy(pw_workers_t* workers);

/* Runs fn(user, i) for i in [0, count) on the workers and the calling
 * thread, and returns when all have finished. Returns the first error (the
 * lowest i that failed), or NULL. With NULL |workers| runs them inline.
 * Any thread; concurrent calls share the workers. */
pw_status_t pw__workers_parallel_for(pw_workers_t* workers, uint32_t count,
                                     pw_status_t (*fn)(void* user, uint32_t i),
                                     void* user);

#endif /* PW_RUNTIME_WORKERS_H_ */
