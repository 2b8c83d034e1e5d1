/* libpathways: dataflow graphs and their submission.
 *
 * A graph is a program: parameter nodes (arrays supplied at submit), compute
 * nodes (an executable run on a virtual slice) and graph outputs. Edges are
 * values: a value is (node, output index); a parameter node has one output.
 * Nodes are numbered in the order they are added, and a compute node may
 * name a node that is added later, so a graph can be built in any order
 * (and a decoder can build one from bytes); pw_graph_finalize checks it.
 *
 * Finalizing validates (each error names the node: unknown node or output,
 * dtype/shape/sharding mismatch against the executable's signature, an
 * executable whose mesh does not match the virtual slice, released or
 * foreign handles, cycles) and lowers the graph into a plan that is kept:
 * resubmitting costs only the per-execution work.
 *
 * Submitting enqueues the whole graph at once (parallel asynchronous
 * dispatch) onto the slice sequences of the physical slices involved; the
 * output buffers come back immediately and complete later, and a done event
 * resolves exactly once, with the first error if any.
 */
#ifndef PATHWAYS_GRAPH_H_
#define PATHWAYS_GRAPH_H_

#include "pathways/buffer.h"
#include "pathways/event.h"
#include "pathways/executable.h"
#include "pathways/runtime.h"

PW_EXTERN_C_BEGIN

typedef struct pw_graph_t {
  uint64_t id;
} pw_graph_t;

/* A reference to a value of the graph: output |output| of node |node|. */
typedef struct pw_value_t {
  uint32_t node;
  uint32_t output;
} pw_value_t;

static inline pw_value_t pw_value(uint32_t node, uint32_t output) {
  pw_value_t v = {node, output};
  return v;
}

PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_create(pw_client_t* client,
                                                      pw_graph_t* out_graph);

/* Adds parameter number k (k = number of parameters added before) living
 * on |vslice| with |spec|. Its node id goes to |*out_node| (may be NULL). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_add_parameter(
    pw_client_t* client, pw_graph_t graph, pw_vslice_t vslice,
    const pw_array_spec_t* spec, uint32_t* out_node);

/* Adds a compute node running |executable| on |vslice| over |inputs|
 * (|input_count| values; they may name nodes not added yet). |name| (may be
 * NULL) is copied and used in messages. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_add_compute(
    pw_client_t* client, pw_graph_t graph, const char* name,
    pw_executable_t executable, pw_vslice_t vslice, const pw_value_t* inputs,
    uint32_t input_count, uint32_t* out_node);

/* Adds a transfer node: |input|'s array moved onto |vslice| (any slice of
 * the client, the same one included) with |sharding| over that vslice's
 * mesh: a resharding copy (e.g. split along axis 0 over 4 devices ->
 * replicated over 8). Its one output has the input's dtype and shape.
 * Lowering computes the shard-to-shard copies actually needed (each
 * destination device receives exactly the runs of source shards that
 * intersect its own shard) and the runtime's transport moves them when
 * the node runs, in the destination slice's gang order. |sharding| may be
 * any kind (TILED included). From an input unreduced over some mesh axes
 * to a |sharding| reduced over them (or, on the same mesh, unreduced over
 * a subset), each output element is the sum of the partial sums: this
 * needs the destination backend's accumulate (v6), checked at
 * validation; a transfer cannot make partial sums (a reduced input to an
 * unreduced |sharding| is refused). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_add_transfer(
    pw_client_t* client, pw_graph_t graph, const char* name, pw_value_t input,
    pw_vslice_t vslice, pw_sharding_t sharding, uint32_t* out_node);

/* ---- host tasks -----------------------------------------------------------
 *
 * A host node runs a host function on the host of its virtual slice, in
 * that slice's gang order: after the slice's earlier ops completed on
 * every device (on a queue-ordered slice, after its device queues
 * drained), and before any later op of the slice launches. The function
 * reads its inputs' and writes its outputs' shards in place, through the
 * backend's host pointers (pw_backend_vtable_t.host_pointer): no copies.
 *
 * One call per run of the node, with every device's shards of the mesh
 * (not one call per device), on a thread of the runtime's host-task pool
 * (started on first use, at most 8 tasks at once across the runtime;
 * never a backend's or a submitter's thread, and no runtime lock is
 * held), so a slow task (writing a snapshot, reading a batch) delays only
 * its own slice. It must not wait for work that is ordered after it on
 * its slice (a later op, or a run submitted behind it): that would
 * deadlock the slice; a task that never returns keeps its run, and
 * pw_client_destroy, waiting. The destroy functions refuse to run inside
 * a task (FAILED_PRECONDITION), as inside an event callback. Output
 * shards are allocated by the runtime before the call, as a compute op's;
 * their contents are what the function leaves there. Input shards must
 * not be written (other ops may read them at the same time). A task has
 * no launch deadline. */

