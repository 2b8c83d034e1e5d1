/* Armed graphs (pw_graph_exec_t, include/pathways/graph.h): results equal
 * pw_graph_submit's, graphs without ops or parameters, and bad input.
 * Lifetimes are in graph_exec_lifetime_test.c, failures and scheduling in
 * graph_exec_failure_test.c, the shared environment in graph_exec_env.c.
 *
 * A few checks look inside the armed graph (lib/sched/dispatch_internal.h)
 * only to prove a test reaches the path it is about (both armed blocks
 * busy, a armed block held as a slice's tail); what they assert about
 * behaviour goes through the public API. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "runtime/graph_exec_env.h"
#include "sched/dispatch_internal.h"

TestSuite(graph_exec, .fini = pw_test_check_leaks);

/* ---- results ------------------------------------------------------------ */

/* CPU backend, real arithmetic: x -> s = scale(x, 3) -> a = add(s, x) ->
 * r = relu(a); outputs r and s. Every armed run (some overlapping) equals
 * the handle submission of the same input bit for bit, and the C
 * reference. */
Test(graph_exec, cpu_results_equal_graph_submit_over_many_reruns) {
  enum { N = 64, RUNS = 48, BATCH = 3 };
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_CPU, 1, "2x4", pw_test_allocator(&t)));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2x4", &vs));
  pw_executable_t scale, add, relu;
  OK(pw_fixture_compile(&f, vs,
                        "kernel scale\ninput f32[64] split(0,all)\noutput f32[64] split(0,all)\n"
                        "attr alpha 3\n",
                        &scale));
  OK(pw_fixture_compile(&f, vs,
                        "kernel add\ninput f32[64] split(0,all)\ninput f32[64] split(0,all)\n"
                        "output f32[64] split(0,all)\n",
                        &add));
  OK(pw_fixture_compile(&f, vs,
                        "kernel relu\ninput f32[64] split(0,all)\noutput f32[64] split(0,all)\n",
                        &relu));
  int64_t dims[1] = {N};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  uint32_t x, s, a, r;
  OK(pw_graph_add_parameter(f.client, g, vs, &spec, &x));
  pw_value_t in[2] = {pw_value(x, 0)};
  OK(pw_graph_add_compute(f.client, g, "scale", scale, vs, in, 1, &s));
  in[0] = pw_value(s, 0);
  in[1] = pw_value(x, 0);
  OK(pw_graph_add_compute(f.client, g, "add", add, vs, in, 2, &a));
  in[0] = pw_value(a, 0);
  OK(pw_graph_add_compute(f.client, g, "relu", relu, vs, in, 1, &r));
  OK(pw_graph_add_output(f.client, g, pw_value(r, 0)));
  OK(pw_graph_add_output(f.client, g, pw_value(s, 0)));
  pw_graph_exec_t* exec = NULL;
  OK(pw_graph_exec_create(f.client, g, &exec));
  cr_assert_not_null(exec);
  for (int run = 0; run < RUNS; run += BATCH) {
    /* BATCH armed runs in flight at once (more than the armed blocks),
     * then the handle submission of each input. */
    pw_buffer_t xs[BATCH], armed[BATCH][2], plain[BATCH][2];
    pw_event_t* done[BATCH];
    float host[BATCH][N];
    for (int b = 0; b < BATCH; ++b) {
      for (int i = 0; i < N; ++i) {
        host[b][i] = (float)((run + b) * 7 + i * 13 % 29) * 0.37f - 5.0f;
      }
      OK(pw_fixture_f32(&f, vs, 1, dims, spec.sharding, host[b], &xs[b]));
      OK(pw_graph_exec_submit(exec, &xs[b], 1, NULL, armed[b], 2, &done[b]));
      for (int k = 0; k < b; ++k) cr_assert_neq(done[k], done[b], "run %d", run + b);
    }
    for (int b = 0; b < BATCH; ++b) OK(pw_fixture_wait(done[b]));
    for (int b = 0; b < BATCH; ++b) {
      OK(pw_graph_submit(f.client, g, &xs[b], 1, NULL, plain[b], 2, &done[b]));
      OK(pw_fixture_wait(done[b]));
      for (int o = 0; o < 2; ++o) {
        float got[N], want[N];
        OK(pw_buffer_to_host(f.client, armed[b][o], got, sizeof(got), PW_INFINITE_FUTURE));
        OK(pw_buffer_to_host(f.client, plain[b][o], want, sizeof(want), PW_INFINITE_FUTURE));
        cr_assert_eq(memcmp(got, want, sizeof(got)), 0, "run %d output %d", run + b, o);
        for (int i = 0; i < N; ++i) {
          float sx = 3.0f * host[b][i], ax = sx + host[b][i];
          float ref = o == 1 ? sx : (ax > 0 ? ax : 0.0f);
          cr_assert_eq(got[i], ref, "run %d output %d element %d: %g, want %g", run + b, o, i,
                       (double)got[i], (double)ref);
        }
        OK(pw_buffer_release(f.client, armed[b][o]));
        OK(pw_buffer_release(f.client, plain[b][o]));
      }
      OK(pw_buffer_release(f.client, xs[b]));
    }
  }
  pw_graph_exec_destroy(exec);
  OK(pw_graph_release(f.client, g));
  pw_fixture_deinit(&f);
  cr_assert_eq(pw_test_allocator_live(&t), 0, "%zu leaked", pw_test_allocator_live(&t));
}

