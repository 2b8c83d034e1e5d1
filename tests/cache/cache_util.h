/* Helpers for the cache and store tests: scratch directories, a logger
 * that keeps what it is told, values that compress like code. */
#ifndef PW_TESTS_CACHE_CACHE_UTIL_H_
#define PW_TESTS_CACHE_CACHE_UTIL_H_

#include <stddef.h>
#include <stdint.h>

#include "pathways/cache.h"
#include "pathways/stores/dir.h"

/* Makes a fresh directory under $TMPDIR (or /tmp) into |out| (256 bytes);
 * returns false on failure. */
bool cu_make_dir(char* out, size_t size);
/* Removes |path| and everything in it (one level of files). */
void cu_remove_dir(const char* path);
/* Files in |path| whose names start with |prefix|. */
int cu_count_files(const char* path, const char* prefix);

/* A logger that counts messages at WARN and above and keeps the last. */
typedef struct cu_log_t {
  int warnings;
  char last[512];
} cu_log_t;
pw_logger_t cu_logger(cu_log_t* log);

/* Fills |out| with |size| bytes derived from |seed|: a few hundred
 * distinct 4-byte words, so zstd shrinks it about as much as machine
 * code. */
void cu_fill_value(uint8_t* out, size_t size, uint64_t seed);

/* A dir store at |path| (bounded by |max_bytes|, 0 = not). */
pw_store_t cu_dir_store(const char* path, uint64_t max_bytes);

/* A cache over a dir store at |path| (or memory only for NULL). */
pw_cache_t* cu_cache(const char* path, uint64_t memory_bytes, pw_logger_t logger);

/* A well-mixed key for |n| (keys are hashes in real use). */
pw_cache_key_t cu_key(uint64_t n);

#endif /* PW_TESTS_CACHE_CACHE_UTIL_H_ */
