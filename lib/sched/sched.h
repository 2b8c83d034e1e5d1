/* Internal: what lib/sched offers the modules above it (lib/runtime):
 * submission, armed graphs, the dispatch state of slices and clients,
 * and whether a thread runs inside the runtime's callbacks. Not
 * installed. */
#ifndef PW_SCHED_SCHED_H_
#define PW_SCHED_SCHED_H_

#include "event/event_internal.h"
#include "graph/plan.h"

/* An armed graph (pw_graph_exec_t, include/pathways/graph.h): the graph
 * and its plan, held for its lifetime, and private execution blocks that
 * its runs use instead of the client's cache (lib/sched/armed.c). */
#define PW_GRAPH_EXEC_BLOCKS 2
struct pw_execution_s;

/* One armed block of an armed graph and the count of its runs. A
 * armed run touches neither the client's in-flight counts nor its
 * per-slice op counts (locked instructions on words every run of the
 * client shares): it is counted here, by plain stores, as the slot has
 * one writer at a time. The armed graph's user submits (|submitted|); the
 * thread completing the slot's current run stores |counted| before its
 * done event and |finished| after it, as its last touch of the run. A
 * slot is reused only once |finished| caught up, so the next run's
 * completer comes after this one. pw_client_wait_idle, pw_client_slice_stats
 * and pw__dispatch_exec_destroy read them (lib/sched/armed.c). */
typedef struct pw_armed_block_s {
  /* NULL until first used. Free for the next submission when its
   * references are all gone (refs == PW_EXECUTION_ARMED) and its last
   * run finished. Set and read by the armed graph's user only. */
  _Alignas(64) pw_atomic_ptr_t block;
  pw_atomic_u64_t submitted;
  pw_atomic_u64_t counted;  /* runs in the op counts (pw_client_slice_stats) */
  pw_atomic_u64_t finished; /* runs through their completion */
} pw_armed_block_t;

typedef struct pw_graph_exec_s {
  pw_armed_block_t blocks[PW_GRAPH_EXEC_BLOCKS];
  pw_client_t* client;
  pw_object_t* graph; /* retained */
  const struct pw_plan_s* plan;
  uint32_t next_block;
  /* Its runs in shared blocks (both private ones were busy) not complete
   * yet: pw_graph_exec_destroy waits for them too. */
  pw_atomic_u32_t shared_runs;
  struct pw_graph_exec_s* prev;
  struct pw_graph_exec_s* next;
} pw_graph_exec_obj_t;

/* Whether this thread runs inside a dispatch frame (lib/sched): the
 * runtime is running plugin code (a backend's launch or done, a
 * transport's copy or its completion) or callbacks on it. */
bool pw__dispatch_running(void);
/* Whether this thread runs a host task's function (lib/sched/host_task.c). */
bool pw__host_task_running(void);
/* Whether this thread is inside a callback the runtime is running (an
 * event callback, plugin code called from the dispatcher, a host task,
 * a topology callback): destroy functions that wait for work refuse to
 * run there (FAILED_PRECONDITION), since the work may need this thread
 * to return first. */
/* Whether this thread is delivering topology events (lib/sched/health.c). */
bool pw__health_in_callback(void);
static inline bool pw__in_callback(void) {
  return pw__event_callback_depth() != 0 || pw__dispatch_running() || pw__host_task_running() ||
         pw__health_in_callback();
}

/* Slice health (lib/sched/health.c): the state made at runtime create
 * and freed at destroy (after the clients: it stops the health thread);
 * a destroyed client's topology callback removed (no call to it running
 * once this returns); the worst health the backend reports among a
 * slice's devices (a value past FAILED counts as failed); and DATA_LOSS
 * naming |what| when a loss since |b| was made took its shards, else
 * NULL (one load while nothing was lost). */
pw_status_t pw__health_create(pw_runtime_t* rt);
void pw__health_destroy(pw_runtime_t* rt);
void pw__health_forget(pw_client_t* client);
pw_device_health_t pw__slice_worst_health(pw_slice_t* slice);
pw_status_t pw__buffer_lost(const pw_buffer_obj_t* b, const char* what);
/* Whether a part of |slice| (physical or composite) is lost, after
 * bringing back those lost through health whose devices all answer
 * usable again; pw__health_refresh does that for every lost slice (before
 * the resource manager picks slices). Cold: for slices seen lost. */
