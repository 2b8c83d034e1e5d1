/* pathways-elastic: data-parallel training that survives a lost slice.
 *
 * Four slices of two CPU devices. The job (logistic regression, full batch
 * of 240 examples) runs as one gang over every healthy slice: a virtual
 * slice spanning them holds the batch split over all their devices and a
 * replica of the weights, and the gradient is one all-reduce across them.
 * The elastic helper (pathways/elastic.h) snapshots the weights every 5
 * steps. At step 12 a device of slice 2 fails; the helper sees the step
 * fail, restores the snapshot of step 10 onto the 3 healthy slices and
 * goes on. At step 20 the device is repaired; the health thread sees the
 * slice come back and the helper grows back to 4 slices at the next
 * snapshot boundary. The final weights must equal an uninterrupted run's
 * (the plain C reference of the same full-batch descent) within 1e-4: the
 * gradient is the same mean whatever the number of devices.
 *
 * Usage: pathways-elastic [--steps N] [--kill-at K] [--repair-at R] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elastic_common.h"
#include "logreg_common.h"
#include "pathways/elastic.h"
#include "pathways/pathways.h"

#define PW_EXAMPLE_NAME "pathways-elastic"
#include "example_check.h"

enum { kN = 240, kD = 8, kPer = 2, kSlices = 4 };
static const double kLearningRate = 0.5;

typedef struct job_s {
  pw_client_t* client;
  pw_backend_t backend;
  const float* x;
  const float* y;
  /* Built by setup on the current slices. */
  pw_vslice_t vs;
  pw_example_logreg_programs_t prog;
  pw_graph_t graph;
  pw_buffer_t X, Y;
  bool built;
  int kill_at, repair_at;
  uint32_t kill_device;
  float loss;
} job_t;

