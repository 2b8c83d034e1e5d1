/* TLS configurations for the control plane's nng sockets (see
 * wire_tls.h). */
#define _POSIX_C_SOURCE 200809L
#include "wire/wire_tls.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <mbedtls/error.h>
#include <mbedtls/pk.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/version.h>
#include <mbedtls/x509_crt.h>

#include "pathways/allocator.h"

/* A file's bytes, NUL-terminated (mbedTLS and nng take PEM as a C
 * string). */
typedef struct pw_tls_pem_t {
  char* text;
  size_t size;      /* bytes read, without the NUL */
  size_t capacity;  /* allocated: size + 1 */
} pw_tls_pem_t;

static pw_status_t pw_tls_read(pw_allocator_t a, const char* who, const char* what,
                               const char* path, pw_tls_pem_t* out) {
  memset(out, 0, sizeof(*out));
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: TLS %s file '%s': cannot open: %s",
                          who, what, path, strerror(errno));
  }
  struct stat st;
  pw_status_t status = NULL;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%s: TLS %s file '%s' is not a regular file", who, what, path);
  } else if ((uint64_t)st.st_size > PW_WIRE_TLS_MAX_FILE) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%s: TLS %s file '%s' has %lld bytes (at most %u)", who, what, path,
                            (long long)st.st_size, PW_WIRE_TLS_MAX_FILE);
  }
  size_t capacity = status == NULL ? (size_t)st.st_size + 1 : 0;
  if (status == NULL) status = pw_allocator_malloc(a, capacity, 0, (void**)&out->text);
  if (status == NULL) {
    out->capacity = capacity;
    out->size = fread(out->text, 1, capacity - 1, f);
    out->text[out->size] = '\0';
    if (ferror(f)) {
      status = pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: TLS %s file '%s': read failed",
                              who, what, path);
    } else if (strstr(out->text, "-----BEGIN ") == NULL) {
      status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "%s: TLS %s file '%s' is not PEM (no '-----BEGIN' line)", who,
                              what, path);
    }
  }
  fclose(f);
  if (status != NULL && out->text != NULL) {
    pw_allocator_free(a, out->text, out->capacity);
    memset(out, 0, sizeof(*out));
  }
  return status;
}

static void pw_tls_pem_free(pw_allocator_t a, pw_tls_pem_t* pem) {
  if (pem->text == NULL) return;
  mbedtls_platform_zeroize(pem->text, pem->capacity);
  pw_allocator_free(a, pem->text, pem->capacity);
  memset(pem, 0, sizeof(*pem));
}

static pw_status_t pw_tls_mbed_error(int rv, const char* who, const char* what, const char* path,
                                     const char* doing) {
  char text[160];
  mbedtls_strerror(rv, text, sizeof(text));
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: TLS %s file '%s': %s: %s (-0x%04x)", who,
                        what, path, doing, text, (unsigned)-rv);
}

#if MBEDTLS_VERSION_NUMBER >= 0x03000000
/* mbedTLS 3 wants a random source for key checks (not built here: Debian
 * 12 has 2.28). */
static int pw_tls_random(void* unused, unsigned char* out, size_t size) {
  (void)unused;
  return getrandom(out, size, 0) == (ssize_t)size ? 0 : -1;
}
#define PW_TLS_PARSE_KEY(pk, buf, n) \
  mbedtls_pk_parse_key((pk), (buf), (n), NULL, 0, pw_tls_random, NULL)
#define PW_TLS_CHECK_PAIR(pub, prv) mbedtls_pk_check_pair((pub), (prv), pw_tls_random, NULL)
#define PW_TLS_CRT_PK(crt) (&(crt)->MBEDTLS_PRIVATE(pk))
#else
#define PW_TLS_PARSE_KEY(pk, buf, n) mbedtls_pk_parse_key((pk), (buf), (n), NULL, 0)
#define PW_TLS_CHECK_PAIR(pub, prv) mbedtls_pk_check_pair((pub), (prv))
#define PW_TLS_CRT_PK(crt) (&(crt)->pk)
#endif

/* Parses every certificate of |pem|; with |own|, also checks that the
 * first has not expired. */
