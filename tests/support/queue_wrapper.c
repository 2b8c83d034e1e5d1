/* The queue-ordered wrapper backend (queue_wrapper.h): per device a FIFO
 * worker (the stream) and a completer (the way back to the host). */
#define _POSIX_C_SOURCE 200809L
#include "support/queue_wrapper.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pathways/clock.h"

#define PW_QW_MAX_GROUP 256
#define PW_QW_GAP_RING 4096

/* One accepted host launch (launch_host), shared by the entries it put in
 * each of its devices' queues: the last worker to reach it runs it on the
 * inner backend, the last completer to reach it calls done. */
typedef struct pw_qw_host_s {
  pw_backend_host_launch_t launch; /* the caller's, arrays pointing below */
  uint32_t group[PW_QW_MAX_GROUP];
  const pw_backend_memory_t* inputs[PW_BACKEND_MAX_PARAMS];
  const pw_backend_memory_t* outputs[PW_BACKEND_MAX_PARAMS];
  pw_backend_memory_t* shards; /* (input_count + output_count) x device_count */
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  uint32_t arrived, back, released; /* workers in, completers in, completers out */
  bool ran, inner_done, delivered, lost;
  pw_status_code_t fail_code; /* an injected failure of one of its devices, or OK */
  uint64_t fail_seq;
  pw_status_t status;
  pw_backend_timing_t timing;
} pw_qw_host_t;

typedef struct pw_qw_entry_s {
  pw_backend_launch_t launch;
  pw_qw_host_t* host; /* a host launch's part, or NULL */
  pw_backend_memory_t inputs[PW_BACKEND_MAX_PARAMS];
  pw_backend_memory_t outputs[PW_BACKEND_MAX_PARAMS];
  uint32_t group[PW_QW_MAX_GROUP];
  uint64_t launched_ns;
  /* Completion, for the completer. */
  pw_status_t status;
  pw_backend_timing_t timing;
  uint64_t due_ns;
  bool lost;
} pw_qw_entry_t;

typedef struct pw_qw_device_s {
  struct pw_queue_wrapper_s* w;
  uint32_t index;
  pthread_mutex_t lock;
  pthread_cond_t work;     /* the worker: an entry queued, or stop */
  pthread_cond_t back;     /* the completer: a completion, or stop */
  pthread_cond_t inner;    /* the inner launch's done */
  pw_qw_entry_t* ring;     /* depth slots */
  uint32_t head, queued;   /* queued for the worker, from head */
  uint32_t done_head, done_count; /* finished, for the completer (after the queued) */
  uint32_t outstanding;    /* accepted, done not called */
  bool stop;
  bool inner_done;
  pw_status_t inner_status;
  uint64_t last_seq;
  uint64_t fail_seq, lose_seq;
  pw_status_code_t fail_code;
  pw_queue_wrapper_stats_t stats;
  uint64_t gaps[PW_QW_GAP_RING];
  pthread_t worker, completer;
} pw_qw_device_t;

struct pw_queue_wrapper_s {
  pw_backend_vtable_t vtable;
  pw_backend_t inner;
  pw_queue_wrapper_options_t options;
  uint32_t device_count;
  pw_qw_device_t* devices;
  pthread_mutex_t host_mutex; /* queues host launches one at a time */
};

static void pw_qw_sleep_until(uint64_t t) {
  uint64_t now = (uint64_t)pw_clock_now();
  if (t <= now) return;
  if (t - now > 60000) {
    struct timespec ts = {(time_t)((t - now - 50000) / 1000000000),
                          (long)((t - now - 50000) % 1000000000)};
    nanosleep(&ts, NULL);
  }
  while ((uint64_t)pw_clock_now() < t) {
  }
}

static void pw_qw_inner_done(void* user, pw_status_t status) {
  pw_qw_device_t* d = user;
  pthread_mutex_lock(&d->lock);
  d->inner_status = status;
  d->inner_done = true;
  pthread_cond_signal(&d->inner);
  pthread_mutex_unlock(&d->lock);
}

