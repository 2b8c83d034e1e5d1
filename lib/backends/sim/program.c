/* The sim backend's program text (parse, per-kind rules, checks against a
 * mesh). Formats: see pathways/backends/sim.h. Parsing never depends on
 * the locale and never allocates. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backends/sim/sim_internal.h"

static const char* const pw_sim_kind_names[PW_SIM__KIND_COUNT] = {
    "compute", "copy", "collective", "all_reduce_sum", "all_gather", "reduce_scatter",
    "all_to_all"};

const char* pw_sim__kind_name(pw_sim__kind_t kind) {
  return (unsigned)kind < PW_SIM__KIND_COUNT ? pw_sim_kind_names[kind] : "?";
}

/* A token of a line: [begin, begin + length). */
typedef struct pw_sim_token_t {
  const char* begin;
  size_t length;
} pw_sim_token_t;

#define PW_SIM_MAX_TOKENS 4

static bool pw_sim_token_is(pw_sim_token_t t, const char* text) {
  return strlen(text) == t.length && memcmp(t.begin, text, t.length) == 0;
}

static pw_status_t pw_sim_line_error(unsigned line, const char* what, pw_sim_token_t token) {
  int shown = token.length > 40 ? 40 : (int)token.length;
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "sim program line %u: %s '%.*s'%s", line,
                        what, shown, token.begin, token.length > 40 ? "..." : "");
}

