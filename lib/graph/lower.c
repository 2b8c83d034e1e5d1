#define _POSIX_C_SOURCE 200809L
/* Lowering a graph into its pw_plan_t (kept with the graph): ops in
 * topological order with their input sources, successor lists and
 * dependency counts, transfer ops' copies (reshard.c) in the plan's copy
 * arena; pw__graph_plan (pw_graph_finalize is lib/sched/graph_submit.c). Two strategies: one pass
 * in id order when every input names an earlier node, else a topological
 * sort. The dispatcher derives its own data from the const plan (lib/sched,
 * plan.c); freeing a plan frees that data through the destructor it
 * carries (pw__plan_release_dispatch), so nothing here calls sched. */
#include <string.h>

#include "graph/graph_obj.h"

/* ---- the plan's copy arena ----------------------------------------------
 * Transfer ops' copies and copy_start come from chunks the plan owns
 * (pw_plan_t.copy_arena), handed to pw__reshard_plan as an allocator: a
 * pipeline has a transfer per stage and microbatch, and two mallocs each
 * cost more than the rest of its lowering. Freeing the newest block gives
 * it back; other frees (error paths only) wait for the plan to go. */
typedef struct pw_plan_arena_chunk_s {
  struct pw_plan_arena_chunk_s* prev;
  size_t size;                      /* of the whole chunk */
  size_t used;                      /* from the chunk's start */
  size_t last;                      /* offset of the newest block */
} pw_plan_arena_chunk_t;

#define PW_PLAN_ARENA_CHUNK 16384u

typedef struct pw_plan_arena_s {
  pw_allocator_t parent;
  pw_plan_t* plan;
} pw_plan_arena_t;

static void* pw_plan_arena_alloc(void* self, size_t size, size_t alignment) {
  pw_plan_arena_t* arena = self;
  pw_plan_arena_chunk_t* c = arena->plan->copy_arena;
  size_t header = (sizeof(*c) + 15) & ~(size_t)15;
  size_t at = c ? (c->used + alignment - 1) & ~(alignment - 1) : 0;
  if (c == NULL || at + size > c->size || at + size < at) {
    size_t want = header + alignment + size;
    if (want < size) return NULL;
    size_t chunk = want > PW_PLAN_ARENA_CHUNK ? want : PW_PLAN_ARENA_CHUNK;
    pw_plan_arena_chunk_t* fresh = arena->parent.alloc(arena->parent.self, chunk, 16);
    if (fresh == NULL) return NULL;
    fresh->prev = c;
    fresh->size = chunk;
    fresh->used = header;
    arena->plan->copy_arena = fresh;
    c = fresh;
    at = (c->used + alignment - 1) & ~(alignment - 1);
  }
  c->last = at;
  c->used = at + size;
  return (unsigned char*)c + at;
}

static void pw_plan_arena_free(void* self, void* ptr, size_t size) {
  (void)size;
  pw_plan_arena_t* arena = self;
  pw_plan_arena_chunk_t* c = arena->plan->copy_arena;
  if (c != NULL && ptr == (unsigned char*)c + c->last) c->used = c->last;
}

void pw__graph_plan_free(pw_runtime_t* rt, pw_plan_t* plan) {
  pw_allocator_t a = rt->allocator;
  for (pw_plan_arena_chunk_t* c = plan->copy_arena; c != NULL;) {
    pw_plan_arena_chunk_t* prev = c->prev;
    pw_allocator_free(a, c, c->size);
    c = prev;
  }
  if (plan->storage) pw_allocator_free(a, plan->storage, plan->storage_size);
  pw__plan_release_dispatch(plan);
  memset(plan, 0, sizeof(*plan));
}

/* A binary min-heap of node ids: the ready nodes of the topological sort.
 * Taking the smallest ready id first makes the plan follow the order in
 * which nodes were added wherever dependencies allow, so a caller controls
 * the order ops enter each slice sequence (e.g. a pipeline schedule) by
 * the order it adds them. */
