/* Runs the CTS against the test-double backend in its configurations:
 * inline completion, helper-thread completion, and the no-op configuration
 * (which by design skips every case that looks at data); each again with
 * several hosts and launch_host offered (the host_launch_* cases run
 * there, and every other case must still hold). */
#include <stdio.h>

#include "cts/cts.h"
#include "cts/double_backend.h"
#include "support/queue_wrapper.h"

static size_t pw_cts_double_copy(const pw_mesh_shape_t* mesh, uint32_t elements, char* buffer,
                                 size_t capacity) {
  unsigned total = pw_mesh_shape_device_count(mesh) * elements;
  int n = snprintf(buffer, capacity,
                   "# CTS copy\ncopy\ninput f32[%u] split(0,all)\noutput f32[%u] split(0,all)\n",
                   total, total);
  return n < 0 ? 0 : (size_t)n;
}

static size_t pw_cts_double_all_reduce(const pw_mesh_shape_t* mesh, uint32_t elements,
                                       char* buffer, size_t capacity) {
  int n = snprintf(buffer, capacity,
                   "all_reduce_sum\ninput f32[%u,%u] split(0,all)\noutput f32[%u] replicated\n",
                   pw_mesh_shape_device_count(mesh), elements, elements);
  return n < 0 ? 0 : (size_t)n;
}

static pw_status_t pw_cts_double_fail_device(pw_backend_t* backend, uint32_t device) {
  pw_double_backend_t* d = pw_double_backend_from(backend);
  if (d == NULL) return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "not a double backend");
  pw_double_backend_set_health(d, device, PW_DEVICE_FAILED);
  return NULL;
}

/* |fixture->user| points at the options to create with. */
static pw_status_t pw_cts_double_create(const pw_cts_fixture_t* fixture,
                                        pw_allocator_t allocator, pw_backend_t* out_backend) {
  pw_double_options_t options = *(const pw_double_options_t*)fixture->user;
  options.allocator = allocator;
  return pw_double_backend_create(&options, out_backend);
}

static const char* const pw_cts_double_bad_programs[] = {
    "fill 256\n",
    "fail 0\n",
    "fail 17\n",
    "copy\ninput f32[8] replicated\n",
    "fill 1\ninput u8[1] replicated\noutput u8[1] replicated\n",
    "copy\ninput f32[8] split(0,3)\noutput f32[8] split(0,3)\n",
    "copy\ninput f32[8] replicated\noutput f64[8] replicated\n",
    "noop\ninput f32[-1] replicated\n",
    NULL,
};

static const pw_double_options_t pw_cts_inline_options = {
    .struct_size = sizeof(pw_double_options_t),
    .device_count = 8,
    .completion = PW_DOUBLE_COMPLETE_INLINE,
    .failed_device_mode = PW_DOUBLE_FAIL_AT_LAUNCH,
};

static const pw_double_options_t pw_cts_threaded_options = {
    .struct_size = sizeof(pw_double_options_t),
    .device_count = 4,
    .completion = PW_DOUBLE_COMPLETE_THREADED,
    .worker_count = 2,
    .failed_device_mode = PW_DOUBLE_FAIL_AT_COMPLETION,
};

static const pw_double_options_t pw_cts_noop_options = {
    .struct_size = sizeof(pw_double_options_t),
    .device_count = 8,
    .no_op = true,
};

/* Hosts of 3 and 2 devices: the CTS mesh (position m on device
 * (m + 1) % n) then has lanes of several devices, a host boundary, and a
 * host whose devices are not consecutive (device 0 comes last). */
static const pw_double_options_t pw_cts_inline_hosts_options = {
    .struct_size = sizeof(pw_double_options_t),
    .device_count = 8,
    .completion = PW_DOUBLE_COMPLETE_INLINE,
    .failed_device_mode = PW_DOUBLE_FAIL_AT_LAUNCH,
    .devices_per_host = 3,
    .host_launch = true,
};

static const pw_double_options_t pw_cts_threaded_hosts_options = {
    .struct_size = sizeof(pw_double_options_t),
    .device_count = 4,
    .completion = PW_DOUBLE_COMPLETE_THREADED,
    .worker_count = 2,
    .failed_device_mode = PW_DOUBLE_FAIL_AT_COMPLETION,
    .devices_per_host = 2,
    .host_launch = true,
};

static const pw_double_options_t pw_cts_noop_hosts_options = {
    .struct_size = sizeof(pw_double_options_t),
    .device_count = 8,
    .no_op = true,
    .devices_per_host = 4,
    .host_launch = true,
};

static const pw_cts_fixture_t pw_cts_double_inline = {
    .name = "double-inline",
    .create = pw_cts_double_create,
    .takes_allocator = true,
    .copy_program = pw_cts_double_copy,
    .all_reduce_program = pw_cts_double_all_reduce,
    .fail_device = pw_cts_double_fail_device,
    .bad_programs = pw_cts_double_bad_programs,
    .user = (void*)&pw_cts_inline_options,
};

