/* A test-double device backend: small, complete, deterministic, written
 * against the public plugin header only (pathways/backend.h), exactly as a
 * host application would write its own backend.
 *
 * Runtime tests use it to control what a real backend would do by chance:
 * when launches complete (inline, on a helper thread, or when the test says
 * so), which device fails and when, which launch fails; and to observe what
 * the runtime asked for (launch counts, the per-device gang order).
 *
 * PROGRAM FORMAT (what compile takes). ASCII text, lines separated by '\n';
 * blanks around words and '\r' are ignored, as are empty lines and lines
 * starting with '#'. The first line is the operation:
 *
 *   noop             completes OK; touches no memory; any inputs/outputs
 *   copy             output 0 = input 0 (byte copy; the shards' sizes match)
 *   fill <byte>      every byte of every output = <byte> (0..255)
 *   fail <code>      completes with status code <code> (1..16)
 *   all_reduce_sum   collective over the launch's gang: on every device,
 *                    output 0 = element-wise sum of input 0 over the gang's
 *                    devices, summed in mesh order (so bit-reproducible);
 *                    dtype from the signature, f32 by default
 *
 * followed by optional parameter lines that make up the signature the
 * runtime validates graphs against:
 *
 *   input  <dtype>[<dim>,<dim>...] [replicated | split(<axis>,<mesh_axis>|all)]
 *   output <dtype>[<dim>,...]      [sharding]
 *
 * e.g. "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n".
 * Without parameter lines an operation gets its default signature, every
 * parameter u8[1] replicated (f32[1] for all_reduce_sum): noop and fail none,
 * copy and all_reduce_sum one input and one output, fill one output. copy and
 * all_reduce_sum need one input and one output of the same dtype whose
 * per-device shards have the same element count (so both "input f32[8]
 * replicated / output f32[8] replicated" and the CPU backend's
 * "input f32[8,4] split(0,all) / output f32[4] replicated" are accepted);
 * fill needs no input. Shapes and shardings are checked against the mesh.
 * At most PW_DOUBLE_MAX_PARAMS (4096) inputs and outputs each; a program
 * with more than PW_BACKEND_MAX_PARAMS of either hands load's caller every
 * spec through the signature's v2 pointers (a narrower one fills the fixed
 * arrays only, as a v1 backend does).
 * Compile options are not interpreted but are part of the executable bytes.
 *
 * EXECUTABLE BYTES (what compile makes and load takes), little-endian:
 *   "PWDB" | u32 version (1) | u32 payload size | u64 FNV-1a-64 of payload |
 *   payload = u32 mesh rank | 4 x u32 mesh dims | u32 options length |
 *             options | u32 program length | canonical program text
 * Load rejects a wrong magic or version (INVALID_ARGUMENT) and a size or
 * checksum mismatch (DATA_LOSS). The canonical text is regenerated from the
 * parsed program, so compile is deterministic whatever the spacing.
 *
 * MEMORY is host memory from the backend's allocator, a capacity per device
 * (RESOURCE_EXHAUSTED beyond it); host_pointer returns it.
 *
 * LAUNCH checks what a careful backend checks (device ordinal, gang fields,
 * parameter counts, memory belongs to the device, shard sizes) and returns
 * INVALID_ARGUMENT without calling |done| otherwise. A collective part whose
 * gang can no longer complete (a gang device failed, another part was
 * rejected) completes with UNAVAILABLE/ABORTED instead of waiting forever.
 *
 * HOST LAUNCH (options.host_launch) takes a run of devices consecutive in
 * the gang's mesh order that all report the descriptor's host. It checks
 * the whole descriptor first (struct size, done, the run's bounds in the
 * gang, the input/output arrays, each device's host, and each device's part
 * as launch checks it) and returns INVALID_ARGUMENT naming the field or the
 * device, with nothing run; then it runs each device's part as launch would
 * (same completion mode, collectives rendezvous with single launches of
 * the gang) and calls done once, after the last part, with NULL or the
 * first failure. A FAILED device in the run refuses it (UNAVAILABLE) or
 * fails it at completion, per failed_device_mode. fail_launch counts a host
 * launch as one launch: the injected failure refuses or fails the whole
 * host launch. The double keeps no device clock, so done_timed (when done
 * is NULL) gets no timing; it ignores queue_seq, as launch does (the queue
 * wrapper of tests/support makes it queue-ordered). No-op mode checks only
 * what the contract makes it refuse (no memory or per-part checks) and
 * counts per host, not per device.
 *
 * THREADING: every function here may be called from any thread, concurrently
 * with the vtable methods, except where noted. */
