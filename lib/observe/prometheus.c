/* The Prometheus text exposition format 0.0.4 of the metrics
 * (pw_runtime_metrics_write_prometheus): a visitor over the series
 * (metrics.c) that writes "# HELP" and "# TYPE" at each new family, one
 * line per series with its labels escaped, and a histogram as its
 * cumulative _bucket{le="..."} lines ending with le="+Inf", then _sum and
 * _count; numbers as integers when they are, else in the shortest form that reads back exactly. Output
 * goes through the caller's sink in pieces of up to 4 KiB. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "observe/metrics.h"

typedef struct pw_prom_writer_t {
  pw_metrics_sink_fn_t sink;
  void* user;
  char family[128]; /* the family whose HELP and TYPE were written last */
  size_t used;
  char buf[4096];
} pw_prom_writer_t;

static pw_status_t pw_prom_flush(pw_prom_writer_t* w) {
  if (w->used == 0) return NULL;
  size_t n = w->used;
  w->used = 0;
  return w->sink(w->user, w->buf, n);
}

static pw_status_t pw_prom_put(pw_prom_writer_t* w, const char* s, size_t n) {
  while (n > 0) {
    if (w->used == sizeof(w->buf)) PW_RETURN_IF_ERROR(pw_prom_flush(w));
    size_t take = sizeof(w->buf) - w->used;
    if (take > n) take = n;
    memcpy(w->buf + w->used, s, take);
    w->used += take;
    s += take;
    n -= take;
  }
  return NULL;
}

static pw_status_t pw_prom_puts(pw_prom_writer_t* w, const char* s) {
  return pw_prom_put(w, s, strlen(s));
}

/* Escapes backslash and newline (and, in label values, the double quote)
 * as the format asks. */
static pw_status_t pw_prom_escaped(pw_prom_writer_t* w, const char* s, bool quote) {
  for (; *s != '\0'; ++s) {
    const char* esc = NULL;
    if (*s == '\\') esc = "\\\\";
    else if (*s == '\n') esc = "\\n";
    else if (quote && *s == '"') esc = "\\\"";
    PW_RETURN_IF_ERROR(esc != NULL ? pw_prom_puts(w, esc) : pw_prom_put(w, s, 1));
  }
  return NULL;
}

/* The shortest %g form of |v| that strtod reads back as |v|. */
static void pw_prom_number(double v, char out[32]) {
  if (v == floor(v) && fabs(v) < 1e15) { /* integers as integers: 10, not 1e+01 */
    snprintf(out, 32, "%.0f", v);
    return;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    snprintf(out, 32, "%.*g", precision, v);
    if (strtod(out, NULL) == v) return;
  }
}

static pw_status_t pw_prom_value(pw_prom_writer_t* w, double v) {
  char text[32];
  pw_prom_number(v, text);
  PW_RETURN_IF_ERROR(pw_prom_puts(w, " "));
  PW_RETURN_IF_ERROR(pw_prom_puts(w, text));
  return pw_prom_puts(w, "\n");
}

/* name{labels[,le="bound"]} */
static pw_status_t pw_prom_series(pw_prom_writer_t* w, const pw_metric_sample_t* s,
                                  const char* suffix, const char* le) {
  PW_RETURN_IF_ERROR(pw_prom_puts(w, s->family));
  PW_RETURN_IF_ERROR(pw_prom_puts(w, suffix));
  if (s->label_count == 0 && le == NULL) return NULL;
  PW_RETURN_IF_ERROR(pw_prom_puts(w, "{"));
  for (uint32_t i = 0; i < s->label_count; ++i) {
    PW_RETURN_IF_ERROR(pw_prom_puts(w, i == 0 ? "" : ","));
    PW_RETURN_IF_ERROR(pw_prom_puts(w, s->labels[i].name));
    PW_RETURN_IF_ERROR(pw_prom_puts(w, "=\""));
    PW_RETURN_IF_ERROR(pw_prom_escaped(w, s->labels[i].value, true));
    PW_RETURN_IF_ERROR(pw_prom_puts(w, "\""));
  }
  if (le != NULL) {
    PW_RETURN_IF_ERROR(pw_prom_puts(w, s->label_count == 0 ? "le=\"" : ",le=\""));
    PW_RETURN_IF_ERROR(pw_prom_puts(w, le));
    PW_RETURN_IF_ERROR(pw_prom_puts(w, "\""));
  }
  return pw_prom_puts(w, "}");
}

