/* Lifetimes at the edges: destroying a runtime with live clients,
 * destroying from inside callbacks, destroy deadlines, and the device
 * memory a destroyed client leaves behind. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <string.h>

#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "runtime/hostile.h"
#include "support/test_allocators.h"

TestSuite(lifecycle, .fini = pw_test_check_leaks, .timeout = 30);

static const char* kCopy4 = "copy\ninput f32[4] split(0,all)\noutput f32[4] split(0,all)\n";
static const char* kCpuRelu4 =
    "kernel relu\ninput f32[4] split(0,all)\noutput f32[4] split(0,all)\n";

/* A one-op graph on |vs|: param -> copy -> output. */
static pw_graph_t one_copy(pw_fixture_t* f, pw_vslice_t vs, pw_executable_t copy) {
  pw_graph_t g;
  OK(pw_graph_create(f->client, &g));
  int64_t dims[1] = {4};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t p, c;
  OK(pw_graph_add_parameter(f->client, g, vs, &spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(f->client, g, "copy", copy, vs, &in, 1, &c));
  OK(pw_graph_add_output(f->client, g, pw_value(c, 0)));
  return g;
}

static pw_buffer_t arg4(pw_fixture_t* f, pw_vslice_t vs) {
  int64_t dims[1] = {4};
  float data[4] = {1, 2, 3, 4};
  pw_buffer_t b;
  OK(pw_fixture_f32(f, vs, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), data, &b));
  return b;
}

/* Submits |g| with |arg| and waits for it. */
static void run_once(pw_fixture_t* f, pw_graph_t g, pw_buffer_t arg) {
  pw_buffer_t out;
  pw_event_t* done = NULL;
  OK(pw_graph_submit(f->client, g, &arg, 1, NULL, &out, 1, &done));
  OK(pw_fixture_wait(done));
  OK(pw_buffer_release(f->client, out));
}

/* ---- defect 6: runtime destroy with live clients ------------------------ */

Test(lifecycle, runtime_destroy_refuses_live_clients_and_stays_usable) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 1, "4", pw_allocator_system()));
  pw_client_options_t co = {sizeof(co), "job-b", 1, 0};
  pw_client_t* other = NULL;
  OK(pw_client_create(f.runtime, &co, &other));
  /* Both clients are alive: refused, naming them, and nothing is freed. */
  FAILS(pw_runtime_destroy(f.runtime), PW_STATUS_FAILED_PRECONDITION, "'job-b'");
  FAILS(pw_runtime_destroy(f.runtime), PW_STATUS_FAILED_PRECONDITION, "2 clients");
  /* The runtime and both clients still work. */
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "4", &vs));
  pw_executable_t copy;
  OK(pw_fixture_compile(&f, vs, kCopy4, &copy));
  pw_graph_t g = one_copy(&f, vs, copy);
  pw_buffer_t arg = arg4(&f, vs);
  run_once(&f, g, arg);
  pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(1, 4);
  pw_vslice_t other_vs;
  OK(pw_vslice_create(other, &mesh, 0, &other_vs));
  OK(pw_client_destroy(other));
  FAILS(pw_runtime_destroy(f.runtime), PW_STATUS_FAILED_PRECONDITION, "1 clients");
  run_once(&f, g, arg);
  OK(pw_client_destroy(f.client));
  OK(pw_runtime_destroy(f.runtime));
  OK(pw_runtime_destroy(NULL));
}

/* ---- defect 8: destroy from inside a callback; destroy deadlines -------- */

typedef struct reentry_t {
  pw_client_t* client;
  pw_graph_exec_t* exec;
  pw_runtime_t* runtime;
  atomic_int client_code;
  atomic_int exec_code;
  atomic_int runtime_code;
  atomic_int calls;
} reentry_t;

static int code_of(pw_status_t s) {
  int code = (int)pw_status_code(s);
  pw_status_free(s);
  return code;
}

