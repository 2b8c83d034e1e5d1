#define _POSIX_C_SOURCE 200809L
/* Asynchronous host transfers (include/pathways/buffer.h): from_host with
 * a choice of host-memory semantics, buffers created empty and filled
 * later, to_host that returns an event.
 *
 * A fill claims its buffer (fill: EMPTY -> CLAIMED, one CAS), so exactly
 * one fill, or the cancel when the buffer's last handle goes first
 * (lib/core/buffer.c, EMPTY -> CANCELLED), completes the ready event.
 * Everything a call can fail at (arguments, the transfer thread, the
 * job's memory, the host-done event) is done before the claim: a failed
 * call leaves the buffer as it was.
 *
 * Background copies run as jobs on the runtime's transfer thread
 * (host_xfer.c). A job counts as work of its client (its in-flight count
 * and a reference to the struct, as an execution does), so
 * pw_client_destroy waits for it, and pw_runtime_destroy, which comes
 * after every client's, finds the thread idle. A job holds a reference to
 * its buffer and drops it, and completes its events, before it counts
 * itself out: nothing of the client is touched after that. */
#include <string.h>

#include "event/event_internal.h"
#include "pathways/struct_size.h"
#include "runtime/buffer_copy.h"
#include "runtime/buffer_internal.h"
#include "runtime/host_xfer.h"
#include "sched/sched.h"

void pw_host_transfer_options_init(pw_host_transfer_options_t* options) {
  if (options == NULL) return;
  memset(options, 0, sizeof(*options));
  options->struct_size = sizeof(*options);
}

/* The semantics |options| asks for (NULL: copy), or INVALID_ARGUMENT. */
static pw_status_t pw_async_semantics(const pw_host_transfer_options_t* options, const char* who,
                                      pw_host_semantics_t* out) {
  *out = PW_HOST_COPY_BEFORE_RETURN;
  if (options == NULL) return NULL;
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(options, pw_host_transfer_options_t,
                                      PW_HOST_TRANSFER_OPTIONS_SIZE_V1, who));
  switch (options->semantics) {
    case PW_HOST_COPY_BEFORE_RETURN:
    case PW_HOST_IMMUTABLE_UNTIL_TRANSFER_COMPLETES:
    case PW_HOST_ZERO_COPY:
      *out = options->semantics;
      return NULL;
  }
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: unknown host semantics %d", who,
                        (int)options->semantics);
}

/* ---- jobs ----------------------------------------------------------------- */

/* Shared head of the two kinds of job: the client it counts on. */
typedef struct pw_async_head_s {
  pw_host_xfer_job_t job; /* first: the transfer thread hands this back */
  pw_client_t* client;
  uint32_t stripe;
  pw_buffer_obj_t* buffer; /* a reference */
  pw_event_t* event;       /* a reference: host-done (fill) or done (read) */
} pw_async_head_t;

/* A fill of |buffer| from |host|, run on the transfer thread. */
typedef struct pw_fill_job_s {
  pw_async_head_t head;
  const void* host;
} pw_fill_job_t;

/* A read of |buffer| into |dst| once it is ready. */
typedef struct pw_read_job_s {
  pw_async_head_t head;
  pw__event_node_t node; /* on the buffer's ready event */
  void* dst;
  uint64_t id;              /* the caller's handle, for messages */
  pw_status_t ready_status; /* the ready event's, owned */
} pw_read_job_t;

/* Counts |h|'s job in as work of its client. */
static void pw_async_begin(pw_async_head_t* h, pw_client_t* client) {
  h->client = client;
  h->stripe = pw__thread_stripe();
  pw__client_begin(client, h->stripe);
}

/* The end of every job: frees it (|size| bytes) and counts it out. Its
 * buffer reference and event are gone already. */
static void pw_async_end(pw_async_head_t* h, size_t size) {
  pw_client_t* client = h->client;
  uint32_t stripe = h->stripe;
  pw_allocator_free(client->runtime->allocator, h, size);
  pw__client_end(client, stripe);
  pw__client_release_stripe(client, stripe);
}

