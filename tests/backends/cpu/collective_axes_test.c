/* Collectives over named mesh axes and TILED (PartitionSpec) shardings on
 * a 2x4 mesh named (data, model): all_reduce over data (groups of 2), over
 * model (groups of 4) and over both; all_gather, reduce_scatter,
 * all_to_all; matmul and elementwise kernels on tiled shards; every result
 * checked element by element against a host computation in the same
 * order; bad programs refused with a status naming the culprit. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_test_support.h"
#include "support/test_allocators.h"

TestSuite(cpu_collective_axes, .fini = pw_test_check_leaks);

#define DEVICES 8u
#define MAX_IN 2u

typedef struct afix_t {
  pw_test_allocator_t counting;
  pw_backend_t backend;
  const pw_backend_vtable_t* vt;
  pw_mesh_shape_t mesh; /* data=2, model=4 */
} afix_t;

static void afix_init(afix_t* f, uint32_t workers) {
  pw_test_allocator_init(&f->counting);
  cr_assert_null(cpu_create(pw_test_allocator(&f->counting), DEVICES, workers, 0, &f->backend));
  f->vt = f->backend.vtable;
  cr_assert_null(pw_mesh_shape_parse("data=2,model=4", &f->mesh));
}

/* Streams mode: one FIFO thread per device, collectives block them. */
static void afix_init_streams(afix_t* f) {
  pw_test_allocator_init(&f->counting);
  pw_cpu_backend_options_t options;
  pw_cpu_backend_options_init(&options);
  options.allocator = pw_test_allocator(&f->counting);
  options.device_count = DEVICES;
  options.stream_depth = 4;
  cr_assert_null(pw_cpu_backend_create(&options, &f->backend));
  f->vt = f->backend.vtable;
  cr_assert_null(pw_mesh_shape_parse("data=2,model=4", &f->mesh));
}

static void afix_fini(afix_t* f) {
  cpu_destroy(f->backend);
  cr_assert_eq(pw_test_allocator_live(&f->counting), 0, "leak");
}

/* Elements of one device's shard of |param|. */
static size_t shard_elements(const pw_backend_param_t* param, const pw_mesh_shape_t* mesh) {
  pw_shape_t block = pw_sharding_shard_shape(&param->sharding, &param->shape, mesh);
  return (size_t)pw_shape_element_count(&block);
}

/* Copies device |d|'s block of the global f32 array |global| into |out|. */
static void block_of(const float* global, const pw_backend_param_t* param,
                     const pw_mesh_shape_t* mesh, uint32_t d, float* out) {
  const pw_shape_t* shape = &param->shape;
  pw_shape_t block = pw_sharding_shard_shape(&param->sharding, shape, mesh);
  int64_t offsets[PW_MAX_RANK];
  pw_sharding_shard_offsets(&param->sharding, shape, mesh, d, offsets);
  size_t n = (size_t)pw_shape_element_count(&block);
  for (size_t e = 0; e < n; ++e) {
    size_t rest = e;
    size_t global_index = 0;
    int64_t local[PW_MAX_RANK];
    for (uint32_t k = block.rank; k-- > 0;) {
      local[k] = (int64_t)(rest % (size_t)block.dims[k]);
      rest /= (size_t)block.dims[k];
    }
    for (uint32_t k = 0; k < shape->rank; ++k) {
      global_index = global_index * (size_t)shape->dims[k] + (size_t)(offsets[k] + local[k]);
    }
    out[e] = global[global_index];
  }
}

/* Compiles |text| on the named mesh, loads it, gives device d the shards
 * in[i][d] (f32 unless the program says otherwise), runs every device (launched in reverse order) and
 * copies device d's output 0 into out[d]. */
