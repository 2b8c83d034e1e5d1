/* The `dir` store as a plugin library (libpathways_dir.so,
 * pathways/plugin.h): its options string, parsed with the shared
 * pw_plugin_args_* helpers, becomes pw_dir_store_options_t. Built as its
 * own MODULE library over libpathways. */
#include "pathways/plugin.h"
#include "pathways/stores/dir.h"
#include "pathways/version.h"

/* The longest path= value (PATH_MAX on Linux). */
#define PW_DIR_PLUGIN_PATH_MAX 4096

#define PW_DIR_PLUGIN_ARGS_HELP                                                          \
  "path=DIR (required; created if missing, its parent must exist; no ','), "             \
  "max_bytes=N (bound on all entries, least recently used evicted; 0: unbounded, the " \
  "default), stale_temp_seconds=N (temporary files older than this are removed at "      \
  "open; 0: 3600, the default)"

static const char* const pw_dir_plugin_keys[] = {"path", "max_bytes", "stale_temp_seconds",
                                                 NULL};

static pw_status_t pw_dir_plugin_create(const char* args, pw_store_t* out_store) {
  pw_dir_store_options_t o;
  pw_dir_store_options_init(&o);
  PW_RETURN_IF_ERROR(pw_plugin_args_check(args, pw_dir_plugin_keys));
  char path[PW_DIR_PLUGIN_PATH_MAX];
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
  return pw_dir_store_create(&o, out_store);
}

static const pw_plugin_factory_t pw_dir_plugin_factory = {
    .struct_size = sizeof(pw_plugin_factory_t),
    .abi_version = PW_PLUGIN_ABI_VERSION,
    .kind = PW_PLUGIN_KIND_STORE,
    .name = "dir",
    .version = PW_VERSION_STRING,
    .description = "the bundled store: one file per key in a local directory "
                   "(pathways/stores/dir.h)",
    .args_help = PW_DIR_PLUGIN_ARGS_HELP,
    .create_store = pw_dir_plugin_create,
};

PW_PLUGIN_EXPORT const pw_plugin_factory_t* pw_plugin_entry(uint32_t loader_abi);

const pw_plugin_factory_t* pw_plugin_entry(uint32_t loader_abi) {
  (void)loader_abi;
  return &pw_dir_plugin_factory;
}
