/* pw_plugin_load and pw_plugin_create_*: every refusal of a plugin that
 * breaks the contract (the test plugins of test_plugins.c) gives the
 * documented code and a message naming the file and the values; discovery
 * by path, by name through PATHWAYS_PLUGIN_PATH and from pw_plugin_dir. */
#define _XOPEN_SOURCE 700
#include "plugin_test_util.h"

#include <limits.h>
#include <sys/stat.h>

TestSuite(plugin_loader, .fini = pw_test_check_leaks, .timeout = 60);

#define PW_PT_CPU PW_PLUGIN_BUILD_DIR "/libpathways_cpu.so"

/* Loads |path|, expecting a refusal; the out-pointer is NULL after it. */
static pw_status_t pw_pt_refused(const char* path) {
  pw_plugin_t* plugin = (pw_plugin_t*)&plugin;
  pw_status_t s = pw_plugin_load(path, &plugin);
  cr_assert_null(plugin, "a refused load leaves NULL");
  return s;
}

static pw_plugin_t* pw_pt_load(const char* path) {
  pw_plugin_t* plugin = NULL;
  PW_PT_OK(pw_plugin_load(path, &plugin));
  cr_assert_not_null(plugin);
  return plugin;
}

Test(plugin_loader, refuses_a_library_without_the_entry_point) {
  PW_PT_EXPECT(pw_pt_refused(PW_TEST_PLUGIN_NO_ENTRY), PW_STATUS_NOT_FOUND,
               PW_TEST_PLUGIN_NO_ENTRY, "does not export pw_plugin_entry");
}

Test(plugin_loader, refuses_a_null_factory) {
  char entry[64];
  snprintf(entry, sizeof(entry), "pw_plugin_entry(%u) returned NULL", PW_PLUGIN_ABI_VERSION);
  PW_PT_EXPECT(pw_pt_refused(PW_TEST_PLUGIN_NULL_FACTORY), PW_STATUS_INVALID_ARGUMENT,
               PW_TEST_PLUGIN_NULL_FACTORY, entry);
}

Test(plugin_loader, refuses_another_abi_version_naming_both) {
  char loads[64];
  snprintf(loads, sizeof(loads), "loads plugin ABI version %u", PW_PLUGIN_ABI_VERSION);
  PW_PT_EXPECT(pw_pt_refused(PW_TEST_PLUGIN_BAD_ABI), PW_STATUS_FAILED_PRECONDITION,
               PW_TEST_PLUGIN_BAD_ABI, "built for plugin ABI version 999", loads,
               PW_VERSION_STRING);
}

Test(plugin_loader, refuses_a_factory_smaller_than_v1) {
  char want[96];
  snprintf(want, sizeof(want), "factory struct_size %zu is smaller than v1 (%zu)",
           (size_t)PW_PLUGIN_FACTORY_SIZE_V1 - sizeof(void*), (size_t)PW_PLUGIN_FACTORY_SIZE_V1);
  PW_PT_EXPECT(pw_pt_refused(PW_TEST_PLUGIN_SMALL), PW_STATUS_INVALID_ARGUMENT,
               PW_TEST_PLUGIN_SMALL, want);
  /* Too small even to hold abi_version: refused before it is read. */
  snprintf(want, sizeof(want), "factory struct_size %zu is smaller", sizeof(size_t));
  PW_PT_EXPECT(pw_pt_refused(PW_TEST_PLUGIN_TINY), PW_STATUS_INVALID_ARGUMENT,
               PW_TEST_PLUGIN_TINY, want);
}

Test(plugin_loader, refuses_an_unknown_kind) {
  PW_PT_EXPECT(pw_pt_refused(PW_TEST_PLUGIN_WRONG_KIND), PW_STATUS_INVALID_ARGUMENT,
               PW_TEST_PLUGIN_WRONG_KIND, "unknown kind 42", "backend 1", "transport 2",
               "store 3");
}

Test(plugin_loader, refuses_a_factory_without_the_create_of_its_kind) {
  PW_PT_EXPECT(pw_pt_refused(PW_TEST_PLUGIN_NO_CREATE), PW_STATUS_INVALID_ARGUMENT,
               PW_TEST_PLUGIN_NO_CREATE, "'test-plugin', a backend", "no create_backend");
}

