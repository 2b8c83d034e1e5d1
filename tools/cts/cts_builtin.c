/* pathways-cts: the hooks of the bundled modules (cpu, sim, inproc, dir),
 * which pathways-cts supplies itself: the program texts in the cpu and
 * sim languages, their device-failure calls, and creates that take an
 * allocator, reading the same options strings as the modules (the keys
 * docs/plugins.md lists under "Bundled plugins"). Everything here goes
 * through the installed public headers. */
#include <stdio.h>
#include <string.h>

#include "cts_backend.h"
#include "pathways/backends/cpu.h"
#include "pathways/backends/sim.h"
#include "pathways/stores/dir.h"
#include "pathways/transports/inproc.h"

/* --- cpu --- */

static size_t pw_cts_cpu_copy(const pw_mesh_shape_t* mesh, uint32_t elements, char* buffer,
                              size_t capacity) {
  unsigned total = pw_mesh_shape_device_count(mesh) * elements;
  int n = snprintf(buffer, capacity,
                   "kernel copy\ninput f32[%u] split(0,all)\noutput f32[%u] split(0,all)\n",
                   total, total);
  return n < 0 ? 0 : (size_t)n;
}

static size_t pw_cts_cpu_all_reduce(const pw_mesh_shape_t* mesh, uint32_t elements,
                                    char* buffer, size_t capacity) {
  int n = snprintf(buffer, capacity,
                   "kernel all_reduce_sum\ninput f32[%u,%u] split(0,all)\n"
                   "output f32[%u] replicated\n",
                   pw_mesh_shape_device_count(mesh), elements, elements);
  return n < 0 ? 0 : (size_t)n;
}

static pw_status_t pw_cts_cpu_fail_device(pw_backend_t* backend, uint32_t device) {
  return pw_cpu_backend_set_health(*backend, device, PW_DEVICE_FAILED);
}

static const char* const pw_cts_cpu_keys[] = {"devices", "workers", "memory", "stream_depth",
                                              "host", NULL};

static pw_status_t pw_cts_cpu_create(const char* args, pw_allocator_t allocator,
                                     pw_backend_t* out_backend) {
  memset(out_backend, 0, sizeof(*out_backend));
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  uint64_t devices, workers, memory, depth, host;
  PW_RETURN_IF_ERROR(pw_plugin_args_check(args, pw_cts_cpu_keys));
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "devices", 0, 1024, &devices));
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "workers", 0, 256, &workers));
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "memory", 0, UINT64_MAX, &memory));
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "stream_depth", 0, 1u << 20, &depth));
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "host", 0, UINT32_MAX, &host));
  o.allocator = allocator;
  o.device_count = (uint32_t)devices;
  o.worker_count = (uint32_t)workers;
  o.device_memory_bytes = memory;
  o.stream_depth = (uint32_t)depth;
  o.host = (uint32_t)host;
  return pw_cpu_backend_create(&o, out_backend);
}

/* In the cpu backend's syntax; the suite compiles them on a row of up to
 * 8 devices. */
static const char* const pw_cts_cpu_bad_programs[] = {
    "kernel copy\ninput f128[8] replicated\noutput f128[8] replicated\n",
    "kernel copy\ninput f32[8] split(0,9)\noutput f32[8] split(0,9)\n",
    "kernel copy\ninput f32[7] split(0,all)\noutput f32[7] split(0,all)\n",
    "kernel copy\ninput f32[8] replicated\noutput f64[8] replicated\n",
    "kernel matmul\ninput f32[4] replicated\ninput f32[4] replicated\noutput f32[4] replicated\n",
    "kernel fill\noutput f32[8] replicated\n",
    "kernel copy\ninput f32[8] replicated\noutput f32[8] replicated\nattr bogus 1\n",
    "input f32[8] replicated\nkernel copy\n",
    NULL,
};

static const pw_cts_hooks_t pw_cts_cpu_hooks = {
    .struct_size = sizeof(pw_cts_hooks_t),
    .copy_program = pw_cts_cpu_copy,
    .all_reduce_program = pw_cts_cpu_all_reduce,
    .fail_device = pw_cts_cpu_fail_device,
    .bad_programs = pw_cts_cpu_bad_programs,
    .create_backend = pw_cts_cpu_create,
};

/* --- sim --- */

static size_t pw_cts_sim_copy(const pw_mesh_shape_t* mesh, uint32_t elements, char* buffer,
                              size_t capacity) {
  unsigned total = pw_mesh_shape_device_count(mesh) * elements;
  int n = snprintf(buffer, capacity,
                   "# CTS copy\nop cts_copy\nkind copy\ntime 3us\n"
                   "input f32[%u] split(0,all)\noutput f32[%u] split(0,all)\n",
                   total, total);
  return n < 0 ? 0 : (size_t)n;
}

