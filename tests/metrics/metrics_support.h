/* Test support for the metrics (tests/metrics): a visitor that keeps
 * every series it is handed (family, labels as "k=v,k=v", value, and a
 * histogram's buckets) with lookups by family and labels; a sink that
 * gathers the Prometheus text; synthetic observer events; a blocking
 * HTTP/1.0 GET over loopback for the endpoint tests. */
#ifndef PW_TESTS_METRICS_SUPPORT_H_
#define PW_TESTS_METRICS_SUPPORT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "observe/observe.h"
#include "pathways/pathways.h"

typedef struct mt_series_t {
  char family[96];
  char labels[256];
  int type;
  double value;
  uint32_t bucket_count;
  double bounds[32];
  uint64_t buckets[32];
  uint64_t count;
} mt_series_t;

typedef struct mt_samples_t {
  mt_series_t series[512];
  uint32_t count;
} mt_samples_t;

/* pw_metrics_visit_fn_t: appends to |user| (an mt_samples_t). */
pw_status_t mt_collect(void* user, const pw_metric_sample_t* sample);

/* Reads |rt|'s metrics into |out| (cleared first). */
pw_status_t mt_read(pw_runtime_t* rt, mt_samples_t* out);

/* The series of |family| whose labels are exactly |labels| ("" for
 * none), NULL when there is none. */
const mt_series_t* mt_find(const mt_samples_t* s, const char* family, const char* labels);

/* Its value, or -1 when absent. */
double mt_value(const mt_samples_t* s, const char* family, const char* labels);

/* How many series |family| has. */
uint32_t mt_series_of(const mt_samples_t* s, const char* family);

/* A growing text buffer and its pw_metrics_sink_fn_t. */
typedef struct mt_text_t {
  char* data;
  size_t size, capacity;
} mt_text_t;
pw_status_t mt_text_sink(void* user, const char* data, size_t size);
void mt_text_free(mt_text_t* t);

/* Reports an event to |rt|'s observers. */
void mt_event(pw_runtime_t* rt, pw_obs_event_t e);

/* GETs (or |method|s) |path| from 127.0.0.1:|port|; fills |status| (the
 * HTTP code), |content_type| and the body (malloc'd, NUL-terminated,
 * caller frees). False when the exchange failed. */
bool mt_http(uint16_t port, const char* method, const char* path, int* status,
             char* content_type, size_t content_type_size, char** body);

#endif /* PW_TESTS_METRICS_SUPPORT_H_ */
