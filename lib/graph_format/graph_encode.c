#define _POSIX_C_SOURCE 200809L
/* pw_graph_encode (a client's graph -> a graph file), the runtime-free
 * pw_graph_format_* entry points, and executable content hashes.
 *
 * Numbering (so that encode -> decode -> encode is byte-identical: the
 * decoder rebuilds parameters first, then the nodes in file order):
 *   buffers      parameters by parameter index, then each compute node's
 *                outputs, nodes in node-id order
 *   nodes        the compute and transfer nodes in node-id order
 *   vslices      as listed in the options, else by first use in node order
 *   executables  by first use among the nodes */
#include <stdio.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "graph/host_task.h"
#include "graph_format/doc.h"
#include "pathways/struct_size.h"

/* ---- files without a runtime ---------------------------------------------- */

pw_status_t pw_graph_format_check(const void* bytes, size_t size, pw_allocator_t allocator,
                                  pw_graph_format_info_t* out_info) {
  pw_graph_format_info_t info;
  memset(&info, 0, sizeof(info));
  if (out_info) {
    PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(out_info, pw_graph_format_info_t,
                                        PW_GRAPH_FORMAT_INFO_SIZE_V1, "pw_graph_format_check"));
    pw_struct_fill(out_info, &info, sizeof(info));
  }
  pw_gdoc_t doc;
  pw__gdoc_init(&doc, allocator);
  PW_RETURN_IF_ERROR(pw__gdoc_load(&doc, bytes, size));
  if (out_info) {
    info.vslices = doc.vslice_count;
    info.executables = doc.exe_count;
    info.buffers = doc.buffer_count;
    info.parameters = doc.param_count;
    info.nodes = doc.node_count;
    info.outputs = doc.output_count;
    info.hash = pw__gdoc_hash(&doc);
    info.version = doc.version;
    for (uint32_t i = 0; i < doc.vslice_count; ++i) {
      info.named_vslices += doc.vslices[i].axis_names[0][0] != '\0';
    }
    for (uint32_t i = 0; i < doc.buffer_count; ++i) {
      const pw_sharding_t* s = &doc.buffers[i].spec.sharding;
      info.tiled_buffers += s->kind == PW_SHARDING_TILED;
      info.unreduced_buffers += s->kind == PW_SHARDING_TILED && s->unreduced_axes != 0;
    }
    pw_struct_fill(out_info, &info, sizeof(info));
  }
  pw__gdoc_free(&doc);
  return NULL;
}

pw_status_t pw_graph_format_canonicalize(const void* bytes, size_t size, pw_allocator_t allocator,
                                         void** out_bytes, size_t* out_size) {
  if (out_bytes == NULL || out_size == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_graph_format_canonicalize: out_bytes or out_size is NULL");
  }
  *out_bytes = NULL;
  *out_size = 0;
  pw_gdoc_t doc;
  pw__gdoc_init(&doc, allocator);
  PW_RETURN_IF_ERROR(pw__gdoc_load(&doc, bytes, size));
  pw_status_t status = pw__gdoc_encode(&doc, out_bytes, out_size);
  pw__gdoc_free(&doc);
  return status;
}

pw_status_t pw_graph_format_dump_json(const void* bytes, size_t size, pw_allocator_t allocator,
                                      char** out_text, size_t* out_size) {
  if (out_text == NULL || out_size == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_graph_format_dump_json: out_text or out_size is NULL");
  }
  *out_text = NULL;
  *out_size = 0;
  pw_gdoc_t doc;
  pw__gdoc_init(&doc, allocator);
  PW_RETURN_IF_ERROR(pw__gdoc_load(&doc, bytes, size));
  pw_status_t status = pw__gdoc_to_json(&doc, out_text, out_size);
  pw__gdoc_free(&doc);
  return status;
}

