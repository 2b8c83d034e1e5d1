#define _POSIX_C_SOURCE 200809L
#include "cache/cache_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool cu_make_dir(char* out, size_t size) {
  const char* base = getenv("TMPDIR");
  snprintf(out, size, "%s/pw-cache-test-XXXXXX", base && base[0] ? base : "/tmp");
  return mkdtemp(out) != NULL;
}

void cu_remove_dir(const char* path) {
  DIR* dir = opendir(path);
  if (dir != NULL) {
    struct dirent* de;
    while ((de = readdir(dir)) != NULL) {
      if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
      char file[1024];
      snprintf(file, sizeof(file), "%s/%s", path, de->d_name);
      unlink(file);
    }
    closedir(dir);
  }
  rmdir(path);
}

int cu_count_files(const char* path, const char* prefix) {
  DIR* dir = opendir(path);
  int n = 0;
  if (dir == NULL) return -1;
  struct dirent* de;
  while ((de = readdir(dir)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) n++;
  }
  closedir(dir);
  return n;
}

static void cu_log_fn(pw_log_level_t level, const char* subsystem, const char* message,
                      void* user) {
  cu_log_t* log = user;
  if (level < PW_LOG_WARN) return;
  log->warnings++;
  snprintf(log->last, sizeof(log->last), "%s: %s", subsystem, message);
}

pw_logger_t cu_logger(cu_log_t* log) {
  memset(log, 0, sizeof(*log));
  pw_logger_t l = {cu_log_fn, log, PW_LOG_DEBUG};
  return l;
}

void cu_fill_value(uint8_t* out, size_t size, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < size; i += 4) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    uint32_t word = (uint32_t)((x % 383) * 2654435761u);
    for (size_t k = 0; k < 4 && i + k < size; ++k) out[i + k] = (uint8_t)(word >> (8 * k));
  }
}

pw_store_t cu_dir_store(const char* path, uint64_t max_bytes) {
  pw_dir_store_options_t o;
  pw_dir_store_options_init(&o);
  o.path = path;
  o.max_bytes = max_bytes;
  pw_store_t store = {NULL, NULL};
  pw_status_t s = pw_dir_store_create(&o, &store);
  if (s != NULL) {
    fprintf(stderr, "cu_dir_store: %s\n", pw_status_message(s));
    pw_status_free(s);
  }
  return store;
}

pw_cache_t* cu_cache(const char* path, uint64_t memory_bytes, pw_logger_t logger) {
  pw_cache_options_t o;
  pw_cache_options_init(&o);
  o.memory_bytes = memory_bytes;
  o.logger = logger;
  if (path != NULL) o.store = cu_dir_store(path, 0);
  pw_cache_t* cache = NULL;
  pw_status_t s = pw_cache_create(&o, &cache);
  if (s != NULL) {
    fprintf(stderr, "cu_cache: %s\n", pw_status_message(s));
    pw_status_free(s);
  }
  return cache;
}

pw_cache_key_t cu_key(uint64_t n) {
  pw_cache_key_t k;
  uint64_t x = n + 0x243F6A8885A308D3ull;
  for (int half = 0; half < 2; ++half) {
    x += 0x9E3779B97F4A7C15ull; /* splitmix64 */
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    for (int i = 0; i < 8; ++i) k.bytes[8 * half + i] = (uint8_t)(z >> (8 * i));
  }
  return k;
}
