/* Loading the newest intact snapshot back from the store. Manifests are
 * tried newest step first; each is verified completely (its checksum and
 * CBOR, then every data value's header, checksums and size against it, and
 * the buffer's XXH64 over the reassembled bytes) before it is held. A torn
 * or corrupt one is logged with its step and the reason, and the previous
 * one is tried. */
#include <inttypes.h>
#include <string.h>

#include "base/hash.h"
#include "plugin/store_call.h"
#include "snapshot/snapshot_internal.h"

/* Reads buffer |i| of |m| into |b| (its memory allocated here). */
static pw_status_t pw_snap_load_buffer(pw_snapshotter_t* s, pw_snap_zstd_t* z,
                                       const pw_snap_manifest_t* m, uint32_t i,
                                       pw_snap_buffer_t* b) {
  const pw_snap_manifest_buffer_t* mb = &m->buffers[i];
  memcpy(b->name, mb->name, sizeof(b->name));
  b->spec = mb->spec;
  b->mesh = mb->mesh;
  b->bytes = mb->bytes;
  b->xxh64 = mb->xxh64;
  if (b->bytes > 0) {
    PW_RETURN_IF_ERROR(pw_allocator_malloc(s->allocator, (size_t)b->bytes, 64, &b->data));
  }
  for (uint32_t c = 0; c < mb->chunk_count; ++c) {
    const pw_snap_chunk_t* k = &mb->chunks[c];
    char key[PW_STORE_KEY_MAX + 1];
    pw__snap_value_key(s, m->step, i, c, key);
    void* value = NULL;
    size_t size = 0;
    pw_status_t status = pw__store_get(&s->store, key, s->allocator, &value, &size);
    if (status != NULL && pw_status_code(status) == PW_STATUS_NOT_FOUND) {
      pw_status_free(status);
      return pw_status_make(PW_STATUS_DATA_LOSS, "data value '%s' is missing (torn snapshot)",
                            key);
    }
    PW_RETURN_IF_ERROR_CTX(status, "reading '%s'", key);
    status = pw__snap_value_decode(z, m->step, i, k, value, size, (uint8_t*)b->data + k->offset);
    pw_allocator_free(s->allocator, value, size);
    PW_RETURN_IF_ERROR_CTX(status, "data value '%s'", key);
  }
  if (pw__xxh64(b->data, (size_t)b->bytes, 0) != mb->xxh64) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "buffer %u: XXH64 of its bytes mismatches", i);
  }
  return NULL;
}

/* Reads and verifies the snapshot of |step| into a new record. */
static pw_status_t pw_snap_load_step(pw_snapshotter_t* s, uint64_t step, pw_snap_t** out_snap) {
  *out_snap = NULL;
  char key[PW_STORE_KEY_MAX + 1];
  pw__snap_manifest_key(s, step, key);
  void* bytes = NULL;
  size_t size = 0;
  PW_RETURN_IF_ERROR_CTX(pw__store_get(&s->store, key, s->allocator, &bytes, &size),
                         "reading '%s'", key);
  pw_snap_manifest_t m;
  pw_status_t status = NULL;
  if (size > PW_SNAPSHOT_MANIFEST_MAX) {
    memset(&m, 0, sizeof(m));
    status = pw_status_make(PW_STATUS_DATA_LOSS, "manifest of %zu bytes exceeds %zu", size,
                            PW_SNAPSHOT_MANIFEST_MAX);
  } else {
    status = pw__snap_manifest_decode(s->allocator, bytes, size, &m);
  }
  pw_allocator_free(s->allocator, bytes, size);
  if (status == NULL && m.step != step) {
    status = pw_status_make(PW_STATUS_DATA_LOSS, "manifest '%s' is of step %" PRIu64, key,
                            m.step);
  }
  pw_snap_t* snap = NULL;
  if (status == NULL) status = pw__snap_create(s, step, m.count, &snap);
  pw_snap_zstd_t z = {s->allocator, NULL, NULL};
  pw_time_t start = pw_clock_now();
  for (uint32_t i = 0; status == NULL && i < m.count; ++i) {
    status = pw_snap_load_buffer(s, &z, &m, i, &snap->buffers[i]);
    if (status == NULL) {
      snap->info.total_bytes += m.buffers[i].bytes;
      snap->info.stored_bytes += m.buffers[i].stored_bytes;
    }
  }
  pw__snap_zstd_deinit(&z);
  if (status == NULL) {
    snap->info.copy_ns = (uint64_t)(pw_clock_now() - start);
    snap->info.stored_bytes += size;
    snap->info.persisted = true;
    snap->info.loaded = true;
    pw_status_ignore(pw_event_signal(snap->copied));
    pw_status_ignore(pw_event_signal(snap->persisted));
    *out_snap = snap;
  } else {
    pw__snap_release(s, snap);
  }
  pw__snap_manifest_free(s->allocator, &m);
  return status;
}

