/* The test double's own behaviour beyond the CTS: its program format,
 * completion modes, fault injection and counters. Runtime tests rely on
 * these, so they are pinned here. */
#include <stdio.h>
#include <string.h>

#include "cts/cts.h"
#include "cts/double_backend.h"

TestSuite(double_backend, .fini = pw_test_check_leaks);

static pw_backend_t pw_dt_create(pw_double_completion_t completion, uint32_t devices) {
  pw_double_options_t options;
  pw_double_options_init(&options);
  options.completion = completion;
  options.device_count = devices;
  pw_backend_t b;
  PW_CTS_OK(pw_double_backend_create(&options, &b));
  return b;
}

static pw_double_backend_t* pw_dt(const pw_backend_t* b) {
  pw_double_backend_t* d = pw_double_backend_from(b);
  cr_assert_not_null(d);
  return d;
}

/* Compiles |text| for a |devices|-device row and loads it. */
static pw_backend_executable_t pw_dt_load(const pw_backend_t* b, const char* text,
                                          uint32_t devices, pw_executable_signature_t* sig) {
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &devices);
  void* bytes = NULL;
  size_t size = 0;
  PW_CTS_OK(pw__backend_compile(b, text, strlen(text), &mesh, NULL, pw_allocator_system(),
                                &bytes, &size));
  pw_backend_executable_t e = NULL;
  pw_executable_signature_t local = {.struct_size = sizeof(pw_executable_signature_t)};
  PW_CTS_OK(pw__backend_load(b, bytes, size, &e, sig ? sig : &local));
  pw_allocator_free(pw_allocator_system(), bytes, size);
  return e;
}

/* A one-device launch of |e| on |device| with optional in/out memory. */
static pw_status_t pw_dt_launch(const pw_backend_t* b, pw_backend_executable_t e,
                                uint32_t* device, uint64_t gang_id, pw_backend_memory_t* in,
                                pw_backend_memory_t* out, pw_cts_slot_t* slot) {
  pw_backend_launch_t l;
  memset(&l, 0, sizeof(l));
  l.struct_size = sizeof(l);
  l.executable = e;
  l.device = *device;
  l.group_devices = device;
  l.group_size = 1;
  l.gang_id = gang_id;
  l.inputs = in;
  l.input_count = in ? 1 : 0;
  l.outputs = out;
  l.output_count = out ? 1 : 0;
  l.done = pw_cts_done;
  l.done_user = slot;
  return pw__backend_launch(b, &l);
}

Test(double_backend, program_text_is_canonicalised) {
  pw_backend_t b = pw_dt_create(PW_DOUBLE_COMPLETE_INLINE, 8);
  uint32_t n = 8;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &n);
  const char* a = "copy\ninput f32[8,4] split(0,all)\noutput f32[8,4] split(0,all)\n";
  const char* c = "# comment\n  copy \r\n\n\tinput   f32[8,4]\tsplit(0,all)\r\noutput f32[8,4] "
                  "split(0,all)";
  void* ba = NULL;
  void* bc = NULL;
  size_t sa = 0;
  size_t sc = 0;
  PW_CTS_OK(pw__backend_compile(&b, a, strlen(a), &mesh, NULL, pw_allocator_system(), &ba, &sa));
  PW_CTS_OK(pw__backend_compile(&b, c, strlen(c), &mesh, NULL, pw_allocator_system(), &bc, &sc));
  cr_assert(sa == sc && memcmp(ba, bc, sa) == 0, "spacing changed the executable bytes");
  pw_allocator_free(pw_allocator_system(), bc, sc);
  /* Options are not interpreted but are part of the bytes. */
  PW_CTS_OK(pw__backend_compile(&b, a, strlen(a), &mesh, "tag=1", pw_allocator_system(), &bc,
                                &sc));
  cr_assert(sc != sa || memcmp(ba, bc, sa) != 0, "options are not in the bytes");
  pw_allocator_free(pw_allocator_system(), bc, sc);
  pw_allocator_free(pw_allocator_system(), ba, sa);
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  pw_backend_executable_t e = pw_dt_load(&b, a, 8, &sig);
  cr_assert_str_eq(sig.name, "copy");
  cr_assert_eq(sig.input_count, 1);
  cr_assert_eq(sig.inputs[0].dtype, PW_DTYPE_F32);
  cr_assert_eq(sig.inputs[0].shape.rank, 2);
  cr_assert_eq(sig.inputs[0].shape.dims[1], 4);
  cr_assert_eq(sig.inputs[0].sharding.kind, PW_SHARDING_SPLIT);
  cr_assert_eq(sig.inputs[0].sharding.mesh_axis, PW_MESH_AXIS_ALL);
  cr_assert_eq(pw_double_backend_live_executables(pw_dt(&b)), 1);
  pw__backend_unload(&b, e);
  cr_assert_eq(pw_double_backend_live_executables(pw_dt(&b)), 0);
  pw__backend_destroy(&b);
}

