/* The proxy backend: pathways/backend.h over one worker's session.
 *
 * Memory and executables get controller-assigned ids and small handles
 * holding (id, session epoch); ALLOC, FREE and UNLOAD need no round trip,
 * COMPILE, LOAD and host copies are requests, launches are LAUNCH
 * messages answered by DONE. A handle of an earlier session is refused
 * with UNAVAILABLE (its memory died with that session). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <string.h>

#include "pathways/struct_size.h"
#include "remote/remote_internal.h"
#include "wire/wire_nng.h"

typedef struct pw_remote_exe_s {
  uint64_t id;
  uint64_t epoch;
  /* The signature's specs (inputs then outputs: the v2 pointers), until
   * unload; |spec_count| of them. */
  pw_backend_param_t* specs;
  size_t spec_count;
} pw_remote_exe_t;

static pw_remote_worker_t* pw_proxy(void* self) { return self; }

static void pw_proxy_destroy(void* self) {
  (void)self; /* the worker record belongs to the remote */
}

pw_remote_worker_t* pw__remote_proxy_worker(const pw_backend_t* backend) {
  if (backend == NULL || backend->vtable == NULL || backend->vtable->destroy != pw_proxy_destroy) {
    return NULL;
  }
  return backend->self;
}

bool pw_remote_backend_is_remote(pw_backend_t backend) {
  return pw__remote_proxy_worker(&backend) != NULL;
}

static uint32_t pw_proxy_device_count(void* self) { return pw_proxy(self)->device_count; }

static pw_status_t pw_proxy_device_info(void* self, uint32_t device,
                                        pw_backend_device_info_t* out_info) {
  pw_remote_worker_t* w = pw_proxy(self);
  if (device >= w->device_count) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE, "%s: no device %u (%u devices)", w->label,
                          device, w->device_count);
  }
  size_t size = out_info->struct_size;
  out_info->host = w->index + 1;
  out_info->memory_bytes = w->memory_bytes[device];
  if (size >= PW_BACKEND_DEVICE_INFO_SIZE_V1) {
    memset(out_info->kind, 0, sizeof(out_info->kind));
    memcpy(out_info->kind, w->kind, sizeof(out_info->kind) - 1);
  }
  return NULL;
}

static pw_device_health_t pw_proxy_health(void* self, uint32_t device) {
  pw_remote_worker_t* w = pw_proxy(self);
  if (device >= w->device_count) return PW_DEVICE_FAILED;
  pthread_mutex_lock(&w->mu);
  pw_device_health_t h = w->state == PW_RWORKER_ATTACHED ? (pw_device_health_t)w->health[device]
                                                         : PW_DEVICE_FAILED;
  pthread_mutex_unlock(&w->mu);
  return h;
}

static pw_status_t pw_proxy_queue_info(void* self, uint32_t device,
                                       pw_backend_queue_info_t* out_info) {
  pw_remote_worker_t* w = pw_proxy(self);
  (void)device;
  out_info->flags = w->queue_flags & PW_BACKEND_QUEUE_ORDERED;
  out_info->depth = out_info->flags ? w->queue_depth : 0;
  return NULL;
}

