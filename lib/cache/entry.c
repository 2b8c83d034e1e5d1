/* Store entries of the compilation cache: a checked header and a
 * zstd-compressed (or raw) payload. Layout in docs/formats.md; all
 * integers little-endian.
 *
 *   0  magic "PWCACHE\n"        8
 *   8  format version (1)       4
 *  12  header size (72)         4
 *  16  key                     16
 *  32  value size               8
 *  40  payload size             8   (bytes after the header)
 *  48  XXH64 of the payload     8
 *  56  fill (compile) time, ns  8
 *  64  codec (0 raw, 1 zstd)    4
 *  68  low 32 bits of XXH64 of bytes 0..67
 *
 * zstd runs on contexts whose memory comes from the caller's allocator. */
#define ZSTD_STATIC_LINKING_ONLY
#include <string.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "base/hash.h"
#include "cache/cache_internal.h"

static void pw_put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = (uint8_t)(v >> (8 * i));
}
static void pw_put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t pw_get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
static uint64_t pw_get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

/* zstd's allocator hooks carry no size on free: keep it in front. */
#define PW_ZSTD_PREFIX 16u
static void* pw_zstd_alloc(void* opaque, size_t size) {
  const pw_allocator_t* a = opaque;
  if (size > SIZE_MAX - PW_ZSTD_PREFIX) return NULL;
  uint8_t* p = a->alloc(a->self, size + PW_ZSTD_PREFIX, PW_ZSTD_PREFIX);
  if (p == NULL) return NULL;
  memcpy(p, &size, sizeof(size));
  return p + PW_ZSTD_PREFIX;
}
static void pw_zstd_free(void* opaque, void* address) {
  if (address == NULL) return;
  const pw_allocator_t* a = opaque;
  uint8_t* p = (uint8_t*)address - PW_ZSTD_PREFIX;
  size_t size;
  memcpy(&size, p, sizeof(size));
  a->free(a->self, p, size + PW_ZSTD_PREFIX);
}

void pw__cache_zstd_deinit(pw_cache_zstd_t* z) {
  ZSTD_freeCCtx(z->cctx);
  ZSTD_freeDCtx(z->dctx);
  z->cctx = z->dctx = NULL;
}

/* The contexts of |z| (created on first use), or temporary ones when |z|
 * is NULL; NULL when allocation fails. Release with pw_zstd_done_*. */
static ZSTD_CCtx* pw_zstd_cctx(pw_cache_zstd_t* z, pw_allocator_t* a) {
  if (z == NULL) return ZSTD_createCCtx_advanced((ZSTD_customMem){pw_zstd_alloc, pw_zstd_free, a});
  if (z->cctx == NULL) {
    z->cctx = ZSTD_createCCtx_advanced((ZSTD_customMem){pw_zstd_alloc, pw_zstd_free, &z->allocator});
  }
  return z->cctx;
}
static void pw_zstd_done_c(pw_cache_zstd_t* z, ZSTD_CCtx* c) {
  if (z == NULL) ZSTD_freeCCtx(c);
}
static ZSTD_DCtx* pw_zstd_dctx(pw_cache_zstd_t* z, pw_allocator_t* a) {
  if (z == NULL) return ZSTD_createDCtx_advanced((ZSTD_customMem){pw_zstd_alloc, pw_zstd_free, a});
  if (z->dctx == NULL) {
    z->dctx = ZSTD_createDCtx_advanced((ZSTD_customMem){pw_zstd_alloc, pw_zstd_free, &z->allocator});
  }
  return z->dctx;
}
static void pw_zstd_done_d(pw_cache_zstd_t* z, ZSTD_DCtx* d) {
  if (z == NULL) ZSTD_freeDCtx(d);
}

static uint32_t pw_cache_header_check(const uint8_t* header) {
  return (uint32_t)pw__xxh64(header, 68, 0);
}

pw_status_t pw__cache_entry_encode(const pw_cache_key_t* key, const void* value,
                                   size_t value_size, uint64_t fill_ns, int level,
                                   pw_allocator_t allocator, pw_cache_zstd_t* zstd,
                                   void** out_entry, size_t* out_size, size_t* out_capacity) {
  *out_entry = NULL;
  *out_size = *out_capacity = 0;
  if (value_size > PW_CACHE_ENTRY_VALUE_MAX) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "cache value of %zu bytes exceeds the entry limit of %llu", value_size,
                          (unsigned long long)PW_CACHE_ENTRY_VALUE_MAX);
  }
  size_t bound = ZSTD_compressBound(value_size);
  size_t capacity = PW_CACHE_ENTRY_HEADER_SIZE + (bound > value_size ? bound : value_size);
  uint8_t* entry = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(allocator, capacity, 0, (void**)&entry));
  uint8_t* payload = entry + PW_CACHE_ENTRY_HEADER_SIZE;
  uint32_t codec = PW_CACHE_CODEC_RAW;
  size_t payload_size = value_size;
  if (value_size > 0) {
    ZSTD_CCtx* cctx = pw_zstd_cctx(zstd, &allocator);
    if (cctx == NULL) {
      pw_allocator_free(allocator, entry, capacity);
      return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "cannot create a zstd context");
    }
    size_t r = ZSTD_compressCCtx(cctx, payload, bound, value, value_size, level);
    pw_zstd_done_c(zstd, cctx);
    if (ZSTD_isError(r)) {
      pw_allocator_free(allocator, entry, capacity);
      return pw_status_make(ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation
                                ? PW_STATUS_RESOURCE_EXHAUSTED
                                : PW_STATUS_INTERNAL,
                            "zstd compression of %zu bytes: %s", value_size,
                            ZSTD_getErrorName(r));
    }
    if (r < value_size) {
      codec = PW_CACHE_CODEC_ZSTD;
      payload_size = r;
    } else {
      memcpy(payload, value, value_size);
    }
  }
  memcpy(entry, PW_CACHE_ENTRY_MAGIC, 8);
  pw_put_u32(entry + 8, PW_CACHE_ENTRY_VERSION);
  pw_put_u32(entry + 12, PW_CACHE_ENTRY_HEADER_SIZE);
  memcpy(entry + 16, key->bytes, 16);
  pw_put_u64(entry + 32, value_size);
  pw_put_u64(entry + 40, payload_size);
  pw_put_u64(entry + 48, pw__xxh64(payload, payload_size, 0));
  pw_put_u64(entry + 56, fill_ns);
  pw_put_u32(entry + 64, codec);
  pw_put_u32(entry + 68, pw_cache_header_check(entry));
  *out_entry = entry;
  *out_size = PW_CACHE_ENTRY_HEADER_SIZE + payload_size;
  *out_capacity = capacity;
  return NULL;
}

