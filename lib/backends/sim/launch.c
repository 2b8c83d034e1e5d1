/* The sim backend's launch: validation, virtual timing, failure checks,
 * data effects, and collectives as gang rendezvous.
 *
 * The INLINE path of a non-collective launch is the hot path of dispatch
 * benchmarks: no allocation, one spinlock on the device (its timeline and
 * trace chain), then done on the caller's thread. Every other launch keeps
 * a part (pw_sim__part_t) until its completion is delivered: collectives
 * wait in a group keyed by gang id until the last member arrives; queued
 * modes push the decided completion into the event queue (queue.c).
 * Collectives are in collective.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/sim/sim_internal.h"

#define PW_SIM_LAUNCH_SIZE_V1 PW_BACKEND_LAUNCH_SIZE_V1

static _Thread_local int pw_sim_tls_delivering;
/* The backend and completion time of the done callback this thread runs
 * (the launch time of what it launches, with a dispatch latency). */
static _Thread_local pw_sim__backend_t* pw_sim_tls_backend;
static _Thread_local uint64_t pw_sim_tls_time;

uint64_t pw_sim__launch_time(pw_sim__backend_t* b) {
  uint64_t now = atomic_load_explicit(&b->now, memory_order_relaxed);
  if (b->dispatch_latency_ns > 0 && pw_sim_tls_delivering > 0 && pw_sim_tls_backend == b &&
      pw_sim_tls_time > now) {
    return pw_sim_tls_time;
  }
  return now;
}

/* Runs one completion's callback: done_timed with [begin, end] when the
 * launch gave one (|timed| false: no device time, e.g. cancelled). */
void pw_sim__call_done(pw_sim__backend_t* b, pw_backend_done_fn_t done,
                       pw_backend_done_timed_fn_t done_timed, void* user, pw_status_t status,
                       bool timed, uint64_t begin, uint64_t end) {
  pw_sim__call_done_busy(b, done, done_timed, user, status, timed, begin, end, 0);
}

void pw_sim__call_done_busy(pw_sim__backend_t* b, pw_backend_done_fn_t done,
                            pw_backend_done_timed_fn_t done_timed, void* user, pw_status_t status,
                            bool timed, uint64_t begin, uint64_t end, uint64_t busy) {
  pw_sim__backend_t* saved_backend = pw_sim_tls_backend;
  uint64_t saved_time = pw_sim_tls_time;
  pw_sim_tls_backend = b;
  pw_sim_tls_time = end;
  ++pw_sim_tls_delivering;
  if (done_timed != NULL) {
    pw_backend_timing_t timing = {sizeof(timing), begin < end ? begin : end, end, busy};
    done_timed(user, status, timed ? &timing : NULL);
  } else {
    done(user, status);
  }
  --pw_sim_tls_delivering;
  pw_sim_tls_backend = saved_backend;
  pw_sim_tls_time = saved_time;
}

/* The launch's done_timed, when its struct_size covers it. */
static pw_backend_done_timed_fn_t pw_sim_done_timed(const pw_backend_launch_t* l) {
  return l->struct_size >= PW_BACKEND_LAUNCH_SIZE_V2 ? l->done_timed : NULL;
}

/* Above this many (output, parameter) pairs a launch's outputs are checked
 * for aliases by sorting, not pairwise. */
#define PW_SIM_ALIAS_QUADRATIC 1024u

typedef struct pw_sim_alias_t {
  uintptr_t memory;
  uint32_t output;  /* 0: an input, 1: an output */
  uint32_t index;
} pw_sim_alias_t;

