/* Stress: the CPU backend's spin-then-park pool (pathways/backends/cpu.h,
 * WORKER POOL). Hammers hand-offs between workers with spinning off, at
 * the default budget and at a 1 us budget (which parks and adapts all the
 * time), on 2 and 4 workers:
 * - fork-join chains launched from done callbacks: each step's done
 *   launches two ops, one the worker's continuation, the other queued for
 *   another worker; the last of the two to finish launches the next step;
 * - meanwhile a host thread launches one op at a time and waits for it,
 *   with short idle gaps so workers go through spin, park and wake-up;
 * and checks that every launch's done ran exactly once and the data each
 * op copied arrived, every wait bounded (a lost wake-up is a failure, not a
 * hang). Then an idle phase: after the work, the backend sits idle for
 * 2 s and the process must use less than 10% of one CPU in that time
 * (workers park after one spin budget; a pool that kept spinning would use
 * 100% per spinner). A generous complexity bound, not a benchmark.
 *
 * Usage: stress_cpu_pool [steps]   (default 100; ctest runs 3000) */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_test_support.h"
#include "support/test_allocators.h"

#define CHAINS 3
#define DEVICES 2
#define HOST_OPS 200
#define WAIT_MS 60000

static atomic_int g_failures;

#define FAIL(...)                                        \
  do {                                                   \
    fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                        \
    fprintf(stderr, "\n");                               \
    atomic_fetch_add(&g_failures, 1);                    \
  } while (0)

typedef struct chain_t chain_t;

/* One launch of the run: its done must come exactly once. */
typedef struct record_t {
  chain_t* chain;
  uint32_t branch;
  atomic_int calls;
} record_t;

struct chain_t {
  pw_backend_t backend;
  pw_backend_executable_t exe;
  uint32_t device;
  uint32_t steps;
  uint32_t step;            /* written by the step's last finisher only */
  atomic_uint pending;      /* branches of the current step still running */
  pw_backend_memory_t in;   /* the step number, as a float */
  pw_backend_memory_t out[2];
  record_t* records;        /* steps * 2 */
  cpu_waiter_t* waiter;     /* one call per chain, when it ends */
};

static void chain_launch_step(chain_t* c);

static void branch_done(void* user, pw_status_t status) {
  record_t* r = user;
  chain_t* c = r->chain;
  if (atomic_fetch_add(&r->calls, 1) != 0) FAIL("a done ran twice");
  if (status != NULL) {
    FAIL("launch failed: %s", pw_status_message(status));
    pw_status_free(status);
  }
  if (atomic_fetch_sub(&c->pending, 1) != 1) return;
  /* Both branches of the step are done: check what they copied. */
  for (uint32_t b = 0; b < 2; ++b) {
    float got = -1;
    pw_status_t s = c->backend.vtable->copy_to_host(c->backend.self, c->device, c->out[b], 0,
                                                    &got, sizeof(got));
    if (s != NULL) {
      FAIL("copy_to_host: %s", pw_status_message(s));
      pw_status_free(s);
    } else if (got != (float)c->step) {
      FAIL("chain on device %u step %u branch %u copied %g", c->device, c->step, b,
           (double)got);
    }
  }
  if (++c->step == c->steps) {
    cpu_waiter_done(c->waiter, NULL);
    return;
  }
  chain_launch_step(c);
}

static void chain_launch_step(chain_t* c) {
  float value = (float)c->step;
  pw_status_t s = c->backend.vtable->copy_to_device(c->backend.self, c->device, c->in, 0,
                                                    &value, sizeof(value));
  if (s != NULL) {
    FAIL("copy_to_device: %s", pw_status_message(s));
    pw_status_free(s);
  }
  atomic_store(&c->pending, 2);
  uint32_t group[] = {c->device};
  for (uint32_t b = 0; b < 2; ++b) {
    pw_backend_launch_t l = {.struct_size = sizeof(pw_backend_launch_t),
                             .executable = c->exe, .device = c->device,
                             .group_devices = group, .group_size = 1, .gang_id = 1,
                             .inputs = &c->in, .input_count = 1,
                             .outputs = &c->out[b], .output_count = 1,
                             .done = branch_done,
                             .done_user = &c->records[c->step * 2 + b]};
    s = c->backend.vtable->launch(c->backend.self, &l);
    if (s != NULL) {
      /* Refused: done never runs; count it as run so the chain ends. */
      FAIL("launch refused: %s", pw_status_message(s));
      pw_status_free(s);
      atomic_fetch_add(&c->records[c->step * 2 + b].calls, 1);
      if (atomic_fetch_sub(&c->pending, 1) == 1) cpu_waiter_done(c->waiter, NULL);
    }
  }
}

