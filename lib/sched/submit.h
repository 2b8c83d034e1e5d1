/* Submission's per-run steps, included by dispatch.c only (not a module
 * interface): pw__dispatch_submit (dispatch.c) takes the plan's dispatch
 * data (derived on its first submission, plan.c), a block for the run
 * (from the armed graph's private slot, or the client's cache, laid out
 * or re-laid), its done event, and sets the run's per-run state, then
 * starts it (pw__dispatch_start). They are inlined into it, in the same
 * translation unit as the start: the library is built without LTO, and a
 * call between the two halves of a one-op run costs it measurably
 * (docs/performance.md). The debug mode without gang order takes its own
 * way at the one branch there (unordered.c). */
#ifndef PW_SCHED_SUBMIT_H_
#define PW_SCHED_SUBMIT_H_

#include "sched/dispatch_internal.h"

/* |n| consecutive gang ids. With a scheduler window they come straight
 * from the runtime's counter, in submission order across clients (FIFO
 * policies compare them); without one they only need to be unique, and a
 * thread takes them from a range it keeps for the runtime it last
 * submitted to, refilled from the runtime's counter 4096 at a time, so
 * threads submitting at once do not share that word. The range is the
 * thread's (not its CPU's): one submitting thread gets the same ids run
 * after run, which the sim backend's deterministic traces rely on. */
static _Thread_local struct {
  uint64_t runtime_serial; /* 0: none */
  uint64_t next;
  uint64_t end;
} pw_gang_range;

PW_SCHED_INLINE uint64_t pw_submit_gang_ids(pw_client_t* client, uint32_t n) {
  pw_runtime_t* rt = client->runtime;
  if (rt->sched_window != 0) return pw_atomic_fetch_add_u64(&rt->next_gang_id, n);
  if (pw_gang_range.runtime_serial != rt->serial || pw_gang_range.end - pw_gang_range.next < n) {
    uint64_t take = n > 4096 ? n : 4096;
    pw_gang_range.runtime_serial = rt->serial;
    pw_gang_range.next = pw_atomic_fetch_add_u64(&rt->next_gang_id, take);
    pw_gang_range.end = pw_gang_range.next + take;
  }
  uint64_t base = pw_gang_range.next;
  pw_gang_range.next += n;
  return base;
}

/* A slot of |armed| whose armed block is free for a new run, or NULL. */
static inline pw_armed_block_t* pw_submit_free_slot(pw_graph_exec_obj_t* armed) {
  for (uint32_t k = 0; k < PW_GRAPH_EXEC_BLOCKS; ++k) {
    uint32_t i = (armed->next_block + k) % PW_GRAPH_EXEC_BLOCKS;
    pw_armed_block_t* slot = &armed->blocks[i];
    pw_execution_t* block = pw_atomic_load_ptr_relaxed(&slot->block);
    /* Free: its last run finished (its completion is through: a private
     * run's ops hold no reference) and no slice's tail any more. */
    if (block == NULL ||
        (pw_atomic_load_u64_acquire(&slot->finished) ==
             pw_atomic_load_u64_relaxed(&slot->submitted) &&
         pw_atomic_load_u32_acquire(&block->refs) == PW_EXECUTION_ARMED)) {
      armed->next_block = i + 1;
      return slot;
    }
  }
  return NULL;
}

/* The block of a run: the private |own| slot's if laid out for |plan_id|
 * by an earlier run (its size and offsets hold), else one from the slot
 * or the client's cache; |*out_prepared|: laid out for |plan_id|. */
static inline pw_status_t pw_submit_take_block(pw_client_t* client, pw_armed_block_t* own,
                                               size_t size, uint64_t plan_id,
                                               pw_execution_t** out, bool* out_prepared) {
  pw_execution_t* own_block = own != NULL ? pw_atomic_load_ptr_relaxed(&own->block) : NULL;
  unsigned char* block = NULL;
  if (own_block != NULL && own_block->plan_id == plan_id) {
    block = (unsigned char*)own_block;
    *out_prepared = true;
  } else if (own != NULL) {
    PW_RETURN_IF_ERROR(pw__block_get_armed(client, own, size, plan_id, &block, out_prepared));
  } else {
    PW_RETURN_IF_ERROR(pw__block_get(client, size, plan_id, &block, out_prepared));
  }
  *out = (pw_execution_t*)block;
  return NULL;
}

