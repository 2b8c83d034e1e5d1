/* The sim backend core: options, creation and destruction, devices,
 * health, and the vtable. See pathways/backends/sim.h for the model and
 * sim_internal.h for the locks. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backends/sim/sim_internal.h"
#include "pathways/struct_size.h"

#define PW_SIM_DEFAULT_SLICES 1u
#define PW_SIM_DEFAULT_PER_SLICE 8u
#define PW_SIM_DEFAULT_MEMORY (16ull << 30)
#define PW_SIM_DEFAULT_WINDOW 1000000000ull

static const pw_backend_vtable_t pw_sim_vtable;

pw_sim__backend_t* pw_sim__from_backend(pw_backend_t backend) {
  if (backend.vtable != &pw_sim_vtable) return NULL;
  return backend.self;
}

bool pw_sim_backend_is_sim(pw_backend_t backend) {
  return backend.vtable == &pw_sim_vtable && backend.self != NULL;
}

uint64_t pw_sim__clock(pw_sim__backend_t* b) {
  uint64_t now = atomic_load_explicit(&b->now, memory_order_relaxed);
  uint64_t latest = atomic_load_explicit(&b->latest, memory_order_relaxed);
  return now > latest ? now : latest;
}

void pw_sim__device_name(const pw_sim__backend_t* b, uint32_t device, char* buffer,
                         size_t capacity) {
  if (device >= b->device_count) {
    snprintf(buffer, capacity, "device %u", device);
    return;
  }
  snprintf(buffer, capacity, "device %u (slice %u chip %u)", device, device / b->per_slice,
           device % b->per_slice);
}

/*---------------------------------------------------------------------------
 * Devices
 *-------------------------------------------------------------------------*/

static uint32_t pw_sim_device_count(void* self) {
  pw_sim__backend_t* b = self;
  return b->device_count;
}

static pw_status_t pw_sim_device_info(void* self, uint32_t device,
                                      pw_backend_device_info_t* out_info) {
  pw_sim__backend_t* b = self;
  if (out_info == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "sim device_info: out_info is NULL");
  }
  if (device >= b->device_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim device_info: device %u does not exist (the backend has %u)",
                          device, b->device_count);
  }
  size_t v1 = PW_BACKEND_DEVICE_INFO_SIZE_V1;
  if (out_info->struct_size < v1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim device_info: out_info->struct_size %zu is below v1 (%zu)",
                          out_info->struct_size, v1);
  }
  out_info->host = device / b->per_host;
  out_info->memory_bytes = b->capacity;
  memset(out_info->kind, 0, sizeof(out_info->kind));
  snprintf(out_info->kind, sizeof(out_info->kind), "sim-chip");
  return NULL;
}

static pw_device_health_t pw_sim_health(void* self, uint32_t device) {
  pw_sim__backend_t* b = self;
  if (device >= b->device_count) return PW_DEVICE_HEALTHY;
  uint64_t f = atomic_load_explicit(&b->devices[device].fail_at, memory_order_relaxed);
  return f <= pw_sim__clock(b) ? PW_DEVICE_FAILED : PW_DEVICE_HEALTHY;
}

/*---------------------------------------------------------------------------
 * Creation and destruction
 *-------------------------------------------------------------------------*/

void pw_sim_backend_options_init(pw_sim_backend_options_t* out_options) {
  if (out_options == NULL) return;
  memset(out_options, 0, sizeof(*out_options));
  out_options->struct_size = sizeof(*out_options);
  out_options->allocator = pw_allocator_system();
  out_options->logger = pw_logger_default();
  out_options->slice_count = PW_SIM_DEFAULT_SLICES;
  out_options->devices_per_slice = PW_SIM_DEFAULT_PER_SLICE;
  out_options->mode = PW_SIM_MODE_INLINE;
  out_options->memory = PW_SIM_MEMORY_HOST;
  out_options->device_memory_bytes = PW_SIM_DEFAULT_MEMORY;
  out_options->chip_flops_per_s = 1e14;
  out_options->chip_bytes_per_s = 1e12;
  out_options->ici_bytes_per_s = 1e11;
  out_options->ici_latency_ns = 2000;
  out_options->dcn_bytes_per_s = 2.5e10;
  out_options->dcn_latency_ns = 10000;
  out_options->failure_window_ns = PW_SIM_DEFAULT_WINDOW;
}

