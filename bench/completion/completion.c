/* Completion tracking: dependency nodes and the observers' completion
 * queue. The design is described at the top of completion.h. */
#define _POSIX_C_SOURCE 200809L

#include "completion/completion.h"

#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Failure messages. A failed node's status message names, after an optional
 * first prefix, the root cause; |cause_offset| is where that part starts:
 *   root cause (its own op failed, or a non-node input did):
 *     "<message>"                                   cause_offset = ROOT
 *   dependent of a root cause R:
 *     "input node R failed: <message>"              cause_offset = 0
 *   dependent of a dependent D:
 *     "input node D failed: input node R failed: <message>"
 *                                                   cause_offset = strlen of
 *                                                   the first prefix
 * A dependent of X appends X's cause part (the whole message when X is a
 * root cause) to "input node X failed: ", so messages stay two levels deep
 * on arbitrarily long chains instead of growing by one prefix per hop. */
#define PW_COMPLETION_ROOT_CAUSE UINT32_MAX

/* ------------------------------------------------------------------------
 * Dependency nodes
 * ------------------------------------------------------------------------ */

void pw_completion_node_init(pw_completion_node_t* node, uint32_t id,
                             const char* name, uint32_t input_count,
                             pw_completion_node_t* const* successors,
                             uint32_t successor_count, void* user) {
  pw_atomic_init_u32(&node->pending, input_count);
  pw_atomic_init_u32(&node->parts, 1);
  pw_atomic_init_ptr(&node->error, NULL);
  pw_atomic_init_u32(&node->state, input_count == 0 ? PW_COMPLETION_READY
                                                    : PW_COMPLETION_WAITING);
  node->cause_offset = PW_COMPLETION_ROOT_CAUSE;
  node->next = NULL;
  node->status = NULL;
  node->successors = successors;
  node->successor_count = successor_count;
  node->id = id;
  node->name = name;
  node->user = user;
}

void pw_completion_node_set_parts(pw_completion_node_t* node, uint32_t parts) {
  assert(parts >= 1);
  pw_atomic_store_u32_relaxed(&node->parts, parts == 0 ? 1 : parts);
}

void pw_completion_node_deinit(pw_completion_node_t* node) {
  pw_status_free(node->status);
  node->status = NULL;
  pw_status_free((pw_status_t)pw_atomic_exchange_ptr(&node->error, NULL));
}

pw_status_t pw_completion_node_take_status(pw_completion_node_t* node) {
  pw_status_t status = node->status;
  node->status = NULL;
  return status;
}

/* Records that |failed| (resolved FAILED, held by this thread) is an input
 * of |node|. Only the first failure is kept; later ones cost a load. The
 * winner writes |cause_offset| before its decrement of |pending|, which
 * the thread that later makes |node| due acquires. */
static void pw_completion_note_failed_input(pw_completion_node_t* node,
                                            const pw_completion_node_t* failed) {
  if (pw_atomic_load_ptr_relaxed(&node->error) != NULL) return;
  const char* message = pw_status_message(failed->status);
  const char* cause = message;
  bool failed_is_root = failed->cause_offset == PW_COMPLETION_ROOT_CAUSE;
  if (!failed_is_root && failed->cause_offset <= strlen(message)) {
    cause = message + failed->cause_offset;
  }
  char prefix[256];
  int n = failed->name != NULL
              ? snprintf(prefix, sizeof(prefix),
                         "input node %" PRIu32 " (\"%s\") failed: ",
                         failed->id, failed->name)
              : snprintf(prefix, sizeof(prefix),
                         "input node %" PRIu32 " failed: ", failed->id);
  size_t prefix_len = n < 0 ? 0 : (size_t)n;
  if (prefix_len >= sizeof(prefix)) prefix_len = sizeof(prefix) - 1;
  pw_status_t status = pw_status_make(pw_status_code(failed->status), "%s%s",
                                      n < 0 ? "" : prefix, cause);
  uint32_t offset = failed_is_root ? 0 : (uint32_t)prefix_len;
  /* Out of memory, the status is code-only: its message has no parts. */
  if (strlen(pw_status_message(status)) < prefix_len) offset = 0;
  void* expected = NULL;
  if (pw_atomic_cas_ptr(&node->error, &expected, status)) {
    node->cause_offset = offset;
  } else {
    pw_status_free(status);
  }
}

/* |node|'s last input resolved and this thread made it so: it is ours.
 * Appends it to |ready|, READY, or still WAITING with its status set when
 * an input failed: a "failing" node, which the cascade resolves before the
 * completing call returns. Returns true for a failing node. */
