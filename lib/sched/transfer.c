/* Transfer ops in the dispatcher: a device's part of a transfer is the
 * copies into its shard, one per strided plan record (or one per row for
 * a transport without copy_strided), each with its completion token
 * (sched/token.h); the part completes when the last copy does, and a
 * transport that completes a copy twice is reported, not obeyed. A
 * transfer that adds up partial sums (pw_plan_op_t.reduce > 1) copies
 * the other partial sums into scratch shards the part allocates, and the
 * party that completes its last copy adds them into the shard with the
 * backend's accumulate (synchronous, on that thread) and frees them. The
 * launch, cursor and completion protocol around it is dispatch.c's. */
#include <string.h>

#include "plugin/backend_call.h"
#include "plugin/transport_call.h"
#include "sched/dispatch_internal.h"
#include "sched/token.h"

/* Transfer ops: this device's part is the copies into its shard; the part
 * completes when the last of them does. Every copy and the launcher's
 * guard count out of transfer_pending once, so a party that reads 1 is
 * the last one and needs no locked subtraction: with an inline transport
 * the guard is last and a part of one copy pays one. */
/* Frees |d|'s scratch shards (the part's |n| devices). */
static void pw_dispatch_scratch_free(pw_device_t* d, uint32_t n) {
  const pw_backend_t* backend = d->slice->backend;
  for (uint32_t i = 0; i < n; ++i) {
    if (d->reduce_scratch[i] != NULL) {
      pw__backend_deallocate(backend, d->backend_device + i, d->reduce_scratch[i]);
    }
  }
  pw_allocator_free(d->slice->runtime->allocator, d->reduce_scratch,
                    n * sizeof(pw_backend_memory_t));
  d->reduce_scratch = NULL;
}

/* The last copy of a reducing part is done (|status| NULL: all OK): adds
 * each scratch slot into its device's shard, then frees the scratch.
 * Returns the part's status (|status|, or the first accumulate error). */
static pw_status_t pw_dispatch_reduce(pw_device_t* d, pw_status_t status) {
  pw_op_t* op = d->running;
  const pw_plan_op_t* p = op->plan;
  pw_buffer_obj_t* dst = op->outputs[0];
  const pw_backend_t* backend = op->slice->backend;
  uint32_t m0 = pw_op_mesh_index(op, d), n = d->lane_size;
  size_t bytes = dst->shard_bytes;
  size_t count = bytes / pw_dtype_size(p->transfer_spec->dtype);
  for (uint32_t i = 0; status == NULL && i < n; ++i) {
    for (uint32_t k = 1; status == NULL && k < p->reduce; ++k) {
      status = pw__backend_accumulate(backend, d->backend_device + i, p->transfer_spec->dtype,
                                      dst->shards[m0 + i], 0, d->reduce_scratch[i],
                                      (k - 1) * bytes, count);
      if (status != NULL) {
        status = pw_status_annotate(status, "adding partial sum %u of %u into mesh index %u", k,
                                    p->reduce, m0 + i);
      }
    }
  }
  pw_dispatch_scratch_free(d, n);
  return status;
}

static void pw_dispatch_copy_finished(pw_device_t* d, pw_status_t status) {
  if (status != NULL) {
    void* expected = NULL;
    if (!pw_atomic_cas_ptr(&d->transfer_status, &expected, status)) pw_status_free(status);
  }
  if (pw_atomic_load_u32_acquire(&d->transfer_pending) != 1 &&
      pw_atomic_fetch_sub_u32(&d->transfer_pending, 1) != 1) {
    return;
  }
  /* The other parties are done with transfer_status. */
  d->done_status = pw_atomic_load_ptr_acquire(&d->transfer_status);
  if (d->done_status != NULL) pw_atomic_store_ptr_relaxed(&d->transfer_status, NULL);
  if (d->reduce_scratch != NULL) d->done_status = pw_dispatch_reduce(d, d->done_status);
  PW_REPORT(d->slice->runtime, pw__report_copy_done, d, d->running, d->done_status);
  pw__dispatch_push_done(d);
}

/* A second completion of the copy whose token is |t|: reported, and not
 * counted. While this thread still issues the part's copies (its guard
 * held: the part cannot complete), the part fails with INTERNAL; later the
 * part may be over and nothing of it is touched. Consumes |status|. */