static void destroy_from_callback(void* user, pw_status_t status) {
  reentry_t* r = user;
  pw_status_free(status);
  atomic_store(&r->client_code, code_of(pw_client_destroy(r->client)));
  if (r->exec != NULL) atomic_store(&r->exec_code, code_of(pw_graph_exec_destroy(r->exec)));
  atomic_store(&r->runtime_code, code_of(pw_runtime_destroy(r->runtime)));
  atomic_fetch_add(&r->calls, 1);
}

/* |kind|: inline completion runs the callback inside the submission's
 * dispatch; threaded, on the backend's completion thread. */
static void destroy_inside_done_callback(pw_fixture_backend_t kind, bool armed) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, kind, 1, "4", pw_allocator_system()));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "4", &vs));
  pw_executable_t copy;
  OK(pw_fixture_compile(&f, vs, kCopy4, &copy));
  pw_graph_t g = one_copy(&f, vs, copy);
  pw_buffer_t arg = arg4(&f, vs);
  reentry_t r;
  memset(&r, 0, sizeof(r));
  r.client = f.client;
  r.runtime = f.runtime;
  if (armed) OK(pw_graph_exec_create(f.client, g, &r.exec));
  for (int i = 0; i < 3; ++i) {
    pw_buffer_t out;
    pw_event_t* done = NULL;
    if (armed) {
      OK(pw_graph_exec_submit(r.exec, &arg, 1, NULL, &out, 1, &done));
    } else {
      OK(pw_graph_submit(f.client, g, &arg, 1, NULL, &out, 1, &done));
    }
    OK(pw_event_on_ready(done, destroy_from_callback, &r));
    OK(pw_fixture_wait(done));
    OK(pw_buffer_release(f.client, out));
  }
  /* Each callback ran (the done event completes before its callbacks
   * return: wait for them) and was refused every destroy. */
  pw_time_t until = pw_deadline_from_timeout(5000000000LL);
  while (atomic_load(&r.calls) < 3 && pw_clock_now() < until) {
  }
  cr_assert_eq(atomic_load(&r.calls), 3);
  cr_assert_eq(atomic_load(&r.client_code), PW_STATUS_FAILED_PRECONDITION);
  cr_assert_eq(atomic_load(&r.runtime_code), PW_STATUS_FAILED_PRECONDITION);
  if (armed) cr_assert_eq(atomic_load(&r.exec_code), PW_STATUS_FAILED_PRECONDITION);
  /* Everything is still usable, and destroys fine outside callbacks. */
  run_once(&f, g, arg);
  if (armed) OK(pw_graph_exec_destroy(r.exec));
  /* Lanes: 4 runs of one op on two hosts of 2 devices. */
  cr_assert_eq(pw_fixture_host_launches(&f), pw_fixture_kind_lanes(kind) ? 4 * 2 : 0);
  pw_fixture_deinit(&f);
}

Test(lifecycle, client_destroy_in_done_callback_is_refused_inline) {
  destroy_inside_done_callback(PW_FIXTURE_DOUBLE_INLINE, false);
}
Test(lifecycle, client_destroy_in_done_callback_is_refused_threaded) {
  destroy_inside_done_callback(PW_FIXTURE_DOUBLE_THREADED, false);
}
Test(lifecycle, client_destroy_in_done_callback_is_refused_lanes) {
  destroy_inside_done_callback(PW_FIXTURE_DOUBLE_LANES, false);
  destroy_inside_done_callback(PW_FIXTURE_DOUBLE_LANES_QUEUED, true);
}
Test(lifecycle, graph_exec_destroy_in_done_callback_is_refused) {
  destroy_inside_done_callback(PW_FIXTURE_DOUBLE_INLINE, true);
  destroy_inside_done_callback(PW_FIXTURE_DOUBLE_THREADED, true);
}

Test(lifecycle, destroy_in_user_event_callback_is_refused) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 1, "4", pw_allocator_system()));
  reentry_t r;
  memset(&r, 0, sizeof(r));
  r.client = f.client;
  r.runtime = f.runtime;
  pw_event_t* e = NULL;
  OK(pw_event_create(pw_allocator_system(), &e));
  OK(pw_event_on_ready(e, destroy_from_callback, &r));
  OK(pw_event_signal(e));
  cr_assert_eq(atomic_load(&r.calls), 1);
  cr_assert_eq(atomic_load(&r.client_code), PW_STATUS_FAILED_PRECONDITION);
  cr_assert_eq(atomic_load(&r.runtime_code), PW_STATUS_FAILED_PRECONDITION);
  pw_event_release(e);
  pw_fixture_deinit(&f);
}

