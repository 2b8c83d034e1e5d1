/* CTS cases: host launch (pathways/backend.h, "Host launch", vtable v4
 * launch_host). They run on a backend whose vtable has launch_host and are
 * skipped otherwise. Written from the contract: a launch_host call takes
 * any run of devices consecutive in the gang's mesh order that report one
 * host (device_info), refuses anything else with INVALID_ARGUMENT before
 * any of it runs, and completes an accepted run with one done, once, when
 * all its devices finished, as one launch would. The cases find the hosts
 * from device_info over the CTS mesh (pw_cts_mesh) and group mesh
 * positions into lanes: maximal runs of one host. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, strnlen */
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cts_backend.h"

/* A run of mesh positions start .. start + count - 1 on one host. */
typedef struct pw_cts_lane_t {
  uint32_t start;
  uint32_t count;
  uint32_t host;
} pw_cts_lane_t;

/* One launch_host call's descriptor and shard arrays, kept until done. */
typedef struct pw_cts_host_call_t {
  pw_backend_host_launch_t launch;
  const pw_backend_memory_t* inputs[1];
  const pw_backend_memory_t* outputs[1];
} pw_cts_host_call_t;

static bool pw_cts_has_host_launch(const pw_backend_t* b) {
  return b->vtable->struct_size >= PW_BACKEND_VTABLE_SIZE_V4 && b->vtable->launch_host != NULL;
}

static void pw_cts_require_host_launch(const pw_cts_fixture_t* f, pw_backend_t* b) {
  if (!pw_cts_has_host_launch(b)) {
    pw_cts_destroy(b);
    PW_CTS_SKIP("%s: no launch_host in the vtable (v4 host launch unsupported)", f->name);
  }
}

static uint32_t pw_cts_host_of(const pw_backend_t* b, uint32_t device) {
  pw_backend_device_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  PW_CTS_OK(pw_cts_backend_device_info(b, device, &info));
  return info.host;
}

/* Splits the |n| mesh positions over |devices| into maximal lanes. */
static uint32_t pw_cts_lanes(const pw_backend_t* b, const uint32_t* devices, uint32_t n,
                             pw_cts_lane_t* lanes) {
  uint32_t count = 0;
  for (uint32_t m = 0; m < n; ++m) {
    uint32_t host = pw_cts_host_of(b, devices[m]);
    if (count > 0 && lanes[count - 1].host == host) {
      lanes[count - 1].count++;
    } else {
      lanes[count++] = (pw_cts_lane_t){m, 1, host};
    }
  }
  return count;
}

/* Index of the longest lane (the first of them). */
static uint32_t pw_cts_longest_lane(const pw_cts_lane_t* lanes, uint32_t count) {
  uint32_t best = 0;
  for (uint32_t j = 1; j < count; ++j) best = lanes[j].count > lanes[best].count ? j : best;
  return best;
}

/* Fills |call| for |gang|'s positions start .. start + count - 1. */
static void pw_cts_host_describe(pw_cts_host_call_t* call, pw_cts_gang_t* gang,
                                 pw_backend_executable_t e, uint64_t gang_id, uint32_t host,
                                 uint32_t start, uint32_t count, pw_cts_slot_t* slot) {
  memset(call, 0, sizeof(*call));
  call->inputs[0] = &gang->inputs[start];
  call->outputs[0] = &gang->outputs[start];
  pw_backend_host_launch_t* h = &call->launch;
  h->struct_size = sizeof(*h);
  h->executable = e;
  h->host = host;
  h->mesh_start = start;
  h->device_count = count;
  h->group_devices = gang->devices;
  h->group_size = gang->size;
  h->gang_id = gang_id;
  h->inputs = call->inputs;
  h->input_count = 1;
  h->outputs = call->outputs;
  h->output_count = 1;
  h->done = pw_cts_done;
  h->done_user = slot;
}

