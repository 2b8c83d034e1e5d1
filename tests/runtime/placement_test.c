/* Placement by attribute (pw_vslice_create_request): a request names the
 * backend, the device kind, the host or the slice; errors list every
 * slice; PW_VSLICE_SHARE_OWN binds several virtual slices of one client
 * to one physical slice, and ops on both run. A CPU backend and a sim
 * backend, two slices of 2 devices each. */
#include <criterion/criterion.h>
#include <string.h>

#include "pathways/pathways.h"
#include "runtime/checks.h"
#include "support/test_allocators.h"

TestSuite(placement, .fini = pw_test_check_leaks);

typedef struct env_s {
  pw_runtime_t* runtime;
  pw_client_t* client;
  char sim_kind[32];
} env_t;

static void env_init(env_t* e) {
  pw_backend_t backends[2];
  pw_cpu_backend_options_t cpu;
  pw_cpu_backend_options_init(&cpu);
  cpu.device_count = 4;
  OK(pw_cpu_backend_create(&cpu, &backends[0]));
  pw_sim_backend_options_t sim;
  pw_sim_backend_options_init(&sim);
  sim.slice_count = 1;
  sim.devices_per_slice = 4;
  OK(pw_sim_backend_create(&sim, &backends[1]));
  pw_backend_device_info_t info = {.struct_size = sizeof(info)};
  OK(backends[1].vtable->device_info(backends[1].self, 0, &info));
  snprintf(e->sim_kind, sizeof(e->sim_kind), "%s", info.kind);
  /* name, mesh, backend, first device, host */
  pw_slice_desc_t slices[4] = {{"c0", PW_MESH_SHAPE_INIT(1, 2), 0, 0, 0},
                               {"c1", PW_MESH_SHAPE_INIT(1, 2), 0, 2, 1},
                               {"s0", PW_MESH_SHAPE_INIT(1, 2), 1, 0, 1},
                               {"s1", PW_MESH_SHAPE_INIT(1, 2), 1, 2, 2}};
  pw_runtime_options_t ro = {0};
  ro.struct_size = sizeof(ro);
  ro.backends = backends;
  ro.backend_count = 2;
  ro.slices = slices;
  ro.slice_count = 4;
  OK(pw_runtime_create(&ro, &e->runtime));
  OK(pw_client_create(e->runtime, NULL, &e->client));
}

static void env_deinit(env_t* e) {
  pw_client_destroy(e->client);
  OK(pw_runtime_destroy(e->runtime));
}

static pw_vslice_request_t request(void) {
  pw_vslice_request_t r = {.struct_size = sizeof(r), .mesh = PW_MESH_SHAPE_INIT(1, 2),
                           .host = PW_VSLICE_ANY_HOST};
  return r;
}

static const char* bound_name(env_t* e, pw_vslice_t v) {
  uint32_t s = 99;
  OK(pw_vslice_binding(e->client, v, &s, NULL));
  static const char* names[4] = {"c0", "c1", "s0", "s1"};
  cr_assert_lt(s, 4);
  return names[s];
}

Test(placement, a_request_picks_by_backend_kind_host_and_name) {
  env_t e;
  env_init(&e);
  pw_vslice_t v[4];
  pw_vslice_request_t r = request();
  r.backend = "sim";
  OK(pw_vslice_create_request(e.client, &r, &v[0]));
  cr_assert_str_eq(bound_name(&e, v[0]), "s0");
  r = request();
  r.device_kind = e.sim_kind; /* s0 is taken by this client: s1 */
  OK(pw_vslice_create_request(e.client, &r, &v[1]));
  cr_assert_str_eq(bound_name(&e, v[1]), "s1");
  r = request();
  r.backend = "cpu";
  r.host = 1;
  OK(pw_vslice_create_request(e.client, &r, &v[2]));
  cr_assert_str_eq(bound_name(&e, v[2]), "c1");
  r = request();
  r.slice_name = "c0";
  OK(pw_vslice_create_request(e.client, &r, &v[3]));
  cr_assert_str_eq(bound_name(&e, v[3]), "c0");
  /* Every cpu slice is this client's now. */
  r = request();
  r.backend = "cpu";
  pw_vslice_t w;
  FAILS(pw_vslice_create_request(e.client, &r, &w), PW_STATUS_RESOURCE_EXHAUSTED,
        "2 of 4 slices have 2 devices and backend 'cpu'; of those 2 already bound to this client");
  cr_assert_eq(w.id, 0);
  env_deinit(&e);
}

