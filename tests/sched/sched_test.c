/* Gang scheduler policies: proportional share of device time (Pathways
 * paper, Fig. 9), no banking of credit by idle clients, strict priority.
 * Ops are one CPU-backend kernel that spins for a fixed time and logs
 * which client it ran for; with a window of one op per slice, the log is
 * the admission order. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(sched, .fini = pw_test_check_leaks);

enum { kMaxLog = 8192, kClients = 4 };

typedef struct run_log_t {
  atomic_int gate_open;       /* the gate op spins until this is set */
  atomic_uint count;
  int client[kMaxLog];
  int64_t ns[kMaxLog];
} run_log_t;

static run_log_t g_log;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* spin_log: spins |us| microseconds on every device; device 0 logs the
 * client (attr client) and the time it spun. client -1 is the gate. */
static pw_status_t spin_log_run(const pw_cpu_kernel_call_t* call) {
  int client = (int)pw_cpu_program_number_attr(call->program, "client", 0);
  double us = pw_cpu_program_number_attr(call->program, "us", 0);
  if (client < 0) {
    while (!atomic_load(&g_log.gate_open)) {
    }
    return NULL;
  }
  int64_t t0 = now_ns();
  while (now_ns() - t0 < (int64_t)(us * 1000)) {
  }
  if (call->mesh_index == 0) {
    unsigned i = atomic_fetch_add(&g_log.count, 1);
    if (i < kMaxLog) {
      g_log.client[i] = client;
      g_log.ns[i] = now_ns() - t0;
    }
  }
  return NULL;
}

static void register_spin(pw_backend_t backend) {
  static const pw_cpu_param_spec_t out = {"out", PW_CPU_DTYPES_ANY, -1};
  static const pw_cpu_attr_spec_t attrs[] = {{"client", PW_CPU_ATTR_NUMBER, true},
                                             {"us", PW_CPU_ATTR_NUMBER, true}};
  pw_cpu_kernel_def_t def = {0};
  def.struct_size = sizeof(def);
  def.name = "spin_log";
  def.output_count = 1;
  def.outputs = &out;
  def.attr_count = 2;
  def.attrs = attrs;
  def.run = spin_log_run;
  OK(pw_cpu_backend_register_kernel(backend, &def));
}

typedef struct sched_env_t {
  pw_runtime_t* runtime;
  pw_backend_t backend;
  pw_client_t* clients[kClients + 1]; /* last: the gate's client */
  pw_vslice_t vs[kClients + 1];
  pw_graph_t graph[kClients + 1];
} sched_env_t;

static void env_init(sched_env_t* e, pw_sched_policy_t policy, const uint32_t* weights,
                     const int32_t* priorities) {
  memset(e, 0, sizeof(*e));
  memset(&g_log, 0, sizeof(g_log));
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = 2;
  o.worker_count = 2;
  OK(pw_cpu_backend_create(&o, &e->backend));
  register_spin(e->backend);
  pw_slice_desc_t slice = {"shared", PW_MESH_SHAPE_INIT(1, 2), 0, 0, 0};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &e->backend;
  ro.backend_count = 1;
  ro.slices = &slice;
  ro.slice_count = 1;
  ro.sched_policy = policy;
  ro.sched_window = 1;
  OK(pw_runtime_create(&ro, &e->runtime));
  for (int c = 0; c <= kClients; ++c) {
    pw_client_options_t co = {sizeof(co), NULL, c < kClients ? weights[c] : 1,
                              c < kClients && priorities ? priorities[c] : 100};
    OK(pw_client_create(e->runtime, &co, &e->clients[c]));
    pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(1, 2);
    OK(pw_vslice_create(e->clients[c], &mesh, 0, &e->vs[c]));
    char program[256];
    snprintf(program, sizeof(program),
             "kernel spin_log\noutput u8[2] split(0,0)\nattr client %d\nattr us 100\n",
             c < kClients ? c : -1);
    pw_executable_t exe;
    OK(pw_executable_compile(e->clients[c], e->vs[c], program, strlen(program), NULL, &exe));
    OK(pw_graph_create(e->clients[c], &e->graph[c]));
    uint32_t node;
    OK(pw_graph_add_compute(e->clients[c], e->graph[c], "spin", exe, e->vs[c], NULL, 0, &node));
    OK(pw_graph_add_output(e->clients[c], e->graph[c], pw_value(node, 0)));
  }
}

