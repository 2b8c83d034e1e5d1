/* The Chrome Trace Event exporter (trace_record.h): turns a stopped
 * trace's records into one JSON object that Perfetto and chrome://tracing
 * open, streamed through the caller's sink in 64 KiB pieces, one small
 * jansson object per event (memory: the pairing tables below, about 80
 * bytes per record, never the JSON of the whole trace).
 *
 * Layout (docs/observability.md, "Traces"):
 *   pid 1            "controller": one thread per client (tid = tag + 1)
 *                    with SUBMIT and ADMIT instants and failed OP_DONEs;
 *                    each execution an async span "b"/"e" (cat "exec",
 *                    id = its exec gang id) from SUBMIT to EXEC_DONE.
 *   pid 2 + s        physical slice s: one thread per unit of dispatch
 *                    (a device or a lane), in mesh order; each launch an
 *                    "X" from LAUNCH to LAUNCH_DONE, each transfer part an
 *                    "X" from COPY to COPY_DONE, each host task an "X"
 *                    (cat "host") from HOST_TASK to HOST_TASK_DONE on the
 *                    unit of the slice's device 0, failures and deadlines
 *                    as instants, graph edges (FLOW) as "s"/"f" flows.
 * On a track, an X starts at max(its launch, the previous X's end), so X
 * events never overlap there (a queue runs its launches in order); the
 * raw times are args. A start with no end (the trace stopped first) ends
 * at the trace's last timestamp with an "unmatched" arg. */
#include <jansson.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "observe/observe.h"
#include "observe/trace_record.h"

#define TJ_OUT_CAPACITY (64u * 1024u)
#define TJ_NONE SIZE_MAX
#define TJ_TEXT_MAX 256 /* bytes of a composed track name, NUL included */
#define TJ_PID_CONTROLLER 1
#define TJ_PID_SLICE0 2

typedef struct tj_unit_t {
  uint32_t slice;
  uint32_t device; /* first mesh device */
  uint32_t count;  /* devices (>= 1) */
  uint32_t tid;    /* 1.. within the slice, in mesh order */
  uint32_t index;  /* the unit's position in tj_ctx_t.units (after sorting) */
} tj_unit_t;

/* A start or an end record, for pairing (tj_pair). */
/* What a span is (tj_mark_t.copy, tj_span_t.copy). */
enum { TJ_LAUNCH = 0, TJ_COPY = 1, TJ_HOST = 2 };

typedef struct tj_mark_t {
  uint64_t gang;
  uint64_t t;      /* a start's ts_ns, an end's since_ns */
  size_t record;
  uint32_t unit;
  uint8_t copy;    /* TJ_COPY: COPY/COPY_DONE, TJ_HOST: HOST_TASK(_DONE), else a launch */
  uint8_t is_end;
} tj_mark_t;

typedef struct tj_span_t {
  uint64_t begin, end;           /* trace clock: start record (or since), end */
  uint64_t show_begin, show_end; /* what the X event shows */
  uint64_t gang;
  size_t start_record, end_record; /* TJ_NONE when missing */
  uint32_t unit;
  uint8_t copy;
} tj_span_t;

typedef struct tj_ctx_t {
  const pw_trace_dump_t* dump;
  pw_trace_sink_fn_t sink;
  void* user;
  pw_status_t status; /* the first error; everything stops at it */
  char* out;
  size_t out_size;
  char* scratch;
  size_t scratch_capacity;
  size_t events;
  tj_unit_t* units;
  size_t unit_count, unit_capacity;
  tj_span_t* spans;
  size_t span_count;
  size_t span_capacity;
  struct tj_gang_key_t* by_gang; /* the spans by (gang, unit, begin) */
  struct tj_submit_t* submits;   /* SUBMIT records by exec */
  size_t submit_count;
  uint64_t* dones;               /* EXEC_DONE execs, sorted */
  size_t done_count;
  uint32_t* clients;             /* client tags on the controller, sorted, unique */
  size_t client_count;
  uint64_t last_ts;
  uint64_t unmatched, flows, flows_unbound;
} tj_ctx_t;

static void tj_fail(tj_ctx_t* c, pw_status_code_t code, const char* what) {
  if (c->status == NULL) c->status = pw_status_make(code, "trace export: %s", what);
}

static void* tj_alloc(tj_ctx_t* c, size_t count, size_t size) {
  void* p = NULL;
  if (c->status != NULL) return NULL;
  pw_status_t s = pw_allocator_calloc_array(pw_allocator_system(), count > 0 ? count : 1, size, 0, &p);
  if (s != NULL) c->status = pw_status_annotate(s, "trace export");
  return p;
}

static void tj_free(void* p, size_t count, size_t size) {
  if (p != NULL) pw_allocator_free(pw_allocator_system(), p, (count > 0 ? count : 1) * size);
}

/* ---- output ---- */

static void tj_flush(tj_ctx_t* c) {
  if (c->status != NULL || c->out_size == 0) return;
  pw_status_t s = c->sink(c->user, c->out, c->out_size);
  c->out_size = 0;
  if (s != NULL) c->status = pw_status_annotate(s, "trace export: sink");
}

static void tj_write(tj_ctx_t* c, const char* bytes, size_t size) {
  if (c->status != NULL) return;
  if (c->out_size + size > TJ_OUT_CAPACITY) tj_flush(c);
  if (c->status != NULL) return;
  if (size > TJ_OUT_CAPACITY) {
    pw_status_t s = c->sink(c->user, bytes, size);
    if (s != NULL) c->status = pw_status_annotate(s, "trace export: sink");
    return;
  }
  memcpy(c->out + c->out_size, bytes, size);
  c->out_size += size;
}

#define TJ_DUMP_FLAGS (JSON_COMPACT | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(15))

