/* libpathways: traces of what the runtime does, for Perfetto and
 * chrome://tracing.
 *
 * A runtime records a trace between pw_runtime_trace_start and
 * pw_runtime_trace_stop: every submission, scheduler admission, launch
 * (and, on a queue-ordered slice, the order in which devices run them),
 * backend completion with the device time the backend reported,
 * transfer, op and execution completion, failure and missed deadline,
 * per device (or lane of one host's devices) and per client, with op and
 * graph names, and the graph's edges between them. Each thread that
 * reports records into a ring of its own (no lock, no shared write);
 * when a ring is full its oldest events are overwritten and counted as
 * dropped. Off (the default), recording costs the dispatcher one branch
 * per report.
 *
 * A stopped trace is written with pw_runtime_trace_write(_file) as
 * Chrome Trace Event JSON: one process per slice with one track per unit
 * of dispatch, a controller process with one track per client, flows
 * from each op to the ops that read its outputs (docs/observability.md,
 * "Traces"). It is kept until the next start or the runtime's destroy.
 *
 * Thread-safety: start, stop and write may be called from any thread
 * but not from inside a callback the runtime is running; they serialise
 * among themselves. Recording is safe from every thread. */
#ifndef PATHWAYS_TRACE_H_
#define PATHWAYS_TRACE_H_

#include <stddef.h>
#include <stdint.h>
#include "pathways/api.h"
#include "pathways/runtime.h"
#include "pathways/status.h"

PW_EXTERN_C_BEGIN

typedef struct pw_trace_options_t {
  size_t struct_size;          /* sizeof(pw_trace_options_t) */
  /* Events each recording thread keeps (its ring); 0 = 65536. Rounded up
   * to a power of two; at most 2^24. An event takes 128 bytes. */
  uint32_t events_per_thread;
  /* The trace clock: zero = pw_clock_now (host monotonic nanoseconds).
   * A host may give its own, in nanoseconds, callable from any thread:
   * e.g. the simulation clock of the sim backend
   * (pw_sim_backend_now, include/pathways/backends/sim.h). */
  uint64_t (*clock)(void* clock_user);
  void* clock_user;
  const char* clock_name;      /* copied; shown in the trace; NULL = "host monotonic" */
} pw_trace_options_t;

#define PW_TRACE_OPTIONS_SIZE_V1 PW_STRUCT_SIZE(pw_trace_options_t, clock_name)

typedef struct pw_trace_stats_t {
  size_t struct_size;          /* set by the caller: sizeof(pw_trace_stats_t) */
  uint64_t events;             /* kept */
  uint64_t dropped;            /* overwritten in full rings */
  uint32_t threads;            /* threads that recorded */
  uint32_t recording;          /* 1 while started, 0 when stopped */
} pw_trace_stats_t;

#define PW_TRACE_STATS_SIZE_V1 PW_STRUCT_SIZE(pw_trace_stats_t, recording)

/* Starts recording (|options| may be NULL: defaults), dropping a trace
 * kept from before. FAILED_PRECONDITION if one is recording already;
 * INVALID_ARGUMENT for bad options (naming the field). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_runtime_trace_start(pw_runtime_t* runtime,
                                                             const pw_trace_options_t* options);

/* Stops recording: once it returns, no thread adds to the trace.
 * FAILED_PRECONDITION when none is recording. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_runtime_trace_stop(pw_runtime_t* runtime);

/* The trace's counts (recording or stopped). NOT_FOUND when there is
 * none. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_runtime_trace_stats(pw_runtime_t* runtime,
                                                             pw_trace_stats_t* out_stats);

/* Receives the JSON in pieces; a non-NULL status stops the write and is
 * returned by it (annotated). */
typedef pw_status_t (*pw_trace_write_fn_t)(void* user, const char* bytes, size_t size);

/* Writes the stopped trace as Chrome Trace Event JSON through |fn|.
 * FAILED_PRECONDITION while recording (stop first), NOT_FOUND when there
 * is none. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_runtime_trace_write(pw_runtime_t* runtime,
                                                             pw_trace_write_fn_t fn, void* user);

/* pw_runtime_trace_write into the file at |path| (created or truncated;
 * written to "<path>.tmp" and renamed, so a reader never sees half a
 * trace). UNAVAILABLE naming the path and errno when it cannot. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_runtime_trace_write_file(pw_runtime_t* runtime,
                                                                  const char* path);

PW_EXTERN_C_END

#endif /* PATHWAYS_TRACE_H_ */
