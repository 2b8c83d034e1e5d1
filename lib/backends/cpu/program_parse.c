/* Program text -> pw_cpu_program_t. The grammar is in cpu.h.
 *
 * Strict and locale-free: every byte is accounted for, numbers are parsed
 * here rather than by strtod (whose decimal point follows LC_NUMERIC), and
 * every error names the line and the token. Syntax only: kernels and
 * shardings are checked against the registry and the mesh by compile. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"

#define PW_CPU_MAX_TOKENS 4
/* Longest token quoted in an error message. */
#define PW_CPU_QUOTE_MAX 48

typedef struct pw_cpu_token_t {
  const char* text;
  size_t length;
} pw_cpu_token_t;

static bool pw_cpu_is_digit(char c) { return c >= '0' && c <= '9'; }
static bool pw_cpu_is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

bool pw_cpu__is_name(const char* text, size_t length) {
  if (length == 0 || !pw_cpu_is_alpha(text[0])) return false;
  for (size_t i = 1; i < length; ++i) {
    char c = text[i];
    if (!pw_cpu_is_alpha(c) && !pw_cpu_is_digit(c) && c != '.') return false;
  }
  return true;
}

static bool pw_cpu_token_is(pw_cpu_token_t token, const char* word) {
  size_t n = strlen(word);
  return token.length == n && memcmp(token.text, word, n) == 0;
}

/*---------------------------------------------------------------------------
 * Numbers
 *-------------------------------------------------------------------------*/

