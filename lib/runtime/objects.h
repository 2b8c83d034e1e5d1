/* Internal: the runtime's object model, shared by lib/runtime (facade,
 * handles, buffers, executables), lib/graph (builder and plan) and
 * lib/sched (dispatch). Not installed.
 *
 * Ownership summary
 *   runtime  owns backends, physical slices and their device states.
 *   client   owns a handle table; each slot holds one reference to an
 *            object (vslice, executable, buffer, graph).
 *   objects  are refcounted (pw_atomic_u32_t refs) and freed with the
 *            runtime's allocator when the last reference goes.
 *   execution holds references to the buffers it reads and writes and to
 *            its graph's plan until all its ops have completed.
 */
#ifndef PW_RUNTIME_OBJECTS_H_
#define PW_RUNTIME_OBJECTS_H_

#include <pthread.h>

#include "base/atomics.h"
#include "event/event_internal.h"
#include "pathways/buffer.h"
#include "pathways/executable.h"
#include "pathways/graph.h"
#include "pathways/runtime.h"

struct pw_op_s;
struct pw_execution_s;
struct pw_slice_s;

/* ---- physical topology and dispatch state ------------------------------- */

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

/* Dispatch state of one physical device. The device follows its slice's
 * sequence with |cursor| (a tagged op pointer, see lib/sched/dispatch.c).
 * The launch argument arrays are embedded: a device runs one op at a time,
 * so they stay valid from launch until the backend calls done. */
typedef struct pw_device_s {
  pw_atomic_ptr_t cursor;
  struct pw_slice_s* slice;
  uint32_t mesh_index;
  uint32_t backend_device;
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
  pw_backend_memory_t inputs[PW_BACKEND_MAX_PARAMS];
  pw_backend_memory_t outputs[PW_BACKEND_MAX_PARAMS];
} pw_device_t;

typedef struct pw_slice_s {
  pw_runtime_t* runtime;
  uint32_t index;
  char name[64];
  pw_mesh_shape_t mesh;
  uint32_t device_count;
  uint32_t backend_index;
  const pw_backend_t* backend;
  /* The backend's launch method if its vtable has one (checked once when
   * the slice is made: vtables do not change), else NULL and launches go
   * through the checked shim, which names what is missing. */
  pw_status_t (*launch)(void* self, const pw_backend_launch_t* launch);
  uint32_t host;
  uint32_t first_device;
  pw_device_t* devices;       /* device_count, mesh order */
  uint32_t* group_devices;    /* backend ordinals in mesh order */
  /* Slice sequence. Appenders exchange |tail|; append_lock is taken only
   * by spanning appends and, with a scheduler window, by admissions
   * (never by a device or backend thread; lib/sched/dispatch.c). From
   * here on the fields are written per submission: a line of their own,
   * so that threads submitting to neighbouring slices do not share one
   * (slice arrays are allocated aligned to a cache line). */
  _Alignas(PW_CACHE_LINE) pthread_mutex_t append_lock;
  /* Last appended op (struct pw_op_s*); the slice holds a reference on
   * its execution. Bit 0 (PW_TAIL_PINNED, lib/sched/dispatch.c) set while
   * a destroyed client's destroy looks at the tail; |tail_pin| then says
   * which of it and an appender that took the tail meanwhile drops that
   * reference. */
  pw_atomic_ptr_t tail;
  pw_atomic_u32_t tail_pin;
  /* Gang scheduler (only with a window; see lib/sched/dispatch.c). The
   * admitting thread holds |sched_state|'s BUSY bit and alone touches
   * |sched_active|. */
  pw_atomic_u32_t sched_state;        /* BUSY | PENDING */
  pw_atomic_ptr_t sched_incoming;     /* ops submitted, not yet queued */
  pw_atomic_u32_t sched_admitted;     /* admitted, not yet completed */
  /* Backlogged clients, in the order they became backlogged (holder;
   * |sched_active_tail| is the last, NULL when there are none). */
  struct pw_sched_entry_s* sched_active;
  struct pw_sched_entry_s* sched_active_tail;
  /* Resource manager (runtime->lock). */
  uint32_t bound_vslices;
  /* Spanning: a composite slice (the binding of a virtual slice that spans
   * several physical slices, see lib/runtime/span.c) has span_count > 1 and
   * span[] its physical slices in ascending index order, which is also mesh
   * order: part p holds mesh indices [p * n, (p + 1) * n) with n =
   * device_count / span_count. Its |index| is span[0]'s (its "home": the
   * slice whose scheduler admits its ops). A composite owns no device
   * states and no sequence: each of its ops is appended to every part's
   * sequence at once, under the parts' append locks taken in index order,
   * so two ops that share slices are in the same order on all of them.
   * A physical slice has span_count 1 and span == &self. */
  uint32_t span_count;
  struct pw_slice_s** span;
  /* Composite only: physical slice index -> position in span[] (for the
   * runtime's slices; UINT32_MAX for those not in it). */
  uint32_t* span_position;
  struct pw_slice_s* self;
  struct pw_slice_s* composite_next;  /* runtime->composites (runtime->lock) */
} pw_slice_t;

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

