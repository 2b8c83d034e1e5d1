#define _POSIX_C_SOURCE 200809L
/* pw_graph_decode: a graph file -> a finalized graph of a client.
 *
 * Steps: decode and check the document (no runtime needed); bind its
 * vslices to the caller's; resolve executables by hash among the caller's;
 * consult the memo (below); compile inline programs; check every node
 * against its executable's signature, naming the file path; build the
 * graph with the public builder; finalize (validation and lowering).
 *
 * The memo (pw_graph_memo_t in the client) maps XXH3-128(canonical graph
 * hash, the bound vslice objects, the resolved executable objects) to the
 * handle of the graph decoded from it. A hit returns another handle to
 * that graph, already validated and lowered, if the remembered handle is
 * still live and still names the same object. It holds no reference, so
 * it never keeps a graph, executable or virtual slice alive (a kept
 * vslice would stay bound to its physical slice). */
#include <stdio.h>
#include <string.h>

#include "graph/host_task.h"
#include "graph_format/doc.h"
#include "pathways/struct_size.h"
#include "core/objects.h"

/* ---- memo ----------------------------------------------------------------- */

/* Decoded-graph memo (this file): canonical key of a
 * decoded file plus its bindings -> handle id of the graph made from it.
 * Weak (ids, not references): a hit needs the handle to be live. One per
 * client, made on its first use (client->graph_memo, published by a CAS;
 * without memory, decoding goes on without a memo), zero from calloc
 * (|lock| 0 = free, a spinlock), freed at pw_client_destroy
 * (its attachment's free). */
#define PW_GRAPH_MEMO_SLOTS 16
typedef struct pw_graph_memo_s {
  pw_client_attachment_t attachment; /* first: freed with the client */
  pw_atomic_u32_t lock;
  uint32_t tick;
  struct {
    uint64_t key[2];
    uint64_t graph_id;     /* 0 = empty slot */
    const void* graph;     /* identity check only, never dereferenced */
    uint32_t last_use;
  } slots[PW_GRAPH_MEMO_SLOTS];
} pw_graph_memo_t;

static void pw_memo_free(pw_client_attachment_t* a, pw_client_t* client) {
  pw_allocator_free(client->runtime->allocator, a, sizeof(pw_graph_memo_t));
}

/* |client|'s memo, made now if |make| (NULL: none, or no memory for it). */
static pw_graph_memo_t* pw_memo_of(pw_client_t* client, bool make) {
  pw_graph_memo_t* m = pw_atomic_load_ptr_acquire(&client->graph_memo);
  if (m != NULL || !make) return m;
  pw_allocator_t a = client->runtime->allocator;
  pw_status_t status = pw_allocator_calloc(a, sizeof(*m), 0, (void**)&m);
  if (status != NULL) {
    pw_status_free(status);
    return NULL;
  }
  m->attachment.free = pw_memo_free;
  void* expected = NULL;
  if (!pw_atomic_cas_ptr(&client->graph_memo, &expected, m)) {
    pw_allocator_free(a, m, sizeof(*m));
    m = expected;
  }
  return m;
}


static void pw_memo_lock(pw_graph_memo_t* m) {
  for (;;) {
    uint32_t expected = 0;
    if (pw_atomic_cas_u32(&m->lock, &expected, 1)) return;
    pw_atomic_cpu_relax();
  }
}

static void pw_memo_unlock(pw_graph_memo_t* m) { pw_atomic_store_u32_release(&m->lock, 0); }

/* A new handle to the graph remembered under |key|, or 0. */
static uint64_t pw_memo_hit(pw_client_t* client, pw_hash128_t key) {
  pw_graph_memo_t* m = pw_memo_of(client, false);
  if (m == NULL) return 0;
  uint64_t id = 0;
  const void* graph = NULL;
  pw_memo_lock(m);
  for (uint32_t i = 0; i < PW_GRAPH_MEMO_SLOTS; ++i) {
    if (m->slots[i].graph_id != 0 && m->slots[i].key[0] == key.low &&
        m->slots[i].key[1] == key.high) {
      id = m->slots[i].graph_id;
      graph = m->slots[i].graph;
      m->slots[i].last_use = ++m->tick;
      break;
    }
  }
  pw_memo_unlock(m);
  if (id == 0) return 0;
  pw_object_t* object = NULL;
  pw_status_t status = pw__handle_lookup(client, id, PW_OBJECT_GRAPH, "memo", &object);
  if (status != NULL || object != graph) {
    pw_status_free(status); /* released or replaced: a miss */
    pw__object_release(object);
    return 0;
  }
  uint64_t fresh = 0;
  status = pw__handle_insert(client, object, &fresh); /* takes the lookup's reference */
  if (status != NULL) {
    pw_status_free(status); /* decode the usual way instead */
    return 0;
  }
  /* Follow the newest handle: the memo then keeps hitting while it lives,
   * even after the earlier ones are released. */
  pw_memo_lock(m);
  for (uint32_t i = 0; i < PW_GRAPH_MEMO_SLOTS; ++i) {
    if (m->slots[i].graph_id == id && m->slots[i].graph == graph) m->slots[i].graph_id = fresh;
  }
  pw_memo_unlock(m);
  return fresh;
}

