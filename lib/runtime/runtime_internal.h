/* Internal to lib/runtime: composite slices (vslice.c), made for
 * spanning virtual slices and freed with the runtime. */
#ifndef PW_RUNTIME_RUNTIME_INTERNAL_H_
#define PW_RUNTIME_RUNTIME_INTERNAL_H_

#include "core/objects.h"

/* Returns the composite slice over |parts| (|count| >= 2 distinct physical
 * slices of one backend with equal device counts, ascending index), making
 * it on first use. Called with runtime->lock held. lib/runtime/vslice.c. */
pw_status_t pw__slice_composite(pw_runtime_t* runtime, pw_slice_t* const* parts,
                                uint32_t count, pw_slice_t** out_slice);
/* Frees the runtime's composite slices (at destroy). */
void pw__slice_composites_free(pw_runtime_t* runtime);

/* Placement by attribute (lib/runtime/placement.c, pw_vslice_request_t). */
/* Whether physical slice |slice| has every attribute |request| asks for. */
bool pw__placement_matches(const pw_slice_t* slice, const pw_vslice_request_t* request);
/* "backend 'sim', host 2" (what |request| asks for; "" when nothing). */
void pw__placement_wanted(const pw_vslice_request_t* request, char* buffer, size_t capacity);
/* Every physical slice with its attributes, "; "-separated:
 * "slice0 (2x4, backend cpu, kind cpu, host 0, 1 bound)". */
void pw__placement_available(const pw_runtime_t* runtime, char* buffer, size_t capacity);

#endif /* PW_RUNTIME_RUNTIME_INTERNAL_H_ */
