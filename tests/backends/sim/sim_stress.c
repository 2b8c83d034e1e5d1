/* Stress for the sim backend, a plain executable so that it also runs
 * under ThreadSanitizer: several threads launch compute ops and
 * collectives over shared chips in INLINE and THREADED mode while another
 * thread fails and repairs chips (INLINE also with queue-ordered chips,
 * whose compute launches take the direct path while other threads'
 * collectives queue on the same chips); then a runtime over a THREADED sim
 * fleet takes submissions from two threads; host launches (one thread per
 * host, each its lane of every gang) in INLINE and THREADED mode. Every
 * accepted launch must complete
 * exactly once; nothing may hang.
 *
 * Usage: stress_sim_backend [rounds] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_test_support.h"

void pw_sim_test_fail(const char* what, const char* detail) {
  fprintf(stderr, "stress_sim_backend: %s failed: %s\n", what, detail);
  abort();
}

#define PW_STRESS_CHECK(cond, ...)                        \
  do {                                                    \
    if (!(cond)) {                                        \
      fprintf(stderr, "stress_sim_backend: " __VA_ARGS__); \
      fprintf(stderr, "\n");                              \
      abort();                                            \
    }                                                     \
  } while (0)

enum { kThreads = 3, kDevices = 8 };

typedef struct pw_stress_t {
  pw_backend_t backend;
  pw_backend_executable_t compute;
  pw_backend_executable_t collective;
  long rounds;
  _Atomic uint32_t stop;
} pw_stress_t;

typedef struct pw_stress_thread_t {
  pw_stress_t* s;
  uint32_t index;
  pw_sim_launch_t* launches; /* rounds * (1 + 4) */
  long accepted;
} pw_stress_thread_t;

static void* pw_stress_launcher(void* arg) {
  pw_stress_thread_t* t = arg;
  pw_stress_t* s = t->s;
  for (long r = 0; r < s->rounds; ++r) {
    pw_sim_launch_t* l = &t->launches[r * 5];
    uint32_t device = (uint32_t)(r + t->index) % kDevices;
    pw_sim_test_describe(&l[0], s->compute, device, 0, &device, 1,
                         (uint64_t)(t->index + 1) << 32 | (uint64_t)r * 2, NULL, 0, NULL, 0);
    pw_status_t status = s->backend.vtable->launch(s->backend.self, &l[0].launch);
    if (status == NULL) t->accepted++;
    pw_status_free(status);
    /* A collective over 4 chips owned by this thread's gang ids. */
    uint32_t group[4];
    for (uint32_t m = 0; m < 4; ++m) group[m] = (device + m * 2) % kDevices;
    uint64_t gang = (uint64_t)(t->index + 1) << 32 | ((uint64_t)r * 2 + 1);
    for (uint32_t m = 0; m < 4; ++m) {
      pw_sim_test_describe(&l[1 + m], s->collective, group[m], m, group, 4, gang, NULL, 0, NULL,
                           0);
    }
    for (uint32_t m = 0; m < 4; ++m) {
      status = s->backend.vtable->launch(s->backend.self, &l[1 + m].launch);
      if (status == NULL) t->accepted++;
      pw_status_free(status);
    }
  }
  return NULL;
}

static void* pw_stress_failer(void* arg) {
  pw_stress_t* s = arg;
  uint32_t x = 1;
  while (!atomic_load(&s->stop)) {
    x = x * 1103515245u + 12345u;
    uint32_t device = (x >> 16) % kDevices;
    pw_status_t status = pw_sim_backend_fail(s->backend, PW_SIM_FAIL_CHIP, device,
                                             PW_SIM_TIME_NOW);
    pw_status_free(status);
    (void)s->backend.vtable->health(s->backend.self, device);
    status = pw_sim_backend_repair(s->backend, PW_SIM_FAIL_CHIP, device);
    pw_status_free(status);
    pw_sim_stats_t stats = {.struct_size = sizeof(pw_sim_stats_t)};
    pw_status_free(pw_sim_backend_stats(s->backend, &stats));
  }
  return NULL;
}

