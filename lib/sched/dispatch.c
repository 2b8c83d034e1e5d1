#define _POSIX_C_SOURCE 200809L
/* Gang-ordered asynchronous dispatch.
 *
 * Every physical slice has one slice sequence: an append-only linked list
 * of ops (op->slice_next), appended by submitters (or, with a scheduler
 * window, by the thread admitting ops, which may be a completing one): an
 * appender exchanges the slice's tail, then links the old tail to its ops
 * (pw_dispatch_append_part; the append locks only order spanning appends
 * and windowed admissions). Each device follows the sequence with a
 * cursor, a tagged op pointer:
 *
 *   op|WAITING  the device reached op; op's inputs are not complete yet
 *   op|RUNNING  the device launched op (or is about to)
 *   op|IDLE     the device finished op and op was the tail: nothing to do
 *
 * A device launches op when (a) its cursor reaches op and (b) op's inputs
 * are complete (op->inputs_ready). Whichever thread makes the second of the
 * two true claims the launch with a CAS WAITING -> RUNNING, so each
 * (device, op) launches exactly once, in sequence order, without a thread
 * per device or any polling:
 *   arrive:       cursor := op|WAITING (xchg); if inputs_ready, claim.
 *   inputs ready: inputs_ready := 1 (xchg); for each device at op|WAITING,
 *                 claim.
 * Both sides store, then load the other side's variable, with full fences
 * (locked instructions), so at least one of them sees the other.
 *
 * Appending op Z after tail X wakes devices idle at X: the appender CASes
 * cursors X|IDLE -> Z|WAITING (or straight to Z|RUNNING, claiming the
 * launch, when Z's inputs were already complete); if a device was not
 * idle yet, it stores X->slice_next = Z (xchg) and CASes again. A device
 * going idle stores X|IDLE (xchg), then re-reads X->slice_next. Again one
 * of the two sees the other; the CAS decides. A device claimed before the
 * store never reads X->slice_next again, so an append that finds every
 * device idle does not write it.
 *
 * Dependencies are counters: op->pending = producing ops not complete +
 * arguments not ready (+ 1, a guard the submitter drops when everything is
 * linked, for ops with parameter inputs: their argument waits are
 * registered after the appends). The thread that brings pending to 0 marks
 * inputs ready, possibly before the op is appended; the append then claims
 * it. Root ops (nothing to wait for) are marked ready before their append.
 *
 * A device that finishes op X whose link already names Y counts out of X
 * first (completing it if it was X's last device), then arrives at Y: X's
 * completion usually made Y ready, so the arrival takes the fast path. On
 * a one-device slice that completion readies the successors there with a
 * plain store (pw_dispatch_inputs_ready_quiet): the only device that can
 * wait at them is this one, and its cursor still names X. When X is the
 * tail the device goes idle first and counts out after: an append may
 * then move it to a successor, so the quiet path is not taken there.
 *
 * Per-run state is armed when a block is laid out and re-armed by each
 * op's own completion (pw_op_rearm), so a resubmitted block is not walked:
 * submission visits the plan's lists (roots, guarded ops, rebound inputs,
 * append groups) only.
 *
 * Completion never recurses: launches and device completions are work
 * items (the device struct itself, which is in at most one state at a time)
 * queued on a thread-local list and drained by the outermost dispatch frame
 * of the thread (a trampoline). A backend that completes inline, or a
 * 100k-op chain, runs in constant stack.
 *
 * Spanning ops. An op on a composite slice (a virtual slice over several
 * physical slices, lib/runtime/vslice.c) is one gang over all their
 * devices: it is appended to every part's sequence at once, holding the
 * parts' append locks in ascending slice index, with one link per part
 * (op->links[p]); each device follows its own slice's link. Two spanning
 * ops that share parts are appended in mutually exclusive sections, so they
 * are in the same relative order on every part they share, and the order
 * of sections is an interval order: no cycle of waits between slices. With
 * a scheduler window the op is admitted by its home slice's (span[0])
 * scheduler and appended the same way; admissions of single-slice ops take
 * their slice's append lock too (it keeps the op's execution alive through
 * the append). One-part appends of submitters take no lock: they do not
 * change the relative order of spanning ops on any part.
 *
 * Lifetime: ops live in their execution's block. An execution is freed
 * when (1) all its ops completed, (2) no slice has one of its ops as tail
 * (a tail may still be named by an IDLE cursor) and (3) its submitter
 * returned (see pw__dispatch_start). Freeing returns the block to its
 * client's cache, where the next submission of the same graph finds it
 * laid out, internal values' device memory included (see "execution
 * blocks", lib/sched/block.c; executions, execution.c). Submission
 * (pw__dispatch_submit, at the end of this file, with its per-run steps
 * in submit.h) fills the block and hands it to pw__dispatch_start;
 * slices' state is set up in slice.c; the debug mode without gang order
 * (unordered.c) launches on its own slots from pw_dispatch_inputs_ready.
 */
#include <stdio.h>
#include <string.h>

#include "base/defer.h"
#include "plugin/backend_call.h"
#include "sched/dispatch_internal.h"
#include "sched/report.h"
#include "sched/submit.h"
#include "sched/token.h"

enum {
  PW_WORK_LAUNCH = 1,
  PW_WORK_DONE = 2,
  /* Arrive at d->running (the next op, not ready yet when the device
   * finished its last one): pw_dispatch_device_finished. */
  PW_WORK_ARRIVE = 3,
};

/* ---- trampoline --------------------------------------------------------- */

typedef struct pw_dispatch_frame_s {
  pw_device_t* head;
  pw_device_t* tail;
  /* Devices of |count_op| (a gang op) that finished it as its slice's tail
   * on this thread and have not been counted out of devices_remaining yet:
   * pw_dispatch_count_out. */
  pw_op_t* count_op;
  uint32_t count_n;
  /* Ops of |done_exec| that completed on this thread and have not been
   * counted out of its ops_remaining yet: pw_dispatch_ops_done. */
  uint32_t done_n;
  struct pw_execution_s* done_exec;
  /* The device whose transfer part this thread is issuing copies for
   * (its guard held, so the part cannot complete meanwhile). */
  pw_device_t* issuing;
  /* Queued ops whose last count came from a producer's completion: they
   * complete from the drain loop, not inside it (no recursion down a
   * chain). Linked through pw_op_cold_t.complete_next. */
  pw_op_t* complete_head;
} pw_dispatch_frame_t;

