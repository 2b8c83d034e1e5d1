/* Snapshot byte layouts (docs/formats.md, "Snapshots"); integers
 * little-endian.
 *
 * Data value (one chunk of one buffer):
 *   0  magic "PWSNAPV\n"              8
 *   8  format version (1)             4
 *  12  header size (64)               4
 *  16  step                           8
 *  24  buffer index                   4
 *  28  codec (0 raw, 1 zstd)          4
 *  32  offset of the chunk in the buffer's raw bytes  8
 *  40  raw bytes of the chunk         8
 *  48  XXH64 of the payload (bytes 64..)              8
 *  56  XXH64 of bytes 0..55           8
 *  64  payload
 *
 * Manifest value:
 *   0  magic "PWSNAPM\n"              8
 *   8  format version (1)             4
 *  12  header size (32)               4
 *  16  CBOR size                      8
 *  24  XXH64 of the CBOR bytes        8
 *  32  CBOR (schema in docs/formats.md), deterministic: definite lengths,
 *      shortest heads, keys in a fixed order.
 *
 * The CBOR is written with libcbor's head encoders and read with a strict
 * reader of our own: the schema is fixed, so anything else (indefinite
 * lengths, other types, other keys or key order, counts beyond the bytes
 * left, trailing bytes) is DATA_LOSS before anything is allocated for it
 * (libcbor's cbor_load trusts declared counts; docs/toolchain.md). */
#define ZSTD_STATIC_LINKING_ONLY
#include <cbor.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "base/hash.h"
#include "snapshot/snapshot_internal.h"

static void pw_snap_put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = (uint8_t)(v >> (8 * i));
}
static void pw_snap_put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t pw_snap_get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
static uint64_t pw_snap_get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

/* ---- keys -------------------------------------------------------------------- */

void pw__snap_manifest_key(const pw_snapshotter_t* s, uint64_t step,
                           char key[PW_STORE_KEY_MAX + 1]) {
  snprintf(key, PW_STORE_KEY_MAX + 1, "%s-%020" PRIu64 ".manifest", s->prefix, step);
}

void pw__snap_value_key(const pw_snapshotter_t* s, uint64_t step, uint32_t buffer,
                        uint32_t chunk, char key[PW_STORE_KEY_MAX + 1]) {
  snprintf(key, PW_STORE_KEY_MAX + 1, "%s-%020" PRIu64 "-%05u-%06u", s->prefix, step, buffer,
           chunk);
}

