/* pw-bench completion: how fast completions reach an observer.
 *
 * Rows (all in one run, so ratios hold on a noisy machine):
 *   path=ck_ring_spsc     the baseline: a raw ck_ring SPSC moving one
 *                         pointer per completion, producer -> observer.
 *   path=completion       the tracker of bench/completion (not used by the
 *                         dispatcher, which has its own tokens): each producer
 *                         resolves dependency nodes (pw_completion_complete:
 *                         the last-part decrement, state publication) and
 *                         posts them to a pw_completion_queue (its own SPSC
 *                         ring); the observer drains in batches.
 *   path=events           public pw_event_t: producers signal pre-created
 *                         events, the observer polls each in order.
 * For each: producers=1 (1->1) and producers=2 (2->1) throughput, and, for
 * 1->1, completion-to-observer latency p50/p99 measured one completion at a
 * time (the observer acknowledges before the next is sent).
 * Figures: ns_per_event, events_per_s, p50_ns, p99_ns, baseline_ns (the
 * ck_ring SPSC per-item cost measured in this run), ratio = ns / baseline. */
#define _GNU_SOURCE
#include <ck_ring.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomics.h"
#include "bench_util.h"
#include "completion/completion.h"
#include "pathways/pathways.h"
#include "suites.h"

typedef struct pw_bench_completion_config_t {
  long long events;  /* per throughput rep */
  long long reps;
  long long latency_samples;
} pw_bench_completion_config_t;

/* ---- shared driver ------------------------------------------------------ */

/* A completion path under test. Producers call produce(ctx, producer, i) for
 * their items; the observer calls observe_all(ctx, total). */
typedef struct pw_bench_path_t {
  const char* name;
  void* (*setup)(long long events, int producers);
  void (*produce)(void* ctx, int producer, int producers, long long events);
  void (*observe)(void* ctx, long long events);
  void (*teardown)(void* ctx);
} pw_bench_path_t;

typedef struct pw_bench_thread_arg_t {
  const pw_bench_path_t* path;
  void* ctx;
  int producer;
  int producers;
  long long events;
  pw_atomic_u32_t* start;
} pw_bench_thread_arg_t;

static void* pw_bench_producer_main(void* p) {
  pw_bench_thread_arg_t* a = p;
  pw_bench_pin(a->producer + 1);
  while (pw_atomic_load_u32_acquire(a->start) == 0) pw_bench_pause();
  a->path->produce(a->ctx, a->producer, a->producers, a->events);
  return NULL;
}

/* Runs one throughput rep; returns ns per event (observer wall time). */
static double pw_bench_throughput_once(const pw_bench_path_t* path,
                                       long long events, int producers) {
  void* ctx = path->setup(events, producers);
  if (ctx == NULL) return -1;
  pw_atomic_u32_t start;
  pw_atomic_init_u32(&start, 0);
  pthread_t threads[8];
  pw_bench_thread_arg_t args[8];
  for (int p = 0; p < producers; ++p) {
    args[p] = (pw_bench_thread_arg_t){path, ctx, p, producers, events, &start};
    pthread_create(&threads[p], NULL, pw_bench_producer_main, &args[p]);
  }
  pw_bench_pin(0);
  int64_t t0 = pw_bench_now_ns();
  pw_atomic_store_u32_release(&start, 1);
  path->observe(ctx, events);
  int64_t t1 = pw_bench_now_ns();
  for (int p = 0; p < producers; ++p) pthread_join(threads[p], NULL);
  path->teardown(ctx);
  return (double)(t1 - t0) / (double)events;
}

static double pw_bench_throughput(const pw_bench_path_t* path,
                                  const pw_bench_completion_config_t* cfg,
                                  int producers) {
  double* samples = calloc((size_t)cfg->reps, sizeof(double));
  for (long long r = 0; r < cfg->reps; ++r) {
    samples[r] = pw_bench_throughput_once(path, cfg->events, producers);
  }
  double median = pw_bench_median(samples, (size_t)cfg->reps);
  free(samples);
  return median;
}

/* ---- baseline: raw ck_ring SPSC ----------------------------------------- */

typedef struct pw_bench_ring_ctx_t {
  ck_ring_t ring[2];
  ck_ring_buffer_t* buffers[2];
  unsigned long long sum;
} pw_bench_ring_ctx_t;

#define PW_BENCH_RING_SIZE 4096

