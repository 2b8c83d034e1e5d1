/* The sim backend's host launch (vtable v4 launch_host; backend.h, "Host
 * launch"): one call for a lane, a run of one host's devices of a gang op
 * consecutive in mesh order. This file owns the lane's validation (all of
 * it before any device runs anything), the lane records, and folding the
 * devices' completions into the lane's one done.
 *
 * After validation each device's part goes through launch.c's per-device
 * path (a pw_backend_launch_t v2 built on the stack, its done_timed the
 * lane record's), so timing, collectives, failures, ordered queues, the
 * dispatch latency and the trace hash are exactly those of per-device
 * launches. A record counts one per device plus one that the launcher
 * holds while it launches, so the lane's done comes once, after every
 * part, whichever thread completes the last one.
 *
 * Validation covers the descriptor and every device's part; an ordered
 * device's queue state (queue_seq order, room under the depth) is checked
 * by its part's launch, as for a single launch: the runtime never breaks
 * either, so the lane is not locked queue by queue before it runs. A part
 * can therefore still be refused after validation passed: a queue_seq
 * out of order or a full queue (a broken caller), no memory for its part
 * record, its queue slot or its collective's group. The lane is then
 * refused as a whole: the parts accepted run
 * and their completions are absorbed (a collective's end ABORTED, as the
 * gang rule requires), the parts not launched count as refused for their
 * gang, and launch_host returns the error; the runtime's done never comes.
 *
 * Hot path (INLINE, not ordered, not a collective: every part completes
 * inside its launch): the record lives on the stack. Every other lane
 * takes one from a free list, allocated only when the list is empty. */
#include <stdio.h>
#include <string.h>

#include "backends/sim/sim_internal.h"

struct pw_sim__lane_t {
  pw_sim__lane_t* next;        /* the free list */
  pw_sim__backend_t* backend;
  atomic_uint remaining;       /* parts not completed, + 1 while launching */
  atomic_uint lock;            /* guards failure, timed, start, end */
  bool pooled;                 /* from the free list (else on the stack) */
  bool refused;                /* launch_host returned an error: absorb */
  bool timed;
  uint64_t start;
  uint64_t end;
  uint64_t busy; /* the parts' device times, summed (timing v2 busy_ns) */
  pw_status_t failure;         /* the first failure (owned) */
  pw_backend_done_fn_t done;
  pw_backend_done_timed_fn_t done_timed;
  void* done_user;
};

/* One device's part, as launch.c takes it. */
typedef struct pw_sim_part_desc_t {
  pw_backend_launch_t launch;
  pw_backend_memory_t inputs[PW_SIM__MAX_PARAMS];
  pw_backend_memory_t outputs[PW_SIM__MAX_PARAMS];
} pw_sim_part_desc_t;

static void pw_sim_spin_lock(atomic_uint* lock) {
  for (;;) {
    if (atomic_exchange_explicit(lock, 1u, memory_order_acquire) == 0u) return;
    while (atomic_load_explicit(lock, memory_order_relaxed) != 0u) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }
}

static void pw_sim_spin_unlock(atomic_uint* lock) {
  atomic_store_explicit(lock, 0u, memory_order_release);
}

/*---------------------------------------------------------------------------
 * Lane records
 *-------------------------------------------------------------------------*/

static pw_status_t pw_sim_lane_take(pw_sim__backend_t* b, pw_sim__lane_t** out) {
  *out = NULL;
  pw_sim_spin_lock(&b->lanes_lock);
  pw_sim__lane_t* lane = b->lanes_free;
  if (lane != NULL) b->lanes_free = lane->next;
  pw_sim_spin_unlock(&b->lanes_lock);
  if (lane == NULL) {
    void* memory = NULL;
    PW_RETURN_IF_ERROR(pw_allocator_calloc(b->allocator, sizeof(pw_sim__lane_t),
                                           alignof(pw_sim__lane_t), &memory));
    lane = memory;
    pw_sim_spin_lock(&b->lanes_lock);
    b->lanes_allocated++;
    pw_sim_spin_unlock(&b->lanes_lock);
  }
  lane->pooled = true;
  *out = lane;
  return NULL;
}

static void pw_sim_lane_put(pw_sim__backend_t* b, pw_sim__lane_t* lane) {
  if (!lane->pooled) return;
  pw_sim_spin_lock(&b->lanes_lock);
  lane->next = b->lanes_free;
  b->lanes_free = lane;
  pw_sim_spin_unlock(&b->lanes_lock);
}

