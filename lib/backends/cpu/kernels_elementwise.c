/* Built-in elementwise kernels: copy, fill, add, sub, mul, scale, axpy,
 * sgd_update, relu, relu_grad, sigmoid, logistic_loss, logistic_loss_grad,
 * bias_add.
 *
 * Elementwise kernels need no communication: every parameter has the same
 * global shape and sharding ("aligned"), so each device applies the
 * function to its own block. f32 kernels compute in float (expf, log1pf
 * through <tgmath.h>), f64 in double. */
#include <string.h>
#include <tgmath.h>

#include "backends/cpu/cpu_internal.h"

/*---------------------------------------------------------------------------
 * Float elementwise kernels, generated for f32 and f64
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

#define PW_CPU_DEFINE_EW(NAME, ATTR, FALLBACK, EXPR)                       \
  static pw_status_t pw_cpu_run_##NAME(const pw_cpu_kernel_call_t* call) { \
    const double scalar =                                                  \
        pw_cpu_program_number_attr(call->program, ATTR, FALLBACK);         \
    const size_t n = pw_cpu__elements(&call->outputs[0].shape);            \
    if (call->outputs[0].dtype == PW_DTYPE_F32) {                          \
      PW_CPU_EW_BODY(float, EXPR);                                         \
    } else {                                                               \
      PW_CPU_EW_BODY(double, EXPR);                                        \
    }                                                                      \
    return NULL;                                                           \
  }

PW_CPU_DEFINE_EW(add, "", 0.0, a + b)
PW_CPU_DEFINE_EW(sub, "", 0.0, a - b)
PW_CPU_DEFINE_EW(mul, "", 0.0, a * b)
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
 * copy, fill, bias_add
 *-------------------------------------------------------------------------*/

static pw_status_t pw_cpu_run_copy(const pw_cpu_kernel_call_t* call) {
  memcpy(call->outputs[0].data, call->inputs[0].data, call->outputs[0].size);
  return NULL;
}

static pw_status_t pw_cpu_run_fill(const pw_cpu_kernel_call_t* call) {
  const double value = pw_cpu_program_number_attr(call->program, "value", 0.0);
  const pw_cpu_output_shard_t* y = &call->outputs[0];
  const size_t n = pw_cpu__elements(&y->shape);
  switch (y->dtype) {
#define PW_CPU_FILL(T)                                      \
  do {                                                      \
    T* out = y->data;                                       \
    const T v = (T)value;                                   \
    for (size_t i = 0; i < n; ++i) out[i] = v;              \
  } while (0)
    case PW_DTYPE_F32: PW_CPU_FILL(float); break;
    case PW_DTYPE_F64: PW_CPU_FILL(double); break;
    case PW_DTYPE_I32: PW_CPU_FILL(int32_t); break;
    case PW_DTYPE_I64: PW_CPU_FILL(int64_t); break;
    case PW_DTYPE_U8: PW_CPU_FILL(uint8_t); break;
    default:
      return pw_status_make(PW_STATUS_INTERNAL, "fill: unexpected dtype %d",
                            (int)y->dtype);
#undef PW_CPU_FILL
  }
  return NULL;
}

static pw_status_t pw_cpu_check_fill(void* user, const pw_cpu_program_t* program,
                                     const pw_mesh_shape_t* mesh) {
  pw_dtype_t dtype = program->outputs[0].dtype;
  int64_t value = 0;
  switch (dtype) {
    case PW_DTYPE_I32:
      return pw_cpu__int_attr(program, "value", INT32_MIN, INT32_MAX, 0, &value);
    case PW_DTYPE_I64: /* the doubles that convert to int64 exactly */
      return pw_cpu__int_attr(program, "value", -(INT64_C(1) << 53),
                              INT64_C(1) << 53, 0, &value);
    case PW_DTYPE_U8:
      return pw_cpu__int_attr(program, "value", 0, 255, 0, &value);
    default:
      return NULL;
  }
}

/* bias_add(x[..., N], b[N]) -> y: b replicated, x not split along its last
 * axis, y aligned with x. */
static pw_status_t pw_cpu_run_bias_add(const pw_cpu_kernel_call_t* call) {
  const size_t n = pw_cpu__elements(&call->outputs[0].shape);
  const size_t width = (size_t)call->inputs[1].shape.dims[0];
  if (call->outputs[0].dtype == PW_DTYPE_F32) {
    const float* x = call->inputs[0].data;
    const float* bias = call->inputs[1].data;
    float* y = call->outputs[0].data;
    for (size_t i = 0; i < n; ++i) y[i] = x[i] + bias[i % width];
  } else {
    const double* x = call->inputs[0].data;
    const double* bias = call->inputs[1].data;
    double* y = call->outputs[0].data;
    for (size_t i = 0; i < n; ++i) y[i] = x[i] + bias[i % width];
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
  if (b->sharding.kind != PW_SHARDING_REPLICATED) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "input 1 (the bias) must be replicated");
  }
  if (x->sharding.kind == PW_SHARDING_SPLIT &&
      x->sharding.tensor_axis == x->shape.rank - 1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "input 0 must not be split along its last axis");
  }
  if (!pw_shape_equal(&x->shape, &y->shape) ||
      !pw_sharding_equal(&x->sharding, &y->sharding)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "output 0 must have the shape and sharding of input 0");
  }
  return NULL;
}

