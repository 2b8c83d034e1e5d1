#define _POSIX_C_SOURCE 200809L
/* Clients: handle tables, scheduling accounting, idle waits. Virtual
 * slices and the resource manager are in vslice.c. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pathways/struct_size.h"
#include "sched/device.h"
#include "sched/sched.h"

pw_status_t pw_client_create(pw_runtime_t* runtime,
                             const pw_client_options_t* options,
                             pw_client_t** out_client) {
  if (out_client == NULL || runtime == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_client_create: runtime or out_client is NULL");
  }
  *out_client = NULL;
  if (options != NULL) {
    PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(options, pw_client_options_t,
                                        PW_CLIENT_OPTIONS_SIZE_V1, "pw_client_create"));
  }
  pw_client_t* client = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(runtime->allocator, sizeof(*client), PW_CACHE_LINE,
                                         (void**)&client));
  client->runtime = runtime;
  pthread_mutex_lock(&runtime->lock);
  pw_status_t status = pw__handle_owner_take(client);
  if (status != NULL) {
    pthread_mutex_unlock(&runtime->lock);
    pw_allocator_free(runtime->allocator, client, sizeof(*client));
    return status;
  }
  runtime->client_count++;
  pthread_mutex_unlock(&runtime->lock);
  if (options && options->name && options->name[0]) {
    snprintf(client->name, sizeof(client->name), "%s", options->name);
  } else {
    snprintf(client->name, sizeof(client->name), "client%u", client->tag);
  }
  client->weight = options && options->weight ? options->weight : 1;
  client->priority = options ? options->priority : 0;
  status = pw_allocator_calloc_array(runtime->allocator, runtime->slice_count,
                                     sizeof(pw_sched_entry_t), 64,
                                     (void**)&client->sched_entries);
  if (status != NULL) {
    pthread_mutex_lock(&runtime->lock);
    pw__handle_owner_give(client);
    runtime->client_count--;
    pthread_mutex_unlock(&runtime->lock);
    pw_allocator_free(runtime->allocator, client, sizeof(*client));
    return status;
  }
  for (uint32_t s = 0; s < runtime->slice_count; ++s) {
    client->sched_entries[s].client = client;
  }
  pw__handle_table_init(&client->handles);
  for (uint32_t s = 0; s < PW_THREAD_STRIPES; ++s) {
    pw_atomic_init_u64(&client->stripes[s].counts, 0);
  }
  pw_atomic_init_u32(&client->refs, 1);
  pw_atomic_init_u32(&client->idle_waiters, 0);
  pthread_mutex_init(&client->idle_lock, NULL);
  pthread_mutex_init(&client->execs_lock, NULL);
  client->execs = NULL;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* deadlines are monotonic */
  pthread_cond_init(&client->idle_cond, &attr);
  pthread_condattr_destroy(&attr);
  pthread_mutex_lock(&runtime->lock);
  client->runtime_prev = NULL;
  client->runtime_next = runtime->clients;
  if (runtime->clients != NULL) runtime->clients->runtime_prev = client;
  runtime->clients = client;
  pthread_mutex_unlock(&runtime->lock);
  pw_atomic_fetch_add_u32(&runtime->client_structs, 1); /* pw__client_release drops it */
  *out_client = client;
  return NULL;
}

/* Executions in flight, over all stripes. */
static uint32_t pw_client_inflight(pw_client_t* client) {
  uint32_t n = 0;
  for (uint32_t s = 0; s < PW_THREAD_STRIPES; ++s) {
    n += (uint32_t)pw_atomic_load_u64_acquire(&client->stripes[s].counts);
  }
  return n;
}

/* At destroy (nothing in flight): moves every stripe's references to
 * |refs|. A bias keeps |refs| above 0 while releases that see a folded
 * stripe already drop theirs there. */
