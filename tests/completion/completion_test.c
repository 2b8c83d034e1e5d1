/* Unit tests of dependency nodes (bench/completion/completion.h): readiness on the
 * k-th input, hand-back to the completing thread, graph shapes, the
 * trampoline on a 100k-node chain, error propagation and its messages,
 * parts, batched completion, and exactly-once resolution. */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "completion/completion.h"
#include "support/test_allocators.h"

TestSuite(completion, .fini = pw_test_check_leaks);

/* A graph built from an edge list: nodes, their successor arrays and
 * per-node counters the callbacks fill in. */
typedef struct test_graph_t {
  size_t count;
  pw_completion_node_t* nodes;
  pw_completion_node_t** succ_storage;
  uint32_t* inputs;
  uint32_t* launched;  /* times launch saw the node */
  uint32_t* failed;    /* times on_failed saw the node */
  uint32_t* order;     /* launch position */
  uint32_t launch_clock;
  char** names;
  /* Nodes whose op fails when launched, with this message. */
  const bool* fail_on_launch;
  pw_status_code_t fail_code;
  /* Deepest and shallowest stack address seen in launch. */
  uintptr_t stack_min, stack_max;
  /* When set, launch does not complete inline but collects the node. */
  bool collect;
  pw_completion_node_t** collected;
  size_t collected_count;
  /* Callbacks may run on helper threads, where Criterion asserts must not
   * fire: they count violations here for the test thread to check. */
  uint32_t bad_state;
} test_graph_t;

/* |edges| holds pairs (from, to). */
static void graph_init(test_graph_t* g, size_t count, const uint32_t* edges,
                       size_t edge_count) {
  memset(g, 0, sizeof(*g));
  g->count = count;
  g->nodes = calloc(count, sizeof(*g->nodes));
  g->succ_storage = calloc(edge_count + 1, sizeof(*g->succ_storage));
  g->inputs = calloc(count, sizeof(uint32_t));
  g->launched = calloc(count, sizeof(uint32_t));
  g->failed = calloc(count, sizeof(uint32_t));
  g->order = calloc(count, sizeof(uint32_t));
  g->names = calloc(count, sizeof(char*));
  g->collected = calloc(count, sizeof(*g->collected));
  g->stack_min = UINTPTR_MAX;
  uint32_t* out_degree = calloc(count, sizeof(uint32_t));
  for (size_t e = 0; e < edge_count; ++e) {
    out_degree[edges[2 * e]]++;
    g->inputs[edges[2 * e + 1]]++;
  }
  size_t* offset = calloc(count + 1, sizeof(size_t));
  for (size_t i = 0; i < count; ++i) offset[i + 1] = offset[i] + out_degree[i];
  size_t* fill = calloc(count, sizeof(size_t));
  for (size_t e = 0; e < edge_count; ++e) {
    uint32_t from = edges[2 * e], to = edges[2 * e + 1];
    g->succ_storage[offset[from] + fill[from]++] = &g->nodes[to];
  }
  for (size_t i = 0; i < count; ++i) {
    char name[32];
    snprintf(name, sizeof(name), "n%zu", i);
    g->names[i] = strdup(name);
    pw_completion_node_init(&g->nodes[i], (uint32_t)i, g->names[i], g->inputs[i],
                            &g->succ_storage[offset[i]], out_degree[i], g);
  }
  free(out_degree);
  free(offset);
  free(fill);
}

static void graph_free(test_graph_t* g) {
  cr_assert_eq(g->bad_state, 0, "a callback saw a node in the wrong state");
  for (size_t i = 0; i < g->count; ++i) {
    pw_completion_node_deinit(&g->nodes[i]);
    free(g->names[i]);
  }
  free(g->nodes);
  free(g->succ_storage);
  free(g->inputs);
  free(g->launched);
  free(g->failed);
  free(g->order);
  free(g->names);
  free(g->collected);
}

static size_t node_index(test_graph_t* g, pw_completion_node_t* node) {
  return (size_t)(node - g->nodes);
}

