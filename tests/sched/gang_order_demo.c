/* Why gang order matters. Four threads submit programs whose all-reduce
 * spans every device of one slice, on a test double whose devices block in
 * a collective until the whole gang arrives (as real devices do).
 *   - With gang ordering (the runtime's slice sequence), every program
 *     completes and all devices run the collectives in the same order.
 *   - With the debug switch that turns it off, launches reach the devices
 *     in racing orders; two devices each wait in a different collective for
 *     the other: a deadlock. It is detected by a deadline on the done
 *     events, not a hang; failing a device then aborts the stuck
 *     collectives so every execution still resolves, and the runtime is
 *     torn down cleanly.
 * The same again with the 4 devices split into two slices of 2 and the
 * programs on a virtual slice spanning both: the cross-slice gang keeps one
 * order on every device of both slices.
 * Plain executable (runs under TSan). Usage: gang_order_demo [submissions] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fixture.h"

#define THREADS 4
#define DEVICES 4

static int g_per_thread = 150;

typedef struct world_t {
  pw_runtime_t* runtime;
  pw_client_t* client;
  pw_double_backend_t* dbl;
  pw_graph_t graph;
  pw_buffer_t x;
  pw_event_t** done; /* THREADS * g_per_thread */
  atomic_int errors;
} world_t;

static bool ok(pw_status_t s, const char* what) {
  if (s == NULL) return true;
  char m[512];
  pw_status_format(s, m, sizeof(m));
  fprintf(stderr, "gang_order_demo: %s: %s\n", what, m);
  pw_status_free(s);
  return false;
}

typedef struct thread_arg_t {
  world_t* w;
  int index;
} thread_arg_t;

static void* submitter(void* p) {
  thread_arg_t* a = p;
  for (int i = 0; i < g_per_thread; ++i) {
    pw_buffer_t y;
    pw_event_t** slot = &a->w->done[a->index * g_per_thread + i];
    if (!ok(pw_graph_submit(a->w->client, a->w->graph, &a->w->x, 1, NULL, &y, 1, slot),
            "submit")) {
      a->w->errors++;
      return NULL;
    }
    if (!ok(pw_buffer_release(a->w->client, y), "release")) a->w->errors++;
  }
  return NULL;
}

/* Runs the workload; returns 1 if a deadlock was detected, 0 if all
 * completed OK, -1 on an unexpected error. */
