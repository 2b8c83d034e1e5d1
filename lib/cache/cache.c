#define _POSIX_C_SOURCE 200809L
/* The compilation cache: memory tier, single flight, persistent tier.
 *
 * One mutex guards the index (a chained hash table keyed by the key's
 * first 64 bits, which are already hash bits), the LRU list and the
 * entries' states; fills, store reads and writes and (de)compression run
 * outside it. An entry is FILLING while one lookup computes it; others
 * that find it wait on |filled| and then share the value or the error.
 * The index holds one reference to each entry in it; lookups hand out
 * their own. Counters are atomics so that paths outside the lock can
 * count without taking it. */
#include <pthread.h>
#include <string.h>

#include "base/atomics.h"
#include "cache/cache_internal.h"
#include "pathways/clock.h"

#define PW_CACHE_DEFAULT_MEMORY ((uint64_t)256 << 20)
#define PW_CACHE_DEFAULT_LEVEL 3

enum { PW_ENTRY_FILLING = 0, PW_ENTRY_READY = 1, PW_ENTRY_FAILED = 2 };

struct pw_cache_entry_s {
  pw_atomic_u32_t refs;
  pw_allocator_t allocator;
  pw_cache_key_t key;
  int state;                      /* cache lock */
  pw_status_t error;              /* FAILED: for the waiters to clone */
  void* data;
  size_t size;
  uint64_t fill_ns;
  struct pw_cache_entry_s* bucket_next;
  struct pw_cache_entry_s* lru_prev;   /* toward most recent */
  struct pw_cache_entry_s* lru_next;   /* toward least recent */
  bool indexed;
  bool in_lru;
};

typedef struct pw_cache_counters_t {
  pw_atomic_u64_t lookups, memory_hits, store_hits, misses, shared, fill_errors, bad_entries,
      store_errors, store_writes, store_bytes_written, store_raw_bytes_written,
      memory_evictions, fill_ns, fill_ns_saved;
} pw_cache_counters_t;

struct pw_cache_s {
  pw_atomic_u32_t refs;
  pw_allocator_t allocator;
  pw_logger_t logger;
  uint64_t memory_limit;
  pw_store_t store;               /* vtable NULL: none */
  int level;
  pthread_mutex_t zstd_lock;      /* guards |zstd|; contended users make their own */
  pw_cache_zstd_t zstd;
  pthread_mutex_t lock;
  pthread_cond_t filled;
  pw_cache_entry_t** buckets;
  uint32_t bucket_count;          /* power of two */
  uint32_t indexed;
  pw_cache_entry_t* lru_head;     /* most recently used */
  pw_cache_entry_t* lru_tail;
  uint64_t memory_bytes;          /* values in the LRU */
  uint64_t memory_entries;
  pw_cache_counters_t n;
};

static void pw_count(pw_atomic_u64_t* counter, uint64_t value) {
  pw_atomic_fetch_add_u64(counter, value);
}

void pw_cache_key_format(const pw_cache_key_t* key, char out[33]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    out[2 * i] = digits[key->bytes[i] >> 4];
    out[2 * i + 1] = digits[key->bytes[i] & 15];
  }
  out[32] = '\0';
}

void pw_cache_options_init(pw_cache_options_t* options) {
  memset(options, 0, sizeof(*options));
  options->struct_size = sizeof(*options);
}

const pw_logger_t* pw__cache_logger(const pw_cache_t* cache) { return &cache->logger; }

/* ---- entries -------------------------------------------------------------- */

static void pw_entry_retain(pw_cache_entry_t* e) { pw_atomic_fetch_add_u32(&e->refs, 1); }

void pw_cache_entry_release(pw_cache_entry_t* e) {
  if (e == NULL || pw_atomic_fetch_sub_u32(&e->refs, 1) != 1) return;
  pw_atomic_fence_acquire();
  if (e->data) pw_allocator_free(e->allocator, e->data, e->size);
  pw_status_free(e->error);
  pw_allocator_t a = e->allocator;
  pw_allocator_free(a, e, sizeof(*e));
}

const void* pw_cache_entry_data(const pw_cache_entry_t* entry, size_t* out_size) {
  if (out_size) *out_size = entry ? entry->size : 0;
  return entry ? entry->data : NULL;
}

/* ---- index and LRU (cache lock held) -------------------------------------- */

static uint32_t pw_cache_bucket(const pw_cache_t* c, const pw_cache_key_t* key) {
  uint64_t h;
  memcpy(&h, key->bytes, sizeof(h));
  return (uint32_t)(h ^ (h >> 32)) & (c->bucket_count - 1);
}

