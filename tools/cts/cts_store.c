/* pathways-cts: the store suite, the contract of pathways/store.h: get,
 * put, remove ("delete") and list; keys by the key rule; atomic
 * overwrite; NOT_FOUND for a missing key; values of 0 bytes to several
 * MiB; values kept across a reopen with the same options; concurrent
 * calls from many threads that never see a torn value; every allocation
 * of get from the caller's allocator.
 *
 * Every key a case writes starts with a prefix unique to the case and the
 * process ("c<pid>-"), and listings only look at keys with that prefix:
 * the suite can run against a store that is not empty (a shared or
 * remote one). Give a store that needs a place a fresh one per case with
 * {tmp} in --args ("path={tmp}/store" for the dir store). */
#define _POSIX_C_SOURCE 200809L /* snprintf, getpid */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cts_check.h"

/* --- Helpers. --- */

typedef struct pw_cts_store_t {
  pw_store_t store;
  char prefix[32];
} pw_cts_store_t;

#define PW_CTS_STORE_HAS(s, method)                                                     \
  ((s)->vtable->struct_size >=                                                          \
       offsetof(pw_store_vtable_t, method) + sizeof((s)->vtable->method) &&             \
   (s)->vtable->method != NULL)

#define PW_CTS_STORE_REQUIRE(s, method)                                                 \
  PW_CTS_ASSERT(PW_CTS_STORE_HAS(s, method), "store '%s' does not implement " #method,  \
                (s)->vtable->name != NULL ? (s)->vtable->name : "(unnamed)")

static void pw_cts_store_open(const pw_cts_context_t* ctx, pw_cts_store_t* out) {
  memset(out, 0, sizeof(*out));
  pw_status_t status = ctx->plugin != NULL
                           ? pw_plugin_create_store(ctx->plugin, ctx->args, &out->store)
                           : ctx->factory->create_store(ctx->args, &out->store);
  PW_CTS_OK(status);
  PW_CTS_ASSERT_NOT_NULL(out->store.vtable, "create_store returned OK without a vtable");
  PW_CTS_ASSERT_GEQ(out->store.vtable->struct_size, PW_STORE_VTABLE_SIZE_V1);
  const pw_store_t* s = &out->store;
  PW_CTS_STORE_REQUIRE(s, get);
  PW_CTS_STORE_REQUIRE(s, put);
  PW_CTS_STORE_REQUIRE(s, remove);
  PW_CTS_STORE_REQUIRE(s, list);
  PW_CTS_STORE_REQUIRE(s, destroy);
  snprintf(out->prefix, sizeof(out->prefix), "c%ld-", (long)getpid());
}

static void pw_cts_store_close(pw_cts_store_t* s) {
  s->store.vtable->destroy(s->store.self);
  memset(&s->store, 0, sizeof(s->store));
}

/* |name| under the case's prefix, into |key| (PW_STORE_KEY_MAX + 1 bytes). */
static const char* pw_cts_key(const pw_cts_store_t* s, const char* name, char* key) {
  snprintf(key, PW_STORE_KEY_MAX + 1, "%s%s", s->prefix, name);
  PW_CTS_ASSERT(pw_store_key_is_valid(key), "the suite made an invalid key '%s'", key);
  return key;
}

static void pw_cts_put(const pw_cts_store_t* s, const char* key, const void* bytes, size_t size) {
  pw_status_t status = s->store.vtable->put(s->store.self, key, bytes, size);
  if (status != NULL) {
    char text[512];
    pw_status_format(status, text, sizeof(text));
    pw_status_free(status);
    PW_CTS_FAIL("put '%s' (%zu bytes): %s", key, size, text);
  }
}

/* Gets |key| and checks it holds exactly |size| bytes equal to |want|. */
static void pw_cts_expect(const pw_cts_store_t* s, const char* key, const void* want,
                          size_t size) {
  pw_cts_allocator_t t;
  pw_cts_allocator_init(&t);
  void* bytes = NULL;
  size_t got = 0;
  pw_status_t status =
      s->store.vtable->get(s->store.self, key, pw_cts_allocator(&t), &bytes, &got);
  if (status != NULL) {
    char text[512];
    pw_status_format(status, text, sizeof(text));
    pw_status_free(status);
    PW_CTS_FAIL("get '%s': %s", key, text);
  }
  PW_CTS_ASSERT_EQ(got, size, "get '%s': %zu bytes, %zu were put", key, got, size);
  PW_CTS_ASSERT(size == 0 || bytes != NULL, "get '%s': %zu bytes but no buffer", key, size);
  PW_CTS_ASSERT(size == 0 || memcmp(bytes, want, size) == 0, "get '%s': the bytes differ", key);
  if (bytes != NULL) pw_allocator_free(pw_cts_allocator(&t), bytes, got);
  PW_CTS_ASSERT_EQ(pw_cts_allocator_live(&t), 0,
                   "get '%s': %zu allocations besides the value, or not from the allocator "
                   "given", key, pw_cts_allocator_live(&t));
  PW_CTS_ASSERT_EQ(atomic_load(&t.size_mismatches), 0,
                   "get '%s': the value was not allocated with its size", key);
}

