/* pathways-cts: the conformance suite for plugins (docs/plugins.md, "The
 * conformance suite"). Loads a plugin library with pw_plugin_load, runs
 * every case of its kind (backend, transport or store) and reports TAP
 * (default) or JUnit XML. Exit status: 0 when every case run passed, 1
 * when one failed, 2 on a usage or load error. */
#define _POSIX_C_SOURCE 200809L /* strdup, strtok_r */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cts_run.h"

static const char pw_cts_usage[] =
    "usage: pathways-cts [options] PLUGIN\n"
    "       pathways-cts --list [PLUGIN]\n"
    "Runs the conformance cases of PLUGIN's kind (backend, transport, store).\n"
    "PLUGIN is a path to a plugin library or a name (see pw_plugin_load).\n"
    "  --args ARGS          the plugin's options string (\"key=value,...\"); each\n"
    "                       {tmp} becomes a fresh empty directory per case\n"
    "  --unsupported LIST   comma-separated cases to report as skipped\n"
    "                       (names as --list prints them, or without the kind)\n"
    "  --filter GLOB        run only the cases whose full name matches GLOB\n"
    "  --list               print the case names and exit\n"
    "  --format tap|junit   report format (default tap)\n"
    "  --output FILE        write the report to FILE (default stdout)\n"
    "  --timeout SECONDS    per case, then it is killed and fails (default 300)\n"
    "  --no-fork            run cases in this process (for a debugger; the\n"
    "                       first failure, skip or crash ends the run)\n"
    "Exit status: 0 all run cases passed, 1 a case failed, 2 usage or load error.\n";

typedef struct pw_cts_kind_t {
  pw_plugin_kind_t kind;
  const char* name;
  const pw_cts_case_t* (*cases)(size_t* out_count);
} pw_cts_kind_t;

static const pw_cts_kind_t pw_cts_kinds[] = {
    {PW_PLUGIN_KIND_BACKEND, "backend", pw_cts_backend_cases},
    {PW_PLUGIN_KIND_TRANSPORT, "transport", pw_cts_transport_cases},
    {PW_PLUGIN_KIND_STORE, "store", pw_cts_store_cases},
};
#define PW_CTS_KIND_COUNT (sizeof(pw_cts_kinds) / sizeof(pw_cts_kinds[0]))

/* |message| then |what| (may be ""), then the usage. */
static int pw_cts_usage_error(const char* message, const char* what) {
  fprintf(stderr, "pathways-cts: %s%s\n%s", message, what, pw_cts_usage);
  return 2;
}

static void pw_cts_list(const pw_cts_kind_t* only) {
  for (size_t k = 0; k < PW_CTS_KIND_COUNT; ++k) {
    if (only != NULL && only != &pw_cts_kinds[k]) continue;
    size_t count = 0;
    const pw_cts_case_t* cases = pw_cts_kinds[k].cases(&count);
    for (size_t i = 0; i < count; ++i) printf("%s.%s\n", pw_cts_kinds[k].name, cases[i].name);
  }
}

/* The plugin's own hooks (the optional pw_plugin_cts_hooks export), else
 * pathways-cts's for a bundled module, else none. */
static const pw_cts_hooks_t* pw_cts_find_hooks(pw_plugin_t* plugin) {
  static const pw_cts_hooks_t none = {.struct_size = sizeof(pw_cts_hooks_t)};
  void* handle = dlopen(pw_plugin_path(plugin), RTLD_NOW | RTLD_NOLOAD);
  if (handle != NULL) {
    void* symbol = dlsym(handle, PW_CTS_HOOKS_SYMBOL);
    pw_cts_hooks_fn_t fn = NULL;
    memcpy(&fn, &symbol, sizeof(fn));
    const pw_cts_hooks_t* hooks = fn != NULL ? fn(PW_CTS_ABI_VERSION) : NULL;
    dlclose(handle); /* the loader keeps its own reference */
    if (hooks != NULL && hooks->struct_size >= sizeof(size_t)) return hooks;
  }
  const pw_cts_hooks_t* builtin = pw_cts_builtin_hooks(pw_plugin_factory(plugin));
  return builtin != NULL ? builtin : &none;
}