static bool pw_snap_digits(const char* p, size_t n, uint64_t* out) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] < '0' || p[i] > '9') return false;
    uint64_t d = (uint64_t)(p[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

bool pw__snap_parse_key(const pw_snapshotter_t* s, const char* key, uint64_t* out_step,
                        bool* out_is_manifest) {
  size_t plen = strlen(s->prefix);
  if (strncmp(key, s->prefix, plen) != 0 || key[plen] != '-') return false;
  const char* p = key + plen + 1;
  size_t rest = strlen(p);
  if (rest < 20 || !pw_snap_digits(p, 20, out_step)) return false;
  p += 20;
  if (strcmp(p, ".manifest") == 0) {
    *out_is_manifest = true;
    return true;
  }
  uint64_t ignored;
  if (strlen(p) == 13 && p[0] == '-' && p[6] == '-' && pw_snap_digits(p + 1, 5, &ignored) &&
      pw_snap_digits(p + 7, 6, &ignored)) {
    *out_is_manifest = false;
    return true;
  }
  return false;
}

/* ---- zstd on our allocator ---------------------------------------------------- */

/* zstd's free carries no size: keep it in front. */
#define PW_SNAP_ZSTD_PREFIX 16u
static void* pw_snap_zstd_alloc(void* opaque, size_t size) {
  const pw_allocator_t* a = opaque;
  if (size > SIZE_MAX - PW_SNAP_ZSTD_PREFIX) return NULL;
  uint8_t* p = a->alloc(a->self, size + PW_SNAP_ZSTD_PREFIX, PW_SNAP_ZSTD_PREFIX);
  if (p == NULL) return NULL;
  memcpy(p, &size, sizeof(size));
  return p + PW_SNAP_ZSTD_PREFIX;
}
static void pw_snap_zstd_free(void* opaque, void* address) {
  if (address == NULL) return;
  const pw_allocator_t* a = opaque;
  uint8_t* p = (uint8_t*)address - PW_SNAP_ZSTD_PREFIX;
  size_t size;
  memcpy(&size, p, sizeof(size));
  a->free(a->self, p, size + PW_SNAP_ZSTD_PREFIX);
}

void pw__snap_zstd_deinit(pw_snap_zstd_t* z) {
  ZSTD_freeCCtx(z->cctx);
  ZSTD_freeDCtx(z->dctx);
  z->cctx = z->dctx = NULL;
}

static ZSTD_customMem pw_snap_zstd_mem(pw_snap_zstd_t* z) {
  return (ZSTD_customMem){pw_snap_zstd_alloc, pw_snap_zstd_free, &z->allocator};
}

/* ---- data values ---------------------------------------------------------------- */

pw_status_t pw__snap_value_encode(pw_snap_zstd_t* z, int level, uint64_t step,
                                  uint32_t index, uint64_t offset, const void* raw,
                                  size_t raw_size, void** out_value, size_t* out_size,
                                  size_t* out_capacity) {
  *out_value = NULL;
  *out_size = *out_capacity = 0;
  size_t bound = ZSTD_compressBound(raw_size);
  if (bound < raw_size) bound = raw_size;
  if (bound > SIZE_MAX - PW_SNAPSHOT_VALUE_HEADER) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "chunk of %zu bytes is too large",
                          raw_size);
  }
  size_t capacity = PW_SNAPSHOT_VALUE_HEADER + bound;
  uint8_t* value = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(z->allocator, capacity, 0, (void**)&value));
  uint8_t* payload = value + PW_SNAPSHOT_VALUE_HEADER;
  uint32_t codec = 0;
  size_t payload_size = raw_size;
  if (raw_size > 0) {
    if (z->cctx == NULL) z->cctx = ZSTD_createCCtx_advanced(pw_snap_zstd_mem(z));
    if (z->cctx == NULL) {
      pw_allocator_free(z->allocator, value, capacity);
      return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "cannot create a zstd context");
    }
    size_t r = ZSTD_compressCCtx(z->cctx, payload, bound, raw, raw_size, level);
    if (ZSTD_isError(r)) {
      pw_allocator_free(z->allocator, value, capacity);
      return pw_status_make(ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation
                                ? PW_STATUS_RESOURCE_EXHAUSTED
                                : PW_STATUS_INTERNAL,
                            "zstd compression of %zu bytes: %s", raw_size, ZSTD_getErrorName(r));
    }
    if (r < raw_size) {
      codec = 1;
      payload_size = r;
    } else {
      memcpy(payload, raw, raw_size);
    }
  }
  memcpy(value, PW_SNAPSHOT_VALUE_MAGIC, 8);
  pw_snap_put_u32(value + 8, PW_SNAPSHOT_FORMAT_VERSION);
  pw_snap_put_u32(value + 12, PW_SNAPSHOT_VALUE_HEADER);
  pw_snap_put_u64(value + 16, step);
  pw_snap_put_u32(value + 24, index);
  pw_snap_put_u32(value + 28, codec);
  pw_snap_put_u64(value + 32, offset);
  pw_snap_put_u64(value + 40, raw_size);
  pw_snap_put_u64(value + 48, pw__xxh64(payload, payload_size, 0));
  pw_snap_put_u64(value + 56, pw__xxh64(value, 56, 0));
  *out_value = value;
  *out_size = PW_SNAPSHOT_VALUE_HEADER + payload_size;
  *out_capacity = capacity;
  return NULL;
}

pw_status_t pw__snap_value_decode(pw_snap_zstd_t* z, uint64_t step, uint32_t index,
                                  const pw_snap_chunk_t* chunk, const void* bytes,
                                  size_t size, void* dst) {
  const uint8_t* v = bytes;
  if (size != chunk->stored_bytes) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "value has %zu bytes, the manifest says %" PRIu64,
                          size, chunk->stored_bytes);
  }
  if (size < PW_SNAPSHOT_VALUE_HEADER || memcmp(v, PW_SNAPSHOT_VALUE_MAGIC, 8) != 0) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "not a snapshot data value (bad magic or size)");
  }
  if (pw_snap_get_u64(v + 56) != pw__xxh64(v, 56, 0)) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "value header checksum mismatch");
  }
  if (pw_snap_get_u32(v + 8) != PW_SNAPSHOT_FORMAT_VERSION ||
      pw_snap_get_u32(v + 12) != PW_SNAPSHOT_VALUE_HEADER) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "value format version %u is not %u",
                          pw_snap_get_u32(v + 8), PW_SNAPSHOT_FORMAT_VERSION);
  }
  uint32_t codec = pw_snap_get_u32(v + 28);
  if (pw_snap_get_u64(v + 16) != step || pw_snap_get_u32(v + 24) != index ||
      pw_snap_get_u64(v + 32) != chunk->offset || pw_snap_get_u64(v + 40) != chunk->raw_bytes ||
      codec > 1) {
    return pw_status_make(PW_STATUS_DATA_LOSS,
                          "value header (step %" PRIu64 ", buffer %u, offset %" PRIu64
                          ", %" PRIu64 " bytes, codec %u) disagrees with the manifest",
                          pw_snap_get_u64(v + 16), pw_snap_get_u32(v + 24),
                          pw_snap_get_u64(v + 32), pw_snap_get_u64(v + 40), codec);
  }
  const uint8_t* payload = v + PW_SNAPSHOT_VALUE_HEADER;
  size_t payload_size = size - PW_SNAPSHOT_VALUE_HEADER;
  if (pw_snap_get_u64(v + 48) != pw__xxh64(payload, payload_size, 0)) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "payload checksum mismatch");
  }
  size_t raw = (size_t)chunk->raw_bytes;
  if (codec == 0) {
    if (payload_size != raw) {
      return pw_status_make(PW_STATUS_DATA_LOSS, "raw payload of %zu bytes, expected %zu",
                            payload_size, raw);
    }
    if (raw > 0) memcpy(dst, payload, raw);
  } else {
    if (z->dctx == NULL) z->dctx = ZSTD_createDCtx_advanced(pw_snap_zstd_mem(z));
    if (z->dctx == NULL) {
      return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "cannot create a zstd context");
    }
    size_t r = ZSTD_decompressDCtx(z->dctx, dst, raw, payload, payload_size);
    if (ZSTD_isError(r)) {
      return pw_status_make(ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation
                                ? PW_STATUS_RESOURCE_EXHAUSTED
                                : PW_STATUS_DATA_LOSS,
                            "zstd decompression: %s", ZSTD_getErrorName(r));
    }
    if (r != raw) {
      return pw_status_make(PW_STATUS_DATA_LOSS, "decompressed to %zu bytes, expected %zu", r,
                            raw);
    }
  }
  if (pw__xxh64(dst, raw, 0) != chunk->raw_xxh64) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "raw bytes checksum mismatch");
  }
  return NULL;
}

