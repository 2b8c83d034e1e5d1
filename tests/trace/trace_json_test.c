/* The Chrome Trace Event exporter (lib/observe/trace_json.c) on synthetic
 * dumps built here from pw_trace_record_t arrays: lanes and devices named
 * by host, queued launches that overlap in time drawn back to back,
 * transfers, flows across slices (bound inside the X events), failures
 * and deadlines, records the trace cut off, hostile names, an empty dump,
 * failing sinks and bad arguments. Each export is parsed back with
 * jansson and its structure asserted exactly; every file written goes to
 * PW_TRACE_DIR, where ctest trace_validate runs tools/trace_check.py on
 * it. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "observe/observe.h"
#include "observe/trace_record.h"
#include "support/test_allocators.h"

TestSuite(trace_json, .fini = pw_test_check_leaks);

#define ORIGIN 1000000000ull /* the dump's origin_ns: ts values are shown from it */
#define MAX_RECORDS 12000

typedef struct recs_t {
  pw_trace_record_t r[MAX_RECORDS];
  size_t n;
} recs_t;

static recs_t g_recs;

/* Appends a record at ORIGIN + |t| ns; the caller sets what else it needs. */
static pw_trace_record_t* add(uint32_t kind, uint64_t t, uint32_t slice, uint32_t device, uint32_t count,
                              uint64_t gang, const char* name) {
  cr_assert_lt(g_recs.n, MAX_RECORDS);
  pw_trace_record_t* r = &g_recs.r[g_recs.n++];
  memset(r, 0, sizeof(*r));
  r->kind = kind;
  r->ts_ns = ORIGIN + t;
  r->slice = slice;
  r->device = device;
  r->count = count;
  r->gang = gang;
  r->exec = gang;
  if (name != NULL) snprintf(r->name, sizeof(r->name), "%s", name);
  return r;
}

/* LAUNCH at |t0| and LAUNCH_DONE at |t1| of op |gang| on a unit. */
static void launch(uint64_t t0, uint64_t t1, uint32_t slice, uint32_t device, uint32_t count, uint64_t gang,
                   const char* name, uint32_t flags) {
  add(PW_OBS_LAUNCH, t0, slice, device, count, gang, name)->flags = flags;
  pw_trace_record_t* d = add(PW_OBS_LAUNCH_DONE, t1, slice, device, count, gang, name);
  d->since_ns = ORIGIN + t0;
  d->flags = flags;
}

static int rec_ts_cmp(const void* a_, const void* b_) {
  const pw_trace_record_t* a = a_;
  const pw_trace_record_t* b = b_;
  return a->ts_ns < b->ts_ns ? -1 : (a->ts_ns > b->ts_ns);
}

/* Records in ts order, ties in the order added (a stable sort). */
static void sort_records(void) {
  for (size_t i = 1; i < g_recs.n; ++i) {
    pw_trace_record_t r = g_recs.r[i];
    size_t j = i;
    while (j > 0 && rec_ts_cmp(&g_recs.r[j - 1], &r) > 0) {
      g_recs.r[j] = g_recs.r[j - 1];
      --j;
    }
    g_recs.r[j] = r;
  }
}

static const uint32_t k_hosts[8] = {0, 0, 0, 0, 1, 1, 1, 1};
static const pw_trace_slice_t k_slices[2] = {
    {.name = "train", .backend = "sim", .device_count = 8, .device_hosts = k_hosts},
    {.name = "serve", .backend = "cpu", .device_count = 8, .device_hosts = k_hosts},
};
static const char k_clients[3][64] = {"alice", "", "bob"};

static pw_trace_dump_t make_dump(void) {
  sort_records();
  return (pw_trace_dump_t){.records = g_recs.r, .record_count = g_recs.n, .dropped = 3, .thread_count = 2,
                           .slices = k_slices, .slice_count = 2, .client_names = k_clients,
                           .client_count = 3, .origin_ns = ORIGIN, .clock = "host monotonic"};
}

typedef struct membuf_t {
  char* data;
  size_t size, capacity;
  size_t calls, largest;
  size_t fail_at; /* 0: never; else the call that fails */
} membuf_t;

