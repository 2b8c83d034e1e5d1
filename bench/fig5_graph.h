/* The Pathways paper's Fig. 5 computation, shared by `pw-bench fig5`
 * (suite_fig5.c: one slice of up to 16,384 sim devices in process) and
 * `pw-bench remote` (suite_remote.c: slices of 8 sim devices in
 * pathways-worker processes against the same slices in process).
 *
 * One computation is a scalar all-reduce then a scalar add over a slice
 * of D chips (f32[D] split(0,0): one f32 per chip), each |kernel_ns| of
 * virtual time; "fused" is one gang op doing N computations (an
 * all_reduce_sum of 2 x N x the kernel time). */
#ifndef PW_BENCH_FIG5_GRAPH_H_
#define PW_BENCH_FIG5_GRAPH_H_

#include <stdbool.h>
#include <stdint.h>

#include "pathways/pathways.h"

typedef struct pw_fig5_exes_s {
  pw_executable_t reduce, add, fused;
} pw_fig5_exes_t;

/* f32[devices] split(0,0): the computation's one value per chip. */
pw_array_spec_t pw_fig5_spec(uint32_t devices);

/* Compiles the three executables on |vs| (|devices| chips): the sim's
 * program text, or with |noop| the test double's no-op text. |suite|
 * names the caller in messages. 0 or -1 (printed). */
int pw_fig5_compile_all(const char* suite, pw_client_t* c, pw_vslice_t vs, bool noop,
                        uint32_t devices, uint64_t kernel_ns, uint32_t computations,
                        pw_fig5_exes_t* out);

/* Releases what pw_fig5_compile_all made (ids 0 skipped). */
int pw_fig5_release_all(const char* suite, pw_client_t* c, pw_fig5_exes_t* exes);

/* Adds |count| computations after |from| to |g| on |vs| (fused: one
 * fused op); |*out_node| is the last node. */
int pw_fig5_add_chain(const char* suite, pw_client_t* c, pw_graph_t g, pw_vslice_t vs,
                      const pw_fig5_exes_t* exes, uint32_t count, bool fused, uint32_t from,
                      uint32_t* out_node);

#endif /* PW_BENCH_FIG5_GRAPH_H_ */