/* True when |step| is held (complete, in the ring). */
static bool pw_snap_is_held(pw_snapshotter_t* s, uint64_t step) {
  pthread_mutex_lock(&s->mutex);
  bool held = false;
  for (uint32_t i = 0; i < s->held && !held; ++i) held = s->ring[i]->step == step;
  pthread_mutex_unlock(&s->mutex);
  return held;
}

pw_status_t pw_snapshotter_load_latest(pw_snapshotter_t* s, uint64_t* out_step) {
  if (s == NULL || out_step == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_snapshotter_load_latest: snapshotter or out_step is NULL");
  }
  *out_step = 0;
  if (s->store.vtable == NULL) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "pw_snapshotter_load_latest: the snapshotter has no store");
  }
  pw_snap_keys_t keys;
  PW_RETURN_IF_ERROR_CTX(pw__snap_list_keys(s, &keys), "pw_snapshotter_load_latest");
  uint32_t unusable = 0;
  pw_status_t status = NULL;
  bool found = false;
  for (uint32_t i = 0; !found && status == NULL && i < keys.count; ++i) {
    if (!keys.items[i].manifest) continue;
    uint64_t step = keys.items[i].step;
    if (pw_snap_is_held(s, step)) {
      *out_step = step;
      found = true;
      break;
    }
    pw_snap_t* snap = NULL;
    pw_status_t why = pw_snap_load_step(s, step, &snap);
    if (why != NULL && pw_status_code(why) == PW_STATUS_RESOURCE_EXHAUSTED) {
      status = pw_status_annotate(why, "loading the snapshot of step %" PRIu64, step);
      break;
    }
    if (why != NULL) {
      ++unusable;
      pw_log(&s->logger, PW_LOG_WARN, PW_SNAPSHOT_LOG,
             "snapshot step %" PRIu64 " in store '%s' is unusable: %s; trying the previous one",
             step, pw__store_name(&s->store), pw_status_message(why));
      pw_status_free(why);
      continue;
    }
    pthread_mutex_lock(&s->mutex);
    pw_snap_t* dropped = NULL;
    bool busy = pw__snap_step_busy_locked(s, step);
    if (!busy) dropped = pw__snap_ring_insert_locked(s, snap);
    pthread_mutex_unlock(&s->mutex);
    pw__snap_release(s, dropped);
    pw__snap_release(s, snap);
    *out_step = step;
    found = true;
  }
  pw__snap_keys_free(s, &keys);
  if (status != NULL) return pw_status_annotate(status, "pw_snapshotter_load_latest");
  if (!found) {
    return pw_status_make(PW_STATUS_NOT_FOUND,
                          "pw_snapshotter_load_latest: no intact snapshot with prefix '%s' in "
                          "store '%s' (%u unusable)",
                          s->prefix, pw__store_name(&s->store), unusable);
  }
  return NULL;
}
