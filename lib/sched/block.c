/* Execution blocks: plan preparation (what every submission would
 * otherwise recompute), block layout, and the per-client cache of laid-out
 * blocks. The op records and the protocol that uses them are in
 * dispatch.c; see dispatch_internal.h. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <sched.h>
#include <string.h>
#include <time.h>

#include "plugin/backend_call.h"
#include "sched/dispatch_internal.h"

/* Bytes of an internal value in a block: its buffer object (and shard
 * array beyond PW_BUFFER_INLINE_SHARDS devices), rounded up to a cache
 * line, so that what a launch reads of it (the shards) never straddles
 * two lines. */
static size_t pw_internal_value_bytes(uint32_t device_count) {
  return pw_align_up(pw_align_up(sizeof(pw_buffer_obj_t), 16) +
                         (device_count <= PW_BUFFER_INLINE_SHARDS
                              ? 0
                              : pw_align_up(device_count * sizeof(pw_backend_memory_t), 16)),
                     64);
}


/* Blocks are kept for reuse in their client's slots after their execution.
 * A block remembers the plan it was laid out for (pw_execution_t.plan_id):
 * taken again for that plan, it still holds everything that does not
 * change between runs (op links into the plan, input pointers to internal
 * values, the internal values themselves) and its ops' per-run state was
 * re-armed by their completions (pw_op_rearm). The search starts at a
 * slot chosen by the plan, so that each graph's blocks tend to stay in one
 * slot and submitters of different graphs do not contend. */
static uint32_t pw_block_slot(uint64_t plan_id, int i) {
  return (uint32_t)((plan_id + (uint64_t)i) % PW_BLOCK_CACHE_SLOTS);
}

/* Gives back the device memory of |block|'s internal values (kept across
 * runs of its plan while the block is cached). */
static void pw_block_release_internal(pw_execution_t* block) {
  unsigned char* at = (unsigned char*)block + block->internal_at;
  unsigned char* end = (unsigned char*)block + block->internal_end;
  while (at < end) {
    pw_buffer_obj_t* b = (pw_buffer_obj_t*)at;
    const pw_slice_t* slice = b->slice;
    if (slice == NULL) break; /* a layout that stopped early */
    for (uint32_t d = 0; d < slice->device_count; ++d) {
      pw__backend_deallocate(slice->backend, slice->group_devices[d], b->shards[d]);
      b->shards[d] = NULL;
    }
    at += pw_internal_value_bytes(slice->device_count);
  }
}

/* Drops the block's reference on the done event of its last run (kept for
 * the next run of its plan: pw__dispatch_submit recycles it). */
static void pw_block_release_done(pw_execution_t* block) {
  pw_event_release(block->done);
  block->done = NULL;
}

void pw__block_release_memory(pw_execution_t* block) {
  pw_block_release_internal(block);
  pw_block_release_done(block);
  block->plan_id = 0;
}

static void pw_block_free(pw_runtime_t* rt, pw_execution_t* block) {
  pw_block_release_internal(block);
  pw_block_release_done(block);
  pw_allocator_free(rt->allocator, block, block->block_size);
}

/* A block of |size| bytes: a cached one of exactly that size (the same
 * graph resubmitted) if there is one, else a new one. |*out_prepared|
 * says whether it is laid out for plan |plan_id| (0: never); otherwise it
 * is zeroed. */
pw_status_t pw__block_get(pw_client_t* client, size_t size, uint64_t plan_id,
                                unsigned char** out, bool* out_prepared) {
  pw_runtime_t* rt = client->runtime;
  *out_prepared = false;
  for (int i = 0; i < PW_BLOCK_CACHE_SLOTS; ++i) {
    pw_atomic_ptr_t* slot = &client->block_cache[pw_block_slot(plan_id, i)].block;
    if (pw_atomic_load_ptr_relaxed(slot) == NULL) continue;
    pw_execution_t* block = pw_atomic_exchange_ptr(slot, NULL);
    if (block == NULL) continue;
    size_t cached = block->block_size;
    if (cached == size) {
      if (plan_id != 0 && block->plan_id == plan_id) {
        *out_prepared = true;
      } else {
        pw_block_release_internal(block);
        pw_block_release_done(block);
        memset(block, 0, size);
      }
      *out = (unsigned char*)block;
      return NULL;
    }
    void* empty = NULL;
    if (!pw_atomic_cas_ptr(slot, &empty, block)) pw_block_free(rt, block);
  }
  return pw_allocator_calloc(rt->allocator, size, 64, (void**)out);
}

