/* Internal to lib/sched: the execution block and its op records, the
 * per-plan dispatch data, and what the files of lib/sched call of each
 * other: the hot path (dispatch.c: launching, completing, appending),
 * executions (execution.c), submission (dispatch.c, its steps in submit.h), the debug mode without
 * gang order (unordered.c), plan preparation (plan.c), the block cache and
 * layout (block.c), armed graphs (armed.c), slices and clients (slice.c),
 * transfers (transfer.c) and the scheduler window (window.c). See
 * dispatch.c for the protocol and docs/architecture.md, "Dispatch". */
#ifndef PW_SCHED_DISPATCH_INTERNAL_H_
#define PW_SCHED_DISPATCH_INTERNAL_H_

#include "plugin/backend_call.h"
#include "sched/device.h"
#include "sched/report.h"
#include "sched/sched.h"

/* Op flags (pw_op_t.flags), fixed when a block is laid out. */
enum {
  PW_OP_TRANSFER = 1u,     /* a transfer op (else compute) */
  PW_OP_READY_ON_ONE = 2u, /* one producing op and no guard: its completion
                            * makes the inputs ready, no counter needed */
  PW_OP_UNORDERED = 4u,    /* the debug mode without gang order: launched
                            * on its launch slots (unordered.c) */
  PW_OP_QUEUED = 8u,       /* a compute op on a queue-ordered slice:
                            * launched ahead of its same-slice producers'
                            * completion (queued.c) */
  PW_OP_HOST = 16u,        /* a host op (host_task.c) */
  PW_OP_NODE_ARG = 32u,    /* a compute op whose node argument is not 0:
                            * launches read it from the plan op */
};

/* An op record in an execution block (128 bytes on 64-bit hosts, two
 * cache lines, packed back to back; what few runs touch is in its
 * pw_op_cold_t). The first 64 bytes hold what the launch path reads and
 * the per-run counters, the next 64 what completion reads; both are
 * filled from the plan when the block is laid out, so the hot path never
 * touches the plan op. The per-run state is armed at layout and re-armed
 * by the op's own completion (pw_op_rearm), while its lines are hot:
 * resubmitting a cached block does not walk its ops. */
typedef struct pw_op_s {
  /* -- launch -- (a record is two cache lines: ops start a line) */
  _Alignas(64) pw_atomic_u32_t pending;
  pw_atomic_u32_t inputs_ready;
  pw_atomic_u32_t devices_remaining;
  /* At most PW_EXECUTABLE_MAX_PARAMS (host tasks: PW_BACKEND_MAX_PARAMS). */
  uint16_t input_count;
  uint16_t output_count;
  pw_atomic_ptr_t slice_next;  /* next op in the sequence (physical slice) */
  struct pw_execution_s* exec;
  pw_slice_t* slice;
  pw_buffer_obj_t** inputs;    /* input_count, into the exec block */
  pw_buffer_obj_t** outputs;   /* output_count, into the exec block */
  pw_backend_executable_t loaded; /* compute ops: the loaded executable */
  /* -- completion -- */
  const uint32_t* successors;  /* the plan's, op indices */
  uint32_t successor_count;
  uint8_t flags;
  /* Every output is internal and has its shards: they stay allocated with
   * the block, so later runs skip pw_dispatch_allocate_outputs. Written
   * only by the thread that readies the op's inputs (one per run). */
  uint8_t outputs_kept;
  /* Some output is a graph output (the plan op's bitset says which). */
  uint8_t has_external;
  pw_atomic_ptr_t status;      /* first device error (owned) */
  pw_atomic_ptr_t dep_status;  /* first failed input (owned) */
  const pw_plan_op_t* plan;
  uint32_t index;              /* in the plan; gang id = exec->gang_base + index */
  uint32_t init_pending;       /* pending when armed */
  pw_atomic_ptr_t* links;      /* spanning ops: next op per part; else NULL */
  /* One callback node per parameter input (in input order among the
   * parameter inputs), in the execution block: waits for arguments that
   * are not ready yet. NULL for ops without parameter inputs. */
  pw__event_node_t* arg_waits;
} pw_op_t;

_Static_assert(sizeof(void*) != 8 || sizeof(pw_op_t) == 128, "an op record is two cache lines");

/* What few runs touch, out of the op record's two lines: the scheduler
 * window's links and order, charging's device time. In the block, one
 * per op (pw_execution_t.op_cold, by op index). */
