#include "base/hash.h"

#include <stdio.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

_Static_assert(sizeof(XXH3_state_t) <= sizeof(((pw_hasher_t*)0)->storage),
               "pw_hasher_t storage too small for XXH3_state_t");

uint64_t pw__hash64(const void* data, size_t size, uint64_t seed) {
  return XXH3_64bits_withSeed(data, size, seed);
}

pw_hash128_t pw__hash128(const void* data, size_t size, uint64_t seed) {
  XXH128_hash_t h = XXH3_128bits_withSeed(data, size, seed);
  pw_hash128_t out = {h.low64, h.high64};
  return out;
}

uint64_t pw__xxh64(const void* data, size_t size, uint64_t seed) {
  return XXH64(data, size, seed);
}

void pw__hasher_init(pw_hasher_t* hasher, uint64_t seed) {
  XXH3_state_t* state = (XXH3_state_t*)hasher->storage;
  XXH3_INITSTATE(state);
  XXH3_128bits_reset_withSeed(state, seed);
}

void pw__hasher_update(pw_hasher_t* hasher, const void* data, size_t size) {
  XXH3_128bits_update((XXH3_state_t*)hasher->storage, data, size);
}

void pw__hasher_update_u64(pw_hasher_t* hasher, uint64_t value) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = (unsigned char)(value >> (8 * i));
  pw__hasher_update(hasher, bytes, sizeof(bytes));
}

pw_hash128_t pw__hasher_final(const pw_hasher_t* hasher) {
  XXH128_hash_t h = XXH3_128bits_digest((const XXH3_state_t*)hasher->storage);
  pw_hash128_t out = {h.low64, h.high64};
  return out;
}

void pw__hash128_to_hex(pw_hash128_t hash, char out[33]) {
  snprintf(out, 33, "%016llx%016llx", (unsigned long long)hash.high,
           (unsigned long long)hash.low);
}
