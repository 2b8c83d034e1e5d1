/* Snapshot records, the ring of held snapshots (ascending step, at most
 * |keep|), and the queries on it. Every field a query reads that a thread
 * writes later (info, xxh64) is written and read under the mutex; a held
 * snapshot's bytes never change. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "snapshot/snapshot_internal.h"

pw_status_t pw__snap_create(pw_snapshotter_t* s, uint64_t step, uint32_t count,
                            pw_snap_t** out_snap) {
  *out_snap = NULL;
  pw_snap_t* snap = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(s->allocator, sizeof(*snap), 0, (void**)&snap));
  snap->refs = 1;
  snap->step = step;
  snap->count = count;
  snap->info.struct_size = sizeof(snap->info);
  snap->info.step = step;
  snap->info.buffer_count = count;
  pw_status_t status = pw_allocator_calloc_array(s->allocator, count, sizeof(pw_snap_buffer_t),
                                                 0, (void**)&snap->buffers);
  if (status == NULL) status = pw_event_create(s->allocator, &snap->copied);
  if (status == NULL) status = pw_event_create(s->allocator, &snap->persisted);
  if (status != NULL) {
    pw__snap_release(s, snap);
    return status;
  }
  *out_snap = snap;
  return NULL;
}

static void pw_snap_free(pw_snapshotter_t* s, pw_snap_t* snap) {
  if (snap->buffers != NULL) {
    for (uint32_t i = 0; i < snap->count; ++i) {
      pw_snap_buffer_t* b = &snap->buffers[i];
      if (b->pin.id != 0) pw_status_ignore(pw_buffer_release(s->client, b->pin));
      if (b->data != NULL) pw_allocator_free(s->allocator, b->data, (size_t)b->bytes);
    }
    pw_allocator_free(s->allocator, snap->buffers, snap->count * sizeof(pw_snap_buffer_t));
  }
  /* Both events have completed by now, except when create or take failed
   * before handing them out (then nobody waits on them). */
  pw_event_release(snap->copied);
  pw_event_release(snap->persisted);
  pw_allocator_free(s->allocator, snap, sizeof(*snap));
}

void pw__snap_retain_locked(pw_snap_t* snap) { snap->refs++; }

void pw__snap_release(pw_snapshotter_t* s, pw_snap_t* snap) {
  if (snap == NULL) return;
  pthread_mutex_lock(&s->mutex);
  bool last = --snap->refs == 0;
  pthread_mutex_unlock(&s->mutex);
  if (last) pw_snap_free(s, snap);
}

pw_snap_t* pw__snap_ring_insert_locked(pw_snapshotter_t* s, pw_snap_t* snap) {
  snap->refs++;
  snap->state = PW_SNAP_HELD;
  uint32_t at = s->held;
  while (at > 0 && s->ring[at - 1]->step > snap->step) {
    s->ring[at] = s->ring[at - 1];
    --at;
  }
  s->ring[at] = snap;
  s->held++;
  if (s->held <= s->keep) return NULL;
  pw_snap_t* dropped = s->ring[0];
  memmove(s->ring, s->ring + 1, (s->held - 1) * sizeof(*s->ring));
  s->held--;
  dropped->state = PW_SNAP_GONE;
  return dropped;
}

bool pw__snap_step_busy_locked(pw_snapshotter_t* s, uint64_t step) {
  for (uint32_t i = 0; i < s->held; ++i) {
    if (s->ring[i]->step == step) return true;
  }
  if (s->copying != NULL && s->copying->step == step) return true;
  for (pw_snap_t* q = s->copy_head; q != NULL; q = q->next) {
    if (q->step == step) return true;
  }
  return false;
}

/* "10, 20, 30" (the last ones when they do not fit), or "none". */
static void pw_snap_format_held(pw_snapshotter_t* s, char* text, size_t capacity) {
  size_t n = 0;
  text[0] = '\0';
  if (s->held == 0) snprintf(text, capacity, "none");
  for (uint32_t i = 0; i < s->held && n + 1 < capacity; ++i) {
    int w = snprintf(text + n, capacity - n, "%s%" PRIu64, i ? ", " : "", s->ring[i]->step);
    if (w < 0) break;
    n += (size_t)w;
  }
}

pw_status_t pw__snap_find(pw_snapshotter_t* s, uint64_t step, pw_snap_t** out_snap) {
  *out_snap = NULL;
  pthread_mutex_lock(&s->mutex);
  for (uint32_t i = 0; i < s->held; ++i) {
    if (s->ring[i]->step == step) {
      *out_snap = s->ring[i];
      pw__snap_retain_locked(*out_snap);
      pthread_mutex_unlock(&s->mutex);
      return NULL;
    }
  }
  char held[160];
  pw_snap_format_held(s, held, sizeof(held));
  pthread_mutex_unlock(&s->mutex);
  return pw_status_make(PW_STATUS_NOT_FOUND,
                        "no complete snapshot of step %" PRIu64 " is held (held: %s)", step,
                        held);
}

