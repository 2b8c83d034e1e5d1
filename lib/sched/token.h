/* Internal to lib/sched: completion tokens (pw_completion_token_t,
 * sched/device.h). Every launch and copy hands its plugin a token as
 * |done_user|: the token's address plus the generation of its current use
 * in the low bits. The first completion claims it; a second one, or a
 * stale one of an earlier use, fails the claim (dispatch.c, transfer.c). */
#ifndef PW_SCHED_TOKEN_H_
#define PW_SCHED_TOKEN_H_

#include "sched/device.h"

_Static_assert(_Alignof(pw_completion_token_t) >= PW_TOKEN_GENERATIONS,
               "a token's generation lives in its address's low bits");

/* Arms |t| for a new use and returns the |done_user| that names it.
 * Plain stores, the state last with release: a completion that claims it
 * (even a stale one, see pw_token_claim) sees the device as it is now. */
static inline void* pw_token_arm(pw_completion_token_t* t) {
  uint32_t g = (t->generation + 1) % PW_TOKEN_GENERATIONS;
  t->generation = g;
  pw_atomic_store_u32_release(&t->state, g << 1);
  return (void*)((uintptr_t)t + g);
}

static inline pw_completion_token_t* pw_token_of(void* user) {
  return (pw_completion_token_t*)((uintptr_t)user & ~(uintptr_t)(PW_TOKEN_GENERATIONS - 1));
}

/* Claims the completion |user| names (the one locked instruction a
 * completion adds): true the first time; false for a second completion
 * of the same use, or a stale one of an earlier use. */
static inline bool pw_token_claim(void* user) {
  uint32_t armed = (uint32_t)((uintptr_t)user & (PW_TOKEN_GENERATIONS - 1)) << 1;
  return pw_atomic_cas_u32(&pw_token_of(user)->state, &armed, armed | 1);
}

/* Whether |user| names its token's current use (else it is stale). */
static inline bool pw_token_current(void* user) {
  uint32_t g = (uint32_t)((uintptr_t)user & (PW_TOKEN_GENERATIONS - 1));
  return (pw_atomic_load_u32_acquire(&pw_token_of(user)->state) >> 1) == g;
}

#endif /* PW_SCHED_TOKEN_H_ */
