/* The metrics observer (include/pathways/metrics.h): its counters and
 * histograms, kept in per-thread stripes (one per pw__thread_stripe(),
 * each a run of cache lines of its own) with atomic adds from any
 * thread, never a lock; enable and disable (installing it in the
 * runtime's observer hub, retiring it); and the read, which sums the
 * stripes into a snapshot and hands every series to a visitor, family by
 * family (the family table below; docs/observability.md lists them). The
 * text exposition is prometheus.c, the HTTP endpoint http.c. */
#include "observe/metrics.h"

#include <stdio.h>
#include <string.h>
#include "core/handles.h"
#include "pathways/cache.h"
#include "pathways/struct_size.h"

/* 1 us .. 10 s, 1-2.5-5 per decade. */
const uint64_t pw__metrics_bucket_ns[PW_METRICS_BUCKETS] = {
    1000ull,       2500ull,       5000ull,       10000ull,      25000ull,
    50000ull,      100000ull,     250000ull,     500000ull,     1000000ull,
    2500000ull,    5000000ull,    10000000ull,   25000000ull,   50000000ull,
    100000000ull,  250000000ull,  500000000ull,  1000000000ull, 2500000000ull,
    5000000000ull, 10000000000ull};

/* One histogram of a stripe: counts per bucket (not cumulative; the last
 * is above every bound) and the sum of observations. */
typedef struct pw_metrics_hist_t {
  pw_atomic_u64_t buckets[PW_METRICS_BUCKETS + 1];
  pw_atomic_u64_t sum_ns;
} pw_metrics_hist_t;

typedef struct pw_metrics_head_t {
  pw_atomic_u64_t global[PW_MG_COUNT];
  pw_metrics_hist_t hist[PW_MH_COUNT];
} pw_metrics_head_t;

typedef struct pw_metrics_slice_row_t {
  pw_atomic_u64_t v[PW_MS_COUNT];
} pw_metrics_slice_row_t;

typedef struct pw_metrics_client_row_t {
  pw_atomic_u64_t v[PW_MC_COUNT];
} pw_metrics_client_row_t;

static size_t pw_metrics_round_line(size_t n) {
  return (n + PW_CACHE_LINE - 1) / PW_CACHE_LINE * PW_CACHE_LINE;
}

static size_t pw_metrics_slices_offset(void) {
  return pw_metrics_round_line(sizeof(pw_metrics_head_t));
}

static size_t pw_metrics_clients_offset(const pw_metrics_t* m) {
  return pw_metrics_slices_offset() + m->slice_count * sizeof(pw_metrics_slice_row_t);
}

static uint8_t* pw_metrics_stripe(pw_metrics_t* m, uint32_t stripe) {
  return m->stripes + (size_t)stripe * m->stride;
}

static void pw_metrics_add(pw_atomic_u64_t* a, uint64_t x) {
  pw_atomic_fetch_add_u64(a, x);
}

static void pw_metrics_observe(pw_metrics_head_t* head, uint32_t which, uint64_t ns) {
  uint32_t lo = 0, hi = PW_METRICS_BUCKETS; /* first bound >= ns */
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (pw__metrics_bucket_ns[mid] < ns) lo = mid + 1; else hi = mid;
  }
  pw_metrics_add(&head->hist[which].buckets[lo], 1);
  pw_metrics_add(&head->hist[which].sum_ns, ns);
}

static uint64_t pw_metrics_since(const pw_obs_event_t* e) {
  return e->since_ns != 0 && e->ts_ns > e->since_ns ? e->ts_ns - e->since_ns : 0;
}

/* A latency, when the event knows its start: |since_ns| is 0 for work
 * begun before metrics were on, which no histogram counts. */
static void pw_metrics_observe_since(pw_metrics_head_t* head, uint32_t which,
                                     const pw_obs_event_t* e) {
  if (e->since_ns != 0) pw_metrics_observe(head, which, pw_metrics_since(e));
}

/* The hot path: one stripe, a few atomic adds (no ordering is needed:
 * base/atomics.h has no relaxed add, and on x86 every add is a locked
 * one anyway), no lock. */
