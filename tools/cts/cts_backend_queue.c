/* CTS cases: queue-ordered launch (pathways/backend.h, "Queue-ordered
 * launch"). They run when every device of the backend reports
 * PW_BACKEND_QUEUE_ORDERED through queue_info, and are skipped otherwise.
 * Written against the raw vtable as a runtime drives a queued slice: v2
 * launch descriptors numbered queue_seq 1, 2, 3... per device, with
 * done_timed set, descriptors on the stack (a queued backend copies them
 * during the call), never more than the reported depth outstanding. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, strnlen */
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "cts_backend.h"

/* The longest a launch call may block its caller: a queued backend
 * enqueues, it does not wait for the device. Generous for sanitizers. */
#define PW_CTS_LAUNCH_BOUND_NS (2ull * 1000 * 1000 * 1000)

static uint32_t pw_cts_require_queued(const pw_cts_fixture_t* f, const pw_backend_t* b) {
  uint32_t depth = pw_cts_queue_depth(b);
  if (depth == 0) {
    pw_backend_t copy = *b;
    pw_cts_destroy(&copy);
    PW_CTS_SKIP("%s: not queue-ordered (queue_info reports no PW_BACKEND_QUEUE_ORDERED)",
                 f->name);
  }
  return depth;
}

/* One device's buffers for queued copies: in[k] -> out[k]. */
typedef struct pw_cts_queue_bufs_t {
  uint32_t device;
  uint32_t count;
  size_t bytes;
  pw_backend_memory_t* in;
  pw_backend_memory_t* out;
} pw_cts_queue_bufs_t;

static void pw_cts_queue_bufs_alloc(const pw_backend_t* b, pw_cts_queue_bufs_t* q,
                                    uint32_t device, uint32_t count, uint32_t elements) {
  q->device = device;
  q->count = count;
  q->bytes = elements * sizeof(float);
  q->in = calloc(count, sizeof(pw_backend_memory_t));
  q->out = calloc(count, sizeof(pw_backend_memory_t));
  float* values = malloc(q->bytes);
  unsigned char* junk = malloc(q->bytes);
  PW_CTS_ASSERT(q->in != NULL && q->out != NULL && values != NULL && junk != NULL);
  memset(junk, 0xCD, q->bytes);
  for (uint32_t k = 0; k < count; ++k) {
    for (uint32_t i = 0; i < elements; ++i) values[i] = pw_cts_value(k, device, i);
    PW_CTS_OK(pw_cts_backend_allocate(b, device, q->bytes, &q->in[k]));
    PW_CTS_OK(pw_cts_backend_allocate(b, device, q->bytes, &q->out[k]));
    PW_CTS_OK(pw_cts_backend_copy_to_device(b, device, q->in[k], 0, values, q->bytes));
    PW_CTS_OK(pw_cts_backend_copy_to_device(b, device, q->out[k], 0, junk, q->bytes));
  }
  free(values);
  free(junk);
}

static void pw_cts_queue_bufs_free(const pw_backend_t* b, pw_cts_queue_bufs_t* q) {
  for (uint32_t k = 0; k < q->count; ++k) {
    if (q->in[k] != NULL) pw_cts_backend_deallocate(b, q->device, q->in[k]);
    if (q->out[k] != NULL) pw_cts_backend_deallocate(b, q->device, q->out[k]);
  }
  free(q->in);
  free(q->out);
  q->count = 0;
}

/* Checks that out[k] of |q| holds what in[|source|] held. */
static void pw_cts_queue_check(const pw_backend_t* b, const pw_cts_queue_bufs_t* q, uint32_t k,
                               uint32_t source, const char* what) {
  float* out = malloc(q->bytes);
  PW_CTS_ASSERT_NOT_NULL(out);
  PW_CTS_OK(pw_cts_backend_copy_to_host(b, q->device, q->out[k], 0, out, q->bytes));
  for (uint32_t i = 0; i < q->bytes / sizeof(float); ++i) {
    float want = pw_cts_value(source, q->device, i);
    PW_CTS_ASSERT_EQ(out[i], want, "%s: device %u launch %u element %u is %g, expected %g", what,
                 q->device, k, i, (double)out[i], (double)want);
  }
  free(out);
}

