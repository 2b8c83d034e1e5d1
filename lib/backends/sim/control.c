/* The sim backend's host-facing controls: the failure schedule (explicit,
 * seeded, injected later), repairs, and the queries (stats, trace hash,
 * clock, one device's state). */
#include <string.h>

#include "backends/sim/sim_internal.h"
#include "pathways/struct_size.h"

/* splitmix64: the seeded draws of the failure schedule. */
static uint64_t pw_sim_next_random(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* Lowers |device|'s failure time to |at| (an earlier failure wins). */
static void pw_sim_fail_at(pw_sim__backend_t* b, uint32_t device, uint64_t at) {
  _Atomic uint64_t* f = &b->devices[device].fail_at;
  uint64_t current = atomic_load_explicit(f, memory_order_relaxed);
  while (at < current &&
         !atomic_compare_exchange_weak_explicit(f, &current, at, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}

static void pw_sim_schedule(pw_sim__backend_t* b, pw_sim_failure_kind_t kind, uint32_t index,
                            uint64_t at) {
  if (kind == PW_SIM_FAIL_CHIP) {
    pw_sim_fail_at(b, index, at);
    return;
  }
  for (uint32_t c = 0; c < b->per_slice; ++c) pw_sim_fail_at(b, index * b->per_slice + c, at);
}

void pw_sim__apply_failures(pw_sim__backend_t* b, const pw_sim_backend_options_t* o) {
  for (uint32_t i = 0; i < o->failure_count; ++i) {
    pw_sim_schedule(b, o->failures[i].kind, o->failures[i].index, o->failures[i].at);
  }
  uint64_t state = o->seed;
  for (uint32_t i = 0; i < o->random_chip_failures; ++i) {
    uint32_t device = (uint32_t)(pw_sim_next_random(&state) % b->device_count);
    uint64_t at = pw_sim_next_random(&state) % o->failure_window_ns;
    pw_sim_schedule(b, PW_SIM_FAIL_CHIP, device, at);
  }
  for (uint32_t i = 0; i < o->random_slice_failures; ++i) {
    uint32_t slice = (uint32_t)(pw_sim_next_random(&state) % b->slice_count);
    uint64_t at = pw_sim_next_random(&state) % o->failure_window_ns;
    pw_sim_schedule(b, PW_SIM_FAIL_SLICE, slice, at);
  }
}

static pw_status_t pw_sim_target(pw_backend_t backend, pw_sim_failure_kind_t kind,
                                 uint32_t index, const char* who, pw_sim__backend_t** out) {
  pw_sim__backend_t* b = pw_sim__from_backend(backend);
  *out = b;
  if (b == NULL) return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: not a sim backend", who);
  if (kind != PW_SIM_FAIL_CHIP && kind != PW_SIM_FAIL_SLICE) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: unknown failure kind %d", who,
                          (int)kind);
  }
  uint32_t limit = kind == PW_SIM_FAIL_CHIP ? b->device_count : b->slice_count;
  if (index >= limit) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: %s %u does not exist (there are %u)",
                          who, kind == PW_SIM_FAIL_CHIP ? "device" : "slice", index, limit);
  }
  return NULL;
}

pw_status_t pw_sim_backend_fail(pw_backend_t backend, pw_sim_failure_kind_t kind, uint32_t index,
                                pw_sim_time_t at) {
  pw_sim__backend_t* b = NULL;
  PW_RETURN_IF_ERROR(pw_sim_target(backend, kind, index, "pw_sim_backend_fail", &b));
  if (at == PW_SIM_TIME_NEVER) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_sim_backend_fail: PW_SIM_TIME_NEVER is no failure time (use "
                          "pw_sim_backend_repair)");
  }
  uint32_t first = kind == PW_SIM_FAIL_CHIP ? index : index * b->per_slice;
  uint32_t count = kind == PW_SIM_FAIL_CHIP ? 1 : b->per_slice;
  for (uint32_t device = first; device < first + count; ++device) {
    if (at != PW_SIM_TIME_NOW) {
      pw_sim_fail_at(b, device, at);
      continue;
    }
    /* At once: from the end of the last op delivered on it, so nothing not
     * yet delivered, and nothing later, completes. */
    pw_sim__device_t* d = &b->devices[device];
    pw_sim__device_lock(d);
    uint64_t when = d->done_until;
    pw_sim__device_unlock(d);
    pw_sim_fail_at(b, device, when);
    uint64_t fail_at = atomic_load_explicit(&d->fail_at, memory_order_relaxed);
    pw_sim__groups_device_failed(b, device, fail_at);
    if (b->ordered) pw_sim__stream_device_failed(b, device, fail_at);
  }
  return NULL;
}

