/* CPU backend core: options, devices, memory and copies, launch checks,
 * custom kernels, device health, and allocation-failure sweeps. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cpu_test_support.h"
#include "support/test_allocators.h"

TestSuite(cpu_backend, .fini = pw_test_check_leaks);

static void expect_code(pw_status_t s, pw_status_code_t code, const char* part) {
  cr_assert_eq(pw_status_code(s), code, "got %s: %s",
               pw_status_code_string(pw_status_code(s)), pw_status_message(s));
  if (part != NULL) {
    cr_assert(strstr(pw_status_message(s), part) != NULL, "'%s' not in '%s'", part,
              pw_status_message(s));
  }
  pw_status_free(s);
}

Test(cpu_backend, options_and_device_info) {
  pw_backend_t b;
  cr_assert_null(pw_cpu_backend_create(NULL, &b)); /* all defaults */
  cr_assert(pw_cpu_backend_is_cpu(b));
  cr_assert_str_eq(b.vtable->name, "cpu");
  cr_assert_geq(b.vtable->struct_size, PW_BACKEND_VTABLE_SIZE_V1);
  cr_assert_eq(b.vtable->device_count(b.self), 8);
  pw_backend_device_info_t info = {.struct_size = sizeof(info)};
  cr_assert_null(b.vtable->device_info(b.self, 7, &info));
  cr_assert_str_eq(info.kind, "cpu");
  cr_assert_eq(info.memory_bytes, 1ull << 30);
  expect_code(b.vtable->device_info(b.self, 8, &info), PW_STATUS_INVALID_ARGUMENT,
              "device 8 does not exist");
  info.struct_size = 4;
  expect_code(b.vtable->device_info(b.self, 0, &info), PW_STATUS_INVALID_ARGUMENT,
              "struct_size");
  cr_assert_eq(b.vtable->health(b.self, 0), PW_DEVICE_HEALTHY);
  cpu_destroy(b);

  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.struct_size = PW_CPU_BACKEND_OPTIONS_SIZE_V1 - 1;
  expect_code(pw_cpu_backend_create(&o, &b), PW_STATUS_INVALID_ARGUMENT, "struct_size");
  cr_assert_null(b.vtable);
  pw_cpu_backend_options_init(&o);
  o.struct_size = sizeof(o) + 64; /* a newer caller: accepted */
  o.device_count = 3;
  o.host = 5;
  cr_assert_null(pw_cpu_backend_create(&o, &b));
  cr_assert_eq(b.vtable->device_count(b.self), 3);
  info.struct_size = sizeof(info);
  cr_assert_null(b.vtable->device_info(b.self, 2, &info));
  cr_assert_eq(info.host, 5);
  cpu_destroy(b);
  pw_cpu_backend_options_init(&o);
  o.device_count = PW_CPU_MAX_DEVICES + 1;
  expect_code(pw_cpu_backend_create(&o, &b), PW_STATUS_INVALID_ARGUMENT, "devices");
  pw_cpu_backend_options_init(&o);
  o.allocator.free = NULL;
  expect_code(pw_cpu_backend_create(&o, &b), PW_STATUS_INVALID_ARGUMENT, "allocator");
  expect_code(pw_cpu_backend_create(NULL, NULL), PW_STATUS_INVALID_ARGUMENT, NULL);
}