static void pw_fill_run(pw_host_xfer_job_t* job) {
  pw_fill_job_t* f = (pw_fill_job_t*)job;
  pw_buffer_obj_t* b = f->head.buffer;
  pw_status_t status = pw__buffer_upload(b, f->host, false);
  /* The caller's memory is not read after this. */
  if (f->head.event != NULL) {
    pw__event_complete_runtime(f->head.event, NULL);
    pw_event_release(f->head.event);
  }
  if (status != NULL) {
    status = pw_status_annotate(status, "host transfer into buffer 0x%llx",
                                (unsigned long long)b->handle);
  }
  pw__event_complete_runtime(b->ready, status);
  pw__object_release(&b->header);
  pw_async_end(&f->head, sizeof(*f));
}

static void pw_read_run(pw_host_xfer_job_t* job) {
  pw_read_job_t* r = (pw_read_job_t*)job;
  pw_buffer_obj_t* b = r->head.buffer;
  pw_status_t status = r->ready_status;
  if (status == NULL) status = pw__buffer_lost(b, "pw_buffer_to_host_async");
  if (status == NULL) status = pw__buffer_download(b, r->dst, false);
  if (status != NULL) {
    status = pw_status_annotate(status, "pw_buffer_to_host_async: buffer 0x%llx",
                                (unsigned long long)r->id);
  }
  pw__object_release(&b->header);
  pw__event_complete_runtime(r->head.event, status);
  pw_event_release(r->head.event);
  pw_async_end(&r->head, sizeof(*r));
}

/* The buffer of a read became ready (any thread, possibly inline in the
 * registration): hand the copy to the transfer thread. */
static void pw_read_ready(void* user, pw_status_t status) {
  pw_read_job_t* r = user;
  r->ready_status = status;
  pw__host_xfer_enqueue(r->head.client->runtime, &r->head.job);
}

/* ---- fills ------------------------------------------------------------- */

/* What a fill needs made before it claims the buffer. */
typedef struct pw_fill_prep_s {
  pw_host_semantics_t semantics;
  pw_event_t* host_done; /* two references (the caller's, the job's), or NULL */
  pw_fill_job_t* job;    /* background fills; also the zero-copy fallback */
} pw_fill_prep_t;

static void pw_fill_prep_free(pw_runtime_t* rt, pw_fill_prep_t* p) {
  if (p->host_done != NULL) {
    pw__event_complete_runtime(p->host_done, NULL);
    pw_event_release(p->host_done);
    pw_event_release(p->host_done);
    p->host_done = NULL;
  }
  if (p->job != NULL) pw_allocator_free(rt->allocator, p->job, sizeof(*p->job));
  p->job = NULL;
}

static pw_status_t pw_fill_prepare(pw_runtime_t* rt, const pw_host_transfer_options_t* options,
                                   bool want_host_done, const char* who, pw_fill_prep_t* p) {
  memset(p, 0, sizeof(*p));
  PW_RETURN_IF_ERROR(pw_async_semantics(options, who, &p->semantics));
  if (p->semantics != PW_HOST_COPY_BEFORE_RETURN && !want_host_done) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: out_host_done is NULL; the asynchronous semantics need it (it "
                          "says when the host memory may be reused)",
                          who);
  }
  pw_status_t status = NULL;
  if (want_host_done) status = pw__event_create_runtime(rt->allocator, 2, &p->host_done);
  if (status == NULL && p->semantics != PW_HOST_COPY_BEFORE_RETURN) {
    status = pw__host_xfer_start(rt);
    if (status == NULL) {
      status = pw_allocator_calloc(rt->allocator, sizeof(*p->job), 0, (void**)&p->job);
    }
  }
  if (status != NULL) {
    pw_fill_prep_free(rt, p);
    return pw_status_annotate(status, "%s", who);
  }
  return NULL;
}

/* Fills |b|, claimed (|p| prepared), from |data|; consumes |p| and hands
 * the caller's host-done reference to |*out_host_done|. Errors only with
 * the copy (the buffer's ready event carries the same). */
