#define _POSIX_C_SOURCE 200809L
/* The gang scheduler of a runtime with a scheduler window
 * (pw_runtime_options_t.sched_window): per-client queues of submitted ops
 * that the slice's scheduler admits into the slice sequences of
 * lib/sched/dispatch.c, at most |window| unfinished at a time, in the
 * order the policy (lib/sched/policies.c) picks clients.
 *
 * Ops wait in per-client queues; whoever holds the slice's scheduler
 * (BUSY bit, taken without blocking: a thread that finds it held sets
 * PENDING and leaves, and the holder loops again) admits ops into the
 * sequence while fewer than |window| are unfinished, asking the policy
 * which client goes next. Submitters and completing device threads only
 * ever try the bit; nobody waits for it.
 *
 * A spanning op waits in its client's queue on every part. A part's
 * scheduler that picks it leaves it at the head, the client "blocked" on
 * that part (its later ops there must not overtake it), and goes on with
 * other clients; the part that picks it last appends it to all parts at
 * once, counts it in every part's window, and kicks the other parts, which
 * then drop it from their queues. So on each part the op enters after the
 * client's earlier ops there (dependencies point backwards), and a picked
 * op holds no window slot while it waits, so two spanning ops picked in
 * opposite orders on two parts cannot starve each other.
 *
 * Across slices, a client's ops are admitted in the order it submitted
 * them (client->admit_next): an op's producers, in its graph or earlier
 * ones, were submitted before it, so they are in their sequences before it
 * enters its own. Otherwise an admitted op could hold its devices (and a
 * window slot) waiting for a producer still queued behind a full window on
 * another slice whose admitted ops wait on this slice: a cycle. A holder
 * whose client head is not next parks the entry on the client's
 * order_waiters stack; whoever admits the client's next op wakes them.
 * Clients never depend on each other's buffers, so policies still choose
 * freely between clients. */
#include <pthread.h>

#include "plugin/policy_call.h"
#include "sched/dispatch_internal.h"

enum { PW_SCHED_BUSY = 1u, PW_SCHED_PENDING = 2u, PW_SCHED_CHUNK = PW_SCHED_MAX_CANDIDATES };

/* |op|'s queue link on its |p|-th part. */
static inline pw_op_t** pw_op_sched_link(pw_op_t* op, uint32_t p) {
  pw_op_cold_t* cold = pw_op_cold(op);
  return cold->sched_links ? &cold->sched_links[p] : &cold->sched_next;
}

/* Whether |e|'s head is its client's next op to admit; if not, parks |e|
 * on the client's order_waiters (then checks again, so that an admission
 * racing with the parking is not missed). */
static bool pw_sched_in_order(pw_sched_entry_t* e) {
  pw_client_t* client = e->client;
  if (pw_op_cold(e->head)->client_seq == pw_atomic_load_u64_acquire(&client->admit_next)) return true;
  uint32_t idle = 0;
  if (pw_atomic_cas_u32(&e->order_waiting, &idle, 1)) {
    void* top = pw_atomic_load_ptr_relaxed(&client->order_waiters);
    do {
      e->order_next = top;
    } while (!pw_atomic_cas_ptr(&client->order_waiters, &top, e));
  }
  return pw_op_cold(e->head)->client_seq == pw_atomic_load_u64_acquire(&client->admit_next);
}

/* |op| (of |client|) entered its sequences: the client's next op may be
 * admitted; kick the slices parked waiting for it. */
static void pw_sched_admitted_in_order(pw_client_t* client) {
  pw_atomic_fetch_add_u64(&client->admit_next, 1);
  pw_sched_entry_t* e = pw_atomic_exchange_ptr(&client->order_waiters, NULL);
  pw_runtime_t* rt = client->runtime;
  while (e != NULL) {
    pw_sched_entry_t* next = e->order_next;
    pw_atomic_store_u32_release(&e->order_waiting, 0);
    pw__sched_kick(&rt->slices[e - client->sched_entries]);
    e = next;
  }
}

static pw_sched_candidate_t pw_sched_candidate(pw_sched_entry_t* e) {
  pw_sched_candidate_t c;
  c.client = e->client->tag;
  c.weight = e->client->weight;
  c.priority = e->client->priority;
  c.head_sequence = e->head ? pw_op_gang_id(e->head) : UINT64_MAX;
  c.queued = e->queued;
  c.scratch = e->scratch;
  return c;
}