static _Thread_local pw_dispatch_frame_t* pw_dispatch_current;

bool pw__dispatch_running(void) { return pw_dispatch_current != NULL; }

void pw__dispatch_set_issuing(pw_device_t* d) { pw_dispatch_current->issuing = d; }

bool pw__dispatch_is_issuing(const pw_device_t* d) {
  return pw_dispatch_current != NULL && pw_dispatch_current->issuing == d;
}

static void pw_dispatch_device_launch(pw_device_t* d);
static void pw_dispatch_device_done(pw_device_t* d);
static void pw_dispatch_device_finished(pw_device_t* d, bool direct);
static void pw_dispatch_arrive(pw_device_t* d, pw_op_t* op, bool direct);

static void pw_dispatch_op_complete(pw_op_t* op, pw_device_t* by);
static void pw_dispatch_count_flush(pw_dispatch_frame_t* frame);
static void pw_dispatch_done_flush(pw_dispatch_frame_t* frame);

static void pw_dispatch_drain(pw_dispatch_frame_t* frame) {
  for (;;) {
    while (frame->head != NULL) {
      pw_device_t* d = frame->head;
      frame->head = d->work_next;
      if (frame->head == NULL) frame->tail = NULL;
      d->work_next = NULL;
      if (d->work_kind == PW_WORK_LAUNCH) {
        pw_dispatch_device_launch(d);
      } else if (d->work_kind == PW_WORK_ARRIVE) {
        pw_op_t* op = d->running;
        d->running = NULL;
        pw_dispatch_arrive(d, op, true);
      } else {
        pw_dispatch_device_finished(d, true);
      }
    }
    /* Counts held back by pw_dispatch_count_out and pw_dispatch_ops_done
     * go in before the frame ends; completing their op or execution may
     * queue more work. */
    if (frame->count_op != NULL) {
      pw_dispatch_count_flush(frame);
    } else if (frame->complete_head != NULL) {
      pw_op_t* op = frame->complete_head;
      frame->complete_head = pw_op_cold(op)->complete_next;
      pw_dispatch_op_complete(op, NULL);
    } else if (frame->done_exec != NULL) {
      pw_dispatch_done_flush(frame);
    } else {
      return;
    }
  }
}

/* Queues |d| for |kind| on this thread's frame, or runs a frame now. */
static void pw_dispatch_push(pw_device_t* d, uint32_t kind) {
  d->work_kind = kind;
  d->work_next = NULL;
  pw_dispatch_frame_t* frame = pw_dispatch_current;
  if (frame != NULL) {
    if (frame->tail) {
      frame->tail->work_next = d;
    } else {
      frame->head = d;
    }
    frame->tail = d;
    return;
  }
  /* The outermost frame is a batch (base/defer.h): what plugins defer
   * while it runs (a remote worker's launches) goes out together at its
   * end. */
  pw_dispatch_frame_t local = {d, d, NULL, 0, 0, NULL, NULL, NULL};
  pw__defer_begin();
  pw_dispatch_current = &local;
  pw_dispatch_drain(&local);
  pw_dispatch_current = NULL;
  pw__defer_end();
}

/* ---- cursors ------------------------------------------------------------ */

static void pw_dispatch_try_claim(pw_device_t* d, pw_op_t* op) {
  void* expected = pw_cursor(op, PW_CURSOR_WAITING);
  if (pw_atomic_cas_ptr(&d->cursor, &expected, pw_cursor(op, PW_CURSOR_RUNNING))) {
    d->running = op;
    pw_dispatch_push(d, PW_WORK_LAUNCH);
  }
}

/* |d|'s cursor already holds op|WAITING (set by the caller, who keeps
 * |op|'s execution alive through this call: an appender). */
static void pw_dispatch_arrived(pw_device_t* d, pw_op_t* op) {
  if (pw_atomic_load_u32_acquire(&op->inputs_ready)) pw_dispatch_try_claim(d, op);
}

/* |d|'s cursor holds op|ARRIVING (set by the caller with a locked
 * instruction, the device's half of the Dekker pair with the readier's
 * exchange of the flag). Nobody else can claim |op| in that state, so it
 * stays alive while its flag is read here, although nothing else holds its
 * execution: the thread driving |d| may be the only one that knows of
 * |op|. Ready: launch. Not ready: WAITING (a readier will claim it), and
 * |op| is not touched again; unless a readier came meanwhile and handed
 * the launch over (RUNNING), which makes the CAS fail. */
static void pw_dispatch_settle(pw_device_t* d, pw_op_t* op) {
  if (!pw_atomic_load_u32_acquire(&op->inputs_ready)) {
    void* expected = pw_cursor(op, PW_CURSOR_ARRIVING);
    if (pw_atomic_cas_ptr(&d->cursor, &expected, pw_cursor(op, PW_CURSOR_WAITING))) return;
  } else {
    /* A readier may set the same value concurrently. */
    pw_atomic_store_ptr_release(&d->cursor, pw_cursor(op, PW_CURSOR_RUNNING));
  }
  d->running = op;
  pw_dispatch_push(d, PW_WORK_LAUNCH);
}

/* |direct|: launch now rather than as a work item (see
 * pw_dispatch_device_finished). */