static void pw_metrics_record(pw_observer_t* self, const pw_obs_event_t* e) {
  pw_metrics_t* m = (pw_metrics_t*)self;
  uint8_t* stripe = pw_metrics_stripe(m, pw__thread_stripe());
  pw_metrics_head_t* head = (pw_metrics_head_t*)stripe;
  pw_metrics_slice_row_t* slice =
      e->slice < m->slice_count
          ? (pw_metrics_slice_row_t*)(stripe + pw_metrics_slices_offset()) + e->slice
          : NULL;
  pw_metrics_client_row_t* client =
      e->client < PW_METRICS_CLIENTS
          ? (pw_metrics_client_row_t*)(stripe + pw_metrics_clients_offset(m)) + e->client
          : NULL;
  bool failed = (e->flags & PW_OBS_FAILED) != 0;
  switch (e->kind) {
    case PW_OBS_SUBMIT:
      pw_metrics_add(&head->global[PW_MG_EXECS_SUBMITTED], 1);
      if (client) pw_metrics_add(&client->v[PW_MC_OPS_SUBMITTED], e->count);
      break;
    case PW_OBS_ADMIT:
      if (slice) pw_metrics_add(&slice->v[PW_MS_ADMITTED], 1);
      if (client) pw_metrics_add(&client->v[PW_MC_ADMITTED], 1);
      break;
    case PW_OBS_LAUNCH:
      if (slice) {
        pw_metrics_add(&slice->v[PW_MS_UNIT_LAUNCHES], 1);
        pw_metrics_add(&slice->v[PW_MS_DEVICES_LAUNCHED], e->count);
        if (e->device == 0) pw_metrics_add(&slice->v[PW_MS_OPS_LAUNCHED], 1);
      }
      if (client && e->device == 0) pw_metrics_add(&client->v[PW_MC_OPS_LAUNCHED], 1);
      break;
    case PW_OBS_LAUNCH_DONE: {
      uint64_t span = pw_metrics_since(e);
      uint64_t busy = e->end_ns > e->start_ns ? e->end_ns - e->start_ns : span;
      if (slice) {
        pw_metrics_add(&slice->v[PW_MS_LAUNCHES_DONE], 1);
        if (failed) pw_metrics_add(&slice->v[PW_MS_LAUNCHES_FAILED], 1);
        pw_metrics_add(&slice->v[PW_MS_BUSY_NS], busy * (e->count != 0 ? e->count : 1));
      }
      pw_metrics_observe_since(head, PW_MH_LAUNCH_LATENCY, e);
      break;
    }
    case PW_OBS_COPY_DONE:
      if (slice) {
        pw_metrics_add(&slice->v[PW_MS_TRANSFERS], 1);
        if (failed) pw_metrics_add(&slice->v[PW_MS_TRANSFERS_FAILED], 1);
        pw_metrics_add(&slice->v[PW_MS_TRANSFER_BYTES], e->bytes);
      }
      pw_metrics_observe_since(head, PW_MH_TRANSFER, e);
      break;
    case PW_OBS_OP_DONE:
      if (slice) pw_metrics_add(&slice->v[failed ? PW_MS_OPS_FAILED : PW_MS_OPS_COMPLETED], 1);
      if (client) {
        pw_metrics_add(&client->v[failed ? PW_MC_OPS_FAILED : PW_MC_OPS_COMPLETED], 1);
      }
      pw_metrics_observe_since(head, PW_MH_OP_LATENCY, e);
      break;
    case PW_OBS_EXEC_DONE:
      pw_metrics_add(&head->global[failed ? PW_MG_EXECS_FAILED : PW_MG_EXECS_COMPLETED], 1);
      break;
    case PW_OBS_DEADLINE:
      if (slice) pw_metrics_add(&slice->v[PW_MS_DEADLINES], 1);
      break;
    case PW_OBS_SLICE_LOST:
    case PW_OBS_SLICE_BACK:
      if (slice) pw_metrics_add(&slice->v[e->kind == PW_OBS_SLICE_LOST ? PW_MS_LOSSES : PW_MS_RETURNS], 1);
      break;
    case PW_OBS_SNAPSHOT:
    case PW_OBS_SNAPSHOT_PERSIST: {
      bool copy = e->kind == PW_OBS_SNAPSHOT;
      if (failed) {
        pw_metrics_add(&head->global[copy ? PW_MG_SNAPSHOTS_FAILED : PW_MG_PERSISTS_FAILED], 1);
        break;
      }
      pw_metrics_add(&head->global[copy ? PW_MG_SNAPSHOTS : PW_MG_PERSISTS], 1);
      pw_metrics_add(&head->global[copy ? PW_MG_SNAPSHOT_BYTES : PW_MG_STORED_BYTES], e->bytes);
      pw_metrics_observe_since(head, copy ? PW_MH_SNAPSHOT : PW_MH_PERSIST, e);
      break;
    }
    case PW_OBS_ELASTIC:
      if (e->flags & PW_OBS_GROWN) {
        pw_metrics_add(&head->global[PW_MG_GROWTHS], 1);
      } else {
        pw_metrics_add(&head->global[PW_MG_RECOVERIES], 1);
        pw_metrics_observe_since(head, PW_MH_RECOVERY, e);
      }
      break;
    default: /* COPY (counted at COPY_DONE), FLOW: nothing to count */
      break;
  }
}

