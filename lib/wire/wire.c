/* The control-plane messages: one table of shapes and a strict codec over
 * cborio (see wire.h). */
#include "wire/wire.h"

#include <string.h>

#include "cborio/cbor_io.h"

enum { PW_WIRE_TEXT = 1, PW_WIRE_BYTES = 2 };

typedef struct pw_wire_blob_shape_t {
  const char* name;
  uint8_t kind;         /* PW_WIRE_TEXT or PW_WIRE_BYTES */
  uint32_t max;         /* bytes */
} pw_wire_blob_shape_t;

typedef struct pw_wire_shape_t {
  const char* name;
  uint8_t u_count;
  uint8_t blob_count;
  pw_wire_blob_shape_t blobs[PW_WIRE_MAX_BLOB];
  uint32_t list_max;    /* 0: no list */
} pw_wire_shape_t;

#define PW_T(n, m) {n, PW_WIRE_TEXT, m}
#define PW_B(n, m) {n, PW_WIRE_BYTES, m}
#define PW_KIB 1024u

static const pw_wire_shape_t pw_wire_shapes[PW_WIRE_TYPE_COUNT] = {
    [PW_WIRE_HELLO] = {"HELLO", 6, 5,
                       {PW_B("token", 4 * PW_KIB), PW_T("name", 63), PW_T("backend", 31),
                        PW_B("ucx address", 64 * PW_KIB), PW_T("kind", 31)},
                       65536},
    [PW_WIRE_WELCOME] = {"WELCOME", 3, 2, {PW_T("url", 255), PW_B("nonce", PW_WIRE_NONCE_SIZE)}, 0},
    [PW_WIRE_REFUSE] = {"REFUSE", 0, 1, {PW_T("reason", 1 * PW_KIB)}, 0},
    [PW_WIRE_ATTACH] = {"ATTACH", 1, 1, {PW_B("nonce", PW_WIRE_NONCE_SIZE)}, 0},
    [PW_WIRE_HEARTBEAT] = {"HEARTBEAT", 1, 0, {{0}}, 65536},
    [PW_WIRE_PEER] = {"PEER", 1, 2, {PW_T("name", 63), PW_B("ucx address", 64 * PW_KIB)}, 0},
    /* The list of a LOAD reply is the signature: every parameter of up to
     * PW_EXECUTABLE_MAX_PARAMS each (the worker refuses a longer one). */
    [PW_WIRE_REPLY] = {"REPLY", 2, 2, {PW_T("message", 4 * PW_KIB), PW_B("payload", PW_WIRE_MAX_BYTES)},
                       PW_WIRE_MAX_LIST},
    [PW_WIRE_COMPILE] = {"COMPILE", 1, 3,
                         {PW_B("program", PW_WIRE_MAX_BYTES), PW_T("options", 1 * PW_KIB),
                          PW_T("axis names", 63)},
                         8},
    [PW_WIRE_LOAD] = {"LOAD", 2, 1, {PW_B("bytes", PW_WIRE_MAX_BYTES)}, 0},
    [PW_WIRE_UNLOAD] = {"UNLOAD", 1, 0, {{0}}, 0},
    [PW_WIRE_ALLOC] = {"ALLOC", 3, 0, {{0}}, 0},
    [PW_WIRE_FREE] = {"FREE", 1, 0, {{0}}, 0},
    [PW_WIRE_WRITE] = {"WRITE", 3, 1, {PW_B("bytes", PW_WIRE_MAX_BYTES)}, 0},
    [PW_WIRE_READ] = {"READ", 4, 0, {{0}}, 0},
    [PW_WIRE_LAUNCH] = {"LAUNCH", 10, 0, {{0}}, PW_WIRE_MAX_LIST},
    [PW_WIRE_DONE] = {"DONE", 5, 1, {PW_T("message", 4 * PW_KIB)}, 0},
    [PW_WIRE_COPY] = {"COPY", 9, 0, {{0}}, 6},
    [PW_WIRE_CANCEL] = {"CANCEL", 1, 0, {{0}}, 0},
    [PW_WIRE_BYE] = {"BYE", 0, 1, {PW_T("reason", 1 * PW_KIB)}, 0},
};

static const pw_wire_shape_t* pw_wire_shape(uint64_t type) {
  if (type == 0 || type >= PW_WIRE_TYPE_COUNT) return NULL;
  return &pw_wire_shapes[type];
}

const char* pw__wire_type_name(uint32_t type) {
  const pw_wire_shape_t* shape = pw_wire_shape(type);
  return shape ? shape->name : "?";
}

