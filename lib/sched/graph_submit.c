#define _POSIX_C_SOURCE 200809L
/* The graph calls that run a graph, the dispatcher's entry points:
 * pw_graph_finalize (lowering by lib/graph, then the plan's dispatch data),
 * pw_graph_submit (the plan, made at the first submission if not
 * finalized), binding and checking the arguments, handing out the
 * outputs, donation, and armed graphs (pw_graph_exec_create, _submit,
 * _destroy). The run itself is dispatch.c's pw__dispatch_submit. */
#include <stdio.h>
#include <string.h>

#include "base/defer.h"
#include "graph/graph_internal.h"
#include "pathways/struct_size.h"
#include "sched/dispatch_internal.h"

/* One submission: the caller's arguments and what it runs. */
typedef struct pw_submission_s {
  pw_client_t* client;
  const char* who;                  /* names the call in the messages */
  /* The caller's reference to the graph (pw_graph_submit; the execution
   * takes it over, and then it is cleared), or NULL with |armed|. */
  struct pw_graph_obj_s* graph;
  pw_graph_exec_obj_t* armed;
  const pw_plan_t* plan;
  const pw_buffer_t* args;
  uint32_t arg_count;
  const pw_submit_options_t* options;
  pw_buffer_t* out_outputs;
  uint32_t output_count;
  pw_event_t** out_done;
} pw_submission_t;

/* The buffer objects of a submission's arguments (|looked_up| of them
 * hold a reference) and outputs: on the stack up to 16 of each. */
typedef struct pw_submit_binding_s {
  pw_buffer_obj_t** arg_objs;
  pw_buffer_obj_t** out_objs;
  uint32_t looked_up;
  pw_buffer_obj_t* arg_stack[16];
  pw_buffer_obj_t* out_stack[16];
} pw_submit_binding_t;

/* What pw_graph_submit and pw_graph_exec_submit check before anything
 * else. */
static pw_status_t pw_submit_check_args(const pw_submission_t* s) {
  if ((s->arg_count > 0 && s->args == NULL) || (s->output_count > 0 && s->out_outputs == NULL)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: args or out_outputs is NULL", s->who);
  }
  const pw_submit_options_t* options = s->options;
  if (options != NULL && options->struct_size < PW_SUBMIT_OPTIONS_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: options struct_size %zu is too small",
                          s->who, options->struct_size);
  }
  for (uint32_t i = 0; i < s->output_count; ++i) s->out_outputs[i].id = 0;
  return NULL;
}

/* The argument and output counts against the plan's. */
static pw_status_t pw_submit_check_counts(const pw_submission_t* s) {
  if (s->arg_count != s->plan->param_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: %u arguments given, the graph has %u parameters", s->who,
                          s->arg_count, s->plan->param_count);
  }
  if (s->output_count != s->plan->output_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: room for %u outputs given, the graph has %u", s->who,
                          s->output_count, s->plan->output_count);
  }
  return NULL;
}

/* Points |b| at its stack arrays, and with |status| NULL allocates what
 * does not fit in them. */
static pw_status_t pw_submit_binding_init(const pw_submission_t* s, pw_submit_binding_t* b,
                                          pw_status_t status) {
  pw_allocator_t a = s->client->runtime->allocator;
  b->arg_objs = b->arg_stack;
  b->out_objs = b->out_stack;
  b->looked_up = 0;
  if (status == NULL && s->arg_count > 16) {
    status = pw_allocator_calloc_array(a, s->arg_count, sizeof(void*), 0, (void**)&b->arg_objs);
  }
  if (status == NULL && s->output_count > 16) {
    status = pw_allocator_calloc_array(a, s->output_count, sizeof(void*), 0, (void**)&b->out_objs);
  }
  return status;
}

/* Releases the arguments |b| looked up and frees its arrays. */
static void pw_submit_binding_free(const pw_submission_t* s, pw_submit_binding_t* b) {
  pw_allocator_t a = s->client->runtime->allocator;
  for (uint32_t i = 0; i < b->looked_up; ++i) pw__object_release(&b->arg_objs[i]->header);
  if (b->arg_objs != b->arg_stack) pw_allocator_free(a, b->arg_objs, s->arg_count * sizeof(void*));
  if (b->out_objs != b->out_stack) {
    pw_allocator_free(a, b->out_objs, s->output_count * sizeof(void*));
  }
}