Test(lifecycle, client_destroy_deadline_leaves_the_client_usable) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_DEFERRED, 1, "4", pw_allocator_system()));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "4", &vs));
  pw_executable_t copy;
  OK(pw_fixture_compile(&f, vs, kCopy4, &copy));
  pw_graph_t g = one_copy(&f, vs, copy);
  pw_buffer_t arg = arg4(&f, vs);
  pw_graph_exec_t* exec = NULL;
  OK(pw_graph_exec_create(f.client, g, &exec));
  /* Two runs the backend holds on to (it "lost" them for now): one
   * shared, one in an armed graph's armed block. */
  pw_buffer_t out, out2;
  pw_event_t *done = NULL, *done2 = NULL;
  OK(pw_graph_submit(f.client, g, &arg, 1, NULL, &out, 1, &done));
  OK(pw_graph_exec_submit(exec, &arg, 1, NULL, &out2, 1, &done2));
  FAILS(pw_client_destroy_with_deadline(f.client, pw_deadline_from_timeout(20000000)),
        PW_STATUS_DEADLINE_EXCEEDED, "2 executions");
  FAILS(pw_client_destroy_with_deadline(f.client, PW_IMMEDIATE_PAST),
        PW_STATUS_DEADLINE_EXCEEDED, "left as it is");
  /* The client is intact: its runs finish, it takes more work. */
  while (pw_double_backend_run_deferred(f.dbl, 64) != 0) {
  }
  OK(pw_fixture_wait(done));
  OK(pw_fixture_wait(done2));
  OK(pw_buffer_release(f.client, out));
  OK(pw_buffer_release(f.client, out2));
  OK(pw_graph_submit(f.client, g, &arg, 1, NULL, &out, 1, &done));
  while (pw_double_backend_run_deferred(f.dbl, 64) != 0) {
  }
  OK(pw_fixture_wait(done));
  /* Idle now: destroyed at once, armed graph and all. */
  OK(pw_client_destroy_with_deadline(f.client, PW_IMMEDIATE_PAST));
  f.client = NULL;
  cr_assert_eq(pw_double_backend_live_allocations(f.dbl), 0);
  pw_fixture_deinit(&f);
}

/* ---- defect 9: device memory a destroyed client leaves ------------------ */

/* compute (slice a) -> transfer (to slice b) -> compute (slice b), both
 * computes running |program|; |*out_a| is slice a. */