static pw_status_t pw_cpu_check_aligned_hook(void* user,
                                             const pw_cpu_program_t* program,
                                             const pw_mesh_shape_t* mesh) {
  return pw_cpu__check_aligned(program);
}

/*---------------------------------------------------------------------------
 * Signatures
 *-------------------------------------------------------------------------*/

static const pw_cpu_param_spec_t pw_cpu_x[] = {{"x", PW_CPU_DTYPES_FLOAT, -1}};
static const pw_cpu_param_spec_t pw_cpu_y[] = {{"y", PW_CPU_DTYPES_FLOAT, -1}};
static const pw_cpu_param_spec_t pw_cpu_ab[] = {{"a", PW_CPU_DTYPES_FLOAT, -1},
                                                {"b", PW_CPU_DTYPES_FLOAT, -1}};
static const pw_cpu_param_spec_t pw_cpu_xy[] = {{"x", PW_CPU_DTYPES_FLOAT, -1},
                                                {"y", PW_CPU_DTYPES_FLOAT, -1}};
static const pw_cpu_param_spec_t pw_cpu_wg[] = {{"w", PW_CPU_DTYPES_FLOAT, -1},
                                                {"g", PW_CPU_DTYPES_FLOAT, -1}};
static const pw_cpu_param_spec_t pw_cpu_xdy[] = {{"x", PW_CPU_DTYPES_FLOAT, -1},
                                                 {"dy", PW_CPU_DTYPES_FLOAT, -1}};
static const pw_cpu_param_spec_t pw_cpu_zy[] = {{"logits", PW_CPU_DTYPES_FLOAT, -1},
                                                {"labels", PW_CPU_DTYPES_FLOAT, -1}};
static const pw_cpu_param_spec_t pw_cpu_xbias[] = {{"x", PW_CPU_DTYPES_FLOAT, -1},
                                                   {"bias", PW_CPU_DTYPES_FLOAT, 1}};
static const pw_cpu_param_spec_t pw_cpu_any_x[] = {{"x", PW_CPU_DTYPES_ANY, -1}};
static const pw_cpu_param_spec_t pw_cpu_any_y[] = {{"y", PW_CPU_DTYPES_ANY, -1}};

static const pw_cpu_attr_spec_t pw_cpu_alpha[] = {{"alpha", PW_CPU_ATTR_NUMBER, true}};
static const pw_cpu_attr_spec_t pw_cpu_lr[] = {{"lr", PW_CPU_ATTR_NUMBER, true}};
static const pw_cpu_attr_spec_t pw_cpu_scale[] = {{"scale", PW_CPU_ATTR_NUMBER, false}};
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

const pw_cpu__builtin_t pw_cpu__elementwise_kernels[] = {
    PW_CPU_KERNEL("copy", pw_cpu_any_x, 1, pw_cpu_any_y, NULL, 0,
                  pw_cpu_check_aligned_hook, pw_cpu_run_copy),
    PW_CPU_KERNEL("fill", NULL, 0, pw_cpu_any_y, pw_cpu_value, 1, pw_cpu_check_fill,
                  pw_cpu_run_fill),
    PW_CPU_EW_KERNEL(add, pw_cpu_ab, 2, NULL, 0),
    PW_CPU_EW_KERNEL(sub, pw_cpu_ab, 2, NULL, 0),
    PW_CPU_EW_KERNEL(mul, pw_cpu_ab, 2, NULL, 0),
    PW_CPU_EW_KERNEL(scale, pw_cpu_x, 1, pw_cpu_alpha, 1),
    PW_CPU_EW_KERNEL(axpy, pw_cpu_xy, 2, pw_cpu_alpha, 1),
    PW_CPU_EW_KERNEL(sgd_update, pw_cpu_wg, 2, pw_cpu_lr, 1),
    PW_CPU_EW_KERNEL(relu, pw_cpu_x, 1, NULL, 0),
    PW_CPU_EW_KERNEL(relu_grad, pw_cpu_xdy, 2, NULL, 0),
    PW_CPU_EW_KERNEL(sigmoid, pw_cpu_x, 1, NULL, 0),
    PW_CPU_EW_KERNEL(logistic_loss, pw_cpu_zy, 2, NULL, 0),
    PW_CPU_EW_KERNEL(logistic_loss_grad, pw_cpu_zy, 2, pw_cpu_scale, 1),
    PW_CPU_KERNEL("bias_add", pw_cpu_xbias, 2, pw_cpu_y, NULL, 0,
                  pw_cpu_check_bias_add, pw_cpu_run_bias_add),
};
const size_t pw_cpu__elementwise_kernel_count =
    sizeof(pw_cpu__elementwise_kernels) / sizeof(pw_cpu__elementwise_kernels[0]);
