/* The link's lifecycle: the ucp context and worker, the progress thread,
 * the address it hands out and the endpoints to its peers (see
 * ucx_link.h; the ops are in ucx_ops.c). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ucx/ucx_link_internal.h"

/* The address handed out: a header the connecting side checks before any
 * byte reaches UCX (which trusts addresses blindly), then UCX's worker
 * address. Little-endian: magic "PWUX", u32 version, u32 length of UCX's
 * bytes, u32 reserved (0), u64 FNV-1a of UCX's bytes. */
enum { PW_UCX_HEADER = 24, PW_UCX_VERSION = 1 };
static const uint8_t kPwUcxMagic[4] = {'P', 'W', 'U', 'X'};

/* The longest a close of every endpoint may take in destroy. */
#define PW_UCX_DESTROY_NS 1000000000ull

static uint64_t pw_ucx_fnv1a(const uint8_t* bytes, size_t size) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i) {
    h ^= bytes[i];
    h *= 1099511628211ull;
  }
  return h;
}

static void pw_ucx_put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t pw_ucx_get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= (uint32_t)p[i] << (8 * i);
  return v;
}

static uint64_t pw_ucx_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void pw_ucx_sleep_ns(long ns) {
  struct timespec ts = {.tv_sec = 0, .tv_nsec = ns};
  nanosleep(&ts, NULL);
}

static void pw_ucx_copy_name(char* dst, const char* src, const char* fallback) {
  snprintf(dst, PW_UCX_NAME_MAX, "%s", src != NULL && src[0] != '\0' ? src : fallback);
}

/* ---- endpoints ---- */

/* UCX's error handler: runs inside ucp_worker_progress (|mu| held). The
 * requests of the endpoint are failed by UCX itself; the progress thread
 * closes the endpoint after this progress round. */
static void pw_ucx_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
  (void)ep;
  pw_ucx_peer_s* peer = (pw_ucx_peer_s*)arg;
  if (peer->state != PW_UCX_PEER_CONNECTED) return;
  peer->state = PW_UCX_PEER_FAILED;
  snprintf(peer->failure, sizeof(peer->failure), "%s", ucs_status_string(status));
  peer->needs_close = true;
  pw_log(&peer->link->logger, PW_LOG_WARN, "ucx", "link %s: endpoint to peer %s failed: %s",
         peer->link->name, peer->name, peer->failure);
}

/* Issues a forced close of |peer|'s endpoint (|mu| held); UCX fails its
 * outstanding sends. */
static void pw_ucx_close_ep(pw_ucx_link_t* link, pw_ucx_peer_s* peer) {
  if (peer->ep == NULL) return;
  ucp_request_param_t param;
  memset(&param, 0, sizeof(param));
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  void* request = ucp_ep_close_nbx(peer->ep, &param);
  peer->ep = NULL;
  peer->needs_close = false;
  if (UCS_PTR_IS_ERR(request)) {
    pw_log(&link->logger, PW_LOG_DEBUG, "ucx", "link %s: closing peer %s: %s", link->name,
           peer->name, ucs_status_string(UCS_PTR_STATUS(request)));
  } else if (request != NULL) {
    peer->close_request = request;
  }
}

/* Frees the close requests UCX finished; true if some are still running
 * (|mu| held). */
static bool pw_ucx_reap_closes(pw_ucx_link_t* link) {
  bool running = false;
  for (uint32_t i = 0; i < link->peer_count; ++i) {
    pw_ucx_peer_s* peer = link->peers[i];
    if (peer->needs_close) pw_ucx_close_ep(link, peer);
    if (peer->close_request == NULL) continue;
    if (ucp_request_check_status(peer->close_request) == UCS_INPROGRESS) {
      running = true;
    } else {
      ucp_request_free(peer->close_request);
      peer->close_request = NULL;
    }
  }
  return running;
}

/* ---- the progress thread ---- */

static void pw_ucx_idle_wait(pw_ucx_link_t* link, long ns) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_nsec += ns;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec += 1;
    until.tv_nsec -= 1000000000L;
  }
  pthread_cond_timedwait(&link->wake, &link->mu, &until);
}

