/* Allocation failures: every allocation the sim backend makes, from
 * creation through a collective launch in each delivery mode, and the
 * creation of a runtime over a sim fleet, fails cleanly with
 * RESOURCE_EXHAUSTED and leaves nothing behind (a failing-allocator sweep). */
#include <criterion/criterion.h>
#include <string.h>

#include "sim_test_support.h"
#include "support/test_allocators.h"

TestSuite(sim_alloc, .fini = pw_test_check_leaks);

typedef struct pw_sim_sweep_t {
  pw_sim_mode_t mode;
} pw_sim_sweep_t;

static bool pw_sim_backend_sweep(pw_allocator_t allocator, bool expect_failure, void* user) {
  const pw_sim_sweep_t* sweep = user;
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.allocator = allocator;
  o.mode = sweep->mode;
  o.slice_count = 2;
  o.devices_per_slice = 2;
  o.seed = 5;
  o.random_chip_failures = 1;
  o.failure_window_ns = 1ull << 40; /* far beyond this test's virtual time */
  pw_backend_t b;
  memset(&b, 0, sizeof(b));
  pw_backend_memory_t in[2] = {NULL, NULL}, out[2] = {NULL, NULL};
  void* bytes = NULL;
  size_t size = 0;
  pw_backend_executable_t e = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  pw_sim_launch_t parts[2];
  memset(parts, 0, sizeof(parts));
  uint32_t launched = 0;
  uint32_t two = 2;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &two);
  const char* text =
      "op ar\nkind all_reduce_sum\ntime 1us\ninput i32[2,4] split(0,all)\n"
      "output i32[4] replicated\n";
  uint32_t group[2] = {1, 2};
  pw_status_t status = pw_sim_backend_create(&o, &b);
  for (uint32_t m = 0; status == NULL && m < 2; ++m) {
    status = b.vtable->allocate(b.self, group[m], 16, &in[m]);
    if (status == NULL) status = b.vtable->allocate(b.self, group[m], 16, &out[m]);
  }
  if (status == NULL) {
    status = b.vtable->compile(b.self, text, strlen(text), &mesh, NULL, allocator, &bytes, &size);
  }
  if (status == NULL) status = b.vtable->load(b.self, bytes, size, &e, &sig);
  for (uint32_t m = 0; status == NULL && m < 2; ++m) {
    pw_sim_test_describe(&parts[m], e, group[m], m, group, 2, 9, &in[m], 1, &out[m], 1);
    status = b.vtable->launch(b.self, &parts[m].launch);
    if (status == NULL) launched++;
  }
  if (status == NULL && sweep->mode == PW_SIM_MODE_MANUAL) {
    status = pw_sim_backend_run_all(b, NULL);
  }
  if (status == NULL && sweep->mode == PW_SIM_MODE_THREADED) {
    if (!pw_sim_backend_wait_idle(b, 10ull * 1000 * 1000 * 1000)) {
      status = pw_status_make(PW_STATUS_INTERNAL, "simulator thread never idle");
    }
  }
  bool ok = true;
  if (status == NULL) {
    for (uint32_t m = 0; m < 2; ++m) {
      ok = ok && atomic_load(&parts[m].done.code) == PW_STATUS_OK;
    }
  }
  if (b.vtable != NULL && e != NULL) b.vtable->unload(b.self, e);
  pw_allocator_free(allocator, bytes, size);
  for (uint32_t m = 0; b.vtable != NULL && m < 2; ++m) {
    if (in[m]) b.vtable->deallocate(b.self, group[m], in[m]);
    if (out[m]) b.vtable->deallocate(b.self, group[m], out[m]);
  }
  if (b.vtable != NULL) b.vtable->destroy(b.self);
  /* Every accepted part completed exactly once (a refused one aborts its
   * waiting peer); a refused one never. */
  for (uint32_t m = 0; m < 2; ++m) {
    uint32_t calls = atomic_load(&parts[m].done.calls);
    ok = ok && calls == (m < launched ? 1u : 0u);
  }
  pw_status_code_t code = pw_status_code(status);
  pw_status_free(status);
  return ok && (expect_failure ? code == PW_STATUS_RESOURCE_EXHAUSTED : code == PW_STATUS_OK);
}

Test(sim_alloc, backend_sweep_in_every_mode) {
  pw_sim_mode_t modes[3] = {PW_SIM_MODE_INLINE, PW_SIM_MODE_THREADED, PW_SIM_MODE_MANUAL};
  for (int i = 0; i < 3; ++i) {
    pw_sim_sweep_t sweep = {modes[i]};
    char why[256] = "";
    int swept = pw_test_allocator_sweep(pw_sim_backend_sweep, &sweep, why);
    cr_assert_geq(swept, 5, "mode %d: %s", (int)modes[i], why);
  }
}

static bool pw_sim_fleet_sweep(pw_allocator_t allocator, bool expect_failure, void* user) {
  (void)user;
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.slice_count = 3;
  o.devices_per_slice = 4;
  o.memory = PW_SIM_MEMORY_VIRTUAL;
  pw_sim_fleet_t f;
  pw_status_t status = pw_sim_fleet_init(&f, &o, allocator);
  pw_executable_t e = {0};
  pw_graph_t g = {0};
  if (status == NULL) {
    status = pw_executable_compile(f.client, f.vslices[0], "op a\ntime 1us\n", 14, NULL, &e);
  }
  if (status == NULL) status = pw_sim_fleet_step_graph(&f, 2, e, &g);
  if (status == NULL) {
    pw_event_t* done = NULL;
    status = pw_graph_submit(f.client, g, NULL, 0, NULL, NULL, 0, &done);
    if (status == NULL) {
      status = pw_event_wait(done, pw_deadline_from_timeout(10ll * 1000 * 1000 * 1000));
      pw_event_release(done);
    }
  }
  if (f.runtime != NULL) pw_sim_fleet_deinit(&f);
  pw_status_code_t code = pw_status_code(status);
  pw_status_free(status);
  return expect_failure ? code == PW_STATUS_RESOURCE_EXHAUSTED : code == PW_STATUS_OK;
}

Test(sim_alloc, runtime_over_a_sim_fleet_sweep) {
  char why[256] = "";
  int swept = pw_test_allocator_sweep(pw_sim_fleet_sweep, NULL, why);
  cr_assert_geq(swept, 10, "%s", why);
}
