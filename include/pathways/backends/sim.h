/* libpathways: the bundled simulated backend ("sim").
 *
 * A device backend that models a fleet of accelerators in VIRTUAL time:
 * thousands of chips (64 slices x 256 chips in one instance is routine),
 * a cost model per executable, collectives as gang rendezvous, a transfer
 * cost across slices, and seeded failure injection. Nothing is computed
 * for real except two small data effects (copy, all_reduce_sum) that let
 * the conformance suite and the transports check bytes. It drives scale
 * benchmarks (pw-bench sim-spmd) and deterministic tests.
 *
 * Written as a host application would write its own backend: it uses only
 * the public headers.
 *
 * FLEET
 * -----
 * |slice_count| slices of |devices_per_slice| chips; chip c of slice s is
 * backend device ordinal s * devices_per_slice + c. Slices matter to the
 * sim for slice failures and for the cost of transfers between devices.
 *
 * HOSTS
 * -----
 * Each slice's chips hang off devices_per_slice / devices_per_host hosts
 * (options v3; default one host per slice): device d reports host
 * d / devices_per_host in device_info, and hosts never straddle slices.
 * launch_host (vtable v4, see pathways/backend.h "Host launch") takes a
 * lane, a run of one host's devices of a gang op consecutive in mesh
 * order, in one call: it validates the whole lane first (every device on
 * |host|, and everything launch checks of each device's part; on an
 * ordered device also the queue_seq and the depth) and refuses it with
 * INVALID_ARGUMENT (RESOURCE_EXHAUSTED for a full queue) before any
 * device runs anything. Then each device's part runs exactly as a launch
 * of it would (same virtual times, collectives meeting with single
 * launches of the gang, failures, queues, trace hash), and done (or
 * done_timed, when set) is called once when all have completed, with
 * NULL or the first failure and the span from the earliest start to the
 * latest end. With a dispatch latency the launches made from that done
 * are issued at the lane's end. A part refused after validation (no
 * memory for it in queued modes or collectives, or an ordered device's
 * queue changed during the call) refuses the lane as a whole: the parts
 * already accepted complete unseen (a collective's ABORTED), and done
 * never comes. pw_sim_stats_t v3 counts the accepted calls
 * (host_launches).
 *
 * VIRTUAL TIME
 * ------------
 * Time is an integer count of virtual nanoseconds (pw_sim_time_t), starting
 * at 0. Each device has a timeline: an op launched on it starts at
 *   start = max(the end of the device's previous op,
 *               the virtual time each input memory became ready,
 *               the host time at launch)
 * where the host time is the launch time + dispatch_latency_ns (with a
 * latency, a launch made from a done callback is issued at that
 * completion's virtual time, in every mode), and ends at start + cost
 * (the executable's cost, below). Its outputs
 * become ready at its end. So virtual times follow data flow and device
 * order, not the wall-clock order in which the host happens to launch.
 * The host time is the simulation clock in MANUAL mode (the host acts
 * "now", at the time of the completion it reacts to); in INLINE and
 * THREADED mode the host is infinitely fast and its time moves only by
 * pw_sim_backend_run_until (INLINE), so wall-clock timing never enters.
 *
 * A collective (kinds `collective` and `all_reduce_sum`) is a gang
 * rendezvous over the launch's group (every launch with its gang_id): each
 * part arrives at its own start time, and all parts complete together at
 *   max(arrival over the group) + cost.
 *
 * DELIVERY MODES (pw_sim_mode_t) decide when and on which thread the done
 * callbacks run; they never change the virtual times above (except through
 * the host time).
 *   INLINE    done runs inside launch, on the launching thread, before
 *             launch returns; a collective's parts all complete inside the
 *             launch of its last part. The cheapest path: what dispatch
 *             benchmarks use.
 *   THREADED  completions go to an event queue ordered by virtual time; a
 *             simulator thread delivers them in that order as soon as they
 *             are queued.
 *   MANUAL    completions wait in the event queue until the host steps the
 *             simulation (pw_sim_backend_run_until, _run_all, _step), which
 *             delivers them on the calling thread in virtual-time order.
 *             Launches made by done callbacks during a step join the queue
 *             at the current time. With one host thread this makes every
 *             run bit-for-bit repeatable. Under a runtime, step the
 *             simulation to the end (run_all) before destroying clients:
 *             the runtime waits for work in flight.
 * Events with the same virtual time are ordered by (gang id, device), so
 * the order does not depend on launch timing.
 *
 * STREAMS (ordered devices: queue_depth > 0 or blocking_collectives)
 * ------------------------------------------------------------------
 * queue_depth D > 0: queue_info reports PW_BACKEND_QUEUE_ORDERED with
 * depth D. Each device keeps its accepted launches in queue order and
 * decides them one after another: a launch starts at max(the device's
 * previous op's end, its inputs' ready times, launch time + dispatch
 * latency); a collective's parts meet at the rendezvous max(arrival).
 * A launch that would make more than D outstanding (accepted, done not
 * yet called) is refused RESOURCE_EXHAUSTED naming the device and depth;
 * a v2 launch whose queue_seq (non-zero) is not above the device's last
 * is INVALID_ARGUMENT (gaps are fine: refused launches). done (or
 * done_timed) runs for a device's launches in queue order. While a
 * collective waits for its gang, the device goes on with later launches
 * that do not read its outputs, and holds the first one that does.
 * blocking_collectives: a device that reaches a collective waits inside
 * it (in virtual time, and holds every later launch) until every part of
 * the gang has arrived, as NCCL's do. Gangs reaching devices in opposite
 * orders then deadlock; the sim sees it (a cycle of gangs, each waiting
 * for a device blocked in the next) as soon as it forms and fails every
 * part of those gangs, arrived or later, with ABORTED "sim collective
 * deadlock: gang A waits for device 1, which is blocked in gang B; ...".
 * Without either option the launch path is today's (one launch at a
 * time expected; collectives never block a chip).
 *
 * UTILISATION
 * -----------
 * Each delivered op adds its device time [begin, end) to its device:
 * begin is the start (a collective: the rendezvous, so waiting for the
 * gang is not busy), end the completion. pw_sim_device_state_t v2 gives
 * busy_ns, first_start and last_end per device; pw_sim_stats_t v2 their
 * sum and the span [min first_start, max last_end]. Utilisation =
 * busy_ns / (devices x span). A launch whose struct_size covers
 * done_timed (launch v2) gets [begin, end] through done_timed in every
 * mode (failed ops too, up to the failure; cancelled ones get NULL).
 *
 * DETERMINISM AND THE TRACE HASH
 * ------------------------------
 * Every completion is an event (virtual time, device, gang id, kind). Each
 * device folds its events, in the order they complete on it, into a 64-bit
 * chain; the trace hash combines the chains of all devices in ordinal order.
 * Virtual times depend only on the workload, the options, the seed and the
 * host time, and each device's order is the gang order the runtime
 * guarantees, so a workload submitted from one thread yields the same trace
 * hash run after run in a given mode (INLINE and MANUAL agree when the
 * host time plays no part, e.g. everything submitted at time 0 and the ops
 * of a gang equally long on all its devices). Since each record carries its
 * virtual time, the hash pins down the global order too (sorted by time,
 * then gang id, then device — the MANUAL mode delivery order). Wall-clock
 * interleaving between devices does not enter it. The exact function:
 *   round(acc, x) = rotl64(acc + x * P2, 31) * P1   (XXH64's round;
 *                   P1 = 0x9E3779B185EBCA87, P2 = 0xC2B2AE3D27D4EB4F)
 *   per device, from chain = 0, per event:
 *     chain = round(round(round(chain, time), device << 8 | kind), gang)
 *   hash = 0x27D4EB2F165667C5; for each device d with n > 0 events:
 *     hash = round(round(round(hash, d), n), chain_d)
 *   then XXH64's avalanche: h ^= h >> 33; h *= P2; h ^= h >> 29;
 *   h *= 0x165667B19E3779F9; h ^= h >> 32.
 *
 * FAILURES
 * --------
 * A chip (or every chip of a slice) fails at a virtual time F, scheduled in
 * the options, drawn from the seed (random_chip_failures and
 * random_slice_failures, uniform over devices/slices and over
 * [0, failure_window_ns)), or injected later with pw_sim_backend_fail.
 * An op on a failed chip fails if F <= its start or F < its end; it then
 * completes (through done, never as a launch error) with UNAVAILABLE naming
 * the device, its slice and chip, and F, at virtual time max(start, F).
 * A collective fails on every part if any member's chip fails before the
 * group would complete. health() reports FAILED once the simulation clock
 * has reached F. pw_sim_backend_repair makes a chip healthy again.
 *
 * PROGRAM TEXT (the |program| bytes given to compile)
 * ---------------------------------------------------
 * ASCII text, one directive per line, tokens separated by spaces or tabs;
 * blank lines and lines starting with '#' are ignored; "\r\n" is accepted.
 * The first directive must be `op`; the others may follow in any order,
 * each at most once except input/output (their order gives the indices).
 *
 *   op NAME                 names the executable (signature name, messages)
 *   kind KIND               compute (default) | copy | collective |
 *                           all_reduce_sum
 *   time DURATION           fixed cost per launch
 *   flops NUMBER            floating-point work per device per launch
 *   bytes NUMBER            memory traffic per device per launch
 *   collective_bytes NUMBER payload per device of a collective (default:
 *                           input 0's shard size, or 0 without inputs)
 *   input  DTYPE[DIMS] SHARDING     a parameter, in the global view
 *   output DTYPE[DIMS] SHARDING     a result, likewise
 *
 *   NAME      [A-Za-z_][A-Za-z0-9_.-]*, at most 63 bytes
 *   DURATION  a NUMBER with an optional unit ns (default), us, ms or s:
 *             250us, 1.5ms, 2s, 100
 *   NUMBER    a non-negative decimal: 12, 0.5, 2.5e12 (at most 1e30; a
 *             DURATION at most 1e18 ns, rounded up to whole ns)
 *   DTYPE     a dtype's short or numpy name (pathways/types.h): f32,
 *             bf16, i8, u64, bool, f8e4m3fn, c64, float32, ...
 *   DIMS      comma-separated dimensions >= 1: f32[64,16]; f32[] a scalar
 *   SHARDING  replicated | split(T,M) with M a mesh axis or `all`
 *
 * KIND      data effect (HOST memory only)            parameters
 * compute   none                                       any
 * copy      output 0 = input 0 on each device          1 in, 1 out, same
 *                                                      dtype and shard size
 * collective  none; a gang rendezvous                  any
 * all_reduce_sum  output 0 on every device = element-wise sum of input 0
 *           over the group in mesh order (deterministic); a rendezvous;
 *           1 in, 1 out, same dtype and shard size: f32, f64, f16 and
 *           bf16 (summed in f32, rounded once) or an integer dtype
 *           (wrapping); bool, f8 and c64 are INVALID_ARGUMENT
 * Data effects happen when the op's timing is decided (at launch, or at
 * the last arrival of a collective), before done runs.
 *
 * COST of one launch, in ns, rounded up:
 *   time + max(flops / chip_flops_per_s, bytes / chip_bytes_per_s) * 1e9
 *   + launch_overhead_ns
 *   + for collectives over n > 1 devices on one slice:
 *       ring(n, collective_bytes, ICI)
 *   + for collectives whose gang spans s > 1 slices, m = the most of its
 *     devices on one slice (a two-level all-reduce: a ring within each
 *     slice, then a ring across slices over each chip's 1/m shard):
 *       ring(m, collective_bytes, ICI) + ring(s, collective_bytes / m, DCN)
 *   ring(k, B, L) = 0 if k <= 1, else
 *       L.latency_ns + 2 (k - 1) / k * B / L.bytes_per_s * 1e9
 * A rate of 0 makes its term free. The one-slice cost is fixed when the
 * executable is loaded (from the loading backend's rates, not compile);
 * a gang over several slices is priced from its devices at launch. E.g.
 * a 4 MiB all-reduce over 8 chips with the default rates: 75401 ns on
 * 1 slice, 116858 ns on 2 x 4, 303602 ns on 8 x 1.
 *
 * Example:
 *   op layer0
 *   time 20us
 *   flops 4.2e12
 *   bytes 1.6e9
 *   input f32[1024,512] split(0,all)
 *   output f32[1024,512] split(0,all)
 *
 * Errors are INVALID_ARGUMENT naming the line and token ("sim program line
 * 3: unknown kind 'reduce'"). Compile options must be NULL or "".
 * Executable bytes start with the magic "PWSIMEXE" and carry a checksum:
 * corrupt bytes are DATA_LOSS, foreign ones INVALID_ARGUMENT.
 *
 * MEMORY
 * ------
 * HOST memory (default): allocations are host memory from the allocator;
 * host_pointer returns them; data effects apply. VIRTUAL memory: only the
 * size is accounted against the device capacity; copies to the device
 * discard the bytes, copies to the host write zeros, host_pointer is NULL
 * and data effects are skipped — for fleets whose shards would not fit in
 * host memory. Either way each allocation remembers the virtual time its
 * contents became ready (see VIRTUAL TIME). Capacity overruns are
 * RESOURCE_EXHAUSTED naming the device; bad ranges OUT_OF_RANGE.
 *
 * LAUNCH validates synchronously (executable, device, mesh position and
 * group, memory handles of this device and large enough, no output that
 * is also an input or another output); errors are INVALID_ARGUMENT (or
 * RESOURCE_EXHAUSTED) and done is not called. A part of a collective
 * whose group can no longer complete (another part was rejected) completes
 * with ABORTED instead of waiting forever.
 *
 * THREADING: every function here is thread-safe unless noted. Done
 * callbacks may launch again (also inline).
 */