typedef struct pw_op_cold_s {
  struct pw_op_s* sched_next;  /* incoming stack / client queue link */
  /* Spanning ops under a scheduler window: one queue link per part (else
   * NULL: sched_next is the link), how many parts' schedulers picked the
   * op so far, and whether it has entered the sequences. */
  struct pw_op_s** sched_links;
  pw_atomic_u32_t parts_picked;
  pw_atomic_u32_t appended;
  uint64_t client_seq;         /* scheduler window: client submission order */
  /* Measured device time (charging policies only, which also re-arm it:
   * pw_dispatch_op_complete). */
  pw_atomic_u64_t device_ns;
  /* A queued op: its producers in its own device queues, each of which
   * counts once out of devices_remaining when it completes, so that it
   * completes after them even when a backend completes out of queue order
   * (queued.c); and its link on the frame's list of ops whose completion
   * that made due (pw_dispatch_drain). */
  uint32_t queue_deps;
  struct pw_op_s* complete_next;
  /* A host op: its devices that reached it in this run, and its link in
   * the host-task pool's queue (host_task.c). */
  pw_atomic_u32_t host_arrived;
  struct pw_op_s* host_next;
} pw_op_cold_t;

/* Set in pw_execution_t.refs while the block is one of an armed graph's own
 * (pw_graph_exec_t): the last release leaves refs at exactly this value,
 * which tells the armed graph's next submission the block is free, and
 * does nothing else (the execution took no reference on its graph or its
 * client). pw__dispatch_exec_destroy clears it in a block still held, so
 * that its last release gives it to the client's cache as any block. */
#define PW_EXECUTION_ARMED (UINT32_C(1) << 31)

typedef struct pw_execution_s {
  /* References (the ops', the submitter's, the slices' on their tails,
   * waits), and PW_EXECUTION_ARMED. */
  pw_atomic_u32_t refs;
  pw_atomic_u32_t ops_remaining;
  pw_atomic_ptr_t status;      /* first error (owned) */
  pw_client_t* client;
  pw_runtime_t* runtime;
  pw_object_t* graph;          /* retained: keeps the plan alive */
  const pw_plan_t* plan;
  const struct pw_plan_dispatch_s* dispatch; /* the plan's (plan.c) */
  /* The block's reference on its last done event (recycled by the next
   * run that asks for one); completed by this run only if |done_wanted|:
   * a run submitted without a done event (out_done NULL) has none, since
   * nobody could hold or wait for it. */
  pw_event_t* done;
  bool done_wanted;
  pw_buffer_obj_t** args;      /* retained */
  pw_buffer_obj_t** outputs;   /* every op output, retained */
  /* A run of an armed graph in a shared block (counted in its
   * shared_runs until the run completes), else NULL. */
  pw_graph_exec_obj_t* armed;
  /* A run in an armed graph's armed block: the slot that counts it
   * (pw_armed_block_t), else NULL. */
  pw_armed_block_t* own_slot;
  uint32_t output_total;
  uint32_t op_count;           /* plan->op_count (the plan may be gone) */
  uint32_t stripe;             /* the submitting thread's client stripe */
  /* Launch deadline of the run's ops (ns after their launch; 0: none). */
  uint64_t launch_deadline_ns;
  uint64_t gang_base;          /* gang id of op 0 */
  uint64_t observed_ns;        /* while observed: when it was submitted (report.c) */
  size_t block_size;
  /* The plan this block is laid out for (pw_plan_t.id), set once its
   * layout is complete; 0: none (a failed submission, the debug mode). */
  uint64_t plan_id;
  /* Where the internal values lie in the block (offsets; laid out in
   * order, the first with a NULL slice ends them). Their device memory
   * stays allocated while the block is cached for its plan, and is given
   * back when the block is zeroed for another plan or freed
   * (pw_block_release_internal). */
  size_t internal_at;
  size_t internal_end;
  pw_op_t* ops;
  pw_op_cold_t* op_cold;       /* one per op */
} pw_execution_t;

static inline pw_op_cold_t* pw_op_cold(const pw_op_t* op) {
  return &op->exec->op_cold[op->index];
}

/* How many counts take |op|'s devices_remaining to 0: one per device
 * (unit of dispatch: a device or a lane, lanes.c); for a queued op two
 * per device (its launch, when the device's cursor
 * moves past it, and its completion) and one per producer in its own
 * queues (queued.c). */
static inline uint32_t pw_op_device_counts(const pw_op_t* op) {
  if (__builtin_expect(!(op->flags & PW_OP_QUEUED), 1)) return op->slice->lane_count;
  return 2 * op->slice->lane_count + op->exec->op_cold[op->index].queue_deps;
}

/* Whether plan op |p| is launched queue-ordered: a compute op on a slice
 * whose devices all take queued launches (queued.c), outside the debug
 * mode without gang order. */
static inline bool pw_plan_op_queued(const pw_runtime_t* rt, const pw_plan_op_t* p) {
  return p->kind == PW_PLAN_COMPUTE && p->vslice->slice->queue_depth != 0 && !rt->no_gang_order;
}

