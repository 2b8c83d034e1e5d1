/* Queue-ordered sim devices in INLINE mode (sim.h, STREAMS): a launch on
 * a device with nothing queued takes the direct path (decided and
 * completed when it arrives), everything else goes through the device's
 * queue. Both must give the queue's semantics: done exactly once, in
 * queue order, never nested inside an earlier done of the same device,
 * the same virtual times and trace hash as MANUAL delivery (everything
 * issued at host time 0) and as the unordered INLINE path for compute
 * only workloads, and refusals in the middle of a queue that leave it
 * working. Every virtual time is asserted exactly. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "sim_test_support.h"
#include "support/test_allocators.h"

TestSuite(sim_inline_queue, .fini = pw_test_check_leaks);

typedef struct pw_iq_rec_t {
  int id;
  int calls;
  int code;
  uint64_t start, end;
} pw_iq_rec_t;

/* Completion order and done nesting, per test. */
static int pw_iq_order[64];
static size_t pw_iq_order_count;
static int pw_iq_in_done;
static int pw_iq_max_in_done;

static void pw_iq_done(void* user, pw_status_t status, const pw_backend_timing_t* t) {
  pw_iq_rec_t* r = user;
  if (++pw_iq_in_done > pw_iq_max_in_done) pw_iq_max_in_done = pw_iq_in_done;
  if (r->calls++ == 0) {
    r->code = (int)pw_status_code(status);
    if (t != NULL) {
      r->start = t->start_ns;
      r->end = t->end_ns;
    }
  }
  pw_status_free(status);
  if (pw_iq_order_count < 64) pw_iq_order[pw_iq_order_count++] = r->id;
  --pw_iq_in_done;
}

static void pw_iq_reset(void) {
  pw_iq_order_count = 0;
  pw_iq_in_done = 0;
  pw_iq_max_in_done = 0;
}

/* One launch of |e| on |device| (mesh position |mesh| of |group|, NULL:
 * a gang of one) with |seq|; the descriptor lives on the stack. */
static pw_status_t pw_iq_launch(pw_backend_t b, pw_backend_executable_t e, uint32_t device,
                                const uint32_t* group, uint32_t mesh, uint64_t gang,
                                uint64_t seq, pw_iq_rec_t* r, int id) {
  memset(r, 0, sizeof(*r));
  r->id = id;
  r->code = -1;
  uint32_t self = device;
  pw_backend_launch_t l;
  memset(&l, 0, sizeof(l));
  l.struct_size = PW_BACKEND_LAUNCH_SIZE_V2;
  l.executable = e;
  l.device = device;
  l.mesh_index = mesh;
  l.group_devices = group != NULL ? group : &self;
  l.group_size = group != NULL ? 2 : 1;
  l.gang_id = gang;
  l.done_user = r;
  l.done_timed = pw_iq_done;
  l.queue_seq = seq;
  return b.vtable->launch(b.self, &l);
}

static pw_backend_t pw_iq_make(uint32_t per_slice, pw_sim_mode_t mode, uint32_t depth,
                               bool blocking) {
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.slice_count = 1;
  o.devices_per_slice = per_slice;
  o.mode = mode;
  o.queue_depth = depth;
  o.blocking_collectives = blocking;
  pw_backend_t b;
  PW_SIM_OK(pw_sim_backend_create(&o, &b));
  return b;
}

static void pw_iq_expect(pw_status_t status, pw_status_code_t code, const char* part) {
  cr_assert_eq(pw_status_code(status), code, "%s", pw_status_message(status));
  cr_assert(strstr(pw_status_message(status), part) != NULL, "'%s' lacks '%s'",
            pw_status_message(status), part);
  pw_status_free(status);
}

/* Ticks and a collective on two devices, launched in the order below;
 * device 0's collective waits for device 1's, device 0 launches on
 * behind it. Returns the trace hash. */
