#define _POSIX_C_SOURCE 200809L
/* Submission: pw_graph_submit (its plan, made at the first submission),
 * binding and checking the arguments, handing out the outputs, donation,
 * and armed graphs (pw_graph_exec_create, _submit, _destroy). The run
 * itself is lib/sched's (pw__dispatch_submit). */
#include <stdio.h>
#include <string.h>

#include "graph/graph_obj.h"

/* What pw_graph_submit and pw_graph_exec_submit check before anything
 * else; |who| names the call in the messages. */
static pw_status_t pw_submit_check_args(const char* who, const pw_buffer_t* args,
                                        uint32_t arg_count, const pw_submit_options_t* options,
                                        pw_buffer_t* out_outputs, uint32_t output_count) {
  if ((arg_count > 0 && args == NULL) || (output_count > 0 && out_outputs == NULL)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: args or out_outputs is NULL", who);
  }
  if (options != NULL && options->struct_size < sizeof(size_t) + sizeof(const bool*)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: options struct_size %zu is too small",
                          who, options->struct_size);
  }
  for (uint32_t i = 0; i < output_count; ++i) out_outputs[i].id = 0;
  return NULL;
}

/* The rest of a submission, once the plan is known (|status|: an error
 * found so far, returned after the clean-up). |g|: the caller's
 * reference to the graph (pw_graph_submit; the execution takes it over),
 * or NULL with |armed|. */
static pw_status_t pw_submit_plan(pw_client_t* client, const char* who, pw_graph_obj_t* g,
                                  pw_graph_exec_obj_t* armed, const pw_plan_t* plan,
                                  pw_status_t status, const pw_buffer_t* args,
                                  uint32_t arg_count, const pw_submit_options_t* options,
                                  pw_buffer_t* out_outputs, uint32_t output_count,
                                  pw_event_t** out_done) {
  if (status == NULL && arg_count != plan->param_count) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%s: %u arguments given, the graph has %u parameters", who,
                            arg_count, plan->param_count);
  }
  if (status == NULL && output_count != plan->output_count) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%s: room for %u outputs given, the graph has %u", who,
                            output_count, plan->output_count);
  }
  pw_runtime_t* rt = client->runtime;
  pw_buffer_obj_t* arg_stack[16];
  pw_buffer_obj_t* out_stack[16];
  pw_buffer_obj_t** arg_objs = arg_stack;
  pw_buffer_obj_t** out_objs = out_stack;
  if (status == NULL && arg_count > 16) {
    status = pw_allocator_calloc_array(rt->allocator, arg_count, sizeof(void*), 0,
                                       (void**)&arg_objs);
  }
  if (status == NULL && output_count > 16) {
    status = pw_allocator_calloc_array(rt->allocator, output_count, sizeof(void*), 0,
                                       (void**)&out_objs);
  }
  uint32_t looked_up = 0;
  for (; status == NULL && looked_up < arg_count; ++looked_up) {
    status = pw__handle_lookup(client, args[looked_up].id, PW_OBJECT_BUFFER, "args",
                               (pw_object_t**)&arg_objs[looked_up]);
    if (status != NULL) {
      /* Name the argument (formatted only on this cold path): look it up
       * again with its index in the message; the same failure, unless the
       * handle changed meanwhile, in which case the look-up stands. */
      pw_status_free(status);
      char what[64];
      snprintf(what, sizeof(what), "%s: args[%u]", who, looked_up);
      status = pw__handle_lookup(client, args[looked_up].id, PW_OBJECT_BUFFER, what,
                                 (pw_object_t**)&arg_objs[looked_up]);
      if (status != NULL) break;
    }
    pw_buffer_obj_t* b = arg_objs[looked_up];
    const pw_array_spec_t* want = &plan->param_specs[looked_up];
    const pw_vslice_obj_t* want_vs = plan->param_vslices[looked_up];
    if (b->slice != want_vs->slice || !pw_mesh_shape_equal(&b->mesh, &want_vs->mesh)) {
      status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "args[%u]: buffer lives on slice '%s', parameter %u is on "
                              "slice '%s'",
                              looked_up, b->slice->name, looked_up, want_vs->slice->name);
    } else if (!pw_array_spec_equal(&b->spec, want)) {
      char have[160], expect[160];
      pw_array_spec_format(&b->spec, have, sizeof(have));
      pw_array_spec_format(want, expect, sizeof(expect));
      status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "args[%u]: buffer is %s, parameter %u expects %s", looked_up,
                              have, looked_up, expect);
    }
    if (status != NULL) {
      ++looked_up;
      break;
    }
  }
  pw_event_t* done = NULL;
  if (status == NULL) {
    status = pw__dispatch_submit(client, plan, g != NULL ? &g->header : NULL, armed, arg_objs,
                                 out_objs, out_done != NULL ? &done : NULL);
    /* On success the execution took over the look-up's reference. */
    if (status == NULL) g = NULL;
  }
  /* Hand out output handles. The dispatcher already holds what it needs, so
   * a failure here only loses handles, never work. */
  uint32_t inserted = 0;
  for (; status == NULL && inserted < output_count; ++inserted) {
    status = pw__handle_insert(client, &out_objs[inserted]->header, &out_outputs[inserted].id);
    if (status != NULL) {
      for (uint32_t j = inserted + 1; j < output_count; ++j) {
        pw__object_release(&out_objs[j]->header);
      }
      for (uint32_t j = 0; j < inserted; ++j) {
        pw_status_ignore(pw__handle_remove(client, out_outputs[j].id, PW_OBJECT_BUFFER, "output"));
        out_outputs[j].id = 0;
      }
    }
  }
  if (status == NULL && options != NULL && options->donate != NULL) {
    for (uint32_t i = 0; i < arg_count; ++i) {
      if (options->donate[i]) {
        pw_status_ignore(pw__handle_remove(client, args[i].id, PW_OBJECT_BUFFER, "donated arg"));
      }
    }
  }
  for (uint32_t i = 0; i < looked_up; ++i) pw__object_release(&arg_objs[i]->header);
  if (arg_objs != arg_stack) {
    pw_allocator_free(rt->allocator, arg_objs, arg_count * sizeof(void*));
  }
  if (out_objs != out_stack) {
    pw_allocator_free(rt->allocator, out_objs, output_count * sizeof(void*));
  }
  if (g != NULL) pw__object_release(&g->header);
  if (status == NULL && out_done) {
    *out_done = done;
  } else {
    pw_event_release(done);
  }
  return status;
}

