/* libpathways: the runtime, its topology, clients and virtual slices.
 *
 * A pw_runtime_t is the controller: it owns the backends it is given and a
 * topology of physical slices (each a mesh of devices of one backend). A
 * pw_client_t is one job/tenant; every handle it creates (virtual slices,
 * executables, buffers, graphs) belongs to it and is rejected by any other
 * client. Client handles are checked ids (runtime, client, kind, slot,
 * generation), not pointers, and what their slot holds is checked too: a
 * handle of the wrong kind (forged kind bits included) is INVALID_ARGUMENT,
 * one of another client or another runtime PERMISSION_DENIED, a released
 * or unknown one NOT_FOUND; each message names the call or argument, the
 * handle (0x%016llx) and its kind. Never a crash, never another object.
 *
 * Thread-safety: all functions may be called concurrently from any thread,
 * except the destroy functions (nothing else may use the object then).
 */
#ifndef PATHWAYS_RUNTIME_H_
#define PATHWAYS_RUNTIME_H_

#include "pathways/allocator.h"
#include "pathways/clock.h"
#include "pathways/api.h"
#include "pathways/backend.h"
#include "pathways/log.h"
#include "pathways/scheduler.h"
#include "pathways/transport.h"
#include "pathways/status.h"
#include "pathways/types.h"

PW_EXTERN_C_BEGIN

typedef struct pw_runtime_s pw_runtime_t;
typedef struct pw_client_s pw_client_t;

/* A virtual slice of one client: a mesh the client asked for, bound by the
 * resource manager to a physical slice. */
typedef struct pw_vslice_t {
  uint64_t id;
} pw_vslice_t;

/* One physical slice in the runtime options. */
typedef struct pw_slice_desc_t {
  const char* name;       /* for messages and queries; copied. NULL = "slice<i>" */
  pw_mesh_shape_t mesh;   /* e.g. 2x4 */
  uint32_t backend;       /* index into pw_runtime_options_t.backends */
  uint32_t first_device;  /* backend ordinal of mesh index 0; the slice uses
                             ordinals first_device .. first_device + n - 1 */
  uint32_t host;          /* host id, for topology queries */
} pw_slice_desc_t;

typedef struct pw_runtime_options_t {
  size_t struct_size;        /* sizeof(pw_runtime_options_t) */
  pw_allocator_t allocator;  /* zero = pw_allocator_system() */
  pw_logger_t logger;        /* zero = pw_logger_default() */
  /* Host threads for runtime-side host work that spreads over devices:
   * today the per-device shard copies of large host transfers (buffers of
   * 256 KiB and more) run on them in parallel. 0 = on the calling thread.
   * At most 256. Devices never get a thread each; dispatch runs on the
   * threads that complete work. */
  uint32_t worker_count;
  /* Backends the runtime takes ownership of (it destroys them, also when
   * create fails). */
  const pw_backend_t* backends;
  uint32_t backend_count;
  const pw_slice_desc_t* slices;
  uint32_t slice_count;
  /* -- v2 fields start here (read only when struct_size covers them) -- */
  /* Gang scheduling policy of every slice; zero = FIFO. */
  pw_sched_policy_t sched_policy;
  /* Ops of a slice admitted into its sequence but unfinished, at most; the
   * rest wait in per-client queues for the policy. 0 = unlimited (ops
   * enter at submit, in submission order; the policy is not consulted). */
  uint32_t sched_window;
  /* Debug switch (tests only): launch each op on each device as soon as
   * its inputs are ready, ignoring the slice sequence. Breaks the gang
   * order guarantee on purpose, to show what it prevents. */
  bool debug_disable_gang_order;
  /* Moves shards for transfer nodes; the runtime takes ownership (and
   * destroys it, also when create fails). Zero = the bundled in-process
   * transport (copies through the backends' host access, inline). */
  pw_transport_t transport;
  /* -- v3 fields start here -- */
  /* Queue-ordered launch (include/pathways/backend.h) is used on every
   * slice whose backend offers it; true turns it off (every device then
   * runs one launch at a time, as with a v1 backend: to compare). */
  bool disable_queued_launch;
  /* A launch that has not completed this long after it was handed to
   * its backend fails with DEADLINE_EXCEEDED, naming slice, device and
   * node (a watchdog thread enforces it, within about a tenth of the
   * deadline); 0: no deadline. A submission may set its own
   * (pw_submission_t). */
  uint64_t launch_deadline_ns;
  /* How long pw_client_destroy waits for launches the backend has not
   * completed before it fails them (DEADLINE_EXCEEDED, logged) and
   * finishes; 0: 30 s. UINT64_MAX: wait without limit. */
  uint64_t drain_deadline_ns;
  /* -- v4 fields start here -- */
  /* Host launch (include/pathways/backend.h) is used on every slice whose
   * backend offers launch_host and whose devices share hosts; true turns
   * it off (one launch per device: to compare). */
  bool disable_host_launch;
  /* -- v5 fields start here -- */
  /* Slice health (see "Failure" below). Every this many nanoseconds a
   * health thread asks the backends for the health of every device: a
   * slice with a FAILED device is marked lost, a slice lost that way
   * whose devices all answer HEALTHY or DEGRADED again comes back. 0: no
   * polling; a slice is then lost when one of its launches fails with
   * UNAVAILABLE and a device reports FAILED, or by pw_runtime_lose_slice,
   * and checked again by pw_runtime_check_health. At least 100 us. */
  uint64_t health_poll_ns;
  /* A launch that misses its launch deadline also marks its slice lost
   * (the watchdog is then a failure detector: a backend that lost a
   * launch has lost its device). False: only the launch fails. */
  bool deadline_loses_slice;
  /* After a slice is lost, how long the runtime waits for its backend to
   * complete the launches that were outstanding there before it fails
   * them with UNAVAILABLE itself; 0: 1 s. */
  uint64_t loss_grace_ns;
} pw_runtime_options_t;