/* Submits |count| one-op executions for client |c| (outputs released at
 * once: the work still runs). Returns the last done event. */
static pw_event_t* submit_many(sched_env_t* e, int c, int count) {
  pw_event_t* last = NULL;
  for (int i = 0; i < count; ++i) {
    pw_buffer_t out;
    pw_event_t* done;
    OK(pw_graph_submit(e->clients[c], e->graph[c], NULL, 0, NULL, &out, 1, &done));
    OK(pw_buffer_release(e->clients[c], out));
    pw_event_release(last);
    last = done;
  }
  return last;
}

static void env_deinit(sched_env_t* e) {
  for (int c = 0; c <= kClients; ++c) pw_client_destroy(e->clients[c]);
  pw_runtime_destroy(e->runtime);
}

/* Fair share with every op charged kOpCost instead of its measured device
 * time. The bundled policy does the arithmetic (activate, pick and charge
 * are its own); only the amount differs, so the admission order depends on
 * the weights alone and not on how a shared machine happened to time the
 * spins (a preempted spin would be charged milliseconds). That the runtime
 * measures device time is checked apart: every charge it makes is at least
 * the op's spin on both devices. */
enum { kOpCost = 1000, kSpinNs = 100 * 1000, kDevices = 2 };

typedef struct fixed_cost_t {
  pw_sched_policy_t inner;
  atomic_uint charges;
  atomic_ullong min_ns;
} fixed_cost_t;

static fixed_cost_t g_fixed;

static void fixed_activate(void* self, pw_sched_candidate_t* client,
                           const pw_sched_candidate_t* others, uint32_t other_count) {
  fixed_cost_t* f = self;
  f->inner.vtable->activate(f->inner.self, client, others, other_count);
}

static uint32_t fixed_pick(void* self, const pw_sched_candidate_t* candidates, uint32_t count) {
  fixed_cost_t* f = self;
  return f->inner.vtable->pick(f->inner.self, candidates, count);
}

static void fixed_charge(void* self, pw_sched_candidate_t* client, uint64_t device_ns) {
  fixed_cost_t* f = self;
  atomic_fetch_add(&f->charges, 1);
  unsigned long long min = atomic_load(&f->min_ns);
  while (device_ns < min && !atomic_compare_exchange_weak(&f->min_ns, &min, device_ns)) {
  }
  f->inner.vtable->charge(f->inner.self, client, kOpCost);
}

static const pw_sched_policy_vtable_t g_fixed_vtable = {
    .struct_size = sizeof(pw_sched_policy_vtable_t),
    .name = "fair_share_fixed_cost",
    .wants_charge = true,
    .activate = fixed_activate,
    .pick = fixed_pick,
    .charge = fixed_charge,
};

static pw_sched_policy_t fixed_cost_fair_share(void) {
  g_fixed.inner = pw_sched_policy_fair_share();
  atomic_store(&g_fixed.charges, 0);
  atomic_store(&g_fixed.min_ns, ~0ull);
  pw_sched_policy_t p = {&g_fixed_vtable, &g_fixed};
  return p;
}

/* |ops| ran for |clients| clients. An op's device time is charged when
 * its client's next op is admitted (one op in flight: exactly one op per
 * charge), so every op was charged but each client's last, with at least
 * its spin on both devices. */
static void check_measured_charges(unsigned ops, unsigned clients) {
  cr_assert_eq(atomic_load(&g_fixed.charges), ops - clients, "%u charges for %u ops",
               atomic_load(&g_fixed.charges), ops);
  cr_assert_geq(atomic_load(&g_fixed.min_ns), (unsigned long long)kSpinNs * kDevices,
                "an op was charged %llu ns of device time, less than its spin",
                (unsigned long long)atomic_load(&g_fixed.min_ns));
}