Test(cpu_backend, memory_capacity_copies_and_ranges) {
  pw_test_allocator_t counting;
  pw_test_allocator_init(&counting);
  pw_backend_t b;
  cr_assert_null(cpu_create(pw_test_allocator(&counting), 2, 1, 1000, &b));
  const pw_backend_vtable_t* vt = b.vtable;
  pw_backend_memory_t m = NULL, big = NULL, empty = NULL, other = NULL;
  cr_assert_null(vt->allocate(b.self, 1, 600, &m));
  expect_code(vt->allocate(b.self, 1, 401, &big), PW_STATUS_RESOURCE_EXHAUSTED,
              "cpu device 1: allocating 401 bytes exceeds its memory (capacity 1000 bytes, 600 in use)");
  cr_assert_null(big);
  expect_code(vt->allocate(b.self, 1, SIZE_MAX, &big), PW_STATUS_RESOURCE_EXHAUSTED,
              "cpu device 1");
  cr_assert_null(vt->allocate(b.self, 0, 1000, &other)); /* per device */
  cr_assert_null(vt->allocate(b.self, 1, 0, &empty));
  expect_code(vt->allocate(b.self, 2, 8, &big), PW_STATUS_INVALID_ARGUMENT, "device 2");

  unsigned char src[600], dst[600];
  for (int i = 0; i < 600; ++i) src[i] = (unsigned char)i;
  cr_assert_null(vt->copy_to_device(b.self, 1, m, 0, src, 600));
  cr_assert_null(vt->copy_to_host(b.self, 1, m, 100, dst, 500));
  cr_assert(memcmp(dst, src + 100, 500) == 0);
  unsigned char* host = vt->host_pointer(b.self, 1, m);
  cr_assert_not_null(host);
  cr_assert_eq(host[599], src[599]);
  cr_assert_eq((uintptr_t)host % 64, 0);
  cr_assert_null(vt->host_pointer(b.self, 0, m)); /* wrong device */
  cr_assert_null(vt->copy_to_host(b.self, 1, m, 600, dst, 0));
  expect_code(vt->copy_to_host(b.self, 1, m, 1, dst, 600), PW_STATUS_OUT_OF_RANGE,
              "bytes [1, 1 + 600) are outside the 600-byte memory of device 1");
  expect_code(vt->copy_to_device(b.self, 1, m, 601, src, 0), PW_STATUS_OUT_OF_RANGE, NULL);
  expect_code(vt->copy_to_device(b.self, 1, m, SIZE_MAX, src, 2), PW_STATUS_OUT_OF_RANGE, NULL);
  expect_code(vt->copy_to_host(b.self, 1, empty, 0, dst, 1), PW_STATUS_OUT_OF_RANGE, NULL);
  expect_code(vt->copy_to_host(b.self, 0, m, 0, dst, 1), PW_STATUS_INVALID_ARGUMENT,
              "belongs to device 1");
  expect_code(vt->copy_to_host(b.self, 1, m, 0, NULL, 1), PW_STATUS_INVALID_ARGUMENT, NULL);
  expect_code(vt->copy_to_host(b.self, 1, NULL, 0, dst, 1), PW_STATUS_INVALID_ARGUMENT,
              "not device memory");

  vt->deallocate(b.self, 1, m);
  cr_assert_null(vt->allocate(b.self, 1, 1000, &big)); /* capacity came back */
  vt->deallocate(b.self, 1, big);
  vt->deallocate(b.self, 1, empty);
  vt->deallocate(b.self, 0, other);
  vt->deallocate(b.self, 0, NULL);
  cpu_destroy(b);
  cr_assert_eq(pw_test_allocator_live(&counting), 0);
}

/*---------------------------------------------------------------------------
 * Launch checks and health
 *-------------------------------------------------------------------------*/