static pw_status_t run_shards(afix_t* f, const char* text, float* const in[][DEVICES],
                              float* const out[DEVICES], pw_executable_signature_t* out_sig) {
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig;
  PW_RETURN_IF_ERROR(cpu_load_text(f->backend, text, &f->mesh, &exe, &sig));
  if (out_sig != NULL) *out_sig = sig;
  uint32_t devices[DEVICES];
  pw_backend_memory_t in_mem[DEVICES][MAX_IN];
  pw_backend_memory_t out_mem[DEVICES];
  memset(in_mem, 0, sizeof(in_mem));
  memset(out_mem, 0, sizeof(out_mem));
  pw_status_t status = NULL;
  for (uint32_t d = 0; d < DEVICES && status == NULL; ++d) {
    devices[d] = d;
    for (uint32_t i = 0; i < sig.input_count && status == NULL; ++i) {
      size_t bytes = shard_elements(&sig.inputs[i], &sig.mesh) * pw_dtype_size(sig.inputs[i].dtype);
      status = f->vt->allocate(f->backend.self, d, bytes, &in_mem[d][i]);
      if (status == NULL) {
        status = f->vt->copy_to_device(f->backend.self, d, in_mem[d][i], 0, in[i][d], bytes);
      }
    }
    if (status == NULL) {
      size_t bytes = shard_elements(&sig.outputs[0], &sig.mesh) * pw_dtype_size(sig.outputs[0].dtype);
      status = f->vt->allocate(f->backend.self, d, bytes, &out_mem[d]);
    }
  }
  cpu_waiter_t waiter;
  cpu_waiter_init(&waiter, status == NULL ? DEVICES : 0);
  for (uint32_t d = DEVICES; status == NULL && d-- > 0;) {
    pw_backend_launch_t l = {
        .struct_size = sizeof(l), .executable = exe, .device = d, .mesh_index = d,
        .group_devices = devices, .group_size = DEVICES, .gang_id = 4242,
        .inputs = in_mem[d], .input_count = sig.input_count, .outputs = &out_mem[d],
        .output_count = 1, .done = cpu_waiter_done, .done_user = &waiter};
    status = f->vt->launch(f->backend.self, &l);
    cr_assert_null(status, "launch %u: %s", d, pw_status_message(status));
  }
  cr_assert(cpu_waiter_wait(&waiter, 20000), "the collective did not finish");
  if (status == NULL) status = cpu_waiter_take_error(&waiter);
  for (uint32_t d = 0; d < DEVICES && status == NULL; ++d) {
    size_t bytes = shard_elements(&sig.outputs[0], &sig.mesh) * pw_dtype_size(sig.outputs[0].dtype);
    status = f->vt->copy_to_host(f->backend.self, d, out_mem[d], 0, out[d], bytes);
  }
  cpu_waiter_destroy(&waiter);
  for (uint32_t d = 0; d < DEVICES; ++d) {
    for (uint32_t i = 0; i < MAX_IN; ++i) {
      if (in_mem[d][i] != NULL) f->vt->deallocate(f->backend.self, d, in_mem[d][i]);
    }
    if (out_mem[d] != NULL) f->vt->deallocate(f->backend.self, d, out_mem[d]);
  }
  f->vt->unload(f->backend.self, exe);
  return status;
}

/* Per-device buffers of |n| floats each, filled with random values. */
typedef struct shards_t {
  float* p[DEVICES];
} shards_t;

static void shards_alloc(shards_t* s, size_t n, uint64_t* rng) {
  for (uint32_t d = 0; d < DEVICES; ++d) {
    s->p[d] = calloc(n ? n : 1, sizeof(float));
    if (rng != NULL) cpu_random_fill(rng, s->p[d], n);
  }
}

static void shards_free(shards_t* s) {
  for (uint32_t d = 0; d < DEVICES; ++d) free(s->p[d]);
}

static uint32_t coord(uint32_t d, uint32_t axis) { return axis == 0 ? d / 4 : d % 4; }

/* Compile-time refusal of |text| on the named mesh: the status code and a
 * fragment of its message. */
static void expect_refused(afix_t* f, const char* text, const char* fragment) {
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig;
  pw_status_t s = cpu_load_text(f->backend, text, &f->mesh, &exe, &sig);
  cr_assert_not_null(s, "accepted:\n%s", text);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT, "%s", pw_status_message(s));
  cr_assert(strstr(pw_status_message(s), fragment) != NULL, "'%s' lacks '%s'",
            pw_status_message(s), fragment);
  pw_status_free(s);
}

/*---------------------------------------------------------------------------
 * all_reduce
 *-------------------------------------------------------------------------*/

/* Partial sums x_d (block [R, C/|model split|]) summed over the devices
 * that differ only along |axes| (bit 0 data, bit 1 model), in position
 * order. */
static void check_all_reduce_on(const char* text, uint32_t axes, size_t n, bool mean,
                                bool streams) {
  afix_t f;
  if (streams) {
    afix_init_streams(&f);
  } else {
    afix_init(&f, 2);
  }
  uint64_t rng = 11 + axes;
  shards_t x, y;
  shards_alloc(&x, n, &rng);
  shards_alloc(&y, n, NULL);
  float* const in[1][DEVICES] = {{x.p[0], x.p[1], x.p[2], x.p[3], x.p[4], x.p[5], x.p[6], x.p[7]}};
  pw_status_t s = run_shards(&f, text, in, y.p, NULL);
  cr_assert_null(s, "%s", pw_status_message(s));
  uint32_t group = (axes & 1u ? 2u : 1u) * (axes & 2u ? 4u : 1u);
  for (uint32_t d = 0; d < DEVICES; ++d) {
    for (size_t e = 0; e < n; ++e) {
      float want = 0.0f;
      bool first = true;
      for (uint32_t o = 0; o < DEVICES; ++o) { /* row-major = position order */
        bool same = ((axes & 1u) || coord(o, 0) == coord(d, 0)) &&
                    ((axes & 2u) || coord(o, 1) == coord(d, 1));
        if (!same) continue;
        want = first ? x.p[o][e] : want + x.p[o][e];
        first = false;
      }
      if (mean) want /= (float)group;
      cr_assert_eq(y.p[d][e], want, "device %u element %zu: %g, want %g", d, e, y.p[d][e],
                   want);
    }
  }
  shards_free(&x);
  shards_free(&y);
  afix_fini(&f);
}