static pw_cache_entry_t* pw_cache_find(const pw_cache_t* c, const pw_cache_key_t* key) {
  for (pw_cache_entry_t* e = c->buckets[pw_cache_bucket(c, key)]; e; e = e->bucket_next) {
    if (memcmp(e->key.bytes, key->bytes, 16) == 0) return e;
  }
  return NULL;
}

/* Doubles the table when it is full; failing to grow only costs speed. */
static void pw_cache_maybe_grow(pw_cache_t* c) {
  if (c->indexed < c->bucket_count || c->bucket_count >= (1u << 30)) return;
  uint32_t old_count = c->bucket_count;
  pw_cache_entry_t** old = c->buckets;
  pw_cache_entry_t** grown = NULL;
  if (pw_allocator_calloc_array(c->allocator, (size_t)old_count * 2, sizeof(*grown), 0,
                                (void**)&grown) != NULL) {
    return; /* the status is dropped deliberately: growth is optional */
  }
  c->buckets = grown;
  c->bucket_count = old_count * 2;
  for (uint32_t b = 0; b < old_count; ++b) {
    pw_cache_entry_t* e = old[b];
    while (e) {
      pw_cache_entry_t* next = e->bucket_next;
      uint32_t nb = pw_cache_bucket(c, &e->key);
      e->bucket_next = grown[nb];
      grown[nb] = e;
      e = next;
    }
  }
  pw_allocator_free(c->allocator, old, (size_t)old_count * sizeof(*old));
}

static void pw_cache_index_add(pw_cache_t* c, pw_cache_entry_t* e) {
  pw_cache_maybe_grow(c);
  uint32_t b = pw_cache_bucket(c, &e->key);
  e->bucket_next = c->buckets[b];
  c->buckets[b] = e;
  e->indexed = true;
  c->indexed++;
}

static void pw_cache_lru_unlink(pw_cache_t* c, pw_cache_entry_t* e) {
  if (!e->in_lru) return;
  if (e->lru_prev) e->lru_prev->lru_next = e->lru_next; else c->lru_head = e->lru_next;
  if (e->lru_next) e->lru_next->lru_prev = e->lru_prev; else c->lru_tail = e->lru_prev;
  e->lru_prev = e->lru_next = NULL;
  e->in_lru = false;
  c->memory_bytes -= e->size;
  c->memory_entries--;
}

static void pw_cache_lru_push(pw_cache_t* c, pw_cache_entry_t* e) {
  e->lru_prev = NULL;
  e->lru_next = c->lru_head;
  if (c->lru_head) c->lru_head->lru_prev = e; else c->lru_tail = e;
  c->lru_head = e;
  e->in_lru = true;
  c->memory_bytes += e->size;
  c->memory_entries++;
}

/* Takes |e| out of the index and the LRU and drops the index's reference.
 * Returns the entry to release after unlocking (or NULL). */
static pw_cache_entry_t* pw_cache_unindex(pw_cache_t* c, pw_cache_entry_t* e) {
  if (!e->indexed) return NULL;
  pw_cache_entry_t** link = &c->buckets[pw_cache_bucket(c, &e->key)];
  while (*link != e) link = &(*link)->bucket_next;
  *link = e->bucket_next;
  e->bucket_next = NULL;
  e->indexed = false;
  c->indexed--;
  pw_cache_lru_unlink(c, e);
  return e;
}

/* Publishes a filled |e| in the memory tier and evicts past the bound.
 * Evicted entries are chained through bucket_next into |*out_release|. */
static void pw_cache_publish(pw_cache_t* c, pw_cache_entry_t* e, pw_cache_entry_t** out_release) {
  if (e->size > c->memory_limit) {
    pw_cache_entry_t* gone = pw_cache_unindex(c, e);
    if (gone) { gone->bucket_next = *out_release; *out_release = gone; }
    return;
  }
  pw_cache_lru_push(c, e);
  while (c->memory_bytes > c->memory_limit && c->lru_tail != NULL && c->lru_tail != e) {
    pw_cache_entry_t* gone = pw_cache_unindex(c, c->lru_tail);
    gone->bucket_next = *out_release;
    *out_release = gone;
    pw_count(&c->n.memory_evictions, 1);
  }
}

static void pw_cache_release_chain(pw_cache_entry_t* chain) {
  while (chain) {
    pw_cache_entry_t* next = chain->bucket_next;
    chain->bucket_next = NULL;
    pw_cache_entry_release(chain);
    chain = next;
  }
}

/* ---- create / release ----------------------------------------------------- */

