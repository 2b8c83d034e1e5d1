/* The controller's side of remote slices: the registration socket, the
 * worker records, the monitor thread (heartbeats, silence), queries. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "remote/remote_internal.h"
#include "wire/wire_nng.h"

#define PW_LOG_SUB "remote"

void pw_remote_options_init(pw_remote_options_t* out_options) {
  memset(out_options, 0, sizeof(*out_options));
  out_options->struct_size = sizeof(*out_options);
}

const char* pw_remote_url(const pw_remote_t* remote) { return remote->url; }

/* "tcp://HOST:PORT" or "tls+tcp://HOST:PORT" -> HOST (brackets of an
 * IPv6 host kept). */
static pw_status_t pw_remote_parse_host(const char* url, char* host, size_t capacity) {
  const char* p = strncmp(url, "tcp://", 6) == 0 ? url + 6 : NULL;
  if (strncmp(url, "tls+tcp://", 10) == 0) p = url + 10;
  const char* colon = p ? strrchr(p, ':') : NULL;
  if (p == NULL || colon == NULL || colon == p || (size_t)(colon - p) >= capacity) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "remote listen_url '%s': expected tcp://HOST:PORT or "
                          "tls+tcp://HOST:PORT", url);
  }
  memcpy(host, p, (size_t)(colon - p));
  host[colon - p] = '\0';
  return NULL;
}

static bool pw_remote_token_ok(const pw_remote_t* remote, const pw_wire_blob_t* token) {
  if (remote->token_size == 0) return true;
  uint8_t diff = token->size == remote->token_size ? 0 : 1;
  const uint8_t* got = token->data;
  for (size_t i = 0; i < remote->token_size; ++i) {
    diff |= (uint8_t)(remote->token[i] ^ (i < token->size ? got[i] : 0));
  }
  return diff == 0;
}

static void pw_remote_worker_free(pw_remote_t* remote, pw_remote_worker_t* w) {
  pw_allocator_t a = remote->allocator;
  size_t n = w->device_count;
  if (w->memory_bytes) pw_allocator_free(a, w->memory_bytes, n * sizeof(uint64_t));
  if (w->used_bytes) pw_allocator_free(a, w->used_bytes, n * sizeof(uint64_t));
  if (w->health) pw_allocator_free(a, w->health, n);
  if (w->ucx_address) pw_allocator_free(a, w->ucx_address, w->ucx_size);
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cond);
  pw__wire_outbox_destroy(&w->out);
  pw_allocator_free(a, w, sizeof(*w));
}

/* A new worker record from its first HELLO (caller holds remote->mu). */
static pw_status_t pw_remote_worker_new(pw_remote_t* remote, const pw_wire_msg_t* hello,
                                        const char* name, pw_remote_worker_t** out) {
  if (remote->worker_count == PW_REMOTE_MAX_WORKERS) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "this controller serves at most %u workers",
                          PW_REMOTE_MAX_WORKERS);
  }
  uint64_t devices = hello->u[PW_WIRE_HELLO_DEVICES];
  if (devices == 0 || devices > 65536 || hello->list_count != devices) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "HELLO of '%s': %" PRIu64 " devices with %u memory sizes", name, devices,
                          hello->list_count);
  }
  pw_allocator_t a = remote->allocator;
  pw_remote_worker_t* w = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(a, sizeof(*w), 0, (void**)&w));
  w->remote = remote;
  w->index = remote->worker_count;
  w->device_count = (uint32_t)devices;
  pthread_mutex_init(&w->mu, NULL);
  pw__wire_outbox_init(&w->out);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&w->cond, &attr);
  pthread_condattr_destroy(&attr);
  pw_status_t status = pw_allocator_calloc(a, devices * sizeof(uint64_t), 0, (void**)&w->memory_bytes);
  if (status == NULL) {
    status = pw_allocator_calloc(a, devices * sizeof(uint64_t), 0, (void**)&w->used_bytes);
  }
  if (status == NULL) status = pw_allocator_calloc(a, devices, 0, (void**)&w->health);
  if (status != NULL) {
    pw_remote_worker_free(remote, w);
    return status;
  }
  for (uint32_t d = 0; d < devices; ++d) {
    w->memory_bytes[d] = hello->list[d];
    w->health[d] = PW_DEVICE_FAILED;
  }
  snprintf(w->name, sizeof(w->name), "%s", name);
  snprintf(w->label, sizeof(w->label), "worker %s", name);
  pw__wire_blob_text(&hello->blob[PW_WIRE_HELLO_B_BACKEND], w->backend, sizeof(w->backend));
  pw__wire_blob_text(&hello->blob[PW_WIRE_HELLO_B_KIND], w->kind, sizeof(w->kind));
  w->backend_version = (uint32_t)hello->u[PW_WIRE_HELLO_BACKEND_VERSION];
  w->queue_flags = (uint32_t)hello->u[PW_WIRE_HELLO_QUEUE_FLAGS];
  uint64_t depth = hello->u[PW_WIRE_HELLO_QUEUE_DEPTH];
  w->queue_depth = (uint32_t)(depth > PW_BACKEND_MAX_QUEUE_DEPTH ? PW_BACKEND_MAX_QUEUE_DEPTH : depth);
  pw__remote_proxy_vtable_init(w);
  remote->workers[remote->worker_count++] = w;
  *out = w;
  return NULL;
}