pw_status_t pw_graph_executable_hash(pw_client_t* client, pw_executable_t executable,
                                     pw_graph_hash_t* out_hash) {
  if (client == NULL || out_hash == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_graph_executable_hash: client or out_hash is NULL");
  }
  pw_object_t* o = NULL;
  PW_RETURN_IF_ERROR(
      pw__handle_lookup(client, executable.id, PW_OBJECT_EXECUTABLE, "executable", &o));
  const pw_executable_obj_t* e = (const pw_executable_obj_t*)o;
  *out_hash = pw__graph_hash_from(pw__hash128(e->bytes, e->byte_size, 0));
  pw__object_release(o);
  return NULL;
}

/* ---- pw_graph_encode ------------------------------------------------------ */

typedef struct pw_genc_t {
  pw_allocator_t a;
  struct pw_graph_obj_s* g;
  uint32_t node_count;
  uint32_t param_count;
  uint32_t compute_count;
  uint32_t* buffer_base;          /* per node: first buffer id */
  const void** vslices;           /* vslice objects by index */
  uint32_t vslice_count;
  uint32_t vslice_capacity;
  const pw_executable_obj_t** exes;
  uint32_t exe_count;
  pw_gdoc_t doc;
} pw_genc_t;

/* Index of |object| in |table| (|*count| used), appending it if new and
 * |add| is set; UINT32_MAX if absent. Linear: graphs use few distinct
 * slices and executables compared with their nodes, and each lookup is a
 * scan of pointers. */
static uint32_t pw_genc_index(const void** table, uint32_t* count, const void* object, bool add) {
  for (uint32_t i = 0; i < *count; ++i) {
    if (table[i] == object) return i;
  }
  if (!add) return UINT32_MAX;
  table[*count] = object;
  return (*count)++;
}

/* The buffer of |value|; |what| names the reference ("graph node 3 input
 * 1", "graph output 0"). */
static pw_status_t pw_genc_value(const pw_genc_t* c, pw_value_t value, const char* what,
                                 uint32_t* out_buffer) {
  pw__graph_node_view_t src;
  if (value.node >= c->node_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: refers to node %u, which does not exist (%u nodes)", what,
                          value.node, c->node_count);
  }
  pw__graph_node(c->g, value.node, &src);
  uint32_t outputs = src.kind == PW__GRAPH_NODE_COMPUTE ? src.executable->signature.output_count
                     : src.kind == PW__GRAPH_NODE_HOST  ? src.output_count
                                                        : 1;
  if (value.output >= outputs) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: refers to output %u of node %u (\"%s\"), which has %u outputs",
                          what, value.output, value.node, src.name, outputs);
  }
  *out_buffer = c->buffer_base[value.node] + value.output;
  return NULL;
}

/* Counts, numbers vslices and executables, checks node kinds and names. */
static pw_status_t pw_genc_scan(pw_genc_t* c, const pw_graph_encode_options_t* options,
                                pw_vslice_obj_t* const* listed) {
  uint32_t buffers = c->param_count;
  for (uint32_t id = 0; id < c->node_count; ++id) {
    pw__graph_node_view_t n;
    pw__graph_node(c->g, id, &n);
    if (n.kind == PW__GRAPH_NODE_OTHER) {
      return pw_status_make(PW_STATUS_UNIMPLEMENTED,
                            "graph node %u (\"%s\"): this kind of node has no graph file "
                            "encoding yet (format version %u has parameters, computes, "
                            "transfers and host nodes)",
                            id, n.name, PW_GRAPH_FORMAT_VERSION);
    }
    if (n.kind == PW__GRAPH_NODE_HOST && n.host_task->name[0] == '\0') {
      return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                            "graph node %u (\"%s\"): its host task was given to "
                            "pw_graph_add_host and has no name a graph file could refer to "
                            "(register it with pw_client_register_host_task and add the node "
                            "with pw_graph_add_host_by_name)",
                            id, n.name);
    }
    if (!pw__utf8_valid((const uint8_t*)n.name, strlen(n.name))) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "graph node %u: its name is not valid UTF-8, which graph files need",
                            id);
    }
    uint32_t v = pw_genc_index(c->vslices, &c->vslice_count, n.vslice, listed == NULL);
    if (v == UINT32_MAX) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "graph node %u (\"%s\"): its virtual slice is not among the %u in "
                            "the encode options",
                            id, n.name, options->vslice_count);
    }
    if (n.kind == PW__GRAPH_NODE_PARAMETER) {
      c->buffer_base[id] = n.param_index;
      continue;
    }
    c->compute_count++;
    c->buffer_base[id] = buffers;
    if (n.kind == PW__GRAPH_NODE_TRANSFER) {
      buffers += 1;
      continue;
    }
    if (n.kind == PW__GRAPH_NODE_HOST) {
      buffers += n.output_count;
      continue;
    }
    buffers += n.executable->signature.output_count;
    (void)pw_genc_index((const void**)c->exes, &c->exe_count, n.executable, true);
  }
  PW_RETURN_IF_ERROR(pw__gdoc_alloc(&c->doc, c->vslice_count, c->exe_count, buffers,
                                    c->param_count, c->compute_count,
                                    pw__graph_output_count(c->g)));
  return NULL;
}

