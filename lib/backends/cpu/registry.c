/* The kernel registry and the checks of a program against a kernel's
 * signature.
 *
 * Kernels are copied into one allocation each and kept on a list guarded by
 * a mutex; they are never removed before the backend goes, so a loaded
 * executable keeps a plain pointer to its kernel. Lookups happen at
 * compile/load time only, never per launch. */
#include <stdalign.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"

/* Every valid dtype's bit (1 .. PW_DTYPE_COUNT - 1). */
#define PW_CPU_VALID_DTYPES (((UINT32_C(1) << PW_DTYPE_COUNT) - 1) & ~UINT32_C(1))
_Static_assert(PW_DTYPE_COUNT <= 32, "PW_CPU_DTYPE_BIT masks hold 32 dtypes");

uint32_t pw_cpu__mesh_axis_size(const pw_mesh_shape_t* mesh, uint32_t axis) {
  if (axis == PW_MESH_AXIS_ALL) return pw_mesh_shape_device_count(mesh);
  return axis < mesh->rank ? mesh->dims[axis] : 0;
}

/*---------------------------------------------------------------------------
 * Registration
 *-------------------------------------------------------------------------*/

static pw_status_t pw_cpu_copy_specs(const char* kernel, const char* role,
                                     uint32_t count,
                                     const pw_cpu_param_spec_t* specs,
                                     pw_cpu_param_spec_t* out_specs,
                                     char (*out_names)[PW_CPU__PARAM_NAME_MAX]) {
  if (count > 0 && specs == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "kernel '%s': %u %ss but no %s specs", kernel, count,
                          role, role);
  }
  for (uint32_t i = 0; i < count; ++i) {
    const pw_cpu_param_spec_t* spec = &specs[i];
    if (spec->rank < -1 || spec->rank > PW_MAX_RANK) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "kernel '%s': %s %u has rank %d (expected -1..%d)",
                            kernel, role, i, (int)spec->rank, PW_MAX_RANK);
    }
    if ((spec->dtypes & ~PW_CPU_VALID_DTYPES) != 0) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "kernel '%s': %s %u has dtype mask 0x%x with "
                            "unknown dtypes",
                            kernel, role, i, spec->dtypes);
    }
    out_specs[i] = *spec;
    out_specs[i].name = NULL;
    if (spec->name != NULL) {
      size_t length = strlen(spec->name);
      if (length >= PW_CPU__PARAM_NAME_MAX) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "kernel '%s': %s %u name is longer than %d bytes",
                              kernel, role, i, PW_CPU__PARAM_NAME_MAX - 1);
      }
      memcpy(out_names[i], spec->name, length + 1);
      out_specs[i].name = out_names[i];
    }
  }
  return NULL;
}

