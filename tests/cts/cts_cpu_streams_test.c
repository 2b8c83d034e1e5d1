/* Runs the CTS against the bundled CPU backend in streams mode
 * (pw_cpu_backend_options_t.stream_depth > 0): one FIFO thread per device,
 * queue-ordered, so the queued_* cases run too. Two depths: 4 (the cases
 * that flood a device hold back to it) and 64. */
#include <stdio.h>

#include "cts/cts.h"
#include "pathways/backends/cpu.h"

static size_t pw_cts_cpu_copy(const pw_mesh_shape_t* mesh, uint32_t elements, char* buffer,
                              size_t capacity) {
  unsigned total = pw_mesh_shape_device_count(mesh) * elements;
  int n = snprintf(buffer, capacity,
                   "kernel copy\ninput f32[%u] split(0,all)\noutput f32[%u] split(0,all)\n",
                   total, total);
  return n < 0 ? 0 : (size_t)n;
}

static size_t pw_cts_cpu_all_reduce(const pw_mesh_shape_t* mesh, uint32_t elements,
                                    char* buffer, size_t capacity) {
  int n = snprintf(buffer, capacity,
                   "kernel all_reduce_sum\ninput f32[%u,%u] split(0,all)\n"
                   "output f32[%u] replicated\n",
                   pw_mesh_shape_device_count(mesh), elements, elements);
  return n < 0 ? 0 : (size_t)n;
}

static pw_status_t pw_cts_cpu_fail_device(pw_backend_t* backend, uint32_t device) {
  return pw_cpu_backend_set_health(*backend, device, PW_DEVICE_FAILED);
}

/* |fixture->user| points at the stream depth. */
static pw_status_t pw_cts_cpu_streams_create(const pw_cts_fixture_t* fixture,
                                             pw_allocator_t allocator,
                                             pw_backend_t* out_backend) {
  pw_cpu_backend_options_t options;
  pw_cpu_backend_options_init(&options);
  options.allocator = allocator;
  options.device_count = 8;
  options.device_memory_bytes = 64u << 20;
  options.stream_depth = *(const uint32_t*)fixture->user;
  return pw_cpu_backend_create(&options, out_backend);
}

static const char* const pw_cts_cpu_streams_bad_programs[] = {
    "kernel copy\ninput f128[8] replicated\noutput f128[8] replicated\n",
    "kernel copy\ninput f32[7] split(0,all)\noutput f32[7] split(0,all)\n",
    "input f32[8] replicated\nkernel copy\n",
    NULL,
};

static const char* const pw_cts_cpu_streams_unsupported[] = {
    NULL,
};

static const uint32_t pw_cts_depth4 = 4;
static const uint32_t pw_cts_depth64 = 64;

#define PW_CTS_CPU_STREAMS_FIXTURE(NAME, DEPTH)          \
  {                                                      \
      .name = NAME,                                      \
      .create = pw_cts_cpu_streams_create,               \
      .takes_allocator = true,                           \
      .copy_program = pw_cts_cpu_copy,                   \
      .all_reduce_program = pw_cts_cpu_all_reduce,       \
      .fail_device = pw_cts_cpu_fail_device,             \
      .bad_programs = pw_cts_cpu_streams_bad_programs,   \
      .unsupported = pw_cts_cpu_streams_unsupported,     \
      .user = (void*)(DEPTH),                            \
  }

static const pw_cts_fixture_t pw_cts_cpu_streams4 =
    PW_CTS_CPU_STREAMS_FIXTURE("cpu-streams-4", &pw_cts_depth4);
static const pw_cts_fixture_t pw_cts_cpu_streams64 =
    PW_CTS_CPU_STREAMS_FIXTURE("cpu-streams-64", &pw_cts_depth64);

PW_CTS_INSTANTIATE(cts_cpu_streams4, &pw_cts_cpu_streams4)
PW_CTS_INSTANTIATE(cts_cpu_streams64, &pw_cts_cpu_streams64)