#define PW_RUNTIME_OPTIONS_SIZE_V1 PW_STRUCT_SIZE(pw_runtime_options_t, slice_count)
#define PW_RUNTIME_OPTIONS_SIZE_V2 PW_STRUCT_SIZE(pw_runtime_options_t, transport)
#define PW_RUNTIME_OPTIONS_SIZE_V3 PW_STRUCT_SIZE(pw_runtime_options_t, drain_deadline_ns)
#define PW_RUNTIME_OPTIONS_SIZE_V4 PW_STRUCT_SIZE(pw_runtime_options_t, disable_host_launch)
#define PW_RUNTIME_OPTIONS_SIZE_V5 PW_STRUCT_SIZE(pw_runtime_options_t, loss_grace_ns)

/* Creates a runtime. Validates the topology: backends (vtable size, name),
 * meshes, device ranges inside each backend, no device in two slices. On
 * failure every backend in |options| has been destroyed. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_runtime_create(
    const pw_runtime_options_t* options, pw_runtime_t** out_runtime);

/* Destroys |runtime| and the backends and transport it owns. NULL is a
 * no-op (OK). Refuses, leaving the runtime untouched and usable, with
 * FAILED_PRECONDITION when a client is still alive (the message names
 * them: destroy them first, then call this again) or when called from
 * inside a callback the runtime is running (an event callback, or plugin
 * code the dispatcher called). Destroyed clients leave no work behind
 * (pw_client_destroy waits for it); this call also waits for threads that
 * complete their last runs to let go of them, so nothing touches the
 * runtime once it returns OK. Ignoring the result is safe only when no
 * client can be alive: a refusal leaks the runtime and the status. */
PW_API pw_status_t pw_runtime_destroy(pw_runtime_t* runtime);

/* Whether a physical slice takes work (see "Failure" below). */
typedef enum pw_slice_state_e {
  PW_SLICE_ONLINE = 0,
  PW_SLICE_LOST = 1,
} pw_slice_state_t;

PW_API const char* pw_slice_state_name(pw_slice_state_t state);

/* Out-structs of the topology queries: the caller sets struct_size; the
 * runtime fills only the fields it covers. */
typedef struct pw_slice_info_t {
  size_t struct_size;          /* set by the caller: sizeof(pw_slice_info_t) */
  char name[64];
  pw_mesh_shape_t mesh;
  uint32_t device_count;
  uint32_t host;
  char backend[32];            /* backend name */
  pw_device_health_t health;   /* worst health among its devices */
  uint32_t bound_vslices;      /* virtual slices currently bound to it */
  /* -- v2 fields start here -- */
  pw_slice_state_t state;
  uint32_t losses;             /* times it was lost since the runtime began */
} pw_slice_info_t;

#define PW_SLICE_INFO_SIZE_V1 PW_STRUCT_SIZE(pw_slice_info_t, bound_vslices)
#define PW_SLICE_INFO_SIZE_V2 PW_STRUCT_SIZE(pw_slice_info_t, losses)