static void pw_metrics_destroy(pw_observer_t* self) {
  pw_metrics_t* m = (pw_metrics_t*)self;
  pw__metrics_servers_stop_all(m);
  pthread_mutex_destroy(&m->servers_lock);
  pw_allocator_free(m->allocator, m->stripes, m->stripes_size);
  pw_allocator_free(m->allocator, m, sizeof(*m));
}

static pw_status_t pw_metrics_create(pw_runtime_t* rt, pw_metrics_t** out) {
  pw_metrics_t* m = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(rt->allocator, sizeof(*m), 0, (void**)&m));
  m->base.record = pw_metrics_record;
  m->base.destroy = pw_metrics_destroy;
  m->runtime = rt;
  m->allocator = rt->allocator;
  m->slice_count = rt->slice_count;
  m->stride = pw_metrics_round_line(pw_metrics_clients_offset(m) +
                                    PW_METRICS_CLIENTS * sizeof(pw_metrics_client_row_t));
  m->stripes_size = m->stride * PW_THREAD_STRIPES;
  pw_status_t status = pw_allocator_calloc(m->allocator, m->stripes_size, PW_CACHE_LINE,
                                           (void**)&m->stripes);
  if (status == NULL && pthread_mutex_init(&m->servers_lock, NULL) != 0) {
    pw_allocator_free(m->allocator, m->stripes, m->stripes_size);
    status = pw_status_make(PW_STATUS_INTERNAL,
                            "pw_runtime_metrics_enable: pthread_mutex_init failed");
  }
  if (status != NULL) {
    pw_allocator_free(m->allocator, m, sizeof(*m));
    return status;
  }
  *out = m;
  return NULL;
}

void pw_metrics_options_init(pw_metrics_options_t* options) {
  if (options == NULL) return;
  memset(options, 0, sizeof(*options));
  options->struct_size = sizeof(*options);
}

pw_metrics_t* pw__metrics_current(pw_runtime_t* rt) {
  return (pw_metrics_t*)pw_atomic_load_ptr_acquire(&rt->observer->metrics);
}

pw_status_t pw_runtime_metrics_enable(pw_runtime_t* runtime,
                                      const pw_metrics_options_t* options) {
  static const char call[] = "pw_runtime_metrics_enable";
  if (runtime == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: runtime is NULL", call);
  }
  if (options != NULL) {
    PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(options, pw_metrics_options_t,
                                       PW_METRICS_OPTIONS_SIZE_V1, call));
    if (options->flags != 0) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%s: options.flags 0x%x has unknown bits (must be 0)", call,
                            options->flags);
    }
  }
  /* runtime->lock serialises enable and disable (the hub's lock is taken
   * inside, by install: always in this order). */
  pthread_mutex_lock(&runtime->lock);
  pw_status_t status = NULL;
  if (pw__metrics_current(runtime) != NULL) {
    status = pw_status_make(PW_STATUS_FAILED_PRECONDITION, "%s: metrics are already on", call);
  } else {
    pw_metrics_t* m = NULL;
    status = pw_metrics_create(runtime, &m);
    if (status == NULL) pw__observe_install(runtime->observer, &runtime->observer->metrics, &m->base);
  }
  pthread_mutex_unlock(&runtime->lock);
  return status;
}

pw_status_t pw_runtime_metrics_disable(pw_runtime_t* runtime) {
  if (runtime == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_runtime_metrics_disable: runtime is NULL");
  }
  pthread_mutex_lock(&runtime->lock);
  pw_metrics_t* m = pw__metrics_current(runtime);
  if (m != NULL) {
    pw__observe_install(runtime->observer, &runtime->observer->metrics, NULL);
    /* Threads may still be in its record: it stays until the runtime goes. */
    pw__observe_retire(runtime->observer, &m->base);
  }
  pthread_mutex_unlock(&runtime->lock);
  if (m == NULL) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "pw_runtime_metrics_disable: metrics are off");
  }
  return NULL;
}

