/* The test double backend: creation, the vtable variants, devices,
 * compile/load, memory and counters. Launch and completion live in
 * double_exec.c, the program format in double_program.c. */
#include <stdio.h>
#include <string.h>

#include "cts/double_internal.h"

static pw_double_backend_t* pw_double_self(void* self) { return (pw_double_backend_t*)self; }

static void pw_double_destroy(void* self);

static uint32_t pw_double_device_count(void* self) {
  return pw_double_self(self)->options.device_count;
}

static pw_status_t pw_double_check_device(const pw_double_backend_t* d, uint32_t device,
                                          const char* method) {
  if (device >= d->options.device_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double %s: device %u out of range (backend has %u)", method,
                          device, d->options.device_count);
  }
  return NULL;
}

static pw_status_t pw_double_device_info(void* self, uint32_t device,
                                         pw_backend_device_info_t* out_info) {
  pw_double_backend_t* d = pw_double_self(self);
  if (out_info == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "double device_info: out_info is NULL");
  }
  PW_RETURN_IF_ERROR(pw_double_check_device(d, device, "device_info"));
  /* Fill only what the caller's struct has room for (it may be older). */
  size_t size = out_info->struct_size;
  pw_backend_device_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  info.host = pw_double_host_of(d, device);
  info.memory_bytes = d->options.no_op ? 0 : d->options.memory_bytes;
  snprintf(info.kind, sizeof(info.kind), "%s", d->options.no_op ? "double-noop" : "double");
  if (size < sizeof(size_t) || size > sizeof(info)) size = sizeof(info);
  memcpy((char*)out_info + sizeof(size_t), (const char*)&info + sizeof(size_t),
         size - sizeof(size_t));
  return NULL;
}

static pw_device_health_t pw_double_health(void* self, uint32_t device) {
  pw_double_backend_t* d = pw_double_self(self);
  if (device >= d->options.device_count) return PW_DEVICE_FAILED;
  return (pw_device_health_t)atomic_load(&d->devices[device].health);
}

static pw_status_t pw_double_compile(void* self, const void* program, size_t program_size,
                                     const pw_mesh_shape_t* mesh, const char* options,
                                     pw_allocator_t allocator, void** out_bytes,
                                     size_t* out_size) {
  if (out_bytes == NULL || out_size == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "double compile: NULL out-params");
  }
  *out_bytes = NULL;
  *out_size = 0;
  if (!pw_allocator_is_valid(allocator)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "double compile: invalid allocator");
  }
  pw_double_backend_t* d = pw_double_self(self);
  pw_double_program_t parsed;
  pw_status_t status = pw_double_program_parse(program, program_size, mesh, d->allocator, &parsed);
  if (status == NULL) {
    status = pw_double_program_serialize(&parsed, options, allocator, out_bytes, out_size);
  }
  pw_double_program_free(&parsed);
  return status;
}

