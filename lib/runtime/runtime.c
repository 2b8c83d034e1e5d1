#define _POSIX_C_SOURCE 200809L
/* Runtime creation, topology validation and topology queries. */
#include <stdio.h>
#include <string.h>

#include "pathways/transports/inproc.h"
#include "plugin/backend_call.h"
#include "plugin/policy_call.h"
#include "pathways/struct_size.h"
#include "plugin/transport_call.h"
#include "observe/observe.h"
#include "runtime/runtime_internal.h"
#include "sched/device.h"
#include "sched/sched.h"
#include "runtime/host_xfer.h"
#include "runtime/workers.h"

/* The transport in |options|, if the options are recent enough to have one. */
static const pw_transport_t* pw_runtime_options_transport(const pw_runtime_options_t* options) {
  if (options == NULL || !PW_STRUCT_HAS_FIELD(options, pw_runtime_options_t, transport) ||
      options->transport.vtable == NULL) {
    return NULL;
  }
  return &options->transport;
}

/* Destroys what |options| handed over (backends, transport): create takes
 * ownership even when it fails. */
static void pw_runtime_destroy_plugins(const pw_runtime_options_t* options) {
  if (options == NULL) return;
  for (uint32_t i = 0; options->backends && i < options->backend_count; ++i) {
    pw__backend_destroy(&options->backends[i]);
  }
  const pw_transport_t* transport = pw_runtime_options_transport(options);
  if (transport) pw__transport_destroy(transport);
}

static pw_status_t pw_runtime_check_options(const pw_runtime_options_t* options) {
  if (options->backend_count == 0 || options->backends == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "runtime options name no backend");
  }
  if (options->slice_count == 0 || options->slices == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "runtime options name no slice");
  }
  if (options->slice_count > 4096) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%u slices requested; at most 4096 are supported",
                          options->slice_count);
  }
  for (uint32_t b = 0; b < options->backend_count; ++b) {
    PW_RETURN_IF_ERROR_CTX(pw__backend_check(&options->backends[b]), "backends[%u]", b);
  }
  if (PW_STRUCT_HAS_FIELD(options, pw_runtime_options_t, loss_grace_ns) &&
      options->health_poll_ns != 0 && options->health_poll_ns < 100000) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "health_poll_ns %llu is below the 100 us minimum (0: no polling)",
                          (unsigned long long)options->health_poll_ns);
  }
  if (PW_STRUCT_HAS_FIELD(options, pw_runtime_options_t, sched_policy) &&
      options->sched_policy.vtable != NULL) {
    PW_RETURN_IF_ERROR(pw__policy_check(&options->sched_policy));
  }
  for (uint32_t s = 0; s < options->slice_count; ++s) {
    const pw_slice_desc_t* d = &options->slices[s];
    PW_RETURN_IF_ERROR_CTX(pw_mesh_shape_check(&d->mesh), "slices[%u]", s);
    if (d->backend >= options->backend_count) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "slices[%u]: backend index %u out of range (%u backends)",
                            s, d->backend, options->backend_count);
    }
    const pw_backend_t* backend = &options->backends[d->backend];
    uint32_t n = pw_mesh_shape_device_count(&d->mesh);
    uint32_t available = pw__backend_device_count(backend);
    if ((uint64_t)d->first_device + n > available) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "slices[%u]: devices %u..%u exceed backend '%s', which "
                            "has %u devices",
                            s, d->first_device, d->first_device + n - 1,
                            pw__backend_name(backend), available);
    }
    for (uint32_t t = 0; t < s; ++t) {
      const pw_slice_desc_t* o = &options->slices[t];
      uint32_t m = pw_mesh_shape_device_count(&o->mesh);
      if (o->backend == d->backend && d->first_device < o->first_device + m &&
          o->first_device < d->first_device + n) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "slices[%u] and slices[%u] share devices of backend '%s'",
                              t, s, pw__backend_name(backend));
      }
    }
  }
  return NULL;
}

