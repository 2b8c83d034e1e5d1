/* The sim backend under the runtime: failures of a chip and of a slice at
 * a virtual time (ops fail with UNAVAILABLE naming the device, nothing
 * hangs), the MANUAL mode driving a runtime, determinism of the trace hash
 * across runs, seeds and delivery modes, and a 64 x 256 fleet. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_test_support.h"
#include "support/test_allocators.h"

TestSuite(sim_runtime, .fini = pw_test_check_leaks);

#define PW_SIM_WAIT_NS (20ll * 1000 * 1000 * 1000)

static pw_sim_backend_options_t pw_sim_fleet_options(uint32_t slices, uint32_t per_slice,
                                                     pw_sim_mode_t mode) {
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.slice_count = slices;
  o.devices_per_slice = per_slice;
  o.mode = mode;
  o.memory = PW_SIM_MEMORY_VIRTUAL;
  return o;
}

static pw_executable_t pw_sim_compile(pw_sim_fleet_t* f, const char* text) {
  pw_executable_t e;
  PW_SIM_OK(pw_executable_compile(f->client, f->vslices[0], text, strlen(text), NULL, &e));
  return e;
}

/* Submits |graph| and waits for it; returns its status (owned). */
static pw_status_t pw_sim_run_step(pw_sim_fleet_t* f, pw_graph_t graph) {
  pw_event_t* done = NULL;
  PW_SIM_OK(pw_graph_submit(f->client, graph, NULL, 0, NULL, NULL, 0, &done));
  pw_status_t status = pw_event_wait(done, pw_deadline_from_timeout(PW_SIM_WAIT_NS));
  cr_assert_neq(pw_status_code(status), PW_STATUS_DEADLINE_EXCEEDED, "a step hung");
  pw_event_release(done);
  return status;
}

Test(sim_runtime, chip_and_slice_failures_at_virtual_times) {
  pw_sim_backend_options_t o = pw_sim_fleet_options(3, 8, PW_SIM_MODE_INLINE);
  pw_sim_failure_t failures[2] = {{PW_SIM_FAIL_CHIP, 3, 2500000},
                                  {PW_SIM_FAIL_SLICE, 2, 1500000}};
  o.failures = failures;
  o.failure_count = 2;
  pw_sim_fleet_t f;
  PW_SIM_OK(pw_sim_fleet_init(&f, &o, pw_allocator_system()));
  pw_executable_t e = pw_sim_compile(&f, "op step\ntime 1ms\n");
  pw_graph_t graphs[3];
  for (uint32_t s = 0; s < 3; ++s) PW_SIM_OK(pw_sim_fleet_step_graph(&f, s, e, &graphs[s]));
  for (int step = 0; step < 5; ++step) {
    for (uint32_t s = 0; s < 3; ++s) {
      pw_status_t status = pw_sim_run_step(&f, graphs[s]);
      /* Slice 0 loses chip 3 at 2.5 ms (step 2); slice 2 all chips at
       * 1.5 ms (step 1); slice 1 never. */
      bool lost = (s == 0 && step >= 2) || (s == 2 && step >= 1);
      if (!lost) {
        cr_assert_null(status, "slice %u step %d: %s", s, step, pw_status_message(status));
        continue;
      }
      cr_assert_eq(pw_status_code(status), PW_STATUS_UNAVAILABLE, "slice %u step %d: %s", s,
                   step, pw_status_message(status));
      const char* want = s == 0 ? "device 3 (slice 0 chip 3)" : "(slice 2 chip";
      cr_assert(strstr(pw_status_message(status), want) != NULL, "slice %u step %d: %s", s,
                step, pw_status_message(status));
      pw_status_free(status);
    }
  }
  pw_device_info_t info = {.struct_size = sizeof(pw_device_info_t)};
  PW_SIM_OK(pw_runtime_device_info(f.runtime, 0, 3, &info));
  cr_assert_eq(info.health, PW_DEVICE_FAILED);
  PW_SIM_OK(pw_runtime_device_info(f.runtime, 0, 2, &info));
  cr_assert_eq(info.health, PW_DEVICE_HEALTHY);
  cr_assert_str_eq(info.kind, "sim-chip");
  pw_slice_info_t slice = {.struct_size = sizeof(pw_slice_info_t)};
  PW_SIM_OK(pw_runtime_slice_info(f.runtime, 2, &slice));
  cr_assert_eq(slice.health, PW_DEVICE_FAILED);
  PW_SIM_OK(pw_runtime_slice_info(f.runtime, 1, &slice));
  cr_assert_eq(slice.health, PW_DEVICE_HEALTHY);
  cr_assert_str_eq(slice.backend, "sim");
  pw_sim_stats_t stats = {.struct_size = sizeof(pw_sim_stats_t)};
  PW_SIM_OK(pw_sim_backend_stats(f.backend, &stats));
  /* The first failed launch loses its slice (its chip reports FAILED):
   * the runtime launches nothing there after it. Slice 0 ran steps 0-2
   * (chip 3 failed in step 2), slice 1 all 5, slice 2 steps 0-1 (all
   * chips failed in step 1). */
  cr_assert_eq(stats.events, (3 + 5 + 2) * 8);
  cr_assert_eq(stats.failed, 1 + 8);
  PW_SIM_OK(pw_runtime_slice_info(f.runtime, 0, &slice));
  cr_assert_eq(slice.state, PW_SLICE_LOST);
  cr_assert_eq(slice.losses, 1);
  PW_SIM_OK(pw_runtime_slice_info(f.runtime, 1, &slice));
  cr_assert_eq(slice.state, PW_SLICE_ONLINE);
  cr_assert_eq(slice.losses, 0);
  PW_SIM_OK(pw_runtime_slice_info(f.runtime, 2, &slice));
  cr_assert_eq(slice.state, PW_SLICE_LOST);
  cr_assert_eq(stats.clock, 5000000);
  for (uint32_t s = 0; s < 3; ++s) PW_SIM_OK(pw_graph_release(f.client, graphs[s]));
  PW_SIM_OK(pw_executable_release(f.client, e));
  pw_sim_fleet_deinit(&f);
}

