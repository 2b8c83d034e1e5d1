/* Stress: worker threads run a layered random DAG through a shared MPMC
 * work ring, completing inputs of shared nodes concurrently (fan-in from a
 * whole layer into a sink, multi-part nodes whose parts finish on different
 * threads, injected failures). Checks, for every node of every round:
 *   - it became due exactly once, in exactly one thread's ready list
 *     (READY to run, or FAILED because an input failed);
 *   - it resolved exactly once: one complete() call reported it resolved;
 *   - it ran only if no input failed, every part exactly once;
 *   - it ended FAILED exactly when it or an ancestor failed.
 * Even rounds complete ops one at a time, odd rounds in batches.
 *
 * Plain main(), not Criterion, so it runs under TSan too.
 * Usage: stress_queue_completion [percent]   (default 100: 300 rounds)
 * Prints one summary line; exits non-zero on any violation. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "completion/completion.h"
#include "pathways/clock.h"
#include "completion/ring.h"

enum {
  kThreads = 4,
  kLayers = 40,
  kWidth = 100,
  kNodes = kLayers * kWidth + 1, /* + a sink fed by the whole last layer */
  kMaxInputs = 4,
  kBatch = 8,
};

typedef struct test_node_t {
  pw_completion_node_t node; /* first: a node pointer is a test_node_t* */
  atomic_int ready_count;    /* times it came out READY */
  atomic_int ready_by;       /* the thread that got it READY, or -1 */
  atomic_int failed_count;   /* times it came out FAILED (input failed) */
  atomic_int resolved_count; /* complete() calls that resolved it */
  atomic_int parts_run;
  uint32_t parts;
  bool fail; /* its op fails */
  bool expect_failed;
  uint32_t input_count;
  uint32_t inputs[kWidth];
  uint32_t successor_count;
  pw_completion_node_t* successors[kWidth];
} test_node_t;