static pw_status_t pw_fill_start(pw_client_t* client, pw_buffer_obj_t* b, const void* data,
                                 pw_fill_prep_t* p, pw_event_t** out_host_done) {
  pw_runtime_t* rt = client->runtime;
  if (out_host_done != NULL) *out_host_done = p->host_done;
  if (p->semantics == PW_HOST_ZERO_COPY) {
    pw_status_t refused = pw__buffer_adopt(b, data);
    if (refused == NULL) {
      /* The job's reference goes to the buffer: completed with its shards. */
      b->host_release = p->host_done;
      pw_allocator_free(rt->allocator, p->job, sizeof(*p->job));
      pw__event_complete_runtime(b->ready, NULL);
      return NULL;
    }
    /* Not adoptable: copied in the background instead (documented). */
    pw_status_free(refused);
  }
  if (p->semantics == PW_HOST_COPY_BEFORE_RETURN) {
    pw_status_t status = pw__buffer_upload(b, data, true);
    if (p->host_done != NULL) {
      pw__event_complete_runtime(p->host_done, NULL);
      pw_event_release(p->host_done);
    }
    pw__event_complete_runtime(b->ready, pw_status_clone(status));
    return status;
  }
  pw_fill_job_t* f = p->job;
  f->head.job.run = pw_fill_run;
  f->head.buffer = b;
  f->head.event = p->host_done;
  f->host = data;
  pw__object_retain(&b->header);
  pw_async_begin(&f->head, client);
  pw__host_xfer_enqueue(rt, &f->head.job);
  return NULL;
}

pw_status_t pw_buffer_from_host_async(pw_client_t* client, pw_vslice_t vslice,
                                      const pw_array_spec_t* spec, const void* data,
                                      size_t size, const pw_host_transfer_options_t* options,
                                      pw_buffer_t* out_buffer, pw_event_t** out_host_done) {
  static const char who[] = "pw_buffer_from_host_async";
  if (out_host_done != NULL) *out_host_done = NULL;
  if (out_buffer != NULL) out_buffer->id = 0;
  if (client == NULL || spec == NULL || out_buffer == NULL || data == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: client, spec, data or out_buffer is NULL", who);
  }
  pw_fill_prep_t p;
  PW_RETURN_IF_ERROR(pw_fill_prepare(client->runtime, options, out_host_done != NULL, who, &p));
  pw_buffer_obj_t* b = NULL;
  pw_status_t status = pw__buffer_make(client, vslice, spec, who, &b);
  if (status == NULL) status = pw__buffer_check_size(b, size, who);
  /* The handle first (its id names the buffer in the copy's errors):
   * the table's reference keeps |b| alive below. */
  if (status == NULL) {
    pw__object_retain(&b->header);
    status = pw__handle_insert(client, &b->header, &out_buffer->id);
  }
  if (status != NULL) {
    if (b != NULL) pw__object_release(&b->header);
    pw_fill_prep_free(client->runtime, &p);
    return status;
  }
  b->handle = out_buffer->id;
  pw_atomic_store_u32_release(&b->fill, PW_BUFFER_FILL_CLAIMED);
  status = pw_fill_start(client, b, data, &p, out_host_done);
  if (status != NULL) {
    /* Only a blocking copy fails here: as pw_buffer_from_host, nothing
     * is made. */
    pw_status_ignore(pw__handle_remove(client, out_buffer->id, PW_OBJECT_BUFFER, "buffer"));
    out_buffer->id = 0;
    if (out_host_done != NULL) {
      pw_event_release(*out_host_done);
      *out_host_done = NULL;
    }
  }
  pw__object_release(&b->header);
  return status != NULL ? pw_status_annotate(status, "%s", who) : NULL;
}

pw_status_t pw_buffer_create_empty(pw_client_t* client, pw_vslice_t vslice,
                                   const pw_array_spec_t* spec, pw_buffer_t* out_buffer) {
  static const char who[] = "pw_buffer_create_empty";
  if (out_buffer != NULL) out_buffer->id = 0;
  if (client == NULL || spec == NULL || out_buffer == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: client, spec or out_buffer is NULL",
                          who);
  }
  pw_buffer_obj_t* b = NULL;
  PW_RETURN_IF_ERROR(pw__buffer_make(client, vslice, spec, who, &b));
  pw_atomic_store_u32_release(&b->fill, PW_BUFFER_FILL_EMPTY);
  pw__object_retain(&b->header);
  pw_status_t status = pw__handle_insert(client, &b->header, &out_buffer->id);
  if (status == NULL) b->handle = out_buffer->id; /* before the caller can release it */
  pw__object_release(&b->header);
  return status;
}

