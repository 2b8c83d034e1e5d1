#define _POSIX_C_SOURCE 200809L
/* pw_worker_dump: what a worker that looks stuck is doing, line by line
 * (worker.h). Everything read here is read under the lock that guards it
 * or through atomics: the dump may run on any thread (pathways-worker's
 * SIGUSR1 thread) while the worker works. */
#include <stdio.h>

#include "plugin/backend_call.h"
#include "worker/worker_internal.h"

/* Launches listed at most (the rest are counted). */
#define PW_DUMP_MAX_LAUNCHES 256u

pw_status_t pw_worker_dump(pw_worker_t* w, pw_dump_line_fn_t fn, void* user) {
  if (w == NULL || fn == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_worker_dump: %s is NULL",
                          w == NULL ? "worker" : "fn");
  }
  char line[512];
  uint64_t gen = pw_atomic_load_u64_acquire(&w->session_gen);
  bool live = gen > 0 && !pw_atomic_load_u32_acquire(&w->dead);
  snprintf(line, sizeof(line),
           "worker %s: %s; %llu session%s so far, %llu lost; %llu launches accepted, "
           "%llu copies, %llu messages refused",
           w->name, live ? "in a session" : "registering (no session)",
           (unsigned long long)pw_atomic_load_u64_acquire(&w->n_sessions),
           pw_atomic_load_u64_acquire(&w->n_sessions) == 1 ? "" : "s",
           (unsigned long long)pw_atomic_load_u64_acquire(&w->n_losses),
           (unsigned long long)pw_atomic_load_u64_acquire(&w->n_launches),
           (unsigned long long)pw_atomic_load_u64_acquire(&w->n_copies),
           (unsigned long long)pw_atomic_load_u64_acquire(&w->n_refused));
  fn(user, line);
  for (uint32_t d = 0; d < w->device_count; ++d) {
    pw_device_health_t h = pw__backend_health(&w->backend, d);
    snprintf(line, sizeof(line), "  device %u: %s", d, pw_device_health_name(h));
    fn(user, line);
  }
  pw_time_t now = pw_clock_now();
  pthread_mutex_lock(&w->lock);
  uint64_t inflight = w->inflight, launches = 0;
  size_t mems = w->mems.count, exes = w->exes.count;
  for (const pw_worker_launch_t* l = w->launches; l != NULL; l = pw__worker_launch_next(l)) {
    if (launches++ < PW_DUMP_MAX_LAUNCHES) {
      char text[400];
      pw__worker_launch_describe(l, now, text, sizeof(text));
      snprintf(line, sizeof(line), "  %s", text);
      fn(user, line);
    }
  }
  pthread_mutex_unlock(&w->lock);
  if (launches > PW_DUMP_MAX_LAUNCHES) {
    snprintf(line, sizeof(line), "  ... and %llu more launches",
             (unsigned long long)(launches - PW_DUMP_MAX_LAUNCHES));
    fn(user, line);
  }
  snprintf(line, sizeof(line),
           "  %llu launch%s and %llu cop%s not answered; %zu memories, %zu executables held; "
           "%u message%s waiting in the outbox",
           (unsigned long long)launches, launches == 1 ? "" : "es",
           (unsigned long long)(inflight >= launches ? inflight - launches : 0),
           inflight - launches == 1 ? "y" : "ies", mems, exes, pw__worker_outbox_waiting(w),
           pw__worker_outbox_waiting(w) == 1 ? "" : "s");
  fn(user, line);
  return NULL;
}
