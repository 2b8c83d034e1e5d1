/* TLS on the control plane (docs/remote.md, "Security"), with throwaway
 * certificates the openssl CLI makes in a temporary directory: a CA, the
 * controller's certificate, a worker's client certificate, and a second
 * CA with a certificate of its own (a stranger's).
 *
 * Create time: a missing file, a file that is not PEM, a key that is not
 * the certificate's, an expired certificate, a CA without a certificate,
 * TLS options that do not fit the URL: each is INVALID_ARGUMENT naming the file or option,
 * for the controller, the in-process worker and pathways-worker (exit 2).
 * Then one controller with mutual TLS and a token: an in-process worker
 * (lib/worker) registers over tls+tcp and runs a launch end to end; a
 * worker with a stranger's certificate, one without a certificate, a
 * plain tcp one, one with the wrong CA, one expecting another server
 * name and one with the wrong token are each refused, and the refusal is
 * logged by the controller (and by the worker where it can tell); none
 * registers. A controller played over raw nng that WELCOMEs a TLS worker
 * to a plain tcp session is refused by the worker. Afterwards
 * pathways-worker, configured through its
 * environment variables, still registers and runs a launch, and stops on
 * SIGTERM with exit 0.
 *
 * Usage: test_remote_tls PATH_TO_PATHWAYS_WORKER. Exit 77 (skipped) when
 * the openssl CLI is not there. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "pathways/pathways.h"
#include "pathways/remote.h"
#include "pathways/worker.h"
#include "wire/wire_nng.h"
#include "wire/wire_tls.h"

#define TLS_MS 1000000LL
#define TLS_SKIP 77
static const char kToken[] = "tls-token";

static char g_dir[96];
static bool g_have_expired;
static pid_t g_child;

static void tls_cleanup(void) {
  if (g_child > 0) {
    kill(g_child, SIGKILL);
    waitpid(g_child, NULL, 0);
    g_child = 0;
  }
  if (g_dir[0] != '\0') {
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    g_dir[0] = '\0';
  }
}

#define TLS_EXPECT(cond, ...)                                                 \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: expected %s: ", __FILE__, __LINE__, #cond);     \
      fprintf(stderr, __VA_ARGS__);                                           \
      fprintf(stderr, "\n");                                                  \
      tls_cleanup();                                                          \
      exit(1);                                                                \
    }                                                                         \
  } while (0)
#define TLS_CHECK(expr)                                                       \
  do {                                                                        \
    pw_status_t st_ = (expr);                                                 \
    TLS_EXPECT(st_ == NULL, "%s", pw_status_message(st_));                    \
  } while (0)

/* |name| inside the temporary directory, in |buf|. */
static const char* tls_path(char* buf, size_t size, const char* name) {
  snprintf(buf, size, "%s/%s", g_dir, name);
  return buf;
}

/* -- The certificates ------------------------------------------------- */

static int tls_sh(const char* format, ...) PW_PRINTF_ATTR(1, 2);
static int tls_sh(const char* format, ...) {
  char cmd[2048];
  va_list ap;
  va_start(ap, format);
  vsnprintf(cmd, sizeof(cmd), format, ap);
  va_end(ap);
  return system(cmd);
}

#define TLS_NEWKEY "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "

/* CA "ca" signs "server" (DNS names localhost and 127.0.0.1: mbedTLS 2.28
 * matches no IP address entry) and "client"; CA "other" signs "stranger". */