/* Writes |value| (consumed) as JSON; NULL means building it failed. */
static void tj_write_json(tj_ctx_t* c, json_t* value) {
  if (value == NULL) tj_fail(c, PW_STATUS_RESOURCE_EXHAUSTED, "building a JSON event failed (out of memory)");
  if (c->status != NULL) {
    json_decref(value);
    return;
  }
  size_t need = json_dumpb(value, c->scratch, c->scratch_capacity, TJ_DUMP_FLAGS);
  if (need > c->scratch_capacity) {
    size_t capacity = need * 2;
    char* bigger = tj_alloc(c, capacity, 1);
    if (bigger != NULL) {
      tj_free(c->scratch, c->scratch_capacity, 1);
      c->scratch = bigger;
      c->scratch_capacity = capacity;
      need = json_dumpb(value, c->scratch, c->scratch_capacity, TJ_DUMP_FLAGS);
    }
  }
  json_decref(value);
  if (c->status != NULL) return;
  if (need == 0) {
    tj_fail(c, PW_STATUS_INTERNAL, "jansson could not encode an event");
    return;
  }
  tj_write(c, c->scratch, need);
}

static void tj_emit(tj_ctx_t* c, json_t* event) {
  if (c->status == NULL && c->events++ > 0) tj_write(c, ",\n", 2);
  tj_write_json(c, event);
}

/* ---- values ---- */

/* Copies NUL-terminated |in| (at most |max| bytes of it) into |out| as
 * valid UTF-8: each byte of an ill-formed or truncated sequence becomes
 * U+FFFD; stops before |out| would overflow. Names come from users and
 * are cut at PW_TRACE_NAME_MAX bytes, possibly inside a character. */
static const char* tj_clean(char* out, size_t capacity, const char* in, size_t max) {
  size_t o = 0;
  const unsigned char* s = (const unsigned char*)(in != NULL ? in : "");
  for (size_t i = 0; i < max && s[i] != 0;) {
    unsigned b = s[i];
    size_t len = b < 0x80 ? 1 : (b >= 0xC2 && b <= 0xDF) ? 2 : (b >= 0xE0 && b <= 0xEF) ? 3
               : (b >= 0xF0 && b <= 0xF4) ? 4 : 0;
    bool ok = len > 0;
    for (size_t k = 1; ok && k < len; ++k) ok = i + k < max && (s[i + k] & 0xC0) == 0x80;
    if (ok && len == 3) {
      unsigned b1 = s[i + 1];
      ok = !(b == 0xE0 && b1 < 0xA0) && !(b == 0xED && b1 >= 0xA0); /* overlong, surrogate */
    }
    if (ok && len == 4) {
      unsigned b1 = s[i + 1];
      ok = !(b == 0xF0 && b1 < 0x90) && !(b == 0xF4 && b1 >= 0x90); /* overlong, > U+10FFFF */
    }
    const unsigned char* piece = ok ? s + i : (const unsigned char*)"\xEF\xBF\xBD";
    size_t piece_len = ok ? len : 3;
    if (o + piece_len + 1 > capacity) break;
    memcpy(out + o, piece, piece_len);
    o += piece_len;
    i += ok ? len : 1;
  }
  out[o] = 0;
  return out;
}

/* A JSON string of |in| (see tj_clean). */
static json_t* tj_str(const char* in, size_t max) {
  char clean[3 * TJ_TEXT_MAX + 1];
  return json_string(tj_clean(clean, sizeof(clean), in, max < TJ_TEXT_MAX ? max : TJ_TEXT_MAX));
}

static json_t* tj_u64(uint64_t v) {
  if (v <= (uint64_t)INT64_MAX) return json_integer((json_int_t)v);
  char text[24];
  snprintf(text, sizeof(text), "%llu", (unsigned long long)v);
  return json_string(text);
}

/* Microseconds since the trace's origin, with ns precision. */
static double tj_us(const tj_ctx_t* c, uint64_t ns) {
  uint64_t origin = c->dump->origin_ns;
  return ns > origin ? (double)(ns - origin) / 1000.0 : 0.0;
}

static void tj_set(tj_ctx_t* c, json_t* object, const char* key, json_t* value) {
  if (object == NULL || json_object_set_new(object, key, value) != 0) {
    tj_fail(c, PW_STATUS_RESOURCE_EXHAUSTED, "building a JSON event failed (out of memory)");
  }
}

/* {"ph":ph,"name":name,"pid":pid,"tid":tid,"ts":us} plus "cat" when set. */
static json_t* tj_event(tj_ctx_t* c, const char* ph, const char* name, const char* cat,
                        uint32_t pid, uint32_t tid, uint64_t ts_ns) {
  json_t* e = json_object();
  tj_set(c, e, "ph", json_string(ph));
  tj_set(c, e, "name", tj_str(name, TJ_TEXT_MAX));
  if (cat != NULL) tj_set(c, e, "cat", json_string(cat));
  tj_set(c, e, "pid", json_integer(pid));
  tj_set(c, e, "tid", json_integer(tid));
  tj_set(c, e, "ts", json_real(tj_us(c, ts_ns)));
  return e;
}

static json_t* tj_args(tj_ctx_t* c, json_t* event) {
  json_t* args = json_object();
  tj_set(c, event, "args", args);
  return args;
}

static const char* tj_code_name(uint32_t code) {
  return pw_status_code_string((pw_status_code_t)code);
}

/* ---- units ---- */

static int tj_unit_cmp(uint32_t slice, uint32_t device, uint32_t count, const tj_unit_t* u) {
  if (slice != u->slice) return slice < u->slice ? -1 : 1;
  if (device != u->device) return device < u->device ? -1 : 1;
  if (count != u->count) return count < u->count ? -1 : 1;
  return 0;
}

/* The index of the first unit not below (slice, device, count). */
static size_t tj_unit_lower(const tj_ctx_t* c, uint32_t slice, uint32_t device, uint32_t count) {
  size_t lo = 0, hi = c->unit_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (tj_unit_cmp(slice, device, count, &c->units[mid]) > 0) lo = mid + 1; else hi = mid;
  }
  return lo;
}

/* The unit (slice, device, count) exactly, else the one of |slice| that
 * holds |device| when |contain|, else TJ_NONE. */
