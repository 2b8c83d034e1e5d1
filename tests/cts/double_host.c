/* The test double's launch_host (double_backend.h, HOST LAUNCH): one call
 * for a run of one host's devices of a gang op. The descriptor is checked
 * whole before anything runs; each device's part then runs as a launch of
 * its own would (double_exec.c), completing into one record that calls
 * the caller's done once, after the last part, with the first failure. */
#include <stdio.h>
#include <string.h>

#include "cts/double_internal.h"

/* One accepted host launch, until its done has been called. */
typedef struct pw_double_host_run_t {
  pw_double_backend_t* d;
  _Atomic uint32_t remaining;   /* parts whose done has not come */
  _Atomic(pw_status_t) failure; /* the first part's error, or NULL */
  pw_backend_done_fn_t done;
  pw_backend_done_timed_fn_t done_timed;
  void* done_user;
} pw_double_host_run_t;

static void pw_double_host_part_done(void* user, pw_status_t status) {
  pw_double_host_run_t* run = user;
  if (status != NULL) {
    pw_status_t none = NULL;
    if (!atomic_compare_exchange_strong(&run->failure, &none, status)) pw_status_free(status);
  }
  if (atomic_fetch_sub(&run->remaining, 1) != 1) return;
  pw_double_backend_t* d = run->d;
  pw_status_t first = atomic_load(&run->failure);
  pw_backend_done_fn_t done = run->done;
  pw_backend_done_timed_fn_t done_timed = run->done_timed;
  void* done_user = run->done_user;
  pw_allocator_free(d->allocator, run, sizeof(*run));
  if (done != NULL) {
    done(done_user, first);
  } else {
    done_timed(done_user, first, NULL); /* no device clock: timing unknown */
  }
}

/* The checks every mode makes: what the descriptor says of itself and of
 * the run's place in the gang, and each device's host. */
static pw_status_t pw_double_host_check_shape(const pw_double_backend_t* d,
                                              const pw_backend_host_launch_t* h) {
  if (h == NULL || h->struct_size < PW_BACKEND_HOST_LAUNCH_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double launch_host: struct_size %zu, at least %zu expected",
                          h == NULL ? (size_t)0 : h->struct_size,
                          (size_t)PW_BACKEND_HOST_LAUNCH_SIZE_V1);
  }
  if (h->done == NULL && h->done_timed == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double launch_host on host %u: no done callback", h->host);
  }
  if (h->device_count == 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double launch_host on host %u: device_count is 0", h->host);
  }
  if (h->group_devices == NULL || h->mesh_start > h->group_size ||
      h->device_count > h->group_size - h->mesh_start) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double launch_host on host %u: mesh_start %u + device_count %u "
                          "exceeds the gang's group_size %u (or group_devices is NULL)",
                          h->host, h->mesh_start, h->device_count, h->group_size);
  }
  if ((h->input_count != 0 && h->inputs == NULL) ||
      (h->output_count != 0 && h->outputs == NULL)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double launch_host on host %u: %s is NULL with %s_count %u",
                          h->host, h->inputs == NULL ? "inputs" : "outputs",
                          h->inputs == NULL ? "input" : "output",
                          h->inputs == NULL ? h->input_count : h->output_count);
  }
  for (uint32_t i = 0; i < h->device_count; ++i) {
    uint32_t m = h->mesh_start + i;
    uint32_t device = h->group_devices[m];
    if (device >= d->options.device_count) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "double launch_host on host %u: mesh position %u names device "
                            "%u, out of range (backend has %u)",
                            h->host, m, device, d->options.device_count);
    }
    if (pw_double_host_of(d, device) != h->host) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "double launch_host on host %u: device %u (mesh position %u) "
                            "is on host %u: not a run of one host's devices",
                            h->host, device, m, pw_double_host_of(d, device));
    }
  }
  return NULL;
}

/* Device |i|'s part of |h| as a launch descriptor, its parameter arrays in
 * |inputs| / |outputs|. */
