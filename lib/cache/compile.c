#define _POSIX_C_SOURCE 200809L
/* Compile keys and compiling through the cache (lib/runtime/executable.c
 * calls pw__cache_compile; pw_runtime_set_compile_cache is there too).
 *
 * The key is XXH3-128 (seed 0) over, in order:
 *   "pathways.compile.v1" and a NUL            domain tag
 *   u64 length + bytes of the backend name
 *   u64 backend version
 *   u64 mesh rank, then u64 per mesh dimension
 *   u64 length + bytes of the options (NULL is "")
 *   u64 length + bytes of the program
 * every u64 little-endian. Length prefixes keep fields from running into
 * each other ("ab" + "c" differs from "a" + "bc"). Nothing else goes in:
 * no path, time, process or pointer, so every process and host computes
 * the same key for the same compile. */
#include <string.h>

#include "base/hash.h"
#include "cache/cache_internal.h"
#include "plugin/backend_call.h"

#define PW_COMPILE_KEY_DOMAIN "pathways.compile.v1"

static void pw_hash_field(pw_hasher_t* h, const void* bytes, size_t size) {
  pw__hasher_update_u64(h, size);
  if (size) pw__hasher_update(h, bytes, size);
}

pw_status_t pw_cache_compile_key(const char* backend_name, uint32_t backend_version,
                                 const pw_mesh_shape_t* mesh, const void* program,
                                 size_t program_size, const char* options,
                                 pw_cache_key_t* out_key) {
  if (backend_name == NULL || mesh == NULL || out_key == NULL ||
      (program == NULL && program_size != 0)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cache_compile_key: backend_name, mesh, program or out_key is NULL");
  }
  if (mesh->rank > PW_MAX_MESH_RANK) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cache_compile_key: mesh rank %u (at most %d)", mesh->rank,
                          PW_MAX_MESH_RANK);
  }
  pw_hasher_t h;
  pw__hasher_init(&h, 0);
  pw__hasher_update(&h, PW_COMPILE_KEY_DOMAIN, sizeof(PW_COMPILE_KEY_DOMAIN));
  pw_hash_field(&h, backend_name, strlen(backend_name));
  pw__hasher_update_u64(&h, backend_version);
  pw__hasher_update_u64(&h, mesh->rank);
  for (uint32_t i = 0; i < mesh->rank; ++i) pw__hasher_update_u64(&h, mesh->dims[i]);
  pw_hash_field(&h, options ? options : "", options ? strlen(options) : 0);
  pw_hash_field(&h, program, program_size);
  pw_hash128_t k = pw__hasher_final(&h);
  for (int i = 0; i < 8; ++i) {
    out_key->bytes[i] = (uint8_t)(k.high >> (56 - 8 * i));
    out_key->bytes[8 + i] = (uint8_t)(k.low >> (56 - 8 * i));
  }
  return NULL;
}

typedef struct pw_compile_fill_t {
  const pw_backend_t* backend;
  const void* program;
  size_t program_size;
  const pw_mesh_shape_t* mesh;
  const char* options;
} pw_compile_fill_t;

static pw_status_t pw_compile_fill(void* user, pw_allocator_t allocator, void** out_bytes,
                                   size_t* out_size) {
  const pw_compile_fill_t* f = user;
  return pw__backend_compile(f->backend, f->program, f->program_size, f->mesh, f->options,
                             allocator, out_bytes, out_size);
}

pw_status_t pw__cache_compile(pw_cache_t* cache, const pw_backend_t* backend,
                              const void* program, size_t program_size,
                              const pw_mesh_shape_t* mesh, const char* options,
                              pw_allocator_t allocator, void** out_bytes, size_t* out_size,
                              pw_cache_key_t* out_key, bool* out_cached) {
  *out_bytes = NULL;
  *out_size = 0;
  *out_cached = false;
  PW_RETURN_IF_ERROR(pw_cache_compile_key(pw__backend_name(backend), backend->vtable->version,
                                          mesh, program, program_size, options, out_key));
  pw_compile_fill_t fill = {backend, program, program_size, mesh, options};
  pw_cache_entry_t* entry = NULL;
  pw_cache_origin_t origin;
  PW_RETURN_IF_ERROR(pw_cache_lookup(cache, out_key, pw_compile_fill, &fill, &entry, &origin));
  size_t size = 0;
  const void* data = pw_cache_entry_data(entry, &size);
  pw_status_t status = NULL;
  if (size > 0) {
    status = pw_allocator_malloc(allocator, size, 0, out_bytes);
    if (status == NULL) {
      memcpy(*out_bytes, data, size);
      *out_size = size;
    }
  }
  pw_cache_entry_release(entry);
  *out_cached = origin == PW_CACHE_FROM_MEMORY || origin == PW_CACHE_FROM_STORE;
  return status;
}