void pw_sim__lanes_free(pw_sim__backend_t* b) {
  uint64_t freed = 0;
  while (b->lanes_free != NULL) {
    pw_sim__lane_t* lane = b->lanes_free;
    b->lanes_free = lane->next;
    pw_allocator_free(b->allocator, lane, sizeof(*lane));
    ++freed;
  }
  if (freed != b->lanes_allocated) {
    pw_log(&b->logger, PW_LOG_WARN, PW_SIM_LOG,
           "destroyed with %llu host launches still in flight (their records are leaked)",
           (unsigned long long)(b->lanes_allocated - freed));
  }
}

static void pw_sim_lane_init(pw_sim__lane_t* lane, pw_sim__backend_t* b,
                             const pw_backend_host_launch_t* h) {
  lane->next = NULL;
  lane->backend = b;
  atomic_init(&lane->remaining, h->device_count + 1u);
  atomic_init(&lane->lock, 0u);
  lane->refused = false;
  lane->timed = false;
  lane->start = UINT64_MAX;
  lane->end = 0;
  lane->busy = 0;
  lane->failure = NULL;
  lane->done = h->done;
  lane->done_timed = h->done_timed;
  lane->done_user = h->done_user;
}

/* Drops |n| counts; the last one completes the lane: the runtime's done
 * (unless refused), with the first failure and the lane's span. */
static void pw_sim_lane_release(pw_sim__lane_t* lane, uint32_t n) {
  if (atomic_fetch_sub_explicit(&lane->remaining, n, memory_order_acq_rel) != n) return;
  pw_sim__backend_t* b = lane->backend;
  pw_status_t status = lane->failure;
  lane->failure = NULL;
  bool refused = lane->refused, timed = lane->timed;
  uint64_t start = lane->start, end = lane->end, busy = lane->busy;
  pw_backend_done_fn_t done = lane->done;
  pw_backend_done_timed_fn_t done_timed = lane->done_timed;
  void* user = lane->done_user;
  pw_sim_lane_put(b, lane);
  if (refused) {
    pw_status_free(status);
    return;
  }
  pw_sim__call_done_busy(b, done, done_timed, user, status, timed, start, end, busy);
}

/* Every part's done_timed: folds its status and timing into the lane. */
static void pw_sim_lane_part_done(void* user, pw_status_t status,
                                  const pw_backend_timing_t* timing) {
  pw_sim__lane_t* lane = user;
  pw_sim_spin_lock(&lane->lock);
  if (status != NULL && lane->failure == NULL) {
    lane->failure = status;
    status = NULL;
  }
  if (timing != NULL) {
    if (timing->start_ns < lane->start) lane->start = timing->start_ns;
    if (timing->end_ns > lane->end) lane->end = timing->end_ns;
    lane->busy += timing->end_ns - timing->start_ns;
    lane->timed = true;
  }
  pw_sim_spin_unlock(&lane->lock);
  pw_status_free(status);
  pw_sim_lane_release(lane, 1);
}

/*---------------------------------------------------------------------------
 * Parts and validation
 *-------------------------------------------------------------------------*/

/* The fields every device's launch of the lane shares. The shape of |h|
 * has been checked. */
static void pw_sim_lane_describe_init(const pw_backend_host_launch_t* h, pw_sim__lane_t* lane,
                                      pw_sim_part_desc_t* out) {
  pw_backend_launch_t* l = &out->launch;
  memset(l, 0, sizeof(*l));
  l->struct_size = sizeof(*l);
  l->executable = h->executable;
  l->group_devices = h->group_devices;
  l->group_size = h->group_size;
  l->gang_id = h->gang_id;
  l->inputs = out->inputs;
  l->input_count = h->input_count;
  l->outputs = out->outputs;
  l->output_count = h->output_count;
  l->done_user = lane;
  l->queue_seq = h->queue_seq;
  l->done_timed = pw_sim_lane_part_done;
}

/* |out| (set by pw_sim_lane_describe_init) becomes the launch of the
 * lane's |i|th device (mesh index mesh_start + i). */