static void pw_cts_expect_missing(const pw_cts_store_t* s, const char* key) {
  pw_cts_allocator_t t;
  pw_cts_allocator_init(&t);
  void* bytes = NULL;
  size_t size = 0;
  pw_status_code_t code = PW_CTS_ERROR(
      s->store.vtable->get(s->store.self, key, pw_cts_allocator(&t), &bytes, &size),
      PW_STATUS_NOT_FOUND);
  (void)code;
  PW_CTS_ASSERT_EQ(pw_cts_allocator_live(&t), 0, "a failed get of '%s' left memory behind", key);
}

/* Deterministic bytes: value |seed| of |size| bytes. */
static unsigned char* pw_cts_pattern(size_t size, uint32_t seed) {
  unsigned char* p = malloc(size ? size : 1);
  PW_CTS_ASSERT_NOT_NULL(p);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < size; ++i) {
    x = x * 1664525u + 1013904223u;
    p[i] = (unsigned char)(x >> 24);
  }
  return p;
}

typedef struct pw_cts_listing_t {
  const char* prefix;
  size_t calls;      /* every call, whatever the key */
  size_t count;      /* keys with the prefix */
  char keys[16][PW_STORE_KEY_MAX + 1];
  uint64_t sizes[16];
  bool stop_after_first;
} pw_cts_listing_t;

static bool pw_cts_list_entry(void* user, const char* key, uint64_t size) {
  pw_cts_listing_t* l = user;
  l->calls++;
  if (strncmp(key, l->prefix, strlen(l->prefix)) == 0) {
    if (l->count < 16) {
      snprintf(l->keys[l->count], sizeof(l->keys[0]), "%s", key);
      l->sizes[l->count] = size;
    }
    l->count++;
  }
  return !l->stop_after_first;
}

static void pw_cts_listing(const pw_cts_store_t* s, pw_cts_listing_t* l) {
  memset(l, 0, sizeof(*l));
  l->prefix = s->prefix;
  PW_CTS_OK(s->store.vtable->list(s->store.self, pw_cts_list_entry, l));
}

/* The size listed for |key|, or -1 when it is not listed (fails when it is
 * listed twice). */
static int64_t pw_cts_listed_size(const pw_cts_listing_t* l, const char* key) {
  int64_t size = -1;
  for (size_t i = 0; i < l->count && i < 16; ++i) {
    if (strcmp(l->keys[i], key) == 0) {
      PW_CTS_ASSERT_EQ(size, -1, "list reported '%s' twice", key);
      size = (int64_t)l->sizes[i];
    }
  }
  return size;
}

/* --- Cases. --- */

static void pw_cts_store_vtable_basics(const pw_cts_context_t* ctx) {
  pw_cts_store_t s;
  pw_cts_store_open(ctx, &s);
  const pw_store_vtable_t* v = s.store.vtable;
  PW_CTS_ASSERT_NOT_NULL(v->name, "the vtable has no name");
  size_t length = strlen(v->name);
  PW_CTS_ASSERT(length > 0 && length < 64, "name '%s' must be 1..63 characters", v->name);
  for (size_t i = 0; i < length; ++i) {
    PW_CTS_ASSERT(v->name[i] > ' ' && v->name[i] < 0x7F, "name '%s' is not printable ASCII",
                  v->name);
  }
  pw_cts_store_close(&s);
}

