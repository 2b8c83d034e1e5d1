/* Shared by the armed-graph tests (graph_exec_*_test.c). */
#ifndef PW_TESTS_RUNTIME_GRAPH_EXEC_ENV_H_
#define PW_TESTS_RUNTIME_GRAPH_EXEC_ENV_H_

#include <criterion/criterion.h>
#include <stdatomic.h>

#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

#define DEADLINE_NS 10000000000LL

/* "copy" of f32[8] split(0,all). */
extern const char* kCopy8;

/* A fixture on a counting allocator with |slices| 2x4 slices, a vslice on
 * slice 0 (and one on slice 1 when there are two), the copy executable,
 * and graph |g|: x -> copy "a" -> output. |x| holds data 1..8. */
typedef struct env_t {
  pw_test_allocator_t t;
  pw_fixture_t f;
  pw_vslice_t vs, other;
  pw_executable_t copy;
  pw_graph_t g;
  pw_array_spec_t spec;
  pw_buffer_t x;
  float data[8];
} env_t;

void env_init_sched(env_t* e, pw_fixture_backend_t kind, uint32_t slices,
                    pw_sched_policy_t policy, uint32_t window);
void env_init(env_t* e, pw_fixture_backend_t kind, uint32_t slices);
/* Destroys the client and runtime; nothing the runtime allocated is left. */
void env_deinit(env_t* e);
/* Runs every deferred launch of the double. */
void run_all(pw_fixture_t* f);
/* |buf| holds |want| (8 floats). */
void expect8(env_t* e, pw_buffer_t buf, const float* want, const char* what);
/* One armed run of e->g on |x|, waited for; its output holds |want|. */
void armed_run_ok(env_t* e, pw_graph_exec_t* exec, pw_buffer_t x, const float* want);
/* The same through pw_graph_submit of |g|. */
void handle_run_ok(env_t* e, pw_graph_t g, pw_buffer_t x, const float* want);
/* White box (to prove a test reaches its path): armed blocks of |exec|
 * that exist and are not free. */
int private_busy(pw_graph_exec_t* exec);

/* pw_graph_exec_destroy on a thread of its own (destroy_thread), and
 * whether it returned. */
typedef struct destroyer_t {
  pw_graph_exec_t* exec;
  atomic_bool returned;
} destroyer_t;

void* destroy_thread(void* arg);
void sleep_ms(int ms);
/* Waits up to |ms| for |d| to return; true if it did. */
bool returned_within(destroyer_t* d, int ms);

#endif /* PW_TESTS_RUNTIME_GRAPH_EXEC_ENV_H_ */