typedef struct pw_device_info_t {
  size_t struct_size;          /* set by the caller: sizeof(pw_device_info_t) */
  uint32_t slice;
  uint32_t mesh_index;
  uint32_t backend_device;     /* ordinal inside the backend */
  uint32_t host;
  uint64_t memory_bytes;
  pw_device_health_t health;
  char kind[32];
} pw_device_info_t;

#define PW_DEVICE_INFO_SIZE_V1 PW_STRUCT_SIZE(pw_device_info_t, kind)

PW_API uint32_t pw_runtime_slice_count(const pw_runtime_t* runtime);
/* OUT_OF_RANGE for a bad |slice|. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_runtime_slice_info(
    pw_runtime_t* runtime, uint32_t slice, pw_slice_info_t* out_info);
PW_API PW_MUST_USE_RESULT pw_status_t pw_runtime_device_info(
    pw_runtime_t* runtime, uint32_t slice, uint32_t mesh_index,
    pw_device_info_t* out_info);

/* ---- Failure ----------------------------------------------------------
 *
 * A physical slice is LOST when the runtime learns that a device of it
 * failed: a launch there completes with UNAVAILABLE and the backend's
 * health says FAILED for one of its devices, the health thread finds a
 * FAILED device (health_poll_ns), a launch misses its deadline
 * (deadline_loses_slice), or the host says so (pw_runtime_lose_slice: a
 * detector of its own, a lost host). Then, within a bounded time:
 *   - nothing more is launched there: every op that reaches a device of
 *     the slice resolves with UNAVAILABLE naming the slice, and a gang op
 *     spanning it resolves on its other slices' devices with ABORTED
 *     (they would wait in the gang for the lost part);
 *   - launches outstanding there complete as the backend fails them, or,
 *     loss_grace_ns after the loss, with UNAVAILABLE from the runtime;
 *   - every op that reads their outputs fails with their status, and
 *     every buffer whose shards lived on the slice is lost: reading it
 *     (pw_buffer_to_host), passing it to a submission or transferring it
 *     off the slice is DATA_LOSS naming the slice (the memory is gone even
 *     if the slice comes back);
 *   - no new virtual slice binds to it, and the virtual slices bound to
 *     it say so (pw_vslice_info);
 *   - every client with a topology callback is told (PW_TOPOLOGY_SLICE_LOST).
 * Work on other slices is untouched. A slice lost through its devices'
 * health comes back (PW_TOPOLOGY_SLICE_BACK) when every device reports
 * HEALTHY or DEGRADED again at a health check; one lost by the host or
 * the watchdog, when the host calls pw_runtime_restore_slice. Buffers
 * made before the loss stay lost. */

typedef enum pw_topology_change_e {
  PW_TOPOLOGY_SLICE_LOST = 1,
  PW_TOPOLOGY_SLICE_BACK = 2,
} pw_topology_change_t;

PW_API const char* pw_topology_change_name(pw_topology_change_t change);

/* One change, as a topology callback receives it (valid during the call). */
typedef struct pw_topology_event_t {
  size_t struct_size;          /* sizeof(pw_topology_event_t) of the runtime */
  pw_topology_change_t change;
  uint32_t slice;              /* physical slice index */
  const char* slice_name;
  uint32_t losses;             /* the slice's count of losses, this one included */
  /* LOST: why (the failed launch's status, the device the health check
   * found FAILED, the host's reason). Borrowed. NULL for BACK. */
  pw_status_t cause;
  uint64_t time_ns;            /* pw_clock_now() when the runtime saw it */
} pw_topology_event_t;

#define PW_TOPOLOGY_EVENT_SIZE_V1 PW_STRUCT_SIZE(pw_topology_event_t, time_ns)

/* Called once per change of any slice, in the order they happened, on the
 * runtime's health thread (never on the thread that detected the change,
 * so that a callback may submit work, wait for it, create virtual slices
 * and query the topology). It must not destroy its client or the runtime;
 * a callback that blocks delays the later events of every client. */
typedef void (*pw_topology_fn_t)(void* user, const pw_topology_event_t* event);

