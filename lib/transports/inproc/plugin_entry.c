/* The in-process transport as a plugin library (libpathways_inproc.so,
 * pathways/plugin.h): its options string, parsed with the shared
 * pw_plugin_args_* helpers, becomes pw_inproc_transport_options_t. Built
 * as its own MODULE library over libpathways. */
#include "pathways/plugin.h"
#include "pathways/transports/inproc.h"
#include "pathways/version.h"

#define PW_INPROC_PLUGIN_ARGS_HELP                                                   \
  "workers=N (0: every copy runs inline, the default; 1-64: a pool of N threads), " \
  "staging_bytes=N (largest staging buffer between two memories neither of which "  \
  "is host accessible; 0: 1 MiB, the default)"

static const char* const pw_inproc_plugin_keys[] = {"workers", "staging_bytes", NULL};

static pw_status_t pw_inproc_plugin_create(const char* args, pw_transport_t* out_transport) {
  pw_inproc_transport_options_t o;
  pw_inproc_transport_options_init(&o);
  PW_RETURN_IF_ERROR(pw_plugin_args_check(args, pw_inproc_plugin_keys));
  uint64_t v = 0;
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "workers", o.worker_count, PW_INPROC_MAX_WORKERS,
                                        &v));
  o.worker_count = (uint32_t)v;
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "staging_bytes", o.staging_bytes, SIZE_MAX, &v));
  o.staging_bytes = (size_t)v;
  return pw_inproc_transport_create(&o, out_transport);
}

static const pw_plugin_factory_t pw_inproc_plugin_factory = {
    .struct_size = sizeof(pw_plugin_factory_t),
    .abi_version = PW_PLUGIN_ABI_VERSION,
    .kind = PW_PLUGIN_KIND_TRANSPORT,
    .name = PW_INPROC_TRANSPORT_NAME,
    .version = PW_VERSION_STRING,
    .description = "the bundled in-process transport: copies between backends of one process "
                   "(pathways/transports/inproc.h)",
    .args_help = PW_INPROC_PLUGIN_ARGS_HELP,
    .create_transport = pw_inproc_plugin_create,
};

PW_PLUGIN_EXPORT const pw_plugin_factory_t* pw_plugin_entry(uint32_t loader_abi);

const pw_plugin_factory_t* pw_plugin_entry(uint32_t loader_abi) {
  (void)loader_abi;
  return &pw_inproc_plugin_factory;
}
