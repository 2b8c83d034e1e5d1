#define _POSIX_C_SOURCE 200809L
/* The graph builder: pw_graph_add_parameter, _compute, _transfer, _host
 * (and _host_by_name) and _output, and the storage they grow (chunks, name chunks, the references
 * that keep nodes' vslices and executables alive). Handles are resolved
 * at add time, so a released or foreign handle is rejected right there;
 * the structure is checked at finalize (validate.c). */
#include <stdio.h>
#include <string.h>

#include "graph/graph_obj.h"

/* Grows |*array| (of |*capacity| elements of |size|, |count| used) to hold
 * |more| more, doubling; at most |max| elements. An array that is
 * |embedded| (storage inside the graph; may be NULL) is not freed. */
static pw_status_t pw_graph_reserve_embedded(pw_runtime_t* rt, void** array, uint32_t* capacity,
                                             uint32_t count, uint32_t more, size_t size,
                                             uint32_t max, const void* embedded) {
  if (more <= *capacity - count) return NULL;
  if (more > max - count) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "graph already has %u entries (maximum %u)", count, max);
  }
  uint32_t next = *capacity ? *capacity : 8;
  while (next - count < more) next = next > max / 2 ? max : next * 2;
  void* grown = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(rt->allocator, next * size, 0, &grown));
  if (count) memcpy(grown, *array, count * size);
  if (*array != embedded) pw_allocator_free(rt->allocator, *array, *capacity * size);
  *array = grown;
  *capacity = next;
  return NULL;
}

static pw_status_t pw_graph_reserve(pw_runtime_t* rt, void** array, uint32_t* capacity,
                                    uint32_t count, uint32_t more, size_t size, uint32_t max) {
  return pw_graph_reserve_embedded(rt, array, capacity, count, more, size, max, NULL);
}

/* Adds a chunk of |chunk_bytes| to |c|. */
pw_status_t pw__graph_chunks_add(pw_runtime_t* rt, pw_graph_chunks_t* c, size_t chunk_bytes) {
  if (c->chunks == NULL) {
    c->chunks = c->embedded;
    c->capacity = sizeof(c->embedded) / sizeof(c->embedded[0]);
  }
  PW_RETURN_IF_ERROR(pw_graph_reserve_embedded(rt, (void**)&c->chunks, &c->capacity, c->count, 1,
                                               sizeof(void*), PW_GRAPH_MAX_INPUTS, c->embedded));
  void* chunk = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(rt->allocator, chunk_bytes, 0, &chunk));
  c->chunks[c->count++] = chunk;
  return NULL;
}

/* Copies |name| (truncated to PW_GRAPH_NAME_MAX bytes) into |g|'s name
 * chunks. */