static pw_status_t mem_sink(void* user, const char* bytes, size_t size) {
  membuf_t* m = user;
  ++m->calls;
  if (m->fail_at != 0 && m->calls == m->fail_at) return pw_status_make(PW_STATUS_UNAVAILABLE, "disk full");
  if (size > m->largest) m->largest = size;
  if (m->size + size > m->capacity) {
    m->capacity = (m->size + size) * 2;
    m->data = realloc(m->data, m->capacity);
    cr_assert_not_null(m->data);
  }
  memcpy(m->data + m->size, bytes, size);
  m->size += size;
  return NULL;
}

/* Exports |dump|, writes it to PW_TRACE_DIR/|file| and parses it back. */
static json_t* export_load(const pw_trace_dump_t* dump, const char* file, membuf_t* out) {
  membuf_t local = {0};
  membuf_t* m = out != NULL ? out : &local;
  pw_status_t s = pw__trace_export_json(dump, mem_sink, m);
  cr_assert_null(s, "export: %s", pw_status_message(s));
  if (mkdir(PW_TRACE_DIR, 0777) != 0) cr_assert_eq(errno, EEXIST);
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", PW_TRACE_DIR, file);
  FILE* f = fopen(path, "wb");
  cr_assert_not_null(f, "%s", path);
  cr_assert_eq(fwrite(m->data, 1, m->size, f), m->size);
  cr_assert_eq(fclose(f), 0);
  json_error_t err;
  json_t* root = json_loadb(m->data, m->size, JSON_REJECT_DUPLICATES, &err);
  cr_assert_not_null(root, "%s: line %d: %s", file, err.line, err.text);
  free(m->data);
  m->data = NULL;
  return root;
}

static json_t* events_of(json_t* root) {
  json_t* ev = json_object_get(root, "traceEvents");
  cr_assert(json_is_array(ev));
  return ev;
}

static const char* str_of(json_t* o, const char* key) {
  json_t* v = json_object_get(o, key);
  return json_is_string(v) ? json_string_value(v) : NULL;
}

static json_int_t int_of(json_t* o, const char* key) {
  json_t* v = json_object_get(o, key);
  cr_assert(json_is_integer(v), "%s is not an integer", key);
  return json_integer_value(v);
}

static double num_of(json_t* o, const char* key) {
  json_t* v = json_object_get(o, key);
  cr_assert(json_is_number(v), "%s is not a number", key);
  return json_number_value(v);
}

static json_t* arg(json_t* e, const char* key) { return json_object_get(json_object_get(e, "args"), key); }

/* The pid whose process_name is |name|, or (with |pid| >= 0) the tid of
 * that process whose thread_name is |name|; -1 when none. */
static json_int_t named(json_t* root, json_int_t pid, const char* name) {
  size_t i;
  json_t* e;
  json_array_foreach(events_of(root), i, e) {
    const char* what = str_of(e, "name");
    if (strcmp(str_of(e, "ph"), "M") != 0) continue;
    if (strcmp(what, pid < 0 ? "process_name" : "thread_name") != 0) continue;
    if (pid >= 0 && int_of(e, "pid") != pid) continue;
    const char* n = json_string_value(arg(e, "name"));
    if (n != NULL && strcmp(n, name) == 0) return pid < 0 ? int_of(e, "pid") : int_of(e, "tid");
  }
  return -1;
}

static int ts_cmp(const void* a_, const void* b_) {
  double a = num_of(*(json_t* const*)a_, "ts"), b = num_of(*(json_t* const*)b_, "ts");
  return a < b ? -1 : (a > b);
}

/* The events of phase |ph| on (pid, tid) (tid < 0: any), by ts. */
static size_t collect(json_t* root, const char* ph, json_int_t pid, json_int_t tid, json_t** out, size_t cap) {
  size_t n = 0, i;
  json_t* e;
  json_array_foreach(events_of(root), i, e) {
    if (strcmp(str_of(e, "ph"), ph) != 0 || int_of(e, "pid") != pid) continue;
    if (tid >= 0 && int_of(e, "tid") != tid) continue;
    cr_assert_lt(n, cap);
    out[n++] = e;
  }
  for (size_t a = 1; a < n; ++a) { /* stable: ties stay in file order */
    json_t* v = out[a];
    size_t b = a;
    for (; b > 0 && ts_cmp(&out[b - 1], &v) > 0; --b) out[b] = out[b - 1];
    out[b] = v;
  }
  return n;
}

#define US(ns) ((double)(ns) / 1000.0)
#define EQ(a, b) cr_assert_float_eq((a), (b), 1e-9, "%.6f != %.6f", (double)(a), (double)(b))