/* ---- CBOR writing -------------------------------------------------------------- */

typedef struct pw_snap_writer_t {
  uint8_t* buffer;  /* NULL: measure only */
  size_t size;
} pw_snap_writer_t;

static void pw_snap_w_raw(pw_snap_writer_t* w, const void* bytes, size_t n) {
  if (w->buffer != NULL && n > 0) memcpy(w->buffer + w->size, bytes, n);
  w->size += n;
}
static void pw_snap_w_uint(pw_snap_writer_t* w, uint64_t v) {
  unsigned char head[9];
  pw_snap_w_raw(w, head, cbor_encode_uint(v, head, sizeof(head)));
}
static void pw_snap_w_array(pw_snap_writer_t* w, size_t n) {
  unsigned char head[9];
  pw_snap_w_raw(w, head, cbor_encode_array_start(n, head, sizeof(head)));
}
static void pw_snap_w_map(pw_snap_writer_t* w, size_t n) {
  unsigned char head[9];
  pw_snap_w_raw(w, head, cbor_encode_map_start(n, head, sizeof(head)));
}
static void pw_snap_w_text(pw_snap_writer_t* w, const char* text) {
  unsigned char head[9];
  size_t n = strlen(text);
  pw_snap_w_raw(w, head, cbor_encode_string_start(n, head, sizeof(head)));
  pw_snap_w_raw(w, text, n);
}

/* {"kind": "replicated" | "split", "tensor_axis", "mesh_axis"}, or
 * {"kind": "tiled", "tiles": [[tensor_axis, mesh_axis], ...],
 *  "unreduced": [mesh_axis, ...]} (format 2). */
static void pw_snap_emit_sharding(pw_snap_writer_t* w, const pw_sharding_t* s) {
  pw_snap_w_map(w, 3);
  pw_snap_w_text(w, "kind");
  if (s->kind == PW_SHARDING_TILED) {
    uint32_t tiles = s->tile_count < PW_MAX_MESH_RANK ? s->tile_count : PW_MAX_MESH_RANK;
    pw_snap_w_text(w, "tiled");
    pw_snap_w_text(w, "tiles");
    pw_snap_w_array(w, tiles);
    for (uint32_t i = 0; i < tiles; ++i) {
      pw_snap_w_array(w, 2);
      pw_snap_w_uint(w, s->tiles[i].tensor_axis);
      pw_snap_w_uint(w, s->tiles[i].mesh_axis);
    }
    uint32_t count = 0;
    for (uint32_t a = 0; a < PW_MAX_MESH_RANK; ++a) count += (s->unreduced_axes >> a) & 1u;
    pw_snap_w_text(w, "unreduced");
    pw_snap_w_array(w, count);
    for (uint32_t a = 0; a < PW_MAX_MESH_RANK; ++a) {
      if ((s->unreduced_axes >> a) & 1u) pw_snap_w_uint(w, a);
    }
    return;
  }
  pw_snap_w_text(w, s->kind == PW_SHARDING_SPLIT ? "split" : "replicated");
  pw_snap_w_text(w, "tensor_axis");
  pw_snap_w_uint(w, s->tensor_axis);
  pw_snap_w_text(w, "mesh_axis");
  pw_snap_w_uint(w, s->mesh_axis);
}

/* {"dims": [uint, ...], "names": [text, ...] (one per axis, or none)}. */
static void pw_snap_emit_mesh(pw_snap_writer_t* w, const pw_mesh_shape_t* m) {
  uint32_t rank = m->rank < PW_MAX_MESH_RANK ? m->rank : PW_MAX_MESH_RANK;
  bool named = rank > 0 && m->axis_names[0][0] != '\0';
  pw_snap_w_map(w, 2);
  pw_snap_w_text(w, "dims");
  pw_snap_w_array(w, rank);
  for (uint32_t k = 0; k < rank; ++k) pw_snap_w_uint(w, m->dims[k]);
  pw_snap_w_text(w, "names");
  pw_snap_w_array(w, named ? rank : 0);
  for (uint32_t k = 0; named && k < rank; ++k) {
    char name[PW_MESH_AXIS_NAME_MAX];
    memcpy(name, m->axis_names[k], sizeof(name));
    name[sizeof(name) - 1] = '\0';
    pw_snap_w_text(w, name);
  }
}