static pw_status_t pw_graph_copy_name(pw_graph_obj_t* g, const char* name,
                                      const char** out_name) {
  size_t n = strnlen(name, PW_GRAPH_NAME_MAX);
  pw_graph_name_chunk_t* c = g->names;
  if (c == NULL || c->size - c->used < n + 1) {
    uint32_t size = PW_GRAPH_NAME_CHUNK_BYTES - (uint32_t)sizeof(*c);
    PW_RETURN_IF_ERROR(
        pw_allocator_malloc(g->header.runtime->allocator, sizeof(*c) + size, 0, (void**)&c));
    c->next = g->names;
    c->size = size;
    c->used = 0;
    g->names = c;
  }
  char* dst = c->text + c->used;
  memcpy(dst, name, n);
  dst[n] = '\0';
  c->used += (uint32_t)n + 1;
  *out_name = dst;
  return NULL;
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

/* What an add call appends: |node| (kind, vslice, executable, and name
 * unless |copy_name| is set), |inputs|, and the parameter's spec or the
 * transfer's sharding. */
typedef struct pw_graph_addition_s {
  pw_graph_node_t node;
  const char* copy_name;            /* a caller's string to copy */
  const pw_value_t* inputs;
  const pw_array_spec_t* spec;      /* parameter */
  pw_sharding_t sharding;           /* transfer */
  pw_graph_host_t host;             /* host: taken by the graph on success */
} pw_graph_addition_t;

/* Appends |add| to |g| (locked, not finalized): nothing changes on failure.
 * Parameters get the next parameter index and a default name. */
static pw_status_t pw_graph_append_locked(pw_graph_obj_t* g, pw_graph_addition_t* add,
                                          uint32_t* out_node) {
  pw_runtime_t* rt = g->header.runtime;
  pw_graph_node_t* node = &add->node;
  pw_status_t status = NULL;
  if (g->node_count >= PW_GRAPH_MAX_NODES) {
    status = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                            "graph already has %u entries (maximum %u)", g->node_count,
                            PW_GRAPH_MAX_NODES);
  } else if (g->node_count == g->nodes.count << PW_GRAPH_NODE_SHIFT) {
    status = pw__graph_chunks_add(rt, &g->nodes, PW_GRAPH_NODE_CHUNK * sizeof(pw_graph_node_t));
  }
  uint32_t input_start = g->input_end;
  if (status == NULL && node->input_count) {
    if (input_start >> PW_GRAPH_INPUT_SHIFT >= g->inputs.count ||
        (input_start & (PW_GRAPH_INPUT_CHUNK - 1)) + node->input_count > PW_GRAPH_INPUT_CHUNK) {
      if (g->inputs.count >= PW_GRAPH_MAX_INPUTS / PW_GRAPH_INPUT_CHUNK) {
        status = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                                "graph already has %u inputs (maximum %u)", g->input_count,
                                PW_GRAPH_MAX_INPUTS);
      } else {
        input_start = g->inputs.count << PW_GRAPH_INPUT_SHIFT;
        status = pw__graph_chunks_add(rt, &g->inputs, PW_GRAPH_INPUT_CHUNK * sizeof(pw_value_t));
      }
    }
  }
  if (status == NULL && node->kind == PW_GRAPH_NODE_PARAMETER) {
    status = pw_graph_reserve(rt, (void**)&g->param_specs, &g->param_capacity, g->param_count,
                              1, sizeof(pw_array_spec_t), PW_GRAPH_MAX_NODES);
    if (status == NULL) {
      char name[32];
      snprintf(name, sizeof(name), "param%u", g->param_count);
      status = pw_graph_copy_name(g, name, &node->name);
    }
  } else if (status == NULL && node->kind == PW_GRAPH_NODE_TRANSFER) {
    if (g->transfer_count == g->transfers.count << PW_GRAPH_TRANSFER_SHIFT) {
      status = pw__graph_chunks_add(rt, &g->transfers,
                                   PW_GRAPH_TRANSFER_CHUNK * sizeof(pw_graph_transfer_t));
    }
  } else if (status == NULL && node->kind == PW_GRAPH_NODE_HOST) {
    status = pw_graph_reserve(rt, (void**)&g->hosts, &g->host_capacity, g->host_count, 1,
                              sizeof(pw_graph_host_t), PW_GRAPH_MAX_NODES);
  }
  if (status == NULL && add->copy_name != NULL) {
    status = pw_graph_copy_name(g, add->copy_name, &node->name);
  }
  if (status == NULL) {
    if (node->kind == PW_GRAPH_NODE_PARAMETER) {
      node->extra = g->param_count;
      g->param_specs[g->param_count++] = *add->spec;
    } else if (node->kind == PW_GRAPH_NODE_TRANSFER) {
      node->extra = g->transfer_count;
      pw_graph_transfer_t* t = pw_graph_transfer_at(g, g->transfer_count++);
      t->spec = NULL;
      t->sharding = add->sharding;
    } else if (node->kind == PW_GRAPH_NODE_HOST) {
      node->extra = g->host_count;
      g->hosts[g->host_count++] = add->host;
    }
    node->input_start = input_start;
    if (node->input_count) {
      memcpy((pw_value_t*)pw_graph_inputs(g, node), add->inputs,
             node->input_count * sizeof(pw_value_t));
      g->input_count += node->input_count;
      g->input_end = input_start + node->input_count;
    }
    *pw_graph_node_at(g, g->node_count) = *node;
    if (out_node) *out_node = g->node_count;
    g->node_count++;
  }
  return status;
}

/* Makes |g| hold a reference to |object| (for its nodes to borrow), unless
 * it recently did. Called with the client's handle read lock held, which
 * keeps |object| alive until the reference is taken. */