static int pw_cpu_hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* [+-]digits with saturation; true if at least one digit and nothing else. */
static bool pw_cpu_parse_exponent(const char* s, size_t n, int64_t* out) {
  size_t i = 0;
  bool negative = false;
  if (i < n && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (i == n) return false;
  int64_t value = 0;
  for (; i < n; ++i) {
    if (!pw_cpu_is_digit(s[i])) return false;
    if (value < 100000) value = value * 10 + (s[i] - '0');
  }
  *out = negative ? -value : value;
  return true;
}

/* 0xH[.H][pE]: exact; significands beyond 53 bits are rejected. */
static bool pw_cpu_parse_hex(const char* s, size_t n, double* out) {
  uint64_t mantissa = 0;
  int digits = 0;
  int64_t exponent = 0;
  bool any = false;
  bool point = false;
  size_t i = 0;
  for (; i < n; ++i) {
    char c = s[i];
    if (c == '.' && !point) {
      point = true;
      continue;
    }
    int v = pw_cpu_hex_value(c);
    if (v < 0) break;
    any = true;
    if (mantissa == 0 && v == 0) {
      if (point) exponent -= 4;
      continue;
    }
    if (digits == 15) return false; /* too many digits to be exact */
    mantissa = mantissa * 16 + (uint64_t)v;
    ++digits;
    if (point) exponent -= 4;
  }
  if (!any) return false;
  if (i < n) {
    if (s[i] != 'p' && s[i] != 'P') return false;
    int64_t e = 0;
    if (!pw_cpu_parse_exponent(s + i + 1, n - i - 1, &e)) return false;
    exponent += e;
  }
  /* Only exactly representable significands: the builder writes at most
   * 53 bits. */
  if (mantissa >= (1ull << 53)) return false;
  if (exponent > 100000) exponent = 100000;
  if (exponent < -100000) exponent = -100000;
  *out = ldexp((double)mantissa, (int)exponent);
  return true;
}

/* digits[.digits][e[+-]digits]. Exact (Clinger's fast path) when the
 * significand fits 2^53 and the exponent is within +-22; otherwise rounded
 * through long double, within an ulp. */
static bool pw_cpu_parse_decimal(const char* s, size_t n, double* out) {
  static const double powers[23] = {
      1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
      1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  uint64_t mantissa = 0;
  int significant = 0;
  int64_t exponent = 0;
  bool any = false;
  bool point = false;
  size_t i = 0;
  for (; i < n; ++i) {
    char c = s[i];
    if (c == '.' && !point) {
      point = true;
      continue;
    }
    if (!pw_cpu_is_digit(c)) break;
    any = true;
    int d = c - '0';
    if (mantissa == 0 && d == 0) {
      if (point) --exponent;
    } else if (significant < 19) {
      mantissa = mantissa * 10 + (uint64_t)d;
      ++significant;
      if (point) --exponent;
    } else if (!point) {
      ++exponent; /* dropped integer digit */
    }
  }
  if (!any) return false;
  if (i < n) {
    if (s[i] != 'e' && s[i] != 'E') return false;
    int64_t e = 0;
    if (!pw_cpu_parse_exponent(s + i + 1, n - i - 1, &e)) return false;
    exponent += e;
  }
  if (mantissa == 0) {
    *out = 0.0;
  } else if (mantissa <= (1ull << 53) && exponent >= -22 && exponent <= 22) {
    double v = (double)mantissa;
    *out = exponent >= 0 ? v * powers[exponent] : v / powers[-exponent];
  } else if (exponent > 400) {
    *out = HUGE_VAL;
  } else if (exponent < -400) {
    *out = 0.0;
  } else {
    long double v = (long double)mantissa;
    long double scale = 1.0L;
    long double base = 10.0L;
    int64_t e = exponent < 0 ? -exponent : exponent;
    while (e > 0) { /* exact up to 10^27, then within rounding */
      if (e & 1) scale *= base;
      base *= base;
      e >>= 1;
    }
    *out = (double)(exponent < 0 ? v / scale : v * scale);
  }
  return true;
}

/* A number token (see cpu.h): true and |*out| if it is one. */
static bool pw_cpu_parse_number(const char* s, size_t n, double* out) {
  size_t i = 0;
  bool negative = false;
  if (n > 0 && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    i = 1;
  }
  const char* body = s + i;
  size_t length = n - i;
  double value = 0.0;
  if (length == 3 && memcmp(body, "inf", 3) == 0) {
    value = HUGE_VAL;
  } else if (length == 3 && memcmp(body, "nan", 3) == 0) {
    value = NAN;
  } else if (length > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X')) {
    if (!pw_cpu_parse_hex(body + 2, length - 2, &value)) return false;
  } else if (length > 0 && (pw_cpu_is_digit(body[0]) || body[0] == '.')) {
    if (!pw_cpu_parse_decimal(body, length, &value)) return false;
  } else {
    return false;
  }
  *out = negative ? -value : value;
  return true;
}

bool pw_cpu__is_word(const char* text, size_t length) {
  if (length == 0 || !pw_cpu_is_alpha(text[0])) return false;
  if ((length == 3 && memcmp(text, "inf", 3) == 0) ||
      (length == 3 && memcmp(text, "nan", 3) == 0)) {
    return false;
  }
  for (size_t i = 1; i < length; ++i) {
    char c = text[i];
    if (!pw_cpu_is_alpha(c) && !pw_cpu_is_digit(c) && c != '.' && c != '-') {
      return false;
    }
  }
  return true;
}

/*---------------------------------------------------------------------------
 * Directives
 *-------------------------------------------------------------------------*/

#define PW_CPU_QUOTE(token) \
  (int)((token).length > PW_CPU_QUOTE_MAX ? PW_CPU_QUOTE_MAX : (token).length), \
      (token).text, ((token).length > PW_CPU_QUOTE_MAX ? "..." : "")

static pw_status_t pw_cpu_syntax(uint32_t line, const char* format, ...)
    PW_PRINTF_ATTR(2, 3);
static pw_status_t pw_cpu_syntax(uint32_t line, const char* format, ...) {
  va_list args;
  va_start(args, format);
  pw_status_t status = pw_status_makev(PW_STATUS_INVALID_ARGUMENT, format, args);
  va_end(args);
  return pw_status_annotate(status, "line %u", line);
}

/* Parses an unsigned decimal with no sign; false on junk or > |max|. */
static bool pw_cpu_parse_uint(const char* s, size_t n, uint64_t max,
                              uint64_t* out) {
  if (n == 0) return false;
  uint64_t value = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!pw_cpu_is_digit(s[i])) return false;
    value = value * 10 + (uint64_t)(s[i] - '0');
    if (value > max) return false;
  }
  *out = value;
  return true;
}

