/* The plain-UCX peer of `pw-bench remote` (remote_ucx.h). */
#define _GNU_SOURCE
#include "remote_ucx.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include "bench_util.h"

#define PW_RUCX_TAG_DATA 1u
#define PW_RUCX_TAG_ACK 2u
#define PW_RUCX_TAG_PING 3u /* wakes the receiver before a timed transfer */
#define PW_RUCX_QUIT UINT64_MAX /* a PING saying stop */

typedef struct pw_rucx_side_s {
  ucp_context_h context;
  ucp_worker_h worker;
  ucp_ep_h ep;
  void* buffer;
  size_t capacity;
  ucp_mem_h memh;
  uint64_t ack;       /* the 8-byte message (unregistered: small, eager) */
} pw_rucx_side_t;

struct pw_rucx_s {
  pw_rucx_side_t side;
  pid_t child;
};

static int pw_rucx_fail(const char* what, ucs_status_t s) {
  fprintf(stderr, "pw-bench remote: ucx peer: %s: %s\n", what, ucs_status_string(s));
  return -1;
}

static int pw_rucx_open(pw_rucx_side_t* p, size_t capacity) {
  memset(p, 0, sizeof(*p));
  ucp_config_t* config = NULL;
  ucs_status_t s = ucp_config_read(NULL, NULL, &config);
  if (s != UCS_OK) return pw_rucx_fail("ucp_config_read", s);
  ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                         .features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP};
  s = ucp_init(&params, config, &p->context);
  ucp_config_release(config);
  if (s != UCS_OK) return pw_rucx_fail("ucp_init", s);
  ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                            .thread_mode = UCS_THREAD_MODE_SINGLE};
  s = ucp_worker_create(p->context, &wp, &p->worker);
  if (s != UCS_OK) return pw_rucx_fail("ucp_worker_create", s);
  p->capacity = capacity;
  ucp_mem_map_params_t mp = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                                           UCP_MEM_MAP_PARAM_FIELD_FLAGS,
                             .length = capacity, .flags = UCP_MEM_MAP_ALLOCATE};
  s = ucp_mem_map(p->context, &mp, &p->memh);
  if (s != UCS_OK) return pw_rucx_fail("ucp_mem_map", s);
  ucp_mem_attr_t attr = {.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS};
  s = ucp_mem_query(p->memh, &attr);
  if (s != UCS_OK) return pw_rucx_fail("ucp_mem_query", s);
  p->buffer = attr.address;
  memset(p->buffer, 0x5a, capacity); /* touched: no first-touch faults in a timed run */
  return 0;
}

static void pw_rucx_close(pw_rucx_side_t* p) {
  if (p->ep != NULL) {
    ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                              .flags = UCP_EP_CLOSE_FLAG_FORCE};
    void* r = ucp_ep_close_nbx(p->ep, &rp);
    while (UCS_PTR_IS_PTR(r) && ucp_request_check_status(r) == UCS_INPROGRESS) {
      ucp_worker_progress(p->worker);
    }
    if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);
  }
  if (p->memh != NULL) ucp_mem_unmap(p->context, p->memh);
  if (p->worker != NULL) ucp_worker_destroy(p->worker);
  if (p->context != NULL) ucp_cleanup(p->context);
  memset(p, 0, sizeof(*p));
}

static void pw_rucx_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
  (void)arg;
  (void)ep;
  (void)status;
}

/* Writes this side's address to |wfd|, reads the other's from |rfd|,
 * makes the endpoint. */
static int pw_rucx_connect(pw_rucx_side_t* p, int rfd, int wfd) {
  ucp_address_t* address = NULL;
  size_t size = 0;
  ucs_status_t s = ucp_worker_get_address(p->worker, &address, &size);
  if (s != UCS_OK) return pw_rucx_fail("ucp_worker_get_address", s);
  uint64_t n = size;
  bool ok = write(wfd, &n, sizeof(n)) == (ssize_t)sizeof(n) &&
            write(wfd, address, size) == (ssize_t)size;
  ucp_worker_release_address(p->worker, address);
  uint64_t m = 0;
  ok = ok && read(rfd, &m, sizeof(m)) == (ssize_t)sizeof(m) && m > 0 && m < (1u << 20);
  void* peer = ok ? malloc(m) : NULL;
  size_t got = 0;
  while (peer != NULL && got < m) {
    ssize_t r = read(rfd, (char*)peer + got, m - got);
    if (r <= 0) break;
    got += (size_t)r;
  }
  if (peer == NULL || got != m) {
    free(peer);
    fprintf(stderr, "pw-bench remote: ucx peer: address exchange failed\n");
    return -1;
  }
  ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
                        .address = peer, .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                        .err_handler = {.cb = pw_rucx_ep_error, .arg = NULL}};
  s = ucp_ep_create(p->worker, &ep, &p->ep);
  free(peer);
  if (s != UCS_OK) {
    p->ep = NULL;
    return pw_rucx_fail("ucp_ep_create", s);
  }
  return 0;
}