/* Frees every block in |client|'s cache. */
static void pw_block_cache_drain(pw_client_t* client) {
  for (int i = 0; i < PW_BLOCK_CACHE_SLOTS; ++i) {
    pw_execution_t* block = pw_atomic_exchange_ptr(&client->block_cache[i].block, NULL);
    if (block != NULL) pw_block_free(client->runtime, block);
  }
}

/* |block|'s block_size and plan_id say what it holds.
 *
 * Freeing a block gives device memory back (internal values) and so
 * touches slices and backends: it must happen while the runtime is sure to
 * live, i.e. on a thread inside an API call or one that completes an
 * execution not yet counted out of its client's in-flight count. Every caller
 * is (pw_execution_complete puts its block before that count drops). The
 * cache of a destroyed client (|blocks_closed|) takes no more blocks:
 * pw_client_destroy drains it, and a put that races with the drain sees
 * the flag after its CAS (both sides: a locked RMW, then a load) and
 * drains again itself, so no block with device memory is left for the
 * client's last reference, which may go on any thread. */
void pw__block_put(pw_client_t* client, pw_execution_t* block) {
  /* Only a block laid out for a plan is reused as it is. */
  if (block->plan_id == 0) {
    pw_block_release_internal(block);
    pw_block_release_done(block);
  }
  if (pw_atomic_load_u32_acquire(&client->blocks_closed) == 0) {
    for (int i = 0; i < PW_BLOCK_CACHE_SLOTS; ++i) {
      pw_atomic_ptr_t* slot = &client->block_cache[pw_block_slot(block->plan_id, i)].block;
      void* empty = NULL;
      if (pw_atomic_load_ptr_relaxed(slot) == NULL && pw_atomic_cas_ptr(slot, &empty, block)) {
        if (pw_atomic_load_u32_acquire(&client->blocks_closed) != 0) pw_block_cache_drain(client);
        return;
      }
    }
  }
  pw_block_free(client->runtime, block);
}

pw_status_t pw__block_get_own(pw_client_t* client, pw_graph_exec_slot_t* slot, size_t size,
                              uint64_t plan_id, unsigned char** out, bool* out_prepared) {
  pw_execution_t* block = pw_atomic_load_ptr_relaxed(&slot->block);
  *out_prepared = false;
  if (block != NULL && block->block_size == size) {
    if (plan_id != 0 && block->plan_id == plan_id) {
      *out_prepared = true;
    } else {
      /* Its last submission failed before it ran (plan_id 0). */
      pw_block_release_internal(block);
      pw_block_release_done(block);
      memset(block, 0, size);
    }
    *out = (unsigned char*)block;
    return NULL;
  }
  if (block != NULL) {
    pw_atomic_store_ptr_relaxed(&slot->block, NULL);
    pw_block_free(client->runtime, block);
  }
  PW_RETURN_IF_ERROR(pw_allocator_calloc(client->runtime->allocator, size, 64, (void**)out));
  pw_atomic_store_ptr_release(&slot->block, *out);
  return NULL;
}

void pw__dispatch_exec_register(pw_graph_exec_obj_t* armed) {
  pw_client_t* client = armed->client;
  pthread_mutex_lock(&client->execs_lock);
  armed->prev = NULL;
  armed->next = client->execs;
  if (client->execs != NULL) client->execs->prev = armed;
  client->execs = armed;
  pthread_mutex_unlock(&client->execs_lock);
}

/* Gives up private |block| of an armed graph being destroyed, once its
 * last run has finished. Free (only PW_EXECUTION_PRIVATE left): it goes
 * to the client's cache like any finished block. Still held (a slice's
 * tail reference, which stays until that slice's next append): it
 * becomes an ordinary block in one atomic step, with the client
 * reference an ordinary execution holds, and its last release puts it in
 * the cache. */