static uint64_t pw_iq_gang_workload(pw_sim_mode_t mode, bool blocking, pw_iq_rec_t r[7]) {
  pw_iq_reset();
  pw_backend_t b = pw_iq_make(2, mode, 4, blocking);
  pw_backend_executable_t tick = pw_sim_test_load(b, "op tick\ntime 10us\n", 1);
  pw_backend_executable_t sync = pw_sim_test_load(b, "op sync\nkind collective\ntime 1us\n", 2);
  static const uint32_t group[2] = {0, 1};
  PW_SIM_OK(pw_iq_launch(b, tick, 0, NULL, 0, 1, 1, &r[0], 0));
  PW_SIM_OK(pw_iq_launch(b, tick, 0, NULL, 0, 2, 2, &r[1], 1));
  PW_SIM_OK(pw_iq_launch(b, sync, 0, group, 0, 10, 3, &r[2], 2));
  PW_SIM_OK(pw_iq_launch(b, tick, 0, NULL, 0, 11, 4, &r[3], 3));
  PW_SIM_OK(pw_iq_launch(b, tick, 1, NULL, 0, 20, 1, &r[4], 4));
  PW_SIM_OK(pw_iq_launch(b, sync, 1, group, 1, 10, 2, &r[5], 5));
  PW_SIM_OK(pw_iq_launch(b, tick, 1, NULL, 0, 21, 3, &r[6], 6));
  if (mode == PW_SIM_MODE_MANUAL) PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
  uint64_t hash = pw_sim_backend_trace_hash(b);
  b.vtable->unload(b.self, tick);
  b.vtable->unload(b.self, sync);
  b.vtable->destroy(b.self);
  return hash;
}

Test(sim_inline_queue, gang_workload_matches_manual_delivery) {
  for (int blocking = 0; blocking < 2; ++blocking) {
    pw_iq_rec_t in[7], man[7];
    uint64_t h_inline = pw_iq_gang_workload(PW_SIM_MODE_INLINE, blocking, in);
    cr_assert_eq(pw_iq_max_in_done, 1, "a done ran inside another");
    /* Per device, queue order: device 0's 0..3 and device 1's 4..6. */
    int last0 = -1, last1 = 3;
    for (size_t k = 0; k < pw_iq_order_count; ++k) {
      int id = pw_iq_order[k];
      int* last = id < 4 ? &last0 : &last1;
      cr_assert_gt(id, *last, "blocking %d: op %d completed after op %d", blocking, id, *last);
      *last = id;
    }
    uint64_t h_manual = pw_iq_gang_workload(PW_SIM_MODE_MANUAL, blocking, man);
    cr_assert_eq(h_inline, h_manual, "blocking %d: trace hashes differ", blocking);
    for (int i = 0; i < 7; ++i) {
      cr_assert_eq(in[i].calls, 1, "blocking %d op %d: done ran %d times", blocking, i,
                   in[i].calls);
      cr_assert_eq(in[i].code, PW_STATUS_OK);
      cr_assert_eq(in[i].start, man[i].start, "blocking %d op %d", blocking, i);
      cr_assert_eq(in[i].end, man[i].end, "blocking %d op %d", blocking, i);
    }
    /* The gang meets when device 0 arrives at 20 us and takes 1 us plus
     * the 2 us ICI latency; a non-blocking device 0 ran its next tick
     * meanwhile, a blocking one after. */
    cr_assert_eq(in[2].start, 20000);
    cr_assert_eq(in[2].end, 23000);
    cr_assert_eq(in[5].end, 23000);
    cr_assert_eq(in[3].start, blocking ? 23000u : 20000u);
    cr_assert_eq(in[6].start, 23000);
  }
}

/* Ticks on four devices, one of which fails in the middle of its queue.
 * Returns the trace hash. */
static uint64_t pw_iq_tick_workload(pw_sim_mode_t mode, uint32_t depth, pw_iq_rec_t r[16]) {
  pw_iq_reset();
  pw_backend_t b = pw_iq_make(4, mode, depth, false);
  pw_backend_executable_t tick = pw_sim_test_load(b, "op tick\ntime 10us\n", 1);
  PW_SIM_OK(pw_sim_backend_fail(b, PW_SIM_FAIL_CHIP, 2, 25000));
  for (int k = 0; k < 16; ++k) {
    uint32_t device = (uint32_t)k % 4;
    PW_SIM_OK(pw_iq_launch(b, tick, device, NULL, 0, (uint64_t)k + 1, (uint64_t)k / 4 + 1,
                           &r[k], k));
  }
  if (mode == PW_SIM_MODE_MANUAL) PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
  uint64_t hash = pw_sim_backend_trace_hash(b);
  b.vtable->unload(b.self, tick);
  b.vtable->destroy(b.self);
  return hash;
}