Test(double_backend, default_signatures) {
  pw_backend_t b = pw_dt_create(PW_DOUBLE_COMPLETE_INLINE, 2);
  static const struct {
    const char* text;
    uint32_t inputs, outputs;
    pw_dtype_t dtype;
  } cases[] = {{"noop", 0, 0, PW_DTYPE_INVALID}, {"fail 3", 0, 0, PW_DTYPE_INVALID},
               {"fill 9", 0, 1, PW_DTYPE_U8},     {"copy", 1, 1, PW_DTYPE_U8},
               {"all_reduce_sum", 1, 1, PW_DTYPE_F32}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
    pw_backend_executable_t e = pw_dt_load(&b, cases[i].text, 2, &sig);
    cr_assert_eq(sig.input_count, cases[i].inputs, "%s", cases[i].text);
    cr_assert_eq(sig.output_count, cases[i].outputs, "%s", cases[i].text);
    if (sig.output_count) cr_assert_eq(sig.outputs[0].dtype, cases[i].dtype, "%s", cases[i].text);
    pw__backend_unload(&b, e);
  }
  pw__backend_destroy(&b);
}

Test(double_backend, errors_name_the_line_and_load_codes) {
  pw_backend_t b = pw_dt_create(PW_DOUBLE_COMPLETE_INLINE, 2);
  uint32_t n = 2;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &n);
  const char* bad = "copy\ninput f33[8] replicated\n";
  void* bytes = NULL;
  size_t size = 0;
  pw_status_t status = pw__backend_compile(&b, bad, strlen(bad), &mesh, NULL,
                                           pw_allocator_system(), &bytes, &size);
  cr_assert_eq(pw_status_code(status), PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(pw_status_message(status), "line 2") != NULL, "%s",
            pw_status_message(status));
  pw_status_free(status);
  PW_CTS_OK(pw__backend_compile(&b, "noop", 4, &mesh, NULL, pw_allocator_system(), &bytes,
                                &size));
  unsigned char* p = bytes;
  pw_backend_executable_t e = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  struct {
    size_t at;
    pw_status_code_t code;
  } flips[] = {{0, PW_STATUS_INVALID_ARGUMENT}, {4, PW_STATUS_INVALID_ARGUMENT},
               {8, PW_STATUS_DATA_LOSS},        {12, PW_STATUS_DATA_LOSS},
               {size - 1, PW_STATUS_DATA_LOSS}};
  for (size_t i = 0; i < sizeof(flips) / sizeof(flips[0]); ++i) {
    p[flips[i].at] ^= 0x10;
    status = pw__backend_load(&b, bytes, size, &e, &sig);
    cr_assert_eq(pw_status_code(status), flips[i].code, "flip at %zu: %s", flips[i].at,
                 pw_status_message(status));
    pw_status_free(status);
    p[flips[i].at] ^= 0x10;
  }
  pw_allocator_free(pw_allocator_system(), bytes, size);
  pw__backend_destroy(&b);
}

