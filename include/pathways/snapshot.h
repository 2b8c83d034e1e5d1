/* libpathways: host-memory snapshots of buffers.
 *
 * A pw_snapshotter_t copies sets of buffers of one client into host memory
 * and keeps the last K complete snapshots; with a store (store.h) it also
 * persists each one, and can load the newest intact one back.
 *
 * CONSISTENT CUT. Buffers are immutable values: a buffer produced by the
 * step-S submission holds step S's array for as long as it lives. So
 * pw_snapshot_take only has to pin the buffers it is given (it holds a
 * reference of its own to each, so the caller may release them at once)
 * and returns; a thread of the snapshotter waits for each buffer's ready
 * event and copies its global array to host memory. Devices are never
 * stopped: later submissions run while the copy proceeds. A snapshot is
 * complete when every buffer's bytes are in host memory; it fails with the
 * first error of any buffer (the producer's error, naming the buffer).
 *
 * RESTORE. Host data is the global array, so a snapshot restores onto any
 * virtual slice with any sharding valid on that slice's mesh (a smaller
 * mesh, fewer slices): one pw_buffer_from_host per buffer, straight from
 * the snapshot's memory, no extra copy.
 *
 * PERSISTENCE. With a store, each complete snapshot is written on a second
 * thread after its host copy: the zstd-compressed data values first (one
 * per chunk of each buffer, each with an XXH64), then a CBOR manifest
 * naming them, last. A store's put is atomic (store.h; the bundled dir
 * store writes temp -> fsync -> rename -> fsync(dir)), so a crash leaves
 * either a manifest whose values are all there or no manifest: a torn
 * snapshot is one without a manifest, and a corrupt one fails its
 * checksums. Byte layouts: docs/formats.md ("Snapshot manifest").
 * pw_snapshotter_load_latest reads the newest manifest and its values,
 * verifies everything, and falls back to the previous snapshot (logging
 * the step and why) when one is torn or corrupt. The store keeps K too:
 * after each persist the older snapshots' values are deleted.
 *
 * Thread-safety: every function may be called from any thread,
 * concurrently, except pw_snapshotter_destroy.
 */
#ifndef PATHWAYS_SNAPSHOT_H_
#define PATHWAYS_SNAPSHOT_H_

#include "pathways/allocator.h"
#include "pathways/api.h"
#include "pathways/buffer.h"
#include "pathways/clock.h"
#include "pathways/event.h"
#include "pathways/log.h"
#include "pathways/runtime.h"
#include "pathways/status.h"
#include "pathways/store.h"
#include "pathways/struct_size.h"
#include "pathways/types.h"

PW_EXTERN_C_BEGIN

typedef struct pw_snapshotter_s pw_snapshotter_t;

/* Longest buffer name, NUL included. */
#define PW_SNAPSHOT_NAME_MAX 64
/* Longest store key prefix, NUL excluded. */
#define PW_SNAPSHOT_PREFIX_MAX 32

typedef struct pw_snapshotter_options_t {
  size_t struct_size;        /* sizeof(pw_snapshotter_options_t) */
  /* Everything the snapshotter allocates, host copies included; zero =
   * pw_allocator_system(). |self| must outlive the snapshotter. */
  pw_allocator_t allocator;
  pw_logger_t logger;        /* zero = pw_logger_default() */
  /* Complete snapshots kept in memory, and in the store; older ones are
   * dropped. 0 = 2. At most 1024. */
  uint32_t keep;
  /* Takes whose host copy has not finished, at most; a take past it is
   * RESOURCE_EXHAUSTED (host memory stays bounded when copies lag). 0 = 4. */
  uint32_t max_in_flight;
  /* Where snapshots are persisted. The snapshotter takes ownership (it
   * destroys it, also when create fails). Zero (NULL vtable): none. */
  pw_store_t store;
  /* Store keys start with this (copied): 1 to PW_SNAPSHOT_PREFIX_MAX bytes
   * of [A-Za-z0-9_-]; NULL = "snapshot". Several snapshotters may share
   * one store under different prefixes. */
  const char* key_prefix;
  /* zstd level of persisted data; 0 = 1 (fast: checkpoints are written
   * often). Negative levels are zstd's faster ones. */
  int32_t compression_level;
  /* Raw bytes of a buffer per stored value; larger buffers are split into
   * several values. 0 = 64 MiB. At least 4096. */
  uint64_t chunk_bytes;
} pw_snapshotter_options_t;

#define PW_SNAPSHOTTER_OPTIONS_SIZE_V1 PW_STRUCT_SIZE(pw_snapshotter_options_t, chunk_bytes)