static void pw_cts_host_launch_ok(const pw_backend_t* b, pw_cts_host_call_t* call,
                                  const char* what) {
  pw_status_t status = b->vtable->launch_host(b->self, &call->launch);
  if (status != NULL) {
    char text[512];
    pw_status_format(status, text, sizeof(text));
    pw_status_free(status);
    PW_CTS_FAIL("%s: launch_host of mesh positions %u..%u (host %u) failed: %s", what,
                   call->launch.mesh_start,
                   call->launch.mesh_start + call->launch.device_count - 1, call->launch.host,
                   text);
  }
}

/* How a gang is cut into calls: every lane whole, each lane of two or more
 * split in two host launches, or each lane's last position as a single
 * launch and the rest (when any) as a host launch. */
typedef enum pw_cts_cut_e {
  PW_CTS_CUT_WHOLE = 0,
  PW_CTS_CUT_SPLIT = 1,
  PW_CTS_CUT_MIXED = 2,
} pw_cts_cut_t;

typedef struct pw_cts_host_plan_t {
  uint32_t start, count, host;
  bool single; /* through launch, not launch_host */
} pw_cts_host_plan_t;

/* Launches |gang| (described by pw_cts_gang_describe, slots from
 * |first_slot|) cut per |cut|, lanes in order or reverse; each call gets
 * the next slot. |calls| has room for 2 per lane. Returns the calls made;
 * |*out_host_calls| counts the launch_host ones. */
static uint32_t pw_cts_host_launch_gang(const pw_backend_t* b, pw_cts_gang_t* gang,
                                        pw_backend_executable_t e, uint64_t gang_id,
                                        const pw_cts_lane_t* lanes, uint32_t lane_count,
                                        pw_cts_cut_t cut, bool reverse,
                                        pw_cts_tracker_t* tracker, size_t first_slot,
                                        pw_cts_host_call_t* calls, uint32_t* out_host_calls) {
  pw_cts_gang_describe(gang, e, gang_id, tracker, first_slot);
  /* Every descriptor first: an inline backend may complete parts early. */
  pw_cts_host_plan_t plan[16];
  uint32_t planned = 0;
  for (uint32_t j = 0; j < lane_count; ++j) {
    pw_cts_lane_t l = lanes[j];
    if (cut == PW_CTS_CUT_SPLIT && l.count >= 2) {
      uint32_t half = l.count / 2;
      plan[planned++] = (pw_cts_host_plan_t){l.start, half, l.host, false};
      plan[planned++] = (pw_cts_host_plan_t){l.start + half, l.count - half, l.host, false};
    } else if (cut == PW_CTS_CUT_MIXED) {
      if (l.count >= 2) plan[planned++] = (pw_cts_host_plan_t){l.start, l.count - 1, l.host, false};
      plan[planned++] = (pw_cts_host_plan_t){l.start + l.count - 1, 1, l.host, true};
    } else {
      plan[planned++] = (pw_cts_host_plan_t){l.start, l.count, l.host, false};
    }
  }
  PW_CTS_ASSERT_LEQ(first_slot + planned, tracker->count);
  uint32_t host_calls = 0;
  for (uint32_t k = 0; k < planned; ++k) {
    pw_cts_slot_t* slot = &tracker->slots[first_slot + k];
    if (plan[k].single) {
      gang->launches[plan[k].start].done_user = slot;
    } else {
      pw_cts_host_describe(&calls[k], gang, e, gang_id, plan[k].host, plan[k].start,
                           plan[k].count, slot);
      host_calls++;
    }
  }
  for (uint32_t i = 0; i < planned; ++i) {
    uint32_t k = reverse ? planned - 1 - i : i;
    if (plan[k].single) {
      PW_CTS_OK(pw_cts_backend_launch(b, &gang->launches[plan[k].start]));
    } else {
      pw_cts_host_launch_ok(b, &calls[k], "host launch gang");
    }
  }
  *out_host_calls = host_calls;
  return planned;
}

