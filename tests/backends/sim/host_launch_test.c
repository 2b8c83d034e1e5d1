/* The sim backend's hosts (sim.h, HOSTS): devices_per_host and the
 * host ids it gives, and launch_host (vtable v4) driven through the
 * vtable as a lane-dispatching runtime would: lanes compute what
 * per-device launches compute, with the same virtual times and trace
 * hash; collectives meet across host launches and single launches;
 * every refusal is typed, runs nothing and leaves the backend usable;
 * failures, queues, THREADED delivery and allocation failures give one
 * done per lane (or none when refused). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "sim_test_support.h"
#include "support/test_allocators.h"

TestSuite(sim_host, .fini = pw_test_check_leaks);

#define PW_MAX_LANE 8

/* One completion (a lane's or a single launch's). */
typedef struct pw_rec_t {
  _Atomic int calls;
  int code;
  bool timed;
  uint64_t start, end;
  char message[512];
} pw_rec_t;

static void pw_rec_timed(void* user, pw_status_t status, const pw_backend_timing_t* t) {
  pw_rec_t* r = user;
  if (atomic_load(&r->calls) == 0) {
    r->code = (int)pw_status_code(status);
    snprintf(r->message, sizeof(r->message), "%s", pw_status_message(status));
    if (t != NULL) {
      r->timed = true;
      r->start = t->start_ns;
      r->end = t->end_ns;
    }
  }
  pw_status_free(status);
  atomic_fetch_add(&r->calls, 1);
}

static void pw_rec_plain(void* user, pw_status_t status) { pw_rec_timed(user, status, NULL); }

static void pw_rec_reset(pw_rec_t* r) {
  memset(r, 0, sizeof(*r));
  r->code = -1;
}

/* A host launch descriptor and the arrays it points at. */
typedef struct pw_lane_t {
  pw_backend_host_launch_t h;
  pw_backend_memory_t in[PW_MAX_LANE], out[PW_MAX_LANE];
  const pw_backend_memory_t* ins[1];
  const pw_backend_memory_t* outs[1];
  pw_rec_t rec;
} pw_lane_t;

/* Describes the lane of mesh indices [start, start + count) of a gang
 * over |group| (|n| devices) on |host|; |in|/|out| are per mesh index
 * (NULL: the executable takes none). */
static void pw_lane(pw_lane_t* l, pw_backend_executable_t e, uint32_t host, const uint32_t* group,
                    uint32_t n, uint32_t start, uint32_t count, uint64_t gang,
                    const pw_backend_memory_t* in, const pw_backend_memory_t* out) {
  memset(l, 0, sizeof(*l));
  pw_rec_reset(&l->rec);
  for (uint32_t i = 0; i < count; ++i) {
    if (in) l->in[i] = in[start + i];
    if (out) l->out[i] = out[start + i];
  }
  l->ins[0] = l->in;
  l->outs[0] = l->out;
  pw_backend_host_launch_t* h = &l->h;
  h->struct_size = sizeof(*h);
  h->executable = e;
  h->host = host;
  h->mesh_start = start;
  h->device_count = count;
  h->group_devices = group;
  h->group_size = n;
  h->gang_id = gang;
  h->inputs = in ? l->ins : NULL;
  h->input_count = in ? 1 : 0;
  h->outputs = out ? l->outs : NULL;
  h->output_count = out ? 1 : 0;
  h->done = pw_rec_plain;
  h->done_timed = pw_rec_timed;
  h->done_user = &l->rec;
}

static pw_status_t pw_lane_go(pw_backend_t b, pw_lane_t* l) {
  return b.vtable->launch_host(b.self, &l->h);
}

/* One device's launch of mesh index |m|. */
static pw_status_t pw_single(pw_backend_t b, pw_backend_executable_t e, const uint32_t* group,
                             uint32_t n, uint32_t m, uint64_t gang, const pw_backend_memory_t* in,
                             const pw_backend_memory_t* out, uint64_t seq, pw_rec_t* r) {
  pw_rec_reset(r);
  pw_backend_launch_t l;
  memset(&l, 0, sizeof(l));
  l.struct_size = sizeof(l);
  l.executable = e;
  l.device = group[m];
  l.mesh_index = m;
  l.group_devices = group;
  l.group_size = n;
  l.gang_id = gang;
  l.inputs = in ? &in[m] : NULL;
  l.input_count = in ? 1 : 0;
  l.outputs = out ? &out[m] : NULL;
  l.output_count = out ? 1 : 0;
  l.done = pw_rec_plain;
  l.done_timed = pw_rec_timed;
  l.done_user = r;
  l.queue_seq = seq;
  return b.vtable->launch(b.self, &l);
}

static pw_sim_backend_options_t pw_opts(uint32_t slices, uint32_t per_slice, uint32_t per_host,
                                        pw_sim_mode_t mode) {
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.slice_count = slices;
  o.devices_per_slice = per_slice;
  o.devices_per_host = per_host;
  o.mode = mode;
  o.ici_latency_ns = 0; /* an all-reduce costs its time only */
  return o;
}

