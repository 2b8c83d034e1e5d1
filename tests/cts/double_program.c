/* The test double's program text (parse, canonical form) and executable
 * bytes (serialize, checked deserialize). Formats: see double_backend.h. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cts/double_internal.h"

#define PW_DOUBLE_FORMAT_VERSION 1u
#define PW_DOUBLE_HEADER_SIZE 20u

static const char* const pw_double_op_names[] = {
    "noop", "copy", "fill", "fail", "all_reduce_sum",
};
#define PW_DOUBLE_OP_COUNT (sizeof(pw_double_op_names) / sizeof(pw_double_op_names[0]))

/* A word of a line: [begin, begin + length). */
typedef struct pw_double_word_t {
  const char* begin;
  size_t length;
} pw_double_word_t;

static bool pw_double_word_is(pw_double_word_t w, const char* text) {
  return strlen(text) == w.length && memcmp(w.begin, text, w.length) == 0;
}

/* Splits [line, line + length) at blanks into at most |capacity| words;
 * returns the word count, or capacity + 1 if there are more. */
static size_t pw_double_split_words(const char* line, size_t length,
                                    pw_double_word_t* words, size_t capacity) {
  size_t count = 0;
  size_t i = 0;
  while (i < length) {
    while (i < length && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    if (i == length) break;
    size_t start = i;
    while (i < length && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (count == capacity) return capacity + 1;
    words[count].begin = line + start;
    words[count].length = i - start;
    ++count;
  }
  return count;
}

/* Parses a decimal number of at most 12 digits in [p, end); advances |p|. */
static bool pw_double_parse_number(const char** p, const char* end, uint64_t* out) {
  uint64_t value = 0;
  const char* start = *p;
  while (*p < end && **p >= '0' && **p <= '9') {
    if (*p - start >= 12) return false;
    value = value * 10u + (uint64_t)(**p - '0');
    ++*p;
  }
  if (*p == start) return false;
  *out = value;
  return true;
}

static pw_status_t pw_double_line_error(unsigned line, const char* what,
                                        pw_double_word_t word) {
  int shown = word.length > 40 ? 40 : (int)word.length;
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                        "double program line %u: %s '%.*s'", line, what, shown,
                        word.begin);
}

/* "f32[8,4]" */
static pw_status_t pw_double_parse_array(unsigned line, pw_double_word_t word,
                                         pw_backend_param_t* param) {
  const char* end = word.begin + word.length;
  const char* bracket = memchr(word.begin, '[', word.length);
  if (bracket == NULL || end[-1] != ']' ||
      !pw_dtype_parse(word.begin, (size_t)(bracket - word.begin), &param->dtype)) {
    return pw_double_line_error(line, "expected <dtype>[<dims>], got", word);
  }
  const char* p = bracket + 1;
  uint32_t rank = 0;
  while (p < end - 1) {
    uint64_t dim = 0;
    if (rank == PW_MAX_RANK || !pw_double_parse_number(&p, end - 1, &dim) ||
        dim == 0 || (p < end - 1 && *p++ != ',') ||
        (p == end - 1 && p[-1] == ',')) {
      return pw_double_line_error(line, "bad dimensions in", word);
    }
    param->shape.dims[rank++] = (int64_t)dim;
  }
  param->shape.rank = rank;
  pw_status_t status = pw_shape_check(&param->shape);
  if (status != NULL) return pw_status_annotate(status, "double program line %u", line);
  return NULL;
}

/* "replicated", "split(0,1)", "split(0,all)" */
static pw_status_t pw_double_parse_sharding(unsigned line, pw_double_word_t word,
                                            pw_sharding_t* sharding) {
  if (pw_double_word_is(word, "replicated")) {
    *sharding = pw_sharding_replicated();
    return NULL;
  }
  const char* p = word.begin;
  const char* end = word.begin + word.length;
  uint64_t axis = 0;
  uint64_t mesh_axis = 0;
  if (word.length < 10 || memcmp(p, "split(", 6) != 0 || end[-1] != ')') {
    return pw_double_line_error(line, "expected a sharding, got", word);
  }
  p += 6;
  if (!pw_double_parse_number(&p, end, &axis) || axis >= PW_MAX_RANK || *p++ != ',') {
    return pw_double_line_error(line, "bad split axis in", word);
  }
  if ((size_t)(end - p) == 4 && memcmp(p, "all)", 4) == 0) {
    *sharding = pw_sharding_split((uint32_t)axis, PW_MESH_AXIS_ALL);
    return NULL;
  }
  if (!pw_double_parse_number(&p, end, &mesh_axis) || mesh_axis >= PW_MAX_MESH_RANK ||
      p != end - 1) {
    return pw_double_line_error(line, "bad mesh axis in", word);
  }
  *sharding = pw_sharding_split((uint32_t)axis, (uint32_t)mesh_axis);
  return NULL;
}

static pw_status_t pw_double_parse_op(unsigned line, const pw_double_word_t* words,
                                      size_t count, pw_double_program_t* program) {
  size_t op = 0;
  while (op < PW_DOUBLE_OP_COUNT && !pw_double_word_is(words[0], pw_double_op_names[op])) ++op;
  if (op == PW_DOUBLE_OP_COUNT) {
    return pw_double_line_error(line, "unknown operation", words[0]);
  }
  program->op = (pw_double_op_t)op;
  bool wants_arg = program->op == PW_DOUBLE_OP_FILL || program->op == PW_DOUBLE_OP_FAIL;
  if (count != (wants_arg ? 2u : 1u)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double program line %u: '%s' takes %s", line,
                          pw_double_op_names[op], wants_arg ? "one number" : "no argument");
  }
  if (!wants_arg) return NULL;
  const char* p = words[1].begin;
  uint64_t value = 0;
  uint64_t low = program->op == PW_DOUBLE_OP_FILL ? 0 : 1;
  uint64_t high = program->op == PW_DOUBLE_OP_FILL ? 255 : PW_STATUS_CODE_COUNT - 1;
  if (!pw_double_parse_number(&p, words[1].begin + words[1].length, &value) ||
      p != words[1].begin + words[1].length || value < low || value > high) {
    return pw_double_line_error(line, "argument out of range:", words[1]);
  }
  program->arg = (uint32_t)value;
  return NULL;
}