/* |op|'s link to its successor in the sequence of its |p|-th part. */
static inline pw_atomic_ptr_t* pw_op_link_at(pw_op_t* op, uint32_t p) {
  return op->links ? &op->links[p] : &op->slice_next;
}

/* Whether an op with |param_inputs| parameter inputs has a submit guard in
 * its pending count: only ops with parameter inputs (their waits are
 * registered after the appends) and every op of the debug mode without
 * gang order (it launches at inputs ready, without a sequence). Other ops
 * are fully set up before anything of their execution can launch, and
 * their inputs may become ready before they are appended: the append then
 * claims them. */
static inline bool pw_op_guarded(const pw_runtime_t* rt, uint32_t param_inputs) {
  return param_inputs > 0 || rt->no_gang_order;
}

/* Whether plan op |p|, with |launch_deps| producers to wait for
 * (pw_plan_launch_deps), waits for nothing in a submission: ready before
 * it is appended (see pw__dispatch_start). */
static inline bool pw_op_is_root(const pw_runtime_t* rt, uint32_t launch_deps,
                                 uint32_t param_inputs) {
  return launch_deps == 0 && !pw_op_guarded(rt, param_inputs);
}

/* Arms |op|'s per-run counters for its next run: at layout, then at the
 * end of each run's completion of |op|, when nothing of the run reads them
 * any more (every producer counted itself down before |op| could launch,
 * every device counted itself out). The block reaches the next submitter
 * through the client's cache, after the execution's last locked count, so
 * relaxed stores do. The scheduler window's fields are reset at submission
 * instead (another part's scheduler may still look at a spanning op it
 * has not dropped yet). */
static inline void pw_op_rearm(pw_op_t* op) {
  pw_atomic_store_u32_relaxed(&op->pending, op->init_pending);
  pw_atomic_store_u32_relaxed(&op->inputs_ready, 0);
  pw_atomic_store_u32_relaxed(&op->devices_remaining, pw_op_device_counts(op));
}

static inline size_t pw_align_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }


/* One block: header | ops | their cold parts | args | outputs | op input pointers | debug
 * slots | internal values | parameter waits | spanning ops' sequence links
 * | their queue links. */
typedef struct pw_block_layout_s {
  size_t ops_at, cold_at, args_at, outs_at, ins_at, slots_at, internal_at, waits_at, links_at,
      queue_links_at, size;
} pw_block_layout_t;

/* Position of physical slice |part| among |slice|'s parts. */
static inline uint32_t pw_span_position(const pw_slice_t* slice, const pw_slice_t* part) {
  return slice->span_count == 1 ? 0 : slice->span_position[part->index];
}

static inline uint64_t pw_op_gang_id(const pw_op_t* op) {
  return op->exec->gang_base + op->index;
}

/* Index of device |d| in |op|'s mesh (and in its buffers' shard arrays). */
static inline uint32_t pw_op_mesh_index(const pw_op_t* op, const pw_device_t* d) {
  const pw_slice_t* s = op->slice;
  if (s->span_count == 1) return d->mesh_index;
  return pw_span_position(s, d->slice) * (s->device_count / s->span_count) + d->mesh_index;
}

/* The spec of plan op |p|'s output |k|. */
static inline const pw_array_spec_t* pw_plan_output_spec(const pw_plan_op_t* p, uint32_t k) {
  if (p->kind == PW_PLAN_HOST) return &p->host_specs[k];
  return p->kind == PW_PLAN_TRANSFER ? p->transfer_spec : &p->executable->signature.output_specs[k];
}

/* ---- cursors and tails (dispatch.c, slice.c) ---------------------------- */

/* A device's cursor: an op pointer tagged with the device's state at it
 * (see dispatch.c). */
enum {
  PW_CURSOR_WAITING = 0,
  PW_CURSOR_RUNNING = 1,
  PW_CURSOR_IDLE = 2,
  /* Reached the op and reading its inputs-ready flag: nobody else may
   * claim the op meanwhile (a readier that finds it hands the launch over
   * by setting RUNNING instead), so the op cannot run, complete and be
   * freed under the reader. See pw_dispatch_settle. */
  PW_CURSOR_ARRIVING = 3,
  PW_CURSOR_TAG_MASK = 3,
};
_Static_assert(_Alignof(pw_op_t) >= 4, "cursor tags need two low bits");

/* Bit 0 of a slice's tail: pinned by pw__dispatch_client_release_tails. */
#define PW_TAIL_PINNED ((uintptr_t)1)

static inline void* pw_cursor(pw_op_t* op, uintptr_t tag) {
  return (void*)((uintptr_t)op | tag);
}

