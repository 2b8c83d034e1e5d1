/* What the runtime stress tests that run graphs on one-device CPU slices
 * share (stress_chain.c, stress_graph_exec.c): failure and check counters,
 * status checks, and landing a run in flight (wait, read the output back,
 * compare, release). Include once, after defining STRESS_NAME (the
 * program's name in messages), N (floats per buffer) and DEADLINE_NS. */
#ifndef PW_TESTS_RUNTIME_STRESS_FLIGHTS_H_
#define PW_TESTS_RUNTIME_STRESS_FLIGHTS_H_

#include <stdbool.h>
#include <stdio.h>

#include "pathways/pathways.h"

static _Atomic int g_failures;
static _Atomic long g_checked; /* outputs read back and right */

/* True for OK; otherwise reports |s| (consumed) and counts a failure. */
static bool ok(pw_status_t s, const char* what, int thread) {
  if (s == NULL) return true;
  char m[512];
  pw_status_format(s, m, sizeof(m));
  fprintf(stderr, STRESS_NAME ": thread %d: %s: %s\n", thread, what, m);
  pw_status_free(s);
  g_failures++;
  return false;
}

#define TRY(expr, what)                       \
  do {                                        \
    if (!ok((expr), (what), index)) goto out; \
  } while (0)

/* A run in flight: its input and output, its done event, and the output
 * it must produce. */
typedef struct flight_t {
  pw_buffer_t x, y;
  pw_event_t* done;
  float want[N];
} flight_t;

/* Waits for |f|, checks its output, releases everything. */
static bool land(pw_client_t* client, flight_t* f, int index) {
  bool good = ok(pw_event_wait(f->done, pw_deadline_from_timeout(DEADLINE_NS)), "wait", index);
  pw_event_release(f->done);
  f->done = NULL;
  float back[N] = {0};
  if (good) {
    good = ok(pw_buffer_to_host(client, f->y, back, sizeof(back),
                                pw_deadline_from_timeout(DEADLINE_NS)),
              "to_host", index);
  }
  for (int e = 0; good && e < N; ++e) {
    if (back[e] != f->want[e]) {
      fprintf(stderr, STRESS_NAME ": thread %d: element %d is %g, want %g\n", index, e,
              (double)back[e], (double)f->want[e]);
      g_failures++;
      good = false;
    }
  }
  if (good) g_checked++;
  good &= ok(pw_buffer_release(client, f->y), "release y", index);
  good &= ok(pw_buffer_release(client, f->x), "release x", index);
  return good;
}

#endif /* PW_TESTS_RUNTIME_STRESS_FLIGHTS_H_ */
