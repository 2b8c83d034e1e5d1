/* pw_cpu_program_t builders and pw_cpu_program_t -> program text.
 *
 * The text written here parses back to the same program: integers are
 * written in decimal, other finite numbers as hex floats (exact, and free of
 * the locale's decimal point, which printf's %g and %a follow). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"

/*---------------------------------------------------------------------------
 * Text pieces shared with messages
 *-------------------------------------------------------------------------*/

void pw_cpu__sharding_text(const pw_sharding_t* sharding, const pw_mesh_shape_t* mesh,
                           char* buffer, size_t capacity) {
  if (sharding->kind == PW_SHARDING_REPLICATED) {
    snprintf(buffer, capacity, "replicated");
  } else if (sharding->kind == PW_SHARDING_TILED) {
    if (mesh != NULL) {
      pw_sharding_format_named(sharding, mesh, buffer, capacity);
    } else {
      pw_sharding_format(sharding, buffer, capacity);
    }
  } else if (sharding->mesh_axis == PW_MESH_AXIS_ALL) {
    snprintf(buffer, capacity, "split(%u,all)", sharding->tensor_axis);
  } else {
    snprintf(buffer, capacity, "split(%u,%u)", sharding->tensor_axis,
             sharding->mesh_axis);
  }
}

void pw_cpu__param_text(const char* role, uint32_t index, const char* name,
                        const pw_backend_param_t* param, char* buffer,
                        size_t capacity) {
  char shape[256];
  char sharding[128];
  pw_shape_format(param->dtype, &param->shape, shape, sizeof(shape));
  pw_cpu__sharding_text(&param->sharding, NULL, sharding, sizeof(sharding));
  if (name != NULL && name[0] != '\0') {
    snprintf(buffer, capacity, "%s %u '%s' %s %s", role, index, name, shape,
             sharding);
  } else {
    snprintf(buffer, capacity, "%s %u %s %s", role, index, shape, sharding);
  }
}

/* Writes |value| as a number token that parses back to the same bits (NaN
 * payloads aside). |buffer| holds at least 40 bytes. */
static void pw_cpu_number_text(double value, char* buffer, size_t capacity) {
  if (isnan(value)) {
    snprintf(buffer, capacity, "nan");
    return;
  }
  if (isinf(value)) {
    snprintf(buffer, capacity, "%sinf", value < 0 ? "-" : "");
    return;
  }
  if (value == 0.0) {
    snprintf(buffer, capacity, "%s0", signbit(value) ? "-" : "");
    return;
  }
  if (value == trunc(value) && fabs(value) < 9007199254740992.0) {
    snprintf(buffer, capacity, "%lld", (long long)value);
    return;
  }
  int exponent = 0;
  double fraction = frexp(fabs(value), &exponent); /* [0.5, 1) */
  /* 53 significant bits as an integer in [2^52, 2^53): exact, also for
   * subnormals (which have fewer bits). */
  uint64_t bits = (uint64_t)ldexp(fraction, 53);
  uint64_t tail = bits & ((1ull << 52) - 1);
  char hex[16];
  int digits = 13;
  for (int i = 0; i < 13; ++i) {
    hex[i] = "0123456789abcdef"[(tail >> (48 - 4 * i)) & 0xf];
  }
  while (digits > 0 && hex[digits - 1] == '0') --digits;
  hex[digits] = '\0';
  snprintf(buffer, capacity, "%s0x1%s%sp%d", value < 0 ? "-" : "",
           digits ? "." : "", hex, exponent - 1);
}

/*---------------------------------------------------------------------------
 * Validation of a program value
 *-------------------------------------------------------------------------*/

/* strnlen (POSIX, not C11). */
static size_t pw_cpu_bounded_length(const char* text, size_t capacity) {
  size_t n = 0;
  while (n < capacity && text[n] != '\0') ++n;
  return n;
}