/* |op|'s link in the sequence of physical slice |part|. */
static inline pw_atomic_ptr_t* pw_op_link(pw_op_t* op, const pw_slice_t* part) {
  return pw_op_link_at(op, pw_span_position(op->slice, part));
}

/* ---- per-plan dispatch data (plan.c) ------------------------------------ */

/* What the dispatcher derives per plan op. */
typedef struct pw_plan_op_dispatch_s {
  uint32_t param_inputs;   /* inputs that are graph parameters */
  /* Producing ops whose completion the op's launch waits for: all of
   * them (static_deps), but for a queued op only those that are not
   * earlier launches in its own device queues (transfers). */
  uint32_t launch_deps;
  uint32_t output_base;    /* first of its outputs in |values| and exec->outputs */
  /* The inputs that are a new buffer at every submission (a parameter,
   * or another op's graph output; the others are internal values): input
   * indices per_run[per_run_start .. + per_run_count) of the plan's. */
  uint32_t per_run_start;
  uint32_t per_run_count;
} pw_plan_op_dispatch_t;

/* Byte sizes of one op output, fixed by its spec and mesh. */
typedef struct pw_plan_value_s {
  size_t shard_bytes;
  size_t total_bytes;
} pw_plan_value_t;

/* What every submission of a plan would otherwise recompute: derived from
 * the (const) plan by its first submission, published once in
 * pw_plan_t.dispatch_data, freed with the plan through |header|. One
 * allocation of |bytes|. */
typedef struct pw_plan_dispatch_s {
  pw_plan_dispatch_header_t header;
  pw_allocator_t allocator;
  size_t bytes;
  uint64_t id;                     /* unique in the runtime, never 0 */
  pw_block_layout_t layout;        /* where everything lies in its blocks */
  uint32_t input_total;            /* sum of the ops' input counts */
  uint32_t output_total;           /* sum of the ops' output counts */
  uint32_t param_input_total;      /* sum of the ops' param_inputs */
  uint32_t link_total;             /* spanning ops' parts, summed */
  size_t internal_bytes;           /* internal values and their shard arrays */
  pw_plan_op_dispatch_t* ops;      /* op_count */
  pw_plan_value_t* values;         /* output_total, op order (output_base) */
  /* Op indices that a submission visits instead of walking every op, in
   * op order: roots (ready at submission), guarded ops (a submit guard in
   * pending: parameter inputs, or every op of the debug mode without gang
   * order) and ops with per-run inputs. Append groups: |append_order|
   * lists every op, group after group; group g is
   * append_order[runs[g] .. runs[g + 1]) (the last ends at op_count): ops
   * of one slice in op order, appended to its sequence at once, after
   * every group holding one of their producers (plan.c). */
  uint32_t* roots;
  uint32_t* guarded;
  uint32_t* rebind;
  uint32_t* runs;
  uint32_t* append_order;
  /* (home slice index, ops) pairs, one per slice that is some op's home
   * (span[0]), ascending: the completion counts an execution adds to its
   * client's per-slice stats when it completes. */
  uint32_t* home_counts;
  uint32_t home_count_n;
  uint32_t* per_run;               /* the ops' per-run input indices */
  uint32_t root_count;
  uint32_t guarded_count;
  uint32_t rebind_count;
  uint32_t run_count;
  /* Appends of one submission without a scheduler window: the parts of
   * every group's slice, summed (each holds a tail reference). */
  uint32_t tail_refs;
  /* The debug mode without gang order: each op's first launch slot in the
   * block's slots (unordered.c), and their count; else NULL and 0. */
  uint32_t* slot_base;
  size_t slot_count;
} pw_plan_dispatch_t;

/* |plan|'s dispatch data, derived on its first submission (two submitters
 * may race: one publishes, the other frees its copy). */
pw_status_t pw__plan_dispatch_prepare(pw_runtime_t* rt, const pw_plan_t* plan,
                                      const pw_plan_dispatch_t** out);

static inline pw_status_t pw_plan_dispatch(pw_runtime_t* rt, const pw_plan_t* plan,
                                           const pw_plan_dispatch_t** out) {
  /* The plan is const to its users; this word is the dispatcher's, written
   * once (pw__plan_dispatch_prepare). */
  const pw_plan_dispatch_t* pd =
      pw_atomic_load_ptr_acquire((pw_atomic_ptr_t*)&plan->dispatch_data);
  if (__builtin_expect(pd != NULL, 1)) {
    *out = pd;
    return NULL;
  }
  return pw__plan_dispatch_prepare(rt, plan, out);
}

/* The dispatch data of |plan| if a submission derived it, else NULL. */
static inline const pw_plan_dispatch_t* pw_plan_dispatch_if_any(const pw_plan_t* plan) {
  return pw_atomic_load_ptr_acquire((pw_atomic_ptr_t*)&plan->dispatch_data);
}

