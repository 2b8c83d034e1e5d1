/* What every device waits for (pw_runtime_dump, include/pathways/
 * runtime.h): one line per slice, then one per unit of dispatch (a device
 * or a lane, lanes.c) saying where its cursor is and in which state, what
 * the op there waits for, and the launches outstanding in its queue.
 * Read without stopping anyone: the words read are ones the dispatcher
 * publishes (cursors, counters, tokens) and, for an op a device waits at
 * or runs, its node and names, which stay while its execution is in
 * flight. A busy runtime's ops may retire under the reader: it is for a
 * runtime that is stuck (documented at pw_runtime_dump), and nothing in
 * the runtime calls it on its own. What the watchdog logs when a launch
 * misses its deadline (pw__dump_overdue) names only that launch and its
 * unit's counters: its op cannot retire while its completion is held. */
#include <stdio.h>
#include <string.h>

#include "core/client.h"
#include "plugin/backend_call.h"
#include "sched/dispatch_internal.h"

enum { PW_DUMP_LINE = 512, PW_DUMP_QUEUED_LISTED = 8 };

/* |op| for a message: node, name, gang and client. */
static void pw_dump_op(char* out, size_t size, const pw_op_t* op) {
  snprintf(out, size, "node %u (\"%s\", gang %llu, client '%s')", op->plan->node,
           op->plan->name, (unsigned long long)pw_op_gang_id(op), op->exec->client->name);
}

/* "device 3", or a lane's "devices 4-7 (host 1)". */
static void pw_dump_unit(char* out, size_t size, const pw_device_t* d) {
  if (d->lane_size == 1) {
    snprintf(out, size, "device %u", d->mesh_index);
  } else {
    snprintf(out, size, "devices %u-%u (host %u)", d->mesh_index,
             d->mesh_index + d->lane_size - 1, d->host_launch.host);
  }
}

/* What |d| is doing at |op| in cursor state |tag|. */
static void pw_dump_state(char* out, size_t size, pw_device_t* d, pw_op_t* op,
                          uintptr_t tag) {
  if (tag == PW_CURSOR_IDLE) {
    /* Not |op|'s node: a finished tail's execution has let go of its
     * graph (and the plan the node names lie in). */
    snprintf(out, size, "idle (after the slice's last op)");
    return;
  }
  char what[256];
  pw_dump_op(what, sizeof(what), op);
  bool failed_input = pw_atomic_load_ptr_acquire(&op->dep_status) != NULL;
  switch (tag) {
    case PW_CURSOR_WAITING:
    case PW_CURSOR_ARRIVING:
      snprintf(out, size, "waits at %s for its inputs: %u producers or arguments not complete%s",
               what, pw_atomic_load_u32_acquire(&op->pending),
               failed_input ? " (one failed)" : "");
      return;
    default:
      break;
  }
  if (op->flags & PW_OP_TRANSFER) {
    uint32_t pending = pw_atomic_load_u32_acquire(&d->transfer_pending);
    snprintf(out, size, "runs transfer %s: %u copies not completed by the transport", what,
             pending > 0 ? pending - 1 : 0);
  } else if (op->flags & PW_OP_HOST) {
    if (pw_atomic_load_u32_acquire(&d->host_drain_wait)) {
      snprintf(out, size, "waits for its queue to drain before host task %s", what);
    } else {
      snprintf(out, size, "at host task %s: the slice's other devices have not all reached it, "
               "or the task runs",
               what);
    }
  } else if (op->flags & PW_OP_QUEUED) {
    snprintf(out, size, "at %s, waiting for a queue slot (its queue is full)", what);
  } else {
    /* One launch at a time: outstanding if any of its tokens is. */
    bool outstanding = false;
    for (uint32_t k = 0; k < PW_DEVICE_TOKENS; ++k) {
      outstanding |= !(pw_atomic_load_u32_acquire(&d->tokens[k].state) & 1);
    }
    snprintf(out, size, "runs %s: %s", what,
             outstanding ? "launched, the backend has not completed it"
                         : "completed, moving on");
  }
}

