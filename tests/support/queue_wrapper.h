/* A queue-ordered wrapper backend for tests and benchmarks: it gives any
 * backend whose launches complete (its inner backend: the test double, or
 * the CPU backend) the queue-ordered launch capability of
 * include/pathways/backend.h, as a CUDA stream would, written against the
 * public plugin header only.
 *
 * Every device gets a FIFO worker thread (its stream) of |depth| slots:
 * launch copies the launch and queues it (RESOURCE_EXHAUSTED beyond the
 * depth); the worker runs each after the one before it, no sooner than
 * |launch_delay_ns| after it was launched, by calling the inner backend's
 * launch and waiting for its done, then spins |kernel_ns| (device time),
 * and hands the completion to the device's completer thread, which calls
 * done_timed |done_delay_ns| after the launch finished: an injected
 * round trip each way, a remote host's. The test can fail the launch of
 * a given queue_seq on a device (it completes with the given code) or
 * lose it (done never comes), and reads per-device counts: launches, the
 * most outstanding at once, the device time, the gaps between launches.
 *
 * When the inner backend has launch_host (vtable v4), so does the wrapper:
 * a host launch is checked whole (INVALID_ARGUMENT, nothing queued), then
 * takes a slot in each of its devices' queues at once (RESOURCE_EXHAUSTED
 * when one is full) with the descriptor's queue_seq; it runs, as one inner
 * launch_host, when it is at the head of all of them, and its one done
 * comes once every device's completer reached it. The delay, kernel time,
 * fail and lose knobs apply to it as to one launch: it fails (or is lost)
 * when any of its devices' queue_seq is marked.
 *
 * Every other method is the inner backend's. The wrapper owns the inner
 * backend (destroy destroys it). */
#ifndef PW_TESTS_SUPPORT_QUEUE_WRAPPER_H_
#define PW_TESTS_SUPPORT_QUEUE_WRAPPER_H_

#include "pathways/backend.h"

typedef struct pw_queue_wrapper_options_t {
  uint32_t depth;            /* slots per device, 1..PW_BACKEND_MAX_QUEUE_DEPTH */
  uint64_t launch_delay_ns;  /* host to device */
  uint64_t done_delay_ns;    /* device to host */
  uint64_t kernel_ns;        /* spun per launch after the inner launch */
  bool ordered;              /* false: queue_info reports no capability */
  /* Every launch whose queue_seq is a multiple of |fail_every| fails
   * (DATA_LOSS), of |lose_every| is lost (done never comes); 0: none. */
  uint32_t fail_every;
  uint32_t lose_every;
} pw_queue_wrapper_options_t;

typedef struct pw_queue_wrapper_s pw_queue_wrapper_t;

/* Wraps |inner| (taken over, also on failure). */
pw_status_t pw_queue_wrapper_create(const pw_queue_wrapper_options_t* options,
                                    pw_backend_t inner, pw_backend_t* out_backend);
/* The control handle of a wrapper backend (NULL if it is not one). */
pw_queue_wrapper_t* pw_queue_wrapper_from(const pw_backend_t* backend);
/* The wrapped backend (owned by the wrapper; valid while it lives). */
pw_backend_t pw_queue_wrapper_inner(pw_queue_wrapper_t* w);

/* The launch with |queue_seq| on backend device |device| completes with
 * |code| (not OK), or never (|lose|). One of each per device at a time. */
void pw_queue_wrapper_fail(pw_queue_wrapper_t* w, uint32_t device, uint64_t queue_seq,
                           pw_status_code_t code);
void pw_queue_wrapper_lose(pw_queue_wrapper_t* w, uint32_t device, uint64_t queue_seq);

typedef struct pw_queue_wrapper_stats_t {
  uint64_t launches;          /* accepted */
  uint64_t refused;           /* beyond the depth */
  uint32_t max_outstanding;   /* launched, done not yet called, at once */
  uint64_t out_of_order;      /* launches whose queue_seq was not last + 1 */
  uint64_t busy_ns;           /* device time: from a launch's start to its end */
  uint64_t first_start_ns;    /* pw_clock_now() of the first start */
  uint64_t last_end_ns;
  /* Gaps between a launch's end and the next one's start on the device
   * (when the next one was already queued at the end): count and sum;
   * the median of the last 4096 such gaps. */
  uint64_t gaps;
  uint64_t gap_ns_total;
  uint64_t gap_ns_median;
  /* Of |launches|: parts of host launches (launch_host) on the device. */
  uint64_t host_launches;
} pw_queue_wrapper_stats_t;

pw_queue_wrapper_stats_t pw_queue_wrapper_stats(pw_queue_wrapper_t* w, uint32_t device);
/* Zeroes the counts of every device. */
void pw_queue_wrapper_reset_stats(pw_queue_wrapper_t* w);

#endif /* PW_TESTS_SUPPORT_QUEUE_WRAPPER_H_ */
