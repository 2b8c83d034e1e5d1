/* Shared by the armed-graph tests (graph_exec_*_test.c): the
 * environment (a fixture, a copy graph, its input), runs that check their
 * result, and a white-box probe of the armed blocks. */
#include "runtime/graph_exec_env.h"

#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "sched/dispatch_internal.h"

const char* kCopy8 = "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n";

/* ---- white-box probe (graph_exec_test.c says why) ------------------------ */

/* Armed blocks of |exec| that exist and are not free: a run in them
 * (not finished on its slot: a armed run's ops hold no reference), or a
 * slice's tail reference. */
int private_busy(pw_graph_exec_t* exec) {
  pw_graph_exec_obj_t* armed = (pw_graph_exec_obj_t*)exec;
  int n = 0;
  for (int i = 0; i < PW_GRAPH_EXEC_BLOCKS; ++i) {
    pw_armed_block_t* slot = &armed->blocks[i];
    pw_execution_t* b = pw_atomic_load_ptr_acquire(&slot->block);
    if (b == NULL) continue;
    bool free = pw_atomic_load_u32_acquire(&b->refs) == PW_EXECUTION_ARMED &&
                pw_atomic_load_u64_acquire(&slot->finished) ==
                    pw_atomic_load_u64_acquire(&slot->submitted);
    if (!free) n++;
  }
  return n;
}

/* ---- environment -------------------------------------------------------- */


void env_init_sched(env_t* e, pw_fixture_backend_t kind, uint32_t slices,
                           pw_sched_policy_t policy, uint32_t window) {
  memset(e, 0, sizeof(*e));
  pw_test_allocator_init(&e->t);
  OK(pw_fixture_init_sched(&e->f, kind, slices, "2x4", pw_test_allocator(&e->t), policy,
                           window));
  OK(pw_fixture_vslice(&e->f, "2x4", &e->vs));
  if (slices > 1) OK(pw_fixture_vslice(&e->f, "2x4", &e->other));
  OK(pw_fixture_compile(&e->f, e->vs, kCopy8, &e->copy));
  int64_t dims[1] = {8};
  e->spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  OK(pw_graph_create(e->f.client, &e->g));
  uint32_t p, a;
  OK(pw_graph_add_parameter(e->f.client, e->g, e->vs, &e->spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(e->f.client, e->g, "a", e->copy, e->vs, &in, 1, &a));
  OK(pw_graph_add_output(e->f.client, e->g, pw_value(a, 0)));
  for (int i = 0; i < 8; ++i) e->data[i] = (float)(i + 1);
  OK(pw_buffer_from_host(e->f.client, e->vs, &e->spec, e->data, sizeof(e->data), &e->x));
}

void env_init(env_t* e, pw_fixture_backend_t kind, uint32_t slices) {
  pw_sched_policy_t none = {NULL, NULL};
  env_init_sched(e, kind, slices, none, 0);
}

/* Destroys the client and runtime; nothing the runtime allocated is left. */
void env_deinit(env_t* e) {
  pw_fixture_deinit(&e->f);
  cr_assert_eq(pw_test_allocator_live(&e->t), 0, "%zu allocations leaked",
               pw_test_allocator_live(&e->t));
  cr_assert_eq(atomic_load(&e->t.size_mismatches), 0);
}

void run_all(pw_fixture_t* f) {
  while (pw_double_backend_run_deferred(f->dbl, 0) > 0) {
  }
}

/* |buf| holds |want| (8 floats). */
void expect8(env_t* e, pw_buffer_t buf, const float* want, const char* what) {
  float back[8] = {0};
  OK(pw_buffer_to_host(e->f.client, buf, back, sizeof(back),
                       pw_deadline_from_timeout(DEADLINE_NS)));
  cr_assert_eq(memcmp(back, want, sizeof(back)), 0, "%s: got %g %g .. %g", what,
               (double)back[0], (double)back[1], (double)back[7]);
}

/* One armed run of e->g on |x|, waited for; its output holds |want|. */
void armed_run_ok(env_t* e, pw_graph_exec_t* exec, pw_buffer_t x, const float* want) {
  pw_buffer_t y;
  pw_event_t* done = NULL;
  OK(pw_graph_exec_submit(exec, &x, 1, NULL, &y, 1, &done));
  if (e->f.dbl != NULL) run_all(&e->f);
  OK(pw_fixture_wait(done));
  expect8(e, y, want, "armed run");
  OK(pw_buffer_release(e->f.client, y));
}

/* The same through pw_graph_submit of |g|. */
void handle_run_ok(env_t* e, pw_graph_t g, pw_buffer_t x, const float* want) {
  pw_buffer_t y;
  pw_event_t* done = NULL;
  OK(pw_graph_submit(e->f.client, g, &x, 1, NULL, &y, 1, &done));
  if (e->f.dbl != NULL) run_all(&e->f);
  OK(pw_fixture_wait(done));
  expect8(e, y, want, "handle run");
  OK(pw_buffer_release(e->f.client, y));
}

void* destroy_thread(void* arg) {
  destroyer_t* d = arg;
  pw_graph_exec_destroy(d->exec);
  atomic_store(&d->returned, true);
  return NULL;
}

void sleep_ms(int ms) {
  struct timespec ts = {0, ms * 1000000L};
  nanosleep(&ts, NULL);
}

bool returned_within(destroyer_t* d, int ms) {
  for (int i = 0; i < ms && !atomic_load(&d->returned); ++i) sleep_ms(1);
  return atomic_load(&d->returned);
}
