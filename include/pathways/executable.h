/* libpathways: executables, compiled functions for a mesh.
 *
 * An executable is compiled by the backend of a virtual slice for that
 * slice's mesh and can run on any of the client's virtual slices with the
 * same backend and mesh shape. Its compiled bytes can be read back (to be
 * cached or shipped) and loaded again without compiling.
 */
#ifndef PATHWAYS_EXECUTABLE_H_
#define PATHWAYS_EXECUTABLE_H_

#include "pathways/backend.h"
#include "pathways/runtime.h"

PW_EXTERN_C_BEGIN

typedef struct pw_executable_t {
  uint64_t id;
} pw_executable_t;

/* Compiles |program| (backend-specific bytes, e.g. the CPU backend's text
 * format) with the backend of |vslice| for its mesh, then loads it.
 * |options| may be NULL. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_executable_compile(
    pw_client_t* client, pw_vslice_t vslice, const void* program,
    size_t program_size, const char* options, pw_executable_t* out_executable);

/* Loads executable bytes previously returned by pw_executable_bytes. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_executable_load(
    pw_client_t* client, pw_vslice_t vslice, const void* bytes, size_t size,
    pw_executable_t* out_executable);

/* What the executable computes: name, mesh, parameter and result specs.
 * With struct_size >= PW_EXECUTABLE_SIGNATURE_SIZE_V2, input_specs and
 * output_specs point at every spec, in storage the runtime owns, valid
 * while |executable|'s handle lives (until pw_executable_release); the
 * fixed arrays hold the first PW_BACKEND_MAX_PARAMS. A v1 struct_size is
 * OUT_OF_RANGE for an executable with more than PW_BACKEND_MAX_PARAMS
 * inputs or outputs (see pw_executable_signature_t). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_executable_signature(
    pw_client_t* client, pw_executable_t executable,
    pw_executable_signature_t* out_signature);

typedef enum pw_param_role_e {
  PW_PARAM_INPUT = 0,
  PW_PARAM_OUTPUT = 1,
} pw_param_role_t;

/* How many inputs (|role| PW_PARAM_INPUT) or outputs the executable has. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_executable_param_count(
    pw_client_t* client, pw_executable_t executable, pw_param_role_t role,
    uint32_t* out_count);

/* Copies the spec of input (or output) |index| into |*out_spec|;
 * OUT_OF_RANGE naming the executable when |index| is past the count. Any
 * count (up to PW_EXECUTABLE_MAX_PARAMS), whatever header the caller was
 * built with. Thread-safe. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_executable_param(
    pw_client_t* client, pw_executable_t executable, pw_param_role_t role,
    uint32_t index, pw_backend_param_t* out_spec);

/* Points |*out_bytes| at the compiled bytes (valid while the executable's
 * handle lives) and sets |*out_size|. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_executable_bytes(
    pw_client_t* client, pw_executable_t executable, const void** out_bytes,
    size_t* out_size);

/* Drops the handle; graphs that use the executable keep it alive. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_executable_release(
    pw_client_t* client, pw_executable_t executable);

PW_EXTERN_C_END

#endif /* PATHWAYS_EXECUTABLE_H_ */
