/* libpathways: elastic training, a job that keeps running when a slice
 * dies.
 *
 * A pw_elastic_t runs a job's steps on as many slices of one mesh as are
 * healthy (between min_slices and max_slices), takes a host-memory
 * snapshot of the job's state every snapshot_every steps (snapshot.h),
 * and owns retry:
 *
 *   loss    a slice in use is lost (runtime.h, "Failure"), seen through
 *           a step that fails or a topology event: the helper waits for
 *           the job's outstanding work to resolve, waits up to
 *           return_wait_ns for the slice to come back, then re-meshes onto
 *           the healthy slices (teardown, setup on the new set), restores
 *           the state of the last complete snapshot onto it (resharded as
 *           the new placement says) and resumes from that snapshot's step;
 *   return  a lost slice comes back: at the next snapshot boundary the
 *           helper snapshots, re-meshes onto the larger set, restores and
 *           goes on from the same step.
 *
 * The job is a set of callbacks (pw_elastic_job_t). |setup| builds what a
 * step needs on the slices it is given (virtual slices, executables,
 * graphs, input data) and says where each state buffer lives there
 * (pw_elastic_place); at the start it also gives the initial state
 * (pw_elastic_set_state). |step| runs one step: it reads the state
 * (pw_elastic_state), submits, and hands back the new state
 * (pw_elastic_set_state), returning the step's status (it waits for its
 * run, or at least for the new state's ready events). |teardown| releases
 * what setup made, virtual slices included (a slice must be free to bind
 * again). The helper sets the client's topology callback
 * (pw_client_set_topology_callback) for its lifetime.
 *
 * Steps are replayed after a loss (from the snapshot's step), so a step
 * must be a function of the state and the step number: its data comes
 * from the step number (e.g. a data loader seeded by it), never from
 * what the previous call did.
 *
 * Thread-safety: one thread drives a pw_elastic_t (pw_elastic_run and the
 * callbacks it makes); pw_elastic_stats may be called from any thread. */
#ifndef PATHWAYS_ELASTIC_H_
#define PATHWAYS_ELASTIC_H_

#include "pathways/api.h"
#include "pathways/buffer.h"
#include "pathways/runtime.h"
#include "pathways/status.h"
#include "pathways/store.h"
#include "pathways/struct_size.h"
#include "pathways/types.h"

PW_EXTERN_C_BEGIN

typedef struct pw_elastic_s pw_elastic_t;

typedef enum pw_elastic_event_kind_e {
  PW_ELASTIC_SNAPSHOT = 1,    /* state of |step| snapshotted (taken; copied asynchronously) */
  PW_ELASTIC_SLICE_LOST = 2,  /* slice |slice|, in use, lost; |cause| says why */
  PW_ELASTIC_SLICE_BACK = 3,  /* slice |slice| is back (used at the next boundary) */
  PW_ELASTIC_RESTORED = 4,    /* state restored from the snapshot of |step| */
  PW_ELASTIC_REMESHED = 5,    /* now on |slice_count| slices, fewer than before */
  PW_ELASTIC_GROWN = 6,       /* now on |slice_count| slices, more than before */
} pw_elastic_event_kind_t;

PW_API const char* pw_elastic_event_name(pw_elastic_event_kind_t kind);

typedef struct pw_elastic_event_t {
  size_t struct_size;          /* sizeof(pw_elastic_event_t) of the library */
  pw_elastic_event_kind_t kind;
  uint64_t step;               /* the step the job is at (RESTORED: the snapshot's) */
  uint32_t slice;              /* LOST / BACK: the physical slice */
  uint32_t slice_count;        /* slices in use after the event */
  pw_status_t cause;           /* LOST: why (borrowed); NULL otherwise */
  uint64_t elapsed_ns;         /* RESTORED / REMESHED / GROWN: how long the re-mesh took */
} pw_elastic_event_t;

#define PW_ELASTIC_EVENT_SIZE_V1 PW_STRUCT_SIZE(pw_elastic_event_t, elapsed_ns)

typedef struct pw_elastic_job_t {
  size_t struct_size;          /* sizeof(pw_elastic_job_t) */
  void* user;
  /* Builds the job on |slices| (|slice_count| physical slice indices,
   * ascending). |restoring|: the state comes from a snapshot (place every
   * state buffer, set none); otherwise this is the start (place and set
   * every state buffer). An error ends pw_elastic_run with it. */
  pw_status_t (*setup)(void* user, pw_elastic_t* elastic, const uint32_t* slices,
                       uint32_t slice_count, bool restoring);
  /* Releases what setup made. May be called after a failed setup. */
  void (*teardown)(void* user, pw_elastic_t* elastic);
  /* Runs step |step| (see above). */
  pw_status_t (*step)(void* user, pw_elastic_t* elastic, uint64_t step);
  /* Optional: each event, on the driving thread. */
  void (*on_event)(void* user, const pw_elastic_event_t* event);
} pw_elastic_job_t;

#define PW_ELASTIC_JOB_SIZE_V1 PW_STRUCT_SIZE(pw_elastic_job_t, on_event)

