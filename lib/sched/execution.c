/* Executions: the end of a run (pw__execution_complete: its counts, its
 * arguments and outputs, its done event, its block back to the cache or
 * its armed graph's slot) and of a submission that failed before it ran.
 * The references that keep an execution alive (pw_execution_unref) are in
 * dispatch_internal.h; the run itself is in dispatch.c. */
#include "sched/dispatch_internal.h"

void pw__execution_complete(pw_execution_t* exec) {
  const pw_plan_dispatch_t* pd = exec->dispatch;
  const pw_plan_t* plan = exec->plan;
  pw_armed_block_t* own = exec->own_slot;
  PW_REPORT(exec->client->runtime, pw__report_exec_done, exec,
            pw_atomic_load_ptr_acquire(&exec->status));
  /* Ops are counted per home slice here, at once (before the done event,
   * so a waiter sees them), not one locked add per op; a armed run's
   * by its slot (pw__dispatch_armed_ops). */
  if (own != NULL) {
    pw_slot_count(&own->counted);
  } else {
    pw_plan_count_ops(exec->client, pd, 1);
  }
  for (uint32_t i = 0; i < plan->param_count; ++i) {
    pw__object_release(&exec->args[i]->header);
  }
  for (uint32_t o = 0; o < plan->output_count; ++o) {
    const pw_plan_output_t* po = &plan->outputs[o];
    if (po->param < 0) {
      pw_execution_drop_output(&exec->outputs[pd->ops[po->op].output_base + po->output]);
    }
  }
  /* Nothing below reads the plan (nor its dispatch data): a private
   * block's armed graph, which keeps the plan alive, may be destroyed
   * once the event completes (pw__dispatch_exec_destroy). */
  plan = NULL;
  exec->plan = NULL;
  /* Every op has completed: nobody sets the status any more. */
  pw_status_t status = pw_atomic_load_ptr_acquire(&exec->status);
  if (status != NULL) pw_atomic_store_ptr_relaxed(&exec->status, NULL);
  pw_object_t* graph = exec->graph;
  exec->graph = NULL;
  pw_client_t* client = exec->client;
  uint32_t stripe = exec->stripe;
  /* The block keeps its reference on the event: the next run of the plan
   * in this block recycles it if the submitter let go of it. */
  if (exec->done_wanted) {
    pw__event_complete_runtime(exec->done, status);
  } else {
    pw_status_free(status); /* nobody asked: the outputs' events carry it */
  }
  if (own != NULL) {
    /* The ops' hold on a armed block (they took no reference): once it
     * moves, the owner may reuse the block, and pw_graph_exec_destroy
     * (which waits for it) may free the slot; the armed graph keeps the
     * client and the graph. The last touch of anything of the run. */
    pw_slot_count(&own->finished);
    return;
  }
  /* Drop the graph now, so a slice whose tail is this execution keeps
   * only the block. */
  pw__object_release(graph);
  pw_graph_exec_obj_t* armed = exec->armed;
  exec->armed = NULL;
  /* After the done event: pw_graph_exec_destroy returns when its runs
   * have completed, and then |armed| is gone. */
  if (armed != NULL) pw_atomic_fetch_sub_u32(&armed->shared_runs, 1);
  /* The block goes back (or is freed, with its device memory) while this
   * execution still counts as in flight, so the runtime is alive. */
  bool last = pw_execution_unref(exec); /* may reuse |exec|: touch it no more */
  /* The client struct stays alive: the execution's reference goes last. */
  pw__client_end(client, stripe);
  if (last) pw__client_release_stripe(client, stripe); /* may free it: touch nothing after */
}

/* A submission of |exec| failed before it ran: its outputs and event go,
 * its block back (|own|: to its armed graph's slot). */
void pw__execution_free_unsubmitted(pw_execution_t* exec, bool own) {
  for (uint32_t i = 0; i < exec->output_total; ++i) {
    pw_execution_drop_output(&exec->outputs[i]);
  }
  pw_event_release(exec->done);
  exec->done = NULL;
  exec->plan_id = 0;
  if (own) {
    /* Stays in its slot, free; the next submission lays it out again. */
    pw_atomic_store_u32_relaxed(&exec->refs, PW_EXECUTION_ARMED);
  } else {
    pw__block_put(exec->client, exec);
  }
}