static void check_all_reduce(const char* text, uint32_t axes, size_t n, bool mean) {
  check_all_reduce_on(text, axes, n, mean, false);
}

Test(cpu_collective_axes, all_reduce_over_model_in_streams_mode) {
  check_all_reduce_on("kernel all_reduce_sum\n"
                      "input f32[6,4] P(data) unreduced(model)\n"
                      "output f32[6,4] P(data)\n"
                      "over model\n",
                      2u, 3 * 4, false, true);
}

Test(cpu_collective_axes, all_reduce_over_data_only_groups_of_2) {
  check_all_reduce("kernel all_reduce_sum\n"
                   "input f32[4,8] P(None, model) unreduced(data)\n"
                   "output f32[4,8] P(None, model)\n"
                   "over data\n",
                   1u, 4 * 2, false);
}

Test(cpu_collective_axes, all_reduce_over_model_only_groups_of_4) {
  check_all_reduce("kernel all_reduce_sum\n"
                   "input f32[6,4] P(data) unreduced(model)\n"
                   "output f32[6,4] P(data, None)\n"
                   "over model\n",
                   2u, 3 * 4, false);
}

Test(cpu_collective_axes, all_reduce_over_both_axes_and_the_mean) {
  check_all_reduce("kernel all_reduce_sum\n"
                   "input f32[3,5] P() unreduced(data, model)\n"
                   "output f32[3,5] replicated\n"
                   "over data, model\n",
                   3u, 15, false);
  check_all_reduce("kernel all_reduce_mean\n"
                   "input f32[3,5] P() unreduced(data, model)\n"
                   "output f32[3,5] P()\n"
                   "over model, data\n",
                   3u, 15, true);
  /* Partial sums left over the other axis stay unreduced. */
  check_all_reduce("kernel all_reduce_sum\n"
                   "input f32[2,2] P() unreduced(data, model)\n"
                   "output f32[2,2] P() unreduced(data)\n"
                   "over model\n",
                   2u, 4, false);
}

Test(cpu_collective_axes, integer_and_half_sums_over_an_axis) {
  afix_t f;
  afix_init(&f, 2);
  /* i32 over model wraps: device (r, c) holds {INT32_MAX - c, r}. */
  int32_t xi[DEVICES][2], yi[DEVICES][2];
  float* in_i[1][DEVICES];
  float* out_i[DEVICES];
  for (uint32_t d = 0; d < DEVICES; ++d) {
    xi[d][0] = INT32_MAX - (int32_t)coord(d, 1);
    xi[d][1] = (int32_t)coord(d, 0);
    in_i[0][d] = (float*)xi[d];
    out_i[d] = (float*)yi[d];
  }
  pw_status_t s = run_shards(&f,
                             "kernel all_reduce_sum\ninput i32[2] P() unreduced(model)\n"
                             "output i32[2] P()\nover model\n",
                             in_i, out_i, NULL);
  cr_assert_null(s, "%s", pw_status_message(s));
  for (uint32_t d = 0; d < DEVICES; ++d) {
    uint32_t want = 0;
    for (uint32_t c = 0; c < 4; ++c) want += (uint32_t)INT32_MAX - c;
    cr_assert_eq(yi[d][0], (int32_t)want, "device %u wraps", d);
    cr_assert_eq(yi[d][1], (int32_t)(4 * coord(d, 0)), "device %u stays in its row", d);
  }
  /* bf16 over data: summed in f32, rounded once. */
  uint16_t xb[DEVICES][3], yb[DEVICES][3];
  float* in_b[1][DEVICES];
  float* out_b[DEVICES];
  for (uint32_t d = 0; d < DEVICES; ++d) {
    for (int e = 0; e < 3; ++e) xb[d][e] = pw_f32_to_bf16(1.0f + 0.0078125f * (float)(d + e));
    in_b[0][d] = (float*)xb[d];
    out_b[d] = (float*)yb[d];
  }
  s = run_shards(&f,
                 "kernel all_reduce_mean\ninput bf16[3] P() unreduced(data)\n"
                 "output bf16[3] P()\nover data\n",
                 in_b, out_b, NULL);
  cr_assert_null(s, "%s", pw_status_message(s));
  for (uint32_t d = 0; d < DEVICES; ++d) {
    uint32_t c = coord(d, 1);
    for (int e = 0; e < 3; ++e) {
      float sum = pw_bf16_to_f32(xb[c][e]) + pw_bf16_to_f32(xb[c + 4][e]);
      cr_assert_eq(yb[d][e], pw_f32_to_bf16(sum / 2.0f), "device %u element %d", d, e);
    }
  }
  afix_fini(&f);
}

