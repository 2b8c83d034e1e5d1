/* Internal to the sim backend: shared between its source files, never
 * installed. Like every bundled plugin it includes only public headers.
 *
 * Files:
 *   backend.c   creation, options, devices, health, the vtable
 *   memory.c    device memory, host copies, transfer accounting
 *   program.c   program text, executable bytes, compile/load, cost
 *   launch.c    launch: validation, timing, failures, data effects
 *   host.c      launch_host: a lane (one host's devices of a gang op) in
 *               one call, its validation and its one completion
 *   collective.c  collectives: gang rendezvous, tombstones
 *   queue.c     the event queue (MANUAL/THREADED), delivery, stepping,
 *               the free list of parts
 *   stream.c    ordered devices (queue_depth, blocking_collectives): each
 *               device's queue, holds, in-order release, deadlocks, and
 *               INLINE's direct launch on an empty queue
 *   control.c   queries (stats, trace hash), failure injection
 *
 * Locks (never held while a done or trace callback runs, and never two at
 * once except queue_mutex inside step_mutex, and a device lock or
 * queue_mutex inside stream_mutex):
 *   device lock    a spinlock per device: its timeline and trace chain
 *   groups_mutex   pending collectives and the aborted-gang ring
 *   queue_mutex    the event heap and the simulator thread's state
 *   step_mutex     serializes MANUAL stepping callers
 *   stream_mutex   ordered mode: every device's queue and its collectives
 *   parts_lock     a spinlock, innermost (nothing is taken inside it): the
 *                  free list of parts
 *   lanes_lock     a spinlock: the free list of lane records (host.c) */
#ifndef PW_BACKENDS_SIM_SIM_INTERNAL_H_
#define PW_BACKENDS_SIM_SIM_INTERNAL_H_

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>

#include "pathways/backends/sim.h"

#define PW_SIM_LOG "sim"

/*---------------------------------------------------------------------------
 * Programs and executables (program.c)
 *-------------------------------------------------------------------------*/

typedef enum pw_sim__kind_e {
  PW_SIM__COMPUTE = 0,
  PW_SIM__COPY = 1,
  PW_SIM__COLLECTIVE = 2,
  PW_SIM__ALL_REDUCE_SUM = 3,
  /* Rendezvous without a data effect, priced as their ring algorithms. */
  PW_SIM__ALL_GATHER = 4,
  PW_SIM__REDUCE_SCATTER = 5,
  PW_SIM__ALL_TO_ALL = 6,
} pw_sim__kind_t;

#define PW_SIM__KIND_COUNT 7
#define PW_SIM__NAME_MAX 64
/* Largest virtual duration a program may declare (about 31 years). */
#define PW_SIM__MAX_NS 1e18

/* Inputs, and separately outputs, a program holds (past the signature's
 * fixed arrays: load hands the runtime v2 pointers). */
#define PW_SIM__MAX_PARAMS 512

/* A parsed program: a plain value (about 100 KB: compile and load keep
 * theirs on the heap). */
typedef struct pw_sim__program_t {
  char name[PW_SIM__NAME_MAX];
  pw_sim__kind_t kind;
  uint64_t time_ns;
  double flops;
  double bytes;
  double collective_bytes;
  bool has_collective_bytes;
  uint32_t input_count;
  uint32_t output_count;
  pw_backend_param_t inputs[PW_SIM__MAX_PARAMS];
  pw_backend_param_t outputs[PW_SIM__MAX_PARAMS];
  /* Collectives: the mesh axes they run over (bit a for axis a; the `over`
   * directive); 0: every device of the mesh. */
  uint32_t over_axes;
} pw_sim__program_t;

static inline bool pw_sim__is_collective(pw_sim__kind_t kind) {
  return kind == PW_SIM__COLLECTIVE || kind == PW_SIM__ALL_REDUCE_SUM ||
         kind == PW_SIM__ALL_GATHER || kind == PW_SIM__REDUCE_SCATTER ||
         kind == PW_SIM__ALL_TO_ALL;
}

const char* pw_sim__kind_name(pw_sim__kind_t kind);

/* Parses program text (syntax and the per-kind parameter rules; shardings
 * are checked against a mesh by pw_sim__program_check). */
