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

/* The keys and ranges of lib/backends/cpu/plugin_entry.c. */
static const char* const pw_cts_cpu_keys[] = {"devices", "workers", "memory_mib", "host",
                                              "stream_depth", NULL};

static pw_status_t pw_cts_cpu_create(const char* args, pw_allocator_t allocator,
                                     pw_backend_t* out_backend) {
  memset(out_backend, 0, sizeof(*out_backend));
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  PW_RETURN_IF_ERROR(pw_plugin_args_check(args, pw_cts_cpu_keys));
  uint64_t v = 0;
  PW_RETURN_IF_ERROR(pw_plugin_args_range(args, "devices", o.device_count, 1,
                                          PW_CPU_MAX_DEVICES, &v));
  o.device_count = (uint32_t)v;
  PW_RETURN_IF_ERROR(pw_plugin_args_range(args, "workers", o.worker_count, 1,
                                          PW_CPU_MAX_WORKERS, &v));
  o.worker_count = (uint32_t)v;
  PW_RETURN_IF_ERROR(
      pw_plugin_args_range(args, "memory_mib", o.device_memory_bytes >> 20, 1, 1ull << 30, &v));
  o.device_memory_bytes = v << 20;
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "host", o.host, UINT32_MAX, &v));
  o.host = (uint32_t)v;
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "stream_depth", o.stream_depth, UINT32_MAX, &v));
  o.stream_depth = (uint32_t)v;
  o.allocator = allocator;
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

/* The keys and ranges of lib/backends/sim/plugin_entry.c. */
static const char* const pw_cts_sim_keys[] = {
    "slices",          "devices_per_slice",    "devices_per_host",      "memory_mib",
    "mode",            "memory",               "queue_depth",           "blocking_collectives",
    "dispatch_latency_ns", "launch_overhead_ns", "ici_latency_ns",      "dcn_latency_ns",
    "seed",            "random_chip_failures", "random_slice_failures", "failure_window_ns",
    NULL};
static const char* const pw_cts_sim_modes[] = {"inline", "threaded", "manual", NULL};
static const char* const pw_cts_sim_memories[] = {"host", "virtual", NULL};

static pw_status_t pw_cts_sim_u32(const char* args, const char* key, uint64_t min, uint64_t max,
                                  uint32_t* inout) {
  uint64_t v = 0;
  PW_RETURN_IF_ERROR(pw_plugin_args_range(args, key, *inout, min, max, &v));
  *inout = (uint32_t)v;
  return NULL;
}

static pw_status_t pw_cts_sim_times(const char* args, pw_sim_backend_options_t* o) {
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "dispatch_latency_ns", o->dispatch_latency_ns,
                                        UINT64_MAX, &o->dispatch_latency_ns));
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "launch_overhead_ns", o->launch_overhead_ns,
                                        UINT64_MAX, &o->launch_overhead_ns));
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "ici_latency_ns", o->ici_latency_ns, UINT64_MAX,
                                        &o->ici_latency_ns));
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "dcn_latency_ns", o->dcn_latency_ns, UINT64_MAX,
                                        &o->dcn_latency_ns));
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "seed", o->seed, UINT64_MAX, &o->seed));
  PW_RETURN_IF_ERROR(
      pw_cts_sim_u32(args, "random_chip_failures", 0, UINT32_MAX, &o->random_chip_failures));
  PW_RETURN_IF_ERROR(
      pw_cts_sim_u32(args, "random_slice_failures", 0, UINT32_MAX, &o->random_slice_failures));
  return pw_plugin_args_range(args, "failure_window_ns", o->failure_window_ns, 1, UINT64_MAX,
                              &o->failure_window_ns);
}