static void pw_stress_backend(pw_sim_mode_t mode, uint32_t depth, long rounds) {
  pw_stress_t s;
  memset(&s, 0, sizeof(s));
  s.rounds = rounds;
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.slice_count = 2;
  o.devices_per_slice = kDevices / 2;
  o.mode = mode;
  o.queue_depth = depth;
  PW_SIM_OK(pw_sim_backend_create(&o, &s.backend));
  s.compute = pw_sim_test_load(s.backend, "op c\ntime 2us\n", 1);
  s.collective = pw_sim_test_load(s.backend, "op k\nkind collective\ntime 1us\n", 4);
  pw_stress_thread_t threads[kThreads];
  pthread_t ids[kThreads];
  pthread_t failer;
  for (uint32_t i = 0; i < kThreads; ++i) {
    threads[i] = (pw_stress_thread_t){&s, i, calloc((size_t)rounds * 5, sizeof(pw_sim_launch_t)),
                                      0};
    PW_STRESS_CHECK(threads[i].launches != NULL, "out of memory");
  }
  pthread_create(&failer, NULL, pw_stress_failer, &s);
  for (uint32_t i = 0; i < kThreads; ++i) {
    pthread_create(&ids[i], NULL, pw_stress_launcher, &threads[i]);
  }
  for (uint32_t i = 0; i < kThreads; ++i) pthread_join(ids[i], NULL);
  atomic_store(&s.stop, 1);
  pthread_join(failer, NULL);
  if (mode == PW_SIM_MODE_THREADED) {
    PW_STRESS_CHECK(pw_sim_backend_wait_idle(s.backend, 60ull * 1000 * 1000 * 1000),
                    "THREADED backend never idle");
  }
  /* Collectives of different threads interleave on shared chips in no
   * consistent order; a sim collective never blocks a chip, so all of them
   * complete. Every accepted launch completed exactly once. */
  for (uint32_t i = 0; i < kThreads; ++i) {
    long done = 0;
    for (long k = 0; k < rounds * 5; ++k) {
      uint32_t calls = atomic_load(&threads[i].launches[k].done.calls);
      PW_STRESS_CHECK(calls <= 1, "launch %ld of thread %u completed %u times", k, i, calls);
      done += calls;
    }
    PW_STRESS_CHECK(done == threads[i].accepted, "thread %u: %ld accepted, %ld completed", i,
                    threads[i].accepted, done);
  }
  s.backend.vtable->unload(s.backend.self, s.compute);
  s.backend.vtable->unload(s.backend.self, s.collective);
  s.backend.vtable->destroy(s.backend.self);
  for (uint32_t i = 0; i < kThreads; ++i) free(threads[i].launches);
}

/* --- Host launches: one thread per host launches its lane of each gang
 * (a collective over all 8 chips) while chips fail and repair. --- */

typedef struct pw_stress_lane_t {
  pw_backend_host_launch_t h;
  pw_sim_done_t done;
} pw_stress_lane_t;

typedef struct pw_stress_host_t {
  pw_stress_t* s;
  uint32_t host;
  pw_stress_lane_t* lanes; /* rounds */
  long accepted;
} pw_stress_host_t;

static const uint32_t pw_stress_group[kDevices] = {0, 1, 2, 3, 4, 5, 6, 7};

static void* pw_stress_host_launcher(void* arg) {
  pw_stress_host_t* t = arg;
  pw_stress_t* s = t->s;
  for (long r = 0; r < s->rounds; ++r) {
    pw_stress_lane_t* l = &t->lanes[r];
    atomic_init(&l->done.calls, 0);
    atomic_init(&l->done.code, -1);
    l->h = (pw_backend_host_launch_t){.struct_size = sizeof(l->h),
                                      .executable = s->collective,
                                      .host = t->host,
                                      .mesh_start = t->host * 2,
                                      .device_count = 2,
                                      .group_devices = pw_stress_group,
                                      .group_size = kDevices,
                                      .gang_id = 1000 + (uint64_t)r,
                                      .done = pw_sim_test_done,
                                      .done_user = &l->done};
    pw_status_t status = s->backend.vtable->launch_host(s->backend.self, &l->h);
    if (status == NULL) t->accepted++;
    pw_status_free(status);
  }
  return NULL;
}

static void pw_stress_host_launch(pw_sim_mode_t mode, long rounds) {
  pw_stress_t s;
  memset(&s, 0, sizeof(s));
  s.rounds = rounds;
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.slice_count = 2;
  o.devices_per_slice = kDevices / 2;
  o.devices_per_host = 2;
  o.mode = mode;
  PW_SIM_OK(pw_sim_backend_create(&o, &s.backend));
  s.collective = pw_sim_test_load(s.backend, "op k\nkind collective\ntime 1us\n", kDevices);
  enum { kHosts = kDevices / 2 };
  pw_stress_host_t hosts[kHosts];
  pthread_t ids[kHosts];
  pthread_t failer;
  pthread_create(&failer, NULL, pw_stress_failer, &s);
  for (uint32_t h = 0; h < kHosts; ++h) {
    hosts[h] = (pw_stress_host_t){&s, h, calloc((size_t)rounds, sizeof(pw_stress_lane_t)), 0};
    PW_STRESS_CHECK(hosts[h].lanes != NULL, "out of memory");
    pthread_create(&ids[h], NULL, pw_stress_host_launcher, &hosts[h]);
  }
  for (uint32_t h = 0; h < kHosts; ++h) pthread_join(ids[h], NULL);
  atomic_store(&s.stop, 1);
  pthread_join(failer, NULL);
  if (mode == PW_SIM_MODE_THREADED) {
    PW_STRESS_CHECK(pw_sim_backend_wait_idle(s.backend, 60ull * 1000 * 1000 * 1000),
                    "THREADED backend never idle");
  }
  for (uint32_t h = 0; h < kHosts; ++h) {
    long done = 0;
    for (long r = 0; r < rounds; ++r) {
      uint32_t calls = atomic_load(&hosts[h].lanes[r].done.calls);
      PW_STRESS_CHECK(calls <= 1, "lane %ld of host %u completed %u times", r, h, calls);
      done += calls;
    }
    PW_STRESS_CHECK(done == hosts[h].accepted, "host %u: %ld lanes accepted, %ld completed", h,
                    hosts[h].accepted, done);
  }
  pw_sim_stats_t stats = {.struct_size = sizeof(stats)};
  PW_SIM_OK(pw_sim_backend_stats(s.backend, &stats));
  PW_STRESS_CHECK(stats.host_launches == (uint64_t)(hosts[0].accepted + hosts[1].accepted +
                                                    hosts[2].accepted + hosts[3].accepted),
                  "host_launches %llu", (unsigned long long)stats.host_launches);
  s.backend.vtable->unload(s.backend.self, s.collective);
  s.backend.vtable->destroy(s.backend.self);
  for (uint32_t h = 0; h < kHosts; ++h) free(hosts[h].lanes);
}