static pw_status_t pw_cpu_fill_kernel(const pw_cpu_kernel_def_t* def,
                                      pw_cpu__collective_t collective,
                                      pw_cpu__kernel_t* kernel) {
  if (def->name == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "kernel definition has no name");
  }
  size_t length = strlen(def->name);
  if (!pw_cpu__is_name(def->name, length) || length >= PW_CPU_NAME_MAX) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "invalid kernel name '%.64s' (expected "
                          "[A-Za-z_][A-Za-z0-9_.]*, < %d bytes)",
                          def->name, PW_CPU_NAME_MAX);
  }
  const char* name = def->name;
  if (def->input_count > PW_BACKEND_MAX_PARAMS || def->output_count == 0 ||
      def->output_count > PW_BACKEND_MAX_PARAMS || def->attr_count > PW_CPU_MAX_ATTRS) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "kernel '%s': %u inputs, %u outputs, %u attributes "
                          "(allowed: 0..%d, 1..%d, 0..%d)",
                          name, def->input_count, def->output_count,
                          def->attr_count, PW_BACKEND_MAX_PARAMS,
                          PW_BACKEND_MAX_PARAMS, PW_CPU_MAX_ATTRS);
  }
  if ((def->flags & PW_CPU_KERNEL_VARIADIC) && def->input_count == 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "kernel '%s': a variadic kernel needs at least one input", name);
  }
  if (def->run == NULL && collective == PW_CPU__NOT_COLLECTIVE) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "kernel '%s' has no run function", name);
  }
  if ((def->flags & ~(PW_CPU_KERNEL_SAME_DTYPE | PW_CPU_KERNEL_OPEN_ATTRS |
                      PW_CPU_KERNEL_VARIADIC)) != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "kernel '%s': unknown flags 0x%x", name, def->flags);
  }
  memcpy(kernel->name, name, length + 1);
  kernel->input_count = def->input_count;
  kernel->output_count = def->output_count;
  kernel->attr_count = def->attr_count;
  kernel->flags = def->flags;
  PW_RETURN_IF_ERROR(pw_cpu_copy_specs(name, "input", def->input_count, def->inputs,
                                       kernel->inputs, kernel->input_names));
  PW_RETURN_IF_ERROR(pw_cpu_copy_specs(name, "output", def->output_count,
                                       def->outputs, kernel->outputs,
                                       kernel->output_names));
  if (def->attr_count > 0 && def->attrs == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "kernel '%s': %u attributes but no attribute specs",
                          name, def->attr_count);
  }
  for (uint32_t i = 0; i < def->attr_count; ++i) {
    const pw_cpu_attr_spec_t* spec = &def->attrs[i];
    size_t n = spec->name ? strlen(spec->name) : 0;
    if (!pw_cpu__is_name(spec->name ? spec->name : "", n) || n >= PW_CPU_ATTR_NAME_MAX) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "kernel '%s': attribute spec %u has an invalid name",
                            name, i);
    }
    if (spec->kind != PW_CPU_ATTR_NUMBER && spec->kind != PW_CPU_ATTR_STRING) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "kernel '%s': attribute '%s' has unknown kind %d",
                            name, spec->name, (int)spec->kind);
    }
    for (uint32_t j = 0; j < i; ++j) {
      if (strcmp(kernel->attr_names[j], spec->name) == 0) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "kernel '%s': attribute '%s' listed twice", name,
                              spec->name);
      }
    }
    memcpy(kernel->attr_names[i], spec->name, n + 1);
    kernel->attrs[i] = *spec;
    kernel->attrs[i].name = kernel->attr_names[i];
  }
  kernel->check = def->check;
  kernel->run = def->run;
  kernel->user = def->user;
  kernel->collective = collective;
  return NULL;
}

pw_status_t pw_cpu__kernel_register(pw_cpu__backend_t* backend,
                                    const pw_cpu_kernel_def_t* def,
                                    pw_cpu__collective_t collective) {
  if (def == NULL || def->struct_size < PW_CPU_KERNEL_DEF_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "kernel definition is NULL or its struct_size %zu is "
                          "below v1 (%zu)",
                          def ? def->struct_size : (size_t)0,
                          (size_t)PW_CPU_KERNEL_DEF_SIZE_V1);
  }
  void* memory = NULL;
  PW_RETURN_IF_ERROR_CTX(
      pw_allocator_calloc(backend->allocator, sizeof(pw_cpu__kernel_t),
                          alignof(pw_cpu__kernel_t), &memory),
      "registering kernel '%.64s'", def->name ? def->name : "(null)");
  pw_cpu__kernel_t* kernel = memory;
  pw_status_t status = pw_cpu_fill_kernel(def, collective, kernel);
  if (status == NULL) {
    pthread_mutex_lock(&backend->kernels_mutex);
    for (pw_cpu__kernel_t* k = backend->kernels; k != NULL; k = k->next) {
      if (strcmp(k->name, kernel->name) == 0) {
        status = pw_status_make(PW_STATUS_ALREADY_EXISTS,
                                "a kernel named '%s' is already registered",
                                kernel->name);
        break;
      }
    }
    if (status == NULL) {
      kernel->next = backend->kernels;
      backend->kernels = kernel;
    }
    pthread_mutex_unlock(&backend->kernels_mutex);
  }
  if (status != NULL) {
    pw_allocator_free(backend->allocator, kernel, sizeof(*kernel));
  }
  return status;
}