#ifndef PATHWAYS_BACKENDS_SIM_H_
#define PATHWAYS_BACKENDS_SIM_H_

#include "pathways/allocator.h"
#include "pathways/api.h"
#include "pathways/backend.h"
#include "pathways/log.h"
#include "pathways/status.h"

PW_EXTERN_C_BEGIN

/* Name and version the backend reports in its vtable (cache-key parts). */
#define PW_SIM_BACKEND_NAME "sim"
#define PW_SIM_BACKEND_VERSION 1u

/* Most devices one instance models (slice_count * devices_per_slice). */
#define PW_SIM_MAX_DEVICES (1u << 20)

/* Virtual nanoseconds since the simulation started. */
typedef uint64_t pw_sim_time_t;

/* "Never" (no failure scheduled), and "now" for pw_sim_backend_fail. */
#define PW_SIM_TIME_NEVER UINT64_MAX
#define PW_SIM_TIME_NOW (UINT64_MAX - 1)

typedef enum pw_sim_mode_e {
  PW_SIM_MODE_INLINE = 0,
  PW_SIM_MODE_THREADED = 1,
  PW_SIM_MODE_MANUAL = 2,
} pw_sim_mode_t;

typedef enum pw_sim_memory_e {
  PW_SIM_MEMORY_HOST = 0,
  PW_SIM_MEMORY_VIRTUAL = 1,
} pw_sim_memory_t;

