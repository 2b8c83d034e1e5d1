#define _POSIX_C_SOURCE 200809L
/* Graph validation, run by finalize (lower.c) on the structure the
 * builder stored: references to nodes and outputs that exist, compute
 * nodes against their executables' signatures, backends, meshes and
 * slices, transfers' destination shardings (resolving their output
 * specs), and the description of a cycle. */
#include <stdio.h>
#include <string.h>

#include "graph/graph_obj.h"
#include "plugin/backend_call.h"

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
pw_status_t pw__graph_value_spec(const pw_graph_obj_t* g, pw_value_t value, const char* what,
                                 uint32_t index, const pw_array_spec_t** out_spec,
                                 const pw_vslice_obj_t** out_vslice) {
  char label[48];
  if (value.node >= g->node_count) {
    pw_graph_label(label, sizeof(label), what, index);
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: refers to node %u, which does not exist (%u nodes)", label,
                          value.node, g->node_count);
  }
  const pw_graph_node_t* src = pw_graph_node_at(g, value.node);
  if (src->kind == PW_GRAPH_NODE_PARAMETER) {
    if (value.output != 0) {
      pw_graph_label(label, sizeof(label), what, index);
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%s: refers to output %u of parameter node %u, which has "
                            "only output 0",
                            label, value.output, value.node);
    }
    *out_spec = &g->param_specs[src->extra];
  } else if (src->kind == PW_GRAPH_NODE_HOST) {
    const pw_graph_host_t* h = &g->hosts[src->extra];
    if (value.output >= h->output_count) {
      pw_graph_label(label, sizeof(label), what, index);
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%s: refers to output %u of host node %u (\"%s\"), which has %u "
                            "outputs",
                            label, value.output, value.node, src->name, h->output_count);
    }
    *out_spec = &h->specs[value.output];
  } else if (src->kind == PW_GRAPH_NODE_TRANSFER) {
    if (value.output != 0) {
      pw_graph_label(label, sizeof(label), what, index);
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%s: refers to output %u of transfer node %u (\"%s\"), which has "
                            "only output 0",
                            label, value.output, value.node, src->name);
    }
    *out_spec = pw_graph_node_spec(g, src);
  } else {
    const pw_executable_signature_t* sig = &src->executable->signature;
    if (value.output >= sig->output_count) {
      pw_graph_label(label, sizeof(label), what, index);
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%s: refers to output %u of node %u (\"%s\"), which has %u "
                            "outputs",
                            label, value.output, value.node, src->name, sig->output_count);
    }
    *out_spec = &sig->output_specs[value.output];
  }
  *out_vslice = src->vslice;
  return NULL;
}

/* Checks compute node |id| against its executable. |*checked| is the
 * (executable, vslice) pair last found compatible: consecutive nodes
 * usually share it, and then its checks are not repeated. */
static pw_status_t pw_graph_check_compute(const pw_graph_obj_t* g, uint32_t id,
                                          const void* checked[2]) {
  const pw_graph_node_t* n = pw_graph_node_at(g, id);
  const pw_executable_signature_t* sig = &n->executable->signature;
  if (checked[0] != n->executable || checked[1] != n->vslice) {
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
    checked[0] = n->executable;
    checked[1] = n->vslice;
  }
  if (n->input_count != sig->input_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%u inputs given, executable '%s' takes %u", n->input_count,
                          sig->name, sig->input_count);
  }
  const pw_value_t* inputs = pw_graph_inputs(g, n);
  for (uint32_t i = 0; i < n->input_count; ++i) {
    const pw_array_spec_t* spec = NULL;
    const pw_vslice_obj_t* src_vslice = NULL;
    PW_RETURN_IF_ERROR(pw__graph_value_spec(g, inputs[i], "input", i, &spec, &src_vslice));
    if (src_vslice != n->vslice &&
        (src_vslice->slice != n->vslice->slice ||
         !pw_mesh_shape_equal(&src_vslice->mesh, &n->vslice->mesh))) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "input %u lives on slice '%s', the node runs on slice '%s' "
                            "(moving data between slices needs a transfer node)",
                            i, src_vslice->slice->name, n->vslice->slice->name);
    }
    if (!pw_array_spec_equal(spec, &sig->input_specs[i])) {
      char have[160], want[160];
      pw_array_spec_format(spec, have, sizeof(have));
      pw_array_spec_format(&sig->input_specs[i], want, sizeof(want));
      const char* what_differs =
          spec->dtype != sig->input_specs[i].dtype                     ? "dtype"
          : !pw_shape_equal(&spec->shape, &sig->input_specs[i].shape)  ? "shape"
                                                                  : "sharding";
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "input %u %s mismatch: has %s, executable '%s' expects %s", i,
                            what_differs, have, sig->name, want);
    }
  }
  return NULL;
}