/* Takes the worker's HELLO data that may change between sessions. */
static pw_status_t pw_remote_worker_update(pw_remote_worker_t* w, const pw_wire_msg_t* hello) {
  pw_allocator_t a = w->remote->allocator;
  if (hello->u[PW_WIRE_HELLO_DEVICES] != w->device_count) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "%s registered again with %" PRIu64 " devices (it had %u)", w->label,
                          hello->u[PW_WIRE_HELLO_DEVICES], w->device_count);
  }
  const pw_wire_blob_t* ucx = &hello->blob[PW_WIRE_HELLO_B_UCX];
  uint8_t* copy = NULL;
  if (ucx->size > 0) {
    PW_RETURN_IF_ERROR(pw_allocator_malloc(a, ucx->size, 0, (void**)&copy));
    memcpy(copy, ucx->data, ucx->size);
  }
  pthread_mutex_lock(&w->mu);
  uint8_t* old = w->ucx_address;
  size_t old_size = w->ucx_size;
  w->ucx_address = copy;
  w->ucx_size = ucx->size;
  w->pid = (uint32_t)hello->u[PW_WIRE_HELLO_PID];
  for (uint32_t d = 0; d < w->device_count; ++d) w->used_bytes[d] = 0;
  pthread_mutex_unlock(&w->mu);
  if (old) pw_allocator_free(a, old, old_size);
  return NULL;
}

/* Handles one HELLO that came on |pipe|; fills |reply| (WELCOME or
 * REFUSE). */
static pw_status_t pw_remote_hello(pw_remote_t* remote, const pw_wire_msg_t* hello, nng_pipe pipe,
                                   char* url, size_t url_capacity,
                                   pw_remote_worker_t** out_worker) {
  char name[64];
  pw__wire_blob_text(&hello->blob[PW_WIRE_HELLO_B_NAME], name, sizeof(name));
  if (!pw__remote_tls_peer_ok(remote, pipe)) {
    return pw_status_make(PW_STATUS_UNAUTHENTICATED, "worker '%s' (pid %" PRIu64
                          "): no verified TLS client certificate", name,
                          hello->u[PW_WIRE_HELLO_PID]);
  }
  if (!pw_remote_token_ok(remote, &hello->blob[PW_WIRE_HELLO_B_TOKEN])) {
    return pw_status_make(PW_STATUS_UNAUTHENTICATED, "worker '%s' (pid %" PRIu64
                          "): bad token", name, hello->u[PW_WIRE_HELLO_PID]);
  }
  if (name[0] == '\0') {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "HELLO without a worker name");
  }
  pw_remote_worker_t* w = NULL;
  pthread_mutex_lock(&remote->mu);
  for (uint32_t i = 0; i < remote->worker_count; ++i) {
    if (strcmp(remote->workers[i]->name, name) == 0) w = remote->workers[i];
  }
  pw_status_t status = w == NULL ? pw_remote_worker_new(remote, hello, name, &w) : NULL;
  pthread_mutex_unlock(&remote->mu);
  PW_RETURN_IF_ERROR(status);
  pthread_mutex_lock(&w->mu);
  uint64_t epoch = w->epoch;
  bool live = w->state == PW_RWORKER_ATTACHED || w->state == PW_RWORKER_WELCOMED;
  pthread_mutex_unlock(&w->mu);
  if (live) pw__remote_session_lose(w, epoch, "replaced by a new registration of its name");
  PW_RETURN_IF_ERROR(pw_remote_worker_update(w, hello));
  PW_RETURN_IF_ERROR(pw__remote_session_open(w, url, url_capacity));
  *out_worker = w;
  return NULL;
}