/* Many reruns on the inline and threaded doubles, output dropped by
 * passing no out_done now and then: right values and exactly one launch
 * per run on every device. */
static void reruns_on(pw_fixture_backend_t kind) {
  env_t e;
  env_init(&e, kind, 1);
  pw_graph_exec_t* exec = NULL;
  OK(pw_graph_exec_create(e.f.client, e.g, &exec));
  enum { RUNS = 200 };
  for (int run = 0; run < RUNS; ++run) {
    pw_buffer_t y;
    pw_event_t* done = NULL;
    OK(pw_graph_exec_submit(exec, &e.x, 1, NULL, &y, 1, run % 3 == 2 ? NULL : &done));
    if (done != NULL) OK(pw_fixture_wait(done));
    if (run % 10 == 0) expect8(&e, y, e.data, "rerun");
    OK(pw_buffer_release(e.f.client, y));
  }
  pw_graph_exec_destroy(exec); /* waits for the runs whose event was not kept */
  for (uint32_t d = 0; d < 8; ++d) {
    cr_assert_eq(pw_double_backend_launch_count(e.f.dbl, d), RUNS, "device %u", d);
  }
  cr_assert_eq(pw_fixture_host_launches(&e.f), pw_fixture_kind_lanes(kind) ? 4 * RUNS : 0);
  env_deinit(&e);
}

/* pw_client_trim frees the blocks of finished runs the client keeps for
 * reuse, and only those: the block the slice keeps as its tail stays, a
 * second trim frees nothing, and the next run allocates a block again. */
