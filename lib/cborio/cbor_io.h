/* Internal: strict CBOR reading and deterministic CBOR writing for the
 * graph format, on top of libcbor's allocation-free parts only.
 *
 * libcbor 0.8's cbor_load trusts declared counts (a 5-byte input can make
 * it allocate 2 GiB) and tolerates trailing bytes (docs/toolchain.md), so it is
 * never called. Reading is two passes over the caller's bytes:
 *   1. pw__cbor_prescan walks every item head with cbor_stream_decode (no
 *      allocation) and rejects indefinite lengths, counts larger than the
 *      bytes left, nesting past a depth, malformed heads and trailing bytes;
 *   2. the schema decoder then pulls item heads with pw__cbor_next, which
 *      can no longer run past the end.
 * Writing uses libcbor's head encoders (shortest form) into a buffer that
 * is measured first, then allocated once at its exact size; or into an
 * XXH3-128 hasher, so hashing a graph allocates nothing. */
#ifndef PW_CBORIO_CBOR_IO_H_
#define PW_CBORIO_CBOR_IO_H_

#include <stddef.h>
#include <stdint.h>

#include "base/hash.h"
#include "pathways/allocator.h"
#include "pathways/status.h"

typedef enum pw_cbor_type_e {
  PW_CBOR_NONE = 0,   /* no callback fired (an unsupported simple value) */
  PW_CBOR_UINT,
  PW_CBOR_NEGINT,     /* value n means -1 - n */
  PW_CBOR_BYTES,
  PW_CBOR_TEXT,
  PW_CBOR_ARRAY,      /* value = element count */
  PW_CBOR_MAP,        /* value = pair count */
  PW_CBOR_TAG,        /* value = tag number; one item follows */
  PW_CBOR_FLOAT,
  PW_CBOR_BOOL,
  PW_CBOR_NULL,
  PW_CBOR_UNDEFINED,
  PW_CBOR_INDEFINITE, /* any indefinite-length start or a break */
} pw_cbor_type_t;

typedef struct pw_cbor_item_t {
  pw_cbor_type_t type;
  uint64_t value;
  const uint8_t* data;  /* BYTES/TEXT: the content, inside the input */
  size_t length;
  size_t offset;        /* where the item's head starts */
} pw_cbor_item_t;

/* "an unsigned integer", "a text string", ... for messages. */
const char* pw__cbor_type_name(pw_cbor_type_t type);

/* Checks that [data, data + size) is exactly one well-formed CBOR item of
 * definite lengths, with every declared count at most the bytes left and
 * nesting (arrays, maps, tags) at most |max_depth| deep. INVALID_ARGUMENT
 * naming the byte offset otherwise. Allocates nothing. */
pw_status_t pw__cbor_prescan(const uint8_t* data, size_t size, uint32_t max_depth);

/* The same checks for the first item of [data, data + size), which may be
 * followed by more bytes (a CBOR sequence, RFC 8742): its size in
 * |*out_item_size| (0 on error). */
pw_status_t pw__cbor_prescan_item(const uint8_t* data, size_t size, uint32_t max_depth,
                                  size_t* out_item_size);

typedef struct pw_cbor_reader_t {
  const uint8_t* data;
  size_t size;
  size_t pos;
} pw_cbor_reader_t;

/* Reads the head of the next item (for strings, the whole string). */
pw_status_t pw__cbor_next(pw_cbor_reader_t* reader, pw_cbor_item_t* out_item);

/* Skips one whole item (with everything nested in it). Only for input that
 * passed pw__cbor_prescan (its depth bounds the recursion). */
pw_status_t pw__cbor_skip(pw_cbor_reader_t* reader);

/* ---- writing -------------------------------------------------------------- */

typedef enum pw_cbor_sink_e {
  PW_CBOR_SINK_MEASURE = 0,  /* count bytes only */
  PW_CBOR_SINK_BUFFER = 1,   /* write into |buffer| (|capacity| bytes) */
  PW_CBOR_SINK_HASH = 2,     /* feed |hasher| */
} pw_cbor_sink_t;

typedef struct pw_cbor_writer_t {
  pw_cbor_sink_t sink;
  uint8_t* buffer;
  size_t capacity;
  size_t size;          /* bytes written (or that would be) */
  pw_hasher_t* hasher;
} pw_cbor_writer_t;

void pw__cbor_write_uint(pw_cbor_writer_t* w, uint64_t value);
void pw__cbor_write_array(pw_cbor_writer_t* w, uint64_t count);
void pw__cbor_write_map(pw_cbor_writer_t* w, uint64_t count);
void pw__cbor_write_text(pw_cbor_writer_t* w, const char* text, size_t length);
/* A NUL-terminated text string (map keys). */
void pw__cbor_write_key(pw_cbor_writer_t* w, const char* text);
void pw__cbor_write_bytes(pw_cbor_writer_t* w, const void* bytes, size_t length);

/* Encodes with |emit(w, user)| twice: once to measure, once into a buffer
 * allocated from |allocator| at the exact size. */
typedef void (*pw_cbor_emit_fn_t)(pw_cbor_writer_t* w, const void* user);
pw_status_t pw__cbor_encode(pw_cbor_emit_fn_t emit, const void* user,
                            pw_allocator_t allocator, void** out_bytes,
                            size_t* out_size);

#endif /* PW_CBORIO_CBOR_IO_H_ */
