/* The bundled in-process transport: see pathways/transports/inproc.h.
 *
 * copy validates on the caller's thread (descriptor, both ranges, and the
 * memory a copy needs: its queue record and staging buffer), so a copy
 * that was accepted never fails for lack of memory. The copy then runs
 * inline or on a worker: health of both devices, the backend's record_copy
 * when both ends are one backend that accounts for copies, the bytes, then
 * done.
 *
 * The workers drain one FIFO under one mutex, which is never held while a
 * copy or a done callback runs, so a done callback may start more copies.
 * Written as a host's transport would be: public headers only. */
#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <string.h>

#include "pathways/transports/inproc.h"

#define PW_INPROC_LOG "inproc"
#define PW_INPROC_DEFAULT_STAGING (1u << 20)
/* A copy run inline (no workers) of at most this many bytes is staged
 * through the caller's stack instead of an allocation. */
#define PW_INPROC_STACK_STAGING 1024

typedef struct pw_inproc_task_s {
  struct pw_inproc_task_s* next;
  pw_transport_copy_t copy;   /* the caller's descriptor, copied */
  /* Host pointers of the two memories (NULL: not host accessible), asked
   * once when the copy is accepted. */
  unsigned char* src_host;
  unsigned char* dst_host;
  unsigned char* staging;     /* NULL unless neither side is host accessible */
  size_t staging_size;
} pw_inproc_task_t;

typedef struct pw_inproc_s {
  pw_allocator_t allocator;
  pw_logger_t logger;
  uint32_t worker_count;
  size_t staging_bytes;
  pthread_mutex_t mutex;
  pthread_cond_t wake;
  pw_inproc_task_t* head;
  pw_inproc_task_t* tail;
  bool stopping;
  uint32_t started;
  pthread_t* threads;
} pw_inproc_t;

static const pw_transport_vtable_t pw_inproc_vtable;

bool pw_inproc_transport_is_inproc(pw_transport_t transport) {
  return transport.vtable == &pw_inproc_vtable && transport.self != NULL;
}

/*---------------------------------------------------------------------------
 * Backend access: the plugin checks vtables itself (public headers only).
 *-------------------------------------------------------------------------*/

#define PW_INPROC_HAS(backend, method)                                         \
  ((backend)->vtable->struct_size >= PW_STRUCT_SIZE(pw_backend_vtable_t, method) && \
   (backend)->vtable->method != NULL)

static const char* pw_inproc_backend_name(const pw_backend_t* backend) {
  return backend->vtable->name != NULL ? backend->vtable->name : "(unnamed backend)";
}

static void* pw_inproc_host_pointer(const pw_transport_endpoint_t* e) {
  if (!PW_INPROC_HAS(e->backend, host_pointer)) return NULL;
  return e->backend->vtable->host_pointer(e->backend->self, e->device, e->memory);
}

/* Reads the range's last byte (or, for an empty range, nothing at its
 * offset): the backend says whether the range fits and the memory is its
 * device's. */
static pw_status_t pw_inproc_probe(const pw_transport_endpoint_t* e, size_t size,
                                   const char* side) {
  const pw_backend_t* b = e->backend;
  if (!PW_INPROC_HAS(b, copy_to_host) || !PW_INPROC_HAS(b, copy_to_device)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "inproc copy: %s backend '%s' lacks copy_to_host/copy_to_device", side,
                          pw_inproc_backend_name(b));
  }
  unsigned char byte;
  size_t at = size == 0 ? e->offset : e->offset + size - 1;
  PW_RETURN_IF_ERROR_CTX(b->vtable->copy_to_host(b->self, e->device, e->memory, at, &byte,
                                                 size == 0 ? 0 : 1),
                         "inproc copy: %s range [%zu, +%zu) on device %u of backend '%s'", side,
                         e->offset, size, e->device, pw_inproc_backend_name(b));
  return NULL;
}

static pw_status_t pw_inproc_check_endpoint(const pw_transport_endpoint_t* e, size_t size,
                                            const char* side) {
  if (e->backend == NULL || e->backend->vtable == NULL ||
      e->backend->vtable->struct_size < PW_BACKEND_VTABLE_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "inproc copy: %s backend is missing or its vtable is below v1", side);
  }
  if (e->memory == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "inproc copy: %s memory is NULL", side);
  }
  if (size > SIZE_MAX - e->offset) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE,
                          "inproc copy: %s offset %zu + size %zu overflows", side, e->offset,
                          size);
  }
  return pw_inproc_probe(e, size, side);
}