/* One queued launch of a one-device copy on |device|, from |in| to |out|,
 * number |seq|, completing into |slot|. Fails the case if the call blocks
 * past the bound. */
static pw_status_t pw_cts_queued_launch(const pw_backend_t* b, pw_backend_executable_t e,
                                        uint32_t device, pw_backend_memory_t in,
                                        pw_backend_memory_t out, uint64_t seq,
                                        pw_cts_slot_t* slot) {
  uint32_t group[1] = {device};
  pw_backend_launch_t l;
  memset(&l, 0, sizeof(l));
  l.struct_size = sizeof(l);
  l.executable = e;
  l.device = device;
  l.mesh_index = 0;
  l.group_devices = group;
  l.group_size = 1;
  l.gang_id = 0x51000000ull + ((uint64_t)device << 16) + seq;
  l.inputs = &in;
  l.input_count = 1;
  l.outputs = &out;
  l.output_count = 1;
  l.done = pw_cts_done;
  l.done_user = slot;
  l.queue_seq = seq;
  l.done_timed = pw_cts_done_timed;
  pw_time_t start = pw_clock_now();
  pw_status_t status = b->vtable->launch(b->self, &l);
  pw_duration_t took = pw_clock_now() - start;
  /* The descriptor and |group| die here: the backend must have copied. */
  memset(&l, 0xEE, sizeof(l));
  memset(group, 0xEE, sizeof(group));
  PW_CTS_ASSERT_LEQ((uint64_t)took, PW_CTS_LAUNCH_BOUND_NS,
                "launch %llu on device %u blocked its caller for %lld ms",
                (unsigned long long)seq, device, (long long)(took / 1000000));
  return status;
}

/* Every slot in [first, first + count) was called exactly once, OK, with a
 * sane timing when the backend gave one. */
static void pw_cts_queue_expect_ok(pw_cts_tracker_t* tracker, size_t first, size_t count,
                                   const char* what) {
  for (size_t i = first; i < first + count; ++i) {
    pw_cts_tracker_expect_calls(tracker, i, 1);
    int code = atomic_load(&tracker->slots[i].code);
    PW_CTS_ASSERT_EQ(code, PW_STATUS_OK, "%s: launch %zu completed with %s", what, i,
                 pw_status_code_string((pw_status_code_t)code));
    if (atomic_load(&tracker->slots[i].timed)) {
      PW_CTS_ASSERT_LEQ(tracker->slots[i].start_ns, tracker->slots[i].end_ns,
                    "%s: launch %zu ends before it starts", what, i);
    }
  }
}

/* queued_order: a chain of copies through buffers on one device (launch k
 * copies launch k-1's output), all issued before waiting: a wrong order
 * leaves junk in some buffer. Dones come in queue_seq order. */
void pw_cts_case_queued_order(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t depth = pw_cts_require_queued(f, &b);
  uint32_t n = depth < 16 ? depth : 16;
  const uint32_t elements = 256;
  uint32_t one = 1;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &one);
  pw_backend_executable_t e = pw_cts_load(&b, f->copy_program, &mesh, elements, 1, 1);
  const uint32_t device = pw_cts_backend_device_count(&b) - 1;
  pw_cts_queue_bufs_t q;
  pw_cts_queue_bufs_alloc(&b, &q, device, n, elements);
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, n);
  for (uint32_t k = 0; k < n; ++k) {
    /* Launch 0 reads in[0]; launch k reads out[k-1]. */
    pw_backend_memory_t in = k == 0 ? q.in[0] : q.out[k - 1];
    PW_CTS_OK(pw_cts_queued_launch(&b, e, device, in, q.out[k], k + 1, &tracker.slots[k]));
  }
  pw_cts_tracker_wait(&tracker, n, "queued chain");
  pw_cts_queue_expect_ok(&tracker, 0, n, "queued chain");
  for (uint32_t k = 0; k < n; ++k) {
    PW_CTS_ASSERT_EQ(tracker.order[k], k, "done %u came for launch %zu (queue_seq order broken)", k,
                 tracker.order[k]);
    pw_cts_queue_check(&b, &q, k, 0, "queued chain");
    if (k > 0 && atomic_load(&tracker.slots[k].timed) && atomic_load(&tracker.slots[k - 1].timed)) {
      PW_CTS_ASSERT_GEQ(tracker.slots[k].start_ns, tracker.slots[k - 1].end_ns,
                    "launch %u started before launch %u ended on one device", k, k - 1);
    }
  }
  pw_cts_queue_bufs_free(&b, &q);
  pw_cts_backend_unload(&b, e);
  pw_cts_destroy(&b);
  pw_cts_tracker_free(&tracker);
}