static void pw_snap_emit_buffer(pw_snap_writer_t* w, const pw_snap_manifest_buffer_t* b) {
  pw_snap_w_map(w, 9);
  pw_snap_w_text(w, "name");
  pw_snap_w_text(w, b->name);
  pw_snap_w_text(w, "dtype");
  pw_snap_w_text(w, pw_dtype_name(b->spec.dtype));
  pw_snap_w_text(w, "shape");
  pw_snap_w_array(w, b->spec.shape.rank);
  for (uint32_t d = 0; d < b->spec.shape.rank; ++d) pw_snap_w_uint(w, (uint64_t)b->spec.shape.dims[d]);
  pw_snap_w_text(w, "sharding");
  pw_snap_emit_sharding(w, &b->spec.sharding);
  pw_snap_w_text(w, "mesh");
  pw_snap_emit_mesh(w, &b->mesh);
  pw_snap_w_text(w, "bytes");
  pw_snap_w_uint(w, b->bytes);
  pw_snap_w_text(w, "xxh64");
  pw_snap_w_uint(w, b->xxh64);
  pw_snap_w_text(w, "stored_bytes");
  pw_snap_w_uint(w, b->stored_bytes);
  pw_snap_w_text(w, "chunks");
  pw_snap_w_array(w, b->chunk_count);
  for (uint32_t c = 0; c < b->chunk_count; ++c) {
    pw_snap_w_array(w, 4);
    pw_snap_w_uint(w, b->chunks[c].offset);
    pw_snap_w_uint(w, b->chunks[c].raw_bytes);
    pw_snap_w_uint(w, b->chunks[c].stored_bytes);
    pw_snap_w_uint(w, b->chunks[c].raw_xxh64);
  }
}

static void pw_snap_emit(pw_snap_writer_t* w, const pw_snap_manifest_t* m) {
  pw_snap_w_map(w, 4);
  pw_snap_w_text(w, "format");
  pw_snap_w_uint(w, PW_SNAPSHOT_MANIFEST_FORMAT);
  pw_snap_w_text(w, "step");
  pw_snap_w_uint(w, m->step);
  pw_snap_w_text(w, "chunk_bytes");
  pw_snap_w_uint(w, m->chunk_bytes);
  pw_snap_w_text(w, "buffers");
  pw_snap_w_array(w, m->count);
  for (uint32_t i = 0; i < m->count; ++i) pw_snap_emit_buffer(w, &m->buffers[i]);
}

pw_status_t pw__snap_manifest_encode(pw_allocator_t allocator, const pw_snap_manifest_t* m,
                                     void** out_bytes, size_t* out_size) {
  *out_bytes = NULL;
  *out_size = 0;
  pw_snap_writer_t measure = {NULL, 0};
  pw_snap_emit(&measure, m);
  size_t total = PW_SNAPSHOT_MANIFEST_HEADER + measure.size;
  uint8_t* bytes = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(allocator, total, 0, (void**)&bytes));
  pw_snap_writer_t w = {bytes + PW_SNAPSHOT_MANIFEST_HEADER, 0};
  pw_snap_emit(&w, m);
  memcpy(bytes, PW_SNAPSHOT_MANIFEST_MAGIC, 8);
  pw_snap_put_u32(bytes + 8, PW_SNAPSHOT_FORMAT_VERSION);
  pw_snap_put_u32(bytes + 12, PW_SNAPSHOT_MANIFEST_HEADER);
  pw_snap_put_u64(bytes + 16, w.size);
  pw_snap_put_u64(bytes + 24, pw__xxh64(w.buffer, w.size, 0));
  *out_bytes = bytes;
  *out_size = total;
  return NULL;
}

/* ---- CBOR reading ---------------------------------------------------------------- */

typedef struct pw_snap_reader_t {
  const uint8_t* data;
  size_t size;
  size_t pos;
} pw_snap_reader_t;

enum { PW_CBOR_MAJOR_UINT = 0, PW_CBOR_MAJOR_TEXT = 3, PW_CBOR_MAJOR_ARRAY = 4,
       PW_CBOR_MAJOR_MAP = 5 };

