/* pw-bench host-overlap: does an asynchronous host transfer hide behind
 * compute (issue 21)? A training-like step loop on the CPU backend (one
 * device, one pool worker): each step runs one graph over a batch that
 * came from host memory,
 *   h = matmul(x, w1)  x: f32[rows, k] (the batch), w1: f32[k, n]
 *   g = matmul(h, w2)  w2: f32[n, n]
 *   s = reduce_sum(add(h, g), axis 0)  f32[n], the step's output
 * (--graph add: s = reduce_sum(x + x, axis 0), a lighter, memory-bound
 * step), and the modes below run interleaved, --steps steps each, in
 * every one of --rounds rounds (one runtime for the whole run):
 *   compute    the batch is on the device already (uploaded once): the
 *              step alone, the baseline (baseline_ns);
 *   blocking   pw_buffer_from_host of the batch on the stepping thread,
 *              then the step;
 *   overlap    pw_buffer_from_host_async (--fill: pw_buffer_create_empty
 *              and pw_buffer_fill_from_host) of batch N+1 with
 *              PW_HOST_IMMUTABLE_UNTIL_TRANSFER_COMPLETES, issued once
 *              step N is submitted, so the runtime's transfer thread copies
 *              it while step N computes. Two host batches alternate: one
 *              is reused (the data loader would write the next batch into
 *              it) only after its host-done event;
 *   zero_copy  the same with PW_HOST_ZERO_COPY (the CPU backend adopts the
 *              host memory: no copy at all); a host batch is reused after
 *              its host-done event, which comes once the step that read it
 *              has released it.
 * upload: one blocking pw_buffer_from_host of the batch alone (released
 * after), per round: what the transfer costs by itself.
 *
 * The worker is pinned to CPU 0 and the stepping thread (so the transfer
 * thread it starts, which inherits its mask) to CPU 1 (--no-pin: neither),
 * so the copy has a core of its own, as a device's DMA engine would. The
 * backend's device memory comes from a caching allocator (as accelerator
 * runtimes pool theirs; --no-pool: the system allocator, where every
 * batch is fresh memory and its page faults are part of the copy). Every
 * mode's last output of every round is checked against the compute
 * mode's, bit for bit (the same data, one device: the same sums).
 *
 * pw-bench host-overlap [--batch-mib 32] [--k 256] [--n 2] [--steps 24]
 *                       [--rounds 7] [--graph matmul|add] [--fill] [--no-pin]
 *                       [--no-pool] [--json]
 * stdout: one JSON object per mode ("bench":"host-overlap"; medians over
 * the rounds of the wall time per step, ratio = step_ns / baseline_ns,
 * paired_ratio = the median over rounds of the ratio within a round)
 * and a summary ("bench":"host-overlap-summary"); --json adds one line
 * per round and mode. stderr: a table. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_try.h"
#include "bench_util.h"
#include "pathways/backends/cpu.h"
#include "pathways/pathways.h"
#include "suites.h"

#define PW_HO_TRY(expr, what) PW_BENCH_TRY("host-overlap", (expr), (what))

enum { PW_HO_COMPUTE, PW_HO_BLOCKING, PW_HO_OVERLAP, PW_HO_ZERO_COPY, PW_HO_MODES };
enum { PW_HO_MAX_ROUNDS = 101 };
#define PW_HO_DEADLINE_NS 120000000000LL

static const char* const pw_ho_mode_names[PW_HO_MODES] = {"compute", "blocking", "overlap",
                                                          "zero_copy"};

/* A caching allocator for the backend's device memory, as accelerator
 * runtimes keep one (--no-pool: the system allocator). Freed blocks of at
 * least PW_HO_POOL_MIN bytes are kept, up to PW_HO_POOL_SLOTS of them, and
 * handed out again for the same size: without it every 32 MiB batch is
 * fresh mmap'ed memory whose page faults the copy pays for (and the
 * munmap after each step interrupts the compute core). */
enum { PW_HO_POOL_SLOTS = 32 };
#define PW_HO_POOL_MIN ((size_t)1 << 18)