static void pw_sched_charge_pending(pw_runtime_t* rt, pw_sched_entry_t* e) {
  if (!rt->sched_charge || pw_atomic_load_u64_relaxed(&e->pending_charge_ns) == 0) return;
  uint64_t ns = pw_atomic_exchange_u64(&e->pending_charge_ns, 0);
  if (ns != 0) {
    pw_sched_candidate_t c = pw_sched_candidate(e);
    pw__policy_charge(&rt->sched_policy, &c, ns);
  }
}

/* The backlogged clients of a slice as the policy sees them, gathered in
 * backlog order with bounded stack however many there are: every
 * PW_SCHED_CHUNK candidates are reduced to the policy's pick among them,
 * and what is left is the lone chunk or the chunks' picks (themselves
 * reduced when they fill up). For a policy whose pick is the best under
 * an order (every bundled one) the pick over what is left is the pick over
 * all of them; with up to PW_SCHED_CHUNK clients it is one call, as
 * before. O(clients) per use, one policy call per chunk. The chunks'
 * picks are kept as entries and shown to the policy afresh. */
typedef struct pw_sched_pool_t {
  uint32_t count, best_count;
  pw_sched_candidate_t cands[PW_SCHED_CHUNK];
  pw_sched_entry_t* entries[PW_SCHED_CHUNK];
  pw_sched_entry_t* best[PW_SCHED_CHUNK];
} pw_sched_pool_t;

static uint32_t pw_sched_policy_pick(pw_runtime_t* rt, const pw_sched_candidate_t* c,
                                     uint32_t n) {
  return pw__policy_pick(&rt->sched_policy, c, n); /* out of range reads as 0 */
}

/* Shows the chunks' picks to the policy in |pool->cands| (the chunk must
 * have been reduced). */
static void pw_sched_pool_show_best(pw_sched_pool_t* pool) {
  for (uint32_t i = 0; i < pool->best_count; ++i) {
    pool->cands[i] = pw_sched_candidate(pool->best[i]);
  }
  pool->count = 0; /* the chunk is empty; cands is only a view */
}

/* Replaces the full or last chunk by its pick among the chunks' picks. */
static void pw_sched_pool_reduce(pw_runtime_t* rt, pw_sched_pool_t* pool) {
  pw_sched_entry_t* pick = pool->entries[pw_sched_policy_pick(rt, pool->cands, pool->count)];
  pool->count = 0;
  if (pool->best_count == PW_SCHED_CHUNK) {
    pw_sched_pool_show_best(pool);
    pool->best[0] = pool->best[pw_sched_policy_pick(rt, pool->cands, pool->best_count)];
    pool->best_count = 1;
  }
  pool->best[pool->best_count++] = pick;
}

static void pw_sched_pool_add(pw_runtime_t* rt, pw_sched_pool_t* pool, pw_sched_entry_t* e) {
  if (pool->count == PW_SCHED_CHUNK) pw_sched_pool_reduce(rt, pool);
  pool->entries[pool->count] = e;
  pool->cands[pool->count++] = pw_sched_candidate(e);
}

/* What is left to pick from (|*out_count| of them, 0 for none), valid
 * until the next add; more may be added afterwards. */
static const pw_sched_candidate_t* pw_sched_pool_finish(pw_runtime_t* rt, pw_sched_pool_t* pool,
                                                        uint32_t* out_count,
                                                        pw_sched_entry_t*** out_entries) {
  if (pool->best_count == 0) {
    *out_count = pool->count;
    *out_entries = pool->entries;
    return pool->cands;
  }
  if (pool->count != 0) pw_sched_pool_reduce(rt, pool);
  pw_sched_pool_show_best(pool);
  *out_count = pool->best_count;
  *out_entries = pool->best;
  return pool->cands;
}

/* The backlogged clients, in the order they became backlogged (holder
 * only). */
static void pw_sched_active_append(pw_slice_t* slice, pw_sched_entry_t* e) {
  e->active = true;
  e->active_next = NULL;
  e->active_prev = slice->sched_active != NULL ? slice->sched_active_tail : NULL;
  if (e->active_prev != NULL) {
    e->active_prev->active_next = e;
  } else {
    slice->sched_active = e;
  }
  slice->sched_active_tail = e;
}

