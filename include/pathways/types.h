/* libpathways: value types shared by the runtime and the plugins: element
 * types, shapes, mesh shapes and shardings. Plain structs, no allocation. */
#ifndef PATHWAYS_TYPES_H_
#define PATHWAYS_TYPES_H_

#include "pathways/api.h"
#include "pathways/status.h"

PW_EXTERN_C_BEGIN

/* Element types. Values are stable: they appear in executable bytes and
 * (by name) in graph files, so existing values never change and new types
 * take new values. docs/formats.md has the table (value, names, size,
 * numpy mapping). */
typedef enum pw_dtype_e {
  PW_DTYPE_INVALID = 0,
  PW_DTYPE_F32 = 1,
  PW_DTYPE_F64 = 2,
  PW_DTYPE_I32 = 3,
  PW_DTYPE_I64 = 4,
  PW_DTYPE_U8 = 5,
  PW_DTYPE_BF16 = 6,      /* bfloat16: 1 sign, 8 exponent, 7 mantissa bits */
  PW_DTYPE_F16 = 7,       /* IEEE binary16 */
  PW_DTYPE_I8 = 8,
  PW_DTYPE_I16 = 9,
  PW_DTYPE_U16 = 10,
  PW_DTYPE_U32 = 11,
  PW_DTYPE_U64 = 12,
  PW_DTYPE_BOOL = 13,     /* one byte, 0 or 1 */
  PW_DTYPE_F8E4M3FN = 14, /* 4 exponent, 3 mantissa bits; no inf; NaN 0x7F/0xFF */
  PW_DTYPE_F8E5M2 = 15,   /* 5 exponent, 2 mantissa bits; IEEE-like */
  PW_DTYPE_C64 = 16,      /* complex64: two f32, real then imaginary */
} pw_dtype_t;

/* One more than the largest value (values 1 .. PW_DTYPE_COUNT - 1 are
 * valid). Grows as dtypes are added: size tables by it, never persist it. */
#define PW_DTYPE_COUNT 17

/* Bytes per element; 0 for PW_DTYPE_INVALID or an unknown value. */
PW_API size_t pw_dtype_size(pw_dtype_t dtype);
/* The short name the library's text forms use (shapes "bf16[8,4]", CPU
 * programs, graph files, messages): "f32", "f64", "i32", "i64", "u8",
 * "bf16", "f16", "i8", "i16", "u16", "u32", "u64", "bool", "f8e4m3fn",
 * "f8e5m2", "c64"; "invalid" otherwise. Static storage. */
PW_API const char* pw_dtype_name(pw_dtype_t dtype);
/* The numpy / ml_dtypes name: "float32", "float64", "int32", "int64",
 * "uint8", "bfloat16", "float16", "int8", "int16", "uint16", "uint32",
 * "uint64", "bool", "float8_e4m3fn", "float8_e5m2", "complex64";
 * "invalid" otherwise. Static storage. */
PW_API const char* pw_dtype_numpy_name(pw_dtype_t dtype);
/* Parses |length| bytes of |name|: the short name (pw_dtype_name) or the
 * numpy name (pw_dtype_numpy_name), case-sensitive. False (and
 * |*out_dtype| untouched) for anything else, "invalid" included. */
PW_API bool pw_dtype_parse(const char* name, size_t length, pw_dtype_t* out_dtype);

/* Conversions between f32 and the narrow float types, bit patterns in
 * integers. To the narrow type: round to nearest, ties to even; NaN stays
 * NaN (a quiet NaN of the same sign); subnormals are produced and read.
 * Overflow: bf16, f16 and f8e5m2 give infinity; f8e4m3fn, which has no
 * infinity, gives NaN (as ml_dtypes does), and so does an infinite input.
 * Widening to f32 is exact. */
PW_API float pw_bf16_to_f32(uint16_t bits);
PW_API uint16_t pw_f32_to_bf16(float value);
PW_API float pw_f16_to_f32(uint16_t bits);
PW_API uint16_t pw_f32_to_f16(float value);
PW_API float pw_f8e4m3fn_to_f32(uint8_t bits);
PW_API uint8_t pw_f32_to_f8e4m3fn(float value);
PW_API float pw_f8e5m2_to_f32(uint8_t bits);
PW_API uint8_t pw_f32_to_f8e5m2(float value);