static void launch_inline(void* user, pw_completion_node_t* node,
                          pw_completion_list_t* ready) {
  test_graph_t* g = user;
  volatile char here = 0;
  uintptr_t sp = (uintptr_t)&here;
  if (sp < g->stack_min) g->stack_min = sp;
  if (sp > g->stack_max) g->stack_max = sp;
  size_t i = node_index(g, node);
  g->launched[i]++;
  g->order[i] = g->launch_clock++;
  if (pw_completion_node_state(node) != PW_COMPLETION_READY) g->bad_state++;
  if (g->collect) {
    g->collected[g->collected_count++] = node;
    return;
  }
  pw_status_t status = NULL;
  if (g->fail_on_launch != NULL && g->fail_on_launch[i]) {
    status = pw_status_make(g->fail_code, "device %zu lost", i);
  }
  pw_completion_complete(node, status, ready);
}

static void on_failed(void* user, pw_completion_node_t* node) {
  test_graph_t* g = user;
  g->failed[node_index(g, node)]++;
  if (pw_completion_node_state(node) != PW_COMPLETION_FAILED) g->bad_state++;
}

/* Pushes every input-less node and drains the graph on this thread. */
static void graph_run(test_graph_t* g) {
  pw_completion_list_t ready = PW_COMPLETION_LIST_INIT;
  for (size_t i = 0; i < g->count; ++i) {
    if (g->inputs[i] == 0) pw_completion_list_push(&ready, &g->nodes[i]);
  }
  pw_completion_drain(&ready, launch_inline, on_failed, g);
  if (!pw_completion_list_is_empty(&ready)) g->bad_state++;
}

Test(completion, k_input_node_is_ready_exactly_on_the_kth_completion) {
  for (uint32_t k = 1; k <= 5; ++k) {
    uint32_t edges[10];
    for (uint32_t i = 0; i < k; ++i) {
      edges[2 * i] = i;
      edges[2 * i + 1] = k;
    }
    test_graph_t g;
    graph_init(&g, k + 1, edges, k);
    pw_completion_node_t* target = &g.nodes[k];
    cr_assert_eq(pw_completion_node_state(target), PW_COMPLETION_WAITING);
    for (uint32_t i = 0; i < k; ++i) {
      pw_completion_list_t ready = PW_COMPLETION_LIST_INIT;
      cr_assert_eq(pw_completion_node_state(&g.nodes[i]), PW_COMPLETION_READY);
      pw_completion_complete(&g.nodes[i], NULL, &ready);
      cr_assert_eq(pw_completion_node_state(&g.nodes[i]), PW_COMPLETION_OK);
      if (i + 1 < k) {
        cr_assert(pw_completion_list_is_empty(&ready), "k=%u: ready after %u", k, i + 1);
        cr_assert_eq(pw_completion_node_state(target), PW_COMPLETION_WAITING);
      } else {
        /* The completing call hands the node back, alone. */
        cr_assert_eq(pw_completion_list_pop(&ready), target);
        cr_assert(pw_completion_list_is_empty(&ready));
        cr_assert_eq(pw_completion_node_state(target), PW_COMPLETION_READY);
      }
    }
    pw_completion_list_t ready = PW_COMPLETION_LIST_INIT;
    pw_completion_complete(target, NULL, &ready);
    cr_assert_eq(pw_completion_node_state(target), PW_COMPLETION_OK);
    cr_assert_null(pw_completion_node_status(target));
    graph_free(&g);
  }
}

/* Two threads each complete one input of a shared node; exactly one of them
 * gets it back. */
typedef struct race_arg_t {
  pw_completion_node_t* input;
  pthread_barrier_t* barrier;
  pw_completion_node_t* got;
  bool more; /* the list held more than the one node */
} race_arg_t;