static void* pw_bench_ring_setup(long long events, int producers) {
  (void)events;
  pw_bench_ring_ctx_t* c = calloc(1, sizeof(*c));
  for (int p = 0; p < producers; ++p) {
    c->buffers[p] = calloc(PW_BENCH_RING_SIZE, sizeof(ck_ring_buffer_t));
    ck_ring_init(&c->ring[p], PW_BENCH_RING_SIZE);
  }
  return c;
}

static void pw_bench_ring_produce(void* ctx, int producer, int producers,
                                  long long events) {
  pw_bench_ring_ctx_t* c = ctx;
  long long mine = events / producers + (producer < events % producers);
  for (long long i = 1; i <= mine; ++i) {
    while (!ck_ring_enqueue_spsc(&c->ring[producer], c->buffers[producer],
                                 (void*)(uintptr_t)i)) {
      pw_bench_pause();
    }
  }
}

static void pw_bench_ring_observe(void* ctx, long long events) {
  pw_bench_ring_ctx_t* c = ctx;
  int producers = c->buffers[1] ? 2 : 1;
  unsigned long long sum = 0;
  long long seen = 0;
  while (seen < events) {
    for (int p = 0; p < producers; ++p) {
      void* item;
      while (ck_ring_dequeue_spsc(&c->ring[p], c->buffers[p], &item)) {
        sum += (uintptr_t)item;
        ++seen;
      }
    }
  }
  c->sum = sum;
}

static void pw_bench_ring_teardown(void* ctx) {
  pw_bench_ring_ctx_t* c = ctx;
  free(c->buffers[0]);
  free(c->buffers[1]);
  free(c);
}

static const pw_bench_path_t pw_bench_path_ring = {
    "ck_ring_spsc", pw_bench_ring_setup, pw_bench_ring_produce,
    pw_bench_ring_observe, pw_bench_ring_teardown};

/* ---- library completion path ------------------------------------------ */

typedef struct pw_bench_cq_ctx_t {
  pw_completion_node_t* nodes;
  pw_completion_queue_t* queue;
  long long count;
} pw_bench_cq_ctx_t;

static void* pw_bench_cq_setup(long long events, int producers) {
  pw_bench_cq_ctx_t* c = calloc(1, sizeof(*c));
  c->count = events;
  c->nodes = calloc((size_t)events, sizeof(pw_completion_node_t));
  for (long long i = 0; i < events; ++i) {
    pw_completion_node_init(&c->nodes[i], (uint32_t)i, NULL, 0, NULL, 0, NULL);
  }
  pw_status_t s = pw_completion_queue_create(pw_allocator_system(), "bench",
                                             (size_t)producers, PW_BENCH_RING_SIZE,
                                             &c->queue);
  if (s) {
    pw_status_free(s);
    fprintf(stderr, "pw-bench: completion queue creation failed\n");
    exit(1);
  }
  return c;
}

static void pw_bench_cq_produce(void* ctx, int producer, int producers,
                                long long events) {
  pw_bench_cq_ctx_t* c = ctx;
  pw_completion_producer_t* end = pw_completion_queue_producer(c->queue, (size_t)producer);
  pw_completion_list_t ready = PW_COMPLETION_LIST_INIT;
  for (long long i = producer; i < events; i += producers) {
    pw_completion_node_t* node = &c->nodes[i];
    if (pw_completion_complete(node, NULL, &ready)) {
      while (!pw_completion_producer_post(end, node)) pw_bench_pause();
    }
  }
  pw_completion_producer_flush(end);
}

static void pw_bench_cq_observe(void* ctx, long long events) {
  pw_bench_cq_ctx_t* c = ctx;
  void* batch[256];
  long long seen = 0;
  while (seen < events) {
    size_t n = pw_completion_queue_drain(c->queue, batch, 256);
    if (n == 0) pw_bench_pause();
    seen += (long long)n;
  }
}

static void pw_bench_cq_teardown(void* ctx) {
  pw_bench_cq_ctx_t* c = ctx;
  for (long long i = 0; i < c->count; ++i) pw_completion_node_deinit(&c->nodes[i]);
  pw_completion_queue_destroy(c->queue);
  free(c->nodes);
  free(c);
}

static const pw_bench_path_t pw_bench_path_completion = {
    "completion", pw_bench_cq_setup, pw_bench_cq_produce, pw_bench_cq_observe,
    pw_bench_cq_teardown};

/* ---- public events ------------------------------------------------------ */

typedef struct pw_bench_event_ctx_t {
  pw_event_t** events;
  long long count;
} pw_bench_event_ctx_t;

