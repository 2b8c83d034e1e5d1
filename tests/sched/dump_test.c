/* pw_runtime_dump (lib/sched/dump.c): what every device waits for. On
 * the test double with DEFERRED completion (nothing completes until the
 * test runs it, so the state is still while the dump reads it): idle
 * devices, a device that launched and waits for its backend, a device
 * waiting at a transfer whose producer has not completed, a lane of a
 * host launch; behind the queue wrapper (queued launch): a lost launch
 * outstanding in a device's queue, which its deadline then fails. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cts/double_backend.h"
#include "pathways/pathways.h"
#include "runtime/checks.h"
#include "support/queue_wrapper.h"
#include "support/test_allocators.h"

TestSuite(dump, .fini = pw_test_check_leaks);

#define PW_WAIT_NS (10 * (pw_time_t)1000000000)

/* The report's lines, joined with newlines. */
typedef struct report_t {
  char text[16384];
  size_t length;
  int lines;
} report_t;

static void collect(void* user, const char* line) {
  report_t* r = user;
  int n = snprintf(r->text + r->length, sizeof(r->text) - r->length, "%s\n", line);
  if (n > 0 && r->length + (size_t)n < sizeof(r->text)) r->length += (size_t)n;
  r->lines++;
}

static void dump(pw_runtime_t* rt, report_t* r) {
  memset(r, 0, sizeof(*r));
  OK(pw_runtime_dump(rt, collect, r));
}

static void has(const report_t* r, const char* needle) {
  cr_assert(strstr(r->text, needle) != NULL, "the dump lacks \"%s\":\n%s", needle, r->text);
}

typedef struct env_t {
  pw_runtime_t* rt;
  pw_client_t* client;
  pw_backend_t backend; /* a copy; the runtime owns it */
  pw_vslice_t vs[2];
  pw_executable_t copy;
  pw_array_spec_t spec;
} env_t;

/* Two slices of |devices| on a DEFERRED double (|per_host| > 0: host
 * launch with that many devices per host). */
static void env_init(env_t* e, uint32_t devices, uint32_t per_host) {
  memset(e, 0, sizeof(*e));
  pw_double_options_t o;
  pw_double_options_init(&o);
  o.device_count = 2 * devices;
  o.completion = PW_DOUBLE_COMPLETE_DEFERRED;
  o.host_launch = per_host > 0;
  o.devices_per_host = per_host;
  OK(pw_double_backend_create(&o, &e->backend));
  pw_slice_desc_t slices[2] = {
      {.name = "left", .mesh = pw_mesh_shape_make(1, &devices), .first_device = 0},
      {.name = "right", .mesh = pw_mesh_shape_make(1, &devices), .first_device = devices}};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &e->backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = 2;
  OK(pw_runtime_create(&ro, &e->rt));
  pw_client_options_t co = {sizeof(co), "dumper", 1, 0};
  OK(pw_client_create(e->rt, &co, &e->client));
  for (int s = 0; s < 2; ++s) {
    OK(pw_vslice_create(e->client, &slices[s].mesh, PW_VSLICE_DEFAULT, &e->vs[s]));
  }
  char text[128];
  snprintf(text, sizeof(text), "copy\ninput f32[%u] split(0,0)\noutput f32[%u] split(0,0)\n",
           devices, devices);
  OK(pw_executable_compile(e->client, e->vs[0], text, strlen(text), NULL, &e->copy));
  int64_t n = devices;
  e->spec = (pw_array_spec_t){PW_DTYPE_F32, pw_shape_make(1, &n), pw_sharding_split(0, 0)};
}

static void env_deinit(env_t* e) {
  OK(pw_executable_release(e->client, e->copy));
  for (int s = 0; s < 2; ++s) OK(pw_vslice_release(e->client, e->vs[s]));
  OK(pw_client_destroy(e->client));
  OK(pw_runtime_destroy(e->rt));
}

/* parameter -> "work" (copy on left) -> "hop" (transfer to right) -> output. */
static pw_graph_t hop_graph(env_t* e) {
  pw_graph_t g;
  OK(pw_graph_create(e->client, &g));
  uint32_t p, c, t;
  OK(pw_graph_add_parameter(e->client, g, e->vs[0], &e->spec, &p));
  pw_value_t v = pw_value(p, 0);
  OK(pw_graph_add_compute(e->client, g, "work", e->copy, e->vs[0], &v, 1, &c));
  OK(pw_graph_add_transfer(e->client, g, "hop", pw_value(c, 0), e->vs[1],
                           pw_sharding_split(0, 0), &t));
  OK(pw_graph_add_output(e->client, g, pw_value(t, 0)));
  OK(pw_graph_finalize(e->client, g));
  return g;
}

