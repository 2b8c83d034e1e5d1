/* Armed graphs: failed launches and failed allocations, per-slice stats,
 * wait_idle, gang order with handle submissions interleaved. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "runtime/graph_exec_env.h"
#include "sched/dispatch_internal.h"

/* ---- failures ----------------------------------------------------------- */

/* A launch of run 2 fails (at launch, then at completion): its event
 * carries the error, naming the node; its output is failed; the runs
 * after it, in the same armed blocks, succeed. */
static void failed_launch(pw_double_fail_mode_t mode) {
  env_t e;
  env_init(&e, PW_FIXTURE_DOUBLE_INLINE, 1);
  pw_graph_exec_t* exec = NULL;
  OK(pw_graph_exec_create(e.f.client, e.g, &exec));
  for (int run = 0; run < 6; ++run) {
    bool failing = run == 2 || run == 3;
    if (failing) pw_double_backend_fail_launch(e.f.dbl, 3, PW_STATUS_DATA_LOSS, mode);
    pw_buffer_t y;
    pw_event_t* done;
    OK(pw_graph_exec_submit(exec, &e.x, 1, NULL, &y, 1, &done));
    pw_status_t s = pw_fixture_wait(done);
    if (failing) {
      cr_assert_eq(pw_status_code(s), PW_STATUS_DATA_LOSS, "run %d: %s", run,
                   pw_status_message(s));
      cr_assert(strstr(pw_status_message(s), "node 1 (\"a\")"), "run %d: %s", run,
                pw_status_message(s));
      pw_status_free(s);
      float back[8];
      s = pw_buffer_to_host(e.f.client, y, back, sizeof(back), PW_INFINITE_FUTURE);
      cr_assert_eq(pw_status_code(s), PW_STATUS_DATA_LOSS, "run %d output", run);
      pw_status_free(s);
    } else {
      cr_assert_null(s, "run %d carries an earlier failure: %s", run, pw_status_message(s));
      expect8(&e, y, e.data, "run after a failed launch");
    }
    OK(pw_buffer_release(e.f.client, y));
  }
  pw_graph_exec_destroy(exec);
  env_deinit(&e);
}

Test(graph_exec, failed_launch_at_launch_then_next_run_succeeds) {
  failed_launch(PW_DOUBLE_FAIL_AT_LAUNCH);
}
Test(graph_exec, failed_launch_at_completion_then_next_run_succeeds) {
  failed_launch(PW_DOUBLE_FAIL_AT_COMPLETION);
}

/* One allocation of a submission fails, in each state the armed graph can
 * be in: |state| 0: no block yet; 1: a prepared armed block whose last
 * event the test still holds; 2: both armed blocks busy (the run goes to
 * the client's cache). Every failure point of the submission in turn:
 * RESOURCE_EXHAUSTED, no output or event handed out, then a good run of
 * the same armed graph, and no leak. Returns the failure points swept. */
