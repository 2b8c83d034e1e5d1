/* libpathways: the store plug, a persistent key -> bytes map.
 *
 * The compilation cache (cache.h) keeps compiled executables in a store;
 * later work keeps snapshots there. The host application (or the bundled
 * `dir` store, stores/dir.h) fills a pw_store_vtable_t and hands the library
 * a pw_store_t {vtable, self}. Store authors include only this header.
 *
 * KEYS are short names: 1 to PW_STORE_KEY_MAX bytes of [A-Za-z0-9_.-], not
 * starting with '.', so that a store may use them as file or object names
 * as they are. Methods receive NUL-terminated keys that obey this rule.
 *
 * VALUES are opaque bytes. The library frames what it stores (the cache
 * adds a header with a checksum, see docs/formats.md), so a store need not
 * verify contents; it must only never return a mix of two writes: put
 * replaces a value atomically (a reader sees the old bytes or the new, in
 * full), also across processes that share the store and across crashes.
 *
 * ABI: the vtable starts with struct_size and only grows at the end. The
 * library accepts any struct_size >= PW_STORE_VTABLE_SIZE_V1 and treats a
 * method that is NULL, or lies beyond struct_size, as UNIMPLEMENTED.
 *
 * Threading: every method may be called from any thread, concurrently,
 * except destroy (called once, when nothing else is in flight).
 */
#ifndef PATHWAYS_STORE_H_
#define PATHWAYS_STORE_H_

#include "pathways/allocator.h"
#include "pathways/api.h"
#include "pathways/status.h"

PW_EXTERN_C_BEGIN

/* Longest key, in bytes (without the NUL). */
#define PW_STORE_KEY_MAX 128

/* Called by list once per entry. |key| is valid during the call only;
 * |size| is the stored value's size in bytes. Return false to stop. */
typedef bool (*pw_store_list_fn_t)(void* user, const char* key, uint64_t size);

typedef struct pw_store_vtable_t {
  size_t struct_size;  /* sizeof(pw_store_vtable_t) of the store's build */
  const char* name;    /* "dir"; used in messages */

  /* Frees the store. Nothing may be in flight. */
  void (*destroy)(void* self);

  /* Reads the value of |key| into memory allocated from |allocator| (the
   * caller frees it with the same allocator and |*out_size|; a value of 0
   * bytes may come back as NULL). NOT_FOUND when absent; another error
   * (UNAVAILABLE, DATA_LOSS...) when the store cannot answer. */
  pw_status_t (*get)(void* self, const char* key, pw_allocator_t allocator,
                     void** out_bytes, size_t* out_size);

  /* Stores |size| bytes as the value of |key|, replacing any previous value
   * atomically. On error the previous value (or absence) is kept. A store
   * with a size bound may evict other entries to make room, and refuses
   * (RESOURCE_EXHAUSTED) a value larger than the bound. */
  pw_status_t (*put)(void* self, const char* key, const void* bytes,
                     size_t size);

  /* Deletes |key| ("delete"; named so that the header stays valid C++).
   * NOT_FOUND when absent. */
  pw_status_t (*remove)(void* self, const char* key);

  /* Calls |fn| for each entry, in no particular order. Entries written or
   * removed meanwhile may or may not be seen. */
  pw_status_t (*list)(void* self, pw_store_list_fn_t fn, void* user);

  /* -- v2 methods start here -- */
} pw_store_vtable_t;

#define PW_STORE_VTABLE_SIZE_V1 PW_STRUCT_SIZE(pw_store_vtable_t, list)

/* A store instance. Whoever is handed one takes ownership (and calls
 * vtable->destroy(self) when done with it). A zero pw_store_t (NULL
 * vtable) means "no store". */
typedef struct pw_store_t {
  const pw_store_vtable_t* vtable;
  void* self;
} pw_store_t;

/* True when |key| follows the key rule above. */
static inline bool pw_store_key_is_valid(const char* key) {
  if (key == NULL || key[0] == '\0' || key[0] == '.') return false;
  size_t n = 0;
  for (; key[n] != '\0'; ++n) {
    char c = key[n];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!ok || n >= PW_STORE_KEY_MAX) return false;
  }
  return true;
}

PW_EXTERN_C_END

#endif /* PATHWAYS_STORE_H_ */