Test(double_backend, completion_modes) {
  /* Inline: done has run when launch returns. */
  pw_backend_t b = pw_dt_create(PW_DOUBLE_COMPLETE_INLINE, 2);
  pw_backend_executable_t e = pw_dt_load(&b, "noop", 1, NULL);
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, 3);
  uint32_t device = 1;
  PW_CTS_OK(pw_dt_launch(&b, e, &device, 1, NULL, NULL, &tracker.slots[0]));
  pw_cts_tracker_expect_calls(&tracker, 0, 1);
  pw__backend_unload(&b, e);
  pw__backend_destroy(&b);
  /* Deferred: nothing runs until the test says so, then in FIFO order. */
  b = pw_dt_create(PW_DOUBLE_COMPLETE_DEFERRED, 2);
  pw_double_backend_t* d = pw_dt(&b);
  e = pw_dt_load(&b, "noop", 1, NULL);
  device = 0;
  PW_CTS_OK(pw_dt_launch(&b, e, &device, 7, NULL, NULL, &tracker.slots[1]));
  PW_CTS_OK(pw_dt_launch(&b, e, &device, 8, NULL, NULL, &tracker.slots[2]));
  cr_assert_eq(pw_double_backend_in_flight(d), 2);
  cr_assert_eq(atomic_load(&tracker.slots[1].calls), 0);
  cr_assert_eq(pw_double_backend_run_deferred(d, 1), 1);
  pw_cts_tracker_expect_calls(&tracker, 1, 1);
  pw_cts_tracker_expect_calls(&tracker, 2, 0);
  cr_assert_eq(pw_double_backend_run_deferred(d, 0), 1);
  pw_cts_tracker_expect_calls(&tracker, 2, 1);
  cr_assert(pw_double_backend_wait_idle(d, 0));
  uint64_t order[4];
  cr_assert_eq(pw_double_backend_launch_order(d, 0, order, 4), 2);
  cr_assert(order[0] == 7 && order[1] == 8);
  pw__backend_unload(&b, e);
  pw__backend_destroy(&b);
  pw_cts_tracker_free(&tracker);
}

Test(double_backend, threaded_pause_keeps_launches_in_flight) {
  pw_backend_t b = pw_dt_create(PW_DOUBLE_COMPLETE_THREADED, 2);
  pw_double_backend_t* d = pw_dt(&b);
  pw_backend_executable_t e = pw_dt_load(&b, "noop", 1, NULL);
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, 4);
  pw_double_backend_pause(d, true);
  uint32_t device = 1;
  for (int i = 0; i < 4; ++i) {
    PW_CTS_OK(pw_dt_launch(&b, e, &device, (uint64_t)i + 1, NULL, NULL, &tracker.slots[i]));
  }
  cr_assert(!pw_double_backend_wait_idle(d, 20 * 1000 * 1000), "paused backend went idle");
  cr_assert_eq(pw_double_backend_in_flight(d), 4);
  pw_double_backend_pause(d, false);
  cr_assert(pw_double_backend_wait_idle(d, PW_CTS_TIMEOUT_NS));
  for (int i = 0; i < 4; ++i) pw_cts_tracker_expect_calls(&tracker, (size_t)i, 1);
  pw_double_device_stats_t stats = pw_double_backend_device_stats(d, 1);
  cr_assert(stats.launches == 4 && stats.completed_ok == 4 && stats.rejected == 0);
  cr_assert_eq(pw_double_backend_total_launches(d), 4);
  pw_double_backend_reset_counters(d);
  cr_assert_eq(pw_double_backend_launch_count(d, 1), 0);
  pw__backend_unload(&b, e);
  pw__backend_destroy(&b);
  pw_cts_tracker_free(&tracker);
}

