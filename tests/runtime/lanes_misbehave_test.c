/* Host-launch lanes (lib/sched/lanes.c) when things go wrong: a host
 * launch refused, or completed with an error, fails its op with a status
 * naming the lane ("devices a-b (host h)"), its dependents fail, the
 * other lanes' parts finish and the runtime stays usable; a lost host
 * launch ends in DEADLINE_EXCEEDED under a launch deadline, and
 * pw_client_destroy returns under its drain deadline; transfers into
 * and out of lane slices from a failed source fail without launching;
 * disable_host_launch gives the same results with no host launch.
 * (A host launch completed twice: lifecycle_test.c, with the hostile
 * backend.) Fixture kinds: the threaded double with host launch and two
 * devices per host, and the inline one behind the queue wrapper. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/queue_wrapper.h"
#include "support/test_allocators.h"

TestSuite(lanes_misbehave, .fini = pw_test_check_leaks, .timeout = 30);

#define WAIT_NS INT64_C(5000000000)
#define MS INT64_C(1000000)
#define SEC INT64_C(1000000000)

static const char* kCopy8 = "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n";
static const char* kCopy4 = "copy\ninput f32[4] split(0,all)\noutput f32[4] split(0,all)\n";

/* How many of the lanes of a slice of |devices| starting at backend
 * device |first| (2 devices per host) |message| names; the lanes are
 * "devices m-(m+1) (host (first+m)/2)" by mesh index m. */
static int lanes_named(const char* message, uint32_t first, uint32_t devices) {
  int named = 0;
  for (uint32_t m = 0; m < devices; m += 2) {
    char lane[64];
    snprintf(lane, sizeof(lane), "devices %u-%u (host %u)", m, m + 1, (first + m) / 2);
    named += strstr(message, lane) != NULL;
  }
  return named;
}

/* p -> "a" (copy) -> "b" (copy) -> output, on one 2x4 slice. */
static pw_graph_t chain2(pw_fixture_t* f, pw_vslice_t* vs) {
  OK(pw_fixture_vslice(f, "2x4", vs));
  pw_executable_t copy;
  OK(pw_fixture_compile(f, *vs, kCopy8, &copy));
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  pw_graph_t g;
  OK(pw_graph_create(f->client, &g));
  uint32_t p, a, b;
  OK(pw_graph_add_parameter(f->client, g, *vs, &spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(f->client, g, "a", copy, *vs, &in, 1, &a));
  in = pw_value(a, 0);
  OK(pw_graph_add_compute(f->client, g, "b", copy, *vs, &in, 1, &b));
  OK(pw_graph_add_output(f->client, g, pw_value(b, 0)));
  return g;
}

static pw_buffer_t arg8(pw_fixture_t* f, pw_vslice_t vs, const float* data) {
  int64_t dims[1] = {8};
  pw_buffer_t b;
  OK(pw_fixture_f32(f, vs, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), data, &b));
  return b;
}

/* Runs |g| on |arg|: the run's status; its output's in |*out_status|
 * (NULL for OK) and its values in |back|. */
static pw_status_t run(pw_fixture_t* f, pw_graph_t g, pw_buffer_t arg, float* back,
                       size_t bytes, pw_status_t* out_status) {
  pw_buffer_t out;
  pw_event_t* done = NULL;
  OK(pw_graph_submit(f->client, g, &arg, 1, NULL, &out, 1, &done));
  pw_status_t s = pw_fixture_wait(done);
  *out_status = pw_buffer_to_host(f->client, out, back, bytes, pw_deadline_from_timeout(WAIT_NS));
  OK(pw_buffer_release(f->client, out));
  return s;
}

/* The double's first host launch from now (one of op "a"'s lanes: on a
 * queued slice a later one may be "b"'s, queued behind "a") is refused
 * or completes with DATA_LOSS (|mode|): "a" fails naming exactly one
 * lane, "b" fails
 * after it, no part is left in flight, and the next runs are right. */