/* Adds |runs| completed runs of a plan to |client|'s per-slice op counts
 * (pw_client_slice_stats), per home slice (pw_plan_dispatch_t.home_counts). */
static inline void pw_plan_count_ops(pw_client_t* client, const pw_plan_dispatch_t* pd,
                                     uint64_t runs) {
  for (uint32_t k = 0; k < pd->home_count_n; ++k) {
    pw_atomic_fetch_add_u64(&client->sched_entries[pd->home_counts[2 * k]].ops_completed,
                            runs * pd->home_counts[2 * k + 1]);
  }
}

/* ---- executions (execution.c) ------------------------------------------- */

/* Gives |block| back to its client's cache (or frees it). block.c. */
void pw__block_put(pw_client_t* client, pw_execution_t* block);

/* Drops one reference to |exec|; the last one returns its block to the
 * client's cache and says so: the caller then drops the execution's
 * reference to the client. The last one of a armed block (refs then
 * PW_EXECUTION_ARMED) only frees it for its armed graph: the execution
 * took no client reference, and the block may be reused at once. */
static inline bool pw_execution_unref(pw_execution_t* exec) {
  if (pw_atomic_fetch_sub_u32(&exec->refs, 1) != 1) return false;
  pw_atomic_fence_acquire();
  pw_client_t* client = exec->client;
  /* The ops' statuses were freed by their completions (pw_op_rearm). */
  pw__object_release(exec->graph);
  pw__block_put(client, exec);
  return true;
}

static inline void pw_execution_release(pw_execution_t* exec) {
  pw_client_t* client = exec->client;
  uint32_t stripe = exec->stripe;
  if (pw_execution_unref(exec)) pw__client_release_stripe(client, stripe); /* may free it */
}

/* Internal values (op outputs that are not graph outputs) live in the
 * execution block: no handle, no ready event, no allocation of their own.
 * Their device memory stays with the block for the next run of its plan
 * (pw_dispatch_allocate_outputs and transfers allocate only missing
 * shards) and is given back when the block is zeroed for another plan or
 * freed: with the client at the latest. The slot of a graph output is
 * left NULL, as a reused block expects it. */
static inline void pw_execution_drop_output(pw_buffer_obj_t** slot) {
  pw_buffer_obj_t* b = *slot;
  if (b == NULL || b->ready == NULL) return; /* internal: kept */
  *slot = NULL;
  pw__object_release(&b->header);
}

/* A slot's count moves by one: each has one writer at a time (see
 * pw_armed_block_t). */
static inline void pw_slot_count(pw_atomic_u64_t* count) {
  pw_atomic_store_u64_release(count, pw_atomic_load_u64_relaxed(count) + 1);
}

/* Every op of |exec| completed: its done event, its counts, its block. */
void pw__execution_complete(pw_execution_t* exec);
/* A submission of |exec| failed before it ran: its outputs and event go,
 * its block back (|own|: stays in its armed graph's slot, free). */
void pw__execution_free_unsubmitted(pw_execution_t* exec, bool own);

/* ---- submission (submit.h, dispatch.c, unordered.c) --------------------- */

/* A per-run helper of one function, inlined into it whatever its size (a
 * split submission must not cost the run a call or a struct in memory). */
#define PW_SCHED_INLINE static inline __attribute__((always_inline))

/* What one submission takes (pw__dispatch_submit's arguments, and the
 * armed block it runs in, if any). */
typedef struct pw_submit_s {
  pw_client_t* client;
  const pw_plan_t* plan;
  const pw_plan_dispatch_t* pd;
  pw_object_t* graph_ref;
  pw_graph_exec_obj_t* armed;
  pw_armed_block_t* own;
  pw_buffer_obj_t* const* args;
  pw_buffer_obj_t** outputs;
  pw_event_t** out_done;
  uint64_t launch_deadline_ns; /* 0: the runtime's */
} pw_submit_t;

/* A block for |s| laid out for its plan, with its done event, or a
 * failure (nothing of the run left). |plan_id| 0: laid out afresh, never
 * reused as it is (submit.h). */
pw_status_t pw__submit_block(const pw_submit_t* s, uint64_t plan_id, pw_execution_t** out);
/* Sets |exec|'s per-run state (arguments, gang ids, rebound inputs,
 * outputs, graph references, counts) with |refs| references; nothing can
 * fail from here on (submit.h). */
void pw__submit_arm(const pw_submit_t* s, pw_execution_t* exec, uint32_t refs);
/* Starts armed |exec|: roots ready, appends (|append|: not in the debug
 * mode without gang order, which has no sequence), argument waits, guards
 * dropped, all inside this thread's outermost dispatch frame; then drops
 * the submitter's reference (dispatch.c). */