/* Sets (fn NULL: clears) |client|'s topology callback. Changes from now on
 * are delivered; a change already queued may be delivered too. When the
 * call returns after clearing, or pw_client_destroy returns, no delivery
 * to the old callback is running or will run. FAILED_PRECONDITION when
 * called from the client's own callback to clear it (the wait would never
 * end). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_client_set_topology_callback(pw_client_t* client,
                                                                      pw_topology_fn_t fn,
                                                                      void* user);

/* Asks the backends for every device's health now and applies it (slices
 * with a FAILED device lost, slices lost by health whose devices are all
 * usable back). |out_changes| (may be NULL): how many slices changed.
 * Events go out on the health thread as usual. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_runtime_check_health(pw_runtime_t* runtime,
                                                              uint32_t* out_changes);

/* Marks physical slice |slice| lost for |reason| (copied into the cause,
 * UNAVAILABLE), as if its devices had failed. OK and nothing happens when
 * it is lost already. OUT_OF_RANGE for a bad index, INVALID_ARGUMENT for
 * a NULL runtime. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_runtime_lose_slice(pw_runtime_t* runtime,
                                                            uint32_t slice,
                                                            const char* reason);

/* Brings lost slice |slice| back online. FAILED_PRECONDITION, naming the
 * device, while a device of it reports FAILED; OK when it is online. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_runtime_restore_slice(pw_runtime_t* runtime,
                                                               uint32_t slice);

/* pw_dump_line_fn_t (one line of a dump) is in pathways/log.h. */

/* What every device of every slice is doing, one line each (after a line
 * per slice): the op its cursor is at (node, name, gang, client), in
 * which state (waiting for how many of its inputs, launched and not
 * completed, idle), and the launches it has outstanding in its queue. A
 * lane (host launch) is one line naming its devices. Only for a runtime
 * that is stuck (nothing completing): it reads other threads' state
 * without stopping them, and an op that retires while it is read may
 * already be gone. INVALID_ARGUMENT for NULL arguments. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_runtime_dump(pw_runtime_t* runtime,
                                                      pw_dump_line_fn_t fn, void* user);

/* Per-client accounting on one slice, for tests and monitoring (the caller
 * sets struct_size). */
typedef struct pw_client_slice_stats_t {
  size_t struct_size;       /* set by the caller: sizeof(pw_client_slice_stats_t) */
  /* Gang ops of this client completed on the slice (a spanning op counts
   * on its first slice). Added when their execution completes, before its
   * done event. */
  uint64_t ops_completed;
  uint64_t device_ns;       /* measured device time (only with a charging policy) */
} pw_client_slice_stats_t;

#define PW_CLIENT_SLICE_STATS_SIZE_V1 PW_STRUCT_SIZE(pw_client_slice_stats_t, device_ns)

typedef struct pw_client_options_t {
  size_t struct_size;  /* sizeof(pw_client_options_t) */
  const char* name;    /* copied; NULL = "client<n>" */
  uint32_t weight;     /* fair-share weight (0 = 1) */
  int32_t priority;    /* higher runs first under the priority policy */
} pw_client_options_t;

#define PW_CLIENT_OPTIONS_SIZE_V1 PW_STRUCT_SIZE(pw_client_options_t, priority)

/* Creates a client. |options| may be NULL (defaults). RESOURCE_EXHAUSTED
 * when the runtime already has 4,095 live clients, or when this is a
 * runtime's first client and 1,023 other runtimes of the process that have
 * had clients still exist (their handles could not be told apart). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_client_create(
    pw_runtime_t* runtime, const pw_client_options_t* options,
    pw_client_t** out_client);

/* Waits for the client's in-flight executions (runs of armed graphs
 * included), then frees everything it owns: handles it did not release,
 * armed graphs left, and all its device memory, the intermediate values
 * of its last runs included (a slice may keep only the host-side record
 * of the client's last op there until the next op lands on it). NULL is a
 * no-op (OK). Waits without limit: pw_client_destroy_with_deadline bounds
 * it. FAILED_PRECONDITION, leaving the client untouched, when called from
 * inside a callback the runtime is running (an event callback, e.g. a
 * done event's, or plugin code the dispatcher called): the work it would
 * wait for may need that callback to return. Nothing else may use the
 * client during the call. */
PW_API pw_status_t pw_client_destroy(pw_client_t* client);

/* pw_client_destroy, waiting for in-flight work at most until |deadline|
 * (absolute, pw_clock_now's clock): DEADLINE_EXCEEDED, saying how many
 * executions are still running, when it passes first; the client is then
 * left as it was, usable, and may be destroyed again later (a backend that
 * lost a launch cannot block the caller forever). PW_IMMEDIATE_PAST
 * destroys only an idle client. */
PW_API pw_status_t pw_client_destroy_with_deadline(pw_client_t* client,
                                                   pw_time_t deadline);