static size_t tj_unit_find(const tj_ctx_t* c, uint32_t slice, uint32_t device, uint32_t count,
                           bool contain) {
  size_t at = tj_unit_lower(c, slice, device, count);
  if (at < c->unit_count && tj_unit_cmp(slice, device, count, &c->units[at]) == 0) return at;
  if (!contain) return TJ_NONE;
  for (size_t i = at; i-- > 0;) { /* units below (slice, device) */
    const tj_unit_t* u = &c->units[i];
    if (u->slice != slice) break;
    if (device >= u->device && device - u->device < u->count) return i;
  }
  return TJ_NONE;
}

static void tj_unit_add(tj_ctx_t* c, uint32_t slice, uint32_t device, uint32_t count) {
  if (count == 0) count = 1;
  size_t at = tj_unit_lower(c, slice, device, count);
  if (at < c->unit_count && tj_unit_cmp(slice, device, count, &c->units[at]) == 0) return;
  if (c->unit_count == c->unit_capacity) {
    size_t capacity = c->unit_capacity ? c->unit_capacity * 2 : 64;
    tj_unit_t* bigger = tj_alloc(c, capacity, sizeof(*bigger));
    if (bigger == NULL) return;
    if (c->unit_count > 0) memcpy(bigger, c->units, c->unit_count * sizeof(*bigger));
    tj_free(c->units, c->unit_capacity, sizeof(*bigger));
    c->units = bigger;
    c->unit_capacity = capacity;
  }
  memmove(&c->units[at + 1], &c->units[at], (c->unit_count - at) * sizeof(*c->units));
  c->units[at] = (tj_unit_t){.slice = slice, .device = device, .count = count};
  ++c->unit_count;
}

static bool tj_on_unit(const pw_trace_record_t* r) {
  return r->slice != UINT32_MAX && r->device != UINT32_MAX;
}

/* Launches name their unit exactly (device, count); the other unit
 * records go on the launch unit holding their device. */
static bool tj_is_launch_kind(uint32_t kind) {
  return kind == PW_OBS_LAUNCH || kind == PW_OBS_LAUNCH_DONE;
}

static bool tj_is_copy_kind(uint32_t kind) {
  return kind == PW_OBS_COPY || kind == PW_OBS_COPY_DONE || kind == PW_OBS_FLOW || kind == PW_OBS_DEADLINE ||
         kind == PW_OBS_HOST_TASK || kind == PW_OBS_HOST_TASK_DONE;
}

/* A record that starts or ends an "X" span, and which end. */
static bool tj_is_span_kind(uint32_t k) {
  return k == PW_OBS_LAUNCH || k == PW_OBS_LAUNCH_DONE || k == PW_OBS_COPY || k == PW_OBS_COPY_DONE ||
         k == PW_OBS_HOST_TASK || k == PW_OBS_HOST_TASK_DONE;
}

/* The unit a record is drawn on (TJ_NONE: none). */
static size_t tj_unit_of(const tj_ctx_t* c, const pw_trace_record_t* r) {
  if (!tj_on_unit(r)) return TJ_NONE;
  uint32_t count = r->count > 0 ? r->count : 1;
  return tj_unit_find(c, r->slice, r->device, count, tj_is_copy_kind(r->kind));
}

/* Launch units exactly as recorded; then transfer and flow records on the
 * launch unit holding their device, or on a unit of their own. */
static void tj_collect_units(tj_ctx_t* c) {
  const pw_trace_dump_t* d = c->dump;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < d->record_count && c->status == NULL; ++i) {
      const pw_trace_record_t* r = &d->records[i];
      if (!tj_on_unit(r)) continue;
      bool mine = pass == 0 ? tj_is_launch_kind(r->kind) : tj_is_copy_kind(r->kind);
      if (mine && tj_unit_of(c, r) == TJ_NONE) tj_unit_add(c, r->slice, r->device, r->count);
    }
  }
  uint32_t tid = 0;
  for (size_t i = 0; i < c->unit_count; ++i) {
    tid = (i > 0 && c->units[i - 1].slice == c->units[i].slice) ? tid + 1 : 1;
    c->units[i].tid = tid;
    c->units[i].index = (uint32_t)i;
  }
}

/* ---- spans: pairing starts with ends ---- */

static int tj_mark_cmp(const void* a_, const void* b_) {
  const tj_mark_t* a = a_;
  const tj_mark_t* b = b_;
  if (a->unit != b->unit) return a->unit < b->unit ? -1 : 1;
  if (a->copy != b->copy) return a->copy < b->copy ? -1 : 1;
  if (a->gang != b->gang) return a->gang < b->gang ? -1 : 1;
  if (a->t != b->t) return a->t < b->t ? -1 : 1;
  if (a->is_end != b->is_end) return a->is_end < b->is_end ? -1 : 1;
  return a->record < b->record ? -1 : (a->record > b->record);
}

static int tj_span_cmp(const void* a_, const void* b_) {
  const tj_span_t* a = a_;
  const tj_span_t* b = b_;
  if (a->unit != b->unit) return a->unit < b->unit ? -1 : 1;
  if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
  size_t ra = a->start_record != TJ_NONE ? a->start_record : a->end_record;
  size_t rb = b->start_record != TJ_NONE ? b->start_record : b->end_record;
  return ra < rb ? -1 : (ra > rb);
}

static void tj_span_add(tj_ctx_t* c, const tj_mark_t* start, const tj_mark_t* end) {
  const pw_trace_record_t* recs = c->dump->records;
  tj_span_t* s = &c->spans[c->span_count++];
  const tj_mark_t* any = start != NULL ? start : end;
  s->unit = any->unit;
  s->copy = any->copy;
  s->gang = any->gang;
  s->start_record = start != NULL ? start->record : TJ_NONE;
  s->end_record = end != NULL ? end->record : TJ_NONE;
  if (start != NULL) {
    s->begin = recs[start->record].ts_ns;
  } else {
    uint64_t since = recs[end->record].since_ns;
    s->begin = since != 0 ? since : recs[end->record].ts_ns;
  }
  if (s->begin < c->dump->origin_ns) s->begin = c->dump->origin_ns;
  s->end = end != NULL ? recs[end->record].ts_ns : c->last_ts;
  if (s->end < s->begin) s->end = s->begin;
  if (start == NULL || end == NULL) ++c->unmatched;
}

/* Builds c->spans: one per start record, paired with its end record (same
 * unit, kind and gang, in time order), plus one per end whose start the
 * ring dropped. */
