#define _POSIX_C_SOURCE 200809L
/* The worker: create/destroy/run/stop and registration (docs/remote.md,
 * "Sockets", "Authentication"). */
#include <inttypes.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pathways/clock.h"
#include "pathways/struct_size.h"
#include "plugin/backend_call.h"
#include "wire/wire_nng.h"
#include "worker/worker_internal.h"

#define PW_WORKER_TOKEN_MAX (4u << 10)

void pw_worker_options_init(pw_worker_options_t* out_options) {
  if (out_options == NULL) return;
  memset(out_options, 0, sizeof(*out_options));
  out_options->struct_size = sizeof(*out_options);
  out_options->retry_min_ns = 200000000ull;
  out_options->retry_max_ns = 2000000000ull;
}

void pw__worker_count_refused(pw_worker_t* w) { pw_atomic_fetch_add_u64(&w->n_refused, 1); }

bool pw__worker_stopping(pw_worker_t* w) { return pw_atomic_load_u32_acquire(&w->stop) != 0; }

static pw_status_t pw_worker_copy_bytes(pw_allocator_t a, const void* src, size_t size,
                                        void** out) {
  *out = NULL;
  if (size == 0) return NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(a, size, 0, out));
  memcpy(*out, src, size);
  return NULL;
}

static pw_status_t pw_worker_check_options(const pw_worker_options_t* o) {
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(o, pw_worker_options_t, PW_WORKER_OPTIONS_SIZE_V1,
                                     "pw_worker_create"));
  if (o->controller_url == NULL || o->controller_url[0] == '\0') {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_worker_create: no controller URL");
  }
  nng_url* parsed = NULL;
  int rv = nng_url_parse(&parsed, o->controller_url);
  if (rv != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_worker_create: controller URL '%s': %s", o->controller_url,
                          nng_strerror(rv));
  }
  nng_url_free(parsed);
  if (o->token_size > PW_WORKER_TOKEN_MAX || (o->token_size > 0 && o->token == NULL)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_worker_create: token of %zu bytes (at most %u, non-NULL)",
                          o->token_size, PW_WORKER_TOKEN_MAX);
  }
  if (o->name != NULL && (o->name[0] == '\0' || strlen(o->name) >= PW_WORKER_NAME_MAX)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_worker_create: name '%s' must be 1 to %d bytes", o->name,
                          PW_WORKER_NAME_MAX - 1);
  }
  PW_RETURN_IF_ERROR_CTX(pw__backend_check(&o->backend), "pw_worker_create");
  uint32_t devices = pw__backend_device_count(&o->backend);
  if (devices == 0 || devices > 65536) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_worker_create: backend '%s' has %u devices (1 to 65536)",
                          pw__backend_name(&o->backend), devices);
  }
  return NULL;
}

