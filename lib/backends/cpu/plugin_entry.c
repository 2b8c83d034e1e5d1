/* The CPU backend as a plugin library (libpathways_cpu.so, pathways/plugin.h):
 * its options string, parsed with the shared pw_plugin_args_* helpers,
 * becomes pw_cpu_backend_options_t. Built as its own MODULE library over
 * libpathways (cmake/PathwaysPlugins.cmake), never into libpathways. */
#include "pathways/backends/cpu.h"
#include "pathways/plugin.h"
#include "pathways/version.h"

#define PW_CPU_PLUGIN_ARGS_HELP                                                         \
  "devices=N (1-4096, default 8), workers=N (pool threads, 1-256, default 2), "         \
  "memory_mib=N (per device, default 1024), host=N (reported in device_info, "          \
  "default 0), stream_depth=N (0: pool mode, the default; N > 0: streams mode, each "  \
  "device queueing N launches), block_cache_mib=N (freed device blocks kept for reuse; "  \
  "0: off; default one device's memory)"

static const char* const pw_cpu_plugin_keys[] = {"devices", "workers", "memory_mib", "host",
                                                 "stream_depth", "block_cache_mib", NULL};

static pw_status_t pw_cpu_plugin_create(const char* args, pw_backend_t* out_backend) {
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  PW_RETURN_IF_ERROR(pw_plugin_args_check(args, pw_cpu_plugin_keys));
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
  /* Absent: the default (0); 0 given: off. */
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "block_cache_mib", UINT64_MAX, 1ull << 30, &v));
  if (v != UINT64_MAX) o.block_cache_bytes = v == 0 ? PW_CPU_BLOCK_CACHE_OFF : v << 20;
  return pw_cpu_backend_create(&o, out_backend);
}

static const pw_plugin_factory_t pw_cpu_plugin_factory = {
    .struct_size = sizeof(pw_plugin_factory_t),
    .abi_version = PW_PLUGIN_ABI_VERSION,
    .kind = PW_PLUGIN_KIND_BACKEND,
    .name = PW_CPU_BACKEND_NAME,
    .version = PW_VERSION_STRING,
    .description = "the bundled CPU backend: host threads, host memory (pathways/backends/cpu.h)",
    .args_help = PW_CPU_PLUGIN_ARGS_HELP,
    .create_backend = pw_cpu_plugin_create,
};

PW_PLUGIN_EXPORT const pw_plugin_factory_t* pw_plugin_entry(uint32_t loader_abi);

const pw_plugin_factory_t* pw_plugin_entry(uint32_t loader_abi) {
  (void)loader_abi;
  return &pw_cpu_plugin_factory;
}