/* DTYPE[DIMS] */
static pw_status_t pw_cpu_parse_type(uint32_t line, pw_cpu_token_t token,
                                     pw_dtype_t* out_dtype,
                                     pw_shape_t* out_shape) {
  const char* open = memchr(token.text, '[', token.length);
  if (open == NULL || token.text[token.length - 1] != ']') {
    return pw_cpu_syntax(line, "expected DTYPE[DIMS] such as f32[8,4], got '%.*s%s'",
                         PW_CPU_QUOTE(token));
  }
  size_t name_length = (size_t)(open - token.text);
  if (!pw_dtype_parse(token.text, name_length, out_dtype)) {
    pw_cpu_token_t name = {token.text, name_length};
    return pw_cpu_syntax(line, "unknown dtype '%.*s%s' (expected f32, f64, bf16, f16, "
                         "f8e4m3fn, f8e5m2, i8, i16, i32, i64, u8, u16, u32, u64, "
                         "bool, c64 or a numpy name such as float32)",
                         PW_CPU_QUOTE(name));
  }
  const char* p = open + 1;
  const char* end = token.text + token.length - 1; /* the ']' */
  pw_shape_t shape;
  memset(&shape, 0, sizeof(shape));
  while (p < end) {
    const char* comma = memchr(p, ',', (size_t)(end - p));
    const char* dim_end = comma ? comma : end;
    if (shape.rank == PW_MAX_RANK) {
      return pw_cpu_syntax(line, "shape '%.*s%s' has more than %d dimensions",
                           PW_CPU_QUOTE(token), PW_MAX_RANK);
    }
    uint64_t value = 0;
    if (!pw_cpu_parse_uint(p, (size_t)(dim_end - p), (uint64_t)1 << 62, &value)) {
      pw_cpu_token_t dim = {p, (size_t)(dim_end - p)};
      return pw_cpu_syntax(line, "bad dimension '%.*s%s' in '%.*s%s'",
                           PW_CPU_QUOTE(dim), PW_CPU_QUOTE(token));
    }
    if (value == 0) {
      return pw_cpu_syntax(line, "dimension %u of '%.*s%s' is 0; dimensions must be >= 1",
                           shape.rank, PW_CPU_QUOTE(token));
    }
    shape.dims[shape.rank++] = (int64_t)value;
    if (comma == NULL) break;
    p = comma + 1;
    if (p == end) {
      return pw_cpu_syntax(line, "trailing ',' in '%.*s%s'", PW_CPU_QUOTE(token));
    }
  }
  pw_status_t status = pw_shape_check(&shape);
  if (status != NULL) {
    pw_status_t syntax = pw_cpu_syntax(line, "'%.*s%s': %s", PW_CPU_QUOTE(token),
                                       pw_status_message(status));
    pw_status_free(status);
    return syntax;
  }
  *out_shape = shape;
  return NULL;
}

/* replicated | split(T,M) */
static pw_status_t pw_cpu_find_axis(const pw_mesh_shape_t* mesh, const char* text,
                                    size_t length, uint32_t* out_axis);

static pw_status_t pw_cpu_parse_sharding(uint32_t line, pw_cpu_token_t token,
                                         const pw_mesh_shape_t* mesh,
                                         pw_sharding_t* out_sharding) {
  if (pw_cpu_token_is(token, "replicated")) {
    *out_sharding = pw_sharding_replicated();
    return NULL;
  }
  static const char prefix[] = "split(";
  size_t prefix_length = sizeof(prefix) - 1;
  if (token.length <= prefix_length + 1 ||
      memcmp(token.text, prefix, prefix_length) != 0) {
    return pw_cpu_syntax(line, "unknown sharding '%.*s%s' (expected replicated, split(T,M) or P(...))",
                         PW_CPU_QUOTE(token));
  }
  const char* p = token.text + prefix_length;
  const char* end = token.text + token.length - 1;
  const char* comma = memchr(p, ',', (size_t)(end - p));
  uint64_t tensor_axis = 0;
  uint64_t mesh_axis = 0;
  bool ok = *end == ')' && comma != NULL &&
            pw_cpu_parse_uint(p, (size_t)(comma - p), UINT32_MAX - 1, &tensor_axis);
  if (ok) {
    pw_cpu_token_t m = {comma + 1, (size_t)(end - comma - 1)};
    if (pw_cpu_token_is(m, "all")) {
      mesh_axis = PW_MESH_AXIS_ALL;
    } else if (!pw_cpu_parse_uint(m.text, m.length, UINT32_MAX - 1, &mesh_axis)) {
      /* A mesh axis name (with a mesh). */
      uint32_t axis = 0;
      pw_status_t status = mesh != NULL ? pw_cpu_find_axis(mesh, m.text, m.length, &axis)
                                        : pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                                                         "no mesh to name axes");
      ok = status == NULL;
      mesh_axis = axis;
      pw_status_free(status);
    }
  }
  if (!ok) {
    return pw_cpu_syntax(line, "bad sharding '%.*s%s' (expected split(T,M), M a mesh axis (number or name) or 'all')",
                         PW_CPU_QUOTE(token));
  }
  *out_sharding = pw_sharding_split((uint32_t)tensor_axis, (uint32_t)mesh_axis);
  return NULL;
}

