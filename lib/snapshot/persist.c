/* Persisting a complete snapshot (on the persist thread): each buffer's
 * raw bytes in chunks of chunk_bytes, each chunk one zstd-compressed,
 * checksummed data value; then the manifest, last, so that a crash at any
 * point leaves either a manifest whose values were all written before it
 * or no manifest (a torn snapshot, which load skips and prune deletes).
 * Then the store is pruned to the |keep| newest manifests. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "plugin/store_call.h"
#include "snapshot/snapshot_internal.h"

/* ---- listing ------------------------------------------------------------------ */

typedef struct pw_snap_list_ctx_t {
  pw_snapshotter_t* s;
  pw_snap_keys_t* keys;
  pw_status_t error;
} pw_snap_list_ctx_t;

static bool pw_snap_list_one(void* user, const char* key, uint64_t size) {
  (void)size;
  pw_snap_list_ctx_t* c = user;
  pw_snap_key_t k;
  if (strlen(key) > PW_STORE_KEY_MAX || !pw__snap_parse_key(c->s, key, &k.step, &k.manifest)) {
    return true;
  }
  pw_snap_keys_t* keys = c->keys;
  if (keys->count == keys->capacity) {
    uint32_t grown = keys->capacity ? keys->capacity * 2 : 16;
    pw_snap_key_t* items = NULL;
    c->error = pw_allocator_malloc(c->s->allocator, grown * sizeof(*items), 0, (void**)&items);
    if (c->error != NULL) return false;
    if (keys->count > 0) memcpy(items, keys->items, keys->count * sizeof(*items));
    pw_allocator_free(c->s->allocator, keys->items, keys->capacity * sizeof(*items));
    keys->items = items;
    keys->capacity = grown;
  }
  snprintf(k.key, sizeof(k.key), "%s", key);
  keys->items[keys->count++] = k;
  return true;
}

static int pw_snap_key_cmp(const void* a, const void* b) {
  const pw_snap_key_t* x = a;
  const pw_snap_key_t* y = b;
  if (x->step != y->step) return x->step > y->step ? -1 : 1;
  if (x->manifest != y->manifest) return x->manifest ? -1 : 1;
  return strcmp(x->key, y->key);
}

pw_status_t pw__snap_list_keys(pw_snapshotter_t* s, pw_snap_keys_t* out) {
  memset(out, 0, sizeof(*out));
  pw_snap_list_ctx_t ctx = {s, out, NULL};
  pw_status_t status = pw__store_list(&s->store, pw_snap_list_one, &ctx);
  if (status == NULL) status = ctx.error;
  else pw_status_free(ctx.error);
  if (status != NULL) {
    pw__snap_keys_free(s, out);
    return pw_status_annotate(status, "listing store '%s'", pw__store_name(&s->store));
  }
  if (out->count > 1) qsort(out->items, out->count, sizeof(*out->items), pw_snap_key_cmp);
  return NULL;
}

void pw__snap_keys_free(pw_snapshotter_t* s, pw_snap_keys_t* keys) {
  pw_allocator_free(s->allocator, keys->items, keys->capacity * sizeof(*keys->items));
  memset(keys, 0, sizeof(*keys));
}

/* ---- pruning --------------------------------------------------------------------- */

/* Removes |key|; a failure other than NOT_FOUND is kept in |*first| (the
 * first one) and logged. */
static void pw_snap_remove(pw_snapshotter_t* s, const char* key, pw_status_t* first) {
  pw_status_t status = pw__store_remove(&s->store, key);
  if (status != NULL && pw_status_code(status) != PW_STATUS_NOT_FOUND) {
    pw_log(&s->logger, PW_LOG_WARN, PW_SNAPSHOT_LOG, "pruning store '%s': removing '%s': %s",
           pw__store_name(&s->store), key, pw_status_message(status));
    if (first != NULL && *first == NULL) {
      *first = pw_status_annotate(status, "removing '%s'", key);
      return;
    }
  }
  pw_status_free(status);
}

pw_status_t pw__snap_prune(pw_snapshotter_t* s) {
  pw_snap_keys_t keys;
  PW_RETURN_IF_ERROR(pw__snap_list_keys(s, &keys));
  pw_status_t first = NULL;
  /* Kept: the |keep| newest steps that have a manifest. Everything else of
   * this prefix goes: older manifests first (so that their snapshot stops
   * being complete before its values go), then values of steps without a
   * kept manifest (an older snapshot's, or a torn one's). Only the persist
   * thread writes, and it is here, so no persist is half-way. Keys are
   * sorted by step descending, so the kept steps are the first manifests. */
  uint64_t kept[PW_SNAPSHOT_MAX_KEEP];
  uint32_t kept_count = 0;
  for (uint32_t i = 0; i < keys.count; ++i) {
    if (!keys.items[i].manifest) continue;
    if (kept_count < s->keep) {
      kept[kept_count++] = keys.items[i].step;
    } else {
      pw_snap_remove(s, keys.items[i].key, &first);
    }
  }
  for (uint32_t i = 0; i < keys.count; ++i) {
    if (keys.items[i].manifest) continue;
    bool keep = false;
    for (uint32_t k = 0; k < kept_count && !keep; ++k) keep = kept[k] == keys.items[i].step;
    if (!keep) pw_snap_remove(s, keys.items[i].key, &first);
  }
  pw__snap_keys_free(s, &keys);
  return first;
}