typedef enum pw_sim_failure_kind_e {
  PW_SIM_FAIL_CHIP = 0,   /* |index| is a device ordinal */
  PW_SIM_FAIL_SLICE = 1,  /* |index| is a slice: every chip of it fails */
} pw_sim_failure_kind_t;

/* One scheduled failure. */
typedef struct pw_sim_failure_t {
  pw_sim_failure_kind_t kind;
  uint32_t index;
  pw_sim_time_t at;
} pw_sim_failure_t;

/* Kinds of trace events. Values are part of the trace hash. */
typedef enum pw_sim_event_kind_e {
  PW_SIM_EVENT_DONE = 0,      /* a launch completed OK */
  PW_SIM_EVENT_FAILED = 1,    /* a launch completed with an error */
  PW_SIM_EVENT_TRANSFER = 2,  /* a transfer into the device completed */
  PW_SIM_EVENT_CANCELLED = 3, /* a launch cancelled by destroy */
} pw_sim_event_kind_t;

/* One event, as given to the trace callback. */
typedef struct pw_sim_event_t {
  pw_sim_time_t time;        /* completion time */
  pw_sim_time_t start;       /* when the op (or transfer) started */
  uint32_t device;
  pw_sim_event_kind_t kind;
  uint64_t gang_id;          /* the launch's gang id (transfers: 0) */
  const char* op;            /* executable name ("transfer"); valid during the call */
} pw_sim_event_t;