static pw_graph_t compute_transfer_compute(pw_fixture_t* f, const char* program,
                                           pw_vslice_t* out_a) {
  pw_vslice_t a, b;
  OK(pw_fixture_vslice(f, "4", &a));
  OK(pw_fixture_vslice(f, "4", &b));
  pw_executable_t copy_a, copy_b;
  OK(pw_fixture_compile(f, a, program, &copy_a));
  OK(pw_fixture_compile(f, b, program, &copy_b));
  pw_graph_t g;
  OK(pw_graph_create(f->client, &g));
  int64_t dims[1] = {4};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t p, x, t, y;
  OK(pw_graph_add_parameter(f->client, g, a, &spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(f->client, g, "first", copy_a, a, &in, 1, &x));
  OK(pw_graph_add_transfer(f->client, g, "ship", pw_value(x, 0), b,
                           pw_sharding_split(0, PW_MESH_AXIS_ALL), &t));
  in = pw_value(t, 0);
  OK(pw_graph_add_compute(f->client, g, "second", copy_b, b, &in, 1, &y));
  OK(pw_graph_add_output(f->client, g, pw_value(y, 0)));
  *out_a = a;
  return g;
}

/* The first compute's output and the transfer's are internal values,
 * kept with the execution block that is each slice's tail after a run. */
static void run_compute_transfer_compute(pw_fixture_t* f, uint32_t runs) {
  pw_vslice_t a;
  pw_graph_t g = compute_transfer_compute(f, f->dbl != NULL ? kCopy4 : kCpuRelu4, &a);
  pw_buffer_t arg = arg4(f, a);
  for (uint32_t i = 0; i < runs; ++i) run_once(f, g, arg);
}

static void no_device_memory_left(pw_fixture_backend_t kind) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, kind, 2, "4", pw_allocator_system()));
  run_compute_transfer_compute(&f, 3);
  cr_assert_gt(pw_double_backend_live_allocations(f.dbl), 0);
  OK(pw_client_destroy(f.client));
  f.client = NULL;
  /* Nothing else ran on either slice since. */
  cr_assert_eq(pw_double_backend_live_allocations(f.dbl), 0, "%zu device allocations left",
               pw_double_backend_live_allocations(f.dbl));
  /* The slices stay usable for the next client (it displaces the old
   * tails). */
  OK(pw_client_create(f.runtime, NULL, &f.client));
  run_compute_transfer_compute(&f, 2);
  OK(pw_client_destroy(f.client));
  f.client = NULL;
  cr_assert_eq(pw_double_backend_live_allocations(f.dbl), 0);
  /* 5 runs of two computes, each on a slice of two hosts. */
  cr_assert_eq(pw_fixture_host_launches(&f), pw_fixture_kind_lanes(kind) ? 5 * 2 * 2 : 0);
  pw_fixture_deinit(&f);
}

Test(lifecycle, destroyed_client_holds_no_device_memory_double) {
  no_device_memory_left(PW_FIXTURE_DOUBLE_THREADED);
}
Test(lifecycle, destroyed_client_holds_no_device_memory_lanes) {
  no_device_memory_left(PW_FIXTURE_DOUBLE_LANES);
  no_device_memory_left(PW_FIXTURE_DOUBLE_LANES_QUEUED);
}

Test(lifecycle, destroyed_client_holds_no_device_memory_cpu) {
  pw_test_allocator_t device_memory;
  pw_test_allocator_init(&device_memory);
  /* Only the backend's memory is counted (the runtime's host records may
   * stay with the slices until their next op). */
  pw_fixture_t f;
  memset(&f, 0, sizeof(f));
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = 8;
  o.worker_count = 2;
  o.allocator = pw_test_allocator(&device_memory);
  OK(pw_cpu_backend_create(&o, &f.backend));
  pw_slice_desc_t slices[2] = {{"a", PW_MESH_SHAPE_INIT(1, 4), 0, 0, 0}, {"b", PW_MESH_SHAPE_INIT(1, 4), 0, 4, 0}};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &f.backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = 2;
  OK(pw_runtime_create(&ro, &f.runtime));
  OK(pw_client_create(f.runtime, NULL, &f.client));
  size_t before = pw_test_allocator_live(&device_memory);
  run_compute_transfer_compute(&f, 2);
  OK(pw_client_destroy(f.client));
  f.client = NULL;
  cr_assert_eq(pw_test_allocator_live(&device_memory), before,
               "%zu blocks left after the client went (%zu before it ran)",
               pw_test_allocator_live(&device_memory), before);
  pw_fixture_deinit(&f);
}

/* Two clients share a slice; the first is destroyed while the second's
 * work lands on the same slices (its appends displace the tails the
 * destroy inspects). */
Test(lifecycle, destroy_while_another_client_appends) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_THREADED, 2, "4", pw_allocator_system()));
  OK(pw_client_destroy(f.client));
  for (int round = 0; round < 20; ++round) {
    OK(pw_client_create(f.runtime, NULL, &f.client));
    pw_client_t* first = f.client;
    run_compute_transfer_compute(&f, 2);
    OK(pw_client_create(f.runtime, NULL, &f.client));
    pw_vslice_t vs;
    OK(pw_fixture_vslice(&f, "4", &vs));
    pw_executable_t copy;
    OK(pw_fixture_compile(&f, vs, kCopy4, &copy));
    pw_graph_t g = one_copy(&f, vs, copy);
    pw_buffer_t arg = arg4(&f, vs);
    pw_buffer_t out;
    pw_event_t* done = NULL;
    OK(pw_graph_submit(f.client, g, &arg, 1, NULL, &out, 1, &done));
    OK(pw_client_destroy(first));
    OK(pw_fixture_wait(done));
    OK(pw_client_destroy(f.client));
  }
  f.client = NULL;
  cr_assert_eq(pw_double_backend_live_allocations(f.dbl), 0);
  pw_fixture_deinit(&f);
}

