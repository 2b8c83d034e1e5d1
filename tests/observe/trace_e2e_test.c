/* Traces of real runs, end to end: recorded by the dispatcher
 * (lib/sched/report.c), kept by the recorder (lib/observe/trace.c),
 * written by pw_runtime_trace_write_file (trace_write.c, the exporter
 * trace_json.c) and read back with jansson: one process per slice, one
 * track per unit of dispatch named by its devices and host, one X per
 * launch and transfer part, a flow per graph edge, the controller's
 * async span per execution. The files land in the traces directory,
 * which ctest's trace_validate then checks against the Trace Event
 * format (tools/trace_check.py). Also: the sim backend's virtual clock
 * as the trace clock, and the write calls' misuse. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "pathways/backends/sim.h"
#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(trace_e2e, .fini = pw_test_check_leaks);

static const char* kCopy8 = "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n";
/* The CPU backend's copy of positive data. */
static const char* kRelu8 =
    "kernel relu\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n";

static void trace_path(char* out, size_t size, const char* name) {
  snprintf(out, size, "%s/%s.json", PW_TRACE_DIR, name);
}

/* The events of |path| with ph |ph| (and name |name| and pid |pid| when
 * given). */
static size_t count_events(json_t* events, const char* ph, const char* name, json_int_t pid) {
  size_t n = 0, i;
  json_t* e;
  json_array_foreach(events, i, e) {
    if (strcmp(json_string_value(json_object_get(e, "ph")), ph) != 0) continue;
    if (name != NULL && strcmp(json_string_value(json_object_get(e, "name")), name) != 0) continue;
    if (pid >= 0 && json_integer_value(json_object_get(e, "pid")) != pid) continue;
    n++;
  }
  return n;
}

static bool has_thread_name(json_t* events, json_int_t pid, const char* want) {
  size_t i;
  json_t* e;
  json_array_foreach(events, i, e) {
    const char* ph = json_string_value(json_object_get(e, "ph"));
    const char* name = json_string_value(json_object_get(e, "name"));
    if (strcmp(ph, "M") != 0 || strcmp(name, "thread_name") != 0) continue;
    if (json_integer_value(json_object_get(e, "pid")) != pid) continue;
    const char* got = json_string_value(json_object_get(json_object_get(e, "args"), "name"));
    if (got != NULL && strcmp(got, want) == 0) return true;
  }
  return false;
}

static json_t* load(const char* path) {
  json_error_t error;
  json_t* root = json_load_file(path, 0, &error);
  cr_assert_not_null(root, "%s: %s (line %d)", path, error.text, error.line);
  json_t* events = json_object_get(root, "traceEvents");
  cr_assert(json_is_array(events), "%s: no traceEvents array", path);
  return root;
}

