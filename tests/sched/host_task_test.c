/* Host nodes (pw_graph_add_host, lib/sched/host_task.c): a host function
 * ordered with its slice's compute ops, reading and writing shards in
 * place, on the CPU backend (pool and queue-ordered) and the test double
 * (lanes); errors, misuse, the registry of named tasks. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <string.h>

#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(host_task, .fini = pw_test_check_leaks);

enum { N = 8 };

static const char kScale2[] =
    "kernel scale\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\nattr alpha 2\n";
static const char kScale3[] =
    "kernel scale\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\nattr alpha 3\n";

/* What the test's host functions record. */
typedef struct probe_t {
  atomic_uint calls;
  atomic_uint destroyed;
  atomic_uint order[64]; /* tags in call order */
  atomic_uint next;
  uint32_t devices_seen;
  bool pointers_ok;
} probe_t;

/* out = in + 1 elementwise, over every device's shard; checks the
 * context's shape on the way. */
static pw_status_t plus_one(void* user, const pw_host_task_context_t* c) {
  probe_t* p = user;
  atomic_fetch_add(&p->calls, 1);
  p->devices_seen = c->device_count;
  p->pointers_ok = c->struct_size >= PW_HOST_TASK_CONTEXT_SIZE_V1 && c->input_count == 1 &&
                   c->output_count == 1 && c->input_bytes[0] == c->output_bytes[0] &&
                   c->input_specs[0].dtype == PW_DTYPE_F32;
  for (uint32_t m = 0; m < c->device_count; ++m) {
    const float* in = c->inputs[0][m];
    float* out = c->outputs[0][m];
    for (size_t i = 0; i < c->output_bytes[0] / sizeof(float); ++i) out[i] = in[i] + 1.0f;
  }
  return NULL;
}

static pw_status_t fails(void* user, const pw_host_task_context_t* c) {
  (void)c;
  atomic_fetch_add(&((probe_t*)user)->calls, 1);
  return pw_status_make(PW_STATUS_DATA_LOSS, "boom");
}

static void count_destroy(void* user) { atomic_fetch_add(&((probe_t*)user)->destroyed, 1); }

static pw_host_task_t task_of(pw_host_task_fn_t fn, probe_t* p) {
  pw_host_task_t t = {sizeof(pw_host_task_t), fn, p, count_destroy};
  return t;
}

static pw_array_spec_t spec8(void) {
  int64_t dims[1] = {N};
  return pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
}

/* x -> scale 2 -> host (+1) -> scale 3: outputs the host's and the last
 * value; every value must be exact. */
static void run_chain(pw_fixture_backend_t kind, const char* mesh) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, kind, 1, mesh, pw_allocator_system()));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, mesh, &vs));
  pw_executable_t s2, s3;
  OK(pw_fixture_compile(&f, vs, kScale2, &s2));
  OK(pw_fixture_compile(&f, vs, kScale3, &s3));
  probe_t probe;
  memset(&probe, 0, sizeof(probe));
  pw_host_task_t task = task_of(plus_one, &probe);
  pw_array_spec_t spec = spec8();
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  uint32_t x, a, h, c;
  OK(pw_graph_add_parameter(f.client, g, vs, &spec, &x));
  OK(pw_graph_add_compute(f.client, g, "a", s2, vs, (pw_value_t[]){pw_value(x, 0)}, 1, &a));
  OK(pw_graph_add_host(f.client, g, "plus1", &task, vs, (pw_value_t[]){pw_value(a, 0)}, 1, &spec,
                       1, &h));
  OK(pw_graph_add_compute(f.client, g, "c", s3, vs, (pw_value_t[]){pw_value(h, 0)}, 1, &c));
  OK(pw_graph_add_output(f.client, g, pw_value(h, 0)));
  OK(pw_graph_add_output(f.client, g, pw_value(c, 0)));
  float data[N];
  for (int i = 0; i < N; ++i) data[i] = (float)i;
  for (int run = 0; run < 3; ++run) { /* a cached block the second time */
    pw_buffer_t arg, outs[2];
    OK(pw_buffer_from_host(f.client, vs, &spec, data, sizeof(data), &arg));
    pw_event_t* done = NULL;
    OK(pw_graph_submit(f.client, g, &arg, 1, NULL, outs, 2, &done));
    OK(pw_fixture_wait(done));
    float got_h[N], got_c[N];
    OK(pw_buffer_to_host(f.client, outs[0], got_h, sizeof(got_h), PW_INFINITE_FUTURE));
    OK(pw_buffer_to_host(f.client, outs[1], got_c, sizeof(got_c), PW_INFINITE_FUTURE));
    for (int i = 0; i < N; ++i) {
      cr_assert_eq(got_h[i], 2.0f * (float)i + 1.0f, "run %d host[%d] = %g", run, i, got_h[i]);
      cr_assert_eq(got_c[i], 3.0f * (2.0f * (float)i + 1.0f), "run %d c[%d] = %g", run, i,
                   got_c[i]);
    }
    OK(pw_buffer_release(f.client, arg));
    OK(pw_buffer_release(f.client, outs[0]));
    OK(pw_buffer_release(f.client, outs[1]));
  }
  cr_assert_eq(atomic_load(&probe.calls), 3, "one call per run");
  cr_assert(probe.pointers_ok);
  pw_mesh_shape_t m;
  OK(pw_mesh_shape_parse(mesh, &m));
  cr_assert_eq(probe.devices_seen, pw_mesh_shape_device_count(&m));
  OK(pw_graph_release(f.client, g));
  pw_fixture_deinit(&f);
  cr_assert_eq(atomic_load(&probe.destroyed), 1, "destroy runs once, with the graph");
}