bool pw__health_still_lost(pw_slice_t* slice);
void pw__health_refresh(pw_runtime_t* rt);
/* Frees the execution blocks |client| keeps for reuse (pw_client_trim). */
void pw__dispatch_client_trim(pw_client_t* client);
/* At pw_client_destroy, once nothing is in flight: frees the cached
 * blocks (and their device memory) on the destroying thread, and makes
 * the cache take no more (lib/sched). */
void pw__dispatch_client_close(pw_client_t* client);


/* Instantiates |plan| with |args| (already validated, references owned by
 * the caller) and enqueues it. Fills |outputs| with new buffer objects (one
 * reference each for the caller) and |*out_done| with a retained event
 * (|out_done| NULL: the run has no done event at all; its outputs' ready
 * events still carry its errors).
 * |graph_ref| is a reference to the graph owning |plan| that the execution
 * takes over on success (on failure the caller keeps it). With |armed|
 * (then |graph_ref| is NULL and |plan| is armed->plan) the execution runs
 * in one of the armed graph's armed blocks if one is free, else in a
 * shared block with its own reference on armed->graph. */
pw_status_t pw__dispatch_submit(pw_client_t* client, const pw_plan_t* plan,
                                pw_object_t* graph_ref, pw_graph_exec_obj_t* armed,
                                pw_buffer_obj_t* const* args,
                                pw_buffer_obj_t** outputs, pw_event_t** out_done,
                                uint64_t launch_deadline_ns);

/* Links a new armed graph into its client's list / takes it out, waits
 * for its runs and gives its blocks up (lib/sched/armed.c). */
void pw__dispatch_exec_register(pw_graph_exec_obj_t* armed);
void pw__dispatch_exec_destroy(pw_graph_exec_obj_t* armed);
/* Runs of |client|'s armed graphs in their armed blocks not finished
 * yet (they are not in the client's in-flight counts), and their ops
 * counted on physical slice |slice| (not in its sched entries until their
 * armed graph is destroyed). Take execs_lock. */
uint64_t pw__dispatch_armed_inflight(pw_client_t* client);
uint64_t pw__dispatch_armed_ops(pw_client_t* client, uint32_t slice);
/* One step of a polling wait on a cold path: a yield for the first 64
 * |spins|, then 50 us sleeps for about 10 ms, then 1 ms sleeps. */
void pw__dispatch_backoff(uint32_t spins);

/* Launch deadlines (lib/sched/watchdog.c). A snapshot of up to
 * PW_LAUNCH_SNAPSHOT_MAX launches outstanding now, each in its current
 * use, starting at token |next| of the runtime's (where the previous
 * snapshot stopped, so that repeated snapshots cover every device):
 * pw__dispatch_fail_stale then fails with DEADLINE_EXCEEDED (logged,
 * naming slice and device; the completion names the node) each that is
 * still outstanding in the same use, and returns how many. For
 * pw_client_destroy's drain deadline: no allocation. */
#define PW_LAUNCH_SNAPSHOT_MAX 256
typedef struct pw_launch_snapshot_s {
  size_t next;
  uint32_t count;
  struct {
    struct pw_completion_token_s* token;
    uint32_t state;
  } entries[PW_LAUNCH_SNAPSHOT_MAX];
} pw_launch_snapshot_t;
void pw__dispatch_snapshot_launches(pw_runtime_t* rt, pw_launch_snapshot_t* snapshot);
uint32_t pw__dispatch_fail_stale(pw_runtime_t* rt, const pw_launch_snapshot_t* snapshot,
                                 uint64_t waited_ns);
/* Stops the runtime's watchdog thread, if it was started. */
void pw__watchdog_stop(pw_runtime_t* rt);
/* Stops the runtime's host-task threads, if any were started (nothing
 * runs then: every client is gone). lib/sched/host_task.c. */
void pw__host_tasks_stop(pw_runtime_t* rt);

/* Initialises/destroys the dispatch state of |slice|. */
pw_status_t pw__dispatch_slice_init(pw_slice_t* slice);
void pw__dispatch_slice_deinit(pw_slice_t* slice);
/* Releases the execution that |slice|'s tail keeps alive. The runtime does
 * it for every slice before deinitialising any: the last release of a
 * client's execution frees the client's cached blocks, which give back
 * device memory on the slices of their internal values. */
void pw__dispatch_slice_drop_tail(pw_slice_t* slice);

#endif /* PW_SCHED_SCHED_H_ */