pw_status_t pw_cpu_backend_register_kernel(pw_backend_t backend,
                                           const pw_cpu_kernel_def_t* def) {
  pw_cpu__backend_t* cpu = pw_cpu__from_backend(backend);
  if (cpu == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cpu_backend_register_kernel: not a cpu backend");
  }
  return pw_cpu__kernel_register(cpu, def, PW_CPU__NOT_COLLECTIVE);
}

const pw_cpu__kernel_t* pw_cpu__kernel_find(pw_cpu__backend_t* backend,
                                            const char* name) {
  pthread_mutex_lock(&backend->kernels_mutex);
  const pw_cpu__kernel_t* found = NULL;
  for (pw_cpu__kernel_t* k = backend->kernels; k != NULL; k = k->next) {
    if (strcmp(k->name, name) == 0) {
      found = k;
      break;
    }
  }
  pthread_mutex_unlock(&backend->kernels_mutex);
  return found;
}

pw_status_t pw_cpu__register_builtins(pw_cpu__backend_t* backend) {
  const struct {
    const pw_cpu__builtin_t* table;
    size_t count;
  } tables[] = {
      {pw_cpu__elementwise_kernels, pw_cpu__elementwise_kernel_count},
      {pw_cpu__linalg_kernels, pw_cpu__linalg_kernel_count},
      {pw_cpu__collective_kernels, pw_cpu__collective_kernel_count},
  };
  for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); ++t) {
    for (size_t i = 0; i < tables[t].count; ++i) {
      const pw_cpu__builtin_t* builtin = &tables[t].table[i];
      PW_RETURN_IF_ERROR(
          pw_cpu__kernel_register(backend, &builtin->def, builtin->collective));
    }
  }
  return NULL;
}

void pw_cpu__kernels_free(pw_cpu__backend_t* backend) {
  pw_cpu__kernel_t* k = backend->kernels;
  while (k != NULL) {
    pw_cpu__kernel_t* next = k->next;
    pw_allocator_free(backend->allocator, k, sizeof(*k));
    k = next;
  }
  backend->kernels = NULL;
}

/*---------------------------------------------------------------------------
 * Checking a program against a signature
 *-------------------------------------------------------------------------*/

static void pw_cpu_dtype_list(uint32_t mask, char* buffer, size_t capacity) {
  size_t n = 0;
  buffer[0] = '\0';
  for (int d = 1; d < PW_DTYPE_COUNT; ++d) {
    if (mask != PW_CPU_DTYPES_ANY && (mask & PW_CPU_DTYPE_BIT(d)) == 0) continue;
    int w = snprintf(buffer + n, capacity - n, "%s%s", n ? ", " : "",
                     pw_dtype_name((pw_dtype_t)d));
    if (w < 0 || (size_t)w >= capacity - n) break;
    n += (size_t)w;
  }
}

/* "line 3: " or "" */
static void pw_cpu_line_prefix(const pw_cpu__lines_t* lines, uint32_t line,
                               char* buffer, size_t capacity) {
  if (lines != NULL && line != 0) {
    snprintf(buffer, capacity, "line %u: ", line);
  } else {
    buffer[0] = '\0';
  }
}