#define PW_MAX_RANK 8

/* An array shape: |rank| dimensions, each >= 1 (rank 0 is a scalar). */
typedef struct pw_shape_t {
  uint32_t rank;
  int64_t dims[PW_MAX_RANK];
} pw_shape_t;

/* Builds a shape; |rank| > PW_MAX_RANK is clamped (validate with
 * pw_shape_check). */
PW_API pw_shape_t pw_shape_make(uint32_t rank, const int64_t* dims);
/* Number of elements (1 for a scalar); 0 if a dimension is < 1 or the
 * product overflows int64. */
PW_API int64_t pw_shape_element_count(const pw_shape_t* shape);
PW_API bool pw_shape_equal(const pw_shape_t* a, const pw_shape_t* b);
/* INVALID_ARGUMENT naming the bad dimension, or NULL. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_shape_check(const pw_shape_t* shape);
/* Writes "f32[8,4]"-style text (dtype may be PW_DTYPE_INVALID to omit it);
 * returns the length the full text needs, like snprintf. */
PW_API size_t pw_shape_format(pw_dtype_t dtype, const pw_shape_t* shape,
                              char* buffer, size_t capacity);

/* The largest byte size of an array the library accepts: it fits in
 * int64_t, size_t and ptrdiff_t (2^63 - 1 on 64-bit hosts). Every array
 * and shard size, offset and copy run the runtime computes is at most the
 * global array's byte size, so once that passed pw_shape_byte_size no
 * product of some of its dimensions and the dtype size can wrap. */
#define PW_ARRAY_MAX_BYTES                                                \
  ((uint64_t)PTRDIFF_MAX < (uint64_t)INT64_MAX ? (uint64_t)PTRDIFF_MAX \
                                               : (uint64_t)INT64_MAX)

/* The byte size of an array of |shape| with |dtype|, computed with
 * overflow checks: the one place the library multiplies an element count
 * by a dtype size. INVALID_ARGUMENT naming the shape (pw_shape_format) if
 * the dtype or shape is invalid or the size exceeds PW_ARRAY_MAX_BYTES;
 * |*out_bytes| is then 0. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_shape_byte_size(pw_dtype_t dtype,
                                                         const pw_shape_t* shape,
                                                         size_t* out_bytes);

#define PW_MAX_MESH_RANK 4

/* Bytes of a mesh axis name, NUL included. */
#define PW_MESH_AXIS_NAME_MAX 16

/* The logical arrangement of a slice's devices, e.g. {2, {2, 4}} for 2x4.
 * Devices are numbered row-major over the mesh.
 *
 * Axes may be named ("data", "model"), as JAX's Mesh names them; shardings
 * refer to axes by index, and the names are how text forms (sharding specs,
 * graph files, messages) refer to them. A name is 1..15 characters of
 * [A-Za-z0-9_], not starting with a digit, distinct within the mesh; an
 * empty name (all zero, what pw_mesh_shape_make gives) is an unnamed axis,
 * written as its index. Either every axis is named or none is. Names are
 * labels: pw_mesh_shape_equal, executables' mesh match and the compile
 * cache's key ignore them. */
typedef struct pw_mesh_shape_t {
  uint32_t rank;
  uint32_t dims[PW_MAX_MESH_RANK];
  char axis_names[PW_MAX_MESH_RANK][PW_MESH_AXIS_NAME_MAX];
} pw_mesh_shape_t;

/* An aggregate initializer of an unnamed mesh: PW_MESH_SHAPE_INIT(2, 2, 4)
 * is 2x4 (usable in static tables, unlike pw_mesh_shape_make). */
#define PW_MESH_SHAPE_INIT(rank, ...) {(rank), {__VA_ARGS__}, {{0}}}

