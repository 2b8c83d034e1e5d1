#define _POSIX_C_SOURCE 200809L
/* Structural checks of a graph document: references, specs against
 * meshes, one producer per buffer, every buffer and executable used, no
 * cycle. Messages name the path ("nodes[3].inputs[1]: ..."). */
#include <stdio.h>
#include <string.h>

#include "graph_format/doc.h"

#define PW_GDOC_ERR(...) pw_status_make(PW_STATUS_INVALID_ARGUMENT, __VA_ARGS__)

typedef struct pw_gcheck_t {
  const pw_gdoc_t* doc;
  uint32_t* producer;      /* per buffer: parameter i, or param_count + node n */
  uint8_t* exe_used;
  uint32_t* indegree;      /* per node: inputs produced by nodes */
  uint32_t* queue;
  uint32_t* consumer_start;
  uint32_t* consumers;
  uint32_t edge_count;
} pw_gcheck_t;

static pw_status_t pw_gcheck_alloc(const pw_gdoc_t* doc, size_t count, size_t size, void* out) {
  *(void**)out = NULL;
  if (count == 0) return NULL;
  return pw_allocator_calloc_array(doc->allocator, count, size, 0, (void**)out);
}

static void pw_gcheck_free(pw_gcheck_t* c) {
  const pw_gdoc_t* doc = c->doc;
  pw_allocator_t a = doc->allocator;
  pw_allocator_free(a, c->producer, (size_t)doc->buffer_count * sizeof(uint32_t));
  pw_allocator_free(a, c->exe_used, doc->exe_count);
  pw_allocator_free(a, c->indegree, (size_t)doc->node_count * sizeof(uint32_t));
  pw_allocator_free(a, c->queue, (size_t)doc->node_count * sizeof(uint32_t));
  pw_allocator_free(a, c->consumer_start, ((size_t)doc->node_count + 1) * sizeof(uint32_t));
  pw_allocator_free(a, c->consumers, (size_t)c->edge_count * sizeof(uint32_t));
}

static void pw_gcheck_describe(const pw_gcheck_t* c, uint32_t producer, char* out, size_t size) {
  const pw_gdoc_t* doc = c->doc;
  if (producer < doc->param_count) {
    snprintf(out, size, "parameter %u", producer);
  } else {
    uint32_t n = producer - doc->param_count;
    snprintf(out, size, "produced by nodes[%u] (\"%.*s\")", n, (int)doc->nodes[n].name_size,
             doc->nodes[n].name);
  }
}

static pw_status_t pw_gcheck_buffer_ref(const pw_gcheck_t* c, uint32_t buffer, const char* path) {
  if (buffer >= c->doc->buffer_count) {
    return PW_GDOC_ERR("%s: refers to buffer %u, which does not exist (%u buffers)", path,
                       buffer, c->doc->buffer_count);
  }
  return NULL;
}

static pw_status_t pw_gcheck_vslice_ref(const pw_gdoc_t* doc, uint32_t vslice, const char* path) {
  if (vslice >= doc->vslice_count) {
    return PW_GDOC_ERR("%s: refers to vslice %u, which does not exist (%u vslices)", path,
                       vslice, doc->vslice_count);
  }
  return NULL;
}

/* Claims |buffer| for |producer|; an error if someone produces it already. */
static pw_status_t pw_gcheck_produce(pw_gcheck_t* c, uint32_t buffer, uint32_t producer,
                                     const char* path) {
  PW_RETURN_IF_ERROR(pw_gcheck_buffer_ref(c, buffer, path));
  if (c->producer[buffer] != PW_GDOC_NO_PRODUCER) {
    char who[96];
    pw_gcheck_describe(c, c->producer[buffer], who, sizeof(who));
    return PW_GDOC_ERR("%s: buffer %u is already %s", path, buffer, who);
  }
  c->producer[buffer] = producer;
  return NULL;
}