void pw__dispatch_start(pw_execution_t* exec, bool own, bool append);

/* The debug mode without gang order's submission (unordered.c). */
pw_status_t pw__unordered_submit(pw_submit_t* s);
/* Launches |op| on its launch slots, now that its inputs are ready. */
void pw__unordered_launch(pw_op_t* op);
/* The debug mode's launch slots of |plan|: writes each op's first into
 * |slot_base| (when not NULL) and returns their count; 0 outside the
 * debug mode. */
size_t pw__unordered_slots(const pw_runtime_t* rt, const pw_plan_t* plan, uint32_t* slot_base);

/* ---- dispatch.c, for the other files ------------------------------------ */

/* The device whose transfer part this thread is issuing copies for (its
 * guard held: the part cannot complete meanwhile), or NULL; a drain must
 * be running. */
void pw__dispatch_set_issuing(pw_device_t* d);
bool pw__dispatch_is_issuing(const pw_device_t* d);
/* |d| finished its running op (d->done_status says how): queued on this
 * thread's frame, or run now. */
void pw__dispatch_push_done(pw_device_t* d);
/* Queues the launch of d->running on |d| (or runs a frame now). */
void pw__dispatch_push_launch(pw_device_t* d);
/* |d| finished its running op, on the launching thread. */
void pw__dispatch_device_done(pw_device_t* d);
/* Sets the fields of |d|'s launch descriptor that stay the same for every
 * op it launches. */
void pw__dispatch_launch_init(pw_device_t* d);
/* Appends the group |first| .. |last| (of |exec|, all on |slice|) to the
 * sequence of every part of |slice| (pw_dispatch_append). */
void pw__dispatch_append(pw_slice_t* slice, pw_execution_t* exec, pw_op_t* first,
                         pw_op_t* last);

/* The backend's done for a launch token |user| (the watchdog calls it
 * too, with DEADLINE_EXCEEDED: the first completion wins the token). */
void pw__dispatch_backend_done(void* user, pw_status_t status, const pw_backend_timing_t* timing);
/* Completes the launch of token |user| with |status| (owned) unless its
 * done came first (then |status| is freed): the watchdog's. */
void pw__dispatch_expire(void* user, pw_status_t status);
/* A queued launch of |op| on |d| (launched at |launched_ns| when
 * charging) completed, its token claimed (|device_ns| reported over the
 * unit's devices, or UINT64_MAX): counts it out of |op| and frees its queue slot, inside a
 * dispatch frame. */
void pw__dispatch_queued_done(pw_device_t* d, pw_op_t* op, uint64_t launched_ns,
                              pw_status_t status, uint64_t device_ns);
/* Runs |fn(arg)| inside this thread's dispatch frame, or a new outermost
 * one drained before this returns. */
void pw__dispatch_in_frame(void (*fn)(void* arg), void* arg);
/* Every device of |op| is done (pw_dispatch_op_complete, from no device's
 * cursor). */
void pw__dispatch_op_complete(pw_op_t* op);
/* Whether |d| is queued on this thread's frame as a done item. */
bool pw__dispatch_done_queued_here(const pw_device_t* d);
/* A second (or stale) completion of launch token |user|: reported, never
 * acted on (misbehave.c); |how| says what the plugin did. */
void pw__dispatch_completed_again(void* user, pw_status_t status, const char* how);
/* |d| launched queued |op| (or failed to: the completion was counted):
 * moves its cursor on, as a finished op does. */
void pw__dispatch_device_advance(pw_device_t* d);

/* The launch descriptor fields of |op| on |d| (its inputs' and outputs'
 * shards, executable, gang) for a launch now (dispatch.c, queued.c). */
static inline void pw_fill_launch(pw_device_t* d, pw_op_t* op) {
  pw_slice_t* slice = op->slice;
  uint32_t m = pw_op_mesh_index(op, d);
  for (uint32_t k = 0; k < op->input_count; ++k) d->inputs[k] = op->inputs[k]->shards[m];
  /* Allocated before inputs_ready was set (pw_dispatch_allocate_outputs). */
  for (uint32_t k = 0; k < op->output_count; ++k) d->outputs[k] = op->outputs[k]->shards[m];
  /* The per-device fields (size, device, argument arrays, callback) are
   * set once: pw__dispatch_launch_init. */
  pw_backend_launch_t* l = &d->launch;
  l->executable = op->loaded;
  l->mesh_index = m;
  l->group_devices = slice->group_devices;
  l->group_size = slice->device_count;
  l->gang_id = pw_op_gang_id(op);
  l->input_count = op->input_count;
  l->output_count = op->output_count;
  /* Most graphs set no node arguments: they never touch the plan op. */
  l->node_arg = __builtin_expect(!(op->flags & PW_OP_NODE_ARG), 1) ? 0 : op->plan->node_arg;
}