/* A mesh of PW_MAX_MESH_RANK unnamed axes: what axis indices resolve
 * against when there is no mesh (syntax only; compile checks the range). */
static pw_mesh_shape_t pw_cpu_index_mesh(void) {
  pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(PW_MAX_MESH_RANK, 1, 1, 1, 1);
  return mesh;
}

/* Resolves one mesh axis: a name of |mesh|, or an index (also on a named
 * mesh). The error names the mesh's axes. */
static pw_status_t pw_cpu_find_axis(const pw_mesh_shape_t* mesh, const char* text,
                                    size_t length, uint32_t* out_axis) {
  pw_status_t status = pw_mesh_axis_find(mesh, text, length, out_axis);
  if (status == NULL || mesh->axis_names[0][0] == '\0') return status;
  pw_mesh_shape_t unnamed = *mesh;
  memset(unnamed.axis_names, 0, sizeof(unnamed.axis_names));
  pw_status_t by_index = pw_mesh_axis_find(&unnamed, text, length, out_axis);
  if (by_index == NULL) {
    pw_status_free(status);
    return NULL;
  }
  pw_status_free(by_index);
  return status;
}

/* P(...) [unreduced(...)]: the rest of the line, through pw_sharding_parse
 * (names of |mesh|, else indices). */
static pw_status_t pw_cpu_parse_spec(uint32_t line, const char* text, size_t length,
                                     uint32_t rank, const pw_mesh_shape_t* mesh,
                                     pw_sharding_t* out_sharding) {
  pw_mesh_shape_t index_mesh = pw_cpu_index_mesh();
  const pw_mesh_shape_t* first = mesh != NULL ? mesh : &index_mesh;
  pw_status_t status = pw_sharding_parse(text, length, rank, first, out_sharding);
  if (status != NULL && mesh != NULL && mesh->axis_names[0][0] != '\0') {
    pw_mesh_shape_t unnamed = *mesh;
    memset(unnamed.axis_names, 0, sizeof(unnamed.axis_names));
    pw_status_t by_index = pw_sharding_parse(text, length, rank, &unnamed, out_sharding);
    if (by_index == NULL) {
      pw_status_free(status);
      status = NULL;
    } else {
      pw_status_free(by_index);
    }
  }
  if (status != NULL) {
    pw_status_t syntax = pw_cpu_syntax(line, "%s", pw_status_message(status));
    pw_status_free(status);
    return syntax;
  }
  /* Unused fields zeroed: programs compare and encode field by field. */
  pw_sharding_t clean = pw_sharding_tiled(out_sharding->tile_count, out_sharding->tiles,
                                          out_sharding->unreduced_axes);
  *out_sharding = clean;
  return NULL;
}