static pw_status_t pw_double_load(void* self, const void* bytes, size_t size,
                                  pw_backend_executable_t* out_executable,
                                  pw_executable_signature_t* out_signature) {
  pw_double_backend_t* d = pw_double_self(self);
  if (out_executable == NULL || out_signature == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "double load: NULL out-params");
  }
  *out_executable = NULL;
  pw_double_executable_t* executable = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_allocator_calloc(d->allocator, sizeof(*executable), 0,
                                             (void**)&executable),
                         "double load");
  pw_double_program_t* program = &executable->program;
  pw_status_t status = pw_double_program_deserialize(bytes, size, d->allocator, program);
  pw_executable_signature_t* sig = &program->signature;
  if (status == NULL && out_signature->struct_size < PW_EXECUTABLE_SIGNATURE_SIZE_V2 &&
      (sig->input_count > PW_BACKEND_MAX_PARAMS || sig->output_count > PW_BACKEND_MAX_PARAMS)) {
    status = pw_status_make(PW_STATUS_OUT_OF_RANGE,
                            "double load: '%s' has %u inputs and %u outputs; a v1 signature "
                            "holds %d of each",
                            sig->name, sig->input_count, sig->output_count,
                            PW_BACKEND_MAX_PARAMS);
  }
  if (status != NULL) {
    pw_double_program_free(program);
    pw_allocator_free(d->allocator, executable, sizeof(*executable));
    return status;
  }
  executable->magic = PW_DOUBLE_EXECUTABLE_MAGIC;
  executable->group_size = pw_mesh_shape_device_count(&sig->mesh);
  /* Wide: the fixed arrays get the first PW_BACKEND_MAX_PARAMS, the v2
   * pointers every spec, in the executable (valid until unload). A narrow
   * one fills the fixed arrays only, as a v1 backend does. */
  if (program->wide != NULL) {
    for (uint32_t i = 0; i < sig->input_count && i < PW_BACKEND_MAX_PARAMS; ++i) {
      sig->inputs[i] = *pw_double_input(program, i);
    }
    for (uint32_t i = 0; i < sig->output_count && i < PW_BACKEND_MAX_PARAMS; ++i) {
      sig->outputs[i] = *pw_double_output(program, i);
    }
    sig->input_specs = program->wide;
    sig->output_specs = program->wide + program->wide_inputs;
  }
  /* Only as far as the caller's struct_size reaches, keeping it. */
  size_t covered = out_signature->struct_size < sizeof(*sig) ? out_signature->struct_size
                                                             : sizeof(*sig);
  if (covered > sizeof(size_t)) {
    memcpy((char*)out_signature + sizeof(size_t), (const char*)sig + sizeof(size_t),
           covered - sizeof(size_t));
  }
  *out_executable = (pw_backend_executable_t)executable;
  atomic_fetch_add(&d->live_executables, 1);
  return NULL;
}

static void pw_double_unload(void* self, pw_backend_executable_t executable) {
  pw_double_backend_t* d = pw_double_self(self);
  pw_double_executable_t* e = (pw_double_executable_t*)executable;
  if (e == NULL || e->magic != PW_DOUBLE_EXECUTABLE_MAGIC) return;
  e->magic = 0;
  pw_double_program_free(&e->program);
  pw_allocator_free(d->allocator, e, sizeof(*e));
  atomic_fetch_sub(&d->live_executables, 1);
}

static pw_status_t pw_double_allocate(void* self, uint32_t device, size_t size,
                                      pw_backend_memory_t* out_memory) {
  pw_double_backend_t* d = pw_double_self(self);
  if (out_memory == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "double allocate: out_memory is NULL");
  }
  *out_memory = NULL;
  PW_RETURN_IF_ERROR(pw_double_check_device(d, device, "allocate"));
  if (d->options.no_op) {
    *out_memory = (pw_backend_memory_t)&d->no_op_memory;
    return NULL;
  }
  pw_double_device_t* dev = &d->devices[device];
  uint64_t used = atomic_fetch_add(&dev->used_bytes, size);
  if (size > d->options.memory_bytes || used > d->options.memory_bytes - size) {
    atomic_fetch_sub(&dev->used_bytes, size);
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "double allocate: %zu bytes on device %u exceed its free "
                          "memory (%llu of %llu bytes in use)",
                          size, device, (unsigned long long)used,
                          (unsigned long long)d->options.memory_bytes);
  }
  pw_double_memory_t* memory = NULL;
  pw_status_t status = pw_allocator_calloc(d->allocator, sizeof(*memory) + size, 64,
                                           (void**)&memory);
  if (status != NULL) {
    atomic_fetch_sub(&dev->used_bytes, size);
    return pw_status_annotate(status, "double allocate on device %u", device);
  }
  memory->magic = PW_DOUBLE_MEMORY_MAGIC;
  memory->device = device;
  memory->size = size;
  atomic_fetch_add(&d->live_allocations, 1);
  *out_memory = (pw_backend_memory_t)memory;
  return NULL;
}

/* The double memory behind |memory| on |device|, or an error. */
static pw_status_t pw_double_memory(pw_double_backend_t* d, uint32_t device,
                                    pw_backend_memory_t memory, const char* method,
                                    pw_double_memory_t** out) {
  PW_RETURN_IF_ERROR(pw_double_check_device(d, device, method));
  pw_double_memory_t* m = (pw_double_memory_t*)memory;
  if (m == NULL || m->magic != PW_DOUBLE_MEMORY_MAGIC) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "double %s: not a live allocation",
                          method);
  }
  if (m->device != device) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double %s: memory of device %u used as device %u's", method,
                          m->device, device);
  }
  *out = m;
  return NULL;
}