static pw_status_t pw_double_parse_param(unsigned line, const pw_double_word_t* words,
                                         size_t count, const pw_mesh_shape_t* mesh,
                                         pw_double_program_t* program) {
  pw_executable_signature_t* signature = &program->signature;
  bool input = pw_double_word_is(words[0], "input");
  if (!input && !pw_double_word_is(words[0], "output")) {
    return pw_double_line_error(line, "expected 'input' or 'output', got", words[0]);
  }
  if (count < 2 || count > 3) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double program line %u: expected '%s <array> [sharding]'",
                          line, input ? "input" : "output");
  }
  uint32_t* n = input ? &signature->input_count : &signature->output_count;
  uint32_t capacity = program->wide == NULL ? PW_BACKEND_MAX_PARAMS
                     : input                ? program->wide_inputs
                                            : program->wide_outputs;
  if (*n == capacity) { /* the count pass saw them all: only the fixed arrays' bound */
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double program line %u: more than %u %ss", line, capacity,
                          input ? "input" : "output");
  }
  pw_backend_param_t* param = input ? pw_double_input(program, *n) : pw_double_output(program, *n);
  memset(param, 0, sizeof(*param));
  PW_RETURN_IF_ERROR(pw_double_parse_array(line, words[1], param));
  param->sharding = pw_sharding_replicated();
  if (count == 3) PW_RETURN_IF_ERROR(pw_double_parse_sharding(line, words[2], &param->sharding));
  pw_status_t status = pw_sharding_check(&param->sharding, &param->shape, mesh);
  if (status != NULL) return pw_status_annotate(status, "double program line %u", line);
  ++*n;
  return NULL;
}