Test(double_backend, nth_launch_failure_at_launch_and_at_completion) {
  pw_backend_t b = pw_dt_create(PW_DOUBLE_COMPLETE_INLINE, 1);
  pw_double_backend_t* d = pw_dt(&b);
  pw_backend_executable_t e = pw_dt_load(&b, "noop", 1, NULL);
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, 6);
  uint32_t device = 0;
  pw_double_backend_fail_launch(d, 2, PW_STATUS_ABORTED, PW_DOUBLE_FAIL_AT_LAUNCH);
  PW_CTS_OK(pw_dt_launch(&b, e, &device, 1, NULL, NULL, &tracker.slots[0]));
  PW_CTS_ERROR(pw_dt_launch(&b, e, &device, 2, NULL, NULL, &tracker.slots[1]),
               PW_STATUS_ABORTED);
  PW_CTS_OK(pw_dt_launch(&b, e, &device, 3, NULL, NULL, &tracker.slots[2]));
  pw_cts_tracker_expect_calls(&tracker, 1, 0);
  pw_double_backend_fail_launch(d, 1, PW_STATUS_DATA_LOSS, PW_DOUBLE_FAIL_AT_COMPLETION);
  PW_CTS_OK(pw_dt_launch(&b, e, &device, 4, NULL, NULL, &tracker.slots[3]));
  cr_assert_eq(atomic_load(&tracker.slots[3].code), PW_STATUS_DATA_LOSS);
  /* The program "fail 14" completes with UNAVAILABLE. */
  pw_backend_executable_t fail = pw_dt_load(&b, "fail 14", 1, NULL);
  PW_CTS_OK(pw_dt_launch(&b, fail, &device, 5, NULL, NULL, &tracker.slots[4]));
  cr_assert_eq(atomic_load(&tracker.slots[4].code), PW_STATUS_UNAVAILABLE);
  pw_double_device_stats_t stats = pw_double_backend_device_stats(d, 0);
  cr_assert_eq(stats.launches, 4);
  cr_assert_eq(stats.rejected, 1);
  cr_assert_eq(stats.completed_ok, 2);
  cr_assert_eq(stats.completed_error, 2);
  uint64_t order[8];
  cr_assert_eq(pw_double_backend_launch_order(d, 0, order, 8), 4);
  cr_assert(order[0] == 1 && order[1] == 3 && order[2] == 4 && order[3] == 5);
  pw__backend_unload(&b, fail);
  pw__backend_unload(&b, e);
  pw__backend_destroy(&b);
  pw_cts_tracker_free(&tracker);
}

Test(double_backend, failed_device_modes_and_recovery) {
  for (int mode = 0; mode < 2; ++mode) {
    pw_double_options_t options;
    pw_double_options_init(&options);
    options.device_count = 2;
    options.failed_device_mode = (pw_double_fail_mode_t)mode;
    pw_backend_t b;
    PW_CTS_OK(pw_double_backend_create(&options, &b));
    pw_double_backend_t* d = pw_dt(&b);
    pw_backend_executable_t e = pw_dt_load(&b, "noop", 1, NULL);
    pw_cts_tracker_t tracker;
    pw_cts_tracker_init(&tracker, 2);
    uint32_t device = 1;
    pw_double_backend_set_health(d, 1, PW_DEVICE_FAILED);
    cr_assert_eq(pw__backend_health(&b, 1), PW_DEVICE_FAILED);
    pw_status_t status = pw_dt_launch(&b, e, &device, 1, NULL, NULL, &tracker.slots[0]);
    if (mode == PW_DOUBLE_FAIL_AT_LAUNCH) {
      PW_CTS_ERROR(status, PW_STATUS_UNAVAILABLE);
      pw_cts_tracker_expect_calls(&tracker, 0, 0);
    } else {
      PW_CTS_OK(status);
      cr_assert_eq(atomic_load(&tracker.slots[0].code), PW_STATUS_UNAVAILABLE);
    }
    pw_double_backend_set_health(d, 1, PW_DEVICE_HEALTHY);
    PW_CTS_OK(pw_dt_launch(&b, e, &device, 2, NULL, NULL, &tracker.slots[1]));
    cr_assert_eq(atomic_load(&tracker.slots[1].code), PW_STATUS_OK);
    pw__backend_unload(&b, e);
    pw__backend_destroy(&b);
    pw_cts_tracker_free(&tracker);
  }
}