/* -- The read ---------------------------------------------------------- */

/* A client that has been counted: its tag, summed counts and name. */
typedef struct pw_metrics_client_sum_t {
  uint32_t tag;
  uint64_t v[PW_MC_COUNT];
  char name[64];
  char tag_text[12];
} pw_metrics_client_sum_t;

typedef struct pw_metrics_snapshot_t {
  uint64_t global[PW_MG_COUNT];
  uint64_t hist[PW_MH_COUNT][PW_METRICS_BUCKETS + 1]; /* cumulative */
  uint64_t hist_sum[PW_MH_COUNT];
  uint64_t* slices; /* slice_count x PW_MS_COUNT */
  pw_metrics_client_sum_t* clients;
  uint32_t client_count;
  size_t clients_size;
} pw_metrics_snapshot_t;

static void pw_metrics_sum_head(pw_metrics_t* m, pw_metrics_snapshot_t* s) {
  for (uint32_t t = 0; t < PW_THREAD_STRIPES; ++t) {
    pw_metrics_head_t* head = (pw_metrics_head_t*)pw_metrics_stripe(m, t);
    for (uint32_t i = 0; i < PW_MG_COUNT; ++i) {
      s->global[i] += pw_atomic_load_u64_relaxed(&head->global[i]);
    }
    for (uint32_t h = 0; h < PW_MH_COUNT; ++h) {
      for (uint32_t b = 0; b <= PW_METRICS_BUCKETS; ++b) {
        s->hist[h][b] += pw_atomic_load_u64_relaxed(&head->hist[h].buckets[b]);
      }
      s->hist_sum[h] += pw_atomic_load_u64_relaxed(&head->hist[h].sum_ns);
    }
    for (uint32_t i = 0; i < m->slice_count; ++i) {
      pw_metrics_slice_row_t* row =
          (pw_metrics_slice_row_t*)(pw_metrics_stripe(m, t) + pw_metrics_slices_offset()) + i;
      for (uint32_t c = 0; c < PW_MS_COUNT; ++c) {
        s->slices[i * PW_MS_COUNT + c] += pw_atomic_load_u64_relaxed(&row->v[c]);
      }
    }
  }
  for (uint32_t h = 0; h < PW_MH_COUNT; ++h) {
    for (uint32_t b = 1; b <= PW_METRICS_BUCKETS; ++b) s->hist[h][b] += s->hist[h][b - 1];
  }
}

static void pw_metrics_client_counts(pw_metrics_t* m, uint32_t tag, uint64_t v[PW_MC_COUNT]) {
  memset(v, 0, PW_MC_COUNT * sizeof(uint64_t));
  for (uint32_t t = 0; t < PW_THREAD_STRIPES; ++t) {
    pw_metrics_client_row_t* row =
        (pw_metrics_client_row_t*)(pw_metrics_stripe(m, t) + pw_metrics_clients_offset(m)) + tag;
    for (uint32_t c = 0; c < PW_MC_COUNT; ++c) v[c] += pw_atomic_load_u64_relaxed(&row->v[c]);
  }
}

static bool pw_metrics_any(const uint64_t v[PW_MC_COUNT]) {
  for (uint32_t c = 0; c < PW_MC_COUNT; ++c) {
    if (v[c] != 0) return true;
  }
  return false;
}

/* The clients with any count, in tag order, named as the hub knows them. */
static pw_status_t pw_metrics_sum_clients(pw_metrics_t* m, pw_metrics_snapshot_t* s) {
  uint32_t active = 0;
  uint64_t v[PW_MC_COUNT];
  for (uint32_t tag = 0; tag < PW_METRICS_CLIENTS; ++tag) {
    pw_metrics_client_counts(m, tag, v);
    if (pw_metrics_any(v)) ++active;
  }
  if (active == 0) return NULL;
  s->clients_size = (size_t)active * sizeof(*s->clients);
  PW_RETURN_IF_ERROR(pw_allocator_calloc(m->allocator, s->clients_size, 0, (void**)&s->clients));
  pw_observe_t* o = m->runtime->observer;
  pthread_mutex_lock(&o->lock);
  for (uint32_t tag = 0; tag < PW_METRICS_CLIENTS && s->client_count < active; ++tag) {
    pw_metrics_client_counts(m, tag, v);
    if (!pw_metrics_any(v)) continue;
    pw_metrics_client_sum_t* c = &s->clients[s->client_count++];
    c->tag = tag;
    memcpy(c->v, v, sizeof(v));
    if (o->client_names != NULL && o->client_names[tag][0] != '\0') {
      memcpy(c->name, o->client_names[tag], sizeof(c->name));
    } else {
      snprintf(c->name, sizeof(c->name), "client%u", tag);
    }
    snprintf(c->tag_text, sizeof(c->tag_text), "%u", tag);
  }
  pthread_mutex_unlock(&o->lock);
  return NULL;
}

