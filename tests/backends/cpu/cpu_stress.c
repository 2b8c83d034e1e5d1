/* Stress: host threads launch collectives and elementwise kernels on 8
 * devices of one CPU backend (a 2-thread pool) concurrently, in shuffled
 * device order, while a done-callback chain relaunches from pool threads.
 * Checks that every done runs exactly once and every result is right.
 * A second phase launches collectives while another thread flips device 5
 * between FAILED and HEALTHY: each group must then either succeed on every
 * device or fail with UNAVAILABLE on every device, and never hang.
 * Bounded in rounds and in time (a few seconds; also under TSan).
 *
 * Usage: stress_cpu_backend [rounds]   (default 40; ctest runs 1000) */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_test_support.h"
#include "support/test_allocators.h"

#define DEVICES 8
#define THREADS 4
#define OPS_PER_ROUND 3
#define TIME_LIMIT_S 20.0

static pw_backend_t g_backend;
static const pw_backend_vtable_t* g_vt;
static pw_mesh_shape_t g_mesh;
static atomic_uint_fast64_t g_gang = 1;
static atomic_int g_failures;
static atomic_uint_fast64_t g_dones;
static atomic_uint_fast64_t g_launches;
static atomic_uint_fast64_t g_failed_ops; /* collectives failed by injection */
static atomic_uint_fast64_t g_flips;
static struct timespec g_start;

typedef struct program_t {
  const char* text;
  pw_backend_executable_t exe;
  pw_executable_signature_t sig;
} program_t;

enum { OP_ALL_REDUCE, OP_ALL_GATHER, OP_ADD, OP_COUNT };
static program_t g_programs[OP_COUNT] = {
    {.text = "kernel all_reduce_sum\ninput f32[8,64] split(0,all)\n"
             "output f32[64] replicated\n"},
    {.text = "kernel all_gather\ninput f32[128] split(0,all)\noutput f32[128] replicated\n"},
    {.text = "kernel add\ninput f32[256] split(0,all)\ninput f32[256] split(0,all)\n"
             "output f32[256] split(0,all)\n"},
};

#define FAIL(...)                                  \
  do {                                             \
    fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                  \
    fprintf(stderr, "\n");                         \
    atomic_fetch_add(&g_failures, 1);              \
  } while (0)

static double elapsed_s(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - g_start.tv_sec) + (double)(now.tv_nsec - g_start.tv_nsec) * 1e-9;
}

/* One device's launch of one op: its done must run exactly once. */
typedef struct slot_t {
  atomic_int calls;
  cpu_waiter_t* waiter;
} slot_t;

static void slot_done(void* user, pw_status_t status) {
  slot_t* slot = user;
  if (atomic_fetch_add(&slot->calls, 1) != 0) FAIL("a done ran twice");
  atomic_fetch_add(&g_dones, 1);
  cpu_waiter_done(slot->waiter, status);
}

typedef struct op_t {
  int kind;
  uint64_t gang;
  cpu_waiter_t waiter;
  pw_backend_memory_t in[2][DEVICES];
  pw_backend_memory_t out[DEVICES];
  slot_t slots[DEVICES];
  float seed;
} op_t;

static size_t shard_bytes(const pw_backend_param_t* p) {
  pw_shape_t s = pw_sharding_shard_shape(&p->sharding, &p->shape, &g_mesh);
  return (size_t)pw_shape_element_count(&s) * pw_dtype_size(p->dtype);
}

static bool op_prepare(op_t* op, int kind, float seed) {
  memset(op, 0, sizeof(*op));
  op->kind = kind;
  op->seed = seed;
  const pw_executable_signature_t* sig = &g_programs[kind].sig;
  for (uint32_t d = 0; d < DEVICES; ++d) {
    for (uint32_t i = 0; i < sig->input_count; ++i) {
      size_t bytes = shard_bytes(&sig->inputs[i]);
      if (g_vt->allocate(g_backend.self, d, bytes, &op->in[i][d]) != NULL) return false;
      float values[64];
      for (size_t k = 0; k < bytes / sizeof(float); ++k) {
        values[k] = seed + (float)(d * 100 + k) + (float)i * 0.5f;
      }
      if (g_vt->copy_to_device(g_backend.self, d, op->in[i][d], 0, values, bytes) != NULL) {
        return false;
      }
    }
    if (g_vt->allocate(g_backend.self, d, shard_bytes(&sig->outputs[0]), &op->out[d]) != NULL) {
      return false;
    }
  }
  return true;
}

