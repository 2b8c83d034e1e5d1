/* The sim backend's fleet model (sim.h, STREAMS, COST, UTILISATION):
 * queue-ordered devices driven through the vtable with v2 launches and
 * queue_seq (as the CTS and a queued runtime do), done_timed device times,
 * the dispatch latency, cross-slice collectives at DCN rates, blocking
 * collectives and their deadlock, and the device-time queries. Every
 * virtual time is asserted exactly. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "sim_test_support.h"
#include "support/test_allocators.h"

TestSuite(sim_stream, .fini = pw_test_check_leaks);

/* One launch's completion, and the order completions came in. */
typedef struct pw_rec_t {
  int id;
  int calls;
  int code;
  bool timed;
  uint64_t start, end;
  char message[512];
} pw_rec_t;

static int pw_order[128];
static size_t pw_order_count;

static void pw_rec_done(pw_rec_t* r, pw_status_t status) {
  if (r->calls++ == 0) {
    r->code = (int)pw_status_code(status);
    snprintf(r->message, sizeof(r->message), "%s", pw_status_message(status));
  }
  pw_status_free(status);
  if (pw_order_count < 128) pw_order[pw_order_count++] = r->id;
}

static void pw_rec_timed(void* user, pw_status_t status, const pw_backend_timing_t* t) {
  pw_rec_t* r = user;
  if (t != NULL) {
    r->timed = true;
    r->start = t->start_ns;
    r->end = t->end_ns;
  }
  pw_rec_done(r, status);
}

static void pw_rec_plain(void* user, pw_status_t status) { pw_rec_done(user, status); }

typedef struct pw_shot_t {
  pw_backend_executable_t e;
  uint32_t device, mesh_index;
  const uint32_t* group;
  uint32_t group_size;
  uint64_t gang, seq;
  pw_backend_memory_t in, out;
  size_t struct_size; /* 0: v2 */
} pw_shot_t;

/* Launches |s| (descriptor on the stack: the sim copies what it keeps). */
static pw_status_t pw_shoot(pw_backend_t b, const pw_shot_t* s, pw_rec_t* r, int id) {
  memset(r, 0, sizeof(*r));
  r->id = id;
  r->code = -1;
  uint32_t self = s->device;
  pw_backend_launch_t l;
  memset(&l, 0, sizeof(l));
  l.struct_size = s->struct_size ? s->struct_size : PW_BACKEND_LAUNCH_SIZE_V2;
  l.executable = s->e;
  l.device = s->device;
  l.mesh_index = s->mesh_index;
  l.group_devices = s->group ? s->group : &self;
  l.group_size = s->group ? s->group_size : 1;
  l.gang_id = s->gang;
  l.inputs = &s->in;
  l.input_count = s->in ? 1 : 0;
  l.outputs = &s->out;
  l.output_count = s->out ? 1 : 0;
  l.done = pw_rec_plain;
  l.done_user = r;
  l.queue_seq = s->seq;
  l.done_timed = pw_rec_timed;
  return b.vtable->launch(b.self, &l);
}

static pw_backend_t pw_make(uint32_t slices, uint32_t per_slice, pw_sim_mode_t mode,
                            uint32_t depth, bool blocking, uint64_t latency) {
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.slice_count = slices;
  o.devices_per_slice = per_slice;
  o.mode = mode;
  o.queue_depth = depth;
  o.blocking_collectives = blocking;
  o.dispatch_latency_ns = latency;
  pw_backend_t b;
  PW_SIM_OK(pw_sim_backend_create(&o, &b));
  return b;
}

static void pw_expect_code(pw_status_t status, pw_status_code_t code, const char* part) {
  cr_assert_eq(pw_status_code(status), code, "%s", pw_status_message(status));
  if (part != NULL) {
    cr_assert(strstr(pw_status_message(status), part) != NULL, "'%s' lacks '%s'",
              pw_status_message(status), part);
  }
  pw_status_free(status);
}

