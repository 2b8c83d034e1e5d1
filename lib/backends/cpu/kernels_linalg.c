/* Built-in matmul and reductions.
 *
 * Both run on local blocks without communication; the check hooks accept
 * exactly the shardings for which the local result is the right block of
 * the global one. When the contracted or reduced axis is split, the output
 * gains a leading dimension G (the size of that mesh axis) split over the
 * same axis: each device writes its partial result there, and a following
 * all_reduce_sum adds the partials (data-parallel gradients). With
 * PartitionSpec (TILED) shardings the general rule applies instead: the
 * local result of the local blocks is the device's block of the result iff
 * the result's non-contracted (kept) dimensions are split over the axes
 * that split them in the inputs, and a contracted (reduced) dimension split
 * over axes A makes the result unreduced over A (partial sums, for
 * all_reduce_sum ... over A). Sums run in
 * index order, in the parameters' dtype; integer sums wrap, f16/bf16 sums
 * run in f32 and round once (cpu_dtypes.h). matmul is f32/f64 only. */
#include <string.h>

#include "backends/cpu/cpu_dtypes.h"
#include "backends/cpu/cpu_internal.h"

/*---------------------------------------------------------------------------
 * matmul
 *-------------------------------------------------------------------------*/

#define PW_CPU_MATMUL(T)                                                     \
  do {                                                                       \
    const T* a = call->inputs[0].data;                                       \
    const T* b = call->inputs[1].data;                                       \
    T* c = call->outputs[0].data;                                            \
    memset(c, 0, m * n * sizeof(T));                                         \
    for (size_t i = 0; i < m; ++i) {                                         \
      for (size_t p = 0; p < k; ++p) {                                       \
        const T aik = ta ? a[p * m + i] : a[i * k + p];                      \
        T* row = c + i * n;                                                  \
        if (tb) {                                                            \
          for (size_t j = 0; j < n; ++j) row[j] += aik * b[j * k + p];       \
        } else {                                                             \
          const T* brow = b + p * n;                                         \
          for (size_t j = 0; j < n; ++j) row[j] += aik * brow[j];            \
        }                                                                    \
      }                                                                      \
    }                                                                        \
  } while (0)

static pw_status_t pw_cpu_run_matmul(const pw_cpu_kernel_call_t* call) {
  const bool ta = pw_cpu_program_number_attr(call->program, "transpose_a", 0) != 0;
  const bool tb = pw_cpu_program_number_attr(call->program, "transpose_b", 0) != 0;
  const pw_shape_t* as = &call->inputs[0].shape;
  const pw_shape_t* bs = &call->inputs[1].shape;
  /* op(a) is m x k, op(b) is k x n (local blocks). */
  const size_t m = (size_t)(ta ? as->dims[1] : as->dims[0]);
  const size_t k = (size_t)(ta ? as->dims[0] : as->dims[1]);
  const size_t n = (size_t)(tb ? bs->dims[0] : bs->dims[1]);
  if (call->outputs[0].dtype == PW_DTYPE_F32) {
    PW_CPU_MATMUL(float);
  } else {
    PW_CPU_MATMUL(double);
  }
  return NULL;
}

/* Which axis of a sharded operand is split, or -1; |*out_mesh_axis| then
 * names the mesh axis. */
static int pw_cpu_split_axis(const pw_backend_param_t* p, uint32_t* out_mesh_axis) {
  if (p->sharding.kind != PW_SHARDING_SPLIT) return -1;
  *out_mesh_axis = p->sharding.mesh_axis;
  return (int)p->sharding.tensor_axis;
}

/* The mesh axes splitting dimension |dim| of |s| (normalized), in order. */
static uint32_t pw_cpu_dim_axes(const pw_sharding_t* s, uint32_t dim, uint8_t* out_axes) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < s->tile_count; ++i) {
    if (s->tiles[i].tensor_axis == dim) out_axes[n++] = s->tiles[i].mesh_axis;
  }
  return n;
}

static uint32_t pw_cpu_axes_mask(const pw_sharding_t* s) {
  uint32_t mask = s->unreduced_axes;
  for (uint32_t i = 0; i < s->tile_count; ++i) mask |= 1u << s->tiles[i].mesh_axis;
  return mask;
}

/* Rank-2 matmul under the general rule (see the file comment): writes the
 * one sharding of c for which local products are c's blocks, or fails
 * naming the mesh axis the inputs disagree on. */
