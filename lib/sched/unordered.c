/* The debug mode without gang order (pw_runtime_options_t's
 * debug_disable_gang_order): everything of it but two flag tests on the
 * hot path (pw_dispatch_inputs_ready launches an op flagged
 * PW_OP_UNORDERED here; pw_dispatch_device_finished counts a launch slot
 * out without a cursor). pw__dispatch_submit branches here once per
 * submission.
 *
 * No op enters a slice sequence: every op is guarded (pw_op_guarded), and
 * when its inputs are ready it launches on every device at once, from its
 * own launch slots (pw_device_t records in the block, one per (op,
 * device), placed by the plan's dispatch data: pw_plan_dispatch_t.
 * slot_base), in whatever order this thread happens to use, as an
 * uncoordinated dispatcher would. Blocks are laid out afresh for every run
 * (plan id 0: never reused as laid out), and armed graphs run in shared
 * blocks. */
#include "sched/dispatch_internal.h"

size_t pw__unordered_slots(const pw_runtime_t* rt, const pw_plan_t* plan, uint32_t* slot_base) {
  if (!rt->no_gang_order) return 0;
  size_t count = 0;
  for (uint32_t i = 0; i < plan->op_count; ++i) {
    if (slot_base != NULL) slot_base[i] = (uint32_t)count;
    count += plan->ops[i].vslice->slice->device_count;
  }
  return count;
}

/* Launch on every device now, ascending for even gang ids, descending for
 * odd ones. Nothing keeps two devices' orders consistent; that is the
 * point. */
void pw__unordered_launch(pw_op_t* op) {
  pw_slice_t* slice = op->slice;
  pw_execution_t* exec = op->exec;
  const pw_plan_dispatch_t* pd = exec->dispatch;
  pw_device_t* slots =
      (pw_device_t*)((unsigned char*)exec + pd->layout.slots_at) + pd->slot_base[op->index];
  uint32_t per = slice->device_count / slice->span_count;
  for (uint32_t k = 0; k < slice->device_count; ++k) {
    uint32_t i = (pw_op_gang_id(op) & 1) ? slice->device_count - 1 - k : k;
    pw_device_t* slot = &slots[i];
    slot->slice = slice->span[i / per];
    slot->mesh_index = i % per;
    slot->backend_device = slot->slice->devices[i % per].backend_device;
    slot->lane_size = 1; /* (no lanes without gang order: lanes.c) */
    slot->arg_block = NULL;
    slot->fixed_args = true;
    pw__dispatch_launch_init(slot);
    slot->running = op;
    pw__dispatch_push_launch(slot);
  }
}

pw_status_t pw__unordered_submit(pw_submit_t* s) {
  pw_execution_t* exec = NULL;
  PW_RETURN_IF_ERROR(pw__submit_block(s, 0, &exec));
  for (uint32_t i = 0; i < exec->op_count; ++i) exec->ops[i].flags |= PW_OP_UNORDERED;
  /* refs: the ops' and the submitter's; no appends, no tail references. */
  pw__submit_arm(s, exec, 2);
  pw__dispatch_start(exec, false, false);
  return NULL;
}