/* Runs |e| on the inner backend and waits for it (unlocked). */
static pw_status_t pw_qw_run_inner(pw_qw_device_t* d, pw_qw_entry_t* e) {
  pw_backend_launch_t l = e->launch;
  /* One launch at a time with done, as a v1 runtime would; the node
   * argument (v3) passes through. */
  l.struct_size = PW_BACKEND_LAUNCH_SIZE_V3;
  l.queue_seq = 0;
  l.done_timed = NULL;
  l.done = pw_qw_inner_done;
  l.done_user = d;
  pthread_mutex_lock(&d->lock);
  d->inner_done = false;
  pthread_mutex_unlock(&d->lock);
  const pw_backend_t* in = &d->w->inner;
  pw_status_t status = in->vtable->launch(in->self, &l);
  if (status != NULL) return status;
  pthread_mutex_lock(&d->lock);
  while (!d->inner_done) pthread_cond_wait(&d->inner, &d->lock);
  status = d->inner_status;
  pthread_mutex_unlock(&d->lock);
  return status;
}

static void pw_qw_host_inner_done(void* user, pw_status_t status) {
  pw_qw_host_t* h = user;
  pthread_mutex_lock(&h->mutex);
  h->status = status;
  h->inner_done = true;
  pthread_cond_broadcast(&h->cond);
  pthread_mutex_unlock(&h->mutex);
}

/* Device |d|'s worker reached host entry |e|: the last of the host
 * launch's devices to get there runs it on the inner backend (after the
 * launch delay, then the kernel time, as one launch), the others wait for
 * it, so each device's queue stays in order. |fail|: the injected failure
 * of this device's queue_seq, or OK. */
static void pw_qw_host_run(pw_qw_device_t* d, pw_qw_entry_t* e, pw_status_code_t fail,
                           uint64_t* out_start, uint64_t* out_end) {
  pw_qw_host_t* h = e->host;
  const pw_queue_wrapper_options_t* o = &d->w->options;
  pthread_mutex_lock(&h->mutex);
  if (fail != PW_STATUS_OK && h->fail_code == PW_STATUS_OK) h->fail_code = fail;
  h->lost = h->lost || e->lost;
  e->lost = false; /* the host launch is lost once, by its completers */
  if (++h->arrived < h->launch.device_count) {
    while (!h->ran) pthread_cond_wait(&h->cond, &h->mutex);
  } else {
    pthread_mutex_unlock(&h->mutex);
    pw_qw_sleep_until(e->launched_ns + o->launch_delay_ns);
    uint64_t start = (uint64_t)pw_clock_now();
    pw_backend_host_launch_t l = h->launch;
    l.struct_size = PW_BACKEND_HOST_LAUNCH_SIZE_V1;
    l.queue_seq = 0; /* the inner backend is not queued */
    l.done = pw_qw_host_inner_done;
    l.done_timed = NULL;
    l.done_user = h;
    const pw_backend_t* in = &d->w->inner;
    pw_status_t status = in->vtable->launch_host(in->self, &l);
    pthread_mutex_lock(&h->mutex);
    if (status != NULL) h->status = status; /* refused: its done never comes */
    while (status == NULL && !h->inner_done) pthread_cond_wait(&h->cond, &h->mutex);
    pthread_mutex_unlock(&h->mutex);
    if (o->kernel_ns != 0) pw_qw_sleep_until(start + o->kernel_ns);
    pthread_mutex_lock(&h->mutex);
    if (h->status == NULL && h->fail_code != PW_STATUS_OK) {
      h->status = pw_status_make(h->fail_code,
                                 "queue wrapper: injected failure of host launch %llu on host %u",
                                 (unsigned long long)h->fail_seq, h->launch.host);
    }
    h->timing = (pw_backend_timing_t){sizeof(pw_backend_timing_t), start,
                                      (uint64_t)pw_clock_now(), 0};
    h->ran = true;
    pthread_cond_broadcast(&h->cond);
  }
  *out_start = h->timing.start_ns;
  *out_end = h->timing.end_ns;
  pthread_mutex_unlock(&h->mutex);
}