static void pw_double_deallocate(void* self, uint32_t device, pw_backend_memory_t memory) {
  pw_double_backend_t* d = pw_double_self(self);
  if (d->options.no_op) return;
  pw_double_memory_t* m = NULL;
  pw_status_t status = pw_double_memory(d, device, memory, "deallocate", &m);
  if (status != NULL) {
    pw_status_ignore(status); /* a void method cannot report misuse */
    return;
  }
  size_t size = m->size;
  m->magic = 0;
  atomic_fetch_sub(&d->devices[device].used_bytes, size);
  pw_allocator_free(d->allocator, m, sizeof(*m) + size);
  atomic_fetch_sub(&d->live_allocations, 1);
}

static pw_status_t pw_double_check_range(const pw_double_memory_t* m, size_t offset,
                                         size_t size, const char* method) {
  if (offset > m->size || size > m->size - offset) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE,
                          "double %s: bytes [%zu, +%zu) outside a %zu-byte allocation",
                          method, offset, size, m->size);
  }
  return NULL;
}

static pw_status_t pw_double_copy_to_device(void* self, uint32_t device,
                                            pw_backend_memory_t dst, size_t offset,
                                            const void* src, size_t size) {
  pw_double_backend_t* d = pw_double_self(self);
  if (d->options.no_op) return pw_double_check_device(d, device, "copy_to_device");
  pw_double_memory_t* m = NULL;
  PW_RETURN_IF_ERROR(pw_double_memory(d, device, dst, "copy_to_device", &m));
  PW_RETURN_IF_ERROR(pw_double_check_range(m, offset, size, "copy_to_device"));
  if (size != 0 && src == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "double copy_to_device: src is NULL");
  }
  if (size != 0) memcpy(m->data + offset, src, size);
  return NULL;
}

static pw_status_t pw_double_copy_to_host(void* self, uint32_t device,
                                          pw_backend_memory_t src, size_t offset,
                                          void* dst, size_t size) {
  pw_double_backend_t* d = pw_double_self(self);
  if (d->options.no_op) return pw_double_check_device(d, device, "copy_to_host");
  pw_double_memory_t* m = NULL;
  PW_RETURN_IF_ERROR(pw_double_memory(d, device, src, "copy_to_host", &m));
  PW_RETURN_IF_ERROR(pw_double_check_range(m, offset, size, "copy_to_host"));
  if (size != 0 && dst == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "double copy_to_host: dst is NULL");
  }
  if (size != 0) memcpy(dst, m->data + offset, size);
  return NULL;
}

static void* pw_double_host_pointer(void* self, uint32_t device, pw_backend_memory_t memory) {
  pw_double_backend_t* d = pw_double_self(self);
  if (d->options.no_op) return NULL;
  pw_double_memory_t* m = NULL;
  pw_status_t status = pw_double_memory(d, device, memory, "host_pointer", &m);
  if (status != NULL) {
    pw_status_ignore(status);
    return NULL;
  }
  return m->data;
}

/* --- The vtable and its deliberately broken variants. --- */

#define PW_DOUBLE_VTABLE_METHODS                                                  \
  .destroy = pw_double_destroy, .device_count = pw_double_device_count,         \
  .device_info = pw_double_device_info, .health = pw_double_health,             \
  .compile = pw_double_compile, .load = pw_double_load,                         \
  .unload = pw_double_unload, .allocate = pw_double_allocate,                   \
  .deallocate = pw_double_deallocate, .launch = pw_double_launch,               \
  .copy_to_device = pw_double_copy_to_device,                                   \
  .copy_to_host = pw_double_copy_to_host, .host_pointer = pw_double_host_pointer

static const pw_backend_vtable_t pw_double_vtable = {
    .struct_size = sizeof(pw_backend_vtable_t),
    .name = PW_DOUBLE_BACKEND_NAME,
    .version = PW_DOUBLE_BACKEND_VERSION,
    PW_DOUBLE_VTABLE_METHODS,
};

