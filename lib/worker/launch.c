#define _POSIX_C_SOURCE 200809L
/* LAUNCH: one lane of a gang op on the local backend, answered by one
 * DONE (docs/remote.md). Through launch_host when the backend has it,
 * else one launch per device of the lane, completed with the first
 * failure. A queued launch (queue_seq != 0) is numbered in each device's
 * queue by the worker itself, 1, 2, ... per launch handed to the backend
 * (counting on across sessions: the backend outlives them), in the
 * controller's order: a LAUNCH the worker answers itself (an unknown id)
 * then leaves no gap that would make the backend refuse the next one. */
#include <stdio.h>
#include <string.h>

#include "plugin/backend_call.h"
#include "worker/worker_internal.h"

struct pw_worker_launch_t {
  pw_worker_t* w;
  pw_worker_launch_t* prev;  /* on w->launches while listed */
  pw_worker_launch_t* next;
  bool listed;
  pw_time_t started;
  uint64_t gang, queue_seq;
  uint64_t id;
  uint64_t session_gen;     /* the session it belongs to */
  size_t bytes;             /* this block's size */
  pthread_mutex_t lock;
  uint32_t pending;         /* parts not completed (+1 while launching) */
  pw_status_t failure;      /* the first one */
  bool timed;               /* every part came with timing */
  uint64_t start_ns, end_ns, busy_ns;
  pw_worker_exe_t* exe;
  uint32_t devices, group, inputs, outputs;
  uint32_t mem_count;       /* (inputs + outputs) * devices */
  pw_worker_mem_t** mems;   /* list order: inputs[k][i], then outputs */
  pw_backend_memory_t* handles;           /* the same order */
  const pw_backend_memory_t** in_rows;    /* host launch: inputs[k] */
  const pw_backend_memory_t** out_rows;
  pw_backend_memory_t* per_device;        /* [i][inputs then outputs] */
  uint32_t* group_devices;
  uint32_t mesh_start;
};

static void pw_worker_launch_list(pw_worker_launch_t* l) {
  pw_worker_t* w = l->w;
  pthread_mutex_lock(&w->lock);
  l->prev = NULL;
  l->next = w->launches;
  if (w->launches != NULL) w->launches->prev = l;
  w->launches = l;
  l->listed = true;
  pthread_mutex_unlock(&w->lock);
}

static void pw_worker_launch_unlist(pw_worker_launch_t* l) {
  pw_worker_t* w = l->w;
  pthread_mutex_lock(&w->lock);
  if (l->listed) {
    if (l->prev != NULL) l->prev->next = l->next;
    if (l->next != NULL) l->next->prev = l->prev;
    if (w->launches == l) w->launches = l->next;
    l->listed = false;
  }
  pthread_mutex_unlock(&w->lock);
}

const pw_worker_launch_t* pw__worker_launch_next(const pw_worker_launch_t* l) {
  return l->next;
}

void pw__worker_launch_describe(const pw_worker_launch_t* l, pw_time_t now, char* buffer,
                                size_t capacity) {
  char devices[96];
  size_t n = 0;
  devices[0] = '\0';
  for (uint32_t i = 0; i < l->devices && n + 12 < sizeof(devices); ++i) {
    n += (size_t)snprintf(devices + n, sizeof(devices) - n, "%s%u", i ? "," : "",
                          l->group_devices[l->mesh_start + i]);
  }
  if (n + 12 >= sizeof(devices)) snprintf(devices + n, sizeof(devices) - n, ",...");
  pthread_mutex_lock((pthread_mutex_t*)&l->lock); /* after w->lock: the only such order */
  uint32_t pending = l->pending;
  bool failed = l->failure != NULL;
  pthread_mutex_unlock((pthread_mutex_t*)&l->lock);
  snprintf(buffer, capacity,
           "launch %llu: executable %llu on devices %s (mesh %u of a gang of %u, gang %llu, "
           "queue %llu): %u part%s running for %.1f ms%s",
           (unsigned long long)l->id, (unsigned long long)(l->exe ? l->exe->id : 0), devices,
           l->mesh_start, l->group, (unsigned long long)l->gang,
           (unsigned long long)l->queue_seq, pending, pending == 1 ? "" : "s",
           (double)(now - l->started) / 1e6, failed ? " (one failed)" : "");
}

