/* libpathways: the bundled CPU backend.
 *
 * Real execution on a fixed pool of host threads (pool mode), or on one
 * FIFO thread per device (streams mode, below). Each backend instance
 * simulates |device_count| devices whose memory is host memory; a kernel is
 * a C function registered by name with its signature. Launches are queued to
 * the pool and complete through launch->done on a pool thread. In-slice
 * collectives (all_reduce_sum/mean, all_gather) are asynchronous
 * rendezvous: a device that arrives deposits its shard and frees its pool
 * thread; the last one computes for everyone. So 8 devices run on a pool of
 * one thread without deadlock.
 *
 * The backend is written as a host application would write its own: it uses
 * only the public headers.
 *
 * PROGRAM TEXT (the |program| bytes given to compile)
 * ----------------------------------------------------
 * UTF-8/ASCII text, one directive per line, tokens separated by spaces or
 * tabs. Blank lines and lines whose first non-blank character is '#' are
 * ignored; "\r\n" line ends are accepted. The first directive must be
 * `kernel`; the others may follow in any order, and the order of the
 * `input` (resp. `output`) lines gives the parameter indices.
 *
 *   kernel NAME                    NAME of a registered kernel
 *   input  DTYPE[DIMS] SHARDING    one input, in the global (logical) view
 *   output DTYPE[DIMS] SHARDING    one output, likewise
 *   attr   NAME VALUE              one attribute (each NAME at most once)
 *   over   AXIS[, AXIS...]         collectives: the mesh axes they run over
 *                                  (at most once; names or indices)
 *
 *   DTYPE     a dtype's short or numpy name (pathways/types.h): f32,
 *             f64, bf16, f16, i8 .. i64, u8 .. u64, bool, f8e4m3fn,
 *             f8e5m2, c64 (or float32, bfloat16, ...)
 *   DIMS      comma-separated dimensions >= 1, no spaces: f32[64,16];
 *             f32[] is a scalar. At most PW_MAX_RANK dimensions.
 *   SHARDING  replicated
 *             split(T,M)   tensor axis T split in equal blocks over mesh
 *                          axis M; M is a number or `all` (every device of
 *                          the mesh, row-major: PW_MESH_AXIS_ALL). No spaces.
 *             P(E0, E1, ...) [unreduced(AXES)]   a PartitionSpec (the rest of
 *                          the line; spaces allowed): entry k is None, a mesh
 *                          axis or (A, B) (axes splitting dimension k, major
 *                          first); missing entries are None; unreduced lists
 *                          the mesh axes holding partial sums
 *                          (pw_sharding_parse). Axes are the compile mesh's
 *                          names ("P(data, None)") or indices ("P(0, None)");
 *                          pw_cpu_program_parse, without a mesh, takes
 *                          indices only.
 *   NAME      [A-Za-z_][A-Za-z0-9_.]*, kernel names below PW_CPU_NAME_MAX
 *             bytes, attribute names below PW_CPU_ATTR_NAME_MAX.
 *   VALUE     a number: decimal (1, -0.5, 1e-3, .25), C99 hex float
 *             (0x1.8p-3: exact; at most 53 significant bits), inf, -inf,
 *             nan; or a word ([A-Za-z_][A-Za-z0-9_.-]*, below
 *             PW_CPU_ATTR_TEXT_MAX bytes, not inf/nan), a string value.
 *             Decimals whose significand fits 2^53 with an exponent
 *             within +-22 are correctly rounded; others round to within
 *             one ulp. Parsing never depends on the locale. Integer
 *             attributes (axis, transpose_a) are numbers with no fraction.
 *
 * Example:
 *   kernel matmul
 *   input f32[64,16] split(0,all)
 *   input f32[16,4] replicated
 *   output f32[64,4] split(0,all)
 *   attr transpose_b 0
 *
 * Errors are INVALID_ARGUMENT and name the line and token
 * ("line 3: unknown dtype 'f128'"); an unregistered kernel is NOT_FOUND.
 * Hosts and bindings need not write the text by hand: fill a
 * pw_cpu_program_t and call pw_cpu_program_format (below).
 *
 * Compile validates the program against the kernel's registered signature
 * (counts, dtypes, ranks, attributes, the kernel's check hook) and every
 * sharding against the mesh (pw_sharding_check), then emits deterministic,
 * versioned executable bytes (magic "PWCPUEXE"). Compile |options| must be
 * NULL or "". Load re-validates the bytes (checksum, bounds, then the same
 * checks against this backend's registry): corrupt or truncated bytes are
 * DATA_LOSS, foreign ones INVALID_ARGUMENT, a kernel not registered in this
 * backend NOT_FOUND; never a crash.
 *
 * BUILT-IN KERNELS (float = f32 or f64; half = f16 or bf16, computed in
 * f32 and rounded to nearest even once per result; integer = i8 .. i64 and
 * u8 .. u64, wrapping modulo 2^bits; every parameter of a kernel has the
 * same dtype; "aligned" = same global shape and same sharding). Kernels
 * take float and half unless said otherwise; bool and the f8 types have
 * no arithmetic (copy, fill, all_gather only): another dtype is
 * INVALID_ARGUMENT at compile naming the kernel, the dtype and the ones it
 * takes.
 *   copy(x) -> y                 any dtype, y aligned with x
 *   spin(x) -> y                 y = x after a busy-wait of attr ns
 *                                (required, whole, 0 .. 10e9) wall-clock
 *                                nanoseconds (pw_clock_now): a body of
 *                                fixed length for benchmarks; any dtype
 *   fill() -> y                  attr value (required); any dtype (integer
 *                                dtypes need an integral value in range,
 *                                bool 0 or 1; floats round the value to f32,
 *                                then to the dtype; c64 gets value + 0i)
 *   add(a, b) -> c, sub, mul     float, half, integer, c64; all aligned
 *   scale(x) -> y                y = alpha * x; attr alpha; float, aligned
 *   axpy(x, y) -> z              z = alpha * x + y; attr alpha; aligned
 *   sgd_update(w, g) -> w2       w2 = w - lr * g; attr lr; aligned
 *                                (alpha and lr are required)
 *   relu(x) -> y, sigmoid(x) -> y          aligned
 *   relu_grad(x, dy) -> dx       dx = x > 0 ? dy : 0; aligned
 *   logistic_loss(z, y) -> l     l = max(z,0) - z*y + log1p(exp(-|z|))
 *   logistic_loss_grad(z, y) -> dz         dz = (sigmoid(z) - y) * scale;
 *                                attr scale (optional, default 1); aligned
 *   bias_add(x[...,N], b[N]) -> y          b replicated; x's last axis not
 *                                split; y aligned with x
 *   (PartitionSpec parameters: matmul and reduce_sum follow the general
 *   rule of docs/backends.md: kept dimensions keep their mesh axes, a
 *   contracted dimension split over A makes the result unreduced over A;
 *   the aligned kernels take any equivalent layouts, partial sums only in
 *   copy, spin, add, sub, scale, axpy and sgd_update.)
 *   matmul(a[2-D], b[2-D]) -> c  float only; attrs transpose_a, transpose_b (0/1,
 *                                default 0). op(a)[M,K] x op(b)[K,N]:
 *                                c[M,N]: K not split; c split(0,X) iff op(a)
 *                                rows split over X, c split(1,Y) iff op(b)
 *                                columns split over Y (not both).
 *                                c[G,M,N] split(0,X) (partial products):
 *                                K split over mesh axis X in both a and b,
 *                                G = size of X; follow with all_reduce_sum.
 *   reduce_sum(x) -> y, reduce_mean       attr axis (required); reduce_sum
 *                                also takes integer. y has x's
 *                                shape without |axis|. If |axis| is not
 *                                split, other splits carry over. If it is
 *                                split over X: y is [G, rest...] split(0,X)
 *                                holding partial results (a mean's partials
 *                                are divided by the global count, so their
 *                                all_reduce_sum is the mean).
 *   all_reduce_sum(x[G,...]) -> y[...]    x split(0,M) with G the size of
 *                                mesh axis M (or all devices); y replicated:
 *                                every device gets the sum of the G blocks,
 *                                added in mesh order (deterministic).
 *                                float, half (summed in f32, rounded
 *                                once), integer (wrapping).
 *   all_reduce_mean(x[G,...]) -> y[...]   float, half; the sum divided by G
 *   all_gather(x) -> y           x split(T,M), y the same global shape
 *                                replicated; any dtype
 *   With an `over A` line (A: mesh axes), the collectives keep the global
 *   shape and change the layout over A only (docs/backends.md, "Over named
 *   axes"): all_reduce_sum/_mean take x unreduced over A to y reduced over
 *   A; all_gather takes x split over A to y not split over A;
 *   reduce_scatter(x) -> y (float, half, integer) takes x unreduced over A
 *   to y reduced and split over A; all_to_all(x) -> y (any dtype) moves
 *   the axes of A to other dimensions. reduce_scatter and all_to_all need
 *   `over`. A device meets only the devices that differ from it along A.
 *   add_scalar(x_1..x_n) -> y_1..y_n       y_i = x_i + value (attr,
 *                                required); variadic: n inputs, n outputs
 *                                (n <= PW_CPU_MAX_PARAMS), all aligned;
 *                                float, half
 *
 * A collective is keyed by launch->gang_id and, when it reduces over one
 * axis of a multi-axis mesh, by the device's coordinates on the other axes;
 * gang ids must be unique among the collectives in flight. A position that
 * arrives twice, or another kernel under the same key, fails the group
 * (INVALID_ARGUMENT through done).
 *
 * Other behaviour the runtime and the conformance suite rely on:
 * - launch validates synchronously (executable, device, mesh position,
 *   memory handles of this device and large enough, no output aliasing an
 *   input or another output); errors are INVALID_ARGUMENT (or
 *   RESOURCE_EXHAUSTED when the allocator fails) and |done| is not called.
 *   Otherwise |done| runs exactly once on a pool thread (or, for a group
 *   failed by pw_cpu_backend_set_health, on that caller's thread; streams
 *   mode: always on the device's stream thread).
 * - A launch on a device that is FAILED when its turn comes completes with
 *   UNAVAILABLE naming the device; so does every participant of a collective
 *   whose group contains a failed device (pending ones as soon as the device
 *   is marked failed). In pool mode launches on the same device may run
 *   concurrently: the runtime orders dependent launches.
 * - A kernel error (its run function's status) is passed to |done| prefixed
 *   with the kernel name and device.
 * - Device memory beyond the per-device capacity is RESOURCE_EXHAUSTED
 *   naming the device, the request and the capacity; copies out of range
 *   are OUT_OF_RANGE; host_pointer returns the memory itself.
 * - queue_info (vtable v3) reports flags 0 and depth 0 in pool mode: the
 *   runtime hands one launch at a time per device, and done (never
 *   done_timed) completes it.
 *
 * STREAMS MODE (options.stream_depth > 0): a queue-ordered reference
 * backend (see "Queue-ordered launch" in pathways/backend.h).
 * - Each device has one stream: a worker thread running that device's
 *   accepted launches one after another, in the order launch accepted them
 *   (queue_seq order). queue_info reports PW_BACKEND_QUEUE_ORDERED and
 *   min(stream_depth, PW_BACKEND_MAX_QUEUE_DEPTH).
 * - launch validates and copies the request on the caller's thread as in
 *   pool mode and enqueues it without blocking. With stream_depth launches
 *   of the device outstanding (accepted, done not yet called) it refuses
 *   with RESOURCE_EXHAUSTED naming the device and the depth. A launch
 *   stops being outstanding just before its done is called, so a done
 *   callback may launch again.
 * - queue_seq (launch v2): 0 is not checked; otherwise each device's
 *   launches must number 1, 2, 3... (refused ones included, as the runtime
 *   counts them). A repeat or a step back is refused with INVALID_ARGUMENT;
 *   so is a gap, which also moves the expected number past it. Both are
 *   logged naming the device and the numbers.
 * - done_timed (launch v2, when non-NULL) completes each launch, else done,
 *   on the device's stream thread, in queue order, with start/end from
 *   pw_clock_now() taken when the stream starts and finishes the launch
 *   (a collective's interval includes waiting for its gang).
 * - A collective blocks its stream, as NCCL's do: the worker that reaches
 *   it waits until its group has met and the collective has run (or the
 *   group failed); later launches of that device wait behind it. Gangs
 *   launched in conflicting orders on two devices therefore deadlock, as
 *   they would on chips; destroy still returns (below).
 * - destroy runs what is queued; when every stream still running waits in
 *   a collective whose members can no longer come, those collectives
 *   complete with CANCELLED, and the streams drain on. It joins the
 *   streams and must not be called from a stream thread (a done callback).
 */