static void pw_cts_store_put_get(const pw_cts_context_t* ctx) {
  pw_cts_store_t s;
  pw_cts_store_open(ctx, &s);
  static const size_t sizes[] = {0, 1, 7, 4096, 65537};
  char key[PW_STORE_KEY_MAX + 1];
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
    char name[32];
    snprintf(name, sizeof(name), "value-%zu", sizes[i]);
    unsigned char* p = pw_cts_pattern(sizes[i], (uint32_t)i);
    pw_cts_put(&s, pw_cts_key(&s, name, key), p, sizes[i]);
    pw_cts_expect(&s, key, p, sizes[i]);
    free(p);
  }
  /* Each still holds its own value once all are written. */
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
    char name[32];
    snprintf(name, sizeof(name), "value-%zu", sizes[i]);
    unsigned char* p = pw_cts_pattern(sizes[i], (uint32_t)i);
    pw_cts_expect(&s, pw_cts_key(&s, name, key), p, sizes[i]);
    free(p);
  }
  pw_cts_store_close(&s);
}

static void pw_cts_store_missing_key(const pw_cts_context_t* ctx) {
  pw_cts_store_t s;
  pw_cts_store_open(ctx, &s);
  char key[PW_STORE_KEY_MAX + 1];
  pw_cts_expect_missing(&s, pw_cts_key(&s, "never-written", key));
  PW_CTS_ERROR(s.store.vtable->remove(s.store.self, key), PW_STATUS_NOT_FOUND);
  /* A key that only shares a prefix with a written one is still missing. */
  char longer[PW_STORE_KEY_MAX + 1];
  pw_cts_put(&s, pw_cts_key(&s, "abc", key), "x", 1);
  pw_cts_expect_missing(&s, pw_cts_key(&s, "ab", longer));
  pw_cts_expect_missing(&s, pw_cts_key(&s, "abcd", longer));
  pw_cts_expect(&s, key, "x", 1);
  pw_cts_store_close(&s);
}

static void pw_cts_store_overwrite(const pw_cts_context_t* ctx) {
  pw_cts_store_t s;
  pw_cts_store_open(ctx, &s);
  char key[PW_STORE_KEY_MAX + 1];
  pw_cts_key(&s, "replaced", key);
  static const size_t sizes[] = {100, 5000, 3, 0, 64};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
    unsigned char* p = pw_cts_pattern(sizes[i], 100 + (uint32_t)i);
    pw_cts_put(&s, key, p, sizes[i]);
    pw_cts_expect(&s, key, p, sizes[i]);
    free(p);
  }
  pw_cts_listing_t l;
  pw_cts_listing(&s, &l);
  PW_CTS_ASSERT_EQ(l.count, 1, "one key written %zu times lists %zu entries",
                   sizeof(sizes) / sizeof(sizes[0]), l.count);
  PW_CTS_ASSERT_EQ(pw_cts_listed_size(&l, key), 64, "list reports a stale size");
  pw_cts_store_close(&s);
}

static void pw_cts_store_remove(const pw_cts_context_t* ctx) {
  pw_cts_store_t s;
  pw_cts_store_open(ctx, &s);
  char a[PW_STORE_KEY_MAX + 1], b[PW_STORE_KEY_MAX + 1];
  pw_cts_put(&s, pw_cts_key(&s, "gone", a), "first", 5);
  pw_cts_put(&s, pw_cts_key(&s, "kept", b), "second", 6);
  PW_CTS_OK(s.store.vtable->remove(s.store.self, a));
  pw_cts_expect_missing(&s, a);
  pw_cts_expect(&s, b, "second", 6);
  PW_CTS_ERROR(s.store.vtable->remove(s.store.self, a), PW_STATUS_NOT_FOUND);
  pw_cts_listing_t l;
  pw_cts_listing(&s, &l);
  PW_CTS_ASSERT_EQ(pw_cts_listed_size(&l, a), -1, "a removed key is still listed");
  PW_CTS_ASSERT_EQ(pw_cts_listed_size(&l, b), 6);
  /* A removed key can be written again. */
  pw_cts_put(&s, a, "again", 5);
  pw_cts_expect(&s, a, "again", 5);
  pw_cts_store_close(&s);
}

