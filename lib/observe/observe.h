/* Internal: the runtime's observers (lib/observe). The dispatcher and the
 * runtime report what happens as pw_obs_event_t values through
 * pw_observe(); the observer hands each to the trace recorder
 * (trace_record.h, when a trace is on) and to the metrics observer
 * (when metrics are on). With neither on, |runtime->observe| is NULL and a
 * report costs one load and one branch at the call site
 * (pw_observing()); nothing else of this module runs on the hot path.
 *
 * Events are plain values built on the caller's stack; their |name| is
 * only valid during the call (observers copy what they keep). Every event
 * is reported by the thread on which it happened, which may be any
 * thread: a submitter, a backend's completion thread, the watchdog. */
#ifndef PW_OBSERVE_OBSERVE_H_
#define PW_OBSERVE_OBSERVE_H_

#include <stdbool.h>
#include <stdint.h>
#include "base/atomics.h"
#include "core/runtime.h"

typedef enum pw_obs_kind_t {
  /* An execution of a plan was submitted: |exec| its first gang id,
   * |count| its ops, |name| the graph's name (may be NULL). Slice and
   * device are UINT32_MAX. */
  PW_OBS_SUBMIT = 1,
  /* The scheduler window admitted op |gang| of |slice| (its home). */
  PW_OBS_ADMIT = 2,
  /* A unit of dispatch (|device| the first mesh device of it, |count|
   * its devices: 1, or a lane's size) handed op |gang| to its backend;
   * PW_OBS_QUEUED when it went into a device queue ahead of readiness. */
  PW_OBS_LAUNCH = 3,
  /* The backend completed that launch: |since_ns| is the LAUNCH's
   * |ts_ns|, |start_ns|/|end_ns| the device time it reported (0 when
   * none), PW_OBS_FAILED when it failed (|status_code| says how). */
  PW_OBS_LAUNCH_DONE = 4,
  /* A transfer op's part on unit |device| started its copies: |bytes|
   * the bytes it moves into that unit. */
  PW_OBS_COPY = 5,
  /* ...and completed them (|since_ns| the COPY's |ts_ns|). */
  PW_OBS_COPY_DONE = 6,
  /* Op |gang| resolved on every unit of its slice: |since_ns| is its
   * execution's SUBMIT time. PW_OBS_FAILED when it failed. */
  PW_OBS_OP_DONE = 7,
  /* Execution |exec| resolved (every op of it). */
  PW_OBS_EXEC_DONE = 8,
  /* Op |gang| on unit |device| reads a value op |from_gang| produced (an
   * edge of the graph): reported with the op's LAUNCH or COPY, once per
   * distinct producing op. Traces draw it as a flow. */
  PW_OBS_FLOW = 9,
  /* A launch did not complete in time and the watchdog failed it (a
   * LAUNCH_DONE with PW_OBS_FAILED follows). */
  PW_OBS_DEADLINE = 10,
  /* A host op's function was called on the host of its slice (|device|
   * 0, |count| the slice's devices: one call for all of them)... */
  PW_OBS_HOST_TASK = 11,
  /* ...and returned (|since_ns| the HOST_TASK's |ts_ns|; PW_OBS_FAILED
   * when it failed). */
  PW_OBS_HOST_TASK_DONE = 12,
  /* Slice |slice| was lost (|status_code| the cause's code)... */
  PW_OBS_SLICE_LOST = 13,
  /* ...and is back. */
  PW_OBS_SLICE_BACK = 14,
  /* A snapshot (lib/snapshot) of step |exec| is in host memory: |count|
   * buffers, |bytes| raw bytes, |since_ns| its take; PW_OBS_FAILED when
   * its copy failed. Slice and device are UINT32_MAX (as below). */
  PW_OBS_SNAPSHOT = 15,
  /* ...was written to the snapshotter's store: |bytes| stored, |since_ns|
   * the write's start; PW_OBS_FAILED when it failed. */
  PW_OBS_SNAPSHOT_PERSIST = 16,
  /* The elastic helper (lib/elastic) moved onto |count| slices from the
   * snapshot of step |exec|: after a loss (|since_ns| when the failed
   * step returned), or growing back (PW_OBS_GROWN; |since_ns| the
   * re-mesh's start). */
  PW_OBS_ELASTIC = 17,
} pw_obs_kind_t;

/* pw_obs_event_t.flags */
#define PW_OBS_FAILED 0x1u  /* it failed (status_code) */
#define PW_OBS_QUEUED 0x2u  /* a queue-ordered launch */
#define PW_OBS_HOST 0x4u    /* a host launch (one call for a lane) */
#define PW_OBS_GROWN 0x8u   /* PW_OBS_ELASTIC: a growth, not a recovery */