static void pw_metrics_snapshot_free(pw_metrics_t* m, pw_metrics_snapshot_t* s) {
  pw_allocator_free(m->allocator, s->slices, (size_t)m->slice_count * PW_MS_COUNT * sizeof(uint64_t));
  pw_allocator_free(m->allocator, s->clients, s->clients_size);
}

static pw_status_t pw_metrics_snapshot(pw_metrics_t* m, pw_metrics_snapshot_t* s) {
  memset(s, 0, sizeof(*s));
  if (m->slice_count != 0) {
    PW_RETURN_IF_ERROR(pw_allocator_calloc_array(m->allocator, (size_t)m->slice_count * PW_MS_COUNT,
                                                 sizeof(uint64_t), 0, (void**)&s->slices));
  }
  pw_metrics_sum_head(m, s);
  pw_status_t status = pw_metrics_sum_clients(m, s);
  if (status != NULL) pw_metrics_snapshot_free(m, s);
  return status;
}

/* The families, in the order they are read. |scope|: where the value
 * comes from; |index| into that scope's counters; |divisor| to the unit. */
typedef enum { PW_MF_SLICE, PW_MF_CLIENT, PW_MF_GLOBAL, PW_MF_HIST, PW_MF_SPECIAL } pw_mf_scope_t;

typedef struct pw_metrics_family_t {
  const char* name;
  const char* help;
  pw_metric_type_t type;
  pw_mf_scope_t scope;
  uint32_t index;
  double divisor; /* to the family's unit (ns -> s: 1e9) */
} pw_metrics_family_t;

/* PW_MF_SPECIAL indices. */
enum { PW_MX_INFLIGHT = 0, PW_MX_WAITING, PW_MX_CACHE };

