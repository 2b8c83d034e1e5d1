/* libpathways: the runtime's metrics (counters, gauges, histograms), read
 * through a C visitor, written in the Prometheus text exposition format
 * 0.0.4, and served over HTTP for a Prometheus server to scrape.
 *
 * Metrics are off by default: a runtime nobody observes pays one branch
 * per event. pw_runtime_metrics_enable installs the metrics observer
 * (lib/observe/metrics.c); from then on every event the dispatcher
 * reports (submit, admit, launch and its completion, copies, op and
 * execution completion, deadlines) updates per-thread stripes of counters
 * with atomic adds, never a lock; a read sums the stripes. The
 * families, their labels and units are listed in docs/observability.md
 * ("Metrics").
 *
 * Thread-safety: every function may be called from any thread, at the
 * same time as work runs; enable and disable are serialised per runtime.
 */
#ifndef PATHWAYS_METRICS_H_
#define PATHWAYS_METRICS_H_

#include <stdint.h>
#include "pathways/api.h"
#include "pathways/runtime.h"
#include "pathways/status.h"

PW_EXTERN_C_BEGIN

typedef struct pw_metrics_options_t {
  size_t struct_size; /* sizeof(pw_metrics_options_t) */
  /* Reserved, must be 0 (a later version may add flags). */
  uint32_t flags;
} pw_metrics_options_t;

#define PW_METRICS_OPTIONS_SIZE_V1 PW_STRUCT_SIZE(pw_metrics_options_t, flags)

/* Fills |options| with the defaults. */
PW_API void pw_metrics_options_init(pw_metrics_options_t* options);

/* Turns metrics on for |runtime| (|options| NULL: the defaults), counting
 * from zero: events reported before this call are not counted, so a
 * gauge computed from two counts (launches in flight) is clamped at 0.
 * FAILED_PRECONDITION when metrics are already on; INVALID_ARGUMENT for a
 * NULL runtime, a bad struct_size or unknown flags; RESOURCE_EXHAUSTED. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_runtime_metrics_enable(
    pw_runtime_t* runtime, const pw_metrics_options_t* options);

/* Turns metrics off: events are no longer counted, reads fail with
 * FAILED_PRECONDITION and servers answer 503 until metrics are enabled
 * again (which starts from zero; a server started before then keeps
 * answering 503: start a new one). The counters' memory is kept until
 * the runtime is destroyed (a thread may still be recording into them).
 * FAILED_PRECONDITION when metrics are off; INVALID_ARGUMENT for NULL. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_runtime_metrics_disable(pw_runtime_t* runtime);

typedef enum pw_metric_type_e {
  PW_METRIC_COUNTER = 0,   /* only goes up; its family name ends in _total */
  PW_METRIC_GAUGE = 1,     /* a level, now */
  PW_METRIC_HISTOGRAM = 2, /* buckets of observations, with their sum and count */
} pw_metric_type_t;

typedef struct pw_metric_label_t {
  const char* name;
  const char* value; /* not escaped: any bytes but NUL */
} pw_metric_label_t;

/* One series of a family, as the visitor sees it. Everything it points
 * to is valid during the call only. */
typedef struct pw_metric_sample_t {
  size_t struct_size; /* set by the library: sizeof(pw_metric_sample_t) */
  const char* family; /* e.g. "pathways_ops_completed_total" */
  const char* help;   /* one line */
  pw_metric_type_t type;
  uint32_t label_count;
  const pw_metric_label_t* labels;
  /* Counter or gauge: the value. Histogram: the sum of observations. */
  double value;
  /* Histogram only (0 and NULL otherwise): |bucket_count| upper bounds,
   * ascending, in the family's unit (seconds), and the cumulative count
   * of observations <= each bound; |count| is every observation (the
   * +Inf bucket). */
  uint32_t bucket_count;
  const double* bucket_bounds;
  const uint64_t* bucket_counts;
  uint64_t count;
} pw_metric_sample_t;