static void* pw_ucx_progress_main(void* arg) {
  pw_ucx_link_t* link = (pw_ucx_link_t*)arg;
  long backoff_ns = 0;
  while (!atomic_load_explicit(&link->stop, memory_order_acquire)) {
    pthread_mutex_lock(&link->mu);
    unsigned events = 0;
    for (int round = 0; round < 256; ++round) {
      unsigned n = ucp_worker_progress(link->worker);
      if (n == 0) break;
      events += n;
    }
    bool closing = pw_ucx_reap_closes(link);
    bool to_deliver = link->finished.next != &link->finished;
    bool busy = link->outstanding_count > 0 || closing;
    if (events > 0 || to_deliver) {
      backoff_ns = 0;
    } else if (!busy) {
      /* Nothing posted: still progress now and then for keepalives, peer
       * failures and unexpected messages; a post wakes the thread. */
      backoff_ns = 0;
      if (!atomic_load_explicit(&link->stop, memory_order_acquire)) {
        pw_ucx_idle_wait(link, 5000000L);
      }
    }
    pthread_mutex_unlock(&link->mu);
    if (to_deliver) pw__ucx_deliver(link);
    if (events == 0 && !to_deliver && busy) {
      /* Waiting on a peer: back off from 20 us to 1 ms. */
      backoff_ns = backoff_ns == 0 ? 20000 : backoff_ns * 2;
      if (backoff_ns > 1000000) backoff_ns = 1000000;
      pw_ucx_sleep_ns(backoff_ns);
    }
  }
  return NULL;
}

/* ---- create / destroy ---- */

static pw_status_t pw_ucx_status(const pw_ucx_link_t* link, const char* what, ucs_status_t s) {
  return pw_status_make(PW_STATUS_UNAVAILABLE, "ucx link %s: %s: %s", link->name, what,
                        ucs_status_string(s));
}

static pw_status_t pw_ucx_start(pw_ucx_link_t* link) {
  ucp_config_t* config = NULL;
  ucs_status_t s = ucp_config_read(NULL, NULL, &config);
  if (s != UCS_OK) return pw_ucx_status(link, "reading UCX's configuration", s);
  /* UCX_TLS and the rest stay the user's. Endpoints ask for peer failure
   * handling, which UCX 1.13's shared-memory transports (posix, sysv, cma)
   * lack: UCX then picks TCP, loopback included, or RDMA where present
   * (docs/toolchain.md, "UCX"). */
  ucp_params_t params;
  memset(&params, 0, sizeof(params));
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG;
  s = ucp_init(&params, config, &link->context);
  ucp_config_release(config);
  if (s != UCS_OK) {
    link->context = NULL;
    return pw_ucx_status(link, "ucp_init", s);
  }
  ucp_worker_params_t wparams;
  memset(&wparams, 0, sizeof(wparams));
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wparams.thread_mode = UCS_THREAD_MODE_MULTI;
  s = ucp_worker_create(link->context, &wparams, &link->worker);
  if (s != UCS_OK) {
    link->worker = NULL;
    return pw_ucx_status(link, "ucp_worker_create", s);
  }
  ucp_address_t* address = NULL;
  size_t size = 0;
  s = ucp_worker_get_address(link->worker, &address, &size);
  if (s != UCS_OK) return pw_ucx_status(link, "ucp_worker_get_address", s);
  pw_status_t status = NULL;
  if (size == 0 || size > UINT32_MAX) {
    status = pw_status_make(PW_STATUS_INTERNAL, "ucx link %s: worker address of %zu bytes",
                            link->name, size);
  } else {
    status = pw_allocator_malloc(link->allocator, PW_UCX_HEADER + size, 0,
                                 (void**)&link->address);
  }
  if (status == NULL) {
    uint8_t* h = link->address;
    memcpy(h, kPwUcxMagic, 4);
    pw_ucx_put32(h + 4, PW_UCX_VERSION);
    pw_ucx_put32(h + 8, (uint32_t)size);
    pw_ucx_put32(h + 12, 0);
    uint64_t sum = pw_ucx_fnv1a((const uint8_t*)address, size);
    pw_ucx_put32(h + 16, (uint32_t)sum);
    pw_ucx_put32(h + 20, (uint32_t)(sum >> 32));
    memcpy(h + PW_UCX_HEADER, address, size);
    link->address_size = PW_UCX_HEADER + size;
  }
  ucp_worker_release_address(link->worker, address);
  return status;
}

static void pw_ucx_free(pw_ucx_link_t* link) {
  for (uint32_t i = 0; i < link->peer_count; ++i) {
    pw_allocator_free(link->allocator, link->peers[i], sizeof(pw_ucx_peer_s));
  }
  pw_allocator_free(link->allocator, link->peers, sizeof(*link->peers) * link->peer_capacity);
  pw_allocator_free(link->allocator, link->address, link->address_size);
  pthread_cond_destroy(&link->wake);
  pthread_mutex_destroy(&link->mu);
  pw_allocator_free(link->allocator, link, sizeof(*link));
}

