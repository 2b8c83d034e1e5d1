/* The task shapes of `pw-bench shapes` and of the peer drivers
 * (bench/peers/): one generator and one measuring harness, shared by every
 * driver, so that every runtime runs identical work and is measured the
 * same way.
 *
 * SHAPES (full size; --quick and --scale shrink them). Tasks are numbered in
 * a topological order: every predecessor of task i is < i.
 *   chain     100,000 tasks, each depending on the one before.
 *   fan       one root, 100,000 independent tasks on it, then a join. The
 *             join is a 16-ary tree (6,669 join tasks) because a libpathways
 *             compute node takes at most PW_BACKEND_MAX_PARAMS = 16 inputs;
 *             every driver runs the same tree.
 *   layered   1,000 layers x 100 tasks; a task of layer l > 0 depends on 1-4
 *             distinct random tasks of layer l - 1 (fixed seed).
 *   spmd      3,000 steps; a step is 32 tasks (4 slices x 8 devices), each
 *             depending on the previous step's barrier task, and a barrier
 *             task depending on the 32.
 *   pipeline  16 stages x 3,125 microbatches: compute(s, m) depends on
 *             compute(s, m - 1) (a stage runs its microbatches in order) and
 *             on transfer(s - 1, m); transfer(s, m) depends on compute(s, m).
 *   spawn     100,000 independent tasks submitted one by one (no graph).
 *   one       a one-task graph (latency).
 *   step      one spmd step with a root: root, 32 tasks, barrier (34 tasks,
 *             latency).
 *
 * TASK BODY: a calibrated spin (0 by default: the tasks are empty), the
 * same loop for every driver; METG(50%) reruns a shape with spins of
 * 0.25-10 us and reports the smallest spin that keeps half the ideal
 * throughput.
 *
 * This header is C and C++ (the oneTBB driver is C++). */
#ifndef PW_BENCH_SHAPES_H_
#define PW_BENCH_SHAPES_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pw_bench_shape_kind_e {
  PW_BENCH_SHAPE_CHAIN = 0,
  PW_BENCH_SHAPE_FAN,
  PW_BENCH_SHAPE_LAYERED,
  PW_BENCH_SHAPE_SPMD,
  PW_BENCH_SHAPE_PIPELINE,
  PW_BENCH_SHAPE_SPAWN,
  PW_BENCH_SHAPE_ONE,
  PW_BENCH_SHAPE_STEP,
  PW_BENCH_SHAPE_COUNT
} pw_bench_shape_kind_t;

/* Fan-in of the fan shape's join tree (= PW_BACKEND_MAX_PARAMS). */
#define PW_BENCH_FAN_JOIN_ARITY 16u
/* Seed of the layered shape's random edges. */
#define PW_BENCH_LAYERED_SEED 0x5eed5eedu

/* What a task is, for drivers that map roles onto their own notions
 * (libpathways maps spmd steps onto gang ops). */
typedef enum pw_bench_task_role_e {
  PW_BENCH_ROLE_TASK = 0,
  PW_BENCH_ROLE_TRANSFER = 1,
  PW_BENCH_ROLE_JOIN = 2, /* fan join, spmd barrier */
  PW_BENCH_ROLE_ROOT = 3,
} pw_bench_task_role_t;

/* A generated shape: a DAG in compressed sparse rows of predecessors. */
typedef struct pw_bench_dag_t {
  pw_bench_shape_kind_t kind;
  const char* name;
  double scale;         /* as given to pw_bench_dag_make */
  uint32_t tasks;
  uint64_t edges;
  uint32_t* pred_begin; /* tasks + 1 entries */
  uint32_t* preds;      /* edges entries; preds of i: [pred_begin[i], pred_begin[i+1]) */
  uint8_t* role;        /* tasks entries (pw_bench_task_role_t) */
  uint32_t max_preds;
  bool independent;     /* spawn: tasks are submitted one by one, no graph */
  /* Geometry, for drivers that need it (0 when it does not apply). */
  uint32_t layers, width;              /* layered */
  uint32_t steps, slices, devices;     /* spmd, step: devices per slice */
  uint32_t stages, microbatches;       /* pipeline */
} pw_bench_dag_t;

