/* Real computation through the runtime on the CPU backend: results of
 * multi-op graphs across the 8 devices of a 2x4 slice checked against plain
 * C references. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(numeric, .fini = pw_test_check_leaks);

static float frand(uint64_t* state) {
  *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(*state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* C = relu(A x B + bias) with A split by rows over all 8 devices, then the
 * column sums of C all-reduced: sum_r C[r, :]. */
Test(numeric, matmul_relu_and_allreduce_match_reference) {
  enum { M = 64, K = 16, N = 4 };
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_CPU, 1, "2x4", pw_allocator_system()));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2x4", &vs));
  pw_executable_t mm, bias, relu, colsum, allreduce;
  OK(pw_fixture_compile(&f, vs,
                        "kernel matmul\ninput f32[64,16] split(0,all)\n"
                        "input f32[16,4] replicated\noutput f32[64,4] split(0,all)\n",
                        &mm));
  OK(pw_fixture_compile(&f, vs,
                        "kernel bias_add\ninput f32[64,4] split(0,all)\n"
                        "input f32[4] replicated\noutput f32[64,4] split(0,all)\n",
                        &bias));
  OK(pw_fixture_compile(&f, vs,
                        "kernel relu\ninput f32[64,4] split(0,all)\noutput f32[64,4] split(0,all)\n",
                        &relu));
  OK(pw_fixture_compile(&f, vs,
                        "kernel reduce_sum\ninput f32[64,4] split(0,all)\n"
                        "output f32[8,4] split(0,all)\nattr axis 0\n",
                        &colsum));
  OK(pw_fixture_compile(&f, vs,
                        "kernel all_reduce_sum\ninput f32[8,4] split(0,all)\noutput f32[4] replicated\n",
                        &allreduce));
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  int64_t adims[2] = {M, K}, bdims[2] = {K, N}, cdims[1] = {N};
  pw_array_spec_t as = pw_fixture_spec_f32(2, adims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  pw_array_spec_t bs = pw_fixture_spec_f32(2, bdims, pw_sharding_replicated());
  pw_array_spec_t cs = pw_fixture_spec_f32(1, cdims, pw_sharding_replicated());
  uint32_t A, B, Bias, n1, n2, n3, n4, n5;
  OK(pw_graph_add_parameter(f.client, g, vs, &as, &A));
  OK(pw_graph_add_parameter(f.client, g, vs, &bs, &B));
  OK(pw_graph_add_parameter(f.client, g, vs, &cs, &Bias));
  pw_value_t in[2] = {pw_value(A, 0), pw_value(B, 0)};
  OK(pw_graph_add_compute(f.client, g, "mm", mm, vs, in, 2, &n1));
  in[0] = pw_value(n1, 0), in[1] = pw_value(Bias, 0);
  OK(pw_graph_add_compute(f.client, g, "bias", bias, vs, in, 2, &n2));
  in[0] = pw_value(n2, 0);
  OK(pw_graph_add_compute(f.client, g, "relu", relu, vs, in, 1, &n3));
  in[0] = pw_value(n3, 0);
  OK(pw_graph_add_compute(f.client, g, "colsum", colsum, vs, in, 1, &n4));
  in[0] = pw_value(n4, 0);
  OK(pw_graph_add_compute(f.client, g, "allreduce", allreduce, vs, in, 1, &n5));
  OK(pw_graph_add_output(f.client, g, pw_value(n3, 0)));
  OK(pw_graph_add_output(f.client, g, pw_value(n5, 0)));

  static float a[M * K], b[K * N], bvec[N];
  uint64_t seed = 42;
  for (int i = 0; i < M * K; ++i) a[i] = frand(&seed);
  for (int i = 0; i < K * N; ++i) b[i] = frand(&seed);
  for (int i = 0; i < N; ++i) bvec[i] = frand(&seed) * 0.1f;
  pw_buffer_t args[3];
  OK(pw_fixture_f32(&f, vs, 2, adims, as.sharding, a, &args[0]));
  OK(pw_fixture_f32(&f, vs, 2, bdims, bs.sharding, b, &args[1]));
  OK(pw_fixture_f32(&f, vs, 1, cdims, cs.sharding, bvec, &args[2]));
  /* Submit the same graph several times: the plan is reused. */
  for (int rep = 0; rep < 3; ++rep) {
    pw_buffer_t outs[2];
    pw_event_t* done;
    OK(pw_graph_submit(f.client, g, args, 3, NULL, outs, 2, &done));
    OK(pw_fixture_wait(done));
    static float c[M * N];
    float sums[N];
    OK(pw_buffer_to_host(f.client, outs[0], c, sizeof(c), PW_INFINITE_FUTURE));
    OK(pw_buffer_to_host(f.client, outs[1], sums, sizeof(sums), PW_INFINITE_FUTURE));
    double ref_sums[N] = {0};
    for (int i = 0; i < M; ++i) {
      for (int j = 0; j < N; ++j) {
        double acc = 0;
        for (int k = 0; k < K; ++k) acc += (double)a[i * K + k] * b[k * N + j];
        acc += bvec[j];
        double want = acc > 0 ? acc : 0;
        cr_assert(fabs(c[i * N + j] - want) < 1e-4, "c[%d,%d] = %f, want %f", i, j,
                  c[i * N + j], want);
        ref_sums[j] += want;
      }
    }
    for (int j = 0; j < N; ++j) {
      cr_assert(fabs(sums[j] - ref_sums[j]) < 1e-3, "sum[%d] = %f, want %f", j, sums[j],
                ref_sums[j]);
    }
    OK(pw_buffer_release(f.client, outs[0]));
    OK(pw_buffer_release(f.client, outs[1]));
  }
  pw_fixture_deinit(&f);
}