static bool pw_wire_fits(const pw_wire_msg_t* msg, const pw_wire_shape_t* shape) {
  for (uint32_t i = 0; i < shape->blob_count; ++i) {
    if (msg->blob[i].size > shape->blobs[i].max) return false;
    if (msg->blob[i].size > 0 && msg->blob[i].data == NULL) return false;
  }
  if (msg->list_count > shape->list_max) return false;
  return msg->list_count == 0 || msg->list != NULL;
}

static void pw_wire_emit(pw_cbor_writer_t* w, const pw_wire_msg_t* msg,
                         const pw_wire_shape_t* shape) {
  pw__cbor_write_array(w, 2u + shape->u_count + shape->blob_count + (shape->list_max ? 1u : 0u));
  pw__cbor_write_uint(w, PW_WIRE_VERSION);
  pw__cbor_write_uint(w, (uint64_t)msg->type);
  for (uint32_t i = 0; i < shape->u_count; ++i) pw__cbor_write_uint(w, msg->u[i]);
  for (uint32_t i = 0; i < shape->blob_count; ++i) {
    if (shape->blobs[i].kind == PW_WIRE_TEXT) {
      pw__cbor_write_text(w, (const char*)msg->blob[i].data, msg->blob[i].size);
    } else {
      pw__cbor_write_bytes(w, msg->blob[i].data, msg->blob[i].size);
    }
  }
  if (shape->list_max) {
    pw__cbor_write_array(w, msg->list_count);
    for (uint32_t i = 0; i < msg->list_count; ++i) pw__cbor_write_uint(w, msg->list[i]);
  }
}

size_t pw__wire_measure(const pw_wire_msg_t* msg) {
  const pw_wire_shape_t* shape = pw_wire_shape((uint64_t)msg->type);
  if (shape == NULL || !pw_wire_fits(msg, shape)) return 0;
  pw_cbor_writer_t w;
  memset(&w, 0, sizeof(w));
  w.sink = PW_CBOR_SINK_MEASURE;
  pw_wire_emit(&w, msg, shape);
  return w.size;
}

size_t pw__wire_write(const pw_wire_msg_t* msg, void* buffer, size_t capacity) {
  const pw_wire_shape_t* shape = pw_wire_shape((uint64_t)msg->type);
  if (shape == NULL || !pw_wire_fits(msg, shape)) return 0;
  pw_cbor_writer_t w;
  memset(&w, 0, sizeof(w));
  w.sink = PW_CBOR_SINK_BUFFER;
  w.buffer = buffer;
  w.capacity = capacity;
  pw_wire_emit(&w, msg, shape);
  return w.size <= capacity ? w.size : 0;
}

static pw_status_t pw_wire_expect(pw_cbor_reader_t* r, pw_cbor_type_t type, const char* msg_name,
                                  const char* field, pw_cbor_item_t* out_item) {
  PW_RETURN_IF_ERROR_CTX(pw__cbor_next(r, out_item), "wire message %s, %s", msg_name, field);
  if (out_item->type != type) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "wire message %s: %s is %s, expected %s (byte %zu)", msg_name, field,
                          pw__cbor_type_name(out_item->type), pw__cbor_type_name(type),
                          out_item->offset);
  }
  return NULL;
}

static pw_status_t pw_wire_decode_list(pw_cbor_reader_t* r, const pw_wire_shape_t* shape,
                                       pw_allocator_t allocator, pw_wire_msg_t* msg) {
  pw_cbor_item_t item;
  PW_RETURN_IF_ERROR(pw_wire_expect(r, PW_CBOR_ARRAY, shape->name, "list", &item));
  if (item.value > shape->list_max || item.value > r->size - r->pos) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "wire message %s: list of %llu items (at most %u, %zu bytes left)",
                          shape->name, (unsigned long long)item.value, shape->list_max,
                          r->size - r->pos);
  }
  if (item.value == 0) return NULL;
  uint64_t* list = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(allocator, (size_t)item.value * sizeof(uint64_t), 0,
                                         (void**)&list));
  msg->list = list;
  msg->list_count = (uint32_t)item.value;
  for (uint32_t i = 0; i < msg->list_count; ++i) {
    pw_cbor_item_t v;
    PW_RETURN_IF_ERROR(pw_wire_expect(r, PW_CBOR_UINT, shape->name, "list item", &v));
    list[i] = v.value;
  }
  return NULL;
}

