/* Internal to lib/sched (and the runtime that allocates them): the
 * dispatch state of a physical device, the completion tokens its launches
 * and copies use, and a client's queue on a slice (the scheduler window).
 * Not installed. */
#ifndef PW_SCHED_DEVICE_H_
#define PW_SCHED_DEVICE_H_

#include "core/objects.h"
#include "pathways/backend.h"

/* The completion of one backend launch or one transport copy. The
 * dispatcher hands the plugin the token's address plus the generation of
 * its current use (low 6 bits: tokens are 64-byte aligned) as |done_user|;
 * |state| holds that generation and a completed bit, claimed by a CAS by
 * the first completion (done, or an error return). A second completion
 * of the same use, or a stale one of an earlier use, fails the CAS and is
 * reported instead of acted on (lib/sched/dispatch.c). Tokens live with
 * their device, so a plugin that completes late never touches freed
 * memory: a launch takes the next of PW_DEVICE_TOKENS tokens in turn, a
 * transfer part its copies' tokens from one of two halves of the
 * device's copy tokens; a stale completion is told apart until its token
 * has been reused PW_TOKEN_GENERATIONS times. */
typedef struct pw_completion_token_s {
  _Alignas(64) pw_atomic_u32_t state; /* generation << 1 | completed */
  uint32_t generation;                /* of the current use (driver thread) */
  struct pw_device_s* device;
  /* Launch tokens: the op of the current use (a queued launch completes
   * apart from its device's cursor, lib/sched/queued.c; read before the
   * claim, which then says whether it was this use's), when it launched
   * (queued, charging), and when the watchdog fails it (0: no deadline;
   * lib/sched/watchdog.c). */
  pw_atomic_ptr_t op;
  pw_atomic_u64_t launched_ns;
  pw_atomic_u64_t deadline;
  bool queued;                        /* one of the device's queue tokens */
  /* While observed (lib/sched/report.c): when a use launched, and which:
   * launch time << 6 | generation. Read before the claim (a queued token
   * may be rearmed after it), so atomic. */
  pw_atomic_u64_t observed;
} pw_completion_token_t;

#define PW_DEVICE_TOKENS 4
#define PW_TOKEN_GENERATIONS 64

/* Copy tokens of a device, kept until the runtime goes: a bigger part
 * gets a new chunk and the old ones stay for late completions. */
typedef struct pw_token_chunk_s {
  struct pw_token_chunk_s* next;
  uint32_t count;
  pw_completion_token_t tokens[];
} pw_token_chunk_t;

/* Dispatch state of one unit of dispatch of a physical slice: a device,
 * or with host launch a lane of |lane_size| devices of one host, mesh
 * indices mesh_index .. mesh_index + lane_size - 1 (backend ordinals
 * backend_device ..; lib/sched/lanes.c). Below, "device" means the unit.
 * The device follows its slice's sequence with |cursor| (a tagged op
 * pointer, see lib/sched/dispatch.c). The launch argument arrays are
 * embedded: a device runs one op at a time, so they stay valid from
 * launch until the backend calls done. */