Test(cpu_collective_axes, reduce_sum_of_a_split_axis_gives_partial_sums) {
  afix_t f;
  afix_init(&f, 2);
  uint64_t rng = 21;
  float x[4 * 8];
  cpu_random_fill(&rng, x, 32);
  const char* text =
      "kernel reduce_sum\ninput f32[4,8] P(data, model)\noutput f32[4] P(data) unreduced(model)\n"
      "attr axis 1\n";
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig;
  pw_status_t s = cpu_load_text(f.backend, text, &f.mesh, &exe, &sig);
  cr_assert_null(s, "%s", pw_status_message(s));
  f.vt->unload(f.backend.self, exe);
  shards_t sx, sy;
  shards_alloc(&sx, 4, NULL);
  shards_alloc(&sy, 2, NULL);
  for (uint32_t d = 0; d < DEVICES; ++d) block_of(x, &sig.inputs[0], &sig.mesh, d, sx.p[d]);
  float* const in[1][DEVICES] = {
      {sx.p[0], sx.p[1], sx.p[2], sx.p[3], sx.p[4], sx.p[5], sx.p[6], sx.p[7]}};
  s = run_shards(&f, text, in, sy.p, NULL);
  cr_assert_null(s, "%s", pw_status_message(s));
  for (uint32_t d = 0; d < DEVICES; ++d) {
    uint32_t r = coord(d, 0), c = coord(d, 1);
    for (uint32_t i = 0; i < 2; ++i) {
      uint32_t row = 2 * r + i;
      float want = x[row * 8 + 2 * c] + x[row * 8 + 2 * c + 1];
      cr_assert_eq(sy.p[d][i], want, "device %u row %u: its columns' partial sum", d, row);
    }
  }
  expect_refused(&f,
                 "kernel reduce_sum\ninput f32[4,8] P(data, model)\noutput f32[4] P(data)\n"
                 "attr axis 1\n",
                 "P(data) unreduced(model)");
  shards_free(&sx);
  shards_free(&sy);
  afix_fini(&f);
}

/*---------------------------------------------------------------------------
 * all_gather, reduce_scatter, all_to_all (global arrays)
 *-------------------------------------------------------------------------*/

/* Runs a one-input collective on blocks of a random global f32 array of
 * |count| elements and checks every output block against the block of the
 * same global array. */
static void check_layout_change(const char* text, size_t count) {
  afix_t f;
  afix_init(&f, 1);
  uint64_t rng = 99;
  float* global = malloc(count * sizeof(float));
  cpu_random_fill(&rng, global, count);
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig;
  pw_status_t s = cpu_load_text(f.backend, text, &f.mesh, &exe, &sig);
  cr_assert_null(s, "%s", pw_status_message(s));
  f.vt->unload(f.backend.self, exe);
  shards_t x, y;
  shards_alloc(&x, shard_elements(&sig.inputs[0], &sig.mesh), NULL);
  shards_alloc(&y, shard_elements(&sig.outputs[0], &sig.mesh), NULL);
  for (uint32_t d = 0; d < DEVICES; ++d) block_of(global, &sig.inputs[0], &sig.mesh, d, x.p[d]);
  float* const in[1][DEVICES] = {{x.p[0], x.p[1], x.p[2], x.p[3], x.p[4], x.p[5], x.p[6], x.p[7]}};
  s = run_shards(&f, text, in, y.p, NULL);
  cr_assert_null(s, "%s", pw_status_message(s));
  size_t n = shard_elements(&sig.outputs[0], &sig.mesh);
  float* want = malloc(n * sizeof(float));
  for (uint32_t d = 0; d < DEVICES; ++d) {
    block_of(global, &sig.outputs[0], &sig.mesh, d, want);
    for (size_t e = 0; e < n; ++e) {
      cr_assert_eq(y.p[d][e], want[e], "device %u element %zu", d, e);
    }
  }
  free(want);
  free(global);
  shards_free(&x);
  shards_free(&y);
  afix_fini(&f);
}

Test(cpu_collective_axes, all_gather_over_model) {
  check_layout_change("kernel all_gather\n"
                      "input f32[4,8] P(data, model)\n"
                      "output f32[4,8] P(data)\n"
                      "over model\n",
                      32);
  /* A dimension split over both axes, gathered over both. */
  check_layout_change("kernel all_gather\n"
                      "input f32[8,3] P((data, model))\n"
                      "output f32[8,3] replicated\n"
                      "over data, model\n",
                      24);
  /* Gathering the minor axis of a (data, model) dimension keeps data. */
  check_layout_change("kernel all_gather\n"
                      "input f32[8,2] P((data, model))\n"
                      "output f32[8,2] P(data)\n"
                      "over model\n",
                      16);
}

Test(cpu_collective_axes, all_to_all_moves_an_axis_between_dimensions) {
  check_layout_change("kernel all_to_all\n"
                      "input f32[8,8] P(model, None)\n"
                      "output f32[8,8] P(None, model)\n"
                      "over model\n",
                      64);
  check_layout_change("kernel all_to_all\n"
                      "input f32[4,8,2] P(data, model)\n"
                      "output f32[4,8,2] P(model, None, data)\n"
                      "over data, model\n",
                      64);
}

