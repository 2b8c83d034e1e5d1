/* libpathways: the worker process's side of the multi-host runtime.
 *
 * A pw_worker_t hosts one local backend and serves a controller over the
 * protocol of docs/remote.md (tcp, or tls+tcp verifying the controller's
 * certificate): it registers (nng req0, HELLO; WELCOME or REFUSE), attaches a session (pair0, ATTACH first) and then runs what the
 * controller sends, in order, on one reader thread: device memory under
 * controller-assigned ids, compile, load, launches (through launch_host
 * when the backend has it, else one launch per device of the lane, with
 * queue_seq passed through), host reads and writes, copies within the
 * worker and to other workers over the data plane. It answers with REPLY
 * and DONE messages and sends HEARTBEATs carrying every device's health.
 * When the controller is lost (nothing for heartbeat period x misses, the
 * session closed, or BYE) it waits for the backend's launches to finish,
 * frees every memory and executable of the session, and registers again.
 *
 * Every malformed or unexpected message is logged naming the controller,
 * counted (pw_worker_stats_t.refused) and dropped; a message naming an
 * unknown id is answered with NOT_FOUND naming the id. Nothing a
 * controller sends crashes the worker.
 *
 * The bundled binary `pathways-worker` (tools/pathways_worker.c,
 * docs/deploy.md) wraps this API; a host application may embed a worker
 * the same way.
 *
 * Thread-safety: pw_worker_stop and pw_worker_stats may be called from
 * any thread at any time while the worker lives; pw_worker_stop is also
 * async-signal-safe (it only stores an atomic flag, which every wait of
 * the worker checks at least every 100 ms). pw_worker_run runs on one
 * thread at a time; pw_worker_destroy must not run concurrently with any
 * other call.
 */
#ifndef PATHWAYS_WORKER_H_
#define PATHWAYS_WORKER_H_

#include "pathways/allocator.h"
#include "pathways/api.h"
#include "pathways/backend.h"
#include "pathways/log.h"
#include "pathways/status.h"

PW_EXTERN_C_BEGIN

typedef struct pw_worker_s pw_worker_t;

typedef struct pw_worker_options_t {
  size_t struct_size;         /* sizeof(pw_worker_options_t) */
  pw_allocator_t allocator;   /* zero: pw_allocator_system() */
  pw_logger_t logger;         /* zero: pw_logger_default() */
  /* The controller's registration URL ("tcp://host:port"). Required;
   * copied. */
  const char* controller_url;
  /* The shared secret sent in HELLO (at most 4 KiB; may be empty: a
   * controller without a token accepts any worker). Copied. */
  const void* token;
  size_t token_size;
  /* The name the worker registers under (at most 63 bytes; a worker that
   * registers again under a lost one's name takes its place). NULL:
   * "<hostname>-<pid>". Copied. */
  const char* name;
  /* The local backend. The worker owns it from pw_worker_create on, also
   * when create fails, and destroys it in pw_worker_destroy. */
  pw_backend_t backend;
  /* Registration backoff: the first retry after this long, doubling up
   * to retry_max_ns. 0: 200 ms and 2 s. */
  uint64_t retry_min_ns;
  uint64_t retry_max_ns;
  /* True: no data plane (HELLO carries no UCX address; COPY SEND/RECV
   * answer UNIMPLEMENTED). Copies within the worker still work. */
  bool no_data_plane;
  /* -- v2 fields start here -- */
  /* TLS (docs/remote.md, "Security"), for a "tls+tcp://" controller URL,
   * which needs |tls_ca_file|: the controller's certificate must chain to
   * it and carry |tls_server_name| (NULL: the URL's host; a DNS name of
   * its subjectAltName or its CN: mbedTLS 2.28 matches no IP address
   * entry). |tls_cert_file| and |tls_key_file| (PEM, the key unencrypted;
   * both or neither) are this worker's client certificate, which a
   * controller with a CA requires. TLS options with a tcp:// URL are
   * INVALID_ARGUMENT, as is a WELCOME over TLS naming a plain tcp
   * session. The files are read and checked at create; a failed
   * handshake is logged naming the CA file and the server name, and
   * counted (pw_worker_stats_t.tls_failures). Copied. */
  const char* tls_ca_file;
  const char* tls_cert_file;
  const char* tls_key_file;
  const char* tls_server_name;
  /* After a lost session, how long the worker waits for the backend's
   * launches of that session before it registers again anyway (their
   * memory and executables are freed when they finish, and their DONEs
   * are dropped: a new session never sees them). 0: 10 s. */
  uint64_t drain_ns;
  /* How long a DONE may wait for more while other launches of the session
   * still run, so completions that end close together share one network
   * message (docs/remote.md, "Frames"). A DONE goes out at once when
   * nothing else runs; the wait ends early when 64 are waiting. 0: the
   * default, 100 us; UINT64_MAX: never wait. */
  uint64_t done_hold_ns;
} pw_worker_options_t;