static pw_status_t pw_cpu_matmul_layout(const pw_backend_param_t* a, int a_m, int a_k,
                                        const pw_backend_param_t* b, int b_k, int b_n,
                                        const pw_mesh_shape_t* mesh, pw_sharding_t* out) {
  pw_sharding_t an;
  pw_sharding_t bn;
  PW_RETURN_IF_ERROR_CTX(pw_sharding_normalize(&a->sharding, &a->shape, mesh, &an), "input 0");
  PW_RETURN_IF_ERROR_CTX(pw_sharding_normalize(&b->sharding, &b->shape, mesh, &bn), "input 1");
  uint8_t am[PW_MAX_MESH_RANK], ak[PW_MAX_MESH_RANK], bk[PW_MAX_MESH_RANK], bnn[PW_MAX_MESH_RANK];
  uint32_t n_am = pw_cpu_dim_axes(&an, (uint32_t)a_m, am);
  uint32_t n_ak = pw_cpu_dim_axes(&an, (uint32_t)a_k, ak);
  uint32_t n_bk = pw_cpu_dim_axes(&bn, (uint32_t)b_k, bk);
  uint32_t n_bn = pw_cpu_dim_axes(&bn, (uint32_t)b_n, bnn);
  if (n_ak != n_bk || memcmp(ak, bk, n_ak) != 0) {
    char at[160], bt[160];
    pw_cpu__sharding_text(&a->sharding, mesh, at, sizeof(at));
    pw_cpu__sharding_text(&b->sharding, mesh, bt, sizeof(bt));
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "the contracted dimension must be split over the same mesh "
                          "axes, in the same order, in both inputs (input 0 is %s, "
                          "input 1 is %s)",
                          at, bt);
  }
  uint32_t k_mask = 0;
  for (uint32_t i = 0; i < n_ak; ++i) k_mask |= 1u << ak[i];
  uint32_t shared = pw_cpu_axes_mask(&an) & pw_cpu_axes_mask(&bn) & ~k_mask;
  if (shared != 0) {
    uint32_t axis = (uint32_t)__builtin_ctz(shared);
    char name[PW_MESH_AXIS_NAME_MAX + 8];
    pw_mesh_axis_format(mesh, axis, name, sizeof(name));
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "mesh axis '%s' splits or partially sums both inputs other "
                          "than along the contracted dimension: the local products "
                          "would not be blocks of the result",
                          name);
  }
  pw_sharding_tile_t tiles[PW_MAX_MESH_RANK];
  uint32_t count = 0;
  for (uint32_t i = 0; i < n_am; ++i) tiles[count++] = (pw_sharding_tile_t){0, am[i]};
  for (uint32_t i = 0; i < n_bn; ++i) tiles[count++] = (pw_sharding_tile_t){1, bnn[i]};
  *out = pw_sharding_tiled(count, tiles, k_mask | an.unreduced_axes | bn.unreduced_axes);
  return NULL;
}

static bool pw_cpu_is_tiled(const pw_backend_param_t* p) {
  return p->sharding.kind == PW_SHARDING_TILED;
}