static void pw_client_fold(pw_client_t* client) {
  enum { kBias = 1u << 30 };
  pw_atomic_fetch_add_u32(&client->refs, kBias);
  for (uint32_t s = 0; s < PW_THREAD_STRIPES; ++s) {
    pw_atomic_u64_t* counts = &client->stripes[s].counts;
    uint64_t old = pw_atomic_load_u64_relaxed(counts);
    while (!pw_atomic_cas_u64(counts, &old, old | PW_CLIENT_FOLDED)) {
    }
    uint32_t refs = (uint32_t)((old & ~PW_CLIENT_FOLDED) >> 32);
    if (refs != 0) pw_atomic_fetch_add_u32(&client->refs, refs);
  }
  pw_atomic_fetch_sub_u32(&client->refs, kBias); /* the owner's keeps it above 0 */
}

/* pw_client_destroy: waits for the client's work, but for launches its
 * backends never complete only the runtime's drain deadline: those
 * still outstanding after a whole wait (the same launch, not completed)
 * are failed with DEADLINE_EXCEEDED and logged, and the wait goes on
 * for what they held up. */
pw_status_t pw_client_destroy(pw_client_t* client) {
  if (client == NULL) return NULL;
  pw_runtime_t* rt = client->runtime;
  uint64_t drain = rt->drain_deadline_ns;
  if (drain == UINT64_MAX) return pw_client_destroy_with_deadline(client, PW_INFINITE_FUTURE);
  pw_launch_snapshot_t snapshot;
  snapshot.next = 0;
  for (;;) {
    pw__dispatch_snapshot_launches(rt, &snapshot);
    pw_time_t now = pw_clock_now();
    pw_time_t until = drain > (uint64_t)(PW_INFINITE_FUTURE - now) ? PW_INFINITE_FUTURE
                                                                     : now + (pw_time_t)drain;
    pw_status_t status = pw_client_destroy_with_deadline(client, until);
    if (status == NULL || pw_status_code(status) != PW_STATUS_DEADLINE_EXCEEDED) return status;
    pw_status_free(status);
    uint32_t failed = pw__dispatch_fail_stale(rt, &snapshot, drain);
    if (failed != 0) {
      pw_log(&rt->logger, PW_LOG_ERROR, "runtime",
             "pw_client_destroy: client '%s': failed %u launch(es) its backends did not "
             "complete within the drain deadline (%.3f s); destroying it",
             client->name, failed, (double)drain / 1e9);
    }
  }
}

pw_status_t pw_client_destroy_with_deadline(pw_client_t* client, pw_time_t deadline) {
  if (client == NULL) return NULL;
  if (pw__in_callback()) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "pw_client_destroy: client '%s': called from inside a callback the "
                          "runtime is running, which the client's work may wait for; the "
                          "client is left as it is",
                          client->name);
  }
  pw_runtime_t* runtime = client->runtime;
  /* Buffers made empty and never filled can be filled no more (nothing
   * calls in meanwhile): fail their ready events first, so that work
   * waiting for them fails (CANCELLED, naming them) instead of holding
   * the wait below. Host transfers in flight count as work and finish
   * on the runtime's transfer thread. */
  pw__buffer_cancel_unfilled(client);
  /* Wait for in-flight executions (they hold references into the
   * client's objects), runs of armed graphs included, before touching
   * anything: past the deadline the client is left as it was. Nothing
   * submits meanwhile (the caller's contract), so once idle it stays so
   * and nothing below waits. */
  pw_status_t status = pw_client_wait_idle(client, deadline);
  if (status != NULL) {
    return pw_status_annotate(status, "pw_client_destroy: client left as it is, destroy it "
                                      "again later");
  }
  pw__health_forget(client); /* no topology call to it runs from here on */
  pw__dispatch_client_close(client);
  pw__handle_table_deinit(&client->handles, runtime->allocator);
  pw__client_attachment_free(client, &client->graph_memo);
  pw__client_attachment_free(client, &client->host_tasks);
  pw_allocator_free(runtime->allocator, client->sched_entries,
                    runtime->slice_count * sizeof(pw_sched_entry_t));
  client->sched_entries = NULL;
  pthread_mutex_lock(&runtime->lock);
  pw__handle_owner_give(client); /* its table is gone: no id of it resolves */
  runtime->client_count--;
  if (client->runtime_prev != NULL) {
    client->runtime_prev->runtime_next = client->runtime_next;
  } else {
    runtime->clients = client->runtime_next;
  }
  if (client->runtime_next != NULL) client->runtime_next->runtime_prev = client->runtime_prev;
  pthread_mutex_unlock(&runtime->lock);
  pw_client_fold(client);
  pw__client_release(client);
  return NULL;
}

