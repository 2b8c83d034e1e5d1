/* Internal: the plan, lowering's const output (lib/graph/lower.c) and
 * what the dispatcher runs (lib/sched derives its own data from it on the
 * first submission, plan.c, and hangs it on the plan). Not installed. */
#ifndef PW_GRAPH_PLAN_H_
#define PW_GRAPH_PLAN_H_

#include "core/objects.h"

/* Where a compute input comes from. */
typedef struct pw_plan_input_s {
  int32_t param;       /* parameter index, or -1 */
  int32_t op;          /* producing op index, or -1 */
  uint32_t output;     /* output index of the producing op */
} pw_plan_input_t;

/* The copies of a transfer from the shard of source mesh index
 * |src_index| to the shard of destination mesh index |dst_index|: rows of
 * |size| bytes, the first at |src_offset| / |dst_offset|, repeated along
 * |stride_count| levels (outer first; pw_transport_copy_t's v2 fields say
 * how). One record per pair of intersecting shards, whatever the number
 * of rows: the transport (or, for one without copy_strided, the
 * dispatcher) walks the rows. */
typedef struct pw_plan_copy_s {
  uint32_t src_index;
  uint32_t dst_index;
  uint32_t stride_count;
  size_t src_offset;
  size_t dst_offset;
  size_t size;
  pw_transport_stride_t strides[PW_TRANSPORT_MAX_STRIDES];
} pw_plan_copy_t;

typedef enum pw_plan_op_kind_e {
  PW_PLAN_COMPUTE = 0,
  PW_PLAN_TRANSFER = 1,  /* moves input 0 onto |vslice| with |transfer_spec| */
  PW_PLAN_HOST = 2,      /* runs |host_task| on |vslice|'s host */
} pw_plan_op_kind_t;

/* Computes the copies of a transfer from |src| over |src_mesh| to |dst|
 * (same dtype and shape) over |dst_mesh|: |*out_copies| sorted by
 * destination index, |*out_start| (dst device count + 1 entries) indexing
 * them by destination. Both allocated from |allocator| (copies may be NULL
 * when there are none). |*out_reduce|: the source partial sums added into
 * each destination element (1: none added); when above 1, a record whose
 * dst_offset is k shard sizes or more (k < reduce) writes scratch slot k,
 * which the transfer adds into the shard (pw_plan_op_t.reduce).
 * lib/graph/reshard.c. */
pw_status_t pw__reshard_plan(pw_allocator_t allocator, const pw_array_spec_t* src,
                             const pw_mesh_shape_t* src_mesh, const pw_array_spec_t* dst,
                             const pw_mesh_shape_t* dst_mesh, pw_plan_copy_t** out_copies,
                             uint32_t* out_count, uint32_t** out_start, uint32_t* out_reduce);

/* Whether a transfer from |src| to |dst| may move their partial sums
 * (the destination keeps or reduces the source's unreduced axes, never
 * gains any): INVALID_ARGUMENT naming both shardings, or NULL with
 * |*out_reduce| the partial sums added into each destination element. */
pw_status_t pw__reshard_check_partials(const pw_array_spec_t* src,
                                       const pw_mesh_shape_t* src_mesh,
                                       const pw_array_spec_t* dst,
                                       const pw_mesh_shape_t* dst_mesh, uint32_t* out_reduce);