/* options.host_launch: the same, offering launch_host (v4). */
static const pw_backend_vtable_t pw_double_vtable_host = {
    .struct_size = PW_BACKEND_VTABLE_SIZE_V4,
    .name = PW_DOUBLE_BACKEND_NAME,
    .version = PW_DOUBLE_BACKEND_VERSION,
    PW_DOUBLE_VTABLE_METHODS,
    .launch_host = pw_double_launch_host,
};

static const pw_backend_vtable_t pw_double_vtable_short = {
    .struct_size = offsetof(pw_backend_vtable_t, launch),
    .name = PW_DOUBLE_BACKEND_NAME "-short",
    .version = PW_DOUBLE_BACKEND_VERSION,
    PW_DOUBLE_VTABLE_METHODS,
};

static const pw_backend_vtable_t pw_double_vtable_null_methods = {
    .struct_size = sizeof(pw_backend_vtable_t),
    .name = PW_DOUBLE_BACKEND_NAME "-null-methods",
    .version = PW_DOUBLE_BACKEND_VERSION,
    .destroy = pw_double_destroy,
};

static const pw_backend_vtable_t pw_double_vtable_no_name = {
    .struct_size = sizeof(pw_backend_vtable_t),
    .name = NULL,
    .version = PW_DOUBLE_BACKEND_VERSION,
    PW_DOUBLE_VTABLE_METHODS,
};

/* A vtable from a newer plugin ABI: this build's vtable followed by slots
 * it does not know about. */
static void pw_double_future_method(void) {}
static const struct {
  pw_backend_vtable_t v1;
  void (*v2_methods[4])(void);
} pw_double_vtable_future = {
    .v1 = {
        .struct_size = sizeof(pw_backend_vtable_t) + 4 * sizeof(void (*)(void)),
        .name = PW_DOUBLE_BACKEND_NAME "-future",
        .version = PW_DOUBLE_BACKEND_VERSION,
        PW_DOUBLE_VTABLE_METHODS,
    },
    .v2_methods = {pw_double_future_method, pw_double_future_method,
                   pw_double_future_method, pw_double_future_method},
};

static const pw_backend_vtable_t* pw_double_vtable_of(pw_double_vtable_variant_t variant) {
  switch (variant) {
    case PW_DOUBLE_VTABLE_NORMAL: return &pw_double_vtable;
    case PW_DOUBLE_VTABLE_SHORT: return &pw_double_vtable_short;
    case PW_DOUBLE_VTABLE_NULL_METHODS: return &pw_double_vtable_null_methods;
    case PW_DOUBLE_VTABLE_NO_NAME: return &pw_double_vtable_no_name;
    case PW_DOUBLE_VTABLE_FUTURE: return &pw_double_vtable_future.v1;
  }
  return NULL;
}

pw_double_backend_t* pw_double_backend_from(const pw_backend_t* backend) {
  if (backend == NULL || backend->self == NULL) return NULL;
  if (backend->vtable == &pw_double_vtable_host) return pw_double_self(backend->self);
  for (int v = PW_DOUBLE_VTABLE_NORMAL; v <= PW_DOUBLE_VTABLE_FUTURE; ++v) {
    if (backend->vtable == pw_double_vtable_of((pw_double_vtable_variant_t)v)) {
      return pw_double_self(backend->self);
    }
  }
  return NULL;
}

/* --- Creation and destruction. --- */

void pw_double_options_init(pw_double_options_t* options) {
  memset(options, 0, sizeof(*options));
  options->struct_size = sizeof(*options);
}

static void pw_double_free(pw_double_backend_t* d) {
  if (d->devices != NULL) {
    for (uint32_t i = 0; i < d->options.device_count; ++i) {
      pw_double_device_t* dev = &d->devices[i];
      pthread_mutex_destroy(&dev->order_mutex);
      if (dev->order != NULL) {
        pw_allocator_free(d->allocator, dev->order,
                          d->options.order_capacity * sizeof(uint64_t));
      }
    }
    pw_allocator_free(d->allocator, d->devices,
                      d->options.device_count * sizeof(pw_double_device_t));
  }
  if (d->hosts != NULL) {
    pw_allocator_free(d->allocator, d->hosts, d->host_count * sizeof(pw_double_host_t));
  }
  if (d->workers != NULL) {
    pw_allocator_free(d->allocator, d->workers,
                      d->options.worker_count * sizeof(pw_double_worker_t));
  }
  pthread_mutex_destroy(&d->deferred.mutex);
  pthread_cond_destroy(&d->deferred.cond);
  pthread_mutex_destroy(&d->idle_mutex);
  pthread_cond_destroy(&d->idle_cond);
  pthread_mutex_destroy(&d->inject_mutex);
  pthread_mutex_destroy(&d->gang_mutex);
  pw_allocator_t allocator = d->allocator;
  d->magic = 0;
  pw_allocator_free(allocator, d, sizeof(*d));
}

