/* compile, load, unload: program text -> executable bytes -> executable.
 *
 * Executable bytes, format version 2 (all integers little-endian):
 *
 *   0   8  magic "PWCPUEXE"
 *   8   4  format version (2; load also reads 1)
 *   12  4  payload size in bytes
 *   16  8  FNV-1a 64 of the payload
 *   24  .. payload:
 *        str   kernel name             (str = u32 length + bytes, no NUL)
 *        u32   mesh rank, u32 x rank   mesh dims
 *        u32   input count, output count, attribute count
 *        param x (inputs + outputs):   u32 dtype, u32 rank, i64 x rank dims,
 *                                      u32 sharding kind, u32 tensor axis,
 *                                      u32 mesh axis, then (version 2)
 *                                      u32 tile count, u8 tensor axis + u8
 *                                      mesh axis x tile count, u32 unreduced
 *                                      axes mask
 *        attr x count:                 str name, u32 kind, then u64 IEEE-754
 *                                      bits (number) or str (string)
 *        u32   over axes mask          (version 2; version 1 has none: 0)
 *
 * The encoding is a function of the parsed program and the mesh only, so
 * the same program gives the same bytes (whitespace and comments do not
 * matter). Load trusts nothing: it checks the header and checksum, decodes
 * with bounds checks, and re-validates the program against this backend's
 * registry and the mesh, exactly as compile did. */
#include <stdalign.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "pathways/struct_size.h"

#define PW_CPU_MAGIC "PWCPUEXE"
#define PW_CPU_FORMAT_VERSION 2u
/* The oldest version load still reads (no tiles, no over axes). */
#define PW_CPU_FORMAT_VERSION_MIN 1u
#define PW_CPU_HEADER_SIZE 24u

static uint64_t pw_cpu_fnv1a64(const unsigned char* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

/*---------------------------------------------------------------------------
 * Encoding
 *-------------------------------------------------------------------------*/

typedef struct pw_cpu_out_t {
  unsigned char* p;
  size_t n;
  size_t capacity;
} pw_cpu_out_t;

static void pw_cpu_put(pw_cpu_out_t* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    if (out->n < out->capacity) out->p[out->n] = (unsigned char)(value >> (8 * i));
    ++out->n;
  }
}

static void pw_cpu_put_str(pw_cpu_out_t* out, const char* text) {
  size_t length = strlen(text);
  pw_cpu_put(out, length, 4);
  for (size_t i = 0; i < length; ++i) pw_cpu_put(out, (unsigned char)text[i], 1);
}

static void pw_cpu_put_param(pw_cpu_out_t* out, const pw_backend_param_t* param) {
  pw_cpu_put(out, (uint32_t)param->dtype, 4);
  pw_cpu_put(out, param->shape.rank, 4);
  for (uint32_t i = 0; i < param->shape.rank; ++i) {
    pw_cpu_put(out, (uint64_t)param->shape.dims[i], 8);
  }
  const pw_sharding_t* sharding = &param->sharding;
  bool split = sharding->kind == PW_SHARDING_SPLIT;
  bool tiled = sharding->kind == PW_SHARDING_TILED;
  pw_cpu_put(out, (uint32_t)sharding->kind, 4);
  pw_cpu_put(out, split ? sharding->tensor_axis : 0, 4);
  pw_cpu_put(out, split ? sharding->mesh_axis : 0, 4);
  uint32_t tiles = tiled ? sharding->tile_count : 0;
  pw_cpu_put(out, tiles, 4);
  for (uint32_t i = 0; i < tiles && i < PW_MAX_MESH_RANK; ++i) {
    pw_cpu_put(out, sharding->tiles[i].tensor_axis, 1);
    pw_cpu_put(out, sharding->tiles[i].mesh_axis, 1);
  }
  pw_cpu_put(out, tiled ? sharding->unreduced_axes : 0, 4);
}