static pw_status_t pw_cpu_check_matmul(void* user, const pw_cpu_program_t* program,
                                       const pw_mesh_shape_t* mesh) {
  int64_t ta = 0;
  int64_t tb = 0;
  PW_RETURN_IF_ERROR(pw_cpu__int_attr(program, "transpose_a", 0, 1, 0, &ta));
  PW_RETURN_IF_ERROR(pw_cpu__int_attr(program, "transpose_b", 0, 1, 0, &tb));
  const pw_backend_param_t* a = &program->inputs[0];
  const pw_backend_param_t* b = &program->inputs[1];
  const pw_backend_param_t* c = &program->outputs[0];
  /* Axes of the stored operands that hold M, K (of a) and K, N (of b). */
  const int a_m = ta ? 1 : 0, a_k = ta ? 0 : 1;
  const int b_k = tb ? 1 : 0, b_n = tb ? 0 : 1;
  const int64_t m = a->shape.dims[a_m], k = a->shape.dims[a_k];
  const int64_t kb = b->shape.dims[b_k], n = b->shape.dims[b_n];
  if (k != kb) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "op(a) is [%lld,%lld] and op(b) is [%lld,%lld]: the "
                          "contracted dimensions differ",
                          (long long)m, (long long)k, (long long)kb, (long long)n);
  }
  uint32_t a_mesh = 0, b_mesh = 0;
  const int a_split = pw_cpu_split_axis(a, &a_mesh);
  const int b_split = pw_cpu_split_axis(b, &b_mesh);
  const bool k_split_a = a_split == a_k, k_split_b = b_split == b_k;
  pw_shape_t want_shape;
  pw_sharding_t want_sharding = pw_sharding_replicated();
  if (c->shape.rank == 3) {
    /* Partial products: K split over one mesh axis X in both operands. */
    if (!k_split_a || !k_split_b || a_mesh != b_mesh) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "a rank-3 output [G,M,N] holds partial products: "
                            "the contracted dimension of both inputs must be "
                            "split over the same mesh axis");
    }
    int64_t dims[3] = {(int64_t)pw_cpu__mesh_axis_size(mesh, a_mesh), m, n};
    want_shape = pw_shape_make(3, dims);
    want_sharding = pw_sharding_split(0, a_mesh);
  } else if (c->shape.rank == 2 &&
             (pw_cpu_is_tiled(a) || pw_cpu_is_tiled(b) || pw_cpu_is_tiled(c))) {
    int64_t dims[2] = {m, n};
    want_shape = pw_shape_make(2, dims);
    PW_RETURN_IF_ERROR(pw_cpu_matmul_layout(a, a_m, a_k, b, b_k, b_n, mesh, &want_sharding));
  } else if (c->shape.rank == 2) {
    if (k_split_a || k_split_b) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "the contracted dimension is split: use a rank-3 "
                            "output [G,M,N] split(0,X) for the partial products "
                            "and all_reduce_sum them");
    }
    if (a_split >= 0 && b_split >= 0) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "op(a) rows and op(b) columns are both split; the "
                            "output can be split along one axis only");
    }
    int64_t dims[2] = {m, n};
    want_shape = pw_shape_make(2, dims);
    if (a_split >= 0) want_sharding = pw_sharding_split(0, a_mesh);
    if (b_split >= 0) want_sharding = pw_sharding_split(1, b_mesh);
  } else {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "output 0 must have rank 2 ([M,N]) or 3 ([G,M,N] "
                          "partial products), not %u",
                          c->shape.rank);
  }
  if (!pw_shape_equal(&c->shape, &want_shape) ||
      !pw_sharding_equivalent(&c->sharding, &want_sharding, &want_shape, mesh)) {
    char shape[128];
    char sharding[160];
    pw_shape_format(c->dtype, &want_shape, shape, sizeof(shape));
    pw_cpu__sharding_text(&want_sharding, mesh, sharding, sizeof(sharding));
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "output 0 must be %s %s for these inputs", shape,
                          sharding);
  }
  return NULL;
}

/*---------------------------------------------------------------------------
 * reduce_sum, reduce_mean
 *-------------------------------------------------------------------------*/

#define PW_CPU_REDUCE(T)                                                  \
  do {                                                                    \
    const T* x = call->inputs[0].data;                                    \
    T* y = call->outputs[0].data;                                         \
    memset(y, 0, outer * inner * sizeof(T));                              \
    for (size_t o = 0; o < outer; ++o) {                                  \
      T* row = y + o * inner;                                             \
      for (size_t r = 0; r < length; ++r) {                               \
        const T* src = x + (o * length + r) * inner;                      \
        for (size_t i = 0; i < inner; ++i) row[i] += src[i];              \
      }                                                                   \
    }                                                                     \
    if (mean) {                                                           \
      const T count = (T)global;                                          \
      for (size_t i = 0; i < outer * inner; ++i) y[i] /= count;           \
    }                                                                     \
  } while (0)

/* Integer sums (reduce_sum only: the signature keeps integers from the
 * mean), wrapping in the unsigned type U. */
#define PW_CPU_REDUCE_INT(T, U)                                           \
  do {                                                                    \
    const T* x = call->inputs[0].data;                                    \
    T* y = call->outputs[0].data;                                         \
    for (size_t o = 0; o < outer; ++o) {                                  \
      for (size_t i = 0; i < inner; ++i) {                                \
        U sum = 0;                                                        \
        for (size_t r = 0; r < length; ++r) {                             \
          sum += (U)x[(o * length + r) * inner + i];                      \
        }                                                                 \
        y[o * inner + i] = (T)sum;                                        \
      }                                                                   \
    }                                                                     \
  } while (0)