Test(plugin_loader, refuses_a_bad_name) {
  PW_PT_EXPECT(pw_pt_refused(PW_TEST_PLUGIN_BAD_NAME), PW_STATUS_INVALID_ARGUMENT,
               PW_TEST_PLUGIN_BAD_NAME, "name 'Bad Name'", "[a-z0-9_-]");
}

Test(plugin_loader, passes_a_failed_create_on_with_the_plugin_named) {
  pw_plugin_t* plugin = pw_pt_load(PW_TEST_PLUGIN_CREATE_FAILS);
  pw_backend_t backend = {(const pw_backend_vtable_t*)&backend, &backend};
  PW_PT_EXPECT(pw_plugin_create_backend(plugin, "x=1", &backend), PW_STATUS_INVALID_ARGUMENT,
               "plugin 'test-plugin' (", PW_TEST_PLUGIN_CREATE_FAILS,
               "): the test plugin refuses args 'x=1'");
  cr_assert_null(backend.vtable);
  cr_assert_null(backend.self, "zeroed although the plugin wrote to it");
  /* NULL args reach the plugin as "". */
  PW_PT_EXPECT(pw_plugin_create_backend(plugin, NULL, &backend), PW_STATUS_INVALID_ARGUMENT,
               "refuses args ''");
  pw_plugin_release(plugin);
}

Test(plugin_loader, an_ok_without_a_vtable_is_internal) {
  pw_plugin_t* plugin = pw_pt_load(PW_TEST_PLUGIN_NO_VTABLE);
  pw_backend_t backend;
  PW_PT_EXPECT(pw_plugin_create_backend(plugin, "", &backend), PW_STATUS_INTERNAL,
               "plugin 'test-plugin'", "OK without a vtable");
  cr_assert_null(backend.self, "zeroed on this error too");
  pw_plugin_release(plugin);
}

Test(plugin_loader, accepts_a_factory_larger_than_v1) {
  pw_plugin_t* plugin = pw_pt_load(PW_TEST_PLUGIN_BIG);
  const pw_plugin_factory_t* f = pw_plugin_factory(plugin);
  cr_assert_gt(f->struct_size, sizeof(pw_plugin_factory_t));
  cr_assert_eq(f->kind, PW_PLUGIN_KIND_TRANSPORT);
  pw_transport_t t;
  PW_PT_OK(pw_plugin_create_transport(plugin, "", &t));
  cr_assert(pw_inproc_transport_is_inproc(t));
  t.vtable->destroy(t.self);
  /* Its create_store is set too, and ignored: it is a transport. */
  pw_store_t store;
  PW_PT_EXPECT(pw_plugin_create_store(plugin, "", &store), PW_STATUS_FAILED_PRECONDITION,
               "'test-plugin'", "is a transport plugin, not a store plugin");
  pw_plugin_release(plugin);
}

Test(plugin_loader, refuses_to_create_an_object_of_another_kind) {
  pw_plugin_t* plugin = pw_pt_load(PW_PT_CPU);
  pw_store_t store = {NULL, &store};
  PW_PT_EXPECT(pw_plugin_create_store(plugin, "", &store), PW_STATUS_FAILED_PRECONDITION,
               "pw_plugin_create_store", "plugin 'cpu'", "libpathways_cpu.so",
               "is a backend plugin, not a store plugin");
  cr_assert_null(store.self);
  pw_transport_t transport;
  PW_PT_EXPECT(pw_plugin_create_transport(plugin, "", &transport),
               PW_STATUS_FAILED_PRECONDITION, "not a transport plugin");
  pw_plugin_release(plugin);
}

Test(plugin_loader, refuses_files_that_are_not_plugins) {
  PW_PT_EXPECT(pw_pt_refused("/nonexistent/libpathways_x.so"), PW_STATUS_NOT_FOUND,
               "/nonexistent/libpathways_x.so", "No such file");
  char dir[64];
  pw_pt_tmpdir(dir);
  PW_PT_EXPECT(pw_pt_refused(dir), PW_STATUS_INVALID_ARGUMENT, dir, "is a directory");
  char path[128];
  snprintf(path, sizeof(path), "%s/text.so", dir);
  FILE* f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs("not a shared object\n", f);
  fclose(f);
  PW_PT_EXPECT(pw_pt_refused(path), PW_STATUS_INVALID_ARGUMENT, path, "cannot be loaded");
  pw_pt_rmtree(dir);
}

