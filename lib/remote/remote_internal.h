/* Internal: the controller's state for remote workers (see
 * include/pathways/remote.h and docs/remote.md).
 *
 * remote.c     create/destroy, registration (rep0), the monitor thread
 * remote_tls.c TLS on both listeners, the log of refused handshakes
 * session.c    one worker's session (pair0): reader thread, pending
 *              table, loss
 * proxy.c      the proxy backend (backend.h over the session)
 * host_copy.c  blocking host copies to and from a worker's memory
 * dataplane.c  the controller's end of the data plane (UCX) for them
 *              (dataplane_stub.c when lib/ucx is not built)
 * transport.c  the transport between workers and with local backends
 *
 * Locks: remote->mu before worker->mu; no callback (launch done,
 * transport done) runs under either. */
#ifndef PW_REMOTE_REMOTE_INTERNAL_H_
#define PW_REMOTE_REMOTE_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "pathways/remote.h"
#include "wire/outbox.h"
#include "wire/wire.h"

typedef enum pw_rworker_state_e {
  PW_RWORKER_WELCOMED = 1,  /* WELCOME sent, waiting for ATTACH */
  PW_RWORKER_ATTACHED = 2,
  PW_RWORKER_LOST = 3,
} pw_rworker_state_t;

typedef enum pw_pending_kind_e {
  PW_PENDING_REQUEST = 1,
  PW_PENDING_LAUNCH = 2,
  PW_PENDING_COPY = 3,
} pw_pending_kind_t;

typedef struct pw_remote_copy_s pw_remote_copy_t;

/* Something waiting for a REPLY or DONE with its id. */
typedef struct pw_pending_s {
  struct pw_pending_s* next;   /* bucket chain */
  uint64_t id;
  pw_pending_kind_t kind;
  /* REQUEST: on the caller's stack; filled by the reader (under mu). */
  bool finished;
  nng_msg* raw;
  pw_wire_msg_t reply;
  pw_status_t status;          /* set instead of raw when the worker is lost */
  /* LAUNCH */
  pw_backend_done_fn_t done;
  pw_backend_done_timed_fn_t done_timed;
  void* done_user;
  /* COPY: one part of |copy| */
  pw_remote_copy_t* copy;
} pw_pending_t;

#define PW_PENDING_BUCKETS 256u

typedef struct pw_remote_worker_s {
  pw_remote_t* remote;
  uint32_t index;
  char name[64];
  char label[80];              /* "worker NAME" */
  char backend[32];
  char kind[32];
  uint32_t device_count;
  uint32_t pid;
  uint32_t backend_version;
  uint32_t queue_flags;
  uint32_t queue_depth;
  uint64_t* memory_bytes;      /* per device (fixed at first registration) */
  pw_backend_vtable_t vtable;  /* the proxy's: name = backend */

  pthread_mutex_t mu;
  pthread_cond_t cond;         /* requests finished */
  /* Under mu: */
  pw_rworker_state_t state;
  uint64_t epoch;              /* session number; 0 before the first */
  nng_socket session;
  bool session_open;
  nng_listener session_listener;  /* of the current session */
  uint64_t tls_refused;        /* its failed handshakes logged so far */
  int pipe_id;                 /* the attached peer's nng pipe */
  uint8_t nonce[PW_WIRE_NONCE_SIZE];
  pw_time_t welcomed_at;
  pthread_t reader;
  bool reader_joinable;
  uint8_t* health;             /* per device, pw_device_health_t */
  uint64_t* used_bytes;        /* per device, allocated by proxies */
  uint8_t* ucx_address;
  size_t ucx_size;
  uint32_t sessions;
  uint32_t losses;
  pw_pending_t* pending[PW_PENDING_BUCKETS];
  uint64_t heartbeat_seq;

  uint32_t dp_peer;            /* the controller's data-plane endpoint to it */
  bool dp_connected;
  _Atomic uint64_t host_bytes_dp;  /* host copies moved on the data plane */
  _Atomic uint64_t host_bytes_cp;  /* ... in WRITE / READ */

  _Atomic pw_time_t last_rx;
  atomic_int closed_pipe;      /* the last pipe closed (pipe callback) */

  /* What goes to the worker (lib/remote/outbox.c): the frame being built
   * and the session it is for (under out.mu). */
  pw_wire_outbox_t out;
  uint64_t out_epoch;
  _Atomic uint64_t messages_received;
  _Atomic uint64_t frames_received;
} pw_remote_worker_t;

typedef struct pw_remote_dp_s pw_remote_dp_t;

