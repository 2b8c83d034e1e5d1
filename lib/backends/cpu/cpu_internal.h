/* Internal to the CPU backend: shared between its source files, never
 * installed. The backend includes only public headers (it is written as a
 * host application would write its own backend). */
#ifndef PW_BACKENDS_CPU_CPU_INTERNAL_H_
#define PW_BACKENDS_CPU_CPU_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>

#include "pathways/backends/cpu.h"

#define PW_CPU_LOG "cpu"

/*---------------------------------------------------------------------------
 * Worker pool (pool.c): a fixed set of threads draining one FIFO; idle
 * workers spin, then park (pathways/backends/cpu.h, WORKER POOL).
 *-------------------------------------------------------------------------*/

typedef struct pw_cpu__task_t pw_cpu__task_t;
typedef void (*pw_cpu__task_fn_t)(pw_cpu__task_t* task);

/* Intrusive queue node; the task's owner embeds it. */
struct pw_cpu__task_t {
  pw_cpu__task_t* next;
  pw_cpu__task_fn_t fn;
};

/* What pw_cpu__pool_start needs, resolved from the backend options. */
typedef struct pw_cpu__pool_config_t {
  uint32_t thread_count;
  uint32_t spin_us;            /* 0: park at once */
  uint32_t affinity;           /* PW_CPU_AFFINITY_* */
  uint32_t cpu_count;          /* PW_CPU_AFFINITY_LIST: entries of |cpus| */
  const uint32_t* cpus;        /* borrowed; the pool keeps a copy */
  const pw_logger_t* logger;   /* must outlive the pool */
} pw_cpu__pool_config_t;

typedef struct pw_cpu__pool_t {
  pthread_mutex_t mutex;
  pthread_cond_t wake;
  pw_cpu__task_t* head;        /* the FIFO; under |mutex| */
  pw_cpu__task_t* tail;
  uint32_t sleepers;           /* parked workers; under |mutex| */
  /* Written under |mutex|, read without it by spinning workers. */
  atomic_uint queued;          /* tasks in the FIFO */
  atomic_bool stopping;
  atomic_uint spinning;        /* workers spinning now */
  uint32_t spinner_cap;        /* at most this many spin at once */
  uint64_t spin_max_ns;        /* 0: park at once */
  uint32_t thread_count;       /* running workers */
  uint32_t capacity;           /* entries of |threads| */
  pthread_t* threads;
  uint32_t* cpus;              /* worker i -> cpus[i % cpu_count]; NULL: unpinned */
  uint32_t cpu_count;
  const pw_logger_t* logger;
  pw_allocator_t allocator;
} pw_cpu__pool_t;

/* Starts |config->thread_count| workers. INVALID_ARGUMENT for an affinity
 * list entry the process may not run on. On error nothing is left
 * running. */
pw_status_t pw_cpu__pool_start(pw_cpu__pool_t* pool, pw_allocator_t allocator,
                               const pw_cpu__pool_config_t* config);
/* Queues |task|; a worker calls task->fn(task). Never fails. */
void pw_cpu__pool_push(pw_cpu__pool_t* pool, pw_cpu__task_t* task);
/* Runs what is queued, then joins and frees the workers. */
void pw_cpu__pool_stop(pw_cpu__pool_t* pool);
/* True if the calling thread is one of |pool|'s workers. */
bool pw_cpu__pool_is_worker(pw_cpu__pool_t* pool);

/* Affinity (pool_affinity.c). The CPUs each worker is pinned to, from
 * |config| (NULL/0 for PW_CPU_AFFINITY_NONE), allocated from |allocator|;
 * INVALID_ARGUMENT naming a list entry the process may not run on. */
pw_status_t pw_cpu__affinity_resolve(pw_allocator_t allocator,
                                     const pw_cpu__pool_config_t* config,
                                     uint32_t** out_cpus, uint32_t* out_count);
