/* Stress: threads post sends and receives on two links at once.
 *
 * kThreads threads each own a range of tags; for each tag a thread posts
 * the receive on link b and the send on link a, in an order that depends
 * on the tag; for a third of the tags a first receive is posted and
 * cancelled before the real one. Every done must run exactly once: sends
 * and real receives OK with the sent bytes, cancelled receives CANCELLED.
 *
 * Usage: stress_ucx_link [messages per thread]   (default 20000)
 * Prints one summary line; exits non-zero on any violation. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ucx/ucx_link.h"

enum { kThreads = 4, kSize = 96 };

typedef struct slot_t {
  uint8_t out[kSize];
  uint8_t in[kSize];
  size_t got;
  bool cancel;
  atomic_int send_calls;
  atomic_int recv_calls;
  atomic_int send_code;
  atomic_int recv_code;
  atomic_int cancel_calls;
  atomic_int cancel_code;
  uint8_t scratch[kSize];
} slot_t;

static pw_ucx_link_t* g_a;
static pw_ucx_link_t* g_b;
static pw_ucx_peer_t g_peer;
static slot_t* g_slots;
static size_t g_per_thread;
static atomic_size_t g_done;
static atomic_size_t g_violations;

static void on_send(void* user, pw_status_t status) {
  slot_t* s = user;
  atomic_store(&s->send_code, (int)pw_status_code(status));
  atomic_fetch_add(&s->send_calls, 1);
  atomic_fetch_add(&g_done, 1);
  pw_status_free(status);
}

static void on_recv(void* user, pw_status_t status) {
  slot_t* s = user;
  atomic_store(&s->recv_code, (int)pw_status_code(status));
  atomic_fetch_add(&s->recv_calls, 1);
  atomic_fetch_add(&g_done, 1);
  pw_status_free(status);
}

static void on_cancelled(void* user, pw_status_t status) {
  slot_t* s = user;
  atomic_store(&s->cancel_code, (int)pw_status_code(status));
  atomic_fetch_add(&s->cancel_calls, 1);
  atomic_fetch_add(&g_done, 1);
  pw_status_free(status);
}

static void fail_post(const char* what, size_t i, pw_status_t status) {
  fprintf(stderr, "stress_ucx_link: %s %zu: %s\n", what, i, pw_status_message(status));
  pw_status_free(status);
  atomic_fetch_add(&g_violations, 1);
}

static void* worker(void* arg) {
  size_t t = (size_t)(uintptr_t)arg;
  for (size_t k = 0; k < g_per_thread; ++k) {
    size_t i = t * g_per_thread + k;
    slot_t* s = &g_slots[i];
    uint64_t tag = 1 + i;
    bool recv_first = (i % 2) == 0;
    pw_status_t st = NULL;
    if (s->cancel) {
      st = pw__ucx_link_recv(g_b, tag, s->scratch, kSize, NULL, on_cancelled, s);
      if (st != NULL) fail_post("receive", i, st);
      pw__ucx_link_cancel_tag(g_b, tag);
    }
    if (recv_first) {
      st = pw__ucx_link_recv(g_b, tag, s->in, kSize, &s->got, on_recv, s);
      if (st != NULL) fail_post("receive", i, st);
    }
    st = pw__ucx_link_send(g_a, g_peer, tag, s->out, kSize, on_send, s);
    if (st != NULL) fail_post("send", i, st);
    if (!recv_first) {
      st = pw__ucx_link_recv(g_b, tag, s->in, kSize, &s->got, on_recv, s);
      if (st != NULL) fail_post("receive", i, st);
    }
  }
  return NULL;
}

static pw_ucx_link_t* make_link(const char* name) {
  pw_ucx_link_options_t options = {.struct_size = sizeof(options), .name = name};
  pw_ucx_link_t* link = NULL;
  pw_status_t st = pw__ucx_link_create(&options, &link);
  if (st != NULL) {
    fprintf(stderr, "stress_ucx_link: create %s: %s\n", name, pw_status_message(st));
    exit(2);
  }
  return link;
}

int main(int argc, char** argv) {
  g_per_thread = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 20000;
  if (g_per_thread == 0) g_per_thread = 1;
  size_t total = g_per_thread * kThreads;
  g_slots = calloc(total, sizeof(slot_t));
  if (g_slots == NULL) return 2;
  for (size_t i = 0; i < total; ++i) {
    for (size_t k = 0; k < kSize; ++k) g_slots[i].out[k] = (uint8_t)(i * 7 + k);
    g_slots[i].cancel = (i % 3) == 1;
  }
  g_a = make_link("a");
  g_b = make_link("b");
  const void* bytes = NULL;
  size_t size = 0;
  pw__ucx_link_address(g_b, &bytes, &size);
  pw_status_t st = pw__ucx_link_connect(g_a, bytes, size, "b", &g_peer);
  if (st != NULL) {
    fprintf(stderr, "stress_ucx_link: connect: %s\n", pw_status_message(st));
    return 2;
  }
  pthread_t threads[kThreads];
  for (size_t t = 0; t < kThreads; ++t) {
    pthread_create(&threads[t], NULL, worker, (void*)(uintptr_t)t);
  }
  for (size_t t = 0; t < kThreads; ++t) pthread_join(threads[t], NULL);
  /* Every send and every receive: 2 per slot, 3 with a cancelled one. Bounded wait (polling the
   * count; the deadline only bounds a hang). */
  size_t expected = 2 * total;
  for (size_t i = 0; i < total; ++i) expected += g_slots[i].cancel;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  while (atomic_load(&g_done) < expected) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec > 120) break;
    struct timespec nap = {0, 1000000};
    nanosleep(&nap, NULL);
  }
  size_t done_before_destroy = atomic_load(&g_done);
  pw__ucx_link_destroy(g_a);
  pw__ucx_link_destroy(g_b);
  size_t bad = atomic_load(&g_violations);
  size_t cancelled = 0;
  for (size_t i = 0; i < total; ++i) {
    slot_t* s = &g_slots[i];
    int sc = atomic_load(&s->send_calls), rc = atomic_load(&s->recv_calls);
    if (sc != 1 || rc != 1) {
      if (bad < 10) fprintf(stderr, "slot %zu: %d send dones, %d receive dones\n", i, sc, rc);
      bad++;
      continue;
    }
    if (atomic_load(&s->send_code) != PW_STATUS_OK) {
      if (bad < 10) fprintf(stderr, "slot %zu: send code %d\n", i, atomic_load(&s->send_code));
      bad++;
    }
    if (s->cancel && (atomic_load(&s->cancel_calls) != 1 ||
                      atomic_load(&s->cancel_code) != PW_STATUS_CANCELLED)) {
      if (bad < 10) {
        fprintf(stderr, "slot %zu: cancelled receive: %d dones, code %d\n", i,
                atomic_load(&s->cancel_calls), atomic_load(&s->cancel_code));
      }
      bad++;
    }
    if (atomic_load(&s->recv_code) != PW_STATUS_OK) {
      if (bad < 10) fprintf(stderr, "slot %zu: receive code %d\n", i, atomic_load(&s->recv_code));
      bad++;
    } else if (s->got != kSize || memcmp(s->in, s->out, kSize) != 0) {
      if (bad < 10) fprintf(stderr, "slot %zu: bytes differ (%zu received)\n", i, s->got);
      bad++;
    }
    cancelled += s->cancel;
  }
  printf("stress_ucx_link: %zu messages (%zu receives cancelled), %zu dones before destroy of "
         "%zu, %zu violations\n",
         total, cancelled, done_before_destroy, expected, bad);
  free(g_slots);
  return bad == 0 && done_before_destroy == expected ? 0 : 1;
}