/* --- A runtime over a THREADED sim fleet, two submitting threads. --- */

typedef struct pw_stress_submitter_t {
  pw_sim_fleet_t* fleet;
  pw_graph_t graph;
  long rounds;
} pw_stress_submitter_t;

static void* pw_stress_submit(void* arg) {
  pw_stress_submitter_t* s = arg;
  for (long r = 0; r < s->rounds; ++r) {
    pw_event_t* done = NULL;
    PW_SIM_OK(pw_graph_submit(s->fleet->client, s->graph, NULL, 0, NULL, NULL, 0, &done));
    pw_status_t status = pw_event_wait(done, pw_deadline_from_timeout(60ll * 1000000000));
    PW_STRESS_CHECK(pw_status_code(status) == PW_STATUS_OK, "submission %ld: %s", r,
                    pw_status_message(status));
    pw_event_release(done);
  }
  return NULL;
}

static void pw_stress_runtime(long rounds) {
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.slice_count = 2;
  o.devices_per_slice = 16;
  o.mode = PW_SIM_MODE_THREADED;
  o.memory = PW_SIM_MEMORY_VIRTUAL;
  pw_sim_fleet_t f;
  PW_SIM_OK(pw_sim_fleet_init(&f, &o, pw_allocator_system()));
  pw_executable_t e;
  const char* text = "op step\nkind collective\ntime 10us\n";
  PW_SIM_OK(pw_executable_compile(f.client, f.vslices[0], text, strlen(text), NULL, &e));
  pw_stress_submitter_t subs[2];
  pthread_t ids[2];
  for (uint32_t i = 0; i < 2; ++i) {
    subs[i].fleet = &f;
    subs[i].rounds = rounds;
    /* Both threads submit to both slices' graphs: shared slice sequences. */
    PW_SIM_OK(pw_sim_fleet_step_graph(&f, i, e, &subs[i].graph));
  }
  for (uint32_t i = 0; i < 2; ++i) pthread_create(&ids[i], NULL, pw_stress_submit, &subs[i]);
  pw_stress_submitter_t shared = {&f, subs[0].graph, rounds};
  pw_stress_submit(&shared);
  for (uint32_t i = 0; i < 2; ++i) pthread_join(ids[i], NULL);
  pw_sim_stats_t stats = {.struct_size = sizeof(pw_sim_stats_t)};
  PW_SIM_OK(pw_sim_backend_stats(f.backend, &stats));
  PW_STRESS_CHECK(stats.events == (uint64_t)rounds * 3 * 16, "%llu events",
                  (unsigned long long)stats.events);
  for (uint32_t i = 0; i < 2; ++i) PW_SIM_OK(pw_graph_release(f.client, subs[i].graph));
  PW_SIM_OK(pw_executable_release(f.client, e));
  pw_sim_fleet_deinit(&f);
}

int main(int argc, char** argv) {
  long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 200;
  if (rounds < 1) rounds = 1;
  pw_stress_backend(PW_SIM_MODE_INLINE, 0, rounds);
  pw_stress_backend(PW_SIM_MODE_INLINE, 64, rounds);
  pw_stress_backend(PW_SIM_MODE_THREADED, 0, rounds);
  pw_stress_host_launch(PW_SIM_MODE_INLINE, rounds);
  pw_stress_host_launch(PW_SIM_MODE_THREADED, rounds);
  pw_stress_runtime(rounds);
  printf("stress_sim_backend: %ld rounds OK\n", rounds);
  return 0;
}
