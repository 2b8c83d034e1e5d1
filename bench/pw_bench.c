/* pw-bench <suite> [options]: the project's benchmark driver.
 *
 * Every result is one JSON object per line on stdout with at least "bench";
 * a table for humans goes to stderr. Each suite measures, in the same run, a
 * baseline that bounds what is possible and reports it as baseline_ns. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pathways/pathways.h"
#include "suites.h"

#define PW_BENCH_MAX_SUITES 64

static const pw_bench_suite_t* pw_bench_suites[PW_BENCH_MAX_SUITES];
static size_t pw_bench_suite_count;

void pw_bench_register_suite(const pw_bench_suite_t* suite) {
  if (pw_bench_suite_count < PW_BENCH_MAX_SUITES) {
    pw_bench_suites[pw_bench_suite_count++] = suite;
  }
}

static int pw_bench_compare_suites(const void* a, const void* b) {
  return strcmp((*(const pw_bench_suite_t* const*)a)->name,
                (*(const pw_bench_suite_t* const*)b)->name);
}

static void pw_bench_usage(FILE* out) {
  fprintf(out,
          "usage: pw-bench <suite> [options]\n"
          "       pw-bench list\n"
          "libpathways %s. Results: one JSON object per line on stdout; a table on stderr.\n",
          pw_version_string());
}

int main(int argc, char** argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    pw_bench_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  size_t count = pw_bench_suite_count;
  qsort(pw_bench_suites, count, sizeof(pw_bench_suites[0]), pw_bench_compare_suites);
  if (strcmp(argv[1], "list") == 0) {
    for (size_t i = 0; i < count; ++i) {
      printf("%-12s %s\n", pw_bench_suites[i]->name, pw_bench_suites[i]->description);
    }
    return 0;
  }
  for (size_t i = 0; i < count; ++i) {
    if (strcmp(argv[1], pw_bench_suites[i]->name) == 0) {
      return pw_bench_suites[i]->run(argc - 2, argv + 2);
    }
  }
  fprintf(stderr, "pw-bench: unknown suite '%s' (pw-bench list names them)\n", argv[1]);
  return 2;
}
