#define _DEFAULT_SOURCE
#include "snapshot/snap_fixture.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t snap_gate_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t snap_gate_cond = PTHREAD_COND_INITIALIZER;
static bool snap_gate_closed = false;

void snap_gate_close(void) {
  pthread_mutex_lock(&snap_gate_mutex);
  snap_gate_closed = true;
  pthread_mutex_unlock(&snap_gate_mutex);
}

void snap_gate_open(void) {
  pthread_mutex_lock(&snap_gate_mutex);
  snap_gate_closed = false;
  pthread_cond_broadcast(&snap_gate_cond);
  pthread_mutex_unlock(&snap_gate_mutex);
}

static pw_status_t snap_gate_run(const pw_cpu_kernel_call_t* call) {
  pthread_mutex_lock(&snap_gate_mutex);
  while (snap_gate_closed) pthread_cond_wait(&snap_gate_cond, &snap_gate_mutex);
  pthread_mutex_unlock(&snap_gate_mutex);
  memcpy(call->outputs[0].data, call->inputs[0].data, call->outputs[0].size);
  return NULL;
}

static pw_status_t snap_boom_run(const pw_cpu_kernel_call_t* call) {
  (void)call;
  return pw_status_make(PW_STATUS_INTERNAL, "boom: the producer failed");
}

static pw_status_t snap_register(pw_backend_t backend, const char* name,
                                 pw_cpu_kernel_run_fn_t run) {
  static const pw_cpu_param_spec_t any = {"x", PW_CPU_DTYPES_ANY, -1};
  pw_cpu_kernel_def_t def;
  memset(&def, 0, sizeof(def));
  def.struct_size = sizeof(def);
  def.name = name;
  def.input_count = 1;
  def.inputs = &any;
  def.output_count = 1;
  def.outputs = &any;
  def.flags = PW_CPU_KERNEL_SAME_DTYPE;
  def.run = run;
  return pw_cpu_backend_register_kernel(backend, &def);
}

pw_status_t snap_world_init(snap_world_t* w, uint32_t slices, uint32_t devices) {
  memset(w, 0, sizeof(*w));
  w->slices = slices;
  w->devices = devices;
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = slices * devices;
  o.worker_count = 4;
  o.device_memory_bytes = 64u << 20;
  PW_RETURN_IF_ERROR(pw_cpu_backend_create(&o, &w->backend));
  pw_status_t status = snap_register(w->backend, "gate", snap_gate_run);
  if (status == NULL) status = snap_register(w->backend, "boom", snap_boom_run);
  if (status != NULL) {
    w->backend.vtable->destroy(w->backend.self);
    return status;
  }
  pw_slice_desc_t descs[8];
  for (uint32_t i = 0; i < slices && i < 8; ++i) {
    descs[i] = (pw_slice_desc_t){NULL, PW_MESH_SHAPE_INIT(1, devices), 0, i * devices, i};
  }
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &w->backend;
  ro.backend_count = 1;
  ro.slices = descs;
  ro.slice_count = slices;
  PW_RETURN_IF_ERROR(pw_runtime_create(&ro, &w->rt));
  status = pw_client_create(w->rt, NULL, &w->client);
  if (status != NULL) {
    pw_status_ignore(pw_runtime_destroy(w->rt));
    w->rt = NULL;
  }
  return status;
}

void snap_world_deinit(snap_world_t* w) {
  if (w->client != NULL) pw_status_ignore(pw_client_destroy(w->client));
  if (w->rt != NULL) pw_status_ignore(pw_runtime_destroy(w->rt));
  memset(w, 0, sizeof(*w));
}

pw_status_t snap_vslice(snap_world_t* w, uint32_t first, uint32_t count, pw_vslice_t* out) {
  uint32_t slices[8];
  for (uint32_t i = 0; i < count && i < 8; ++i) slices[i] = first + i;
  pw_vslice_span_t span;
  memset(&span, 0, sizeof(span));
  span.struct_size = sizeof(span);
  span.mesh = (pw_mesh_shape_t)PW_MESH_SHAPE_INIT(1, count * w->devices);
  span.slice_count = count;
  span.slices = slices;
  return pw_vslice_create_spanning(w->client, &span, out);
}