/* [A-Za-z_][A-Za-z0-9_.-]*, shorter than PW_SIM__NAME_MAX. */
static bool pw_sim_is_name(pw_sim_token_t t) {
  if (t.length == 0 || t.length >= PW_SIM__NAME_MAX) return false;
  for (size_t i = 0; i < t.length; ++i) {
    char c = t.begin[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    bool digit = c >= '0' && c <= '9';
    if (!(alpha || (i > 0 && (digit || c == '.' || c == '-')))) return false;
  }
  return true;
}

/* Parses a non-negative decimal "12", "0.5", "2.5e12" at the start of
 * [p, end); returns the characters used (0 if none parse). Deterministic
 * and locale-free; exact for integers below 2^53. */
static size_t pw_sim_parse_decimal(const char* p, const char* end, double* out) {
  const char* s = p;
  uint64_t mantissa = 0;
  int digits = 0;
  int exp10 = 0;
  bool any = false;
  while (s < end && *s >= '0' && *s <= '9') {
    any = true;
    if (digits < 19) {
      mantissa = mantissa * 10u + (uint64_t)(*s - '0');
      if (mantissa != 0) ++digits;
    } else {
      ++exp10;
    }
    ++s;
  }
  if (s < end && *s == '.') {
    ++s;
    while (s < end && *s >= '0' && *s <= '9') {
      any = true;
      if (digits < 19) {
        mantissa = mantissa * 10u + (uint64_t)(*s - '0');
        if (mantissa != 0) ++digits;
        --exp10;
      }
      ++s;
    }
  }
  if (!any) return 0;
  if (s < end && (*s == 'e' || *s == 'E')) {
    const char* e = s + 1;
    bool negative = false;
    if (e < end && (*e == '+' || *e == '-')) negative = *e++ == '-';
    int value = 0;
    const char* first = e;
    while (e < end && *e >= '0' && *e <= '9' && value < 10000) value = value * 10 + (*e++ - '0');
    if (e == first) return 0;
    exp10 += negative ? -value : value;
    s = e;
  }
  double v = (double)mantissa;
  static const double powers[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                  1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                  1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  if (mantissa != 0) {
    while (exp10 > 22 && v < 1e300) v *= 1e22, exp10 -= 22;
    while (exp10 < -22 && v > 1e-300) v /= 1e22, exp10 += 22;
    if (exp10 > 22) v = INFINITY;
    else if (exp10 < -22) v = 0;
    else v = exp10 >= 0 ? v * powers[exp10] : v / powers[-exp10];
  }
  *out = v;
  return (size_t)(s - p);
}

static pw_status_t pw_sim_parse_number(unsigned line, pw_sim_token_t t, double* out) {
  double v = 0;
  size_t used = pw_sim_parse_decimal(t.begin, t.begin + t.length, &v);
  if (used == 0 || used != t.length) return pw_sim_line_error(line, "expected a number, got", t);
  if (!(v <= 1e30)) return pw_sim_line_error(line, "number is too large (maximum 1e30):", t);
  *out = v;
  return NULL;
}

static pw_status_t pw_sim_parse_duration(unsigned line, pw_sim_token_t t, uint64_t* out) {
  double v = 0;
  size_t used = pw_sim_parse_decimal(t.begin, t.begin + t.length, &v);
  if (used == 0) return pw_sim_line_error(line, "expected a duration (250us, 1.5ms...), got", t);
  pw_sim_token_t unit = {t.begin + used, t.length - used};
  double scale;
  if (unit.length == 0 || pw_sim_token_is(unit, "ns")) {
    scale = 1;
  } else if (pw_sim_token_is(unit, "us")) {
    scale = 1e3;
  } else if (pw_sim_token_is(unit, "ms")) {
    scale = 1e6;
  } else if (pw_sim_token_is(unit, "s")) {
    scale = 1e9;
  } else {
    return pw_sim_line_error(line, "unknown duration unit (ns, us, ms or s) in", t);
  }
  double ns = ceil(v * scale);
  if (!(ns <= PW_SIM__MAX_NS)) {
    return pw_sim_line_error(line, "duration is longer than 1e18 ns:", t);
  }
  *out = (uint64_t)ns;
  return NULL;
}

/* "f32[8,4]" */
static pw_status_t pw_sim_parse_array(unsigned line, pw_sim_token_t t, pw_backend_param_t* param) {
  const char* end = t.begin + t.length;
  const char* bracket = memchr(t.begin, '[', t.length);
  if (bracket == NULL || end[-1] != ']' ||
      !pw_dtype_parse(t.begin, (size_t)(bracket - t.begin), &param->dtype)) {
    return pw_sim_line_error(line, "expected DTYPE[DIMS] (f32[8,4]), got", t);
  }
  const char* p = bracket + 1;
  uint32_t rank = 0;
  while (p < end - 1) {
    if (rank == PW_MAX_RANK) return pw_sim_line_error(line, "too many dimensions in", t);
    int64_t dim = 0;
    const char* first = p;
    while (p < end - 1 && *p >= '0' && *p <= '9') {
      if (dim > (INT64_MAX - 9) / 10) return pw_sim_line_error(line, "dimension too large in", t);
      dim = dim * 10 + (*p++ - '0');
    }
    if (p == first || dim < 1) return pw_sim_line_error(line, "bad dimension in", t);
    param->shape.dims[rank++] = dim;
    if (p < end - 1) {
      if (*p != ',' || p + 1 == end - 1) return pw_sim_line_error(line, "bad dimension list in", t);
      ++p;
    }
  }
  param->shape.rank = rank;
  return NULL;
}

/* "replicated", "split(0,1)", "split(0,all)" */
static pw_status_t pw_sim_parse_sharding(unsigned line, pw_sim_token_t t, pw_sharding_t* out) {
  if (pw_sim_token_is(t, "replicated")) {
    *out = pw_sharding_replicated();
    return NULL;
  }
  const char* p = t.begin;
  const char* end = t.begin + t.length;
  if (t.length < 10 || memcmp(p, "split(", 6) != 0 || end[-1] != ')') {
    return pw_sim_line_error(line, "expected replicated or split(T,M), got", t);
  }
  p += 6;
  uint32_t axis = 0;
  const char* first = p;
  while (p < end && *p >= '0' && *p <= '9' && axis < 1000) axis = axis * 10u + (uint32_t)(*p++ - '0');
  if (p == first || p >= end || *p != ',') return pw_sim_line_error(line, "bad split axis in", t);
  ++p;
  uint32_t mesh_axis = 0;
  if ((size_t)(end - 1 - p) == 3 && memcmp(p, "all", 3) == 0) {
    mesh_axis = PW_MESH_AXIS_ALL;
    p += 3;
  } else {
    first = p;
    while (p < end && *p >= '0' && *p <= '9' && mesh_axis < 1000) {
      mesh_axis = mesh_axis * 10u + (uint32_t)(*p++ - '0');
    }
    if (p == first) return pw_sim_line_error(line, "bad mesh axis in", t);
  }
  if (p != end - 1) return pw_sim_line_error(line, "bad sharding", t);
  *out = pw_sharding_split(axis, mesh_axis);
  return NULL;
}

/* A mesh of PW_MAX_MESH_RANK unnamed axes: what indices resolve against
 * without a mesh. */
static pw_mesh_shape_t pw_sim_index_mesh(void) {
  pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(PW_MAX_MESH_RANK, 1, 1, 1, 1);
  return mesh;
}

/* "P(data, None) unreduced(model)": [begin, end) of the line, parsed over
 * |mesh|'s names (or indices). */
static pw_status_t pw_sim_parse_spec(unsigned line, const char* begin, const char* end,
                                     uint32_t rank, const pw_mesh_shape_t* mesh,
                                     pw_sharding_t* out) {
  while (end > begin && (end[-1] == ' ' || end[-1] == '\t')) --end;
  pw_mesh_shape_t index_mesh = pw_sim_index_mesh();
  pw_mesh_shape_t unnamed = mesh != NULL ? *mesh : index_mesh;
  memset(unnamed.axis_names, 0, sizeof(unnamed.axis_names));
  pw_status_t status =
      pw_sharding_parse(begin, (size_t)(end - begin), rank, mesh ? mesh : &index_mesh, out);
  if (status != NULL && mesh != NULL && mesh->axis_names[0][0] != '\0') {
    pw_status_t by_index = pw_sharding_parse(begin, (size_t)(end - begin), rank, &unnamed, out);
    if (by_index == NULL) {
      pw_status_free(status);
      status = NULL;
    } else {
      pw_status_free(by_index);
    }
  }
  if (status != NULL) {
    pw_status_t error = pw_status_make(PW_STATUS_INVALID_ARGUMENT, "sim program line %u: %s",
                                       line, pw_status_message(status));
    pw_status_free(status);
    return error;
  }
  *out = pw_sharding_tiled(out->tile_count, out->tiles, out->unreduced_axes);
  return NULL;
}

/* over AXIS[, AXIS...]: [begin, end) after the directive. */
static pw_status_t pw_sim_parse_over(unsigned line, const char* begin, const char* end,
                                     const pw_mesh_shape_t* mesh, uint32_t* out_axes) {
  pw_mesh_shape_t index_mesh = pw_sim_index_mesh();
  uint32_t mask = 0;
  const char* q = begin;
  for (;;) {
    while (q < end && (*q == ' ' || *q == '\t')) ++q;
    const char* word = q;
    while (q < end && *q != ',' && *q != ' ' && *q != '\t') ++q;
    pw_sim_token_t t = {word, (size_t)(q - word)};
    if (t.length == 0) return pw_sim_line_error(line, "over needs mesh axes, got", t);
    uint32_t axis = 0;
    pw_status_t status = pw_mesh_axis_find(mesh ? mesh : &index_mesh, word, t.length, &axis);
    if (status != NULL && mesh != NULL && mesh->axis_names[0][0] != '\0') {
      pw_mesh_shape_t unnamed = *mesh;
      memset(unnamed.axis_names, 0, sizeof(unnamed.axis_names));
      pw_status_t by_index = pw_mesh_axis_find(&unnamed, word, t.length, &axis);
      if (by_index == NULL) {
        pw_status_free(status);
        status = NULL;
      } else {
        pw_status_free(by_index);
      }
    }
    if (status != NULL) {
      pw_status_t error = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                                         "sim program line %u: over: %s", line,
                                         pw_status_message(status));
      pw_status_free(status);
      return error;
    }
    if (mask >> axis & 1u) return pw_sim_line_error(line, "over lists a mesh axis twice:", t);
    mask |= 1u << axis;
    while (q < end && (*q == ' ' || *q == '\t')) ++q;
    if (q == end) break;
    if (*q != ',') {
      pw_sim_token_t rest = {q, (size_t)(end - q)};
      return pw_sim_line_error(line, "over: expected ',' between mesh axes, got", rest);
    }
    ++q;
  }
  *out_axes = mask;
  return NULL;
}

/* Splits a line into tokens; returns the count, or PW_SIM_MAX_TOKENS + 1
 * when there are more. */
static size_t pw_sim_tokenize(const char* line, size_t length, pw_sim_token_t* tokens) {
  size_t count = 0;
  size_t i = 0;
  while (i < length) {
    while (i < length && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i == length) break;
    size_t start = i;
    while (i < length && line[i] != ' ' && line[i] != '\t') ++i;
    if (count == PW_SIM_MAX_TOKENS) return PW_SIM_MAX_TOKENS + 1;
    tokens[count].begin = line + start;
    tokens[count].length = i - start;
    ++count;
  }
  return count;
}

enum {
  PW_SIM_SEEN_KIND = 1,
  PW_SIM_SEEN_TIME = 2,
  PW_SIM_SEEN_FLOPS = 4,
  PW_SIM_SEEN_BYTES = 8,
  PW_SIM_SEEN_COLLECTIVE_BYTES = 16,
  PW_SIM_SEEN_OVER = 32,
};

/* One directive (tokens[0]) with its arguments; |end| ends the line. */
static pw_status_t pw_sim_directive(unsigned line, const pw_sim_token_t* tokens, size_t count,
                                    const char* end, const pw_mesh_shape_t* mesh,
                                    unsigned* seen, pw_sim__program_t* p) {
  pw_sim_token_t d = tokens[0];
  bool is_param = pw_sim_token_is(d, "input") || pw_sim_token_is(d, "output");
  size_t want = is_param ? 3 : 2;
  if (pw_sim_token_is(d, "op")) return pw_sim_line_error(line, "a second", d);
  if (pw_sim_token_is(d, "over")) {
    if (*seen & PW_SIM_SEEN_OVER) return pw_sim_line_error(line, "repeated directive", d);
    *seen |= PW_SIM_SEEN_OVER;
    return pw_sim_parse_over(line, d.begin + d.length, end, mesh, &p->over_axes);
  }
  /* A PartitionSpec takes the rest of the line (it may hold spaces). */
  bool spec = is_param && count >= 3 && tokens[2].length >= 2 && tokens[2].begin[0] == 'P' &&
              tokens[2].begin[1] == '(';
  if (spec) count = 3;
  static const struct {
    const char* name;
    unsigned bit;
  } once[] = {{"kind", PW_SIM_SEEN_KIND},
              {"time", PW_SIM_SEEN_TIME},
              {"flops", PW_SIM_SEEN_FLOPS},
              {"bytes", PW_SIM_SEEN_BYTES},
              {"collective_bytes", PW_SIM_SEEN_COLLECTIVE_BYTES}};
  unsigned bit = 0;
  for (size_t i = 0; i < sizeof(once) / sizeof(once[0]); ++i) {
    if (pw_sim_token_is(d, once[i].name)) bit = once[i].bit;
  }
  if (bit == 0 && want == 2) return pw_sim_line_error(line, "unknown directive", d);
  if (count != want) {
    return pw_sim_line_error(line, want == 3 ? "expects DTYPE[DIMS] SHARDING:"
                                             : "expects exactly one argument:",
                             d);
  }
  if (bit != 0) {
    if (*seen & bit) return pw_sim_line_error(line, "repeated directive", d);
    *seen |= bit;
  }
  switch (bit) {
    case PW_SIM_SEEN_KIND:
      for (int k = 0; k < PW_SIM__KIND_COUNT; ++k) {
        if (pw_sim_token_is(tokens[1], pw_sim_kind_names[k])) {
          p->kind = (pw_sim__kind_t)k;
          return NULL;
        }
      }
      return pw_sim_line_error(line, "unknown kind (compute, copy, collective, all_reduce_sum, "
                               "all_gather, reduce_scatter, all_to_all)",
                               tokens[1]);
    case PW_SIM_SEEN_TIME: return pw_sim_parse_duration(line, tokens[1], &p->time_ns);
    case PW_SIM_SEEN_FLOPS: return pw_sim_parse_number(line, tokens[1], &p->flops);
    case PW_SIM_SEEN_BYTES: return pw_sim_parse_number(line, tokens[1], &p->bytes);
    case PW_SIM_SEEN_COLLECTIVE_BYTES:
      p->has_collective_bytes = true;
      return pw_sim_parse_number(line, tokens[1], &p->collective_bytes);
    default: break;
  }
  bool input = pw_sim_token_is(d, "input");
  uint32_t* n = input ? &p->input_count : &p->output_count;
  if (*n == PW_SIM__MAX_PARAMS) {
    return pw_sim_line_error(line, "too many parameters (maximum 512):", d);
  }
  pw_backend_param_t* param = input ? &p->inputs[*n] : &p->outputs[*n];
  memset(param, 0, sizeof(*param));
  PW_RETURN_IF_ERROR(pw_sim_parse_array(line, tokens[1], param));
  if (spec) {
    PW_RETURN_IF_ERROR(pw_sim_parse_spec(line, tokens[2].begin, end, param->shape.rank, mesh,
                                         &param->sharding));
  } else {
    PW_RETURN_IF_ERROR(pw_sim_parse_sharding(line, tokens[2], &param->sharding));
  }
  ++*n;
  return NULL;
}

/* The dtypes all_reduce_sum adds (pw_sim__all_reduce): not bool, the f8
 * types or c64. */
static bool pw_sim_summable(pw_dtype_t dtype) {
  switch (dtype) {
    case PW_DTYPE_F32: case PW_DTYPE_F64: case PW_DTYPE_F16: case PW_DTYPE_BF16:
    case PW_DTYPE_I8: case PW_DTYPE_I16: case PW_DTYPE_I32: case PW_DTYPE_I64:
    case PW_DTYPE_U8: case PW_DTYPE_U16: case PW_DTYPE_U32: case PW_DTYPE_U64:
      return true;
    default:
      return false;
  }
}

/* Per-kind parameter rules that need no mesh. */
static pw_status_t pw_sim_kind_rules(const pw_sim__program_t* p) {
  if (p->over_axes != 0 && !pw_sim__is_collective(p->kind)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim program '%s': 'over' names the mesh axes of a collective; kind "
                          "%s is not one",
                          p->name, pw_sim__kind_name(p->kind));
  }
  if (p->kind != PW_SIM__COPY && p->kind != PW_SIM__ALL_REDUCE_SUM) return NULL;
  if (p->input_count != 1 || p->output_count != 1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim program '%s': kind %s takes 1 input and 1 output, not %u and %u",
                          p->name, pw_sim__kind_name(p->kind), p->input_count, p->output_count);
  }
  pw_dtype_t dtype = p->inputs[0].dtype;
  if (p->outputs[0].dtype != dtype) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim program '%s': kind %s needs input and output of one dtype "
                          "(input %s, output %s)",
                          p->name, pw_sim__kind_name(p->kind), pw_dtype_name(dtype),
                          pw_dtype_name(p->outputs[0].dtype));
  }
  if (p->kind == PW_SIM__ALL_REDUCE_SUM && !pw_sim_summable(dtype)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim program '%s': all_reduce_sum sums f32, f64, f16, bf16 and "
                          "the integer dtypes, not %s",
                          p->name, pw_dtype_name(dtype));
  }
  return NULL;
}

