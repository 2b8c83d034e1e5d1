#define _POSIX_C_SOURCE 200809L
/* Graph builder, validation and lowering into a plan.
 *
 * Nodes are stored as added. Handles (vslices, executables) are resolved at
 * add time, so a released or foreign handle is rejected right there; the
 * structure (unknown nodes, specs against signatures, slices, cycles) is
 * checked by finalize, which then lowers the graph into a pw_plan_t kept
 * with the graph: ops in topological order with their input sources,
 * successor lists and dependency counts. */
#include <stdio.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "runtime/objects.h"

typedef enum pw_graph_node_kind_e {
  PW_GRAPH_NODE_PARAMETER = 1,
  PW_GRAPH_NODE_COMPUTE = 2,
  PW_GRAPH_NODE_TRANSFER = 3,
} pw_graph_node_kind_t;

/* Compute and transfer nodes become ops of the plan. */
static bool pw_graph_is_op(pw_graph_node_kind_t kind) {
  return kind == PW_GRAPH_NODE_COMPUTE || kind == PW_GRAPH_NODE_TRANSFER;
}

typedef struct pw_graph_node_s {
  pw_graph_node_kind_t kind;
  char name[64];
  pw_vslice_obj_t* vslice;          /* retained */
  pw_executable_obj_t* executable;  /* retained (compute) */
  pw_array_spec_t spec;             /* parameter; transfer: resolved output */
  pw_sharding_t transfer_sharding;  /* transfer: the destination sharding */
  uint32_t param_index;
  uint32_t input_count;
  pw_value_t inputs[PW_BACKEND_MAX_PARAMS];
} pw_graph_node_t;

typedef struct pw_graph_obj_s {
  /* Every submission retains and releases the graph: its own cache line
   * (the object is allocated aligned), so that threads submitting their
   * own graphs do not false-share neighbouring objects' counts. */
  _Alignas(PW_CACHE_LINE) pw_object_t header;
  pthread_mutex_t lock;
  pw_graph_node_t* nodes;
  uint32_t node_count;
  uint32_t node_capacity;
  pw_value_t* outputs;
  uint32_t output_count;
  uint32_t output_capacity;
  uint32_t param_count;
  bool finalized;
  /* Set (release) once |plan| is built, and never cleared: submitters read
   * the plan without taking |lock|. */
  pw_atomic_u32_t planned;
  pw_plan_t plan;
} pw_graph_obj_t;

#define PW_GRAPH_MAX_NODES (1u << 24)
/* Plan arrays are allocated with at least one element so that empty graphs
 * need no special case; frees use the same rounding. */
#define PW_NZ(n) ((size_t)((n) ? (n) : 1))

static void pw_plan_free(pw_runtime_t* rt, pw_plan_t* plan) {
  pw_allocator_t a = rt->allocator;
  for (uint32_t i = 0; plan->ops && i < plan->op_count; ++i) {
    pw_plan_op_t* op = &plan->ops[i];
    pw_allocator_free(a, op->successors, op->successor_count * sizeof(uint32_t));
    pw_allocator_free(a, op->copies, op->copy_count * sizeof(pw_plan_copy_t));
    if (op->copy_start) {
      pw_allocator_free(a, op->copy_start,
                        (op->vslice->slice->device_count + 1) * sizeof(uint32_t));
    }
  }
  if (plan->ops) pw_allocator_free(a, plan->ops, PW_NZ(plan->op_count) * sizeof(pw_plan_op_t));
  if (plan->outputs) {
    pw_allocator_free(a, plan->outputs, PW_NZ(plan->output_count) * sizeof(pw_plan_output_t));
  }
  if (plan->param_specs) {
    pw_allocator_free(a, plan->param_specs, PW_NZ(plan->param_count) * sizeof(pw_array_spec_t));
  }
  if (plan->param_vslices) {
    pw_allocator_free(a, plan->param_vslices,
                      PW_NZ(plan->param_count) * sizeof(pw_vslice_obj_t*));
  }
  pw__dispatch_plan_release(rt, plan);
  memset(plan, 0, sizeof(*plan));
}

static void pw_graph_destroy(pw_object_t* object) {
  pw_graph_obj_t* g = (pw_graph_obj_t*)object;
  pw_runtime_t* rt = object->runtime;
  pw_plan_free(rt, &g->plan);
  for (uint32_t i = 0; i < g->node_count; ++i) {
    pw__object_release(g->nodes[i].vslice ? &g->nodes[i].vslice->header : NULL);
    pw__object_release(g->nodes[i].executable ? &g->nodes[i].executable->header : NULL);
  }
  pw_allocator_free(rt->allocator, g->nodes, g->node_capacity * sizeof(pw_graph_node_t));
  pw_allocator_free(rt->allocator, g->outputs, g->output_capacity * sizeof(pw_value_t));
  pthread_mutex_destroy(&g->lock);
  pw_allocator_free(rt->allocator, g, sizeof(*g));
}