static void pw_dispatch_copied_again(void* user, pw_status_t status, const char* how) {
  pw_completion_token_t* t = pw_token_of(user);
  pw_device_t* d = t->device;
  const pw_slice_t* slice = d->slice;
  const char* transport = pw__transport_name(&slice->runtime->transport);
  char again[160];
  pw_status_format(status, again, sizeof(again));
  pw_status_free(status);
  /* |d|'s copy fields are read only on the thread that issues its part. */
  if (pw__dispatch_is_issuing(d) &&
      (uintptr_t)t - (uintptr_t)d->copy_tokens < d->copy_count * sizeof(pw_completion_token_t) &&
      pw_token_current(user)) {
    pw_status_t first = pw_atomic_exchange_ptr(&d->transfer_status, NULL);
    char first_text[160];
    pw_status_format(first, first_text, sizeof(first_text));
    pw_status_free(first);
    pw_status_t internal = pw_status_make(PW_STATUS_INTERNAL,
                                          "transport '%s' completed one copy twice: it %s "
                                          "(first completion: %s; second: %s)",
                                          transport, how, first_text, again);
    /* Another copy's error may have got in meanwhile: INTERNAL wins. */
    pw_status_free(pw_atomic_exchange_ptr(&d->transfer_status, internal));
    pw_log(&slice->runtime->logger, PW_LOG_ERROR, "dispatch",
           "transport '%s' completed one copy to slice '%s' device %u twice: it %s (%s); the "
           "transfer fails with INTERNAL",
           transport, slice->name, d->mesh_index, how, again);
    return;
  }
  pw_log(&slice->runtime->logger, PW_LOG_ERROR, "dispatch",
         "transport '%s' completed a copy to slice '%s' device %u again after its completion "
         "was counted: it %s (%s); ignored",
         transport, slice->name, d->mesh_index, how, again);
}

/* The transport's done: |user| is the copy's token. */
static void pw_dispatch_copy_done(void* user, pw_status_t status) {
  if (!pw_token_claim(user)) {
    pw_dispatch_copied_again(user, status, "called a copy's done twice");
    return;
  }
  pw_dispatch_copy_finished(pw_token_of(user)->device, status);
}

/* |n| copy tokens for |d|'s next transfer part (armed as issued): the other half of
 * its copy tokens from the last part's (so a late second completion of
 * that part's copies is still told apart), in a bigger chunk when the
 * part has more copies than a half holds (the old chunks stay, for late
 * completions, until the slice goes). NULL if that allocation fails. */
static pw_completion_token_t* pw_dispatch_copy_tokens(pw_device_t* d, uint32_t n) {
  if (n > d->copy_capacity) {
    uint32_t capacity = d->copy_capacity * 2 > n ? d->copy_capacity * 2 : (n < 8 ? 8 : n);
    pw_allocator_t allocator = d->slice->runtime->allocator;
    pw_token_chunk_t* chunk = NULL;
    size_t bytes = sizeof(pw_token_chunk_t) + 2 * (size_t)capacity * sizeof(pw_completion_token_t);
    pw_status_t status = pw_allocator_calloc(allocator, bytes, 64, (void**)&chunk);
    if (status != NULL) {
      pw_status_free(status);
      return NULL;
    }
    chunk->count = 2 * capacity;
    chunk->next = d->copy_chunk;
    for (uint32_t k = 0; k < chunk->count; ++k) {
      chunk->tokens[k].device = d;
      chunk->tokens[k].generation = 0;
      pw_atomic_init_u32(&chunk->tokens[k].state, 1);
    }
    d->copy_chunk = chunk;
    d->copy_capacity = capacity;
  }
  d->copy_half ^= 1;
  pw_completion_token_t* tokens = d->copy_chunk->tokens + d->copy_half * d->copy_capacity;
  d->copy_tokens = tokens;
  d->copy_count = n;
  return tokens;
}

/* Frees |d|'s copy tokens (at slice deinit; for a debug-mode launch slot,
 * when its part is done). */
