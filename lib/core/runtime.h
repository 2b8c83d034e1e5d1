/* Internal: the runtime and its slices, as every module of the library
 * sees them (lib/core). The runtime owns the backends, the physical slices
 * and the configuration the dispatcher reads (policy, window, transport).
 * A slice is a mesh of one backend's devices; its sequence and window
 * words (from append_lock on) are lib/sched's, which alone reads and
 * writes them, and its device states (|devices|) are lib/sched's
 * pw_device_t (sched/device.h). Not installed. */
#ifndef PW_CORE_RUNTIME_H_
#define PW_CORE_RUNTIME_H_

#include <pthread.h>
#include "base/atomics.h"
#include "pathways/runtime.h"
#include "pathways/scheduler.h"
#include "pathways/transport.h"

struct pw_op_s;
struct pw_device_s;
struct pw_sched_entry_s;
struct pw_workers_s;

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
  /* Failure (lib/sched/health.c), read at every launch: a physical
   * slice's 1 while it is lost, a composite's count of its lost parts;
   * and how many times it (a composite: any of its parts) was lost, which
   * buffers and virtual slices remember to tell that they outlived a
   * loss. Both written under runtime->lock. */
  pw_atomic_u32_t lost;
  pw_atomic_u32_t losses;
  uint32_t host;
  uint32_t first_device;
  /* Queue-ordered launch: the depth every device of the slice takes
   * (the least they report), 0 when one of them does not or the runtime
   * turned it off (lib/sched/queued.c). */
  uint32_t queue_depth;
  /* Host launch (lib/sched/lanes.c): the backend's launch_host when the
   * slice's devices are grouped into lanes of one host, else NULL; and
   * the units of dispatch: lane_count entries of |devices| (each a lane
   * of consecutive devices of one host, or one device). For a composite,
   * the sum over its parts. */
  pw_status_t (*launch_host)(void* self, const pw_backend_host_launch_t* launch);
  uint32_t lane_count;
  struct pw_device_s* devices;       /* lane_count units of dispatch, mesh order */
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
   * several physical slices, see lib/runtime/vslice.c) has span_count > 1 and
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
  /* Physical, while lost (lib/sched/health.c, under its change lock):
   * why (owned), and whether its devices' health said so (it then comes
   * back when they recover; otherwise when the host restores it). */
  pw_status_t lost_cause;
  bool lost_by_health;
} pw_slice_t;

/* Handle ids (layout in lib/core/handles.c): kind:4 | runtime salt:10 |
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
  /* Client tags and the runtime's salt (lib/core/handles.c), under
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
  /* Some run had a launch deadline (set before its ops can launch, never
   * cleared): until then launches leave their tokens' deadlines alone
   * (lib/sched/watchdog.c). */
  pw_atomic_u32_t deadlines_used;
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
  /* Launch deadlines (pw_runtime_options_t): the default of every
   * submission (0: none), how long pw_client_destroy waits for launches
   * before it fails them, and the watchdog that enforces both
   * (lib/sched/watchdog.c; started by the first launch with a deadline). */
  uint64_t launch_deadline_ns;
  uint64_t drain_deadline_ns;
  pw_atomic_ptr_t watchdog;    /* struct pw_watchdog_s*, NULL until started */
  pthread_mutex_t watchdog_lock;
  /* The threads that run host ops (struct pw_host_pool_s*,
   * lib/sched/host_task.c), NULL until the first one runs. */
  pw_atomic_ptr_t host_pool;
  /* The thread that runs asynchronous host transfers (struct
   * pw_host_xfer_s*, lib/runtime/host_xfer.c), NULL until the first. */
  pw_atomic_ptr_t host_xfer;
  /* Queue-ordered launch turned off (pw_runtime_options_t). */
  bool no_queued_launch;
  bool no_host_launch; /* host launch turned off: one launch per device */
  /* Failure (pw_runtime_options_t v5; lib/sched/health.c): the health
   * thread's state (made at create), its polling period (0: none),
   * whether a missed launch deadline loses the slice, and the grace
   * given to a lost slice's outstanding launches. */
  struct pw_health_s* health;
  uint64_t health_poll_ns;
  bool deadline_loses_slice;
  uint64_t loss_grace_ns;
  /* Observers (lib/observe/observe.h): the hub, made at create, and the
   * same pointer published here only while a trace or the metrics are
   * on; NULL otherwise, which is all the hot path reads. */
  struct pw_observe_s* observer;
  pw_atomic_ptr_t observe;
};

#endif /* PW_CORE_RUNTIME_H_ */
