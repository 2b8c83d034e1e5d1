/* The UCX link: two links in one process move bytes both ways; errors are
 * statuses (oversized, cancelled, destroyed, garbage addresses); a peer
 * process killed with SIGKILL fails the sends to it with UNAVAILABLE. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ucx/ucx_link.h"

/* One post's completion: how often done ran and with which code. */
typedef struct ut_done_t {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int calls;
  pw_status_code_t code;
  char message[256];
} ut_done_t;

static void ut_done_init(ut_done_t* d) {
  memset(d, 0, sizeof(*d));
  pthread_mutex_init(&d->mu, NULL);
  pthread_cond_init(&d->cv, NULL);
}

static void ut_on_done(void* user, pw_status_t status) {
  ut_done_t* d = (ut_done_t*)user;
  pthread_mutex_lock(&d->mu);
  d->calls++;
  d->code = pw_status_code(status);
  snprintf(d->message, sizeof(d->message), "%s", status ? pw_status_message(status) : "");
  pthread_cond_broadcast(&d->cv);
  pthread_mutex_unlock(&d->mu);
  pw_status_free(status);
}

/* Waits up to |seconds| for the first call; returns the calls seen. */
static int ut_wait(ut_done_t* d, int seconds) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += seconds;
  pthread_mutex_lock(&d->mu);
  while (d->calls == 0) {
    if (pthread_cond_timedwait(&d->cv, &d->mu, &until) != 0) break;
  }
  int calls = d->calls;
  pthread_mutex_unlock(&d->mu);
  return calls;
}

static int ut_calls(ut_done_t* d) {
  pthread_mutex_lock(&d->mu);
  int calls = d->calls;
  pthread_mutex_unlock(&d->mu);
  return calls;
}

static pw_ucx_link_t* ut_link(const char* name) {
  pw_ucx_link_options_t options = {.struct_size = sizeof(options), .name = name};
  pw_ucx_link_t* link = NULL;
  pw_status_t s = pw__ucx_link_create(&options, &link);
  cr_assert_null(s, "create %s: %s", name, pw_status_message(s));
  return link;
}

static pw_ucx_peer_t ut_connect(pw_ucx_link_t* from, pw_ucx_link_t* to, const char* name) {
  const void* bytes = NULL;
  size_t size = 0;
  pw__ucx_link_address(to, &bytes, &size);
  cr_assert_gt(size, 0);
  pw_ucx_peer_t peer = 0;
  pw_status_t s = pw__ucx_link_connect(from, bytes, size, name, &peer);
  cr_assert_null(s, "connect %s: %s", name, pw_status_message(s));
  return peer;
}

typedef struct ut_pair_t {
  pw_ucx_link_t* a;
  pw_ucx_link_t* b;
  pw_ucx_peer_t a_to_b;
  pw_ucx_peer_t b_to_a;
} ut_pair_t;

static ut_pair_t ut_pair(void) {
  ut_pair_t p;
  p.a = ut_link("a");
  p.b = ut_link("b");
  p.a_to_b = ut_connect(p.a, p.b, "b");
  p.b_to_a = ut_connect(p.b, p.a, "a");
  return p;
}

static void ut_pair_destroy(ut_pair_t* p) {
  pw__ucx_link_destroy(p->a);
  pw__ucx_link_destroy(p->b);
}

/* Sends |size| patterned bytes from |from| to |to| with |tag|; the receive
 * is posted before the send or after it. Checks every byte. */