Test(cpu_backend, launch_rejects_bad_requests_without_calling_done) {
  pw_test_allocator_t counting;
  pw_test_allocator_init(&counting);
  pw_backend_t b;
  cr_assert_null(cpu_create(pw_test_allocator(&counting), 2, 1, 0, &b));
  const pw_backend_vtable_t* vt = b.vtable;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, (uint32_t[]){2});
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  cr_assert_null(cpu_load_text(b, "kernel relu\ninput f32[4] split(0,all)\noutput f32[4] split(0,all)\n",
                               &mesh, &exe, &sig));
  pw_backend_memory_t in0, out0, small, in1;
  cr_assert_null(vt->allocate(b.self, 0, 8, &in0));
  cr_assert_null(vt->allocate(b.self, 0, 8, &out0));
  cr_assert_null(vt->allocate(b.self, 0, 4, &small));
  cr_assert_null(vt->allocate(b.self, 1, 8, &in1));
  uint32_t group[] = {0, 1};
  cpu_waiter_t w;
  cpu_waiter_init(&w, 1);
  pw_backend_launch_t good = {
      .struct_size = sizeof(good), .executable = exe, .device = 0, .mesh_index = 0,
      .group_devices = group, .group_size = 2, .gang_id = 1, .inputs = &in0,
      .input_count = 1, .outputs = &out0, .output_count = 1,
      .done = cpu_waiter_done, .done_user = &w};
  pw_backend_launch_t l = good;
  l.struct_size = 8;
  expect_code(vt->launch(b.self, &l), PW_STATUS_INVALID_ARGUMENT, "struct_size");
  l = good;
  l.executable = (pw_backend_executable_t)&w;
  expect_code(vt->launch(b.self, &l), PW_STATUS_INVALID_ARGUMENT, "not a loaded executable");
  l = good;
  l.device = 9;
  expect_code(vt->launch(b.self, &l), PW_STATUS_INVALID_ARGUMENT, "device 9");
  l = good;
  l.group_size = 1;
  expect_code(vt->launch(b.self, &l), PW_STATUS_INVALID_ARGUMENT, "mesh of 2 devices");
  l = good;
  l.mesh_index = 1;
  expect_code(vt->launch(b.self, &l), PW_STATUS_INVALID_ARGUMENT, "mesh index 1");
  uint32_t repeated[] = {0, 0};
  l = good;
  l.group_devices = repeated;
  expect_code(vt->launch(b.self, &l), PW_STATUS_INVALID_ARGUMENT, "repeated");
  l = good;
  l.input_count = 0;
  expect_code(vt->launch(b.self, &l), PW_STATUS_INVALID_ARGUMENT, "0 inputs and 1 outputs given");
  l = good;
  l.inputs = &in1;
  expect_code(vt->launch(b.self, &l), PW_STATUS_INVALID_ARGUMENT,
              "kernel 'relu' input 0: cpu launch: the memory belongs to device 1");
  l = good;
  l.outputs = &small;
  expect_code(vt->launch(b.self, &l), PW_STATUS_INVALID_ARGUMENT,
              "output 0 has 4 bytes, its shard needs 8");
  l = good;
  l.outputs = &in0;
  expect_code(vt->launch(b.self, &l), PW_STATUS_INVALID_ARGUMENT,
              "output 0 is the same memory as input 0");
  l = good;
  l.done = NULL;
  expect_code(vt->launch(b.self, &l), PW_STATUS_INVALID_ARGUMENT, "done is NULL");
  expect_code(vt->launch(b.self, NULL), PW_STATUS_INVALID_ARGUMENT, NULL);
  cr_assert_eq(w.calls, 0, "a failed launch must not call done");

  /* A failed device: the launch is accepted and completes UNAVAILABLE. */
  cr_assert_null(pw_cpu_backend_set_health(b, 0, PW_DEVICE_FAILED));
  cr_assert_null(vt->launch(b.self, &good));
  cr_assert(cpu_waiter_wait(&w, 20000));
  pw_status_t s = cpu_waiter_take_error(&w);
  expect_code(s, PW_STATUS_UNAVAILABLE, "kernel 'relu' on cpu device 0: cpu device 0 has failed");
  cpu_waiter_destroy(&w);
  expect_code(pw_cpu_backend_set_health(b, 5, PW_DEVICE_FAILED), PW_STATUS_INVALID_ARGUMENT,
              NULL);
  expect_code(pw_cpu_backend_set_health(b, 0, (pw_device_health_t)9),
              PW_STATUS_INVALID_ARGUMENT, NULL);
  pw_backend_t not_cpu = {0};
  expect_code(pw_cpu_backend_set_health(not_cpu, 0, PW_DEVICE_FAILED),
              PW_STATUS_INVALID_ARGUMENT, "not a cpu backend");
  cr_assert_null(pw_cpu_backend_set_health(b, 0, PW_DEVICE_DEGRADED));
  cr_assert_eq(vt->health(b.self, 0), PW_DEVICE_DEGRADED);
  cpu_waiter_init(&w, 1);
  cr_assert_null(vt->launch(b.self, &good)); /* degraded still runs */
  cr_assert(cpu_waiter_wait(&w, 20000));
  cr_assert_eq(w.errors, 0);
  cpu_waiter_destroy(&w);

  vt->deallocate(b.self, 0, in0);
  vt->deallocate(b.self, 0, out0);
  vt->deallocate(b.self, 0, small);
  vt->deallocate(b.self, 1, in1);
  vt->unload(b.self, exe);
  cpu_destroy(b);
  cr_assert_eq(pw_test_allocator_live(&counting), 0);
}