pw_status_t pw_worker_create(const pw_worker_options_t* options, pw_worker_t** out_worker) {
  if (out_worker != NULL) *out_worker = NULL;
  pw_status_t status = out_worker == NULL
                           ? pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                                            "pw_worker_create: out_worker is NULL")
                           : pw_worker_check_options(options);
  if (status != NULL) {
    if (options != NULL && options->struct_size >= PW_WORKER_OPTIONS_SIZE_V1 &&
        options->backend.vtable != NULL) {
      pw__backend_destroy(&options->backend);
    }
    return status;
  }
  pw_allocator_t a = pw_allocator_is_valid(options->allocator) ? options->allocator
                                                                : pw_allocator_system();
  pw_worker_t* w = NULL;
  status = pw_allocator_calloc(a, sizeof(*w), 0, (void**)&w);
  if (status != NULL) {
    pw__backend_destroy(&options->backend);
    return status;
  }
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->idle, NULL);
  pw__worker_outbox_init(w);
  w->allocator = a;
  w->logger = options->logger.fn != NULL ? options->logger : pw_logger_default();
  w->backend = options->backend;
  w->device_count = pw__backend_device_count(&w->backend);
  w->retry_min_ns = options->retry_min_ns ? options->retry_min_ns : 200000000ull;
  w->retry_max_ns = options->retry_max_ns ? options->retry_max_ns : 2000000000ull;
  if (w->retry_max_ns < w->retry_min_ns) w->retry_max_ns = w->retry_min_ns;
  w->no_data_plane = options->no_data_plane;
  w->drain_ns = options->struct_size >= PW_STRUCT_SIZE(pw_worker_options_t, drain_ns) &&
                        options->drain_ns != 0
                    ? options->drain_ns
                    : 10000000000ull;
  w->done_hold_ns = 100000;
  if (options->struct_size >= PW_STRUCT_SIZE(pw_worker_options_t, done_hold_ns) &&
      options->done_hold_ns != 0) {
    w->done_hold_ns = options->done_hold_ns;
  }
  w->url_size = strlen(options->controller_url) + 1;
  status = pw_worker_copy_bytes(a, options->controller_url, w->url_size, (void**)&w->url);
  if (status == NULL) {
    w->token_size = options->token_size;
    status = pw_worker_copy_bytes(a, options->token, options->token_size, (void**)&w->token);
  }
  if (status == NULL) status = pw__worker_tls_init(w, options);
  if (status != NULL) {
    pw_worker_destroy(w);
    return status;
  }
  if (options->name != NULL) {
    snprintf(w->name, sizeof(w->name), "%s", options->name);
  } else {
    char host[48] = "host";
    if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "host");
    host[sizeof(host) - 1] = '\0';
    snprintf(w->name, sizeof(w->name), "%s-%ld", host, (long)getpid());
  }
  status = pw_allocator_calloc_array(a, w->device_count, sizeof(uint64_t), 0,
                                     (void**)&w->queue_seq);
  if (status != NULL) {
    pw_worker_destroy(w);
    return status;
  }
  *out_worker = w;
  return NULL;
}

void pw_worker_stop(pw_worker_t* worker) {
  if (worker != NULL) pw_atomic_store_u32_release(&worker->stop, 1);
}

pw_status_t pw_worker_stats(pw_worker_t* worker, pw_worker_stats_t* out_stats) {
  if (worker == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_worker_stats: worker is NULL");
  }
  PW_RETURN_IF_ERROR(
      PW_STRUCT_CHECK(out_stats, pw_worker_stats_t, PW_WORKER_STATS_SIZE_V1, "pw_worker_stats"));
  pw_worker_stats_t s = {.struct_size = sizeof(s)};
  s.hellos = pw_atomic_load_u64_acquire(&worker->n_hellos);
  s.refusals = pw_atomic_load_u64_acquire(&worker->n_refusals);
  s.sessions = pw_atomic_load_u64_acquire(&worker->n_sessions);
  s.launches = pw_atomic_load_u64_acquire(&worker->n_launches);
  s.copies = pw_atomic_load_u64_acquire(&worker->n_copies);
  s.refused = pw_atomic_load_u64_acquire(&worker->n_refused);
  s.losses = pw_atomic_load_u64_acquire(&worker->n_losses);
  s.tls_failures = pw_atomic_load_u64_acquire(&worker->n_tls_failures);
  pthread_mutex_lock(&worker->out.mu);
  s.messages_sent = worker->out.messages_sent;
  s.frames_sent = worker->out.frames_sent;
  pthread_mutex_unlock(&worker->out.mu);
  pw_struct_fill(out_stats, &s, sizeof(s));
  return NULL;
}

void pw_worker_destroy(pw_worker_t* worker) {
  if (worker == NULL) return;
  pw_allocator_t a = worker->allocator;
  if (worker->backend.vtable != NULL) pw__backend_destroy(&worker->backend);
  pw__worker_table_free(worker, &worker->mems);
  pw__worker_table_free(worker, &worker->exes);
  pw_allocator_free(a, worker->url, worker->url_size);
  pw_allocator_free(a, worker->token, worker->token_size);
  pw__worker_tls_free(worker);
  pw_allocator_free(a, worker->queue_seq, sizeof(uint64_t) * worker->device_count);
  pthread_mutex_destroy(&worker->lock);
  pthread_cond_destroy(&worker->idle);
  pw__worker_outbox_destroy(worker);
  pw_allocator_free(a, worker, sizeof(*worker));
}