/* Snapshot of every client's ops and accounted device time, taken on the
 * thread that completes the heaviest client's last op: at that instant
 * every client has been backlogged the whole time. */
typedef struct snapshot_t {
  sched_env_t* env;
  uint64_t device_ns[kClients];
  uint64_t ops[kClients];
  atomic_int taken;
} snapshot_t;

static void take_snapshot(void* user, pw_status_t status) {
  snapshot_t* snap = user;
  pw_status_free(status);
  for (int c = 0; c < kClients; ++c) {
    pw_client_slice_stats_t stats = {.struct_size = sizeof(pw_client_slice_stats_t)};
    pw_status_ignore(pw_client_slice_stats(snap->env->clients[c], 0, &stats));
    snap->device_ns[c] = stats.device_ns;
    snap->ops[c] = stats.ops_completed;
  }
  atomic_store(&snap->taken, 1);
}

Test(sched, fair_share_gives_device_time_in_proportion_to_weights) {
  const uint32_t weights[kClients] = {1, 2, 4, 8};
  sched_env_t e;
  env_init(&e, fixed_cost_fair_share(), weights, NULL);
  /* The gate holds the slice while every client queues up work. */
  pw_event_t* gate = submit_many(&e, kClients, 1);
  enum { kPerClient = 800 };
  pw_event_t* last[kClients];
  for (int c = 0; c < kClients; ++c) last[c] = submit_many(&e, c, kPerClient);
  snapshot_t snap = {.env = &e};
  OK(pw_event_on_ready(last[3], take_snapshot, &snap));
  atomic_store(&g_log.gate_open, 1);
  for (int c = 0; c < kClients; ++c) OK(pw_fixture_wait(last[c]));
  OK(pw_fixture_wait(gate));
  cr_assert(atomic_load(&snap.taken));
  cr_assert_eq(atomic_load(&g_log.count), kClients * kPerClient);
  check_measured_charges(kClients * kPerClient + 1, kClients + 1);
  /* While all four were backlogged (the Pathways paper's Fig. 9
   * experiment), each got ops, and so charged time, in proportion to its
   * weight: client 3 ran its 800, the others 800 * w / 8, give or take the
   * op in flight when the snapshot was taken. */
  cr_assert_eq(snap.ops[3], kPerClient);
  for (int c = 0; c < kClients; ++c) {
    long want = (long)kPerClient * weights[c] / weights[3];
    cr_log_info("client weight %u: %llu ops (share %ld)", weights[c],
                (unsigned long long)snap.ops[c], want);
    cr_assert(labs((long)snap.ops[c] - want) <= 2,
              "client with weight %u ran %llu ops while the heaviest ran %d; its share is %ld",
              weights[c], (unsigned long long)snap.ops[c], kPerClient, want);
    /* The measured device time the runtime accounted to it. */
    cr_assert_geq(snap.device_ns[c], snap.ops[c] * kSpinNs * kDevices);
  }
  for (int c = 0; c < kClients; ++c) {
    pw_client_slice_stats_t stats = {.struct_size = sizeof(pw_client_slice_stats_t)};
    OK(pw_client_slice_stats(e.clients[c], 0, &stats));
    cr_assert_eq(stats.ops_completed, kPerClient);
  }
  pw_client_slice_stats_t stats = {.struct_size = sizeof(pw_client_slice_stats_t)};
  pw_status_t st = pw_client_slice_stats(e.clients[0], 7, &stats);
  cr_assert_eq(pw_status_code(st), PW_STATUS_OUT_OF_RANGE);
  pw_status_free(st);
  env_deinit(&e);
}