static const pw_metrics_family_t pw_metrics_families[] = {
    {"pathways_executions_submitted_total", "Executions (graph or executable runs) submitted.",
     PW_METRIC_COUNTER, PW_MF_GLOBAL, PW_MG_EXECS_SUBMITTED, 1},
    {"pathways_executions_completed_total", "Executions resolved without an error.",
     PW_METRIC_COUNTER, PW_MF_GLOBAL, PW_MG_EXECS_COMPLETED, 1},
    {"pathways_executions_failed_total", "Executions resolved with an error.",
     PW_METRIC_COUNTER, PW_MF_GLOBAL, PW_MG_EXECS_FAILED, 1},
    {"pathways_client_ops_submitted_total", "Ops submitted, per client.", PW_METRIC_COUNTER,
     PW_MF_CLIENT, PW_MC_OPS_SUBMITTED, 1},
    {"pathways_client_ops_launched_total", "Compute ops launched, per client.",
     PW_METRIC_COUNTER, PW_MF_CLIENT, PW_MC_OPS_LAUNCHED, 1},
    {"pathways_client_ops_completed_total", "Ops completed without an error, per client.",
     PW_METRIC_COUNTER, PW_MF_CLIENT, PW_MC_OPS_COMPLETED, 1},
    {"pathways_client_ops_failed_total", "Ops completed with an error, per client.",
     PW_METRIC_COUNTER, PW_MF_CLIENT, PW_MC_OPS_FAILED, 1},
    {"pathways_ops_launched_total", "Compute ops launched, per slice (once per op).",
     PW_METRIC_COUNTER, PW_MF_SLICE, PW_MS_OPS_LAUNCHED, 1},
    {"pathways_ops_completed_total", "Ops completed without an error, per slice.",
     PW_METRIC_COUNTER, PW_MF_SLICE, PW_MS_OPS_COMPLETED, 1},
    {"pathways_ops_failed_total", "Ops completed with an error, per slice.", PW_METRIC_COUNTER,
     PW_MF_SLICE, PW_MS_OPS_FAILED, 1},
    {"pathways_unit_launches_total",
     "Launches handed to backends, one per unit of dispatch (a device or a host lane).",
     PW_METRIC_COUNTER, PW_MF_SLICE, PW_MS_UNIT_LAUNCHES, 1},
    {"pathways_device_launches_total", "Devices launched (a lane's launch counts its devices).",
     PW_METRIC_COUNTER, PW_MF_SLICE, PW_MS_DEVICES_LAUNCHED, 1},
    {"pathways_launches_failed_total", "Launches the backend completed with an error.",
     PW_METRIC_COUNTER, PW_MF_SLICE, PW_MS_LAUNCHES_FAILED, 1},
    {"pathways_launches_in_flight", "Launches handed to the backend and not completed yet.",
     PW_METRIC_GAUGE, PW_MF_SPECIAL, PW_MX_INFLIGHT, 1},
    {"pathways_device_busy_seconds_total",
     "Device time of completed launches (reported device time, else launch to completion), "
     "times the unit's devices.",
     PW_METRIC_COUNTER, PW_MF_SLICE, PW_MS_BUSY_NS, 1e9},
    {"pathways_launch_deadlines_total", "Launches the watchdog failed for their deadline.",
     PW_METRIC_COUNTER, PW_MF_SLICE, PW_MS_DEADLINES, 1},
    {"pathways_transfers_total", "Transfer parts completed (one per unit of dispatch).",
     PW_METRIC_COUNTER, PW_MF_SLICE, PW_MS_TRANSFERS, 1},
    {"pathways_transfers_failed_total", "Transfer parts completed with an error.",
     PW_METRIC_COUNTER, PW_MF_SLICE, PW_MS_TRANSFERS_FAILED, 1},
    {"pathways_transfer_bytes_total", "Bytes moved by completed transfer parts, into the slice.",
     PW_METRIC_COUNTER, PW_MF_SLICE, PW_MS_TRANSFER_BYTES, 1},
    {"pathways_sched_admitted_total", "Ops the scheduler window admitted, per home slice.",
     PW_METRIC_COUNTER, PW_MF_SLICE, PW_MS_ADMITTED, 1},
    {"pathways_sched_waiting_ops", "Ops submitted and not yet admitted by the scheduler window.",
     PW_METRIC_GAUGE, PW_MF_SPECIAL, PW_MX_WAITING, 1},
    {"pathways_launch_latency_seconds", "From a launch to its completion by the backend.",
     PW_METRIC_HISTOGRAM, PW_MF_HIST, PW_MH_LAUNCH_LATENCY, 1e9},
    {"pathways_op_latency_seconds", "From an op's submission to its completion on every device.",
     PW_METRIC_HISTOGRAM, PW_MF_HIST, PW_MH_OP_LATENCY, 1e9},
    {"pathways_transfer_seconds", "From a transfer part's first copy to its completion.",
     PW_METRIC_HISTOGRAM, PW_MF_HIST, PW_MH_TRANSFER, 1e9},
    {"pathways_compile_cache_lookups_total", "Lookups of the runtime's compile cache.",
     PW_METRIC_COUNTER, PW_MF_SPECIAL, PW_MX_CACHE, 1},
    {"pathways_slice_losses_total", "Times the slice was lost.", PW_METRIC_COUNTER, PW_MF_SLICE,
     PW_MS_LOSSES, 1},
    {"pathways_slice_returns_total", "Times the slice came back after a loss.", PW_METRIC_COUNTER,
     PW_MF_SLICE, PW_MS_RETURNS, 1},
    {"pathways_snapshots_total", "Snapshots copied to host memory.", PW_METRIC_COUNTER,
     PW_MF_GLOBAL, PW_MG_SNAPSHOTS, 1},
    {"pathways_snapshots_failed_total", "Snapshots whose copy to host memory failed.",
     PW_METRIC_COUNTER, PW_MF_GLOBAL, PW_MG_SNAPSHOTS_FAILED, 1},
    {"pathways_snapshot_bytes_total", "Bytes of buffers copied into snapshots.",
     PW_METRIC_COUNTER, PW_MF_GLOBAL, PW_MG_SNAPSHOT_BYTES, 1},
    {"pathways_snapshot_seconds", "From a snapshot's take to every buffer in host memory.",
     PW_METRIC_HISTOGRAM, PW_MF_HIST, PW_MH_SNAPSHOT, 1e9},
    {"pathways_snapshot_persists_total", "Snapshots written to a store.", PW_METRIC_COUNTER,
     PW_MF_GLOBAL, PW_MG_PERSISTS, 1},
    {"pathways_snapshot_persists_failed_total", "Snapshots whose write to a store failed.",
     PW_METRIC_COUNTER, PW_MF_GLOBAL, PW_MG_PERSISTS_FAILED, 1},
    {"pathways_snapshot_stored_bytes_total",
     "Bytes written to stores for snapshots (compressed values and manifests).",
     PW_METRIC_COUNTER, PW_MF_GLOBAL, PW_MG_STORED_BYTES, 1},
    {"pathways_snapshot_persist_seconds", "Compressing, checksumming and writing a snapshot.",
     PW_METRIC_HISTOGRAM, PW_MF_HIST, PW_MH_PERSIST, 1e9},
    {"pathways_elastic_recoveries_total",
     "Re-meshes of the elastic helper after a loss (restored from a snapshot).",
     PW_METRIC_COUNTER, PW_MF_GLOBAL, PW_MG_RECOVERIES, 1},
    {"pathways_elastic_growths_total", "Re-meshes of the elastic helper onto returned slices.",
     PW_METRIC_COUNTER, PW_MF_GLOBAL, PW_MG_GROWTHS, 1},
    {"pathways_elastic_recovery_seconds",
     "From a loss to the end of the elastic helper's restore on the remaining slices.",
     PW_METRIC_HISTOGRAM, PW_MF_HIST, PW_MH_RECOVERY, 1e9},
};

