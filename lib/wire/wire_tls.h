/* Internal: TLS on the control plane's nng sockets (docs/remote.md,
 * "Security"), shared by the controller (lib/remote) and the worker
 * (lib/worker).
 *
 * pw__wire_tls_config reads the PEM files itself and checks them with
 * mbedTLS (the engine of Debian's nng) before nng sees them: nng says
 * only "Cryptographic error" for a bad file and accepts a certificate
 * with another key's private key (the mismatch would show only as failed
 * handshakes). Every error names the file and what is wrong with it.
 *
 * nng 1.5.2 reports a failed handshake to nobody: the connection is
 * dropped and the listener's or dialer's "auth" statistic grows (no peer
 * address is kept). pw__wire_tls_failures reads that counter, which is
 * how a controller logs the peers it refused and a worker the
 * controllers it could not verify. */
#ifndef PW_WIRE_WIRE_TLS_H_
#define PW_WIRE_WIRE_TLS_H_

#include <stdbool.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "pathways/allocator.h"
#include "pathways/status.h"

/* The largest PEM file read (a CA bundle included). */
#define PW_WIRE_TLS_MAX_FILE (1u << 20)

typedef struct pw_wire_tls_files_t {
  /* PEM certificates the peer's chain must end in. Server: NULL means
   * peers are not asked for a certificate; given, one is required
   * (NNG_TLS_AUTH_MODE_REQUIRED). Client: required. */
  const char* ca_file;
  /* This side's certificate (chain, PEM) and its unencrypted private key
   * (PEM): both or neither; a server needs both. */
  const char* cert_file;
  const char* key_file;
  /* Client: the name the server's certificate must carry (a DNS name of
   * its subjectAltName, or its CN). Required: with a configuration of its
   * own and no name, nng 1.5.2 checks no name at all. */
  const char* server_name;
} pw_wire_tls_files_t;

/* Builds an nng TLS configuration (|server|: NNG_TLS_MODE_SERVER) from
 * |files|; |who| prefixes messages ("pw_remote_create"); the files are
 * read into buffers of |allocator| (the key's is wiped before it is
 * freed). The caller owns
 * |*out_config| (nng_tls_config_free; a listener or dialer it is set on
 * holds its own reference). INVALID_ARGUMENT naming the file for a
 * missing, unreadable, oversized or non-PEM file, a certificate or key
 * that does not parse, an encrypted key, an expired certificate, a key
 * that is not the certificate's; UNIMPLEMENTED when nng has no TLS. */
pw_status_t pw__wire_tls_config(bool server, const pw_wire_tls_files_t* files,
                                pw_allocator_t allocator, const char* who,
                                nng_tls_config** out_config);

/* Handshakes that failed on |listener| / |dialer| since it was made (nng's
 * "auth" statistic), read from |snapshot| (nng_stats_get); 0 when it is
 * not there. */
uint64_t pw__wire_tls_listener_failures(nng_stat* snapshot, nng_listener listener);
uint64_t pw__wire_tls_dialer_failures(nng_stat* snapshot, nng_dialer dialer);
/* The dialer's "other" errors: a TLS server that closes the connection
 * during the handshake (it wanted a client certificate) counts there. */
uint64_t pw__wire_tls_dialer_closed(nng_stat* snapshot, nng_dialer dialer);

/* True for a "tls+tcp://" URL. */
bool pw__wire_url_is_tls(const char* url);

/* "mbed TLS 2.28.0" (nng's engine), for logs. */
const char* pw__wire_tls_engine(void);

#endif /* PW_WIRE_WIRE_TLS_H_ */