/* Looks argument |i| up (a reference in |*out|). */
static pw_status_t pw_submit_look_up_arg(const pw_submission_t* s, uint32_t i,
                                         pw_buffer_obj_t** out) {
  pw_status_t status =
      pw__handle_lookup(s->client, s->args[i].id, PW_OBJECT_BUFFER, "args", (pw_object_t**)out);
  if (status != NULL) {
    /* Name the argument (formatted only on this cold path): look it up
     * again with its index in the message; the same failure, unless the
     * handle changed meanwhile, in which case the look-up stands. */
    pw_status_free(status);
    char what[64];
    snprintf(what, sizeof(what), "%s: args[%u]", s->who, i);
    status =
        pw__handle_lookup(s->client, s->args[i].id, PW_OBJECT_BUFFER, what, (pw_object_t**)out);
  }
  return status;
}

/* Checks argument |i|, buffer |b|, against parameter |i|: its slice, mesh
 * and spec. */
static pw_status_t pw_submit_check_arg(const pw_submission_t* s, uint32_t i,
                                       const pw_buffer_obj_t* b) {
  const pw_array_spec_t* want = &s->plan->param_specs[i];
  const pw_vslice_obj_t* want_vs = s->plan->param_vslices[i];
  if (b->slice != want_vs->slice || !pw_mesh_shape_equal(&b->mesh, &want_vs->mesh)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "args[%u]: buffer lives on slice '%s', parameter %u is on "
                          "slice '%s'",
                          i, b->slice->name, i, want_vs->slice->name);
  }
  if (!pw_array_spec_equal(&b->spec, want)) {
    char have[160], expect[160];
    pw_array_spec_format(&b->spec, have, sizeof(have));
    pw_array_spec_format(want, expect, sizeof(expect));
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "args[%u]: buffer is %s, parameter %u expects %s", i, have, i, expect);
  }
  if (__builtin_expect(pw_atomic_load_u32_relaxed(&b->slice->losses) != b->losses, 0)) {
    char what[32];
    snprintf(what, sizeof(what), "args[%u]", i);
    return pw__buffer_lost(b, what);
  }
  return NULL;
}

/* Looks every argument up into |arg_objs| and checks it; |*out_looked_up|:
 * how many hold a reference, failed or not. */
static pw_status_t pw_submit_bind_args(const pw_submission_t* s, pw_buffer_obj_t** arg_objs,
                                       uint32_t* out_looked_up) {
  pw_status_t status = NULL;
  uint32_t i = 0;
  for (; status == NULL && i < s->arg_count; ++i) {
    status = pw_submit_look_up_arg(s, i, &arg_objs[i]);
    if (status != NULL) break;
    status = pw_submit_check_arg(s, i, arg_objs[i]);
    if (status != NULL) {
      ++i;
      break;
    }
  }
  *out_looked_up = i;
  return status;
}

/* Hands out output handles. The dispatcher already holds what it needs, so
 * a failure here only loses handles, never work: the outputs not handed
 * out yet are released, those that were are removed again. */
static pw_status_t pw_submit_hand_out(const pw_submission_t* s, pw_buffer_obj_t** out_objs) {
  pw_status_t status = NULL;
  for (uint32_t inserted = 0; status == NULL && inserted < s->output_count; ++inserted) {
    status = pw__handle_insert(s->client, &out_objs[inserted]->header,
                               &s->out_outputs[inserted].id);
    if (status != NULL) {
      for (uint32_t j = inserted + 1; j < s->output_count; ++j) {
        pw__object_release(&out_objs[j]->header);
      }
      for (uint32_t j = 0; j < inserted; ++j) {
        pw_status_ignore(
            pw__handle_remove(s->client, s->out_outputs[j].id, PW_OBJECT_BUFFER, "output"));
        s->out_outputs[j].id = 0;
      }
    }
  }
  return status;
}

/* Removes the handles of the arguments the options donate. */
static void pw_submit_donate(const pw_submission_t* s) {
  if (s->options == NULL || s->options->donate == NULL) return;
  for (uint32_t i = 0; i < s->arg_count; ++i) {
    if (s->options->donate[i]) {
      pw_status_ignore(
          pw__handle_remove(s->client, s->args[i].id, PW_OBJECT_BUFFER, "donated arg"));
    }
  }
}