/* Pins |thread| (worker |worker|) to |cpu|; on failure logs a warning. */
void pw_cpu__affinity_pin(pthread_t thread, uint32_t worker, uint32_t cpu,
                          const pw_logger_t* logger);
/* How many CPUs the process may run on (1 if unknown). */
uint32_t pw_cpu__allowed_cpu_count(void);

/*---------------------------------------------------------------------------
 * Kernel registry (registry.c)
 *-------------------------------------------------------------------------*/

typedef enum pw_cpu__collective_e {
  PW_CPU__NOT_COLLECTIVE = 0,
  PW_CPU__ALL_REDUCE_SUM = 1,
  PW_CPU__ALL_REDUCE_MEAN = 2,
  PW_CPU__ALL_GATHER = 3,
  PW_CPU__REDUCE_SCATTER = 4, /* over named axes only */
  PW_CPU__ALL_TO_ALL = 5,     /* over named axes only */
} pw_cpu__collective_t;

#define PW_CPU__PARAM_NAME_MAX 32

/* A registered kernel: a private copy of its definition. Immutable once
 * registered and never freed before the backend, so pointers to it stay
 * valid for the backend's life. */
typedef struct pw_cpu__kernel_t {
  struct pw_cpu__kernel_t* next;
  char name[PW_CPU_NAME_MAX];
  uint32_t input_count;
  uint32_t output_count;
  uint32_t attr_count;
  uint32_t flags;
  pw_cpu_param_spec_t inputs[PW_BACKEND_MAX_PARAMS];
  pw_cpu_param_spec_t outputs[PW_BACKEND_MAX_PARAMS];
  pw_cpu_attr_spec_t attrs[PW_CPU_MAX_ATTRS];
  char input_names[PW_BACKEND_MAX_PARAMS][PW_CPU__PARAM_NAME_MAX];
  char output_names[PW_BACKEND_MAX_PARAMS][PW_CPU__PARAM_NAME_MAX];
  char attr_names[PW_CPU_MAX_ATTRS][PW_CPU_ATTR_NAME_MAX];
  pw_cpu_kernel_check_fn_t check;
  pw_cpu_kernel_run_fn_t run;
  void* user;
  pw_cpu__collective_t collective;
} pw_cpu__kernel_t;

/* A built-in kernel's definition, as the kernel files export them. */
typedef struct pw_cpu__builtin_t {
  pw_cpu_kernel_def_t def;
  pw_cpu__collective_t collective;
} pw_cpu__builtin_t;

/* Built-in tables (kernels_*.c, collective.c). */
extern const pw_cpu__builtin_t pw_cpu__elementwise_kernels[];
extern const size_t pw_cpu__elementwise_kernel_count;
extern const pw_cpu__builtin_t pw_cpu__linalg_kernels[];
extern const size_t pw_cpu__linalg_kernel_count;
extern const pw_cpu__builtin_t pw_cpu__collective_kernels[];
extern const size_t pw_cpu__collective_kernel_count;

/*---------------------------------------------------------------------------
 * The backend (backend.c)
 *-------------------------------------------------------------------------*/

typedef struct pw_cpu__device_t {
  atomic_int health;           /* pw_device_health_t */
  atomic_uint_fast64_t used_bytes;
} pw_cpu__device_t;

typedef struct pw_cpu__rendezvous_t pw_cpu__rendezvous_t;
typedef struct pw_cpu__launch_t pw_cpu__launch_t;
typedef struct pw_cpu__streams_t pw_cpu__streams_t;

/* The cache of freed device blocks (block_cache.c). */
#define PW_CPU__CACHE_MIN_BYTES ((size_t)64 << 10)
#define PW_CPU__CACHE_ENTRIES 256u

typedef struct pw_cpu__cached_block_t {
  void* block;     /* as the allocator returned it */
  size_t size;     /* its allocation size */
  uint64_t stamp;  /* when it was kept (older first out) */
} pw_cpu__cached_block_t;

