#define _POSIX_C_SOURCE 200809L
/* Host ops in the dispatcher: a host node's run (include/pathways/graph.h,
 * "host tasks") is an op of its slice's sequence, like a compute op, and
 * goes through the same cursors, completion and failure paths
 * (dispatch.c); only its launch differs.
 *
 *   arrive:   each device (unit of dispatch) whose cursor reaches the op,
 *             its inputs ready, counts itself into the op's host_arrived
 *             and stays there (RUNNING, d->running the op: nobody else
 *             touches it). On a queue-ordered slice a device first waits
 *             for its queue to drain: host_drain_wait set, the queued
 *             completion that empties the queue relaunches it
 *             (pw__queued_slot_free), so the task runs after the slice's
 *             earlier ops completed on every device, not merely after
 *             they were launched. Later ops of the slice wait: the cursor
 *             does not move past the op until it is done.
 *   run:      the last device to arrive queues the op on the runtime's
 *             host-task pool (threads started on demand, at most
 *             PW_HOST_POOL_MAX), whose thread builds the context (every
 *             shard's host pointer, backend host_pointer), calls the
 *             function with no lock held and outside any dispatch frame,
 *             and records its error as the op's status, naming the node;
 *   complete: the same thread then counts every device of the op out,
 *             in one dispatch frame (they advance as from a finished
 *             launch: dependents of a failed task fail with it).
 *
 * The dispatcher's other files know a host op only by its flag
 * (PW_OP_HOST: block.c sets it, dispatch.c's launch calls here). */
#include <pthread.h>
#include <string.h>

#include "graph/host_task.h"
#include "plugin/backend_call.h"
#include "sched/dispatch_internal.h"

#define PW_HOST_POOL_MAX 8u

/* Set while this thread runs a host task's function (pw__in_callback). */
static _Thread_local bool pw_host_task_here;

bool pw__host_task_running(void) { return pw_host_task_here; }

typedef struct pw_host_pool_s {
  pw_allocator_t allocator;
  pthread_mutex_t lock;
  pthread_cond_t cond;       /* work queued, or stopping */
  pw_op_t* head;             /* queued ops (pw_op_cold_t.host_next) */
  pw_op_t* tail;
  uint32_t idle;             /* threads waiting for work */
  uint32_t thread_count;
  bool stopping;
  pthread_t threads[PW_HOST_POOL_MAX];
} pw_host_pool_t;

/* How many units of dispatch reach |op|: its devices' (or lanes'), or in
 * the debug mode without gang order its launch slots (one per device). */
static uint32_t pw_host_units(const pw_op_t* op) {
  return (op->flags & PW_OP_UNORDERED) ? op->slice->device_count : op->slice->lane_count;
}

/* Counts every unit of |op| out, as finished launches (in a frame: none
 * is handled before all are queued, so |op| stays alive meanwhile). */
static void pw_host_complete(void* arg) {
  pw_op_t* op = arg;
  pw_slice_t* slice = op->slice;
  if (op->flags & PW_OP_UNORDERED) {
    pw_execution_t* exec = op->exec;
    const pw_plan_dispatch_t* pd = exec->dispatch;
    pw_device_t* slots =
        (pw_device_t*)((unsigned char*)exec + pd->layout.slots_at) + pd->slot_base[op->index];
    for (uint32_t k = 0; k < slice->device_count; ++k) pw__dispatch_push_done(&slots[k]);
    return;
  }
  for (uint32_t p = 0; p < slice->span_count; ++p) {
    pw_slice_t* part = slice->span[p];
    for (uint32_t i = 0; i < part->lane_count; ++i) pw__dispatch_push_done(&part->devices[i]);
  }
}

/* Host pointers of |count| arrays' shards over |slice|'s mesh into
 * |ptrs| (count x device_count), their shard bytes into |bytes|. */
static pw_status_t pw_host_pointers(const pw_slice_t* slice, pw_buffer_obj_t* const* arrays,
                                    uint32_t count, const char* what, void** ptrs,
                                    size_t* bytes) {
  uint32_t n = slice->device_count;
  for (uint32_t k = 0; k < count; ++k) {
    bytes[k] = arrays[k]->shard_bytes;
    for (uint32_t m = 0; m < n; ++m) {
      void* p = pw__backend_host_pointer(slice->backend, slice->group_devices[m],
                                         arrays[k]->shards[m]);
      if (p == NULL && arrays[k]->shard_bytes != 0) {
        return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                              "%s %u: backend '%s' gives no host pointer for its shard on "
                              "device %u (a host task needs host-accessible memory)",
                              what, k, pw__backend_name(slice->backend), m);
      }
      ptrs[(size_t)k * n + m] = p;
    }
  }
  return NULL;
}

