/* Runs the CTS against the bundled simulated backend
 * (pathways/backends/sim.h) in its automatic delivery modes: INLINE (done
 * inside launch), THREADED (a simulator thread delivers in virtual-time
 * order), and INLINE over VIRTUAL memory (sizes only, no bytes), which by
 * design skips the cases that look at data. MANUAL mode needs the host to
 * step the simulation, which the CTS cases do not do; tests/backends/sim
 * covers it. */
#include <stdio.h>

#include "cts/cts.h"
#include "pathways/backends/sim.h"

static size_t pw_cts_sim_copy(const pw_mesh_shape_t* mesh, uint32_t elements, char* buffer,
                              size_t capacity) {
  unsigned total = pw_mesh_shape_device_count(mesh) * elements;
  int n = snprintf(buffer, capacity,
                   "# CTS copy\nop cts_copy\nkind copy\ntime 3us\n"
                   "input f32[%u] split(0,all)\noutput f32[%u] split(0,all)\n",
                   total, total);
  return n < 0 ? 0 : (size_t)n;
}

static size_t pw_cts_sim_all_reduce(const pw_mesh_shape_t* mesh, uint32_t elements,
                                    char* buffer, size_t capacity) {
  int n = snprintf(buffer, capacity,
                   "op cts_all_reduce\nkind all_reduce_sum\nflops 1e6\n"
                   "input f32[%u,%u] split(0,all)\noutput f32[%u] replicated\n",
                   pw_mesh_shape_device_count(mesh), elements, elements);
  return n < 0 ? 0 : (size_t)n;
}

static pw_status_t pw_cts_sim_fail_device(pw_backend_t* backend, uint32_t device) {
  return pw_sim_backend_fail(*backend, PW_SIM_FAIL_CHIP, device, PW_SIM_TIME_NOW);
}

/* |fixture->user| points at the options to create with. */
static pw_status_t pw_cts_sim_create(const pw_cts_fixture_t* fixture, pw_allocator_t allocator,
                                     pw_backend_t* out_backend) {
  pw_sim_backend_options_t options = *(const pw_sim_backend_options_t*)fixture->user;
  options.allocator = allocator;
  return pw_sim_backend_create(&options, out_backend);
}

/* In the sim's syntax; the CTS compiles them on an 8-device row. */
static const char* const pw_cts_sim_bad_programs[] = {
    "op x\nkind copy\ninput f128[8] replicated\noutput f128[8] replicated\n",
    "op x\nkind copy\ninput f32[8] split(0,9)\noutput f32[8] split(0,9)\n",
    "op x\nkind copy\ninput f32[7] split(0,all)\noutput f32[7] split(0,all)\n",
    "op x\nkind copy\ninput f32[8] replicated\noutput f64[8] replicated\n",
    "op x\nkind all_reduce_sum\ninput bool[8] replicated\noutput bool[8] replicated\n",
    "op x\nkind copy\ninput f32[8] replicated\noutput f32[16] replicated\n",
    "op x\nkind reduce\n",
    "op x\ntime 5 parsecs\n",
    "op x\ntime 5h\n",
    "op x\ntime 1e30s\n",
    "op x\nflops -1\n",
    "op x\nflops 1e31\n",
    "op x\ntime 1us\ntime 2us\n",
    "op 9lives\n",
    "op x y\n",
    "op x\nop y\n",
    "op x\nbogus 1\n",
    "op x\ninput f32[8]\n",
    "op x\ninput f32[8,] replicated\n",
    "op x\ninput f32[8] split(0)\n",
    "kind copy\nop x\n",
    NULL,
};

static pw_sim_backend_options_t pw_cts_sim_options(pw_sim_mode_t mode, pw_sim_memory_t memory) {
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.slice_count = 2;
  o.devices_per_slice = 4;
  o.mode = mode;
  o.memory = memory;
  o.device_memory_bytes = 64u << 20;
  return o;
}

static pw_sim_backend_options_t pw_cts_sim_inline_options;
static pw_sim_backend_options_t pw_cts_sim_threaded_options;
static pw_sim_backend_options_t pw_cts_sim_virtual_options;

__attribute__((constructor)) static void pw_cts_sim_init_options(void) {
  pw_cts_sim_inline_options = pw_cts_sim_options(PW_SIM_MODE_INLINE, PW_SIM_MEMORY_HOST);
  pw_cts_sim_threaded_options = pw_cts_sim_options(PW_SIM_MODE_THREADED, PW_SIM_MEMORY_HOST);
  pw_cts_sim_virtual_options = pw_cts_sim_options(PW_SIM_MODE_INLINE, PW_SIM_MEMORY_VIRTUAL);
}

static const pw_cts_fixture_t pw_cts_sim_inline = {
    .name = "sim-inline",
    .create = pw_cts_sim_create,
    .takes_allocator = true,
    .copy_program = pw_cts_sim_copy,
    .all_reduce_program = pw_cts_sim_all_reduce,
    .fail_device = pw_cts_sim_fail_device,
    .bad_programs = pw_cts_sim_bad_programs,
    .user = &pw_cts_sim_inline_options,
};

static const pw_cts_fixture_t pw_cts_sim_threaded = {
    .name = "sim-threaded",
    .create = pw_cts_sim_create,
    .takes_allocator = true,
    .copy_program = pw_cts_sim_copy,
    .all_reduce_program = pw_cts_sim_all_reduce,
    .fail_device = pw_cts_sim_fail_device,
    .bad_programs = pw_cts_sim_bad_programs,
    .user = &pw_cts_sim_threaded_options,
};

/* No bytes in VIRTUAL memory: the cases that compare data do not apply. */
static const char* const pw_cts_sim_virtual_unsupported[] = {
    "memory_round_trip", "memory_out_of_range",  "launch_copy",
    "launch_concurrent", "launch_from_done",     "collective_all_reduce",
    "collective_many_gangs", "host_launch_copy",     "host_launch_collective",
    "host_launch_queued",    NULL,
};

static const pw_cts_fixture_t pw_cts_sim_virtual = {
    .name = "sim-virtual",
    .create = pw_cts_sim_create,
    .takes_allocator = true,
    .copy_program = pw_cts_sim_copy,
    .all_reduce_program = pw_cts_sim_all_reduce,
    .fail_device = pw_cts_sim_fail_device,
    .bad_programs = pw_cts_sim_bad_programs,
    .unsupported = pw_cts_sim_virtual_unsupported,
    .user = &pw_cts_sim_virtual_options,
};

PW_CTS_INSTANTIATE(cts_sim_inline, &pw_cts_sim_inline)
PW_CTS_INSTANTIATE(cts_sim_threaded, &pw_cts_sim_threaded)
PW_CTS_INSTANTIATE(cts_sim_virtual, &pw_cts_sim_virtual)
