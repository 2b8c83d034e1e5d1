/* The manifest's CBOR on its own: format 2 carries each buffer's mesh
 * (axis names included) and tiled shardings exactly; format 1 manifests
 * (no mesh, replicated/split only) still read; a tiled sharding that does
 * not fit its mesh, bad axis names, or "tiled" in a format 1 manifest are
 * DATA_LOSS naming the problem. */
#include <criterion/criterion.h>
#include <string.h>

#include "base/hash.h"
#include "runtime/checks.h"
#include "snapshot/snapshot_internal.h"
#include "support/test_allocators.h"

TestSuite(manifest, .fini = pw_test_check_leaks);

static pw_mesh_shape_t named_mesh(const char* text) {
  pw_mesh_shape_t mesh;
  OK(pw_mesh_shape_parse(text, &mesh));
  return mesh;
}

/* One buffer of |spec| on |mesh|, as one chunk. */
static void one_buffer(pw_snap_manifest_buffer_t* b, pw_snap_chunk_t* chunk, const char* name,
                       pw_array_spec_t spec, pw_mesh_shape_t mesh) {
  memset(b, 0, sizeof(*b));
  snprintf(b->name, sizeof(b->name), "%s", name);
  b->spec = spec;
  b->mesh = mesh;
  size_t bytes = 0;
  OK(pw_shape_byte_size(spec.dtype, &spec.shape, &bytes));
  b->bytes = bytes;
  b->stored_bytes = PW_SNAPSHOT_VALUE_HEADER + bytes;
  chunk->offset = 0;
  chunk->raw_bytes = bytes;
  chunk->stored_bytes = b->stored_bytes;
  chunk->raw_xxh64 = 7;
  b->chunk_count = 1;
  b->chunks = chunk;
}

static pw_array_spec_t spec_of(uint32_t rank, const int64_t* dims, const char* sharding,
                               const pw_mesh_shape_t* mesh) {
  pw_array_spec_t spec;
  memset(&spec, 0, sizeof(spec));
  spec.dtype = PW_DTYPE_F32;
  spec.shape = pw_shape_make(rank, dims);
  OK(pw_sharding_parse(sharding, strlen(sharding), rank, mesh, &spec.sharding));
  return spec;
}

Test(manifest, tiled_shardings_and_mesh_names_round_trip) {
  pw_mesh_shape_t mesh = named_mesh("data=2,model=4");
  int64_t dims[2] = {8, 16};
  pw_snap_manifest_buffer_t buffers[3];
  pw_snap_chunk_t chunks[3];
  one_buffer(&buffers[0], &chunks[0], "w", spec_of(2, dims, "P(data, model)", &mesh), mesh);
  one_buffer(&buffers[1], &chunks[1], "g", spec_of(2, dims, "P(None, model) unreduced(data)",
                                                   &mesh), mesh);
  pw_mesh_shape_t plain = named_mesh("2x4");
  one_buffer(&buffers[2], &chunks[2], "s", spec_of(2, dims, "split(0, 1)", &plain), plain);
  pw_snap_manifest_t m = {5, 4096, 3, buffers};
  void* bytes = NULL;
  size_t size = 0;
  OK(pw__snap_manifest_encode(pw_allocator_system(), &m, &bytes, &size));
  pw_snap_manifest_t back;
  OK(pw__snap_manifest_decode(pw_allocator_system(), bytes, size, &back));
  cr_assert_eq(back.count, 3);
  for (uint32_t i = 0; i < 3; ++i) {
    cr_assert(pw_array_spec_equal(&back.buffers[i].spec, &buffers[i].spec), "buffer %u", i);
    cr_assert(pw_mesh_shape_equal(&back.buffers[i].mesh, &buffers[i].mesh), "buffer %u", i);
    cr_assert(pw_mesh_shape_names_equal(&back.buffers[i].mesh, &buffers[i].mesh), "buffer %u", i);
  }
  cr_assert_str_eq(back.buffers[1].mesh.axis_names[0], "data");
  cr_assert_eq(back.buffers[1].spec.sharding.unreduced_axes, 1u);
  cr_assert_eq(back.buffers[2].spec.sharding.kind, PW_SHARDING_SPLIT);
  cr_assert_eq(back.buffers[2].mesh.axis_names[0][0], '\0');
  pw__snap_manifest_free(pw_allocator_system(), &back);
  pw_allocator_free(pw_allocator_system(), bytes, size);
}

