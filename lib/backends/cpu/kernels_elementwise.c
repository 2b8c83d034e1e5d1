/* Built-in elementwise kernels: copy, spin, fill, add, sub, mul, scale,
 * axpy, sgd_update, relu, relu_grad, sigmoid, logistic_loss,
 * logistic_loss_grad, bias_add, add_scalar (variadic).
 *
 * Elementwise kernels need no communication: every parameter has the same
 * global shape and lays it out alike over the mesh ("aligned": any
 * sharding kind, compared by pw_sharding_equivalent), so each device
 * applies the function to its own block. Partial sums (unreduced axes) are
 * taken only by the kernels linear in their inputs (copy, spin, add, sub,
 * scale, axpy, sgd_update), where the sum of the results is the result of
 * the sums. f32 kernels compute in float (expf, log1pf
 * through <tgmath.h>), f64 in double, f16 and bf16 in float rounded back
 * once per element; add, sub and mul also take every integer dtype
 * (wrapping, cpu_dtypes.h) and c64. */
#include <complex.h>
#include <string.h>
#include <tgmath.h>

#include "pathways/clock.h"

#include "backends/cpu/cpu_dtypes.h"
#include "backends/cpu/cpu_internal.h"

/*---------------------------------------------------------------------------
 * Float elementwise kernels, generated for f32, f64, f16 and bf16
 *-------------------------------------------------------------------------*/

/* One loop over the shard: |a| and |b| are the elements of inputs 0 and 1
 * (b is 0 for unary kernels), |s| the kernel's scalar attribute. */
#define PW_CPU_EW_BODY(T, EXPR)                                        \
  do {                                                                 \
    const T* in_a = call->inputs[0].data;                              \
    const T* in_b = call->input_count > 1 ? call->inputs[1].data : NULL; \
    T* out = call->outputs[0].data;                                    \
    const T s = (T)scalar;                                             \
    (void)s;                                                           \
    for (size_t i = 0; i < n; ++i) {                                   \
      const T a = in_a[i];                                             \
      const T b = in_b != NULL ? in_b[i] : (T)0;                       \
      (void)b;                                                         \
      out[i] = (EXPR);                                                 \
    }                                                                  \
  } while (0)

/* The same for f16/bf16: elements read into float, the result rounded. */
#define PW_CPU_EW_HALF_BODY(EXPR)                                          \
  do {                                                                     \
    const pw_dtype_t dt_ = call->outputs[0].dtype;                         \
    const void* in_b = call->input_count > 1 ? call->inputs[1].data : NULL; \
    const float s = (float)scalar;                                         \
    (void)s;                                                               \
    for (size_t i = 0; i < n; ++i) {                                       \
      const float a = pw_cpu__half_load(dt_, call->inputs[0].data, i);     \
      const float b = in_b != NULL ? pw_cpu__half_load(dt_, in_b, i) : 0.0f; \
      (void)b;                                                             \
      pw_cpu__half_store(dt_, call->outputs[0].data, i, (EXPR));           \
    }                                                                      \
  } while (0)

/* Not reached: each kernel's signature admits only the dtypes it runs. */
static pw_status_t pw_cpu_ew_dtype_error(const char* kernel, pw_dtype_t dtype) {
  return pw_status_make(PW_STATUS_INTERNAL, "kernel '%s': no loop for dtype %s", kernel,
                        pw_dtype_name(dtype));
}

#define PW_CPU_DEFINE_EW(NAME, ATTR, FALLBACK, EXPR)                       \
  static pw_status_t pw_cpu_run_##NAME(const pw_cpu_kernel_call_t* call) { \
    const double scalar =                                                  \
        pw_cpu_program_number_attr(call->program, ATTR, FALLBACK);         \
    const size_t n = pw_cpu__elements(&call->outputs[0].shape);            \
    switch (call->outputs[0].dtype) {                                      \
      case PW_DTYPE_F32: PW_CPU_EW_BODY(float, EXPR); break;               \
      case PW_DTYPE_F64: PW_CPU_EW_BODY(double, EXPR); break;              \
      case PW_DTYPE_F16:                                                   \
      case PW_DTYPE_BF16: PW_CPU_EW_HALF_BODY(EXPR); break;                \
      default: return pw_cpu_ew_dtype_error(#NAME, call->outputs[0].dtype); \
    }                                                                      \
    return NULL;                                                           \
  }

