/* The dispatcher's reports to the runtime's observers (report.h): each
 * builds one pw_obs_event_t (lib/observe/observe.h) from the dispatch
 * state it is given and hands it over. Only reached while something
 * observes the runtime. */
#include <string.h>

#include "pathways/clock.h"
#include "sched/dispatch_internal.h"
#include "sched/report.h"
#include "sched/token.h"

static void pw_report_init(pw_obs_event_t* e, uint32_t kind) {
  memset(e, 0, sizeof(*e));
  e->ts_ns = (uint64_t)pw_clock_now();
  e->kind = kind;
  e->slice = UINT32_MAX;
  e->device = UINT32_MAX;
}

/* |op|'s identity: execution, gang, client, node and name. */
static void pw_report_op(pw_obs_event_t* e, const pw_op_t* op) {
  e->exec = op->exec->gang_base;
  e->gang = pw_op_gang_id(op);
  e->client = op->exec->client->tag;
  e->node = op->plan->node;
  e->name = op->plan->name;
}

static void pw_report_unit(pw_obs_event_t* e, const pw_device_t* d) {
  e->slice = d->slice->index;
  e->device = d->mesh_index;
  e->count = d->lane_size;
  if (d->lane_size > 1) e->flags |= PW_OBS_HOST;
}

static void pw_report_failed(pw_obs_event_t* e, pw_status_t status) {
  if (status == NULL) return;
  e->flags |= PW_OBS_FAILED;
  e->status_code = (uint32_t)pw_status_code(status);
}

void pw__report_submit(pw_observe_t* o, pw_execution_t* exec) {
  pw_obs_event_t e;
  pw_report_init(&e, PW_OBS_SUBMIT);
  exec->observed_ns = e.ts_ns;
  e.exec = exec->gang_base;
  e.gang = exec->gang_base;
  e.client = exec->client->tag;
  e.count = exec->plan->op_count;
  pw__observe_name_client(o, exec->client->tag, exec->client->name);
  pw__observe(o, &e);
}

void pw__report_admit(pw_observe_t* o, pw_slice_t* slice, pw_op_t* op) {
  pw_obs_event_t e;
  pw_report_init(&e, PW_OBS_ADMIT);
  pw_report_op(&e, op);
  e.slice = slice->index;
  pw__observe(o, &e);
}

/* The graph edges into |op| on |d|: one FLOW per distinct producing op. */
static void pw_report_flows(pw_observe_t* o, const pw_obs_event_t* launch, const pw_op_t* op) {
  const pw_plan_op_t* p = op->plan;
  for (uint32_t i = 0; i < p->input_count; ++i) {
    int32_t from = p->inputs[i].op;
    if (from < 0) continue;
    bool seen = false;
    for (uint32_t j = 0; j < i && !seen; ++j) seen = p->inputs[j].op == from;
    if (seen) continue;
    pw_obs_event_t e = *launch;
    e.kind = PW_OBS_FLOW;
    e.from_gang = op->exec->gang_base + (uint64_t)from;
    pw__observe(o, &e);
  }
}

void pw__report_launch(pw_observe_t* o, pw_device_t* d, pw_op_t* op, void* user,
                       uint64_t queue_seq) {
  pw_obs_event_t e;
  pw_report_init(&e, PW_OBS_LAUNCH);
  pw_report_op(&e, op);
  pw_report_unit(&e, d);
  if (queue_seq != 0) e.flags |= PW_OBS_QUEUED;
  uint64_t gen = (uintptr_t)user & (PW_TOKEN_GENERATIONS - 1);
  pw_atomic_store_u64_relaxed(&pw_token_of(user)->observed, e.ts_ns << 6 | gen);
  pw_report_flows(o, &e, op);
  pw__observe(o, &e);
}

