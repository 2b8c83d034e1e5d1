/* The CPU backend's streams mode: one FIFO worker thread per device (a
 * stream, as a CUDA stream or an IREE queue), the reference queue-ordered
 * backend of "Queue-ordered launch" in pathways/backend.h. This file owns
 * the streams, their admission (depth, queue_seq), their worker loop, the
 * blocking form of the collectives, queue_info and the streams' shutdown.
 *
 * Each stream has one mutex guarding its FIFO, its count of outstanding
 * launches (accepted, done not yet called) and the state of the collective
 * its worker waits in. The launch is validated and copied on the caller's
 * thread (backend.c) before the stream mutex is taken, so admission (the
 * queue_seq check, the depth check and the enqueue) is one short critical
 * section and launch never blocks on the device.
 *
 * Collectives block the stream, as NCCL's do: the worker deposits its part
 * at the rendezvous of collective.c with its done redirected to the stream
 * (pw_cpu_stream_member_done) and sleeps until whoever completes the group
 * (the last member, a device failure, a refused part, destroy) calls it.
 * The real done is then called by the worker itself, so every done of a
 * device comes from its stream thread in queue order.
 *
 * Shutdown. Besides each stream's mutex, the streams share one mutex and
 * condition counting live workers and those asleep in a collective
 * (|blocked|), with a change counter. When every live worker is asleep in
 * a collective no member can reach any more (nothing else runs: launches
 * have stopped), destroy completes the pending collectives with CANCELLED
 * and the workers drain on. Lock order: a stream's mutex, then the shared
 * one; the rendezvous mutex is never held while taking either. */
#include <errno.h>
#include <stdalign.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "pathways/clock.h"
#include "pathways/struct_size.h"

typedef struct pw_cpu_stream_t {
  pw_cpu__streams_t* streams;
  uint32_t device;
  pthread_mutex_t mutex;
  /* Work queued, stopping, or the awaited collective member finished; the
   * worker is the only waiter. */
  pthread_cond_t wake;
  pw_cpu__launch_t* head; /* linked through task.next */
  pw_cpu__launch_t* tail;
  uint32_t outstanding;
  uint64_t last_seq;      /* the highest queue_seq seen on the device */
  bool stopping;
  bool member_waiting;    /* asleep in a collective, counted in |blocked| */
  bool member_finished;
  pw_status_t member_status;
  pthread_t thread;
} pw_cpu_stream_t;

struct pw_cpu__streams_t {
  pw_cpu__backend_t* backend;
  uint32_t depth;
  uint32_t count;   /* entries of |stream| */
  uint32_t started; /* threads created */
  pthread_mutex_t mutex;
  pthread_cond_t changed;
  uint32_t live;    /* workers not yet exited */
  uint32_t blocked; /* workers asleep in a collective */
  uint64_t changes; /* bumped with every change of live or blocked */
  pw_cpu_stream_t stream[];
};

/* Adds |delta| to |*counter| under the shared mutex and wakes destroy. */
static void pw_cpu_streams_count(pw_cpu__streams_t* streams, uint32_t* counter, int delta) {
  pthread_mutex_lock(&streams->mutex);
  *counter = (uint32_t)((int64_t)*counter + delta);
  streams->changes++;
  pthread_cond_broadcast(&streams->changed);
  pthread_mutex_unlock(&streams->mutex);
}

/*---------------------------------------------------------------------------
 * Running one launch on its stream
 *-------------------------------------------------------------------------*/

/* The done of a collective part in streams mode: hands the status to the
 * stream's worker. Called by whoever completes the group, any thread. */
static void pw_cpu_stream_member_done(void* user, pw_status_t status) {
  pw_cpu_stream_t* stream = user;
  pthread_mutex_lock(&stream->mutex);
  stream->member_status = status;
  stream->member_finished = true;
  if (stream->member_waiting) {
    stream->member_waiting = false;
    pw_cpu_streams_count(stream->streams, &stream->streams->blocked, -1);
  }
  pthread_cond_signal(&stream->wake);
  pthread_mutex_unlock(&stream->mutex);
}

/* Takes |launch| (a collective part) to its rendezvous and waits there
 * until the group completes; returns the part's status. */