static void pw_runtime_free(pw_runtime_t* rt) {
  pw_allocator_t a = rt->allocator;
  for (uint32_t s = 0; s < rt->slice_count; ++s) {
    if (rt->slices[s].devices) pw__dispatch_slice_drop_tail(&rt->slices[s]);
  }
  /* Destroyed clients' structs go with their last execution block: the
   * tails dropped above, or a thread completing a client's last run that
   * is still letting go of it (pw__client_release). Nothing may touch the
   * runtime after that. */
  for (uint32_t spins = 0; pw_atomic_load_u32_acquire(&rt->client_structs) != 0; ++spins) {
    pw__dispatch_backoff(spins);
  }
  /* The watchdog first (it delivers completions), then the plugins
   * before the device states: a completion a plugin still delivers while
   * it shuts down finds its token (lib/sched/dispatch.c). */
  pw__watchdog_stop(rt);
  pw__host_tasks_stop(rt);
  pw__host_xfer_stop(rt);
  pw__health_destroy(rt);
  pw__workers_destroy(rt->workers);
  pw__observe_destroy(rt);
  for (uint32_t i = 0; i < rt->backend_count; ++i) pw__backend_destroy(&rt->backends[i]);
  if (rt->transport.vtable) pw__transport_destroy(&rt->transport);
  for (uint32_t s = 0; s < rt->slice_count; ++s) {
    pw_slice_t* slice = &rt->slices[s];
    if (slice->devices) pw__dispatch_slice_deinit(slice);
  }
  pw_allocator_free(a, rt->slices, rt->slice_count * sizeof(pw_slice_t));
  pw__slice_composites_free(rt);
  pw_allocator_free(a, rt->backends, rt->backend_count * sizeof(pw_backend_t));
  pthread_mutex_destroy(&rt->lock);
  pthread_mutex_destroy(&rt->watchdog_lock);
  pw__handle_salt_give(rt);
  pw_allocator_free(a, rt, sizeof(*rt));
}

/* The scheduling options: the three v2 fields came in one release, each
 * is read only when struct_size covers it. */
static void pw_runtime_configure_scheduling(pw_runtime_t* rt,
                                            const pw_runtime_options_t* options) {
  rt->sched_policy = pw_sched_policy_fifo();
  if (PW_STRUCT_HAS_FIELD(options, pw_runtime_options_t, sched_policy) &&
      options->sched_policy.vtable != NULL) {
    rt->sched_policy = options->sched_policy;
  }
  if (PW_STRUCT_HAS_FIELD(options, pw_runtime_options_t, sched_window)) {
    rt->sched_window = options->sched_window;
  }
  if (PW_STRUCT_HAS_FIELD(options, pw_runtime_options_t, debug_disable_gang_order)) {
    rt->no_gang_order = options->debug_disable_gang_order;
    if (rt->no_gang_order) rt->sched_window = 0; /* no sequence to admit into */
  }
  rt->sched_charge = rt->sched_window != 0 && pw__policy_wants_charge(&rt->sched_policy);
  /* v3: queue-ordered launch and launch deadlines. */
  rt->drain_deadline_ns = UINT64_C(30000000000);
  if (PW_STRUCT_HAS_FIELD(options, pw_runtime_options_t, drain_deadline_ns)) {
    rt->no_queued_launch = options->disable_queued_launch;
    rt->launch_deadline_ns = options->launch_deadline_ns;
    if (options->drain_deadline_ns != 0) rt->drain_deadline_ns = options->drain_deadline_ns;
  }
  /* v4: host launch. */
  if (PW_STRUCT_HAS_FIELD(options, pw_runtime_options_t, disable_host_launch)) {
    rt->no_host_launch = options->disable_host_launch;
  }
  /* v5: failure. */
  rt->loss_grace_ns = UINT64_C(1000000000);
  if (PW_STRUCT_HAS_FIELD(options, pw_runtime_options_t, loss_grace_ns)) {
    rt->health_poll_ns = options->health_poll_ns;
    rt->deadline_loses_slice = options->deadline_loses_slice;
    if (options->loss_grace_ns != 0) rt->loss_grace_ns = options->loss_grace_ns;
  }
}

