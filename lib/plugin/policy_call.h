/* Internal: checked calls into a scheduler policy vtable (scheduler.h), as
 * backend_call.h is for backends. pw__policy_check runs once, when the
 * runtime is created; the per-admission calls below are static inline (the
 * scheduler calls them per op) and rely on it: every v1 method lies inside
 * struct_size, so they only test for NULL. A method added after v1 must be
 * read with PW__PLUG_HAS. */
#ifndef PW_PLUGIN_POLICY_CALL_H_
#define PW_PLUGIN_POLICY_CALL_H_

#include "pathways/scheduler.h"

/* OK if |policy| has a vtable of at least PW_SCHED_POLICY_VTABLE_SIZE_V1
 * bytes with a pick method; INVALID_ARGUMENT naming the policy otherwise. */
pw_status_t pw__policy_check(const pw_sched_policy_t* policy);

/* The policy's pick over |count| >= 1 candidates; an index out of range
 * (a misbehaving policy) is read as 0, so it cannot break the order. */
static inline uint32_t pw__policy_pick(const pw_sched_policy_t* policy,
                                       const pw_sched_candidate_t* candidates,
                                       uint32_t count) {
  uint32_t pick = policy->vtable->pick(policy->self, candidates, count);
  return pick < count ? pick : 0;
}

/* Whether the policy has the optional activate (callers gather |others|
 * only then). */
static inline bool pw__policy_has_activate(const pw_sched_policy_t* policy) {
  return policy->vtable->activate != NULL;
}

static inline void pw__policy_activate(const pw_sched_policy_t* policy,
                                       pw_sched_candidate_t* client,
                                       const pw_sched_candidate_t* others,
                                       uint32_t other_count) {
  if (policy->vtable->activate != NULL) {
    policy->vtable->activate(policy->self, client, others, other_count);
  }
}

/* Charges |device_ns| to |client|; a no-op for a policy without charge. */
static inline void pw__policy_charge(const pw_sched_policy_t* policy,
                                     pw_sched_candidate_t* client, uint64_t device_ns) {
  if (policy->vtable->charge != NULL) policy->vtable->charge(policy->self, client, device_ns);
}

/* wants_charge, false when unset. */
static inline bool pw__policy_wants_charge(const pw_sched_policy_t* policy) {
  return policy->vtable->wants_charge;
}

#endif /* PW_PLUGIN_POLICY_CALL_H_ */
