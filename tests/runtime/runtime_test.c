/* Runtime, topology, clients and virtual slices; and the failing-allocator
 * sweep over the whole create -> build -> submit -> destroy path. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(runtime, .fini = pw_test_check_leaks);

static pw_backend_t make_double(pw_test_allocator_t* t, uint32_t devices,
                                pw_double_vtable_variant_t variant) {
  pw_double_options_t o;
  pw_double_options_init(&o);
  o.device_count = devices;
  o.allocator = pw_test_allocator(t);
  pw_backend_t b;
  OK(pw_double_backend_create_variant(&o, variant, &b));
  return b;
}

static pw_runtime_options_t options_for(pw_backend_t* backends, uint32_t nb,
                                        pw_slice_desc_t* slices, uint32_t ns) {
  pw_runtime_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.backends = backends;
  o.backend_count = nb;
  o.slices = slices;
  o.slice_count = ns;
  return o;
}

Test(runtime, bad_topologies_are_rejected_and_backends_still_freed) {
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_mesh_shape_t m24;
  OK(pw_mesh_shape_parse("2x4", &m24));
  struct {
    pw_slice_desc_t slices[2];
    uint32_t count;
    pw_double_vtable_variant_t variant;
    pw_status_code_t code;
    const char* needle;
  } cases[] = {
      {{{"a", m24, 0, 0, 0}, {"b", m24, 0, 4, 0}}, 2, PW_DOUBLE_VTABLE_NORMAL,
       PW_STATUS_INVALID_ARGUMENT, "slices[0] and slices[1] share devices"},
      {{{"a", m24, 0, 12, 0}}, 1, PW_DOUBLE_VTABLE_NORMAL, PW_STATUS_INVALID_ARGUMENT,
       "devices 12..19 exceed backend 'double', which has 16 devices"},
      {{{"a", m24, 3, 0, 0}}, 1, PW_DOUBLE_VTABLE_NORMAL, PW_STATUS_INVALID_ARGUMENT,
       "backend index 3 out of range"},
      {{{"a", PW_MESH_SHAPE_INIT(0, 0), 0, 0, 0}}, 1, PW_DOUBLE_VTABLE_NORMAL, PW_STATUS_INVALID_ARGUMENT,
       "slices[0]: mesh rank 0"},
      {{{"a", m24, 0, 0, 0}}, 1, PW_DOUBLE_VTABLE_SHORT, PW_STATUS_INVALID_ARGUMENT,
       "backends[0]: backend 'double-short': vtable struct_size"},
      {{{"a", m24, 0, 0, 0}}, 1, PW_DOUBLE_VTABLE_NO_NAME, PW_STATUS_INVALID_ARGUMENT,
       "backends[0]: backend vtable has no name"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    pw_backend_t b = make_double(&t, 16, cases[i].variant);
    pw_runtime_options_t o = options_for(&b, 1, cases[i].slices, cases[i].count);
    pw_runtime_t* rt = (pw_runtime_t*)1;
    FAILS(pw_runtime_create(&o, &rt), cases[i].code, cases[i].needle);
    cr_assert_null(rt);
    cr_assert_eq(pw_test_allocator_live(&t), 0, "case %zu leaked the backend", i);
  }
  pw_backend_t b = make_double(&t, 16, PW_DOUBLE_VTABLE_NORMAL);
  pw_runtime_options_t o = options_for(&b, 1, cases[0].slices, 1);
  o.struct_size = 8;
  pw_runtime_t* rt;
  FAILS(pw_runtime_create(&o, &rt), PW_STATUS_INVALID_ARGUMENT, "struct_size 8");
  cr_assert_eq(pw_test_allocator_live(&t), 0);
  FAILS(pw_runtime_create(NULL, &rt), PW_STATUS_INVALID_ARGUMENT, "NULL");
}

Test(runtime, topology_queries) {
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_backend_t b = make_double(&t, 16, PW_DOUBLE_VTABLE_FUTURE);
  pw_mesh_shape_t m24;
  OK(pw_mesh_shape_parse("2x4", &m24));
  pw_slice_desc_t slices[2] = {{"north", m24, 0, 0, 3}, {NULL, m24, 0, 8, 4}};
  pw_runtime_options_t o = options_for(&b, 1, slices, 2);
  pw_runtime_t* rt;
  OK(pw_runtime_create(&o, &rt));
  cr_assert_eq(pw_runtime_slice_count(rt), 2);
  pw_slice_info_t info = {.struct_size = sizeof(pw_slice_info_t)};
  OK(pw_runtime_slice_info(rt, 0, &info));
  cr_assert_str_eq(info.name, "north");
  cr_assert_str_eq(info.backend, "double-future"); /* a v2-sized vtable is accepted */
  cr_assert_eq(info.device_count, 8);
  cr_assert_eq(info.host, 3);
  cr_assert_eq(info.health, PW_DEVICE_HEALTHY);
  OK(pw_runtime_slice_info(rt, 1, &info));
  cr_assert_str_eq(info.name, "slice1");
  FAILS(pw_runtime_slice_info(rt, 2, &info), PW_STATUS_OUT_OF_RANGE, "slice 2 does not exist");
  pw_device_info_t dev = {.struct_size = sizeof(pw_device_info_t)};
  OK(pw_runtime_device_info(rt, 1, 5, &dev));
  cr_assert_eq(dev.backend_device, 13);
  cr_assert_eq(dev.host, 4);
  FAILS(pw_runtime_device_info(rt, 1, 8, &dev), PW_STATUS_OUT_OF_RANGE, "device 8");
  pw_double_backend_set_health(pw_double_backend_from(&b), 13, PW_DEVICE_FAILED);
  OK(pw_runtime_slice_info(rt, 1, &info));
  cr_assert_eq(info.health, PW_DEVICE_FAILED);
  OK(pw_runtime_device_info(rt, 1, 5, &dev));
  cr_assert_eq(dev.health, PW_DEVICE_FAILED);
  /* The resource manager does not bind to a slice with a failed device. */
  pw_client_t* c;
  OK(pw_client_create(rt, NULL, &c));
  pw_vslice_t v1, v2;
  OK(pw_vslice_create(c, &m24, 0, &v1));
  uint32_t bound;
  OK(pw_vslice_binding(c, v1, &bound, NULL));
  cr_assert_eq(bound, 0);
  FAILS(pw_vslice_create(c, &m24, 0, &v2), PW_STATUS_RESOURCE_EXHAUSTED, "1 unhealthy");
  pw_client_destroy(c);
  pw_runtime_destroy(rt);
  cr_assert_eq(pw_test_allocator_live(&t), 0);
}

