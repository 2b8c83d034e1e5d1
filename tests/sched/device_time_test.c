/* Fair share charges device time as the device reports it (done_timed), not
 * the host's launch-to-done wall clock. On the sim backend in MANUAL mode
 * (nothing completes until this thread steps the simulation, so every run
 * is deterministic) two clients of equal weight run a 100 us and an 800 us
 * program, both backlogged under a window; each must get half the device,
 * and each client's charged device_ns must equal the virtual busy time of
 * its ops as the sim's trace reports it. Also: an op admitted before the
 * host steps the simulation is charged its virtual time, not the host's
 * wait; the queue-ordered sim (queue_depth > 0) charges the same; an op
 * failed by a chip failure is charged up to the failure. A launch without
 * done_timed (the sim sees a v1 descriptor) shows what the host clock
 * would charge instead. A disabled case shows the fair-share pass
 * wrapping (64-bit) on long-running fleets. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "pathways/pathways.h"
#include "runtime/checks.h"
#include "support/test_allocators.h"

TestSuite(device_time, .fini = pw_test_check_leaks);

enum {
  kClients = 2,
  kDevices = 2,
  kShortNs = 100 * 1000, /* client 0's program, virtual ns per device */
  kLongNs = 800 * 1000,  /* client 1's */
  kShortOps = 1200,      /* 120 ms of virtual time each ... */
  kLongOps = 150,        /* ... so both stay backlogged past kSnapshotNs */
  kSnapshotNs = 160 * 1000 * 1000,
};

static const uint64_t kCostNs[kClients] = {kShortNs, kLongNs};
/* The programs of the env being set up (kCostNs unless a test says). */
static const uint64_t* g_cost_ns = kCostNs;
/* A chip failure scheduled in the env being set up, if any. */
static const pw_sim_failure_t* g_failure;

/* What the sim's trace saw of each client's ops (op name "client<c>"):
 * virtual busy time [start, end) summed over devices (a failed op: up to
 * the failure), and completions. */
typedef struct busy_t {
  atomic_ullong ns[kClients];
  atomic_ullong events[kClients];
} busy_t;

static busy_t g_busy;

static void trace_busy(void* user, const pw_sim_event_t* event) {
  (void)user;
  bool ran = event->kind == PW_SIM_EVENT_DONE || event->kind == PW_SIM_EVENT_FAILED;
  if (!ran || strncmp(event->op, "client", 6) != 0) return;
  int c = event->op[6] - '0';
  if (c < 0 || c >= kClients) return;
  atomic_fetch_add(&g_busy.ns[c], event->time - event->start);
  atomic_fetch_add(&g_busy.events[c], 1);
}

/* Hides done_timed from the sim: its launches reach it as v1 descriptors,
 * so it calls done and the runtime falls back to the host's clock. */
static pw_backend_vtable_t g_v1_vtable;
static pw_status_t (*g_sim_launch)(void* self, const pw_backend_launch_t* launch);

static pw_status_t launch_as_v1(void* self, const pw_backend_launch_t* launch) {
  pw_backend_launch_t l = *launch;
  l.struct_size = PW_BACKEND_LAUNCH_SIZE_V1;
  return g_sim_launch(self, &l);
}

typedef struct env_t {
  pw_runtime_t* runtime;
  pw_backend_t sim; /* a copy for stepping; the runtime owns the backend */
  pw_client_t* clients[kClients];
  pw_vslice_t vs[kClients];
  pw_executable_t exe[kClients];
  pw_graph_t graph[kClients];
  pw_event_t* last[kClients];
} env_t;

/* A MANUAL sim of one slice of kDevices chips (|queue_depth| > 0: queue
 * ordered), a runtime with one slice under fair share and |window|, and
 * two clients of weight 1, client c with a one-op graph of kCostNs[c]. */
