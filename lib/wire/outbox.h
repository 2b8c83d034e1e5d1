/* Internal: a session's outgoing frame (wire.h, "Frames").
 *
 * Every message one side sends on a session is appended to its outbox,
 * encoded in place into one nng message, and goes out when the outbox is
 * flushed: messages appended between two flushes travel as one frame, in
 * the order they were appended. The lock is held across the append and
 * across the send, so frames leave in order whichever threads flush.
 * Who flushes when is the owner's policy (lib/remote/outbox.c corks the
 * controller's launches while it handles a frame of completions;
 * lib/worker/outbox.c holds completions while more launches run). */
#ifndef PW_WIRE_OUTBOX_H_
#define PW_WIRE_OUTBOX_H_

#include <nng/nng.h>
#include <pthread.h>

#include "wire/wire.h"

/* A frame is flushed once it holds this many messages or bytes. */
#define PW_WIRE_OUTBOX_MAX_MESSAGES 64u
#define PW_WIRE_OUTBOX_MAX_BYTES ((size_t)256 << 10)

typedef struct pw_wire_outbox_s {
  pthread_mutex_t mu;
  nng_msg* frame;         /* NULL when empty */
  uint32_t count;         /* messages in |frame| */
  uint64_t frames_sent;   /* totals, under |mu| */
  uint64_t messages_sent;
} pw_wire_outbox_t;

void pw__wire_outbox_init(pw_wire_outbox_t* outbox);
/* Frees what was never sent. */
void pw__wire_outbox_destroy(pw_wire_outbox_t* outbox);

/* The calls below need |outbox->mu| held. */

/* Encodes |msg| at the end of the frame. INTERNAL when it does not fit
 * its shape, RESOURCE_EXHAUSTED when nng cannot grow the frame. */
pw_status_t pw__wire_outbox_append_locked(pw_wire_outbox_t* outbox, const pw_wire_msg_t* msg,
                                          const char* peer);
/* True when the frame has reached a flush threshold. */
bool pw__wire_outbox_full_locked(const pw_wire_outbox_t* outbox);
/* Sends the frame (nothing when empty) on |socket| with nng_sendmsg's
 * |flags|; on failure the frame is dropped and the status names |peer|
 * and how many messages were lost with it. */
pw_status_t pw__wire_outbox_flush_locked(pw_wire_outbox_t* outbox, nng_socket socket, int flags,
                                         const char* peer);
/* Drops the frame unsent (its session ended); returns its message count. */
uint32_t pw__wire_outbox_discard_locked(pw_wire_outbox_t* outbox);

#endif /* PW_WIRE_OUTBOX_H_ */