static int allocation_failures_in_state(int state) {
  int points = 0;
  for (size_t k = 1;; ++k) {
    env_t e;
    env_init(&e, PW_FIXTURE_DOUBLE_DEFERRED, 1);
    pw_graph_exec_t* exec = NULL;
    OK(pw_graph_exec_create(e.f.client, e.g, &exec));
    pw_event_t* held[2] = {NULL, NULL};
    pw_buffer_t held_y[2] = {{0}, {0}};
    if (state == 1) {
      OK(pw_graph_exec_submit(exec, &e.x, 1, NULL, &held_y[0], 1, &held[0]));
      run_all(&e.f);
      OK(pw_event_wait(held[0], pw_deadline_from_timeout(DEADLINE_NS)));
      /* The second block too, so the next run finds a prepared one. */
      OK(pw_graph_exec_submit(exec, &e.x, 1, NULL, &held_y[1], 1, &held[1]));
      run_all(&e.f);
      OK(pw_event_wait(held[1], pw_deadline_from_timeout(DEADLINE_NS)));
    } else if (state == 2) {
      for (int i = 0; i < 2; ++i) {
        OK(pw_graph_exec_submit(exec, &e.x, 1, NULL, &held_y[i], 1, &held[i]));
      }
      cr_assert_eq(private_busy(exec), 2);
    }
    size_t base = atomic_load(&e.t.attempts);
    e.t.fail_at = base + k;
    pw_buffer_t y = {777};
    pw_event_t* done = (pw_event_t*)&e;
    pw_status_t s = pw_graph_exec_submit(exec, &e.x, 1, NULL, &y, 1, &done);
    size_t used = atomic_load(&e.t.attempts) - base;
    e.t.fail_at = 0;
    /* The submission made fewer than k attempts: every point is swept. */
    bool finished = s == NULL && used < k;
    if (finished) {
      run_all(&e.f);
      OK(pw_fixture_wait(done));
      expect8(&e, y, e.data, "unfailed run");
      OK(pw_buffer_release(e.f.client, y));
    } else if (s == NULL) {
      /* Device memory for a root op's output, allocated while submitting:
       * the run fails (its op names itself), not the submission. */
      run_all(&e.f);
      pw_status_t run = pw_fixture_wait(done);
      cr_assert_eq(pw_status_code(run), PW_STATUS_RESOURCE_EXHAUSTED,
                   "state %d, allocation %zu: submit OK, run: %s", state, k,
                   pw_status_message(run));
      cr_assert(strstr(pw_status_message(run), "node 1 (\"a\")"), "%s", pw_status_message(run));
      pw_status_free(run);
      OK(pw_buffer_release(e.f.client, y));
      armed_run_ok(&e, exec, e.x, e.data);
    } else {
      cr_assert_eq(pw_status_code(s), PW_STATUS_RESOURCE_EXHAUSTED,
                   "state %d, allocation %zu: %s", state, k, pw_status_message(s));
      pw_status_free(s);
      cr_assert_eq(y.id, 0, "state %d, allocation %zu: output handed out", state, k);
      cr_assert_null(done, "state %d, allocation %zu: event handed out", state, k);
      points++;
      /* The next run of the same armed graph works. */
      armed_run_ok(&e, exec, e.x, e.data);
    }
    run_all(&e.f);
    for (int i = 0; i < 2; ++i) {
      if (held[i] == NULL) continue;
      OK(pw_fixture_wait(held[i]));
      expect8(&e, held_y[i], e.data, "run before the failure");
      OK(pw_buffer_release(e.f.client, held_y[i]));
    }
    pw_graph_exec_destroy(exec);
    env_deinit(&e);
    if (finished) break;
    cr_assert_lt(k, 200, "state %d: no end to the sweep", state);
  }
  return points;
}

Test(graph_exec, allocation_failure_in_a_submission_then_the_next_succeeds) {
  for (int state = 0; state < 3; ++state) {
    int points = allocation_failures_in_state(state);
    cr_assert_gt(points, 0, "state %d: the submission allocates nothing to fail", state);
  }
}

/* ---- scheduling --------------------------------------------------------- */

/* ops_completed per slice counts armed runs like handle runs: a graph with
 * two copies on slice 0, a transfer to slice 1 and a copy there. */