static pw_status_t pw_proxy_compile(void* self, const void* program, size_t program_size,
                                    const pw_mesh_shape_t* mesh, const char* options,
                                    pw_allocator_t allocator, void** out_bytes,
                                    size_t* out_size) {
  pw_remote_worker_t* w = pw_proxy(self);
  *out_bytes = NULL;
  *out_size = 0;
  uint64_t dims[PW_MAX_MESH_RANK];
  uint32_t rank = mesh->rank <= PW_MAX_MESH_RANK ? mesh->rank : PW_MAX_MESH_RANK;
  for (uint32_t i = 0; i < rank; ++i) dims[i] = mesh->dims[i];
  pw_wire_msg_t req = {.type = PW_WIRE_COMPILE, .list = dims, .list_count = rank};
  /* The names travel so the worker's backend compiles for the mesh the
   * controller's would (names are labels: the executable does not change). */
  char axes[PW_MAX_MESH_RANK * PW_MESH_AXIS_NAME_MAX] = "";
  size_t axes_size = 0;
  for (uint32_t i = 0; i < rank && mesh->axis_names[0][0] != '\0'; ++i) {
    size_t n = strnlen(mesh->axis_names[i], PW_MESH_AXIS_NAME_MAX - 1);
    if (i > 0) axes[axes_size++] = ',';
    memcpy(axes + axes_size, mesh->axis_names[i], n);
    axes_size += n;
  }
  req.blob[PW_WIRE_COMPILE_B_AXES] = (pw_wire_blob_t){axes, axes_size};
  req.u[PW_WIRE_COMPILE_ID] = pw__remote_next_id(w->remote);
  req.blob[PW_WIRE_COMPILE_B_PROGRAM] = (pw_wire_blob_t){program, program_size};
  req.blob[PW_WIRE_COMPILE_B_OPTIONS] = (pw_wire_blob_t){options, options ? strlen(options) : 0};
  if (pw__wire_measure(&req) == 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: program of %zu bytes or options too large to send", w->label,
                          program_size);
  }
  nng_msg* raw = NULL;
  pw_wire_msg_t reply;
  PW_RETURN_IF_ERROR(pw__remote_call(w, 0, &req, &raw, &reply));
  const pw_wire_blob_t* bytes = &reply.blob[PW_WIRE_REPLY_B_PAYLOAD];
  pw_status_t status = NULL;
  if (bytes->size == 0) {
    status = pw_status_make(PW_STATUS_INTERNAL, "%s: compile returned no bytes", w->label);
  } else {
    status = pw_allocator_malloc(allocator, bytes->size, 0, out_bytes);
    if (status == NULL) {
      memcpy(*out_bytes, bytes->data, bytes->size);
      *out_size = bytes->size;
    }
  }
  pw__wire_nng_release(raw, &reply, w->remote->allocator);
  return status;
}

/* Reads the next list entry; false when the list is used up. */
static bool pw_sig_next(const pw_wire_msg_t* reply, uint32_t* pos, uint64_t* out) {
  if (*pos >= reply->list_count) return false;
  *out = reply->list[(*pos)++];
  return true;
}

/* Wire version 3: after the mesh axis, the tile count, each tile's tensor
 * and mesh axis, and the unreduced axes' mask (0, 0 for REPLICATED and
 * SPLIT). */
static bool pw_sig_tiles(const pw_wire_msg_t* reply, uint32_t* pos, pw_sharding_t* s) {
  uint64_t count = 0, t = 0, m = 0, unreduced = 0;
  if (!pw_sig_next(reply, pos, &count) || count > PW_MAX_MESH_RANK) return false;
  for (uint64_t i = 0; i < count; ++i) {
    if (!pw_sig_next(reply, pos, &t) || !pw_sig_next(reply, pos, &m) || t >= PW_MAX_RANK ||
        m >= PW_MAX_MESH_RANK) {
      return false;
    }
    s->tiles[i].tensor_axis = (uint8_t)t;
    s->tiles[i].mesh_axis = (uint8_t)m;
  }
  if (!pw_sig_next(reply, pos, &unreduced) || unreduced >= (1u << PW_MAX_MESH_RANK)) return false;
  s->tile_count = (uint32_t)count;
  s->unreduced_axes = (uint32_t)unreduced;
  return s->kind == PW_SHARDING_TILED || (count == 0 && unreduced == 0);
}