static void env_init(env_t* e, uint32_t queue_depth, uint32_t window, bool hide_timing) {
  memset(e, 0, sizeof(*e));
  memset(&g_busy, 0, sizeof(g_busy));
  pw_sim_backend_options_t so;
  pw_sim_backend_options_init(&so);
  so.slice_count = 1;
  so.devices_per_slice = kDevices;
  so.mode = PW_SIM_MODE_MANUAL;
  so.queue_depth = queue_depth;
  so.trace = trace_busy;
  so.failures = g_failure;
  so.failure_count = g_failure != NULL ? 1 : 0;
  OK(pw_sim_backend_create(&so, &e->sim));
  pw_backend_t given = e->sim;
  if (hide_timing) {
    g_v1_vtable = *e->sim.vtable;
    g_sim_launch = e->sim.vtable->launch;
    g_v1_vtable.launch = launch_as_v1;
    g_v1_vtable.launch_host = NULL; /* (one launch per device, each v1) */
    given.vtable = &g_v1_vtable;
  }
  pw_slice_desc_t slice = {"shared", PW_MESH_SHAPE_INIT(1, kDevices), 0, 0, 0};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &given;
  ro.backend_count = 1;
  ro.slices = &slice;
  ro.slice_count = 1;
  ro.sched_policy = pw_sched_policy_fair_share();
  ro.sched_window = window;
  OK(pw_runtime_create(&ro, &e->runtime));
  for (int c = 0; c < kClients; ++c) {
    pw_client_options_t co = {sizeof(co), NULL, 1, 0};
    OK(pw_client_create(e->runtime, &co, &e->clients[c]));
    pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(1, kDevices);
    OK(pw_vslice_create(e->clients[c], &mesh, 0, &e->vs[c]));
    char program[64];
    snprintf(program, sizeof(program), "op client%d\ntime %lluns\n", c,
             (unsigned long long)g_cost_ns[c]);
    OK(pw_executable_compile(e->clients[c], e->vs[c], program, strlen(program), NULL,
                             &e->exe[c]));
    OK(pw_graph_create(e->clients[c], &e->graph[c]));
    OK(pw_graph_add_compute(e->clients[c], e->graph[c], "op", e->exe[c], e->vs[c], NULL, 0,
                            NULL));
    OK(pw_graph_finalize(e->clients[c], e->graph[c]));
  }
}

/* Submits |count| executions of client |c|'s graph; keeps the last event. */
static void submit(env_t* e, int c, int count) {
  for (int i = 0; i < count; ++i) {
    pw_event_t* done;
    OK(pw_graph_submit(e->clients[c], e->graph[c], NULL, 0, NULL, NULL, 0, &done));
    pw_event_release(e->last[c]);
    e->last[c] = done;
  }
}

/* Steps the simulation to the end and waits for every client's work. */
static void env_drain(env_t* e) {
  OK(pw_sim_backend_run_all(e->sim, NULL));
  for (int c = 0; c < kClients; ++c) {
    if (e->last[c] == NULL) continue;
    cr_assert(pw_event_is_ready(e->last[c]), "client %d still running after run_all", c);
    OK(pw_event_wait(e->last[c], pw_deadline_from_timeout(5000000000LL)));
    pw_event_release(e->last[c]);
    e->last[c] = NULL;
  }
}

static void env_deinit(env_t* e) {
  for (int c = 0; c < kClients; ++c) {
    OK(pw_graph_release(e->clients[c], e->graph[c]));
    OK(pw_executable_release(e->clients[c], e->exe[c]));
    pw_client_destroy(e->clients[c]);
  }
  pw_runtime_destroy(e->runtime);
}

static pw_client_slice_stats_t stats_of(env_t* e, int c) {
  pw_client_slice_stats_t s = {.struct_size = sizeof(pw_client_slice_stats_t)};
  OK(pw_client_slice_stats(e->clients[c], 0, &s));
  return s;
}

