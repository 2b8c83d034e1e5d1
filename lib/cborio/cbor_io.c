/* Strict CBOR reading (prescan + pull) and deterministic writing; see
 * cbor_io.h for why libcbor's cbor_load is never used. */
#include "cborio/cbor_io.h"

#include <cbor.h>
#include <string.h>

/* ---- reading -------------------------------------------------------------- */

/* The deepest prescan supports; the graph format uses far less. */
#define PW_CBOR_DEPTH_LIMIT 32u

typedef struct pw_cbor_ctx_t {
  pw_cbor_item_t* item;
} pw_cbor_ctx_t;

static void pw_cbor_set(void* ctx, pw_cbor_type_t type, uint64_t value) {
  pw_cbor_item_t* item = ((pw_cbor_ctx_t*)ctx)->item;
  item->type = type;
  item->value = value;
}
static void pw_cbor_on_u8(void* c, uint8_t v) { pw_cbor_set(c, PW_CBOR_UINT, v); }
static void pw_cbor_on_u16(void* c, uint16_t v) { pw_cbor_set(c, PW_CBOR_UINT, v); }
static void pw_cbor_on_u32(void* c, uint32_t v) { pw_cbor_set(c, PW_CBOR_UINT, v); }
static void pw_cbor_on_u64(void* c, uint64_t v) { pw_cbor_set(c, PW_CBOR_UINT, v); }
static void pw_cbor_on_n8(void* c, uint8_t v) { pw_cbor_set(c, PW_CBOR_NEGINT, v); }
static void pw_cbor_on_n16(void* c, uint16_t v) { pw_cbor_set(c, PW_CBOR_NEGINT, v); }
static void pw_cbor_on_n32(void* c, uint32_t v) { pw_cbor_set(c, PW_CBOR_NEGINT, v); }
static void pw_cbor_on_n64(void* c, uint64_t v) { pw_cbor_set(c, PW_CBOR_NEGINT, v); }
static void pw_cbor_on_indef(void* c) { pw_cbor_set(c, PW_CBOR_INDEFINITE, 0); }
static void pw_cbor_on_string(void* c, pw_cbor_type_t type, cbor_data data, size_t length) {
  pw_cbor_set(c, type, length);
  ((pw_cbor_ctx_t*)c)->item->data = data;
  ((pw_cbor_ctx_t*)c)->item->length = length;
}
static void pw_cbor_on_bytes(void* c, cbor_data d, size_t n) { pw_cbor_on_string(c, PW_CBOR_BYTES, d, n); }
static void pw_cbor_on_text(void* c, cbor_data d, size_t n) { pw_cbor_on_string(c, PW_CBOR_TEXT, d, n); }
static void pw_cbor_on_array(void* c, size_t n) { pw_cbor_set(c, PW_CBOR_ARRAY, n); }
static void pw_cbor_on_map(void* c, size_t n) { pw_cbor_set(c, PW_CBOR_MAP, n); }
static void pw_cbor_on_tag(void* c, uint64_t v) { pw_cbor_set(c, PW_CBOR_TAG, v); }
static void pw_cbor_on_float(void* c, float v) { (void)v; pw_cbor_set(c, PW_CBOR_FLOAT, 0); }
static void pw_cbor_on_double(void* c, double v) { (void)v; pw_cbor_set(c, PW_CBOR_FLOAT, 0); }
static void pw_cbor_on_undef(void* c) { pw_cbor_set(c, PW_CBOR_UNDEFINED, 0); }
static void pw_cbor_on_null(void* c) { pw_cbor_set(c, PW_CBOR_NULL, 0); }
static void pw_cbor_on_bool(void* c, bool v) { pw_cbor_set(c, PW_CBOR_BOOL, v); }

static const struct cbor_callbacks pw_cbor_callbacks = {
    .uint8 = pw_cbor_on_u8,
    .uint16 = pw_cbor_on_u16,
    .uint32 = pw_cbor_on_u32,
    .uint64 = pw_cbor_on_u64,
    .negint8 = pw_cbor_on_n8,
    .negint16 = pw_cbor_on_n16,
    .negint32 = pw_cbor_on_n32,
    .negint64 = pw_cbor_on_n64,
    .byte_string_start = pw_cbor_on_indef,
    .byte_string = pw_cbor_on_bytes,
    .string = pw_cbor_on_text,
    .string_start = pw_cbor_on_indef,
    .indef_array_start = pw_cbor_on_indef,
    .array_start = pw_cbor_on_array,
    .indef_map_start = pw_cbor_on_indef,
    .map_start = pw_cbor_on_map,
    .tag = pw_cbor_on_tag,
    .float2 = pw_cbor_on_float,
    .float4 = pw_cbor_on_float,
    .float8 = pw_cbor_on_double,
    .undefined = pw_cbor_on_undef,
    .null = pw_cbor_on_null,
    .boolean = pw_cbor_on_bool,
    .indef_break = pw_cbor_on_indef,
};