static void pw_qw_host_free(pw_qw_host_t* h) {
  pthread_mutex_destroy(&h->mutex);
  pthread_cond_destroy(&h->cond);
  free(h->shards);
  free(h);
}

/* Device |d|'s completer reached host entry |e|: the last of its devices
 * to get there calls done (once, unless lost); the others wait for that,
 * so each device's dones stay in queue_seq order. */
static void pw_qw_host_complete(pw_qw_host_t* h) {
  pthread_mutex_lock(&h->mutex);
  if (++h->back == h->launch.device_count) {
    pthread_mutex_unlock(&h->mutex);
    if (h->lost) {
      pw_status_free(h->status);
    } else if (h->launch.done_timed != NULL) {
      h->launch.done_timed(h->launch.done_user, h->status, &h->timing);
    } else {
      h->launch.done(h->launch.done_user, h->status);
    }
    pthread_mutex_lock(&h->mutex);
    h->delivered = true;
    pthread_cond_broadcast(&h->cond);
  }
  while (!h->delivered) pthread_cond_wait(&h->cond, &h->mutex);
  bool last = ++h->released == h->launch.device_count;
  pthread_mutex_unlock(&h->mutex);
  if (last) pw_qw_host_free(h);
}

static int pw_qw_cmp(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

static void* pw_qw_worker(void* arg) {
  pw_qw_device_t* d = arg;
  const pw_queue_wrapper_options_t* o = &d->w->options;
  uint32_t depth = o->depth;
  uint64_t last_end = 0;
  pthread_mutex_lock(&d->lock);
  for (;;) {
    while (d->queued == 0 && !d->stop) pthread_cond_wait(&d->work, &d->lock);
    if (d->queued == 0) break;
    pw_qw_entry_t* e = &d->ring[d->head];
    uint64_t seq = e->launch.queue_seq;
    bool fail = seq != 0 && (seq == d->fail_seq || (o->fail_every && seq % o->fail_every == 0));
    e->lost = seq != 0 && (seq == d->lose_seq || (o->lose_every && seq % o->lose_every == 0));
    pw_status_code_t code = seq == d->fail_seq ? d->fail_code : PW_STATUS_DATA_LOSS;
    pthread_mutex_unlock(&d->lock);
    uint64_t start = 0, end = 0;
    pw_status_t status = NULL;
    if (e->host != NULL) {
      pw_qw_host_run(d, e, fail ? code : PW_STATUS_OK, &start, &end);
    } else {
      pw_qw_sleep_until(e->launched_ns + o->launch_delay_ns);
      start = (uint64_t)pw_clock_now();
      status = pw_qw_run_inner(d, e);
      if (o->kernel_ns != 0) pw_qw_sleep_until(start + o->kernel_ns);
      if (status == NULL && fail) {
        status = pw_status_make(code,
                                "queue wrapper: injected failure of launch %llu on device %u",
                                (unsigned long long)seq, d->index);
      }
      end = (uint64_t)pw_clock_now();
    }
    pthread_mutex_lock(&d->lock);
    pw_queue_wrapper_stats_t* st = &d->stats;
    if (st->first_start_ns == 0) st->first_start_ns = start;
    /* A gap counts when this launch was queued before the last ended. */
    if (last_end != 0 && e->launched_ns <= last_end) {
      d->gaps[st->gaps % PW_QW_GAP_RING] = start - last_end;
      st->gaps++;
      st->gap_ns_total += start - last_end;
    }
    last_end = end;
    st->last_end_ns = end;
    st->busy_ns += end - start;
    e->status = status;
    e->timing = (pw_backend_timing_t){sizeof(pw_backend_timing_t), start, end, 0};
    e->due_ns = end + o->done_delay_ns;
    d->head = (d->head + 1) % depth;
    d->queued--;
    d->done_count++;
    pthread_cond_signal(&d->back);
  }
  pthread_mutex_unlock(&d->lock);
  return NULL;
}

static void* pw_qw_completer(void* arg) {
  pw_qw_device_t* d = arg;
  uint32_t depth = d->w->options.depth;
  pthread_mutex_lock(&d->lock);
  for (;;) {
    while (d->done_count == 0 && !(d->stop && d->queued == 0)) {
      pthread_cond_wait(&d->back, &d->lock);
    }
    if (d->done_count == 0) break;
    pw_qw_entry_t e = d->ring[d->done_head];
    pthread_mutex_unlock(&d->lock);
    pw_qw_sleep_until(e.due_ns);
    pthread_mutex_lock(&d->lock);
    d->done_head = (d->done_head + 1) % depth;
    d->done_count--;
    d->outstanding--;
    pthread_mutex_unlock(&d->lock);
    if (e.host != NULL) {
      pw_qw_host_complete(e.host);
    } else if (e.lost) {
      pw_status_free(e.status);
    } else if (e.launch.struct_size >= PW_BACKEND_LAUNCH_SIZE_V2 && e.launch.done_timed) {
      e.launch.done_timed(e.launch.done_user, e.status, &e.timing);
    } else {
      e.launch.done(e.launch.done_user, e.status);
    }
    pthread_mutex_lock(&d->lock);
  }
  pthread_mutex_unlock(&d->lock);
  return NULL;
}

static pw_queue_wrapper_t* pw_qw(void* self) { return self; }

static pw_status_t pw_qw_launch(void* self, const pw_backend_launch_t* l) {
  pw_queue_wrapper_t* w = pw_qw(self);
  if (l == NULL || l->struct_size < PW_BACKEND_LAUNCH_SIZE_V1 || l->device >= w->device_count ||
      l->group_size > PW_QW_MAX_GROUP || l->input_count > PW_BACKEND_MAX_PARAMS ||
      l->output_count > PW_BACKEND_MAX_PARAMS) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "queue wrapper: bad launch");
  }
  pw_qw_device_t* d = &w->devices[l->device];
  uint64_t seq = l->struct_size >= PW_BACKEND_LAUNCH_SIZE_V2 ? l->queue_seq : 0;
  pthread_mutex_lock(&d->lock);
  if (d->outstanding == w->options.depth) {
    d->stats.refused++;
    pthread_mutex_unlock(&d->lock);
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "queue wrapper: device %u has %u launches outstanding (its depth)",
                          l->device, w->options.depth);
  }
  if (seq != 0 && seq != d->last_seq + 1) d->stats.out_of_order++;
  d->last_seq = seq;
  uint32_t slot = (d->head + d->queued) % w->options.depth;
  pw_qw_entry_t* e = &d->ring[slot];
  e->launch = *l;
  if (l->struct_size < PW_BACKEND_LAUNCH_SIZE_V3) e->launch.node_arg = 0;
  e->host = NULL;
  memcpy(e->inputs, l->inputs, l->input_count * sizeof(e->inputs[0]));
  memcpy(e->outputs, l->outputs, l->output_count * sizeof(e->outputs[0]));
  memcpy(e->group, l->group_devices, l->group_size * sizeof(e->group[0]));
  e->launch.inputs = e->inputs;
  e->launch.outputs = e->outputs;
  e->launch.group_devices = e->group;
  e->launched_ns = (uint64_t)pw_clock_now();
  d->queued++;
  d->outstanding++;
  d->stats.launches++;
  if (d->outstanding > d->stats.max_outstanding) d->stats.max_outstanding = d->outstanding;
  pthread_cond_signal(&d->work);
  pthread_mutex_unlock(&d->lock);
  return NULL;
}

