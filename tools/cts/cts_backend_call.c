/* pathways-cts: checked calls into a backend's vtable, as the runtime
 * makes them (a NULL method, or one beyond struct_size, is UNIMPLEMENTED
 * naming the backend and the method; a backend that breaks its own
 * contract is INTERNAL naming it). Written against pathways/backend.h
 * only. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, strnlen */
#include <time.h>
#include <stdarg.h>
#include <stdio.h>

#include "cts_backend.h"

const char* pw_cts_backend_name(const pw_backend_t* backend) {
  const pw_backend_vtable_t* v = backend != NULL ? backend->vtable : NULL;
  if (v == NULL || v->struct_size < offsetof(pw_backend_vtable_t, name) + sizeof(v->name) ||
      v->name == NULL) {
    return "(unnamed backend)";
  }
  return v->name;
}

pw_status_t pw_cts_backend_check(const pw_backend_t* backend) {
  const pw_backend_vtable_t* v = backend != NULL ? backend->vtable : NULL;
  if (v == NULL) return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "backend has no vtable");
  if (v->struct_size < PW_BACKEND_VTABLE_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "backend '%s': vtable struct_size %zu is smaller than v1 (%zu)",
                          pw_cts_backend_name(backend), v->struct_size,
                          (size_t)PW_BACKEND_VTABLE_SIZE_V1);
  }
  if (v->name == NULL || v->name[0] == '\0') {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "backend vtable has no name");
  }
  return NULL;
}

bool pw_cts_backend_has(const pw_backend_t* backend, size_t method_offset, size_t method_size) {
  if (backend == NULL || backend->vtable == NULL) return false;
  if (backend->vtable->struct_size < method_offset + method_size) return false;
  void (*fn)(void) = NULL;
  memcpy(&fn, (const char*)backend->vtable + method_offset, sizeof(fn));
  return fn != NULL;
}

