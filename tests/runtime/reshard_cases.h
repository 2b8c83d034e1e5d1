/* Seeded random resharding cases and their checks, shared by the
 * Criterion suite (reshard_random_test.c) and the seed driver
 * (reshard_seeds.c). A case is a source and a destination array spec over
 * their meshes (shape rank 1-4 with every split dimension divisible, mesh
 * rank 1-3 of 2, 4, 6 or 8 devices, shardings REPLICATED / SPLIT /
 * SPLIT-all / TILED with random ordered tiles, sources unreduced over
 * random axes, destinations keeping a subset of them on the same mesh).
 *
 * Values: the global array's element e is e + 1; a source unreduced over
 * P partial sums holds, on a device of partial p > 0, a small r(p, e),
 * and on partial 0 the rest, so the partial sums add up to e + 1. */
#ifndef PW_TESTS_RUNTIME_RESHARD_CASES_H_
#define PW_TESTS_RUNTIME_RESHARD_CASES_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/plan.h"
#include "pathways/types.h"

/* Where the destination lives relative to the source. */
enum {
  RESHARD_SAME_SLICE = 0,      /* the same physical slice (maybe another mesh) */
  RESHARD_OTHER_SLICE = 1,     /* another slice of the same device count */
  RESHARD_OTHER_COUNT = 2,     /* a slice of another device count */
};

typedef struct reshard_case_t {
  uint64_t seed;
  uint32_t placement;          /* RESHARD_* */
  pw_mesh_shape_t src_mesh;
  pw_mesh_shape_t dst_mesh;
  pw_array_spec_t src;
  pw_array_spec_t dst;
} reshard_case_t;

/* The case of |seed|; |unreduced|: sources may hold partial sums. */
void reshard_case_make(uint64_t seed, bool unreduced, reshard_case_t* out);

/* "seed 12: f32[4,8] P(0, 1) over 2x4 -> replicated over 8 (other slice)". */
void reshard_case_describe(const reshard_case_t* c, char* buffer, size_t capacity);

/* Element |e| of the partial sum |p| of |partials| (the global value when
 * partials is 1). */
int64_t reshard_value(int64_t e, uint32_t p, uint32_t partials);

/* Writes source device |i|'s shard (its block, its partial sum) as
 * c->src.dtype into |out| (the shard's bytes). */
void reshard_source_shard(const reshard_case_t* c, uint32_t i, void* out);

/* Writes what destination device |j|'s shard must hold into |out|. */
void reshard_expected_shard(const reshard_case_t* c, uint32_t j, void* out);

/* Checks a plan for |c| (pw__reshard_plan's outputs) without running it:
 * every record inside its shards, every destination byte of every
 * scratch slot written exactly once (so the bytes moved are the minimum:
 * destination devices x shard bytes x |reduce|), |reduce| the partial
 * sums each destination element adds, records of one (source,
 * destination) pair only when the region needed more levels than a
 * record has; then executes it on host copies of the shards (copies,
 * then the scratch slots added in) and compares every destination
 * device's shard with reshard_expected_shard. false with |why| filled on
 * the first problem. */
bool reshard_plan_check(const reshard_case_t* c, const pw_plan_copy_t* copies, uint32_t count,
                        const uint32_t* start, uint32_t reduce, char* why, size_t why_size);

/* Runs pw__reshard_plan for |c| and reshard_plan_check on it. */
bool reshard_plan_run(const reshard_case_t* c, char* why, size_t why_size);

#endif /* PW_TESTS_RUNTIME_RESHARD_CASES_H_ */