pw_status_t pw_sim_backend_repair(pw_backend_t backend, pw_sim_failure_kind_t kind,
                                  uint32_t index) {
  pw_sim__backend_t* b = NULL;
  PW_RETURN_IF_ERROR(pw_sim_target(backend, kind, index, "pw_sim_backend_repair", &b));
  uint32_t first = kind == PW_SIM_FAIL_CHIP ? index : index * b->per_slice;
  uint32_t count = kind == PW_SIM_FAIL_CHIP ? 1 : b->per_slice;
  for (uint32_t device = first; device < first + count; ++device) {
    atomic_store_explicit(&b->devices[device].fail_at, PW_SIM_TIME_NEVER, memory_order_relaxed);
  }
  return NULL;
}

/*---------------------------------------------------------------------------
 * Queries
 *-------------------------------------------------------------------------*/

pw_status_t pw_sim_backend_stats(pw_backend_t backend, pw_sim_stats_t* out_stats) {
  pw_sim__backend_t* b = pw_sim__from_backend(backend);
  if (b == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_sim_backend_stats: not a sim backend");
  }
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(out_stats, pw_sim_stats_t, PW_SIM_STATS_SIZE_V1,
                                      "pw_sim_backend_stats"));
  pw_sim_stats_t stats;
  memset(&stats, 0, sizeof(stats));
  uint64_t hash = 0x27D4EB2F165667C5ULL;
  uint64_t events = 0;
  uint64_t span_start = UINT64_MAX;
  for (uint32_t i = 0; i < b->device_count; ++i) {
    pw_sim__device_t* d = &b->devices[i];
    pw_sim__device_lock(d);
    uint64_t n = d->events;
    uint64_t chain = d->chain;
    stats.busy_ns += d->busy_ns;
    if (d->first_start < span_start) span_start = d->first_start;
    if (d->last_end > stats.span_end) stats.span_end = d->last_end;
    pw_sim__device_unlock(d);
    if (n == 0) continue;
    events += n;
    hash = pw_sim__round(pw_sim__round(pw_sim__round(hash, i), n), chain);
  }
  hash ^= hash >> 33;
  hash *= 0xC2B2AE3D27D4EB4FULL;
  hash ^= hash >> 29;
  hash *= 0x165667B19E3779F9ULL;
  hash ^= hash >> 32;
  stats.span_start = span_start == UINT64_MAX ? 0 : span_start;
  stats.clock = pw_sim__clock(b);
  stats.trace_hash = hash;
  stats.events = events;
  stats.failed = atomic_load(&b->failed_events);
  stats.transfers = atomic_load(&b->transfer_events);
  stats.queued = pw_sim__queue_length(b);
  stats.host_launches = atomic_load(&b->host_launches);
  pw_struct_fill(out_stats, &stats, sizeof(stats));
  return NULL;
}

uint64_t pw_sim_backend_trace_hash(pw_backend_t backend) {
  pw_sim_stats_t stats = {.struct_size = sizeof(stats)};
  pw_status_t status = pw_sim_backend_stats(backend, &stats);
  if (status != NULL) {
    pw_status_free(status);
    return 0;
  }
  return stats.trace_hash;
}

pw_sim_time_t pw_sim_backend_clock(pw_backend_t backend) {
  pw_sim__backend_t* b = pw_sim__from_backend(backend);
  return b != NULL ? pw_sim__clock(b) : 0;
}

pw_status_t pw_sim_backend_device_state(pw_backend_t backend, uint32_t device,
                                        pw_sim_device_state_t* out_state) {
  pw_sim__backend_t* b = pw_sim__from_backend(backend);
  if (b == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_sim_backend_device_state: not a sim backend");
  }
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(out_state, pw_sim_device_state_t,
                                      PW_SIM_DEVICE_STATE_SIZE_V1,
                                      "pw_sim_backend_device_state"));
  pw_sim_device_state_t state;
  memset(&state, 0, sizeof(state));
  pw_struct_fill(out_state, &state, sizeof(state));
  if (device >= b->device_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_sim_backend_device_state: device %u does not exist (the backend "
                          "has %u)",
                          device, b->device_count);
  }
  pw_sim__device_t* d = &b->devices[device];
  pw_sim__device_lock(d);
  state.busy_until = d->busy_until;
  state.events = d->events;
  state.busy_ns = d->busy_ns;
  state.first_start = d->first_start == UINT64_MAX ? 0 : d->first_start;
  state.last_end = d->last_end;
  pw_sim__device_unlock(d);
  pw_sim__stream_state(b, device, &state.outstanding, &state.waiting_gang);
  state.slice = device / b->per_slice;
  state.chip = device % b->per_slice;
  state.fail_at = atomic_load_explicit(&d->fail_at, memory_order_relaxed);
  state.health = backend.vtable->health(b, device);
  pw_struct_fill(out_state, &state, sizeof(state));
  return NULL;
}
