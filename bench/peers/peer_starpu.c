/* pw-bench-starpu: StarPU tasks on the shapes of bench/shapes.h.
 *
 * StarPU runs tasks on T CPU workers (conf.ncpus = T; no CUDA/OpenCL); the
 * calling thread submits and waits (starpu_task_wait_for_all), as a StarPU
 * application does. The scheduler is StarPU's default unless STARPU_SCHED
 * says otherwise. A graph is one starpu_task per shape task (destroy = 0,
 * so it can be submitted again), with its dependences declared once by
 * starpu_task_declare_deps_array; a run submits every task in order and
 * waits. spawn has no graph: each run creates and submits one task per
 * shape task (starpu_task_create, destroyed by StarPU when done). Tasks
 * carry no data handles: StarPU's data management is not exercised. */
#define _GNU_SOURCE
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>

#include "../shapes.h"

typedef struct pw_starpu_arg_t {
  const pw_bench_work_t* work;
  uint32_t task;
} pw_starpu_arg_t;

typedef struct pw_starpu_graph_t {
  const pw_bench_dag_t* dag;
  pw_bench_work_t work;
  pw_starpu_arg_t* args;
  struct starpu_task** tasks;
  uint32_t built;
} pw_starpu_graph_t;

static void pw_starpu_body(void* buffers[], void* cl_arg) {
  (void)buffers;
  const pw_starpu_arg_t* a = cl_arg;
  pw_bench_task(a->work, a->task);
}

static struct starpu_codelet pw_starpu_codelet = {
    .where = STARPU_CPU,
    .cpu_funcs = {pw_starpu_body},
    .nbuffers = 0,
    .name = "pw_bench_task",
};

static int pw_starpu_started;

static void* pw_starpu_open(uint32_t threads) {
  setenv("STARPU_SILENT", "1", 0);
  struct starpu_conf conf;
  if (starpu_conf_init(&conf) != 0) return NULL;
  conf.ncpus = (int)threads;
  conf.ncuda = 0;
  conf.nopencl = 0;
  int rc = starpu_init(&conf);
  if (rc != 0) {
    fprintf(stderr, "starpu: starpu_init failed (%d)\n", rc);
    return NULL;
  }
  pw_starpu_started = 1;
  if ((uint32_t)starpu_cpu_worker_get_count() != threads) {
    fprintf(stderr, "starpu: asked for %u CPU workers, got %d\n", threads,
            starpu_cpu_worker_get_count());
  }
  return &pw_starpu_started;
}

static void pw_starpu_close(void* rt) {
  (void)rt;
  starpu_shutdown();
  pw_starpu_started = 0;
}

static void pw_starpu_destroy(void* rt, void* graph) {
  (void)rt;
  pw_starpu_graph_t* g = graph;
  starpu_task_wait_for_all();
  for (uint32_t i = 0; i < g->built; ++i) starpu_task_destroy(g->tasks[i]);
  free(g->tasks);
  free(g->args);
  free(g);
}

static void* pw_starpu_prepare(void* rt, const pw_bench_dag_t* dag,
                               const pw_bench_work_t* work, pw_bench_counts_t* counts) {
  (void)rt;
  (void)counts;
  pw_starpu_graph_t* g = calloc(1, sizeof(*g));
  if (g == NULL) return NULL;
  g->dag = dag;
  g->work = *work;
  size_t n = dag->tasks ? dag->tasks : 1;
  g->args = calloc(n, sizeof(*g->args));
  g->tasks = calloc(n, sizeof(*g->tasks));
  if (g->args == NULL || g->tasks == NULL) {
    pw_starpu_destroy(rt, g);
    return NULL;
  }
  for (uint32_t i = 0; i < dag->tasks; ++i) {
    g->args[i].work = &g->work;
    g->args[i].task = i;
  }
  return g;
}

static int pw_starpu_build(void* rt, void* graph) {
  (void)rt;
  pw_starpu_graph_t* g = graph;
  const pw_bench_dag_t* dag = g->dag;
  if (dag->independent) return 0;
  struct starpu_task* deps[64];
  for (uint32_t i = 0; i < dag->tasks; ++i) {
    struct starpu_task* t = starpu_task_create();
    if (t == NULL) return -1;
    t->cl = &pw_starpu_codelet;
    t->cl_arg = &g->args[i];
    t->destroy = 0;
    t->detach = 1;
    g->tasks[i] = t;
    g->built = i + 1;
    uint32_t b = dag->pred_begin[i], e = dag->pred_begin[i + 1];
    if (e - b > 64) return -1;
    for (uint32_t k = b; k < e; ++k) deps[k - b] = g->tasks[dag->preds[k]];
    if (e > b) starpu_task_declare_deps_array(t, e - b, deps);
  }
  return 0;
}

static int pw_starpu_run(void* rt, void* graph) {
  (void)rt;
  pw_starpu_graph_t* g = graph;
  const pw_bench_dag_t* dag = g->dag;
  if (dag->independent) {
    for (uint32_t i = 0; i < dag->tasks; ++i) {
      struct starpu_task* t = starpu_task_create();
      if (t == NULL) return -1;
      t->cl = &pw_starpu_codelet;
      t->cl_arg = &g->args[i];
      if (starpu_task_submit(t) != 0) return -1;
    }
  } else {
    for (uint32_t i = 0; i < dag->tasks; ++i) {
      if (starpu_task_submit(g->tasks[i]) != 0) {
        fprintf(stderr, "starpu: submit of task %u failed\n", i);
        return -1;
      }
    }
  }
  return starpu_task_wait_for_all() == 0 ? 0 : -1;
}

static const pw_bench_runtime_t pw_starpu_runtime = {
    .name = "starpu",
    .open = pw_starpu_open,
    .close = pw_starpu_close,
    .prepare = pw_starpu_prepare,
    .build = pw_starpu_build,
    .run = pw_starpu_run,
    .latency = NULL,
    .verify = NULL,
    .destroy = pw_starpu_destroy,
    .stamps = true,
};

int main(int argc, char** argv) {
  return pw_bench_shapes_main(argc - 1, argv + 1, &pw_starpu_runtime);
}