/* pw__submit_block, inlined into pw__dispatch_submit: |s| then lives in
 * registers (a struct stored field by field and reloaded across a call
 * costs a store-forwarding stall per run, 10 ns of a one-op run). */
PW_SCHED_INLINE pw_status_t pw_submit_block(const pw_submit_t* s, uint64_t plan_id,
                                            pw_execution_t** out) {
  const pw_plan_t* plan = s->plan;
  const pw_plan_dispatch_t* pd = s->pd;
  pw_execution_t* exec = NULL;
  bool prepared = false;
  PW_RETURN_IF_ERROR(
      pw_submit_take_block(s->client, s->own, pd->layout.size, plan_id, &exec, &prepared));
  if (!prepared) {
    /* (A prepared block has them already: the same plan and runtime.) */
    exec->block_size = pd->layout.size;
    exec->internal_at = pd->layout.internal_at;
    exec->internal_end = pd->layout.internal_at + pd->internal_bytes;
  }
  exec->op_count = plan->op_count;
  exec->client = s->client;
  exec->runtime = s->client->runtime;
  exec->plan = plan;
  exec->dispatch = pd;
  pw_atomic_init_ptr(&exec->status, NULL);

  pw_status_t status =
      prepared ? pw__execution_relayout(exec, plan) : pw__execution_lay_out(exec, plan);
  /* The done event has two references: the block's (the execution
   * completes it; the block keeps it for its next run) and the
   * submitter's. A reused block recycles its last run's event when the
   * submitter of that run has released it. A run without one leaves the
   * block's last event as it is. */
  exec->done_wanted = s->out_done != NULL;
  if (status == NULL && exec->done_wanted &&
      (exec->done == NULL || !pw__event_recycle(exec->done, 2))) {
    pw_event_release(exec->done);
    exec->done = NULL;
    status = pw__event_create_runtime(exec->runtime->allocator, 2, &exec->done);
  }
  if (status != NULL) {
    pw__execution_free_unsubmitted(exec, s->own != NULL);
    return status;
  }
  exec->plan_id = plan_id;
  *out = exec;
  return NULL;
}

/* What changes per run besides the arguments: the ops' counters are armed
 * (at layout, then by each op's previous completion: pw_op_rearm), and the
 * links inside runs are set; a reused block still points at the last
 * run's parameters and graph outputs. */
PW_SCHED_INLINE void pw_submit_rebind(const pw_plan_t* plan, const pw_plan_dispatch_t* pd,
                                      pw_buffer_obj_t* const* args, pw_execution_t* exec) {
  for (uint32_t r = 0; r < pd->rebind_count; ++r) {
    uint32_t index = pd->rebind[r];
    const pw_plan_op_t* p = &plan->ops[index];
    pw_op_t* op = &exec->ops[index];
    const uint32_t* per_run = pd->per_run + pd->ops[index].per_run_start;
    for (uint32_t j = 0, n = pd->ops[index].per_run_count; j < n; ++j) {
      uint32_t k = per_run[j];
      const pw_plan_input_t* in = &p->inputs[k];
      op->inputs[k] = in->param >= 0 ? args[in->param] : exec->ops[in->op].outputs[in->output];
    }
  }
}

/* With a scheduler window ops enter the sequences one by one, so every
 * link may be stale: reset with the ops' queue state. */
static void pw_submit_window_reset(pw_client_t* client, pw_execution_t* exec, uint32_t op_count) {
  uint64_t seq = pw_atomic_fetch_add_u64(&client->submit_seq, op_count);
  for (uint32_t i = 0; i < op_count; ++i) {
    pw_op_t* op = &exec->ops[i];
    pw_op_cold_t* cold = &exec->op_cold[i];
    cold->client_seq = seq + i;
    cold->sched_next = NULL;
    pw_atomic_init_ptr(&op->slice_next, NULL);
    if (op->links != NULL) {
      for (uint32_t k = 0; k < op->slice->span_count; ++k) {
        pw_atomic_init_ptr(&op->links[k], NULL);
        cold->sched_links[k] = NULL;
      }
      pw_atomic_init_u32(&cold->parts_picked, 0);
      pw_atomic_init_u32(&cold->appended, 0);
    }
  }
}