static void pw_cts_store_list(const pw_cts_context_t* ctx) {
  pw_cts_store_t s;
  pw_cts_store_open(ctx, &s);
  pw_cts_listing_t l;
  pw_cts_listing(&s, &l);
  PW_CTS_ASSERT_EQ(l.count, 0, "a fresh prefix already has %zu entries", l.count);
  char keys[5][PW_STORE_KEY_MAX + 1];
  for (uint32_t i = 0; i < 5; ++i) {
    char name[16];
    snprintf(name, sizeof(name), "entry%u", i);
    unsigned char* p = pw_cts_pattern(i * 10, i);
    pw_cts_put(&s, pw_cts_key(&s, name, keys[i]), p, i * 10);
    free(p);
  }
  pw_cts_listing(&s, &l);
  PW_CTS_ASSERT_EQ(l.count, 5, "5 keys written, %zu listed", l.count);
  for (uint32_t i = 0; i < 5; ++i) {
    PW_CTS_ASSERT_EQ(pw_cts_listed_size(&l, keys[i]), (int64_t)(i * 10), "'%s' size", keys[i]);
  }
  /* Returning false stops the listing. */
  memset(&l, 0, sizeof(l));
  l.prefix = s.prefix;
  l.stop_after_first = true;
  PW_CTS_OK(s.store.vtable->list(s.store.self, pw_cts_list_entry, &l));
  PW_CTS_ASSERT_EQ(l.calls, 1, "list went on for %zu calls after the callback returned false",
                   l.calls - 1);
  pw_cts_store_close(&s);
}

static void pw_cts_store_key_rules(const pw_cts_context_t* ctx) {
  pw_cts_store_t s;
  pw_cts_store_open(ctx, &s);
  /* Every allowed character, the longest key, and keys that differ only
   * in case or in a '.', '-' or '_'. */
  char longest[PW_STORE_KEY_MAX + 1];
  size_t p = strlen(s.prefix);
  memcpy(longest, s.prefix, p);
  memset(longest + p, 'z', PW_STORE_KEY_MAX - p);
  longest[PW_STORE_KEY_MAX] = '\0';
  const char* names[] = {
      "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", "a.b", "a-b",
      "a_b", "ab.", "Case", "case", "x..y", "trailing-",
  };
  size_t n = sizeof(names) / sizeof(names[0]);
  char keys[16][PW_STORE_KEY_MAX + 1];
  for (size_t i = 0; i < n; ++i) {
    pw_cts_put(&s, pw_cts_key(&s, names[i], keys[i]), names[i], strlen(names[i]));
  }
  PW_CTS_ASSERT(pw_store_key_is_valid(longest));
  pw_cts_put(&s, longest, "longest", 7);
  for (size_t i = 0; i < n; ++i) pw_cts_expect(&s, keys[i], names[i], strlen(names[i]));
  pw_cts_expect(&s, longest, "longest", 7);
  pw_cts_listing_t l;
  pw_cts_listing(&s, &l);
  PW_CTS_ASSERT_EQ(l.count, n + 1, "%zu distinct keys written, %zu listed", n + 1, l.count);
  pw_cts_store_close(&s);
}

static void pw_cts_store_large_value(const pw_cts_context_t* ctx) {
  pw_cts_store_t s;
  pw_cts_store_open(ctx, &s);
  uint64_t bound = PW_CTS_HOOK(ctx, max_value_bytes);
  size_t size = 8u << 20;
  if (bound != 0 && bound < size) size = (size_t)bound;
  unsigned char* p = pw_cts_pattern(size, 7);
  char key[PW_STORE_KEY_MAX + 1];
  pw_cts_put(&s, pw_cts_key(&s, "large", key), p, size);
  pw_cts_expect(&s, key, p, size);
  /* Replaced by a small value, then by the large one again. */
  pw_cts_put(&s, key, "small", 5);
  pw_cts_expect(&s, key, "small", 5);
  pw_cts_put(&s, key, p, size);
  pw_cts_expect(&s, key, p, size);
  free(p);
  if (bound != 0 && bound < SIZE_MAX) {
    /* Above the bound: RESOURCE_EXHAUSTED, the previous value kept. */
    size_t over = (size_t)bound + 1;
    unsigned char* q = pw_cts_pattern(over, 8);
    PW_CTS_ERROR(s.store.vtable->put(s.store.self, key, q, over), PW_STATUS_RESOURCE_EXHAUSTED);
    free(q);
    p = pw_cts_pattern(size, 7);
    pw_cts_expect(&s, key, p, size);
    free(p);
  }
  pw_cts_store_close(&s);
}

static void pw_cts_store_reopen(const pw_cts_context_t* ctx) {
  pw_cts_store_t s;
  pw_cts_store_open(ctx, &s);
  char a[PW_STORE_KEY_MAX + 1], b[PW_STORE_KEY_MAX + 1];
  pw_cts_put(&s, pw_cts_key(&s, "persists", a), "kept across a reopen", 20);
  pw_cts_put(&s, pw_cts_key(&s, "removed", b), "x", 1);
  PW_CTS_OK(s.store.vtable->remove(s.store.self, b));
  pw_cts_store_close(&s);
  /* The same options name the same store: a persistent map. */
  pw_cts_store_t again;
  pw_cts_store_open(ctx, &again);
  pw_cts_expect(&again, a, "kept across a reopen", 20);
  pw_cts_expect_missing(&again, b);
  pw_cts_store_close(&again);
}

