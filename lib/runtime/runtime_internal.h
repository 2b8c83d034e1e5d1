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

#endif /* PW_RUNTIME_RUNTIME_INTERNAL_H_ */