static pw_status_t pw_sim_check_rate(const char* name, double rate) {
  if (!(rate >= 0) || isinf(rate)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_sim_backend_create: options.%s is %g; a rate must be finite and "
                          ">= 0 (0: free)",
                          name, rate);
  }
  return NULL;
}

/* Copies |options| over the defaults in |out| and validates them. The
 * failure schedule stays borrowed (applied during create). */
static pw_status_t pw_sim_read_options(const pw_sim_backend_options_t* options,
                                       pw_sim_backend_options_t* out) {
  pw_sim_backend_options_init(out);
  if (options == NULL) return NULL;
  if (options->struct_size < PW_SIM_BACKEND_OPTIONS_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_sim_backend_create: options struct_size %zu is below v1 (%zu)",
                          options->struct_size, (size_t)PW_SIM_BACKEND_OPTIONS_SIZE_V1);
  }
  pw_allocator_t defaults_allocator = out->allocator;
  pw_logger_t defaults_logger = out->logger;
  /* A v1 caller's struct ends before the v2 fields: they keep defaults. */
  size_t given = options->struct_size < sizeof(*out) ? options->struct_size : sizeof(*out);
  memcpy(out, options, given);
  out->struct_size = sizeof(*out);
  if (options->allocator.alloc == NULL && options->allocator.free == NULL) {
    out->allocator = defaults_allocator;
  } else if (!pw_allocator_is_valid(options->allocator)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_sim_backend_create: allocator has only one of alloc/free");
  }
  if (options->logger.fn == NULL) out->logger = defaults_logger;
  if (out->slice_count == 0) out->slice_count = PW_SIM_DEFAULT_SLICES;
  if (out->devices_per_slice == 0) out->devices_per_slice = PW_SIM_DEFAULT_PER_SLICE;
  if (out->devices_per_host == 0) out->devices_per_host = out->devices_per_slice;
  if (out->device_memory_bytes == 0) out->device_memory_bytes = PW_SIM_DEFAULT_MEMORY;
  if (out->failure_window_ns == 0) out->failure_window_ns = PW_SIM_DEFAULT_WINDOW;
  if ((uint64_t)out->slice_count * out->devices_per_slice > PW_SIM_MAX_DEVICES) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_sim_backend_create: %u slices x %u devices exceed the %u devices "
                          "one sim backend models",
                          out->slice_count, out->devices_per_slice, PW_SIM_MAX_DEVICES);
  }
  if (out->devices_per_slice % out->devices_per_host != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_sim_backend_create: options.devices_per_host %u does not divide "
                          "devices_per_slice %u (hosts never straddle slices)",
                          out->devices_per_host, out->devices_per_slice);
  }
  if ((unsigned)out->mode > PW_SIM_MODE_MANUAL || (unsigned)out->memory > PW_SIM_MEMORY_VIRTUAL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_sim_backend_create: unknown mode %d or memory kind %d",
                          (int)out->mode, (int)out->memory);
  }
  PW_RETURN_IF_ERROR(pw_sim_check_rate("chip_flops_per_s", out->chip_flops_per_s));
  PW_RETURN_IF_ERROR(pw_sim_check_rate("chip_bytes_per_s", out->chip_bytes_per_s));
  PW_RETURN_IF_ERROR(pw_sim_check_rate("ici_bytes_per_s", out->ici_bytes_per_s));
  PW_RETURN_IF_ERROR(pw_sim_check_rate("dcn_bytes_per_s", out->dcn_bytes_per_s));
  if (out->ici_latency_ns > (uint64_t)PW_SIM__MAX_NS ||
      out->dcn_latency_ns > (uint64_t)PW_SIM__MAX_NS ||
      out->launch_overhead_ns > (uint64_t)PW_SIM__MAX_NS ||
      out->failure_window_ns > (uint64_t)PW_SIM__MAX_NS) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_sim_backend_create: a latency, overhead or failure window "
                          "exceeds 1e18 ns");
  }
  if (out->queue_depth > PW_BACKEND_MAX_QUEUE_DEPTH) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_sim_backend_create: options.queue_depth %u exceeds "
                          "PW_BACKEND_MAX_QUEUE_DEPTH (%u)",
                          out->queue_depth, (unsigned)PW_BACKEND_MAX_QUEUE_DEPTH);
  }
  if (out->dispatch_latency_ns > (uint64_t)PW_SIM__MAX_NS) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_sim_backend_create: options.dispatch_latency_ns %llu exceeds "
                          "1e18 ns",
                          (unsigned long long)out->dispatch_latency_ns);
  }
  if (out->failure_count > 0 && out->failures == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_sim_backend_create: failure_count is %u but failures is NULL",
                          out->failure_count);
  }
  uint32_t devices = out->slice_count * out->devices_per_slice;
  for (uint32_t i = 0; i < out->failure_count; ++i) {
    const pw_sim_failure_t* f = &out->failures[i];
    uint32_t limit = f->kind == PW_SIM_FAIL_SLICE ? out->slice_count : devices;
    if ((unsigned)f->kind > PW_SIM_FAIL_SLICE || f->index >= limit ||
        f->at >= PW_SIM_TIME_NOW) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "pw_sim_backend_create: failures[%u] (kind %d, index %u, at %llu) "
                            "names no %s of the %u, or no virtual time",
                            i, (int)f->kind, f->index, (unsigned long long)f->at,
                            f->kind == PW_SIM_FAIL_SLICE ? "slice" : "device", limit);
    }
  }
  return NULL;
}