static const pw_array_spec_t kXs = {PW_DTYPE_F32, {2, {kN, kD}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
static const pw_array_spec_t kYs = {PW_DTYPE_F32, {2, {kN, 1}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
static const pw_array_spec_t kWs = {PW_DTYPE_F32, {2, {kD, 1}}, PW_SHARDING_REPLICATED_INIT};

static void job_release(job_t* j) {
  if (!j->built) return;
  pw_status_free(pw_buffer_release(j->client, j->X));
  pw_status_free(pw_buffer_release(j->client, j->Y));
  pw_status_free(pw_graph_release(j->client, j->graph));
  pw_executable_t* exes[] = {&j->prog.logits, &j->prog.dloss, &j->prog.grad_partial,
                             &j->prog.grad_reduce, &j->prog.sgd};
  for (size_t i = 0; i < sizeof(exes) / sizeof(exes[0]); ++i) {
    if (exes[i]->id != 0) pw_status_free(pw_executable_release(j->client, *exes[i]));
  }
  pw_status_free(pw_vslice_release(j->client, j->vs));
  memset(&j->prog, 0, sizeof(j->prog));
  j->built = false;
}

/* One gang over |slices|: the batch split over their devices. */
static pw_status_t job_setup(void* user, pw_elastic_t* e, const uint32_t* slices, uint32_t count,
                             bool restoring) {
  job_t* j = user;
  pw_vslice_span_t span = {0};
  span.struct_size = sizeof(span);
  span.mesh = (pw_mesh_shape_t)PW_MESH_SHAPE_INIT(1, count * kPer);
  span.slice_count = count;
  span.slices = slices;
  PW_RETURN_IF_ERROR(pw_vslice_create_spanning(j->client, &span, &j->vs));
  j->built = true;
  int devices = (int)(count * kPer);
  PW_RETURN_IF_ERROR(pw_example_logreg_compile(j->client, j->vs, kN, kD, devices, kN,
                                               kLearningRate, &j->prog));
  PW_RETURN_IF_ERROR(pw_graph_create(j->client, &j->graph));
  uint32_t X, Y, W, z, g, w2;
  PW_RETURN_IF_ERROR(pw_graph_add_parameter(j->client, j->graph, j->vs, &kXs, &X));
  PW_RETURN_IF_ERROR(pw_graph_add_parameter(j->client, j->graph, j->vs, &kYs, &Y));
  PW_RETURN_IF_ERROR(pw_graph_add_parameter(j->client, j->graph, j->vs, &kWs, &W));
  PW_RETURN_IF_ERROR(
      pw_example_logreg_gradient(j->client, j->graph, j->vs, &j->prog, X, Y, W, &z, &g));
  pw_value_t in[2] = {pw_value(W, 0), pw_value(g, 0)};
  PW_RETURN_IF_ERROR(pw_graph_add_compute(j->client, j->graph, "sgd", j->prog.sgd, j->vs, in, 2, &w2));
  PW_RETURN_IF_ERROR(pw_graph_add_output(j->client, j->graph, pw_value(w2, 0)));
  /* The data loader: the whole batch, split over this mesh. */
  PW_RETURN_IF_ERROR(pw_buffer_from_host(j->client, j->vs, &kXs, j->x, sizeof(float) * kN * kD, &j->X));
  PW_RETURN_IF_ERROR(pw_buffer_from_host(j->client, j->vs, &kYs, j->y, sizeof(float) * kN, &j->Y));
  PW_RETURN_IF_ERROR(pw_elastic_place(e, 0, j->vs, &kWs));
  if (!restoring) {
    float w0[kD] = {0};
    pw_buffer_t w;
    PW_RETURN_IF_ERROR(pw_buffer_from_host(j->client, j->vs, &kWs, w0, sizeof(w0), &w));
    PW_RETURN_IF_ERROR(pw_elastic_set_state(e, 0, w));
  }
  return NULL;
}

static void job_teardown(void* user, pw_elastic_t* e) {
  (void)e;
  job_release(user);
}

static float job_loss(const job_t* j, const float* w) {
  return pw_example_logreg_loss(kN, kD, j->x, j->y, w);
}

static pw_status_t job_step(void* user, pw_elastic_t* e, uint64_t step) {
  job_t* j = user;
  if ((int)step == j->kill_at) {
    printf("step %llu: device %u (slice 2) fails\n", (unsigned long long)step, j->kill_device);
    PW_RETURN_IF_ERROR(pw_cpu_backend_set_health(j->backend, j->kill_device, PW_DEVICE_FAILED));
    j->kill_at = -1;
  }
  if ((int)step == j->repair_at) {
    printf("step %llu: device %u repaired\n", (unsigned long long)step, j->kill_device);
    PW_RETURN_IF_ERROR(pw_cpu_backend_set_health(j->backend, j->kill_device, PW_DEVICE_HEALTHY));
    j->repair_at = -1;
  }
  pw_buffer_t args[3] = {j->X, j->Y, {0}};
  PW_RETURN_IF_ERROR(pw_elastic_state(e, 0, &args[2]));
  pw_buffer_t next;
  pw_event_t* done;
  PW_RETURN_IF_ERROR(pw_graph_submit(j->client, j->graph, args, 3, NULL, &next, 1, &done));
  pw_status_t status = pw_event_wait(done, pw_deadline_from_timeout(30000000000LL));
  pw_event_release(done);
  float w[kD];
  if (status == NULL) {
    status = pw_buffer_to_host(j->client, next, w, sizeof(w), pw_deadline_from_timeout(30000000000LL));
  }
  if (status != NULL) {
    pw_status_free(pw_buffer_release(j->client, next));
    return status;
  }
  PW_RETURN_IF_ERROR(pw_elastic_set_state(e, 0, next));
  j->loss = job_loss(j, w);
  printf("step %llu loss %.6f slices %u\n", (unsigned long long)step, j->loss,
         pw_elastic_slice_count(e));
  return NULL;
}

static void job_event(void* user, const pw_elastic_event_t* ev) {
  (void)user;
  pw_example_elastic_print_event(ev);
}

int main(int argc, char** argv) {
  int steps = 40, kill_at = 12, repair_at = 20;
  for (int i = 1; i < argc; ++i) {
    if (i + 1 < argc && strcmp(argv[i], "--steps") == 0) {
      steps = atoi(argv[++i]);
    } else if (i + 1 < argc && strcmp(argv[i], "--kill-at") == 0) {
      kill_at = atoi(argv[++i]);
    } else if (i + 1 < argc && strcmp(argv[i], "--repair-at") == 0) {
      repair_at = atoi(argv[++i]);
    } else {
      fprintf(stderr, "%s: unknown argument '%s'\nusage: %s [--steps N] [--kill-at K] "
              "[--repair-at R]\n", PW_EXAMPLE_NAME, argv[i], PW_EXAMPLE_NAME);
      return 2;
    }
  }
  if (steps < 1) {
    fprintf(stderr, "%s: --steps must be at least 1\n", PW_EXAMPLE_NAME);
    return 2;
  }
  printf("libpathways %s: elastic data-parallel training on %d CPU slices of %d devices\n",
         pw_version_string(), kSlices, kPer);
  pw_cpu_backend_options_t cpu;
  pw_cpu_backend_options_init(&cpu);
  cpu.device_count = kSlices * kPer;
  cpu.worker_count = 2;
  pw_backend_t backend;
  CHECK(pw_cpu_backend_create(&cpu, &backend));
  pw_slice_desc_t slices[kSlices];
  char names[kSlices][16];
  for (int s = 0; s < kSlices; ++s) {
    snprintf(names[s], sizeof(names[s]), "slice%d", s);
    slices[s] = (pw_slice_desc_t){names[s], PW_MESH_SHAPE_INIT(1, kPer), 0, (uint32_t)(s * kPer), (uint32_t)s};
  }
  pw_runtime_options_t ro = {0};
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = kSlices;
  ro.health_poll_ns = 1000000; /* sees the repaired slice come back */
  pw_runtime_t* runtime;
  CHECK(pw_runtime_create(&ro, &runtime));
  pw_client_t* client;
  CHECK(pw_client_create(runtime, NULL, &client));

  float* x = malloc(sizeof(float) * kN * kD);
  float* y = malloc(sizeof(float) * kN);
  if (x == NULL || y == NULL) return 1;
  pw_example_logreg_data(kN, kD, x, y);
  job_t job = {0};
  job.client = client;
  job.backend = backend;
  job.x = x;
  job.y = y;
  job.kill_at = kill_at;
  job.repair_at = repair_at;
  job.kill_device = 2 * kPer + 1;
  const char* state_names[1];
  pw_elastic_options_t eo = pw_example_elastic_options(kPer, state_names);
  pw_elastic_job_t cb = {sizeof(cb), &job, job_setup, job_teardown, job_step, job_event};
  pw_elastic_t* elastic;
  CHECK(pw_elastic_create(client, &eo, &cb, &elastic));
  CHECK(pw_elastic_run(elastic, 0, (uint64_t)steps));
  pw_buffer_t wbuf;
  float w[kD];
  CHECK(pw_elastic_state(elastic, 0, &wbuf));
  CHECK(pw_buffer_to_host(client, wbuf, w, sizeof(w), PW_INFINITE_FUTURE));
  pw_elastic_stats_t stats = {.struct_size = sizeof(stats)};
  CHECK(pw_elastic_stats(elastic, &stats));
  uint32_t final_slices = pw_elastic_slice_count(elastic);
  CHECK(pw_elastic_destroy(elastic));

  /* The uninterrupted run: the same full-batch descent in plain C. */
  float ref[kD] = {0}, ref_loss = 0;
  pw_example_logreg_reference(kN, kD, x, y, steps, kLearningRate, ref, &ref_loss);
  double worst = 0;
  for (int k = 0; k < kD; ++k) worst = fmax(worst, fabs((double)w[k] - ref[k]));
  float final_loss = job_loss(&job, w), expect_loss = job_loss(&job, ref);
  printf("final loss %.6f (uninterrupted %.6f), max weight difference %.2e; %u recoveries, "
         "%u growths, %llu steps replayed, %u slices at the end\n",
         final_loss, expect_loss, worst, stats.recoveries, stats.growths,
         (unsigned long long)stats.steps_replayed, final_slices);
  CHECK(pw_client_destroy(client));
  CHECK(pw_runtime_destroy(runtime));
  free(x);
  free(y);
  if (worst > 1e-4 || fabsf(final_loss - expect_loss) > 1e-4f) {
    fprintf(stderr, "%s: FAILED: the result differs from the uninterrupted run\n", PW_EXAMPLE_NAME);
    return 1;
  }
  if (kill_at >= 0 && kill_at < steps && stats.recoveries == 0) {
    fprintf(stderr, "%s: FAILED: the lost slice was not recovered from\n", PW_EXAMPLE_NAME);
    return 1;
  }
  printf("OK: elastic training matches the uninterrupted run\n");
  return 0;
}