/*---------------------------------------------------------------------------
 * Custom kernels
 *-------------------------------------------------------------------------*/

typedef struct custom_state_t {
  int checks;
  double offset_seen;
} custom_state_t;

/* y = x + offset + mesh_index: shows attributes and mesh position reach
 * the kernel. */
static pw_status_t offset_run(const pw_cpu_kernel_call_t* call) {
  const float* x = call->inputs[0].data;
  float* y = call->outputs[0].data;
  double offset = pw_cpu_program_number_attr(call->program, "offset", 0);
  if (offset < 0) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION, "negative offset %g", offset);
  }
  size_t n = call->outputs[0].size / sizeof(float);
  for (size_t i = 0; i < n; ++i) y[i] = x[i] + (float)offset + (float)call->mesh_index;
  return NULL;
}

static pw_status_t offset_check(void* user, const pw_cpu_program_t* program,
                                const pw_mesh_shape_t* mesh) {
  custom_state_t* state = user;
  ++state->checks;
  if (!pw_shape_equal(&program->inputs[0].shape, &program->outputs[0].shape)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "x and y shapes differ");
  }
  return NULL;
}

Test(cpu_backend, custom_kernel_registration) {
  pw_test_allocator_t counting;
  pw_test_allocator_init(&counting);
  pw_backend_t b;
  cr_assert_null(cpu_create(pw_test_allocator(&counting), 4, 2, 0, &b));
  custom_state_t state = {0, 0};
  pw_cpu_param_spec_t in = {"x", PW_CPU_DTYPE_BIT(PW_DTYPE_F32), 1};
  pw_cpu_param_spec_t out = {"y", PW_CPU_DTYPE_BIT(PW_DTYPE_F32), 1};
  pw_cpu_attr_spec_t attr = {"offset", PW_CPU_ATTR_NUMBER, true};
  pw_cpu_kernel_def_t def = {.struct_size = sizeof(def), .name = "my.offset",
                             .input_count = 1, .inputs = &in, .output_count = 1,
                             .outputs = &out, .attr_count = 1, .attrs = &attr,
                             .check = offset_check, .run = offset_run, .user = &state};
  cr_assert_null(pw_cpu_backend_register_kernel(b, &def));
  expect_code(pw_cpu_backend_register_kernel(b, &def), PW_STATUS_ALREADY_EXISTS, "my.offset");
  pw_cpu_kernel_def_t clash = def;
  clash.name = "matmul";
  expect_code(pw_cpu_backend_register_kernel(b, &clash), PW_STATUS_ALREADY_EXISTS, "matmul");
  pw_cpu_kernel_def_t bad = def;
  bad.name = "bad name";
  expect_code(pw_cpu_backend_register_kernel(b, &bad), PW_STATUS_INVALID_ARGUMENT, "bad name");
  bad = def;
  bad.run = NULL;
  bad.name = "norun";
  expect_code(pw_cpu_backend_register_kernel(b, &bad), PW_STATUS_INVALID_ARGUMENT, "no run");
  bad = def;
  bad.name = "struct";
  bad.struct_size = 16;
  expect_code(pw_cpu_backend_register_kernel(b, &bad), PW_STATUS_INVALID_ARGUMENT, "struct_size");
  bad = def;
  bad.name = "nooutputs";
  bad.output_count = 0;
  expect_code(pw_cpu_backend_register_kernel(b, &bad), PW_STATUS_INVALID_ARGUMENT, NULL);
  pw_cpu_param_spec_t bad_rank = {"x", 0, 9};
  bad = def;
  bad.name = "badrank";
  bad.inputs = &bad_rank;
  expect_code(pw_cpu_backend_register_kernel(b, &bad), PW_STATUS_INVALID_ARGUMENT, "rank 9");
  pw_backend_t not_cpu = {0};
  expect_code(pw_cpu_backend_register_kernel(not_cpu, &def), PW_STATUS_INVALID_ARGUMENT,
              "not a cpu backend");

  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, (uint32_t[]){4});
  float x[8] = {0, 1, 2, 3, 4, 5, 6, 7}, y[8];
  const void* ins[] = {x};
  void* outs[] = {y};
  cr_assert_null(cpu_run_text(b,
                              "kernel my.offset\ninput f32[8] split(0,all)\n"
                              "output f32[8] split(0,all)\nattr offset 10\n",
                              &mesh, ins, outs));
  for (int i = 0; i < 8; ++i) cr_assert_eq(y[i], x[i] + 10 + (float)(i / 2), "%d", i);
  cr_assert_geq(state.checks, 2, "check runs at compile and at load");
  /* The check hook's and the run function's errors are reported. */
  pw_status_t s = cpu_run_text(b,
                               "kernel my.offset\ninput f32[8] replicated\n"
                               "output f32[4] replicated\nattr offset 1\n",
                               &mesh, ins, outs);
  expect_code(s, PW_STATUS_INVALID_ARGUMENT, "line 1: kernel 'my.offset': x and y shapes differ");
  s = cpu_run_text(b,
                   "kernel my.offset\ninput f32[8] replicated\noutput f32[8] replicated\n"
                   "attr offset -1\n",
                   &mesh, ins, outs);
  expect_code(s, PW_STATUS_FAILED_PRECONDITION, "kernel 'my.offset' on cpu device");
  s = cpu_run_text(b,
                   "kernel my.offset\ninput f64[8] replicated\noutput f32[8] replicated\n"
                   "attr offset 1\n",
                   &mesh, ins, outs);
  expect_code(s, PW_STATUS_INVALID_ARGUMENT, "does not take dtype f64");
  cpu_destroy(b);
  cr_assert_eq(pw_test_allocator_live(&counting), 0);
}

