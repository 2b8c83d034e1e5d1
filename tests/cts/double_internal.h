/* Internal to the test-double backend (double_*.c): its data structures and
 * the functions its source files share. Includes only the public plugin
 * header, like any out-of-tree backend. */
#ifndef PW_TESTS_CTS_DOUBLE_INTERNAL_H_
#define PW_TESTS_CTS_DOUBLE_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>

#include "cts/double_backend.h"

#define PW_DOUBLE_BACKEND_MAGIC 0x4B424450u /* "PDBK" */
#define PW_DOUBLE_EXECUTABLE_MAGIC 0x58454450u /* "PDEX" */
#define PW_DOUBLE_MEMORY_MAGIC 0x4D454450u /* "PDEM" */
/* Poisoned gang ids remembered: the newest PW_DOUBLE_POISON_SLOTS (a ring),
 * looked up through an open-addressing table of 4x as many slots rebuilt
 * from the ring every PW_DOUBLE_POISON_SLOTS / 2 insertions (so it also
 * holds some older ids until then: a poisoned gang never un-poisons
 * early). Large enough that a part whose thread was descheduled for a long
 * while still finds its gang poisoned under heavy fault injection. */
#define PW_DOUBLE_POISON_SLOTS 16384
#define PW_DOUBLE_POISON_TABLE (4 * PW_DOUBLE_POISON_SLOTS)
/* Longest program or options text compile accepts. */
#define PW_DOUBLE_MAX_TEXT (64u * 1024u)

typedef enum pw_double_op_e {
  PW_DOUBLE_OP_NOOP = 0,
  PW_DOUBLE_OP_COPY = 1,
  PW_DOUBLE_OP_FILL = 2,
  PW_DOUBLE_OP_FAIL = 3,
  PW_DOUBLE_OP_ALL_REDUCE_SUM = 4,
} pw_double_op_t;

/* Inputs, and separately outputs, a program may have (past the
 * signature's fixed arrays: load hands the runtime v2 pointers). */
#define PW_DOUBLE_MAX_PARAMS 4096

/* A parsed program: the operation, its argument and its signature (whose
 * mesh is the one it was compiled for). Up to PW_BACKEND_MAX_PARAMS of
 * each role, the specs are in the signature's fixed arrays; with more,
 * every spec is in |wide| (inputs then outputs, wide_inputs + wide_outputs
 * of them, from |allocator|: pw_double_program_free). Read them through
 * pw_double_input / pw_double_output. */
typedef struct pw_double_program_t {
  pw_double_op_t op;
  uint32_t arg; /* fill byte or fail code */
  pw_executable_signature_t signature;
  pw_backend_param_t* wide;
  uint32_t wide_inputs;
  uint32_t wide_outputs;
  pw_allocator_t allocator;
} pw_double_program_t;

static inline pw_backend_param_t* pw_double_input(pw_double_program_t* p, uint32_t i) {
  return p->wide != NULL ? &p->wide[i] : &p->signature.inputs[i];
}
static inline pw_backend_param_t* pw_double_output(pw_double_program_t* p, uint32_t i) {
  return p->wide != NULL ? &p->wide[p->wide_inputs + i] : &p->signature.outputs[i];
}
static inline const pw_backend_param_t* pw_double_input_c(const pw_double_program_t* p,
                                                          uint32_t i) {
  return p->wide != NULL ? &p->wide[i] : &p->signature.inputs[i];
}
static inline const pw_backend_param_t* pw_double_output_c(const pw_double_program_t* p,
                                                           uint32_t i) {
  return p->wide != NULL ? &p->wide[p->wide_inputs + i] : &p->signature.outputs[i];
}

/* A loaded executable (a pw_backend_executable_t). */
typedef struct pw_double_executable_t {
  uint32_t magic;
  uint32_t group_size; /* devices of the mesh */
  pw_double_program_t program;
} pw_double_executable_t;

/* Device memory (a pw_backend_memory_t): header plus the bytes. */
typedef struct pw_double_memory_t {
  uint32_t magic;
  uint32_t device;
  size_t size;
  unsigned char data[];
} pw_double_memory_t;

/* One accepted launch, from launch until its done has returned. */
typedef struct pw_double_job_t {
  struct pw_double_job_t* next;      /* queue link */
  struct pw_double_job_t* gang_next; /* collective rendezvous chain */
  const pw_double_executable_t* executable;
  uint32_t device;
  uint32_t mesh_index;
  uint32_t group_size;
  uint32_t arrived; /* head of a rendezvous chain: parts arrived */
  uint64_t gang_id;
  uint32_t input_count;
  uint32_t output_count;
  /* input_count / output_count entries, in the job's allocation after
   * group_devices. */
  pw_double_memory_t** inputs;
  pw_double_memory_t** outputs;
  pw_backend_done_fn_t done;
  void* done_user;
  pw_status_code_t injected; /* fail at completion with this, or OK */
  size_t alloc_size;
  uint32_t group_devices[]; /* copied for collectives only */
} pw_double_job_t;

/* A FIFO of jobs, with its own lock. */
typedef struct pw_double_queue_t {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  pw_double_job_t* head;
  pw_double_job_t* tail;
  bool stop;
  bool paused;
} pw_double_queue_t;

typedef struct pw_double_worker_t {
  pw_double_backend_t* d;
  pw_double_queue_t queue;
  pthread_t thread;
  bool started;
} pw_double_worker_t;

/* A cache line of its own (at least): devices launched by different
 * threads do not share one. */