typedef struct pw_ho_pool_s {
  pthread_mutex_t lock;
  void* ptr[PW_HO_POOL_SLOTS];
  size_t size[PW_HO_POOL_SLOTS];
  int count;
} pw_ho_pool_t;

static void* pw_ho_pool_alloc(void* self, size_t size, size_t alignment) {
  pw_ho_pool_t* pool = self;
  if (size >= PW_HO_POOL_MIN) {
    void* hit = NULL;
    pthread_mutex_lock(&pool->lock);
    for (int i = 0; i < pool->count; ++i) {
      if (pool->size[i] == size && (uintptr_t)pool->ptr[i] % alignment == 0) {
        hit = pool->ptr[i];
        pool->ptr[i] = pool->ptr[pool->count - 1];
        pool->size[i] = pool->size[pool->count - 1];
        pool->count--;
        break;
      }
    }
    pthread_mutex_unlock(&pool->lock);
    if (hit != NULL) return hit;
  }
  void* p = NULL;
  size_t align = alignment < sizeof(void*) ? sizeof(void*) : alignment;
  return posix_memalign(&p, align, size) == 0 ? p : NULL;
}

static void pw_ho_pool_free(void* self, void* ptr, size_t size) {
  pw_ho_pool_t* pool = self;
  if (size >= PW_HO_POOL_MIN) {
    pthread_mutex_lock(&pool->lock);
    bool kept = pool->count < PW_HO_POOL_SLOTS;
    if (kept) {
      pool->ptr[pool->count] = ptr;
      pool->size[pool->count] = size;
      pool->count++;
    }
    pthread_mutex_unlock(&pool->lock);
    if (kept) return;
  }
  free(ptr);
}

static void pw_ho_pool_drain(pw_ho_pool_t* pool) {
  for (int i = 0; i < pool->count; ++i) free(pool->ptr[i]);
  pool->count = 0;
}

typedef struct pw_ho_s {
  int64_t rows, k, n;
  bool light;               /* --graph add: the light step */
  uint32_t nargs;           /* 3 (x, w1, w2), or 1 (x) for the light step */
  size_t out_len;           /* floats of the step's output */
  size_t batch_bytes;
  long long steps;
  bool fill;
  bool use_pool;
  pw_ho_pool_t pool;        /* the backend's allocator when |use_pool| */
  pw_runtime_t* rt;
  pw_client_t* c;
  pw_vslice_t vs;
  pw_array_spec_t batch_spec;
  pw_graph_t g;             /* (x, w1, w2) -> s */
  pw_buffer_t w1, w2;
  pw_buffer_t resident;     /* the batch, for the compute mode */
  float* host[2];           /* the double-buffered host batches (64-byte aligned) */
  float* ref;               /* the compute mode's output, n floats */
  float* out;               /* scratch, n floats */
  bool have_ref;
} pw_ho_t;

static pw_array_spec_t pw_ho_spec(int64_t d0, int64_t d1, uint32_t rank) {
  int64_t dims[2] = {d0, d1};
  return (pw_array_spec_t){PW_DTYPE_F32, pw_shape_make(rank, dims), pw_sharding_replicated()};
}

static int pw_ho_compile(pw_ho_t* h, const char* text, pw_executable_t* out) {
  PW_HO_TRY(pw_executable_compile(h->c, h->vs, text, strlen(text), NULL, out), text);
  return 0;
}

/* The light step (--graph add): s = reduce_sum(x + x, axis 0), f32[k];
 * memory-bound, about a quarter of the default step's time per batch
 * element, so the transfer weighs more next to it. */