static void op_launch(op_t* op, const uint32_t* order) {
  static const uint32_t group[DEVICES] = {0, 1, 2, 3, 4, 5, 6, 7};
  const program_t* p = &g_programs[op->kind];
  cpu_waiter_t* waiter = &op->waiter;
  op->gang = atomic_fetch_add(&g_gang, 1);
  for (uint32_t k = 0; k < DEVICES; ++k) {
    uint32_t d = order[k];
    op->slots[d].waiter = waiter;
    atomic_init(&op->slots[d].calls, 0);
    pw_backend_memory_t inputs[2] = {op->in[0][d], op->in[1][d]};
    pw_backend_launch_t l = {
        .struct_size = sizeof(l), .executable = p->exe, .device = d, .mesh_index = d,
        .group_devices = group, .group_size = DEVICES, .gang_id = op->gang,
        .inputs = inputs, .input_count = p->sig.input_count, .outputs = &op->out[d],
        .output_count = 1, .done = slot_done, .done_user = &op->slots[d]};
    pw_status_t s = g_vt->launch(g_backend.self, &l);
    if (s != NULL) {
      FAIL("launch: %s", pw_status_message(s));
      pw_status_free(s);
      cpu_waiter_done(waiter, NULL); /* keep the count */
    } else {
      atomic_fetch_add(&g_launches, 1);
    }
  }
}

/* Checks |op|'s dones and results and frees it. Under failure injection
 * (|chaos|) a collective either succeeds on every device or fails with
 * UNAVAILABLE on every device: a group never splits. */
static void op_check_and_free(op_t* op, bool chaos) {
  const pw_executable_signature_t* sig = &g_programs[op->kind].sig;
  size_t bytes = shard_bytes(&sig->outputs[0]);
  size_t in_bytes = shard_bytes(&sig->inputs[0]);
  float got[256];
  bool verify = true;
  if (op->waiter.errors != 0) {
    pw_status_code_t code = pw_status_code(op->waiter.first_error);
    if (!chaos) {
      FAIL("gang %llu: %s", (unsigned long long)op->gang,
           pw_status_message(op->waiter.first_error));
    } else if (code != PW_STATUS_UNAVAILABLE || op->waiter.errors != DEVICES) {
      FAIL("gang %llu: %u of %u devices failed (%s)", (unsigned long long)op->gang,
           op->waiter.errors, DEVICES, pw_status_message(op->waiter.first_error));
    } else {
      atomic_fetch_add(&g_failed_ops, 1);
    }
    verify = false;
  }
  for (uint32_t d = 0; d < DEVICES; ++d) {
    if (atomic_load(&op->slots[d].calls) != 1) FAIL("device %u: done ran %d times", d,
                                                     atomic_load(&op->slots[d].calls));
    if (g_vt->copy_to_host(g_backend.self, d, op->out[d], 0, got, bytes) != NULL) {
      FAIL("copy_to_host");
      continue;
    }
    for (size_t k = 0; verify && k < bytes / sizeof(float); ++k) {
      float want = 0;
      if (op->kind == OP_ALL_REDUCE) {
        for (uint32_t s = 0; s < DEVICES; ++s) want += op->seed + (float)(s * 100 + k);
      } else if (op->kind == OP_ALL_GATHER) {
        size_t per = in_bytes / sizeof(float);
        want = op->seed + (float)((k / per) * 100 + k % per);
      } else {
        want = (op->seed + (float)(d * 100 + k)) + (op->seed + (float)(d * 100 + k) + 0.5f);
      }
      if (got[k] != want) {
        FAIL("op %d gang %llu device %u element %zu: got %g want %g", op->kind,
             (unsigned long long)op->gang, d, k, got[k], want);
        break;
      }
    }
  }
  for (uint32_t d = 0; d < DEVICES; ++d) {
    for (int i = 0; i < 2; ++i) {
      if (op->in[i][d]) g_vt->deallocate(g_backend.self, d, op->in[i][d]);
    }
    if (op->out[d]) g_vt->deallocate(g_backend.self, d, op->out[d]);
  }
  cpu_waiter_destroy(&op->waiter);
}

static int g_rounds = 40;
static atomic_bool g_chaos_stop;