static void pw_cts_store_two_instances(const pw_cts_context_t* ctx) {
  pw_cts_store_t one, two;
  pw_cts_store_open(ctx, &one);
  pw_cts_store_open(ctx, &two);
  char key[PW_STORE_KEY_MAX + 1];
  pw_cts_put(&one, pw_cts_key(&one, "shared", key), "from one", 8);
  pw_cts_expect(&two, key, "from one", 8);
  pw_cts_put(&two, key, "from two!", 9);
  pw_cts_expect(&one, key, "from two!", 9);
  PW_CTS_OK(one.store.vtable->remove(one.store.self, key));
  pw_cts_expect_missing(&two, key);
  pw_cts_store_close(&two);
  pw_cts_store_close(&one);
}

/* --- Concurrency: writers replace one key and write their own; readers
 * check every value they get is one whole write. --- */

enum { kStoreThreads = 6, kStoreRounds = 40, kStoreValueMax = 3000 };

typedef struct pw_cts_store_worker_t {
  const pw_cts_store_t* s;
  uint32_t index;
  char failure[256];
} pw_cts_store_worker_t;

/* Value |v| of writer |w|: a size from (w, v) and every byte (w * 31 + v)
 * % 251, with the size in the first 4 bytes. */
static size_t pw_cts_store_value(uint32_t w, uint32_t v, unsigned char* out) {
  size_t size = 4 + (w * 997u + v * 131u) % (kStoreValueMax - 4);
  uint32_t n = (uint32_t)size;
  memcpy(out, &n, 4);
  memset(out + 4, (int)((w * 31u + v) % 251u), size - 4);
  return size;
}

/* True when |bytes| is one whole value of the form above. */
static bool pw_cts_store_value_whole(const unsigned char* bytes, size_t size) {
  if (size < 4) return false;
  uint32_t n;
  memcpy(&n, bytes, 4);
  if (n != size) return false;
  for (size_t i = 5; i < size; ++i) {
    if (bytes[i] != bytes[4]) return false;
  }
  return true;
}

static void* pw_cts_store_worker(void* arg) {
  pw_cts_store_worker_t* w = arg;
  const pw_store_t* st = &w->s->store;
  unsigned char value[kStoreValueMax];
  char shared[PW_STORE_KEY_MAX + 1], own[PW_STORE_KEY_MAX + 1];
  snprintf(shared, sizeof(shared), "%sshared", w->s->prefix);
  snprintf(own, sizeof(own), "%sown%u", w->s->prefix, w->index);
  for (uint32_t r = 0; r < kStoreRounds && w->failure[0] == '\0'; ++r) {
    size_t size = pw_cts_store_value(w->index, r, value);
    pw_status_t status = st->vtable->put(st->self, w->index % 2 ? shared : own, value, size);
    if (status == NULL) status = st->vtable->put(st->self, own, value, size);
    void* bytes = NULL;
    size_t got = 0;
    if (status == NULL) status = st->vtable->get(st->self, shared, pw_allocator_system(), &bytes, &got);
    if (status != NULL && pw_status_code(status) == PW_STATUS_NOT_FOUND) {
      pw_status_free(status); /* no writer of |shared| got there yet */
      status = NULL;
    } else if (status == NULL && !pw_cts_store_value_whole(bytes, got)) {
      snprintf(w->failure, sizeof(w->failure), "get '%s' returned %zu bytes that are no "
               "single put's value (a torn write)", shared, got);
    }
    if (bytes != NULL) pw_allocator_free(pw_allocator_system(), bytes, got);
    if (status != NULL) {
      snprintf(w->failure, sizeof(w->failure), "thread %u round %u: %s", w->index, r,
               pw_status_message(status));
      pw_status_free(status);
    }
  }
  return NULL;
}