Test(sim_runtime, manual_mode_holds_completions_until_stepped) {
  pw_sim_backend_options_t o = pw_sim_fleet_options(2, 4, PW_SIM_MODE_MANUAL);
  pw_sim_fleet_t f;
  PW_SIM_OK(pw_sim_fleet_init(&f, &o, pw_allocator_system()));
  pw_executable_t e = pw_sim_compile(&f, "op step\ntime 1ms\n");
  pw_graph_t g;
  PW_SIM_OK(pw_sim_fleet_step_graph(&f, 1, e, &g));
  pw_event_t* done[3];
  for (int i = 0; i < 3; ++i) {
    PW_SIM_OK(pw_graph_submit(f.client, g, NULL, 0, NULL, NULL, 0, &done[i]));
  }
  cr_assert(!pw_event_is_ready(done[0]), "nothing completes before the host steps");
  PW_SIM_OK(pw_sim_backend_run_until(f.backend, 999999, NULL));
  cr_assert(!pw_event_is_ready(done[0]));
  PW_SIM_OK(pw_sim_backend_run_until(f.backend, 1000000, NULL));
  cr_assert(pw_event_is_ready(done[0]), "step 1 completes at 1 ms");
  cr_assert(!pw_event_is_ready(done[1]));
  uint64_t delivered = 0;
  PW_SIM_OK(pw_sim_backend_run_all(f.backend, &delivered));
  cr_assert_eq(delivered, 8, "the other two steps' 4 + 4 device completions");
  for (int i = 0; i < 3; ++i) {
    cr_assert(pw_event_is_ready(done[i]));
    PW_SIM_OK(pw_event_wait(done[i], pw_deadline_from_timeout(PW_SIM_WAIT_NS)));
    pw_event_release(done[i]);
  }
  cr_assert_eq(pw_sim_backend_clock(f.backend), 3000000);
  PW_SIM_OK(pw_graph_release(f.client, g));
  PW_SIM_OK(pw_executable_release(f.client, e));
  pw_sim_fleet_deinit(&f);
}

/* A mixed workload: on each slice, steps of a compute op then a collective,
 * all submitted up front from this thread, optionally with seeded random
 * chip failures over its duration. Returns the stats after it drained. */