static pw_backend_t pw_make(uint32_t per_host, pw_sim_mode_t mode, uint32_t depth) {
  pw_sim_backend_options_t o = pw_opts(1, 8, per_host, mode);
  o.queue_depth = depth;
  pw_backend_t b;
  PW_SIM_OK(pw_sim_backend_create(&o, &b));
  cr_assert_geq(b.vtable->struct_size, PW_BACKEND_VTABLE_SIZE_V4);
  cr_assert_not_null(b.vtable->launch_host);
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

static pw_sim_stats_t pw_stats(pw_backend_t b) {
  pw_sim_stats_t s = {.struct_size = sizeof(s)};
  PW_SIM_OK(pw_sim_backend_stats(b, &s));
  return s;
}

/* Memories of 4 floats on devices 0..7: in[d] holds d + 1 (and j/10). */
typedef struct pw_bufs_t {
  pw_backend_memory_t in[8], out[8];
} pw_bufs_t;

static void pw_bufs_init(pw_backend_t b, pw_bufs_t* m) {
  for (uint32_t d = 0; d < 8; ++d) {
    PW_SIM_OK(b.vtable->allocate(b.self, d, 16, &m->in[d]));
    PW_SIM_OK(b.vtable->allocate(b.self, d, 16, &m->out[d]));
    float v[4];
    for (int j = 0; j < 4; ++j) v[j] = (float)(d + 1) + (float)j / 10.0f;
    PW_SIM_OK(b.vtable->copy_to_device(b.self, d, m->in[d], 0, v, sizeof(v)));
  }
}

static void pw_bufs_deinit(pw_backend_t b, pw_bufs_t* m) {
  for (uint32_t d = 0; d < 8; ++d) {
    b.vtable->deallocate(b.self, d, m->in[d]);
    b.vtable->deallocate(b.self, d, m->out[d]);
  }
}

static void pw_read(pw_backend_t b, uint32_t d, pw_backend_memory_t m, float out[4]) {
  PW_SIM_OK(b.vtable->copy_to_host(b.self, d, m, 0, out, 16));
}

static const char* const pw_copy_text =
    "op cp\nkind copy\ntime 10us\ninput f32[32] split(0,all)\noutput f32[32] split(0,all)\n";
static const char* const pw_ar_text =
    "op ar\nkind all_reduce_sum\ntime 5us\ncollective_bytes 0\ninput f32[32] split(0,all)\n"
    "output f32[32] split(0,all)\n";
static const char* const pw_tick_text = "op tick\ntime 7us\n";

static const uint32_t pw_group8[8] = {0, 1, 2, 3, 4, 5, 6, 7};

/*---------------------------------------------------------------------------
 * Hosts
 *-------------------------------------------------------------------------*/

Test(sim_host, devices_per_host_must_divide_devices_per_slice) {
  pw_backend_t b;
  pw_sim_backend_options_t o = pw_opts(2, 8, 3, PW_SIM_MODE_INLINE);
  pw_status_t status = pw_sim_backend_create(&o, &b);
  cr_assert_eq(pw_status_code(status), PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(pw_status_message(status), "devices_per_host 3") != NULL, "%s",
            pw_status_message(status));
  cr_assert(strstr(pw_status_message(status), "devices_per_slice 8") != NULL, "%s",
            pw_status_message(status));
  pw_status_free(status);
  cr_assert_null(b.self, "a refused create zeroes the backend");
  o = pw_opts(2, 8, 16, PW_SIM_MODE_INLINE);
  pw_expect_code(pw_sim_backend_create(&o, &b), PW_STATUS_INVALID_ARGUMENT,
                 "devices_per_host 16");
  /* 1, 2, 4, 8 divide 8. */
  for (uint32_t per_host = 1; per_host <= 8; per_host *= 2) {
    o = pw_opts(2, 8, per_host, PW_SIM_MODE_INLINE);
    PW_SIM_OK(pw_sim_backend_create(&o, &b));
    b.vtable->destroy(b.self);
  }
}

static uint32_t pw_host_of(pw_backend_t b, uint32_t d) {
  pw_backend_device_info_t info = {.struct_size = sizeof(info)};
  PW_SIM_OK(b.vtable->device_info(b.self, d, &info));
  return info.host;
}

Test(sim_host, device_info_reports_ordinal_over_devices_per_host) {
  pw_backend_t b;
  pw_sim_backend_options_t o = pw_opts(2, 8, 4, PW_SIM_MODE_INLINE);
  PW_SIM_OK(pw_sim_backend_create(&o, &b));
  const uint32_t want[16] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};
  for (uint32_t d = 0; d < 16; ++d) cr_assert_eq(pw_host_of(b, d), want[d], "device %u", d);
  b.vtable->destroy(b.self);
  /* 0 (the default) and a v2 options struct: one host per slice. */
  o = pw_opts(2, 8, 0, PW_SIM_MODE_INLINE);
  PW_SIM_OK(pw_sim_backend_create(&o, &b));
  for (uint32_t d = 0; d < 16; ++d) cr_assert_eq(pw_host_of(b, d), d / 8, "device %u", d);
  b.vtable->destroy(b.self);
  o = pw_opts(2, 8, 2, PW_SIM_MODE_INLINE);
  o.struct_size = PW_SIM_BACKEND_OPTIONS_SIZE_V2;
  PW_SIM_OK(pw_sim_backend_create(&o, &b));
  cr_assert_eq(pw_host_of(b, 9), 1, "a v2 caller's devices_per_host is not read");
  b.vtable->destroy(b.self);
}

/*---------------------------------------------------------------------------
 * A lane computes what per-device launches compute
 *-------------------------------------------------------------------------*/