/* The host thread: one op at a time, waited for. */
typedef struct host_t {
  pw_backend_t backend;
  pw_backend_executable_t exe;
  pw_backend_memory_t in, out;
  uint32_t ops_done;
} host_t;

static void* host_main(void* arg) {
  host_t* h = arg;
  uint32_t group[] = {0};
  for (uint32_t i = 0; i < HOST_OPS; ++i) {
    cpu_waiter_t w;
    cpu_waiter_init(&w, 1);
    pw_backend_launch_t l = {.struct_size = sizeof(pw_backend_launch_t), .executable = h->exe,
                             .device = 0, .group_devices = group, .group_size = 1,
                             .gang_id = 1, .inputs = &h->in, .input_count = 1,
                             .outputs = &h->out, .output_count = 1, .done = cpu_waiter_done,
                             .done_user = &w};
    pw_status_t s = h->backend.vtable->launch(h->backend.self, &l);
    if (s != NULL) {
      FAIL("host launch refused: %s", pw_status_message(s));
      pw_status_free(s);
    } else if (!cpu_waiter_wait(&w, WAIT_MS)) {
      FAIL("host op %u: done did not come within %d ms (a lost wake-up?)", i, WAIT_MS);
      cpu_waiter_destroy(&w);
      return NULL; /* the waiter would be used after this frame */
    } else {
      h->ops_done++;
      pw_status_t e = cpu_waiter_take_error(&w);
      if (e != NULL) {
        FAIL("host op %u: %s", i, pw_status_message(e));
        pw_status_free(e);
      }
    }
    cpu_waiter_destroy(&w);
    /* Every 8th op, an idle gap of 0-200 us: long enough that a spinning
     * worker sometimes gives up and parks. Not synchronisation. */
    if (i % 8 == 7) {
      struct timespec gap = {0, (long)(i % 5) * 50000L};
      nanosleep(&gap, NULL);
    }
  }
  return NULL;
}

static bool must(pw_status_t s, const char* what) {
  if (s == NULL) return true;
  FAIL("%s: %s", what, pw_status_message(s));
  pw_status_free(s);
  return false;
}

static double process_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs the chains and the host thread on a backend with |workers| workers
 * and |spin_us|; with |idle_check|, then measures 2 s of idleness. */