/* ---- queries --------------------------------------------------------------------- */

pw_status_t pw_snapshotter_latest_step(pw_snapshotter_t* s, uint64_t* out_step) {
  if (s == NULL || out_step == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_snapshotter_latest_step: snapshotter or out_step is NULL");
  }
  *out_step = 0;
  pthread_mutex_lock(&s->mutex);
  bool any = s->held > 0;
  if (any) *out_step = s->ring[s->held - 1]->step;
  pthread_mutex_unlock(&s->mutex);
  if (!any) {
    return pw_status_make(PW_STATUS_NOT_FOUND,
                          "pw_snapshotter_latest_step: no complete snapshot is held");
  }
  return NULL;
}

pw_status_t pw_snapshotter_steps(pw_snapshotter_t* s, uint64_t* out_steps, uint32_t capacity,
                                 uint32_t* out_count) {
  if (s == NULL || out_count == NULL || (out_steps == NULL && capacity > 0)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_snapshotter_steps: snapshotter, out_count or out_steps is NULL");
  }
  pthread_mutex_lock(&s->mutex);
  *out_count = s->held;
  for (uint32_t i = 0; i < s->held && i < capacity; ++i) out_steps[i] = s->ring[i]->step;
  pthread_mutex_unlock(&s->mutex);
  return NULL;
}

pw_status_t pw_snapshot_info(pw_snapshotter_t* s, uint64_t step, pw_snapshot_info_t* out_info) {
  if (s == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_snapshot_info: snapshotter is NULL");
  }
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(out_info, pw_snapshot_info_t, PW_SNAPSHOT_INFO_SIZE_V1,
                                     "pw_snapshot_info"));
  pw_snap_t* snap = NULL;
  PW_RETURN_IF_ERROR_CTX(pw__snap_find(s, step, &snap), "pw_snapshot_info");
  pthread_mutex_lock(&s->mutex);
  pw_snapshot_info_t full = snap->info;
  pthread_mutex_unlock(&s->mutex);
  full.struct_size = sizeof(full);
  pw_struct_fill(out_info, &full, sizeof(full));
  pw__snap_release(s, snap);
  return NULL;
}

pw_status_t pw_snapshot_buffer_info(pw_snapshotter_t* s, uint64_t step, uint32_t index,
                                    pw_snapshot_buffer_info_t* out_info) {
  if (s == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_snapshot_buffer_info: snapshotter is NULL");
  }
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(out_info, pw_snapshot_buffer_info_t,
                                     PW_SNAPSHOT_BUFFER_INFO_SIZE_V1, "pw_snapshot_buffer_info"));
  pw_snap_t* snap = NULL;
  PW_RETURN_IF_ERROR_CTX(pw__snap_find(s, step, &snap), "pw_snapshot_buffer_info");
  pw_status_t status = NULL;
  if (index >= snap->count) {
    status = pw_status_make(PW_STATUS_OUT_OF_RANGE,
                            "pw_snapshot_buffer_info: buffer %u of step %" PRIu64
                            ", which has %u buffers",
                            index, step, snap->count);
  } else {
    pw_snapshot_buffer_info_t full;
    memset(&full, 0, sizeof(full));
    full.struct_size = sizeof(full);
    const pw_snap_buffer_t* b = &snap->buffers[index];
    memcpy(full.name, b->name, sizeof(full.name));
    full.spec = b->spec;
    full.mesh = b->mesh;
    full.bytes = b->bytes;
    pthread_mutex_lock(&s->mutex);
    full.xxh64 = b->xxh64;
    pthread_mutex_unlock(&s->mutex);
    pw_struct_fill(out_info, &full, sizeof(full));
  }
  pw__snap_release(s, snap);
  return status;
}

pw_status_t pw_snapshot_find_buffer(pw_snapshotter_t* s, uint64_t step, const char* name,
                                    uint32_t* out_index) {
  if (s == NULL || name == NULL || out_index == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_snapshot_find_buffer: snapshotter, name or out_index is NULL");
  }
  *out_index = 0;
  pw_snap_t* snap = NULL;
  PW_RETURN_IF_ERROR_CTX(pw__snap_find(s, step, &snap), "pw_snapshot_find_buffer");
  uint32_t i = 0;
  while (i < snap->count && strcmp(snap->buffers[i].name, name) != 0) ++i;
  pw_status_t status = NULL;
  if (i == snap->count) {
    status = pw_status_make(PW_STATUS_NOT_FOUND,
                            "pw_snapshot_find_buffer: step %" PRIu64 " has no buffer named '%s'",
                            step, name);
  } else {
    *out_index = i;
  }
  pw__snap_release(s, snap);
  return status;
}