#ifndef PATHWAYS_BACKENDS_CPU_H_
#define PATHWAYS_BACKENDS_CPU_H_

#include "pathways/allocator.h"
#include "pathways/api.h"
#include "pathways/backend.h"
#include "pathways/log.h"
#include "pathways/status.h"
#include "pathways/types.h"

PW_EXTERN_C_BEGIN

/*---------------------------------------------------------------------------
 * Creation
 *-------------------------------------------------------------------------*/

/* Name and version the backend reports in its vtable (cache-key parts). */
#define PW_CPU_BACKEND_NAME "cpu"
#define PW_CPU_BACKEND_VERSION 1u

/* Limits on the options (larger values are INVALID_ARGUMENT; a larger
 * stream_depth is accepted and enforced, queue_info caps what it reports). */
#define PW_CPU_MAX_DEVICES 4096u
#define PW_CPU_MAX_WORKERS 256u

typedef struct pw_cpu_backend_options_t {
  size_t struct_size;          /* sizeof(pw_cpu_backend_options_t) */
  pw_allocator_t allocator;    /* zero: the system allocator */
  pw_logger_t logger;          /* zero: pw_logger_default() */
  uint32_t device_count;       /* 0: 8 */
  uint32_t worker_count;       /* host threads in the pool; 0: 2 */
  uint64_t device_memory_bytes; /* capacity of each device; 0: 1 GiB */
  uint32_t host;               /* reported in device_info; default 0 */
  /* -- v2 fields start here -- */
  /* 0: pool mode (above). > 0: streams mode (see STREAMS MODE below): each
   * device gets its own FIFO worker thread holding at most this many
   * accepted launches; worker_count is then unused. */
  uint32_t stream_depth;
  /* -- v3 fields start here (pool mode; streams mode ignores them) -- */
  /* Spin-then-park: the most microseconds an idle worker polls the queue
   * before it parks (see WORKER POOL below). 0 (and a v1 or v2 struct):
   * PW_CPU_DEFAULT_SPIN_US; PW_CPU_SPIN_OFF: park at once (the pool before
   * v3); otherwise 1 .. PW_CPU_MAX_SPIN_US. */
  uint32_t spin_us;
  /* PW_CPU_AFFINITY_NONE (0: the scheduler places workers),
   * PW_CPU_AFFINITY_ROUND_ROBIN or PW_CPU_AFFINITY_LIST (below). */
  uint32_t affinity;
  /* PW_CPU_AFFINITY_LIST: worker i is pinned to CPU
   * affinity_cpus[i % affinity_cpu_count]. 1 .. PW_CPU_MAX_WORKERS entries,
   * each a CPU this process may run on; copied at creation. Otherwise
   * ignored. */
  uint32_t affinity_cpu_count;
  const uint32_t* affinity_cpus;
  /* -- v4 fields start here -- */
  /* Bytes of freed device blocks the backend keeps for reuse (see BLOCK
   * CACHE below). 0 (and a v1-v3 struct): one device's memory
   * (device_memory_bytes), except in AddressSanitizer builds, where the
   * default is off so use-after-free stays visible; PW_CPU_BLOCK_CACHE_OFF:
   * every freed block goes back to the allocator. */
  uint64_t block_cache_bytes;
} pw_cpu_backend_options_t;