pw_status_t pw_graph_create(pw_client_t* client, pw_graph_t* out_graph) {
  if (client == NULL || out_graph == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_graph_create: client or out_graph is NULL");
  }
  out_graph->id = 0;
  pw_runtime_t* rt = client->runtime;
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(rt->allocator, sizeof(*g), PW_CACHE_LINE, (void**)&g));
  pw__object_init(&g->header, PW_OBJECT_GRAPH, rt, pw_graph_destroy);
  pthread_mutex_init(&g->lock, NULL);
  return pw__handle_insert(client, &g->header, &out_graph->id);
}

static pw_status_t pw_graph_get(pw_client_t* client, pw_graph_t graph,
                                pw_graph_obj_t** out) {
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "client is NULL");
  }
  return pw__handle_lookup(client, graph.id, PW_OBJECT_GRAPH, "graph", (pw_object_t**)out);
}

/* Grows |*array| (of |*capacity| elements of |size|) to hold one more. */
static pw_status_t pw_graph_grow(pw_runtime_t* rt, void** array, uint32_t* capacity,
                                 uint32_t count, size_t size) {
  if (count < *capacity) return NULL;
  if (count >= PW_GRAPH_MAX_NODES) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "graph already has %u entries (maximum %u)", count,
                          PW_GRAPH_MAX_NODES);
  }
  uint32_t next = *capacity ? *capacity * 2 : 8;
  void* grown = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(rt->allocator, next * size, 0, &grown));
  if (count) memcpy(grown, *array, count * size);
  pw_allocator_free(rt->allocator, *array, *capacity * size);
  *array = grown;
  *capacity = next;
  return NULL;
}

/* Copies |name| into a node's name field, truncated as snprintf would
 * (without its cost: this runs once per node added). */
static void pw_graph_copy_name(char (*dst)[64], const char* name) {
  size_t n = strnlen(name, sizeof(*dst) - 1);
  memcpy(*dst, name, n);
  (*dst)[n] = '\0';
}

/* Locks |g| for a modification; fails if it is already finalized. */
static pw_status_t pw_graph_begin_edit(pw_graph_obj_t* g, const char* what) {
  pthread_mutex_lock(&g->lock);
  if (g->finalized) {
    pthread_mutex_unlock(&g->lock);
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "%s: the graph is finalized (it was submitted or "
                          "pw_graph_finalize was called); build a new graph",
                          what);
  }
  return NULL;
}

/* Appends |node| (its vslice and executable references move into the
 * graph on success; on failure the caller still owns them). Parameters get
 * the next parameter index and a default name. */
static pw_status_t pw_graph_append(pw_graph_obj_t* g, const char* what, pw_graph_node_t* node,
                                   uint32_t* out_node) {
  PW_RETURN_IF_ERROR(pw_graph_begin_edit(g, what));
  pw_status_t status = pw_graph_grow(g->header.runtime, (void**)&g->nodes, &g->node_capacity,
                                     g->node_count, sizeof(pw_graph_node_t));
  if (status == NULL) {
    if (node->kind == PW_GRAPH_NODE_PARAMETER) {
      node->param_index = g->param_count++;
      snprintf(node->name, sizeof(node->name), "param%u", node->param_index);
    }
    g->nodes[g->node_count] = *node;
    if (out_node) *out_node = g->node_count;
    g->node_count++;
  }
  pthread_mutex_unlock(&g->lock);
  return status;
}

/* Common tail of the add functions: appends |node| if |status| is OK and
 * drops whatever references did not move into the graph. */
static pw_status_t pw_graph_add_node(pw_graph_obj_t* g, const char* what, pw_status_t status,
                                     pw_graph_node_t* node, uint32_t* out_node) {
  if (status == NULL) status = pw_graph_append(g, what, node, out_node);
  if (status != NULL) {
    pw__object_release(node->vslice ? &node->vslice->header : NULL);
    pw__object_release(node->executable ? &node->executable->header : NULL);
  }
  pw__object_release(&g->header);
  return status;
}

pw_status_t pw_graph_add_parameter(pw_client_t* client, pw_graph_t graph,
                                   pw_vslice_t vslice, const pw_array_spec_t* spec,
                                   uint32_t* out_node) {
  if (spec == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_graph_add_parameter: spec is NULL");
  }
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, &g));
  pw_graph_node_t node;
  memset(&node, 0, sizeof(node));
  node.kind = PW_GRAPH_NODE_PARAMETER;
  node.spec = *spec;
  pw_status_t status = pw__handle_lookup(client, vslice.id, PW_OBJECT_VSLICE, "vslice",
                                         (pw_object_t**)&node.vslice);
  if (status == NULL) {
    status = pw_array_spec_check(spec, &node.vslice->mesh);
    if (status) status = pw_status_annotate(status, "parameter %u", g->param_count);
  }
  return pw_graph_add_node(g, "pw_graph_add_parameter", status, &node, out_node);
}