/* Called for every event before its done callback runs (or, for a
 * transfer, inside pw_sim_backend_record_transfer), on the delivering
 * thread, possibly concurrently from several threads. Must not call back
 * into the backend. */
typedef void (*pw_sim_trace_fn_t)(void* user, const pw_sim_event_t* event);

typedef struct pw_sim_backend_options_t {
  size_t struct_size;            /* sizeof(pw_sim_backend_options_t) */
  pw_allocator_t allocator;      /* zero: the system allocator */
  pw_logger_t logger;            /* zero: pw_logger_default() */
  uint32_t slice_count;          /* 0: 1 */
  uint32_t devices_per_slice;    /* 0: 8 */
  pw_sim_mode_t mode;            /* default INLINE */
  pw_sim_memory_t memory;        /* default HOST */
  uint64_t device_memory_bytes;  /* capacity per chip; 0: 16 GiB */
  /* Cost model (see COST above). A rate of 0 makes its term free. */
  double chip_flops_per_s;       /* default 1e14 */
  double chip_bytes_per_s;       /* default 1e12 */
  double ici_bytes_per_s;        /* within a slice; default 1e11 */
  pw_sim_time_t ici_latency_ns;  /* per collective / in-slice transfer; default 2000 */
  double dcn_bytes_per_s;        /* across slices; default 2.5e10 */
  pw_sim_time_t dcn_latency_ns;  /* per cross-slice transfer; default 10000 */
  pw_sim_time_t launch_overhead_ns; /* added to every launch; default 0 */
  /* Failure injection. */
  uint64_t seed;                 /* draws the random failures */
  uint32_t random_chip_failures;
  uint32_t random_slice_failures;
  pw_sim_time_t failure_window_ns; /* random times in [0, window); 0: 1 s */
  const pw_sim_failure_t* failures; /* explicit schedule (copied); may be NULL */
  uint32_t failure_count;
  /* Optional trace callback and its user pointer. */
  pw_sim_trace_fn_t trace;
  void* trace_user;
  /* -- v2 fields start here (see STREAMS above) -- */
  /* Launches each device accepts ahead of their completion; > 0 makes
   * queue_info report PW_BACKEND_QUEUE_ORDERED with this depth. 0 (the
   * default): one launch at a time, as before. At most
   * PW_BACKEND_MAX_QUEUE_DEPTH. */
  uint32_t queue_depth;
  /* A device that reaches a collective waits inside it until its gang
   * meets; a broken gang order then deadlocks (detected: ABORTED). */
  bool blocking_collectives;
  /* The host/controller's dispatch latency: no launch starts before its
   * launch time + this, in virtual ns. Default 0. */
  pw_sim_time_t dispatch_latency_ns;
  /* -- v3 fields start here (see HOSTS above) -- */
  /* Chips per host: host h is the devices_per_host consecutive ordinals
   * from h * devices_per_host. Must divide devices_per_slice (hosts never
   * straddle slices); 0 (the default): devices_per_slice, one host per
   * slice. */
  uint32_t devices_per_host;
} pw_sim_backend_options_t;