/* Checks a host launch as a whole before any of it is queued (the inner
 * backend checks the parts when it runs it). */
static pw_status_t pw_qw_host_check(pw_queue_wrapper_t* w, const pw_backend_host_launch_t* h) {
  if (h == NULL || h->struct_size < PW_BACKEND_HOST_LAUNCH_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "queue wrapper launch_host: struct_size %zu, at least %zu expected",
                          h == NULL ? (size_t)0 : h->struct_size,
                          (size_t)PW_BACKEND_HOST_LAUNCH_SIZE_V1);
  }
  if ((h->done == NULL && h->done_timed == NULL) || h->device_count == 0 ||
      h->group_devices == NULL || h->group_size > PW_QW_MAX_GROUP ||
      h->mesh_start > h->group_size || h->device_count > h->group_size - h->mesh_start ||
      h->input_count > PW_BACKEND_MAX_PARAMS || h->output_count > PW_BACKEND_MAX_PARAMS ||
      (h->input_count != 0 && h->inputs == NULL) || (h->output_count != 0 && h->outputs == NULL)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "queue wrapper launch_host on host %u: bad descriptor (done %s, "
                          "mesh_start %u + device_count %u of group_size %u, %u inputs at %p, "
                          "%u outputs at %p)", h->host, h->done || h->done_timed ? "set" : "NULL",
                          h->mesh_start, h->device_count, h->group_size, h->input_count,
                          (const void*)h->inputs, h->output_count, (const void*)h->outputs);
  }
  for (uint32_t k = 0; k < h->input_count + h->output_count; ++k) {
    bool in = k < h->input_count;
    if ((in ? h->inputs[k] : h->outputs[k - h->input_count]) == NULL) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "queue wrapper launch_host on host %u: %s[%u] is NULL", h->host,
                            in ? "inputs" : "outputs", in ? k : k - h->input_count);
    }
  }
  for (uint32_t i = 0; i < h->device_count; ++i) {
    uint32_t device = h->group_devices[h->mesh_start + i];
    pw_backend_device_info_t info = {.struct_size = sizeof(info)};
    pw_status_t status = device < w->device_count
                             ? w->inner.vtable->device_info(w->inner.self, device, &info)
                             : pw_status_make(PW_STATUS_INVALID_ARGUMENT, "out of range");
    if (status != NULL || info.host != h->host) {
      pw_status_free(status);
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "queue wrapper launch_host on host %u: device %u (mesh position "
                            "%u) is not a device of that host", h->host, device,
                            h->mesh_start + i);
    }
    for (uint32_t j = 0; j < i; ++j) {
      if (h->group_devices[h->mesh_start + j] == device) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "queue wrapper launch_host on host %u: device %u twice",
                              h->host, device);
      }
    }
  }
  return NULL;
}