/* Encodes into |out| (header included). */
static void pw_cpu_encode(const pw_cpu_program_t* program,
                          const pw_mesh_shape_t* mesh, pw_cpu_out_t* out) {
  out->n = PW_CPU_HEADER_SIZE;
  pw_cpu_put_str(out, program->kernel);
  pw_cpu_put(out, mesh->rank, 4);
  for (uint32_t i = 0; i < mesh->rank; ++i) pw_cpu_put(out, mesh->dims[i], 4);
  pw_cpu_put(out, program->input_count, 4);
  pw_cpu_put(out, program->output_count, 4);
  pw_cpu_put(out, program->attr_count, 4);
  for (uint32_t i = 0; i < program->input_count; ++i) {
    pw_cpu_put_param(out, &program->inputs[i]);
  }
  for (uint32_t i = 0; i < program->output_count; ++i) {
    pw_cpu_put_param(out, &program->outputs[i]);
  }
  for (uint32_t i = 0; i < program->attr_count; ++i) {
    const pw_cpu_attr_t* attr = &program->attrs[i];
    pw_cpu_put_str(out, attr->name);
    pw_cpu_put(out, (uint32_t)attr->kind, 4);
    if (attr->kind == PW_CPU_ATTR_NUMBER) {
      uint64_t bits;
      memcpy(&bits, &attr->number, sizeof(bits));
      pw_cpu_put(out, bits, 8);
    } else {
      pw_cpu_put_str(out, attr->text);
    }
  }
  pw_cpu_put(out, program->over_axes, 4);
  size_t payload = out->n - PW_CPU_HEADER_SIZE;
  if (out->n <= out->capacity) {
    memcpy(out->p, PW_CPU_MAGIC, 8);
    size_t end = out->n;
    out->n = 8;
    pw_cpu_put(out, PW_CPU_FORMAT_VERSION, 4);
    pw_cpu_put(out, payload, 4);
    pw_cpu_put(out, pw_cpu_fnv1a64(out->p + PW_CPU_HEADER_SIZE, payload), 8);
    out->n = end;
  }
}

/*---------------------------------------------------------------------------
 * Decoding
 *-------------------------------------------------------------------------*/

typedef struct pw_cpu_in_t {
  const unsigned char* p;
  size_t n;
  size_t pos;
  const char* error; /* first problem, static text */
} pw_cpu_in_t;

static uint64_t pw_cpu_get(pw_cpu_in_t* in, int bytes, const char* what) {
  if (in->error != NULL) return 0;
  if (in->n - in->pos < (size_t)bytes) {
    in->error = what;
    return 0;
  }
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= (uint64_t)in->p[in->pos + i] << (8 * i);
  in->pos += (size_t)bytes;
  return value;
}

/* Reads a string into |buffer| (|capacity| with the NUL). */
static void pw_cpu_get_str(pw_cpu_in_t* in, char* buffer, size_t capacity,
                           const char* what) {
  uint64_t length = pw_cpu_get(in, 4, what);
  if (in->error != NULL) return;
  if (length >= capacity || length > in->n - in->pos) {
    in->error = what;
    return;
  }
  memcpy(buffer, in->p + in->pos, (size_t)length);
  buffer[length] = '\0';
  if (strlen(buffer) != length) in->error = what; /* embedded NUL */
  in->pos += (size_t)length;
}

static void pw_cpu_get_param(pw_cpu_in_t* in, uint32_t version, pw_backend_param_t* param) {
  memset(param, 0, sizeof(*param));
  param->dtype = (pw_dtype_t)pw_cpu_get(in, 4, "parameter dtype");
  uint64_t rank = pw_cpu_get(in, 4, "parameter rank");
  if (rank > PW_MAX_RANK) {
    if (in->error == NULL) in->error = "parameter rank";
    return;
  }
  param->shape.rank = (uint32_t)rank;
  for (uint32_t i = 0; i < param->shape.rank; ++i) {
    param->shape.dims[i] = (int64_t)pw_cpu_get(in, 8, "parameter dimension");
  }
  param->sharding.kind = (pw_sharding_kind_t)pw_cpu_get(in, 4, "sharding kind");
  param->sharding.tensor_axis = (uint32_t)pw_cpu_get(in, 4, "sharding tensor axis");
  param->sharding.mesh_axis = (uint32_t)pw_cpu_get(in, 4, "sharding mesh axis");
  if (version < 2) return;
  uint64_t tiles = pw_cpu_get(in, 4, "sharding tile count");
  if (tiles > PW_MAX_MESH_RANK) {
    if (in->error == NULL) in->error = "sharding tile count";
    return;
  }
  param->sharding.tile_count = (uint32_t)tiles;
  for (uint32_t i = 0; i < param->sharding.tile_count; ++i) {
    param->sharding.tiles[i].tensor_axis = (uint8_t)pw_cpu_get(in, 1, "sharding tile");
    param->sharding.tiles[i].mesh_axis = (uint8_t)pw_cpu_get(in, 1, "sharding tile");
  }
  param->sharding.unreduced_axes = (uint32_t)pw_cpu_get(in, 4, "sharding unreduced axes");
  bool tiled = param->sharding.kind == PW_SHARDING_TILED;
  if (in->error == NULL && !tiled &&
      (param->sharding.tile_count != 0 || param->sharding.unreduced_axes != 0)) {
    in->error = "tiles on a sharding that is not TILED";
  }
}

