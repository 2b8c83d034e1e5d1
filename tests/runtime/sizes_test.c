/* Byte sizes that would wrap: an array whose element count fits in int64
 * but whose bytes do not (f64[2^61+1,2] is 2^65+16 bytes, 16 once
 * wrapped) must be rejected everywhere a shape enters (array specs,
 * buffers, executables, graph parameters, graph files), and every
 * accepted shape's byte size is exactly elements x dtype size. The
 * property test draws seeded random shapes near the int64 and size_t
 * limits for every dtype and sharding and checks each path (specs,
 * buffers, executables, graph files checked, decoded and encoded again)
 * against a 128-bit computation. */
#include <stdlib.h>

#include "graph_format/gf_util.h"
#include "pathways/backends/sim.h"
#include "pathways/graph_format.h"
#include "runtime/checks.h"
#include "sim_test_support.h"
#include "support/test_allocators.h"

TestSuite(sizes, .fini = pw_test_check_leaks);

typedef unsigned __int128 u128;

#define WRAPS_DIM0 ((int64_t)((1ull << 61) + 1)) /* f64[2^61+1, 2]: 2^65+16 bytes */
#define WRAPS_DIM1 ((int64_t)((1ull << 62) + 2)) /* f64[2^62+2]: 2^65+16 bytes */

static pw_array_spec_t spec_make(pw_dtype_t dtype, uint32_t rank, const int64_t* dims,
                                 pw_sharding_t sharding) {
  pw_array_spec_t spec;
  memset(&spec, 0, sizeof(spec));
  spec.dtype = dtype;
  spec.shape = pw_shape_make(rank, dims);
  spec.sharding = sharding;
  return spec;
}

/* A runtime over a sim fleet of one slice of 4 devices (virtual memory:
 * no byte of a huge shape is ever allocated). */
static void fleet_init(pw_sim_fleet_t* f) {
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.slice_count = 1;
  o.devices_per_slice = 4;
  o.memory = PW_SIM_MEMORY_VIRTUAL;
  OK(pw_sim_fleet_init(f, &o, pw_allocator_system()));
}

Test(sizes, spec_check_rejects_byte_sizes_that_wrap) {
  pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(1, 2);
  int64_t a[2] = {WRAPS_DIM0, 2};
  /* 2^61+1 is odd: split along axis 1 so that the sharding is valid. */
  pw_array_spec_t split = spec_make(PW_DTYPE_F64, 2, a, pw_sharding_split(1, PW_MESH_AXIS_ALL));
  FAILS(pw_array_spec_check(&split, &mesh), PW_STATUS_INVALID_ARGUMENT,
        "f64[2305843009213693953,2]");
  int64_t b[1] = {WRAPS_DIM1};
  pw_array_spec_t rep = spec_make(PW_DTYPE_F64, 1, b, pw_sharding_replicated());
  FAILS(pw_array_spec_check(&rep, &mesh), PW_STATUS_INVALID_ARGUMENT, "f64[4611686018427387906]");
  FAILS(pw_array_spec_check(&rep, NULL), PW_STATUS_INVALID_ARGUMENT, "bytes per array");
  size_t bytes = 1;
  FAILS(pw_shape_byte_size(PW_DTYPE_F64, &rep.shape, &bytes), PW_STATUS_INVALID_ARGUMENT,
        "f64[4611686018427387906]");
  cr_assert_eq(bytes, 0);
  /* The same element count of bytes fits. */
  rep.dtype = PW_DTYPE_U8;
  OK(pw_array_spec_check(&rep, &mesh));
  size_t total = 0, shard = 0;
  OK(pw_array_spec_byte_sizes(&rep, &mesh, &total, &shard));
  cr_assert_eq(total, (size_t)WRAPS_DIM1);
  cr_assert_eq(shard, (size_t)WRAPS_DIM1);
  /* The largest f64 array there is, and one element more. */
  int64_t c[1] = {INT64_MAX / 8};
  pw_array_spec_t edge = spec_make(PW_DTYPE_F64, 1, c, pw_sharding_replicated());
  OK(pw_array_spec_byte_sizes(&edge, &mesh, &total, NULL));
  cr_assert_eq(total, (size_t)(INT64_MAX / 8) * 8);
  edge.shape.dims[0] += 1;
  FAILS(pw_array_spec_check(&edge, &mesh), PW_STATUS_INVALID_ARGUMENT, "bytes per array");
}