static void pw_sim_free(pw_sim__backend_t* b) {
  pw_allocator_t allocator = b->allocator;
  pw_sim__lanes_free(b);
  if (b->mutexes_ready) {
    pthread_mutex_destroy(&b->groups_mutex);
    pthread_mutex_destroy(&b->queue_mutex);
    pthread_mutex_destroy(&b->step_mutex);
    pthread_mutex_destroy(&b->stream_mutex);
    pthread_cond_destroy(&b->queue_wake);
    pthread_cond_destroy(&b->queue_idle);
  }
  if (b->devices != NULL) {
    pw_allocator_free(allocator, b->devices, b->device_count * sizeof(pw_sim__device_t));
  }
  if (b->streams != NULL) {
    pw_allocator_free(allocator, b->streams, b->device_count * sizeof(pw_sim__stream_t));
  }
  pw_allocator_free(allocator, b, sizeof(*b));
}

static void pw_sim_destroy(void* self) {
  pw_sim__backend_t* b = self;
  if (b == NULL) return;
  if (pw_sim__queue_is_sim_thread(b)) {
    /* Joining ourselves would hang; leaking is the lesser harm. */
    pw_log(&b->logger, PW_LOG_ERROR, PW_SIM_LOG,
           "destroy called from the simulator thread (a done callback); the backend is "
           "leaked");
    return;
  }
  pw_sim__groups_shutdown(b);
  pw_sim__queue_shutdown(b);
  pw_sim__streams_shutdown(b);
  uint64_t memories = atomic_load(&b->live_memories);
  uint64_t executables = atomic_load(&b->live_executables);
  if (memories != 0 || executables != 0) {
    pw_log(&b->logger, PW_LOG_WARN, PW_SIM_LOG,
           "destroyed with %llu device allocations and %llu executables still live (they "
           "are leaked)",
           (unsigned long long)memories, (unsigned long long)executables);
  }
  pw_sim_free(b);
}