/* Fills the default signature, or checks the given one suits the op. */
static pw_status_t pw_double_check_signature(pw_double_program_t* program,
                                             const pw_mesh_shape_t* mesh) {
  pw_executable_signature_t* sig = &program->signature;
  if (sig->input_count == 0 && sig->output_count == 0) {
    pw_backend_param_t param;
    memset(&param, 0, sizeof(param));
    param.dtype = program->op == PW_DOUBLE_OP_ALL_REDUCE_SUM ? PW_DTYPE_F32 : PW_DTYPE_U8;
    param.shape.rank = 1;
    param.shape.dims[0] = 1;
    param.sharding = pw_sharding_replicated();
    if (program->op == PW_DOUBLE_OP_COPY || program->op == PW_DOUBLE_OP_ALL_REDUCE_SUM) {
      *pw_double_input(program, sig->input_count++) = param;
    }
    if (program->op != PW_DOUBLE_OP_NOOP && program->op != PW_DOUBLE_OP_FAIL) {
      *pw_double_output(program, sig->output_count++) = param;
    }
  }
  if (program->op == PW_DOUBLE_OP_FILL && sig->input_count != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double program: 'fill' takes no input, got %u",
                          sig->input_count);
  }
  if (program->op == PW_DOUBLE_OP_COPY || program->op == PW_DOUBLE_OP_ALL_REDUCE_SUM) {
    const char* name = pw_double_op_names[program->op];
    if (sig->input_count != 1 || sig->output_count != 1) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "double program: '%s' needs 1 input and 1 output, got %u and %u",
                            name, sig->input_count, sig->output_count);
    }
    const pw_backend_param_t* in = pw_double_input(program, 0);
    const pw_backend_param_t* out = pw_double_output(program, 0);
    pw_shape_t in_shard = pw_sharding_shard_shape(&in->sharding, &in->shape, mesh);
    pw_shape_t out_shard = pw_sharding_shard_shape(&out->sharding, &out->shape, mesh);
    if (in->dtype != out->dtype ||
        pw_shape_element_count(&in_shard) != pw_shape_element_count(&out_shard)) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "double program: '%s' input and output differ in dtype "
                            "or shard size", name);
    }
  }
  return NULL;
}

void pw_double_program_free(pw_double_program_t* program) {
  if (program->wide != NULL) {
    pw_allocator_free(program->allocator, program->wide,
                      ((size_t)program->wide_inputs + program->wide_outputs) *
                          sizeof(pw_backend_param_t));
  }
  program->wide = NULL;
  program->wide_inputs = program->wide_outputs = 0;
}

/* The count pass: how many lines start with "input" and "output". Past
 * the fixed arrays, every spec goes to |program->wide|. */
static pw_status_t pw_double_program_size(const char* text, size_t size,
                                          pw_double_program_t* program) {
  uint32_t inputs = 0, outputs = 0;
  for (size_t at = 0; at < size;) {
    const char* begin = text + at;
    const char* newline = memchr(begin, '\n', size - at);
    size_t length = newline ? (size_t)(newline - begin) : size - at;
    at += length + (newline ? 1 : 0);
    pw_double_word_t words[1];
    if (pw_double_split_words(begin, length, words, 1) == 0) continue;
    inputs += pw_double_word_is(words[0], "input");
    outputs += pw_double_word_is(words[0], "output");
  }
  if (inputs > PW_DOUBLE_MAX_PARAMS || outputs > PW_DOUBLE_MAX_PARAMS) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double program: %u inputs and %u outputs (at most %u each)", inputs,
                          outputs, PW_DOUBLE_MAX_PARAMS);
  }
  if (inputs <= PW_BACKEND_MAX_PARAMS && outputs <= PW_BACKEND_MAX_PARAMS) return NULL;
  PW_RETURN_IF_ERROR_CTX(pw_allocator_calloc_array(program->allocator, (size_t)inputs + outputs,
                                                   sizeof(pw_backend_param_t), 0,
                                                   (void**)&program->wide),
                         "double program: %u inputs and %u outputs", inputs, outputs);
  program->wide_inputs = inputs;
  program->wide_outputs = outputs;
  return NULL;
}

pw_status_t pw_double_program_parse(const char* text, size_t size,
                                    const pw_mesh_shape_t* mesh, pw_allocator_t allocator,
                                    pw_double_program_t* out_program) {
  memset(out_program, 0, sizeof(*out_program));
  out_program->allocator = allocator;
  if (mesh == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "double compile: mesh is NULL");
  }
  PW_RETURN_IF_ERROR_CTX(pw_mesh_shape_check(mesh), "double compile");
  if (text == NULL && size != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "double program is NULL");
  }
  if (size > PW_DOUBLE_MAX_TEXT) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double program is %zu bytes (maximum %u)", size,
                          PW_DOUBLE_MAX_TEXT);
  }
  out_program->signature.mesh = *mesh;
  if (size > 0) PW_RETURN_IF_ERROR(pw_double_program_size(text, size, out_program));
  bool have_op = false;
  unsigned line = 0;
  size_t at = 0;
  while (at < size) {
    const char* begin = text + at;
    const char* newline = memchr(begin, '\n', size - at);
    size_t length = newline ? (size_t)(newline - begin) : size - at;
    at += length + (newline ? 1 : 0);
    ++line;
    for (size_t i = 0; i < length; ++i) {
      unsigned char c = (unsigned char)begin[i];
      if ((c < 0x20 && c != '\t' && c != '\r') || c >= 0x7F) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "double program line %u: byte 0x%02X is not printable ASCII",
                              line, c);
      }
    }
    pw_double_word_t words[4];
    size_t count = pw_double_split_words(begin, length, words, 3);
    if (count == 0 || words[0].begin[0] == '#') continue;
    if (count > 3) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "double program line %u: too many words", line);
    }
    if (!have_op) {
      PW_RETURN_IF_ERROR(pw_double_parse_op(line, words, count, out_program));
      have_op = true;
    } else {
      PW_RETURN_IF_ERROR(pw_double_parse_param(line, words, count, mesh, out_program));
    }
  }
  if (!have_op) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double program has no operation line");
  }
  snprintf(out_program->signature.name, sizeof(out_program->signature.name), "%s",
           pw_double_op_names[out_program->op]);
  return pw_double_check_signature(out_program, mesh);
}