static void pw_dispatch_arrive(pw_device_t* d, pw_op_t* op, bool direct) {
  if (pw_atomic_load_u32_acquire(&op->inputs_ready)) {
    /* Fast path (ops submitted ahead of the devices): the inputs are
     * complete, so the completer's scan is over or will not find this
     * device WAITING; nobody else can claim it. No locked instruction. */
    pw_atomic_store_ptr_release(&d->cursor, pw_cursor(op, PW_CURSOR_RUNNING));
    d->running = op;
    if (direct && pw_dispatch_current->head == NULL) {
      pw_dispatch_device_launch(d);
    } else {
      pw_dispatch_push(d, PW_WORK_LAUNCH);
    }
    return;
  }
  pw_atomic_exchange_ptr(&d->cursor, pw_cursor(op, PW_CURSOR_ARRIVING));
  pw_dispatch_settle(d, op);
}

static void pw_dispatch_backend_done(void* user, pw_status_t status);

void pw__dispatch_launch_init(pw_device_t* d) {
  if (d->arg_block == NULL) pw__device_free_args(d); /* the inline arrays */
  pw_backend_launch_t* l = &d->launch;
  memset(l, 0, sizeof(*l));
  l->struct_size = sizeof(*l);
  l->device = d->backend_device;
  l->inputs = d->inputs;
  l->outputs = d->outputs;
  l->done = pw_dispatch_backend_done;
  l->done_timed = pw__dispatch_backend_done;
  l->queue_seq = 0;
  d->reported_ns = UINT64_MAX;
  for (uint32_t k = 0; k < PW_DEVICE_TOKENS; ++k) {
    d->tokens[k].device = d;
    d->tokens[k].generation = 0;
    pw_atomic_init_u32(&d->tokens[k].state, 1); /* generation 0, completed */
  }
  l->done_user = NULL; /* a token per launch: pw_dispatch_device_launch */
  /* A lane's (its host set by lanes.c). */
  pw_backend_host_launch_t* h = &d->host_launch;
  uint32_t host = h->host;
  memset(h, 0, sizeof(*h));
  h->struct_size = sizeof(*h);
  h->host = host;
  h->device_count = d->lane_size;
  h->inputs = d->lane_inputs;
  h->outputs = d->lane_outputs;
  h->done = pw_dispatch_backend_done;
  h->done_timed = pw__dispatch_backend_done;
}

/* Records |status| (owned) as |op|'s dependency failure if it is the
 * first. */
static void pw_dispatch_fail_dep(pw_op_t* op, pw_status_t status) {
  void* expected = NULL;
  if (!pw_atomic_cas_ptr(&op->dep_status, &expected, status)) pw_status_free(status);
}

/* Allocates every device's output shards of compute |op| before any part
 * launches: a gang must launch on all its devices or on none, since parts
 * already in a collective would wait forever for one that could not
 * launch. A failure fails the op on every device, like a failed input. */
static void pw_dispatch_allocate_outputs(pw_op_t* op) {
  if (op->outputs_kept || (op->flags & PW_OP_TRANSFER) ||
      pw_atomic_load_ptr_acquire(&op->dep_status) != NULL) {
    return;
  }
  pw_slice_t* slice = op->slice;
  for (uint32_t k = 0; k < op->output_count; ++k) {
    pw_buffer_obj_t* out = op->outputs[k];
    for (uint32_t m = 0; m < slice->device_count; ++m) {
      if (out->shards[m] != NULL) continue;
      pw_status_t status = pw__backend_allocate(slice->backend, slice->group_devices[m],
                                                out->shard_bytes, &out->shards[m]);
      if (status != NULL) {
        pw_dispatch_fail_dep(op, pw_status_annotate(status,
                                                    "node %u (\"%s\") on slice '%s': output %u "
                                                    "on device %u", op->plan->node, op->plan->name,
                                                    slice->name, k, m));
        return;
      }
    }
  }
  /* A cached block keeps its internal values' memory (plan_id != 0); graph
   * outputs are new buffers every run. */
  op->outputs_kept = !op->has_external && op->exec->plan_id != 0;
}

static void pw_dispatch_inputs_ready(pw_op_t* op) {
  pw_dispatch_allocate_outputs(op);
  pw_atomic_exchange_u32(&op->inputs_ready, 1);
  pw_slice_t* slice = op->slice;
  if (op->flags & PW_OP_UNORDERED) {
    pw__unordered_launch(op);
    return;
  }
  void* waiting = pw_cursor(op, PW_CURSOR_WAITING);
  void* arriving = pw_cursor(op, PW_CURSOR_ARRIVING);
  for (uint32_t p = 0; p < slice->span_count; ++p) {
    pw_slice_t* part = slice->span[p];
    for (uint32_t i = 0; i < part->lane_count; ++i) {
      pw_device_t* d = &part->devices[i];
      void* cursor = pw_atomic_load_ptr_relaxed(&d->cursor);
      /* A device still arriving gets the launch handed over: its thread
       * launches (pw_dispatch_settle). If it moved on to WAITING first,
       * the CAS fails, reloads |cursor|, and the claim follows. */
      if (cursor == arriving &&
          pw_atomic_cas_ptr(&d->cursor, &cursor, pw_cursor(op, PW_CURSOR_RUNNING))) {
        continue;
      }
      if (cursor == waiting) pw_dispatch_try_claim(d, op);
    }
  }
}

/* |op|'s inputs are complete, and device |by| made them so while its
 * cursor is at another op (pw_dispatch_device_done) and it is the only
 * device that follows |op|: no device can be waiting at |op|, and |by|
 * will read the flag on this thread when it gets there, so a plain store
 * does, without the scan or a locked instruction. */
static void pw_dispatch_inputs_ready_quiet(pw_op_t* op) {
  pw_dispatch_allocate_outputs(op);
  pw_atomic_store_u32_release(&op->inputs_ready, 1);
}

static void pw_dispatch_dep_done(pw_op_t* op) {
  if (pw_atomic_fetch_sub_u32(&op->pending, 1) == 1) pw_dispatch_inputs_ready(op);
}

/* ---- completion ----------------------------------------------------------- */

/* One of |succ|'s producers completed (or was all it waited for). |quiet|:
 * see pw_dispatch_inputs_ready_quiet. */