Test(trace_json, lanes_named_by_host_in_mesh_order) {
  launch(2000, 5000, 0, 4, 4, 20, "matmul", PW_OBS_HOST);
  launch(1000, 3000, 0, 0, 4, 20, "matmul", PW_OBS_HOST);
  launch(6000, 9000, 0, 0, 4, 21, "relu", PW_OBS_HOST);
  launch(6000, 7500, 0, 4, 4, 21, "relu", PW_OBS_HOST);
  launch(100, 600, 1, 3, 1, 30, "embed", 0);
  add(PW_OBS_DEADLINE, 7000, 0, 5, 0, 21, "relu"); /* on device 5: drawn on its lane */
  pw_trace_dump_t dump = make_dump();
  json_t* root = export_load(&dump, "lanes.json", NULL);
  json_int_t p0 = named(root, -1, "slice 0 'train' (sim)"), p1 = named(root, -1, "slice 1 'serve' (cpu)");
  cr_assert_eq(p0, 2);
  cr_assert_eq(p1, 3);
  cr_assert_eq(named(root, -1, "controller"), 1);
  json_int_t lane0 = named(root, p0, "devices 0-3 (host 0)"), lane1 = named(root, p0, "devices 4-7 (host 1)");
  cr_assert_eq(lane0, 1, "mesh order: the lane of device 0 first");
  cr_assert_eq(lane1, 2);
  cr_assert_eq(named(root, p1, "device 3 (host 0)"), 1);
  cr_assert_eq(named(root, p0, "device 5 (host 1)"), -1, "no track of its own");
  json_t* x[8];
  cr_assert_eq(collect(root, "i", p0, lane1, x, 8), 1);
  cr_assert_str_eq(str_of(x[0], "name"), "deadline relu");
  cr_assert_eq(collect(root, "X", p0, lane0, x, 8), 2);
  EQ(num_of(x[0], "ts"), US(1000));
  EQ(num_of(x[0], "dur"), US(2000));
  cr_assert_str_eq(str_of(x[0], "name"), "matmul");
  cr_assert(json_is_true(arg(x[0], "host_launch")));
  cr_assert_eq(int_of(json_object_get(x[0], "args"), "gang"), 20);
  EQ(num_of(x[1], "ts"), US(6000));
  EQ(num_of(x[1], "dur"), US(3000));
  cr_assert_eq(collect(root, "X", p0, lane1, x, 8), 2);
  EQ(num_of(x[0], "ts"), US(2000));
  cr_assert_eq(collect(root, "X", p1, 1, x, 8), 1);
  EQ(num_of(x[0], "dur"), US(500));
  cr_assert_str_eq(str_of(root, "displayTimeUnit"), "ns");
  json_t* other = json_object_get(root, "otherData");
  cr_assert_eq(int_of(other, "dropped"), 3);
  cr_assert_eq(int_of(other, "thread_count"), 2);
  cr_assert_str_eq(str_of(other, "clock"), "host monotonic");
  cr_assert_eq(int_of(other, "unmatched"), 0);
  json_decref(root);
}

Test(trace_json, queued_launches_never_overlap) {
  /* Handed at 0, 10, 20 ns, ahead of readiness; the device ran them in
   * order and completed them at 100, 200, 300 ns. */
  for (uint64_t k = 0; k < 3; ++k) {
    add(PW_OBS_LAUNCH, 10 * k, 0, 2, 1, 40 + k, "step")->flags = PW_OBS_QUEUED;
  }
  for (uint64_t k = 0; k < 3; ++k) {
    pw_trace_record_t* d = add(PW_OBS_LAUNCH_DONE, 100 * (k + 1), 0, 2, 1, 40 + k, "step");
    d->since_ns = ORIGIN + 10 * k;
    d->flags = PW_OBS_QUEUED;
    d->start_ns = 5000 + 100 * k;
    d->end_ns = 5090 + 100 * k;
  }
  pw_trace_dump_t dump = make_dump();
  json_t* root = export_load(&dump, "queued.json", NULL);
  json_int_t tid = named(root, 2, "device 2 (host 0)");
  cr_assert_eq(tid, 1);
  json_t* x[4];
  cr_assert_eq(collect(root, "X", 2, tid, x, 4), 3);
  for (int k = 0; k < 3; ++k) {
    EQ(num_of(x[k], "ts"), US(k == 0 ? 0 : 100 * k));
    EQ(num_of(x[k], "dur"), US(k == 0 ? 100 : 100));
    EQ(json_number_value(arg(x[k], "launch_us")), US(10 * k));
    EQ(json_number_value(arg(x[k], "done_us")), US(100 * (k + 1)));
    cr_assert(json_is_true(arg(x[k], "queued")));
    cr_assert_eq(json_integer_value(arg(x[k], "device_start_ns")), 5000 + 100 * k);
    cr_assert_eq(json_integer_value(arg(x[k], "device_end_ns")), 5090 + 100 * k);
    if (k > 0) {
      EQ(json_number_value(arg(x[k], "queued_behind_us")), US(100 * k - 10 * k));
      EQ(num_of(x[k], "ts"), num_of(x[k - 1], "ts") + num_of(x[k - 1], "dur"));
    } else {
      cr_assert_null(arg(x[k], "queued_behind_us"));
    }
  }
  json_decref(root);
}