static void run_config(uint32_t workers, uint32_t spin_us, uint32_t steps, bool idle_check) {
  pw_test_allocator_t counting;
  pw_test_allocator_init(&counting);
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.allocator = pw_test_allocator(&counting);
  o.device_count = DEVICES;
  o.worker_count = workers;
  o.spin_us = spin_us;
  pw_backend_t b;
  if (!must(pw_cpu_backend_create(&o, &b), "create")) return;
  pw_mesh_shape_t one = pw_mesh_shape_make(1, (uint32_t[]){1});
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  if (!must(cpu_load_text(b, "kernel copy\ninput f32[1] replicated\noutput f32[1] replicated\n",
                          &one, &exe, &sig),
            "load")) {
    cpu_destroy(b);
    return;
  }
  chain_t chains[CHAINS];
  cpu_waiter_t chains_done;
  cpu_waiter_init(&chains_done, CHAINS);
  bool ok = true;
  for (uint32_t c = 0; c < CHAINS; ++c) {
    chain_t* ch = &chains[c];
    memset(ch, 0, sizeof(*ch));
    ch->backend = b;
    ch->exe = exe;
    ch->device = c % DEVICES;
    ch->steps = steps;
    ch->waiter = &chains_done;
    ch->records = calloc((size_t)steps * 2, sizeof(record_t));
    ok = ok && ch->records != NULL &&
         must(b.vtable->allocate(b.self, ch->device, 4, &ch->in), "allocate") &&
         must(b.vtable->allocate(b.self, ch->device, 4, &ch->out[0]), "allocate") &&
         must(b.vtable->allocate(b.self, ch->device, 4, &ch->out[1]), "allocate");
    for (uint32_t i = 0; ok && i < steps * 2; ++i) {
      ch->records[i].chain = ch;
      ch->records[i].branch = i % 2;
      atomic_init(&ch->records[i].calls, 0);
    }
  }
  host_t host = {.backend = b, .exe = exe};
  float seven = 7;
  ok = ok && must(b.vtable->allocate(b.self, 0, 4, &host.in), "allocate") &&
       must(b.vtable->allocate(b.self, 0, 4, &host.out), "allocate") &&
       must(b.vtable->copy_to_device(b.self, 0, host.in, 0, &seven, 4), "copy");
  pthread_t host_thread;
  bool host_started = ok && pthread_create(&host_thread, NULL, host_main, &host) == 0;
  if (ok) {
    for (uint32_t c = 0; c < CHAINS; ++c) chain_launch_step(&chains[c]);
    if (!cpu_waiter_wait(&chains_done, WAIT_MS)) {
      FAIL("workers %u spin %u: %u of %u chains ended within %d ms (a lost wake-up?)", workers,
           spin_us, chains_done.calls, CHAINS, WAIT_MS);
      abort(); /* the chains still run on this frame's memory */
    }
  }
  if (host_started) pthread_join(host_thread, NULL);
  if (ok && host.ops_done != HOST_OPS) {
    FAIL("workers %u spin %u: host ran %u of %u ops", workers, spin_us, host.ops_done,
         HOST_OPS);
  }
  uint64_t launches = 0;
  for (uint32_t c = 0; ok && c < CHAINS; ++c) {
    for (uint32_t i = 0; i < steps * 2; ++i) {
      int calls = atomic_load(&chains[c].records[i].calls);
      if (calls != 1) FAIL("chain %u launch %u: done ran %d times", c, i, calls);
      launches += (uint64_t)calls;
    }
  }
  if (ok && idle_check) {
    /* Idle: nothing queued, nothing running. */
    double cpu0 = process_cpu_s();
    struct timespec t0, t1, two = {2, 0};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    nanosleep(&two, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    double used = process_cpu_s() - cpu0;
    fprintf(stderr, "idle: %u workers, spin %u us: %.4f s of CPU over %.2f s (%.2f%%)\n",
            workers, spin_us, used, wall, 100.0 * used / wall);
    if (used >= 0.10 * wall) {
      FAIL("idle backend (%u workers, spin %u us) used %.3f s of CPU in %.2f s: workers do "
           "not park",
           workers, spin_us, used, wall);
    }
  }
  for (uint32_t c = 0; c < CHAINS; ++c) {
    b.vtable->deallocate(b.self, chains[c].device, chains[c].in);
    b.vtable->deallocate(b.self, chains[c].device, chains[c].out[0]);
    b.vtable->deallocate(b.self, chains[c].device, chains[c].out[1]);
    free(chains[c].records);
  }
  b.vtable->deallocate(b.self, 0, host.in);
  b.vtable->deallocate(b.self, 0, host.out);
  b.vtable->unload(b.self, exe);
  cpu_destroy(b);
  cpu_waiter_destroy(&chains_done);
  if (pw_test_allocator_live(&counting) != 0) {
    FAIL("workers %u spin %u: %zu bytes leaked", workers, spin_us,
         (size_t)pw_test_allocator_live(&counting));
  }
  fprintf(stderr, "workers %u spin %u us (%u: off): %llu chain launches, %u host ops\n", workers,
          spin_us, PW_CPU_SPIN_OFF,
          (unsigned long long)launches, host.ops_done);
}

int main(int argc, char** argv) {
  uint32_t steps = argc > 1 ? (uint32_t)atoi(argv[1]) : 100;
  if (steps < 1) steps = 1;
  static const uint32_t spins[] = {PW_CPU_SPIN_OFF, 0 /* default */, 1};
  static const uint32_t worker_counts[] = {2, 4};
  for (size_t w = 0; w < sizeof(worker_counts) / sizeof(worker_counts[0]); ++w) {
    for (size_t s = 0; s < sizeof(spins) / sizeof(spins[0]); ++s) {
      run_config(worker_counts[w], spins[s], steps, false);
    }
  }
  /* The idle bound, on the default pool and on one that spins long. */
  run_config(2, 0, steps, true);
  run_config(2, 1000, steps, true);
  int failures = atomic_load(&g_failures);
  if (failures != 0) {
    fprintf(stderr, "stress_cpu_pool: %d failures\n", failures);
    return 1;
  }
  fprintf(stderr, "stress_cpu_pool: ok\n");
  return 0;
}
