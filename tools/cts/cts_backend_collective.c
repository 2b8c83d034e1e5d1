/* CTS cases: collectives across every device of a mesh, and device failure
 * (health, launches on a failed device, collectives that lose a member). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, strnlen */
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "cts_backend.h"

/* Checks every device of an all-reduce gang holds the sum over the mesh. */
static void pw_cts_check_all_reduce(const pw_backend_t* b, const pw_cts_gang_t* gang,
                                    uint32_t elements, uint32_t seed) {
  float out[64];
  PW_CTS_ASSERT_LEQ(elements, 64);
  for (uint32_t m = 0; m < gang->size; ++m) {
    pw_cts_gang_read(b, gang, m, out);
    for (uint32_t i = 0; i < elements; ++i) {
      float want = 0;
      for (uint32_t k = 0; k < gang->size; ++k) want += pw_cts_value(seed, k, i);
      PW_CTS_ASSERT_EQ(out[i], want,
                   "all-reduce: mesh position %u (device %u) element %u is %g, expected %g",
                   m, gang->devices[m], i, (double)out[i], (double)want);
    }
  }
}

static void pw_cts_require_collectives(const pw_cts_fixture_t* f) {
  if (f->all_reduce_program == NULL) {
    PW_CTS_SKIP("%s: no all-reduce program (collectives unsupported)", f->name);
  }
}

/* One all-reduce gang on |mesh|, launched in order or in reverse. */
static void pw_cts_all_reduce_once(const pw_cts_fixture_t* f, const pw_backend_t* b,
                                   pw_mesh_shape_t mesh, const uint32_t* devices, bool reverse,
                                   uint64_t gang_id) {
  pw_cts_run_gang(b, f->all_reduce_program, mesh, devices, reverse, gang_id,
                  "all-reduce gang", pw_cts_check_all_reduce);
}

void pw_cts_case_collective_all_reduce(const pw_cts_fixture_t* f) {
  pw_cts_require_collectives(f);
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t devices[8];
  uint32_t n = 0;
  pw_mesh_shape_t mesh = pw_cts_mesh(&b, devices, &n);
  pw_cts_all_reduce_once(f, &b, mesh, devices, false, 1);
  pw_cts_all_reduce_once(f, &b, mesh, devices, true, 2);
  if (n >= 4 && n % 2 == 0) {
    uint32_t dims[2] = {2, n / 2};
    pw_cts_all_reduce_once(f, &b, pw_mesh_shape_make(2, dims), devices, true, 3);
  }
  uint32_t one = 1;
  pw_cts_all_reduce_once(f, &b, pw_mesh_shape_make(1, &one), devices, false, 4);
  pw_cts_destroy(&b);
}

enum { kManyGangs = 16 };

void pw_cts_case_collective_many_gangs(const pw_cts_fixture_t* f) {
  pw_cts_require_collectives(f);
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t devices[8];
  uint32_t n = 0;
  pw_mesh_shape_t mesh = pw_cts_mesh(&b, devices, &n);
  const uint32_t elements = 8;
  pw_backend_executable_t e = pw_cts_load(&b, f->all_reduce_program, &mesh, elements, 1, 1);
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, (size_t)kManyGangs * n);
  pw_cts_gang_t* gangs = calloc(kManyGangs, sizeof(*gangs));
  PW_CTS_ASSERT_NOT_NULL(gangs);
  for (uint32_t g = 0; g < kManyGangs; ++g) {
    pw_cts_gang_alloc(&b, &gangs[g], n, devices, elements, 50 + g);
  }
  /* All gangs in flight at once, every device seeing them in the same
   * order (the gang order the runtime guarantees), without waiting; a
   * queue-ordered backend holds at most |depth| of them per device. */
  uint32_t depth = pw_cts_queue_depth(&b);
  for (uint32_t g = 0; g < kManyGangs; ++g) {
    if (depth > 0 && g >= depth) {
      pw_cts_tracker_wait_slots(&tracker, (size_t)(g - depth) * n, n,
                                "all-reduce gangs within the queue depth");
    }
    pw_cts_gang_launch(&b, &gangs[g], e, 700 + g, &tracker, (size_t)g * n, g % 2 == 1);
  }
  pw_cts_tracker_wait(&tracker, (size_t)kManyGangs * n, "back-to-back all-reduce gangs");
  for (uint32_t g = 0; g < kManyGangs; ++g) {
    for (uint32_t m = 0; m < n; ++m) {
      PW_CTS_ASSERT_EQ(atomic_load(&tracker.slots[g * n + m].code), PW_STATUS_OK,
                   "gang %u part %u failed", g, m);
    }
    pw_cts_check_all_reduce(&b, &gangs[g], elements, 50 + g);
    pw_cts_gang_free(&b, &gangs[g]);
  }
  pw_cts_backend_unload(&b, e);
  pw_cts_destroy(&b);
  for (size_t i = 0; i < tracker.count; ++i) pw_cts_tracker_expect_calls(&tracker, i, 1);
  pw_cts_tracker_free(&tracker);
  free(gangs);
}

