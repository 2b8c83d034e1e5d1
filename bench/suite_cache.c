#define _GNU_SOURCE /* dladdr */
/* pw-bench cache: what the compilation cache costs and saves.
 *
 * Rows (one run, so ratios hold on a noisy machine; medians over --reps):
 *   memory_hit        pw_cache_lookup + pw_cache_entry_release of a key in
 *                     the memory tier: mean ns per lookup over --lookups
 *                     back-to-back lookups, and p50/p99 of single timed
 *                     lookups. Target: <= 1 us.
 *   store_hit         a persistent hit for a 1 MiB value (--value-kib) of
 *                     real x86-64 machine code (the first bytes of the C
 *                     library's shared object, which zstd shrinks about
 *                     2.5x as it would compiled executables; a synthetic
 *                     stand-in if that cannot be read):
 *                     open + read of the entry file (warm page cache),
 *                     header check, XXH64, zstd decompression. The memory
 *                     tier is too small to keep it, so every lookup goes to
 *                     the store. Target: <= 2 ms.
 *   store_write       the write-back after a miss, same value: zstd, write
 *                     a temporary file, fsync, rename, fsync(dir); the
 *                     fill itself (a memcpy) is subtracted.
 *   compile_cpu       what a hit saves on the bundled CPU backend:
 *                     pw_executable_compile of a matmul program without a
 *                     cache, and with one (a memory hit), end to end.
 *   zstd_value        raw/stored size of that value, header included.
 * Options: --reps N (7), --lookups N (200000), --value-kib N (1024),
 *          --samples N (store samples per rep, 20). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "pathways/backends/cpu.h"
#include "pathways/cache.h"
#include "pathways/pathways.h"
#include "pathways/stores/dir.h"
#include "suites.h"

#define PW_CB_PROGRAM                                                          \
  "kernel matmul\ninput f32[64,16] split(0,all)\ninput f32[16,4] replicated\n" \
  "output f32[64,4] split(0,all)\n"

typedef struct pw_cb_value_t {
  const uint8_t* data;
  size_t size;
} pw_cb_value_t;

static pw_status_t pw_cb_fill(void* user, pw_allocator_t a, void** out, size_t* out_size) {
  const pw_cb_value_t* v = user;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(a, v->size, 0, out));
  memcpy(*out, v->data, v->size);
  *out_size = v->size;
  return NULL;
}

/* Real machine code: the C library's shared object, from the start. */
static bool pw_cb_code_value(uint8_t* out, size_t size) {
  Dl_info info;
  if (dladdr((void*)&fopen, &info) == 0 || info.dli_fname == NULL) return false;
  FILE* f = fopen(info.dli_fname, "rb");
  if (f == NULL) return false;
  size_t got = fread(out, 1, size, f);
  fclose(f);
  if (got == size) fprintf(stderr, "value: the first %zu bytes of %s\n", size, info.dli_fname);
  return got == size;
}

static void pw_cb_make_value(uint8_t* out, size_t size) {
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < size; i += 4) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    uint32_t word = (uint32_t)((x % 383) * 2654435761u);
    for (size_t k = 0; k < 4 && i + k < size; ++k) out[i + k] = (uint8_t)(word >> (8 * k));
  }
}

static bool pw_cb_ok(pw_status_t s, const char* what) {
  if (s == NULL) return true;
  fprintf(stderr, "pw-bench cache: %s: %s\n", what, pw_status_message(s));
  pw_status_free(s);
  return false;
}

static pw_cache_key_t pw_cb_key(uint64_t n) {
  pw_cache_key_t k;
  memset(&k, 0, sizeof(k));
  for (int i = 0; i < 8; ++i) {
    k.bytes[i] = (uint8_t)(n >> (8 * i));
    k.bytes[8 + i] = (uint8_t)((n * 0x9E3779B97F4A7C15ull) >> (8 * i));
  }
  return k;
}

