/* libpathways: the device backend plug.
 *
 * A backend runs computations on devices and holds their memory. The host
 * application (or a bundled backend: cpu, sim) fills a pw_backend_vtable_t
 * and hands the runtime a pw_backend_t {vtable, self}. Backend authors
 * include only this header.
 *
 * ABI: the vtable starts with struct_size and only grows at the end. The
 * runtime accepts any struct_size >= PW_BACKEND_VTABLE_SIZE_V1 and treats a
 * method that is NULL, or that lies beyond struct_size, as UNIMPLEMENTED —
 * never a crash.
 *
 * Threading: every method may be called from any thread, concurrently,
 * except destroy (called once, when nothing else is in flight).
 *
 * Async contract (launch): if launch returns an error, |done| is never
 * called; otherwise |done| is called exactly once, from any thread, possibly
 * inline before launch returns, and it takes ownership of the status it is
 * given (NULL = OK). A backend that breaks it (calls done twice, or calls
 * done and then returns an error) is reported, not obeyed: the runtime
 * logs it naming the backend, frees the extra status, and fails the op
 * with INTERNAL when the second completion comes before the runtime has
 * acted on the first (always when both happen inside the launch call);
 * a later one is logged and ignored. |done_user| is opaque (not a
 * pointer to dereference): it names the launch and stays valid while the
 * runtime lives; a stale completion is told apart from later launches'
 * until the device has launched 256 more ops.
 *
 * Gangs: the launches that share a gang_id form one gang op. If a backend
 * refuses one part (launch returns an error), the parts of that gang it has
 * accepted or will accept must complete with an error (ABORTED), never
 * wait for the refused part: the runtime cannot cancel them.
 *
 * Queue-ordered launch (optional, v3: queue_info). Without it the runtime
 * hands a device its next op only after the previous one's done ran and
 * the op's inputs are complete on the host: one host round trip between
 * two ops of a device. A backend whose devices run their launches in
 * submission order (a CUDA stream, an IREE queue, a FIFO worker) says so
 * through queue_info, with how many launches a device accepts ahead (its
 * depth). On a slice whose every device says so, the runtime then:
 *   - launches a device's compute ops in the order of the slice's
 *     sequence as soon as the previous op there has been *launched*, with
 *     at most |depth| launches outstanding per device (launched, done not
 *     yet called), and numbers them (pw_backend_launch_t.queue_seq);
 *   - may launch an op whose inputs earlier launches on the same device
 *     are still writing. A compute op's inputs always live on its own
 *     slice and mesh (graph validation), so every producer on a device is
 *     an earlier launch in the same queue, and queue order is the only
 *     device-side wait: the backend must run a device's launches one
 *     after another in queue_seq order, each seeing the writes of those
 *     before it (a collective blocks its queue until its gang meets, as
 *     NCCL's do). Inputs made elsewhere (transfer ops, host copies,
 *     arguments from another slice or backend, a producer that is not
 *     queued) are complete before the launch, as without the capability;
 *   - reads the descriptor and its arrays only during the launch call
 *     (the next launch reuses them): a queued backend copies what it needs
 *     before it returns;
 *   - treats a failed part (done with an error, or refused) as failing its
 *     op and every op that read its outputs, with the failure's status
 *     naming it. The backend need not track that: it runs the launches
 *     queued behind a failed one as they come (a refused part of a gang
 *     still completes its accepted parts, see Gangs), and done is called
 *     for each; the runtime fails the dependents whatever they report.
 * done may still be called from any thread; a queue-ordered backend calls
 * it for a device's launches in queue_seq order. A launch whose done never
 * comes (a lost launch) is failed with DEADLINE_EXCEEDED by the runtime's
 * watchdog when a launch deadline is set (pw_runtime_options_t,
 * pw_submission_t), and at pw_client_destroy after its drain deadline; a
 * done that comes after that is logged and ignored. The runtime may reuse
 * the memory of such a launch's outputs at once: a backend that cannot
 * stop a launch that is only slow must be given deadlines longer than
 * its slowest launch.
 *
 * Host launch (optional, v4: launch_host). Without it the runtime makes
 * one launch call per device of a gang op, so the controller's work per
 * gang op grows with the devices. A backend whose devices hang off hosts
 * with an executor of their own (a process per host, a remote agent; the
 * host is device_info's) takes all of one host's devices of a gang op in
 * one launch_host call and does the per-device work there. The runtime
 * then groups each slice's devices into lanes: maximal runs of devices
 * consecutive in mesh order that report the same host (a lane of one
 * device launches through launch). A lane is one unit of dispatch: one
 * cursor, one launch_host per op, one done for all its devices, so the
 * controller's work per gang op is per lane. For launch_host:
 *   - a backend that offers launch_host accepts any run of devices
 *     consecutive in the gang's mesh order that report one host (the
 *     runtime's are maximal; a test may split them), and refuses one
 *     that is not (INVALID_ARGUMENT) before any of it runs;
 *   - the descriptor names the lane's devices by their mesh positions
 *     mesh_start .. mesh_start + device_count - 1 (their ordinals are
 *     group_devices[mesh_start ..]) and, per input and output, an array
 *     of their shards in that order (the runtime's own shard arrays: no
 *     per-device copy is made);
 *   - everything the async contract, gangs and queue-ordered launch say
 *     of one launch holds for the lane as one launch: refused (an error
 *     returned) means no device of the lane runs it and done never comes;
 *     accepted means done (or done_timed) is called exactly once, when
 *     every device of the lane finished its part, with NULL or the first
 *     failure (naming the device is the backend's part); on a queued
 *     slice every device of the lane has taken the same launches, so one
 *     queue_seq numbers the launch in each of their queues;
 *   - done_timed's timing spans the lane: the earliest start to the
 *     latest end of its devices, and (timing v2) busy_ns the sum of
 *     their own device times; without busy_ns the span is charged once
 *     per device.
 * Transfers still copy per device (the transport's business).
 *
 * Device time (optional, launch v2: done_timed). A backend that knows when
 * the device started and finished a launch (a stream event's timestamps,
 * a simulator's virtual clock) calls done_timed instead of done, with
 * both: fair-share policies charge a client that device time rather than
 * the host's launch-to-done wall clock, which counts queueing too.
 */