pw_status_t pw_sim__program_parse(const char* text, size_t size, const pw_mesh_shape_t* mesh,
                                  pw_sim__program_t* out_program);
/* Devices in one group of a collective over |axes| (0: the whole mesh). */
uint32_t pw_sim__group_size_over(const pw_mesh_shape_t* mesh, uint32_t axes);
/* Checks |program|'s parameters against |mesh| and its kind's rules. */
pw_status_t pw_sim__program_check(const pw_sim__program_t* program,
                                  const pw_mesh_shape_t* mesh);

/*---------------------------------------------------------------------------
 * The backend (backend.c)
 *-------------------------------------------------------------------------*/

typedef struct pw_sim__backend_t pw_sim__backend_t;
typedef struct pw_sim__part_t pw_sim__part_t;
typedef struct pw_sim__group_t pw_sim__group_t;
typedef struct pw_sim__stream_t pw_sim__stream_t;
typedef struct pw_sim__lane_t pw_sim__lane_t;

/* One chip. Its timeline, trace chain and device time are guarded by
 * |lock|; |fail_at| and |used_bytes| are read without it. */
typedef struct pw_sim__device_t {
  alignas(64) atomic_uint lock;
  uint32_t slice;
  uint64_t busy_until;   /* end of the last op launched (or reserved) */
  uint64_t done_until;   /* end of the last op delivered */
  uint64_t chain;        /* trace chain, see sim.h */
  uint64_t events;
  _Atomic uint64_t fail_at;
  atomic_uint_fast64_t used_bytes;
  uint64_t busy_ns;      /* device time of delivered ops */
  uint64_t first_start;  /* UINT64_MAX until an op is delivered */
  uint64_t last_end;
  /* Ordered devices (stream.c), also under |lock|. */
  uint64_t last_seq;     /* highest queue_seq seen */
  uint32_t slow_parts;   /* INLINE: parts in the stream machinery, done not returned */
  /* INLINE direct launch (stream.c): 2 decided, 1 its done running, 0
   * none. Set and cleared under |lock|; 2 -> 1 is a plain atomic store. */
  atomic_uint direct;
} pw_sim__device_t;

static inline void pw_sim__device_lock(pw_sim__device_t* d) {
  for (;;) {
    if (atomic_exchange_explicit(&d->lock, 1u, memory_order_acquire) == 0u) return;
    while (atomic_load_explicit(&d->lock, memory_order_relaxed) != 0u) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }
}

static inline void pw_sim__device_unlock(pw_sim__device_t* d) {
  atomic_store_explicit(&d->lock, 0u, memory_order_release);
}

/* Gangs whose collective was abandoned; later parts complete at once. */
#define PW_SIM__ABORTED_RING 64

typedef struct pw_sim__aborted_t {
  uint64_t gang_id;
  uint32_t failed_device;   /* UINT32_MAX: aborted for another reason */
  bool used;
} pw_sim__aborted_t;

struct pw_sim__backend_t {
  pw_allocator_t allocator;
  pw_logger_t logger;
  pw_sim_mode_t mode;
  bool virtual_memory;
  uint32_t device_count;
  uint32_t slice_count;
  uint32_t per_slice;
  uint32_t per_host;          /* devices_per_host: host = ordinal / per_host */
  uint64_t capacity;
  /* Rates, copied from the options. */
  double chip_flops_per_s;
  double chip_bytes_per_s;
  double ici_bytes_per_s;
  uint64_t ici_latency_ns;
  double dcn_bytes_per_s;
  uint64_t dcn_latency_ns;
  uint64_t launch_overhead_ns;
  uint64_t dispatch_latency_ns;
  uint32_t queue_depth;       /* 0: not queue-ordered */
  bool blocking;              /* blocking_collectives */
  bool ordered;               /* queue_depth > 0 || blocking: stream.c runs launches */
  pw_sim_trace_fn_t trace;
  void* trace_user;

  pw_sim__device_t* devices;

  /* Host time (the issue time of launches) and the latest completion
   * delivered; the clock is their max. */
  _Atomic uint64_t now;
  _Atomic uint64_t latest;
  atomic_uint_fast64_t failed_events;
  atomic_uint_fast64_t transfer_events;
  atomic_uint_fast64_t live_memories;
  atomic_uint_fast64_t live_executables;
  atomic_uint_fast64_t host_launches;  /* launch_host calls accepted */