static void pw_memo_put(pw_client_t* client, pw_hash128_t key, uint64_t graph_id,
                        const void* graph) {
  pw_graph_memo_t* m = pw_memo_of(client, true);
  if (m == NULL) return;
  pw_memo_lock(m);
  uint32_t victim = 0;
  for (uint32_t i = 0; i < PW_GRAPH_MEMO_SLOTS; ++i) {
    if (m->slots[i].key[0] == key.low && m->slots[i].key[1] == key.high) {
      victim = i;
      break;
    }
    if (m->slots[i].last_use < m->slots[victim].last_use) victim = i;
  }
  m->slots[victim].key[0] = key.low;
  m->slots[victim].key[1] = key.high;
  m->slots[victim].graph_id = graph_id;
  m->slots[victim].graph = graph;
  m->slots[victim].last_use = ++m->tick;
  pw_memo_unlock(m);
}

/* ---- decoding ------------------------------------------------------------- */

typedef struct pw_gbind_t {
  pw_client_t* client;
  const pw_graph_decode_options_t* options;
  pw_allocator_t a;
  pw_gdoc_t doc;
  pw_vslice_obj_t** vslices;       /* retained, per file vslice */
  pw_executable_obj_t** exes;      /* retained, per file executable */
  pw_executable_t* exe_handles;    /* per file executable */
  bool* exe_compiled;              /* handle made here (released at the end) */
  pw_value_t* value_of;            /* per buffer */
  pw_host_task_obj_t** hosts;      /* retained, per file node (host nodes) */
  /* One node's inputs and a host node's output specs, as many as the
   * widest node has (pw_gbind_build). */
  pw_value_t* node_inputs;
  uint32_t node_input_cap;
  pw_array_spec_t* node_specs;
  uint32_t node_spec_cap;
  pw_graph_t graph;
} pw_gbind_t;

static pw_status_t pw_gbind_vslices(pw_gbind_t* b) {
  const pw_graph_decode_options_t* o = b->options;
  uint32_t given = o ? o->vslice_count : 0;
  if (given != b->doc.vslice_count || (given > 0 && o->vslices == NULL)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "the graph has %u vslices, %u virtual slices were supplied "
                          "(pw_graph_decode_options_t.vslices)",
                          b->doc.vslice_count, given);
  }
  for (uint32_t i = 0; i < given; ++i) {
    char what[48];
    snprintf(what, sizeof(what), "options->vslices[%u]", i);
    PW_RETURN_IF_ERROR(pw__handle_lookup(b->client, o->vslices[i].id, PW_OBJECT_VSLICE, what,
                                         (pw_object_t**)&b->vslices[i]));
    const pw_mesh_shape_t* have_mesh = &b->vslices[i]->mesh;
    const pw_mesh_shape_t* want_mesh = &b->doc.vslices[i];
    /* Names are labels, but where both sides name the axes they must agree:
     * a file's "data" is not the slice's "model". */
    bool names_clash = have_mesh->axis_names[0][0] != '\0' &&
                       want_mesh->axis_names[0][0] != '\0' &&
                       !pw_mesh_shape_names_equal(have_mesh, want_mesh);
    if (!pw_mesh_shape_equal(have_mesh, want_mesh) || names_clash) {
      char want[128], have[128];
      pw_mesh_shape_format(&b->doc.vslices[i], want, sizeof(want));
      pw_mesh_shape_format(&b->vslices[i]->mesh, have, sizeof(have));
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "vslices[%u]: the graph expects mesh %s, the supplied virtual slice "
                            "has mesh %s%s",
                            i, want, have, names_clash ? " (the axis names differ)" : "");
    }
  }
  return NULL;
}