static int pw_ho_build_light_graph(pw_ho_t* h) {
  long long r = (long long)h->rows, k = (long long)h->k;
  char t[512];
  pw_executable_t add, sum;
  snprintf(t, sizeof(t),
           "kernel add\ninput f32[%lld,%lld] replicated\ninput f32[%lld,%lld] replicated\n"
           "output f32[%lld,%lld] replicated\n", r, k, r, k, r, k);
  if (pw_ho_compile(h, t, &add) != 0) return -1;
  snprintf(t, sizeof(t),
           "kernel reduce_sum\ninput f32[%lld,%lld] replicated\noutput f32[%lld] replicated\n"
           "attr axis 0\n", r, k, k);
  if (pw_ho_compile(h, t, &sum) != 0) return -1;
  uint32_t px, a, b;
  PW_HO_TRY(pw_graph_create(h->c, &h->g), "graph");
  PW_HO_TRY(pw_graph_add_parameter(h->c, h->g, h->vs, &h->batch_spec, &px), "param x");
  pw_value_t in1[2] = {pw_value(px, 0), pw_value(px, 0)};
  PW_HO_TRY(pw_graph_add_compute(h->c, h->g, "y", add, h->vs, in1, 2, &a), "y");
  pw_value_t in2 = pw_value(a, 0);
  PW_HO_TRY(pw_graph_add_compute(h->c, h->g, "s", sum, h->vs, &in2, 1, &b), "s");
  PW_HO_TRY(pw_graph_add_output(h->c, h->g, pw_value(b, 0)), "output");
  PW_HO_TRY(pw_graph_finalize(h->c, h->g), "finalize");
  PW_HO_TRY(pw_executable_release(h->c, add), "exe release");
  PW_HO_TRY(pw_executable_release(h->c, sum), "exe release");
  return 0;
}

/* The step's graph (executables released once it holds them). */
static int pw_ho_build_graph(pw_ho_t* h) {
  if (h->light) return pw_ho_build_light_graph(h);
  long long r = (long long)h->rows, k = (long long)h->k, n = (long long)h->n;
  char t[512];
  pw_executable_t mm1, mm2, add, sum;
  snprintf(t, sizeof(t),
           "kernel matmul\ninput f32[%lld,%lld] replicated\ninput f32[%lld,%lld] replicated\n"
           "output f32[%lld,%lld] replicated\n", r, k, k, n, r, n);
  if (pw_ho_compile(h, t, &mm1) != 0) return -1;
  snprintf(t, sizeof(t),
           "kernel matmul\ninput f32[%lld,%lld] replicated\ninput f32[%lld,%lld] replicated\n"
           "output f32[%lld,%lld] replicated\n", r, n, n, n, r, n);
  if (pw_ho_compile(h, t, &mm2) != 0) return -1;
  snprintf(t, sizeof(t),
           "kernel add\ninput f32[%lld,%lld] replicated\ninput f32[%lld,%lld] replicated\n"
           "output f32[%lld,%lld] replicated\n", r, n, r, n, r, n);
  if (pw_ho_compile(h, t, &add) != 0) return -1;
  snprintf(t, sizeof(t),
           "kernel reduce_sum\ninput f32[%lld,%lld] replicated\noutput f32[%lld] replicated\n"
           "attr axis 0\n", r, n, n);
  if (pw_ho_compile(h, t, &sum) != 0) return -1;
  pw_array_spec_t w1 = pw_ho_spec(h->k, h->n, 2), w2 = pw_ho_spec(h->n, h->n, 2);
  uint32_t px, pw1, pw2, a, b, c, d;
  PW_HO_TRY(pw_graph_create(h->c, &h->g), "graph");
  PW_HO_TRY(pw_graph_add_parameter(h->c, h->g, h->vs, &h->batch_spec, &px), "param x");
  PW_HO_TRY(pw_graph_add_parameter(h->c, h->g, h->vs, &w1, &pw1), "param w1");
  PW_HO_TRY(pw_graph_add_parameter(h->c, h->g, h->vs, &w2, &pw2), "param w2");
  pw_value_t in1[2] = {pw_value(px, 0), pw_value(pw1, 0)};
  PW_HO_TRY(pw_graph_add_compute(h->c, h->g, "h", mm1, h->vs, in1, 2, &a), "h");
  pw_value_t in2[2] = {pw_value(a, 0), pw_value(pw2, 0)};
  PW_HO_TRY(pw_graph_add_compute(h->c, h->g, "g", mm2, h->vs, in2, 2, &b), "g");
  pw_value_t in3[2] = {pw_value(a, 0), pw_value(b, 0)};
  PW_HO_TRY(pw_graph_add_compute(h->c, h->g, "y", add, h->vs, in3, 2, &c), "y");
  pw_value_t in4 = pw_value(c, 0);
  PW_HO_TRY(pw_graph_add_compute(h->c, h->g, "s", sum, h->vs, &in4, 1, &d), "s");
  PW_HO_TRY(pw_graph_add_output(h->c, h->g, pw_value(d, 0)), "output");
  PW_HO_TRY(pw_graph_finalize(h->c, h->g), "finalize");
  pw_executable_t all[4] = {mm1, mm2, add, sum};
  for (int i = 0; i < 4; ++i) PW_HO_TRY(pw_executable_release(h->c, all[i]), "exe release");
  return 0;
}

