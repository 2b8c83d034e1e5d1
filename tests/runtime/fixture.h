/* Runtime test fixtures: a runtime over test-double or CPU backends, with
 * helpers that keep the tests about behaviour rather than setup. Every
 * helper asserts through the caller-supplied failure path: they return a
 * status and the tests check it. */
#ifndef PW_TESTS_RUNTIME_FIXTURE_H_
#define PW_TESTS_RUNTIME_FIXTURE_H_

#include "cts/double_backend.h"
#include "pathways/backends/cpu.h"
#include "pathways/pathways.h"

typedef struct pw_fixture_t {
  pw_runtime_t* runtime;
  pw_client_t* client;
  pw_backend_t backend;          /* a copy: the runtime owns it */
  pw_double_backend_t* dbl;      /* control handle when it is a double */
  struct pw_queue_wrapper_s* qw; /* control handle when queued */
  uint32_t slice_count;
} pw_fixture_t;

/* A runtime with |slices| slices of |mesh| on one backend made by
 * |backend_fn| (device count = slices * mesh size), and one client. */
typedef enum pw_fixture_backend_e {
  PW_FIXTURE_DOUBLE_INLINE = 0,
  PW_FIXTURE_DOUBLE_THREADED = 1,
  PW_FIXTURE_DOUBLE_DEFERRED = 2,
  PW_FIXTURE_CPU = 3,
  /* The CPU backend / the inline double behind the queue-ordered wrapper
   * (tests/support/queue_wrapper.h, depth 4): queued launch. */
  PW_FIXTURE_CPU_QUEUED = 4,
  PW_FIXTURE_DOUBLE_QUEUED = 5,
  /* Host launch (lib/sched/lanes.c): the threaded double with
   * host_launch and two devices per host (so a slice's devices pair up
   * into lanes); the inline one likewise behind the queue wrapper
   * (depth 4): queue-ordered lanes. */
  PW_FIXTURE_DOUBLE_LANES = 6,
  PW_FIXTURE_DOUBLE_LANES_QUEUED = 7,
} pw_fixture_backend_t;

/* True for the kinds whose double offers launch_host. */
bool pw_fixture_kind_lanes(pw_fixture_backend_t kind);

/* What a test may set beyond the kind: runtime deadlines, host launch off,
 * the queue wrapper's injected failures (queued kinds), what a launch on
 * a FAILED double device does. Zero means the default. */
typedef struct pw_fixture_extra_t {
  uint64_t launch_deadline_ns;
  uint64_t drain_deadline_ns;
  bool disable_host_launch;
  uint32_t fail_every, lose_every;
  pw_double_fail_mode_t failed_device_mode;
} pw_fixture_extra_t;

pw_status_t pw_fixture_init(pw_fixture_t* f, pw_fixture_backend_t kind,
                            uint32_t slices, const char* mesh,
                            pw_allocator_t allocator);
/* As pw_fixture_init, with a gang-scheduling policy and window. */
pw_status_t pw_fixture_init_sched(pw_fixture_t* f, pw_fixture_backend_t kind,
                                  uint32_t slices, const char* mesh,
                                  pw_allocator_t allocator, pw_sched_policy_t policy,
                                  uint32_t window);
/* As pw_fixture_init_sched (FIFO, no window) with |extra| (may be NULL). */
pw_status_t pw_fixture_init_extra(pw_fixture_t* f, pw_fixture_backend_t kind,
                                  uint32_t slices, const char* mesh,
                                  pw_allocator_t allocator, const pw_fixture_extra_t* extra);
void pw_fixture_deinit(pw_fixture_t* f);

/* Host launches the fixture's double accepted (0 when it is no double). */
uint64_t pw_fixture_host_launches(const pw_fixture_t* f);

/* Virtual slice of |mesh| ("2x4") for the fixture's client. */
pw_status_t pw_fixture_vslice(pw_fixture_t* f, const char* mesh, pw_vslice_t* out);

/* Compiles |program| text. */
pw_status_t pw_fixture_compile(pw_fixture_t* f, pw_vslice_t vs, const char* program,
                               pw_executable_t* out);

/* f32 buffer of |shape| (rank from |rank|) with |sharding| from |data|. */
pw_status_t pw_fixture_f32(pw_fixture_t* f, pw_vslice_t vs, uint32_t rank,
                           const int64_t* dims, pw_sharding_t sharding,
                           const float* data, pw_buffer_t* out);

pw_array_spec_t pw_fixture_spec_f32(uint32_t rank, const int64_t* dims,
                                    pw_sharding_t sharding);

/* Waits (5 s) for |event|, releases it, returns its status. */
pw_status_t pw_fixture_wait(pw_event_t* event);

#endif /* PW_TESTS_RUNTIME_FIXTURE_H_ */