static pw_status_t pw_graph_hold(pw_graph_obj_t* g, pw_object_t* object) {
  /* Fibonacci hashing: objects of one kind sit at a common stride, which
   * low address bits alone would map to a few slots. */
  uint64_t h = (uint64_t)(uintptr_t)object * UINT64_C(0x9E3779B97F4A7C15);
  pw_object_t** recent = &g->held_recent[h >> 60];
  if (*recent == object) return NULL;
  if (g->held == NULL) {
    g->held = g->held_embedded;
    g->held_capacity = sizeof(g->held_embedded) / sizeof(g->held_embedded[0]);
  }
  PW_RETURN_IF_ERROR(pw_graph_reserve_embedded(g->header.runtime, (void**)&g->held,
                                               &g->held_capacity, g->held_count, 1,
                                               sizeof(pw_object_t*), PW_GRAPH_MAX_NODES * 2,
                                               g->held_embedded));
  pw__object_retain(object);
  g->held[g->held_count++] = object;
  *recent = object;
  return NULL;
}

/* Resolves |vslice_id| (and |*executable_id| unless NULL) of |client| into
 * |node|, in one section of the handle table's read lock, and makes |g|
 * hold them. Called with g->lock held. */
static pw_status_t pw_graph_resolve(pw_client_t* client, pw_graph_obj_t* g, uint64_t vslice_id,
                                    const uint64_t* executable_id, pw_graph_node_t* node) {
  pw_handle_table_t* table = &client->handles;
  uint32_t stripe = pw__handle_read_lock(table);
  pw_object_t* vs = NULL;
  pw_object_t* exe = NULL;
  pw_status_t status = pw__handle_peek(client, vslice_id, PW_OBJECT_VSLICE, "vslice", &vs);
  if (status == NULL && executable_id != NULL) {
    status = pw__handle_peek(client, *executable_id, PW_OBJECT_EXECUTABLE, "executable", &exe);
  }
  if (status == NULL) status = pw_graph_hold(g, vs);
  if (status == NULL && exe != NULL) status = pw_graph_hold(g, exe);
  pw__handle_read_unlock(table, stripe);
  if (status == NULL) {
    node->vslice = (pw_vslice_obj_t*)vs;
    node->executable = (pw_executable_obj_t*)exe;
  }
  return status;
}

/* Common body of the add functions: under |g|'s lock, resolves the node's
 * handles, checks what needs them, and appends. Releases |g| (from
 * pw_graph_get). Objects a failed add resolved may stay held by the graph
 * until it goes. */
static pw_status_t pw_graph_add_node(pw_client_t* client, pw_graph_obj_t* g, const char* what,
                                     pw_graph_addition_t* add, uint64_t vslice_id,
                                     const uint64_t* executable_id, const char* name,
                                     uint32_t* out_node) {
  pthread_mutex_lock(&g->lock);
  pw_graph_node_t* node = &add->node;
  pw_status_t status = pw_graph_resolve(client, g, vslice_id, executable_id, node);
  if (status != NULL) status = pw_status_annotate(status, "%s", what);
  if (status == NULL && node->kind == PW_GRAPH_NODE_PARAMETER) {
    status = pw_array_spec_check(add->spec, &node->vslice->mesh);
    if (status) status = pw_status_annotate(status, "parameter %u", g->param_count);
  } else if (status == NULL && node->kind == PW_GRAPH_NODE_COMPUTE) {
    /* The executable's own name lives as long as the graph holds it; a
     * caller's string, or a name that fills its array, is copied. */
    const char* own = node->executable->signature.name;
    if (name && name[0]) {
      add->copy_name = name;
    } else if (memchr(own, '\0', PW_GRAPH_NAME_MAX + 1) != NULL) {
      node->name = own;
    } else {
      add->copy_name = own;
    }
  } else if (status == NULL && node->kind == PW_GRAPH_NODE_HOST) {
    for (uint32_t k = 0; status == NULL && k < add->host.output_count; ++k) {
      status = pw_array_spec_check(&add->host.specs[k], &node->vslice->mesh);
      if (status) status = pw_status_annotate(status, "%s: output spec %u", what, k);
    }
  } else if (status == NULL && node->kind == PW_GRAPH_NODE_TRANSFER &&
             add->sharding.kind != PW_SHARDING_REPLICATED &&
             add->sharding.kind != PW_SHARDING_SPLIT && add->sharding.kind != PW_SHARDING_TILED) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "pw_graph_add_transfer: unknown sharding kind %d",
                            (int)add->sharding.kind);
  }
  if (status == NULL && g->finalized) {
    status = pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                            "%s: the graph is finalized (it was submitted or "
                            "pw_graph_finalize was called); build a new graph",
                            what);
  }
  if (status == NULL) status = pw_graph_append_locked(g, add, out_node);
  pthread_mutex_unlock(&g->lock);
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
  pw_graph_addition_t add;
  memset(&add, 0, sizeof(add));
  add.node.kind = PW_GRAPH_NODE_PARAMETER;
  add.spec = spec;
  return pw_graph_add_node(client, g, "pw_graph_add_parameter", &add, vslice.id, NULL, NULL,
                           out_node);
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
  pw_graph_addition_t add;
  add.node.kind = PW_GRAPH_NODE_COMPUTE;
  add.node.input_count = input_count;
  add.node.arg = 0;
  add.node.name = NULL;
  add.copy_name = NULL;
  add.inputs = inputs;
  return pw_graph_add_node(client, g, "pw_graph_add_compute", &add, vslice.id, &executable.id,
                           name, out_node);
}