static bool pw_completion_make_due(pw_completion_node_t* node,
                                   pw_completion_list_t* ready) {
  pw_status_t error = (pw_status_t)pw_atomic_load_ptr_relaxed(&node->error);
  bool failing = error != NULL;
  if (PW_UNLIKELY(failing)) {
    pw_atomic_store_ptr_relaxed(&node->error, NULL);
    node->status = error;
  } else {
    pw_atomic_store_u32_relaxed(&node->state, PW_COMPLETION_READY);
  }
  pw_completion_list_push(ready, node);
  return failing;
}

/* One decrement per successor; a failed |node| first records itself as
 * each successor's failed input. Returns true if a failing node was
 * appended to |ready|. */
static bool pw_completion_fan_out(pw_completion_node_t* node,
                                  pw_completion_list_t* ready) {
  bool failed = node->status != NULL;
  bool failing = false;
  pw_completion_node_t* const* successors = node->successors;
  uint32_t count = node->successor_count;
  for (uint32_t i = 0; i < count; ++i) {
    pw_completion_node_t* successor = successors[i];
    if (PW_UNLIKELY(failed)) pw_completion_note_failed_input(successor, node);
    /* After this decrement |successor| may belong to another thread,
     * unless it was the last. */
    if (pw_atomic_fetch_sub_u32(&successor->pending, 1) == 1) {
      failing |= pw_completion_make_due(successor, ready);
    }
  }
  return failing;
}

/* Resolves |node| (held by this thread) with |status| (consumed). The
 * state is published last: a poller that sees it may free the node. */
static bool pw_completion_resolve(pw_completion_node_t* node,
                                  pw_status_t status,
                                  pw_completion_list_t* ready) {
  node->status = status;
  node->cause_offset = PW_COMPLETION_ROOT_CAUSE;
  bool failing = pw_completion_fan_out(node, ready);
  pw_atomic_store_u32_release(&node->state, status == NULL
                                                ? PW_COMPLETION_OK
                                                : PW_COMPLETION_FAILED);
  return failing;
}

/* Resolves the failing nodes appended to |ready| after |mark| (NULL: from
 * the head), and those their fan-out appends: the list is the work queue,
 * so the cascade is iterative however deep. A node in a ready list is
 * WAITING only while it is failing. */
static void pw_completion_cascade(pw_completion_list_t* ready,
                                  pw_completion_node_t* mark) {
  pw_completion_node_t* node = mark != NULL ? mark->next : ready->head;
  while (node != NULL) {
    if (pw_atomic_load_u32_relaxed(&node->state) == PW_COMPLETION_WAITING) {
      pw_completion_fan_out(node, ready);
      pw_completion_node_t* next = node->next; /* set by the fan-out */
      pw_atomic_store_u32_release(&node->state, PW_COMPLETION_FAILED);
      node = next;
    } else {
      node = node->next;
    }
  }
}

/* Records one finished part of |node| with |*status| (consumed). Returns
 * true when it was the last part, with the node's final status (the first
 * error of any part) in |*status|. */
static bool pw_completion_last_part(pw_completion_node_t* node,
                                    pw_status_t* status) {
  if (pw_atomic_load_u32_acquire(&node->parts) == 1) {
    /* The only part left, the common single-part case: no RMW. The acquire
     * sees the error of any earlier part. */
    if (PW_UNLIKELY(pw_atomic_load_ptr_relaxed(&node->error) != NULL)) {
      pw_status_free(*status);
      *status = (pw_status_t)pw_atomic_exchange_ptr(&node->error, NULL);
    }
    return true;
  }
  if (*status != NULL) {
    void* expected = NULL;
    if (!pw_atomic_cas_ptr(&node->error, &expected, *status)) {
      pw_status_free(*status);
    }
    *status = NULL;
  }
  if (pw_atomic_fetch_sub_u32(&node->parts, 1) != 1) return false;
  *status = (pw_status_t)pw_atomic_exchange_ptr(&node->error, NULL);
  return true;
}

bool pw_completion_complete(pw_completion_node_t* node, pw_status_t status,
                            pw_completion_list_t* ready) {
  assert(pw_atomic_load_u32_relaxed(&node->state) == PW_COMPLETION_READY &&
         "completing a node that is not READY (not launched, or resolved)");
  if (!pw_completion_last_part(node, &status)) return false;
  pw_completion_node_t* mark = ready->tail;
  if (PW_UNLIKELY(pw_completion_resolve(node, status, ready))) {
    pw_completion_cascade(ready, mark);
  }
  return true;
}