static void tls_make_certs(void) {
  const char* cas[] = {"ca", "other"};
  for (int i = 0; i < 2; ++i) {
    const char* n = cas[i];
    TLS_EXPECT(tls_sh(TLS_NEWKEY "-subj /CN=%s -keyout %s/%s.key -x509 -days 2 -out %s/%s.pem "
                                 "2>/dev/null",
                      n, g_dir, n, g_dir, n) == 0,
               "openssl: CA %s", n);
  }
  struct {
    const char* name;
    const char* ca;
    const char* ext;
  } certs[] = {{"server", "ca", "subjectAltName=DNS:localhost,DNS:127.0.0.1"},
               {"client", "ca", "extendedKeyUsage=clientAuth"},
               {"stranger", "other", "extendedKeyUsage=clientAuth"}};
  for (int i = 0; i < 3; ++i) {
    const char* n = certs[i].name;
    const char* c = certs[i].ca;
    TLS_EXPECT(tls_sh(TLS_NEWKEY "-subj /CN=%s -keyout %s/%s.key -out %s/%s.csr 2>/dev/null", n,
                      g_dir, n, g_dir, n) == 0 &&
                   tls_sh("printf '%%s\\n' '%s' > %s/%s.ext", certs[i].ext, g_dir, n) == 0 &&
                   tls_sh("openssl x509 -req -in %s/%s.csr -CA %s/%s.pem -CAkey %s/%s.key "
                          "-CAcreateserial -days 2 -extfile %s/%s.ext -out %s/%s.pem 2>/dev/null",
                          g_dir, n, g_dir, c, g_dir, c, g_dir, n, g_dir, n) == 0,
               "openssl: certificate %s", n);
  }
  TLS_EXPECT(tls_sh("echo 'not a certificate' > %s/garbage.pem", g_dir) == 0, "garbage.pem");
  /* Expired yesterday (openssl 3.0 takes -days -1; without it the case
   * is left out). */
  g_have_expired = tls_sh("openssl x509 -req -in %s/server.csr -CA %s/ca.pem -CAkey %s/ca.key "
                          "-CAcreateserial -days -1 -out %s/expired.pem 2>/dev/null",
                          g_dir, g_dir, g_dir, g_dir) == 0;
}

/* -- A logger that keeps what it is told ------------------------------- */

typedef struct tls_log_s {
  pthread_mutex_t mu;
  char text[1 << 16];
  size_t size;
} tls_log_t;

static tls_log_t g_controller_log = {PTHREAD_MUTEX_INITIALIZER, {0}, 0};
static tls_log_t g_worker_log = {PTHREAD_MUTEX_INITIALIZER, {0}, 0};

static void tls_log_fn(pw_log_level_t level, const char* sub, const char* message, void* user) {
  tls_log_t* log = user;
  pthread_mutex_lock(&log->mu);
  int n = snprintf(log->text + log->size, sizeof(log->text) - log->size, "[%s] %s: %s\n",
                   pw_log_level_string(level), sub, message);
  if (n > 0 && log->size + (size_t)n < sizeof(log->text)) log->size += (size_t)n;
  pthread_mutex_unlock(&log->mu);
  if (getenv("TLS_TEST_VERBOSE")) fprintf(stderr, "%s: %s\n", sub, message);
}

static pw_logger_t tls_logger(tls_log_t* log) {
  return (pw_logger_t){tls_log_fn, log, PW_LOG_DEBUG};
}

static void tls_log_clear(tls_log_t* log) {
  pthread_mutex_lock(&log->mu);
  log->size = 0;
  log->text[0] = '\0';
  pthread_mutex_unlock(&log->mu);
}

static bool tls_log_has(tls_log_t* log, const char* a, const char* b) {
  pthread_mutex_lock(&log->mu);
  bool found = false;
  for (const char* line = log->text; line && *line && !found;) {
    const char* end = strchr(line, '\n');
    size_t n = end ? (size_t)(end - line) : strlen(line);
    char copy[2048];
    snprintf(copy, sizeof(copy), "%.*s", (int)n, line);
    found = strstr(copy, a) != NULL && (b == NULL || strstr(copy, b) != NULL);
    line = end ? end + 1 : NULL;
  }
  pthread_mutex_unlock(&log->mu);
  return found;
}

