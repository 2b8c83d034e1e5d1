/* The sim backend's executables: compile (text -> bytes), load (bytes ->
 * executable with its cost), unload.
 *
 * EXECUTABLE BYTES, little-endian:
 *   "PWSIMEXE" | u32 version (2; 1 still loads) | u32 payload size | u64 FNV-1a-64 of the
 *   payload | payload:
 *     u32 mesh rank | 4 x u32 mesh dims | u32 name length | name bytes |
 *     u32 kind | u64 time_ns | f64 flops | f64 bytes | f64 collective_bytes |
 *     u32 has_collective_bytes | u32 input count | u32 output count |
 *     per parameter: u32 dtype | u32 rank | 8 x i64 dims |
 *                    u32 sharding kind | u32 tensor axis | u32 mesh axis |
 *                    (version 2) u32 tile count | 4 x (u8 tensor axis, u8
 *                    mesh axis) | u32 unreduced axes
 *     (version 2) u32 over axes
 * Doubles are stored as their IEEE-754 bits, so compile is deterministic
 * and a load reproduces the program exactly. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backends/sim/sim_internal.h"
#include "pathways/struct_size.h"

#define PW_SIM_MAGIC "PWSIMEXE"
#define PW_SIM_FORMAT_VERSION 2u
#define PW_SIM_FORMAT_VERSION_MIN 1u
#define PW_SIM_HEADER_SIZE 24u
#define PW_SIM_PARAM_SIZE (4u + 4u + 8u * PW_MAX_RANK + 12u)

static uint64_t pw_sim_fnv1a(const unsigned char* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

/* --- writing --- */

typedef struct pw_sim_writer_t {
  unsigned char* p;
  size_t at;
} pw_sim_writer_t;

static void pw_sim_put(pw_sim_writer_t* w, uint64_t v, unsigned bytes) {
  for (unsigned i = 0; i < bytes; ++i) {
    if (w->p) w->p[w->at] = (unsigned char)(v >> (8 * i));
    w->at++;
  }
}

static void pw_sim_put_double(pw_sim_writer_t* w, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof(bits));
  pw_sim_put(w, bits, 8);
}

/* Writes the payload (or, with w->p NULL, measures it). */
static void pw_sim_write_payload(pw_sim_writer_t* w, const pw_sim__program_t* p,
                                 const pw_mesh_shape_t* mesh) {
  pw_sim_put(w, mesh->rank, 4);
  for (int i = 0; i < PW_MAX_MESH_RANK; ++i) {
    pw_sim_put(w, i < (int)mesh->rank ? mesh->dims[i] : 0, 4);
  }
  size_t name_length = strlen(p->name);
  pw_sim_put(w, name_length, 4);
  for (size_t i = 0; i < name_length; ++i) pw_sim_put(w, (unsigned char)p->name[i], 1);
  pw_sim_put(w, (uint32_t)p->kind, 4);
  pw_sim_put(w, p->time_ns, 8);
  pw_sim_put_double(w, p->flops);
  pw_sim_put_double(w, p->bytes);
  pw_sim_put_double(w, p->collective_bytes);
  pw_sim_put(w, p->has_collective_bytes ? 1 : 0, 4);
  pw_sim_put(w, p->input_count, 4);
  pw_sim_put(w, p->output_count, 4);
  for (uint32_t k = 0; k < p->input_count + p->output_count; ++k) {
    const pw_backend_param_t* q =
        k < p->input_count ? &p->inputs[k] : &p->outputs[k - p->input_count];
    pw_sim_put(w, (uint32_t)q->dtype, 4);
    pw_sim_put(w, q->shape.rank, 4);
    for (int i = 0; i < PW_MAX_RANK; ++i) {
      pw_sim_put(w, i < (int)q->shape.rank ? (uint64_t)q->shape.dims[i] : 0, 8);
    }
    pw_sim_put(w, (uint32_t)q->sharding.kind, 4);
    pw_sim_put(w, q->sharding.tensor_axis, 4);
    pw_sim_put(w, q->sharding.mesh_axis, 4);
    bool tiled = q->sharding.kind == PW_SHARDING_TILED;
    pw_sim_put(w, tiled ? q->sharding.tile_count : 0, 4);
    for (uint32_t i = 0; i < PW_MAX_MESH_RANK; ++i) {
      bool used = tiled && i < q->sharding.tile_count;
      pw_sim_put(w, used ? q->sharding.tiles[i].tensor_axis : 0, 1);
      pw_sim_put(w, used ? q->sharding.tiles[i].mesh_axis : 0, 1);
    }
    pw_sim_put(w, tiled ? q->sharding.unreduced_axes : 0, 4);
  }
  pw_sim_put(w, p->over_axes, 4);
}

