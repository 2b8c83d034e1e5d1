/* libpathways: the gang scheduler's policy plug.
 *
 * Every physical slice has one slice sequence, the single order in which
 * its devices run gang ops. The scheduler decides in which order ops from
 * all executions and clients *enter* that sequence. With the default FIFO
 * policy and no window, ops enter in submission order as they are
 * submitted. With a policy and a window (pw_runtime_options_t.sched_window),
 * at most |window| ops of a slice are admitted but unfinished at a time; the
 * others wait in per-client queues (FIFO within a client, which keeps each
 * program's topological order), and each time an admission slot frees up
 * the policy picks the client whose next op enters. Whatever the policy,
 * any two devices of a slice run the ops they share in the same relative
 * order.
 *
 * A policy is a vtable (struct_size first, grows only at the end) with
 * per-slice state that only the admitting thread touches: policies need no
 * locking. The bundled ones: FIFO, strict priority, weighted fair share
 * (stride scheduling over measured device time).
 */
#ifndef PATHWAYS_SCHEDULER_H_
#define PATHWAYS_SCHEDULER_H_

#include "pathways/api.h"
#include "pathways/status.h"

PW_EXTERN_C_BEGIN

/* The most candidates one pick or activate call sees (see pick). */
#define PW_SCHED_MAX_CANDIDATES 128u

/* One backlogged client on a slice, as a policy sees it. */
typedef struct pw_sched_candidate_t {
  uint32_t client;        /* stable id of the client (its handle tag) */
  uint32_t weight;        /* pw_client_options_t.weight (>= 1) */
  int32_t priority;       /* pw_client_options_t.priority */
  uint64_t head_sequence; /* submission order of its next op (smaller = older) */
  uint32_t queued;        /* ops waiting */
  /* Two words of policy-private state for this (client, slice), zero when
   * the client is first seen on the slice; persists while the client lives. */
  uint64_t* scratch;
} pw_sched_candidate_t;

typedef struct pw_sched_policy_vtable_t {
  size_t struct_size;
  const char* name;
  /* The policy wants device time measured and charged (costs two clock
   * reads per device launch). */
  bool wants_charge;
  /* A client that had nothing queued on the slice has work again. Called
   * before the pick that may admit it, with every other backlogged client
   * in |others| (their state, read-only) while there are at most
   * PW_SCHED_MAX_CANDIDATES of them; with more, |others| summarises them:
   * the candidates |pick| chooses in each run of PW_SCHED_MAX_CANDIDATES
   * (so a reduction under pick's own order, as fair share's smallest pass,
   * is exact). Optional. */
  void (*activate)(void* self, pw_sched_candidate_t* client,
                   const pw_sched_candidate_t* others, uint32_t other_count);
  /* Returns the index (< count) of the candidate whose next op enters the
   * slice sequence. 1 <= |count| <= PW_SCHED_MAX_CANDIDATES. Candidates
   * come in the order the clients became backlogged. With more backlogged
   * clients than PW_SCHED_MAX_CANDIDATES, pick is called over each run of
   * that many and then over the runs' picks, so every client is seen; a
   * pick that returns the best under an order (every bundled one) chooses
   * exactly as over all of them at once. pick may therefore be called
   * several times per admission, and for activate's summary: it chooses,
   * it must not change state (that belongs in activate and charge).
   * Required. */
  uint32_t (*pick)(void* self, const pw_sched_candidate_t* candidates,
                   uint32_t count);
  /* |client| used |device_ns| of device time (summed over the devices of
   * one op). Only called with wants_charge. Optional. */
  void (*charge)(void* self, pw_sched_candidate_t* client, uint64_t device_ns);
  /* -- v2 methods start here -- */
} pw_sched_policy_vtable_t;

#define PW_SCHED_POLICY_VTABLE_SIZE_V1 PW_STRUCT_SIZE(pw_sched_policy_vtable_t, charge)

typedef struct pw_sched_policy_t {
  const pw_sched_policy_vtable_t* vtable;
  void* self; /* must outlive the runtime; shared by every slice */
} pw_sched_policy_t;

/* Bundled policies (static storage; self is NULL). */
PW_API pw_sched_policy_t pw_sched_policy_fifo(void);
/* Highest priority first; FIFO among equals. */
PW_API pw_sched_policy_t pw_sched_policy_priority(void);
/* Weighted fair share of measured device time (stride scheduling). A
 * client that goes idle and comes back starts from the slice's current
 * virtual time: it does not bank credit. */
PW_API pw_sched_policy_t pw_sched_policy_fair_share(void);

PW_EXTERN_C_END

#endif /* PATHWAYS_SCHEDULER_H_ */