static void fails_with(pw_snap_manifest_buffer_t* b, const char* needle) {
  pw_snap_manifest_t m = {5, 4096, 1, b};
  void* bytes = NULL;
  size_t size = 0;
  OK(pw__snap_manifest_encode(pw_allocator_system(), &m, &bytes, &size));
  pw_snap_manifest_t back;
  FAILS(pw__snap_manifest_decode(pw_allocator_system(), bytes, size, &back), PW_STATUS_DATA_LOSS,
        needle);
  pw_allocator_free(pw_allocator_system(), bytes, size);
}

Test(manifest, shardings_that_do_not_fit_the_mesh_are_data_loss) {
  pw_mesh_shape_t mesh = named_mesh("data=2,model=4");
  int64_t dims[2] = {8, 16};
  pw_snap_manifest_buffer_t b;
  pw_snap_chunk_t chunk;
  one_buffer(&b, &chunk, "w", spec_of(2, dims, "P(data, model)", &mesh), mesh);
  b.spec.shape.dims[1] = 6; /* 6 over model (4): uneven */
  b.bytes = 8 * 6 * 4;
  b.stored_bytes = chunk.stored_bytes = PW_SNAPSHOT_VALUE_HEADER + b.bytes;
  chunk.raw_bytes = b.bytes;
  fails_with(&b, "manifest: sharding: dimension 1 (size 6) is not divisible");
  one_buffer(&b, &chunk, "w", spec_of(2, dims, "P(data, model)", &mesh), mesh);
  memcpy(b.mesh.axis_names[1], "data", 5); /* two axes named "data" */
  fails_with(&b, "manifest: mesh axes 0 and 1 are both named 'data'");
}

/* A format 1 manifest, as earlier releases wrote it: u8[4] split(0, 0). */
static size_t format1(uint8_t* out, const char* kind) {
  uint8_t cbor[256];
  size_t n = 0;
#define PUT(...)                                        \
  do {                                                  \
    const uint8_t part[] = {__VA_ARGS__};               \
    memcpy(cbor + n, part, sizeof(part));               \
    n += sizeof(part);                                  \
  } while (0)
#define TEXT(s)                                         \
  do {                                                  \
    cbor[n++] = (uint8_t)(0x60 + strlen(s));            \
    memcpy(cbor + n, s, strlen(s));                     \
    n += strlen(s);                                     \
  } while (0)
  PUT(0xA4);
  TEXT("format"); PUT(0x01);
  TEXT("step"); PUT(0x03);
  TEXT("chunk_bytes"); PUT(0x19, 0x10, 0x00);
  TEXT("buffers"); PUT(0x81, 0xA8);
  TEXT("name"); TEXT("b");
  TEXT("dtype"); TEXT("u8");
  TEXT("shape"); PUT(0x81, 0x04);
  TEXT("sharding"); PUT(0xA3);
  TEXT("kind"); TEXT(kind);
  TEXT("tensor_axis"); PUT(0x00);
  TEXT("mesh_axis"); PUT(0x00);
  TEXT("bytes"); PUT(0x04);
  TEXT("xxh64"); PUT(0x07);
  TEXT("stored_bytes"); PUT(0x18, 0x44);
  TEXT("chunks"); PUT(0x81, 0x84, 0x00, 0x04, 0x18, 0x44, 0x07);
#undef PUT
#undef TEXT
  memcpy(out, PW_SNAPSHOT_MANIFEST_MAGIC, 8);
  uint32_t version = 1, header = PW_SNAPSHOT_MANIFEST_HEADER;
  uint64_t size = n, sum = pw__xxh64(cbor, n, 0);
  memcpy(out + 8, &version, 4); /* little-endian hosts, as the format */
  memcpy(out + 12, &header, 4);
  memcpy(out + 16, &size, 8);
  memcpy(out + 24, &sum, 8);
  memcpy(out + PW_SNAPSHOT_MANIFEST_HEADER, cbor, n);
  return PW_SNAPSHOT_MANIFEST_HEADER + n;
}

Test(manifest, format_1_manifests_still_read) {
  uint8_t bytes[512];
  size_t size = format1(bytes, "split");
  pw_snap_manifest_t back;
  OK(pw__snap_manifest_decode(pw_allocator_system(), bytes, size, &back));
  cr_assert_eq(back.count, 1);
  cr_assert_eq(back.buffers[0].spec.sharding.kind, PW_SHARDING_SPLIT);
  cr_assert_eq(back.buffers[0].spec.shape.dims[0], 4);
  cr_assert_eq(back.buffers[0].mesh.rank, 0); /* not recorded */
  pw__snap_manifest_free(pw_allocator_system(), &back);
  size = format1(bytes, "tiled");
  FAILS(pw__snap_manifest_decode(pw_allocator_system(), bytes, size, &back), PW_STATUS_DATA_LOSS,
        "unknown sharding kind 'tiled' (tiled shardings need format 2)");
}