#define PW_SIM_BACKEND_OPTIONS_SIZE_V1 PW_STRUCT_SIZE(pw_sim_backend_options_t, trace_user)
#define PW_SIM_BACKEND_OPTIONS_SIZE_V2 \
  PW_STRUCT_SIZE(pw_sim_backend_options_t, dispatch_latency_ns)
#define PW_SIM_BACKEND_OPTIONS_SIZE_V3 PW_STRUCT_SIZE(pw_sim_backend_options_t, devices_per_host)

/* Fills |out_options| with the defaults and the current struct_size. */
PW_API void pw_sim_backend_options_init(pw_sim_backend_options_t* out_options);

/* Creates a sim backend. |options| may be NULL (defaults); it is copied
 * (the failure schedule included), and its struct_size must be >=
 * PW_SIM_BACKEND_OPTIONS_SIZE_V1. Everything, HOST device memory included,
 * comes from the allocator, whose |self| must outlive the backend.
 * INVALID_ARGUMENT for bad options (naming the field: a fleet larger than
 * PW_SIM_MAX_DEVICES, a failure naming a device or slice that does not
 * exist, a negative or NaN rate...), RESOURCE_EXHAUSTED when allocation
 * fails; then |*out_backend| is zeroed and nothing leaks. On success the
 * owner (the runtime, once handed to it) frees it with
 * vtable->destroy(self), when nothing is in flight and not from a done
 * callback of a THREADED backend; undelivered MANUAL events are delivered
 * CANCELLED by destroy. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_sim_backend_create(
    const pw_sim_backend_options_t* options, pw_backend_t* out_backend);

/* True if |backend| was made by pw_sim_backend_create. */
PW_API bool pw_sim_backend_is_sim(pw_backend_t backend);