struct pw_workers_s;

/* Handle ids (layout in lib/runtime/handles.c): kind:4 | runtime salt:10 |
 * client tag:12 | generation:16 | slot+1:22. Salt and tag together are
 * the owner field, compared at once. */
#define PW_HANDLE_KIND_SHIFT 60
#define PW_HANDLE_OWNER_SHIFT 38
#define PW_HANDLE_OWNER_MASK 0x3FFFFFu
#define PW_HANDLE_TAG_BITS 12
#define PW_HANDLE_GENERATION_SHIFT 22
#define PW_HANDLE_GENERATION_MAX 0xFFFFu
#define PW_HANDLE_SLOT_MASK 0x3FFFFFu
#define PW_HANDLE_SLOTS_MAX PW_HANDLE_SLOT_MASK /* slot + 1 fits the field */
#define PW_HANDLE_TAGS_MAX 4095u  /* live clients per runtime */
#define PW_HANDLE_SALTS_MAX 1023u /* runtimes with clients per process */

struct pw_runtime_s {
  pw_allocator_t allocator;
  pw_logger_t logger;
  uint32_t worker_count;
  struct pw_workers_s* workers;  /* NULL when worker_count is 0 */
  pw_backend_t* backends;
  uint32_t backend_count;
  pw_slice_t* slices;
  uint32_t slice_count;
  /* Composite slices made so far, one per distinct set of physical slices
   * (interned, so that two virtual slices over the same set share one);
   * they live as long as the runtime. Under |lock|. */
  pw_slice_t* composites;
  pthread_mutex_t lock;         /* clients, vslice bindings */
  uint32_t client_count;
  /* Client tags and the runtime's salt (lib/runtime/handles.c), under
   * |lock|: the next tag to try, the tags of live clients (bit t), and
   * the salt in every id of this runtime's handles (0 until its first
   * client takes one; given back when the runtime is freed). */
  uint32_t next_client_tag;
  uint32_t handle_salt;
  uint64_t live_client_tags[PW_HANDLE_TAGS_MAX / 64 + 1];
  /* Clients created and not destroyed (|lock|): pw_runtime_destroy names
   * them when it refuses. */
  struct pw_client_s* clients;
  /* Client structs not freed yet: a destroyed client's struct lives until
   * its last execution block goes (a thread completing its last run may
   * still be releasing it). pw_runtime_destroy waits for 0. */
  pw_atomic_u32_t client_structs;
  /* Taken by every submission: on a line of its own, so that it does not
   * evict the fields every launch reads from other threads' caches. */
  /* Unique per runtime created in this process (never 0): keys the gang-id
   * ranges threads keep (lib/sched/dispatch.c). */
  uint64_t serial;
  _Alignas(PW_CACHE_LINE) pw_atomic_u64_t next_gang_id;
  _Alignas(PW_CACHE_LINE) pw_sched_policy_t sched_policy;
  uint32_t sched_window;       /* 0: ops enter at submit (no policy) */
  bool sched_charge;           /* measure device time per op */
  bool no_gang_order;          /* debug: ignore slice sequences */
  /* Compilation cache (lib/cache, pw_runtime_set_compile_cache), borrowed;
   * NULL: compile directly. Zero from calloc at create. */
  pw_atomic_ptr_t compile_cache;
  pw_transport_t transport;     /* owned; moves shards for transfer ops */
  /* Its copy method if the vtable has one (checked once: vtables do not
   * change), else NULL and copies go through the checked shim, which
   * names what is missing. The dispatcher calls it directly with the
   * descriptors it builds. */
  pw_status_t (*transport_copy)(void* self, const pw_transport_copy_t* copy);
  /* The transport's copy_strided when it has one, else NULL: transfers
   * then issue one copy per row. */
  pw_status_t (*transport_copy_strided)(void* self, const pw_transport_copy_t* copy);
  pw_atomic_u64_t next_plan_id; /* pw_plan_t.id */
};