static pw_status_t pw_cpu_stream_collective(pw_cpu_stream_t* stream,
                                            pw_cpu__launch_t* launch) {
  pthread_mutex_lock(&stream->mutex);
  stream->member_finished = false;
  stream->member_status = NULL;
  pthread_mutex_unlock(&stream->mutex);
  launch->done = pw_cpu_stream_member_done;
  launch->done_user = stream;
  /* From here the launch belongs to the rendezvous (possibly freed). */
  pw_cpu__collective_arrive(launch);
  pthread_mutex_lock(&stream->mutex);
  if (!stream->member_finished) {
    stream->member_waiting = true;
    pw_cpu_streams_count(stream->streams, &stream->streams->blocked, 1);
    while (!stream->member_finished) pthread_cond_wait(&stream->wake, &stream->mutex);
  }
  pw_status_t status = stream->member_status;
  stream->member_status = NULL;
  pthread_mutex_unlock(&stream->mutex);
  return status;
}

static void pw_cpu_stream_run(pw_cpu_stream_t* stream, pw_cpu__launch_t* launch) {
  pw_backend_done_fn_t done = launch->done;
  pw_backend_done_timed_fn_t done_timed = launch->done_timed;
  void* done_user = launch->done_user;
  pw_backend_timing_t timing = {.struct_size = sizeof(timing)};
  timing.start_ns = (uint64_t)pw_clock_now();
  pw_status_t status;
  if (launch->executable->kernel->collective != PW_CPU__NOT_COLLECTIVE) {
    status = pw_cpu_stream_collective(stream, launch);
  } else {
    status = pw_cpu__launch_execute(launch);
    pw_cpu__launch_free(launch);
  }
  timing.end_ns = (uint64_t)pw_clock_now();
  /* No longer outstanding before done: a done that launches again (the
   * runtime's next op) must find room. */
  pthread_mutex_lock(&stream->mutex);
  stream->outstanding--;
  pthread_mutex_unlock(&stream->mutex);
  if (done_timed != NULL) {
    done_timed(done_user, status, &timing);
  } else {
    done(done_user, status);
  }
}

static void* pw_cpu_stream_main(void* arg) {
  pw_cpu_stream_t* stream = arg;
  for (;;) {
    pthread_mutex_lock(&stream->mutex);
    while (stream->head == NULL && !stream->stopping) {
      pthread_cond_wait(&stream->wake, &stream->mutex);
    }
    pw_cpu__launch_t* launch = stream->head;
    if (launch == NULL) {
      /* Stopping and drained. */
      pthread_mutex_unlock(&stream->mutex);
      break;
    }
    stream->head = (pw_cpu__launch_t*)launch->task.next;
    if (stream->head == NULL) stream->tail = NULL;
    pthread_mutex_unlock(&stream->mutex);
    pw_cpu_stream_run(stream, launch);
  }
  pw_cpu_streams_count(stream->streams, &stream->streams->live, -1);
  return NULL;
}

/*---------------------------------------------------------------------------
 * Launch: admission
 *-------------------------------------------------------------------------*/

/* Checks |seq| against the device's last one and the depth against the
 * outstanding launches; NULL admits. Caller holds the stream mutex. A
 * refusal still counts |seq| as seen (the runtime numbers refused launches
 * too), except a repeat, which would move the count back. */
static pw_status_t pw_cpu_stream_admit_locked(pw_cpu_stream_t* stream, const char* kernel,
                                              uint64_t seq, bool* out_misordered) {
  *out_misordered = false;
  uint64_t last = stream->last_seq;
  if (seq != 0 && seq <= last) {
    *out_misordered = true;
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu launch of '%s' on device %u: queue_seq %llu repeats or "
                          "goes back (the device's last was %llu; expected %llu)",
                          kernel, stream->device, (unsigned long long)seq,
                          (unsigned long long)last, (unsigned long long)(last + 1));
  }
  if (seq != 0) stream->last_seq = seq;
  if (seq > last + 1) {
    *out_misordered = true;
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu launch of '%s' on device %u: queue_seq %llu skips from "
                          "%llu (expected %llu; numbers %llu..%llu never came)",
                          kernel, stream->device, (unsigned long long)seq,
                          (unsigned long long)last, (unsigned long long)(last + 1),
                          (unsigned long long)(last + 1), (unsigned long long)(seq - 1));
  }
  if (stream->outstanding >= stream->streams->depth) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "cpu launch of '%s' on device %u: its stream already holds "
                          "%u launches (stream depth %u)",
                          kernel, stream->device, stream->outstanding,
                          stream->streams->depth);
  }
  return NULL;
}

