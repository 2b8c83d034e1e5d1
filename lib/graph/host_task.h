/* Internal: host tasks as the runtime keeps them (lib/graph/host_task.c):
 * a refcounted copy of a caller's pw_host_task_t, held by the host nodes
 * that run it (and their plans) and by a client's registry of named
 * tasks; its |destroy| runs when the last holder lets go. lib/sched runs
 * them (host_task.c there), lib/graph_format writes and resolves their
 * names. Not installed. */
#ifndef PW_GRAPH_HOST_TASK_H_
#define PW_GRAPH_HOST_TASK_H_

#include "core/client.h"
#include "pathways/graph.h"

#define PW_HOST_TASK_NAME_MAX 63u

typedef struct pw_host_task_obj_s {
  pw_atomic_u32_t refs;
  pw_allocator_t allocator;
  pw_host_task_fn_t fn;
  void* user;
  void (*destroy)(void* user);
  /* The name it was registered under (what the graph format writes), or
   * "" for a task given to pw_graph_add_host. */
  char name[PW_HOST_TASK_NAME_MAX + 1];
} pw_host_task_obj_t;

static inline void pw__host_task_retain(pw_host_task_obj_t* t) {
  pw_atomic_fetch_add_u32(&t->refs, 1);
}

/* Drops one reference; the last calls the task's destroy and frees it. */
void pw__host_task_release(pw_host_task_obj_t* t);

/* A new task (one reference) copied from |task|, checked (struct_size,
 * fn); errors name |what|. */
pw_status_t pw__host_task_make(pw_allocator_t allocator, const pw_host_task_t* task,
                               const char* what, pw_host_task_obj_t** out_task);

/* The task registered as |task_name| for |client|, retained; NOT_FOUND
 * naming it when there is none. */
pw_status_t pw__host_task_lookup(pw_client_t* client, const char* task_name,
                                 pw_host_task_obj_t** out_task);

/* pw_graph_add_host_by_name with the task already looked up: takes the
 * caller's reference to |task| (kept by the graph, or released on
 * failure). lib/graph/builder.c. */
pw_status_t pw__graph_add_host_task(pw_client_t* client, pw_graph_t graph, const char* name,
                                    pw_host_task_obj_t* task, pw_vslice_t vslice,
                                    const pw_value_t* inputs, uint32_t input_count,
                                    const pw_array_spec_t* output_specs, uint32_t output_count,
                                    uint32_t* out_node);

#endif /* PW_GRAPH_HOST_TASK_H_ */
