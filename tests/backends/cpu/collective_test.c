/* In-slice collectives: results, determinism, grouping over one mesh axis,
 * pools of one and two threads, many gangs in flight, device failure and
 * destruction with collectives pending. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_test_support.h"
#include "support/test_allocators.h"

TestSuite(cpu_collective, .fini = pw_test_check_leaks);

typedef struct cfix_t {
  pw_test_allocator_t counting;
  pw_backend_t backend;
  const pw_backend_vtable_t* vt;
} cfix_t;

static void cfix_init(cfix_t* f, uint32_t workers) {
  pw_test_allocator_init(&f->counting);
  cr_assert_null(cpu_create(pw_test_allocator(&f->counting), 8, workers, 0, &f->backend));
  f->vt = f->backend.vtable;
}

static void cfix_fini(cfix_t* f) {
  cpu_destroy(f->backend);
  cr_assert_eq(pw_test_allocator_live(&f->counting), 0, "leak");
}

static pw_mesh_shape_t mesh_of(uint32_t rank, uint32_t d0, uint32_t d1) {
  uint32_t dims[] = {d0, d1};
  return pw_mesh_shape_make(rank, dims);
}

static void all_reduce_8(uint32_t workers) {
  cfix_t f;
  cfix_init(&f, workers);
  pw_mesh_shape_t mesh = mesh_of(1, 8, 0);
  uint64_t rng = 7;
  float x[8 * 5], y[5];
  cpu_random_fill(&rng, x, 8 * 5);
  const void* in[] = {x};
  void* out[] = {y};
  for (int repeat = 0; repeat < 3; ++repeat) {
    pw_status_t s = cpu_run_text(f.backend,
                                 "kernel all_reduce_sum\ninput f32[8,5] split(0,all)\n"
                                 "output f32[5] replicated\n",
                                 &mesh, in, out);
    cr_assert_null(s, "%s", pw_status_message(s));
    for (int i = 0; i < 5; ++i) {
      float want = x[i];
      for (int d = 1; d < 8; ++d) want += x[d * 5 + i]; /* mesh order */
      cr_assert_eq(y[i], want, "element %d (exact: deterministic order)", i);
    }
  }
  cfix_fini(&f);
}

Test(cpu_collective, all_reduce_sum_8_devices_2_threads) { all_reduce_8(2); }
Test(cpu_collective, all_reduce_sum_8_devices_1_thread) { all_reduce_8(1); }

Test(cpu_collective, all_reduce_mean_and_integer_sum) {
  cfix_t f;
  cfix_init(&f, 1);
  pw_mesh_shape_t mesh = mesh_of(1, 8, 0);
  double x[8 * 2], y[2];
  for (int i = 0; i < 16; ++i) x[i] = i * 0.5;
  const void* in[] = {x};
  void* out[] = {y};
  cr_assert_null(cpu_run_text(f.backend,
                              "kernel all_reduce_mean\ninput f64[8,2] split(0,all)\n"
                              "output f64[2] replicated\n",
                              &mesh, in, out));
  cr_assert_eq(y[0], (0 + 1 + 2 + 3 + 4 + 5 + 6 + 7) * 2 * 0.5 / 8);
  int32_t xi[8] = {INT32_MAX, 1, 2, 3, 4, 5, 6, 7};
  int32_t yi = 0;
  const void* in_i[] = {xi};
  void* out_i[] = {&yi};
  cr_assert_null(cpu_run_text(f.backend,
                              "kernel all_reduce_sum\ninput i32[8] split(0,all)\n"
                              "output i32[] replicated\n",
                              &mesh, in_i, out_i));
  cr_assert_eq(yi, (int32_t)((uint32_t)INT32_MAX + 28u)); /* wraps */
  cfix_fini(&f);
}

