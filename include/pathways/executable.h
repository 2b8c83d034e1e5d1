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

/* What the executable computes: name, mesh, parameter and result specs. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_executable_signature(
    pw_client_t* client, pw_executable_t executable,
    pw_executable_signature_t* out_signature);

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