static pw_status_t pw_cpu_decode(const unsigned char* bytes, size_t size,
                                 pw_cpu_program_t* program, pw_mesh_shape_t* mesh) {
  if (size < 8 || memcmp(bytes, PW_CPU_MAGIC, 8) != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "not cpu backend executable bytes (%zu bytes, no "
                          "'" PW_CPU_MAGIC "' magic)",
                          size);
  }
  if (size < PW_CPU_HEADER_SIZE) {
    return pw_status_make(PW_STATUS_DATA_LOSS,
                          "cpu executable truncated: %zu bytes, the header "
                          "alone is %u",
                          size, PW_CPU_HEADER_SIZE);
  }
  pw_cpu_in_t header = {bytes, PW_CPU_HEADER_SIZE, 8, NULL};
  uint64_t version = pw_cpu_get(&header, 4, "version");
  uint64_t payload = pw_cpu_get(&header, 4, "payload size");
  uint64_t checksum = pw_cpu_get(&header, 8, "checksum");
  if (version < PW_CPU_FORMAT_VERSION_MIN || version > PW_CPU_FORMAT_VERSION) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu executable format version %llu is not supported "
                          "(this backend reads versions %u to %u)",
                          (unsigned long long)version, PW_CPU_FORMAT_VERSION_MIN,
                          PW_CPU_FORMAT_VERSION);
  }
  if (payload != size - PW_CPU_HEADER_SIZE) {
    return pw_status_make(PW_STATUS_DATA_LOSS,
                          "cpu executable %s: the header declares %llu payload "
                          "bytes, %zu follow it",
                          payload > size - PW_CPU_HEADER_SIZE ? "truncated"
                                                              : "has trailing bytes",
                          (unsigned long long)payload, size - PW_CPU_HEADER_SIZE);
  }
  uint64_t actual = pw_cpu_fnv1a64(bytes + PW_CPU_HEADER_SIZE, (size_t)payload);
  if (actual != checksum) {
    return pw_status_make(PW_STATUS_DATA_LOSS,
                          "cpu executable is corrupt: payload checksum "
                          "%016llx, header says %016llx",
                          (unsigned long long)actual, (unsigned long long)checksum);
  }
  pw_cpu_in_t in = {bytes, size, PW_CPU_HEADER_SIZE, NULL};
  memset(program, 0, sizeof(*program));
  memset(mesh, 0, sizeof(*mesh));
  pw_cpu_get_str(&in, program->kernel, sizeof(program->kernel), "kernel name");
  uint64_t mesh_rank = pw_cpu_get(&in, 4, "mesh rank");
  if (mesh_rank > PW_MAX_MESH_RANK && in.error == NULL) in.error = "mesh rank";
  for (uint64_t i = 0; i < mesh_rank && in.error == NULL; ++i) {
    mesh->dims[i] = (uint32_t)pw_cpu_get(&in, 4, "mesh dimension");
  }
  mesh->rank = (uint32_t)(in.error == NULL ? mesh_rank : 0);
  uint64_t inputs = pw_cpu_get(&in, 4, "input count");
  uint64_t outputs = pw_cpu_get(&in, 4, "output count");
  uint64_t attrs = pw_cpu_get(&in, 4, "attribute count");
  if (in.error == NULL && (inputs > PW_CPU_MAX_PARAMS ||
                           outputs > PW_CPU_MAX_PARAMS ||
                           attrs > PW_CPU_MAX_ATTRS)) {
    in.error = "parameter or attribute count";
  }
  if (in.error == NULL) {
    program->input_count = (uint32_t)inputs;
    program->output_count = (uint32_t)outputs;
    program->attr_count = (uint32_t)attrs;
  }
  for (uint32_t i = 0; i < program->input_count && in.error == NULL; ++i) {
    pw_cpu_get_param(&in, (uint32_t)version, &program->inputs[i]);
  }
  for (uint32_t i = 0; i < program->output_count && in.error == NULL; ++i) {
    pw_cpu_get_param(&in, (uint32_t)version, &program->outputs[i]);
  }
  for (uint32_t i = 0; i < program->attr_count && in.error == NULL; ++i) {
    pw_cpu_attr_t* attr = &program->attrs[i];
    pw_cpu_get_str(&in, attr->name, sizeof(attr->name), "attribute name");
    attr->kind = (pw_cpu_attr_kind_t)pw_cpu_get(&in, 4, "attribute kind");
    if (attr->kind == PW_CPU_ATTR_NUMBER) {
      uint64_t bits = pw_cpu_get(&in, 8, "attribute value");
      memcpy(&attr->number, &bits, sizeof(bits));
    } else if (attr->kind == PW_CPU_ATTR_STRING) {
      pw_cpu_get_str(&in, attr->text, sizeof(attr->text), "attribute value");
    } else if (in.error == NULL) {
      in.error = "attribute kind";
    }
  }
  if (version >= 2) program->over_axes = (uint32_t)pw_cpu_get(&in, 4, "over axes");
  if (in.error == NULL && in.pos != in.n) in.error = "trailing payload bytes";
  if (in.error != NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu executable payload is malformed at byte %zu (%s)",
                          in.pos, in.error);
  }
  PW_RETURN_IF_ERROR_CTX(pw_cpu__program_check(program), "cpu executable");
  PW_RETURN_IF_ERROR_CTX(pw_mesh_shape_check(mesh), "cpu executable");
  return NULL;
}