/* queued_depth: exactly |depth| launches outstanding on each of two
 * devices are all accepted, none blocks its caller, all complete. */
void pw_cts_case_queued_depth(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t depth = pw_cts_require_queued(f, &b);
  uint32_t devices = pw_cts_backend_device_count(&b) < 2 ? 1 : 2;
  const uint32_t elements = 1024; /* big enough that the queue fills */
  uint32_t one = 1;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &one);
  pw_backend_executable_t e = pw_cts_load(&b, f->copy_program, &mesh, elements, 1, 1);
  pw_cts_queue_bufs_t q[2];
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, (size_t)devices * depth);
  for (uint32_t d = 0; d < devices; ++d) pw_cts_queue_bufs_alloc(&b, &q[d], d, depth, elements);
  for (uint32_t k = 0; k < depth; ++k) {
    for (uint32_t d = 0; d < devices; ++d) {
      pw_status_t status = pw_cts_queued_launch(&b, e, d, q[d].in[k], q[d].out[k], k + 1,
                                                &tracker.slots[(size_t)d * depth + k]);
      if (status != NULL) {
        char text[512];
        pw_status_format(status, text, sizeof(text));
        pw_status_free(status);
        PW_CTS_FAIL("device %u: launch %u of a queue of depth %u refused: %s", d, k + 1,
                       depth, text);
      }
    }
  }
  pw_cts_tracker_wait(&tracker, (size_t)devices * depth, "a full queue");
  pw_cts_queue_expect_ok(&tracker, 0, (size_t)devices * depth, "a full queue");
  for (uint32_t d = 0; d < devices; ++d) {
    for (uint32_t k = 0; k < depth; ++k) pw_cts_queue_check(&b, &q[d], k, k, "a full queue");
    pw_cts_queue_bufs_free(&b, &q[d]);
  }
  pw_cts_backend_unload(&b, e);
  pw_cts_destroy(&b);
  pw_cts_tracker_free(&tracker);
}

/* queued_failure_mid_queue: in a queue of independent copies, launch
 * |n|/2 is refused (its output is too small; it still takes its number)
 * and every launch behind it completes. Then, when the fixture can fail a
 * device, a device fails with half its queue launched: every launch, the
 * ones behind the failure included, ends exactly once with a typed status
 * (refused UNAVAILABLE, or done OK/UNAVAILABLE), and nothing hangs. */