PW_CPU_DEFINE_EW(scale, "alpha", 1.0, s * a)
PW_CPU_DEFINE_EW(axpy, "alpha", 1.0, s * a + b)
PW_CPU_DEFINE_EW(sgd_update, "lr", 0.0, a - s * b)
PW_CPU_DEFINE_EW(relu, "", 0.0, a > 0 ? a : 0)
PW_CPU_DEFINE_EW(relu_grad, "", 0.0, a > 0 ? b : 0)
PW_CPU_DEFINE_EW(sigmoid, "", 0.0, 1 / (1 + exp(-a)))
PW_CPU_DEFINE_EW(logistic_loss, "", 0.0,
                 (a > 0 ? a : 0) - a * b + log1p(exp(-fabs(a))))
PW_CPU_DEFINE_EW(logistic_loss_grad, "scale", 1.0, (1 / (1 + exp(-a)) - b) * s)

/*---------------------------------------------------------------------------
 * add, sub, mul: also integer (wrapping) and c64
 *-------------------------------------------------------------------------*/

#define PW_CPU_INT_BODY(T, U, OP)                                        \
  do {                                                                   \
    const T* in_a = call->inputs[0].data;                                \
    const T* in_b = call->inputs[1].data;                                \
    T* out = call->outputs[0].data;                                      \
    for (size_t i = 0; i < n; ++i) out[i] = (T)((U)in_a[i] OP (U)in_b[i]); \
  } while (0)

#define PW_CPU_INT_CASE(DTYPE, T, U) \
  case DTYPE: PW_CPU_INT_BODY(T, U, PW_CPU_OP); break;

#define PW_CPU_DEFINE_ARITH(NAME)                                          \
  static pw_status_t pw_cpu_run_##NAME(const pw_cpu_kernel_call_t* call) { \
    const double scalar = 0.0;                                             \
    const size_t n = pw_cpu__elements(&call->outputs[0].shape);            \
    switch (call->outputs[0].dtype) {                                      \
      case PW_DTYPE_F32: PW_CPU_EW_BODY(float, a PW_CPU_OP b); break;      \
      case PW_DTYPE_F64: PW_CPU_EW_BODY(double, a PW_CPU_OP b); break;     \
      case PW_DTYPE_C64: PW_CPU_EW_BODY(float complex, a PW_CPU_OP b); break; \
      case PW_DTYPE_F16:                                                   \
      case PW_DTYPE_BF16: PW_CPU_EW_HALF_BODY(a PW_CPU_OP b); break;       \
      PW_CPU__FOR_EACH_INT(PW_CPU_INT_CASE)                                \
      default: return pw_cpu_ew_dtype_error(#NAME, call->outputs[0].dtype); \
    }                                                                      \
    return NULL;                                                           \
  }

#define PW_CPU_OP +
PW_CPU_DEFINE_ARITH(add)
#undef PW_CPU_OP
#define PW_CPU_OP -
PW_CPU_DEFINE_ARITH(sub)
#undef PW_CPU_OP
#define PW_CPU_OP *
PW_CPU_DEFINE_ARITH(mul)
#undef PW_CPU_OP

/*---------------------------------------------------------------------------
 * copy, fill, bias_add
 *-------------------------------------------------------------------------*/

static pw_status_t pw_cpu_run_copy(const pw_cpu_kernel_call_t* call) {
  memcpy(call->outputs[0].data, call->inputs[0].data, call->outputs[0].size);
  return NULL;
}

/* spin: a body of fixed wall-clock length (benchmarks compare the same
 * device time in one process and behind a worker): busy-waits |ns| on
 * pw_clock_now, then copies, so a chain of spins still carries data. */
static pw_status_t pw_cpu_run_spin(const pw_cpu_kernel_call_t* call) {
  const double ns = pw_cpu_program_number_attr(call->program, "ns", 0.0);
  const pw_time_t t0 = pw_clock_now();
  while ((double)(pw_clock_now() - t0) < ns) {
  }
  memcpy(call->outputs[0].data, call->inputs[0].data, call->outputs[0].size);
  return NULL;
}