/* ---- defect 7: plugins that complete twice ------------------------------ */

/* Two slices of 4 devices on the hostile backend (over the inline test
 * double) and the hostile transport. */
static void hostile_init(pw_fixture_t* f, pw_double_completion_t completion, bool lanes) {
  memset(f, 0, sizeof(*f));
  pw_double_options_t o;
  pw_double_options_init(&o);
  o.device_count = 8;
  o.completion = completion;
  o.worker_count = 2;
  o.host_launch = lanes; /* two lanes of 2 per slice */
  o.devices_per_host = lanes ? 2 : 0;
  pw_backend_t inner;
  OK(pw_double_backend_create(&o, &inner));
  f->dbl = pw_double_backend_from(&inner);
  pw_hostile_backend_wrap(inner, &f->backend);
  pw_transport_t transport;
  OK(pw_hostile_transport_create(&transport));
  pw_slice_desc_t slices[2] = {{"a", PW_MESH_SHAPE_INIT(1, 4), 0, 0, 0}, {"b", PW_MESH_SHAPE_INIT(1, 4), 0, 4, 0}};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &f->backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = 2;
  ro.transport = transport;
  OK(pw_runtime_create(&ro, &f->runtime));
  OK(pw_client_create(f->runtime, NULL, &f->client));
}

/* compute -> transfer -> compute over the two slices. */
static pw_graph_t hostile_graph(pw_fixture_t* f, pw_vslice_t* out_a) {
  return compute_transfer_compute(f, kCopy4, out_a);
}

/* Runs |g| and returns its done event's status. */
static pw_status_t run_status(pw_fixture_t* f, pw_graph_t g, pw_buffer_t arg) {
  pw_buffer_t out;
  pw_event_t* done = NULL;
  OK(pw_graph_submit(f->client, g, &arg, 1, NULL, &out, 1, &done));
  pw_status_t s = pw_fixture_wait(done);
  OK(pw_buffer_release(f->client, out));
  return s;
}

/* Arms |arm| for |count| completions, runs the graph (INTERNAL, naming
 * |plugin| and |node|), then a healthy run on the same runtime. */
static void complete_twice_on(bool lanes, pw_double_completion_t completion, bool transport,
                              pw_hostile_mode_t mode, int64_t count, const char* node) {
  pw_fixture_t f;
  hostile_init(&f, completion, lanes);
  pw_vslice_t a;
  pw_graph_t g = hostile_graph(&f, &a);
  pw_buffer_t arg = arg4(&f, a);
  OK(run_status(&f, g, arg)); /* a healthy run first: the blocks are cached */
  for (int round = 0; round < 3; ++round) {
    if (transport) {
      pw_hostile_transport_arm(mode, count);
    } else {
      pw_hostile_backend_arm(mode, count);
    }
    FAILS(run_status(&f, g, arg), PW_STATUS_INTERNAL, node);
    pw_hostile_transport_arm(PW_HOSTILE_OFF, 0);
    pw_hostile_backend_arm(PW_HOSTILE_OFF, 0);
    /* The runtime stays usable: the next submission succeeds. */
    OK(run_status(&f, g, arg));
  }
  /* The 4 healthy runs' computes went to the lanes (2 per slice). */
  uint64_t host = pw_double_backend_total_host_launches(f.dbl);
  cr_assert(lanes ? host >= 4 * 2 * 2 : host == 0, "%llu host launches",
            (unsigned long long)host);
  pw_fixture_deinit(&f);
}

