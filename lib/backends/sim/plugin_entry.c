/* The simulated backend as a plugin library (libpathways_sim.so,
 * pathways/plugin.h): its options string, parsed with the shared
 * pw_plugin_args_* helpers, becomes pw_sim_backend_options_t (the fleet,
 * the delivery mode, queue-ordered launch, the latencies and random
 * failures; the rates and an explicit failure schedule need the C API).
 * Built as its own MODULE library over libpathways. */
#include "pathways/backends/sim.h"
#include "pathways/plugin.h"
#include "pathways/version.h"

#define PW_SIM_PLUGIN_ARGS_HELP                                                            \
  "slices=N (default 1), devices_per_slice=N (default 8), devices_per_host=N (0: one "     \
  "host per slice), memory_mib=N (per chip, default 16384), mode=inline|threaded|manual "  \
  "(default inline), memory=host|virtual (default host), queue_depth=N (0-1024, default " \
  "0), blocking_collectives=BOOL, dispatch_latency_ns=N, launch_overhead_ns=N, "           \
  "ici_latency_ns=N (default 2000), dcn_latency_ns=N (default 10000), seed=N, "             \
  "random_chip_failures=N, random_slice_failures=N, failure_window_ns=N (default 1e9)"

static const char* const pw_sim_plugin_keys[] = {
    "slices",          "devices_per_slice",    "devices_per_host",      "memory_mib",
    "mode",            "memory",               "queue_depth",           "blocking_collectives",
    "dispatch_latency_ns", "launch_overhead_ns", "ici_latency_ns",      "dcn_latency_ns",
    "seed",            "random_chip_failures", "random_slice_failures", "failure_window_ns",
    NULL};

static const char* const pw_sim_plugin_modes[] = {"inline", "threaded", "manual", NULL};
static const char* const pw_sim_plugin_memories[] = {"host", "virtual", NULL};

/* A uint32_t option in [min, max]. */
static pw_status_t pw_sim_plugin_u32(const char* args, const char* key, uint64_t min,
                                     uint64_t max, uint32_t* inout) {
  uint64_t v = 0;
  PW_RETURN_IF_ERROR(pw_plugin_args_range(args, key, *inout, min, max, &v));
  *inout = (uint32_t)v;
  return NULL;
}

static pw_status_t pw_sim_plugin_times(const char* args, pw_sim_backend_options_t* o) {
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
      pw_sim_plugin_u32(args, "random_chip_failures", 0, UINT32_MAX, &o->random_chip_failures));
  PW_RETURN_IF_ERROR(
      pw_sim_plugin_u32(args, "random_slice_failures", 0, UINT32_MAX, &o->random_slice_failures));
  return pw_plugin_args_range(args, "failure_window_ns", o->failure_window_ns, 1, UINT64_MAX,
                              &o->failure_window_ns);
}

static pw_status_t pw_sim_plugin_create(const char* args, pw_backend_t* out_backend) {
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  PW_RETURN_IF_ERROR(pw_plugin_args_check(args, pw_sim_plugin_keys));
  PW_RETURN_IF_ERROR(pw_sim_plugin_u32(args, "slices", 1, PW_SIM_MAX_DEVICES, &o.slice_count));
  PW_RETURN_IF_ERROR(
      pw_sim_plugin_u32(args, "devices_per_slice", 1, PW_SIM_MAX_DEVICES, &o.devices_per_slice));
  PW_RETURN_IF_ERROR(
      pw_sim_plugin_u32(args, "devices_per_host", 0, PW_SIM_MAX_DEVICES, &o.devices_per_host));
  uint64_t v = 0;
  PW_RETURN_IF_ERROR(
      pw_plugin_args_range(args, "memory_mib", o.device_memory_bytes >> 20, 1, 1ull << 40, &v));
  o.device_memory_bytes = v << 20;
  size_t choice = 0;
  PW_RETURN_IF_ERROR(
      pw_plugin_args_choice(args, "mode", pw_sim_plugin_modes, (size_t)o.mode, &choice));
  o.mode = (pw_sim_mode_t)choice;
  PW_RETURN_IF_ERROR(
      pw_plugin_args_choice(args, "memory", pw_sim_plugin_memories, (size_t)o.memory, &choice));
  o.memory = (pw_sim_memory_t)choice;
  PW_RETURN_IF_ERROR(
      pw_sim_plugin_u32(args, "queue_depth", 0, PW_BACKEND_MAX_QUEUE_DEPTH, &o.queue_depth));
  PW_RETURN_IF_ERROR(pw_plugin_args_bool(args, "blocking_collectives", o.blocking_collectives,
                                         &o.blocking_collectives));
  PW_RETURN_IF_ERROR(pw_sim_plugin_times(args, &o));
  return pw_sim_backend_create(&o, out_backend);
}

static const pw_plugin_factory_t pw_sim_plugin_factory = {
    .struct_size = sizeof(pw_plugin_factory_t),
    .abi_version = PW_PLUGIN_ABI_VERSION,
    .kind = PW_PLUGIN_KIND_BACKEND,
    .name = PW_SIM_BACKEND_NAME,
    .version = PW_VERSION_STRING,
    .description = "the bundled simulated fleet: virtual time, a cost model, failure injection "
                   "(pathways/backends/sim.h)",
    .args_help = PW_SIM_PLUGIN_ARGS_HELP,
    .create_backend = pw_sim_plugin_create,
};

PW_PLUGIN_EXPORT const pw_plugin_factory_t* pw_plugin_entry(uint32_t loader_abi);

const pw_plugin_factory_t* pw_plugin_entry(uint32_t loader_abi) {
  (void)loader_abi;
  return &pw_sim_plugin_factory;
}
