/* Internal: the metrics observer (lib/observe/metrics.c) and what its
 * exposition (prometheus.c) and HTTP endpoint (http.c) share: the
 * observer object, the read of its counters, the servers it stops when
 * it goes. Not installed. */
#ifndef PW_OBSERVE_METRICS_H_
#define PW_OBSERVE_METRICS_H_

#include <pthread.h>
#include "observe/observe.h"
#include "pathways/metrics.h"

/* Per-slice counters (each stripe has one row per physical slice). */
enum {
  PW_MS_OPS_LAUNCHED = 0, /* LAUNCH of the unit at mesh device 0 */
  PW_MS_OPS_COMPLETED,    /* OP_DONE ok */
  PW_MS_OPS_FAILED,       /* OP_DONE failed */
  PW_MS_UNIT_LAUNCHES,    /* LAUNCH */
  PW_MS_DEVICES_LAUNCHED, /* LAUNCH, its |count| */
  PW_MS_LAUNCHES_DONE,    /* LAUNCH_DONE */
  PW_MS_LAUNCHES_FAILED,  /* LAUNCH_DONE failed */
  PW_MS_BUSY_NS,          /* device-ns: unit time x its devices */
  PW_MS_TRANSFERS,        /* COPY_DONE */
  PW_MS_TRANSFERS_FAILED, /* COPY_DONE failed */
  PW_MS_TRANSFER_BYTES,   /* COPY_DONE bytes */
  PW_MS_DEADLINES,        /* DEADLINE */
  PW_MS_ADMITTED,         /* ADMIT */
  PW_MS_LOSSES,           /* SLICE_LOST */
  PW_MS_RETURNS,          /* SLICE_BACK */
  PW_MS_COUNT
};

/* Per-client counters, by client tag (0..PW_HANDLE_TAGS_MAX). */
enum {
  PW_MC_OPS_SUBMITTED = 0, /* SUBMIT, its |count| */
  PW_MC_ADMITTED,          /* ADMIT */
  PW_MC_OPS_LAUNCHED,
  PW_MC_OPS_COMPLETED,
  PW_MC_OPS_FAILED,
  PW_MC_COUNT
};

/* Runtime-wide counters. */
enum {
  PW_MG_EXECS_SUBMITTED = 0,
  PW_MG_EXECS_COMPLETED,
  PW_MG_EXECS_FAILED,
  PW_MG_SNAPSHOTS,         /* SNAPSHOT ok */
  PW_MG_SNAPSHOTS_FAILED,  /* SNAPSHOT failed */
  PW_MG_SNAPSHOT_BYTES,    /* SNAPSHOT ok, its bytes */
  PW_MG_PERSISTS,          /* SNAPSHOT_PERSIST ok */
  PW_MG_PERSISTS_FAILED,
  PW_MG_STORED_BYTES,      /* SNAPSHOT_PERSIST ok, its bytes */
  PW_MG_RECOVERIES,        /* ELASTIC */
  PW_MG_GROWTHS,           /* ELASTIC, PW_OBS_GROWN */
  PW_MG_COUNT
};

/* Histograms (runtime-wide, no labels), in ns. */
enum {
  PW_MH_LAUNCH_LATENCY = 0, /* LAUNCH_DONE ts - since (the LAUNCH) */
  PW_MH_OP_LATENCY,         /* OP_DONE ts - since (the SUBMIT) */
  PW_MH_TRANSFER,           /* COPY_DONE ts - since (the COPY) */
  PW_MH_SNAPSHOT,           /* SNAPSHOT ok: from the take */
  PW_MH_PERSIST,            /* SNAPSHOT_PERSIST ok: the write */
  PW_MH_RECOVERY,           /* ELASTIC, not grown: from the loss to the restore's end */
  PW_MH_COUNT
};

/* Upper bounds of the histograms' buckets (ns), then +Inf. */
#define PW_METRICS_BUCKETS 22u
extern const uint64_t pw__metrics_bucket_ns[PW_METRICS_BUCKETS];

#define PW_METRICS_CLIENTS (PW_HANDLE_TAGS_MAX + 1u)

struct pw_metrics_server_s;

typedef struct pw_metrics_s {
  pw_observer_t base; /* first: the hub sees a pw_observer_t */
  pw_runtime_t* runtime;
  pw_allocator_t allocator;
  uint32_t slice_count;
  /* PW_THREAD_STRIPES stripes of |stride| bytes each (a multiple of a
   * cache line, aligned to one): the thread's stripe is
   * pw__thread_stripe()'s. Each holds the global counters and the
   * histograms, then |slice_count| slice rows, then the client rows. */
  size_t stride;
  uint8_t* stripes;
  size_t stripes_size;
  /* HTTP servers started on this observer (http.c). */
  pthread_mutex_t servers_lock;
  struct pw_metrics_server_s* servers;
} pw_metrics_t;

/* The metrics observer now installed on |rt|, NULL when metrics are off. */
pw_metrics_t* pw__metrics_current(pw_runtime_t* rt);

/* pw_runtime_metrics_visit on one observer (which may have been retired:
 * its counters are still readable). */
pw_status_t pw__metrics_visit(pw_metrics_t* m, pw_metrics_visit_fn_t fn, void* user);

/* pw_runtime_metrics_write_prometheus on one observer (prometheus.c). */
pw_status_t pw__metrics_write_prometheus(pw_metrics_t* m, pw_metrics_sink_fn_t sink,
                                         void* user);

/* Stops and frees every server of |m| (http.c); at its destroy. */
void pw__metrics_servers_stop_all(pw_metrics_t* m);

#endif /* PW_OBSERVE_METRICS_H_ */
