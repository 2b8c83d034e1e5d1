/* The plugin loader (pathways/plugin.h): finds a plugin library, dlopens
 * it, checks the factory its pw_plugin_entry returns, and makes objects
 * through it with the plugin's name and path in every error.
 *
 * Nothing here is cached between calls: dlopen itself returns the same
 * library for one file loaded twice, and RTLD_NODELETE keeps every library
 * mapped until exit (the objects it made point into its code). The only
 * process-wide value is pw_plugin_dir's text, computed once. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pathways/plugin.h"
#include "pathways/version.h"

/* The bundled plugins' directory relative to the directory libpathways.so
 * lives in, and the configured absolute one (a static link has no
 * libpathways.so to start from). Both come from lib/plugin/CMakeLists.txt. */
#ifndef PW_PLUGIN_SUBDIR
#define PW_PLUGIN_SUBDIR "pathways/plugins"
#endif
#ifndef PW_PLUGIN_INSTALL_DIR
#define PW_PLUGIN_INSTALL_DIR "/usr/local/lib/pathways/plugins"
#endif

#define PW_PLUGIN_ENV "PATHWAYS_PLUGIN_PATH"
#define PW_PLUGIN_NAME_MAX 255u

struct pw_plugin_t {
  const pw_plugin_factory_t* factory;
  void* handle;
  char path[]; /* NUL-terminated */
};

const char* pw_plugin_kind_name(pw_plugin_kind_t kind) {
  switch (kind) {
    case PW_PLUGIN_KIND_BACKEND: return "backend";
    case PW_PLUGIN_KIND_TRANSPORT: return "transport";
    case PW_PLUGIN_KIND_STORE: return "store";
  }
  return "unknown";
}

/*---------------------------------------------------------------------------
 * pw_plugin_dir
 *-------------------------------------------------------------------------*/

static pthread_once_t pw_plugin_dir_once = PTHREAD_ONCE_INIT;
static char pw_plugin_dir_text[PATH_MAX];

/* Beside the libpathways.so this code is part of, so that a moved install
 * tree (and the build tree, whose modules sit in lib/pathways/plugins)
 * finds its own plugins; the configured directory when this code is
 * linked statically into a program. */
static void pw_plugin_dir_init(void) {
  Dl_info info;
  memset(&info, 0, sizeof(info));
  const char* fallback = PW_PLUGIN_INSTALL_DIR;
  if (dladdr((void*)&pw_plugin_dir_init, &info) != 0 && info.dli_fname != NULL) {
    const char* slash = strrchr(info.dli_fname, '/');
    const char* base = slash != NULL ? slash + 1 : info.dli_fname;
    if (slash != NULL && strncmp(base, "libpathways.so", 14) == 0) {
      int n = snprintf(pw_plugin_dir_text, sizeof(pw_plugin_dir_text), "%.*s/%s",
                       (int)(slash - info.dli_fname), info.dli_fname, PW_PLUGIN_SUBDIR);
      if (n > 0 && (size_t)n < sizeof(pw_plugin_dir_text)) return;
    }
  }
  snprintf(pw_plugin_dir_text, sizeof(pw_plugin_dir_text), "%s", fallback);
}

const char* pw_plugin_dir(void) {
  pthread_once(&pw_plugin_dir_once, pw_plugin_dir_init);
  return pw_plugin_dir_text;
}

/*---------------------------------------------------------------------------
 * Checking one library
 *-------------------------------------------------------------------------*/

static bool pw_plugin_name_is_valid(const char* name) {
  if (name == NULL || name[0] == '\0') return false;
  size_t n = 0;
  for (const char* p = name; *p != '\0'; ++p, ++n) {
    char c = *p;
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok || n >= 64) return false;
  }
  return true;
}