#define PW_METRICS_FAMILY_COUNT (sizeof(pw_metrics_families) / sizeof(pw_metrics_families[0]))

typedef struct pw_metrics_emit_t {
  pw_metrics_t* m;
  const pw_metrics_snapshot_t* s;
  pw_metrics_visit_fn_t fn;
  void* user;
  double bounds[PW_METRICS_BUCKETS];
} pw_metrics_emit_t;

static pw_status_t pw_metrics_emit(pw_metrics_emit_t* x, const char* name, const char* help,
                                   pw_metric_type_t type, const pw_metric_label_t* labels,
                                   uint32_t label_count, double value) {
  pw_metric_sample_t sample = {
      .struct_size = sizeof(sample), .family = name, .help = help, .type = type,
      .label_count = label_count, .labels = label_count != 0 ? labels : NULL, .value = value};
  return x->fn(x->user, &sample);
}

static pw_status_t pw_metrics_emit_slices(pw_metrics_emit_t* x, const pw_metrics_family_t* f) {
  for (uint32_t i = 0; i < x->m->slice_count; ++i) {
    const uint64_t* v = &x->s->slices[i * PW_MS_COUNT];
    double value = (double)v[f->index] / f->divisor;
    if (f->scope == PW_MF_SPECIAL) { /* PW_MX_INFLIGHT */
      uint64_t launched = v[PW_MS_UNIT_LAUNCHES], done = v[PW_MS_LAUNCHES_DONE];
      value = launched > done ? (double)(launched - done) : 0;
    }
    char index[12];
    snprintf(index, sizeof(index), "%u", i);
    pw_metric_label_t labels[2] = {{"slice", index}, {"slice_name", x->m->runtime->slices[i].name}};
    PW_RETURN_IF_ERROR(pw_metrics_emit(x, f->name, f->help, f->type, labels, 2, value));
  }
  return NULL;
}

static pw_status_t pw_metrics_emit_clients(pw_metrics_emit_t* x, const pw_metrics_family_t* f) {
  for (uint32_t i = 0; i < x->s->client_count; ++i) {
    const pw_metrics_client_sum_t* c = &x->s->clients[i];
    double value = (double)c->v[f->index] / f->divisor;
    if (f->scope == PW_MF_SPECIAL) { /* PW_MX_WAITING */
      uint64_t submitted = c->v[PW_MC_OPS_SUBMITTED], admitted = c->v[PW_MC_ADMITTED];
      value = submitted > admitted ? (double)(submitted - admitted) : 0;
    }
    pw_metric_label_t labels[2] = {{"client", c->name}, {"client_tag", c->tag_text}};
    PW_RETURN_IF_ERROR(pw_metrics_emit(x, f->name, f->help, f->type, labels, 2, value));
  }
  return NULL;
}

