/* pw-bench-openmp: OpenMP tasks on the shapes of bench/shapes.h.
 *
 * A run is a parallel region of T threads (libgomp keeps its pool between
 * regions) in which one thread creates a task per shape task, with
 * depend(in:) on its predecessors' slots and depend(out:) on its own; the
 * region's closing barrier waits for them all. OpenMP has no graph to
 * build ahead of a run (build_ns is null) and no way to rerun one: every
 * run creates its tasks again, so first_ns and rerun_ns differ only by
 * warm-up. spawn creates tasks without dependences. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "../shapes.h"

typedef struct pw_omp_rt_t {
  int threads;
} pw_omp_rt_t;

typedef struct pw_omp_graph_t {
  const pw_bench_dag_t* dag;
  pw_bench_work_t work;
  char* slots; /* one dependence address per task */
} pw_omp_graph_t;

static void* pw_omp_open(uint32_t threads) {
  pw_omp_rt_t* rt = calloc(1, sizeof(*rt));
  if (rt == NULL) return NULL;
  rt->threads = (int)threads;
  omp_set_dynamic(0);
  return rt;
}

static void pw_omp_close(void* rt) { free(rt); }

static void* pw_omp_prepare(void* rt, const pw_bench_dag_t* dag, const pw_bench_work_t* work,
                            pw_bench_counts_t* counts) {
  (void)rt;
  (void)counts;
  pw_omp_graph_t* g = calloc(1, sizeof(*g));
  if (g == NULL) return NULL;
  g->dag = dag;
  g->work = *work;
  g->slots = calloc(dag->tasks ? dag->tasks : 1, 1);
  if (g->slots == NULL) {
    free(g);
    return NULL;
  }
  return g;
}

static void pw_omp_spawn_tasks(pw_omp_graph_t* g) {
  const pw_bench_work_t* work = &g->work;
  uint32_t n = g->dag->tasks;
  for (uint32_t i = 0; i < n; ++i) {
#pragma omp task firstprivate(i) shared(work)
    pw_bench_task(work, i);
  }
}

static void pw_omp_dag_tasks(pw_omp_graph_t* g) {
  const pw_bench_dag_t* dag = g->dag;
  const pw_bench_work_t* work = &g->work;
  char* slots = g->slots;
  (void)slots;
  for (uint32_t i = 0; i < dag->tasks; ++i) {
    const uint32_t* p = dag->preds + dag->pred_begin[i];
    int n = (int)(dag->pred_begin[i + 1] - dag->pred_begin[i]);
    (void)n; /* gcc 12 does not count uses inside depend(iterator(...)) */
#pragma omp task firstprivate(i) shared(work) \
    depend(iterator(j = 0 : n), in : slots[p[j]]) depend(out : slots[i])
    pw_bench_task(work, i);
  }
}

static int pw_omp_run(void* rt, void* graph) {
  pw_omp_rt_t* r = rt;
  pw_omp_graph_t* g = graph;
#pragma omp parallel num_threads(r->threads)
#pragma omp single
  {
    if (g->dag->independent) {
      pw_omp_spawn_tasks(g);
    } else {
      pw_omp_dag_tasks(g);
    }
  }
  return 0;
}

static void pw_omp_destroy(void* rt, void* graph) {
  (void)rt;
  pw_omp_graph_t* g = graph;
  free(g->slots);
  free(g);
}

static const pw_bench_runtime_t pw_omp_runtime = {
    .name = "openmp",
    .open = pw_omp_open,
    .close = pw_omp_close,
    .prepare = pw_omp_prepare,
    .build = NULL,
    .run = pw_omp_run,
    .latency = NULL,
    .verify = NULL,
    .destroy = pw_omp_destroy,
    .stamps = true,
};

int main(int argc, char** argv) {
  return pw_bench_shapes_main(argc - 1, argv + 1, &pw_omp_runtime);
}