static void failed_host_launch(pw_fixture_backend_t kind, pw_double_fail_mode_t mode) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, kind, 1, "2x4", pw_allocator_system()));
  pw_vslice_t vs;
  pw_graph_t g = chain2(&f, &vs);
  const float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  pw_buffer_t x = arg8(&f, vs, data);
  pw_double_backend_fail_launch(f.dbl, 1, PW_STATUS_DATA_LOSS, mode);
  float back[8];
  pw_status_t out_status = NULL;
  pw_status_t s = run(&f, g, x, back, sizeof(back), &out_status);
  cr_assert_eq(pw_status_code(s), PW_STATUS_DATA_LOSS, "%s", pw_status_message(s));
  const char* m = pw_status_message(s);
  cr_assert(strstr(m, "node 1 (\"a\") on slice"), "%s", m);
  cr_assert_eq(lanes_named(m, 0, 8), 1, "names one lane: %s", m);
  pw_status_free(s);
  cr_assert_eq(pw_status_code(out_status), PW_STATUS_DATA_LOSS, "%s",
               pw_status_message(out_status));
  pw_status_free(out_status);
  /* The other three lanes' parts of "a" ran and came back: nothing hangs. */
  OK(pw_client_wait_idle(f.client, pw_deadline_from_timeout(WAIT_NS)));
  cr_assert(pw_double_backend_wait_idle(f.dbl, WAIT_NS));
  cr_assert_eq(pw_double_backend_in_flight(f.dbl), 0);
  uint64_t rejected = 0;
  for (uint32_t h = 0; h < 4; ++h) rejected += pw_double_backend_host_rejected(f.dbl, h);
  bool queued = kind == PW_FIXTURE_DOUBLE_LANES_QUEUED;
  /* Unqueued, the dependents never launched; queued, they may have been
   * queued behind "a" (and failed with its status). */
  uint64_t host = pw_fixture_host_launches(&f);
  if (!queued) {
    cr_assert_eq(rejected, mode == PW_DOUBLE_FAIL_AT_LAUNCH ? 1 : 0);
    cr_assert_eq(host, mode == PW_DOUBLE_FAIL_AT_LAUNCH ? 3 : 4, "%llu", (unsigned long long)host);
  } else {
    cr_assert(host >= 3 && host <= 8, "%llu host launches", (unsigned long long)host);
  }
  /* Usable: healthy runs on the same slice, right values, all lanes. */
  for (int r = 0; r < 3; ++r) {
    memset(back, 0, sizeof(back));
    OK(run(&f, g, x, back, sizeof(back), &out_status));
    OK(out_status);
    cr_assert_eq(memcmp(back, data, sizeof(data)), 0, "run %d", r);
  }
  cr_assert_eq(pw_fixture_host_launches(&f), host + 3 * 2 * 4);
  OK(pw_buffer_release(f.client, x));
  pw_fixture_deinit(&f);
}

Test(lanes_misbehave, refused_host_launch_fails_the_op_naming_the_lane) {
  failed_host_launch(PW_FIXTURE_DOUBLE_LANES, PW_DOUBLE_FAIL_AT_LAUNCH);
}
Test(lanes_misbehave, host_launch_completing_with_an_error_fails_the_op_naming_the_lane) {
  failed_host_launch(PW_FIXTURE_DOUBLE_LANES, PW_DOUBLE_FAIL_AT_COMPLETION);
}
Test(lanes_misbehave, refused_host_launch_on_queued_lanes) {
  failed_host_launch(PW_FIXTURE_DOUBLE_LANES_QUEUED, PW_DOUBLE_FAIL_AT_LAUNCH);
}
Test(lanes_misbehave, host_launch_completing_with_an_error_on_queued_lanes) {
  failed_host_launch(PW_FIXTURE_DOUBLE_LANES_QUEUED, PW_DOUBLE_FAIL_AT_COMPLETION);
}

/* The queue wrapper loses op "b"'s host launch on devices 2-3 (their
 * second launch): under a 50 ms launch deadline the run ends in
 * DEADLINE_EXCEEDED naming node and lane, and the runtime goes on. */