Test(sim_host, a_lane_computes_what_per_device_launches_compute) {
  pw_backend_t lanes = pw_make(4, PW_SIM_MODE_INLINE, 0);
  pw_backend_t singles = pw_make(4, PW_SIM_MODE_INLINE, 0);
  pw_backend_executable_t el = pw_sim_test_load(lanes, pw_copy_text, 8);
  pw_backend_executable_t es = pw_sim_test_load(singles, pw_copy_text, 8);
  pw_backend_executable_t tl = pw_sim_test_load(lanes, pw_tick_text, 1);
  pw_backend_executable_t ts = pw_sim_test_load(singles, pw_tick_text, 1);
  pw_bufs_t ml, ms;
  pw_bufs_init(lanes, &ml);
  pw_bufs_init(singles, &ms);
  /* Device 5 is busy until 7 us first, so the lane's span is uneven. */
  uint32_t five = 5;
  pw_rec_t r1, r2;
  PW_SIM_OK(pw_single(lanes, tl, &five, 1, 0, 1, NULL, NULL, 0, &r1));
  PW_SIM_OK(pw_single(singles, ts, &five, 1, 0, 1, NULL, NULL, 0, &r2));
  /* Host 1's lane (mesh 4..7) and, on the same gang, mesh 0..3 singly. */
  pw_lane_t lane;
  pw_lane(&lane, el, 1, pw_group8, 8, 4, 4, 2, ml.in, ml.out);
  PW_SIM_OK(pw_lane_go(lanes, &lane));
  pw_rec_t rl[4], rs[8];
  for (uint32_t m = 0; m < 4; ++m) {
    PW_SIM_OK(pw_single(lanes, el, pw_group8, 8, m, 2, ml.in, ml.out, 0, &rl[m]));
  }
  for (uint32_t m = 0; m < 8; ++m) {
    PW_SIM_OK(pw_single(singles, es, pw_group8, 8, m, 2, ms.in, ms.out, 0, &rs[m]));
  }
  cr_assert_eq(atomic_load(&lane.rec.calls), 1, "INLINE: done before launch_host returns");
  cr_assert_eq(lane.rec.code, PW_STATUS_OK, "%s", lane.rec.message);
  cr_assert(lane.rec.timed);
  cr_assert_eq(lane.rec.start, 0, "the earliest start (devices 4, 6, 7)");
  cr_assert_eq(lane.rec.end, 17000, "the latest end (device 5: 7 us + 10 us)");
  cr_assert_eq(rs[5].start, 7000);
  cr_assert_eq(rs[5].end, 17000);
  for (uint32_t d = 0; d < 8; ++d) {
    float a[4], want[4];
    pw_read(lanes, d, ml.out[d], a);
    pw_read(singles, d, ms.in[d], want);
    cr_assert(memcmp(a, want, sizeof(a)) == 0, "device %u: the copy's output", d);
    pw_sim_device_state_t sl = {.struct_size = sizeof(sl)}, ss = {.struct_size = sizeof(ss)};
    PW_SIM_OK(pw_sim_backend_device_state(lanes, d, &sl));
    PW_SIM_OK(pw_sim_backend_device_state(singles, d, &ss));
    cr_assert_eq(sl.busy_until, ss.busy_until, "device %u", d);
    cr_assert_eq(sl.busy_ns, ss.busy_ns, "device %u", d);
  }
  pw_sim_stats_t sl = pw_stats(lanes), ss = pw_stats(singles);
  cr_assert_eq(sl.host_launches, 1);
  cr_assert_eq(ss.host_launches, 0);
  cr_assert_eq(sl.events, 9);
  cr_assert_eq(sl.trace_hash, ss.trace_hash, "same events, same hash");
  pw_bufs_deinit(lanes, &ml);
  pw_bufs_deinit(singles, &ms);
  lanes.vtable->unload(lanes.self, el);
  lanes.vtable->unload(lanes.self, tl);
  singles.vtable->unload(singles.self, es);
  singles.vtable->unload(singles.self, ts);
  lanes.vtable->destroy(lanes.self);
  singles.vtable->destroy(singles.self);
}

Test(sim_host, a_v1_style_lane_without_done_timed_gets_done) {
  pw_backend_t b = pw_make(4, PW_SIM_MODE_MANUAL, 0);
  pw_backend_executable_t e = pw_sim_test_load(b, pw_tick_text, 4);
  uint32_t group[4] = {4, 5, 6, 7};
  pw_lane_t lane;
  pw_lane(&lane, e, 1, group, 4, 0, 4, 3, NULL, NULL);
  lane.h.done_timed = NULL;
  PW_SIM_OK(pw_lane_go(b, &lane));
  cr_assert_eq(atomic_load(&lane.rec.calls), 0, "MANUAL: nothing before stepping");
  uint64_t delivered = 0;
  PW_SIM_OK(pw_sim_backend_run_all(b, &delivered));
  cr_assert_eq(delivered, 4, "one event per device");
  cr_assert_eq(atomic_load(&lane.rec.calls), 1);
  cr_assert_eq(lane.rec.code, PW_STATUS_OK);
  cr_assert(!lane.rec.timed, "done, not done_timed");
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
}

/*---------------------------------------------------------------------------
 * Collectives across lanes and single launches
 *-------------------------------------------------------------------------*/

static void pw_expect_sums(pw_backend_t b, const pw_bufs_t* m) {
  for (uint32_t d = 0; d < 8; ++d) {
    float v[4];
    pw_read(b, d, m->out[d], v);
    for (int j = 0; j < 4; ++j) {
      float want = 36.0f + 8.0f * (float)j / 10.0f;
      cr_assert_float_eq(v[j], want, 1e-4, "device %u element %d: %g", d, j, (double)v[j]);
    }
  }
}