/* over AXIS[, AXIS...] (the rest of the line). */
static pw_status_t pw_cpu_parse_over(uint32_t line, const char* text, size_t length,
                                     const pw_mesh_shape_t* mesh, pw_cpu_program_t* program,
                                     pw_cpu__lines_t* lines) {
  if (program->over_axes != 0) {
    return pw_cpu_syntax(line, "second 'over' line (the first is on line %u)", lines->over);
  }
  pw_mesh_shape_t index_mesh = pw_cpu_index_mesh();
  if (mesh == NULL) mesh = &index_mesh;
  uint32_t mask = 0;
  size_t i = 0;
  for (;;) {
    while (i < length && (text[i] == ' ' || text[i] == '\t')) ++i;
    size_t start = i;
    while (i < length && text[i] != ',' && text[i] != ' ' && text[i] != '\t') ++i;
    pw_cpu_token_t axis_token = {text + start, i - start};
    if (axis_token.length == 0) {
      return pw_cpu_syntax(line, "'over' needs mesh axes, e.g. 'over data' or 'over data, model'");
    }
    uint32_t axis = 0;
    pw_status_t status = pw_cpu_find_axis(mesh, axis_token.text, axis_token.length, &axis);
    if (status != NULL) {
      pw_status_t syntax = pw_cpu_syntax(line, "over: %s", pw_status_message(status));
      pw_status_free(status);
      return syntax;
    }
    if (mask >> axis & 1u) {
      return pw_cpu_syntax(line, "over: mesh axis '%.*s%s' is listed twice",
                           PW_CPU_QUOTE(axis_token));
    }
    mask |= 1u << axis;
    while (i < length && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i == length) break;
    if (text[i] != ',') {
      pw_cpu_token_t rest = {text + i, length - i};
      return pw_cpu_syntax(line, "over: expected ',' between mesh axes, got '%.*s%s'",
                           PW_CPU_QUOTE(rest));
    }
    ++i;
  }
  program->over_axes = mask;
  lines->over = line;
  return NULL;
}

static pw_status_t pw_cpu_parse_param(uint32_t line, const pw_cpu_token_t* tokens,
                                      uint32_t count, const char* line_end,
                                      const pw_mesh_shape_t* mesh, bool input,
                                      pw_cpu_program_t* program,
                                      pw_cpu__lines_t* lines) {
  const char* role = input ? "input" : "output";
  bool spec = count >= 3 && tokens[2].length >= 2 && tokens[2].text[0] == 'P' &&
              tokens[2].text[1] == '(';
  if (count != 3 && !spec) {
    if (count > 3) {
      return pw_cpu_syntax(line, "unexpected token '%.*s%s' after the sharding",
                           PW_CPU_QUOTE(tokens[3]));
    }
    return pw_cpu_syntax(line, "'%s' needs a type and a sharding, e.g. '%s f32[8,4] replicated'",
                         role, role);
  }
  uint32_t* n = input ? &program->input_count : &program->output_count;
  if (*n == PW_CPU_MAX_PARAMS) {
    return pw_cpu_syntax(line, "more than %d %ss", PW_CPU_MAX_PARAMS, role);
  }
  pw_backend_param_t param;
  memset(&param, 0, sizeof(param));
  PW_RETURN_IF_ERROR(pw_cpu_parse_type(line, tokens[1], &param.dtype, &param.shape));
  if (spec) {
    size_t length = (size_t)(line_end - tokens[2].text);
    while (length > 0 && (tokens[2].text[length - 1] == ' ' ||
                          tokens[2].text[length - 1] == '\t')) {
      --length;
    }
    PW_RETURN_IF_ERROR(pw_cpu_parse_spec(line, tokens[2].text, length, param.shape.rank,
                                         mesh, &param.sharding));
  } else {
    PW_RETURN_IF_ERROR(pw_cpu_parse_sharding(line, tokens[2], mesh, &param.sharding));
  }
  if (input) {
    lines->inputs[*n] = line;
    program->inputs[*n] = param;
  } else {
    lines->outputs[*n] = line;
    program->outputs[*n] = param;
  }
  ++*n;
  return NULL;
}