/* Waits for |calls| completions from |first| and checks each came once, OK. */
static void pw_cts_host_expect_ok(pw_cts_tracker_t* tracker, size_t first, uint32_t calls,
                                  const char* what) {
  pw_cts_tracker_wait_slots(tracker, first, calls, what);
  for (size_t k = first; k < first + calls; ++k) {
    pw_cts_tracker_expect_calls(tracker, k, 1);
    int code = atomic_load(&tracker->slots[k].code);
    PW_CTS_ASSERT_EQ(code, PW_STATUS_OK, "%s: call %zu completed with %s", what, k - first,
                 pw_status_code_string((pw_status_code_t)code));
  }
}

/* Every position of a copy gang holds its input. */
static void pw_cts_host_check_copy(const pw_backend_t* b, const pw_cts_gang_t* gang,
                                   uint32_t elements, uint32_t seed, const char* what) {
  float out[64];
  PW_CTS_ASSERT_LEQ(elements, 64);
  for (uint32_t m = 0; m < gang->size; ++m) {
    pw_cts_gang_read(b, gang, m, out);
    for (uint32_t i = 0; i < elements; ++i) {
      float want = pw_cts_value(seed, m, i);
      PW_CTS_ASSERT_EQ(out[i], want, "%s: mesh position %u (device %u) element %u is %g, "
                   "expected %g", what, m, gang->devices[m], i, (double)out[i], (double)want);
    }
  }
}

/* host_launch_copy: a copy gang launched per device, then by whole lanes,
 * split lanes and lanes with a single launch, in both orders: the same
 * outputs every time, one done per call. */
void pw_cts_case_host_launch_copy(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  pw_cts_require_host_launch(f, &b);
  uint32_t devices[8], n = 0;
  pw_mesh_shape_t mesh = pw_cts_mesh(&b, devices, &n);
  pw_cts_lane_t lanes[8];
  uint32_t lane_count = pw_cts_lanes(&b, devices, n, lanes);
  const uint32_t elements = 16;
  pw_backend_executable_t e = pw_cts_load(&b, f->copy_program, &mesh, elements, 1, 1);
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, 8 + 6 * 16);
  pw_cts_gang_t gang;
  pw_cts_gang_alloc(&b, &gang, n, devices, elements, 5);
  pw_cts_gang_launch(&b, &gang, e, 100, &tracker, 0, false);
  pw_cts_host_expect_ok(&tracker, 0, n, "per-device copy");
  pw_cts_host_check_copy(&b, &gang, elements, 5, "per-device copy");
  pw_cts_gang_free(&b, &gang);
  size_t slot = 8;
  pw_cts_host_call_t calls[16];
  for (int round = 0; round < 6; ++round) {
    pw_cts_cut_t cut = (pw_cts_cut_t)(round / 2);
    bool reverse = round % 2 == 1;
    char what[96];
    snprintf(what, sizeof(what), "host launch copy (cut %d, %s)", (int)cut,
             reverse ? "reverse" : "in order");
    pw_cts_gang_alloc(&b, &gang, n, devices, elements, 5); /* fresh junk outputs */
    uint32_t host_calls = 0;
    uint32_t made = pw_cts_host_launch_gang(&b, &gang, e, 101 + (uint64_t)round, lanes,
                                            lane_count, cut, reverse, &tracker, slot, calls,
                                            &host_calls);
    PW_CTS_ASSERT_GT(host_calls, 0, "%s: no launch_host call made", what);
    pw_cts_host_expect_ok(&tracker, slot, made, what);
    pw_cts_host_check_copy(&b, &gang, elements, 5, what);
    pw_cts_gang_free(&b, &gang);
    slot += made;
  }
  pw_cts_backend_unload(&b, e);
  pw_cts_destroy(&b);
  /* No late second completion. */
  for (size_t k = 0; k < slot; ++k) {
    if (k >= n && k < 8) continue;
    pw_cts_tracker_expect_calls(&tracker, k, 1);
  }
  pw_cts_tracker_free(&tracker);
}

