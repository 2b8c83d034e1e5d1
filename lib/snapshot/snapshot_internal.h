/* Internal: the snapshotter's parts shared between its files.
 *
 *   snapshotter.c  create/destroy, take, the copy and persist threads
 *   ring.c         snapshot records, the ring of held ones, the queries
 *   restore.c      restore onto a vslice
 *   persist.c      the persist thread's work: values, manifest, pruning
 *   load.c         reading the newest intact snapshot back
 *   format.c       byte layouts (docs/formats.md, "Snapshots"): value
 *                  headers, the CBOR manifest, zstd with our allocator
 */
#ifndef PW_SNAPSHOT_SNAPSHOT_INTERNAL_H_
#define PW_SNAPSHOT_SNAPSHOT_INTERNAL_H_

#include <pthread.h>

#include "pathways/snapshot.h"

#define PW_SNAPSHOT_DEFAULT_KEEP 2u
#define PW_SNAPSHOT_MAX_KEEP 1024u
#define PW_SNAPSHOT_DEFAULT_IN_FLIGHT 4u
#define PW_SNAPSHOT_MAX_BUFFERS 65536u
#define PW_SNAPSHOT_DEFAULT_CHUNK ((uint64_t)64 << 20)
#define PW_SNAPSHOT_MIN_CHUNK 4096u
#define PW_SNAPSHOT_LOG "snapshot"

/* ---- one snapshot ---------------------------------------------------------- */

typedef struct pw_snap_buffer_t {
  char name[PW_SNAPSHOT_NAME_MAX];
  pw_array_spec_t spec;
  pw_mesh_shape_t mesh;     /* the buffer's vslice's, names included (rank 0: unknown) */
  uint64_t bytes;
  void* data;               /* |bytes| of host memory (NULL when 0 bytes) */
  uint64_t xxh64;           /* of the raw bytes, once persisted or loaded */
  pw_buffer_t pin;          /* the snapshotter's handle until copied (0 after) */
} pw_snap_buffer_t;

typedef enum pw_snap_state_e {
  PW_SNAP_COPYING = 0,      /* queued or being copied */
  PW_SNAP_HELD = 1,         /* complete, in the ring */
  PW_SNAP_GONE = 2,         /* failed, or dropped from the ring */
} pw_snap_state_t;

typedef struct pw_snap_s {
  uint32_t refs;            /* under the snapshotter's mutex */
  pw_snap_state_t state;    /* under the snapshotter's mutex */
  uint64_t step;
  uint32_t count;
  pw_snap_buffer_t* buffers;
  pw_event_t* copied;
  pw_event_t* persisted;
  pw_time_t taken_at;
  pw_snapshot_info_t info;  /* timing and sizes; written by the thread at work */
  struct pw_snap_s* next;   /* queue link */
} pw_snap_t;

/* ---- the snapshotter -------------------------------------------------------- */

struct pw_snapshotter_s {
  pw_allocator_t allocator;
  pw_logger_t logger;
  pw_client_t* client;
  pw_store_t store;
  char prefix[PW_SNAPSHOT_PREFIX_MAX + 1];
  uint32_t keep;
  uint32_t max_in_flight;
  int32_t level;
  uint64_t chunk_bytes;

  pthread_mutex_t mutex;
  pthread_cond_t cond;      /* the queues, the flush waiters */
  bool stopping;
  pw_event_t* cancel;       /* completes at destroy: copies stop waiting */
  /* Held snapshots, ascending step, at most |keep|. */
  pw_snap_t** ring;
  uint32_t held;
  pw_snap_t* copy_head;     /* FIFO of takes waiting for the copy thread */
  pw_snap_t* copy_tail;
  pw_snap_t* copying;       /* the one the copy thread works on */
  pw_snap_t* persist_head;  /* FIFO for the persist thread */
  pw_snap_t* persist_tail;
  uint32_t in_flight;       /* takes whose copy has not finished */
  uint32_t outstanding;     /* takes not yet copied and persisted (flush) */

  bool copy_done;           /* the copy thread has exited (persist may) */
  pthread_t copy_thread;
  pthread_t persist_thread;
  bool copy_started;
  bool persist_started;
};

/* References: retain with |s->mutex| held; release takes it (and frees the
 * snapshot, its memory and events, outside it when the last goes). */
void pw__snap_retain_locked(pw_snap_t* snap);
void pw__snap_release(pw_snapshotter_t* s, pw_snap_t* snap);
/* A new snapshot record of |count| buffers with |copied| and |persisted|
 * events, one reference. */
pw_status_t pw__snap_create(pw_snapshotter_t* s, uint64_t step, uint32_t count,
                            pw_snap_t** out_snap);

/* The held snapshot of |step|, retained; NOT_FOUND naming the step and
 * listing the held ones. */
pw_status_t pw__snap_find(pw_snapshotter_t* s, uint64_t step, pw_snap_t** out_snap);
/* Adds complete |snap| to the ring (|s->mutex| held; the ring takes a
 * reference) and marks it HELD. When that makes keep + 1, the lowest step
 * (|snap| itself when it is the lowest) is dropped (GONE) and returned
 * with the ring's reference, for the caller to release unlocked. */
pw_snap_t* pw__snap_ring_insert_locked(pw_snapshotter_t* s, pw_snap_t* snap);
/* True when |step| is held or being taken (|s->mutex| held). */
bool pw__snap_step_busy_locked(pw_snapshotter_t* s, uint64_t step);

/* ---- persistence (persist.c, load.c) ---------------------------------------- */

/* Writes |snap| (complete) to the store and prunes older snapshots. */
pw_status_t pw__snap_persist(pw_snapshotter_t* s, pw_snap_t* snap);
/* The store's keys of this snapshotter's prefix, sorted by step
 * descending, manifests before data values of the same step. */