Test(host_task, runs_between_compute_ops_on_the_cpu_backend) { run_chain(PW_FIXTURE_CPU, "2"); }

Test(host_task, waits_for_the_device_queues_of_a_queued_slice) {
  run_chain(PW_FIXTURE_CPU_QUEUED, "4");
}

Test(host_task, one_device_slice) { run_chain(PW_FIXTURE_CPU, "1"); }

/* Host tasks record their tag: a task's call comes after every earlier
 * op of its slice, in the slice's sequence order, whichever client
 * submitted it. */
typedef struct tagged_t {
  probe_t* probe;
  uint32_t tag;
} tagged_t;

static pw_status_t record(void* user, const pw_host_task_context_t* c) {
  tagged_t* t = user;
  /* The input is the previous compute's output: all 2s over x = 1. */
  for (uint32_t m = 0; m < c->device_count; ++m) {
    const float* in = c->inputs[0][m];
    for (size_t i = 0; i < c->input_bytes[0] / sizeof(float); ++i) {
      if (in[i] != 2.0f) return pw_status_make(PW_STATUS_INTERNAL, "read %g", in[i]);
    }
  }
  uint32_t at = atomic_fetch_add(&t->probe->next, 1);
  if (at < 64) atomic_store(&t->probe->order[at], t->tag);
  return NULL;
}

Test(host_task, two_clients_on_one_slice_keep_gang_order) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_CPU, 1, "2", pw_allocator_system()));
  pw_client_t* clients[2] = {f.client, NULL};
  OK(pw_client_create(f.runtime, NULL, &clients[1]));
  probe_t probe;
  memset(&probe, 0, sizeof(probe));
  tagged_t tags[2][8];
  pw_graph_t graphs[2][8];
  pw_vslice_t vs[2];
  pw_array_spec_t spec = spec8();
  for (int k = 0; k < 2; ++k) {
    pw_mesh_shape_t m = PW_MESH_SHAPE_INIT(1, 2);
    OK(pw_vslice_create(clients[k], &m, PW_VSLICE_DEFAULT, &vs[k]));
    pw_executable_t s2;
    OK(pw_executable_compile(clients[k], vs[k], kScale2, strlen(kScale2), NULL, &s2));
    for (int r = 0; r < 8; ++r) {
      tags[k][r] = (tagged_t){&probe, (uint32_t)(r * 2 + k)};
      pw_host_task_t task = {sizeof(task), record, &tags[k][r], NULL};
      pw_graph_t g;
      OK(pw_graph_create(clients[k], &g));
      uint32_t x, a, h;
      OK(pw_graph_add_parameter(clients[k], g, vs[k], &spec, &x));
      OK(pw_graph_add_compute(clients[k], g, "a", s2, vs[k], (pw_value_t[]){pw_value(x, 0)}, 1,
                              &a));
      OK(pw_graph_add_host(clients[k], g, "rec", &task, vs[k], (pw_value_t[]){pw_value(a, 0)}, 1,
                           NULL, 0, &h));
      graphs[k][r] = g;
    }
  }
  float ones[N];
  for (int i = 0; i < N; ++i) ones[i] = 1.0f;
  pw_event_t* done[16];
  pw_buffer_t args[16];
  for (int r = 0; r < 8; ++r) {
    for (int k = 0; k < 2; ++k) {
      int i = r * 2 + k;
      OK(pw_buffer_from_host(clients[k], vs[k], &spec, ones, sizeof(ones), &args[i]));
      OK(pw_graph_submit(clients[k], graphs[k][r], &args[i], 1, NULL, NULL, 0, &done[i]));
    }
  }
  for (int i = 0; i < 16; ++i) OK(pw_fixture_wait(done[i]));
  cr_assert_eq(atomic_load(&probe.next), 16);
  for (uint32_t i = 0; i < 16; ++i) {
    cr_assert_eq(atomic_load(&probe.order[i]), i, "call %u was tag %u", i,
                 atomic_load(&probe.order[i]));
  }
  pw_client_destroy(clients[1]);
  pw_fixture_deinit(&f);
}