typedef struct pw_plan_op_s {
  pw_plan_op_kind_t kind;
  uint32_t node;                   /* graph node id, for messages */
  const char* name;                /* points into the graph's storage */
  pw_executable_obj_t* executable; /* retained by the graph */
  pw_vslice_obj_t* vslice;         /* retained by the graph */
  uint64_t node_arg;               /* compute: handed to every launch */
  uint32_t input_count;
  /* input_count entries, in the plan's storage (one array for all ops:
   * an inline array of PW_BACKEND_MAX_PARAMS made every op 200 bytes
   * bigger, and big graphs' build time was page faults). */
  const pw_plan_input_t* inputs;
  uint32_t output_count;
  /* Bit k of the bitset: output k is a graph output (it gets a buffer
   * object with a ready event and a handle); other outputs are internal
   * values that live in the execution block and die with it. The bitset
   * is |external_bits| for at most 32 outputs, else |external_words|
   * ((output_count + 31) / 32 words, in the plan's copy arena): read it
   * through pw_plan_external_words. |external_count|: its bits set. */
  uint32_t external_bits;
  uint32_t external_count;
  uint32_t* external_words;
  uint32_t static_deps;            /* distinct producing ops among inputs */
  uint32_t noncompute_deps;        /* ... of them transfers or host ops */
  uint32_t successor_count;
  uint32_t* successors;            /* op indices, one per distinct consumer
                                      (in the plan's storage) */
  /* PW_PLAN_TRANSFER only (executable is NULL). */
  /* The output, on |vslice|; points into the graph's storage (a spec is
   * 96 bytes, and most ops are not transfers). */
  const pw_array_spec_t* transfer_spec;
  pw_plan_copy_t* copies;
  uint32_t copy_count;
  uint32_t* copy_start;            /* per destination mesh index, + 1 */
  /* Source partial sums added into each destination element (1: a plain
   * copy). Above 1, each destination device gets reduce - 1 scratch
   * shards (one allocation of (reduce - 1) x shard bytes): the records
   * whose dst_offset is past the shard write them, and once every copy
   * is done the backend's accumulate adds each into the shard. */
  uint32_t reduce;
  /* PW_PLAN_HOST only (executable is NULL): the task (the graph holds
   * it) and the outputs' specs (the graph's). */
  struct pw_host_task_obj_s* host_task;
  const pw_array_spec_t* host_specs;
} pw_plan_op_t;

/* |p|'s graph-output bitset (see external_bits). */
static inline const uint32_t* pw_plan_external_words(const pw_plan_op_t* p) {
  return p->output_count <= 32 ? &p->external_bits : p->external_words;
}

/* Whether output |k| of |p| is a graph output. */
static inline bool pw_plan_output_external(const pw_plan_op_t* p, uint32_t k) {
  return (pw_plan_external_words(p)[k >> 5] >> (k & 31)) & 1u;
}

/* The head of what the dispatcher derives from a plan (lib/sched/plan.c):
 * how to free it. */
typedef struct pw_plan_dispatch_header_s {
  void (*release)(struct pw_plan_dispatch_header_s* data);
} pw_plan_dispatch_header_t;

typedef struct pw_plan_output_s {
  int32_t param;   /* graph output is a parameter, or -1 */
  int32_t op;
  uint32_t output;
} pw_plan_output_t;

typedef struct pw_plan_s {
  uint32_t param_count;
  pw_array_spec_t* param_specs;
  pw_vslice_obj_t** param_vslices;
  uint32_t op_count;               /* in topological order */
  pw_plan_op_t* ops;
  uint32_t output_count;
  pw_plan_output_t* outputs;
  uint32_t edge_count;
  /* The dispatcher's data for this plan (a pw_plan_dispatch_header_t *),
   * derived and published once by its first submission (lib/sched/plan.c),
   * NULL before; freed with the plan (pw__plan_release_dispatch). */
  pw_atomic_ptr_t dispatch_data;
  /* The one allocation that holds ops, their inputs and successors,
   * outputs, param_specs and param_vslices (lib/graph/graph.c). */
  void* storage;
  size_t storage_size;
  /* Chunks that hold every transfer op's copies and copy_start (newest
   * first; lib/graph/graph.c), or NULL. */
  void* copy_arena;
} pw_plan_t;

/* Frees the dispatcher's data of |plan| (if a submission derived it), by
 * the destructor it carries: the plan's owner calls nothing in lib/sched. */
static inline void pw__plan_release_dispatch(pw_plan_t* plan) {
  pw_plan_dispatch_header_t* data = pw_atomic_load_ptr_acquire(&plan->dispatch_data);
  if (data == NULL) return;
  pw_atomic_store_ptr_relaxed(&plan->dispatch_data, NULL);
  data->release(data);
}

#endif /* PW_GRAPH_PLAN_H_ */