/* Waits (bounded) for a line holding |a| and |b|. */
static bool tls_log_wait(tls_log_t* log, const char* a, const char* b) {
  pw_time_t deadline = pw_deadline_from_timeout(20000 * TLS_MS);
  while (!tls_log_has(log, a, b)) {
    if (pw_deadline_remaining(deadline) <= 0) return false;
    nanosleep(&(struct timespec){0, 10 * TLS_MS}, NULL);
  }
  return true;
}

/* -- Controllers and in-process workers -------------------------------- */

static pw_remote_options_t tls_remote_options(void) {
  pw_remote_options_t o;
  pw_remote_options_init(&o);
  o.logger = tls_logger(&g_controller_log);
  o.token = kToken;
  o.token_size = strlen(kToken);
  o.heartbeat_ns = 100 * TLS_MS;
  o.heartbeat_misses = 20;
  return o;
}

static pw_backend_t tls_backend(void) {
  pw_cpu_backend_options_t cpu;
  pw_cpu_backend_options_init(&cpu);
  cpu.device_count = 1;
  cpu.device_memory_bytes = 16u << 20;
  pw_backend_t b;
  TLS_CHECK(pw_cpu_backend_create(&cpu, &b));
  return b;
}

typedef struct tls_files_s {
  const char* ca;
  const char* cert;
  const char* key;
  const char* server_name;
  const char* token;
} tls_files_t;

static pw_status_t tls_worker_create(const char* url, const char* name, tls_files_t f,
                                     pw_worker_t** out) {
  pw_worker_options_t o;
  pw_worker_options_init(&o);
  o.logger = tls_logger(&g_worker_log);
  o.controller_url = url;
  o.name = name;
  o.token = f.token;
  o.token_size = f.token ? strlen(f.token) : 0;
  o.backend = tls_backend();
  o.no_data_plane = true;
  o.retry_min_ns = 50 * TLS_MS;
  o.retry_max_ns = 200 * TLS_MS;
  o.tls_ca_file = f.ca;
  o.tls_cert_file = f.cert;
  o.tls_key_file = f.key;
  o.tls_server_name = f.server_name;
  return pw_worker_create(&o, out);
}

typedef struct tls_running_s {
  pw_worker_t* worker;
  pthread_t thread;
  pw_status_t result;
} tls_running_t;

static void* tls_run(void* arg) {
  tls_running_t* r = arg;
  r->result = pw_worker_run(r->worker);
  return NULL;
}

static void tls_start(tls_running_t* r, const char* url, const char* name, tls_files_t f) {
  memset(r, 0, sizeof(*r));
  TLS_CHECK(tls_worker_create(url, name, f, &r->worker));
  TLS_EXPECT(pthread_create(&r->thread, NULL, tls_run, r) == 0, "worker thread");
}

static pw_worker_stats_t tls_stats(tls_running_t* r) {
  pw_worker_stats_t s = {.struct_size = sizeof(s)};
  TLS_CHECK(pw_worker_stats(r->worker, &s));
  return s;
}

static void tls_stop(tls_running_t* r) {
  pw_worker_stop(r->worker);
  pthread_join(r->thread, NULL);
  TLS_CHECK(r->result);
  pw_worker_destroy(r->worker);
  r->worker = NULL;
}

/* -- A launch on a remote worker --------------------------------------- */