/* The submission's launch deadline (0: the runtime's). */
static uint64_t pw_submit_deadline(const pw_submission_t* s) {
  const pw_submit_options_t* o = s->options;
  return o != NULL && PW_STRUCT_HAS_FIELD(o, pw_submit_options_t, launch_deadline_ns)
             ? o->launch_deadline_ns
             : 0;
}

/* The rest of a submission, once the plan is known (|status|: an error
 * found so far, returned after the clean-up). */
static pw_status_t pw_submit_plan(pw_submission_t* s, pw_status_t status) {
  /* One batch (base/defer.h): the outputs' allocations and the first
   * launches on a remote slice leave in one frame. */
  pw__defer_begin();
  if (status == NULL) status = pw_submit_check_counts(s);
  pw_submit_binding_t b;
  status = pw_submit_binding_init(s, &b, status);
  if (status == NULL) status = pw_submit_bind_args(s, b.arg_objs, &b.looked_up);
  pw_event_t* done = NULL;
  if (status == NULL) {
    status = pw__dispatch_submit(s->client, s->plan, s->graph != NULL ? pw__graph_object(s->graph) : NULL,
                                 s->armed, b.arg_objs, b.out_objs,
                                 s->out_done != NULL ? &done : NULL, pw_submit_deadline(s));
    /* On success the execution took over the look-up's reference. */
    if (status == NULL) s->graph = NULL;
  }
  if (status == NULL) status = pw_submit_hand_out(s, b.out_objs);
  if (status == NULL) pw_submit_donate(s);
  pw_submit_binding_free(s, &b);
  if (s->graph != NULL) pw__object_release(pw__graph_object(s->graph));
  if (status == NULL && s->out_done) {
    *s->out_done = done;
  } else {
    pw_event_release(done);
  }
  pw__defer_end();
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
  pw_submission_t s = {.client = client, .who = who, .args = args, .arg_count = arg_count,
                       .options = options, .out_outputs = out_outputs,
                       .output_count = output_count, .out_done = out_done};
  PW_RETURN_IF_ERROR(pw_submit_check_args(&s));
  PW_RETURN_IF_ERROR_CTX(pw__graph_lookup(client, graph, &s.graph), "%s", who);
  pw_status_t status = pw__graph_plan(client, s.graph, &s.plan);
  return pw_submit_plan(&s, status);
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
  struct pw_graph_obj_s* g = NULL;
  PW_RETURN_IF_ERROR(pw__graph_lookup(client, graph, &g));
  const pw_plan_t* plan = NULL;
  pw_status_t status = pw__graph_plan(client, g, &plan);
  pw_graph_exec_obj_t* armed = NULL;
  if (status == NULL) {
    status = pw_allocator_calloc(client->runtime->allocator, sizeof(*armed), 64, (void**)&armed);
  }
  if (status != NULL) {
    pw__object_release(pw__graph_object(g));
    return pw_status_annotate(status, "pw_graph_exec_create");
  }
  armed->client = client;
  armed->graph = pw__graph_object(g); /* the look-up's reference, now the armed graph's */
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
  pw_submission_t s = {.client = armed->client, .who = who, .armed = armed,
                       .plan = armed->plan, .args = args, .arg_count = arg_count,
                       .options = options, .out_outputs = out_outputs,
                       .output_count = output_count, .out_done = out_done};
  PW_RETURN_IF_ERROR(pw_submit_check_args(&s));
  return pw_submit_plan(&s, NULL);
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
    return pw__dispatch_submit(armed->client, armed->plan, NULL, armed, NULL, NULL, out_done, 0);
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

pw_status_t pw_graph_finalize(pw_client_t* client, pw_graph_t graph) {
  struct pw_graph_obj_s* g = NULL;
  PW_RETURN_IF_ERROR(pw__graph_lookup(client, graph, &g));
  const pw_plan_t* plan;
  pw_status_t status = pw__graph_plan(client, g, &plan);
  /* The dispatch data too, so that the first submission costs what the
   * next ones do. */
  const pw_plan_dispatch_t* pd;
  if (status == NULL) status = pw_plan_dispatch(client->runtime, plan, &pd);
  pw__object_release(pw__graph_object(g));
  return status;
}