/* ---- lanes.c: host launch ------------------------------------------------- */

/* |slice|'s lanes: sets lane_count and launch_host, and when lanes are
 * used, |*out_hosts| to every device's host (allocated; NULL otherwise). */
pw_status_t pw__lanes_hosts(pw_slice_t* slice, uint32_t** out_hosts);
/* Sets each unit's devices (and frees |hosts|), before launch init. */
void pw__lanes_layout(pw_slice_t* slice, uint32_t* hosts);
/* Hands the backend |op|'s launch on lane |d| with completion |user|. */
pw_status_t pw__lane_launch(pw_device_t* d, pw_op_t* op, void* user, uint64_t queue_seq);

/* Hands the backend |op|'s launch on |d| with completion |user| and
 * queue position |queue_seq| (0: not queued): one launch, or a lane's
 * launch_host. */
static inline pw_status_t pw_device_launch_op(pw_device_t* d, pw_op_t* op, void* user,
                                              uint64_t queue_seq) {
  PW_REPORT(d->slice->runtime, pw__report_launch, d, op, user, queue_seq);
  if (__builtin_expect(op->input_count > d->arg_capacity || op->output_count > d->arg_capacity,
                       0)) {
    PW_RETURN_IF_ERROR(pw__device_grow_args(
        d, op->input_count > op->output_count ? op->input_count : op->output_count));
  }
  if (__builtin_expect(d->lane_size > 1, 0)) return pw__lane_launch(d, op, user, queue_seq);
  pw_fill_launch(d, op);
  pw_backend_launch_t* l = &d->launch;
  l->queue_seq = queue_seq;
  l->done_user = user;
  pw_slice_t* slice = op->slice;
  return slice->launch != NULL ? slice->launch(slice->backend->self, l)
                               : pw__backend_launch(slice->backend, l);
}

/* Annotates a failure of |op| on |d| with the node, slice and device (or
 * the lane's devices). */
void pw__health_launch_failed(pw_device_t* d, pw_status_t status); /* health.c */

static inline pw_status_t pw_device_annotate(pw_status_t status, const pw_op_t* op,
                                             pw_device_t* d) {
  if (pw_status_code(status) == PW_STATUS_UNAVAILABLE) pw__health_launch_failed(d, status);
  uint32_t m = pw_op_mesh_index(op, d);
  if (d->lane_size == 1) {
    return pw_status_annotate(status, "node %u (\"%s\") on slice '%s' device %u", op->plan->node,
                              op->plan->name, op->slice->name, m);
  }
  return pw_status_annotate(status, "node %u (\"%s\") on slice '%s' devices %u-%u (host %u)",
                            op->plan->node, op->plan->name, op->slice->name, m,
                            m + d->lane_size - 1, d->host_launch.host);
}

/* Logs the launch of |op| on |d| the watchdog is failing (dump.c); its
 * completion is claimed and not delivered yet, so |op| is alive. */
void pw__dump_overdue(pw_device_t* d, const pw_op_t* op);

/* ---- queued.c: queue-ordered launch -------------------------------------- */

/* Asks |slice|'s devices for queue-ordered launch and sets it up (depth,
 * queue tokens); undone by pw__queued_slice_deinit. */
pw_status_t pw__queued_slice_init(pw_slice_t* slice);
void pw__queued_slice_deinit(pw_slice_t* slice);
/* Launches queued compute |op| (d->running) on |d|, or parks |d| at it
 * while its queue is full (the completion that frees a slot relaunches). */
void pw__queued_launch(pw_device_t* d, pw_op_t* op);
/* Gives back one queue slot of |d|; a parked launch is relaunched. */
void pw__queued_slot_free(pw_device_t* d);

/* ---- watchdog.c ---------------------------------------------------------- */

/* Arms |t|'s deadline |ns| from now and starts the watchdog on first use. */
void pw__watchdog_arm(pw_completion_token_t* t, uint64_t ns);

/* The deadline of a launch of |op| made now, in its token |t| (none when
 * neither the run nor the runtime sets one). */
static inline void pw_token_set_deadline(pw_completion_token_t* t, pw_op_t* op) {
  if (__builtin_expect(!pw_atomic_load_u32_relaxed(&op->slice->runtime->deadlines_used), 1)) {
    return; /* every token's deadline is still 0 */
  }
  uint64_t ns = op->exec->launch_deadline_ns;
  if (__builtin_expect(ns == 0, 1)) {
    pw_atomic_store_u64_relaxed(&t->deadline, 0);
    return;
  }
  pw__watchdog_arm(t, ns);
}