PW_API pw_mesh_shape_t pw_mesh_shape_make(uint32_t rank, const uint32_t* dims);
/* Product of the dims; 0 if invalid. */
PW_API uint32_t pw_mesh_shape_device_count(const pw_mesh_shape_t* mesh);
PW_API bool pw_mesh_shape_equal(const pw_mesh_shape_t* a, const pw_mesh_shape_t* b);
/* INVALID_ARGUMENT unless 1 <= rank <= PW_MAX_MESH_RANK and every dim >= 1
 * and the device count fits in 2^20. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_mesh_shape_check(const pw_mesh_shape_t* mesh);
/* Writes "2x4", or "data=2,model=4" when the axes are named; returns the
 * needed length like snprintf. */
PW_API size_t pw_mesh_shape_format(const pw_mesh_shape_t* mesh, char* buffer,
                                   size_t capacity);
/* Parses "2x4" (or "8"), or a mesh with named axes "data=2,model=4"
 * (names as pw_mesh_shape_set_axis_names checks them). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_mesh_shape_parse(const char* text,
                                                          pw_mesh_shape_t* out_mesh);
/* Names every axis of |mesh| (|count| == mesh->rank names, each
 * NUL-terminated); |names| NULL makes every axis unnamed. INVALID_ARGUMENT
 * naming the bad name (empty, too long, a character outside [A-Za-z0-9_], a
 * leading digit, a name used twice) or a count other than the rank; |mesh|
 * is then unchanged. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_mesh_shape_set_axis_names(pw_mesh_shape_t* mesh,
                                                                  uint32_t count,
                                                                  const char* const* names);
/* Finds the axis named |name| (|length| bytes) or, for unnamed axes, the
 * axis whose index |name| spells ("1"). NOT_FOUND listing the mesh's axes
 * otherwise. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_mesh_axis_find(const pw_mesh_shape_t* mesh,
                                                       const char* name, size_t length,
                                                       uint32_t* out_axis);
/* Writes axis |axis|'s name, or its index when unnamed; returns the length
 * like snprintf. */
PW_API size_t pw_mesh_axis_format(const pw_mesh_shape_t* mesh, uint32_t axis, char* buffer,
                                  size_t capacity);
/* True when both meshes name their axes alike (all unnamed counts). */
PW_API bool pw_mesh_shape_names_equal(const pw_mesh_shape_t* a, const pw_mesh_shape_t* b);

/* Coordinate of device |index| (row-major) along mesh axis |axis|. */
PW_API uint32_t pw_mesh_coordinate(const pw_mesh_shape_t* mesh, uint32_t index,
                                   uint32_t axis);

typedef enum pw_sharding_kind_e {
  /* Every device holds the whole array. */
  PW_SHARDING_REPLICATED = 0,
  /* The array is split in equal blocks along |tensor_axis| over the devices
   * of |mesh_axis|; devices that differ only along other mesh axes hold the
   * same block (replicas). */
  PW_SHARDING_SPLIT = 1,
  /* The general form (JAX's NamedSharding with a PartitionSpec, GSPMD's
   * tiled sharding): each tensor dimension is split over an ordered list of
   * mesh axes (|tiles|), the array is replicated over the mesh axes no tile
   * uses, and the mesh axes in |unreduced_axes| hold partial sums (the
   * array is the sum of the shards that differ only along them). Splits are
   * even: a dimension not divisible by the product of its mesh axes is
   * refused (pw_sharding_check), never padded. REPLICATED and SPLIT are
   * special cases and stay valid everywhere. */
  PW_SHARDING_TILED = 2,
} pw_sharding_kind_t;

/* mesh_axis value meaning "over every device of the mesh" (row-major
 * device index), e.g. an 8-way split on a 2x4 mesh. */
#define PW_MESH_AXIS_ALL 0xFFFFFFFFu

/* One mesh axis splitting one tensor dimension. The tiles naming the same
 * tensor dimension split it major to minor in the order they are listed
 * (PartitionSpec(("data", "model"))): the block index along that dimension
 * is the mixed-radix number of the devices' coordinates along those axes. */
typedef struct pw_sharding_tile_t {
  uint8_t tensor_axis;
  uint8_t mesh_axis;
} pw_sharding_tile_t;