static void pw_dispatch_producer_done(pw_op_t* succ, bool quiet) {
  if (!(succ->flags & PW_OP_READY_ON_ONE) && pw_atomic_fetch_sub_u32(&succ->pending, 1) != 1) {
    return;
  }
  if (quiet) {
    pw_dispatch_inputs_ready_quiet(succ);
  } else {
    pw_dispatch_inputs_ready(succ);
  }
}

/* One op of |exec| completed. Its count out of ops_remaining is held in
 * this thread's frame while the ops that complete next on this thread
 * belong to the same execution, as pw_dispatch_count_out holds a gang's
 * devices: a run whose ops all complete on one thread (an inline backend)
 * counts them with no locked instruction at all (the thread that counted
 * every op knows nobody else counted one), otherwise one per stretch.
 * The frame adds it when an op of another execution completes, before
 * the user's callbacks of an op's ready events run, or before it ends:
 * |exec| completes no later than the end of this drain. |exec| stays
 * alive meanwhile: it has not completed. */
static void pw_dispatch_ops_done(pw_execution_t* exec) {
  pw_dispatch_frame_t* frame = pw_dispatch_current;
  if (exec->op_count == 1) {
    pw__execution_complete(exec);
    return;
  }
  if (frame == NULL) {
    if (pw_atomic_fetch_sub_u32(&exec->ops_remaining, 1) == 1) pw__execution_complete(exec);
    return;
  }
  if (frame->done_exec == exec) {
    if (++frame->done_n == exec->op_count) pw_dispatch_done_flush(frame);
    return;
  }
  if (frame->done_exec != NULL) pw_dispatch_done_flush(frame);
  frame->done_exec = exec;
  frame->done_n = 1;
}

static void pw_dispatch_done_flush(pw_dispatch_frame_t* frame) {
  pw_execution_t* exec = frame->done_exec;
  uint32_t n = frame->done_n;
  frame->done_exec = NULL;
  frame->done_n = 0;
  /* All of its ops counted here: nobody else counted one. */
  if (n == exec->op_count || pw_atomic_fetch_sub_u32(&exec->ops_remaining, n) == n) {
    pw__execution_complete(exec);
  }
}

/* The successors of queued |op| (pw_dispatch_op_complete): a queued
 * successor was launched behind it in the same device queues, not at its
 * completion (queued.c), and counts it out of its devices_remaining; a
 * failure reaches it as its own status, since it may have launched
 * already (every device of its gang then launches it too, whatever this
 * says). Others (transfers) as for any op. */
static void pw_dispatch_queued_successors(pw_op_t* op, pw_status_t failure,
                                          const pw_slice_t* quiet_slice,
                                          pw_dispatch_frame_t* frame) {
  pw_execution_t* exec = op->exec;
  for (uint32_t s = 0; s < op->successor_count; ++s) {
    pw_op_t* succ = &exec->ops[op->successors[s]];
    bool in_queue = (op->flags & succ->flags & PW_OP_QUEUED) != 0;
    if (failure) {
      pw_status_t dep = pw_status_make(pw_status_code(failure),
                                       "input node %u (\"%s\") failed: %s", op->plan->node,
                                       op->plan->name, pw_status_message(failure));
      void* expected = NULL;
      if (!in_queue) {
        pw_dispatch_fail_dep(succ, dep);
      } else if (!pw_atomic_cas_ptr(&succ->status, &expected, dep)) {
        pw_status_free(dep);
      }
    }
    if (!in_queue) {
      pw_dispatch_producer_done(succ, succ->slice == quiet_slice);
    } else if (pw_atomic_fetch_sub_u32(&succ->devices_remaining, 1) == 1) {
      /* It completed on its devices before this (out of queue order): it
       * completes now, from this thread's drain loop. */
      if (frame != NULL) {
        pw_op_cold(succ)->complete_next = frame->complete_head;
        frame->complete_head = succ;
      } else {
        pw_dispatch_op_complete(succ, NULL);
      }
    }
  }
}

/* Every device of |op| is done. |by|: the device that finished last, if
 * its cursor still names |op| (pw_dispatch_device_done), else NULL. */
static void pw_dispatch_op_complete(pw_op_t* op, pw_device_t* by) {
  pw_execution_t* exec = op->exec;
  pw_status_t failure = pw_atomic_load_ptr_acquire(&op->status);
  pw_runtime_t* rt = op->slice->runtime;
  PW_REPORT(rt, pw__report_op_done, op, failure);
  /* The ready events' callbacks are the user's: this thread holds back no
   * other execution's count while they run (one may wait for it). */
  pw_dispatch_frame_t* frame = pw_dispatch_current;
  if (op->has_external && frame != NULL && frame->done_exec != NULL &&
      frame->done_exec != exec) {
    pw_dispatch_done_flush(frame);
  }
  if (op->has_external) {
    const uint32_t* words = pw_plan_external_words(op->plan);
    for (uint32_t w = 0; w < (op->output_count + 31u) / 32u; ++w) {
      for (uint32_t bits = words[w]; bits != 0; bits &= bits - 1) {
        pw_event_t* ready = op->outputs[w * 32u + (uint32_t)__builtin_ctz(bits)]->ready;
        pw__event_complete_runtime(ready, pw_status_clone(failure));
      }
    }
  }
  /* Successors on |by|'s slice, when it has no other device, are made
   * ready quietly: |by| is the only device that can wait at them. */
  pw_slice_t* quiet_slice = by != NULL && by->slice->lane_count == 1 ? by->slice : NULL;
  if (__builtin_expect(op->flags & PW_OP_QUEUED, 0)) {
    pw_dispatch_queued_successors(op, failure, quiet_slice, frame);
  } else {
    for (uint32_t s = 0; s < op->successor_count; ++s) {
      pw_op_t* succ = &exec->ops[op->successors[s]];
      if (failure) {
        pw_dispatch_fail_dep(succ, pw_status_make(pw_status_code(failure),
                                                  "input node %u (\"%s\") failed: %s",
                                                  op->plan->node, op->plan->name,
                                                  pw_status_message(failure)));
      }
      pw_dispatch_producer_done(succ, succ->slice == quiet_slice);
    }
  }
  if (failure) {
    void* expected = NULL;
    pw_status_t copy = pw_status_clone(failure);
    if (!pw_atomic_cas_ptr(&exec->status, &expected, copy)) pw_status_free(copy);
    pw_atomic_store_ptr_relaxed(&op->status, NULL);
    pw_status_free(failure);
  }
  pw_status_t dep = pw_atomic_load_ptr_relaxed(&op->dep_status);
  if (dep != NULL) {
    pw_atomic_store_ptr_relaxed(&op->dep_status, NULL);
    pw_status_free(dep);
  }
  pw_slice_t* slice = op->slice->span[0]; /* home: its scheduler admitted |op| */
  if (rt->sched_charge) {
    pw_sched_entry_t* entry = &exec->client->sched_entries[slice->index];
    pw_atomic_u64_t* device_ns = &pw_op_cold(op)->device_ns;
    uint64_t ns = pw_atomic_load_u64_relaxed(device_ns);
    /* Re-armed here rather than in pw_op_rearm: without charging the
     * op's cold part is not touched at all. */
    pw_atomic_store_u64_relaxed(device_ns, 0);
    pw_atomic_fetch_add_u64(&entry->device_ns, ns);
    pw_atomic_fetch_add_u64(&entry->pending_charge_ns, ns);
  }
  if (rt->sched_window != 0) {
    /* A spanning op took a window slot on each of its slices. */
    for (uint32_t k = 0; k < op->slice->span_count; ++k) {
      pw_atomic_fetch_sub_u32(&op->slice->span[k]->sched_admitted, 1);
      pw__sched_kick(op->slice->span[k]);
    }
  }
  pw_op_rearm(op);
  pw_dispatch_ops_done(exec);
}