static pw_status_t pw_tls_check_certs(const pw_tls_pem_t* pem, bool own, const char* who,
                                      const char* what, const char* path,
                                      mbedtls_x509_crt* crt) {
  int rv = mbedtls_x509_crt_parse(crt, (const unsigned char*)pem->text, pem->size + 1);
  if (rv < 0) return pw_tls_mbed_error(rv, who, what, path, "no certificate parses");
  if (rv > 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: TLS %s file '%s': %d of its certificates do not parse", who, what,
                          path, rv);
  }
#if defined(MBEDTLS_HAVE_TIME_DATE)
  if (own && mbedtls_x509_time_is_past(&crt->valid_to)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: TLS %s file '%s': the certificate expired on "
                          "%04d-%02d-%02d %02d:%02d:%02d UTC",
                          who, what, path, crt->valid_to.year, crt->valid_to.mon,
                          crt->valid_to.day, crt->valid_to.hour, crt->valid_to.min,
                          crt->valid_to.sec);
  }
#else
  (void)own;
#endif
  return NULL;
}

/* The certificate parses, the key parses, and the key is the
 * certificate's. */
static pw_status_t pw_tls_check_own(const pw_tls_pem_t* cert, const pw_tls_pem_t* key,
                                    const pw_wire_tls_files_t* files, const char* who) {
  mbedtls_x509_crt crt;
  mbedtls_pk_context pk;
  mbedtls_x509_crt_init(&crt);
  mbedtls_pk_init(&pk);
  pw_status_t status = pw_tls_check_certs(cert, true, who, "certificate", files->cert_file, &crt);
  if (status == NULL) {
    int rv = PW_TLS_PARSE_KEY(&pk, (const unsigned char*)key->text, key->size + 1);
    if (rv == MBEDTLS_ERR_PK_PASSWORD_REQUIRED || rv == MBEDTLS_ERR_PK_PASSWORD_MISMATCH) {
      status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "%s: TLS key file '%s' is encrypted: give an unencrypted key "
                              "(readable only by the service's user)",
                              who, files->key_file);
    } else if (rv != 0) {
      status = pw_tls_mbed_error(rv, who, "key", files->key_file, "no private key parses");
    } else if (PW_TLS_CHECK_PAIR(PW_TLS_CRT_PK(&crt), &pk) != 0) {
      status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "%s: TLS key file '%s' is not the private key of certificate "
                              "file '%s'",
                              who, files->key_file, files->cert_file);
    }
  }
  mbedtls_pk_free(&pk);
  mbedtls_x509_crt_free(&crt);
  return status;
}

static pw_status_t pw_tls_nng(int rv, const char* who, const char* what, const char* path) {
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: TLS %s '%s': nng refused it: %s", who,
                        what, path, nng_strerror(rv));
}

/* Loads the checked files into |cfg|. */
static pw_status_t pw_tls_load(nng_tls_config* cfg, bool server, const pw_wire_tls_files_t* files,
                               pw_allocator_t a, const char* who) {
  pw_tls_pem_t ca = {0}, cert = {0}, key = {0};
  pw_status_t status = NULL;
  if (files->ca_file != NULL) {
    status = pw_tls_read(a, who, "CA", files->ca_file, &ca);
    if (status == NULL) {
      mbedtls_x509_crt crt;
      mbedtls_x509_crt_init(&crt);
      status = pw_tls_check_certs(&ca, false, who, "CA", files->ca_file, &crt);
      mbedtls_x509_crt_free(&crt);
    }
    int rv = status == NULL ? nng_tls_config_ca_chain(cfg, ca.text, NULL) : 0;
    if (rv != 0) status = pw_tls_nng(rv, who, "CA file", files->ca_file);
  }
  if (status == NULL && files->cert_file != NULL) {
    status = pw_tls_read(a, who, "certificate", files->cert_file, &cert);
    if (status == NULL) status = pw_tls_read(a, who, "key", files->key_file, &key);
    if (status == NULL) status = pw_tls_check_own(&cert, &key, files, who);
    int rv = status == NULL ? nng_tls_config_own_cert(cfg, cert.text, key.text, NULL) : 0;
    if (rv != 0) status = pw_tls_nng(rv, who, "certificate file", files->cert_file);
  }
  if (status == NULL) {
    nng_tls_auth_mode mode = server && files->ca_file == NULL ? NNG_TLS_AUTH_MODE_NONE
                                                              : NNG_TLS_AUTH_MODE_REQUIRED;
    int rv = nng_tls_config_auth_mode(cfg, mode);
    if (rv == 0 && !server) rv = nng_tls_config_server_name(cfg, files->server_name);
    if (rv != 0) {
      status = pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: TLS %s: %s", who,
                              server ? "client authentication" : "server name",
                              nng_strerror(rv));
    }
  }
  pw_tls_pem_free(a, &ca);
  pw_tls_pem_free(a, &cert);
  pw_tls_pem_free(a, &key);
  return status;
}

