/* Internal: the worker's state, shared by its files.
 *
 *   worker.c        create/destroy/run/stop, registration and its backoff
 *   tls.c           TLS toward the controller: configuration, dialers,
 *                   the log of failed handshakes
 *   session.c       the session: attach, the reader loop, heartbeats, loss
 *   table.c         id -> entry tables (memories, executables) with pins
 *   requests.c      ALLOC FREE WRITE READ COMPILE LOAD UNLOAD
 *   launch.c        LAUNCH and its DONE
 *   copy_local.c    strided rows, COPY LOCAL
 *   copy_remote.c   the data plane: PEER, COPY SEND/RECV, CANCEL over
 *                   lib/ucx (copy_remote_stub.c when UCX is not built)
 *
 * Threads: the run thread registers and reads the session; a heartbeat
 * thread per session sends HEARTBEAT; backend completion threads (and
 * the data plane's) send DONE. Sends are
 * thread-safe (nng sockets are). |lock| guards the tables, the pins and
 * |inflight|. */
#ifndef PW_WORKER_WORKER_INTERNAL_H_
#define PW_WORKER_WORKER_INTERNAL_H_

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/atomics.h"
#include "pathways/transport.h"
#include "pathways/worker.h"
#include "pathways/clock.h"
#include "wire/outbox.h"
#include "wire/wire.h"

#define PW_WORKER_NAME_MAX 64
/* The longest any wait of the worker blocks before it checks the stop
 * flag and the heartbeat clock. */
#define PW_WORKER_POLL_NS 50000000ull
#define PW_WORKER_SEND_TIMEOUT_MS 2000
/* The longest the worker waits for its session socket to close. */
#define PW_WORKER_CLOSE_NS 5000000000ull

/* One id -> pointer table (open addressing, linear probing; ids are never
 * 0). Guarded by the worker's lock. */
typedef struct pw_worker_table_t {
  uint64_t* keys;
  void** values;
  size_t capacity;  /* a power of two, or 0 */
  size_t count;
} pw_worker_table_t;

/* A memory of the session: an allocation, or a failed ALLOC's status. */
typedef struct pw_worker_mem_t {
  uint64_t id;
  uint32_t device;
  size_t size;
  pw_backend_memory_t memory;
  pw_status_t failure;  /* owned; the allocation's error, or NULL */
  uint32_t pins;        /* the table's one plus one per op using it */
} pw_worker_mem_t;

typedef struct pw_worker_exe_t {
  uint64_t id;
  pw_backend_executable_t executable;
  pw_executable_signature_t signature;
  uint32_t pins;
} pw_worker_exe_t;

typedef struct pw_worker_dp_s pw_worker_dp_t;

struct pw_worker_s {
  pw_allocator_t allocator;
  pw_logger_t logger;
  char* url;
  size_t url_size;
  uint8_t* token;
  size_t token_size;
  char name[PW_WORKER_NAME_MAX];
  pw_backend_t backend;
  uint32_t device_count;
  uint64_t retry_min_ns;
  uint64_t retry_max_ns;
  bool no_data_plane;

  pw_atomic_u32_t stop;
  pw_atomic_u32_t running;
  pw_atomic_u64_t n_hellos, n_refusals, n_sessions, n_launches, n_copies, n_refused, n_losses;
  pw_atomic_u64_t n_tls_failures;

  /* TLS (tls.c): the client configuration of every dial, NULL for plain
   * tcp; what its messages name. */
  nng_tls_config* tls;
  bool tls_client_cert;
  char tls_ca_file[256];
  char tls_server_name[256];

  /* The session (valid while |session_open|). */
  nng_socket session;
  bool session_open;
  char peer[96];              /* "controller tcp://..." for messages */
  uint32_t index;
  uint64_t heartbeat_ns;
  uint32_t misses;
  pw_atomic_u32_t dead;       /* no more sends on the session */
  pw_atomic_u32_t closed;     /* the session's pipe went away */
  pw_atomic_u32_t pipe;       /* the session's pipe id, 0 before one */
  /* Heartbeats go out from a thread of their own (session.c), so a slow
   * request on the reader does not silence the worker. */
  pthread_t heartbeat_thread;
  bool heartbeat_running;
  pw_atomic_u32_t heartbeat_stop;
  uint64_t heartbeat_seq;     /* the heartbeat thread's only */
  /* The session's number (1, 2, ...): a launch's DONE goes out only in
   * the session that made it. Written by the run thread at each start. */
  pw_atomic_u64_t session_gen;
  uint64_t drain_ns;          /* pw_worker_options_t.drain_ns (0: 10 s) */
  /* What goes out on the session (outbox.c): the frame, and the flusher
   * that ends a DONE's wait (its fields under out.mu but the thread). */
  pw_wire_outbox_t out;
  uint64_t done_hold_ns;      /* pw_worker_options_t.done_hold_ns */
  pthread_t flush_thread;
  bool flush_running;
  pthread_cond_t flush_cv;
  bool flush_armed;
  bool flush_stop;
  pw_time_t flush_deadline;