/* The physical slices of |options| (rt->slices allocated), each with its
 * dispatch state. */
static pw_status_t pw_runtime_make_slices(pw_runtime_t* rt, const pw_runtime_options_t* options) {
  rt->slice_count = options->slice_count;
  for (uint32_t s = 0; s < options->slice_count; ++s) {
    const pw_slice_desc_t* d = &options->slices[s];
    pw_slice_t* slice = &rt->slices[s];
    slice->runtime = rt;
    slice->index = s;
    if (d->name && d->name[0]) {
      snprintf(slice->name, sizeof(slice->name), "%s", d->name);
    } else {
      snprintf(slice->name, sizeof(slice->name), "slice%u", s);
    }
    slice->mesh = d->mesh;
    slice->device_count = pw_mesh_shape_device_count(&d->mesh);
    slice->backend_index = d->backend;
    slice->backend = &rt->backends[d->backend];
    slice->host = d->host;
    slice->first_device = d->first_device;
    pw_status_t status = pw__dispatch_slice_init(slice);
    if (status != NULL) {
      return pw_status_annotate(status, "slice '%s'", slice->name);
    }
  }
  return NULL;
}

/* The bundled in-process transport when the host gave none, and the
 * transport's methods the dispatcher calls directly. */
static pw_status_t pw_runtime_make_transport(pw_runtime_t* rt) {
  if (rt->transport.vtable == NULL) {
    pw_inproc_transport_options_t io;
    pw_inproc_transport_options_init(&io);
    io.allocator = rt->allocator;
    io.logger = rt->logger;
    pw_status_t status = pw_inproc_transport_create(&io, &rt->transport);
    if (status != NULL) {
      return pw_status_annotate(status, "pw_runtime_create: default transport");
    }
  }
  rt->transport_copy = PW__TRANSPORT_HAS(&rt->transport, copy) ? rt->transport.vtable->copy : NULL;
  rt->transport_copy_strided = PW__TRANSPORT_HAS(&rt->transport, copy_strided)
                                   ? rt->transport.vtable->copy_strided
                                   : NULL;
  return NULL;
}