static pw_status_t pw_cpu_validate_param(const pw_cpu__kernel_t* kernel,
                                         const char* role, uint32_t index,
                                         const pw_cpu_param_spec_t* spec,
                                         const pw_backend_param_t* param,
                                         const pw_backend_param_t* first,
                                         const pw_mesh_shape_t* mesh,
                                         const char* where) {
  char what[400];
  pw_cpu__param_text(role, index, spec->name, param, what, sizeof(what));
  if (pw_dtype_size(param->dtype) == 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s%s: invalid dtype %d",
                          where, what, (int)param->dtype);
  }
  if (spec->dtypes != PW_CPU_DTYPES_ANY &&
      (spec->dtypes & PW_CPU_DTYPE_BIT(param->dtype)) == 0) {
    char allowed[256];
    pw_cpu_dtype_list(spec->dtypes, allowed, sizeof(allowed));
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s%s: kernel '%s' does not take dtype %s here (it takes %s)",
                          where, what, kernel->name, pw_dtype_name(param->dtype),
                          allowed);
  }
  if ((kernel->flags & PW_CPU_KERNEL_SAME_DTYPE) && param->dtype != first->dtype) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s%s: kernel '%s' needs every parameter to have one "
                          "dtype (the first is %s)",
                          where, what, kernel->name, pw_dtype_name(first->dtype));
  }
  if (spec->rank >= 0 && param->shape.rank != (uint32_t)spec->rank) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s%s: kernel '%s' takes rank %d here, got rank %u",
                          where, what, kernel->name, (int)spec->rank,
                          param->shape.rank);
  }
  /* Shape, byte size (addressable: at most PW_ARRAY_MAX_BYTES) and
   * sharding. */
  size_t bytes = 0;
  PW_RETURN_IF_ERROR_CTX(pw_shape_byte_size(param->dtype, &param->shape, &bytes), "%s%s",
                         where, what);
  PW_RETURN_IF_ERROR_CTX(pw_sharding_check(&param->sharding, &param->shape, mesh),
                         "%s%s", where, what);
  return NULL;
}

pw_status_t pw_cpu__program_validate(const pw_cpu__kernel_t* kernel,
                                     const pw_cpu_program_t* program,
                                     const pw_mesh_shape_t* mesh,
                                     const pw_cpu__lines_t* lines) {
  char where[32];
  pw_cpu_line_prefix(lines, lines ? lines->kernel : 0, where, sizeof(where));
  bool variadic = (kernel->flags & PW_CPU_KERNEL_VARIADIC) != 0;
  if (variadic) {
    uint32_t n = program->input_count / kernel->input_count;
    if (n == 0 || program->input_count != n * kernel->input_count ||
        program->output_count != n * kernel->output_count) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%skernel '%s' takes n x %u inputs and n x %u outputs (n >= 1); "
                            "the program has %u and %u",
                            where, kernel->name, kernel->input_count, kernel->output_count,
                            program->input_count, program->output_count);
    }
  } else if (program->input_count != kernel->input_count ||
             program->output_count != kernel->output_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%skernel '%s' takes %u inputs and %u outputs; the "
                          "program has %u and %u",
                          where, kernel->name, kernel->input_count,
                          kernel->output_count, program->input_count,
                          program->output_count);
  }
  const pw_backend_param_t* first =
      program->input_count ? &program->inputs[0] : &program->outputs[0];
  for (uint32_t i = 0; i < program->input_count; ++i) {
    pw_cpu_line_prefix(lines, lines ? lines->inputs[i] : 0, where, sizeof(where));
    PW_RETURN_IF_ERROR(pw_cpu_validate_param(kernel, "input", i,
                                             &kernel->inputs[i % kernel->input_count],
                                             &program->inputs[i], first, mesh, where));
  }
  for (uint32_t i = 0; i < program->output_count; ++i) {
    pw_cpu_line_prefix(lines, lines ? lines->outputs[i] : 0, where, sizeof(where));
    PW_RETURN_IF_ERROR(pw_cpu_validate_param(kernel, "output", i,
                                             &kernel->outputs[i % kernel->output_count],
                                             &program->outputs[i], first, mesh,
                                             where));
  }
  for (uint32_t i = 0; i < program->attr_count; ++i) {
    const pw_cpu_attr_t* attr = &program->attrs[i];
    pw_cpu_line_prefix(lines, lines ? lines->attrs[i] : 0, where, sizeof(where));
    const pw_cpu_attr_spec_t* spec = NULL;
    for (uint32_t j = 0; j < kernel->attr_count; ++j) {
      if (strcmp(kernel->attrs[j].name, attr->name) == 0) spec = &kernel->attrs[j];
    }
    if (spec == NULL) {
      if (kernel->flags & PW_CPU_KERNEL_OPEN_ATTRS) continue;
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%skernel '%s' has no attribute '%s'", where,
                            kernel->name, attr->name);
    }
    if (spec->kind != attr->kind) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%sattribute '%s' of kernel '%s' must be a %s", where,
                            attr->name, kernel->name,
                            spec->kind == PW_CPU_ATTR_NUMBER ? "number" : "word");
    }
  }
  if (program->over_axes != 0) {
    pw_cpu_line_prefix(lines, lines ? lines->over : 0, where, sizeof(where));
    if (kernel->collective == PW_CPU__NOT_COLLECTIVE) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%skernel '%s' is not a collective: 'over' names the mesh "
                            "axes of a collective",
                            where, kernel->name);
    }
    if (program->over_axes >> mesh->rank != 0) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%sover: mesh axis %u is beyond the %u axes of the mesh",
                            where, 31u - (uint32_t)__builtin_clz(program->over_axes),
                            mesh->rank);
    }
  }
  pw_cpu_line_prefix(lines, lines ? lines->kernel : 0, where, sizeof(where));
  for (uint32_t j = 0; j < kernel->attr_count; ++j) {
    if (kernel->attrs[j].required &&
        pw_cpu_program_find_attr(program, kernel->attrs[j].name) == NULL) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%skernel '%s' requires attribute '%s'", where,
                            kernel->name, kernel->attrs[j].name);
    }
  }
  if (kernel->check != NULL) {
    pw_status_t status = kernel->check(kernel->user, program, mesh);
    if (status != NULL) {
      return pw_status_annotate(status, "%skernel '%s'", where, kernel->name);
    }
  }
  return NULL;
}