pw_status_t pw_cache_create(const pw_cache_options_t* options, pw_cache_t** out_cache) {
  pw_store_t store = {NULL, NULL};
  if (options && options->struct_size >= PW_CACHE_OPTIONS_SIZE_V1) store = options->store;
  if (out_cache == NULL || options == NULL || options->struct_size < PW_CACHE_OPTIONS_SIZE_V1) {
    if (out_cache) *out_cache = NULL;
    pw__store_destroy(&store);
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cache_create: options or out_cache is NULL, or options "
                          "struct_size is smaller than v1 (%zu)",
                          (size_t)PW_CACHE_OPTIONS_SIZE_V1);
  }
  *out_cache = NULL;
  if (store.vtable != NULL) {
    pw_status_t status = pw__store_check(&store);
    if (status != NULL) {
      pw__store_destroy(&store);
      return pw_status_annotate(status, "pw_cache_create");
    }
  }
  pw_allocator_t a = pw_allocator_is_valid(options->allocator) ? options->allocator
                                                               : pw_allocator_system();
  pw_cache_t* c = NULL;
  pw_status_t status = pw_allocator_calloc(a, sizeof(*c), 0, (void**)&c);
  if (status == NULL) {
    status = pw_allocator_calloc_array(a, 64, sizeof(pw_cache_entry_t*), 0, (void**)&c->buckets);
    if (status != NULL) pw_allocator_free(a, c, sizeof(*c));
  }
  if (status != NULL) {
    pw__store_destroy(&store);
    return status;
  }
  pw_atomic_init_u32(&c->refs, 1);
  c->allocator = a;
  c->logger = options->logger.fn ? options->logger : pw_logger_default();
  c->memory_limit = options->memory_bytes ? options->memory_bytes : PW_CACHE_DEFAULT_MEMORY;
  c->store = store;
  c->level = options->compression_level ? options->compression_level : PW_CACHE_DEFAULT_LEVEL;
  c->bucket_count = 64;
  c->zstd.allocator = a;
  pthread_mutex_init(&c->zstd_lock, NULL);
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->filled, NULL);
  *out_cache = c;
  return NULL;
}

void pw_cache_retain(pw_cache_t* cache) {
  if (cache) pw_atomic_fetch_add_u32(&cache->refs, 1);
}

void pw_cache_release(pw_cache_t* cache) {
  if (cache == NULL || pw_atomic_fetch_sub_u32(&cache->refs, 1) != 1) return;
  pw_atomic_fence_acquire();
  pw_cache_t* c = cache;
  for (uint32_t b = 0; b < c->bucket_count; ++b) {
    pw_cache_entry_t* e = c->buckets[b];
    while (e) {
      pw_cache_entry_t* next = e->bucket_next;
      e->indexed = false;
      e->bucket_next = NULL;
      pw_cache_entry_release(e);
      e = next;
    }
  }
  pw_allocator_free(c->allocator, c->buckets, (size_t)c->bucket_count * sizeof(*c->buckets));
  pw__store_destroy(&c->store);
  pw__cache_zstd_deinit(&c->zstd);
  pthread_mutex_destroy(&c->zstd_lock);
  pthread_cond_destroy(&c->filled);
  pthread_mutex_destroy(&c->lock);
  pw_allocator_free(c->allocator, c, sizeof(*c));
}

/* ---- the persistent tier -------------------------------------------------- */

/* Tries the store for |e|'s key: true with e->data filled on a good entry.
 * Bad entries and store errors are logged and counted, and are misses (the
 * value the miss computes then replaces a bad entry). */
static bool pw_cache_from_store(pw_cache_t* c, pw_cache_entry_t* e) {
  char hex[33];
  pw_cache_key_format(&e->key, hex);
  void* raw = NULL;
  size_t raw_size = 0;
  pw_status_t status = pw__store_get(&c->store, hex, c->allocator, &raw, &raw_size);
  if (status != NULL) {
    if (pw_status_code(status) != PW_STATUS_NOT_FOUND) {
      pw_count(&c->n.store_errors, 1);
      pw_log(&c->logger, PW_LOG_WARN, "cache", "store '%s': reading entry %s failed: %s",
             pw__store_name(&c->store), hex, pw_status_message(status));
    }
    pw_status_free(status);
    return false;
  }
  bool own = pthread_mutex_trylock(&c->zstd_lock) == 0;
  status = pw__cache_entry_decode(&e->key, raw, raw_size, c->allocator, own ? &c->zstd : NULL,
                                  &e->data, &e->size, &e->fill_ns);
  if (own) pthread_mutex_unlock(&c->zstd_lock);
  if (raw) pw_allocator_free(c->allocator, raw, raw_size);
  if (status == NULL) return true;
  if (pw_status_code(status) == PW_STATUS_DATA_LOSS) {
    pw_count(&c->n.bad_entries, 1);
    pw_log(&c->logger, PW_LOG_WARN, "cache",
           "store '%s': entry %s is unusable (%s); computing it again", pw__store_name(&c->store),
           hex, pw_status_message(status));
  } else {
    pw_count(&c->n.store_errors, 1);
    pw_log(&c->logger, PW_LOG_WARN, "cache", "store '%s': decoding entry %s failed: %s",
           pw__store_name(&c->store), hex, pw_status_message(status));
  }
  pw_status_free(status);
  return false;
}