Test(cpu_collective, all_gather_along_axes) {
  cfix_t f;
  cfix_init(&f, 2);
  pw_mesh_shape_t mesh = mesh_of(1, 8, 0);
  float x[3 * 16], y[3 * 16];
  for (int i = 0; i < 48; ++i) x[i] = (float)i;
  const void* in[] = {x};
  void* out[] = {y};
  cr_assert_null(cpu_run_text(f.backend,
                              "kernel all_gather\ninput f32[16,3] split(0,all)\n"
                              "output f32[16,3] replicated\n",
                              &mesh, in, out));
  cr_assert(memcmp(x, y, sizeof(x)) == 0);
  memset(y, 0, sizeof(y));
  cr_assert_null(cpu_run_text(f.backend,
                              "kernel all_gather\ninput f32[3,16] split(1,all)\n"
                              "output f32[3,16] replicated\n",
                              &mesh, in, out));
  cr_assert(memcmp(x, y, sizeof(x)) == 0);
  pw_mesh_shape_t m24 = mesh_of(2, 2, 4);
  int64_t xi[2 * 4], yi[2 * 4];
  for (int i = 0; i < 8; ++i) xi[i] = 100 + i;
  const void* in_i[] = {xi};
  void* out_i[] = {yi};
  cr_assert_null(cpu_run_text(f.backend,
                              "kernel all_gather\ninput i64[2,4] split(0,0)\n"
                              "output i64[2,4] replicated\n",
                              &m24, in_i, out_i));
  cr_assert(memcmp(xi, yi, sizeof(xi)) == 0);
  cfix_fini(&f);
}

/*---------------------------------------------------------------------------
 * Hand-driven launches
 *-------------------------------------------------------------------------*/

typedef struct gang_t {
  pw_backend_executable_t exe;
  pw_executable_signature_t sig;
  uint32_t devices[8];
  pw_backend_memory_t in[8];
  pw_backend_memory_t out[8];
} gang_t;

/* Loads |text| and allocates one input and one output per device. */
static void gang_setup(cfix_t* f, gang_t* g, const char* text, const pw_mesh_shape_t* mesh) {
  memset(g, 0, sizeof(*g));
  cr_assert_null(cpu_load_text(f->backend, text, mesh, &g->exe, &g->sig));
  pw_shape_t in_shard = pw_sharding_shard_shape(&g->sig.inputs[0].sharding,
                                                &g->sig.inputs[0].shape, mesh);
  pw_shape_t out_shard = pw_sharding_shard_shape(&g->sig.outputs[0].sharding,
                                                 &g->sig.outputs[0].shape, mesh);
  size_t element = pw_dtype_size(g->sig.inputs[0].dtype);
  for (uint32_t d = 0; d < 8; ++d) {
    g->devices[d] = d;
    cr_assert_null(f->vt->allocate(f->backend.self, d,
                                   (size_t)pw_shape_element_count(&in_shard) * element,
                                   &g->in[d]));
    cr_assert_null(f->vt->allocate(f->backend.self, d,
                                   (size_t)pw_shape_element_count(&out_shard) * element,
                                   &g->out[d]));
  }
}

static void gang_teardown(cfix_t* f, gang_t* g) {
  for (uint32_t d = 0; d < 8; ++d) {
    f->vt->deallocate(f->backend.self, d, g->in[d]);
    f->vt->deallocate(f->backend.self, d, g->out[d]);
  }
  f->vt->unload(f->backend.self, g->exe);
}

static void gang_launch(cfix_t* f, gang_t* g, uint32_t d, uint64_t gang_id,
                        cpu_waiter_t* waiter) {
  pw_backend_launch_t l = {
      .struct_size = sizeof(l), .executable = g->exe, .device = d, .mesh_index = d,
      .group_devices = g->devices, .group_size = 8, .gang_id = gang_id,
      .inputs = &g->in[d], .input_count = 1, .outputs = &g->out[d], .output_count = 1,
      .done = cpu_waiter_done, .done_user = waiter};
  pw_status_t s = f->vt->launch(f->backend.self, &l);
  cr_assert_null(s, "%s", pw_status_message(s));
}