/*---------------------------------------------------------------------------
 * Helpers for check hooks
 *-------------------------------------------------------------------------*/

pw_status_t pw_cpu__check_layouts(const pw_cpu_program_t* program, const pw_mesh_shape_t* mesh,
                                  bool linear) {
  const pw_backend_param_t* first =
      program->input_count ? &program->inputs[0] : &program->outputs[0];
  for (int pass = 0; pass < 2; ++pass) {
    uint32_t count = pass == 0 ? program->input_count : program->output_count;
    const pw_backend_param_t* params = pass == 0 ? program->inputs : program->outputs;
    for (uint32_t i = 0; i < count; ++i) {
      const char* role = pass == 0 ? "input" : "output";
      if (!pw_shape_equal(&params[i].shape, &first->shape) ||
          !pw_sharding_equivalent(&params[i].sharding, &first->sharding, &first->shape,
                                  mesh)) {
        char what[400];
        char want[400];
        pw_cpu__param_text(role, i, NULL, &params[i], what, sizeof(what));
        pw_cpu__param_text(program->input_count ? "input" : "output", 0, NULL,
                           first, want, sizeof(want));
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "%s must have the shape and sharding of %s",
                              what, want);
      }
      pw_sharding_t normal;
      PW_RETURN_IF_ERROR_CTX(
          pw_sharding_normalize(&params[i].sharding, &params[i].shape, mesh, &normal),
          "%s %u", role, i);
      if (normal.unreduced_axes != 0 && !linear) {
        char text[160];
        pw_cpu__sharding_text(&params[i].sharding, mesh, text, sizeof(text));
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "%s %u is %s: it holds partial sums, and this kernel is "
                              "not linear; all_reduce_sum it first",
                              role, i, text);
      }
    }
  }
  return NULL;
}

pw_status_t pw_cpu__int_attr(const pw_cpu_program_t* program, const char* name,
                             int64_t lo, int64_t hi, int64_t fallback,
                             int64_t* out_value) {
  *out_value = fallback;
  const pw_cpu_attr_t* attr = pw_cpu_program_find_attr(program, name);
  if (attr == NULL) return NULL;
  double v = attr->number;
  if (attr->kind != PW_CPU_ATTR_NUMBER || !(v >= (double)lo && v <= (double)hi) ||
      v != (double)(int64_t)v) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "attribute '%s' must be an integer in [%lld, %lld]",
                          name, (long long)lo, (long long)hi);
  }
  *out_value = (int64_t)v;
  return NULL;
}
