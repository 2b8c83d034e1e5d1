#include "sim_test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pw_sim_test_expect_ok(pw_status_t status, const char* what) {
  if (status == NULL) return;
  char text[512];
  pw_status_format(status, text, sizeof(text));
  pw_status_free(status);
  pw_sim_test_fail(what, text);
}

void pw_sim_test_done(void* user, pw_status_t status) {
  pw_sim_done_t* d = user;
  int expected = -1;
  if (atomic_compare_exchange_strong(&d->code, &expected, (int)pw_status_code(status))) {
    snprintf(d->message, sizeof(d->message), "%s", pw_status_message(status));
  }
  pw_status_free(status);
  atomic_fetch_add(&d->calls, 1);
}

void pw_sim_test_describe(pw_sim_launch_t* l, pw_backend_executable_t executable,
                          uint32_t device, uint32_t mesh_index, const uint32_t* group,
                          uint32_t group_size, uint64_t gang_id,
                          const pw_backend_memory_t* inputs, uint32_t input_count,
                          const pw_backend_memory_t* outputs, uint32_t output_count) {
  memset(l, 0, sizeof(*l));
  atomic_init(&l->done.calls, 0);
  atomic_init(&l->done.code, -1);
  memcpy(l->group, group, group_size * sizeof(uint32_t));
  if (input_count) memcpy(l->inputs, inputs, input_count * sizeof(*inputs));
  if (output_count) memcpy(l->outputs, outputs, output_count * sizeof(*outputs));
  pw_backend_launch_t* d = &l->launch;
  d->struct_size = sizeof(*d);
  d->executable = executable;
  d->device = device;
  d->mesh_index = mesh_index;
  d->group_devices = l->group;
  d->group_size = group_size;
  d->gang_id = gang_id;
  d->inputs = l->inputs;
  d->input_count = input_count;
  d->outputs = l->outputs;
  d->output_count = output_count;
  d->done = pw_sim_test_done;
  d->done_user = &l->done;
}

pw_backend_executable_t pw_sim_test_load(pw_backend_t backend, const char* text,
                                         uint32_t devices) {
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &devices);
  void* bytes = NULL;
  size_t size = 0;
  PW_SIM_OK(backend.vtable->compile(backend.self, text, strlen(text), &mesh, NULL,
                                    pw_allocator_system(), &bytes, &size));
  pw_backend_executable_t e = NULL;
  pw_executable_signature_t signature = {.struct_size = sizeof(pw_executable_signature_t)};
  pw_status_t status = backend.vtable->load(backend.self, bytes, size, &e, &signature);
  pw_allocator_free(pw_allocator_system(), bytes, size);
  PW_SIM_OK(status);
  return e;
}

void pw_sim_trace_init(pw_sim_trace_t* trace) {
  memset(trace, 0, sizeof(*trace));
  pthread_mutex_init(&trace->mutex, NULL);
}

void pw_sim_trace_fn(void* user, const pw_sim_event_t* event) {
  pw_sim_trace_t* t = user;
  pthread_mutex_lock(&t->mutex);
  if (t->count < sizeof(t->events) / sizeof(t->events[0])) {
    t->events[t->count] = *event;
    t->events[t->count].op = NULL; /* valid only during the call */
    t->count++;
  }
  t->total++;
  pthread_mutex_unlock(&t->mutex);
}

const pw_sim_event_t* pw_sim_trace_find(pw_sim_trace_t* trace, uint32_t device, size_t index) {
  const pw_sim_event_t* found = NULL;
  pthread_mutex_lock(&trace->mutex);
  for (size_t i = 0; i < trace->count && found == NULL; ++i) {
    if (trace->events[i].device == device && index-- == 0) found = &trace->events[i];
  }
  pthread_mutex_unlock(&trace->mutex);
  return found;
}

pw_status_t pw_sim_fleet_init(pw_sim_fleet_t* f, const pw_sim_backend_options_t* options,
                              pw_allocator_t allocator) {
  memset(f, 0, sizeof(*f));
  pw_sim_backend_options_t o = *options;
  o.allocator = allocator;
  f->slices = o.slice_count;
  f->per_slice = o.devices_per_slice;
  PW_RETURN_IF_ERROR(pw_sim_backend_create(&o, &f->backend));
  pw_slice_desc_t* descs = calloc(f->slices, sizeof(*descs));
  f->vslices = calloc(f->slices, sizeof(*f->vslices));
  if (descs == NULL || f->vslices == NULL) {
    free(descs);
    free(f->vslices);
    f->vslices = NULL;
    f->backend.vtable->destroy(f->backend.self);
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "fleet: out of memory");
  }
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &f->per_slice);
  for (uint32_t s = 0; s < f->slices; ++s) {
    descs[s].mesh = mesh;
    descs[s].backend = 0;
    descs[s].first_device = s * f->per_slice;
    descs[s].host = s;
  }
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.allocator = allocator;
  ro.backends = &f->backend;
  ro.backend_count = 1;
  ro.slices = descs;
  ro.slice_count = f->slices;
  pw_status_t status = pw_runtime_create(&ro, &f->runtime);
  free(descs);
  if (status == NULL) status = pw_client_create(f->runtime, NULL, &f->client);
  for (uint32_t s = 0; status == NULL && s < f->slices; ++s) {
    status = pw_vslice_create(f->client, &mesh, PW_VSLICE_DEFAULT, &f->vslices[s]);
    uint32_t bound = UINT32_MAX;
    pw_mesh_shape_t vmesh;
    if (status == NULL) status = pw_vslice_binding(f->client, f->vslices[s], &bound, &vmesh);
    if (status == NULL && bound != s) {
      status = pw_status_make(PW_STATUS_INTERNAL, "fleet: vslice %u bound to slice %u", s, bound);
    }
  }
  if (status != NULL) pw_sim_fleet_deinit(f);
  return status;
}

void pw_sim_fleet_deinit(pw_sim_fleet_t* f) {
  pw_client_destroy(f->client);
  pw_runtime_destroy(f->runtime);
  free(f->vslices);
  memset(f, 0, sizeof(*f));
}

pw_status_t pw_sim_fleet_step_graph(pw_sim_fleet_t* f, uint32_t slice,
                                    pw_executable_t executable, pw_graph_t* out_graph) {
  PW_RETURN_IF_ERROR(pw_graph_create(f->client, out_graph));
  pw_status_t status = pw_graph_add_compute(f->client, *out_graph, "step", executable,
                                            f->vslices[slice], NULL, 0, NULL);
  if (status == NULL) status = pw_graph_finalize(f->client, *out_graph);
  if (status != NULL) pw_status_ignore(pw_graph_release(f->client, *out_graph));
  return status;
}