/*---------------------------------------------------------------------------
 * Worker pool: continuations
 *-------------------------------------------------------------------------*/

/* Kernel "test.where": records the pool thread each call ran on, and sleeps
 * |sleep_ms| (an attribute) so that other workers can take queued tasks
 * meanwhile. */
typedef struct where_state_t {
  pthread_mutex_t mutex;
  pthread_t seen[64];
  uint32_t calls;
} where_state_t;

static pw_status_t where_run(const pw_cpu_kernel_call_t* call) {
  where_state_t* state = call->user;
  double ms = pw_cpu_program_number_attr(call->program, "sleep_ms", 0);
  if (ms > 0) {
    struct timespec ts = {0, (long)(ms * 1e6)};
    nanosleep(&ts, NULL);
  }
  pthread_mutex_lock(&state->mutex);
  if (state->calls < 64) state->seen[state->calls] = pthread_self();
  state->calls++;
  pthread_mutex_unlock(&state->mutex);
  return NULL;
}

static uint32_t where_distinct(where_state_t* state) {
  uint32_t n = 0, calls = state->calls < 64 ? state->calls : 64;
  for (uint32_t i = 0; i < calls; ++i) {
    bool earlier = false;
    for (uint32_t j = 0; j < i && !earlier; ++j) {
      earlier = pthread_equal(state->seen[i], state->seen[j]);
    }
    n += !earlier;
  }
  return n;
}

/* A backend of |devices| devices and 4 workers, with "test.where"
 * recording into |state|. */