Test(lanes_misbehave, lost_host_launch_ends_in_deadline_exceeded) {
  pw_fixture_t f;
  pw_fixture_extra_t extra = {.launch_deadline_ns = 50 * MS};
  OK(pw_fixture_init_extra(&f, PW_FIXTURE_DOUBLE_LANES_QUEUED, 1, "2x4", pw_allocator_system(),
                           &extra));
  pw_vslice_t vs;
  pw_graph_t g = chain2(&f, &vs);
  const float data[8] = {8, 7, 6, 5, 4, 3, 2, 1};
  pw_buffer_t x = arg8(&f, vs, data);
  pw_queue_wrapper_lose(f.qw, 2, 2);
  float back[8];
  pw_status_t out_status = NULL;
  pw_time_t t0 = pw_clock_now();
  pw_status_t s = run(&f, g, x, back, sizeof(back), &out_status);
  cr_assert_lt(pw_clock_now() - t0, 4 * SEC, "no hang");
  cr_assert_eq(pw_status_code(s), PW_STATUS_DEADLINE_EXCEEDED, "%s", pw_status_message(s));
  cr_assert(strstr(pw_status_message(s), "node 2 (\"b\") on slice"), "%s", pw_status_message(s));
  cr_assert(strstr(pw_status_message(s), "devices 2-3 (host 1)"), "%s", pw_status_message(s));
  pw_status_free(s);
  cr_assert_eq(pw_status_code(out_status), PW_STATUS_DEADLINE_EXCEEDED);
  pw_status_free(out_status);
  cr_assert_gt(pw_queue_wrapper_stats(f.qw, 2).host_launches, 0);
  for (int r = 0; r < 3; ++r) {
    OK(run(&f, g, x, back, sizeof(back), &out_status));
    OK(out_status);
    cr_assert_eq(memcmp(back, data, sizeof(data)), 0, "run %d", r);
  }
  OK(pw_buffer_release(f.client, x));
  pw_fixture_deinit(&f);
}

/* No launch deadline: a lost host launch holds its run until the client
 * is destroyed; the destroy fails it after the drain deadline and
 * returns. */
Test(lanes_misbehave, client_destroy_returns_over_a_lost_host_launch) {
  pw_fixture_t f;
  pw_fixture_extra_t extra = {.drain_deadline_ns = 100 * MS};
  OK(pw_fixture_init_extra(&f, PW_FIXTURE_DOUBLE_LANES_QUEUED, 1, "2x4", pw_allocator_system(),
                           &extra));
  pw_vslice_t vs;
  pw_graph_t g = chain2(&f, &vs);
  const float data[8] = {0};
  pw_buffer_t x = arg8(&f, vs, data), out;
  pw_queue_wrapper_lose(f.qw, 4, 1); /* "a" on devices 4-5 */
  pw_event_t* done = NULL;
  OK(pw_graph_submit(f.client, g, &x, 1, NULL, &out, 1, &done));
  pw_status_t early = pw_event_wait(done, pw_deadline_from_timeout(20 * MS));
  cr_assert_eq(pw_status_code(early), PW_STATUS_DEADLINE_EXCEEDED, "still running");
  pw_status_free(early);
  OK(pw_buffer_release(f.client, x));
  OK(pw_buffer_release(f.client, out));
  pw_time_t t0 = pw_clock_now();
  OK(pw_client_destroy(f.client));
  f.client = NULL;
  cr_assert_lt(pw_clock_now() - t0, 5 * SEC, "within the drain deadline and a bit");
  pw_status_t s = pw_event_wait(done, PW_IMMEDIATE_PAST);
  cr_assert_eq(pw_status_code(s), PW_STATUS_DEADLINE_EXCEEDED, "%s", pw_status_message(s));
  cr_assert(strstr(pw_status_message(s), "devices 4-5 (host 2)"), "%s", pw_status_message(s));
  pw_status_free(s);
  pw_event_release(done);
  pw_fixture_deinit(&f);
}

/* p (on |from|) -> "first" copy -> "ship" transfer to |to| -> "second"
 * copy -> output, on two 4-device lane slices. */
static pw_graph_t across(pw_fixture_t* f, pw_vslice_t from, pw_vslice_t to, pw_executable_t c1,
                         pw_executable_t c2) {
  int64_t dims[1] = {4};
  pw_sharding_t split = pw_sharding_split(0, PW_MESH_AXIS_ALL);
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, split);
  pw_graph_t g;
  OK(pw_graph_create(f->client, &g));
  uint32_t p, x, t, y;
  OK(pw_graph_add_parameter(f->client, g, from, &spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(f->client, g, "first", c1, from, &in, 1, &x));
  OK(pw_graph_add_transfer(f->client, g, "ship", pw_value(x, 0), to, split, &t));
  in = pw_value(t, 0);
  OK(pw_graph_add_compute(f->client, g, "second", c2, to, &in, 1, &y));
  OK(pw_graph_add_output(f->client, g, pw_value(y, 0)));
  return g;
}