void pw_cts_case_queued_failure_mid_queue(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t depth = pw_cts_require_queued(f, &b);
  uint32_t n = depth < 8 ? depth : 8;
  if (n < 3) {
    pw_cts_destroy(&b);
    PW_CTS_SKIP("%s: a queue of depth %u has no middle", f->name, depth);
  }
  const uint32_t elements = 64;
  uint32_t one = 1;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &one);
  pw_backend_executable_t e = pw_cts_load(&b, f->copy_program, &mesh, elements, 1, 1);
  pw_cts_queue_bufs_t q;
  pw_cts_queue_bufs_alloc(&b, &q, 0, n, elements);
  pw_backend_memory_t small = NULL;
  PW_CTS_OK(pw_cts_backend_allocate(&b, 0, 4, &small));
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, 2 * (size_t)n);
  uint32_t bad = n / 2;
  for (uint32_t k = 0; k < n; ++k) {
    pw_backend_memory_t out = k == bad ? small : q.out[k];
    pw_status_t status = pw_cts_queued_launch(&b, e, 0, q.in[k], out, k + 1, &tracker.slots[k]);
    if (k == bad) {
      pw_cts_assert_error(status,
                          (const pw_status_code_t[]){PW_STATUS_INVALID_ARGUMENT,
                                                     PW_STATUS_OUT_OF_RANGE},
                          2, "a queued launch with a too-small output");
    } else {
      PW_CTS_OK(status);
    }
  }
  pw_cts_tracker_wait(&tracker, n - 1, "launches queued behind a refused one");
  for (uint32_t k = 0; k < n; ++k) {
    if (k == bad) continue;
    pw_cts_queue_expect_ok(&tracker, k, 1, "behind a refused launch");
    pw_cts_queue_check(&b, &q, k, k, "behind a refused launch");
  }
  pw_cts_backend_deallocate(&b, 0, small);
  pw_cts_queue_bufs_free(&b, &q);

  size_t expected = n - 1;
  bool failed_part = f->fail_device != NULL && pw_cts_backend_device_count(&b) >= 2;
  if (failed_part) {
    uint32_t victim = pw_cts_backend_device_count(&b) - 1;
    pw_cts_queue_bufs_alloc(&b, &q, victim, n, elements);
    for (uint32_t k = 0; k < n; ++k) {
      if (k == n / 2) PW_CTS_OK(f->fail_device(&b, victim));
      pw_cts_slot_t* slot = &tracker.slots[n + k];
      pw_status_t status = pw_cts_queued_launch(&b, e, victim, q.in[k], q.out[k], k + 1, slot);
      if (status != NULL) {
        PW_CTS_ASSERT_GEQ(k, n / 2, "launch %u refused before the device failed", k);
        pw_cts_assert_error(status, (const pw_status_code_t[]){PW_STATUS_UNAVAILABLE}, 1,
                            "a launch on a failed device");
        atomic_store(&slot->code, -2); /* refused: no done may come */
      } else {
        ++expected;
      }
    }
    pw_cts_tracker_wait(&tracker, expected, "launches queued on a failing device");
    for (uint32_t k = 0; k < n; ++k) {
      pw_cts_slot_t* slot = &tracker.slots[n + k];
      int code = atomic_load(&slot->code);
      if (code == -2) continue;
      PW_CTS_ASSERT_EQ(atomic_load(&slot->calls), 1, "launch %u on the failing device: %u dones", k,
                   atomic_load(&slot->calls));
      PW_CTS_ASSERT(code == PW_STATUS_OK || code == PW_STATUS_UNAVAILABLE,
                "launch %u on the failing device completed with %s", k,
                pw_status_code_string((pw_status_code_t)code));
      if (k >= n / 2) {
        PW_CTS_ASSERT_EQ(code, PW_STATUS_UNAVAILABLE,
                     "launch %u, made after the device failed, completed OK", k);
      }
    }
    pw_cts_queue_bufs_free(&b, &q);
  }
  pw_cts_backend_unload(&b, e);
  pw_cts_destroy(&b);
  /* Destroy joined the backend's threads: a late or double done shows. */
  pw_cts_tracker_expect_calls(&tracker, bad, 0);
  for (uint32_t k = 0; failed_part && k < n; ++k) {
    if (atomic_load(&tracker.slots[n + k].code) == -2) {
      pw_cts_tracker_expect_calls(&tracker, n + k, 0);
    }
  }
  pthread_mutex_lock(&tracker.mutex);
  size_t completed = tracker.completed;
  pthread_mutex_unlock(&tracker.mutex);
  PW_CTS_ASSERT_EQ(completed, expected, "%zu dones for %zu accepted launches", completed, expected);
  pw_cts_tracker_free(&tracker);
}

/* The done of a launch whose buffers are freed as it completes. */
typedef struct pw_cts_owned_t {
  const pw_backend_t* backend;
  uint32_t device;
  pw_backend_memory_t in;
  pw_backend_memory_t out;
} pw_cts_owned_t;

static void pw_cts_free_owned(pw_cts_slot_t* slot) {
  pw_cts_owned_t* owned = slot->user;
  pw_cts_backend_deallocate(owned->backend, owned->device, owned->in);
  pw_cts_backend_deallocate(owned->backend, owned->device, owned->out);
}

typedef struct pw_cts_destroyer_t {
  pw_backend_t backend;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  bool finished;
} pw_cts_destroyer_t;

