#define _POSIX_C_SOURCE 200809L
/* The bundled gang-scheduling policies. Each pick is O(backlogged clients);
 * the state they keep lives in the candidates' scratch words. */
#include <stdbool.h>
#include <stdint.h>

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

/* Weighted fair share by stride scheduling. scratch[0..1] is the client's
 * pass, a 128-bit count (low word first): the device time it has received
 * divided by its weight (scaled). 64 bits would wrap after 2^64 / SCALE
 * ns, about 208 device-days per unit of weight (73 minutes of a busy
 * 4,096-chip slice), and a wrapped pass looks like no service at all.
 * The backlogged client with the smallest pass goes next; a charge
 * advances the pass by device_ns * SCALE / weight. A client that becomes
 * backlogged again starts at no less than the smallest pass of the clients
 * already backlogged (the slice's virtual time), so idle time is not
 * banked as credit. */
#define PW_FAIR_SCALE 1024u
#define PW_FAIR_SCALE_BITS 10

static bool pw_fair_less(const uint64_t* a, const uint64_t* b) {
  return a[1] != b[1] ? a[1] < b[1] : a[0] < b[0];
}

static void pw_policy_fair_activate(void* self, pw_sched_candidate_t* client,
                                    const pw_sched_candidate_t* others,
                                    uint32_t other_count) {
  (void)self;
  if (other_count == 0) return;
  const uint64_t* vt = others[0].scratch;
  for (uint32_t i = 1; i < other_count; ++i) {
    if (pw_fair_less(others[i].scratch, vt)) vt = others[i].scratch;
  }
  if (pw_fair_less(client->scratch, vt)) {
    client->scratch[0] = vt[0];
    client->scratch[1] = vt[1];
  }
}

static uint32_t pw_policy_fair_pick(void* self, const pw_sched_candidate_t* c,
                                    uint32_t count) {
  (void)self;
  uint32_t best = 0;
  for (uint32_t i = 1; i < count; ++i) {
    if (pw_fair_less(c[i].scratch, c[best].scratch) ||
        (!pw_fair_less(c[best].scratch, c[i].scratch) &&
         c[i].head_sequence < c[best].head_sequence)) {
      best = i;
    }
  }
  return best;
}

static void pw_policy_fair_charge(void* self, pw_sched_candidate_t* client,
                                  uint64_t device_ns) {
  (void)self;
  uint64_t weight = client->weight ? client->weight : 1;
  /* device_ns * SCALE / weight in 128 bits: q * SCALE + r * SCALE / weight. */
  uint64_t q = device_ns / weight, r = device_ns % weight;
  uint64_t lo = (q << PW_FAIR_SCALE_BITS) + r * PW_FAIR_SCALE / weight;
  uint64_t hi = (q >> (64 - PW_FAIR_SCALE_BITS)) + (lo < (q << PW_FAIR_SCALE_BITS));
  uint64_t* pass = client->scratch;
  pass[0] += lo;
  pass[1] += hi + (pass[0] < lo);
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