/* Sleeps |ns| in slices, returning early when stopped. */
static void pw_worker_sleep(pw_worker_t* w, uint64_t ns) {
  pw_time_t deadline = pw_clock_now() + (pw_time_t)ns;
  while (!pw__worker_stopping(w)) {
    pw_duration_t left = deadline - pw_clock_now();
    if (left <= 0) return;
    if (left > (pw_duration_t)PW_WORKER_POLL_NS) left = (pw_duration_t)PW_WORKER_POLL_NS;
    struct timespec ts = {(time_t)(left / 1000000000), (long)(left % 1000000000)};
    nanosleep(&ts, NULL);
  }
}

/* How long one registration attempt waits for the connection, and then
 * for the answer to HELLO. */
static uint64_t pw_worker_answer_wait(const pw_worker_t* w) {
  return w->retry_max_ns > 1000000000ull ? w->retry_max_ns : 1000000000ull;
}

static pw_status_t pw_worker_send_hello(pw_worker_t* w, nng_socket sock) {
  uint64_t* memory = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc_array(w->allocator, w->device_count, sizeof(uint64_t),
                                               0, (void**)&memory));
  pw_wire_msg_t hello = {.type = PW_WIRE_HELLO, .list = memory, .list_count = w->device_count};
  char kind[32] = "";
  for (uint32_t d = 0; d < w->device_count; ++d) {
    pw_backend_device_info_t info = {.struct_size = sizeof(info)};
    pw_status_t s = pw__backend_device_info(&w->backend, d, &info);
    memory[d] = s == NULL ? info.memory_bytes : 0;
    if (d == 0 && s == NULL) snprintf(kind, sizeof(kind), "%.31s", info.kind);
    pw_status_ignore(s);
  }
  pw_backend_queue_info_t queue = {.struct_size = sizeof(queue)};
  if (PW__BACKEND_HAS(&w->backend, queue_info)) {
    pw_status_t s = w->backend.vtable->queue_info(w->backend.self, 0, &queue);
    if (s != NULL) memset(&queue, 0, sizeof(queue));
    pw_status_ignore(s);
  }
  const char* backend = pw__backend_name(&w->backend);
  hello.u[PW_WIRE_HELLO_PID] = (uint64_t)getpid();
  hello.u[PW_WIRE_HELLO_DEVICES] = w->device_count;
  hello.u[PW_WIRE_HELLO_BACKEND_VERSION] = w->backend.vtable->version;
  hello.u[PW_WIRE_HELLO_QUEUE_FLAGS] = queue.flags;
  hello.u[PW_WIRE_HELLO_QUEUE_DEPTH] = queue.depth;
  hello.u[PW_WIRE_HELLO_HOST_LAUNCH] = PW__BACKEND_HAS(&w->backend, launch_host) ? 1 : 0;
  hello.blob[PW_WIRE_HELLO_B_TOKEN] = (pw_wire_blob_t){w->token, w->token_size};
  hello.blob[PW_WIRE_HELLO_B_NAME] = (pw_wire_blob_t){w->name, strlen(w->name)};
  hello.blob[PW_WIRE_HELLO_B_BACKEND] = (pw_wire_blob_t){backend, strnlen(backend, 31)};
  pw__worker_dp_address(w, &hello.blob[PW_WIRE_HELLO_B_UCX].data,
                        &hello.blob[PW_WIRE_HELLO_B_UCX].size);
  hello.blob[PW_WIRE_HELLO_B_KIND] = (pw_wire_blob_t){kind, strlen(kind)};
  pw_atomic_fetch_add_u64(&w->n_hellos, 1);
  /* The send waits for the connection, in short slices (the stop flag is
   * checked between them) for as long as the answer may take: a TLS
   * handshake takes round trips, and a connection nng made is dropped
   * with the socket when the attempt gives up. */
  pw_time_t deadline = pw_deadline_from_timeout((pw_duration_t)pw_worker_answer_wait(w));
  pw_status_t s = NULL;
  for (;;) {
    s = pw__wire_nng_send(sock, &hello, 0, w->peer);
    if (pw_status_code(s) != PW_STATUS_DEADLINE_EXCEEDED || pw__worker_stopping(w) ||
        pw_deadline_remaining(deadline) <= 0) {
      break;
    }
    pw_status_free(s);
  }
  pw_allocator_free(w->allocator, memory, sizeof(uint64_t) * w->device_count);
  return s;
}