/* A launch refused before admission still takes its queue_seq. */
static void pw_cpu_stream_note_refused(pw_cpu__backend_t* backend,
                                       const pw_backend_launch_t* l) {
  if (l == NULL || l->struct_size < PW_BACKEND_LAUNCH_SIZE_V1 ||
      !PW_STRUCT_HAS_FIELD(l, pw_backend_launch_t, done_timed) || l->queue_seq == 0 ||
      l->device >= backend->streams->count) {
    return;
  }
  pw_cpu_stream_t* stream = &backend->streams->stream[l->device];
  pthread_mutex_lock(&stream->mutex);
  if (l->queue_seq > stream->last_seq) stream->last_seq = l->queue_seq;
  pthread_mutex_unlock(&stream->mutex);
}

pw_status_t pw_cpu__streams_launch(pw_cpu__backend_t* backend, const pw_backend_launch_t* l) {
  pw_cpu__launch_t* launch = NULL;
  pw_status_t refused = pw_cpu__launch_check(backend, l);
  if (refused == NULL) refused = pw_cpu__launch_copy(backend, l, &launch);
  if (refused != NULL) {
    pw_cpu_stream_note_refused(backend, l);
    if (l != NULL && l->struct_size >= PW_BACKEND_LAUNCH_SIZE_V1 && l->group_size > 1) {
      pw_cpu__collective_refused(backend, l->gang_id, refused);
    }
    return refused;
  }
  pw_cpu_stream_t* stream = &backend->streams->stream[launch->device];
  bool misordered = false;
  pthread_mutex_lock(&stream->mutex);
  refused = pw_cpu_stream_admit_locked(stream, launch->executable->program.kernel,
                                       launch->queue_seq, &misordered);
  if (refused == NULL) {
    stream->outstanding++;
    launch->task.next = NULL;
    if (stream->tail != NULL) {
      stream->tail->task.next = &launch->task;
    } else {
      stream->head = launch;
    }
    stream->tail = launch;
    pthread_cond_signal(&stream->wake);
  }
  pthread_mutex_unlock(&stream->mutex);
  if (refused == NULL) return NULL;
  if (misordered) {
    pw_log(&backend->logger, PW_LOG_ERROR, PW_CPU_LOG, "%s", pw_status_message(refused));
  }
  pw_cpu__launch_free(launch);
  if (l->group_size > 1) pw_cpu__collective_refused(backend, l->gang_id, refused);
  return refused;
}

/*---------------------------------------------------------------------------
 * queue_info
 *-------------------------------------------------------------------------*/

pw_status_t pw_cpu__queue_info(void* self, uint32_t device, pw_backend_queue_info_t* out_info) {
  pw_cpu__backend_t* backend = self;
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(out_info, pw_backend_queue_info_t,
                                     PW_BACKEND_QUEUE_INFO_SIZE_V1, "cpu queue_info"));
  if (device >= backend->device_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu queue_info: device %u does not exist (the backend has %u)",
                          device, backend->device_count);
  }
  pw_backend_queue_info_t info = {.struct_size = sizeof(info)};
  if (backend->streams != NULL) {
    uint32_t depth = backend->streams->depth;
    info.flags = PW_BACKEND_QUEUE_ORDERED;
    info.depth = depth < PW_BACKEND_MAX_QUEUE_DEPTH ? depth : PW_BACKEND_MAX_QUEUE_DEPTH;
  }
  pw_struct_fill(out_info, &info, sizeof(info));
  return NULL;
}

/*---------------------------------------------------------------------------
 * Start and stop
 *-------------------------------------------------------------------------*/

static size_t pw_cpu_streams_size(uint32_t count) {
  return sizeof(pw_cpu__streams_t) + (size_t)count * sizeof(pw_cpu_stream_t);
}

