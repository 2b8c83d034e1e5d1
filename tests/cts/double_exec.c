/* The test double's launch path: argument checks, fault injection, the
 * three completion modes (inline, helper threads, deferred), the collective
 * rendezvous, and completion bookkeeping. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cts/double_internal.h"

/* --- Completion. --- */

/* Calls |job|'s done with |status| (owned), frees the job, and updates the
 * counters: completion counts before done runs, in-flight after it returns. */
static void pw_double_finish(pw_double_backend_t* d, pw_double_job_t* job,
                             pw_status_t status) {
  pw_double_device_t* dev = &d->devices[job->device];
  atomic_fetch_add(status == NULL ? &dev->completed_ok : &dev->completed_error, 1);
  pw_backend_done_fn_t done = job->done;
  void* done_user = job->done_user;
  pw_allocator_free(d->allocator, job, job->alloc_size);
  done(done_user, status);
  pthread_mutex_lock(&d->idle_mutex);
  bool unblock = atomic_exchange(&dev->in_collective, 0) != 0;
  if (--d->in_flight == 0 || unblock) pthread_cond_broadcast(&d->idle_cond);
  pthread_mutex_unlock(&d->idle_mutex);
}

/* Finishes every job of a rendezvous chain with a copy of |status|'s code
 * and message; consumes |status|. */
static void pw_double_finish_chain(pw_double_backend_t* d, pw_double_job_t* head,
                                   pw_status_t status) {
  while (head != NULL) {
    pw_double_job_t* next = head->gang_next;
    pw_double_finish(d, head, pw_status_clone(status));
    head = next;
  }
  pw_status_free(status);
}

/* --- Collective rendezvous. Called with gang_mutex held. --- */

static uint32_t pw_double_poison_hash(uint64_t gang_id) {
  gang_id ^= gang_id >> 33;
  gang_id *= 0xff51afd7ed558ccdULL;
  gang_id ^= gang_id >> 33;
  return (uint32_t)gang_id & (PW_DOUBLE_POISON_TABLE - 1);
}

static void pw_double_poison_table_add(pw_double_backend_t* d, uint64_t gang_id) {
  if (gang_id == 0) return; /* 0 marks an empty slot; gang id 0 is never poisoned */
  uint32_t i = pw_double_poison_hash(gang_id);
  while (d->poison_table[i] != 0 && d->poison_table[i] != gang_id) {
    i = (i + 1) & (PW_DOUBLE_POISON_TABLE - 1);
  }
  d->poison_table[i] = gang_id;
}

static void pw_double_poison_locked(pw_double_backend_t* d, uint64_t gang_id) {
  d->poisoned[d->poisoned_next] = gang_id;
  d->poisoned_next = (d->poisoned_next + 1) % PW_DOUBLE_POISON_SLOTS;
  if (d->poisoned_used < PW_DOUBLE_POISON_SLOTS) d->poisoned_used++;
  if (++d->poison_inserts > PW_DOUBLE_POISON_SLOTS / 2) {
    /* Forget what fell out of the ring: rebuild from it. */
    memset(d->poison_table, 0, sizeof(d->poison_table));
    for (uint32_t i = 0; i < d->poisoned_used; ++i) pw_double_poison_table_add(d, d->poisoned[i]);
    d->poison_inserts = 0;
    return;
  }
  pw_double_poison_table_add(d, gang_id);
}

static bool pw_double_is_poisoned_locked(const pw_double_backend_t* d, uint64_t gang_id) {
  uint32_t i = pw_double_poison_hash(gang_id);
  while (d->poison_table[i] != 0) {
    if (d->poison_table[i] == gang_id) return true;
    i = (i + 1) & (PW_DOUBLE_POISON_TABLE - 1);
  }
  return false;
}

/* Unlinks and returns the pending head of |gang_id|, or NULL. */
static pw_double_job_t* pw_double_detach_locked(pw_double_backend_t* d, uint64_t gang_id) {
  for (pw_double_job_t** link = &d->gangs; *link != NULL; link = &(*link)->next) {
    if ((*link)->gang_id == gang_id) {
      pw_double_job_t* head = *link;
      *link = head->next;
      return head;
    }
  }
  return NULL;
}

/* Gang |gang_id| can no longer complete: fails its waiting parts and any
 * part that arrives later. */