Test(cpu_collective, all_reduce_over_one_axis_of_a_2x4_mesh_keeps_groups_apart) {
  cfix_t f;
  cfix_init(&f, 2);
  pw_mesh_shape_t mesh = mesh_of(2, 2, 4);
  gang_t g;
  gang_setup(&f, &g,
             "kernel all_reduce_sum\ninput f32[4,3] split(0,1)\noutput f32[3] replicated\n",
             &mesh);
  /* Device (r, c) contributes {100r + c, 1, -c}: rows must not mix. */
  for (uint32_t d = 0; d < 8; ++d) {
    float v[3] = {100.0f * (float)(d / 4) + (float)(d % 4), 1.0f, -(float)(d % 4)};
    cr_assert_null(f.vt->copy_to_device(f.backend.self, d, g.in[d], 0, v, sizeof(v)));
  }
  cpu_waiter_t w;
  cpu_waiter_init(&w, 8);
  for (uint32_t d = 8; d-- > 0;) gang_launch(&f, &g, d, 77, &w);
  cr_assert(cpu_waiter_wait(&w, 20000));
  cr_assert_eq(w.errors, 0);
  for (uint32_t d = 0; d < 8; ++d) {
    float v[3];
    cr_assert_null(f.vt->copy_to_host(f.backend.self, d, g.out[d], 0, v, sizeof(v)));
    float row = (float)(d / 4);
    cr_assert_eq(v[0], 400.0f * row + 6.0f, "device %u", d);
    cr_assert_eq(v[1], 4.0f);
    cr_assert_eq(v[2], -6.0f);
  }
  cpu_waiter_destroy(&w);
  gang_teardown(&f, &g);
  cfix_fini(&f);
}

Test(cpu_collective, many_gangs_in_flight_on_one_thread) {
  cfix_t f;
  cfix_init(&f, 1);
  pw_mesh_shape_t mesh = mesh_of(1, 8, 0);
  enum { GANGS = 24 };
  gang_t* gangs = calloc(GANGS, sizeof(gang_t));
  for (int k = 0; k < GANGS; ++k) {
    gang_setup(&f, &gangs[k],
               "kernel all_reduce_sum\ninput f64[8] split(0,all)\noutput f64[] replicated\n",
               &mesh);
    for (uint32_t d = 0; d < 8; ++d) {
      double v = k * 1000.0 + d;
      cr_assert_null(f.vt->copy_to_device(f.backend.self, d, gangs[k].in[d], 0, &v, sizeof(v)));
    }
  }
  cpu_waiter_t w;
  cpu_waiter_init(&w, GANGS * 8);
  /* Device-major order: every gang has members waiting at once. */
  for (uint32_t d = 0; d < 8; ++d) {
    for (int k = 0; k < GANGS; ++k) gang_launch(&f, &gangs[k], d, 500 + (uint64_t)k, &w);
  }
  cr_assert(cpu_waiter_wait(&w, 20000), "%u of %u dones", w.calls, GANGS * 8);
  cr_assert_eq(w.errors, 0);
  for (int k = 0; k < GANGS; ++k) {
    for (uint32_t d = 0; d < 8; ++d) {
      double v = 0;
      cr_assert_null(f.vt->copy_to_host(f.backend.self, d, gangs[k].out[d], 0, &v, sizeof(v)));
      cr_assert_eq(v, k * 8000.0 + 28.0);
    }
    gang_teardown(&f, &gangs[k]);
  }
  free(gangs);
  cpu_waiter_destroy(&w);
  cfix_fini(&f);
}