pw_status_t pw_graph_submit(pw_client_t* client, pw_graph_t graph, const pw_buffer_t* args,
                            uint32_t arg_count, const pw_submit_options_t* options,
                            pw_buffer_t* out_outputs, uint32_t output_count,
                            pw_event_t** out_done) {
  static const char who[] = "pw_graph_submit";
  if (out_done) *out_done = NULL;
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: client is NULL", who);
  }
  PW_RETURN_IF_ERROR(
      pw_submit_check_args(who, args, arg_count, options, out_outputs, output_count));
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_graph_get(client, graph, &g), "%s", who);
  const pw_plan_t* plan = NULL;
  pw_status_t status = pw__graph_plan(client, g, &plan);
  return pw_submit_plan(client, who, g, NULL, plan, status, args, arg_count, options,
                        out_outputs, output_count, out_done);
}

/* ---- armed graphs ------------------------------------------------------- */

pw_status_t pw_graph_exec_create(pw_client_t* client, pw_graph_t graph,
                                 pw_graph_exec_t** out_exec) {
  if (out_exec == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_graph_exec_create: out_exec is NULL");
  }
  *out_exec = NULL;
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_graph_exec_create: client is NULL");
  }
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, &g));
  const pw_plan_t* plan = NULL;
  pw_status_t status = pw__graph_plan(client, g, &plan);
  pw_graph_exec_obj_t* armed = NULL;
  if (status == NULL) {
    status = pw_allocator_calloc(client->runtime->allocator, sizeof(*armed), 64, (void**)&armed);
  }
  if (status != NULL) {
    pw__object_release(&g->header);
    return pw_status_annotate(status, "pw_graph_exec_create");
  }
  armed->client = client;
  armed->graph = &g->header; /* the look-up's reference, now the armed graph's */
  armed->plan = plan;
  pw__dispatch_exec_register(armed);
  *out_exec = (pw_graph_exec_t*)armed;
  return NULL;
}

/* pw_graph_exec_submit past its short path: checks, look-ups, output
 * handles. Kept out of line so that the short path saves no registers. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static pw_status_t pw_graph_exec_submit_full(pw_graph_exec_obj_t* armed, const pw_buffer_t* args,
                                             uint32_t arg_count,
                                             const pw_submit_options_t* options,
                                             pw_buffer_t* out_outputs, uint32_t output_count,
                                             pw_event_t** out_done) {
  static const char who[] = "pw_graph_exec_submit";
  if (out_done) *out_done = NULL;
  if (armed == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: exec is NULL", who);
  }
  PW_RETURN_IF_ERROR(
      pw_submit_check_args(who, args, arg_count, options, out_outputs, output_count));
  return pw_submit_plan(armed->client, who, NULL, armed, armed->plan, NULL, args, arg_count,
                        options, out_outputs, output_count, out_done);
}

pw_status_t pw_graph_exec_submit(pw_graph_exec_t* exec, const pw_buffer_t* args,
                                 uint32_t arg_count, const pw_submit_options_t* options,
                                 pw_buffer_t* out_outputs, uint32_t output_count,
                                 pw_event_t** out_done) {
  pw_graph_exec_obj_t* armed = (pw_graph_exec_obj_t*)exec;
  if (armed != NULL && arg_count == 0 && output_count == 0 && options == NULL &&
      armed->plan->param_count == 0 && armed->plan->output_count == 0) {
    /* Nothing to check, look up, hand out or donate (a task spawned for
     * its effect): straight to dispatch, which sets *out_done (NULL
     * unless it succeeds). */
    return pw__dispatch_submit(armed->client, armed->plan, NULL, armed, NULL, NULL, out_done);
  }
  return pw_graph_exec_submit_full(armed, args, arg_count, options, out_outputs, output_count,
                                   out_done);
}

pw_status_t pw_graph_exec_destroy(pw_graph_exec_t* exec) {
  if (exec == NULL) return NULL;
  if (pw__in_callback()) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "pw_graph_exec_destroy: called from inside a callback the runtime is "
                          "running, which its runs may wait for; the armed graph is left as "
                          "it is");
  }
  pw__dispatch_exec_destroy((pw_graph_exec_obj_t*)exec);
  return NULL;
}