/* A copy of |l| whose arrays are its own. */
static pw_status_t pw_qw_host_copy(const pw_backend_host_launch_t* l, pw_qw_host_t** out) {
  *out = NULL;
  uint32_t n = l->device_count;
  uint32_t params = l->input_count + l->output_count;
  pw_qw_host_t* h = calloc(1, sizeof(*h));
  pw_backend_memory_t* shards = calloc(params ? params * n : 1, sizeof(*shards));
  if (h == NULL || shards == NULL) {
    free(h);
    free(shards);
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "queue wrapper launch_host");
  }
  h->launch = *l;
  h->shards = shards;
  memcpy(h->group, l->group_devices, l->group_size * sizeof(h->group[0]));
  for (uint32_t k = 0; k < params; ++k) {
    bool in = k < l->input_count;
    const pw_backend_memory_t* src = in ? l->inputs[k] : l->outputs[k - l->input_count];
    memcpy(&shards[k * n], src, n * sizeof(*shards));
    if (in) {
      h->inputs[k] = &shards[k * n];
    } else {
      h->outputs[k - l->input_count] = &shards[k * n];
    }
  }
  h->launch.group_devices = h->group;
  h->launch.inputs = h->inputs;
  h->launch.outputs = h->outputs;
  h->fail_seq = l->queue_seq;
  pthread_mutex_init(&h->mutex, NULL);
  pthread_cond_init(&h->cond, NULL);
  *out = h;
  return NULL;
}

/* launch_host: queues one entry in each of the run's device queues, all
 * or none (RESOURCE_EXHAUSTED when one is full). Host launches are queued
 * one at a time, so every device sees them in the same order. */