static void* race_complete(void* p) {
  race_arg_t* a = p;
  pw_completion_list_t ready = PW_COMPLETION_LIST_INIT;
  pthread_barrier_wait(a->barrier);
  pw_completion_complete(a->input, NULL, &ready);
  a->got = pw_completion_list_pop(&ready);
  a->more = !pw_completion_list_is_empty(&ready);
  return NULL;
}

Test(completion, the_thread_completing_the_last_input_gets_the_node) {
  const uint32_t edges[] = {0, 2, 1, 2};
  for (int round = 0; round < 200; ++round) {
    test_graph_t g;
    graph_init(&g, 3, edges, 2);
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, 2);
    race_arg_t args[2] = {{&g.nodes[0], &barrier, NULL, false},
                          {&g.nodes[1], &barrier, NULL, false}};
    pthread_t threads[2];
    for (int i = 0; i < 2; ++i) pthread_create(&threads[i], NULL, race_complete, &args[i]);
    for (int i = 0; i < 2; ++i) pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&barrier);
    cr_assert((args[0].got == &g.nodes[2]) != (args[1].got == &g.nodes[2]),
              "round %d: node handed to %s", round,
              args[0].got == NULL && args[1].got == NULL ? "nobody" : "both");
    cr_assert_null(args[0].got == &g.nodes[2] ? args[1].got : args[0].got);
    cr_assert(!args[0].more && !args[1].more);
    graph_free(&g);
  }
}

Test(completion, diamond_runs_each_node_once_in_dependency_order) {
  /* 0 -> 1, 0 -> 2, 1 -> 3, 2 -> 3 */
  const uint32_t edges[] = {0, 1, 0, 2, 1, 3, 2, 3};
  test_graph_t g;
  graph_init(&g, 4, edges, 4);
  graph_run(&g);
  for (size_t i = 0; i < 4; ++i) {
    cr_assert_eq(g.launched[i], 1, "node %zu launched %u times", i, g.launched[i]);
    cr_assert_eq(g.failed[i], 0);
    cr_assert_eq(pw_completion_node_state(&g.nodes[i]), PW_COMPLETION_OK);
  }
  cr_assert_lt(g.order[0], g.order[1]);
  cr_assert_lt(g.order[0], g.order[2]);
  cr_assert_lt(g.order[1], g.order[3]);
  cr_assert_lt(g.order[2], g.order[3]);
  graph_free(&g);
}

Test(completion, fan_out_then_fan_in) {
  /* 0 -> 1..W -> W+1 */
  enum { W = 1000 };
  static uint32_t edges[4 * W];
  for (uint32_t i = 0; i < W; ++i) {
    edges[4 * i + 0] = 0;
    edges[4 * i + 1] = 1 + i;
    edges[4 * i + 2] = 1 + i;
    edges[4 * i + 3] = W + 1;
  }
  test_graph_t g;
  graph_init(&g, W + 2, edges, 2 * W);
  graph_run(&g);
  for (size_t i = 0; i < W + 2; ++i) {
    cr_assert_eq(g.launched[i], 1, "node %zu", i);
    cr_assert_eq(pw_completion_node_state(&g.nodes[i]), PW_COMPLETION_OK);
  }
  cr_assert_eq(g.order[W + 1], W + 1, "the sink ran before all its inputs");
  graph_free(&g);
}

/* A 100k-node chain whose ops complete inline: the trampoline keeps the
 * stack flat. Also run on a thread with a 256 KiB stack, which a recursive
 * launch -> complete -> launch would overflow many times over. */
enum { kChain = 100000 };

static uint32_t* chain_edges(void) {
  uint32_t* edges = malloc(sizeof(uint32_t) * 2 * (kChain - 1));
  for (uint32_t i = 0; i + 1 < kChain; ++i) {
    edges[2 * i] = i;
    edges[2 * i + 1] = i + 1;
  }
  return edges;
}

static void* run_chain(void* p) {
  graph_run(p);
  return NULL;
}