typedef struct phase_t {
  uintptr_t index;
  bool chaos;      /* collectives only; device 5 flips between failed/healthy */
} phase_t;

static void* host_thread(void* arg) {
  const phase_t* phase = arg;
  uint64_t rng = (uint64_t)phase->index * 7919u + 1;
  op_t* ops = calloc(OPS_PER_ROUND, sizeof(op_t));
  for (int round = 0; round < g_rounds && elapsed_s() < TIME_LIMIT_S; ++round) {
    for (int k = 0; k < OPS_PER_ROUND; ++k) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      int kind = (int)((rng >> 33) % (phase->chaos ? OP_ADD : OP_COUNT));
      if (!op_prepare(&ops[k], kind, (float)(rng >> 50))) FAIL("prepare op");
      cpu_waiter_init(&ops[k].waiter, DEVICES);
    }
    for (int k = 0; k < OPS_PER_ROUND; ++k) {
      uint32_t order[DEVICES] = {0, 1, 2, 3, 4, 5, 6, 7};
      for (uint32_t i = DEVICES; i-- > 1;) { /* Fisher-Yates */
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t j = (uint32_t)((rng >> 33) % (i + 1));
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
      op_launch(&ops[k], order);
    }
    for (int k = 0; k < OPS_PER_ROUND; ++k) {
      if (!cpu_waiter_wait(&ops[k].waiter, 30000)) {
        FAIL("round %d: only %u of %u dones after 30 s", round, ops[k].waiter.calls,
             ops[k].waiter.expected);
        abort(); /* the launches still reference |ops| */
      }
    }
    for (int k = 0; k < OPS_PER_ROUND; ++k) op_check_and_free(&ops[k], phase->chaos);
  }
  free(ops);
  return NULL;
}

/* Flips device 5 between FAILED and HEALTHY until told to stop. */
static void* chaos_thread(void* arg) {
  (void)arg;
  struct timespec pause = {0, 100000}; /* pacing only: 0.1 ms */
  while (!atomic_load(&g_chaos_stop)) {
    pw_status_t s = pw_cpu_backend_set_health(g_backend, 5, PW_DEVICE_FAILED);
    if (s == NULL) {
      nanosleep(&pause, NULL);
      s = pw_cpu_backend_set_health(g_backend, 5, PW_DEVICE_HEALTHY);
    }
    if (s != NULL) {
      FAIL("set_health: %s", pw_status_message(s));
      pw_status_free(s);
      return NULL;
    }
    atomic_fetch_add(&g_flips, 1);
    nanosleep(&pause, NULL);
  }
  return NULL;
}

static void run_phase(bool chaos) {
  pthread_t threads[THREADS];
  phase_t phases[THREADS];
  pthread_t chaos_id;
  atomic_store(&g_chaos_stop, false);
  if (chaos) pthread_create(&chaos_id, NULL, chaos_thread, NULL);
  for (uintptr_t t = 0; t < THREADS; ++t) {
    phases[t].index = t + (chaos ? THREADS : 0);
    phases[t].chaos = chaos;
    pthread_create(&threads[t], NULL, host_thread, &phases[t]);
  }
  for (int t = 0; t < THREADS; ++t) pthread_join(threads[t], NULL);
  if (chaos) {
    atomic_store(&g_chaos_stop, true);
    pthread_join(chaos_id, NULL);
  }
}

/* A chain relaunched from done callbacks (pool threads): b = a + a, then
 * a = b + b, ... on device 0 of a one-device mesh. */
typedef struct chain_t {
  pw_backend_executable_t exe;
  pw_backend_memory_t buf[2];
  int step;
  int steps;
  cpu_waiter_t waiter;
  uint32_t group[1];
} chain_t;

static void chain_done(void* user, pw_status_t status);

static pw_status_t chain_launch(chain_t* c) {
  int from = c->step % 2;
  pw_backend_memory_t ins[2] = {c->buf[from], c->buf[from]};
  pw_backend_launch_t l = {
      .struct_size = sizeof(l), .executable = c->exe, .device = 0, .mesh_index = 0,
      .group_devices = c->group, .group_size = 1, .gang_id = atomic_fetch_add(&g_gang, 1),
      .inputs = ins, .input_count = 2, .outputs = &c->buf[1 - from], .output_count = 1,
      .done = chain_done, .done_user = c};
  return g_vt->launch(g_backend.self, &l);
}