Test(trace_json, transfers_on_the_destination_track_with_bytes) {
  launch(0, 1000, 0, 0, 1, 50, "produce", 0);
  launch(0, 1000, 0, 4, 4, 50, "produce", PW_OBS_HOST);
  pw_trace_record_t* c = add(PW_OBS_COPY, 1200, 0, 5, 1, 51, "xfer"); /* into the lane 4-7 */
  c->bytes = 4096;
  pw_trace_record_t* d = add(PW_OBS_COPY_DONE, 1700, 0, 5, 1, 51, "xfer");
  d->since_ns = ORIGIN + 1200;
  d->bytes = 4096;
  c = add(PW_OBS_COPY, 1100, 1, 0, 1, 51, "xfer"); /* a device with no launches */
  c->bytes = 64;
  d = add(PW_OBS_COPY_DONE, 1300, 1, 0, 1, 51, "xfer");
  d->since_ns = ORIGIN + 1100;
  pw_trace_dump_t dump = make_dump();
  json_t* root = export_load(&dump, "transfers.json", NULL);
  json_int_t lane = named(root, 2, "devices 4-7 (host 1)");
  json_t* x[4];
  cr_assert_eq(collect(root, "X", 2, lane, x, 4), 2);
  cr_assert_str_eq(str_of(x[1], "name"), "copy xfer");
  cr_assert_str_eq(str_of(x[1], "cat"), "copy");
  cr_assert_eq(json_integer_value(arg(x[1], "bytes")), 4096);
  EQ(num_of(x[1], "ts"), US(1200));
  EQ(num_of(x[1], "dur"), US(500));
  cr_assert_eq(collect(root, "X", 2, named(root, 2, "device 0 (host 0)"), x, 4), 1);
  json_int_t dev = named(root, 3, "device 0 (host 0)");
  cr_assert_geq(dev, 1);
  cr_assert_eq(collect(root, "X", 3, dev, x, 4), 1);
  cr_assert_eq(json_integer_value(arg(x[0], "bytes")), 64);
  json_decref(root);
}

/* The flow of |id| (s and f), asserted to be bound inside the X events. */
static void expect_flow(json_t* root, json_t* s, json_int_t s_pid, json_int_t s_tid, json_t* producer,
                        json_t* f, json_int_t f_pid, json_int_t f_tid, json_t* consumer) {
  cr_assert_eq(int_of(s, "pid"), s_pid);
  cr_assert_eq(int_of(s, "tid"), s_tid);
  cr_assert_eq(int_of(f, "pid"), f_pid);
  cr_assert_eq(int_of(f, "tid"), f_tid);
  cr_assert(json_equal(json_object_get(s, "id"), json_object_get(f, "id")));
  cr_assert_str_eq(str_of(s, "cat"), str_of(f, "cat"));
  cr_assert_str_eq(str_of(s, "name"), str_of(f, "name"));
  cr_assert_str_eq(str_of(f, "bp"), "e");
  EQ(num_of(s, "ts"), num_of(producer, "ts") + num_of(producer, "dur") - US(1));
  EQ(num_of(f, "ts"), num_of(consumer, "ts") + US(1));
}