static pw_status_t pw_cpu_run_reduce(const pw_cpu_kernel_call_t* call) {
  const bool mean = call->user != NULL;
  const uint32_t axis =
      (uint32_t)pw_cpu_program_number_attr(call->program, "axis", 0);
  const pw_shape_t* shard = &call->inputs[0].shape;
  size_t outer = 1;
  size_t inner = 1;
  for (uint32_t i = 0; i < axis; ++i) outer *= (size_t)shard->dims[i];
  for (uint32_t i = axis + 1; i < shard->rank; ++i) inner *= (size_t)shard->dims[i];
  const size_t length = (size_t)shard->dims[axis];
  const int64_t global = call->program->inputs[0].shape.dims[axis];
  const pw_dtype_t dtype = call->outputs[0].dtype;
  switch (dtype) {
    case PW_DTYPE_F32: PW_CPU_REDUCE(float); break;
    case PW_DTYPE_F64: PW_CPU_REDUCE(double); break;
    case PW_DTYPE_F16:
    case PW_DTYPE_BF16:
      for (size_t o = 0; o < outer; ++o) {
        for (size_t i = 0; i < inner; ++i) {
          float sum = 0.0f;
          for (size_t r = 0; r < length; ++r) {
            sum += pw_cpu__half_load(dtype, call->inputs[0].data, (o * length + r) * inner + i);
          }
          pw_cpu__half_store(dtype, call->outputs[0].data, o * inner + i,
                             mean ? sum / (float)global : sum);
        }
      }
      break;
#define PW_CPU_REDUCE_INT_CASE(DTYPE, T, U) \
  case DTYPE: PW_CPU_REDUCE_INT(T, U); break;
    PW_CPU__FOR_EACH_INT(PW_CPU_REDUCE_INT_CASE)
#undef PW_CPU_REDUCE_INT_CASE
    default:
      return pw_status_make(PW_STATUS_INTERNAL, "kernel '%s': no loop for dtype %s",
                            mean ? "reduce_mean" : "reduce_sum", pw_dtype_name(dtype));
  }
  return NULL;
}

static pw_status_t pw_cpu_check_reduce(void* user, const pw_cpu_program_t* program,
                                       const pw_mesh_shape_t* mesh) {
  const pw_backend_param_t* x = &program->inputs[0];
  const pw_backend_param_t* y = &program->outputs[0];
  if (x->shape.rank < 1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "input 0 must have rank >= 1");
  }
  int64_t axis = 0;
  PW_RETURN_IF_ERROR(pw_cpu__int_attr(program, "axis", 0, (int64_t)x->shape.rank - 1,
                                      0, &axis));
  /* x's shape without |axis|. */
  pw_shape_t rest;
  memset(&rest, 0, sizeof(rest));
  for (uint32_t i = 0; i < x->shape.rank; ++i) {
    if (i != (uint32_t)axis) rest.dims[rest.rank++] = x->shape.dims[i];
  }
  pw_shape_t want_shape = rest;
  pw_sharding_t want_sharding = pw_sharding_replicated();
  if (x->sharding.kind == PW_SHARDING_TILED) {
    /* The general rule: kept dimensions keep their axes, the reduced one's
     * axes become unreduced (partial sums, one per block). */
    pw_sharding_t xn;
    PW_RETURN_IF_ERROR_CTX(pw_sharding_normalize(&x->sharding, &x->shape, mesh, &xn),
                           "input 0");
    pw_sharding_tile_t tiles[PW_MAX_MESH_RANK];
    uint32_t count = 0;
    uint32_t unreduced = xn.unreduced_axes;
    for (uint32_t i = 0; i < xn.tile_count; ++i) {
      uint32_t t = xn.tiles[i].tensor_axis;
      if (t == (uint32_t)axis) {
        unreduced |= 1u << xn.tiles[i].mesh_axis;
      } else {
        tiles[count++] = (pw_sharding_tile_t){(uint8_t)(t > (uint32_t)axis ? t - 1 : t),
                                              xn.tiles[i].mesh_axis};
      }
    }
    want_sharding = pw_sharding_tiled(count, tiles, unreduced);
  } else if (x->sharding.kind == PW_SHARDING_SPLIT) {
    uint32_t t = x->sharding.tensor_axis;
    if (t == (uint32_t)axis) {
      /* Partials: [G, rest...] split(0,X). */
      if (rest.rank == PW_MAX_RANK) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "a partial result would exceed rank %d", PW_MAX_RANK);
      }
      want_shape.rank = rest.rank + 1;
      want_shape.dims[0] = pw_cpu__mesh_axis_size(mesh, x->sharding.mesh_axis);
      for (uint32_t i = 0; i < rest.rank; ++i) want_shape.dims[i + 1] = rest.dims[i];
      want_sharding = pw_sharding_split(0, x->sharding.mesh_axis);
    } else {
      want_sharding = pw_sharding_split(t > (uint32_t)axis ? t - 1 : t,
                                        x->sharding.mesh_axis);
    }
  }
  if (!pw_shape_equal(&y->shape, &want_shape) ||
      !pw_sharding_equivalent(&y->sharding, &want_sharding, &want_shape, mesh)) {
    char shape[256];
    char sharding[160];
    pw_shape_format(y->dtype, &want_shape, shape, sizeof(shape));
    pw_cpu__sharding_text(&want_sharding, mesh, sharding, sizeof(sharding));
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "output 0 must be %s %s when reducing axis %lld of "
                          "input 0",
                          shape, sharding, (long long)axis);
  }
  return NULL;
}

