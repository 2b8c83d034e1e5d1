/* libpathways: the compilation cache.
 *
 * A content-addressed cache of bytes, made for compiled executables: a
 * memory tier (least recently used entries evicted past a byte bound) over
 * an optional persistent store (store.h; the bundled one is stores/dir.h).
 *
 * Keys are 128-bit XXH3 hashes. For compiled executables the key covers
 * exactly what determines the output (pw_cache_compile_key): the program
 * bytes, the backend's name and version, the mesh shape and the compile
 * options; nothing that varies from run to run (no paths, times, pids or
 * pointers), so processes and hosts agree on keys.
 *
 * Entries in the store are framed (docs/formats.md): magic, format version,
 * key, sizes, XXH64 of the payload, zstd-compressed payload. An entry that
 * is corrupt, truncated, of another format or filed under the wrong key is
 * a miss (logged, counted in |bad_entries|), never a crash or a wrong
 * value; the recomputed value replaces it.
 *
 * Single flight: concurrent lookups of one key run one fill; the others
 * wait for it and share its result (or its error).
 *
 * A runtime compiles through a cache once pw_runtime_set_compile_cache is
 * called: pw_executable_compile then looks the program up first.
 *
 * Thread-safety: every function may be called from any thread; a cache
 * may be shared by several runtimes of one process.
 */
#ifndef PATHWAYS_CACHE_H_
#define PATHWAYS_CACHE_H_

#include "pathways/allocator.h"
#include "pathways/api.h"
#include "pathways/log.h"
#include "pathways/runtime.h"
#include "pathways/status.h"
#include "pathways/store.h"
#include "pathways/types.h"

PW_EXTERN_C_BEGIN

typedef struct pw_cache_s pw_cache_t;
typedef struct pw_cache_entry_s pw_cache_entry_t;

/* A cache key: an XXH3-128 hash, high 64 bits first, each big-endian (the
 * order of its 32-digit hex form). */
typedef struct pw_cache_key_t {
  uint8_t bytes[16];
} pw_cache_key_t;

/* Writes the 32 lowercase hex digits of |key| and a NUL into |out|. */
PW_API void pw_cache_key_format(const pw_cache_key_t* key, char out[33]);

/* The key of compiling |program| (|program_size| bytes) with backend
 * |backend_name| at |backend_version| for |mesh| with |options| (NULL and
 * "" are the same). Length-prefixed fields under a domain tag, hashed with
 * XXH3-128; stable across builds, processes and hosts. INVALID_ARGUMENT
 * for a NULL name, mesh or out-pointer. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_cache_compile_key(
    const char* backend_name, uint32_t backend_version,
    const pw_mesh_shape_t* mesh, const void* program, size_t program_size,
    const char* options, pw_cache_key_t* out_key);

typedef struct pw_cache_options_t {
  size_t struct_size;        /* sizeof(pw_cache_options_t) */
  pw_allocator_t allocator;  /* zero = pw_allocator_system() */
  pw_logger_t logger;        /* zero = pw_logger_default(); subsystem "cache" */
  /* Bound of the memory tier in bytes of values; 0 = 256 MiB. A value
   * larger than the bound is returned but not kept in memory. */
  uint64_t memory_bytes;
  /* The persistent tier; zero = memory only. The cache takes ownership and
   * destroys it with the cache (also when create fails). */
  pw_store_t store;
  /* zstd level for entries written to the store; 0 = 3. */
  int32_t compression_level;
} pw_cache_options_t;

#define PW_CACHE_OPTIONS_SIZE_V1 PW_STRUCT_SIZE(pw_cache_options_t, compression_level)

/* Fills |options| with the defaults (memory only). */
PW_API void pw_cache_options_init(pw_cache_options_t* options);

/* Creates a cache holding one reference. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_cache_create(
    const pw_cache_options_t* options, pw_cache_t** out_cache);

PW_API void pw_cache_retain(pw_cache_t* cache);
/* Drops a reference; the last one frees the cache and destroys its store.
 * Lookups must not be in flight then. Entries handed out stay valid.
 * NULL is a no-op. */
PW_API void pw_cache_release(pw_cache_t* cache);