  pthread_mutex_t lock;
  pthread_cond_t idle;        /* signalled when |inflight| drops to 0 */
  uint64_t inflight;          /* launches and copies not yet answered */
  struct pw_worker_launch_t* launches;  /* those launches, newest first (dump.c) */
  pw_worker_table_t mems;
  pw_worker_table_t exes;

  pw_worker_dp_t* dp;         /* the data plane, NULL when off */
  /* Per device: the queue_seq of the last launch handed to the backend,
   * over the worker's life (the backend's queues outlive sessions; the
   * reader thread's only). */
  uint64_t* queue_seq;
};

/* worker.c */
void pw__worker_count_refused(pw_worker_t* w);
/* True once pw_worker_stop was called. */
bool pw__worker_stopping(pw_worker_t* w);

/* tls.c */
/* Builds w->tls from |options| (checked against the URL's scheme). */
pw_status_t pw__worker_tls_init(pw_worker_t* w, const pw_worker_options_t* options);
/* A dialer for |url| on |sock| with w->tls set on it (not started). */
pw_status_t pw__worker_tls_dialer(pw_worker_t* w, nng_socket sock, const char* url,
                                  nng_dialer* out_dialer);
/* After a registration without an answer: counts and logs the
 * handshakes that failed on |dialer|. */
void pw__worker_tls_report(pw_worker_t* w, nng_dialer dialer);
/* False (logged, counted as refused) when a worker registered over TLS
 * is told to attach to a session that is not tls+tcp. */
bool pw__worker_tls_session_ok(pw_worker_t* w, const char* url);
void pw__worker_tls_free(pw_worker_t* w);

/* session.c */
/* Serves one session after WELCOME: dials |url|, attaches, reads until
 * loss or stop, then cleans up. */
void pw__worker_session(pw_worker_t* w, const char* url, const void* nonce);
/* One LAUNCH not yet answered (launch.c), as pw_worker_dump shows it:
 * on |w->launches| under |w->lock| from its pins to its DONE. */
typedef struct pw_worker_launch_t pw_worker_launch_t;
/* launch.c: one line about |l| into |buffer| (under w->lock). */
void pw__worker_launch_describe(const pw_worker_launch_t* l, pw_time_t now, char* buffer,
                                size_t capacity);
const pw_worker_launch_t* pw__worker_launch_next(const pw_worker_launch_t* l);

/* outbox.c */
/* Messages waiting in the outbox (under its lock). */
uint32_t pw__worker_outbox_waiting(pw_worker_t* w);
/* Sends |msg| on the session unless it is dead, after what waits in the
 * outbox, in one frame; failures are logged. */
void pw__worker_send(pw_worker_t* w, const pw_wire_msg_t* msg);
/* A launch's DONE: may wait in the outbox while |others| launches or
 * copies of the session still run (see outbox.c). */
void pw__worker_send_held(pw_worker_t* w, const pw_wire_msg_t* msg, uint64_t others);
void pw__worker_outbox_init(pw_worker_t* w);
void pw__worker_outbox_destroy(pw_worker_t* w);
/* Per session, after the socket is open / before it is closed. */
void pw__worker_outbox_start(pw_worker_t* w);
void pw__worker_outbox_stop(pw_worker_t* w);

/* session.c */
/* REPLY (id, status; payload and list may be empty); takes |status|. */
void pw__worker_reply(pw_worker_t* w, uint64_t id, pw_status_t status, const void* payload,
                      size_t payload_size, const uint64_t* list, uint32_t list_count);
/* DONE without timing; takes |status|. */
void pw__worker_done(pw_worker_t* w, uint64_t id, pw_status_t status);
/* Logs a dropped message naming the controller and counts it. */
void pw__worker_drop(pw_worker_t* w, const char* what, pw_status_t status);
void pw__worker_inflight_add(pw_worker_t* w);
void pw__worker_inflight_done(pw_worker_t* w);

