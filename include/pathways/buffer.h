/* libpathways: buffers, logical sharded arrays.
 *
 * A buffer is one logical array (dtype, global shape, sharding over a
 * virtual slice's mesh). It has one object and one refcount however many
 * shards it has, and a ready event: a buffer is its own future. Buffers made
 * by a submission come back at once and become ready when the op that
 * writes them completes (or carry its error).
 *
 * Host data is always the whole global array in row-major order; the
 * runtime splits it into shards and gathers them back.
 */
#ifndef PATHWAYS_BUFFER_H_
#define PATHWAYS_BUFFER_H_

#include "pathways/clock.h"
#include "pathways/event.h"
#include "pathways/runtime.h"
#include "pathways/types.h"

PW_EXTERN_C_BEGIN

typedef struct pw_buffer_t {
  uint64_t id;
} pw_buffer_t;

/* Creates a buffer on |vslice| holding |data| (|size| bytes, exactly the
 * global array's size). The bytes are copied before this returns. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_buffer_from_host(
    pw_client_t* client, pw_vslice_t vslice, const pw_array_spec_t* spec,
    const void* data, size_t size, pw_buffer_t* out_buffer);

/* Waits (until |deadline|) for |buffer| to be ready, then copies the whole
 * global array into |dst| (|size| bytes, exactly the array's size). Returns
 * the buffer's error if the op producing it failed. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_buffer_to_host(pw_client_t* client,
                                                        pw_buffer_t buffer,
                                                        void* dst, size_t size,
                                                        pw_time_t deadline);

/* The buffer's ready event, retained for the caller (release it). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_buffer_ready_event(pw_client_t* client,
                                                            pw_buffer_t buffer,
                                                            pw_event_t** out_event);

/* The buffer's dtype, shape and sharding. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_buffer_spec(pw_client_t* client,
                                                     pw_buffer_t buffer,
                                                     pw_array_spec_t* out_spec);

/* Size of the global array in bytes. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_buffer_byte_size(pw_client_t* client,
                                                          pw_buffer_t buffer,
                                                          size_t* out_size);

/* Drops the client's handle. Device memory is freed once no submitted work
 * still uses the buffer. Using the handle afterwards is NOT_FOUND. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_buffer_release(pw_client_t* client,
                                                        pw_buffer_t buffer);

PW_EXTERN_C_END

#endif /* PATHWAYS_BUFFER_H_ */
