/* Reruns seeded random resharding cases (reshard_cases.h) through
 * pw__reshard_plan and its checks: `reshard_seeds COUNT [FIRST]` runs
 * seeds FIRST .. FIRST + COUNT - 1, each with reduced and with unreduced
 * sources, and prints every failing seed with its case (every case with
 * a third argument "-v"). Exit status 1 if any failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/reshard_cases.h"

int main(int argc, char** argv) {
  unsigned long long count = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000;
  unsigned long long first = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
  int verbose = argc > 3 && strcmp(argv[3], "-v") == 0;
  unsigned long long failed = 0, reducing = 0;
  char text[400], why[300];
  for (unsigned long long s = first; s < first + count; ++s) {
    for (int unreduced = 0; unreduced < 2; ++unreduced) {
      reshard_case_t c;
      reshard_case_make(s, unreduced != 0, &c);
      reducing += pw_sharding_partial_count(&c.src.sharding, &c.src_mesh) >
                  pw_sharding_partial_count(&c.dst.sharding, &c.dst_mesh);
      if (verbose) {
        reshard_case_describe(&c, text, sizeof(text));
        printf("%s\n", text);
      }
      if (!reshard_plan_run(&c, why, sizeof(why))) {
        reshard_case_describe(&c, text, sizeof(text));
        fprintf(stderr, "FAIL %s%s: %s\n", text, unreduced ? " (unreduced)" : "", why);
        ++failed;
      }
    }
  }
  printf("reshard_seeds: %llu of %llu cases failed (%llu add up partial sums)\n", failed,
         2 * count, reducing);
  return failed ? 1 : 0;
}