Test(plugin_loader, refuses_bad_arguments) {
  pw_plugin_t* plugin = NULL;
  PW_PT_EXPECT(pw_plugin_load(NULL, &plugin), PW_STATUS_INVALID_ARGUMENT, "no path or name");
  PW_PT_EXPECT(pw_plugin_load("", &plugin), PW_STATUS_INVALID_ARGUMENT, "no path or name");
  PW_PT_EXPECT(pw_plugin_load(PW_PT_CPU, NULL), PW_STATUS_INVALID_ARGUMENT, "out_plugin");
  pw_backend_t backend;
  PW_PT_EXPECT(pw_plugin_create_backend(NULL, "", &backend), PW_STATUS_INVALID_ARGUMENT,
               "plugin is NULL");
  plugin = pw_pt_load(PW_PT_CPU);
  PW_PT_EXPECT(pw_plugin_create_backend(plugin, "", NULL), PW_STATUS_INVALID_ARGUMENT,
               "out-struct is NULL");
  pw_plugin_release(plugin);
  pw_plugin_release(NULL);
  cr_assert_null(pw_plugin_factory(NULL));
  cr_assert_null(pw_plugin_path(NULL));
  cr_assert_str_eq(pw_plugin_kind_name(PW_PLUGIN_KIND_BACKEND), "backend");
  cr_assert_str_eq(pw_plugin_kind_name(PW_PLUGIN_KIND_TRANSPORT), "transport");
  cr_assert_str_eq(pw_plugin_kind_name(PW_PLUGIN_KIND_STORE), "store");
  cr_assert_str_eq(pw_plugin_kind_name((pw_plugin_kind_t)0), "unknown");
}

Test(plugin_loader, one_file_loaded_twice_is_one_library) {
  pw_plugin_t* a = pw_pt_load(PW_PT_CPU);
  pw_plugin_t* b = pw_pt_load(PW_PLUGIN_BUILD_DIR "/../plugins/libpathways_cpu.so");
  cr_assert_eq(pw_plugin_factory(a), pw_plugin_factory(b));
  cr_assert_str_eq(pw_plugin_path(a), pw_plugin_path(b), "both resolved to the real path");
  cr_assert_null(strstr(pw_plugin_path(b), ".."));
  pw_plugin_release(a);
  /* The library stays: the factory of b still reads. */
  cr_assert_str_eq(pw_plugin_factory(b)->name, "cpu");
  pw_plugin_release(b);
}

/* Links |dir|/|name| to |target|. */
static void pw_pt_link(const char* dir, const char* name, const char* target) {
  char path[256];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  cr_assert_eq(symlink(target, path), 0, "symlink %s", path);
}

Test(plugin_loader, finds_a_name_through_the_plugin_path_in_order) {
  char a[64], b[64];
  pw_pt_tmpdir(a);
  pw_pt_tmpdir(b);
  pw_pt_link(a, "pathways_mine.so", PW_TEST_PLUGIN_BAD_ABI);
  pw_pt_link(b, "libpathways_mine.so", PW_PT_CPU);
  char env[160];
  /* b first: its libpathways_mine.so is found (an empty entry is skipped). */
  snprintf(env, sizeof(env), "::/nonexistent-dir:%s:%s", b, a);
  setenv("PATHWAYS_PLUGIN_PATH", env, 1);
  pw_plugin_t* plugin = pw_pt_load("mine");
  char real[PATH_MAX];
  cr_assert_not_null(realpath(PW_PT_CPU, real));
  cr_assert_str_eq(pw_plugin_path(plugin), real);
  cr_assert_str_eq(pw_plugin_factory(plugin)->name, "cpu");
  pw_plugin_release(plugin);
  /* a first: its file exists and is refused, and so is the name. */
  snprintf(env, sizeof(env), "%s:%s", a, b);
  setenv("PATHWAYS_PLUGIN_PATH", env, 1);
  char found[128];
  snprintf(found, sizeof(found), "plugin 'mine' (found as %s/pathways_mine.so)", a);
  PW_PT_EXPECT(pw_pt_refused("mine"), PW_STATUS_FAILED_PRECONDITION, found,
               "plugin ABI version 999");
  /* NAME itself comes before the decorated names. */
  pw_pt_link(a, "mine", PW_PT_CPU);
  plugin = pw_pt_load("mine");
  cr_assert_str_eq(pw_plugin_factory(plugin)->name, "cpu");
  pw_plugin_release(plugin);
  pw_pt_rmtree(a);
  pw_pt_rmtree(b);
}