static void pw_sim_lane_describe(const pw_backend_host_launch_t* h, uint32_t i,
                                 pw_sim_part_desc_t* out) {
  uint32_t m = h->mesh_start + i;
  out->launch.device = h->group_devices[m];
  out->launch.mesh_index = m;
  for (uint32_t k = 0; k < h->input_count; ++k) out->inputs[k] = h->inputs[k][i];
  for (uint32_t k = 0; k < h->output_count; ++k) out->outputs[k] = h->outputs[k][i];
}

static bool pw_sim_is_own_executable(pw_sim__backend_t* b, pw_backend_executable_t e) {
  return e != NULL && e->magic == PW_SIM__EXECUTABLE_MAGIC && e->backend == b;
}

/* The descriptor's own fields: everything but the devices. */
static pw_status_t pw_sim_check_lane_shape(pw_sim__backend_t* b,
                                           const pw_backend_host_launch_t* h) {
  if (h == NULL || h->struct_size < PW_BACKEND_HOST_LAUNCH_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim launch_host: descriptor is NULL or its struct_size is below v1 "
                          "(%zu)",
                          (size_t)PW_BACKEND_HOST_LAUNCH_SIZE_V1);
  }
  pw_backend_executable_t e = h->executable;
  if (!pw_sim_is_own_executable(b, e)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim launch_host on host %u: the executable is not one loaded by "
                          "this sim backend",
                          h->host);
  }
  const char* name = e->program.name;
  uint32_t hosts = b->device_count / b->per_host;
  const char* bad = NULL;
  if (h->host >= hosts) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim launch_host of '%s': host %u does not exist (the backend has %u)",
                          name, h->host, hosts);
  } else if (h->done == NULL && h->done_timed == NULL) {
    bad = "done and done_timed are both NULL";
  } else if (h->device_count == 0) {
    bad = "device_count is 0 (a lane has at least one device)";
  } else if (h->group_devices == NULL) {
    bad = "group_devices is NULL";
  } else if (h->input_count > 0 && h->inputs == NULL) {
    bad = "inputs is NULL";
  } else if (h->output_count > 0 && h->outputs == NULL) {
    bad = "outputs is NULL";
  }
  if (bad != NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "sim launch_host of '%s' on host %u: %s",
                          name, h->host, bad);
  }
  if (h->group_size != e->group_size || h->mesh_start >= h->group_size ||
      h->device_count > h->group_size - h->mesh_start) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim launch_host of '%s' on host %u: mesh_start %u + device_count %u "
                          "does not fit group_size %u (the executable's mesh has %u devices)",
                          name, h->host, h->mesh_start, h->device_count, h->group_size,
                          e->group_size);
  }
  if (h->input_count != e->program.input_count || h->output_count != e->program.output_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim launch_host of '%s': %u inputs and %u outputs given, the "
                          "executable takes %u and %u",
                          name, h->input_count, h->output_count, e->program.input_count,
                          e->program.output_count);
  }
  for (uint32_t pass = 0; pass < 2; ++pass) {
    uint32_t count = pass == 0 ? h->input_count : h->output_count;
    const pw_backend_memory_t* const* shards = pass == 0 ? h->inputs : h->outputs;
    for (uint32_t k = 0; k < count; ++k) {
      if (shards[k] == NULL) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "sim launch_host of '%s' on host %u: %s[%u] (the lane's shards "
                              "of %s %u) is NULL",
                              name, h->host, pass == 0 ? "inputs" : "outputs", k,
                              pass == 0 ? "input" : "output", k);
      }
    }
  }
  return NULL;
}

/* The whole lane, before any of it runs. */
static pw_status_t pw_sim_check_lane(pw_sim__backend_t* b, const pw_backend_host_launch_t* h) {
  PW_RETURN_IF_ERROR(pw_sim_check_lane_shape(b, h));
  const char* name = h->executable->program.name;
  pw_sim__lane_t placeholder;
  pw_sim_part_desc_t d;
  pw_sim_lane_describe_init(h, &placeholder, &d);
  for (uint32_t i = 0; i < h->device_count; ++i) {
    uint32_t m = h->mesh_start + i;
    uint32_t device = h->group_devices[m];
    if (device >= b->device_count) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "sim launch_host of '%s' on host %u: mesh index %u is device %u, "
                            "which does not exist (the backend has %u)",
                            name, h->host, m, device, b->device_count);
    }
    if (device / b->per_host != h->host) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "sim launch_host of '%s' on host %u: mesh index %u is device %u, "
                            "which is on host %u (a lane is one host's devices)",
                            name, h->host, m, device, device / b->per_host);
    }
    pw_sim_lane_describe(h, i, &d);
    PW_RETURN_IF_ERROR_CTX(pw_sim__check_launch(b, &d.launch),
                           "sim launch_host on host %u: mesh index %u (device %u)", h->host, m,
                           device);
  }
  return NULL;
}