/* Small values so that sums stay exact-ish and finite; any fixed data does. */
static void pw_ho_fill_floats(float* p, size_t count, uint32_t seed) {
  for (size_t i = 0; i < count; ++i) {
    p[i] = (float)((i * 2654435761u + seed) % 17u) * 0.125f - 1.0f;
  }
}

static int pw_ho_open(pw_ho_t* h, bool pin) {
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = 1;
  o.worker_count = 1;
  o.device_memory_bytes = 8 * (uint64_t)h->batch_bytes + (UINT64_C(256) << 20);
  if (h->use_pool) o.allocator = (pw_allocator_t){&h->pool, pw_ho_pool_alloc, pw_ho_pool_free};
  uint32_t cpu0 = 0;
  if (pin) {
    o.affinity = PW_CPU_AFFINITY_LIST;
    o.affinity_cpu_count = 1;
    o.affinity_cpus = &cpu0;
  }
  pw_backend_t backend;
  PW_HO_TRY(pw_cpu_backend_create(&o, &backend), "cpu backend");
  /* After the backend checked CPU 0 is ours; before the transfer thread
   * starts (it inherits the mask). */
  if (pin) pw_bench_pin(1);
  const uint32_t one[1] = {1};
  pw_slice_desc_t slice = {.name = NULL, .mesh = pw_mesh_shape_make(1, one)};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = &slice;
  ro.slice_count = 1;
  PW_HO_TRY(pw_runtime_create(&ro, &h->rt), "runtime");
  PW_HO_TRY(pw_client_create(h->rt, NULL, &h->c), "client");
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, one);
  PW_HO_TRY(pw_vslice_create(h->c, &mesh, 0, &h->vs), "vslice");
  h->batch_spec = pw_ho_spec(h->rows, h->k, 2);
  if (pw_ho_build_graph(h) != 0) return -1;
  size_t n1 = (size_t)(h->k * h->n), n2 = (size_t)(h->n * h->n);
  float* w = malloc((n1 + n2) * sizeof(float));
  if (w == NULL) return -1;
  pw_ho_fill_floats(w, n1 + n2, 7);
  pw_array_spec_t s1 = pw_ho_spec(h->k, h->n, 2), s2 = pw_ho_spec(h->n, h->n, 2);
  pw_status_t st = pw_buffer_from_host(h->c, h->vs, &s1, w, n1 * sizeof(float), &h->w1);
  if (st == NULL) st = pw_buffer_from_host(h->c, h->vs, &s2, w + n1, n2 * sizeof(float), &h->w2);
  free(w);
  PW_HO_TRY(st, "weights");
  for (int i = 0; i < 2; ++i) {
    h->host[i] = aligned_alloc(64, h->batch_bytes); /* a multiple of 64 (checked) */
    if (h->host[i] == NULL) return -1;
    pw_ho_fill_floats(h->host[i], h->batch_bytes / sizeof(float), 3);
  }
  h->ref = calloc(h->out_len, sizeof(float));
  h->out = calloc(h->out_len, sizeof(float));
  if (h->ref == NULL || h->out == NULL) return -1;
  PW_HO_TRY(pw_buffer_from_host(h->c, h->vs, &h->batch_spec, h->host[0], h->batch_bytes,
                                &h->resident),
            "resident batch");
  return 0;
}