/* Calls |op|'s function with its shards' host pointers; its error (or
 * why it could not be called), unannotated. */
static pw_status_t pw_host_call(pw_op_t* op) {
  const pw_plan_op_t* p = op->plan;
  pw_slice_t* slice = op->slice;
  pw_allocator_t allocator = slice->runtime->allocator;
  uint32_t n = slice->device_count, arrays = op->input_count + op->output_count;
  /* Per array: its row of n host pointers, its pointer to that row, its
   * shard bytes, its spec. */
  size_t bytes = (size_t)arrays * (n * sizeof(void*) + sizeof(void*) + sizeof(size_t) +
                                   sizeof(pw_array_spec_t)) + 1;
  unsigned char* scratch = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(allocator, bytes, 0, (void**)&scratch));
  pw_array_spec_t* specs = (pw_array_spec_t*)scratch;
  void** ptrs = (void**)(specs + arrays);
  void** rows = ptrs + (size_t)arrays * n;
  size_t* sizes = (size_t*)(rows + arrays);
  for (uint32_t k = 0; k < op->input_count; ++k) specs[k] = op->inputs[k]->spec;
  for (uint32_t k = 0; k < op->output_count; ++k) specs[op->input_count + k] = p->host_specs[k];
  for (uint32_t a = 0; a < arrays; ++a) rows[a] = ptrs + (size_t)a * n;
  pw_status_t status = pw_host_pointers(slice, op->inputs, op->input_count, "input", ptrs, sizes);
  if (status == NULL) {
    status = pw_host_pointers(slice, op->outputs, op->output_count, "output",
                              ptrs + (size_t)op->input_count * n, sizes + op->input_count);
  }
  if (status == NULL) {
    pw_host_task_context_t c;
    memset(&c, 0, sizeof(c));
    c.struct_size = sizeof(c);
    c.node = p->node;
    c.name = p->name;
    c.gang_id = pw_op_gang_id(op);
    c.device_count = n;
    c.input_count = op->input_count;
    c.output_count = op->output_count;
    c.input_specs = specs;
    c.output_specs = specs + op->input_count;
    c.inputs = (void* const* const*)rows;
    c.input_bytes = sizes;
    c.outputs = (void* const* const*)(rows + op->input_count);
    c.output_bytes = sizes + op->input_count;
    const pw_host_task_obj_t* task = p->host_task;
    pw_host_task_here = true;
    status = task->fn(task->user, &c);
    pw_host_task_here = false;
  }
  pw_allocator_free(allocator, scratch, bytes);
  return status;
}

/* Runs |op| on this thread (a pool thread, or the last arriver when no
 * pool thread could start) and counts its devices out. */
static void pw_host_run(pw_op_t* op, pw_status_t status) {
  pw_runtime_t* rt = op->slice->runtime;
  pw_observe_t* o = pw_observing(rt);
  uint64_t started = o != NULL ? pw__report_host(o, op, false, 0, NULL) : 0;
  if (status == NULL) status = pw_host_call(op);
  o = pw_observing(rt);
  if (o != NULL) (void)pw__report_host(o, op, true, started, status);
  if (status != NULL) {
    status = pw_status_annotate(status, "node %u (\"%s\") on slice '%s': host task",
                                op->plan->node, op->plan->name, op->slice->name);
    void* expected = NULL;
    if (!pw_atomic_cas_ptr(&op->status, &expected, status)) pw_status_free(status);
  }
  pw__dispatch_in_frame(pw_host_complete, op);
}

static void* pw_host_main(void* arg) {
  pw_host_pool_t* pool = arg;
  pthread_mutex_lock(&pool->lock);
  for (;;) {
    pw_op_t* op = pool->head;
    if (op == NULL) {
      if (pool->stopping) break;
      pool->idle++;
      pthread_cond_wait(&pool->cond, &pool->lock);
      pool->idle--;
      continue;
    }
    pool->head = pw_op_cold(op)->host_next;
    if (pool->head == NULL) pool->tail = NULL;
    pthread_mutex_unlock(&pool->lock);
    pw_host_run(op, NULL);
    pthread_mutex_lock(&pool->lock);
  }
  pthread_mutex_unlock(&pool->lock);
  return NULL;
}

