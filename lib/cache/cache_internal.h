/* Internal: the compilation cache's parts shared between its files and
 * with lib/runtime/executable.c.
 *
 *   entry.c       the framed, checksummed, zstd-compressed store entry
 *   cache.c       memory tier (LRU by bytes), single flight, stats
 *   compile.c     compile keys, compiling through the cache, runtime hook
 *
 * Store calls go through plugin/store_call.h.
 */
#ifndef PW_CACHE_CACHE_INTERNAL_H_
#define PW_CACHE_CACHE_INTERNAL_H_

#include "pathways/backend.h"
#include "pathways/cache.h"
#include "pathways/store.h"
#include "plugin/store_call.h"

/* ---- store entries (docs/formats.md, "Cache entry") ----------------------- */

#define PW_CACHE_ENTRY_MAGIC "PWCACHE\n"
#define PW_CACHE_ENTRY_VERSION 1u
#define PW_CACHE_ENTRY_HEADER_SIZE 72u
/* Values larger than this are never written or read back. */
#define PW_CACHE_ENTRY_VALUE_MAX ((uint64_t)1 << 31)

enum { PW_CACHE_CODEC_RAW = 0, PW_CACHE_CODEC_ZSTD = 1 };

/* zstd contexts kept between entries (creating them costs more than
 * decompressing a small entry). Not thread-safe: one user at a time. */
typedef struct pw_cache_zstd_s {
  void* cctx;  /* ZSTD_CCtx*, created on first use */
  void* dctx;  /* ZSTD_DCtx* */
  pw_allocator_t allocator;
} pw_cache_zstd_t;

/* Frees the contexts (not |z| itself). */
void pw__cache_zstd_deinit(pw_cache_zstd_t* z);

/* Frames |value| for the store: header + payload (zstd at |level| when it
 * shrinks the value, raw otherwise). |*out_entry| is allocated from
 * |allocator| with |*out_capacity| bytes, of which |*out_size| are used.
 * |zstd| (may be NULL: temporary contexts) must use |allocator|. */
pw_status_t pw__cache_entry_encode(const pw_cache_key_t* key, const void* value,
                                   size_t value_size, uint64_t fill_ns, int level,
                                   pw_allocator_t allocator, pw_cache_zstd_t* zstd,
                                   void** out_entry, size_t* out_size, size_t* out_capacity);

/* Checks and unframes |entry| read under |key|: DATA_LOSS naming what is
 * wrong (short, bad magic, other format version, header or payload
 * checksum, sizes, foreign key, zstd error) or the value in
 * |*out_value| (|*out_value_size| bytes from |allocator|; NULL for 0).
 * |zstd| as for encode. */
pw_status_t pw__cache_entry_decode(const pw_cache_key_t* key, const void* entry,
                                   size_t entry_size, pw_allocator_t allocator,
                                   pw_cache_zstd_t* zstd, void** out_value,
                                   size_t* out_value_size, uint64_t* out_fill_ns);

/* ---- checked store calls: plugin/store_call.h ------------------------------ */

/* ---- compiling through the cache ------------------------------------------ */

/* Drop-in for pw__backend_compile: the bytes come from |cache| (memory,
 * then store) or from compiling, and are copied into |allocator| memory.
 * |*out_key| is the compile key (for pw_cache_invalidate) and
 * |*out_cached| says whether the bytes came from the cache rather than
 * from this call's compile. */
pw_status_t pw__cache_compile(pw_cache_t* cache, const pw_backend_t* backend,
                              const void* program, size_t program_size,
                              const pw_mesh_shape_t* mesh, const char* options,
                              pw_allocator_t allocator, void** out_bytes, size_t* out_size,
                              pw_cache_key_t* out_key, bool* out_cached);

/* The logger of |cache| (for callers that report on its behalf). */
const pw_logger_t* pw__cache_logger(const pw_cache_t* cache);

#endif /* PW_CACHE_CACHE_INTERNAL_H_ */
