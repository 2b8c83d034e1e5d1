/* Value types: the dtype table (names, sizes, parsing), shapes and array
 * specs. Meshes are in mesh.c, shardings in sharding.c, the narrow float
 * conversions in float_convert.c. */
#include "pathways/types.h"

#include <stdio.h>
#include <string.h>

/* Indexed by pw_dtype_t; a new dtype appends a row (values are stable). */
static const struct {
  const char* name;
  const char* numpy_name;
  size_t size;
} pw_dtype_table[PW_DTYPE_COUNT] = {
    [PW_DTYPE_INVALID] = {"invalid", "invalid", 0},
    [PW_DTYPE_F32] = {"f32", "float32", 4},
    [PW_DTYPE_F64] = {"f64", "float64", 8},
    [PW_DTYPE_I32] = {"i32", "int32", 4},
    [PW_DTYPE_I64] = {"i64", "int64", 8},
    [PW_DTYPE_U8] = {"u8", "uint8", 1},
    [PW_DTYPE_BF16] = {"bf16", "bfloat16", 2},
    [PW_DTYPE_F16] = {"f16", "float16", 2},
    [PW_DTYPE_I8] = {"i8", "int8", 1},
    [PW_DTYPE_I16] = {"i16", "int16", 2},
    [PW_DTYPE_U16] = {"u16", "uint16", 2},
    [PW_DTYPE_U32] = {"u32", "uint32", 4},
    [PW_DTYPE_U64] = {"u64", "uint64", 8},
    [PW_DTYPE_BOOL] = {"bool", "bool", 1},
    [PW_DTYPE_F8E4M3FN] = {"f8e4m3fn", "float8_e4m3fn", 1},
    [PW_DTYPE_F8E5M2] = {"f8e5m2", "float8_e5m2", 1},
    [PW_DTYPE_C64] = {"c64", "complex64", 8},
};

size_t pw_dtype_size(pw_dtype_t dtype) {
  if ((unsigned)dtype >= PW_DTYPE_COUNT) return 0;
  return pw_dtype_table[dtype].size;
}

const char* pw_dtype_name(pw_dtype_t dtype) {
  if ((unsigned)dtype >= PW_DTYPE_COUNT) return "invalid";
  return pw_dtype_table[dtype].name;
}

const char* pw_dtype_numpy_name(pw_dtype_t dtype) {
  if ((unsigned)dtype >= PW_DTYPE_COUNT) return "invalid";
  return pw_dtype_table[dtype].numpy_name;
}

static bool pw_dtype_name_is(const char* candidate, const char* name, size_t length) {
  return strlen(candidate) == length && memcmp(candidate, name, length) == 0;
}

bool pw_dtype_parse(const char* name, size_t length, pw_dtype_t* out_dtype) {
  if (name == NULL || out_dtype == NULL) return false;
  for (int i = 1; i < PW_DTYPE_COUNT; ++i) {
    if (pw_dtype_name_is(pw_dtype_table[i].name, name, length) ||
        pw_dtype_name_is(pw_dtype_table[i].numpy_name, name, length)) {
      *out_dtype = (pw_dtype_t)i;
      return true;
    }
  }
  return false;
}

pw_shape_t pw_shape_make(uint32_t rank, const int64_t* dims) {
  pw_shape_t shape;
  memset(&shape, 0, sizeof(shape));
  shape.rank = rank > PW_MAX_RANK ? PW_MAX_RANK : rank;
  for (uint32_t i = 0; i < shape.rank; ++i) shape.dims[i] = dims[i];
  return shape;
}

int64_t pw_shape_element_count(const pw_shape_t* shape) {
  if (shape == NULL || shape->rank > PW_MAX_RANK) return 0;
  int64_t count = 1;
  for (uint32_t i = 0; i < shape->rank; ++i) {
    int64_t d = shape->dims[i];
    if (d < 1 || count > INT64_MAX / d) return 0;
    count *= d;
  }
  return count;
}

bool pw_shape_equal(const pw_shape_t* a, const pw_shape_t* b) {
  if (a->rank != b->rank) return false;
  for (uint32_t i = 0; i < a->rank && i < PW_MAX_RANK; ++i) {
    if (a->dims[i] != b->dims[i]) return false;
  }
  return true;
}

pw_status_t pw_shape_check(const pw_shape_t* shape) {
  if (shape == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "shape is NULL");
  }
  if (shape->rank > PW_MAX_RANK) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "shape rank %u exceeds the maximum %d", shape->rank,
                          PW_MAX_RANK);
  }
  for (uint32_t i = 0; i < shape->rank; ++i) {
    if (shape->dims[i] < 1) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "shape dimension %u is %lld; dimensions must be >= 1",
                            i, (long long)shape->dims[i]);
    }
  }
  if (pw_shape_element_count(shape) == 0) {
    char text[256];
    pw_shape_format(PW_DTYPE_INVALID, shape, text, sizeof(text));
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "shape %s: element count overflows int64", text);
  }
  return NULL;
}