static void pw_ho_close(pw_ho_t* h) {
  if (h->c != NULL) {
    if (h->g.id != 0) pw_status_free(pw_graph_release(h->c, h->g));
    pw_status_free(pw_client_destroy(h->c));
  }
  if (h->rt != NULL) pw_status_free(pw_runtime_destroy(h->rt));
  pw_ho_pool_drain(&h->pool);
  pthread_mutex_destroy(&h->pool.lock);
  free(h->host[0]);
  free(h->host[1]);
  free(h->ref);
  free(h->out);
}

static int pw_ho_wait(pw_event_t* ev, const char* what) {
  pw_status_t s = pw_event_wait(ev, pw_deadline_from_timeout(PW_HO_DEADLINE_NS));
  pw_event_release(ev);
  PW_HO_TRY(s, what);
  return 0;
}

/* Submits the step over |x| (the handle is released: the submission
 * keeps what it needs) and returns its output and done event. */
static int pw_ho_submit(pw_ho_t* h, pw_buffer_t x, bool release_x, pw_buffer_t* out_s,
                        pw_event_t** out_done) {
  pw_buffer_t args[3] = {x, h->w1, h->w2};
  PW_HO_TRY(pw_graph_submit(h->c, h->g, args, h->nargs, NULL, out_s, 1, out_done), "submit");
  if (release_x) PW_HO_TRY(pw_buffer_release(h->c, x), "release batch");
  return 0;
}

/* Ends a step: waits for it; keeps the last step's output to check it. */
static int pw_ho_finish(pw_ho_t* h, pw_buffer_t s, pw_event_t* done, bool last) {
  if (pw_ho_wait(done, "step") != 0) return -1;
  if (last) {
    PW_HO_TRY(pw_buffer_to_host(h->c, s, h->out, h->out_len * sizeof(float),
                                pw_deadline_from_timeout(PW_HO_DEADLINE_NS)),
              "output to host");
  }
  PW_HO_TRY(pw_buffer_release(h->c, s), "release output");
  return 0;
}

/* Starts the transfer of host batch |slot| for the overlapped modes. */
static int pw_ho_issue(pw_ho_t* h, int mode, int slot, pw_buffer_t* out_x, pw_event_t** out_hd) {
  pw_host_transfer_options_t o;
  pw_host_transfer_options_init(&o);
  o.semantics = mode == PW_HO_ZERO_COPY ? PW_HOST_ZERO_COPY
                                        : PW_HOST_IMMUTABLE_UNTIL_TRANSFER_COMPLETES;
  if (h->fill && mode == PW_HO_OVERLAP) {
    PW_HO_TRY(pw_buffer_create_empty(h->c, h->vs, &h->batch_spec, out_x), "create_empty");
    PW_HO_TRY(pw_buffer_fill_from_host(h->c, *out_x, h->host[slot], h->batch_bytes, &o, out_hd),
              "fill_from_host");
    return 0;
  }
  PW_HO_TRY(pw_buffer_from_host_async(h->c, h->vs, &h->batch_spec, h->host[slot], h->batch_bytes,
                                      &o, out_x, out_hd),
            "from_host_async");
  return 0;
}

/* The overlapped loop: batch i+1 goes out while step i runs. Host batch
 * i % 2 is handed out again only after host_done[i % 2] (its previous
 * transfer's) completed. */
static int pw_ho_run_overlap(pw_ho_t* h, int mode) {
  pw_event_t* hd[2] = {NULL, NULL};
  pw_buffer_t x;
  if (pw_ho_issue(h, mode, 0, &x, &hd[0]) != 0) return -1;
  for (long long i = 0; i < h->steps; ++i) {
    pw_buffer_t s, next = {0};
    pw_event_t* done;
    if (pw_ho_submit(h, x, true, &s, &done) != 0) return -1;
    if (i + 1 < h->steps) {
      int slot = (int)((i + 1) % 2);
      if (hd[slot] != NULL && pw_ho_wait(hd[slot], "host done (reuse)") != 0) return -1;
      hd[slot] = NULL;
      /* Here a data loader would write the next batch into host[slot]. */
      if (pw_ho_issue(h, mode, slot, &next, &hd[slot]) != 0) return -1;
    }
    if (pw_ho_finish(h, s, done, i + 1 == h->steps) != 0) return -1;
    x = next;
  }
  for (int k = 0; k < 2; ++k) {
    if (hd[k] != NULL && pw_ho_wait(hd[k], "host done (end)") != 0) return -1;
  }
  return 0;
}

