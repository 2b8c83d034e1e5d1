/* Plan preparation: the dispatcher's per-plan data (pw_plan_dispatch_t),
 * what every submission would otherwise recompute: the block layout and
 * its totals, each op output's byte sizes, the op lists a submission
 * visits (roots, guarded ops, rebound inputs), the append groups, the
 * per-slice completion counts, the debug mode's launch slots. Derived
 * from the const plan by its first submission (pw_plan_dispatch) and
 * published once with a CAS: two threads that submit a fresh plan at once
 * may both derive it; one publishes, the other frees its copy and uses
 * the published one. The plan's owner frees it with the plan, through the
 * destructor it carries (pw__plan_release_dispatch, lib/graph/plan.h):
 * lib/graph calls nothing here. */
#include <string.h>

#include "sched/dispatch_internal.h"

/* What sizes the dispatch data, counted in one walk of the plan. */
typedef struct pw_plan_counts_s {
  uint32_t input_total, output_total, param_inputs, link_total;
  size_t internal_bytes;
  uint32_t roots, guarded, rebind;
  uint32_t per_run_total;  /* per-run inputs of every op */
  uint32_t groups;   /* append groups */
  uint32_t homes;    /* home slices */
  size_t slots;      /* the debug mode's launch slots */
} pw_plan_counts_t;

/* Scratch of a preparation: each op's append group when groups merge
 * (else NULL; then op_count + slice_count words, the latter each slice's
 * latest group + 1), and the ops per home slice. */
typedef struct pw_plan_scratch_s {
  uint32_t* group_of;
  uint32_t* per_slice;
  uint32_t per_slice_stack[64];
} pw_plan_scratch_t;

/* The producers |p|'s launch waits for: every distinct producing op
 * (static_deps), but for a queued op only transfers and host ops, as its
 * compute producers are earlier launches in its own device queues
 * (queued.c). */
static uint32_t pw_plan_launch_deps(const pw_runtime_t* rt, const pw_plan_t* plan,
                                    const pw_plan_op_t* p) {
  (void)plan;
  return pw_plan_op_queued(rt, p) ? p->noncompute_deps : p->static_deps;
}

/* |p|'s parameter inputs; with |out_per_run| non-NULL, its per-run inputs
 * (a parameter, or another op's graph output: a new buffer at every
 * submission) are listed there; |*out_per_run_count| counts them. */
static uint32_t pw_plan_op_params(const pw_plan_t* plan, const pw_plan_op_t* p,
                                  uint32_t* out_per_run, uint32_t* out_per_run_count) {
  uint32_t params = 0, per_run = 0;
  for (uint32_t k = 0; k < p->input_count; ++k) {
    const pw_plan_input_t* in = &p->inputs[k];
    params += in->param >= 0;
    if (in->param >= 0 || pw_plan_output_external(&plan->ops[in->op], in->output)) {
      if (out_per_run != NULL) out_per_run[per_run] = k;
      per_run++;
    }
  }
  *out_per_run_count = per_run;
  return params;
}

static void pw_plan_count(const pw_runtime_t* rt, const pw_plan_t* plan, pw_plan_counts_t* c) {
  memset(c, 0, sizeof(*c));
  for (uint32_t i = 0; i < plan->op_count; ++i) {
    const pw_plan_op_t* p = &plan->ops[i];
    uint32_t span = p->vslice->slice->span_count;
    c->link_total += span > 1 ? span : 0;
    uint32_t per_run = 0;
    uint32_t params = pw_plan_op_params(plan, p, NULL, &per_run);
    c->per_run_total += per_run;
    c->input_total += p->input_count;
    c->param_inputs += params;
    c->output_total += p->output_count;
    for (uint32_t k = 0; k < p->output_count; ++k) {
      if (!pw_plan_output_external(p, k)) {
        c->internal_bytes += pw__block_internal_value_bytes(p->vslice->slice->device_count);
      }
    }
    c->roots += pw_op_is_root(rt, pw_plan_launch_deps(rt, plan, p), params);
    c->guarded += pw_op_guarded(rt, params);
    c->rebind += per_run != 0;
  }
  c->slots = pw__unordered_slots(rt, plan, NULL);
}

