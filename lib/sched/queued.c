/* Queue-ordered launch: the dispatcher's side of a backend whose devices
 * run their launches in submission order (include/pathways/backend.h,
 * "Queue-ordered launch").
 *
 * A slice is queued when every one of its devices reports
 * PW_BACKEND_QUEUE_ORDERED (queue_info, asked once here at slice init)
 * and the runtime did not turn it off; its depth is the least reported.
 * Every compute op on it is flagged PW_OP_QUEUED at block layout. Its
 * launch waits only for what is not an earlier launch in its own device
 * queues: a compute op's inputs live on its own slice and mesh, so every
 * compute producer precedes it in the same queues and its launch is
 * implied by queue order (plan.c counts only transfer and host producers
 * and arguments in the op's pending). The device's cursor then follows the
 * slice sequence at launch, not at completion:
 *
 *   launch:  take a queue slot (queue_outstanding < depth, else park at
 *            the op: d->running stays it, the cursor op|RUNNING), hand
 *            the backend the launch with its queue_seq, and advance the
 *            cursor at once, as a finished op does (one count of the op's
 *            devices_remaining, which counts two per device for a
 *            queued op: launch and completion);
 *   done:    the op's second count from this device, the op's status,
 *            device time; the slot is freed, and a parked launch is
 *            relaunched by the thread that freed it.
 *
 * The slot count holds the launches outstanding plus one while a launch
 * is parked: the launcher adds one and parks when it was at depth, the
 * completer that takes it back from above depth relaunches, with the
 * slot the parked launch already counted (queue_slot_held).
 *
 * Completions are counted at once, never held back in a dispatch frame:
 * an op then completes before any op behind it in its device queues can
 * (each of that op's counts on a device follows the earlier op's counts
 * on the same device), so its failure reaches them first (a queued
 * successor gets it as its own status: it may have launched already, and
 * every device of a gang must run a part the others run, so nobody skips
 * it). Queue tokens: 2 * depth per device, taken in queue_seq order
 * (any completed one when the backend completed out of order); a
 * completion reads the token's op before claiming it, as the claim frees
 * the token for the device's next launch. */
#include <string.h>

#include "plugin/backend_call.h"
#include "sched/dispatch_internal.h"
#include "sched/token.h"

/* The depth every device of |slice| takes, or 0 (logged when a backend
 * answers with an error). */
static uint32_t pw_queued_depth(pw_slice_t* slice) {
  const pw_backend_t* b = slice->backend;
  if (!PW__BACKEND_HAS(b, queue_info)) return 0;
  uint32_t depth = PW_BACKEND_MAX_QUEUE_DEPTH;
  for (uint32_t i = 0; i < slice->device_count; ++i) {
    pw_backend_queue_info_t info;
    memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    uint32_t device = slice->group_devices[i];
    pw_status_t status = b->vtable->queue_info(b->self, device, &info);
    if (status != NULL) {
      char text[160];
      pw_status_format(status, text, sizeof(text));
      pw_status_free(status);
      pw_log(&slice->runtime->logger, PW_LOG_WARN, "dispatch",
             "backend '%s' queue_info for device %u of slice '%s' failed (%s): its ops launch "
             "one at a time",
             pw__backend_name(b), device, slice->name, text);
      return 0;
    }
    if (!(info.flags & PW_BACKEND_QUEUE_ORDERED) || info.depth == 0) return 0;
    if (info.depth < depth) depth = info.depth;
  }
  return depth;
}

pw_status_t pw__queued_slice_init(pw_slice_t* slice) {
  pw_runtime_t* rt = slice->runtime;
  slice->queue_depth = 0;
  if (rt->no_queued_launch || rt->no_gang_order) return NULL;
  uint32_t depth = pw_queued_depth(slice);
  if (depth == 0) return NULL;
  for (uint32_t i = 0; i < slice->lane_count; ++i) {
    pw_device_t* d = &slice->devices[i];
    pw_status_t status = pw_allocator_calloc_array(rt->allocator, 2 * (size_t)depth,
                                                   sizeof(pw_completion_token_t),
                                                   _Alignof(pw_completion_token_t),
                                                   (void**)&d->queue_tokens);
    if (status != NULL) {
      pw__queued_slice_deinit(slice);
      return pw_status_annotate(status, "queue tokens of device %u", i);
    }
    d->queue_depth = depth; /* (what deinit frees) */
    for (uint32_t k = 0; k < 2 * depth; ++k) {
      pw_completion_token_t* t = &d->queue_tokens[k];
      t->device = d;
      t->queued = true;
      pw_atomic_init_u32(&t->state, 1); /* generation 0, completed */
    }
    pw_atomic_init_u32(&d->queue_outstanding, 0);
    pw_atomic_init_u64(&d->queue_free_ns, 0);
  }
  slice->queue_depth = depth;
  return NULL;
}

void pw__queued_slice_deinit(pw_slice_t* slice) {
  pw_runtime_t* rt = slice->runtime;
  for (uint32_t i = 0; i < slice->lane_count; ++i) {
    pw_device_t* d = &slice->devices[i];
    if (d->queue_tokens == NULL) continue;
    pw_allocator_free(rt->allocator, d->queue_tokens,
                      2 * (size_t)d->queue_depth * sizeof(pw_completion_token_t));
    d->queue_tokens = NULL;
    d->queue_depth = 0;
  }
  slice->queue_depth = 0;
}