/* Splits |list| at ',' into |out| (a NULL-terminated array the caller
 * frees, with its strings). */
static char** pw_cts_split(const char* list, const char* const* more) {
  size_t n = 2;
  for (const char* p = list; p != NULL && *p; ++p) n += *p == ',';
  for (const char* const* m = more; m != NULL && *m != NULL; ++m) ++n;
  char** out = calloc(n, sizeof(char*));
  if (out == NULL) return NULL;
  size_t i = 0;
  char* copy = strdup(list != NULL ? list : "");
  char* save = NULL;
  for (char* t = copy != NULL ? strtok_r(copy, ",", &save) : NULL; t != NULL;
       t = strtok_r(NULL, ",", &save)) {
    out[i++] = strdup(t);
  }
  free(copy);
  for (const char* const* m = more; m != NULL && *m != NULL; ++m) out[i++] = strdup(*m);
  return out;
}

static void pw_cts_free_list(char** list) {
  for (char** p = list; p != NULL && *p != NULL; ++p) free(*p);
  free(list);
}

/* Every name in |list| must be a case of |kind|: a typo cannot hide a test. */
static const char* pw_cts_unknown_case(const pw_cts_kind_t* kind, char** list) {
  size_t count = 0;
  const pw_cts_case_t* cases = kind->cases(&count);
  for (char** p = list; p != NULL && *p != NULL; ++p) {
    bool known = false;
    for (size_t i = 0; i < count && !known; ++i) {
      known = pw_cts_case_matches(kind->name, cases[i].name, *p);
    }
    if (!known) return *p;
  }
  return NULL;
}

typedef struct pw_cts_cli_t {
  const char* args;
  const char* unsupported;
  const char* filter;
  const char* format;
  const char* output;
  const char* plugin;
  unsigned timeout_s;
  bool list;
  bool no_fork;
} pw_cts_cli_t;

/* Returns 0, or 2 after printing a usage error. */
static int pw_cts_parse(int argc, char** argv, pw_cts_cli_t* cli) {
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char** value = NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(pw_cts_usage, stdout);
      exit(0);
    } else if (strcmp(a, "--list") == 0) {
      cli->list = true;
    } else if (strcmp(a, "--no-fork") == 0) {
      cli->no_fork = true;
    } else if (strcmp(a, "--args") == 0) {
      value = &cli->args;
    } else if (strcmp(a, "--unsupported") == 0) {
      value = &cli->unsupported;
    } else if (strcmp(a, "--filter") == 0) {
      value = &cli->filter;
    } else if (strcmp(a, "--format") == 0) {
      value = &cli->format;
    } else if (strcmp(a, "--output") == 0) {
      value = &cli->output;
    } else if (strcmp(a, "--timeout") == 0) {
      if (i + 1 >= argc) return pw_cts_usage_error("a value is needed after ", a);
      char* end = NULL;
      unsigned long t = strtoul(argv[++i], &end, 10);
      if (*argv[i] == '\0' || *end != '\0' || t == 0 || t > 86400) {
        return pw_cts_usage_error("--timeout must be 1..86400 seconds, not ", argv[i]);
      }
      cli->timeout_s = (unsigned)t;
    } else if (a[0] == '-' && a[1] != '\0') {
      return pw_cts_usage_error("unknown option ", a);
    } else if (cli->plugin != NULL) {
      return pw_cts_usage_error("one PLUGIN only; a second: ", a);
    } else {
      cli->plugin = a;
    }
    if (value != NULL) {
      if (i + 1 >= argc) return pw_cts_usage_error("a value is needed after ", a);
      *value = argv[++i];
    }
  }
  if (strcmp(cli->format, "tap") != 0 && strcmp(cli->format, "junit") != 0) {
    return pw_cts_usage_error("--format must be tap or junit, not ", cli->format);
  }
  if (cli->plugin == NULL && !cli->list) return pw_cts_usage_error("no PLUGIN given", "");
  return 0;
}