/* One item head of major type |major|; DATA_LOSS for anything else. */
static pw_status_t pw_snap_r_head(pw_snap_reader_t* r, int major, const char* what,
                                  uint64_t* out) {
  if (r->pos >= r->size) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "manifest CBOR truncated before %s", what);
  }
  uint8_t initial = r->data[r->pos];
  int got = initial >> 5, info = initial & 31;
  size_t extra = info < 24 ? 0 : info == 24 ? 1 : info == 25 ? 2 : info == 26 ? 4
                                                                : info == 27 ? 8 : 99;
  if (got != major || extra == 99) {
    return pw_status_make(PW_STATUS_DATA_LOSS,
                          "manifest CBOR offset %zu: %s has initial byte 0x%02x", r->pos, what,
                          initial);
  }
  if (extra > r->size - r->pos - 1) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "manifest CBOR truncated in %s", what);
  }
  uint64_t v = info < 24 ? (uint64_t)info : 0;
  for (size_t i = 0; i < extra; ++i) v = (v << 8) | r->data[r->pos + 1 + i];
  r->pos += 1 + extra;
  /* Counts and lengths cannot exceed the bytes left (each element takes
   * at least one). */
  if (major != PW_CBOR_MAJOR_UINT && v > r->size - r->pos) {
    return pw_status_make(PW_STATUS_DATA_LOSS,
                          "manifest CBOR: %s declares %" PRIu64 " items, %zu bytes are left", what,
                          v, r->size - r->pos);
  }
  *out = v;
  return NULL;
}

static pw_status_t pw_snap_r_text(pw_snap_reader_t* r, const char* what, char* out,
                                  size_t capacity) {
  uint64_t n;
  PW_RETURN_IF_ERROR(pw_snap_r_head(r, PW_CBOR_MAJOR_TEXT, what, &n));
  if (n >= capacity) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "manifest: %s is %" PRIu64 " bytes long", what, n);
  }
  memcpy(out, r->data + r->pos, (size_t)n);
  out[n] = '\0';
  if (memchr(out, '\0', (size_t)n) != NULL) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "manifest: %s holds a NUL byte", what);
  }
  r->pos += (size_t)n;
  return NULL;
}

static pw_status_t pw_snap_r_key(pw_snap_reader_t* r, const char* key) {
  char got[32];
  PW_RETURN_IF_ERROR(pw_snap_r_text(r, "a key", got, sizeof(got)));
  if (strcmp(got, key) != 0) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "manifest: key '%s' where '%s' belongs", got, key);
  }
  return NULL;
}

static pw_status_t pw_snap_r_uint_max(pw_snap_reader_t* r, const char* what, uint64_t max,
                                      uint64_t* out) {
  PW_RETURN_IF_ERROR(pw_snap_r_head(r, PW_CBOR_MAJOR_UINT, what, out));
  if (*out > max) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "manifest: %s %" PRIu64 " is out of range", what,
                          *out);
  }
  return NULL;
}

static pw_status_t pw_snap_r_tiled(pw_snap_reader_t* r, pw_sharding_t* out) {
  uint64_t n, two, t, m;
  PW_RETURN_IF_ERROR(pw_snap_r_key(r, "tiles"));
  PW_RETURN_IF_ERROR(pw_snap_r_head(r, PW_CBOR_MAJOR_ARRAY, "tiles", &n));
  if (n > PW_MAX_MESH_RANK) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "manifest: %" PRIu64 " tiles (at most %d)", n,
                          PW_MAX_MESH_RANK);
  }
  pw_sharding_tile_t tiles[PW_MAX_MESH_RANK];
  for (uint64_t i = 0; i < n; ++i) {
    PW_RETURN_IF_ERROR(pw_snap_r_head(r, PW_CBOR_MAJOR_ARRAY, "a tile", &two));
    if (two != 2) return pw_status_make(PW_STATUS_DATA_LOSS, "manifest: a tile has %" PRIu64 " fields", two);
    PW_RETURN_IF_ERROR(pw_snap_r_uint_max(r, "a tile's tensor axis", PW_MAX_RANK - 1, &t));
    PW_RETURN_IF_ERROR(pw_snap_r_uint_max(r, "a tile's mesh axis", PW_MAX_MESH_RANK - 1, &m));
    tiles[i].tensor_axis = (uint8_t)t;
    tiles[i].mesh_axis = (uint8_t)m;
  }
  uint32_t unreduced = 0;
  PW_RETURN_IF_ERROR(pw_snap_r_key(r, "unreduced"));
  PW_RETURN_IF_ERROR(pw_snap_r_head(r, PW_CBOR_MAJOR_ARRAY, "unreduced", &m));
  if (m > PW_MAX_MESH_RANK) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "manifest: %" PRIu64 " unreduced axes", m);
  }
  for (uint64_t i = 0; i < m; ++i) {
    PW_RETURN_IF_ERROR(pw_snap_r_uint_max(r, "an unreduced axis", PW_MAX_MESH_RANK - 1, &t));
    unreduced |= 1u << t;
  }
  *out = pw_sharding_tiled((uint32_t)n, tiles, unreduced);
  return NULL;
}