/* The lane's devices from lane position |from| on count as refused for
 * their gang (a collective's other parts end ABORTED, as a refused
 * launch's). A descriptor too broken to name its devices fails the gang
 * once, as a launch with a broken group does. */
static void pw_sim_lane_refuse_gang(pw_sim__backend_t* b, const pw_backend_host_launch_t* h,
                                    uint32_t from) {
  if (h == NULL || h->struct_size < PW_BACKEND_HOST_LAUNCH_SIZE_V1 ||
      !pw_sim_is_own_executable(b, h->executable) ||
      !pw_sim__is_collective(h->executable->program.kind)) {
    return;
  }
  pw_backend_launch_t l;
  memset(&l, 0, sizeof(l));
  l.struct_size = sizeof(l);
  l.executable = h->executable;
  l.group_devices = h->group_devices;
  l.group_size = h->group_size;
  l.gang_id = h->gang_id;
  l.queue_seq = h->queue_seq;
  bool named = h->group_devices != NULL && h->group_size == h->executable->group_size &&
               h->device_count > 0 && h->mesh_start < h->group_size;
  if (!named) {
    l.device = PW_SIM__NO_DEVICE;
    l.mesh_index = h->mesh_start;
    l.group_devices = NULL;
    pw_sim__launch_refused(b, &l);
    return;
  }
  uint32_t count = h->group_size - h->mesh_start;
  if (h->device_count < count) count = h->device_count;
  for (uint32_t i = from; i < count; ++i) {
    l.mesh_index = h->mesh_start + i;
    l.device = h->group_devices[l.mesh_index];
    pw_sim__launch_refused(b, &l);
  }
}

/*---------------------------------------------------------------------------
 * Entry point
 *-------------------------------------------------------------------------*/

pw_status_t pw_sim__launch_host(void* self, const pw_backend_host_launch_t* h) {
  pw_sim__backend_t* b = self;
  pw_status_t status = pw_sim_check_lane(b, h);
  if (status != NULL) {
    pw_sim_lane_refuse_gang(b, h, 0);
    return status;
  }
  pw_backend_executable_t e = h->executable;
  pw_sim__lane_t stack_lane;
  pw_sim__lane_t* lane = &stack_lane;
  stack_lane.pooled = false;
  if (b->mode != PW_SIM_MODE_INLINE || b->ordered || pw_sim__is_collective(e->program.kind)) {
    status = pw_sim_lane_take(b, &lane);
    if (status != NULL) {
      pw_sim_lane_refuse_gang(b, h, 0);
      return pw_status_annotate(status, "sim launch_host of '%s' on host %u: a lane record",
                                e->program.name, h->host);
    }
  }
  pw_sim_lane_init(lane, b, h);
  pw_sim_part_desc_t d;
  pw_sim_lane_describe_init(h, lane, &d);
  uint32_t launched = 0;
  for (; launched < h->device_count; ++launched) {
    pw_sim_lane_describe(h, launched, &d);
    status = pw_sim__launch_checked(b, &d.launch);
    if (status != NULL) break;
  }
  if (status == NULL) {
    atomic_fetch_add_explicit(&b->host_launches, 1, memory_order_relaxed);
    pw_sim_lane_release(lane, 1);
    return NULL;
  }
  /* Refused after |launched| parts were accepted: absorb their
   * completions, fail the gang for the rest, drop the hold. */
  uint32_t m = h->mesh_start + launched;
  status = pw_status_annotate(status,
                              "sim launch_host of '%s' (gang %llu) on host %u: mesh index %u "
                              "(device %u) refused after %u of the lane's %u devices were "
                              "accepted; the lane is refused",
                              e->program.name, (unsigned long long)h->gang_id, h->host, m,
                              h->group_devices[m], launched, h->device_count);
  lane->refused = true;
  pw_sim_lane_refuse_gang(b, h, launched + 1);
  pw_sim_lane_release(lane, h->device_count - launched + 1);
  return status;
}