/* The runtime's pool, made on first use (NULL if that fails). */
static pw_host_pool_t* pw_host_pool(pw_runtime_t* rt) {
  pw_host_pool_t* pool = pw_atomic_load_ptr_acquire(&rt->host_pool);
  if (pool != NULL) return pool;
  pw_status_t status = pw_allocator_calloc(rt->allocator, sizeof(*pool), 0, (void**)&pool);
  if (status != NULL) {
    pw_status_free(status);
    return NULL;
  }
  pool->allocator = rt->allocator;
  pthread_mutex_init(&pool->lock, NULL);
  pthread_cond_init(&pool->cond, NULL);
  void* expected = NULL;
  if (!pw_atomic_cas_ptr(&rt->host_pool, &expected, pool)) {
    pthread_cond_destroy(&pool->cond);
    pthread_mutex_destroy(&pool->lock);
    pw_allocator_free(rt->allocator, pool, sizeof(*pool));
    pool = expected;
  }
  return pool;
}

/* Queues |op| for the pool: a thread is started when none is idle (up to
 * PW_HOST_POOL_MAX). False when no thread can run it. */
static bool pw_host_enqueue(pw_runtime_t* rt, pw_op_t* op) {
  pw_host_pool_t* pool = pw_host_pool(rt);
  if (pool == NULL) return false;
  pw_op_cold(op)->host_next = NULL;
  pthread_mutex_lock(&pool->lock);
  if (pool->idle == 0 && pool->thread_count < PW_HOST_POOL_MAX &&
      pthread_create(&pool->threads[pool->thread_count], NULL, pw_host_main, pool) == 0) {
    pool->thread_count++;
  }
  bool queued = pool->thread_count > 0;
  if (queued) {
    if (pool->tail != NULL) {
      pw_op_cold(pool->tail)->host_next = op;
    } else {
      pool->head = op;
    }
    pool->tail = op;
    pthread_cond_signal(&pool->cond);
  }
  pthread_mutex_unlock(&pool->lock);
  return queued;
}

void pw__host_task_launch(pw_device_t* d, pw_op_t* op) {
  if (d->queue_depth != 0 && pw_atomic_load_u32_seq_cst(&d->queue_outstanding) != 0) {
    /* Launches of earlier ops are still in |d|'s queue: wait for the
     * completion that empties it (pw__queued_slot_free), unless it came
     * meanwhile (whoever clears the flag relaunches). */
    pw_atomic_exchange_u32(&d->host_drain_wait, 1);
    if (pw_atomic_load_u32_seq_cst(&d->queue_outstanding) != 0 ||
        pw_atomic_exchange_u32(&d->host_drain_wait, 0) == 0) {
      return;
    }
  }
  pw_op_cold_t* cold = pw_op_cold(op);
  uint32_t units = pw_host_units(op);
  if (units > 1 && pw_atomic_fetch_add_u32(&cold->host_arrived, 1) + 1 != units) return;
  /* The last to arrive: nobody else touches the count this run. */
  pw_atomic_store_u32_relaxed(&cold->host_arrived, 0);
  pw_runtime_t* rt = op->slice->runtime;
  if (pw_host_enqueue(rt, op)) return;
  pw_host_run(op, pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                                 "no thread could be started to run it"));
}

void pw__host_tasks_stop(pw_runtime_t* rt) {
  pw_host_pool_t* pool = pw_atomic_exchange_ptr(&rt->host_pool, NULL);
  if (pool == NULL) return;
  pthread_mutex_lock(&pool->lock);
  pool->stopping = true;
  pthread_cond_broadcast(&pool->cond);
  pthread_mutex_unlock(&pool->lock);
  for (uint32_t i = 0; i < pool->thread_count; ++i) pthread_join(pool->threads[i], NULL);
  pthread_cond_destroy(&pool->cond);
  pthread_mutex_destroy(&pool->lock);
  pw_allocator_free(pool->allocator, pool, sizeof(*pool));
}