static void pw_all_reduce_over_lanes(pw_sim_mode_t mode) {
  pw_backend_t b = pw_make(4, mode, 0);
  pw_backend_executable_t e = pw_sim_test_load(b, pw_ar_text, 8);
  pw_bufs_t m;
  pw_bufs_init(b, &m);
  /* Gang 10: two host launches. */
  pw_lane_t l0, l1;
  pw_lane(&l0, e, 0, pw_group8, 8, 0, 4, 10, m.in, m.out);
  pw_lane(&l1, e, 1, pw_group8, 8, 4, 4, 10, m.in, m.out);
  PW_SIM_OK(pw_lane_go(b, &l0));
  cr_assert_eq(atomic_load(&l0.rec.calls), 0, "waits for the gang");
  PW_SIM_OK(pw_lane_go(b, &l1));
  PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
  cr_assert_eq(atomic_load(&l0.rec.calls), 1);
  cr_assert_eq(atomic_load(&l1.rec.calls), 1);
  cr_assert_eq(l0.rec.code, PW_STATUS_OK, "%s", l0.rec.message);
  cr_assert_eq(l1.rec.code, PW_STATUS_OK, "%s", l1.rec.message);
  cr_assert_eq(l0.rec.end, 5000);
  pw_expect_sums(b, &m);
  /* Gang 11: singles for mesh 0..3 (in a broken order), then host 1. */
  float zero[4] = {0};
  for (uint32_t d = 0; d < 8; ++d) PW_SIM_OK(b.vtable->copy_to_device(b.self, d, m.out[d], 0, zero, 16));
  pw_rec_t r[4];
  const uint32_t order[4] = {2, 0, 3, 1};
  for (int i = 0; i < 4; ++i) {
    PW_SIM_OK(pw_single(b, e, pw_group8, 8, order[i], 11, m.in, m.out, 0, &r[order[i]]));
  }
  pw_lane(&l1, e, 1, pw_group8, 8, 4, 4, 11, m.in, m.out);
  PW_SIM_OK(pw_lane_go(b, &l1));
  PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
  cr_assert_eq(atomic_load(&l1.rec.calls), 1);
  cr_assert_eq(l1.rec.code, PW_STATUS_OK, "%s", l1.rec.message);
  for (int i = 0; i < 4; ++i) {
    cr_assert_eq(atomic_load(&r[i].calls), 1);
    cr_assert_eq(r[i].code, PW_STATUS_OK, "%s", r[i].message);
    cr_assert_eq(r[i].end, 10000, "the second all-reduce ends at 5 + 5 us");
  }
  cr_assert_eq(l1.rec.start, 5000);
  cr_assert_eq(l1.rec.end, 10000);
  pw_expect_sums(b, &m);
  cr_assert_eq(pw_stats(b).host_launches, 3);
  pw_bufs_deinit(b, &m);
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
}

Test(sim_host, all_reduce_over_two_lanes_or_a_lane_and_singles_inline) {
  pw_all_reduce_over_lanes(PW_SIM_MODE_INLINE);
}

Test(sim_host, all_reduce_over_two_lanes_or_a_lane_and_singles_manual) {
  pw_all_reduce_over_lanes(PW_SIM_MODE_MANUAL);
}

/*---------------------------------------------------------------------------
 * Trace hash: lanes and per-device launches agree
 *-------------------------------------------------------------------------*/

/* Three rounds of [copy, all_reduce, tick on devices 4..7] over 8
 * devices with 2 hosts, by lanes or one launch per device. */
static uint64_t pw_workload_hash(pw_sim_mode_t mode, bool by_lanes, uint64_t* out_events) {
  pw_backend_t b = pw_make(4, mode, 0);
  pw_backend_executable_t cp = pw_sim_test_load(b, pw_copy_text, 8);
  pw_backend_executable_t ar = pw_sim_test_load(b, pw_ar_text, 8);
  pw_backend_executable_t tick = pw_sim_test_load(b, pw_tick_text, 4);
  const uint32_t* upper = pw_group8 + 4;
  pw_bufs_t m;
  pw_bufs_init(b, &m);
  pw_lane_t lanes[2];
  pw_rec_t recs[8];
  uint64_t gang = 100;
  for (int round = 0; round < 3; ++round) {
    for (int op = 0; op < 3; ++op, ++gang) {
      pw_backend_executable_t e = op == 0 ? cp : op == 1 ? ar : tick;
      /* The copy writes out from in, the all-reduce in from out. */
      const pw_backend_memory_t* in = op == 0 ? m.in : op == 1 ? m.out : NULL;
      const pw_backend_memory_t* out = op == 0 ? m.out : op == 1 ? m.in : NULL;
      const uint32_t* group = op == 2 ? upper : pw_group8;
      uint32_t n = op == 2 ? 4 : 8;
      for (uint32_t host = op == 2 ? 1 : 0; host < 2; ++host) {
        uint32_t start = op == 2 ? 0 : host * 4;
        if (by_lanes) {
          pw_lane(&lanes[host], e, host, group, n, start, 4, gang, in, out);
          PW_SIM_OK(pw_lane_go(b, &lanes[host]));
        } else {
          for (uint32_t i = 0; i < 4; ++i) {
            PW_SIM_OK(pw_single(b, e, group, n, start + i, gang, in, out, 0, &recs[host * 4 + i]));
          }
        }
      }
      PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
      if (by_lanes) {
        for (uint32_t host = op == 2 ? 1 : 0; host < 2; ++host) {
          cr_assert_eq(atomic_load(&lanes[host].rec.calls), 1);
          cr_assert_eq(lanes[host].rec.code, PW_STATUS_OK, "%s", lanes[host].rec.message);
        }
      }
    }
  }
  pw_sim_stats_t s = pw_stats(b);
  cr_assert_eq(s.host_launches, by_lanes ? 15 : 0);
  cr_assert_eq(s.failed, 0);
  *out_events = s.events;
  pw_bufs_deinit(b, &m);
  b.vtable->unload(b.self, cp);
  b.vtable->unload(b.self, ar);
  b.vtable->unload(b.self, tick);
  b.vtable->destroy(b.self);
  return s.trace_hash;
}