static int pw_cts_main(const pw_cts_cli_t* cli) {
  if (cli->plugin == NULL) {
    pw_cts_list(NULL);
    return 0;
  }
  pw_plugin_t* plugin = NULL;
  pw_status_t status = pw_plugin_load(cli->plugin, &plugin);
  if (status != NULL) {
    char text[1024];
    pw_status_format(status, text, sizeof(text));
    pw_status_free(status);
    fprintf(stderr, "pathways-cts: cannot load plugin '%s': %s\n", cli->plugin, text);
    return 2;
  }
  const pw_plugin_factory_t* factory = pw_plugin_factory(plugin);
  const pw_cts_kind_t* kind = NULL;
  for (size_t k = 0; k < PW_CTS_KIND_COUNT; ++k) {
    if (pw_cts_kinds[k].kind == factory->kind) kind = &pw_cts_kinds[k];
  }
  if (kind == NULL) {
    fprintf(stderr, "pathways-cts: plugin '%s' (%s) is of kind %d, which has no suite\n",
            factory->name, pw_plugin_path(plugin), (int)factory->kind);
    pw_plugin_release(plugin);
    return 2;
  }
  if (cli->list) {
    pw_cts_list(kind);
    pw_plugin_release(plugin);
    return 0;
  }
  const pw_cts_hooks_t* hooks = pw_cts_find_hooks(plugin);
  const char* const* plugin_unsupported =
      hooks->struct_size >= PW_STRUCT_SIZE(pw_cts_hooks_t, unsupported) ? hooks->unsupported
                                                                        : NULL;
  char** unsupported = pw_cts_split(cli->unsupported, plugin_unsupported);
  const char* unknown = pw_cts_unknown_case(kind, unsupported);
  if (unknown != NULL) {
    fprintf(stderr,
            "pathways-cts: '%s' (in the unsupported list) is not a %s case; "
            "--list prints them\n",
            unknown, kind->name);
    pw_cts_free_list(unsupported);
    pw_plugin_release(plugin);
    return 2;
  }
  FILE* out = stdout;
  if (cli->output != NULL && (out = fopen(cli->output, "w")) == NULL) {
    fprintf(stderr, "pathways-cts: cannot write '%s'\n", cli->output);
    pw_cts_free_list(unsupported);
    pw_plugin_release(plugin);
    return 2;
  }
  char suite_name[1024];
  snprintf(suite_name, sizeof(suite_name), "pathways-cts %s %s (%s)%s%s", kind->name,
           factory->name, pw_plugin_path(plugin), cli->args[0] ? " --args " : "", cli->args);
  pw_cts_run_options_t options = {
      .kind = kind->name,
      .filter = cli->filter,
      .unsupported = (const char* const*)unsupported,
      .args = cli->args,
      .format = strcmp(cli->format, "junit") == 0 ? PW_CTS_FORMAT_JUNIT : PW_CTS_FORMAT_TAP,
      .out = out,
      .timeout_s = cli->timeout_s,
      .no_fork = cli->no_fork,
      .suite_name = suite_name,
  };
  options.cases = kind->cases(&options.case_count);
  pw_cts_context_t ctx = {.plugin = plugin, .factory = factory, .hooks = hooks};
  int failed = pw_cts_run(&options, &ctx);
  if (out != stdout && fclose(out) != 0) failed = -1;
  if (failed < 0) fprintf(stderr, "pathways-cts: could not write the report\n");
  pw_cts_free_list(unsupported);
  pw_plugin_release(plugin);
  return failed < 0 ? 2 : failed > 0 ? 1 : 0;
}

int main(int argc, char** argv) {
  pw_cts_cli_t cli = {.args = "", .format = "tap", .timeout_s = 300};
  int rc = pw_cts_parse(argc, argv, &cli);
  return rc != 0 ? rc : pw_cts_main(&cli);
}
