/* libpathways: plugins loaded from shared objects (as PJRT plugins are).
 *
 * A plugin library (a backend, a transport or a store built on its own,
 * against the installed headers) exports ONE plain C function:
 *
 *   PW_PLUGIN_EXPORT const pw_plugin_factory_t* pw_plugin_entry(
 *       uint32_t loader_abi);
 *
 * |loader_abi| is the PW_PLUGIN_ABI_VERSION of the library that loads it;
 * the plugin returns a pointer to its factory, a static constant that
 * lives as long as the library, with abi_version set to the
 * PW_PLUGIN_ABI_VERSION of the header the plugin was built with (a plugin
 * that serves several ABIs may pick the factory for |loader_abi|). It
 * never returns NULL and does no other work: the create function does.
 *
 * The loader (pw_plugin_load) dlopens the file (RTLD_NOW | RTLD_LOCAL |
 * RTLD_NODELETE), looks the symbol up, calls it and refuses the library,
 * with a status naming the file, when the file is missing (NOT_FOUND),
 * cannot be loaded (INVALID_ARGUMENT with dlerror's text: not a shared
 * object, an unresolved symbol), the symbol is missing (NOT_FOUND), the
 * factory is of another ABI version (FAILED_PRECONDITION naming both
 * versions), NULL, smaller than PW_PLUGIN_FACTORY_SIZE_V1, of an unknown
 * kind, has a name outside [a-z0-9_-]{1,64} or lacks the create function
 * of its kind (INVALID_ARGUMENT). A loaded library stays mapped until
 * the process exits (the objects it made point into it; PJRT does not
 * unload plugins either); loading one path twice returns the same
 * library.
 *
 * The ABI version changes only when pw_plugin_entry or the v1 fields of
 * pw_plugin_factory_t change; the vtables a factory makes are versioned by
 * their own struct_size (pathways/backend.h, transport.h, store.h).
 *
 * Options strings. A create function takes the plugin's own text, "" when
 * none and never NULL. The bundled plugins and pathways-cts use
 * "key=value,key=value" with the parsing helpers below; a plugin may use
 * any grammar it documents in args_help.
 *
 * A plugin links libpathways (statuses, allocators, the parsing helpers):
 * the statuses it returns are freed with pw_status_free by the caller, so
 * it must make them with this library's pw_status_make.
 *
 * Discovery. pw_plugin_load takes a path (anything with a '/'), or a bare
 * name looked up as NAME, libpathways_NAME.so and pathways_NAME.so in each
 * directory of PATHWAYS_PLUGIN_PATH (':'-separated, in order; empty
 * entries are skipped), then in the directory of the bundled plugins
 * (pw_plugin_dir). The first file that exists (directories are passed
 * over) is the one loaded: if it is refused, so is the name (no later file
 * is tried). A name found nowhere is NOT_FOUND listing every file tried.
 *
 * A program linked with the static libpathways.a may load plugins, but
 * each brings the shared libpathways.so it links: two copies of the
 * library in one process. Statuses and the objects' vtables work across
 * them; pw_cpu_backend_is_cpu and the like answer for their own copy
 * only. Hosts that load plugins should link the shared library.
 *
 * Thread-safety: every function here may be called from any thread. */
#ifndef PATHWAYS_PLUGIN_H_
#define PATHWAYS_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#include "pathways/api.h"
#include "pathways/backend.h"
#include "pathways/status.h"
#include "pathways/store.h"
#include "pathways/transport.h"

PW_EXTERN_C_BEGIN

/* Bumped whenever a struct a plugin reads or fills changes layout
 * incompatibly. 2: pw_mesh_shape_t gained axis names and pw_sharding_t the
 * TILED fields (every array spec, signature and mesh a plugin sees). */
#define PW_PLUGIN_ABI_VERSION 2u
#define PW_PLUGIN_ENTRY_SYMBOL "pw_plugin_entry"

/* Put before a plugin's pw_plugin_entry definition: default visibility and
 * C linkage, whatever the plugin's own -fvisibility. */
#if defined(__GNUC__) || defined(__clang__)
#define PW_PLUGIN_EXPORT_VISIBILITY __attribute__((visibility("default")))
#else
#define PW_PLUGIN_EXPORT_VISIBILITY
#endif
#ifdef __cplusplus
#define PW_PLUGIN_EXPORT extern "C" PW_PLUGIN_EXPORT_VISIBILITY
#else
#define PW_PLUGIN_EXPORT PW_PLUGIN_EXPORT_VISIBILITY
#endif

typedef enum pw_plugin_kind_t {
  PW_PLUGIN_KIND_BACKEND = 1,
  PW_PLUGIN_KIND_TRANSPORT = 2,
  PW_PLUGIN_KIND_STORE = 3,
} pw_plugin_kind_t;

/* "backend", "transport", "store"; "unknown" otherwise. */
PW_API const char* pw_plugin_kind_name(pw_plugin_kind_t kind);

typedef pw_status_t (*pw_plugin_create_backend_fn_t)(const char* args,
                                                     pw_backend_t* out_backend);
typedef pw_status_t (*pw_plugin_create_transport_fn_t)(const char* args,
                                                       pw_transport_t* out_transport);
typedef pw_status_t (*pw_plugin_create_store_fn_t)(const char* args, pw_store_t* out_store);

/* What a plugin library offers. Exactly the create function of |kind| is
 * set; it behaves like the create function of a bundled object: NULL and
 * a filled out-struct the caller owns (destroy through its vtable), or an
 * error naming the problem (an unknown key, a bad value) with the
 * out-struct zeroed. */