/* Finds every executable written by hash among the supplied ones (each
 * supplied executable is hashed once, and only if the file needs it). */
static pw_status_t pw_gbind_by_hash(pw_gbind_t* b) {
  const pw_graph_decode_options_t* o = b->options;
  uint32_t given = o && o->executables ? o->executable_count : 0;
  pw_graph_hash_t* hashes = NULL;
  uint32_t hashed = 0;
  pw_status_t status = NULL;
  for (uint32_t e = 0; status == NULL && e < b->doc.exe_count; ++e) {
    if (!b->doc.exes[e].by_hash) continue;
    if (hashes == NULL && given > 0) {
      status = pw_allocator_calloc_array(b->a, given, sizeof(*hashes), 0, (void**)&hashes);
      for (; status == NULL && hashed < given; ++hashed) {
        pw_object_t* obj = NULL;
        char what[48];
        snprintf(what, sizeof(what), "options->executables[%u]", hashed);
        status = pw__handle_lookup(b->client, o->executables[hashed].id, PW_OBJECT_EXECUTABLE,
                                   what, &obj);
        if (status != NULL) break;
        const pw_executable_obj_t* x = (const pw_executable_obj_t*)obj;
        hashes[hashed] = pw__graph_hash_from(pw__hash128(x->bytes, x->byte_size, 0));
        pw__object_release(obj);
      }
    }
    uint32_t j = 0;
    while (status == NULL && j < given && memcmp(hashes[j].bytes, b->doc.exes[e].hash.bytes, 16)) {
      ++j;
    }
    if (status == NULL && j == given) {
      char hex[33];
      pw_graph_hash_format(&b->doc.exes[e].hash, hex);
      status = pw_status_make(PW_STATUS_NOT_FOUND,
                              "executables[%u]: no supplied executable has hash %s (%u supplied)",
                              e, hex, given);
    }
    if (status == NULL) {
      b->exe_handles[e] = o->executables[j];
      status = pw__handle_lookup(b->client, o->executables[j].id, PW_OBJECT_EXECUTABLE,
                                 "executable", (pw_object_t**)&b->exes[e]);
    }
  }
  if (hashes) pw_allocator_free(b->a, hashes, (size_t)given * sizeof(*hashes));
  return status;
}

/* Looks up each host node's task among the client's registered ones. */
static pw_status_t pw_gbind_hosts(pw_gbind_t* b) {
  for (uint32_t n = 0; n < b->doc.node_count; ++n) {
    const pw_gdoc_node_t* node = &b->doc.nodes[n];
    if (node->host == NULL) continue;
    char name[PW_GDOC_NAME_MAX + 1];
    memcpy(name, node->host, node->host_size);
    name[node->host_size] = '\0';
    PW_RETURN_IF_ERROR_CTX(pw__host_task_lookup(b->client, name, &b->hosts[n]), "nodes[%u].host",
                           n);
  }
  return NULL;
}

static pw_hash128_t pw_gbind_memo_key(const pw_gbind_t* b) {
  pw_graph_hash_t canonical = pw__gdoc_hash(&b->doc);
  pw_hasher_t h;
  pw__hasher_init(&h, 0);
  pw__hasher_update(&h, canonical.bytes, sizeof(canonical.bytes));
  for (uint32_t i = 0; i < b->doc.vslice_count; ++i) {
    pw__hasher_update_u64(&h, (uint64_t)(uintptr_t)b->vslices[i]);
  }
  for (uint32_t e = 0; e < b->doc.exe_count; ++e) {
    pw__hasher_update_u64(&h, (uint64_t)(uintptr_t)(b->doc.exes[e].by_hash ? b->exes[e] : NULL));
  }
  /* A task registered again under the same name makes another graph. */
  for (uint32_t n = 0; n < b->doc.node_count; ++n) {
    if (b->hosts[n] != NULL) pw__hasher_update_u64(&h, (uint64_t)(uintptr_t)b->hosts[n]);
  }
  return pw__hasher_final(&h);
}