pw_status_t pw_graph_add_compute(pw_client_t* client, pw_graph_t graph, const char* name,
                                 pw_executable_t executable, pw_vslice_t vslice,
                                 const pw_value_t* inputs, uint32_t input_count,
                                 uint32_t* out_node) {
  if (input_count > PW_BACKEND_MAX_PARAMS) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_graph_add_compute: %u inputs (maximum %d)", input_count,
                          PW_BACKEND_MAX_PARAMS);
  }
  if (input_count > 0 && inputs == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_graph_add_compute: inputs is NULL");
  }
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, &g));
  pw_graph_node_t node;
  memset(&node, 0, sizeof(node));
  node.kind = PW_GRAPH_NODE_COMPUTE;
  node.input_count = input_count;
  if (input_count) memcpy(node.inputs, inputs, input_count * sizeof(pw_value_t));
  pw_status_t status = pw__handle_lookup(client, vslice.id, PW_OBJECT_VSLICE, "vslice",
                                         (pw_object_t**)&node.vslice);
  if (status == NULL) {
    status = pw__handle_lookup(client, executable.id, PW_OBJECT_EXECUTABLE, "executable",
                               (pw_object_t**)&node.executable);
  }
  if (status == NULL) {
    pw_graph_copy_name(&node.name, name && name[0] ? name : node.executable->signature.name);
  }
  return pw_graph_add_node(g, "pw_graph_add_compute", status, &node, out_node);
}

pw_status_t pw_graph_add_transfer(pw_client_t* client, pw_graph_t graph, const char* name,
                                  pw_value_t input, pw_vslice_t vslice,
                                  pw_sharding_t sharding, uint32_t* out_node) {
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, &g));
  pw_graph_node_t node;
  memset(&node, 0, sizeof(node));
  node.kind = PW_GRAPH_NODE_TRANSFER;
  node.input_count = 1;
  node.inputs[0] = input;
  node.transfer_sharding = sharding;
  pw_graph_copy_name(&node.name, name && name[0] ? name : "transfer");
  pw_status_t status = pw__handle_lookup(client, vslice.id, PW_OBJECT_VSLICE, "vslice",
                                         (pw_object_t**)&node.vslice);
  if (status == NULL && sharding.kind != PW_SHARDING_REPLICATED &&
      sharding.kind != PW_SHARDING_SPLIT) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "pw_graph_add_transfer: unknown sharding kind %d", (int)sharding.kind);
  }
  return pw_graph_add_node(g, "pw_graph_add_transfer", status, &node, out_node);
}

pw_status_t pw_graph_add_output(pw_client_t* client, pw_graph_t graph, pw_value_t value) {
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, &g));
  pw_status_t status = pw_graph_begin_edit(g, "pw_graph_add_output");
  if (status == NULL) {
    status = pw_graph_grow(g->header.runtime, (void**)&g->outputs, &g->output_capacity,
                           g->output_count, sizeof(pw_value_t));
    if (status == NULL) g->outputs[g->output_count++] = value;
    pthread_mutex_unlock(&g->lock);
  }
  pw__object_release(&g->header);
  return status;
}

/* ---- validation --------------------------------------------------------- */

/* The label of an error: |what|, followed by |index| unless it is
 * UINT32_MAX ("input 2"). Formatted only when there is an error. */
static void pw_graph_label(char* buf, size_t size, const char* what, uint32_t index) {
  if (index == UINT32_MAX) {
    snprintf(buf, size, "%s", what);
  } else {
    snprintf(buf, size, "%s %u", what, index);
  }
}

/* The spec and physical slice of |value|, or an error naming |what| (and
 * |index|, see pw_graph_label). */
static pw_status_t pw_graph_value_spec(const pw_graph_obj_t* g, pw_value_t value,
                                       const char* what, uint32_t index,
                                       const pw_array_spec_t** out_spec,
                                       const pw_vslice_obj_t** out_vslice) {
  char label[48];
  if (value.node >= g->node_count) {
    pw_graph_label(label, sizeof(label), what, index);
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: refers to node %u, which does not exist (%u nodes)", label,
                          value.node, g->node_count);
  }
  const pw_graph_node_t* src = &g->nodes[value.node];
  if (src->kind == PW_GRAPH_NODE_PARAMETER) {
    if (value.output != 0) {
      pw_graph_label(label, sizeof(label), what, index);
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%s: refers to output %u of parameter node %u, which has "
                            "only output 0",
                            label, value.output, value.node);
    }
    *out_spec = &src->spec;
  } else if (src->kind == PW_GRAPH_NODE_TRANSFER) {
    if (value.output != 0) {
      pw_graph_label(label, sizeof(label), what, index);
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%s: refers to output %u of transfer node %u (\"%s\"), which has "
                            "only output 0",
                            label, value.output, value.node, src->name);
    }
    *out_spec = &src->spec;
  } else {
    const pw_executable_signature_t* sig = &src->executable->signature;
    if (value.output >= sig->output_count) {
      pw_graph_label(label, sizeof(label), what, index);
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%s: refers to output %u of node %u (\"%s\"), which has %u "
                            "outputs",
                            label, value.output, value.node, src->name, sig->output_count);
    }
    *out_spec = &sig->outputs[value.output];
  }
  *out_vslice = src->vslice;
  return NULL;
}