size_t pw_completion_complete_batch(pw_completion_node_t* const* nodes,
                                    const pw_status_t* statuses, size_t count,
                                    pw_completion_list_t* ready) {
  pw_completion_node_t* mark = ready->tail;
  bool failing = false;
  size_t resolved = 0;
  for (size_t i = 0; i < count; ++i) {
    pw_completion_node_t* node = nodes[i];
    pw_status_t status = statuses != NULL ? statuses[i] : NULL;
    assert(pw_atomic_load_u32_relaxed(&node->state) == PW_COMPLETION_READY &&
           "completing a node that is not READY (not launched, or resolved)");
    if (pw_completion_last_part(node, &status)) {
      failing |= pw_completion_resolve(node, status, ready);
      ++resolved;
    }
  }
  if (PW_UNLIKELY(failing)) pw_completion_cascade(ready, mark);
  return resolved;
}

void pw_completion_signal_input(pw_completion_node_t* node,
                                pw_status_t input_status,
                                pw_completion_list_t* ready) {
  assert(pw_atomic_load_u32_relaxed(&node->state) == PW_COMPLETION_WAITING &&
         "signalling an input of a node that has no input left");
  if (input_status != NULL) {
    void* expected = NULL;
    if (pw_atomic_cas_ptr(&node->error, &expected, input_status)) {
      node->cause_offset = PW_COMPLETION_ROOT_CAUSE;
    } else {
      pw_status_free(input_status);
    }
  }
  if (pw_atomic_fetch_sub_u32(&node->pending, 1) != 1) return;
  pw_completion_node_t* mark = ready->tail;
  if (pw_completion_make_due(node, ready)) pw_completion_cascade(ready, mark);
}

size_t pw_completion_drain(pw_completion_list_t* ready,
                           pw_completion_launch_fn_t launch,
                           pw_completion_failed_fn_t on_failed, void* user) {
  size_t popped = 0;
  pw_completion_node_t* node;
  while ((node = pw_completion_list_pop(ready)) != NULL) {
    ++popped;
    if (pw_atomic_load_u32_relaxed(&node->state) == PW_COMPLETION_READY) {
      launch(user, node, ready);
    } else {
      assert(pw_atomic_load_u32_relaxed(&node->state) == PW_COMPLETION_FAILED);
      if (on_failed != NULL) on_failed(user, node);
    }
  }
  return popped;
}

/* ------------------------------------------------------------------------
 * Completion queue
 * ------------------------------------------------------------------------ */

struct pw_completion_queue_t {
  pw_allocator_t allocator;
  size_t alloc_size;
  size_t producer_count;
  pw_completion_producer_t* producers;
  size_t next_producer; /* the observer's round-robin cursor */
  pthread_mutex_t mutex;
  pthread_cond_t cond; /* on CLOCK_MONOTONIC, as pw_clock_now */
  bool woken;          /* under |mutex| */
  /* Written by the observer around its sleeps, read by flushing producers:
   * its own line so posts never touch it. */
  _Alignas(PW_CACHE_LINE) pw_atomic_u32_t sleeping;
};

static pw_status_t pw_completion_queue_init_sync(pw_completion_queue_t* q,
                                                 const char* name) {
  pthread_condattr_t attr;
  int rc = pthread_condattr_init(&attr);
  if (rc == 0) {
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0) rc = pthread_cond_init(&q->cond, &attr);
    pthread_condattr_destroy(&attr);
  }
  if (rc != 0) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "completion queue \"%s\": pthread_cond_init: %s",
                          name, strerror(rc));
  }
  rc = pthread_mutex_init(&q->mutex, NULL);
  if (rc != 0) {
    pthread_cond_destroy(&q->cond);
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "completion queue \"%s\": pthread_mutex_init: %s",
                          name, strerror(rc));
  }
  return NULL;
}