#define PW_CPU_SPIN_MAX_NS 10e9 /* 10 s: a launch deadline outlives it */

static pw_status_t pw_cpu_check_spin(void* user, const pw_cpu_program_t* program,
                                     const pw_mesh_shape_t* mesh) {
  (void)user;
  (void)mesh;
  const double ns = pw_cpu_program_number_attr(program, "ns", -1.0);
  if (!(ns >= 0 && ns <= PW_CPU_SPIN_MAX_NS) || ns != (double)(int64_t)ns) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "kernel 'spin': attr ns %g is not a whole number of nanoseconds "
                          "from 0 to 10e9",
                          ns);
  }
  return pw_cpu__check_layouts(program, mesh, true);
}

static pw_status_t pw_cpu_run_fill(const pw_cpu_kernel_call_t* call) {
  const double value = pw_cpu_program_number_attr(call->program, "value", 0.0);
  const pw_cpu_output_shard_t* y = &call->outputs[0];
  const size_t n = pw_cpu__elements(&y->shape);
  const float narrow = (float)value; /* the narrow floats round via f32 */
  switch (y->dtype) {
#define PW_CPU_FILL(T, V)                                   \
  do {                                                      \
    T* out = y->data;                                       \
    const T v = (V);                                        \
    for (size_t i = 0; i < n; ++i) out[i] = v;              \
  } while (0)
#define PW_CPU_FILL_INT(DTYPE, T, U) \
  case DTYPE: PW_CPU_FILL(T, (T)value); break;
    case PW_DTYPE_F32: PW_CPU_FILL(float, (float)value); break;
    case PW_DTYPE_F64: PW_CPU_FILL(double, value); break;
    case PW_DTYPE_C64: PW_CPU_FILL(float complex, (float)value); break;
    case PW_DTYPE_BOOL: PW_CPU_FILL(uint8_t, value != 0); break;
    case PW_DTYPE_F16: PW_CPU_FILL(uint16_t, pw_f32_to_f16(narrow)); break;
    case PW_DTYPE_BF16: PW_CPU_FILL(uint16_t, pw_f32_to_bf16(narrow)); break;
    case PW_DTYPE_F8E4M3FN: PW_CPU_FILL(uint8_t, pw_f32_to_f8e4m3fn(narrow)); break;
    case PW_DTYPE_F8E5M2: PW_CPU_FILL(uint8_t, pw_f32_to_f8e5m2(narrow)); break;
    PW_CPU__FOR_EACH_INT(PW_CPU_FILL_INT)
    default: return pw_cpu_ew_dtype_error("fill", y->dtype);
#undef PW_CPU_FILL_INT
#undef PW_CPU_FILL
  }
  return NULL;
}

/* Integer dtypes take an integral value in their range (64-bit ones: the
 * doubles that convert exactly, |v| <= 2^53), bool 0 or 1. */
static pw_status_t pw_cpu_check_fill(void* user, const pw_cpu_program_t* program,
                                     const pw_mesh_shape_t* mesh) {
  PW_RETURN_IF_ERROR(pw_cpu__check_layouts(program, mesh, false));
  const int64_t exact = INT64_C(1) << 53;
  int64_t lo = 0;
  int64_t hi = 0;
  switch (program->outputs[0].dtype) {
    case PW_DTYPE_I8: lo = INT8_MIN, hi = INT8_MAX; break;
    case PW_DTYPE_I16: lo = INT16_MIN, hi = INT16_MAX; break;
    case PW_DTYPE_I32: lo = INT32_MIN, hi = INT32_MAX; break;
    case PW_DTYPE_I64: lo = -exact, hi = exact; break;
    case PW_DTYPE_U8: hi = UINT8_MAX; break;
    case PW_DTYPE_U16: hi = UINT16_MAX; break;
    case PW_DTYPE_U32: hi = UINT32_MAX; break;
    case PW_DTYPE_U64: hi = exact; break;
    case PW_DTYPE_BOOL: hi = 1; break;
    default: return NULL;
  }
  int64_t value = 0;
  return pw_cpu__int_attr(program, "value", lo, hi, 0, &value);
}