/* "chain", ..., "step"; NULL for a bad kind. */
const char* pw_bench_shape_name(pw_bench_shape_kind_t kind);
/* Parses a name; false if unknown. */
bool pw_bench_shape_parse(const char* name, pw_bench_shape_kind_t* out_kind);

/* Generates |kind| at |scale| (1.0 = the sizes above; sizes are rounded
 * and at least 1; one and step do not scale). Returns 0, or -1 when memory
 * runs out (|dag| is then empty). Deterministic. */
int pw_bench_dag_make(pw_bench_dag_t* dag, pw_bench_shape_kind_t kind, double scale);
void pw_bench_dag_free(pw_bench_dag_t* dag);

/* ---- task body ---------------------------------------------------------- */

/* A spin of |iters| iterations of a dependent multiply-add chain; the
 * compiler cannot drop it and it touches no memory. */
static inline uint64_t pw_bench_spin(uint64_t iters) {
  uint64_t x = iters | 1u;
  for (uint64_t i = 0; i < iters; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    __asm__ volatile("" : "+r"(x));
  }
  return x;
}

/* Iterations of pw_bench_spin per nanosecond on this machine, measured
 * once (best of several 5 ms runs) and cached. */
double pw_bench_spin_per_ns(void);
/* Iterations that take |ns| nanoseconds. */
uint64_t pw_bench_spin_iters(double ns);

/* Optional verification of a run: every task stamps a global sequence
 * number; pw_bench_check_verify then checks that every task ran once,
 * after all its predecessors. Atomic builtins, so C and C++ share it. */
typedef struct pw_bench_check_t {
  uint64_t counter;
  uint64_t* stamp; /* tasks entries, zeroed */
  uint32_t tasks;
} pw_bench_check_t;

/* What every task of a driver does: spin, then stamp if checking. */
typedef struct pw_bench_work_t {
  uint64_t spin_iters;
  pw_bench_check_t* check; /* NULL: no verification */
} pw_bench_work_t;

static inline void pw_bench_task(const pw_bench_work_t* work, uint32_t task) {
  if (work->spin_iters) (void)pw_bench_spin(work->spin_iters);
  if (work->check != NULL) {
    uint64_t seq = __atomic_add_fetch(&work->check->counter, 1, __ATOMIC_ACQ_REL);
    __atomic_store_n(&work->check->stamp[task], seq, __ATOMIC_RELEASE);
  }
}

int pw_bench_check_init(pw_bench_check_t* check, uint32_t tasks);
void pw_bench_check_reset(pw_bench_check_t* check);
void pw_bench_check_free(pw_bench_check_t* check);
/* 0 if the run was correct for |dag|; otherwise prints the first problem
 * on stderr (prefixed with |who|) and returns -1. */
int pw_bench_check_verify(const pw_bench_check_t* check, const pw_bench_dag_t* dag,
                          const char* who);

/* ---- harness ------------------------------------------------------------ *
 *
 * Per shape: build (timed), a first run (timed), then timed reruns; the
 * rerun figure is the median over reps of the rep's time divided by the
 * runs in it and the task count. A rep of chain ... spawn is one run. A
 * run of one or step takes 0.1-2 us, so timing one run would mostly time
 * the clock and the driver's per-call overhead: a rep of those two is
 * |n| back-to-back runs (run_n, or |run| in a loop), n calibrated per
 * runtime, thread count and shape before the timed reps (untimed batches,
 * growing until one lasts at least 10 us, then n set so that a rep lasts
 * about 20 us; 1 <= n <= 4096). Every runtime, peers included, is
 * measured this way; "runs_per_rep" reports n. The p50/p99 latency of one
 * and step stays one run per sample. */