static pw_status_t pw_double_host_part(const pw_backend_host_launch_t* h, uint32_t i,
                                       pw_backend_memory_t* inputs, pw_backend_memory_t* outputs,
                                       pw_backend_launch_t* out) {
  uint32_t m = h->mesh_start + i;
  for (uint32_t k = 0; k < h->input_count; ++k) {
    if (h->inputs[k] == NULL) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "double launch_host on host %u: inputs[%u] is NULL", h->host, k);
    }
    inputs[k] = h->inputs[k][i];
  }
  for (uint32_t k = 0; k < h->output_count; ++k) {
    if (h->outputs[k] == NULL) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "double launch_host on host %u: outputs[%u] is NULL", h->host, k);
    }
    outputs[k] = h->outputs[k][i];
  }
  memset(out, 0, sizeof(*out));
  out->struct_size = sizeof(*out);
  out->executable = h->executable;
  out->device = h->group_devices[m];
  out->mesh_index = m;
  out->group_devices = h->group_devices;
  out->group_size = h->group_size;
  out->gang_id = h->gang_id;
  out->inputs = inputs;
  out->input_count = h->input_count;
  out->outputs = outputs;
  out->output_count = h->output_count;
  out->done = pw_double_host_part_done; /* not called: launch_check wants one */
  return NULL;
}

/* Refused after the shape checks: counts it on the host and its devices and
 * unblocks the gang's other parts when it is a collective. */
static pw_status_t pw_double_host_reject(pw_double_backend_t* d,
                                         const pw_backend_host_launch_t* h,
                                         pw_status_t status) {
  atomic_fetch_add(&d->hosts[h->host].rejected, 1);
  pw_backend_launch_t part;
  memset(&part, 0, sizeof(part));
  part.executable = h->executable;
  part.gang_id = h->gang_id;
  for (uint32_t i = 0; i < h->device_count; ++i) {
    atomic_fetch_add(&d->devices[h->group_devices[h->mesh_start + i]].rejected, 1);
  }
  pw_double_refuse_part(d, &part);
  return status;
}

/* No-op mode: the contract's refusals only; counts per host. */
static pw_status_t pw_double_host_no_op(pw_double_backend_t* d,
                                        const pw_backend_host_launch_t* h) {
  PW_RETURN_IF_ERROR(pw_double_host_check_shape(d, h));
  /* As no-op launch: a lane's launches do not overlap, a load and a store
   * count exactly. */
  pw_double_host_t* host = &d->hosts[h->host];
  uint64_t n = atomic_load_explicit(&host->launches, memory_order_relaxed);
  atomic_store_explicit(&host->launches, n + 1, memory_order_relaxed);
  uint64_t p = atomic_load_explicit(&host->parts, memory_order_relaxed);
  atomic_store_explicit(&host->parts, p + h->device_count, memory_order_relaxed);
  if (h->done != NULL) {
    h->done(h->done_user, NULL);
  } else {
    h->done_timed(h->done_user, NULL, NULL);
  }
  return NULL;
}

/* Every part as launch checks it, and the failed-device refusal. */
/* One part's argument arrays (inputs then outputs), as many as |h| has. */
static pw_status_t pw_double_host_args(pw_double_backend_t* d, const pw_backend_host_launch_t* h,
                                       pw_backend_memory_t** out) {
  *out = NULL;
  size_t n = (size_t)h->input_count + h->output_count;
  if (n == 0) return NULL;
  return pw_allocator_calloc_array(d->allocator, n, sizeof(pw_backend_memory_t), 0,
                                   (void**)out);
}

static void pw_double_host_args_free(pw_double_backend_t* d, const pw_backend_host_launch_t* h,
                                     pw_backend_memory_t* args) {
  pw_allocator_free(d->allocator, args,
                    ((size_t)h->input_count + h->output_count) * sizeof(pw_backend_memory_t));
}

static pw_status_t pw_double_host_check_parts(pw_double_backend_t* d,
                                              const pw_backend_host_launch_t* h) {
  pw_backend_memory_t* args = NULL;
  PW_RETURN_IF_ERROR(pw_double_host_args(d, h, &args));
  for (uint32_t i = 0; i < h->device_count; ++i) {
    pw_backend_launch_t part;
    pw_status_t status = pw_double_host_part(h, i, args, args + h->input_count, &part);
    if (status != NULL) {
      pw_double_host_args_free(d, h, args);
      return status;
    }
    status = pw_double_launch_check(d, &part);
    if (status != NULL) {
      pw_double_host_args_free(d, h, args);
      return pw_status_annotate(status, "double launch_host on host %u: device %u (mesh "
                                        "position %u)", h->host, part.device, part.mesh_index);
    }
  }
  pw_double_host_args_free(d, h, args);
  for (uint32_t i = 0; i < h->device_count; ++i) {
    uint32_t device = h->group_devices[h->mesh_start + i];
    if (atomic_load(&d->devices[device].health) == PW_DEVICE_FAILED &&
        d->options.failed_device_mode == PW_DOUBLE_FAIL_AT_LAUNCH) {
      return pw_status_make(PW_STATUS_UNAVAILABLE,
                            "double launch_host on host %u: device %u failed", h->host,
                            device);
    }
  }
  return NULL;
}