Test(host_task, an_error_fails_the_node_its_dependents_and_the_run) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_CPU, 1, "2", pw_allocator_system()));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2", &vs));
  pw_executable_t s3;
  OK(pw_fixture_compile(&f, vs, kScale3, &s3));
  probe_t probe;
  memset(&probe, 0, sizeof(probe));
  pw_host_task_t task = task_of(fails, &probe);
  pw_array_spec_t spec = spec8();
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  uint32_t x, h, c;
  OK(pw_graph_add_parameter(f.client, g, vs, &spec, &x));
  OK(pw_graph_add_host(f.client, g, "loader", &task, vs, (pw_value_t[]){pw_value(x, 0)}, 1, &spec,
                       1, &h));
  OK(pw_graph_add_compute(f.client, g, "c", s3, vs, (pw_value_t[]){pw_value(h, 0)}, 1, &c));
  OK(pw_graph_add_output(f.client, g, pw_value(c, 0)));
  float data[N] = {0};
  pw_buffer_t arg, out;
  OK(pw_buffer_from_host(f.client, vs, &spec, data, sizeof(data), &arg));
  pw_event_t* done = NULL;
  OK(pw_graph_submit(f.client, g, &arg, 1, NULL, &out, 1, &done));
  FAILS(pw_fixture_wait(done), PW_STATUS_DATA_LOSS, "node 1 (\"loader\") on slice");
  float got[N];
  FAILS(pw_buffer_to_host(f.client, out, got, sizeof(got), PW_INFINITE_FUTURE),
        PW_STATUS_DATA_LOSS, "input node 1 (\"loader\") failed");
  FAILS(pw_buffer_to_host(f.client, out, got, sizeof(got), PW_INFINITE_FUTURE),
        PW_STATUS_DATA_LOSS, "host task: boom");
  cr_assert_eq(atomic_load(&probe.calls), 1);
  /* The slice goes on: a run after the failed one succeeds. */
  pw_graph_t ok;
  OK(pw_graph_create(f.client, &ok));
  uint32_t y, z;
  OK(pw_graph_add_parameter(f.client, ok, vs, &spec, &y));
  OK(pw_graph_add_compute(f.client, ok, "z", s3, vs, (pw_value_t[]){pw_value(y, 0)}, 1, &z));
  OK(pw_graph_add_output(f.client, ok, pw_value(z, 0)));
  pw_buffer_t out2;
  OK(pw_graph_submit(f.client, ok, &arg, 1, NULL, &out2, 1, &done));
  OK(pw_fixture_wait(done));
  pw_fixture_deinit(&f);
  cr_assert_eq(atomic_load(&probe.destroyed), 1);
}