static void pw_remote_serve_one(pw_remote_t* remote, nng_msg* raw) {
  pw_wire_msg_t hello;
  pw_wire_msg_t reply = {.type = PW_WIRE_REFUSE};
  char url[256] = "";
  char reason[512] = "";
  pw_remote_worker_t* w = NULL;
  nng_pipe pipe = nng_msg_get_pipe(raw);
  pw_status_t status = pw__wire_nng_decode(raw, PW_WIRE_HELLO, remote->allocator, "a worker", &hello);
  if (status == NULL) {
    status = pw_remote_hello(remote, &hello, pipe, url, sizeof(url), &w);
    pw__wire_nng_release(raw, &hello, remote->allocator);
  }
  if (status != NULL) {
    snprintf(reason, sizeof(reason), "%s", pw_status_message(status));
    pw_log(&remote->logger, PW_LOG_WARN, PW_LOG_SUB, "registration refused: %s", reason);
    pw_status_free(status);
    reply.blob[PW_WIRE_REASON_B] = (pw_wire_blob_t){reason, strlen(reason)};
  } else {
    reply.type = PW_WIRE_WELCOME;
    reply.u[PW_WIRE_WELCOME_INDEX] = w->index;
    reply.u[PW_WIRE_WELCOME_HEARTBEAT_NS] = (uint64_t)remote->heartbeat_ns;
    reply.u[PW_WIRE_WELCOME_MISSES] = remote->heartbeat_misses;
    reply.blob[PW_WIRE_WELCOME_B_URL] = (pw_wire_blob_t){url, strlen(url)};
    reply.blob[PW_WIRE_WELCOME_B_NONCE] = (pw_wire_blob_t){w->nonce, PW_WIRE_NONCE_SIZE};
    pw_log(&remote->logger, PW_LOG_INFO, PW_LOG_SUB, "%s registered as index %u, session %s%s",
           w->label, w->index, url,
           remote->tls_verify ? " (TLS client certificate verified)" : "");
  }
  status = pw__wire_nng_send(remote->reg, &reply, 0, "a registering worker");
  if (status != NULL) {
    pw_log(&remote->logger, PW_LOG_WARN, PW_LOG_SUB, "registration reply: %s",
           pw_status_message(status));
    pw_status_free(status);
  }
}

static void* pw_remote_registrar(void* arg) {
  pw_remote_t* remote = arg;
  while (!atomic_load(&remote->stopping)) {
    nng_msg* raw = NULL;
    int rv = nng_recvmsg(remote->reg, &raw, 0);
    if (rv == NNG_ETIMEDOUT) continue;
    if (rv != 0) break;
    pw_remote_serve_one(remote, raw);
  }
  return NULL;
}

static void* pw_remote_monitor(void* arg) {
  pw_remote_t* remote = arg;
  pw_duration_t period = remote->heartbeat_ns;
  pthread_mutex_lock(&remote->mu);
  while (!atomic_load(&remote->stopping)) {
    pw_remote_worker_t* ws[PW_REMOTE_MAX_WORKERS];
    uint32_t n = remote->worker_count;
    memcpy(ws, remote->workers, n * sizeof(ws[0]));
    pthread_mutex_unlock(&remote->mu);
    pw_time_t now = pw_clock_now();
    for (uint32_t i = 0; i < n; ++i) pw__remote_session_tick(ws[i], now);
    pw__remote_tls_watch(remote, now);
    pthread_mutex_lock(&remote->mu);
    struct timespec ts = pw__remote_abstime(period);
    if (!atomic_load(&remote->stopping)) pthread_cond_timedwait(&remote->cond, &remote->mu, &ts);
  }
  pthread_mutex_unlock(&remote->mu);
  return NULL;
}