Test(cpu_collective_axes, reduce_scatter_sums_and_splits) {
  afix_t f;
  afix_init(&f, 2);
  uint64_t rng = 5;
  /* x [8,3] P(data) unreduced(model): block [4,3], a partial per device;
   * y [8,3] P((data, model)): device (r, c) gets row 4r + c of the sum
   * over the model group, added in model order. */
  shards_t x, y;
  shards_alloc(&x, 4 * 3, &rng);
  shards_alloc(&y, 3, NULL);
  float* const in[1][DEVICES] = {{x.p[0], x.p[1], x.p[2], x.p[3], x.p[4], x.p[5], x.p[6], x.p[7]}};
  pw_status_t s = run_shards(&f,
                             "kernel reduce_scatter\n"
                             "input f32[8,3] P(data) unreduced(model)\n"
                             "output f32[8,3] P((data, model))\n"
                             "over model\n",
                             in, y.p, NULL);
  cr_assert_null(s, "%s", pw_status_message(s));
  for (uint32_t d = 0; d < DEVICES; ++d) {
    uint32_t r = coord(d, 0), c = coord(d, 1);
    for (uint32_t e = 0; e < 3; ++e) {
      float want = x.p[r * 4][c * 3 + e];
      for (uint32_t o = 1; o < 4; ++o) want += x.p[r * 4 + o][c * 3 + e];
      cr_assert_eq(y.p[d][e], want, "device %u element %u", d, e);
    }
  }
  shards_free(&x);
  shards_free(&y);
  afix_fini(&f);
}

/*---------------------------------------------------------------------------
 * matmul and elementwise kernels on tiled shards
 *-------------------------------------------------------------------------*/

/* Host c = op(a) @ b for row-major a [M,K] (or [K,M] when |ta|), b [K,N]. */
static void host_matmul(const float* a, const float* b, float* c, size_t m, size_t k, size_t n,
                        bool ta) {
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) c[i * n + j] = 0.0f;
    for (size_t p = 0; p < k; ++p) {
      float aik = ta ? a[p * m + i] : a[i * k + p];
      for (size_t j = 0; j < n; ++j) c[i * n + j] += aik * b[p * n + j];
    }
  }
}

/* Runs matmul |text| with operands cut from global |a| and |b|; checks the
 * sum of every device's partial result over the output's unreduced axes
 * (|unreduced|: bit 0 data, bit 1 model) against the host product. */
static void check_matmul(const char* text, const float* a, const float* b, size_t m, size_t k,
                         size_t n, bool ta, uint32_t unreduced) {
  afix_t f;
  afix_init(&f, 2);
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig;
  pw_status_t s = cpu_load_text(f.backend, text, &f.mesh, &exe, &sig);
  cr_assert_null(s, "%s", pw_status_message(s));
  f.vt->unload(f.backend.self, exe);
  shards_t sa, sb, sc;
  shards_alloc(&sa, shard_elements(&sig.inputs[0], &sig.mesh), NULL);
  shards_alloc(&sb, shard_elements(&sig.inputs[1], &sig.mesh), NULL);
  shards_alloc(&sc, shard_elements(&sig.outputs[0], &sig.mesh), NULL);
  for (uint32_t d = 0; d < DEVICES; ++d) {
    block_of(a, &sig.inputs[0], &sig.mesh, d, sa.p[d]);
    block_of(b, &sig.inputs[1], &sig.mesh, d, sb.p[d]);
  }
  float* const in[2][DEVICES] = {
      {sa.p[0], sa.p[1], sa.p[2], sa.p[3], sa.p[4], sa.p[5], sa.p[6], sa.p[7]},
      {sb.p[0], sb.p[1], sb.p[2], sb.p[3], sb.p[4], sb.p[5], sb.p[6], sb.p[7]}};
  s = run_shards(&f, text, in, sc.p, NULL);
  cr_assert_null(s, "%s", pw_status_message(s));
  float* c = malloc(m * n * sizeof(float));
  host_matmul(a, b, c, m, k, n, ta);
  size_t nc = shard_elements(&sig.outputs[0], &sig.mesh);
  float* want = malloc(nc * sizeof(float));
  for (uint32_t d = 0; d < DEVICES; ++d) {
    block_of(c, &sig.outputs[0], &sig.mesh, d, want);
    for (size_t e = 0; e < nc; ++e) {
      float got = 0.0f;
      for (uint32_t o = 0; o < DEVICES; ++o) {
        bool same = ((unreduced & 1u) || coord(o, 0) == coord(d, 0)) &&
                    ((unreduced & 2u) || coord(o, 1) == coord(d, 1));
        if (same) got += sc.p[o][e];
      }
      cr_assert_float_eq(got, want[e], 1e-4f, "device %u element %zu: %g, want %g", d, e, got,
                         want[e]);
    }
  }
  free(want);
  free(c);
  shards_free(&sa);
  shards_free(&sb);
  shards_free(&sc);
  afix_fini(&f);
}

