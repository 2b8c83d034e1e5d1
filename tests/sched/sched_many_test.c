/* Gang scheduling with more backlogged clients than one policy call sees
 * (PW_SCHED_MAX_CANDIDATES): 129 and 1,000 clients, each with a few
 * one-op programs queued behind a gate op that holds the window (one op).
 * With a window of one, the kernel's log is the admission order, which
 * each test checks exactly: FIFO runs the client that submitted first
 * first; fair share with equal weights goes round all the clients before
 * any runs again. No timing is asserted. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(sched_many, .fini = pw_test_check_leaks);

enum { kRounds = 3, kMaxClients = 1000, kMaxLog = kRounds * kMaxClients };

typedef struct run_log_t {
  atomic_int gate_open;
  atomic_uint count;
  int client[kMaxLog];
} run_log_t;

static run_log_t g_log;

/* log_client: logs attr client; client -1 (the gate) spins until the gate
 * opens. */
static pw_status_t log_client_run(const pw_cpu_kernel_call_t* call) {
  int client = (int)pw_cpu_program_number_attr(call->program, "client", 0);
  if (client < 0) {
    while (!atomic_load(&g_log.gate_open)) {
    }
    return NULL;
  }
  unsigned i = atomic_fetch_add(&g_log.count, 1);
  if (i < kMaxLog) g_log.client[i] = client;
  return NULL;
}

typedef struct many_env_t {
  pw_runtime_t* runtime;
  int clients;                /* plus one more: the gate's */
  pw_client_t** client;
  pw_graph_t* graph;
  pw_event_t** last;
} many_env_t;

static void many_init(many_env_t* e, int clients, pw_sched_policy_t policy) {
  memset(e, 0, sizeof(*e));
  memset(&g_log, 0, sizeof(g_log));
  e->clients = clients;
  e->client = calloc((size_t)clients + 1, sizeof(*e->client));
  e->graph = calloc((size_t)clients + 1, sizeof(*e->graph));
  e->last = calloc((size_t)clients + 1, sizeof(*e->last));
  cr_assert(e->client && e->graph && e->last);
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = 1;
  o.worker_count = 1;
  pw_backend_t backend;
  OK(pw_cpu_backend_create(&o, &backend));
  static const pw_cpu_param_spec_t out = {"out", PW_CPU_DTYPES_ANY, -1};
  static const pw_cpu_attr_spec_t attrs[] = {{"client", PW_CPU_ATTR_NUMBER, true}};
  pw_cpu_kernel_def_t def = {0};
  def.struct_size = sizeof(def);
  def.name = "log_client";
  def.output_count = 1;
  def.outputs = &out;
  def.attr_count = 1;
  def.attrs = attrs;
  def.run = log_client_run;
  OK(pw_cpu_backend_register_kernel(backend, &def));
  pw_slice_desc_t slice = {"shared", PW_MESH_SHAPE_INIT(1, 1), 0, 0, 0};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = &slice;
  ro.slice_count = 1;
  ro.sched_policy = policy;
  ro.sched_window = 1;
  OK(pw_runtime_create(&ro, &e->runtime));
  for (int c = 0; c <= clients; ++c) {
    OK(pw_client_create(e->runtime, NULL, &e->client[c]));
    pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(1, 1);
    pw_vslice_t vs;
    OK(pw_vslice_create(e->client[c], &mesh, 0, &vs));
    char program[128];
    snprintf(program, sizeof(program),
             "kernel log_client\noutput u8[1] split(0,0)\nattr client %d\n",
             c < clients ? c : -1);
    pw_executable_t exe;
    OK(pw_executable_compile(e->client[c], vs, program, strlen(program), NULL, &exe));
    OK(pw_graph_create(e->client[c], &e->graph[c]));
    uint32_t node;
    OK(pw_graph_add_compute(e->client[c], e->graph[c], "log", exe, vs, NULL, 0, &node));
    OK(pw_graph_add_output(e->client[c], e->graph[c], pw_value(node, 0)));
  }
}

/* One one-op execution of client |c| (its output released at once: the
 * work still runs). */
static void many_submit(many_env_t* e, int c) {
  pw_buffer_t out;
  pw_event_t* done;
  OK(pw_graph_submit(e->client[c], e->graph[c], NULL, 0, NULL, &out, 1, &done));
  OK(pw_buffer_release(e->client[c], out));
  pw_event_release(e->last[c]);
  e->last[c] = done;
}

/* The gate takes the window; then |kRounds| rounds in which every client
 * submits one op, client 0 first; then the gate opens and everything
 * runs. */
static void many_run(many_env_t* e) {
  many_submit(e, e->clients);
  for (int r = 0; r < kRounds; ++r) {
    for (int c = 0; c < e->clients; ++c) many_submit(e, c);
  }
  atomic_store(&g_log.gate_open, 1);
  for (int c = 0; c <= e->clients; ++c) {
    OK(pw_fixture_wait(e->last[c]));
    e->last[c] = NULL;
  }
  cr_assert_eq(atomic_load(&g_log.count), (unsigned)(kRounds * e->clients));
}

static void many_deinit(many_env_t* e) {
  for (int c = 0; c <= e->clients; ++c) pw_client_destroy(e->client[c]);
  pw_runtime_destroy(e->runtime);
  free(e->client);
  free(e->graph);
  free(e->last);
}