#define PW_METRIC_SAMPLE_SIZE_V1 PW_STRUCT_SIZE(pw_metric_sample_t, count)

/* Called once per series; a non-NULL status stops the read, which returns
 * it (the visitor hands over its ownership). */
typedef pw_status_t (*pw_metrics_visit_fn_t)(void* user, const pw_metric_sample_t* sample);

/* Sums the stripes and calls |fn(user, sample)| for every series, family
 * by family in a fixed order, on the calling thread. Concurrent events may
 * or may not be counted; each count is exact once the events it counts
 * have been reported (e.g. after pw_event_wait on the executions).
 * INVALID_ARGUMENT for NULL arguments; FAILED_PRECONDITION when metrics
 * are off; RESOURCE_EXHAUSTED; the visitor's status. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_runtime_metrics_visit(
    pw_runtime_t* runtime, pw_metrics_visit_fn_t fn, void* user);

/* Receives the exposition text in pieces (not NUL-terminated); a non-NULL
 * status stops the write, which returns it. */
typedef pw_status_t (*pw_metrics_sink_fn_t)(void* user, const char* data, size_t size);

/* Writes every family in the Prometheus text exposition format 0.0.4
 * ("# HELP", "# TYPE", label values escaped, histograms as _bucket{le}
 * with +Inf, _sum and _count) through |sink|. Errors as
 * pw_runtime_metrics_visit, and the sink's. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_runtime_metrics_write_prometheus(
    pw_runtime_t* runtime, pw_metrics_sink_fn_t sink, void* user);

/* -- HTTP endpoint (libmicrohttpd) ---------------------------------- */

typedef struct pw_metrics_server_s pw_metrics_server_t;

typedef struct pw_metrics_server_options_t {
  size_t struct_size; /* sizeof(pw_metrics_server_options_t) */
  /* An IPv4 or IPv6 literal to listen on; NULL = "127.0.0.1" (loopback
   * only: expose it further on purpose, e.g. "0.0.0.0"). */
  const char* address;
  /* TCP port; 0 = an ephemeral one (pw_metrics_server_port says which). */
  uint16_t port;
} pw_metrics_server_options_t;

#define PW_METRICS_SERVER_OPTIONS_SIZE_V1 PW_STRUCT_SIZE(pw_metrics_server_options_t, port)

/* Fills |options| with the defaults (127.0.0.1, ephemeral port). */
PW_API void pw_metrics_server_options_init(pw_metrics_server_options_t* options);

/* Starts an HTTP server on its own thread that answers `GET /metrics`
 * with 200 and the exposition (Content-Type: text/plain; version=0.0.4),
 * any other path with 404, any other method with 405, and 503 while
 * metrics are off (or were turned off and on again since it started).
 * Metrics must be on (FAILED_PRECONDITION otherwise). |options| NULL:
 * the defaults. Errors: INVALID_ARGUMENT for NULL runtime or out-pointer,
 * a bad struct_size or an address that is no IP literal; UNAVAILABLE when
 * the socket cannot be bound (the message gives the address, port and
 * why, e.g. the port is in use); RESOURCE_EXHAUSTED.
 *
 * Stop it with pw_metrics_server_stop before destroying the runtime. A
 * server still running then is stopped and freed by pw_runtime_destroy;
 * its handle is then invalid (do not stop it afterwards). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_metrics_server_start(
    pw_runtime_t* runtime, const pw_metrics_server_options_t* options,
    pw_metrics_server_t** out_server);

/* The port the server listens on (the bound one when it asked for 0);
 * 0 for NULL. */
PW_API uint16_t pw_metrics_server_port(const pw_metrics_server_t* server);

/* Stops the server (waits for a request in progress) and frees it. NULL
 * is a no-op. Not concurrently with pw_runtime_destroy of its runtime. */
PW_API void pw_metrics_server_stop(pw_metrics_server_t* server);

PW_EXTERN_C_END

#endif /* PATHWAYS_METRICS_H_ */