static void pw_worker_launch_finish(pw_worker_launch_t* l) {
  pw_worker_t* w = l->w;
  pw_worker_launch_unlist(l);
  pw_wire_msg_t msg = {.type = PW_WIRE_DONE};
  msg.u[PW_WIRE_DONE_ID] = l->id;
  msg.u[PW_WIRE_DONE_CODE] = (uint64_t)pw_status_code(l->failure);
  if (l->timed) {
    msg.u[PW_WIRE_DONE_START_NS] = l->start_ns;
    msg.u[PW_WIRE_DONE_END_NS] = l->end_ns;
    msg.u[PW_WIRE_DONE_BUSY_NS] = l->busy_ns;
  }
  const char* text = l->failure != NULL ? pw_status_message(l->failure) : "";
  size_t n = strlen(text);
  msg.blob[PW_WIRE_DONE_B_MESSAGE] = (pw_wire_blob_t){text, n > 4000 ? 4000 : n};
  /* A launch that outlived its session (pw_worker_cleanup's bounded wait)
   * answers nobody: the ids of a new session are another controller's. */
  if (l->session_gen == pw_atomic_load_u64_acquire(&w->session_gen)) {
    pthread_mutex_lock(&w->lock);
    uint64_t others = w->inflight > 0 ? w->inflight - 1 : 0; /* |l| counts until below */
    pthread_mutex_unlock(&w->lock);
    pw__worker_send_held(w, &msg, others);
  }
  pw_status_free(l->failure);
  for (uint32_t i = 0; i < l->mem_count; ++i) pw__worker_mem_unpin(w, l->mems[i]);
  pw__worker_exe_unpin(w, l->exe);
  pthread_mutex_destroy(&l->lock);
  pw_allocator_free(w->allocator, l, l->bytes);
  pw__worker_inflight_done(w); /* last: the worker may go once it is 0 */
}

/* One part ended (|completed|: by the backend's done; else refused, or
 * the launching guard): the last one sends DONE. A completion without
 * timing leaves the DONE untimed (0, 0, 0: unknown). */
static void pw_worker_launch_part(pw_worker_launch_t* l, pw_status_t status,
                                  const pw_backend_timing_t* timing, bool completed) {
  pthread_mutex_lock(&l->lock);
  if (status != NULL) {
    if (l->failure == NULL) {
      l->failure = status;
    } else {
      pw_status_free(status);
    }
  }
  if (timing != NULL && timing->struct_size >= PW_BACKEND_TIMING_SIZE_V1 &&
      timing->end_ns >= timing->start_ns) {
    if (l->start_ns == 0 || timing->start_ns < l->start_ns) l->start_ns = timing->start_ns;
    if (timing->end_ns > l->end_ns) l->end_ns = timing->end_ns;
    bool busy = timing->struct_size >= PW_BACKEND_TIMING_SIZE_V2 && timing->busy_ns > 0;
    l->busy_ns += busy ? timing->busy_ns : timing->end_ns - timing->start_ns;
  } else if (completed) {
    l->timed = false;
  }
  bool last = --l->pending == 0;
  pthread_mutex_unlock(&l->lock);
  if (last) pw_worker_launch_finish(l);
}

static void pw_worker_launch_done(void* user, pw_status_t status) {
  pw_worker_launch_part(user, status, NULL, true);
}

static void pw_worker_launch_done_timed(void* user, pw_status_t status,
                                        const pw_backend_timing_t* timing) {
  if (timing == NULL) {
    pw_worker_launch_done(user, status);
    return;
  }
  pw_worker_launch_part(user, status, timing, true);
}

/* Checks the shape of the message; INVALID_ARGUMENT naming what is off. */
static pw_status_t pw_worker_launch_shape(const pw_worker_t* w, const pw_wire_msg_t* msg) {
  uint64_t start = msg->u[PW_WIRE_LAUNCH_MESH_START], devices = msg->u[PW_WIRE_LAUNCH_DEVICES];
  uint64_t group = msg->u[PW_WIRE_LAUNCH_GROUP];
  uint64_t inputs = msg->u[PW_WIRE_LAUNCH_INPUTS], outputs = msg->u[PW_WIRE_LAUNCH_OUTPUTS];
  if (group == 0 || group > PW_WIRE_MAX_LIST || devices == 0 || devices > group ||
      start > group - devices) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "LAUNCH %llu: lane of %llu devices at mesh position %llu of a gang "
                          "of %llu",
                          (unsigned long long)msg->u[PW_WIRE_LAUNCH_ID],
                          (unsigned long long)devices, (unsigned long long)start,
                          (unsigned long long)group);
  }
  if (inputs > PW_EXECUTABLE_MAX_PARAMS || outputs > PW_EXECUTABLE_MAX_PARAMS ||
      msg->list_count != group + (inputs + outputs) * devices) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "LAUNCH %llu: list of %u ids for a gang of %llu and %llu inputs, "
                          "%llu outputs on %llu devices (at most %u each)",
                          (unsigned long long)msg->u[PW_WIRE_LAUNCH_ID], msg->list_count,
                          (unsigned long long)group, (unsigned long long)inputs,
                          (unsigned long long)outputs, (unsigned long long)devices,
                          PW_EXECUTABLE_MAX_PARAMS);
  }
  for (uint32_t i = 0; i < group; ++i) {
    if (msg->list[i] >= w->device_count) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "LAUNCH %llu: gang device %u is ordinal %llu; the worker has %u",
                            (unsigned long long)msg->u[PW_WIRE_LAUNCH_ID], i,
                            (unsigned long long)msg->list[i], w->device_count);
    }
  }
  return NULL;
}

