/* Helpers for the CPU backend tests: a done-callback counter with a
 * deadline, host-side sharding, and "run this program over a mesh" that
 * scatters global host arrays to device shards, launches every device,
 * waits, and gathers the outputs back (checking that replicas agree). They
 * use only the public API, as a host would. */
#ifndef PW_TESTS_BACKENDS_CPU_CPU_TEST_SUPPORT_H_
#define PW_TESTS_BACKENDS_CPU_CPU_TEST_SUPPORT_H_

#include <pthread.h>

#include "pathways/backends/cpu.h"
#include "pathways/pathways.h"

/* Counts done callbacks; keeps the first error. */
typedef struct cpu_waiter_t {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  uint32_t expected;
  uint32_t calls;
  uint32_t errors;
  pw_status_t first_error;
} cpu_waiter_t;

void cpu_waiter_init(cpu_waiter_t* waiter, uint32_t expected);
/* A pw_backend_done_fn_t; |user| is the waiter. */
void cpu_waiter_done(void* user, pw_status_t status);
/* Waits until |expected| calls arrived or |timeout_ms| passed; true if all
 * arrived. */
bool cpu_waiter_wait(cpu_waiter_t* waiter, int timeout_ms);
/* Takes the first error (the caller owns it). */
pw_status_t cpu_waiter_take_error(cpu_waiter_t* waiter);
void cpu_waiter_destroy(cpu_waiter_t* waiter);

/* pw_cpu_backend_create with these options (0 = default). */
pw_status_t cpu_create(pw_allocator_t allocator, uint32_t devices, uint32_t workers,
                       uint64_t capacity, pw_backend_t* out_backend);
void cpu_destroy(pw_backend_t backend);

/* compile + load of NUL-terminated |text|. */
pw_status_t cpu_load_text(pw_backend_t backend, const char* text,
                          const pw_mesh_shape_t* mesh,
                          pw_backend_executable_t* out_executable,
                          pw_executable_signature_t* out_signature);

/* Copies device |mesh_index|'s block of a global array between |global|
 * and |shard| (to_shard: global -> shard). */
void cpu_shard_copy(bool to_shard, void* global, void* shard, pw_dtype_t dtype,
                    const pw_shape_t* shape, const pw_sharding_t* sharding,
                    const pw_mesh_shape_t* mesh, uint32_t mesh_index);

/* Runs |executable| once on |devices| (NULL: 0..G-1) with global host
 * |inputs|, filling global host |outputs|. Returns the first error of any
 * step (a done error included); INTERNAL if the run does not finish within
 * 20 s or replicas disagree. */
pw_status_t cpu_run(pw_backend_t backend, pw_backend_executable_t executable,
                    const pw_executable_signature_t* signature,
                    const uint32_t* devices, uint64_t gang_id,
                    const void* const* inputs, void* const* outputs);

/* cpu_load_text + cpu_run + unload. */
pw_status_t cpu_run_text(pw_backend_t backend, const char* text,
                         const pw_mesh_shape_t* mesh, const void* const* inputs,
                         void* const* outputs);

/* Deterministic pseudo-random floats in [-1, 1). */
void cpu_random_fill(uint64_t* state, float* out, size_t n);
void cpu_random_fill_f64(uint64_t* state, double* out, size_t n);

/* "f32[2,3]" style element count of a param. */
size_t cpu_param_bytes(const pw_backend_param_t* param);

#endif /* PW_TESTS_BACKENDS_CPU_CPU_TEST_SUPPORT_H_ */