typedef struct pw_sharding_t {
  pw_sharding_kind_t kind;
  uint32_t tensor_axis;   /* SPLIT */
  uint32_t mesh_axis;     /* SPLIT: an axis, or PW_MESH_AXIS_ALL */
  /* TILED (ignored for the other kinds): tiles[0 .. tile_count - 1], and
   * bit a of unreduced_axes set when mesh axis a holds partial sums. A mesh
   * axis appears in at most one tile and is not also unreduced. */
  uint32_t tile_count;
  pw_sharding_tile_t tiles[PW_MAX_MESH_RANK];
  uint32_t unreduced_axes;
} pw_sharding_t;

static inline pw_sharding_t pw_sharding_replicated(void) {
  pw_sharding_t s = {PW_SHARDING_REPLICATED, 0, 0, 0, {{0, 0}}, 0};
  return s;
}
static inline pw_sharding_t pw_sharding_split(uint32_t tensor_axis, uint32_t mesh_axis) {
  pw_sharding_t s = {PW_SHARDING_SPLIT, tensor_axis, mesh_axis, 0, {{0, 0}}, 0};
  return s;
}
/* Aggregate initializers (static tables, compound literals) that stay
 * complete when the structs grow. */
#define PW_SHARDING_REPLICATED_INIT {PW_SHARDING_REPLICATED, 0, 0, 0, {{0, 0}}, 0}
#define PW_SHARDING_SPLIT_INIT(tensor_axis, mesh_axis) \
  {PW_SHARDING_SPLIT, (tensor_axis), (mesh_axis), 0, {{0, 0}}, 0}

/* A TILED sharding of |tile_count| tiles (more than PW_MAX_MESH_RANK are
 * kept as a count pw_sharding_check refuses) and the unreduced axes' mask. */
PW_API pw_sharding_t pw_sharding_tiled(uint32_t tile_count, const pw_sharding_tile_t* tiles,
                                       uint32_t unreduced_axes);

/* Field-by-field equality of two shardings as written (a SPLIT and the
 * TILED form of the same layout differ); pw_sharding_equivalent compares
 * layouts. */
PW_API bool pw_sharding_equal(const pw_sharding_t* a, const pw_sharding_t* b);

/* Writes the TILED form of |sharding| over |mesh| into |out|: REPLICATED
 * has no tiles, SPLIT(t, m) one tile, SPLIT(t, all) one tile per mesh axis
 * in order; TILED tiles are kept in order. INVALID_ARGUMENT (as
 * pw_sharding_check) when |sharding| is not valid for |shape| on |mesh|. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_sharding_normalize(const pw_sharding_t* sharding,
                                                            const pw_shape_t* shape,
                                                            const pw_mesh_shape_t* mesh,
                                                            pw_sharding_t* out);

/* True when |a| and |b| lay an array of |shape| out alike over |mesh|
 * (every device holds the same block, or the same partial sum); false when
 * either is invalid there. */
PW_API bool pw_sharding_equivalent(const pw_sharding_t* a, const pw_sharding_t* b,
                                   const pw_shape_t* shape, const pw_mesh_shape_t* mesh);

/* Checks |sharding| of an array of |shape| over |mesh|: axes in range,
 * each mesh axis used once, and every split dimension divisible by the
 * product of its mesh axes' sizes. INVALID_ARGUMENT naming the culprit (the
 * tensor dimension, the mesh axis by name), or NULL. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_sharding_check(const pw_sharding_t* sharding,
                                                        const pw_shape_t* shape,
                                                        const pw_mesh_shape_t* mesh);

/* The shape of one device's shard (a block of the global shape). */
PW_API pw_shape_t pw_sharding_shard_shape(const pw_sharding_t* sharding,
                                          const pw_shape_t* shape,
                                          const pw_mesh_shape_t* mesh);

/* Where device |device_index|'s shard starts: |out_offsets[k]| is the
 * global index of its first element along dimension k (rank entries; 0
 * along dimensions not split). The sharding must be valid. */
PW_API void pw_sharding_shard_offsets(const pw_sharding_t* sharding, const pw_shape_t* shape,
                                      const pw_mesh_shape_t* mesh, uint32_t device_index,
                                      int64_t* out_offsets);