static void* pw_cts_destroyer_main(void* arg) {
  pw_cts_destroyer_t* d = arg;
  pw_cts_destroy(&d->backend);
  pthread_mutex_lock(&d->mutex);
  d->finished = true;
  pthread_cond_broadcast(&d->cond);
  pthread_mutex_unlock(&d->mutex);
  return NULL;
}

/* queued_deadline: with every device's queue full, each accepted launch
 * completes within the CTS timeout (the case names one that does not);
 * then, with the queues full again, destroy returns within the timeout and
 * has completed every launch exactly once (their dones free the buffers,
 * so nothing is live when destroy ends). */
void pw_cts_case_queued_deadline(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t depth = pw_cts_require_queued(f, &b);
  uint32_t per_device = depth < 32 ? depth : 32;
  uint32_t devices = pw_cts_backend_device_count(&b) < 8 ? pw_cts_backend_device_count(&b) : 8;
  const uint32_t elements = 256;
  uint32_t one = 1;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &one);
  pw_backend_executable_t e = pw_cts_load(&b, f->copy_program, &mesh, elements, 1, 1);
  size_t total = (size_t)devices * per_device;
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, 2 * total);
  pw_cts_owned_t* owned = calloc(2 * total, sizeof(*owned));
  PW_CTS_ASSERT_NOT_NULL(owned);
  for (uint32_t round = 0; round < 2; ++round) {
    for (uint32_t k = 0; k < per_device; ++k) {
      for (uint32_t d = 0; d < devices; ++d) {
        size_t i = round * total + (size_t)d * per_device + k;
        owned[i] = (pw_cts_owned_t){&b, d, NULL, NULL};
        PW_CTS_OK(pw_cts_backend_allocate(&b, d, elements * sizeof(float), &owned[i].in));
        PW_CTS_OK(pw_cts_backend_allocate(&b, d, elements * sizeof(float), &owned[i].out));
        tracker.slots[i].then = pw_cts_free_owned;
        tracker.slots[i].user = &owned[i];
        uint64_t seq = (uint64_t)round * per_device + k + 1;
        PW_CTS_OK(pw_cts_queued_launch(&b, e, d, owned[i].in, owned[i].out, seq,
                                       &tracker.slots[i]));
      }
    }
    if (round == 0) {
      pw_cts_tracker_wait_slots(&tracker, 0, total, "full queues");
      pw_cts_queue_expect_ok(&tracker, 0, total, "full queues");
    }
  }
  pw_cts_backend_unload(&b, e);
  /* Destroy with up to |depth| launches still queued on every device. */
  pw_cts_destroyer_t d = {.backend = b, .finished = false};
  pthread_mutex_init(&d.mutex, NULL);
  pthread_cond_init(&d.cond, NULL);
  pthread_t thread;
  PW_CTS_ASSERT_EQ(pthread_create(&thread, NULL, pw_cts_destroyer_main, &d), 0);
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += (time_t)(PW_CTS_TIMEOUT_NS / 1000000000ull);
  pthread_mutex_lock(&d.mutex);
  int rc = 0;
  while (!d.finished && rc == 0) rc = pthread_cond_timedwait(&d.cond, &d.mutex, &deadline);
  bool finished = d.finished;
  pthread_mutex_unlock(&d.mutex);
  PW_CTS_ASSERT(finished, "%s: destroy with launches queued did not return in %llu s", f->name,
            PW_CTS_TIMEOUT_NS / 1000000000ull);
  pthread_join(thread, NULL);
  for (size_t i = total; i < 2 * total; ++i) {
    uint32_t calls = atomic_load(&tracker.slots[i].calls);
    PW_CTS_ASSERT_EQ(calls, 1, "launch %zu (device %u) queued at destroy: %u dones", i,
                 owned[i].device, calls);
    int code = atomic_load(&tracker.slots[i].code);
    PW_CTS_ASSERT(code == PW_STATUS_OK || code == PW_STATUS_CANCELLED || code == PW_STATUS_ABORTED,
              "launch %zu queued at destroy completed with %s", i,
              pw_status_code_string((pw_status_code_t)code));
  }
  pthread_mutex_destroy(&d.mutex);
  pthread_cond_destroy(&d.cond);
  pw_cts_tracker_free(&tracker);
  free(owned);
}