Test(cpu_collective_axes, matmul_for_a_data_by_model_mlp) {
  uint64_t rng = 3;
  float x[4 * 8], w1[8 * 8], w2[8 * 4], dy[4 * 8];
  cpu_random_fill(&rng, x, 32);
  cpu_random_fill(&rng, w1, 64);
  cpu_random_fill(&rng, w2, 32);
  cpu_random_fill(&rng, dy, 32);
  /* h = x @ W1: batch over data, hidden over model. */
  check_matmul("kernel matmul\n"
               "input f32[4,8] P(data, None)\n"
               "input f32[8,8] P(None, model)\n"
               "output f32[4,8] P(data, model)\n",
               x, w1, 4, 8, 8, false, 0);
  /* y = h @ W2: the contraction over model leaves partial sums. */
  check_matmul("kernel matmul\n"
               "input f32[4,8] P(data, model)\n"
               "input f32[8,4] P(model, None)\n"
               "output f32[4,4] P(data) unreduced(model)\n",
               x, w2, 4, 8, 4, false, 2u);
  /* dW1 = x^T @ dh: contracting the batch over data. */
  check_matmul("kernel matmul\n"
               "input f32[4,8] P(data, None)\n"
               "input f32[4,8] P(data, model)\n"
               "output f32[8,8] P(None, model) unreduced(data)\n"
               "attr transpose_a 1\n",
               x, dy, 8, 4, 8, true, 1u);
}

Test(cpu_collective_axes, elementwise_kernels_run_on_tiled_shards) {
  uint64_t rng = 8;
  float a[4 * 8], b[4 * 8], c[4 * 8];
  cpu_random_fill(&rng, a, 32);
  cpu_random_fill(&rng, b, 32);
  for (int i = 0; i < 32; ++i) c[i] = a[i] + b[i];
  afix_t f;
  afix_init(&f, 2);
  /* split(0,data) and P(data) are the same layout. */
  const char* text =
      "kernel add\n"
      "input f32[4,8] P(data, model)\n"
      "input f32[4,8] P(data, model)\n"
      "output f32[4,8] P(data, model)\n";
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig;
  cr_assert_null(cpu_load_text(f.backend, text, &f.mesh, &exe, &sig));
  f.vt->unload(f.backend.self, exe);
  shards_t sa, sb, sc;
  shards_alloc(&sa, 4, NULL);
  shards_alloc(&sb, 4, NULL);
  shards_alloc(&sc, 4, NULL);
  for (uint32_t d = 0; d < DEVICES; ++d) {
    block_of(a, &sig.inputs[0], &sig.mesh, d, sa.p[d]);
    block_of(b, &sig.inputs[1], &sig.mesh, d, sb.p[d]);
  }
  float* const in[2][DEVICES] = {
      {sa.p[0], sa.p[1], sa.p[2], sa.p[3], sa.p[4], sa.p[5], sa.p[6], sa.p[7]},
      {sb.p[0], sb.p[1], sb.p[2], sb.p[3], sb.p[4], sb.p[5], sb.p[6], sb.p[7]}};
  pw_status_t s = run_shards(&f, text, in, sc.p, NULL);
  cr_assert_null(s, "%s", pw_status_message(s));
  float want[4];
  for (uint32_t d = 0; d < DEVICES; ++d) {
    block_of(c, &sig.outputs[0], &sig.mesh, d, want);
    for (int e = 0; e < 4; ++e) cr_assert_eq(sc.p[d][e], want[e], "device %u", d);
  }
  /* Equivalent layouts written differently are aligned. */
  cr_assert_null(cpu_load_text(f.backend,
                               "kernel relu\ninput f32[4,8] split(0,data)\n"
                               "output f32[4,8] P(data)\n",
                               &f.mesh, &exe, &sig));
  f.vt->unload(f.backend.self, exe);
  /* Linear kernels take partial sums; the others refuse them. */
  cr_assert_null(cpu_load_text(f.backend,
                               "kernel add\ninput f32[4] P() unreduced(data)\n"
                               "input f32[4] P() unreduced(data)\n"
                               "output f32[4] P() unreduced(data)\n",
                               &f.mesh, &exe, &sig));
  f.vt->unload(f.backend.self, exe);
  expect_refused(&f,
                 "kernel relu\ninput f32[4] P() unreduced(data)\n"
                 "output f32[4] P() unreduced(data)\n",
                 "partial sums");
  expect_refused(&f,
                 "kernel add\ninput f32[4,8] P(data, model)\ninput f32[4,8] P(data)\n"
                 "output f32[4,8] P(data, model)\n",
                 "must have the shape and sharding of input 0");
  shards_free(&sa);
  shards_free(&sb);
  shards_free(&sc);
  afix_fini(&f);
}

/*---------------------------------------------------------------------------
 * Bad programs
 *-------------------------------------------------------------------------*/