#ifndef PATHWAYS_BACKEND_H_
#define PATHWAYS_BACKEND_H_

#include "pathways/allocator.h"
#include "pathways/api.h"
#include "pathways/status.h"
#include "pathways/types.h"

PW_EXTERN_C_BEGIN

/* Device memory owned by a backend; opaque to the runtime. */
typedef struct pw_backend_memory_s* pw_backend_memory_t;
/* A loaded executable owned by a backend; opaque to the runtime. */
typedef struct pw_backend_executable_s* pw_backend_executable_t;

typedef enum pw_device_health_e {
  PW_DEVICE_HEALTHY = 0,
  PW_DEVICE_DEGRADED = 1, /* runs, but should be drained */
  PW_DEVICE_FAILED = 2,   /* lost: launches fail with UNAVAILABLE */
} pw_device_health_t;

PW_API const char* pw_device_health_name(pw_device_health_t health);

typedef struct pw_backend_device_info_t {
  size_t struct_size;
  uint32_t host;          /* host (process/machine) the device hangs off */
  uint64_t memory_bytes;  /* device memory capacity, 0 if unknown */
  char kind[32];          /* "cpu", "sim-chip", ... NUL-terminated */
} pw_backend_device_info_t;

#define PW_BACKEND_DEVICE_INFO_SIZE_V1 PW_STRUCT_SIZE(pw_backend_device_info_t, kind)

/* One parameter or result of an executable, in the logical (global) view:
 * dtype, global shape, sharding over the executable's mesh. */
typedef pw_array_spec_t pw_backend_param_t;

/* The parameters and results the fixed arrays of a signature hold (v1);
 * an executable may have more (v2: input_specs / output_specs). */
#define PW_BACKEND_MAX_PARAMS 16