static void pw_cache_to_store(pw_cache_t* c, const pw_cache_entry_t* e) {
  char hex[33];
  pw_cache_key_format(&e->key, hex);
  void* framed = NULL;
  size_t size = 0, capacity = 0;
  bool own = pthread_mutex_trylock(&c->zstd_lock) == 0;
  pw_status_t status =
      pw__cache_entry_encode(&e->key, e->data, e->size, e->fill_ns, c->level, c->allocator,
                             own ? &c->zstd : NULL, &framed, &size, &capacity);
  if (own) pthread_mutex_unlock(&c->zstd_lock);
  if (status == NULL) {
    status = pw__store_put(&c->store, hex, framed, size);
    pw_allocator_free(c->allocator, framed, capacity);
  }
  if (status != NULL) {
    pw_count(&c->n.store_errors, 1);
    pw_log(&c->logger, PW_LOG_WARN, "cache", "store '%s': writing entry %s failed: %s",
           pw__store_name(&c->store), hex, pw_status_message(status));
    pw_status_free(status);
    return;
  }
  pw_count(&c->n.store_writes, 1);
  pw_count(&c->n.store_bytes_written, size);
  pw_count(&c->n.store_raw_bytes_written, e->size);
}

/* ---- lookups -------------------------------------------------------------- */

static pw_status_t pw_cache_run_fill(pw_cache_t* c, pw_cache_entry_t* e, pw_cache_fill_fn_t fill,
                                     void* user) {
  pw_time_t t0 = pw_clock_now();
  void* data = NULL;
  size_t size = 0;
  pw_status_t status = fill(user, c->allocator, &data, &size);
  uint64_t took = (uint64_t)(pw_clock_now() - t0);
  pw_count(&c->n.misses, 1);
  pw_count(&c->n.fill_ns, took);
  if (status == NULL && data == NULL && size != 0) {
    status = pw_status_make(PW_STATUS_INTERNAL, "cache fill returned %zu bytes at NULL", size);
  }
  if (status != NULL) {
    pw_count(&c->n.fill_errors, 1);
    return status;
  }
  e->data = data;
  e->size = size;
  e->fill_ns = took;
  return NULL;
}

pw_status_t pw_cache_lookup(pw_cache_t* c, const pw_cache_key_t* key, pw_cache_fill_fn_t fill,
                            void* user, pw_cache_entry_t** out_entry,
                            pw_cache_origin_t* out_origin) {
  if (out_entry) *out_entry = NULL;
  if (c == NULL || key == NULL || fill == NULL || out_entry == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cache_lookup: cache, key, fill or out_entry is NULL");
  }
  pw_count(&c->n.lookups, 1);
  pthread_mutex_lock(&c->lock);
  pw_cache_entry_t* e = pw_cache_find(c, key);
  if (e != NULL) {
    pw_entry_retain(e);
    bool waited = e->state == PW_ENTRY_FILLING;
    while (e->state == PW_ENTRY_FILLING) pthread_cond_wait(&c->filled, &c->lock);
    if (e->state == PW_ENTRY_READY) {
      if (!waited && e->in_lru) {  /* move to the front */
        pw_cache_lru_unlink(c, e);
        pw_cache_lru_push(c, e);
      }
      pthread_mutex_unlock(&c->lock);
      pw_count(waited ? &c->n.shared : &c->n.memory_hits, 1);
      pw_count(&c->n.fill_ns_saved, e->fill_ns);
      if (out_origin) *out_origin = waited ? PW_CACHE_FROM_SHARED : PW_CACHE_FROM_MEMORY;
      *out_entry = e;
      return NULL;
    }
    pw_status_t status = pw_status_clone(e->error);
    pthread_mutex_unlock(&c->lock);
    pw_cache_entry_release(e);
    return status;
  }
  pw_status_t status = pw_allocator_calloc(c->allocator, sizeof(*e), 0, (void**)&e);
  if (status != NULL) {
    pthread_mutex_unlock(&c->lock);
    return status;
  }
  pw_atomic_init_u32(&e->refs, 2); /* the index's and ours */
  e->allocator = c->allocator;
  e->key = *key;
  e->state = PW_ENTRY_FILLING;
  pw_cache_index_add(c, e);
  pthread_mutex_unlock(&c->lock);

  pw_cache_origin_t origin = PW_CACHE_FROM_FILL;
  if (c->store.vtable != NULL && pw_cache_from_store(c, e)) {
    origin = PW_CACHE_FROM_STORE;
    pw_count(&c->n.store_hits, 1);
    pw_count(&c->n.fill_ns_saved, e->fill_ns);
  } else {
    status = pw_cache_run_fill(c, e, fill, user);
  }

  pw_cache_entry_t* release = NULL;
  pthread_mutex_lock(&c->lock);
  if (status == NULL) {
    e->state = PW_ENTRY_READY;
    pw_cache_publish(c, e, &release);
  } else {
    e->error = pw_status_clone(status);
    e->state = PW_ENTRY_FAILED;
    release = pw_cache_unindex(c, e);
  }
  pthread_cond_broadcast(&c->filled);
  pthread_mutex_unlock(&c->lock);
  pw_cache_release_chain(release);
  if (status != NULL) {
    pw_cache_entry_release(e);
    return status;
  }
  if (origin == PW_CACHE_FROM_FILL && c->store.vtable != NULL) pw_cache_to_store(c, e);
  if (out_origin) *out_origin = origin;
  *out_entry = e;
  return NULL;
}

