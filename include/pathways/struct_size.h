/* Versioned structs: the checks a library or a plugin makes on a struct
 * that starts with struct_size (the convention and PW_STRUCT_SIZE are in
 * api.h; every such struct has a PW_*_SIZE_V1 beside it). Three checks,
 * used everywhere such a struct crosses an API, the library's and a
 * plugin's alike:
 *   - on entry, PW_STRUCT_CHECK: struct_size >= the struct's V1 size, or
 *     INVALID_ARGUMENT naming the call and the struct;
 *   - at every read of a field added after V1, PW_STRUCT_HAS_FIELD;
 *   - when filling an out-struct, pw_struct_fill: only the bytes the
 *     caller's struct_size covers are written.
 * Never an exact-size match: a caller built against a newer header passes
 * a bigger struct_size and is served as far as this build knows. */
#ifndef PATHWAYS_STRUCT_SIZE_H_
#define PATHWAYS_STRUCT_SIZE_H_

#include <string.h>

#include "pathways/api.h"
#include "pathways/status.h"

PW_EXTERN_C_BEGIN

/* True when |ptr| (a struct of |type|) is big enough to hold |field|. */
#define PW_STRUCT_HAS_FIELD(ptr, type, field) \
  ((ptr)->struct_size >= PW_STRUCT_SIZE(type, field))

/* The cold half of PW_STRUCT_CHECK: INVALID_ARGUMENT "<call>: <type> is
 * NULL" or "<call>: <type> struct_size N is smaller than v1 (M)". */
PW_API pw_status_t pw_struct_size_error(const char* call, const char* type,
                                        const void* ptr, size_t size_v1);

/* NULL (OK) when |ptr| is non-NULL and its struct_size is at least
 * |size_v1|; the error above otherwise. Callers that accept a NULL |ptr|
 * (defaults) test for it first. */
#define PW_STRUCT_CHECK(ptr, type, size_v1, call)                        \
  (PW_LIKELY((ptr) != NULL && (ptr)->struct_size >= (size_v1))          \
       ? (pw_status_t)NULL                                              \
       : pw_struct_size_error((call), #type, (ptr), (size_v1)))

/* Copies |full| (a complete |full_size|-byte struct the filler built) into
 * the caller's |out|, as far as out's struct_size reaches and no further
 * than |full_size|; out's struct_size is kept, bytes past full_size (a
 * newer caller's fields) are left as the caller set them. |out| must have
 * passed PW_STRUCT_CHECK. */
static inline void pw_struct_fill(void* out, const void* full, size_t full_size) {
  size_t n;
  memcpy(&n, out, sizeof(n));
  if (n > full_size) n = full_size;
  memcpy((char*)out + sizeof(size_t), (const char*)full + sizeof(size_t),
         n - sizeof(size_t));
}

PW_EXTERN_C_END

#endif /* PATHWAYS_STRUCT_SIZE_H_ */
