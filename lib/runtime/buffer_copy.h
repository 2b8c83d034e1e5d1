/* Internal: copies between a host array (the whole global array, row
 * major) and a buffer's shards, and zero-copy adoption of a host array
 * as the shards (lib/runtime/buffer_copy.c). Used by the blocking buffer
 * calls (buffer.c) on the caller's thread and by the asynchronous ones
 * (buffer_async.c) on the runtime's transfer thread. Not installed. */
#ifndef PW_RUNTIME_BUFFER_COPY_H_
#define PW_RUNTIME_BUFFER_COPY_H_

#include "core/objects.h"

/* Allocates every shard of |b| (which has none yet) and copies its part
 * of |host| (b->total_bytes) into it. |parallel|: large arrays are split
 * over the runtime's workers. An error names the device; shards already
 * made stay in |b| (freed with it). */
pw_status_t pw__buffer_upload(pw_buffer_obj_t* b, const void* host, bool parallel);

/* Copies |b|'s global array (every block once, from the first device
 * that holds it) into |dst| (b->total_bytes). |b| must be ready, OK. */
pw_status_t pw__buffer_download(pw_buffer_obj_t* b, void* dst, bool parallel);

/* True when every shard of |b| is one contiguous run of the host array:
 * replicated, or split along an axis whose preceding axes all have size
 * 1 (zero-copy needs it). */
bool pw__buffer_shards_contiguous(const pw_buffer_obj_t* b);

/* Makes |host| (b->total_bytes, the caller's memory) |b|'s shards without
 * a copy: each device's shard is adopted by the backend (adopt_host) at
 * its offset. All or nothing: on an error (the backend has no adopt_host,
 * refused one, or the shards are not contiguous) every shard adopted so
 * far is given back and |b| has none. */
pw_status_t pw__buffer_adopt(pw_buffer_obj_t* b, const void* host);

#endif /* PW_RUNTIME_BUFFER_COPY_H_ */