Test(sim_host, trace_hash_of_lanes_equals_per_device_launches) {
  uint64_t events[4];
  uint64_t inline_lanes = pw_workload_hash(PW_SIM_MODE_INLINE, true, &events[0]);
  uint64_t inline_singles = pw_workload_hash(PW_SIM_MODE_INLINE, false, &events[1]);
  uint64_t manual_lanes = pw_workload_hash(PW_SIM_MODE_MANUAL, true, &events[2]);
  uint64_t manual_singles = pw_workload_hash(PW_SIM_MODE_MANUAL, false, &events[3]);
  for (int i = 0; i < 4; ++i) cr_assert_eq(events[i], 3 * (8 + 8 + 4), "run %d", i);
  cr_assert_neq(inline_lanes, 0);
  cr_assert_eq(inline_lanes, inline_singles, "INLINE");
  cr_assert_eq(manual_lanes, manual_singles, "MANUAL");
}

/*---------------------------------------------------------------------------
 * Refusals
 *-------------------------------------------------------------------------*/

typedef void (*pw_breaker_t)(pw_lane_t* lane, pw_backend_memory_t wrong);

static void pw_break_struct_size(pw_lane_t* l, pw_backend_memory_t w) {
  (void)w;
  l->h.struct_size = PW_BACKEND_HOST_LAUNCH_SIZE_V1 - 1;
}
static void pw_break_executable(pw_lane_t* l, pw_backend_memory_t w) {
  (void)w;
  l->h.executable = NULL;
}
static void pw_break_count(pw_lane_t* l, pw_backend_memory_t w) {
  (void)w;
  l->h.device_count = 0;
}
static void pw_break_range(pw_lane_t* l, pw_backend_memory_t w) {
  (void)w;
  l->h.mesh_start = 5; /* 5 + 4 > 8 */
}
static void pw_break_group(pw_lane_t* l, pw_backend_memory_t w) {
  (void)w;
  l->h.group_devices = NULL;
}
static void pw_break_group_size(pw_lane_t* l, pw_backend_memory_t w) {
  (void)w;
  l->h.group_size = 4;
}
static void pw_break_inputs(pw_lane_t* l, pw_backend_memory_t w) {
  (void)w;
  l->h.inputs = NULL;
}
static void pw_break_input_shards(pw_lane_t* l, pw_backend_memory_t w) {
  (void)w;
  l->ins[0] = NULL;
}
static void pw_break_outputs(pw_lane_t* l, pw_backend_memory_t w) {
  (void)w;
  l->h.outputs = NULL;
}
static void pw_break_input_count(pw_lane_t* l, pw_backend_memory_t w) {
  (void)w;
  l->h.input_count = 0;
}
static void pw_break_done(pw_lane_t* l, pw_backend_memory_t w) {
  (void)w;
  l->h.done = NULL;
  l->h.done_timed = NULL;
}
static void pw_break_host(pw_lane_t* l, pw_backend_memory_t w) {
  (void)w;
  l->h.host = 0; /* the lane is host 1's */
}
static void pw_break_no_host(pw_lane_t* l, pw_backend_memory_t w) {
  (void)w;
  l->h.host = 2;
}
static void pw_break_memory(pw_lane_t* l, pw_backend_memory_t w) {
  l->in[2] = w; /* device 0's memory for mesh index 6 (device 6) */
}
static void pw_break_alias(pw_lane_t* l, pw_backend_memory_t w) {
  (void)w;
  l->out[3] = l->in[3];
}

static const struct {
  const char* name;
  pw_breaker_t apply;
  const char* part;  /* in the message */
  bool names_gang;   /* the gang can be told (and aborted) */
} pw_breakers[] = {
    /* Like a launch's, these name no gang of this backend to abort. */
    {"struct_size", pw_break_struct_size, "struct_size", false},
    {"executable", pw_break_executable, "executable", false},
    {"device_count", pw_break_count, "device_count is 0", true},
    {"range", pw_break_range, "mesh_start 5 + device_count 4", true},
    {"group_devices", pw_break_group, "group_devices is NULL", true},
    {"group_size", pw_break_group_size, "group_size 4", true},
    {"inputs", pw_break_inputs, "inputs is NULL", true},
    {"input shards", pw_break_input_shards, "inputs[0]", true},
    {"outputs", pw_break_outputs, "outputs is NULL", true},
    {"input_count", pw_break_input_count, "0 inputs", true},
    {"done", pw_break_done, "done and done_timed", true},
    {"host", pw_break_host, "device 4, which is on host 1", true},
    {"no host", pw_break_no_host, "host 2 does not exist", true},
    {"memory", pw_break_memory, "mesh index 6 (device 6)", true},
    {"alias", pw_break_alias, "output 0 is the same memory as input 0", true},
};