Test(completion, chain_of_100k_completed_inline_uses_constant_stack) {
  uint32_t* edges = chain_edges();
  test_graph_t g;
  graph_init(&g, kChain, edges, kChain - 1);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t thread;
  cr_assert_eq(pthread_create(&thread, &attr, run_chain, &g), 0);
  pthread_join(thread, NULL);
  pthread_attr_destroy(&attr);
  for (size_t i = 0; i < kChain; ++i) {
    cr_assert_eq(g.launched[i], 1);
    cr_assert_eq(g.order[i], i);
  }
  cr_assert_eq(pw_completion_node_state(&g.nodes[kChain - 1]), PW_COMPLETION_OK);
  cr_assert_lt(g.stack_max - g.stack_min, 512, "stack grew by %zu bytes",
               (size_t)(g.stack_max - g.stack_min));
  graph_free(&g);
  free(edges);
}

Test(completion, failure_at_the_head_of_a_100k_chain_cascades_iteratively) {
  uint32_t* edges = chain_edges();
  test_graph_t g;
  graph_init(&g, kChain, edges, kChain - 1);
  bool* fail = calloc(kChain, sizeof(bool));
  fail[0] = true;
  g.fail_on_launch = fail;
  g.fail_code = PW_STATUS_DATA_LOSS;
  /* A small stack again: the cascade must not recurse either. */
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t thread;
  cr_assert_eq(pthread_create(&thread, &attr, run_chain, &g), 0);
  pthread_join(thread, NULL);
  pthread_attr_destroy(&attr);
  cr_assert_eq(g.launched[0], 1);
  for (size_t i = 1; i < kChain; ++i) {
    cr_assert_eq(g.launched[i], 0, "node %zu ran after its input failed", i);
    cr_assert_eq(g.failed[i], 1, "node %zu reported %u times", i, g.failed[i]);
  }
  pw_status_t last = pw_completion_node_status(&g.nodes[kChain - 1]);
  cr_assert_eq(pw_status_code(last), PW_STATUS_DATA_LOSS);
  char want[128];
  snprintf(want, sizeof(want),
           "input node %d (\"n%d\") failed: input node 0 (\"n0\") failed: device 0 lost",
           kChain - 2, kChain - 2);
  cr_assert_str_eq(pw_status_message(last), want);
  free(fail);
  graph_free(&g);
  free(edges);
}

Test(completion, errors_name_the_failed_input_and_the_root_through_levels) {
  /* 0 -> 1 -> 2 -> 3, and 4 (ok) -> 2: node 2 waits for 4 too. */
  const uint32_t edges[] = {0, 1, 1, 2, 2, 3, 4, 2};
  test_graph_t g;
  graph_init(&g, 5, edges, 4);
  g.nodes[0].name = "matmul"; /* names are borrowed: any stable string */
  bool fail[5] = {true, false, false, false, false};
  g.fail_on_launch = fail;
  g.fail_code = PW_STATUS_UNAVAILABLE;
  graph_run(&g);
  cr_assert_eq(g.launched[0], 1);
  cr_assert_eq(g.launched[4], 1, "an unrelated input still runs");
  for (size_t i = 1; i <= 3; ++i) {
    cr_assert_eq(g.launched[i], 0, "node %zu ran", i);
    cr_assert_eq(g.failed[i], 1, "node %zu", i);
    cr_assert_eq(pw_status_code(pw_completion_node_status(&g.nodes[i])),
                 PW_STATUS_UNAVAILABLE);
  }
  cr_assert_str_eq(pw_status_message(pw_completion_node_status(&g.nodes[0])),
                   "device 0 lost");
  cr_assert_str_eq(pw_status_message(pw_completion_node_status(&g.nodes[1])),
                   "input node 0 (\"matmul\") failed: device 0 lost");
  cr_assert_str_eq(pw_status_message(pw_completion_node_status(&g.nodes[2])),
                   "input node 1 (\"n1\") failed: input node 0 (\"matmul\") "
                   "failed: device 0 lost");
  cr_assert_str_eq(pw_status_message(pw_completion_node_status(&g.nodes[3])),
                   "input node 2 (\"n2\") failed: input node 0 (\"matmul\") "
                   "failed: device 0 lost");
  cr_assert_eq(pw_completion_node_state(&g.nodes[4]), PW_COMPLETION_OK);
  /* Ownership: a taken status is the caller's; the node keeps NULL. */
  pw_status_t taken = pw_completion_node_take_status(&g.nodes[3]);
  cr_assert_not_null(taken);
  cr_assert_null(pw_completion_node_status(&g.nodes[3]));
  pw_status_free(taken);
  graph_free(&g);
}