/* One mode's --steps steps; |*out_ns|: wall time per step. */
static int pw_ho_run_mode(pw_ho_t* h, int mode, double* out_ns) {
  int64_t t0 = pw_bench_now_ns();
  if (mode == PW_HO_OVERLAP || mode == PW_HO_ZERO_COPY) {
    if (pw_ho_run_overlap(h, mode) != 0) return -1;
  } else {
    for (long long i = 0; i < h->steps; ++i) {
      pw_buffer_t x = h->resident, s;
      pw_event_t* done;
      if (mode == PW_HO_BLOCKING) {
        PW_HO_TRY(pw_buffer_from_host(h->c, h->vs, &h->batch_spec, h->host[i % 2],
                                      h->batch_bytes, &x),
                  "from_host");
      }
      if (pw_ho_submit(h, x, mode == PW_HO_BLOCKING, &s, &done) != 0) return -1;
      if (pw_ho_finish(h, s, done, i + 1 == h->steps) != 0) return -1;
    }
  }
  *out_ns = (double)(pw_bench_now_ns() - t0) / (double)h->steps;
  if (!h->have_ref) {
    memcpy(h->ref, h->out, h->out_len * sizeof(float));
    h->have_ref = true;
  } else if (memcmp(h->ref, h->out, h->out_len * sizeof(float)) != 0) {
    fprintf(stderr, "pw-bench host-overlap: mode %s computed a different output\n",
            pw_ho_mode_names[mode]);
    return -1;
  }
  return 0;
}

/* One blocking upload alone, released after: ns. */
static int pw_ho_upload(pw_ho_t* h, double* out_ns) {
  pw_buffer_t x;
  int64_t t0 = pw_bench_now_ns();
  PW_HO_TRY(pw_buffer_from_host(h->c, h->vs, &h->batch_spec, h->host[1], h->batch_bytes, &x),
            "upload");
  *out_ns = (double)(pw_bench_now_ns() - t0);
  PW_HO_TRY(pw_buffer_release(h->c, x), "release upload");
  return 0;
}

static double pw_ho_load(void) {
  double load = -1;
  FILE* f = fopen("/proc/loadavg", "r");
  if (f == NULL) return load;
  if (fscanf(f, "%lf", &load) != 1) load = -1;
  fclose(f);
  return load;
}

static double pw_ho_min(const double* v, long long n) {
  double m = v[0];
  for (long long i = 1; i < n; ++i) m = v[i] < m ? v[i] : m;
  return m;
}