/* param -> "first" (slice A) -> "hop" (to slice B) -> "second" (B). */
static void hop_trace(pw_fixture_backend_t kind, const char* name, uint32_t units) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, kind, 2, "2x4", pw_allocator_system()));
  pw_vslice_t vs[2];
  uint32_t slice_of[2];
  for (int s = 0; s < 2; ++s) {
    OK(pw_fixture_vslice(&f, "2x4", &vs[s]));
    pw_mesh_shape_t mesh;
    OK(pw_vslice_binding(f.client, vs[s], &slice_of[s], &mesh));
  }
  pw_executable_t copy;
  bool cpu = kind == PW_FIXTURE_CPU || kind == PW_FIXTURE_CPU_QUEUED;
  OK(pw_fixture_compile(&f, vs[0], cpu ? kRelu8 : kCopy8, &copy));
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  uint32_t p, a, t, b;
  OK(pw_graph_add_parameter(f.client, g, vs[0], &spec, &p));
  pw_value_t v = pw_value(p, 0);
  OK(pw_graph_add_compute(f.client, g, "first", copy, vs[0], &v, 1, &a));
  OK(pw_graph_add_transfer(f.client, g, "hop", pw_value(a, 0), vs[1],
                           pw_sharding_split(0, PW_MESH_AXIS_ALL), &t));
  v = pw_value(t, 0);
  OK(pw_graph_add_compute(f.client, g, "second", copy, vs[1], &v, 1, &b));
  OK(pw_graph_add_output(f.client, g, pw_value(b, 0)));
  OK(pw_graph_finalize(f.client, g));
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  pw_buffer_t arg;
  OK(pw_fixture_f32(&f, vs[0], 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), data, &arg));
  const uint32_t runs = 5;
  OK(pw_runtime_trace_start(f.runtime, NULL));
  for (uint32_t r = 0; r < runs; ++r) {
    pw_buffer_t out;
    pw_event_t* done = NULL;
    OK(pw_graph_submit(f.client, g, &arg, 1, NULL, &out, 1, &done));
    OK(pw_fixture_wait(done));
    OK(pw_buffer_release(f.client, out));
  }
  char path[512];
  trace_path(path, sizeof(path), name);
  FAILS(pw_runtime_trace_write_file(f.runtime, path), PW_STATUS_FAILED_PRECONDITION,
        "still recording");
  OK(pw_runtime_trace_stop(f.runtime));
  OK(pw_runtime_trace_write_file(f.runtime, path));
  json_t* root = load(path);
  json_t* events = json_object_get(root, "traceEvents");
  json_int_t pa = 2 + slice_of[0], pb = 2 + slice_of[1];
  cr_assert_eq(count_events(events, "X", "first", pa), runs * units);
  cr_assert_eq(count_events(events, "X", "second", pb), runs * units);
  cr_assert_eq(count_events(events, "X", "copy hop", pb), runs * units);
  cr_assert_eq(count_events(events, "X", NULL, -1), 3 * runs * units);
  /* hop reads first and second reads hop, on each unit of B. */
  cr_assert_eq(count_events(events, "s", NULL, -1), 2 * runs * units);
  cr_assert_eq(count_events(events, "f", NULL, -1), 2 * runs * units);
  cr_assert_eq(count_events(events, "b", NULL, 1), runs, "an async span per execution");
  cr_assert_eq(count_events(events, "e", NULL, 1), runs);
  if (units == 4) {
    cr_assert(has_thread_name(events, pb, "devices 0-1 (host 4)") ||
                  has_thread_name(events, pb, "devices 0-1 (host 0)"),
              "no lane track on slice B");
  } else {
    cr_assert(has_thread_name(events, pa, "device 7 (host 0)") ||
                  has_thread_name(events, pa, "device 7 (host 7)"),
              "no device 7 track on slice A");
  }
  json_decref(root);
  OK(pw_buffer_release(f.client, arg));
  OK(pw_graph_release(f.client, g));
  OK(pw_executable_release(f.client, copy));
  pw_fixture_deinit(&f);
}

Test(trace_e2e, hop_on_threaded_double) { hop_trace(PW_FIXTURE_DOUBLE_THREADED, "e2e_threaded", 8); }
Test(trace_e2e, hop_on_queued_lanes) { hop_trace(PW_FIXTURE_DOUBLE_LANES_QUEUED, "e2e_queued_lanes", 4); }
Test(trace_e2e, hop_on_cpu_queued) { hop_trace(PW_FIXTURE_CPU_QUEUED, "e2e_cpu_queued", 8); }

static uint64_t sim_clock(void* user) { return pw_sim_backend_clock(*(pw_backend_t*)user); }

/* The sim's virtual time as the trace clock: every timestamp in the file
 * is a virtual time, from 0 at the start. */