pw_status_t pw_sim_backend_create(const pw_sim_backend_options_t* options,
                                  pw_backend_t* out_backend) {
  if (out_backend == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_sim_backend_create: out_backend is NULL");
  }
  memset(out_backend, 0, sizeof(*out_backend));
  pw_sim_backend_options_t o;
  PW_RETURN_IF_ERROR(pw_sim_read_options(options, &o));
  void* memory = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_allocator_calloc(o.allocator, sizeof(pw_sim__backend_t),
                                             alignof(pw_sim__backend_t), &memory),
                         "pw_sim_backend_create");
  pw_sim__backend_t* b = memory;
  b->allocator = o.allocator;
  b->logger = o.logger;
  b->mode = o.mode;
  b->virtual_memory = o.memory == PW_SIM_MEMORY_VIRTUAL;
  b->slice_count = o.slice_count;
  b->per_slice = o.devices_per_slice;
  b->per_host = o.devices_per_host;
  b->device_count = o.slice_count * o.devices_per_slice;
  b->capacity = o.device_memory_bytes;
  b->chip_flops_per_s = o.chip_flops_per_s;
  b->chip_bytes_per_s = o.chip_bytes_per_s;
  b->ici_bytes_per_s = o.ici_bytes_per_s;
  b->ici_latency_ns = o.ici_latency_ns;
  b->dcn_bytes_per_s = o.dcn_bytes_per_s;
  b->dcn_latency_ns = o.dcn_latency_ns;
  b->launch_overhead_ns = o.launch_overhead_ns;
  b->dispatch_latency_ns = o.dispatch_latency_ns;
  b->queue_depth = o.queue_depth;
  b->blocking = o.blocking_collectives;
  b->ordered = o.queue_depth > 0 || o.blocking_collectives;
  b->trace = o.trace;
  b->trace_user = o.trace_user;
  atomic_init(&b->now, 0);
  atomic_init(&b->latest, 0);
  atomic_init(&b->failed_events, 0);
  atomic_init(&b->transfer_events, 0);
  atomic_init(&b->live_memories, 0);
  atomic_init(&b->live_executables, 0);
  atomic_init(&b->host_launches, 0);
  atomic_init(&b->lanes_lock, 0);
  pthread_mutex_init(&b->groups_mutex, NULL);
  pthread_mutex_init(&b->queue_mutex, NULL);
  pthread_mutex_init(&b->step_mutex, NULL);
  pthread_mutex_init(&b->stream_mutex, NULL);
  pthread_cond_init(&b->queue_wake, NULL);
  pthread_cond_init(&b->queue_idle, NULL);
  b->mutexes_ready = true;
  void* devices = NULL;
  pw_status_t status = pw_allocator_calloc_array(o.allocator, b->device_count,
                                                 sizeof(pw_sim__device_t),
                                                 alignof(pw_sim__device_t), &devices);
  if (status == NULL) {
    b->devices = devices;
    for (uint32_t i = 0; i < b->device_count; ++i) {
      pw_sim__device_t* d = &b->devices[i];
      atomic_init(&d->lock, 0);
      d->slice = i / b->per_slice;
      atomic_init(&d->fail_at, PW_SIM_TIME_NEVER);
      atomic_init(&d->used_bytes, 0);
      d->first_start = UINT64_MAX;
    }
    pw_sim__apply_failures(b, &o);
    status = pw_sim__streams_init(b);
    if (status == NULL) status = pw_sim__queue_init(b);
  }
  if (status != NULL) {
    pw_sim_free(b);
    return pw_status_annotate(status, "pw_sim_backend_create");
  }
  pw_log(&b->logger, PW_LOG_DEBUG, PW_SIM_LOG,
         "created: %u slices x %u chips (%u per host), mode %d, %s memory of %llu bytes per "
         "chip",
         b->slice_count, b->per_slice, b->per_host, (int)b->mode, b->virtual_memory ? "virtual" : "host",
         (unsigned long long)b->capacity);
  out_backend->vtable = &pw_sim_vtable;
  out_backend->self = b;
  return NULL;
}

static pw_status_t pw_sim_queue_info(void* self, uint32_t device,
                                     pw_backend_queue_info_t* out_info) {
  pw_sim__backend_t* b = self;
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(out_info, pw_backend_queue_info_t,
                                      PW_BACKEND_QUEUE_INFO_SIZE_V1, "sim queue_info"));
  if (device >= b->device_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim queue_info: device %u does not exist (the backend has %u)",
                          device, b->device_count);
  }
  pw_backend_queue_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  if (b->queue_depth > 0) {
    info.flags = PW_BACKEND_QUEUE_ORDERED;
    info.depth = b->queue_depth;
  }
  pw_struct_fill(out_info, &info, sizeof(info));
  return NULL;
}

static const pw_backend_vtable_t pw_sim_vtable = {
    .struct_size = sizeof(pw_backend_vtable_t),
    .name = PW_SIM_BACKEND_NAME,
    .version = PW_SIM_BACKEND_VERSION,
    .destroy = pw_sim_destroy,
    .device_count = pw_sim_device_count,
    .device_info = pw_sim_device_info,
    .health = pw_sim_health,
    .compile = pw_sim__compile,
    .load = pw_sim__load,
    .unload = pw_sim__unload,
    .allocate = pw_sim__allocate,
    .deallocate = pw_sim__deallocate,
    .launch = pw_sim__launch,
    .copy_to_device = pw_sim__copy_to_device,
    .copy_to_host = pw_sim__copy_to_host,
    .host_pointer = pw_sim__host_pointer,
    .record_copy = pw_sim__record_copy,
    .queue_info = pw_sim_queue_info,
    .launch_host = pw_sim__launch_host,
    .accumulate = pw_sim__accumulate,
};