static void pw_sched_active_remove(pw_slice_t* slice, pw_sched_entry_t* e) {
  e->active = false;
  if (e->active_prev != NULL) {
    e->active_prev->active_next = e->active_next;
  } else {
    slice->sched_active = e->active_next;
  }
  if (e->active_next != NULL) {
    e->active_next->active_prev = e->active_prev;
  } else {
    slice->sched_active_tail = e->active_prev;
  }
  e->active_next = e->active_prev = NULL;
}

/* Moves submitted ops into their clients' queues (holder only). A client
 * that becomes backlogged is shown to the policy's activate with the
 * others in |pool| (gathered once per call, and each client activated
 * here added after its own activate: O(clients) per call however many
 * activate; within one call a client's queued count and head may be
 * those it had when it was added). */
static void pw_sched_take_incoming(pw_slice_t* slice, pw_sched_pool_t* pool) {
  pw_runtime_t* rt = slice->runtime;
  pw_op_t* list = pw_atomic_exchange_ptr(&slice->sched_incoming, NULL);
  pw_op_t* fifo = NULL;
  bool pooled = false;
  while (list != NULL) { /* the stack is newest first: reverse it */
    pw_op_t** link = pw_op_sched_link(list, pw_span_position(list->slice, slice));
    pw_op_t* next = *link;
    *link = fifo;
    fifo = list;
    list = next;
  }
  while (fifo != NULL) {
    pw_op_t* op = fifo;
    uint32_t p = pw_span_position(op->slice, slice);
    fifo = *pw_op_sched_link(op, p);
    *pw_op_sched_link(op, p) = NULL;
    pw_sched_entry_t* e = &op->exec->client->sched_entries[slice->index];
    if (e->tail == NULL) {
      e->head = e->tail = op;
    } else if (pw_op_cold(e->tail)->client_seq < pw_op_cold(op)->client_seq) {
      *pw_op_sched_link(e->tail, pw_span_position(e->tail->slice, slice)) = op;
      e->tail = op;
    } else if (pw_op_cold(op)->client_seq < pw_op_cold(e->head)->client_seq) {
      /* Two threads submitting for one client pushed out of their order:
       * keep the queue in submission order. (A blocked head is the
       * client's next op: nothing submitted later can go before it.) */
      *pw_op_sched_link(op, pw_span_position(op->slice, slice)) = e->head;
      e->head = op;
    } else {
      pw_op_t* at = e->head;
      pw_op_t** at_next = pw_op_sched_link(at, pw_span_position(at->slice, slice));
      while (*at_next != NULL && pw_op_cold(*at_next)->client_seq < pw_op_cold(op)->client_seq) {
        at = *at_next;
        at_next = pw_op_sched_link(at, pw_span_position(at->slice, slice));
      }
      *pw_op_sched_link(op, pw_span_position(op->slice, slice)) = *at_next;
      *at_next = op;
    }
    e->queued++;
    if (!e->active) {
      pw_sched_charge_pending(rt, e);
      if (pw__policy_has_activate(&rt->sched_policy)) {
        if (!pooled) {
          pool->count = pool->best_count = 0;
          for (pw_sched_entry_t* o = slice->sched_active; o; o = o->active_next) {
            pw_sched_pool_add(rt, pool, o);
          }
          pooled = true;
        }
        uint32_t n;
        pw_sched_entry_t** unused;
        const pw_sched_candidate_t* others = pw_sched_pool_finish(rt, pool, &n, &unused);
        pw_sched_candidate_t me = pw_sched_candidate(e);
        pw__policy_activate(&rt->sched_policy, &me, others, n);
        pw_sched_pool_add(rt, pool, e);
      }
      pw_sched_active_append(slice, e);
    }
  }
}

/* Removes the head of |e|'s queue on |slice| (holder only). */
static void pw_sched_pop(pw_slice_t* slice, pw_sched_entry_t* e) {
  pw_op_t* op = e->head;
  pw_op_t** link = pw_op_sched_link(op, pw_span_position(op->slice, slice));
  e->head = *link;
  if (e->head == NULL) e->tail = NULL;
  *link = NULL;
  e->blocked = false;
  if (pw_op_cold(op)->sched_links != NULL) pw_execution_release(op->exec);
  if (--e->queued == 0) pw_sched_active_remove(slice, e);
}

/* |slice|'s scheduler picked spanning |op| (head of |e|): block the client
 * here; the last of its parts to pick it appends it everywhere. */