/* Text sink that never writes a NUL: |buffer| may be exactly the text's
 * length (or NULL with capacity 0 to measure). */
typedef struct pw_double_sink_t {
  char* buffer;
  size_t capacity;
  size_t length;
} pw_double_sink_t;

static void pw_double_append(pw_double_sink_t* sink, const char* format, ...)
    PW_PRINTF_ATTR(2, 3);
static void pw_double_append(pw_double_sink_t* sink, const char* format, ...) {
  char piece[64];
  va_list args;
  va_start(args, format);
  int n = vsnprintf(piece, sizeof(piece), format, args);
  va_end(args);
  size_t length = n < 0 ? 0 : (size_t)n;
  if (length >= sizeof(piece)) length = sizeof(piece) - 1;
  for (size_t i = 0; i < length; ++i) {
    if (sink->length + i < sink->capacity) sink->buffer[sink->length + i] = piece[i];
  }
  sink->length += length;
}

/* Writes the canonical text of |program| into |buffer| (no NUL); returns
 * the full length. */
static size_t pw_double_program_format(const pw_double_program_t* program,
                                       char* buffer, size_t capacity) {
  pw_double_sink_t sink = {buffer, capacity, 0};
  pw_double_append(&sink, "%s", pw_double_op_names[program->op]);
  if (program->op == PW_DOUBLE_OP_FILL || program->op == PW_DOUBLE_OP_FAIL) {
    pw_double_append(&sink, " %u", program->arg);
  }
  pw_double_append(&sink, "\n");
  const pw_executable_signature_t* sig = &program->signature;
  for (uint32_t i = 0; i < sig->input_count + sig->output_count; ++i) {
    bool input = i < sig->input_count;
    const pw_backend_param_t* p =
        input ? pw_double_input_c(program, i) : pw_double_output_c(program, i - sig->input_count);
    pw_double_append(&sink, "%s %s[", input ? "input" : "output", pw_dtype_name(p->dtype));
    for (uint32_t k = 0; k < p->shape.rank; ++k) {
      pw_double_append(&sink, "%s%" PRId64, k ? "," : "", p->shape.dims[k]);
    }
    if (p->sharding.kind == PW_SHARDING_REPLICATED) {
      pw_double_append(&sink, "] replicated\n");
    } else if (p->sharding.mesh_axis == PW_MESH_AXIS_ALL) {
      pw_double_append(&sink, "] split(%u,all)\n", p->sharding.tensor_axis);
    } else {
      pw_double_append(&sink, "] split(%u,%u)\n", p->sharding.tensor_axis,
                       p->sharding.mesh_axis);
    }
  }
  return sink.length;
}