static void pw_block_disown(pw_client_t* client, pw_execution_t* block) {
  pw_atomic_fetch_add_u64(&client->stripes[block->stripe].counts, PW_CLIENT_REF);
  uint32_t refs = pw_atomic_load_u32_acquire(&block->refs);
  for (;;) {
    if (refs == PW_EXECUTION_PRIVATE) {
      pw__client_release_stripe(client, block->stripe); /* not needed: drop it */
      pw__block_put(client, block);
      return;
    }
    if (pw_atomic_cas_u32(&block->refs, &refs, refs & ~PW_EXECUTION_PRIVATE)) return;
  }
}

void pw__dispatch_backoff(uint32_t spins) {
  if (spins < 64) {
    sched_yield();
  } else {
    /* 50 us for about 10 ms, then 1 ms: a long run is not polled 20,000
     * times a second. */
    struct timespec pause = {0, spins < 64 + 200 ? 50 * 1000 : 1000 * 1000};
    nanosleep(&pause, NULL);
  }
}

/* Runs of |armed| in its private blocks not finished yet (on any slice:
 * |slice| is for pw_client_sum_armed). */
static uint64_t pw_armed_private_inflight(pw_graph_exec_obj_t* armed, uint32_t slice) {
  (void)slice;
  uint64_t n = 0;
  for (uint32_t i = 0; i < PW_GRAPH_EXEC_BLOCKS; ++i) {
    /* |submitted| first: a run submitted after this read cannot make the
     * difference negative, only finish early. */
    uint64_t submitted = pw_atomic_load_u64_acquire(&armed->slots[i].submitted);
    uint64_t finished = pw_atomic_load_u64_acquire(&armed->slots[i].finished);
    if (submitted > finished) n += submitted - finished;
  }
  return n;
}

/* Runs of |armed| in its private blocks that have counted their ops. */
static uint64_t pw_armed_counted_runs(pw_graph_exec_obj_t* armed) {
  uint64_t runs = 0;
  for (uint32_t i = 0; i < PW_GRAPH_EXEC_BLOCKS; ++i) {
    runs += pw_atomic_load_u64_acquire(&armed->slots[i].counted);
  }
  return runs;
}