/* host_launch_done_once: many host launches of every cut, no data looked
 * at: each call's done comes exactly once, also after the backend is
 * destroyed (no late duplicate). */
void pw_cts_case_host_launch_done_once(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  pw_cts_require_host_launch(f, &b);
  uint32_t devices[8], n = 0;
  pw_mesh_shape_t mesh = pw_cts_mesh(&b, devices, &n);
  pw_cts_lane_t lanes[8];
  uint32_t lane_count = pw_cts_lanes(&b, devices, n, lanes);
  pw_backend_executable_t e = pw_cts_load(&b, f->copy_program, &mesh, 4, 1, 1);
  enum { kRounds = 12 };
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, kRounds * 16);
  pw_cts_gang_t gang;
  pw_cts_gang_alloc(&b, &gang, n, devices, 4, 1);
  pw_cts_host_call_t calls[16];
  size_t slot = 0;
  for (uint32_t round = 0; round < kRounds; ++round) {
    uint32_t host_calls = 0;
    uint32_t made = pw_cts_host_launch_gang(&b, &gang, e, 200 + round, lanes, lane_count,
                                            (pw_cts_cut_t)(round % 3), round % 2 == 1,
                                            &tracker, slot, calls, &host_calls);
    pw_cts_host_expect_ok(&tracker, slot, made, "host launch done once");
    slot += made;
  }
  pw_cts_gang_free(&b, &gang);
  pw_cts_backend_unload(&b, e);
  pw_cts_destroy(&b);
  for (size_t k = 0; k < slot; ++k) pw_cts_tracker_expect_calls(&tracker, k, 1);
  pw_cts_tracker_free(&tracker);
}

/* Expects |bad| refused with INVALID_ARGUMENT (its done must never come:
 * checked by the caller). */
static void pw_cts_host_refused(const pw_backend_t* b, const pw_cts_host_call_t* bad,
                                const char* what) {
  pw_status_t status = b->vtable->launch_host(b->self, &bad->launch);
  pw_cts_assert_error(status, (const pw_status_code_t[]){PW_STATUS_INVALID_ARGUMENT}, 1, what);
}

/* The refusals that need two lanes: a run across a host boundary, a run
 * naming another host, and a run of one host's devices that are not
 * consecutive (another host's between them). */
static uint32_t pw_cts_host_refuse_cross(const pw_backend_t* b, pw_cts_gang_t* gang,
                                         pw_backend_executable_t e, const pw_cts_lane_t* lanes,
                                         uint32_t lane_count, pw_cts_slot_t* slot) {
  pw_cts_host_call_t bad;
  uint32_t tried = 0;
  if (lane_count < 2) return 0;
  pw_cts_lane_t a = lanes[0], c = lanes[1];
  pw_cts_host_describe(&bad, gang, e, 301, a.host, a.start + a.count - 1, 2, slot);
  pw_cts_host_refused(b, &bad, "a run over devices of two hosts");
  pw_cts_host_describe(&bad, gang, e, 302, a.host, c.start, c.count, slot);
  pw_cts_host_refused(b, &bad, "a run of host X's devices naming host Y");
  tried += 2;
  for (uint32_t j = 0; j < lane_count; ++j) {
    for (uint32_t k = j + 2; k < lane_count; ++k) {
      if (lanes[k].host != lanes[j].host || tried > 2) continue;
      pw_cts_host_describe(&bad, gang, e, 303, lanes[j].host, lanes[j].start,
                           lanes[k].start + lanes[k].count - lanes[j].start, slot);
      pw_cts_host_refused(b, &bad, "a run of one host's devices that are not consecutive");
      tried++;
    }
  }
  return tried;
}

/* host_launch_refusals: every malformed descriptor is INVALID_ARGUMENT,
 * its done never comes, and the backend keeps working. */