typedef struct pw_plugin_factory_t {
  size_t struct_size;     /* sizeof(pw_plugin_factory_t) */
  uint32_t abi_version;   /* PW_PLUGIN_ABI_VERSION the plugin was built with */
  pw_plugin_kind_t kind;
  const char* name;       /* short, [a-z0-9_-]+: "cpu", "sim", "inproc", "dir" */
  const char* version;    /* the plugin's own version text; may be NULL */
  const char* description;  /* one line; may be NULL */
  const char* args_help;    /* the options-string grammar; may be NULL */
  pw_plugin_create_backend_fn_t create_backend;
  pw_plugin_create_transport_fn_t create_transport;
  pw_plugin_create_store_fn_t create_store;
} pw_plugin_factory_t;
#define PW_PLUGIN_FACTORY_SIZE_V1 PW_STRUCT_SIZE(pw_plugin_factory_t, create_store)

typedef const pw_plugin_factory_t* (*pw_plugin_entry_fn_t)(uint32_t loader_abi);

/* A loaded plugin library. */
typedef struct pw_plugin_t pw_plugin_t;

/* Loads |path_or_name| (see Discovery above) and checks its factory. On
 * failure *out_plugin is NULL and the status names the file (or, for a
 * name, every place tried) and the reason. The small handle comes from
 * the C library's malloc (there is no allocator to pass). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_plugin_load(const char* path_or_name,
                                                     pw_plugin_t** out_plugin);

/* Frees the handle (the library stays mapped: see above), which objects
 * made through it do not need. NULL is a no-op. */
PW_API void pw_plugin_release(pw_plugin_t* plugin);

/* The factory (valid while the process lives) and the resolved path
 * (realpath of the file loaded; valid while |plugin| lives). NULL for a
 * NULL |plugin|. */
PW_API const pw_plugin_factory_t* pw_plugin_factory(const pw_plugin_t* plugin);
PW_API const char* pw_plugin_path(const pw_plugin_t* plugin);

/* Creates an object of the plugin's kind from |args| (NULL means "").
 * FAILED_PRECONDITION naming the plugin and both kinds when the plugin is
 * of another kind; otherwise the factory's own result. A status the
 * plugin returns is passed on with the plugin's name and path added; an
 * OK without a vtable is INTERNAL. The out-struct is zeroed on every
 * error. The object owns no reference to |plugin|. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_plugin_create_backend(pw_plugin_t* plugin,
                                                               const char* args,
                                                               pw_backend_t* out_backend);
PW_API PW_MUST_USE_RESULT pw_status_t pw_plugin_create_transport(pw_plugin_t* plugin,
                                                                 const char* args,
                                                                 pw_transport_t* out_transport);
PW_API PW_MUST_USE_RESULT pw_status_t pw_plugin_create_store(pw_plugin_t* plugin,
                                                             const char* args,
                                                             pw_store_t* out_store);

/* The directory of the bundled plugin modules: LIBDIR/pathways/plugins
 * beside the libpathways.so this call is in (so a moved install tree, and
 * the build tree, whose modules are built into lib/pathways/plugins, find
 * their own), or the configured install directory when libpathways is
 * linked statically. Static storage. */
PW_API const char* pw_plugin_dir(void);

/* Options-string helpers for "key=value,key=value" (no spaces around
 * '=' or ','; values may not contain ','; keys are [a-z0-9_]+).
 *
 * pw_plugin_args_check: INVALID_ARGUMENT naming the key and listing
 * |known| (a NULL-terminated array) for a key not in |known|, a key given
 * twice, an entry without '=' (an empty entry, a trailing ',') or a key
 * outside [a-z0-9_]+. Call it first; the getters then only read (they
 * use the first entry of a key). A missing key leaves the default. The
 * getters return INVALID_ARGUMENT for a NULL |key| or output. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_plugin_args_check(const char* args,
                                                           const char* const* known);
/* Decimal, no sign; INVALID_ARGUMENT naming the key for anything else or
 * a value above |max|. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_plugin_args_u64(const char* args, const char* key,
                                                         uint64_t default_value, uint64_t max,
                                                         uint64_t* out_value);
/* pw_plugin_args_u64 with a lower bound too: INVALID_ARGUMENT naming the
 * key for a value below |min| (a count that must be at least 1). The
 * default is not checked. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_plugin_args_range(const char* args, const char* key,
                                                           uint64_t default_value, uint64_t min,
                                                           uint64_t max, uint64_t* out_value);
/* Copies the value (or |default_value|, which may be NULL: out "") into
 * |buffer|; OUT_OF_RANGE naming the key when it does not fit. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_plugin_args_str(const char* args, const char* key,
                                                         const char* default_value, char* buffer,
                                                         size_t buffer_size);
/* "true"/"false"/"1"/"0"; INVALID_ARGUMENT naming the key otherwise. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_plugin_args_bool(const char* args, const char* key,
                                                          bool default_value, bool* out_value);
/* The index in |choices| (a NULL-terminated array) of the value, or
 * |default_index| when the key is absent; INVALID_ARGUMENT naming the key
 * and listing |choices| for any other value. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_plugin_args_choice(const char* args, const char* key,
                                                            const char* const* choices,
                                                            size_t default_index,
                                                            size_t* out_index);

PW_EXTERN_C_END

#endif /* PATHWAYS_PLUGIN_H_ */
