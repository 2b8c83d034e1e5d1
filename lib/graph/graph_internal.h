/* Internal: a graph for other modules, without exposing its layout: its
 * plan and look-up (lib/sched, which runs graphs) and read access to its
 * nodes (the CBOR encoder in lib/graph_format).
 *
 * Usage: pw__graph_acquire (a retained, locked graph), read with
 * pw__graph_node / pw__graph_output, then pw__graph_done (unlocks and
 * releases). Views point into the graph and are valid until then. */
#ifndef PW_GRAPH_GRAPH_INTERNAL_H_
#define PW_GRAPH_GRAPH_INTERNAL_H_

#include "core/objects.h"

struct pw_graph_obj_s;
struct pw_plan_s;
struct pw_host_task_obj_s;

typedef enum pw__graph_node_kind_e {
  PW__GRAPH_NODE_PARAMETER = 1,
  PW__GRAPH_NODE_COMPUTE = 2,
  PW__GRAPH_NODE_OTHER = 3,  /* a kind the reader does not know */
  PW__GRAPH_NODE_TRANSFER = 4,
  PW__GRAPH_NODE_HOST = 5,
} pw__graph_node_kind_t;

typedef struct pw__graph_node_view_t {
  pw__graph_node_kind_t kind;
  const char* name;                 /* NUL-terminated */
  pw_vslice_obj_t* vslice;
  pw_executable_obj_t* executable;  /* compute */
  uint64_t node_arg;                /* compute: pw_graph_set_node_arg's, or 0 */
  const pw_array_spec_t* spec;      /* parameter */
  pw_sharding_t transfer_sharding;  /* transfer: the destination sharding */
  uint32_t param_index;             /* parameter */
  uint32_t input_count;             /* compute, transfer (1), host */
  const pw_value_t* inputs;
  /* Host: its task (graph/host_task.h), its outputs and their specs. */
  const struct pw_host_task_obj_s* host_task;
  const pw_array_spec_t* host_specs;
  uint32_t output_count;
} pw__graph_node_view_t;

/* Looks |graph| up, retains and locks it. */
pw_status_t pw__graph_acquire(pw_client_t* client, pw_graph_t graph,
                              struct pw_graph_obj_s** out_graph);
/* Unlocks and releases a graph from pw__graph_acquire. */
void pw__graph_done(struct pw_graph_obj_s* graph);

uint32_t pw__graph_node_count(const struct pw_graph_obj_s* graph);
uint32_t pw__graph_param_count(const struct pw_graph_obj_s* graph);
void pw__graph_node(const struct pw_graph_obj_s* graph, uint32_t id,
                    pw__graph_node_view_t* out_view);
uint32_t pw__graph_output_count(const struct pw_graph_obj_s* graph);
pw_value_t pw__graph_output(const struct pw_graph_obj_s* graph, uint32_t index);

/* Looks |graph| up and retains it (not locked). */
pw_status_t pw__graph_lookup(pw_client_t* client, pw_graph_t graph,
                             struct pw_graph_obj_s** out_graph);

/* Returns the graph's plan, finalizing (lowering) it if needed; the graph
 * is retained by the caller and the plan lives as long as the graph. */
pw_status_t pw__graph_plan(pw_client_t* client, struct pw_graph_obj_s* graph,
                           const struct pw_plan_s** out_plan);

/* The graph's object header (to retain it or give it another handle). */
pw_object_t* pw__graph_object(struct pw_graph_obj_s* graph);

#endif /* PW_GRAPH_GRAPH_INTERNAL_H_ */