Test(sched, idle_client_does_not_bank_credit) {
  const uint32_t weights[kClients] = {1, 1, 1, 1};
  sched_env_t e;
  env_init(&e, fixed_cost_fair_share(), weights, NULL);
  atomic_store(&g_log.gate_open, 1);
  /* Client 1 runs alone for a while; client 0 is idle. */
  pw_event_t* b_done = submit_many(&e, 1, 300);
  while (atomic_load(&g_log.count) < 150) {
    /* Poll without taking a core from the two pool threads. */
    struct timespec pause = {0, 100000};
    nanosleep(&pause, NULL);
  }
  pw_event_t* a_done = submit_many(&e, 0, 150);
  OK(pw_fixture_wait(a_done));
  OK(pw_fixture_wait(b_done));
  /* From client 0's first op on, both clients are backlogged. With banked
   * credit client 0 would run its whole backlog (~150 ops) before client 1
   * got the slice again; without, they alternate: every op costs the
   * same (fixed_cost_fair_share), so exactly, but for the op client 1
   * had in flight when client 0 came back. */
  unsigned n = atomic_load(&g_log.count), first_a = 0;
  while (first_a < n && g_log.client[first_a] != 0) ++first_a;
  cr_assert_lt(first_a, n);
  unsigned window = 100, a = 0, run = 0, longest = 0;
  for (unsigned i = first_a; i < first_a + window && i < n; ++i) {
    bool is_a = g_log.client[i] == 0;
    a += is_a;
    run = is_a ? run + 1 : 0;
    if (run > longest) longest = run;
  }
  cr_assert(longest <= 2, "returning client ran %u ops in a row: it banked credit", longest);
  cr_assert(a >= 49 && a <= 51, "returning client ran %u of the next %u ops (fair: 50)", a,
            window);
  check_measured_charges(450, 2);
  env_deinit(&e);
}

Test(sched, strict_priority_runs_higher_priority_first) {
  const uint32_t weights[kClients] = {1, 1, 1, 1};
  const int32_t priorities[kClients] = {0, 3, 1, 2};
  sched_env_t e;
  env_init(&e, pw_sched_policy_priority(), weights, priorities);
  pw_event_t* gate = submit_many(&e, kClients, 1);
  pw_event_t* last[kClients];
  for (int c = 0; c < kClients; ++c) last[c] = submit_many(&e, c, 20);
  atomic_store(&g_log.gate_open, 1);
  for (int c = 0; c < kClients; ++c) OK(pw_fixture_wait(last[c]));
  OK(pw_fixture_wait(gate));
  /* Order of completion: all of client 1 (prio 3), then 3, 2, 0. The
   * window admits one op at a time, so the log is exactly that order. */
  const int expect[kClients] = {1, 3, 2, 0};
  cr_assert_eq(atomic_load(&g_log.count), 80);
  for (unsigned i = 0; i < 80; ++i) {
    cr_assert_eq(g_log.client[i], expect[i / 20], "log[%u] = client %d", i, g_log.client[i]);
  }
  env_deinit(&e);
}

Test(sched, fifo_window_keeps_submission_order_and_bad_policy_is_rejected) {
  const uint32_t weights[kClients] = {8, 4, 2, 1};
  sched_env_t e;
  env_init(&e, pw_sched_policy_fifo(), weights, NULL);
  pw_event_t* gate = submit_many(&e, kClients, 1);
  pw_event_t* last[kClients] = {0};
  for (int round = 0; round < 10; ++round) {
    for (int c = 0; c < kClients; ++c) {
      pw_event_release(last[c]);
      last[c] = submit_many(&e, c, 1);
    }
  }
  atomic_store(&g_log.gate_open, 1);
  for (int c = 0; c < kClients; ++c) OK(pw_fixture_wait(last[c]));
  OK(pw_fixture_wait(gate));
  for (unsigned i = 0; i < 40; ++i) cr_assert_eq(g_log.client[i], (int)(i % kClients));
  env_deinit(&e);

  pw_sched_policy_vtable_t broken = {sizeof(broken), "broken", false, NULL, NULL, NULL};
  pw_double_options_t dopts;
  pw_double_options_init(&dopts);
  pw_backend_t b;
  OK(pw_double_backend_create(&dopts, &b));
  pw_slice_desc_t slice = {"s", PW_MESH_SHAPE_INIT(1, 8), 0, 0, 0};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &b;
  ro.backend_count = 1;
  ro.slices = &slice;
  ro.slice_count = 1;
  ro.sched_policy = (pw_sched_policy_t){&broken, NULL};
  ro.sched_window = 1;
  pw_runtime_t* rt;
  pw_status_t s = pw_runtime_create(&ro, &rt);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(pw_status_message(s), "scheduling policy 'broken'"), "%s",
            pw_status_message(s));
  pw_status_free(s);
}