/* ---- device work -------------------------------------------------------- */

/* Whether |d| is queued on this thread's frame as a done item (a second
 * completion's check: misbehave.c). */
bool pw__dispatch_done_queued_here(const pw_device_t* d) {
  pw_dispatch_frame_t* frame = pw_dispatch_current;
  if (frame == NULL) return false;
  for (pw_device_t* q = frame->head; q != NULL; q = q->work_next) {
    if (q == d && q->work_kind == PW_WORK_DONE) return true;
  }
  return false;
}

/* The |timing| of a completion the watchdog makes (pw__dispatch_expire):
 * losing the claim to the backend's own done is then no error. */
static const pw_backend_timing_t pw_dispatch_expired;

/* The backend's done: |user| is the launch's token. The first completion
 * wins its once-flag (the one locked instruction a completion adds). A
 * queued launch completes apart from its device's cursor (queued.c).
 * |observe|: the runtime's observers, or NULL (a constant in the common
 * path, pw_dispatch_launch_done, so that reporting costs it one branch). */
PW_SCHED_INLINE void pw_dispatch_launch_done_as(void* user, pw_status_t status,
                                                const pw_backend_timing_t* timing,
                                                pw_observe_t* observe) {
  pw_completion_token_t* t = pw_token_of(user);
  /* A queued token's op and launch time are read before the claim: once
   * claimed, its device may arm it for its next launch. */
  pw_op_t* queued_op = t->queued ? pw_atomic_load_ptr_relaxed(&t->op) : NULL;
  uint64_t launched_ns = t->queued ? pw_atomic_load_u64_relaxed(&t->launched_ns) : 0;
  uint64_t observed_at = observe != NULL ? pw__report_launched_at(user) : 0;
  if (!pw_token_claim(user)) {
    if (timing == &pw_dispatch_expired) {
      pw_status_free(status); /* the watchdog lost to the backend's done */
      return;
    }
    pw__dispatch_completed_again(user, status, "called done twice");
    return;
  }
  bool expired = timing == &pw_dispatch_expired;
  pw_device_t* d = t->device;
  if (__builtin_expect(expired, 0)) {
    timing = NULL;
    pw__dump_overdue(d, t->queued ? queued_op : d->running);
  }
  uint64_t reported = UINT64_MAX;
  if (timing != NULL && timing->struct_size >= PW_BACKEND_TIMING_SIZE_V1 &&
      timing->end_ns >= timing->start_ns) {
    /* Device time over the unit's devices: summed by the backend, else
     * the span on each (lanes.c). */
    bool summed = timing->struct_size >= PW_BACKEND_TIMING_SIZE_V2 && timing->busy_ns != 0;
    reported = summed ? timing->busy_ns : (timing->end_ns - timing->start_ns) * d->lane_size;
  }
  if (observe != NULL) {
    pw__report_launch_done(observe, d, t->queued ? queued_op : d->running, observed_at, t->queued,
                           status, timing, expired);
  }
  if (t->queued) {
    pw__dispatch_queued_done(d, queued_op, launched_ns, status, reported);
    return;
  }
  d->done_status = status;
  d->reported_ns = reported;
  pw_dispatch_push(d, PW_WORK_DONE);
}

static __attribute__((noinline, cold)) void pw_dispatch_launch_done_observed(
    void* user, pw_status_t status, const pw_backend_timing_t* timing, pw_observe_t* observe) {
  pw_dispatch_launch_done_as(user, status, timing, observe);
}

PW_SCHED_INLINE void pw_dispatch_launch_done(void* user, pw_status_t status,
                                             const pw_backend_timing_t* timing) {
  pw_observe_t* observe = pw_observing(pw_token_of(user)->device->slice->runtime);
  if (__builtin_expect(observe != NULL, 0)) {
    pw_dispatch_launch_done_observed(user, status, timing, observe);
    return;
  }
  pw_dispatch_launch_done_as(user, status, timing, NULL);
}

static void pw_dispatch_backend_done(void* user, pw_status_t status) {
  pw_dispatch_launch_done(user, status, NULL);
}

void pw__dispatch_backend_done(void* user, pw_status_t status, const pw_backend_timing_t* timing) {
  pw_dispatch_launch_done(user, status, timing);
}

void pw__dispatch_expire(void* user, pw_status_t status) {
  pw_dispatch_launch_done(user, status, &pw_dispatch_expired);
}