static void pw_plan_scratch_free(const pw_runtime_t* rt, const pw_plan_t* plan,
                                 pw_plan_scratch_t* t) {
  if (t->per_slice != NULL && t->per_slice != t->per_slice_stack) {
    pw_allocator_free(rt->allocator, t->per_slice, rt->slice_count * sizeof(uint32_t));
  }
  if (t->group_of != NULL) {
    pw_allocator_free(rt->allocator, t->group_of,
                      ((size_t)plan->op_count + rt->slice_count) * sizeof(uint32_t));
  }
}

/* Append groups. A submission appends group after group, each to its
 * slice's sequence at once. Deadlock freedom needs every producer of a
 * group's ops to be appended no later than the group (then a device can
 * only wait for ops appended before the one it waits at, on any slice: no
 * cycle of waits, whatever other submitters interleave). Taking ops in op
 * order (topological), an op joins its slice's latest group when none of
 * its producers is in a later group, else opens a new one: a 16-stage
 * pipeline gets 16 groups instead of one per run of ops, and a graph that
 * leaves a slice and comes back gets a new group there. With spanning ops
 * (a plain op and a spanning op can share devices), with a scheduler
 * window (admission is op by op) and in the debug mode, groups are runs of
 * consecutive ops on one slice. Counts them; the ops' home slices too. */
static pw_status_t pw_plan_group(const pw_runtime_t* rt, const pw_plan_t* plan,
                                 pw_plan_counts_t* c, pw_plan_scratch_t* t) {
  bool merge = c->link_total == 0 && rt->sched_window == 0 && !rt->no_gang_order;
  if (merge && plan->op_count > 0) {
    PW_RETURN_IF_ERROR(pw_allocator_calloc_array(rt->allocator,
                                                 (size_t)plan->op_count + rt->slice_count,
                                                 sizeof(uint32_t), 0, (void**)&t->group_of));
    uint32_t* latest = t->group_of + plan->op_count;
    for (uint32_t i = 0; i < plan->op_count; ++i) {
      const pw_plan_op_t* p = &plan->ops[i];
      uint32_t need = 0; /* the latest group among its producers, + 1 */
      for (uint32_t k = 0; k < p->input_count; ++k) {
        int32_t producer = p->inputs[k].op;
        if (producer >= 0 && t->group_of[producer] + 1 > need) need = t->group_of[producer] + 1;
      }
      uint32_t* mine = &latest[p->vslice->slice->index];
      if (*mine == 0 || *mine < need) *mine = ++c->groups;
      t->group_of[i] = *mine - 1;
    }
  } else {
    for (uint32_t i = 0; i < plan->op_count; ++i) {
      c->groups += i == 0 || plan->ops[i].vslice->slice != plan->ops[i - 1].vslice->slice;
    }
  }
  /* Ops per home slice (span[0]: its scheduler admits spanning ops), for
   * the per-slice completion counts (pw__execution_complete). */
  t->per_slice = t->per_slice_stack;
  if (rt->slice_count <= 64) {
    memset(t->per_slice_stack, 0, sizeof(t->per_slice_stack));
  } else {
    t->per_slice = NULL;
    PW_RETURN_IF_ERROR(pw_allocator_calloc_array(rt->allocator, rt->slice_count,
                                                 sizeof(uint32_t), 0, (void**)&t->per_slice));
  }
  for (uint32_t i = 0; i < plan->op_count; ++i) {
    if (t->per_slice[plan->ops[i].vslice->slice->span[0]->index]++ == 0) c->homes++;
  }
  return NULL;
}

static size_t pw_plan_list_words(const pw_plan_t* plan, const pw_plan_counts_t* c) {
  return (size_t)c->roots + c->guarded + c->rebind + c->groups + plan->op_count +
         2 * (size_t)c->homes + c->per_run_total;
}

