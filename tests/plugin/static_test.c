/* The loader linked statically (libpathways.a, as pw_add_criterion_test
 * links): pw_plugin_dir is the configured install directory, and a
 * plugin module (which brings the shared libpathways.so) still loads and
 * makes a working object through its vtable. */
#define _XOPEN_SOURCE 700
#include "plugin_test_util.h"

TestSuite(plugin_static, .fini = pw_test_check_leaks, .timeout = 60);

Test(plugin_static, the_plugin_dir_is_the_configured_one) {
  cr_assert_str_eq(pw_plugin_dir(), PW_PLUGIN_INSTALL_FULL_DIR);
}

Test(plugin_static, a_module_loads_beside_the_static_library) {
  pw_plugin_t* plugin = NULL;
  PW_PT_OK(pw_plugin_load(PW_PLUGIN_BUILD_DIR "/libpathways_cpu.so", &plugin));
  pw_backend_t backend;
  PW_PT_OK(pw_plugin_create_backend(plugin, "devices=3,workers=1", &backend));
  cr_assert_eq(backend.vtable->device_count(backend.self), 3);
  /* The module's copy made it: this copy does not know it as its own. */
  cr_assert(!pw_cpu_backend_is_cpu(backend));
  backend.vtable->destroy(backend.self);
  pw_backend_t none;
  PW_PT_EXPECT(pw_plugin_create_backend(plugin, "devices=x", &none), PW_STATUS_INVALID_ARGUMENT,
               "plugin 'cpu'", "devices='x'");
  pw_plugin_release(plugin);
}