/* ---- health.c: slices lost and back ------------------------------------- */

/* Loses physical |slice| for |cause| (owned; UNAVAILABLE): true when it
 * was online. |by_health|: its devices' health said so (it comes back
 * when they recover). */
bool pw__health_lose(pw_slice_t* slice, pw_status_t cause, bool by_health);
/* Applies every device's health now (pw_runtime_check_health); returns
 * the slices that changed. */
uint32_t pw__health_check(pw_runtime_t* rt);
/* A launch on |d| failed with UNAVAILABLE (|status|, borrowed): loses
 * its slice when a device of it reports FAILED (or its backend reports
 * no health). */
void pw__health_launch_failed(pw_device_t* d, pw_status_t status);
/* Why |op| must not launch on |d| now that a slice is lost: UNAVAILABLE
 * when |d|'s slice is, ABORTED when another part of its gang is; NULL
 * when none is any more. Cold: the caller saw op->slice->lost set. */
pw_status_t pw__health_refusal(const pw_device_t* d, const pw_op_t* op);

/* Whether |op| may not launch because a slice it runs on is lost: one
 * load per launch. */
static inline bool pw_op_slice_lost(const pw_op_t* op) {
  return __builtin_expect(pw_atomic_load_u32_relaxed(&op->slice->lost) != 0, 0);
}

/* ---- transfer.c ---------------------------------------------------------- */

/* Launches |d|'s part of transfer op |op|. */
void pw__dispatch_transfer_launch(pw_device_t* d, pw_op_t* op);
/* Frees |d|'s copy tokens (at slice deinit; for a debug-mode launch slot,
 * when its part is done). */
void pw__dispatch_free_copy_tokens(pw_device_t* d, pw_allocator_t allocator);

/* ---- host_task.c --------------------------------------------------------- */

/* |d| reached host op |op| (its inputs ready, none failed): the last of
 * its devices to arrive hands the call to the runtime's host-task pool,
 * which completes every device of it. */
void pw__host_task_launch(pw_device_t* d, pw_op_t* op);

/* ---- window.c: the gang scheduler of a runtime with a window ------------ */

/* Queues |op| for |slice|'s scheduler (one of its parts). */
void pw__sched_submit(pw_slice_t* slice, pw_op_t* op);
/* Admits what |slice|'s scheduler can, unless another thread holds it
 * (which then goes again). */
void pw__sched_kick(pw_slice_t* slice);

/* ---- block.c ------------------------------------------------------------ */

/* Where everything lies in a block for |plan| (its dispatch data's totals
 * set). */
void pw__block_layout(const pw_plan_t* plan, const pw_plan_dispatch_t* pd, pw_block_layout_t* l);

/* Bytes of an internal value in a block for a slice of |device_count|
 * devices. */
size_t pw__block_internal_value_bytes(uint32_t device_count);

/* A block of |size| bytes from |client|'s cache, or a new zeroed one;
 * |*out_prepared|: laid out for plan |plan_id| already. */
pw_status_t pw__block_get(pw_client_t* client, size_t size, uint64_t plan_id, unsigned char** out,
                          bool* out_prepared);

/* The block in armed block |slot| (free: see
 * pw_armed_block_t), or a new zeroed one stored there; as
 * pw__block_get otherwise. */
pw_status_t pw__block_get_armed(pw_client_t* client, pw_armed_block_t* slot, size_t size,
                              uint64_t plan_id, unsigned char** out, bool* out_prepared);

/* Frees every block in |client|'s cache. */
void pw__block_cache_drain(pw_client_t* client);

/* Lays out a zeroed block for |plan|: op records, internal values, the
 * links inside append groups, the graph outputs' buffers. On failure
 * exec->output_total counts the outputs made. */
pw_status_t pw__execution_lay_out(pw_execution_t* exec, const pw_plan_t* plan);

/* Gives back what a finished |block| holds that nothing reads any more:
 * its internal values' device memory and its last done event (the block
 * then is no longer laid out for its plan). For a destroyed client's
 * block that a slice still holds as its tail. */
void pw__block_release_memory(pw_execution_t* block);

/* Makes the graph outputs' buffers in a block laid out for |plan| before. */
pw_status_t pw__execution_relayout(pw_execution_t* exec, const pw_plan_t* plan);

/* ---- slice.c ------------------------------------------------------------ */

/* At pw_client_destroy, once nothing of |client| is in flight and its
 * cache is closed: gives back the device memory of the blocks that slices
 * still hold as their tails (slice.c). */
void pw__dispatch_client_release_tails(pw_client_t* client);

#endif /* PW_SCHED_DISPATCH_INTERNAL_H_ */