static int run(bool gang_order, bool spanning) {
  pw_double_options_t o;
  pw_double_options_init(&o);
  o.device_count = DEVICES;
  o.completion = PW_DOUBLE_COMPLETE_THREADED;
  o.worker_count = DEVICES; /* one helper per device */
  o.blocking_collectives = true;
  o.order_capacity = 1u << 14;
  pw_backend_t backend;
  if (!ok(pw_double_backend_create(&o, &backend), "backend")) return -1;
  world_t w;
  memset(&w, 0, sizeof(w));
  w.dbl = pw_double_backend_from(&backend);
  pw_slice_desc_t slices[2] = {{"ring", PW_MESH_SHAPE_INIT(1, DEVICES), 0, 0, 0}, {"", PW_MESH_SHAPE_INIT(0, 0), 0, 0, 0}};
  if (spanning) {
    slices[0] = (pw_slice_desc_t){"left", PW_MESH_SHAPE_INIT(1, DEVICES / 2), 0, 0, 0};
    slices[1] = (pw_slice_desc_t){"right", PW_MESH_SHAPE_INIT(1, DEVICES / 2), 0, DEVICES / 2, 0};
  }
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = spanning ? 2 : 1;
  ro.debug_disable_gang_order = !gang_order;
  if (!ok(pw_runtime_create(&ro, &w.runtime), "runtime")) return -1;
  int result = -1;
  pw_vslice_t vs;
  pw_executable_t reduce;
  uint32_t p, r;
  const char* prog = "all_reduce_sum\ninput f32[4] split(0,all)\noutput f32[4] split(0,all)\n";
  pw_array_spec_t spec = {PW_DTYPE_F32, {1, {DEVICES}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
  float data[DEVICES] = {1, 2, 3, 4};
  pw_vslice_span_t span;
  memset(&span, 0, sizeof(span));
  span.struct_size = sizeof(span);
  span.mesh = (pw_mesh_shape_t)PW_MESH_SHAPE_INIT(1, DEVICES);
  span.slice_count = spanning ? 2 : 1;
  if (!ok(pw_client_create(w.runtime, NULL, &w.client), "client") ||
      !ok(pw_vslice_create_spanning(w.client, &span, &vs), "vslice") ||
      !ok(pw_executable_compile(w.client, vs, prog, strlen(prog), NULL, &reduce), "compile") ||
      !ok(pw_graph_create(w.client, &w.graph), "graph") ||
      !ok(pw_graph_add_parameter(w.client, w.graph, vs, &spec, &p), "param") ||
      !ok(pw_graph_add_compute(w.client, w.graph, "allreduce", reduce, vs,
                               &(pw_value_t){p, 0}, 1, &r), "compute") ||
      !ok(pw_graph_add_output(w.client, w.graph, pw_value(r, 0)), "output") ||
      !ok(pw_buffer_from_host(w.client, vs, &spec, data, sizeof(data), &w.x), "buffer")) {
    goto done;
  }
  size_t total = (size_t)THREADS * g_per_thread;
  w.done = calloc(total, sizeof(pw_event_t*));
  pthread_t threads[THREADS];
  thread_arg_t args[THREADS];
  for (int t = 0; t < THREADS; ++t) {
    args[t] = (thread_arg_t){&w, t};
    pthread_create(&threads[t], NULL, submitter, &args[t]);
  }
  for (int t = 0; t < THREADS; ++t) pthread_join(threads[t], NULL);
  if (w.errors) goto done;
  /* Wait with a deadline: a deadlock shows up as DEADLINE_EXCEEDED. */
  pw_time_t deadline = pw_deadline_from_timeout(3000000000LL);
  bool stuck = false;
  size_t completed = 0;
  for (size_t i = 0; i < total && !stuck; ++i) {
    pw_status_t s = pw_event_wait(w.done[i], deadline);
    if (pw_status_code(s) == PW_STATUS_DEADLINE_EXCEEDED) {
      stuck = true;
    } else if (s != NULL) {
      ok(s, "execution");
      goto done;
    } else {
      completed++;
    }
    if (s) pw_status_free(s);
  }
  if (stuck) {
    printf("gang_order_demo: %s, gang order %s: DEADLOCK detected by the deadline after %zu "
           "of %zu executions; in flight on the double: %llu\n",
           spanning ? "2 slices" : "1 slice", gang_order ? "on" : "off", completed, total,
           (unsigned long long)pw_double_backend_in_flight(w.dbl));
    /* Recover: a failed device aborts every collective waiting on it. */
    pw_double_backend_set_health(w.dbl, 0, PW_DEVICE_FAILED);
    pw_time_t later = pw_deadline_from_timeout(20000000000LL);
    for (size_t i = 0; i < total; ++i) {
      pw_status_t s = pw_event_wait(w.done[i], later);
      if (pw_status_code(s) == PW_STATUS_DEADLINE_EXCEEDED) {
        fprintf(stderr, "gang_order_demo: execution %zu did not resolve after recovery\n", i);
        pw_status_free(s);
        goto done;
      }
      pw_status_free(s);
    }
    result = 1;
  } else {
    /* Same order of gang ids on every device. */
    uint64_t* first = calloc(total, sizeof(uint64_t));
    uint64_t* other = calloc(total, sizeof(uint64_t));
    size_t n0 = pw_double_backend_launch_order(w.dbl, 0, first, total);
    bool same = true;
    for (uint32_t d = 1; d < DEVICES; ++d) {
      size_t n = pw_double_backend_launch_order(w.dbl, d, other, total);
      if (n != n0 || memcmp(first, other, n * sizeof(uint64_t)) != 0) same = false;
    }
    /* With gang order the orders must match. Without it they may differ
     * and still complete (this round's races happened not to cross in a
     * collective): not the deadlock, not an error either. */
    result = same || !gang_order ? 0 : -1;
    free(first);
    free(other);
    printf("gang_order_demo: %s, gang order %s: all %zu executions completed; per-device "
           "order %s\n",
           spanning ? "2 slices" : "1 slice", gang_order ? "on" : "off", total,
           same ? "identical" : "DIFFERS");
  }
done:
  for (size_t i = 0; w.done && i < (size_t)THREADS * g_per_thread; ++i) {
    pw_event_release(w.done[i]);
  }
  free(w.done);
  pw_client_destroy(w.client);
  pw_runtime_destroy(w.runtime);
  return result;
}

static int demo(bool spanning) {
  if (run(true, spanning) != 0) {
    fprintf(stderr, "gang_order_demo: with gang order the workload must complete\n");
    return 1;
  }
  /* Without gang order a deadlock depends on how the threads race; it is
   * all but certain within a few rounds (a loaded machine may need more). */
  for (int round = 0; round < 20; ++round) {
    int r = run(false, spanning);
    if (r == 1) return 0;
    if (r < 0) return 1;
  }
  fprintf(stderr, "gang_order_demo: no deadlock without gang order in 20 rounds\n");
  return 1;
}

int main(int argc, char** argv) {
  if (argc > 1) g_per_thread = atoi(argv[1]);
  return demo(false) | demo(true);
}
