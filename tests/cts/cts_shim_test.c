/* The runtime's checked calls into a backend (lib/plugin/backend_call.h)
 * against deliberately broken vtables from the test double: too short,
 * NULL methods, no name, and a vtable from a newer ABI. Missing methods are
 * UNIMPLEMENTED naming the backend and the method, never a crash. */
#include <stdio.h>
#include <string.h>

#include "cts/cts.h"
#include "cts/double_backend.h"

TestSuite(cts_shim, .fini = pw_test_check_leaks);

static pw_backend_t pw_shim_make(pw_double_vtable_variant_t variant) {
  pw_backend_t b;
  PW_CTS_OK(pw_double_backend_create_variant(NULL, variant, &b));
  cr_assert_not_null(pw_double_backend_from(&b), "variant %d is still a double", (int)variant);
  return b;
}

/* |status| must be UNIMPLEMENTED with |method| in its message. */
static void pw_shim_expect_unimplemented(pw_status_t status, const char* method) {
  cr_assert_not_null(status, "%s: expected UNIMPLEMENTED, got OK", method);
  char text[256];
  snprintf(text, sizeof(text), "%s", pw_status_message(status));
  pw_status_code_t code = pw_status_code(status);
  pw_status_free(status);
  cr_assert_eq(code, PW_STATUS_UNIMPLEMENTED, "%s: %s", method, text);
  cr_assert(strstr(text, method) != NULL, "message '%s' does not name %s", text, method);
}

/* Calls every status-returning method through the shim, expecting each to
 * be UNIMPLEMENTED (if |launch_and_copies_only|, only those beyond a short
 * vtable). */
static void pw_shim_expect_all_unimplemented(const pw_backend_t* b, bool launch_and_copies_only) {
  unsigned char buffer[16];
  uint32_t one = 1;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &one);
  pw_backend_launch_t launch;
  memset(&launch, 0, sizeof(launch));
  launch.struct_size = sizeof(launch);
  pw_backend_memory_t fake = (pw_backend_memory_t)buffer;
  pw_shim_expect_unimplemented(pw__backend_launch(b, &launch), "launch");
  pw_shim_expect_unimplemented(pw__backend_copy_to_device(b, 0, fake, 0, buffer, 1),
                               "copy_to_device");
  pw_shim_expect_unimplemented(pw__backend_copy_to_host(b, 0, fake, 0, buffer, 1),
                               "copy_to_host");
  cr_assert_null(pw__backend_host_pointer(b, 0, fake));
  if (launch_and_copies_only) return;
  pw_backend_device_info_t info;
  pw_shim_expect_unimplemented(pw__backend_device_info(b, 0, &info), "device_info");
  void* bytes = buffer;
  size_t size = 1;
  pw_shim_expect_unimplemented(pw__backend_compile(b, "copy", 4, &mesh, NULL,
                                                   pw_allocator_system(), &bytes, &size),
                               "compile");
  cr_assert(bytes == NULL && size == 0, "compile out-params not cleared");
  pw_backend_executable_t e = (pw_backend_executable_t)buffer;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  pw_shim_expect_unimplemented(pw__backend_load(b, buffer, 4, &e, &sig), "load");
  cr_assert_null(e, "load out-param not cleared");
  pw_backend_memory_t m = fake;
  pw_shim_expect_unimplemented(pw__backend_allocate(b, 0, 8, &m), "allocate");
  cr_assert_null(m, "allocate out-param not cleared");
  cr_assert_eq(pw__backend_device_count(b), 0);
  cr_assert_eq(pw__backend_health(b, 0), PW_DEVICE_HEALTHY);
  /* void methods: silently nothing. */
  pw__backend_unload(b, (pw_backend_executable_t)buffer);
  pw__backend_deallocate(b, 0, fake);
}

