/* pw-bench probe: how fast this machine's memory is right now. A random
 * pointer chase over a buffer larger than the last-level cache (every
 * step a dependent load that misses it), timed over a few passes; the
 * fastest pass is reported. bench/compare runs it before each driver run
 * and waits while it reads well above the best seen in the session: on
 * shared VMs a neighbour can slow memory-heavy work by 1.5x for minutes
 * while the load average inside the VM stays quiet (docs/performance-history.md,
 * "Slow periods").
 *
 * Output: one JSON object {"bench": "probe", "mib", "steps", "chase_ns"}
 * on stdout (ns per dependent load, fastest pass). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "suites.h"

typedef struct pw_probe_node_t {
  struct pw_probe_node_t* next;
  char pad[56]; /* one node per cache line */
} pw_probe_node_t;

static uint64_t pw_probe_rand(uint64_t* state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

static int pw_bench_suite_probe(int argc, char** argv) {
  long long mib = pw_bench_opt_int(argc, argv, "mib", 64);
  long long steps = pw_bench_opt_int(argc, argv, "steps", 1000000);
  long long passes = pw_bench_opt_int(argc, argv, "passes", 3);
  if (mib < 1 || mib > 4096 || steps < 1 || passes < 1) {
    fprintf(stderr, "pw-bench probe: --mib 1..4096, --steps >= 1, --passes >= 1\n");
    return 2;
  }
  size_t n = (size_t)mib * 1024 * 1024 / sizeof(pw_probe_node_t);
  pw_probe_node_t* nodes = malloc(n * sizeof(pw_probe_node_t));
  size_t* order = malloc(n * sizeof(size_t));
  if (nodes == NULL || order == NULL) {
    free(nodes);
    free(order);
    fprintf(stderr, "pw-bench probe: out of memory for %lld MiB\n", mib);
    return 1;
  }
  /* One random cycle through every node (Sattolo's shuffle). */
  for (size_t i = 0; i < n; ++i) order[i] = i;
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (size_t i = n - 1; i > 0; --i) {
    size_t j = (size_t)(pw_probe_rand(&seed) % i);
    size_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  for (size_t i = 0; i < n; ++i) nodes[order[i]].next = &nodes[order[(i + 1) % n]];
  free(order);
  double best = 0;
  pw_probe_node_t* p = &nodes[0];
  for (long long pass = 0; pass < passes; ++pass) {
    int64_t t0 = pw_bench_now_ns();
    for (long long s = 0; s < steps; ++s) p = p->next;
    double ns = (double)(pw_bench_now_ns() - t0) / (double)steps;
    if (pass == 0 || ns < best) best = ns;
  }
  pw_bench_json_t j;
  pw_bench_json_begin(&j, "probe");
  pw_bench_json_int(&j, "mib", mib);
  pw_bench_json_int(&j, "steps", steps);
  pw_bench_json_num(&j, "chase_ns", best);
  pw_bench_json_end(&j);
  volatile uintptr_t sink = (uintptr_t)p; /* keeps the chase */
  (void)sink;
  fprintf(stderr, "probe: %.1f ns per dependent load over %lld MiB (fastest of %lld)\n", best,
          mib, passes);
  free(nodes);
  return 0;
}

PW_BENCH_SUITE(probe, "probe",
               "memory latency right now (random pointer chase beyond the LLC); bench/compare "
               "waits while it is slow",
               pw_bench_suite_probe)