Test(cpu_collective, a_failed_device_fails_its_group_without_hanging) {
  cfix_t f;
  cfix_init(&f, 2);
  pw_mesh_shape_t mesh = mesh_of(1, 8, 0);
  gang_t g;
  gang_setup(&f, &g,
             "kernel all_reduce_sum\ninput f32[8] split(0,all)\noutput f32[] replicated\n",
             &mesh);
  /* Failed before the launch: every member completes with UNAVAILABLE. */
  cr_assert_null(pw_cpu_backend_set_health(f.backend, 3, PW_DEVICE_FAILED));
  cr_assert_eq(f.vt->health(f.backend.self, 3), PW_DEVICE_FAILED);
  cpu_waiter_t w;
  cpu_waiter_init(&w, 8);
  for (uint32_t d = 0; d < 8; ++d) gang_launch(&f, &g, d, 1, &w);
  cr_assert(cpu_waiter_wait(&w, 20000));
  cr_assert_eq(w.errors, 8);
  pw_status_t s = cpu_waiter_take_error(&w);
  cr_assert_eq(pw_status_code(s), PW_STATUS_UNAVAILABLE);
  cr_assert(strstr(pw_status_message(s), "cpu device 3 has failed"), "%s",
            pw_status_message(s));
  pw_status_free(s);
  cpu_waiter_destroy(&w);

  /* Failed while members wait: device 7 never launches; marking it failed
   * releases the seven waiting. */
  cr_assert_null(pw_cpu_backend_set_health(f.backend, 3, PW_DEVICE_HEALTHY));
  cpu_waiter_init(&w, 7);
  for (uint32_t d = 0; d < 7; ++d) gang_launch(&f, &g, d, 2, &w);
  cr_assert(!cpu_waiter_wait(&w, 200), "nobody may finish before device 7");
  cr_assert_null(pw_cpu_backend_set_health(f.backend, 7, PW_DEVICE_FAILED));
  cr_assert(cpu_waiter_wait(&w, 20000));
  cr_assert_eq(w.errors, 7);
  s = cpu_waiter_take_error(&w);
  cr_assert_eq(pw_status_code(s), PW_STATUS_UNAVAILABLE);
  cr_assert(strstr(pw_status_message(s), "cpu device 7"), "%s", pw_status_message(s));
  pw_status_free(s);
  cpu_waiter_destroy(&w);
  /* The late member still completes (with the group's error). */
  cpu_waiter_init(&w, 1);
  gang_launch(&f, &g, 7, 2, &w);
  cr_assert(cpu_waiter_wait(&w, 20000));
  cr_assert_eq(w.errors, 1);
  cpu_waiter_destroy(&w);

  /* Healthy again: the collective works. */
  cr_assert_null(pw_cpu_backend_set_health(f.backend, 7, PW_DEVICE_HEALTHY));
  cpu_waiter_init(&w, 8);
  for (uint32_t d = 0; d < 8; ++d) gang_launch(&f, &g, d, 3, &w);
  cr_assert(cpu_waiter_wait(&w, 20000));
  cr_assert_eq(w.errors, 0);
  cpu_waiter_destroy(&w);
  gang_teardown(&f, &g);
  cfix_fini(&f);
}

Test(cpu_collective, repeated_position_fails_the_group) {
  cfix_t f;
  cfix_init(&f, 1);
  pw_mesh_shape_t mesh = mesh_of(1, 8, 0);
  gang_t g;
  gang_setup(&f, &g,
             "kernel all_gather\ninput f32[8] split(0,all)\noutput f32[8] replicated\n", &mesh);
  cpu_waiter_t w;
  cpu_waiter_init(&w, 3);
  gang_launch(&f, &g, 0, 9, &w);
  gang_launch(&f, &g, 1, 9, &w);
  gang_launch(&f, &g, 1, 9, &w);
  cr_assert(cpu_waiter_wait(&w, 20000));
  cr_assert_eq(w.errors, 3);
  pw_status_t s = cpu_waiter_take_error(&w);
  cr_assert(strstr(pw_status_message(s), "arrived twice"), "%s", pw_status_message(s));
  pw_status_free(s);
  cpu_waiter_destroy(&w);
  gang_teardown(&f, &g);
  cfix_fini(&f);
}

Test(cpu_collective, destroy_cancels_pending_collectives) {
  cfix_t f;
  cfix_init(&f, 2);
  pw_mesh_shape_t mesh = mesh_of(1, 8, 0);
  gang_t g;
  gang_setup(&f, &g,
             "kernel all_reduce_sum\ninput f32[8] split(0,all)\noutput f32[] replicated\n",
             &mesh);
  cpu_waiter_t w;
  cpu_waiter_init(&w, 3);
  for (uint32_t d = 0; d < 3; ++d) gang_launch(&f, &g, d, 4, &w);
  gang_teardown(&f, &g); /* memory and executable go first: the launches hold on */
  cpu_destroy(f.backend);
  cr_assert(cpu_waiter_wait(&w, 1000));
  cr_assert_eq(w.errors, 3);
  pw_status_t s = cpu_waiter_take_error(&w);
  cr_assert_eq(pw_status_code(s), PW_STATUS_CANCELLED);
  pw_status_free(s);
  cpu_waiter_destroy(&w);
  cr_assert_eq(pw_test_allocator_live(&f.counting), 0, "leak");
}
