/* Internal: XXH3 hashing. One wrapper so the rest of the library does not
 * include <xxhash.h> and the algorithm can be pinned in one place (cache keys
 * and graph hashes are persisted, so the function must never change
 * silently). */
#ifndef PW_BASE_HASH_H_
#define PW_BASE_HASH_H_

#include <stddef.h>
#include <stdint.h>

typedef struct pw_hash128_t {
  uint64_t low;
  uint64_t high;
} pw_hash128_t;

/* Streaming XXH3-128 state; opaque storage large enough for XXH3_state_t. */
typedef struct pw_hasher_t {
  _Alignas(64) unsigned char storage[640];
} pw_hasher_t;

uint64_t pw__hash64(const void* data, size_t size, uint64_t seed);
pw_hash128_t pw__hash128(const void* data, size_t size, uint64_t seed);
uint64_t pw__xxh64(const void* data, size_t size, uint64_t seed);

void pw__hasher_init(pw_hasher_t* hasher, uint64_t seed);
void pw__hasher_update(pw_hasher_t* hasher, const void* data, size_t size);
void pw__hasher_update_u64(pw_hasher_t* hasher, uint64_t value);
pw_hash128_t pw__hasher_final(const pw_hasher_t* hasher);

/* 32 lowercase hex digits (high then low) plus NUL. */
void pw__hash128_to_hex(pw_hash128_t hash, char out[33]);

static inline int pw__hash128_equal(pw_hash128_t a, pw_hash128_t b) {
  return a.low == b.low && a.high == b.high;
}

#endif /* PW_BASE_HASH_H_ */