static void pw_dispatch_device_launch(pw_device_t* d) {
  pw_op_t* op = d->running;
  if (op->flags & PW_OP_QUEUED) {
    pw__queued_launch(d, op);
    return;
  }
  pw_status_t dep = pw_atomic_load_ptr_acquire(&op->dep_status);
  if (dep != NULL) {
    /* An input failed: the op does not run; it still passes through this
     * device's cursor and resolves, failed. */
    d->done_status = pw_status_clone(dep);
    pw_dispatch_device_done(d);
    return;
  }
  if (pw_op_slice_lost(op)) {
    pw_status_t refused = pw__health_refusal(d, op);
    if (refused != NULL) {
      d->done_status = refused;
      pw_dispatch_device_done(d);
      return;
    }
  }
  pw_slice_t* slice = op->slice;
  if (op->flags & (PW_OP_TRANSFER | PW_OP_HOST)) {
    if (slice->runtime->sched_charge) d->launch_ns = pw_clock_now();
    if (op->flags & PW_OP_HOST) {
      pw__host_task_launch(d, op);
    } else {
      pw__dispatch_transfer_launch(d, op);
    }
    return;
  }
  if (slice->runtime->sched_charge) d->launch_ns = pw_clock_now();
  /* The launch's completion token, armed (plain stores: the backend gets
   * it through the call). */
  pw_completion_token_t* t = &d->tokens[d->launch_seq++ % PW_DEVICE_TOKENS];
  pw_token_set_deadline(t, op);
  void* user = pw_token_arm(t);
  pw_status_t status = pw_device_launch_op(d, op, user, 0);
  if (status == NULL) return; /* |d| now belongs to the backend until done */
  /* Failed: done must not run. If it did, |d| may have moved on already:
   * this is a second completion, and |d| is not touched. */
  if (!pw_token_claim(user)) {
    pw__dispatch_completed_again(user, status, "called done and then returned an error from launch");
    return;
  }
  PW_REPORT(slice->runtime, pw__report_launch_done, d, op, pw__report_launched_at(user), false,
            status, NULL, false);
  d->done_status = status;
  pw_dispatch_device_done(d);
}

static void pw_dispatch_device_done(pw_device_t* d) { pw_dispatch_device_finished(d, false); }

void pw__dispatch_device_done(pw_device_t* d) { pw_dispatch_device_done(d); }

void pw__dispatch_push_done(pw_device_t* d) { pw_dispatch_push(d, PW_WORK_DONE); }

void pw__dispatch_push_launch(pw_device_t* d) { pw_dispatch_push(d, PW_WORK_LAUNCH); }

/* Counts one device out of gang op |op|, which it finished as its slice's
 * tail (it went idle after it). The count is held in this thread's frame
 * while the devices that finish next on this thread finish the same op, so
 * a gang whose parts complete on one thread (an inline backend, or a
 * backend thread that reports a whole gang) pays one locked subtraction,
 * not one per device. The frame adds it before it ends, or when a device
 * finishes another op: |op| completes no later than the end of this drain
 * (pw_dispatch_drain). |op| stays alive meanwhile: it has not completed.
 * Only the tail case defers: a device that moves on to a linked next op
 * counts out at once, so that the next op's inputs can be ready when it
 * arrives there (pw_dispatch_device_finished). */
static void pw_dispatch_count_out(pw_op_t* op) {
  pw_dispatch_frame_t* frame = pw_dispatch_current; /* a drain is running */
  if (frame->count_op == op) {
    frame->count_n++;
    return;
  }
  if (frame->count_op != NULL) pw_dispatch_count_flush(frame);
  frame->count_op = op;
  frame->count_n = 1;
}

static void pw_dispatch_count_flush(pw_dispatch_frame_t* frame) {
  pw_op_t* op = frame->count_op;
  uint32_t n = frame->count_n;
  frame->count_op = NULL;
  frame->count_n = 0;
  if (pw_atomic_fetch_sub_u32(&op->devices_remaining, n) == n) pw_dispatch_op_complete(op, NULL);
}

/* |d| finished its op. |direct| (a done work item, run by the frame's
 * drain loop): if the next op's inputs are ready and no other work item
 * waits, it launches from here rather than as another work item; the
 * launch cannot come back here (a backend completing inline queues a done
 * item; a launch that fails at once calls pw_dispatch_device_done, which
 * queues), so the stack stays bounded. With other items queued the launch
 * queues behind them: devices then advance as a wavefront in op order
 * (a pipeline's stages in step), which walks the block in memory order;
 * launching at once would run one device's whole sequence first. */
