/* Execution blocks: their layout (from the plan's dispatch data, plan.c),
 * the graph outputs' buffers of a re-laid block, and the per-client cache
 * of laid-out blocks. The op records and the protocol that uses them are
 * in dispatch.c; see dispatch_internal.h. */
#include <string.h>

#include "plugin/backend_call.h"
#include "sched/dispatch_internal.h"

/* Bytes of an internal value in a block: its buffer object (and shard
 * array beyond PW_BUFFER_INLINE_SHARDS devices), rounded up to a cache
 * line, so that what a launch reads of it (the shards) never straddles
 * two lines. */
size_t pw__block_internal_value_bytes(uint32_t device_count) {
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
    at += pw__block_internal_value_bytes(slice->device_count);
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

void pw__block_cache_drain(pw_client_t* client) {
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
 * is (pw__execution_complete puts its block before that count drops). The
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
        if (pw_atomic_load_u32_acquire(&client->blocks_closed) != 0) pw__block_cache_drain(client);
        return;
      }
    }
  }
  pw_block_free(client->runtime, block);
}

pw_status_t pw__block_get_armed(pw_client_t* client, pw_armed_block_t* slot, size_t size,
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

void pw__block_layout(const pw_plan_t* plan, const pw_plan_dispatch_t* pd, pw_block_layout_t* l) {
  l->ops_at = pw_align_up(sizeof(pw_execution_t), 64);
  l->cold_at = l->ops_at + plan->op_count * sizeof(pw_op_t);
  l->args_at = l->cold_at + plan->op_count * sizeof(pw_op_cold_t);
  l->outs_at = l->args_at + plan->param_count * sizeof(pw_buffer_obj_t*);
  l->ins_at = l->outs_at + pd->output_total * sizeof(pw_buffer_obj_t*);
  /* The debug mode's launch slots (unordered.c); none otherwise. */
  l->slots_at = pw_align_up(l->ins_at + pd->input_total * sizeof(pw_buffer_obj_t*), 64);
  l->internal_at = pw_align_up(l->slots_at + pd->slot_count * sizeof(pw_device_t), 64);
  l->waits_at = pw_align_up(l->internal_at + pd->internal_bytes, 16);
  l->links_at = l->waits_at + pd->param_input_total * sizeof(pw__event_node_t);
  l->queue_links_at = l->links_at + pd->link_total * sizeof(pw_atomic_ptr_t);
  l->size = l->queue_links_at + pd->link_total * sizeof(pw_op_t*);
}

/* Lays out a zeroed block for |plan|: what stays the same from run to run
 * (op links, internal values, input pointers to other ops' outputs), and
 * the graph outputs' buffers (new objects). On failure exec->output_total
 * counts the outputs made. */
pw_status_t pw__execution_lay_out(pw_execution_t* exec, const pw_plan_t* plan) {
  unsigned char* block = (unsigned char*)exec;
  pw_runtime_t* rt = exec->runtime;
  const pw_plan_dispatch_t* pd = exec->dispatch;
  const pw_block_layout_t* l = &pd->layout;
  exec->ops = (pw_op_t*)(block + l->ops_at);
  exec->op_cold = (pw_op_cold_t*)(block + l->cold_at);
  exec->args = (pw_buffer_obj_t**)(block + l->args_at);
  exec->outputs = (pw_buffer_obj_t**)(block + l->outs_at);
  pw_buffer_obj_t** input_ptrs = (pw_buffer_obj_t**)(block + l->ins_at);
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
    op->input_count = (uint16_t)p->input_count;
    op->output_count = (uint16_t)p->output_count;
    const pw_plan_op_dispatch_t* d = &pd->ops[i];
    bool guarded = pw_op_guarded(rt, d->param_inputs);
    op->flags = (uint8_t)((p->kind == PW_PLAN_TRANSFER ? PW_OP_TRANSFER : 0) |
                          (p->kind == PW_PLAN_HOST ? PW_OP_HOST : 0) |
                          (d->launch_deps == 1 && !guarded ? PW_OP_READY_ON_ONE : 0) |
                          (pw_plan_op_queued(rt, p) ? PW_OP_QUEUED : 0) |
                          (p->node_arg != 0 ? PW_OP_NODE_ARG : 0));
    op->loaded = p->kind == PW_PLAN_COMPUTE ? p->executable->loaded : NULL;
    op->successors = p->successors;
    op->successor_count = p->successor_count;
    op->has_external = p->external_count != 0;
    op->init_pending = d->launch_deps + (guarded ? 1 : 0);
    op->outputs = &exec->outputs[out_cursor];
    for (uint32_t k = 0; status == NULL && k < p->output_count; ++k) {
      const pw_array_spec_t* spec = pw_plan_output_spec(p, k);
      if (pw_plan_output_external(p, k)) {
        const pw_plan_value_t* v = &pd->values[d->output_base + k];
        status = pw__buffer_create(p->vslice, spec, v->total_bytes, v->shard_bytes,
                                   &exec->outputs[out_cursor]);
      } else {
        pw_buffer_obj_t* b = (pw_buffer_obj_t*)internal;
        internal += pw__block_internal_value_bytes(op->slice->device_count);
        b->shards = op->slice->device_count <= PW_BUFFER_INLINE_SHARDS
                        ? b->inline_shards
                        : (pw_backend_memory_t*)((unsigned char*)b +
                                                 pw_align_up(sizeof(pw_buffer_obj_t), 16));
        b->header.kind = PW_OBJECT_BUFFER;
        b->header.runtime = rt;
        b->slice = op->slice;
        b->mesh = p->vslice->mesh;
        b->spec = *spec;
        b->shard_bytes = pd->values[d->output_base + k].shard_bytes;
        b->total_bytes = pd->values[d->output_base + k].total_bytes;
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
    if (d->param_inputs > 0) {
      op->arg_waits = waits;
      waits += d->param_inputs;
    }
    pw_op_cold_t* cold = &exec->op_cold[i];
    /* A queued op also waits, to complete, for its producers in its own
     * queues (queued.c). */
    cold->queue_deps = (op->flags & PW_OP_QUEUED) ? p->static_deps - d->launch_deps : 0;
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
    for (uint32_t g = 0; g < pd->run_count; ++g) {
      uint32_t end = g + 1 < pd->run_count ? pd->runs[g + 1] : plan->op_count;
      for (uint32_t k = pd->runs[g]; k + 1 < end; ++k) {
        pw_op_t* op = &exec->ops[pd->append_order[k]];
        for (uint32_t p = 0; p < op->slice->span_count; ++p) {
          pw_atomic_init_ptr(pw_op_link_at(op, p), &exec->ops[pd->append_order[k + 1]]);
        }
      }
    }
  }
  return status;
}

/* Makes the graph outputs' buffers in a block that an earlier run of
 * |plan| laid out (their slots are NULL again: pw_execution_drop_output). */
pw_status_t pw__execution_relayout(pw_execution_t* exec, const pw_plan_t* plan) {
  const pw_plan_dispatch_t* pd = exec->dispatch;
  for (uint32_t o = 0; o < plan->output_count; ++o) {
    const pw_plan_output_t* po = &plan->outputs[o];
    if (po->param >= 0) continue;
    const pw_plan_op_t* p = &plan->ops[po->op];
    uint32_t at = pd->ops[po->op].output_base + po->output;
    pw_buffer_obj_t** slot = &exec->outputs[at];
    if (*slot == NULL) {
      const pw_plan_value_t* v = &pd->values[at];
      PW_RETURN_IF_ERROR(pw__buffer_create(p->vslice, pw_plan_output_spec(p, po->output),
                                           v->total_bytes, v->shard_bytes, slot));
    }
  }
  return NULL;
}