static bool pw_sig_param(const pw_wire_msg_t* reply, uint32_t* pos, pw_backend_param_t* p) {
  uint64_t dtype = 0, rank = 0, kind = 0, tensor_axis = 0, mesh_axis = 0;
  if (!pw_sig_next(reply, pos, &dtype) || !pw_sig_next(reply, pos, &rank)) return false;
  if (dtype == 0 || dtype >= PW_DTYPE_COUNT || rank > PW_MAX_RANK) return false;
  int64_t dims[PW_MAX_RANK];
  for (uint64_t i = 0; i < rank; ++i) {
    uint64_t d = 0;
    if (!pw_sig_next(reply, pos, &d) || d > INT64_MAX) return false;
    dims[i] = (int64_t)d;
  }
  if (!pw_sig_next(reply, pos, &kind) || !pw_sig_next(reply, pos, &tensor_axis) ||
      !pw_sig_next(reply, pos, &mesh_axis) || kind > PW_SHARDING_TILED ||
      tensor_axis > UINT32_MAX || mesh_axis > UINT32_MAX) {
    return false;
  }
  p->dtype = (pw_dtype_t)dtype;
  p->shape = pw_shape_make((uint32_t)rank, dims);
  memset(&p->sharding, 0, sizeof(p->sharding));
  p->sharding.kind = (pw_sharding_kind_t)kind;
  p->sharding.tensor_axis = (uint32_t)tensor_axis;
  p->sharding.mesh_axis = (uint32_t)mesh_axis;
  return pw_sig_tiles(reply, pos, &p->sharding);
}

/* The signature list of a LOAD reply (docs/remote.md): the specs go to
 * |exe|'s own array (any count up to PW_EXECUTABLE_MAX_PARAMS), the
 * signature's v2 pointers point there, the fixed arrays get the first
 * PW_BACKEND_MAX_PARAMS. */
static pw_status_t pw_sig_decode(pw_remote_worker_t* w, const pw_wire_msg_t* reply,
                                 pw_remote_exe_t* exe, pw_executable_signature_t* sig) {
  uint32_t pos = 0;
  uint64_t rank = 0, inputs = 0, outputs = 0;
  bool ok = pw_sig_next(reply, &pos, &rank) && rank >= 1 && rank <= PW_MAX_MESH_RANK;
  uint32_t dims[PW_MAX_MESH_RANK] = {0};
  for (uint64_t i = 0; ok && i < rank; ++i) {
    uint64_t d = 0;
    ok = pw_sig_next(reply, &pos, &d) && d >= 1 && d <= UINT32_MAX;
    dims[i] = (uint32_t)d;
  }
  ok = ok && pw_sig_next(reply, &pos, &inputs) && pw_sig_next(reply, &pos, &outputs) &&
       inputs <= PW_EXECUTABLE_MAX_PARAMS && outputs <= PW_EXECUTABLE_MAX_PARAMS &&
       /* each spec is at least 5 words: no allocation for a count the list cannot hold */
       (inputs + outputs) * 5 <= reply->list_count;
  if (ok && !PW_STRUCT_HAS_FIELD(sig, pw_executable_signature_t, output_specs) &&
      (inputs > PW_BACKEND_MAX_PARAMS || outputs > PW_BACKEND_MAX_PARAMS)) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE,
                          "%s: the executable has %llu inputs and %llu outputs; the caller's v1 "
                          "signature holds %d of each",
                          w->label, (unsigned long long)inputs, (unsigned long long)outputs,
                          PW_BACKEND_MAX_PARAMS);
  }
  if (ok && inputs + outputs > 0) {
    PW_RETURN_IF_ERROR_CTX(pw_allocator_calloc_array(w->remote->allocator, inputs + outputs,
                                                     sizeof(pw_backend_param_t), 0,
                                                     (void**)&exe->specs),
                           "%s: the LOAD reply's %llu specs", w->label,
                           (unsigned long long)(inputs + outputs));
    exe->spec_count = (size_t)(inputs + outputs);
  }
  if (ok) {
    sig->mesh = pw_mesh_shape_make((uint32_t)rank, dims);
    sig->input_count = (uint32_t)inputs;
    sig->output_count = (uint32_t)outputs;
  }
  for (uint64_t i = 0; ok && i < inputs + outputs; ++i) {
    ok = pw_sig_param(reply, &pos, &exe->specs[i]);
  }
  if (ok && exe->specs != NULL) {
    for (uint64_t i = 0; i < inputs && i < PW_BACKEND_MAX_PARAMS; ++i) sig->inputs[i] = exe->specs[i];
    for (uint64_t i = 0; i < outputs && i < PW_BACKEND_MAX_PARAMS; ++i) {
      sig->outputs[i] = exe->specs[inputs + i];
    }
    if (PW_STRUCT_HAS_FIELD(sig, pw_executable_signature_t, output_specs)) {
      sig->input_specs = exe->specs;
      sig->output_specs = exe->specs + inputs;
    }
  }
  if (!ok || pos != reply->list_count) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "%s: malformed signature in the LOAD reply",
                          w->label);
  }
  pw__wire_blob_text(&reply->blob[PW_WIRE_REPLY_B_PAYLOAD], sig->name, sizeof(sig->name));
  return NULL;
}