Test(graph_exec, slice_stats_count_armed_runs) {
  env_t e;
  env_init(&e, PW_FIXTURE_DOUBLE_THREADED, 2);
  pw_executable_t copy1;
  OK(pw_fixture_compile(&e.f, e.other, kCopy8, &copy1));
  pw_graph_t g;
  OK(pw_graph_create(e.f.client, &g));
  uint32_t p, a, b, t, c;
  OK(pw_graph_add_parameter(e.f.client, g, e.vs, &e.spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(e.f.client, g, "a", e.copy, e.vs, &in, 1, &a));
  in = pw_value(a, 0);
  OK(pw_graph_add_compute(e.f.client, g, "b", e.copy, e.vs, &in, 1, &b));
  OK(pw_graph_add_transfer(e.f.client, g, "t", pw_value(b, 0), e.other,
                           pw_sharding_split(0, PW_MESH_AXIS_ALL), &t));
  in = pw_value(t, 0);
  OK(pw_graph_add_compute(e.f.client, g, "c", copy1, e.other, &in, 1, &c));
  OK(pw_graph_add_output(e.f.client, g, pw_value(c, 0)));
  uint32_t s0, s1;
  OK(pw_vslice_binding(e.f.client, e.vs, &s0, NULL));
  OK(pw_vslice_binding(e.f.client, e.other, &s1, NULL));
  cr_assert_neq(s0, s1);
  pw_client_slice_stats_t before[2] = {{.struct_size = sizeof(pw_client_slice_stats_t)}, {.struct_size = sizeof(pw_client_slice_stats_t)}},
                          after[2] = {{.struct_size = sizeof(pw_client_slice_stats_t)}, {.struct_size = sizeof(pw_client_slice_stats_t)}};
  /* One handle run: what one run counts on each slice. */
  OK(pw_client_slice_stats(e.f.client, s0, &before[0]));
  OK(pw_client_slice_stats(e.f.client, s1, &before[1]));
  pw_buffer_t y;
  pw_event_t* done;
  OK(pw_graph_submit(e.f.client, g, &e.x, 1, NULL, &y, 1, &done));
  OK(pw_fixture_wait(done));
  OK(pw_buffer_release(e.f.client, y));
  OK(pw_client_slice_stats(e.f.client, s0, &after[0]));
  OK(pw_client_slice_stats(e.f.client, s1, &after[1]));
  uint64_t per0 = after[0].ops_completed - before[0].ops_completed;
  uint64_t per1 = after[1].ops_completed - before[1].ops_completed;
  cr_assert_geq(per0, 2, "slice 0 counted %llu ops", (unsigned long long)per0);
  cr_assert_geq(per1, 1, "slice 1 counted %llu ops", (unsigned long long)per1);
  cr_assert_eq(per0 + per1, 4, "4 ops, %llu + %llu counted", (unsigned long long)per0,
               (unsigned long long)per1);
  /* Armed runs, some overlapping (the cache fallback counts too). */
  enum { RUNS = 25 };
  pw_graph_exec_t* exec = NULL;
  OK(pw_graph_exec_create(e.f.client, g, &exec));
  pw_event_t* batch[5];
  for (int r = 0; r < RUNS; ++r) {
    OK(pw_graph_exec_submit(exec, &e.x, 1, NULL, &y, 1, &batch[r % 5]));
    OK(pw_buffer_release(e.f.client, y));
    if (r % 5 == 4) {
      for (int k = 0; k < 5; ++k) OK(pw_fixture_wait(batch[k]));
    }
  }
  OK(pw_client_slice_stats(e.f.client, s0, &before[0]));
  OK(pw_client_slice_stats(e.f.client, s1, &before[1]));
  cr_assert_eq(before[0].ops_completed - after[0].ops_completed, RUNS * per0);
  cr_assert_eq(before[1].ops_completed - after[1].ops_completed, RUNS * per1);
  /* The armed graph's counts move to the client's when it goes: none lost,
   * none twice. */
  pw_graph_exec_destroy(exec);
  OK(pw_client_slice_stats(e.f.client, s0, &after[0]));
  OK(pw_client_slice_stats(e.f.client, s1, &after[1]));
  cr_assert_eq(after[0].ops_completed, before[0].ops_completed);
  cr_assert_eq(after[1].ops_completed, before[1].ops_completed);
  /* And a second armed graph counts on top of them. */
  OK(pw_graph_exec_create(e.f.client, g, &exec));
  OK(pw_graph_exec_submit(exec, &e.x, 1, NULL, &y, 1, &done));
  OK(pw_fixture_wait(done));
  OK(pw_buffer_release(e.f.client, y));
  OK(pw_client_slice_stats(e.f.client, s0, &before[0]));
  cr_assert_eq(before[0].ops_completed - after[0].ops_completed, per0);
  pw_graph_exec_destroy(exec);
  OK(pw_graph_release(e.f.client, g));
  env_deinit(&e);
}

typedef struct idle_waiter_t {
  pw_client_t* client;
  pw_event_t* done; /* of the run waited for */
  pw_status_t status;
  atomic_bool done_ready; /* when pw_client_wait_idle returned */
  destroyer_t returned;
} idle_waiter_t;

static void* wait_idle_thread(void* arg) {
  idle_waiter_t* w = arg;
  w->status = pw_client_wait_idle(w->client, pw_deadline_from_timeout(DEADLINE_NS));
  atomic_store(&w->done_ready, pw_event_is_ready(w->done));
  atomic_store(&w->returned.returned, true);
  return NULL;
}

/* A run in a armed block is in flight for pw_client_wait_idle although it
 * is not counted on the client's stripes: a short deadline expires naming
 * it; a waiting thread returns only after it completed, its done event
 * then complete. |runs| 1: one armed block; 3: both, and one run in the
 * client's cache. */
static void wait_idle_waits_for(int runs) {
  env_t e;
  env_init(&e, PW_FIXTURE_DOUBLE_DEFERRED, 1);
  pw_graph_exec_t* exec = NULL;
  OK(pw_graph_exec_create(e.f.client, e.g, &exec));
  pw_event_t* done[3];
  pw_buffer_t ys[3];
  for (int r = 0; r < runs; ++r) {
    OK(pw_graph_exec_submit(exec, &e.x, 1, NULL, &ys[r], 1, &done[r]));
  }
  pw_status_t st = pw_client_wait_idle(e.f.client, pw_deadline_from_timeout(20 * 1000000LL));
  cr_assert_eq(pw_status_code(st), PW_STATUS_DEADLINE_EXCEEDED);
  char want[64];
  snprintf(want, sizeof(want), "still has %d executions in flight", runs);
  cr_assert_not_null(strstr(pw_status_message(st), want), "%s", pw_status_message(st));
  pw_status_free(st);
  idle_waiter_t w = {.client = e.f.client, .done = done[runs - 1]};
  pthread_t th;
  pthread_create(&th, NULL, wait_idle_thread, &w);
  bool early = returned_within(&w.returned, 200);
  run_all(&e.f);
  pthread_join(th, NULL);
  cr_assert_not(early, "pw_client_wait_idle returned with %d runs in flight", runs);
  OK(w.status);
  cr_assert(atomic_load(&w.done_ready), "idle before the last run's done event completed");
  for (int r = 0; r < runs; ++r) {
    cr_assert(pw_event_is_ready(done[r]));
    OK(pw_fixture_wait(done[r]));
    expect8(&e, ys[r], e.data, "run waited for by wait_idle");
    OK(pw_buffer_release(e.f.client, ys[r]));
  }
  OK(pw_client_wait_idle(e.f.client, PW_IMMEDIATE_PAST));
  armed_run_ok(&e, exec, e.x, e.data);
  pw_graph_exec_destroy(exec);
  env_deinit(&e);
}

Test(graph_exec, wait_idle_waits_for_a_run_in_a_private_block) { wait_idle_waits_for(1); }
Test(graph_exec, wait_idle_waits_for_private_and_shared_runs) { wait_idle_waits_for(3); }

/* Armed runs of two graphs and handle submissions of both, interleaved on
 * one slice from one thread, some launches run between submissions: every
 * device launches every gang, in submission (gang id) order, the same
 * sequence on all eight devices. With a scheduler window too. */
static void gang_order(pw_sched_policy_t policy, uint32_t window) {
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_fixture_t f;
  OK(pw_fixture_init_sched(&f, PW_FIXTURE_DOUBLE_DEFERRED, 1, "2x4", pw_test_allocator(&t),
                           policy, window));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2x4", &vs));
  pw_executable_t copy;
  OK(pw_fixture_compile(&f, vs, kCopy8, &copy));
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  /* g1: x -> a; g2: x -> a, x -> b (two independent ops). */
  pw_graph_t g1, g2;
  uint32_t p, a;
  OK(pw_graph_create(f.client, &g1));
  OK(pw_graph_add_parameter(f.client, g1, vs, &spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(f.client, g1, "a", copy, vs, &in, 1, &a));
  OK(pw_graph_add_output(f.client, g1, pw_value(a, 0)));
  OK(pw_graph_create(f.client, &g2));
  OK(pw_graph_add_parameter(f.client, g2, vs, &spec, &p));
  in = pw_value(p, 0);
  OK(pw_graph_add_compute(f.client, g2, "a", copy, vs, &in, 1, NULL));
  OK(pw_graph_add_compute(f.client, g2, "b", copy, vs, &in, 1, NULL));
  pw_graph_exec_t *e1 = NULL, *e2 = NULL;
  OK(pw_graph_exec_create(f.client, g1, &e1));
  OK(pw_graph_exec_create(f.client, g2, &e2));
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  pw_buffer_t x;
  OK(pw_fixture_f32(&f, vs, 1, dims, spec.sharding, data, &x));
  enum { ROUNDS = 24, MAX = 4 * ROUNDS * 2 };
  pw_event_t* done[4 * ROUNDS];
  int n = 0;
  uint64_t launches = 0;
  for (int r = 0; r < ROUNDS; ++r) {
    pw_buffer_t y;
    if (r % 4 == 0) {
      OK(pw_graph_exec_submit(e1, &x, 1, NULL, &y, 1, &done[n++]));
    } else if (r % 4 == 1) {
      OK(pw_graph_submit(f.client, g1, &x, 1, NULL, &y, 1, &done[n++]));
    } else if (r % 4 == 2) {
      OK(pw_graph_exec_submit(e2, &x, 1, NULL, NULL, 0, &done[n++]));
    } else {
      OK(pw_graph_submit(f.client, g2, &x, 1, NULL, NULL, 0, &done[n++]));
    }
    launches += r % 4 < 2 ? 1 : 2;
    if (r % 4 < 2) OK(pw_buffer_release(f.client, y));
    if (r % 3 == 0) {
      OK(pw_graph_exec_submit(e1, &x, 1, NULL, &y, 1, &done[n++]));
      OK(pw_buffer_release(f.client, y));
      launches += 1;
    }
    pw_double_backend_run_deferred(f.dbl, (size_t)(r % 5) * 3);
  }
  run_all(&f);
  for (int k = 0; k < n; ++k) OK(pw_fixture_wait(done[k]));
  uint64_t order0[MAX], order[MAX];
  size_t n0 = pw_double_backend_launch_order(f.dbl, 0, order0, MAX);
  cr_assert_eq(n0, launches, "device 0 launched %zu gangs, want %llu", n0,
               (unsigned long long)launches);
  for (size_t i = 1; i < n0; ++i) {
    cr_assert_lt(order0[i - 1], order0[i], "device 0: gang %llu launched after %llu",
                 (unsigned long long)order0[i], (unsigned long long)order0[i - 1]);
  }
  for (uint32_t d = 1; d < 8; ++d) {
    size_t nd = pw_double_backend_launch_order(f.dbl, d, order, MAX);
    cr_assert_eq(nd, n0, "device %u", d);
    cr_assert_eq(memcmp(order, order0, n0 * sizeof(uint64_t)), 0, "device %u order differs", d);
  }
  pw_graph_exec_destroy(e1);
  pw_graph_exec_destroy(e2);
  pw_fixture_deinit(&f);
  cr_assert_eq(pw_test_allocator_live(&t), 0, "%zu leaked", pw_test_allocator_live(&t));
}

Test(graph_exec, interleaved_with_handle_submissions_keeps_gang_order) {
  pw_sched_policy_t none = {NULL, NULL};
  gang_order(none, 0);
}
Test(graph_exec, interleaved_with_handle_submissions_keeps_gang_order_fifo_window) {
  gang_order(pw_sched_policy_fifo(), 2);
}