typedef struct pw_cpu__block_cache_t {
  pthread_mutex_t mutex;
  uint64_t budget; /* 0: off */
  uint64_t bytes;
  uint64_t clock;
  uint64_t hits, misses, evictions;
  uint32_t count;
  pw_cpu__cached_block_t entries[PW_CPU__CACHE_ENTRIES];
} pw_cpu__block_cache_t;

typedef struct pw_cpu__backend_t {
  pw_allocator_t allocator;
  pw_logger_t logger;
  uint32_t device_count;
  uint32_t host;
  uint64_t capacity;
  pw_cpu__device_t* devices;
  pw_cpu__pool_t pool;
  bool pool_started;
  /* Streams mode (stream.c); NULL in pool mode. */
  pw_cpu__streams_t* streams;

  pthread_mutex_t kernels_mutex;
  pw_cpu__kernel_t* kernels;

  /* Pending collectives (collective.c). */
  pthread_mutex_t rendezvous_mutex;
  pw_cpu__rendezvous_t* rendezvous;
  /* Gangs with a part refused at launch (the part never arrives): their
   * other parts fail instead of waiting. The most recent ones, by gang id.
   * Guarded by rendezvous_mutex. */
  uint64_t refused_gangs[64];
  uint32_t refused_next;

  atomic_uint_fast64_t live_memories;
  atomic_uint_fast64_t live_executables;

  pw_cpu__block_cache_t cache;
} pw_cpu__backend_t;

void pw_cpu__cache_init(pw_cpu__block_cache_t* cache, uint64_t budget);
/* Frees every kept block and the mutex. */
void pw_cpu__cache_deinit(pw_cpu__backend_t* backend);
void pw_cpu__cache_drain(pw_cpu__backend_t* backend);
/* A kept block of at least |need| bytes (its size in |*out_size|), or NULL. */
void* pw_cpu__cache_take(pw_cpu__backend_t* backend, size_t need, size_t* out_size);
/* Keeps |block| of |size| bytes; false when the caller must free it. */
bool pw_cpu__cache_put(pw_cpu__backend_t* backend, void* block, size_t size);
void pw_cpu__cache_stats(pw_cpu__backend_t* backend, pw_cpu_block_cache_stats_t* out);
/* A device block of at least |size| bytes aligned to |align| (|*out_size|
 * its allocation size): a kept one, or a new one from the allocator, with
 * huge pages advised for large blocks. */
pw_status_t pw_cpu__block_alloc(pw_cpu__backend_t* backend, size_t size, size_t align,
                                void** out_block, size_t* out_size);
/* Keeps |block| in the cache or frees it. */
void pw_cpu__block_free(pw_cpu__backend_t* backend, void* block, size_t size);

#define PW_CPU__MEMORY_MAGIC 0x4d555043u     /* "CPUM" */
#define PW_CPU__EXECUTABLE_MAGIC 0x58555043u /* "CPUX" */

struct pw_backend_memory_s {
  uint32_t magic;
  uint32_t device;
  size_t size;        /* usable bytes */
  size_t alloc_size;  /* bytes obtained from the allocator */
  pw_cpu__backend_t* backend;
  unsigned char* data;
  /* adopt_host: |data| is the caller's memory (not counted in used_bytes,
   * never freed here); the allocation is the header alone. */
  bool adopted;
};

struct pw_backend_executable_s {
  uint32_t magic;
  atomic_uint refs;   /* unload drops one; each launch in flight holds one */
  pw_cpu__backend_t* backend;
  const pw_cpu__kernel_t* kernel;
  pw_mesh_shape_t mesh;
  uint32_t group_axes; /* collectives: the mesh axes they run over (mask) */
  pw_cpu_program_t program;
  /* program.input_count (output_count) entries each, in the executable's
   * allocation after the struct (alloc_size bytes in all). */
  pw_shape_t* input_shards;
  pw_shape_t* output_shards;
  size_t* input_bytes;
  size_t* output_bytes;
  size_t alloc_size;
  /* The signature's v2 spec arrays: program.inputs / program.outputs. */
};