pw_status_t pw_shape_byte_size(pw_dtype_t dtype, const pw_shape_t* shape, size_t* out_bytes) {
  if (out_bytes == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_shape_byte_size: out_bytes is NULL");
  }
  *out_bytes = 0;
  size_t elem = pw_dtype_size(dtype);
  if (elem == 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "unknown dtype %d", (int)dtype);
  }
  PW_RETURN_IF_ERROR(pw_shape_check(shape));
  /* Dimension by dimension, so that no partial product can wrap either. */
  uint64_t bytes = elem;
  for (uint32_t i = 0; i < shape->rank; ++i) {
    uint64_t d = (uint64_t)shape->dims[i];
    if (bytes > PW_ARRAY_MAX_BYTES / d) {
      char text[256];
      pw_shape_format(dtype, shape, text, sizeof(text));
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "array %s: %lld elements of %zu bytes exceed the limit of %llu "
                            "bytes per array",
                            text, (long long)pw_shape_element_count(shape), elem,
                            (unsigned long long)PW_ARRAY_MAX_BYTES);
    }
    bytes *= d;
  }
  *out_bytes = (size_t)bytes;
  return NULL;
}

size_t pw_shape_format(pw_dtype_t dtype, const pw_shape_t* shape, char* buffer,
                       size_t capacity) {
  char text[32 + PW_MAX_RANK * 21];
  size_t n = 0;
  if (dtype != PW_DTYPE_INVALID) {
    n += (size_t)snprintf(text + n, sizeof(text) - n, "%s", pw_dtype_name(dtype));
  }
  n += (size_t)snprintf(text + n, sizeof(text) - n, "[");
  uint32_t rank = shape->rank > PW_MAX_RANK ? PW_MAX_RANK : shape->rank;
  for (uint32_t i = 0; i < rank; ++i) {
    n += (size_t)snprintf(text + n, sizeof(text) - n, "%s%lld", i ? "," : "",
                          (long long)shape->dims[i]);
  }
  snprintf(text + n, sizeof(text) - n, "]");
  int total = snprintf(buffer, capacity, "%s", text);
  return total < 0 ? 0 : (size_t)total;
}

pw_status_t pw_array_spec_check(const pw_array_spec_t* spec,
                                const pw_mesh_shape_t* mesh) {
  if (spec == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "array spec is NULL");
  }
  if (pw_dtype_size(spec->dtype) == 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "unknown dtype %d",
                          (int)spec->dtype);
  }
  size_t bytes = 0;
  PW_RETURN_IF_ERROR(pw_shape_byte_size(spec->dtype, &spec->shape, &bytes));
  if (mesh != NULL) PW_RETURN_IF_ERROR(pw_sharding_check(&spec->sharding, &spec->shape, mesh));
  return NULL;
}

pw_status_t pw_array_spec_byte_sizes(const pw_array_spec_t* spec, const pw_mesh_shape_t* mesh,
                                     size_t* out_total, size_t* out_shard) {
  if (out_total != NULL) *out_total = 0;
  if (out_shard != NULL) *out_shard = 0;
  if (mesh == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_array_spec_byte_sizes: mesh is NULL");
  }
  PW_RETURN_IF_ERROR(pw_array_spec_check(spec, mesh));
  size_t total = 0, shard_bytes = 0;
  PW_RETURN_IF_ERROR(pw_shape_byte_size(spec->dtype, &spec->shape, &total));
  /* A shard divides one dimension of the checked shape: never larger. */
  pw_shape_t shard = pw_sharding_shard_shape(&spec->sharding, &spec->shape, mesh);
  PW_RETURN_IF_ERROR(pw_shape_byte_size(spec->dtype, &shard, &shard_bytes));
  if (out_total != NULL) *out_total = total;
  if (out_shard != NULL) *out_shard = shard_bytes;
  return NULL;
}

bool pw_array_spec_equal(const pw_array_spec_t* a, const pw_array_spec_t* b) {
  return a->dtype == b->dtype && pw_shape_equal(&a->shape, &b->shape) &&
         pw_sharding_equal(&a->sharding, &b->sharding);
}

size_t pw_array_spec_format(const pw_array_spec_t* spec, char* buffer,
                            size_t capacity) {
  char shape[256];
  char sharding[64];
  pw_shape_format(spec->dtype, &spec->shape, shape, sizeof(shape));
  pw_sharding_format(&spec->sharding, sharding, sizeof(sharding));
  int n = snprintf(buffer, capacity, "%s %s", shape, sharding);
  return n < 0 ? 0 : (size_t)n;
}