/* The launches outstanding in |d|'s queue (queued slices). */
static void pw_dump_queue(pw_device_t* d, const char* unit, pw_dump_line_fn_t fn, void* user) {
  uint32_t listed = 0, outstanding = 0;
  char line[PW_DUMP_LINE];
  for (uint32_t k = 0; k < 2 * d->queue_depth; ++k) {
    pw_completion_token_t* t = &d->queue_tokens[k];
    if (pw_atomic_load_u32_acquire(&t->state) & 1) continue;
    outstanding++;
    pw_op_t* op = pw_atomic_load_ptr_acquire(&t->op);
    if (op == NULL || listed == PW_DUMP_QUEUED_LISTED) continue;
    listed++;
    char what[256];
    pw_dump_op(what, sizeof(what), op);
    snprintf(line, sizeof(line), "    %s queue: %s launched, not completed", unit, what);
    fn(user, line);
  }
  snprintf(line, sizeof(line), "    %s queue: %u of %u launches outstanding%s", unit, outstanding,
           d->queue_depth, outstanding > listed ? " (the first listed above)" : "");
  fn(user, line);
}

static void pw_dump_slice(pw_slice_t* slice, pw_dump_line_fn_t fn, void* user) {
  char line[PW_DUMP_LINE];
  snprintf(line, sizeof(line),
           "slice '%s' (backend '%s'): %u devices in %u units of dispatch, queue depth %u",
           slice->name, pw__backend_name(slice->backend), slice->device_count, slice->lane_count,
           slice->queue_depth);
  fn(user, line);
  for (uint32_t i = 0; i < slice->lane_count; ++i) {
    pw_device_t* d = &slice->devices[i];
    char unit[64];
    pw_dump_unit(unit, sizeof(unit), d);
    void* cursor = pw_atomic_load_ptr_acquire(&d->cursor);
    pw_op_t* op = (pw_op_t*)((uintptr_t)cursor & ~(uintptr_t)PW_CURSOR_TAG_MASK);
    uintptr_t tag = (uintptr_t)cursor & PW_CURSOR_TAG_MASK;
    char state[400];
    if (op == NULL) {
      snprintf(state, sizeof(state), "idle (nothing appended yet)");
    } else {
      pw_dump_state(state, sizeof(state), d, op, tag);
    }
    snprintf(line, sizeof(line), "  %s: %s", unit, state);
    fn(user, line);
    if (d->queue_depth != 0) pw_dump_queue(d, unit, fn, user);
  }
}

pw_status_t pw_runtime_dump(pw_runtime_t* runtime, pw_dump_line_fn_t fn, void* user) {
  if (runtime == NULL || fn == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_runtime_dump: runtime and fn must not be NULL");
  }
  char line[PW_DUMP_LINE];
  snprintf(line, sizeof(line), "runtime: %u slices", runtime->slice_count);
  fn(user, line);
  for (uint32_t s = 0; s < runtime->slice_count; ++s) pw_dump_slice(&runtime->slices[s], fn, user);
  return NULL;
}

void pw__dump_overdue(pw_device_t* d, const pw_op_t* op) {
  pw_slice_t* slice = d->slice;
  char what[256], unit[64], queue[96] = "";
  pw_dump_op(what, sizeof(what), op);
  pw_dump_unit(unit, sizeof(unit), d);
  if (d->queue_depth != 0) {
    snprintf(queue, sizeof(queue), "; %u of %u launches outstanding in its queue",
             pw_atomic_load_u32_relaxed(&d->queue_outstanding), d->queue_depth);
  }
  pw_log(&slice->runtime->logger, PW_LOG_ERROR, "dispatch",
         "the watchdog fails a launch that has not completed (its status says why): %s on "
         "slice '%s' %s (backend '%s')%s; pw_runtime_dump shows every device of a stuck runtime",
         what, slice->name, unit, pw__backend_name(slice->backend), queue);
}
