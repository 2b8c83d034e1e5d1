/* Internal: the control-plane messages between a controller and its
 * workers (docs/formats.md, "Wire messages"), and their strict codec.
 *
 * Every message is one CBOR array, definite lengths only:
 *   [version, type, u_0 .. u_{n-1}, blob_0 .. blob_{m-1}, list?]
 * where the message type fixes n (unsigned integers), m (byte or text
 * strings, each with a maximum size) and whether a list (an array of
 * unsigned integers, with a maximum count) ends it. A message is decoded
 * only if it has exactly its type's shape: any other version, an unknown
 * type, a field of the wrong CBOR type, a string over its maximum, a count
 * that does not match, indefinite lengths, nesting, trailing bytes: each
 * is INVALID_ARGUMENT naming the message and the field, never a crash
 * (fuzz/wire_fuzz.c). Decoding allocates only the list, after checking its
 * count against the bytes left and the type's maximum; blobs point into
 * the input.
 *
 * The table in wire.c is the one place a message's fields are defined;
 * the PW_WIRE_<TYPE>_<FIELD> constants below name their positions. */
#ifndef PW_WIRE_WIRE_H_
#define PW_WIRE_WIRE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pathways/allocator.h"
#include "pathways/status.h"

/* 2: sessions carry frames (several messages per network message).
 * 3: COMPILE carries the mesh's axis names; the LOAD reply's signature
 *    carries each parameter's tiles and unreduced axes (TILED shardings). */
#define PW_WIRE_VERSION 3u
#define PW_WIRE_MAX_U 10u
#define PW_WIRE_MAX_BLOB 5u
/* The largest list any message may carry (a launch: the gang's devices,
 * then every input and output shard of the lane). */
#define PW_WIRE_MAX_LIST (1u << 20)
/* Largest blob: a host copy chunk or executable bytes. */
#define PW_WIRE_MAX_BYTES (64u << 20)
/* The session nonce a worker attaches with. */
#define PW_WIRE_NONCE_SIZE 16u

typedef enum pw_wire_type_e {
  PW_WIRE_HELLO = 1,      /* worker -> controller (registration) */
  PW_WIRE_WELCOME = 2,    /* controller -> worker (registration reply) */
  PW_WIRE_REFUSE = 3,     /* controller -> worker (registration reply) */
  PW_WIRE_ATTACH = 4,     /* worker -> controller, first on a session */
  PW_WIRE_HEARTBEAT = 5,  /* both ways */
  PW_WIRE_PEER = 6,       /* controller -> worker: another worker's address */
  PW_WIRE_REPLY = 7,      /* worker -> controller: answer to a request */
  PW_WIRE_COMPILE = 8,    /* request */
  PW_WIRE_LOAD = 9,       /* request */
  PW_WIRE_UNLOAD = 10,
  PW_WIRE_ALLOC = 11,
  PW_WIRE_FREE = 12,
  PW_WIRE_WRITE = 13,     /* request: host bytes into device memory */
  PW_WIRE_READ = 14,      /* request: device memory to host bytes */
  PW_WIRE_LAUNCH = 15,
  PW_WIRE_DONE = 16,      /* worker -> controller: a launch or copy part ended */
  PW_WIRE_COPY = 17,      /* one side of a transfer */
  PW_WIRE_CANCEL = 18,    /* cancel a posted receive by tag */
  PW_WIRE_BYE = 19,       /* either side: the session ends */
  PW_WIRE_TYPE_COUNT = 20,
} pw_wire_type_t;