static pw_status_t pw_qw_launch_host(void* self, const pw_backend_host_launch_t* l) {
  pw_queue_wrapper_t* w = pw_qw(self);
  PW_RETURN_IF_ERROR(pw_qw_host_check(w, l));
  pw_qw_host_t* h = NULL;
  PW_RETURN_IF_ERROR(pw_qw_host_copy(l, &h));
  uint32_t n = l->device_count;
  pthread_mutex_lock(&w->host_mutex);
  for (uint32_t i = 0; i < n; ++i) pthread_mutex_lock(&w->devices[h->group[l->mesh_start + i]].lock);
  uint32_t full = n;
  for (uint32_t i = 0; i < n && full == n; ++i) {
    pw_qw_device_t* d = &w->devices[h->group[l->mesh_start + i]];
    if (d->outstanding == w->options.depth) full = i;
  }
  uint64_t now = (uint64_t)pw_clock_now();
  for (uint32_t i = 0; i < n; ++i) {
    pw_qw_device_t* d = &w->devices[h->group[l->mesh_start + i]];
    if (full != n) {
      d->stats.refused += i == full;
      continue;
    }
    uint64_t seq = l->queue_seq;
    if (seq != 0 && seq != d->last_seq + 1) d->stats.out_of_order++;
    d->last_seq = seq;
    pw_qw_entry_t* e = &d->ring[(d->head + d->queued) % w->options.depth];
    memset(&e->launch, 0, sizeof(e->launch));
    e->launch.struct_size = sizeof(e->launch);
    e->launch.queue_seq = seq;
    e->host = h;
    e->launched_ns = now;
    d->queued++;
    d->outstanding++;
    d->stats.launches++;
    d->stats.host_launches++;
    if (d->outstanding > d->stats.max_outstanding) d->stats.max_outstanding = d->outstanding;
    pthread_cond_signal(&d->work);
  }
  for (uint32_t i = 0; i < n; ++i) {
    pthread_mutex_unlock(&w->devices[h->group[l->mesh_start + i]].lock);
  }
  pthread_mutex_unlock(&w->host_mutex);
  if (full != n) {
    uint32_t device = h->group[l->mesh_start + full];
    pw_qw_host_free(h);
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "queue wrapper launch_host: device %u has %u launches outstanding "
                          "(its depth)", device, w->options.depth);
  }
  return NULL;
}

static pw_status_t pw_qw_queue_info(void* self, uint32_t device, pw_backend_queue_info_t* out) {
  pw_queue_wrapper_t* w = pw_qw(self);
  if (device >= w->device_count || out == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "queue wrapper: queue_info");
  }
  out->flags = w->options.ordered ? PW_BACKEND_QUEUE_ORDERED : 0;
  out->depth = w->options.depth;
  return NULL;
}