static pw_cache_t* pw_cb_cache(const char* dir, uint64_t memory_bytes) {
  pw_cache_options_t o;
  pw_cache_options_init(&o);
  o.memory_bytes = memory_bytes;
  if (dir) {
    pw_dir_store_options_t so;
    pw_dir_store_options_init(&so);
    so.path = dir;
    if (!pw_cb_ok(pw_dir_store_create(&so, &o.store), "dir store")) return NULL;
  }
  pw_cache_t* c = NULL;
  return pw_cb_ok(pw_cache_create(&o, &c), "cache") ? c : NULL;
}

static void pw_cb_row(const char* row, double p50, double p99, double mean, double target,
                      const char* unit) {
  pw_bench_json_t j;
  pw_bench_json_begin(&j, "cache");
  pw_bench_json_str(&j, "row", row);
  pw_bench_json_str(&j, "unit", unit);
  pw_bench_json_num(&j, "median", mean);
  if (p50 >= 0) pw_bench_json_num(&j, "p50", p50); else pw_bench_json_null(&j, "p50");
  if (p99 >= 0) pw_bench_json_num(&j, "p99", p99); else pw_bench_json_null(&j, "p99");
  if (target > 0) {
    pw_bench_json_num(&j, "target", target);
    pw_bench_json_str(&j, "met", mean <= target ? "yes" : "no");
  } else {
    pw_bench_json_null(&j, "target");
  }
  pw_bench_json_end(&j);
  fprintf(stderr, "%-22s %12.3f %-3s  p50 %10.3f  p99 %10.3f  %s\n", row, mean, unit, p50, p99,
          target > 0 ? (mean <= target ? "(target met)" : "(TARGET MISSED)") : "");
}

/* Memory hits: median over reps of the mean per lookup, and single-lookup
 * percentiles. */
static int pw_cb_memory(long long reps, long long lookups) {
  pw_cache_t* c = pw_cb_cache(NULL, 0);
  if (c == NULL) return 1;
  static uint8_t small[64 << 10];
  pw_cb_make_value(small, sizeof(small));
  pw_cb_value_t v = {small, sizeof(small)};
  pw_cache_key_t key = pw_cb_key(1);
  pw_cache_entry_t* e;
  if (!pw_cb_ok(pw_cache_lookup(c, &key, pw_cb_fill, &v, &e, NULL), "fill")) return 1;
  pw_cache_entry_release(e);
  double* means = calloc((size_t)reps, sizeof(double));
  double* singles = calloc(10000, sizeof(double));
  for (long long r = 0; r < reps; ++r) {
    int64_t t0 = pw_bench_now_ns();
    for (long long i = 0; i < lookups; ++i) {
      pw_status_t s = pw_cache_lookup(c, &key, pw_cb_fill, &v, &e, NULL);
      if (s != NULL) return !pw_cb_ok(s, "memory hit");
      pw_cache_entry_release(e);
    }
    means[r] = (double)(pw_bench_now_ns() - t0) / (double)lookups;
  }
  for (int i = 0; i < 10000; ++i) {
    int64_t t0 = pw_bench_now_ns();
    pw_status_ignore(pw_cache_lookup(c, &key, pw_cb_fill, &v, &e, NULL));
    pw_cache_entry_release(e);
    singles[i] = (double)(pw_bench_now_ns() - t0);
  }
  pw_cb_row("memory_hit", pw_bench_percentile(singles, 10000, 50),
            pw_bench_percentile(singles, 10000, 99), pw_bench_median(means, (size_t)reps), 1000,
            "ns");
  free(means);
  free(singles);
  pw_cache_release(c);
  return 0;
}

