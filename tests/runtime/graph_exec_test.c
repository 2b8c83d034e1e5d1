/* Armed graphs (pw_graph_exec_t, include/pathways/graph.h): results equal
 * pw_graph_submit's; bad input; the graph handle released after arming;
 * overlapping runs (both armed blocks busy, then the client's cache);
 * destroy while runs are in flight or while a armed block is still a
 * slice's tail; the client destroying armed graphs left alive; failed
 * launches and failed allocations; per-slice stats; gang order with
 * handle submissions interleaved.
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

#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "sched/dispatch_internal.h"
#include "support/test_allocators.h"

TestSuite(graph_exec, .fini = pw_test_check_leaks);

#define DEADLINE_NS 10000000000LL

static const char* kCopy8 = "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n";

/* ---- white-box probes (see the file comment) ---------------------------- */

/* Armed blocks of |exec| that exist and are not free: a run in them
 * (not finished on its slot: a armed run's ops hold no reference), or a
 * slice's tail reference. */
static int private_busy(pw_graph_exec_t* exec) {
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

/* A fixture on a counting allocator with |slices| 2x4 slices, a vslice on
 * slice 0 (and one on slice 1 when there are two), the copy executable,
 * and graph |g|: x -> copy "a" -> output. |x| holds data 1..8. */
typedef struct env_t {
  pw_test_allocator_t t;
  pw_fixture_t f;
  pw_vslice_t vs, other;
  pw_executable_t copy;
  pw_graph_t g;
  pw_array_spec_t spec;
  pw_buffer_t x;
  float data[8];
} env_t;

static void env_init_sched(env_t* e, pw_fixture_backend_t kind, uint32_t slices,
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

static void env_init(env_t* e, pw_fixture_backend_t kind, uint32_t slices) {
  pw_sched_policy_t none = {NULL, NULL};
  env_init_sched(e, kind, slices, none, 0);
}

/* Destroys the client and runtime; nothing the runtime allocated is left. */
static void env_deinit(env_t* e) {
  pw_fixture_deinit(&e->f);
  cr_assert_eq(pw_test_allocator_live(&e->t), 0, "%zu allocations leaked",
               pw_test_allocator_live(&e->t));
  cr_assert_eq(atomic_load(&e->t.size_mismatches), 0);
}

static void run_all(pw_fixture_t* f) {
  while (pw_double_backend_run_deferred(f->dbl, 0) > 0) {
  }
}

/* |buf| holds |want| (8 floats). */
static void expect8(env_t* e, pw_buffer_t buf, const float* want, const char* what) {
  float back[8] = {0};
  OK(pw_buffer_to_host(e->f.client, buf, back, sizeof(back),
                       pw_deadline_from_timeout(DEADLINE_NS)));
  cr_assert_eq(memcmp(back, want, sizeof(back)), 0, "%s: got %g %g .. %g", what,
               (double)back[0], (double)back[1], (double)back[7]);
}

/* One armed run of e->g on |x|, waited for; its output holds |want|. */
static void armed_run_ok(env_t* e, pw_graph_exec_t* exec, pw_buffer_t x, const float* want) {
  pw_buffer_t y;
  pw_event_t* done = NULL;
  OK(pw_graph_exec_submit(exec, &x, 1, NULL, &y, 1, &done));
  if (e->f.dbl != NULL) run_all(&e->f);
  OK(pw_fixture_wait(done));
  expect8(e, y, want, "armed run");
  OK(pw_buffer_release(e->f.client, y));
}

/* The same through pw_graph_submit of |g|. */
static void handle_run_ok(env_t* e, pw_graph_t g, pw_buffer_t x, const float* want) {
  pw_buffer_t y;
  pw_event_t* done = NULL;
  OK(pw_graph_submit(e->f.client, g, &x, 1, NULL, &y, 1, &done));
  if (e->f.dbl != NULL) run_all(&e->f);
  OK(pw_fixture_wait(done));
  expect8(e, y, want, "handle run");
  OK(pw_buffer_release(e->f.client, y));
}

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

typedef struct destroyer_t {
  pw_graph_exec_t* exec;
  atomic_bool returned;
} destroyer_t;

static void* destroy_thread(void* arg) {
  destroyer_t* d = arg;
  pw_graph_exec_destroy(d->exec);
  atomic_store(&d->returned, true);
  return NULL;
}

static void sleep_ms(int ms) {
  struct timespec ts = {0, ms * 1000000L};
  nanosleep(&ts, NULL);
}

/* Waits up to |ms| for |d| to return; true if it did. */
static bool returned_within(destroyer_t* d, int ms) {
  for (int i = 0; i < ms && !atomic_load(&d->returned); ++i) sleep_ms(1);
  return atomic_load(&d->returned);
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