static void run_hop_graph(env_t* e, uint32_t devices, const char* const* needles, size_t count) {
  pw_graph_t g = hop_graph(e);
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  pw_buffer_t arg, out;
  OK(pw_buffer_from_host(e->client, e->vs[0], &e->spec, x, devices * sizeof(float), &arg));
  pw_event_t* done = NULL;
  OK(pw_graph_submit(e->client, g, &arg, 1, NULL, &out, 1, &done));
  report_t r;
  dump(e->rt, &r);
  for (size_t k = 0; k < count; ++k) has(&r, needles[k]);
  /* Released, the run completes and every device goes idle after it. */
  pw_double_backend_t* d = pw_double_backend_from(&e->backend);
  while (!pw_event_is_ready(done)) {
    if (pw_double_backend_run_deferred(d, 0) == 0) {
      OK(pw_event_wait(done, pw_clock_now() + 1000000));
    }
  }
  OK(pw_event_wait(done, pw_clock_now() + PW_WAIT_NS));
  pw_event_release(done);
  dump(e->rt, &r);
  has(&r, "idle (after the slice's last op)");
  cr_assert(strstr(r.text, "launched, the backend") == NULL, "%s", r.text);
  OK(pw_buffer_release(e->client, arg));
  OK(pw_buffer_release(e->client, out));
  OK(pw_graph_release(e->client, g));
}

Test(dump, idle_runtime) {
  env_t e;
  env_init(&e, 2, 0);
  report_t r;
  dump(e.rt, &r);
  has(&r, "runtime: 2 slices");
  has(&r, "slice 'left' (backend 'double'): 2 devices in 2 units of dispatch, queue depth 0");
  has(&r, "  device 1: idle (nothing appended yet)");
  cr_assert_eq(r.lines, 1 + 2 * 3, "%d lines:\n%s", r.lines, r.text);
  FAILS(pw_runtime_dump(NULL, collect, &r), PW_STATUS_INVALID_ARGUMENT, "must not be NULL");
  FAILS(pw_runtime_dump(e.rt, NULL, &r), PW_STATUS_INVALID_ARGUMENT, "must not be NULL");
  env_deinit(&e);
}

Test(dump, launched_and_waiting_devices) {
  env_t e;
  env_init(&e, 2, 0);
  const char* const needles[] = {
      "  device 0: runs node 1 (\"work\", gang ",
      "client 'dumper'): launched, the backend has not completed it",
      "slice 'right'",
      "  device 1: waits at node 2 (\"hop\", gang ",
      "for its inputs: 1 producers or arguments not complete",
  };
  run_hop_graph(&e, 2, needles, sizeof(needles) / sizeof(needles[0]));
  env_deinit(&e);
}

Test(dump, lanes_are_one_line) {
  env_t e;
  env_init(&e, 4, 2);
  const char* const needles[] = {
      "4 devices in 2 units of dispatch",
      "  devices 2-3 (host 1): runs node 1 (\"work\"",
      "  devices 2-3 (host 3): waits at node 2 (\"hop\"",
  };
  run_hop_graph(&e, 4, needles, sizeof(needles) / sizeof(needles[0]));
  env_deinit(&e);
}

/* ---- queued: a lost launch in the queue --------------------------------- */

/* The runtime's error lines, joined (the watchdog logs from its thread). */
typedef struct log_t {
  pthread_mutex_t lock;
  char text[4096];
  size_t length;
} log_t;

static void log_errors(pw_log_level_t level, const char* subsystem, const char* message,
                       void* user) {
  log_t* l = user;
  if (level != PW_LOG_ERROR) return;
  pthread_mutex_lock(&l->lock);
  int n = snprintf(l->text + l->length, sizeof(l->text) - l->length, "%s: %s\n", subsystem,
                   message);
  if (n > 0 && l->length + (size_t)n < sizeof(l->text)) l->length += (size_t)n;
  pthread_mutex_unlock(&l->lock);
}