static pw_status_t pw_worker_launch_make(pw_worker_t* w, const pw_wire_msg_t* msg,
                                         pw_worker_launch_t** out) {
  *out = NULL;
  uint32_t devices = (uint32_t)msg->u[PW_WIRE_LAUNCH_DEVICES];
  uint32_t group = (uint32_t)msg->u[PW_WIRE_LAUNCH_GROUP];
  uint32_t inputs = (uint32_t)msg->u[PW_WIRE_LAUNCH_INPUTS];
  uint32_t outputs = (uint32_t)msg->u[PW_WIRE_LAUNCH_OUTPUTS];
  size_t n = (size_t)(inputs + outputs) * devices;
  size_t head = (sizeof(pw_worker_launch_t) + 15) & ~(size_t)15;
  size_t bytes = head + n * (2 * sizeof(void*) + sizeof(pw_backend_memory_t)) +
                 (inputs + outputs) * sizeof(void*) + group * sizeof(uint32_t);
  pw_worker_launch_t* l = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(w->allocator, bytes, 0, (void**)&l));
  char* p = (char*)l + head;
  l->mems = (pw_worker_mem_t**)p;
  p += n * sizeof(void*);
  l->handles = (pw_backend_memory_t*)p;
  p += n * sizeof(void*);
  l->per_device = (pw_backend_memory_t*)p;
  p += n * sizeof(void*);
  l->in_rows = (const pw_backend_memory_t**)p;
  l->out_rows = l->in_rows + inputs;
  p += (inputs + outputs) * sizeof(void*);
  l->group_devices = (uint32_t*)p;
  l->w = w;
  l->id = msg->u[PW_WIRE_LAUNCH_ID];
  l->session_gen = pw_atomic_load_u64_acquire(&w->session_gen);
  l->bytes = bytes;
  l->timed = true;
  l->devices = devices;
  l->group = group;
  l->inputs = inputs;
  l->outputs = outputs;
  l->mesh_start = (uint32_t)msg->u[PW_WIRE_LAUNCH_MESH_START];
  l->gang = msg->u[PW_WIRE_LAUNCH_GANG];
  l->queue_seq = msg->u[PW_WIRE_LAUNCH_QUEUE_SEQ];
  l->started = pw_clock_now();
  pthread_mutex_init(&l->lock, NULL);
  for (uint32_t i = 0; i < group; ++i) l->group_devices[i] = (uint32_t)msg->list[i];
  *out = l;
  return NULL;
}

/* Pins the executable and every memory, checking each is on its device. */
static pw_status_t pw_worker_launch_pin(pw_worker_t* w, const pw_wire_msg_t* msg,
                                        pw_worker_launch_t* l) {
  PW_RETURN_IF_ERROR(pw__worker_exe_pin(w, msg->u[PW_WIRE_LAUNCH_EXE], &l->exe));
  uint32_t start = (uint32_t)msg->u[PW_WIRE_LAUNCH_MESH_START];
  uint32_t params = l->inputs + l->outputs;
  for (uint32_t k = 0; k < params; ++k) {
    for (uint32_t i = 0; i < l->devices; ++i) {
      uint32_t at = k * l->devices + i;
      PW_RETURN_IF_ERROR(pw__worker_mem_pin(w, msg->list[l->group + at], &l->mems[at]));
      l->mem_count = at + 1;
      uint32_t device = l->group_devices[start + i];
      if (l->mems[at]->device != device) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "LAUNCH %llu: memory %llu is on device %u, the lane's device %u "
                              "is %u",
                              (unsigned long long)l->id, (unsigned long long)l->mems[at]->id,
                              l->mems[at]->device, i, device);
      }
      l->handles[at] = l->mems[at]->memory;
      l->per_device[i * params + k] = l->mems[at]->memory;
    }
    if (k < l->inputs) {
      l->in_rows[k] = &l->handles[k * l->devices];
    } else {
      l->out_rows[k - l->inputs] = &l->handles[k * l->devices];
    }
  }
  return NULL;
}

