/* Checked calls into backend vtables; see backend_call.h. */
#include "plugin/backend_call.h"

#include <string.h>

#include "plugin/plug.h"

static const pw__plug_kind_t pw_backend_kind = {
    "backend", "(unnamed backend)", PW_BACKEND_VTABLE_SIZE_V1,
    offsetof(pw_backend_vtable_t, name), true};

static const void* pw_backend_vtable(const pw_backend_t* backend) {
  return backend ? (const void*)backend->vtable : NULL;
}

const char* pw__backend_name(const pw_backend_t* backend) {
  return pw__plug_name(&pw_backend_kind, pw_backend_vtable(backend));
}

pw_status_t pw__backend_check(const pw_backend_t* backend) {
  return pw__plug_check(&pw_backend_kind, pw_backend_vtable(backend));
}

bool pw__backend_has(const pw_backend_t* backend, size_t method_offset,
                     size_t method_size) {
  return pw__plug_has(pw_backend_vtable(backend), method_offset, method_size);
}

#define PW_BACKEND_REQUIRE(backend, method)                                         \
  do {                                                                              \
    if (!PW__BACKEND_HAS(backend, method)) {                                        \
      return pw__plug_unimplemented(&pw_backend_kind, pw_backend_vtable(backend),   \
                                    #method);                                       \
    }                                                                               \
  } while (0)

#define PW_BACKEND_BROKEN(backend, ...) \
  pw__plug_broken(&pw_backend_kind, pw_backend_vtable(backend), __VA_ARGS__)

void pw__backend_destroy(const pw_backend_t* backend) {
  if (PW__BACKEND_HAS(backend, destroy)) backend->vtable->destroy(backend->self);
}

uint32_t pw__backend_device_count(const pw_backend_t* backend) {
  if (!PW__BACKEND_HAS(backend, device_count)) return 0;
  return backend->vtable->device_count(backend->self);
}

pw_status_t pw__backend_device_info(const pw_backend_t* backend, uint32_t device,
                                    pw_backend_device_info_t* out_info) {
  memset(out_info, 0, sizeof(*out_info));
  out_info->struct_size = sizeof(*out_info);
  PW_BACKEND_REQUIRE(backend, device_info);
  return backend->vtable->device_info(backend->self, device, out_info);
}

pw_device_health_t pw__backend_health(const pw_backend_t* backend, uint32_t device) {
  if (!PW__BACKEND_HAS(backend, health)) return PW_DEVICE_HEALTHY;
  return backend->vtable->health(backend->self, device);
}

pw_status_t pw__backend_compile(const pw_backend_t* backend, const void* program,
                                size_t program_size, const pw_mesh_shape_t* mesh,
                                const char* options, pw_allocator_t allocator,
                                void** out_bytes, size_t* out_size) {
  *out_bytes = NULL;
  *out_size = 0;
  PW_BACKEND_REQUIRE(backend, compile);
  pw_status_t status = backend->vtable->compile(backend->self, program, program_size,
                                                mesh, options ? options : "",
                                                allocator, out_bytes, out_size);
  if (status == NULL && *out_bytes == NULL && *out_size != 0) {
    return PW_BACKEND_BROKEN(backend, "compile returned OK without bytes");
  }
  return status;
}

pw_status_t pw__backend_load(const pw_backend_t* backend, const void* bytes,
                             size_t size, pw_backend_executable_t* out_executable,
                             pw_executable_signature_t* out_signature) {
  *out_executable = NULL;
  memset(out_signature, 0, sizeof(*out_signature));
  out_signature->struct_size = sizeof(*out_signature);
  PW_BACKEND_REQUIRE(backend, load);
  PW_BACKEND_REQUIRE(backend, unload);
  pw_status_t status = backend->vtable->load(backend->self, bytes, size,
                                             out_executable, out_signature);
  if (status != NULL) return status;
  out_signature->struct_size = sizeof(*out_signature); /* the backend may not write it */
  if (*out_executable == NULL) {
    return PW_BACKEND_BROKEN(backend, "load returned OK without an executable");
  }
  pw_executable_signature_t* sig = out_signature;
  sig->name[sizeof(sig->name) - 1] = '\0';
  pw_status_t bad = NULL;
  if (sig->input_count > PW_EXECUTABLE_MAX_PARAMS || sig->output_count > PW_EXECUTABLE_MAX_PARAMS) {
    bad = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                         "backend '%s': executable '%s' has %u inputs and %u outputs "
                         "(maximum %u each)",
                         pw__backend_name(backend), sig->name, sig->input_count,
                         sig->output_count, PW_EXECUTABLE_MAX_PARAMS);
  } else if ((sig->input_count > PW_BACKEND_MAX_PARAMS && sig->input_specs == NULL) ||
             (sig->output_count > PW_BACKEND_MAX_PARAMS && sig->output_specs == NULL)) {
    bad = PW_BACKEND_BROKEN(backend,
                            "load reported %u inputs / %u outputs for executable '%s' "
                            "(over the %d of the fixed arrays) without input_specs / "
                            "output_specs",
                            sig->input_count, sig->output_count, sig->name,
                            PW_BACKEND_MAX_PARAMS);
  }
  if (bad != NULL) {
    backend->vtable->unload(backend->self, *out_executable);
    *out_executable = NULL;
    return bad;
  }
  return NULL;
}