static void pw_heap_push(uint32_t* heap, uint32_t* n, uint32_t id) {
  uint32_t i = (*n)++;
  while (i > 0 && heap[(i - 1) / 2] > id) {
    heap[i] = heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  heap[i] = id;
}

static uint32_t pw_heap_pop(uint32_t* heap, uint32_t* n) {
  uint32_t top = heap[0], last = heap[--(*n)], i = 0;
  for (;;) {
    uint32_t child = 2 * i + 1;
    if (child >= *n) break;
    if (child + 1 < *n && heap[child + 1] < heap[child]) ++child;
    if (heap[child] >= last) break;
    heap[i] = heap[child];
    i = child;
  }
  if (*n > 0) heap[i] = last;
  return top;
}
/* Byte offset of an array of |count| elements of |size| placed at |*at|
 * (aligned to |align|), which it then advances. */
static size_t pw_graph_place(size_t* at, size_t count, size_t size, size_t align) {
  size_t offset = (*at + align - 1) & ~(align - 1);
  *at = offset + count * size;
  return offset;
}

/* Allocates the plan's one block (pw_plan_t.storage): ops, their inputs
 * and successors (|*out_inputs|, |*out_successors|: as many as the graph
 * has inputs), outputs, parameter specs (copied) and vslices. Every op
 * node becomes an op and every input an op input, so the sizes are known
 * before lowering. Arrays get at least one element so that empty graphs
 * need no special case. */
static pw_status_t pw_graph_plan_alloc(pw_graph_obj_t* g, pw_plan_input_t** out_inputs,
                                       uint32_t** out_successors) {
  pw_plan_t* plan = &g->plan;
  uint32_t computes = g->node_count - g->param_count;
  size_t size = 0;
  size_t ops_at = pw_graph_place(&size, computes ? computes : 1, sizeof(pw_plan_op_t),
                                 _Alignof(pw_plan_op_t));
  size_t inputs_at = pw_graph_place(&size, g->input_count, sizeof(pw_plan_input_t),
                                    _Alignof(pw_plan_input_t));
  size_t succ_at = pw_graph_place(&size, g->input_count, sizeof(uint32_t), _Alignof(uint32_t));
  size_t outputs_at = pw_graph_place(&size, g->output_count, sizeof(pw_plan_output_t),
                                     _Alignof(pw_plan_output_t));
  size_t specs_at = pw_graph_place(&size, g->param_count, sizeof(pw_array_spec_t),
                                   _Alignof(pw_array_spec_t));
  size_t vslices_at = pw_graph_place(&size, g->param_count, sizeof(pw_vslice_obj_t*),
                                     _Alignof(pw_vslice_obj_t*));
  unsigned char* block = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(g->header.runtime->allocator, size, 0, (void**)&block));
  plan->storage = block;
  plan->storage_size = size;
  plan->ops = (pw_plan_op_t*)(block + ops_at);
  plan->outputs = (pw_plan_output_t*)(block + outputs_at);
  plan->param_specs = (pw_array_spec_t*)(block + specs_at);
  plan->param_vslices = (pw_vslice_obj_t**)(block + vslices_at);
  plan->param_count = g->param_count;
  plan->output_count = g->output_count;
  plan->op_count = 0; /* ops built so far, for pw__graph_plan_free on failure */
  if (g->param_count) {
    memcpy(plan->param_specs, g->param_specs, g->param_count * sizeof(pw_array_spec_t));
  }
  *out_inputs = (pw_plan_input_t*)(block + inputs_at);
  *out_successors = (uint32_t*)(block + succ_at);
  return NULL;
}

/* Writes plan op |i| for op node |id| (successors left empty, pointing at
 * |successors|) and its inputs at |input_store|; |op_of_node| maps every
 * op node it reads to its op. |dep_stamp| (one word per op, never i for an
 * op before op i is built) marks the producers counted in static_deps:
 * linear in the inputs. For a transfer, also its copies. */