static void pw_sched_pick_spanning(pw_slice_t* slice, pw_sched_entry_t* e, pw_op_t* op) {
  e->blocked = true;
  pw_slice_t* span = op->slice;
  if (pw_atomic_fetch_add_u32(&pw_op_cold(op)->parts_picked, 1) + 1 != span->span_count) return;
  for (uint32_t p = 0; p < span->span_count; ++p) {
    pw_atomic_fetch_add_u32(&span->span[p]->sched_admitted, 1);
  }
  pw_atomic_store_u32_release(&pw_op_cold(op)->appended, 1);
  pw_client_t* client = e->client;
  pw_sched_pop(slice, e);
  PW_REPORT(slice->runtime, pw__report_admit, slice, op);
  pw__dispatch_append(span, op->exec, op, op);
  pw_sched_admitted_in_order(client);
  /* The other parts drop it from their queues and unblock the client. */
  for (uint32_t p = 0; p < span->span_count; ++p) {
    if (span->span[p] != slice) pw__sched_kick(span->span[p]);
  }
}

/* Unblocks the clients whose spanning head another part has appended
 * meanwhile: drops it from their queues here (holder only). */
static void pw_sched_drop_appended(pw_slice_t* slice) {
  for (pw_sched_entry_t* e = slice->sched_active; e;) {
    pw_sched_entry_t* next = e->active_next; /* popping may deactivate |e| */
    if (e->blocked && pw_atomic_load_u32_acquire(&pw_op_cold(e->head)->appended)) {
      pw_sched_pop(slice, e);
    }
    e = next;
  }
}

/* Admits ops while the window has room (holder only). Every backlogged
 * client is a candidate, charged its device time so far (ops may complete
 * between two admissions). */
static void pw_sched_admit(pw_slice_t* slice) {
  pw_runtime_t* rt = slice->runtime;
  pw_sched_pool_t pool;
  pw_sched_take_incoming(slice, &pool);
  while (slice->sched_active != NULL &&
         pw_atomic_load_u32_acquire(&slice->sched_admitted) < rt->sched_window) {
    pw_sched_drop_appended(slice);
    pool.count = pool.best_count = 0;
    for (pw_sched_entry_t* e = slice->sched_active; e; e = e->active_next) {
      pw_sched_charge_pending(rt, e);
      if (!e->blocked && pw_sched_in_order(e)) pw_sched_pool_add(rt, &pool, e);
    }
    uint32_t n;
    pw_sched_entry_t** entries;
    const pw_sched_candidate_t* cands = pw_sched_pool_finish(rt, &pool, &n, &entries);
    if (n == 0) break; /* every backlogged client waits for another slice */
    pw_sched_entry_t* e = entries[pw_sched_policy_pick(rt, cands, n)];
    pw_op_t* op = e->head;
    if (op->slice->span_count > 1) {
      pw_sched_pick_spanning(slice, e, op);
      continue;
    }
    pw_client_t* client = e->client;
    pw_sched_pop(slice, e);
    pw_atomic_fetch_add_u32(&slice->sched_admitted, 1);
    PW_REPORT(rt, pw__report_admit, slice, op);
    pw__dispatch_append(slice, op->exec, op, op);
    pw_sched_admitted_in_order(client);
  }
  pw_sched_drop_appended(slice);
}

void pw__sched_kick(pw_slice_t* slice) {
  if (pw_atomic_fetch_or_u32(&slice->sched_state, PW_SCHED_PENDING) & PW_SCHED_BUSY) return;
  for (;;) {
    uint32_t state = pw_atomic_load_u32_acquire(&slice->sched_state);
    if ((state & PW_SCHED_BUSY) || !(state & PW_SCHED_PENDING)) return;
    if (pw_atomic_cas_u32(&slice->sched_state, &state, PW_SCHED_BUSY)) break;
  }
  for (;;) {
    pw_sched_admit(slice);
    uint32_t expected = PW_SCHED_BUSY;
    if (pw_atomic_cas_u32(&slice->sched_state, &expected, 0)) return;
    /* PENDING was set while admitting: clear it and go again. */
    pw_atomic_store_u32_release(&slice->sched_state, PW_SCHED_BUSY);
  }
}

/* Queues |op| for |slice|'s scheduler (one of its parts). */
void pw__sched_submit(pw_slice_t* slice, pw_op_t* op) {
  pw_op_t** link = pw_op_sched_link(op, pw_span_position(op->slice, slice));
  void* head = pw_atomic_load_ptr_relaxed(&slice->sched_incoming);
  do {
    *link = head;
  } while (!pw_atomic_cas_ptr(&slice->sched_incoming, &head, op));
}