static void pw_worker_launch_run(pw_worker_t* w, const pw_wire_msg_t* msg,
                                 pw_worker_launch_t* l) {
  uint32_t start = (uint32_t)msg->u[PW_WIRE_LAUNCH_MESH_START];
  uint64_t gang = msg->u[PW_WIRE_LAUNCH_GANG], seq = msg->u[PW_WIRE_LAUNCH_QUEUE_SEQ];
  bool accepted = false;
  if (PW__BACKEND_HAS(&w->backend, launch_host)) {
    pw_backend_device_info_t info = {.struct_size = sizeof(info)};
    pw_status_ignore(pw__backend_device_info(&w->backend, l->group_devices[start], &info));
    pw_backend_host_launch_t h = {
        .struct_size = sizeof(h), .executable = l->exe->executable, .host = info.host,
        .mesh_start = start, .device_count = l->devices, .group_devices = l->group_devices,
        .group_size = l->group, .gang_id = gang, .inputs = l->in_rows,
        .input_count = l->inputs, .outputs = l->out_rows, .output_count = l->outputs,
        .queue_seq = seq, .node_arg = msg->u[PW_WIRE_LAUNCH_NODE_ARG],
        .done = pw_worker_launch_done,
        .done_timed = pw_worker_launch_done_timed, .done_user = l};
    if (seq != 0) {
      /* One number for the lane: its devices' queues have taken the same
       * launches whenever lanes keep their shape (the runtime's do). */
      h.queue_seq = w->queue_seq[l->group_devices[start]] + 1;
      for (uint32_t i = 0; i < l->devices; ++i) w->queue_seq[l->group_devices[start + i]] = h.queue_seq;
    }
    l->pending = 1;
    pw_status_t s = w->backend.vtable->launch_host(w->backend.self, &h);
    accepted = s == NULL;
    if (s != NULL) pw_worker_launch_part(l, s, NULL, false);
  } else {
    uint32_t params = l->inputs + l->outputs;
    l->pending = l->devices + 1;
    for (uint32_t i = 0; i < l->devices; ++i) {
      pw_backend_launch_t one = {
          .struct_size = sizeof(one), .executable = l->exe->executable,
          .device = l->group_devices[start + i], .mesh_index = start + i,
          .group_devices = l->group_devices, .group_size = l->group, .gang_id = gang,
          .inputs = &l->per_device[i * params], .input_count = l->inputs,
          .outputs = &l->per_device[i * params + l->inputs], .output_count = l->outputs,
          .done = pw_worker_launch_done, .done_user = l,
          .queue_seq = seq != 0 ? ++w->queue_seq[l->group_devices[start + i]] : 0,
          .done_timed = pw_worker_launch_done_timed,
          .node_arg = msg->u[PW_WIRE_LAUNCH_NODE_ARG]};
      pw_status_t s = pw__backend_launch(&w->backend, &one);
      if (s == NULL) {
        accepted = true;
      } else {
        pw_worker_launch_part(l, pw_status_annotate(s, "device %u", one.device), NULL, false);
      }
    }
    if (accepted) pw_atomic_fetch_add_u64(&w->n_launches, 1);
    pw_worker_launch_part(l, NULL, NULL, false);
    return;
  }
  if (accepted) pw_atomic_fetch_add_u64(&w->n_launches, 1);
}

void pw__worker_on_launch(pw_worker_t* w, const pw_wire_msg_t* msg) {
  uint64_t id = msg->u[PW_WIRE_LAUNCH_ID];
  if (id == 0) {
    pw__worker_drop(w, "LAUNCH", pw_status_make(PW_STATUS_INVALID_ARGUMENT, "launch id 0"));
    return;
  }
  pw_status_t s = pw_worker_launch_shape(w, msg);
  if (s != NULL) {
    pw__worker_count_refused(w);
    pw__worker_done(w, id, s);
    return;
  }
  pw_worker_launch_t* l = NULL;
  s = pw_worker_launch_make(w, msg, &l);
  if (s == NULL) s = pw_worker_launch_pin(w, msg, l);
  pw__worker_inflight_add(w);
  if (s != NULL) {
    if (l == NULL) {
      pw__worker_done(w, id, s);
      pw__worker_inflight_done(w);
      return;
    }
    l->pending = 1;
    l->timed = false;
    pw_worker_launch_part(l, s, NULL, false);
    return;
  }
  pw_worker_launch_list(l);
  pw_worker_launch_run(w, msg, l);
}