/* Persistent hits and write-backs of one |size|-byte value. */
static int pw_cb_store(long long reps, long long samples, size_t size, double* out_hit_us) {
  char dir[256];
  snprintf(dir, sizeof(dir), "%s/pw-bench-cache-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (mkdtemp(dir) == NULL) return 1;
  uint8_t* value = malloc(size);
  if (!pw_cb_code_value(value, size)) pw_cb_make_value(value, size);
  pw_cb_value_t v = {value, size};
  pw_cache_t* c = pw_cb_cache(dir, 1); /* nothing stays in memory */
  if (c == NULL) return 1;
  long long n = reps * samples;
  double* hit = calloc((size_t)n, sizeof(double));
  double* write = calloc((size_t)n, sizeof(double));
  double* fill = calloc((size_t)n, sizeof(double));
  pw_cache_entry_t* e;
  /* Misses first (each writes its entry), then hits on them: the order a
   * restarted process sees. */
  for (long long i = 0; i < n; ++i) {
    pw_cache_key_t key = pw_cb_key(1000 + (uint64_t)i);
    void* copy = NULL;
    size_t copy_size = 0;
    int64_t t0 = pw_bench_now_ns();
    pw_status_ignore(pw_cb_fill(&v, pw_allocator_system(), &copy, &copy_size));
    fill[i] = (double)(pw_bench_now_ns() - t0);
    pw_allocator_free(pw_allocator_system(), copy, copy_size);
    t0 = pw_bench_now_ns();
    if (!pw_cb_ok(pw_cache_lookup(c, &key, pw_cb_fill, &v, &e, NULL), "miss")) return 1;
    write[i] = (double)(pw_bench_now_ns() - t0) - fill[i];
    pw_cache_entry_release(e);
  }
  for (long long i = 0; i < n; ++i) {
    pw_cache_key_t key = pw_cb_key(1000 + (uint64_t)i);
    int64_t t0 = pw_bench_now_ns();
    if (!pw_cb_ok(pw_cache_lookup(c, &key, pw_cb_fill, &v, &e, NULL), "store hit")) return 1;
    hit[i] = (double)(pw_bench_now_ns() - t0);
    pw_cache_entry_release(e);
  }
  pw_cache_stats_t st;
  memset(&st, 0, sizeof(st));
  st.struct_size = sizeof(st);
  pw_status_ignore(pw_cache_stats(c, &st));
  char row[64];
  snprintf(row, sizeof(row), "store_hit_%zuKiB", size >> 10);
  double hit_us = pw_bench_median(hit, (size_t)n) / 1e3;
  pw_cb_row(row, pw_bench_percentile(hit, (size_t)n, 50) / 1e3,
            pw_bench_percentile(hit, (size_t)n, 99) / 1e3, hit_us,
            size == (1u << 20) ? 2000 : 0, "us");
  snprintf(row, sizeof(row), "store_write_%zuKiB", size >> 10);
  pw_cb_row(row, pw_bench_percentile(write, (size_t)n, 50) / 1e3,
            pw_bench_percentile(write, (size_t)n, 99) / 1e3,
            pw_bench_median(write, (size_t)n) / 1e3, 0, "us");
  pw_bench_json_t j;
  pw_bench_json_begin(&j, "cache");
  pw_bench_json_str(&j, "row", "zstd_value");
  pw_bench_json_int(&j, "raw_bytes", (long long)st.store_raw_bytes_written);
  pw_bench_json_int(&j, "stored_bytes", (long long)st.store_bytes_written);
  pw_bench_json_num(&j, "ratio", (double)st.store_raw_bytes_written / (double)st.store_bytes_written);
  pw_bench_json_end(&j);
  fprintf(stderr, "%-22s %12.2f x    (%llu -> %llu bytes, framed)\n", "zstd_value",
          (double)st.store_raw_bytes_written / (double)st.store_bytes_written,
          (unsigned long long)st.store_raw_bytes_written,
          (unsigned long long)st.store_bytes_written);
  *out_hit_us = hit_us;
  pw_cache_release(c);
  free(hit);
  free(write);
  free(fill);
  free(value);
  char cmd[320];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "pw-bench cache: could not remove %s\n", dir);
  return 0;
}

/* pw_executable_compile on a CPU-backend runtime, without and with a
 * (memory-hit) cache. */
