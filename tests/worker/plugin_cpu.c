/* A backend plugin (include/pathways/backend_plugin.h) wrapping the CPU
 * backend, as a host application's shared object would be. ARGS:
 * "devices=N" (default 1). Built twice: as itself, and with
 * PW_TEST_PLUGIN_ABI set to a wrong ABI the loader must refuse. */
#include <stdlib.h>
#include <string.h>

#include "pathways/backend_plugin.h"
#include "pathways/backends/cpu.h"

#ifndef PW_TEST_PLUGIN_ABI
#define PW_TEST_PLUGIN_ABI PW_BACKEND_PLUGIN_ABI
#endif

#define PW_TEST_EXPORT __attribute__((visibility("default")))

PW_TEST_EXPORT uint32_t pw_backend_plugin_abi(void);
PW_TEST_EXPORT pw_status_t pw_backend_plugin_create(const char* args, pw_backend_t* out_backend);

uint32_t pw_backend_plugin_abi(void) { return PW_TEST_PLUGIN_ABI; }

pw_status_t pw_backend_plugin_create(const char* args, pw_backend_t* out_backend) {
  memset(out_backend, 0, sizeof(*out_backend));
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = 1;
  o.stream_depth = 4;
  o.device_memory_bytes = 1u << 20;
  if (strncmp(args, "devices=", 8) == 0) {
    char* end = NULL;
    unsigned long n = strtoul(args + 8, &end, 10);
    if (end == args + 8 || *end != '\0' || n == 0 || n > 64) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "plugin_cpu: bad args '%s'", args);
    }
    o.device_count = (uint32_t)n;
  } else if (args[0] != '\0') {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "plugin_cpu: args '%s' (expected devices=N)", args);
  }
  return pw_cpu_backend_create(&o, out_backend);
}
