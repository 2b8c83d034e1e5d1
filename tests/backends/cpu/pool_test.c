/* CPU backend pool options (v3): spin_us and worker affinity. Bad values
 * are INVALID_ARGUMENT naming the field; fields beyond struct_size are
 * ignored; a pinned worker runs on the CPU it was given (checked from
 * inside a kernel); spinning and parking pools run chains and gangs. The
 * hand-off stress and the idle-CPU bound are in pool_stress.c. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_* */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "cpu_test_support.h"
#include "support/test_allocators.h"

TestSuite(cpu_pool, .fini = pw_test_check_leaks);

static void expect_invalid(const pw_cpu_backend_options_t* o, const char* part) {
  pw_backend_t b;
  pw_status_t s = pw_cpu_backend_create(o, &b);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT, "got %s: %s",
               pw_status_code_string(pw_status_code(s)), pw_status_message(s));
  cr_assert(strstr(pw_status_message(s), part) != NULL, "'%s' not in '%s'", part,
            pw_status_message(s));
  cr_assert_null(b.vtable);
  cr_assert_null(b.self);
  pw_status_free(s);
}

static void expect_created(const pw_cpu_backend_options_t* o) {
  pw_backend_t b;
  pw_status_t s = pw_cpu_backend_create(o, &b);
  cr_assert_null(s, "%s", pw_status_message(s));
  cpu_destroy(b);
}

static cpu_set_t allowed_cpus(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
  cr_assert_gt(CPU_COUNT(&set), 0);
  return set;
}

static uint32_t first_cpu(const cpu_set_t* set) {
  for (uint32_t cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, set)) return cpu;
  }
  cr_assert_fail("no CPU in the set");
  return 0;
}

Test(cpu_pool, defaults_and_v3_values) {
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  cr_assert_eq(o.struct_size, sizeof(o));
  cr_assert_geq(o.struct_size, PW_CPU_BACKEND_OPTIONS_SIZE_V3);
  cr_assert_eq(o.spin_us, PW_CPU_DEFAULT_SPIN_US);
  cr_assert_eq(o.affinity, PW_CPU_AFFINITY_NONE);
  expect_created(&o);
  o.spin_us = 0; /* the default */
  expect_created(&o);
  o.spin_us = PW_CPU_SPIN_OFF;
  expect_created(&o);
  o.spin_us = PW_CPU_MAX_SPIN_US;
  expect_created(&o);
  o.spin_us = 1;
  o.affinity = PW_CPU_AFFINITY_ROUND_ROBIN;
  expect_created(&o);
}

Test(cpu_pool, bad_values_name_the_field) {
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.spin_us = PW_CPU_MAX_SPIN_US + 1;
  expect_invalid(&o, "spin_us 100001");
  o.spin_us = PW_CPU_SPIN_OFF - 1;
  expect_invalid(&o, "spin_us");

  pw_cpu_backend_options_init(&o);
  o.affinity = 3;
  expect_invalid(&o, "affinity 3");

  pw_cpu_backend_options_init(&o);
  o.affinity = PW_CPU_AFFINITY_LIST;
  expect_invalid(&o, "affinity_cpus"); /* no list */
  cpu_set_t set = allowed_cpus();
  uint32_t good = first_cpu(&set);
  uint32_t list[3] = {good, good, 5000};
  o.affinity_cpus = list;
  o.affinity_cpu_count = 0;
  expect_invalid(&o, "affinity_cpu_count 0");
  o.affinity_cpu_count = PW_CPU_MAX_WORKERS + 1;
  expect_invalid(&o, "affinity_cpu_count");
  o.affinity_cpu_count = 3;
  expect_invalid(&o, "affinity_cpus[2] is CPU 5000");
  /* A CPU below CPU_SETSIZE the process may not run on, if there is one. */
  uint32_t outside = CPU_SETSIZE;
  for (uint32_t cpu = 0; cpu < CPU_SETSIZE && outside == CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) outside = cpu;
  }
  list[1] = outside;
  char want[64];
  snprintf(want, sizeof(want), "affinity_cpus[1] is CPU %u", outside);
  expect_invalid(&o, want);
  list[1] = good;
  list[2] = good;
  expect_created(&o);
}

Test(cpu_pool, fields_beyond_struct_size_are_ignored) {
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.struct_size = PW_CPU_BACKEND_OPTIONS_SIZE_V2;
  o.spin_us = PW_CPU_MAX_SPIN_US + 1;
  o.affinity = 77;
  expect_created(&o);
  /* A struct that reaches affinity but not the list. */
  pw_cpu_backend_options_init(&o);
  o.struct_size = PW_STRUCT_SIZE(pw_cpu_backend_options_t, affinity);
  o.affinity = PW_CPU_AFFINITY_LIST;
  expect_invalid(&o, "does not reach affinity_cpus");
}

/* A kernel that records the CPU set of the worker running it. */
typedef struct where_t {
  pthread_mutex_t mutex;
  uint32_t calls;
  cpu_set_t sets[8];
} where_t;

static pw_status_t where_run(const pw_cpu_kernel_call_t* call) {
  where_t* w = call->user;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    return pw_status_make(PW_STATUS_INTERNAL, "sched_getaffinity failed");
  }
  pthread_mutex_lock(&w->mutex);
  if (w->calls < 8) w->sets[w->calls] = set;
  w->calls++;
  pthread_mutex_unlock(&w->mutex);
  return NULL;
}