static pw_status_t pw_graph_build_op(pw_graph_obj_t* g, uint32_t i, uint32_t id,
                                     const uint32_t* op_of_node, pw_plan_input_t* input_store,
                                     uint32_t* successors, uint32_t* dep_stamp) {
  pw_plan_t* plan = &g->plan;
  const pw_graph_node_t* n = pw_graph_node_at(g, id);
  pw_plan_op_t* op = &plan->ops[i];
  bool transfer = n->kind == PW_GRAPH_NODE_TRANSFER;
  const pw_graph_host_t* host = n->kind == PW_GRAPH_NODE_HOST ? &g->hosts[n->extra] : NULL;
  *op = (pw_plan_op_t){
      .kind = transfer ? PW_PLAN_TRANSFER : host ? PW_PLAN_HOST : PW_PLAN_COMPUTE,
      .node = id,
      .name = n->name,
      .executable = n->executable,
      .vslice = n->vslice,
      .node_arg = n->kind == PW_GRAPH_NODE_COMPUTE ? n->arg : 0,
      .input_count = n->input_count,
      .inputs = input_store,
      .output_count = transfer ? 1 : host ? host->output_count
                                          : n->executable->signature.output_count,
      .successors = successors,
      .host_task = host ? host->task : NULL,
      .host_specs = host ? host->specs : NULL,
  };
  plan->op_count = i + 1;
  if (op->output_count > 32) {
    pw_plan_arena_t arena = {g->header.runtime->allocator, plan};
    size_t words = ((size_t)op->output_count + 31) / 32;
    op->external_words = pw_plan_arena_alloc(&arena, words * sizeof(uint32_t), 4);
    if (op->external_words == NULL) {
      return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                            "graph node %u (\"%s\"): the graph-output bits of %u outputs", id,
                            n->name, op->output_count);
    }
    memset(op->external_words, 0, words * sizeof(uint32_t));
  }
  const pw_value_t* inputs = pw_graph_inputs(g, n);
  for (uint32_t k = 0; k < n->input_count; ++k) {
    const pw_graph_node_t* src = pw_graph_node_at(g, inputs[k].node);
    pw_plan_input_t* in = &input_store[k];
    in->output = inputs[k].output;
    if (src->kind == PW_GRAPH_NODE_PARAMETER) {
      in->param = (int32_t)src->extra;
      in->op = -1;
    } else {  /* compute, transfer or host: an op */
      in->param = -1;
      in->op = (int32_t)op_of_node[inputs[k].node];
      if (dep_stamp[in->op] != i) {
        dep_stamp[in->op] = i;
        op->static_deps++;
        op->noncompute_deps += plan->ops[in->op].kind != PW_PLAN_COMPUTE;
      }
      plan->edge_count++;
    }
  }
  if (!transfer) return NULL;
  const pw_graph_transfer_t* t = pw_graph_transfer_at(g, n->extra);
  op->transfer_spec = t->spec; /* the graph's specs do not move once finalized */
  const pw_array_spec_t* in = NULL;
  const pw_vslice_obj_t* src_vslice = NULL;
  PW_RETURN_IF_ERROR(pw__graph_value_spec(g, inputs[0], "input", UINT32_MAX, &in, &src_vslice));
  pw_graph_copy_memo_t* memo = &g->copy_memo;
  if (memo->src != in || memo->dst != t->spec ||
      !pw_mesh_shape_equal(&memo->src_mesh, &src_vslice->mesh) ||
      !pw_mesh_shape_equal(&memo->dst_mesh, &n->vslice->mesh)) {
    pw_plan_arena_t arena = {g->header.runtime->allocator, plan};
    pw_allocator_t copies = {&arena, pw_plan_arena_alloc, pw_plan_arena_free};
    memo->src = NULL; /* invalid until the copies are made */
    PW_RETURN_IF_ERROR(pw__reshard_plan(copies, in, &src_vslice->mesh, t->spec, &n->vslice->mesh,
                                        &memo->copies, &memo->copy_count, &memo->copy_start,
                                        &memo->reduce));
    memo->src = in;
    memo->dst = t->spec;
    memo->src_mesh = src_vslice->mesh;
    memo->dst_mesh = n->vslice->mesh;
  }
  op->copies = memo->copies;
  op->copy_count = memo->copy_count;
  op->copy_start = memo->copy_start;
  op->reduce = memo->reduce;
  return NULL;
}