Test(numeric, kernel_error_surfaces_through_the_runtime) {
  /* A failed device: the op fails with UNAVAILABLE naming the node, and
   * the collective on the other devices does not hang. */
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_CPU, 1, "2x4", pw_allocator_system()));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2x4", &vs));
  pw_executable_t allreduce;
  OK(pw_fixture_compile(&f, vs,
                        "kernel all_reduce_sum\ninput f32[8,2] split(0,all)\noutput f32[2] replicated\n",
                        &allreduce));
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  int64_t dims[2] = {8, 2};
  pw_array_spec_t spec = pw_fixture_spec_f32(2, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t p, r;
  OK(pw_graph_add_parameter(f.client, g, vs, &spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(f.client, g, "sum", allreduce, vs, &in, 1, &r));
  OK(pw_graph_add_output(f.client, g, pw_value(r, 0)));
  float data[16];
  for (int i = 0; i < 16; ++i) data[i] = (float)i;
  pw_buffer_t x, out;
  OK(pw_fixture_f32(&f, vs, 2, dims, spec.sharding, data, &x));
  pw_event_t* done;
  OK(pw_graph_submit(f.client, g, &x, 1, NULL, &out, 1, &done));
  OK(pw_fixture_wait(done));
  float sums[2];
  OK(pw_buffer_to_host(f.client, out, sums, sizeof(sums), PW_INFINITE_FUTURE));
  cr_assert_float_eq(sums[0], 56.0f, 1e-6);
  cr_assert_float_eq(sums[1], 64.0f, 1e-6);
  OK(pw_cpu_backend_set_health(f.backend, 5, PW_DEVICE_FAILED));
  OK(pw_graph_submit(f.client, g, &x, 1, NULL, &out, 1, &done));
  pw_status_t s = pw_fixture_wait(done);
  cr_assert_eq(pw_status_code(s), PW_STATUS_UNAVAILABLE, "%s", pw_status_message(s));
  cr_assert(strstr(pw_status_message(s), "node 1 (\"sum\")"), "%s", pw_status_message(s));
  pw_status_free(s);
  pw_fixture_deinit(&f);
}