static pw_status_t pw_snap_r_sharding(pw_snap_reader_t* r, uint64_t format, pw_sharding_t* out) {
  uint64_t n, v;
  char kind[16];
  PW_RETURN_IF_ERROR(pw_snap_r_head(r, PW_CBOR_MAJOR_MAP, "sharding", &n));
  if (n != 3) return pw_status_make(PW_STATUS_DATA_LOSS, "manifest: sharding has %" PRIu64 " keys", n);
  PW_RETURN_IF_ERROR(pw_snap_r_key(r, "kind"));
  PW_RETURN_IF_ERROR(pw_snap_r_text(r, "sharding kind", kind, sizeof(kind)));
  if (strcmp(kind, "replicated") == 0) {
    out->kind = PW_SHARDING_REPLICATED;
  } else if (strcmp(kind, "split") == 0) {
    out->kind = PW_SHARDING_SPLIT;
  } else if (strcmp(kind, "tiled") == 0 && format >= 2) {
    return pw_snap_r_tiled(r, out);
  } else {
    return pw_status_make(PW_STATUS_DATA_LOSS, "manifest: unknown sharding kind '%s'%s", kind,
                          strcmp(kind, "tiled") == 0 ? " (tiled shardings need format 2)" : "");
  }
  PW_RETURN_IF_ERROR(pw_snap_r_key(r, "tensor_axis"));
  PW_RETURN_IF_ERROR(pw_snap_r_uint_max(r, "tensor_axis", PW_MAX_RANK, &v));
  out->tensor_axis = (uint32_t)v;
  PW_RETURN_IF_ERROR(pw_snap_r_key(r, "mesh_axis"));
  PW_RETURN_IF_ERROR(pw_snap_r_uint_max(r, "mesh_axis", UINT32_MAX, &v));
  out->mesh_axis = (uint32_t)v;
  return NULL;
}

/* The buffer's mesh (format 2); checked, names included. */
static pw_status_t pw_snap_r_mesh(pw_snap_reader_t* r, pw_mesh_shape_t* out) {
  uint64_t n, rank, v;
  memset(out, 0, sizeof(*out));
  PW_RETURN_IF_ERROR(pw_snap_r_head(r, PW_CBOR_MAJOR_MAP, "mesh", &n));
  if (n != 2) return pw_status_make(PW_STATUS_DATA_LOSS, "manifest: mesh has %" PRIu64 " keys", n);
  PW_RETURN_IF_ERROR(pw_snap_r_key(r, "dims"));
  PW_RETURN_IF_ERROR(pw_snap_r_head(r, PW_CBOR_MAJOR_ARRAY, "mesh dims", &rank));
  if (rank == 0 || rank > PW_MAX_MESH_RANK) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "manifest: mesh rank %" PRIu64, rank);
  }
  out->rank = (uint32_t)rank;
  for (uint32_t k = 0; k < out->rank; ++k) {
    PW_RETURN_IF_ERROR(pw_snap_r_uint_max(r, "a mesh dim", 1u << 20, &v));
    out->dims[k] = (uint32_t)v;
  }
  pw_status_t status = pw_mesh_shape_check(out);
  if (status != NULL) {
    pw_status_t error = pw_status_make(PW_STATUS_DATA_LOSS, "manifest: %s",
                                       pw_status_message(status));
    pw_status_free(status);
    return error;
  }
  PW_RETURN_IF_ERROR(pw_snap_r_key(r, "names"));
  PW_RETURN_IF_ERROR(pw_snap_r_head(r, PW_CBOR_MAJOR_ARRAY, "mesh names", &n));
  if (n == 0) return NULL;
  if (n != rank) {
    return pw_status_make(PW_STATUS_DATA_LOSS,
                          "manifest: %" PRIu64 " mesh axis names for a rank-%" PRIu64 " mesh", n,
                          rank);
  }
  char names[PW_MAX_MESH_RANK][PW_MESH_AXIS_NAME_MAX];
  const char* list[PW_MAX_MESH_RANK];
  for (uint32_t k = 0; k < out->rank; ++k) {
    PW_RETURN_IF_ERROR(pw_snap_r_text(r, "a mesh axis name", names[k], sizeof(names[k])));
    list[k] = names[k];
  }
  status = pw_mesh_shape_set_axis_names(out, out->rank, list);
  if (status != NULL) {
    pw_status_t error = pw_status_make(PW_STATUS_DATA_LOSS, "manifest: %s",
                                       pw_status_message(status));
    pw_status_free(status);
    return error;
  }
  return NULL;
}