static pw_status_t pw_proxy_load(void* self, const void* bytes, size_t size,
                                 pw_backend_executable_t* out_executable,
                                 pw_executable_signature_t* out_signature) {
  pw_remote_worker_t* w = pw_proxy(self);
  *out_executable = NULL;
  uint64_t epoch = pw__remote_epoch(w);
  pw_remote_exe_t* exe = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(w->remote->allocator, sizeof(*exe), 0, (void**)&exe));
  exe->id = pw__remote_next_id(w->remote);
  exe->epoch = epoch;
  exe->specs = NULL;
  exe->spec_count = 0;
  pw_wire_msg_t req = {.type = PW_WIRE_LOAD};
  req.u[PW_WIRE_LOAD_ID] = pw__remote_next_id(w->remote);
  req.u[PW_WIRE_LOAD_EXE] = exe->id;
  req.blob[PW_WIRE_LOAD_B_BYTES] = (pw_wire_blob_t){bytes, size};
  nng_msg* raw = NULL;
  pw_wire_msg_t reply;
  pw_status_t status = pw__wire_measure(&req) == 0
                           ? pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                                            "%s: executable of %zu bytes too large", w->label, size)
                           : pw__remote_call(w, epoch, &req, &raw, &reply);
  if (status == NULL) {
    status = pw_sig_decode(w, &reply, exe, out_signature);
    pw__wire_nng_release(raw, &reply, w->remote->allocator);
  }
  if (status != NULL) {
    pw_allocator_free(w->remote->allocator, exe->specs, exe->spec_count * sizeof(*exe->specs));
    pw_allocator_free(w->remote->allocator, exe, sizeof(*exe));
    return status;
  }
  *out_executable = (pw_backend_executable_t)exe;
  return NULL;
}

static void pw_proxy_unload(void* self, pw_backend_executable_t executable) {
  pw_remote_worker_t* w = pw_proxy(self);
  pw_remote_exe_t* exe = (pw_remote_exe_t*)executable;
  if (exe == NULL) return;
  pw_wire_msg_t msg = {.type = PW_WIRE_UNLOAD};
  msg.u[PW_WIRE_UNLOAD_EXE] = exe->id;
  pw_status_free(pw__remote_send(w, exe->epoch, &msg, 0));
  pw_allocator_free(w->remote->allocator, exe->specs, exe->spec_count * sizeof(*exe->specs));
  pw_allocator_free(w->remote->allocator, exe, sizeof(*exe));
}

