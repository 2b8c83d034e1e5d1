#include "runtime/fixture.h"

#include <string.h>

#include "support/queue_wrapper.h"

pw_status_t pw_fixture_init(pw_fixture_t* f, pw_fixture_backend_t kind,
                            uint32_t slices, const char* mesh_text,
                            pw_allocator_t allocator) {
  pw_sched_policy_t fifo = {NULL, NULL};
  return pw_fixture_init_sched(f, kind, slices, mesh_text, allocator, fifo, 0);
}

bool pw_fixture_kind_lanes(pw_fixture_backend_t kind) {
  return kind == PW_FIXTURE_DOUBLE_LANES || kind == PW_FIXTURE_DOUBLE_LANES_QUEUED;
}

uint64_t pw_fixture_host_launches(const pw_fixture_t* f) {
  return f->dbl != NULL ? pw_double_backend_total_host_launches(f->dbl) : 0;
}

static pw_status_t pw_fixture_init_all(pw_fixture_t* f, pw_fixture_backend_t kind,
                                       uint32_t slices, const char* mesh_text,
                                       pw_allocator_t allocator, pw_sched_policy_t policy,
                                       uint32_t window, const pw_fixture_extra_t* extra);

pw_status_t pw_fixture_init_sched(pw_fixture_t* f, pw_fixture_backend_t kind,
                                  uint32_t slices, const char* mesh_text,
                                  pw_allocator_t allocator, pw_sched_policy_t policy,
                                  uint32_t window) {
  return pw_fixture_init_all(f, kind, slices, mesh_text, allocator, policy, window, NULL);
}

pw_status_t pw_fixture_init_extra(pw_fixture_t* f, pw_fixture_backend_t kind,
                                  uint32_t slices, const char* mesh_text,
                                  pw_allocator_t allocator, const pw_fixture_extra_t* extra) {
  pw_sched_policy_t fifo = {NULL, NULL};
  return pw_fixture_init_all(f, kind, slices, mesh_text, allocator, fifo, 0, extra);
}