#define PW_CACHE_BAD(...) pw_status_make(PW_STATUS_DATA_LOSS, __VA_ARGS__)

pw_status_t pw__cache_entry_decode(const pw_cache_key_t* key, const void* entry_bytes,
                                   size_t entry_size, pw_allocator_t allocator,
                                   pw_cache_zstd_t* zstd, void** out_value,
                                   size_t* out_value_size, uint64_t* out_fill_ns) {
  *out_value = NULL;
  *out_value_size = 0;
  *out_fill_ns = 0;
  const uint8_t* e = entry_bytes;
  if (entry_size < PW_CACHE_ENTRY_HEADER_SIZE) {
    return PW_CACHE_BAD("entry of %zu bytes is shorter than its %u-byte header (truncated)",
                        entry_size, PW_CACHE_ENTRY_HEADER_SIZE);
  }
  if (memcmp(e, PW_CACHE_ENTRY_MAGIC, 8) != 0) {
    return PW_CACHE_BAD("not a cache entry (bad magic)");
  }
  uint32_t version = pw_get_u32(e + 8);
  if (version != PW_CACHE_ENTRY_VERSION || pw_get_u32(e + 12) != PW_CACHE_ENTRY_HEADER_SIZE) {
    return PW_CACHE_BAD("entry format version %u, header size %u (this library reads "
                        "version %u)",
                        version, pw_get_u32(e + 12), PW_CACHE_ENTRY_VERSION);
  }
  if (pw_get_u32(e + 68) != pw_cache_header_check(e)) {
    return PW_CACHE_BAD("header checksum mismatch");
  }
  if (memcmp(e + 16, key->bytes, 16) != 0) {
    char want[33], have[33];
    pw_cache_key_t other;
    memcpy(other.bytes, e + 16, 16);
    pw_cache_key_format(key, want);
    pw_cache_key_format(&other, have);
    return PW_CACHE_BAD("entry holds key %s, not %s (a foreign entry)", have, want);
  }
  uint64_t value_size = pw_get_u64(e + 32);
  uint64_t payload_size = pw_get_u64(e + 40);
  const uint8_t* payload = e + PW_CACHE_ENTRY_HEADER_SIZE;
  if (payload_size != entry_size - PW_CACHE_ENTRY_HEADER_SIZE) {
    return PW_CACHE_BAD("entry has %zu payload bytes, its header says %llu (truncated or "
                        "extended)",
                        entry_size - PW_CACHE_ENTRY_HEADER_SIZE, (unsigned long long)payload_size);
  }
  if (pw__xxh64(payload, (size_t)payload_size, 0) != pw_get_u64(e + 48)) {
    return PW_CACHE_BAD("payload checksum mismatch");
  }
  if (value_size > PW_CACHE_ENTRY_VALUE_MAX) {
    return PW_CACHE_BAD("value size %llu exceeds the entry limit", (unsigned long long)value_size);
  }
  uint32_t codec = pw_get_u32(e + 64);
  if (codec != PW_CACHE_CODEC_RAW && codec != PW_CACHE_CODEC_ZSTD) {
    return PW_CACHE_BAD("unknown codec %u", codec);
  }
  if (codec == PW_CACHE_CODEC_RAW && payload_size != value_size) {
    return PW_CACHE_BAD("raw payload of %llu bytes for a value of %llu",
                        (unsigned long long)payload_size, (unsigned long long)value_size);
  }
  if (codec == PW_CACHE_CODEC_ZSTD &&
      ZSTD_getFrameContentSize(payload, (size_t)payload_size) != value_size) {
    return PW_CACHE_BAD("zstd frame does not declare the value size %llu",
                        (unsigned long long)value_size);
  }
  *out_fill_ns = pw_get_u64(e + 56);
  if (value_size == 0) return NULL;
  void* value = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(allocator, (size_t)value_size, 0, &value));
  if (codec == PW_CACHE_CODEC_RAW) {
    memcpy(value, payload, (size_t)value_size);
  } else {
    ZSTD_DCtx* dctx = pw_zstd_dctx(zstd, &allocator);
    size_t r = dctx ? ZSTD_decompressDCtx(dctx, value, (size_t)value_size, payload,
                                          (size_t)payload_size)
                    : 0;
    pw_zstd_done_d(zstd, dctx);
    if (dctx == NULL || ZSTD_isError(r) || r != value_size) {
      pw_allocator_free(allocator, value, (size_t)value_size);
      if (dctx == NULL || (ZSTD_isError(r) && ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation)) {
        return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "cannot create a zstd context");
      }
      return PW_CACHE_BAD("zstd payload does not decompress: %s",
                          ZSTD_isError(r) ? ZSTD_getErrorName(r) : "wrong size");
    }
  }
  *out_value = value;
  *out_value_size = (size_t)value_size;
  return NULL;
}