static void pw_refusals_in(pw_sim_mode_t mode, uint32_t depth) {
  pw_backend_t b = pw_make(4, mode, depth);
  pw_backend_executable_t cp = pw_sim_test_load(b, pw_copy_text, 8);
  pw_backend_executable_t ar = pw_sim_test_load(b, pw_ar_text, 8);
  pw_bufs_t m;
  pw_bufs_init(b, &m);
  pw_expect_code(b.vtable->launch_host(b.self, NULL), PW_STATUS_INVALID_ARGUMENT, "NULL");
  uint64_t seq = 0;
  for (size_t k = 0; k < sizeof(pw_breakers) / sizeof(pw_breakers[0]); ++k) {
    for (int c = 0; c < (pw_breakers[k].names_gang ? 2 : 1); ++c) {
      pw_backend_executable_t e = c == 0 ? cp : ar;
      uint64_t gang = 1000 + 2 * k + (uint64_t)c;
      /* A collective's host-0 half arrives first: the refused host-1 lane
       * must end it ABORTED (the gang rule), not leave it waiting. */
      pw_lane_t first;
      pw_lane(&first, e, 0, pw_group8, 8, 0, 4, gang, m.in, m.out);
      if (depth > 0) first.h.queue_seq = ++seq;
      if (c == 1) PW_SIM_OK(pw_lane_go(b, &first));
      pw_lane_t bad;
      pw_lane(&bad, e, 1, pw_group8, 8, 4, 4, gang, m.in, m.out);
      if (depth > 0) bad.h.queue_seq = c == 1 ? seq : ++seq;
      pw_breakers[k].apply(&bad, m.in[0]);
      pw_status_t status = pw_lane_go(b, &bad);
      cr_assert_eq(pw_status_code(status), PW_STATUS_INVALID_ARGUMENT, "%s: %s",
                   pw_breakers[k].name, pw_status_message(status));
      cr_assert(strstr(pw_status_message(status), pw_breakers[k].part) != NULL,
                "%s: '%s' lacks '%s'", pw_breakers[k].name, pw_status_message(status),
                pw_breakers[k].part);
      pw_status_free(status);
      PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
      cr_assert_eq(atomic_load(&bad.rec.calls), 0, "%s: a refused lane never completes",
                   pw_breakers[k].name);
      if (c == 1) {
        cr_assert_eq(atomic_load(&first.rec.calls), 1, "%s", pw_breakers[k].name);
        cr_assert_eq(first.rec.code, PW_STATUS_ABORTED, "%s: %s", pw_breakers[k].name,
                     first.rec.message);
      }
    }
  }
  pw_sim_stats_t s = pw_stats(b);
  uint64_t accepted = sizeof(pw_breakers) / sizeof(pw_breakers[0]) - 2;
  cr_assert_eq(s.host_launches, accepted, "only the collectives' first halves");
  for (uint32_t d = 4; d < 8; ++d) {
    pw_sim_device_state_t st = {.struct_size = sizeof(st)};
    PW_SIM_OK(pw_sim_backend_device_state(b, d, &st));
    cr_assert_eq(st.events, 0, "device %u ran nothing", d);
  }
  /* Still usable: a whole all-reduce over both lanes. */
  pw_lane_t l0, l1;
  pw_lane(&l0, ar, 0, pw_group8, 8, 0, 4, 7, m.in, m.out);
  pw_lane(&l1, ar, 1, pw_group8, 8, 4, 4, 7, m.in, m.out);
  if (depth > 0) l0.h.queue_seq = l1.h.queue_seq = ++seq;
  PW_SIM_OK(pw_lane_go(b, &l0));
  PW_SIM_OK(pw_lane_go(b, &l1));
  PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
  cr_assert_eq(l0.rec.code, PW_STATUS_OK, "%s", l0.rec.message);
  cr_assert_eq(l1.rec.code, PW_STATUS_OK, "%s", l1.rec.message);
  pw_expect_sums(b, &m);
  pw_bufs_deinit(b, &m);
  b.vtable->unload(b.self, cp);
  b.vtable->unload(b.self, ar);
  b.vtable->destroy(b.self);
}

Test(sim_host, every_refusal_is_typed_runs_nothing_and_aborts_the_gang_inline) {
  pw_refusals_in(PW_SIM_MODE_INLINE, 0);
}

Test(sim_host, every_refusal_is_typed_runs_nothing_and_aborts_the_gang_manual) {
  pw_refusals_in(PW_SIM_MODE_MANUAL, 0);
}

Test(sim_host, every_refusal_is_typed_runs_nothing_and_aborts_the_gang_queued) {
  pw_refusals_in(PW_SIM_MODE_MANUAL, 4);
}

/*---------------------------------------------------------------------------
 * Failures
 *-------------------------------------------------------------------------*/