Test(plugin_loader, a_name_found_nowhere_lists_every_place_tried) {
  setenv("PATHWAYS_PLUGIN_PATH", "/nonexistent-a:/nonexistent-b", 1);
  char dir_files[PATH_MAX + 64];
  snprintf(dir_files, sizeof(dir_files), "%s/libpathways_zzz.so", pw_plugin_dir());
  PW_PT_EXPECT(pw_pt_refused("zzz"), PW_STATUS_NOT_FOUND, "plugin 'zzz' not found",
               "/nonexistent-a/zzz, /nonexistent-a/libpathways_zzz.so, "
               "/nonexistent-a/pathways_zzz.so, /nonexistent-b/zzz",
               "PATHWAYS_PLUGIN_PATH='/nonexistent-a:/nonexistent-b'", dir_files);
  unsetenv("PATHWAYS_PLUGIN_PATH");
  PW_PT_EXPECT(pw_pt_refused("zzz"), PW_STATUS_NOT_FOUND, "PATHWAYS_PLUGIN_PATH unset",
               dir_files);
}

Test(plugin_loader, finds_the_bundled_plugins_in_the_plugin_dir) {
  unsetenv("PATHWAYS_PLUGIN_PATH");
  /* This suite links the build tree's libpathways.so: its plugin dir is
   * the build tree's. */
  char want[PATH_MAX], got[PATH_MAX];
  cr_assert_not_null(realpath(PW_PLUGIN_BUILD_DIR, want));
  cr_assert_not_null(realpath(pw_plugin_dir(), got), "pw_plugin_dir '%s'", pw_plugin_dir());
  cr_assert_str_eq(got, want);
  static const char* const names[] = {"cpu", "sim", "inproc", "dir"};
  static const pw_plugin_kind_t kinds[] = {PW_PLUGIN_KIND_BACKEND, PW_PLUGIN_KIND_BACKEND,
                                           PW_PLUGIN_KIND_TRANSPORT, PW_PLUGIN_KIND_STORE};
  for (int i = 0; i < 4; ++i) {
    pw_plugin_t* plugin = pw_pt_load(names[i]);
    const pw_plugin_factory_t* f = pw_plugin_factory(plugin);
    cr_assert_str_eq(f->name, names[i]);
    cr_assert_eq(f->kind, kinds[i]);
    cr_assert_eq(f->abi_version, PW_PLUGIN_ABI_VERSION);
    cr_assert_geq(f->struct_size, PW_PLUGIN_FACTORY_SIZE_V1);
    cr_assert_str_eq(f->version, PW_VERSION_STRING);
    cr_assert(f->description != NULL && f->args_help != NULL);
    cr_assert(strncmp(pw_plugin_path(plugin), want, strlen(want)) == 0);
    pw_plugin_release(plugin);
  }
}

Test(plugin_loader, a_search_passes_over_directories) {
  char a[64], b[64], sub[96];
  pw_pt_tmpdir(a);
  pw_pt_tmpdir(b);
  snprintf(sub, sizeof(sub), "%s/mine", a);
  cr_assert_eq(mkdir(sub, 0700), 0);
  pw_pt_link(b, "libpathways_mine.so", PW_PT_CPU);
  char env[160];
  snprintf(env, sizeof(env), "%s:%s", a, b);
  setenv("PATHWAYS_PLUGIN_PATH", env, 1);
  pw_plugin_t* plugin = pw_pt_load("mine");
  cr_assert_str_eq(pw_plugin_factory(plugin)->name, "cpu");
  pw_plugin_release(plugin);
  pw_pt_rmtree(a);
  pw_pt_rmtree(b);
}