typedef struct pw_snap_key_t {
  uint64_t step;
  bool manifest;
  char key[PW_STORE_KEY_MAX + 1];
} pw_snap_key_t;
typedef struct pw_snap_keys_t {
  pw_snap_key_t* items;
  uint32_t count;
  uint32_t capacity;
} pw_snap_keys_t;
pw_status_t pw__snap_list_keys(pw_snapshotter_t* s, pw_snap_keys_t* out);
void pw__snap_keys_free(pw_snapshotter_t* s, pw_snap_keys_t* keys);
/* Deletes the store's snapshots of this prefix but the |keep| newest
 * manifests' (their manifests first, then their values), and values of
 * steps without a manifest (torn ones). Logs what fails and returns the
 * first failure (listing, or a remove other than NOT_FOUND). */
pw_status_t pw__snap_prune(pw_snapshotter_t* s);

/* ---- formats (format.c) ---------------------------------------------------- */

#define PW_SNAPSHOT_FORMAT_VERSION 1u
/* The manifest CBOR's "format": 2 adds each buffer's mesh (axis names
 * included) and tiled shardings; format 1 manifests are still read. */
#define PW_SNAPSHOT_MANIFEST_FORMAT 2u
#define PW_SNAPSHOT_VALUE_MAGIC "PWSNAPV\n"
#define PW_SNAPSHOT_MANIFEST_MAGIC "PWSNAPM\n"
#define PW_SNAPSHOT_VALUE_HEADER 64u
#define PW_SNAPSHOT_MANIFEST_HEADER 32u
/* Manifests larger than this are refused before decoding. */
#define PW_SNAPSHOT_MANIFEST_MAX ((size_t)64 << 20)

/* Store keys: "<prefix>-<step, 20 digits>.manifest" and
 * "<prefix>-<step>-<buffer, 5 digits>-<chunk, 6 digits>". */
void pw__snap_manifest_key(const pw_snapshotter_t* s, uint64_t step,
                           char key[PW_STORE_KEY_MAX + 1]);
void pw__snap_value_key(const pw_snapshotter_t* s, uint64_t step, uint32_t buffer,
                        uint32_t chunk, char key[PW_STORE_KEY_MAX + 1]);
/* Parses a key of this snapshotter's prefix: a manifest (|*out_is_manifest|)
 * or a data value, and its step. False for any other key. */
bool pw__snap_parse_key(const pw_snapshotter_t* s, const char* key, uint64_t* out_step,
                        bool* out_is_manifest);

/* One chunk as the manifest records it. */
typedef struct pw_snap_chunk_t {
  uint64_t offset;          /* in the buffer's raw bytes */
  uint64_t raw_bytes;
  uint64_t stored_bytes;    /* the value's size, header included */
  uint64_t raw_xxh64;       /* of the chunk's raw bytes */
} pw_snap_chunk_t;

/* The manifest's record of one buffer. */
typedef struct pw_snap_manifest_buffer_t {
  char name[PW_SNAPSHOT_NAME_MAX];
  pw_array_spec_t spec;
  pw_mesh_shape_t mesh;     /* format 2; zero (rank 0) in a format 1 manifest */
  uint64_t bytes;
  uint64_t xxh64;
  uint64_t stored_bytes;    /* sum over its chunks */
  uint32_t chunk_count;
  pw_snap_chunk_t* chunks;
} pw_snap_manifest_buffer_t;

typedef struct pw_snap_manifest_t {
  uint64_t step;
  uint64_t chunk_bytes;
  uint32_t count;
  pw_snap_manifest_buffer_t* buffers;
} pw_snap_manifest_t;

/* Frees what decode allocated (NULL-safe on parts). */
void pw__snap_manifest_free(pw_allocator_t allocator, pw_snap_manifest_t* m);
/* The whole manifest value (header + CBOR) of |m|. */
pw_status_t pw__snap_manifest_encode(pw_allocator_t allocator, const pw_snap_manifest_t* m,
                                     void** out_bytes, size_t* out_size);
/* Checks the header and checksum and decodes the CBOR strictly (every
 * field, type, range and size). DATA_LOSS naming the problem. */
pw_status_t pw__snap_manifest_decode(pw_allocator_t allocator, const void* bytes,
                                     size_t size, pw_snap_manifest_t* out);

/* zstd contexts whose memory comes from |allocator| (kept by the caller). */
typedef struct pw_snap_zstd_t {
  pw_allocator_t allocator;
  void* cctx;
  void* dctx;
} pw_snap_zstd_t;
void pw__snap_zstd_deinit(pw_snap_zstd_t* z);

/* A data value for |raw| (a chunk of buffer |index| of |step| at |offset|)
 * into |*out_value| (allocated; |*out_capacity| bytes, |*out_size| used). */
pw_status_t pw__snap_value_encode(pw_snap_zstd_t* z, int level, uint64_t step,
                                  uint32_t index, uint64_t offset, const void* raw,
                                  size_t raw_size, void** out_value, size_t* out_size,
                                  size_t* out_capacity);
/* Checks the value against what the manifest says (|step|, |index|,
 * |chunk|), verifies its checksums and decompresses it into |dst| (exactly
 * chunk->raw_bytes). DATA_LOSS naming the problem. */
pw_status_t pw__snap_value_decode(pw_snap_zstd_t* z, uint64_t step, uint32_t index,
                                  const pw_snap_chunk_t* chunk, const void* value,
                                  size_t size, void* dst);

#endif /* PW_SNAPSHOT_SNAPSHOT_INTERNAL_H_ */