pw_status_t pw_sim__program_parse(const char* text, size_t size, const pw_mesh_shape_t* mesh,
                                  pw_sim__program_t* out) {
  memset(out, 0, sizeof(*out));
  if (text == NULL && size != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "sim program: NULL text of %zu bytes",
                          size);
  }
  unsigned seen = 0;
  bool have_op = false;
  unsigned line = 0;
  size_t at = 0;
  while (at < size) {
    ++line;
    const char* begin = text + at;
    const char* newline = memchr(begin, '\n', size - at);
    size_t length = newline ? (size_t)(newline - begin) : size - at;
    at += length + (newline ? 1 : 0);
    if (length > 0 && begin[length - 1] == '\r') --length;
    for (size_t i = 0; i < length; ++i) {
      unsigned char c = (unsigned char)begin[i];
      if ((c < 0x20 && c != '\t') || c >= 0x7F) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "sim program line %u: byte 0x%02x at column %zu is not printable "
                              "ASCII",
                              line, c, i + 1);
      }
    }
    pw_sim_token_t tokens[PW_SIM_MAX_TOKENS];
    size_t count = pw_sim_tokenize(begin, length, tokens);
    if (count == 0 || tokens[0].begin[0] == '#') continue;
    bool rest_of_line = pw_sim_token_is(tokens[0], "over") ||
                        ((pw_sim_token_is(tokens[0], "input") ||
                          pw_sim_token_is(tokens[0], "output")) &&
                         count >= 3 && tokens[2].length >= 2 && tokens[2].begin[0] == 'P' &&
                         tokens[2].begin[1] == '(');
    if (count > PW_SIM_MAX_TOKENS && !rest_of_line) {
      return pw_sim_line_error(line, "too many tokens after", tokens[0]);
    }
    if (!have_op) {
      if (!pw_sim_token_is(tokens[0], "op")) {
        return pw_sim_line_error(line, "the first directive must be 'op NAME', not", tokens[0]);
      }
      if (count != 2 || !pw_sim_is_name(tokens[1])) {
        return pw_sim_line_error(line, "op needs one NAME ([A-Za-z_][A-Za-z0-9_.-]*, < 64 "
                                 "bytes), got",
                                 count >= 2 ? tokens[1] : tokens[0]);
      }
      memcpy(out->name, tokens[1].begin, tokens[1].length);
      out->name[tokens[1].length] = '\0';
      have_op = true;
      continue;
    }
    PW_RETURN_IF_ERROR(pw_sim_directive(line, tokens, count, begin + length, mesh, &seen, out));
  }
  if (!have_op) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim program: no 'op NAME' directive (%zu bytes, %u lines)", size, line);
  }
  return pw_sim_kind_rules(out);
}