static void pw_chip_failure_in(pw_sim_mode_t mode) {
  pw_backend_t b = pw_make(4, mode, 0);
  pw_backend_executable_t e = pw_sim_test_load(b, pw_tick_text, 4);
  PW_SIM_OK(pw_sim_backend_fail(b, PW_SIM_FAIL_CHIP, 5, 3000));
  uint32_t group[4] = {4, 5, 6, 7};
  pw_lane_t lane;
  pw_lane(&lane, e, 1, group, 4, 0, 4, 9, NULL, NULL);
  PW_SIM_OK(pw_lane_go(b, &lane));
  PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
  cr_assert_eq(atomic_load(&lane.rec.calls), 1, "exactly one done");
  cr_assert_eq(lane.rec.code, PW_STATUS_UNAVAILABLE, "%s", lane.rec.message);
  cr_assert(strstr(lane.rec.message, "device 5 (slice 0 chip 5)") != NULL, "%s",
            lane.rec.message);
  cr_assert_eq(lane.rec.start, 0);
  cr_assert_eq(lane.rec.end, 7000, "the healthy devices end at 7 us");
  pw_sim_stats_t s = pw_stats(b);
  cr_assert_eq(s.failed, 1, "one device's part failed");
  cr_assert_eq(s.events, 4);
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
}

Test(sim_host, a_chip_failure_in_a_lane_gives_one_done_naming_the_chip_inline) {
  pw_chip_failure_in(PW_SIM_MODE_INLINE);
}

Test(sim_host, a_chip_failure_in_a_lane_gives_one_done_naming_the_chip_manual) {
  pw_chip_failure_in(PW_SIM_MODE_MANUAL);
}

/*---------------------------------------------------------------------------
 * Queued devices
 *-------------------------------------------------------------------------*/

Test(sim_host, queued_lanes_take_queue_seq_and_the_depth_per_device) {
  pw_backend_t b = pw_make(4, PW_SIM_MODE_MANUAL, 2);
  pw_backend_executable_t e = pw_sim_test_load(b, pw_tick_text, 4);
  uint32_t group[4] = {4, 5, 6, 7};
  pw_lane_t l[4];
  for (int i = 0; i < 2; ++i) {
    pw_lane(&l[i], e, 1, group, 4, 0, 4, 20 + (uint64_t)i, NULL, NULL);
    l[i].h.queue_seq = 1 + (uint64_t)i;
    PW_SIM_OK(pw_lane_go(b, &l[i]));
  }
  for (uint32_t d = 4; d < 8; ++d) {
    pw_sim_device_state_t st = {.struct_size = sizeof(st)};
    PW_SIM_OK(pw_sim_backend_device_state(b, d, &st));
    cr_assert_eq(st.outstanding, 2, "device %u", d);
  }
  pw_lane(&l[2], e, 1, group, 4, 0, 4, 22, NULL, NULL);
  l[2].h.queue_seq = 3;
  pw_expect_code(pw_lane_go(b, &l[2]), PW_STATUS_RESOURCE_EXHAUSTED, "depth 2");
  pw_lane(&l[3], e, 1, group, 4, 2, 2, 23, NULL, NULL); /* devices 6 and 7 only */
  l[3].h.queue_seq = 2;
  pw_expect_code(pw_lane_go(b, &l[3]), PW_STATUS_INVALID_ARGUMENT, "queue_seq 2");
  PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
  for (int i = 0; i < 2; ++i) {
    cr_assert_eq(atomic_load(&l[i].rec.calls), 1);
    cr_assert_eq(l[i].rec.code, PW_STATUS_OK, "%s", l[i].rec.message);
    cr_assert_eq(l[i].rec.start, (uint64_t)i * 7000, "back to back in queue order");
    cr_assert_eq(l[i].rec.end, (uint64_t)(i + 1) * 7000);
  }
  cr_assert_eq(atomic_load(&l[2].rec.calls) + atomic_load(&l[3].rec.calls), 0);
  /* Room again; a lane of devices 6..7 with a later queue_seq runs. */
  l[3].h.queue_seq = 4;
  PW_SIM_OK(pw_lane_go(b, &l[3]));
  PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
  cr_assert_eq(l[3].rec.code, PW_STATUS_OK, "%s", l[3].rec.message);
  cr_assert_eq(l[3].rec.end, 21000);
  cr_assert_eq(pw_stats(b).host_launches, 3);
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
}

Test(sim_host, a_part_refused_after_validation_refuses_the_lane_and_absorbs_the_rest) {
  /* Device 4 named twice in one gang: validation passes (each part is
   * valid alone), then the second part's queue_seq repeats the first's. */
  pw_backend_t b = pw_make(4, PW_SIM_MODE_MANUAL, 4);
  pw_backend_executable_t e = pw_sim_test_load(b, "op co\nkind collective\ntime 3us\n", 4);
  uint32_t group[4] = {0, 4, 4, 5};
  pw_rec_t first;
  PW_SIM_OK(pw_single(b, e, group, 4, 0, 30, NULL, NULL, 1, &first));
  pw_lane_t lane;
  pw_lane(&lane, e, 1, group, 4, 1, 3, 30, NULL, NULL);
  lane.h.queue_seq = 1;
  pw_expect_code(pw_lane_go(b, &lane), PW_STATUS_INVALID_ARGUMENT,
                 "mesh index 2 (device 4) refused after 1 of the lane's 3 devices");
  PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
  cr_assert_eq(atomic_load(&lane.rec.calls), 0, "a refused lane's done never comes");
  cr_assert_eq(atomic_load(&first.calls), 1);
  cr_assert_eq(first.code, PW_STATUS_ABORTED, "%s", first.message);
  pw_sim_device_state_t st = {.struct_size = sizeof(st)};
  PW_SIM_OK(pw_sim_backend_device_state(b, 4, &st));
  cr_assert_eq(st.outstanding, 0, "the accepted part completed (absorbed)");
  cr_assert_eq(st.events, 1);
  cr_assert_eq(pw_stats(b).host_launches, 0);
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
}

