/* Helpers for the sim backend tests: direct launches with recorded
 * completions, a trace recorder, and a runtime over a sim fleet (one
 * physical slice per sim slice, one virtual slice each for one client). */
#ifndef PW_TESTS_BACKENDS_SIM_SIM_TEST_SUPPORT_H_
#define PW_TESTS_BACKENDS_SIM_SIM_TEST_SUPPORT_H_

#include <pthread.h>
#include <stdatomic.h>

#include "pathways/backends/sim.h"
#include "pathways/pathways.h"

/* Fails the current test (Criterion or stress) with |what| and the status
 * text unless |status| is OK; frees it. Set by the including test. */
void pw_sim_test_fail(const char* what, const char* detail);
#define PW_SIM_OK(expr) pw_sim_test_expect_ok((expr), #expr)
void pw_sim_test_expect_ok(pw_status_t status, const char* what);

/* --- Recorded completions of direct launches. --- */

typedef struct pw_sim_done_t {
  _Atomic uint32_t calls;
  _Atomic int code;
  char message[256];
} pw_sim_done_t;

/* A done callback; |user| is a pw_sim_done_t. Keeps the first status. */
void pw_sim_test_done(void* user, pw_status_t status);

/* A launch descriptor kept alive until done. */
typedef struct pw_sim_launch_t {
  pw_backend_launch_t launch;
  uint32_t group[64];
  pw_backend_memory_t inputs[4];
  pw_backend_memory_t outputs[4];
  pw_sim_done_t done;
} pw_sim_launch_t;

/* Fills |l| for |executable| on |device| at mesh position |mesh_index| of a
 * gang over |group| (|group_size| ordinals, at most 64), with |inputs| and
 * |outputs| (at most 4 each; may be NULL when the count is 0). */
void pw_sim_test_describe(pw_sim_launch_t* l, pw_backend_executable_t executable,
                          uint32_t device, uint32_t mesh_index, const uint32_t* group,
                          uint32_t group_size, uint64_t gang_id,
                          const pw_backend_memory_t* inputs, uint32_t input_count,
                          const pw_backend_memory_t* outputs, uint32_t output_count);

/* Compiles |text| for a 1-D mesh of |devices| and loads it. */
pw_backend_executable_t pw_sim_test_load(pw_backend_t backend, const char* text,
                                         uint32_t devices);

/* --- Trace recorder (pw_sim_backend_options_t.trace). --- */

typedef struct pw_sim_trace_t {
  pthread_mutex_t mutex;
  pw_sim_event_t events[512];
  size_t count;    /* recorded (at most 512) */
  size_t total;    /* seen */
} pw_sim_trace_t;

void pw_sim_trace_init(pw_sim_trace_t* trace);
void pw_sim_trace_fn(void* user, const pw_sim_event_t* event);
/* The |index|th recorded event on |device| (in completion order), or NULL. */
const pw_sim_event_t* pw_sim_trace_find(pw_sim_trace_t* trace, uint32_t device, size_t index);

/* --- A runtime over a sim fleet. --- */

typedef struct pw_sim_fleet_t {
  pw_runtime_t* runtime;
  pw_client_t* client;
  pw_backend_t backend;  /* a copy; the runtime owns the backend */
  uint32_t slices;
  uint32_t per_slice;
  pw_vslice_t* vslices;  /* one per slice, vslices[s] bound to slice s */
} pw_sim_fleet_t;

/* Creates the backend from |options| (|allocator| overrides its
 * allocator), a runtime with one 1-D slice per sim slice, a client and its
 * virtual slices. On error everything made is freed. */
pw_status_t pw_sim_fleet_init(pw_sim_fleet_t* fleet, const pw_sim_backend_options_t* options,
                              pw_allocator_t allocator);
void pw_sim_fleet_deinit(pw_sim_fleet_t* fleet);

/* A graph of one compute node running |executable| (no parameters) on
 * the virtual slice of |slice|. */
pw_status_t pw_sim_fleet_step_graph(pw_sim_fleet_t* fleet, uint32_t slice,
                                    pw_executable_t executable, pw_graph_t* out_graph);

#endif /* PW_TESTS_BACKENDS_SIM_SIM_TEST_SUPPORT_H_ */
