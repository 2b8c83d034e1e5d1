/* Each device's launch-descriptor argument arrays (pw_device_t.inputs,
 * outputs, lane_inputs, lane_outputs): the inline ones of
 * PW_BACKEND_MAX_PARAMS until an op with more arguments comes, then one
 * heap block the driving thread grows (between launches) and the slice
 * frees (slice.c). So a device's launch path allocates only the first
 * time it meets a wider op. */
#include "sched/dispatch_internal.h"

pw_status_t pw__device_grow_args(pw_device_t* d, uint32_t need) {
  if (d->fixed_args) {
    return pw_status_make(PW_STATUS_UNIMPLEMENTED,
                          "slice '%s' device %u: the debug mode without gang order launches "
                          "at most %d inputs and %d outputs, the op has %u",
                          d->slice->name, d->backend_device, PW_BACKEND_MAX_PARAMS,
                          PW_BACKEND_MAX_PARAMS, need);
  }
  pw_allocator_t a = d->slice->runtime->allocator;
  uint32_t cap = d->arg_capacity > PW_BACKEND_MAX_PARAMS ? d->arg_capacity : PW_BACKEND_MAX_PARAMS;
  while (cap < need) cap = cap > UINT32_MAX / 2 ? need : 2 * cap;
  size_t entry = 2 * sizeof(pw_backend_memory_t) + 2 * sizeof(pw_backend_memory_t*);
  void* block = NULL;
  pw_status_t status = pw_allocator_calloc_array(a, cap, entry, 0, &block);
  if (status != NULL) {
    return pw_status_annotate(status, "launch arguments (%u) on slice '%s' device %u", need,
                              d->slice->name, d->backend_device);
  }
  pw__device_free_args(d);
  d->arg_block = block;
  d->arg_capacity = cap;
  d->lane_inputs = (const pw_backend_memory_t**)block;
  d->lane_outputs = d->lane_inputs + cap;
  d->inputs = (pw_backend_memory_t*)(d->lane_outputs + cap);
  d->outputs = d->inputs + cap;
  d->launch.inputs = d->inputs;
  d->launch.outputs = d->outputs;
  d->host_launch.inputs = d->lane_inputs;
  d->host_launch.outputs = d->lane_outputs;
  return NULL;
}

void pw__device_free_args(pw_device_t* d) {
  if (d->arg_block != NULL) {
    size_t entry = 2 * sizeof(pw_backend_memory_t) + 2 * sizeof(pw_backend_memory_t*);
    pw_allocator_free(d->slice->runtime->allocator, d->arg_block, d->arg_capacity * entry);
  }
  d->arg_block = NULL;
  d->arg_capacity = PW_BACKEND_MAX_PARAMS;
  d->inputs = d->inline_inputs;
  d->outputs = d->inline_outputs;
  d->lane_inputs = d->inline_lane_inputs;
  d->lane_outputs = d->inline_lane_outputs;
}