static void pw_double_gang_fail(pw_double_backend_t* d, uint64_t gang_id,
                                pw_status_code_t code, const char* why) {
  pthread_mutex_lock(&d->gang_mutex);
  pw_double_poison_locked(d, gang_id);
  pw_double_job_t* head = pw_double_detach_locked(d, gang_id);
  pthread_mutex_unlock(&d->gang_mutex);
  if (head != NULL) {
    pw_double_finish_chain(d, head,
                           pw_status_make(code, "double: collective gang %llu: %s",
                                          (unsigned long long)gang_id, why));
  }
}

void pw_double_exec_abort_device(pw_double_backend_t* d, uint32_t device) {
  pw_double_job_t* aborted = NULL;
  pthread_mutex_lock(&d->gang_mutex);
  for (pw_double_job_t** link = &d->gangs; *link != NULL;) {
    pw_double_job_t* head = *link;
    bool member = false;
    for (uint32_t i = 0; i < head->group_size && !member; ++i) {
      member = head->group_devices[i] == device;
    }
    if (!member) {
      link = &head->next;
      continue;
    }
    *link = head->next;
    pw_double_poison_locked(d, head->gang_id);
    head->next = aborted;
    aborted = head;
  }
  pthread_mutex_unlock(&d->gang_mutex);
  while (aborted != NULL) {
    pw_double_job_t* next = aborted->next;
    pw_double_finish_chain(d, aborted,
                           pw_status_make(PW_STATUS_UNAVAILABLE,
                                          "double: collective gang %llu: device %u failed",
                                          (unsigned long long)aborted->gang_id, device));
    aborted = next;
  }
}

/* Sums input 0 of every part in mesh order into every part's output 0. */
static pw_status_t pw_double_all_reduce(pw_double_backend_t* d, pw_double_job_t* head) {
  uint32_t n = head->group_size;
  pw_double_job_t** ordered = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_allocator_calloc_array(d->allocator, n, sizeof(*ordered), 0,
                                                   (void**)&ordered),
                         "double all_reduce_sum");
  pw_status_t status = NULL;
  for (pw_double_job_t* j = head; j != NULL && status == NULL; j = j->gang_next) {
    if (j->executable != head->executable || ordered[j->mesh_index] != NULL ||
        j->inputs[0]->size != head->inputs[0]->size) {
      status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "double: collective gang %llu: parts disagree on the "
                              "executable, mesh positions or sizes",
                              (unsigned long long)head->gang_id);
    } else {
      ordered[j->mesh_index] = j;
    }
  }
  pw_dtype_t dtype = pw_double_input_c(&head->executable->program, 0)->dtype;
  size_t width = pw_dtype_size(dtype);
  size_t count = head->inputs[0]->size / width;
  for (size_t e = 0; e < count && status == NULL; ++e) {
    union {
      float f32;
      double f64;
      int32_t i32;
      int64_t i64;
      uint8_t u8;
    } sum, x;
    memset(&sum, 0, sizeof(sum));
    for (uint32_t m = 0; m < n; ++m) {
      memcpy(&x, ordered[m]->inputs[0]->data + e * width, width);
      switch (dtype) {
        case PW_DTYPE_F32: sum.f32 += x.f32; break;
        case PW_DTYPE_F64: sum.f64 += x.f64; break;
        case PW_DTYPE_I32: sum.i32 = (int32_t)((uint32_t)sum.i32 + (uint32_t)x.i32); break;
        case PW_DTYPE_I64: sum.i64 = (int64_t)((uint64_t)sum.i64 + (uint64_t)x.i64); break;
        default: sum.u8 = (uint8_t)(sum.u8 + x.u8); break;
      }
    }
    /* Every input element e is read before any output element e is
     * written, so in-place (input == output) reductions are fine. */
    for (uint32_t m = 0; m < n; ++m) memcpy(ordered[m]->outputs[0]->data + e * width, &sum, width);
  }
  pw_allocator_free(d->allocator, ordered, n * sizeof(*ordered));
  return status;
}

/* A collective part has run: joins its gang; the last part to arrive
 * computes the result and completes them all. */