#define PW_CPU_BACKEND_OPTIONS_SIZE_V1 PW_STRUCT_SIZE(pw_cpu_backend_options_t, host)
#define PW_CPU_BACKEND_OPTIONS_SIZE_V2 PW_STRUCT_SIZE(pw_cpu_backend_options_t, stream_depth)
#define PW_CPU_BACKEND_OPTIONS_SIZE_V3 PW_STRUCT_SIZE(pw_cpu_backend_options_t, affinity_cpus)
#define PW_CPU_BACKEND_OPTIONS_SIZE_V4 PW_STRUCT_SIZE(pw_cpu_backend_options_t, block_cache_bytes)

#define PW_CPU_BLOCK_CACHE_OFF UINT64_MAX

/* BLOCK CACHE
 * -----------
 * Device memory is host memory from the allocator, and large blocks freed
 * to it go back to the kernel: every new one is first-touch memory, which
 * costs a page fault per page (more than copying the page on small VMs).
 * Freed blocks of 64 KiB and more are kept instead, up to
 * block_cache_bytes for the whole backend, and an allocation takes the
 * smallest kept block that fits with at most a quarter to spare; past the
 * budget the oldest block is freed. Kept blocks are not device memory in
 * use: they count toward no device's capacity. A restore after a lost
 * slice, or a training step's outputs, reuse the pages of what was freed. */