Test(trace_e2e, sim_virtual_clock) {
  pw_sim_backend_options_t so;
  pw_sim_backend_options_init(&so);
  so.slice_count = 1;
  so.devices_per_slice = 4;
  so.mode = PW_SIM_MODE_MANUAL; /* the host acts at the time of each completion */
  pw_backend_t backend;
  OK(pw_sim_backend_create(&so, &backend));
  pw_backend_t owned = backend; /* the runtime takes it; the copy names it */
  pw_slice_desc_t slice = {.name = "sim", .mesh = pw_mesh_shape_make(1, (const uint32_t[]){4})};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &owned;
  ro.backend_count = 1;
  ro.slices = &slice;
  ro.slice_count = 1;
  pw_runtime_t* rt;
  OK(pw_runtime_create(&ro, &rt));
  pw_client_t* client;
  OK(pw_client_create(rt, NULL, &client));
  pw_vslice_t vs;
  OK(pw_vslice_create(client, &slice.mesh, PW_VSLICE_DEFAULT, &vs));
  const char* program = "op step\ntime 5us\ninput f32[4] split(0,0)\noutput f32[4] split(0,0)\n";
  pw_executable_t exe;
  OK(pw_executable_compile(client, vs, program, strlen(program), NULL, &exe));
  int64_t n = 4;
  pw_array_spec_t spec = {PW_DTYPE_F32, pw_shape_make(1, &n), pw_sharding_split(0, 0)};
  pw_graph_t g;
  OK(pw_graph_create(client, &g));
  uint32_t prev;
  OK(pw_graph_add_parameter(client, g, vs, &spec, &prev));
  for (int i = 0; i < 3; ++i) {
    pw_value_t in = pw_value(prev, 0);
    OK(pw_graph_add_compute(client, g, "step", exe, vs, &in, 1, &prev));
  }
  OK(pw_graph_add_output(client, g, pw_value(prev, 0)));
  OK(pw_graph_finalize(client, g));
  float x[4] = {1, 2, 3, 4};
  pw_buffer_t arg;
  OK(pw_buffer_from_host(client, vs, &spec, x, sizeof(x), &arg));
  pw_trace_options_t to;
  memset(&to, 0, sizeof(to));
  to.struct_size = sizeof(to);
  to.clock = sim_clock;
  to.clock_user = &backend;
  to.clock_name = "sim virtual";
  uint64_t origin = pw_sim_backend_clock(backend);
  OK(pw_runtime_trace_start(rt, &to));
  pw_buffer_t out;
  pw_event_t* done = NULL;
  OK(pw_graph_submit(client, g, &arg, 1, NULL, &out, 1, &done));
  OK(pw_sim_backend_run_all(backend, NULL));
  OK(pw_event_wait(done, pw_deadline_from_timeout(5000000000LL)));
  pw_event_release(done);
  uint64_t end = pw_sim_backend_clock(backend);
  OK(pw_runtime_trace_stop(rt));
  char path[512];
  trace_path(path, sizeof(path), "e2e_sim_clock");
  OK(pw_runtime_trace_write_file(rt, path));
  cr_assert_eq(end - origin, 3 * 5000, "three 5 us steps in virtual time");
  json_t* root = load(path);
  json_t* events = json_object_get(root, "traceEvents");
  const char* clock = json_string_value(json_object_get(json_object_get(root, "otherData"), "clock"));
  cr_assert_str_eq(clock, "sim virtual");
  /* The sim's four devices are one host's: one lane, one launch per op. */
  cr_assert_eq(count_events(events, "X", "step", -1), 3);
  cr_assert(has_thread_name(events, 2, "devices 0-3 (host 0)"), "no lane track");
  size_t i;
  json_t* e;
  double last_end = 0;
  json_array_foreach(events, i, e) {
    if (strcmp(json_string_value(json_object_get(e, "ph")), "X") != 0) continue;
    double ts = json_number_value(json_object_get(e, "ts"));
    double dur = json_number_value(json_object_get(e, "dur"));
    cr_assert_geq(ts, 0);
    if (ts + dur > last_end) last_end = ts + dur;
  }
  /* Microseconds of virtual time: the last op ends when the sim's clock
   * stopped. */
  cr_assert_float_eq(last_end, (double)(end - origin) / 1e3, 1e-3, "%f vs %f", last_end,
                     (double)(end - origin) / 1e3);
  json_decref(root);
  OK(pw_buffer_release(client, arg));
  OK(pw_buffer_release(client, out));
  OK(pw_graph_release(client, g));
  OK(pw_executable_release(client, exe));
  OK(pw_vslice_release(client, vs));
  OK(pw_client_destroy(client));
  OK(pw_runtime_destroy(rt));
}

static pw_status_t failing_sink(void* user, const char* bytes, size_t size) {
  (void)bytes;
  (void)size;
  int* calls = user;
  ++*calls;
  return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "disk full");
}

Test(trace_e2e, write_misuse) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 1, "2", pw_allocator_system()));
  int calls = 0;
  FAILS(pw_runtime_trace_write(f.runtime, failing_sink, &calls), PW_STATUS_NOT_FOUND,
        "no trace was started");
  FAILS(pw_runtime_trace_write(NULL, failing_sink, &calls), PW_STATUS_INVALID_ARGUMENT, "runtime");
  FAILS(pw_runtime_trace_write(f.runtime, NULL, &calls), PW_STATUS_INVALID_ARGUMENT, "fn is NULL");
  FAILS(pw_runtime_trace_write_file(f.runtime, ""), PW_STATUS_INVALID_ARGUMENT, "path");
  OK(pw_runtime_trace_start(f.runtime, NULL));
  OK(pw_runtime_trace_stop(f.runtime));
  FAILS(pw_runtime_trace_write(f.runtime, failing_sink, &calls), PW_STATUS_RESOURCE_EXHAUSTED,
        "disk full");
  cr_assert_eq(calls, 1, "the export stops at the sink's first error");
  FAILS(pw_runtime_trace_write_file(f.runtime, "/nonexistent-dir/x.json"), PW_STATUS_UNAVAILABLE,
        "/nonexistent-dir/x.json.tmp");
  pw_fixture_deinit(&f);
}