static const pw_cts_fixture_t pw_cts_double_threaded = {
    .name = "double-threaded",
    .create = pw_cts_double_create,
    .takes_allocator = true,
    .copy_program = pw_cts_double_copy,
    .all_reduce_program = pw_cts_double_all_reduce,
    .fail_device = pw_cts_double_fail_device,
    .bad_programs = pw_cts_double_bad_programs,
    .user = (void*)&pw_cts_threaded_options,
};

/* No memory and no program semantics: only the cases about the vtable,
 * compile/load, and the launch/lifetime bookkeeping apply. */
static const char* const pw_cts_noop_unsupported[] = {
    "memory_round_trip", "memory_out_of_range", "memory_zero_size", "memory_too_large",
    "launch_copy", "launch_rejects_bad_args", "launch_concurrent", "launch_from_done",
    "host_launch_copy", "host_launch_collective", "host_launch_queued",
    "host_launch_failed_device", NULL,
};

static const pw_cts_fixture_t pw_cts_double_noop = {
    .name = "double-noop",
    .create = pw_cts_double_create,
    .takes_allocator = true,
    .copy_program = pw_cts_double_copy,
    .bad_programs = pw_cts_double_bad_programs,
    .unsupported = pw_cts_noop_unsupported,
    .user = (void*)&pw_cts_noop_options,
};

#define PW_CTS_DOUBLE_HOSTS(NAME, OPTIONS)             \
  {                                                    \
      .name = NAME,                                    \
      .create = pw_cts_double_create,                  \
      .takes_allocator = true,                         \
      .copy_program = pw_cts_double_copy,              \
      .all_reduce_program = pw_cts_double_all_reduce,  \
      .fail_device = pw_cts_double_fail_device,        \
      .bad_programs = pw_cts_double_bad_programs,      \
      .user = (void*)(OPTIONS),                        \
  }

static const pw_cts_fixture_t pw_cts_double_inline_hosts =
    PW_CTS_DOUBLE_HOSTS("double-inline-hosts", &pw_cts_inline_hosts_options);
static const pw_cts_fixture_t pw_cts_double_threaded_hosts =
    PW_CTS_DOUBLE_HOSTS("double-threaded-hosts", &pw_cts_threaded_hosts_options);

static const pw_cts_fixture_t pw_cts_double_noop_hosts = {
    .name = "double-noop-hosts",
    .create = pw_cts_double_create,
    .takes_allocator = true,
    .copy_program = pw_cts_double_copy,
    .bad_programs = pw_cts_double_bad_programs,
    .unsupported = pw_cts_noop_unsupported,
    .user = (void*)&pw_cts_noop_hosts_options,
};

PW_CTS_INSTANTIATE(cts_double_inline, &pw_cts_double_inline)
PW_CTS_INSTANTIATE(cts_double_threaded, &pw_cts_double_threaded)
PW_CTS_INSTANTIATE(cts_double_noop, &pw_cts_double_noop)
PW_CTS_INSTANTIATE(cts_double_inline_hosts, &pw_cts_double_inline_hosts)
PW_CTS_INSTANTIATE(cts_double_threaded_hosts, &pw_cts_double_threaded_hosts)
PW_CTS_INSTANTIATE(cts_double_noop_hosts, &pw_cts_double_noop_hosts)

/* The host cases over the queue wrapper (tests/support/queue_wrapper.h):
 * the double with hosts and launch_host, made queue-ordered (depth 4), so
 * host_launch_queued runs (no device failure to inject through it: the
 * failed-device case is not run). Only the host cases: the wrapper checks less at
 * launch than the double (it queues first), which the other cases see. */
static pw_status_t pw_cts_double_queued_create(const pw_cts_fixture_t* fixture,
                                               pw_allocator_t allocator,
                                               pw_backend_t* out_backend) {
  (void)allocator; /* the wrapper allocates with malloc: takes_allocator false */
  pw_double_options_t options = *(const pw_double_options_t*)fixture->user;
  pw_backend_t inner;
  PW_RETURN_IF_ERROR(pw_double_backend_create(&options, &inner));
  pw_queue_wrapper_options_t q = {.depth = 4, .ordered = true};
  return pw_queue_wrapper_create(&q, inner, out_backend);
}

static const pw_cts_fixture_t pw_cts_double_queued_hosts = {
    .name = "double-queued-hosts",
    .create = pw_cts_double_queued_create,
    .takes_allocator = false,
    .copy_program = pw_cts_double_copy,
    .all_reduce_program = pw_cts_double_all_reduce,
    .bad_programs = pw_cts_double_bad_programs,
    .user = (void*)&pw_cts_threaded_hosts_options,
};

TestSuite(cts_double_queued_hosts, .fini = pw_test_check_leaks);
#define PW_CTS_QUEUED_HOST_CASES(X, suite, fixture) \
  X(suite, fixture, host_launch_copy)               \
  X(suite, fixture, host_launch_done_once)          \
  X(suite, fixture, host_launch_refusals)           \
  X(suite, fixture, host_launch_collective)         \
  X(suite, fixture, host_launch_queued)
PW_CTS_QUEUED_HOST_CASES(PW_CTS_DEFINE_TEST, cts_double_queued_hosts, &pw_cts_double_queued_hosts)