static void pw_double_destroy(void* self) {
  pw_double_backend_t* d = pw_double_self(self);
  if (d == NULL) return;
  pw_double_exec_stop(d);
  pw_double_free(d);
}

static pw_status_t pw_double_resolve_options(const pw_double_options_t* in,
                                             pw_double_options_t* out) {
  pw_double_options_init(out);
  if (in != NULL) {
    if (in->struct_size < sizeof(*in)) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "double options struct_size %zu, expected %zu",
                            in->struct_size, sizeof(*in));
    }
    *out = *in;
    out->struct_size = sizeof(*out);
  }
  if (out->device_count == 0) out->device_count = 8;
  if (out->worker_count == 0) out->worker_count = 1;
  if (out->memory_bytes == 0) out->memory_bytes = 256u << 20;
  if (out->order_capacity == 0) out->order_capacity = 4096;
  if (!pw_allocator_is_valid(out->allocator)) out->allocator = pw_allocator_system();
  if (out->no_op) out->completion = PW_DOUBLE_COMPLETE_INLINE;
  if (out->device_count > (1u << 20) || out->worker_count > 64 ||
      (unsigned)out->completion > PW_DOUBLE_COMPLETE_DEFERRED ||
      (unsigned)out->failed_device_mode > PW_DOUBLE_FAIL_AT_COMPLETION) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double options: device_count %u, worker_count %u, "
                          "completion %d or failed_device_mode %d out of range",
                          out->device_count, out->worker_count, (int)out->completion,
                          (int)out->failed_device_mode);
  }
  if (out->completion != PW_DOUBLE_COMPLETE_THREADED) out->worker_count = 0;
  return NULL;
}

pw_status_t pw_double_backend_create_variant(const pw_double_options_t* options,
                                             pw_double_vtable_variant_t variant,
                                             pw_backend_t* out_backend) {
  if (out_backend == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "double create: out_backend is NULL");
  }
  memset(out_backend, 0, sizeof(*out_backend));
  const pw_backend_vtable_t* vtable = pw_double_vtable_of(variant);
  if (variant == PW_DOUBLE_VTABLE_NORMAL && options != NULL &&
      options->struct_size >= sizeof(*options) && options->host_launch) {
    vtable = &pw_double_vtable_host;
  }
  if (vtable == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "double create: unknown variant %d",
                          (int)variant);
  }
  pw_double_options_t resolved;
  PW_RETURN_IF_ERROR(pw_double_resolve_options(options, &resolved));
  pw_double_backend_t* d = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_allocator_calloc(resolved.allocator, sizeof(*d), 0, (void**)&d),
                         "double create");
  d->magic = PW_DOUBLE_BACKEND_MAGIC;
  d->options = resolved;
  d->allocator = resolved.allocator;
  pthread_mutex_init(&d->deferred.mutex, NULL);
  pthread_cond_init(&d->deferred.cond, NULL);
  pthread_mutex_init(&d->idle_mutex, NULL);
  pthread_cond_init(&d->idle_cond, NULL);
  pthread_mutex_init(&d->inject_mutex, NULL);
  pthread_mutex_init(&d->gang_mutex, NULL);
  pw_status_t status = pw_allocator_calloc_array(
      d->allocator, resolved.device_count, sizeof(pw_double_device_t),
      _Alignof(pw_double_device_t), (void**)&d->devices);
  if (status != NULL) {
    d->options.device_count = 0; /* nothing to tear down per device */
    pw_double_free(d);
    return pw_status_annotate(status, "double create");
  }
  for (uint32_t i = 0; i < resolved.device_count; ++i) {
    pthread_mutex_init(&d->devices[i].order_mutex, NULL);
  }
  uint32_t per_host = resolved.devices_per_host;
  d->host_count = per_host == 0 ? 1 : (resolved.device_count + per_host - 1) / per_host;
  status = pw_allocator_calloc_array(d->allocator, d->host_count, sizeof(pw_double_host_t),
                                     _Alignof(pw_double_host_t), (void**)&d->hosts);
  if (status != NULL) d->host_count = 0;
  for (uint32_t i = 0; i < resolved.device_count && status == NULL && !resolved.no_op; ++i) {
    status = pw_allocator_calloc_array(d->allocator, resolved.order_capacity,
                                       sizeof(uint64_t), 0, (void**)&d->devices[i].order);
  }
  if (status == NULL) status = pw_double_exec_start(d);
  if (status != NULL) {
    pw_double_exec_stop(d);
    pw_double_free(d);
    return pw_status_annotate(status, "double create");
  }
  out_backend->vtable = vtable;
  out_backend->self = d;
  return NULL;
}