/* 0 for a spec that fails its check (reported before this is called). */
static size_t pw_sim_shard_bytes(const pw_backend_param_t* param, const pw_mesh_shape_t* mesh) {
  size_t bytes = 0;
  pw_status_free(pw_array_spec_byte_sizes(param, mesh, NULL, &bytes));
  return bytes;
}

pw_status_t pw_sim__program_check(const pw_sim__program_t* p, const pw_mesh_shape_t* mesh) {
  PW_RETURN_IF_ERROR_CTX(pw_mesh_shape_check(mesh), "sim program '%s'", p->name);
  for (int pass = 0; pass < 2; ++pass) {
    uint32_t count = pass == 0 ? p->input_count : p->output_count;
    const pw_backend_param_t* params = pass == 0 ? p->inputs : p->outputs;
    for (uint32_t i = 0; i < count; ++i) {
      PW_RETURN_IF_ERROR_CTX(pw_array_spec_check(&params[i], mesh), "sim program '%s' %s %u",
                             p->name, pass == 0 ? "input" : "output", i);
    }
  }
  PW_RETURN_IF_ERROR(pw_sim_kind_rules(p));
  if (p->over_axes >> mesh->rank != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim program '%s': 'over' names mesh axis %u; the mesh has %u axes",
                          p->name, 31u - (uint32_t)__builtin_clz(p->over_axes), mesh->rank);
  }
  if (p->kind == PW_SIM__COPY || p->kind == PW_SIM__ALL_REDUCE_SUM) {
    size_t in = pw_sim_shard_bytes(&p->inputs[0], mesh);
    size_t out = pw_sim_shard_bytes(&p->outputs[0], mesh);
    if (in != out) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "sim program '%s': kind %s needs equal shards, input 0 has %zu "
                            "bytes per device and output 0 %zu",
                            p->name, pw_sim__kind_name(p->kind), in, out);
    }
  }
  return NULL;
}

uint32_t pw_sim__group_size_over(const pw_mesh_shape_t* mesh, uint32_t axes) {
  if (axes == 0) return pw_mesh_shape_device_count(mesh);
  uint32_t size = 1;
  for (uint32_t a = 0; a < mesh->rank; ++a) {
    if (axes >> a & 1u) size *= mesh->dims[a];
  }
  return size;
}