Test(completion, first_failed_input_wins_and_unnamed_nodes_are_named_by_id) {
  /* 0 -> 2, 1 -> 2: both inputs fail, 0 first. */
  const uint32_t edges[] = {0, 2, 1, 2};
  test_graph_t g;
  graph_init(&g, 3, edges, 2);
  g.nodes[0].name = NULL;
  pw_completion_list_t ready = PW_COMPLETION_LIST_INIT;
  pw_completion_complete(&g.nodes[0], pw_status_make(PW_STATUS_CANCELLED, "first"), &ready);
  cr_assert(pw_completion_list_is_empty(&ready), "node 2 must wait for input 1");
  cr_assert_eq(pw_completion_node_state(&g.nodes[2]), PW_COMPLETION_WAITING);
  pw_completion_complete(&g.nodes[1], pw_status_make(PW_STATUS_INTERNAL, "second"), &ready);
  cr_assert_eq(pw_completion_list_pop(&ready), &g.nodes[2]);
  cr_assert_eq(pw_completion_node_state(&g.nodes[2]), PW_COMPLETION_FAILED);
  pw_status_t s = pw_completion_node_status(&g.nodes[2]);
  cr_assert_eq(pw_status_code(s), PW_STATUS_CANCELLED);
  cr_assert_str_eq(pw_status_message(s), "input node 0 failed: first");
  graph_free(&g);
}

Test(completion, batched_completion_resolves_each_and_cascades_failures) {
  /* Sources 0..7; 8 depends on 0..3; 9 depends on 4..7; 10 on 8 and 9. */
  const uint32_t edges[] = {0, 8, 1, 8, 2, 8, 3, 8, 4, 9,
                            5, 9, 6, 9, 7, 9, 8, 10, 9, 10};
  test_graph_t g;
  graph_init(&g, 11, edges, 10);
  pw_completion_node_t* batch[8];
  pw_status_t statuses[8] = {0};
  for (size_t i = 0; i < 8; ++i) batch[i] = &g.nodes[i];
  statuses[5] = pw_status_make(PW_STATUS_ABORTED, "op 5 aborted");
  pw_completion_list_t ready = PW_COMPLETION_LIST_INIT;
  pw_completion_complete_batch(batch, statuses, 8, &ready);
  for (size_t i = 0; i < 8; ++i) {
    cr_assert_eq(pw_completion_node_state(&g.nodes[i]),
                 i == 5 ? PW_COMPLETION_FAILED : PW_COMPLETION_OK);
  }
  /* 8 is READY to launch; 9 failed (cascaded in the same call). */
  cr_assert_eq(pw_completion_list_pop(&ready), &g.nodes[8]);
  cr_assert_eq(pw_completion_list_pop(&ready), &g.nodes[9]);
  cr_assert(pw_completion_list_is_empty(&ready));
  cr_assert_eq(pw_completion_node_state(&g.nodes[8]), PW_COMPLETION_READY);
  cr_assert_eq(pw_completion_node_state(&g.nodes[9]), PW_COMPLETION_FAILED);
  cr_assert_str_eq(pw_status_message(pw_completion_node_status(&g.nodes[9])),
                   "input node 5 (\"n5\") failed: op 5 aborted");
  pw_completion_node_t* second[] = {&g.nodes[8]};
  pw_completion_complete_batch(second, NULL, 1, &ready);
  cr_assert_eq(pw_completion_list_pop(&ready), &g.nodes[10]);
  cr_assert_eq(pw_completion_node_state(&g.nodes[10]), PW_COMPLETION_FAILED);
  cr_assert_str_eq(pw_status_message(pw_completion_node_status(&g.nodes[10])),
                   "input node 9 (\"n9\") failed: input node 5 (\"n5\") failed: op 5 aborted");
  graph_free(&g);
}