/* Runs add(x, x) on worker |index|'s one device and checks the result. */
static void tls_launch(pw_remote_t* remote, uint32_t index) {
  pw_backend_t proxy;
  TLS_CHECK(pw_remote_backend(remote, index, &proxy));
  pw_transport_t transport;
  TLS_CHECK(pw_remote_transport(remote, &transport));
  pw_slice_desc_t slice = {NULL, PW_MESH_SHAPE_INIT(1, 1), 0, 0, 0};
  pw_runtime_options_t ro = {0};
  ro.struct_size = sizeof(ro);
  ro.backends = &proxy;
  ro.backend_count = 1;
  ro.slices = &slice;
  ro.slice_count = 1;
  ro.transport = transport;
  pw_runtime_t* runtime = NULL;
  TLS_CHECK(pw_runtime_create(&ro, &runtime));
  pw_client_t* client = NULL;
  TLS_CHECK(pw_client_create(runtime, NULL, &client));
  pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(1, 1);
  pw_vslice_t vs;
  TLS_CHECK(pw_vslice_create(client, &mesh, PW_VSLICE_DEFAULT, &vs));
  static const char kAdd[] =
      "kernel add\ninput f32[8] replicated\ninput f32[8] replicated\noutput f32[8] replicated\n";
  pw_executable_t add;
  TLS_CHECK(pw_executable_compile(client, vs, kAdd, strlen(kAdd), NULL, &add));
  pw_array_spec_t spec = {PW_DTYPE_F32, {1, {8}}, PW_SHARDING_REPLICATED_INIT};
  pw_graph_t g;
  TLS_CHECK(pw_graph_create(client, &g));
  uint32_t a, c;
  TLS_CHECK(pw_graph_add_parameter(client, g, vs, &spec, &a));
  pw_value_t in[2] = {pw_value(a, 0), pw_value(a, 0)};
  TLS_CHECK(pw_graph_add_compute(client, g, "add", add, vs, in, 2, &c));
  TLS_CHECK(pw_graph_add_output(client, g, pw_value(c, 0)));
  TLS_CHECK(pw_graph_finalize(client, g));
  float host[8], got[8];
  for (int i = 0; i < 8; ++i) host[i] = 0.5f * (float)i + 0.25f;
  pw_buffer_t arg, out;
  TLS_CHECK(pw_buffer_from_host(client, vs, &spec, host, sizeof(host), &arg));
  TLS_CHECK(pw_graph_submit(client, g, &arg, 1, NULL, &out, 1, NULL));
  TLS_CHECK(pw_buffer_to_host(client, out, got, sizeof(got),
                              pw_deadline_from_timeout(20000 * TLS_MS)));
  for (int i = 0; i < 8; ++i) {
    TLS_EXPECT(got[i] == host[i] + host[i], "element %d: %g, want %g", i, (double)got[i],
               (double)(host[i] + host[i]));
  }
  pw_client_destroy(client);
  pw_runtime_destroy(runtime);
}

/* -- Create-time errors ------------------------------------------------ */

/* |status| is INVALID_ARGUMENT and its message holds |a| and |b|. */
static void tls_expect_invalid(pw_status_t status, const char* a, const char* b) {
  TLS_EXPECT(status != NULL, "an error naming '%s'", a);
  const char* m = pw_status_message(status);
  TLS_EXPECT(pw_status_code(status) == PW_STATUS_INVALID_ARGUMENT, "INVALID_ARGUMENT: %s", m);
  TLS_EXPECT(strstr(m, a) != NULL && (b == NULL || strstr(m, b) != NULL),
             "'%s' and '%s' in: %s", a, b ? b : "", m);
  pw_status_free(status);
}