static void pw_double_gang_arrive(pw_double_backend_t* d, pw_double_job_t* job) {
  pthread_mutex_lock(&d->gang_mutex);
  if (pw_double_is_poisoned_locked(d, job->gang_id)) {
    pthread_mutex_unlock(&d->gang_mutex);
    pw_double_finish(d, job, pw_status_make(PW_STATUS_ABORTED,
                                            "double: collective gang %llu was aborted",
                                            (unsigned long long)job->gang_id));
    return;
  }
  for (uint32_t i = 0; i < job->group_size; ++i) {
    uint32_t peer = job->group_devices[i];
    if (atomic_load(&d->devices[peer].health) == PW_DEVICE_FAILED) {
      pthread_mutex_unlock(&d->gang_mutex);
      pw_double_gang_fail(d, job->gang_id, PW_STATUS_UNAVAILABLE, "a gang device failed");
      pw_double_finish(d, job, pw_status_make(PW_STATUS_UNAVAILABLE,
                                              "double: collective gang %llu: device %u "
                                              "failed", (unsigned long long)job->gang_id,
                                              peer));
      return;
    }
  }
  pw_double_job_t* head = NULL;
  for (pw_double_job_t* h = d->gangs; h != NULL; h = h->next) {
    if (h->gang_id == job->gang_id) head = h;
  }
  job->gang_next = NULL;
  if (head == NULL) {
    job->arrived = 1;
    job->next = d->gangs;
    d->gangs = job;
    head = job;
  } else {
    job->gang_next = head->gang_next;
    head->gang_next = job;
    head->arrived++;
  }
  bool complete = head->arrived == head->group_size;
  if (complete) pw_double_detach_locked(d, head->gang_id);
  pthread_mutex_unlock(&d->gang_mutex);
  if (!complete) return;
  pw_status_t status = pw_double_all_reduce(d, head);
  if (status == NULL) {
    while (head != NULL) {
      pw_double_job_t* next = head->gang_next;
      pw_double_finish(d, head, NULL);
      head = next;
    }
  } else {
    pw_double_finish_chain(d, head, status);
  }
}

/* --- Running one launch. --- */

static void pw_double_run(pw_double_backend_t* d, pw_double_job_t* job) {
  const pw_double_program_t* program = &job->executable->program;
  bool collective = program->op == PW_DOUBLE_OP_ALL_REDUCE_SUM;
  pw_status_t failure = NULL;
  if (job->injected != PW_STATUS_OK) {
    failure = pw_status_make(job->injected, "double: injected failure on device %u",
                             job->device);
  } else if (atomic_load(&d->devices[job->device].health) == PW_DEVICE_FAILED) {
    failure = pw_status_make(PW_STATUS_UNAVAILABLE, "double: device %u failed",
                             job->device);
  }
  if (failure != NULL) {
    if (collective) {
      pw_double_gang_fail(d, job->gang_id, PW_STATUS_ABORTED, "a part failed");
    }
    pw_double_finish(d, job, failure);
    return;
  }
  switch (program->op) {
    case PW_DOUBLE_OP_NOOP:
      break;
    case PW_DOUBLE_OP_COPY:
      memmove(job->outputs[0]->data, job->inputs[0]->data, job->inputs[0]->size);
      break;
    case PW_DOUBLE_OP_FILL:
      for (uint32_t i = 0; i < job->output_count; ++i) {
        memset(job->outputs[i]->data, (int)program->arg, job->outputs[i]->size);
      }
      break;
    case PW_DOUBLE_OP_FAIL:
      failure = pw_status_make((pw_status_code_t)program->arg,
                               "double: program 'fail %u' on device %u", program->arg,
                               job->device);
      break;
    case PW_DOUBLE_OP_ALL_REDUCE_SUM:
      pw_double_gang_arrive(d, job);
      return;
  }
  pw_double_finish(d, job, failure);
}

/* --- Queues and helper threads. --- */

void pw_double_queue_push(pw_double_queue_t* queue, pw_double_job_t* job) {
  job->next = NULL;
  pthread_mutex_lock(&queue->mutex);
  if (queue->tail != NULL) {
    queue->tail->next = job;
  } else {
    queue->head = job;
  }
  queue->tail = job;
  pthread_cond_signal(&queue->cond);
  pthread_mutex_unlock(&queue->mutex);
}

