/* The one-time check of a scheduler policy vtable; see policy_call.h. */
#include "plugin/policy_call.h"

#include "plugin/plug.h"

static const pw__plug_kind_t pw_policy_kind = {
    "scheduling policy", "(unnamed policy)", PW_SCHED_POLICY_VTABLE_SIZE_V1,
    offsetof(pw_sched_policy_vtable_t, name), false};

pw_status_t pw__policy_check(const pw_sched_policy_t* policy) {
  const void* vtable = policy ? (const void*)policy->vtable : NULL;
  PW_RETURN_IF_ERROR(pw__plug_check(&pw_policy_kind, vtable));
  if (!PW__PLUG_HAS(vtable, pw_sched_policy_vtable_t, pick)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "scheduling policy '%s' has no pick method (required)",
                          pw__plug_name(&pw_policy_kind, vtable));
  }
  return NULL;
}
