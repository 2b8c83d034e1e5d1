/* `pw-bench remote`'s parts (suite_remote.c owns the suite): the shared
 * options, the machine's load, and one entry per part. Each part measures
 * the same work in one process and behind pathways-worker processes on
 * loopback in one run, reps interleaved, and prints one JSON line per
 * figure naming the backend. */
#ifndef PW_BENCH_REMOTE_BENCH_H_
#define PW_BENCH_REMOTE_BENCH_H_

#include <stdbool.h>
#include <stdint.h>

#include "pathways/pathways.h"

typedef struct pw_rbench_opts_s {
  const char* worker;        /* the pathways-worker binary */
  bool quick;
  uint32_t reps;
  uint32_t launch_ops;       /* part 1: ops per run */
  uint32_t launch_devices;   /* part 1: the slice (8) */
  uint32_t chain_ops;        /* part 2 */
  uint64_t kernel_ns;        /* part 2: the spin kernel's time */
  uint32_t sizes_mib[4];     /* part 3 */
  uint32_t size_count;
  uint64_t heartbeat_ns;     /* part 4 */
  uint32_t misses;
  uint32_t detect_runs;
  uint32_t fig5_workers[4];  /* part 5 */
  uint32_t fig5_count;
  uint32_t computations;
  double load_start;         /* /proc/loadavg's 1-minute figure at start */
} pw_rbench_opts_t;

/* The 1-minute load average, or -1. */
double pw_rbench_load(void);

/* Median of |n| values (sorted in place). */
double pw_rbench_median(double* values, uint32_t n);

/* Part 4 (remote_detect.c): a worker killed (SIGKILL), stopped (SIGSTOP)
 * and, as root with `ip netns`, partitioned; time until the controller
 * loses it and until its slice is lost, against heartbeat x misses. */
int pw_rbench_detect(const pw_rbench_opts_t* o);

/* Part 5 (remote_fig5.c): Fig. 5's fused computations per second on 1,
 * 2, 4 workers of 8 sim devices against flat (one process, the same
 * devices). */
int pw_rbench_fig5(const pw_rbench_opts_t* o);

/* Part 3 (remote_transfer.c): a graph transfer between two workers
 * against plain UCX between two processes (remote_ucx.h) and the same
 * graph in one process. */
int pw_rbench_transfer(const pw_rbench_opts_t* o);

#endif /* PW_BENCH_REMOTE_BENCH_H_ */