/* Lowers a graph whose every input names an earlier node (the usual way to
 * build one). Its topological order is then the order of the node ids
 * (what the heap of pw_graph_lower_sorted yields too), there is no cycle,
 * and one pass in id order checks every op and builds it: a consumer is
 * appended to its producers' successor lists as it is built, and since a
 * consumer's inputs are taken together, a repeated producer is the last
 * successor it has. |succ_start| indexes every node's consumers. */
static pw_status_t pw_graph_lower_forward(pw_graph_obj_t* g, const uint32_t* succ_start,
                                          uint32_t* op_of_node, uint32_t* dep_stamp) {
  pw_plan_t* plan = &g->plan;
  pw_plan_input_t* input_store = NULL;
  uint32_t* succ_store = NULL;
  PW_RETURN_IF_ERROR(pw_graph_plan_alloc(g, &input_store, &succ_store));
  const void* checked[2] = {NULL, NULL};
  uint32_t ops = 0;
  for (uint32_t id = 0; id < g->node_count; ++id) {
    const pw_graph_node_t* n = pw_graph_node_at(g, id);
    if (n->kind == PW_GRAPH_NODE_PARAMETER) {
      plan->param_vslices[n->extra] = n->vslice;
      op_of_node[id] = UINT32_MAX;
      continue;
    }
    PW_RETURN_IF_ERROR(pw__graph_check_op(g, id, checked));
    uint32_t i = ops++;
    op_of_node[id] = i;
    PW_RETURN_IF_ERROR(pw_graph_build_op(g, i, id, op_of_node, input_store,
                                         succ_store + succ_start[id], dep_stamp));
    for (uint32_t k = 0; k < n->input_count; ++k) {
      int32_t p = input_store[k].op;
      if (p < 0) continue;
      pw_plan_op_t* producer = &plan->ops[p];
      if (producer->successor_count == 0 ||
          producer->successors[producer->successor_count - 1] != i) {
        producer->successors[producer->successor_count++] = i;
      }
    }
    input_store += n->input_count;
  }
  for (uint32_t o = 0; o < g->output_count; ++o) {
    const pw_array_spec_t* spec;
    const pw_vslice_obj_t* vs;
    PW_RETURN_IF_ERROR(pw__graph_value_spec(g, g->outputs[o], "graph output", o, &spec, &vs));
  }
  return NULL;
}

/* Lowers any graph: a topological sort (Kahn, smallest ready id first)
 * through a CSR consumer index (|consumer_start|, counts made prefix
 * sums), then the specs in that order, then the ops. */