/* Pops the head job (caller holds the queue's mutex). */
static pw_double_job_t* pw_double_queue_pop_locked(pw_double_queue_t* queue) {
  pw_double_job_t* job = queue->head;
  if (job != NULL) {
    queue->head = job->next;
    if (queue->head == NULL) queue->tail = NULL;
  }
  return job;
}

static void* pw_double_worker_main(void* arg) {
  pw_double_worker_t* worker = arg;
  pw_double_queue_t* q = &worker->queue;
  pthread_mutex_lock(&q->mutex);
  for (;;) {
    if (q->head != NULL && (!q->paused || q->stop)) {
      pw_double_job_t* job = pw_double_queue_pop_locked(q);
      pthread_mutex_unlock(&q->mutex);
      pw_double_backend_t* d = worker->d;
      pw_double_device_t* dev = &d->devices[job->device];
      bool block = d->options.blocking_collectives &&
                   job->executable->program.op == PW_DOUBLE_OP_ALL_REDUCE_SUM;
      if (block) atomic_store(&dev->in_collective, 1);
      pw_double_run(d, job); /* may free |job| */
      if (block) {
        /* Like a device stuck in a collective: nothing else runs on this
         * helper until the gang completes (or is aborted). */
        pthread_mutex_lock(&d->idle_mutex);
        while (atomic_load(&dev->in_collective)) pthread_cond_wait(&d->idle_cond, &d->idle_mutex);
        pthread_mutex_unlock(&d->idle_mutex);
      }
      pthread_mutex_lock(&q->mutex);
      continue;
    }
    if (q->stop) break;
    pthread_cond_wait(&q->cond, &q->mutex);
  }
  pthread_mutex_unlock(&q->mutex);
  return NULL;
}

pw_status_t pw_double_exec_start(pw_double_backend_t* d) {
  uint32_t n = d->options.worker_count;
  if (n == 0) return NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc_array(d->allocator, n, sizeof(pw_double_worker_t), 0,
                                               (void**)&d->workers));
  for (uint32_t i = 0; i < n; ++i) {
    d->workers[i].d = d;
    pthread_mutex_init(&d->workers[i].queue.mutex, NULL);
    pthread_cond_init(&d->workers[i].queue.cond, NULL);
  }
  for (uint32_t i = 0; i < n; ++i) {
    int rc = pthread_create(&d->workers[i].thread, NULL, pw_double_worker_main, &d->workers[i]);
    if (rc != 0) {
      return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                            "double: cannot start helper thread %u: %s", i, strerror(rc));
    }
    d->workers[i].started = true;
  }
  return NULL;
}

void pw_double_exec_stop(pw_double_backend_t* d) {
  for (uint32_t i = 0; d->workers != NULL && i < d->options.worker_count; ++i) {
    pw_double_worker_t* w = &d->workers[i];
    if (w->started) {
      pthread_mutex_lock(&w->queue.mutex);
      w->queue.stop = true;
      pthread_cond_broadcast(&w->queue.cond);
      pthread_mutex_unlock(&w->queue.mutex);
      pthread_join(w->thread, NULL);
      w->started = false;
    }
    pthread_mutex_destroy(&w->queue.mutex);
    pthread_cond_destroy(&w->queue.cond);
  }
  /* Destroy with work in flight breaks the contract; still, every accepted
   * launch completes exactly once. */
  pw_double_backend_run_deferred(d, 0);
  pthread_mutex_lock(&d->gang_mutex);
  pw_double_job_t* pending = d->gangs;
  d->gangs = NULL;
  pthread_mutex_unlock(&d->gang_mutex);
  while (pending != NULL) {
    pw_double_job_t* next = pending->next;
    pw_double_finish_chain(d, pending,
                           pw_status_make(PW_STATUS_CANCELLED,
                                          "double: backend destroyed while collective "
                                          "gang %llu waited for parts",
                                          (unsigned long long)pending->gang_id));
    pending = next;
  }
}

/* --- Launch. --- */

