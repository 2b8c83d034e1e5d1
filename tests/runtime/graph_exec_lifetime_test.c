/* Armed graphs: the graph handle released after arming, overlapping runs
 * (both armed blocks busy, then the client's cache), destroy while runs
 * are in flight or while an armed block is still a slice's tail, the
 * client destroying armed graphs left alive, runs without done events. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "runtime/graph_exec_env.h"
#include "sched/dispatch_internal.h"

/* ---- lifetime ----------------------------------------------------------- */

/* The armed graph keeps the graph alive: its handle (and the vslice's and
 * executable's) released right after arming, runs still work; the handle
 * itself is gone; nothing leaks. */
Test(graph_exec, graph_handle_released_right_after_create) {
  env_t e;
  env_init(&e, PW_FIXTURE_DOUBLE_THREADED, 1);
  uint32_t handles = pw_client_live_handles(e.f.client);
  pw_graph_exec_t* exec = NULL;
  OK(pw_graph_exec_create(e.f.client, e.g, &exec));
  OK(pw_graph_release(e.f.client, e.g));
  OK(pw_executable_release(e.f.client, e.copy));
  cr_assert_eq(pw_client_live_handles(e.f.client), handles - 2);
  pw_buffer_t y;
  pw_event_t* done = NULL;
  FAILS(pw_graph_submit(e.f.client, e.g, &e.x, 1, NULL, &y, 1, &done), PW_STATUS_NOT_FOUND,
        "graph handle");
  for (int run = 0; run < 30; ++run) {
    /* Chained: run k's argument is run k-1's output. */
    pw_buffer_t in = run == 0 ? e.x : y;
    OK(pw_graph_exec_submit(exec, &in, 1, NULL, &y, 1, &done));
    if (run > 0) OK(pw_buffer_release(e.f.client, in));
    if (run % 4 == 3) OK(pw_fixture_wait(done));
    else pw_event_release(done);
  }
  pw_graph_exec_destroy(exec);
  expect8(&e, y, e.data, "30 chained copies");
  OK(pw_buffer_release(e.f.client, y));
  env_deinit(&e);
}

/* More runs in flight than armed blocks: the third and later take
 * blocks from the client's cache. All complete, in order, with distinct
 * events, and the chain's value comes out intact. */
Test(graph_exec, overlapping_runs_fall_back_to_the_shared_cache) {
  env_t e;
  env_init(&e, PW_FIXTURE_DOUBLE_DEFERRED, 1);
  pw_graph_exec_t* exec = NULL;
  OK(pw_graph_exec_create(e.f.client, e.g, &exec));
  enum { RUNS = 7 };
  pw_event_t* done[RUNS];
  pw_buffer_t ys[RUNS];
  for (int r = 0; r < RUNS; ++r) {
    pw_buffer_t in = r == 0 ? e.x : ys[r - 1];
    OK(pw_graph_exec_submit(exec, &in, 1, NULL, &ys[r], 1, &done[r]));
    cr_assert_not(pw_event_is_ready(done[r]), "run %d complete before any launch ran", r);
    for (int k = 0; k < r; ++k) cr_assert_neq(done[k], done[r], "runs %d and %d", k, r);
    cr_assert_eq(private_busy(exec), r == 0 ? 1 : 2, "run %d", r);
  }
  /* Run them one launch round at a time: each run completes after the
   * one before it. */
  for (int r = 0; r < RUNS; ++r) {
    cr_assert_eq(pw_double_backend_run_deferred(e.f.dbl, 8), 8, "run %d's launches", r);
    OK(pw_event_wait(done[r], pw_deadline_from_timeout(DEADLINE_NS)));
    if (r + 1 < RUNS) cr_assert_not(pw_event_is_ready(done[r + 1]), "run %d early", r + 1);
  }
  cr_assert_eq(pw_double_backend_in_flight(e.f.dbl), 0);
  for (int r = 0; r < RUNS; ++r) {
    expect8(&e, ys[r], e.data, "chained run");
    pw_event_release(done[r]);
    OK(pw_buffer_release(e.f.client, ys[r]));
  }
  /* Afterwards the armed blocks are free again and reused. */
  armed_run_ok(&e, exec, e.x, e.data);
  armed_run_ok(&e, exec, e.x, e.data);
  cr_assert_eq(pw_double_backend_launch_count(e.f.dbl, 3), RUNS + 2);
  pw_graph_exec_destroy(exec);
  env_deinit(&e);
}