Test(graph_exec, trim_frees_the_cached_blocks_and_runs_go_on) {
  env_t e;
  env_init(&e, PW_FIXTURE_DOUBLE_INLINE, 1);
  for (int i = 0; i < 3; ++i) handle_run_ok(&e, e.g, e.x, e.data);
  /* Run 1's block is in the cache, run 2's the slice's tail. */
  size_t cached = pw_test_allocator_live(&e.t);
  OK(pw_client_trim(e.f.client));
  size_t trimmed = pw_test_allocator_live(&e.t);
  cr_assert_lt(trimmed, cached, "trim freed nothing (%zu allocations)", cached);
  OK(pw_client_trim(e.f.client));
  cr_assert_eq(pw_test_allocator_live(&e.t), trimmed);
  handle_run_ok(&e, e.g, e.x, e.data); /* a new block; run 2's joins the cache */
  cr_assert_eq(pw_test_allocator_live(&e.t), cached);
  pw_status_t st = pw_client_trim(NULL);
  cr_assert_eq(pw_status_code(st), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(st);
  OK(pw_buffer_release(e.f.client, e.x));
  env_deinit(&e);
}

Test(graph_exec, reruns_inline) { reruns_on(PW_FIXTURE_DOUBLE_INLINE); }
Test(graph_exec, reruns_threaded) { reruns_on(PW_FIXTURE_DOUBLE_THREADED); }
Test(graph_exec, reruns_lanes) { reruns_on(PW_FIXTURE_DOUBLE_LANES); }
Test(graph_exec, reruns_lanes_queued) { reruns_on(PW_FIXTURE_DOUBLE_LANES_QUEUED); }

/* A graph without ops (its parameter is its output) and one without
 * parameters (a fill): the edges of a run's life (it completes inside
 * the submission). */
Test(graph_exec, graphs_without_ops_or_without_parameters) {
  env_t e;
  env_init(&e, PW_FIXTURE_DOUBLE_INLINE, 1);
  pw_graph_t pass, fill;
  uint32_t p, n;
  OK(pw_graph_create(e.f.client, &pass));
  OK(pw_graph_add_parameter(e.f.client, pass, e.vs, &e.spec, &p));
  OK(pw_graph_add_output(e.f.client, pass, pw_value(p, 0)));
  pw_executable_t fill7;
  OK(pw_fixture_compile(&e.f, e.vs, "fill 7\noutput u8[8] split(0,all)\n", &fill7));
  OK(pw_graph_create(e.f.client, &fill));
  OK(pw_graph_add_compute(e.f.client, fill, "fill", fill7, e.vs, NULL, 0, &n));
  OK(pw_graph_add_output(e.f.client, fill, pw_value(n, 0)));
  pw_graph_exec_t *ep = NULL, *ef = NULL;
  OK(pw_graph_exec_create(e.f.client, pass, &ep));
  OK(pw_graph_exec_create(e.f.client, fill, &ef));
  for (int run = 0; run < 20; ++run) {
    pw_buffer_t y;
    pw_event_t* done = NULL;
    OK(pw_graph_exec_submit(ep, &e.x, 1, NULL, &y, 1, &done));
    cr_assert(pw_event_is_ready(done), "run %d of an op-less graph is not complete", run);
    OK(pw_fixture_wait(done));
    expect8(&e, y, e.data, "passed through");
    OK(pw_buffer_release(e.f.client, y));
    OK(pw_graph_exec_submit(ef, NULL, 0, NULL, &y, 1, &done));
    OK(pw_fixture_wait(done));
    unsigned char bytes[8];
    OK(pw_buffer_to_host(e.f.client, y, bytes, sizeof(bytes), PW_INFINITE_FUTURE));
    for (int i = 0; i < 8; ++i) cr_assert_eq(bytes[i], 7, "run %d byte %d", run, i);
    OK(pw_buffer_release(e.f.client, y));
  }
  pw_graph_exec_destroy(ep);
  pw_graph_exec_destroy(ef);
  env_deinit(&e);
}

/* A graph with neither parameters nor outputs (a task run for its effect:
 * pw_graph_exec_submit goes straight to dispatch). Bad arguments still get
 * their status, a failed allocation fails the submission alone, and every
 * run that was accepted is counted on the slice. */
Test(graph_exec, effect_only_graphs_reject_bad_input_and_survive_allocation_failures) {
  env_t e;
  env_init(&e, PW_FIXTURE_DOUBLE_DEFERRED, 1);
  pw_executable_t fill7;
  OK(pw_fixture_compile(&e.f, e.vs, "fill 7\noutput u8[8] split(0,all)\n", &fill7));
  pw_graph_t g;
  uint32_t n;
  OK(pw_graph_create(e.f.client, &g));
  OK(pw_graph_add_compute(e.f.client, g, "effect", fill7, e.vs, NULL, 0, &n));
  uint32_t s0;
  OK(pw_vslice_binding(e.f.client, e.vs, &s0, NULL));
  pw_client_slice_stats_t before = {.struct_size = sizeof(pw_client_slice_stats_t)},
                          after = {.struct_size = sizeof(pw_client_slice_stats_t)};
  OK(pw_client_slice_stats(e.f.client, s0, &before));
  uint64_t accepted = 0;
  /* Allocation failures at every point of the first submissions (the
   * block, its done event, the op's device memory), then success. */
  size_t points = 0;
  for (size_t k = 1;; ++k) {
    pw_graph_exec_t* exec = NULL;
    OK(pw_graph_exec_create(e.f.client, g, &exec));
    size_t base = atomic_load(&e.t.attempts);
    e.t.fail_at = base + k;
    pw_event_t* done = (pw_event_t*)&e;
    pw_status_t s = pw_graph_exec_submit(exec, NULL, 0, NULL, NULL, 0, &done);
    size_t used = atomic_load(&e.t.attempts) - base;
    e.t.fail_at = 0;
    if (s != NULL) {
      cr_assert_eq(pw_status_code(s), PW_STATUS_RESOURCE_EXHAUSTED, "allocation %zu: %s", k,
                   pw_status_message(s));
      cr_assert_null(done, "allocation %zu: event handed out", k);
      pw_status_free(s);
      points++;
    } else {
      accepted++;
      run_all(&e.f);
      pw_status_t run = pw_fixture_wait(done);
      /* The op's device memory is allocated while submitting: the run
       * fails, naming its node, not the submission. */
      if (run != NULL) {
        cr_assert_eq(pw_status_code(run), PW_STATUS_RESOURCE_EXHAUSTED, "%s",
                     pw_status_message(run));
        cr_assert(strstr(pw_status_message(run), "\"effect\""), "%s", pw_status_message(run));
        pw_status_free(run);
        points++;
      }
    }
    /* The next runs of the same armed graph work, with and without a done
     * event. */
    OK(pw_graph_exec_submit(exec, NULL, 0, NULL, NULL, 0, NULL));
    OK(pw_graph_exec_submit(exec, NULL, 0, NULL, NULL, 0, &done));
    accepted += 2;
    run_all(&e.f);
    OK(pw_fixture_wait(done));
    pw_graph_exec_destroy(exec);
    if (s == NULL && used < k) break; /* fewer attempts than k: all swept */
    cr_assert_lt(k, 200, "no end to the sweep");
  }
  cr_assert_gt(points, 0, "the submission allocates nothing to fail");
  /* Bad input: each gets its status, and nothing runs. */
  pw_graph_exec_t* exec = NULL;
  OK(pw_graph_exec_create(e.f.client, g, &exec));
  pw_submit_options_t short_options = {.struct_size = 1};
  pw_buffer_t out = {99};
  struct {
    const pw_buffer_t* args;
    uint32_t arg_count;
    const pw_submit_options_t* options;
    pw_buffer_t* outputs;
    uint32_t output_count;
    const char* says;
  } bad[] = {
      {&e.x, 1, NULL, NULL, 0, "1 arguments given, the graph has 0 parameters"},
      {NULL, 1, NULL, NULL, 0, "args or out_outputs is NULL"},
      {NULL, 0, NULL, &out, 1, "room for 1 outputs given, the graph has 0"},
      {NULL, 0, NULL, NULL, 1, "args or out_outputs is NULL"},
      {NULL, 0, &short_options, NULL, 0, "options struct_size 1 is too small"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    pw_event_t* done = (pw_event_t*)&e;
    pw_status_t s = pw_graph_exec_submit(exec, bad[i].args, bad[i].arg_count, bad[i].options,
                                         bad[i].outputs, bad[i].output_count, &done);
    cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT, "case %zu: %s", i,
                 s ? pw_status_message(s) : "OK");
    cr_assert(strstr(pw_status_message(s), bad[i].says), "case %zu: %s", i,
              pw_status_message(s));
    cr_assert(strstr(pw_status_message(s), "pw_graph_exec_submit"), "case %zu: %s", i,
              pw_status_message(s));
    cr_assert_null(done, "case %zu", i);
    pw_status_free(s);
  }
  pw_event_t* done = NULL;
  OK(pw_graph_exec_submit(exec, NULL, 0, NULL, NULL, 0, &done));
  accepted++;
  run_all(&e.f);
  OK(pw_fixture_wait(done));
  pw_graph_exec_destroy(exec);
  OK(pw_client_slice_stats(e.f.client, s0, &after));
  cr_assert_eq(after.ops_completed - before.ops_completed, accepted,
               "%llu runs accepted, %llu ops counted", (unsigned long long)accepted,
               (unsigned long long)(after.ops_completed - before.ops_completed));
  OK(pw_graph_release(e.f.client, g));
  env_deinit(&e);
}

/* ---- bad input ---------------------------------------------------------- */

Test(graph_exec, create_rejects_bad_arguments_and_the_client_stays_usable) {
  env_t e;
  env_init(&e, PW_FIXTURE_DOUBLE_INLINE, 1);
  pw_graph_exec_t* exec = (pw_graph_exec_t*)&e; /* must be cleared */
  FAILS(pw_graph_exec_create(e.f.client, e.g, NULL), PW_STATUS_INVALID_ARGUMENT,
        "pw_graph_exec_create: out_exec is NULL");
  FAILS(pw_graph_exec_create(NULL, e.g, &exec), PW_STATUS_INVALID_ARGUMENT,
        "pw_graph_exec_create: client is NULL");
  cr_assert_null(exec);
  /* A handle of another kind, a null one, a released one, another
   * client's. */
  exec = (pw_graph_exec_t*)&e;
  FAILS(pw_graph_exec_create(e.f.client, (pw_graph_t){e.x.id}, &exec),
        PW_STATUS_INVALID_ARGUMENT, "not a graph handle");
  cr_assert_null(exec);
  FAILS(pw_graph_exec_create(e.f.client, (pw_graph_t){0}, &exec), PW_STATUS_INVALID_ARGUMENT,
        "null graph handle");
  pw_graph_t gone;
  OK(pw_graph_create(e.f.client, &gone));
  OK(pw_graph_release(e.f.client, gone));
  FAILS(pw_graph_exec_create(e.f.client, gone, &exec), PW_STATUS_NOT_FOUND,
        "graph handle");
  pw_client_t* other = NULL;
  OK(pw_client_create(e.f.runtime, NULL, &other));
  FAILS(pw_graph_exec_create(other, e.g, &exec), PW_STATUS_PERMISSION_DENIED,
        "belongs to another client");
  pw_client_destroy(other);
  /* A graph that does not validate: the finalize error, naming the node. */
  pw_graph_t bad;
  OK(pw_graph_create(e.f.client, &bad));
  pw_array_spec_t wide = e.spec;
  wide.shape.dims[0] = 16;
  uint32_t p;
  OK(pw_graph_add_parameter(e.f.client, bad, e.vs, &wide, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(e.f.client, bad, "mm", e.copy, e.vs, &in, 1, NULL));
  FAILS(pw_graph_exec_create(e.f.client, bad, &exec), PW_STATUS_INVALID_ARGUMENT,
        "graph node 1 (\"mm\"): input 0 shape mismatch");
  cr_assert_null(exec);
  /* Still usable: arm the good graph and run it. */
  OK(pw_graph_exec_create(e.f.client, e.g, &exec));
  armed_run_ok(&e, exec, e.x, e.data);
  pw_graph_exec_destroy(exec);
  pw_graph_exec_destroy(NULL); /* a no-op */
  env_deinit(&e);
}

/* |expr| fails with |code| and |needle|, clears the output and done
 * slots, and a good armed run works right after. */
#define REJECTS(expr, code, needle)                                        \
  do {                                                                     \
    y = (pw_buffer_t){12345};                                              \
    done = (pw_event_t*)&e;                                                \
    FAILS(expr, code, needle);                                             \
    cr_assert_null(done, "%s left out_done set", #expr);                   \
    armed_run_ok(&e, exec, e.x, e.data);                                   \
  } while (0)

Test(graph_exec, submit_rejects_bad_arguments_and_the_next_run_works) {
  env_t e;
  env_init(&e, PW_FIXTURE_DOUBLE_INLINE, 2);
  pw_graph_exec_t* exec = NULL;
  OK(pw_graph_exec_create(e.f.client, e.g, &exec));
  pw_buffer_t y, ys[2];
  pw_event_t* done = NULL;
  REJECTS(pw_graph_exec_submit(NULL, &e.x, 1, NULL, &y, 1, &done), PW_STATUS_INVALID_ARGUMENT,
          "pw_graph_exec_submit: exec is NULL");
  REJECTS(pw_graph_exec_submit(exec, NULL, 1, NULL, &y, 1, &done), PW_STATUS_INVALID_ARGUMENT,
          "pw_graph_exec_submit: args or out_outputs is NULL");
  REJECTS(pw_graph_exec_submit(exec, &e.x, 1, NULL, NULL, 1, &done), PW_STATUS_INVALID_ARGUMENT,
          "pw_graph_exec_submit: args or out_outputs is NULL");
  pw_buffer_t two[2] = {e.x, e.x};
  REJECTS(pw_graph_exec_submit(exec, two, 2, NULL, &y, 1, &done), PW_STATUS_INVALID_ARGUMENT,
          "pw_graph_exec_submit: 2 arguments given, the graph has 1 parameters");
  REJECTS(pw_graph_exec_submit(exec, &e.x, 0, NULL, &y, 1, &done), PW_STATUS_INVALID_ARGUMENT,
          "pw_graph_exec_submit: 0 arguments given, the graph has 1 parameters");
  REJECTS(pw_graph_exec_submit(exec, &e.x, 1, NULL, ys, 2, &done), PW_STATUS_INVALID_ARGUMENT,
          "pw_graph_exec_submit: room for 2 outputs given, the graph has 1");
  cr_assert_eq(ys[0].id, 0, "outputs not cleared on failure");
  pw_submit_options_t small = {.struct_size = sizeof(size_t)};
  REJECTS(pw_graph_exec_submit(exec, &e.x, 1, &small, &y, 1, &done), PW_STATUS_INVALID_ARGUMENT,
          "pw_graph_exec_submit: options struct_size 8 is too small");
  /* An argument on the wrong slice, of the wrong spec, released, null,
   * of the wrong kind. */
  pw_buffer_t there, longer, released;
  OK(pw_buffer_from_host(e.f.client, e.other, &e.spec, e.data, sizeof(e.data), &there));
  int64_t dims16[1] = {16};
  float sixteen[16] = {0};
  OK(pw_fixture_f32(&e.f, e.vs, 1, dims16, pw_sharding_split(0, PW_MESH_AXIS_ALL), sixteen,
                    &longer));
  OK(pw_buffer_from_host(e.f.client, e.vs, &e.spec, e.data, sizeof(e.data), &released));
  OK(pw_buffer_release(e.f.client, released));
  REJECTS(pw_graph_exec_submit(exec, &there, 1, NULL, &y, 1, &done), PW_STATUS_INVALID_ARGUMENT,
          "args[0]: buffer lives on slice");
  cr_assert_eq(y.id, 0, "output not cleared on failure");
  REJECTS(pw_graph_exec_submit(exec, &longer, 1, NULL, &y, 1, &done),
          PW_STATUS_INVALID_ARGUMENT, "args[0]: buffer is f32[16]");
  REJECTS(pw_graph_exec_submit(exec, &released, 1, NULL, &y, 1, &done), PW_STATUS_NOT_FOUND,
          "args[0]: buffer handle");
  pw_buffer_t null_arg = {0}, graph_arg = {e.g.id};
  REJECTS(pw_graph_exec_submit(exec, &null_arg, 1, NULL, &y, 1, &done),
          PW_STATUS_INVALID_ARGUMENT, "args[0]: null buffer handle");
  REJECTS(pw_graph_exec_submit(exec, &graph_arg, 1, NULL, &y, 1, &done),
          PW_STATUS_INVALID_ARGUMENT, "args[0]: handle");
  /* Nothing was consumed by the failures: the arguments are intact, and
   * only the good runs launched (one per REJECTS, plus none). */
  expect8(&e, e.x, e.data, "argument after failed submissions");
  cr_assert_eq(pw_double_backend_launch_count(e.f.dbl, 0), 12);
  /* A well-sized options struct with donation works through the armed
   * path too: the donated handle is gone. */
  pw_buffer_t z;
  OK(pw_buffer_from_host(e.f.client, e.vs, &e.spec, e.data, sizeof(e.data), &z));
  bool donate[1] = {true};
  pw_submit_options_t opts = {.struct_size = sizeof(opts), .donate = donate};
  OK(pw_graph_exec_submit(exec, &z, 1, &opts, &y, 1, &done));
  OK(pw_fixture_wait(done));
  pw_array_spec_t got;
  FAILS(pw_buffer_spec(e.f.client, z, &got), PW_STATUS_NOT_FOUND, "buffer handle");
  expect8(&e, y, e.data, "donated run");
  pw_graph_exec_destroy(exec);
  env_deinit(&e);
}