static uint64_t pw_double_fnv1a64(const unsigned char* p, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static void pw_double_put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t pw_double_get_u32(const unsigned char* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

pw_status_t pw_double_program_serialize(const pw_double_program_t* program,
                                        const char* options,
                                        pw_allocator_t allocator,
                                        void** out_bytes, size_t* out_size) {
  if (options == NULL) options = "";
  size_t options_length = strlen(options);
  if (options_length > PW_DOUBLE_MAX_TEXT) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double compile: options are %zu bytes (maximum %u)",
                          options_length, PW_DOUBLE_MAX_TEXT);
  }
  size_t text_length = pw_double_program_format(program, NULL, 0);
  size_t payload = 4 + 4 * PW_MAX_MESH_RANK + 4 + options_length + 4 + text_length;
  size_t total = PW_DOUBLE_HEADER_SIZE + payload;
  unsigned char* bytes = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_allocator_calloc(allocator, total, 0, (void**)&bytes),
                         "double compile");
  unsigned char* p = bytes + PW_DOUBLE_HEADER_SIZE;
  const pw_mesh_shape_t* mesh = &program->signature.mesh;
  pw_double_put_u32(p, mesh->rank);
  for (uint32_t i = 0; i < PW_MAX_MESH_RANK; ++i) {
    pw_double_put_u32(p + 4 + 4 * i, i < mesh->rank ? mesh->dims[i] : 0);
  }
  p += 4 + 4 * PW_MAX_MESH_RANK;
  pw_double_put_u32(p, (uint32_t)options_length);
  memcpy(p + 4, options, options_length);
  p += 4 + options_length;
  pw_double_put_u32(p, (uint32_t)text_length);
  pw_double_program_format(program, (char*)p + 4, text_length);
  memcpy(bytes, "PWDB", 4);
  pw_double_put_u32(bytes + 4, PW_DOUBLE_FORMAT_VERSION);
  pw_double_put_u32(bytes + 8, (uint32_t)payload);
  uint64_t sum = pw_double_fnv1a64(bytes + PW_DOUBLE_HEADER_SIZE, payload);
  pw_double_put_u32(bytes + 12, (uint32_t)sum);
  pw_double_put_u32(bytes + 16, (uint32_t)(sum >> 32));
  *out_bytes = bytes;
  *out_size = total;
  return NULL;
}

pw_status_t pw_double_program_deserialize(const void* bytes, size_t size,
                                          pw_allocator_t allocator,
                                          pw_double_program_t* out_program) {
  memset(out_program, 0, sizeof(*out_program));
  out_program->allocator = allocator;
  const unsigned char* b = bytes;
  if (b == NULL || size < 4 || memcmp(b, "PWDB", 4) != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double load: %zu bytes are not a double executable "
                          "(no 'PWDB' magic)", size);
  }
  if (size < PW_DOUBLE_HEADER_SIZE) {
    return pw_status_make(PW_STATUS_DATA_LOSS,
                          "double load: executable truncated to %zu bytes", size);
  }
  uint32_t version = pw_double_get_u32(b + 4);
  if (version != PW_DOUBLE_FORMAT_VERSION) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double load: executable format version %u (supported: %u)",
                          version, PW_DOUBLE_FORMAT_VERSION);
  }
  size_t payload = pw_double_get_u32(b + 8);
  if (payload != size - PW_DOUBLE_HEADER_SIZE) {
    return pw_status_make(PW_STATUS_DATA_LOSS,
                          "double load: header says %zu payload bytes, %zu present",
                          payload, size - PW_DOUBLE_HEADER_SIZE);
  }
  uint64_t sum = (uint64_t)pw_double_get_u32(b + 12) | (uint64_t)pw_double_get_u32(b + 16) << 32;
  const unsigned char* p = b + PW_DOUBLE_HEADER_SIZE;
  if (sum != pw_double_fnv1a64(p, payload)) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "double load: executable checksum mismatch");
  }
  const unsigned char* end = p + payload;
  pw_mesh_shape_t mesh;
  memset(&mesh, 0, sizeof(mesh));
  if ((size_t)(end - p) < 4 + 4 * PW_MAX_MESH_RANK + 4) goto corrupt;
  mesh.rank = pw_double_get_u32(p);
  if (mesh.rank > PW_MAX_MESH_RANK) goto corrupt;
  for (uint32_t i = 0; i < mesh.rank; ++i) mesh.dims[i] = pw_double_get_u32(p + 4 + 4 * i);
  p += 4 + 4 * PW_MAX_MESH_RANK;
  size_t options_length = pw_double_get_u32(p);
  p += 4;
  if ((size_t)(end - p) < options_length + 4) goto corrupt;
  p += options_length;
  size_t text_length = pw_double_get_u32(p);
  p += 4;
  if ((size_t)(end - p) != text_length) goto corrupt;
  pw_status_t status =
      pw_double_program_parse((const char*)p, text_length, &mesh, allocator, out_program);
  if (status != NULL) {
    pw_status_t wrapped = pw_status_make(PW_STATUS_DATA_LOSS,
                                         "double load: embedded program is invalid: %s",
                                         pw_status_message(status));
    pw_status_free(status);
    return wrapped;
  }
  return NULL;
corrupt:
  return pw_status_make(PW_STATUS_DATA_LOSS,
                        "double load: executable payload is inconsistent");
}