/* Why |b| (in state |fill|, not EMPTY) cannot be filled. */
static pw_status_t pw_fill_refused(const pw_buffer_obj_t* b, uint32_t fill, pw_buffer_t buffer,
                                   const char* who) {
  unsigned long long id = (unsigned long long)buffer.id;
  switch (fill) {
    case PW_BUFFER_FILL_CLAIMED:
      return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                            "%s: buffer 0x%llx is filled already (a buffer is filled once)",
                            who, id);
    case PW_BUFFER_FILL_CANCELLED:
      return pw_status_make(PW_STATUS_CANCELLED,
                            "%s: buffer 0x%llx was cancelled (its last handle went) before "
                            "this fill",
                            who, id);
    default:
      (void)b;
      return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                            "%s: buffer 0x%llx was not made by pw_buffer_create_empty (a "
                            "submission's output or a host transfer's buffer has its "
                            "contents already)",
                            who, id);
  }
}

pw_status_t pw_buffer_fill_from_host(pw_client_t* client, pw_buffer_t buffer, const void* data,
                                     size_t size, const pw_host_transfer_options_t* options,
                                     pw_event_t** out_host_done) {
  static const char who[] = "pw_buffer_fill_from_host";
  if (out_host_done != NULL) *out_host_done = NULL;
  if (client == NULL || data == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: client or data is NULL", who);
  }
  pw_buffer_obj_t* b = NULL;
  PW_RETURN_IF_ERROR_CTX(pw__buffer_get(client, buffer, &b), "%s", who);
  uint32_t fill = pw_atomic_load_u32_acquire(&b->fill);
  pw_status_t status =
      fill != PW_BUFFER_FILL_EMPTY ? pw_fill_refused(b, fill, buffer, who) : NULL;
  if (status == NULL) status = pw__buffer_check_size(b, size, who);
  pw_fill_prep_t p;
  if (status == NULL) status = pw_fill_prepare(client->runtime, options, out_host_done != NULL,
                                               who, &p);
  if (status == NULL) {
    uint32_t expected = PW_BUFFER_FILL_EMPTY;
    if (!pw_atomic_cas_u32(&b->fill, &expected, PW_BUFFER_FILL_CLAIMED)) {
      pw_fill_prep_free(client->runtime, &p);
      status = pw_fill_refused(b, expected, buffer, who);
    } else {
      status = pw_fill_start(client, b, data, &p, out_host_done);
      if (status != NULL) status = pw_status_annotate(status, "%s: buffer 0x%llx", who,
                                                      (unsigned long long)buffer.id);
    }
  }
  pw__object_release(&b->header);
  return status;
}

/* ---- reads ------------------------------------------------------------- */

pw_status_t pw_buffer_to_host_async(pw_client_t* client, pw_buffer_t buffer, void* dst,
                                    size_t size, pw_event_t** out_done) {
  static const char who[] = "pw_buffer_to_host_async";
  if (out_done != NULL) *out_done = NULL;
  if (client == NULL || dst == NULL || out_done == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: client, dst or out_done is NULL",
                          who);
  }
  pw_runtime_t* rt = client->runtime;
  pw_buffer_obj_t* b = NULL;
  PW_RETURN_IF_ERROR_CTX(pw__buffer_get(client, buffer, &b), "%s", who);
  pw_status_t status = pw__buffer_check_size(b, size, who);
  if (status == NULL) status = pw__host_xfer_start(rt);
  pw_read_job_t* r = NULL;
  if (status == NULL) status = pw_allocator_calloc(rt->allocator, sizeof(*r), 0, (void**)&r);
  pw_event_t* done = NULL;
  if (status == NULL) status = pw__event_create_runtime(rt->allocator, 2, &done);
  if (status != NULL) {
    if (r != NULL) pw_allocator_free(rt->allocator, r, sizeof(*r));
    pw__object_release(&b->header);
    return status;
  }
  r->head.job.run = pw_read_run;
  r->head.buffer = b; /* the look-up's reference */
  r->head.event = done;
  r->dst = dst;
  r->id = buffer.id;
  pw_async_begin(&r->head, client);
  *out_done = done;
  r->node.fn = pw_read_ready;
  r->node.user = r;
  r->node.flags = 0;
  pw__event_add_node(b->ready, &r->node);
  return NULL;
}
