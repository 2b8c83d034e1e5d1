/* Internal to lib/observe: the trace recorder's object and its rings
 * (trace.c records and controls them, trace_write.c writes them). */
#ifndef PW_OBSERVE_TRACE_INTERNAL_H_
#define PW_OBSERVE_TRACE_INTERNAL_H_

#include "observe/observe.h"
#include "observe/trace_record.h"
#include "pathways/trace.h"

#define PW_TRACE_DEFAULT_EVENTS 65536u
#define PW_TRACE_MAX_EVENTS (1u << 24)

typedef struct pw_trace_ring_s {
  _Alignas(PW_CACHE_LINE) pw_atomic_u32_t writing;
  pw_atomic_u64_t head;           /* events recorded (written by the owner thread) */
  pw_trace_record_t* records;     /* capacity of them; NULL: allocation failed */
  pthread_t thread;
  uint32_t index;
  struct pw_trace_ring_s* next;
} pw_trace_ring_t;

typedef struct pw_trace_s {
  pw_observer_t base;
  pw_runtime_t* runtime;
  uint64_t serial;                /* keys the thread-local ring cache */
  pw_atomic_u32_t on;
  bool asymmetric;                /* writers skip the fence: stop uses membarrier(2) */
  uint32_t capacity;              /* a power of two */
  uint64_t (*clock)(void* user);  /* NULL: pw_clock_now */
  void* clock_user;
  char clock_name[64];
  uint64_t origin_ns;
  pthread_mutex_t lock;           /* |rings| */
  pw_trace_ring_t* rings;
  uint32_t ring_count;
  pw_atomic_u64_t lost;           /* events of threads whose ring could not be made */
} pw_trace_t;

/* Records |r| keeps (at most the capacity). Read after a stop, or as a
 * moment's count while recording. */
uint64_t pw__trace_ring_kept(const pw_trace_t* t, pw_trace_ring_t* r);

/* Kept, dropped (overwritten and lost), threads, recording. */
void pw__trace_counts(pw_trace_t* t, pw_trace_stats_t* s);

#endif /* PW_OBSERVE_TRACE_INTERNAL_H_ */