static void pw_cts_store_concurrent(const pw_cts_context_t* ctx) {
  pw_cts_store_t s;
  pw_cts_store_open(ctx, &s);
  pw_cts_store_worker_t workers[kStoreThreads];
  pthread_t ids[kStoreThreads];
  for (uint32_t i = 0; i < kStoreThreads; ++i) {
    memset(&workers[i], 0, sizeof(workers[i]));
    workers[i].s = &s;
    workers[i].index = i;
    PW_CTS_ASSERT_EQ(pthread_create(&ids[i], NULL, pw_cts_store_worker, &workers[i]), 0);
  }
  for (uint32_t i = 0; i < kStoreThreads; ++i) pthread_join(ids[i], NULL);
  for (uint32_t i = 0; i < kStoreThreads; ++i) {
    PW_CTS_ASSERT(workers[i].failure[0] == '\0', "%s", workers[i].failure);
  }
  /* Every thread's own key holds its last value; the shared one a whole
   * value of one of its writers. */
  unsigned char value[kStoreValueMax];
  char key[PW_STORE_KEY_MAX + 1];
  for (uint32_t i = 0; i < kStoreThreads; ++i) {
    char name[16];
    snprintf(name, sizeof(name), "own%u", i);
    size_t size = pw_cts_store_value(i, kStoreRounds - 1, value);
    pw_cts_expect(&s, pw_cts_key(&s, name, key), value, size);
  }
  void* bytes = NULL;
  size_t got = 0;
  PW_CTS_OK(s.store.vtable->get(s.store.self, pw_cts_key(&s, "shared", key),
                                pw_allocator_system(), &bytes, &got));
  PW_CTS_ASSERT(pw_cts_store_value_whole(bytes, got), "the shared key ends torn");
  pw_allocator_free(pw_allocator_system(), bytes, got);
  pw_cts_listing_t l;
  pw_cts_listing(&s, &l);
  PW_CTS_ASSERT_EQ(l.count, kStoreThreads + 1, "%zu keys listed after the threads",
                   l.count);
  pw_cts_store_close(&s);
}

/* --- Allocation failures (with the create_store hook). --- */


static bool pw_cts_store_sweep_body(pw_allocator_t allocator, bool expect_failure, void* user) {
  const pw_cts_context_t* ctx = user;
  pw_store_t st;
  memset(&st, 0, sizeof(st));
  void* bytes = NULL;
  size_t size = 0;
  char key[64];
  snprintf(key, sizeof(key), "c%ld-sweep", (long)getpid());
  pw_status_t status = PW_CTS_HOOK(ctx, create_store)(ctx->args, allocator, &st);
  if (status == NULL) status = st.vtable->put(st.self, key, "sweep value", 11);
  if (status == NULL) status = st.vtable->get(st.self, key, allocator, &bytes, &size);
  if (status == NULL && (size != 11 || memcmp(bytes, "sweep value", 11) != 0)) {
    status = pw_status_make(PW_STATUS_INTERNAL, "get returned other bytes");
  }
  if (bytes != NULL) pw_allocator_free(allocator, bytes, size);
  if (status == NULL) status = st.vtable->remove(st.self, key);
  if (st.vtable != NULL) {
    pw_status_ignore(st.vtable->remove(st.self, key)); /* leave the place empty */
    st.vtable->destroy(st.self);
  }
  pw_status_code_t code = pw_status_code(status);
  pw_status_free(status);
  return expect_failure ? code == PW_STATUS_RESOURCE_EXHAUSTED : code == PW_STATUS_OK;
}

static void pw_cts_store_allocation_failures(const pw_cts_context_t* ctx) {
  if (PW_CTS_HOOK(ctx, create_store) == NULL) {
    PW_CTS_SKIP("the plugin has no create_store hook (pathways/cts.h): no allocator to count");
  }
  char why[256] = "";
  int swept = pw_cts_allocator_sweep(pw_cts_store_sweep_body, (void*)ctx, why);
  PW_CTS_ASSERT_GEQ(swept, 1, "%s", why);
}

static const pw_cts_case_t pw_cts_store_table[] = {
    {"vtable_basics", pw_cts_store_vtable_basics},
    {"put_get", pw_cts_store_put_get},
    {"missing_key", pw_cts_store_missing_key},
    {"overwrite", pw_cts_store_overwrite},
    {"remove", pw_cts_store_remove},
    {"list", pw_cts_store_list},
    {"key_rules", pw_cts_store_key_rules},
    {"large_value", pw_cts_store_large_value},
    {"reopen", pw_cts_store_reopen},
    {"two_instances", pw_cts_store_two_instances},
    {"concurrent", pw_cts_store_concurrent},
    {"allocation_failures", pw_cts_store_allocation_failures},
};

const pw_cts_case_t* pw_cts_store_cases(size_t* out_count) {
  *out_count = sizeof(pw_cts_store_table) / sizeof(pw_cts_store_table[0]);
  return pw_cts_store_table;
}