static int pw_sim_alias_cmp(const void* a, const void* b) {
  const pw_sim_alias_t* x = a;
  const pw_sim_alias_t* y = b;
  if (x->memory != y->memory) return x->memory < y->memory ? -1 : 1;
  if (x->output != y->output) return x->output < y->output ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* The wide launches' alias check (as the pairwise one says), O(n log n). */
static pw_status_t pw_sim_check_aliases(pw_sim__backend_t* b, const pw_backend_launch_t* l,
                                        const char* name) {
  size_t n = (size_t)l->input_count + l->output_count;
  pw_sim_alias_t* v = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_allocator_calloc_array(b->allocator, n, sizeof(*v), 0, (void**)&v),
                         "sim launch of '%s': checking %zu arguments", name, n);
  size_t at = 0;
  for (uint32_t i = 0; i < l->input_count; ++i) {
    v[at++] = (pw_sim_alias_t){(uintptr_t)l->inputs[i], 0, i};
  }
  for (uint32_t o = 0; o < l->output_count; ++o) {
    v[at++] = (pw_sim_alias_t){(uintptr_t)l->outputs[o], 1, o};
  }
  qsort(v, n, sizeof(*v), pw_sim_alias_cmp);
  pw_status_t status = NULL;
  for (size_t k = 0; k < n && status == NULL;) {
    size_t end = k + 1, first_output = k;
    while (end < n && v[end].memory == v[k].memory) ++end;
    while (first_output < end && !v[first_output].output) ++first_output;
    if (first_output < end && end - k > 1) {
      status = first_output > k
                   ? pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                                    "sim launch of '%s': output %u is the same memory as "
                                    "input %u",
                                    name, v[first_output].index, v[k].index)
                   : pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                                    "sim launch of '%s': outputs %u and %u are the same memory",
                                    name, v[k].index, v[k + 1].index);
    }
    k = end;
  }
  pw_allocator_free(b->allocator, v, n * sizeof(*v));
  return status;
}

/*---------------------------------------------------------------------------
 * Validation
 *-------------------------------------------------------------------------*/

pw_status_t pw_sim__check_launch(pw_sim__backend_t* b, const pw_backend_launch_t* l) {
  if (l == NULL || l->struct_size < PW_SIM_LAUNCH_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim launch: descriptor is NULL or its struct_size is below v1");
  }
  pw_backend_executable_t e = l->executable;
  if (e == NULL || e->magic != PW_SIM__EXECUTABLE_MAGIC || e->backend != b) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim launch on device %u: the executable is not one loaded by this "
                          "sim backend",
                          l->device);
  }
  const char* name = e->program.name;
  if (l->device >= b->device_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim launch of '%s': device %u does not exist (the backend has %u)",
                          name, l->device, b->device_count);
  }
  if (l->group_size != e->group_size || l->mesh_index >= l->group_size ||
      l->group_devices == NULL || l->group_devices[l->mesh_index] != l->device) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim launch of '%s' on device %u: mesh position %u in a gang of %u "
                          "does not fit the executable's mesh of %u devices (or "
                          "group_devices does not name the device there)",
                          name, l->device, l->mesh_index, l->group_size, e->group_size);
  }
  if (l->done == NULL && pw_sim_done_timed(l) == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim launch of '%s': done (and done_timed) is NULL", name);
  }
  if (l->input_count != e->program.input_count || l->output_count != e->program.output_count ||
      (l->input_count > 0 && l->inputs == NULL) || (l->output_count > 0 && l->outputs == NULL)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim launch of '%s': %u inputs and %u outputs given, the executable "
                          "takes %u and %u",
                          name, l->input_count, l->output_count, e->program.input_count,
                          e->program.output_count);
  }
  for (int pass = 0; pass < 2; ++pass) {
    uint32_t count = pass == 0 ? l->input_count : l->output_count;
    const pw_backend_memory_t* memories = pass == 0 ? l->inputs : l->outputs;
    const size_t* need = pass == 0 ? e->input_bytes : e->output_bytes;
    const char* role = pass == 0 ? "input" : "output";
    for (uint32_t i = 0; i < count; ++i) {
      PW_RETURN_IF_ERROR_CTX(pw_sim__check_memory(b, l->device, memories[i], "launch"),
                             "'%s' %s %u", name, role, i);
      if (memories[i]->size < need[i]) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "sim launch of '%s' on device %u: %s %u has %zu bytes, its shard "
                              "needs %zu",
                              name, l->device, role, i, memories[i]->size, need[i]);
      }
    }
  }
  if ((uint64_t)l->output_count * (l->input_count + l->output_count) > PW_SIM_ALIAS_QUADRATIC) {
    return pw_sim_check_aliases(b, l, name);
  }
  for (uint32_t o = 0; o < l->output_count; ++o) {
    for (uint32_t i = 0; i < l->input_count; ++i) {
      if (l->outputs[o] == l->inputs[i]) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "sim launch of '%s': output %u is the same memory as input %u",
                              name, o, i);
      }
    }
    for (uint32_t j = 0; j < o; ++j) {
      if (l->outputs[o] == l->outputs[j]) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "sim launch of '%s': outputs %u and %u are the same memory", name,
                              j, o);
      }
    }
  }
  return NULL;
}