static pw_status_t pw_plugin_check_factory(const char* path, const pw_plugin_factory_t* f) {
  if (f == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "plugin '%s': %s(%u) returned NULL instead of its factory", path,
                          PW_PLUGIN_ENTRY_SYMBOL, PW_PLUGIN_ABI_VERSION);
  }
  /* struct_size and abi_version are where every ABI puts them: read the
   * version before trusting anything else. */
  if (f->struct_size < PW_STRUCT_SIZE(pw_plugin_factory_t, abi_version)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "plugin '%s': factory struct_size %zu is smaller than v1 (%zu)", path,
                          f->struct_size, (size_t)PW_PLUGIN_FACTORY_SIZE_V1);
  }
  if (f->abi_version != PW_PLUGIN_ABI_VERSION) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "plugin '%s' was built for plugin ABI version %u; this libpathways "
                          "(%s) loads plugin ABI version %u",
                          path, f->abi_version, PW_VERSION_STRING, PW_PLUGIN_ABI_VERSION);
  }
  if (f->struct_size < PW_PLUGIN_FACTORY_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "plugin '%s': factory struct_size %zu is smaller than v1 (%zu)", path,
                          f->struct_size, (size_t)PW_PLUGIN_FACTORY_SIZE_V1);
  }
  if (!pw_plugin_name_is_valid(f->name)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "plugin '%s': factory name '%s' is not 1-64 of [a-z0-9_-]", path,
                          f->name != NULL ? f->name : "(null)");
  }
  bool has_create = false;
  const char* want = NULL;
  switch (f->kind) {
    case PW_PLUGIN_KIND_BACKEND:
      has_create = f->create_backend != NULL;
      want = "create_backend";
      break;
    case PW_PLUGIN_KIND_TRANSPORT:
      has_create = f->create_transport != NULL;
      want = "create_transport";
      break;
    case PW_PLUGIN_KIND_STORE:
      has_create = f->create_store != NULL;
      want = "create_store";
      break;
    default:
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "plugin '%s' ('%s'): unknown kind %d (backend %d, transport %d, "
                            "store %d)",
                            path, f->name, (int)f->kind, (int)PW_PLUGIN_KIND_BACKEND,
                            (int)PW_PLUGIN_KIND_TRANSPORT, (int)PW_PLUGIN_KIND_STORE);
  }
  if (!has_create) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "plugin '%s' ('%s', a %s) has no %s function", path, f->name,
                          pw_plugin_kind_name(f->kind), want);
  }
  return NULL;
}

/* Loads the existing file |path| and checks it. */
static pw_status_t pw_plugin_load_file(const char* path, pw_plugin_t** out_plugin) {
  dlerror();
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == NULL) {
    const char* why = dlerror();
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "plugin '%s' cannot be loaded: %s", path,
                          why != NULL ? why : "dlopen failed");
  }
  pw_plugin_entry_fn_t entry = NULL;
  /* POSIX: a function pointer travels through void* (dlsym's own rule). */
  void* symbol = dlsym(handle, PW_PLUGIN_ENTRY_SYMBOL);
  memcpy(&entry, &symbol, sizeof(entry));
  if (entry == NULL) {
    dlclose(handle);
    return pw_status_make(PW_STATUS_NOT_FOUND,
                          "plugin '%s' does not export %s (not a pathways plugin, or its "
                          "definition lacks PW_PLUGIN_EXPORT)",
                          path, PW_PLUGIN_ENTRY_SYMBOL);
  }
  const pw_plugin_factory_t* factory = entry(PW_PLUGIN_ABI_VERSION);
  pw_status_t s = pw_plugin_check_factory(path, factory);
  if (s != NULL) {
    dlclose(handle);
    return s;
  }
  char resolved[PATH_MAX];
  const char* shown = realpath(path, resolved) != NULL ? resolved : path;
  size_t n = strlen(shown);
  pw_plugin_t* plugin = malloc(sizeof(*plugin) + n + 1);
  if (plugin == NULL) {
    dlclose(handle);
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "plugin '%s': out of memory", path);
  }
  plugin->factory = factory;
  plugin->handle = handle;
  memcpy(plugin->path, shown, n + 1);
  *out_plugin = plugin;
  return NULL;
}

/* NULL when |path| names an existing file; NOT_FOUND when nothing is
 * there, INVALID_ARGUMENT for a directory (both set |*out_absent|: a
 * search goes on past them); PERMISSION_DENIED and the like otherwise. */
static pw_status_t pw_plugin_stat(const char* path, bool* out_absent) {
  *out_absent = false;
  struct stat st;
  if (stat(path, &st) != 0) {
    int e = errno;
    *out_absent = e == ENOENT || e == ENOTDIR;
    return pw_status_make(*out_absent ? PW_STATUS_NOT_FOUND : PW_STATUS_PERMISSION_DENIED,
                          "plugin '%s': %s", path, strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    *out_absent = true;
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "plugin '%s' is a directory", path);
  }
  return NULL;
}