/* table.c */
bool pw__worker_table_put(pw_worker_t* w, pw_worker_table_t* t, uint64_t id, void* value);
void* pw__worker_table_get(pw_worker_table_t* t, uint64_t id);
void* pw__worker_table_remove(pw_worker_table_t* t, uint64_t id);
/* Removes and returns some entry, NULL when empty (teardown). */
void* pw__worker_table_pop(pw_worker_table_t* t);
void pw__worker_table_free(pw_worker_t* w, pw_worker_table_t* t);
/* Pins memory |id| for an op: NOT_FOUND naming it, or its ALLOC's
 * failure. Release with pw__worker_mem_unpin. */
pw_status_t pw__worker_mem_pin(pw_worker_t* w, uint64_t id, pw_worker_mem_t** out_mem);
void pw__worker_mem_unpin(pw_worker_t* w, pw_worker_mem_t* mem);
pw_status_t pw__worker_exe_pin(pw_worker_t* w, uint64_t id, pw_worker_exe_t** out_exe);
void pw__worker_exe_unpin(pw_worker_t* w, pw_worker_exe_t* exe);
/* Drops the tables' pins of every memory and executable (session end). */
void pw__worker_tables_clear(pw_worker_t* w);

/* requests.c */
void pw__worker_on_alloc(pw_worker_t* w, const pw_wire_msg_t* msg);
void pw__worker_on_free(pw_worker_t* w, const pw_wire_msg_t* msg);
void pw__worker_on_write(pw_worker_t* w, const pw_wire_msg_t* msg);
void pw__worker_on_read(pw_worker_t* w, const pw_wire_msg_t* msg);
void pw__worker_on_compile(pw_worker_t* w, const pw_wire_msg_t* msg);
void pw__worker_on_load(pw_worker_t* w, const pw_wire_msg_t* msg);
void pw__worker_on_unload(pw_worker_t* w, const pw_wire_msg_t* msg);

/* launch.c */
void pw__worker_on_launch(pw_worker_t* w, const pw_wire_msg_t* msg);

/* copy_local.c: the rows of a COPY (its list of strides). */
typedef struct pw_worker_rows_t {
  size_t size;             /* bytes per row */
  uint32_t levels;
  pw_transport_stride_t strides[PW_TRANSPORT_MAX_STRIDES];
  size_t rows;             /* product of the counts */
  size_t total;            /* rows * size: the packed bytes */
} pw_worker_rows_t;

/* Parses the COPY's size and strides; INVALID_ARGUMENT naming the copy. */
pw_status_t pw__worker_rows_parse(const pw_wire_msg_t* msg, pw_worker_rows_t* out_rows);
/* OUT_OF_RANGE unless every row from |offset| lies inside |mem|; |src|
 * picks the strides' side. */
pw_status_t pw__worker_rows_check(const pw_worker_rows_t* rows, const pw_worker_mem_t* mem,
                                  size_t offset, bool src, const char* what);
/* Copies the rows of |mem| (from |offset|, src-side strides) into the
 * contiguous |packed|, or back (dst-side strides). */
pw_status_t pw__worker_rows_pack(pw_worker_t* w, const pw_worker_rows_t* rows,
                                 const pw_worker_mem_t* mem, size_t offset, void* packed);
pw_status_t pw__worker_rows_unpack(pw_worker_t* w, const pw_worker_rows_t* rows,
                                   const pw_worker_mem_t* mem, size_t offset,
                                   const void* packed);
void pw__worker_on_copy(pw_worker_t* w, const pw_wire_msg_t* msg);

/* copy_remote.c / copy_remote_stub.c: the data plane. */
/* Opens it for a registration (no-op when off or already open). */
pw_status_t pw__worker_dp_open(pw_worker_t* w);
/* This side's address for HELLO (empty when off). */
void pw__worker_dp_address(pw_worker_t* w, const void** out_bytes, size_t* out_size);
/* Fails every outstanding copy with CANCELLED and closes it. */
void pw__worker_dp_close(pw_worker_t* w);
void pw__worker_on_peer(pw_worker_t* w, const pw_wire_msg_t* msg);
/* COPY SEND / RECV: answers DONE (now or when the bytes moved). */
void pw__worker_copy_remote(pw_worker_t* w, const pw_wire_msg_t* msg,
                            const pw_worker_rows_t* rows);
void pw__worker_on_cancel(pw_worker_t* w, const pw_wire_msg_t* msg);

#endif /* PW_WORKER_WORKER_INTERNAL_H_ */