pw_status_t pw__ucx_link_create(const pw_ucx_link_options_t* options, pw_ucx_link_t** out_link) {
  if (out_link == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "ucx link create: NULL out_link");
  }
  *out_link = NULL;
  if (options == NULL || options->struct_size < sizeof(pw_ucx_link_options_t)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "ucx link create: options missing or struct_size %zu too small",
                          options != NULL ? options->struct_size : (size_t)0);
  }
  pw_allocator_t allocator =
      pw_allocator_is_valid(options->allocator) ? options->allocator : pw_allocator_system();
  pw_ucx_link_t* link = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(allocator, sizeof(*link), 0, (void**)&link));
  link->allocator = allocator;
  link->logger = options->logger;
  pw_ucx_copy_name(link->name, options->name, "link");
  pthread_mutex_init(&link->mu, NULL);
  pthread_condattr_t cattr;
  pthread_condattr_init(&cattr);
  pthread_cond_init(&link->wake, &cattr);
  pthread_condattr_destroy(&cattr);
  atomic_init(&link->stop, false);
  pw__ucx_list_init(&link->outstanding);
  pw__ucx_list_init(&link->finished);
  pw_status_t status = pw_ucx_start(link);
  if (status == NULL && pthread_create(&link->thread, NULL, pw_ucx_progress_main, link) != 0) {
    status = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                            "ucx link %s: cannot start the progress thread", link->name);
  }
  if (status != NULL) {
    if (link->worker != NULL) ucp_worker_destroy(link->worker);
    if (link->context != NULL) ucp_cleanup(link->context);
    pw_ucx_free(link);
    return status;
  }
  link->thread_started = true;
  *out_link = link;
  return NULL;
}

/* Waits (the progress thread working) until UCX gave back every op and
 * every close, or the deadline passed. */
static void pw_ucx_drain(pw_ucx_link_t* link, uint64_t deadline) {
  for (;;) {
    pthread_mutex_lock(&link->mu);
    bool idle = link->outstanding_count == 0 && link->finished.next == &link->finished;
    for (uint32_t i = 0; idle && i < link->peer_count; ++i) {
      idle = link->peers[i]->close_request == NULL && !link->peers[i]->needs_close;
    }
    pthread_mutex_unlock(&link->mu);
    if (idle || pw_ucx_now_ns() >= deadline) return;
    pthread_cond_signal(&link->wake);
    pw_ucx_sleep_ns(500000);
  }
}

void pw__ucx_link_destroy(pw_ucx_link_t* link) {
  if (link == NULL) return;
  uint64_t deadline = pw_ucx_now_ns() + PW_UCX_DESTROY_NS;
  pthread_mutex_lock(&link->mu);
  link->stopping = true;
  pw__ucx_cancel_all(link);
  for (uint32_t i = 0; i < link->peer_count; ++i) pw_ucx_close_ep(link, link->peers[i]);
  pthread_mutex_unlock(&link->mu);
  pw__ucx_deliver(link);
  pw_ucx_drain(link, deadline);
  atomic_store_explicit(&link->stop, true, memory_order_release);
  pthread_mutex_lock(&link->mu);
  pthread_cond_broadcast(&link->wake);
  pthread_mutex_unlock(&link->mu);
  pthread_join(link->thread, NULL);
  pw__ucx_deliver(link);
  /* Only this thread is left. What UCX still holds past the deadline is
   * failed here; the worker's destruction releases the requests. */
  if (link->outstanding_count > 0) {
    pw_log(&link->logger, PW_LOG_WARN, "ucx",
           "link %s: %llu operations still in UCX after 1 s; failing them", link->name,
           (unsigned long long)link->outstanding_count);
  }
  pw__ucx_abandon_all(link);
  for (uint32_t i = 0; i < link->peer_count; ++i) {
    if (link->peers[i]->close_request != NULL) {
      ucp_request_free(link->peers[i]->close_request);
      link->peers[i]->close_request = NULL;
    }
  }
  ucp_worker_destroy(link->worker);
  ucp_cleanup(link->context);
  pw__ucx_free_abandoned(link);
  pw_ucx_free(link);
}

void pw__ucx_link_address(const pw_ucx_link_t* link, const void** out_bytes, size_t* out_size) {
  *out_bytes = link != NULL ? link->address : NULL;
  *out_size = link != NULL ? link->address_size : 0;
}

/* ---- peers ---- */

static pw_status_t pw_ucx_check_address(const pw_ucx_link_t* link, const uint8_t* a, size_t size,
                                        const char* name) {
  const char* why = NULL;
  if (a == NULL) {
    why = "NULL";
  } else if (size < PW_UCX_HEADER + 1) {
    why = "too short";
  } else if (memcmp(a, kPwUcxMagic, 4) != 0) {
    why = "bad magic";
  } else if (pw_ucx_get32(a + 4) != PW_UCX_VERSION) {
    why = "unknown version";
  } else if ((size_t)pw_ucx_get32(a + 8) != size - PW_UCX_HEADER || pw_ucx_get32(a + 12) != 0) {
    why = "length does not match";
  } else {
    uint64_t sum = (uint64_t)pw_ucx_get32(a + 16) | (uint64_t)pw_ucx_get32(a + 20) << 32;
    if (sum != pw_ucx_fnv1a(a + PW_UCX_HEADER, size - PW_UCX_HEADER)) why = "bad checksum";
  }
  if (why == NULL) return NULL;
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                        "ucx link %s: address of peer %s (%zu bytes) is not a link address: %s",
                        link->name, name, size, why);
}