/* How many distinct blocks the array is cut into (the product of every
 * split dimension's parts; 1 for replicated). */
PW_API uint32_t pw_sharding_block_count(const pw_sharding_t* sharding, const pw_shape_t* shape,
                                        const pw_mesh_shape_t* mesh);

/* Which block device |device_index| holds: the row-major index of its
 * block over the grid of blocks (for SPLIT, the block along the split
 * axis; 0 for replicated). Devices that differ only along replicated or
 * unreduced axes hold the same block. */
PW_API uint32_t pw_sharding_block_index(const pw_sharding_t* sharding,
                                        const pw_mesh_shape_t* mesh,
                                        uint32_t device_index);

/* How many partial sums make up each block: the product of the unreduced
 * axes' sizes (1 when nothing is unreduced), and which of them device
 * |device_index| holds (the mixed-radix number of its coordinates along
 * the unreduced axes, in mesh order). */
PW_API uint32_t pw_sharding_partial_count(const pw_sharding_t* sharding,
                                          const pw_mesh_shape_t* mesh);
PW_API uint32_t pw_sharding_partial_index(const pw_sharding_t* sharding,
                                          const pw_mesh_shape_t* mesh, uint32_t device_index);

/* A logical (global) array: element type, global shape, and how it is laid
 * out over a mesh. Buffers, executable parameters and graph values are
 * described by one. */
typedef struct pw_array_spec_t {
  pw_dtype_t dtype;
  pw_shape_t shape;
  pw_sharding_t sharding;
} pw_array_spec_t;

/* Checks dtype, shape, byte size (pw_shape_byte_size) and sharding over
 * |mesh| (skipped when NULL); INVALID_ARGUMENT naming the problem, or
 * NULL. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_array_spec_check(const pw_array_spec_t* spec,
                                                          const pw_mesh_shape_t* mesh);
/* Checks |spec| over |mesh| (pw_array_spec_check) and gives the global
 * array's bytes and one device's shard's bytes (either out-param may be
 * NULL; both are cleared first). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_array_spec_byte_sizes(const pw_array_spec_t* spec,
                                                               const pw_mesh_shape_t* mesh,
                                                               size_t* out_total,
                                                               size_t* out_shard);
PW_API bool pw_array_spec_equal(const pw_array_spec_t* a, const pw_array_spec_t* b);
/* Writes "f32[8,4] split(0 over all devices)"; returns the needed length. */
PW_API size_t pw_array_spec_format(const pw_array_spec_t* spec, char* buffer,
                                   size_t capacity);

/* Writes "replicated" or "split(0 over mesh axis 1)"-style text; TILED as
 * a PartitionSpec with axis indices, "P(0, None, (1, 2)) unreduced(3)".
 * pw_sharding_format_named writes the axes' names from |mesh| instead,
 * "P(data, None) unreduced(model)". Return the needed length. */
PW_API size_t pw_sharding_format(const pw_sharding_t* sharding, char* buffer,
                                 size_t capacity);
PW_API size_t pw_sharding_format_named(const pw_sharding_t* sharding,
                                       const pw_mesh_shape_t* mesh, char* buffer,
                                       size_t capacity);

/* Parses a sharding for an array of |rank| dimensions over |mesh|:
 * "replicated"; "split(T, M)" (M an axis or "all"); or a PartitionSpec
 * "P(data, None, (x, y))" with one entry per tensor dimension (fewer: the
 * rest are None), each None, an axis, or a parenthesised list of axes,
 * optionally followed by " unreduced(a, b)". Axes are names from |mesh| or
 * indices. Gives a TILED sharding for a PartitionSpec. INVALID_ARGUMENT
 * naming the offending text (an unknown axis lists the mesh's), and the
 * result is checked as far as the shape is not needed (axes in range, each
 * axis used once). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_sharding_parse(const char* text, size_t length,
                                                        uint32_t rank,
                                                        const pw_mesh_shape_t* mesh,
                                                        pw_sharding_t* out_sharding);

PW_EXTERN_C_END

#endif /* PATHWAYS_TYPES_H_ */