Test(sim_stream, queue_info_reports_the_depth) {
  pw_backend_t b = pw_make(1, 2, PW_SIM_MODE_INLINE, 0, false, 0);
  cr_assert_geq(b.vtable->struct_size, PW_BACKEND_VTABLE_SIZE_V3);
  pw_backend_queue_info_t q = {.struct_size = sizeof(q)};
  PW_SIM_OK(b.vtable->queue_info(b.self, 1, &q));
  cr_assert_eq(q.flags, 0, "queue_depth 0: one launch at a time");
  b.vtable->destroy(b.self);
  b = pw_make(1, 2, PW_SIM_MODE_INLINE, 16, false, 0);
  PW_SIM_OK(b.vtable->queue_info(b.self, 1, &q));
  cr_assert_eq(q.flags, PW_BACKEND_QUEUE_ORDERED);
  cr_assert_eq(q.depth, 16);
  pw_expect_code(b.vtable->queue_info(b.self, 2, &q), PW_STATUS_INVALID_ARGUMENT, "device 2");
  b.vtable->destroy(b.self);
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.queue_depth = PW_BACKEND_MAX_QUEUE_DEPTH + 1;
  pw_expect_code(pw_sim_backend_create(&o, &b), PW_STATUS_INVALID_ARGUMENT, "queue_depth");
}

Test(sim_stream, queued_launches_run_back_to_back_in_order_up_to_the_depth) {
  pw_backend_t b = pw_make(1, 2, PW_SIM_MODE_MANUAL, 3, false, 0);
  pw_backend_executable_t e = pw_sim_test_load(b, "op tick\ntime 10us\n", 1);
  pw_rec_t r[5];
  for (int i = 0; i < 3; ++i) {
    pw_shot_t s = {.e = e, .device = 0, .gang = 10 + (uint64_t)i, .seq = 1 + (uint64_t)i};
    PW_SIM_OK(pw_shoot(b, &s, &r[i], i));
  }
  pw_sim_device_state_t st = {.struct_size = sizeof(st)};
  PW_SIM_OK(pw_sim_backend_device_state(b, 0, &st));
  cr_assert_eq(st.outstanding, 3);
  pw_shot_t over = {.e = e, .device = 0, .gang = 13, .seq = 4};
  pw_expect_code(pw_shoot(b, &over, &r[3], 3), PW_STATUS_RESOURCE_EXHAUSTED, "depth 3");
  pw_expect_code(pw_shoot(b, &over, &r[3], 3), PW_STATUS_INVALID_ARGUMENT, "queue_seq 4");
  cr_assert_eq(r[3].calls, 0, "a refused launch never completes");
  PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
  for (int i = 0; i < 3; ++i) {
    cr_assert_eq(r[i].calls, 1);
    cr_assert_eq(r[i].code, PW_STATUS_OK);
    cr_assert(r[i].timed, "done_timed with the virtual times");
    cr_assert_eq(r[i].start, (uint64_t)i * 10000);
    cr_assert_eq(r[i].end, (uint64_t)(i + 1) * 10000);
    cr_assert_eq(pw_order[i], i, "done in queue_seq order");
  }
  /* Room again; a v1 launch (no queue_seq, no done_timed) gets done. */
  pw_shot_t v1 = {.e = e, .device = 0, .gang = 14, .struct_size = PW_BACKEND_LAUNCH_SIZE_V1};
  PW_SIM_OK(pw_shoot(b, &v1, &r[4], 4));
  PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
  cr_assert_eq(r[4].calls, 1);
  cr_assert(!r[4].timed, "v1 launch: done, not done_timed");
  PW_SIM_OK(pw_sim_backend_device_state(b, 0, &st));
  cr_assert_eq(st.busy_until, 40000);
  cr_assert_eq(st.outstanding, 0);
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
}