typedef struct pw_device_s {
  pw_atomic_ptr_t cursor;
  struct pw_slice_s* slice;
  uint32_t mesh_index;
  uint32_t backend_device;
  uint32_t lane_size;      /* 1: a device, launched with launch */
  /* Trampoline: the device is queued as a work item (launch or done). */
  struct pw_device_s* work_next;
  uint32_t work_kind;
  struct pw_op_s* running;
  pw_status_t done_status;
  pw_time_t launch_ns;     /* when |running| launched (charging policies) */
  /* Transfer ops: copies of this device's part still running (plus a
   * guard while they are issued), and the first error. */
  pw_atomic_u32_t transfer_pending;
  pw_atomic_ptr_t transfer_status;
  /* A transfer that adds up partial sums (pw_plan_op_t.reduce > 1): the
   * scratch shards of the part's lane_size devices, from its launch until
   * its last copy is done and accumulated (transfer.c); NULL otherwise. */
  pw_backend_memory_t* reduce_scratch;
  uint64_t observed_ns;    /* while observed: when the part started (report.c) */
  pw_backend_launch_t launch;
  /* Launch completions: tokens[launch_seq % PW_DEVICE_TOKENS] is the
   * current launch's. Written by the thread driving the device. */
  uint32_t launch_seq;
  /* Transfer copies: |copy_capacity| tokens per half of |copy_chunk|'s
   * (the newest chunk; older ones follow it), the half in use, and the
   * current part's tokens. */
  uint32_t copy_capacity;
  uint32_t copy_half;
  uint32_t copy_count;
  pw_token_chunk_t* copy_chunk;
  pw_completion_token_t* copy_tokens;
  pw_completion_token_t tokens[PW_DEVICE_TOKENS];
  /* The launch descriptors' argument arrays (|launch|: inputs, outputs;
   * |host_launch|: lane_inputs, lane_outputs), arg_capacity entries each:
   * the inline ones below (PW_BACKEND_MAX_PARAMS) until an op with more
   * arguments comes, then one heap block (pw__device_grow_args, kept
   * until the slice goes). Written by the driving thread only. */
  pw_backend_memory_t* inputs;
  pw_backend_memory_t* outputs;
  const pw_backend_memory_t** lane_inputs;
  const pw_backend_memory_t** lane_outputs;
  uint32_t arg_capacity;
  void* arg_block;           /* the heap block, or NULL */
  /* A launch slot of the debug mode without gang order (unordered.c,
   * records in the execution block): never grows its arguments. */
  bool fixed_args;
  /* Device time a backend reported for |running| (done_timed), over the
   * unit's devices, else UINT64_MAX: the host's launch-to-done time is
   * charged, once per device. */
  uint64_t reported_ns;
  /* Queue-ordered launch (lib/sched/queued.c; queue_depth 0: off). The
   * device's launches outstanding, plus one while a launch waits for a
   * slot (parked: the completion that frees one relaunches it, with
   * |queue_slot_held| set); its queue tokens (queue_depth of them) and
   * the last launch's queue_seq (the driving thread's). */
  uint32_t queue_depth;
  bool queue_slot_held;
  pw_atomic_u32_t queue_outstanding;
  /* 1 while the device waits at a host op for its queue to drain: the
   * completion that empties the queue relaunches it (host_task.c). */
  pw_atomic_u32_t host_drain_wait;
  uint64_t queue_seq;
  pw_completion_token_t* queue_tokens;
  /* When the device last finished a queued launch (host clock; charging
   * without reported device time: a launch is charged from the later of
   * its launch and this). */
  pw_atomic_u64_t queue_free_ns;
  /* A lane's launch_host descriptor and its per-input and per-output
   * shard-array pointers (into the buffers' own arrays, lanes.c). */
  pw_backend_host_launch_t host_launch;
  pw_backend_memory_t inline_inputs[PW_BACKEND_MAX_PARAMS];
  pw_backend_memory_t inline_outputs[PW_BACKEND_MAX_PARAMS];
  const pw_backend_memory_t* inline_lane_inputs[PW_BACKEND_MAX_PARAMS];
  const pw_backend_memory_t* inline_lane_outputs[PW_BACKEND_MAX_PARAMS];
} pw_device_t;

/* Makes |d|'s argument arrays hold |need| entries each (a bigger heap
 * block, the descriptors repointed); RESOURCE_EXHAUSTED naming the device
 * when that fails. Only between launches of |d| (its descriptors' arrays
 * are read until done runs, or during a queued launch's call). */
pw_status_t pw__device_grow_args(pw_device_t* d, uint32_t need);
/* Frees the heap block of pw__device_grow_args, if any, and points the
 * arrays at the inline ones (also their first setting: launch init). */
void pw__device_free_args(pw_device_t* d);

/* A client's queue and accounting on one slice. One cache line or more
 * each (the array is allocated aligned): threads driving different slices
 * do not share one. */
typedef struct pw_sched_entry_s {
  _Alignas(PW_CACHE_LINE) pw_client_t* client;
  struct pw_op_s* head;        /* queued ops, FIFO (holder) */
  struct pw_op_s* tail;
  uint32_t queued;
  bool active;
  bool blocked;                /* head is a spanning op this slice picked */
  /* On the client's order_waiters stack: the head waits for the client's
   * earlier ops on other slices to be admitted. */
  pw_atomic_u32_t order_waiting;
  struct pw_sched_entry_s* order_next;
  struct pw_sched_entry_s* active_next; /* slice->sched_active, both ways */
  struct pw_sched_entry_s* active_prev;
  uint64_t scratch[2];         /* policy state */
  pw_atomic_u64_t pending_charge_ns; /* device time not yet charged */
  pw_atomic_u64_t ops_completed;
  pw_atomic_u64_t device_ns;
} pw_sched_entry_t;

#endif /* PW_SCHED_DEVICE_H_ */