static pw_status_t pw_cpu_check_param(const char* role, uint32_t index,
                                      pw_dtype_t dtype, const pw_shape_t* shape,
                                      const pw_sharding_t* sharding) {
  if (pw_dtype_size(dtype) == 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu program: %s %u has invalid dtype %d", role,
                          index, (int)dtype);
  }
  PW_RETURN_IF_ERROR_CTX(pw_shape_check(shape), "cpu program: %s %u", role, index);
  if (sharding->kind != PW_SHARDING_REPLICATED &&
      sharding->kind != PW_SHARDING_SPLIT && sharding->kind != PW_SHARDING_TILED) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu program: %s %u has unknown sharding kind %d",
                          role, index, (int)sharding->kind);
  }
  if (sharding->kind == PW_SHARDING_TILED) {
    bool ok = sharding->tile_count <= PW_MAX_MESH_RANK &&
              sharding->unreduced_axes < (1u << PW_MAX_MESH_RANK);
    for (uint32_t i = 0; ok && i < sharding->tile_count; ++i) {
      ok = sharding->tiles[i].tensor_axis < shape->rank &&
           sharding->tiles[i].mesh_axis < PW_MAX_MESH_RANK;
    }
    if (!ok) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "cpu program: %s %u has a TILED sharding with a tile or "
                            "unreduced axis out of range (%u tiles, rank %u)",
                            role, index, sharding->tile_count, shape->rank);
    }
  }
  return NULL;
}

static pw_status_t pw_cpu_check_attr(const pw_cpu_attr_t* attr, uint32_t index) {
  size_t name_length = pw_cpu_bounded_length(attr->name, PW_CPU_ATTR_NAME_MAX);
  if (name_length == PW_CPU_ATTR_NAME_MAX ||
      !pw_cpu__is_name(attr->name, name_length)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu program: attribute %u has an invalid name", index);
  }
  if (attr->kind == PW_CPU_ATTR_NUMBER) return NULL;
  if (attr->kind != PW_CPU_ATTR_STRING) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu program: attribute '%s' has unknown kind %d",
                          attr->name, (int)attr->kind);
  }
  size_t text_length = pw_cpu_bounded_length(attr->text, PW_CPU_ATTR_TEXT_MAX);
  if (text_length == PW_CPU_ATTR_TEXT_MAX ||
      !pw_cpu__is_word(attr->text, text_length)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu program: attribute '%s': string value is not a "
                          "word ([A-Za-z_][A-Za-z0-9_.-]*, not inf/nan, < %d bytes)",
                          attr->name, PW_CPU_ATTR_TEXT_MAX);
  }
  return NULL;
}

pw_status_t pw_cpu__program_check(const pw_cpu_program_t* program) {
  size_t kernel_length = pw_cpu_bounded_length(program->kernel, PW_CPU_NAME_MAX);
  if (kernel_length == PW_CPU_NAME_MAX ||
      !pw_cpu__is_name(program->kernel, kernel_length)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu program: invalid or missing kernel name");
  }
  if (program->input_count > PW_CPU_MAX_PARAMS ||
      program->output_count > PW_CPU_MAX_PARAMS ||
      program->attr_count > PW_CPU_MAX_ATTRS) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu program: %u inputs, %u outputs, %u attributes "
                          "exceed the maxima (%d, %d, %d)",
                          program->input_count, program->output_count,
                          program->attr_count, PW_CPU_MAX_PARAMS,
                          PW_CPU_MAX_PARAMS, PW_CPU_MAX_ATTRS);
  }
  for (uint32_t i = 0; i < program->input_count; ++i) {
    const pw_backend_param_t* p = &program->inputs[i];
    PW_RETURN_IF_ERROR(pw_cpu_check_param("input", i, p->dtype, &p->shape, &p->sharding));
  }
  for (uint32_t i = 0; i < program->output_count; ++i) {
    const pw_backend_param_t* p = &program->outputs[i];
    PW_RETURN_IF_ERROR(pw_cpu_check_param("output", i, p->dtype, &p->shape, &p->sharding));
  }
  if (program->over_axes >= (1u << PW_MAX_MESH_RANK)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu program: 'over' names a mesh axis beyond %d (mask 0x%x)",
                          PW_MAX_MESH_RANK - 1, program->over_axes);
  }
  for (uint32_t i = 0; i < program->attr_count; ++i) {
    PW_RETURN_IF_ERROR(pw_cpu_check_attr(&program->attrs[i], i));
    for (uint32_t j = 0; j < i; ++j) {
      if (strcmp(program->attrs[i].name, program->attrs[j].name) == 0) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "cpu program: duplicate attribute '%s'",
                              program->attrs[i].name);
      }
    }
  }
  return NULL;
}