/* Blocks until none of the client's executions is in flight, or |deadline|
 * passes (DEADLINE_EXCEEDED, saying how many are still running). Runs of
 * armed graphs count too; those in an armed graph's private blocks are
 * polled (their completion signals nothing), so the wait for them may
 * overshoot by up to about 50 us (1 ms once it has waited 10 ms), and,
 * rarely, a wait for the others by up to 2 ms. When it
 * returns, the done events of the runs it waited for have completed. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_client_wait_idle(pw_client_t* client,
                                                          pw_time_t deadline);

/* Frees what the client keeps for reuse: the execution blocks of its
 * finished runs (a resubmitted graph would find its block laid out in
 * them) and the device memory of the values they keep. Blocks in use,
 * armed graphs' own blocks and the last execution each slice keeps as its
 * tail are not touched. The next submissions allocate again. Any thread;
 * memory measurements (leak checks) call it first so that what the cache
 * happens to hold does not count (cf. IREE's iree_hal_device_trim). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_client_trim(pw_client_t* client);

/* Handles the client holds (created and not released): for leak checks. */
PW_API uint32_t pw_client_live_handles(pw_client_t* client);

/* Accounting of |client| on physical slice |slice|. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_client_slice_stats(
    pw_client_t* client, uint32_t slice, pw_client_slice_stats_t* out_stats);

/* The client's name (valid while it lives). */
PW_API const char* pw_client_name(const pw_client_t* client);

/* The runtime |client| belongs to (NULL for NULL). */
PW_API pw_runtime_t* pw_client_runtime(const pw_client_t* client);

/* Flags for pw_vslice_create. */
typedef enum pw_vslice_flags_e {
  PW_VSLICE_DEFAULT = 0,
  /* Only bind to a physical slice no other virtual slice (of any client)
   * is bound to. */
  PW_VSLICE_EXCLUSIVE = 1u << 0,
  /* May bind a physical slice this client already has a virtual slice
   * on: several virtual slices of one client on one physical slice (their
   * ops then share its devices, in submission order). */
  PW_VSLICE_SHARE_OWN = 1u << 1,
} pw_vslice_flags_t;

/* Where a virtual slice may go (pw_vslice_create_request): the mesh and
 * flags of pw_vslice_create, and attributes a physical slice must have.
 * NULL or "" (UINT32_MAX for the host) leaves an attribute open. */
typedef struct pw_vslice_request_t {
  size_t struct_size;          /* sizeof(pw_vslice_request_t) */
  pw_mesh_shape_t mesh;
  uint32_t flags;              /* pw_vslice_flags_t */
  const char* backend;         /* the backend's vtable name: "cpu", "sim", a plugin's */
  const char* device_kind;     /* pw_backend_device_info_t.kind of its devices */
  const char* slice_name;      /* exactly this physical slice (pw_slice_desc_t.name) */
  uint32_t host;               /* pw_slice_desc_t.host; PW_VSLICE_ANY_HOST: any */
} pw_vslice_request_t;

#define PW_VSLICE_ANY_HOST UINT32_MAX
#define PW_VSLICE_REQUEST_SIZE_V1 PW_STRUCT_SIZE(pw_vslice_request_t, host)

/* pw_vslice_create with the request's attributes: only physical slices
 * that have all of them are considered, then chosen as pw_vslice_create
 * chooses. NOT_FOUND when attributes are asked for and no slice of the
 * mesh's device count has them, listing every slice with its attributes;
 * RESOURCE_EXHAUSTED when those that do are all taken, unhealthy or
 * shared (counted, as pw_vslice_create says). INVALID_ARGUMENT for NULL
 * arguments, a struct_size below V1, a bad mesh or unknown flags. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_vslice_create_request(
    pw_client_t* client, const pw_vslice_request_t* request, pw_vslice_t* out_vslice);

/* Asks for a virtual slice of |mesh|. The resource manager binds it to a
 * healthy physical slice with the same mesh shape (or, failing that, the
 * same device count, laid out row-major) that this client has not bound
 * yet, preferring the least shared one. A slice with a degraded device is
 * used only when no healthy one fits (a slice with a failed device never).
 * RESOURCE_EXHAUSTED, saying how many slices fit and why each was refused,
 * when none is free. |flags|: pw_vslice_flags_t (PW_VSLICE_SHARE_OWN lifts
 * the "not bound by this client yet" rule). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_vslice_create(pw_client_t* client,
                                                       const pw_mesh_shape_t* mesh,
                                                       uint32_t flags,
                                                       pw_vslice_t* out_vslice);

/* Releases the handle. Work already submitted on it still completes. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_vslice_release(pw_client_t* client,
                                                        pw_vslice_t vslice);

/* The physical slice |vslice| is bound to (the lowest-numbered one for a
 * spanning virtual slice, see pw_vslice_slices), and its (virtual) mesh. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_vslice_binding(pw_client_t* client,
                                                        pw_vslice_t vslice,
                                                        uint32_t* out_slice,
                                                        pw_mesh_shape_t* out_mesh);

/* A virtual slice spanning several physical slices, for computations that
 * run as one gang across them (a cross-slice all-reduce, say). See
 * pw_vslice_create_spanning. */