static void ut_roundtrip(pw_ucx_link_t* from, pw_ucx_peer_t peer, pw_ucx_link_t* to, uint64_t tag,
                         size_t size, bool recv_first) {
  uint8_t* out = malloc(size + 1);
  uint8_t* in = malloc(size + 1);
  cr_assert(out != NULL && in != NULL);
  for (size_t i = 0; i < size; ++i) out[i] = (uint8_t)(i * 131u + tag);
  memset(in, 0xEE, size + 1);
  ut_done_t sent, received;
  ut_done_init(&sent);
  ut_done_init(&received);
  size_t got = 12345;
  if (recv_first) {
    cr_assert_null(pw__ucx_link_recv(to, tag, in, size, &got, ut_on_done, &received));
  }
  cr_assert_null(pw__ucx_link_send(from, peer, tag, out, size, ut_on_done, &sent));
  if (!recv_first) {
    cr_assert_null(pw__ucx_link_recv(to, tag, in, size, &got, ut_on_done, &received));
  }
  cr_assert_eq(ut_wait(&received, 30), 1, "receive of %zu bytes never completed", size);
  cr_assert_eq(ut_wait(&sent, 30), 1, "send of %zu bytes never completed", size);
  cr_assert_eq(received.code, PW_STATUS_OK, "%s", received.message);
  cr_assert_eq(sent.code, PW_STATUS_OK, "%s", sent.message);
  cr_assert_eq(got, size);
  cr_assert(memcmp(in, out, size) == 0, "bytes of a %zu-byte message differ", size);
  cr_assert_eq(in[size], 0xEE, "wrote past the message");
  free(out);
  free(in);
}

Test(ucx, sizes_both_ways_recv_before_and_after) {
  ut_pair_t p = ut_pair();
  const size_t sizes[] = {0, 1, 64 * 1024, 16 * 1024 * 1024};
  uint64_t tag = 1;
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
    for (int first = 0; first < 2; ++first) {
      ut_roundtrip(p.a, p.a_to_b, p.b, tag++, sizes[i], first == 1);
      ut_roundtrip(p.b, p.b_to_a, p.a, tag++, sizes[i], first == 1);
    }
  }
  ut_pair_destroy(&p);
}

Test(ucx, many_tags_interleaved) {
  ut_pair_t p = ut_pair();
  enum { kTags = 64, kSize = 3000 };
  static uint8_t out[kTags][kSize], in[kTags][kSize];
  static ut_done_t sent[kTags], received[kTags];
  size_t got[kTags];
  for (int i = 0; i < kTags; ++i) {
    ut_done_init(&sent[i]);
    ut_done_init(&received[i]);
    memset(out[i], i + 1, kSize);
    memset(in[i], 0, kSize);
  }
  /* Even tags: receive first, in reverse; odd: send first. */
  for (int i = kTags - 2; i >= 0; i -= 2) {
    cr_assert_null(pw__ucx_link_recv(p.b, 1000 + i, in[i], kSize, &got[i], ut_on_done,
                                     &received[i]));
  }
  for (int i = 0; i < kTags; ++i) {
    cr_assert_null(pw__ucx_link_send(p.a, p.a_to_b, 1000 + i, out[i], (size_t)(i % 7) * 400 + 1,
                                     ut_on_done, &sent[i]));
  }
  for (int i = 1; i < kTags; i += 2) {
    cr_assert_null(pw__ucx_link_recv(p.b, 1000 + i, in[i], kSize, &got[i], ut_on_done,
                                     &received[i]));
  }
  for (int i = 0; i < kTags; ++i) {
    cr_assert_eq(ut_wait(&received[i], 30), 1, "tag %d", i);
    cr_assert_eq(ut_wait(&sent[i], 30), 1, "tag %d", i);
    cr_assert_eq(received[i].code, PW_STATUS_OK, "%s", received[i].message);
    size_t n = (size_t)(i % 7) * 400 + 1;
    cr_assert_eq(got[i], n, "tag %d got %zu", i, got[i]);
    for (size_t k = 0; k < n; ++k) cr_assert_eq(in[i][k], (uint8_t)(i + 1));
  }
  ut_pair_destroy(&p);
  for (int i = 0; i < kTags; ++i) cr_assert_eq(ut_calls(&received[i]), 1);
}

Test(ucx, oversized_is_out_of_range) {
  ut_pair_t p = ut_pair();
  uint8_t out[4096], in[100];
  memset(out, 7, sizeof(out));
  ut_done_t sent, received;
  ut_done_init(&sent);
  ut_done_init(&received);
  cr_assert_null(pw__ucx_link_recv(p.b, 5, in, sizeof(in), NULL, ut_on_done, &received));
  cr_assert_null(pw__ucx_link_send(p.a, p.a_to_b, 5, out, sizeof(out), ut_on_done, &sent));
  cr_assert_eq(ut_wait(&received, 30), 1);
  cr_assert_eq(received.code, PW_STATUS_OUT_OF_RANGE, "%s", received.message);
  cr_assert_not_null(strstr(received.message, "tag 5"), "%s", received.message);
  ut_wait(&sent, 30);
  ut_pair_destroy(&p);
  cr_assert_eq(ut_calls(&sent), 1);
  cr_assert_eq(ut_calls(&received), 1);
}