/* What a host function gets: valid during the call only. */
typedef struct pw_host_task_context_t {
  size_t struct_size;            /* sizeof as the library knows it */
  uint32_t node;                 /* graph node id */
  const char* name;              /* the node's name */
  uint64_t gang_id;              /* this run's gang id of the node */
  uint32_t device_count;         /* devices of the mesh: shards per array */
  uint32_t input_count;
  uint32_t output_count;
  const pw_array_spec_t* input_specs;   /* input_count */
  const pw_array_spec_t* output_specs;  /* output_count */
  /* inputs[k][m]: host pointer of input k's shard on mesh index m (read
   * only), input_bytes[k] the bytes of each of its shards; likewise the
   * outputs (written by the function). */
  void* const* const* inputs;
  const size_t* input_bytes;
  void* const* const* outputs;
  const size_t* output_bytes;
} pw_host_task_context_t;

#define PW_HOST_TASK_CONTEXT_SIZE_V1 PW_STRUCT_SIZE(pw_host_task_context_t, output_bytes)

/* Runs one host node: NULL (OK), or an error that fails the node (named in
 * the message: "node 3 ("save") on slice 's0': host task: ...") and its
 * dependents, as a failed launch does; the run's done event gets it. */
typedef pw_status_t (*pw_host_task_fn_t)(void* user, const pw_host_task_context_t* context);

/* A host function: copied by pw_graph_add_host and
 * pw_client_register_host_task. |fn| may run on several threads at once
 * (nodes of different slices, or runs of one graph on different slices).
 * |destroy| (optional) is called once with |user| when nothing uses the
 * task any more: for pw_graph_add_host, when the graph is gone (after
 * its last run); for a registered task, when it is replaced or the client
 * is destroyed and no graph uses it. If the call that would take the task
 * fails, |destroy| is not called: the caller still owns |user|. */
typedef struct pw_host_task_t {
  size_t struct_size;            /* sizeof(pw_host_task_t) */
  pw_host_task_fn_t fn;          /* required */
  void* user;
  void (*destroy)(void* user);   /* may be NULL */
} pw_host_task_t;

#define PW_HOST_TASK_SIZE_V1 PW_STRUCT_SIZE(pw_host_task_t, destroy)

/* Adds a host node running |task| on |vslice| over |inputs| (|input_count|
 * values on |vslice|'s slice and mesh; they may name nodes not added yet)
 * with |output_count| outputs of |output_specs| (each checked against
 * |vslice|'s mesh now; allocated by the runtime at each run). |name| (may
 * be NULL: "host") is copied. The backend of |vslice| must give host
 * pointers (checked at finalize: FAILED_PRECONDITION naming node and
 * backend). A graph with a node added this way cannot be written by
 * pw_graph_encode (the function has no name): use
 * pw_graph_add_host_by_name for that. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_add_host(
    pw_client_t* client, pw_graph_t graph, const char* name, const pw_host_task_t* task,
    pw_vslice_t vslice, const pw_value_t* inputs, uint32_t input_count,
    const pw_array_spec_t* output_specs, uint32_t output_count, uint32_t* out_node);

/* Registers |task| under |task_name| (1..63 bytes of [A-Za-z0-9_.-]) for
 * |client|: pw_graph_add_host_by_name and decoded graphs (pw_graph_decode,
 * whose host nodes name their task) use it. A name registered again is
 * replaced for later uses (graphs that use the old task keep it).
 * Thread-safe. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_client_register_host_task(pw_client_t* client,
                                                                   const char* task_name,
                                                                   const pw_host_task_t* task);

/* pw_graph_add_host with the task registered as |task_name| (NOT_FOUND
 * naming it if there is none); the graph format writes that name. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_add_host_by_name(
    pw_client_t* client, pw_graph_t graph, const char* name, const char* task_name,
    pw_vslice_t vslice, const pw_value_t* inputs, uint32_t input_count,
    const pw_array_spec_t* output_specs, uint32_t output_count, uint32_t* out_node);

/* Sets compute node |node|'s argument to |arg| (default 0): a constant
 * handed to its backend with every launch of the node
 * (pw_backend_launch_t.node_arg; the CPU backend passes it to the kernel
 * as pw_cpu_kernel_call_t.node_arg), so graphs whose nodes differ only by
 * a small constant (a node id, a gang index, a per-node parameter) share
 * one executable. Setting it again replaces it. INVALID_ARGUMENT for a node
 * that does not exist or is not a compute node; FAILED_PRECONDITION once
 * the graph is finalized. Not yet carried by the graph format
 * (pw_graph_format_encode refuses such a graph, UNIMPLEMENTED) nor by
 * remote slices (their launch fails, UNIMPLEMENTED). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_set_node_arg(pw_client_t* client,
                                                            pw_graph_t graph, uint32_t node,
                                                            uint64_t arg);

/* Declares |value| as graph output number k (k = outputs declared before). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_add_output(pw_client_t* client,
                                                          pw_graph_t graph,
                                                          pw_value_t value);

/* Validates and lowers the graph (idempotent; submit does it if needed).
 * After success the graph is frozen: adding nodes is FAILED_PRECONDITION. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_finalize(pw_client_t* client,
                                                        pw_graph_t graph);

/* Out-struct of pw_graph_counts: the caller sets struct_size. */
typedef struct pw_graph_counts_t {
  size_t struct_size;  /* set by the caller: sizeof(pw_graph_counts_t) */
  uint32_t parameters;
  uint32_t computes;
  uint32_t outputs;
  uint32_t edges;   /* compute inputs fed by other compute nodes */
} pw_graph_counts_t;