static void tls_controller_errors(void) {
  char cert[160], key[160], ca[160], missing[160], garbage[160], client_key[160];
  tls_path(cert, sizeof(cert), "server.pem");
  tls_path(key, sizeof(key), "server.key");
  tls_path(ca, sizeof(ca), "ca.pem");
  tls_path(missing, sizeof(missing), "missing.pem");
  tls_path(garbage, sizeof(garbage), "garbage.pem");
  tls_path(client_key, sizeof(client_key), "client.key");
  pw_remote_t* r = NULL;
  pw_remote_options_t o = tls_remote_options();
  o.tls_cert_file = missing, o.tls_key_file = key;
  tls_expect_invalid(pw_remote_create(&o, &r), missing, "cannot open");
  o.tls_cert_file = garbage;
  tls_expect_invalid(pw_remote_create(&o, &r), garbage, "not PEM");
  o.tls_cert_file = cert, o.tls_key_file = client_key;
  tls_expect_invalid(pw_remote_create(&o, &r), client_key, "is not the private key");
  o.tls_key_file = cert; /* a certificate where the key should be */
  tls_expect_invalid(pw_remote_create(&o, &r), cert, "no private key parses");
  o.tls_key_file = key, o.tls_ca_file = key; /* a key where the CA should be */
  tls_expect_invalid(pw_remote_create(&o, &r), key, "no certificate parses");
  o.tls_ca_file = missing;
  tls_expect_invalid(pw_remote_create(&o, &r), missing, "CA");
  if (g_have_expired) {
    char expired[160];
    o.tls_ca_file = NULL;
    o.tls_cert_file = tls_path(expired, sizeof(expired), "expired.pem");
    tls_expect_invalid(pw_remote_create(&o, &r), expired, "expired on");
  } else {
    printf("remote tls: this openssl cannot make an expired certificate: that case left out\n");
  }
  o = tls_remote_options();
  o.tls_ca_file = ca; /* a CA, no certificate of its own */
  tls_expect_invalid(pw_remote_create(&o, &r), "certificate and key", NULL);
  o = tls_remote_options();
  o.listen_url = "tls+tcp://127.0.0.1:0";
  tls_expect_invalid(pw_remote_create(&o, &r), "tls+tcp", "tls_cert_file");
  TLS_EXPECT(r == NULL, "no controller made");
}

static void tls_worker_errors(const char* binary) {
  char ca[160], cert[160], key[160], missing[160], server_key[160];
  tls_path(ca, sizeof(ca), "ca.pem");
  tls_path(cert, sizeof(cert), "client.pem");
  tls_path(key, sizeof(key), "client.key");
  tls_path(missing, sizeof(missing), "missing.key");
  tls_path(server_key, sizeof(server_key), "server.key");
  const char* url = "tls+tcp://127.0.0.1:1";
  pw_worker_t* w = NULL;
  tls_expect_invalid(tls_worker_create(url, "e", (tls_files_t){.token = kToken}, &w), "tls_ca_file",
                     NULL);
  tls_expect_invalid(tls_worker_create("tcp://127.0.0.1:1", "e", (tls_files_t){.ca = ca}, &w),
                     "not tls+tcp", NULL);
  tls_expect_invalid(tls_worker_create(url, "e", (tls_files_t){.ca = ca, .cert = cert}, &w),
                     "together", NULL);
  tls_expect_invalid(
      tls_worker_create(url, "e", (tls_files_t){.ca = ca, .cert = cert, .key = missing}, &w),
      missing, "cannot open");
  tls_expect_invalid(
      tls_worker_create(url, "e", (tls_files_t){.ca = ca, .cert = cert, .key = server_key}, &w),
      server_key, cert);
  TLS_EXPECT(w == NULL, "no worker made");
  /* pathways-worker: exit 2 (usage), the file named on stderr. */
  char err[160];
  tls_path(err, sizeof(err), "worker.err");
  int rc = tls_sh("'%s' --controller %s --tls-ca %s --tls-cert %s --tls-key %s 2>%s", binary,
                  url, ca, cert, missing, err);
  TLS_EXPECT(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "pathways-worker exit 2, got %d", rc);
  TLS_EXPECT(tls_sh("grep -q -F '%s' %s", missing, err) == 0, "stderr names %s", missing);
}

/* -- Refusals ------------------------------------------------------------- */

/* A worker that must not register: waits until |log| has a line with
 * |a| and |b| (and, with |tls_failed|, until the worker counted a failed
 * handshake), then stops it. */