Test(double_backend, fill_and_in_place_all_reduce) {
  pw_backend_t b = pw_dt_create(PW_DOUBLE_COMPLETE_INLINE, 3);
  pw_backend_executable_t fill = pw_dt_load(&b, "fill 171\noutput u8[5] replicated\n", 1, NULL);
  pw_backend_memory_t m[3];
  for (uint32_t i = 0; i < 3; ++i) PW_CTS_OK(pw__backend_allocate(&b, i, 8, &m[i]));
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, 4);
  uint32_t device = 2;
  PW_CTS_OK(pw_dt_launch(&b, fill, &device, 1, NULL, &m[2], &tracker.slots[0]));
  unsigned char bytes[8];
  PW_CTS_OK(pw__backend_copy_to_host(&b, 2, m[2], 0, bytes, 8));
  cr_assert(bytes[0] == 171 && bytes[7] == 171);
  /* i32 all-reduce, in place (input == output), wrapping on overflow. */
  pw_backend_executable_t ar =
      pw_dt_load(&b, "all_reduce_sum\ninput i32[2] replicated\noutput i32[2] replicated\n", 3,
                 NULL);
  uint32_t devices[3] = {0, 1, 2};
  for (uint32_t i = 0; i < 3; ++i) {
    int32_t v[2] = {(int32_t)i + 1, INT32_MAX};
    PW_CTS_OK(pw__backend_copy_to_device(&b, i, m[i], 0, v, sizeof(v)));
  }
  for (uint32_t i = 0; i < 3; ++i) {
    pw_backend_launch_t l;
    memset(&l, 0, sizeof(l));
    l.struct_size = sizeof(l);
    l.executable = ar;
    l.device = i;
    l.mesh_index = i;
    l.group_devices = devices;
    l.group_size = 3;
    l.gang_id = 42;
    l.inputs = &m[i];
    l.input_count = 1;
    l.outputs = &m[i];
    l.output_count = 1;
    l.done = pw_cts_done;
    l.done_user = &tracker.slots[1 + i];
    PW_CTS_OK(pw__backend_launch(&b, &l));
    /* Inline: parts complete when the last one arrives. */
    if (i < 2) cr_assert_eq(atomic_load(&tracker.slots[1].calls), 0);
  }
  for (uint32_t i = 0; i < 3; ++i) {
    int32_t v[2];
    PW_CTS_OK(pw__backend_copy_to_host(&b, i, m[i], 0, v, sizeof(v)));
    cr_assert_eq(v[0], 6);
    cr_assert_eq(v[1], (int32_t)((uint32_t)INT32_MAX * 3u));
  }
  for (uint32_t i = 0; i < 3; ++i) pw__backend_deallocate(&b, i, m[i]);
  cr_assert_eq(pw_double_backend_live_allocations(pw_dt(&b)), 0);
  pw__backend_unload(&b, ar);
  pw__backend_unload(&b, fill);
  pw__backend_destroy(&b);
  pw_cts_tracker_free(&tracker);
}

Test(double_backend, refused_collective_part_aborts_its_gang) {
  pw_backend_t b = pw_dt_create(PW_DOUBLE_COMPLETE_INLINE, 3);
  pw_double_backend_t* d = pw_dt(&b);
  pw_backend_executable_t ar = pw_dt_load(&b, "all_reduce_sum", 3, NULL);
  pw_backend_memory_t in[3];
  pw_backend_memory_t out[3];
  for (uint32_t i = 0; i < 3; ++i) {
    PW_CTS_OK(pw__backend_allocate(&b, i, 4, &in[i]));
    PW_CTS_OK(pw__backend_allocate(&b, i, 4, &out[i]));
  }
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, 3);
  uint32_t devices[3] = {0, 1, 2};
  pw_double_backend_fail_launch(d, 2, PW_STATUS_RESOURCE_EXHAUSTED, PW_DOUBLE_FAIL_AT_LAUNCH);
  for (uint32_t i = 0; i < 3; ++i) {
    pw_backend_launch_t l;
    memset(&l, 0, sizeof(l));
    l.struct_size = sizeof(l);
    l.executable = ar;
    l.device = i;
    l.mesh_index = i;
    l.group_devices = devices;
    l.group_size = 3;
    l.gang_id = 9;
    l.inputs = &in[i];
    l.input_count = 1;
    l.outputs = &out[i];
    l.output_count = 1;
    l.done = pw_cts_done;
    l.done_user = &tracker.slots[i];
    pw_status_t status = pw__backend_launch(&b, &l);
    if (i == 1) {
      PW_CTS_ERROR(status, PW_STATUS_RESOURCE_EXHAUSTED);
    } else {
      PW_CTS_OK(status);
    }
  }
  /* Part 0 was waiting: aborted when part 1 was refused; part 2 arrived
   * after and was aborted at once. Nothing waits. */
  cr_assert_eq(atomic_load(&tracker.slots[0].code), PW_STATUS_ABORTED);
  pw_cts_tracker_expect_calls(&tracker, 1, 0);
  cr_assert_eq(atomic_load(&tracker.slots[2].code), PW_STATUS_ABORTED);
  cr_assert(pw_double_backend_wait_idle(d, 0));
  for (uint32_t i = 0; i < 3; ++i) {
    pw__backend_deallocate(&b, i, in[i]);
    pw__backend_deallocate(&b, i, out[i]);
  }
  pw__backend_unload(&b, ar);
  pw__backend_destroy(&b);
  pw_cts_tracker_free(&tracker);
}