static pw_sim_stats_t pw_sim_workload(uint32_t slices, uint32_t per_slice, pw_sim_mode_t mode,
                                      uint64_t seed, uint32_t random_failures, int steps) {
  pw_sim_backend_options_t o = pw_sim_fleet_options(slices, per_slice, mode);
  o.seed = seed;
  o.random_chip_failures = random_failures;
  o.failure_window_ns = (uint64_t)steps * 600000;
  pw_sim_fleet_t f;
  PW_SIM_OK(pw_sim_fleet_init(&f, &o, pw_allocator_system()));
  pw_executable_t fwd = pw_sim_compile(&f, "op fwd\ntime 300us\nflops 2e10\n");
  pw_executable_t sync = pw_sim_compile(&f, "op sync\nkind collective\ncollective_bytes 1e6\n");
  pw_graph_t* graphs = calloc(slices, sizeof(*graphs));
  for (uint32_t s = 0; s < slices; ++s) {
    PW_SIM_OK(pw_graph_create(f.client, &graphs[s]));
    PW_SIM_OK(pw_graph_add_compute(f.client, graphs[s], "fwd", fwd, f.vslices[s], NULL, 0, NULL));
    PW_SIM_OK(pw_graph_add_compute(f.client, graphs[s], "sync", sync, f.vslices[s], NULL, 0,
                                   NULL));
  }
  size_t total = (size_t)steps * slices;
  pw_event_t** done = calloc(total, sizeof(*done));
  for (int step = 0; step < steps; ++step) {
    for (uint32_t s = 0; s < slices; ++s) {
      PW_SIM_OK(pw_graph_submit(f.client, graphs[s], NULL, 0, NULL, NULL, 0,
                                &done[(size_t)step * slices + s]));
    }
  }
  if (mode == PW_SIM_MODE_MANUAL) PW_SIM_OK(pw_sim_backend_run_all(f.backend, NULL));
  for (size_t i = 0; i < total; ++i) {
    pw_status_t status = pw_event_wait(done[i], pw_deadline_from_timeout(PW_SIM_WAIT_NS));
    cr_assert_neq(pw_status_code(status), PW_STATUS_DEADLINE_EXCEEDED, "execution %zu hung", i);
    cr_assert(status == NULL || pw_status_code(status) == PW_STATUS_UNAVAILABLE, "%s",
              pw_status_message(status));
    pw_status_free(status);
    pw_event_release(done[i]);
  }
  if (mode == PW_SIM_MODE_THREADED) {
    cr_assert(pw_sim_backend_wait_idle(f.backend, (uint64_t)PW_SIM_WAIT_NS));
  }
  pw_sim_stats_t stats = {.struct_size = sizeof(pw_sim_stats_t)};
  PW_SIM_OK(pw_sim_backend_stats(f.backend, &stats));
  /* Every launch reaches the sim until its slice is lost (its first
   * failed launch); none after. */
  if (random_failures == 0) {
    cr_assert_eq(stats.events, 2ull * total * per_slice);
  } else {
    cr_assert_leq(stats.events, 2ull * total * per_slice);
  }
  for (uint32_t s = 0; s < slices; ++s) PW_SIM_OK(pw_graph_release(f.client, graphs[s]));
  PW_SIM_OK(pw_executable_release(f.client, fwd));
  PW_SIM_OK(pw_executable_release(f.client, sync));
  free(graphs);
  free(done);
  pw_sim_fleet_deinit(&f);
  return stats;
}

Test(sim_runtime, same_seed_same_trace_hash) {
  pw_sim_stats_t a = pw_sim_workload(4, 8, PW_SIM_MODE_INLINE, 42, 3, 10);
  pw_sim_stats_t b = pw_sim_workload(4, 8, PW_SIM_MODE_INLINE, 42, 3, 10);
  cr_assert_gt(a.failed, 0, "the seeded failures hit the workload");
  cr_assert_eq(a.trace_hash, b.trace_hash, "run after run: %016llx vs %016llx",
               (unsigned long long)a.trace_hash, (unsigned long long)b.trace_hash);
  cr_assert_eq(a.clock, b.clock);
  cr_assert_eq(a.failed, b.failed);
  /* The delivery mode does not change the simulation. */
  pw_sim_stats_t m = pw_sim_workload(4, 8, PW_SIM_MODE_MANUAL, 42, 3, 10);
  pw_sim_stats_t t = pw_sim_workload(4, 8, PW_SIM_MODE_THREADED, 42, 3, 10);
  cr_assert_eq(m.trace_hash, a.trace_hash, "MANUAL %016llx vs INLINE %016llx",
               (unsigned long long)m.trace_hash, (unsigned long long)a.trace_hash);
  cr_assert_eq(t.trace_hash, a.trace_hash, "THREADED %016llx vs INLINE %016llx",
               (unsigned long long)t.trace_hash, (unsigned long long)a.trace_hash);
}

Test(sim_runtime, different_failure_seed_different_trace_hash) {
  pw_sim_stats_t a = pw_sim_workload(4, 8, PW_SIM_MODE_INLINE, 42, 3, 10);
  pw_sim_stats_t b = pw_sim_workload(4, 8, PW_SIM_MODE_INLINE, 43, 3, 10);
  cr_assert_neq(a.trace_hash, b.trace_hash);
  /* Without failures the seed plays no part. */
  pw_sim_stats_t c = pw_sim_workload(4, 8, PW_SIM_MODE_INLINE, 42, 0, 10);
  pw_sim_stats_t d = pw_sim_workload(4, 8, PW_SIM_MODE_INLINE, 43, 0, 10);
  cr_assert_eq(c.trace_hash, d.trace_hash);
  cr_assert_eq(c.failed, 0);
  cr_assert_neq(c.trace_hash, a.trace_hash);
}