uint64_t pw__report_launched_at(void* user) {
  uint64_t observed = pw_atomic_load_u64_relaxed(&pw_token_of(user)->observed);
  uint64_t gen = (uintptr_t)user & (PW_TOKEN_GENERATIONS - 1);
  return (observed & (PW_TOKEN_GENERATIONS - 1)) == gen ? observed >> 6 : 0;
}

void pw__report_launch_done(pw_observe_t* o, pw_device_t* d, pw_op_t* op, uint64_t launched_at,
                            bool queued, pw_status_t status, const pw_backend_timing_t* timing,
                            bool expired) {
  pw_obs_event_t e;
  pw_report_init(&e, PW_OBS_LAUNCH_DONE);
  pw_report_op(&e, op);
  pw_report_unit(&e, d);
  if (queued) e.flags |= PW_OBS_QUEUED;
  e.since_ns = launched_at; /* 0: launched before observing began */
  if (timing != NULL && timing->struct_size >= PW_BACKEND_TIMING_SIZE_V1 &&
      timing->end_ns >= timing->start_ns) {
    e.start_ns = timing->start_ns;
    e.end_ns = timing->end_ns;
  }
  pw_report_failed(&e, status);
  if (expired) {
    pw_obs_event_t late = e;
    late.kind = PW_OBS_DEADLINE;
    pw__observe(o, &late);
  }
  pw__observe(o, &e);
}

void pw__report_copy(pw_observe_t* o, pw_device_t* d, pw_op_t* op) {
  pw_obs_event_t e;
  pw_report_init(&e, PW_OBS_COPY);
  pw_report_op(&e, op);
  pw_report_unit(&e, d);
  e.bytes = (uint64_t)op->outputs[0]->shard_bytes * d->lane_size;
  d->observed_ns = e.ts_ns;
  pw_report_flows(o, &e, op);
  pw__observe(o, &e);
}

void pw__report_copy_done(pw_observe_t* o, pw_device_t* d, pw_op_t* op, pw_status_t status) {
  pw_obs_event_t e;
  pw_report_init(&e, PW_OBS_COPY_DONE);
  pw_report_op(&e, op);
  pw_report_unit(&e, d);
  e.bytes = (uint64_t)op->outputs[0]->shard_bytes * d->lane_size;
  e.since_ns = d->observed_ns;
  d->observed_ns = 0;
  pw_report_failed(&e, status);
  pw__observe(o, &e);
}

void pw__report_op_done(pw_observe_t* o, pw_op_t* op, pw_status_t failure) {
  pw_obs_event_t e;
  pw_report_init(&e, PW_OBS_OP_DONE);
  pw_report_op(&e, op);
  e.slice = op->slice->span[0]->index;
  e.count = op->slice->device_count;
  e.since_ns = op->exec->observed_ns;
  pw_report_failed(&e, failure);
  pw__observe(o, &e);
}

void pw__report_exec_done(pw_observe_t* o, pw_execution_t* exec, pw_status_t status) {
  pw_obs_event_t e;
  pw_report_init(&e, PW_OBS_EXEC_DONE);
  e.exec = exec->gang_base;
  e.gang = exec->gang_base;
  e.client = exec->client->tag;
  e.count = exec->plan->op_count;
  e.since_ns = exec->observed_ns;
  exec->observed_ns = 0;
  pw_report_failed(&e, status);
  pw__observe(o, &e);
}

uint64_t pw__report_host(pw_observe_t* o, pw_op_t* op, bool done, uint64_t since_ns,
                         pw_status_t status) {
  pw_obs_event_t e;
  pw_report_init(&e, done ? PW_OBS_HOST_TASK_DONE : PW_OBS_HOST_TASK);
  pw_report_op(&e, op);
  e.since_ns = done ? since_ns : 0;
  e.slice = op->slice->index;
  e.device = 0;
  e.count = op->slice->device_count;
  pw_report_failed(&e, status);
  if (!done) pw_report_flows(o, &e, op);
  pw__observe(o, &e);
  return e.ts_ns;
}