static pw_status_t pw_graph_check_compute(const pw_graph_obj_t* g, uint32_t id) {
  const pw_graph_node_t* n = &g->nodes[id];
  const pw_executable_signature_t* sig = &n->executable->signature;
  if (n->executable->backend != n->vslice->slice->backend) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "executable '%s' was compiled for another backend than the "
                          "one of slice '%s'",
                          sig->name, n->vslice->slice->name);
  }
  if (!pw_mesh_shape_equal(&sig->mesh, &n->vslice->mesh)) {
    char a[32], b[32];
    pw_mesh_shape_format(&sig->mesh, a, sizeof(a));
    pw_mesh_shape_format(&n->vslice->mesh, b, sizeof(b));
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "executable '%s' is compiled for mesh %s, the node's virtual "
                          "slice has mesh %s",
                          sig->name, a, b);
  }
  if (n->input_count != sig->input_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%u inputs given, executable '%s' takes %u", n->input_count,
                          sig->name, sig->input_count);
  }
  for (uint32_t i = 0; i < n->input_count; ++i) {
    const pw_array_spec_t* spec = NULL;
    const pw_vslice_obj_t* src_vslice = NULL;
    PW_RETURN_IF_ERROR(pw_graph_value_spec(g, n->inputs[i], "input", i, &spec, &src_vslice));
    if (src_vslice->slice != n->vslice->slice ||
        !pw_mesh_shape_equal(&src_vslice->mesh, &n->vslice->mesh)) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "input %u lives on slice '%s', the node runs on slice '%s' "
                            "(moving data between slices needs a transfer node)",
                            i, src_vslice->slice->name, n->vslice->slice->name);
    }
    if (!pw_array_spec_equal(spec, &sig->inputs[i])) {
      char have[160], want[160];
      pw_array_spec_format(spec, have, sizeof(have));
      pw_array_spec_format(&sig->inputs[i], want, sizeof(want));
      const char* what_differs =
          spec->dtype != sig->inputs[i].dtype                     ? "dtype"
          : !pw_shape_equal(&spec->shape, &sig->inputs[i].shape)  ? "shape"
                                                                  : "sharding";
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "input %u %s mismatch: has %s, executable '%s' expects %s", i,
                            what_differs, have, sig->name, want);
    }
  }
  return NULL;
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

/* Resolves a transfer node's output spec (its input's dtype and shape,
 * the destination sharding over the destination mesh). */
static pw_status_t pw_graph_resolve_transfer(pw_graph_obj_t* g, uint32_t id) {
  pw_graph_node_t* n = &g->nodes[id];
  const pw_array_spec_t* in = NULL;
  const pw_vslice_obj_t* src_vslice = NULL;
  PW_RETURN_IF_ERROR(pw_graph_value_spec(g, n->inputs[0], "input", UINT32_MAX, &in, &src_vslice));
  n->spec = *in;
  n->spec.sharding = n->transfer_sharding;
  PW_RETURN_IF_ERROR_CTX(pw_sharding_check(&n->spec.sharding, &n->spec.shape, &n->vslice->mesh),
                         "destination sharding on slice '%s'", n->vslice->slice->name);
  return NULL;
}

/* Checks that every input of op node |id| names an existing node and
 * output (structure only; specs are checked in topological order). */
static pw_status_t pw_graph_check_refs(const pw_graph_obj_t* g, uint32_t id) {
  const pw_graph_node_t* n = &g->nodes[id];
  for (uint32_t k = 0; k < n->input_count; ++k) {
    pw_value_t v = n->inputs[k];
    if (v.node >= g->node_count) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "input %u: refers to node %u, which does not exist (%u nodes)", k,
                            v.node, g->node_count);
    }
  }
  return NULL;
}

/* Describes a cycle among the compute nodes left with unresolved inputs
 * after the topological sort: walks producer links from one of them until
 * a node repeats. */
static pw_status_t pw_graph_cycle_error(const pw_graph_obj_t* g, const uint32_t* indegree) {
  uint32_t start = 0;
  while (indegree[start] == 0) ++start;
  /* Walk at most node_count steps; remember the step at which each node was
   * visited to cut the path at the repeat. Reuse a small fixed text. */
  char path[512];
  size_t len = 0;
  uint32_t cur = start;
  uint32_t steps = 0;
  uint32_t seen_at_start = UINT32_MAX;
  /* First find a node that is certainly on the cycle: walk node_count steps. */
  for (uint32_t i = 0; i < g->node_count; ++i) {
    const pw_graph_node_t* n = &g->nodes[cur];
    for (uint32_t k = 0; k < n->input_count; ++k) {
      uint32_t p = n->inputs[k].node;
      if (pw_graph_is_op(g->nodes[p].kind) && indegree[p] != 0) {
        cur = p;
        break;
      }
    }
  }
  seen_at_start = cur;
  do {
    const pw_graph_node_t* n = &g->nodes[cur];
    int w = snprintf(path + len, sizeof(path) - len, "%s%u (\"%s\")", steps ? " <- " : "",
                     cur, n->name);
    if (w > 0) len = len + (size_t)w < sizeof(path) ? len + (size_t)w : sizeof(path) - 1;
    for (uint32_t k = 0; k < n->input_count; ++k) {
      uint32_t p = n->inputs[k].node;
      if (pw_graph_is_op(g->nodes[p].kind) && indegree[p] != 0) {
        cur = p;
        break;
      }
    }
    ++steps;
  } while (cur != seen_at_start && steps < g->node_count);
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                        "graph has a cycle: node %s <- node %u", path, seen_at_start);
}