struct pw_remote_s {
  pw_allocator_t allocator;
  pw_logger_t logger;
  pw_duration_t heartbeat_ns;
  uint32_t heartbeat_misses;
  pw_duration_t call_timeout_ns;
  uint8_t* token;
  size_t token_size;
  char url[256];
  char host[200];              /* sessions listen on SCHEME://host:0 */
  const char* scheme;          /* "tcp" or "tls+tcp" */
  /* TLS (remote_tls.c): the server configuration both listeners share,
   * NULL for plain tcp; |tls_verify|: client certificates required. */
  nng_tls_config* tls;
  bool tls_verify;
  pw_time_t tls_checked_at;    /* the monitor's last look at nng's stats */
  uint64_t tls_reg_refused;    /* the registration listener's, logged */

  nng_socket reg;
  nng_listener reg_listener;
  pthread_t reg_thread;
  pthread_t monitor_thread;
  atomic_bool stopping;
  _Atomic uint64_t next_id;

  pthread_mutex_t mu;
  pthread_cond_t cond;         /* attach / stop */
  pw_remote_worker_t* workers[PW_REMOTE_MAX_WORKERS];
  uint32_t worker_count;
  uint32_t attached;
  pw_remote_dp_t* dp;          /* NULL: host copies over the control plane */
};

/* A copy in flight (transport.c): one part per worker involved. */
struct pw_remote_copy_s {
  atomic_uint parts_left;
  _Atomic(pw_status_t) first_error;
  pw_transport_done_fn_t done;
  void* done_user;
  uint64_t tag;
  pw_remote_worker_t* side[2];  /* the workers of the parts (one for LOCAL) */
  bool local_part;              /* a host copy: one part is a post on the controller's link */
};

/* The CLOCK_MONOTONIC time |ns| from now, for pthread_cond_timedwait on
 * the conditions here (made with that clock). */
static inline struct timespec pw__remote_abstime(int64_t ns) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t sum = ts.tv_nsec + ns;
  ts.tv_sec += sum / 1000000000;
  ts.tv_nsec = sum % 1000000000;
  return ts;
}

static inline uint64_t pw__remote_next_id(pw_remote_t* remote) {
  return atomic_fetch_add(&remote->next_id, 1);
}

/* session.c */

/* Creates the session socket for a (re)registered worker, starts its
 * reader thread and gives the URL to dial. Caller holds no lock. */
pw_status_t pw__remote_session_open(pw_remote_worker_t* worker, char* url, size_t capacity);

/* Declares the worker's session |epoch| lost (a no-op if it is not the
 * current one or already lost): devices FAILED, pending resolved with
 * UNAVAILABLE naming the worker and |reason|. */
void pw__remote_session_lose(pw_remote_worker_t* worker, uint64_t epoch, const char* reason);

/* Joins the reader thread of an ended session (no lock held). */
void pw__remote_session_join(pw_remote_worker_t* worker);

/* How long joining an ended session's reader, or closing the
 * registration socket, may take (nng 1.5.2's close can hang: session.c). */
#define PW_SESSION_JOIN_S 3

/* Sends one message on the current session (UNAVAILABLE when there is
 * none, or when |epoch| is not 0 and not the current one). A failed send
 * loses the session. The message goes into the worker's outbox; it
 * leaves at once unless this thread is corked (below), and then at
 * pw__remote_uncork, in one frame with what was corked with it.
 * |flags|: nng_sendmsg's, and PW_REMOTE_SEND_NOW to send even when
 * corked (a request whose reply is waited for). */
#define PW_REMOTE_SEND_NOW (1 << 16)
pw_status_t pw__remote_send(pw_remote_worker_t* worker, uint64_t epoch,
                            const pw_wire_msg_t* msg, int flags);

/* Inserts |entry| (id and kind set) into the pending table of session
 * |epoch| (0: current): UNAVAILABLE when it is not attached. */
pw_status_t pw__remote_pending_add(pw_remote_worker_t* worker, uint64_t epoch,
                                   pw_pending_t* entry);

/* Corking (lib/remote/outbox.c, on lib/base/defer.h's batches): while
 * this thread is in a batch (pw__remote_cork .. pw__remote_uncork, or an
 * outermost dispatch frame), what it sends stays in the workers'
 * outboxes; the batch's end sends each such outbox as one frame (a failed
 * send loses that worker's session: its pending work completes
 * UNAVAILABLE). A session reader corks while it handles a frame, so the
 * launches its completions release leave together; a graph submission's
 * launches leave together the same way. Batches nest. */
void pw__remote_cork(void);
/* True if this thread is corked; then notes |worker| for the uncork. */
bool pw__remote_corked(pw_remote_worker_t* worker);
void pw__remote_uncork(void);
/* Sends |worker|'s outbox now (corked or not). */
void pw__remote_flush(pw_remote_worker_t* worker);

/* Removes the entry with |id| if it is still there; true if it was. */
bool pw__remote_pending_take(pw_remote_worker_t* worker, pw_pending_t* entry);