Test(host_task, misuse_is_a_clear_error) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_CPU, 2, "2", pw_allocator_system()));
  pw_vslice_t vs, other;
  OK(pw_fixture_vslice(&f, "2", &vs));
  OK(pw_fixture_vslice(&f, "2", &other));
  probe_t probe;
  memset(&probe, 0, sizeof(probe));
  pw_array_spec_t spec = spec8();
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  uint32_t x, h;
  OK(pw_graph_add_parameter(f.client, g, vs, &spec, &x));
  pw_value_t in[1] = {pw_value(x, 0)};
  FAILS(pw_graph_add_host(f.client, g, "h", NULL, vs, in, 1, &spec, 1, &h),
        PW_STATUS_INVALID_ARGUMENT, "pw_graph_add_host");
  pw_host_task_t task = task_of(NULL, &probe);
  FAILS(pw_graph_add_host(f.client, g, "h", &task, vs, in, 1, &spec, 1, &h),
        PW_STATUS_INVALID_ARGUMENT, "fn is NULL");
  task = task_of(plus_one, &probe);
  task.struct_size = 8;
  FAILS(pw_graph_add_host(f.client, g, "h", &task, vs, in, 1, &spec, 1, &h),
        PW_STATUS_INVALID_ARGUMENT, "struct_size");
  task = task_of(plus_one, &probe);
  FAILS(pw_graph_add_host(f.client, g, "h", &task, vs, in, 1, NULL, 1, &h),
        PW_STATUS_INVALID_ARGUMENT, "output_specs is NULL");
  pw_array_spec_t bad = spec;
  bad.sharding = pw_sharding_split(3, 0); /* no axis 3 */
  FAILS(pw_graph_add_host(f.client, g, "h", &task, vs, in, 1, &bad, 1, &h),
        PW_STATUS_INVALID_ARGUMENT, "output spec 0");
  cr_assert_eq(atomic_load(&probe.destroyed), 0, "a failed add does not destroy the user's task");
  /* An input on another slice: finalize names the node. */
  pw_graph_t g2;
  OK(pw_graph_create(f.client, &g2));
  uint32_t y;
  OK(pw_graph_add_parameter(f.client, g2, other, &spec, &y));
  OK(pw_graph_add_host(f.client, g2, "wrong", &task, vs, (pw_value_t[]){pw_value(y, 0)}, 1, &spec,
                       1, &h));
  FAILS(pw_graph_finalize(f.client, g2), PW_STATUS_INVALID_ARGUMENT,
        "graph node 1 (\"wrong\"): input 0 lives on slice");
  /* An output index the host node does not have. */
  pw_graph_t g3;
  OK(pw_graph_create(f.client, &g3));
  OK(pw_graph_add_parameter(f.client, g3, vs, &spec, &y));
  OK(pw_graph_add_host(f.client, g3, "one", &task, vs, (pw_value_t[]){pw_value(y, 0)}, 1, &spec, 1,
                       &h));
  OK(pw_graph_add_output(f.client, g3, pw_value(h, 1)));
  FAILS(pw_graph_finalize(f.client, g3), PW_STATUS_INVALID_ARGUMENT,
        "output 1 of host node 1 (\"one\"), which has 1 outputs");
  OK(pw_graph_release(f.client, g));
  OK(pw_graph_release(f.client, g2));
  OK(pw_graph_release(f.client, g3));
  pw_fixture_deinit(&f);
  cr_assert_eq(atomic_load(&probe.destroyed), 2, "each graph that took the task destroys it");
}

/* ---- a backend without host_pointer: the CPU backend with it taken out -- */

static pw_backend_vtable_t no_host_vtable;

Test(host_task, a_backend_without_host_pointer_is_refused_at_finalize) {
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = 2;
  pw_backend_t backend;
  OK(pw_cpu_backend_create(&o, &backend));
  no_host_vtable = *backend.vtable;
  no_host_vtable.host_pointer = NULL;
  no_host_vtable.name = "nohost";
  backend.vtable = &no_host_vtable;
  pw_slice_desc_t slices[1] = {{"s", PW_MESH_SHAPE_INIT(1, 2), 0, 0, 0}};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = 1;
  pw_runtime_t* rt;
  OK(pw_runtime_create(&ro, &rt));
  pw_client_t* client;
  OK(pw_client_create(rt, NULL, &client));
  pw_mesh_shape_t m = PW_MESH_SHAPE_INIT(1, 2);
  pw_vslice_t vs;
  OK(pw_vslice_create(client, &m, PW_VSLICE_DEFAULT, &vs));
  probe_t probe;
  memset(&probe, 0, sizeof(probe));
  pw_host_task_t task = task_of(plus_one, &probe);
  pw_array_spec_t spec = spec8();
  pw_graph_t g;
  OK(pw_graph_create(client, &g));
  uint32_t h;
  OK(pw_graph_add_host(client, g, "save", &task, vs, NULL, 0, &spec, 1, &h));
  FAILS(pw_graph_finalize(client, g), PW_STATUS_FAILED_PRECONDITION,
        "graph node 0 (\"save\"): host task on slice 's': backend 'nohost' has no host_pointer");
  FAILS(pw_graph_submit(client, g, NULL, 0, NULL, NULL, 0, NULL), PW_STATUS_FAILED_PRECONDITION,
        "no host_pointer");
  pw_client_destroy(client);
  pw_runtime_destroy(rt);
  cr_assert_eq(atomic_load(&probe.calls), 0);
  cr_assert_eq(atomic_load(&probe.destroyed), 1);
}

/* ---- the registry ---------------------------------------------------------- */