/* Fills |out_options| with the defaults (no store) and the current
 * struct_size. */
PW_API void pw_snapshotter_options_init(pw_snapshotter_options_t* out_options);

/* Creates a snapshotter taking snapshots of |client|'s buffers (borrowed:
 * destroy the snapshotter before the client). |options| may be NULL
 * (defaults). Starts its two threads (host copy, persistence). On failure
 * the store in |options| has been destroyed and |*out| is NULL.
 * INVALID_ARGUMENT for NULL |client| or |out|, a struct_size below v1, a
 * bad key prefix, keep or chunk size, an incomplete allocator or a store
 * vtable below v1. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_snapshotter_create(
    pw_client_t* client, const pw_snapshotter_options_t* options,
    pw_snapshotter_t** out_snapshotter);

/* Stops the snapshotter: takes still waiting for their buffers fail with
 * CANCELLED, a copy in progress finishes, queued persists are written;
 * then the threads are joined, every snapshot freed and the store
 * destroyed. NULL is a no-op (OK). FAILED_PRECONDITION, leaving it
 * untouched, when called on one of its own threads (a callback of an event
 * it completes). Events handed out stay valid (they are refcounted). */
PW_API pw_status_t pw_snapshotter_destroy(pw_snapshotter_t* snapshotter);

/* Takes the snapshot of step |step|: |count| buffers (>= 1, at most
 * 65536) of the snapshotter's client, with optional |names| (NULL, or
 * |count| entries each NULL or a name below PW_SNAPSHOT_NAME_MAX bytes;
 * copied). Returns at once; the host copy runs on the snapshotter's
 * thread. |*out_copied| (optional) completes when the snapshot is complete
 * in host memory (OK: it is held and restorable) or failed; |*out_persisted|
 * (optional) when it is in the store and the store's older snapshots are
 * deleted (OK), or with the error that stopped it (the store's or the
 * allocator's; a failed prune leaves the snapshot stored, see
 * pw_snapshot_info's |persisted|; FAILED_PRECONDITION without a store;
 * CANCELLED when it was dropped from the ring before its turn). Release
 * both. Errors, nothing taken: INVALID_ARGUMENT (NULL arguments, a count of
 * 0 or too many, a name too long), the buffer look-up's error naming the
 * index (NOT_FOUND released, PERMISSION_DENIED another client's),
 * ALREADY_EXISTS when |step| is held or being taken, RESOURCE_EXHAUSTED
 * past max_in_flight or when memory runs out, FAILED_PRECONDITION while
 * destroying. A failed snapshot is not held: its step may be taken
 * again. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_snapshot_take(
    pw_snapshotter_t* snapshotter, uint64_t step, const pw_buffer_t* buffers,
    const char* const* names, uint32_t count, pw_event_t** out_copied,
    pw_event_t** out_persisted);

/* Blocks until every take made before the call has finished its host copy
 * and (with a store) its persist, or failed; or until |deadline|
 * (DEADLINE_EXCEEDED saying how many are outstanding). Errors of the takes
 * are reported by their events, not here. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_snapshotter_flush(pw_snapshotter_t* snapshotter,
                                                           pw_time_t deadline);

/* The highest step of the complete snapshots held. NOT_FOUND when none. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_snapshotter_latest_step(
    pw_snapshotter_t* snapshotter, uint64_t* out_step);

/* The steps of the complete snapshots held, ascending: writes up to
 * |capacity| of them to |out_steps| (may be NULL when capacity is 0) and
 * the number held to |*out_count|. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_snapshotter_steps(pw_snapshotter_t* snapshotter,
                                                           uint64_t* out_steps,
                                                           uint32_t capacity,
                                                           uint32_t* out_count);

/* One held snapshot (the caller sets struct_size). Times are nanoseconds
 * of pw_clock_now's clock, for the recovery benchmark. */
typedef struct pw_snapshot_info_t {
  size_t struct_size;        /* set by the caller: sizeof(pw_snapshot_info_t) */
  uint64_t step;
  uint32_t buffer_count;
  uint64_t total_bytes;      /* raw bytes of all buffers */
  /* From the take to the last buffer ready (waiting for producers). 0 for
   * a loaded snapshot. */
  uint64_t wait_ns;
  /* Copying the buffers' bytes to host memory (summed over buffers),
   * excluding the waits; for a loaded snapshot, reading and verifying it
   * from the store. */
  uint64_t copy_ns;
  /* Compressing, checksumming and writing it to the store (0 until then). */
  uint64_t persist_ns;
  uint64_t stored_bytes;     /* bytes of its store values, manifest included */
  bool persisted;            /* in the store (written, or loaded from it) */
  bool loaded;               /* read from the store by load_latest */
} pw_snapshot_info_t;