/* Sends |request| (its id field set by the caller at position 0) and
 * waits for its REPLY up to the call timeout. On success the caller owns
 * *out_raw / *out_reply (release with pw__wire_nng_release) and the
 * reply's code was OK. */
pw_status_t pw__remote_call(pw_remote_worker_t* worker, uint64_t epoch,
                            const pw_wire_msg_t* request, nng_msg** out_raw,
                            pw_wire_msg_t* out_reply);

/* Sends HEARTBEAT and checks silence: called by the monitor each period. */
void pw__remote_session_tick(pw_remote_worker_t* worker, pw_time_t now);

/* A status from a wire code and message ("worker w1: ..."). */
pw_status_t pw__remote_status(const pw_remote_worker_t* worker, uint64_t code,
                              const pw_wire_blob_t* message);

/* remote_tls.c */

/* Reads |options|' TLS files into remote->tls (left NULL without them);
 * sets remote->scheme. |listen_url| is the URL create will listen on. */
pw_status_t pw__remote_tls_init(pw_remote_t* remote, const pw_remote_options_t* options,
                                const char* listen_url);
/* Puts remote->tls on |listener| (a no-op without TLS). */
pw_status_t pw__remote_tls_listener(pw_remote_t* remote, nng_listener listener,
                                    const char* what);
/* True if a HELLO that came on |pipe| may go on: without client
 * certificates always, else when nng says the peer's was verified. */
bool pw__remote_tls_peer_ok(const pw_remote_t* remote, nng_pipe pipe);
/* The monitor's hook: logs handshakes that failed on the listeners since
 * the last look (at most once a second; no lock held). */
void pw__remote_tls_watch(pw_remote_t* remote, pw_time_t now);

/* transport.c: completes one part of a copy (owns |status|; |from| is
 * the worker whose DONE it is, NULL for the controller's own post). */
void pw__remote_copy_part_done(pw_remote_copy_t* copy, pw_remote_worker_t* from,
                               pw_status_t status);

/* Sends one COPY part to |w| as a pending copy: true when it went out
 * (its DONE, or the loss, completes the part); false when it could not,
 * and the part was completed with the error. */
bool pw__remote_copy_send_part(pw_remote_worker_t* w, uint64_t epoch, pw_remote_copy_t* copy,
                               pw_wire_msg_t* msg);

/* proxy.c */
void pw__remote_proxy_vtable_init(pw_remote_worker_t* worker);
/* The worker behind a proxy backend, or NULL if |backend| is not one. */
pw_remote_worker_t* pw__remote_proxy_worker(const pw_backend_t* backend);

typedef struct pw_remote_mem_s {
  uint64_t id;
  uint64_t epoch;
  uint32_t device;
  size_t size;
} pw_remote_mem_t;

/* Checks that |memory| belongs to the current session of |worker|. */
pw_status_t pw__remote_mem_check(pw_remote_worker_t* worker, const pw_remote_mem_t* mem,
                                 uint64_t epoch);

/* Synchronous host copies through WRITE / READ (chunked). */
pw_status_t pw__remote_write(pw_remote_worker_t* worker, const pw_remote_mem_t* mem,
                             size_t offset, const void* src, size_t size);
pw_status_t pw__remote_read(pw_remote_worker_t* worker, const pw_remote_mem_t* mem,
                            size_t offset, void* dst, size_t size);

/* The current epoch if attached, else 0. */
uint64_t pw__remote_epoch(pw_remote_worker_t* worker);

/* dataplane.c. Host copies of at least this many bytes use the data
 * plane when pw__remote_dp_usable. */
#define PW_REMOTE_DP_MIN_BYTES ((size_t)64 << 10)
/* Creates the controller's link (none, logged, when UCX cannot start). */
void pw__remote_dp_open(pw_remote_t* remote);
void pw__remote_dp_close(pw_remote_t* remote);
/* At attach: connects to the worker's address and sends it the
 * controller's (PEER with PW_WIRE_PEER_CONTROLLER). */
void pw__remote_dp_attach(pw_remote_worker_t* worker);
/* At loss: closes the endpoint (its outstanding sends fail). */
void pw__remote_dp_detach(pw_remote_worker_t* worker);
bool pw__remote_dp_usable(pw_remote_worker_t* worker);
/* Fails the controller's post with |tag| (a host copy whose worker side failed). */
void pw__remote_dp_cancel(pw_remote_t* remote, uint64_t tag);
/* One blocking host write (|write|: |buf| to the memory) or read. */
pw_status_t pw__remote_dp_host_copy(pw_remote_worker_t* worker, const pw_remote_mem_t* mem,
                                    size_t offset, void* buf, size_t size, bool write);

#endif /* PW_REMOTE_REMOTE_INTERNAL_H_ */
