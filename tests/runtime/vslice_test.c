/* The resource manager's choice of physical slice by health (healthy
 * before degraded, failed never), for pw_vslice_create and for spanning
 * virtual slices it picks, and its refusal messages, which mention
 * exclusivity only when it was requested. Test-double backend: the test
 * sets each device's health. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(vslice, .fini = pw_test_check_leaks);

enum { kPerSlice = 8 }; /* "2x4": slice s holds devices 8s .. 8s + 7 */

static uint32_t bound_slice(pw_client_t* c, pw_vslice_t v) {
  uint32_t s = 99;
  OK(pw_vslice_binding(c, v, &s, NULL));
  return s;
}

Test(vslice, healthy_slice_is_bound_before_a_degraded_one) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 4, "2x4", pw_allocator_system()));
  /* Slices 0 and 1 degraded, 2 healthy, 3 failed. */
  pw_double_backend_set_health(f.dbl, 0 * kPerSlice + 3, PW_DEVICE_DEGRADED);
  pw_double_backend_set_health(f.dbl, 1 * kPerSlice + 0, PW_DEVICE_DEGRADED);
  pw_double_backend_set_health(f.dbl, 3 * kPerSlice + 5, PW_DEVICE_FAILED);
  pw_mesh_shape_t mesh;
  OK(pw_mesh_shape_parse("2x4", &mesh));
  pw_vslice_t a[3];
  OK(pw_vslice_create(f.client, &mesh, 0, &a[0]));
  cr_assert_eq(bound_slice(f.client, a[0]), 2, "bound to a degraded slice while 2 is healthy");
  /* Another client: the healthy slice, although it is shared now and the
   * degraded ones are not. */
  pw_client_t* other;
  OK(pw_client_create(f.runtime, NULL, &other));
  pw_vslice_t b, c;
  OK(pw_vslice_create(other, &mesh, 0, &b));
  cr_assert_eq(bound_slice(other, b), 2);
  /* Exclusive: no healthy slice is free, so a degraded one (lowest index
   * first). */
  pw_client_t* third;
  OK(pw_client_create(f.runtime, NULL, &third));
  OK(pw_vslice_create(third, &mesh, PW_VSLICE_EXCLUSIVE, &c));
  cr_assert_eq(bound_slice(third, c), 0);
  /* The first client has the healthy slice: then the degraded ones, least
   * shared first (slice 0 now has one binding, slice 1 none); never the
   * failed one. */
  OK(pw_vslice_create(f.client, &mesh, 0, &a[1]));
  cr_assert_eq(bound_slice(f.client, a[1]), 1);
  OK(pw_vslice_create(f.client, &mesh, 0, &a[2]));
  cr_assert_eq(bound_slice(f.client, a[2]), 0);
  pw_vslice_t d;
  FAILS(pw_vslice_create(f.client, &mesh, 0, &d), PW_STATUS_RESOURCE_EXHAUSTED,
        "of those 3 already bound to this client, 1 unhealthy");
  /* A degraded slice that recovers is preferred again. */
  pw_double_backend_set_health(f.dbl, 1 * kPerSlice + 0, PW_DEVICE_HEALTHY);
  pw_client_t* fourth;
  OK(pw_client_create(f.runtime, NULL, &fourth));
  pw_vslice_t e;
  OK(pw_vslice_create(fourth, &mesh, 0, &e));
  cr_assert_eq(bound_slice(fourth, e), 1);
  pw_client_destroy(fourth);
  pw_client_destroy(third);
  pw_client_destroy(other);
  pw_fixture_deinit(&f);
}