pw_status_t pw_sim__compile(void* self, const void* program, size_t program_size,
                            const pw_mesh_shape_t* mesh, const char* options,
                            pw_allocator_t allocator, void** out_bytes, size_t* out_size) {
  pw_sim__backend_t* b = self;
  *out_bytes = NULL;
  *out_size = 0;
  if (options != NULL && options[0] != '\0') {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim compile: options must be empty, got \"%.40s\"", options);
  }
  if (mesh == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "sim compile: mesh is NULL");
  }
  pw_sim__program_t* p = NULL; /* ~100 KB: not on the caller's stack */
  PW_RETURN_IF_ERROR_CTX(pw_allocator_malloc(b->allocator, sizeof(*p), 0, (void**)&p),
                         "sim compile");
  pw_status_t status = pw_sim__program_parse(program, program_size, mesh, p);
  if (status == NULL) status = pw_sim__program_check(p, mesh);
  pw_sim_writer_t measure = {NULL, 0};
  if (status == NULL) pw_sim_write_payload(&measure, p, mesh);
  size_t size = PW_SIM_HEADER_SIZE + measure.at;
  void* memory = NULL;
  if (status == NULL) {
    status = pw_allocator_malloc(allocator, size, 8, &memory);
    if (status != NULL) status = pw_status_annotate(status, "sim compile of '%s'", p->name);
  }
  if (status != NULL) {
    pw_allocator_free(b->allocator, p, sizeof(*p));
    return status;
  }
  unsigned char* bytes = memory;
  pw_sim_writer_t w = {bytes + PW_SIM_HEADER_SIZE, 0};
  pw_sim_write_payload(&w, p, mesh);
  pw_allocator_free(b->allocator, p, sizeof(*p));
  memcpy(bytes, PW_SIM_MAGIC, 8);
  pw_sim_writer_t h = {bytes + 8, 0};
  pw_sim_put(&h, PW_SIM_FORMAT_VERSION, 4);
  pw_sim_put(&h, measure.at, 4);
  pw_sim_put(&h, pw_sim_fnv1a(bytes + PW_SIM_HEADER_SIZE, measure.at), 8);
  *out_bytes = bytes;
  *out_size = size;
  return NULL;
}

/* --- reading --- */

typedef struct pw_sim_reader_t {
  const unsigned char* p;
  size_t size;
  size_t at;
  bool short_read;
} pw_sim_reader_t;

static uint64_t pw_sim_get(pw_sim_reader_t* r, unsigned bytes) {
  if (r->size - r->at < bytes) {
    r->short_read = true;
    r->at = r->size;
    return 0;
  }
  uint64_t v = 0;
  for (unsigned i = 0; i < bytes; ++i) v |= (uint64_t)r->p[r->at + i] << (8 * i);
  r->at += bytes;
  return v;
}

static double pw_sim_get_double(pw_sim_reader_t* r) {
  uint64_t bits = pw_sim_get(r, 8);
  double v;
  memcpy(&v, &bits, sizeof(v));
  return v;
}