#define PW_CTS_REQUIRE(backend, method)                                                 \
  do {                                                                                  \
    if (!PW_CTS_BACKEND_HAS(backend, method)) {                                         \
      return pw_status_make(PW_STATUS_UNIMPLEMENTED, "backend '%s' does not implement %s", \
                            pw_cts_backend_name(backend), #method);                     \
    }                                                                                   \
  } while (0)

static pw_status_t pw_cts_backend_broken(const pw_backend_t* backend, const char* what) {
  return pw_status_make(PW_STATUS_INTERNAL, "backend '%s' %s", pw_cts_backend_name(backend),
                        what);
}

void pw_cts_backend_destroy(const pw_backend_t* backend) {
  if (PW_CTS_BACKEND_HAS(backend, destroy)) backend->vtable->destroy(backend->self);
}

uint32_t pw_cts_backend_device_count(const pw_backend_t* backend) {
  if (!PW_CTS_BACKEND_HAS(backend, device_count)) return 0;
  return backend->vtable->device_count(backend->self);
}

pw_status_t pw_cts_backend_device_info(const pw_backend_t* backend, uint32_t device,
                                       pw_backend_device_info_t* out_info) {
  memset(out_info, 0, sizeof(*out_info));
  out_info->struct_size = sizeof(*out_info);
  PW_CTS_REQUIRE(backend, device_info);
  return backend->vtable->device_info(backend->self, device, out_info);
}

pw_device_health_t pw_cts_backend_health(const pw_backend_t* backend, uint32_t device) {
  if (!PW_CTS_BACKEND_HAS(backend, health)) return PW_DEVICE_HEALTHY;
  return backend->vtable->health(backend->self, device);
}

pw_status_t pw_cts_backend_compile(const pw_backend_t* backend, const void* program,
                                   size_t program_size, const pw_mesh_shape_t* mesh,
                                   const char* options, pw_allocator_t allocator,
                                   void** out_bytes, size_t* out_size) {
  *out_bytes = NULL;
  *out_size = 0;
  PW_CTS_REQUIRE(backend, compile);
  pw_status_t status = backend->vtable->compile(backend->self, program, program_size, mesh,
                                                options ? options : "", allocator, out_bytes,
                                                out_size);
  if (status == NULL && *out_bytes == NULL && *out_size != 0) {
    return pw_cts_backend_broken(backend, "compile returned OK without bytes");
  }
  return status;
}

pw_status_t pw_cts_backend_load(const pw_backend_t* backend, const void* bytes, size_t size,
                                pw_backend_executable_t* out_executable,
                                pw_executable_signature_t* out_signature) {
  *out_executable = NULL;
  memset(out_signature, 0, sizeof(*out_signature));
  out_signature->struct_size = sizeof(*out_signature);
  PW_CTS_REQUIRE(backend, load);
  PW_CTS_REQUIRE(backend, unload);
  pw_status_t status =
      backend->vtable->load(backend->self, bytes, size, out_executable, out_signature);
  if (status != NULL) return status;
  out_signature->struct_size = sizeof(*out_signature);
  if (*out_executable == NULL) {
    return pw_cts_backend_broken(backend, "load returned OK without an executable");
  }
  const pw_executable_signature_t* sig = out_signature;
  if (sig->input_count > PW_EXECUTABLE_MAX_PARAMS || sig->output_count > PW_EXECUTABLE_MAX_PARAMS ||
      (sig->input_count > PW_BACKEND_MAX_PARAMS && sig->input_specs == NULL) ||
      (sig->output_count > PW_BACKEND_MAX_PARAMS && sig->output_specs == NULL)) {
    backend->vtable->unload(backend->self, *out_executable);
    *out_executable = NULL;
    return pw_cts_backend_broken(backend,
                                 "load reported more parameters than PW_EXECUTABLE_MAX_PARAMS, "
                                 "or more than the fixed arrays hold without input_specs / "
                                 "output_specs");
  }
  return NULL;
}

void pw_cts_backend_unload(const pw_backend_t* backend, pw_backend_executable_t executable) {
  if (executable && PW_CTS_BACKEND_HAS(backend, unload)) {
    backend->vtable->unload(backend->self, executable);
  }
}

pw_status_t pw_cts_backend_allocate(const pw_backend_t* backend, uint32_t device, size_t size,
                                    pw_backend_memory_t* out_memory) {
  *out_memory = NULL;
  PW_CTS_REQUIRE(backend, allocate);
  PW_CTS_REQUIRE(backend, deallocate);
  pw_status_t status = backend->vtable->allocate(backend->self, device, size, out_memory);
  if (status == NULL && *out_memory == NULL) {
    return pw_cts_backend_broken(backend, "allocate returned OK without memory");
  }
  return status;
}

void pw_cts_backend_deallocate(const pw_backend_t* backend, uint32_t device,
                               pw_backend_memory_t memory) {
  if (memory && PW_CTS_BACKEND_HAS(backend, deallocate)) {
    backend->vtable->deallocate(backend->self, device, memory);
  }
}

pw_status_t pw_cts_backend_launch(const pw_backend_t* backend, const pw_backend_launch_t* launch) {
  PW_CTS_REQUIRE(backend, launch);
  return backend->vtable->launch(backend->self, launch);
}

pw_status_t pw_cts_backend_copy_to_device(const pw_backend_t* backend, uint32_t device,
                                          pw_backend_memory_t dst, size_t offset,
                                          const void* src, size_t size) {
  PW_CTS_REQUIRE(backend, copy_to_device);
  return backend->vtable->copy_to_device(backend->self, device, dst, offset, src, size);
}

pw_status_t pw_cts_backend_copy_to_host(const pw_backend_t* backend, uint32_t device,
                                        pw_backend_memory_t src, size_t offset, void* dst,
                                        size_t size) {
  PW_CTS_REQUIRE(backend, copy_to_host);
  return backend->vtable->copy_to_host(backend->self, device, src, offset, dst, size);
}

void* pw_cts_backend_host_pointer(const pw_backend_t* backend, uint32_t device,
                                  pw_backend_memory_t memory) {
  if (!PW_CTS_BACKEND_HAS(backend, host_pointer)) return NULL;
  return backend->vtable->host_pointer(backend->self, device, memory);
}