/*---------------------------------------------------------------------------
 * Builders
 *-------------------------------------------------------------------------*/

pw_status_t pw_cpu_program_init(pw_cpu_program_t* program, const char* kernel) {
  if (program == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cpu_program_init: program is NULL");
  }
  memset(program, 0, sizeof(*program));
  size_t length = kernel ? strlen(kernel) : 0;
  if (!pw_cpu__is_name(kernel ? kernel : "", length) || length >= PW_CPU_NAME_MAX) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cpu_program_init: invalid kernel name '%.64s' "
                          "(expected [A-Za-z_][A-Za-z0-9_.]*, < %d bytes)",
                          kernel ? kernel : "(null)", PW_CPU_NAME_MAX);
  }
  memcpy(program->kernel, kernel, length + 1);
  return NULL;
}

static pw_status_t pw_cpu_program_add(pw_cpu_program_t* program, bool input,
                                      pw_dtype_t dtype, const pw_shape_t* shape,
                                      pw_sharding_t sharding) {
  const char* role = input ? "input" : "output";
  if (program == NULL || shape == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cpu_program_add_%s: NULL argument", role);
  }
  uint32_t* count = input ? &program->input_count : &program->output_count;
  if (*count >= PW_CPU_MAX_PARAMS) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "cpu program: more than %d %ss", PW_CPU_MAX_PARAMS,
                          role);
  }
  PW_RETURN_IF_ERROR(pw_cpu_check_param(role, *count, dtype, shape, &sharding));
  pw_backend_param_t* param = input ? &program->inputs[*count] : &program->outputs[*count];
  memset(param, 0, sizeof(*param));
  param->dtype = dtype;
  param->shape = pw_shape_make(shape->rank, shape->dims);
  param->sharding = sharding;
  if (sharding.kind == PW_SHARDING_REPLICATED) param->sharding = pw_sharding_replicated();
  if (sharding.kind == PW_SHARDING_TILED) {
    /* Tiles by tensor dimension (stable: the order within one dimension is
     * its split order), as the text writes and reads them back. */
    pw_sharding_tile_t tiles[PW_MAX_MESH_RANK];
    uint32_t tile_count = 0;
    for (uint32_t dim = 0; dim < shape->rank; ++dim) {
      for (uint32_t i = 0; i < sharding.tile_count; ++i) {
        if (sharding.tiles[i].tensor_axis == dim) tiles[tile_count++] = sharding.tiles[i];
      }
    }
    param->sharding = pw_sharding_tiled(tile_count, tiles, sharding.unreduced_axes);
  }
  ++*count;
  return NULL;
}

pw_status_t pw_cpu_program_add_input(pw_cpu_program_t* program, pw_dtype_t dtype,
                                     const pw_shape_t* shape,
                                     pw_sharding_t sharding) {
  return pw_cpu_program_add(program, true, dtype, shape, sharding);
}

pw_status_t pw_cpu_program_add_output(pw_cpu_program_t* program, pw_dtype_t dtype,
                                      const pw_shape_t* shape,
                                      pw_sharding_t sharding) {
  return pw_cpu_program_add(program, false, dtype, shape, sharding);
}