static void pw_cts_require_failures(const pw_cts_fixture_t* f) {
  if (f->fail_device == NULL) {
    PW_CTS_SKIP("%s: cannot inject a device failure", f->name);
  }
}

void pw_cts_case_failed_device(const pw_cts_fixture_t* f) {
  pw_cts_require_failures(f);
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t count = pw_cts_backend_device_count(&b);
  uint32_t victim = count - 1;
  uint32_t one = 1;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &one);
  pw_backend_executable_t e = pw_cts_load(&b, f->copy_program, &mesh, 4, 1, 1);
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, 2);
  pw_cts_gang_t lost;
  pw_cts_gang_alloc(&b, &lost, 1, &victim, 4, 9);
  PW_CTS_OK(f->fail_device(&b, victim));
  PW_CTS_ASSERT_EQ(pw_cts_backend_health(&b, victim), PW_DEVICE_FAILED);
  for (uint32_t d = 0; d < victim; ++d) {
    PW_CTS_ASSERT_EQ(pw_cts_backend_health(&b, d), PW_DEVICE_HEALTHY, "device %u", d);
  }
  /* A launch on the failed device fails with UNAVAILABLE: from launch
   * (then done never runs) or through done. */
  pw_cts_gang_describe(&lost, e, 900, &tracker, 0);
  pw_status_t status = pw_cts_backend_launch(&b, &lost.launches[0]);
  bool from_launch = status != NULL;
  if (from_launch) {
    pw_cts_assert_error(status, (const pw_status_code_t[]){PW_STATUS_UNAVAILABLE}, 1,
                        "launch on a failed device");
  } else {
    pw_cts_tracker_wait(&tracker, 1, "launch on a failed device");
    int code = atomic_load(&tracker.slots[0].code);
    PW_CTS_ASSERT_EQ(code, PW_STATUS_UNAVAILABLE, "launch on a failed device completed with %s",
                 pw_status_code_string((pw_status_code_t)code));
  }
  pw_cts_gang_free(&b, &lost);
  /* Healthy devices keep working. */
  if (count >= 2) {
    uint32_t d = 0;
    pw_cts_gang_t gang;
    pw_cts_gang_alloc(&b, &gang, 1, &d, 4, 3);
    pw_cts_gang_launch(&b, &gang, e, 1, &tracker, 1, false);
    pw_cts_tracker_wait(&tracker, from_launch ? 1 : 2, "launch on a healthy device");
    PW_CTS_ASSERT_EQ(atomic_load(&tracker.slots[1].code), PW_STATUS_OK);
    pw_cts_gang_free(&b, &gang);
  }
  pw_cts_backend_unload(&b, e);
  pw_cts_destroy(&b);
  pw_cts_tracker_expect_calls(&tracker, 0, from_launch ? 0 : 1);
  if (count >= 2) pw_cts_tracker_expect_calls(&tracker, 1, 1);
  pw_cts_tracker_free(&tracker);
}

