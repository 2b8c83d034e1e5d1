/* Runs the CTS against the bundled CPU backend (pathways/backends/cpu.h):
 * real execution on a pool of host threads, so completion always comes
 * from another thread. */
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

static pw_status_t pw_cts_cpu_create(const pw_cts_fixture_t* fixture, pw_allocator_t allocator,
                                     pw_backend_t* out_backend) {
  pw_cpu_backend_options_t options;
  pw_cpu_backend_options_init(&options);
  options.allocator = allocator;
  options.device_count = 8;
  options.worker_count = 2;
  options.device_memory_bytes = 64u << 20;
  return pw_cpu_backend_create(&options, out_backend);
}

/* In the CPU backend's syntax; the CTS compiles them on an 8-device row. */
static const char* const pw_cts_cpu_bad_programs[] = {
    "kernel copy\ninput f128[8] replicated\noutput f128[8] replicated\n",
    "kernel copy\ninput f32[8] split(0,9)\noutput f32[8] split(0,9)\n",
    "kernel copy\ninput f32[7] split(0,all)\noutput f32[7] split(0,all)\n",
    "kernel copy\ninput f32[8] replicated\noutput f64[8] replicated\n",
    "kernel matmul\ninput f32[4] replicated\ninput f32[4] replicated\noutput f32[4] replicated\n",
    "kernel fill\noutput f32[8] replicated\n",
    "kernel copy\ninput f32[8] replicated\noutput f32[8] replicated\nattr bogus 1\n",
    "input f32[8] replicated\nkernel copy\n",
    NULL,
};

/* Cases the CPU backend does not support: none. */
static const char* const pw_cts_cpu_unsupported[] = {
    NULL,
};

static const pw_cts_fixture_t pw_cts_cpu = {
    .name = "cpu",
    .create = pw_cts_cpu_create,
    .takes_allocator = true,
    .copy_program = pw_cts_cpu_copy,
    .all_reduce_program = pw_cts_cpu_all_reduce,
    .fail_device = pw_cts_cpu_fail_device,
    .bad_programs = pw_cts_cpu_bad_programs,
    .unsupported = pw_cts_cpu_unsupported,
};

PW_CTS_INSTANTIATE(cts_cpu, &pw_cts_cpu)