Test(sim_inline_queue, direct_launches_match_unordered_and_manual) {
  pw_iq_rec_t ref[16], direct[16], man[16];
  uint64_t h_ref = pw_iq_tick_workload(PW_SIM_MODE_INLINE, 0, ref);
  uint64_t h_direct = pw_iq_tick_workload(PW_SIM_MODE_INLINE, 8, direct);
  uint64_t h_manual = pw_iq_tick_workload(PW_SIM_MODE_MANUAL, 8, man);
  cr_assert_eq(h_direct, h_ref);
  cr_assert_eq(h_manual, h_ref);
  for (int k = 0; k < 16; ++k) {
    cr_assert_eq(direct[k].calls, 1, "op %d", k);
    cr_assert_eq(direct[k].code, ref[k].code, "op %d", k);
    cr_assert_eq(man[k].code, ref[k].code, "op %d", k);
    cr_assert_eq(direct[k].start, ref[k].start, "op %d", k);
    cr_assert_eq(direct[k].end, ref[k].end, "op %d", k);
    cr_assert_eq(man[k].end, ref[k].end, "op %d", k);
    uint32_t n = (uint32_t)k / 4;
    if (k % 4 == 2 && n >= 2) {
      /* Device 2 fails at 25 us: its third op is lost there, the fourth
       * at once. */
      cr_assert_eq(direct[k].code, PW_STATUS_UNAVAILABLE, "op %d", k);
      cr_assert_eq(direct[k].end, 25000, "op %d", k);
    } else {
      cr_assert_eq(direct[k].code, PW_STATUS_OK, "op %d", k);
      cr_assert_eq(direct[k].start, n * 10000u, "op %d", k);
      cr_assert_eq(direct[k].end, n * 10000u + 10000u, "op %d", k);
    }
  }
}

/* A done that launches again on its own device: the new launch queues
 * behind the direct one and its done runs after that one returned. */
typedef struct pw_iq_chain_t {
  pw_backend_t b;
  pw_backend_executable_t e;
  pw_iq_rec_t recs[4];
} pw_iq_chain_t;

static pw_iq_chain_t pw_iq_chain;

static void pw_iq_chain_done(void* user, pw_status_t status, const pw_backend_timing_t* t);

static pw_status_t pw_iq_chain_launch(int k) {
  pw_iq_rec_t* r = &pw_iq_chain.recs[k];
  memset(r, 0, sizeof(*r));
  r->id = k;
  r->code = -1;
  uint32_t device = 0;
  pw_backend_launch_t l;
  memset(&l, 0, sizeof(l));
  l.struct_size = PW_BACKEND_LAUNCH_SIZE_V2;
  l.executable = pw_iq_chain.e;
  l.group_devices = &device;
  l.group_size = 1;
  l.gang_id = (uint64_t)k + 1;
  l.queue_seq = (uint64_t)k + 1;
  l.done_user = r;
  l.done_timed = pw_iq_chain_done;
  return pw_iq_chain.b.vtable->launch(pw_iq_chain.b.self, &l);
}

static void pw_iq_chain_done(void* user, pw_status_t status, const pw_backend_timing_t* t) {
  pw_iq_rec_t* r = user;
  pw_iq_done(user, status, t);
  if (r->id == 3) return;
  ++pw_iq_in_done; /* this done has not returned while it launches */
  PW_SIM_OK(pw_iq_chain_launch(r->id + 1));
  --pw_iq_in_done;
}

Test(sim_inline_queue, done_launching_again_runs_after_it_returns) {
  pw_iq_reset();
  memset(&pw_iq_chain, 0, sizeof(pw_iq_chain));
  pw_iq_chain.b = pw_iq_make(1, PW_SIM_MODE_INLINE, 1, false);
  pw_iq_chain.e = pw_sim_test_load(pw_iq_chain.b, "op tick\ntime 10us\n", 1);
  /* Depth 1: each launch from a done fits because the done calling it is
   * no longer outstanding. */
  PW_SIM_OK(pw_iq_chain_launch(0));
  cr_assert_eq(pw_iq_max_in_done, 1, "a done ran inside the done that launched it");
  cr_assert_eq(pw_iq_order_count, 4);
  for (int k = 0; k < 4; ++k) {
    cr_assert_eq(pw_iq_order[k], k);
    cr_assert_eq(pw_iq_chain.recs[k].calls, 1);
    cr_assert_eq(pw_iq_chain.recs[k].code, PW_STATUS_OK);
    cr_assert_eq(pw_iq_chain.recs[k].start, (uint64_t)k * 10000u);
    cr_assert_eq(pw_iq_chain.recs[k].end, (uint64_t)k * 10000u + 10000u);
  }
  pw_iq_chain.b.vtable->unload(pw_iq_chain.b.self, pw_iq_chain.e);
  pw_iq_chain.b.vtable->destroy(pw_iq_chain.b.self);
}