#ifndef PW_TESTS_CTS_DOUBLE_BACKEND_H_
#define PW_TESTS_CTS_DOUBLE_BACKEND_H_

#include "pathways/backend.h"

/* The backend's vtable name and version. */
#define PW_DOUBLE_BACKEND_NAME "double"
#define PW_DOUBLE_BACKEND_VERSION 1u

typedef enum pw_double_completion_e {
  /* done runs inside launch, on the launching thread, before it returns. */
  PW_DOUBLE_COMPLETE_INLINE = 0,
  /* done runs on a helper thread; launches of one device run in order. */
  PW_DOUBLE_COMPLETE_THREADED = 1,
  /* launches queue up until the test calls pw_double_backend_run_deferred,
   * which runs them on the calling thread: fully deterministic interleaving. */
  PW_DOUBLE_COMPLETE_DEFERRED = 2,
} pw_double_completion_t;

typedef enum pw_double_fail_mode_e {
  /* launch itself returns the error; done never runs. */
  PW_DOUBLE_FAIL_AT_LAUNCH = 0,
  /* launch returns OK and done receives the error. */
  PW_DOUBLE_FAIL_AT_COMPLETION = 1,
} pw_double_fail_mode_t;

typedef struct pw_double_options_t {
  size_t struct_size;               /* sizeof(pw_double_options_t) */
  uint32_t device_count;            /* 0 means 8 */
  pw_double_completion_t completion;
  uint32_t worker_count;            /* THREADED helper threads; 0 means 1 */
  uint64_t memory_bytes;            /* capacity per device; 0 means 256 MiB */
  /* Gang ids remembered per device for pw_double_backend_launch_order;
   * 0 means 4096. Later launches are counted but not recorded. */
  uint32_t order_capacity;
  /* What a launch on a FAILED device does (default: fail at launch). */
  pw_double_fail_mode_t failed_device_mode;
  /* The no-op configuration for dispatch benchmarks: every launch completes
   * OK inline whatever the program; allocate hands out empty handles and
   * copies do nothing; only launch counts are kept (no order, no stats
   * beyond launches), without a locked instruction: exact while a device's
   * launches do not overlap, as the runtime's gang order guarantees (its
   * debug mode without gang order may lose counts). |completion| is
   * ignored. */
  bool no_op;
  /* Allocator for everything the backend allocates; zero means system. */
  pw_allocator_t allocator;
  /* THREADED: a helper thread that runs a collective part waits until the
   * whole gang has completed before it runs the next launch of its queue,
   * as a real device blocks in a collective. With one helper per device
   * this models hardware whose devices each run one program at a time;
   * launches reaching two devices in different orders then deadlock. */
  bool blocking_collectives;
  /* Hosts: device_info reports host = device / devices_per_host (0: every
   * device on host 0, as one host). */
  uint32_t devices_per_host;
  /* Offers launch_host (backend.h, "Host launch") in the vtable; off, the
   * vtable has none and the runtime launches per device. See HOST LAUNCH
   * above. */
  bool host_launch;
} pw_double_options_t;

/* Fills |options| with the defaults (inline completion, 8 devices). */
void pw_double_options_init(pw_double_options_t* options);

/* Creates a double backend; |options| may be NULL for the defaults and is
 * copied. On success |*out_backend| owns the instance: release it with
 * out_backend->vtable->destroy(out_backend->self) (or hand it to a runtime,
 * which does). INVALID_ARGUMENT for bad options, RESOURCE_EXHAUSTED when
 * the allocator fails (nothing is leaked). */
pw_status_t pw_double_backend_create(const pw_double_options_t* options,
                                     pw_backend_t* out_backend);

/* The control handle of a double; NULL if |backend| is not a double (any
 * vtable variant below). Valid until the backend is destroyed. */
typedef struct pw_double_backend_s pw_double_backend_t;
pw_double_backend_t* pw_double_backend_from(const pw_backend_t* backend);

/* --- Deliberately broken vtables, to test the runtime's checked calls. --- */
typedef enum pw_double_vtable_variant_e {
  PW_DOUBLE_VTABLE_NORMAL = 0,
  /* struct_size ends just before |launch| (< PW_BACKEND_VTABLE_SIZE_V1):
   * name, destroy, device and compile/load/memory methods are inside it,
   * launch, the copies and host_pointer are beyond it. */
  PW_DOUBLE_VTABLE_SHORT = 1,
  /* Full v1 size, every method NULL except destroy. */
  PW_DOUBLE_VTABLE_NULL_METHODS = 2,
  /* Full v1 size and methods, but |name| is NULL. */
  PW_DOUBLE_VTABLE_NO_NAME = 3,
  /* A "future" backend: struct_size larger than this build's vtable, with
   * unknown v2 slots after it; the runtime must accept it as v1. */
  PW_DOUBLE_VTABLE_FUTURE = 4,
} pw_double_vtable_variant_t;