pw_status_t pw_double_backend_create(const pw_double_options_t* options,
                                     pw_backend_t* out_backend) {
  return pw_double_backend_create_variant(options, PW_DOUBLE_VTABLE_NORMAL, out_backend);
}

/* --- Counters. --- */

pw_double_device_stats_t pw_double_backend_device_stats(pw_double_backend_t* d,
                                                        uint32_t device) {
  pw_double_device_stats_t stats;
  memset(&stats, 0, sizeof(stats));
  if (d == NULL || device >= d->options.device_count) return stats;
  pw_double_device_t* dev = &d->devices[device];
  stats.launches = atomic_load(&dev->launches);
  stats.rejected = atomic_load(&dev->rejected);
  stats.completed_ok = d->options.no_op ? stats.launches : atomic_load(&dev->completed_ok);
  stats.completed_error = atomic_load(&dev->completed_error);
  return stats;
}

uint64_t pw_double_backend_launch_count(pw_double_backend_t* d, uint32_t device) {
  if (d == NULL || device >= d->options.device_count) return 0;
  return atomic_load(&d->devices[device].launches);
}

uint64_t pw_double_backend_total_launches(pw_double_backend_t* d) {
  uint64_t total = 0;
  for (uint32_t i = 0; d != NULL && i < d->options.device_count; ++i) {
    total += atomic_load(&d->devices[i].launches);
  }
  for (uint32_t i = 0; d != NULL && i < d->host_count; ++i) {
    total += atomic_load(&d->hosts[i].parts); /* no-op host launches' parts */
  }
  return total;
}

size_t pw_double_backend_launch_order(pw_double_backend_t* d, uint32_t device,
                                      uint64_t* out_gang_ids, size_t capacity) {
  if (d == NULL || device >= d->options.device_count || d->options.no_op) return 0;
  pw_double_device_t* dev = &d->devices[device];
  pthread_mutex_lock(&dev->order_mutex);
  size_t count = dev->order_count;
  for (size_t i = 0; i < count && i < capacity; ++i) out_gang_ids[i] = dev->order[i];
  pthread_mutex_unlock(&dev->order_mutex);
  return count;
}

void pw_double_backend_reset_counters(pw_double_backend_t* d) {
  for (uint32_t i = 0; d != NULL && i < d->options.device_count; ++i) {
    pw_double_device_t* dev = &d->devices[i];
    atomic_store(&dev->launches, 0);
    atomic_store(&dev->rejected, 0);
    atomic_store(&dev->completed_ok, 0);
    atomic_store(&dev->completed_error, 0);
    pthread_mutex_lock(&dev->order_mutex);
    dev->order_count = 0;
    pthread_mutex_unlock(&dev->order_mutex);
  }
  for (uint32_t i = 0; d != NULL && i < d->host_count; ++i) {
    atomic_store(&d->hosts[i].launches, 0);
    atomic_store(&d->hosts[i].rejected, 0);
    atomic_store(&d->hosts[i].parts, 0);
  }
}

size_t pw_double_backend_live_allocations(pw_double_backend_t* d) {
  return d == NULL ? 0 : atomic_load(&d->live_allocations);
}

size_t pw_double_backend_live_executables(pw_double_backend_t* d) {
  return d == NULL ? 0 : atomic_load(&d->live_executables);
}