pw_status_t pw_cache_invalidate(pw_cache_t* c, const pw_cache_key_t* key) {
  if (c == NULL || key == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_cache_invalidate: cache or key is NULL");
  }
  pthread_mutex_lock(&c->lock);
  pw_cache_entry_t* e = pw_cache_find(c, key);
  pw_cache_entry_t* release = NULL;
  if (e != NULL && e->state == PW_ENTRY_READY) release = pw_cache_unindex(c, e);
  pthread_mutex_unlock(&c->lock);
  pw_cache_entry_release(release);
  if (c->store.vtable == NULL) return NULL;
  char hex[33];
  pw_cache_key_format(key, hex);
  pw_status_t status = pw__store_remove(&c->store, hex);
  if (pw_status_code(status) == PW_STATUS_NOT_FOUND) {
    pw_status_free(status);
    status = NULL;
  }
  return status ? pw_status_annotate(status, "invalidating cache entry %s", hex) : NULL;
}

pw_status_t pw_cache_stats(pw_cache_t* c, pw_cache_stats_t* out) {
  if (c == NULL || out == NULL || out->struct_size < PW_CACHE_STATS_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cache_stats: cache or out_stats is NULL, or its struct_size is "
                          "smaller than v1 (%zu)",
                          (size_t)PW_CACHE_STATS_SIZE_V1);
  }
  pw_cache_stats_t s;
  memset(&s, 0, sizeof(s));
  s.struct_size = out->struct_size < sizeof(s) ? out->struct_size : sizeof(s);
  s.lookups = pw_atomic_load_u64_relaxed(&c->n.lookups);
  s.memory_hits = pw_atomic_load_u64_relaxed(&c->n.memory_hits);
  s.store_hits = pw_atomic_load_u64_relaxed(&c->n.store_hits);
  s.misses = pw_atomic_load_u64_relaxed(&c->n.misses);
  s.shared = pw_atomic_load_u64_relaxed(&c->n.shared);
  s.fill_errors = pw_atomic_load_u64_relaxed(&c->n.fill_errors);
  s.bad_entries = pw_atomic_load_u64_relaxed(&c->n.bad_entries);
  s.store_errors = pw_atomic_load_u64_relaxed(&c->n.store_errors);
  s.store_writes = pw_atomic_load_u64_relaxed(&c->n.store_writes);
  s.store_bytes_written = pw_atomic_load_u64_relaxed(&c->n.store_bytes_written);
  s.store_raw_bytes_written = pw_atomic_load_u64_relaxed(&c->n.store_raw_bytes_written);
  s.memory_evictions = pw_atomic_load_u64_relaxed(&c->n.memory_evictions);
  s.fill_ns = pw_atomic_load_u64_relaxed(&c->n.fill_ns);
  s.fill_ns_saved = pw_atomic_load_u64_relaxed(&c->n.fill_ns_saved);
  pthread_mutex_lock(&c->lock);
  s.memory_entries = c->memory_entries;
  s.memory_bytes = c->memory_bytes;
  pthread_mutex_unlock(&c->lock);
  memcpy(out, &s, s.struct_size);
  return NULL;
}