typedef struct pw_vslice_span_t {
  size_t struct_size;          /* sizeof(pw_vslice_span_t) */
  /* The whole virtual mesh: slice_count x (devices per slice) devices.
   * Mesh order is slice-major over the physical slices in ascending index
   * order: the first device_count / slice_count mesh indices are the
   * devices of the lowest-numbered slice, in its mesh order, and so on. */
  pw_mesh_shape_t mesh;
  uint32_t slice_count;        /* physical slices to span, >= 1 */
  /* NULL: the resource manager picks |slice_count| healthy slices of one
   * backend, each with device_count(mesh) / slice_count devices, least
   * shared first (degraded ones only when too few healthy ones fit). Otherwise exactly these physical slice indices (any
   * order, no repeats). */
  const uint32_t* slices;
  uint32_t flags;              /* pw_vslice_flags_t */
} pw_vslice_span_t;

#define PW_VSLICE_SPAN_SIZE_V1 PW_STRUCT_SIZE(pw_vslice_span_t, flags)

/* Asks for a virtual slice over several physical slices. Every op placed
 * on it runs on all their devices as one gang (the backend sees one group
 * of device_count(mesh) devices, so its collectives span the slices), and
 * is ordered consistently on all of them: two computations that share
 * slices enter every shared slice's sequence in the same relative order,
 * whatever their policies and submitting threads, so no cycle of waits can
 * form between slices. The slices must share one backend (collectives
 * cannot cross backends). With a scheduler policy, the op is admitted by
 * the policy of its lowest-numbered slice and then enters all of them at
 * once. A client may hold spanning virtual slices over slices it also uses
 * one by one.
 *
 * Errors: INVALID_ARGUMENT (a NULL argument, struct_size too small, a
 * slice_count of 0 or not dividing the mesh's device count, an unknown flag,
 * a slice index out of range or repeated, slices of different backends or
 * device counts than device_count(mesh) / slice_count), RESOURCE_EXHAUSTED
 * (not enough healthy, free-enough slices; the message counts why each was
 * refused). slice_count 1 behaves as pw_vslice_create (pinned to the given
 * slice when |slices| is set). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_vslice_create_spanning(pw_client_t* client,
                                                                const pw_vslice_span_t* span,
                                                                pw_vslice_t* out_vslice);

/* What a virtual slice is bound to and whether it can run. */
typedef struct pw_vslice_info_t {
  size_t struct_size;          /* set by the caller: sizeof(pw_vslice_info_t) */
  pw_mesh_shape_t mesh;        /* the virtual mesh */
  uint32_t slice_count;        /* physical slices it spans (1 unless spanning) */
  uint32_t first_slice;        /* the lowest-numbered of them */
  /* Of those, how many are lost now, and the lowest-numbered lost one
   * (UINT32_MAX when none is). Work placed on it fails while any is. */
  uint32_t lost_slices;
  uint32_t first_lost_slice;
  /* Whether a slice of it was lost since it was bound: its buffers made
   * before then are gone, even if every slice is back. */
  bool lost_since_bound;
} pw_vslice_info_t;

#define PW_VSLICE_INFO_SIZE_V1 PW_STRUCT_SIZE(pw_vslice_info_t, lost_since_bound)

PW_API PW_MUST_USE_RESULT pw_status_t pw_vslice_info(pw_client_t* client, pw_vslice_t vslice,
                                                     pw_vslice_info_t* out_info);

/* The physical slices |vslice| is bound to, in mesh order: writes up to
 * |capacity| indices to |out_slices| (may be NULL when capacity is 0) and
 * the total to |*out_count|. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_vslice_slices(pw_client_t* client,
                                                       pw_vslice_t vslice,
                                                       uint32_t* out_slices,
                                                       uint32_t capacity,
                                                       uint32_t* out_count);

PW_EXTERN_C_END

#endif /* PATHWAYS_RUNTIME_H_ */