static bool pw_inproc_same_memory(const pw_transport_copy_t* c) {
  return c->src.backend->vtable == c->dst.backend->vtable &&
         c->src.backend->self == c->dst.backend->self && c->src.memory == c->dst.memory;
}

/*---------------------------------------------------------------------------
 * Running one copy
 *-------------------------------------------------------------------------*/

static pw_status_t pw_inproc_check_health(const pw_transport_endpoint_t* e, const char* side,
                                          uint64_t tag) {
  if (!PW_INPROC_HAS(e->backend, health)) return NULL;
  if (e->backend->vtable->health(e->backend->self, e->device) != PW_DEVICE_FAILED) return NULL;
  return pw_status_make(PW_STATUS_UNAVAILABLE,
                        "inproc copy (tag %llu): %s device %u of backend '%s' has failed",
                        (unsigned long long)tag, side, e->device,
                        pw_inproc_backend_name(e->backend));
}

/* One row of |c| (|c->size| bytes at |so| and |do_|) through the staging
 * buffer, chunk by chunk. */
static pw_status_t pw_inproc_staged(const pw_transport_copy_t* c, size_t so, size_t do_,
                                    unsigned char* staging, size_t chunk) {
  const pw_backend_t* sb = c->src.backend;
  const pw_backend_t* db = c->dst.backend;
  bool backwards = pw_inproc_same_memory(c) && do_ > so && do_ < so + c->size;
  size_t done = 0;
  while (done < c->size) {
    size_t n = c->size - done < chunk ? c->size - done : chunk;
    size_t at = backwards ? c->size - done - n : done;
    PW_RETURN_IF_ERROR(sb->vtable->copy_to_host(sb->self, c->src.device, c->src.memory,
                                                so + at, staging, n));
    PW_RETURN_IF_ERROR(db->vtable->copy_to_device(db->self, c->dst.device, c->dst.memory,
                                                  do_ + at, staging, n));
    done += n;
  }
  return NULL;
}

/* One row of |c|: |c->size| bytes from source offset |so| to destination
 * offset |do_|. */
static pw_status_t pw_inproc_row(const pw_transport_copy_t* c, size_t so, size_t do_,
                                 unsigned char* sp, unsigned char* dp, unsigned char* staging,
                                 size_t chunk) {
  const pw_backend_t* sb = c->src.backend;
  const pw_backend_t* db = c->dst.backend;
  if (sp != NULL && dp != NULL) {
    memmove(dp + do_, sp + so, c->size);
    return NULL;
  }
  if (sp != NULL) {
    return db->vtable->copy_to_device(db->self, c->dst.device, c->dst.memory, do_, sp + so,
                                      c->size);
  }
  if (dp != NULL) {
    return sb->vtable->copy_to_host(sb->self, c->src.device, c->src.memory, so, dp + do_,
                                    c->size);
  }
  return pw_inproc_staged(c, so, do_, staging, chunk);
}

/* Rows and levels of copy |c|: its v2 strides when |strided|, else one
 * row. */
static uint32_t pw_inproc_levels(const pw_transport_copy_t* c, bool strided) {
  return strided ? c->stride_count : 0;
}

static size_t pw_inproc_rows(const pw_transport_copy_t* c, bool strided) {
  size_t rows = 1;
  for (uint32_t k = 0; k < pw_inproc_levels(c, strided); ++k) rows *= c->strides[k].count;
  return rows;
}

/* Runs copy |c|: health of both devices, the backend's accounting, the bytes,
 * row by row in index order when |strided|. |sp| and |dp| are the host
 * pointers of the two memories (NULL: not host accessible); |staging|
 * (|chunk| bytes) is used when neither is. */