/* A pending collective: the members of one group of one gang op that have
 * arrived and wait (collective.c). Every collective launch brings a spare
 * record allocated by launch, so arriving never allocates (and never fails
 * for lack of memory). Guarded by the backend's rendezvous_mutex. */
struct pw_cpu__rendezvous_t {
  pw_cpu__rendezvous_t* next;  /* in the backend's table */
  uint64_t gang_id;
  uint32_t group_key;          /* mesh index of the group's position 0 */
  uint32_t expected;           /* group size */
  uint32_t arrived;
  uint32_t axes;               /* mesh axes the group spans (mask) */
  pw_backend_executable_t executable; /* the first member's; a reference */
  pw_status_t failure;         /* set once the group has failed */
  pw_cpu__launch_t* members;   /* waiting members, sorted by position */
};

/* One device's accepted launch: what launch copied out of the request. */
struct pw_cpu__launch_t {
  pw_cpu__task_t task;
  pw_cpu__backend_t* backend;
  pw_backend_executable_t executable; /* holds a reference */
  size_t alloc_size;
  uint32_t device;
  uint32_t mesh_index;
  uint32_t group_size;
  uint64_t gang_id;
  uint32_t input_count;
  uint32_t output_count;
  /* input_count / output_count entries, and the kernel call's shard
   * arrays, trailing the struct (alloc_size bytes in all). */
  pw_backend_memory_t* inputs;
  pw_backend_memory_t* outputs;
  pw_cpu_input_shard_t* input_shards;
  pw_cpu_output_shard_t* output_shards;
  pw_backend_done_fn_t done;
  void* done_user;
  /* From a v2 launch; NULL/0 otherwise (streams mode uses them). */
  pw_backend_done_timed_fn_t done_timed;
  uint64_t queue_seq;
  uint64_t node_arg;               /* from a v3 launch; 0 otherwise */
  /* Collectives: position in the group, link among the group's waiting
   * members (sorted by position). */
  uint32_t position;
  pw_cpu__launch_t* member_next;
  pw_cpu__launch_t* complete_next; /* a batch of dones to call */
  pw_status_t complete_status;
  pw_cpu__rendezvous_t* spare;     /* collectives: record if first there */
  /* Collectives over named axes: where input 0's block starts (global
   * indices; set by the member that computes, collective_axes.c). */
  int64_t block_offsets[PW_MAX_RANK];
  uint32_t* group_devices; /* group_size entries, trailing the struct */
};

/* The backend behind |self| (vtable methods) or |backend| (public API). */
pw_cpu__backend_t* pw_cpu__from_backend(pw_backend_t backend);

/* UNAVAILABLE if |device| is marked FAILED, else NULL. */
pw_status_t pw_cpu__device_status(pw_cpu__backend_t* backend, uint32_t device);

/* Frees a finished launch (and its spare record) and drops its executable
 * reference. */
void pw_cpu__launch_free(pw_cpu__launch_t* launch);

/* Validates a launch request (see cpu.h); INVALID_ARGUMENT naming the
 * problem. */
pw_status_t pw_cpu__launch_check(pw_cpu__backend_t* backend, const pw_backend_launch_t* l);
/* Copies a validated request into a new launch (with a spare rendezvous
 * record for a collective). RESOURCE_EXHAUSTED when the allocator fails. */
pw_status_t pw_cpu__launch_copy(pw_cpu__backend_t* backend, const pw_backend_launch_t* l,
                                pw_cpu__launch_t** out_launch);
/* Runs a non-collective launch's kernel on the calling thread (UNAVAILABLE
 * if its device has failed); the status names the kernel and device. The
 * launch is left to the caller. */
pw_status_t pw_cpu__launch_execute(pw_cpu__launch_t* launch);

/* Drops a reference; the last frees the executable. */
void pw_cpu__executable_release(pw_backend_executable_t executable);

/*---------------------------------------------------------------------------
 * Streams mode (stream.c): one FIFO worker thread per device.
 *-------------------------------------------------------------------------*/