typedef struct pw_obs_event_t {
  uint64_t ts_ns;      /* pw_clock_now() when it happened */
  uint64_t since_ns;   /* the start it closes (see the kinds), else 0 */
  uint64_t exec;       /* the execution's gang id of op 0 (unique per runtime) */
  uint64_t gang;       /* the op's gang id (exec + op index) */
  uint64_t from_gang;  /* PW_OBS_FLOW: the producing op's gang id */
  uint64_t start_ns;   /* device time the backend reported, else 0 */
  uint64_t end_ns;
  uint64_t bytes;      /* PW_OBS_COPY(_DONE) */
  const char* name;    /* the op's node name (or the graph's); call only */
  uint32_t kind;       /* pw_obs_kind_t */
  uint32_t flags;      /* PW_OBS_* */
  uint32_t slice;      /* physical slice index, UINT32_MAX: none */
  uint32_t device;     /* first mesh device of the unit, UINT32_MAX: none */
  uint32_t count;      /* devices of the unit; ops of a SUBMIT */
  uint32_t client;     /* the submitting client's tag */
  uint32_t node;       /* the op's graph node id */
  uint32_t status_code; /* pw_status_code_t when PW_OBS_FAILED */
} pw_obs_event_t;

/* An observer: the trace recorder (trace.c) or the metrics observer.
 * Its struct begins with this; |record| takes each event while it is
 * installed, from any thread at once. An observer object stays allocated
 * until the runtime is destroyed (a thread may still be in |record| of
 * one just removed); what it must stop writing to it guards itself. */
typedef struct pw_observer_s {
  void (*record)(struct pw_observer_s* self, const pw_obs_event_t* e);
  /* Frees it: called by pw__observe_destroy (no thread reports any
   * more) for the installed observers and the retired ones. */
  void (*destroy)(struct pw_observer_s* self);
  struct pw_observer_s* retired_next; /* pw_observe_t.retired (|lock|) */
} pw_observer_t;

/* One per runtime (runtime->observer, made at create, freed at destroy);
 * published in runtime->observe while an observer is installed. */
typedef struct pw_observe_s {
  pw_runtime_t* runtime;
  pthread_mutex_t lock; /* installing and removing observers */
  /* Serialises the trace's start, stop and write (trace.c), which may
   * take long (a write) and must not hold |lock|. */
  pthread_mutex_t control_lock;
  /* pw_observer_t*, NULL while off; written under |lock|. */
  pw_atomic_ptr_t trace;
  pw_atomic_ptr_t metrics;
  /* Client tag -> name, for observers that name clients: filled at each
   * client's first SUBMIT while observing (|lock|); PW_HANDLE_TAGS_MAX + 1
   * entries. */
  char (*client_names)[64];
  /* The trace kept (trace.c): recording, or the last one stopped, until
   * the next start (|lock|); the recorder's, like the two below. */
  pw_observer_t* kept_trace;
  /* Observers removed and replaced, kept until the runtime goes. */
  pw_observer_t* retired;
} pw_observe_t;

/* Whether anything observes |rt|: one relaxed load (the hub it names
 * was made with the runtime; the observers it then reads are published
 * with release and read with acquire by pw__observe). */
static inline pw_observe_t* pw_observing(pw_runtime_t* rt) {
  return (pw_observe_t*)pw_atomic_load_ptr_relaxed(&rt->observe);
}

/* Hands |e| to every observer that is on. Thread-safe. */
void pw__observe(pw_observe_t* o, const pw_obs_event_t* e);

/* Made at runtime create and freed at destroy (lib/runtime/runtime.c). */
pw_status_t pw__observe_create(pw_runtime_t* rt);
void pw__observe_destroy(pw_runtime_t* rt);

/* Installs |observer| in |slot| (&o->trace or &o->metrics; NULL
 * removes what is there) and publishes or withdraws runtime->observe to
 * match. Takes o->lock. */
void pw__observe_install(pw_observe_t* o, pw_atomic_ptr_t* slot, pw_observer_t* observer);

/* Keeps |observer| (removed from its slot) until the runtime is
 * destroyed, then destroys it. Takes o->lock. */
void pw__observe_retire(pw_observe_t* o, pw_observer_t* observer);

/* For the cold paths (slices lost and back, snapshots, the elastic
 * helper): reports |e| if anything observes |rt|, with |ts_ns| set to
 * now when it is 0. */
void pw__observe_note(pw_runtime_t* rt, pw_obs_event_t* e);

/* Records |client|'s name under its tag, once (SUBMIT). */
void pw__observe_name_client(pw_observe_t* o, uint32_t tag, const char* name);

#endif /* PW_OBSERVE_OBSERVE_H_ */