Test(runtime, resource_manager_binds_fitting_free_slices) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 3, "2x4", pw_allocator_system()));
  pw_vslice_t a, b, c, d;
  OK(pw_fixture_vslice(&f, "2x4", &a));
  OK(pw_fixture_vslice(&f, "4x2", &b)); /* same device count: fits */
  OK(pw_fixture_vslice(&f, "8", &c));
  FAILS(pw_fixture_vslice(&f, "2x4", &d), PW_STATUS_RESOURCE_EXHAUSTED,
        "no free physical slice fits mesh 2x4 for client 'client1': 3 of 3 slices have 8 "
        "devices; of those 3 already bound to this client");
  FAILS(pw_fixture_vslice(&f, "2x2", &d), PW_STATUS_RESOURCE_EXHAUSTED, "0 of 3 slices");
  uint32_t sa, sb, sc;
  pw_mesh_shape_t mesh;
  OK(pw_vslice_binding(f.client, a, &sa, &mesh));
  OK(pw_vslice_binding(f.client, b, &sb, &mesh));
  cr_assert_eq(mesh.dims[0], 4);
  OK(pw_vslice_binding(f.client, c, &sc, NULL));
  cr_assert(sa != sb && sb != sc && sa != sc);
  /* A second client shares slices (the gang scheduler interleaves them),
   * least shared first; an exclusive request finds none free. */
  pw_client_t* other;
  OK(pw_client_create(f.runtime, &(pw_client_options_t){sizeof(pw_client_options_t), "other", 2, 0},
                      &other));
  cr_assert_str_eq(pw_client_name(other), "other");
  pw_mesh_shape_t m24;
  OK(pw_mesh_shape_parse("2x4", &m24));
  FAILS(pw_vslice_create(other, &m24, PW_VSLICE_EXCLUSIVE, &d), PW_STATUS_RESOURCE_EXHAUSTED,
        "3 shared with other clients");
  OK(pw_vslice_create(other, &m24, 0, &d));
  /* Releasing frees the binding for this client. */
  OK(pw_vslice_release(f.client, a));
  FAILS(pw_vslice_release(f.client, a), PW_STATUS_NOT_FOUND, "unknown or was released");
  pw_vslice_t again;
  OK(pw_fixture_vslice(&f, "2x4", &again));
  OK(pw_vslice_binding(f.client, again, &sb, NULL));
  cr_assert_eq(sb, sa);
  FAILS(pw_vslice_create(f.client, &m24, 0x80, &d), PW_STATUS_INVALID_ARGUMENT, "unknown flags");
  pw_client_destroy(other);
  pw_fixture_deinit(&f);
}