pw_status_t pw_runtime_create(const pw_runtime_options_t* options,
                              pw_runtime_t** out_runtime) {
  if (out_runtime == NULL) {
    pw_runtime_destroy_plugins(options);
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "out_runtime is NULL");
  }
  *out_runtime = NULL;
  pw_status_t status = PW_STRUCT_CHECK(options, pw_runtime_options_t,
                                        PW_RUNTIME_OPTIONS_SIZE_V1, "pw_runtime_create");
  if (status != NULL) {
    pw_runtime_destroy_plugins(options); /* create owns them even now */
    return status;
  }
  status = pw_runtime_check_options(options);
  const pw_transport_t* transport = pw_runtime_options_transport(options);
  if (status == NULL && transport != NULL) {
    status = pw__transport_check(transport);
    if (status) status = pw_status_annotate(status, "transport");
  }
  if (status != NULL) {
    pw_runtime_destroy_plugins(options);
    return pw_status_annotate(status, "pw_runtime_create");
  }
  pw_allocator_t allocator = pw_allocator_is_valid(options->allocator)
                                 ? options->allocator
                                 : pw_allocator_system();
  pw_runtime_t* rt = NULL;
  status = pw_allocator_calloc(allocator, sizeof(*rt), PW_CACHE_LINE, (void**)&rt);
  if (status != NULL) {
    pw_runtime_destroy_plugins(options);
    return status;
  }
  if (transport != NULL) rt->transport = *transport; /* owned from here on */
  rt->allocator = allocator;
  rt->logger = options->logger.fn ? options->logger : pw_logger_default();
  rt->worker_count = options->worker_count;
  pw_runtime_configure_scheduling(rt, options);
  pthread_mutex_init(&rt->lock, NULL);
  pthread_mutex_init(&rt->watchdog_lock, NULL);
  pw_atomic_init_u64(&rt->next_gang_id, 1);
  static pw_atomic_u64_t serials; /* zero-initialised: the first runtime gets 1 */
  rt->serial = pw_atomic_fetch_add_u64(&serials, 1) + 1;
  rt->next_client_tag = 1;
  status = pw_allocator_calloc_array(allocator, options->backend_count,
                                     sizeof(pw_backend_t), 0, (void**)&rt->backends);
  if (status != NULL) {
    pthread_mutex_destroy(&rt->lock);
    if (rt->transport.vtable) pw__transport_destroy(&rt->transport);
    pw_allocator_free(allocator, rt, sizeof(*rt));
    for (uint32_t i = 0; i < options->backend_count; ++i) pw__backend_destroy(&options->backends[i]);
    return status;
  }
  memcpy(rt->backends, options->backends, options->backend_count * sizeof(pw_backend_t));
  rt->backend_count = options->backend_count;
  status = pw_allocator_calloc_array(allocator, options->slice_count,
                                     sizeof(pw_slice_t), PW_CACHE_LINE, (void**)&rt->slices);
  if (status != NULL) {
    pw_runtime_free(rt);
    return status;
  }
  status = pw_runtime_make_slices(rt, options);
  if (status != NULL) {
    pw_runtime_free(rt);
    return status;
  }
  status = pw_runtime_make_transport(rt);
  if (status != NULL) {
    pw_runtime_free(rt);
    return status;
  }
  status = pw__workers_create(allocator, rt->worker_count, &rt->workers);
  if (status == NULL) status = pw__observe_create(rt);
  if (status == NULL) status = pw__health_create(rt);
  if (status != NULL) {
    pw_runtime_free(rt);
    return pw_status_annotate(status, "pw_runtime_create");
  }
  pw_log(&rt->logger, PW_LOG_INFO, "runtime", "created with %u backends, %u slices",
         rt->backend_count, rt->slice_count);
  *out_runtime = rt;
  return NULL;
}

pw_status_t pw_runtime_destroy(pw_runtime_t* runtime) {
  if (runtime == NULL) return NULL;
  if (pw__in_callback()) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "pw_runtime_destroy: called from inside a callback the runtime is "
                          "running; the runtime is left as it is");
  }
  pthread_mutex_lock(&runtime->lock);
  uint32_t live = runtime->client_count;
  if (live != 0) {
    /* Name a few: enough to find the one a caller forgot. */
    char names[200];
    size_t used = 0;
    names[0] = '\0';
    uint32_t named = 0;
    for (pw_client_t* c = runtime->clients; c != NULL && named < 4; c = c->runtime_next, ++named) {
      int n = snprintf(names + used, sizeof(names) - used, "%s'%s'", named ? ", " : "", c->name);
      if (n < 0 || (size_t)n >= sizeof(names) - used) break;
      used += (size_t)n;
    }
    pthread_mutex_unlock(&runtime->lock);
    pw_log(&runtime->logger, PW_LOG_ERROR, "runtime",
           "destroy refused: %u live clients (%s%s)", live, names, live > named ? ", ..." : "");
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "pw_runtime_destroy: %u clients are still alive (%s%s); destroy them "
                          "first (the runtime is left as it is)",
                          live, names, live > named ? ", ..." : "");
  }
  pthread_mutex_unlock(&runtime->lock);
  pw_runtime_free(runtime);
  return NULL;
}

uint32_t pw_runtime_slice_count(const pw_runtime_t* runtime) {
  return runtime ? runtime->slice_count : 0;
}