#define PW_QW_INNER(w) ((w)->inner.vtable)
static uint32_t pw_qw_device_count(void* self) {
  pw_queue_wrapper_t* w = pw_qw(self);
  return PW_QW_INNER(w)->device_count(w->inner.self);
}
static pw_status_t pw_qw_device_info(void* self, uint32_t device, pw_backend_device_info_t* out) {
  pw_queue_wrapper_t* w = pw_qw(self);
  return PW_QW_INNER(w)->device_info(w->inner.self, device, out);
}
static pw_device_health_t pw_qw_health(void* self, uint32_t device) {
  pw_queue_wrapper_t* w = pw_qw(self);
  return PW_QW_INNER(w)->health ? PW_QW_INNER(w)->health(w->inner.self, device) : PW_DEVICE_HEALTHY;
}
static pw_status_t pw_qw_compile(void* self, const void* program, size_t size,
                                 const pw_mesh_shape_t* mesh, const char* options,
                                 pw_allocator_t allocator, void** out, size_t* out_size) {
  pw_queue_wrapper_t* w = pw_qw(self);
  return PW_QW_INNER(w)->compile(w->inner.self, program, size, mesh, options, allocator, out,
                                 out_size);
}
static pw_status_t pw_qw_load(void* self, const void* bytes, size_t size,
                              pw_backend_executable_t* out, pw_executable_signature_t* sig) {
  pw_queue_wrapper_t* w = pw_qw(self);
  return PW_QW_INNER(w)->load(w->inner.self, bytes, size, out, sig);
}
static void pw_qw_unload(void* self, pw_backend_executable_t e) {
  pw_queue_wrapper_t* w = pw_qw(self);
  PW_QW_INNER(w)->unload(w->inner.self, e);
}
static pw_status_t pw_qw_allocate(void* self, uint32_t device, size_t size,
                                  pw_backend_memory_t* out) {
  pw_queue_wrapper_t* w = pw_qw(self);
  return PW_QW_INNER(w)->allocate(w->inner.self, device, size, out);
}
static void pw_qw_deallocate(void* self, uint32_t device, pw_backend_memory_t m) {
  pw_queue_wrapper_t* w = pw_qw(self);
  PW_QW_INNER(w)->deallocate(w->inner.self, device, m);
}
static pw_status_t pw_qw_to_device(void* self, uint32_t device, pw_backend_memory_t dst,
                                   size_t offset, const void* src, size_t size) {
  pw_queue_wrapper_t* w = pw_qw(self);
  return PW_QW_INNER(w)->copy_to_device(w->inner.self, device, dst, offset, src, size);
}
static pw_status_t pw_qw_to_host(void* self, uint32_t device, pw_backend_memory_t src,
                                 size_t offset, void* dst, size_t size) {
  pw_queue_wrapper_t* w = pw_qw(self);
  return PW_QW_INNER(w)->copy_to_host(w->inner.self, device, src, offset, dst, size);
}
static void* pw_qw_host_pointer(void* self, uint32_t device, pw_backend_memory_t m) {
  pw_queue_wrapper_t* w = pw_qw(self);
  return PW_QW_INNER(w)->host_pointer ? PW_QW_INNER(w)->host_pointer(w->inner.self, device, m)
                                      : NULL;
}

static void pw_qw_destroy(void* self) {
  pw_queue_wrapper_t* w = pw_qw(self);
  for (uint32_t i = 0; i < w->device_count && w->devices != NULL; ++i) {
    pw_qw_device_t* d = &w->devices[i];
    if (d->ring == NULL) continue;
    pthread_mutex_lock(&d->lock);
    d->stop = true;
    pthread_cond_broadcast(&d->work);
    pthread_cond_broadcast(&d->back);
    pthread_mutex_unlock(&d->lock);
    pthread_join(d->worker, NULL);
    pthread_join(d->completer, NULL);
    pthread_mutex_destroy(&d->lock);
    pthread_cond_destroy(&d->work);
    pthread_cond_destroy(&d->back);
    pthread_cond_destroy(&d->inner);
    free(d->ring);
  }
  free(w->devices);
  pthread_mutex_destroy(&w->host_mutex);
  if (w->inner.vtable) w->inner.vtable->destroy(w->inner.self);
  free(w);
}

pw_backend_t pw_queue_wrapper_inner(pw_queue_wrapper_t* w) { return w->inner; }

pw_queue_wrapper_t* pw_queue_wrapper_from(const pw_backend_t* backend) {
  if (backend == NULL || backend->vtable == NULL || backend->vtable->destroy != pw_qw_destroy) {
    return NULL;
  }
  return backend->self;
}