static pw_backend_t where_backend(pw_test_allocator_t* counting, uint32_t devices,
                                  where_state_t* state) {
  static const pw_cpu_param_spec_t out = {"y", PW_CPU_DTYPES_ANY, -1};
  static const pw_cpu_attr_spec_t attr = {"sleep_ms", PW_CPU_ATTR_NUMBER, false};
  pw_test_allocator_init(counting);
  pw_backend_t b;
  cr_assert_null(cpu_create(pw_test_allocator(counting), devices, 4, 0, &b));
  pw_cpu_kernel_def_t def = {.struct_size = sizeof(def), .name = "test.where",
                             .input_count = 0, .output_count = 1, .outputs = &out,
                             .attr_count = 1, .attrs = &attr, .run = where_run,
                             .user = state};
  memset(state, 0, sizeof(*state));
  pthread_mutex_init(&state->mutex, NULL);
  cr_assert_null(pw_cpu_backend_register_kernel(b, &def));
  return b;
}

static void where_finish(pw_backend_t b, where_state_t* state, pw_test_allocator_t* counting,
                         cpu_waiter_t* waiter) {
  cpu_waiter_destroy(waiter);
  cpu_destroy(b);
  pthread_mutex_destroy(&state->mutex);
  cr_assert_eq(pw_test_allocator_live(counting), 0);
}

/* A chain: each launch's done launches the next, on the worker, as the
 * runtime's dispatch does when an op's completion readies its successor. */
typedef struct chain_t {
  pw_backend_t backend;
  pw_backend_launch_t launch;
  uint32_t left;
  cpu_waiter_t* waiter;
} chain_t;

static void chain_done(void* user, pw_status_t status) {
  chain_t* chain = user;
  if (status != NULL || --chain->left == 0) {
    cpu_waiter_done(chain->waiter, status);
    return;
  }
  pw_status_t s = chain->backend.vtable->launch(chain->backend.self, &chain->launch);
  if (s != NULL) cpu_waiter_done(chain->waiter, s);
}

Test(cpu_backend, a_chain_of_launches_stays_on_one_worker) {
  pw_test_allocator_t counting;
  where_state_t state;
  pw_backend_t b = where_backend(&counting, 1, &state);
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, (uint32_t[]){1});
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  cr_assert_null(cpu_load_text(b, "kernel test.where\noutput u8[1] replicated\n", &mesh, &exe,
                               &sig));
  pw_backend_memory_t out;
  cr_assert_null(b.vtable->allocate(b.self, 0, 1, &out));
  uint32_t group[] = {0};
  cpu_waiter_t w;
  cpu_waiter_init(&w, 1);
  chain_t chain = {b, {.struct_size = sizeof(pw_backend_launch_t), .executable = exe,
                       .device = 0, .group_devices = group, .group_size = 1, .gang_id = 1,
                       .outputs = &out, .output_count = 1, .done = chain_done,
                       .done_user = &chain},
                   32, &w};
  cr_assert_null(b.vtable->launch(b.self, &chain.launch));
  cr_assert(cpu_waiter_wait(&w, 20000));
  cr_assert_eq(w.errors, 0);
  cr_assert_eq(state.calls, 32);
  /* The first launch came from this thread (any worker takes it); every
   * later one was pushed by that worker with nothing queued: its
   * continuation. */
  cr_assert_eq(where_distinct(&state), 1, "the chain ran on %u workers", where_distinct(&state));
  b.vtable->deallocate(b.self, 0, out);
  b.vtable->unload(b.self, exe);
  where_finish(b, &state, &counting, &w);
}

/* A done that launches a 4-device gang: one launch is the worker's
 * continuation, the other three are queued and wake other workers, so the
 * gang still runs in parallel. */
typedef struct fanout_t {
  pw_backend_t backend;
  pw_backend_launch_t launches[4];
  cpu_waiter_t* waiter;
} fanout_t;

static void fanout_done(void* user, pw_status_t status) {
  fanout_t* f = user;
  if (status != NULL) {
    for (int i = 0; i < 4; ++i) cpu_waiter_done(f->waiter, pw_status_clone(status));
    pw_status_free(status);
    return;
  }
  for (int i = 0; i < 4; ++i) {
    pw_status_t s = f->backend.vtable->launch(f->backend.self, &f->launches[i]);
    if (s != NULL) cpu_waiter_done(f->waiter, s);
  }
}

