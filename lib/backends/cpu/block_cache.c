/* The CPU backend's device blocks: a cache of freed ones, and huge pages
 * for large new ones.
 *
 * Device memory is host memory from the allocator. Large blocks come from
 * mmap in glibc and go back to the kernel when freed, so every new one is
 * first-touch memory: on the VMs this was measured on a page fault costs
 * more than copying the page, and restoring a snapshot into fresh shards
 * ran at a fraction of memcpy speed (docs/performance.md, "Recovery").
 * Freed blocks of at least PW_CPU__CACHE_MIN_BYTES are kept here instead,
 * up to a byte budget (pw_cpu_backend_options_t.block_cache_bytes), and an
 * allocation takes the smallest kept block that fits with at most a
 * quarter to spare. The cache is one per backend (every device's memory is
 * the same host memory), guarded by a mutex: it is touched only for large
 * blocks, whose allocation costs far more. When the budget or the entry
 * table is full the oldest block is freed first.
 *
 * The 2 MiB-aligned interior of a new block of PW_CPU__HUGE_MIN_BYTES or
 * more is advised MADV_HUGEPAGE (Linux; where transparent huge pages are set to
 * "madvise" or "always"), so first touching it faults once per 2 MiB
 * instead of once per 4 KiB page: about 4x faster to fill on the VMs this
 * was measured on. Elsewhere the advice is skipped. */
#define _DEFAULT_SOURCE
#include <string.h>
#include <sys/mman.h>

#include "backends/cpu/cpu_internal.h"

void pw_cpu__cache_init(pw_cpu__block_cache_t* cache, uint64_t budget) {
  memset(cache, 0, sizeof(*cache));
  pthread_mutex_init(&cache->mutex, NULL);
  cache->budget = budget;
}

static void pw_cpu_cache_free_entry(pw_cpu__backend_t* backend, pw_cpu__cached_block_t* e) {
  pw_allocator_free(backend->allocator, e->block, e->size);
}

void pw_cpu__cache_drain(pw_cpu__backend_t* backend) {
  pw_cpu__block_cache_t* cache = &backend->cache;
  pthread_mutex_lock(&cache->mutex);
  for (uint32_t i = 0; i < cache->count; ++i) pw_cpu_cache_free_entry(backend, &cache->entries[i]);
  cache->count = 0;
  cache->bytes = 0;
  pthread_mutex_unlock(&cache->mutex);
}

void pw_cpu__cache_deinit(pw_cpu__backend_t* backend) {
  pw_cpu__cache_drain(backend);
  pthread_mutex_destroy(&backend->cache.mutex);
}

void* pw_cpu__cache_take(pw_cpu__backend_t* backend, size_t need, size_t* out_size) {
  pw_cpu__block_cache_t* cache = &backend->cache;
  if (cache->budget == 0 || need < PW_CPU__CACHE_MIN_BYTES) return NULL;
  size_t limit = need + need / 4;
  void* block = NULL;
  pthread_mutex_lock(&cache->mutex);
  uint32_t best = UINT32_MAX;
  for (uint32_t i = 0; i < cache->count; ++i) {
    size_t s = cache->entries[i].size;
    if (s >= need && s <= limit && (best == UINT32_MAX || s < cache->entries[best].size)) best = i;
  }
  if (best != UINT32_MAX) {
    block = cache->entries[best].block;
    *out_size = cache->entries[best].size;
    cache->bytes -= cache->entries[best].size;
    cache->entries[best] = cache->entries[--cache->count];
    cache->hits++;
  } else {
    cache->misses++;
  }
  pthread_mutex_unlock(&cache->mutex);
  return block;
}

bool pw_cpu__cache_put(pw_cpu__backend_t* backend, void* block, size_t size) {
  pw_cpu__block_cache_t* cache = &backend->cache;
  if (cache->budget == 0 || size < PW_CPU__CACHE_MIN_BYTES || size > cache->budget) return false;
  pw_cpu__cached_block_t evicted[PW_CPU__CACHE_ENTRIES];
  uint32_t evicted_count = 0;
  pthread_mutex_lock(&cache->mutex);
  /* Make room: the oldest blocks go first. */
  while (cache->count > 0 &&
         (cache->count == PW_CPU__CACHE_ENTRIES || cache->bytes + size > cache->budget)) {
    uint32_t oldest = 0;
    for (uint32_t i = 1; i < cache->count; ++i) {
      if (cache->entries[i].stamp < cache->entries[oldest].stamp) oldest = i;
    }
    evicted[evicted_count++] = cache->entries[oldest];
    cache->bytes -= cache->entries[oldest].size;
    cache->entries[oldest] = cache->entries[--cache->count];
    cache->evictions++;
  }
  pw_cpu__cached_block_t* e = &cache->entries[cache->count++];
  e->block = block;
  e->size = size;
  e->stamp = ++cache->clock;
  cache->bytes += size;
  pthread_mutex_unlock(&cache->mutex);
  /* Freed outside the lock: munmap can take a while. */
  for (uint32_t i = 0; i < evicted_count; ++i) pw_cpu_cache_free_entry(backend, &evicted[i]);
  return true;
}

void pw_cpu__cache_stats(pw_cpu__backend_t* backend, pw_cpu_block_cache_stats_t* out) {
  pw_cpu__block_cache_t* cache = &backend->cache;
  pthread_mutex_lock(&cache->mutex);
  out->budget_bytes = cache->budget;
  out->cached_bytes = cache->bytes;
  out->cached_blocks = cache->count;
  out->hits = cache->hits;
  out->misses = cache->misses;
  out->evictions = cache->evictions;
  pthread_mutex_unlock(&cache->mutex);
}

#define PW_CPU__HUGE_MIN_BYTES ((size_t)4 << 20)
#define PW_CPU__HUGE_PAGE ((size_t)2 << 20)

pw_status_t pw_cpu__block_alloc(pw_cpu__backend_t* backend, size_t size, size_t align,
                                void** out_block, size_t* out_size) {
  *out_size = size;
  *out_block = pw_cpu__cache_take(backend, size, out_size);
  if (*out_block != NULL) return NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(backend->allocator, size, align, out_block));
#ifdef MADV_HUGEPAGE
  if (size >= PW_CPU__HUGE_MIN_BYTES) {
    /* The 2 MiB-aligned interior of the block (allocators align to at most
     * a page). Advice only: a kernel without THP refuses it, and nothing
     * changes. */
    uintptr_t start = ((uintptr_t)*out_block + PW_CPU__HUGE_PAGE - 1) & ~(PW_CPU__HUGE_PAGE - 1);
    uintptr_t end = ((uintptr_t)*out_block + size) & ~(PW_CPU__HUGE_PAGE - 1);
    if (end > start) (void)madvise((void*)start, end - start, MADV_HUGEPAGE);
  }
#endif
  return NULL;
}

void pw_cpu__block_free(pw_cpu__backend_t* backend, void* block, size_t size) {
  if (!pw_cpu__cache_put(backend, block, size)) pw_allocator_free(backend->allocator, block, size);
}