static double pw_ho_max(const double* v, long long n) {
  double m = v[0];
  for (long long i = 1; i < n; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

static void pw_ho_report(const pw_ho_t* h, double t[PW_HO_MODES][PW_HO_MAX_ROUNDS],
                         double* upload, long long rounds, double load0) {
  /* med: each mode's median; paired: the median over rounds of the mode's
   * time over the compute mode's in the same round (adjacent in time, so a
   * slow period of the machine moves both). */
  double med[PW_HO_MODES], paired[PW_HO_MODES], tmp[PW_HO_MAX_ROUNDS];
  for (int m = 0; m < PW_HO_MODES; ++m) {
    memcpy(tmp, t[m], (size_t)rounds * sizeof(double));
    med[m] = pw_bench_median(tmp, (size_t)rounds);
    for (long long r = 0; r < rounds; ++r) tmp[r] = t[m][r] / t[0][r];
    paired[m] = pw_bench_median(tmp, (size_t)rounds);
  }
  memcpy(tmp, upload, (size_t)rounds * sizeof(double));
  double up = pw_bench_median(tmp, (size_t)rounds);
  double mib = (double)h->batch_bytes / (1024.0 * 1024.0);
  fprintf(stderr, "host-overlap: cpu backend, 1 device, 1 worker, graph %s; batch f32[%lld,%lld] "
          "(%.0f MiB), n %lld, %lld steps x %lld rounds%s, device memory %s\n",
          h->light ? "add" : "matmul", (long long)h->rows, (long long)h->k, mib,
          (long long)h->n, h->steps, rounds, h->fill ? ", fill" : "",
          h->use_pool ? "pooled" : "system allocator");
  fprintf(stderr, "%-10s %10s %10s %10s %8s %8s\n", "mode", "step_ms", "min_ms", "max_ms", "ratio",
          "paired");
  for (int m = 0; m < PW_HO_MODES; ++m) {
    fprintf(stderr, "%-10s %10.3f %10.3f %10.3f %8.3f %8.3f\n", pw_ho_mode_names[m],
            med[m] / 1e6, pw_ho_min(t[m], rounds) / 1e6, pw_ho_max(t[m], rounds) / 1e6,
            med[m] / med[0], paired[m]);
    pw_bench_json_t j;
    pw_bench_json_begin(&j, "host-overlap");
    pw_bench_json_str(&j, "backend", "cpu");
    pw_bench_json_str(&j, "mode", pw_ho_mode_names[m]);
    pw_bench_json_str(&j, "graph", h->light ? "add" : "matmul");
    pw_bench_json_str(&j, "transfer", h->fill && m == PW_HO_OVERLAP ? "fill" : "from_host");
    pw_bench_json_num(&j, "batch_mib", mib);
    pw_bench_json_str(&j, "device_memory", h->use_pool ? "pool" : "system");
    pw_bench_json_int(&j, "steps", h->steps);
    pw_bench_json_int(&j, "rounds", rounds);
    pw_bench_json_num(&j, "step_ns", med[m]);
    pw_bench_json_num(&j, "min_ns", pw_ho_min(t[m], rounds));
    pw_bench_json_num(&j, "max_ns", pw_ho_max(t[m], rounds));
    pw_bench_json_num(&j, "baseline_ns", med[0]);
    pw_bench_json_num(&j, "ratio", med[m] / med[0]);
    pw_bench_json_num(&j, "paired_ratio", paired[m]);
    pw_bench_json_end(&j);
  }
  fprintf(stderr, "upload alone %.3f ms; blocking/compute %.3f (paired %.3f), overlap/compute "
          "%.3f (paired %.3f; target <= 1.05); load %.2f -> %.2f\n", up / 1e6, med[1] / med[0],
          paired[1], med[2] / med[0], paired[2], load0, pw_ho_load());
  pw_bench_json_t j;
  pw_bench_json_begin(&j, "host-overlap-summary");
  pw_bench_json_str(&j, "backend", "cpu");
  pw_bench_json_str(&j, "graph", h->light ? "add" : "matmul");
  pw_bench_json_num(&j, "batch_mib", mib);
  pw_bench_json_str(&j, "device_memory", h->use_pool ? "pool" : "system");
  pw_bench_json_num(&j, "upload_ns", up);
  pw_bench_json_num(&j, "baseline_ns", med[0]);
  pw_bench_json_num(&j, "blocking_ratio", med[1] / med[0]);
  pw_bench_json_num(&j, "overlap_ratio", med[2] / med[0]);
  pw_bench_json_num(&j, "zero_copy_ratio", med[3] / med[0]);
  pw_bench_json_num(&j, "blocking_paired", paired[1]);
  pw_bench_json_num(&j, "overlap_paired", paired[2]);
  pw_bench_json_num(&j, "zero_copy_paired", paired[3]);
  pw_bench_json_num(&j, "load_start", load0);
  pw_bench_json_num(&j, "load_end", pw_ho_load());
  pw_bench_json_end(&j);
}

static int pw_ho_rounds(pw_ho_t* h, long long rounds, bool json) {
  static double t[PW_HO_MODES][PW_HO_MAX_ROUNDS];
  double upload[PW_HO_MAX_ROUNDS];
  double load0 = pw_ho_load();
  double warm;
  /* A warm-up round (not counted): pages, caches, the transfer thread. */
  for (int m = 0; m < PW_HO_MODES; ++m) {
    if (pw_ho_run_mode(h, m, &warm) != 0) return -1;
  }
  for (long long r = 0; r < rounds; ++r) {
    for (int k = 0; k < PW_HO_MODES; ++k) {
      /* Rotate the order: no mode always follows the same one. */
      int m = (int)((k + r) % PW_HO_MODES);
      if (pw_ho_run_mode(h, m, &t[m][r]) != 0) return -1;
      if (json) {
        pw_bench_json_t j;
        pw_bench_json_begin(&j, "host-overlap-round");
        pw_bench_json_str(&j, "mode", pw_ho_mode_names[m]);
        pw_bench_json_int(&j, "round", r);
        pw_bench_json_num(&j, "step_ns", t[m][r]);
        pw_bench_json_end(&j);
      }
    }
    if (pw_ho_upload(h, &upload[r]) != 0) return -1;
  }
  pw_ho_report(h, t, upload, rounds, load0);
  return 0;
}

static int pw_bench_suite_host_overlap(int argc, char** argv) {
  long long mib = pw_bench_opt_int(argc, argv, "batch-mib", 32);
  long long k = pw_bench_opt_int(argc, argv, "k", 256);
  long long n = pw_bench_opt_int(argc, argv, "n", 2);
  long long steps = pw_bench_opt_int(argc, argv, "steps", 24);
  long long rounds = pw_bench_opt_int(argc, argv, "rounds", 7);
  bool fill = pw_bench_opt_flag(argc, argv, "fill");
  bool pin = !pw_bench_opt_flag(argc, argv, "no-pin");
  bool pool = !pw_bench_opt_flag(argc, argv, "no-pool");
  bool json = pw_bench_opt_flag(argc, argv, "json");
  const char* graph = pw_bench_opt_value(argc, argv, "graph");
  if (graph != NULL && strcmp(graph, "matmul") != 0 && strcmp(graph, "add") != 0) {
    fprintf(stderr, "pw-bench host-overlap: --graph matmul|add, not '%s'\n", graph);
    return 2;
  }
  if (mib < 1 || mib > 1024 || k < 1 || k > 65536 || n < 1 || n > 4096 || steps < 2 ||
      steps > 100000 || rounds < 1 || rounds > PW_HO_MAX_ROUNDS) {
    fprintf(stderr, "pw-bench host-overlap: --batch-mib 1..1024, --k 1..65536, --n 1..4096, "
            "--steps 2..100000, --rounds 1..%d\n", PW_HO_MAX_ROUNDS);
    return 2;
  }
  pw_ho_t h;
  memset(&h, 0, sizeof(h));
  h.k = k;
  h.n = n;
  h.rows = (int64_t)((mib << 20) / (k * (long long)sizeof(float)));
  h.steps = steps;
  h.fill = fill;
  h.use_pool = pool;
  h.light = graph != NULL && strcmp(graph, "add") == 0;
  h.nargs = h.light ? 1 : 3;
  h.out_len = (size_t)(h.light ? k : n);
  pthread_mutex_init(&h.pool.lock, NULL);
  h.batch_bytes = (size_t)h.rows * (size_t)k * sizeof(float);
  if (h.rows < 1 || h.batch_bytes % 64 != 0) {
    fprintf(stderr, "pw-bench host-overlap: --k %lld leaves no whole 64-byte batch of rows in "
            "%lld MiB\n", k, mib);
    return 2;
  }
  int rc = pw_ho_open(&h, pin);
  if (rc == 0) rc = pw_ho_rounds(&h, rounds, json);
  pw_ho_close(&h);
  return rc == 0 ? 0 : 1;
}

PW_BENCH_SUITE(host_overlap, "host-overlap",
               "asynchronous host transfers hidden behind compute (issue 21): compute alone, "
               "blocking upload, from_host_async overlapped, zero-copy",
               pw_bench_suite_host_overlap)