/* The input and output counts of executable bytes, read without the
 * checksum or the rest (0 and 0 when they do not read): sizes load's one
 * allocation before pw_cpu_decode checks everything. */
static void pw_cpu_peek_counts(const unsigned char* bytes, size_t size, uint32_t* out_inputs,
                               uint32_t* out_outputs) {
  *out_inputs = *out_outputs = 0;
  if (bytes == NULL || size < PW_CPU_HEADER_SIZE || memcmp(bytes, PW_CPU_MAGIC, 8) != 0) return;
  pw_cpu_in_t in = {bytes, size, PW_CPU_HEADER_SIZE, NULL};
  uint64_t length = pw_cpu_get(&in, 4, "kernel name");
  if (in.error != NULL || length > in.n - in.pos) return;
  in.pos += (size_t)length;
  uint64_t rank = pw_cpu_get(&in, 4, "mesh rank");
  if (in.error != NULL || rank > PW_MAX_MESH_RANK) return;
  for (uint64_t i = 0; i < rank; ++i) (void)pw_cpu_get(&in, 4, "mesh dimension");
  uint64_t inputs = pw_cpu_get(&in, 4, "input count");
  uint64_t outputs = pw_cpu_get(&in, 4, "output count");
  if (in.error != NULL || inputs > PW_CPU_MAX_PARAMS || outputs > PW_CPU_MAX_PARAMS) return;
  *out_inputs = (uint32_t)inputs;
  *out_outputs = (uint32_t)outputs;
}

/*---------------------------------------------------------------------------
 * vtable methods
 *-------------------------------------------------------------------------*/