static pw_status_t pw_ucx_add_peer(pw_ucx_link_t* link, pw_ucx_peer_s* peer) {
  if (link->peer_count == link->peer_capacity) {
    if (link->peer_capacity >= (1u << 20)) {
      return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "ucx link %s: %u peers", link->name,
                            (unsigned)link->peer_count);
    }
    uint32_t capacity = link->peer_capacity == 0 ? 8 : link->peer_capacity * 2;
    pw_ucx_peer_s** grown = NULL;
    PW_RETURN_IF_ERROR(pw_allocator_calloc_array(link->allocator, capacity, sizeof(*grown), 0,
                                                 (void**)&grown));
    if (link->peer_count > 0) memcpy(grown, link->peers, sizeof(*grown) * link->peer_count);
    pw_allocator_free(link->allocator, link->peers, sizeof(*grown) * link->peer_capacity);
    link->peers = grown;
    link->peer_capacity = capacity;
  }
  peer->index = link->peer_count;
  link->peers[link->peer_count++] = peer;
  return NULL;
}

pw_status_t pw__ucx_link_connect(pw_ucx_link_t* link, const void* address, size_t size,
                                 const char* name, pw_ucx_peer_t* out_peer) {
  if (out_peer != NULL) *out_peer = UINT32_MAX;
  if (link == NULL || out_peer == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "ucx connect: NULL link or out_peer");
  }
  char peer_name[PW_UCX_NAME_MAX];
  pw_ucx_copy_name(peer_name, name, "peer");
  PW_RETURN_IF_ERROR(pw_ucx_check_address(link, (const uint8_t*)address, size, peer_name));
  pw_ucx_peer_s* peer = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(link->allocator, sizeof(*peer), 0, (void**)&peer));
  peer->link = link;
  memcpy(peer->name, peer_name, sizeof(peer_name));
  /* UCX reads the address in place; give it an aligned copy. */
  size_t ucx_size = size - PW_UCX_HEADER;
  void* copy = NULL;
  pw_status_t status = pw_allocator_malloc(link->allocator, ucx_size, 0, &copy);
  if (status != NULL) {
    pw_allocator_free(link->allocator, peer, sizeof(*peer));
    return status;
  }
  memcpy(copy, (const uint8_t*)address + PW_UCX_HEADER, ucx_size);
  ucp_ep_params_t params;
  memset(&params, 0, sizeof(params));
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = (const ucp_address_t*)copy;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = pw_ucx_ep_error;
  params.err_handler.arg = peer;
  pthread_mutex_lock(&link->mu);
  if (link->stopping) {
    status = pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                            "ucx link %s: connect to %s: the link is being destroyed", link->name,
                            peer->name);
  } else {
    ucs_status_t s = ucp_ep_create(link->worker, &params, &peer->ep);
    if (s != UCS_OK) {
      peer->ep = NULL;
      status = pw_status_make(PW_STATUS_UNAVAILABLE, "ucx link %s: connect to peer %s: %s",
                              link->name, peer->name, ucs_status_string(s));
    } else {
      status = pw_ucx_add_peer(link, peer);
      if (status != NULL) pw_ucx_close_ep(link, peer);
    }
  }
  if (status == NULL) *out_peer = peer->index;
  void* orphan_close = status != NULL ? peer->close_request : NULL;
  pthread_mutex_unlock(&link->mu);
  pw_allocator_free(link->allocator, copy, ucx_size);
  if (status != NULL) {
    if (orphan_close != NULL) {
      pthread_mutex_lock(&link->mu);
      ucp_request_free(orphan_close);
      pthread_mutex_unlock(&link->mu);
    }
    pw_allocator_free(link->allocator, peer, sizeof(*peer));
    return status;
  }
  pthread_cond_signal(&link->wake);
  return NULL;
}

void pw__ucx_link_disconnect(pw_ucx_link_t* link, pw_ucx_peer_t peer) {
  if (link == NULL) return;
  pthread_mutex_lock(&link->mu);
  if (peer < link->peer_count) {
    pw_ucx_peer_s* p = link->peers[peer];
    if (p->state == PW_UCX_PEER_CONNECTED) p->state = PW_UCX_PEER_CLOSED;
    pw_ucx_close_ep(link, p);
  }
  pthread_mutex_unlock(&link->mu);
  pthread_cond_signal(&link->wake);
  pw__ucx_deliver(link);
}
