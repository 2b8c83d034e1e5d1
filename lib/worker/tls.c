#define _POSIX_C_SOURCE 200809L
/* TLS toward the controller (docs/remote.md, "Security"): the client
 * configuration built at create, the dialers that carry it, and the log
 * of failed handshakes, read from nng's statistics (nng 1.5.2 reports
 * them nowhere else). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pathways/struct_size.h"
#include "wire/wire_nng.h"
#include "wire/wire_tls.h"
#include "worker/worker_internal.h"

/* The host of |url| (no brackets), for the default server name. */
static pw_status_t pw_worker_tls_host(const char* url, char* out, size_t capacity) {
  nng_url* parsed = NULL;
  int rv = nng_url_parse(&parsed, url);
  if (rv != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_worker_create: controller URL '%s': %s",
                          url, nng_strerror(rv));
  }
  int n = snprintf(out, capacity, "%s", parsed->u_hostname ? parsed->u_hostname : "");
  nng_url_free(parsed);
  if (n <= 0 || (size_t)n >= capacity) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_worker_create: controller URL '%s' has no usable host for the TLS "
                          "server name (set tls_server_name)", url);
  }
  return NULL;
}

pw_status_t pw__worker_tls_init(pw_worker_t* w, const pw_worker_options_t* o) {
  pw_wire_tls_files_t files = {0};
  if (PW_STRUCT_HAS_FIELD(o, pw_worker_options_t, tls_server_name)) {
    files.ca_file = o->tls_ca_file;
    files.cert_file = o->tls_cert_file;
    files.key_file = o->tls_key_file;
    files.server_name = o->tls_server_name;
  }
  bool any = files.ca_file || files.cert_file || files.key_file || files.server_name;
  bool tls_url = pw__wire_url_is_tls(o->controller_url);
  if (!tls_url) {
    if (!any) return NULL;
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_worker_create: TLS options are set but the controller URL '%s' is "
                          "not tls+tcp://", o->controller_url);
  }
  if (files.ca_file == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_worker_create: controller URL '%s' is tls+tcp but no tls_ca_file "
                          "is given to verify the controller's certificate", o->controller_url);
  }
  if (files.server_name == NULL) {
    PW_RETURN_IF_ERROR(
        pw_worker_tls_host(o->controller_url, w->tls_server_name, sizeof(w->tls_server_name)));
  } else if ((size_t)snprintf(w->tls_server_name, sizeof(w->tls_server_name), "%s",
                              files.server_name) >= sizeof(w->tls_server_name) ||
             files.server_name[0] == '\0') {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_worker_create: tls_server_name must be 1 to %zu bytes",
                          sizeof(w->tls_server_name) - 1);
  }
  files.server_name = w->tls_server_name;
  snprintf(w->tls_ca_file, sizeof(w->tls_ca_file), "%s", files.ca_file);
  w->tls_client_cert = files.cert_file != NULL;
  return pw__wire_tls_config(false, &files, w->allocator, "pw_worker_create", &w->tls);
}

pw_status_t pw__worker_tls_dialer(pw_worker_t* w, nng_socket sock, const char* url,
                                  nng_dialer* out_dialer) {
  nng_dialer d;
  int rv = nng_dialer_create(&d, sock, url);
  if (rv == 0 && w->tls != NULL) rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, w->tls);
  if (rv != 0) return pw__wire_nng_status(rv, "dialer for", url);
  *out_dialer = d;
  return NULL;
}

void pw__worker_tls_report(pw_worker_t* w, nng_dialer dialer) {
  if (w->tls == NULL) return;
  nng_stat* snapshot = NULL;
  if (nng_stats_get(&snapshot) != 0) return;
  uint64_t failed = pw__wire_tls_dialer_failures(snapshot, dialer);
  uint64_t closed = w->tls_client_cert ? 0 : pw__wire_tls_dialer_closed(snapshot, dialer);
  nng_stats_free(snapshot);
  if (failed > 0) {
    pw_atomic_fetch_add_u64(&w->n_tls_failures, failed);
    pw_log(&w->logger, PW_LOG_WARN, "worker",
           "worker %s: %" PRIu64 " TLS handshake(s) with %s failed: its certificate does not "
           "chain to CA file '%s' or does not name '%s', or it refused this worker's "
           "certificate%s",
           w->name, failed, w->peer, w->tls_ca_file, w->tls_server_name,
           w->tls_client_cert ? "" : " (none given)");
  } else if (closed > 0) {
    pw_atomic_fetch_add_u64(&w->n_tls_failures, closed);
    pw_log(&w->logger, PW_LOG_WARN, "worker",
           "worker %s: %s closed %" PRIu64 " connection(s) during the TLS handshake: it may "
           "require a client certificate (tls_cert_file, tls_key_file)",
           w->name, w->peer, closed);
  }
}

bool pw__worker_tls_session_ok(pw_worker_t* w, const char* url) {
  if (w->tls == NULL || pw__wire_url_is_tls(url)) return true;
  pw__worker_drop(w, "WELCOME",
                  pw_status_make(PW_STATUS_UNAUTHENTICATED,
                                 "registered over TLS, told to attach to '%s', which is not "
                                 "tls+tcp",
                                 url));
  return false;
}

void pw__worker_tls_free(pw_worker_t* w) {
  if (w->tls != NULL) nng_tls_config_free(w->tls);
  w->tls = NULL;
}