pw_status_t pw_graph_add_transfer(pw_client_t* client, pw_graph_t graph, const char* name,
                                  pw_value_t input, pw_vslice_t vslice,
                                  pw_sharding_t sharding, uint32_t* out_node) {
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, &g));
  pw_graph_addition_t add;
  memset(&add, 0, sizeof(add));
  add.node.kind = PW_GRAPH_NODE_TRANSFER;
  add.node.input_count = 1;
  add.inputs = &input;
  add.sharding = sharding;
  if (name && name[0]) {
    add.copy_name = name;
  } else {
    add.node.name = "transfer";
  }
  return pw_graph_add_node(client, g, "pw_graph_add_transfer", &add, vslice.id, NULL, NULL,
                           out_node);
}

pw_status_t pw_graph_set_node_arg(pw_client_t* client, pw_graph_t graph, uint32_t node,
                                  uint64_t arg) {
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, &g));
  pw_status_t status = pw_graph_begin_edit(g, "pw_graph_set_node_arg");
  if (status == NULL) {
    if (node >= g->node_count) {
      status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "pw_graph_set_node_arg: node %u does not exist (the graph has "
                              "%u nodes)",
                              node, g->node_count);
    } else if (pw_graph_node_at(g, node)->kind != PW_GRAPH_NODE_COMPUTE) {
      status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "pw_graph_set_node_arg: node %u (\"%s\") is not a compute node",
                              node, pw_graph_node_at(g, node)->name);
    } else {
      pw_graph_node_at(g, node)->arg = arg;
    }
    pthread_mutex_unlock(&g->lock);
  }
  pw__object_release(&g->header);
  return status;
}

pw_status_t pw_graph_add_output(pw_client_t* client, pw_graph_t graph, pw_value_t value) {
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, &g));
  pw_status_t status = pw_graph_begin_edit(g, "pw_graph_add_output");
  if (status == NULL) {
    status = pw_graph_reserve(g->header.runtime, (void**)&g->outputs, &g->output_capacity,
                              g->output_count, 1, sizeof(pw_value_t), PW_GRAPH_MAX_NODES);
    if (status == NULL) g->outputs[g->output_count++] = value;
    pthread_mutex_unlock(&g->lock);
  }
  pw__object_release(&g->header);
  return status;
}


/* ---- host nodes ------------------------------------------------------------ */

/* Lets go of |task| after a failed add: a |fresh| one (made for this
 * call) without its destroy, since the caller still owns its user. */
static void pw_graph_host_task_drop(pw_host_task_obj_t* task, bool fresh) {
  if (fresh) task->destroy = NULL; /* only this call holds it */
  pw__host_task_release(task);
}

/* pw_graph_add_host's and _by_name's body: |task| (one reference) goes to
 * the graph on success and is dropped on failure. */
