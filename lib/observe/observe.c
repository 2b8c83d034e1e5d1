/* The runtime's observer hub (observe.h): one per runtime, it hands each
 * reported event to the observers installed (the trace recorder, the
 * metrics) and publishes runtime->observe while there is one, so that a
 * runtime nobody observes pays one branch per report. */
#include "observe/observe.h"

#include <string.h>

void pw__observe(pw_observe_t* o, const pw_obs_event_t* e) {
  pw_observer_t* trace = pw_atomic_load_ptr_acquire(&o->trace);
  if (trace != NULL) trace->record(trace, e);
  pw_observer_t* metrics = pw_atomic_load_ptr_acquire(&o->metrics);
  if (metrics != NULL) metrics->record(metrics, e);
}

void pw__observe_note(pw_runtime_t* rt, pw_obs_event_t* e) {
  pw_observe_t* o = pw_observing(rt);
  if (o == NULL) return;
  if (e->ts_ns == 0) e->ts_ns = (uint64_t)pw_clock_now();
  pw__observe(o, e);
}

pw_status_t pw__observe_create(pw_runtime_t* rt) {
  pw_observe_t* o = NULL;
  pw_status_t status = pw_allocator_calloc(rt->allocator, sizeof(*o), 0, (void**)&o);
  if (status != NULL) return status;
  o->runtime = rt;
  if (pthread_mutex_init(&o->lock, NULL) != 0 || pthread_mutex_init(&o->control_lock, NULL) != 0) {
    pw_allocator_free(rt->allocator, o, sizeof(*o));
    return pw_status_make(PW_STATUS_INTERNAL, "runtime: pthread_mutex_init failed (observer)");
  }
  rt->observer = o;
  return NULL;
}

void pw__observe_destroy(pw_runtime_t* rt) {
  pw_observe_t* o = rt->observer;
  if (o == NULL) return;
  pw_atomic_store_ptr_release(&rt->observe, NULL);
  /* A recording trace is also the kept one. */
  pw_observer_t* owned[2] = {o->kept_trace, pw_atomic_load_ptr_relaxed(&o->metrics)};
  for (int i = 0; i < 2; ++i) {
    if (owned[i] != NULL) owned[i]->destroy(owned[i]);
  }
  while (o->retired != NULL) {
    pw_observer_t* next = o->retired->retired_next;
    o->retired->destroy(o->retired);
    o->retired = next;
  }
  pthread_mutex_destroy(&o->lock);
  pthread_mutex_destroy(&o->control_lock);
  pw_allocator_free(rt->allocator, o->client_names,
                    (PW_HANDLE_TAGS_MAX + 1) * sizeof(*o->client_names));
  pw_allocator_free(rt->allocator, o, sizeof(*o));
  rt->observer = NULL;
}

void pw__observe_install(pw_observe_t* o, pw_atomic_ptr_t* slot, pw_observer_t* observer) {
  pthread_mutex_lock(&o->lock);
  pw_atomic_store_ptr_release(slot, observer);
  bool any = pw_atomic_load_ptr_relaxed(&o->trace) != NULL ||
             pw_atomic_load_ptr_relaxed(&o->metrics) != NULL;
  pw_atomic_store_ptr_release(&o->runtime->observe, any ? o : NULL);
  pthread_mutex_unlock(&o->lock);
}

void pw__observe_retire(pw_observe_t* o, pw_observer_t* observer) {
  pthread_mutex_lock(&o->lock);
  observer->retired_next = o->retired;
  o->retired = observer;
  pthread_mutex_unlock(&o->lock);
}

void pw__observe_name_client(pw_observe_t* o, uint32_t tag, const char* name) {
  if (tag > PW_HANDLE_TAGS_MAX) return;
  pthread_mutex_lock(&o->lock);
  if (o->client_names == NULL) {
    pw_status_free(pw_allocator_calloc_array(o->runtime->allocator, PW_HANDLE_TAGS_MAX + 1,
                                             sizeof(*o->client_names), 0,
                                             (void**)&o->client_names));
  }
  if (o->client_names != NULL && o->client_names[tag][0] == '\0') {
    size_t n = 0;
    while (n < sizeof(o->client_names[tag]) - 1 && name[n] != '\0') ++n;
    memcpy(o->client_names[tag], name, n);
    o->client_names[tag][n] = '\0';
  }
  pthread_mutex_unlock(&o->lock);
}
