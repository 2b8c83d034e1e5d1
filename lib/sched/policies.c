#define _POSIX_C_SOURCE 200809L
/* The bundled gang-scheduling policies. Each pick is O(backlogged clients);
 * the state they keep lives in the candidates' scratch words. */
#include "pathways/scheduler.h"

/* FIFO: the client whose next op was submitted first. */
static uint32_t pw_policy_fifo_pick(void* self, const pw_sched_candidate_t* c,
                                    uint32_t count) {
  (void)self;
  uint32_t best = 0;
  for (uint32_t i = 1; i < count; ++i) {
    if (c[i].head_sequence < c[best].head_sequence) best = i;
  }
  return best;
}

static const pw_sched_policy_vtable_t pw_policy_fifo_vtable = {
    .struct_size = sizeof(pw_sched_policy_vtable_t),
    .name = "fifo",
    .wants_charge = false,
    .pick = pw_policy_fifo_pick,
};

pw_sched_policy_t pw_sched_policy_fifo(void) {
  pw_sched_policy_t p = {&pw_policy_fifo_vtable, NULL};
  return p;
}

/* Strict priority, FIFO among equal priorities. */
static uint32_t pw_policy_priority_pick(void* self, const pw_sched_candidate_t* c,
                                        uint32_t count) {
  (void)self;
  uint32_t best = 0;
  for (uint32_t i = 1; i < count; ++i) {
    if (c[i].priority > c[best].priority ||
        (c[i].priority == c[best].priority && c[i].head_sequence < c[best].head_sequence)) {
      best = i;
    }
  }
  return best;
}

static const pw_sched_policy_vtable_t pw_policy_priority_vtable = {
    .struct_size = sizeof(pw_sched_policy_vtable_t),
    .name = "priority",
    .wants_charge = false,
    .pick = pw_policy_priority_pick,
};

pw_sched_policy_t pw_sched_policy_priority(void) {
  pw_sched_policy_t p = {&pw_policy_priority_vtable, NULL};
  return p;
}

/* Weighted fair share by stride scheduling. scratch[0] is the client's
 * pass: the device time it has received divided by its weight (scaled).
 * The backlogged client with the smallest pass goes next; a charge
 * advances the pass by device_ns * SCALE / weight. A client that becomes
 * backlogged again starts at no less than the smallest pass of the clients
 * already backlogged (the slice's virtual time), so idle time is not
 * banked as credit. */
#define PW_FAIR_SCALE 1024u

static void pw_policy_fair_activate(void* self, pw_sched_candidate_t* client,
                                    const pw_sched_candidate_t* others,
                                    uint32_t other_count) {
  (void)self;
  if (other_count == 0) return;
  uint64_t vt = others[0].scratch[0];
  for (uint32_t i = 1; i < other_count; ++i) {
    if (others[i].scratch[0] < vt) vt = others[i].scratch[0];
  }
  if (client->scratch[0] < vt) client->scratch[0] = vt;
}

static uint32_t pw_policy_fair_pick(void* self, const pw_sched_candidate_t* c,
                                    uint32_t count) {
  (void)self;
  uint32_t best = 0;
  for (uint32_t i = 1; i < count; ++i) {
    if (c[i].scratch[0] < c[best].scratch[0] ||
        (c[i].scratch[0] == c[best].scratch[0] &&
         c[i].head_sequence < c[best].head_sequence)) {
      best = i;
    }
  }
  return best;
}

static void pw_policy_fair_charge(void* self, pw_sched_candidate_t* client,
                                  uint64_t device_ns) {
  (void)self;
  uint32_t weight = client->weight ? client->weight : 1;
  client->scratch[0] += device_ns * PW_FAIR_SCALE / weight;
}

static const pw_sched_policy_vtable_t pw_policy_fair_vtable = {
    .struct_size = sizeof(pw_sched_policy_vtable_t),
    .name = "fair_share",
    .wants_charge = true,
    .activate = pw_policy_fair_activate,
    .pick = pw_policy_fair_pick,
    .charge = pw_policy_fair_charge,
};

pw_sched_policy_t pw_sched_policy_fair_share(void) {
  pw_sched_policy_t p = {&pw_policy_fair_vtable, NULL};
  return p;
}