typedef struct pw_cpu_block_cache_stats_t {
  size_t struct_size;        /* set by the caller */
  uint64_t budget_bytes;     /* 0: the cache is off */
  uint64_t cached_bytes;
  uint32_t cached_blocks;
  uint64_t hits;             /* allocations served from the cache */
  uint64_t misses;           /* allocations of cacheable size that were not */
  uint64_t evictions;        /* kept blocks freed to make room */
} pw_cpu_block_cache_stats_t;

#define PW_CPU_BLOCK_CACHE_STATS_SIZE_V1 PW_STRUCT_SIZE(pw_cpu_block_cache_stats_t, evictions)

/* The block cache's counters. INVALID_ARGUMENT for a backend that is not a
 * CPU backend or a struct_size below V1. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_cpu_backend_block_cache_stats(
    pw_backend_t backend, pw_cpu_block_cache_stats_t* out_stats);

/* WORKER POOL (pool mode)
 * -----------------------
 * Workers drain one FIFO. A worker that finds it empty spins (a pause
 * instruction per poll, no lock, no system call) for up to its spin
 * budget, then parks on a condition variable; a push wakes a parked worker
 * only when no spinning worker is there to take the task. So a hand-off
 * between busy workers costs a cache-line transfer, not a futex wake-up
 * (30-65 us on small VMs; docs/performance.md).
 *
 * The budget is adaptive and per worker, between spin_us / 16 and spin_us:
 * it doubles when spinning found work or when a parked worker was woken
 * less than spin_us after it parked (spinning longer would have caught the
 * task), and halves after a longer park. At most max(1, CPUs / 2) workers
 * spin at once (CPUs: those the process may run on), so spinners never
 * take every CPU from the threads that produce their work. An idle pool
 * parks every worker after one budget and then uses no CPU at all.
 *
 * Continuations (a chain of launches each launched from the previous one's
 * done stays on its worker) work as before, spinning or not.
 *
 * Affinity. ROUND_ROBIN pins worker i to the (i mod n)-th of the n CPUs the
 * process may run on when the backend is created (sched_getaffinity);
 * LIST pins it to affinity_cpus[i % affinity_cpu_count]. A list entry that
 * is not such a CPU is INVALID_ARGUMENT at creation naming the entry. If
 * the kernel then refuses to pin a worker (the process's CPU set changed
 * in between), the worker runs unpinned and a warning naming the worker and
 * CPU is logged: pinning is a placement hint, never a reason to fail. */