static pw_status_t pw_tls_check_files(bool server, const pw_wire_tls_files_t* f, const char* who) {
  if ((f->cert_file == NULL) != (f->key_file == NULL)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: TLS needs a certificate file and a key file together (got only "
                          "the %s)", who, f->cert_file != NULL ? "certificate" : "key");
  }
  if (server && f->cert_file == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: a TLS server needs its certificate and key files", who);
  }
  if (!server && f->ca_file == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: a TLS client needs a CA file to verify the server's certificate",
                          who);
  }
  if (!server && (f->server_name == NULL || f->server_name[0] == '\0')) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: a TLS client needs the server name its certificate must carry",
                          who);
  }
  return NULL;
}

pw_status_t pw__wire_tls_config(bool server, const pw_wire_tls_files_t* files,
                                pw_allocator_t allocator, const char* who,
                                nng_tls_config** out_config) {
  *out_config = NULL;
  PW_RETURN_IF_ERROR(pw_tls_check_files(server, files, who));
  nng_tls_config* cfg = NULL;
  int rv = nng_tls_config_alloc(&cfg, server ? NNG_TLS_MODE_SERVER : NNG_TLS_MODE_CLIENT);
  if (rv == NNG_ENOTSUP) {
    return pw_status_make(PW_STATUS_UNIMPLEMENTED, "%s: this nng has no TLS engine (%s)", who,
                          nng_tls_engine_name());
  }
  if (rv != 0) {
    return pw_status_make(rv == NNG_ENOMEM ? PW_STATUS_RESOURCE_EXHAUSTED : PW_STATUS_UNAVAILABLE,
                          "%s: TLS configuration: %s", who, nng_strerror(rv));
  }
  pw_status_t status = pw_tls_load(cfg, server, files, allocator, who);
  if (status != NULL) {
    nng_tls_config_free(cfg);
    return status;
  }
  *out_config = cfg;
  return NULL;
}

/* The statistics of the listener or dialer (|kind|) with |id|. Not
 * nng_stat_find_listener / _dialer: in nng 1.5.2 they return the first
 * listener (dialer) of the snapshot whatever the id (docs/toolchain.md). */
static nng_stat* pw_tls_find(nng_stat* snapshot, const char* kind, int id) {
  if (snapshot == NULL || id <= 0) return NULL;
  for (nng_stat* item = nng_stat_child(snapshot); item != NULL; item = nng_stat_next(item)) {
    if (strcmp(nng_stat_name(item), kind) != 0) continue;
    for (nng_stat* c = nng_stat_child(item); c != NULL; c = nng_stat_next(c)) {
      if (strcmp(nng_stat_name(c), "id") == 0 && nng_stat_value(c) == (uint64_t)id) return item;
    }
  }
  return NULL;
}

static uint64_t pw_tls_stat(nng_stat* item, const char* name) {
  for (nng_stat* c = item != NULL ? nng_stat_child(item) : NULL; c != NULL; c = nng_stat_next(c)) {
    if (strcmp(nng_stat_name(c), name) == 0) return nng_stat_value(c);
  }
  return 0;
}

uint64_t pw__wire_tls_listener_failures(nng_stat* snapshot, nng_listener listener) {
  return pw_tls_stat(pw_tls_find(snapshot, "listener", nng_listener_id(listener)), "auth");
}

uint64_t pw__wire_tls_dialer_failures(nng_stat* snapshot, nng_dialer dialer) {
  return pw_tls_stat(pw_tls_find(snapshot, "dialer", nng_dialer_id(dialer)), "auth");
}

uint64_t pw__wire_tls_dialer_closed(nng_stat* snapshot, nng_dialer dialer) {
  return pw_tls_stat(pw_tls_find(snapshot, "dialer", nng_dialer_id(dialer)), "other");
}

bool pw__wire_url_is_tls(const char* url) {
  return url != NULL && strncmp(url, "tls+tcp://", 10) == 0;
}

const char* pw__wire_tls_engine(void) { return nng_tls_engine_description(); }