/* Returns the composite slice over |parts| (|count| >= 2 distinct physical
 * slices of one backend with equal device counts, ascending index), making
 * it on first use. Called with runtime->lock held. lib/runtime/vslice.c. */
pw_status_t pw__slice_composite(pw_runtime_t* runtime, pw_slice_t* const* parts,
                                uint32_t count, pw_slice_t** out_slice);
/* Frees the runtime's composite slices (at destroy). */
void pw__slice_composites_free(pw_runtime_t* runtime);

/* ---- handles ------------------------------------------------------------ */

/* Per-thread stripes: what threads update on every submission into one
 * client (its handle lock's reader counts, its reference and in-flight
 * counts, gang id ranges) is split into this many cache lines, and a
 * thread uses stripe pw__thread_stripe(): the one of the CPU it runs on
 * (only a placement hint: two threads on one stripe are still correct,
 * and a caller gives back on the stripe it took). lib/runtime/handles.c. */
#define PW_THREAD_STRIPES 8
uint32_t pw__thread_stripe(void);

typedef enum pw_object_kind_e {
  PW_OBJECT_VSLICE = 1,
  PW_OBJECT_EXECUTABLE = 2,
  PW_OBJECT_BUFFER = 3,
  PW_OBJECT_GRAPH = 4,
} pw_object_kind_t;

/* Common header of every handle-table object. */
typedef struct pw_object_s {
  pw_atomic_u32_t refs;
  pw_object_kind_t kind;
  pw_runtime_t* runtime;
  void (*destroy)(struct pw_object_s* object);
} pw_object_t;

void pw__object_init(pw_object_t* object, pw_object_kind_t kind,
                     pw_runtime_t* runtime, void (*destroy)(pw_object_t*));
void pw__object_retain(pw_object_t* object);
void pw__object_release(pw_object_t* object);

typedef struct pw_handle_slot_s {
  pw_object_t* object;     /* NULL when free or retired */
  uint32_t generation;     /* 1..PW_HANDLE_GENERATION_MAX */
  uint32_t next_free;
} pw_handle_slot_t;

/* The handle table's lock is a reader-striped one: a lookup (the common
 * case, several per submission) counts itself in its thread's stripe, on
 * a cache line of its own, so that threads submitting into one client do
 * not bounce one lock word; a writer (insert, remove) sets |writer| and
 * waits for every stripe to drain. See lib/runtime/handles.c. */
#define PW_HANDLE_STRIPES PW_THREAD_STRIPES

typedef struct pw_handle_table_s {
  struct {
    _Alignas(PW_CACHE_LINE) pw_atomic_u32_t readers;
  } stripes[PW_HANDLE_STRIPES];
  _Alignas(PW_CACHE_LINE) pw_atomic_u32_t writer; /* 1 while a writer holds the table */
  pthread_mutex_t write_lock; /* writers; readers that met |writer| wait on it */
  pw_handle_slot_t* slots;
  uint32_t capacity;
  uint32_t count;
  uint32_t free_head;      /* UINT32_MAX = none */
  uint32_t live;
} pw_handle_table_t;