static pw_status_t pw_proxy_allocate(void* self, uint32_t device, size_t size,
                                     pw_backend_memory_t* out_memory) {
  pw_remote_worker_t* w = pw_proxy(self);
  *out_memory = NULL;
  if (device >= w->device_count) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE, "%s: no device %u", w->label, device);
  }
  pthread_mutex_lock(&w->mu);
  uint64_t cap = w->memory_bytes[device];
  bool fits = cap == 0 || (size <= cap && w->used_bytes[device] <= cap - size);
  uint64_t epoch = w->state == PW_RWORKER_ATTACHED ? w->epoch : 0;
  if (fits && epoch != 0) w->used_bytes[device] += size;
  uint64_t used = w->used_bytes[device];
  pthread_mutex_unlock(&w->mu);
  if (epoch == 0) {
    return pw_status_make(PW_STATUS_UNAVAILABLE, "%s is lost (not attached)", w->label);
  }
  if (!fits) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "%s device %u: %zu bytes do not fit (%" PRIu64 " of %" PRIu64 " used)",
                          w->label, device, size, used, cap);
  }
  pw_remote_mem_t* mem = NULL;
  pw_status_t status = pw_allocator_malloc(w->remote->allocator, sizeof(*mem), 0, (void**)&mem);
  if (status == NULL) {
    *mem = (pw_remote_mem_t){pw__remote_next_id(w->remote), epoch, device, size};
    pw_wire_msg_t msg = {.type = PW_WIRE_ALLOC};
    msg.u[PW_WIRE_ALLOC_MEM] = mem->id;
    msg.u[PW_WIRE_ALLOC_DEVICE] = device;
    msg.u[PW_WIRE_ALLOC_SIZE] = size;
    status = pw__remote_send(w, epoch, &msg, 0);
    if (status != NULL) pw_allocator_free(w->remote->allocator, mem, sizeof(*mem));
  }
  if (status != NULL) {
    pthread_mutex_lock(&w->mu);
    if (w->epoch == epoch) w->used_bytes[device] -= size;
    pthread_mutex_unlock(&w->mu);
    return status;
  }
  *out_memory = (pw_backend_memory_t)mem;
  return NULL;
}

static void pw_proxy_deallocate(void* self, uint32_t device, pw_backend_memory_t memory) {
  pw_remote_worker_t* w = pw_proxy(self);
  pw_remote_mem_t* mem = (pw_remote_mem_t*)memory;
  (void)device;
  if (mem == NULL) return;
  pthread_mutex_lock(&w->mu);
  bool current = mem->epoch == w->epoch && w->state == PW_RWORKER_ATTACHED;
  if (mem->epoch == w->epoch && mem->device < w->device_count) {
    w->used_bytes[mem->device] -= mem->size;
  }
  pthread_mutex_unlock(&w->mu);
  if (current) {
    pw_wire_msg_t msg = {.type = PW_WIRE_FREE};
    msg.u[PW_WIRE_FREE_MEM] = mem->id;
    pw_status_free(pw__remote_send(w, mem->epoch, &msg, 0));
  }
  pw_allocator_free(w->remote->allocator, mem, sizeof(*mem));
}

pw_status_t pw__remote_mem_check(pw_remote_worker_t* worker, const pw_remote_mem_t* mem,
                                 uint64_t epoch) {
  if (mem == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: NULL memory", worker->label);
  }
  if (mem->epoch != epoch) {
    return pw_status_make(PW_STATUS_UNAVAILABLE,
                          "%s: memory %" PRIu64 " belongs to an earlier session (lost with it)",
                          worker->label, mem->id);
  }
  return NULL;
}

/* One LAUNCH for a lane (|count| devices from |mesh_start|); inputs[k][i]. */
typedef struct pw_proxy_lane_s {
  const pw_remote_exe_t* exe;
  uint32_t mesh_start;
  uint32_t count;
  const uint32_t* group_devices;
  uint32_t group_size;
  uint64_t gang_id;
  uint64_t queue_seq;
  uint64_t node_arg;
  uint32_t input_count;
  uint32_t output_count;
  /* Shard of input k / output k on lane device i. */
  pw_backend_memory_t (*shard)(const void* launch, bool output, uint32_t k, uint32_t i);
  const void* launch;
  pw_backend_done_fn_t done;
  pw_backend_done_timed_fn_t done_timed;
  void* done_user;
} pw_proxy_lane_t;

static pw_status_t pw_proxy_lane_list(pw_remote_worker_t* w, const pw_proxy_lane_t* lane,
                                      uint64_t epoch, uint64_t* list) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < lane->group_size; ++i) list[n++] = lane->group_devices[i];
  for (uint32_t side = 0; side < 2; ++side) {
    uint32_t count = side == 0 ? lane->input_count : lane->output_count;
    for (uint32_t k = 0; k < count; ++k) {
      for (uint32_t i = 0; i < lane->count; ++i) {
        const pw_remote_mem_t* mem = (const pw_remote_mem_t*)lane->shard(lane->launch, side, k, i);
        PW_RETURN_IF_ERROR(pw__remote_mem_check(w, mem, epoch));
        list[n++] = mem->id;
      }
    }
  }
  return NULL;
}