Test(trace_json, flows_across_slices_bind_inside_the_ops) {
  launch(0, 1000, 0, 0, 1, 60, "a", 0);     /* producer on devices 0 and 1 of slice 0 */
  launch(0, 1100, 0, 1, 1, 60, "a", 0);
  launch(0, 900, 0, 4, 4, 61, "lane_op", PW_OBS_HOST);
  launch(2000, 3000, 1, 1, 1, 70, "b", 0);  /* consumer on slice 1, device 1 */
  pw_trace_record_t* fl = add(PW_OBS_FLOW, 2000, 1, 1, 1, 70, "b");
  fl->from_gang = 60;
  launch(2500, 2600, 1, 6, 1, 71, "c", 0);  /* reads the lane's op: device 6 is in lane 4-7 */
  fl = add(PW_OBS_FLOW, 2500, 1, 6, 1, 71, "c");
  fl->from_gang = 61;
  fl = add(PW_OBS_FLOW, 2500, 1, 6, 1, 71, "c"); /* a producer the trace lacks: not drawn */
  fl->from_gang = 999;
  pw_trace_dump_t dump = make_dump();
  json_t* root = export_load(&dump, "flows.json", NULL);
  json_t* s[4];
  json_t* f[4];
  json_t* prod[2];
  json_t* cons[2];
  cr_assert_eq(collect(root, "s", 2, -1, s, 4), 2);
  cr_assert_eq(collect(root, "f", 3, -1, f, 4), 2);
  json_int_t d1 = named(root, 2, "device 1 (host 0)"), c1 = named(root, 3, "device 1 (host 0)");
  cr_assert_eq(collect(root, "X", 2, d1, prod, 2), 1);
  cr_assert_eq(collect(root, "X", 3, c1, cons, 2), 1);
  /* s[] by ts: the lane's (ends at 900) first, then device 1's (1100). */
  expect_flow(root, s[1], 2, d1, prod[0], f[0], 3, c1, cons[0]);
  json_int_t lane = named(root, 2, "devices 4-7 (host 1)"), c6 = named(root, 3, "device 6 (host 1)");
  cr_assert_eq(collect(root, "X", 2, lane, prod, 2), 1);
  cr_assert_eq(collect(root, "X", 3, c6, cons, 2), 1);
  expect_flow(root, s[0], 2, lane, prod[0], f[1], 3, c6, cons[0]);
  json_t* other = json_object_get(root, "otherData");
  cr_assert_eq(int_of(other, "flows"), 2);
  cr_assert_eq(int_of(other, "flows_not_drawn"), 1);
  json_decref(root);
}

Test(trace_json, failures_and_deadlines_are_instants_with_the_code) {
  add(PW_OBS_LAUNCH, 0, 0, 0, 1, 80, "bad");
  add(PW_OBS_DEADLINE, 500, 0, 0, 1, 80, "bad");
  pw_trace_record_t* d = add(PW_OBS_LAUNCH_DONE, 600, 0, 0, 1, 80, "bad");
  d->since_ns = ORIGIN;
  d->flags = PW_OBS_FAILED;
  d->status_code = PW_STATUS_DEADLINE_EXCEEDED;
  pw_trace_record_t* o = add(PW_OBS_OP_DONE, 700, 0, UINT32_MAX, 0, 80, "bad");
  o->flags = PW_OBS_FAILED;
  o->status_code = PW_STATUS_INTERNAL;
  o->client = 2;
  pw_trace_dump_t dump = make_dump();
  json_t* root = export_load(&dump, "failures.json", NULL);
  json_t* i[4];
  cr_assert_eq(collect(root, "i", 2, 1, i, 4), 2);
  cr_assert_str_eq(str_of(i[0], "name"), "deadline bad");
  cr_assert_str_eq(json_string_value(arg(i[0], "status")), "DEADLINE_EXCEEDED");
  cr_assert_str_eq(str_of(i[1], "name"), "failed bad");
  cr_assert_str_eq(str_of(i[1], "s"), "t");
  EQ(num_of(i[1], "ts"), US(600));
  json_t* x[2];
  cr_assert_eq(collect(root, "X", 2, 1, x, 2), 1);
  cr_assert_str_eq(json_string_value(arg(x[0], "status")), "DEADLINE_EXCEEDED");
  json_int_t bob = named(root, 1, "bob");
  cr_assert_eq(bob, 3);
  cr_assert_eq(collect(root, "i", 1, bob, i, 4), 1);
  cr_assert_str_eq(str_of(i[0], "name"), "failed bad");
  cr_assert_str_eq(json_string_value(arg(i[0], "status")), "INTERNAL");
  json_decref(root);
}