Test(cts_shim, short_vtable_is_rejected_and_methods_beyond_it_unimplemented) {
  pw_backend_t b = pw_shim_make(PW_DOUBLE_VTABLE_SHORT);
  cr_assert_lt(b.vtable->struct_size, PW_BACKEND_VTABLE_SIZE_V1);
  pw_status_t status = pw__backend_check(&b);
  cr_assert_eq(pw_status_code(status), PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(pw_status_message(status), "struct_size") != NULL, "%s",
            pw_status_message(status));
  pw_status_free(status);
  cr_assert(!PW__BACKEND_HAS(&b, launch));
  cr_assert(!PW__BACKEND_HAS(&b, copy_to_device));
  cr_assert(!PW__BACKEND_HAS(&b, host_pointer));
  cr_assert(PW__BACKEND_HAS(&b, compile));
  pw_shim_expect_all_unimplemented(&b, true);
  /* Methods inside the short struct still work. */
  cr_assert_eq(pw__backend_device_count(&b), 8);
  pw_backend_memory_t m = NULL;
  PW_CTS_OK(pw__backend_allocate(&b, 0, 8, &m));
  pw__backend_deallocate(&b, 0, m);
  pw__backend_destroy(&b);
}

Test(cts_shim, null_methods_are_unimplemented) {
  pw_backend_t b = pw_shim_make(PW_DOUBLE_VTABLE_NULL_METHODS);
  PW_CTS_OK(pw__backend_check(&b)); /* size and name are fine */
  cr_assert(!PW__BACKEND_HAS(&b, device_count));
  cr_assert(PW__BACKEND_HAS(&b, destroy));
  pw_shim_expect_all_unimplemented(&b, false);
  pw_shim_expect_unimplemented(pw__backend_launch(&b, NULL), "launch");
  cr_assert(strstr(pw__backend_name(&b), "null-methods") != NULL);
  pw__backend_destroy(&b);
}

Test(cts_shim, missing_name_is_rejected) {
  pw_backend_t b = pw_shim_make(PW_DOUBLE_VTABLE_NO_NAME);
  pw_status_t status = pw__backend_check(&b);
  cr_assert_eq(pw_status_code(status), PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(pw_status_message(status), "name") != NULL);
  pw_status_free(status);
  cr_assert_str_eq(pw__backend_name(&b), "(unnamed backend)");
  pw__backend_destroy(&b);
}

Test(cts_shim, future_vtable_is_accepted_as_v1) {
  pw_backend_t b = pw_shim_make(PW_DOUBLE_VTABLE_FUTURE);
  cr_assert_gt(b.vtable->struct_size, sizeof(pw_backend_vtable_t));
  PW_CTS_OK(pw__backend_check(&b));
  /* Every v1 method works: compile, load, memory, a launch. */
  uint32_t one = 1;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &one);
  static const char program[] = "fill 7\noutput u8[4] replicated\n";
  void* bytes = NULL;
  size_t size = 0;
  PW_CTS_OK(pw__backend_compile(&b, program, sizeof(program) - 1, &mesh, NULL,
                                pw_allocator_system(), &bytes, &size));
  pw_backend_executable_t e = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  PW_CTS_OK(pw__backend_load(&b, bytes, size, &e, &sig));
  pw_allocator_free(pw_allocator_system(), bytes, size);
  cr_assert_str_eq(sig.name, "fill");
  pw_backend_memory_t m = NULL;
  PW_CTS_OK(pw__backend_allocate(&b, 0, 4, &m));
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, 1);
  uint32_t device = 0;
  pw_backend_launch_t l;
  memset(&l, 0, sizeof(l));
  l.struct_size = sizeof(l);
  l.executable = e;
  l.group_devices = &device;
  l.group_size = 1;
  l.outputs = &m;
  l.output_count = 1;
  l.done = pw_cts_done;
  l.done_user = &tracker.slots[0];
  PW_CTS_OK(pw__backend_launch(&b, &l));
  pw_cts_tracker_wait(&tracker, 1, "launch on a future vtable");
  unsigned char out[4];
  PW_CTS_OK(pw__backend_copy_to_host(&b, 0, m, 0, out, sizeof(out)));
  cr_assert(out[0] == 7 && out[3] == 7);
  cr_assert_not_null(pw__backend_host_pointer(&b, 0, m));
  pw__backend_deallocate(&b, 0, m);
  pw__backend_unload(&b, e);
  pw__backend_destroy(&b);
  pw_cts_tracker_free(&tracker);
}