static void complete_twice(pw_double_completion_t completion, bool transport,
                           pw_hostile_mode_t mode, int64_t count, const char* node) {
  complete_twice_on(false, completion, transport, mode, count, node);
}

Test(lifecycle, backend_done_twice_fails_the_op_with_internal) {
  complete_twice(PW_DOUBLE_COMPLETE_INLINE, false, PW_HOSTILE_DONE_TWICE, 1,
                 "backend 'hostile' completed one launch twice: it called done twice");
  complete_twice(PW_DOUBLE_COMPLETE_THREADED, false, PW_HOSTILE_DONE_TWICE, 8, "node 1");
}

Test(lifecycle, backend_done_with_error_then_error_return_fails_the_op_with_internal) {
  complete_twice(PW_DOUBLE_COMPLETE_INLINE, false, PW_HOSTILE_DONE_THEN_ERROR, 1,
                 "called done and then returned an error from launch");
  complete_twice(PW_DOUBLE_COMPLETE_THREADED, false, PW_HOSTILE_DONE_THEN_ERROR, 3,
                 "hostile launch failed");
}

/* A host launch completed twice (or completed and refused) is one
 * launch completed twice: reported, not obeyed; the op fails with
 * INTERNAL and the runtime stays usable. */
Test(lifecycle, host_launch_done_twice_fails_the_op_with_internal) {
  complete_twice_on(true, PW_DOUBLE_COMPLETE_INLINE, false, PW_HOSTILE_DONE_TWICE, 1,
                    "backend 'hostile' completed one launch twice: it called done twice");
  complete_twice_on(true, PW_DOUBLE_COMPLETE_THREADED, false, PW_HOSTILE_DONE_TWICE, 4,
                    "node 1");
  complete_twice_on(true, PW_DOUBLE_COMPLETE_INLINE, false, PW_HOSTILE_DONE_THEN_ERROR, 1,
                    "called done and then returned an error from launch");
}

Test(lifecycle, transport_copy_done_twice_fails_the_transfer_with_internal) {
  complete_twice(PW_DOUBLE_COMPLETE_INLINE, true, PW_HOSTILE_DONE_TWICE, 1,
                 "transport 'hostile-transport' completed one copy twice");
  complete_twice(PW_DOUBLE_COMPLETE_THREADED, true, PW_HOSTILE_DONE_TWICE, 4, "\"ship\"");
}

Test(lifecycle, transport_copy_done_with_error_then_error_return_fails_the_transfer) {
  complete_twice(PW_DOUBLE_COMPLETE_INLINE, true, PW_HOSTILE_DONE_THEN_ERROR, 1,
                 "called a copy's done and then returned an error");
  complete_twice(PW_DOUBLE_COMPLETE_THREADED, true, PW_HOSTILE_DONE_THEN_ERROR, 2,
                 "hostile copy failed");
}

/* Two threads call done for every launch and copy at once: one wins, the
 * other is reported and ignored; every run resolves, OK or INTERNAL. */
Test(lifecycle, completions_raced_by_two_threads_resolve_every_run) {
  pw_fixture_t f;
  hostile_init(&f, PW_DOUBLE_COMPLETE_INLINE, false);
  pw_vslice_t a;
  pw_graph_t g = hostile_graph(&f, &a);
  pw_buffer_t arg = arg4(&f, a);
  pw_hostile_backend_arm(PW_HOSTILE_DONE_TWICE_RACING, 1 << 30);
  pw_hostile_transport_arm(PW_HOSTILE_DONE_TWICE_RACING, 1 << 30);
  for (int i = 0; i < 50; ++i) {
    pw_status_t s = run_status(&f, g, arg);
    cr_assert(s == NULL || pw_status_code(s) == PW_STATUS_INTERNAL, "%s", pw_status_message(s));
    pw_status_free(s);
  }
  pw_hostile_backend_arm(PW_HOSTILE_OFF, 0);
  pw_hostile_transport_arm(PW_HOSTILE_OFF, 0);
  pw_hostile_quiesce();
  OK(run_status(&f, g, arg));
  pw_fixture_deinit(&f);
}