static pw_status_t pw_inproc_execute(const pw_transport_copy_t* c, bool strided,
                                     unsigned char* sp, unsigned char* dp,
                                     unsigned char* staging, size_t chunk) {
  PW_RETURN_IF_ERROR(pw_inproc_check_health(&c->src, "source", c->tag));
  PW_RETURN_IF_ERROR(pw_inproc_check_health(&c->dst, "destination", c->tag));
  const pw_backend_t* sb = c->src.backend;
  const pw_backend_t* db = c->dst.backend;
  if (sb->vtable == db->vtable && sb->self == db->self && PW_INPROC_HAS(sb, record_copy)) {
    /* One backend at both ends, which accounts for copies (the sim's link
     * time and faults). The rows lie inside the checked extents: their
     * bytes cannot wrap. */
    PW_RETURN_IF_ERROR_CTX(sb->vtable->record_copy(sb->self, c->src.device, c->src.memory,
                                                   c->dst.device, c->dst.memory,
                                                   c->size * pw_inproc_rows(c, strided)),
                           "inproc copy (tag %llu): backend '%s' record_copy",
                           (unsigned long long)c->tag, pw_inproc_backend_name(sb));
  }
  if (c->size == 0) return NULL;
  uint32_t levels = pw_inproc_levels(c, strided);
  if (levels == 0) return pw_inproc_row(c, c->src.offset, c->dst.offset, sp, dp, staging, chunk);
  size_t idx[PW_TRANSPORT_MAX_STRIDES] = {0};
  size_t so = c->src.offset, do_ = c->dst.offset;
  do {
    PW_RETURN_IF_ERROR(pw_inproc_row(c, so, do_, sp, dp, staging, chunk));
  } while (pw_transport_stride_next(levels, c->strides, idx, &so, &do_));
  return NULL;
}

static void pw_inproc_task_free(pw_inproc_t* t, pw_inproc_task_t* task) {
  if (task->staging != NULL) pw_allocator_free(t->allocator, task->staging, task->staging_size);
  pw_allocator_free(t->allocator, task, sizeof(*task));
}

/* Runs |task|, frees it, then calls its done. */
static void pw_inproc_run(pw_inproc_t* t, pw_inproc_task_t* task) {
  pw_status_t status = pw_inproc_execute(&task->copy, task->copy.stride_count > 0,
                                         task->src_host, task->dst_host, task->staging,
                                         task->staging_size);
  pw_transport_done_fn_t done = task->copy.done;
  void* user = task->copy.done_user;
  pw_inproc_task_free(t, task);
  done(user, status);
}

/*---------------------------------------------------------------------------
 * Workers
 *-------------------------------------------------------------------------*/

static void* pw_inproc_worker(void* arg) {
  pw_inproc_t* t = arg;
  pthread_mutex_lock(&t->mutex);
  for (;;) {
    while (t->head == NULL && !t->stopping) pthread_cond_wait(&t->wake, &t->mutex);
    pw_inproc_task_t* task = t->head;
    if (task == NULL) break; /* stopping and drained */
    t->head = task->next;
    if (t->head == NULL) t->tail = NULL;
    pthread_mutex_unlock(&t->mutex);
    pw_inproc_run(t, task);
    pthread_mutex_lock(&t->mutex);
  }
  pthread_mutex_unlock(&t->mutex);
  return NULL;
}

static bool pw_inproc_is_worker(pw_inproc_t* t) {
  for (uint32_t i = 0; i < t->started; ++i) {
    if (pthread_equal(pthread_self(), t->threads[i])) return true;
  }
  return false;
}

/* Stops the workers after they drained the queue; runs what is left when
 * none was started. */
static void pw_inproc_stop(pw_inproc_t* t) {
  pthread_mutex_lock(&t->mutex);
  t->stopping = true;
  pthread_cond_broadcast(&t->wake);
  pthread_mutex_unlock(&t->mutex);
  for (uint32_t i = 0; i < t->started; ++i) pthread_join(t->threads[i], NULL);
  t->started = 0;
  while (t->head != NULL) {
    pw_inproc_task_t* task = t->head;
    t->head = task->next;
    pw_inproc_run(t, task);
  }
  t->tail = NULL;
}

/*---------------------------------------------------------------------------
 * The vtable
 *-------------------------------------------------------------------------*/

/* A staging buffer of |chunk| bytes for a copy of |size| bytes between two
 * memories that are not host accessible: the inline caller's stack when
 * it fits, else an allocation (*out_allocated). */
static pw_status_t pw_inproc_staging(pw_inproc_t* t, const pw_transport_copy_t* c,
                                     unsigned char* stack, size_t stack_size,
                                     unsigned char** out, size_t* out_chunk,
                                     bool* out_allocated) {
  *out_allocated = false;
  if (stack != NULL && c->size <= stack_size) {
    *out = stack;
    *out_chunk = c->size;
    return NULL;
  }
  size_t chunk = c->size < t->staging_bytes ? c->size : t->staging_bytes;
  void* staging = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_allocator_malloc(t->allocator, chunk, 64, &staging),
                         "inproc copy (tag %llu): staging buffer", (unsigned long long)c->tag);
  *out = staging;
  *out_chunk = chunk;
  *out_allocated = true;
  return NULL;
}