static pw_status_t pw_double_check_params(pw_double_backend_t* d, const pw_backend_launch_t* l,
                                          bool inputs) {
  uint32_t count = inputs ? l->input_count : l->output_count;
  const pw_backend_memory_t* memory = inputs ? l->inputs : l->outputs;
  const char* what = inputs ? "input" : "output";
  if (count != 0 && memory == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "double launch: %ss are NULL", what);
  }
  for (uint32_t i = 0; i < count; ++i) {
    const pw_double_memory_t* m = (const pw_double_memory_t*)memory[i];
    if (m == NULL || m->magic != PW_DOUBLE_MEMORY_MAGIC || m->device != l->device) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "double launch on device %u: %s %u is not memory of that device",
                            l->device, what, i);
    }
  }
  (void)d;
  return NULL;
}

static pw_status_t pw_double_check_launch(pw_double_backend_t* d, const pw_backend_launch_t* l) {
  const pw_double_executable_t* e = (const pw_double_executable_t*)l->executable;
  if (e == NULL || e->magic != PW_DOUBLE_EXECUTABLE_MAGIC) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "double launch: not a loaded executable");
  }
  if (l->group_size != e->group_size || l->mesh_index >= l->group_size ||
      l->group_devices == NULL || l->group_devices[l->mesh_index] != l->device) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double launch on device %u: gang of %u (mesh index %u) does not "
                          "match the executable's %u-device mesh",
                          l->device, l->group_size, l->mesh_index, e->group_size);
  }
  const pw_executable_signature_t* sig = &e->program.signature;
  if (l->input_count != sig->input_count || l->output_count != sig->output_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double launch of '%s': %u inputs / %u outputs given, %u / %u "
                          "expected", sig->name, l->input_count, l->output_count,
                          sig->input_count, sig->output_count);
  }
  PW_RETURN_IF_ERROR(pw_double_check_params(d, l, true));
  PW_RETURN_IF_ERROR(pw_double_check_params(d, l, false));
  pw_double_op_t op = e->program.op;
  if (op == PW_DOUBLE_OP_COPY || op == PW_DOUBLE_OP_ALL_REDUCE_SUM) {
    size_t in = ((const pw_double_memory_t*)l->inputs[0])->size;
    size_t out = ((const pw_double_memory_t*)l->outputs[0])->size;
    if (in != out || in % pw_dtype_size(pw_double_input_c(&e->program, 0)->dtype) != 0) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "double launch of '%s' on device %u: input of %zu bytes, "
                            "output of %zu", sig->name, l->device, in, out);
    }
  }
  if (op == PW_DOUBLE_OP_ALL_REDUCE_SUM) {
    for (uint32_t i = 0; i < l->group_size; ++i) {
      if (l->group_devices[i] >= d->options.device_count) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "double launch: gang device %u out of range",
                              l->group_devices[i]);
      }
    }
  }
  return NULL;
}

pw_status_t pw_double_launch_check(pw_double_backend_t* d, const pw_backend_launch_t* l) {
  if (l == NULL || l->struct_size < offsetof(pw_backend_launch_t, done_user) + sizeof(void*) ||
      l->done == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double launch: NULL or short launch struct, or no done callback");
  }
  if (l->device >= d->options.device_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "double launch: device %u out of range (backend has %u)",
                          l->device, d->options.device_count);
  }
  return pw_double_check_launch(d, l);
}

pw_status_code_t pw_double_claim_injection(pw_double_backend_t* d,
                                           pw_double_fail_mode_t* out_mode) {
  uint64_t attempt = atomic_fetch_add(&d->attempts, 1) + 1;
  if (atomic_load(&d->fail_attempt) != attempt) return PW_STATUS_OK;
  pw_status_code_t code = PW_STATUS_OK;
  pthread_mutex_lock(&d->inject_mutex);
  if (atomic_load(&d->fail_attempt) == attempt) {
    atomic_store(&d->fail_attempt, 0);
    code = d->fail_code;
    *out_mode = d->fail_mode;
  }
  pthread_mutex_unlock(&d->inject_mutex);
  return code;
}

void pw_double_refuse_part(pw_double_backend_t* d, const pw_backend_launch_t* l) {
  const pw_double_executable_t* e = (const pw_double_executable_t*)l->executable;
  if (e != NULL && e->magic == PW_DOUBLE_EXECUTABLE_MAGIC &&
      e->program.op == PW_DOUBLE_OP_ALL_REDUCE_SUM) {
    pw_double_gang_fail(d, l->gang_id, PW_STATUS_ABORTED, "a part's launch was refused");
  }
}