static pw_status_t pw_remote_listen(pw_remote_t* remote, const char* listen_url) {
  int rv = nng_rep0_open(&remote->reg);
  if (rv != 0) return pw__wire_nng_status(rv, "registration socket", "controller");
  PW_RETURN_IF_ERROR(pw__wire_nng_limit(remote->reg));
  nng_socket_set_ms(remote->reg, NNG_OPT_RECVTIMEO, 100);
  nng_socket_set_ms(remote->reg, NNG_OPT_SENDTIMEO, 2000);
  char url[256];
  const char* colon = strrchr(listen_url, ':');
  snprintf(url, sizeof(url), "%s://%s%s", remote->scheme, remote->host, colon);
  nng_listener l;
  rv = nng_listener_create(&l, remote->reg, url);
  if (rv == 0) {
    pw_status_t status = pw__remote_tls_listener(remote, l, "registration listener");
    if (status != NULL) return status;
    rv = nng_listener_start(l, 0);
  }
  if (rv != 0) {
    return pw_status_make(rv == NNG_EADDRINVAL || rv == NNG_ENOTSUP ? PW_STATUS_INVALID_ARGUMENT
                                                                     : PW_STATUS_UNAVAILABLE,
                          "remote: cannot listen on '%s': %s", url, nng_strerror(rv));
  }
  remote->reg_listener = l;
  int port = 0;
  rv = nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &port);
  if (rv != 0) return pw__wire_nng_status(rv, "bound port of", url);
  snprintf(remote->url, sizeof(remote->url), "%s://%s:%d", remote->scheme, remote->host, port);
  return NULL;
}

static pw_status_t pw_remote_check_options(const pw_remote_options_t* o) {
  if (o == NULL || o->struct_size < PW_REMOTE_OPTIONS_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_remote_create: options missing or struct_size too small");
  }
  if (o->heartbeat_ns < 0 || o->call_timeout_ns < 0 || (o->token_size > 0 && o->token == NULL) ||
      o->token_size > 4096) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_remote_create: negative duration or bad token (at most 4096 bytes)");
  }
  return NULL;
}

pw_status_t pw_remote_create(const pw_remote_options_t* options, pw_remote_t** out_remote) {
  if (out_remote == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_remote_create: out_remote is NULL");
  }
  *out_remote = NULL;
  PW_RETURN_IF_ERROR(pw_remote_check_options(options));
  pw_allocator_t a = pw_allocator_is_valid(options->allocator) ? options->allocator
                                                               : pw_allocator_system();
  const char* listen_url = options->listen_url ? options->listen_url : "tcp://127.0.0.1:0";
  pw_remote_t* remote = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(a, sizeof(*remote), 0, (void**)&remote));
  remote->allocator = a;
  remote->logger = options->logger.fn ? options->logger : pw_logger_default();
  remote->heartbeat_ns = options->heartbeat_ns ? options->heartbeat_ns : 100000000;
  remote->heartbeat_misses = options->heartbeat_misses ? options->heartbeat_misses : 5;
  remote->call_timeout_ns = options->call_timeout_ns ? options->call_timeout_ns : 30000000000;
  atomic_init(&remote->next_id, 1);
  atomic_init(&remote->stopping, false);
  pthread_mutex_init(&remote->mu, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&remote->cond, &attr);
  pthread_condattr_destroy(&attr);
  pw_status_t status = pw_remote_parse_host(listen_url, remote->host, sizeof(remote->host));
  if (status == NULL && options->token_size > 0) {
    status = pw_allocator_malloc(a, options->token_size, 0, (void**)&remote->token);
    if (status == NULL) {
      memcpy(remote->token, options->token, options->token_size);
      remote->token_size = options->token_size;
    }
  }
  if (status == NULL) status = pw__remote_tls_init(remote, options, listen_url);
  bool opened = false;
  if (status == NULL) {
    status = pw_remote_listen(remote, listen_url);
    opened = true;
  }
  int threads = 0;
  if (status == NULL && pthread_create(&remote->reg_thread, NULL, pw_remote_registrar, remote) == 0) {
    threads = 1;
    if (pthread_create(&remote->monitor_thread, NULL, pw_remote_monitor, remote) == 0) threads = 2;
  }
  if (status == NULL && threads < 2) {
    status = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "pw_remote_create: no thread");
  }
  if (status != NULL) {
    atomic_store(&remote->stopping, true);
    if (opened) nng_close(remote->reg);
    if (threads >= 1) pthread_join(remote->reg_thread, NULL);
    if (remote->token) pw_allocator_free(a, remote->token, remote->token_size);
    if (remote->tls) nng_tls_config_free(remote->tls);
    pthread_mutex_destroy(&remote->mu);
    pthread_cond_destroy(&remote->cond);
    pw_allocator_free(a, remote, sizeof(*remote));
    return status;
  }
  pw__remote_dp_open(remote);
  pw_log(&remote->logger, PW_LOG_INFO, PW_LOG_SUB, "controller listening on %s", remote->url);
  *out_remote = remote;
  return NULL;
}

