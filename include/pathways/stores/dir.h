/* libpathways: the bundled `dir` store, a local directory.
 *
 * One file per key, named as the key. Written as a host would write its
 * own store: it uses only the public headers (store.h).
 *
 * Durability and atomicity: put writes a temporary file ".tmp-KEY-PID-N"
 * (N unique in the process, across stores) in the directory, fsyncs it,
 * renames it over KEY, then fsyncs the directory. A reader (this process
 * or another) sees the old file or the new one, never a torn one; a crash
 * or kill leaves at most a temporary file, which a later
 * pw_dir_store_create removes (when its process is gone, or it is older
 * than |stale_temp_seconds|). Any failing step (write, fsync, rename)
 * removes the temporary file and keeps the previous value; a failing fsync
 * of the directory after the rename is reported (UNAVAILABLE) although the
 * new value is in place.
 *
 * Size bound: with |max_bytes| set, a put that brings the directory's
 * entries over the bound evicts the least recently used entries (by file
 * modification time, which get refreshes) until they fit; a value larger
 * than the bound is refused with RESOURCE_EXHAUSTED. Several processes may
 * share one directory: each evicts by what it finds there.
 *
 * Errors name the store's path and the key; ENOSPC/EDQUOT are
 * RESOURCE_EXHAUSTED, other I/O errors UNAVAILABLE.
 */
#ifndef PATHWAYS_STORES_DIR_H_
#define PATHWAYS_STORES_DIR_H_

#include "pathways/log.h"
#include "pathways/store.h"

PW_EXTERN_C_BEGIN

typedef struct pw_dir_store_options_t {
  size_t struct_size;        /* sizeof(pw_dir_store_options_t) */
  /* The directory (copied). Created if missing (its parent must exist). */
  const char* path;
  /* Upper bound on the bytes of all entries; 0 = unbounded. */
  uint64_t max_bytes;
  /* Temporary files older than this are removed at open even when their
   * process may still live (another host on a shared file system);
   * 0 = 3600. */
  uint32_t stale_temp_seconds;
  pw_allocator_t allocator;  /* zero = pw_allocator_system() */
  pw_logger_t logger;        /* zero = pw_logger_default() */
} pw_dir_store_options_t;

#define PW_DIR_STORE_OPTIONS_SIZE_V1 PW_STRUCT_SIZE(pw_dir_store_options_t, logger)

/* Fills |options| with the defaults (no path). */
PW_API void pw_dir_store_options_init(pw_dir_store_options_t* options);

/* Opens (creating if needed) the directory store at |options->path| and
 * removes stale temporary files. On success |*out_store| owns the store:
 * hand it to a cache (which destroys it) or call
 * out_store->vtable->destroy(out_store->self). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_dir_store_create(
    const pw_dir_store_options_t* options, pw_store_t* out_store);

/* Temporary files the last pw_dir_store_create of |store| removed (for
 * tests and logs); 0 for a store that is not a dir store. */
PW_API uint32_t pw_dir_store_stale_removed(const pw_store_t* store);

PW_EXTERN_C_END

#endif /* PATHWAYS_STORES_DIR_H_ */
