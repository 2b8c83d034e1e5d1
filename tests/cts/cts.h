/* Backend conformance test suite (CTS), after the IREE HAL CTS: one set of
 * cases, written once, run against every device backend through a
 * "fixture" that says how to make the backend and what it supports.
 *
 * Adding a backend: write one runner file (see cts_double_test.c and
 * cts_cpu_test.c) that defines a pw_cts_fixture_t and instantiates the
 * cases with PW_CTS_INSTANTIATE(suite, &fixture), then register it in
 * tests/cts/CMakeLists.txt with pw_add_cts_runner. Adding a case: write
 * pw_cts_case_<name>(fixture) in one of the cts_*.c files and add <name> to
 * PW_CTS_CASES; every backend runs it from then on.
 *
 * The data model every backend implements for the CTS: f32 arrays on a 1-D
 * or 2-D mesh, each device holding |elements| values of each parameter.
 *   copy:        output 0 on each device = input 0 on that device.
 *   all-reduce:  output 0 on each device = element-wise sum of input 0
 *                over every device of the mesh.
 * Cases use the checked calls of lib/plugin/backend_call.h (pw__backend_*)
 * for ordinary calls, and the vtable directly where the case is about the
 * raw contract (what a backend does with NULL options, a short info
 * struct...). */
#ifndef PW_TESTS_CTS_CTS_H_
#define PW_TESTS_CTS_CTS_H_

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>

#include "pathways/pathways.h"
#include "plugin/backend_call.h"
#include "support/test_allocators.h"

typedef struct pw_cts_fixture_t pw_cts_fixture_t;

/* Writes program text into |buffer| (NUL-terminated, truncated like
 * snprintf) and returns the full length. */
typedef size_t (*pw_cts_program_fn_t)(const pw_mesh_shape_t* mesh, uint32_t elements,
                                      char* buffer, size_t capacity);

struct pw_cts_fixture_t {
  /* Names the backend configuration in messages ("double-inline"). */
  const char* name;
  /* Creates a fresh backend. When |takes_allocator| is true, everything it
   * allocates must come from |allocator|; otherwise |allocator| is ignored
   * and the leak cases are skipped. */
  pw_status_t (*create)(const pw_cts_fixture_t* fixture, pw_allocator_t allocator,
                        pw_backend_t* out_backend);
  bool takes_allocator;
  /* Required: the copy program (see the data model above) for |mesh|. */
  pw_cts_program_fn_t copy_program;
  /* Optional (NULL: the collective cases are skipped): the all-reduce. */
  pw_cts_program_fn_t all_reduce_program;
  /* Optional (NULL: the failure cases are skipped): marks |device| FAILED. */
  pw_status_t (*fail_device)(pw_backend_t* backend, uint32_t device);
  /* Optional, NULL-terminated: more programs compile must reject, in this
   * backend's own syntax, beyond the CTS's generic garbage. */
  const char* const* bad_programs;
  /* Optional, NULL-terminated: names of cases (as in PW_CTS_CASES) this
   * backend does not support; they are reported as skipped. A name that is
   * not a case fails every case, so typos cannot hide tests. */
  const char* const* unsupported;
  /* For the fixture's own use. */
  void* user;
};

/* Every case, in run order. X(suite, fixture, name). */
#define PW_CTS_CASES(X, suite, fixture)            \
  X(suite, fixture, vtable_basics)                 \
  X(suite, fixture, devices)                       \
  X(suite, fixture, compile_deterministic)         \
  X(suite, fixture, compile_rejects_garbage)       \
  X(suite, fixture, load_unload_round_trip)        \
  X(suite, fixture, load_rejects_corrupt)          \
  X(suite, fixture, load_rejects_foreign)          \
  X(suite, fixture, memory_round_trip)             \
  X(suite, fixture, memory_out_of_range)           \
  X(suite, fixture, memory_zero_size)              \
  X(suite, fixture, memory_too_large)              \
  X(suite, fixture, host_pointer)                  \
  X(suite, fixture, launch_copy)                   \
  X(suite, fixture, launch_rejects_bad_args)       \
  X(suite, fixture, launch_concurrent)             \
  X(suite, fixture, launch_from_done)              \
  X(suite, fixture, collective_all_reduce)         \
  X(suite, fixture, collective_many_gangs)         \
  X(suite, fixture, collective_refused_part)       \
  X(suite, fixture, failed_device)                 \
  X(suite, fixture, failed_device_collective)      \
  X(suite, fixture, destroy_frees_everything)      \
  X(suite, fixture, create_allocation_failures)    \
  X(suite, fixture, queued_order)                  \
  X(suite, fixture, queued_depth)                  \
  X(suite, fixture, queued_failure_mid_queue)      \
  X(suite, fixture, queued_deadline)               \
  X(suite, fixture, host_launch_copy)              \
  X(suite, fixture, host_launch_done_once)         \
  X(suite, fixture, host_launch_refusals)          \
  X(suite, fixture, host_launch_collective)        \
  X(suite, fixture, host_launch_queued)            \
  X(suite, fixture, host_launch_failed_device)