Test(sim_stream, a_queue_waits_for_a_collective_and_done_stays_in_order) {
  /* Depth 4, non-blocking: dev0 queues [all_reduce, independent op,
   * consumer of the all_reduce's output]; the consumer waits for the
   * gang, the independent op does not, and done still comes in queue
   * order (the independent op's after the all_reduce's). */
  pw_backend_t b = pw_make(1, 2, PW_SIM_MODE_INLINE, 4, false, 0);
  pw_backend_executable_t ar =
      pw_sim_test_load(b, "op ar\nkind all_reduce_sum\ntime 5us\ncollective_bytes 0\ninput f32[2] split(0,all)\n"
                          "output f32[2] split(0,all)\n", 2);
  pw_backend_executable_t use =
      pw_sim_test_load(b, "op use\ntime 10us\ninput f32[1] replicated\n", 1);
  pw_backend_executable_t tick = pw_sim_test_load(b, "op tick\ntime 1us\n", 1);
  uint32_t group[2] = {0, 1};
  pw_backend_memory_t in[2], out[2];
  float one = 1, two = 2;
  for (uint32_t d = 0; d < 2; ++d) {
    PW_SIM_OK(b.vtable->allocate(b.self, d, 4, &in[d]));
    PW_SIM_OK(b.vtable->allocate(b.self, d, 4, &out[d]));
    PW_SIM_OK(b.vtable->copy_to_device(b.self, d, in[d], 0, d ? &two : &one, 4));
  }
  pw_rec_t r[4];
  pw_shot_t s0 = {.e = ar, .device = 0, .group = group, .group_size = 2, .gang = 7, .seq = 1,
                  .in = in[0], .out = out[0]};
  PW_SIM_OK(pw_shoot(b, &s0, &r[0], 0));
  pw_shot_t s1 = {.e = tick, .device = 0, .gang = 8, .seq = 2};
  PW_SIM_OK(pw_shoot(b, &s1, &r[1], 1));
  pw_shot_t s2 = {.e = use, .device = 0, .gang = 9, .seq = 3, .in = out[0]};
  PW_SIM_OK(pw_shoot(b, &s2, &r[2], 2));
  cr_assert_eq(r[0].calls + r[1].calls + r[2].calls, 0, "held behind the gang");
  PW_SIM_OK(pw_sim_backend_run_until(b, 3000, NULL)); /* dev1 launches at 3 us */
  pw_shot_t s3 = {.e = ar, .device = 1, .mesh_index = 1, .group = group, .group_size = 2,
                  .gang = 7, .seq = 1, .in = in[1], .out = out[1]};
  PW_SIM_OK(pw_shoot(b, &s3, &r[3], 3));
  for (int i = 0; i < 4; ++i) cr_assert_eq(r[i].code, PW_STATUS_OK, "%s", r[i].message);
  cr_assert_eq(r[0].start, 3000, "the rendezvous");
  cr_assert_eq(r[0].end, 3000 + 5000 + 2000);
  cr_assert_eq(r[1].start, 0, "the independent op ran while the gang waited");
  cr_assert_eq(r[1].end, 1000);
  cr_assert_eq(r[2].start, 10000, "the consumer starts at the gang's end");
  cr_assert_eq(r[2].end, 20000);
  int dev0[3], n = 0; /* device 0's completions, in the order they came */
  for (size_t i = 0; i < pw_order_count; ++i) {
    if (pw_order[i] != 3 && n < 3) dev0[n++] = pw_order[i];
  }
  cr_assert_eq(n, 3);
  cr_assert(dev0[0] == 0 && dev0[1] == 1 && dev0[2] == 2, "device 0's done in queue order");
  float sum = 0;
  PW_SIM_OK(b.vtable->copy_to_host(b.self, 0, out[0], 0, &sum, 4));
  cr_assert_eq(sum, 3.0f);
  for (uint32_t d = 0; d < 2; ++d) {
    b.vtable->deallocate(b.self, d, in[d]);
    b.vtable->deallocate(b.self, d, out[d]);
  }
  b.vtable->unload(b.self, ar);
  b.vtable->unload(b.self, use);
  b.vtable->unload(b.self, tick);
  b.vtable->destroy(b.self);
}