/* Makes every part's job into |jobs| (all or none). */
static pw_status_t pw_double_host_make_jobs(pw_double_backend_t* d,
                                            const pw_backend_host_launch_t* h,
                                            pw_status_code_t injected,
                                            pw_double_host_run_t* run, pw_double_job_t** jobs) {
  pw_backend_memory_t* args = NULL;
  pw_status_t status = pw_double_host_args(d, h, &args);
  for (uint32_t i = 0; i < h->device_count && status == NULL; ++i) {
    pw_backend_launch_t part;
    status = pw_double_host_part(h, i, args, args + h->input_count, &part);
    /* An injected failure fails the host launch once: on its first part. */
    if (status == NULL) {
      status = pw_double_job_make(d, &part, i == 0 ? injected : PW_STATUS_OK,
                                  pw_double_host_part_done, run, &jobs[i]);
    }
  }
  pw_double_host_args_free(d, h, args);
  if (status != NULL) {
    for (uint32_t i = 0; i < h->device_count; ++i) pw_double_job_free(d, jobs[i]);
  }
  return status;
}

pw_status_t pw_double_launch_host(void* self, const pw_backend_host_launch_t* h) {
  pw_double_backend_t* d = self;
  if (d->options.no_op) return pw_double_host_no_op(d, h);
  pw_status_t status = pw_double_host_check_shape(d, h);
  if (status != NULL) {
    if (h != NULL) {
      /* A refused collective part must not leave the gang waiting. */
      pw_backend_launch_t part;
      memset(&part, 0, sizeof(part));
      part.executable = h->executable;
      part.gang_id = h->gang_id;
      pw_double_refuse_part(d, &part);
    }
    return status;
  }
  status = pw_double_host_check_parts(d, h);
  if (status != NULL) return pw_double_host_reject(d, h, status);
  pw_double_fail_mode_t mode = PW_DOUBLE_FAIL_AT_LAUNCH;
  pw_status_code_t injected = pw_double_claim_injection(d, &mode);
  if (injected != PW_STATUS_OK && mode == PW_DOUBLE_FAIL_AT_LAUNCH) {
    return pw_double_host_reject(d, h, pw_status_make(injected,
                                                      "double launch_host: injected failure "
                                                      "on host %u", h->host));
  }
  pw_double_host_run_t* run = NULL;
  pw_double_job_t** jobs = NULL;
  status = pw_allocator_calloc(d->allocator, sizeof(*run), 0, (void**)&run);
  if (status == NULL) {
    status = pw_allocator_calloc_array(d->allocator, h->device_count, sizeof(*jobs), 0,
                                       (void**)&jobs);
  }
  if (status == NULL) status = pw_double_host_make_jobs(d, h, injected, run, jobs);
  if (status != NULL) {
    if (jobs != NULL) pw_allocator_free(d->allocator, jobs, h->device_count * sizeof(*jobs));
    if (run != NULL) pw_allocator_free(d->allocator, run, sizeof(*run));
    return pw_double_host_reject(d, h, pw_status_annotate(status, "double launch_host"));
  }
  run->d = d;
  atomic_init(&run->remaining, h->device_count);
  atomic_init(&run->failure, NULL);
  run->done = h->done;
  run->done_timed = h->done_timed;
  run->done_user = h->done_user;
  atomic_fetch_add(&d->hosts[h->host].launches, 1);
  /* |run| may be freed by the last part; nothing of it is read after. */
  uint32_t count = h->device_count;
  uint64_t gang_id = h->gang_id;
  for (uint32_t i = 0; i < count; ++i) pw_double_job_submit(d, jobs[i], gang_id);
  pw_allocator_free(d->allocator, jobs, count * sizeof(*jobs));
  return NULL;
}

/* --- Counters declared in double_backend.h. --- */

uint64_t pw_double_backend_host_launch_count(pw_double_backend_t* d, uint32_t host) {
  if (d == NULL || host >= d->host_count) return 0;
  return atomic_load(&d->hosts[host].launches);
}

uint64_t pw_double_backend_total_host_launches(pw_double_backend_t* d) {
  uint64_t total = 0;
  for (uint32_t i = 0; d != NULL && i < d->host_count; ++i) {
    total += atomic_load(&d->hosts[i].launches);
  }
  return total;
}

uint64_t pw_double_backend_host_rejected(pw_double_backend_t* d, uint32_t host) {
  if (d == NULL || host >= d->host_count) return 0;
  return atomic_load(&d->hosts[host].rejected);
}