static size_t pw_cts_sim_all_reduce(const pw_mesh_shape_t* mesh, uint32_t elements,
                                    char* buffer, size_t capacity) {
  int n = snprintf(buffer, capacity,
                   "op cts_all_reduce\nkind all_reduce_sum\nflops 1e6\n"
                   "input f32[%u,%u] split(0,all)\noutput f32[%u] replicated\n",
                   pw_mesh_shape_device_count(mesh), elements, elements);
  return n < 0 ? 0 : (size_t)n;
}

static pw_status_t pw_cts_sim_fail_device(pw_backend_t* backend, uint32_t device) {
  return pw_sim_backend_fail(*backend, PW_SIM_FAIL_CHIP, device, PW_SIM_TIME_NOW);
}

static const char* const pw_cts_sim_keys[] = {"slices", "devices_per_slice", "mode", "memory",
                                              "device_memory", "queue_depth", NULL};

static pw_status_t pw_cts_sim_create(const char* args, pw_allocator_t allocator,
                                     pw_backend_t* out_backend) {
  memset(out_backend, 0, sizeof(*out_backend));
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  uint64_t slices, per_slice, memory_bytes, depth;
  char mode[16], memory[16];
  PW_RETURN_IF_ERROR(pw_plugin_args_check(args, pw_cts_sim_keys));
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "slices", 0, 4096, &slices));
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "devices_per_slice", 0, 4096, &per_slice));
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "device_memory", 0, UINT64_MAX, &memory_bytes));
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "queue_depth", 0, 1u << 20, &depth));
  PW_RETURN_IF_ERROR(pw_plugin_args_str(args, "mode", "inline", mode, sizeof(mode)));
  PW_RETURN_IF_ERROR(pw_plugin_args_str(args, "memory", "host", memory, sizeof(memory)));
  if (strcmp(mode, "inline") == 0) {
    o.mode = PW_SIM_MODE_INLINE;
  } else if (strcmp(mode, "threaded") == 0) {
    o.mode = PW_SIM_MODE_THREADED;
  } else if (strcmp(mode, "manual") == 0) {
    o.mode = PW_SIM_MODE_MANUAL;
  } else {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim: mode '%s' is not inline, threaded or manual", mode);
  }
  if (strcmp(memory, "host") == 0) {
    o.memory = PW_SIM_MEMORY_HOST;
  } else if (strcmp(memory, "virtual") == 0) {
    o.memory = PW_SIM_MEMORY_VIRTUAL;
  } else {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "sim: memory '%s' is not host or virtual",
                          memory);
  }
  o.allocator = allocator;
  o.slice_count = (uint32_t)slices;
  o.devices_per_slice = (uint32_t)per_slice;
  o.device_memory_bytes = memory_bytes;
  o.queue_depth = (uint32_t)depth;
  return pw_sim_backend_create(&o, out_backend);
}

static const char* const pw_cts_sim_bad_programs[] = {
    "op x\nkind copy\ninput f128[8] replicated\noutput f128[8] replicated\n",
    "op x\nkind copy\ninput f32[8] split(0,9)\noutput f32[8] split(0,9)\n",
    "op x\nkind copy\ninput f32[7] split(0,all)\noutput f32[7] split(0,all)\n",
    "op x\nkind copy\ninput f32[8] replicated\noutput f64[8] replicated\n",
    "op x\nkind all_reduce_sum\ninput bool[8] replicated\noutput bool[8] replicated\n",
    "op x\nkind copy\ninput f32[8] replicated\noutput f32[16] replicated\n",
    "op x\nkind reduce\n",
    "op x\ntime 5 parsecs\n",
    "op x\ntime 5h\n",
    "op x\ntime 1e30s\n",
    "op x\nflops -1\n",
    "op x\nflops 1e31\n",
    "op x\ntime 1us\ntime 2us\n",
    "op 9lives\n",
    "op x y\n",
    "op x\nop y\n",
    "op x\nbogus 1\n",
    "op x\ninput f32[8]\n",
    "op x\ninput f32[8,] replicated\n",
    "op x\ninput f32[8] split(0)\n",
    "kind copy\nop x\n",
    NULL,
};