void pw_remote_destroy(pw_remote_t* remote) {
  if (remote == NULL) return;
  pthread_mutex_lock(&remote->mu);
  atomic_store(&remote->stopping, true);
  pthread_cond_broadcast(&remote->cond);
  pthread_mutex_unlock(&remote->mu);
  pthread_join(remote->monitor_thread, NULL);
  pthread_join(remote->reg_thread, NULL);
  /* The listener first: its pipes go with it, so no HELLO of a worker
   * that keeps retrying arrives after the drain (docs/toolchain.md). */
  nng_listener_close(remote->reg_listener);
  /* Bounded as the readers' joins are: nng 1.5.2's reaper can hang, and
   * then every close with it (wire_nng.h). */
  if (!pw__wire_nng_close_within(remote->reg, (uint64_t)PW_SESSION_JOIN_S * 1000000000ull)) {
    pw_log(&remote->logger, PW_LOG_ERROR, PW_LOG_SUB,
           "closing the registration socket still blocks after %d s (nng); left behind",
           PW_SESSION_JOIN_S);
  }
  for (uint32_t i = 0; i < remote->worker_count; ++i) {
    pw_remote_worker_t* w = remote->workers[i];
    pw_wire_msg_t bye = {.type = PW_WIRE_BYE};
    static const char kReason[] = "the controller is shutting down";
    bye.blob[PW_WIRE_REASON_B] = (pw_wire_blob_t){kReason, sizeof(kReason) - 1};
    pw_status_free(pw__remote_send(w, 0, &bye, NNG_FLAG_NONBLOCK));
    pthread_mutex_lock(&w->mu);
    uint64_t epoch = w->epoch;
    pthread_mutex_unlock(&w->mu);
    pw__remote_session_lose(w, epoch, "the controller is shutting down");
  }
  /* Every reader joined before any record goes: a reader still attaching
   * announces its worker to the others (session.c). */
  for (uint32_t i = 0; i < remote->worker_count; ++i) pw__remote_session_join(remote->workers[i]);
  for (uint32_t i = 0; i < remote->worker_count; ++i) {
    pw_remote_worker_free(remote, remote->workers[i]);
  }
  pw__remote_dp_close(remote);
  if (remote->token) pw_allocator_free(remote->allocator, remote->token, remote->token_size);
  if (remote->tls) nng_tls_config_free(remote->tls);
  pthread_mutex_destroy(&remote->mu);
  pthread_cond_destroy(&remote->cond);
  pw_allocator_free(remote->allocator, remote, sizeof(*remote));
}

pw_status_t pw_remote_wait_workers(pw_remote_t* remote, uint32_t count, pw_duration_t timeout) {
  if (remote == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_remote_wait_workers: remote is NULL");
  }
  pw_time_t deadline = pw_deadline_from_timeout(timeout);
  pthread_mutex_lock(&remote->mu);
  while (remote->attached < count) {
    pw_duration_t left = pw_deadline_remaining(deadline);
    if (left <= 0) break;
    int64_t step = left < 100000000 ? left : 100000000;
    struct timespec ts = pw__remote_abstime(step);
    pthread_cond_timedwait(&remote->cond, &remote->mu, &ts);
  }
  uint32_t attached = remote->attached;
  pthread_mutex_unlock(&remote->mu);
  if (attached >= count) return NULL;
  return pw_status_make(PW_STATUS_DEADLINE_EXCEEDED,
                        "pw_remote_wait_workers: %u of %u workers attached within %" PRId64 " ms",
                        attached, count, timeout / 1000000);
}