static pw_status_t pw_wire_decode_body(pw_cbor_reader_t* r, const pw_wire_shape_t* shape,
                                       uint64_t count, pw_allocator_t allocator,
                                       pw_wire_msg_t* msg) {
  uint64_t want = 2u + shape->u_count + shape->blob_count + (shape->list_max ? 1u : 0u);
  if (count != want) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "wire message %s: %llu fields, expected %llu", shape->name,
                          (unsigned long long)count, (unsigned long long)want);
  }
  pw_cbor_item_t item;
  for (uint32_t i = 0; i < shape->u_count; ++i) {
    PW_RETURN_IF_ERROR(pw_wire_expect(r, PW_CBOR_UINT, shape->name, "an integer field", &item));
    msg->u[i] = item.value;
  }
  for (uint32_t i = 0; i < shape->blob_count; ++i) {
    const pw_wire_blob_shape_t* b = &shape->blobs[i];
    pw_cbor_type_t type = b->kind == PW_WIRE_TEXT ? PW_CBOR_TEXT : PW_CBOR_BYTES;
    PW_RETURN_IF_ERROR(pw_wire_expect(r, type, shape->name, b->name, &item));
    if (item.length > b->max) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "wire message %s: %s of %zu bytes (at most %u)", shape->name,
                            b->name, item.length, b->max);
    }
    msg->blob[i].data = item.data;
    msg->blob[i].size = item.length;
  }
  if (shape->list_max) PW_RETURN_IF_ERROR(pw_wire_decode_list(r, shape, allocator, msg));
  return NULL;
}

pw_status_t pw__wire_decode(const void* data, size_t size, uint32_t expect,
                            pw_allocator_t allocator, pw_wire_msg_t* out_msg) {
  memset(out_msg, 0, sizeof(*out_msg));
  if (data == NULL || size == 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "wire message: empty");
  }
  /* The array, its fields, the list: depth 2. */
  PW_RETURN_IF_ERROR_CTX(pw__cbor_prescan((const uint8_t*)data, size, 2), "wire message");
  pw_cbor_reader_t r = {(const uint8_t*)data, size, 0};
  pw_cbor_item_t head;
  pw_cbor_item_t item;
  PW_RETURN_IF_ERROR(pw_wire_expect(&r, PW_CBOR_ARRAY, "?", "the message", &head));
  if (head.value < 2) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "wire message: %llu fields, no header",
                          (unsigned long long)head.value);
  }
  PW_RETURN_IF_ERROR(pw_wire_expect(&r, PW_CBOR_UINT, "?", "version", &item));
  if (item.value != PW_WIRE_VERSION) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "wire message: version %llu (this library speaks %u)",
                          (unsigned long long)item.value, PW_WIRE_VERSION);
  }
  PW_RETURN_IF_ERROR(pw_wire_expect(&r, PW_CBOR_UINT, "?", "type", &item));
  const pw_wire_shape_t* shape = pw_wire_shape(item.value);
  if (shape == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "wire message: unknown type %llu",
                          (unsigned long long)item.value);
  }
  if (expect != 0 && item.value != expect) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "wire message: %s where %s was expected",
                          shape->name, pw__wire_type_name(expect));
  }
  out_msg->type = (pw_wire_type_t)item.value;
  pw_status_t status = pw_wire_decode_body(&r, shape, head.value, allocator, out_msg);
  if (status == NULL && r.pos != r.size) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT, "wire message %s: trailing bytes at %zu",
                            shape->name, r.pos);
  }
  if (status != NULL) pw__wire_msg_release(out_msg, allocator);
  return status;
}

pw_status_t pw__wire_decode_next(const void* data, size_t size, size_t* offset, uint32_t expect,
                                 pw_allocator_t allocator, pw_wire_msg_t* out_msg) {
  memset(out_msg, 0, sizeof(*out_msg));
  size_t at = *offset;
  if (data == NULL || at >= size) {
    *offset = size;
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "wire frame: no message at %zu", at);
  }
  size_t item = 0;
  pw_status_t status = pw__cbor_prescan_item((const uint8_t*)data + at, size - at, 2, &item);
  if (status != NULL) {
    /* Where this message ends is unknown: nothing after it can be read. */
    *offset = size;
    return pw_status_annotate(status, "wire frame: message at byte %zu", at);
  }
  *offset = at + item;
  status = pw__wire_decode((const uint8_t*)data + at, item, expect, allocator, out_msg);
  if (status != NULL && at > 0) status = pw_status_annotate(status, "at byte %zu of its frame", at);
  return status;
}

void pw__wire_msg_release(pw_wire_msg_t* msg, pw_allocator_t allocator) {
  if (msg->list != NULL && msg->list_count > 0) {
    pw_allocator_free(allocator, (void*)msg->list, (size_t)msg->list_count * sizeof(uint64_t));
  }
  msg->list = NULL;
  msg->list_count = 0;
}

void pw__wire_blob_text(const pw_wire_blob_t* blob, char* buffer, size_t capacity) {
  if (capacity == 0) return;
  size_t n = blob->size < capacity - 1 ? blob->size : capacity - 1;
  if (n > 0) memcpy(buffer, blob->data, n);
  buffer[n] = '\0';
  for (size_t i = 0; i < n; ++i) {
    if ((unsigned char)buffer[i] < 0x20) buffer[i] = '?';  /* no control bytes in logs */
  }
}
