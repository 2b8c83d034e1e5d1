/* Two dir stores over one directory in one process (a plain executable:
 * it runs under TSan too). THREADS threads, half on each store, put the
 * same key PUTS times each, all starting together, so both stores make
 * temporary files for the same key at the same time. Checks: no put
 * fails (temporary file names are unique process-wide, not per store),
 * the value read back through either store is one that was put, whole,
 * and no temporary file is left. Usage: stress_dir_two_stores [PUTS]. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_util.h"

#define THREADS 8
#define VALUE_SIZE 256

typedef struct shared_t {
  pw_store_t store[2];
  int puts;
  atomic_int started;
  atomic_int failures;
  atomic_flag reported;
} shared_t;

typedef struct thread_arg_t {
  shared_t* sh;
  int index;
} thread_arg_t;

/* The value thread |t| puts the |i|-th time: a header naming both, then
 * bytes derived from them. */
static void make_value(uint8_t* out, int t, int i) {
  cu_fill_value(out, VALUE_SIZE, (uint64_t)t * 1000003u + (uint64_t)i);
  memcpy(out, &t, sizeof(t));
  memcpy(out + sizeof(t), &i, sizeof(i));
}

static void* worker(void* p) {
  thread_arg_t* arg = p;
  shared_t* sh = arg->sh;
  pw_store_t* store = &sh->store[arg->index % 2];
  uint8_t value[VALUE_SIZE];
  atomic_fetch_add(&sh->started, 1);
  while (atomic_load(&sh->started) < THREADS) {
  }
  for (int i = 0; i < sh->puts; ++i) {
    make_value(value, arg->index, i);
    pw_status_t s = store->vtable->put(store->self, "shared", value, sizeof(value));
    if (s != NULL) {
      atomic_fetch_add(&sh->failures, 1);
      if (!atomic_flag_test_and_set(&sh->reported)) {
        fprintf(stderr, "thread %d put %d: %s\n", arg->index, i, pw_status_message(s));
      }
      pw_status_free(s);
    }
  }
  return NULL;
}

/* Whether the value under "shared" in |store| is one some thread put. */
static bool value_is_one_put(pw_store_t* store, int puts) {
  void* bytes = NULL;
  size_t size = 0;
  pw_status_t s = store->vtable->get(store->self, "shared", pw_allocator_system(), &bytes, &size);
  if (s != NULL) {
    fprintf(stderr, "get: %s\n", pw_status_message(s));
    pw_status_free(s);
    return false;
  }
  bool ok = size == VALUE_SIZE;
  if (ok) {
    int t, i;
    memcpy(&t, bytes, sizeof(t));
    memcpy(&i, (uint8_t*)bytes + sizeof(t), sizeof(i));
    uint8_t want[VALUE_SIZE];
    ok = t >= 0 && t < THREADS && i >= 0 && i < puts;
    if (ok) make_value(want, t, i);
    ok = ok && memcmp(want, bytes, VALUE_SIZE) == 0;
  }
  if (!ok) fprintf(stderr, "get: %zu bytes that no put wrote\n", size);
  pw_allocator_free(pw_allocator_system(), bytes, size);
  return ok;
}

int main(int argc, char** argv) {
  shared_t sh;
  memset(&sh, 0, sizeof(sh));
  atomic_flag_clear(&sh.reported);
  sh.puts = argc > 1 ? atoi(argv[1]) : 100;
  if (sh.puts <= 0) sh.puts = 100;
  char dir[256];
  if (!cu_make_dir(dir, sizeof(dir))) {
    fprintf(stderr, "no scratch directory\n");
    return 1;
  }
  sh.store[0] = cu_dir_store(dir, 0);
  sh.store[1] = cu_dir_store(dir, 0);
  if (sh.store[0].vtable == NULL || sh.store[1].vtable == NULL) return 1;
  pthread_t threads[THREADS];
  thread_arg_t args[THREADS];
  for (int t = 0; t < THREADS; ++t) {
    args[t].sh = &sh;
    args[t].index = t;
    if (pthread_create(&threads[t], NULL, worker, &args[t]) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      return 1;
    }
  }
  for (int t = 0; t < THREADS; ++t) pthread_join(threads[t], NULL);
  int failures = atomic_load(&sh.failures);
  bool values_ok =
      value_is_one_put(&sh.store[0], sh.puts) && value_is_one_put(&sh.store[1], sh.puts);
  int temps = cu_count_files(dir, ".tmp-");
  for (int i = 0; i < 2; ++i) sh.store[i].vtable->destroy(sh.store[i].self);
  cu_remove_dir(dir);
  bool ok = failures == 0 && values_ok && temps == 0;
  printf("stress_dir_two_stores: %d threads x %d puts over two stores, %d failed, %d temporary "
         "files left, value %s: %s\n",
         THREADS, sh.puts, failures, temps, values_ok ? "ok" : "WRONG", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