static pw_status_t pw_gcheck_nodes(pw_gcheck_t* c) {
  const pw_gdoc_t* doc = c->doc;
  char path[96];
  for (uint32_t n = 0; n < doc->node_count; ++n) {
    const pw_gdoc_node_t* node = &doc->nodes[n];
    bool compute = !node->transfer && node->host == NULL;
    if (compute && node->executable >= doc->exe_count) {
      return PW_GDOC_ERR("nodes[%u].executable: refers to executable %u, which does not "
                         "exist (%u executables)",
                         n, node->executable, doc->exe_count);
    }
    snprintf(path, sizeof(path), "nodes[%u].vslice", n);
    PW_RETURN_IF_ERROR(pw_gcheck_vslice_ref(doc, node->vslice, path));
    const pw_gdoc_exe_t* exe = compute ? &doc->exes[node->executable] : NULL;
    if (exe) c->exe_used[node->executable] = 1;
    if (exe && !exe->by_hash &&
        !pw_mesh_shape_equal(&doc->vslices[exe->vslice], &doc->vslices[node->vslice])) {
      char a[32], b[32];
      pw_mesh_shape_format(&doc->vslices[exe->vslice], a, sizeof(a));
      pw_mesh_shape_format(&doc->vslices[node->vslice], b, sizeof(b));
      return PW_GDOC_ERR("nodes[%u]: executable %u is compiled for vslice %u (mesh %s), the "
                         "node runs on vslice %u (mesh %s)",
                         n, node->executable, exe->vslice, a, node->vslice, b);
    }
    for (uint32_t k = 0; k < node->output_count; ++k) {
      snprintf(path, sizeof(path), "nodes[%u].outputs[%u]", n, k);
      uint32_t b = node->outputs[k];
      PW_RETURN_IF_ERROR(pw_gcheck_produce(c, b, doc->param_count + n, path));
      if (doc->buffers[b].vslice != node->vslice) {
        return PW_GDOC_ERR("%s: buffer %u lives on vslice %u, the node runs on vslice %u",
                           path, b, doc->buffers[b].vslice, node->vslice);
      }
    }
  }
  for (uint32_t n = 0; n < doc->node_count; ++n) {
    const pw_gdoc_node_t* node = &doc->nodes[n];
    for (uint32_t k = 0; k < node->input_count; ++k) {
      snprintf(path, sizeof(path), "nodes[%u].inputs[%u]", n, k);
      uint32_t b = node->inputs[k];
      PW_RETURN_IF_ERROR(pw_gcheck_buffer_ref(c, b, path));
      if (c->producer[b] == PW_GDOC_NO_PRODUCER) {
        return PW_GDOC_ERR("%s: buffer %u is neither a parameter nor a node output", path, b);
      }
      if (node->transfer) {
        /* Moves between slices; keeps dtype and shape. */
        const pw_array_spec_t* in = &doc->buffers[b].spec;
        const pw_array_spec_t* out = &doc->buffers[node->outputs[0]].spec;
        if (in->dtype != out->dtype || !pw_shape_equal(&in->shape, &out->shape)) {
          char a[64], o[64];
          pw_shape_format(in->dtype, &in->shape, a, sizeof(a));
          pw_shape_format(out->dtype, &out->shape, o, sizeof(o));
          return PW_GDOC_ERR("nodes[%u].outputs[0]: a transfer keeps dtype and shape: buffer "
                             "%u is %s, its input (buffer %u) is %s",
                             n, node->outputs[0], o, b, a);
        }
      } else if (doc->buffers[b].vslice != node->vslice) {
        return PW_GDOC_ERR("%s: buffer %u lives on vslice %u, the node runs on vslice %u "
                           "(moving data between slices needs a transfer node)",
                           path, b, doc->buffers[b].vslice, node->vslice);
      }
      if (c->producer[b] >= doc->param_count) c->edge_count++;
    }
  }
  return NULL;
}

/* Describes a cycle among the nodes left with unresolved inputs. */
static pw_status_t pw_gcheck_cycle(const pw_gcheck_t* c) {
  const pw_gdoc_t* doc = c->doc;
  uint32_t cur = 0;
  while (c->indegree[cur] == 0) ++cur;
  /* Step back through producers node_count times: then |cur| is on a cycle. */
  for (uint32_t step = 0; step <= doc->node_count; ++step) {
    const pw_gdoc_node_t* node = &doc->nodes[cur];
    for (uint32_t k = 0; k < node->input_count; ++k) {
      uint32_t p = c->producer[node->inputs[k]];
      if (p >= doc->param_count && c->indegree[p - doc->param_count] != 0) {
        cur = p - doc->param_count;
        break;
      }
    }
  }
  char text[400];
  size_t len = 0;
  uint32_t start = cur;
  uint32_t steps = 0;
  do {
    const pw_gdoc_node_t* node = &doc->nodes[cur];
    int w = snprintf(text + len, sizeof(text) - len, "%snodes[%u] (\"%.*s\")",
                     steps ? " <- " : "", cur, (int)node->name_size, node->name);
    if (w > 0) len = len + (size_t)w < sizeof(text) ? len + (size_t)w : sizeof(text) - 1;
    for (uint32_t k = 0; k < node->input_count; ++k) {
      uint32_t p = c->producer[node->inputs[k]];
      if (p >= doc->param_count && c->indegree[p - doc->param_count] != 0) {
        cur = p - doc->param_count;
        break;
      }
    }
    ++steps;
  } while (cur != start && steps < doc->node_count);
  return PW_GDOC_ERR("graph has a cycle (each node consumes the next one's output): %s <- "
                     "nodes[%u]",
                     text, start);
}