static pw_status_t pw_cpu_parse_attr(uint32_t line, const pw_cpu_token_t* tokens,
                                     uint32_t count, pw_cpu_program_t* program,
                                     pw_cpu__lines_t* lines) {
  if (count != 3) {
    if (count > 3) {
      return pw_cpu_syntax(line, "unexpected token '%.*s%s' after the attribute value",
                           PW_CPU_QUOTE(tokens[3]));
    }
    return pw_cpu_syntax(line, "'attr' needs a name and a value, e.g. 'attr alpha 0.5'");
  }
  pw_cpu_token_t name = tokens[1];
  pw_cpu_token_t value = tokens[2];
  if (!pw_cpu__is_name(name.text, name.length)) {
    return pw_cpu_syntax(line, "invalid attribute name '%.*s%s'", PW_CPU_QUOTE(name));
  }
  if (name.length >= PW_CPU_ATTR_NAME_MAX) {
    return pw_cpu_syntax(line, "attribute name '%.*s%s' is longer than %d bytes",
                         PW_CPU_QUOTE(name), PW_CPU_ATTR_NAME_MAX - 1);
  }
  for (uint32_t i = 0; i < program->attr_count; ++i) {
    if (pw_cpu_token_is(name, program->attrs[i].name)) {
      return pw_cpu_syntax(line, "duplicate attribute '%.*s%s' (first on line %u)",
                           PW_CPU_QUOTE(name), lines->attrs[i]);
    }
  }
  if (program->attr_count == PW_CPU_MAX_ATTRS) {
    return pw_cpu_syntax(line, "more than %d attributes", PW_CPU_MAX_ATTRS);
  }
  pw_cpu_attr_t attr;
  memset(&attr, 0, sizeof(attr));
  memcpy(attr.name, name.text, name.length);
  if (pw_cpu_parse_number(value.text, value.length, &attr.number)) {
    attr.kind = PW_CPU_ATTR_NUMBER;
  } else if (pw_cpu__is_word(value.text, value.length)) {
    if (value.length >= PW_CPU_ATTR_TEXT_MAX) {
      return pw_cpu_syntax(line, "value '%.*s%s' of attribute '%s' is longer than %d bytes",
                           PW_CPU_QUOTE(value), attr.name, PW_CPU_ATTR_TEXT_MAX - 1);
    }
    attr.kind = PW_CPU_ATTR_STRING;
    memcpy(attr.text, value.text, value.length);
  } else {
    return pw_cpu_syntax(line, "bad value '%.*s%s' for attribute '%s' (expected a number or a word)",
                         PW_CPU_QUOTE(value), attr.name);
  }
  lines->attrs[program->attr_count] = line;
  program->attrs[program->attr_count++] = attr;
  return NULL;
}

static pw_status_t pw_cpu_parse_kernel(uint32_t line, const pw_cpu_token_t* tokens,
                                       uint32_t count, pw_cpu_program_t* program,
                                       pw_cpu__lines_t* lines) {
  if (program->kernel[0] != '\0') {
    return pw_cpu_syntax(line, "second 'kernel' line (the first is on line %u)",
                         lines->kernel);
  }
  if (count != 2) {
    if (count > 2) {
      return pw_cpu_syntax(line, "unexpected token '%.*s%s' after the kernel name",
                           PW_CPU_QUOTE(tokens[2]));
    }
    return pw_cpu_syntax(line, "'kernel' needs a name, e.g. 'kernel matmul'");
  }
  pw_cpu_token_t name = tokens[1];
  if (!pw_cpu__is_name(name.text, name.length)) {
    return pw_cpu_syntax(line, "invalid kernel name '%.*s%s'", PW_CPU_QUOTE(name));
  }
  if (name.length >= PW_CPU_NAME_MAX) {
    return pw_cpu_syntax(line, "kernel name '%.*s%s' is longer than %d bytes",
                         PW_CPU_QUOTE(name), PW_CPU_NAME_MAX - 1);
  }
  memcpy(program->kernel, name.text, name.length);
  program->kernel[name.length] = '\0';
  lines->kernel = line;
  return NULL;
}

/* Splits one line (no terminator) into tokens; rejects control bytes and
 * non-ASCII outside comments. Returns the token count in |*out_count|
 * (PW_CPU_MAX_TOKENS + 1 means "too many"; the extra one is kept). */
static pw_status_t pw_cpu_tokenize(uint32_t line, const char* s, size_t n,
                                   pw_cpu_token_t* tokens, uint32_t* out_count) {
  uint32_t count = 0;
  size_t i = 0;
  while (i < n) {
    char c = s[i];
    if (c == ' ' || c == '\t') {
      ++i;
      continue;
    }
    if (c == '#' && count == 0) break; /* a comment line */
    size_t start = i;
    while (i < n && s[i] != ' ' && s[i] != '\t') {
      unsigned char b = (unsigned char)s[i];
      if (b < 0x20 || b >= 0x7f) {
        return pw_cpu_syntax(line, "unexpected byte 0x%02x at column %zu", b, i + 1);
      }
      ++i;
    }
    if (count <= PW_CPU_MAX_TOKENS) {
      tokens[count].text = s + start;
      tokens[count].length = i - start;
      ++count;
    }
  }
  *out_count = count;
  return NULL;
}

