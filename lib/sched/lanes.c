/* Host launch: the dispatcher's side of a backend that takes one host's
 * devices of a gang op in one launch_host call (include/pathways/
 * backend.h, "Host launch").
 *
 * When a slice's backend offers launch_host (and the runtime did not turn
 * it off, nor gang order), its devices are grouped at slice init into
 * lanes: maximal runs of devices consecutive in mesh order whose
 * device_info reports the same host. A lane is one unit of dispatch
 * (pw_device_t with lane_size > 1): one cursor in the slice sequence, one
 * count of an op's devices_remaining, one completion token per launch,
 * one launch_host per compute op, one done. Everything of the cursor
 * protocol, queue-ordered launch (a lane's queue depth is the least of
 * its devices'), deadlines and completion is unchanged: it only counts
 * lanes where it counted devices, so the controller's work per gang op
 * is per lane. What stays per device: output allocation before a gang
 * launches (pw_dispatch_allocate_outputs), a transfer part's copies
 * (transfer.c issues them for each device of the lane) and the charge of
 * device time (the backend's timing v2 busy_ns, summed over the lane's
 * devices, else the lane's span times its devices). A slice whose devices all
 * report different hosts keeps one unit per device and launch.
 *
 * The descriptor's shard arrays point into the buffers' own shard arrays
 * (mesh order: the lane's are consecutive), so a launch costs the
 * controller O(inputs + outputs), not O(devices). */
#include <string.h>

#include "plugin/backend_call.h"
#include "sched/dispatch_internal.h"

pw_status_t pw__lanes_hosts(pw_slice_t* slice, uint32_t** out_hosts) {
  pw_runtime_t* rt = slice->runtime;
  const pw_backend_t* b = slice->backend;
  *out_hosts = NULL;
  slice->lane_count = slice->device_count;
  slice->launch_host = NULL;
  if (rt->no_host_launch || rt->no_gang_order || slice->device_count < 2 ||
      !PW__BACKEND_HAS(b, launch_host)) {
    return NULL;
  }
  uint32_t* hosts = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc_array(rt->allocator, slice->device_count,
                                               sizeof(uint32_t), 0, (void**)&hosts));
  uint32_t lanes = 0;
  for (uint32_t i = 0; i < slice->device_count; ++i) {
    pw_backend_device_info_t info;
    memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    pw_status_t status = pw__backend_device_info(b, slice->first_device + i, &info);
    if (status != NULL) {
      char text[160];
      pw_status_format(status, text, sizeof(text));
      pw_status_free(status);
      pw_log(&rt->logger, PW_LOG_WARN, "dispatch",
             "backend '%s' device_info for device %u of slice '%s' failed (%s): its devices "
             "launch one by one",
             pw__backend_name(b), slice->first_device + i, slice->name, text);
      pw_allocator_free(rt->allocator, hosts, slice->device_count * sizeof(uint32_t));
      return NULL;
    }
    hosts[i] = info.host;
    if (i == 0 || hosts[i] != hosts[i - 1]) lanes++;
  }
  if (lanes == slice->device_count) {
    pw_allocator_free(rt->allocator, hosts, slice->device_count * sizeof(uint32_t));
    return NULL; /* no two neighbours share a host: nothing to group */
  }
  slice->lane_count = lanes;
  slice->launch_host = b->vtable->launch_host;
  *out_hosts = hosts;
  return NULL;
}

void pw__lanes_layout(pw_slice_t* slice, uint32_t* hosts) {
  /* (Before the launch descriptors are set: they read these.) */
  uint32_t m = 0;
  for (uint32_t i = 0; i < slice->lane_count; ++i) {
    pw_device_t* d = &slice->devices[i];
    uint32_t n = 1;
    while (hosts != NULL && m + n < slice->device_count && hosts[m + n] == hosts[m]) n++;
    d->mesh_index = m;
    d->backend_device = slice->first_device + m;
    d->lane_size = n;
    d->host_launch.host = hosts != NULL ? hosts[m] : slice->host;
    m += n;
  }
  if (hosts != NULL) {
    pw_allocator_free(slice->runtime->allocator, hosts, slice->device_count * sizeof(uint32_t));
  }
}

pw_status_t pw__lane_launch(pw_device_t* d, pw_op_t* op, void* user, uint64_t queue_seq) {
  pw_slice_t* slice = op->slice;
  uint32_t m = pw_op_mesh_index(op, d);
  for (uint32_t k = 0; k < op->input_count; ++k) d->lane_inputs[k] = &op->inputs[k]->shards[m];
  /* Allocated before inputs_ready was set (pw_dispatch_allocate_outputs). */
  for (uint32_t k = 0; k < op->output_count; ++k) {
    d->lane_outputs[k] = &op->outputs[k]->shards[m];
  }
  pw_backend_host_launch_t* l = &d->host_launch;
  l->executable = op->loaded;
  l->mesh_start = m;
  l->group_devices = slice->group_devices;
  l->group_size = slice->device_count;
  l->gang_id = pw_op_gang_id(op);
  l->input_count = op->input_count;
  l->output_count = op->output_count;
  l->queue_seq = queue_seq;
  l->done_user = user;
  l->node_arg = __builtin_expect(!(op->flags & PW_OP_NODE_ARG), 1) ? 0 : op->plan->node_arg;
  return d->slice->launch_host(slice->backend->self, l);
}