static void tj_build_spans(tj_ctx_t* c) {
  const pw_trace_dump_t* d = c->dump;
  size_t n = 0;
  for (size_t i = 0; i < d->record_count; ++i) {
    uint32_t k = d->records[i].kind;
    n += tj_is_span_kind(k) && tj_on_unit(&d->records[i]);
  }
  tj_mark_t* marks = tj_alloc(c, n, sizeof(*marks));
  c->spans = tj_alloc(c, n, sizeof(*c->spans));
  c->span_capacity = n;
  if (c->status != NULL) {
    tj_free(marks, n, sizeof(*marks));
    return;
  }
  size_t m = 0;
  for (size_t i = 0; i < d->record_count; ++i) {
    const pw_trace_record_t* r = &d->records[i];
    uint32_t k = r->kind;
    if (!tj_is_span_kind(k) || !tj_on_unit(r)) continue;
    bool is_end = k == PW_OBS_LAUNCH_DONE || k == PW_OBS_COPY_DONE || k == PW_OBS_HOST_TASK_DONE;
    /* An end names its start's time; when it cannot (since_ns 0: a trace
     * on a clock of its own), it sorts by its own, after its start. */
    uint64_t t = is_end && r->since_ns != 0 ? r->since_ns : r->ts_ns;
    marks[m++] = (tj_mark_t){.gang = r->gang, .t = t, .record = i,
                             .unit = (uint32_t)tj_unit_of(c, r),
                             .copy = k == PW_OBS_COPY || k == PW_OBS_COPY_DONE   ? TJ_COPY
                                     : k == PW_OBS_HOST_TASK || k == PW_OBS_HOST_TASK_DONE ? TJ_HOST
                                                                                         : TJ_LAUNCH,
                             .is_end = is_end};
  }
  qsort(marks, m, sizeof(*marks), tj_mark_cmp);
  const tj_mark_t* pending = NULL;
  for (size_t i = 0; i < m; ++i) {
    const tj_mark_t* k = &marks[i];
    if (pending != NULL && (pending->unit != k->unit || pending->copy != k->copy || pending->gang != k->gang)) {
      tj_span_add(c, pending, NULL);
      pending = NULL;
    }
    if (!k->is_end) {
      if (pending != NULL) tj_span_add(c, pending, NULL);
      pending = k;
    } else {
      tj_span_add(c, pending, k);
      pending = NULL;
    }
  }
  if (pending != NULL) tj_span_add(c, pending, NULL);
  tj_free(marks, n, sizeof(*marks));
  qsort(c->spans, c->span_count, sizeof(*c->spans), tj_span_cmp);
  /* A unit runs what it was handed in order: an X starts once the one
   * before it on its track ended. */
  for (size_t i = 0; i < c->span_count; ++i) {
    tj_span_t* s = &c->spans[i];
    uint64_t floor = (i > 0 && c->spans[i - 1].unit == s->unit) ? c->spans[i - 1].show_end : 0;
    s->show_begin = s->begin > floor ? s->begin : floor;
    s->show_end = s->end > s->show_begin ? s->end : s->show_begin;
  }
}

/* ---- flows ---- */

typedef struct tj_gang_key_t {
  uint64_t gang;
  uint64_t begin;
  uint32_t unit;
  uint32_t span;
} tj_gang_key_t;

static int tj_gang_cmp(const void* a_, const void* b_) {
  const tj_gang_key_t* a = a_;
  const tj_gang_key_t* b = b_;
  if (a->gang != b->gang) return a->gang < b->gang ? -1 : 1;
  if (a->unit != b->unit) return a->unit < b->unit ? -1 : 1;
  if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
  return a->span < b->span ? -1 : (a->span > b->span);
}

static void tj_sort_by_gang(tj_ctx_t* c) {
  c->by_gang = tj_alloc(c, c->span_count, sizeof(*c->by_gang));
  if (c->status != NULL) return;
  for (size_t i = 0; i < c->span_count; ++i) {
    const tj_span_t* s = &c->spans[i];
    c->by_gang[i] = (tj_gang_key_t){.gang = s->gang, .begin = s->begin, .unit = s->unit, .span = (uint32_t)i};
  }
  qsort(c->by_gang, c->span_count, sizeof(*c->by_gang), tj_gang_cmp);
}

/* The span of op |gang|: on the unit of |slice| holding |device| when
 * |slice| is not UINT32_MAX; else on the unit (any slice) holding mesh
 * device index |device|, else its first. NULL when none was recorded. */
static const tj_span_t* tj_find_span(const tj_ctx_t* c, uint64_t gang, uint32_t slice, uint32_t device) {
  size_t lo = 0, hi = c->span_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (c->by_gang[mid].gang < gang) lo = mid + 1; else hi = mid;
  }
  const tj_span_t* first = NULL;
  for (size_t i = lo; i < c->span_count && c->by_gang[i].gang == gang; ++i) {
    const tj_span_t* s = &c->spans[c->by_gang[i].span];
    const tj_unit_t* u = &c->units[s->unit];
    bool holds = device >= u->device && device - u->device < u->count;
    if (slice != UINT32_MAX) {
      if (u->slice == slice && holds) return s;
      continue;
    }
    if (holds) return s;
    if (first == NULL) first = s;
  }
  return first;
}

/* FLOW |r|: "s" inside the producer's X (1 ns before its end), "f" with
 * "bp":"e" inside the consumer's X (1 ns after its start). Perfetto and
 * chrome://tracing bind a flow event to the slice enclosing it on its
 * track; strictly inside, that holds whatever order a viewer gives events
 * of equal timestamps. An X shorter than 2 ns cannot hold one: not drawn
 * (counted in otherData.flows_not_drawn). */