#define PW_WORKER_OPTIONS_SIZE_V1 PW_STRUCT_SIZE(pw_worker_options_t, no_data_plane)
#define PW_WORKER_OPTIONS_SIZE_V2 PW_STRUCT_SIZE(pw_worker_options_t, tls_server_name)

/* Counters since create, for tests and operators. */
typedef struct pw_worker_stats_t {
  size_t struct_size;       /* set by the caller */
  uint64_t hellos;          /* HELLO messages sent */
  uint64_t refusals;        /* REFUSE answers received */
  uint64_t sessions;        /* sessions attached */
  uint64_t launches;        /* LAUNCH messages accepted by the backend */
  uint64_t copies;          /* COPY messages completed (any role, any status) */
  uint64_t refused;         /* messages dropped: malformed, unexpected, misdirected */
  uint64_t losses;          /* sessions ended by loss (silence, closed, BYE) */
  /* -- v2 fields start here -- */
  uint64_t tls_failures;    /* TLS handshakes with the controller that failed */
  /* -- v3 fields start here -- */
  uint64_t messages_sent;   /* on sessions, and the frames that carried them */
  uint64_t frames_sent;
} pw_worker_stats_t;

#define PW_WORKER_STATS_SIZE_V1 PW_STRUCT_SIZE(pw_worker_stats_t, losses)
#define PW_WORKER_STATS_SIZE_V2 PW_STRUCT_SIZE(pw_worker_stats_t, tls_failures)
#define PW_WORKER_STATS_SIZE_V3 PW_STRUCT_SIZE(pw_worker_stats_t, frames_sent)

/* Fills |out_options| with the defaults and the current struct_size. */
PW_API void pw_worker_options_init(pw_worker_options_t* out_options);

/* Creates a worker (nothing is dialed yet). |options| is copied; its
 * struct_size must be >= PW_WORKER_OPTIONS_SIZE_V1. INVALID_ARGUMENT for a
 * missing controller URL, a token or name over its maximum, a backend
 * without a vtable or devices, TLS options that do not fit the URL or a
 * TLS file that is missing or bad (named); the backend is then
 * destroyed. The
 * allocator's |self| must outlive the worker. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_worker_create(const pw_worker_options_t* options,
                                                      pw_worker_t** out_worker);

/* Serves controllers until pw_worker_stop: registers (retrying with
 * backoff while the controller is unreachable or refuses), serves the
 * session, and after a loss cleans up and registers again. Returns NULL
 * once stopped (a session in progress is ended with BYE, its launches
 * waited for and its memory freed). FAILED_PRECONDITION when another
 * thread is already running it; UNAVAILABLE when nng itself cannot open a
 * socket. Stopping is final: a stopped worker's run returns at once. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_worker_run(pw_worker_t* worker);

/* Asks pw_worker_run to return (within about 100 ms plus the time the
 * backend needs to finish its launches). Any thread, async-signal-safe;
 * also before pw_worker_run starts (it then returns at once). NULL is a
 * no-op. */
PW_API void pw_worker_stop(pw_worker_t* worker);

/* Fills |out_stats| (its struct_size set by the caller, >=
 * PW_WORKER_STATS_SIZE_V1). Any thread. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_worker_stats(pw_worker_t* worker,
                                                     pw_worker_stats_t* out_stats);

/* Destroys the backend and frees the worker. pw_worker_run must have
 * returned. NULL is a no-op. */
PW_API void pw_worker_destroy(pw_worker_t* worker);

/* What the worker is doing, one line each: its state (registering, or the
 * session: controller, index, session number), per device the last
 * queue number handed to the backend and the backend's health, every
 * launch not yet answered (id, executable, devices, gang, parts still
 * running, for how long), copies in flight, memories and executables
 * held, and completions waiting in the outbox. For a worker that looks
 * stuck: it reads other threads' state under their locks, briefly.
 * `pathways-worker` prints it to stderr on SIGUSR1. INVALID_ARGUMENT for
 * NULL arguments. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_worker_dump(pw_worker_t* worker, pw_dump_line_fn_t fn,
                                                     void* user);

PW_EXTERN_C_END

#endif /* PATHWAYS_WORKER_H_ */