pw_status_t pw_cpu__compile(void* self, const void* program, size_t program_size,
                            const pw_mesh_shape_t* mesh, const char* options,
                            pw_allocator_t allocator, void** out_bytes,
                            size_t* out_size) {
  if (out_bytes != NULL) *out_bytes = NULL;
  if (out_size != NULL) *out_size = 0;
  pw_cpu__backend_t* backend = self;
  if (backend == NULL || out_bytes == NULL || out_size == NULL || mesh == NULL ||
      (program == NULL && program_size != 0)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "cpu compile: NULL argument");
  }
  if (!pw_allocator_is_valid(allocator)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu compile: the output allocator has no alloc/free");
  }
  if (options != NULL && options[0] != '\0') {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu compile: unknown options '%.64s' (the cpu backend "
                          "takes none)",
                          options);
  }
  PW_RETURN_IF_ERROR_CTX(pw_mesh_shape_check(mesh), "cpu compile");
  /* The parsed program and its lines are big (PW_CPU_MAX_PARAMS specs):
   * on the heap, not the caller's stack. */
  typedef struct {
    pw_cpu_program_t program;
    pw_cpu__lines_t lines;
  } pw_cpu_parsed_t;
  pw_cpu_parsed_t* parsed = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_allocator_malloc(backend->allocator, sizeof(*parsed),
                                             alignof(pw_cpu_parsed_t), (void**)&parsed),
                         "cpu compile");
  pw_status_t status =
      pw_cpu__program_parse(program, program_size, mesh, &parsed->program, &parsed->lines);
  const pw_cpu__kernel_t* kernel =
      status == NULL ? pw_cpu__kernel_find(backend, parsed->program.kernel) : NULL;
  if (status == NULL && kernel == NULL) {
    status = pw_status_make(PW_STATUS_NOT_FOUND, "line %u: unknown kernel '%s'",
                            parsed->lines.kernel, parsed->program.kernel);
  }
  if (status == NULL) {
    status = pw_cpu__program_validate(kernel, &parsed->program, mesh, &parsed->lines);
  }
  void* bytes = NULL;
  if (status == NULL) {
    /* Two passes: the size (nothing written at capacity 0), then the bytes. */
    pw_cpu_out_t out = {.p = NULL, .n = 0, .capacity = 0};
    pw_cpu_encode(&parsed->program, mesh, &out);
    status = pw_allocator_malloc(allocator, out.n, 0, &bytes);
    if (status == NULL) {
      out = (pw_cpu_out_t){.p = bytes, .n = 0, .capacity = out.n};
      pw_cpu_encode(&parsed->program, mesh, &out);
      *out_bytes = bytes;
      *out_size = out.n;
    } else {
      status = pw_status_annotate(status, "executable bytes");
    }
  }
  pw_allocator_free(backend->allocator, parsed, sizeof(*parsed));
  return status ? pw_status_annotate(status, "cpu compile") : NULL;
}

