#define _POSIX_C_SOURCE 200809L
/* Several processes share one cache directory (a plain executable that
 * re-runs itself as the children; it runs under every preset).
 *
 * Phase 1, unbounded store: CHILDREN processes, released together, look up
 * the same KEYS keys in different orders (each fill writes the entry, so
 * writers race on the same files), verify every value, and invalidate
 * some keys now and then (removals race with reads and writes).
 * Phase 2, the same with a store bound far below the working set, so
 * entries are evicted while other processes read them.
 * After each phase: every child succeeded, no temporary file is left, and
 * every entry in the directory is a valid entry for the key it is named
 * after. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/cache_internal.h"
#include "cache/cache_util.h"

#define CHILDREN 4
#define KEYS 12
#define ROUNDS 3

static size_t value_size(int key) { return 48000 + (size_t)key * 9000; }

static pw_status_t fill(void* user, pw_allocator_t a, void** out, size_t* out_size) {
  int key = *(const int*)user;
  size_t size = value_size(key);
  PW_RETURN_IF_ERROR(pw_allocator_malloc(a, size, 0, out));
  cu_fill_value(*out, size, (uint64_t)key);
  *out_size = size;
  return NULL;
}

static int child(const char* dir, int index, uint64_t max_bytes, int go_fd) {
  char go;
  if (read(go_fd, &go, 1) < 0) return 3; /* returns 0 (EOF) when released */
  pw_cache_options_t o;
  pw_cache_options_init(&o);
  o.memory_bytes = 100000; /* small: most lookups reach the store */
  o.store = cu_dir_store(dir, max_bytes);
  if (o.store.vtable == NULL) return 4;
  pw_cache_t* cache;
  pw_status_t s = pw_cache_create(&o, &cache);
  if (s != NULL) return 5;
  uint8_t* want = malloc(value_size(KEYS));
  int bad = 0;
  for (int round = 0; round < ROUNDS; ++round) {
    for (int i = 0; i < KEYS; ++i) {
      int key = (i * 7 + index * 5 + round) % KEYS;
      pw_cache_key_t k = cu_key((uint64_t)key);
      pw_cache_entry_t* e = NULL;
      s = pw_cache_lookup(cache, &k, fill, &key, &e, NULL);
      if (s != NULL) {
        fprintf(stderr, "child %d: %s\n", index, pw_status_message(s));
        pw_status_free(s);
        bad++;
        continue;
      }
      size_t size;
      const void* data = pw_cache_entry_data(e, &size);
      cu_fill_value(want, value_size(key), (uint64_t)key);
      if (size != value_size(key) || memcmp(data, want, size) != 0) {
        fprintf(stderr, "child %d: wrong value for key %d\n", index, key);
        bad++;
      }
      pw_cache_entry_release(e);
      if ((i + index) % 5 == 0) pw_status_ignore(pw_cache_invalidate(cache, &k));
    }
  }
  pw_cache_stats_t st;
  memset(&st, 0, sizeof(st));
  st.struct_size = sizeof(st);
  pw_status_ignore(pw_cache_stats(cache, &st));
  if (st.bad_entries != 0) {
    fprintf(stderr, "child %d: saw %llu bad entries (torn or foreign files)\n", index,
            (unsigned long long)st.bad_entries);
    bad++;
  }
  pw_cache_release(cache);
  free(want);
  return bad ? 1 : 0;
}

typedef struct check_t {
  const char* dir;
  int entries;
  int bad;
} check_t;

static bool check_entry(void* user, const char* name, uint64_t size) {
  check_t* c = user;
  c->entries++;
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", c->dir, name);
  FILE* f = fopen(path, "rb");
  if (f == NULL) return true; /* evicted meanwhile: nothing else runs now, though */
  uint8_t* data = malloc(size + 1);
  size_t got = fread(data, 1, size, f);
  fclose(f);
  pw_cache_key_t key;
  bool named = strlen(name) == 32;
  for (int i = 0; named && i < 16; ++i) {
    unsigned byte;
    named = sscanf(name + 2 * i, "%2x", &byte) == 1;
    key.bytes[i] = (uint8_t)byte;
  }
  void* value = NULL;
  size_t value_size_out = 0;
  uint64_t ns;
  pw_status_t s = named ? pw__cache_entry_decode(&key, data, got, pw_allocator_system(), NULL, &value,
                                                 &value_size_out, &ns)
                        : pw_status_make(PW_STATUS_DATA_LOSS, "not a key name");
  if (s != NULL) {
    fprintf(stderr, "entry %s: %s\n", name, pw_status_message(s));
    pw_status_free(s);
    c->bad++;
  }
  pw_allocator_free(pw_allocator_system(), value, value_size_out);
  free(data);
  return true;
}

static int run_phase(const char* self, const char* dir, uint64_t max_bytes) {
  int go[2];
  if (pipe(go) != 0) return 1;
  pid_t pids[CHILDREN];
  for (int i = 0; i < CHILDREN; ++i) {
    pids[i] = fork();
    if (pids[i] == 0) {
      close(go[1]);
      char index[16], bound[32], fd[16];
      snprintf(index, sizeof(index), "%d", i);
      snprintf(bound, sizeof(bound), "%llu", (unsigned long long)max_bytes);
      snprintf(fd, sizeof(fd), "%d", go[0]);
      execl(self, self, "child", dir, index, bound, fd, (char*)NULL);
      _exit(127);
    }
  }
  close(go[0]);
  close(go[1]); /* release them all at once */
  int failures = 0;
  for (int i = 0; i < CHILDREN; ++i) {
    int status = 0;
    while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "child %d failed (status 0x%x)\n", i, status);
      failures++;
    }
  }
  int temps = cu_count_files(dir, ".tmp-");
  if (temps != 0) {
    fprintf(stderr, "%d temporary files left behind\n", temps);
    failures++;
  }
  pw_store_t store = cu_dir_store(dir, 0);
  check_t c = {dir, 0, 0};
  pw_status_ignore(store.vtable->list(store.self, check_entry, &c));
  store.vtable->destroy(store.self);
  failures += c.bad;
  printf("phase (bound %llu): %d entries left, all valid: %s\n", (unsigned long long)max_bytes,
         c.entries, c.bad ? "no" : "yes");
  return failures;
}

int main(int argc, char** argv) {
  if (argc == 6 && strcmp(argv[1], "child") == 0) {
    return child(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 10), atoi(argv[5]));
  }
  char dir[256];
  if (!cu_make_dir(dir, sizeof(dir))) return 1;
  int failures = run_phase(argv[0], dir, 0);
  cu_remove_dir(dir);
  if (!cu_make_dir(dir, sizeof(dir))) return 1;
  failures += run_phase(argv[0], dir, 300000);
  cu_remove_dir(dir);
  printf("stress_cache_processes: %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}
