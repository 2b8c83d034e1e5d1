/* pw_event_join (all-of) and pw_event_any (any-of).
 *
 * Each combinator makes its output event and one state block holding a
 * callback node per input, then registers the nodes with
 * pw__event_add_node, which cannot fail: a combinator is either fully
 * wired or not created at all (no half-registered join whose callbacks
 * would later touch freed memory). The state holds one reference to the
 * output event until the output completes, and is freed by the last input
 * callback to run; nodes live inside it, so nothing touches a node after
 * that callback has started. Inputs are not retained: an input whose last
 * reference is dropped before it completes is completed CANCELLED
 * (pw_event_release), which the combinator observes like any other
 * error. */
#include <stdalign.h>
#include <stddef.h>

#include "base/atomics.h"
#include "event/event_internal.h"
#include "pathways/event.h"

typedef struct pw_event_join_state_t {
  pw_atomic_u64_t pending;     /* inputs whose callback has not run yet */
  pw_atomic_ptr_t first_error; /* owned; first error in completion order */
  pw_event_t* out;             /* one reference, dropped on completion */
  pw_allocator_t allocator;
  size_t size;
  pw__event_node_t nodes[];
} pw_event_join_state_t;

typedef struct pw_event_any_state_t {
  pw_atomic_u64_t remaining; /* callbacks still to run; the last frees */
  pw_atomic_u32_t decided;   /* 1 once an input has completed the output */
  pw_event_t* out;           /* one reference, dropped on completion */
  pw_allocator_t allocator;
  size_t size;
  pw__event_node_t nodes[];
} pw_event_any_state_t;

/* Validates the shared arguments and clears |*out_event|. */
static pw_status_t pw_event_check_inputs(const char* who,
                                         pw_event_t* const* events,
                                         size_t count,
                                         pw_event_t** out_event) {
  if (out_event == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: out_event is NULL",
                          who);
  }
  *out_event = NULL;
  if (count > 0 && events == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: events is NULL but count is %zu", who, count);
  }
  for (size_t i = 0; i < count; ++i) {
    if (events[i] == NULL) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%s: events[%zu] is NULL", who, i);
    }
  }
  return NULL;
}

/* Creates the output event and a state block of |header| bytes plus
 * |count| nodes, each node set to (fn, state). */
static pw_status_t pw_event_combinator_alloc(
    const char* who, pw_allocator_t allocator, size_t header, size_t align,
    size_t count, pw_event_callback_fn_t fn, pw_event_t** out_event,
    void** out_state, size_t* out_size) {
  *out_state = NULL;
  if (count > (SIZE_MAX - header) / sizeof(pw__event_node_t)) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "%s: %zu events are more than memory can track",
                          who, count);
  }
  size_t size = header + count * sizeof(pw__event_node_t);
  pw_event_t* event = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_event_create(allocator, &event), "%s", who);
  void* memory = NULL;
  pw_status_t status = pw_allocator_malloc(allocator, size, align, &memory);
  if (status != NULL) {
    pw_event_release(event); /* no callbacks yet: simply freed */
    return pw_status_annotate(status, "%s: %zu inputs", who, count);
  }
  pw__event_node_t* nodes = (pw__event_node_t*)((char*)memory + header);
  for (size_t i = 0; i < count; ++i) {
    nodes[i].next = NULL;
    nodes[i].fn = fn;
    nodes[i].user = memory;
    nodes[i].flags = 0;
  }
  *out_event = event;
  *out_state = memory;
  *out_size = size;
  return NULL;
}

static void pw_event_join_on_input(void* user, pw_status_t status) {
  pw_event_join_state_t* join = user;
  if (status != NULL) {
    void* expected = NULL;
    if (!pw_atomic_cas_ptr(&join->first_error, &expected, status)) {
      pw_status_free(status); /* a previous error wins */
    }
  }
  if (pw_atomic_fetch_sub_u64(&join->pending, 1) != 1) return;
  /* Every input has completed: this is the last touch of the state. */
  pw_status_t error = pw_atomic_exchange_ptr(&join->first_error, NULL);
  pw_event_t* out = join->out;
  pw_allocator_t allocator = join->allocator;
  pw_allocator_free(allocator, join, join->size);
  /* FAILED_PRECONDITION only if the owner completed the output itself. */
  pw_status_ignore(pw_event_fail(out, error));
  pw_event_release(out);
}

static void pw_event_any_on_input(void* user, pw_status_t status) {
  pw_event_any_state_t* any = user;
  pw_event_t* out = any->out;
  uint32_t expected = 0;
  bool first = pw_atomic_cas_u32(&any->decided, &expected, 1);
  if (pw_atomic_fetch_sub_u64(&any->remaining, 1) == 1) {
    pw_allocator_t allocator = any->allocator;
    pw_allocator_free(allocator, any, any->size);
  }
  if (!first) {
    pw_status_free(status);
    return;
  }
  pw_status_ignore(pw_event_fail(out, status));
  pw_event_release(out);
}

pw_status_t pw_event_join(pw_allocator_t allocator, pw_event_t* const* events,
                          size_t count, pw_event_t** out_event) {
  PW_RETURN_IF_ERROR(
      pw_event_check_inputs("pw_event_join", events, count, out_event));
  if (count == 0) {
    PW_RETURN_IF_ERROR_CTX(pw_event_create_completed(allocator, NULL, out_event),
                           "pw_event_join");
    return NULL;
  }
  pw_event_t* out = NULL;
  void* memory = NULL;
  size_t size = 0;
  PW_RETURN_IF_ERROR(pw_event_combinator_alloc(
      "pw_event_join", allocator, offsetof(pw_event_join_state_t, nodes),
      alignof(pw_event_join_state_t), count, pw_event_join_on_input, &out,
      &memory, &size));
  pw_event_join_state_t* join = memory;
  pw_atomic_init_u64(&join->pending, count);
  pw_atomic_init_ptr(&join->first_error, NULL);
  join->out = out;
  join->allocator = allocator;
  join->size = size;
  pw_event_retain(out); /* the join's reference */
  *out_event = out;
  /* The state outlives this loop: its last callback cannot run before the
   * last node is registered. Do not touch |join| after the loop. */
  for (size_t i = 0; i < count; ++i) {
    pw__event_add_node(events[i], &join->nodes[i]);
  }
  return NULL;
}

pw_status_t pw_event_any(pw_allocator_t allocator, pw_event_t* const* events,
                         size_t count, pw_event_t** out_event) {
  PW_RETURN_IF_ERROR(
      pw_event_check_inputs("pw_event_any", events, count, out_event));
  if (count == 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_event_any: count is 0; any-of needs at least "
                          "one event");
  }
  pw_event_t* out = NULL;
  void* memory = NULL;
  size_t size = 0;
  PW_RETURN_IF_ERROR(pw_event_combinator_alloc(
      "pw_event_any", allocator, offsetof(pw_event_any_state_t, nodes),
      alignof(pw_event_any_state_t), count, pw_event_any_on_input, &out,
      &memory, &size));
  pw_event_any_state_t* any = memory;
  pw_atomic_init_u64(&any->remaining, count);
  pw_atomic_init_u32(&any->decided, 0);
  any->out = out;
  any->allocator = allocator;
  any->size = size;
  pw_event_retain(out); /* released by the first input to complete */
  *out_event = out;
  for (size_t i = 0; i < count; ++i) {
    pw__event_add_node(events[i], &any->nodes[i]);
  }
  return NULL;
}