static void chain_done(void* user, pw_status_t status) {
  chain_t* c = user;
  if (status != NULL || ++c->step == c->steps) {
    cpu_waiter_done(&c->waiter, status);
    return;
  }
  pw_status_t s = chain_launch(c);
  if (s != NULL) cpu_waiter_done(&c->waiter, s);
}

int main(int argc, char** argv) {
  if (argc > 1) g_rounds = atoi(argv[1]);
  clock_gettime(CLOCK_MONOTONIC, &g_start);
  pw_test_allocator_t counting;
  pw_test_allocator_init(&counting);
  pw_status_t s = cpu_create(pw_test_allocator(&counting), DEVICES, 2, 0, &g_backend);
  if (s != NULL) {
    fprintf(stderr, "create: %s\n", pw_status_message(s));
    return 1;
  }
  g_vt = g_backend.vtable;
  g_mesh = pw_mesh_shape_make(1, (uint32_t[]){DEVICES});
  for (int k = 0; k < OP_COUNT; ++k) {
    s = cpu_load_text(g_backend, g_programs[k].text, &g_mesh, &g_programs[k].exe,
                      &g_programs[k].sig);
    if (s != NULL) {
      fprintf(stderr, "load %d: %s\n", k, pw_status_message(s));
      return 1;
    }
  }
  /* The chain, running alongside the host threads. */
  chain_t chain;
  memset(&chain, 0, sizeof(chain));
  pw_mesh_shape_t one = pw_mesh_shape_make(1, (uint32_t[]){1});
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  s = cpu_load_text(g_backend,
                    "kernel add\ninput f32[4] replicated\ninput f32[4] replicated\n"
                    "output f32[4] replicated\n",
                    &one, &chain.exe, &sig);
  if (s != NULL) return 1;
  chain.steps = 20;
  cpu_waiter_init(&chain.waiter, 1);
  float start[4] = {1, 2, 3, 0.5f};
  if (g_vt->allocate(g_backend.self, 0, 16, &chain.buf[0]) != NULL ||
      g_vt->allocate(g_backend.self, 0, 16, &chain.buf[1]) != NULL ||
      g_vt->copy_to_device(g_backend.self, 0, chain.buf[0], 0, start, 16) != NULL) {
    return 1;
  }
  if (chain_launch(&chain) != NULL) return 1;

  run_phase(false);
  run_phase(true);
  if (!cpu_waiter_wait(&chain.waiter, 30000)) {
    FAIL("the chain did not finish");
    abort();
  }
  if (chain.waiter.errors != 0) FAIL("chain: %s", pw_status_message(chain.waiter.first_error));
  float end[4];
  if (g_vt->copy_to_host(g_backend.self, 0, chain.buf[chain.steps % 2], 0, end, 16) != NULL) {
    FAIL("chain copy");
  }
  for (int i = 0; i < 4; ++i) {
    if (end[i] != start[i] * (float)(1 << chain.steps)) FAIL("chain element %d: %g", i, end[i]);
  }
  cpu_waiter_destroy(&chain.waiter);
  g_vt->deallocate(g_backend.self, 0, chain.buf[0]);
  g_vt->deallocate(g_backend.self, 0, chain.buf[1]);
  g_vt->unload(g_backend.self, chain.exe);
  for (int k = 0; k < OP_COUNT; ++k) g_vt->unload(g_backend.self, g_programs[k].exe);
  cpu_destroy(g_backend);
  if (pw_test_allocator_live(&counting) != 0) FAIL("%zu allocations leaked",
                                                   pw_test_allocator_live(&counting));
  if (atomic_load(&g_dones) != atomic_load(&g_launches)) {
    FAIL("%llu dones for %llu launches", (unsigned long long)atomic_load(&g_dones),
         (unsigned long long)atomic_load(&g_launches));
  }
  int failures = atomic_load(&g_failures);
  printf("stress_cpu_backend: %llu launches, %llu dones, %llu health flips, %llu "
         "collectives failed by them, %.2f s, %d failures\n",
         (unsigned long long)atomic_load(&g_launches),
         (unsigned long long)atomic_load(&g_dones),
         (unsigned long long)atomic_load(&g_flips),
         (unsigned long long)atomic_load(&g_failed_ops), elapsed_s(), failures);
  return failures == 0 ? 0 : 1;
}
