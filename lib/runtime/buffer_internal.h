/* Internal: what the public buffer calls of lib/runtime share (buffer.c,
 * buffer_async.c). Not installed. */
#ifndef PW_RUNTIME_BUFFER_INTERNAL_H_
#define PW_RUNTIME_BUFFER_INTERNAL_H_

#include "core/objects.h"

/* A new buffer of |spec| on |vslice| (looked up in |client|), without
 * shards, not ready, not in the handle table: the vslice and spec checked
 * (its slice not lost). Errors are annotated with |who|. */
pw_status_t pw__buffer_make(pw_client_t* client, pw_vslice_t vslice,
                            const pw_array_spec_t* spec, const char* who,
                            pw_buffer_obj_t** out_buffer);

/* INVALID_ARGUMENT "<who>: N bytes given, <spec> needs M" unless |size|
 * is |b|'s global array size. */
pw_status_t pw__buffer_check_size(const pw_buffer_obj_t* b, size_t size, const char* who);

/* Looks |buffer| up in |client| (a reference in |*out|). */
pw_status_t pw__buffer_get(pw_client_t* client, pw_buffer_t buffer, pw_buffer_obj_t** out);

#endif /* PW_RUNTIME_BUFFER_INTERNAL_H_ */