/* Decoded-graph memo (lib/graph_format/graph_codec.c): canonical key of a
 * decoded file plus its bindings -> handle id of the graph made from it.
 * Weak (ids, not references): a hit needs the handle to be live. Embedded
 * in the client and zero from calloc (|lock| 0 = free, a spinlock). */
#define PW_GRAPH_MEMO_SLOTS 16
typedef struct pw_graph_memo_s {
  pw_atomic_u32_t lock;
  uint32_t tick;
  struct {
    uint64_t key[2];
    uint64_t graph_id;     /* 0 = empty slot */
    const void* graph;     /* identity check only, never dereferenced */
    uint32_t last_use;
  } slots[PW_GRAPH_MEMO_SLOTS];
} pw_graph_memo_t;

#define PW_BLOCK_CACHE_SLOTS 8

/* One stripe of a client's per-submission state (see pw_client_s). */
typedef struct pw_client_stripe_s {
  _Alignas(PW_CACHE_LINE) pw_atomic_u64_t counts;
} pw_client_stripe_t;

struct pw_client_s {
  pw_runtime_t* runtime;
  /* In runtime->clients (runtime->lock) from create to destroy. */
  struct pw_client_s* runtime_prev;
  struct pw_client_s* runtime_next;
  char name[64];
  uint32_t tag;            /* 12-bit client tag, unique among the runtime's live clients */
  uint32_t handle_owner;   /* salt << 12 | tag: the owner field of its handle ids */
  uint32_t weight;
  int32_t priority;
  pw_handle_table_t handles;
  pw_sched_entry_t* sched_entries; /* one per physical slice */
  /* Per thread stripe (clients are allocated aligned to a cache line):
   *   counts  bits 0..31   executions submitted from this stripe and in
   *                        flight (pw_client_destroy waits for all stripes
   *                        to reach 0);
   *           bits 32..62  their references to the struct: one per
   *                        execution whose block has not gone back yet, so
   *                        the struct (and its lock) outlives
   *                        pw_client_destroy until the last completing
   *                        thread has stopped touching it;
   *           bit 63       PW_CLIENT_FOLDED: pw_client_destroy moved the
   *                        stripe's references to |refs|; a release that
   *                        finds it set drops one there instead.
   * An execution uses the stripe of the thread that submitted it, even
   * when another thread completes it. */
  pw_client_stripe_t stripes[PW_THREAD_STRIPES];
  /* The owner's reference, plus the stripes' once folded; the last one
   * frees the struct. */
  _Alignas(PW_CACHE_LINE) pw_atomic_u32_t refs;
  /* Threads waiting for in-flight to reach 0 (registered under idle_lock,
   * written by waiters only): a completer that brings its stripe to 0
   * fences and reads it, and takes the lock to wake them only when there
   * are. */
  pw_atomic_u32_t idle_waiters;
  _Alignas(PW_CACHE_LINE) pthread_mutex_t idle_lock;
  pthread_cond_t idle_cond;
  pw_graph_memo_t graph_memo;
  /* Scheduler window only: a client's ops enter the slice sequences in the
   * order it submitted them (submit_seq numbers them, admit_next is the
   * next to admit), so no op is admitted before an op it may depend on.
   * Slices whose head op waits for its turn park their entry on
   * |order_waiters|; admitting an op wakes them. See lib/sched/dispatch.c. */
  pw_atomic_u64_t submit_seq;
  pw_atomic_u64_t admit_next;
  pw_atomic_ptr_t order_waiters;
  /* Execution blocks of this client's finished executions, kept for reuse
   * (a resubmitted graph finds its block still laid out from the previous
   * run, and a big one does not fault in fresh pages); lock-free slots,
   * one per cache line so that submitters of different graphs do not
   * share one; emptied and closed at pw_client_destroy, since cached
   * blocks hold device memory. See lib/sched/dispatch.c. */
  struct {
    _Alignas(PW_CACHE_LINE) pw_atomic_ptr_t block;
  } block_cache[PW_BLOCK_CACHE_SLOTS];
  _Alignas(PW_CACHE_LINE) pw_atomic_u32_t blocks_closed; /* 1 from pw_client_destroy on */
  /* Armed graphs alive (pw_graph_exec_create), under |execs_lock|:
   * pw_client_destroy destroys those left. */
  pthread_mutex_t execs_lock;
  struct pw_graph_exec_s* execs;
};