Test(host_task, registered_tasks_are_found_by_name) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_CPU, 1, "2", pw_allocator_system()));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2", &vs));
  probe_t first, second;
  memset(&first, 0, sizeof(first));
  memset(&second, 0, sizeof(second));
  pw_host_task_t t1 = task_of(plus_one, &first), t2 = task_of(plus_one, &second);
  FAILS(pw_client_register_host_task(f.client, "bad name", &t1), PW_STATUS_INVALID_ARGUMENT,
        "task name 'bad name'");
  FAILS(pw_client_register_host_task(f.client, "", &t1), PW_STATUS_INVALID_ARGUMENT, "task name");
  pw_array_spec_t spec = spec8();
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  uint32_t x, h;
  OK(pw_graph_add_parameter(f.client, g, vs, &spec, &x));
  pw_value_t in[1] = {pw_value(x, 0)};
  FAILS(pw_graph_add_host_by_name(f.client, g, NULL, "inc", vs, in, 1, &spec, 1, &h),
        PW_STATUS_NOT_FOUND, "host task 'inc' is not registered");
  OK(pw_client_register_host_task(f.client, "inc", &t1));
  OK(pw_graph_add_host_by_name(f.client, g, NULL, "inc", vs, in, 1, &spec, 1, &h));
  OK(pw_graph_add_output(f.client, g, pw_value(h, 0)));
  /* Replacing the name leaves the graph with the task it took. */
  OK(pw_client_register_host_task(f.client, "inc", &t2));
  cr_assert_eq(atomic_load(&first.destroyed), 0, "the graph still holds the first task");
  float data[N];
  for (int i = 0; i < N; ++i) data[i] = (float)i;
  pw_buffer_t arg, out;
  OK(pw_buffer_from_host(f.client, vs, &spec, data, sizeof(data), &arg));
  pw_event_t* done;
  OK(pw_graph_submit(f.client, g, &arg, 1, NULL, &out, 1, &done));
  OK(pw_fixture_wait(done));
  float got[N];
  OK(pw_buffer_to_host(f.client, out, got, sizeof(got), PW_INFINITE_FUTURE));
  for (int i = 0; i < N; ++i) cr_assert_eq(got[i], (float)i + 1.0f);
  cr_assert_eq(atomic_load(&first.calls), 1);
  cr_assert_eq(atomic_load(&second.calls), 0);
  OK(pw_graph_release(f.client, g));
  pw_fixture_deinit(&f);
  cr_assert_eq(atomic_load(&first.destroyed), 1);
  cr_assert_eq(atomic_load(&second.destroyed), 1, "the registry's task goes with the client");
}

/* ---- graph files ------------------------------------------------------------ */

#include "pathways/graph_format.h"

Test(host_task, graph_files_name_registered_tasks) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_CPU, 1, "2", pw_allocator_system()));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2", &vs));
  pw_executable_t s2;
  OK(pw_fixture_compile(&f, vs, kScale2, &s2));
  probe_t probe;
  memset(&probe, 0, sizeof(probe));
  pw_host_task_t task = task_of(plus_one, &probe);
  OK(pw_client_register_host_task(f.client, "inc", &task));
  pw_array_spec_t spec = spec8();
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  uint32_t x, a, h;
  OK(pw_graph_add_parameter(f.client, g, vs, &spec, &x));
  OK(pw_graph_add_compute(f.client, g, "a", s2, vs, (pw_value_t[]){pw_value(x, 0)}, 1, &a));
  OK(pw_graph_add_host_by_name(f.client, g, "bump", "inc", vs, (pw_value_t[]){pw_value(a, 0)}, 1,
                               &spec, 1, &h));
  OK(pw_graph_add_output(f.client, g, pw_value(h, 0)));
  void* bytes = NULL;
  size_t size = 0;
  OK(pw_graph_encode(f.client, g, NULL, pw_allocator_system(), &bytes, &size));
  char* json = NULL;
  size_t json_size = 0;
  OK(pw_graph_format_dump_json(bytes, size, pw_allocator_system(), &json, &json_size));
  cr_assert(strstr(json, "\"v\": 2") != NULL, "%s", json);
  cr_assert(strstr(json, "\"host\": \"inc\"") != NULL, "%s", json);
  pw_allocator_free(pw_allocator_system(), json, json_size);
  /* Decoded by the same client: the same task runs. */
  pw_graph_decode_options_t o = {sizeof(o), &vs, 1, NULL, 0};
  pw_graph_t back;
  OK(pw_graph_decode(f.client, bytes, size, &o, &back));
  void* again = NULL;
  size_t again_size = 0;
  OK(pw_graph_encode(f.client, back, NULL, pw_allocator_system(), &again, &again_size));
  cr_assert_eq(again_size, size);
  cr_assert_eq(memcmp(again, bytes, size), 0, "encode -> decode -> encode is byte-identical");
  pw_allocator_free(pw_allocator_system(), again, again_size);
  float data[N];
  for (int i = 0; i < N; ++i) data[i] = (float)i;
  pw_buffer_t arg, out;
  OK(pw_buffer_from_host(f.client, vs, &spec, data, sizeof(data), &arg));
  pw_event_t* done;
  OK(pw_graph_submit(f.client, back, &arg, 1, NULL, &out, 1, &done));
  OK(pw_fixture_wait(done));
  float got[N];
  OK(pw_buffer_to_host(f.client, out, got, sizeof(got), PW_INFINITE_FUTURE));
  for (int i = 0; i < N; ++i) cr_assert_eq(got[i], 2.0f * (float)i + 1.0f);
  /* A client that did not register "inc": NOT_FOUND, naming it. */
  pw_client_t* other;
  OK(pw_client_create(f.runtime, NULL, &other));
  pw_mesh_shape_t m = PW_MESH_SHAPE_INIT(1, 2);
  pw_vslice_t ovs;
  OK(pw_vslice_create(other, &m, PW_VSLICE_DEFAULT, &ovs));
  pw_graph_decode_options_t oo = {sizeof(oo), &ovs, 1, NULL, 0};
  pw_graph_t none;
  FAILS(pw_graph_decode(other, bytes, size, &oo, &none), PW_STATUS_NOT_FOUND,
        "nodes[1].host: host task 'inc' is not registered");
  pw_client_destroy(other);
  pw_allocator_free(pw_allocator_system(), bytes, size);
  /* A task given directly has no name to write. */
  pw_graph_t anon;
  OK(pw_graph_create(f.client, &anon));
  OK(pw_graph_add_host(f.client, anon, "direct", &task, vs, NULL, 0, NULL, 0, NULL));
  FAILS(pw_graph_encode(f.client, anon, NULL, pw_allocator_system(), &bytes, &size),
        PW_STATUS_FAILED_PRECONDITION, "graph node 0 (\"direct\"): its host task was given to");
  pw_fixture_deinit(&f);
  cr_assert_eq(atomic_load(&probe.calls), 1);
  cr_assert_eq(atomic_load(&probe.destroyed), 2, "the registered copy and the direct one");
}