void pw_cts_case_host_launch_refusals(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  pw_cts_require_host_launch(f, &b);
  uint32_t devices[8], n = 0;
  pw_mesh_shape_t mesh = pw_cts_mesh(&b, devices, &n);
  pw_cts_lane_t lanes[8];
  uint32_t lane_count = pw_cts_lanes(&b, devices, n, lanes);
  pw_cts_lane_t lane = lanes[pw_cts_longest_lane(lanes, lane_count)];
  pw_backend_executable_t e = pw_cts_load(&b, f->copy_program, &mesh, 4, 1, 1);
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, 2);
  pw_cts_slot_t* never = &tracker.slots[0];
  pw_cts_gang_t gang;
  pw_cts_gang_alloc(&b, &gang, n, devices, 4, 2);
  pw_cts_host_call_t bad;
#define PW_CTS_BAD(edit, what)                                                          \
  do {                                                                                \
    pw_cts_host_describe(&bad, &gang, e, 300, lane.host, lane.start, lane.count, never); \
    edit;                                                                             \
    pw_cts_host_refused(&b, &bad, what);                                              \
  } while (0)
  PW_CTS_BAD(bad.launch.struct_size = PW_BACKEND_HOST_LAUNCH_SIZE_V1 - 1,
             "struct_size below PW_BACKEND_HOST_LAUNCH_SIZE_V1");
  PW_CTS_BAD(bad.launch.device_count = 0, "device_count 0");
  PW_CTS_BAD(bad.launch.device_count = n - lane.start + 1,
             "mesh_start + device_count > group_size");
  PW_CTS_BAD((bad.launch.mesh_start = n, bad.launch.device_count = 1),
             "mesh_start == group_size");
  PW_CTS_BAD(bad.launch.inputs = NULL, "inputs NULL with input_count 1");
  PW_CTS_BAD(bad.launch.outputs = NULL, "outputs NULL with output_count 1");
#undef PW_CTS_BAD
  pw_cts_host_refuse_cross(&b, &gang, e, lanes, lane_count, never);
  PW_CTS_ASSERT_EQ(atomic_load(&never->calls), 0, "a refused host launch called done");
  /* Still usable: the lane launches. */
  pw_cts_host_call_t good;
  pw_cts_host_describe(&good, &gang, e, 310, lane.host, lane.start, lane.count,
                       &tracker.slots[1]);
  pw_cts_host_launch_ok(&b, &good, "host launch after refusals");
  pw_cts_host_expect_ok(&tracker, 1, 1, "host launch after refusals");
  pw_cts_gang_free(&b, &gang);
  pw_cts_backend_unload(&b, e);
  pw_cts_destroy(&b);
  pw_cts_tracker_expect_calls(&tracker, 0, 0);
  pw_cts_tracker_expect_calls(&tracker, 1, 1);
  pw_cts_tracker_free(&tracker);
}

/* Every position of an all-reduce gang holds the sum over the mesh. */
static void pw_cts_host_check_sum(const pw_backend_t* b, const pw_cts_gang_t* gang,
                                  uint32_t elements, uint32_t seed, const char* what) {
  float out[64];
  for (uint32_t m = 0; m < gang->size; ++m) {
    pw_cts_gang_read(b, gang, m, out);
    for (uint32_t i = 0; i < elements; ++i) {
      float want = 0;
      for (uint32_t k = 0; k < gang->size; ++k) want += pw_cts_value(seed, k, i);
      PW_CTS_ASSERT_EQ(out[i], want, "%s: mesh position %u element %u is %g, expected %g", what,
                   m, i, (double)out[i], (double)want);
    }
  }
}

/* host_launch_collective: an all-reduce gang cut into host launches and
 * single launches (every cut, both orders) rendezvouses and sums. */