Test(sim_stream, dispatch_latency_delays_every_start) {
  /* MANUAL: the host reacts at the completion's time; each launch starts
   * no earlier than its launch time + 50 us. */
  pw_backend_t b = pw_make(1, 2, PW_SIM_MODE_MANUAL, 0, false, 50000);
  pw_backend_executable_t e = pw_sim_test_load(b, "op tick\ntime 10us\n", 1);
  pw_rec_t r[3];
  pw_shot_t s = {.e = e, .device = 0, .gang = 1};
  PW_SIM_OK(pw_shoot(b, &s, &r[0], 0));
  s.gang = 2;
  PW_SIM_OK(pw_shoot(b, &s, &r[1], 1)); /* same launch time: back to back */
  PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
  cr_assert_eq(r[0].start, 50000);
  cr_assert_eq(r[1].start, 60000);
  cr_assert_eq(r[1].end, 70000);
  s.gang = 3;
  PW_SIM_OK(pw_shoot(b, &s, &r[2], 2)); /* the host is at 70 us now */
  PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
  cr_assert_eq(r[2].start, 120000);
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
}

/* INLINE: a launch made from a done callback is issued at that
 * completion's virtual time. */
typedef struct pw_chain_t {
  pw_backend_t b;
  pw_backend_executable_t e;
  int left;
  pw_rec_t recs[4];
} pw_chain_t;

static void pw_chain_done(void* user, pw_status_t status, const pw_backend_timing_t* t) {
  pw_chain_t* c = user;
  int i = 3 - c->left;
  c->recs[i].start = t->start_ns;
  c->recs[i].end = t->end_ns;
  pw_status_free(status);
  if (c->left-- == 0) return;
  uint32_t device = 0;
  pw_backend_launch_t l;
  memset(&l, 0, sizeof(l));
  l.struct_size = PW_BACKEND_LAUNCH_SIZE_V2;
  l.executable = c->e;
  l.group_devices = &device;
  l.group_size = 1;
  l.gang_id = (uint64_t)i + 2;
  l.done_user = c;
  l.done_timed = pw_chain_done;
  PW_SIM_OK(c->b.vtable->launch(c->b.self, &l));
}

Test(sim_stream, dispatch_latency_stacks_for_stage_by_stage_dispatch) {
  for (uint32_t depth = 0; depth <= 4; depth += 4) {
    pw_chain_t c;
    memset(&c, 0, sizeof(c));
    c.b = pw_make(1, 1, PW_SIM_MODE_INLINE, depth, false, 50000);
    c.e = pw_sim_test_load(c.b, "op tick\ntime 10us\n", 1);
    c.left = 3;
    pw_chain_done(&c, NULL, &(pw_backend_timing_t){sizeof(pw_backend_timing_t), 0, 0, 0});
    /* recs[0] is the seed call; the chain is recs[1..3]. */
    for (int i = 1; i < 4; ++i) {
      cr_assert_eq(c.recs[i].start, 50000 + (uint64_t)(i - 1) * 60000, "depth %u op %d", depth,
                   i);
    }
    c.b.vtable->unload(c.b.self, c.e);
    c.b.vtable->destroy(c.b.self);
  }
}

/* The cost of one 4 MiB all-reduce over |group| on a |slices| x |per| fleet. */
static uint64_t pw_allreduce_cost(uint32_t slices, uint32_t per, const uint32_t* group,
                                  uint32_t n) {
  pw_backend_t b = pw_make(slices, per, PW_SIM_MODE_INLINE, 0, false, 0);
  pw_backend_executable_t e =
      pw_sim_test_load(b, "op ar\nkind collective\ncollective_bytes 4194304\n", n);
  pw_rec_t r[16];
  for (uint32_t m = 0; m < n; ++m) {
    pw_shot_t s = {.e = e, .device = group[m], .mesh_index = m, .group = group,
                   .group_size = n, .gang = 1};
    PW_SIM_OK(pw_shoot(b, &s, &r[m], (int)m));
  }
  for (uint32_t m = 0; m < n; ++m) {
    cr_assert_eq(r[m].code, PW_STATUS_OK, "%s", r[m].message);
    cr_assert_eq(r[m].end, r[0].end);
  }
  pw_sim_stats_t st = {.struct_size = sizeof(st)};
  PW_SIM_OK(pw_sim_backend_stats(b, &st));
  cr_assert_eq(st.busy_ns, (uint64_t)n * r[0].end, "device time of the collective");
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
  return r[0].end;
}

