/* Restore: one pw_buffer_from_host per buffer, straight from the held
 * snapshot's host memory (the global array), so any sharding valid on the
 * target vslice's mesh works and nothing is copied twice on the host. The
 * snapshot is retained for the call: a concurrent drop from the ring
 * cannot free the bytes being read. */
#include <inttypes.h>
#include <string.h>

#include "snapshot/snapshot_internal.h"

/* Restores buffer |index| of |snap| (already checked in range). */
static pw_status_t pw_snap_restore_one(pw_snap_t* snap, uint32_t index, pw_client_t* client,
                                       pw_vslice_t vslice, const pw_array_spec_t* spec,
                                       pw_buffer_t* out_buffer) {
  const pw_snap_buffer_t* b = &snap->buffers[index];
  if (spec == NULL) spec = &b->spec;
  if (spec->dtype != b->spec.dtype || !pw_shape_equal(&spec->shape, &b->spec.shape)) {
    char had[96], asked[96];
    pw_shape_format(b->spec.dtype, &b->spec.shape, had, sizeof(had));
    pw_shape_format(spec->dtype, &spec->shape, asked, sizeof(asked));
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "buffer %u ('%s') of step %" PRIu64 " is %s; the spec asks for %s "
                          "(only the sharding may change)",
                          index, b->name, snap->step, had, asked);
  }
  PW_RETURN_IF_ERROR_CTX(pw_buffer_from_host(client, vslice, spec, b->data, (size_t)b->bytes,
                                             out_buffer),
                         "buffer %u ('%s') of step %" PRIu64, index, b->name, snap->step);
  return NULL;
}

pw_status_t pw_snapshot_restore(pw_snapshotter_t* s, uint64_t step, uint32_t index,
                                pw_client_t* client, pw_vslice_t vslice,
                                const pw_array_spec_t* spec, pw_buffer_t* out_buffer) {
  if (out_buffer != NULL) out_buffer->id = 0;
  if (s == NULL || client == NULL || out_buffer == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_snapshot_restore: snapshotter, client or out_buffer is NULL");
  }
  pw_snap_t* snap = NULL;
  PW_RETURN_IF_ERROR_CTX(pw__snap_find(s, step, &snap), "pw_snapshot_restore");
  pw_status_t status = NULL;
  if (index >= snap->count) {
    status = pw_status_make(PW_STATUS_OUT_OF_RANGE,
                            "buffer %u of step %" PRIu64 ", which has %u buffers", index, step,
                            snap->count);
  } else {
    status = pw_snap_restore_one(snap, index, client, vslice, spec, out_buffer);
  }
  pw__snap_release(s, snap);
  return pw_status_annotate(status, "pw_snapshot_restore");
}

pw_status_t pw_snapshot_restore_all(pw_snapshotter_t* s, uint64_t step, pw_client_t* client,
                                    pw_vslice_t vslice, const pw_array_spec_t* specs,
                                    uint32_t count, pw_buffer_t* out_buffers) {
  if (s == NULL || client == NULL || out_buffers == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_snapshot_restore_all: snapshotter, client or out_buffers is NULL");
  }
  memset(out_buffers, 0, (size_t)count * sizeof(*out_buffers));
  pw_snap_t* snap = NULL;
  PW_RETURN_IF_ERROR_CTX(pw__snap_find(s, step, &snap), "pw_snapshot_restore_all");
  pw_status_t status = NULL;
  if (count != snap->count) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "count %u, but the snapshot of step %" PRIu64 " has %u buffers",
                            count, step, snap->count);
  }
  uint32_t made = 0;
  for (; status == NULL && made < count; ++made) {
    status = pw_snap_restore_one(snap, made, client, vslice, specs ? &specs[made] : NULL,
                                 &out_buffers[made]);
  }
  if (status != NULL) {
    for (uint32_t i = 0; i < count; ++i) {
      if (out_buffers[i].id != 0) pw_status_ignore(pw_buffer_release(client, out_buffers[i]));
      out_buffers[i].id = 0;
    }
  }
  pw__snap_release(s, snap);
  return pw_status_annotate(status, "pw_snapshot_restore_all");
}
