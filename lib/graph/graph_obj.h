/* Internal to lib/graph: the graph object's layout and what the module's
 * files share (graph.c: the object and its read access; builder.c: the
 * add calls; validate.c: the structure and spec checks; lower.c: lowering
 * into a pw_plan_t; submission and armed graphs are
 * lib/sched/graph_submit.c's). Other modules read graphs through
 * graph/graph_internal.h instead.
 *
 * Storage is compact, since a graph of 10^5 nodes is built at a few
 * hundred nanoseconds per node and fresh pages cost more than the work: a
 * node is 40 bytes; its inputs live in arrays shared by all nodes, what
 * only parameters and transfers have (specs, the destination sharding) in
 * side arrays, and names are pointers (an executable's own name, a
 * literal, or a copy in the graph's name chunks). Nodes and inputs are
 * kept in fixed-size chunks that never move: a growing array would copy
 * everything on each doubling and touch twice the memory. The plan is one
 * block. */
#ifndef PW_GRAPH_GRAPH_OBJ_H_
#define PW_GRAPH_GRAPH_OBJ_H_

#include "graph/graph_internal.h"
#include "graph/host_task.h"
#include "graph/plan.h"

typedef enum pw_graph_node_kind_e {
  PW_GRAPH_NODE_PARAMETER = 1,
  PW_GRAPH_NODE_COMPUTE = 2,
  PW_GRAPH_NODE_TRANSFER = 3,
  PW_GRAPH_NODE_HOST = 4,
} pw_graph_node_kind_t;

/* Compute, transfer and host nodes become ops of the plan. */
static inline bool pw_graph_is_op(pw_graph_node_kind_t kind) {
  return kind != PW_GRAPH_NODE_PARAMETER;
}

typedef struct pw_graph_node_s {
  pw_graph_node_kind_t kind;
  uint32_t input_count;
  uint32_t input_start;             /* first input (pw_graph_inputs) */
  uint32_t extra;                   /* parameter: its index; transfer: its
                                       entry in pw_graph_obj_t.transfers;
                                       host: in pw_graph_obj_t.hosts */
  const char* name;                 /* NUL-terminated, at most 63 bytes;
                                       lives as long as the graph */
  pw_vslice_obj_t* vslice;          /* held by the graph */
  pw_executable_obj_t* executable;  /* held by the graph (compute) */
  uint64_t arg;                     /* compute: pw_graph_set_node_arg's */
} pw_graph_node_t;

/* What a transfer node has beyond a node. */
typedef struct pw_graph_transfer_s {
  const pw_array_spec_t* spec;      /* resolved output (at finalize), in
                                       pw_graph_obj_t.specs; NULL before */
  pw_sharding_t sharding;           /* the destination sharding */
} pw_graph_transfer_t;

/* What a host node has beyond a node: its task (one reference) and its
 * outputs' specs (an allocation of its own, which never moves). */
typedef struct pw_graph_host_s {
  pw_host_task_obj_t* task;
  pw_array_spec_t* specs;
  uint32_t output_count;
} pw_graph_host_t;

/* The copies of the last transfer lowered, for the next one that moves
 * the same specs between the same meshes (a pipeline's transfers mostly
 * do) to share: they live in the plan's arena and are only read. */
typedef struct pw_graph_copy_memo_s {
  const pw_array_spec_t* src;
  const pw_array_spec_t* dst;
  pw_mesh_shape_t src_mesh;
  pw_mesh_shape_t dst_mesh;
  pw_plan_copy_t* copies;
  uint32_t copy_count;
  uint32_t* copy_start;
  uint32_t reduce;
} pw_graph_copy_memo_t;

/* Names that are not an executable's own or a literal are copied into
 * chunks that live as long as the graph. */
typedef struct pw_graph_name_chunk_s {
  struct pw_graph_name_chunk_s* next;
  uint32_t size;                    /* bytes of text[] */
  uint32_t used;
  char text[];
} pw_graph_name_chunk_t;

#define PW_GRAPH_NAME_CHUNK_BYTES 4096u

/* Fixed-size chunks of nodes or inputs, indexed by a directory. */
typedef struct pw_graph_chunks_s {
  void** chunks;                    /* |embedded| until it outgrows it */
  uint32_t count;
  uint32_t capacity;                /* of |chunks| */
  void* embedded[4];
} pw_graph_chunks_t;

#define PW_GRAPH_NODE_SHIFT 10u     /* 1024 nodes (40 KiB) a chunk */
#define PW_GRAPH_NODE_CHUNK (1u << PW_GRAPH_NODE_SHIFT)
#define PW_GRAPH_INPUT_SHIFT 12u    /* 4096 inputs (32 KiB) a chunk */
#define PW_GRAPH_INPUT_CHUNK (1u << PW_GRAPH_INPUT_SHIFT)
#define PW_GRAPH_TRANSFER_SHIFT 8u  /* 256 transfers (27 KiB) a chunk */
#define PW_GRAPH_TRANSFER_CHUNK (1u << PW_GRAPH_TRANSFER_SHIFT)
#define PW_GRAPH_SPEC_CHUNK 64u     /* specs (6 KiB) a chunk */
#define PW_GRAPH_NAME_MAX 63u       /* longer names are truncated */