/* One idle turn of a busy-poll: every 64th a sched_yield, so the two
 * sides sharing a vCPU with each other or with other work both run. */
static void pw_rucx_idle(void) {
  static unsigned spins;
  if (++spins % 64 == 0) sched_yield();
}

/* Busy-polls |request| to its end. */
static ucs_status_t pw_rucx_wait(pw_rucx_side_t* p, void* request) {
  if (!UCS_PTR_IS_PTR(request)) return UCS_PTR_STATUS(request);
  ucs_status_t s;
  while ((s = ucp_request_check_status(request)) == UCS_INPROGRESS) {
    if (ucp_worker_progress(p->worker) == 0) pw_rucx_idle();
  }
  ucp_request_free(request);
  return s;
}

static void* pw_rucx_send(pw_rucx_side_t* p, const void* bytes, size_t size, uint64_t tag,
                          bool registered) {
  ucp_request_param_t rp = {.op_attr_mask = registered ? UCP_OP_ATTR_FIELD_MEMH : 0,
                            .memh = registered ? p->memh : NULL};
  return ucp_tag_send_nbx(p->ep, bytes, size, tag, &rp);
}

pw_rucx_t* pw_rucx_start(size_t max_bytes) {
  int to_child[2], from_child[2];
  if (pipe2(to_child, O_CLOEXEC) != 0) return NULL;
  if (pipe2(from_child, O_CLOEXEC) != 0) {
    close(to_child[0]), close(to_child[1]);
    return NULL;
  }
  pw_rucx_t* u = calloc(1, sizeof(*u));
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (u == NULL || n <= 0) {
    free(u);
    return NULL;
  }
  self[n] = '\0';
  char fds[64];
  fflush(NULL);
  u->child = fork();
  if (u->child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* dies with the bench */
    /* The child's ends survive exec; the rest close on it. */
    int r = dup(to_child[0]), w = dup(from_child[1]);
    snprintf(fds, sizeof(fds), "%d,%d,%zu", r, w, max_bytes);
    execl(self, self, "remote", "--ucx-peer", fds, (char*)NULL);
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  int rc = u->child > 0 ? pw_rucx_open(&u->side, max_bytes) : -1;
  if (rc == 0) rc = pw_rucx_connect(&u->side, from_child[0], to_child[1]);
  close(to_child[1]);
  close(from_child[0]);
  if (rc != 0) {
    pw_rucx_stop(u);
    return NULL;
  }
  /* A first transfer wires the endpoint up (UCX connects lazily). */
  if (pw_rucx_transfer(u, 8, false) < 0) {
    pw_rucx_stop(u);
    return NULL;
  }
  return u;
}

/* Ping: the receiver is awake and busy-polling (its wakeup is no part of
 * the transfer's time). */
static int pw_rucx_ping(pw_rucx_side_t* p, uint64_t ping) {
  ucp_request_param_t rp = {.op_attr_mask = 0};
  void* pong = ucp_tag_recv_nbx(p->worker, &p->ack, sizeof(p->ack), PW_RUCX_TAG_ACK, UINT64_MAX,
                                &rp);
  ucs_status_t s1 = pw_rucx_wait(p, pw_rucx_send(p, &ping, sizeof(ping), PW_RUCX_TAG_PING, false));
  ucs_status_t s2 = pw_rucx_wait(p, pong);
  if (s1 != UCS_OK || s2 != UCS_OK) return pw_rucx_fail("ping", s1 != UCS_OK ? s1 : s2);
  return 0;
}

double pw_rucx_transfer(pw_rucx_t* u, size_t bytes, bool fresh) {
  pw_rucx_side_t* p = &u->side;
  if (bytes > p->capacity || pw_rucx_ping(p, (uint64_t)bytes << 1 | (fresh ? 1 : 0)) != 0) {
    return -1;
  }
  ucp_request_param_t rp = {.op_attr_mask = 0};
  int64_t t0 = pw_bench_now_ns();
  void* ack = ucp_tag_recv_nbx(p->worker, &p->ack, sizeof(p->ack), PW_RUCX_TAG_ACK, UINT64_MAX,
                               &rp);
  void* send = pw_rucx_send(p, p->buffer, bytes, PW_RUCX_TAG_DATA, true);
  ucs_status_t s1 = pw_rucx_wait(p, send);
  ucs_status_t s2 = pw_rucx_wait(p, ack);
  double ns = (double)(pw_bench_now_ns() - t0);
  if (s1 != UCS_OK || s2 != UCS_OK) {
    pw_rucx_fail("transfer", s1 != UCS_OK ? s1 : s2);
    return -1;
  }
  return ns;
}

void pw_rucx_stop(pw_rucx_t* u) {
  if (u == NULL) return;
  if (u->side.ep != NULL) {
    uint64_t quit = PW_RUCX_QUIT;
    (void)pw_rucx_wait(&u->side, pw_rucx_send(&u->side, &quit, sizeof(quit), PW_RUCX_TAG_PING,
                                              false));
  }
  if (u->child > 0) {
    int waited = 0;
    while (waitpid(u->child, NULL, WNOHANG) == 0 && waited < 200) {
      ucp_worker_progress(u->side.worker);
      usleep(10000);
      waited++;
    }
    if (waited >= 200) {
      kill(u->child, SIGKILL);
      waitpid(u->child, NULL, 0);
    }
  }
  pw_rucx_close(&u->side);
  free(u);
}

/* Waits for |r| (a request or a status): idle, spins 1 ms after the last
 * progress, then sleeps in ucp_worker_wait; |spin|: never sleeps. */
static ucs_status_t pw_rucx_serve_wait(pw_rucx_side_t* p, void* r, bool spin) {
  int64_t idle_since = pw_bench_now_ns();
  ucs_status_t s = UCS_PTR_IS_PTR(r) ? UCS_INPROGRESS : UCS_PTR_STATUS(r);
  while (s == UCS_INPROGRESS) {
    if (ucp_worker_progress(p->worker) != 0) {
      idle_since = pw_bench_now_ns();
    } else if (!spin && pw_bench_now_ns() - idle_since > 1000000) {
      if (ucp_worker_arm(p->worker) == UCS_OK) ucp_worker_wait(p->worker);
      idle_since = pw_bench_now_ns();
    } else {
      pw_rucx_idle();
    }
    s = ucp_request_check_status(r);
  }
  if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);
  return s;
}