/* A transfer that adds up partial sums needs the destination backend's
 * accumulate (v6) for its dtype: asked once here, with the count-0 probe,
 * so a backend without it is refused before anything runs. */
static pw_status_t pw_graph_check_accumulate(const pw_graph_node_t* n, uint32_t id,
                                             pw_dtype_t dtype, uint32_t reduce) {
  const pw_backend_t* backend = n->vslice->slice->backend;
  const char* name = n->name ? n->name : "";
  if (!PW__BACKEND_HAS(backend, accumulate)) {
    return pw_status_make(PW_STATUS_UNIMPLEMENTED,
                          "transfer node %u (\"%s\") adds up %u partial sums on slice '%s', and "
                          "its backend '%s' has no accumulate method (v6)",
                          id, name, reduce, n->vslice->slice->name, pw__backend_name(backend));
  }
  pw_status_t status = pw__backend_accumulate(backend, n->vslice->slice->group_devices[0], dtype,
                                              NULL, 0, NULL, 0, 0);
  if (status == NULL) return NULL;
  return pw_status_annotate(status,
                            "transfer node %u (\"%s\") adds up %u partial sums of %s on slice "
                            "'%s' (backend '%s')",
                            id, name, reduce, pw_dtype_name(dtype), n->vslice->slice->name,
                            pw__backend_name(backend));
}

/* Resolves a transfer node's output spec (its input's dtype and shape,
 * the destination sharding over the destination mesh). */
static pw_status_t pw_graph_resolve_transfer(pw_graph_obj_t* g, uint32_t id) {
  pw_graph_node_t* n = pw_graph_node_at(g, id);
  pw_graph_transfer_t* t = pw_graph_transfer_at(g, n->extra);
  const pw_array_spec_t* in = NULL;
  const pw_vslice_obj_t* src_vslice = NULL;
  PW_RETURN_IF_ERROR(
      pw__graph_value_spec(g, pw_graph_inputs(g, n)[0], "input", UINT32_MAX, &in, &src_vslice));
  pw_array_spec_t spec = *in;
  spec.sharding = t->sharding;
  PW_RETURN_IF_ERROR_CTX(pw_sharding_check(&spec.sharding, &spec.shape, &n->vslice->mesh),
                         "destination sharding on slice '%s'", n->vslice->slice->name);
  uint32_t reduce = 1;
  PW_RETURN_IF_ERROR_CTX(
      pw__reshard_check_partials(in, &src_vslice->mesh, &spec, &n->vslice->mesh, &reduce),
      "transfer node %u (\"%s\")", id, n->name ? n->name : "");
  if (reduce > 1) PW_RETURN_IF_ERROR(pw_graph_check_accumulate(n, id, spec.dtype, reduce));
  if (g->last_spec == NULL || !pw_array_spec_equal(g->last_spec, &spec)) {
    if (g->spec_count == g->specs.count * PW_GRAPH_SPEC_CHUNK) {
      PW_RETURN_IF_ERROR(pw__graph_chunks_add(g->header.runtime, &g->specs,
                                             PW_GRAPH_SPEC_CHUNK * sizeof(pw_array_spec_t)));
    }
    pw_array_spec_t* stored = (pw_array_spec_t*)g->specs.chunks[g->spec_count / PW_GRAPH_SPEC_CHUNK] +
                              g->spec_count % PW_GRAPH_SPEC_CHUNK;
    g->spec_count++;
    *stored = spec;
    g->last_spec = stored;
  }
  t->spec = g->last_spec;
  return NULL;
}