  /* Lane records of launch_host (host.c): a free list, grown on demand. */
  atomic_uint lanes_lock;
  pw_sim__lane_t* lanes_free;
  uint64_t lanes_allocated;

  /* Pending collectives (launch.c). */
  pthread_mutex_t groups_mutex;
  pw_sim__group_t* groups;
  pw_sim__aborted_t aborted[PW_SIM__ABORTED_RING];
  uint32_t aborted_next;

  /* Event queue (queue.c): a binary min-heap of parts, ordered by (time,
   * gang id, device, seq). Every queued launch reserves its slot when it
   * is accepted, so pushing never allocates. */
  pthread_mutex_t queue_mutex;
  pthread_cond_t queue_wake;   /* simulator thread: work or stop */
  pthread_cond_t queue_idle;   /* wait_idle */
  pw_sim__part_t** heap;
  size_t heap_count;
  size_t heap_capacity;
  size_t heap_reserved;        /* accepted parts not yet pushed */
  uint64_t next_seq;
  uint32_t delivering;         /* parts popped and not yet delivered */
  bool stopping;
  bool thread_started;
  pthread_t thread;
  pthread_mutex_t step_mutex;
  bool mutexes_ready;

  /* Ordered mode (stream.c), guarded by stream_mutex. */
  pthread_mutex_t stream_mutex;
  pw_sim__stream_t* streams;   /* one per device; NULL unless ordered */
  pw_sim__group_t* ogroups;    /* pending collectives of ordered devices */
  pw_sim__part_t* inline_head; /* INLINE: released parts to deliver, FIFO */
  pw_sim__part_t* inline_tail;
  bool inline_draining;        /* a thread is delivering inline_head */
  uint32_t dirty_top;          /* devices to pump (UINT32_MAX: none) */
  bool check_deadlock;         /* a device began waiting in a collective */

  /* Parts to reuse (queue.c), guarded by the spinlock |parts_lock|. */
  atomic_uint parts_lock;
  pw_sim__part_t* free_parts;
  uint32_t free_count;
  bool parts_closed;           /* destroy drained the list: free at once */
};

/* The backend behind a public handle, or NULL if it is not a sim. */
pw_sim__backend_t* pw_sim__from_backend(pw_backend_t backend);

/* max(now, latest). */
uint64_t pw_sim__clock(pw_sim__backend_t* backend);
/* Raises |*target| to |value| if lower (relaxed). Inline: it runs on
 * every launch, and mostly finds nothing to do. */