/* The slot for attribute |name|: the existing one or a new one. */
static pw_status_t pw_cpu_program_attr_slot(pw_cpu_program_t* program,
                                            const char* name,
                                            pw_cpu_attr_t** out_attr) {
  *out_attr = NULL;
  if (program == NULL || name == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu program: NULL program or attribute name");
  }
  size_t length = strlen(name);
  if (!pw_cpu__is_name(name, length) || length >= PW_CPU_ATTR_NAME_MAX) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu program: invalid attribute name '%.64s' "
                          "(expected [A-Za-z_][A-Za-z0-9_.]*, < %d bytes)",
                          name, PW_CPU_ATTR_NAME_MAX);
  }
  for (uint32_t i = 0; i < program->attr_count && i < PW_CPU_MAX_ATTRS; ++i) {
    if (strcmp(program->attrs[i].name, name) == 0) {
      *out_attr = &program->attrs[i];
      return NULL;
    }
  }
  if (program->attr_count >= PW_CPU_MAX_ATTRS) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "cpu program: more than %d attributes (adding '%s')",
                          PW_CPU_MAX_ATTRS, name);
  }
  pw_cpu_attr_t* attr = &program->attrs[program->attr_count++];
  memset(attr, 0, sizeof(*attr));
  memcpy(attr->name, name, length + 1);
  *out_attr = attr;
  return NULL;
}

pw_status_t pw_cpu_program_set_number(pw_cpu_program_t* program,
                                      const char* name, double value) {
  pw_cpu_attr_t* attr = NULL;
  PW_RETURN_IF_ERROR(pw_cpu_program_attr_slot(program, name, &attr));
  memset(attr->text, 0, sizeof(attr->text));
  attr->kind = PW_CPU_ATTR_NUMBER;
  attr->number = value;
  return NULL;
}

pw_status_t pw_cpu_program_set_string(pw_cpu_program_t* program,
                                      const char* name, const char* text) {
  size_t length = text ? strlen(text) : 0;
  if (text == NULL || !pw_cpu__is_word(text, length) ||
      length >= PW_CPU_ATTR_TEXT_MAX) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu program: attribute '%.32s': value '%.64s' is not a "
                          "word ([A-Za-z_][A-Za-z0-9_.-]*, not inf/nan, < %d bytes)",
                          name ? name : "(null)", text ? text : "(null)",
                          PW_CPU_ATTR_TEXT_MAX);
  }
  pw_cpu_attr_t* attr = NULL;
  PW_RETURN_IF_ERROR(pw_cpu_program_attr_slot(program, name, &attr));
  memset(attr->text, 0, sizeof(attr->text));
  memcpy(attr->text, text, length + 1);
  attr->kind = PW_CPU_ATTR_STRING;
  attr->number = 0.0;
  return NULL;
}

const pw_cpu_attr_t* pw_cpu_program_find_attr(const pw_cpu_program_t* program,
                                              const char* name) {
  if (program == NULL || name == NULL) return NULL;
  for (uint32_t i = 0; i < program->attr_count && i < PW_CPU_MAX_ATTRS; ++i) {
    if (strncmp(program->attrs[i].name, name, PW_CPU_ATTR_NAME_MAX) == 0) {
      return &program->attrs[i];
    }
  }
  return NULL;
}

double pw_cpu_program_number_attr(const pw_cpu_program_t* program,
                                  const char* name, double fallback) {
  const pw_cpu_attr_t* attr = pw_cpu_program_find_attr(program, name);
  return attr != NULL && attr->kind == PW_CPU_ATTR_NUMBER ? attr->number : fallback;
}

/*---------------------------------------------------------------------------
 * Formatting
 *-------------------------------------------------------------------------*/

typedef struct pw_cpu_writer_t {
  char* buffer;
  size_t capacity;
  size_t length; /* full length so far, even past capacity */
} pw_cpu_writer_t;