Test(dump, queued_lost_launch) {
  pw_double_options_t o;
  pw_double_options_init(&o);
  o.device_count = 1;
  o.completion = PW_DOUBLE_COMPLETE_INLINE;
  pw_backend_t inner, backend;
  OK(pw_double_backend_create(&o, &inner));
  pw_queue_wrapper_options_t qo = {.depth = 4, .ordered = true};
  OK(pw_queue_wrapper_create(&qo, inner, &backend));
  pw_queue_wrapper_t* qw = pw_queue_wrapper_from(&backend);
  pw_queue_wrapper_lose(qw, 0, 1); /* the first launch's done never comes */
  pw_slice_desc_t slice = {.name = "q", .mesh = pw_mesh_shape_make(1, (const uint32_t[]){1})};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = &slice;
  ro.slice_count = 1;
  log_t errors = {.lock = PTHREAD_MUTEX_INITIALIZER};
  ro.logger = (pw_logger_t){log_errors, &errors, PW_LOG_ERROR};
  pw_runtime_t* rt;
  OK(pw_runtime_create(&ro, &rt));
  pw_client_t* client;
  OK(pw_client_create(rt, NULL, &client));
  pw_vslice_t vs;
  OK(pw_vslice_create(client, &slice.mesh, 0, &vs));
  pw_executable_t copy;
  OK(pw_executable_compile(client, vs, "copy\n", 5, NULL, &copy));
  int64_t one = 1;
  pw_array_spec_t spec = {PW_DTYPE_U8, pw_shape_make(1, &one), pw_sharding_replicated()};
  pw_graph_t g;
  OK(pw_graph_create(client, &g));
  uint32_t node;
  OK(pw_graph_add_parameter(client, g, vs, &spec, &node));
  for (int k = 0; k < 3; ++k) {
    pw_value_t v = pw_value(node, 0);
    OK(pw_graph_add_compute(client, g, "link", copy, vs, &v, 1, &node));
  }
  OK(pw_graph_add_output(client, g, pw_value(node, 0)));
  uint8_t byte = 7;
  pw_buffer_t arg, out;
  OK(pw_buffer_from_host(client, vs, &spec, &byte, 1, &arg));
  /* A 300 ms deadline: long enough to dump the queue first. */
  pw_submit_options_t so = {.struct_size = sizeof(so), .launch_deadline_ns = 300 * 1000000ull};
  pw_event_t* done = NULL;
  OK(pw_graph_submit(client, g, &arg, 1, &so, &out, 1, &done));
  report_t r;
  dump(rt, &r);
  has(&r, "queue depth 4");
  has(&r, "device 0 queue: node 1 (\"link\"");
  has(&r, "launched, not completed");
  /* The lost one stays outstanding; the two behind it run (the wrapper
   * does not stop its queue for a lost launch) and may have completed. */
  has(&r, " of 4 launches outstanding");
  cr_assert(strstr(r.text, "device 0 queue: 0 of 4") == NULL, "%s", r.text);
  /* The lost launch passes its deadline: the watchdog fails it, and the
   * run with it. */
  FAILS(pw_event_wait(done, pw_clock_now() + PW_WAIT_NS), PW_STATUS_DEADLINE_EXCEEDED,
        "deadline");
  pw_event_release(done);
  /* The watchdog said which launch it failed, and its queue. */
  pthread_mutex_lock(&errors.lock);
  cr_assert(strstr(errors.text, "dispatch: the watchdog fails a launch that has not completed "
                                "(its status says why): node 1 (\"link\", gang ") != NULL,
            "%s", errors.text);
  cr_assert(strstr(errors.text, "on slice 'q' device 0 (backend 'queue(double)')") != NULL ||
                strstr(errors.text, "on slice 'q' device 0 (backend '") != NULL,
            "%s", errors.text);
  cr_assert(strstr(errors.text, "launches outstanding in its queue") != NULL, "%s", errors.text);
  pthread_mutex_unlock(&errors.lock);
  OK(pw_buffer_release(client, arg));
  OK(pw_buffer_release(client, out));
  OK(pw_graph_release(client, g));
  OK(pw_executable_release(client, copy));
  OK(pw_vslice_release(client, vs));
  OK(pw_client_destroy(client));
  OK(pw_runtime_destroy(rt));
}