/* An armed graph (pw_graph_exec_t, include/pathways/graph.h): the graph
 * and its plan, held for its lifetime, and private execution blocks that
 * its runs use instead of the client's cache (lib/sched/armed.c). */
#define PW_GRAPH_EXEC_BLOCKS 2
struct pw_execution_s;

/* One private block of an armed graph and the count of its runs. A
 * private run touches neither the client's in-flight counts nor its
 * per-slice op counts (locked instructions on words every run of the
 * client shares): it is counted here, by plain stores, as the slot has
 * one writer at a time. The armed graph's user submits (|submitted|); the
 * thread completing the slot's current run stores |counted| before its
 * done event and |finished| after it, as its last touch of the run. A
 * slot is reused only once |finished| caught up, so the next run's
 * completer comes after this one. pw_client_wait_idle, pw_client_slice_stats
 * and pw__dispatch_exec_destroy read them (lib/sched/armed.c). */
typedef struct pw_graph_exec_slot_s {
  /* NULL until first used. Free for the next submission when its
   * references are all gone (refs == PW_EXECUTION_PRIVATE) and its last
   * run finished. Set and read by the armed graph's user only. */
  _Alignas(64) pw_atomic_ptr_t block;
  pw_atomic_u64_t submitted;
  pw_atomic_u64_t counted;  /* runs in the op counts (pw_client_slice_stats) */
  pw_atomic_u64_t finished; /* runs through their completion */
} pw_graph_exec_slot_t;

typedef struct pw_graph_exec_s {
  pw_graph_exec_slot_t slots[PW_GRAPH_EXEC_BLOCKS];
  pw_client_t* client;
  pw_object_t* graph; /* retained */
  const struct pw_plan_s* plan;
  uint32_t next_block;
  /* Its runs in shared blocks (both private ones were busy) not complete
   * yet: pw_graph_exec_destroy waits for them too. */
  pw_atomic_u32_t shared_runs;
  struct pw_graph_exec_s* prev;
  struct pw_graph_exec_s* next;
} pw_graph_exec_obj_t;

#define PW_CLIENT_REF (UINT64_C(1) << 32)
#define PW_CLIENT_FOLDED (UINT64_C(1) << 63)

/* A new execution submitted from |stripe|: one reference, one in flight. */
static inline void pw__client_begin(pw_client_t* client, uint32_t stripe) {
  pw_atomic_fetch_add_u64(&client->stripes[stripe].counts, PW_CLIENT_REF + 1);
}
/* An execution of |stripe| completed: no longer in flight (wakes idle
 * waiters). Its reference stays. lib/runtime/client.c. */
void pw__client_end(pw_client_t* client, uint32_t stripe);
/* Drops an execution's reference (taken on |stripe|). */
void pw__client_release_stripe(pw_client_t* client, uint32_t stripe);
/* Drops one reference to |client|'s struct; the last one frees it. */
void pw__client_release(pw_client_t* client);
/* Whether this thread runs inside a dispatch frame (lib/sched): the
 * runtime is running plugin code (a backend's launch or done, a
 * transport's copy or its completion) or callbacks on it. */
bool pw__dispatch_running(void);
/* Whether this thread is inside a callback the runtime is running (an
 * event callback, or plugin code called from the dispatcher): destroy
 * functions that wait for work refuse to run there (FAILED_PRECONDITION),
 * since the work may need this thread to return first. */
