/* Internal: the objects a client creates, as every module sees them
 * (lib/core): virtual slices, executables, buffers (buffer.c makes one).
 * Ownership: the client's handle table holds one reference to each; an
 * execution holds references to the buffers it reads and writes and to
 * its graph until its ops have completed; the last reference frees the
 * object with the runtime's allocator. Not installed. */
#ifndef PW_CORE_OBJECTS_H_
#define PW_CORE_OBJECTS_H_

#include "core/client.h"
#include "pathways/buffer.h"
#include "pathways/executable.h"
#include "pathways/graph.h"

typedef struct pw_vslice_obj_s {
  pw_object_t header;
  pw_slice_t* slice;       /* binding: a physical or a composite slice */
  pw_mesh_shape_t mesh;    /* as asked; same device count as the slice */
  pw_client_t* client;
  uint32_t losses;         /* slice->losses when it was bound */
} pw_vslice_obj_t;

typedef struct pw_executable_obj_s {
  pw_object_t header;
  const pw_backend_t* backend;
  pw_backend_executable_t loaded;
  /* Its v2 spec pointers point into |params| (input_count + output_count
   * specs, runtime allocator), set once at load. */
  pw_executable_signature_t signature;
  pw_backend_param_t* params;
  size_t param_count;
  void* bytes;
  size_t byte_size;
  /* What it was compiled from (NULL when loaded from bytes), so that
   * pw_graph_encode can write it inline. Owned, runtime allocator. */
  void* program;
  size_t program_size;
  char* options;          /* NUL-terminated; NULL for none */
  size_t options_size;    /* its allocation: strlen + 1 */
} pw_executable_obj_t;

/* Shard slots a buffer object holds inline: buffers of slices with at
 * most this many devices need no separate shard array. */
#define PW_BUFFER_INLINE_SHARDS 2

typedef struct pw_buffer_obj_s {
  pw_object_t header;
  /* What launches read first, on the object's first cache line with the
   * header: the shards (per device, mesh order; written by the device
   * that produces the shard before the ready event completes), which are
   * |inline_shards| when the slice has at most PW_BUFFER_INLINE_SHARDS
   * devices, else a separate array (after the object, for internal
   * values in an execution block). */
  pw_backend_memory_t* shards;
  pw_backend_memory_t inline_shards[PW_BUFFER_INLINE_SHARDS];
  size_t shard_bytes;
  pw_event_t* ready;
  pw_slice_t* slice;
  pw_mesh_shape_t mesh;      /* the vslice's mesh */
  pw_vslice_obj_t* vslice;   /* retained */
  pw_array_spec_t spec;
  size_t total_bytes;
  /* slice->losses when it was made: a loss since then took its shards
   * (lib/sched/health.c, pw__buffer_lost). */
  uint32_t losses;
  /* Host fills (lib/runtime/buffer_async.c): PW_BUFFER_FILL_*, 0 for a
   * buffer made by a submission. Set once from EMPTY, by the fill that
   * claims it or by the cancel when its handle goes first. */
  pw_atomic_u32_t fill;
  uint64_t handle;            /* its handle id, for messages (fillable buffers) */
  /* Zero-copy (adopted host memory): completed, OK, once its shards are
   * deallocated, i.e. the backend no longer reads the caller's memory;
   * NULL otherwise. Owned (one reference). */
  pw_event_t* host_release;
  struct pw_buffer_obj_s* cancel_next; /* pw__buffer_cancel_unfilled's list */
} pw_buffer_obj_t;

/* pw_buffer_obj_t.fill. */
enum {
  PW_BUFFER_FILL_NONE = 0,      /* a submission's output: never filled by the host */
  PW_BUFFER_FILL_EMPTY = 1,     /* pw_buffer_create_empty, no fill yet */
  PW_BUFFER_FILL_CLAIMED = 2,   /* a host fill took it (done or running), or from_host */
  PW_BUFFER_FILL_CANCELLED = 3, /* its handle went before a fill: ready failed */
};

/* The client's handle to |b| went (release, donation, client destroy):
 * an EMPTY buffer becomes CANCELLED and its ready event fails with
 * CANCELLED naming it (|why|: "released", ...), which fails whatever
 * waits for it. Any other buffer: nothing. lib/core/buffer.c. */
void pw__buffer_unhandled(pw_buffer_obj_t* b, const char* why);

/* Cancels every EMPTY buffer in |client|'s table (pw_client_destroy,
 * before it waits for the client's work, which may wait for them). */
void pw__buffer_cancel_unfilled(pw_client_t* client);

/* A buffer of |spec| on |vslice| without shards yet. |total_bytes| and
 * |shard_bytes| come from pw_array_spec_byte_sizes (a plan computes them
 * once, at lowering). */
pw_status_t pw__buffer_create(pw_vslice_obj_t* vslice, const pw_array_spec_t* spec,
                              size_t total_bytes, size_t shard_bytes,
                              pw_buffer_obj_t** out_buffer);

#endif /* PW_CORE_OBJECTS_H_ */