static void tls_refused(pw_remote_t* remote, const char* what, const char* url, tls_files_t f,
                        tls_log_t* log, const char* a, const char* b, bool tls_failed) {
  tls_log_clear(&g_controller_log);
  tls_log_clear(&g_worker_log);
  uint32_t before = pw_remote_worker_count(remote);
  tls_running_t r;
  tls_start(&r, url, what, f);
  TLS_EXPECT(tls_log_wait(log, a, b), "%s: a log line with '%s' and '%s'; got:\n%s%s", what, a,
             b ? b : "", g_controller_log.text, g_worker_log.text);
  if (tls_failed) {
    pw_time_t deadline = pw_deadline_from_timeout(20000 * TLS_MS);
    while (tls_stats(&r).tls_failures == 0 && pw_deadline_remaining(deadline) > 0) {
      nanosleep(&(struct timespec){0, 10 * TLS_MS}, NULL);
    }
    TLS_EXPECT(tls_stats(&r).tls_failures > 0, "%s: the worker counted a failed handshake", what);
  }
  pw_worker_stats_t s = tls_stats(&r);
  tls_stop(&r);
  TLS_EXPECT(s.sessions == 0, "%s: no session (%llu)", what, (unsigned long long)s.sessions);
  TLS_EXPECT(pw_remote_worker_count(remote) == before, "%s registered", what);
  printf("remote tls: %s refused (%llu hellos, %llu refusals, %llu TLS failures)\n", what,
         (unsigned long long)s.hellos, (unsigned long long)s.refusals,
         (unsigned long long)s.tls_failures);
}

static void tls_refusals(pw_remote_t* remote) {
  char ca[160], other[160], cert[160], key[160], stranger[160], stranger_key[160];
  tls_path(ca, sizeof(ca), "ca.pem");
  tls_path(other, sizeof(other), "other.pem");
  tls_path(cert, sizeof(cert), "client.pem");
  tls_path(key, sizeof(key), "client.key");
  tls_path(stranger, sizeof(stranger), "stranger.pem");
  tls_path(stranger_key, sizeof(stranger_key), "stranger.key");
  const char* url = pw_remote_url(remote);
  const char* handshake = "failed the TLS handshake";
  /* First: before it no handshake failed, so the controller's line is
   * this worker's (a plain worker cannot tell what went wrong). Later
   * cases also count the failures on the worker's side. */
  char plain[256];
  snprintf(plain, sizeof(plain), "tcp://%s", url + strlen("tls+tcp://"));
  tls_refused(remote, "plain", plain, (tls_files_t){.token = kToken}, &g_controller_log,
              "registration listener", handshake, false);
  tls_refused(remote, "stranger", url,
              (tls_files_t){.ca = ca, .cert = stranger, .key = stranger_key, .token = kToken},
              &g_controller_log, "registration listener", handshake, true);
  tls_refused(remote, "no-cert", url, (tls_files_t){.ca = ca, .token = kToken},
              &g_controller_log, "registration listener", handshake, true);
  TLS_EXPECT(tls_log_has(&g_worker_log, "client certificate", NULL), "no-cert: worker's hint");
  tls_refused(remote, "wrong-ca", url,
              (tls_files_t){.ca = other, .cert = cert, .key = key, .token = kToken},
              &g_worker_log, "TLS handshake", other, true);
  TLS_EXPECT(tls_log_wait(&g_controller_log, "registration listener", handshake),
             "wrong-ca: the controller logs it too");
  tls_refused(remote, "wrong-name", url,
              (tls_files_t){.ca = ca, .cert = cert, .key = key, .server_name = "example.com",
                            .token = kToken},
              &g_worker_log, "TLS handshake", "example.com", true);
  tls_refused(remote, "bad-token", url,
              (tls_files_t){.ca = ca, .cert = cert, .key = key, .token = "wrong"},
              &g_worker_log, "refused registration", "bad token", false);
  TLS_EXPECT(tls_log_has(&g_controller_log, "registration refused", "bad token"),
             "bad-token: the controller logs it");
}

/* -- A controller that offers a plain session ------------------------------ */

/* A TLS registration answered (raw nng) with a WELCOME to a tcp://
 * session: the worker must not attach. */