pw_status_t pw_cpu__program_parse(const char* text, size_t size,
                                  const pw_mesh_shape_t* mesh,
                                  pw_cpu_program_t* out_program,
                                  pw_cpu__lines_t* out_lines) {
  if (out_program == NULL || (text == NULL && size != 0)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu program: NULL text or output");
  }
  memset(out_program, 0, sizeof(*out_program));
  pw_cpu__lines_t lines;
  memset(&lines, 0, sizeof(lines));
  pw_cpu_program_t program;
  memset(&program, 0, sizeof(program));
  size_t pos = 0;
  uint32_t line = 0;
  while (pos < size) {
    ++line;
    const char* start = text + pos;
    const char* newline = memchr(start, '\n', size - pos);
    size_t length = newline ? (size_t)(newline - start) : size - pos;
    pos += length + (newline ? 1 : 0);
    if (length > 0 && start[length - 1] == '\r') --length;
    pw_cpu_token_t tokens[PW_CPU_MAX_TOKENS + 1];
    uint32_t count = 0;
    PW_RETURN_IF_ERROR(pw_cpu_tokenize(line, start, length, tokens, &count));
    if (count == 0) continue;
    pw_cpu_token_t directive = tokens[0];
    bool is_kernel = pw_cpu_token_is(directive, "kernel");
    bool is_input = pw_cpu_token_is(directive, "input");
    bool is_output = pw_cpu_token_is(directive, "output");
    bool is_attr = pw_cpu_token_is(directive, "attr");
    bool is_over = pw_cpu_token_is(directive, "over");
    if (!is_kernel && !is_input && !is_output && !is_attr && !is_over) {
      return pw_cpu_syntax(line, "unknown directive '%.*s%s' (expected kernel, input, output, attr or over)",
                           PW_CPU_QUOTE(directive));
    }
    if (!is_kernel && program.kernel[0] == '\0') {
      return pw_cpu_syntax(line, "'%.*s%s' before the kernel line; a program starts with 'kernel NAME'",
                           PW_CPU_QUOTE(directive));
    }
    if (is_kernel) {
      PW_RETURN_IF_ERROR(pw_cpu_parse_kernel(line, tokens, count, &program, &lines));
    } else if (is_attr) {
      PW_RETURN_IF_ERROR(pw_cpu_parse_attr(line, tokens, count, &program, &lines));
    } else if (is_over) {
      const char* rest = directive.text + directive.length;
      PW_RETURN_IF_ERROR(pw_cpu_parse_over(line, rest, (size_t)(start + length - rest), mesh,
                                           &program, &lines));
    } else {
      PW_RETURN_IF_ERROR(pw_cpu_parse_param(line, tokens, count, start + length, mesh,
                                            is_input, &program, &lines));
    }
  }
  if (program.kernel[0] == '\0') {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu program has no 'kernel NAME' line (%u lines read)",
                          line);
  }
  *out_program = program;
  if (out_lines != NULL) *out_lines = lines;
  return NULL;
}

pw_status_t pw_cpu_program_parse(const char* text, size_t size,
                                 pw_cpu_program_t* out_program) {
  return pw_cpu__program_parse(text, size, NULL, out_program, NULL);
}

pw_status_t pw_cpu_program_parse_named(const char* text, size_t size,
                                       const pw_mesh_shape_t* mesh,
                                       pw_cpu_program_t* out_program) {
  if (mesh != NULL) {
    pw_status_t status = pw_mesh_shape_check(mesh);
    if (status != NULL) {
      if (out_program != NULL) memset(out_program, 0, sizeof(*out_program));
      return pw_status_annotate(status, "cpu program");
    }
  }
  return pw_cpu__program_parse(text, size, mesh, out_program, NULL);
}