#define PW_GRAPH_COUNTS_SIZE_V1 PW_STRUCT_SIZE(pw_graph_counts_t, edges)

PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_counts(pw_client_t* client,
                                                      pw_graph_t graph,
                                                      pw_graph_counts_t* out_counts);

PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_release(pw_client_t* client,
                                                       pw_graph_t graph);

typedef struct pw_submit_options_t {
  size_t struct_size;  /* sizeof(pw_submit_options_t) */
  /* Optional, one flag per argument: the execution takes the argument
   * (its handle is released by the submit) and may reuse its memory for an
   * output of identical spec on the same slice. */
  const bool* donate;
  /* -- v2 fields start here -- */
  /* Launch deadline of this run's ops (see pw_runtime_options_t's
   * launch_deadline_ns); 0: the runtime's. */
  uint64_t launch_deadline_ns;
} pw_submit_options_t;

#define PW_SUBMIT_OPTIONS_SIZE_V1 PW_STRUCT_SIZE(pw_submit_options_t, donate)
#define PW_SUBMIT_OPTIONS_SIZE_V2 PW_STRUCT_SIZE(pw_submit_options_t, launch_deadline_ns)

/* Runs |graph| once. |args| supply the parameters in order (each must
 * match the parameter's vslice and spec). |out_outputs| receives
 * |output_count| new buffers (exactly the graph's output count), valid at
 * once and ready later. |out_done| (may be NULL) receives a retained event
 * that completes when every op of this execution has, with the first error.
 * With |out_done| NULL the run has no done event at all (it costs nothing):
 * its errors reach its outputs' ready events, and pw_client_wait_idle still
 * waits for it. |options| may be NULL. On a validation or allocation failure nothing was
 * enqueued and no handle was created or consumed. (If the client's handle
 * table cannot grow after the work was enqueued, the error is returned, no
 * output handle is created, and the enqueued work still completes.) */
PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_submit(
    pw_client_t* client, pw_graph_t graph, const pw_buffer_t* args,
    uint32_t arg_count, const pw_submit_options_t* options,
    pw_buffer_t* out_outputs, uint32_t output_count, pw_event_t** out_done);

/* ---- armed graphs ---------------------------------------------------------
 *
 * A graph armed for repeated submission from one thread (what CUDA calls an
 * instantiated graph, PJRT a loaded executable): the handle look-up, the
 * finalize check and the graph reference are paid once, at create, and the
 * armed graph keeps private execution blocks, so a submission neither
 * takes a block from the client's shared cache nor references the graph
 * or the client. Runs are the same as pw_graph_submit's, in the same gang
 * order; runs may overlap (a submission whose private blocks are all in
 * use takes one from the client's cache, as pw_graph_submit does).
 *
 * Thread safety: an armed graph is used by one thread at a time (the
 * caller serialises pw_graph_exec_submit and pw_graph_exec_destroy on one
 * armed graph); different armed graphs, and the client itself, may be used
 * from any threads at once. Completions may run on any thread. */
typedef struct pw_graph_exec_s pw_graph_exec_t;

/* Arms |graph| (finalizing it if needed) for submission on |client|. The
 * armed graph keeps the graph alive: its handle may be released. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_exec_create(pw_client_t* client,
                                                           pw_graph_t graph,
                                                           pw_graph_exec_t** out_exec);

/* pw_graph_submit for the armed graph: the same arguments, checks, outputs
 * and done event. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_exec_submit(
    pw_graph_exec_t* exec, const pw_buffer_t* args, uint32_t arg_count,
    const pw_submit_options_t* options, pw_buffer_t* out_outputs, uint32_t output_count,
    pw_event_t** out_done);

/* Waits until every run |exec| submitted has completed (runs always
 * complete, failed or not; their done events have completed when this
 * returns), then frees it; NULL is a no-op (OK). FAILED_PRECONDITION,
 * leaving it untouched, when called from inside a callback the runtime is
 * running (an event callback, e.g. of one of its own runs' events, or
 * plugin code the dispatcher called): its runs may wait for that callback.
 * pw_client_destroy destroys the armed graphs of the client still alive;
 * using one after that is undefined. */
PW_API pw_status_t pw_graph_exec_destroy(pw_graph_exec_t* exec);

PW_EXTERN_C_END

#endif /* PATHWAYS_GRAPH_H_ */