/* Validates and lowers; called with g->lock held. */
static pw_status_t pw_graph_lower(pw_graph_obj_t* g) {
  pw_runtime_t* rt = g->header.runtime;
  pw_allocator_t a = rt->allocator;
  pw_plan_t* plan = &g->plan;
  /* Structure first (every reference names a node); specs are checked in
   * topological order below, once transfer outputs can be resolved. */
  for (uint32_t id = 0; id < g->node_count; ++id) {
    if (!pw_graph_is_op(g->nodes[id].kind)) continue;
    PW_RETURN_IF_ERROR_CTX(pw_graph_check_refs(g, id), "graph node %u (\"%s\")", id,
                           g->nodes[id].name);
  }

  /* Topological order over compute nodes (Kahn). indegree counts inputs
   * fed by compute nodes; order[] collects node ids. */
  uint32_t* indegree = NULL;
  uint32_t* order = NULL;
  uint32_t* op_of_node = NULL;
  pw_status_t status = pw_allocator_calloc_array(a, g->node_count + 1, sizeof(uint32_t), 0,
                                                 (void**)&indegree);
  if (status == NULL) {
    status = pw_allocator_calloc_array(a, g->node_count + 1, sizeof(uint32_t), 0,
                                       (void**)&order);
  }
  if (status == NULL) {
    status = pw_allocator_calloc_array(a, g->node_count + 1, sizeof(uint32_t), 0,
                                       (void**)&op_of_node);
  }
  uint32_t computes = 0, tail = 0, ready_count = 0;
  uint32_t* ready = NULL;
  if (status == NULL) {
    status = pw_allocator_calloc_array(a, g->node_count + 1, sizeof(uint32_t), 0,
                                       (void**)&ready);
  }
  if (status == NULL) {
    for (uint32_t id = 0; id < g->node_count; ++id) {
      const pw_graph_node_t* n = &g->nodes[id];
      if (!pw_graph_is_op(n->kind)) continue;
      computes++;
      for (uint32_t k = 0; k < n->input_count; ++k) {
        if (pw_graph_is_op(g->nodes[n->inputs[k].node].kind)) indegree[id]++;
      }
      if (indegree[id] == 0) pw_heap_push(ready, &ready_count, id);
    }
    /* Consumers are found by scanning: O(nodes * inputs) per pop would be
     * quadratic, so build a CSR consumer index first. */
  }
  uint32_t* consumer_start = NULL;
  uint32_t* consumers = NULL;
  uint32_t edge_total = 0;
  if (status == NULL) {
    for (uint32_t id = 0; id < g->node_count; ++id) edge_total += g->nodes[id].input_count;
    status = pw_allocator_calloc_array(a, g->node_count + 2, sizeof(uint32_t), 0,
                                       (void**)&consumer_start);
    if (status == NULL) {
      status = pw_allocator_calloc_array(a, edge_total + 1, sizeof(uint32_t), 0,
                                         (void**)&consumers);
    }
  }
  if (status == NULL) {
    for (uint32_t id = 0; id < g->node_count; ++id) {
      for (uint32_t k = 0; k < g->nodes[id].input_count; ++k) {
        consumer_start[g->nodes[id].inputs[k].node + 1]++;
      }
    }
    for (uint32_t id = 0; id < g->node_count; ++id) consumer_start[id + 1] += consumer_start[id];
    uint32_t* fill = op_of_node; /* reuse as a cursor array temporarily */
    for (uint32_t id = 0; id < g->node_count; ++id) fill[id] = consumer_start[id];
    for (uint32_t id = 0; id < g->node_count; ++id) {
      for (uint32_t k = 0; k < g->nodes[id].input_count; ++k) {
        consumers[fill[g->nodes[id].inputs[k].node]++] = id;
      }
    }
    while (ready_count > 0) {
      uint32_t id = pw_heap_pop(ready, &ready_count);
      order[tail++] = id;
      for (uint32_t c = consumer_start[id]; c < consumer_start[id + 1]; ++c) {
        uint32_t consumer = consumers[c];
        if (--indegree[consumer] == 0) pw_heap_push(ready, &ready_count, consumer);
      }
    }
    if (tail != computes) status = pw_graph_cycle_error(g, indegree);
  }
  /* Specs, producers before consumers. */
  for (uint32_t i = 0; status == NULL && i < computes; ++i) {
    uint32_t id = order[i];
    status = g->nodes[id].kind == PW_GRAPH_NODE_TRANSFER ? pw_graph_resolve_transfer(g, id)
                                                          : pw_graph_check_compute(g, id);
    if (status) status = pw_status_annotate(status, "graph node %u (\"%s\")", id, g->nodes[id].name);
  }
  for (uint32_t o = 0; status == NULL && o < g->output_count; ++o) {
    const pw_array_spec_t* spec;
    const pw_vslice_obj_t* vs;
    status = pw_graph_value_spec(g, g->outputs[o], "graph output", o, &spec, &vs);
  }

  /* Build the plan. */
  if (status == NULL) {
    plan->param_count = g->param_count;
    plan->op_count = computes;
    plan->output_count = g->output_count;
    status = pw_allocator_calloc_array(a, PW_NZ(g->param_count), sizeof(pw_array_spec_t), 0,
                                       (void**)&plan->param_specs);
    if (status == NULL) {
      status = pw_allocator_calloc_array(a, PW_NZ(g->param_count), sizeof(pw_vslice_obj_t*), 0,
                                         (void**)&plan->param_vslices);
    }
    if (status == NULL) {
      status = pw_allocator_calloc_array(a, PW_NZ(computes), sizeof(pw_plan_op_t), 0,
                                         (void**)&plan->ops);
    }
    if (status == NULL) {
      status = pw_allocator_calloc_array(a, PW_NZ(g->output_count), sizeof(pw_plan_output_t), 0,
                                         (void**)&plan->outputs);
    }
    if (status == NULL) {
      for (uint32_t i = 0; i < g->node_count; ++i) op_of_node[i] = UINT32_MAX;
      for (uint32_t i = 0; i < computes; ++i) op_of_node[order[i]] = i;
      for (uint32_t id = 0; id < g->node_count; ++id) {
        const pw_graph_node_t* n = &g->nodes[id];
        if (n->kind == PW_GRAPH_NODE_PARAMETER) {
          plan->param_specs[n->param_index] = n->spec;
          plan->param_vslices[n->param_index] = n->vslice;
        }
      }
      for (uint32_t i = 0; status == NULL && i < computes; ++i) {
        const pw_graph_node_t* n = &g->nodes[order[i]];
        pw_plan_op_t* op = &plan->ops[i];
        op->node = order[i];
        op->name = n->name;
        op->executable = n->executable;
        op->vslice = n->vslice;
        op->input_count = n->input_count;
        if (n->kind == PW_GRAPH_NODE_TRANSFER) {
          op->kind = PW_PLAN_TRANSFER;
          op->output_count = 1;
          op->transfer_spec = n->spec;
          const pw_array_spec_t* in = NULL;
          const pw_vslice_obj_t* src_vslice = NULL;
          status = pw_graph_value_spec(g, n->inputs[0], "input", UINT32_MAX, &in, &src_vslice);
          if (status == NULL) {
            status = pw__reshard_plan(a, in, &src_vslice->mesh, &n->spec, &n->vslice->mesh,
                                      &op->copies, &op->copy_count, &op->copy_start);
          }
        } else {
          op->kind = PW_PLAN_COMPUTE;
          op->output_count = n->executable->signature.output_count;
        }
        uint32_t deps_seen[PW_BACKEND_MAX_PARAMS];
        for (uint32_t k = 0; k < n->input_count; ++k) {
          const pw_graph_node_t* src = &g->nodes[n->inputs[k].node];
          pw_plan_input_t* in = &op->inputs[k];
          in->output = n->inputs[k].output;
          if (src->kind == PW_GRAPH_NODE_PARAMETER) {
            in->param = (int32_t)src->param_index;
            in->op = -1;
          } else {  /* compute or transfer: an op */
            in->param = -1;
            in->op = (int32_t)op_of_node[n->inputs[k].node];
            bool dup = false;
            for (uint32_t j = 0; j < op->static_deps; ++j) dup |= deps_seen[j] == (uint32_t)in->op;
            if (!dup) deps_seen[op->static_deps++] = (uint32_t)in->op;
            plan->edge_count++;
          }
        }
        /* Successors: distinct consumer ops, deduplicated in place in the
         * consumer index, then copied into an exact-size array. */
        uint32_t node_id = order[i];
        uint32_t* span = consumers + consumer_start[node_id];
        uint32_t span_len = consumer_start[node_id + 1] - consumer_start[node_id];
        /* |indegree| is all zeros once the sort succeeded: reuse it to
         * stamp the consumers already taken for op i (linear in fan-out). */
        uint32_t distinct = 0;
        for (uint32_t c = 0; c < span_len; ++c) {
          uint32_t consumer = span[c];
          if (indegree[consumer] == i + 1) continue;
          indegree[consumer] = i + 1;
          span[distinct++] = op_of_node[consumer];
        }
        if (distinct > 0) {
          status = pw_allocator_malloc(a, distinct * sizeof(uint32_t), 0,
                                       (void**)&op->successors);
          if (status == NULL) {
            memcpy(op->successors, span, distinct * sizeof(uint32_t));
            op->successor_count = distinct;
          }
        }
      }
      for (uint32_t o = 0; status == NULL && o < g->output_count; ++o) {
        const pw_graph_node_t* src = &g->nodes[g->outputs[o].node];
        pw_plan_output_t* out = &plan->outputs[o];
        out->output = g->outputs[o].output;
        if (src->kind == PW_GRAPH_NODE_PARAMETER) {
          out->param = (int32_t)src->param_index;
          out->op = -1;
        } else {
          out->param = -1;
          out->op = (int32_t)op_of_node[g->outputs[o].node];
          plan->ops[out->op].external_outputs |= 1u << out->output;
        }
      }
      if (status == NULL) status = pw__dispatch_plan_prepare(rt, plan);
    }
  }
  pw_allocator_free(a, consumers, (edge_total + 1) * sizeof(uint32_t));
  pw_allocator_free(a, consumer_start, (g->node_count + 2) * sizeof(uint32_t));
  pw_allocator_free(a, op_of_node, (g->node_count + 1) * sizeof(uint32_t));
  pw_allocator_free(a, order, (g->node_count + 1) * sizeof(uint32_t));
  pw_allocator_free(a, indegree, (g->node_count + 1) * sizeof(uint32_t));
  pw_allocator_free(a, ready, (g->node_count + 1) * sizeof(uint32_t));
  if (status != NULL) pw_plan_free(rt, plan);
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

pw_status_t pw_graph_finalize(pw_client_t* client, pw_graph_t graph) {
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, &g));
  const pw_plan_t* plan;
  pw_status_t status = pw__graph_plan(client, g, &plan);
  pw__object_release(&g->header);
  return status;
}