Test(cpu_collective_axes, bad_axes_and_shardings_are_named) {
  afix_t f;
  afix_init(&f, 1);
  expect_refused(&f,
                 "kernel all_reduce_sum\ninput f32[4] P() unreduced(data)\n"
                 "output f32[4] P()\nover batch\n",
                 "batch");
  expect_refused(&f, "kernel copy\ninput f32[4,8] P(batch)\noutput f32[4,8] P(batch)\n",
                 "batch");
  expect_refused(&f,
                 "kernel all_reduce_sum\ninput f32[4] P() unreduced(data)\n"
                 "output f32[4] P()\nover data, data\n",
                 "twice");
  expect_refused(&f, "kernel copy\ninput f32[4,8] P(data, data)\noutput f32[4,8] P(data)\n",
                 "data is used twice");
  /* 3 rows cannot be split over data (2). */
  expect_refused(&f, "kernel copy\ninput f32[3,8] P(data, model)\noutput f32[3,8] P(data, model)\n",
                 "divisible");
  /* The axis is not where the op needs it. */
  expect_refused(&f,
                 "kernel all_reduce_sum\ninput f32[4,8] P(data)\noutput f32[4,8] P(data)\n"
                 "over data\n",
                 "not unreduced over 'data'");
  expect_refused(&f,
                 "kernel all_gather\ninput f32[4,8] P(data, model)\n"
                 "output f32[4,8] P(data, model)\nover model\n",
                 "output 0 must be P(data)");
  expect_refused(&f,
                 "kernel all_gather\ninput f32[4,8] P(data)\noutput f32[4,8] P()\nover model\n",
                 "not split over 'model'");
  expect_refused(&f,
                 "kernel all_to_all\ninput f32[8,8] P(model)\noutput f32[8,8] P(model)\n"
                 "over model\n",
                 "moves an axis");
  expect_refused(&f,
                 "kernel reduce_scatter\ninput f32[8] P() unreduced(model)\n"
                 "output f32[8] P()\nover model\n",
                 "must be split over 'model'");
  expect_refused(&f,
                 "kernel reduce_scatter\ninput f32[8] P() unreduced(model)\n"
                 "output f32[8] P(model)\n",
                 "'over AXES'");
  /* A data-split dimension split over model before data (major) would
   * need blocks of other groups. */
  expect_refused(&f,
                 "kernel all_gather\ninput f32[8] P((model, data))\noutput f32[8] P(data)\n"
                 "over model\n",
                 "list the 'over' axes last");
  expect_refused(&f, "kernel copy\ninput f32[4] P()\noutput f32[4] P()\nover data\n",
                 "not a collective");
  /* matmul: the expected result sharding is named. */
  expect_refused(&f,
                 "kernel matmul\ninput f32[4,8] P(data, model)\ninput f32[8,4] P(model)\n"
                 "output f32[4,4] P(data)\n",
                 "output 0 must be f32[4,4] P(data) unreduced(model)");
  expect_refused(&f,
                 "kernel matmul\ninput f32[4,8] P(data, model)\ninput f32[8,4] P()\n"
                 "output f32[4,4] P(data)\n",
                 "contracted dimension");
  expect_refused(&f,
                 "kernel matmul\ninput f32[4,8] P(model)\ninput f32[8,4] P(None, model)\n"
                 "output f32[4,4] P(model, model)\n",
                 "model is used twice");
  expect_refused(&f,
                 "kernel matmul\ninput f32[4,8] P(model)\ninput f32[8,4] P(None, model)\n"
                 "output f32[4,4] P(model)\n",
                 "mesh axis 'model' splits or partially sums both inputs");
  afix_fini(&f);
}

/*---------------------------------------------------------------------------
 * Program text and executable bytes
 *-------------------------------------------------------------------------*/

