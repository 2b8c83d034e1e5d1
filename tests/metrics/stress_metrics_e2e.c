/* Metrics on live work, for the sanitizers (TSan included): two clients
 * submit chains on the threaded test double (completions on its
 * threads) while a thread scrapes the Prometheus text, and metrics are
 * turned off and on once midway (a retired observer may still be
 * recording); after the last run, the counts since the last enable add
 * up: every op counted as submitted also completed, nothing in flight.
 * Usage: stress_metrics_e2e [runs per client]. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics_support.h"
#include "runtime/fixture.h"

enum { kClients = 2, kOps = 4 };
static const char* kCopy8 = "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n";

typedef struct job_t {
  pw_fixture_t* f;
  pw_client_t* client;
  uint32_t runs;
  pw_status_t status;
} job_t;

static atomic_int g_running;

static pw_status_t job_run(job_t* j) {
  pw_vslice_t vs;
  pw_mesh_shape_t mesh;
  PW_RETURN_IF_ERROR(pw_mesh_shape_parse("2x4", &mesh));
  PW_RETURN_IF_ERROR(pw_vslice_create(j->client, &mesh, PW_VSLICE_DEFAULT, &vs));
  pw_executable_t copy;
  PW_RETURN_IF_ERROR(pw_executable_compile(j->client, vs, kCopy8, strlen(kCopy8), NULL, &copy));
  pw_graph_t g;
  PW_RETURN_IF_ERROR(pw_graph_create(j->client, &g));
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t prev;
  PW_RETURN_IF_ERROR(pw_graph_add_parameter(j->client, g, vs, &spec, &prev));
  for (uint32_t i = 0; i < kOps; ++i) {
    pw_value_t in = pw_value(prev, 0);
    PW_RETURN_IF_ERROR(pw_graph_add_compute(j->client, g, "op", copy, vs, &in, 1, &prev));
  }
  PW_RETURN_IF_ERROR(pw_graph_add_output(j->client, g, pw_value(prev, 0)));
  pw_buffer_t arg;
  float data[8] = {0};
  PW_RETURN_IF_ERROR(pw_buffer_from_host(j->client, vs, &spec, data, sizeof(data), &arg));
  for (uint32_t r = 0; r < j->runs; ++r) {
    pw_buffer_t out;
    pw_event_t* done = NULL;
    PW_RETURN_IF_ERROR(pw_graph_submit(j->client, g, &arg, 1, NULL, &out, 1, &done));
    PW_RETURN_IF_ERROR(pw_fixture_wait(done));
    PW_RETURN_IF_ERROR(pw_buffer_release(j->client, out));
  }
  PW_RETURN_IF_ERROR(pw_buffer_release(j->client, arg));
  return pw_graph_release(j->client, g);
}

static void* submitter(void* arg) {
  job_t* j = arg;
  j->status = job_run(j);
  return NULL;
}

static void* scraper(void* arg) {
  pw_fixture_t* f = arg;
  while (atomic_load(&g_running)) {
    mt_text_t t = {0};
    pw_status_t s = pw_runtime_metrics_write_prometheus(f->runtime, mt_text_sink, &t);
    /* Off for a moment midway: FAILED_PRECONDITION then, nothing else. */
    if (s != NULL && pw_status_code(s) != PW_STATUS_FAILED_PRECONDITION) {
      fprintf(stderr, "stress_metrics_e2e: scrape: %s\n", pw_status_message(s));
      abort();
    }
    pw_status_free(s);
    mt_text_free(&t);
  }
  return NULL;
}

int main(int argc, char** argv) {
  uint32_t runs = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 200;
  pw_fixture_t f;
  pw_status_t s = pw_fixture_init(&f, PW_FIXTURE_DOUBLE_THREADED, kClients, "2x4",
                                  pw_allocator_system());
  if (s == NULL) s = pw_runtime_metrics_enable(f.runtime, NULL);
  job_t jobs[kClients] = {{&f, f.client, runs, NULL}, {&f, NULL, runs, NULL}};
  if (s == NULL) s = pw_client_create(f.runtime, &(pw_client_options_t){.struct_size =
                                          sizeof(pw_client_options_t), .name = "second"},
                                      &jobs[1].client);
  if (s != NULL) {
    fprintf(stderr, "stress_metrics_e2e: setup: %s\n", pw_status_message(s));
    return 1;
  }
  atomic_store(&g_running, 1);
  pthread_t sub[kClients], scr;
  pthread_create(&scr, NULL, scraper, &f);
  for (int c = 0; c < kClients; ++c) pthread_create(&sub[c], NULL, submitter, &jobs[c]);
  pw_status_t off = pw_runtime_metrics_disable(f.runtime);
  if (off == NULL) off = pw_runtime_metrics_enable(f.runtime, NULL);
  for (int c = 0; c < kClients; ++c) pthread_join(sub[c], NULL);
  atomic_store(&g_running, 0);
  pthread_join(scr, NULL);
  int failed = off != NULL;
  if (off != NULL) fprintf(stderr, "stress_metrics_e2e: off and on: %s\n", pw_status_message(off));
  pw_status_free(off);
  for (int c = 0; c < kClients; ++c) {
    if (jobs[c].status != NULL) {
      fprintf(stderr, "stress_metrics_e2e: client %d: %s\n", c, pw_status_message(jobs[c].status));
      pw_status_free(jobs[c].status);
      failed = 1;
    }
  }
  mt_samples_t* m = malloc(sizeof(*m));
  s = mt_read(f.runtime, m);
  double submitted = 0, completed = 0, launched = 0, inflight = 0;
  for (uint32_t i = 0; s == NULL && i < m->count; ++i) {
    const mt_series_t* x = &m->series[i];
    if (strcmp(x->family, "pathways_client_ops_submitted_total") == 0) submitted += x->value;
    if (strcmp(x->family, "pathways_client_ops_completed_total") == 0) completed += x->value;
    if (strcmp(x->family, "pathways_ops_launched_total") == 0) launched += x->value;
    if (strcmp(x->family, "pathways_launches_in_flight") == 0) inflight += x->value;
  }
  /* Runs submitted before the re-enable may complete after it: at most
   * one per client completes ops it did not count as submitted. */
  if (s != NULL || inflight != 0 || completed > submitted + kClients * kOps ||
      submitted > (double)kClients * kOps * runs || completed < submitted ||
      launched < submitted) {
    fprintf(stderr, "stress_metrics_e2e: submitted %g completed %g launched %g in flight %g\n",
            submitted, completed, launched, inflight);
    failed = 1;
  }
  pw_status_free(s);
  free(m);
  pw_status_free(pw_client_destroy(jobs[1].client));
  pw_fixture_deinit(&f);
  if (failed) return 1;
  printf("stress_metrics_e2e: %u runs x %d clients, %g ops counted: ok\n", runs, kClients,
         submitted);
  return 0;
}