static inline bool pw__in_callback(void) {
  return pw__event_callback_depth() != 0 || pw__dispatch_running();
}
/* Frees the execution blocks |client| keeps for reuse (lib/sched). */
void pw__dispatch_client_deinit(pw_client_t* client);
/* At pw_client_destroy, once nothing is in flight: frees the cached
 * blocks (and their device memory) on the destroying thread, and makes
 * the cache take no more (lib/sched). */
void pw__dispatch_client_close(pw_client_t* client);

/* Adds |object| to |client|'s table, taking over one reference (on failure
 * the reference is released). */
pw_status_t pw__handle_insert(pw_client_t* client, pw_object_t* object,
                              uint64_t* out_id);
/* Looks up |id| of |kind| and returns a new reference. |what| names the
 * argument in errors ("buffer", "args[2]"). */
pw_status_t pw__handle_lookup(pw_client_t* client, uint64_t id,
                              pw_object_kind_t kind, const char* what,
                              pw_object_t** out_object);
/* As pw__handle_lookup, for a caller that holds the table's read lock
 * (pw__handle_read_lock) and so resolves several ids in one section: no
 * reference is taken, the object stays alive until the lock is released
 * (retain it to keep it longer). */
pw_status_t pw__handle_peek(pw_client_t* client, uint64_t id, pw_object_kind_t kind,
                            const char* what, pw_object_t** out_object);
/* Removes |id| and releases the table's reference. A slot whose
 * generation would wrap is retired instead of freed. */
pw_status_t pw__handle_remove(pw_client_t* client, uint64_t id,
                              pw_object_kind_t kind, const char* what);
/* Gives |client| a tag no live client of its runtime has (skipping those
 * in use; RESOURCE_EXHAUSTED when all are) and its handle owner field,
 * taking the runtime's salt first if it has none. Called with
 * runtime->lock held. */
pw_status_t pw__handle_owner_take(pw_client_t* client);
/* Gives |client|'s tag back (runtime->lock held), once its table is gone. */
void pw__handle_owner_give(pw_client_t* client);
/* Gives |runtime|'s salt back to the process (at its end; no-op for 0). */
void pw__handle_salt_give(pw_runtime_t* runtime);
void pw__handle_table_init(pw_handle_table_t* table);
/* Shared (read-only) access to |table|'s slots: returns the stripe to pass
 * to pw__handle_read_unlock. Exclusive access: pw__handle_write_lock. */
uint32_t pw__handle_read_lock(pw_handle_table_t* table);
void pw__handle_read_unlock(pw_handle_table_t* table, uint32_t stripe);
void pw__handle_write_lock(pw_handle_table_t* table);
void pw__handle_write_unlock(pw_handle_table_t* table);
/* Releases every remaining object and frees the table. */
void pw__handle_table_deinit(pw_handle_table_t* table, pw_allocator_t allocator);

/* ---- objects ------------------------------------------------------------ */

typedef struct pw_vslice_obj_s {
  pw_object_t header;
  pw_slice_t* slice;       /* binding: a physical or a composite slice */
  pw_mesh_shape_t mesh;    /* as asked; same device count as the slice */
  pw_client_t* client;
} pw_vslice_obj_t;

typedef struct pw_executable_obj_s {
  pw_object_t header;
  const pw_backend_t* backend;
  pw_backend_executable_t loaded;
  pw_executable_signature_t signature;
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
} pw_buffer_obj_t;

/* A buffer of |spec| on |vslice| without shards yet. |total_bytes| and
 * |shard_bytes| come from pw_array_spec_byte_sizes (a plan computes them
 * once, at lowering). */
pw_status_t pw__buffer_create(pw_vslice_obj_t* vslice, const pw_array_spec_t* spec,
                              size_t total_bytes, size_t shard_bytes,
                              pw_buffer_obj_t** out_buffer);

/* ---- graph plan --------------------------------------------------------- */

