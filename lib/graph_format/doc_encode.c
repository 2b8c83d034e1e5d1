#define _POSIX_C_SOURCE 200809L
/* Documents -> deterministic CBOR (RFC 8949 section 4.2: definite lengths,
 * shortest heads, map keys ordered by their encodings, which for these
 * short text keys means shorter keys first, then bytewise), the canonical
 * hash, and the document's lifetime helpers. */
#include <string.h>

#include "graph_format/doc.h"

void pw__gdoc_init(pw_gdoc_t* doc, pw_allocator_t allocator) {
  memset(doc, 0, sizeof(*doc));
  doc->allocator = pw_allocator_is_valid(allocator) ? allocator : pw_allocator_system();
  doc->version = 1;
}

pw_status_t pw__gdoc_node_alloc(pw_gdoc_t* doc, pw_gdoc_node_t* node, uint32_t inputs,
                                uint32_t outputs) {
  node->input_count = node->output_count = 0;
  node->inputs = node->outputs = NULL;
  if (inputs > 0) {
    PW_RETURN_IF_ERROR(pw_allocator_calloc_array(doc->allocator, inputs, sizeof(uint32_t), 0,
                                                 (void**)&node->inputs));
  }
  if (outputs > 0) {
    pw_status_t status = pw_allocator_calloc_array(doc->allocator, outputs, sizeof(uint32_t), 0,
                                                   (void**)&node->outputs);
    if (status != NULL) {
      pw_allocator_free(doc->allocator, node->inputs, (size_t)inputs * sizeof(uint32_t));
      node->inputs = NULL;
      return status;
    }
  }
  node->input_count = inputs;
  node->output_count = outputs;
  return NULL;
}

void pw__gdoc_free(pw_gdoc_t* doc) {
  pw_allocator_t a = doc->allocator;
  pw_allocator_free(a, doc->vslices, (size_t)doc->vslice_count * sizeof(pw_mesh_shape_t));
  pw_allocator_free(a, doc->exes, (size_t)doc->exe_count * sizeof(pw_gdoc_exe_t));
  pw_allocator_free(a, doc->buffers, (size_t)doc->buffer_count * sizeof(pw_gdoc_buffer_t));
  pw_allocator_free(a, doc->params, (size_t)doc->param_count * sizeof(uint32_t));
  for (uint32_t n = 0; doc->nodes != NULL && n < doc->node_count; ++n) {
    pw_allocator_free(a, doc->nodes[n].inputs, (size_t)doc->nodes[n].input_count * sizeof(uint32_t));
    pw_allocator_free(a, doc->nodes[n].outputs,
                      (size_t)doc->nodes[n].output_count * sizeof(uint32_t));
  }
  pw_allocator_free(a, doc->nodes, (size_t)doc->node_count * sizeof(pw_gdoc_node_t));
  pw_allocator_free(a, doc->outputs, (size_t)doc->output_count * sizeof(uint32_t));
  pw__gdoc_init(doc, a);
}

static pw_status_t pw_gdoc_array(pw_gdoc_t* doc, uint32_t count, size_t size, void** out,
                                 uint32_t* out_count) {
  *out = NULL;
  *out_count = 0;
  if (count == 0) return NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc_array(doc->allocator, count, size, 0, out));
  *out_count = count;
  return NULL;
}

pw_status_t pw__gdoc_alloc(pw_gdoc_t* doc, uint32_t vslices, uint32_t exes, uint32_t buffers,
                           uint32_t params, uint32_t nodes, uint32_t outputs) {
  pw_status_t s = pw_gdoc_array(doc, vslices, sizeof(pw_mesh_shape_t), (void**)&doc->vslices,
                                &doc->vslice_count);
  if (!s) s = pw_gdoc_array(doc, exes, sizeof(pw_gdoc_exe_t), (void**)&doc->exes, &doc->exe_count);
  if (!s) {
    s = pw_gdoc_array(doc, buffers, sizeof(pw_gdoc_buffer_t), (void**)&doc->buffers,
                      &doc->buffer_count);
  }
  if (!s) s = pw_gdoc_array(doc, params, sizeof(uint32_t), (void**)&doc->params, &doc->param_count);
  if (!s) s = pw_gdoc_array(doc, nodes, sizeof(pw_gdoc_node_t), (void**)&doc->nodes, &doc->node_count);
  if (!s) {
    s = pw_gdoc_array(doc, outputs, sizeof(uint32_t), (void**)&doc->outputs, &doc->output_count);
  }
  if (s) pw__gdoc_free(doc);
  return s;
}

pw_status_t pw__gdoc_load(pw_gdoc_t* doc, const void* bytes, size_t size) {
  PW_RETURN_IF_ERROR(pw__gdoc_decode(doc, bytes, size));
  pw_status_t status = pw__gdoc_check(doc);
  if (status != NULL) pw__gdoc_free(doc);
  return status;
}

static void pw_gdoc_emit_refs(pw_cbor_writer_t* w, const uint32_t* refs, uint32_t count) {
  pw__cbor_write_array(w, count);
  for (uint32_t i = 0; i < count; ++i) pw__cbor_write_uint(w, refs[i]);
}