Test(cts_shim, no_vtable_at_all) {
  pw_backend_t b;
  memset(&b, 0, sizeof(b));
  pw_status_t status = pw__backend_check(&b);
  cr_assert_eq(pw_status_code(status), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(status);
  pw_shim_expect_all_unimplemented(&b, false);
  pw__backend_destroy(&b); /* no-op, no crash */
  cr_assert_null(pw_double_backend_from(&b));
}

/* A backend that breaks its own contract: claims success without the
 * out-value, or reports impossible signatures. */
static int pw_shim_liar_unloads;
static int pw_shim_liar_token;

static pw_status_t pw_shim_liar_compile(void* self, const void* program, size_t program_size,
                                        const pw_mesh_shape_t* mesh, const char* options,
                                        pw_allocator_t allocator, void** out_bytes,
                                        size_t* out_size) {
  *out_size = 5; /* ...but no bytes */
  return NULL;
}

static pw_status_t pw_shim_liar_load(void* self, const void* bytes, size_t size,
                                     pw_backend_executable_t* out_executable,
                                     pw_executable_signature_t* out_signature) {
  if (size == 1) return NULL; /* no executable */
  *out_executable = (pw_backend_executable_t)&pw_shim_liar_token;
  out_signature->input_count = PW_BACKEND_MAX_PARAMS + 1;
  return NULL;
}

static void pw_shim_liar_unload(void* self, pw_backend_executable_t executable) {
  if (executable == (pw_backend_executable_t)&pw_shim_liar_token) ++pw_shim_liar_unloads;
}

static pw_status_t pw_shim_liar_allocate(void* self, uint32_t device, size_t size,
                                         pw_backend_memory_t* out_memory) {
  return NULL; /* no memory */
}

static void pw_shim_liar_deallocate(void* self, uint32_t device, pw_backend_memory_t memory) {}

static const pw_backend_vtable_t pw_shim_liar_vtable = {
    .struct_size = sizeof(pw_backend_vtable_t),
    .name = "liar",
    .version = 1,
    .compile = pw_shim_liar_compile,
    .load = pw_shim_liar_load,
    .unload = pw_shim_liar_unload,
    .allocate = pw_shim_liar_allocate,
    .deallocate = pw_shim_liar_deallocate,
};

static void pw_shim_expect_internal(pw_status_t status, const char* what) {
  cr_assert_not_null(status, "%s: expected INTERNAL, got OK", what);
  pw_status_code_t code = pw_status_code(status);
  bool named = strstr(pw_status_message(status), "liar") != NULL;
  pw_status_free(status);
  cr_assert_eq(code, PW_STATUS_INTERNAL, "%s", what);
  cr_assert(named, "%s: message does not name the backend", what);
}

Test(cts_shim, backend_contract_violations_are_internal) {
  pw_backend_t b = {&pw_shim_liar_vtable, NULL};
  PW_CTS_OK(pw__backend_check(&b));
  uint32_t one = 1;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &one);
  void* bytes = NULL;
  size_t size = 0;
  pw_shim_expect_internal(pw__backend_compile(&b, "x", 1, &mesh, NULL, pw_allocator_system(),
                                              &bytes, &size),
                          "compile without bytes");
  pw_backend_executable_t e = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  pw_shim_expect_internal(pw__backend_load(&b, "x", 1, &e, &sig), "load without executable");
  pw_shim_expect_internal(pw__backend_load(&b, "xy", 2, &e, &sig), "load with 17 inputs");
  cr_assert_null(e, "the refused executable was handed out");
  cr_assert_eq(pw_shim_liar_unloads, 1, "the refused executable was not unloaded");
  pw_backend_memory_t m = NULL;
  pw_shim_expect_internal(pw__backend_allocate(&b, 0, 8, &m), "allocate without memory");
  /* Methods it lacks are UNIMPLEMENTED; device_count falls back to 0. */
  pw_shim_expect_unimplemented(pw__backend_launch(&b, NULL), "launch");
  cr_assert_eq(pw__backend_device_count(&b), 0);
  pw__backend_destroy(&b); /* no destroy method: nothing happens */
}