/* Where a compute input comes from. */
typedef struct pw_plan_input_s {
  int32_t param;       /* parameter index, or -1 */
  int32_t op;          /* producing op index, or -1 */
  uint32_t output;     /* output index of the producing op */
} pw_plan_input_t;

/* The copies of a transfer from the shard of source mesh index
 * |src_index| to the shard of destination mesh index |dst_index|: rows of
 * |size| bytes, the first at |src_offset| / |dst_offset|, repeated along
 * |stride_count| levels (outer first; pw_transport_copy_t's v2 fields say
 * how). One record per pair of intersecting shards, whatever the number
 * of rows: the transport (or, for one without copy_strided, the
 * dispatcher) walks the rows. */
typedef struct pw_plan_copy_s {
  uint32_t src_index;
  uint32_t dst_index;
  uint32_t stride_count;
  size_t src_offset;
  size_t dst_offset;
  size_t size;
  pw_transport_stride_t strides[PW_TRANSPORT_MAX_STRIDES];
} pw_plan_copy_t;

typedef enum pw_plan_op_kind_e {
  PW_PLAN_COMPUTE = 0,
  PW_PLAN_TRANSFER = 1,  /* moves input 0 onto |vslice| with |transfer_spec| */
} pw_plan_op_kind_t;

/* Computes the copies of a transfer from |src| over |src_mesh| to |dst|
 * (same dtype and shape) over |dst_mesh|: |*out_copies| sorted by
 * destination index, |*out_start| (dst device count + 1 entries) indexing
 * them by destination. Both allocated from |allocator| (copies may be NULL
 * when there are none). lib/graph/reshard.c. */
pw_status_t pw__reshard_plan(pw_allocator_t allocator, const pw_array_spec_t* src,
                             const pw_mesh_shape_t* src_mesh, const pw_array_spec_t* dst,
                             const pw_mesh_shape_t* dst_mesh, pw_plan_copy_t** out_copies,
                             uint32_t* out_count, uint32_t** out_start);

typedef struct pw_plan_op_s {
  pw_plan_op_kind_t kind;
  uint32_t node;                   /* graph node id, for messages */
  const char* name;                /* points into the graph's storage */
  pw_executable_obj_t* executable; /* retained by the graph */
  pw_vslice_obj_t* vslice;         /* retained by the graph */
  uint32_t input_count;
  /* input_count entries, in the plan's storage (one array for all ops:
   * an inline array of PW_BACKEND_MAX_PARAMS made every op 200 bytes
   * bigger, and big graphs' build time was page faults). */
  const pw_plan_input_t* inputs;
  uint32_t output_count;
  /* Bit k: output k is a graph output (it gets a buffer object with a
   * ready event and a handle); other outputs are internal values that live
   * in the execution block and die with it. */
  uint32_t external_outputs;
  uint32_t static_deps;            /* distinct producing ops among inputs */
  uint32_t successor_count;
  uint32_t* successors;            /* op indices, one per distinct consumer
                                      (in the plan's storage) */
  /* PW_PLAN_TRANSFER only (executable is NULL). */
  /* The output, on |vslice|; points into the graph's storage (a spec is
   * 96 bytes, and most ops are not transfers). */
  const pw_array_spec_t* transfer_spec;
  pw_plan_copy_t* copies;
  uint32_t copy_count;
  uint32_t* copy_start;            /* per destination mesh index, + 1 */
} pw_plan_op_t;

/* The head of what the dispatcher derives from a plan (lib/sched/plan.c):
 * how to free it. */
typedef struct pw_plan_dispatch_header_s {
  void (*release)(struct pw_plan_dispatch_header_s* data);
} pw_plan_dispatch_header_t;

typedef struct pw_plan_output_s {
  int32_t param;   /* graph output is a parameter, or -1 */
  int32_t op;
  uint32_t output;
} pw_plan_output_t;