void pw__backend_unload(const pw_backend_t* backend,
                        pw_backend_executable_t executable) {
  if (executable && PW__BACKEND_HAS(backend, unload)) {
    backend->vtable->unload(backend->self, executable);
  }
}

pw_status_t pw__backend_allocate(const pw_backend_t* backend, uint32_t device,
                                 size_t size, pw_backend_memory_t* out_memory) {
  *out_memory = NULL;
  PW_BACKEND_REQUIRE(backend, allocate);
  PW_BACKEND_REQUIRE(backend, deallocate);
  pw_status_t status = backend->vtable->allocate(backend->self, device, size, out_memory);
  if (status == NULL && *out_memory == NULL) {
    return PW_BACKEND_BROKEN(backend, "allocate returned OK without memory");
  }
  return status;
}

void pw__backend_deallocate(const pw_backend_t* backend, uint32_t device,
                            pw_backend_memory_t memory) {
  if (memory && PW__BACKEND_HAS(backend, deallocate)) {
    backend->vtable->deallocate(backend->self, device, memory);
  }
}

pw_status_t pw__backend_launch(const pw_backend_t* backend,
                               const pw_backend_launch_t* launch) {
  PW_BACKEND_REQUIRE(backend, launch);
  return backend->vtable->launch(backend->self, launch);
}

pw_status_t pw__backend_copy_to_device(const pw_backend_t* backend,
                                       uint32_t device, pw_backend_memory_t dst,
                                       size_t offset, const void* src,
                                       size_t size) {
  PW_BACKEND_REQUIRE(backend, copy_to_device);
  return backend->vtable->copy_to_device(backend->self, device, dst, offset, src, size);
}

pw_status_t pw__backend_copy_to_host(const pw_backend_t* backend, uint32_t device,
                                     pw_backend_memory_t src, size_t offset,
                                     void* dst, size_t size) {
  PW_BACKEND_REQUIRE(backend, copy_to_host);
  return backend->vtable->copy_to_host(backend->self, device, src, offset, dst, size);
}

void* pw__backend_host_pointer(const pw_backend_t* backend, uint32_t device,
                               pw_backend_memory_t memory) {
  if (!PW__BACKEND_HAS(backend, host_pointer)) return NULL;
  return backend->vtable->host_pointer(backend->self, device, memory);
}

pw_status_t pw__backend_adopt_host(const pw_backend_t* backend, uint32_t device, void* host,
                                   size_t size, pw_backend_memory_t* out_memory) {
  *out_memory = NULL;
  PW_BACKEND_REQUIRE(backend, adopt_host);
  PW_BACKEND_REQUIRE(backend, deallocate);
  pw_status_t status =
      backend->vtable->adopt_host(backend->self, device, host, size, out_memory);
  if (status == NULL && *out_memory == NULL) {
    return PW_BACKEND_BROKEN(backend, "adopt_host returned OK without memory");
  }
  return status;
}

pw_status_t pw__backend_accumulate(const pw_backend_t* backend, uint32_t device,
                                   pw_dtype_t dtype, pw_backend_memory_t dst, size_t dst_offset,
                                   pw_backend_memory_t src, size_t src_offset, size_t count) {
  PW_BACKEND_REQUIRE(backend, accumulate);
  return backend->vtable->accumulate(backend->self, device, dtype, dst, dst_offset, src,
                                     src_offset, count);
}

const char* pw_device_health_name(pw_device_health_t health) {
  switch (health) {
    case PW_DEVICE_HEALTHY: return "healthy";
    case PW_DEVICE_DEGRADED: return "degraded";
    case PW_DEVICE_FAILED: return "failed";
  }
  return "unknown";
}