/*---------------------------------------------------------------------------
 * Stepping (MANUAL mode)
 *
 * These deliver queued completions on the calling thread, in virtual-time
 * order, running their done callbacks (which may launch more work). They
 * must not be called from a done callback (FAILED_PRECONDITION), and calls
 * from several threads are serialized. In INLINE mode nothing is ever
 * queued: run_until only advances the host time; in THREADED mode they are
 * FAILED_PRECONDITION (the simulator thread delivers). INVALID_ARGUMENT for
 * a backend that is not a sim.
 *-------------------------------------------------------------------------*/

/* Delivers every queued completion with time <= |time|, then sets the
 * clock to |time| (if later). |*out_delivered| (may be NULL) gets the
 * number delivered. |time| must be a virtual time (below
 * PW_SIM_TIME_NOW; INVALID_ARGUMENT otherwise): use run_all to drain. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_sim_backend_run_until(
    pw_backend_t backend, pw_sim_time_t time, uint64_t* out_delivered);

/* Delivers completions until the queue is empty (including those queued
 * meanwhile by done callbacks). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_sim_backend_run_all(
    pw_backend_t backend, uint64_t* out_delivered);

/* Delivers the one earliest completion; |*out_delivered| is 0 when none
 * was queued. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_sim_backend_step(pw_backend_t backend,
                                                          uint64_t* out_delivered);

/* THREADED: waits until no completion is queued or being delivered, or
 * until |timeout_ns| (wall clock) passes; true when idle. INLINE and MANUAL
 * return at once (MANUAL: true when nothing is queued). */
PW_API bool pw_sim_backend_wait_idle(pw_backend_t backend, uint64_t timeout_ns);

/*---------------------------------------------------------------------------
 * Queries
 *-------------------------------------------------------------------------*/

/* The caller sets struct_size; only the fields it covers are written. */
typedef struct pw_sim_stats_t {
  size_t struct_size;      /* set by the caller: sizeof(pw_sim_stats_t) */
  pw_sim_time_t clock;     /* max(host time, latest completion delivered) */
  uint64_t trace_hash;     /* see DETERMINISM above */
  uint64_t events;         /* events folded into the hash */
  uint64_t failed;         /* of which launches that completed with an error */
  uint64_t transfers;      /* of which transfers */
  uint64_t queued;         /* completions waiting (MANUAL/THREADED) */
  /* -- v2 fields start here -- */
  /* Device time (UTILISATION above), over every device. */
  pw_sim_time_t busy_ns;    /* sum of the devices' busy_ns */
  pw_sim_time_t span_start; /* earliest start of a delivered op (0 if none) */
  pw_sim_time_t span_end;   /* latest end of a delivered op (0 if none) */
  /* -- v3 fields start here -- */
  uint64_t host_launches;   /* launch_host calls accepted (HOSTS above) */
} pw_sim_stats_t;

#define PW_SIM_STATS_SIZE_V1 PW_STRUCT_SIZE(pw_sim_stats_t, queued)
#define PW_SIM_STATS_SIZE_V2 PW_STRUCT_SIZE(pw_sim_stats_t, span_end)
#define PW_SIM_STATS_SIZE_V3 PW_STRUCT_SIZE(pw_sim_stats_t, host_launches)

/* Snapshot of the counters, in O(devices). Consistent when nothing is in
 * flight. INVALID_ARGUMENT for a backend that is not a sim. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_sim_backend_stats(pw_backend_t backend,
                                                           pw_sim_stats_t* out_stats);

/* Shorthands: the trace hash and the clock (0 for a non-sim backend). */
PW_API uint64_t pw_sim_backend_trace_hash(pw_backend_t backend);
PW_API pw_sim_time_t pw_sim_backend_clock(pw_backend_t backend);