/*---------------------------------------------------------------------------
 * Completion helpers
 *-------------------------------------------------------------------------*/

pw_status_t pw_sim__unavailable(pw_sim__backend_t* b, uint32_t device, uint64_t fail_at,
                                      const char* op, uint64_t gang_id, uint32_t failed_device) {
  char name[64];
  pw_sim__device_name(b, failed_device, name, sizeof(name));
  if (failed_device == device) {
    return pw_status_make(PW_STATUS_UNAVAILABLE,
                          "sim %s failed at virtual time %llu ns; op '%s' (gang %llu) lost", name,
                          (unsigned long long)fail_at, op, (unsigned long long)gang_id);
  }
  return pw_status_make(PW_STATUS_UNAVAILABLE,
                        "sim collective '%s' (gang %llu) on device %u lost: member %s failed at "
                        "virtual time %llu ns",
                        op, (unsigned long long)gang_id, device, name,
                        (unsigned long long)fail_at);
}

void pw_sim__account(pw_sim__backend_t* b, uint32_t device, uint64_t begin, uint64_t time,
                     pw_sim_event_kind_t kind, uint64_t gang_id) {
  pw_sim__device_t* d = &b->devices[device];
  pw_sim__device_lock(d);
  if (kind != PW_SIM_EVENT_TRANSFER && time > d->done_until) d->done_until = time;
  if (begin != PW_SIM_TIME_NEVER) pw_sim__busy(d, begin, time);
  d->chain = pw_sim__fold(d->chain, time, device, (uint32_t)kind, gang_id);
  d->events++;
  pw_sim__device_unlock(d);
  pw_sim__raise(&b->latest, time);
}

void pw_sim__part_free(pw_sim__backend_t* b, pw_sim__part_t* part) {
  pw_status_free(part->status);
  if (part->wide_args != NULL) {
    pw_allocator_free(b->allocator, part->wide_args,
                      ((size_t)part->input_count + part->output_count) *
                          sizeof(pw_backend_memory_t));
    part->wide_args = NULL;
  }
  if (part->executable != NULL) pw_sim__executable_release(part->executable);
  pw_sim__part_recycle(b, part);
}

void pw_sim__deliver(pw_sim__backend_t* b, pw_sim__part_t* part) {
  /* A failure injected after the timing was decided still fails the op. */
  if (part->kind == PW_SIM_EVENT_DONE) {
    uint64_t f = atomic_load_explicit(&b->devices[part->device].fail_at, memory_order_relaxed);
    if (f <= part->start || f < part->time) {
      part->kind = PW_SIM_EVENT_FAILED;
      part->time = f > part->start ? f : part->start;
      part->status = pw_sim__unavailable(b, part->device, f, part->executable->program.name,
                                        part->gang_id, part->device);
    }
  }
  if (part->kind != PW_SIM_EVENT_DONE) atomic_fetch_add(&b->failed_events, 1);
  bool timed = part->kind != PW_SIM_EVENT_CANCELLED;
  pw_sim__account(b, part->device, timed ? part->begin : PW_SIM_TIME_NEVER, part->time,
                  part->kind, part->gang_id);
  if (b->trace != NULL) {
    pw_sim_event_t event = {part->time,    part->start,   part->device,
                            part->kind,    part->gang_id, part->executable->program.name};
    b->trace(b->trace_user, &event);
  }
  if (part->ordered) pw_sim__stream_delivered(b, part);
  pw_status_t status = part->status;
  part->status = NULL;
  pw_backend_done_fn_t done = part->done;
  pw_backend_done_timed_fn_t done_timed = part->done_timed;
  void* user = part->done_user;
  uint64_t begin = part->begin, end = part->time;
  pw_sim__part_free(b, part);
  pw_sim__call_done(b, done, done_timed, user, status, timed, begin, end);
}

bool pw_sim__in_done_callback(void) { return pw_sim_tls_delivering > 0; }

/* Hands a decided part to its done: now (INLINE) or through the queue. */
void pw_sim__complete(pw_sim__backend_t* b, pw_sim__part_t* part) {
  if (b->mode == PW_SIM_MODE_INLINE) {
    pw_sim__deliver(b, part);
  } else {
    pw_sim__queue_push(b, part);
  }
}