/* A transfer's output has its input's dtype and shape. Inputs may be
 * other transfers, in any order: resolve in passes; what stays unresolved
 * is a cycle of transfers. */
static pw_status_t pw_genc_transfers(pw_genc_t* c) {
  pw_gdoc_t* doc = &c->doc;
  bool* known = NULL;
  if (doc->buffer_count == 0) return NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc_array(c->a, doc->buffer_count, sizeof(bool), 0,
                                               (void**)&known));
  for (uint32_t b = 0; b < doc->buffer_count; ++b) known[b] = true;
  for (uint32_t n = 0; n < doc->node_count; ++n) {
    if (doc->nodes[n].transfer) known[doc->nodes[n].outputs[0]] = false;
  }
  bool changed = true;
  while (changed) {
    changed = false;
    for (uint32_t n = 0; n < doc->node_count; ++n) {
      const pw_gdoc_node_t* node = &doc->nodes[n];
      if (!node->transfer) continue;
      uint32_t in = node->inputs[0], out = node->outputs[0];
      if (known[out] || !known[in]) continue;
      doc->buffers[out].spec.dtype = doc->buffers[in].spec.dtype;
      doc->buffers[out].spec.shape = doc->buffers[in].spec.shape;
      known[out] = changed = true;
    }
  }
  pw_status_t status = NULL;
  for (uint32_t n = 0; status == NULL && n < doc->node_count; ++n) {
    if (doc->nodes[n].transfer && !known[doc->nodes[n].outputs[0]]) {
      status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "transfer node \"%.*s\": its input comes from a cycle of "
                              "transfers",
                              (int)doc->nodes[n].name_size, doc->nodes[n].name);
    }
  }
  pw_allocator_free(c->a, known, doc->buffer_count * sizeof(bool));
  return status;
}