pw_status_t pw_completion_queue_create(pw_allocator_t allocator,
                                       const char* name,
                                       size_t producer_count, size_t capacity,
                                       pw_completion_queue_t** out_queue) {
  if (out_queue == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_completion_queue_create: out_queue is NULL");
  }
  *out_queue = NULL;
  if (name == NULL) name = "";
  const size_t max_producers = 1u << 16;
  if (producer_count == 0 || producer_count > max_producers) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "completion queue \"%s\": producer count %zu is "
                          "outside [1, %zu]",
                          name, producer_count, max_producers);
  }
  size_t producers_offset =
      (sizeof(pw_completion_queue_t) + PW_CACHE_LINE - 1) & ~(size_t)(PW_CACHE_LINE - 1);
  size_t total = producers_offset + producer_count * sizeof(pw_completion_producer_t);
  void* block = NULL;
  PW_RETURN_IF_ERROR_CTX(
      pw_allocator_calloc(allocator, total, PW_CACHE_LINE, &block),
      "creating completion queue \"%s\" with %zu producers", name,
      producer_count);
  pw_completion_queue_t* q = (pw_completion_queue_t*)block;
  q->allocator = allocator;
  q->alloc_size = total;
  q->producer_count = producer_count;
  q->producers = (pw_completion_producer_t*)((char*)block + producers_offset);
  pw_atomic_init_u32(&q->sleeping, 0);

  pw_status_t status = pw_completion_queue_init_sync(q, name);
  if (status != NULL) {
    pw_allocator_free(allocator, block, total);
    return status;
  }
  for (size_t i = 0; i < producer_count && status == NULL; ++i) {
    char ring_name[192];
    snprintf(ring_name, sizeof(ring_name), "%s/producer %zu", name, i);
    q->producers[i].queue = q;
    status = pw_ring_create(allocator, PW_RING_SPSC, ring_name, capacity,
                            &q->producers[i].ring);
  }
  if (status != NULL) {
    pw_completion_queue_destroy(q); /* destroys the rings made so far */
    return pw_status_annotate(status, "creating completion queue \"%s\"",
                              name);
  }
  *out_queue = q;
  return NULL;
}

void pw_completion_queue_destroy(pw_completion_queue_t* queue) {
  if (queue == NULL) return;
  for (size_t i = 0; i < queue->producer_count; ++i) {
    pw_ring_destroy(queue->producers[i].ring);
  }
  pthread_mutex_destroy(&queue->mutex);
  pthread_cond_destroy(&queue->cond);
  pw_allocator_free(queue->allocator, queue, queue->alloc_size);
}

pw_completion_producer_t* pw_completion_queue_producer(
    pw_completion_queue_t* queue, size_t index) {
  assert(index < queue->producer_count);
  return &queue->producers[index];
}

void pw_completion_producer_flush(pw_completion_producer_t* producer) {
  pw_completion_queue_t* q = producer->queue;
  /* Dekker with pw_completion_queue_wait: our index store, fence, load of
   * |sleeping| against its store of |sleeping|, fence, load of the index.
   * At least one side sees the other's store. */
  pw_atomic_fence_seq_cst();
  if (pw_atomic_load_u32_relaxed(&q->sleeping) == 0) return;
  pthread_mutex_lock(&q->mutex);
  pthread_cond_signal(&q->cond);
  pthread_mutex_unlock(&q->mutex);
}

size_t pw_completion_queue_drain(pw_completion_queue_t* queue,
                                 void** out_records, size_t max) {
  size_t count = queue->producer_count;
  size_t start = queue->next_producer;
  size_t n = 0;
  for (size_t i = 0; i < count && n < max; ++i) {
    size_t index = start + i;
    if (index >= count) index -= count;
    n += pw_ring_pop_batch_spsc(queue->producers[index].ring, out_records + n,
                                max - n);
  }
  queue->next_producer = start + 1 == count ? 0 : start + 1;
  return n;
}

static bool pw_completion_queue_has_records(pw_completion_queue_t* queue) {
  for (size_t i = 0; i < queue->producer_count; ++i) {
    if (pw_ring_size_approx(queue->producers[i].ring) != 0) return true;
  }
  return false;
}

bool pw_completion_queue_wait(pw_completion_queue_t* queue,
                              pw_time_t deadline) {
  if (pw_completion_queue_has_records(queue)) return true;
  pthread_mutex_lock(&queue->mutex);
  pw_atomic_exchange_u32(&queue->sleeping, 1);
  pw_atomic_fence_seq_cst();
  bool result = false;
  for (;;) {
    if (queue->woken) {
      queue->woken = false;
      result = true;
      break;
    }
    if (pw_completion_queue_has_records(queue)) {
      result = true;
      break;
    }
    if (deadline == PW_INFINITE_FUTURE) {
      pthread_cond_wait(&queue->cond, &queue->mutex);
      continue;
    }
    if (deadline == PW_IMMEDIATE_PAST || pw_clock_now() >= deadline) break;
    struct timespec ts;
    ts.tv_sec = (time_t)(deadline / 1000000000);
    ts.tv_nsec = (long)(deadline % 1000000000);
    pthread_cond_timedwait(&queue->cond, &queue->mutex, &ts);
  }
  pw_atomic_store_u32_relaxed(&queue->sleeping, 0);
  pthread_mutex_unlock(&queue->mutex);
  return result;
}

void pw_completion_queue_wake(pw_completion_queue_t* queue) {
  pthread_mutex_lock(&queue->mutex);
  queue->woken = true;
  pthread_cond_signal(&queue->cond);
  pthread_mutex_unlock(&queue->mutex);
}
