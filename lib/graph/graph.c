#define _POSIX_C_SOURCE 200809L
/* The graph object: create, destroy (with the plan and the references
 * the graph holds), release, and read access: pw_graph_counts and the
 * views graph/graph_internal.h gives other modules. The layout is in
 * graph_obj.h. */
#include <string.h>

#include "graph/graph_obj.h"
#include "pathways/struct_size.h"

static void pw_graph_chunks_free(pw_allocator_t a, pw_graph_chunks_t* c, size_t chunk_bytes) {
  for (uint32_t i = 0; i < c->count; ++i) pw_allocator_free(a, c->chunks[i], chunk_bytes);
  if (c->chunks != c->embedded) pw_allocator_free(a, c->chunks, c->capacity * sizeof(void*));
}

static void pw_graph_destroy(pw_object_t* object) {
  pw_graph_obj_t* g = (pw_graph_obj_t*)object;
  pw_runtime_t* rt = object->runtime;
  pw_allocator_t a = rt->allocator;
  pw__graph_plan_free(rt, &g->plan);
  for (uint32_t i = 0; i < g->held_count; ++i) pw__object_release(g->held[i]);
  if (g->held != g->held_embedded) {
    pw_allocator_free(a, g->held, g->held_capacity * sizeof(pw_object_t*));
  }
  pw_graph_chunks_free(a, &g->nodes, PW_GRAPH_NODE_CHUNK * sizeof(pw_graph_node_t));
  pw_graph_chunks_free(a, &g->inputs, PW_GRAPH_INPUT_CHUNK * sizeof(pw_value_t));
  pw_allocator_free(a, g->param_specs, g->param_capacity * sizeof(pw_array_spec_t));
  pw_graph_chunks_free(a, &g->transfers, PW_GRAPH_TRANSFER_CHUNK * sizeof(pw_graph_transfer_t));
  pw_graph_chunks_free(a, &g->specs, PW_GRAPH_SPEC_CHUNK * sizeof(pw_array_spec_t));
  for (uint32_t i = 0; i < g->host_count; ++i) {
    pw_graph_host_t* h = &g->hosts[i];
    if (h->specs) pw_allocator_free(a, h->specs, h->output_count * sizeof(pw_array_spec_t));
    pw__host_task_release(h->task); /* may run its destroy: nothing runs the graph now */
  }
  pw_allocator_free(a, g->hosts, g->host_capacity * sizeof(pw_graph_host_t));
  for (pw_graph_name_chunk_t* c = g->names; c != NULL;) {
    pw_graph_name_chunk_t* next = c->next;
    pw_allocator_free(a, c, sizeof(*c) + c->size);
    c = next;
  }
  pw_allocator_free(a, g->outputs, g->output_capacity * sizeof(pw_value_t));
  pthread_mutex_destroy(&g->lock);
  pw_allocator_free(a, g, sizeof(*g));
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

pw_status_t pw_graph_release(pw_client_t* client, pw_graph_t graph) {
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "client is NULL");
  }
  return pw__handle_remove(client, graph.id, PW_OBJECT_GRAPH, "graph");
}

/* ---- read access ------------------------------------------------------ */

pw_status_t pw_graph_counts(pw_client_t* client, pw_graph_t graph,
                            pw_graph_counts_t* out_counts) {
  PW_RETURN_IF_ERROR(
      PW_STRUCT_CHECK(out_counts, pw_graph_counts_t, PW_GRAPH_COUNTS_SIZE_V1, "pw_graph_counts"));
  pw_graph_counts_t c;
  memset(&c, 0, sizeof(c));
  c.struct_size = sizeof(c);
  pw_struct_fill(out_counts, &c, sizeof(c)); /* cleared on error too */
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, &g));
  pthread_mutex_lock(&g->lock);
  c.parameters = g->param_count;
  c.computes = g->node_count - g->param_count;
  c.outputs = g->output_count;
  for (uint32_t id = 0; id < g->node_count; ++id) {
    const pw_graph_node_t* n = pw_graph_node_at(g, id);
    const pw_value_t* inputs = pw_graph_inputs(g, n);
    for (uint32_t k = 0; k < n->input_count; ++k) {
      uint32_t src = inputs[k].node;
      if (src < g->node_count && pw_graph_is_op(pw_graph_node_at(g, src)->kind)) {
        c.edges++;
      }
    }
  }
  pthread_mutex_unlock(&g->lock);
  pw__object_release(&g->header);
  pw_struct_fill(out_counts, &c, sizeof(c));
  return NULL;
}

/* ---- for other modules (graph/graph_internal.h) ------------------------ */

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
  const pw_graph_node_t* n = pw_graph_node_at(graph, id);
  memset(out_view, 0, sizeof(*out_view));
  out_view->kind = n->kind == PW_GRAPH_NODE_PARAMETER  ? PW__GRAPH_NODE_PARAMETER
                   : n->kind == PW_GRAPH_NODE_COMPUTE  ? PW__GRAPH_NODE_COMPUTE
                   : n->kind == PW_GRAPH_NODE_TRANSFER ? PW__GRAPH_NODE_TRANSFER
                   : n->kind == PW_GRAPH_NODE_HOST     ? PW__GRAPH_NODE_HOST
                                                       : PW__GRAPH_NODE_OTHER;
  static const pw_array_spec_t no_spec;
  if (n->kind == PW_GRAPH_NODE_TRANSFER) {
    out_view->transfer_sharding = pw_graph_transfer_at(graph, n->extra)->sharding;
  }
  if (n->kind == PW_GRAPH_NODE_HOST) {
    const pw_graph_host_t* h = &graph->hosts[n->extra];
    out_view->host_task = h->task;
    out_view->host_specs = h->specs;
    out_view->output_count = h->output_count;
  }
  out_view->name = n->name;
  out_view->vslice = n->vslice;
  out_view->executable = n->executable;
  out_view->node_arg = n->kind == PW_GRAPH_NODE_COMPUTE ? n->arg : 0;
  out_view->spec = n->kind == PW_GRAPH_NODE_COMPUTE ? &no_spec : pw_graph_node_spec(graph, n);
  out_view->param_index = n->kind == PW_GRAPH_NODE_PARAMETER ? n->extra : 0;
  out_view->input_count = n->input_count;
  out_view->inputs = pw_graph_inputs(graph, n);
}

uint32_t pw__graph_output_count(const struct pw_graph_obj_s* graph) {
  return graph->output_count;
}

pw_value_t pw__graph_output(const struct pw_graph_obj_s* graph, uint32_t index) {
  return graph->outputs[index];
}

pw_object_t* pw__graph_object(struct pw_graph_obj_s* graph) { return &graph->header; }

pw_status_t pw__graph_lookup(pw_client_t* client, pw_graph_t graph,
                             struct pw_graph_obj_s** out_graph) {
  return pw_graph_get(client, graph, out_graph);
}