/* The hard limit on an executable's inputs, and separately on its
 * outputs: a backend that reports more is refused (INVALID_ARGUMENT
 * naming the executable). */
#define PW_EXECUTABLE_MAX_PARAMS 65535u

/* What a loaded executable computes, as the runtime validates graphs against
 * it. Filled by load: the runtime sets struct_size (and zeroes the rest)
 * before the call; a backend writes only the fields struct_size covers.
 *
 * Parameter specs. A v1 backend writes input_count (at most
 * PW_BACKEND_MAX_PARAMS) specs into |inputs|, and likewise outputs. A
 * backend that sees struct_size >= PW_EXECUTABLE_SIGNATURE_SIZE_V2 may
 * instead (and must, for more than PW_BACKEND_MAX_PARAMS) point
 * input_specs at input_count specs (output_specs likewise) in storage its
 * executable owns, valid until unload; the runtime copies them during
 * load, and when a pointer is set it is read instead of the fixed array.
 * A count over PW_BACKEND_MAX_PARAMS with a NULL pointer is refused
 * (INTERNAL naming the backend), as is a count over
 * PW_EXECUTABLE_MAX_PARAMS.
 *
 * Read back with pw_executable_signature: the fixed arrays hold the first
 * min(count, PW_BACKEND_MAX_PARAMS) specs; with a v2 struct_size the
 * pointers are set too, to every spec, in storage the runtime owns, valid
 * while the executable's handle lives. A v1 struct_size is refused
 * (OUT_OF_RANGE) for an executable with more than PW_BACKEND_MAX_PARAMS
 * inputs or outputs, as it could not see them; pw_executable_param reads
 * one spec at a time with any struct. */
typedef struct pw_executable_signature_t {
  size_t struct_size;       /* set by the caller: sizeof(pw_executable_signature_t) */
  char name[64];            /* the kernel/function name, for messages */
  pw_mesh_shape_t mesh;     /* the mesh it was compiled for */
  uint32_t input_count;
  uint32_t output_count;
  pw_backend_param_t inputs[PW_BACKEND_MAX_PARAMS];
  pw_backend_param_t outputs[PW_BACKEND_MAX_PARAMS];
  /* -- v2 fields start here -- */
  const pw_backend_param_t* input_specs;   /* input_count specs, or NULL */
  const pw_backend_param_t* output_specs;  /* output_count specs, or NULL */
} pw_executable_signature_t;

#define PW_EXECUTABLE_SIGNATURE_SIZE_V1 PW_STRUCT_SIZE(pw_executable_signature_t, outputs)
#define PW_EXECUTABLE_SIGNATURE_SIZE_V2 PW_STRUCT_SIZE(pw_executable_signature_t, output_specs)

/* Completion of one launch. Owns |status|. */
typedef void (*pw_backend_done_fn_t)(void* done_user, pw_status_t status);

/* When a device ran one launch, in nanoseconds of the backend's device
 * clock (any epoch; only end_ns - start_ns is charged). */
typedef struct pw_backend_timing_t {
  size_t struct_size;
  uint64_t start_ns;
  uint64_t end_ns;
  /* -- v2 fields start here -- */
  /* The device time of every device the completion covers, summed (a
   * host launch: each device's own time, as a failed one stops early);
   * 0: unknown, (end_ns - start_ns) per device is charged. */
  uint64_t busy_ns;
} pw_backend_timing_t;

#define PW_BACKEND_TIMING_SIZE_V1 PW_STRUCT_SIZE(pw_backend_timing_t, end_ns)
#define PW_BACKEND_TIMING_SIZE_V2 PW_STRUCT_SIZE(pw_backend_timing_t, busy_ns)

/* done, with the device time of the launch (|timing| NULL: unknown, as
 * done). The runtime reads |timing| during the call only. */
typedef void (*pw_backend_done_timed_fn_t)(void* done_user, pw_status_t status,
                                           const pw_backend_timing_t* timing);

/* One device's part of a gang op. Pointers are valid until |done| runs
 * (queue-ordered launch: during the launch call only). */