static void pw_cpu_write(pw_cpu_writer_t* w, const char* text) {
  size_t n = strlen(text);
  if (w->length < w->capacity) {
    size_t room = w->capacity - w->length - 1; /* keep the NUL */
    memcpy(w->buffer + w->length, text, n < room ? n : room);
  }
  w->length += n;
}

/* Writes "over data, model" for |mask|. */
static void pw_cpu_write_over(pw_cpu_writer_t* w, uint32_t mask, const pw_mesh_shape_t* mesh) {
  pw_cpu_write(w, "over ");
  bool first = true;
  for (uint32_t a = 0; a < PW_MAX_MESH_RANK; ++a) {
    if (!(mask >> a & 1u)) continue;
    char name[PW_MESH_AXIS_NAME_MAX + 8];
    if (mesh != NULL && a < mesh->rank) {
      pw_mesh_axis_format(mesh, a, name, sizeof(name));
    } else {
      snprintf(name, sizeof(name), "%u", a);
    }
    if (!first) pw_cpu_write(w, ", ");
    pw_cpu_write(w, name);
    first = false;
  }
  pw_cpu_write(w, "\n");
}

pw_status_t pw_cpu_program_format(const pw_cpu_program_t* program, char* buffer,
                                  size_t capacity, size_t* out_length) {
  return pw_cpu_program_format_named(program, NULL, buffer, capacity, out_length);
}

pw_status_t pw_cpu_program_format_named(const pw_cpu_program_t* program,
                                        const pw_mesh_shape_t* mesh, char* buffer,
                                        size_t capacity, size_t* out_length) {
  if (out_length != NULL) *out_length = 0;
  if (program == NULL || out_length == NULL || (buffer == NULL && capacity != 0)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cpu_program_format: NULL argument");
  }
  if (capacity > 0) buffer[0] = '\0';
  PW_RETURN_IF_ERROR(pw_cpu__program_check(program));
  if (mesh != NULL) PW_RETURN_IF_ERROR_CTX(pw_mesh_shape_check(mesh), "pw_cpu_program_format");
  pw_cpu_writer_t w = {buffer, capacity, 0};
  pw_cpu_write(&w, "kernel ");
  pw_cpu_write(&w, program->kernel);
  pw_cpu_write(&w, "\n");
  for (int pass = 0; pass < 2; ++pass) {
    uint32_t count = pass == 0 ? program->input_count : program->output_count;
    const pw_backend_param_t* params = pass == 0 ? program->inputs : program->outputs;
    for (uint32_t i = 0; i < count; ++i) {
      char shape[256];
      char sharding[160];
      pw_shape_format(params[i].dtype, &params[i].shape, shape, sizeof(shape));
      pw_cpu__sharding_text(&params[i].sharding, mesh, sharding, sizeof(sharding));
      pw_cpu_write(&w, pass == 0 ? "input " : "output ");
      pw_cpu_write(&w, shape);
      pw_cpu_write(&w, " ");
      pw_cpu_write(&w, sharding);
      pw_cpu_write(&w, "\n");
    }
  }
  for (uint32_t i = 0; i < program->attr_count; ++i) {
    const pw_cpu_attr_t* attr = &program->attrs[i];
    char value[64];
    if (attr->kind == PW_CPU_ATTR_NUMBER) {
      pw_cpu_number_text(attr->number, value, sizeof(value));
    } else {
      snprintf(value, sizeof(value), "%s", attr->text);
    }
    pw_cpu_write(&w, "attr ");
    pw_cpu_write(&w, attr->name);
    pw_cpu_write(&w, " ");
    pw_cpu_write(&w, value);
    pw_cpu_write(&w, "\n");
  }
  if (program->over_axes != 0) pw_cpu_write_over(&w, program->over_axes, mesh);
  if (capacity > 0) {
    buffer[w.length < capacity ? w.length : capacity - 1] = '\0';
  }
  *out_length = w.length;
  return NULL;
}