/* About what a futex wake-up costs on the VMs this was measured on: spinning
 * as long as a park and wake would cost bounds the waste at 2x (competitive
 * spinning). */
#define PW_CPU_DEFAULT_SPIN_US 50u
#define PW_CPU_MAX_SPIN_US 100000u /* 100 ms */
#define PW_CPU_SPIN_OFF UINT32_MAX

#define PW_CPU_AFFINITY_NONE 0u
#define PW_CPU_AFFINITY_ROUND_ROBIN 1u
#define PW_CPU_AFFINITY_LIST 2u

/* Fills |out_options| with the defaults and the current struct_size. */
PW_API void pw_cpu_backend_options_init(pw_cpu_backend_options_t* out_options);

/* Creates a CPU backend: its devices, its worker pool (streams mode: one
 * stream thread per device), and the built-in kernels. |options| may be NULL (all defaults); it is copied, and its
 * struct_size must be >= PW_CPU_BACKEND_OPTIONS_SIZE_V1. A bad value is
 * INVALID_ARGUMENT naming the field (spin_us, affinity, affinity_cpus). All memory,
 * device memory included, comes from the allocator, whose |self| must
 * outlive the backend. On success |*out_backend| holds one backend that
 * the owner (the runtime, once handed to it) frees with
 * vtable->destroy(self): it runs what is queued, joins the pool (streams),
 * completes collectives still waiting for members with CANCELLED, and must
 * not be called from a pool or stream thread (a done callback) or while
 * launches are being made. Streams mode: a device count whose threads
 * cannot all start is RESOURCE_EXHAUSTED.
 * On error |*out_backend| is zeroed and nothing leaks. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_cpu_backend_create(
    const pw_cpu_backend_options_t* options, pw_backend_t* out_backend);

/* True if |backend| was made by pw_cpu_backend_create. */
PW_API bool pw_cpu_backend_is_cpu(pw_backend_t backend);

/* Test hook: sets the health of |device|. Marking a device FAILED fails
 * every pending collective whose group contains it (its arrived
 * participants complete with UNAVAILABLE); later launches on it complete
 * with UNAVAILABLE. HEALTHY brings it back. Thread-safe. INVALID_ARGUMENT
 * for a non-CPU backend, a bad device or a bad health value. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_cpu_backend_set_health(
    pw_backend_t backend, uint32_t device, pw_device_health_t health);

/*---------------------------------------------------------------------------
 * Programs: a value type and its text form
 *-------------------------------------------------------------------------*/