Test(sizes, buffers_executables_and_graphs_reject_byte_sizes_that_wrap) {
  pw_sim_fleet_t f;
  fleet_init(&f);
  pw_vslice_t vs = f.vslices[0];
  unsigned char host[16] = {0};
  int64_t a[2] = {(int64_t)(1ull << 60) + 1, 4};
  pw_array_spec_t split = spec_make(PW_DTYPE_F64, 2, a, pw_sharding_split(1, PW_MESH_AXIS_ALL));
  /* f64[2^60+1, 4] is 2^65+32 bytes: 32 once wrapped, 8 per shard.
   * Before sizes were checked, the copy-in read far past |host|. */
  pw_buffer_t buffer = {0};
  FAILS(pw_buffer_from_host(f.client, vs, &split, host, 32, &buffer), PW_STATUS_INVALID_ARGUMENT,
        "f64[1152921504606846977,4]");
  cr_assert_eq(buffer.id, 0);
  int64_t b[1] = {WRAPS_DIM1};
  pw_array_spec_t rep = spec_make(PW_DTYPE_F64, 1, b, pw_sharding_replicated());
  FAILS(pw_buffer_from_host(f.client, vs, &rep, host, 16, &buffer), PW_STATUS_INVALID_ARGUMENT,
        "f64[4611686018427387906]");
  /* Executables: a program whose parameters wrap. */
  const char* program =
      "op huge\nkind copy\ninput f64[4611686018427387906] replicated\n"
      "output f64[4611686018427387906] replicated\n";
  pw_executable_t e = {0};
  FAILS(pw_executable_compile(f.client, vs, program, strlen(program), NULL, &e),
        PW_STATUS_INVALID_ARGUMENT, "f64[4611686018427387906]");
  /* Graph parameters. */
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  FAILS(pw_graph_add_parameter(f.client, g, vs, &split, NULL), PW_STATUS_INVALID_ARGUMENT,
        "f64[1152921504606846977,4]");
  FAILS(pw_graph_add_parameter(f.client, g, vs, &rep, NULL), PW_STATUS_INVALID_ARGUMENT,
        "f64[4611686018427387906]");
  OK(pw_graph_release(f.client, g));
  pw_sim_fleet_deinit(&f);
}

/* ---- the property test ---------------------------------------------------- */

