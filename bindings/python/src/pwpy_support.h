/* C support code of the Python module (pathways._ffi): a counting allocator
 * for memory statistics and leak checks, and a varargs-free status maker
 * for callbacks written in Python. Declared again for cffi in
 * ../pathways_cdef.h. Uses only the public headers. */
#ifndef PATHWAYS_PYTHON_SUPPORT_H_
#define PATHWAYS_PYTHON_SUPPORT_H_

#include "pathways/pathways.h"

typedef struct pwpy_counting_allocator_s pwpy_counting_allocator_t;

typedef struct pwpy_memory_stats_t {
  int64_t live_blocks;        /* allocated and not yet freed */
  int64_t live_bytes;
  int64_t peak_bytes;         /* highest live_bytes seen */
  int64_t allocations;        /* successful allocations, ever */
  int64_t failed_allocations;
  int64_t mismatched_frees;   /* frees whose size differs from the alloc's */
} pwpy_memory_stats_t;

/* Creates a counter (NULL if malloc fails). Destroy drops the creator's
 * reference; the counter itself is freed once every block allocated
 * through it has been freed too (which may be later, from any thread).
 * Nothing may allocate through it, nor read its stats, after destroy. */
pwpy_counting_allocator_t* pwpy_counting_allocator_create(void);
void pwpy_counting_allocator_destroy(pwpy_counting_allocator_t* counter);

/* An allocator that counts into |counter| and allocates from the system
 * allocator. Thread-safe. */
pw_allocator_t pwpy_counting_allocator_get(pwpy_counting_allocator_t* counter);

/* A consistent-enough snapshot of the counters (each read atomically). */
void pwpy_counting_allocator_stats(const pwpy_counting_allocator_t* counter,
                                   pwpy_memory_stats_t* out_stats);

/* pw_status_make(|code|, "%s", |message|): callable without varargs.
 * PW_STATUS_OK gives UNKNOWN (an error is always an error). */
pw_status_t pwpy_status_make(pw_status_code_t code, const char* message);

/* Destroys a backend the runtime was not handed (one made for a runtime
 * whose creation then stopped before pw_runtime_create): its vtable's
 * destroy. A zero backend is a no-op. */
void pwpy_backend_destroy(pw_backend_t backend);

#endif /* PATHWAYS_PYTHON_SUPPORT_H_ */