void pw__dispatch_free_copy_tokens(pw_device_t* d, pw_allocator_t allocator) {
  for (pw_token_chunk_t* c = d->copy_chunk; c != NULL;) {
    pw_token_chunk_t* next = c->next;
    pw_allocator_free(allocator, c,
                      sizeof(pw_token_chunk_t) + c->count * sizeof(pw_completion_token_t));
    c = next;
  }
  d->copy_chunk = NULL;
  d->copy_tokens = NULL;
  d->copy_capacity = d->copy_count = d->copy_half = 0;
}

/* What a copy's issue returned: a failed copy's done must not run; one
 * that did makes this a second completion. */
static void pw_dispatch_copy_issue(pw_device_t* d, const pw_transport_copy_t* copy,
                                   pw_status_t status) {
  if (status == NULL) return;
  if (!pw_token_claim(copy->done_user)) {
    pw_dispatch_copied_again(copy->done_user, status,
                             "called a copy's done and then returned an error");
  } else {
    pw_dispatch_copy_finished(d, status);
  }
}

/* Issues |run|'s rows one copy each (|copy| holds the first row), each
 * with the next of |tokens|; returns the token after the last used. */
static pw_completion_token_t* pw_dispatch_copy_rows(pw_runtime_t* rt, pw_device_t* d,
                                                    pw_transport_copy_t* copy,
                                                    const pw_plan_copy_t* run,
                                                    pw_completion_token_t* tokens) {
  size_t idx[PW_TRANSPORT_MAX_STRIDES] = {0};
  do {
    copy->done_user = pw_token_arm(tokens++);
    pw_dispatch_copy_issue(d, copy,
                           rt->transport_copy != NULL
                               ? rt->transport_copy(rt->transport.self, copy)
                               : pw__transport_copy(&rt->transport, copy));
  } while (run->stride_count != 0 &&
           pw_transport_stride_next(run->stride_count, run->strides, idx, &copy->src.offset,
                                    &copy->dst.offset));
  return tokens;
}

/* Issues the copies of mesh index |m| (device |device|) of transfer |op|
 * into |dst|, one token each from |tokens|; returns the token after the
 * last used. */
static pw_completion_token_t* pw_dispatch_copy_into(pw_runtime_t* rt, pw_device_t* d, pw_op_t* op,
                                                    uint32_t m, uint32_t lane_index,
                                                    pw_completion_token_t* tokens) {
  uint32_t device = d->backend_device + lane_index;
  const pw_plan_op_t* p = op->plan;
  pw_buffer_obj_t* src = op->inputs[0];
  pw_buffer_obj_t* dst = op->outputs[0];
  bool strided = rt->transport_copy_strided != NULL;
  for (uint32_t c = p->copy_start[m]; c < p->copy_start[m + 1]; ++c) {
    const pw_plan_copy_t* run = &p->copies[c];
    pw_transport_copy_t copy;
    memset(&copy, 0, sizeof(copy));
    copy.struct_size = sizeof(copy);
    copy.src.backend = src->slice->backend;
    copy.src.device = src->slice->group_devices[run->src_index];
    copy.src.memory = src->shards[run->src_index];
    copy.src.offset = run->src_offset;
    copy.dst.backend = op->slice->backend;
    copy.dst.device = device;
    copy.dst.memory = dst->shards[m];
    copy.dst.offset = run->dst_offset;
    if (d->reduce_scratch != NULL && run->dst_offset >= dst->shard_bytes) {
      /* A partial sum past the first: scratch slot dst_offset / shard bytes. */
      copy.dst.memory = d->reduce_scratch[lane_index];
      copy.dst.offset = run->dst_offset - dst->shard_bytes;
    }
    copy.size = run->size;
    copy.done = pw_dispatch_copy_done;
    copy.tag = pw_op_gang_id(op);
    if (run->stride_count == 0 || !strided) {
      tokens = pw_dispatch_copy_rows(rt, d, &copy, run, tokens);
      continue;
    }
    copy.stride_count = run->stride_count;
    memcpy(copy.strides, run->strides, sizeof(copy.strides));
    copy.done_user = pw_token_arm(tokens++);
    pw_dispatch_copy_issue(d, &copy, rt->transport_copy_strided(rt->transport.self, &copy));
  }
  return tokens;
}

/* Allocates |bytes| of scratch on each of |d|'s |n| devices (a reducing
 * part's partial sums past the first). */