typedef struct pw_backend_launch_t {
  size_t struct_size;
  pw_backend_executable_t executable;
  uint32_t device;        /* backend device ordinal to run on */
  uint32_t mesh_index;    /* this device's row-major position in the mesh */
  /* Backend ordinals of every device of the gang, in mesh order
   * (group_devices[mesh_index] == device). Collectives rendezvous among the
   * launches that share |gang_id|. */
  const uint32_t* group_devices;
  uint32_t group_size;
  uint64_t gang_id;       /* unique per gang op instance in this backend */
  const pw_backend_memory_t* inputs;   /* this device's shard of each input */
  uint32_t input_count;
  const pw_backend_memory_t* outputs;  /* this device's shard of each output */
  uint32_t output_count;
  pw_backend_done_fn_t done;
  void* done_user;
  /* -- v2 fields start here (set by a runtime that hands struct_size >=
   * PW_BACKEND_LAUNCH_SIZE_V2) -- */
  /* Queue-ordered launch: this launch's position in its device's queue
   * (1, 2, ... one per launch on the device, refused ones included); 0
   * when the slice is not launched queue-ordered (one launch at a time). */
  uint64_t queue_seq;
  /* Completes the launch as done does, with its device time; either one
   * of the two is called, once. Never NULL from a v2 runtime. */
  pw_backend_done_timed_fn_t done_timed;
  /* -- v3 fields start here -- */
  /* The graph node's argument (pw_graph_set_node_arg): a constant the
   * kernel may read, so one executable serves many nodes; 0 when unset.
   * A backend that reads it checks struct_size >= PW_BACKEND_LAUNCH_SIZE_V3
   * (an older runtime's launch has none: 0). */
  uint64_t node_arg;
} pw_backend_launch_t;

#define PW_BACKEND_LAUNCH_SIZE_V1 PW_STRUCT_SIZE(pw_backend_launch_t, done_user)
#define PW_BACKEND_LAUNCH_SIZE_V2 PW_STRUCT_SIZE(pw_backend_launch_t, done_timed)
#define PW_BACKEND_LAUNCH_SIZE_V3 PW_STRUCT_SIZE(pw_backend_launch_t, node_arg)

/* All of one host's devices of one gang op (launch_host, see "Host
 * launch" above). Pointers are valid until |done| runs (queue-ordered
 * launch: during the launch call only). */
typedef struct pw_backend_host_launch_t {
  size_t struct_size;
  pw_backend_executable_t executable;
  uint32_t host;          /* the host every device here reports */
  /* The lane: mesh indices mesh_start .. mesh_start + device_count - 1
   * of the gang, backend ordinals group_devices[mesh_start + i]. */
  uint32_t mesh_start;
  uint32_t device_count;
  /* Backend ordinals of every device of the gang, in mesh order;
   * collectives rendezvous among every part (host launches and single
   * launches alike) that shares |gang_id|. */
  const uint32_t* group_devices;
  uint32_t group_size;
  uint64_t gang_id;
  /* inputs[k][i]: the shard of input k on the lane's i-th device (mesh
   * index mesh_start + i); outputs likewise. */
  const pw_backend_memory_t* const* inputs;
  uint32_t input_count;
  const pw_backend_memory_t* const* outputs;
  uint32_t output_count;
  /* Queue-ordered launch: the launch's position in each of the lane's
   * device queues (the same in all of them); 0 when not queued. */
  uint64_t queue_seq;
  /* Called once for the whole lane, one of the two (as for launch). */
  pw_backend_done_fn_t done;
  pw_backend_done_timed_fn_t done_timed;
  void* done_user;
  /* -- v2 fields start here -- */
  /* As pw_backend_launch_t.node_arg, for every device of the lane. */
  uint64_t node_arg;
} pw_backend_host_launch_t;

#define PW_BACKEND_HOST_LAUNCH_SIZE_V1 PW_STRUCT_SIZE(pw_backend_host_launch_t, done_user)
#define PW_BACKEND_HOST_LAUNCH_SIZE_V2 PW_STRUCT_SIZE(pw_backend_host_launch_t, node_arg)

