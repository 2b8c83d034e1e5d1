/* Internal: checked calls into a host-plugged backend vtable.
 *
 * Every call the runtime makes into a backend goes through these: a vtable
 * whose struct_size is too small, or a NULL method, or a method beyond
 * struct_size, yields UNIMPLEMENTED naming the backend and the method —
 * never a crash. A backend that violates its own contract (NULL out-value
 * on success) is reported as INTERNAL naming it. */
#ifndef PW_PLUGIN_BACKEND_CALL_H_
#define PW_PLUGIN_BACKEND_CALL_H_

#include "pathways/backend.h"

/* OK if |backend| has a vtable of at least PW_BACKEND_VTABLE_SIZE_V1 bytes
 * and a name; INVALID_ARGUMENT naming the problem otherwise. */
pw_status_t pw__backend_check(const pw_backend_t* backend);

/* The backend's name for messages ("cpu"), "(unnamed backend)" if unset. */
const char* pw__backend_name(const pw_backend_t* backend);

/* True if |method| (a field of pw_backend_vtable_t given by offset) is
 * present: inside struct_size and non-NULL. */
bool pw__backend_has(const pw_backend_t* backend, size_t method_offset,
                     size_t method_size);
#define PW__BACKEND_HAS(backend, method)                                  \
  pw__backend_has((backend), offsetof(pw_backend_vtable_t, method),       \
                  sizeof(((pw_backend_vtable_t*)0)->method))

void pw__backend_destroy(const pw_backend_t* backend);
uint32_t pw__backend_device_count(const pw_backend_t* backend);
pw_status_t pw__backend_device_info(const pw_backend_t* backend, uint32_t device,
                                    pw_backend_device_info_t* out_info);
/* A backend without a health method never fails: HEALTHY. */
pw_device_health_t pw__backend_health(const pw_backend_t* backend, uint32_t device);
pw_status_t pw__backend_compile(const pw_backend_t* backend, const void* program,
                                size_t program_size, const pw_mesh_shape_t* mesh,
                                const char* options, pw_allocator_t allocator,
                                void** out_bytes, size_t* out_size);
pw_status_t pw__backend_load(const pw_backend_t* backend, const void* bytes,
                             size_t size, pw_backend_executable_t* out_executable,
                             pw_executable_signature_t* out_signature);
void pw__backend_unload(const pw_backend_t* backend,
                        pw_backend_executable_t executable);

/* The input (output) specs of a signature pw__backend_load filled (or the
 * runtime copied): the v2 pointer when set, else the fixed array. */
static inline const pw_backend_param_t* pw__signature_inputs(const pw_executable_signature_t* s) {
  return s->input_specs != NULL ? s->input_specs : s->inputs;
}
static inline const pw_backend_param_t* pw__signature_outputs(const pw_executable_signature_t* s) {
  return s->output_specs != NULL ? s->output_specs : s->outputs;
}
pw_status_t pw__backend_allocate(const pw_backend_t* backend, uint32_t device,
                                 size_t size, pw_backend_memory_t* out_memory);
void pw__backend_deallocate(const pw_backend_t* backend, uint32_t device,
                            pw_backend_memory_t memory);
pw_status_t pw__backend_launch(const pw_backend_t* backend,
                               const pw_backend_launch_t* launch);
pw_status_t pw__backend_copy_to_device(const pw_backend_t* backend,
                                       uint32_t device, pw_backend_memory_t dst,
                                       size_t offset, const void* src,
                                       size_t size);
pw_status_t pw__backend_copy_to_host(const pw_backend_t* backend, uint32_t device,
                                     pw_backend_memory_t src, size_t offset,
                                     void* dst, size_t size);
/* NULL when the method is missing or the memory is not host accessible. */
void* pw__backend_host_pointer(const pw_backend_t* backend, uint32_t device,
                               pw_backend_memory_t memory);

/* Adopts |size| bytes at |host| as device memory of |device| (v5
 * adopt_host): UNIMPLEMENTED naming the backend when it has none; a
 * backend that says OK without memory is INTERNAL. */
pw_status_t pw__backend_adopt_host(const pw_backend_t* backend, uint32_t device, void* host,
                                   size_t size, pw_backend_memory_t* out_memory);

/* dst += src for |count| elements of |dtype| on |device| (v6
 * accumulate): UNIMPLEMENTED naming the backend when it has none.
 * |count| 0 with NULL memories asks whether |dtype| is supported. */
pw_status_t pw__backend_accumulate(const pw_backend_t* backend, uint32_t device,
                                   pw_dtype_t dtype, pw_backend_memory_t dst, size_t dst_offset,
                                   pw_backend_memory_t src, size_t src_offset, size_t count);

#endif /* PW_PLUGIN_BACKEND_CALL_H_ */
