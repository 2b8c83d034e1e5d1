/* Internal: a client (a job) as every module sees it (lib/core): its
 * handle table, its per-thread stripes of in-flight counts and references
 * (client.c), and the words other modules keep in it: the scheduler
 * entries, submission order, block cache and armed graphs are lib/sched's
 * (only it reads or writes them), the decoded-graph memo lib/graph_format's,
 * the host-task registry lib/graph's.
 * Not installed. */
#ifndef PW_CORE_CLIENT_H_
#define PW_CORE_CLIENT_H_

#include "core/handles.h"

struct pw_execution_s;
struct pw_graph_exec_s;

/* What another module keeps per client and the client frees with it (the
 * decoded-graph memo of lib/graph_format): made by that module on first
 * use, published by a CAS into a pw_atomic_ptr_t of the client, freed at
 * pw_client_destroy through the function it starts with, so the client's
 * owner calls nothing in that module. */
typedef struct pw_client_attachment_s {
  void (*free)(struct pw_client_attachment_s* self, struct pw_client_s* client);
} pw_client_attachment_t;

#define PW_BLOCK_CACHE_SLOTS 8

/* One stripe of a client's per-submission state (see pw_client_s). */
typedef struct pw_client_stripe_s {
  _Alignas(PW_CACHE_LINE) pw_atomic_u64_t counts;
} pw_client_stripe_t;

struct pw_client_s {
  pw_runtime_t* runtime;
  /* In runtime->clients (runtime->lock) from create to destroy. */
  struct pw_client_s* runtime_prev;
  struct pw_client_s* runtime_next;
  char name[64];
  uint32_t tag;            /* 12-bit client tag, unique among the runtime's live clients */
  uint32_t handle_owner;   /* salt << 12 | tag: the owner field of its handle ids */
  uint32_t weight;
  int32_t priority;
  pw_handle_table_t handles;
  struct pw_sched_entry_s* sched_entries; /* one per physical slice */
  /* Per thread stripe (clients are allocated aligned to a cache line):
   *   counts  bits 0..31   executions submitted from this stripe and in
   *                        flight (pw_client_destroy waits for all stripes
   *                        to reach 0);
   *           bits 32..62  their references to the struct: one per
   *                        execution whose block has not gone back yet, so
   *                        the struct (and its lock) outlives
   *                        pw_client_destroy until the last completing
   *                        thread has stopped touching it;
   *           bit 63       PW_CLIENT_FOLDED: pw_client_destroy moved the
   *                        stripe's references to |refs|; a release that
   *                        finds it set drops one there instead.
   * An execution uses the stripe of the thread that submitted it, even
   * when another thread completes it. */
  pw_client_stripe_t stripes[PW_THREAD_STRIPES];
  /* The owner's reference, plus the stripes' once folded; the last one
   * frees the struct. */
  _Alignas(PW_CACHE_LINE) pw_atomic_u32_t refs;
  /* Threads waiting for in-flight to reach 0 (registered under idle_lock,
   * written by waiters only): a completer that brings its stripe to 0
   * fences and reads it, and takes the lock to wake them only when there
   * are. */
  pw_atomic_u32_t idle_waiters;
  _Alignas(PW_CACHE_LINE) pthread_mutex_t idle_lock;
  pthread_cond_t idle_cond;
  /* Decoded-graph memo (a pw_client_attachment_t of lib/graph_format). */
  pw_atomic_ptr_t graph_memo;
  /* Host tasks registered by name (a pw_client_attachment_t of lib/graph,
   * host_task.c). */
  pw_atomic_ptr_t host_tasks;
  /* Scheduler window only: a client's ops enter the slice sequences in the
   * order it submitted them (submit_seq numbers them, admit_next is the
   * next to admit), so no op is admitted before an op it may depend on.
   * Slices whose head op waits for its turn park their entry on
   * |order_waiters|; admitting an op wakes them. See lib/sched/dispatch.c. */
  pw_atomic_u64_t submit_seq;
  pw_atomic_u64_t admit_next;
  pw_atomic_ptr_t order_waiters;
  /* Execution blocks of this client's finished executions, kept for reuse
   * (a resubmitted graph finds its block still laid out from the previous
   * run, and a big one does not fault in fresh pages); lock-free slots,
   * one per cache line so that submitters of different graphs do not
   * share one; emptied and closed at pw_client_destroy, since cached
   * blocks hold device memory. See lib/sched/dispatch.c. */
  struct {
    _Alignas(PW_CACHE_LINE) pw_atomic_ptr_t block;
  } block_cache[PW_BLOCK_CACHE_SLOTS];
  _Alignas(PW_CACHE_LINE) pw_atomic_u32_t blocks_closed; /* 1 from pw_client_destroy on */
  /* Armed graphs alive (pw_graph_exec_create), under |execs_lock|:
   * pw_client_destroy destroys those left. */
  pthread_mutex_t execs_lock;
  struct pw_graph_exec_s* execs;
};

#define PW_CLIENT_REF (UINT64_C(1) << 32)
#define PW_CLIENT_FOLDED (UINT64_C(1) << 63)

/* A new execution submitted from |stripe|: one reference, one in flight. */
static inline void pw__client_begin(pw_client_t* client, uint32_t stripe) {
  pw_atomic_fetch_add_u64(&client->stripes[stripe].counts, PW_CLIENT_REF + 1);
}
/* An execution of |stripe| completed: no longer in flight (wakes idle
 * waiters). Its reference stays. lib/runtime/client.c. */
void pw__client_end(pw_client_t* client, uint32_t stripe);
/* Drops an execution's reference (taken on |stripe|). */
void pw__client_release_stripe(pw_client_t* client, uint32_t stripe);
/* Drops one reference to |client|'s struct; the last one frees it. */
void pw__client_release(pw_client_t* client);

/* Frees the attachment in |slot| of |client|, if any (pw_client_destroy). */
static inline void pw__client_attachment_free(pw_client_t* client, pw_atomic_ptr_t* slot) {
  pw_client_attachment_t* a = pw_atomic_exchange_ptr(slot, NULL);
  if (a != NULL) a->free(a, client);
}

#endif /* PW_CORE_CLIENT_H_ */