Test(completion, parts_resolve_on_the_last_with_the_first_error) {
  const uint32_t edges[] = {0, 1};
  test_graph_t g;
  graph_init(&g, 2, edges, 1);
  pw_completion_node_set_parts(&g.nodes[0], 3);
  pw_completion_list_t ready = PW_COMPLETION_LIST_INIT;
  pw_completion_complete(&g.nodes[0], NULL, &ready);
  pw_completion_complete(&g.nodes[0], pw_status_make(PW_STATUS_UNAVAILABLE, "chip 2 down"), &ready);
  cr_assert_eq(pw_completion_node_state(&g.nodes[0]), PW_COMPLETION_READY);
  cr_assert(pw_completion_list_is_empty(&ready));
  pw_completion_complete(&g.nodes[0], pw_status_make(PW_STATUS_UNAVAILABLE, "chip 3 down"), &ready);
  cr_assert_eq(pw_completion_node_state(&g.nodes[0]), PW_COMPLETION_FAILED);
  cr_assert_str_eq(pw_status_message(pw_completion_node_status(&g.nodes[0])), "chip 2 down");
  cr_assert_eq(pw_completion_list_pop(&ready), &g.nodes[1]);
  cr_assert_str_eq(pw_status_message(pw_completion_node_status(&g.nodes[1])),
                   "input node 0 (\"n0\") failed: chip 2 down");
  graph_free(&g);
}

Test(completion, external_inputs_and_the_wiring_hold) {
  pw_completion_node_t a, b;
  pw_completion_node_t* a_succ[] = {&b};
  /* |a| has one external input plus the wiring hold. */
  pw_completion_node_init(&a, 1, "a", 2, a_succ, 1, NULL);
  pw_completion_node_init(&b, 2, "b", 1, NULL, 0, NULL);
  pw_completion_list_t ready = PW_COMPLETION_LIST_INIT;
  pw_completion_signal_input(&a, NULL, &ready); /* the external input */
  cr_assert(pw_completion_list_is_empty(&ready));
  pw_completion_signal_input(&a, NULL, &ready); /* wiring done */
  cr_assert_eq(pw_completion_list_pop(&ready), &a);
  cr_assert_eq(pw_completion_node_state(&a), PW_COMPLETION_READY);
  pw_completion_node_deinit(&a);
  pw_completion_node_deinit(&b);

  /* A failed external input fails the node (without running it) and its
   * dependents, in the signalling call. */
  pw_completion_node_init(&a, 1, "a", 1, a_succ, 1, NULL);
  pw_completion_node_init(&b, 2, "b", 1, NULL, 0, NULL);
  pw_completion_signal_input(&a, pw_status_make(PW_STATUS_NOT_FOUND, "buffer 7 was deleted"), &ready);
  cr_assert_eq(pw_completion_list_pop(&ready), &a);
  cr_assert_eq(pw_completion_list_pop(&ready), &b);
  cr_assert_eq(pw_completion_node_state(&a), PW_COMPLETION_FAILED);
  cr_assert_eq(pw_completion_node_state(&b), PW_COMPLETION_FAILED);
  cr_assert_str_eq(pw_status_message(pw_completion_node_status(&a)), "buffer 7 was deleted");
  cr_assert_str_eq(pw_status_message(pw_completion_node_status(&b)),
                   "input node 1 (\"a\") failed: buffer 7 was deleted");
  pw_completion_node_deinit(&a);
  pw_completion_node_deinit(&b);
}