/* The caller sets struct_size; only the fields it covers are written. */
typedef struct pw_sim_device_state_t {
  size_t struct_size;        /* set by the caller: sizeof(pw_sim_device_state_t) */
  uint32_t slice;
  uint32_t chip;
  pw_sim_time_t busy_until;  /* end of the last op launched on it */
  pw_sim_time_t fail_at;     /* PW_SIM_TIME_NEVER if no failure scheduled */
  uint64_t events;
  pw_device_health_t health;
  /* -- v2 fields start here -- */
  pw_sim_time_t busy_ns;     /* virtual ns it ran delivered ops (UTILISATION) */
  pw_sim_time_t first_start; /* start of its first delivered op (0 if none) */
  pw_sim_time_t last_end;    /* end of its last delivered op (0 if none) */
  uint32_t outstanding;      /* launches accepted, done not yet called (STREAMS) */
  uint64_t waiting_gang;     /* gang of the collective it is blocked in, or 0 */
} pw_sim_device_state_t;

#define PW_SIM_DEVICE_STATE_SIZE_V1 PW_STRUCT_SIZE(pw_sim_device_state_t, health)
#define PW_SIM_DEVICE_STATE_SIZE_V2 PW_STRUCT_SIZE(pw_sim_device_state_t, waiting_gang)

/* One device's timeline and failure state. INVALID_ARGUMENT for a bad
 * device or a non-sim backend. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_sim_backend_device_state(
    pw_backend_t backend, uint32_t device, pw_sim_device_state_t* out_state);

/*---------------------------------------------------------------------------
 * Failure injection
 *-------------------------------------------------------------------------*/

/* Schedules the failure of chip/slice |index| at virtual time |at|
 * (PW_SIM_TIME_NOW: at once — every op on it not yet completed, and every
 * later one, fails). An earlier failure already scheduled wins. Pending
 * collective parts whose group contains a chip failed NOW complete with
 * UNAVAILABLE (INLINE: on this thread, before this returns; otherwise
 * through the queue). INVALID_ARGUMENT for a bad index or kind. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_sim_backend_fail(pw_backend_t backend,
                                                          pw_sim_failure_kind_t kind,
                                                          uint32_t index,
                                                          pw_sim_time_t at);

/* Cancels any failure of chip/slice |index|: it is HEALTHY again and later
 * ops run normally. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_sim_backend_repair(pw_backend_t backend,
                                                            pw_sim_failure_kind_t kind,
                                                            uint32_t index);

/*---------------------------------------------------------------------------
 * Transfers (used by transports; see pathways/transports/inproc.h)
 *-------------------------------------------------------------------------*/

/* The virtual cost of moving |bytes| from |src_device| to |dst_device|: 0
 * on one device; ici_latency_ns + bytes / ici_bytes_per_s within a slice;
 * dcn_latency_ns + bytes / dcn_bytes_per_s across slices. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_sim_backend_transfer_cost(
    pw_backend_t backend, uint32_t src_device, uint32_t dst_device, uint64_t bytes,
    pw_sim_time_t* out_cost);

/* Accounts a transfer of |bytes| that a transport made from |src_memory|
 * (on |src_device|) into |dst_memory| (on |dst_device|), both of this
 * backend: it starts when the source is ready (and not before the host
 * time), ends after the transfer cost, and the destination becomes ready
 * then; a TRANSFER event at the end is traced on |dst_device|. UNAVAILABLE
 * naming the device if either chip has failed by the end (nothing is
 * accounted); INVALID_ARGUMENT for handles of other devices. |out_end|
 * (may be NULL) gets the end time. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_sim_backend_record_transfer(
    pw_backend_t backend, uint32_t src_device, pw_backend_memory_t src_memory,
    uint32_t dst_device, pw_backend_memory_t dst_memory, uint64_t bytes,
    pw_sim_time_t* out_end);

PW_EXTERN_C_END

#endif /* PATHWAYS_BACKENDS_SIM_H_ */