/* One allocation: the struct, values, per-op data, lists, slot bases. */
static pw_status_t pw_plan_dispatch_alloc(const pw_runtime_t* rt, const pw_plan_t* plan,
                                          const pw_plan_counts_t* c, pw_plan_dispatch_t** out) {
  size_t values_at = pw_align_up(sizeof(pw_plan_dispatch_t), 16);
  size_t ops_at = values_at + c->output_total * sizeof(pw_plan_value_t);
  size_t lists_at = ops_at + plan->op_count * sizeof(pw_plan_op_dispatch_t);
  size_t slots_at = lists_at + pw_plan_list_words(plan, c) * sizeof(uint32_t);
  size_t bytes = slots_at + (c->slots != 0 ? plan->op_count * sizeof(uint32_t) : 0);
  unsigned char* at = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(rt->allocator, bytes, 16, (void**)&at));
  pw_plan_dispatch_t* pd = (pw_plan_dispatch_t*)at;
  pd->allocator = rt->allocator;
  pd->bytes = bytes;
  pd->values = (pw_plan_value_t*)(at + values_at);
  pd->ops = (pw_plan_op_dispatch_t*)(at + ops_at);
  pd->roots = (uint32_t*)(at + lists_at);
  pd->guarded = pd->roots + c->roots;
  pd->rebind = pd->guarded + c->guarded;
  pd->runs = pd->rebind + c->rebind;
  pd->append_order = pd->runs + c->groups;
  pd->home_counts = pd->append_order + plan->op_count;
  pd->per_run = pd->home_counts + 2 * (size_t)c->homes;
  pd->slot_base = c->slots != 0 ? (uint32_t*)(at + slots_at) : NULL;
  pd->slot_count = c->slots;
  pd->input_total = c->input_total;
  pd->output_total = c->output_total;
  pd->param_input_total = c->param_inputs;
  pd->internal_bytes = c->internal_bytes;
  pd->link_total = c->link_total;
  pd->run_count = c->groups;
  *out = pd;
  return NULL;
}

/* Each op's parameter inputs, per-run inputs and outputs' byte sizes. */
static pw_status_t pw_plan_fill_ops(const pw_runtime_t* rt, const pw_plan_t* plan,
                                    pw_plan_dispatch_t* pd) {
  uint32_t output_base = 0, per_run = 0;
  for (uint32_t i = 0; i < plan->op_count; ++i) {
    const pw_plan_op_t* p = &plan->ops[i];
    pw_plan_op_dispatch_t* d = &pd->ops[i];
    d->per_run_start = per_run;
    d->param_inputs = pw_plan_op_params(plan, p, pd->per_run + per_run, &d->per_run_count);
    per_run += d->per_run_count;
    d->launch_deps = pw_plan_launch_deps(rt, plan, p);
    d->output_base = output_base;
    output_base += p->output_count;
    for (uint32_t k = 0; k < p->output_count; ++k) {
      pw_plan_value_t* v = &pd->values[d->output_base + k];
      pw_status_t status = pw_array_spec_byte_sizes(pw_plan_output_spec(p, k), &p->vslice->mesh,
                                                    &v->total_bytes, &v->shard_bytes);
      if (status != NULL) {
        return pw_status_annotate(status, "graph node %u (\"%s\") output %u", p->node, p->name,
                                  k);
      }
    }
  }
  return NULL;
}

