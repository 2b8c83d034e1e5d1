/* Many threads record metrics events while others scrape (the visitor
 * and the Prometheus text) and one serves them over HTTP: no lock on the
 * record path, no torn read (every scrape's counts only grow), and after
 * the recorders join, the totals are exact. Runs under every preset,
 * TSan included. Usage: stress_metrics [events per thread]. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics_support.h"
#include "runtime/fixture.h"

enum { kRecorders = 6, kScrapers = 2 };

static pw_runtime_t* g_rt;
static uint32_t g_events = 20000;
static atomic_int g_recording;
static atomic_int g_failed;
static atomic_int g_scrapes; /* scrapes done, all scrapers */
static uint16_t g_port;

#define CHECK(cond, ...)                         \
  do {                                           \
    if (!(cond)) {                               \
      fprintf(stderr, "stress_metrics: " __VA_ARGS__); \
      fprintf(stderr, "\n");                     \
      atomic_store(&g_failed, 1);                \
    }                                            \
  } while (0)

static void* recorder(void* arg) {
  uint32_t t = (uint32_t)(uintptr_t)arg;
  /* Start once every scraper has scraped: they overlap the recording. */
  while (atomic_load(&g_scrapes) < kScrapers + 1 && !atomic_load(&g_failed)) sched_yield();
  for (uint32_t i = 0; i < g_events; ++i) {
    pw_obs_event_t e = {.kind = PW_OBS_LAUNCH, .slice = t % 2, .device = 0, .count = 2,
                        .client = 1 + t % 3, .ts_ns = 1000000};
    mt_event(g_rt, e);
    e.kind = PW_OBS_LAUNCH_DONE;
    e.since_ns = e.ts_ns - (1000u << (i % 8));
    mt_event(g_rt, e);
    e.kind = PW_OBS_OP_DONE;
    e.flags = i % 10 == 0 ? PW_OBS_FAILED : 0;
    mt_event(g_rt, e);
  }
  return NULL;
}

static void* scraper(void* arg) {
  bool http = arg != NULL;
  mt_samples_t* s = malloc(sizeof(*s));
  double last = 0;
  while (atomic_load(&g_recording) && !atomic_load(&g_failed)) {
    if (http) {
      int status = 0;
      char type[128];
      char* body = NULL;
      CHECK(mt_http(g_port, "GET", "/metrics", &status, type, sizeof(type), &body) &&
                status == 200 && strstr(body, "# TYPE pathways_launch_latency_seconds") != NULL,
            "scrape over HTTP failed (%d)", status);
      free(body);
      atomic_fetch_add(&g_scrapes, 1);
      continue;
    }
    pw_status_t st = mt_read(g_rt, s);
    CHECK(st == NULL, "read: %s", pw_status_message(st));
    pw_status_free(st);
    const mt_series_t* h = mt_find(s, "pathways_launch_latency_seconds", "");
    CHECK(h != NULL, "no launch latency");
    if (h == NULL) break;
    CHECK((double)h->count >= last, "count went down: %llu < %g", (unsigned long long)h->count,
          last);
    for (uint32_t b = 1; b < h->bucket_count; ++b) {
      CHECK(h->buckets[b] >= h->buckets[b - 1], "buckets not cumulative at %u", b);
    }
    last = (double)h->count;
    atomic_fetch_add(&g_scrapes, 1);
  }
  free(s);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 1) g_events = (uint32_t)strtoul(argv[1], NULL, 10);
  pw_fixture_t f;
  pw_status_t st = pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 2, "2", pw_allocator_system());
  if (st == NULL) st = pw_runtime_metrics_enable(f.runtime, NULL);
  pw_metrics_server_t* server = NULL;
  if (st == NULL) st = pw_metrics_server_start(f.runtime, NULL, &server);
  if (st != NULL) {
    fprintf(stderr, "stress_metrics: setup: %s\n", pw_status_message(st));
    return 1;
  }
  g_rt = f.runtime;
  g_port = pw_metrics_server_port(server);
  atomic_store(&g_recording, 1);
  pthread_t rec[kRecorders], scr[kScrapers + 1];
  for (uintptr_t i = 0; i <= kScrapers; ++i) {
    pthread_create(&scr[i], NULL, scraper, i == kScrapers ? (void*)1 : NULL);
  }
  for (uintptr_t i = 0; i < kRecorders; ++i) pthread_create(&rec[i], NULL, recorder, (void*)i);
  for (int i = 0; i < kRecorders; ++i) pthread_join(rec[i], NULL);
  atomic_store(&g_recording, 0);
  for (int i = 0; i <= kScrapers; ++i) pthread_join(scr[i], NULL);
  mt_samples_t* s = malloc(sizeof(*s));
  st = mt_read(g_rt, s);
  CHECK(st == NULL, "final read");
  pw_status_free(st);
  double per_slice = (double)g_events * kRecorders / 2;
  double failed = (double)((g_events + 9) / 10) * kRecorders / 2;
  CHECK(mt_value(s, "pathways_unit_launches_total", "slice=0,slice_name=slice0") == per_slice,
        "slice 0 launches");
  CHECK(mt_value(s, "pathways_device_launches_total", "slice=1,slice_name=slice1") ==
            2 * per_slice, "slice 1 devices");
  CHECK(mt_value(s, "pathways_ops_failed_total", "slice=1,slice_name=slice1") == failed,
        "slice 1 failed ops");
  CHECK(mt_value(s, "pathways_ops_completed_total", "slice=0,slice_name=slice0") ==
            per_slice - failed, "slice 0 completed ops");
  CHECK(mt_value(s, "pathways_launches_in_flight", "slice=0,slice_name=slice0") == 0,
        "in flight");
  const mt_series_t* h = mt_find(s, "pathways_launch_latency_seconds", "");
  CHECK(h != NULL && h->count == (uint64_t)g_events * kRecorders, "latency count");
  /* 1 us << (i % 8): 1 us is le 1e-6 (index 0), 2 and 4 us le 2.5e-6 and 5e-6 ... */
  CHECK(h != NULL && h->buckets[0] == (uint64_t)(g_events + 7) / 8 * kRecorders, "bucket 0");
  double client1 = 0;
  for (uint32_t c = 1; c <= 3; ++c) {
    char labels[64];
    snprintf(labels, sizeof(labels), "client=client%u,client_tag=%u", c, c);
    client1 += mt_value(s, "pathways_client_ops_launched_total", labels);
  }
  CHECK(client1 == (double)g_events * kRecorders, "client launches %g", client1);
  free(s);
  pw_metrics_server_stop(server);
  pw_fixture_deinit(&f);
  if (atomic_load(&g_failed)) return 1;
  printf("stress_metrics: %u events x %d threads, %d scrapes meanwhile: ok\n", g_events * 3,
         kRecorders, atomic_load(&g_scrapes));
  return 0;
}