Test(sim_stream, cross_slice_collectives_pay_dcn) {
  uint32_t group[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  /* Defaults: ICI 1e11 B/s + 2 us, DCN 2.5e10 B/s + 10 us; B = 4 MiB. */
  /* 1 slice of 8: 2000 + 2*7/8 * B / 1e11 s = 75400.32 -> 75401 ns. */
  cr_assert_eq(pw_allreduce_cost(1, 8, group, 8), 75401);
  /* 2 slices of 4: ring of 4 on ICI (2000 + 1.5 * 41943.04) + ring of 2
   * on DCN over B/4 (10000 + 1 * 41943.04) = 116857.6 -> 116858. */
  cr_assert_eq(pw_allreduce_cost(2, 4, group, 8), 116858);
  /* 8 slices of 1: no ICI step; 10000 + 1.75 * 167772.16 = 303601.28. */
  cr_assert_eq(pw_allreduce_cost(8, 1, group, 8), 303602);
  /* 4 devices of one slice of a 2 x 4 fleet: the one-slice price. */
  uint32_t half[4] = {4, 5, 6, 7};
  cr_assert_eq(pw_allreduce_cost(2, 4, half, 4), 2000 + 62915);
}

Test(sim_stream, broken_gang_order_deadlocks_blocking_devices_and_is_detected) {
  for (int queued = 0; queued < 2; ++queued) {
    pw_order_count = 0;
    pw_backend_t b = pw_make(1, 2, queued ? PW_SIM_MODE_MANUAL : PW_SIM_MODE_INLINE,
                             queued ? 4 : 0, true, 0);
    pw_backend_executable_t e = pw_sim_test_load(b, "op sync\nkind collective\ntime 1us\n", 2);
    uint32_t group[2] = {0, 1};
    pw_rec_t r[4];
    /* dev0 takes gang A then B; dev1 takes B then A. */
    pw_shot_t s = {.e = e, .group = group, .group_size = 2};
    s.device = 0, s.mesh_index = 0, s.gang = 100, s.seq = queued ? 1 : 0;
    PW_SIM_OK(pw_shoot(b, &s, &r[0], 0));
    pw_sim_device_state_t st = {.struct_size = sizeof(st)};
    PW_SIM_OK(pw_sim_backend_device_state(b, 0, &st));
    cr_assert_eq(st.waiting_gang, 100, "device 0 blocks inside gang A");
    s.device = 1, s.mesh_index = 1, s.gang = 200, s.seq = queued ? 1 : 0;
    PW_SIM_OK(pw_shoot(b, &s, &r[1], 1)); /* the cycle closes here */
    s.device = 0, s.mesh_index = 0, s.gang = 200, s.seq = queued ? 2 : 0;
    PW_SIM_OK(pw_shoot(b, &s, &r[2], 2));
    s.device = 1, s.mesh_index = 1, s.gang = 100, s.seq = queued ? 2 : 0;
    PW_SIM_OK(pw_shoot(b, &s, &r[3], 3));
    if (queued) PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
    for (int i = 0; i < 4; ++i) {
      cr_assert_eq(r[i].calls, 1, "launch %d completed once", i);
      cr_assert_eq(r[i].code, PW_STATUS_ABORTED, "%d: %s", i, r[i].message);
    }
    cr_assert(strstr(r[0].message, "collective deadlock") != NULL, "%s", r[0].message);
    cr_assert(strstr(r[0].message, "gang 100 waits for device 1, which is blocked in gang 200") !=
                  NULL,
              "%s", r[0].message);
    PW_SIM_OK(pw_sim_backend_device_state(b, 0, &st));
    cr_assert_eq(st.waiting_gang, 0);
    cr_assert_eq(st.outstanding, 0);
    b.vtable->unload(b.self, e);
    b.vtable->destroy(b.self);
  }
}

Test(sim_stream, gangs_in_order_complete_and_a_blocked_device_waits_in_virtual_time) {
  pw_backend_t b = pw_make(1, 2, PW_SIM_MODE_INLINE, 0, true, 0);
  pw_backend_executable_t sync = pw_sim_test_load(b, "op sync\nkind collective\ntime 1us\n", 2);
  pw_backend_executable_t tick = pw_sim_test_load(b, "op tick\ntime 10us\n", 1);
  uint32_t group[2] = {0, 1};
  pw_rec_t r[4];
  pw_shot_t s = {.e = tick, .device = 1, .gang = 1};
  PW_SIM_OK(pw_shoot(b, &s, &r[0], 0)); /* dev1 busy until 10 us */
  pw_shot_t c = {.e = sync, .group = group, .group_size = 2, .gang = 2};
  PW_SIM_OK(pw_shoot(b, &c, &r[1], 1)); /* dev0 arrives at 0 and blocks */
  pw_shot_t after = {.e = tick, .device = 0, .gang = 3};
  PW_SIM_OK(pw_shoot(b, &after, &r[2], 2)); /* held behind the collective */
  cr_assert_eq(r[2].calls, 0);
  c.device = 1, c.mesh_index = 1;
  PW_SIM_OK(pw_shoot(b, &c, &r[3], 3));
  cr_assert_eq(r[1].code, PW_STATUS_OK, "%s", r[1].message);
  cr_assert_eq(r[1].start, 10000, "the rendezvous");
  cr_assert_eq(r[1].end, 10000 + 1000 + 2000);
  cr_assert_eq(r[2].start, 13000, "dev0 waited inside the collective");
  pw_sim_device_state_t st = {.struct_size = sizeof(st)};
  PW_SIM_OK(pw_sim_backend_device_state(b, 0, &st));
  cr_assert_eq(st.busy_ns, 3000 + 10000, "waiting is not busy");
  cr_assert_eq(st.first_start, 10000);
  cr_assert_eq(st.last_end, 23000);
  b.vtable->unload(b.self, sync);
  b.vtable->unload(b.self, tick);
  b.vtable->destroy(b.self);
}

Test(sim_stream, device_time_and_span) {
  pw_backend_t b = pw_make(1, 2, PW_SIM_MODE_INLINE, 0, false, 0);
  pw_backend_executable_t e = pw_sim_test_load(b, "op tick\ntime 10us\n", 1);
  pw_rec_t r[4];
  for (int i = 0; i < 3; ++i) {
    pw_shot_t s = {.e = e, .device = 0, .gang = 1 + (uint64_t)i};
    PW_SIM_OK(pw_shoot(b, &s, &r[i], i));
    cr_assert(r[i].timed, "done_timed without a queue too");
    cr_assert_eq(r[i].start, (uint64_t)i * 10000);
  }
  PW_SIM_OK(pw_sim_backend_run_until(b, 25000, NULL));
  pw_shot_t s = {.e = e, .device = 1, .gang = 9};
  PW_SIM_OK(pw_shoot(b, &s, &r[3], 3));
  pw_sim_stats_t st = {.struct_size = sizeof(st)};
  PW_SIM_OK(pw_sim_backend_stats(b, &st));
  cr_assert_eq(st.busy_ns, 40000);
  cr_assert_eq(st.span_start, 0);
  cr_assert_eq(st.span_end, 35000);
  pw_sim_device_state_t d = {.struct_size = sizeof(d)};
  PW_SIM_OK(pw_sim_backend_device_state(b, 1, &d));
  cr_assert_eq(d.busy_ns, 10000);
  cr_assert_eq(d.first_start, 25000);
  cr_assert_eq(d.last_end, 35000);
  /* A v1 caller's struct is filled only as far as it reaches. */
  pw_sim_stats_t v1;
  memset(&v1, 0xab, sizeof(v1));
  v1.struct_size = PW_SIM_STATS_SIZE_V1;
  PW_SIM_OK(pw_sim_backend_stats(b, &v1));
  cr_assert_eq(v1.events, 4);
  cr_assert_eq(v1.busy_ns, 0xababababababababull);
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
}
