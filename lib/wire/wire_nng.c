#define _POSIX_C_SOURCE 200809L
/* Wire messages over nng sockets (see wire_nng.h). */
#include "wire/wire_nng.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "base/atomics.h"

#include "pathways/clock.h"

pw_status_t pw__wire_nng_status(int rv, const char* what, const char* peer) {
  pw_status_code_t code = PW_STATUS_UNAVAILABLE;
  if (rv == NNG_ETIMEDOUT) code = PW_STATUS_DEADLINE_EXCEEDED;
  if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) code = PW_STATUS_CANCELLED;
  if (rv == NNG_ENOMEM) code = PW_STATUS_RESOURCE_EXHAUSTED;
  return pw_status_make(code, "%s %s: %s", what, peer ? peer : "peer", nng_strerror(rv));
}

pw_status_t pw__wire_nng_limit(nng_socket socket) {
  int rv = nng_socket_set_size(socket, NNG_OPT_RECVMAXSZ, PW_WIRE_NNG_MAX_MESSAGE);
  return rv == 0 ? NULL : pw__wire_nng_status(rv, "receive limit on", "socket");
}

pw_status_t pw__wire_nng_send(nng_socket socket, const pw_wire_msg_t* msg, int flags,
                              const char* peer) {
  size_t size = pw__wire_measure(msg);
  if (size == 0) {
    return pw_status_make(PW_STATUS_INTERNAL, "wire message %s to %s does not fit its shape",
                          pw__wire_type_name(msg->type), peer ? peer : "peer");
  }
  nng_msg* raw = NULL;
  int rv = nng_msg_alloc(&raw, size);
  if (rv != 0) return pw__wire_nng_status(rv, "message to", peer);
  if (pw__wire_write(msg, nng_msg_body(raw), size) != size) {
    nng_msg_free(raw);
    return pw_status_make(PW_STATUS_INTERNAL, "wire message %s: encoding failed",
                          pw__wire_type_name(msg->type));
  }
  rv = nng_sendmsg(socket, raw, flags);
  if (rv != 0) {
    nng_msg_free(raw);
    return pw__wire_nng_status(rv, "send to", peer);
  }
  return NULL;
}

pw_status_t pw__wire_nng_decode(nng_msg* raw, uint32_t expect, pw_allocator_t allocator,
                                const char* peer, pw_wire_msg_t* out_msg) {
  pw_status_t status =
      pw__wire_decode(nng_msg_body(raw), nng_msg_len(raw), expect, allocator, out_msg);
  if (status != NULL) {
    nng_msg_free(raw);
    return pw_status_annotate(status, "from %s", peer ? peer : "peer");
  }
  return NULL;
}

pw_status_t pw__wire_nng_recv(nng_socket socket, uint32_t expect, int flags,
                              pw_allocator_t allocator, const char* peer, nng_msg** out_raw,
                              pw_wire_msg_t* out_msg) {
  *out_raw = NULL;
  nng_msg* raw = NULL;
  int rv = nng_recvmsg(socket, &raw, flags);
  if (rv != 0) return pw__wire_nng_status(rv, "receive from", peer);
  PW_RETURN_IF_ERROR(pw__wire_nng_decode(raw, expect, allocator, peer, out_msg));
  *out_raw = raw;
  return NULL;
}

void pw__wire_nng_release(nng_msg* raw, pw_wire_msg_t* msg, pw_allocator_t allocator) {
  if (msg != NULL) pw__wire_msg_release(msg, allocator);
  if (raw != NULL) nng_msg_free(raw);
}

void pw__wire_nng_close(nng_socket socket) {
  /* A short blocking receive pulls a message out of the pipe; a
   * non-blocking one does not, and nng_close would then wait for it. */
  nng_socket_set_ms(socket, NNG_OPT_RECVTIMEO, 10);
  pw_time_t deadline = pw_deadline_from_timeout(200000000);
  nng_msg* m = NULL;
  while (pw_deadline_remaining(deadline) > 0 && nng_recvmsg(socket, &m, 0) == 0) nng_msg_free(m);
  nng_close(socket);
}

/* The close's state, shared by the closer thread and the waiter; freed
 * by whichever lets go last. */
typedef struct pw_wire_closer_t {
  nng_socket socket;
  pw_atomic_u32_t done;
  pw_atomic_u32_t refs;
} pw_wire_closer_t;

static void pw_wire_closer_release(pw_wire_closer_t* c) {
  if (pw_atomic_fetch_sub_u32(&c->refs, 1) == 1) free(c);
}

static void* pw_wire_closer_main(void* arg) {
  pw_wire_closer_t* c = arg;
  pw__wire_nng_close(c->socket);
  pw_atomic_store_u32_release(&c->done, 1);
  pw_wire_closer_release(c);
  return NULL;
}

bool pw__wire_nng_close_within(nng_socket socket, uint64_t timeout_ns) {
  pw_wire_closer_t* c = malloc(sizeof(*c));
  pthread_t thread;
  if (c != NULL) {
    c->socket = socket;
    pw_atomic_init_u32(&c->done, 0);
    pw_atomic_init_u32(&c->refs, 2);
    if (pthread_create(&thread, NULL, pw_wire_closer_main, c) != 0) {
      free(c);
      c = NULL;
    }
  }
  if (c == NULL) {
    pw__wire_nng_close(socket);
    return true;
  }
  pthread_detach(thread);
  pw_time_t deadline = pw_deadline_from_timeout((pw_duration_t)timeout_ns);
  while (!pw_atomic_load_u32_acquire(&c->done) && pw_deadline_remaining(deadline) > 0) {
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
  bool closed = pw_atomic_load_u32_acquire(&c->done) != 0;
  pw_wire_closer_release(c);
  return closed;
}