pw_status_t pw_client_slice_stats(pw_client_t* client, uint32_t slice,
                                  pw_client_slice_stats_t* out_stats) {
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_client_slice_stats: client is NULL");
  }
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(out_stats, pw_client_slice_stats_t,
                                      PW_CLIENT_SLICE_STATS_SIZE_V1, "pw_client_slice_stats"));
  pw_client_slice_stats_t stats;
  memset(&stats, 0, sizeof(stats));
  if (slice >= client->runtime->slice_count) {
    pw_struct_fill(out_stats, &stats, sizeof(stats));
    return pw_status_make(PW_STATUS_OUT_OF_RANGE, "slice %u does not exist (%u slices)",
                          slice, client->runtime->slice_count);
  }
  pw_sched_entry_t* e = &client->sched_entries[slice];
  /* Armed runs of armed graphs count on their slots until the armed
   * graph goes, which moves them here under the same lock. */
  uint64_t private_ops = pw__dispatch_armed_ops(client, slice);
  stats.ops_completed = pw_atomic_load_u64_acquire(&e->ops_completed) + private_ops;
  stats.device_ns = pw_atomic_load_u64_acquire(&e->device_ns);
  pw_struct_fill(out_stats, &stats, sizeof(stats));
  return NULL;
}

/* Waits until no execution of |client| counted on its stripes is in
 * flight; false if |deadline| passed first. */
static bool pw_client_wait_stripes(pw_client_t* client, pw_time_t deadline) {
  bool idle = true;
  pthread_mutex_lock(&client->idle_lock);
  pw_atomic_fetch_add_u32(&client->idle_waiters, 1);
  pw_atomic_fence_seq_cst(); /* pairs with pw__client_end's */
  while (pw_client_inflight(client) != 0) {
    pw_time_t now = pw_clock_now();
    if (deadline <= now) {
      idle = false;
      break;
    }
    /* In slices of at most 2 ms: a completer may decrement without a
     * wake-up when this registered just then (pw__client_end). */
    pw_time_t until = deadline - now > 2000000 ? now + 2000000 : deadline;
    struct timespec ts = {(time_t)(until / 1000000000), (long)(until % 1000000000)};
    pthread_cond_timedwait(&client->idle_cond, &client->idle_lock, &ts);
  }
  pw_atomic_fetch_sub_u32(&client->idle_waiters, 1);
  pthread_mutex_unlock(&client->idle_lock);
  return idle;
}

pw_status_t pw_client_wait_idle(pw_client_t* client, pw_time_t deadline) {
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_client_wait_idle: client is NULL");
  }
  /* Runs of armed graphs in their armed blocks count on the blocks'
   * slots, which nothing signals (a armed run pays no locked
   * instruction for it): they are polled. */
  for (uint32_t spins = 0;; ++spins) {
    bool idle = pw_client_wait_stripes(client, deadline);
    uint64_t armed_runs = pw__dispatch_armed_inflight(client);
    if (idle && armed_runs == 0) return NULL;
    if (!idle || (deadline != PW_INFINITE_FUTURE && deadline <= pw_clock_now())) {
      return pw_status_make(PW_STATUS_DEADLINE_EXCEEDED,
                            "client '%s' still has %llu executions in flight", client->name,
                            (unsigned long long)(armed_runs + pw_client_inflight(client)));
    }
    pw__dispatch_backoff(spins);
  }
}

pw_status_t pw_client_trim(pw_client_t* client) {
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_client_trim: client is NULL");
  }
  pw__dispatch_client_trim(client);
  return NULL;
}

uint32_t pw_client_live_handles(pw_client_t* client) {
  if (client == NULL) return 0;
  uint32_t stripe = pw__handle_read_lock(&client->handles);
  uint32_t live = client->handles.live;
  pw__handle_read_unlock(&client->handles, stripe);
  return live;
}

const char* pw_client_name(const pw_client_t* client) {
  return client ? client->name : "";
}

pw_runtime_t* pw_client_runtime(const pw_client_t* client) {
  return client ? client->runtime : NULL;
}
