#define _POSIX_C_SOURCE 200809L
/* Helper for fault_inject.sh: writes or checks one cache entry in a dir
 * store, so that strace can inject syscall faults into the write.
 *
 *   store_fault_helper put DIR SEED SIZE
 *       writes the cache entry of key K holding SIZE bytes made from SEED
 *       into the dir store at DIR, as the cache does after a miss (framed
 *       with pw__cache_entry_encode, then the store's put, which replaces
 *       any older value). Nothing is written to stdout/stderr before the
 *       store write, so strace's syscall counts (when=N) land on the
 *       store's own calls. Exit 1 when the put fails.
 *   store_fault_helper check DIR SEED...
 *       opens DIR (removing stale temporary files), looks K up with a fill
 *       that fails, and succeeds if the value is the one of one of the
 *       SEEDs (sizes are given as SEED:SIZE); prints the seed found, the
 *       stale files removed and the temporary files left.
 * Exit status: 0 ok, 1 check failed, 2 usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_internal.h"
#include "cache/cache_util.h"

static uint64_t g_seed;
static size_t g_size;

static pw_status_t fill(void* user, pw_allocator_t a, void** out, size_t* out_size) {
  (void)user;
  if (g_size == 0) return pw_status_make(PW_STATUS_NOT_FOUND, "no value in the store");
  PW_RETURN_IF_ERROR(pw_allocator_malloc(a, g_size, 0, out));
  /* Incompressible, so the entry is as large as SIZE (several chunks). */
  uint64_t x = g_seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < g_size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    ((uint8_t*)*out)[i] = (uint8_t)x;
  }
  *out_size = g_size;
  return NULL;
}

static pw_cache_t* open_cache(const char* dir, pw_store_t* out_store) {
  pw_cache_options_t o;
  pw_cache_options_init(&o);
  o.store = cu_dir_store(dir, 0);
  *out_store = o.store;
  pw_cache_t* c = NULL;
  pw_status_t s = o.store.vtable ? pw_cache_create(&o, &c) : pw_status_make(PW_STATUS_INTERNAL, "no store");
  if (s != NULL) {
    fprintf(stderr, "helper: %s\n", pw_status_message(s));
    pw_status_free(s);
    exit(1);
  }
  return c;
}

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  pw_cache_key_t key = cu_key(4242);
  pw_store_t store;
  if (strcmp(argv[1], "put") == 0 && argc == 5) {
    g_seed = strtoull(argv[3], NULL, 10);
    g_size = strtoull(argv[4], NULL, 10);
    pw_allocator_t sys = pw_allocator_system();
    void* value = NULL;
    size_t size = 0;
    void* framed = NULL;
    size_t framed_size = 0, capacity = 0;
    pw_status_t s = fill(NULL, sys, &value, &size);
    if (s == NULL) {
      s = pw__cache_entry_encode(&key, value, size, 1, 3, sys, NULL, &framed, &framed_size, &capacity);
    }
    store = cu_dir_store(argv[2], 0);
    if (s == NULL && store.vtable == NULL) s = pw_status_make(PW_STATUS_INTERNAL, "no store");
    char hex[33];
    pw_cache_key_format(&key, hex);
    if (s == NULL) s = store.vtable->put(store.self, hex, framed, framed_size);
    if (store.vtable) store.vtable->destroy(store.self);
    pw_allocator_free(sys, framed, capacity);
    pw_allocator_free(sys, value, size);
    if (s != NULL) {
      fprintf(stderr, "helper put: %s\n", pw_status_message(s));
      pw_status_free(s);
      return 1;
    }
    return 0;
  }
  if (strcmp(argv[1], "check") == 0) {
    pw_cache_t* c = open_cache(argv[2], &store);
    unsigned stale = pw_dir_store_stale_removed(&store);
    g_size = 0;
    pw_cache_entry_t* e = NULL;
    pw_status_t s = pw_cache_lookup(c, &key, fill, NULL, &e, NULL);
    int rc = 1;
    if (s == NULL) {
      size_t size;
      const void* data = pw_cache_entry_data(e, &size);
      for (int i = 3; i < argc && rc != 0; ++i) {
        g_seed = strtoull(argv[i], NULL, 10);
        g_size = strtoull(strchr(argv[i], ':') ? strchr(argv[i], ':') + 1 : "0", NULL, 10);
        void* want = NULL;
        size_t want_size = 0;
        if (g_size == size && fill(NULL, pw_allocator_system(), &want, &want_size) == NULL &&
            memcmp(want, data, size) == 0) {
          printf("value=%llu stale_removed=%u temps_left=%d\n", (unsigned long long)g_seed,
                 stale, cu_count_files(argv[2], ".tmp-"));
          rc = 0;
        }
        pw_allocator_free(pw_allocator_system(), want, want_size);
      }
      if (rc != 0) fprintf(stderr, "helper check: the value is none of the expected ones\n");
    } else {
      fprintf(stderr, "helper check: %s\n", pw_status_message(s));
      pw_status_free(s);
    }
    pw_cache_entry_release(e);
    pw_cache_release(c);
    return rc;
  }
  return 2;
}