Test(double_backend, no_op_configuration) {
  pw_double_options_t options;
  pw_double_options_init(&options);
  options.no_op = true;
  options.completion = PW_DOUBLE_COMPLETE_THREADED; /* ignored */
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  options.allocator = pw_test_allocator(&t);
  pw_backend_t b;
  PW_CTS_OK(pw_double_backend_create(&options, &b));
  pw_double_backend_t* d = pw_dt(&b);
  size_t after_create = pw_test_allocator_live(&t);
  pw_backend_memory_t m = NULL;
  PW_CTS_OK(pw__backend_allocate(&b, 3, 1 << 20, &m));
  cr_assert_not_null(m);
  cr_assert_null(pw__backend_host_pointer(&b, 3, m));
  cr_assert_eq(pw_test_allocator_live(&t), after_create, "no-op allocate allocated");
  pw_backend_executable_t e = pw_dt_load(&b, "fail 3", 1, NULL);
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, 100);
  uint32_t device = 3;
  for (int i = 0; i < 100; ++i) {
    PW_CTS_OK(pw_dt_launch(&b, e, &device, (uint64_t)i, NULL, NULL, &tracker.slots[i]));
    pw_cts_tracker_expect_calls(&tracker, (size_t)i, 1); /* inline */
    cr_assert_eq(atomic_load(&tracker.slots[i].code), PW_STATUS_OK); /* trivially */
  }
  cr_assert_eq(pw_double_backend_launch_count(d, 3), 100);
  cr_assert_eq(pw_double_backend_device_stats(d, 3).completed_ok, 100);
  pw__backend_deallocate(&b, 3, m);
  pw__backend_unload(&b, e);
  pw__backend_destroy(&b);
  cr_assert_eq(pw_test_allocator_live(&t), 0);
  pw_cts_tracker_free(&tracker);
}

Test(double_backend, capacity_and_options) {
  pw_double_options_t options;
  pw_double_options_init(&options);
  options.device_count = 1;
  options.memory_bytes = 1024;
  pw_backend_t b;
  PW_CTS_OK(pw_double_backend_create(&options, &b));
  pw_backend_memory_t a = NULL;
  pw_backend_memory_t c = NULL;
  PW_CTS_OK(pw__backend_allocate(&b, 0, 1000, &a));
  PW_CTS_ERROR(pw__backend_allocate(&b, 0, 100, &c), PW_STATUS_RESOURCE_EXHAUSTED);
  pw__backend_deallocate(&b, 0, a);
  PW_CTS_OK(pw__backend_allocate(&b, 0, 100, &c));
  pw__backend_deallocate(&b, 0, c);
  pw__backend_destroy(&b);
  options.struct_size = 8;
  PW_CTS_ERROR(pw_double_backend_create(&options, &b), PW_STATUS_INVALID_ARGUMENT);
  cr_assert_null(b.vtable);
  pw_double_options_init(&options);
  options.completion = (pw_double_completion_t)7;
  PW_CTS_ERROR(pw_double_backend_create(&options, &b), PW_STATUS_INVALID_ARGUMENT);
  PW_CTS_ERROR(pw_double_backend_create_variant(NULL, (pw_double_vtable_variant_t)99, &b),
               PW_STATUS_INVALID_ARGUMENT);
}