static void tls_downgrade(void) {
  char cert[160], key[160], ca[160];
  pw_wire_tls_files_t files = {.cert_file = tls_path(cert, sizeof(cert), "server.pem"),
                               .key_file = tls_path(key, sizeof(key), "server.key")};
  nng_tls_config* cfg = NULL;
  TLS_CHECK(pw__wire_tls_config(true, &files, pw_allocator_system(), "test", &cfg));
  nng_socket rep;
  nng_listener l;
  TLS_EXPECT(nng_rep0_open(&rep) == 0, "rep0");
  nng_socket_set_ms(rep, NNG_OPT_RECVTIMEO, 20000);
  TLS_EXPECT(nng_listener_create(&l, rep, "tls+tcp://127.0.0.1:0") == 0, "listener");
  TLS_EXPECT(nng_listener_set_ptr(l, NNG_OPT_TLS_CONFIG, cfg) == 0, "TLS configuration");
  TLS_EXPECT(nng_listener_start(l, 0) == 0, "listen");
  int port = 0;
  nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &port);
  char url[64];
  snprintf(url, sizeof(url), "tls+tcp://127.0.0.1:%d", port);
  tls_log_clear(&g_worker_log);
  tls_running_t r;
  tls_start(&r, url, "downgraded",
            (tls_files_t){.ca = tls_path(ca, sizeof(ca), "ca.pem"), .token = kToken});
  nng_msg* raw = NULL;
  pw_wire_msg_t hello;
  TLS_CHECK(pw__wire_nng_recv(rep, PW_WIRE_HELLO, 0, pw_allocator_system(), "worker", &raw,
                              &hello));
  pw__wire_nng_release(raw, &hello, pw_allocator_system());
  static const uint8_t kNonce[PW_WIRE_NONCE_SIZE] = {1};
  static const char kPlain[] = "tcp://127.0.0.1:9";
  pw_wire_msg_t welcome = {.type = PW_WIRE_WELCOME};
  welcome.u[PW_WIRE_WELCOME_HEARTBEAT_NS] = 100 * TLS_MS;
  welcome.u[PW_WIRE_WELCOME_MISSES] = 5;
  welcome.blob[PW_WIRE_WELCOME_B_URL] = (pw_wire_blob_t){kPlain, strlen(kPlain)};
  welcome.blob[PW_WIRE_WELCOME_B_NONCE] = (pw_wire_blob_t){kNonce, sizeof(kNonce)};
  TLS_CHECK(pw__wire_nng_send(rep, &welcome, 0, "worker"));
  pw_time_t deadline = pw_deadline_from_timeout(20000 * TLS_MS);
  while (tls_stats(&r).refused == 0 && pw_deadline_remaining(deadline) > 0) {
    nanosleep(&(struct timespec){0, 10 * TLS_MS}, NULL);
  }
  pw_worker_stats_t s = tls_stats(&r);
  tls_stop(&r);
  pw__wire_nng_close(rep);
  nng_tls_config_free(cfg);
  TLS_EXPECT(s.refused == 1 && s.sessions == 0, "WELCOME refused (%llu), no session (%llu)",
             (unsigned long long)s.refused, (unsigned long long)s.sessions);
  TLS_EXPECT(tls_log_has(&g_worker_log, "not tls+tcp", kPlain), "the worker logs it");
  printf("remote tls: a WELCOME to a plain tcp session is refused\n");
}

/* -- pathways-worker over TLS, configured by its environment -------------- */