/* bias_add(x[..., N], b[N]) -> y: b replicated, x not split along its last
 * axis, y aligned with x. */
static pw_status_t pw_cpu_run_bias_add(const pw_cpu_kernel_call_t* call) {
  const size_t n = pw_cpu__elements(&call->outputs[0].shape);
  const size_t width = (size_t)call->inputs[1].shape.dims[0];
  const pw_dtype_t dtype = call->outputs[0].dtype;
  if (dtype == PW_DTYPE_F32) {
    const float* x = call->inputs[0].data;
    const float* bias = call->inputs[1].data;
    float* y = call->outputs[0].data;
    for (size_t i = 0; i < n; ++i) y[i] = x[i] + bias[i % width];
  } else if (dtype == PW_DTYPE_F64) {
    const double* x = call->inputs[0].data;
    const double* bias = call->inputs[1].data;
    double* y = call->outputs[0].data;
    for (size_t i = 0; i < n; ++i) y[i] = x[i] + bias[i % width];
  } else if (pw_cpu__is_half(dtype)) {
    for (size_t i = 0; i < n; ++i) {
      float sum = pw_cpu__half_load(dtype, call->inputs[0].data, i) +
                  pw_cpu__half_load(dtype, call->inputs[1].data, i % width);
      pw_cpu__half_store(dtype, call->outputs[0].data, i, sum);
    }
  } else {
    return pw_cpu_ew_dtype_error("bias_add", dtype);
  }
  return NULL;
}

static pw_status_t pw_cpu_check_bias_add(void* user, const pw_cpu_program_t* program,
                                         const pw_mesh_shape_t* mesh) {
  const pw_backend_param_t* x = &program->inputs[0];
  const pw_backend_param_t* b = &program->inputs[1];
  const pw_backend_param_t* y = &program->outputs[0];
  if (x->shape.rank < 1 || b->shape.dims[0] != x->shape.dims[x->shape.rank - 1]) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "input 1 (the bias) must be a vector as long as the last "
                          "dimension of input 0");
  }
  pw_sharding_t bn;
  pw_sharding_t xn;
  PW_RETURN_IF_ERROR_CTX(pw_sharding_normalize(&b->sharding, &b->shape, mesh, &bn), "input 1");
  PW_RETURN_IF_ERROR_CTX(pw_sharding_normalize(&x->sharding, &x->shape, mesh, &xn), "input 0");
  if (bn.tile_count != 0 || bn.unreduced_axes != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "input 1 (the bias) must be replicated");
  }
  for (uint32_t i = 0; i < xn.tile_count; ++i) {
    if (xn.tiles[i].tensor_axis == x->shape.rank - 1) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "input 0 must not be split along its last axis");
    }
  }
  if (xn.unreduced_axes != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "input 0 holds partial sums (unreduced); bias_add needs "
                          "them reduced (all_reduce_sum first)");
  }
  if (!pw_shape_equal(&x->shape, &y->shape) ||
      !pw_sharding_equivalent(&x->sharding, &y->sharding, &x->shape, mesh)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "output 0 must have the shape and sharding of input 0");
  }
  return NULL;
}

static pw_status_t pw_cpu_check_aligned_hook(void* user,
                                             const pw_cpu_program_t* program,
                                             const pw_mesh_shape_t* mesh) {
  return pw_cpu__check_layouts(program, mesh, false);
}

static pw_status_t pw_cpu_check_linear_hook(void* user,
                                            const pw_cpu_program_t* program,
                                            const pw_mesh_shape_t* mesh) {
  return pw_cpu__check_layouts(program, mesh, true);
}