Test(trace_json, controller_tracks_per_client_and_async_executions) {
  pw_trace_record_t* r = add(PW_OBS_SUBMIT, 0, UINT32_MAX, UINT32_MAX, 2, 100, "step_fn");
  r->client = 0;
  r = add(PW_OBS_SUBMIT, 50, UINT32_MAX, UINT32_MAX, 1, 200, "");
  r->client = 1;
  r = add(PW_OBS_ADMIT, 60, 0, UINT32_MAX, 0, 100, "matmul");
  r->client = 0;
  launch(100, 400, 0, 0, 1, 100, "matmul", 0);
  r = add(PW_OBS_EXEC_DONE, 500, UINT32_MAX, UINT32_MAX, 0, 100, NULL);
  r->client = 0;
  r = add(PW_OBS_EXEC_DONE, 800, UINT32_MAX, UINT32_MAX, 0, 200, NULL);
  r->client = 1;
  r->flags = PW_OBS_FAILED;
  r->status_code = PW_STATUS_CANCELLED;
  pw_trace_dump_t dump = make_dump();
  json_t* root = export_load(&dump, "controller.json", NULL);
  json_int_t alice = named(root, 1, "alice"), unnamed = named(root, 1, "client 1");
  cr_assert_eq(alice, 1);
  cr_assert_eq(unnamed, 2);
  cr_assert_eq(named(root, 1, "bob"), -1, "bob never submitted: no track");
  json_t* b[4];
  json_t* e[4];
  cr_assert_eq(collect(root, "b", 1, -1, b, 4), 2);
  cr_assert_eq(collect(root, "e", 1, -1, e, 4), 2);
  cr_assert_str_eq(str_of(b[0], "name"), "step_fn");
  cr_assert_str_eq(str_of(e[0], "name"), "step_fn");
  cr_assert_str_eq(str_of(b[0], "id"), "0x64");
  cr_assert_str_eq(str_of(e[0], "id"), "0x64");
  cr_assert_str_eq(str_of(b[0], "cat"), "exec");
  EQ(num_of(e[0], "ts"), US(500));
  cr_assert_str_eq(str_of(b[1], "name"), "exec");
  cr_assert_str_eq(str_of(e[1], "id"), "0xc8");
  cr_assert_str_eq(json_string_value(arg(e[1], "status")), "CANCELLED");
  json_t* i[4];
  cr_assert_eq(collect(root, "i", 1, alice, i, 4), 2);
  cr_assert_str_eq(str_of(i[0], "name"), "submit step_fn");
  cr_assert_eq(json_integer_value(arg(i[0], "ops")), 2);
  cr_assert_str_eq(str_of(i[1], "name"), "admit matmul");
  cr_assert_eq(json_integer_value(arg(i[1], "slice")), 0);
  json_decref(root);
}

Test(trace_json, unmatched_records_end_at_the_trace_end) {
  launch(0, 100, 0, 0, 1, 90, "done", 0);
  add(PW_OBS_LAUNCH, 200, 0, 0, 1, 91, "cut");            /* the trace stopped first */
  pw_trace_record_t* d = add(PW_OBS_LAUNCH_DONE, 900, 0, 1, 1, 92, "orphan"); /* its LAUNCH dropped */
  d->since_ns = ORIGIN + 150;
  pw_trace_record_t* s = add(PW_OBS_SUBMIT, 10, UINT32_MAX, UINT32_MAX, 1, 90, "g");
  s->client = 0;
  s = add(PW_OBS_EXEC_DONE, 1000, UINT32_MAX, UINT32_MAX, 0, 77, NULL); /* SUBMIT dropped */
  s->client = 0;
  pw_trace_dump_t dump = make_dump();
  json_t* root = export_load(&dump, "unmatched.json", NULL);
  json_t* x[4];
  cr_assert_eq(collect(root, "X", 2, 1, x, 4), 2);
  EQ(num_of(x[1], "ts"), US(200));
  EQ(num_of(x[1], "dur"), US(800)); /* to the last record's ts */
  cr_assert(json_is_string(arg(x[1], "unmatched")));
  cr_assert_null(arg(x[0], "unmatched"));
  cr_assert_eq(collect(root, "X", 2, 2, x, 4), 1);
  EQ(num_of(x[0], "ts"), US(150));
  cr_assert(json_is_string(arg(x[0], "unmatched")));
  json_t* b[4];
  json_t* e[4];
  cr_assert_eq(collect(root, "b", 1, 1, b, 4), 2);
  cr_assert_eq(collect(root, "e", 1, 1, e, 4), 2);
  EQ(num_of(b[0], "ts"), 0.0); /* exec 77's, from the origin */
  EQ(num_of(e[1], "ts"), US(1000));
  cr_assert_eq(int_of(json_object_get(root, "otherData"), "unmatched"), 4);
  json_decref(root);
}

