/* `pw-bench remote`'s worker fleets: pathways-worker processes spawned on
 * loopback, registered at a pw_remote_t of this process, and runtimes over
 * their proxies (one slice per worker), the way tests/remote/remote_e2e.c
 * assembles them. Every child is recorded in one table and killed and
 * reaped by pw_rfleet_stop, or at exit (atexit), so an error path leaves
 * no process behind. */
#ifndef PW_BENCH_REMOTE_FLEET_H_
#define PW_BENCH_REMOTE_FLEET_H_

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "pathways/pathways.h"

#define PW_RFLEET_MAX 8

typedef struct pw_rfleet_cfg_s {
  const char* worker;       /* the pathways-worker binary */
  const char* backend;      /* "cpu" or "sim" */
  uint32_t workers;         /* 1 .. PW_RFLEET_MAX */
  uint32_t devices;         /* per worker */
  uint32_t stream_depth;    /* the worker's --stream-depth */
  uint32_t memory_mib;      /* the worker's --memory-mib */
  uint64_t heartbeat_ns;    /* the controller's heartbeat (0: default) */
  uint32_t misses;          /* heartbeats missed before loss (0: default) */
  const char* listen_url;   /* NULL: tcp://127.0.0.1:0 */
  const char* netns;        /* non-NULL: workers run in `ip netns exec NETNS` */
} pw_rfleet_cfg_t;

typedef struct pw_rfleet_s {
  pw_rfleet_cfg_t cfg;
  pw_remote_t* remote;
  pid_t pids[PW_RFLEET_MAX];   /* by worker name w0, w1, ... */
  uint32_t index[PW_RFLEET_MAX]; /* worker wk's remote index */
} pw_rfleet_t;

/* The default worker binary: ../tools/pathways-worker next to this
 * binary's directory (/proc/self/exe), the build tree's layout. */
const char* pw_rfleet_default_worker(void);

/* Creates the remote, spawns the workers, waits (30 s) for all of them.
 * 0 or -1 (printed; whatever started is stopped). */
int pw_rfleet_start(const pw_rfleet_cfg_t* cfg, pw_rfleet_t* out);

/* A runtime over the fleet's proxies and transport: worker k's devices
 * 0 .. devices - 1 as slice k (mesh [devices], host k + 1). */
int pw_rfleet_runtime(pw_rfleet_t* f, pw_duration_t health_poll_ns, pw_runtime_t** out);

/* A runtime over |backend| (taken) with |slices| slices of |devices|
 * each (slice k: devices k x devices ..., host k + 1): the in-process
 * counterpart of pw_rfleet_runtime. */
int pw_rfleet_local_runtime(pw_backend_t backend, uint32_t slices, uint32_t devices,
                            pw_runtime_t** out);

/* Destroys the remote (after the runtime over it), then ends every
 * worker: SIGTERM, up to 2 s, then SIGKILL; reaps them all. */
void pw_rfleet_stop(pw_rfleet_t* f);

/* Signals / reaps one worker (its pid stays recorded until reaped). */
void pw_rfleet_signal(pw_rfleet_t* f, uint32_t worker, int sig);
void pw_rfleet_reap(pw_rfleet_t* f, uint32_t worker);

#endif /* PW_BENCH_REMOTE_FLEET_H_ */