static pw_status_t pw_graph_lower_sorted(pw_graph_obj_t* g, const uint32_t* consumer_start,
                                         uint32_t* op_of_node, uint32_t* dep_stamp) {
  pw_allocator_t a = g->header.runtime->allocator;
  pw_plan_t* plan = &g->plan;
  const uint32_t node_count = g->node_count;
  const uint32_t computes = node_count - g->param_count;
  /* indegree, order, ready (node_count + 1 each), consumers (inputs + 1). */
  size_t scratch_words = 3 * ((size_t)node_count + 1) + (size_t)g->input_count + 1;
  uint32_t* scratch = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(a, scratch_words * sizeof(uint32_t), 0,
                                         (void**)&scratch));
  uint32_t* indegree = scratch;
  uint32_t* order = indegree + node_count + 1;
  uint32_t* ready = order + node_count + 1;
  uint32_t* consumers = ready + node_count + 1;
  uint32_t* fill = op_of_node; /* a cursor per node, until the order is known */
  memcpy(fill, consumer_start, (size_t)node_count * sizeof(uint32_t));
  uint32_t ready_count = 0;
  for (uint32_t id = 0; id < node_count; ++id) {
    const pw_graph_node_t* n = pw_graph_node_at(g, id);
    const pw_value_t* inputs = pw_graph_inputs(g, n);
    uint32_t deg = 0;
    for (uint32_t k = 0; k < n->input_count; ++k) {
      consumers[fill[inputs[k].node]++] = id;
      deg += pw_graph_is_op(pw_graph_node_at(g, inputs[k].node)->kind);
    }
    indegree[id] = deg;
    if (deg == 0 && pw_graph_is_op(n->kind)) ready[ready_count++] = id; /* ascending: a heap */
  }
  uint32_t tail = 0;
  while (ready_count > 0) {
    uint32_t id = pw_heap_pop(ready, &ready_count);
    order[tail++] = id;
    for (uint32_t c = consumer_start[id]; c < consumer_start[id + 1]; ++c) {
      uint32_t consumer = consumers[c];
      if (--indegree[consumer] == 0) pw_heap_push(ready, &ready_count, consumer);
    }
  }
  pw_status_t status = tail != computes ? pw__graph_cycle_error(g, indegree) : NULL;
  /* Specs, producers before consumers. */
  const void* checked[2] = {NULL, NULL};
  for (uint32_t i = 0; status == NULL && i < computes; ++i) {
    status = pw__graph_check_op(g, order[i], checked);
  }
  for (uint32_t o = 0; status == NULL && o < g->output_count; ++o) {
    const pw_array_spec_t* spec;
    const pw_vslice_obj_t* vs;
    status = pw__graph_value_spec(g, g->outputs[o], "graph output", o, &spec, &vs);
  }
  pw_plan_input_t* input_store = NULL;
  uint32_t* succ_store = NULL;
  if (status == NULL) status = pw_graph_plan_alloc(g, &input_store, &succ_store);
  if (status == NULL) {
    for (uint32_t i = 0; i < computes; ++i) op_of_node[order[i]] = i;
    for (uint32_t id = 0; id < node_count; ++id) {
      const pw_graph_node_t* n = pw_graph_node_at(g, id);
      if (n->kind == PW_GRAPH_NODE_PARAMETER) {
        plan->param_vslices[n->extra] = n->vslice;
        op_of_node[id] = UINT32_MAX;
      }
    }
  }
  for (uint32_t i = 0; status == NULL && i < computes; ++i) {
    uint32_t node_id = order[i];
    status = pw_graph_build_op(g, i, node_id, op_of_node, input_store, succ_store, dep_stamp);
    if (status != NULL) break;
    input_store += plan->ops[i].input_count;
    /* Successors: distinct consumer ops. |indegree| is all zeros once the
     * sort succeeded: reuse it to stamp the consumers already taken for
     * op i (linear in fan-out). */
    uint32_t distinct = 0;
    for (uint32_t c = consumer_start[node_id]; c < consumer_start[node_id + 1]; ++c) {
      uint32_t consumer = consumers[c];
      if (indegree[consumer] == i + 1) continue;
      indegree[consumer] = i + 1;
      succ_store[distinct++] = op_of_node[consumer];
    }
    plan->ops[i].successor_count = distinct;
    succ_store += distinct;
  }
  pw_allocator_free(a, scratch, scratch_words * sizeof(uint32_t));
  return status;
}

/* Validates and lowers; called with g->lock held. One pass checks the
 * structure (every reference names a node; specs are checked in
 * topological order, once transfer outputs can be resolved), counts every
 * node's consumers and finds whether inputs only name earlier nodes. */