/* As pw_double_backend_create, with |variant|'s vtable. Every variant keeps
 * a working destroy. */
pw_status_t pw_double_backend_create_variant(const pw_double_options_t* options,
                                             pw_double_vtable_variant_t variant,
                                             pw_backend_t* out_backend);

/* --- Fault injection. --- */

/* Sets the health |device| reports. FAILED makes launches on it fail with
 * UNAVAILABLE (at launch or at completion, per failed_device_mode), fails
 * its queued launches when they run, and aborts pending collectives of
 * gangs that include it. HEALTHY again restores it. Out-of-range devices
 * are ignored. */
void pw_double_backend_set_health(pw_double_backend_t* d, uint32_t device,
                                  pw_device_health_t health);

/* Makes the |nth| launch from now (1-based, counting launch calls that pass
 * argument checks, over all devices) fail with |code| in |mode|. One shot;
 * a new call replaces a pending injection; |nth| == 0 cancels it. */
void pw_double_backend_fail_launch(pw_double_backend_t* d, uint64_t nth,
                                   pw_status_code_t code,
                                   pw_double_fail_mode_t mode);

/* --- Completion control. --- */

/* THREADED: stops (true) or restarts (false) the helper threads taking new
 * launches, so launches stay in flight until resumed. */
void pw_double_backend_pause(pw_double_backend_t* d, bool paused);

/* DEFERRED: runs up to |max_count| queued launches (0 = all, including any
 * queued meanwhile) on the calling thread, in launch order; returns how
 * many ran. Must not be called from inside a done callback of this
 * backend. */
size_t pw_double_backend_run_deferred(pw_double_backend_t* d, size_t max_count);

/* Waits until no launch is in flight (every accepted launch's done has
 * returned) or |timeout_ns| passes; true when idle. */
bool pw_double_backend_wait_idle(pw_double_backend_t* d, uint64_t timeout_ns);

/* --- Counters. --- */

typedef struct pw_double_device_stats_t {
  uint64_t launches;        /* launch calls that returned OK */
  uint64_t rejected;        /* launch calls that returned an error */
  uint64_t completed_ok;    /* done calls with OK (counted before done runs) */
  uint64_t completed_error; /* done calls with an error (likewise) */
} pw_double_device_stats_t;

/* Counters of |device| (zero for an out-of-range device). */
pw_double_device_stats_t pw_double_backend_device_stats(pw_double_backend_t* d,
                                                        uint32_t device);
/* Accepted launches on |device|. */
uint64_t pw_double_backend_launch_count(pw_double_backend_t* d, uint32_t device);
/* Accepted launches over all devices (host launches' parts included). */
uint64_t pw_double_backend_total_launches(pw_double_backend_t* d);
/* Host launches accepted (launch_host calls that returned OK) on |host|,
 * and over all hosts. Their parts also count in the per-device counters
 * above, except in no-op mode, where only pw_double_backend_total_launches
 * includes them (it counts every device part of every launch). */
uint64_t pw_double_backend_host_launch_count(pw_double_backend_t* d, uint32_t host);
uint64_t pw_double_backend_total_host_launches(pw_double_backend_t* d);
/* Launch_host calls refused (an error returned) that named |host|. */
uint64_t pw_double_backend_host_rejected(pw_double_backend_t* d, uint32_t host);

/* Launches accepted whose done has not returned yet. */
uint64_t pw_double_backend_in_flight(pw_double_backend_t* d);

/* Copies the gang ids of the launches accepted on |device|, in the order
 * launch was called, into |out_gang_ids| (up to |capacity| of them); returns
 * how many were recorded (at most order_capacity), which may exceed
 * |capacity|. */
size_t pw_double_backend_launch_order(pw_double_backend_t* d, uint32_t device,
                                      uint64_t* out_gang_ids, size_t capacity);

/* Clears launch counts, stats and recorded orders (not health or memory).
 * Call only while nothing is in flight. */
void pw_double_backend_reset_counters(pw_double_backend_t* d);

/* Live device allocations and loaded executables (leak checks). */
size_t pw_double_backend_live_allocations(pw_double_backend_t* d);
size_t pw_double_backend_live_executables(pw_double_backend_t* d);

#endif /* PW_TESTS_CTS_DOUBLE_BACKEND_H_ */