static pw_status_t pw_gbind_compile(pw_gbind_t* b) {
  for (uint32_t e = 0; e < b->doc.exe_count; ++e) {
    const pw_gdoc_exe_t* x = &b->doc.exes[e];
    if (x->by_hash) continue;
    char options[PW_GDOC_OPTIONS_MAX + 1];
    memcpy(options, x->options ? x->options : "", x->options_size);
    options[x->options_size] = '\0';
    pw_vslice_t vs = b->options->vslices[x->vslice];
    PW_RETURN_IF_ERROR_CTX(pw_executable_compile(b->client, vs, x->program, x->program_size,
                                                 options, &b->exe_handles[e]),
                           "executables[%u]", e);
    b->exe_compiled[e] = true;
    PW_RETURN_IF_ERROR(pw__handle_lookup(b->client, b->exe_handles[e].id, PW_OBJECT_EXECUTABLE,
                                         "executable", (pw_object_t**)&b->exes[e]));
  }
  return NULL;
}

static pw_status_t pw_gbind_spec_error(const char* path, uint32_t buffer, const pw_array_spec_t* have,
                                       const char* verb, const pw_executable_signature_t* sig,
                                       const pw_array_spec_t* want) {
  char a[160], w[160];
  pw_array_spec_format(have, a, sizeof(a));
  pw_array_spec_format(want, w, sizeof(w));
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: buffer %u is %s, executable '%s' %s %s",
                        path, buffer, a, sig->name, verb, w);
}

/* Checks each node against its executable's signature. */
static pw_status_t pw_gbind_check_nodes(const pw_gbind_t* b) {
  const pw_gdoc_t* doc = &b->doc;
  for (uint32_t n = 0; n < doc->node_count; ++n) {
    const pw_gdoc_node_t* node = &doc->nodes[n];
    /* pw__gdoc_check did a transfer's dtype and shape; a host node's
     * outputs are the specs its buffers give. */
    if (node->transfer || node->host != NULL) continue;
    const pw_executable_obj_t* x = b->exes[node->executable];
    const pw_vslice_obj_t* vs = b->vslices[node->vslice];
    const pw_executable_signature_t* sig = &x->signature;
    if (x->backend != vs->slice->backend) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "nodes[%u]: executables[%u] ('%s') was compiled for another backend "
                            "than the one of slice '%s' (vslice %u)",
                            n, node->executable, sig->name, vs->slice->name, node->vslice);
    }
    if (!pw_mesh_shape_equal(&sig->mesh, &vs->mesh)) {
      char a[32], m[32];
      pw_mesh_shape_format(&sig->mesh, a, sizeof(a));
      pw_mesh_shape_format(&vs->mesh, m, sizeof(m));
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "nodes[%u]: executables[%u] ('%s') is compiled for mesh %s, vslice %u "
                            "has mesh %s",
                            n, node->executable, sig->name, a, node->vslice, m);
    }
    if (node->input_count != sig->input_count) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "nodes[%u].inputs: %u buffers given, executable '%s' takes %u", n,
                            node->input_count, sig->name, sig->input_count);
    }
    if (node->output_count != sig->output_count) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "nodes[%u].outputs: %u buffers given, executable '%s' produces %u", n,
                            node->output_count, sig->name, sig->output_count);
    }
    char path[64];
    for (uint32_t k = 0; k < node->input_count; ++k) {
      const pw_array_spec_t* have = &doc->buffers[node->inputs[k]].spec;
      if (!pw_array_spec_equal(have, &sig->input_specs[k])) {
        snprintf(path, sizeof(path), "nodes[%u].inputs[%u]", n, k);
        return pw_gbind_spec_error(path, node->inputs[k], have, "expects", sig, &sig->input_specs[k]);
      }
    }
    for (uint32_t k = 0; k < node->output_count; ++k) {
      const pw_array_spec_t* have = &doc->buffers[node->outputs[k]].spec;
      if (!pw_array_spec_equal(have, &sig->output_specs[k])) {
        snprintf(path, sizeof(path), "nodes[%u].outputs[%u]", n, k);
        return pw_gbind_spec_error(path, node->outputs[k], have, "produces", sig,
                                   &sig->output_specs[k]);
      }
    }
  }
  return NULL;
}

/* Builds and finalizes the graph with the public builder: parameters are
 * nodes 0..P-1, file node n is node P + n. */
static pw_status_t pw_gbind_alloc(pw_gbind_t* b, size_t count, size_t size, void* out);