Test(cpu_collective_axes, program_text_round_trips_with_names_and_indices) {
  pw_mesh_shape_t mesh;
  cr_assert_null(pw_mesh_shape_parse("data=2,model=4", &mesh));
  const char* text =
      "kernel all_reduce_sum\n"
      "input f32[8,16] P(data, model) unreduced(data)\n"
      "output f32[8,16] P((data, model))\n"
      "over model, data\n";
  pw_cpu_program_t p;
  /* data cannot both split and be unreduced: a clear error, not a crash. */
  pw_status_t s = pw_cpu_program_parse_named(text, strlen(text), &mesh, &p);
  cr_assert_not_null(s);
  pw_status_free(s);
  text =
      "kernel all_reduce_sum\n"
      "input f32[8,16] P(None, model) unreduced(data)\n"
      "output f32[8,16] P((data, model))\n"
      "over model, data\n";
  s = pw_cpu_program_parse_named(text, strlen(text), &mesh, &p);
  cr_assert_null(s, "%s", pw_status_message(s));
  cr_assert_eq(p.over_axes, 3u);
  cr_assert_eq(p.inputs[0].sharding.kind, PW_SHARDING_TILED);
  cr_assert_eq(p.inputs[0].sharding.unreduced_axes, 1u);
  char named[PW_CPU_PROGRAM_TEXT_MAX];
  size_t length = 0;
  cr_assert_null(pw_cpu_program_format_named(&p, &mesh, named, sizeof(named), &length));
  cr_assert_str_eq(named,
                   "kernel all_reduce_sum\n"
                   "input f32[8,16] P(None, model) unreduced(data)\n"
                   "output f32[8,16] P((data, model))\n"
                   "over data, model\n");
  pw_cpu_program_t again;
  cr_assert_null(pw_cpu_program_parse_named(named, length, &mesh, &again));
  cr_assert(memcmp(&p, &again, sizeof(p)) == 0, "named text round trip");
  /* Without a mesh: indices, also accepted on the named mesh. */
  char indexed[PW_CPU_PROGRAM_TEXT_MAX];
  cr_assert_null(pw_cpu_program_format(&p, indexed, sizeof(indexed), &length));
  cr_assert(strstr(indexed, "P(None, 1) unreduced(0)") != NULL, "%s", indexed);
  cr_assert(strstr(indexed, "over 0, 1") != NULL, "%s", indexed);
  cr_assert_null(pw_cpu_program_parse(indexed, length, &again));
  cr_assert(memcmp(&p, &again, sizeof(p)) == 0, "index text round trip");
  cr_assert_null(pw_cpu_program_parse_named(indexed, length, &mesh, &again));
  cr_assert(memcmp(&p, &again, sizeof(p)) == 0, "indices on a named mesh");
  /* Names need the mesh. */
  s = pw_cpu_program_parse(named, strlen(named), &again);
  cr_assert_not_null(s);
  cr_assert(strstr(pw_status_message(s), "line 2") != NULL, "%s", pw_status_message(s));
  pw_status_free(s);
  /* The old forms stay as they were. */
  const char* old = "kernel copy\ninput f32[8] split(0,1)\noutput f32[8] split(0,all)\n";
  cr_assert_null(pw_cpu_program_parse_named(old, strlen(old), &mesh, &p));
  cr_assert_null(pw_cpu_program_format_named(&p, &mesh, named, sizeof(named), &length));
  cr_assert_str_eq(named, old);
}

static uint64_t fnv1a64(const unsigned char* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static void put(unsigned char* b, size_t* n, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) b[(*n)++] = (unsigned char)(v >> (8 * i));
}

Test(cpu_collective_axes, executable_bytes_carry_tiles_and_version_1_still_loads) {
  afix_t f;
  afix_init(&f, 1);
  const char* text =
      "kernel all_gather\ninput f32[8,4] P(data, model)\noutput f32[8,4] P(data)\n"
      "over model\n";
  void* bytes = NULL;
  size_t size = 0;
  pw_allocator_t system = pw_allocator_system();
  cr_assert_null(f.vt->compile(f.backend.self, text, strlen(text), &f.mesh, "", system, &bytes,
                               &size));
  uint32_t version = 0;
  memcpy(&version, (unsigned char*)bytes + 8, 4);
  cr_assert_eq(version, 2u);
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig;
  sig.struct_size = sizeof(sig);
  cr_assert_null(f.vt->load(f.backend.self, bytes, size, &exe, &sig));
  pw_sharding_t want = pw_sharding_tiled(2, (pw_sharding_tile_t[]){{0, 0}, {1, 1}}, 0);
  cr_assert(pw_sharding_equal(&sig.inputs[0].sharding, &want));
  f.vt->unload(f.backend.self, exe);
  /* A flipped tile byte is caught by the checksum. */
  ((unsigned char*)bytes)[size - 12] ^= 1;
  pw_status_t s = f.vt->load(f.backend.self, bytes, size, &exe, &sig);
  cr_assert_eq(pw_status_code(s), PW_STATUS_DATA_LOSS);
  pw_status_free(s);
  pw_allocator_free(system, bytes, size);

  /* Version 1 bytes (no tiles, no over axes): copy f32[8] split(0,1) on a
   * 2x4 mesh. */
  unsigned char v1[256];
  size_t n = 24;
  put(v1, &n, 4, 4);
  memcpy(v1 + n, "copy", 4);
  n += 4;
  put(v1, &n, 2, 4);
  put(v1, &n, 2, 4);
  put(v1, &n, 4, 4);
  put(v1, &n, 1, 4);
  put(v1, &n, 1, 4);
  put(v1, &n, 0, 4);
  for (int p = 0; p < 2; ++p) {
    put(v1, &n, PW_DTYPE_F32, 4);
    put(v1, &n, 1, 4);
    put(v1, &n, 8, 8);
    put(v1, &n, PW_SHARDING_SPLIT, 4);
    put(v1, &n, 0, 4);
    put(v1, &n, 1, 4);
  }
  memcpy(v1, "PWCPUEXE", 8);
  size_t end = n;
  n = 8;
  put(v1, &n, 1, 4);
  put(v1, &n, end - 24, 4);
  put(v1, &n, fnv1a64(v1 + 24, end - 24), 8);
  s = f.vt->load(f.backend.self, v1, end, &exe, &sig);
  cr_assert_null(s, "%s", pw_status_message(s));
  cr_assert_eq(sig.inputs[0].sharding.kind, PW_SHARDING_SPLIT);
  cr_assert_eq(sig.inputs[0].sharding.mesh_axis, 1u);
  f.vt->unload(f.backend.self, exe);
  afix_fini(&f);
}