typedef struct pw_double_device_t {
  _Alignas(64) _Atomic int health;
  _Atomic int in_collective;  /* blocking_collectives: a part is pending */
  _Atomic uint64_t launches;
  _Atomic uint64_t rejected;
  _Atomic uint64_t completed_ok;
  _Atomic uint64_t completed_error;
  _Atomic uint64_t used_bytes;
  pthread_mutex_t order_mutex;
  uint64_t* order;
  size_t order_count;
} pw_double_device_t;

/* One host's counters (launch_host). */
typedef struct pw_double_host_t {
  _Alignas(64) _Atomic uint64_t launches;
  _Atomic uint64_t rejected;
  _Atomic uint64_t parts; /* no-op mode: device parts of its host launches */
} pw_double_host_t;

struct pw_double_backend_s {
  uint32_t magic;
  pw_double_options_t options; /* resolved: defaults applied */
  pw_allocator_t allocator;
  pw_double_device_t* devices;
  pw_double_host_t* hosts;
  uint32_t host_count;
  pw_double_worker_t* workers; /* THREADED only */
  pw_double_queue_t deferred;  /* DEFERRED only */

  pthread_mutex_t idle_mutex;
  pthread_cond_t idle_cond;
  uint64_t in_flight;

  /* Nth-launch injection: the attempt number that fails, 0 if none. */
  _Atomic uint64_t attempts;
  _Atomic uint64_t fail_attempt;
  pthread_mutex_t inject_mutex;
  pw_status_code_t fail_code;
  pw_double_fail_mode_t fail_mode;

  /* Collective rendezvous: heads of incomplete gangs, and the ids of gangs
   * known to be unable to complete (a part was rejected). */
  pthread_mutex_t gang_mutex;
  pw_double_job_t* gangs;
  uint64_t poisoned[PW_DOUBLE_POISON_SLOTS];
  uint32_t poisoned_next;
  uint32_t poisoned_used;
  uint64_t poison_table[PW_DOUBLE_POISON_TABLE]; /* 0: empty */
  uint32_t poison_inserts;                       /* since the last rebuild */

  _Atomic size_t live_allocations;
  _Atomic size_t live_executables;
  unsigned char no_op_memory; /* what no-op allocations point at */
};

/* --- double_program.c --- */

/* Parses |size| bytes of program text for |mesh|. INVALID_ARGUMENT naming
 * the line on any error. */
/* |allocator| holds the wide specs (pw_double_program_free frees them,
 * on failure too). */
pw_status_t pw_double_program_parse(const char* text, size_t size,
                                    const pw_mesh_shape_t* mesh, pw_allocator_t allocator,
                                    pw_double_program_t* out_program);
void pw_double_program_free(pw_double_program_t* program);

/* Serializes |program| compiled with |options| into executable bytes
 * allocated from |allocator|. */
pw_status_t pw_double_program_serialize(const pw_double_program_t* program,
                                        const char* options,
                                        pw_allocator_t allocator,
                                        void** out_bytes, size_t* out_size);

/* Checks and parses executable bytes (see the header for the errors). */
pw_status_t pw_double_program_deserialize(const void* bytes, size_t size,
                                          pw_allocator_t allocator,
                                          pw_double_program_t* out_program);

/* --- double_exec.c --- */

/* The launch method. */
pw_status_t pw_double_launch(void* self, const pw_backend_launch_t* launch);
/* Starts the helper threads of a THREADED backend. */
pw_status_t pw_double_exec_start(pw_double_backend_t* d);
/* Stops and joins the helper threads, running what is queued, and fails
 * any collective still waiting for parts (CANCELLED). */
void pw_double_exec_stop(pw_double_backend_t* d);
/* Fails the pending collectives of gangs that include |device|. */
void pw_double_exec_abort_device(pw_double_backend_t* d, uint32_t device);

/* Checks |l| as launch does (struct, device, executable, gang fields,
 * parameters); INVALID_ARGUMENT naming the culprit. Counts nothing. */
pw_status_t pw_double_launch_check(pw_double_backend_t* d, const pw_backend_launch_t* l);
/* Claims a pending Nth-launch injection for one launch attempt: its code
 * (and |*out_mode|), or OK. */
pw_status_code_t pw_double_claim_injection(pw_double_backend_t* d,
                                           pw_double_fail_mode_t* out_mode);
/* A collective part of gang |l| was refused: poisons the gang so its other
 * parts do not wait (no-op for other programs). */
void pw_double_refuse_part(pw_double_backend_t* d, const pw_backend_launch_t* l);
/* Allocates the job of checked launch |l|, completing through |done| /
 * |done_user| instead of l's, failing with |injected| unless OK. */
pw_status_t pw_double_job_make(pw_double_backend_t* d, const pw_backend_launch_t* l,
                               pw_status_code_t injected, pw_backend_done_fn_t done,
                               void* done_user, pw_double_job_t** out_job);
/* Counts |job| as accepted on its device and runs or queues it per the
 * completion mode. |job| may be gone when this returns. */
void pw_double_job_submit(pw_double_backend_t* d, pw_double_job_t* job, uint64_t gang_id);
/* Frees a job never submitted. */
void pw_double_job_free(pw_double_backend_t* d, pw_double_job_t* job);

/* --- double_host.c --- */

/* The host of |device| (options.devices_per_host). */
static inline uint32_t pw_double_host_of(const pw_double_backend_t* d, uint32_t device) {
  return d->options.devices_per_host == 0 ? 0 : device / d->options.devices_per_host;
}
/* The launch_host method. */
pw_status_t pw_double_launch_host(void* self, const pw_backend_host_launch_t* launch);

/* Queue helpers (mutex/cond initialised by the caller). */
void pw_double_queue_push(pw_double_queue_t* queue, pw_double_job_t* job);

#endif /* PW_TESTS_CTS_DOUBLE_INTERNAL_H_ */
