/* pw-bench dag: prints a shape of bench/shapes.h as JSON, so that drivers
 * outside C (bench/peers/pw_bench_dask.py) run exactly the DAG the C
 * drivers run: the same generator, seed and scale.
 *
 *   pw-bench dag --shape NAME [--scale X]
 *
 * Output: one JSON object on stdout, {"bench": "dag", "shape", "scale",
 * "tasks", "edges", "independent", "role": [tasks], "pred_begin": [tasks +
 * 1], "preds": [edges]} (see pw_bench_dag_t). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "shapes.h"
#include "suites.h"

static void pw_dag_print_u32s(const char* name, const uint32_t* v, uint64_t n) {
  printf(",\"%s\":[", name);
  for (uint64_t i = 0; i < n; ++i) printf(i ? ",%u" : "%u", v[i]);
  printf("]");
}

static int pw_bench_suite_dag(int argc, char** argv) {
  const char* name = pw_bench_opt_value(argc, argv, "shape");
  pw_bench_shape_kind_t kind;
  if (name == NULL || !pw_bench_shape_parse(name, &kind)) {
    fprintf(stderr, "pw-bench dag: --shape expects one of chain fan layered spmd pipeline "
                    "spawn one step, got '%s'\n", name ? name : "(none)");
    return 2;
  }
  double scale = 1.0;
  const char* s = pw_bench_opt_value(argc, argv, "scale");
  if (s != NULL) {
    char* end = NULL;
    scale = strtod(s, &end);
    if (end == s || *end != '\0' || !(scale > 0) || scale > 100) {
      fprintf(stderr, "pw-bench dag: --scale expects a number in (0, 100], got '%s'\n", s);
      return 2;
    }
  }
  pw_bench_dag_t dag;
  if (pw_bench_dag_make(&dag, kind, scale) != 0) {
    fprintf(stderr, "pw-bench dag: out of memory for %s at scale %g\n", name, scale);
    return 1;
  }
  printf("{\"bench\":\"dag\",\"shape\":\"%s\",\"scale\":%.17g,\"tasks\":%u,\"edges\":%llu,"
         "\"independent\":%s",
         dag.name, scale, dag.tasks, (unsigned long long)dag.edges,
         dag.independent ? "true" : "false");
  printf(",\"role\":[");
  for (uint32_t i = 0; i < dag.tasks; ++i) printf(i ? ",%u" : "%u", (unsigned)dag.role[i]);
  printf("]");
  pw_dag_print_u32s("pred_begin", dag.pred_begin, (uint64_t)dag.tasks + 1);
  pw_dag_print_u32s("preds", dag.preds, dag.edges);
  printf("}\n");
  pw_bench_dag_free(&dag);
  return ferror(stdout) ? 1 : 0;
}

PW_BENCH_SUITE(dag, "dag", "prints a task shape's DAG as JSON (for drivers outside C)",
               pw_bench_suite_dag);