/* Field positions (u = unsigned, b = blob). */
enum {
  /* HELLO */
  PW_WIRE_HELLO_PID = 0, PW_WIRE_HELLO_DEVICES = 1, PW_WIRE_HELLO_BACKEND_VERSION = 2,
  PW_WIRE_HELLO_QUEUE_FLAGS = 3, PW_WIRE_HELLO_QUEUE_DEPTH = 4, PW_WIRE_HELLO_HOST_LAUNCH = 5,
  PW_WIRE_HELLO_B_TOKEN = 0, PW_WIRE_HELLO_B_NAME = 1, PW_WIRE_HELLO_B_BACKEND = 2,
  PW_WIRE_HELLO_B_UCX = 3, PW_WIRE_HELLO_B_KIND = 4,
  /* list: memory_bytes of every device */
  /* WELCOME */
  PW_WIRE_WELCOME_INDEX = 0, PW_WIRE_WELCOME_HEARTBEAT_NS = 1, PW_WIRE_WELCOME_MISSES = 2,
  PW_WIRE_WELCOME_B_URL = 0, PW_WIRE_WELCOME_B_NONCE = 1,
  /* REFUSE, BYE */
  PW_WIRE_REASON_B = 0,
  /* ATTACH */
  PW_WIRE_ATTACH_INDEX = 0, PW_WIRE_ATTACH_B_NONCE = 0,
  /* HEARTBEAT: list = device health (worker -> controller) */
  PW_WIRE_HEARTBEAT_SEQ = 0,
  /* PEER (index PW_WIRE_PEER_CONTROLLER: the controller's own address) */
  PW_WIRE_PEER_INDEX = 0, PW_WIRE_PEER_B_NAME = 0, PW_WIRE_PEER_B_UCX = 1,
  /* REPLY: list = a signature (LOAD) */
  PW_WIRE_REPLY_ID = 0, PW_WIRE_REPLY_CODE = 1, PW_WIRE_REPLY_B_MESSAGE = 0,
  PW_WIRE_REPLY_B_PAYLOAD = 1,
  /* COMPILE: list = mesh dims; axes = the axis names joined by ',' ("" unnamed) */
  PW_WIRE_COMPILE_ID = 0, PW_WIRE_COMPILE_B_PROGRAM = 0, PW_WIRE_COMPILE_B_OPTIONS = 1,
  PW_WIRE_COMPILE_B_AXES = 2,
  /* LOAD */
  PW_WIRE_LOAD_ID = 0, PW_WIRE_LOAD_EXE = 1, PW_WIRE_LOAD_B_BYTES = 0,
  /* UNLOAD */
  PW_WIRE_UNLOAD_EXE = 0,
  /* ALLOC */
  PW_WIRE_ALLOC_MEM = 0, PW_WIRE_ALLOC_DEVICE = 1, PW_WIRE_ALLOC_SIZE = 2,
  /* FREE */
  PW_WIRE_FREE_MEM = 0,
  /* WRITE */
  PW_WIRE_WRITE_ID = 0, PW_WIRE_WRITE_MEM = 1, PW_WIRE_WRITE_OFFSET = 2, PW_WIRE_WRITE_B_BYTES = 0,
  /* READ */
  PW_WIRE_READ_ID = 0, PW_WIRE_READ_MEM = 1, PW_WIRE_READ_OFFSET = 2, PW_WIRE_READ_SIZE = 3,
  /* LAUNCH: list = group_devices[group], inputs[k][i], outputs[k][i] */
  PW_WIRE_LAUNCH_ID = 0, PW_WIRE_LAUNCH_EXE = 1, PW_WIRE_LAUNCH_MESH_START = 2,
  PW_WIRE_LAUNCH_DEVICES = 3, PW_WIRE_LAUNCH_GROUP = 4, PW_WIRE_LAUNCH_GANG = 5,
  PW_WIRE_LAUNCH_QUEUE_SEQ = 6, PW_WIRE_LAUNCH_INPUTS = 7, PW_WIRE_LAUNCH_OUTPUTS = 8,
  PW_WIRE_LAUNCH_NODE_ARG = 9,
  /* DONE */
  PW_WIRE_DONE_ID = 0, PW_WIRE_DONE_CODE = 1, PW_WIRE_DONE_START_NS = 2, PW_WIRE_DONE_END_NS = 3,
  PW_WIRE_DONE_BUSY_NS = 4, PW_WIRE_DONE_B_MESSAGE = 0,
  /* COPY: list = strides, 3 per level (count, src_stride, dst_stride) */
  PW_WIRE_COPY_ID = 0, PW_WIRE_COPY_ROLE = 1, PW_WIRE_COPY_SRC_MEM = 2, PW_WIRE_COPY_SRC_OFFSET = 3,
  PW_WIRE_COPY_DST_MEM = 4, PW_WIRE_COPY_DST_OFFSET = 5, PW_WIRE_COPY_SIZE = 6,
  PW_WIRE_COPY_PEER = 7, PW_WIRE_COPY_TAG = 8,
  /* CANCEL */
  PW_WIRE_CANCEL_TAG = 0,
};