/* Each client's charged device time equals the virtual busy time the sim
 * traced for its ops, and its completed ops cover exactly that time. */
static void check_charged_is_traced(env_t* e, const char* when) {
  for (int c = 0; c < kClients; ++c) {
    pw_client_slice_stats_t s = stats_of(e, c);
    unsigned long long busy = atomic_load(&g_busy.ns[c]);
    cr_assert_eq(s.device_ns, busy,
                 "%s: client %d charged %llu ns of device time, the sim ran its ops %llu ns",
                 when, c, (unsigned long long)s.device_ns, busy);
    cr_assert_eq(s.device_ns, s.ops_completed * kCostNs[c] * kDevices,
                 "%s: client %d charged %llu ns for %llu ops of %llu ns on %d devices", when, c,
                 (unsigned long long)s.device_ns, (unsigned long long)s.ops_completed,
                 (unsigned long long)kCostNs[c], kDevices);
  }
}

typedef struct share_t {
  uint64_t device_ns[kClients];
  uint64_t ops[kClients];
} share_t;

/* Both clients backlogged from the start; the snapshot at kSnapshotNs of
 * virtual time, when both still are. Stride scheduling admits the client
 * charged least; with |window| ops admitted at once, an admitted client
 * may have up to |window| - 1 more ops uncharged in flight, so the charged
 * totals differ by at most |window| of the longest op (800 us on each
 * device): one op, the one in flight at the snapshot, at window 1. */
static share_t run_backlogged(uint32_t queue_depth, uint32_t window) {
  env_t e;
  env_init(&e, queue_depth, window, false);
  submit(&e, 0, kShortOps);
  submit(&e, 1, kLongOps);
  OK(pw_sim_backend_run_until(e.sim, kSnapshotNs, NULL));
  check_charged_is_traced(&e, "at the snapshot");
  share_t snap;
  for (int c = 0; c < kClients; ++c) {
    pw_client_slice_stats_t s = stats_of(&e, c);
    snap.device_ns[c] = s.device_ns;
    snap.ops[c] = s.ops_completed;
  }
  cr_assert_lt(snap.ops[0], kShortOps, "client 0 was not backlogged to the snapshot");
  cr_assert_lt(snap.ops[1], kLongOps, "client 1 was not backlogged to the snapshot");
  uint64_t total = snap.device_ns[0] + snap.device_ns[1];
  uint64_t diff = snap.device_ns[0] > snap.device_ns[1] ? snap.device_ns[0] - snap.device_ns[1]
                                                        : snap.device_ns[1] - snap.device_ns[0];
  uint64_t tolerance = (uint64_t)window * kLongNs * kDevices;
  double share0 = (double)snap.device_ns[0] / (double)total;
  cr_log_info("depth %u window %u: shares %.4f : %.4f (%llu and %llu ops), difference %llu ns",
              queue_depth, window, share0, 1.0 - share0, (unsigned long long)snap.ops[0],
              (unsigned long long)snap.ops[1], (unsigned long long)diff);
  cr_assert_leq(diff, tolerance,
                "depth %u window %u: the 100 us client was charged %llu ns, the 800 us one "
                "%llu ns (shares %.4f : %.4f); equal weights allow %llu ns apart",
                queue_depth, window, (unsigned long long)snap.device_ns[0],
                (unsigned long long)snap.device_ns[1], share0, 1.0 - share0,
                (unsigned long long)tolerance);
  /* The window kept the device busy: everything completed by the
   * snapshot, plus what is in flight, fills the virtual time. */
  cr_assert_geq(total + tolerance, (uint64_t)kSnapshotNs * kDevices);
  env_drain(&e);
  check_charged_is_traced(&e, "at the end");
  for (int c = 0; c < kClients; ++c) {
    cr_assert_eq(stats_of(&e, c).ops_completed, c == 0 ? kShortOps : kLongOps);
  }
  /* Back to back on the device: 120 ms per client. */
  cr_assert_eq(pw_sim_backend_clock(e.sim), (uint64_t)kShortOps * kShortNs * 2);
  env_deinit(&e);
  return snap;
}