#define PW_CPU_NAME_MAX 64       /* kernel name, NUL included */
#define PW_CPU_ATTR_NAME_MAX 32  /* attribute name, NUL included */
#define PW_CPU_ATTR_TEXT_MAX 64  /* string attribute value, NUL included */
#define PW_CPU_MAX_ATTRS 16
/* Inputs, and separately outputs, a program holds (a kernel definition
 * lists at most PW_BACKEND_MAX_PARAMS of each; a variadic kernel repeats
 * them, see PW_CPU_KERNEL_VARIADIC). */
#define PW_CPU_MAX_PARAMS 512
/* A buffer this large always holds a formatted program. */
#define PW_CPU_PROGRAM_TEXT_MAX 262144

typedef enum pw_cpu_attr_kind_e {
  PW_CPU_ATTR_NUMBER = 1,
  PW_CPU_ATTR_STRING = 2,
} pw_cpu_attr_kind_t;

typedef struct pw_cpu_attr_t {
  char name[PW_CPU_ATTR_NAME_MAX];
  pw_cpu_attr_kind_t kind;
  double number;                      /* PW_CPU_ATTR_NUMBER */
  char text[PW_CPU_ATTR_TEXT_MAX];    /* PW_CPU_ATTR_STRING */
} pw_cpu_attr_t;

/* One program: a kernel, its parameters in the global view, attributes.
 * A plain value (no allocation, copy freely), like pw_shape_t; about
 * 100 KB (PW_CPU_MAX_PARAMS specs of each role), so hosts keep it off
 * small stacks. */
typedef struct pw_cpu_program_t {
  char kernel[PW_CPU_NAME_MAX];
  uint32_t input_count;
  uint32_t output_count;
  uint32_t attr_count;
  pw_backend_param_t inputs[PW_CPU_MAX_PARAMS];
  pw_backend_param_t outputs[PW_CPU_MAX_PARAMS];
  pw_cpu_attr_t attrs[PW_CPU_MAX_ATTRS];
  /* Collectives: the mesh axes the collective runs over (bit a for mesh
   * axis a; the `over` directive). 0: none given (the collectives' original
   * forms, whose group follows from input 0's split). */
  uint32_t over_axes;
} pw_cpu_program_t;

/* Zeroes |program| and sets its kernel name. INVALID_ARGUMENT if |kernel|
 * is not a valid NAME (the program is then left with no kernel). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_cpu_program_init(
    pw_cpu_program_t* program, const char* kernel);

/* Appends an input/output. INVALID_ARGUMENT for a bad dtype, shape or
 * sharding kind; RESOURCE_EXHAUSTED past PW_CPU_MAX_PARAMS. (Whether
 * the sharding fits a mesh is checked by compile.) */
PW_API PW_MUST_USE_RESULT pw_status_t pw_cpu_program_add_input(
    pw_cpu_program_t* program, pw_dtype_t dtype, const pw_shape_t* shape,
    pw_sharding_t sharding);
PW_API PW_MUST_USE_RESULT pw_status_t pw_cpu_program_add_output(
    pw_cpu_program_t* program, pw_dtype_t dtype, const pw_shape_t* shape,
    pw_sharding_t sharding);