/* COPY roles. */
enum {
  PW_WIRE_COPY_LOCAL = 0,  /* both ends on this worker */
  PW_WIRE_COPY_SEND = 1,   /* src here, to PEER (PW_WIRE_PEER_CONTROLLER: the controller) */
  PW_WIRE_COPY_RECV = 2,   /* dst here, from PEER */
};

/* The peer index of the controller in PEER and COPY: host transfers of
 * large buffers move on the data plane between it and a worker. */
#define PW_WIRE_PEER_CONTROLLER 0xFFFFFFFFu

typedef struct pw_wire_blob_t {
  const void* data;
  size_t size;
} pw_wire_blob_t;

typedef struct pw_wire_msg_t {
  pw_wire_type_t type;
  uint64_t u[PW_WIRE_MAX_U];
  pw_wire_blob_t blob[PW_WIRE_MAX_BLOB];
  /* The list, if the type has one. Encoding: the caller's array.
   * Decoding: allocated (free with pw__wire_msg_release). */
  const uint64_t* list;
  uint32_t list_count;
} pw_wire_msg_t;

/* "HELLO", ...; "?" for an unknown type. */
const char* pw__wire_type_name(uint32_t type);

/* Bytes |msg| encodes to (0: |msg| does not fit its type's shape: a blob
 * or the list over its maximum, or an unknown type). */
size_t pw__wire_measure(const pw_wire_msg_t* msg);

/* Writes |msg| into |buffer| of |capacity| (at least pw__wire_measure)
 * bytes; returns the bytes written, 0 when it does not fit. */
size_t pw__wire_write(const pw_wire_msg_t* msg, void* buffer, size_t capacity);

/* Decodes one message from exactly |size| bytes. |expect| 0: any type;
 * otherwise only that type is accepted. On success |out_msg|'s blobs
 * point into |data| and its list is allocated from |allocator|. */
pw_status_t pw__wire_decode(const void* data, size_t size, uint32_t expect,
                            pw_allocator_t allocator, pw_wire_msg_t* out_msg);

/* Frames. What a session's socket carries is a frame: one or more
 * messages back to back (a CBOR sequence, RFC 8742), so that launches
 * and completions issued together cost one network message
 * (docs/formats.md). Decodes the message that starts at |*offset| and
 * moves |*offset| past it, also when that message is refused but its end
 * is known; to |size| when it is not (the rest of the frame cannot be
 * read). The frame is done when |*offset| == |size|. */
pw_status_t pw__wire_decode_next(const void* data, size_t size, size_t* offset, uint32_t expect,
                                 pw_allocator_t allocator, pw_wire_msg_t* out_msg);

/* Frees a decoded message's list. */
void pw__wire_msg_release(pw_wire_msg_t* msg, pw_allocator_t allocator);

/* A blob as a NUL-terminated string in |buffer| of |capacity| bytes
 * (truncated); for names and messages. */
void pw__wire_blob_text(const pw_wire_blob_t* blob, char* buffer, size_t capacity);

#endif /* PW_WIRE_WIRE_H_ */