/* Launch refused after the argument checks: count it, and make sure the
 * other parts of a collective do not wait for this one. */
static pw_status_t pw_double_reject(pw_double_backend_t* d, const pw_backend_launch_t* l,
                                    pw_status_t status) {
  atomic_fetch_add(&d->devices[l->device].rejected, 1);
  pw_double_refuse_part(d, l);
  return status;
}

pw_status_t pw_double_job_make(pw_double_backend_t* d, const pw_backend_launch_t* l,
                               pw_status_code_t injected, pw_backend_done_fn_t done,
                               void* done_user, pw_double_job_t** out_job) {
  *out_job = NULL;
  const pw_double_executable_t* e = (const pw_double_executable_t*)l->executable;
  bool collective = e->program.op == PW_DOUBLE_OP_ALL_REDUCE_SUM;
  size_t devices = collective ? l->group_size * sizeof(uint32_t) : 0;
  size_t memories_at = (sizeof(pw_double_job_t) + devices + 7) & ~(size_t)7;
  size_t size =
      memories_at + ((size_t)l->input_count + l->output_count) * sizeof(pw_double_memory_t*);
  pw_double_job_t* job = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(d->allocator, size, 0, (void**)&job));
  job->inputs = (pw_double_memory_t**)((unsigned char*)job + memories_at);
  job->outputs = job->inputs + l->input_count;
  job->alloc_size = size;
  job->executable = e;
  job->device = l->device;
  job->mesh_index = l->mesh_index;
  job->group_size = l->group_size;
  job->gang_id = l->gang_id;
  job->input_count = l->input_count;
  job->output_count = l->output_count;
  for (uint32_t i = 0; i < l->input_count; ++i) job->inputs[i] = (pw_double_memory_t*)l->inputs[i];
  for (uint32_t i = 0; i < l->output_count; ++i) {
    job->outputs[i] = (pw_double_memory_t*)l->outputs[i];
  }
  if (collective) memcpy(job->group_devices, l->group_devices, l->group_size * sizeof(uint32_t));
  job->done = done;
  job->done_user = done_user;
  job->injected = injected;
  *out_job = job;
  return NULL;
}

void pw_double_job_free(pw_double_backend_t* d, pw_double_job_t* job) {
  if (job != NULL) pw_allocator_free(d->allocator, job, job->alloc_size);
}

void pw_double_job_submit(pw_double_backend_t* d, pw_double_job_t* job, uint64_t gang_id) {
  uint32_t device = job->device;
  pw_double_device_t* dev = &d->devices[device];
  pthread_mutex_lock(&dev->order_mutex);
  if (dev->order_count < d->options.order_capacity) dev->order[dev->order_count++] = gang_id;
  atomic_fetch_add(&dev->launches, 1);
  pthread_mutex_unlock(&dev->order_mutex);
  pthread_mutex_lock(&d->idle_mutex);
  d->in_flight++;
  pthread_mutex_unlock(&d->idle_mutex);

  switch (d->options.completion) {
    case PW_DOUBLE_COMPLETE_INLINE:
      pw_double_run(d, job);
      break;
    case PW_DOUBLE_COMPLETE_THREADED:
      pw_double_queue_push(&d->workers[device % d->options.worker_count].queue, job);
      break;
    case PW_DOUBLE_COMPLETE_DEFERRED:
      pw_double_queue_push(&d->deferred, job);
      break;
  }
}