static bool pw_sim_good_number(double v) { return v >= 0 && v <= 1e30; }

/* Decodes a checksummed payload. Values a compile cannot have written are
 * DATA_LOSS; semantic checks follow in load. */
static pw_status_t pw_sim_read_payload(pw_sim_reader_t* r, uint64_t version,
                                       pw_sim__program_t* p, pw_mesh_shape_t* mesh) {
  memset(p, 0, sizeof(*p));
  memset(mesh, 0, sizeof(*mesh));
  mesh->rank = (uint32_t)pw_sim_get(r, 4);
  for (int i = 0; i < PW_MAX_MESH_RANK; ++i) mesh->dims[i] = (uint32_t)pw_sim_get(r, 4);
  uint64_t name_length = pw_sim_get(r, 4);
  if (name_length == 0 || name_length >= PW_SIM__NAME_MAX || r->size - r->at < name_length) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "sim executable: bad name length %llu",
                          (unsigned long long)name_length);
  }
  memcpy(p->name, r->p + r->at, (size_t)name_length);
  r->at += (size_t)name_length;
  uint64_t kind = pw_sim_get(r, 4);
  p->time_ns = pw_sim_get(r, 8);
  p->flops = pw_sim_get_double(r);
  p->bytes = pw_sim_get_double(r);
  p->collective_bytes = pw_sim_get_double(r);
  uint64_t has_cb = pw_sim_get(r, 4);
  uint64_t inputs = pw_sim_get(r, 4);
  uint64_t outputs = pw_sim_get(r, 4);
  if (kind >= PW_SIM__KIND_COUNT || has_cb > 1 || inputs > PW_SIM__MAX_PARAMS ||
      outputs > PW_SIM__MAX_PARAMS || p->time_ns > (uint64_t)PW_SIM__MAX_NS ||
      !pw_sim_good_number(p->flops) || !pw_sim_good_number(p->bytes) ||
      !pw_sim_good_number(p->collective_bytes)) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "sim executable '%s': corrupt header fields",
                          p->name);
  }
  p->kind = (pw_sim__kind_t)kind;
  p->has_collective_bytes = has_cb == 1;
  p->input_count = (uint32_t)inputs;
  p->output_count = (uint32_t)outputs;
  for (uint32_t k = 0; k < p->input_count + p->output_count; ++k) {
    pw_backend_param_t* q = k < p->input_count ? &p->inputs[k] : &p->outputs[k - p->input_count];
    q->dtype = (pw_dtype_t)pw_sim_get(r, 4);
    uint64_t rank = pw_sim_get(r, 4);
    if (rank > PW_MAX_RANK) {
      return pw_status_make(PW_STATUS_DATA_LOSS, "sim executable '%s': parameter %u has rank %llu",
                            p->name, k, (unsigned long long)rank);
    }
    q->shape.rank = (uint32_t)rank;
    for (int i = 0; i < PW_MAX_RANK; ++i) q->shape.dims[i] = (int64_t)pw_sim_get(r, 8);
    q->sharding.kind = (pw_sharding_kind_t)pw_sim_get(r, 4);
    q->sharding.tensor_axis = (uint32_t)pw_sim_get(r, 4);
    q->sharding.mesh_axis = (uint32_t)pw_sim_get(r, 4);
    if (version < 2) continue;
    uint64_t tiles = pw_sim_get(r, 4);
    for (uint32_t i = 0; i < PW_MAX_MESH_RANK; ++i) {
      q->sharding.tiles[i].tensor_axis = (uint8_t)pw_sim_get(r, 1);
      q->sharding.tiles[i].mesh_axis = (uint8_t)pw_sim_get(r, 1);
    }
    q->sharding.unreduced_axes = (uint32_t)pw_sim_get(r, 4);
    bool tiled = q->sharding.kind == PW_SHARDING_TILED;
    if (tiles > PW_MAX_MESH_RANK || (!tiled && (tiles != 0 || q->sharding.unreduced_axes != 0))) {
      return pw_status_make(PW_STATUS_DATA_LOSS,
                            "sim executable '%s': parameter %u has corrupt tiles", p->name, k);
    }
    q->sharding.tile_count = (uint32_t)tiles;
  }
  if (version >= 2) p->over_axes = (uint32_t)pw_sim_get(r, 4);
  if (p->over_axes >= (1u << PW_MAX_MESH_RANK)) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "sim executable '%s': corrupt over axes", p->name);
  }
  if (r->short_read || r->at != r->size) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "sim executable '%s': payload size mismatch",
                          p->name);
  }
  return NULL;
}