void pw_cts_case_failed_device_collective(const pw_cts_fixture_t* f) {
  pw_cts_require_collectives(f);
  pw_cts_require_failures(f);
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t devices[8];
  uint32_t n = 0;
  pw_mesh_shape_t mesh = pw_cts_mesh(&b, devices, &n);
  if (n < 2) {
    pw_cts_destroy(&b);
    PW_CTS_SKIP("%s: one device, no collective to break", f->name);
  }
  pw_backend_executable_t e = pw_cts_load(&b, f->all_reduce_program, &mesh, 8, 1, 1);
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, n);
  pw_cts_gang_t gang;
  pw_cts_gang_alloc(&b, &gang, n, devices, 8, 1);
  /* Every part but the last device's: the others wait for it... */
  pw_cts_gang_describe(&gang, e, 77, &tracker, 0);
  for (uint32_t m = 0; m + 1 < n; ++m) PW_CTS_OK(pw_cts_backend_launch(&b, &gang.launches[m]));
  /* ...until it fails: they must complete with an error, not hang. */
  uint32_t victim = devices[n - 1];
  PW_CTS_OK(f->fail_device(&b, victim));
  pw_cts_tracker_wait(&tracker, n - 1, "collective parts after a member failed");
  for (uint32_t m = 0; m + 1 < n; ++m) {
    int code = atomic_load(&tracker.slots[m].code);
    PW_CTS_ASSERT(code == PW_STATUS_UNAVAILABLE || code == PW_STATUS_ABORTED ||
                  code == PW_STATUS_CANCELLED,
              "part %u completed with %s; expected UNAVAILABLE/ABORTED/CANCELLED", m,
              pw_status_code_string((pw_status_code_t)code));
  }
  pw_cts_gang_free(&b, &gang);
  pw_cts_backend_unload(&b, e);
  pw_cts_destroy(&b);
  for (uint32_t m = 0; m + 1 < n; ++m) pw_cts_tracker_expect_calls(&tracker, m, 1);
  pw_cts_tracker_free(&tracker);
}

void pw_cts_case_collective_refused_part(const pw_cts_fixture_t* f) {
  pw_cts_require_collectives(f);
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t devices[8];
  uint32_t n = 0;
  pw_mesh_shape_t mesh = pw_cts_mesh(&b, devices, &n);
  if (n < 2) {
    pw_cts_destroy(&b);
    PW_CTS_SKIP("%s: one device, no collective to break", f->name);
  }
  pw_backend_executable_t e = pw_cts_load(&b, f->all_reduce_program, &mesh, 8, 1, 1);
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, n);
  pw_cts_gang_t gang;
  pw_cts_gang_alloc(&b, &gang, n, devices, 8, 1);
  /* The last part's launch is refused (its output is too small): the
   * parts already launched can never meet it, and there is no cancel
   * method, so the backend itself must fail them rather than wait. */
  pw_backend_memory_t small = NULL;
  PW_CTS_OK(pw_cts_backend_allocate(&b, devices[n - 1], 4, &small));
  pw_cts_gang_describe(&gang, e, 88, &tracker, 0);
  gang.launches[n - 1].outputs = &small;
  for (uint32_t m = 0; m + 1 < n; ++m) PW_CTS_OK(pw_cts_backend_launch(&b, &gang.launches[m]));
  PW_CTS_ERROR(pw_cts_backend_launch(&b, &gang.launches[n - 1]), PW_STATUS_INVALID_ARGUMENT,
               PW_STATUS_OUT_OF_RANGE);
  pw_cts_tracker_wait(&tracker, n - 1, "collective parts after a part was refused");
  for (uint32_t m = 0; m + 1 < n; ++m) {
    int code = atomic_load(&tracker.slots[m].code);
    PW_CTS_ASSERT(code != PW_STATUS_OK, "part %u completed OK without its peer", m);
  }
  pw_cts_backend_deallocate(&b, devices[n - 1], small);
  pw_cts_gang_free(&b, &gang);
  pw_cts_backend_unload(&b, e);
  pw_cts_destroy(&b);
  for (uint32_t m = 0; m < n; ++m) pw_cts_tracker_expect_calls(&tracker, m, m + 1 < n ? 1 : 0);
  pw_cts_tracker_free(&tracker);
}
