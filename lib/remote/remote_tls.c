/* TLS on the controller's listeners (docs/remote.md, "Security"): the
 * server configuration, the check of a HELLO's pipe, and the log of the
 * handshakes nng refused, read from its statistics because nng 1.5.2
 * tells nobody else. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pathways/struct_size.h"
#include "remote/remote_internal.h"
#include "wire/wire_tls.h"

#define PW_LOG_SUB "remote"

/* How often the monitor reads nng's statistics (a snapshot of every
 * socket's: not each heartbeat). */
#define PW_REMOTE_TLS_WATCH_NS 250000000

pw_status_t pw__remote_tls_init(pw_remote_t* remote, const pw_remote_options_t* options,
                                const char* listen_url) {
  pw_wire_tls_files_t files = {0};
  if (PW_STRUCT_HAS_FIELD(options, pw_remote_options_t, tls_ca_file)) {
    files.cert_file = options->tls_cert_file;
    files.key_file = options->tls_key_file;
    files.ca_file = options->tls_ca_file;
  }
  bool wanted = files.cert_file != NULL || files.key_file != NULL || files.ca_file != NULL;
  remote->scheme = wanted ? "tls+tcp" : "tcp";
  if (!wanted) {
    if (pw__wire_url_is_tls(listen_url)) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "pw_remote_create: listen_url '%s' is tls+tcp but no "
                            "tls_cert_file and tls_key_file are given",
                            listen_url);
    }
    return NULL;
  }
  PW_RETURN_IF_ERROR(
      pw__wire_tls_config(true, &files, remote->allocator, "pw_remote_create", &remote->tls));
  remote->tls_verify = files.ca_file != NULL;
  if (!remote->tls_verify && remote->token_size == 0) {
    pw_log(&remote->logger, PW_LOG_WARN, PW_LOG_SUB,
           "TLS without a CA file and without a token: any worker is accepted");
  }
  return NULL;
}

pw_status_t pw__remote_tls_listener(pw_remote_t* remote, nng_listener listener,
                                    const char* what) {
  if (remote->tls == NULL) return NULL;
  int rv = nng_listener_set_ptr(listener, NNG_OPT_TLS_CONFIG, remote->tls);
  if (rv != 0) {
    return pw_status_make(PW_STATUS_INTERNAL, "remote: TLS configuration of the %s: %s", what,
                          nng_strerror(rv));
  }
  return NULL;
}

bool pw__remote_tls_peer_ok(const pw_remote_t* remote, nng_pipe pipe) {
  if (!remote->tls_verify) return true;
  bool verified = false;
  return nng_pipe_get_bool(pipe, NNG_OPT_TLS_VERIFIED, &verified) == 0 && verified;
}

static void pw_remote_tls_log(pw_remote_t* remote, const char* listener, uint64_t count) {
  pw_log(&remote->logger, PW_LOG_WARN, PW_LOG_SUB,
         "%s refused %" PRIu64 " connection(s) that failed the TLS handshake: %s"
         "a plain tcp peer, or a worker that does not trust this controller's certificate "
         "(nng keeps no peer address)",
         listener, count,
         remote->tls_verify ? "no client certificate, one the CA did not sign, " : "");
}

void pw__remote_tls_watch(pw_remote_t* remote, pw_time_t now) {
  if (remote->tls == NULL || now - remote->tls_checked_at < PW_REMOTE_TLS_WATCH_NS) return;
  remote->tls_checked_at = now;
  nng_stat* snapshot = NULL;
  if (nng_stats_get(&snapshot) != 0) return;
  char what[400];
  uint64_t n = pw__wire_tls_listener_failures(snapshot, remote->reg_listener);
  if (n > remote->tls_reg_refused) {
    snprintf(what, sizeof(what), "registration listener %s", remote->url);
    pw_remote_tls_log(remote, what, n - remote->tls_reg_refused);
    remote->tls_reg_refused = n;
  }
  pw_remote_worker_t* ws[PW_REMOTE_MAX_WORKERS];
  pthread_mutex_lock(&remote->mu);
  uint32_t count = remote->worker_count;
  memcpy(ws, remote->workers, count * sizeof(ws[0]));
  pthread_mutex_unlock(&remote->mu);
  for (uint32_t i = 0; i < count; ++i) {
    pw_remote_worker_t* w = ws[i];
    pthread_mutex_lock(&w->mu);
    nng_listener l = w->session_listener;
    uint64_t seen = w->tls_refused;
    pthread_mutex_unlock(&w->mu);
    n = nng_listener_id(l) > 0 ? pw__wire_tls_listener_failures(snapshot, l) : 0;
    if (n <= seen) continue;
    pthread_mutex_lock(&w->mu);
    bool same = nng_listener_id(w->session_listener) == nng_listener_id(l);
    if (same) w->tls_refused = n;
    pthread_mutex_unlock(&w->mu);
    if (!same) continue;
    snprintf(what, sizeof(what), "session listener of %s", w->label);
    pw_remote_tls_log(remote, what, n - seen);
  }
  nng_stats_free(snapshot);
}