static void* pw_bench_event_setup(long long events, int producers) {
  (void)producers;
  pw_bench_event_ctx_t* c = calloc(1, sizeof(*c));
  c->events = calloc((size_t)events, sizeof(pw_event_t*));
  c->count = events;
  for (long long i = 0; i < events; ++i) {
    pw_status_t s = pw_event_create(pw_allocator_system(), &c->events[i]);
    if (s) {
      pw_status_free(s);
      fprintf(stderr, "pw-bench: event creation failed\n");
      exit(1);
    }
  }
  return c;
}

static void pw_bench_event_produce(void* ctx, int producer, int producers,
                                   long long events) {
  pw_bench_event_ctx_t* c = ctx;
  for (long long i = producer; i < events; i += producers) {
    pw_status_ignore(pw_event_signal(c->events[i]));
  }
}

static void pw_bench_event_observe(void* ctx, long long events) {
  pw_bench_event_ctx_t* c = ctx;
  for (long long i = 0; i < events; ++i) {
    while (!pw_event_is_ready(c->events[i])) pw_bench_pause();
  }
}

static void pw_bench_event_teardown(void* ctx) {
  pw_bench_event_ctx_t* c = ctx;
  for (long long i = 0; i < c->count; ++i) pw_event_release(c->events[i]);
  free(c->events);
  free(c);
}

static const pw_bench_path_t pw_bench_path_events = {
    "events", pw_bench_event_setup, pw_bench_event_produce,
    pw_bench_event_observe, pw_bench_event_teardown};

/* ---- latency ------------------------------------------------------------ */

/* Ping-pong: the producer stamps and completes one item, the observer
 * records now - stamp and acknowledges; the next item waits for the ack so
 * queueing never inflates the figure. */
typedef struct pw_bench_latency_ctx_t {
  const char* path;
  long long samples;
  ck_ring_t ring;
  ck_ring_buffer_t* buffer;
  pw_event_t** events;
  pw_completion_node_t* nodes;
  pw_completion_queue_t* queue;
  int64_t* stamps;
  pw_atomic_u64_t acked;
} pw_bench_latency_ctx_t;

static void* pw_bench_latency_producer(void* p) {
  pw_bench_latency_ctx_t* c = p;
  pw_bench_pin(1);
  for (long long i = 0; i < c->samples; ++i) {
    while (pw_atomic_load_u64_acquire(&c->acked) != (uint64_t)i) pw_bench_pause();
    c->stamps[i] = pw_bench_now_ns();
    if (c->events) {
      pw_status_ignore(pw_event_signal(c->events[i]));
    } else if (c->queue) {
      pw_completion_list_t ready = PW_COMPLETION_LIST_INIT;
      pw_completion_producer_t* end = pw_completion_queue_producer(c->queue, 0);
      if (pw_completion_complete(&c->nodes[i], NULL, &ready)) {
        while (!pw_completion_producer_post(end, &c->nodes[i])) pw_bench_pause();
      }
    } else {
      while (!ck_ring_enqueue_spsc(&c->ring, c->buffer, &c->stamps[i])) pw_bench_pause();
    }
  }
  return NULL;
}

static void pw_bench_latency(const char* path, long long samples,
                             double* out_p50, double* out_p99) {
  pw_bench_latency_ctx_t c;
  memset(&c, 0, sizeof(c));
  c.path = path;
  c.samples = samples;
  c.stamps = calloc((size_t)samples, sizeof(int64_t));
  double* lat = calloc((size_t)samples, sizeof(double));
  bool use_events = strcmp(path, "events") == 0;
  bool use_queue = strcmp(path, "completion") == 0;
  if (use_queue) {
    c.nodes = calloc((size_t)samples, sizeof(pw_completion_node_t));
    for (long long i = 0; i < samples; ++i) {
      pw_completion_node_init(&c.nodes[i], (uint32_t)i, NULL, 0, NULL, 0, NULL);
    }
    pw_status_ignore(pw_completion_queue_create(pw_allocator_system(), "latency", 1,
                                                PW_BENCH_RING_SIZE, &c.queue));
  } else if (use_events) {
    c.events = calloc((size_t)samples, sizeof(pw_event_t*));
    for (long long i = 0; i < samples; ++i) {
      pw_status_ignore(pw_event_create(pw_allocator_system(), &c.events[i]));
    }
  } else {
    c.buffer = calloc(PW_BENCH_RING_SIZE, sizeof(ck_ring_buffer_t));
    ck_ring_init(&c.ring, PW_BENCH_RING_SIZE);
  }
  pw_atomic_init_u64(&c.acked, 0);
  pthread_t t;
  pthread_create(&t, NULL, pw_bench_latency_producer, &c);
  pw_bench_pin(0);
  for (long long i = 0; i < samples; ++i) {
    if (use_events) {
      while (!pw_event_is_ready(c.events[i])) pw_bench_pause();
    } else if (use_queue) {
      void* item;
      while (pw_completion_queue_drain(c.queue, &item, 1) == 0) pw_bench_pause();
    } else {
      void* item;
      while (!ck_ring_dequeue_spsc(&c.ring, c.buffer, &item)) pw_bench_pause();
    }
    int64_t now = pw_bench_now_ns();
    lat[i] = (double)(now - c.stamps[i]);
    pw_atomic_store_u64_release(&c.acked, (uint64_t)i + 1);
  }
  pthread_join(t, NULL);
  *out_p50 = pw_bench_percentile(lat, (size_t)samples, 50);
  *out_p99 = pw_bench_percentile(lat, (size_t)samples, 99);
  if (use_events) {
    for (long long i = 0; i < samples; ++i) pw_event_release(c.events[i]);
    free(c.events);
  }
  if (use_queue) {
    for (long long i = 0; i < samples; ++i) pw_completion_node_deinit(&c.nodes[i]);
    pw_completion_queue_destroy(c.queue);
    free(c.nodes);
  }
  free(c.buffer);
  free(c.stamps);
  free(lat);
}