/* Fills the document from the graph (after pw_genc_scan). */
static pw_status_t pw_genc_fill(pw_genc_t* c, const pw_graph_encode_options_t* options) {
  pw_gdoc_t* doc = &c->doc;
  bool by_hash = options != NULL && options->executables_by_hash;
  for (uint32_t v = 0; v < c->vslice_count; ++v) {
    doc->vslices[v] = ((const pw_vslice_obj_t*)c->vslices[v])->mesh;
  }
  for (uint32_t e = 0; e < c->exe_count; ++e) {
    const pw_executable_obj_t* x = c->exes[e];
    pw_gdoc_exe_t* out = &doc->exes[e];
    size_t options_size = x->options ? strlen(x->options) : 0;
    bool inline_ok = !by_hash && x->program != NULL && options_size <= PW_GDOC_OPTIONS_MAX &&
                     pw__utf8_valid((const uint8_t*)(x->options ? x->options : ""), options_size);
    if (inline_ok) {
      out->program = x->program;
      out->program_size = x->program_size;
      out->options = x->options;
      out->options_size = options_size;
      out->vslice = UINT32_MAX; /* the first node using it, below */
    } else {
      out->by_hash = true;
      out->hash = pw__graph_hash_from(pw__hash128(x->bytes, x->byte_size, 0));
    }
  }
  uint32_t compute = 0;
  for (uint32_t id = 0; id < c->node_count; ++id) {
    pw__graph_node_view_t n;
    pw__graph_node(c->g, id, &n);
    uint32_t v = pw_genc_index(c->vslices, &c->vslice_count, n.vslice, false);
    if (n.kind == PW__GRAPH_NODE_PARAMETER) {
      doc->params[n.param_index] = n.param_index;
      doc->buffers[n.param_index].vslice = v;
      doc->buffers[n.param_index].spec = *n.spec;
      continue;
    }
    pw_gdoc_node_t* node = &doc->nodes[compute++];
    node->name = n.name;
    node->name_size = strlen(n.name);
    node->vslice = v;
    uint32_t outs = n.kind == PW__GRAPH_NODE_TRANSFER ? 1
                    : n.kind == PW__GRAPH_NODE_HOST  ? n.output_count
                                                     : n.executable->signature.output_count;
    PW_RETURN_IF_ERROR_CTX(pw__gdoc_node_alloc(doc, node, n.input_count, outs),
                           "graph node %u (\"%s\")", id, n.name);
    if (n.kind == PW__GRAPH_NODE_TRANSFER) {
      char what[128];
      snprintf(what, sizeof(what), "graph node %u (\"%s\") input 0", id, n.name);
      PW_RETURN_IF_ERROR(pw_genc_value(c, n.inputs[0], what, &node->inputs[0]));
      node->transfer = true;
      node->executable = UINT32_MAX;
      node->input_count = 1;
      node->output_count = 1;
      node->outputs[0] = c->buffer_base[id];
      doc->buffers[node->outputs[0]].vslice = v;
      doc->buffers[node->outputs[0]].spec.sharding = n.transfer_sharding;
      continue; /* dtype and shape: pw_genc_transfers */
    }
    if (n.kind == PW__GRAPH_NODE_HOST) {
      node->host = n.host_task->name;
      node->host_size = strlen(n.host_task->name);
      node->executable = UINT32_MAX;
      node->input_count = n.input_count;
      for (uint32_t k = 0; k < n.input_count; ++k) {
        char what[128];
        snprintf(what, sizeof(what), "graph node %u (\"%s\") input %u", id, n.name, k);
        PW_RETURN_IF_ERROR(pw_genc_value(c, n.inputs[k], what, &node->inputs[k]));
      }
      node->output_count = n.output_count;
      for (uint32_t k = 0; k < n.output_count; ++k) {
        uint32_t b = c->buffer_base[id] + k;
        node->outputs[k] = b;
        doc->buffers[b].vslice = v;
        doc->buffers[b].spec = n.host_specs[k];
      }
      continue;
    }
    if (n.node_arg != 0) {
      return pw_status_make(PW_STATUS_UNIMPLEMENTED,
                            "graph node %u (\"%s\"): node arguments (pw_graph_set_node_arg) "
                            "are not in the graph format yet",
                            id, n.name);
    }
    node->executable =
        pw_genc_index((const void**)c->exes, &c->exe_count, n.executable, false);
    if (doc->exes[node->executable].vslice == UINT32_MAX) doc->exes[node->executable].vslice = v;
    node->input_count = n.input_count;
    for (uint32_t k = 0; k < n.input_count; ++k) {
      char what[128];
      snprintf(what, sizeof(what), "graph node %u (\"%s\") input %u", id, n.name, k);
      PW_RETURN_IF_ERROR(pw_genc_value(c, n.inputs[k], what, &node->inputs[k]));
    }
    const pw_executable_signature_t* sig = &n.executable->signature;
    node->output_count = sig->output_count;
    for (uint32_t k = 0; k < sig->output_count; ++k) {
      uint32_t b = c->buffer_base[id] + k;
      node->outputs[k] = b;
      doc->buffers[b].vslice = v;
      doc->buffers[b].spec = sig->output_specs[k];
    }
  }
  for (uint32_t o = 0; o < doc->output_count; ++o) {
    char what[32];
    snprintf(what, sizeof(what), "graph output %u", o);
    PW_RETURN_IF_ERROR(pw_genc_value(c, pw__graph_output(c->g, o), what, &doc->outputs[o]));
  }
  return NULL;
}