static pw_status_t pw_graph_lower(pw_graph_obj_t* g) {
  pw_runtime_t* rt = g->header.runtime;
  pw_allocator_t a = rt->allocator;
  pw_plan_t* plan = &g->plan;
  const uint32_t node_count = g->node_count;
  /* consumer_start (node_count + 2), op_of_node (node_count + 1),
   * dep_stamp (node_count + 1, at least one per op); on the stack for
   * small graphs. */
  size_t scratch_words = 3 * (size_t)node_count + 4;
  uint32_t stack_scratch[128];
  uint32_t* scratch = stack_scratch;
  if (scratch_words > sizeof(stack_scratch) / sizeof(stack_scratch[0])) {
    PW_RETURN_IF_ERROR(pw_allocator_malloc(a, scratch_words * sizeof(uint32_t), 0,
                                           (void**)&scratch));
  }
  uint32_t* consumer_start = scratch;
  uint32_t* op_of_node = consumer_start + node_count + 2;
  uint32_t* dep_stamp = op_of_node + node_count + 1;
  memset(consumer_start, 0, ((size_t)node_count + 2) * sizeof(uint32_t));
  memset(dep_stamp, 0xff, ((size_t)node_count + 1) * sizeof(uint32_t));
  pw_status_t status = NULL;
  bool forward = true;
  for (uint32_t id = 0; status == NULL && id < node_count; ++id) {
    const pw_graph_node_t* n = pw_graph_node_at(g, id);
    const pw_value_t* inputs = pw_graph_inputs(g, n);
    for (uint32_t k = 0; k < n->input_count; ++k) {
      uint32_t src = inputs[k].node;
      if (src >= node_count) {
        status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                                "graph node %u (\"%s\"): input %u: refers to node %u, which "
                                "does not exist (%u nodes)",
                                id, n->name, k, src, node_count);
        break;
      }
      forward &= src < id;
      consumer_start[src + 1]++;
    }
  }
  if (status == NULL) {
    for (uint32_t id = 0; id < node_count; ++id) consumer_start[id + 1] += consumer_start[id];
    status = forward ? pw_graph_lower_forward(g, consumer_start, op_of_node, dep_stamp)
                     : pw_graph_lower_sorted(g, consumer_start, op_of_node, dep_stamp);
  }
  for (uint32_t o = 0; status == NULL && o < g->output_count; ++o) {
    const pw_graph_node_t* src = pw_graph_node_at(g, g->outputs[o].node);
    pw_plan_output_t* out = &plan->outputs[o];
    out->output = g->outputs[o].output;
    if (src->kind == PW_GRAPH_NODE_PARAMETER) {
      out->param = (int32_t)src->extra;
      out->op = -1;
    } else {
      out->param = -1;
      out->op = (int32_t)op_of_node[g->outputs[o].node];
      pw_plan_op_t* p = &plan->ops[out->op];
      uint32_t* words = p->output_count <= 32 ? &p->external_bits : p->external_words;
      uint32_t bit = 1u << (out->output & 31);
      if (!(words[out->output >> 5] & bit)) {
        words[out->output >> 5] |= bit;
        p->external_count++;
      }
    }
  }
  memset(&g->copy_memo, 0, sizeof(g->copy_memo));
  if (scratch != stack_scratch) pw_allocator_free(a, scratch, scratch_words * sizeof(uint32_t));
  if (status != NULL) pw__graph_plan_free(rt, plan);
  return status;
}

static pw_status_t pw_graph_finalize_locked(pw_graph_obj_t* g) {
  if (g->finalized) return NULL;
  PW_RETURN_IF_ERROR(pw_graph_lower(g));
  g->finalized = true;
  pw_atomic_store_u32_release(&g->planned, 1);
  return NULL;
}

pw_status_t pw__graph_plan(pw_client_t* client, struct pw_graph_obj_s* graph,
                           const pw_plan_t** out_plan) {
  (void)client;
  if (pw_atomic_load_u32_acquire(&graph->planned)) {
    *out_plan = &graph->plan;
    return NULL;
  }
  pthread_mutex_lock(&graph->lock);
  pw_status_t status = pw_graph_finalize_locked(graph);
  pthread_mutex_unlock(&graph->lock);
  *out_plan = status == NULL ? &graph->plan : NULL;
  return status;
}