/* Bytes per device the ring moves: collective_bytes, else input 0's shard
 * (all_gather: output 0's, the gathered shard). */
static double pw_sim_payload(const pw_backend_executable_t e) {
  const pw_sim__program_t* p = &e->program;
  if (p->has_collective_bytes) return p->collective_bytes;
  if (p->kind == PW_SIM__ALL_GATHER && p->output_count > 0) return (double)e->output_bytes[0];
  return p->input_count > 0 ? (double)e->input_bytes[0] : 0;
}

/* The ring's passes over the payload: an all-reduce is a reduce-scatter
 * then an all-gather (2); the others are one of them (1). */
static double pw_sim_ring_passes(pw_sim__kind_t kind) {
  return kind == PW_SIM__ALL_GATHER || kind == PW_SIM__REDUCE_SCATTER ||
                 kind == PW_SIM__ALL_TO_ALL
             ? 1.0
             : 2.0;
}

static uint64_t pw_sim_round_ns(double ns) {
  ns = ceil(ns);
  return ns < PW_SIM__MAX_NS ? (uint64_t)ns : (uint64_t)PW_SIM__MAX_NS;
}

/* One ring phase over |n| members of |payload| bytes each, |passes|
 * times around (2: all-reduce). */
static double pw_sim_ring_ns(uint32_t n, double passes, double payload, uint64_t latency_ns,
                             double rate) {
  if (n <= 1) return 0;
  double ns = (double)latency_ns;
  if (rate > 0) ns += passes * (double)(n - 1) / (double)n * payload / rate * 1e9;
  return ns;
}

/* The cost of one launch on one slice (sim.h, COST). */
static uint64_t pw_sim_cost(const pw_sim__backend_t* b, pw_backend_executable_t e) {
  const pw_sim__program_t* p = &e->program;
  double flops_s = b->chip_flops_per_s > 0 ? p->flops / b->chip_flops_per_s : 0;
  double bytes_s = b->chip_bytes_per_s > 0 ? p->bytes / b->chip_bytes_per_s : 0;
  e->base_ns = (double)p->time_ns + (flops_s > bytes_s ? flops_s : bytes_s) * 1e9 +
               (double)b->launch_overhead_ns;
  double ns = e->base_ns;
  if (pw_sim__is_collective(p->kind)) {
    ns += pw_sim_ring_ns(e->ring_size, pw_sim_ring_passes(p->kind), pw_sim_payload(e),
                         b->ici_latency_ns, b->ici_bytes_per_s);
  }
  return pw_sim_round_ns(ns);
}

