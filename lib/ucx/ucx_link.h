/* Internal: the data plane's byte mover, on UCX's ucp API.
 *
 * One pw_ucx_link_t is one ucp context and one ucp worker with a progress
 * thread. Peers are connected by exchanging worker addresses out of band
 * (over the nng control plane): pw__ucx_link_address gives this side's
 * address bytes, pw__ucx_link_connect makes an endpoint to a peer's. UCX
 * then picks the transport itself: shared memory between processes of one
 * machine, TCP (or RDMA where present) between machines.
 *
 * Bytes move as tagged messages: the sender posts pw__ucx_link_send(peer,
 * tag, bytes), the receiver pw__ucx_link_recv(tag, buffer); either side may
 * post first (UCX keeps an unexpected message until its receive is posted,
 * large ones by rendezvous without a copy). Tags are the caller's: the
 * controller hands both sides of one copy the same 64-bit tag, unique per
 * copy while the link lives.
 *
 * Completion: |done| is called exactly once for every post that returned
 * OK (never for one that returned an error), from the progress thread or
 * inline, with NULL (OK) or an owned status: a receive whose message is
 * larger than its buffer is OUT_OF_RANGE, an endpoint that fails
 * (peer process died, network cut) fails its outstanding sends with
 * UNAVAILABLE naming the peer (and every later send to it at once), and
 * pw__ucx_link_cancel_tag / pw__ucx_link_destroy fail what is outstanding
 * with CANCELLED. A receive names no peer, so a failed endpoint cannot
 * fail the receives waiting for its messages: cancel them by tag (a
 * receive UCX was already filling from it fails UNAVAILABLE). A done
 * callback may post more sends and receives; it must not destroy the link.
 *
 * A done means UCX no longer touches the buffer. UCX cannot take back a
 * send: a cancelled send's done (CANCELLED) comes when its bytes left
 * (at once for small ones, when the peer receives for large ones) or when
 * its endpoint is closed (pw__ucx_link_disconnect, destroy).
 *
 * Transports: endpoints ask UCX for peer failure handling, which UCX
 * 1.13's shared-memory transports lack, so UCX picks TCP (loopback too)
 * or RDMA; UCX_TLS and the other UCX_* variables are the user's.
 *
 * Threading: every call may be made from any thread, concurrently, except
 * destroy. No call blocks longer than its deadline. */
#ifndef PW_UCX_UCX_LINK_H_
#define PW_UCX_UCX_LINK_H_

#include <stddef.h>
#include <stdint.h>

#include "pathways/allocator.h"
#include "pathways/log.h"
#include "pathways/status.h"

typedef struct pw_ucx_link_s pw_ucx_link_t;

/* A connected peer: a small index, valid until disconnect or destroy. */
typedef uint32_t pw_ucx_peer_t;

typedef void (*pw_ucx_done_fn_t)(void* user, pw_status_t status);

typedef struct pw_ucx_link_options_t {
  size_t struct_size;
  pw_allocator_t allocator;   /* zero: the system allocator */
  pw_logger_t logger;         /* zero: silent */
  /* Name for messages ("worker w1"). May be NULL. Copied. */
  const char* name;
} pw_ucx_link_options_t;

/* Creates the context, the worker and its progress thread. UNAVAILABLE
 * naming UCX's error when UCX cannot start. */
pw_status_t pw__ucx_link_create(const pw_ucx_link_options_t* options,
                                pw_ucx_link_t** out_link);

/* Fails everything outstanding with CANCELLED, closes every endpoint
 * (bounded: at most 1 s; what UCX still holds then is failed CANCELLED
 * anyway), stops the thread, frees. Every done has run when it returns.
 * NULL is a no-op. Not from a done callback. */
void pw__ucx_link_destroy(pw_ucx_link_t* link);

/* This side's worker address, to send to peers. Valid while |link| lives. */
void pw__ucx_link_address(const pw_ucx_link_t* link, const void** out_bytes,
                          size_t* out_size);

/* Connects to a peer by its address bytes (any bytes: garbage is
 * INVALID_ARGUMENT or UNAVAILABLE, never a crash: the address carries a
 * magic, a length and a checksum checked before UCX sees it). |name|
 * names the peer in messages (copied). Peer indices are never reused. */
pw_status_t pw__ucx_link_connect(pw_ucx_link_t* link, const void* address, size_t size,
                                 const char* name, pw_ucx_peer_t* out_peer);

/* Closes a peer's endpoint (forced: the peer's endpoint to us fails);
 * its outstanding sends fail CANCELLED, later sends FAILED_PRECONDITION. */
void pw__ucx_link_disconnect(pw_ucx_link_t* link, pw_ucx_peer_t peer);

/* Sends |size| bytes at |bytes| (borrowed until done) to |peer| with
 * |tag|. */
pw_status_t pw__ucx_link_send(pw_ucx_link_t* link, pw_ucx_peer_t peer, uint64_t tag,
                              const void* bytes, size_t size, pw_ucx_done_fn_t done,
                              void* user);

/* Receives the message tagged |tag| (from any peer) into |buffer| of
 * |capacity| bytes (borrowed until done). |out_size| (may be NULL) gets
 * the bytes received, written before done runs. */
pw_status_t pw__ucx_link_recv(pw_ucx_link_t* link, uint64_t tag, void* buffer,
                              size_t capacity, size_t* out_size, pw_ucx_done_fn_t done,
                              void* user);

/* Fails the outstanding receive (or send) posted with |tag| with CANCELLED
 * (a copy whose other side was lost). No-op if none. */
void pw__ucx_link_cancel_tag(pw_ucx_link_t* link, uint64_t tag);

#endif /* PW_UCX_UCX_LINK_H_ */