/* Computes the value of a key on a miss: |*out_bytes| (|*out_size| bytes,
 * may be 0 with NULL) allocated from |allocator|, which the cache then
 * owns. An error is handed to the lookups waiting on this fill. */
typedef pw_status_t (*pw_cache_fill_fn_t)(void* user, pw_allocator_t allocator,
                                          void** out_bytes, size_t* out_size);

/* Where a lookup's value came from. */
typedef enum pw_cache_origin_e {
  PW_CACHE_FROM_MEMORY = 0,  /* memory tier hit */
  PW_CACHE_FROM_STORE = 1,   /* persistent hit (now also in memory) */
  PW_CACHE_FROM_FILL = 2,    /* miss: this lookup ran |fill| */
  PW_CACHE_FROM_SHARED = 3,  /* another lookup's fill, waited for */
} pw_cache_origin_t;

/* Returns the value of |key| as a retained entry (release it with
 * pw_cache_entry_release): from memory, else from the store, else by
 * running |fill(user, ...)| on this thread, then keeping the value in
 * memory and writing it to the store (a store error is logged and
 * counted, not returned). Concurrent lookups of the same key wait for the
 * one fill. |out_origin| may be NULL. Errors: the fill's error (to every
 * lookup sharing that fill), or RESOURCE_EXHAUSTED. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_cache_lookup(
    pw_cache_t* cache, const pw_cache_key_t* key, pw_cache_fill_fn_t fill,
    void* user, pw_cache_entry_t** out_entry, pw_cache_origin_t* out_origin);

/* Removes |key| from the memory tier and the store (a value found bad
 * after it was returned, e.g. bytes a backend cannot load). Entries handed
 * out stay valid. NOT_FOUND errors of the store are ignored. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_cache_invalidate(pw_cache_t* cache,
                                                          const pw_cache_key_t* key);

/* The entry's bytes (valid while the entry is retained) and size. */
PW_API const void* pw_cache_entry_data(const pw_cache_entry_t* entry,
                                       size_t* out_size);
/* Releases an entry returned by pw_cache_lookup. NULL is a no-op. An entry
 * may outlive its cache. */
PW_API void pw_cache_entry_release(pw_cache_entry_t* entry);

typedef struct pw_cache_stats_t {
  size_t struct_size;          /* set by the caller: sizeof(pw_cache_stats_t) */
  uint64_t lookups;
  uint64_t memory_hits;
  uint64_t store_hits;
  uint64_t misses;             /* fills run */
  uint64_t shared;             /* lookups that waited for another's fill */
  uint64_t fill_errors;
  uint64_t bad_entries;        /* corrupt/truncated/foreign store entries */
  uint64_t store_errors;       /* store get/put failures (not NOT_FOUND) */
  uint64_t store_writes;       /* entries written to the store */
  uint64_t store_bytes_written;  /* framed, compressed bytes */
  uint64_t store_raw_bytes_written; /* the values' own bytes */
  uint64_t memory_entries;     /* now in the memory tier */
  uint64_t memory_bytes;       /* their value bytes */
  uint64_t memory_evictions;
  uint64_t fill_ns;            /* time spent in fills */
  /* Sum, over hits (memory, store, shared), of the time the entry's fill
   * took when it was computed (recorded in store entries too). */
  uint64_t fill_ns_saved;
} pw_cache_stats_t;

#define PW_CACHE_STATS_SIZE_V1 PW_STRUCT_SIZE(pw_cache_stats_t, fill_ns_saved)

/* Copies the counters into |out_stats|, whose struct_size the caller sets
 * (fields beyond it are not written). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_cache_stats(pw_cache_t* cache,
                                                     pw_cache_stats_t* out_stats);

/* Routes pw_executable_compile of |runtime| through |cache| (NULL stops
 * it). The runtime borrows |cache|: it must stay alive (a reference held)
 * until the runtime is destroyed or the cache is unset. Call it before
 * compiling; compiles already running use the previous setting. Executable
 * bytes from the cache that the backend then fails to load are invalidated
 * and compiled afresh. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_runtime_set_compile_cache(
    pw_runtime_t* runtime, pw_cache_t* cache);

PW_EXTERN_C_END

#endif /* PATHWAYS_CACHE_H_ */