/* The run's outputs for the caller. */
PW_SCHED_INLINE void pw_submit_outputs(const pw_plan_t* plan, pw_buffer_obj_t* const* args,
                                       pw_buffer_obj_t** outputs, pw_execution_t* exec) {
  for (uint32_t o = 0; o < plan->output_count; ++o) {
    const pw_plan_output_t* po = &plan->outputs[o];
    outputs[o] = po->param >= 0 ? args[po->param] : exec->ops[po->op].outputs[po->output];
    pw__object_retain(&outputs[o]->header);
  }
}

/* What keeps the graph alive through the run. */
static inline void pw_submit_graph(pw_execution_t* exec, pw_graph_exec_obj_t* armed,
                                   pw_armed_block_t* own, pw_object_t* graph_ref) {
  exec->armed = own == NULL ? armed : NULL;
  exec->own_slot = own;
  if (own != NULL) {
    exec->graph = NULL; /* the armed graph keeps it alive */
  } else if (armed != NULL) {
    pw__object_retain(armed->graph);
    exec->graph = armed->graph;
    pw_atomic_fetch_add_u32(&armed->shared_runs, 1);
  } else {
    exec->graph = graph_ref; /* the caller's reference, now the execution's */
  }
}

/* pw__submit_arm, inlined as pw_submit_block. */
PW_SCHED_INLINE void pw_submit_arm(const pw_submit_t* s, pw_execution_t* exec, uint32_t refs) {
  const pw_plan_t* plan = s->plan;
  pw_client_t* client = s->client;
  /* A armed run is not counted on a client stripe (the block keeps 0). */
  uint32_t stripe = s->own != NULL ? 0 : pw__thread_stripe();
  for (uint32_t i = 0; i < plan->param_count; ++i) {
    exec->args[i] = s->args[i];
    pw__object_retain(&s->args[i]->header);
  }
  exec->gang_base = pw_submit_gang_ids(client, plan->op_count);
  pw_submit_rebind(plan, s->pd, s->args, exec);
  if (client->runtime->sched_window != 0) pw_submit_window_reset(client, exec, plan->op_count);
  pw_submit_outputs(plan, s->args, s->outputs, exec);
  pw_submit_graph(exec, s->armed, s->own, s->graph_ref);
  if (s->out_done != NULL) *s->out_done = exec->done;
  pw_atomic_init_u32(&exec->ops_remaining, plan->op_count);
  exec->stripe = stripe;
  exec->launch_deadline_ns =
      s->launch_deadline_ns != 0 ? s->launch_deadline_ns : client->runtime->launch_deadline_ns;
  /* Before any op of the run can launch (the appends publish them). */
  exec->observed_ns = 0;
  PW_REPORT(client->runtime, pw__report_submit, exec);
  if (__builtin_expect(exec->launch_deadline_ns != 0, 0) &&
      !pw_atomic_load_u32_relaxed(&client->runtime->deadlines_used)) {
    pw_atomic_store_u32_release(&client->runtime->deadlines_used, 1);
  }
  if (s->own != NULL) {
    /* A armed block: no submitter reference (only this thread can reuse
     * or free the block, so it stays valid through this call even if the
     * run is over and every reference gone), no ops' reference (the slot's
     * |finished| says when they are through: pw__execution_complete), no
     * client reference (the armed graph lives no longer than its client),
     * and in flight on its slot rather than on a client stripe. */
    pw_atomic_init_u32(&exec->refs, PW_EXECUTION_ARMED | (refs - 2));
    pw_slot_count(&s->own->submitted);
  } else {
    pw_atomic_init_u32(&exec->refs, refs);
    pw__client_begin(client, stripe);
  }
}

#endif /* PW_SCHED_SUBMIT_H_ */