Test(placement, no_slice_with_the_attributes_lists_every_slice) {
  env_t e;
  env_init(&e);
  pw_vslice_t v;
  pw_vslice_request_t r = request();
  r.backend = "tpu";
  FAILS(pw_vslice_create_request(e.client, &r, &v), PW_STATUS_NOT_FOUND, "backend 'tpu'");
  pw_status_t s = pw_vslice_create_request(e.client, &r, &v);
  cr_assert_not_null(strstr(pw_status_message(s), "c0 (2, backend cpu"), "%s",
                     pw_status_message(s));
  cr_assert_not_null(strstr(pw_status_message(s), "s1 (2, backend sim"), "%s",
                     pw_status_message(s));
  cr_assert_not_null(strstr(pw_status_message(s), "host 2"), "%s", pw_status_message(s));
  pw_status_free(s);
  r = request();
  r.backend = "cpu";
  r.host = 2;
  FAILS(pw_vslice_create_request(e.client, &r, &v), PW_STATUS_NOT_FOUND, "backend 'cpu', host 2");
  r = request();
  r.slice_name = "nope";
  FAILS(pw_vslice_create_request(e.client, &r, &v), PW_STATUS_NOT_FOUND, "slice 'nope'");
  /* Bad calls. */
  r = request();
  r.struct_size = 4;
  FAILS(pw_vslice_create_request(e.client, &r, &v), PW_STATUS_INVALID_ARGUMENT,
        "pw_vslice_create_request");
  r = request();
  r.flags = 1u << 7;
  FAILS(pw_vslice_create_request(e.client, &r, &v), PW_STATUS_INVALID_ARGUMENT, "unknown flags");
  FAILS(pw_vslice_create_request(e.client, NULL, &v), PW_STATUS_INVALID_ARGUMENT, "NULL");
  FAILS(pw_vslice_create(e.client, NULL, 0, &v), PW_STATUS_INVALID_ARGUMENT, "mesh is NULL");
  env_deinit(&e);
}

/* Copies x into y on |vs| (the CPU backend's copy kernel) and reads y. */
static void run_copy(env_t* e, pw_vslice_t vs, float base) {
  static const char kCopy[] = "kernel copy\ninput f32[4] split(0,all)\noutput f32[4] split(0,all)\n";
  pw_executable_t exe;
  OK(pw_executable_compile(e->client, vs, kCopy, strlen(kCopy), NULL, &exe));
  pw_array_spec_t spec = {PW_DTYPE_F32, {1, {4}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
  pw_graph_t g;
  OK(pw_graph_create(e->client, &g));
  uint32_t a, c;
  OK(pw_graph_add_parameter(e->client, g, vs, &spec, &a));
  pw_value_t in = pw_value(a, 0);
  OK(pw_graph_add_compute(e->client, g, "copy", exe, vs, &in, 1, &c));
  OK(pw_graph_add_output(e->client, g, pw_value(c, 0)));
  OK(pw_graph_finalize(e->client, g));
  float host[4] = {base, base + 1, base + 2, base + 3}, got[4] = {0};
  pw_buffer_t arg, out;
  OK(pw_buffer_from_host(e->client, vs, &spec, host, sizeof(host), &arg));
  OK(pw_graph_submit(e->client, g, &arg, 1, NULL, &out, 1, NULL));
  OK(pw_buffer_to_host(e->client, out, got, sizeof(got), pw_deadline_from_timeout(10000000000)));
  cr_assert_arr_eq(got, host, sizeof(host));
}

Test(placement, share_own_binds_two_virtual_slices_of_a_client_to_one_slice) {
  env_t e;
  env_init(&e);
  pw_vslice_t a, b, c;
  pw_vslice_request_t r = request();
  r.slice_name = "c0";
  OK(pw_vslice_create_request(e.client, &r, &a));
  FAILS(pw_vslice_create_request(e.client, &r, &b), PW_STATUS_RESOURCE_EXHAUSTED,
        "already bound to this client");
  r.flags = PW_VSLICE_SHARE_OWN;
  OK(pw_vslice_create_request(e.client, &r, &b));
  cr_assert_str_eq(bound_name(&e, a), "c0");
  cr_assert_str_eq(bound_name(&e, b), "c0");
  pw_slice_info_t si = {.struct_size = sizeof(si)};
  OK(pw_runtime_slice_info(e.runtime, 0, &si));
  cr_assert_eq(si.bound_vslices, 2);
  run_copy(&e, a, 1);
  run_copy(&e, b, 100);
  /* pw_vslice_create takes the flag too. */
  pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(1, 2);
  OK(pw_vslice_create(e.client, &mesh, PW_VSLICE_SHARE_OWN, &c));
  OK(pw_vslice_release(e.client, c));
  OK(pw_vslice_release(e.client, b));
  env_deinit(&e);
}