/* One mesh axis of a tiled sharding: its name when the mesh names its
 * axes, else its index. */
static void pw_gdoc_emit_axis(pw_cbor_writer_t* w, const pw_mesh_shape_t* mesh, uint32_t axis) {
  if (mesh != NULL && axis < mesh->rank && axis < PW_MAX_MESH_RANK &&
      mesh->axis_names[axis][0] != '\0') {
    pw__cbor_write_text(w, mesh->axis_names[axis],
                        strnlen(mesh->axis_names[axis], PW_MESH_AXIS_NAME_MAX));
  } else {
    pw__cbor_write_uint(w, axis);
  }
}

/* {"spec": [[axes of dimension 0], ...], "unreduced": [axes]}: one entry
 * per dimension, the tiles of each in their order; "unreduced" only when
 * some axis is. */
static void pw_gdoc_emit_tiled(pw_cbor_writer_t* w, const pw_sharding_t* s, uint32_t rank,
                               const pw_mesh_shape_t* mesh) {
  uint32_t tiles = s->tile_count < PW_MAX_MESH_RANK ? s->tile_count : PW_MAX_MESH_RANK;
  uint32_t unreduced = s->unreduced_axes & ((1u << PW_MAX_MESH_RANK) - 1);
  pw__cbor_write_map(w, unreduced ? 2 : 1);
  pw__cbor_write_key(w, "spec");
  pw__cbor_write_array(w, rank);
  for (uint32_t t = 0; t < rank; ++t) {
    uint32_t count = 0;
    for (uint32_t i = 0; i < tiles; ++i) count += s->tiles[i].tensor_axis == t;
    pw__cbor_write_array(w, count);
    for (uint32_t i = 0; i < tiles; ++i) {
      if (s->tiles[i].tensor_axis == t) pw_gdoc_emit_axis(w, mesh, s->tiles[i].mesh_axis);
    }
  }
  if (unreduced == 0) return;
  pw__cbor_write_key(w, "unreduced");
  uint32_t count = 0;
  for (uint32_t a = 0; a < PW_MAX_MESH_RANK; ++a) count += (unreduced >> a) & 1u;
  pw__cbor_write_array(w, count);
  for (uint32_t a = 0; a < PW_MAX_MESH_RANK; ++a) {
    if (unreduced & (1u << a)) pw_gdoc_emit_axis(w, mesh, a);
  }
}

static void pw_gdoc_emit_buffer(pw_cbor_writer_t* w, const pw_gdoc_t* doc,
                                const pw_gdoc_buffer_t* b) {
  uint32_t rank = b->spec.shape.rank < PW_MAX_RANK ? b->spec.shape.rank : PW_MAX_RANK;
  pw__cbor_write_map(w, 4);
  pw__cbor_write_key(w, "dtype");
  pw__cbor_write_key(w, pw_dtype_name(b->spec.dtype));
  pw__cbor_write_key(w, "shape");
  pw__cbor_write_array(w, rank);
  for (uint32_t i = 0; i < rank; ++i) pw__cbor_write_uint(w, (uint64_t)b->spec.shape.dims[i]);
  pw__cbor_write_key(w, "vslice");
  pw__cbor_write_uint(w, b->vslice);
  pw__cbor_write_key(w, "sharding");
  const pw_sharding_t* s = &b->spec.sharding;
  if (s->kind == PW_SHARDING_REPLICATED) {
    pw__cbor_write_key(w, "replicated");
  } else if (s->kind == PW_SHARDING_TILED) {
    pw_gdoc_emit_tiled(w, s, rank,
                       b->vslice < doc->vslice_count ? &doc->vslices[b->vslice] : NULL);
  } else {
    pw__cbor_write_map(w, 2);
    pw__cbor_write_key(w, "split");
    pw__cbor_write_uint(w, s->tensor_axis);
    pw__cbor_write_key(w, "mesh_axis");
    if (s->mesh_axis == PW_MESH_AXIS_ALL) {
      pw__cbor_write_key(w, "all");
    } else {
      pw__cbor_write_uint(w, s->mesh_axis);
    }
  }
}

/* [2, 4], or [["data", 2], ["model", 4]] when the axes are named. */
static void pw_gdoc_emit_mesh(pw_cbor_writer_t* w, const pw_mesh_shape_t* m) {
  uint32_t rank = m->rank < PW_MAX_MESH_RANK ? m->rank : PW_MAX_MESH_RANK;
  bool named = rank > 0 && m->axis_names[0][0] != '\0';
  pw__cbor_write_array(w, rank);
  for (uint32_t k = 0; k < rank; ++k) {
    if (named) {
      pw__cbor_write_array(w, 2);
      pw__cbor_write_text(w, m->axis_names[k], strnlen(m->axis_names[k], PW_MESH_AXIS_NAME_MAX));
    }
    pw__cbor_write_uint(w, m->dims[k]);
  }
}