/* A armed block keeps its last run's done event and recycles it for
 * its next run only if the submitter let go of it: an event the test
 * still holds stays complete with its own status while its block runs
 * again, and each run's event carries that run's status only (runs 3 and
 * 5 fail at launch, 4 at completion). */
Test(graph_exec, done_events_of_reruns_are_fresh_whether_recycled_or_not) {
  env_t e;
  env_init(&e, PW_FIXTURE_DOUBLE_DEFERRED, 1);
  pw_graph_exec_t* exec = NULL;
  OK(pw_graph_exec_create(e.f.client, e.g, &exec));
  pw_buffer_t y;
  pw_event_t* first = NULL;
  OK(pw_graph_exec_submit(exec, &e.x, 1, NULL, &y, 1, &first));
  OK(pw_buffer_release(e.f.client, y));
  run_all(&e.f);
  OK(pw_event_wait(first, pw_deadline_from_timeout(DEADLINE_NS)));
  pw_event_t* held = NULL;
  for (int run = 2; run <= 9; ++run) {
    if (run == 3 || run == 5) {
      pw_double_backend_fail_launch(e.f.dbl, 2, PW_STATUS_DATA_LOSS, PW_DOUBLE_FAIL_AT_LAUNCH);
    }
    if (run == 4) {
      pw_double_backend_fail_launch(e.f.dbl, 8, PW_STATUS_ABORTED, PW_DOUBLE_FAIL_AT_COMPLETION);
    }
    pw_event_t* done = NULL;
    OK(pw_graph_exec_submit(exec, &e.x, 1, NULL, &y, 1, &done));
    OK(pw_buffer_release(e.f.client, y));
    cr_assert_neq(done, first, "run %d got the event run 1's submitter still holds", run);
    cr_assert_neq(done, held, "run %d got the event run 2's submitter still holds", run);
    cr_assert_not(pw_event_is_ready(done), "run %d: event complete before its run", run);
    cr_assert(pw_event_is_ready(first), "run 1's event was reset under its holder");
    run_all(&e.f);
    pw_status_t st = pw_event_wait(done, pw_deadline_from_timeout(DEADLINE_NS));
    pw_status_code_t want = run == 3 || run == 5 ? PW_STATUS_DATA_LOSS
                            : run == 4           ? PW_STATUS_ABORTED
                                                 : PW_STATUS_OK;
    cr_assert_eq(pw_status_code(st), want, "run %d: %s", run, pw_status_message(st));
    pw_status_free(st);
    if (run == 2) {
      held = done; /* kept until the end */
    } else {
      pw_event_release(done);
    }
  }
  pw_status_t st = pw_event_wait(first, 0);
  cr_assert_null(st, "run 1's event changed status");
  st = pw_event_wait(held, 0);
  cr_assert_null(st, "run 2's event changed status");
  pw_event_release(first);
  pw_event_release(held);
  pw_graph_exec_destroy(exec);
  env_deinit(&e);
}

/* Destroy from another thread while the armed graph's runs cannot finish
 * (deferred launches nobody runs): it must not return until they have
 * completed. |runs| 1: one armed block busy; 3: both armed blocks and
 * one run in the client's cache. The runs' outputs are right afterwards,
 * and the graph (its handle kept) still runs, reusing the blocks the
 * armed graph gave back. */