/* Data effect of a copy on one device. */
static void pw_sim_copy_effect(const pw_backend_launch_t* l) {
  pw_backend_memory_t in = l->inputs[0];
  pw_backend_memory_t out = l->outputs[0];
  size_t bytes = l->executable->input_bytes[0];
  if (in->data != NULL && out->data != NULL && bytes > 0) memcpy(out->data, in->data, bytes);
}

static void pw_sim_mark_outputs(const pw_backend_launch_t* l, uint64_t end) {
  for (uint32_t o = 0; o < l->output_count; ++o) pw_sim__raise(&l->outputs[o]->ready_at, end);
}

/*---------------------------------------------------------------------------
 * One device (not a collective)
 *-------------------------------------------------------------------------*/

/* Decides start and completion time on |device| under its lock; returns
 * true if the device's failure catches the op. */
static bool pw_sim_decide(pw_sim__device_t* d, uint64_t ready, uint64_t cost, uint64_t* start,
                          uint64_t* time, uint64_t* fail_at) {
  uint64_t s = d->busy_until > ready ? d->busy_until : ready;
  uint64_t end = s + cost;
  uint64_t f = atomic_load_explicit(&d->fail_at, memory_order_relaxed);
  bool failed = f <= s || f < end;
  *start = s;
  *time = failed ? (f > s ? f : s) : end;
  *fail_at = f;
  d->busy_until = *time;
  return failed;
}

void pw_sim__decide_locked(pw_sim__device_t* d, const pw_backend_launch_t* l, uint64_t ready,
                           pw_sim__decision_t* out) {
  out->failed = pw_sim_decide(d, ready, l->executable->cost_ns, &out->start, &out->time,
                              &out->fail_at);
  pw_sim_event_kind_t kind = out->failed ? PW_SIM_EVENT_FAILED : PW_SIM_EVENT_DONE;
  if (out->time > d->done_until) d->done_until = out->time;
  d->chain = pw_sim__fold(d->chain, out->time, l->device, (uint32_t)kind, l->gang_id);
  d->events++;
  pw_sim__busy(d, out->start, out->time);
}

pw_status_t pw_sim__decided(pw_sim__backend_t* b, const pw_backend_launch_t* l,
                            const pw_sim__decision_t* c) {
  pw_backend_executable_t e = l->executable;
  pw_sim__raise(&b->latest, c->time);
  pw_status_t status = NULL;
  if (c->failed) {
    atomic_fetch_add(&b->failed_events, 1);
    status = pw_sim__unavailable(b, l->device, c->fail_at, e->program.name, l->gang_id,
                                 l->device);
  } else {
    if (e->program.kind == PW_SIM__COPY) pw_sim_copy_effect(l);
    pw_sim_mark_outputs(l, c->time);
  }
  if (b->trace != NULL) {
    pw_sim_event_kind_t kind = c->failed ? PW_SIM_EVENT_FAILED : PW_SIM_EVENT_DONE;
    pw_sim_event_t event = {c->time, c->start, l->device, kind, l->gang_id, e->program.name};
    b->trace(b->trace_user, &event);
  }
  return status;
}

static pw_status_t pw_sim_launch_inline(pw_sim__backend_t* b, const pw_backend_launch_t* l,
                                        uint64_t ready) {
  pw_sim__device_t* d = &b->devices[l->device];
  pw_sim__decision_t c;
  pw_sim__device_lock(d);
  pw_sim__decide_locked(d, l, ready, &c);
  pw_sim__device_unlock(d);
  pw_status_t status = pw_sim__decided(b, l, &c);
  pw_sim__call_done(b, l->done, pw_sim_done_timed(l), l->done_user, status, true, c.start,
                    c.time);
  return NULL;
}