/* The first input of |n| fed by an op node still in a cycle (indegree not
 * 0), or UINT32_MAX. */
static uint32_t pw_graph_cycle_step(const pw_graph_obj_t* g, const pw_graph_node_t* n,
                                    const uint32_t* indegree) {
  const pw_value_t* inputs = pw_graph_inputs(g, n);
  for (uint32_t k = 0; k < n->input_count; ++k) {
    uint32_t p = inputs[k].node;
    if (pw_graph_is_op(pw_graph_node_at(g, p)->kind) && indegree[p] != 0) return p;
  }
  return UINT32_MAX;
}

/* Describes a cycle among the compute nodes left with unresolved inputs
 * after the topological sort: walks producer links from one of them until
 * a node repeats. */
pw_status_t pw__graph_cycle_error(const pw_graph_obj_t* g, const uint32_t* indegree) {
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
    uint32_t p = pw_graph_cycle_step(g, pw_graph_node_at(g, cur), indegree);
    if (p != UINT32_MAX) cur = p;
  }
  seen_at_start = cur;
  do {
    const pw_graph_node_t* n = pw_graph_node_at(g, cur);
    int w = snprintf(path + len, sizeof(path) - len, "%s%u (\"%s\")", steps ? " <- " : "",
                     cur, n->name);
    if (w > 0) len = len + (size_t)w < sizeof(path) ? len + (size_t)w : sizeof(path) - 1;
    uint32_t p = pw_graph_cycle_step(g, n, indegree);
    if (p != UINT32_MAX) cur = p;
    ++steps;
  } while (cur != seen_at_start && steps < g->node_count);
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                        "graph has a cycle: node %s <- node %u", path, seen_at_start);
}

/* A host node: its inputs live on its slice and mesh (any spec), and its
 * backend gives host pointers. */
static pw_status_t pw_graph_check_host(const pw_graph_obj_t* g, uint32_t id) {
  const pw_graph_node_t* n = pw_graph_node_at(g, id);
  const pw_slice_t* slice = n->vslice->slice;
  const pw_backend_t* backend = slice->backend;
  if (!PW__BACKEND_HAS(backend, host_pointer)) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "host task on slice '%s': backend '%s' has no host_pointer (a host "
                          "task reads and writes shards in host memory)",
                          slice->name, pw__backend_name(backend));
  }
  const pw_value_t* inputs = pw_graph_inputs(g, n);
  for (uint32_t i = 0; i < n->input_count; ++i) {
    const pw_array_spec_t* spec = NULL;
    const pw_vslice_obj_t* src_vslice = NULL;
    PW_RETURN_IF_ERROR(pw__graph_value_spec(g, inputs[i], "input", i, &spec, &src_vslice));
    if (src_vslice != n->vslice &&
        (src_vslice->slice != slice || !pw_mesh_shape_equal(&src_vslice->mesh, &n->vslice->mesh))) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "input %u lives on slice '%s', the host task runs on slice '%s' "
                            "(moving data between slices needs a transfer node)",
                            i, src_vslice->slice->name, slice->name);
    }
  }
  return NULL;
}

/* Checks op node |id|'s specs (its producers' are resolved) and resolves a
 * transfer's output; errors name the node. */
pw_status_t pw__graph_check_op(pw_graph_obj_t* g, uint32_t id, const void* checked[2]) {
  const pw_graph_node_t* n = pw_graph_node_at(g, id);
  pw_status_t status = n->kind == PW_GRAPH_NODE_TRANSFER ? pw_graph_resolve_transfer(g, id)
                       : n->kind == PW_GRAPH_NODE_HOST   ? pw_graph_check_host(g, id)
                                                          : pw_graph_check_compute(g, id, checked);
  if (status) status = pw_status_annotate(status, "graph node %u (\"%s\")", id, n->name);
  return status;
}