void pw_cts_case_host_launch_collective(const pw_cts_fixture_t* f) {
  if (f->all_reduce_program == NULL) {
    PW_CTS_SKIP("%s: no all-reduce program (collectives unsupported)", f->name);
  }
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  pw_cts_require_host_launch(f, &b);
  uint32_t devices[8], n = 0;
  pw_mesh_shape_t mesh = pw_cts_mesh(&b, devices, &n);
  pw_cts_lane_t lanes[8];
  uint32_t lane_count = pw_cts_lanes(&b, devices, n, lanes);
  const uint32_t elements = 16;
  pw_backend_executable_t e = pw_cts_load(&b, f->all_reduce_program, &mesh, elements, 1, 1);
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, 6 * 16);
  pw_cts_host_call_t calls[16];
  size_t slot = 0;
  for (int round = 0; round < 6; ++round) {
    char what[96];
    snprintf(what, sizeof(what), "host launch all-reduce (cut %d, %s)", round / 2,
             round % 2 ? "reverse" : "in order");
    pw_cts_gang_t gang;
    pw_cts_gang_alloc(&b, &gang, n, devices, elements, 7 + (uint32_t)round);
    uint32_t host_calls = 0;
    uint32_t made = pw_cts_host_launch_gang(&b, &gang, e, 400 + (uint64_t)round, lanes,
                                            lane_count, (pw_cts_cut_t)(round / 2),
                                            round % 2 == 1, &tracker, slot, calls,
                                            &host_calls);
    pw_cts_host_expect_ok(&tracker, slot, made, what);
    pw_cts_host_check_sum(&b, &gang, elements, 7 + (uint32_t)round, what);
    pw_cts_gang_free(&b, &gang);
    slot += made;
  }
  pw_cts_backend_unload(&b, e);
  pw_cts_destroy(&b);
  for (size_t k = 0; k < slot; ++k) pw_cts_tracker_expect_calls(&tracker, k, 1);
  pw_cts_tracker_free(&tracker);
}


/* The devices of |lane| of the CTS mesh, as a gang of their own. */
static pw_mesh_shape_t pw_cts_lane_mesh(const uint32_t* devices, pw_cts_lane_t lane,
                                        uint32_t* out_devices) {
  for (uint32_t i = 0; i < lane.count; ++i) out_devices[i] = devices[lane.start + i];
  return pw_mesh_shape_make(1, &lane.count);
}

enum { kQueuedMax = 6 };

/* Calls of the queued chain: launch k whole (k even, or a lane of one) or
 * in two halves; |half| of each call: 0 whole, 1 first, 2 second. */
typedef struct pw_cts_queued_call_t {
  uint32_t k;
  uint32_t half;
} pw_cts_queued_call_t;

/* Checks the dones of the calls covering one half of the lane came in
 * queue_seq (k) order. */
static void pw_cts_queued_check_order(const pw_cts_tracker_t* tracker,
                                      const pw_cts_queued_call_t* calls, size_t count,
                                      uint32_t half) {
  int64_t last = -1;
  for (size_t i = 0; i < count; ++i) {
    const pw_cts_queued_call_t* c = &calls[tracker->order[i]];
    if (c->half != 0 && c->half != half) continue;
    PW_CTS_ASSERT_GT((int64_t)c->k, last, "queued host launch %u (half %u) completed after "
                 "launch %lld: not in queue_seq order", c->k, half, (long long)last);
    last = c->k;
  }
}

/* host_launch_queued: on a queue-ordered backend, a chain of host launches
 * of one lane (launch k copies launch k-1's output), numbered queue_seq
 * 1, 2, ... on every device of the lane, all issued before waiting and
 * some split in two host launches: they run in order (no junk in any
 * buffer) and complete in queue_seq order. */
