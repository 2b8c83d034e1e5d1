/* Plugin libraries that break the contract of pathways/plugin.h, one per
 * build (tests/plugin/CMakeLists.txt sets PW_TEST_PLUGIN_CASE), for the
 * loader's refusals; plus two that keep it in unusual ways (a factory
 * larger than v1, a create that fails). */
#include <string.h>

#include "pathways/plugin.h"
#include "pathways/transports/inproc.h"

#define PW_TP_NO_ENTRY 1
#define PW_TP_NULL_FACTORY 2
#define PW_TP_BAD_ABI 3
#define PW_TP_SMALL 4
#define PW_TP_TINY 5
#define PW_TP_WRONG_KIND 6
#define PW_TP_NO_CREATE 7
#define PW_TP_BAD_NAME 8
#define PW_TP_CREATE_FAILS 9
#define PW_TP_NO_VTABLE 10
#define PW_TP_BIG 11

#ifndef PW_TEST_PLUGIN_CASE
#error "PW_TEST_PLUGIN_CASE must be set"
#endif

/* Each build uses some of the functions below. */
#define PW_TP_MAYBE_UNUSED __attribute__((unused))

/* Fails, after scribbling on the out-struct (the loader zeroes it). */
PW_TP_MAYBE_UNUSED static pw_status_t pw_tp_create_fails(const char* args,
                                                         pw_backend_t* out_backend) {
  out_backend->self = (void*)out_backend;
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "the test plugin refuses args '%s'", args);
}

/* Says OK and makes nothing (a self without a vtable). */
PW_TP_MAYBE_UNUSED static pw_status_t pw_tp_create_nothing(const char* args,
                                                           pw_backend_t* out_backend) {
  (void)args;
  out_backend->vtable = NULL;
  out_backend->self = (void*)out_backend;
  return NULL;
}

static pw_status_t pw_tp_create_store(const char* args, pw_store_t* out_store) {
  (void)args;
  memset(out_store, 0, sizeof(*out_store));
  return pw_status_make(PW_STATUS_INTERNAL, "never called");
}

PW_TP_MAYBE_UNUSED static pw_status_t pw_tp_create_inproc(const char* args,
                                                          pw_transport_t* out_transport) {
  (void)args;
  return pw_inproc_transport_create(NULL, out_transport);
}

/* A factory from a newer header: v1 and then fields this build does not know. */
typedef struct pw_tp_big_factory_t {
  pw_plugin_factory_t v1;
  void* v2_fields[8];
} pw_tp_big_factory_t;

PW_TP_MAYBE_UNUSED static const pw_tp_big_factory_t pw_tp_factory = {
    .v1 =
        {
#if PW_TEST_PLUGIN_CASE == PW_TP_SMALL
            .struct_size = PW_PLUGIN_FACTORY_SIZE_V1 - sizeof(void*),
#elif PW_TEST_PLUGIN_CASE == PW_TP_TINY
            .struct_size = sizeof(size_t),
#elif PW_TEST_PLUGIN_CASE == PW_TP_BIG
            .struct_size = sizeof(pw_tp_big_factory_t),
#else
            .struct_size = sizeof(pw_plugin_factory_t),
#endif
#if PW_TEST_PLUGIN_CASE == PW_TP_BAD_ABI
            .abi_version = 999u,
#else
            .abi_version = PW_PLUGIN_ABI_VERSION,
#endif
#if PW_TEST_PLUGIN_CASE == PW_TP_WRONG_KIND
            .kind = (pw_plugin_kind_t)42,
#elif PW_TEST_PLUGIN_CASE == PW_TP_BIG
            .kind = PW_PLUGIN_KIND_TRANSPORT,
#else
            .kind = PW_PLUGIN_KIND_BACKEND,
#endif
#if PW_TEST_PLUGIN_CASE == PW_TP_BAD_NAME
            .name = "Bad Name",
#else
            .name = "test-plugin",
#endif
            .version = "0",
            .description = "a test plugin (tests/plugin/test_plugins.c)",
#if PW_TEST_PLUGIN_CASE == PW_TP_CREATE_FAILS
            .create_backend = pw_tp_create_fails,
#elif PW_TEST_PLUGIN_CASE == PW_TP_NO_VTABLE
            .create_backend = pw_tp_create_nothing,
#elif PW_TEST_PLUGIN_CASE == PW_TP_NO_CREATE
            .create_backend = NULL,
#elif PW_TEST_PLUGIN_CASE == PW_TP_BIG
            .create_transport = pw_tp_create_inproc,
#else
            .create_backend = pw_tp_create_fails,
#endif
            /* Set in every case: a create of another kind is ignored. */
            .create_store = pw_tp_create_store,
        },
};

#if PW_TEST_PLUGIN_CASE == PW_TP_NO_ENTRY
/* Exports something, but not the entry point. */
PW_PLUGIN_EXPORT const void* pw_plugin_entry_point(void);
const void* pw_plugin_entry_point(void) { return &pw_tp_factory; }
#else
PW_PLUGIN_EXPORT const pw_plugin_factory_t* pw_plugin_entry(uint32_t loader_abi);
const pw_plugin_factory_t* pw_plugin_entry(uint32_t loader_abi) {
  (void)loader_abi;
#if PW_TEST_PLUGIN_CASE == PW_TP_NULL_FACTORY
  return NULL;
#else
  return &pw_tp_factory.v1;
#endif
}
#endif