pw_status_t pw_sim__collective_cost(const pw_sim__backend_t* b, pw_backend_executable_t e,
                                    const uint32_t* devices, uint32_t n, uint64_t* out_cost) {
  *out_cost = e->cost_ns;
  for (uint32_t i = 0; i < n; ++i) {
    if (devices[i] >= b->device_count) return NULL; /* a refused part's bad group */
  }
  if (n == 0) return NULL;
  uint32_t low = b->devices[devices[0]].slice, high = low;
  for (uint32_t i = 1; i < n; ++i) {
    uint32_t slice = b->devices[devices[i]].slice;
    if (slice < low) low = slice;
    if (slice > high) high = slice;
  }
  if (low == high) return NULL; /* one slice: the cost fixed at load */
  /* Over named axes: a ring within each group, priced at load (which
   * axes cross slices is the mesh's business, not the sim's). */
  if (e->program.over_axes != 0) return NULL;
  /* s = slices the gang touches, m = most of its members on one slice. */
  size_t range = (size_t)high - low + 1;
  void* memory = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_allocator_calloc_array(b->allocator, range, sizeof(uint32_t),
                                                   alignof(uint32_t), &memory),
                         "sim collective '%s': pricing a gang over %zu slices",
                         e->program.name, range);
  uint32_t* counts = memory;
  uint32_t slices = 0, most = 0;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t* c = &counts[b->devices[devices[i]].slice - low];
    if ((*c)++ == 0) ++slices;
    if (*c > most) most = *c;
  }
  pw_allocator_free(b->allocator, counts, range * sizeof(uint32_t));
  double payload = pw_sim_payload(e);
  double passes = pw_sim_ring_passes(e->program.kind);
  double ns = e->base_ns +
              pw_sim_ring_ns(most, passes, payload, b->ici_latency_ns, b->ici_bytes_per_s) +
              pw_sim_ring_ns(slices, passes, payload / (double)most, b->dcn_latency_ns,
                             b->dcn_bytes_per_s);
  *out_cost = pw_sim_round_ns(ns);
  return NULL;
}