/* ---- other dispatch modes: lanes, the sim, no gang order ------------------ */

#include "pathways/backends/sim.h"

/* x -> host (+1) -> host (+1) on |vs| of |client|: 2 more, every element. */
static pw_status_t run_two_hosts(pw_client_t* client, pw_vslice_t vs, probe_t* probe) {
  pw_host_task_t task = task_of(plus_one, probe);
  pw_array_spec_t spec = spec8();
  pw_graph_t g;
  PW_RETURN_IF_ERROR(pw_graph_create(client, &g));
  uint32_t x, h1, h2;
  OK(pw_graph_add_parameter(client, g, vs, &spec, &x));
  OK(pw_graph_add_host(client, g, "h1", &task, vs, (pw_value_t[]){pw_value(x, 0)}, 1, &spec, 1,
                       &h1));
  OK(pw_graph_add_host(client, g, "h2", &task, vs, (pw_value_t[]){pw_value(h1, 0)}, 1, &spec, 1,
                       &h2));
  OK(pw_graph_add_output(client, g, pw_value(h2, 0)));
  float data[N];
  for (int i = 0; i < N; ++i) data[i] = (float)i;
  pw_buffer_t arg, out;
  OK(pw_buffer_from_host(client, vs, &spec, data, sizeof(data), &arg));
  pw_event_t* done;
  OK(pw_graph_submit(client, g, &arg, 1, NULL, &out, 1, &done));
  pw_status_t status = pw_fixture_wait(done);
  if (status == NULL) {
    float got[N];
    OK(pw_buffer_to_host(client, out, got, sizeof(got), PW_INFINITE_FUTURE));
    for (int i = 0; i < N; ++i) cr_assert_eq(got[i], (float)i + 2.0f, "[%d] = %g", i, got[i]);
  }
  OK(pw_graph_release(client, g));
  return status;
}

static void run_on(pw_backend_t backend, uint32_t devices, bool no_gang_order, bool ok,
                   const char* needle) {
  pw_slice_desc_t slices[1];
  memset(slices, 0, sizeof(slices));
  slices[0].mesh = pw_mesh_shape_make(1, &devices);
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = 1;
  ro.debug_disable_gang_order = no_gang_order;
  pw_runtime_t* rt;
  OK(pw_runtime_create(&ro, &rt));
  pw_client_t* client;
  OK(pw_client_create(rt, NULL, &client));
  pw_vslice_t vs;
  OK(pw_vslice_create(client, &slices[0].mesh, PW_VSLICE_DEFAULT, &vs));
  probe_t probe;
  memset(&probe, 0, sizeof(probe));
  pw_status_t status = run_two_hosts(client, vs, &probe);
  if (ok) {
    OK(status);
    cr_assert_eq(atomic_load(&probe.calls), 2);
    cr_assert_eq(probe.devices_seen, devices);
  } else {
    FAILS(status, PW_STATUS_FAILED_PRECONDITION, needle);
    cr_assert_eq(atomic_load(&probe.calls), 0);
  }
  pw_client_destroy(client);
  pw_runtime_destroy(rt);
  cr_assert_eq(atomic_load(&probe.destroyed), 2);
}