pw_status_t pw_graph_encode(pw_client_t* client, pw_graph_t graph,
                            const pw_graph_encode_options_t* options, pw_allocator_t allocator,
                            void** out_bytes, size_t* out_size) {
  if (out_bytes) *out_bytes = NULL;
  if (out_size) *out_size = 0;
  if (client == NULL || out_bytes == NULL || out_size == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_graph_encode: client, out_bytes or out_size is NULL");
  }
  if (options != NULL) {
    PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(options, pw_graph_encode_options_t,
                                        PW_GRAPH_ENCODE_OPTIONS_SIZE_V1, "pw_graph_encode"));
  }
  pw_genc_t c;
  memset(&c, 0, sizeof(c));
  c.a = pw_allocator_is_valid(allocator) ? allocator : pw_allocator_system();
  pw__gdoc_init(&c.doc, c.a);
  pw_allocator_t ra = client->runtime->allocator;
  uint32_t listed_count = options && options->vslices ? options->vslice_count : 0;
  pw_vslice_obj_t** listed = NULL;
  uint32_t looked_up = 0;
  pw_status_t status = NULL;
  if (listed_count > 0) {
    status = pw_allocator_calloc_array(ra, listed_count, sizeof(*listed), 0, (void**)&listed);
  }
  for (; status == NULL && looked_up < listed_count; ++looked_up) {
    char what[48];
    snprintf(what, sizeof(what), "options->vslices[%u]", looked_up);
    status = pw__handle_lookup(client, options->vslices[looked_up].id, PW_OBJECT_VSLICE, what,
                               (pw_object_t**)&listed[looked_up]);
  }
  bool acquired = false;
  if (status == NULL) {
    status = pw__graph_acquire(client, graph, &c.g);
    acquired = status == NULL;
  }
  if (status == NULL) {
    c.node_count = pw__graph_node_count(c.g);
    c.param_count = pw__graph_param_count(c.g);
    c.vslice_capacity = listed_count ? listed_count : c.node_count;
    status = pw_allocator_calloc_array(ra, (size_t)c.node_count + 1, sizeof(uint32_t), 0,
                                       (void**)&c.buffer_base);
  }
  if (status == NULL) {
    status = pw_allocator_calloc_array(ra, (size_t)c.vslice_capacity + 1, sizeof(void*), 0,
                                       (void**)&c.vslices);
  }
  if (status == NULL) {
    status = pw_allocator_calloc_array(ra, (size_t)c.node_count + 1, sizeof(void*), 0,
                                       (void**)&c.exes);
  }
  if (status == NULL && listed) {
    for (uint32_t i = 0; i < listed_count; ++i) c.vslices[i] = listed[i];
    c.vslice_count = listed_count;
  }
  if (status == NULL) status = pw_genc_scan(&c, options, listed);
  if (status == NULL) status = pw_genc_fill(&c, options);
  if (status == NULL) status = pw_genc_transfers(&c);
  if (status == NULL) c.doc.version = pw__gdoc_version_needed(&c.doc);
  if (status == NULL) {
    status = pw__gdoc_check(&c.doc);
    if (status) status = pw_status_annotate(status, "pw_graph_encode: the graph is not valid");
  }
  if (status == NULL) status = pw__gdoc_encode(&c.doc, out_bytes, out_size);
  pw__gdoc_free(&c.doc);
  if (acquired) pw__graph_done(c.g);
  pw_allocator_free(ra, c.exes, ((size_t)c.node_count + 1) * sizeof(void*));
  pw_allocator_free(ra, c.vslices, ((size_t)c.vslice_capacity + 1) * sizeof(void*));
  pw_allocator_free(ra, c.buffer_base, ((size_t)c.node_count + 1) * sizeof(uint32_t));
  for (uint32_t i = 0; i < looked_up; ++i) pw__object_release(listed[i] ? &listed[i]->header : NULL);
  pw_allocator_free(ra, listed, (size_t)listed_count * sizeof(*listed));
  return status;
}