typedef struct pw_elastic_options_t {
  size_t struct_size;          /* sizeof(pw_elastic_options_t) */
  /* The mesh of every slice the job runs on; only physical slices of
   * exactly this mesh are used. */
  pw_mesh_shape_t slice_mesh;
  uint32_t max_slices;         /* 0: every slice of that mesh */
  uint32_t min_slices;         /* fewer healthy than this: the run fails; 0: 1 */
  uint32_t snapshot_every;     /* steps between snapshots; 0: 10 */
  /* After a loss, how long to wait for the lost slices to come back
   * before re-meshing onto fewer (the health is checked meanwhile); 0:
   * re-mesh at once. */
  uint64_t return_wait_ns;
  /* How long to wait for the job's outstanding work after a failure, and
   * for a snapshot's copy at a boundary; 0: 30 s. */
  uint64_t drain_deadline_ns;
  /* Recoveries after which the run gives up (the last failure); 0: 100. */
  uint32_t max_recoveries;
  uint32_t state_count;        /* state buffers, 1 to 1024 */
  const char* const* state_names; /* NULL, or state_count names (snapshot manifests) */
  /* Snapshots (snapshot.h): kept in host memory (0: 2), and optionally
   * persisted to |store| (taken over: destroyed with the helper, also when
   * create fails) under |key_prefix|. */
  uint32_t keep;
  pw_store_t store;
  const char* key_prefix;
} pw_elastic_options_t;

#define PW_ELASTIC_OPTIONS_SIZE_V1 PW_STRUCT_SIZE(pw_elastic_options_t, key_prefix)

/* Fills |out_options| with the defaults and the current struct_size
 * (slice_mesh and state_count must still be set). */
PW_API void pw_elastic_options_init(pw_elastic_options_t* out_options);

/* Creates the helper for |client| (borrowed: destroy the helper first).
 * INVALID_ARGUMENT for NULL arguments, struct sizes below v1, a missing
 * callback, a bad mesh, state_count 0 or above 1024, min above max. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_elastic_create(pw_client_t* client,
                                                        const pw_elastic_options_t* options,
                                                        const pw_elastic_job_t* job,
                                                        pw_elastic_t** out_elastic);

/* Tears the job down if it is set up, releases the state, destroys the
 * snapshotter (and store) and clears the client's topology callback.
 * NULL is a no-op. */
PW_API pw_status_t pw_elastic_destroy(pw_elastic_t* elastic);

/* From setup: state buffer |index| lives on |vslice| with |spec| on this
 * mesh (a restore reshards onto it). INVALID_ARGUMENT for a bad index or
 * spec, FAILED_PRECONDITION outside setup. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_elastic_place(pw_elastic_t* elastic, uint32_t index,
                                                       pw_vslice_t vslice,
                                                       const pw_array_spec_t* spec);

/* From setup (the start) or step: |buffer| is state buffer |index| from
 * now on; the helper takes the handle (and releases the previous one). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_elastic_set_state(pw_elastic_t* elastic,
                                                           uint32_t index, pw_buffer_t buffer);

/* State buffer |index| (the helper keeps the handle: do not release it).
 * NOT_FOUND while it has none. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_elastic_state(pw_elastic_t* elastic, uint32_t index,
                                                       pw_buffer_t* out_buffer);

/* Physical slices in use now (valid until the next re-mesh). */
PW_API uint32_t pw_elastic_slice_count(const pw_elastic_t* elastic);

/* Runs steps first_step .. first_step + step_count - 1, recovering from
 * lost slices (above). Returns OK when the last step completed; the
 * failure of setup or of a step that is not a lost slice's; UNAVAILABLE
 * when fewer than min_slices are healthy after return_wait_ns, or after
 * max_recoveries. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_elastic_run(pw_elastic_t* elastic, uint64_t first_step,
                                                     uint64_t step_count);

/* What the helper did, for monitoring and the recovery benchmark. */
typedef struct pw_elastic_stats_t {
  size_t struct_size;          /* set by the caller: sizeof(pw_elastic_stats_t) */
  uint64_t steps_completed;    /* step calls that returned OK, replays included */
  uint64_t steps_replayed;     /* of which steps run again after a restore */
  uint32_t recoveries;         /* re-meshes after a loss */
  uint32_t growths;            /* re-meshes onto more slices */
  uint32_t snapshots;          /* snapshots taken */
  uint32_t slice_count;        /* slices in use */
  /* The last recovery, split: from the loss (the topology event's time,
   * else the failed step's return) to the helper acting on it; waiting
   * for outstanding work; teardown + setup + restore; and the first step
   * on the new mesh. */
  uint64_t last_detect_ns;
  uint64_t last_drain_ns;
  uint64_t last_restore_ns;
  uint64_t last_first_step_ns;
} pw_elastic_stats_t;

#define PW_ELASTIC_STATS_SIZE_V1 PW_STRUCT_SIZE(pw_elastic_stats_t, last_first_step_ns)

PW_API PW_MUST_USE_RESULT pw_status_t pw_elastic_stats(pw_elastic_t* elastic,
                                                       pw_elastic_stats_t* out_stats);

PW_EXTERN_C_END

#endif /* PATHWAYS_ELASTIC_H_ */
