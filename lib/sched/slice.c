/* Slices and clients, the dispatcher's side: a physical slice's devices
 * (cursors idle "after the beginning", launch descriptors), the execution
 * its tail keeps alive and how a destroyed client gets that block's device
 * memory back, and a client's close (its armed graphs, its block cache).
 * Also the cold path's polling backoff. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <sched.h>
#include <time.h>

#include "plugin/backend_call.h"
#include "sched/dispatch_internal.h"

pw_status_t pw__dispatch_slice_init(pw_slice_t* slice) {
  pw_runtime_t* rt = slice->runtime;
  /* Units of dispatch: one per device, or lanes of one host (lanes.c). */
  uint32_t* hosts = NULL;
  PW_RETURN_IF_ERROR(pw__lanes_hosts(slice, &hosts));
  pw_status_t status = pw_allocator_calloc_array(rt->allocator, slice->lane_count,
                                                 sizeof(pw_device_t), 64,
                                                 (void**)&slice->devices);
  if (status == NULL) {
    status = pw_allocator_calloc_array(rt->allocator, slice->device_count, sizeof(uint32_t), 0,
                                       (void**)&slice->group_devices);
    if (status != NULL) {
      pw_allocator_free(rt->allocator, slice->devices, slice->lane_count * sizeof(pw_device_t));
      slice->devices = NULL;
    }
  }
  if (status != NULL) {
    pw_allocator_free(rt->allocator, hosts, slice->device_count * sizeof(uint32_t));
    return status;
  }
  for (uint32_t i = 0; i < slice->device_count; ++i) {
    slice->group_devices[i] = slice->first_device + i;
  }
  pw__lanes_layout(slice, hosts); /* each unit's devices (frees |hosts|) */
  for (uint32_t i = 0; i < slice->lane_count; ++i) {
    pw_device_t* d = &slice->devices[i];
    d->slice = slice;
    /* Idle "after the beginning": the first append wakes it. */
    pw_atomic_init_ptr(&d->cursor, pw_cursor(NULL, PW_CURSOR_IDLE));
    pw__dispatch_launch_init(d);
  }
  slice->launch = PW__BACKEND_HAS(slice->backend, launch) ? slice->backend->vtable->launch : NULL;
  slice->span_count = 1;
  slice->self = slice;
  slice->span = &slice->self;
  pw_atomic_init_u32(&slice->sched_state, 0);
  pw_atomic_init_ptr(&slice->sched_incoming, NULL);
  pw_atomic_init_u32(&slice->sched_admitted, 0);
  slice->sched_active = NULL;
  pthread_mutex_init(&slice->append_lock, NULL);
  pw_atomic_init_ptr(&slice->tail, NULL);
  pw_atomic_init_u32(&slice->tail_pin, 0);
  status = pw__queued_slice_init(slice);
  if (status != NULL) pw__dispatch_slice_deinit(slice);
  return status;
}

void pw__dispatch_slice_drop_tail(pw_slice_t* slice) {
  /* (Never pinned: no client is being destroyed concurrently.) */
  pw_op_t* tail = pw_atomic_exchange_ptr(&slice->tail, NULL);
  if (tail != NULL) pw_execution_release(tail->exec);
}

/* A slice keeps its tail's execution block alive (an IDLE cursor names the
 * tail, and the next appender writes its link) until the next op lands on
 * it, which may be never. For a destroyed client that block holds the
 * device memory of its last run's internal values on every slice: this
 * gives it back while the block itself stays as the tail. Nothing of the
 * client is in flight, so nothing reads those values; but the tail may be
 * displaced and its block freed at any moment by another client's
 * appender, so the tail is pinned first (a CAS sets PW_TAIL_PINNED): an
 * appender that exchanges a pinned tail out leaves the slice's reference
 * to whichever of it and this function finishes last (|tail_pin| counts
 * the two), and the block stays alive while it is looked at. Destroys are
 * serialised on the runtime's lock, so a slice has one pin at a time. */
void pw__dispatch_client_release_tails(pw_client_t* client) {
  pw_runtime_t* rt = client->runtime;
  pthread_mutex_lock(&rt->lock);
  for (uint32_t s = 0; s < rt->slice_count; ++s) {
    pw_slice_t* slice = &rt->slices[s];
    pw_op_t* tail = pw_atomic_load_ptr_acquire(&slice->tail);
    if (tail == NULL) continue;
    /* An appender of an earlier pin may still be about to count out. */
    for (uint32_t spins = 0; pw_atomic_load_u32_acquire(&slice->tail_pin) != 0; ++spins) {
      pw__dispatch_backoff(spins);
    }
    pw_atomic_store_u32_relaxed(&slice->tail_pin, 2);
    void* expected = tail;
    void* pinned = (void*)((uintptr_t)tail | PW_TAIL_PINNED);
    if (!pw_atomic_cas_ptr(&slice->tail, &expected, pinned)) {
      /* Displaced: its block went (or goes) back the usual way. */
      pw_atomic_store_u32_relaxed(&slice->tail_pin, 0);
      continue;
    }
    pw_execution_t* exec = tail->exec;
    if (exec->client == client) pw__block_release_memory(exec);
    expected = pinned;
    if (pw_atomic_cas_ptr(&slice->tail, &expected, tail)) {
      pw_atomic_store_u32_release(&slice->tail_pin, 0); /* nobody saw the pin */
      continue;
    }
    if (pw_atomic_fetch_sub_u32(&slice->tail_pin, 1) == 1) pw_execution_release(exec);
  }
  pthread_mutex_unlock(&rt->lock);
}

void pw__dispatch_slice_deinit(pw_slice_t* slice) {
  pw_runtime_t* rt = slice->runtime;
  pw__dispatch_slice_drop_tail(slice);
  for (uint32_t i = 0; i < slice->lane_count; ++i) {
    pw__dispatch_free_copy_tokens(&slice->devices[i], rt->allocator);
    pw__device_free_args(&slice->devices[i]);
  }
  pw__queued_slice_deinit(slice);
  pthread_mutex_destroy(&slice->append_lock);
  pw_allocator_free(rt->allocator, slice->group_devices,
                    slice->device_count * sizeof(uint32_t));
  pw_allocator_free(rt->allocator, slice->devices, slice->lane_count * sizeof(pw_device_t));
  slice->devices = NULL;
  slice->group_devices = NULL;
}

void pw__dispatch_client_close(pw_client_t* client) {
  /* Armed graphs left alive go first: their blocks join the cache, which
   * is then emptied. Nothing is in flight any more. */
  for (;;) {
    pthread_mutex_lock(&client->execs_lock);
    pw_graph_exec_obj_t* armed = client->execs;
    pthread_mutex_unlock(&client->execs_lock);
    if (armed == NULL) break;
    pw__dispatch_exec_destroy(armed);
  }
  pw_atomic_exchange_u32(&client->blocks_closed, 1);
  pw__block_cache_drain(client);
  /* The blocks of its last runs that slices hold as tails (until the next
   * op lands there) give their device memory back now. */
  pw__dispatch_client_release_tails(client);
}

void pw__dispatch_client_trim(pw_client_t* client) { pw__block_cache_drain(client); }

void pw__dispatch_backoff(uint32_t spins) {
  if (spins < 64) {
    sched_yield();
  } else {
    /* 50 us for about 10 ms, then 1 ms: a long run is not polled 20,000
     * times a second. */
    struct timespec pause = {0, spins < 64 + 200 ? 50 * 1000 : 1000 * 1000};
    nanosleep(&pause, NULL);
  }
}