Test(sched, ops_enter_the_slice_in_the_order_nodes_were_added) {
  /* Nodes added as: a(); b(a); c(); d(b). Dependencies alone would allow
   * a and c first (a breadth-first order runs a, c, b, d); the plan keeps
   * the order of addition, a, b, c, d, so a caller writes a schedule (a
   * pipeline's GPipe or 1F1B order) by the order it adds nodes. */
  memset(&g_log, 0, sizeof(g_log));
  atomic_store(&g_log.gate_open, 1);
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = 2;
  o.worker_count = 1;
  pw_backend_t backend;
  OK(pw_cpu_backend_create(&o, &backend));
  register_spin(backend);
  /* spin_log1: the same kernel with one input, to express dependencies. */
  static const pw_cpu_param_spec_t any = {"x", PW_CPU_DTYPES_ANY, -1};
  static const pw_cpu_attr_spec_t attrs[] = {{"client", PW_CPU_ATTR_NUMBER, true},
                                             {"us", PW_CPU_ATTR_NUMBER, true}};
  pw_cpu_kernel_def_t def = {0};
  def.struct_size = sizeof(def);
  def.name = "spin_log1";
  def.input_count = 1;
  def.inputs = &any;
  def.output_count = 1;
  def.outputs = &any;
  def.attr_count = 2;
  def.attrs = attrs;
  def.run = spin_log_run;
  OK(pw_cpu_backend_register_kernel(backend, &def));
  pw_slice_desc_t slice = {"s", PW_MESH_SHAPE_INIT(1, 2), 0, 0, 0};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = &slice;
  ro.slice_count = 1;
  pw_runtime_t* rt;
  OK(pw_runtime_create(&ro, &rt));
  pw_client_t* c;
  OK(pw_client_create(rt, NULL, &c));
  pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(1, 2);
  pw_vslice_t vs;
  OK(pw_vslice_create(c, &mesh, 0, &vs));
  pw_executable_t exe[4];
  for (int i = 0; i < 4; ++i) {
    char program[256];
    bool has_input = i == 1 || i == 3;
    snprintf(program, sizeof(program), "kernel %s\n%soutput u8[2] split(0,0)\nattr client %d\nattr us 1\n",
             has_input ? "spin_log1" : "spin_log", has_input ? "input u8[2] split(0,0)\n" : "", i);
    OK(pw_executable_compile(c, vs, program, strlen(program), NULL, &exe[i]));
  }
  pw_graph_t g;
  OK(pw_graph_create(c, &g));
  uint32_t a, b, cc, d;
  OK(pw_graph_add_compute(c, g, "a", exe[0], vs, NULL, 0, &a));
  OK(pw_graph_add_compute(c, g, "b", exe[1], vs, &(pw_value_t){a, 0}, 1, &b));
  OK(pw_graph_add_compute(c, g, "c", exe[2], vs, NULL, 0, &cc));
  OK(pw_graph_add_compute(c, g, "d", exe[3], vs, &(pw_value_t){b, 0}, 1, &d));
  OK(pw_graph_add_output(c, g, pw_value(d, 0)));
  OK(pw_graph_add_output(c, g, pw_value(cc, 0)));
  pw_buffer_t outs[2];
  pw_event_t* done;
  OK(pw_graph_submit(c, g, NULL, 0, NULL, outs, 2, &done));
  OK(pw_fixture_wait(done));
  cr_assert_eq(atomic_load(&g_log.count), 4);
  for (int i = 0; i < 4; ++i) cr_assert_eq(g_log.client[i], i, "position %d ran node %d", i, g_log.client[i]);
  pw_client_destroy(c);
  pw_runtime_destroy(rt);
}