static pw_status_t pw_prom_header(pw_prom_writer_t* w, const pw_metric_sample_t* s) {
  static const char* const types[] = {"counter", "gauge", "histogram"};
  if (strcmp(w->family, s->family) == 0) return NULL;
  snprintf(w->family, sizeof(w->family), "%s", s->family);
  PW_RETURN_IF_ERROR(pw_prom_puts(w, "# HELP "));
  PW_RETURN_IF_ERROR(pw_prom_puts(w, s->family));
  PW_RETURN_IF_ERROR(pw_prom_puts(w, " "));
  PW_RETURN_IF_ERROR(pw_prom_escaped(w, s->help, false));
  PW_RETURN_IF_ERROR(pw_prom_puts(w, "\n# TYPE "));
  PW_RETURN_IF_ERROR(pw_prom_puts(w, s->family));
  PW_RETURN_IF_ERROR(pw_prom_puts(w, " "));
  PW_RETURN_IF_ERROR(pw_prom_puts(w, types[s->type]));
  return pw_prom_puts(w, "\n");
}

static pw_status_t pw_prom_visit(void* user, const pw_metric_sample_t* s) {
  pw_prom_writer_t* w = user;
  PW_RETURN_IF_ERROR(pw_prom_header(w, s));
  if (s->type != PW_METRIC_HISTOGRAM) {
    PW_RETURN_IF_ERROR(pw_prom_series(w, s, "", NULL));
    return pw_prom_value(w, s->value);
  }
  for (uint32_t b = 0; b < s->bucket_count; ++b) {
    char le[32];
    pw_prom_number(s->bucket_bounds[b], le);
    PW_RETURN_IF_ERROR(pw_prom_series(w, s, "_bucket", le));
    PW_RETURN_IF_ERROR(pw_prom_value(w, (double)s->bucket_counts[b]));
  }
  PW_RETURN_IF_ERROR(pw_prom_series(w, s, "_bucket", "+Inf"));
  PW_RETURN_IF_ERROR(pw_prom_value(w, (double)s->count));
  PW_RETURN_IF_ERROR(pw_prom_series(w, s, "_sum", NULL));
  PW_RETURN_IF_ERROR(pw_prom_value(w, s->value));
  PW_RETURN_IF_ERROR(pw_prom_series(w, s, "_count", NULL));
  return pw_prom_value(w, (double)s->count);
}

pw_status_t pw__metrics_write_prometheus(pw_metrics_t* m, pw_metrics_sink_fn_t sink,
                                         void* user) {
  pw_prom_writer_t* w = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(m->allocator, sizeof(*w), 0, (void**)&w));
  w->sink = sink;
  w->user = user;
  w->family[0] = '\0';
  w->used = 0;
  pw_status_t status = pw__metrics_visit(m, pw_prom_visit, w);
  if (status == NULL) status = pw_prom_flush(w);
  pw_allocator_free(m->allocator, w, sizeof(*w));
  return status;
}

pw_status_t pw_runtime_metrics_write_prometheus(pw_runtime_t* runtime,
                                                pw_metrics_sink_fn_t sink, void* user) {
  static const char call[] = "pw_runtime_metrics_write_prometheus";
  if (runtime == NULL || sink == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: %s is NULL", call,
                          runtime == NULL ? "runtime" : "sink");
  }
  pw_metrics_t* m = pw__metrics_current(runtime);
  if (m == NULL) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "%s: metrics are off (pw_runtime_metrics_enable)", call);
  }
  return pw__metrics_write_prometheus(m, sink, user);
}