/* A completed queue token of |d| for its next launch: the one in
 * queue_seq order, else (out-of-order completions) any completed one.
 * At most depth of the 2 * depth are outstanding. */
static pw_completion_token_t* pw_queued_token(pw_device_t* d) {
  uint32_t n = 2 * d->queue_depth;
  pw_completion_token_t* t = &d->queue_tokens[d->queue_seq % n];
  if (pw_atomic_load_u32_acquire(&t->state) & 1) return t;
  for (uint32_t k = 0;; ++k) {
    t = &d->queue_tokens[k % n];
    if (pw_atomic_load_u32_acquire(&t->state) & 1) return t;
  }
}

void pw__queued_slot_free(pw_device_t* d) {
  uint32_t was = pw_atomic_fetch_sub_u32(&d->queue_outstanding, 1);
  if (was > d->queue_depth) {
    /* A launch is parked: relaunch it, with the slot it counted. */
    d->queue_slot_held = true;
    pw__dispatch_push_launch(d);
  } else if (was == 1 && pw_atomic_load_u32_seq_cst(&d->host_drain_wait) != 0 &&
             pw_atomic_exchange_u32(&d->host_drain_wait, 0) != 0) {
    /* A host op waits for the queue to drain (host_task.c). */
    pw__dispatch_push_launch(d);
  }
}

void pw__queued_launch(pw_device_t* d, pw_op_t* op) {
  if (d->queue_slot_held) {
    d->queue_slot_held = false;
  } else if (pw_atomic_fetch_add_u32(&d->queue_outstanding, 1) >= d->queue_depth) {
    return; /* parked at |op| until a completion frees a slot */
  }
  pw_slice_t* slice = op->slice;
  pw_status_t dep = pw_atomic_load_ptr_acquire(&op->dep_status);
  if (dep != NULL) {
    /* An input made elsewhere failed (final before any device launches
     * the op, so no device of its gang does): not launched. */
    pw__dispatch_queued_done(d, op, 0, pw_status_clone(dep), 0);
    pw__dispatch_device_advance(d);
    return;
  }
  pw_status_t refused = pw_op_slice_lost(op) ? pw__health_refusal(d, op) : NULL;
  if (refused != NULL) {
    /* A slice of its gang is lost: not launched here either (the parts
     * that did launch fail in the backend or at the loss's grace). */
    pw__dispatch_queued_done(d, op, 0, refused, 0);
    pw__dispatch_device_advance(d);
    return;
  }
  pw_completion_token_t* t = pw_queued_token(d);
  pw_atomic_store_ptr_relaxed(&t->op, op);
  if (slice->runtime->sched_charge) {
    pw_atomic_store_u64_relaxed(&t->launched_ns, (uint64_t)pw_clock_now());
  }
  pw_token_set_deadline(t, op);
  uint64_t queue_seq = ++d->queue_seq;
  void* user = pw_token_arm(t);
  pw_status_t status = pw_device_launch_op(d, op, user, queue_seq);
  /* Refused: completes now (unless done came first: then it is reported
   * as a second completion). */
  if (status != NULL) pw__dispatch_backend_done(user, status, NULL);
  pw__dispatch_device_advance(d);
}

/* ---- completion ------------------------------------------------------------ */

typedef struct pw_queued_done_s {
  pw_device_t* d;
  pw_op_t* op;
  uint64_t launched_ns;
  pw_status_t status;
  uint64_t device_ns;
} pw_queued_done_t;

static void pw_queued_done_in_frame(void* arg) {
  pw_queued_done_t* c = arg;
  pw_device_t* d = c->d;
  pw_op_t* op = c->op;
  uint64_t launched_ns = c->launched_ns;
  pw_status_t status = c->status;
  uint64_t device_ns = c->device_ns;
  if (status != NULL) {
    if (pw_atomic_load_ptr_relaxed(&op->dep_status) == NULL) {
      status = pw_device_annotate(status, op, d);
    }
    void* expected = NULL;
    if (!pw_atomic_cas_ptr(&op->status, &expected, status)) pw_status_free(status);
  }
  if (op->slice->runtime->sched_charge) {
    /* Without a report: from the later of its launch and the device's
     * previous completion (a FIFO runs one launch at a time) to now. */
    uint64_t now = (uint64_t)pw_clock_now();
    uint64_t free_at = pw_atomic_exchange_u64(&d->queue_free_ns, now);
    if (device_ns == UINT64_MAX) {
      uint64_t from = launched_ns > free_at ? launched_ns : free_at;
      device_ns = (now > from ? now - from : 0) * d->lane_size;
    }
    pw_atomic_fetch_add_u64(&pw_op_cold(op)->device_ns, device_ns);
  }
  /* Counted at once, never held back (see pw_dispatch_device_finished). */
  if (pw_atomic_fetch_sub_u32(&op->devices_remaining, 1) == 1) pw__dispatch_op_complete(op);
  pw__queued_slot_free(d);
}

void pw__dispatch_queued_done(pw_device_t* d, pw_op_t* op, uint64_t launched_ns,
                              pw_status_t status, uint64_t device_ns) {
  pw_queued_done_t c = {d, op, launched_ns, status, device_ns};
  pw__dispatch_in_frame(pw_queued_done_in_frame, &c);
}