/* ---- suite -------------------------------------------------------------- */

static void pw_bench_completion_report(const char* path, int producers,
                                       double ns, double baseline_ns,
                                       double p50, double p99) {
  pw_bench_json_t j;
  pw_bench_json_begin(&j, "completion");
  pw_bench_json_str(&j, "path", path);
  pw_bench_json_int(&j, "producers", producers);
  pw_bench_json_num(&j, "ns_per_event", ns);
  pw_bench_json_num(&j, "events_per_s", 1e9 / ns);
  if (p50 >= 0) {
    pw_bench_json_num(&j, "p50_ns", p50);
    pw_bench_json_num(&j, "p99_ns", p99);
  } else {
    pw_bench_json_null(&j, "p50_ns");
    pw_bench_json_null(&j, "p99_ns");
  }
  pw_bench_json_num(&j, "baseline_ns", baseline_ns);
  pw_bench_json_num(&j, "ratio", ns / baseline_ns);
  pw_bench_json_end(&j);
  char p50_text[32] = "-", p99_text[32] = "-";
  if (p50 >= 0) {
    snprintf(p50_text, sizeof(p50_text), "%.0f", p50);
    snprintf(p99_text, sizeof(p99_text), "%.0f", p99);
  }
  fprintf(stderr, "%-16s %9d %12.2f %14.1f %10s %10s %12.2f %7.2fx\n", path, producers, ns,
          1e3 / ns, p50_text, p99_text, baseline_ns, ns / baseline_ns);
}

static int pw_bench_suite_completion(int argc, char** argv) {
  pw_bench_completion_config_t cfg = {
      .events = pw_bench_opt_int(argc, argv, "events", 2000000),
      .reps = pw_bench_opt_int(argc, argv, "reps", 7),
      .latency_samples = pw_bench_opt_int(argc, argv, "latency-samples", 20000),
  };
  if (cfg.events < 2 || cfg.reps < 1 || cfg.latency_samples < 2) {
    fprintf(stderr, "pw-bench completion: --events >= 2, --reps >= 1, --latency-samples >= 2\n");
    return 2;
  }
  const pw_bench_path_t* paths[] = {&pw_bench_path_ring, &pw_bench_path_completion,
                                    &pw_bench_path_events};
  fprintf(stderr, "%-16s %9s %12s %14s %10s %10s %12s %8s\n", "path", "producers",
          "ns/event", "Mevents/s", "p50_ns", "p99_ns", "baseline_ns", "ratio");
  for (int producers = 1; producers <= 2; ++producers) {
    /* The baseline is measured in the same configuration right before. */
    double baseline = pw_bench_throughput(&pw_bench_path_ring, &cfg, producers);
    for (size_t k = 0; k < sizeof(paths) / sizeof(paths[0]); ++k) {
      double ns = k == 0 ? baseline : pw_bench_throughput(paths[k], &cfg, producers);
      double p50 = -1, p99 = -1;
      if (producers == 1) pw_bench_latency(paths[k]->name, cfg.latency_samples, &p50, &p99);
      pw_bench_completion_report(paths[k]->name, producers, ns, baseline, p50, p99);
    }
  }
  return 0;
}

PW_BENCH_SUITE(completion, "completion",
               "event completion throughput 1->1 and 2->1, completion-to-observer "
               "latency; baseline: ck_ring SPSC per item",
               pw_bench_suite_completion)