pw_status_t pw_cpu__load(void* self, const void* bytes, size_t size,
                         pw_backend_executable_t* out_executable,
                         pw_executable_signature_t* out_signature) {
  if (out_executable != NULL) *out_executable = NULL;
  pw_cpu__backend_t* backend = self;
  if (backend == NULL || out_executable == NULL || out_signature == NULL ||
      (bytes == NULL && size != 0)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "cpu load: NULL argument");
  }
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(out_signature, pw_executable_signature_t,
                                      PW_EXECUTABLE_SIGNATURE_SIZE_V1, "cpu load"));
  /* Decoded straight into the executable (a program is ~100 KB: not on
   * the stack), its per-parameter arrays after the struct: one
   * allocation, sized by the counts read ahead (bytes whose counts do not
   * read get none; the decode then says what is wrong). */
  uint32_t peek_in = 0, peek_out = 0;
  pw_cpu_peek_counts(bytes, size, &peek_in, &peek_out);
  size_t head = (sizeof(struct pw_backend_executable_s) + 15) & ~(size_t)15;
  size_t n = (size_t)peek_in + peek_out;
  size_t total = head + n * (sizeof(pw_shape_t) + sizeof(size_t));
  void* memory = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_allocator_calloc(backend->allocator, total,
                                             alignof(struct pw_backend_executable_s), &memory),
                         "cpu load");
  pw_backend_executable_t exe = memory;
  exe->alloc_size = total;
  pw_cpu_program_t* program_p = &exe->program;
  pw_mesh_shape_t mesh;
  pw_status_t decoded = pw_cpu_decode(bytes, size, program_p, &mesh);
  if (decoded == NULL &&
      (program_p->input_count != peek_in || program_p->output_count != peek_out)) {
    decoded = pw_status_make(PW_STATUS_INTERNAL, "parameter counts read twice differ");
  }
  const pw_cpu__kernel_t* kernel =
      decoded == NULL ? pw_cpu__kernel_find(backend, program_p->kernel) : NULL;
  if (decoded == NULL && kernel == NULL) {
    decoded = pw_status_make(PW_STATUS_NOT_FOUND,
                             "kernel '%s' is not registered in this backend",
                             program_p->kernel);
  }
  if (decoded == NULL) decoded = pw_cpu__program_validate(kernel, program_p, &mesh, NULL);
  if (decoded != NULL) {
    pw_allocator_free(backend->allocator, exe, exe->alloc_size);
    return pw_status_annotate(decoded, "cpu load");
  }
  pw_shape_t* shapes = (pw_shape_t*)((unsigned char*)exe + head);
  size_t* sizes = (size_t*)(shapes + n);
  exe->input_shards = shapes;
  exe->output_shards = shapes + program_p->input_count;
  exe->input_bytes = sizes;
  exe->output_bytes = sizes + program_p->input_count;
  const pw_cpu_program_t* program = &exe->program;
  exe->magic = PW_CPU__EXECUTABLE_MAGIC;
  atomic_init(&exe->refs, 1);
  exe->backend = backend;
  exe->kernel = kernel;
  exe->mesh = mesh;
  exe->group_axes = pw_cpu__collective_axes(program, &mesh);
  /* pw_cpu__program_validate checked every spec's size: these cannot fail. */
  pw_status_t status = NULL;
  for (uint32_t i = 0; status == NULL && i < program->input_count; ++i) {
    const pw_backend_param_t* p = &program->inputs[i];
    exe->input_shards[i] = pw_sharding_shard_shape(&p->sharding, &p->shape, &mesh);
    status = pw_array_spec_byte_sizes(p, &mesh, NULL, &exe->input_bytes[i]);
  }
  for (uint32_t i = 0; status == NULL && i < program->output_count; ++i) {
    const pw_backend_param_t* p = &program->outputs[i];
    exe->output_shards[i] = pw_sharding_shard_shape(&p->sharding, &p->shape, &mesh);
    status = pw_array_spec_byte_sizes(p, &mesh, NULL, &exe->output_bytes[i]);
  }
  if (status != NULL) {
    status = pw_status_annotate(status, "cpu load: kernel '%s'", program->kernel);
    pw_allocator_free(backend->allocator, exe, exe->alloc_size);
    return status;
  }
  atomic_fetch_add(&backend->live_executables, 1);

  pw_executable_signature_t sig;
  memset(&sig, 0, sizeof(sig));
  memcpy(sig.name, program->kernel, sizeof(sig.name));
  sig.mesh = mesh;
  sig.input_count = program->input_count;
  sig.output_count = program->output_count;
  /* The fixed arrays hold the first PW_BACKEND_MAX_PARAMS (a v1 caller
   * with more is refused below); the v2 pointers every spec, in the
   * executable (valid until unload). */
  for (uint32_t i = 0; i < sig.input_count && i < PW_BACKEND_MAX_PARAMS; ++i) {
    sig.inputs[i] = program->inputs[i];
  }
  for (uint32_t i = 0; i < sig.output_count && i < PW_BACKEND_MAX_PARAMS; ++i) {
    sig.outputs[i] = program->outputs[i];
  }
  sig.input_specs = program->inputs;
  sig.output_specs = program->outputs;
  if (!PW_STRUCT_HAS_FIELD(out_signature, pw_executable_signature_t, output_specs) &&
      (sig.input_count > PW_BACKEND_MAX_PARAMS || sig.output_count > PW_BACKEND_MAX_PARAMS)) {
    pw_cpu__executable_release(exe);
    return pw_status_make(PW_STATUS_OUT_OF_RANGE,
                          "cpu load: kernel '%s' has %u inputs and %u outputs; the caller's "
                          "v1 signature holds %d of each",
                          program->kernel, sig.input_count, sig.output_count,
                          PW_BACKEND_MAX_PARAMS);
  }
  pw_struct_fill(out_signature, &sig, sizeof(sig));
  *out_executable = exe;
  return NULL;
}

void pw_cpu__executable_release(pw_backend_executable_t exe) {
  if (atomic_fetch_sub(&exe->refs, 1) != 1) return;
  pw_cpu__backend_t* backend = exe->backend;
  exe->magic = 0;
  pw_allocator_free(backend->allocator, exe, exe->alloc_size);
  atomic_fetch_sub(&backend->live_executables, 1);
}

void pw_cpu__unload(void* self, pw_backend_executable_t executable) {
  pw_cpu__backend_t* backend = self;
  if (executable == NULL) return;
  if (executable->magic != PW_CPU__EXECUTABLE_MAGIC || executable->backend != backend) {
    pw_log(&backend->logger, PW_LOG_ERROR, PW_CPU_LOG,
           "unload: %p is not an executable of this backend; ignored",
           (void*)executable);
    return;
  }
  pw_cpu__executable_release(executable);
}