static pw_status_t pw_proxy_launch_lane(pw_remote_worker_t* w, const pw_proxy_lane_t* lane) {
  const pw_remote_exe_t* exe = lane->exe;
  if (exe == NULL || lane->done == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: launch without executable or done",
                          w->label);
  }
  uint64_t epoch = exe->epoch;
  if (epoch != pw__remote_epoch(w)) {
    return pw_status_make(PW_STATUS_UNAVAILABLE, "%s: %s", w->label,
                          pw__remote_epoch(w) == 0 ? "lost (not attached)"
                                                   : "executable of an earlier session");
  }
  uint64_t total = (uint64_t)lane->group_size +
                   (uint64_t)(lane->input_count + lane->output_count) * lane->count;
  if (total > PW_WIRE_MAX_LIST || lane->count == 0 ||
      lane->mesh_start + (uint64_t)lane->count > lane->group_size) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: launch of %u devices at %u of %u",
                          w->label, lane->count, lane->mesh_start, lane->group_size);
  }
  pw_allocator_t a = w->remote->allocator;
  uint64_t stack[256];
  uint64_t* list = stack;
  if (total > 256) PW_RETURN_IF_ERROR(pw_allocator_malloc(a, total * 8, 0, (void**)&list));
  pw_pending_t* entry = NULL;
  pw_status_t status = pw_proxy_lane_list(w, lane, epoch, list);
  if (status == NULL) status = pw_allocator_calloc(a, sizeof(*entry), 0, (void**)&entry);
  if (status == NULL) {
    entry->id = pw__remote_next_id(w->remote);
    entry->kind = PW_PENDING_LAUNCH;
    entry->done = lane->done;
    entry->done_timed = lane->done_timed;
    entry->done_user = lane->done_user;
    status = pw__remote_pending_add(w, epoch, entry);
    if (status != NULL) {
      pw_allocator_free(a, entry, sizeof(*entry));
      entry = NULL;
    }
  }
  if (status == NULL) {
    pw_wire_msg_t msg = {.type = PW_WIRE_LAUNCH, .list = list, .list_count = (uint32_t)total};
    msg.u[PW_WIRE_LAUNCH_ID] = entry->id;
    msg.u[PW_WIRE_LAUNCH_EXE] = exe->id;
    msg.u[PW_WIRE_LAUNCH_MESH_START] = lane->mesh_start;
    msg.u[PW_WIRE_LAUNCH_DEVICES] = lane->count;
    msg.u[PW_WIRE_LAUNCH_GROUP] = lane->group_size;
    msg.u[PW_WIRE_LAUNCH_GANG] = lane->gang_id;
    msg.u[PW_WIRE_LAUNCH_QUEUE_SEQ] = lane->queue_seq;
    msg.u[PW_WIRE_LAUNCH_INPUTS] = lane->input_count;
    msg.u[PW_WIRE_LAUNCH_OUTPUTS] = lane->output_count;
    msg.u[PW_WIRE_LAUNCH_NODE_ARG] = lane->node_arg;
    status = pw__remote_send(w, epoch, &msg, 0);
    /* If the loss path already took the entry, it completes the launch:
     * the launch was accepted and done comes exactly once. */
    if (status != NULL && !pw__remote_pending_take(w, entry)) {
      pw_status_free(status);
      status = NULL;
    } else if (status != NULL) {
      pw_allocator_free(a, entry, sizeof(*entry));
    }
  }
  if (list != stack) pw_allocator_free(a, list, total * 8);
  return status;
}

static pw_backend_memory_t pw_proxy_single_shard(const void* launch, bool output, uint32_t k,
                                                 uint32_t i) {
  const pw_backend_launch_t* l = launch;
  (void)i;
  return output ? l->outputs[k] : l->inputs[k];
}