uint32_t pw_remote_worker_count(pw_remote_t* remote) {
  if (remote == NULL) return 0;
  pthread_mutex_lock(&remote->mu);
  uint32_t n = remote->worker_count;
  pthread_mutex_unlock(&remote->mu);
  return n;
}

static pw_status_t pw_remote_worker_at(pw_remote_t* remote, uint32_t index, const char* what,
                                       pw_remote_worker_t** out) {
  if (remote == NULL) return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: remote is NULL", what);
  pthread_mutex_lock(&remote->mu);
  uint32_t n = remote->worker_count;
  *out = index < n ? remote->workers[index] : NULL;
  pthread_mutex_unlock(&remote->mu);
  if (*out == NULL) {
    return pw_status_make(PW_STATUS_NOT_FOUND, "%s: no worker %u (%u registered)", what, index, n);
  }
  return NULL;
}

pw_status_t pw_remote_worker_info(pw_remote_t* remote, uint32_t index,
                                  pw_remote_worker_info_t* out_info) {
  if (out_info == NULL || out_info->struct_size < PW_REMOTE_WORKER_INFO_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_remote_worker_info: out_info missing or struct_size too small");
  }
  pw_remote_worker_t* w = NULL;
  PW_RETURN_IF_ERROR(pw_remote_worker_at(remote, index, "pw_remote_worker_info", &w));
  size_t size = out_info->struct_size;
  memset(out_info, 0, size);
  out_info->struct_size = size;
  pthread_mutex_lock(&w->mu);
  memcpy(out_info->name, w->name, sizeof(out_info->name));
  memcpy(out_info->backend, w->backend, sizeof(out_info->backend));
  memcpy(out_info->kind, w->kind, sizeof(out_info->kind));
  out_info->device_count = w->device_count;
  out_info->pid = w->pid;
  out_info->attached = w->state == PW_RWORKER_ATTACHED;
  out_info->sessions = w->sessions;
  out_info->losses = w->losses;
  out_info->data_plane = w->ucx_size > 0;
  pthread_mutex_unlock(&w->mu);
  out_info->host_bytes_data_plane = atomic_load(&w->host_bytes_dp);
  out_info->host_bytes_control_plane = atomic_load(&w->host_bytes_cp);
  if (size >= PW_REMOTE_WORKER_INFO_SIZE_V2) {
    pthread_mutex_lock(&w->out.mu);
    out_info->messages_sent = w->out.messages_sent;
    out_info->frames_sent = w->out.frames_sent;
    pthread_mutex_unlock(&w->out.mu);
    out_info->messages_received = atomic_load(&w->messages_received);
    out_info->frames_received = atomic_load(&w->frames_received);
  }
  return NULL;
}

pw_status_t pw_remote_disconnect(pw_remote_t* remote, uint32_t index) {
  pw_remote_worker_t* w = NULL;
  PW_RETURN_IF_ERROR(pw_remote_worker_at(remote, index, "pw_remote_disconnect", &w));
  pthread_mutex_lock(&w->mu);
  uint64_t epoch = w->epoch;
  pthread_mutex_unlock(&w->mu);
  pw__remote_session_lose(w, epoch, "disconnected by pw_remote_disconnect");
  return NULL;
}

pw_status_t pw_remote_backend(pw_remote_t* remote, uint32_t index, pw_backend_t* out_backend) {
  if (out_backend == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_remote_backend: out_backend is NULL");
  }
  *out_backend = (pw_backend_t){NULL, NULL};
  pw_remote_worker_t* w = NULL;
  PW_RETURN_IF_ERROR(pw_remote_worker_at(remote, index, "pw_remote_backend", &w));
  /* The proxy's self is the worker record: it lives until pw_remote_destroy. */
  *out_backend = (pw_backend_t){&w->vtable, w};
  return NULL;
}