/* Refusals while a device's queue holds launches behind a collective, and
 * on an empty queue (the direct path falls back to the queue, which
 * refuses): done never runs for them, the queue goes on. */
Test(sim_inline_queue, refusals_mid_queue_leave_it_working) {
  pw_iq_reset();
  pw_backend_t b = pw_iq_make(2, PW_SIM_MODE_INLINE, 2, false);
  pw_backend_executable_t tick = pw_sim_test_load(b, "op tick\ntime 10us\n", 1);
  pw_backend_executable_t sync = pw_sim_test_load(b, "op sync\nkind collective\ntime 1us\n", 2);
  static const uint32_t group[2] = {0, 1};
  pw_iq_rec_t r[8];
  PW_SIM_OK(pw_iq_launch(b, sync, 0, group, 0, 10, 1, &r[0], 0));
  PW_SIM_OK(pw_iq_launch(b, tick, 0, NULL, 0, 11, 2, &r[1], 1));
  cr_assert_eq(r[1].calls, 0, "released ahead of the collective before it");
  pw_iq_expect(pw_iq_launch(b, tick, 0, NULL, 0, 12, 3, &r[2], 2),
               PW_STATUS_RESOURCE_EXHAUSTED, "queue full (depth 2, 2 launches outstanding)");
  /* The refused launch's queue_seq counts: a gap is fine, going back is not. */
  pw_iq_expect(pw_iq_launch(b, tick, 0, NULL, 0, 13, 3, &r[3], 3), PW_STATUS_INVALID_ARGUMENT,
               "queue_seq 3 comes after 3");
  PW_SIM_OK(pw_iq_launch(b, sync, 1, group, 1, 10, 1, &r[4], 4));
  cr_assert_eq(r[0].calls, 1);
  cr_assert_eq(r[1].calls, 1);
  cr_assert_eq(r[4].calls, 1);
  cr_assert_eq(r[0].end, 3000); /* 1 us + the 2 us ICI latency */
  cr_assert_eq(r[1].start, 0);
  cr_assert_eq(r[1].end, 10000);
  /* Device 0 in queue order (devices' relative order is not promised). */
  cr_assert_eq(pw_iq_order_count, 3);
  int seen0 = -1, seen1 = -1;
  for (size_t k = 0; k < pw_iq_order_count; ++k) {
    if (pw_iq_order[k] == 0) seen0 = (int)k;
    if (pw_iq_order[k] == 1) seen1 = (int)k;
  }
  cr_assert(seen0 >= 0 && seen1 > seen0, "the collective completes first on device 0");
  /* Device 0's queue is empty again: direct launches, the seq rule kept. */
  PW_SIM_OK(pw_iq_launch(b, tick, 0, NULL, 0, 14, 5, &r[5], 5));
  cr_assert_eq(r[5].calls, 1);
  cr_assert_eq(r[5].start, 10000);
  pw_iq_expect(pw_iq_launch(b, tick, 0, NULL, 0, 15, 5, &r[6], 6), PW_STATUS_INVALID_ARGUMENT,
               "queue_seq 5 comes after 5");
  cr_assert_eq(r[2].calls + r[3].calls + r[6].calls, 0, "a refused launch's done ran");
  PW_SIM_OK(pw_iq_launch(b, tick, 0, NULL, 0, 16, 0, &r[7], 7)); /* seq 0: unsequenced */
  cr_assert_eq(r[7].end, 30000);
  b.vtable->unload(b.self, tick);
  b.vtable->unload(b.self, sync);
  b.vtable->destroy(b.self);
}