typedef struct round_t {
  test_node_t* nodes;
  pw_ring_t* work;
  bool batch;
  atomic_size_t resolved; /* nodes resolved, by either path */
  atomic_int violations;
  pthread_barrier_t start;
} round_t;

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static uint64_t rng_next(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

static void build_graph(test_node_t* nodes, bool with_failures) {
  for (uint32_t i = 0; i < kNodes; ++i) {
    test_node_t* t = &nodes[i];
    t->input_count = 0;
    t->successor_count = 0;
  }
  for (uint32_t i = kWidth; i < kNodes; ++i) {
    test_node_t* t = &nodes[i];
    uint32_t layer_start = (i / kWidth - 1) * kWidth;
    if (i == kNodes - 1) { /* the sink */
      for (uint32_t j = 0; j < kWidth; ++j) t->inputs[t->input_count++] = layer_start + j;
    } else {
      uint32_t k = 1 + (uint32_t)(rng_next() % kMaxInputs);
      for (uint32_t j = 0; j < k; ++j) {
        uint32_t from = layer_start + (uint32_t)(rng_next() % kWidth);
        bool dup = false;
        for (uint32_t u = 0; u < t->input_count; ++u) dup |= t->inputs[u] == from;
        if (!dup) t->inputs[t->input_count++] = from;
      }
    }
    for (uint32_t u = 0; u < t->input_count; ++u) {
      test_node_t* from = &nodes[t->inputs[u]];
      from->successors[from->successor_count++] = &t->node;
    }
  }
  for (uint32_t i = 0; i < kNodes; ++i) {
    test_node_t* t = &nodes[i];
    uint64_t r = rng_next();
    t->parts = r % 8 == 0 ? 3 : r % 8 == 1 ? 2 : 1;
    t->fail = with_failures && (r >> 8) % 400 == 0;
    t->expect_failed = t->fail;
    for (uint32_t u = 0; u < t->input_count; ++u) {
      t->expect_failed |= nodes[t->inputs[u]].expect_failed; /* inputs come first */
    }
    atomic_init(&t->ready_count, 0);
    atomic_init(&t->ready_by, -1);
    atomic_init(&t->failed_count, 0);
    atomic_init(&t->resolved_count, 0);
    atomic_init(&t->parts_run, 0);
    pw_completion_node_init(&t->node, i, "stress", t->input_count, t->successors,
                            t->successor_count, NULL);
    pw_completion_node_set_parts(&t->node, t->parts);
  }
}

static void push_work(round_t* r, test_node_t* t) {
  for (uint32_t p = 0; p < t->parts; ++p) {
    while (!pw_ring_push_mpmc(r->work, t)) sched_yield();
  }
}

/* Hands out what a completion made due: READY nodes are queued (once per
 * part), FAILED ones are counted as resolved. */
static void dispatch_ready(round_t* r, int self, pw_completion_list_t* ready) {
  pw_completion_node_t* node;
  while ((node = pw_completion_list_pop(ready)) != NULL) {
    test_node_t* t = (test_node_t*)node;
    pw_completion_state_t state = pw_completion_node_state(node);
    if (state == PW_COMPLETION_READY) {
      atomic_fetch_add(&t->ready_count, 1);
      int expected = -1;
      if (!atomic_compare_exchange_strong(&t->ready_by, &expected, self)) {
        atomic_fetch_add(&r->violations, 1);
      }
      push_work(r, t);
    } else if (state == PW_COMPLETION_FAILED) {
      atomic_fetch_add(&t->failed_count, 1);
      atomic_fetch_add(&r->resolved, 1);
    } else {
      atomic_fetch_add(&r->violations, 1);
    }
  }
}

static pw_status_t op_status(test_node_t* t) {
  return t->fail ? pw_status_make(PW_STATUS_UNAVAILABLE, "op %u failed", t->node.id) : NULL;
}

static void* worker_main(void* arg) {
  round_t* r = arg;
  static atomic_int next_id;
  int self = atomic_fetch_add(&next_id, 1);
  pthread_barrier_wait(&r->start);
  pw_completion_list_t ready = PW_COMPLETION_LIST_INIT;
  while (atomic_load(&r->resolved) < kNodes) {
    pw_completion_node_t* batch[kBatch];
    pw_status_t statuses[kBatch];
    size_t n = 0;
    void* item;
    while (n < (r->batch ? (size_t)kBatch : 1) && pw_ring_pop_mpmc(r->work, &item)) {
      test_node_t* t = item;
      atomic_fetch_add(&t->parts_run, 1);
      batch[n] = &t->node;
      statuses[n] = op_status(t);
      ++n;
    }
    if (n == 0) {
      sched_yield();
      continue;
    }
    if (r->batch) {
      size_t resolved = pw_completion_complete_batch(batch, statuses, n, &ready);
      atomic_fetch_add(&r->resolved, resolved);
    } else if (pw_completion_complete(batch[0], statuses[0], &ready)) {
      atomic_fetch_add(&((test_node_t*)batch[0])->resolved_count, 1);
      atomic_fetch_add(&r->resolved, 1);
    }
    dispatch_ready(r, self, &ready);
  }
  return NULL;
}

/* Checks every node after a round; returns the number of bad nodes. */
static int check_round(round_t* r, int round) {
  int bad = 0;
  for (uint32_t i = 0; i < kNodes; ++i) {
    test_node_t* t = &r->nodes[i];
    int ready = atomic_load(&t->ready_count);
    int failed = atomic_load(&t->failed_count);
    int parts_run = atomic_load(&t->parts_run);
    pw_completion_state_t state = pw_completion_node_state(&t->node);
    bool input_failed = false;
    for (uint32_t u = 0; u < t->input_count; ++u) {
      input_failed |= r->nodes[t->inputs[u]].expect_failed;
    }
    const char* why = NULL;
    if (ready + failed != 1) {
      why = "did not become due exactly once";
    } else if (state != (t->expect_failed ? PW_COMPLETION_FAILED : PW_COMPLETION_OK)) {
      why = "wrong final state";
    } else if (input_failed && (ready != 0 || parts_run != 0)) {
      why = "ran although an input failed";
    } else if (!input_failed && parts_run != (int)t->parts) {
      why = "parts did not each run once";
    } else if (!r->batch && ready == 1 && atomic_load(&t->resolved_count) != 1) {
      why = "not resolved by exactly one complete() call";
    } else if (input_failed &&
               strncmp(pw_status_message(pw_completion_node_status(&t->node)),
                       "input node ", 11) != 0) {
      why = "failure message does not name the failed input";
    }
    if (why != NULL) {
      if (bad < 5) {
        fprintf(stderr, "round %d node %u: %s (ready %d, failed %d, parts %d/%u, state %d)\n",
                round, i, why, ready, failed, parts_run, t->parts, (int)state);
      }
      ++bad;
    }
    pw_completion_node_deinit(&t->node);
  }
  return bad;
}

int main(int argc, char** argv) {
  long percent = argc > 1 ? strtol(argv[1], NULL, 10) : 100;
  if (percent <= 0) percent = 100;
  int rounds = (int)(300 * percent / 100);
  if (rounds < 2) rounds = 2;
  alarm(300); /* a hang is a failure */

  test_node_t* nodes = calloc(kNodes, sizeof(test_node_t));
  round_t r;
  memset(&r, 0, sizeof(r));
  r.nodes = nodes;
  pw_status_t status = pw_ring_create(pw_allocator_system(), PW_RING_MPMC, "stress work",
                                      16384, &r.work);
  if (status != NULL) {
    fprintf(stderr, "%s\n", pw_status_message(status));
    pw_status_free(status);
    return 1;
  }
  int bad = 0;
  size_t failed_nodes = 0;
  pw_time_t t0 = pw_clock_now();
  for (int round = 0; round < rounds; ++round) {
    build_graph(nodes, round % 4 >= 2);
    r.batch = round % 2 == 1;
    atomic_init(&r.resolved, 0);
    atomic_init(&r.violations, 0);
    pthread_barrier_init(&r.start, NULL, kThreads);
    /* Sources are READY from init: the test thread hands them out. */
    for (uint32_t i = 0; i < kWidth; ++i) {
      atomic_store(&nodes[i].ready_count, 1);
      atomic_store(&nodes[i].ready_by, kThreads);
      push_work(&r, &nodes[i]);
    }
    pthread_t threads[kThreads];
    for (int i = 0; i < kThreads; ++i) pthread_create(&threads[i], NULL, worker_main, &r);
    for (int i = 0; i < kThreads; ++i) pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&r.start);
    bad += atomic_load(&r.violations);
    for (uint32_t i = 0; i < kNodes; ++i) failed_nodes += nodes[i].expect_failed;
    bad += check_round(&r, round);
    void* leftover;
    if (pw_ring_pop_mpmc(r.work, &leftover)) {
      fprintf(stderr, "round %d: work left in the ring\n", round);
      ++bad;
    }
  }
  double seconds = (double)(pw_clock_now() - t0) / 1e9;
  printf("completion stress: %d rounds x %d nodes on %d threads (%zu failed), "
         "%.2f s: %s\n",
         rounds, kNodes, kThreads, failed_nodes, seconds,
         bad ? "FAILED" : "every node due once, resolved once, failures propagated: OK");
  pw_ring_destroy(r.work);
  free(nodes);
  return bad ? 1 : 0;
}