/* What queue_info reports of one device. */
enum {
  /* The device runs its launches in queue_seq order, each after the
   * writes of those before it (see "Queue-ordered launch" above). */
  PW_BACKEND_QUEUE_ORDERED = 1u,
};

typedef struct pw_backend_queue_info_t {
  size_t struct_size;   /* set by the caller */
  uint32_t flags;       /* PW_BACKEND_QUEUE_ORDERED, or 0 */
  /* Launches the device accepts ahead of their completion (>= 1 when
   * ordered; the runtime never has more outstanding, and caps it at
   * PW_BACKEND_MAX_QUEUE_DEPTH). */
  uint32_t depth;
} pw_backend_queue_info_t;

#define PW_BACKEND_QUEUE_INFO_SIZE_V1 PW_STRUCT_SIZE(pw_backend_queue_info_t, depth)
#define PW_BACKEND_MAX_QUEUE_DEPTH 1024

typedef struct pw_backend_vtable_t {
  size_t struct_size;
  const char* name;   /* "cpu"; part of compile-cache keys */
  uint32_t version;   /* bump when compiled output changes; part of cache keys */

  /* Frees the backend. Nothing may be in flight. */
  void (*destroy)(void* self);

  uint32_t (*device_count)(void* self);
  pw_status_t (*device_info)(void* self, uint32_t device,
                             pw_backend_device_info_t* out_info);
  pw_device_health_t (*health)(void* self, uint32_t device);

  /* Compiles |program| (backend-specific bytes) for |mesh| into executable
   * bytes allocated from |allocator| (the caller frees them with the same
   * allocator and |*out_size|). Must be deterministic: the same inputs give
   * the same bytes, so they can be cached by content hash. |options| may be
   * NULL or "". */
  pw_status_t (*compile)(void* self, const void* program, size_t program_size,
                         const pw_mesh_shape_t* mesh, const char* options,
                         pw_allocator_t allocator, void** out_bytes,
                         size_t* out_size);

  /* Loads executable bytes made by compile (possibly by another process);
   * fills |out_signature|. Bytes that are corrupt or foreign are
   * INVALID_ARGUMENT/DATA_LOSS, never a crash. */
  pw_status_t (*load)(void* self, const void* bytes, size_t size,
                      pw_backend_executable_t* out_executable,
                      pw_executable_signature_t* out_signature);
  void (*unload)(void* self, pw_backend_executable_t executable);

  /* Device memory. |size| may be 0 (a valid, empty allocation). */
  pw_status_t (*allocate)(void* self, uint32_t device, size_t size,
                          pw_backend_memory_t* out_memory);
  void (*deallocate)(void* self, uint32_t device, pw_backend_memory_t memory);

  /* Asynchronous launch; see the async contract above. */
  pw_status_t (*launch)(void* self, const pw_backend_launch_t* launch);

  /* Synchronous copies between host memory and device memory. Out of range
   * offsets/sizes are OUT_OF_RANGE. */
  pw_status_t (*copy_to_device)(void* self, uint32_t device,
                                pw_backend_memory_t dst, size_t offset,
                                const void* src, size_t size);
  pw_status_t (*copy_to_host)(void* self, uint32_t device,
                              pw_backend_memory_t src, size_t offset,
                              void* dst, size_t size);

  /* Optional: a host pointer to |memory| if the device memory is host
   * accessible (zero-copy views, in-process transports); NULL otherwise. */
  void* (*host_pointer)(void* self, uint32_t device, pw_backend_memory_t memory);

  /* -- v2 methods start here -- */

  /* Optional: told of a copy of |bytes| bytes from |src| on |src_device|
   * to |dst| on |dst_device|, two of this backend's devices, that a
   * transport makes itself (through host pointers) instead of asking the
   * backend, before it moves the bytes. A backend that models time or
   * traffic (the sim: link time, faults on the way) accounts for it here;
   * an error fails the copy with that status. NULL, or beyond struct_size:
   * nothing to account. */
  pw_status_t (*record_copy)(void* self, uint32_t src_device, pw_backend_memory_t src,
                             uint32_t dst_device, pw_backend_memory_t dst, size_t bytes);

  /* -- v3 methods start here -- */

  /* Optional: how |device| takes launches (see "Queue-ordered launch"
   * above). The caller zeroes |out_info| and sets its struct_size. NULL,
   * beyond struct_size, an error, flags without PW_BACKEND_QUEUE_ORDERED
   * or depth 0: one launch at a time, as a v1 backend. Asked once per
   * device, when the runtime is created. */
  pw_status_t (*queue_info)(void* self, uint32_t device, pw_backend_queue_info_t* out_info);

  /* -- v4 methods start here -- */

  /* Optional: launches one host's devices of a gang op in one call (see
   * "Host launch" above). NULL or beyond struct_size: one launch per
   * device, as before. */
  pw_status_t (*launch_host)(void* self, const pw_backend_host_launch_t* launch);

  /* -- v5 methods start here -- */

  /* Optional: makes |size| bytes of host memory at |host| the device
   * memory of |device| without a copy (zero-copy host buffers,
   * include/pathways/buffer.h), for a backend whose devices use host
   * memory directly. The memory stays the caller's: the backend reads it
   * (launches may read it, as any input) until deallocate of the returned
   * memory returns, never writes it as an input, and deallocate frees
   * only the backend's own record of it. An error (FAILED_PRECONDITION:
   * an alignment it cannot use, memory its devices cannot reach) makes
   * the runtime copy instead, as it does when the method is NULL or
   * beyond struct_size. */
  pw_status_t (*adopt_host)(void* self, uint32_t device, void* host, size_t size,
                            pw_backend_memory_t* out_memory);

  /* -- v6 methods start here -- */

  /* Optional: dst[i] += src[i] for i < |count| elements of |dtype|, |dst|
   * at byte |dst_offset| and |src| at byte |src_offset| of two memories of
   * |device| (never overlapping), synchronously: the sum is in |dst| when
   * it returns. The runtime uses it to reduce partial sums in a transfer
   * whose source sharding is unreduced over mesh axes its destination is
   * not (docs/architecture.md, "Resharding"). Integers wrap modulo 2^bits;
   * narrow floats may be summed in f32 and rounded once. A dtype the
   * backend cannot add is UNIMPLEMENTED naming it. A call with |count| 0
   * and NULL memories touches nothing and only answers whether |dtype| is
   * supported: graph validation asks it so, and a transfer that needs a
   * reduction on a backend without accumulate (NULL, or beyond
   * struct_size) or without the dtype is refused there, naming the
   * backend. Out of range offsets/counts are OUT_OF_RANGE. */
  pw_status_t (*accumulate)(void* self, uint32_t device, pw_dtype_t dtype,
                            pw_backend_memory_t dst, size_t dst_offset, pw_backend_memory_t src,
                            size_t src_offset, size_t count);
} pw_backend_vtable_t;

#define PW_BACKEND_VTABLE_SIZE_V1 PW_STRUCT_SIZE(pw_backend_vtable_t, host_pointer)
#define PW_BACKEND_VTABLE_SIZE_V2 PW_STRUCT_SIZE(pw_backend_vtable_t, record_copy)
#define PW_BACKEND_VTABLE_SIZE_V3 PW_STRUCT_SIZE(pw_backend_vtable_t, queue_info)
#define PW_BACKEND_VTABLE_SIZE_V4 PW_STRUCT_SIZE(pw_backend_vtable_t, launch_host)
#define PW_BACKEND_VTABLE_SIZE_V5 PW_STRUCT_SIZE(pw_backend_vtable_t, adopt_host)
#define PW_BACKEND_VTABLE_SIZE_V6 PW_STRUCT_SIZE(pw_backend_vtable_t, accumulate)

/* A backend instance. The runtime takes ownership when it is handed one
 * (and calls vtable->destroy(self) when done with it). */
typedef struct pw_backend_t {
  const pw_backend_vtable_t* vtable;
  void* self;
} pw_backend_t;

PW_EXTERN_C_END

#endif /* PATHWAYS_BACKEND_H_ */