static inline void pw_sim__raise(_Atomic uint64_t* target, uint64_t value) {
  uint64_t current = atomic_load_explicit(target, memory_order_relaxed);
  while (value > current &&
         !atomic_compare_exchange_weak_explicit(target, &current, value, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}

/* Applies the explicit and the seeded failures of |options| (control.c). */
void pw_sim__apply_failures(pw_sim__backend_t* backend,
                            const pw_sim_backend_options_t* options);

/* "device 37 (slice 0 chip 37)" for messages. */
void pw_sim__device_name(const pw_sim__backend_t* backend, uint32_t device,
                         char* buffer, size_t capacity);

/* The 64-bit round of the trace hash (sim.h) and one event's fold. */
static inline uint64_t pw_sim__round(uint64_t acc, uint64_t x) {
  acc += x * 0xC2B2AE3D27D4EB4FULL;
  acc = (acc << 31) | (acc >> 33);
  return acc * 0x9E3779B185EBCA87ULL;
}

static inline uint64_t pw_sim__fold(uint64_t chain, uint64_t time, uint32_t device,
                                    uint32_t kind, uint64_t gang_id) {
  chain = pw_sim__round(chain, time);
  chain = pw_sim__round(chain, ((uint64_t)device << 8) | kind);
  return pw_sim__round(chain, gang_id);
}

/*---------------------------------------------------------------------------
 * Memory and executables
 *-------------------------------------------------------------------------*/

#define PW_SIM__MEMORY_MAGIC 0x4d4d4953u     /* "SIMM" */
#define PW_SIM__EXECUTABLE_MAGIC 0x584d4953u /* "SIMX" */

struct pw_backend_memory_s {
  uint32_t magic;
  uint32_t device;
  size_t size;          /* usable bytes */
  size_t alloc_size;    /* bytes obtained from the allocator */
  pw_sim__backend_t* backend;
  _Atomic uint64_t ready_at; /* virtual time the contents became ready */
  unsigned char* data;  /* NULL in VIRTUAL memory mode */
};

struct pw_backend_executable_s {
  uint32_t magic;
  atomic_uint refs;     /* unload drops one; each part in flight holds one */
  pw_sim__backend_t* backend;
  pw_sim__program_t program;
  pw_mesh_shape_t mesh;
  uint32_t group_size;  /* devices of the mesh */
  uint32_t ring_size;   /* devices of one group (over its axes): the ring */
  uint64_t cost_ns;     /* on one slice (a gang over several: collective_cost) */
  double base_ns;       /* the cost without the collective term, unrounded */
  size_t input_bytes[PW_SIM__MAX_PARAMS];  /* per-device shard sizes */
  size_t output_bytes[PW_SIM__MAX_PARAMS];
};

/* INVALID_ARGUMENT unless |memory| is a live allocation of |backend| on
 * |device|; |who| names the caller in the message. */
pw_status_t pw_sim__check_memory(pw_sim__backend_t* backend, uint32_t device,
                                 pw_backend_memory_t memory, const char* who);

/* vtable memory methods (memory.c). */
pw_status_t pw_sim__allocate(void* self, uint32_t device, size_t size,
                             pw_backend_memory_t* out_memory);
void pw_sim__deallocate(void* self, uint32_t device, pw_backend_memory_t memory);
pw_status_t pw_sim__copy_to_device(void* self, uint32_t device, pw_backend_memory_t dst,
                                   size_t offset, const void* src, size_t size);
pw_status_t pw_sim__copy_to_host(void* self, uint32_t device, pw_backend_memory_t src,
                                 size_t offset, void* dst, size_t size);
void* pw_sim__host_pointer(void* self, uint32_t device, pw_backend_memory_t memory);
/* The vtable's record_copy: pw_sim_backend_record_transfer's accounting. */
pw_status_t pw_sim__record_copy(void* self, uint32_t src_device, pw_backend_memory_t src,
                                uint32_t dst_device, pw_backend_memory_t dst, size_t bytes);

/* vtable compile/load/unload (program.c). */
pw_status_t pw_sim__compile(void* self, const void* program, size_t program_size,
                            const pw_mesh_shape_t* mesh, const char* options,
                            pw_allocator_t allocator, void** out_bytes, size_t* out_size);
pw_status_t pw_sim__load(void* self, const void* bytes, size_t size,
                         pw_backend_executable_t* out_executable,
                         pw_executable_signature_t* out_signature);
void pw_sim__unload(void* self, pw_backend_executable_t executable);
/* Drops a reference; the last frees the executable. */
void pw_sim__executable_release(pw_backend_executable_t executable);
/* The cost of collective |e| over |devices| (|n| ordinals): cost_ns on
 * one slice; the two-level ring of sim.h's COST over several. Fails only
 * for lack of memory (a count per slice spanned). */
pw_status_t pw_sim__collective_cost(const pw_sim__backend_t* backend, pw_backend_executable_t e,
                                    const uint32_t* devices, uint32_t n, uint64_t* out_cost);

/*---------------------------------------------------------------------------
 * Launch and collectives (launch.c)
 *-------------------------------------------------------------------------*/

/* One device's accepted launch, kept while it waits: in a collective's
 * group, or in the event queue. */
struct pw_sim__part_t {
  pw_sim__part_t* next;           /* free/cancel lists */
  pw_backend_done_fn_t done;
  pw_backend_done_timed_fn_t done_timed; /* called instead of done when set */
  void* done_user;
  pw_backend_executable_t executable; /* holds a reference */
  uint64_t gang_id;
  uint64_t start;                 /* when its device began it (collective: arrived) */
  uint64_t begin;                 /* device time charged from (collective: rendezvous) */
  uint64_t time;                  /* completion time, once decided */
  uint64_t seq;                   /* queue tie-break */
  uint32_t device;
  uint32_t mesh_index;
  pw_sim_event_kind_t kind;
  pw_status_t status;             /* owned until delivered */
  pw_backend_memory_t input0;     /* all_reduce_sum data */
  pw_backend_memory_t output0;
  /* Ordered mode (stream.c). */
  pw_sim__part_t* qnext;          /* its device's queue, in queue order */
  pw_sim__group_t* group;         /* the collective it arrived in */
  uint64_t issue;                 /* launch time + dispatch latency */
  bool ordered;                   /* released through stream.c */
  bool decided;                   /* time (and kind, status) known */
  uint32_t input_count;
  uint32_t output_count;
  /* input_count / output_count entries: |inline_args| for at most
   * PW_BACKEND_MAX_PARAMS of each, else |wide_args| (heap, freed with the
   * part: pw_sim__part_free). */
  pw_backend_memory_t* inputs;
  pw_backend_memory_t* outputs;
  pw_backend_memory_t* wide_args;
  pw_backend_memory_t inline_args[2 * PW_BACKEND_MAX_PARAMS];
};

/* A collective in progress: the parts of one gang that have arrived.
 * Once failed it stays as a tombstone until every member has arrived (or
 * been refused), so late members fail at once instead of waiting; a group
 * that completes normally is removed at its last arrival. Guarded by
 * groups_mutex. */
struct pw_sim__group_t {
  pw_sim__group_t* next;
  size_t alloc_size;
  uint64_t gang_id;
  uint32_t expected;
  uint32_t arrived;               /* members seen, refused ones included */
  uint64_t max_arrival;
  pw_sim__kind_t kind;
  uint64_t cost_ns;               /* priced for its devices' slices */
  uint64_t exe_cost_ns;           /* the executable's one-slice cost (members must agree) */
  pw_status_t failure;            /* set once failed (owned) */
  /* Deadlock search (stream.c). */
  pw_sim__group_t* parent;
  uint32_t color;
  uint32_t cursor;
  uint32_t via_device;
  uint32_t* devices;              /* |expected| ordinals, mesh order */
  pw_sim__part_t** parts;         /* |expected| slots, mesh order */
};

pw_status_t pw_sim__launch(void* self, const pw_backend_launch_t* launch);
/* launch's validation (INVALID_ARGUMENT naming the culprit; nothing
 * runs), its path after validation (may still refuse: no memory for a
 * part or a group, an ordered device's queue_seq or depth), and what a
 * refusal does to the launch's gang (pw_sim__collective_refused or
 * pw_sim__stream_refused). */
pw_status_t pw_sim__check_launch(pw_sim__backend_t* backend, const pw_backend_launch_t* launch);
pw_status_t pw_sim__launch_checked(pw_sim__backend_t* backend, const pw_backend_launch_t* launch);
void pw_sim__launch_refused(pw_sim__backend_t* backend, const pw_backend_launch_t* launch);
/* Runs one completion's callback (done_timed with [begin, end] when set;
 * |timed| false: NULL timing), as a done callback of |backend| finishing
 * at |end| (the launch time of what it launches, with a latency). */
void pw_sim__call_done(pw_sim__backend_t* backend, pw_backend_done_fn_t done,
                       pw_backend_done_timed_fn_t done_timed, void* user, pw_status_t status,
                       bool timed, uint64_t begin, uint64_t end);
/* The same, with |busy| (timing v2 busy_ns: the device time summed over
 * the devices a lane's completion covers; 0 for one device). */
void pw_sim__call_done_busy(pw_sim__backend_t* backend, pw_backend_done_fn_t done,
                            pw_backend_done_timed_fn_t done_timed, void* user, pw_status_t status,
                            bool timed, uint64_t begin, uint64_t end, uint64_t busy);

/* host.c: the vtable's launch_host, and the lane records' free (destroy,
 * nothing in flight). */
pw_status_t pw_sim__launch_host(void* self, const pw_backend_host_launch_t* launch);
void pw_sim__lanes_free(pw_sim__backend_t* backend);

#define PW_SIM__NO_DEVICE UINT32_MAX

/* UNAVAILABLE for an op of |device| lost because |failed_device| failed at
 * |fail_at| (|device| PW_SIM__NO_DEVICE: a collective's message). */
pw_status_t pw_sim__unavailable(pw_sim__backend_t* backend, uint32_t device, uint64_t fail_at,
                                const char* op, uint64_t gang_id, uint32_t failed_device);
/* A new part for |launch| (a reference to its executable; a queue slot
 * reserved in queued modes). */
pw_status_t pw_sim__part_new(pw_sim__backend_t* backend, const pw_backend_launch_t* launch,
                             pw_sim__part_t** out_part);
/* Frees a part never handed out, returning its queue slot. */
void pw_sim__part_discard(pw_sim__backend_t* backend, pw_sim__part_t* part);
/* Hands a decided part to its done: now (INLINE) or through the queue. */
void pw_sim__complete(pw_sim__backend_t* backend, pw_sim__part_t* part);

/* collective.c: a collective part arriving at time |ready| (inputs and
 * host time; the device's timeline is applied inside). */
pw_status_t pw_sim__launch_collective(pw_sim__backend_t* backend,
                                      const pw_backend_launch_t* launch, uint64_t ready);
/* A launch refused by validation: if it was a collective part, its gang
 * fails (ABORTED) instead of waiting for it. */
void pw_sim__collective_refused(pw_sim__backend_t* backend, const pw_backend_launch_t* launch);

/* A new group for |launch|'s gang, priced for its devices; and its free. */
pw_status_t pw_sim__group_new(pw_sim__backend_t* backend, const pw_backend_launch_t* launch,
                              pw_sim__group_t** out_group);
void pw_sim__group_free(pw_sim__backend_t* backend, pw_sim__group_t* group);
/* all_reduce_sum's data effect over a complete group. */
void pw_sim__all_reduce(pw_sim__group_t* group);
/* When the first of |g|'s devices fails that fails the group ending at
 * |end| (a device failed before its part started, or before the end),
 * and which one (|*out_device|, left as it is when none does:
 * PW_SIM_TIME_NEVER). */
/* The ABORTED status of a refused part of collective launch |l| (one of
 * this backend's collective executables), else NULL: nothing to fail. */
pw_status_t pw_sim__refusal_status(pw_sim__backend_t* b, const pw_backend_launch_t* l);
uint64_t pw_sim__group_first_failure(pw_sim__backend_t* b, const pw_sim__group_t* g,
                                     uint64_t end, uint32_t* out_device);

/* Fails every pending collective whose group contains |device| (marked
 * failed NOW at |fail_at|): its parts complete UNAVAILABLE. */
void pw_sim__groups_device_failed(pw_sim__backend_t* backend, uint32_t device,
                                  uint64_t fail_at);
/* Completes every pending collective part with CANCELLED (destroy). */
void pw_sim__groups_shutdown(pw_sim__backend_t* backend);

/* Folds a decided completion of |part| into its device (timeline, trace
 * chain, counters, device time from |begin|; PW_SIM_TIME_NEVER: none) —
 * at delivery time. */
void pw_sim__account(pw_sim__backend_t* backend, uint32_t device, uint64_t begin,
                     uint64_t time, pw_sim_event_kind_t kind, uint64_t gang_id);
/* Adds [begin, end) to |d|'s device time; its lock held. */
static inline void pw_sim__busy(pw_sim__device_t* d, uint64_t begin, uint64_t end) {
  if (begin > end) begin = end;
  d->busy_ns += end - begin;
  if (begin < d->first_start) d->first_start = begin;
  if (end > d->last_end) d->last_end = end;
}
/* The host time a launch is issued at: the host clock, or (with a
 * dispatch latency) the completion whose done callback is launching. */
uint64_t pw_sim__launch_time(pw_sim__backend_t* backend);
/* Runs the trace callback (if any) then |done|, then frees |part|. */
void pw_sim__deliver(pw_sim__backend_t* backend, pw_sim__part_t* part);
/* What a launch on one device (not a collective) got: its start and
 * completion time, and whether the device's failure (at |fail_at|)
 * caught it. */
typedef struct pw_sim__decision_t {
  uint64_t start, time, fail_at;
  bool failed;
} pw_sim__decision_t;
/* Decides |l|'s times on |d| (its lock held) from |ready|, and folds it
 * into the device's timeline, trace chain and busy time. */
void pw_sim__decide_locked(pw_sim__device_t* d, const pw_backend_launch_t* l, uint64_t ready,
                           pw_sim__decision_t* out);
/* The rest of a decided launch, with no lock held: the latest time, the
 * failure status (returned) or the data effects and output readiness,
 * and the trace event. */
pw_status_t pw_sim__decided(pw_sim__backend_t* b, const pw_backend_launch_t* l,
                            const pw_sim__decision_t* c);
/* True while the calling thread runs a done callback of a sim backend. */
bool pw_sim__in_done_callback(void);
/* Frees a part that was never delivered (its status too). */
void pw_sim__part_free(pw_sim__backend_t* backend, pw_sim__part_t* part);

/*---------------------------------------------------------------------------
 * Ordered devices (stream.c)
 *-------------------------------------------------------------------------*/

/* A device's queue of accepted launches, in queue order. */
struct pw_sim__stream_t {
  pw_sim__part_t* head;     /* oldest not yet released */
  pw_sim__part_t* tail;
  pw_sim__part_t* next;     /* first not yet decided */
  pw_sim__part_t* waiting;  /* the collective it is blocked in (blocking) */
  uint32_t outstanding;     /* accepted, done not yet called */
  uint32_t dirty_next;      /* the dirty stack (UINT32_MAX: end) */
  bool dirty;
  bool in_heap;             /* a released part not yet delivered (queued modes) */
};

pw_status_t pw_sim__streams_init(pw_sim__backend_t* backend);
/* The launch path of ordered devices, after validation. */
pw_status_t pw_sim__stream_launch(pw_sim__backend_t* backend, const pw_backend_launch_t* launch,
                                  uint64_t issue);
/* An ordered launch refused by validation (its gang fails, as
 * pw_sim__collective_refused). */
void pw_sim__stream_refused(pw_sim__backend_t* backend, const pw_backend_launch_t* launch);
/* Called by delivery for an ordered part, before its done runs. */
void pw_sim__stream_delivered(pw_sim__backend_t* backend, pw_sim__part_t* part);
/* pw_sim__groups_device_failed for ordered devices. */
void pw_sim__stream_device_failed(pw_sim__backend_t* backend, uint32_t device,
                                  uint64_t fail_at);
/* Destroy: every part not yet released completes CANCELLED; frees. */
void pw_sim__streams_shutdown(pw_sim__backend_t* backend);
/* One device's outstanding count and blocking gang (0: none). */
void pw_sim__stream_state(pw_sim__backend_t* backend, uint32_t device, uint32_t* out_outstanding,
                          uint64_t* out_waiting_gang);

/*---------------------------------------------------------------------------
 * Event queue (queue.c)
 *-------------------------------------------------------------------------*/

pw_status_t pw_sim__queue_init(pw_sim__backend_t* backend);
/* Stops the simulator thread (after it drained the queue) or cancels what
 * is queued (MANUAL), and frees the heap. */
void pw_sim__queue_shutdown(pw_sim__backend_t* backend);
/* Reserves one heap slot for a part to be pushed later. */
pw_status_t pw_sim__queue_reserve(pw_sim__backend_t* backend);
void pw_sim__queue_unreserve(pw_sim__backend_t* backend);
/* Pushes |part| (its time decided) into a reserved slot; wakes the
 * simulator thread. */
void pw_sim__queue_push(pw_sim__backend_t* backend, pw_sim__part_t* part);
/* Queued plus being delivered. */
uint64_t pw_sim__queue_length(pw_sim__backend_t* backend);
/* Zeroed memory for a part: a reused one, else the allocator's. */
pw_status_t pw_sim__part_alloc(pw_sim__backend_t* backend, pw_sim__part_t** out_part);
/* Returns |part|'s memory (its status and executable already dropped). */
void pw_sim__part_recycle(pw_sim__backend_t* backend, pw_sim__part_t* part);
/* Frees the reuse list; later parts go straight to the allocator. */
void pw_sim__parts_shutdown(pw_sim__backend_t* backend);
/* True when the calling thread is the simulator thread of |backend|. */
bool pw_sim__queue_is_sim_thread(pw_sim__backend_t* backend);

/* The v6 accumulate method (accumulate.c). */
pw_status_t pw_sim__accumulate(void* self, uint32_t device, pw_dtype_t dtype,
                               pw_backend_memory_t dst, size_t dst_offset,
                               pw_backend_memory_t src, size_t src_offset, size_t count);

#endif /* PW_BACKENDS_SIM_SIM_INTERNAL_H_ */