typedef void (*pw_cts_case_fn_t)(const pw_cts_fixture_t* fixture);

#define PW_CTS_DECLARE_CASE(suite, fixture, name) \
  void pw_cts_case_##name(const pw_cts_fixture_t* fixture);
PW_CTS_CASES(PW_CTS_DECLARE_CASE, _, _)
#undef PW_CTS_DECLARE_CASE

/* Runs |fn| for |fixture| unless the fixture lists |name| as unsupported
 * (then the test is skipped). Fails if the fixture's unsupported list
 * names something that is not a case. */
void pw_cts_run(const pw_cts_fixture_t* fixture, const char* name, pw_cts_case_fn_t fn);

#define PW_CTS_DEFINE_TEST(suite, fixture, name) \
  Test(suite, name) { pw_cts_run((fixture), #name, pw_cts_case_##name); }

/* Defines Criterion suite |suite| running every case against |fixture| (a
 * pointer to a pw_cts_fixture_t with static storage). */
#define PW_CTS_INSTANTIATE(suite, fixture)        \
  TestSuite(suite, .fini = pw_test_check_leaks); \
  PW_CTS_CASES(PW_CTS_DEFINE_TEST, suite, fixture)

/* ------------------------------------------------------------------------
 * Helpers shared by the case files (cts_*.c).
 * ---------------------------------------------------------------------- */

/* How long any wait for a completion may take before the case fails as a
 * hang. Generous: sanitizer builds on two busy cores are slow. */
#define PW_CTS_TIMEOUT_NS (20ull * 1000 * 1000 * 1000)

/* Fails the test unless |status| is OK (the status is freed). */
void pw_cts_assert_ok(pw_status_t status, const char* what);
#define PW_CTS_OK(expr) pw_cts_assert_ok((expr), #expr)

/* Fails the test unless |status| is an error whose code is one of the
 * |count| codes in |allowed| and whose message is not empty; frees it.
 * Returns the code. */
pw_status_code_t pw_cts_assert_error(pw_status_t status, const pw_status_code_t* allowed,
                                     size_t count, const char* what);
#define PW_CTS_ERROR(expr, ...)                                               \
  pw_cts_assert_error((expr), (const pw_status_code_t[]){__VA_ARGS__},         \
                      sizeof((const pw_status_code_t[]){__VA_ARGS__}) /       \
                          sizeof(pw_status_code_t),                           \
                      #expr)

/* Creates the fixture's backend (counting allocations in |t| if non-NULL)
 * and checks it passes pw__backend_check. */
void pw_cts_create(const pw_cts_fixture_t* fixture, pw_test_allocator_t* t,
                   pw_backend_t* out_backend);
/* Destroys |backend| through the shim and zeroes it. */
void pw_cts_destroy(pw_backend_t* backend);

/* The mesh the cases use: every device (at most 8) in one row, devices
 * optionally permuted. Fills |devices| (mesh order -> backend ordinal). */
pw_mesh_shape_t pw_cts_mesh(const pw_backend_t* backend, uint32_t* devices,
                            uint32_t* out_count);

/* Builds |fn|'s program for |mesh| and |elements|, compiles it (with the
 * system allocator) and returns the bytes in |*out_bytes|/|*out_size|; the
 * caller frees them with pw_cts_free_bytes. */
void pw_cts_compile(const pw_backend_t* backend, pw_cts_program_fn_t fn,
                    const pw_mesh_shape_t* mesh, uint32_t elements, void** out_bytes,
                    size_t* out_size);
void pw_cts_free_bytes(void* bytes, size_t size);

/* Compiles and loads; checks the signature has |inputs|/|outputs| params and
 * the mesh. Release with pw__backend_unload. */
pw_backend_executable_t pw_cts_load(const pw_backend_t* backend, pw_cts_program_fn_t fn,
                                    const pw_mesh_shape_t* mesh, uint32_t elements,
                                    uint32_t inputs, uint32_t outputs);

/* Completion tracking: one slot per launch; its done counts calls and keeps
 * the first status code; the tracker wakes waiters. */
typedef struct pw_cts_tracker_t pw_cts_tracker_t;
typedef struct pw_cts_slot_t {
  pw_cts_tracker_t* tracker;
  _Atomic uint32_t calls;
  _Atomic int code;
  /* Optional hook run inside done after counting (launch_from_done). */
  void (*then)(struct pw_cts_slot_t* slot);
  void* user;
  /* Set by pw_cts_done_timed when the backend gave a timing. */
  _Atomic int timed;
  uint64_t start_ns;
  uint64_t end_ns;
} pw_cts_slot_t;

struct pw_cts_tracker_t {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  size_t completed; /* done calls so far */
  size_t count;
  pw_cts_slot_t* slots;
  size_t* order;    /* slot indices in the order their dones came */
};

void pw_cts_tracker_init(pw_cts_tracker_t* tracker, size_t count);
void pw_cts_tracker_free(pw_cts_tracker_t* tracker);
/* The done callback: |user| is a pw_cts_slot_t*. */
void pw_cts_done(void* user, pw_status_t status);
/* The v2 done_timed callback: records |timing| in the slot, then as
 * pw_cts_done. */
void pw_cts_done_timed(void* user, pw_status_t status, const pw_backend_timing_t* timing);
/* Waits until slots [first, first + count) have each been called; fails
 * the test on timeout naming the first slot still waiting. */
void pw_cts_tracker_wait_slots(pw_cts_tracker_t* tracker, size_t first, size_t count,
                               const char* what);
/* Waits until |target| done calls happened; fails the test on timeout. */
void pw_cts_tracker_wait(pw_cts_tracker_t* tracker, size_t target, const char* what);
/* Asserts slot |i| completed exactly once (|calls| == |want_calls|). */
void pw_cts_tracker_expect_calls(pw_cts_tracker_t* tracker, size_t i, uint32_t want_calls);

/* One gang's worth of launch descriptors and buffers, kept alive until the
 * gang completes (the contract lets a backend use the pointers until then). */
typedef struct pw_cts_gang_t {
  uint32_t size;
  uint32_t devices[8];
  pw_backend_memory_t inputs[8];
  pw_backend_memory_t outputs[8];
  pw_backend_launch_t launches[8];
  size_t bytes; /* per device, per parameter */
} pw_cts_gang_t;

/* Checks a completed gang's outputs (|elements| per device, inputs from
 * |seed|). */
typedef void (*pw_cts_gang_check_fn_t)(const pw_backend_t* backend, const pw_cts_gang_t* gang,
                                       uint32_t elements, uint32_t seed);

/* Runs one gang of |program| (one input, one output, 16 elements per
 * device) on |mesh| over |devices|, parts launched in order or in
 * reverse, expects every part to complete OK exactly once, then |check|s
 * the outputs. |what| names the gang in messages. */
void pw_cts_run_gang(const pw_backend_t* backend, pw_cts_program_fn_t program,
                     pw_mesh_shape_t mesh, const uint32_t* devices, bool reverse,
                     uint64_t gang_id, const char* what, pw_cts_gang_check_fn_t check);

/* Allocates |elements| f32 inputs and outputs on each of the |size|
 * devices; input m holds pw_cts_value(seed, m, i); outputs hold 0xCD
 * bytes. */
void pw_cts_gang_alloc(const pw_backend_t* backend, pw_cts_gang_t* gang, uint32_t size,
                       const uint32_t* devices, uint32_t elements, uint32_t seed);
void pw_cts_gang_free(const pw_backend_t* backend, pw_cts_gang_t* gang);
/* Fills gang->launches: part m on gang->devices[m] at mesh index m,
 * copying input m to output m, done -> slot |first_slot| + m. */
void pw_cts_gang_describe(pw_cts_gang_t* gang, pw_backend_executable_t executable,
                          uint64_t gang_id, pw_cts_tracker_t* tracker, size_t first_slot);
/* Launches the gang through the shim, one part per device in mesh order
 * (reverse order if |reverse|), with slots |first_slot|... Asserts every
 * launch returned OK. */
void pw_cts_gang_launch(const pw_backend_t* backend, pw_cts_gang_t* gang,
                        pw_backend_executable_t executable, uint64_t gang_id,
                        pw_cts_tracker_t* tracker, size_t first_slot, bool reverse);
/* As pw_cts_gang_launch but without asserting, so other threads may call
 * it: returns how many parts failed to launch (their statuses are freed). */
uint32_t pw_cts_gang_launch_try(const pw_backend_t* backend, pw_cts_gang_t* gang,
                                pw_backend_executable_t executable, uint64_t gang_id,
                                pw_cts_tracker_t* tracker, size_t first_slot, bool reverse);
/* Reads device |m|'s output into |out| (gang->bytes bytes). */
void pw_cts_gang_read(const pw_backend_t* backend, const pw_cts_gang_t* gang, uint32_t m,
                      float* out);

/* Queue-ordered launch: the smallest depth queue_info reports over the
 * backend's devices (at most PW_BACKEND_MAX_QUEUE_DEPTH), or 0 if any
 * device is not PW_BACKEND_QUEUE_ORDERED (or the vtable has no
 * queue_info): one launch at a time per device, no limit to respect.
 * Cases that flood a device keep at most that many launches outstanding
 * there, as the runtime does. */
uint32_t pw_cts_queue_depth(const pw_backend_t* backend);

/* The test value of element |i| on mesh position |m|: small integers, so
 * f32 sums are exact. */
static inline float pw_cts_value(uint32_t seed, uint32_t m, uint32_t i) {
  return (float)((seed * 7u + m * 13u + i) % 1000u);
}

#endif /* PW_TESTS_CTS_CTS_H_ */