pw_status_t pw_sim__part_new(pw_sim__backend_t* b, const pw_backend_launch_t* l,
                                   pw_sim__part_t** out) {
  *out = NULL;
  if (b->mode != PW_SIM_MODE_INLINE) PW_RETURN_IF_ERROR(pw_sim__queue_reserve(b));
  pw_sim__part_t* memory = NULL;
  pw_status_t status = pw_sim__part_alloc(b, &memory);
  if (status != NULL) {
    if (b->mode != PW_SIM_MODE_INLINE) pw_sim__queue_unreserve(b);
    return pw_status_annotate(status, "sim launch of '%s' on device %u",
                              l->executable->program.name, l->device);
  }
  pw_sim__part_t* part = memory;
  part->done = l->done;
  part->done_timed = pw_sim_done_timed(l);
  part->done_user = l->done_user;
  part->executable = l->executable;
  atomic_fetch_add(&l->executable->refs, 1);
  part->gang_id = l->gang_id;
  part->device = l->device;
  part->mesh_index = l->mesh_index;
  part->kind = PW_SIM_EVENT_DONE;
  if (l->input_count > 0) part->input0 = l->inputs[0];
  if (l->output_count > 0) part->output0 = l->outputs[0];
  part->input_count = l->input_count;
  part->output_count = l->output_count;
  part->inputs = part->inline_args;
  part->outputs = part->inline_args + PW_BACKEND_MAX_PARAMS;
  if (l->input_count > PW_BACKEND_MAX_PARAMS || l->output_count > PW_BACKEND_MAX_PARAMS) {
    status = pw_allocator_calloc_array(b->allocator, (size_t)l->input_count + l->output_count,
                                       sizeof(pw_backend_memory_t), 0,
                                       (void**)&part->wide_args);
    if (status != NULL) {
      pw_sim__part_discard(b, part);
      return pw_status_annotate(status, "sim launch of '%s' on device %u: %u arguments",
                                l->executable->program.name, l->device,
                                l->input_count + l->output_count);
    }
    part->inputs = part->wide_args;
    part->outputs = part->wide_args + l->input_count;
  }
  if (l->input_count > 0) memcpy(part->inputs, l->inputs, l->input_count * sizeof(l->inputs[0]));
  if (l->output_count > 0) {
    memcpy(part->outputs, l->outputs, l->output_count * sizeof(l->outputs[0]));
  }
  *out = part;
  return NULL;
}

/* Frees a part that was never handed out (launch failed after creating it). */
void pw_sim__part_discard(pw_sim__backend_t* b, pw_sim__part_t* part) {
  if (b->mode != PW_SIM_MODE_INLINE) pw_sim__queue_unreserve(b);
  pw_sim__part_free(b, part);
}

static pw_status_t pw_sim_launch_queued(pw_sim__backend_t* b, const pw_backend_launch_t* l,
                                        uint64_t ready) {
  pw_sim__part_t* part = NULL;
  PW_RETURN_IF_ERROR(pw_sim__part_new(b, l, &part));
  pw_backend_executable_t e = l->executable;
  pw_sim__device_t* d = &b->devices[l->device];
  uint64_t f;
  pw_sim__device_lock(d);
  bool failed = pw_sim_decide(d, ready, e->cost_ns, &part->start, &part->time, &f);
  pw_sim__device_unlock(d);
  part->begin = part->start;
  if (failed) {
    part->kind = PW_SIM_EVENT_FAILED;
    part->status = pw_sim__unavailable(b, l->device, f, e->program.name, l->gang_id, l->device);
  } else {
    if (e->program.kind == PW_SIM__COPY) pw_sim_copy_effect(l);
    pw_sim_mark_outputs(l, part->time);
  }
  pw_sim__queue_push(b, part);
  return NULL;
}

/*---------------------------------------------------------------------------
 * Entry point
 *-------------------------------------------------------------------------*/

pw_status_t pw_sim__launch_checked(pw_sim__backend_t* b, const pw_backend_launch_t* l) {
  uint64_t ready = pw_sim__launch_time(b) + b->dispatch_latency_ns;
  if (b->ordered) return pw_sim__stream_launch(b, l, ready);
  for (uint32_t i = 0; i < l->input_count; ++i) {
    uint64_t r = atomic_load_explicit(&l->inputs[i]->ready_at, memory_order_relaxed);
    if (r > ready) ready = r;
  }
  if (pw_sim__is_collective(l->executable->program.kind)) {
    return pw_sim__launch_collective(b, l, ready);
  }
  if (b->mode == PW_SIM_MODE_INLINE) return pw_sim_launch_inline(b, l, ready);
  return pw_sim_launch_queued(b, l, ready);
}

void pw_sim__launch_refused(pw_sim__backend_t* b, const pw_backend_launch_t* l) {
  if (b->ordered) {
    pw_sim__stream_refused(b, l);
  } else {
    pw_sim__collective_refused(b, l);
  }
}

pw_status_t pw_sim__launch(void* self, const pw_backend_launch_t* l) {
  pw_sim__backend_t* b = self;
  pw_status_t refused = pw_sim__check_launch(b, l);
  if (refused != NULL) {
    pw_sim__launch_refused(b, l);
    return refused;
  }
  return pw_sim__launch_checked(b, l);
}