static pw_status_t pw_fixture_init_all(pw_fixture_t* f, pw_fixture_backend_t kind,
                                       uint32_t slices, const char* mesh_text,
                                       pw_allocator_t allocator, pw_sched_policy_t policy,
                                       uint32_t window, const pw_fixture_extra_t* extra) {
  pw_fixture_extra_t none;
  memset(&none, 0, sizeof(none));
  if (extra == NULL) extra = &none;
  memset(f, 0, sizeof(*f));
  pw_mesh_shape_t mesh;
  PW_RETURN_IF_ERROR(pw_mesh_shape_parse(mesh_text, &mesh));
  uint32_t per_slice = pw_mesh_shape_device_count(&mesh);
  pw_backend_t backend;
  bool queued = kind == PW_FIXTURE_CPU_QUEUED || kind == PW_FIXTURE_DOUBLE_QUEUED ||
                kind == PW_FIXTURE_DOUBLE_LANES_QUEUED;
  bool lanes = pw_fixture_kind_lanes(kind);
  if (kind == PW_FIXTURE_CPU_QUEUED) kind = PW_FIXTURE_CPU;
  if (kind == PW_FIXTURE_DOUBLE_QUEUED) kind = PW_FIXTURE_DOUBLE_INLINE;
  if (kind == PW_FIXTURE_DOUBLE_LANES) kind = PW_FIXTURE_DOUBLE_THREADED;
  if (kind == PW_FIXTURE_DOUBLE_LANES_QUEUED) kind = PW_FIXTURE_DOUBLE_INLINE;
  if (kind == PW_FIXTURE_CPU) {
#ifdef PW_FIXTURE_NO_CPU
    return pw_status_make(PW_STATUS_UNIMPLEMENTED, "cpu backend not built");
#else
    pw_cpu_backend_options_t o;
    pw_cpu_backend_options_init(&o);
    o.device_count = per_slice * slices;
    o.worker_count = 2;
    o.allocator = allocator;
    PW_RETURN_IF_ERROR(pw_cpu_backend_create(&o, &backend));
#endif
  } else {
    pw_double_options_t o;
    pw_double_options_init(&o);
    o.device_count = per_slice * slices;
    o.completion = kind == PW_FIXTURE_DOUBLE_INLINE     ? PW_DOUBLE_COMPLETE_INLINE
                   : kind == PW_FIXTURE_DOUBLE_THREADED ? PW_DOUBLE_COMPLETE_THREADED
                                                        : PW_DOUBLE_COMPLETE_DEFERRED;
    o.worker_count = 2;
    o.allocator = allocator;
    o.order_capacity = 1u << 16;
    o.failed_device_mode = extra->failed_device_mode;
    if (lanes) {
      o.host_launch = true;
      o.devices_per_host = 2;
    }
    PW_RETURN_IF_ERROR(pw_double_backend_create(&o, &backend));
    f->dbl = pw_double_backend_from(&backend);
  }
  if (queued) {
    pw_queue_wrapper_options_t qo = {.depth = 4,
                                     .ordered = true,
                                     .fail_every = extra->fail_every,
                                     .lose_every = extra->lose_every};
    PW_RETURN_IF_ERROR(pw_queue_wrapper_create(&qo, backend, &backend));
    f->qw = pw_queue_wrapper_from(&backend);
  }
  f->backend = backend;
  pw_slice_desc_t descs[16];
  if (slices > 16) slices = 16;
  for (uint32_t s = 0; s < slices; ++s) {
    memset(&descs[s], 0, sizeof(descs[s]));
    descs[s].mesh = mesh;
    descs[s].backend = 0;
    descs[s].first_device = s * per_slice;
    descs[s].host = s;
  }
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.allocator = allocator;
  ro.worker_count = 1;
  ro.sched_policy = policy;
  ro.sched_window = window;
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = descs;
  ro.slice_count = slices;
  ro.launch_deadline_ns = extra->launch_deadline_ns;
  ro.drain_deadline_ns = extra->drain_deadline_ns;
  ro.disable_host_launch = extra->disable_host_launch;
  PW_RETURN_IF_ERROR(pw_runtime_create(&ro, &f->runtime));
  f->slice_count = slices;
  pw_status_t status = pw_client_create(f->runtime, NULL, &f->client);
  if (status != NULL) {
    pw_runtime_destroy(f->runtime);
    f->runtime = NULL;
  }
  return status;
}

void pw_fixture_deinit(pw_fixture_t* f) {
  pw_client_destroy(f->client);
  pw_runtime_destroy(f->runtime);
  memset(f, 0, sizeof(*f));
}

pw_status_t pw_fixture_vslice(pw_fixture_t* f, const char* mesh_text, pw_vslice_t* out) {
  pw_mesh_shape_t mesh;
  PW_RETURN_IF_ERROR(pw_mesh_shape_parse(mesh_text, &mesh));
  return pw_vslice_create(f->client, &mesh, PW_VSLICE_DEFAULT, out);
}

pw_status_t pw_fixture_compile(pw_fixture_t* f, pw_vslice_t vs, const char* program,
                               pw_executable_t* out) {
  return pw_executable_compile(f->client, vs, program, strlen(program), NULL, out);
}

pw_array_spec_t pw_fixture_spec_f32(uint32_t rank, const int64_t* dims,
                                    pw_sharding_t sharding) {
  pw_array_spec_t spec;
  memset(&spec, 0, sizeof(spec));
  spec.dtype = PW_DTYPE_F32;
  spec.shape = pw_shape_make(rank, dims);
  spec.sharding = sharding;
  return spec;
}

pw_status_t pw_fixture_f32(pw_fixture_t* f, pw_vslice_t vs, uint32_t rank,
                           const int64_t* dims, pw_sharding_t sharding,
                           const float* data, pw_buffer_t* out) {
  pw_array_spec_t spec = pw_fixture_spec_f32(rank, dims, sharding);
  size_t bytes = (size_t)pw_shape_element_count(&spec.shape) * sizeof(float);
  return pw_buffer_from_host(f->client, vs, &spec, data, bytes, out);
}

pw_status_t pw_fixture_wait(pw_event_t* event) {
  pw_status_t status = pw_event_wait(event, pw_deadline_from_timeout(5000000000LL));
  pw_event_release(event);
  return status;
}