/* copy (|strided| false: the v1 fields only) and copy_strided. */
static pw_status_t pw_inproc_start(pw_inproc_t* t, const pw_transport_copy_t* c, bool strided) {
  size_t src_extent = c->size, dst_extent = c->size;
  if (strided) PW_RETURN_IF_ERROR_CTX(pw_transport_copy_extent(c, &src_extent, &dst_extent), "inproc copy");
  PW_RETURN_IF_ERROR(pw_inproc_check_endpoint(&c->src, src_extent, "source"));
  PW_RETURN_IF_ERROR(pw_inproc_check_endpoint(&c->dst, dst_extent, "destination"));
  unsigned char* sp = NULL;
  unsigned char* dp = NULL;
  if (c->size > 0) {
    sp = pw_inproc_host_pointer(&c->src);
    dp = pw_inproc_host_pointer(&c->dst);
  }
  bool staged = c->size > 0 && sp == NULL && dp == NULL;
  unsigned char* staging = NULL;
  size_t chunk = 0;
  bool allocated = false;
  if (t->worker_count == 0) {
    /* Inline: no queue record; the caller's descriptor is read in place
     * (it is ours until copy returns). */
    _Alignas(64) unsigned char stack_staging[PW_INPROC_STACK_STAGING];
    if (staged) {
      PW_RETURN_IF_ERROR(pw_inproc_staging(t, c, stack_staging, sizeof(stack_staging), &staging,
                                           &chunk, &allocated));
    }
    pw_transport_done_fn_t done = c->done;
    void* user = c->done_user;
    pw_status_t status = pw_inproc_execute(c, strided, sp, dp, staging, chunk);
    if (allocated) pw_allocator_free(t->allocator, staging, chunk);
    done(user, status);
    return NULL;
  }
  if (staged) PW_RETURN_IF_ERROR(pw_inproc_staging(t, c, NULL, 0, &staging, &chunk, &allocated));
  void* memory = NULL;
  pw_status_t status = pw_allocator_calloc(t->allocator, sizeof(pw_inproc_task_t),
                                           alignof(pw_inproc_task_t), &memory);
  if (status != NULL) {
    if (allocated) pw_allocator_free(t->allocator, staging, chunk);
    return pw_status_annotate(status, "inproc copy (tag %llu) of %zu bytes",
                              (unsigned long long)c->tag, c->size);
  }
  pw_inproc_task_t* task = memory;
  /* The task is zeroed: a v1 copy keeps stride_count 0. */
  memcpy(&task->copy, c, strided ? PW_TRANSPORT_COPY_SIZE_V2 : PW_TRANSPORT_COPY_SIZE_V1);
  task->copy.struct_size = strided ? PW_TRANSPORT_COPY_SIZE_V2 : PW_TRANSPORT_COPY_SIZE_V1;
  task->src_host = sp;
  task->dst_host = dp;
  task->staging = staging;
  task->staging_size = chunk;
  pthread_mutex_lock(&t->mutex);
  task->next = NULL;
  if (t->tail != NULL) {
    t->tail->next = task;
  } else {
    t->head = task;
  }
  t->tail = task;
  pthread_cond_signal(&t->wake);
  pthread_mutex_unlock(&t->mutex);
  return NULL;
}

static pw_status_t pw_inproc_copy(void* self, const pw_transport_copy_t* c) {
  if (c == NULL || c->struct_size < PW_TRANSPORT_COPY_SIZE_V1 || c->done == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "inproc copy: descriptor is NULL, below v1, or has no done");
  }
  return pw_inproc_start(self, c, false);
}

static pw_status_t pw_inproc_copy_strided(void* self, const pw_transport_copy_t* c) {
  if (c == NULL || c->struct_size < PW_TRANSPORT_COPY_SIZE_V2 || c->done == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "inproc copy_strided: descriptor is NULL, below v2, or has no done");
  }
  return pw_inproc_start(self, c, true);
}

static bool pw_inproc_can_copy(void* self, const pw_backend_t* src, uint32_t src_device,
                               const pw_backend_t* dst, uint32_t dst_device) {
  (void)self;
  (void)src_device;
  (void)dst_device;
  return src != NULL && dst != NULL && src->vtable != NULL && dst->vtable != NULL &&
         src->vtable->struct_size >= PW_BACKEND_VTABLE_SIZE_V1 &&
         dst->vtable->struct_size >= PW_BACKEND_VTABLE_SIZE_V1;
}