static pw_status_t pw_gbind_build(pw_gbind_t* b) {
  const pw_gdoc_t* doc = &b->doc;
  pw_client_t* client = b->client;
  uint32_t max_in = 0, max_specs = 0;
  for (uint32_t n = 0; n < doc->node_count; ++n) {
    const pw_gdoc_node_t* node = &doc->nodes[n];
    if (node->input_count > max_in) max_in = node->input_count;
    if (node->host != NULL && node->output_count > max_specs) max_specs = node->output_count;
  }
  PW_RETURN_IF_ERROR(pw_gbind_alloc(b, max_in, sizeof(pw_value_t), &b->node_inputs));
  b->node_input_cap = max_in;
  PW_RETURN_IF_ERROR(pw_gbind_alloc(b, max_specs, sizeof(pw_array_spec_t), &b->node_specs));
  b->node_spec_cap = max_specs;
  for (uint32_t i = 0; i < doc->param_count; ++i) b->value_of[doc->params[i]] = pw_value(i, 0);
  for (uint32_t n = 0; n < doc->node_count; ++n) {
    for (uint32_t k = 0; k < doc->nodes[n].output_count; ++k) {
      b->value_of[doc->nodes[n].outputs[k]] = pw_value(doc->param_count + n, k);
    }
  }
  PW_RETURN_IF_ERROR(pw_graph_create(client, &b->graph));
  for (uint32_t i = 0; i < doc->param_count; ++i) {
    const pw_gdoc_buffer_t* buffer = &doc->buffers[doc->params[i]];
    PW_RETURN_IF_ERROR_CTX(pw_graph_add_parameter(client, b->graph,
                                                  b->options->vslices[buffer->vslice],
                                                  &buffer->spec, NULL),
                           "parameters[%u]", i);
  }
  for (uint32_t n = 0; n < doc->node_count; ++n) {
    const pw_gdoc_node_t* node = &doc->nodes[n];
    pw_value_t* inputs = b->node_inputs;
    for (uint32_t k = 0; k < node->input_count; ++k) inputs[k] = b->value_of[node->inputs[k]];
    char name[PW_GDOC_NAME_MAX + 1];
    memcpy(name, node->name, node->name_size);
    name[node->name_size] = '\0';
    if (node->host != NULL) {
      pw_array_spec_t* specs = b->node_specs;
      for (uint32_t k = 0; k < node->output_count; ++k) specs[k] = doc->buffers[node->outputs[k]].spec;
      pw_host_task_obj_t* task = b->hosts[n];
      b->hosts[n] = NULL; /* the graph's now, or released */
      PW_RETURN_IF_ERROR_CTX(
          pw__graph_add_host_task(client, b->graph, name, task, b->options->vslices[node->vslice],
                                  inputs, node->input_count, specs, node->output_count, NULL),
          "nodes[%u]", n);
      continue;
    }
    if (node->transfer) {
      PW_RETURN_IF_ERROR_CTX(
          pw_graph_add_transfer(client, b->graph, name, inputs[0],
                                b->options->vslices[node->vslice],
                                doc->buffers[node->outputs[0]].spec.sharding, NULL),
          "nodes[%u]", n);
      continue;
    }
    PW_RETURN_IF_ERROR_CTX(
        pw_graph_add_compute(client, b->graph, name, b->exe_handles[node->executable],
                             b->options->vslices[node->vslice], inputs, node->input_count, NULL),
        "nodes[%u]", n);
  }
  for (uint32_t i = 0; i < doc->output_count; ++i) {
    PW_RETURN_IF_ERROR_CTX(pw_graph_add_output(client, b->graph, b->value_of[doc->outputs[i]]),
                           "outputs[%u]", i);
  }
  PW_RETURN_IF_ERROR_CTX(pw_graph_finalize(client, b->graph),
                         "finalizing the decoded graph (parameter i is graph node i, nodes[n] "
                         "is graph node %u + n)",
                         doc->param_count);
  return NULL;
}

static pw_status_t pw_gbind_alloc(pw_gbind_t* b, size_t count, size_t size, void* out) {
  *(void**)out = NULL;
  if (count == 0) return NULL;
  return pw_allocator_calloc_array(b->a, count, size, 0, (void**)out);
}

