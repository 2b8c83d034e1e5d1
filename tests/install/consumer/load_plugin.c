/* A host that loads the installed bundled plugins by name (pathways/plugin.h):
 * with PATHWAYS_PLUGIN_PATH unset they are found beside the libpathways.so
 * it runs with, wherever the prefix was moved. Prints the path loaded. */
#include <stdio.h>
#include <stdlib.h>

#include <pathways/pathways.h>

int main(void) {
  unsetenv("PATHWAYS_PLUGIN_PATH");
  static const char* const names[] = {"cpu", "sim", "inproc", "dir"};
  for (int i = 0; i < 4; ++i) {
    pw_plugin_t* plugin = NULL;
    pw_status_t s = pw_plugin_load(names[i], &plugin);
    if (s != NULL) {
      fprintf(stderr, "load %s: %s\n", names[i], pw_status_message(s));
      pw_status_free(s);
      return 1;
    }
    printf("plugin %s: %s\n", names[i], pw_plugin_path(plugin));
    if (i == 0) {
      pw_backend_t backend;
      s = pw_plugin_create_backend(plugin, "devices=2,workers=1", &backend);
      if (s != NULL) {
        fprintf(stderr, "create cpu: %s\n", pw_status_message(s));
        pw_status_free(s);
        return 1;
      }
      backend.vtable->destroy(backend.self);
    }
    pw_plugin_release(plugin);
  }
  printf("plugins ok: %s\n", pw_plugin_dir());
  return 0;
}