static pw_status_t pw_cts_sim_create(const char* args, pw_allocator_t allocator,
                                     pw_backend_t* out_backend) {
  memset(out_backend, 0, sizeof(*out_backend));
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  PW_RETURN_IF_ERROR(pw_plugin_args_check(args, pw_cts_sim_keys));
  PW_RETURN_IF_ERROR(pw_cts_sim_u32(args, "slices", 1, PW_SIM_MAX_DEVICES, &o.slice_count));
  PW_RETURN_IF_ERROR(
      pw_cts_sim_u32(args, "devices_per_slice", 1, PW_SIM_MAX_DEVICES, &o.devices_per_slice));
  PW_RETURN_IF_ERROR(
      pw_cts_sim_u32(args, "devices_per_host", 0, PW_SIM_MAX_DEVICES, &o.devices_per_host));
  uint64_t v = 0;
  PW_RETURN_IF_ERROR(
      pw_plugin_args_range(args, "memory_mib", o.device_memory_bytes >> 20, 1, 1ull << 40, &v));
  o.device_memory_bytes = v << 20;
  size_t choice = 0;
  PW_RETURN_IF_ERROR(
      pw_plugin_args_choice(args, "mode", pw_cts_sim_modes, (size_t)o.mode, &choice));
  o.mode = (pw_sim_mode_t)choice;
  PW_RETURN_IF_ERROR(
      pw_plugin_args_choice(args, "memory", pw_cts_sim_memories, (size_t)o.memory, &choice));
  o.memory = (pw_sim_memory_t)choice;
  PW_RETURN_IF_ERROR(
      pw_cts_sim_u32(args, "queue_depth", 0, PW_BACKEND_MAX_QUEUE_DEPTH, &o.queue_depth));
  PW_RETURN_IF_ERROR(pw_plugin_args_bool(args, "blocking_collectives", o.blocking_collectives,
                                         &o.blocking_collectives));
  PW_RETURN_IF_ERROR(pw_cts_sim_times(args, &o));
  o.allocator = allocator;
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

/* The keys of lib/transports/inproc/plugin_entry.c. */
static const char* const pw_cts_inproc_keys[] = {"workers", "staging_bytes", NULL};

static pw_status_t pw_cts_inproc_create(const char* args, pw_allocator_t allocator,
                                        pw_transport_t* out_transport) {
  memset(out_transport, 0, sizeof(*out_transport));
  pw_inproc_transport_options_t o;
  pw_inproc_transport_options_init(&o);
  PW_RETURN_IF_ERROR(pw_plugin_args_check(args, pw_cts_inproc_keys));
  uint64_t v = 0;
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "workers", o.worker_count, PW_INPROC_MAX_WORKERS,
                                        &v));
  o.worker_count = (uint32_t)v;
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "staging_bytes", o.staging_bytes, SIZE_MAX, &v));
  o.staging_bytes = (size_t)v;
  o.allocator = allocator;
  return pw_inproc_transport_create(&o, out_transport);
}

static const pw_cts_hooks_t pw_cts_inproc_hooks = {
    .struct_size = sizeof(pw_cts_hooks_t),
    .create_transport = pw_cts_inproc_create,
};

/* --- dir --- */

/* The keys of lib/stores/dir/plugin_entry.c. */
static const char* const pw_cts_dir_keys[] = {"path", "max_bytes", "stale_temp_seconds", NULL};

static pw_status_t pw_cts_dir_create(const char* args, pw_allocator_t allocator,
                                     pw_store_t* out_store) {
  memset(out_store, 0, sizeof(*out_store));
  pw_dir_store_options_t o;
  pw_dir_store_options_init(&o);
  PW_RETURN_IF_ERROR(pw_plugin_args_check(args, pw_cts_dir_keys));
  char path[4096];
  PW_RETURN_IF_ERROR(pw_plugin_args_str(args, "path", NULL, path, sizeof(path)));
  if (path[0] == '\0') {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "option path=DIR (the store's directory) is required");
  }
  o.path = path;
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "max_bytes", o.max_bytes, UINT64_MAX,
                                        &o.max_bytes));
  uint64_t v = 0;
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "stale_temp_seconds", o.stale_temp_seconds,
                                        UINT32_MAX, &v));
  o.stale_temp_seconds = (uint32_t)v;
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
  pw_status_t status = hooks->create_backend(use_sim ? "slices=1,devices_per_slice=8,memory_mib=64"
                                                     : "devices=8,memory_mib=64",
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