void pw_cts_case_host_launch_queued(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  pw_cts_require_host_launch(f, &b);
  uint32_t depth = pw_cts_queue_depth(&b);
  if (depth == 0) {
    pw_cts_destroy(&b);
    PW_CTS_SKIP("%s: not queue-ordered (queue_info reports no PW_BACKEND_QUEUE_ORDERED)",
                 f->name);
  }
  uint32_t all[8], n = 0;
  (void)pw_cts_mesh(&b, all, &n);
  pw_cts_lane_t lanes[8];
  uint32_t lane_count = pw_cts_lanes(&b, all, n, lanes);
  pw_cts_lane_t lane = lanes[pw_cts_longest_lane(lanes, lane_count)];
  uint32_t devices[8];
  pw_mesh_shape_t mesh = pw_cts_lane_mesh(all, lane, devices);
  const uint32_t elements = 16;
  uint32_t launches = depth < kQueuedMax ? depth : kQueuedMax;
  pw_backend_executable_t e = pw_cts_load(&b, f->copy_program, &mesh, elements, 1, 1);
  /* bufs[k]: the chain's k-th buffer on every lane device; bufs[0] is the
   * only one with data (pw_cts_gang_alloc's inputs). */
  pw_cts_gang_t bufs[kQueuedMax + 1];
  for (uint32_t k = 0; k <= launches; ++k) {
    pw_cts_gang_alloc(&b, &bufs[k], lane.count, devices, elements, 11);
  }
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, 2 * kQueuedMax);
  pw_cts_queued_call_t calls[2 * kQueuedMax];
  size_t made = 0;
  for (uint32_t k = 0; k < launches; ++k) {
    bool split = k % 2 == 1 && lane.count >= 2;
    uint32_t half = lane.count / 2;
    for (uint32_t part = 0; part < (split ? 2u : 1u); ++part) {
      /* On the stack: a queued backend copies what it needs in the call. */
      const pw_backend_memory_t* in = k == 0 ? &bufs[0].inputs[0] : &bufs[k].outputs[0];
      const pw_backend_memory_t* out = &bufs[k + 1].outputs[0];
      uint32_t start = split && part == 1 ? half : 0;
      uint32_t count = split ? (part == 0 ? half : lane.count - half) : lane.count;
      const pw_backend_memory_t* inputs[1] = {in + start};
      const pw_backend_memory_t* outputs[1] = {out + start};
      pw_backend_host_launch_t h;
      memset(&h, 0, sizeof(h));
      h.struct_size = sizeof(h);
      h.executable = e;
      h.host = lane.host;
      h.mesh_start = start;
      h.device_count = count;
      h.group_devices = devices;
      h.group_size = lane.count;
      h.gang_id = 500 + k;
      h.inputs = inputs;
      h.input_count = 1;
      h.outputs = outputs;
      h.output_count = 1;
      h.queue_seq = k + 1;
      h.done = pw_cts_done;
      h.done_timed = pw_cts_done_timed;
      h.done_user = &tracker.slots[made];
      calls[made] = (pw_cts_queued_call_t){k, split ? part + 1 : 0};
      pw_status_t status = b.vtable->launch_host(b.self, &h);
      memset(&h, 0xEE, sizeof(h)); /* the backend must have copied */
      PW_CTS_OK(status);
      made++;
    }
  }
  /* completed (not calls) is what orders |tracker.order|'s entries. */
  pw_cts_tracker_wait(&tracker, made, "queued host launch chain");
  pw_cts_host_expect_ok(&tracker, 0, (uint32_t)made, "queued host launch chain");
  for (size_t i = 0; i < made; ++i) {
    if (atomic_load(&tracker.slots[i].timed)) {
      PW_CTS_ASSERT_LEQ(tracker.slots[i].start_ns, tracker.slots[i].end_ns,
                    "queued host launch %zu ends before it starts", i);
    }
  }
  pw_cts_queued_check_order(&tracker, calls, made, 1);
  pw_cts_queued_check_order(&tracker, calls, made, 2);
  float out[16];
  for (uint32_t k = 1; k <= launches; ++k) {
    for (uint32_t m = 0; m < lane.count; ++m) {
      PW_CTS_OK(pw_cts_backend_copy_to_host(&b, devices[m], bufs[k].outputs[m], 0, out,
                                         sizeof(out)));
      for (uint32_t i = 0; i < elements; ++i) {
        PW_CTS_ASSERT_EQ(out[i], pw_cts_value(11, m, i),
                     "queued host launch %u: device %u element %u is %g, expected %g", k,
                     devices[m], i, (double)out[i], (double)pw_cts_value(11, m, i));
      }
    }
  }
  for (uint32_t k = 0; k <= launches; ++k) pw_cts_gang_free(&b, &bufs[k]);
  pw_cts_backend_unload(&b, e);
  pw_cts_destroy(&b);
  for (size_t i = 0; i < made; ++i) pw_cts_tracker_expect_calls(&tracker, i, 1);
  pw_cts_tracker_free(&tracker);
}