Test(trace_json, hostile_names_are_escaped_and_valid_utf8) {
  launch(0, 10, 0, 0, 1, 1, "say \"hi\"\n\tback\\slash", 0);
  pw_trace_record_t* r = add(PW_OBS_LAUNCH, 20, 0, 0, 1, 2, NULL);
  /* 38 ASCII bytes and the first byte of "é": cut inside a character. */
  memset(r->name, 'x', 38);
  r->name[38] = (char)0xC3;
  r->name[39] = 0;
  launch(40, 50, 0, 0, 1, 3, "\xE2\x98\x83 snow \xFF end", 0);
  pw_trace_record_t* s = add(PW_OBS_SUBMIT, 0, UINT32_MAX, UINT32_MAX, 1, 1, "g");
  s->client = 1;
  static const pw_trace_slice_t slices[1] = {
      {.name = "it's \"quoted\"\n", .backend = "b\xC3\xA4" "ckend", .device_count = 8, .device_hosts = k_hosts}};
  static const char clients[2][64] = {"", "\xC3\xBC" "n\xC3\xAF" "c\xC3\xB8" "d\xC3\xA9 \xE2\x98\x83"};
  pw_trace_dump_t dump = make_dump();
  dump.slices = slices;
  dump.slice_count = 1;
  dump.client_names = clients;
  dump.client_count = 2;
  json_t* root = export_load(&dump, "names.json", NULL);
  cr_assert_eq(named(root, -1, "slice 0 'it's \"quoted\"\n' (b\xC3\xA4" "ckend)"), 2);
  cr_assert_eq(named(root, 1, "\xC3\xBC" "n\xC3\xAF" "c\xC3\xB8" "d\xC3\xA9 \xE2\x98\x83"), 2);
  json_t* x[4];
  cr_assert_eq(collect(root, "X", 2, 1, x, 4), 3);
  cr_assert_str_eq(str_of(x[0], "name"), "say \"hi\"\n\tback\\slash");
  char cut[64];
  memset(cut, 'x', 38);
  strcpy(cut + 38, "\xEF\xBF\xBD");
  cr_assert_str_eq(str_of(x[1], "name"), cut);
  cr_assert_str_eq(str_of(x[2], "name"), "\xE2\x98\x83 snow \xEF\xBF\xBD end");
  json_decref(root);
}

Test(trace_json, empty_dump_is_a_valid_trace) {
  pw_trace_dump_t dump = {.origin_ns = 5, .clock = NULL};
  json_t* root = export_load(&dump, "empty.json", NULL);
  size_t i;
  json_t* e;
  json_array_foreach(events_of(root), i, e) cr_assert_str_eq(str_of(e, "ph"), "M");
  cr_assert_eq(json_array_size(events_of(root)), 2, "the controller's name and sort index");
  cr_assert_eq(int_of(json_object_get(root, "otherData"), "records"), 0);
  json_decref(root);
}

Test(trace_json, a_large_trace_streams_in_bounded_pieces) {
  for (uint64_t k = 0; k < 5000; ++k) launch(k * 100, k * 100 + 150, 0, (uint32_t)(k % 8), 1, 1000 + k, "op", 0);
  pw_trace_dump_t dump = make_dump();
  membuf_t m = {0};
  json_t* root = export_load(&dump, "large.json", &m);
  cr_assert_gt(m.calls, 4);
  cr_assert_leq(m.largest, 64 * 1024);
  json_t** x = malloc(sizeof(json_t*) * 1000);
  for (json_int_t t = 1; t <= 8; ++t) {
    cr_assert_eq(collect(root, "X", 2, t, x, 1000), 625);
    for (size_t k = 1; k < 625; ++k) {
      cr_assert_geq(num_of(x[k], "ts") + 1e-9, num_of(x[k - 1], "ts") + num_of(x[k - 1], "dur"));
    }
  }
  free(x);
  json_decref(root);
}