typedef struct pw_plan_s {
  uint32_t param_count;
  pw_array_spec_t* param_specs;
  pw_vslice_obj_t** param_vslices;
  uint32_t op_count;               /* in topological order */
  pw_plan_op_t* ops;
  uint32_t output_count;
  pw_plan_output_t* outputs;
  uint32_t edge_count;
  /* The dispatcher's data for this plan (a pw_plan_dispatch_header_t *),
   * derived and published once by its first submission (lib/sched/plan.c),
   * NULL before; freed with the plan (pw__plan_release_dispatch). */
  pw_atomic_ptr_t dispatch_data;
  /* The one allocation that holds ops, their inputs and successors,
   * outputs, param_specs and param_vslices (lib/graph/graph.c). */
  void* storage;
  size_t storage_size;
  /* Chunks that hold every transfer op's copies and copy_start (newest
   * first; lib/graph/graph.c), or NULL. */
  void* copy_arena;
} pw_plan_t;

/* Returns the graph's plan, finalizing it if needed; the graph object is
 * retained by the caller and the plan lives as long as the graph. */
struct pw_graph_obj_s;
pw_status_t pw__graph_plan(pw_client_t* client, struct pw_graph_obj_s* graph,
                           const pw_plan_t** out_plan);

/* Frees the dispatcher's data of |plan| (if a submission derived it), by
 * the destructor it carries: the plan's owner calls nothing in lib/sched. */
static inline void pw__plan_release_dispatch(pw_plan_t* plan) {
  pw_plan_dispatch_header_t* data = pw_atomic_load_ptr_acquire(&plan->dispatch_data);
  if (data == NULL) return;
  pw_atomic_store_ptr_relaxed(&plan->dispatch_data, NULL);
  data->release(data);
}

/* ---- dispatch (lib/sched) ----------------------------------------------- */

/* Instantiates |plan| with |args| (already validated, references owned by
 * the caller) and enqueues it. Fills |outputs| with new buffer objects (one
 * reference each for the caller) and |*out_done| with a retained event
 * (|out_done| NULL: the run has no done event at all; its outputs' ready
 * events still carry its errors).
 * |graph_ref| is a reference to the graph owning |plan| that the execution
 * takes over on success (on failure the caller keeps it). With |armed|
 * (then |graph_ref| is NULL and |plan| is armed->plan) the execution runs
 * in one of the armed graph's private blocks if one is free, else in a
 * shared block with its own reference on armed->graph. */
pw_status_t pw__dispatch_submit(pw_client_t* client, const pw_plan_t* plan,
                                pw_object_t* graph_ref, pw_graph_exec_obj_t* armed,
                                pw_buffer_obj_t* const* args,
                                pw_buffer_obj_t** outputs, pw_event_t** out_done);

/* Links a new armed graph into its client's list / takes it out, waits
 * for its runs and gives its blocks up (lib/sched/armed.c). */
void pw__dispatch_exec_register(pw_graph_exec_obj_t* armed);
void pw__dispatch_exec_destroy(pw_graph_exec_obj_t* armed);
/* Runs of |client|'s armed graphs in their private blocks not finished
 * yet (they are not in the client's in-flight counts), and their ops
 * counted on physical slice |slice| (not in its sched entries until their
 * armed graph is destroyed). Take execs_lock. */
uint64_t pw__dispatch_private_inflight(pw_client_t* client);
uint64_t pw__dispatch_private_ops(pw_client_t* client, uint32_t slice);
/* One step of a polling wait on a cold path: a yield for the first 64
 * |spins|, then 50 us sleeps for about 10 ms, then 1 ms sleeps. */
void pw__dispatch_backoff(uint32_t spins);

/* Initialises/destroys the dispatch state of |slice|. */
pw_status_t pw__dispatch_slice_init(pw_slice_t* slice);
void pw__dispatch_slice_deinit(pw_slice_t* slice);
/* Releases the execution that |slice|'s tail keeps alive. The runtime does
 * it for every slice before deinitialising any: the last release of a
 * client's execution frees the client's cached blocks, which give back
 * device memory on the slices of their internal values. */
void pw__dispatch_slice_drop_tail(pw_slice_t* slice);

#endif /* PW_RUNTIME_OBJECTS_H_ */