/*---------------------------------------------------------------------------
 * Discovery of a bare name
 *-------------------------------------------------------------------------*/

/* A growing list of the places tried, for the NOT_FOUND message. */
typedef struct pw_plugin_tried_t {
  char* text;
  size_t length;
  size_t capacity;
  bool failed; /* out of memory: the message says so instead */
} pw_plugin_tried_t;

static void pw_plugin_tried_add(pw_plugin_tried_t* t, const char* place) {
  if (t->failed) return;
  size_t n = strlen(place);
  size_t need = t->length + n + 3;
  if (need > t->capacity) {
    size_t cap = t->capacity ? t->capacity * 2 : 256;
    while (cap < need) cap *= 2;
    char* grown = realloc(t->text, cap);
    if (grown == NULL) {
      t->failed = true;
      return;
    }
    t->text = grown;
    t->capacity = cap;
  }
  if (t->length > 0) {
    memcpy(t->text + t->length, ", ", 2);
    t->length += 2;
  }
  memcpy(t->text + t->length, place, n + 1);
  t->length += n;
}

/* Tries NAME, libpathways_NAME.so, pathways_NAME.so in |dir| (|dir_len|
 * bytes). NULL with *out_plugin set when found and loaded; NULL with
 * *out_plugin NULL when nothing is there; an error for a file that is
 * there and refused. */
static pw_status_t pw_plugin_try_dir(const char* dir, size_t dir_len, const char* name,
                                     pw_plugin_tried_t* tried, pw_plugin_t** out_plugin) {
  for (int i = 0; i < 3; ++i) {
    char path[PATH_MAX];
    int n = 0;
    switch (i) {
      case 0: n = snprintf(path, sizeof(path), "%.*s/%s", (int)dir_len, dir, name); break;
      case 1:
        n = snprintf(path, sizeof(path), "%.*s/libpathways_%s.so", (int)dir_len, dir, name);
        break;
      default:
        n = snprintf(path, sizeof(path), "%.*s/pathways_%s.so", (int)dir_len, dir, name);
        break;
    }
    if (n < 0 || (size_t)n >= sizeof(path)) continue;
    pw_plugin_tried_add(tried, path);
    bool absent = false;
    pw_status_t s = pw_plugin_stat(path, &absent);
    if (s != NULL && absent) {
      pw_status_free(s);
      continue;
    }
    if (s == NULL) s = pw_plugin_load_file(path, out_plugin);
    return pw_status_annotate(s, "plugin '%s' (found as %s)", name, path);
  }
  return NULL;
}

static pw_status_t pw_plugin_find(const char* name, pw_plugin_t** out_plugin) {
  if (strlen(name) > PW_PLUGIN_NAME_MAX) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "plugin name '%.32s...' is longer than %u bytes", name,
                          PW_PLUGIN_NAME_MAX);
  }
  pw_plugin_tried_t tried = {0};
  pw_status_t s = NULL;
  const char* env = getenv(PW_PLUGIN_ENV);
  for (const char* p = env; p != NULL && *p != '\0' && *out_plugin == NULL && s == NULL;) {
    const char* colon = strchr(p, ':');
    size_t len = colon != NULL ? (size_t)(colon - p) : strlen(p);
    if (len > 0) s = pw_plugin_try_dir(p, len, name, &tried, out_plugin);
    p = colon != NULL ? colon + 1 : p + len;
  }
  const char* dir = pw_plugin_dir();
  if (s == NULL && *out_plugin == NULL) {
    s = pw_plugin_try_dir(dir, strlen(dir), name, &tried, out_plugin);
  }
  if (s == NULL && *out_plugin == NULL) {
    s = pw_status_make(PW_STATUS_NOT_FOUND,
                       "plugin '%s' not found; tried %s (%s%s%s%s, then the bundled "
                       "plugins' directory %s)",
                       name, tried.failed ? "(out of memory listing them)" : tried.text,
                       PW_PLUGIN_ENV, env != NULL ? "='" : " unset", env != NULL ? env : "",
                       env != NULL ? "'" : "", dir);
  }
  free(tried.text);
  return s;
}