/* A large message (rendezvous) received into a 1-byte buffer: the
 * receive fails OUT_OF_RANGE and the send completes too, before either
 * link goes (a worker drains a COPY RECV it cannot place this way, so the
 * sender's buffer is given back). */
Test(ucx, rendezvous_into_a_short_buffer_completes_the_send) {
  ut_pair_t p = ut_pair();
  size_t size = 4u << 20;
  uint8_t* out = malloc(size);
  cr_assert_not_null(out);
  memset(out, 3, size);
  uint8_t in[1];
  ut_done_t sent, received;
  ut_done_init(&sent);
  ut_done_init(&received);
  cr_assert_null(pw__ucx_link_recv(p.b, 6, in, sizeof(in), NULL, ut_on_done, &received));
  cr_assert_null(pw__ucx_link_send(p.a, p.a_to_b, 6, out, size, ut_on_done, &sent));
  cr_assert_eq(ut_wait(&received, 30), 1);
  cr_assert_eq(received.code, PW_STATUS_OUT_OF_RANGE, "%s", received.message);
  cr_assert_eq(ut_wait(&sent, 30), 1, "the send never completed");
  ut_pair_destroy(&p);
  free(out);
  cr_assert_eq(ut_calls(&sent), 1);
  cr_assert_eq(ut_calls(&received), 1);
}

Test(ucx, cancel_tag_cancels_once) {
  ut_pair_t p = ut_pair();
  uint8_t in[16];
  ut_done_t cancelled, other;
  ut_done_init(&cancelled);
  ut_done_init(&other);
  cr_assert_null(pw__ucx_link_recv(p.b, 77, in, sizeof(in), NULL, ut_on_done, &cancelled));
  cr_assert_null(pw__ucx_link_recv(p.b, 78, in, sizeof(in), NULL, ut_on_done, &other));
  pw__ucx_link_cancel_tag(p.b, 77);
  cr_assert_eq(ut_wait(&cancelled, 30), 1);
  cr_assert_eq(cancelled.code, PW_STATUS_CANCELLED, "%s", cancelled.message);
  pw__ucx_link_cancel_tag(p.b, 77); /* nothing left: a no-op */
  pw__ucx_link_cancel_tag(p.b, 999);
  cr_assert_eq(ut_calls(&other), 0, "cancelling tag 77 touched tag 78");
  /* The cancelled tag's message later goes nowhere; 78 still works. */
  uint8_t byte = 42;
  ut_done_t sent;
  ut_done_init(&sent);
  cr_assert_null(pw__ucx_link_send(p.a, p.a_to_b, 78, &byte, 1, ut_on_done, &sent));
  cr_assert_eq(ut_wait(&other, 30), 1);
  cr_assert_eq(other.code, PW_STATUS_OK, "%s", other.message);
  cr_assert_eq(in[0], 42);
  ut_wait(&sent, 30);
  ut_pair_destroy(&p);
  cr_assert_eq(ut_calls(&cancelled), 1);
}

Test(ucx, destroy_cancels_outstanding_receives) {
  ut_pair_t p = ut_pair();
  enum { kN = 5 };
  uint8_t in[kN][8];
  ut_done_t d[kN];
  for (int i = 0; i < kN; ++i) {
    ut_done_init(&d[i]);
    cr_assert_null(pw__ucx_link_recv(p.b, 300 + i, in[i], 8, NULL, ut_on_done, &d[i]));
  }
  pw__ucx_link_destroy(p.b);
  for (int i = 0; i < kN; ++i) {
    cr_assert_eq(ut_calls(&d[i]), 1, "receive %d: %d calls", i, ut_calls(&d[i]));
    cr_assert_eq(d[i].code, PW_STATUS_CANCELLED, "%s", d[i].message);
  }
  pw__ucx_link_destroy(p.a);
}