static const pw_cts_hooks_t pw_cts_sim_hooks = {
    .struct_size = sizeof(pw_cts_hooks_t),
    .copy_program = pw_cts_sim_copy,
    .all_reduce_program = pw_cts_sim_all_reduce,
    .fail_device = pw_cts_sim_fail_device,
    .bad_programs = pw_cts_sim_bad_programs,
    .create_backend = pw_cts_sim_create,
};

/* --- inproc --- */

static const char* const pw_cts_inproc_keys[] = {"workers", "staging_bytes", NULL};

static pw_status_t pw_cts_inproc_create(const char* args, pw_allocator_t allocator,
                                        pw_transport_t* out_transport) {
  memset(out_transport, 0, sizeof(*out_transport));
  pw_inproc_transport_options_t o;
  pw_inproc_transport_options_init(&o);
  uint64_t workers, staging;
  PW_RETURN_IF_ERROR(pw_plugin_args_check(args, pw_cts_inproc_keys));
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "workers", 0, UINT32_MAX, &workers));
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "staging_bytes", 0, SIZE_MAX, &staging));
  o.allocator = allocator;
  o.worker_count = (uint32_t)workers;
  o.staging_bytes = (size_t)staging;
  return pw_inproc_transport_create(&o, out_transport);
}

static const pw_cts_hooks_t pw_cts_inproc_hooks = {
    .struct_size = sizeof(pw_cts_hooks_t),
    .create_transport = pw_cts_inproc_create,
};

/* --- dir --- */

static const char* const pw_cts_dir_keys[] = {"path", "max_bytes", NULL};

static pw_status_t pw_cts_dir_create(const char* args, pw_allocator_t allocator,
                                     pw_store_t* out_store) {
  memset(out_store, 0, sizeof(*out_store));
  pw_dir_store_options_t o;
  pw_dir_store_options_init(&o);
  char path[4096];
  uint64_t max_bytes;
  PW_RETURN_IF_ERROR(pw_plugin_args_check(args, pw_cts_dir_keys));
  PW_RETURN_IF_ERROR(pw_plugin_args_str(args, "path", NULL, path, sizeof(path)));
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "max_bytes", 0, UINT64_MAX, &max_bytes));
  o.path = path;
  o.max_bytes = max_bytes;
  o.allocator = allocator;
  return pw_dir_store_create(&o, out_store);
}

static const pw_cts_hooks_t pw_cts_dir_hooks = {
    .struct_size = sizeof(pw_cts_hooks_t),
    .create_store = pw_cts_dir_create,
};

const pw_cts_hooks_t* pw_cts_builtin_hooks(const pw_plugin_factory_t* factory) {
  static const struct {
    pw_plugin_kind_t kind;
    const char* name;
    const pw_cts_hooks_t* hooks;
  } builtin[] = {
      {PW_PLUGIN_KIND_BACKEND, "cpu", &pw_cts_cpu_hooks},
      {PW_PLUGIN_KIND_BACKEND, "sim", &pw_cts_sim_hooks},
      {PW_PLUGIN_KIND_TRANSPORT, "inproc", &pw_cts_inproc_hooks},
      {PW_PLUGIN_KIND_STORE, "dir", &pw_cts_dir_hooks},
  };
  for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); ++i) {
    if (factory->kind == builtin[i].kind && factory->name != NULL &&
        strcmp(factory->name, builtin[i].name) == 0) {
      return builtin[i].hooks;
    }
  }
  return NULL;
}

/* --- Another backend's executable (load_rejects_foreign). --- */

const char* pw_cts_foreign_executable(const char* name, const pw_mesh_shape_t* mesh,
                                      void** out_bytes, size_t* out_size) {
  *out_bytes = NULL;
  *out_size = 0;
  bool use_sim = name != NULL && strcmp(name, "cpu") == 0;
  const pw_cts_hooks_t* hooks = use_sim ? &pw_cts_sim_hooks : &pw_cts_cpu_hooks;
  pw_backend_t other;
  /* Enough devices for any mesh the suite makes (at most 8). */
  pw_status_t status = hooks->create_backend(use_sim ? "slices=1,devices_per_slice=8"
                                                     : "devices=8",
                                             pw_allocator_system(), &other);
  if (status != NULL) {
    pw_status_free(status);
    return NULL;
  }
  char text[4096];
  size_t length = hooks->copy_program(mesh, 16, text, sizeof(text));
  status = other.vtable->compile(other.self, text, length, mesh, "", pw_allocator_system(),
                                 out_bytes, out_size);
  other.vtable->destroy(other.self);
  if (status != NULL) {
    pw_status_free(status);
    *out_bytes = NULL;
    *out_size = 0;
    return NULL;
  }
  return use_sim ? "sim" : "cpu";
}