Test(double_backend, destroy_completes_stragglers_exactly_once) {
  /* Destroy with work in flight breaks the contract, but the double still
   * completes every accepted launch once: queued ones run, a collective
   * waiting for parts is CANCELLED. */
  pw_backend_t b = pw_dt_create(PW_DOUBLE_COMPLETE_DEFERRED, 2);
  pw_backend_executable_t noop = pw_dt_load(&b, "noop", 1, NULL);
  pw_backend_executable_t ar = pw_dt_load(&b, "all_reduce_sum", 2, NULL);
  pw_backend_memory_t in = NULL;
  pw_backend_memory_t out = NULL;
  PW_CTS_OK(pw__backend_allocate(&b, 0, 4, &in));
  PW_CTS_OK(pw__backend_allocate(&b, 0, 4, &out));
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, 2);
  uint32_t device = 0;
  PW_CTS_OK(pw_dt_launch(&b, noop, &device, 1, NULL, NULL, &tracker.slots[0]));
  uint32_t devices[2] = {0, 1};
  pw_backend_launch_t l;
  memset(&l, 0, sizeof(l));
  l.struct_size = sizeof(l);
  l.executable = ar;
  l.group_devices = devices;
  l.group_size = 2;
  l.gang_id = 5;
  l.inputs = &in;
  l.input_count = 1;
  l.outputs = &out;
  l.output_count = 1;
  l.done = pw_cts_done;
  l.done_user = &tracker.slots[1];
  PW_CTS_OK(pw__backend_launch(&b, &l));
  cr_assert_eq(pw_double_backend_run_deferred(pw_dt(&b), 0), 2);
  pw_cts_tracker_expect_calls(&tracker, 1, 0); /* waiting for device 1's part */
  pw__backend_deallocate(&b, 0, in);
  pw__backend_deallocate(&b, 0, out);
  pw__backend_unload(&b, noop);
  pw__backend_unload(&b, ar); /* the waiting part only keeps the pointer */
  pw__backend_destroy(&b);
  pw_cts_tracker_expect_calls(&tracker, 0, 1);
  pw_cts_tracker_expect_calls(&tracker, 1, 1);
  cr_assert_eq(atomic_load(&tracker.slots[1].code), PW_STATUS_CANCELLED);
  pw_cts_tracker_free(&tracker);
}

/* One host launch of |e| over mesh positions [start, start + count) of
 * |group| (a |size|-device gang), no parameters. */
static pw_status_t pw_dt_launch_host(const pw_backend_t* b, pw_backend_executable_t e,
                                     const uint32_t* group, uint32_t size, uint32_t host,
                                     uint32_t start, uint32_t count, pw_cts_slot_t* slot) {
  pw_backend_host_launch_t h;
  memset(&h, 0, sizeof(h));
  h.struct_size = sizeof(h);
  h.executable = e;
  h.host = host;
  h.mesh_start = start;
  h.device_count = count;
  h.group_devices = group;
  h.group_size = size;
  h.gang_id = 77;
  h.done = pw_cts_done;
  h.done_user = slot;
  return b->vtable->launch_host(b->self, &h);
}