const char* pw__cbor_type_name(pw_cbor_type_t type) {
  switch (type) {
    case PW_CBOR_NONE: return "an unsupported simple value";
    case PW_CBOR_UINT: return "an unsigned integer";
    case PW_CBOR_NEGINT: return "a negative integer";
    case PW_CBOR_BYTES: return "a byte string";
    case PW_CBOR_TEXT: return "a text string";
    case PW_CBOR_ARRAY: return "an array";
    case PW_CBOR_MAP: return "a map";
    case PW_CBOR_TAG: return "a tag";
    case PW_CBOR_FLOAT: return "a float";
    case PW_CBOR_BOOL: return "a boolean";
    case PW_CBOR_NULL: return "null";
    case PW_CBOR_UNDEFINED: return "undefined";
    case PW_CBOR_INDEFINITE: return "an indefinite-length item";
  }
  return "an unknown item";
}

pw_status_t pw__cbor_next(pw_cbor_reader_t* reader, pw_cbor_item_t* out_item) {
  memset(out_item, 0, sizeof(*out_item));
  out_item->offset = reader->pos;
  size_t left = reader->size - reader->pos;
  if (left == 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "offset %zu: truncated: an item was expected", reader->pos);
  }
  pw_cbor_ctx_t ctx = {out_item};
  struct cbor_decoder_result r =
      cbor_stream_decode(reader->data + reader->pos, left, &pw_cbor_callbacks, &ctx);
  if (r.status == CBOR_DECODER_NEDATA) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "offset %zu: truncated: the item needs more than the %zu "
                          "bytes left",
                          reader->pos, left);
  }
  if (r.status != CBOR_DECODER_FINISHED || r.read == 0 || r.read > left) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "offset %zu: malformed CBOR (initial byte 0x%02x)", reader->pos,
                          reader->data[reader->pos]);
  }
  if (out_item->type == PW_CBOR_INDEFINITE) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "offset %zu: indefinite-length item (initial byte 0x%02x); "
                          "graph files use definite lengths only",
                          reader->pos, reader->data[reader->pos]);
  }
  reader->pos += r.read;
  return NULL;
}

/* Number of items nested directly in |item| (0 for scalars). */
static pw_status_t pw_cbor_children(const pw_cbor_item_t* item, uint64_t* out) {
  *out = 0;
  if (item->type == PW_CBOR_ARRAY) *out = item->value;
  if (item->type == PW_CBOR_TAG) *out = 1;
  if (item->type == PW_CBOR_MAP) {
    if (item->value > UINT64_MAX / 2) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "offset %zu: map declares %llu pairs", item->offset,
                            (unsigned long long)item->value);
    }
    *out = item->value * 2;
  }
  return NULL;
}

pw_status_t pw__cbor_prescan(const uint8_t* data, size_t size, uint32_t max_depth) {
  size_t item_size = 0;
  PW_RETURN_IF_ERROR(pw__cbor_prescan_item(data, size, max_depth, &item_size));
  if (item_size != size) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "offset %zu: %zu trailing bytes after the top-level item", item_size,
                          size - item_size);
  }
  return NULL;
}