typedef struct pw_worker_welcome_t {
  char url[256];
  uint8_t nonce[PW_WIRE_NONCE_SIZE];
} pw_worker_welcome_t;

static void pw_worker_answer_ready(void* arg) { pw_atomic_store_u32_release(arg, 1); }

/* Receives the answer to HELLO within |wait_ns|. One receive for the
 * whole wait: nng's req0 treats a receive that ends (a timeout included)
 * as the end of the request, so the poll for the stop flag is on an aio
 * instead, cancelled when the worker stops. */
static pw_status_t pw_worker_recv_answer(pw_worker_t* w, nng_socket sock, uint64_t wait_ns,
                                         nng_msg** out_raw, pw_wire_msg_t* out_msg) {
  *out_raw = NULL;
  pw_atomic_u32_t ready;
  pw_atomic_init_u32(&ready, 0);
  nng_aio* aio = NULL;
  int rv = nng_aio_alloc(&aio, pw_worker_answer_ready, &ready);
  if (rv != 0) return pw__wire_nng_status(rv, "receive from", w->peer);
  nng_aio_set_timeout(aio, (nng_duration)(wait_ns / 1000000));
  nng_recv_aio(sock, aio);
  bool cancelled = false;
  while (!pw_atomic_load_u32_acquire(&ready)) {
    if (!cancelled && pw__worker_stopping(w)) {
      nng_aio_cancel(aio);
      cancelled = true;
    }
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
  }
  nng_aio_wait(aio);
  rv = nng_aio_result(aio);
  nng_msg* raw = rv == 0 ? nng_aio_get_msg(aio) : NULL;
  nng_aio_free(aio);
  if (rv != 0) return pw__wire_nng_status(rv, "receive from", w->peer);
  PW_RETURN_IF_ERROR(pw__wire_nng_decode(raw, 0, w->allocator, w->peer, out_msg));
  *out_raw = raw;
  return NULL;
}

/* Waits for the answer to HELLO: true on WELCOME (filled in). */
static bool pw_worker_await_answer(pw_worker_t* w, nng_socket sock,
                                   pw_worker_welcome_t* out_welcome) {
  uint64_t wait_ns = pw_worker_answer_wait(w);
  nng_msg* raw = NULL;
  pw_wire_msg_t msg;
  pw_status_t s = pw_worker_recv_answer(w, sock, wait_ns, &raw, &msg);
  pw_status_code_t code = pw_status_code(s);
  if (code == PW_STATUS_DEADLINE_EXCEEDED || code == PW_STATUS_CANCELLED) {
    pw_log(&w->logger, PW_LOG_DEBUG, "worker", "worker %s: no answer to HELLO: %s", w->name,
           pw_status_message(s));
    pw_status_free(s);
    return false;
  }
  if (s != NULL) {
    pw__worker_drop(w, "registration answer", s);
    return false;
  }
  bool welcomed = false;
  if (msg.type == PW_WIRE_REFUSE) {
    char reason[256];
    pw__wire_blob_text(&msg.blob[PW_WIRE_REASON_B], reason, sizeof(reason));
    pw_atomic_fetch_add_u64(&w->n_refusals, 1);
    pw_log(&w->logger, PW_LOG_WARN, "worker", "worker %s: %s refused registration: %s",
           w->name, w->peer, reason);
  } else if (msg.type == PW_WIRE_WELCOME &&
             msg.blob[PW_WIRE_WELCOME_B_NONCE].size == PW_WIRE_NONCE_SIZE &&
             msg.blob[PW_WIRE_WELCOME_B_URL].size > 0) {
    pw__wire_blob_text(&msg.blob[PW_WIRE_WELCOME_B_URL], out_welcome->url,
                       sizeof(out_welcome->url));
    memcpy(out_welcome->nonce, msg.blob[PW_WIRE_WELCOME_B_NONCE].data, PW_WIRE_NONCE_SIZE);
    w->index = (uint32_t)msg.u[PW_WIRE_WELCOME_INDEX];
    w->heartbeat_ns = msg.u[PW_WIRE_WELCOME_HEARTBEAT_NS];
    w->misses = (uint32_t)msg.u[PW_WIRE_WELCOME_MISSES];
    welcomed = pw__worker_tls_session_ok(w, out_welcome->url);
  } else {
    pw__worker_drop(w, "registration answer",
                    pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                                   "%s where WELCOME or REFUSE (with a nonce of %u bytes) "
                                   "was expected",
                                   pw__wire_type_name(msg.type), PW_WIRE_NONCE_SIZE));
  }
  pw__wire_nng_release(raw, &msg, w->allocator);
  return welcomed;
}