Test(double_backend, hosts_and_host_launch_counters_and_injection) {
  pw_double_options_t options;
  pw_double_options_init(&options);
  options.device_count = 8;
  options.devices_per_host = 3;
  options.host_launch = true;
  pw_backend_t b;
  PW_CTS_OK(pw_double_backend_create(&options, &b));
  pw_double_backend_t* d = pw_dt(&b);
  cr_assert_geq(b.vtable->struct_size, PW_BACKEND_VTABLE_SIZE_V4);
  cr_assert_not_null(b.vtable->launch_host);
  for (uint32_t dev = 0; dev < 8; ++dev) {
    pw_backend_device_info_t info = {.struct_size = sizeof(info)};
    PW_CTS_OK(pw__backend_device_info(&b, dev, &info));
    cr_assert_eq(info.host, dev / 3, "device %u on host %u", dev, info.host);
  }
  pw_backend_executable_t e = pw_dt_load(&b, "noop\n", 3, NULL);
  const uint32_t group[3] = {3, 4, 5};
  pw_cts_tracker_t t;
  pw_cts_tracker_init(&t, 4);
  PW_CTS_OK(pw_dt_launch_host(&b, e, group, 3, 1, 0, 3, &t.slots[0]));
  cr_assert_eq(pw_double_backend_host_launch_count(d, 1), 1);
  cr_assert_eq(pw_double_backend_total_host_launches(d), 1);
  for (uint32_t m = 0; m < 3; ++m) cr_assert_eq(pw_double_backend_launch_count(d, group[m]), 1);
  cr_assert_eq(pw_double_backend_total_launches(d), 3);
  /* An injected failure counts the host launch as one launch. */
  pw_double_backend_fail_launch(d, 1, PW_STATUS_INTERNAL, PW_DOUBLE_FAIL_AT_LAUNCH);
  PW_CTS_ERROR(pw_dt_launch_host(&b, e, group, 3, 1, 0, 2, &t.slots[1]), PW_STATUS_INTERNAL);
  cr_assert_eq(pw_double_backend_host_rejected(d, 1), 1);
  pw_double_backend_fail_launch(d, 1, PW_STATUS_DATA_LOSS, PW_DOUBLE_FAIL_AT_COMPLETION);
  PW_CTS_OK(pw_dt_launch_host(&b, e, group, 3, 1, 1, 2, &t.slots[2]));
  PW_CTS_OK(pw_dt_launch_host(&b, e, group, 3, 1, 0, 3, &t.slots[3]));
  pw_cts_tracker_wait(&t, 3, "host launches");
  cr_assert_eq(atomic_load(&t.slots[0].code), PW_STATUS_OK);
  cr_assert_eq(atomic_load(&t.slots[1].calls), 0);
  cr_assert_eq(atomic_load(&t.slots[2].code), PW_STATUS_DATA_LOSS);
  cr_assert_eq(atomic_load(&t.slots[3].code), PW_STATUS_OK);
  cr_assert_eq(pw_double_backend_total_host_launches(d), 3);
  /* A wrong host names the device. */
  PW_CTS_ERROR(pw_dt_launch_host(&b, e, group, 3, 0, 0, 1, &t.slots[1]),
               PW_STATUS_INVALID_ARGUMENT);
  pw__backend_unload(&b, e);
  pw__backend_destroy(&b);
  for (size_t i = 0; i < 4; ++i) pw_cts_tracker_expect_calls(&t, i, i == 1 ? 0 : 1);
  pw_cts_tracker_free(&t);
}

Test(double_backend, host_launch_off_and_no_op_counts) {
  pw_double_options_t options;
  pw_double_options_init(&options);
  options.devices_per_host = 4;
  pw_backend_t b;
  PW_CTS_OK(pw_double_backend_create(&options, &b));
  cr_assert(b.vtable->struct_size < PW_BACKEND_VTABLE_SIZE_V4 || b.vtable->launch_host == NULL,
            "launch_host offered without options.host_launch");
  pw__backend_destroy(&b);
  options.no_op = true;
  options.host_launch = true;
  PW_CTS_OK(pw_double_backend_create(&options, &b));
  pw_double_backend_t* d = pw_dt(&b);
  pw_backend_executable_t e = pw_dt_load(&b, "noop\n", 8, NULL);
  const uint32_t group[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  pw_cts_tracker_t t;
  pw_cts_tracker_init(&t, 3);
  PW_CTS_OK(pw_dt_launch_host(&b, e, group, 8, 0, 0, 4, &t.slots[0]));
  PW_CTS_OK(pw_dt_launch_host(&b, e, group, 8, 1, 4, 4, &t.slots[1]));
  PW_CTS_ERROR(pw_dt_launch_host(&b, e, group, 8, 0, 2, 4, &t.slots[2]),
               PW_STATUS_INVALID_ARGUMENT);
  cr_assert_eq(pw_double_backend_host_launch_count(d, 0), 1);
  cr_assert_eq(pw_double_backend_host_launch_count(d, 1), 1);
  cr_assert_eq(pw_double_backend_total_launches(d), 8, "every device part counts");
  pw__backend_unload(&b, e);
  pw__backend_destroy(&b);
  pw_cts_tracker_expect_calls(&t, 0, 1);
  pw_cts_tracker_expect_calls(&t, 1, 1);
  pw_cts_tracker_expect_calls(&t, 2, 0);
  pw_cts_tracker_free(&t);
}