pw_status_t pw_graph_counts(pw_client_t* client, pw_graph_t graph,
                            pw_graph_counts_t* out_counts) {
  if (out_counts == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "out_counts is NULL");
  }
  memset(out_counts, 0, sizeof(*out_counts));
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, &g));
  pthread_mutex_lock(&g->lock);
  out_counts->parameters = g->param_count;
  out_counts->computes = g->node_count - g->param_count;
  out_counts->outputs = g->output_count;
  for (uint32_t id = 0; id < g->node_count; ++id) {
    for (uint32_t k = 0; k < g->nodes[id].input_count; ++k) {
      uint32_t src = g->nodes[id].inputs[k].node;
      if (src < g->node_count && pw_graph_is_op(g->nodes[src].kind)) {
        out_counts->edges++;
      }
    }
  }
  pthread_mutex_unlock(&g->lock);
  pw__object_release(&g->header);
  return NULL;
}

pw_status_t pw_graph_release(pw_client_t* client, pw_graph_t graph) {
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "client is NULL");
  }
  return pw__handle_remove(client, graph.id, PW_OBJECT_GRAPH, "graph");
}

/* ---- submit ------------------------------------------------------------- */

pw_status_t pw_graph_submit(pw_client_t* client, pw_graph_t graph, const pw_buffer_t* args,
                            uint32_t arg_count, const pw_submit_options_t* options,
                            pw_buffer_t* out_outputs, uint32_t output_count,
                            pw_event_t** out_done) {
  if (out_done) *out_done = NULL;
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_graph_submit: client is NULL");
  }
  if ((arg_count > 0 && args == NULL) || (output_count > 0 && out_outputs == NULL)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_graph_submit: args or out_outputs is NULL");
  }
  if (options != NULL && options->struct_size < sizeof(size_t) + sizeof(const bool*)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_graph_submit: options struct_size %zu is too small",
                          options->struct_size);
  }
  for (uint32_t i = 0; i < output_count; ++i) out_outputs[i].id = 0;
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, &g));
  const pw_plan_t* plan = NULL;
  pw_status_t status = pw__graph_plan(client, g, &plan);
  if (status == NULL && arg_count != plan->param_count) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "pw_graph_submit: %u arguments given, the graph has %u "
                            "parameters",
                            arg_count, plan->param_count);
  }
  if (status == NULL && output_count != plan->output_count) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "pw_graph_submit: room for %u outputs given, the graph has %u",
                            output_count, plan->output_count);
  }
  pw_runtime_t* rt = client->runtime;
  pw_buffer_obj_t* arg_stack[16];
  pw_buffer_obj_t* out_stack[16];
  pw_buffer_obj_t** arg_objs = arg_stack;
  pw_buffer_obj_t** out_objs = out_stack;
  if (status == NULL && arg_count > 16) {
    status = pw_allocator_calloc_array(rt->allocator, arg_count, sizeof(void*), 0,
                                       (void**)&arg_objs);
  }
  if (status == NULL && output_count > 16) {
    status = pw_allocator_calloc_array(rt->allocator, output_count, sizeof(void*), 0,
                                       (void**)&out_objs);
  }
  uint32_t looked_up = 0;
  for (; status == NULL && looked_up < arg_count; ++looked_up) {
    char what[32];
    snprintf(what, sizeof(what), "args[%u]", looked_up);
    status = pw__handle_lookup(client, args[looked_up].id, PW_OBJECT_BUFFER, what,
                               (pw_object_t**)&arg_objs[looked_up]);
    if (status != NULL) break;
    pw_buffer_obj_t* b = arg_objs[looked_up];
    const pw_array_spec_t* want = &plan->param_specs[looked_up];
    const pw_vslice_obj_t* want_vs = plan->param_vslices[looked_up];
    if (b->slice != want_vs->slice || !pw_mesh_shape_equal(&b->mesh, &want_vs->mesh)) {
      status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "args[%u]: buffer lives on slice '%s', parameter %u is on "
                              "slice '%s'",
                              looked_up, b->slice->name, looked_up, want_vs->slice->name);
    } else if (!pw_array_spec_equal(&b->spec, want)) {
      char have[160], expect[160];
      pw_array_spec_format(&b->spec, have, sizeof(have));
      pw_array_spec_format(want, expect, sizeof(expect));
      status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "args[%u]: buffer is %s, parameter %u expects %s", looked_up,
                              have, looked_up, expect);
    }
    if (status != NULL) {
      ++looked_up;
      break;
    }
  }
  pw_event_t* done = NULL;
  if (status == NULL) {
    status = pw__dispatch_submit(client, plan, &g->header, arg_objs, out_objs, &done);
  }
  /* Hand out output handles. The dispatcher already holds what it needs, so
   * a failure here only loses handles, never work. */
  uint32_t inserted = 0;
  for (; status == NULL && inserted < output_count; ++inserted) {
    status = pw__handle_insert(client, &out_objs[inserted]->header, &out_outputs[inserted].id);
    if (status != NULL) {
      for (uint32_t j = inserted + 1; j < output_count; ++j) {
        pw__object_release(&out_objs[j]->header);
      }
      for (uint32_t j = 0; j < inserted; ++j) {
        pw_status_ignore(pw__handle_remove(client, out_outputs[j].id, PW_OBJECT_BUFFER, "output"));
        out_outputs[j].id = 0;
      }
    }
  }
  if (status == NULL && options != NULL && options->donate != NULL) {
    for (uint32_t i = 0; i < arg_count; ++i) {
      if (options->donate[i]) {
        pw_status_ignore(pw__handle_remove(client, args[i].id, PW_OBJECT_BUFFER, "donated arg"));
      }
    }
  }
  for (uint32_t i = 0; i < looked_up; ++i) pw__object_release(&arg_objs[i]->header);
  if (arg_objs != arg_stack) {
    pw_allocator_free(rt->allocator, arg_objs, arg_count * sizeof(void*));
  }
  if (out_objs != out_stack) {
    pw_allocator_free(rt->allocator, out_objs, output_count * sizeof(void*));
  }
  pw__object_release(&g->header);
  if (status == NULL && out_done) {
    *out_done = done;
  } else {
    pw_event_release(done);
  }
  return status;
}