Test(runtime, client_destroy_waits_for_inflight_work_and_frees_everything) {
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_THREADED, 1, "2x4", pw_test_allocator(&t)));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2x4", &vs));
  pw_executable_t copy;
  OK(pw_fixture_compile(&f, vs, "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n",
                        &copy));
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t p, c;
  OK(pw_graph_add_parameter(f.client, g, vs, &spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(f.client, g, "c", copy, vs, &in, 1, &c));
  OK(pw_graph_add_output(f.client, g, pw_value(c, 0)));
  float data[8] = {0};
  pw_buffer_t x;
  OK(pw_fixture_f32(&f, vs, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), data, &x));
  pw_double_backend_pause(f.dbl, true);
  pw_event_t* done[10];
  for (int i = 0; i < 10; ++i) {
    pw_buffer_t y;
    OK(pw_graph_submit(f.client, g, &x, 1, NULL, &y, 1, &done[i]));
    x = y; /* chain executions; handles are left for destroy to free */
  }
  cr_assert_not(pw_event_is_ready(done[9]));
  /* vslice, executable, graph, the first argument and 10 outputs */
  cr_assert_eq(pw_client_live_handles(f.client), 14);
  FAILS(pw_client_wait_idle(f.client, pw_deadline_from_timeout(20000000)),
        PW_STATUS_DEADLINE_EXCEEDED, "still has 10 executions in flight");
  pw_double_backend_pause(f.dbl, false);
  OK(pw_client_wait_idle(f.client, pw_deadline_from_timeout(10000000000LL)));
  pw_client_destroy(f.client); /* waits */
  f.client = NULL;
  for (int i = 0; i < 10; ++i) OK(pw_fixture_wait(done[i]));
  pw_fixture_deinit(&f);
  cr_assert_eq(pw_test_allocator_live(&t), 0, "%zu allocations leaked", pw_test_allocator_live(&t));
}

/* The whole path with one allocation failing at a time: every failure is a
 * clean RESOURCE_EXHAUSTED and nothing leaks. */
static bool whole_path(pw_allocator_t a, bool expect_failure, void* user) {
  (void)user;
  pw_fixture_t f;
  pw_status_t s = pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 1, "2x4", a);
  pw_vslice_t vs = {0};
  pw_executable_t copy = {0};
  pw_graph_t g = {0};
  pw_buffer_t x = {0}, y = {0};
  pw_event_t* done = NULL;
  bool have_fixture = s == NULL;
  if (s == NULL) s = pw_fixture_vslice(&f, "2x4", &vs);
  if (s == NULL) {
    s = pw_fixture_compile(&f, vs, "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n",
                           &copy);
  }
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t p = 0, c = 0;
  if (s == NULL) s = pw_graph_create(f.client, &g);
  if (s == NULL) s = pw_graph_add_parameter(f.client, g, vs, &spec, &p);
  pw_value_t in = pw_value(p, 0);
  if (s == NULL) s = pw_graph_add_compute(f.client, g, "c", copy, vs, &in, 1, &c);
  if (s == NULL) s = pw_graph_add_output(f.client, g, pw_value(c, 0));
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  if (s == NULL) {
    s = pw_fixture_f32(&f, vs, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), data, &x);
  }
  if (s == NULL) s = pw_graph_submit(f.client, g, &x, 1, NULL, &y, 1, &done);
  if (s == NULL) s = pw_fixture_wait(done);
  float back[8];
  if (s == NULL) s = pw_buffer_to_host(f.client, y, back, sizeof(back), PW_INFINITE_FUTURE);
  bool ok = pw_sweep_path_end(s, expect_failure,
                              s == NULL && memcmp(back, data, sizeof(data)) == 0, "whole_path");
  if (have_fixture) pw_fixture_deinit(&f);
  return ok;
}

Test(runtime, failing_allocator_sweep_over_create_build_submit) {
  char why[256] = "";
  int points = pw_test_allocator_sweep(whole_path, NULL, why);
  cr_assert_gt(points, 20, "%s", why);
}