Test(device_time, equal_weights_get_half_the_device_each) {
  share_t one = run_backlogged(0, 1);
  /* The 100 us client runs 8 ops per op of the 800 us one. */
  cr_assert_leq(one.ops[0], 8 * one.ops[1] + 8, "%llu short ops vs %llu long",
                (unsigned long long)one.ops[0], (unsigned long long)one.ops[1]);
  cr_assert_geq(one.ops[0] + 8, 8 * one.ops[1], "%llu short ops vs %llu long",
                (unsigned long long)one.ops[0], (unsigned long long)one.ops[1]);
  run_backlogged(0, 4);
}

Test(device_time, queue_ordered_sim_charges_the_same) {
  share_t one = run_backlogged(0, 1);
  share_t queued = run_backlogged(4, 1);
  for (int c = 0; c < kClients; ++c) {
    cr_assert_eq(queued.device_ns[c], one.device_ns[c],
                 "client %d: %llu ns charged queued, %llu ns one launch at a time", c,
                 (unsigned long long)queued.device_ns[c], (unsigned long long)one.device_ns[c]);
    cr_assert_eq(queued.ops[c], one.ops[c]);
  }
  /* Several launches outstanding on each device at once. */
  run_backlogged(4, 4);
}

/* Host time passes between admission and the step: not device time. A
 * sleep is no synchronisation here, only host time the device did not
 * use. */
enum { kHostWaitNs = 30 * 1000 * 1000 };

static void host_wait(void) {
  struct timespec t = {0, kHostWaitNs};
  while (nanosleep(&t, &t) != 0) {
  }
}

/* |per_client| ops of each client admitted (and the first on each device
 * launched) before the step; returns what client 0 was charged. */
static uint64_t admitted_before_step(uint32_t queue_depth, uint32_t per_client,
                                     bool hide_timing) {
  env_t e;
  env_init(&e, queue_depth, kClients * per_client, hide_timing);
  for (int c = 0; c < kClients; ++c) submit(&e, c, (int)per_client);
  /* Queue ordered, every admitted op is on the devices before the step
   * (the sim counts them outstanding); else only the first (one
   * completion queued per device). */
  if (queue_depth > 0) {
    for (uint32_t d = 0; d < kDevices; ++d) {
      pw_sim_device_state_t ds = {.struct_size = sizeof(pw_sim_device_state_t)};
      OK(pw_sim_backend_device_state(e.sim, d, &ds));
      cr_assert_eq(ds.outstanding, kClients * per_client,
                   "depth %u: device %u holds %u launches before the step", queue_depth, d,
                   ds.outstanding);
    }
  } else {
    pw_sim_stats_t st = {.struct_size = sizeof(pw_sim_stats_t)};
    OK(pw_sim_backend_stats(e.sim, &st));
    cr_assert_eq(st.queued, kDevices, "%llu launches wait for the step",
                 (unsigned long long)st.queued);
  }
  host_wait();
  env_drain(&e);
  uint64_t charged = stats_of(&e, 0).device_ns;
  if (!hide_timing) {
    check_charged_is_traced(&e, "after the step");
    for (int c = 0; c < kClients; ++c) {
      cr_assert_eq(stats_of(&e, c).device_ns, per_client * kCostNs[c] * kDevices,
                   "depth %u: client %d charged %llu ns for %u ops of %llu ns", queue_depth, c,
                   (unsigned long long)stats_of(&e, c).device_ns, per_client,
                   (unsigned long long)kCostNs[c]);
    }
  }
  env_deinit(&e);
  return charged;
}