/* One HELLO and its answer on a fresh req0 socket. An nng failure to
 * open a socket is returned (the caller gives up); anything else is
 * "not welcomed" (logged). */
static pw_status_t pw_worker_register_once(pw_worker_t* w, pw_worker_welcome_t* out_welcome,
                                           bool* out_welcomed) {
  *out_welcomed = false;
  nng_socket sock;
  nng_dialer dialer = NNG_DIALER_INITIALIZER;
  int rv = nng_req0_open(&sock);
  if (rv != 0) return pw__wire_nng_status(rv, "open registration socket for", w->peer);
  pw_status_t s = pw__wire_nng_limit(sock);
  if (s == NULL) {
    /* Short: with no connection yet the send waits, and stop must not. */
    nng_socket_set_ms(sock, NNG_OPT_SENDTIMEO, 100);
    nng_socket_set_ms(sock, NNG_OPT_RECONNMINT, 50);
    nng_socket_set_ms(sock, NNG_OPT_RECONNMAXT, 1000);
    s = pw__worker_tls_dialer(w, sock, w->url, &dialer);
    rv = s == NULL ? nng_dialer_start(dialer, NNG_FLAG_NONBLOCK) : 0;
    if (rv != 0) s = pw__wire_nng_status(rv, "dial", w->peer);
  }
  if (s == NULL) s = pw_worker_send_hello(w, sock);
  if (s == NULL) {
    *out_welcomed = pw_worker_await_answer(w, sock, out_welcome);
  } else {
    pw_log(&w->logger, PW_LOG_WARN, "worker", "worker %s: registration: %s", w->name,
           pw_status_message(s));
    pw_status_free(s);
  }
  if (!*out_welcomed && nng_dialer_id(dialer) > 0) pw__worker_tls_report(w, dialer);
  pw__wire_nng_close(sock);
  return NULL;
}

pw_status_t pw_worker_run(pw_worker_t* worker) {
  if (worker == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_worker_run: worker is NULL");
  }
  pw_worker_t* w = worker;
  uint32_t idle = 0;
  if (!pw_atomic_cas_u32(&w->running, &idle, 1)) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "pw_worker_run: worker %s is already running", w->name);
  }
  snprintf(w->peer, sizeof(w->peer), "controller %.80s", w->url);
  uint64_t backoff = w->retry_min_ns;
  pw_status_t fatal = NULL;
  while (fatal == NULL && !pw__worker_stopping(w)) {
    pw_status_t s = pw__worker_dp_open(w);
    if (s != NULL) {
      pw_log(&w->logger, PW_LOG_WARN, "worker", "worker %s: data plane off: %s", w->name,
             pw_status_message(s));
      pw_status_free(s);
    }
    pw_worker_welcome_t welcome;
    bool welcomed = false;
    fatal = pw_worker_register_once(w, &welcome, &welcomed);
    if (fatal != NULL) break;
    if (welcomed) {
      backoff = w->retry_min_ns;
      pw_log(&w->logger, PW_LOG_INFO, "worker", "worker %s: welcomed by %s as index %u", w->name,
             w->peer, w->index);
      pw__worker_session(w, welcome.url, welcome.nonce);
      continue;
    }
    pw_worker_sleep(w, backoff);
    backoff = backoff * 2 > w->retry_max_ns ? w->retry_max_ns : backoff * 2;
  }
  pw__worker_dp_close(w);
  pw_atomic_store_u32_release(&w->running, 0);
  return fatal;
}
