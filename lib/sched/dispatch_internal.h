/* Internal to lib/sched: the execution block and its op records, shared by
 * the dispatcher (dispatch.c: launching, completing, appending, the
 * scheduler window, submission) and the block code (block.c: plan
 * preparation, block layout, the per-client block cache). See dispatch.c
 * for the protocol and docs/architecture.md, "Dispatch". */
#ifndef PW_SCHED_DISPATCH_INTERNAL_H_
#define PW_SCHED_DISPATCH_INTERNAL_H_

#include "runtime/objects.h"

/* Op flags (pw_op_t.flags), fixed when a block is laid out. */
enum {
  PW_OP_TRANSFER = 1u,     /* a transfer op (else compute) */
  PW_OP_READY_ON_ONE = 2u, /* one producing op and no guard: its completion
                            * makes the inputs ready, no counter needed */
  PW_OP_UNORDERED = 4u,    /* the debug mode without gang order: launched
                            * on its slots (pw_op_cold_t.slots) */
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
  uint8_t input_count;
  uint8_t output_count;
  uint8_t flags;
  /* Every output is internal and has its shards: they stay allocated with
   * the block, so later runs skip pw_dispatch_allocate_outputs. Written
   * only by the thread that readies the op's inputs (one per run). */
  uint8_t outputs_kept;
  pw_atomic_ptr_t slice_next;  /* next op in the sequence (physical slice) */
  struct pw_execution_s* exec;
  pw_slice_t* slice;
  pw_buffer_obj_t** inputs;    /* input_count, into the exec block */
  pw_buffer_obj_t** outputs;   /* output_count, into the exec block */
  pw_backend_executable_t loaded; /* compute ops: the loaded executable */
  /* -- completion -- */
  const uint32_t* successors;  /* the plan's, op indices */
  uint32_t successor_count;
  uint32_t external_outputs;   /* the plan's bits: graph outputs */
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
 * window's links and order, the debug mode's slots, charging's device
 * time. In the block, one per op (pw_execution_t.op_cold, by op index). */
typedef struct pw_op_cold_s {
  struct pw_op_s* sched_next;  /* incoming stack / client queue link */
  /* Spanning ops under a scheduler window: one queue link per part (else
   * NULL: sched_next is the link), how many parts' schedulers picked the
   * op so far, and whether it has entered the sequences. */
  struct pw_op_s** sched_links;
  pw_atomic_u32_t parts_picked;
  pw_atomic_u32_t appended;
  uint64_t client_seq;         /* scheduler window: client submission order */
  pw_device_t* slots;          /* debug mode without gang order only */
  /* Measured device time (charging policies only, which also re-arm it:
   * pw_dispatch_op_complete). */
  pw_atomic_u64_t device_ns;
} pw_op_cold_t;

/* Set in pw_execution_t.refs while the block is private to an armed graph
 * (pw_graph_exec_t): the last release leaves refs at exactly this value,
 * which tells the armed graph's next submission the block is free, and
 * does nothing else (the execution took no reference on its graph or its
 * client). pw__dispatch_exec_destroy clears it in a block still held, so
 * that its last release gives it to the client's cache as any block. */
#define PW_EXECUTION_PRIVATE (UINT32_C(1) << 31)

typedef struct pw_execution_s {
  /* References (the ops', the submitter's, the slices' on their tails,
   * waits), and PW_EXECUTION_PRIVATE. */
  pw_atomic_u32_t refs;
  pw_atomic_u32_t ops_remaining;
  pw_atomic_ptr_t status;      /* first error (owned) */
  pw_client_t* client;
  pw_runtime_t* runtime;
  pw_object_t* graph;          /* retained: keeps the plan alive */
  const pw_plan_t* plan;
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
  /* A run in an armed graph's private block: the slot that counts it
   * (pw_graph_exec_slot_t), else NULL. */
  pw_graph_exec_slot_t* own_slot;
  uint32_t output_total;
  uint32_t op_count;           /* plan->op_count (the plan may be gone) */
  uint32_t stripe;             /* the submitting thread's client stripe */
  uint64_t gang_base;          /* gang id of op 0 */
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

/* |op|'s link to its successor in the sequence of its |p|-th part. */
static inline pw_atomic_ptr_t* pw_op_link_at(pw_op_t* op, uint32_t p) {
  return op->links ? &op->links[p] : &op->slice_next;
}

/* Whether |p|'s pending count has a submit guard: only ops with
 * parameter inputs (their waits are registered after the appends) and
 * every op of the debug mode without gang order (it launches at inputs
 * ready, without a sequence). Other ops are fully set up before anything
 * of their execution can launch, and their inputs may become ready before
 * they are appended: the append then claims them. */
static inline bool pw_op_guarded(const pw_runtime_t* rt, const pw_plan_op_t* p) {
  return p->param_inputs > 0 || rt->no_gang_order;
}

/* Whether |p| waits for nothing in a submission: ready before it is
 * appended (see pw__dispatch_submit). */
static inline bool pw_op_is_root(const pw_runtime_t* rt, const pw_plan_op_t* p) {
  return p->static_deps == 0 && !pw_op_guarded(rt, p);
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
  pw_atomic_store_u32_relaxed(&op->devices_remaining, op->slice->device_count);
}

static inline size_t pw_align_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }

/* Element count of an allocation that may hold none (at least 1). */
static inline size_t pw_nz(uint32_t n) { return n ? n : 1; }

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

/* ---- between dispatch.c and transfer.c ---------------------------------- */

/* The device whose transfer part this thread is issuing copies for (its
 * guard held: the part cannot complete meanwhile), or NULL; a drain must
 * be running. */
void pw__dispatch_set_issuing(pw_device_t* d);
bool pw__dispatch_is_issuing(const pw_device_t* d);
/* |d| finished its running op (d->done_status says how): queued on this
 * thread's frame, or run now. */
void pw__dispatch_push_done(pw_device_t* d);
/* |d| finished its running op, on the launching thread. */
void pw__dispatch_device_done(pw_device_t* d);
/* Launches |d|'s part of transfer op |op| (transfer.c). */
void pw__dispatch_transfer_launch(pw_device_t* d, pw_op_t* op);
/* Frees |d|'s copy tokens (at slice deinit; for a debug-mode launch slot,
 * when its part is done). */
void pw__dispatch_free_copy_tokens(pw_device_t* d, pw_allocator_t allocator);

/* Adds |runs| completed runs of |plan| to |client|'s per-slice op counts
 * (pw_client_slice_stats), per home slice (pw_plan_t.home_counts). */
static inline void pw_plan_count_ops(pw_client_t* client, const pw_plan_t* plan, uint64_t runs) {
  for (uint32_t k = 0; k < plan->home_count_n; ++k) {
    pw_atomic_fetch_add_u64(&client->sched_entries[plan->home_counts[2 * k]].ops_completed,
                            runs * plan->home_counts[2 * k + 1]);
  }
}

/* ---- dispatch.c, for window.c ------------------------------------------- */

/* Appends the group |first| .. |last| (of |exec|, all on |slice|) to the
 * sequence of every part of |slice| (pw_dispatch_append). */
void pw__dispatch_append(pw_slice_t* slice, pw_execution_t* exec, pw_op_t* first,
                         pw_op_t* last);
/* Drops one reference to |exec| (pw_execution_release). */
void pw__execution_release(pw_execution_t* exec);

/* ---- window.c: the gang scheduler of a runtime with a window ------------ */

/* Queues |op| for |slice|'s scheduler (one of its parts). */
void pw__sched_submit(pw_slice_t* slice, pw_op_t* op);
/* Admits what |slice|'s scheduler can, unless another thread holds it
 * (which then goes again). */
void pw__sched_kick(pw_slice_t* slice);

/* ---- block.c ------------------------------------------------------------ */

/* Where everything lies in a block for |plan|. */
void pw__block_layout(const pw_runtime_t* rt, const pw_plan_t* plan, pw_block_layout_t* l);

/* A block of |size| bytes from |client|'s cache, or a new zeroed one;
 * |*out_prepared|: laid out for plan |plan_id| already. */
pw_status_t pw__block_get(pw_client_t* client, size_t size, uint64_t plan_id, unsigned char** out,
                          bool* out_prepared);

/* Gives |block| back to its client's cache (or frees it). */
void pw__block_put(pw_client_t* client, pw_execution_t* block);

/* The block in an armed graph's private |slot| (free: see
 * pw_graph_exec_slot_t), or a new zeroed one stored there; as
 * pw__block_get otherwise. */
pw_status_t pw__block_get_own(pw_client_t* client, pw_graph_exec_slot_t* slot, size_t size,
                              uint64_t plan_id, unsigned char** out, bool* out_prepared);

/* Lays out a zeroed block for |plan|: op records, internal values, the
 * links inside append groups, the graph outputs' buffers. On failure
 * exec->output_total counts the outputs made. */
pw_status_t pw__execution_lay_out(pw_execution_t* exec, const pw_plan_t* plan,
                                  const pw_block_layout_t* l);

/* Gives back what a finished |block| holds that nothing reads any more:
 * its internal values' device memory and its last done event (the block
 * then is no longer laid out for its plan). For a destroyed client's
 * block that a slice still holds as its tail. */
void pw__block_release_memory(pw_execution_t* block);

/* At pw_client_destroy, once nothing of |client| is in flight and its
 * cache is closed: gives back the device memory of the blocks that slices
 * still hold as their tails (dispatch.c). */
void pw__dispatch_client_release_tails(pw_client_t* client);

/* Makes the graph outputs' buffers in a block laid out for |plan| before. */
pw_status_t pw__execution_relay(pw_execution_t* exec, const pw_plan_t* plan);

#endif /* PW_SCHED_DISPATCH_INTERNAL_H_ */