pw_status_t snap_produce(snap_world_t* w, pw_vslice_t vs, const pw_array_spec_t* spec,
                         const char* kernel, pw_buffer_t input, pw_buffer_t* out) {
  pw_cpu_program_t program;
  PW_RETURN_IF_ERROR(pw_cpu_program_init(&program, kernel));
  PW_RETURN_IF_ERROR(pw_cpu_program_add_input(&program, spec->dtype, &spec->shape, spec->sharding));
  PW_RETURN_IF_ERROR(pw_cpu_program_add_output(&program, spec->dtype, &spec->shape, spec->sharding));
  char text[PW_CPU_PROGRAM_TEXT_MAX];
  size_t length = 0;
  PW_RETURN_IF_ERROR(pw_cpu_program_format(&program, text, sizeof(text), &length));
  pw_executable_t exe;
  PW_RETURN_IF_ERROR(pw_executable_compile(w->client, vs, text, length, NULL, &exe));
  pw_graph_t g;
  pw_status_t status = pw_graph_create(w->client, &g);
  uint32_t p = 0, c = 0;
  if (status == NULL) status = pw_graph_add_parameter(w->client, g, vs, spec, &p);
  pw_value_t in = pw_value(p, 0);
  if (status == NULL) status = pw_graph_add_compute(w->client, g, kernel, exe, vs, &in, 1, &c);
  if (status == NULL) status = pw_graph_add_output(w->client, g, pw_value(c, 0));
  pw_event_t* done = NULL;
  if (status == NULL) status = pw_graph_submit(w->client, g, &input, 1, NULL, out, 1, &done);
  pw_event_release(done);
  pw_status_ignore(pw_graph_release(w->client, g));
  pw_status_ignore(pw_executable_release(w->client, exe));
  return status;
}

void snap_fill(void* data, size_t size, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  unsigned char* p = data;
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = (unsigned char)(x >> 24);
  }
}

static void snap_log_fn(pw_log_level_t level, const char* subsystem, const char* message,
                        void* user) {
  (void)level;
  snap_log_t* log = user;
  pthread_mutex_lock(&log->mutex);
  int n = snprintf(log->text + log->size, sizeof(log->text) - log->size, "%s: %s\n", subsystem,
                   message);
  if (n > 0) {
    log->size += (size_t)n;
    if (log->size >= sizeof(log->text)) log->size = sizeof(log->text) - 1;
  }
  pthread_mutex_unlock(&log->mutex);
}

void snap_log_init(snap_log_t* log) {
  memset(log, 0, sizeof(*log));
  pthread_mutex_init(&log->mutex, NULL);
}

pw_logger_t snap_log_logger(snap_log_t* log) {
  return (pw_logger_t){snap_log_fn, log, PW_LOG_DEBUG};
}

bool snap_log_has(snap_log_t* log, const char* needle) {
  pthread_mutex_lock(&log->mutex);
  bool has = strstr(log->text, needle) != NULL;
  pthread_mutex_unlock(&log->mutex);
  return has;
}

void snap_tempdir(char* path) {
  const char* base = getenv("TMPDIR");
  snprintf(path, 256, "%s/pw-snap-XXXXXX", base && base[0] ? base : "/tmp");
  if (mkdtemp(path) == NULL) path[0] = '\0';
}

void snap_rmdir(const char* path) {
  DIR* d = opendir(path);
  if (d == NULL) return;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char file[512];
    snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
    unlink(file);
  }
  closedir(d);
  rmdir(path);
}

pw_status_t snap_dir_store(const char* path, pw_store_t* out) {
  pw_dir_store_options_t o;
  pw_dir_store_options_init(&o);
  o.path = path;
  o.logger = (pw_logger_t){NULL, NULL, PW_LOG_OFF};
  return pw_dir_store_create(&o, out);
}