static void tj_emit_flow(tj_ctx_t* c, const pw_trace_record_t* r) {
  const tj_span_t* to = tj_find_span(c, r->gang, r->slice, r->device);
  const tj_span_t* from = tj_find_span(c, r->from_gang, UINT32_MAX, r->device);
  if (to == NULL || from == NULL || from->show_end - from->show_begin < 2 ||
      to->show_end - to->show_begin < 2) {
    ++c->flows_unbound;
    return;
  }
  uint64_t id = ++c->flows;
  const tj_unit_t* fu = &c->units[from->unit];
  const tj_unit_t* tu = &c->units[to->unit];
  json_t* s = tj_event(c, "s", "dataflow", "flow", TJ_PID_SLICE0 + fu->slice, fu->tid, from->show_end - 1);
  tj_set(c, s, "id", tj_u64(id));
  tj_emit(c, s);
  json_t* f = tj_event(c, "f", "dataflow", "flow", TJ_PID_SLICE0 + tu->slice, tu->tid, to->show_begin + 1);
  tj_set(c, f, "id", tj_u64(id));
  tj_set(c, f, "bp", json_string("e"));
  json_t* args = tj_args(c, f);
  tj_set(c, args, "from_gang", tj_u64(r->from_gang));
  tj_set(c, args, "gang", tj_u64(r->gang));
  tj_emit(c, f);
}

/* ---- events ---- */

static void tj_emit_span(tj_ctx_t* c, const tj_span_t* s) {
  const pw_trace_record_t* recs = c->dump->records;
  const pw_trace_record_t* r = &recs[s->end_record != TJ_NONE ? s->end_record : s->start_record];
  const pw_trace_record_t* start = s->start_record != TJ_NONE ? &recs[s->start_record] : NULL;
  const tj_unit_t* u = &c->units[s->unit];
  char name[PW_TRACE_NAME_MAX + 8];
  const char* op = r->name[0] != 0 ? r->name : (start != NULL ? start->name : "");
  static const char* const prefix[] = {"", "copy ", "host "};
  static const char* const fallback[] = {"op", "transfer", "task"};
  static const char* const cat[] = {"op", "copy", "host"};
  snprintf(name, sizeof(name), "%s%.*s", prefix[s->copy], PW_TRACE_NAME_MAX - 1,
           op[0] != 0 ? op : fallback[s->copy]);
  json_t* e = tj_event(c, "X", name, cat[s->copy], TJ_PID_SLICE0 + u->slice, u->tid, s->show_begin);
  tj_set(c, e, "dur", json_real((double)(s->show_end - s->show_begin) / 1000.0));
  json_t* a = tj_args(c, e);
  tj_set(c, a, "gang", tj_u64(s->gang));
  tj_set(c, a, "exec", tj_u64(r->exec));
  tj_set(c, a, "node", json_integer(r->node));
  tj_set(c, a, "client", json_integer(r->client));
  tj_set(c, a, "launch_us", json_real(tj_us(c, s->begin)));
  if (s->end_record != TJ_NONE) tj_set(c, a, "done_us", json_real(tj_us(c, s->end)));
  if (s->show_begin > s->begin) tj_set(c, a, "queued_behind_us", json_real((double)(s->show_begin - s->begin) / 1000.0));
  uint32_t flags = r->flags | (start != NULL ? start->flags : 0);
  if (flags & PW_OBS_QUEUED) tj_set(c, a, "queued", json_true());
  if (flags & PW_OBS_HOST) tj_set(c, a, "host_launch", json_true());
  if (s->copy == TJ_COPY) tj_set(c, a, "bytes", tj_u64(start != NULL ? start->bytes : r->bytes));
  if (r->start_ns != 0 || r->end_ns != 0) {
    tj_set(c, a, "device_start_ns", tj_u64(r->start_ns));
    tj_set(c, a, "device_end_ns", tj_u64(r->end_ns));
  }
  if (s->end_record != TJ_NONE && (r->flags & PW_OBS_FAILED)) {
    tj_set(c, a, "status", json_string(tj_code_name(r->status_code)));
  }
  if (s->end_record == TJ_NONE) {
    tj_set(c, a, "unmatched", json_string("no end recorded (the trace stopped first): drawn to the trace's end"));
  } else if (start == NULL) {
    tj_set(c, a, "unmatched", json_string("no start recorded (dropped, or before the trace): drawn from since_ns"));
  }
  tj_emit(c, e);
}

/* An instant ("i") on the track of unit |unit| (thread scope). */
static void tj_emit_unit_instant(tj_ctx_t* c, const pw_trace_record_t* r, size_t unit, const char* what) {
  const tj_unit_t* u = &c->units[unit];
  char name[PW_TRACE_NAME_MAX + 24];
  snprintf(name, sizeof(name), "%s %s", what, r->name[0] != 0 ? r->name : "op");
  json_t* e = tj_event(c, "i", name, "failure", TJ_PID_SLICE0 + u->slice, u->tid, r->ts_ns);
  tj_set(c, e, "s", json_string("t"));
  json_t* a = tj_args(c, e);
  tj_set(c, a, "gang", tj_u64(r->gang));
  tj_set(c, a, "status", json_string(tj_code_name(r->kind == PW_OBS_DEADLINE ? PW_STATUS_DEADLINE_EXCEEDED
                                                                              : r->status_code)));
  tj_emit(c, e);
}

typedef struct tj_submit_t {
  uint64_t exec;
  size_t record;
} tj_submit_t;

static int tj_submit_cmp(const void* a_, const void* b_) {
  const tj_submit_t* a = a_;
  const tj_submit_t* b = b_;
  if (a->exec != b->exec) return a->exec < b->exec ? -1 : 1;
  return a->record < b->record ? -1 : (a->record > b->record);
}

static int tj_u64_cmp(const void* a_, const void* b_) {
  uint64_t a = *(const uint64_t*)a_, b = *(const uint64_t*)b_;
  return a < b ? -1 : (a > b);
}

static int tj_u32_cmp(const void* a_, const void* b_) {
  uint32_t a = *(const uint32_t*)a_, b = *(const uint32_t*)b_;
  return a < b ? -1 : (a > b);
}

static bool tj_is_controller_kind(uint32_t kind) {
  return kind == PW_OBS_SUBMIT || kind == PW_OBS_ADMIT || kind == PW_OBS_EXEC_DONE || kind == PW_OBS_OP_DONE ||
         (kind >= PW_OBS_SLICE_LOST && kind <= PW_OBS_ELASTIC);
}