Test(host_task, lanes_of_a_queued_sim_slice) {
  pw_sim_backend_options_t so;
  pw_sim_backend_options_init(&so);
  so.slice_count = 1;
  so.devices_per_slice = 4;
  so.devices_per_host = 2;
  so.queue_depth = 4;
  pw_backend_t sim;
  OK(pw_sim_backend_create(&so, &sim));
  run_on(sim, 4, false, true, NULL);
}

Test(host_task, threaded_sim) {
  pw_sim_backend_options_t so;
  pw_sim_backend_options_init(&so);
  so.slice_count = 1;
  so.devices_per_slice = 2;
  so.mode = PW_SIM_MODE_THREADED;
  pw_backend_t sim;
  OK(pw_sim_backend_create(&so, &sim));
  run_on(sim, 2, false, true, NULL);
}

Test(host_task, sim_virtual_memory_has_no_host_pointers) {
  pw_sim_backend_options_t so;
  pw_sim_backend_options_init(&so);
  so.slice_count = 1;
  so.devices_per_slice = 2;
  so.memory = PW_SIM_MEMORY_VIRTUAL;
  pw_backend_t sim;
  OK(pw_sim_backend_create(&so, &sim));
  run_on(sim, 2, false, false,
         "node 1 (\"h1\") on slice 'slice0': host task: input 0: backend 'sim' gives no host "
         "pointer for its shard on device 0");
}

Test(host_task, without_gang_order) {
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = 4;
  pw_backend_t cpu;
  OK(pw_cpu_backend_create(&o, &cpu));
  run_on(cpu, 4, true, true, NULL);
}

Test(host_task, double_lanes) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_LANES, 1, "4", pw_allocator_system()));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "4", &vs));
  probe_t probe;
  memset(&probe, 0, sizeof(probe));
  OK(run_two_hosts(f.client, vs, &probe));
  cr_assert_eq(probe.devices_seen, 4);
  pw_fixture_deinit(&f);
}

/* ---- traces --------------------------------------------------------------- */

typedef struct text_t {
  char data[1 << 16];
  size_t size;
} text_t;

static pw_status_t collect_text(void* user, const char* bytes, size_t size) {
  text_t* t = user;
  size_t room = sizeof(t->data) - 1 - t->size;
  size_t n = size < room ? size : room;
  memcpy(t->data + t->size, bytes, n);
  t->size += n;
  t->data[t->size] = '\0';
  return NULL;
}

Test(host_task, traces_draw_host_tasks) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_CPU, 1, "2", pw_allocator_system()));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2", &vs));
  OK(pw_runtime_trace_start(f.runtime, NULL));
  probe_t probe;
  memset(&probe, 0, sizeof(probe));
  OK(run_two_hosts(f.client, vs, &probe));
  OK(pw_runtime_trace_stop(f.runtime));
  static text_t text;
  text.size = 0;
  OK(pw_runtime_trace_write(f.runtime, collect_text, &text));
  cr_assert(strstr(text.data, "\"host h1\"") != NULL, "%.2000s", text.data);
  cr_assert(strstr(text.data, "\"host h2\"") != NULL);
  cr_assert(strstr(text.data, "\"cat\": \"host\"") != NULL || strstr(text.data, "\"cat\":\"host\"") != NULL,
            "%.2000s", text.data);
  pw_fixture_deinit(&f);
}

/* ---- a queued slice: the task waits for the device queues to drain ------- */

#include <pthread.h>

#include "support/queue_wrapper.h"

/* A kernel that holds its devices until the test opens the gate. */
static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint32_t started, finished;
  bool open;
} g_gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, false};

static pw_status_t gate_run(const pw_cpu_kernel_call_t* call) {
  pthread_mutex_lock(&g_gate.lock);
  g_gate.started++;
  pthread_cond_broadcast(&g_gate.cond);
  while (!g_gate.open) pthread_cond_wait(&g_gate.cond, &g_gate.lock);
  memcpy(call->outputs[0].data, call->inputs[0].data, call->outputs[0].size);
  g_gate.finished++;
  pthread_mutex_unlock(&g_gate.lock);
  return NULL;
}

static pw_status_t after_gate(void* user, const pw_host_task_context_t* c) {
  probe_t* p = user;
  pthread_mutex_lock(&g_gate.lock);
  p->pointers_ok = g_gate.finished == c->device_count; /* every launch before it completed */
  pthread_mutex_unlock(&g_gate.lock);
  atomic_fetch_add(&p->calls, 1);
  return NULL;
}