/*---------------------------------------------------------------------------
 * Signatures
 *-------------------------------------------------------------------------*/

static const pw_cpu_param_spec_t pw_cpu_matmul_in[] = {{"a", PW_CPU_DTYPES_FLOAT, 2},
                                                       {"b", PW_CPU_DTYPES_FLOAT, 2}};
static const pw_cpu_param_spec_t pw_cpu_matmul_out[] = {{"c", PW_CPU_DTYPES_FLOAT, -1}};
static const pw_cpu_attr_spec_t pw_cpu_matmul_attrs[] = {
    {"transpose_a", PW_CPU_ATTR_NUMBER, false},
    {"transpose_b", PW_CPU_ATTR_NUMBER, false}};
#define PW_CPU_REDUCE_MEAN_DTYPES (PW_CPU_DTYPES_FLOAT | PW_CPU_DTYPES_HALF)
#define PW_CPU_REDUCE_SUM_DTYPES (PW_CPU_REDUCE_MEAN_DTYPES | PW_CPU_DTYPES_INTEGER)
static const pw_cpu_param_spec_t pw_cpu_reduce_in[] = {{"x", PW_CPU_REDUCE_SUM_DTYPES, -1}};
static const pw_cpu_param_spec_t pw_cpu_reduce_out[] = {{"y", PW_CPU_REDUCE_SUM_DTYPES, -1}};
static const pw_cpu_param_spec_t pw_cpu_mean_in[] = {{"x", PW_CPU_REDUCE_MEAN_DTYPES, -1}};
static const pw_cpu_param_spec_t pw_cpu_mean_out[] = {{"y", PW_CPU_REDUCE_MEAN_DTYPES, -1}};
static const pw_cpu_attr_spec_t pw_cpu_reduce_attrs[] = {
    {"axis", PW_CPU_ATTR_NUMBER, true}};

/* Non-NULL user marks the mean. */
static const char pw_cpu_mean_tag[] = "mean";

const pw_cpu__builtin_t pw_cpu__linalg_kernels[] = {
    {{.struct_size = sizeof(pw_cpu_kernel_def_t), .name = "matmul", .input_count = 2,
      .inputs = pw_cpu_matmul_in, .output_count = 1, .outputs = pw_cpu_matmul_out,
      .attr_count = 2, .attrs = pw_cpu_matmul_attrs,
      .flags = PW_CPU_KERNEL_SAME_DTYPE, .check = pw_cpu_check_matmul,
      .run = pw_cpu_run_matmul},
     PW_CPU__NOT_COLLECTIVE},
    {{.struct_size = sizeof(pw_cpu_kernel_def_t), .name = "reduce_sum",
      .input_count = 1, .inputs = pw_cpu_reduce_in, .output_count = 1,
      .outputs = pw_cpu_reduce_out, .attr_count = 1, .attrs = pw_cpu_reduce_attrs,
      .flags = PW_CPU_KERNEL_SAME_DTYPE, .check = pw_cpu_check_reduce,
      .run = pw_cpu_run_reduce},
     PW_CPU__NOT_COLLECTIVE},
    {{.struct_size = sizeof(pw_cpu_kernel_def_t), .name = "reduce_mean",
      .input_count = 1, .inputs = pw_cpu_mean_in, .output_count = 1,
      .outputs = pw_cpu_mean_out, .attr_count = 1, .attrs = pw_cpu_reduce_attrs,
      .flags = PW_CPU_KERNEL_SAME_DTYPE, .check = pw_cpu_check_reduce,
      .run = pw_cpu_run_reduce, .user = (void*)pw_cpu_mean_tag},
     PW_CPU__NOT_COLLECTIVE},
};
const size_t pw_cpu__linalg_kernel_count =
    sizeof(pw_cpu__linalg_kernels) / sizeof(pw_cpu__linalg_kernels[0]);