/* Starts one stream per device, each holding at most |depth| launches. On
 * error nothing is left running and backend->streams stays NULL. */
pw_status_t pw_cpu__streams_start(pw_cpu__backend_t* backend, uint32_t depth);
/* Runs what is queued, cancels collectives no member can reach any more,
 * joins and frees the streams (destroy). */
void pw_cpu__streams_stop(pw_cpu__backend_t* backend);
/* True if the calling thread is one of |backend|'s stream threads. */
bool pw_cpu__streams_is_worker(pw_cpu__backend_t* backend);
/* vtable launch in streams mode. */
pw_status_t pw_cpu__streams_launch(pw_cpu__backend_t* backend, const pw_backend_launch_t* l);
/* vtable queue_info (both modes). */
pw_status_t pw_cpu__queue_info(void* self, uint32_t device, pw_backend_queue_info_t* out_info);

/*---------------------------------------------------------------------------
 * Programs (program_parse.c, program_format.c, executable.c)
 *-------------------------------------------------------------------------*/

/* Source lines of a parsed program's directives, for messages. */
typedef struct pw_cpu__lines_t {
  uint32_t kernel;
  uint32_t inputs[PW_CPU_MAX_PARAMS];
  uint32_t outputs[PW_CPU_MAX_PARAMS];
  uint32_t attrs[PW_CPU_MAX_ATTRS];
  uint32_t over;
} pw_cpu__lines_t;

/* pw_cpu_program_parse_named (|mesh| NULL: indices only) that also reports
 * each directive's line. */
pw_status_t pw_cpu__program_parse(const char* text, size_t size,
                                  const pw_mesh_shape_t* mesh,
                                  pw_cpu_program_t* out_program,
                                  pw_cpu__lines_t* out_lines);

/* INVALID_ARGUMENT unless |program| is expressible as program text: valid
 * names, counts, dtypes, shapes, sharding kinds, unique attributes. */
pw_status_t pw_cpu__program_check(const pw_cpu_program_t* program);

/* True if |text| (|length| bytes) is a NAME (see cpu.h). */
bool pw_cpu__is_name(const char* text, size_t length);
/* True if |text| is a string attribute WORD that does not read as a number. */
bool pw_cpu__is_word(const char* text, size_t length);

/* Writes the program-text form of |sharding| ("split(0,all)", "P(data,
 * None)"): axes by |mesh|'s names, or indices when |mesh| is NULL or
 * unnamed. */
void pw_cpu__sharding_text(const pw_sharding_t* sharding, const pw_mesh_shape_t* mesh,
                           char* buffer, size_t capacity);
/* Writes "input 1 'rhs' f32[16,4] split(0,all)"-style text. */
void pw_cpu__param_text(const char* role, uint32_t index, const char* name,
                        const pw_backend_param_t* param, char* buffer,
                        size_t capacity);

/* Checks |program| against |kernel|'s signature and |mesh|. |lines| may be
 * NULL (load: no source). */
pw_status_t pw_cpu__program_validate(const pw_cpu__kernel_t* kernel,
                                     const pw_cpu_program_t* program,
                                     const pw_mesh_shape_t* mesh,
                                     const pw_cpu__lines_t* lines);

/* Looks up a kernel by name; NULL if unknown. Thread-safe. */
const pw_cpu__kernel_t* pw_cpu__kernel_find(pw_cpu__backend_t* backend,
                                            const char* name);
/* Registers the built-in kernels. */
pw_status_t pw_cpu__register_builtins(pw_cpu__backend_t* backend);
/* Registers one kernel (copying |def|); collective kind for built-ins. */
pw_status_t pw_cpu__kernel_register(pw_cpu__backend_t* backend,
                                    const pw_cpu_kernel_def_t* def,
                                    pw_cpu__collective_t collective);
/* Frees every registered kernel (destroy). */
void pw_cpu__kernels_free(pw_cpu__backend_t* backend);