static pw_status_t pw_proxy_launch(void* self, const pw_backend_launch_t* l) {
  bool v2 = l->struct_size >= PW_BACKEND_LAUNCH_SIZE_V2;
  bool v3 = l->struct_size >= PW_BACKEND_LAUNCH_SIZE_V3;
  pw_proxy_lane_t lane = {(const pw_remote_exe_t*)l->executable,
                          l->mesh_index,
                          1,
                          l->group_devices,
                          l->group_size,
                          l->gang_id,
                          v2 ? l->queue_seq : 0,
                          v3 ? l->node_arg : 0,
                          l->input_count,
                          l->output_count,
                          pw_proxy_single_shard,
                          l,
                          l->done,
                          v2 ? l->done_timed : NULL,
                          l->done_user};
  return pw_proxy_launch_lane(pw_proxy(self), &lane);
}

static pw_backend_memory_t pw_proxy_host_shard(const void* launch, bool output, uint32_t k,
                                               uint32_t i) {
  const pw_backend_host_launch_t* l = launch;
  return output ? l->outputs[k][i] : l->inputs[k][i];
}

static pw_status_t pw_proxy_launch_host(void* self, const pw_backend_host_launch_t* l) {
  pw_remote_worker_t* w = pw_proxy(self);
  if (l->host != w->index + 1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: host launch for host %u (it is %u)",
                          w->label, l->host, w->index + 1);
  }
  pw_proxy_lane_t lane = {(const pw_remote_exe_t*)l->executable,
                          l->mesh_start,
                          l->device_count,
                          l->group_devices,
                          l->group_size,
                          l->gang_id,
                          l->queue_seq,
                          l->struct_size >= PW_BACKEND_HOST_LAUNCH_SIZE_V2 ? l->node_arg : 0,
                          l->input_count,
                          l->output_count,
                          pw_proxy_host_shard,
                          l,
                          l->done,
                          l->done_timed,
                          l->done_user};
  return pw_proxy_launch_lane(w, &lane);
}

static pw_status_t pw_proxy_copy_to_device(void* self, uint32_t device, pw_backend_memory_t dst,
                                           size_t offset, const void* src, size_t size) {
  pw_remote_worker_t* w = pw_proxy(self);
  const pw_remote_mem_t* mem = (const pw_remote_mem_t*)dst;
  (void)device;
  PW_RETURN_IF_ERROR(pw__remote_mem_check(w, mem, pw__remote_epoch(w)));
  return pw__remote_write(w, mem, offset, src, size);
}

static pw_status_t pw_proxy_copy_to_host(void* self, uint32_t device, pw_backend_memory_t src,
                                         size_t offset, void* dst, size_t size) {
  pw_remote_worker_t* w = pw_proxy(self);
  const pw_remote_mem_t* mem = (const pw_remote_mem_t*)src;
  (void)device;
  PW_RETURN_IF_ERROR(pw__remote_mem_check(w, mem, pw__remote_epoch(w)));
  return pw__remote_read(w, mem, offset, dst, size);
}

void pw__remote_proxy_vtable_init(pw_remote_worker_t* w) {
  pw_backend_vtable_t* v = &w->vtable;
  memset(v, 0, sizeof(*v));
  v->struct_size = sizeof(*v);
  v->name = w->backend;
  v->version = w->backend_version;
  v->destroy = pw_proxy_destroy;
  v->device_count = pw_proxy_device_count;
  v->device_info = pw_proxy_device_info;
  v->health = pw_proxy_health;
  v->compile = pw_proxy_compile;
  v->load = pw_proxy_load;
  v->unload = pw_proxy_unload;
  v->allocate = pw_proxy_allocate;
  v->deallocate = pw_proxy_deallocate;
  v->launch = pw_proxy_launch;
  v->copy_to_device = pw_proxy_copy_to_device;
  v->copy_to_host = pw_proxy_copy_to_host;
  v->queue_info = pw_proxy_queue_info;
  v->launch_host = pw_proxy_launch_host;
}