Test(ucx, bad_arguments_are_statuses) {
  pw_ucx_link_t* a = ut_link("a");
  pw_ucx_peer_t peer = 7;
  uint8_t garbage[256];
  for (size_t i = 0; i < sizeof(garbage); ++i) garbage[i] = (uint8_t)(i * 37 + 11);
  pw_status_t s = pw__ucx_link_connect(a, garbage, sizeof(garbage), "junk", &peer);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(pw_status_message(s), "junk"), "%s", pw_status_message(s));
  pw_status_free(s);
  cr_assert_eq(peer, UINT32_MAX);
  s = pw__ucx_link_connect(a, NULL, 0, "null", &peer);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  /* A real address, truncated, then one byte flipped. */
  const void* bytes = NULL;
  size_t size = 0;
  pw__ucx_link_address(a, &bytes, &size);
  uint8_t* copy = malloc(size);
  memcpy(copy, bytes, size);
  s = pw__ucx_link_connect(a, copy, size - 1, "short", &peer);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  copy[size - 3] ^= 0x40;
  s = pw__ucx_link_connect(a, copy, size, "flipped", &peer);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(pw_status_message(s), "checksum"), "%s", pw_status_message(s));
  pw_status_free(s);
  free(copy);
  /* Unknown peer, missing done. */
  ut_done_t d;
  ut_done_init(&d);
  uint8_t byte = 0;
  s = pw__ucx_link_send(a, 3, 1, &byte, 1, ut_on_done, &d);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  s = pw__ucx_link_recv(a, 1, &byte, 1, NULL, NULL, NULL);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  pw__ucx_link_destroy(a);
  cr_assert_eq(ut_calls(&d), 0, "done ran for a post that failed");
  pw__ucx_link_destroy(NULL);
}

/* ---- a peer process that dies ---- */

static void ut_write_all(int fd, const void* p, size_t n) {
  const uint8_t* b = p;
  while (n > 0) {
    ssize_t k = write(fd, b, n);
    if (k <= 0) _exit(3);
    b += k;
    n -= (size_t)k;
  }
}

static bool ut_read_all(int fd, void* p, size_t n) {
  uint8_t* b = p;
  while (n > 0) {
    ssize_t k = read(fd, b, n);
    if (k <= 0) return false;
    b += k;
    n -= (size_t)k;
  }
  return true;
}

static void ut_send_address(int fd, pw_ucx_link_t* link) {
  const void* bytes = NULL;
  size_t size = 0;
  pw__ucx_link_address(link, &bytes, &size);
  uint32_t n = (uint32_t)size;
  ut_write_all(fd, &n, sizeof(n));
  ut_write_all(fd, bytes, size);
}

static uint8_t* ut_read_address(int fd, size_t* out_size) {
  uint32_t n = 0;
  if (!ut_read_all(fd, &n, sizeof(n)) || n == 0 || n > (1u << 20)) return NULL;
  uint8_t* bytes = malloc(n);
  if (bytes == NULL || !ut_read_all(fd, bytes, n)) {
    free(bytes);
    return NULL;
  }
  *out_size = n;
  return bytes;
}

/* The child: its own link, the parent's address, one message tagged 1,
 * then it waits to be killed. */
static void ut_child(int to_parent, int from_parent) {
  alarm(60); /* never outlive a broken parent */
  pw_ucx_link_options_t options = {.struct_size = sizeof(options), .name = "child"};
  pw_ucx_link_t* link = NULL;
  if (pw__ucx_link_create(&options, &link) != NULL) _exit(4);
  ut_send_address(to_parent, link);
  size_t size = 0;
  uint8_t* parent = ut_read_address(from_parent, &size);
  if (parent == NULL) _exit(5);
  pw_ucx_peer_t peer = 0;
  if (pw__ucx_link_connect(link, parent, size, "parent", &peer) != NULL) _exit(6);
  static const char kHello[] = "hello from the child";
  ut_done_t sent;
  ut_done_init(&sent);
  if (pw__ucx_link_send(link, peer, 1, kHello, sizeof(kHello), ut_on_done, &sent) != NULL) _exit(7);
  for (;;) pause();
}