/* The controller's tracks: tid 0 for events with no client, else tag + 1. */
static uint32_t tj_client_tid(uint32_t tag) { return tag == UINT32_MAX ? 0 : tag + 1; }

/* Indexes SUBMITs by exec, EXEC_DONEs, and the client tags the controller
 * shows (each sorted; the tags unique). */
static void tj_index_controller(tj_ctx_t* c) {
  const pw_trace_dump_t* d = c->dump;
  size_t ns = 0, nd = 0, nc = 0;
  for (size_t i = 0; i < d->record_count; ++i) {
    ns += d->records[i].kind == PW_OBS_SUBMIT;
    nd += d->records[i].kind == PW_OBS_EXEC_DONE;
    nc += tj_is_controller_kind(d->records[i].kind);
  }
  c->submits = tj_alloc(c, ns, sizeof(*c->submits));
  c->dones = tj_alloc(c, nd, sizeof(*c->dones));
  c->clients = tj_alloc(c, nc, sizeof(*c->clients));
  if (c->status != NULL) return;
  for (size_t i = 0; i < d->record_count; ++i) {
    const pw_trace_record_t* r = &d->records[i];
    if (r->kind == PW_OBS_SUBMIT) c->submits[c->submit_count++] = (tj_submit_t){r->exec, i};
    if (r->kind == PW_OBS_EXEC_DONE) c->dones[c->done_count++] = r->exec;
    if (tj_is_controller_kind(r->kind)) c->clients[c->client_count++] = r->client;
  }
  qsort(c->submits, c->submit_count, sizeof(*c->submits), tj_submit_cmp);
  qsort(c->dones, c->done_count, sizeof(*c->dones), tj_u64_cmp);
  qsort(c->clients, c->client_count, sizeof(*c->clients), tj_u32_cmp);
  size_t unique = 0;
  for (size_t i = 0; i < c->client_count; ++i) {
    if (unique == 0 || c->clients[unique - 1] != c->clients[i]) c->clients[unique++] = c->clients[i];
  }
  c->client_count = unique;
}

/* The SUBMIT of execution |exec| (its first), NULL when not recorded. */
static const pw_trace_record_t* tj_submit_of(const tj_ctx_t* c, uint64_t exec) {
  size_t lo = 0, hi = c->submit_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (c->submits[mid].exec < exec) lo = mid + 1; else hi = mid;
  }
  return lo < c->submit_count && c->submits[lo].exec == exec ? &c->dump->records[c->submits[lo].record] : NULL;
}

/* One async span per execution, "b" at SUBMIT and "e" at EXEC_DONE (cat
 * "exec", id its exec gang id), both named after the graph so that a
 * viewer groups a graph's executions; a missing end is drawn to the
 * trace's last timestamp, a missing start from its origin. */
static void tj_emit_async(tj_ctx_t* c, const pw_trace_record_t* r, bool begin, bool unmatched) {
  const pw_trace_record_t* submit = tj_submit_of(c, r->exec);
  char id[24];
  snprintf(id, sizeof(id), "0x%llx", (unsigned long long)r->exec);
  const char* name = submit != NULL && submit->name[0] != 0 ? submit->name : "exec";
  uint64_t ts = !unmatched ? r->ts_ns : begin ? c->dump->origin_ns : c->last_ts;
  json_t* e = tj_event(c, begin ? "b" : "e", name, "exec", TJ_PID_CONTROLLER, tj_client_tid(r->client), ts);
  tj_set(c, e, "id", json_string(id));
  json_t* a = tj_args(c, e);
  tj_set(c, a, "exec", tj_u64(r->exec));
  if (r->kind == PW_OBS_SUBMIT && !unmatched) tj_set(c, a, "ops", json_integer(r->count));
  if (r->kind == PW_OBS_EXEC_DONE && !unmatched && (r->flags & PW_OBS_FAILED)) {
    tj_set(c, a, "status", json_string(tj_code_name(r->status_code)));
  }
  if (unmatched) {
    tj_set(c, a, "unmatched", json_string(begin ? "no SUBMIT recorded: drawn from the trace's start"
                                                : "no EXEC_DONE recorded: drawn to the trace's end"));
    ++c->unmatched;
  }
  tj_emit(c, e);
}

/* On the controller's "runtime" track (no client): a slice lost or back
 * as an instant; a snapshot's copy and write and the elastic helper's
 * re-mesh as async spans from their start (an instant when it is
 * unknown). */
static void tj_emit_runtime(tj_ctx_t* c, const pw_trace_record_t* r) {
  char name[PW_TRACE_NAME_MAX + 64];
  const char* what = r->kind == PW_OBS_SLICE_LOST ? "lost" : "back";
  switch (r->kind) {
    case PW_OBS_SLICE_LOST:
    case PW_OBS_SLICE_BACK:
      snprintf(name, sizeof(name), "slice %u %s", r->slice, what);
      break;
    case PW_OBS_SNAPSHOT:
    case PW_OBS_SNAPSHOT_PERSIST:
      snprintf(name, sizeof(name), "%s of step %" PRIu64, r->kind == PW_OBS_SNAPSHOT ? "snapshot" : "persist",
               r->exec);
      break;
    default:
      snprintf(name, sizeof(name), "%s onto %u slices (step %" PRIu64 ")",
               (r->flags & PW_OBS_GROWN) ? "grown" : "recovered", r->count, r->exec);
      break;
  }
  bool span = r->kind >= PW_OBS_SNAPSHOT && r->since_ns != 0 && r->since_ns <= r->ts_ns;
  const char* cat = r->kind <= PW_OBS_SLICE_BACK ? "failure"
                    : r->kind == PW_OBS_ELASTIC  ? "elastic"
                    : r->kind == PW_OBS_SNAPSHOT ? "snapshot"
                                                 : "persist";
  char id[48];
  snprintf(id, sizeof(id), "step%" PRIu64 "@0x%" PRIx64, r->exec, r->ts_ns);
  /* Spans of one kind may overlap (a snapshot taken while the last is
   * still copying): async "b"/"e" pairs, matched by (cat, id). */
  for (int end = 0; end < (span ? 2 : 1); ++end) {
    const char* ph = !span ? "i" : end ? "e" : "b";
    json_t* e = tj_event(c, ph, name, cat, TJ_PID_CONTROLLER, 0, span && !end ? r->since_ns : r->ts_ns);
    if (span) {
      tj_set(c, e, "id", json_string(id));
    } else {
      tj_set(c, e, "s", json_string("t"));
    }
    json_t* a = tj_args(c, e);
    if (r->slice != UINT32_MAX) tj_set(c, a, "slice", json_integer(r->slice));
    if (r->kind >= PW_OBS_SNAPSHOT) tj_set(c, a, "step", tj_u64(r->exec));
    if (r->kind == PW_OBS_SNAPSHOT || r->kind == PW_OBS_SNAPSHOT_PERSIST) tj_set(c, a, "bytes", tj_u64(r->bytes));
    if (r->kind == PW_OBS_ELASTIC) tj_set(c, a, "slices", json_integer(r->count));
    if (r->kind == PW_OBS_SLICE_LOST || (r->flags & PW_OBS_FAILED)) {
      tj_set(c, a, "status", json_string(tj_code_name(r->status_code)));
    }
    tj_emit(c, e);
  }
}

