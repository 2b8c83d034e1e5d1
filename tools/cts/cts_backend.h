/* pathways-cts: the backend suite, after the IREE HAL CTS: one set of
 * cases, written once, run against every backend through a fixture that
 * says how to make the backend and what it supports. The fixture is made
 * from the loaded plugin (its factory and its pw_cts_hooks_t).
 *
 * The data model is pathways/cts.h's: f32 arrays on a 1-D mesh; copy and
 * all-reduce programs come from the hooks. Cases use the checked calls
 * below (the contract the runtime enforces on a vtable: a method missing
 * or beyond struct_size is UNIMPLEMENTED naming it) for ordinary calls,
 * and the vtable directly where the case is about the raw contract (what a
 * backend does with NULL options, a short info struct...). */
#ifndef PW_TOOLS_CTS_CTS_BACKEND_H_
#define PW_TOOLS_CTS_CTS_BACKEND_H_

#include <pthread.h>
#include <stdatomic.h>

#include "cts_check.h"

typedef struct pw_cts_fixture_t pw_cts_fixture_t;

struct pw_cts_fixture_t {
  /* Names the backend in messages (the factory's name). */
  const char* name;
  /* Creates a fresh backend. When |takes_allocator| is true, everything it
   * allocates must come from |allocator|; otherwise |allocator| is ignored
   * and the leak cases are skipped. */
  pw_status_t (*create)(const pw_cts_fixture_t* fixture, pw_allocator_t allocator,
                        pw_backend_t* out_backend);
  bool takes_allocator;
  /* The copy program; NULL: the cases that compile are skipped. */
  pw_cts_program_fn_t copy_program;
  /* Optional (NULL: the collective cases are skipped): the all-reduce. */
  pw_cts_program_fn_t all_reduce_program;
  /* Optional (NULL: the failure cases are skipped): marks |device| FAILED. */
  pw_status_t (*fail_device)(pw_backend_t* backend, uint32_t device);
  /* Optional, NULL-terminated: more programs compile must reject. */
  const char* const* bad_programs;
  /* The run's context (plugin, args). */
  const pw_cts_context_t* ctx;
};

/* Every case takes the fixture. */
#define PW_CTS_BACKEND_CASES(X)        \
  X(vtable_basics)                     \
  X(devices)                           \
  X(compile_deterministic)             \
  X(compile_rejects_garbage)           \
  X(load_unload_round_trip)            \
  X(load_rejects_corrupt)              \
  X(load_rejects_foreign)              \
  X(memory_round_trip)                 \
  X(memory_out_of_range)               \
  X(memory_zero_size)                  \
  X(memory_too_large)                  \
  X(host_pointer)                      \
  X(launch_copy)                       \
  X(launch_rejects_bad_args)           \
  X(launch_concurrent)                 \
  X(launch_from_done)                  \
  X(launch_stress)                     \
  X(collective_all_reduce)             \
  X(collective_many_gangs)             \
  X(collective_refused_part)           \
  X(failed_device)                     \
  X(failed_device_collective)          \
  X(destroy_frees_everything)          \
  X(create_allocation_failures)        \
  X(queued_order)                      \
  X(queued_depth)                      \
  X(queued_failure_mid_queue)          \
  X(queued_deadline)                   \
  X(host_launch_copy)                  \
  X(host_launch_done_once)             \
  X(host_launch_refusals)              \
  X(host_launch_collective)            \
  X(host_launch_queued)                \
  X(host_launch_failed_device)

#define PW_CTS_DECLARE_CASE(name) void pw_cts_case_##name(const pw_cts_fixture_t* fixture);
PW_CTS_BACKEND_CASES(PW_CTS_DECLARE_CASE)
#undef PW_CTS_DECLARE_CASE

/* Another backend's executable for |mesh|, for load_rejects_foreign: the
 * bundled cpu backend's, or the sim's when |name| is "cpu". Returns the
 * other backend's name and fills |*out_bytes| (free with
 * pw_cts_free_bytes), or NULL when none could be made. */
const char* pw_cts_foreign_executable(const char* name, const pw_mesh_shape_t* mesh,
                                      void** out_bytes, size_t* out_size);

/* ------------------------------------------------------------------------
 * Checked calls into the backend's vtable (what the runtime does).
 * ---------------------------------------------------------------------- */

/* OK if |backend| has a vtable of at least PW_BACKEND_VTABLE_SIZE_V1 bytes
 * and a name; INVALID_ARGUMENT naming the problem otherwise. */
pw_status_t pw_cts_backend_check(const pw_backend_t* backend);
const char* pw_cts_backend_name(const pw_backend_t* backend);
bool pw_cts_backend_has(const pw_backend_t* backend, size_t method_offset, size_t method_size);
#define PW_CTS_BACKEND_HAS(backend, method)                            \
  pw_cts_backend_has((backend), offsetof(pw_backend_vtable_t, method), \
                     sizeof(((pw_backend_vtable_t*)0)->method))
void pw_cts_backend_destroy(const pw_backend_t* backend);
uint32_t pw_cts_backend_device_count(const pw_backend_t* backend);
pw_status_t pw_cts_backend_device_info(const pw_backend_t* backend, uint32_t device,
                                       pw_backend_device_info_t* out_info);
pw_device_health_t pw_cts_backend_health(const pw_backend_t* backend, uint32_t device);
pw_status_t pw_cts_backend_compile(const pw_backend_t* backend, const void* program,
                                   size_t program_size, const pw_mesh_shape_t* mesh,
                                   const char* options, pw_allocator_t allocator,
                                   void** out_bytes, size_t* out_size);
pw_status_t pw_cts_backend_load(const pw_backend_t* backend, const void* bytes, size_t size,
                                pw_backend_executable_t* out_executable,
                                pw_executable_signature_t* out_signature);
void pw_cts_backend_unload(const pw_backend_t* backend, pw_backend_executable_t executable);
pw_status_t pw_cts_backend_allocate(const pw_backend_t* backend, uint32_t device, size_t size,
                                    pw_backend_memory_t* out_memory);
void pw_cts_backend_deallocate(const pw_backend_t* backend, uint32_t device,
                               pw_backend_memory_t memory);
pw_status_t pw_cts_backend_launch(const pw_backend_t* backend, const pw_backend_launch_t* launch);
pw_status_t pw_cts_backend_copy_to_device(const pw_backend_t* backend, uint32_t device,
                                          pw_backend_memory_t dst, size_t offset,
                                          const void* src, size_t size);
pw_status_t pw_cts_backend_copy_to_host(const pw_backend_t* backend, uint32_t device,
                                        pw_backend_memory_t src, size_t offset, void* dst,
                                        size_t size);
void* pw_cts_backend_host_pointer(const pw_backend_t* backend, uint32_t device,
                                  pw_backend_memory_t memory);

/* ------------------------------------------------------------------------
 * Helpers shared by the case files (cts_backend_*.c).
 * ---------------------------------------------------------------------- */

/* Creates the fixture's backend (counting allocations in |t| if non-NULL)
 * and checks it passes pw_cts_backend_check. */
void pw_cts_create(const pw_cts_fixture_t* fixture, pw_cts_allocator_t* t,
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
 * the mesh. Release with pw_cts_backend_unload. */
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

#endif /* PW_TOOLS_CTS_CTS_BACKEND_H_ */
