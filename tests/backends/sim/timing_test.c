/* Virtual time in the sim backend: device timelines, data flow through
 * memory and transfers, the MANUAL event queue and its stepping, the
 * THREADED simulator thread, and failures at a virtual time. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "sim_test_support.h"
#include "support/test_allocators.h"

TestSuite(sim_timing, .fini = pw_test_check_leaks);

static pw_backend_t pw_sim_make(pw_sim_mode_t mode, pw_sim_trace_t* trace) {
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.slice_count = 2;
  o.devices_per_slice = 4;
  o.mode = mode;
  o.ici_bytes_per_s = 1e9;
  o.ici_latency_ns = 1000;
  o.dcn_bytes_per_s = 1e8;
  o.dcn_latency_ns = 50000;
  o.trace = trace ? pw_sim_trace_fn : NULL;
  o.trace_user = trace;
  pw_backend_t b;
  PW_SIM_OK(pw_sim_backend_create(&o, &b));
  return b;
}

/* Launches |e| (a one-device executable) on |device|. */
static void pw_sim_launch_one(pw_backend_t b, pw_sim_launch_t* l, pw_backend_executable_t e,
                              uint32_t device, uint64_t gang, pw_backend_memory_t in,
                              pw_backend_memory_t out) {
  pw_sim_test_describe(l, e, device, 0, &device, 1, gang, &in, in ? 1 : 0, &out, out ? 1 : 0);
  PW_SIM_OK(b.vtable->launch(b.self, &l->launch));
}

Test(sim_timing, device_timelines_are_independent) {
  pw_sim_trace_t trace;
  pw_sim_trace_init(&trace);
  pw_backend_t b = pw_sim_make(PW_SIM_MODE_INLINE, &trace);
  pw_backend_executable_t e = pw_sim_test_load(b, "op tick\ntime 10us\n", 1);
  pw_sim_launch_t l[4];
  for (int i = 0; i < 3; ++i) pw_sim_launch_one(b, &l[i], e, 0, 1 + (uint64_t)i, NULL, NULL);
  pw_sim_launch_one(b, &l[3], e, 5, 9, NULL, NULL);
  for (size_t i = 0; i < 3; ++i) {
    const pw_sim_event_t* ev = pw_sim_trace_find(&trace, 0, i);
    cr_assert_eq(ev->start, i * 10000);
    cr_assert_eq(ev->time, (i + 1) * 10000);
    cr_assert_eq(ev->gang_id, i + 1);
    cr_assert_eq(ev->kind, PW_SIM_EVENT_DONE);
  }
  cr_assert_eq(pw_sim_trace_find(&trace, 5, 0)->time, 10000, "device 5 has its own timeline");
  cr_assert_eq(pw_sim_backend_clock(b), 30000);
  pw_sim_stats_t stats = {.struct_size = sizeof(pw_sim_stats_t)};
  PW_SIM_OK(pw_sim_backend_stats(b, &stats));
  cr_assert_eq(stats.events, 4);
  cr_assert_eq(stats.failed, 0);
  cr_assert_eq(stats.queued, 0);
  cr_assert_neq(stats.trace_hash, 0);
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
}