/* Task and edge counts a driver actually ran (it may split a shape into
 * parts, one per thread; see suite_shapes.c). */
typedef struct pw_bench_counts_t {
  uint64_t tasks;
  uint64_t edges;
  const char* note; /* static text for the JSON "note" field, or NULL */
} pw_bench_counts_t;

/* One runtime under test. Every method but the optional ones is required.
 * Return values: 0 = OK; anything else = failure (the method prints why). */
typedef struct pw_bench_runtime_t {
  const char* name; /* "libpathways", "onetbb", "starpu", "openmp" */
  /* Starts the runtime with |threads| threads. */
  void* (*open)(uint32_t threads);
  void (*close)(void* rt);
  /* Untimed set-up for |dag| (containers, for libpathways a runtime with
   * the slices the shape needs and its executables). May adjust |counts|. */
  void* (*prepare)(void* rt, const pw_bench_dag_t* dag, const pw_bench_work_t* work,
                   pw_bench_counts_t* counts);
  /* Timed: builds the graph (nodes, edges, finalize). NULL when the runtime
   * builds nothing ahead of a run (OpenMP tasks); build_ns is then null. */
  int (*build)(void* rt, void* graph);
  /* Runs the built graph once and waits for it. */
  int (*run)(void* rt, void* graph);
  /* Optional: runs the built graph |n| times back to back, each run waited
   * for before the next starts (a driver that splits the shape into parts,
   * one per thread, may let each part go on to its next run on its own),
   * for a timed rep of one or step (see "harness" above) and once, n = 3,
   * in the verified run. NULL: the harness calls |run| |n| times. A
   * driver provides it only to keep its own per-call overhead, not the
   * runtime's, out of the loop (libpathways at T > 1 hands work to its
   * helper threads once per call, not once per run). */
  int (*run_n)(void* rt, void* graph, uint32_t n);
  /* Optional: |n| latency samples (microseconds) of one run each; the
   * harness times |run| calls when NULL. */
  int (*latency)(void* rt, void* graph, uint32_t n, double* out_us);
  /* Optional: checks a run made with work->check set, beyond the stamps
   * (libpathways cannot stamp: it counts launches); called after |run| and
   * after run_n's batch, so it must count the runs since its last call. */
  int (*verify)(void* rt, void* graph);
  void (*destroy)(void* rt, void* graph);
  /* The task body stamps work->check (false: call verify instead). */
  bool stamps;
} pw_bench_runtime_t;

/* The driver program: parses the options below, runs every selected shape
 * at every thread count, prints one JSON object per result on stdout and a
 * table on stderr. Returns a process exit status.
 *   --threads LIST    comma-separated thread counts (default 1,2)
 *   --shape LIST      comma-separated shapes, or "all" (default)
 *   --reps R          timed reps per shape (default 7; the median is kept;
 *                     a rep of one or step is n runs, see above)
 *   --latency-samples N   samples for one and step (default 2000)
 *   --scale X         size factor (default 1)
 *   --quick           scale 0.02, 3 reps, 200 samples, small METG: a smoke run
 *   --no-metg / --metg-only   skip METG / only METG
 *   --no-check        skip the verified run (a small instance of each shape,
 *                     run twice, checked) that precedes the timed ones
 *   --time-budget S   a shape whose first run is slow gets fewer timed reps
 *                     (at least 1) so that they take about S s (default 60);
 *                     "reps" and "note" then say so
 * JSON fields: bench ("shapes"), runtime, shape, threads, tasks, edges,
 * build_ns, first_ns, rerun_ns (per task and run), p50_us, p99_us, metg_us,
 * reps, runs_per_rep (n above; 1 but for one and step), note; null when not
 * measured. */
int pw_bench_shapes_main(int argc, char** argv, const pw_bench_runtime_t* runtime);

#ifdef __cplusplus
}
#endif

#endif /* PW_BENCH_SHAPES_H_ */