/* Those runs times its plan's ops on |slice|. */
static uint64_t pw_armed_private_ops(pw_graph_exec_obj_t* armed, uint32_t slice) {
  const pw_plan_t* plan = armed->plan;
  uint64_t runs = pw_armed_counted_runs(armed);
  uint64_t ops = 0;
  for (uint32_t k = 0; k < plan->home_count_n; ++k) {
    if (plan->home_counts[2 * k] == slice) ops += plan->home_counts[2 * k + 1];
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

uint64_t pw__dispatch_private_inflight(pw_client_t* client) {
  return pw_client_sum_armed(client, pw_armed_private_inflight, 0);
}

uint64_t pw__dispatch_private_ops(pw_client_t* client, uint32_t slice) {
  return pw_client_sum_armed(client, pw_armed_private_ops, slice);
}

void pw__dispatch_exec_destroy(pw_graph_exec_obj_t* armed) {
  pw_client_t* client = armed->client;
  /* The contract is that every run has completed when this returns. A
   * private run is through once its slot's |finished| moves, right after
   * its done event (pw_execution_complete): a run that has one is waited
   * for on it (this is the armed graph's user, the only thread that
   * changes a block's event), then its slot is polled. Runs in shared
   * blocks hold their own graph reference and count themselves out of
   * shared_runs after their done event. Runs always complete; this is
   * not a hot path. */
  for (uint32_t i = 0; i < PW_GRAPH_EXEC_BLOCKS; ++i) {
    pw_graph_exec_slot_t* slot = &armed->slots[i];
    pw_execution_t* block = pw_atomic_load_ptr_relaxed(&slot->block);
    if (block != NULL && block->done_wanted && block->done != NULL &&
        pw_atomic_load_u64_acquire(&slot->finished) !=
            pw_atomic_load_u64_relaxed(&slot->submitted)) {
      pw_status_free(pw_event_wait(block->done, PW_INFINITE_FUTURE));
    }
  }
  for (uint32_t spins = 0; pw_armed_private_inflight(armed, 0) != 0 ||
                           pw_atomic_load_u32_acquire(&armed->shared_runs) != 0;
       ++spins) {
    pw__dispatch_backoff(spins);
  }
  /* Its op counts move to the client's, in the same step as it leaves the
   * list, so pw_client_slice_stats never sees them twice or not at all. */
  pthread_mutex_lock(&client->execs_lock);
  uint64_t runs = pw_armed_counted_runs(armed);
  if (runs != 0) pw_plan_count_ops(client, armed->plan, runs);
  if (armed->prev != NULL) {
    armed->prev->next = armed->next;
  } else {
    client->execs = armed->next;
  }
  if (armed->next != NULL) armed->next->prev = armed->prev;
  pthread_mutex_unlock(&client->execs_lock);
  for (uint32_t i = 0; i < PW_GRAPH_EXEC_BLOCKS; ++i) {
    pw_execution_t* block = pw_atomic_load_ptr_relaxed(&armed->slots[i].block);
    if (block != NULL) pw_block_disown(client, block);
    pw_atomic_store_ptr_relaxed(&armed->slots[i].block, NULL);
  }
  pw__object_release(armed->graph);
  pw_allocator_free(client->runtime->allocator, armed, sizeof(*armed));
}

void pw__dispatch_client_close(pw_client_t* client) {
  /* Armed graphs left alive go first: their blocks join the cache, which
   * is then emptied. Nothing is in flight any more. */
  for (;;) {
    pthread_mutex_lock(&client->execs_lock);
    pw_graph_exec_obj_t* armed = client->execs;
    pthread_mutex_unlock(&client->execs_lock);
    if (armed == NULL) break;
    pw__dispatch_exec_destroy(armed);
  }
  pw_atomic_exchange_u32(&client->blocks_closed, 1);
  pw_block_cache_drain(client);
  /* The blocks of its last runs that slices hold as tails (until the next
   * op lands there) give their device memory back now. */
  pw__dispatch_client_release_tails(client);
}

void pw__dispatch_client_deinit(pw_client_t* client) { pw_block_cache_drain(client); }


static const pw_array_spec_t* pw_plan_output_spec(const pw_plan_op_t* p, uint32_t k) {
  return p->kind == PW_PLAN_TRANSFER ? p->transfer_spec : &p->executable->signature.outputs[k];
}

pw_status_t pw__dispatch_plan_prepare(pw_runtime_t* rt, pw_plan_t* plan) {
  uint32_t input_total = 0, output_total = 0, param_inputs = 0, link_total = 0;
  size_t internal_bytes = 0;
  for (uint32_t i = 0; i < plan->op_count; ++i) {
    pw_plan_op_t* p = &plan->ops[i];
    uint32_t span = p->vslice->slice->span_count;
    link_total += span > 1 ? span : 0;
    p->param_inputs = 0;
    p->per_run_inputs = 0;
    for (uint32_t k = 0; k < p->input_count; ++k) {
      const pw_plan_input_t* in = &p->inputs[k];
      p->param_inputs += in->param >= 0;
      if (in->param >= 0 || (plan->ops[in->op].external_outputs & (1u << in->output))) {
        p->per_run_inputs |= 1u << k;
      }
    }
    p->output_base = output_total;
    input_total += p->input_count;
    param_inputs += p->param_inputs;
    output_total += p->output_count;
    for (uint32_t k = 0; k < p->output_count; ++k) {
      if (!(p->external_outputs & (1u << k))) {
        internal_bytes += pw_internal_value_bytes(p->vslice->slice->device_count);
      }
    }
  }
  pw_plan_value_t* values = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc_array(rt->allocator, pw_nz(output_total),
                                               sizeof(pw_plan_value_t), 0, (void**)&values));
  for (uint32_t i = 0; i < plan->op_count; ++i) {
    const pw_plan_op_t* p = &plan->ops[i];
    for (uint32_t k = 0; k < p->output_count; ++k) {
      const pw_array_spec_t* spec = pw_plan_output_spec(p, k);
      pw_plan_value_t* v = &values[p->output_base + k];
      pw_status_t status = pw_array_spec_byte_sizes(spec, &p->vslice->mesh, &v->total_bytes,
                                                    &v->shard_bytes);
      if (status != NULL) {
        pw_allocator_free(rt->allocator, values, pw_nz(output_total) * sizeof(pw_plan_value_t));
        return pw_status_annotate(status, "graph node %u (\"%s\") output %u", p->node,
                                  p->name, k);
      }
    }
  }
  /* Append groups. A submission appends group after group, each to its
   * slice's sequence at once. Deadlock freedom needs every producer of a
   * group's ops to be appended no later than the group (then a device can
   * only wait for ops appended before the one it waits at, on any slice:
   * no cycle of waits, whatever other submitters interleave). Taking ops
   * in op order (topological), an op joins its slice's latest group when
   * none of its producers is in a later group, else opens a new one: a
   * 16-stage pipeline gets 16 groups instead of one per run of ops, and a
   * graph that leaves a slice and comes back gets a new group there. With
   * spanning ops (a plain op and a spanning op can share devices), with a
   * scheduler window (admission is op by op) and in the debug mode,
   * groups are runs of consecutive ops on one slice. */
  bool merge = link_total == 0 && rt->sched_window == 0 && !rt->no_gang_order;
  uint32_t* group_of = NULL; /* op_count groups by op, then slice_count latest + 1 */
  uint32_t group_count = 0;
  if (merge && plan->op_count > 0) {
    pw_status_t status = pw_allocator_calloc_array(rt->allocator,
                                                   (size_t)plan->op_count + rt->slice_count,
                                                   sizeof(uint32_t), 0, (void**)&group_of);
    if (status != NULL) {
      pw_allocator_free(rt->allocator, values, pw_nz(output_total) * sizeof(pw_plan_value_t));
      return status;
    }
    uint32_t* latest = group_of + plan->op_count;
    for (uint32_t i = 0; i < plan->op_count; ++i) {
      const pw_plan_op_t* p = &plan->ops[i];
      uint32_t need = 0; /* the latest group among its producers, + 1 */
      for (uint32_t k = 0; k < p->input_count; ++k) {
        int32_t producer = p->inputs[k].op;
        if (producer >= 0 && group_of[producer] + 1 > need) need = group_of[producer] + 1;
      }
      uint32_t* mine = &latest[p->vslice->slice->index];
      if (*mine == 0 || *mine < need) *mine = ++group_count;
      group_of[i] = *mine - 1;
    }
  } else {
    for (uint32_t i = 0; i < plan->op_count; ++i) {
      group_count += i == 0 || plan->ops[i].vslice->slice != plan->ops[i - 1].vslice->slice;
    }
  }
  uint32_t counts[3] = {0, 0, 0};
  for (uint32_t i = 0; i < plan->op_count; ++i) {
    const pw_plan_op_t* p = &plan->ops[i];
    counts[0] += pw_op_is_root(rt, p);
    counts[1] += pw_op_guarded(rt, p);
    counts[2] += p->per_run_inputs != 0;
  }
  /* Ops per home slice (span[0]: its scheduler admits spanning ops), for
   * the per-slice completion counts (pw_execution_complete). */
  uint32_t per_slice_stack[64];
  uint32_t* per_slice = per_slice_stack;
  pw_status_t status = NULL;
  if (rt->slice_count <= 64) {
    memset(per_slice_stack, 0, sizeof(per_slice_stack));
  } else {
    status = pw_allocator_calloc_array(rt->allocator, rt->slice_count, sizeof(uint32_t), 0,
                                       (void**)&per_slice);
  }
  uint32_t home_n = 0;
  for (uint32_t i = 0; status == NULL && i < plan->op_count; ++i) {
    if (per_slice[plan->ops[i].vslice->slice->span[0]->index]++ == 0) home_n++;
  }
  size_t total = (size_t)counts[0] + counts[1] + counts[2] + group_count + plan->op_count +
                 2 * (size_t)home_n;
  uint32_t* lists = NULL;
  if (status == NULL) {
    status = pw_allocator_calloc_array(rt->allocator, pw_nz((uint32_t)total), sizeof(uint32_t),
                                       0, (void**)&lists);
  }
  if (status != NULL) {
    if (per_slice != NULL && per_slice != per_slice_stack) {
      pw_allocator_free(rt->allocator, per_slice, rt->slice_count * sizeof(uint32_t));
    }
    if (group_of != NULL) {
      pw_allocator_free(rt->allocator, group_of,
                        ((size_t)plan->op_count + rt->slice_count) * sizeof(uint32_t));
    }
    pw_allocator_free(rt->allocator, values, pw_nz(output_total) * sizeof(pw_plan_value_t));
    return status;
  }
  plan->list_total = total;
  plan->roots = lists;
  plan->guarded = lists + counts[0];
  plan->rebind = plan->guarded + counts[1];
  plan->runs = plan->rebind + counts[2];
  plan->append_order = plan->runs + group_count;
  plan->home_counts = plan->append_order + plan->op_count;
  plan->home_count_n = 0;
  for (uint32_t k = 0; k < rt->slice_count; ++k) {
    if (per_slice[k] == 0) continue;
    plan->home_counts[2 * plan->home_count_n] = k;
    plan->home_counts[2 * plan->home_count_n + 1] = per_slice[k];
    plan->home_count_n++;
  }
  if (per_slice != per_slice_stack) {
    pw_allocator_free(rt->allocator, per_slice, rt->slice_count * sizeof(uint32_t));
  }
  plan->root_count = plan->guarded_count = plan->rebind_count = 0;
  plan->run_count = group_count;
  uint32_t run = 0;
  for (uint32_t i = 0; i < plan->op_count; ++i) {
    const pw_plan_op_t* p = &plan->ops[i];
    if (pw_op_is_root(rt, p)) plan->roots[plan->root_count++] = i;
    if (pw_op_guarded(rt, p)) plan->guarded[plan->guarded_count++] = i;
    if (p->per_run_inputs != 0) plan->rebind[plan->rebind_count++] = i;
    if (group_of != NULL) {
      plan->runs[group_of[i]]++; /* its size, for now */
    } else {
      if (i == 0 || p->vslice->slice != p[-1].vslice->slice) plan->runs[run++] = i;
      plan->append_order[i] = i;
    }
  }
  if (group_of != NULL) {
    /* Sizes to starts; place every op after its group's earlier ops (so
     * runs[g] ends as group g's end); shift back to starts. */
    uint32_t start = 0;
    for (uint32_t g = 0; g < group_count; ++g) {
      uint32_t size = plan->runs[g];
      plan->runs[g] = start;
      start += size;
    }
    for (uint32_t i = 0; i < plan->op_count; ++i) {
      plan->append_order[plan->runs[group_of[i]]++] = i;
    }
    for (uint32_t g = group_count; g-- > 0;) plan->runs[g] = g == 0 ? 0 : plan->runs[g - 1];
    pw_allocator_free(rt->allocator, group_of,
                      ((size_t)plan->op_count + rt->slice_count) * sizeof(uint32_t));
  }
  plan->tail_refs = 0;
  for (uint32_t g = 0; g < plan->run_count; ++g) {
    plan->tail_refs += plan->ops[plan->append_order[plan->runs[g]]].vslice->slice->span_count;
  }
  plan->values = values;
  plan->input_total = input_total;
  plan->output_total = output_total;
  plan->param_input_total = param_inputs;
  plan->internal_bytes = internal_bytes;
  plan->link_total = link_total;
  plan->id = pw_atomic_fetch_add_u64(&rt->next_plan_id, 1) + 1;
  return NULL;
}

void pw__dispatch_plan_release(pw_runtime_t* rt, pw_plan_t* plan) {
  if (plan->values != NULL) {
    pw_allocator_free(rt->allocator, plan->values, pw_nz(plan->output_total) * sizeof(pw_plan_value_t));
    plan->values = NULL;
  }
  if (plan->roots != NULL) {
    pw_allocator_free(rt->allocator, plan->roots, pw_nz((uint32_t)plan->list_total) * sizeof(uint32_t));
    plan->roots = NULL;
  }
}

void pw__block_layout(const pw_runtime_t* rt, const pw_plan_t* plan,
                            pw_block_layout_t* l) {
  l->ops_at = pw_align_up(sizeof(pw_execution_t), 64);
  l->cold_at = l->ops_at + plan->op_count * sizeof(pw_op_t);
  l->args_at = l->cold_at + plan->op_count * sizeof(pw_op_cold_t);
  l->outs_at = l->args_at + plan->param_count * sizeof(pw_buffer_obj_t*);
  l->ins_at = l->outs_at + plan->output_total * sizeof(pw_buffer_obj_t*);
  l->slots_at = pw_align_up(l->ins_at + plan->input_total * sizeof(pw_buffer_obj_t*), 64);
  size_t slot_count = 0;
  if (rt->no_gang_order) {
    for (uint32_t i = 0; i < plan->op_count; ++i) {
      slot_count += plan->ops[i].vslice->slice->device_count;
    }
  }
  l->internal_at = pw_align_up(l->slots_at + slot_count * sizeof(pw_device_t), 64);
  l->waits_at = pw_align_up(l->internal_at + plan->internal_bytes, 16);
  l->links_at = l->waits_at + plan->param_input_total * sizeof(pw__event_node_t);
  l->queue_links_at = l->links_at + plan->link_total * sizeof(pw_atomic_ptr_t);
  l->size = l->queue_links_at + plan->link_total * sizeof(pw_op_t*);
}

/* Lays out a zeroed block for |plan|: what stays the same from run to run
 * (op links, internal values, input pointers to other ops' outputs), and
 * the graph outputs' buffers (new objects). On failure exec->output_total
 * counts the outputs made. */
pw_status_t pw__execution_lay_out(pw_execution_t* exec, const pw_plan_t* plan,
                                        const pw_block_layout_t* l) {
  unsigned char* block = (unsigned char*)exec;
  pw_runtime_t* rt = exec->runtime;
  exec->ops = (pw_op_t*)(block + l->ops_at);
  exec->op_cold = (pw_op_cold_t*)(block + l->cold_at);
  exec->args = (pw_buffer_obj_t**)(block + l->args_at);
  exec->outputs = (pw_buffer_obj_t**)(block + l->outs_at);
  pw_buffer_obj_t** input_ptrs = (pw_buffer_obj_t**)(block + l->ins_at);
  pw_device_t* slots = rt->no_gang_order ? (pw_device_t*)(block + l->slots_at) : NULL;
  unsigned char* internal = block + l->internal_at;
  pw__event_node_t* waits = (pw__event_node_t*)(block + l->waits_at);
  pw_atomic_ptr_t* links = (pw_atomic_ptr_t*)(block + l->links_at);
  pw_op_t** queue_links = (pw_op_t**)(block + l->queue_links_at);
  pw_status_t status = NULL;
  uint32_t out_cursor = 0, in_cursor = 0;
  for (uint32_t i = 0; status == NULL && i < plan->op_count; ++i) {
    const pw_plan_op_t* p = &plan->ops[i];
    pw_op_t* op = &exec->ops[i];
    op->exec = exec;
    op->plan = p;
    op->slice = p->vslice->slice;
    op->index = i;
    op->input_count = (uint8_t)p->input_count;
    op->output_count = (uint8_t)p->output_count;
    bool guarded = pw_op_guarded(rt, p);
    op->flags = (uint8_t)((p->kind == PW_PLAN_TRANSFER ? PW_OP_TRANSFER : 0) |
                          (p->static_deps == 1 && !guarded ? PW_OP_READY_ON_ONE : 0) |
                          (slots != NULL ? PW_OP_UNORDERED : 0));
    op->loaded = p->kind == PW_PLAN_TRANSFER ? NULL : p->executable->loaded;
    op->successors = p->successors;
    op->successor_count = p->successor_count;
    op->external_outputs = p->external_outputs;
    op->init_pending = p->static_deps + (guarded ? 1 : 0);
    op->outputs = &exec->outputs[out_cursor];
    for (uint32_t k = 0; status == NULL && k < p->output_count; ++k) {
      const pw_array_spec_t* spec = pw_plan_output_spec(p, k);
      if (p->external_outputs & (1u << k)) {
        const pw_plan_value_t* v = &plan->values[p->output_base + k];
        status = pw__buffer_create(p->vslice, spec, v->total_bytes, v->shard_bytes,
                                   &exec->outputs[out_cursor]);
      } else {
        pw_buffer_obj_t* b = (pw_buffer_obj_t*)internal;
        internal += pw_internal_value_bytes(op->slice->device_count);
        b->shards = op->slice->device_count <= PW_BUFFER_INLINE_SHARDS
                        ? b->inline_shards
                        : (pw_backend_memory_t*)((unsigned char*)b +
                                                 pw_align_up(sizeof(pw_buffer_obj_t), 16));
        b->header.kind = PW_OBJECT_BUFFER;
        b->header.runtime = rt;
        b->slice = op->slice;
        b->mesh = p->vslice->mesh;
        b->spec = *spec;
        b->shard_bytes = plan->values[p->output_base + k].shard_bytes;
        b->total_bytes = plan->values[p->output_base + k].total_bytes;
        exec->outputs[out_cursor] = b;
      }
      if (status == NULL) exec->output_total = ++out_cursor;
    }
    op->inputs = &input_ptrs[in_cursor];
    in_cursor += p->input_count;
    for (uint32_t k = 0; k < p->input_count; ++k) {
      const pw_plan_input_t* in = &p->inputs[k];
      if (in->param < 0) op->inputs[k] = exec->ops[in->op].outputs[in->output];
    }
    if (p->param_inputs > 0) {
      op->arg_waits = waits;
      waits += p->param_inputs;
    }
    pw_op_cold_t* cold = &exec->op_cold[i];
    if (slots != NULL) {
      cold->slots = slots;
      slots += op->slice->device_count;
    }
    if (op->slice->span_count > 1) {
      op->links = links;
      links += op->slice->span_count;
      cold->sched_links = queue_links;
      queue_links += op->slice->span_count;
    }
    pw_op_rearm(op);
  }
  if (status == NULL && rt->sched_window == 0) {
    /* The links inside each append group stay the same from run to run:
     * appends only link a group's first op and clear its last op's link
     * (pw_dispatch_append_part). */
    for (uint32_t g = 0; g < plan->run_count; ++g) {
      uint32_t end = g + 1 < plan->run_count ? plan->runs[g + 1] : plan->op_count;
      for (uint32_t k = plan->runs[g]; k + 1 < end; ++k) {
        pw_op_t* op = &exec->ops[plan->append_order[k]];
        for (uint32_t p = 0; p < op->slice->span_count; ++p) {
          pw_atomic_init_ptr(pw_op_link_at(op, p), &exec->ops[plan->append_order[k + 1]]);
        }
      }
    }
  }
  return status;
}

/* Makes the graph outputs' buffers in a block that an earlier run of
 * |plan| laid out (their slots are NULL again: pw_execution_drop_output). */
pw_status_t pw__execution_relay(pw_execution_t* exec, const pw_plan_t* plan) {
  for (uint32_t o = 0; o < plan->output_count; ++o) {
    const pw_plan_output_t* po = &plan->outputs[o];
    if (po->param >= 0) continue;
    const pw_plan_op_t* p = &plan->ops[po->op];
    pw_buffer_obj_t** slot = &exec->outputs[p->output_base + po->output];
    if (*slot == NULL) {
      const pw_plan_value_t* v = &plan->values[p->output_base + po->output];
      PW_RETURN_IF_ERROR(pw__buffer_create(p->vslice, pw_plan_output_spec(p, po->output),
                                           v->total_bytes, v->shard_bytes, slot));
    }
  }
  return NULL;
}