/* Fills all of |info| (zeroed by the caller) for pw_runtime_slice_info. */
static pw_status_t pw_runtime_slice_info_fill(pw_runtime_t* runtime, uint32_t slice,
                                              pw_slice_info_t* info) {
  if (slice >= runtime->slice_count) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE, "slice %u does not exist (%u slices)",
                          slice, runtime->slice_count);
  }
  pw_slice_t* s = &runtime->slices[slice];
  snprintf(info->name, sizeof(info->name), "%s", s->name);
  info->mesh = s->mesh;
  info->device_count = s->device_count;
  info->host = s->host;
  snprintf(info->backend, sizeof(info->backend), "%s", pw__backend_name(s->backend));
  info->health = pw__slice_worst_health(s);
  pthread_mutex_lock(&runtime->lock);
  info->bound_vslices = s->bound_vslices;
  info->state = pw_atomic_load_u32_relaxed(&s->lost) ? PW_SLICE_LOST : PW_SLICE_ONLINE;
  info->losses = pw_atomic_load_u32_relaxed(&s->losses);
  pthread_mutex_unlock(&runtime->lock);
  return NULL;
}

pw_status_t pw_runtime_slice_info(pw_runtime_t* runtime, uint32_t slice,
                                  pw_slice_info_t* out_info) {
  if (runtime == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_runtime_slice_info: runtime is NULL");
  }
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(out_info, pw_slice_info_t, PW_SLICE_INFO_SIZE_V1,
                                      "pw_runtime_slice_info"));
  pw_slice_info_t info;
  memset(&info, 0, sizeof(info));
  pw_status_t status = pw_runtime_slice_info_fill(runtime, slice, &info);
  pw_struct_fill(out_info, &info, sizeof(info)); /* cleared on error */
  return status;
}

/* Fills all of |out_info| (zeroed by the caller) for pw_runtime_device_info. */
static pw_status_t pw_runtime_device_info_fill(pw_runtime_t* runtime, uint32_t slice,
                                               uint32_t mesh_index, pw_device_info_t* out_info) {
  if (slice >= runtime->slice_count) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE, "slice %u does not exist (%u slices)",
                          slice, runtime->slice_count);
  }
  pw_slice_t* s = &runtime->slices[slice];
  if (mesh_index >= s->device_count) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE,
                          "slice '%s' has %u devices; device %u does not exist",
                          s->name, s->device_count, mesh_index);
  }
  uint32_t ordinal = s->group_devices[mesh_index];
  pw_backend_device_info_t info;
  pw_status_t status = pw__backend_device_info(s->backend, ordinal, &info);
  if (status != NULL && pw_status_code(status) != PW_STATUS_UNIMPLEMENTED) {
    return pw_status_annotate(status, "slice '%s' device %u", s->name, mesh_index);
  }
  pw_status_free(status);
  info.kind[sizeof(info.kind) - 1] = '\0';
  out_info->slice = slice;
  out_info->mesh_index = mesh_index;
  out_info->backend_device = ordinal;
  out_info->host = s->host;
  out_info->memory_bytes = info.memory_bytes;
  out_info->health = pw__backend_health(s->backend, ordinal);
  snprintf(out_info->kind, sizeof(out_info->kind), "%s",
           info.kind[0] ? info.kind : pw__backend_name(s->backend));
  return NULL;
}

pw_status_t pw_runtime_device_info(pw_runtime_t* runtime, uint32_t slice,
                                   uint32_t mesh_index, pw_device_info_t* out_info) {
  if (runtime == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_runtime_device_info: runtime is NULL");
  }
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(out_info, pw_device_info_t, PW_DEVICE_INFO_SIZE_V1,
                                      "pw_runtime_device_info"));
  pw_device_info_t info;
  memset(&info, 0, sizeof(info));
  pw_status_t status = pw_runtime_device_info_fill(runtime, slice, mesh_index, &info);
  pw_struct_fill(out_info, &info, sizeof(info)); /* cleared on error */
  return status;
}