static uint64_t rng_next(uint64_t* s) {
  /* splitmix64: deterministic for a seed. */
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* A graph file with one parameter buffer of |spec| on a 4-device vslice,
 * which is also the output. */
static void write_param_graph(gf_cbor_t* c, const pw_array_spec_t* spec) {
  c->size = 0;
  gf_head(c, 5, 7);
  gf_text(c, "v");
  gf_uint(c, 1);
  gf_text(c, "vslices");
  gf_head(c, 4, 1);
  gf_head(c, 4, 1);
  gf_uint(c, 4);
  gf_text(c, "executables");
  gf_head(c, 4, 0);
  gf_text(c, "buffers");
  gf_head(c, 4, 1);
  gf_head(c, 5, 4);
  gf_text(c, "vslice");
  gf_uint(c, 0);
  gf_text(c, "dtype");
  gf_text(c, pw_dtype_name(spec->dtype));
  gf_text(c, "shape");
  gf_head(c, 4, spec->shape.rank);
  for (uint32_t i = 0; i < spec->shape.rank; ++i) gf_uint(c, (uint64_t)spec->shape.dims[i]);
  gf_text(c, "sharding");
  if (spec->sharding.kind == PW_SHARDING_REPLICATED) {
    gf_text(c, "replicated");
  } else {
    gf_head(c, 5, 2);
    gf_text(c, "split");
    gf_uint(c, spec->sharding.tensor_axis);
    gf_text(c, "mesh_axis");
    gf_text(c, "all");
  }
  gf_text(c, "parameters");
  gf_head(c, 4, 1);
  gf_uint(c, 0);
  gf_text(c, "nodes");
  gf_head(c, 4, 0);
  gf_text(c, "outputs");
  gf_head(c, 4, 1);
  gf_uint(c, 0);
}

/* A sim program whose one input is |spec|. */
static void write_program(char* text, size_t capacity, const pw_array_spec_t* spec) {
  char shape[256];
  pw_shape_format(spec->dtype, &spec->shape, shape, sizeof(shape));
  char sharding[32] = "replicated";
  if (spec->sharding.kind == PW_SHARDING_SPLIT) {
    snprintf(sharding, sizeof(sharding), "split(%u,all)", spec->sharding.tensor_axis);
  }
  snprintf(text, capacity, "op p\nkind compute\ninput %s %s\n", shape, sharding);
}

/* Draws a shape of |rank| whose byte size is near 2^|target_log2|: every
 * dimension but a random one is small, that one makes up the rest, then
 * the split dimension (if any) is rounded to a multiple of 4. */
static void draw_dims(uint64_t* rng, uint32_t rank, size_t elem, uint32_t target_log2,
                      int64_t split_axis, int64_t* dims) {
  uint32_t big = (uint32_t)(rng_next(rng) % rank);
  u128 rest = ((u128)1 << target_log2) / elem;
  for (uint32_t i = 0; i < rank; ++i) {
    if (i == big) continue;
    dims[i] = (int64_t)(1 + rng_next(rng) % 12);
    rest /= (u128)dims[i];
  }
  /* A few units either side of the limit, or a random fraction of it. */
  uint64_t jitter = rng_next(rng);
  u128 d = rest;
  switch (jitter % 4) {
    case 0: d = rest + (jitter >> 8) % 7; break;
    case 1: d = rest > 8 ? rest - (jitter >> 8) % 7 : rest; break;
    case 2: d = rest / (1 + (jitter >> 8) % 1000); break;
    default: d = rest + (jitter >> 8) % (rest / 3 + 1); break;
  }
  /* The sim's program parser takes dimensions below INT64_MAX - 9. */
  if (d > (u128)(INT64_MAX - 16)) d = INT64_MAX - 16;
  if (d < 1) d = 1;
  dims[big] = (int64_t)d;
  if (split_axis >= 0) {
    int64_t* s = &dims[split_axis];
    *s = *s < 4 ? 4 : *s - *s % 4;
  }
}

Test(sizes, random_shapes_near_the_limits_never_wrap) {
  pw_sim_fleet_t f;
  fleet_init(&f);
  pw_vslice_t vs = f.vslices[0];
  pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(1, 4);
  uint64_t rng = 19;
  gf_cbor_t* doc = malloc(sizeof(gf_cbor_t));
  cr_assert_not_null(doc);
  unsigned char small[256];
  for (size_t i = 0; i < sizeof(small); ++i) small[i] = (unsigned char)i;
  uint32_t accepted = 0, rejected = 0, tiny = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    pw_dtype_t dtype = (pw_dtype_t)(1 + rng_next(&rng) % (PW_DTYPE_COUNT - 1));
    size_t elem = pw_dtype_size(dtype);
    uint32_t rank = (uint32_t)(1 + rng_next(&rng) % PW_MAX_RANK);
    bool split = rng_next(&rng) % 2;
    uint32_t axis = (uint32_t)(rng_next(&rng) % rank);
    /* Around 2^63 (int64) and 2^64 (size_t), and some small arrays. */
    static const uint32_t targets[] = {62, 63, 63, 63, 64, 64, 65, 66, 7};
    uint32_t target = targets[rng_next(&rng) % (sizeof(targets) / sizeof(targets[0]))];
    int64_t dims[PW_MAX_RANK];
    draw_dims(&rng, rank, elem, target, split ? (int64_t)axis : -1, dims);
    pw_sharding_t sharding =
        split ? pw_sharding_split(axis, PW_MESH_AXIS_ALL) : pw_sharding_replicated();
    pw_array_spec_t spec = spec_make(dtype, rank, dims, sharding);
    u128 exact = elem;
    for (uint32_t i = 0; i < rank && exact <= ((u128)1 << 100); ++i) exact *= (u128)dims[i];
    bool fits = exact <= (u128)INT64_MAX;
    char what[256];
    pw_array_spec_format(&spec, what, sizeof(what));

    /* Array specs. */
    size_t total = 7, shard = 7;
    pw_status_t s = pw_array_spec_byte_sizes(&spec, &mesh, &total, &shard);
    cr_assert_eq(s == NULL, fits, "%s: spec %s", what, s == NULL ? "accepted" : "rejected");
    if (s != NULL) {
      cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT, "%s", what);
      cr_assert_eq(total, 0);
      pw_status_free(s);
      ++rejected;
    } else {
      cr_assert_eq((u128)total, exact, "%s: %zu bytes", what, total);
      cr_assert_eq((u128)shard, split ? exact / 4 : exact, "%s: %zu bytes per shard", what, shard);
      ++accepted;
    }

    /* Buffers: offered the wrapped size, which the old code accepted. */
    pw_buffer_t buffer = {0};
    if (!fits) {
      s = pw_buffer_from_host(f.client, vs, &spec, small, (size_t)exact, &buffer);
      cr_assert_not_null(s, "%s: buffer of %zu wrapped bytes accepted", what, (size_t)exact);
      cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT, "%s", what);
      pw_status_free(s);
    } else if (exact <= sizeof(small)) {
      OK(pw_buffer_from_host(f.client, vs, &spec, small, (size_t)exact, &buffer));
      size_t got = 0;
      OK(pw_buffer_byte_size(f.client, buffer, &got));
      cr_assert_eq((u128)got, exact, "%s", what);
      OK(pw_buffer_release(f.client, buffer));
      ++tiny;
    } else {
      /* One byte more than it holds: the message names the exact size. */
      char needle[64];
      snprintf(needle, sizeof(needle), "needs %zu", (size_t)exact);
      FAILS(pw_buffer_from_host(f.client, vs, &spec, small, (size_t)exact + 1, &buffer),
            PW_STATUS_INVALID_ARGUMENT, needle);
    }

    /* Executables. */
    char program[512];
    write_program(program, sizeof(program), &spec);
    pw_executable_t e = {0};
    s = pw_executable_compile(f.client, vs, program, strlen(program), NULL, &e);
    cr_assert_eq(s == NULL, fits, "%s: executable %s: %s", what,
                 s == NULL ? "accepted" : "rejected", s ? pw_status_message(s) : "");
    if (s == NULL) {
      pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
      OK(pw_executable_signature(f.client, e, &sig));
      cr_assert(pw_array_spec_equal(&sig.inputs[0], &spec), "%s", what);
      OK(pw_executable_release(f.client, e));
    } else {
      pw_status_free(s);
    }

    /* Graph files: checked alone, and decoded into a graph. */
    write_param_graph(doc, &spec);
    s = pw_graph_format_check(doc->data, doc->size, pw_allocator_system(), NULL);
    cr_assert_eq(s == NULL, fits, "%s: graph file %s", what, s == NULL ? "accepted" : "rejected");
    if (s != NULL) {
      cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT, "%s", what);
      cr_assert(strstr(pw_status_message(s), "buffers[0]") != NULL, "%s: %s", what,
                pw_status_message(s));
      pw_status_free(s);
    }
    pw_graph_decode_options_t o = {sizeof(o), &vs, 1, NULL, 0};
    pw_graph_t g = {0};
    s = pw_graph_decode(f.client, doc->data, doc->size, &o, &g);
    cr_assert_eq(s == NULL, fits, "%s: decoded graph %s", what, s == NULL ? "accepted" : "rejected");
    if (s == NULL) {
      /* Encoded again, it is the same graph. */
      void* bytes = NULL;
      size_t size = 0;
      OK(pw_graph_encode(f.client, g, NULL, pw_allocator_system(), &bytes, &size));
      pw_graph_format_info_t info = {.struct_size = sizeof(pw_graph_format_info_t)};
      OK(pw_graph_format_check(bytes, size, pw_allocator_system(), &info));
      cr_assert_eq(info.buffers, 1, "%s", what);
      pw_allocator_free(pw_allocator_system(), bytes, size);
      OK(pw_graph_release(f.client, g));
    } else {
      pw_status_free(s);
    }
  }
  cr_assert_gt(accepted, 1000);
  cr_assert_gt(rejected, 1000);
  cr_assert_gt(tiny, 100);
  free(doc);
  pw_sim_fleet_deinit(&f);
}