static void pw_inproc_free(pw_inproc_t* t) {
  pthread_cond_destroy(&t->wake);
  pthread_mutex_destroy(&t->mutex);
  if (t->threads != NULL) {
    pw_allocator_free(t->allocator, t->threads, t->worker_count * sizeof(pthread_t));
  }
  pw_allocator_free(t->allocator, t, sizeof(*t));
}

static void pw_inproc_destroy(void* self) {
  pw_inproc_t* t = self;
  if (t == NULL) return;
  if (pw_inproc_is_worker(t)) {
    /* Joining ourselves would hang; leaking is the lesser harm. */
    pw_log(&t->logger, PW_LOG_ERROR, PW_INPROC_LOG,
           "destroy called from a worker (a done callback); the transport is leaked");
    return;
  }
  pw_inproc_stop(t);
  pw_inproc_free(t);
}

void pw_inproc_transport_options_init(pw_inproc_transport_options_t* out_options) {
  if (out_options == NULL) return;
  memset(out_options, 0, sizeof(*out_options));
  out_options->struct_size = sizeof(*out_options);
  out_options->allocator = pw_allocator_system();
  out_options->logger = pw_logger_default();
  out_options->staging_bytes = PW_INPROC_DEFAULT_STAGING;
}

pw_status_t pw_inproc_transport_create(const pw_inproc_transport_options_t* options,
                                       pw_transport_t* out_transport) {
  if (out_transport == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_inproc_transport_create: out_transport is NULL");
  }
  memset(out_transport, 0, sizeof(*out_transport));
  pw_inproc_transport_options_t o;
  pw_inproc_transport_options_init(&o);
  if (options != NULL) {
    if (options->struct_size < PW_INPROC_TRANSPORT_OPTIONS_SIZE_V1) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "pw_inproc_transport_create: options struct_size %zu is below v1 "
                            "(%zu)",
                            options->struct_size, (size_t)PW_INPROC_TRANSPORT_OPTIONS_SIZE_V1);
    }
    if (options->allocator.alloc != NULL || options->allocator.free != NULL) {
      if (!pw_allocator_is_valid(options->allocator)) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "pw_inproc_transport_create: allocator has only one of "
                              "alloc/free");
      }
      o.allocator = options->allocator;
    }
    if (options->logger.fn != NULL) o.logger = options->logger;
    o.worker_count = options->worker_count;
    if (options->staging_bytes != 0) o.staging_bytes = options->staging_bytes;
  }
  if (o.worker_count > PW_INPROC_MAX_WORKERS) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_inproc_transport_create: %u workers (maximum %u)", o.worker_count,
                          PW_INPROC_MAX_WORKERS);
  }
  void* memory = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_allocator_calloc(o.allocator, sizeof(pw_inproc_t),
                                             alignof(pw_inproc_t), &memory),
                         "pw_inproc_transport_create");
  pw_inproc_t* t = memory;
  t->allocator = o.allocator;
  t->logger = o.logger;
  t->worker_count = o.worker_count;
  t->staging_bytes = o.staging_bytes;
  pthread_mutex_init(&t->mutex, NULL);
  pthread_cond_init(&t->wake, NULL);
  pw_status_t status = NULL;
  if (t->worker_count > 0) {
    void* threads = NULL;
    status = pw_allocator_calloc_array(t->allocator, t->worker_count, sizeof(pthread_t),
                                       alignof(pthread_t), &threads);
    t->threads = threads;
  }
  for (uint32_t i = 0; status == NULL && i < t->worker_count; ++i) {
    int rc = pthread_create(&t->threads[i], NULL, pw_inproc_worker, t);
    if (rc != 0) {
      status = pw_status_make(rc == EAGAIN ? PW_STATUS_RESOURCE_EXHAUSTED : PW_STATUS_INTERNAL,
                              "could not start worker %u of %u (%s)", i + 1, t->worker_count,
                              strerror(rc));
    } else {
      t->started = i + 1;
    }
  }
  if (status != NULL) {
    pw_inproc_stop(t);
    pw_inproc_free(t);
    return pw_status_annotate(status, "pw_inproc_transport_create");
  }
  out_transport->vtable = &pw_inproc_vtable;
  out_transport->self = t;
  return NULL;
}

static const pw_transport_vtable_t pw_inproc_vtable = {
    .struct_size = sizeof(pw_transport_vtable_t),
    .name = PW_INPROC_TRANSPORT_NAME,
    .version = PW_INPROC_TRANSPORT_VERSION,
    .destroy = pw_inproc_destroy,
    .copy = pw_inproc_copy,
    .can_copy = pw_inproc_can_copy,
    .copy_strided = pw_inproc_copy_strided,
};