static pw_status_t pw_dispatch_scratch_alloc(pw_device_t* d, uint32_t n, size_t bytes) {
  pw_allocator_t allocator = d->slice->runtime->allocator;
  PW_RETURN_IF_ERROR(pw_allocator_calloc_array(allocator, n, sizeof(pw_backend_memory_t), 0,
                                               (void**)&d->reduce_scratch));
  for (uint32_t i = 0; i < n; ++i) {
    pw_status_t status = pw__backend_allocate(d->slice->backend, d->backend_device + i, bytes,
                                              &d->reduce_scratch[i]);
    if (status != NULL) {
      pw_dispatch_scratch_free(d, n);
      return pw_status_annotate(status, "scratch for %zu bytes of partial sums", bytes);
    }
  }
  return NULL;
}

/* |d|'s part of transfer |op|: the copies into the shard of each of its
 * devices (one, or a lane's, lanes.c), as one part. */
void pw__dispatch_transfer_launch(pw_device_t* d, pw_op_t* op) {
  const pw_plan_op_t* p = op->plan;
  pw_buffer_obj_t* dst = op->outputs[0];
  pw_runtime_t* rt = op->slice->runtime;
  uint32_t m0 = pw_op_mesh_index(op, d), n = d->lane_size;
  pw_slice_t* from = op->inputs[0]->slice;
  if (__builtin_expect(pw_atomic_load_u32_relaxed(&from->lost) != 0, 0)) {
    d->done_status = pw_status_make(PW_STATUS_DATA_LOSS,
                                    "the transfer's input lived on slice '%s', which is lost",
                                    from->name);
    pw__dispatch_device_done(d);
    return;
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (dst->shards[m0 + i] != NULL) continue;
    pw_status_t status = pw__backend_allocate(op->slice->backend, d->backend_device + i,
                                              dst->shard_bytes, &dst->shards[m0 + i]);
    if (status != NULL) {
      d->done_status = status;
      pw__dispatch_device_done(d);
      return;
    }
  }
  uint32_t first = p->copy_start[m0], last = p->copy_start[m0 + n];
  /* Copies this part issues: one per record, or (a transport without
   * copy_strided) one per row; each has its completion token. */
  uint64_t issued = last - first;
  if (rt->transport_copy_strided == NULL) {
    issued = 0;
    for (uint32_t c = first; c < last; ++c) {
      uint64_t rows = 1;
      for (uint32_t k = 0; k < p->copies[c].stride_count; ++k) rows *= p->copies[c].strides[k].count;
      issued += rows;
    }
    if (issued >= UINT32_MAX / 2) {
      d->done_status = pw_status_make(
          PW_STATUS_RESOURCE_EXHAUSTED,
          "transfer to mesh index %u needs %llu row copies and transport '%s' has no "
          "copy_strided",
          m0, (unsigned long long)issued, pw__transport_name(&rt->transport));
      pw__dispatch_device_done(d);
      return;
    }
  }
  pw_completion_token_t* tokens = pw_dispatch_copy_tokens(d, (uint32_t)issued);
  if (tokens == NULL) {
    d->done_status = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                                    "no memory for the completion tokens of %llu copies",
                                    (unsigned long long)issued);
    pw__dispatch_device_done(d);
    return;
  }
  if (p->reduce > 1) {
    pw_status_t status = pw_dispatch_scratch_alloc(d, n, (size_t)(p->reduce - 1) * dst->shard_bytes);
    if (status != NULL) {
      d->done_status = status;
      pw__dispatch_device_done(d);
      return;
    }
  }
  /* The guard count keeps the part from completing before the last copy
   * is issued. */
  pw_atomic_store_u32_release(&d->transfer_pending, (uint32_t)issued + 1);
  d->observed_ns = 0;
  PW_REPORT(rt, pw__report_copy, d, op);
  pw__dispatch_set_issuing(d); /* a drain is running */
  for (uint32_t i = 0; i < n; ++i) {
    tokens = pw_dispatch_copy_into(rt, d, op, m0 + i, i, tokens);
  }
  pw__dispatch_set_issuing(NULL);
  pw_dispatch_copy_finished(d, NULL); /* the guard */
}