/* What the controller process shows of |r|: SUBMIT, ADMIT and a failed
 * OP_DONE as instants on the client's track; SUBMIT and EXEC_DONE as the
 * ends of the execution's async span; the runtime's events (above). */
static void tj_emit_controller(tj_ctx_t* c, const pw_trace_record_t* r) {
  char name[PW_TRACE_NAME_MAX + 24];
  const char* op = r->name[0] != 0 ? r->name : NULL;
  if (r->kind >= PW_OBS_SLICE_LOST && r->kind <= PW_OBS_ELASTIC) {
    tj_emit_runtime(c, r);
    return;
  }
  switch (r->kind) {
    case PW_OBS_SUBMIT:
      if (tj_submit_of(c, r->exec) == r) {
        tj_emit_async(c, r, true, false);
        if (!bsearch(&r->exec, c->dones, c->done_count, sizeof(uint64_t), tj_u64_cmp)) tj_emit_async(c, r, false, true);
      }
      snprintf(name, sizeof(name), "submit %s", op != NULL ? op : "graph");
      break;
    case PW_OBS_EXEC_DONE:
      if (tj_submit_of(c, r->exec) == NULL) tj_emit_async(c, r, true, true);
      tj_emit_async(c, r, false, false);
      return;
    case PW_OBS_ADMIT:
      snprintf(name, sizeof(name), "admit %s", op != NULL ? op : "op");
      break;
    case PW_OBS_OP_DONE:
      if (!(r->flags & PW_OBS_FAILED)) return;
      snprintf(name, sizeof(name), "failed %s", op != NULL ? op : "op");
      break;
    default:
      return;
  }
  json_t* e = tj_event(c, "i", name, r->kind == PW_OBS_OP_DONE ? "failure" : "controller", TJ_PID_CONTROLLER,
                       tj_client_tid(r->client), r->ts_ns);
  tj_set(c, e, "s", json_string("t"));
  json_t* a = tj_args(c, e);
  tj_set(c, a, "exec", tj_u64(r->exec));
  if (r->kind != PW_OBS_SUBMIT) tj_set(c, a, "gang", tj_u64(r->gang));
  if (r->kind == PW_OBS_SUBMIT) tj_set(c, a, "ops", json_integer(r->count));
  if (r->slice != UINT32_MAX) tj_set(c, a, "slice", json_integer(r->slice));
  if (r->kind == PW_OBS_OP_DONE) tj_set(c, a, "status", json_string(tj_code_name(r->status_code)));
  tj_emit(c, e);
}

/* ---- metadata ---- */

static void tj_emit_meta(tj_ctx_t* c, const char* what, uint32_t pid, uint32_t tid, const char* name,
                         int64_t sort_index) {
  bool is_name = strstr(what, "_name") != NULL;
  json_t* e = json_object();
  tj_set(c, e, "ph", json_string("M"));
  tj_set(c, e, "name", json_string(what));
  tj_set(c, e, "pid", json_integer(pid));
  tj_set(c, e, "tid", json_integer(tid));
  json_t* a = tj_args(c, e);
  if (is_name) tj_set(c, a, "name", tj_str(name, TJ_TEXT_MAX));
  else tj_set(c, a, "sort_index", json_integer(sort_index));
  tj_emit(c, e);
}

static void tj_emit_process(tj_ctx_t* c, uint32_t slice) {
  const pw_trace_dump_t* d = c->dump;
  char name[TJ_TEXT_MAX];
  if (slice < d->slice_count) {
    const pw_trace_slice_t* s = &d->slices[slice];
    snprintf(name, sizeof(name), "slice %u '%.100s' (%.100s)", slice, s->name != NULL ? s->name : "",
             s->backend != NULL ? s->backend : "?");
  } else {
    snprintf(name, sizeof(name), "slice %u (not in the dump's slices)", slice);
  }
  tj_emit_meta(c, "process_name", TJ_PID_SLICE0 + slice, 0, name, 0);
  tj_emit_meta(c, "process_sort_index", TJ_PID_SLICE0 + slice, 0, NULL, (int64_t)slice + 1);
}

static void tj_emit_unit_meta(tj_ctx_t* c, const tj_unit_t* u) {
  const pw_trace_dump_t* d = c->dump;
  const pw_trace_slice_t* s = u->slice < d->slice_count ? &d->slices[u->slice] : NULL;
  char name[TJ_TEXT_MAX];
  int n = u->count > 1 ? snprintf(name, sizeof(name), "devices %u-%u", u->device, u->device + u->count - 1)
                       : snprintf(name, sizeof(name), "device %u", u->device);
  if (s != NULL && s->device_hosts != NULL && u->device < s->device_count && n > 0) {
    snprintf(name + n, sizeof(name) - (size_t)n, " (host %u)", s->device_hosts[u->device]);
  }
  tj_emit_meta(c, "thread_name", TJ_PID_SLICE0 + u->slice, u->tid, name, 0);
  tj_emit_meta(c, "thread_sort_index", TJ_PID_SLICE0 + u->slice, u->tid, NULL, u->tid);
}

