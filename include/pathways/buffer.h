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
 *
 * Host transfers come in two forms: the blocking pw_buffer_from_host /
 * pw_buffer_to_host, and the asynchronous calls further down, which
 * return at once with events (PJRT's BufferFromHostBuffer host-buffer
 * semantics and async ToHostBuffer). Their copies run on a thread the
 * runtime owns (started at the first one, joined at pw_runtime_destroy),
 * never on the caller's. A buffer can also be made empty and filled
 * later (pw_buffer_create_empty, pw_buffer_fill_from_host); until then it
 * is not ready, and a submission that reads it waits for it.
 */
#ifndef PATHWAYS_BUFFER_H_
#define PATHWAYS_BUFFER_H_

#include "pathways/api.h"
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

/* The mesh of the virtual slice |buffer| lives on, its axis names
 * included (what its sharding's axes refer to). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_buffer_mesh(pw_client_t* client, pw_buffer_t buffer,
                                                     pw_mesh_shape_t* out_mesh);

/* A second handle of |client| on the same buffer (PJRT keeps buffers alive
 * with shared references the same way): the buffer lives until every
 * handle is released. Each handle is released once with pw_buffer_release.
 * NOT_FOUND for an unknown or released handle. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_buffer_retain(pw_client_t* client, pw_buffer_t buffer,
                                                       pw_buffer_t* out_buffer);

/* Drops the client's handle. Device memory is freed once no submitted work
 * still uses the buffer. Using the handle afterwards is NOT_FOUND. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_buffer_release(pw_client_t* client,
                                                        pw_buffer_t buffer);

/* ---- asynchronous host transfers ---------------------------------------- */

/* When the runtime is done with the caller's host memory (PJRT's
 * HostBufferSemantics). Stable values. */
typedef enum pw_host_semantics_e {
  /* Copied before the call returns; the host-done event (if asked for)
   * is complete when it returns. The buffer is ready when it returns. */
  PW_HOST_COPY_BEFORE_RETURN = 0,
  /* The call returns at once; the runtime's transfer thread copies the
   * memory later. The caller must neither write nor free it until the
   * host-done event completes (it only reads it until then); the buffer's
   * ready event completes after the copy (or carries its error). */
  PW_HOST_IMMUTABLE_UNTIL_TRANSFER_COMPLETES = 1,
  /* The backend adopts the memory as the buffer's device memory, without
   * a copy, where its devices can use host memory directly (the CPU
   * backend: each shard aligned to 8 bytes). The buffer is ready when the
   * call returns; the memory must stay valid and unchanged for the
   * buffer's whole life, and the host-done event completes only once the
   * buffer's device memory is released (its last handle gone and no
   * submitted work still reading it). Only shards that are contiguous in
   * the host array can be adopted (replicated arrays, and arrays split
   * along an axis whose preceding axes all have size 1); otherwise,
   * or when the backend cannot adopt (it has no adopt_host, or refuses
   * the pointer), the runtime falls back to
   * PW_HOST_IMMUTABLE_UNTIL_TRANSFER_COMPLETES: a background copy, the
   * host-done event completing after it. */
  PW_HOST_ZERO_COPY = 2,
} pw_host_semantics_t;

/* Options of a host-to-device transfer. Copied at the call. NULL means
 * all defaults (PW_HOST_COPY_BEFORE_RETURN). */
typedef struct pw_host_transfer_options_t {
  size_t struct_size; /* sizeof(pw_host_transfer_options_t) */
  pw_host_semantics_t semantics;
} pw_host_transfer_options_t;

#define PW_HOST_TRANSFER_OPTIONS_SIZE_V1 \
  PW_STRUCT_SIZE(pw_host_transfer_options_t, semantics)

/* Zeroes |options| and sets its struct_size (PW_HOST_COPY_BEFORE_RETURN). */
PW_API void pw_host_transfer_options_init(pw_host_transfer_options_t* options);

/* pw_buffer_from_host with a choice of host-memory semantics (|options|,
 * may be NULL). Returns at once (with PW_HOST_COPY_BEFORE_RETURN, after
 * the copy) with the buffer: ready when its shards are on the devices,
 * its ready event carrying the copy's error otherwise. |out_host_done|
 * receives a new event the caller releases: complete (always OK) once
 * the caller may reuse or free |data| (see pw_host_semantics_t). It is
 * required for the two asynchronous semantics (INVALID_ARGUMENT without
 * it), optional (NULL) for the copy. On error nothing was started and
 * both out-values are cleared. Any thread. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_buffer_from_host_async(
    pw_client_t* client, pw_vslice_t vslice, const pw_array_spec_t* spec,
    const void* data, size_t size, const pw_host_transfer_options_t* options,
    pw_buffer_t* out_buffer, pw_event_t** out_host_done);

/* Creates a buffer of |spec| on |vslice| with no contents yet: not ready
 * until pw_buffer_fill_from_host fills it. It can be passed to
 * pw_graph_submit before that (the graph runs once it is filled). If its
 * last handle goes (pw_buffer_release, donation, pw_client_destroy)
 * before a fill, its ready event fails with CANCELLED naming the buffer,
 * and so does whatever waits for it (submitted graphs, to_host). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_buffer_create_empty(
    pw_client_t* client, pw_vslice_t vslice, const pw_array_spec_t* spec,
    pw_buffer_t* out_buffer);

/* Fills |buffer|, made by pw_buffer_create_empty, from |data| (|size|
 * bytes, exactly the array's size) with |options|' semantics, as
 * pw_buffer_from_host_async does (|out_host_done| likewise). A buffer is
 * filled once: a second fill is FAILED_PRECONDITION, as is filling a
 * buffer made any other way (a submission's output, from host); a wrong
 * size is INVALID_ARGUMENT and leaves the buffer fillable. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_buffer_fill_from_host(
    pw_client_t* client, pw_buffer_t buffer, const void* data, size_t size,
    const pw_host_transfer_options_t* options, pw_event_t** out_host_done);

/* Copies |buffer|'s whole global array into |dst| (|size| bytes, exactly
 * the array's size) once the buffer is ready, on the runtime's transfer
 * thread, and returns at once. |out_done| receives a new event (release
 * it) that completes when |dst| holds the array, or with the buffer's
 * error (the op that produced it failed, it was released unfilled) or
 * the copy's. |dst| must stay valid, and is written only, until then.
 * The buffer is kept alive until the copy is done, even if released. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_buffer_to_host_async(pw_client_t* client,
                                                              pw_buffer_t buffer, void* dst,
                                                              size_t size,
                                                              pw_event_t** out_done);

PW_EXTERN_C_END

#endif /* PATHWAYS_BUFFER_H_ */