/* ---- writing ---------------------------------------------------------------------- */

/* Writes buffer |index|'s chunks; fills its manifest record. */
static pw_status_t pw_snap_put_buffer(pw_snapshotter_t* s, pw_snap_zstd_t* z, pw_snap_t* snap,
                                      uint32_t index, pw_snap_manifest_buffer_t* mb) {
  const pw_snap_buffer_t* b = &snap->buffers[index];
  memcpy(mb->name, b->name, sizeof(mb->name));
  mb->spec = b->spec;
  mb->mesh = b->mesh;
  mb->bytes = b->bytes;
  mb->xxh64 = pw__xxh64(b->data, (size_t)b->bytes, 0);
  uint64_t chunks = (b->bytes + s->chunk_bytes - 1) / s->chunk_bytes;
  if (chunks > 999999) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "buffer %u needs %" PRIu64 " chunks of %" PRIu64
                          " bytes (at most 999999): raise chunk_bytes",
                          index, chunks, s->chunk_bytes);
  }
  if (chunks > 0) {
    PW_RETURN_IF_ERROR(pw_allocator_calloc_array(s->allocator, (size_t)chunks,
                                                 sizeof(pw_snap_chunk_t), 0,
                                                 (void**)&mb->chunks));
  }
  mb->chunk_count = (uint32_t)chunks;
  for (uint32_t c = 0; c < mb->chunk_count; ++c) {
    pw_snap_chunk_t* k = &mb->chunks[c];
    k->offset = (uint64_t)c * s->chunk_bytes;
    k->raw_bytes = b->bytes - k->offset < s->chunk_bytes ? b->bytes - k->offset : s->chunk_bytes;
    const uint8_t* raw = (const uint8_t*)b->data + k->offset;
    k->raw_xxh64 = pw__xxh64(raw, (size_t)k->raw_bytes, 0);
    void* value = NULL;
    size_t size = 0, capacity = 0;
    PW_RETURN_IF_ERROR(pw__snap_value_encode(z, s->level, snap->step, index, k->offset, raw,
                                             (size_t)k->raw_bytes, &value, &size, &capacity));
    char key[PW_STORE_KEY_MAX + 1];
    pw__snap_value_key(s, snap->step, index, c, key);
    pw_status_t status = pw__store_put(&s->store, key, value, size);
    pw_allocator_free(s->allocator, value, capacity);
    PW_RETURN_IF_ERROR_CTX(status, "buffer %u chunk %u ('%s')", index, c, key);
    k->stored_bytes = size;
    mb->stored_bytes += size;
  }
  return NULL;
}

/* Removes what a failed persist of |snap| wrote (best effort). */
static void pw_snap_unwrite(pw_snapshotter_t* s, const pw_snap_manifest_t* m) {
  for (uint32_t i = 0; i < m->count; ++i) {
    for (uint32_t c = 0; c < m->buffers[i].chunk_count; ++c) {
      if (m->buffers[i].chunks[c].stored_bytes == 0) continue;
      char key[PW_STORE_KEY_MAX + 1];
      pw__snap_value_key(s, m->step, i, c, key);
      pw_snap_remove(s, key, NULL);
    }
  }
}

pw_status_t pw__snap_persist(pw_snapshotter_t* s, pw_snap_t* snap) {
  pw_snap_manifest_t m;
  memset(&m, 0, sizeof(m));
  m.step = snap->step;
  m.chunk_bytes = s->chunk_bytes;
  pw_status_t status = pw_allocator_calloc_array(s->allocator, snap->count,
                                                 sizeof(pw_snap_manifest_buffer_t), 0,
                                                 (void**)&m.buffers);
  if (status != NULL) return status;
  m.count = snap->count;
  pw_snap_zstd_t z = {s->allocator, NULL, NULL};
  uint64_t stored = 0;
  for (uint32_t i = 0; status == NULL && i < snap->count; ++i) {
    status = pw_snap_put_buffer(s, &z, snap, i, &m.buffers[i]);
    stored += m.buffers[i].stored_bytes;
  }
  pw__snap_zstd_deinit(&z);
  void* manifest = NULL;
  size_t manifest_size = 0;
  if (status == NULL) status = pw__snap_manifest_encode(s->allocator, &m, &manifest, &manifest_size);
  if (status == NULL) {
    char key[PW_STORE_KEY_MAX + 1];
    pw__snap_manifest_key(s, snap->step, key);
    status = pw_status_annotate(pw__store_put(&s->store, key, manifest, manifest_size),
                                "manifest '%s'", key);
    pw_allocator_free(s->allocator, manifest, manifest_size);
  }
  if (status != NULL) {
    pw_snap_unwrite(s, &m);
  } else {
    pthread_mutex_lock(&s->mutex);
    for (uint32_t i = 0; i < snap->count; ++i) snap->buffers[i].xxh64 = m.buffers[i].xxh64;
    snap->info.stored_bytes = stored + manifest_size;
    snap->info.persisted = true;
    pthread_mutex_unlock(&s->mutex);
  }
  pw__snap_manifest_free(s->allocator, &m);
  /* The snapshot is in the store (info.persisted); a failure to delete
   * older ones is still the persist's error: the store holds more than
   * |keep|. */
  if (status == NULL) status = pw_status_annotate(pw__snap_prune(s), "pruning older snapshots");
  return status;
}