pw_status_t pw_sim__load(void* self, const void* bytes, size_t size,
                         pw_backend_executable_t* out_executable,
                         pw_executable_signature_t* out_signature) {
  pw_sim__backend_t* b = self;
  *out_executable = NULL;
  const unsigned char* in = bytes;
  if (in == NULL || size == 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "sim load: no executable bytes");
  }
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(out_signature, pw_executable_signature_t,
                                      PW_EXECUTABLE_SIGNATURE_SIZE_V1, "sim load"));
  size_t magic = size < 8 ? size : 8;
  if (memcmp(in, PW_SIM_MAGIC, magic) != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim load: %zu bytes that are not a sim executable (no \"%s\" magic)",
                          size, PW_SIM_MAGIC);
  }
  if (size < PW_SIM_HEADER_SIZE) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "sim load: truncated to %zu bytes (header is %u)",
                          size, PW_SIM_HEADER_SIZE);
  }
  pw_sim_reader_t h = {in + 8, 16, 0, false};
  uint64_t version = pw_sim_get(&h, 4);
  uint64_t payload = pw_sim_get(&h, 4);
  uint64_t checksum = pw_sim_get(&h, 8);
  if (version < PW_SIM_FORMAT_VERSION_MIN || version > PW_SIM_FORMAT_VERSION) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sim load: format version %llu, this backend reads %u to %u",
                          (unsigned long long)version, PW_SIM_FORMAT_VERSION_MIN,
                          PW_SIM_FORMAT_VERSION);
  }
  if (payload != size - PW_SIM_HEADER_SIZE) {
    return pw_status_make(PW_STATUS_DATA_LOSS,
                          "sim load: header says %llu payload bytes, %zu are present",
                          (unsigned long long)payload, size - PW_SIM_HEADER_SIZE);
  }
  if (pw_sim_fnv1a(in + PW_SIM_HEADER_SIZE, (size_t)payload) != checksum) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "sim load: checksum mismatch (corrupt bytes)");
  }
  /* Decoded straight into the executable (a program is ~100 KB). */
  void* memory = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_allocator_calloc(b->allocator, sizeof(struct pw_backend_executable_s),
                                             alignof(struct pw_backend_executable_s), &memory),
                         "sim load");
  pw_backend_executable_t e = memory;
  const pw_sim__program_t* pp = &e->program;
  pw_mesh_shape_t mesh;
  pw_sim_reader_t r = {in + PW_SIM_HEADER_SIZE, (size_t)payload, 0, false};
  pw_status_t checked = pw_sim_read_payload(&r, version, &e->program, &mesh);
  if (checked == NULL) {
    checked = pw_sim__program_check(pp, &mesh);
    if (checked != NULL) checked = pw_status_annotate(checked, "sim load");
  }
  if (checked == NULL && out_signature->struct_size < PW_EXECUTABLE_SIGNATURE_SIZE_V2 &&
      (pp->input_count > PW_BACKEND_MAX_PARAMS || pp->output_count > PW_BACKEND_MAX_PARAMS)) {
    checked = pw_status_make(PW_STATUS_OUT_OF_RANGE,
                             "sim load: '%s' has %u inputs and %u outputs; a v1 signature "
                             "holds %d of each",
                             pp->name, pp->input_count, pp->output_count, PW_BACKEND_MAX_PARAMS);
  }
  if (checked != NULL) {
    pw_allocator_free(b->allocator, e, sizeof(*e));
    return checked;
  }
  e->magic = PW_SIM__EXECUTABLE_MAGIC;
  atomic_init(&e->refs, 1);
  e->backend = b;
  e->mesh = mesh;
  e->group_size = pw_mesh_shape_device_count(&mesh);
  e->ring_size = pw_sim__group_size_over(&mesh, pp->over_axes);
  /* pw_sim__program_check checked every spec: these cannot fail. */
  pw_status_t status = NULL;
  for (uint32_t i = 0; status == NULL && i < pp->input_count; ++i) {
    status = pw_array_spec_byte_sizes(&pp->inputs[i], &mesh, NULL, &e->input_bytes[i]);
  }
  for (uint32_t i = 0; status == NULL && i < pp->output_count; ++i) {
    status = pw_array_spec_byte_sizes(&pp->outputs[i], &mesh, NULL, &e->output_bytes[i]);
  }
  if (status != NULL) {
    pw_allocator_free(b->allocator, e, sizeof(*e));
    return pw_status_annotate(status, "sim load of '%s'", pp->name);
  }
  e->cost_ns = pw_sim_cost(b, e);
  atomic_fetch_add(&b->live_executables, 1);

  pw_executable_signature_t sig;
  memset(&sig, 0, sizeof(sig));
  snprintf(sig.name, sizeof(sig.name), "%s", pp->name);
  sig.mesh = mesh;
  sig.input_count = pp->input_count;
  sig.output_count = pp->output_count;
  /* The fixed arrays: the first PW_BACKEND_MAX_PARAMS; the v2 pointers:
   * every spec, in the executable (valid until unload). */
  for (uint32_t i = 0; i < sig.input_count && i < PW_BACKEND_MAX_PARAMS; ++i) {
    sig.inputs[i] = pp->inputs[i];
  }
  for (uint32_t i = 0; i < sig.output_count && i < PW_BACKEND_MAX_PARAMS; ++i) {
    sig.outputs[i] = pp->outputs[i];
  }
  sig.input_specs = pp->inputs;
  sig.output_specs = pp->outputs;
  pw_struct_fill(out_signature, &sig, sizeof(sig));
  *out_executable = e;
  return NULL;
}

void pw_sim__executable_release(pw_backend_executable_t e) {
  if (atomic_fetch_sub(&e->refs, 1) != 1) return;
  pw_sim__backend_t* b = e->backend;
  e->magic = 0;
  atomic_fetch_sub(&b->live_executables, 1);
  pw_allocator_free(b->allocator, e, sizeof(*e));
}

void pw_sim__unload(void* self, pw_backend_executable_t executable) {
  pw_sim__backend_t* b = self;
  if (executable == NULL || executable->magic != PW_SIM__EXECUTABLE_MAGIC ||
      executable->backend != b) {
    pw_log(&b->logger, PW_LOG_ERROR, PW_SIM_LOG, "unload of a handle that is not a sim "
           "executable of this backend (ignored)");
    return;
  }
  pw_sim__executable_release(executable);
}