static void destroy_waits_for(int runs) {
  env_t e;
  env_init(&e, PW_FIXTURE_DOUBLE_DEFERRED, 1);
  destroyer_t d = {NULL, false};
  OK(pw_graph_exec_create(e.f.client, e.g, &d.exec));
  pw_event_t* done[3];
  pw_buffer_t ys[3];
  for (int r = 0; r < runs; ++r) {
    OK(pw_graph_exec_submit(d.exec, r == 0 ? &e.x : &ys[r - 1], 1, NULL, &ys[r], 1, &done[r]));
  }
  cr_assert_eq(private_busy(d.exec), runs < 2 ? runs : 2);
  /* All but the last run complete before destroy is called. */
  for (int r = 0; r + 1 < runs; ++r) {
    pw_double_backend_run_deferred(e.f.dbl, 8);
    OK(pw_event_wait(done[r], pw_deadline_from_timeout(DEADLINE_NS)));
  }
  cr_assert_not(pw_event_is_ready(done[runs - 1]));
  pthread_t th;
  pthread_create(&th, NULL, destroy_thread, &d);
  bool early = returned_within(&d, 200);
  bool last_ready = pw_event_is_ready(done[runs - 1]);
  run_all(&e.f);
  pthread_join(th, NULL);
  cr_assert_not(early && !last_ready,
                "pw_graph_exec_destroy returned while run %d of %d (%s) was in flight",
                runs, runs, runs > 2 ? "in a block of the client's cache" : "in a armed block");
  cr_assert(pw_event_is_ready(done[runs - 1]));
  for (int r = 0; r < runs; ++r) {
    OK(pw_fixture_wait(done[r]));
    expect8(&e, ys[r], e.data, "run finished under destroy");
    OK(pw_buffer_release(e.f.client, ys[r]));
  }
  for (int i = 0; i < 3; ++i) handle_run_ok(&e, e.g, e.x, e.data);
  env_deinit(&e);
}

Test(graph_exec, destroy_waits_for_a_run_in_a_private_block) { destroy_waits_for(1); }
Test(graph_exec, destroy_waits_for_a_run_in_the_shared_cache) { destroy_waits_for(3); }

/* The armed graph's last run is still its slice's tail (the slice keeps a
 * reference until its next append) when the armed graph and the graph's
 * handle go. Then other graphs, armed and not, run on that slice (the
 * first append drops the old tail), and the client goes: nothing leaks,
 * nothing reads freed memory (ASan). */