/* Sets (adds or replaces) a number/string attribute. INVALID_ARGUMENT for a
 * bad name or text; RESOURCE_EXHAUSTED past PW_CPU_MAX_ATTRS. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_cpu_program_set_number(
    pw_cpu_program_t* program, const char* name, double value);
PW_API PW_MUST_USE_RESULT pw_status_t pw_cpu_program_set_string(
    pw_cpu_program_t* program, const char* name, const char* text);

/* Writes |program| as program text into |buffer| (NUL-terminated,
 * truncated if |capacity| is too small, like snprintf; |buffer| may be NULL
 * when |capacity| is 0) and sets |*out_length| to the full length, NUL
 * excluded. Numbers are written exactly (integers in decimal, others as hex
 * floats), so parse(format(p)) == p. INVALID_ARGUMENT (naming the field) if
 * |program| holds something the text cannot express. Thread-safe. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_cpu_program_format(
    const pw_cpu_program_t* program, char* buffer, size_t capacity,
    size_t* out_length);

/* Parses program text (|size| bytes, need not be NUL-terminated) into
 * |*out_program|. Syntax only: the kernel need not be registered and
 * shardings are not checked against a mesh. INVALID_ARGUMENT naming the
 * line and token. Thread-safe. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_cpu_program_parse(
    const char* text, size_t size, pw_cpu_program_t* out_program);

/* pw_cpu_program_format and pw_cpu_program_parse over |mesh| (NULL: as
 * the functions above): PartitionSpecs and `over` lines write and read
 * mesh axes by the names |mesh| gives them (indices on an unnamed mesh,
 * and indices are accepted on a named one too). Compile parses with its
 * mesh, so format_named(p, mesh) compiles on that mesh. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_cpu_program_format_named(
    const pw_cpu_program_t* program, const pw_mesh_shape_t* mesh, char* buffer,
    size_t capacity, size_t* out_length);
PW_API PW_MUST_USE_RESULT pw_status_t pw_cpu_program_parse_named(
    const char* text, size_t size, const pw_mesh_shape_t* mesh,
    pw_cpu_program_t* out_program);

/* The attribute |name| of |program|, or NULL. Valid while |program| is. */
PW_API const pw_cpu_attr_t* pw_cpu_program_find_attr(
    const pw_cpu_program_t* program, const char* name);

/* The number attribute |name|, or |fallback| if absent or a string. */
PW_API double pw_cpu_program_number_attr(const pw_cpu_program_t* program,
                                         const char* name, double fallback);

/*---------------------------------------------------------------------------
 * Kernels
 *-------------------------------------------------------------------------*/

/* Dtype masks for pw_cpu_param_spec_t.dtypes. */
#define PW_CPU_DTYPE_BIT(dtype) (1u << (unsigned)(dtype))
#define PW_CPU_DTYPES_ANY 0u /* every dtype */
#define PW_CPU_DTYPES_FLOAT \
  (PW_CPU_DTYPE_BIT(PW_DTYPE_F32) | PW_CPU_DTYPE_BIT(PW_DTYPE_F64))
#define PW_CPU_DTYPES_INT \
  (PW_CPU_DTYPE_BIT(PW_DTYPE_I32) | PW_CPU_DTYPE_BIT(PW_DTYPE_I64))
/* The 16-bit floats (bit patterns in uint16_t; pathways/types.h converts). */
#define PW_CPU_DTYPES_HALF \
  (PW_CPU_DTYPE_BIT(PW_DTYPE_F16) | PW_CPU_DTYPE_BIT(PW_DTYPE_BF16))
/* Every integer dtype, signed and unsigned, 8 to 64 bits. */
#define PW_CPU_DTYPES_INTEGER                                              \
  (PW_CPU_DTYPE_BIT(PW_DTYPE_I8) | PW_CPU_DTYPE_BIT(PW_DTYPE_I16) |         \
   PW_CPU_DTYPE_BIT(PW_DTYPE_I32) | PW_CPU_DTYPE_BIT(PW_DTYPE_I64) |        \
   PW_CPU_DTYPE_BIT(PW_DTYPE_U8) | PW_CPU_DTYPE_BIT(PW_DTYPE_U16) |         \
   PW_CPU_DTYPE_BIT(PW_DTYPE_U32) | PW_CPU_DTYPE_BIT(PW_DTYPE_U64))

/* One parameter of a kernel's signature. */
typedef struct pw_cpu_param_spec_t {
  const char* name;  /* for messages ("lhs"); may be NULL */
  uint32_t dtypes;   /* PW_CPU_DTYPE_BIT mask; PW_CPU_DTYPES_ANY = any */
  int32_t rank;      /* required rank, or -1 for any rank */
} pw_cpu_param_spec_t;

/* One accepted attribute. */
typedef struct pw_cpu_attr_spec_t {
  const char* name;
  pw_cpu_attr_kind_t kind;
  bool required;
} pw_cpu_attr_spec_t;

/* Kernel flags. */
#define PW_CPU_KERNEL_SAME_DTYPE 1u  /* all parameters share one dtype */
#define PW_CPU_KERNEL_OPEN_ATTRS 2u  /* accept attributes not in |attrs| */
/* Variadic: a program has n >= 1 repeats of |inputs| and n repeats of
 * |outputs| (the same n; at most PW_CPU_MAX_PARAMS of each): parameter i
 * is checked against spec i % input_count (output_count). */
#define PW_CPU_KERNEL_VARIADIC 4u

/* One device's shard of an input (read only) / output (written by the
 * kernel). |shape| is the shard shape; |size| = elements * dtype size. */