static void tls_binary(pw_remote_t* remote, const char* binary) {
  uint32_t before = pw_remote_worker_count(remote);
  char ca[160], cert[160], key[160];
  tls_path(ca, sizeof(ca), "ca.pem");
  tls_path(cert, sizeof(cert), "client.pem");
  tls_path(key, sizeof(key), "client.key");
  g_child = fork();
  if (g_child == 0) {
    setenv("PATHWAYS_CONTROLLER", pw_remote_url(remote), 1);
    setenv("PATHWAYS_TOKEN", kToken, 1);
    setenv("PATHWAYS_TLS_CA", ca, 1);
    setenv("PATHWAYS_TLS_CERT", cert, 1);
    setenv("PATHWAYS_TLS_KEY", key, 1);
    setenv("PATHWAYS_TLS_SERVER_NAME", "localhost", 1);
    execl(binary, binary, "--name", "bin", "--devices", "1", "--memory-mib", "16",
          "--no-data-plane", "--log-level", "warn", (char*)NULL);
    perror("exec pathways-worker");
    _exit(127);
  }
  TLS_CHECK(pw_remote_wait_workers(remote, 1, 30000 * TLS_MS));
  TLS_EXPECT(pw_remote_worker_count(remote) == before + 1, "pathways-worker registered");
  pw_remote_worker_info_t info = {.struct_size = sizeof(info)};
  TLS_CHECK(pw_remote_worker_info(remote, before, &info));
  TLS_EXPECT(strcmp(info.name, "bin") == 0 && info.attached, "worker %s attached", info.name);
  tls_launch(remote, before);
  kill(g_child, SIGTERM);
  int status = 0;
  waitpid(g_child, &status, 0);
  g_child = 0;
  TLS_EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "pathways-worker exit 0 (%d)",
             status);
  printf("remote tls: pathways-worker registered over mutual TLS, ran a launch, exited 0\n");
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_remote_tls PATH_TO_PATHWAYS_WORKER\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  if (system("openssl version >/dev/null 2>&1") != 0) {
    printf("SKIP: the openssl CLI is not available to make test certificates "
           "(apt-get install openssl, or scripts/deps.sh)\n");
    return TLS_SKIP;
  }
  const char* tmp = getenv("TMPDIR");
  if (tmp == NULL || tmp[0] == '\0' || strlen(tmp) >= 80) tmp = "/tmp";
  snprintf(g_dir, sizeof(g_dir), "%s/pw-tls-XXXXXX", tmp);
  TLS_EXPECT(mkdtemp(g_dir) != NULL, "a temporary directory");
  tls_make_certs();
  tls_controller_errors();
  tls_worker_errors(argv[1]);
  printf("remote tls: create-time errors name their files\n");

  pw_remote_options_t o = tls_remote_options();
  char cert[160], key[160], ca[160];
  o.tls_cert_file = tls_path(cert, sizeof(cert), "server.pem");
  o.tls_key_file = tls_path(key, sizeof(key), "server.key");
  o.tls_ca_file = tls_path(ca, sizeof(ca), "ca.pem");
  pw_remote_t* remote = NULL;
  TLS_CHECK(pw_remote_create(&o, &remote));
  TLS_EXPECT(strncmp(pw_remote_url(remote), "tls+tcp://127.0.0.1:", 20) == 0, "url %s",
             pw_remote_url(remote));

  /* A good worker: the server name is the URL's host (127.0.0.1). */
  tls_running_t good;
  char client[160], client_key[160];
  tls_start(&good, pw_remote_url(remote), "good",
            (tls_files_t){.ca = ca,
                          .cert = tls_path(client, sizeof(client), "client.pem"),
                          .key = tls_path(client_key, sizeof(client_key), "client.key"),
                          .token = kToken});
  TLS_CHECK(pw_remote_wait_workers(remote, 1, 30000 * TLS_MS));
  TLS_EXPECT(tls_log_has(&g_controller_log, "registered", "TLS client certificate verified"),
             "the registration log says the certificate was verified");
  tls_launch(remote, 0);
  printf("remote tls: a worker registered over mutual TLS and ran a launch\n");
  tls_stop(&good);

  tls_refusals(remote);
  tls_downgrade();
  tls_binary(remote, argv[1]);
  pw_remote_destroy(remote);
  tls_cleanup();
  return 0;
}