/*---------------------------------------------------------------------------
 * THREADED delivery
 *-------------------------------------------------------------------------*/

#define PW_GANGS 64

typedef struct pw_host_thread_t {
  pw_backend_t b;
  pw_backend_executable_t e;
  const pw_bufs_t* m;
  uint32_t host;
  pw_lane_t* lanes;  /* PW_GANGS */
  int failures;
} pw_host_thread_t;

static void* pw_host_thread(void* user) {
  pw_host_thread_t* t = user;
  for (uint64_t g = 0; g < PW_GANGS; ++g) {
    pw_lane(&t->lanes[g], t->e, t->host, pw_group8, 8, t->host * 4, 4, 500 + g, t->m->in,
            t->m->out);
    pw_status_t status = pw_lane_go(t->b, &t->lanes[g]);
    if (status != NULL) t->failures++;
    pw_status_free(status);
  }
  return NULL;
}

Test(sim_host, threaded_lanes_from_two_threads_complete_exactly_once) {
  pw_backend_t b = pw_make(4, PW_SIM_MODE_THREADED, 0);
  pw_backend_executable_t e = pw_sim_test_load(b, pw_ar_text, 8);
  pw_bufs_t m;
  pw_bufs_init(b, &m);
  static pw_lane_t lanes[2][PW_GANGS];
  pw_host_thread_t t[2];
  pthread_t threads[2];
  for (uint32_t h = 0; h < 2; ++h) {
    t[h] = (pw_host_thread_t){b, e, &m, h, lanes[h], 0};
    cr_assert_eq(pthread_create(&threads[h], NULL, pw_host_thread, &t[h]), 0);
  }
  for (int h = 0; h < 2; ++h) pthread_join(threads[h], NULL);
  cr_assert(pw_sim_backend_wait_idle(b, 10ull * 1000 * 1000 * 1000), "drained");
  for (int h = 0; h < 2; ++h) {
    cr_assert_eq(t[h].failures, 0);
    for (int g = 0; g < PW_GANGS; ++g) {
      cr_assert_eq(atomic_load(&lanes[h][g].rec.calls), 1, "host %d gang %d", h, g);
      cr_assert_eq(lanes[h][g].rec.code, PW_STATUS_OK, "%s", lanes[h][g].rec.message);
    }
  }
  pw_sim_stats_t s = pw_stats(b);
  cr_assert_eq(s.host_launches, 2 * PW_GANGS);
  cr_assert_eq(s.events, 8 * PW_GANGS);
  cr_assert_eq(s.clock, 5000ull * PW_GANGS, "the gangs ran back to back");
  pw_bufs_deinit(b, &m);
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
}

/*---------------------------------------------------------------------------
 * Allocation failures inside launch_host
 *-------------------------------------------------------------------------*/

/* Fails the |k|th allocation of host 1's lane of an all-reduce (MANUAL):
 * returns false once |k| is past the lane's allocations (it ran). */
static bool pw_alloc_failure_at(size_t k) {
  pw_test_allocator_t counter;
  pw_test_allocator_init(&counter);
  pw_sim_backend_options_t o = pw_opts(1, 8, 4, PW_SIM_MODE_MANUAL);
  o.allocator = pw_test_allocator(&counter);
  pw_backend_t b;
  PW_SIM_OK(pw_sim_backend_create(&o, &b));
  pw_backend_executable_t e = pw_sim_test_load(b, pw_ar_text, 8);
  pw_bufs_t m;
  pw_bufs_init(b, &m);
  pw_lane_t l0, l1;
  pw_lane(&l1, e, 1, pw_group8, 8, 4, 4, 40, m.in, m.out);
  pw_lane(&l0, e, 0, pw_group8, 8, 0, 4, 40, m.in, m.out);
  counter.fail_at = atomic_load(&counter.attempts) + k;
  pw_status_t status = pw_lane_go(b, &l1);
  counter.fail_at = 0;
  bool refused = status != NULL;
  if (refused) {
    cr_assert_eq(pw_status_code(status), PW_STATUS_RESOURCE_EXHAUSTED, "k %zu: %s", k,
                 pw_status_message(status));
  }
  pw_status_free(status);
  PW_SIM_OK(pw_lane_go(b, &l0));
  PW_SIM_OK(pw_sim_backend_run_all(b, NULL));
  cr_assert_eq(atomic_load(&l0.rec.calls), 1, "k %zu", k);
  cr_assert_eq(atomic_load(&l1.rec.calls), refused ? 0 : 1, "k %zu", k);
  cr_assert_eq(l0.rec.code, refused ? PW_STATUS_ABORTED : PW_STATUS_OK, "k %zu: %s", k,
               l0.rec.message);
  if (!refused) pw_expect_sums(b, &m);
  pw_bufs_deinit(b, &m);
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
  cr_assert_eq(pw_test_allocator_live(&counter), 0, "k %zu: nothing leaks", k);
  return refused;
}

Test(sim_host, an_allocation_failure_anywhere_in_a_lane_refuses_it_whole) {
  size_t k = 1;
  while (k < 64 && pw_alloc_failure_at(k)) ++k;
  cr_assert_geq(k, 3, "the lane record and at least one part were swept (%zu)", k);
  cr_assert_lt(k, 64, "the lane ran once allocations stopped failing");
}