static pw_status_t pw_snap_r_chunks(pw_allocator_t allocator, pw_snap_reader_t* r,
                                    pw_snap_manifest_buffer_t* b) {
  uint64_t n;
  PW_RETURN_IF_ERROR(pw_snap_r_head(r, PW_CBOR_MAJOR_ARRAY, "chunks", &n));
  if (n == 0 && b->bytes != 0) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "manifest: a buffer of %" PRIu64 " bytes has no chunks", b->bytes);
  }
  if (n > 0) {
    PW_RETURN_IF_ERROR(pw_allocator_calloc_array(allocator, (size_t)n, sizeof(pw_snap_chunk_t), 0,
                                                 (void**)&b->chunks));
  }
  b->chunk_count = (uint32_t)n;
  uint64_t expect = 0, stored = 0;
  for (uint64_t c = 0; c < n; ++c) {
    uint64_t four;
    pw_snap_chunk_t* k = &b->chunks[c];
    PW_RETURN_IF_ERROR(pw_snap_r_head(r, PW_CBOR_MAJOR_ARRAY, "a chunk", &four));
    if (four != 4) return pw_status_make(PW_STATUS_DATA_LOSS, "manifest: a chunk has %" PRIu64 " fields", four);
    PW_RETURN_IF_ERROR(pw_snap_r_uint_max(r, "chunk offset", UINT64_MAX, &k->offset));
    PW_RETURN_IF_ERROR(pw_snap_r_uint_max(r, "chunk size", UINT64_MAX, &k->raw_bytes));
    PW_RETURN_IF_ERROR(pw_snap_r_uint_max(r, "chunk stored size", UINT64_MAX, &k->stored_bytes));
    PW_RETURN_IF_ERROR(pw_snap_r_uint_max(r, "chunk xxh64", UINT64_MAX, &k->raw_xxh64));
    if (k->offset != expect || k->raw_bytes == 0 || k->raw_bytes > b->bytes - expect ||
        k->stored_bytes < PW_SNAPSHOT_VALUE_HEADER) {
      return pw_status_make(PW_STATUS_DATA_LOSS,
                            "manifest: chunk %" PRIu64 " (offset %" PRIu64 ", %" PRIu64
                            " bytes) does not tile the buffer",
                            c, k->offset, k->raw_bytes);
    }
    expect += k->raw_bytes;
    stored += k->stored_bytes;
  }
  if (expect != b->bytes || stored != b->stored_bytes) {
    return pw_status_make(PW_STATUS_DATA_LOSS,
                          "manifest: chunks cover %" PRIu64 " of %" PRIu64 " bytes (stored %" PRIu64
                          ", recorded %" PRIu64 ")",
                          expect, b->bytes, stored, b->stored_bytes);
  }
  return NULL;
}

static pw_status_t pw_snap_r_buffer(pw_allocator_t allocator, pw_snap_reader_t* r,
                                    uint64_t format, pw_snap_manifest_buffer_t* b) {
  uint64_t n, v;
  char dtype[32];
  PW_RETURN_IF_ERROR(pw_snap_r_head(r, PW_CBOR_MAJOR_MAP, "a buffer", &n));
  if (n != (format >= 2 ? 9u : 8u)) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "manifest: a buffer has %" PRIu64 " keys", n);
  }
  PW_RETURN_IF_ERROR(pw_snap_r_key(r, "name"));
  PW_RETURN_IF_ERROR(pw_snap_r_text(r, "name", b->name, sizeof(b->name)));
  PW_RETURN_IF_ERROR(pw_snap_r_key(r, "dtype"));
  PW_RETURN_IF_ERROR(pw_snap_r_text(r, "dtype", dtype, sizeof(dtype)));
  if (!pw_dtype_parse(dtype, strlen(dtype), &b->spec.dtype)) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "manifest: unknown dtype '%s'", dtype);
  }
  PW_RETURN_IF_ERROR(pw_snap_r_key(r, "shape"));
  PW_RETURN_IF_ERROR(pw_snap_r_head(r, PW_CBOR_MAJOR_ARRAY, "shape", &n));
  if (n > PW_MAX_RANK) return pw_status_make(PW_STATUS_DATA_LOSS, "manifest: rank %" PRIu64, n);
  b->spec.shape.rank = (uint32_t)n;
  for (uint32_t d = 0; d < b->spec.shape.rank; ++d) {
    PW_RETURN_IF_ERROR(pw_snap_r_uint_max(r, "a dimension", INT64_MAX, &v));
    b->spec.shape.dims[d] = (int64_t)v;
  }
  PW_RETURN_IF_ERROR(pw_snap_r_key(r, "sharding"));
  PW_RETURN_IF_ERROR(pw_snap_r_sharding(r, format, &b->spec.sharding));
  if (format >= 2) {
    PW_RETURN_IF_ERROR(pw_snap_r_key(r, "mesh"));
    PW_RETURN_IF_ERROR(pw_snap_r_mesh(r, &b->mesh));
    pw_status_t status = pw_sharding_check(&b->spec.sharding, &b->spec.shape, &b->mesh);
    if (status != NULL) {
      pw_status_t error = pw_status_make(PW_STATUS_DATA_LOSS, "manifest: sharding: %s",
                                         pw_status_message(status));
      pw_status_free(status);
      return error;
    }
  }
  PW_RETURN_IF_ERROR(pw_snap_r_key(r, "bytes"));
  PW_RETURN_IF_ERROR(pw_snap_r_uint_max(r, "bytes", PW_ARRAY_MAX_BYTES, &b->bytes));
  size_t expect = 0;
  pw_status_t status = pw_shape_byte_size(b->spec.dtype, &b->spec.shape, &expect);
  if (status != NULL || expect != b->bytes) {
    pw_status_ignore(status);
    return pw_status_make(PW_STATUS_DATA_LOSS,
                          "manifest: %" PRIu64 " bytes recorded for a %s array of rank %u",
                          b->bytes, dtype, b->spec.shape.rank);
  }
  PW_RETURN_IF_ERROR(pw_snap_r_key(r, "xxh64"));
  PW_RETURN_IF_ERROR(pw_snap_r_uint_max(r, "xxh64", UINT64_MAX, &b->xxh64));
  PW_RETURN_IF_ERROR(pw_snap_r_key(r, "stored_bytes"));
  PW_RETURN_IF_ERROR(pw_snap_r_uint_max(r, "stored_bytes", UINT64_MAX, &b->stored_bytes));
  PW_RETURN_IF_ERROR(pw_snap_r_key(r, "chunks"));
  return pw_snap_r_chunks(allocator, r, b);
}