static void pw_dispatch_device_finished(pw_device_t* d, bool direct) {
  pw_op_t* op = d->running;
  d->running = NULL;
  pw_status_t status = d->done_status;
  d->done_status = NULL;
  if (op->slice->runtime->sched_charge && d->launch_ns != 0) {
    /* What the backend reported of the device's time, else the host's. */
    uint64_t ns = d->reported_ns != UINT64_MAX
                      ? d->reported_ns
                      : (uint64_t)(pw_clock_now() - d->launch_ns) * d->lane_size;
    pw_atomic_fetch_add_u64(&pw_op_cold(op)->device_ns, ns);
    d->launch_ns = 0;
    d->reported_ns = UINT64_MAX; /* (read only when charging) */
  }
  if (status != NULL) {
    if (pw_atomic_load_ptr_relaxed(&op->dep_status) == NULL) {
      status = pw_device_annotate(status, op, d);
    }
    void* expected = NULL;
    if (!pw_atomic_cas_ptr(&op->status, &expected, status)) pw_status_free(status);
  }
  if (op->flags & PW_OP_UNORDERED) {
    /* Debug mode without gang order (|d| is a launch slot of |op|, see
     * unordered.c): no cursor to advance. A slot lives in the block: its
     * copy tokens go now (a late completion is not caught in this mode). */
    if (d->copy_chunk != NULL) pw__dispatch_free_copy_tokens(d, op->slice->runtime->allocator);
    if (pw_atomic_fetch_sub_u32(&op->devices_remaining, 1) == 1) pw_dispatch_op_complete(op, NULL);
    return;
  }
  pw_atomic_ptr_t* link = pw_op_link(op, d->slice);
  pw_op_t* next = pw_atomic_load_ptr_acquire(link);
  if (next != NULL) {
    /* Count out of |op| before moving on, while the cursor still names
     * it: its completion can then make |next|'s inputs ready without any
     * device waiting there (quietly, if |d| is its slice's only device),
     * and |d| arrives on the fast path. |next| stays alive: |d| has not
     * passed it, so its execution cannot complete. */
    uint32_t gang = op->slice->lane_count; /* |op| may be gone after its completion */
    bool counted_alone = gang == 1 && !(op->flags & PW_OP_QUEUED);
    if (counted_alone || pw_atomic_fetch_sub_u32(&op->devices_remaining, 1) == 1) {
      pw_dispatch_op_complete(op, d);
    }
    /* A gang device whose |next| is not ready while other work is queued
     * on this thread (typically the rest of the gang finishing |op|, which
     * readies |next|): arrive after that work, when |next| is likely
     * ready, on the fast path, rather than wait at it now (an exchange, a
     * CAS, and the readier's claim). Meanwhile the cursor still names |op|
     * RUNNING (a stale value once |op| has completed): nobody claims or
     * appends at it, and nothing reads |op| through it. Not on one-device
     * slices: nothing else on the thread readies their next op sooner,
     * and a pipeline's stages would lose their wavefront order. */
    pw_dispatch_frame_t* frame = pw_dispatch_current;
    if (gang > 1 && frame != NULL && frame->head != NULL &&
        !pw_atomic_load_u32_acquire(&next->inputs_ready)) {
      d->running = next;
      pw_dispatch_push(d, PW_WORK_ARRIVE);
      return;
    }
    pw_dispatch_arrive(d, next, direct);
    return;
  }
  /* |op| is the tail: go idle after it, then count out (|op| stays alive,
   * and so the tail's link, while this device has not counted itself out
   * of it). */
  pw_atomic_exchange_ptr(&d->cursor, pw_cursor(op, PW_CURSOR_IDLE));
  next = pw_atomic_load_ptr_acquire(link);
  void* expected = pw_cursor(op, PW_CURSOR_IDLE);
  if (next != NULL &&
      pw_atomic_cas_ptr(&d->cursor, &expected, pw_cursor(next, PW_CURSOR_ARRIVING))) {
    /* |next| belongs to another submission, which may have returned: only
     * ARRIVING keeps it alive while this reads it. */
    pw_dispatch_settle(d, next);
  }
  /* A one-device op has no other device to count out. A queued op's
   * count is never held back: its completion must come before that of
   * any op behind it in the device queues, which fail with it
   * (pw_dispatch_op_complete). */
  if (op->flags & PW_OP_QUEUED) {
    if (pw_atomic_fetch_sub_u32(&op->devices_remaining, 1) == 1) pw_dispatch_op_complete(op, NULL);
  } else if (op->slice->lane_count == 1) {
    pw_dispatch_op_complete(op, NULL);
  } else {
    pw_dispatch_count_out(op);
  }
}

void pw__dispatch_device_advance(pw_device_t* d) { pw_dispatch_device_finished(d, false); }

void pw__dispatch_op_complete(pw_op_t* op) { pw_dispatch_op_complete(op, NULL); }

void pw__dispatch_in_frame(void (*fn)(void* arg), void* arg) {
  pw_dispatch_frame_t local = {NULL, NULL, NULL, 0, 0, NULL, NULL, NULL};
  pw_dispatch_frame_t* outer = pw_dispatch_current;
  if (outer == NULL) pw_dispatch_current = &local;
  fn(arg);
  if (outer == NULL) {
    pw_dispatch_drain(&local);
    pw_dispatch_current = NULL;
  }
}

/* ---- appends: append.h ------------------------------------------------------ */

#include "sched/append.h"

/* ---- start ----------------------------------------------------------------- */

/* An argument of |op| became ready. The wait holds a reference to the
 * execution (taken when it was registered): if this makes |op| ready, the
 * scan of its devices may still run while a device that arrived meanwhile
 * launches |op| and the execution completes; without the reference the
 * block could be reused by the next submission of the graph, and the scan
 * would claim a device waiting at |op| in that run. */
static void pw_dispatch_arg_ready(void* user, pw_status_t status) {
  pw_op_t* op = user;
  pw_execution_t* exec = op->exec;
  if (status != NULL) {
    pw_dispatch_fail_dep(op, pw_status_annotate(status, "argument of node %u (\"%s\") failed",
                                                op->plan->node, op->plan->name));
  }
  pw_dispatch_dep_done(op);
  pw_execution_release(exec);
}

/* Links |exec|'s ops into the slice sequences, one append per group (a
 * slice's ops, or a run of them: plan.c); with a scheduler window (groups
 * are then runs, in op order), queues them for admission instead. */
PW_SCHED_INLINE void pw_dispatch_append_runs(pw_execution_t* exec, const pw_plan_dispatch_t* pd,
                                    uint32_t op_count) {
  pw_runtime_t* rt = exec->runtime;
  for (uint32_t r = 0; r < pd->run_count; ++r) {
    uint32_t i = pd->runs[r];
    uint32_t j = r + 1 < pd->run_count ? pd->runs[r + 1] : op_count;
    pw_op_t* first = &exec->ops[pd->append_order[i]];
    pw_op_t* last = &exec->ops[pd->append_order[j - 1]];
    if (rt->sched_window == 0) {
      pw_dispatch_append(first->slice, exec, first, last);
    } else {
      pw_slice_t* slice = first->slice;
      /* A queued spanning op keeps its execution alive until every part's
       * queue has dropped it (pw_sched_pop in window.c). */
      if (slice->span_count > 1) pw_atomic_fetch_add_u32(&exec->refs, slice->span_count * (j - i));
      for (uint32_t p = 0; p < slice->span_count; ++p) {
        for (uint32_t k = i; k < j; ++k) pw__sched_submit(slice->span[p], &exec->ops[k]);
      }
      for (uint32_t p = 0; p < slice->span_count; ++p) pw__sched_kick(slice->span[p]);
    }
  }
}

