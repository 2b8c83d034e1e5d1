/* libpathways: remote slices, the controller's side (docs/remote.md).
 *
 * A pw_remote_t listens for worker processes (pathways-worker, or any
 * program running the worker loop of libpathways), authenticates
 * them with a shared token and/or TLS client certificates, and gives the runtime one proxy backend per
 * worker (pw_remote_backend) and a transport that moves shard bytes
 * between workers on their UCX data plane (pw_remote_transport). To the
 * runtime a proxy is a backend like any other: slices are declared over
 * its devices, and launches, copies and health go to the worker over nng.
 * A proxy is queue-ordered and offers launch_host when the worker's
 * backend is queue-ordered: the runtime then sends one LAUNCH per (op,
 * worker) ahead of input readiness, and a chain of ops on a remote slice
 * pays no round trip per op.
 *
 * Typical use:
 *   pw_remote_options_t ro;  pw_remote_options_init(&ro);
 *   ro.token = secret;  ro.token_size = strlen(secret);
 *   pw_remote_t* remote;  pw_remote_create(&ro, &remote);
 *   ... start workers with --controller pw_remote_url(remote) ...
 *   pw_remote_wait_workers(remote, 4, 30 s);
 *   pw_backend_t backends[4];  pw_remote_backend(remote, i, &backends[i]);
 *   pw_remote_transport(remote, &options.transport);
 *   pw_runtime_create(&options, &runtime);   (owns proxies and transport)
 *   ...
 *   pw_runtime_destroy(runtime);  pw_remote_destroy(remote);
 *
 * Failure: a worker that closes its connection is lost at once; one that
 * is silent (stopped, partitioned) after heartbeat_ns x heartbeat_misses.
 * A lost worker's devices report PW_DEVICE_FAILED and everything
 * outstanding on it resolves with UNAVAILABLE naming it, so the runtime's
 * health thread loses its slices (pathways/runtime.h, "Failure"). A
 * worker that registers again under the same name takes its old index
 * and proxy back: its devices turn healthy, the slices return at the next
 * health check, and memory of the earlier session stays lost.
 *
 * Threading: every call may be made from any thread; destroy once, after
 * the runtime that owns the proxies and the transport is destroyed. */
#ifndef PATHWAYS_REMOTE_H_
#define PATHWAYS_REMOTE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pathways/allocator.h"
#include "pathways/api.h"
#include "pathways/backend.h"
#include "pathways/clock.h"
#include "pathways/log.h"
#include "pathways/status.h"
#include "pathways/transport.h"

PW_EXTERN_C_BEGIN

typedef struct pw_remote_s pw_remote_t;

/* Workers one controller serves at most. */
#define PW_REMOTE_MAX_WORKERS 256u

typedef struct pw_remote_options_t {
  size_t struct_size;          /* sizeof(pw_remote_options_t) */
  pw_allocator_t allocator;    /* zero: the system allocator */
  pw_logger_t logger;          /* zero: pw_logger_default() */
  /* nng URL workers register at; NULL: "tcp://127.0.0.1:0" (a free port,
   * see pw_remote_url). Sessions listen on fresh ports of the same host. */
  const char* listen_url;
  /* The shared secret workers must present; size 0: any worker is
   * accepted (loopback tests only). Copied. */
  const void* token;
  size_t token_size;
  /* Heartbeat period both ways; 0: 100 ms. */
  pw_duration_t heartbeat_ns;
  /* Periods without a message before the peer is lost; 0: 5. */
  uint32_t heartbeat_misses;
  /* Longest wait of a synchronous request (compile, load, host copies);
   * 0: 30 s. A request that times out is DEADLINE_EXCEEDED. */
  pw_duration_t call_timeout_ns;
  /* -- v2 fields start here -- */
  /* TLS on the control plane (docs/remote.md, "Security"). With
   * |tls_cert_file| and |tls_key_file| (PEM; the key unencrypted) the
   * registration and session listeners are tls+tcp (a tcp:// listen_url
   * becomes tls+tcp://, and pw_remote_url says so) and workers verify
   * this certificate. With |tls_ca_file| too, every worker must present a
   * client certificate that CA signed (mutual TLS): a peer without one,
   * or with another CA's, a plain tcp peer and a worker that does not
   * trust this certificate fail the handshake, are refused by nng and
   * logged here (with the listener; nng 1.5 keeps no peer address). The
   * token, when also set, is still checked: a worker then needs both.
   * The files are read and checked at create (INVALID_ARGUMENT naming
   * the file: missing, not PEM, expired, a key that is not the
   * certificate's); the paths are not kept. NULL: plain tcp. */
  const char* tls_cert_file;
  const char* tls_key_file;
  const char* tls_ca_file;
} pw_remote_options_t;