/* A random layered DAG with random failures, completed in batches in a
 * shuffled order: every node resolves exactly once, and FAILED exactly when
 * it or an ancestor failed. */
Test(completion, every_node_of_a_random_graph_resolves_exactly_once) {
  enum { N = 3000, MaxIn = 4 };
  static uint32_t edges[2 * N * MaxIn];
  size_t edge_count = 0;
  uint64_t rng = 0x9e3779b97f4a7c15ull;
#define NEXT() (rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17, rng)
  static bool fail[N];
  for (uint32_t i = 0; i < N; ++i) {
    fail[i] = NEXT() % 50 == 0;
    if (i < 30) continue;
    uint32_t k = (uint32_t)(NEXT() % (MaxIn + 1));
    uint32_t used[MaxIn];
    uint32_t n = 0;
    for (uint32_t j = 0; j < k; ++j) {
      uint32_t from = (uint32_t)(NEXT() % i);
      bool dup = false;
      for (uint32_t u = 0; u < n; ++u) dup |= used[u] == from;
      if (dup) continue;
      used[n++] = from;
      edges[2 * edge_count] = from;
      edges[2 * edge_count + 1] = i;
      ++edge_count;
    }
  }
#undef NEXT
  test_graph_t g;
  graph_init(&g, N, edges, edge_count);
  g.collect = true;
  g.fail_on_launch = fail;
  /* Expected: failed iff it or an ancestor fails (edges go low -> high). */
  static bool bad[N];
  for (uint32_t i = 0; i < N; ++i) bad[i] = false;
  for (size_t e = 0; e < edge_count; ++e) {
    /* edges are generated in increasing |to| order, so one pass suffices */
    uint32_t from = edges[2 * e], to = edges[2 * e + 1];
    if (fail[from] || bad[from]) bad[to] = true;
  }
  pw_completion_list_t ready = PW_COMPLETION_LIST_INIT;
  for (size_t i = 0; i < N; ++i) {
    if (g.inputs[i] == 0) pw_completion_list_push(&ready, &g.nodes[i]);
  }
  size_t resolved_by_us = 0;
  while (!pw_completion_list_is_empty(&ready) || g.collected_count > 0) {
    pw_completion_drain(&ready, launch_inline, on_failed, &g);
    /* Complete the collected (launched) ops in a shuffled batch. */
    size_t n = g.collected_count;
    for (size_t i = n; i > 1; --i) {
      size_t j = (size_t)(rand() % (int)i);
      pw_completion_node_t* tmp = g.collected[i - 1];
      g.collected[i - 1] = g.collected[j];
      g.collected[j] = tmp;
    }
    pw_status_t* statuses = calloc(n + 1, sizeof(pw_status_t));
    for (size_t i = 0; i < n; ++i) {
      size_t idx = node_index(&g, g.collected[i]);
      if (fail[idx]) statuses[i] = pw_status_make(PW_STATUS_INTERNAL, "op %zu failed", idx);
    }
    g.collected_count = 0;
    pw_completion_complete_batch(g.collected, statuses, n, &ready);
    resolved_by_us += n;
    free(statuses);
  }
  size_t launched = 0, failed_without_running = 0;
  for (size_t i = 0; i < N; ++i) {
    cr_assert_eq(g.launched[i] + g.failed[i], 1, "node %zu: launched %u, reported failed %u",
                 i, g.launched[i], g.failed[i]);
    launched += g.launched[i];
    failed_without_running += g.failed[i];
    pw_completion_state_t want =
        fail[i] || bad[i] ? PW_COMPLETION_FAILED : PW_COMPLETION_OK;
    if (bad[i]) cr_assert_eq(g.launched[i], 0, "node %zu ran below a failure", i);
    cr_assert_eq(pw_completion_node_state(&g.nodes[i]), want, "node %zu", i);
  }
  cr_assert_eq(launched, resolved_by_us);
  cr_assert_eq(launched + failed_without_running, N);
  graph_free(&g);
}