/* add_scalar: y_i = x_i + value for each of the n pairs (variadic). */
static pw_status_t pw_cpu_run_add_scalar(const pw_cpu_kernel_call_t* call) {
  const double value = pw_cpu_program_number_attr(call->program, "value", 0.0);
  for (uint32_t k = 0; k < call->output_count; ++k) {
    const pw_cpu_input_shard_t* x = &call->inputs[k];
    const pw_cpu_output_shard_t* y = &call->outputs[k];
    const size_t n = pw_cpu__elements(&y->shape);
    switch (y->dtype) {
      case PW_DTYPE_F32:
        for (size_t i = 0; i < n; ++i) {
          ((float*)y->data)[i] = ((const float*)x->data)[i] + (float)value;
        }
        break;
      case PW_DTYPE_F64:
        for (size_t i = 0; i < n; ++i) {
          ((double*)y->data)[i] = ((const double*)x->data)[i] + value;
        }
        break;
      case PW_DTYPE_F16:
      case PW_DTYPE_BF16:
        for (size_t i = 0; i < n; ++i) {
          pw_cpu__half_store(y->dtype, y->data, i,
                             pw_cpu__half_load(y->dtype, x->data, i) + (float)value);
        }
        break;
      default: return pw_cpu_ew_dtype_error("add_scalar", y->dtype);
    }
  }
  return NULL;
}

/*---------------------------------------------------------------------------
 * Signatures
 *-------------------------------------------------------------------------*/

/* float and half: every float kernel; add, sub and mul take more. */
#define PW_CPU_EW_FLOATS (PW_CPU_DTYPES_FLOAT | PW_CPU_DTYPES_HALF)
#define PW_CPU_ARITH (PW_CPU_EW_FLOATS | PW_CPU_DTYPES_INTEGER | PW_CPU_DTYPE_BIT(PW_DTYPE_C64))

static const pw_cpu_param_spec_t pw_cpu_x[] = {{"x", PW_CPU_EW_FLOATS, -1}};
static const pw_cpu_param_spec_t pw_cpu_y[] = {{"y", PW_CPU_EW_FLOATS, -1}};
static const pw_cpu_param_spec_t pw_cpu_arith_ab[] = {{"a", PW_CPU_ARITH, -1},
                                                      {"b", PW_CPU_ARITH, -1}};
static const pw_cpu_param_spec_t pw_cpu_arith_y[] = {{"y", PW_CPU_ARITH, -1}};
static const pw_cpu_param_spec_t pw_cpu_xy[] = {{"x", PW_CPU_EW_FLOATS, -1},
                                                {"y", PW_CPU_EW_FLOATS, -1}};
static const pw_cpu_param_spec_t pw_cpu_wg[] = {{"w", PW_CPU_EW_FLOATS, -1},
                                                {"g", PW_CPU_EW_FLOATS, -1}};
static const pw_cpu_param_spec_t pw_cpu_xdy[] = {{"x", PW_CPU_EW_FLOATS, -1},
                                                 {"dy", PW_CPU_EW_FLOATS, -1}};
static const pw_cpu_param_spec_t pw_cpu_zy[] = {{"logits", PW_CPU_EW_FLOATS, -1},
                                                {"labels", PW_CPU_EW_FLOATS, -1}};
static const pw_cpu_param_spec_t pw_cpu_xbias[] = {{"x", PW_CPU_EW_FLOATS, -1},
                                                   {"bias", PW_CPU_EW_FLOATS, 1}};
static const pw_cpu_param_spec_t pw_cpu_any_x[] = {{"x", PW_CPU_DTYPES_ANY, -1}};
static const pw_cpu_param_spec_t pw_cpu_any_y[] = {{"y", PW_CPU_DTYPES_ANY, -1}};

static const pw_cpu_attr_spec_t pw_cpu_alpha[] = {{"alpha", PW_CPU_ATTR_NUMBER, true}};
static const pw_cpu_attr_spec_t pw_cpu_lr[] = {{"lr", PW_CPU_ATTR_NUMBER, true}};
static const pw_cpu_attr_spec_t pw_cpu_scale[] = {{"scale", PW_CPU_ATTR_NUMBER, false}};
static const pw_cpu_attr_spec_t pw_cpu_ns[] = {{"ns", PW_CPU_ATTR_NUMBER, true}};
static const pw_cpu_attr_spec_t pw_cpu_value[] = {{"value", PW_CPU_ATTR_NUMBER, true}};