static pw_status_t pw_metrics_emit_hist(pw_metrics_emit_t* x, const pw_metrics_family_t* f) {
  pw_metric_sample_t sample = {
      .struct_size = sizeof(sample), .family = f->name, .help = f->help, .type = f->type,
      .value = (double)x->s->hist_sum[f->index] / f->divisor, .bucket_count = PW_METRICS_BUCKETS,
      .bucket_bounds = x->bounds, .bucket_counts = x->s->hist[f->index],
      .count = x->s->hist[f->index][PW_METRICS_BUCKETS]};
  return x->fn(x->user, &sample);
}

/* The compile cache's counters, read through its public API when the
 * runtime has one (lookups, hits by tier, misses). */
static pw_status_t pw_metrics_emit_cache(pw_metrics_emit_t* x, const pw_metrics_family_t* f) {
  pw_cache_t* cache = pw_atomic_load_ptr_acquire(&x->m->runtime->compile_cache);
  if (cache == NULL) return NULL;
  pw_cache_stats_t st = {.struct_size = sizeof(st)};
  PW_RETURN_IF_ERROR(pw_cache_stats(cache, &st));
  PW_RETURN_IF_ERROR(
      pw_metrics_emit(x, f->name, f->help, PW_METRIC_COUNTER, NULL, 0, (double)st.lookups));
  static const char hits_help[] =
      "Compile cache hits, by where the value came from (memory, store, or another lookup's "
      "fill: shared).";
  const struct { const char* tier; uint64_t n; } hits[3] = {
      {"memory", st.memory_hits}, {"store", st.store_hits}, {"shared", st.shared}};
  for (int i = 0; i < 3; ++i) {
    pw_metric_label_t label = {"tier", hits[i].tier};
    PW_RETURN_IF_ERROR(pw_metrics_emit(x, "pathways_compile_cache_hits_total", hits_help,
                                       PW_METRIC_COUNTER, &label, 1, (double)hits[i].n));
  }
  return pw_metrics_emit(x, "pathways_compile_cache_misses_total",
                         "Compile cache misses (compiles run).", PW_METRIC_COUNTER, NULL, 0,
                         (double)st.misses);
}

static pw_status_t pw_metrics_emit_family(pw_metrics_emit_t* x, const pw_metrics_family_t* f) {
  switch (f->scope) {
    case PW_MF_SLICE: return pw_metrics_emit_slices(x, f);
    case PW_MF_CLIENT: return pw_metrics_emit_clients(x, f);
    case PW_MF_HIST: return pw_metrics_emit_hist(x, f);
    case PW_MF_GLOBAL:
      return pw_metrics_emit(x, f->name, f->help, f->type, NULL, 0,
                             (double)x->s->global[f->index] / f->divisor);
    case PW_MF_SPECIAL:
      if (f->index == PW_MX_INFLIGHT) return pw_metrics_emit_slices(x, f);
      if (f->index == PW_MX_CACHE) return pw_metrics_emit_cache(x, f);
      /* Waiting for the window: only a runtime with one has a queue. */
      return x->m->runtime->sched_window != 0 ? pw_metrics_emit_clients(x, f) : NULL;
  }
  return NULL;
}

pw_status_t pw__metrics_visit(pw_metrics_t* m, pw_metrics_visit_fn_t fn, void* user) {
  pw_metrics_snapshot_t s;
  PW_RETURN_IF_ERROR(pw_metrics_snapshot(m, &s));
  pw_metrics_emit_t x = {.m = m, .s = &s, .fn = fn, .user = user};
  for (uint32_t b = 0; b < PW_METRICS_BUCKETS; ++b) x.bounds[b] = (double)pw__metrics_bucket_ns[b] / 1e9;
  pw_status_t status = NULL;
  for (size_t i = 0; i < PW_METRICS_FAMILY_COUNT && status == NULL; ++i) {
    status = pw_metrics_emit_family(&x, &pw_metrics_families[i]);
  }
  pw_metrics_snapshot_free(m, &s);
  return status;
}

pw_status_t pw_runtime_metrics_visit(pw_runtime_t* runtime, pw_metrics_visit_fn_t fn, void* user) {
  if (runtime == NULL || fn == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_runtime_metrics_visit: %s is NULL",
                          runtime == NULL ? "runtime" : "fn");
  }
  pw_metrics_t* m = pw__metrics_current(runtime);
  if (m == NULL) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "pw_runtime_metrics_visit: metrics are off (pw_runtime_metrics_enable)");
  }
  return pw__metrics_visit(m, fn, user);
}