#define PW_SNAPSHOT_INFO_SIZE_V1 PW_STRUCT_SIZE(pw_snapshot_info_t, loaded)

/* Fills |out_info| for the held snapshot of |step|; NOT_FOUND naming the
 * step and the steps held otherwise. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_snapshot_info(pw_snapshotter_t* snapshotter,
                                                       uint64_t step,
                                                       pw_snapshot_info_t* out_info);

/* One buffer of a held snapshot (the caller sets struct_size). */
typedef struct pw_snapshot_buffer_info_t {
  size_t struct_size;        /* set by the caller */
  char name[PW_SNAPSHOT_NAME_MAX]; /* "" when taken without one */
  pw_array_spec_t spec;      /* as the buffer had it (pw_buffer_spec) */
  uint64_t bytes;            /* of the global array */
  /* XXH64 (seed 0) of the raw bytes: set once persisted or loaded, 0
   * before. */
  uint64_t xxh64;
  /* -- v2 fields start here -- */
  /* The mesh of the vslice the buffer lived on, its axis names included
   * (what |spec|'s sharding refers to); rank 0 for a snapshot loaded
   * from a format 1 manifest, which did not record it. */
  pw_mesh_shape_t mesh;
} pw_snapshot_buffer_info_t;

#define PW_SNAPSHOT_BUFFER_INFO_SIZE_V1 PW_STRUCT_SIZE(pw_snapshot_buffer_info_t, xxh64)
#define PW_SNAPSHOT_BUFFER_INFO_SIZE_V2 PW_STRUCT_SIZE(pw_snapshot_buffer_info_t, mesh)

/* Buffer |index| of the snapshot of |step|: NOT_FOUND (step), OUT_OF_RANGE
 * (index). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_snapshot_buffer_info(
    pw_snapshotter_t* snapshotter, uint64_t step, uint32_t index,
    pw_snapshot_buffer_info_t* out_info);

/* The index of the first buffer named |name| in the snapshot of |step|;
 * NOT_FOUND (step or name). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_snapshot_find_buffer(pw_snapshotter_t* snapshotter,
                                                              uint64_t step, const char* name,
                                                              uint32_t* out_index);

/* Makes a buffer of |client| (any client of any runtime, not only the
 * snapshotter's) on |vslice| holding buffer |index| of the snapshot of
 * |step|, laid out by |spec| (NULL: the spec it was taken with). |spec|
 * must have the snapshot's dtype and global shape; its sharding is any
 * that is valid on |vslice|'s mesh, so state taken on 4 slices restores
 * onto 3, or onto a smaller mesh. Errors: NOT_FOUND (no such step: the
 * message lists the steps held), OUT_OF_RANGE (index), INVALID_ARGUMENT
 * naming the buffer (index and name) for another dtype or shape, or an
 * invalid sharding; pw_buffer_from_host's errors otherwise. The bytes are
 * copied before this returns; the snapshot stays held. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_snapshot_restore(
    pw_snapshotter_t* snapshotter, uint64_t step, uint32_t index, pw_client_t* client,
    pw_vslice_t vslice, const pw_array_spec_t* spec, pw_buffer_t* out_buffer);

/* pw_snapshot_restore of every buffer of the snapshot of |step| (|count|
 * must be its buffer count) onto |vslice|, buffer i with |specs[i]| (NULL:
 * each with its own spec), into |out_buffers|. All or nothing: on error
 * the buffers already made are released and |out_buffers| is zeroed. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_snapshot_restore_all(
    pw_snapshotter_t* snapshotter, uint64_t step, pw_client_t* client, pw_vslice_t vslice,
    const pw_array_spec_t* specs, uint32_t count, pw_buffer_t* out_buffers);

/* Reads the newest intact snapshot of this prefix from the store into
 * memory (held as a complete, persisted snapshot; the ring's keep rule
 * applies) and sets |*out_step|. Tries manifests newest step first; one
 * that is torn (a value missing) or corrupt (bad checksum, bad CBOR, sizes
 * that disagree) is logged at warn ("snapshot step S in store 'dir' is
 * unusable: ...; trying the previous one") and skipped. A step already
 * held is not read again. Blocks the caller (this is the recovery path).
 * FAILED_PRECONDITION without a store; NOT_FOUND when no intact snapshot
 * is there (the message counts the unusable ones); the store's error when
 * it cannot list. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_snapshotter_load_latest(
    pw_snapshotter_t* snapshotter, uint64_t* out_step);

PW_EXTERN_C_END

#endif /* PATHWAYS_SNAPSHOT_H_ */