Test(trace_json, a_failing_sink_stops_the_export) {
  for (uint64_t k = 0; k < 2000; ++k) launch(k * 10, k * 10 + 5, 0, 0, 1, 1 + k, "op", 0);
  pw_trace_dump_t dump = make_dump();
  for (size_t fail_at = 1; fail_at <= 3; ++fail_at) {
    membuf_t m = {.fail_at = fail_at};
    pw_status_t s = pw__trace_export_json(&dump, mem_sink, &m);
    cr_assert_eq(pw_status_code(s), PW_STATUS_UNAVAILABLE);
    cr_assert_not_null(strstr(pw_status_message(s), "disk full"), "%s", pw_status_message(s));
    cr_assert_eq(m.calls, fail_at, "nothing written after the failing call");
    pw_status_free(s);
    free(m.data);
  }
}

Test(trace_json, bad_arguments_are_invalid_argument) {
  pw_trace_dump_t dump = {.record_count = 3};
  membuf_t m = {0};
  pw_status_t s = pw__trace_export_json(NULL, mem_sink, &m);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  s = pw__trace_export_json(&dump, NULL, &m);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  s = pw__trace_export_json(&dump, mem_sink, &m);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(pw_status_message(s), "records"));
  pw_status_free(s);
  cr_assert_eq(m.calls, 0);
}

/* A small pipeline, the trace docs/observability.md pictures
 * (scripts/trace-view renders it): two clients submit steps of a graph
 * that runs "forward" on slice 0's four devices, moves the result into
 * slice 1 and runs "loss" there; slice 1's launches are queued. */
Test(trace_json, a_pipeline_for_the_picture) {
  const uint64_t step = 40000;
  for (uint64_t k = 0; k < 4; ++k) {
    uint64_t t = k * step, exec = 1000 * (k + 1);
    uint32_t client = k % 2 == 0 ? 0 : 2;
    pw_trace_record_t* r = add(PW_OBS_SUBMIT, t, UINT32_MAX, UINT32_MAX, 3, exec, "train_step");
    r->client = client;
    for (uint32_t d = 0; d < 4; ++d) {
      uint64_t t0 = t + 1000 + 300 * d;
      launch(t0, t0 + 15000 + 500 * d, 0, d, 1, exec, "forward", 0);
      pw_trace_record_t* c = add(PW_OBS_COPY, t0 + 16000 + 500 * d, 1, d, 1, exec + 1, "to_serve");
      c->bytes = 1u << 20;
      pw_trace_record_t* fl = add(PW_OBS_FLOW, t0 + 16000 + 500 * d, 1, d, 1, exec + 1, "to_serve");
      fl->from_gang = exec;
      pw_trace_record_t* cd = add(PW_OBS_COPY_DONE, t0 + 20000 + 500 * d, 1, d, 1, exec + 1, "to_serve");
      cd->since_ns = ORIGIN + t0 + 16000 + 500 * d;
      cd->bytes = 1u << 20;
      uint64_t t1 = t0 + 16200 + 500 * d; /* queued behind the copy */
      launch(t1, t0 + 30000 + 300 * d, 1, d, 1, exec + 2, "loss", PW_OBS_QUEUED);
      fl = add(PW_OBS_FLOW, t1, 1, d, 1, exec + 2, "loss");
      fl->from_gang = exec + 1;
    }
    r = add(PW_OBS_EXEC_DONE, t + 33000, UINT32_MAX, UINT32_MAX, 0, exec, NULL);
    r->client = client;
  }
  pw_trace_dump_t dump = make_dump();
  json_t* root = export_load(&dump, "pipeline.json", NULL);
  json_t* x[32];
  for (json_int_t tid = 1; tid <= 4; ++tid) {
    cr_assert_eq(collect(root, "X", 2, tid, x, 32), 4, "forward x 4 on slice 0");
    cr_assert_eq(collect(root, "X", 3, tid, x, 32), 8, "copy and loss x 4 on slice 1");
  }
  cr_assert_eq(int_of(json_object_get(root, "otherData"), "flows"), 32);
  cr_assert_eq(int_of(json_object_get(root, "otherData"), "flows_not_drawn"), 0);
  json_decref(root);
}