Test(host_task, on_a_queued_slice_runs_after_the_queued_ops_before_it_completed) {
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = 2;
  o.worker_count = 2;
  pw_backend_t cpu, queued;
  OK(pw_cpu_backend_create(&o, &cpu));
  pw_cpu_param_spec_t any = {"x", PW_CPU_DTYPES_ANY, -1};
  pw_cpu_kernel_def_t def = {sizeof(def), "gate", 1, &any, 1, &any, 0, NULL, 0, NULL, gate_run,
                             NULL};
  OK(pw_cpu_backend_register_kernel(cpu, &def));
  pw_queue_wrapper_options_t qo = {.depth = 4, .ordered = true};
  OK(pw_queue_wrapper_create(&qo, cpu, &queued));
  pw_slice_desc_t slices[1] = {{"q", PW_MESH_SHAPE_INIT(1, 2), 0, 0, 0}};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &queued;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = 1;
  pw_runtime_t* rt;
  OK(pw_runtime_create(&ro, &rt));
  pw_client_t* client;
  OK(pw_client_create(rt, NULL, &client));
  pw_mesh_shape_t m = PW_MESH_SHAPE_INIT(1, 2);
  pw_vslice_t vs;
  OK(pw_vslice_create(client, &m, PW_VSLICE_DEFAULT, &vs));
  const char* text = "kernel gate\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n";
  pw_executable_t gate;
  OK(pw_executable_compile(client, vs, text, strlen(text), NULL, &gate));
  probe_t probe;
  memset(&probe, 0, sizeof(probe));
  pw_host_task_t task = {sizeof(task), after_gate, &probe, NULL};
  pw_array_spec_t spec = spec8();
  pw_graph_t g;
  OK(pw_graph_create(client, &g));
  uint32_t x, a, h;
  OK(pw_graph_add_parameter(client, g, vs, &spec, &x));
  OK(pw_graph_add_compute(client, g, "gate", gate, vs, (pw_value_t[]){pw_value(x, 0)}, 1, &a));
  /* No data edge: only the slice's order puts the task after the gate. */
  OK(pw_graph_add_host(client, g, "after", &task, vs, NULL, 0, NULL, 0, &h));
  OK(pw_graph_add_output(client, g, pw_value(a, 0)));
  float data[N] = {0};
  pw_buffer_t arg, out;
  OK(pw_buffer_from_host(client, vs, &spec, data, sizeof(data), &arg));
  pw_event_t* done;
  OK(pw_graph_submit(client, g, &arg, 1, NULL, &out, 1, &done));
  pthread_mutex_lock(&g_gate.lock);
  while (g_gate.started < 2) pthread_cond_wait(&g_gate.cond, &g_gate.lock);
  pthread_mutex_unlock(&g_gate.lock);
  /* Both devices are inside the gate, their cursors already past it (queued
   * launch): the run cannot finish, and the task has not run. */
  FAILS(pw_event_wait(done, pw_deadline_from_timeout(50000000)), PW_STATUS_DEADLINE_EXCEEDED, "");
  cr_assert_eq(atomic_load(&probe.calls), 0, "the host task ran while its queues held launches");
  pthread_mutex_lock(&g_gate.lock);
  g_gate.open = true;
  pthread_cond_broadcast(&g_gate.cond);
  pthread_mutex_unlock(&g_gate.lock);
  OK(pw_fixture_wait(done));
  cr_assert_eq(atomic_load(&probe.calls), 1);
  cr_assert(probe.pointers_ok, "the task saw %u of 2 launches completed", g_gate.finished);
  pw_client_destroy(client);
  pw_runtime_destroy(rt);
}

/* ---- destroy calls from inside a task ------------------------------------- */

static pw_client_t* g_victim;

static pw_status_t destroys(void* user, const pw_host_task_context_t* c) {
  (void)c;
  pw_status_t s = pw_client_destroy(g_victim);
  *(pw_status_code_t*)user = pw_status_code(s);
  pw_status_free(s);
  return NULL;
}

Test(host_task, destroy_calls_inside_a_task_are_refused) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_CPU, 1, "2", pw_allocator_system()));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2", &vs));
  OK(pw_client_create(f.runtime, NULL, &g_victim));
  pw_status_code_t code = PW_STATUS_OK;
  pw_host_task_t task = {sizeof(task), destroys, &code, NULL};
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  OK(pw_graph_add_host(f.client, g, "d", &task, vs, NULL, 0, NULL, 0, NULL));
  pw_event_t* done;
  OK(pw_graph_submit(f.client, g, NULL, 0, NULL, NULL, 0, &done));
  OK(pw_fixture_wait(done));
  cr_assert_eq(code, PW_STATUS_FAILED_PRECONDITION);
  pw_client_destroy(g_victim);
  pw_fixture_deinit(&f);
}