Test(cpu_backend, a_gang_launched_by_a_worker_still_runs_on_several_workers) {
  pw_test_allocator_t counting;
  where_state_t state;
  pw_backend_t b = where_backend(&counting, 4, &state);
  pw_mesh_shape_t one = pw_mesh_shape_make(1, (uint32_t[]){1});
  pw_mesh_shape_t four = pw_mesh_shape_make(1, (uint32_t[]){4});
  pw_backend_executable_t first = NULL, gang = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  cr_assert_null(cpu_load_text(b, "kernel test.where\noutput u8[1] replicated\n", &one, &first,
                               &sig));
  cr_assert_null(cpu_load_text(b,
                               "kernel test.where\noutput u8[4] split(0,all)\n"
                               "attr sleep_ms 100\n",
                               &four, &gang, &sig));
  pw_backend_memory_t out[4];
  for (uint32_t d = 0; d < 4; ++d) cr_assert_null(b.vtable->allocate(b.self, d, 1, &out[d]));
  uint32_t group1[] = {0}, group4[] = {0, 1, 2, 3};
  cpu_waiter_t w;
  cpu_waiter_init(&w, 4);
  fanout_t f = {.backend = b, .waiter = &w};
  for (uint32_t d = 0; d < 4; ++d) {
    f.launches[d] = (pw_backend_launch_t){
        .struct_size = sizeof(pw_backend_launch_t), .executable = gang, .device = d,
        .mesh_index = d, .group_devices = group4, .group_size = 4, .gang_id = 2,
        .outputs = &out[d], .output_count = 1, .done = cpu_waiter_done, .done_user = &w};
  }
  pw_backend_launch_t start = {.struct_size = sizeof(start), .executable = first, .device = 0,
                               .group_devices = group1, .group_size = 1, .gang_id = 1,
                               .outputs = &out[0], .output_count = 1, .done = fanout_done,
                               .done_user = &f};
  cr_assert_null(b.vtable->launch(b.self, &start));
  cr_assert(cpu_waiter_wait(&w, 20000));
  cr_assert_eq(w.errors, 0);
  cr_assert_eq(state.calls, 5);
  /* Call 0 is the first launch; calls 1-4 the gang's, each sleeping
   * 100 ms: had all four waited for the launching worker, they would have
   * run on it alone. */
  where_state_t gang_calls = state;
  memmove(gang_calls.seen, state.seen + 1, 4 * sizeof(pthread_t));
  gang_calls.calls = 4;
  cr_assert_geq(where_distinct(&gang_calls), 2, "the gang ran on %u workers",
                where_distinct(&gang_calls));
  for (uint32_t d = 0; d < 4; ++d) b.vtable->deallocate(b.self, d, out[d]);
  b.vtable->unload(b.self, first);
  b.vtable->unload(b.self, gang);
  where_finish(b, &state, &counting, &w);
}

/*---------------------------------------------------------------------------
 * Allocation failure sweeps
 *-------------------------------------------------------------------------*/

static bool expect_exhausted(pw_status_t s, bool expect_failure) {
  if (s == NULL) return true; /* this step did not hit the failure */
  bool ok = expect_failure && pw_status_code(s) == PW_STATUS_RESOURCE_EXHAUSTED;
  if (!ok) fprintf(stderr, "unexpected: %s\n", pw_status_message(s));
  pw_status_free(s);
  return ok;
}

/* create, register, compile, load, allocate, copy, launch, unload, destroy
 * with one allocation failing: every step reports RESOURCE_EXHAUSTED and
 * the sweep checks nothing leaks. */