Test(sim_timing, data_flow_through_memory_and_transfers) {
  pw_sim_trace_t trace;
  pw_sim_trace_init(&trace);
  pw_backend_t b = pw_sim_make(PW_SIM_MODE_INLINE, &trace);
  pw_backend_executable_t produce =
      pw_sim_test_load(b, "op produce\nkind copy\ntime 10us\ninput f32[4] replicated\n"
                          "output f32[4] replicated\n", 1);
  pw_backend_executable_t consume =
      pw_sim_test_load(b, "op consume\ntime 1us\ninput f32[4] replicated\n", 1);
  pw_backend_memory_t a0, b0, a1, a4;
  PW_SIM_OK(b.vtable->allocate(b.self, 0, 16, &a0));
  PW_SIM_OK(b.vtable->allocate(b.self, 0, 16, &b0));
  PW_SIM_OK(b.vtable->allocate(b.self, 1, 16, &a1));
  PW_SIM_OK(b.vtable->allocate(b.self, 4, 16, &a4));
  float data[4] = {1, 2, 3, 4};
  PW_SIM_OK(b.vtable->copy_to_device(b.self, 0, a0, 0, data, sizeof(data)));
  pw_sim_launch_t l[3];
  pw_sim_launch_one(b, &l[0], produce, 0, 1, a0, b0);  /* b0 ready at 10us */
  float check[4] = {0};
  PW_SIM_OK(b.vtable->copy_to_host(b.self, 0, b0, 0, check, sizeof(check)));
  cr_assert_eq(memcmp(check, data, sizeof(data)), 0, "copy moved the bytes");
  /* In-slice transfer 0 -> 1: starts when b0 is ready, costs 1000 + 16 ns. */
  pw_sim_time_t end = 0;
  PW_SIM_OK(pw_sim_backend_record_transfer(b, 0, b0, 1, a1, 16, &end));
  cr_assert_eq(end, 10000 + 1000 + 16);
  /* Cross-slice transfer 0 -> 4: 50000 + 160 ns. */
  PW_SIM_OK(pw_sim_backend_record_transfer(b, 0, b0, 4, a4, 16, &end));
  cr_assert_eq(end, 10000 + 50000 + 160);
  /* Consumers start when their input is ready, not when their device is. */
  pw_sim_launch_one(b, &l[1], consume, 1, 2, a1, NULL);
  pw_sim_launch_one(b, &l[2], consume, 4, 3, a4, NULL);
  const pw_sim_event_t* c1 = pw_sim_trace_find(&trace, 1, 1);
  const pw_sim_event_t* c4 = pw_sim_trace_find(&trace, 4, 1);
  cr_assert_not_null(c1);
  cr_assert_not_null(c4);
  cr_assert_eq(pw_sim_trace_find(&trace, 1, 0)->kind, PW_SIM_EVENT_TRANSFER);
  cr_assert_eq(c1->start, 11016);
  cr_assert_eq(c4->start, 60160);
  cr_assert_eq(c4->time, 61160);
  pw_sim_stats_t stats = {.struct_size = sizeof(pw_sim_stats_t)};
  PW_SIM_OK(pw_sim_backend_stats(b, &stats));
  cr_assert_eq(stats.transfers, 2);
  cr_assert_eq(stats.events, 5);
  /* Handles of another device are refused. */
  pw_status_t status = pw_sim_backend_record_transfer(b, 1, b0, 4, a4, 16, NULL);
  cr_assert_eq(pw_status_code(status), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(status);
  b.vtable->deallocate(b.self, 0, a0);
  b.vtable->deallocate(b.self, 0, b0);
  b.vtable->deallocate(b.self, 1, a1);
  b.vtable->deallocate(b.self, 4, a4);
  b.vtable->unload(b.self, produce);
  b.vtable->unload(b.self, consume);
  b.vtable->destroy(b.self);
}

/* MANUAL: completions wait for the host; run_until delivers in time order. */
typedef struct pw_sim_order_t {
  pw_sim_done_t done;
  int* log;
  int* count;
  int id;
} pw_sim_order_t;

static void pw_sim_order_done(void* user, pw_status_t status) {
  pw_sim_order_t* o = user;
  o->log[(*o->count)++] = o->id;
  pw_sim_test_done(&o->done, status);
}

Test(sim_timing, manual_mode_steps_in_virtual_time_order) {
  pw_sim_trace_t trace;
  pw_sim_trace_init(&trace);
  pw_backend_t b = pw_sim_make(PW_SIM_MODE_MANUAL, &trace);
  pw_backend_executable_t fast = pw_sim_test_load(b, "op fast\ntime 1us\n", 1);
  pw_backend_executable_t slow = pw_sim_test_load(b, "op slow\ntime 5us\n", 1);
  int log[8];
  int count = 0;
  pw_sim_order_t orders[4];
  pw_sim_launch_t l[4];
  /* Launched: slow on 0 (5us), fast on 1 (1us), fast on 0 (6us), fast on 2 (1us). */
  pw_backend_executable_t exes[4] = {slow, fast, fast, fast};
  uint32_t devices[4] = {0, 1, 0, 2};
  for (int i = 0; i < 4; ++i) {
    orders[i] = (pw_sim_order_t){.log = log, .count = &count, .id = i};
    atomic_init(&orders[i].done.calls, 0);
    atomic_init(&orders[i].done.code, -1);
    pw_sim_test_describe(&l[i], exes[i], devices[i], 0, &devices[i], 1, 10 + (uint64_t)i, NULL,
                         0, NULL, 0);
    l[i].launch.done = pw_sim_order_done;
    l[i].launch.done_user = &orders[i];
    PW_SIM_OK(b.vtable->launch(b.self, &l[i].launch));
  }
  cr_assert_eq(count, 0, "nothing is delivered before the host steps");
  pw_sim_stats_t stats = {.struct_size = sizeof(pw_sim_stats_t)};
  PW_SIM_OK(pw_sim_backend_stats(b, &stats));
  cr_assert_eq(stats.queued, 4);
  cr_assert_eq(stats.clock, 0);
  uint64_t delivered = 0;
  PW_SIM_OK(pw_sim_backend_run_until(b, 999, &delivered));
  cr_assert_eq(delivered, 0);
  PW_SIM_OK(pw_sim_backend_run_until(b, 1000, &delivered));
  cr_assert_eq(delivered, 2);
  /* Ties at 1us are ordered by gang id: launch 1 (gang 11) before 3 (gang 13). */
  cr_assert_eq(log[0], 1);
  cr_assert_eq(log[1], 3);
  cr_assert_eq(pw_sim_backend_clock(b), 1000);
  PW_SIM_OK(pw_sim_backend_step(b, &delivered));
  cr_assert_eq(delivered, 1);
  cr_assert_eq(log[2], 0);
  cr_assert_eq(pw_sim_backend_clock(b), 5000);
  /* A launch made now starts at the host time (5us) on an idle device. */
  pw_sim_launch_t late;
  uint32_t three = 3;
  pw_sim_test_describe(&late, fast, 3, 0, &three, 1, 20, NULL, 0, NULL, 0);
  PW_SIM_OK(b.vtable->launch(b.self, &late.launch));
  PW_SIM_OK(pw_sim_backend_run_all(b, &delivered));
  cr_assert_eq(delivered, 2);
  cr_assert_eq(log[3], 2);
  cr_assert_eq(pw_sim_trace_find(&trace, 3, 0)->start, 5000);
  cr_assert_eq(pw_sim_trace_find(&trace, 3, 0)->time, 6000);
  cr_assert_eq(pw_sim_trace_find(&trace, 0, 1)->time, 6000);
  cr_assert_eq(atomic_load(&late.done.calls), 1);
  PW_SIM_OK(pw_sim_backend_run_until(b, 1000000, NULL));
  cr_assert_eq(pw_sim_backend_clock(b), 1000000, "run_until advances the clock");
  b.vtable->unload(b.self, fast);
  b.vtable->unload(b.self, slow);
  b.vtable->destroy(b.self);
}

static pw_backend_t* pw_sim_reentry_backend;
static pw_status_code_t pw_sim_reentry_code;

static void pw_sim_reentry_done(void* user, pw_status_t status) {
  pw_status_t inner = pw_sim_backend_run_all(*pw_sim_reentry_backend, NULL);
  pw_sim_reentry_code = pw_status_code(inner);
  pw_status_free(inner);
  pw_sim_test_done(user, status);
}

Test(sim_timing, stepping_refuses_reentry_and_wrong_modes) {
  pw_backend_t b = pw_sim_make(PW_SIM_MODE_MANUAL, NULL);
  pw_backend_executable_t e = pw_sim_test_load(b, "op a\ntime 1\n", 1);
  pw_sim_launch_t l;
  uint32_t zero = 0;
  pw_sim_test_describe(&l, e, 0, 0, &zero, 1, 1, NULL, 0, NULL, 0);
  l.launch.done = pw_sim_reentry_done;
  pw_sim_reentry_backend = &b;
  PW_SIM_OK(b.vtable->launch(b.self, &l.launch));
  PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
  cr_assert_eq(pw_sim_reentry_code, PW_STATUS_FAILED_PRECONDITION);
  cr_assert_eq(atomic_load(&l.done.calls), 1);
  pw_status_t status = pw_sim_backend_run_until(b, PW_SIM_TIME_NEVER, NULL);
  cr_assert_eq(pw_status_code(status), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(status);
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
  pw_backend_t t = pw_sim_make(PW_SIM_MODE_THREADED, NULL);
  status = pw_sim_backend_run_all(t, NULL);
  cr_assert_eq(pw_status_code(status), PW_STATUS_FAILED_PRECONDITION);
  pw_status_free(status);
  t.vtable->destroy(t.self);
  pw_backend_t not_sim = {NULL, NULL};
  status = pw_sim_backend_step(not_sim, NULL);
  cr_assert_eq(pw_status_code(status), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(status);
}

Test(sim_timing, manual_destroy_cancels_what_was_not_stepped) {
  pw_backend_t b = pw_sim_make(PW_SIM_MODE_MANUAL, NULL);
  pw_backend_executable_t e = pw_sim_test_load(b, "op a\ntime 1\n", 1);
  pw_sim_launch_t l;
  uint32_t zero = 0;
  pw_sim_test_describe(&l, e, 0, 0, &zero, 1, 1, NULL, 0, NULL, 0);
  PW_SIM_OK(b.vtable->launch(b.self, &l.launch));
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
  cr_assert_eq(atomic_load(&l.done.calls), 1);
  cr_assert_eq(atomic_load(&l.done.code), PW_STATUS_CANCELLED);
}

Test(sim_timing, threaded_mode_delivers_on_its_thread) {
  pw_sim_trace_t trace;
  pw_sim_trace_init(&trace);
  pw_backend_t b = pw_sim_make(PW_SIM_MODE_THREADED, &trace);
  pw_backend_executable_t e = pw_sim_test_load(b, "op a\ntime 3us\n", 1);
  pw_sim_launch_t* l = calloc(40, sizeof(*l));
  for (uint32_t i = 0; i < 40; ++i) {
    uint32_t device = i % 8;
    pw_sim_test_describe(&l[i], e, device, 0, &device, 1, i + 1, NULL, 0, NULL, 0);
    PW_SIM_OK(b.vtable->launch(b.self, &l[i].launch));
  }
  cr_assert(pw_sim_backend_wait_idle(b, 10ull * 1000 * 1000 * 1000), "simulator thread idle");
  for (uint32_t i = 0; i < 40; ++i) {
    cr_assert_eq(atomic_load(&l[i].done.calls), 1);
    cr_assert_eq(atomic_load(&l[i].done.code), PW_STATUS_OK);
  }
  cr_assert_eq(pw_sim_backend_clock(b), 5 * 3000, "5 launches per device, host time 0");
  free(l);
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
}

Test(sim_timing, chip_failure_at_a_virtual_time) {
  for (int mode = 0; mode < 2; ++mode) {
    pw_sim_trace_t trace;
    pw_sim_trace_init(&trace);
    pw_backend_t b = pw_sim_make(mode == 0 ? PW_SIM_MODE_INLINE : PW_SIM_MODE_MANUAL, &trace);
    pw_backend_executable_t e = pw_sim_test_load(b, "op tick\ntime 10us\n", 1);
    PW_SIM_OK(pw_sim_backend_fail(b, PW_SIM_FAIL_CHIP, 6, 15000));
    cr_assert_eq(b.vtable->health(b.self, 6), PW_DEVICE_HEALTHY, "not failed yet at time 0");
    pw_sim_launch_t l[3];
    for (int i = 0; i < 3; ++i) pw_sim_launch_one(b, &l[i], e, 6, 1 + (uint64_t)i, NULL, NULL);
    PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
    cr_assert_eq(atomic_load(&l[0].done.code), PW_STATUS_OK);
    cr_assert_eq(atomic_load(&l[1].done.code), PW_STATUS_UNAVAILABLE);
    cr_assert_eq(atomic_load(&l[2].done.code), PW_STATUS_UNAVAILABLE);
    cr_assert(strstr(l[1].done.message, "device 6 (slice 1 chip 2)") != NULL, "%s",
              l[1].done.message);
    cr_assert(strstr(l[1].done.message, "15000 ns") != NULL, "%s", l[1].done.message);
    cr_assert_eq(pw_sim_trace_find(&trace, 6, 1)->time, 15000, "fails when the chip does");
    cr_assert_eq(pw_sim_trace_find(&trace, 6, 1)->kind, PW_SIM_EVENT_FAILED);
    cr_assert_eq(pw_sim_trace_find(&trace, 6, 2)->time, 15000, "starts failed");
    cr_assert_eq(b.vtable->health(b.self, 6), PW_DEVICE_FAILED);
    cr_assert_eq(b.vtable->health(b.self, 5), PW_DEVICE_HEALTHY);
    pw_sim_device_state_t state = {.struct_size = sizeof(pw_sim_device_state_t)};
    PW_SIM_OK(pw_sim_backend_device_state(b, 6, &state));
    cr_assert_eq(state.fail_at, 15000);
    cr_assert_eq(state.slice, 1);
    cr_assert_eq(state.chip, 2);
    pw_sim_stats_t stats = {.struct_size = sizeof(pw_sim_stats_t)};
    PW_SIM_OK(pw_sim_backend_stats(b, &stats));
    cr_assert_eq(stats.failed, 2);
    /* A repaired chip runs again. */
    PW_SIM_OK(pw_sim_backend_repair(b, PW_SIM_FAIL_CHIP, 6));
    cr_assert_eq(b.vtable->health(b.self, 6), PW_DEVICE_HEALTHY);
    pw_sim_launch_t again;
    pw_sim_launch_one(b, &again, e, 6, 9, NULL, NULL);
    PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
    cr_assert_eq(atomic_load(&again.done.code), PW_STATUS_OK);
    b.vtable->unload(b.self, e);
    b.vtable->destroy(b.self);
  }
}

Test(sim_timing, slice_failure_now_fails_waiting_collectives) {
  pw_backend_t b = pw_sim_make(PW_SIM_MODE_INLINE, NULL);
  pw_backend_executable_t e = pw_sim_test_load(b, "op sync\nkind collective\ntime 1us\n", 4);
  uint32_t group[4] = {4, 5, 6, 7};
  pw_sim_launch_t l[4];
  for (uint32_t m = 0; m < 3; ++m) {
    pw_sim_test_describe(&l[m], e, group[m], m, group, 4, 5, NULL, 0, NULL, 0);
    PW_SIM_OK(b.vtable->launch(b.self, &l[m].launch));
  }
  PW_SIM_OK(pw_sim_backend_fail(b, PW_SIM_FAIL_SLICE, 1, PW_SIM_TIME_NOW));
  for (uint32_t m = 0; m < 3; ++m) {
    cr_assert_eq(atomic_load(&l[m].done.calls), 1, "part %u still waits", m);
    cr_assert_eq(atomic_load(&l[m].done.code), PW_STATUS_UNAVAILABLE);
  }
  /* The last member arrives late: it fails at once instead of waiting. */
  pw_sim_test_describe(&l[3], e, 7, 3, group, 4, 5, NULL, 0, NULL, 0);
  PW_SIM_OK(b.vtable->launch(b.self, &l[3].launch));
  cr_assert_eq(atomic_load(&l[3].done.code), PW_STATUS_UNAVAILABLE);
  for (uint32_t d = 4; d < 8; ++d) cr_assert_eq(b.vtable->health(b.self, d), PW_DEVICE_FAILED);
  for (uint32_t d = 0; d < 4; ++d) cr_assert_eq(b.vtable->health(b.self, d), PW_DEVICE_HEALTHY);
  pw_status_t status = pw_sim_backend_fail(b, PW_SIM_FAIL_SLICE, 2, 0);
  cr_assert_eq(pw_status_code(status), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(status);
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
}

/* A failure scheduled inside a collective's run fails every member. */
Test(sim_timing, collective_fails_when_a_member_fails_during_it) {
  pw_sim_trace_t trace;
  pw_sim_trace_init(&trace);
  pw_backend_t b = pw_sim_make(PW_SIM_MODE_MANUAL, &trace);
  pw_backend_executable_t e = pw_sim_test_load(b, "op sync\nkind collective\ntime 10us\n", 4);
  PW_SIM_OK(pw_sim_backend_fail(b, PW_SIM_FAIL_CHIP, 2, 4000));
  uint32_t group[4] = {0, 1, 2, 3};
  pw_sim_launch_t l[4];
  for (uint32_t m = 0; m < 4; ++m) {
    pw_sim_test_describe(&l[m], e, group[m], m, group, 4, 5, NULL, 0, NULL, 0);
    PW_SIM_OK(b.vtable->launch(b.self, &l[m].launch));
  }
  PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
  for (uint32_t m = 0; m < 4; ++m) {
    cr_assert_eq(atomic_load(&l[m].done.code), PW_STATUS_UNAVAILABLE, "member %u", m);
    cr_assert(strstr(l[m].done.message, "device 2 (slice 0 chip 2)") != NULL, "%s",
              l[m].done.message);
    cr_assert_eq(pw_sim_trace_find(&trace, m, 0)->time, 4000);
  }
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
}