static pw_status_t pw_snap_r_manifest(pw_allocator_t allocator, pw_snap_reader_t* r,
                                      pw_snap_manifest_t* m) {
  uint64_t n, v;
  PW_RETURN_IF_ERROR(pw_snap_r_head(r, PW_CBOR_MAJOR_MAP, "the manifest", &n));
  if (n != 4) return pw_status_make(PW_STATUS_DATA_LOSS, "manifest has %" PRIu64 " keys", n);
  PW_RETURN_IF_ERROR(pw_snap_r_key(r, "format"));
  PW_RETURN_IF_ERROR(pw_snap_r_uint_max(r, "format", UINT64_MAX, &v));
  if (v == 0 || v > PW_SNAPSHOT_MANIFEST_FORMAT) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "manifest format %" PRIu64 " is not 1 to %u", v,
                          PW_SNAPSHOT_MANIFEST_FORMAT);
  }
  uint64_t format = v;
  PW_RETURN_IF_ERROR(pw_snap_r_key(r, "step"));
  PW_RETURN_IF_ERROR(pw_snap_r_uint_max(r, "step", UINT64_MAX, &m->step));
  PW_RETURN_IF_ERROR(pw_snap_r_key(r, "chunk_bytes"));
  PW_RETURN_IF_ERROR(pw_snap_r_uint_max(r, "chunk_bytes", UINT64_MAX, &m->chunk_bytes));
  PW_RETURN_IF_ERROR(pw_snap_r_key(r, "buffers"));
  PW_RETURN_IF_ERROR(pw_snap_r_head(r, PW_CBOR_MAJOR_ARRAY, "buffers", &n));
  if (n == 0 || n > PW_SNAPSHOT_MAX_BUFFERS) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "manifest lists %" PRIu64 " buffers", n);
  }
  PW_RETURN_IF_ERROR(pw_allocator_calloc_array(allocator, (size_t)n,
                                               sizeof(pw_snap_manifest_buffer_t), 0,
                                               (void**)&m->buffers));
  m->count = (uint32_t)n;
  for (uint32_t i = 0; i < m->count; ++i) {
    PW_RETURN_IF_ERROR_CTX(pw_snap_r_buffer(allocator, r, format, &m->buffers[i]), "buffer %u", i);
  }
  if (r->pos != r->size) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "manifest: %zu trailing bytes", r->size - r->pos);
  }
  return NULL;
}

void pw__snap_manifest_free(pw_allocator_t allocator, pw_snap_manifest_t* m) {
  if (m->buffers != NULL) {
    for (uint32_t i = 0; i < m->count; ++i) {
      pw_allocator_free(allocator, m->buffers[i].chunks,
                        m->buffers[i].chunk_count * sizeof(pw_snap_chunk_t));
    }
    pw_allocator_free(allocator, m->buffers, m->count * sizeof(pw_snap_manifest_buffer_t));
  }
  memset(m, 0, sizeof(*m));
}

pw_status_t pw__snap_manifest_decode(pw_allocator_t allocator, const void* bytes, size_t size,
                                     pw_snap_manifest_t* out) {
  memset(out, 0, sizeof(*out));
  const uint8_t* p = bytes;
  if (size < PW_SNAPSHOT_MANIFEST_HEADER || memcmp(p, PW_SNAPSHOT_MANIFEST_MAGIC, 8) != 0) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "not a snapshot manifest (bad magic or size)");
  }
  if (pw_snap_get_u32(p + 8) != PW_SNAPSHOT_FORMAT_VERSION ||
      pw_snap_get_u32(p + 12) != PW_SNAPSHOT_MANIFEST_HEADER) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "manifest format version %u is not %u",
                          pw_snap_get_u32(p + 8), PW_SNAPSHOT_FORMAT_VERSION);
  }
  uint64_t cbor_size = pw_snap_get_u64(p + 16);
  if (cbor_size != size - PW_SNAPSHOT_MANIFEST_HEADER) {
    return pw_status_make(PW_STATUS_DATA_LOSS,
                          "manifest says %" PRIu64 " CBOR bytes, the value has %zu", cbor_size,
                          size - PW_SNAPSHOT_MANIFEST_HEADER);
  }
  const uint8_t* cbor = p + PW_SNAPSHOT_MANIFEST_HEADER;
  if (pw_snap_get_u64(p + 24) != pw__xxh64(cbor, (size_t)cbor_size, 0)) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "manifest checksum mismatch");
  }
  pw_snap_reader_t r = {cbor, (size_t)cbor_size, 0};
  pw_status_t status = pw_snap_r_manifest(allocator, &r, out);
  if (status != NULL) pw__snap_manifest_free(allocator, out);
  return status;
}
