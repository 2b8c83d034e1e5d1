/* Internal: what the trace recorder keeps of an event (trace.c), and the
 * input of the Chrome Trace Event exporter (pw__trace_export_json), which turns a
 * stopped trace into the JSON that Perfetto and chrome://tracing open.
 * The recorder owns the records; the exporter only reads them. */
#ifndef PW_OBSERVE_TRACE_RECORD_H_
#define PW_OBSERVE_TRACE_RECORD_H_

#include <stddef.h>
#include <stdint.h>
#include "pathways/status.h"

#define PW_TRACE_NAME_MAX 40 /* bytes of a name kept, NUL included */

/* One recorded event: a pw_obs_event_t (observe.h: the meaning of every
 * field per kind) with its name copied (truncated to
 * PW_TRACE_NAME_MAX - 1 bytes, always NUL-terminated; "" when none) and
 * its times on the trace clock. */
typedef struct pw_trace_record_t {
  uint64_t ts_ns;
  uint64_t since_ns;
  uint64_t exec;
  uint64_t gang;
  uint64_t from_gang;
  uint64_t start_ns; /* device time the backend reported (its own clock), 0: none */
  uint64_t end_ns;
  uint64_t bytes;
  uint32_t kind;     /* pw_obs_kind_t */
  uint32_t flags;    /* PW_OBS_* */
  uint32_t slice;
  uint32_t device;
  uint32_t count;
  uint32_t client;
  uint32_t node;
  uint32_t status_code;
  uint32_t thread;   /* the recording thread's index in the trace (0..) */
  char name[PW_TRACE_NAME_MAX];
} pw_trace_record_t;

/* A physical slice as the trace shows it. */
typedef struct pw_trace_slice_t {
  const char* name;            /* the slice's name */
  const char* backend;         /* its backend's name */
  uint32_t device_count;
  /* device_count entries: the host of each mesh device (for lanes and
   * grouping), from the backend's device_info; all 0 when unknown. */
  const uint32_t* device_hosts;
} pw_trace_slice_t;

typedef struct pw_trace_dump_t {
  /* Every record kept, in ts_ns order (ties: recording order). */
  const pw_trace_record_t* records;
  size_t record_count;
  uint64_t dropped;            /* overwritten in full rings, all threads */
  uint32_t thread_count;       /* threads that recorded */
  const pw_trace_slice_t* slices;
  uint32_t slice_count;
  /* Client names by tag (client_count entries; "" for a tag never seen). */
  const char (*client_names)[64];
  uint32_t client_count;
  uint64_t origin_ns;          /* trace clock at start: timestamps are shown from it */
  const char* clock;           /* "host monotonic" or what the host's clock is */
} pw_trace_dump_t;

/* Receives the exporter's output in pieces; a non-NULL status stops the
 * export and is returned by it. */
typedef pw_status_t (*pw_trace_sink_fn_t)(void* user, const char* bytes, size_t size);

/* Writes |dump| as one Chrome Trace Event JSON object. */
pw_status_t pw__trace_export_json(const pw_trace_dump_t* dump, pw_trace_sink_fn_t sink, void* user);

#endif /* PW_OBSERVE_TRACE_RECORD_H_ */
