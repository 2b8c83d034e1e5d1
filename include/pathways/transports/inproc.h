/* libpathways: the bundled in-process transport ("inproc").
 *
 * Moves bytes between device memories of backends living in this process
 * (any two: CPU <-> CPU, CPU <-> sim, one backend to itself), through the
 * backends' host access (pathways/transport.h gives the contract):
 *   - both memories host accessible (backend host_pointer): one memmove;
 *   - one of them: one copy_to_device or copy_to_host into/out of it;
 *   - neither: through a staging buffer of at most |staging_bytes|, in
 *     chunks (copy_to_host, then copy_to_device), backwards when the two
 *     ranges overlap in one memory with the destination after the source.
 * Before moving anything it checks that neither device reports FAILED
 * (UNAVAILABLE naming the backend and device otherwise). When both sides
 * are the same sim backend (pathways/backends/sim.h) the copy is also
 * accounted in the sim's virtual time (pw_sim_backend_record_transfer):
 * the destination becomes ready after the modelled transfer cost, and a
 * chip that has failed by then makes the copy UNAVAILABLE.
 *
 * Ranges are checked when copy is called (OUT_OF_RANGE, and done is never
 * called), by asking each backend for the range's last byte; a zero-size
 * copy checks its offsets. Copies run inline (done called before copy
 * returns, on the caller's thread) or on a pool of |worker_count| threads,
 * in the order they were accepted when there is one worker.
 *
 * Written as a host application would write its own transport: it uses
 * only the public headers.
 */
#ifndef PATHWAYS_TRANSPORTS_INPROC_H_
#define PATHWAYS_TRANSPORTS_INPROC_H_

#include "pathways/allocator.h"
#include "pathways/api.h"
#include "pathways/log.h"
#include "pathways/status.h"
#include "pathways/transport.h"

PW_EXTERN_C_BEGIN

#define PW_INPROC_TRANSPORT_NAME "inproc"
#define PW_INPROC_TRANSPORT_VERSION 1u
#define PW_INPROC_MAX_WORKERS 64u

typedef struct pw_inproc_transport_options_t {
  size_t struct_size;          /* sizeof(pw_inproc_transport_options_t) */
  pw_allocator_t allocator;    /* zero: the system allocator */
  pw_logger_t logger;          /* zero: pw_logger_default() */
  /* 0: every copy runs inline inside copy. N (<= PW_INPROC_MAX_WORKERS):
   * copies are queued to N threads and done runs on one of them. */
  uint32_t worker_count;
  /* Largest staging buffer a copy between two non-host-accessible
   * memories uses; 0: 1 MiB. */
  size_t staging_bytes;
} pw_inproc_transport_options_t;

#define PW_INPROC_TRANSPORT_OPTIONS_SIZE_V1 \
  PW_STRUCT_SIZE(pw_inproc_transport_options_t, staging_bytes)

/* Fills |out_options| with the defaults (inline, 1 MiB staging). */
PW_API void pw_inproc_transport_options_init(pw_inproc_transport_options_t* out_options);

/* Creates an inproc transport. |options| may be NULL (defaults); it is
 * copied, and its struct_size must be >= PW_INPROC_TRANSPORT_OPTIONS_SIZE_V1.
 * Everything it allocates (its workers, each queued copy, staging buffers)
 * comes from the allocator, whose |self| must outlive it; a copy that
 * cannot get its memory is refused with RESOURCE_EXHAUSTED. On success
 * |*out_transport| owns the instance: free it with
 * vtable->destroy(self) (or hand it to a runtime), which first runs every
 * copy still queued; not from a done callback. On error it is zeroed and
 * nothing leaks. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_inproc_transport_create(
    const pw_inproc_transport_options_t* options, pw_transport_t* out_transport);

/* True if |transport| was made by pw_inproc_transport_create. */
PW_API bool pw_inproc_transport_is_inproc(pw_transport_t transport);

PW_EXTERN_C_END

#endif /* PATHWAYS_TRANSPORTS_INPROC_H_ */