static void pw_gbind_free(pw_gbind_t* b) {
  const pw_gdoc_t* doc = &b->doc;
  for (uint32_t i = 0; b->vslices && i < doc->vslice_count; ++i) {
    pw__object_release(b->vslices[i] ? &b->vslices[i]->header : NULL);
  }
  for (uint32_t e = 0; b->exes && e < doc->exe_count; ++e) {
    pw__object_release(b->exes[e] ? &b->exes[e]->header : NULL);
    if (b->exe_compiled && b->exe_compiled[e]) {
      pw_status_ignore(pw_executable_release(b->client, b->exe_handles[e]));
    }
  }
  pw_allocator_free(b->a, b->vslices, (size_t)doc->vslice_count * sizeof(*b->vslices));
  pw_allocator_free(b->a, b->exes, (size_t)doc->exe_count * sizeof(*b->exes));
  pw_allocator_free(b->a, b->exe_handles, (size_t)doc->exe_count * sizeof(*b->exe_handles));
  pw_allocator_free(b->a, b->exe_compiled, (size_t)doc->exe_count * sizeof(*b->exe_compiled));
  pw_allocator_free(b->a, b->value_of, (size_t)doc->buffer_count * sizeof(*b->value_of));
  for (uint32_t n = 0; b->hosts && n < doc->node_count; ++n) pw__host_task_release(b->hosts[n]);
  pw_allocator_free(b->a, b->hosts, (size_t)doc->node_count * sizeof(*b->hosts));
  pw_allocator_free(b->a, b->node_inputs, (size_t)b->node_input_cap * sizeof(pw_value_t));
  pw_allocator_free(b->a, b->node_specs, (size_t)b->node_spec_cap * sizeof(pw_array_spec_t));
  pw__gdoc_free(&b->doc);
}

pw_status_t pw_graph_decode(pw_client_t* client, const void* bytes, size_t size,
                            const pw_graph_decode_options_t* options, pw_graph_t* out_graph) {
  if (out_graph) out_graph->id = 0;
  if (client == NULL || out_graph == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_graph_decode: client or out_graph is NULL");
  }
  if (options != NULL) {
    PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(options, pw_graph_decode_options_t,
                                        PW_GRAPH_DECODE_OPTIONS_SIZE_V1, "pw_graph_decode"));
  }
  pw_gbind_t b;
  memset(&b, 0, sizeof(b));
  b.client = client;
  b.options = options;
  b.a = client->runtime->allocator;
  pw__gdoc_init(&b.doc, b.a);
  PW_RETURN_IF_ERROR(pw__gdoc_load(&b.doc, bytes, size));
  const pw_gdoc_t* doc = &b.doc;
  pw_status_t status = pw_gbind_alloc(&b, doc->vslice_count, sizeof(*b.vslices), &b.vslices);
  if (!status) status = pw_gbind_alloc(&b, doc->exe_count, sizeof(*b.exes), &b.exes);
  if (!status) status = pw_gbind_alloc(&b, doc->exe_count, sizeof(*b.exe_handles), &b.exe_handles);
  if (!status) status = pw_gbind_alloc(&b, doc->exe_count, sizeof(bool), &b.exe_compiled);
  if (!status) status = pw_gbind_alloc(&b, doc->buffer_count, sizeof(*b.value_of), &b.value_of);
  if (!status) status = pw_gbind_alloc(&b, doc->node_count, sizeof(*b.hosts), &b.hosts);
  if (!status) status = pw_gbind_vslices(&b);
  if (!status) status = pw_gbind_hosts(&b);
  if (!status) status = pw_gbind_by_hash(&b);
  pw_hash128_t key = {0, 0};
  if (!status) {
    key = pw_gbind_memo_key(&b);
    out_graph->id = pw_memo_hit(client, key);
    if (out_graph->id != 0) {
      pw_gbind_free(&b);
      return NULL;
    }
  }
  if (!status) status = pw_gbind_compile(&b);
  if (!status) status = pw_gbind_check_nodes(&b);
  if (!status) status = pw_gbind_build(&b);
  if (status == NULL) {
    pw_object_t* object = NULL;
    pw_status_t lookup = pw__handle_lookup(client, b.graph.id, PW_OBJECT_GRAPH, "graph", &object);
    if (lookup == NULL) pw_memo_put(client, key, b.graph.id, object);
    pw_status_free(lookup); /* no memo entry then: only a later decode pays */
    pw__object_release(object);
    *out_graph = b.graph;
  } else if (b.graph.id != 0) {
    pw_status_ignore(pw_graph_release(client, b.graph));
  }
  pw_gbind_free(&b);
  return status;
}