static pw_status_t pw_graph_add_host_task(pw_client_t* client, pw_graph_t graph, const char* what,
                                          const char* name, pw_host_task_obj_t* task, bool fresh,
                                          pw_vslice_t vslice, const pw_value_t* inputs,
                                          uint32_t input_count,
                                          const pw_array_spec_t* output_specs,
                                          uint32_t output_count, uint32_t* out_node) {
  pw_status_t status = NULL;
  if (input_count > PW_BACKEND_MAX_PARAMS || output_count > PW_BACKEND_MAX_PARAMS) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: %u inputs and %u outputs (maximum %d each)",
                            what, input_count, output_count, PW_BACKEND_MAX_PARAMS);
  } else if (input_count > 0 && inputs == NULL) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: inputs is NULL", what);
  } else if (output_count > 0 && output_specs == NULL) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: output_specs is NULL", what);
  }
  pw_graph_obj_t* g = NULL;
  if (status == NULL) status = pw_graph_get(client, graph, &g);
  pw_graph_addition_t add;
  memset(&add, 0, sizeof(add));
  if (status == NULL && output_count > 0) {
    status = pw_allocator_malloc(client->runtime->allocator,
                                 output_count * sizeof(pw_array_spec_t), 0,
                                 (void**)&add.host.specs);
    if (status == NULL) memcpy(add.host.specs, output_specs, output_count * sizeof(pw_array_spec_t));
    if (status != NULL) pw__object_release(&g->header);
  }
  if (status != NULL) {
    pw_graph_host_task_drop(task, fresh);
    return status;
  }
  add.node.kind = PW_GRAPH_NODE_HOST;
  add.node.input_count = input_count;
  add.inputs = inputs;
  add.host.task = task;
  add.host.output_count = output_count;
  if (name && name[0]) {
    add.copy_name = name;
  } else {
    add.node.name = "host";
  }
  status = pw_graph_add_node(client, g, what, &add, vslice.id, NULL, NULL, out_node);
  if (status != NULL) {
    if (add.host.specs) {
      pw_allocator_free(client->runtime->allocator, add.host.specs,
                        output_count * sizeof(pw_array_spec_t));
    }
    pw_graph_host_task_drop(task, fresh);
  }
  return status;
}

pw_status_t pw_graph_add_host(pw_client_t* client, pw_graph_t graph, const char* name,
                              const pw_host_task_t* task, pw_vslice_t vslice,
                              const pw_value_t* inputs, uint32_t input_count,
                              const pw_array_spec_t* output_specs, uint32_t output_count,
                              uint32_t* out_node) {
  if (client == NULL) return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "client is NULL");
  pw_host_task_obj_t* t = NULL;
  PW_RETURN_IF_ERROR(pw__host_task_make(client->runtime->allocator, task, "pw_graph_add_host", &t));
  return pw_graph_add_host_task(client, graph, "pw_graph_add_host", name, t, true, vslice, inputs,
                                input_count, output_specs, output_count, out_node);
}

pw_status_t pw_graph_add_host_by_name(pw_client_t* client, pw_graph_t graph, const char* name,
                                      const char* task_name, pw_vslice_t vslice,
                                      const pw_value_t* inputs, uint32_t input_count,
                                      const pw_array_spec_t* output_specs,
                                      uint32_t output_count, uint32_t* out_node) {
  pw_host_task_obj_t* t = NULL;
  PW_RETURN_IF_ERROR(pw__host_task_lookup(client, task_name, &t));
  return pw_graph_add_host_task(client, graph, "pw_graph_add_host_by_name",
                                name && name[0] ? name : task_name, t, false, vslice, inputs,
                                input_count, output_specs, output_count, out_node);
}

pw_status_t pw__graph_add_host_task(pw_client_t* client, pw_graph_t graph, const char* name,
                                    pw_host_task_obj_t* task, pw_vslice_t vslice,
                                    const pw_value_t* inputs, uint32_t input_count,
                                    const pw_array_spec_t* output_specs, uint32_t output_count,
                                    uint32_t* out_node) {
  return pw_graph_add_host_task(client, graph, "pw_graph_add_host_by_name", name, task, false,
                                vslice, inputs, input_count, output_specs, output_count,
                                out_node);
}