#define PW_CPU_KERNEL(NAME, INS, NIN, OUTS, ATTRS, NATTR, CHECK, RUN)         \
  {{.struct_size = sizeof(pw_cpu_kernel_def_t), .name = NAME,                \
    .input_count = NIN, .inputs = INS, .output_count = 1, .outputs = OUTS,   \
    .attr_count = NATTR, .attrs = ATTRS, .flags = PW_CPU_KERNEL_SAME_DTYPE,  \
    .check = CHECK, .run = RUN},                                             \
   PW_CPU__NOT_COLLECTIVE}

#define PW_CPU_EW_KERNEL(NAME, INS, NIN, ATTRS, NATTR) \
  PW_CPU_KERNEL(#NAME, INS, NIN, pw_cpu_y, ATTRS, NATTR, \
                pw_cpu_check_aligned_hook, pw_cpu_run_##NAME)
#define PW_CPU_EW_LINEAR(NAME, INS, NIN, ATTRS, NATTR) \
  PW_CPU_KERNEL(#NAME, INS, NIN, pw_cpu_y, ATTRS, NATTR, \
                pw_cpu_check_linear_hook, pw_cpu_run_##NAME)

const pw_cpu__builtin_t pw_cpu__elementwise_kernels[] = {
    PW_CPU_KERNEL("copy", pw_cpu_any_x, 1, pw_cpu_any_y, NULL, 0,
                  pw_cpu_check_linear_hook, pw_cpu_run_copy),
    PW_CPU_KERNEL("spin", pw_cpu_any_x, 1, pw_cpu_any_y, pw_cpu_ns, 1, pw_cpu_check_spin,
                  pw_cpu_run_spin),
    PW_CPU_KERNEL("fill", NULL, 0, pw_cpu_any_y, pw_cpu_value, 1, pw_cpu_check_fill,
                  pw_cpu_run_fill),
    PW_CPU_KERNEL("add", pw_cpu_arith_ab, 2, pw_cpu_arith_y, NULL, 0,
                  pw_cpu_check_linear_hook, pw_cpu_run_add),
    PW_CPU_KERNEL("sub", pw_cpu_arith_ab, 2, pw_cpu_arith_y, NULL, 0,
                  pw_cpu_check_linear_hook, pw_cpu_run_sub),
    PW_CPU_KERNEL("mul", pw_cpu_arith_ab, 2, pw_cpu_arith_y, NULL, 0,
                  pw_cpu_check_aligned_hook, pw_cpu_run_mul),
    PW_CPU_EW_LINEAR(scale, pw_cpu_x, 1, pw_cpu_alpha, 1),
    PW_CPU_EW_LINEAR(axpy, pw_cpu_xy, 2, pw_cpu_alpha, 1),
    PW_CPU_EW_LINEAR(sgd_update, pw_cpu_wg, 2, pw_cpu_lr, 1),
    PW_CPU_EW_KERNEL(relu, pw_cpu_x, 1, NULL, 0),
    PW_CPU_EW_KERNEL(relu_grad, pw_cpu_xdy, 2, NULL, 0),
    PW_CPU_EW_KERNEL(sigmoid, pw_cpu_x, 1, NULL, 0),
    PW_CPU_EW_KERNEL(logistic_loss, pw_cpu_zy, 2, NULL, 0),
    PW_CPU_EW_KERNEL(logistic_loss_grad, pw_cpu_zy, 2, pw_cpu_scale, 1),
    PW_CPU_KERNEL("bias_add", pw_cpu_xbias, 2, pw_cpu_y, NULL, 0,
                  pw_cpu_check_bias_add, pw_cpu_run_bias_add),
    {{.struct_size = sizeof(pw_cpu_kernel_def_t), .name = "add_scalar", .input_count = 1,
      .inputs = pw_cpu_x, .output_count = 1, .outputs = pw_cpu_y, .attr_count = 1,
      .attrs = pw_cpu_value, .flags = PW_CPU_KERNEL_SAME_DTYPE | PW_CPU_KERNEL_VARIADIC,
      .check = pw_cpu_check_aligned_hook, .run = pw_cpu_run_add_scalar},
     PW_CPU__NOT_COLLECTIVE},
};
const size_t pw_cpu__elementwise_kernel_count =
    sizeof(pw_cpu__elementwise_kernels) / sizeof(pw_cpu__elementwise_kernels[0]);