pw_status_t pw_plugin_load(const char* path_or_name, pw_plugin_t** out_plugin) {
  if (out_plugin == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_plugin_load: out_plugin is NULL");
  }
  *out_plugin = NULL;
  if (path_or_name == NULL || path_or_name[0] == '\0') {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_plugin_load: no path or name given");
  }
  if (strchr(path_or_name, '/') == NULL) return pw_plugin_find(path_or_name, out_plugin);
  bool absent = false;
  pw_status_t s = pw_plugin_stat(path_or_name, &absent);
  if (s != NULL) return s;
  return pw_plugin_load_file(path_or_name, out_plugin);
}

void pw_plugin_release(pw_plugin_t* plugin) {
  if (plugin == NULL) return;
  /* RTLD_NODELETE: this drops the reference, the code stays mapped. */
  dlclose(plugin->handle);
  free(plugin);
}

const pw_plugin_factory_t* pw_plugin_factory(const pw_plugin_t* plugin) {
  return plugin != NULL ? plugin->factory : NULL;
}

const char* pw_plugin_path(const pw_plugin_t* plugin) {
  return plugin != NULL ? plugin->path : NULL;
}

/*---------------------------------------------------------------------------
 * Making objects
 *-------------------------------------------------------------------------*/

/* The checks every create makes before calling the factory. */
static pw_status_t pw_plugin_create_check(const pw_plugin_t* plugin, pw_plugin_kind_t kind,
                                          const void* out, const char* call) {
  if (out == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: the out-struct is NULL", call);
  }
  if (plugin == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: plugin is NULL", call);
  }
  if (plugin->factory->kind != kind) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "%s: plugin '%s' (%s) is a %s plugin, not a %s plugin", call,
                          plugin->factory->name, plugin->path,
                          pw_plugin_kind_name(plugin->factory->kind), pw_plugin_kind_name(kind));
  }
  return NULL;
}

/* The factory's result, with the plugin named; an OK without a vtable is
 * the plugin's bug, reported rather than handed on (|vtable| is read only
 * after an OK). */
static pw_status_t pw_plugin_create_result(const pw_plugin_t* plugin, pw_status_t s,
                                           const void* vtable) {
  if (s == NULL && vtable == NULL) {
    s = pw_status_make(PW_STATUS_INTERNAL, "create returned OK without a vtable");
  }
  return pw_status_annotate(s, "plugin '%s' (%s)", plugin->factory->name, plugin->path);
}

pw_status_t pw_plugin_create_backend(pw_plugin_t* plugin, const char* args,
                                     pw_backend_t* out_backend) {
  if (out_backend != NULL) memset(out_backend, 0, sizeof(*out_backend));
  PW_RETURN_IF_ERROR(pw_plugin_create_check(plugin, PW_PLUGIN_KIND_BACKEND, out_backend,
                                            "pw_plugin_create_backend"));
  pw_status_t s = plugin->factory->create_backend(args != NULL ? args : "", out_backend);
  s = pw_plugin_create_result(plugin, s, s == NULL ? out_backend->vtable : NULL);
  if (s != NULL) memset(out_backend, 0, sizeof(*out_backend));
  return s;
}

pw_status_t pw_plugin_create_transport(pw_plugin_t* plugin, const char* args,
                                       pw_transport_t* out_transport) {
  if (out_transport != NULL) memset(out_transport, 0, sizeof(*out_transport));
  PW_RETURN_IF_ERROR(pw_plugin_create_check(plugin, PW_PLUGIN_KIND_TRANSPORT, out_transport,
                                            "pw_plugin_create_transport"));
  pw_status_t s = plugin->factory->create_transport(args != NULL ? args : "", out_transport);
  s = pw_plugin_create_result(plugin, s, s == NULL ? out_transport->vtable : NULL);
  if (s != NULL) memset(out_transport, 0, sizeof(*out_transport));
  return s;
}

pw_status_t pw_plugin_create_store(pw_plugin_t* plugin, const char* args,
                                   pw_store_t* out_store) {
  if (out_store != NULL) memset(out_store, 0, sizeof(*out_store));
  PW_RETURN_IF_ERROR(pw_plugin_create_check(plugin, PW_PLUGIN_KIND_STORE, out_store,
                                            "pw_plugin_create_store"));
  pw_status_t s = plugin->factory->create_store(args != NULL ? args : "", out_store);
  s = pw_plugin_create_result(plugin, s, s == NULL ? out_store->vtable : NULL);
  if (s != NULL) memset(out_store, 0, sizeof(*out_store));
  return s;
}