pw_status_t pw__cbor_prescan_item(const uint8_t* data, size_t size, uint32_t max_depth,
                                  size_t* out_item_size) {
  *out_item_size = 0;
  if (size == 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "empty input: expected a CBOR map");
  }
  if (max_depth > PW_CBOR_DEPTH_LIMIT) max_depth = PW_CBOR_DEPTH_LIMIT;
  uint64_t remaining[PW_CBOR_DEPTH_LIMIT + 1];
  uint32_t depth = 0;
  remaining[0] = 1;
  pw_cbor_reader_t reader = {data, size, 0};
  while (depth > 0 || remaining[0] > 0) {
    if (remaining[depth] == 0) {
      --depth;
      continue;
    }
    pw_cbor_item_t item;
    PW_RETURN_IF_ERROR(pw__cbor_next(&reader, &item));
    remaining[depth]--;
    uint64_t children;
    PW_RETURN_IF_ERROR(pw_cbor_children(&item, &children));
    if (children == 0) continue;
    size_t left = size - reader.pos;
    if (children > left) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "offset %zu: %s declares %llu %s, but only %zu bytes are left",
                            item.offset, pw__cbor_type_name(item.type),
                            (unsigned long long)item.value,
                            item.type == PW_CBOR_MAP ? "pairs" : "elements", left);
    }
    if (depth + 1 > max_depth) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "offset %zu: nesting deeper than %u levels", item.offset,
                            max_depth);
    }
    remaining[++depth] = children;
  }
  *out_item_size = reader.pos;
  return NULL;
}

pw_status_t pw__cbor_skip(pw_cbor_reader_t* reader) {
  uint64_t pending = 1;
  while (pending > 0) {
    pw_cbor_item_t item;
    PW_RETURN_IF_ERROR(pw__cbor_next(reader, &item));
    uint64_t children;
    PW_RETURN_IF_ERROR(pw_cbor_children(&item, &children));
    pending = pending - 1 + children;
  }
  return NULL;
}

/* ---- writing -------------------------------------------------------------- */

static void pw_cbor_put(pw_cbor_writer_t* w, const void* bytes, size_t length) {
  if (length == 0) return;
  if (w->sink == PW_CBOR_SINK_BUFFER) {
    if (w->size + length <= w->capacity) memcpy(w->buffer + w->size, bytes, length);
  } else if (w->sink == PW_CBOR_SINK_HASH) {
    pw__hasher_update(w->hasher, bytes, length);
  }
  w->size += length;
}

void pw__cbor_write_uint(pw_cbor_writer_t* w, uint64_t value) {
  unsigned char head[9];
  pw_cbor_put(w, head, cbor_encode_uint(value, head, sizeof(head)));
}

void pw__cbor_write_array(pw_cbor_writer_t* w, uint64_t count) {
  unsigned char head[9];
  pw_cbor_put(w, head, cbor_encode_array_start((size_t)count, head, sizeof(head)));
}

void pw__cbor_write_map(pw_cbor_writer_t* w, uint64_t count) {
  unsigned char head[9];
  pw_cbor_put(w, head, cbor_encode_map_start((size_t)count, head, sizeof(head)));
}

void pw__cbor_write_text(pw_cbor_writer_t* w, const char* text, size_t length) {
  unsigned char head[9];
  pw_cbor_put(w, head, cbor_encode_string_start(length, head, sizeof(head)));
  pw_cbor_put(w, text, length);
}

void pw__cbor_write_key(pw_cbor_writer_t* w, const char* text) {
  pw__cbor_write_text(w, text, strlen(text));
}

void pw__cbor_write_bytes(pw_cbor_writer_t* w, const void* bytes, size_t length) {
  unsigned char head[9];
  pw_cbor_put(w, head, cbor_encode_bytestring_start(length, head, sizeof(head)));
  pw_cbor_put(w, bytes, length);
}

pw_status_t pw__cbor_encode(pw_cbor_emit_fn_t emit, const void* user,
                            pw_allocator_t allocator, void** out_bytes,
                            size_t* out_size) {
  *out_bytes = NULL;
  *out_size = 0;
  pw_cbor_writer_t w;
  memset(&w, 0, sizeof(w));
  w.sink = PW_CBOR_SINK_MEASURE;
  emit(&w, user);
  size_t size = w.size;
  if (size == 0) {
    return pw_status_make(PW_STATUS_INTERNAL, "graph encoder produced no bytes");
  }
  void* buffer = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(allocator, size, 0, &buffer));
  memset(&w, 0, sizeof(w));
  w.sink = PW_CBOR_SINK_BUFFER;
  w.buffer = buffer;
  w.capacity = size;
  emit(&w, user);
  if (w.size != size) {
    pw_allocator_free(allocator, buffer, size);
    return pw_status_make(PW_STATUS_INTERNAL,
                          "graph encoder wrote %zu bytes after measuring %zu", w.size, size);
  }
  *out_bytes = buffer;
  *out_size = size;
  return NULL;
}