Test(vslice, spanning_pick_takes_healthy_slices_before_degraded_ones) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 4, "2x4", pw_allocator_system()));
  pw_double_backend_set_health(f.dbl, 0 * kPerSlice + 1, PW_DEVICE_DEGRADED);
  pw_double_backend_set_health(f.dbl, 2 * kPerSlice + 7, PW_DEVICE_DEGRADED);
  pw_vslice_span_t req;
  memset(&req, 0, sizeof(req));
  req.struct_size = sizeof(req);
  OK(pw_mesh_shape_parse("2x8", &req.mesh));
  req.slice_count = 2;
  pw_vslice_t wide;
  OK(pw_vslice_create_spanning(f.client, &req, &wide));
  uint32_t got[2] = {99, 99}, count = 0;
  OK(pw_vslice_slices(f.client, wide, got, 2, &count));
  cr_assert_eq(count, 2);
  cr_assert(got[0] == 1 && got[1] == 3, "spanning slices %u and %u, healthy ones are 1 and 3",
            got[0], got[1]);
  /* Three slices: both healthy ones and then the least shared degraded
   * one (slice 0: the lowest index among equals). */
  req.slice_count = 3;
  OK(pw_mesh_shape_parse("3x8", &req.mesh));
  pw_vslice_t wider;
  OK(pw_vslice_create_spanning(f.client, &req, &wider));
  uint32_t got3[3] = {99, 99, 99};
  OK(pw_vslice_slices(f.client, wider, got3, 3, &count));
  cr_assert_eq(count, 3);
  cr_assert(got3[0] == 0 && got3[1] == 1 && got3[2] == 3, "spanning %u, %u, %u", got3[0],
            got3[1], got3[2]);
  pw_fixture_deinit(&f);
}

static void expect_refusal(pw_status_t s, const char* text, bool exclusive) {
  cr_assert_eq(pw_status_code(s), PW_STATUS_RESOURCE_EXHAUSTED, "%s", pw_status_message(s));
  cr_assert(strstr(pw_status_message(s), text) != NULL, "message \"%s\" lacks \"%s\"",
            pw_status_message(s), text);
  cr_assert_eq(strstr(pw_status_message(s), "exclusive") != NULL, exclusive,
               "message \"%s\" %s exclusivity", pw_status_message(s),
               exclusive ? "does not mention" : "mentions");
  pw_status_free(s);
}

Test(vslice, refusal_mentions_exclusive_only_when_it_was_requested) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 2, "2x4", pw_allocator_system()));
  pw_double_backend_set_health(f.dbl, 1 * kPerSlice + 2, PW_DEVICE_FAILED);
  pw_mesh_shape_t mesh;
  OK(pw_mesh_shape_parse("2x4", &mesh));
  pw_vslice_t a, b;
  OK(pw_vslice_create(f.client, &mesh, 0, &a));
  pw_status_t s = pw_vslice_create(f.client, &mesh, 0, &b);
  cr_assert_str_eq(pw_status_message(s),
                   "no free physical slice fits mesh 2x4 for client 'client1': 2 of 2 slices "
                   "have 8 devices; of those 1 already bound to this client, 1 unhealthy");
  expect_refusal(s, "1 unhealthy", false);
  pw_client_t* other;
  OK(pw_client_create(f.runtime, NULL, &other));
  expect_refusal(pw_vslice_create(other, &mesh, PW_VSLICE_EXCLUSIVE, &b),
                 "0 already bound to this client, 1 unhealthy, 1 shared with other clients "
                 "(exclusive requested)",
                 true);
  /* Spanning, picked by the resource manager: two slices wanted, one
   * usable. */
  pw_vslice_span_t req;
  memset(&req, 0, sizeof(req));
  req.struct_size = sizeof(req);
  OK(pw_mesh_shape_parse("2x8", &req.mesh));
  req.slice_count = 2;
  expect_refusal(pw_vslice_create_spanning(other, &req, &b),
                 "of those 1 unhealthy; at most 1 usable on one backend", false);
  req.flags = PW_VSLICE_EXCLUSIVE;
  expect_refusal(pw_vslice_create_spanning(other, &req, &b),
                 "of those 1 unhealthy, 1 shared with other virtual slices (exclusive "
                 "requested); at most 0 usable on one backend",
                 true);
  pw_client_destroy(other);
  pw_fixture_deinit(&f);
}