#define PW_REMOTE_OPTIONS_SIZE_V1 PW_STRUCT_SIZE(pw_remote_options_t, call_timeout_ns)
#define PW_REMOTE_OPTIONS_SIZE_V2 PW_STRUCT_SIZE(pw_remote_options_t, tls_ca_file)

PW_API void pw_remote_options_init(pw_remote_options_t* out_options);

/* Starts listening. INVALID_ARGUMENT for a bad URL or option (a TLS file
 * named), UNAVAILABLE when the address cannot be bound (naming nng's
 * error). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_remote_create(const pw_remote_options_t* options,
                                                       pw_remote_t** out_remote);

/* Says goodbye to every worker (BYE: they drop the session's work and
 * register again with the next controller) and frees. After the runtime
 * using its proxies is destroyed. NULL is a no-op. */
PW_API void pw_remote_destroy(pw_remote_t* remote);

/* The registration URL with the bound port ("tcp://127.0.0.1:40123", or
 * "tls+tcp://..." with TLS). Valid while |remote| lives. */
PW_API const char* pw_remote_url(const pw_remote_t* remote);

/* Waits until at least |count| workers are attached. DEADLINE_EXCEEDED
 * naming how many came when |timeout| passes first. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_remote_wait_workers(pw_remote_t* remote,
                                                             uint32_t count,
                                                             pw_duration_t timeout);

/* Workers ever registered (indices 0 .. count - 1, in registration
 * order; a lost worker keeps its index). */
PW_API uint32_t pw_remote_worker_count(pw_remote_t* remote);

typedef struct pw_remote_worker_info_t {
  size_t struct_size;       /* set by the caller */
  char name[64];
  char backend[32];         /* the worker's backend name */
  char kind[32];            /* its device kind */
  uint32_t device_count;
  uint32_t pid;
  bool attached;            /* false while lost or not yet attached */
  uint32_t sessions;        /* sessions attached so far (1 + returns) */
  uint32_t losses;
  bool data_plane;          /* the worker has a UCX address */
  /* Bytes of host copies (buffers to and from the host, rows through the
   * controller) moved on the data plane, and in WRITE / READ requests on
   * the control plane (below 64 KiB, or without a data plane). */
  uint64_t host_bytes_data_plane;
  uint64_t host_bytes_control_plane;
  /* -- v2 fields start here -- */
  /* Control-plane traffic with this worker, all sessions: messages and
   * the network messages (frames) that carried them. Messages issued
   * together (the launches a frame of completions releases, completions
   * that end while more launches run) share a frame (docs/remote.md). */
  uint64_t messages_sent;
  uint64_t frames_sent;
  uint64_t messages_received;
  uint64_t frames_received;
} pw_remote_worker_info_t;

#define PW_REMOTE_WORKER_INFO_SIZE_V1 \
  PW_STRUCT_SIZE(pw_remote_worker_info_t, host_bytes_control_plane)
#define PW_REMOTE_WORKER_INFO_SIZE_V2 PW_STRUCT_SIZE(pw_remote_worker_info_t, frames_received)

/* NOT_FOUND for an index >= pw_remote_worker_count. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_remote_worker_info(pw_remote_t* remote,
                                                            uint32_t index,
                                                            pw_remote_worker_info_t* out_info);

/* A proxy backend for worker |index| (registered, attached or not): its
 * devices are the worker's, device_info's host is index + 1. Hand it to
 * a runtime, which owns it (its destroy detaches; the worker stays
 * registered). NOT_FOUND for an unknown index. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_remote_backend(pw_remote_t* remote, uint32_t index,
                                                        pw_backend_t* out_backend);

/* True if |backend| came from pw_remote_backend (of any remote). */
PW_API bool pw_remote_backend_is_remote(pw_backend_t backend);

/* A transport for the runtime: copies within one worker run there, copies
 * between workers go on the workers' UCX data plane (worker to worker,
 * never through the controller), copies between a worker and a backend
 * of this process through host copies, and copies between local backends
 * through an inproc transport. Owned by whoever it is handed to. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_remote_transport(pw_remote_t* remote,
                                                          pw_transport_t* out_transport);

/* Test hook: closes worker |index|'s session as if the network cut it
 * (it is lost; the worker registers again). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_remote_disconnect(pw_remote_t* remote,
                                                           uint32_t index);

PW_EXTERN_C_END

#endif /* PATHWAYS_REMOTE_H_ */