/* vtable compile/load/unload (executable.c). */
pw_status_t pw_cpu__compile(void* self, const void* program,
                            size_t program_size, const pw_mesh_shape_t* mesh,
                            const char* options, pw_allocator_t allocator,
                            void** out_bytes, size_t* out_size);
pw_status_t pw_cpu__load(void* self, const void* bytes, size_t size,
                         pw_backend_executable_t* out_executable,
                         pw_executable_signature_t* out_signature);
void pw_cpu__unload(void* self, pw_backend_executable_t executable);

/*---------------------------------------------------------------------------
 * Collectives (collective.c)
 *-------------------------------------------------------------------------*/

/* The mesh axes (mask) collective |program| runs over: its `over` axes, or
 * (original forms) input 0's split axis, every axis for split(T,all). */
uint32_t pw_cpu__collective_axes(const pw_cpu_program_t* program, const pw_mesh_shape_t* mesh);

/* The signature check of the `over AXES` forms (collective_axes.c):
 * INVALID_ARGUMENT naming the axis or parameter that does not fit. */
pw_status_t pw_cpu__check_collective_axes(const pw_cpu_program_t* program,
                                          const pw_mesh_shape_t* mesh,
                                          pw_cpu__collective_t kind);
/* Computes a finished group of an `over AXES` collective: writes every
 * member's output (collective_axes.c). */
void pw_cpu__collective_redistribute(pw_cpu__rendezvous_t* record);

/* Runs on a pool thread: |launch| arrives at its gang's rendezvous. It
 * either waits there (returning at once) or completes the whole group. */
void pw_cpu__collective_arrive(pw_cpu__launch_t* launch);
/* A part of gang |gang_id| was refused by launch and will never arrive:
 * fails the parts already waiting and those still to come. */
void pw_cpu__collective_refused(pw_cpu__backend_t* backend, uint64_t gang_id,
                                pw_status_t reason);

/* Fails every pending rendezvous whose group contains |device|. */
void pw_cpu__collective_device_failed(pw_cpu__backend_t* backend,
                                      uint32_t device);
/* Completes every pending participant with CANCELLED and frees all
 * records (destroy, after the pool is stopped). */
void pw_cpu__collective_shutdown(pw_cpu__backend_t* backend);

/*---------------------------------------------------------------------------
 * Kernel helpers (kernels_*.c)
 *-------------------------------------------------------------------------*/

/* Elements of a shard. */
static inline size_t pw_cpu__elements(const pw_shape_t* shape) {
  size_t n = 1;
  for (uint32_t i = 0; i < shape->rank; ++i) n *= (size_t)shape->dims[i];
  return n;
}

/* Size of mesh axis |axis| (PW_MESH_AXIS_ALL: every device). */
uint32_t pw_cpu__mesh_axis_size(const pw_mesh_shape_t* mesh, uint32_t axis);

/* Checks shared by the kernel check hooks: every parameter has the global
 * shape of input 0 (or output 0 when there are no inputs) and lays it out
 * alike (pw_sharding_equivalent over |mesh|: any sharding kinds), so each
 * device applies the kernel to its shards. Partial sums (unreduced axes) are refused
 * unless |linear| (the kernel is linear in every input and has one, or
 * adds its inputs), naming the parameter. */
pw_status_t pw_cpu__check_layouts(const pw_cpu_program_t* program, const pw_mesh_shape_t* mesh,
                                  bool linear);
/* An attribute that must be an integer in [lo, hi]; |fallback| if absent. */
pw_status_t pw_cpu__int_attr(const pw_cpu_program_t* program, const char* name,
                             int64_t lo, int64_t hi, int64_t fallback,
                             int64_t* out_value);

/* The v6 accumulate method (accumulate.c). */
pw_status_t pw_cpu__accumulate(void* self, uint32_t device, pw_dtype_t dtype,
                               pw_backend_memory_t dst, size_t dst_offset,
                               pw_backend_memory_t src, size_t src_offset, size_t count);

#endif /* PW_BACKENDS_CPU_CPU_INTERNAL_H_ */