typedef struct pw_graph_obj_s {
  /* Every submission retains and releases the graph: its own cache line
   * (the object is allocated aligned), so that threads submitting their
   * own graphs do not false-share neighbouring objects' counts. */
  _Alignas(PW_CACHE_LINE) pw_object_t header;
  pthread_mutex_t lock;
  pw_graph_chunks_t nodes;          /* of PW_GRAPH_NODE_CHUNK nodes */
  uint32_t node_count;
  /* Every node's inputs, in node order; a node's are contiguous, in one
   * chunk: |input_end| skips a chunk's tail that cannot hold them. */
  pw_graph_chunks_t inputs;         /* of PW_GRAPH_INPUT_CHUNK values */
  uint32_t input_count;             /* inputs of all nodes */
  uint32_t input_end;               /* next free input index */
  pw_array_spec_t* param_specs;     /* param_count */
  uint32_t param_capacity;
  pw_graph_chunks_t transfers;      /* of PW_GRAPH_TRANSFER_CHUNK */
  uint32_t transfer_count;
  pw_graph_host_t* hosts;           /* host nodes (few: a plain array) */
  uint32_t host_count;
  uint32_t host_capacity;
  /* Transfers' resolved output specs; consecutive equal ones are stored
   * once (|last_spec|). */
  pw_graph_chunks_t specs;          /* of PW_GRAPH_SPEC_CHUNK */
  uint32_t spec_count;
  const pw_array_spec_t* last_spec;
  pw_graph_copy_memo_t copy_memo;   /* lowering only */
  pw_graph_name_chunk_t* names;     /* newest first */
  /* The references that keep the vslices and executables of the nodes
   * alive (nodes borrow them): one per object and stay in |held_recent|
   * (direct-mapped by address), so consecutive adds naming the same
   * objects take no reference. */
  pw_object_t** held;               /* |held_embedded| until it outgrows it */
  uint32_t held_count;
  uint32_t held_capacity;
  pw_object_t* held_recent[16];
  pw_object_t* held_embedded[4];
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
#define PW_GRAPH_MAX_INPUTS (PW_GRAPH_MAX_NODES * 4u)

static inline pw_graph_node_t* pw_graph_node_at(const pw_graph_obj_t* g, uint32_t id) {
  return (pw_graph_node_t*)g->nodes.chunks[id >> PW_GRAPH_NODE_SHIFT] +
         (id & (PW_GRAPH_NODE_CHUNK - 1));
}

static inline pw_graph_transfer_t* pw_graph_transfer_at(const pw_graph_obj_t* g, uint32_t i) {
  return (pw_graph_transfer_t*)g->transfers.chunks[i >> PW_GRAPH_TRANSFER_SHIFT] +
         (i & (PW_GRAPH_TRANSFER_CHUNK - 1));
}

static inline const pw_value_t* pw_graph_inputs(const pw_graph_obj_t* g,
                                                const pw_graph_node_t* n) {
  if (n->input_count == 0) return NULL;
  return (const pw_value_t*)g->inputs.chunks[n->input_start >> PW_GRAPH_INPUT_SHIFT] +
         (n->input_start & (PW_GRAPH_INPUT_CHUNK - 1));
}

/* The output spec of a parameter or transfer node (a zero spec for a
 * transfer before finalize resolves it); a host node's first. */
static inline const pw_array_spec_t* pw_graph_node_spec(const pw_graph_obj_t* g,
                                                        const pw_graph_node_t* n) {
  static const pw_array_spec_t unresolved;
  if (n->kind == PW_GRAPH_NODE_PARAMETER) return &g->param_specs[n->extra];
  if (n->kind == PW_GRAPH_NODE_HOST) {
    const pw_graph_host_t* h = &g->hosts[n->extra];
    return h->output_count ? &h->specs[0] : &unresolved;
  }
  const pw_array_spec_t* spec = pw_graph_transfer_at(g, n->extra)->spec;
  return spec ? spec : &unresolved;
}

/* Looks |graph| up and retains it. */
static inline pw_status_t pw_graph_get(pw_client_t* client, pw_graph_t graph,
                                       pw_graph_obj_t** out) {
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "client is NULL");
  }
  return pw__handle_lookup(client, graph.id, PW_OBJECT_GRAPH, "graph", (pw_object_t**)out);
}

/* ---- shared between the files of lib/graph ------------------------------ */

/* builder.c: adds a chunk of |chunk_bytes| to |c|. */
pw_status_t pw__graph_chunks_add(pw_runtime_t* rt, pw_graph_chunks_t* c, size_t chunk_bytes);

/* validate.c: the spec and physical slice of |value|, or an error naming
 * |what| (and |index| unless it is UINT32_MAX: "input 2"). */
pw_status_t pw__graph_value_spec(const pw_graph_obj_t* g, pw_value_t value, const char* what,
                                 uint32_t index, const pw_array_spec_t** out_spec,
                                 const pw_vslice_obj_t** out_vslice);
/* validate.c: checks op node |id|'s specs (its producers' are resolved)
 * and resolves a transfer's output; errors name the node. |checked| is
 * the (executable, vslice) pair last found compatible (start with NULLs). */
pw_status_t pw__graph_check_op(pw_graph_obj_t* g, uint32_t id, const void* checked[2]);
/* validate.c: describes a cycle among the nodes whose |indegree| is not 0
 * after a topological sort. */
pw_status_t pw__graph_cycle_error(const pw_graph_obj_t* g, const uint32_t* indegree);

/* lower.c: frees |plan| (the graph's) and what pw__dispatch_plan_prepare
 * added to it, and zeroes it. */
void pw__graph_plan_free(pw_runtime_t* rt, pw_plan_t* plan);

#endif /* PW_GRAPH_GRAPH_OBJ_H_ */