/* The receiver: a PING (answered at once; it carries the size and whether
 * to receive fresh) announces each message, whose receive is posted
 * before the pong and busy-polled; each message gets an ack. A QUIT ping
 * ends it. */
static int pw_rucx_serve(pw_rucx_side_t* p) {
  for (;;) {
    uint64_t ping = 0;
    ucp_tag_recv_info_t info;
    memset(&info, 0, sizeof(info));
    ucp_request_param_t pp = {.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO,
                              .recv_info.tag_info = &info};
    void* r = ucp_tag_recv_nbx(p->worker, &ping, sizeof(ping), PW_RUCX_TAG_PING, UINT64_MAX, &pp);
    ucs_status_t s = pw_rucx_serve_wait(p, r, false);
    if (s != UCS_OK) return pw_rucx_fail("ping", s);
    if (ping == PW_RUCX_QUIT) return 0;
    /* Fresh: into memory mapped for this message (malloc maps large
     * blocks anew), unregistered, as a receiver allocating its output
     * would; else the registered buffer. */
    size_t size = (size_t)(ping >> 1);
    bool fresh = (ping & 1) != 0 && size > 0 && size <= p->capacity;
    void* into = fresh ? malloc(size) : p->buffer;
    if (into == NULL) return -1;
    ucp_request_param_t rp = {.op_attr_mask = (fresh ? 0 : UCP_OP_ATTR_FIELD_MEMH) |
                                              UCP_OP_ATTR_FIELD_RECV_INFO,
                              .memh = fresh ? NULL : p->memh, .recv_info.tag_info = &info};
    r = ucp_tag_recv_nbx(p->worker, into, fresh ? size : p->capacity, PW_RUCX_TAG_DATA,
                         UINT64_MAX, &rp);
    uint64_t pong = 0;
    s = pw_rucx_wait(p, pw_rucx_send(p, &pong, sizeof(pong), PW_RUCX_TAG_ACK, false));
    if (s == UCS_OK) s = pw_rucx_serve_wait(p, r, true);
    if (fresh) free(into);
    if (s != UCS_OK) return pw_rucx_fail("receive", s);
    p->ack = info.length;
    s = pw_rucx_wait(p, pw_rucx_send(p, &p->ack, sizeof(p->ack), PW_RUCX_TAG_ACK, false));
    if (s != UCS_OK) return pw_rucx_fail("ack", s);
  }
}

int pw_rucx_peer_main(const char* fds) {
  int rfd = -1, wfd = -1;
  size_t capacity = 0;
  if (sscanf(fds, "%d,%d,%zu", &rfd, &wfd, &capacity) != 3 || capacity < 8) {
    fprintf(stderr, "pw-bench remote: --ucx-peer R,W,BYTES (pipe fds, buffer), not '%s'\n",
            fds);
    return 2;
  }
  pw_rucx_side_t p;
  int rc = pw_rucx_open(&p, capacity);
  if (rc == 0) rc = pw_rucx_connect(&p, rfd, wfd);
  close(rfd);
  close(wfd);
  if (rc == 0) rc = pw_rucx_serve(&p);
  pw_rucx_close(&p);
  return rc == 0 ? 0 : 1;
}