typedef struct pw_cpu_input_shard_t {
  const void* data;
  size_t size;
  pw_dtype_t dtype;
  pw_shape_t shape;
} pw_cpu_input_shard_t;

typedef struct pw_cpu_output_shard_t {
  void* data;
  size_t size;
  pw_dtype_t dtype;
  pw_shape_t shape;
} pw_cpu_output_shard_t;

/* What a kernel's run function receives for one device. Everything is valid
 * only during the call. */
typedef struct pw_cpu_kernel_call_t {
  size_t struct_size;
  const pw_cpu_program_t* program; /* global view: params, shardings, attrs */
  const pw_mesh_shape_t* mesh;     /* the mesh compiled for */
  uint32_t mesh_index;             /* this device's row-major mesh position */
  uint32_t device;                 /* backend device ordinal */
  const pw_cpu_input_shard_t* inputs;
  uint32_t input_count;
  const pw_cpu_output_shard_t* outputs;
  uint32_t output_count;
  const pw_cpu_attr_t* attrs;      /* == program->attrs */
  uint32_t attr_count;
  void* user;                      /* the kernel definition's |user| */
  /* -- v2 fields start here (a kernel checks struct_size before reading) -- */
  /* The graph node's argument (pw_graph_set_node_arg; launch->node_arg):
   * the same for every device of the launch, 0 when unset. Built-in
   * kernels ignore it. */
  uint64_t node_arg;
} pw_cpu_kernel_call_t;

#define PW_CPU_KERNEL_CALL_SIZE_V1 PW_STRUCT_SIZE(pw_cpu_kernel_call_t, user)
#define PW_CPU_KERNEL_CALL_SIZE_V2 PW_STRUCT_SIZE(pw_cpu_kernel_call_t, node_arg)

/* Runs one device's part. Called on a pool thread, concurrently for
 * different devices and launches: must be thread-safe and must not block
 * on other devices (use the built-in collectives for that). Returns NULL or
 * an error, which the launch's done receives. */
typedef pw_status_t (*pw_cpu_kernel_run_fn_t)(const pw_cpu_kernel_call_t* call);

/* Optional: validates a program's concrete dtypes, shapes, shardings and
 * attributes over |mesh|, after the generic checks of the signature passed.
 * Called by compile and load, from any thread. Returns NULL or
 * INVALID_ARGUMENT naming the problem. */
typedef pw_status_t (*pw_cpu_kernel_check_fn_t)(void* user,
                                                const pw_cpu_program_t* program,
                                                const pw_mesh_shape_t* mesh);

typedef struct pw_cpu_kernel_def_t {
  size_t struct_size;              /* sizeof(pw_cpu_kernel_def_t) */
  const char* name;                /* NAME syntax, < PW_CPU_NAME_MAX bytes */
  uint32_t input_count;            /* <= PW_BACKEND_MAX_PARAMS (>= 1 if variadic) */
  const pw_cpu_param_spec_t* inputs;   /* input_count entries */
  uint32_t output_count;           /* 1..PW_BACKEND_MAX_PARAMS */
  const pw_cpu_param_spec_t* outputs;  /* output_count entries */
  uint32_t attr_count;             /* <= PW_CPU_MAX_ATTRS */
  const pw_cpu_attr_spec_t* attrs; /* attr_count entries */
  uint32_t flags;                  /* PW_CPU_KERNEL_* */
  pw_cpu_kernel_check_fn_t check;  /* optional */
  pw_cpu_kernel_run_fn_t run;      /* required */
  void* user;                      /* passed to check and run */
} pw_cpu_kernel_def_t;

#define PW_CPU_KERNEL_DEF_SIZE_V1 PW_STRUCT_SIZE(pw_cpu_kernel_def_t, user)

/* Registers a kernel with |backend| (a CPU backend). |def| and the arrays
 * and strings it points to are copied; |def->user| must stay valid while
 * the backend lives. A kernel cannot be unregistered. ALREADY_EXISTS if the
 * name is taken (built-ins included); INVALID_ARGUMENT for a malformed
 * definition or a non-CPU backend; RESOURCE_EXHAUSTED on allocation
 * failure. Thread-safe, also against concurrent compile/load/launch. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_cpu_backend_register_kernel(
    pw_backend_t backend, const pw_cpu_kernel_def_t* def);

PW_EXTERN_C_END

#endif /* PATHWAYS_BACKENDS_CPU_H_ */