uint32_t pw__gdoc_version_needed(const pw_gdoc_t* doc) {
  for (uint32_t i = 0; i < doc->vslice_count; ++i) {
    if (doc->vslices[i].axis_names[0][0] != '\0') return 3;
  }
  for (uint32_t i = 0; i < doc->buffer_count; ++i) {
    if (doc->buffers[i].spec.sharding.kind == PW_SHARDING_TILED) return 3;
  }
  for (uint32_t i = 0; i < doc->node_count; ++i) {
    if (doc->nodes[i].host != NULL) return 2;
  }
  return 1;
}

static void pw_gdoc_emit_exe(pw_cbor_writer_t* w, const pw_gdoc_exe_t* e) {
  if (e->by_hash) {
    pw__cbor_write_map(w, 1);
    pw__cbor_write_key(w, "hash");
    pw__cbor_write_bytes(w, e->hash.bytes, sizeof(e->hash.bytes));
    return;
  }
  pw__cbor_write_map(w, 3);
  pw__cbor_write_key(w, "vslice");
  pw__cbor_write_uint(w, e->vslice);
  pw__cbor_write_key(w, "options");
  pw__cbor_write_text(w, e->options ? e->options : "", e->options ? e->options_size : 0);
  pw__cbor_write_key(w, "program");
  pw__cbor_write_bytes(w, e->program, e->program_size);
}

static void pw_gdoc_emit_node(pw_cbor_writer_t* w, const pw_gdoc_node_t* n) {
  pw__cbor_write_map(w, n->transfer ? 4 : 5);
  if (n->host != NULL) {
    pw__cbor_write_key(w, "host"); /* "host" sorts before "name" */
    pw__cbor_write_text(w, n->host, n->host_size);
  }
  pw__cbor_write_key(w, "name");
  pw__cbor_write_text(w, n->name, n->name_size);
  pw__cbor_write_key(w, "inputs");
  pw_gdoc_emit_refs(w, n->inputs, n->input_count);
  pw__cbor_write_key(w, "vslice");
  pw__cbor_write_uint(w, n->vslice);
  pw__cbor_write_key(w, "outputs");
  pw_gdoc_emit_refs(w, n->outputs, n->output_count);
  if (n->transfer || n->host != NULL) return;
  pw__cbor_write_key(w, "executable");
  pw__cbor_write_uint(w, n->executable);
}

void pw__gdoc_emit(pw_cbor_writer_t* w, const pw_gdoc_t* doc) {
  pw__cbor_write_map(w, 7);
  pw__cbor_write_key(w, "v");
  pw__cbor_write_uint(w, doc->version);
  pw__cbor_write_key(w, "nodes");
  pw__cbor_write_array(w, doc->node_count);
  for (uint32_t i = 0; i < doc->node_count; ++i) pw_gdoc_emit_node(w, &doc->nodes[i]);
  pw__cbor_write_key(w, "buffers");
  pw__cbor_write_array(w, doc->buffer_count);
  for (uint32_t i = 0; i < doc->buffer_count; ++i) pw_gdoc_emit_buffer(w, doc, &doc->buffers[i]);
  pw__cbor_write_key(w, "outputs");
  pw_gdoc_emit_refs(w, doc->outputs, doc->output_count);
  pw__cbor_write_key(w, "vslices");
  pw__cbor_write_array(w, doc->vslice_count);
  for (uint32_t i = 0; i < doc->vslice_count; ++i) pw_gdoc_emit_mesh(w, &doc->vslices[i]);
  pw__cbor_write_key(w, "parameters");
  pw_gdoc_emit_refs(w, doc->params, doc->param_count);
  pw__cbor_write_key(w, "executables");
  pw__cbor_write_array(w, doc->exe_count);
  for (uint32_t i = 0; i < doc->exe_count; ++i) pw_gdoc_emit_exe(w, &doc->exes[i]);
}

static void pw_gdoc_emit_fn(pw_cbor_writer_t* w, const void* user) { pw__gdoc_emit(w, user); }

pw_status_t pw__gdoc_encode(const pw_gdoc_t* doc, void** out_bytes, size_t* out_size) {
  return pw__cbor_encode(pw_gdoc_emit_fn, doc, doc->allocator, out_bytes, out_size);
}

pw_graph_hash_t pw__graph_hash_from(pw_hash128_t hash) {
  pw_graph_hash_t out;
  for (int i = 0; i < 8; ++i) {
    out.bytes[i] = (uint8_t)(hash.high >> (56 - 8 * i));
    out.bytes[8 + i] = (uint8_t)(hash.low >> (56 - 8 * i));
  }
  return out;
}

pw_graph_hash_t pw__gdoc_hash(const pw_gdoc_t* doc) {
  pw_hasher_t hasher;
  pw__hasher_init(&hasher, 0);
  pw_cbor_writer_t w;
  memset(&w, 0, sizeof(w));
  w.sink = PW_CBOR_SINK_HASH;
  w.hasher = &hasher;
  pw__gdoc_emit(&w, doc);
  return pw__graph_hash_from(pw__hasher_final(&hasher));
}

void pw_graph_hash_format(const pw_graph_hash_t* hash, char out[33]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    out[2 * i] = digits[hash->bytes[i] >> 4];
    out[2 * i + 1] = digits[hash->bytes[i] & 15];
  }
  out[32] = '\0';
}