/* ---- read access for other modules (graph/graph_internal.h) ------------- */

pw_status_t pw__graph_acquire(pw_client_t* client, pw_graph_t graph,
                              struct pw_graph_obj_s** out_graph) {
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, out_graph));
  pthread_mutex_lock(&(*out_graph)->lock);
  return NULL;
}

void pw__graph_done(struct pw_graph_obj_s* graph) {
  pthread_mutex_unlock(&graph->lock);
  pw__object_release(&graph->header);
}

uint32_t pw__graph_node_count(const struct pw_graph_obj_s* graph) { return graph->node_count; }

uint32_t pw__graph_param_count(const struct pw_graph_obj_s* graph) { return graph->param_count; }

void pw__graph_node(const struct pw_graph_obj_s* graph, uint32_t id,
                    pw__graph_node_view_t* out_view) {
  const pw_graph_node_t* n = &graph->nodes[id];
  memset(out_view, 0, sizeof(*out_view));
  out_view->kind = n->kind == PW_GRAPH_NODE_PARAMETER  ? PW__GRAPH_NODE_PARAMETER
                   : n->kind == PW_GRAPH_NODE_COMPUTE  ? PW__GRAPH_NODE_COMPUTE
                   : n->kind == PW_GRAPH_NODE_TRANSFER ? PW__GRAPH_NODE_TRANSFER
                                                       : PW__GRAPH_NODE_OTHER;
  out_view->transfer_sharding = n->transfer_sharding;
  out_view->name = n->name;
  out_view->vslice = n->vslice;
  out_view->executable = n->executable;
  out_view->spec = &n->spec;
  out_view->param_index = n->param_index;
  out_view->input_count = n->input_count;
  out_view->inputs = n->inputs;
}

uint32_t pw__graph_output_count(const struct pw_graph_obj_s* graph) {
  return graph->output_count;
}

pw_value_t pw__graph_output(const struct pw_graph_obj_s* graph, uint32_t index) {
  return graph->outputs[index];
}

pw_object_t* pw__graph_object(struct pw_graph_obj_s* graph) { return &graph->header; }