/* More slices than plan preparation counts on the stack (64): 96 slices
 * of 2 chips, every execution's ops counted on their slice. */
Test(sim_runtime, fleet_of_96_small_slices) {
  pw_sim_stats_t a = pw_sim_workload(96, 2, PW_SIM_MODE_INLINE, 11, 0, 2);
  cr_assert_eq(a.failed, 0);
  cr_assert_eq(a.events, 2ull * 2 * 96 * 2);
}

/* 64 slices x 256 chips through the runtime, in seconds. */
Test(sim_runtime, fleet_of_64_slices_of_256_chips) {
  pw_time_t start = pw_clock_now();
  pw_sim_stats_t a = pw_sim_workload(64, 256, PW_SIM_MODE_INLINE, 7, 0, 3);
  cr_assert_eq(a.failed, 0);
  /* fwd: 300 us + 2e10 / 1e14 s = 500 us; sync: 2 us + 2*255/256 * 1e6 / 1e11 s. */
  pw_sim_time_t sync = 2000 + 19922;
  cr_assert_eq(a.clock, 3 * (500000 + sync), "clock %llu", (unsigned long long)a.clock);
  pw_sim_stats_t m = pw_sim_workload(64, 256, PW_SIM_MODE_MANUAL, 7, 0, 3);
  cr_assert_eq(m.trace_hash, a.trace_hash);
  double seconds = (double)(pw_clock_now() - start) / 1e9;
  cr_assert_lt(seconds, 60.0, "the 64x256 fleet took %.1f s", seconds);
}

/* A sim op past the signature's fixed arrays: 300 inputs and 300 outputs
 * (v2 pointers), fed by a 300-output op, run through the runtime. */
Test(sim_runtime, three_hundred_inputs_and_outputs) {
  pw_sim_backend_options_t o = pw_sim_fleet_options(1, 2, PW_SIM_MODE_INLINE);
  pw_sim_fleet_t f;
  PW_SIM_OK(pw_sim_fleet_init(&f, &o, pw_allocator_system()));
  enum { WIDE = 300 };
  size_t cap = 64 + 2 * WIDE * 32;
  char* producer = malloc(cap);
  char* consumer = malloc(cap);
  cr_assert(producer != NULL && consumer != NULL);
  size_t a = (size_t)snprintf(producer, cap, "op make\ntime 1us\n");
  size_t b = (size_t)snprintf(consumer, cap, "op take\ntime 1us\n");
  for (int i = 0; i < WIDE; ++i) {
    a += (size_t)snprintf(producer + a, cap - a, "output f32[8] split(0,all)\n");
    b += (size_t)snprintf(consumer + b, cap - b, "input f32[8] split(0,all)\n");
  }
  for (int i = 0; i < WIDE; ++i) {
    b += (size_t)snprintf(consumer + b, cap - b, "output f32[8] split(0,all)\n");
  }
  pw_executable_t make = pw_sim_compile(&f, producer);
  pw_executable_t take = pw_sim_compile(&f, consumer);
  uint32_t count = 0;
  PW_SIM_OK(pw_executable_param_count(f.client, take, PW_PARAM_INPUT, &count));
  cr_assert_eq(count, WIDE);
  pw_array_spec_t last;
  PW_SIM_OK(pw_executable_param(f.client, take, PW_PARAM_OUTPUT, WIDE - 1, &last));
  cr_assert_eq(last.shape.dims[0], 8);
  pw_graph_t g;
  PW_SIM_OK(pw_graph_create(f.client, &g));
  uint32_t nm, nt;
  PW_SIM_OK(pw_graph_add_compute(f.client, g, "make", make, f.vslices[0], NULL, 0, &nm));
  pw_value_t in[WIDE];
  for (int k = 0; k < WIDE; ++k) in[k] = pw_value(nm, (uint32_t)k);
  PW_SIM_OK(pw_graph_add_compute(f.client, g, "take", take, f.vslices[0], in, WIDE, &nt));
  PW_SIM_OK(pw_graph_finalize(f.client, g));
  for (int run = 0; run < 2; ++run) {
    pw_status_t status = pw_sim_run_step(&f, g);
    cr_assert_null(status, "run %d: %s", run, pw_status_message(status));
  }
  PW_SIM_OK(pw_graph_release(f.client, g));
  PW_SIM_OK(pw_executable_release(f.client, make));
  PW_SIM_OK(pw_executable_release(f.client, take));
  free(producer);
  free(consumer);
  pw_sim_fleet_deinit(&f);
}