/* Every round admits each client once, in the order they submitted. */
static void expect_round_robin(const many_env_t* e, unsigned rounds) {
  for (unsigned i = 0; i < rounds * (unsigned)e->clients; ++i) {
    cr_assert_eq(g_log.client[i], (int)(i % (unsigned)e->clients),
                 "admission %u of %d clients ran client %d, its turn was client %u's", i,
                 e->clients, g_log.client[i], i % (unsigned)e->clients);
  }
}

/* Each client ran exactly kRounds ops. */
static void expect_counts(const many_env_t* e) {
  int* ran = calloc((size_t)e->clients, sizeof(int));
  cr_assert_not_null(ran);
  for (unsigned i = 0; i < kRounds * (unsigned)e->clients; ++i) {
    cr_assert(g_log.client[i] >= 0 && g_log.client[i] < e->clients);
    ran[g_log.client[i]]++;
  }
  for (int c = 0; c < e->clients; ++c) {
    cr_assert_eq(ran[c], kRounds, "client %d ran %d ops of %d", c, ran[c], kRounds);
  }
  free(ran);
}

static void fifo_runs_in_submission_order(int clients) {
  many_env_t e;
  many_init(&e, clients, pw_sched_policy_fifo());
  many_run(&e);
  expect_round_robin(&e, kRounds); /* submission order is round by round */
  many_deinit(&e);
}

Test(sched_many, fifo_with_129_clients_runs_the_first_backlogged_first) {
  fifo_runs_in_submission_order(129);
}

Test(sched_many, fifo_with_1000_clients_runs_in_submission_order) {
  fifo_runs_in_submission_order(1000);
}

/* Fair share, charged as measured: device time varies from op to op, so
 * only the first round (everyone starts at pass 0 and an op's charge
 * lands before the next admission) is a fixed order; then counts. */
static void fair_first_round_reaches_everyone(int clients) {
  many_env_t e;
  many_init(&e, clients, pw_sched_policy_fair_share());
  many_run(&e);
  expect_round_robin(&e, 1);
  expect_counts(&e);
  many_deinit(&e);
}

Test(sched_many, fair_share_with_129_clients_reaches_every_client_in_the_first_round) {
  fair_first_round_reaches_everyone(129);
}

Test(sched_many, fair_share_with_1000_clients_reaches_every_client_in_the_first_round) {
  fair_first_round_reaches_everyone(1000);
}

/* Fair share charged a fixed device time per op: with equal weights,
 * stride scheduling is exact round robin (ties go to the older op), so no
 * client waits more than one round of all the others. */
static pw_sched_policy_vtable_t g_fixed_fair;

static void fixed_charge(void* self, pw_sched_candidate_t* client, uint64_t device_ns) {
  (void)device_ns;
  pw_sched_policy_fair_share().vtable->charge(self, client, 1000);
}

static pw_sched_policy_t fixed_fair_share(void) {
  g_fixed_fair = *pw_sched_policy_fair_share().vtable;
  g_fixed_fair.name = "fair_share_fixed_charge";
  g_fixed_fair.charge = fixed_charge;
  return (pw_sched_policy_t){&g_fixed_fair, NULL};
}

static void fixed_fair_is_round_robin(int clients) {
  many_env_t e;
  many_init(&e, clients, fixed_fair_share());
  many_run(&e);
  expect_round_robin(&e, kRounds);
  many_deinit(&e);
}

Test(sched_many, fair_share_with_129_clients_goes_round_every_client) {
  fixed_fair_is_round_robin(129);
}

Test(sched_many, fair_share_with_1000_clients_goes_round_every_client) {
  fixed_fair_is_round_robin(1000);
}

/* activate sees (a summary of) every backlogged client: FIFO picks, and
 * an activate that checks the oldest head among |others| is client 0's,
 * which stays queued behind the gate while the others arrive. */
static struct {
  uint64_t first_head;
  uint32_t calls, missed, most_others;
} g_activate;

static void check_activate(void* self, pw_sched_candidate_t* client,
                           const pw_sched_candidate_t* others, uint32_t other_count) {
  (void)self;
  g_activate.calls++;
  if (other_count == 0) { /* the gate, then client 0 */
    g_activate.first_head = client->head_sequence;
    return;
  }
  if (other_count > g_activate.most_others) g_activate.most_others = other_count;
  uint64_t oldest = UINT64_MAX;
  for (uint32_t i = 0; i < other_count; ++i) {
    if (others[i].head_sequence < oldest) oldest = others[i].head_sequence;
  }
  if (oldest != g_activate.first_head) g_activate.missed++;
}

Test(sched_many, activate_with_1000_clients_sees_the_oldest_backlogged_client) {
  static pw_sched_policy_vtable_t vt;
  vt = *pw_sched_policy_fifo().vtable;
  vt.name = "fifo_checking_activate";
  vt.activate = check_activate;
  memset(&g_activate, 0, sizeof(g_activate));
  many_env_t e;
  many_init(&e, 1000, (pw_sched_policy_t){&vt, NULL});
  many_run(&e);
  expect_round_robin(&e, kRounds);
  /* The gate's client and then client 0 activate alone (the gate is
   * admitted at once); every other client's first op activates it behind
   * client 0, which stays queued until the gate opens. */
  cr_assert_eq(g_activate.calls, 1001, "activate ran %u times", g_activate.calls);
  cr_assert_eq(g_activate.missed, 0, "%u activations did not see client 0", g_activate.missed);
  cr_assert_leq(g_activate.most_others, PW_SCHED_MAX_CANDIDATES);
  many_deinit(&e);
}