/* host_launch_failed_device: a host launch over a lane with a FAILED
 * device is refused with UNAVAILABLE (done never comes) or completes once
 * with UNAVAILABLE; a lane of another host still runs. */
void pw_cts_case_host_launch_failed_device(const pw_cts_fixture_t* f) {
  if (f->fail_device == NULL) PW_CTS_SKIP("%s: cannot inject a device failure", f->name);
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  pw_cts_require_host_launch(f, &b);
  uint32_t all[8], n = 0;
  (void)pw_cts_mesh(&b, all, &n);
  pw_cts_lane_t lanes[8];
  uint32_t lane_count = pw_cts_lanes(&b, all, n, lanes);
  uint32_t hit = pw_cts_longest_lane(lanes, lane_count);
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, 2);
  uint32_t devices[8];
  pw_mesh_shape_t mesh = pw_cts_lane_mesh(all, lanes[hit], devices);
  pw_backend_executable_t e = pw_cts_load(&b, f->copy_program, &mesh, 4, 1, 1);
  pw_cts_gang_t gang;
  pw_cts_gang_alloc(&b, &gang, lanes[hit].count, devices, 4, 3);
  uint32_t victim = devices[lanes[hit].count - 1];
  PW_CTS_OK(f->fail_device(&b, victim));
  pw_cts_host_call_t call;
  pw_cts_host_describe(&call, &gang, e, 600, lanes[hit].host, 0, lanes[hit].count,
                       &tracker.slots[0]);
  pw_status_t status = b.vtable->launch_host(b.self, &call.launch);
  bool refused = status != NULL;
  if (refused) {
    pw_cts_assert_error(status, (const pw_status_code_t[]){PW_STATUS_UNAVAILABLE}, 1,
                        "host launch over a failed device");
  } else {
    pw_cts_tracker_wait_slots(&tracker, 0, 1, "host launch over a failed device");
    int code = atomic_load(&tracker.slots[0].code);
    PW_CTS_ASSERT_EQ(code, PW_STATUS_UNAVAILABLE,
                 "host launch over failed device %u completed with %s", victim,
                 pw_status_code_string((pw_status_code_t)code));
  }
  pw_cts_gang_free(&b, &gang);
  pw_cts_backend_unload(&b, e);
  /* Another host's lane is unaffected. */
  uint32_t other = lane_count;
  for (uint32_t j = 0; j < lane_count && other == lane_count; ++j) {
    if (lanes[j].host != lanes[hit].host) other = j;
  }
  if (other < lane_count) {
    mesh = pw_cts_lane_mesh(all, lanes[other], devices);
    e = pw_cts_load(&b, f->copy_program, &mesh, 4, 1, 1);
    pw_cts_gang_alloc(&b, &gang, lanes[other].count, devices, 4, 4);
    pw_cts_host_describe(&call, &gang, e, 601, lanes[other].host, 0, lanes[other].count,
                         &tracker.slots[1]);
    pw_cts_host_launch_ok(&b, &call, "host launch on a healthy host");
    pw_cts_host_expect_ok(&tracker, 1, 1, "host launch on a healthy host");
    pw_cts_gang_free(&b, &gang);
    pw_cts_backend_unload(&b, e);
  }
  pw_cts_destroy(&b);
  pw_cts_tracker_expect_calls(&tracker, 0, refused ? 0 : 1);
  if (other < lane_count) pw_cts_tracker_expect_calls(&tracker, 1, 1);
  pw_cts_tracker_free(&tracker);
}