pw_status_t pw_queue_wrapper_create(const pw_queue_wrapper_options_t* options,
                                    pw_backend_t inner, pw_backend_t* out) {
  if (options->depth == 0 || options->depth > PW_BACKEND_MAX_QUEUE_DEPTH) {
    inner.vtable->destroy(inner.self);
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "queue wrapper: depth %u", options->depth);
  }
  pw_queue_wrapper_t* w = calloc(1, sizeof(*w));
  if (w == NULL) {
    inner.vtable->destroy(inner.self);
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "queue wrapper");
  }
  w->inner = inner;
  w->options = *options;
  w->device_count = inner.vtable->device_count(inner.self);
  pw_backend_vtable_t* v = &w->vtable;
  *v = (pw_backend_vtable_t){
      .struct_size = PW_BACKEND_VTABLE_SIZE_V3, .name = inner.vtable->name,
      .version = inner.vtable->version, .destroy = pw_qw_destroy,
      .device_count = pw_qw_device_count, .device_info = pw_qw_device_info,
      .health = pw_qw_health, .compile = pw_qw_compile, .load = pw_qw_load,
      .unload = pw_qw_unload, .allocate = pw_qw_allocate, .deallocate = pw_qw_deallocate,
      .launch = pw_qw_launch, .copy_to_device = pw_qw_to_device, .copy_to_host = pw_qw_to_host,
      .host_pointer = pw_qw_host_pointer, .record_copy = NULL, .queue_info = pw_qw_queue_info};
  /* The inner backend's host launch, queued as one launch of each device. */
  const pw_backend_vtable_t* iv = inner.vtable;
  if (iv->struct_size >= PW_BACKEND_VTABLE_SIZE_V4 && iv->launch_host != NULL) {
    v->struct_size = PW_BACKEND_VTABLE_SIZE_V4;
    v->launch_host = pw_qw_launch_host;
  }
  pthread_mutex_init(&w->host_mutex, NULL);
  w->devices = calloc(w->device_count ? w->device_count : 1, sizeof(pw_qw_device_t));
  pw_status_t status = w->devices ? NULL : pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "qw");
  for (uint32_t i = 0; status == NULL && i < w->device_count; ++i) {
    pw_qw_device_t* d = &w->devices[i];
    d->w = w;
    d->index = i;
    d->ring = calloc(options->depth, sizeof(pw_qw_entry_t));
    if (d->ring == NULL) {
      status = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "queue wrapper ring");
      break;
    }
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->work, NULL);
    pthread_cond_init(&d->back, NULL);
    pthread_cond_init(&d->inner, NULL);
    pthread_create(&d->worker, NULL, pw_qw_worker, d);
    pthread_create(&d->completer, NULL, pw_qw_completer, d);
  }
  if (status != NULL) {
    pw_qw_destroy(w);
    return status;
  }
  *out = (pw_backend_t){&w->vtable, w};
  return NULL;
}

void pw_queue_wrapper_fail(pw_queue_wrapper_t* w, uint32_t device, uint64_t queue_seq,
                           pw_status_code_t code) {
  pw_qw_device_t* d = &w->devices[device];
  pthread_mutex_lock(&d->lock);
  d->fail_seq = queue_seq;
  d->fail_code = code;
  pthread_mutex_unlock(&d->lock);
}

void pw_queue_wrapper_lose(pw_queue_wrapper_t* w, uint32_t device, uint64_t queue_seq) {
  pw_qw_device_t* d = &w->devices[device];
  pthread_mutex_lock(&d->lock);
  d->lose_seq = queue_seq;
  pthread_mutex_unlock(&d->lock);
}

pw_queue_wrapper_stats_t pw_queue_wrapper_stats(pw_queue_wrapper_t* w, uint32_t device) {
  pw_qw_device_t* d = &w->devices[device];
  pthread_mutex_lock(&d->lock);
  pw_queue_wrapper_stats_t st = d->stats;
  uint64_t n = st.gaps < PW_QW_GAP_RING ? st.gaps : PW_QW_GAP_RING;
  uint64_t* sorted = n ? malloc(n * sizeof(uint64_t)) : NULL;
  if (sorted != NULL) memcpy(sorted, d->gaps, n * sizeof(uint64_t));
  pthread_mutex_unlock(&d->lock);
  if (sorted != NULL) {
    qsort(sorted, n, sizeof(uint64_t), pw_qw_cmp);
    st.gap_ns_median = sorted[n / 2];
    free(sorted);
  }
  return st;
}

void pw_queue_wrapper_reset_stats(pw_queue_wrapper_t* w) {
  for (uint32_t i = 0; i < w->device_count; ++i) {
    pw_qw_device_t* d = &w->devices[i];
    pthread_mutex_lock(&d->lock);
    memset(&d->stats, 0, sizeof(d->stats));
    pthread_mutex_unlock(&d->lock);
  }
}