Test(ucx, killed_peer_fails_sends_unavailable) {
  int up[2], down[2];
  cr_assert_eq(pipe(up), 0);
  cr_assert_eq(pipe(down), 0);
  pid_t child = fork();
  cr_assert_geq(child, 0);
  if (child == 0) {
    close(up[0]);
    close(down[1]);
    ut_child(up[1], down[0]);
  }
  close(up[1]);
  close(down[0]);
  pw_ucx_link_t* link = ut_link("parent");
  size_t size = 0;
  uint8_t* address = ut_read_address(up[0], &size);
  cr_assert_not_null(address, "no address from the child");
  ut_send_address(down[1], link);
  pw_ucx_peer_t peer = 0;
  pw_status_t s = pw__ucx_link_connect(link, address, size, "child", &peer);
  cr_assert_null(s, "%s", pw_status_message(s));
  free(address);

  char hello[64] = {0};
  size_t got = 0;
  ut_done_t first, pending;
  ut_done_init(&first);
  ut_done_init(&pending);
  cr_assert_null(pw__ucx_link_recv(link, 1, hello, sizeof(hello), &got, ut_on_done, &first));
  cr_assert_eq(ut_wait(&first, 30), 1, "the child's message never came");
  cr_assert_eq(first.code, PW_STATUS_OK, "%s", first.message);
  cr_assert_str_eq(hello, "hello from the child");
  /* A receive outstanding for the child while it dies. */
  char never[8];
  cr_assert_null(pw__ucx_link_recv(link, 2, never, sizeof(never), NULL, ut_on_done, &pending));

  /* A large send the child never receives: UCX sends it by rendezvous,
   * which waits for the child's receive, so it is outstanding when the
   * child dies. */
  enum { kBig = 16 * 1024 * 1024 };
  uint8_t* big = calloc(1, kBig);
  ut_done_t big_sent;
  ut_done_init(&big_sent);
  cr_assert_null(pw__ucx_link_send(link, peer, 3, big, kBig, ut_on_done, &big_sent));

  cr_assert_eq(kill(child, SIGKILL), 0);
  int wstatus = 0;
  cr_assert_eq(waitpid(child, &wstatus, 0), child);
  cr_assert(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL, "child status %d", wstatus);

  /* Sends to the dead child: each completes or is refused; within the
   * deadline one must fail UNAVAILABLE naming it. */
  static uint8_t payload[256 * 1024];
  bool failed = false;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (uint64_t tag = 100; !failed; ++tag) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    cr_assert_lt(now.tv_sec - start.tv_sec, 60, "no send to the dead child failed in 60 s");
    ut_done_t d;
    ut_done_init(&d);
    s = pw__ucx_link_send(link, peer, tag, payload, sizeof(payload), ut_on_done, &d);
    if (s != NULL) {
      cr_assert_eq(pw_status_code(s), PW_STATUS_UNAVAILABLE, "%s", pw_status_message(s));
      cr_assert_not_null(strstr(pw_status_message(s), "child"), "%s", pw_status_message(s));
      cr_log_info("send %llu after the kill refused: %s", (unsigned long long)(tag - 100),
                  pw_status_message(s));
      pw_status_free(s);
      failed = true;
      break;
    }
    cr_assert_eq(ut_wait(&d, 60), 1, "a send to the dead child never completed");
    if (d.code != PW_STATUS_OK) {
      cr_assert_eq(d.code, PW_STATUS_UNAVAILABLE, "%s", d.message);
      cr_assert_not_null(strstr(d.message, "child"), "%s", d.message);
      cr_log_info("send %llu after the kill: %s", (unsigned long long)(tag - 100), d.message);
      failed = true;
    }
    struct timespec pause_ts = {0, 20 * 1000 * 1000};
    nanosleep(&pause_ts, NULL);
  }
  cr_assert_eq(ut_wait(&big_sent, 60), 1, "the outstanding send never completed");
  cr_assert_eq(big_sent.code, PW_STATUS_UNAVAILABLE, "%s", big_sent.message);
  cr_assert_not_null(strstr(big_sent.message, "child"), "%s", big_sent.message);
  free(big);
  cr_assert_eq(ut_calls(&pending), 0);
  pw__ucx_link_cancel_tag(link, 2);
  cr_assert_eq(ut_wait(&pending, 30), 1);
  cr_assert_eq(pending.code, PW_STATUS_CANCELLED, "%s", pending.message);
  pw__ucx_link_destroy(link);
  close(up[0]);
  close(down[1]);
}