static pw_status_t pw_gcheck_order(pw_gcheck_t* c) {
  const pw_gdoc_t* doc = c->doc;
  if (doc->node_count == 0) return NULL;
  PW_RETURN_IF_ERROR(pw_gcheck_alloc(doc, doc->node_count, sizeof(uint32_t), &c->indegree));
  PW_RETURN_IF_ERROR(pw_gcheck_alloc(doc, doc->node_count, sizeof(uint32_t), &c->queue));
  PW_RETURN_IF_ERROR(
      pw_gcheck_alloc(doc, (size_t)doc->node_count + 1, sizeof(uint32_t), &c->consumer_start));
  PW_RETURN_IF_ERROR(pw_gcheck_alloc(doc, c->edge_count, sizeof(uint32_t), &c->consumers));
  for (uint32_t n = 0; n < doc->node_count; ++n) {
    for (uint32_t k = 0; k < doc->nodes[n].input_count; ++k) {
      uint32_t p = c->producer[doc->nodes[n].inputs[k]];
      if (p < doc->param_count) continue;
      c->indegree[n]++;
      c->consumer_start[p - doc->param_count + 1]++;
    }
  }
  for (uint32_t n = 0; n < doc->node_count; ++n) c->consumer_start[n + 1] += c->consumer_start[n];
  /* Fill the consumer lists, using |queue| as the per-producer cursor. */
  for (uint32_t n = 0; n < doc->node_count; ++n) c->queue[n] = c->consumer_start[n];
  for (uint32_t n = 0; n < doc->node_count; ++n) {
    for (uint32_t k = 0; k < doc->nodes[n].input_count; ++k) {
      uint32_t p = c->producer[doc->nodes[n].inputs[k]];
      if (p >= doc->param_count) c->consumers[c->queue[p - doc->param_count]++] = n;
    }
  }
  uint32_t head = 0, tail = 0;
  for (uint32_t n = 0; n < doc->node_count; ++n) {
    if (c->indegree[n] == 0) c->queue[tail++] = n;
  }
  while (head < tail) {
    uint32_t n = c->queue[head++];
    for (uint32_t i = c->consumer_start[n]; i < c->consumer_start[n + 1]; ++i) {
      if (--c->indegree[c->consumers[i]] == 0) c->queue[tail++] = c->consumers[i];
    }
  }
  return tail == doc->node_count ? NULL : pw_gcheck_cycle(c);
}

static pw_status_t pw_gcheck_run(pw_gcheck_t* c) {
  const pw_gdoc_t* doc = c->doc;
  char path[96];
  if ((uint64_t)doc->param_count + doc->node_count >= PW_GDOC_NO_PRODUCER) {
    return PW_GDOC_ERR("graph: %u parameters and %u nodes are too many", doc->param_count,
                       doc->node_count);
  }
  for (uint32_t e = 0; e < doc->exe_count; ++e) {
    if (doc->exes[e].by_hash) continue;
    snprintf(path, sizeof(path), "executables[%u].vslice", e);
    PW_RETURN_IF_ERROR(pw_gcheck_vslice_ref(doc, doc->exes[e].vslice, path));
  }
  for (uint32_t b = 0; b < doc->buffer_count; ++b) {
    snprintf(path, sizeof(path), "buffers[%u].vslice", b);
    const pw_gdoc_buffer_t* buffer = &doc->buffers[b];
    PW_RETURN_IF_ERROR(pw_gcheck_vslice_ref(doc, buffer->vslice, path));
    PW_RETURN_IF_ERROR_CTX(pw_array_spec_check(&buffer->spec, &doc->vslices[buffer->vslice]),
                           "buffers[%u] (on vslice %u)", b, buffer->vslice);
  }
  PW_RETURN_IF_ERROR(pw_gcheck_alloc(doc, doc->buffer_count, sizeof(uint32_t), &c->producer));
  PW_RETURN_IF_ERROR(pw_gcheck_alloc(doc, doc->exe_count, 1, &c->exe_used));
  for (uint32_t b = 0; b < doc->buffer_count; ++b) c->producer[b] = PW_GDOC_NO_PRODUCER;
  for (uint32_t i = 0; i < doc->param_count; ++i) {
    snprintf(path, sizeof(path), "parameters[%u]", i);
    PW_RETURN_IF_ERROR(pw_gcheck_produce(c, doc->params[i], i, path));
  }
  PW_RETURN_IF_ERROR(pw_gcheck_nodes(c));
  for (uint32_t i = 0; i < doc->output_count; ++i) {
    snprintf(path, sizeof(path), "outputs[%u]", i);
    PW_RETURN_IF_ERROR(pw_gcheck_buffer_ref(c, doc->outputs[i], path));
    if (c->producer[doc->outputs[i]] == PW_GDOC_NO_PRODUCER) {
      return PW_GDOC_ERR("%s: buffer %u is neither a parameter nor a node output", path,
                         doc->outputs[i]);
    }
  }
  for (uint32_t b = 0; b < doc->buffer_count; ++b) {
    if (c->producer[b] == PW_GDOC_NO_PRODUCER) {
      return PW_GDOC_ERR("buffers[%u]: is neither a parameter nor a node output", b);
    }
  }
  for (uint32_t e = 0; e < doc->exe_count; ++e) {
    if (!c->exe_used[e]) return PW_GDOC_ERR("executables[%u]: not used by any node", e);
  }
  return pw_gcheck_order(c);
}

pw_status_t pw__gdoc_check(const pw_gdoc_t* doc) {
  pw_gcheck_t c;
  memset(&c, 0, sizeof(c));
  c.doc = doc;
  pw_status_t status = pw_gcheck_run(&c);
  pw_gcheck_free(&c);
  return status;
}