Test(device_time, op_admitted_before_the_step_is_charged_its_virtual_time) {
  /* One launch at a time: client 0's op is launched at submission and
   * completes only when the host steps, 30 ms of host time later. */
  admitted_before_step(0, 1, false);
  /* Queue ordered: every op is launched before the step. */
  admitted_before_step(4, 2, false);
  /* The same without done_timed: the host's wait is what gets charged
   * (the fallback), which is what the runs above must not show. */
  uint64_t host = admitted_before_step(0, 1, true);
  cr_assert_geq(host, (uint64_t)kHostWaitNs,
                "without done_timed the op was charged %llu ns, less than the host's wait",
                (unsigned long long)host);
  uint64_t host_queued = admitted_before_step(4, 2, true);
  cr_assert_geq(host_queued, (uint64_t)kHostWaitNs, "queued, without done_timed: %llu ns",
                (unsigned long long)host_queued);
}

/* A chip that fails inside an op: the sim reports that device's time up
 * to the failure, and that is what is charged. */
Test(device_time, failed_op_is_charged_until_the_failure) {
  enum { kFailAtNs = 30 * 1000 };
  const pw_sim_failure_t failure = {PW_SIM_FAIL_CHIP, 1, kFailAtNs};
  for (uint32_t depth = 0; depth <= 4; depth += 4) {
    g_failure = &failure;
    env_t e;
    env_init(&e, depth, 1, false);
    g_failure = NULL;
    submit(&e, 0, 1);
    OK(pw_sim_backend_run_all(e.sim, NULL));
    FAILS(pw_event_wait(e.last[0], pw_deadline_from_timeout(5000000000LL)),
          PW_STATUS_UNAVAILABLE, "device 1");
    pw_event_release(e.last[0]);
    e.last[0] = NULL;
    uint64_t charged = stats_of(&e, 0).device_ns;
    cr_assert_eq(charged, (uint64_t)kShortNs + kFailAtNs,
                 "depth %u: charged %llu ns; device 0 ran 100 us, device 1 30 us until it "
                 "failed",
                 depth, (unsigned long long)charged);
    cr_assert_eq(charged, atomic_load(&g_busy.ns[0]));
    env_deinit(&e);
  }
}

/* The fair-share pass, device ns x 1024 / weight, would wrap in 64 bits
 * after about 208 device-days per unit of weight (a 4,096-chip slice in
 * use all the time: 73 minutes), and a wrapped client looks as if it had
 * received nothing; it is 128 bits (lib/sched/policies.c). Ops of 1e6 s
 * of virtual time on 2 devices pass 2^64 in 10 ops (2.048e18 each):
 * equal weights and equal ops must still alternate, give or take the op
 * in flight. */
Test(device_time, fair_share_pass_survives_wrapping) {
  static const uint64_t huge[kClients] = {1000000000000000ull, 1000000000000000ull};
  enum { kOps = 40, kSnap = 30 };
  g_cost_ns = huge;
  env_t e;
  env_init(&e, 0, 1, false);
  for (int c = 0; c < kClients; ++c) submit(&e, c, kOps);
  /* kSnap ops in all, alternating (a wrapped pass runs ~9 in a row). */
  OK(pw_sim_backend_run_until(e.sim, huge[0] * kSnap, NULL));
  uint64_t ops[kClients];
  for (int c = 0; c < kClients; ++c) ops[c] = stats_of(&e, c).ops_completed;
  cr_assert_eq(ops[0] + ops[1], kSnap, "the device ran back to back");
  cr_assert(ops[0] <= ops[1] + 1 && ops[1] <= ops[0] + 1,
            "equal weights and ops: %llu ops for one client, %llu for the other (its pass "
            "wrapped?)",
            (unsigned long long)ops[0], (unsigned long long)ops[1]);
  env_drain(&e);
  for (int c = 0; c < kClients; ++c) {
    cr_assert_eq(stats_of(&e, c).device_ns, huge[c] * kOps * kDevices);
  }
  env_deinit(&e);
  g_cost_ns = kCostNs;
}