/* Runs "test.where" on each of |devices| devices of a backend made with
 * |o| (in one 1-device gang each, from this thread) and fills |w|. */
static void run_where(pw_cpu_backend_options_t* o, uint32_t devices, where_t* w) {
  pw_test_allocator_t counting;
  pw_test_allocator_init(&counting);
  o->allocator = pw_test_allocator(&counting);
  o->device_count = devices;
  pw_backend_t b;
  pw_status_t s = pw_cpu_backend_create(o, &b);
  cr_assert_null(s, "%s", pw_status_message(s));
  static const pw_cpu_param_spec_t out = {"y", PW_CPU_DTYPES_ANY, -1};
  pw_cpu_kernel_def_t def = {.struct_size = sizeof(def), .name = "test.where",
                             .output_count = 1, .outputs = &out, .run = where_run,
                             .user = w};
  memset(w, 0, sizeof(*w));
  pthread_mutex_init(&w->mutex, NULL);
  cr_assert_null(pw_cpu_backend_register_kernel(b, &def));
  pw_mesh_shape_t one = pw_mesh_shape_make(1, (uint32_t[]){1});
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  cr_assert_null(cpu_load_text(b, "kernel test.where\noutput u8[1] replicated\n", &one, &exe,
                               &sig));
  pw_backend_memory_t mem[8];
  uint32_t groups[8];
  cpu_waiter_t waiter;
  cpu_waiter_init(&waiter, devices);
  for (uint32_t d = 0; d < devices; ++d) {
    cr_assert_null(b.vtable->allocate(b.self, d, 1, &mem[d]));
    groups[d] = d;
    pw_backend_launch_t l = {.struct_size = sizeof(l), .executable = exe, .device = d,
                             .group_devices = &groups[d], .group_size = 1, .gang_id = d + 1,
                             .outputs = &mem[d], .output_count = 1, .done = cpu_waiter_done,
                             .done_user = &waiter};
    cr_assert_null(b.vtable->launch(b.self, &l));
  }
  cr_assert(cpu_waiter_wait(&waiter, 20000));
  cr_assert_eq(waiter.errors, 0);
  cr_assert_eq(w->calls, devices);
  for (uint32_t d = 0; d < devices; ++d) b.vtable->deallocate(b.self, d, mem[d]);
  b.vtable->unload(b.self, exe);
  cpu_waiter_destroy(&waiter);
  cpu_destroy(b);
  pthread_mutex_destroy(&w->mutex);
  cr_assert_eq(pw_test_allocator_live(&counting), 0);
}

Test(cpu_pool, a_list_pins_every_worker) {
  cpu_set_t allowed = allowed_cpus();
  uint32_t cpu = first_cpu(&allowed);
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.worker_count = 3;
  o.affinity = PW_CPU_AFFINITY_LIST;
  o.affinity_cpus = &cpu; /* copied at creation: every worker on |cpu| */
  o.affinity_cpu_count = 1;
  where_t w;
  run_where(&o, 6, &w);
  for (uint32_t i = 0; i < 6; ++i) {
    cr_assert_eq(CPU_COUNT(&w.sets[i]), 1, "call %u ran with %d CPUs", i,
                 CPU_COUNT(&w.sets[i]));
    cr_assert(CPU_ISSET(cpu, &w.sets[i]), "call %u not on CPU %u", i, cpu);
  }
}

Test(cpu_pool, round_robin_pins_each_worker_to_one_allowed_cpu) {
  cpu_set_t allowed = allowed_cpus();
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.worker_count = 4;
  o.affinity = PW_CPU_AFFINITY_ROUND_ROBIN;
  where_t w;
  run_where(&o, 8, &w);
  for (uint32_t i = 0; i < 8; ++i) {
    cr_assert_eq(CPU_COUNT(&w.sets[i]), 1);
    cpu_set_t both;
    CPU_AND(&both, &w.sets[i], &allowed);
    cr_assert_eq(CPU_COUNT(&both), 1, "call %u ran on a CPU outside the process's set", i);
  }
}

Test(cpu_pool, no_affinity_leaves_workers_on_the_process_set) {
  cpu_set_t allowed = allowed_cpus();
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.worker_count = 2;
  where_t w;
  run_where(&o, 4, &w);
  for (uint32_t i = 0; i < 4; ++i) cr_assert(CPU_EQUAL(&w.sets[i], &allowed));
}

/* Spinning or parking, with budgets that adapt on every path, a pool runs
 * a 4-device gang from this thread many times, each part once. */
Test(cpu_pool, every_spin_setting_runs_every_launch_once) {
  static const uint32_t spins[] = {PW_CPU_SPIN_OFF, 0, 1, 5000};
  for (size_t k = 0; k < sizeof(spins) / sizeof(spins[0]); ++k) {
    pw_cpu_backend_options_t o;
    pw_cpu_backend_options_init(&o);
    o.worker_count = 3;
    o.spin_us = spins[k];
    where_t w;
    for (int round = 0; round < 20; ++round) {
      run_where(&o, 4, &w);
      cr_assert_eq(w.calls, 4);
    }
  }
}