/* Arguments not ready yet (outputs of earlier executions) add a
 * dependency; a failed one fails the op. */
PW_SCHED_INLINE void pw_dispatch_wait_args(pw_execution_t* exec, const pw_plan_dispatch_t* pd) {
  for (uint32_t g = 0; g < pd->guarded_count; ++g) {
    uint32_t index = pd->guarded[g];
    if (pd->ops[index].param_inputs == 0) continue;
    pw_op_t* op = &exec->ops[index];
    uint32_t param_index = 0;
    for (uint32_t k = 0; k < op->plan->input_count; ++k) {
      if (op->plan->inputs[k].param < 0) continue;
      pw__event_node_t* node = &op->arg_waits[param_index++];
      pw_event_t* ready = op->inputs[k]->ready;
      if (pw_event_is_ready(ready)) {
        bool is_ready;
        pw_status_t failed = pw_event_query(ready, &is_ready);
        if (failed) {
          pw_dispatch_fail_dep(op, pw_status_annotate(failed,
                                                      "argument of node %u (\"%s\") failed",
                                                      op->plan->node, op->plan->name));
        }
        continue;
      }
      pw_atomic_fetch_add_u32(&op->pending, 1);
      pw_atomic_fetch_add_u32(&exec->refs, 1); /* dropped by pw_dispatch_arg_ready */
      node->fn = pw_dispatch_arg_ready;
      node->user = op;
      node->flags = 0;
      pw__event_add_node(ready, node);
    }
  }
}

/* pw__dispatch_start, inlined into pw__dispatch_submit below. */
PW_SCHED_INLINE void pw_dispatch_start(pw_execution_t* exec, bool own, bool append) {
  /* Read before anything of the run can complete (an argument's readier
   * may run it on another thread): the block then stays valid through
   * the submitter's reference, or as an armed one, but exec->plan goes. */
  const pw_plan_dispatch_t* pd = exec->dispatch;
  uint32_t op_count = exec->op_count;
  /* Outermost dispatch frame for this thread: launches made ready below
   * (and anything completing inline) drain before submit returns. */
  pw_dispatch_frame_t local = {NULL, NULL, NULL, 0, 0, NULL, NULL, NULL};
  pw_dispatch_frame_t* outer = pw_dispatch_current;
  if (outer == NULL) pw_dispatch_current = &local;

  /* Root ops (no producing op, no argument to wait for) are ready before
   * they enter any sequence: no device can be at them yet, so a plain
   * release store does, and the append (or a device arriving) claims
   * their launches at once. */
  for (uint32_t r = 0; r < pd->root_count; ++r) {
    pw_op_t* op = &exec->ops[pd->roots[r]];
    pw_dispatch_allocate_outputs(op);
    pw_atomic_store_u32_release(&op->inputs_ready, 1);
  }
  if (append) pw_dispatch_append_runs(exec, pd, op_count);
  pw_dispatch_wait_args(exec, pd);
  /* Drop the submit guards, in topological order. */
  for (uint32_t g = 0; g < pd->guarded_count; ++g) {
    pw_dispatch_dep_done(&exec->ops[pd->guarded[g]]);
  }
  if (op_count == 0) pw__execution_complete(exec);
  if (outer == NULL) pw_dispatch_drain(&local);
  pw_dispatch_current = outer;
  if (!own) pw_execution_release(exec); /* the submitter's reference */
}

void pw__dispatch_start(pw_execution_t* exec, bool own, bool append) {
  pw_dispatch_start(exec, own, append);
}

/* ---- submission (its per-run steps: submit.h) --------------------------- */

pw_status_t pw__submit_block(const pw_submit_t* s, uint64_t plan_id, pw_execution_t** out) {
  return pw_submit_block(s, plan_id, out);
}

void pw__submit_arm(const pw_submit_t* s, pw_execution_t* exec, uint32_t refs) {
  pw_submit_arm(s, exec, refs);
}

pw_status_t pw__dispatch_submit(pw_client_t* client, const pw_plan_t* plan,
                                pw_object_t* graph_ref, pw_graph_exec_obj_t* armed,
                                pw_buffer_obj_t* const* args, pw_buffer_obj_t** outputs,
                                pw_event_t** out_done, uint64_t launch_deadline_ns) {
  pw_runtime_t* rt = client->runtime;
  if (out_done != NULL) *out_done = NULL;
  const pw_plan_dispatch_t* pd = NULL;
  PW_RETURN_IF_ERROR(pw_plan_dispatch(rt, plan, &pd));
  if (__builtin_expect(rt->no_gang_order, 0)) {
    pw_submit_t u = {client, plan, pd, graph_ref, armed, NULL, args, outputs, out_done,
                     launch_deadline_ns};
    return pw__unordered_submit(&u);
  }
  /* An armed graph runs in a armed block when one is free. |s| stays in
   * registers: its address goes to no call. */
  pw_submit_t s = {client, plan, pd, graph_ref, armed,
                   armed != NULL ? pw_submit_free_slot(armed) : NULL, args, outputs, out_done,
                   launch_deadline_ns};
  pw_execution_t* exec = NULL;
  PW_RETURN_IF_ERROR(pw_submit_block(&s, pd->id, &exec));
  /* Nothing can fail from here on. refs: the ops collectively (dropped at
   * completion); the submitter's, dropped when pw__dispatch_start returns,
   * so that nothing there can touch a freed block; and one per append
   * (the slice's reference on its tail: pw_dispatch_append_part), counted
   * here without a window (the submitter appends) and taken by each
   * admission with one. */
  uint32_t refs = 2 + (rt->sched_window == 0 ? pd->tail_refs : 0);
  pw_submit_arm(&s, exec, refs);
  pw_dispatch_start(exec, s.own != NULL, true);
  return NULL;
}