static int pw_cb_compile(long long reps, double store_hit_us) {
  pw_cpu_backend_options_t bo;
  pw_cpu_backend_options_init(&bo);
  bo.device_count = 8;
  bo.worker_count = 1;
  pw_backend_t backend;
  if (!pw_cb_ok(pw_cpu_backend_create(&bo, &backend), "cpu backend")) return 1;
  pw_slice_desc_t slice;
  memset(&slice, 0, sizeof(slice));
  slice.mesh = (pw_mesh_shape_t)PW_MESH_SHAPE_INIT(1, 8, 0, 0, 0);
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = &slice;
  ro.slice_count = 1;
  pw_runtime_t* rt;
  if (!pw_cb_ok(pw_runtime_create(&ro, &rt), "runtime")) return 1;
  pw_client_t* client;
  pw_vslice_t vs;
  if (!pw_cb_ok(pw_client_create(rt, NULL, &client), "client") ||
      !pw_cb_ok(pw_vslice_create(client, &slice.mesh, 0, &vs), "vslice")) {
    return 1;
  }
  pw_cache_t* cache = pw_cb_cache(NULL, 0);
  const int per_rep = 2000;
  double* plain = calloc((size_t)reps, sizeof(double));
  double* cached = calloc((size_t)reps, sizeof(double));
  size_t exe_size = 0;
  pw_executable_t e;
  for (long long r = 0; r < reps; ++r) {
    for (int pass = 0; pass < 2; ++pass) {
      pw_status_ignore(pw_runtime_set_compile_cache(rt, pass ? cache : NULL));
      int64_t t0 = pw_bench_now_ns();
      for (int i = 0; i < per_rep; ++i) {
        pw_status_t s = pw_executable_compile(client, vs, PW_CB_PROGRAM, strlen(PW_CB_PROGRAM),
                                              NULL, &e);
        if (s != NULL) return !pw_cb_ok(s, "compile");
        if (exe_size == 0) {
          const void* bytes;
          pw_status_ignore(pw_executable_bytes(client, e, &bytes, &exe_size));
        }
        pw_status_ignore(pw_executable_release(client, e));
      }
      (pass ? cached : plain)[r] = (double)(pw_bench_now_ns() - t0) / per_rep / 1e3;
    }
  }
  double p = pw_bench_median(plain, (size_t)reps), c = pw_bench_median(cached, (size_t)reps);
  pw_cb_row("compile_cpu_uncached", -1, -1, p, 0, "us");
  pw_cb_row("compile_cpu_memory_hit", -1, -1, c, 0, "us");
  pw_bench_json_t j;
  pw_bench_json_begin(&j, "cache");
  pw_bench_json_str(&j, "row", "compile_cpu_ratio");
  pw_bench_json_num(&j, "uncached_over_memory_hit", p / c);
  pw_bench_json_num(&j, "store_hit_1MiB_over_uncached_cpu_compile", store_hit_us / p);
  pw_bench_json_int(&j, "executable_bytes", (long long)exe_size);
  pw_bench_json_end(&j);
  fprintf(stderr,
          "compile_cpu: uncached/memory-hit = %.2fx; the CPU backend's %zu-byte executable "
          "compiles in %.1f us, so a 1 MiB persistent hit (%.0f us) pays off only for compiles "
          "above that\n",
          p / c, exe_size, p, store_hit_us);
  free(plain);
  free(cached);
  pw_client_destroy(client);
  pw_runtime_destroy(rt);
  pw_cache_release(cache);
  return 0;
}

static int pw_bench_suite_cache(int argc, char** argv) {
  long long reps = pw_bench_opt_int(argc, argv, "reps", 7);
  long long lookups = pw_bench_opt_int(argc, argv, "lookups", 200000);
  long long kib = pw_bench_opt_int(argc, argv, "value-kib", 1024);
  long long samples = pw_bench_opt_int(argc, argv, "samples", 20);
  if (reps < 1 || lookups < 1 || kib < 1 || samples < 1) {
    fprintf(stderr, "pw-bench cache: --reps, --lookups, --value-kib, --samples >= 1\n");
    return 2;
  }
  int rc = pw_cb_memory(reps, lookups);
  double hit_us = 0;
  if (rc == 0) rc = pw_cb_store(reps, samples, (size_t)kib << 10, &hit_us);
  if (rc == 0) rc = pw_cb_compile(reps, hit_us);
  return rc;
}

PW_BENCH_SUITE(cache, "cache",
               "compilation cache: memory-hit latency, 1 MiB persistent hit and write-back, "
               "CPU compile with and without the cache, zstd ratio",
               pw_bench_suite_cache)