static bool sweep_body(pw_allocator_t allocator, bool expect_failure, void* user) {
  pw_backend_t b;
  pw_status_t s = cpu_create(allocator, 2, 1, 0, &b);
  if (s != NULL) return expect_exhausted(s, expect_failure) && b.vtable == NULL;
  const pw_backend_vtable_t* vt = b.vtable;
  bool ok = true;
  pw_cpu_param_spec_t spec = {"y", 0, -1};
  pw_cpu_kernel_def_t def = {.struct_size = sizeof(def), .name = "sweep.noop",
                             .output_count = 1, .outputs = &spec, .run = offset_run};
  s = pw_cpu_backend_register_kernel(b, &def);
  ok = ok && expect_exhausted(s, expect_failure);
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, (uint32_t[]){2});
  const char* text =
      "kernel all_reduce_sum\ninput f32[2,4] split(0,all)\noutput f32[4] replicated\n";
  void* bytes = NULL;
  size_t size = 0;
  s = vt->compile(b.self, text, strlen(text), &mesh, "", allocator, &bytes, &size);
  ok = ok && expect_exhausted(s, expect_failure);
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  if (bytes != NULL) {
    s = vt->load(b.self, bytes, size, &exe, &sig);
    ok = ok && expect_exhausted(s, expect_failure);
    pw_allocator_free(allocator, bytes, size);
  }
  pw_backend_memory_t in[2] = {NULL, NULL}, out[2] = {NULL, NULL};
  for (uint32_t d = 0; d < 2; ++d) {
    s = vt->allocate(b.self, d, 16, &in[d]);
    ok = ok && expect_exhausted(s, expect_failure);
    s = vt->allocate(b.self, d, 16, &out[d]);
    ok = ok && expect_exhausted(s, expect_failure);
  }
  if (exe != NULL && in[0] && in[1] && out[0] && out[1]) {
    float v[4] = {1, 2, 3, 4};
    uint32_t group[] = {0, 1};
    cpu_waiter_t w;
    cpu_waiter_init(&w, 0);
    for (uint32_t d = 0; d < 2; ++d) {
      ok = ok && vt->copy_to_device(b.self, d, in[d], 0, v, sizeof(v)) == NULL;
      pw_backend_launch_t l = {
          .struct_size = sizeof(l), .executable = exe, .device = d, .mesh_index = d,
          .group_devices = group, .group_size = 2, .gang_id = 1, .inputs = &in[d],
          .input_count = 1, .outputs = &out[d], .output_count = 1,
          .done = cpu_waiter_done, .done_user = &w};
      pthread_mutex_lock(&w.mutex);
      w.expected++;
      pthread_mutex_unlock(&w.mutex);
      s = vt->launch(b.self, &l);
      if (s != NULL) {
        pthread_mutex_lock(&w.mutex);
        w.expected--;
        pthread_mutex_unlock(&w.mutex);
      }
      ok = ok && expect_exhausted(s, expect_failure);
    }
    /* With one launch refused, the other waits until destroy cancels it. */
    if (w.expected == 2) {
      ok = ok && cpu_waiter_wait(&w, 20000) && w.errors == 0;
      float sum[4];
      ok = ok && vt->copy_to_host(b.self, 1, out[1], 0, sum, sizeof(sum)) == NULL &&
           sum[3] == 8;
    }
    for (uint32_t d = 0; d < 2; ++d) {
      vt->deallocate(b.self, d, in[d]);
      vt->deallocate(b.self, d, out[d]);
      in[d] = out[d] = NULL;
    }
    vt->unload(b.self, exe);
    exe = NULL;
    cpu_destroy(b);
    ok = ok && w.calls == w.expected;
    cpu_waiter_destroy(&w);
    return ok;
  }
  for (uint32_t d = 0; d < 2; ++d) {
    if (in[d]) vt->deallocate(b.self, d, in[d]);
    if (out[d]) vt->deallocate(b.self, d, out[d]);
  }
  if (exe != NULL) vt->unload(b.self, exe);
  cpu_destroy(b);
  return ok;
}

Test(cpu_backend, every_allocation_failure_is_resource_exhausted_and_leak_free) {
  char why[256] = "";
  int swept = pw_test_allocator_sweep(sweep_body, NULL, why);
  cr_assert_gt(swept, 10, "sweep failed: %s", why);
  cr_log_info("swept %d allocation failure points", swept);
}