/* The op lists and the append groups (|t|: pw_plan_group's). */
static void pw_plan_fill_lists(const pw_runtime_t* rt, const pw_plan_t* plan,
                               pw_plan_dispatch_t* pd, const pw_plan_scratch_t* t) {
  uint32_t run = 0;
  for (uint32_t i = 0; i < plan->op_count; ++i) {
    const pw_plan_op_t* p = &plan->ops[i];
    uint32_t params = pd->ops[i].param_inputs;
    if (pw_op_is_root(rt, pd->ops[i].launch_deps, params)) pd->roots[pd->root_count++] = i;
    if (pw_op_guarded(rt, params)) pd->guarded[pd->guarded_count++] = i;
    if (pd->ops[i].per_run_count != 0) pd->rebind[pd->rebind_count++] = i;
    if (t->group_of != NULL) {
      pd->runs[t->group_of[i]]++; /* its size, for now */
    } else {
      if (i == 0 || p->vslice->slice != p[-1].vslice->slice) pd->runs[run++] = i;
      pd->append_order[i] = i;
    }
  }
  if (t->group_of != NULL) {
    /* Sizes to starts; place every op after its group's earlier ops (so
     * runs[g] ends as group g's end); shift back to starts. */
    uint32_t start = 0;
    for (uint32_t g = 0; g < pd->run_count; ++g) {
      uint32_t size = pd->runs[g];
      pd->runs[g] = start;
      start += size;
    }
    for (uint32_t i = 0; i < plan->op_count; ++i) {
      pd->append_order[pd->runs[t->group_of[i]]++] = i;
    }
    for (uint32_t g = pd->run_count; g-- > 0;) pd->runs[g] = g == 0 ? 0 : pd->runs[g - 1];
  }
  pd->tail_refs = 0;
  for (uint32_t g = 0; g < pd->run_count; ++g) {
    pd->tail_refs += plan->ops[pd->append_order[pd->runs[g]]].vslice->slice->span_count;
  }
  for (uint32_t k = 0; k < rt->slice_count; ++k) {
    if (t->per_slice[k] == 0) continue;
    pd->home_counts[2 * pd->home_count_n] = k;
    pd->home_counts[2 * pd->home_count_n + 1] = t->per_slice[k];
    pd->home_count_n++;
  }
}

static void pw_plan_dispatch_release(pw_plan_dispatch_header_t* header) {
  pw_plan_dispatch_t* pd = (pw_plan_dispatch_t*)header;
  pw_allocator_free(pd->allocator, pd, pd->bytes);
}

/* Derives |plan|'s dispatch data (not published). */
static pw_status_t pw_plan_dispatch_make(pw_runtime_t* rt, const pw_plan_t* plan,
                                         pw_plan_dispatch_t** out) {
  pw_plan_counts_t c;
  pw_plan_count(rt, plan, &c);
  pw_plan_scratch_t t = {NULL, NULL, {0}};
  pw_plan_dispatch_t* pd = NULL;
  pw_status_t status = pw_plan_group(rt, plan, &c, &t);
  if (status == NULL) status = pw_plan_dispatch_alloc(rt, plan, &c, &pd);
  if (status == NULL) status = pw_plan_fill_ops(rt, plan, pd);
  if (status == NULL) pw_plan_fill_lists(rt, plan, pd, &t);
  pw_plan_scratch_free(rt, plan, &t);
  if (status != NULL) {
    if (pd != NULL) pw_plan_dispatch_release(&pd->header);
    return status;
  }
  pd->header.release = pw_plan_dispatch_release;
  (void)pw__unordered_slots(rt, plan, pd->slot_base);
  pw__block_layout(plan, pd, &pd->layout);
  pd->id = pw_atomic_fetch_add_u64(&rt->next_plan_id, 1) + 1;
  *out = pd;
  return NULL;
}

pw_status_t pw__plan_dispatch_prepare(pw_runtime_t* rt, const pw_plan_t* plan,
                                      const pw_plan_dispatch_t** out) {
  pw_plan_dispatch_t* pd = NULL;
  PW_RETURN_IF_ERROR(pw_plan_dispatch_make(rt, plan, &pd));
  /* The plan is const to its users; this word is the dispatcher's. The
   * CAS publishes |pd| (release); a loser reads the winner's (acquire). */
  pw_atomic_ptr_t* slot = (pw_atomic_ptr_t*)&plan->dispatch_data;
  void* expected = NULL;
  if (pw_atomic_cas_ptr(slot, &expected, pd)) {
    *out = pd;
  } else {
    pw_plan_dispatch_release(&pd->header);
    *out = expected;
  }
  return NULL;
}
