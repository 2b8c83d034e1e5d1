/* The sim backend's program text, executable bytes and cost model. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_test_support.h"
#include "support/test_allocators.h"

TestSuite(sim_program, .fini = pw_test_check_leaks);

/* A backend with round rates, so costs are easy to state. */
static pw_backend_t pw_sim_rates_backend(pw_sim_trace_t* trace) {
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.slice_count = 2;
  o.devices_per_slice = 4;
  o.chip_flops_per_s = 1e12;
  o.chip_bytes_per_s = 1e11;
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

/* Runs |text| once on device 0 (a one-device mesh) and returns the
 * completion time of that launch. */
static pw_sim_time_t pw_sim_cost_of(const char* text) {
  pw_sim_trace_t trace;
  pw_sim_trace_init(&trace);
  pw_backend_t b = pw_sim_rates_backend(&trace);
  pw_backend_executable_t e = pw_sim_test_load(b, text, 1);
  uint32_t zero = 0;
  pw_sim_launch_t l;
  pw_sim_test_describe(&l, e, 0, 0, &zero, 1, 1, NULL, 0, NULL, 0);
  PW_SIM_OK(b.vtable->launch(b.self, &l.launch));
  cr_assert_eq(atomic_load(&l.done.calls), 1, "INLINE: done runs inside launch");
  cr_assert_eq(atomic_load(&l.done.code), PW_STATUS_OK);
  const pw_sim_event_t* ev = pw_sim_trace_find(&trace, 0, 0);
  cr_assert_not_null(ev);
  cr_assert_eq(ev->start, 0);
  pw_sim_time_t t = ev->time;
  cr_assert_eq(pw_sim_backend_clock(b), t);
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
  return t;
}

Test(sim_program, durations_and_units) {
  cr_assert_eq(pw_sim_cost_of("op a\ntime 100\n"), 100);
  cr_assert_eq(pw_sim_cost_of("op a\ntime 100ns\n"), 100);
  cr_assert_eq(pw_sim_cost_of("op a\ntime 250us\n"), 250000);
  cr_assert_eq(pw_sim_cost_of("op a\ntime 1.5ms\n"), 1500000);
  cr_assert_eq(pw_sim_cost_of("op a\ntime 2s\n"), 2000000000ull);
  cr_assert_eq(pw_sim_cost_of("op a\ntime 0.5\n"), 1, "rounded up to whole ns");
  cr_assert_eq(pw_sim_cost_of("op a\n"), 0, "no cost declared: free");
  cr_assert_eq(pw_sim_cost_of("# comment\r\n\r\n  op\ta  \r\n  time\t 7us\r\n"), 7000);
}

Test(sim_program, roofline_of_flops_and_bytes) {
  /* 2e12 flops at 1e12/s = 2 s; 1e11 bytes at 1e11/s = 1 s: the max. */
  cr_assert_eq(pw_sim_cost_of("op a\nflops 2e12\nbytes 1e11\n"), 2000000000ull);
  cr_assert_eq(pw_sim_cost_of("op a\nflops 1e9\nbytes 5e11\n"), 5000000000ull);
  /* Plus the declared time. */
  cr_assert_eq(pw_sim_cost_of("op a\ntime 5us\nflops 1e6\n"), 5000 + 1000);
  cr_assert_eq(pw_sim_cost_of("op a\nflops 2.5e3\n"), 3, "2.5 ns rounds up");
}

Test(sim_program, collective_cost_is_a_rendezvous_plus_ring) {
  pw_sim_trace_t trace;
  pw_sim_trace_init(&trace);
  pw_backend_t b = pw_sim_rates_backend(&trace);
  /* 4 devices, 4096-byte shards: 1000 + 2*3/4 * 4096 / 1e9 s = 1000 + 6144 ns. */
  pw_backend_executable_t e = pw_sim_test_load(
      b, "op ar\nkind all_reduce_sum\ntime 10us\ninput f32[4,1024] split(0,all)\n"
         "output f32[1024] replicated\n", 4);
  /* Different arrival times: device m is busy for m microseconds first. */
  for (uint32_t m = 1; m < 4; ++m) {
    char text[64];
    snprintf(text, sizeof(text), "op busy%u\ntime %uus\n", m, m);
    pw_backend_executable_t busy = pw_sim_test_load(b, text, 1);
    pw_sim_launch_t l;
    pw_sim_test_describe(&l, busy, m, 0, &m, 1, 100 + m, NULL, 0, NULL, 0);
    PW_SIM_OK(b.vtable->launch(b.self, &l.launch));
    b.vtable->unload(b.self, busy);
  }
  uint32_t group[4] = {0, 1, 2, 3};
  pw_backend_memory_t in[4], out[4];
  pw_sim_launch_t* parts = calloc(4, sizeof(*parts));
  for (uint32_t m = 0; m < 4; ++m) {
    PW_SIM_OK(b.vtable->allocate(b.self, m, 4096, &in[m]));
    PW_SIM_OK(b.vtable->allocate(b.self, m, 4096, &out[m]));
    pw_sim_test_describe(&parts[m], e, m, m, group, 4, 7, &in[m], 1, &out[m], 1);
  }
  for (uint32_t m = 0; m < 3; ++m) {
    PW_SIM_OK(b.vtable->launch(b.self, &parts[m].launch));
    cr_assert_eq(atomic_load(&parts[m].done.calls), 0, "a collective waits for its gang");
  }
  PW_SIM_OK(b.vtable->launch(b.self, &parts[3].launch));
  pw_sim_time_t want = 3000 + 10000 + 1000 + 6144;
  for (uint32_t m = 0; m < 4; ++m) {
    cr_assert_eq(atomic_load(&parts[m].done.calls), 1);
    cr_assert_eq(atomic_load(&parts[m].done.code), PW_STATUS_OK);
    const pw_sim_event_t* ev = pw_sim_trace_find(&trace, m, m == 0 ? 0 : 1);
    cr_assert_not_null(ev);
    cr_assert_eq(ev->time, want, "device %u completes at %llu, expected max(arrival) + cost "
                 "= %llu", m, (unsigned long long)ev->time, (unsigned long long)want);
    cr_assert_eq(ev->start, m * 1000ull, "device %u arrived at %llu", m,
                 (unsigned long long)ev->start);
    pw_sim_device_state_t state = {.struct_size = sizeof(pw_sim_device_state_t)};
    PW_SIM_OK(pw_sim_backend_device_state(b, m, &state));
    cr_assert_eq(state.busy_until, want);
  }
  for (uint32_t m = 0; m < 4; ++m) {
    b.vtable->deallocate(b.self, m, in[m]);
    b.vtable->deallocate(b.self, m, out[m]);
  }
  free(parts);
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
}

Test(sim_program, transfer_cost_within_and_across_slices) {
  pw_backend_t b = pw_sim_rates_backend(NULL);
  pw_sim_time_t cost = 99;
  PW_SIM_OK(pw_sim_backend_transfer_cost(b, 2, 2, 1000000, &cost));
  cr_assert_eq(cost, 0, "on one device");
  PW_SIM_OK(pw_sim_backend_transfer_cost(b, 0, 3, 1000000, &cost));
  cr_assert_eq(cost, 1000 + 1000000, "in-slice: ici latency + bytes / 1e9");
  PW_SIM_OK(pw_sim_backend_transfer_cost(b, 0, 4, 1000000, &cost));
  cr_assert_eq(cost, 50000 + 10000000, "across slices: dcn latency + bytes / 1e8");
  pw_status_t status = pw_sim_backend_transfer_cost(b, 0, 8, 1, &cost);
  cr_assert_eq(pw_status_code(status), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(status);
  b.vtable->destroy(b.self);
}

Test(sim_program, signature_and_round_trip) {
  pw_backend_t b = pw_sim_rates_backend(NULL);
  const char* text =
      "op layer0\ntime 20us\nflops 4.2e12\nbytes 1.6e9\n"
      "input f32[1024,512] split(0,all)\ninput f32[512] replicated\n"
      "output f64[1024,512] split(1,0)\n";
  uint32_t n = 4;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &n);
  void* bytes = NULL;
  size_t size = 0;
  PW_SIM_OK(b.vtable->compile(b.self, text, strlen(text), &mesh, "", pw_allocator_system(),
                              &bytes, &size));
  cr_assert_eq(memcmp(bytes, "PWSIMEXE", 8), 0);
  pw_backend_executable_t e = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  PW_SIM_OK(b.vtable->load(b.self, bytes, size, &e, &sig));
  cr_assert_str_eq(sig.name, "layer0");
  cr_assert_eq(sig.input_count, 2);
  cr_assert_eq(sig.output_count, 1);
  cr_assert_eq(sig.inputs[0].dtype, PW_DTYPE_F32);
  cr_assert_eq(sig.inputs[0].shape.rank, 2);
  cr_assert_eq(sig.inputs[0].shape.dims[0], 1024);
  cr_assert_eq(sig.inputs[0].sharding.kind, PW_SHARDING_SPLIT);
  cr_assert_eq(sig.inputs[0].sharding.mesh_axis, PW_MESH_AXIS_ALL);
  cr_assert_eq(sig.inputs[1].sharding.kind, PW_SHARDING_REPLICATED);
  cr_assert_eq(sig.outputs[0].dtype, PW_DTYPE_F64);
  cr_assert_eq(sig.outputs[0].sharding.tensor_axis, 1);
  cr_assert_eq(sig.outputs[0].sharding.mesh_axis, 0);
  cr_assert(pw_mesh_shape_equal(&sig.mesh, &mesh));
  /* Shards must be large enough: 256x512 f32 = 512 KiB for input 0. */
  pw_backend_memory_t small = NULL;
  PW_SIM_OK(b.vtable->allocate(b.self, 0, 1024, &small));
  pw_backend_memory_t ins[2] = {small, small};
  pw_backend_memory_t outs[1] = {small};
  uint32_t group[4] = {0, 1, 2, 3};
  pw_sim_launch_t l;
  pw_sim_test_describe(&l, e, 0, 0, group, 4, 1, ins, 2, outs, 1);
  pw_status_t status = b.vtable->launch(b.self, &l.launch);
  cr_assert_eq(pw_status_code(status), PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(pw_status_message(status), "layer0") != NULL, "%s",
            pw_status_message(status));
  pw_status_free(status);
  cr_assert_eq(atomic_load(&l.done.calls), 0);
  b.vtable->deallocate(b.self, 0, small);
  b.vtable->unload(b.self, e);
  pw_allocator_free(pw_allocator_system(), bytes, size);
  b.vtable->destroy(b.self);
}

/* Errors name the line and the token. */
Test(sim_program, errors_name_line_and_token) {
  static const struct {
    const char* text;
    const char* needle;
  } cases[] = {
      {"op a\nkind reduce\n", "line 2: unknown kind"},
      {"op a\n\ntime 3 parsecs\n", "line 3"},
      {"op a\ntime 3h\n", "unknown duration unit"},
      {"op a\nflops lots\n", "expected a number, got 'lots'"},
      {"kernel copy\n", "line 1: the first directive must be 'op NAME', not 'kernel'"},
      {"op a\ninput f128[8] replicated\n", "expected DTYPE[DIMS]"},
      {"op a\ninput f32[8] split(0,x)\n", "bad mesh axis"},
      {"op a\nwhat 1\n", "unknown directive 'what'"},
      {"op a\ntime 1\ntime 2\n", "line 3: repeated directive 'time'"},
      {"op a\nkind copy\n", "kind copy takes 1 input and 1 output"},
      {"", "no 'op NAME' directive"},
      {"op a\n\x01\n", "line 2: byte 0x01"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    pw_backend_t b = pw_sim_rates_backend(NULL);
    uint32_t n = 1;
    pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &n);
    void* bytes = NULL;
    size_t size = 0;
    pw_status_t status = b.vtable->compile(b.self, cases[i].text, strlen(cases[i].text), &mesh,
                                           NULL, pw_allocator_system(), &bytes, &size);
    cr_assert_eq(pw_status_code(status), PW_STATUS_INVALID_ARGUMENT, "case %zu", i);
    cr_assert(strstr(pw_status_message(status), cases[i].needle) != NULL,
              "case %zu: message \"%s\" lacks \"%s\"", i, pw_status_message(status),
              cases[i].needle);
    pw_status_free(status);
    b.vtable->destroy(b.self);
  }
}

Test(sim_program, options_are_rejected) {
  pw_backend_t b = pw_sim_rates_backend(NULL);
  uint32_t n = 1;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &n);
  void* bytes = NULL;
  size_t size = 0;
  pw_status_t status = b.vtable->compile(b.self, "op a\n", 5, &mesh, "fast=1",
                                         pw_allocator_system(), &bytes, &size);
  cr_assert_eq(pw_status_code(status), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(status);
  b.vtable->destroy(b.self);
}

Test(sim_program, bad_options) {
  pw_backend_t b;
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.slice_count = 4096;
  o.devices_per_slice = 4096;
  pw_status_t status = pw_sim_backend_create(&o, &b);
  cr_assert_eq(pw_status_code(status), PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(pw_status_message(status), "4096 slices") != NULL);
  pw_status_free(status);
  pw_sim_backend_options_init(&o);
  o.chip_flops_per_s = -1;
  status = pw_sim_backend_create(&o, &b);
  cr_assert(strstr(pw_status_message(status), "chip_flops_per_s") != NULL);
  pw_status_free(status);
  pw_sim_failure_t bad = {PW_SIM_FAIL_SLICE, 1, 10};
  pw_sim_backend_options_init(&o);
  o.failures = &bad;
  o.failure_count = 1;
  status = pw_sim_backend_create(&o, &b);
  cr_assert(strstr(pw_status_message(status), "failures[0]") != NULL, "%s",
            pw_status_message(status));
  pw_status_free(status);
  o.struct_size = 8;
  status = pw_sim_backend_create(&o, &b);
  cr_assert(strstr(pw_status_message(status), "struct_size") != NULL);
  pw_status_free(status);
  cr_assert_null(b.vtable);
  cr_assert(!pw_sim_backend_is_sim(b));
}