/* Slices a (devices 0-3, hosts 0-1) and b (4-7, hosts 2-3). Run 1: a
 * host launch of "first" on a is refused: the transfer out of a fails
 * and nothing runs on b. Run 2 (b -> a) takes run 1's failed output:
 * the transfer into a fails and nothing launches at all. Then both
 * directions carry the values. */
Test(lanes_misbehave, transfers_out_of_and_into_lanes_from_a_failed_source) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_LANES, 2, "4", pw_allocator_system()));
  pw_vslice_t a, b;
  OK(pw_fixture_vslice(&f, "4", &a));
  OK(pw_fixture_vslice(&f, "4", &b));
  uint32_t at = 9, bt = 9;
  OK(pw_vslice_binding(f.client, a, &at, NULL));
  OK(pw_vslice_binding(f.client, b, &bt, NULL));
  if (at == 1) { /* keep a on devices 0-3 */
    pw_vslice_t t = a;
    a = b;
    b = t;
  }
  pw_executable_t ca, cb;
  OK(pw_fixture_compile(&f, a, kCopy4, &ca));
  OK(pw_fixture_compile(&f, b, kCopy4, &cb));
  pw_graph_t ab = across(&f, a, b, ca, cb), ba = across(&f, b, a, cb, ca);
  const float data[4] = {3, 1, 4, 1};
  int64_t dims[1] = {4};
  pw_buffer_t x, y, z;
  OK(pw_fixture_f32(&f, a, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), data, &x));
  pw_double_backend_fail_launch(f.dbl, 1, PW_STATUS_DATA_LOSS, PW_DOUBLE_FAIL_AT_LAUNCH);
  pw_event_t* done = NULL;
  OK(pw_graph_submit(f.client, ab, &x, 1, NULL, &y, 1, &done));
  pw_status_t s = pw_fixture_wait(done);
  cr_assert_eq(pw_status_code(s), PW_STATUS_DATA_LOSS, "%s", pw_status_message(s));
  cr_assert(strstr(pw_status_message(s), "\"first\""), "%s", pw_status_message(s));
  cr_assert_eq(lanes_named(pw_status_message(s), 0, 4), 1, "%s", pw_status_message(s));
  pw_status_free(s);
  OK(pw_client_wait_idle(f.client, pw_deadline_from_timeout(WAIT_NS)));
  cr_assert_eq(pw_fixture_host_launches(&f), 1, "only a's other lane launched");
  cr_assert_eq(pw_double_backend_host_launch_count(f.dbl, 2) +
                   pw_double_backend_host_launch_count(f.dbl, 3), 0, "nothing ran on b");
  OK(pw_graph_submit(f.client, ba, &y, 1, NULL, &z, 1, &done));
  s = pw_fixture_wait(done);
  cr_assert_eq(pw_status_code(s), PW_STATUS_DATA_LOSS, "%s", pw_status_message(s));
  cr_assert(strstr(pw_status_message(s), "argument of node"), "%s", pw_status_message(s));
  pw_status_free(s);
  cr_assert_eq(pw_fixture_host_launches(&f), 1, "a failed argument launches nothing");
  OK(pw_buffer_release(f.client, y));
  OK(pw_buffer_release(f.client, z));
  /* Healthy both ways: a -> b -> a. */
  OK(pw_graph_submit(f.client, ab, &x, 1, NULL, &y, 1, &done));
  OK(pw_fixture_wait(done));
  OK(pw_graph_submit(f.client, ba, &y, 1, NULL, &z, 1, &done));
  OK(pw_fixture_wait(done));
  float back[4] = {0};
  OK(pw_buffer_to_host(f.client, z, back, sizeof(back), PW_INFINITE_FUTURE));
  cr_assert_eq(memcmp(back, data, sizeof(data)), 0);
  cr_assert_eq(pw_fixture_host_launches(&f), 1 + 2 * 2 * 2);
  pw_fixture_deinit(&f);
}