pw_status_t pw_double_launch(void* self, const pw_backend_launch_t* l) {
  pw_double_backend_t* d = self;
  if (l == NULL || l->struct_size < offsetof(pw_backend_launch_t, done_user) + sizeof(void*) ||
      l->done == NULL || l->device >= d->options.device_count) {
    return pw_double_launch_check(d, l); /* the error naming what is wrong */
  }
  if (d->options.no_op) {
    /* No locked add: a device's launches do not overlap in gang order (the
     * next comes after this one's done), so a load and a store count
     * exactly (see no_op in double_backend.h). */
    pw_double_device_t* dev = &d->devices[l->device];
    uint64_t n = atomic_load_explicit(&dev->launches, memory_order_relaxed);
    atomic_store_explicit(&dev->launches, n + 1, memory_order_relaxed);
    l->done(l->done_user, NULL);
    return NULL;
  }
  pw_status_t status = pw_double_check_launch(d, l);
  if (status != NULL) return pw_double_reject(d, l, status);
  pw_double_device_t* dev = &d->devices[l->device];
  bool failed = atomic_load(&dev->health) == PW_DEVICE_FAILED;
  if (failed && d->options.failed_device_mode == PW_DOUBLE_FAIL_AT_LAUNCH) {
    return pw_double_reject(d, l, pw_status_make(PW_STATUS_UNAVAILABLE,
                                                 "double launch: device %u failed",
                                                 l->device));
  }
  pw_double_fail_mode_t mode = PW_DOUBLE_FAIL_AT_LAUNCH;
  pw_status_code_t injected = pw_double_claim_injection(d, &mode);
  if (injected != PW_STATUS_OK && mode == PW_DOUBLE_FAIL_AT_LAUNCH) {
    return pw_double_reject(d, l, pw_status_make(injected,
                                                 "double launch: injected failure on "
                                                 "device %u", l->device));
  }
  pw_double_job_t* job = NULL;
  status = pw_double_job_make(d, l, injected, l->done, l->done_user, &job);
  if (status != NULL) {
    return pw_double_reject(d, l, pw_status_annotate(status, "double launch"));
  }
  pw_double_job_submit(d, job, l->gang_id);
  return NULL;
}

/* --- Control functions declared in double_backend.h. --- */

void pw_double_backend_set_health(pw_double_backend_t* d, uint32_t device,
                                  pw_device_health_t health) {
  if (d == NULL || device >= d->options.device_count) return;
  atomic_store(&d->devices[device].health, (int)health);
  if (health == PW_DEVICE_FAILED) pw_double_exec_abort_device(d, device);
}

void pw_double_backend_fail_launch(pw_double_backend_t* d, uint64_t nth,
                                   pw_status_code_t code, pw_double_fail_mode_t mode) {
  if (d == NULL) return;
  pthread_mutex_lock(&d->inject_mutex);
  d->fail_code = code == PW_STATUS_OK ? PW_STATUS_UNKNOWN : code;
  d->fail_mode = mode;
  atomic_store(&d->fail_attempt, nth == 0 ? 0 : atomic_load(&d->attempts) + nth);
  pthread_mutex_unlock(&d->inject_mutex);
}

void pw_double_backend_pause(pw_double_backend_t* d, bool paused) {
  for (uint32_t i = 0; d != NULL && d->workers != NULL && i < d->options.worker_count; ++i) {
    pw_double_queue_t* q = &d->workers[i].queue;
    pthread_mutex_lock(&q->mutex);
    q->paused = paused;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->mutex);
  }
}

size_t pw_double_backend_run_deferred(pw_double_backend_t* d, size_t max_count) {
  size_t ran = 0;
  while (d != NULL && (max_count == 0 || ran < max_count)) {
    pthread_mutex_lock(&d->deferred.mutex);
    pw_double_job_t* job = pw_double_queue_pop_locked(&d->deferred);
    pthread_mutex_unlock(&d->deferred.mutex);
    if (job == NULL) break;
    pw_double_run(d, job);
    ++ran;
  }
  return ran;
}

bool pw_double_backend_wait_idle(pw_double_backend_t* d, uint64_t timeout_ns) {
  if (d == NULL) return true;
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  uint64_t ns = (uint64_t)deadline.tv_nsec + timeout_ns % 1000000000u;
  deadline.tv_sec += (time_t)(timeout_ns / 1000000000u + ns / 1000000000u);
  deadline.tv_nsec = (long)(ns % 1000000000u);
  pthread_mutex_lock(&d->idle_mutex);
  int rc = 0;
  while (d->in_flight != 0 && rc != ETIMEDOUT) {
    rc = pthread_cond_timedwait(&d->idle_cond, &d->idle_mutex, &deadline);
  }
  bool idle = d->in_flight == 0;
  pthread_mutex_unlock(&d->idle_mutex);
  return idle;
}

uint64_t pw_double_backend_in_flight(pw_double_backend_t* d) {
  if (d == NULL) return 0;
  pthread_mutex_lock(&d->idle_mutex);
  uint64_t n = d->in_flight;
  pthread_mutex_unlock(&d->idle_mutex);
  return n;
}
