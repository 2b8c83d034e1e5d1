/* Armed graphs (pw_graph_exec_t), the dispatcher's side: their list in
 * the client (submit.h picks a free armed block for a run), the counts of
 * their armed runs (in flight, ops completed: pw_client_wait_idle and
 * pw_client_slice_stats), and their destruction, which waits for their
 * runs and gives their armed blocks up. The blocks themselves are in
 * block.c; a armed run's lifetime in submit.h and execution.c. */
#include "sched/dispatch_internal.h"

void pw__dispatch_exec_register(pw_graph_exec_obj_t* armed) {
  pw_client_t* client = armed->client;
  pthread_mutex_lock(&client->execs_lock);
  armed->prev = NULL;
  armed->next = client->execs;
  if (client->execs != NULL) client->execs->prev = armed;
  client->execs = armed;
  pthread_mutex_unlock(&client->execs_lock);
}

/* Gives up armed block |block| of an armed graph being destroyed, once its
 * last run has finished. Free (only PW_EXECUTION_ARMED left): it goes
 * to the client's cache like any finished block. Still held (a slice's
 * tail reference, which stays until that slice's next append): it
 * becomes an ordinary block in one atomic step, with the client
 * reference an ordinary execution holds, and its last release puts it in
 * the cache. */
static void pw_block_disown(pw_client_t* client, pw_execution_t* block) {
  pw_atomic_fetch_add_u64(&client->stripes[block->stripe].counts, PW_CLIENT_REF);
  uint32_t refs = pw_atomic_load_u32_acquire(&block->refs);
  for (;;) {
    if (refs == PW_EXECUTION_ARMED) {
      pw__client_release_stripe(client, block->stripe); /* not needed: drop it */
      pw__block_put(client, block);
      return;
    }
    if (pw_atomic_cas_u32(&block->refs, &refs, refs & ~PW_EXECUTION_ARMED)) return;
  }
}

/* Runs of |armed| in its armed blocks not finished yet (on any slice:
 * |slice| is for pw_client_sum_armed). */
static uint64_t pw_armed_inflight(pw_graph_exec_obj_t* armed, uint32_t slice) {
  (void)slice;
  uint64_t n = 0;
  for (uint32_t i = 0; i < PW_GRAPH_EXEC_BLOCKS; ++i) {
    /* |submitted| first: a run submitted after this read cannot make the
     * difference negative, only finish early. */
    uint64_t submitted = pw_atomic_load_u64_acquire(&armed->blocks[i].submitted);
    uint64_t finished = pw_atomic_load_u64_acquire(&armed->blocks[i].finished);
    if (submitted > finished) n += submitted - finished;
  }
  return n;
}

/* Runs of |armed| in its armed blocks that have counted their ops. */
static uint64_t pw_armed_counted_runs(pw_graph_exec_obj_t* armed) {
  uint64_t runs = 0;
  for (uint32_t i = 0; i < PW_GRAPH_EXEC_BLOCKS; ++i) {
    runs += pw_atomic_load_u64_acquire(&armed->blocks[i].counted);
  }
  return runs;
}

/* Those runs times its plan's ops on |slice|. */
static uint64_t pw_armed_ops(pw_graph_exec_obj_t* armed, uint32_t slice) {
  uint64_t runs = pw_armed_counted_runs(armed);
  if (runs == 0) return 0; /* (nor may its plan have dispatch data yet) */
  const pw_plan_dispatch_t* pd = pw_plan_dispatch_if_any(armed->plan);
  uint64_t ops = 0;
  for (uint32_t k = 0; k < pd->home_count_n; ++k) {
    if (pd->home_counts[2 * k] == slice) ops += pd->home_counts[2 * k + 1];
  }
  return runs * ops;
}

/* |count| summed over |client|'s armed graphs (|slice|: for |count|). */
static uint64_t pw_client_sum_armed(pw_client_t* client,
                                    uint64_t (*count)(pw_graph_exec_obj_t*, uint32_t),
                                    uint32_t slice) {
  uint64_t n = 0;
  pthread_mutex_lock(&client->execs_lock);
  for (pw_graph_exec_obj_t* a = client->execs; a != NULL; a = a->next) n += count(a, slice);
  pthread_mutex_unlock(&client->execs_lock);
  return n;
}

uint64_t pw__dispatch_armed_inflight(pw_client_t* client) {
  return pw_client_sum_armed(client, pw_armed_inflight, 0);
}

uint64_t pw__dispatch_armed_ops(pw_client_t* client, uint32_t slice) {
  return pw_client_sum_armed(client, pw_armed_ops, slice);
}

void pw__dispatch_exec_destroy(pw_graph_exec_obj_t* armed) {
  pw_client_t* client = armed->client;
  /* The contract is that every run has completed when this returns. A
   * armed run is through once its slot's |finished| moves, right after
   * its done event (pw__execution_complete): a run that has one is waited
   * for on it (this is the armed graph's user, the only thread that
   * changes a block's event), then its slot is polled. Runs in shared
   * blocks hold their own graph reference and count themselves out of
   * shared_runs after their done event. Runs always complete; this is
   * not a hot path. */
  for (uint32_t i = 0; i < PW_GRAPH_EXEC_BLOCKS; ++i) {
    pw_armed_block_t* slot = &armed->blocks[i];
    pw_execution_t* block = pw_atomic_load_ptr_relaxed(&slot->block);
    if (block != NULL && block->done_wanted && block->done != NULL &&
        pw_atomic_load_u64_acquire(&slot->finished) !=
            pw_atomic_load_u64_relaxed(&slot->submitted)) {
      pw_status_free(pw_event_wait(block->done, PW_INFINITE_FUTURE));
    }
  }
  for (uint32_t spins = 0; pw_armed_inflight(armed, 0) != 0 ||
                           pw_atomic_load_u32_acquire(&armed->shared_runs) != 0;
       ++spins) {
    pw__dispatch_backoff(spins);
  }
  /* Its op counts move to the client's, in the same step as it leaves the
   * list, so pw_client_slice_stats never sees them twice or not at all. */
  pthread_mutex_lock(&client->execs_lock);
  uint64_t runs = pw_armed_counted_runs(armed);
  if (runs != 0) pw_plan_count_ops(client, pw_plan_dispatch_if_any(armed->plan), runs);
  if (armed->prev != NULL) {
    armed->prev->next = armed->next;
  } else {
    client->execs = armed->next;
  }
  if (armed->next != NULL) armed->next->prev = armed->prev;
  pthread_mutex_unlock(&client->execs_lock);
  for (uint32_t i = 0; i < PW_GRAPH_EXEC_BLOCKS; ++i) {
    pw_execution_t* block = pw_atomic_load_ptr_relaxed(&armed->blocks[i].block);
    if (block != NULL) pw_block_disown(client, block);
    pw_atomic_store_ptr_relaxed(&armed->blocks[i].block, NULL);
  }
  pw__object_release(armed->graph);
  pw_allocator_free(client->runtime->allocator, armed, sizeof(*armed));
}
