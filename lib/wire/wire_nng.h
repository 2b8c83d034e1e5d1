/* Internal: wire messages over nng sockets (the controller's and the
 * workers' one way to send and receive them).
 *
 * pw__wire_send encodes into one nng message and sends it; pw__wire_recv
 * receives one and decodes it strictly (wire.h). nng's errors become
 * statuses naming |peer| (a string for messages: "worker w1",
 * "controller"): a timeout is DEADLINE_EXCEEDED, a closed socket
 * CANCELLED, a message that does not decode INVALID_ARGUMENT (the raw
 * message is freed), anything else UNAVAILABLE. */
#ifndef PW_WIRE_WIRE_NNG_H_
#define PW_WIRE_WIRE_NNG_H_

#include <nng/nng.h>

#include "wire/wire.h"

/* The largest nng message either side accepts (NNG_OPT_RECVMAXSZ). */
#define PW_WIRE_NNG_MAX_MESSAGE ((size_t)PW_WIRE_MAX_BYTES + (64u << 10))

/* Sets the receive limit (and nothing else) on |socket|. */
pw_status_t pw__wire_nng_limit(nng_socket socket);

/* Sends |msg|; |flags| are nng_sendmsg's (0 blocks up to the socket's send
 * timeout; NNG_FLAG_NONBLOCK). */
pw_status_t pw__wire_nng_send(nng_socket socket, const pw_wire_msg_t* msg, int flags,
                              const char* peer);

/* Receives one message (|expect| as pw__wire_decode's). On success the
 * caller owns |*out_raw| (|out_msg|'s blobs point into it): release with
 * pw__wire_nng_release. |flags| are nng_recvmsg's. */
pw_status_t pw__wire_nng_recv(nng_socket socket, uint32_t expect, int flags,
                              pw_allocator_t allocator, const char* peer, nng_msg** out_raw,
                              pw_wire_msg_t* out_msg);

/* Decodes a message already received (an aio's); frees |raw| on error. */
pw_status_t pw__wire_nng_decode(nng_msg* raw, uint32_t expect, pw_allocator_t allocator,
                                const char* peer, pw_wire_msg_t* out_msg);

/* Frees a received message and its decoded list. */
void pw__wire_nng_release(nng_msg* raw, pw_wire_msg_t* msg, pw_allocator_t allocator);

/* Closes |socket| after draining what it has received, for at most
 * 200 ms: Debian's nng 1.5.2 hangs in nng_close on a socket with a
 * message still waiting to be received (docs/toolchain.md, "nng"). */
void pw__wire_nng_close(nng_socket socket);

/* pw__wire_nng_close on a thread of its own, waited for up to
 * |timeout_ns|: nng 1.5.2's close can block for ever (its reaper waits on
 * a pipe of a peer that stopped, or was cut off, with data in flight; a
 * stuck reaper then blocks every close). True when the socket closed in
 * time; false when it was left to that thread (the caller logs it) or no
 * thread could be made (then it closed inline, unbounded). */
bool pw__wire_nng_close_within(nng_socket socket, uint64_t timeout_ns);

/* nng's error |rv| as a status: "|what| |peer|: nng's text". */
pw_status_t pw__wire_nng_status(int rv, const char* what, const char* peer);

#endif /* PW_WIRE_WIRE_NNG_H_ */