/* Waits until every worker has exited, cancelling the pending collectives
 * whenever every live worker sleeps in one (see the file comment). */
static void pw_cpu_streams_drain(pw_cpu__streams_t* streams) {
  pthread_mutex_lock(&streams->mutex);
  while (streams->live > 0) {
    if (streams->blocked == streams->live) {
      uint64_t seen = streams->changes;
      pthread_mutex_unlock(&streams->mutex);
      pw_cpu__collective_shutdown(streams->backend);
      pthread_mutex_lock(&streams->mutex);
      /* Cancelled members counted themselves out (under this mutex): look
       * again. Nothing changed: completions are on their way elsewhere
       * (a group being finished or failed), and they will signal. */
      if (streams->changes != seen) continue;
    }
    pthread_cond_wait(&streams->changed, &streams->mutex);
  }
  pthread_mutex_unlock(&streams->mutex);
}

void pw_cpu__streams_stop(pw_cpu__backend_t* backend) {
  pw_cpu__streams_t* streams = backend->streams;
  if (streams == NULL) return;
  for (uint32_t i = 0; i < streams->started; ++i) {
    pw_cpu_stream_t* stream = &streams->stream[i];
    pthread_mutex_lock(&stream->mutex);
    stream->stopping = true;
    pthread_cond_signal(&stream->wake);
    pthread_mutex_unlock(&stream->mutex);
  }
  pw_cpu_streams_drain(streams);
  for (uint32_t i = 0; i < streams->started; ++i) {
    pthread_join(streams->stream[i].thread, NULL);
  }
  for (uint32_t i = 0; i < streams->count; ++i) {
    pthread_cond_destroy(&streams->stream[i].wake);
    pthread_mutex_destroy(&streams->stream[i].mutex);
  }
  pthread_cond_destroy(&streams->changed);
  pthread_mutex_destroy(&streams->mutex);
  backend->streams = NULL;
  pw_allocator_free(backend->allocator, streams, pw_cpu_streams_size(streams->count));
}

pw_status_t pw_cpu__streams_start(pw_cpu__backend_t* backend, uint32_t depth) {
  uint32_t count = backend->device_count;
  void* memory = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_allocator_calloc(backend->allocator, pw_cpu_streams_size(count),
                                             alignof(pw_cpu__streams_t), &memory),
                         "cpu backend: %u streams", count);
  pw_cpu__streams_t* streams = memory;
  streams->backend = backend;
  streams->depth = depth;
  streams->count = count;
  pthread_mutex_init(&streams->mutex, NULL);
  pthread_cond_init(&streams->changed, NULL);
  for (uint32_t i = 0; i < count; ++i) {
    pw_cpu_stream_t* stream = &streams->stream[i];
    stream->streams = streams;
    stream->device = i;
    pthread_mutex_init(&stream->mutex, NULL);
    pthread_cond_init(&stream->wake, NULL);
  }
  backend->streams = streams;
  for (uint32_t i = 0; i < count; ++i) {
    pthread_mutex_lock(&streams->mutex);
    streams->live++;
    pthread_mutex_unlock(&streams->mutex);
    int rc = pthread_create(&streams->stream[i].thread, NULL, pw_cpu_stream_main,
                            &streams->stream[i]);
    if (rc != 0) {
      pthread_mutex_lock(&streams->mutex);
      streams->live--;
      pthread_mutex_unlock(&streams->mutex);
      /* Stop the ones already running; they have nothing to do. */
      pw_cpu__streams_stop(backend);
      return pw_status_make(rc == EAGAIN ? PW_STATUS_RESOURCE_EXHAUSTED : PW_STATUS_INTERNAL,
                            "cpu backend: could not start the stream thread of device "
                            "%u of %u (%s)",
                            i, count, strerror(rc));
    }
    streams->started = i + 1;
  }
  return NULL;
}

bool pw_cpu__streams_is_worker(pw_cpu__backend_t* backend) {
  pw_cpu__streams_t* streams = backend->streams;
  if (streams == NULL) return false;
  pthread_t self = pthread_self();
  for (uint32_t i = 0; i < streams->started; ++i) {
    if (pthread_equal(self, streams->stream[i].thread)) return true;
  }
  return false;
}
