/* Single flight under contention (a plain executable: it runs under TSan
 * too). For each round, THREADS threads look up the same KEYS keys in a
 * shuffled order while each fill holds its key open for a while (it spins
 * until every thread has at least started its lookups, so lookups really
 * overlap the fill). Checks: exactly one fill per key per round, every
 * thread sees the same bytes, and an erroring fill hands its error to the
 * lookups that waited for it. Memory tier only; the store path is covered
 * by stress_cache_processes. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_util.h"
#include "support/test_allocators.h"

#define THREADS 6
#define KEYS 8

typedef struct shared_t {
  pw_cache_t* cache;
  atomic_int started;
  atomic_int fills[KEYS];
  uint64_t round;
  bool failing;
  atomic_int errors;
  atomic_int bad;
} shared_t;

typedef struct fill_ctx_t {
  shared_t* sh;
  int key;
} fill_ctx_t;

static pw_status_t fill(void* user, pw_allocator_t a, void** out, size_t* out_size) {
  fill_ctx_t* c = user;
  atomic_fetch_add(&c->sh->fills[c->key], 1);
  /* Keep the key in flight until every thread has begun. */
  while (atomic_load(&c->sh->started) < THREADS) {
  }
  if (c->sh->failing && c->key % 2 == 1) {
    return pw_status_make(PW_STATUS_INTERNAL, "fill of key %d failed on purpose", c->key);
  }
  size_t size = 1000 + (size_t)c->key * 100;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(a, size, 0, out));
  cu_fill_value(*out, size, c->sh->round * 100 + (uint64_t)c->key);
  *out_size = size;
  return NULL;
}

typedef struct thread_arg_t {
  shared_t* sh;
  int index;
} thread_arg_t;

static void* worker(void* p) {
  thread_arg_t* arg = p;
  shared_t* sh = arg->sh;
  atomic_fetch_add(&sh->started, 1);
  uint8_t want[2000];
  for (int i = 0; i < KEYS; ++i) {
    int k = (i * 5 + arg->index * 3) % KEYS;
    fill_ctx_t ctx = {sh, k};
    pw_cache_key_t key = cu_key(sh->round * 100 + (uint64_t)k);
    pw_cache_entry_t* e = NULL;
    pw_status_t s = pw_cache_lookup(sh->cache, &key, fill, &ctx, &e, NULL);
    if (s != NULL) {
      if (!(sh->failing && k % 2 == 1)) atomic_fetch_add(&sh->bad, 1);
      atomic_fetch_add(&sh->errors, 1);
      pw_status_free(s);
      continue;
    }
    size_t size;
    const void* data = pw_cache_entry_data(e, &size);
    cu_fill_value(want, size, sh->round * 100 + (uint64_t)k);
    if (size != 1000 + (size_t)k * 100 || memcmp(data, want, size) != 0) {
      atomic_fetch_add(&sh->bad, 1);
    }
    pw_cache_entry_release(e);
  }
  return NULL;
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 50;
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_cache_options_t o;
  pw_cache_options_init(&o);
  o.allocator = pw_test_allocator(&t);
  shared_t sh;
  memset(&sh, 0, sizeof(sh));
  pw_status_t s = pw_cache_create(&o, &sh.cache);
  if (s != NULL) {
    fprintf(stderr, "create: %s\n", pw_status_message(s));
    return 1;
  }
  int failures = 0;
  for (int r = 0; r < rounds; ++r) {
    sh.round = (uint64_t)r + 1;
    sh.failing = r % 5 == 4;
    atomic_store(&sh.started, 0);
    for (int k = 0; k < KEYS; ++k) atomic_store(&sh.fills[k], 0);
    pthread_t threads[THREADS];
    thread_arg_t args[THREADS];
    for (int i = 0; i < THREADS; ++i) {
      args[i] = (thread_arg_t){&sh, i};
      pthread_create(&threads[i], NULL, worker, &args[i]);
    }
    for (int i = 0; i < THREADS; ++i) pthread_join(threads[i], NULL);
    for (int k = 0; k < KEYS; ++k) {
      int n = atomic_load(&sh.fills[k]);
      /* A failed fill is not kept, so a thread that came after it fills
       * again; a successful one is filled exactly once. */
      bool ok = (sh.failing && k % 2 == 1) ? n >= 1 : n == 1;
      if (!ok) {
        fprintf(stderr, "round %d key %d: %d fills\n", r, k, n);
        failures++;
      }
    }
  }
  pw_cache_stats_t st;
  memset(&st, 0, sizeof(st));
  st.struct_size = sizeof(st);
  pw_status_ignore(pw_cache_stats(sh.cache, &st));
  pw_cache_release(sh.cache);
  if (atomic_load(&sh.bad) != 0) {
    fprintf(stderr, "%d lookups saw a wrong value or error\n", atomic_load(&sh.bad));
    failures++;
  }
  if (pw_test_allocator_live(&t) != 0) {
    fprintf(stderr, "%zu allocations leaked\n", pw_test_allocator_live(&t));
    failures++;
  }
  printf("stress_cache_single_flight: %d rounds, %llu lookups, %llu fills, %llu shared, "
         "%d errors: %s\n",
         rounds, (unsigned long long)st.lookups, (unsigned long long)st.misses,
         (unsigned long long)st.shared, atomic_load(&sh.errors), failures ? "FAILED" : "ok");
  return failures != 0;
}