/* Process and thread names and sort indices for every pid and tid used. */
static void tj_emit_metadata(tj_ctx_t* c) {
  const pw_trace_dump_t* d = c->dump;
  tj_emit_meta(c, "process_name", TJ_PID_CONTROLLER, 0, "controller", 0);
  tj_emit_meta(c, "process_sort_index", TJ_PID_CONTROLLER, 0, NULL, 0);
  for (size_t i = 0; i < c->client_count; ++i) {
    uint32_t t = c->clients[i];
    char name[80];
    if (t < d->client_count && d->client_names[t][0] != 0) snprintf(name, sizeof(name), "%.63s", d->client_names[t]);
    else if (t == UINT32_MAX) snprintf(name, sizeof(name), "runtime");
    else snprintf(name, sizeof(name), "client %u", t);
    tj_emit_meta(c, "thread_name", TJ_PID_CONTROLLER, tj_client_tid(t), name, 0);
    tj_emit_meta(c, "thread_sort_index", TJ_PID_CONTROLLER, tj_client_tid(t), NULL, tj_client_tid(t));
  }
  for (uint32_t s = 0; s < d->slice_count; ++s) tj_emit_process(c, s);
  for (size_t i = 0; i < c->unit_count; ++i) { /* slices the dump does not list */
    uint32_t s = c->units[i].slice;
    if (s >= d->slice_count && (i == 0 || c->units[i - 1].slice != s)) tj_emit_process(c, s);
  }
  for (size_t i = 0; i < c->unit_count; ++i) tj_emit_unit_meta(c, &c->units[i]);
}

static void tj_emit_trailer(tj_ctx_t* c) {
  const pw_trace_dump_t* d = c->dump;
  tj_write(c, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":", 38);
  json_t* o = json_object();
  tj_set(c, o, "exporter", json_string("libpathways"));
  tj_set(c, o, "clock", tj_str(d->clock != NULL ? d->clock : "", TJ_TEXT_MAX));
  tj_set(c, o, "origin_ns", tj_u64(d->origin_ns));
  tj_set(c, o, "dropped", tj_u64(d->dropped));
  tj_set(c, o, "thread_count", json_integer(d->thread_count));
  tj_set(c, o, "records", tj_u64(d->record_count));
  tj_set(c, o, "unmatched", tj_u64(c->unmatched));
  tj_set(c, o, "flows", tj_u64(c->flows));
  tj_set(c, o, "flows_not_drawn", tj_u64(c->flows_unbound));
  tj_write_json(c, o);
  tj_write(c, "}\n", 2);
}

static pw_status_t tj_check(const pw_trace_dump_t* d, pw_trace_sink_fn_t sink) {
  if (d == NULL || sink == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "trace export: %s is NULL", d == NULL ? "dump" : "sink");
  }
  if (d->record_count > 0 && d->records == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "trace export: %zu records but records is NULL",
                          d->record_count);
  }
  if ((d->slice_count > 0 && d->slices == NULL) || (d->client_count > 0 && d->client_names == NULL)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "trace export: %s count set but the array is NULL",
                          d->slice_count > 0 && d->slices == NULL ? "slice" : "client");
  }
  if (d->record_count >= UINT32_MAX) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE, "trace export: %zu records (at most %u)", d->record_count,
                          UINT32_MAX - 1);
  }
  return NULL;
}

pw_status_t pw__trace_export_json(const pw_trace_dump_t* dump, pw_trace_sink_fn_t sink, void* user) {
  PW_RETURN_IF_ERROR(tj_check(dump, sink));
  tj_ctx_t c = {.dump = dump, .sink = sink, .user = user, .scratch_capacity = 4096};
  c.out = tj_alloc(&c, TJ_OUT_CAPACITY, 1);
  c.scratch = tj_alloc(&c, c.scratch_capacity, 1);
  for (size_t i = 0; i < dump->record_count; ++i) {
    if (dump->records[i].ts_ns > c.last_ts) c.last_ts = dump->records[i].ts_ns;
  }
  if (c.last_ts < dump->origin_ns) c.last_ts = dump->origin_ns;
  tj_collect_units(&c);
  tj_build_spans(&c);
  tj_sort_by_gang(&c);
  tj_index_controller(&c);
  tj_write(&c, "{\"traceEvents\":[\n", 17);
  tj_emit_metadata(&c);
  for (size_t i = 0; i < c.span_count && c.status == NULL; ++i) tj_emit_span(&c, &c.spans[i]);
  for (size_t i = 0; i < dump->record_count && c.status == NULL; ++i) {
    const pw_trace_record_t* r = &dump->records[i];
    size_t unit = tj_unit_of(&c, r);
    if (r->kind == PW_OBS_FLOW && unit != TJ_NONE) {
      tj_emit_flow(&c, r);
    } else if (r->kind == PW_OBS_DEADLINE && unit != TJ_NONE) {
      tj_emit_unit_instant(&c, r, unit, "deadline");
    } else if ((r->kind == PW_OBS_LAUNCH_DONE || r->kind == PW_OBS_COPY_DONE ||
                r->kind == PW_OBS_HOST_TASK_DONE) &&
               (r->flags & PW_OBS_FAILED) && unit != TJ_NONE) {
      tj_emit_unit_instant(&c, r, unit, "failed");
    } else if (tj_is_controller_kind(r->kind)) {
      tj_emit_controller(&c, r);
    }
  }
  tj_emit_trailer(&c);
  tj_flush(&c);
  tj_free(c.out, TJ_OUT_CAPACITY, 1);
  tj_free(c.scratch, c.scratch_capacity, 1);
  tj_free(c.units, c.unit_capacity, sizeof(*c.units));
  tj_free(c.spans, c.span_capacity, sizeof(*c.spans));
  tj_free(c.by_gang, c.span_count, sizeof(*c.by_gang));
  tj_free(c.submits, c.submit_count, sizeof(*c.submits));
  tj_free(c.dones, c.done_count, sizeof(*c.dones));
  tj_free(c.clients, c.client_count, sizeof(*c.clients));
  return c.status;
}