Test(graph_exec, destroy_while_a_private_block_is_the_slice_tail) {
  env_t e;
  env_init(&e, PW_FIXTURE_DOUBLE_INLINE, 1);
  pw_graph_exec_t* exec = NULL;
  OK(pw_graph_exec_create(e.f.client, e.g, &exec));
  armed_run_ok(&e, exec, e.x, e.data);
  cr_assert_eq(private_busy(exec), 1, "the completed run's block is not held as the tail");
  OK(pw_graph_release(e.f.client, e.g));
  pw_graph_exec_destroy(exec);
  /* A second graph: x -> copy -> copy. */
  pw_graph_t g2;
  OK(pw_graph_create(e.f.client, &g2));
  uint32_t p, a, b;
  OK(pw_graph_add_parameter(e.f.client, g2, e.vs, &e.spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(e.f.client, g2, "a", e.copy, e.vs, &in, 1, &a));
  in = pw_value(a, 0);
  OK(pw_graph_add_compute(e.f.client, g2, "b", e.copy, e.vs, &in, 1, &b));
  OK(pw_graph_add_output(e.f.client, g2, pw_value(b, 0)));
  pw_buffer_t y;
  pw_event_t* done;
  OK(pw_graph_submit(e.f.client, g2, &e.x, 1, NULL, &y, 1, &done));
  OK(pw_fixture_wait(done));
  expect8(&e, y, e.data, "handle run after the tail's owner went");
  OK(pw_buffer_release(e.f.client, y));
  pw_graph_exec_t* exec2 = NULL;
  OK(pw_graph_exec_create(e.f.client, g2, &exec2));
  for (int i = 0; i < 5; ++i) armed_run_ok(&e, exec2, e.x, e.data);
  /* Destroyed while its block is the tail again; the client goes next. */
  pw_graph_exec_destroy(exec2);
  cr_assert_eq(pw_double_backend_launch_count(e.f.dbl, 0), 1 + 2 + 5 * 2);
  env_deinit(&e);
}

/* The same with two clients: client B's armed graph, alive, is the tail
 * when B is destroyed (pw_client_destroy destroys it); client A's next
 * run on the slice drops that tail, the last reference to B. */
Test(graph_exec, client_destroyed_while_its_armed_block_is_the_slice_tail) {
  env_t e;
  env_init(&e, PW_FIXTURE_DOUBLE_THREADED, 1);
  pw_client_t* b = NULL;
  OK(pw_client_create(e.f.runtime, NULL, &b));
  pw_vslice_t bvs;
  pw_mesh_shape_t mesh;
  OK(pw_mesh_shape_parse("2x4", &mesh));
  OK(pw_vslice_create(b, &mesh, PW_VSLICE_DEFAULT, &bvs));
  pw_executable_t bcopy;
  OK(pw_executable_compile(b, bvs, kCopy8, strlen(kCopy8), NULL, &bcopy));
  pw_graph_t bg;
  OK(pw_graph_create(b, &bg));
  uint32_t p, c;
  OK(pw_graph_add_parameter(b, bg, bvs, &e.spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(b, bg, "c", bcopy, bvs, &in, 1, &c));
  OK(pw_graph_add_output(b, bg, pw_value(c, 0)));
  pw_buffer_t bx, by;
  OK(pw_buffer_from_host(b, bvs, &e.spec, e.data, sizeof(e.data), &bx));
  pw_graph_exec_t* bexec = NULL;
  OK(pw_graph_exec_create(b, bg, &bexec));
  pw_event_t* done;
  OK(pw_graph_exec_submit(bexec, &bx, 1, NULL, &by, 1, &done));
  OK(pw_fixture_wait(done));
  cr_assert_eq(private_busy(bexec), 1, "B's block is not held as the tail");
  pw_client_destroy(b); /* bexec, its graph and buffers with it */
  pw_graph_exec_t* exec = NULL;
  OK(pw_graph_exec_create(e.f.client, e.g, &exec));
  for (int i = 0; i < 3; ++i) armed_run_ok(&e, exec, e.x, e.data);
  pw_graph_exec_destroy(exec);
  cr_assert_eq(pw_double_backend_launch_count(e.f.dbl, 0), 4);
  env_deinit(&e);
}

/* A gang spanning slices 0 and 1: the armed graph's armed block is the
 * tail of both slices (two references) when it is destroyed. A run on
 * slice 0 drops one; slice 1's stays until the runtime goes, after the
 * client: the block then goes to a closed cache (freed) and drops the
 * client's last reference. */
static void tail_of_two_slices(pw_fixture_backend_t kind, pw_sched_policy_t policy,
                               uint32_t window) {
  env_t e;
  env_init_sched(&e, kind, 2, policy, window);
  pw_vslice_span_t span;
  memset(&span, 0, sizeof(span));
  span.struct_size = sizeof(span);
  span.mesh = pw_mesh_shape_make(1, (const uint32_t[]){16});
  span.slice_count = 2;
  span.slices = (const uint32_t[]){0, 1};
  pw_vslice_t wide;
  OK(pw_vslice_create_spanning(e.f.client, &span, &wide));
  const char* copy16 = "copy\ninput f32[16] split(0,all)\noutput f32[16] split(0,all)\n";
  pw_executable_t wcopy;
  OK(pw_fixture_compile(&e.f, wide, copy16, &wcopy));
  int64_t dims[1] = {16};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  pw_graph_t g;
  OK(pw_graph_create(e.f.client, &g));
  uint32_t p, c;
  OK(pw_graph_add_parameter(e.f.client, g, wide, &spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(e.f.client, g, "wide", wcopy, wide, &in, 1, &c));
  OK(pw_graph_add_output(e.f.client, g, pw_value(c, 0)));
  float data[16];
  for (int i = 0; i < 16; ++i) data[i] = (float)(i * i);
  pw_buffer_t x, y;
  OK(pw_buffer_from_host(e.f.client, wide, &spec, data, sizeof(data), &x));
  pw_graph_exec_t* exec = NULL;
  OK(pw_graph_exec_create(e.f.client, g, &exec));
  OK(pw_graph_release(e.f.client, g));
  OK(pw_vslice_release(e.f.client, wide));
  for (int run = 0; run < 3; ++run) {
    pw_event_t* done;
    OK(pw_graph_exec_submit(exec, &x, 1, NULL, &y, 1, &done));
    OK(pw_fixture_wait(done));
    float back[16] = {0};
    OK(pw_buffer_to_host(e.f.client, y, back, sizeof(back), PW_INFINITE_FUTURE));
    cr_assert_eq(memcmp(back, data, sizeof(data)), 0, "run %d", run);
    OK(pw_buffer_release(e.f.client, y));
  }
  cr_assert_eq(private_busy(exec), 1, "the last run's block is not held as the tails");
  pw_graph_exec_destroy(exec);
  OK(pw_buffer_release(e.f.client, x));
  handle_run_ok(&e, e.g, e.x, e.data); /* on slice 0 */
  cr_assert_eq(pw_double_backend_launch_count(e.f.dbl, 0), 4);
  cr_assert_eq(pw_double_backend_launch_count(e.f.dbl, 8), 3);
  env_deinit(&e);
}

Test(graph_exec, destroy_while_a_private_block_is_the_tail_of_two_slices) {
  pw_sched_policy_t none = {NULL, NULL};
  tail_of_two_slices(PW_FIXTURE_DOUBLE_INLINE, none, 0);
}
Test(graph_exec, destroy_while_a_private_block_is_the_tail_of_two_slices_threaded_window) {
  tail_of_two_slices(PW_FIXTURE_DOUBLE_THREADED, pw_sched_policy_fifo(), 2);
}

/* The debug mode without gang order never reuses blocks as laid out, so
 * every armed run takes a block from the client's cache: destroy must
 * still wait for all of them (here 5, none able to finish until the test
 * runs the deferred launches). */
Test(graph_exec, destroy_waits_for_every_run_without_gang_order) {
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_double_options_t dopts;
  pw_double_options_init(&dopts);
  dopts.device_count = 8;
  dopts.completion = PW_DOUBLE_COMPLETE_DEFERRED;
  dopts.allocator = pw_test_allocator(&t);
  pw_backend_t backend;
  OK(pw_double_backend_create(&dopts, &backend));
  pw_double_backend_t* dbl = pw_double_backend_from(&backend);
  pw_slice_desc_t desc;
  memset(&desc, 0, sizeof(desc));
  OK(pw_mesh_shape_parse("2x4", &desc.mesh));
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.allocator = pw_test_allocator(&t);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = &desc;
  ro.slice_count = 1;
  ro.debug_disable_gang_order = true;
  env_t e;
  memset(&e, 0, sizeof(e));
  OK(pw_runtime_create(&ro, &e.f.runtime));
  OK(pw_client_create(e.f.runtime, NULL, &e.f.client));
  e.f.dbl = dbl;
  OK(pw_fixture_vslice(&e.f, "2x4", &e.vs));
  OK(pw_fixture_compile(&e.f, e.vs, kCopy8, &e.copy));
  int64_t dims[1] = {8};
  e.spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  OK(pw_graph_create(e.f.client, &e.g));
  uint32_t p, a;
  OK(pw_graph_add_parameter(e.f.client, e.g, e.vs, &e.spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(e.f.client, e.g, "a", e.copy, e.vs, &in, 1, &a));
  OK(pw_graph_add_output(e.f.client, e.g, pw_value(a, 0)));
  for (int i = 0; i < 8; ++i) e.data[i] = (float)(10 - i);
  OK(pw_buffer_from_host(e.f.client, e.vs, &e.spec, e.data, sizeof(e.data), &e.x));
  destroyer_t d = {NULL, false};
  OK(pw_graph_exec_create(e.f.client, e.g, &d.exec));
  /* A few complete runs first, then 5 left in flight. */
  for (int r = 0; r < 3; ++r) armed_run_ok(&e, d.exec, e.x, e.data);
  enum { RUNS = 5 };
  pw_event_t* done[RUNS];
  pw_buffer_t ys[RUNS];
  for (int r = 0; r < RUNS; ++r) {
    OK(pw_graph_exec_submit(d.exec, &e.x, 1, NULL, &ys[r], 1, &done[r]));
  }
  pthread_t th;
  pthread_create(&th, NULL, destroy_thread, &d);
  bool early = returned_within(&d, 200);
  run_all(&e.f);
  pthread_join(th, NULL);
  cr_assert_not(early, "pw_graph_exec_destroy returned with %d runs in flight", RUNS);
  for (int r = 0; r < RUNS; ++r) {
    OK(pw_fixture_wait(done[r]));
    expect8(&e, ys[r], e.data, "run finished under destroy");
    OK(pw_buffer_release(e.f.client, ys[r]));
  }
  pw_fixture_deinit(&e.f);
  cr_assert_eq(pw_test_allocator_live(&t), 0, "%zu leaked", pw_test_allocator_live(&t));
}

typedef struct resumer_t {
  pw_double_backend_t* dbl;
  int delay_ms;
} resumer_t;

static void* resume_thread(void* arg) {
  resumer_t* r = arg;
  sleep_ms(r->delay_ms);
  pw_double_backend_pause(r->dbl, false);
  return NULL;
}

/* Armed graphs left alive at pw_client_destroy, one with runs in flight
 * (a paused threaded double resumed from another thread): destroy waits,
 * every run completes OK, and everything is freed. */
Test(graph_exec, client_destroy_destroys_armed_graphs_left_alive) {
  env_t e;
  env_init(&e, PW_FIXTURE_DOUBLE_THREADED, 1);
  pw_graph_exec_t *idle = NULL, *busy = NULL, *unused = NULL;
  OK(pw_graph_exec_create(e.f.client, e.g, &idle));
  OK(pw_graph_exec_create(e.f.client, e.g, &busy));
  OK(pw_graph_exec_create(e.f.client, e.g, &unused));
  armed_run_ok(&e, idle, e.x, e.data);
  pw_double_backend_pause(e.f.dbl, true);
  pw_event_t* done[4];
  for (int r = 0; r < 4; ++r) {
    pw_buffer_t y;
    OK(pw_graph_exec_submit(busy, &e.x, 1, NULL, &y, 1, &done[r]));
    /* Output handles left for the client to free. */
  }
  cr_assert_not(pw_event_is_ready(done[3]));
  resumer_t r = {e.f.dbl, 50};
  pthread_t th;
  pthread_create(&th, NULL, resume_thread, &r);
  pw_client_destroy(e.f.client);
  e.f.client = NULL;
  pthread_join(th, NULL);
  for (int k = 0; k < 4; ++k) OK(pw_fixture_wait(done[k]));
  for (uint32_t d = 0; d < 8; ++d) cr_assert_eq(pw_double_backend_launch_count(e.f.dbl, d), 5);
  env_deinit(&e);
}

/* Runs submitted without a done event (out_done NULL) interleaved with
 * runs that ask for one, in both armed blocks and the client's cache:
 * each output holds its data; a failed run without an event fails its
 * output and nothing else (the next run's event is OK); an event a
 * submitter still holds stays complete with its run's status while its
 * block runs again without one; the next run that asks for one gets a
 * fresh, incomplete event. */
static void runs_without_done_events(pw_fixture_backend_t kind) {
  env_t e;
  env_init(&e, kind, 1);
  pw_graph_exec_t* exec = NULL;
  OK(pw_graph_exec_create(e.f.client, e.g, &exec));
  pw_buffer_t y;
  pw_event_t* first = NULL;
  OK(pw_graph_exec_submit(exec, &e.x, 1, NULL, &y, 1, &first));
  if (e.f.dbl != NULL) run_all(&e.f);
  OK(pw_event_wait(first, pw_deadline_from_timeout(DEADLINE_NS))); /* kept */
  expect8(&e, y, e.data, "run 1");
  OK(pw_buffer_release(e.f.client, y));
  for (int run = 2; run <= 14; ++run) {
    bool failing = run == 6 || run == 7;
    if (failing && e.f.dbl != NULL) {
      pw_double_backend_fail_launch(e.f.dbl, 2, PW_STATUS_DATA_LOSS, PW_DOUBLE_FAIL_AT_LAUNCH);
    }
    bool with_event = run % 4 == 0;
    /* Runs 9-11 overlap (three in flight with a deferred backend): the
     * third goes to the client's cache. */
    int batch = run == 9 ? 3 : 1;
    pw_buffer_t ys[3];
    pw_event_t* done[3] = {NULL, NULL, NULL};
    for (int b = 0; b < batch; ++b) {
      OK(pw_graph_exec_submit(exec, &e.x, 1, NULL, &ys[b], 1, with_event ? &done[b] : NULL));
      if (with_event) {
        cr_assert_neq(done[b], first, "run %d got the event run 1's submitter holds", run);
      }
    }
    cr_assert(pw_event_is_ready(first), "run 1's event was reset under its holder");
    if (e.f.dbl != NULL) run_all(&e.f);
    for (int b = 0; b < batch; ++b) {
      if (with_event) OK(pw_fixture_wait(done[b])); /* and releases it */
      if (failing && e.f.dbl != NULL) {
        float back[8];
        pw_status_t s = pw_buffer_to_host(e.f.client, ys[b], back, sizeof(back),
                                          pw_deadline_from_timeout(DEADLINE_NS));
        cr_assert_eq(pw_status_code(s), PW_STATUS_DATA_LOSS, "run %d output: %s", run,
                     pw_status_message(s));
        pw_status_free(s);
      } else {
        expect8(&e, ys[b], e.data, "run without an event");
      }
      OK(pw_buffer_release(e.f.client, ys[b]));
    }
    run += batch - 1;
  }
  pw_status_t st = pw_event_wait(first, 0);
  cr_assert_null(st, "run 1's event changed status");
  pw_event_release(first);
  /* Every run completes (an output can be ready before its run has
   * completed, so this may wait a little). */
  OK(pw_client_wait_idle(e.f.client, pw_deadline_from_timeout(DEADLINE_NS)));
  armed_run_ok(&e, exec, e.x, e.data);
  /* 15 runs of one op: one host launch per lane and run (the other
   * lanes of runs 6 and 7 launched; their refused one is not counted). */
  uint64_t host = pw_fixture_host_launches(&e.f);
  cr_assert_eq(host, pw_fixture_kind_lanes(kind) ? 4 * 15 - 2 : 0, "%llu host launches",
               (unsigned long long)host);
  pw_graph_exec_destroy(exec);
  env_deinit(&e);
}

Test(graph_exec, runs_without_done_events_lanes) {
  runs_without_done_events(PW_FIXTURE_DOUBLE_LANES);
}
Test(graph_exec, runs_without_done_events_inline) {
  runs_without_done_events(PW_FIXTURE_DOUBLE_INLINE);
}
Test(graph_exec, runs_without_done_events_deferred) {
  runs_without_done_events(PW_FIXTURE_DOUBLE_DEFERRED);
}
Test(graph_exec, runs_without_done_events_threaded) {
  runs_without_done_events(PW_FIXTURE_DOUBLE_THREADED);
}

