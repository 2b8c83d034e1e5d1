/* A session's outgoing frame (see outbox.h). */
#include "wire/outbox.h"

#include "wire/wire_nng.h"

void pw__wire_outbox_init(pw_wire_outbox_t* outbox) {
  pthread_mutex_init(&outbox->mu, NULL);
  outbox->frame = NULL;
  outbox->count = 0;
  outbox->frames_sent = 0;
  outbox->messages_sent = 0;
}

void pw__wire_outbox_destroy(pw_wire_outbox_t* outbox) {
  if (outbox->frame != NULL) nng_msg_free(outbox->frame);
  outbox->frame = NULL;
  pthread_mutex_destroy(&outbox->mu);
}

pw_status_t pw__wire_outbox_append_locked(pw_wire_outbox_t* outbox, const pw_wire_msg_t* msg,
                                          const char* peer) {
  size_t size = pw__wire_measure(msg);
  if (size == 0) {
    return pw_status_make(PW_STATUS_INTERNAL, "wire message %s to %s does not fit its shape",
                          pw__wire_type_name(msg->type), peer ? peer : "peer");
  }
  int rv = 0;
  if (outbox->frame == NULL) {
    rv = nng_msg_alloc(&outbox->frame, 0);
    if (rv == 0) rv = nng_msg_reserve(outbox->frame, size < 4096 ? 4096 : size);
    if (rv != 0 && outbox->frame != NULL) {
      nng_msg_free(outbox->frame);
      outbox->frame = NULL;
    }
  }
  size_t at = outbox->frame != NULL ? nng_msg_len(outbox->frame) : 0;
  if (rv == 0 && at + size > nng_msg_capacity(outbox->frame)) {
    rv = nng_msg_reserve(outbox->frame, 2 * (at + size));
  }
  if (rv == 0) rv = nng_msg_realloc(outbox->frame, at + size);
  if (rv != 0) return pw__wire_nng_status(rv, "frame to", peer);
  unsigned char* body = nng_msg_body(outbox->frame);
  if (pw__wire_write(msg, body + at, size) != size) {
    nng_msg_chop(outbox->frame, size);
    return pw_status_make(PW_STATUS_INTERNAL, "wire message %s: encoding failed",
                          pw__wire_type_name(msg->type));
  }
  ++outbox->count;
  return NULL;
}

bool pw__wire_outbox_full_locked(const pw_wire_outbox_t* outbox) {
  return outbox->count >= PW_WIRE_OUTBOX_MAX_MESSAGES ||
         (outbox->frame != NULL && nng_msg_len(outbox->frame) >= PW_WIRE_OUTBOX_MAX_BYTES);
}

pw_status_t pw__wire_outbox_flush_locked(pw_wire_outbox_t* outbox, nng_socket socket, int flags,
                                         const char* peer) {
  if (outbox->frame == NULL) return NULL;
  nng_msg* frame = outbox->frame;
  uint32_t count = outbox->count;
  outbox->frame = NULL;
  outbox->count = 0;
  int rv = nng_sendmsg(socket, frame, flags);
  if (rv != 0) {
    nng_msg_free(frame);
    pw_status_t status = pw__wire_nng_status(rv, "send to", peer);
    return count > 1 ? pw_status_annotate(status, "a frame of %u messages", count) : status;
  }
  outbox->frames_sent++;
  outbox->messages_sent += count;
  return NULL;
}

uint32_t pw__wire_outbox_discard_locked(pw_wire_outbox_t* outbox) {
  uint32_t count = outbox->count;
  if (outbox->frame != NULL) nng_msg_free(outbox->frame);
  outbox->frame = NULL;
  outbox->count = 0;
  return count;
}