/* One scenario's observable results: chain values, an all-reduce, a
 * failing op's status code, and how many launches of either kind. */
typedef struct outcome_t {
  float chain[8], reduce[8];
  int failed_code, dependent_code;
  uint64_t device_launches, host_launches;
} outcome_t;

static void scenario(bool disable, outcome_t* o) {
  memset(o, 0, sizeof(*o));
  pw_fixture_t f;
  pw_fixture_extra_t extra = {.disable_host_launch = disable};
  OK(pw_fixture_init_extra(&f, PW_FIXTURE_DOUBLE_LANES, 1, "2x4", pw_allocator_system(), &extra));
  pw_vslice_t vs;
  pw_graph_t g = chain2(&f, &vs);
  float data[8];
  for (int i = 0; i < 8; ++i) data[i] = (float)(i * i) - 3.5f;
  pw_buffer_t x = arg8(&f, vs, data);
  pw_status_t out_status;
  OK(run(&f, g, x, o->chain, sizeof(o->chain), &out_status));
  OK(out_status);
  /* p -> all_reduce_sum -> output. */
  pw_executable_t sum, fail;
  OK(pw_fixture_compile(&f, vs, "all_reduce_sum\ninput f32[8] split(0,all)\n"
                                "output f32[8] split(0,all)\n", &sum));
  OK(pw_fixture_compile(&f, vs, "fail 9\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n",
                        &fail));
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  pw_graph_t r, bad;
  uint32_t p, n, m;
  OK(pw_graph_create(f.client, &r));
  OK(pw_graph_add_parameter(f.client, r, vs, &spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(f.client, r, "sum", sum, vs, &in, 1, &n));
  OK(pw_graph_add_output(f.client, r, pw_value(n, 0)));
  OK(run(&f, r, x, o->reduce, sizeof(o->reduce), &out_status));
  OK(out_status);
  /* p -> fail -> sum -> output. */
  OK(pw_graph_create(f.client, &bad));
  OK(pw_graph_add_parameter(f.client, bad, vs, &spec, &p));
  in = pw_value(p, 0);
  OK(pw_graph_add_compute(f.client, bad, "broken", fail, vs, &in, 1, &n));
  in = pw_value(n, 0);
  OK(pw_graph_add_compute(f.client, bad, "after", sum, vs, &in, 1, &m));
  OK(pw_graph_add_output(f.client, bad, pw_value(m, 0)));
  float ignored[8];
  pw_status_t s = run(&f, bad, x, ignored, sizeof(ignored), &out_status);
  o->failed_code = pw_status_code(s);
  o->dependent_code = pw_status_code(out_status);
  pw_status_free(s);
  pw_status_free(out_status);
  o->device_launches = pw_double_backend_total_launches(f.dbl);
  o->host_launches = pw_fixture_host_launches(&f);
  OK(pw_buffer_release(f.client, x));
  pw_fixture_deinit(&f);
}

Test(lanes_misbehave, disable_host_launch_gives_the_same_results_without_host_launches) {
  outcome_t on, off;
  scenario(false, &on);
  scenario(true, &off);
  cr_assert_eq(memcmp(on.chain, off.chain, sizeof(on.chain)), 0);
  cr_assert_eq(memcmp(on.reduce, off.reduce, sizeof(on.reduce)), 0);
  float want = 0;
  for (int i = 0; i < 8; ++i) want += (float)(i * i) - 3.5f;
  for (int i = 0; i < 8; ++i) cr_assert_float_eq(on.reduce[i], want, 1e-5);
  cr_assert_eq(on.failed_code, 9, "the program's code");
  cr_assert_eq(on.failed_code, off.failed_code);
  cr_assert_eq(on.dependent_code, off.dependent_code);
  /* Both launched every device part: 2 + 1 + 1 ops of 8 devices. */
  cr_assert_eq(on.device_launches, 4 * 8);
  cr_assert_eq(off.device_launches, on.device_launches);
  cr_assert_eq(on.host_launches, 4 * 4, "one per lane and op");
  cr_assert_eq(off.host_launches, 0, "turned off");
}
