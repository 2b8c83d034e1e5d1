/* pw-bench shapes: libpathways on the task shapes of bench/shapes.h, through
 * the public API, on the test double's no-op device backend (every launch
 * completes OK inline), measured by the harness every peer driver shares
 * (bench/peers/), so the figures compare like with like.
 *
 * MAPPING. A compute node is a gang op on every device of its virtual
 * slice, and a compute node's inputs must live on its own slice (values
 * reach another slice only through transfer nodes), so:
 *   chain, fan, layered, one: every task is a compute node (one input per
 *     edge) on one slice of mesh "1"; the whole DAG lives on that slice and
 *     runs in its one gang order (values cross slices only through
 *     transfer nodes, which would add tasks).
 *   pipeline: 16 slices of mesh "1", one per stage; compute tasks are
 *     compute nodes on their stage's slice, transfer tasks are transfer
 *     nodes (pw_graph_add_transfer, replicated u8[1]) onto the next stage's
 *     slice, moved by the runtime's default (inproc) transport.
 *   spmd: 4 slices of mesh "8"; a step is one gang op per slice (8 device
 *     launches), each taking the previous step's op on its slice as input:
 *     the barrier is per slice (the gang op's completion); there is no
 *     cross-slice barrier, for want of cross-slice values.
 *   step: one gang op on each of 4 slices of mesh "8", no edges; the done
 *     event is the barrier the host waits for.
 *   spawn: a one-node graph built once and submitted once per task.
 * Graphs are built once and resubmitted; build_ns covers pw_graph_create,
 * the pw_graph_add_compute/add_transfer calls, pw_graph_finalize and
 * pw_graph_exec_create (not the runtime, slices or executables, made
 * beforehand as a peer's pool is). Runs go through the armed graph
 * (pw_graph_exec_submit); --submit graph submits by handle instead
 * (pw_graph_submit: a handle look-up and a graph reference per run, blocks
 * from the client's shared cache), rows then named "libpathways/handle".
 *
 * --alloc-cache (a diagnostic, not a peer comparison) gives the runtime an
 * allocator that keeps freed blocks of 64 KiB or more for reuse; rows are
 * named "libpathways+cache". It shows what the per-submission execution
 * block costs when it comes from fresh pages.
 *
 * --trace records a trace all along (include/pathways/trace.h; the rings
 * wrap, so it is the cost of recording, not of writing): rows named
 * "libpathways+trace". Against a run without it, in the same script, it
 * gives what recording adds per task.
 *
 * THREADS. With completions inline, dispatch runs wholly on the thread that
 * submits, so "threads" is the number of application threads submitting
 * concurrently into one runtime and one client. The work is split into one
 * part per thread, each on its own slice(s):
 *   spawn: the threads take the submissions from one counter, in chunks
 *     of PW_LP_SPAWN_CHUNK, each on its own slice (the same total work,
 *     balanced as the peers' pools balance theirs: a thread on a slower
 *     CPU takes fewer);
 *   spmd: thread k drives slices k, k + T, ... (the same ops and edges);
 *   chain, fan, layered, pipeline, one, step: one graph cannot use two
 *     threads (its slice runs it in one order on the submitting thread), so
 *     each thread runs its own instance at 1/T of the size (one, step: its
 *     own full instance); tasks/edges report what ran, "note" says so.
 * The peers at T threads run the single graph on a pool of T workers.
 * A timed rep of one or step is n back-to-back runs (bench/shapes.h,
 * "harness"). pw_lp_run_n hands the job to the helpers once per rep, and
 * each thread then runs its own instance n times back to back; one
 * handoff per run (1-2 us) would otherwise dwarf a 0.15-1.5 us run. The
 * latency samples stay one handoff for all of a thread's samples, each
 * sample timing one run. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "cts/double_backend.h"
#include "pathways/pathways.h"
#include "shapes.h"
#include "suites.h"

#define PW_LP_MAX_PARTS 8
#define PW_LP_MAX_SLICES 64
#define PW_LP_MAX_INPUTS PW_BACKEND_MAX_PARAMS
#define PW_LP_SPMD_SLICES 4
#define PW_LP_SPMD_MESH 8
#define PW_LP_DEADLINE_NS 120000000000LL
/* spawn at T > 1: submissions a thread takes from the counter at a time
 * (about 15 us of work: one atomic add per chunk, balanced to within a
 * chunk). */
#define PW_LP_SPAWN_CHUNK 256

/* ---- a spinning wrapper around the no-op double (METG only) ------------- */

/* Forwards every method to the double; launch first spins |spin_iters| (the
 * task body), on the launching thread, as the other drivers' tasks do. */
typedef struct pw_lp_spin_backend_t {
  pw_backend_t inner;
  uint64_t spin_iters;
  pw_backend_vtable_t vtable;
} pw_lp_spin_backend_t;

static void pw_lp_spin_destroy(void* self) {
  pw_lp_spin_backend_t* s = self;
  s->inner.vtable->destroy(s->inner.self);
  free(s);
}
static uint32_t pw_lp_spin_device_count(void* self) {
  pw_lp_spin_backend_t* s = self;
  return s->inner.vtable->device_count(s->inner.self);
}
static pw_status_t pw_lp_spin_device_info(void* self, uint32_t device,
                                          pw_backend_device_info_t* out_info) {
  pw_lp_spin_backend_t* s = self;
  return s->inner.vtable->device_info(s->inner.self, device, out_info);
}
static pw_device_health_t pw_lp_spin_health(void* self, uint32_t device) {
  pw_lp_spin_backend_t* s = self;
  return s->inner.vtable->health(s->inner.self, device);
}
static pw_status_t pw_lp_spin_compile(void* self, const void* program, size_t program_size,
                                      const pw_mesh_shape_t* mesh, const char* options,
                                      pw_allocator_t allocator, void** out_bytes,
                                      size_t* out_size) {
  pw_lp_spin_backend_t* s = self;
  return s->inner.vtable->compile(s->inner.self, program, program_size, mesh, options,
                                  allocator, out_bytes, out_size);
}
static pw_status_t pw_lp_spin_load(void* self, const void* bytes, size_t size,
                                   pw_backend_executable_t* out_executable,
                                   pw_executable_signature_t* out_signature) {
  pw_lp_spin_backend_t* s = self;
  return s->inner.vtable->load(s->inner.self, bytes, size, out_executable, out_signature);
}
static void pw_lp_spin_unload(void* self, pw_backend_executable_t executable) {
  pw_lp_spin_backend_t* s = self;
  s->inner.vtable->unload(s->inner.self, executable);
}
static pw_status_t pw_lp_spin_allocate(void* self, uint32_t device, size_t size,
                                       pw_backend_memory_t* out_memory) {
  pw_lp_spin_backend_t* s = self;
  return s->inner.vtable->allocate(s->inner.self, device, size, out_memory);
}
static void pw_lp_spin_deallocate(void* self, uint32_t device, pw_backend_memory_t memory) {
  pw_lp_spin_backend_t* s = self;
  s->inner.vtable->deallocate(s->inner.self, device, memory);
}
static pw_status_t pw_lp_spin_launch(void* self, const pw_backend_launch_t* launch) {
  pw_lp_spin_backend_t* s = self;
  (void)pw_bench_spin(s->spin_iters);
  return s->inner.vtable->launch(s->inner.self, launch);
}
static pw_status_t pw_lp_spin_copy_to_device(void* self, uint32_t device,
                                             pw_backend_memory_t dst, size_t offset,
                                             const void* src, size_t size) {
  pw_lp_spin_backend_t* s = self;
  return s->inner.vtable->copy_to_device(s->inner.self, device, dst, offset, src, size);
}
static pw_status_t pw_lp_spin_copy_to_host(void* self, uint32_t device,
                                           pw_backend_memory_t src, size_t offset, void* dst,
                                           size_t size) {
  pw_lp_spin_backend_t* s = self;
  return s->inner.vtable->copy_to_host(s->inner.self, device, src, offset, dst, size);
}
static void* pw_lp_spin_host_pointer(void* self, uint32_t device, pw_backend_memory_t memory) {
  pw_lp_spin_backend_t* s = self;
  return s->inner.vtable->host_pointer(s->inner.self, device, memory);
}

/* Wraps |inner| (owned from now on, also on failure). */
static pw_status_t pw_lp_spin_wrap(pw_backend_t inner, uint64_t spin_iters,
                                   pw_backend_t* out_backend) {
  pw_lp_spin_backend_t* s = calloc(1, sizeof(*s));
  if (s == NULL) {
    inner.vtable->destroy(inner.self);
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "spin backend: out of memory");
  }
  s->inner = inner;
  s->spin_iters = spin_iters;
  s->vtable = *inner.vtable;
  s->vtable.struct_size = sizeof(s->vtable);
  s->vtable.name = "double-spin";
  s->vtable.destroy = pw_lp_spin_destroy;
  s->vtable.device_count = pw_lp_spin_device_count;
  s->vtable.device_info = pw_lp_spin_device_info;
  s->vtable.health = pw_lp_spin_health;
  s->vtable.compile = pw_lp_spin_compile;
  s->vtable.load = pw_lp_spin_load;
  s->vtable.unload = pw_lp_spin_unload;
  s->vtable.allocate = pw_lp_spin_allocate;
  s->vtable.deallocate = pw_lp_spin_deallocate;
  s->vtable.launch = pw_lp_spin_launch;
  s->vtable.copy_to_device = pw_lp_spin_copy_to_device;
  s->vtable.copy_to_host = pw_lp_spin_copy_to_host;
  s->vtable.host_pointer = pw_lp_spin_host_pointer;
  s->vtable.record_copy = NULL; /* the inner one would get this self */
  out_backend->vtable = &s->vtable;
  out_backend->self = s;
  return NULL;
}

/* ---- a what-if allocator (--alloc-cache) --------------------------------- */

/* Keeps up to 8 freed blocks of 64 KiB or more and hands them out again for
 * the same size: what a per-runtime pool would save on the per-submission
 * execution block (hot spot: fresh pages from mmap on every rerun). Only
 * with --alloc-cache; rows are then named "libpathways+cache". */
#define PW_LP_CACHE_SLOTS 8
#define PW_LP_CACHE_MIN ((size_t)64 << 10)

typedef struct pw_lp_cache_t {
  pthread_mutex_t mutex;
  void* ptr[PW_LP_CACHE_SLOTS];
  size_t size[PW_LP_CACHE_SLOTS];
  uint32_t count;
} pw_lp_cache_t;

static void* pw_lp_cache_alloc(void* self, size_t size, size_t alignment) {
  pw_lp_cache_t* c = self;
  if (size >= PW_LP_CACHE_MIN) {
    pthread_mutex_lock(&c->mutex);
    for (uint32_t i = 0; i < c->count; ++i) {
      if (c->size[i] == size) {
        void* p = c->ptr[i];
        --c->count;
        memmove(c->ptr + i, c->ptr + i + 1, (c->count - i) * sizeof(c->ptr[0]));
        memmove(c->size + i, c->size + i + 1, (c->count - i) * sizeof(c->size[0]));
        pthread_mutex_unlock(&c->mutex);
        return p;
      }
    }
    pthread_mutex_unlock(&c->mutex);
    alignment = 64; /* any request up to 64 can reuse it */
  }
  if (alignment <= 16) return malloc(size);
  size_t rounded = (size + alignment - 1) & ~(alignment - 1);
  return aligned_alloc(alignment, rounded);
}

static void pw_lp_cache_free(void* self, void* ptr, size_t size) {
  pw_lp_cache_t* c = self;
  if (ptr != NULL && size >= PW_LP_CACHE_MIN) {
    pthread_mutex_lock(&c->mutex);
    void* evicted = NULL;
    if (c->count == PW_LP_CACHE_SLOTS) { /* full: drop the oldest */
      evicted = c->ptr[0];
      memmove(c->ptr, c->ptr + 1, (PW_LP_CACHE_SLOTS - 1) * sizeof(c->ptr[0]));
      memmove(c->size, c->size + 1, (PW_LP_CACHE_SLOTS - 1) * sizeof(c->size[0]));
      c->count--;
    }
    c->ptr[c->count] = ptr;
    c->size[c->count++] = size;
    pthread_mutex_unlock(&c->mutex);
    free(evicted);
    return;
  }
  free(ptr);
}

static void pw_lp_cache_drain(pw_lp_cache_t* c) {
  for (uint32_t i = 0; i < c->count; ++i) free(c->ptr[i]);
  c->count = 0;
}

static bool pw_lp_use_cache;
/* --trace: a trace records all along (its rings wrap: the cost of
 * recording, not of writing; include/pathways/trace.h). */
static bool pw_lp_use_trace;
static bool pw_lp_use_armed = true; /* --submit exec (the default) */

/* ---- the runtime under test --------------------------------------------- */

/* Helper threads for T > 1, started once per thread count (as a peer's
 * pool is): part 0 runs on the calling thread, part k on helper k - 1. A
 * helper polls for work for a while, then sleeps on a condition variable. */
struct pw_lp_ctx_s;
typedef struct pw_lp_helper_arg_t {
  struct pw_lp_ctx_s* ctx;
  uint32_t part;
} pw_lp_helper_arg_t;

typedef struct pw_lp_ctx_s {
  uint32_t threads;
  pw_lp_helper_arg_t args[PW_LP_MAX_PARTS];
  pthread_t helpers[PW_LP_MAX_PARTS];
  uint32_t helper_count;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  atomic_uint_fast64_t generation; /* bumped per job */
  atomic_uint remaining;           /* helpers still working on the job */
  atomic_int stop;
  void* (*fn)(void*);
  struct pw_lp_graph_s* graph;
} pw_lp_ctx_t;

/* What one submitting thread runs. */
typedef struct pw_lp_part_t {
  pw_bench_dag_t dag;        /* generic shapes: this part's instance */
  bool owns_dag;
  uint32_t slice_first;      /* index into vslices */
  uint32_t slice_stride;
  uint32_t slice_count;
  pw_graph_t graph;
  pw_graph_exec_t* armed;    /* NULL with --submit graph */
  uint64_t submissions;      /* spawn: submissions per run; else 1 */
  uint64_t launches;         /* device launches per run */
  /* per-job thread state */
  struct pw_lp_graph_s* owner;
  uint32_t runs;             /* pw_lp_run_thread: back-to-back runs */
  int failed;
  double* samples;           /* latency: this thread's samples */
  uint32_t sample_count;
} pw_lp_part_t;

typedef struct pw_lp_graph_s {
  pw_bench_shape_kind_t kind;
  const pw_bench_dag_t* dag; /* the harness's full-size dag */
  pw_runtime_t* runtime;
  pw_client_t* client;
  pw_double_backend_t* dbl;
  pw_lp_cache_t cache;       /* --alloc-cache only */
  uint64_t launches_seen;
  uint64_t runs_unverified;  /* runs since pw_lp_verify last counted */
  pw_vslice_t vslices[PW_LP_MAX_SLICES];
  uint32_t vslice_count;
  /* exe[k]: noop with k inputs and one output, for the vslices' mesh. */
  pw_executable_t exe[PW_LP_MAX_INPUTS + 1];
  pw_executable_t exe_noout; /* spawn: noop, no input, no output */
  /* spawn at T > 1: submissions handed out so far and in all */
  _Atomic uint64_t spawn_next;
  uint64_t spawn_end;
  uint32_t part_count;
  pw_lp_part_t parts[PW_LP_MAX_PARTS];
} pw_lp_graph_t;

static void* pw_lp_helper_main(void* arg) {
  pw_lp_helper_arg_t* a = arg;
  pw_lp_ctx_t* ctx = a->ctx;
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = atomic_load_explicit(&ctx->generation, memory_order_acquire);
    for (int spin = 0; gen == seen && spin < 20000 && !atomic_load(&ctx->stop); ++spin) {
      pw_bench_pause(); /* a pause per spin, a yield every 64 */
      gen = atomic_load_explicit(&ctx->generation, memory_order_acquire);
    }
    if (gen == seen) {
      pthread_mutex_lock(&ctx->mutex);
      while ((gen = atomic_load(&ctx->generation)) == seen && !atomic_load(&ctx->stop)) {
        pthread_cond_wait(&ctx->cond, &ctx->mutex);
      }
      pthread_mutex_unlock(&ctx->mutex);
    }
    if (atomic_load(&ctx->stop)) return NULL;
    seen = gen;
    ctx->fn(&ctx->graph->parts[a->part]);
    atomic_fetch_sub_explicit(&ctx->remaining, 1, memory_order_acq_rel);
  }
}

static int pw_lp_fail(pw_status_t status, const char* what) {
  if (status == NULL) return 0;
  fprintf(stderr, "libpathways: %s: %s\n", what, pw_status_message(status));
  pw_status_free(status);
  return -1;
}

static void* pw_lp_open(uint32_t threads) {
  if (threads > PW_LP_MAX_PARTS) {
    fprintf(stderr, "libpathways: at most %d threads\n", PW_LP_MAX_PARTS);
    return NULL;
  }
  pw_lp_ctx_t* ctx = calloc(1, sizeof(*ctx));
  if (ctx == NULL) return NULL;
  ctx->threads = threads;
  pthread_mutex_init(&ctx->mutex, NULL);
  pthread_cond_init(&ctx->cond, NULL);
  for (uint32_t k = 1; k < threads; ++k) {
    ctx->args[k].ctx = ctx;
    ctx->args[k].part = k;
    if (pthread_create(&ctx->helpers[k], NULL, pw_lp_helper_main, &ctx->args[k]) != 0) {
      break;
    }
    ctx->helper_count = k;
  }
  return ctx;
}

static void pw_lp_close(void* rt) {
  pw_lp_ctx_t* ctx = rt;
  pthread_mutex_lock(&ctx->mutex);
  atomic_store(&ctx->stop, 1);
  pthread_cond_broadcast(&ctx->cond);
  pthread_mutex_unlock(&ctx->mutex);
  for (uint32_t k = 1; k <= ctx->helper_count; ++k) pthread_join(ctx->helpers[k], NULL);
  pthread_cond_destroy(&ctx->cond);
  pthread_mutex_destroy(&ctx->mutex);
  free(ctx);
}

static void pw_lp_destroy(void* rt, void* graph) {
  (void)rt;
  pw_lp_graph_t* g = graph;
  for (uint32_t p = 0; p < g->part_count; ++p) {
    if (g->parts[p].owns_dag) pw_bench_dag_free(&g->parts[p].dag);
    pw_graph_exec_destroy(g->parts[p].armed);
  }
  pw_client_destroy(g->client);
  pw_runtime_destroy(g->runtime);
  pw_lp_cache_drain(&g->cache);
  pthread_mutex_destroy(&g->cache.mutex);
  free(g);
}

/* A runtime with |slices| slices of |mesh| devices each on the no-op double
 * (wrapped to spin when |spin_iters|), a client, and a vslice per slice. */
static int pw_lp_setup(pw_lp_graph_t* g, uint32_t slices, uint32_t mesh, uint64_t spin_iters) {
  pw_double_options_t o;
  pw_double_options_init(&o);
  o.device_count = slices * mesh;
  o.no_op = true;
  pw_backend_t backend;
  if (pw_lp_fail(pw_double_backend_create(&o, &backend), "no-op backend")) return -1;
  g->dbl = pw_double_backend_from(&backend);
  if (spin_iters != 0 &&
      pw_lp_fail(pw_lp_spin_wrap(backend, spin_iters, &backend), "spin backend")) {
    return -1;
  }
  pw_slice_desc_t descs[PW_LP_MAX_SLICES];
  memset(descs, 0, sizeof(descs));
  uint32_t dims[1] = {mesh};
  for (uint32_t s = 0; s < slices; ++s) {
    descs[s].mesh = pw_mesh_shape_make(1, dims);
    descs[s].first_device = s * mesh;
    descs[s].host = 0;
  }
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  if (pw_lp_use_cache) {
    ro.allocator.self = &g->cache;
    ro.allocator.alloc = pw_lp_cache_alloc;
    ro.allocator.free = pw_lp_cache_free;
  }
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = descs;
  ro.slice_count = slices;
  if (pw_lp_fail(pw_runtime_create(&ro, &g->runtime), "runtime")) return -1;
  if (pw_lp_use_trace) {
    pw_trace_options_t to;
    memset(&to, 0, sizeof(to));
    to.struct_size = sizeof(to);
    if (pw_lp_fail(pw_runtime_trace_start(g->runtime, &to), "trace")) return -1;
  }
  if (pw_lp_fail(pw_client_create(g->runtime, NULL, &g->client), "client")) return -1;
  pw_mesh_shape_t m = pw_mesh_shape_make(1, dims);
  for (uint32_t s = 0; s < slices; ++s) {
    if (pw_lp_fail(pw_vslice_create(g->client, &m, PW_VSLICE_DEFAULT, &g->vslices[s]),
                   "vslice")) {
      return -1;
    }
  }
  g->vslice_count = slices;
  /* Executables: noop with k u8[1] inputs and one u8[1] output. */
  for (uint32_t k = 0; k <= PW_LP_MAX_INPUTS; ++k) {
    char program[512];
    size_t len = (size_t)snprintf(program, sizeof(program), "noop\n");
    for (uint32_t i = 0; i < k; ++i) {
      len += (size_t)snprintf(program + len, sizeof(program) - len, "input u8[1]\n");
    }
    len += (size_t)snprintf(program + len, sizeof(program) - len, "output u8[1]\n");
    if (pw_lp_fail(pw_executable_compile(g->client, g->vslices[0], program, len, NULL,
                                         &g->exe[k]),
                   "compile")) {
      return -1;
    }
  }
  if (pw_lp_fail(pw_executable_compile(g->client, g->vslices[0], "noop\n", 5, NULL,
                                       &g->exe_noout),
                 "compile")) {
    return -1;
  }
  return 0;
}

static void* pw_lp_prepare(void* rt, const pw_bench_dag_t* dag, const pw_bench_work_t* work,
                           pw_bench_counts_t* counts) {
  pw_lp_ctx_t* ctx = rt;
  uint32_t T = ctx->threads;
  pw_lp_graph_t* g = calloc(1, sizeof(*g));
  if (g == NULL) return NULL;
  pthread_mutex_init(&g->cache.mutex, NULL);
  g->kind = dag->kind;
  g->dag = dag;
  g->part_count = T;
  int rc = 0;
  counts->tasks = 0;
  counts->edges = 0;
  counts->note = NULL;
  switch (dag->kind) {
    case PW_BENCH_SHAPE_SPMD:
      if (PW_LP_SPMD_SLICES % T != 0) {
        fprintf(stderr, "libpathways: spmd needs a thread count dividing %d\n",
                PW_LP_SPMD_SLICES);
        rc = -1;
        break;
      }
      rc = pw_lp_setup(g, PW_LP_SPMD_SLICES, PW_LP_SPMD_MESH, work->spin_iters);
      for (uint32_t p = 0; p < T; ++p) {
        pw_lp_part_t* part = &g->parts[p];
        part->slice_first = p;
        part->slice_stride = T;
        part->slice_count = PW_LP_SPMD_SLICES / T;
        part->submissions = 1;
        part->launches = (uint64_t)dag->steps * part->slice_count * PW_LP_SPMD_MESH;
      }
      counts->tasks = dag->tasks;
      counts->edges = dag->edges;
      counts->note = "barrier per slice (gang op), no cross-slice barrier";
      break;
    case PW_BENCH_SHAPE_STEP:
      rc = pw_lp_setup(g, PW_LP_SPMD_SLICES * T, PW_LP_SPMD_MESH, work->spin_iters);
      for (uint32_t p = 0; p < T; ++p) {
        pw_lp_part_t* part = &g->parts[p];
        part->slice_first = p * PW_LP_SPMD_SLICES;
        part->slice_stride = 1;
        part->slice_count = PW_LP_SPMD_SLICES;
        part->submissions = 1;
        part->launches = PW_LP_SPMD_SLICES * PW_LP_SPMD_MESH;
      }
      counts->tasks = (uint64_t)dag->tasks * T;
      counts->edges = dag->edges * T;
      counts->note = T > 1 ? "4 gang ops of 8 devices; done event is the barrier; "
                             "one instance per thread"
                           : "4 gang ops of 8 devices; done event is the barrier";
      break;
    case PW_BENCH_SHAPE_SPAWN:
      rc = pw_lp_setup(g, T, 1, work->spin_iters);
      for (uint32_t p = 0; p < T; ++p) {
        pw_lp_part_t* part = &g->parts[p];
        part->slice_first = p;
        part->slice_stride = 1;
        part->slice_count = 1;
        part->submissions = dag->tasks / T + (p < dag->tasks % T ? 1 : 0);
        part->launches = part->submissions;
      }
      counts->tasks = dag->tasks;
      counts->edges = 0;
      counts->note = "one one-node graph submitted per task";
      break;
    default: {
      /* pipeline: one slice per stage; the others: one slice. */
      uint32_t per_part = dag->kind == PW_BENCH_SHAPE_PIPELINE ? dag->stages : 1;
      if (per_part * T > PW_LP_MAX_SLICES) {
        fprintf(stderr, "libpathways: %u slices needed, at most %d\n", per_part * T,
                PW_LP_MAX_SLICES);
        rc = -1;
        break;
      }
      rc = pw_lp_setup(g, per_part * T, 1, work->spin_iters);
      for (uint32_t p = 0; p < T && rc == 0; ++p) {
        pw_lp_part_t* part = &g->parts[p];
        part->slice_first = p * per_part;
        part->slice_stride = 1;
        part->slice_count = per_part;
        part->submissions = 1;
        if (T == 1 || dag->kind == PW_BENCH_SHAPE_ONE) {
          part->dag = *dag; /* borrowed */
        } else {
          /* The same generator at 1/T of the size. */
          rc = pw_bench_dag_make(&part->dag, dag->kind, dag->scale / (double)T);
          part->owns_dag = rc == 0;
        }
        /* Transfers move bytes through the transport, not backend launches. */
        part->launches = dag->kind == PW_BENCH_SHAPE_PIPELINE
                             ? (uint64_t)part->dag.microbatches * part->dag.stages
                             : part->dag.tasks;
        counts->tasks += part->dag.tasks;
        counts->edges += part->dag.edges;
      }
      if (T > 1) {
        counts->note = dag->kind == PW_BENCH_SHAPE_ONE
                           ? "one instance per thread"
                           : "one instance per thread at 1/T size (a graph runs on one thread)";
      }
      break;
    }
  }
  if (rc != 0) {
    pw_lp_destroy(rt, g);
    return NULL;
  }
  return g;
}

static int pw_lp_build_part(pw_lp_graph_t* g, pw_lp_part_t* part) {
  pw_client_t* c = g->client;
  if (pw_lp_fail(pw_graph_create(c, &part->graph), "graph")) return -1;
  if (g->kind == PW_BENCH_SHAPE_SPAWN) {
    pw_status_t s = pw_graph_add_compute(c, part->graph, "spawn", g->exe_noout,
                                         g->vslices[part->slice_first], NULL, 0, NULL);
    if (pw_lp_fail(s, "add_compute")) return -1;
  } else if (g->kind == PW_BENCH_SHAPE_SPMD || g->kind == PW_BENCH_SHAPE_STEP) {
    uint32_t steps = g->dag->steps;
    uint32_t prev[PW_LP_SPMD_SLICES];
    for (uint32_t step = 0; step < steps; ++step) {
      for (uint32_t k = 0; k < part->slice_count; ++k) {
        pw_vslice_t vs = g->vslices[part->slice_first + k * part->slice_stride];
        pw_value_t in = pw_value(prev[k], 0);
        uint32_t n = step > 0 ? 1 : 0;
        pw_status_t s = pw_graph_add_compute(c, part->graph, NULL, g->exe[n], vs,
                                             n ? &in : NULL, n, &prev[k]);
        if (pw_lp_fail(s, "add_compute")) return -1;
      }
    }
  } else {
    const pw_bench_dag_t* d = &part->dag;
    bool pipeline = d->kind == PW_BENCH_SHAPE_PIPELINE;
    uint32_t block = 2 * d->stages - 1; /* pipeline tasks per microbatch */
    for (uint32_t i = 0; i < d->tasks; ++i) {
      pw_value_t in[PW_LP_MAX_INPUTS];
      uint32_t n = d->pred_begin[i + 1] - d->pred_begin[i];
      /* pipeline: task 2s of a microbatch is compute on stage s's slice,
       * task 2s + 1 the transfer of its output to stage s + 1's slice. */
      uint32_t stage = pipeline ? (i % block) / 2 : 0;
      pw_vslice_t vs = g->vslices[part->slice_first + stage];
      if (d->role[i] == PW_BENCH_ROLE_TRANSFER) {
        pw_status_t s = pw_graph_add_transfer(c, part->graph, NULL,
                                              pw_value(d->preds[d->pred_begin[i]], 0),
                                              g->vslices[part->slice_first + stage + 1],
                                              pw_sharding_replicated(), NULL);
        if (pw_lp_fail(s, "add_transfer")) return -1;
        continue;
      }
      if (n > PW_LP_MAX_INPUTS) {
        fprintf(stderr, "libpathways: %s task %u has %u inputs (max %d)\n", d->name, i, n,
                PW_LP_MAX_INPUTS);
        return -1;
      }
      for (uint32_t k = 0; k < n; ++k) in[k] = pw_value(d->preds[d->pred_begin[i] + k], 0);
      pw_status_t s = pw_graph_add_compute(c, part->graph, NULL, g->exe[n], vs,
                                           n ? in : NULL, n, NULL);
      if (pw_lp_fail(s, "add_compute")) return -1;
    }
  }
  if (pw_lp_fail(pw_graph_finalize(c, part->graph), "finalize")) return -1;
  if (!pw_lp_use_armed) return 0;
  return pw_lp_fail(pw_graph_exec_create(c, part->graph, &part->armed), "arm");
}

static void* pw_lp_nothing(void* arg) {
  (void)arg;
  return NULL;
}

static int pw_lp_on_parts(pw_lp_ctx_t* ctx, pw_lp_graph_t* g, void* (*fn)(void*),
                          uint32_t runs);

static int pw_lp_build(void* rt, void* graph) {
  pw_lp_graph_t* g = graph;
  for (uint32_t p = 0; p < g->part_count; ++p) {
    if (pw_lp_build_part(g, &g->parts[p]) != 0) return -1;
  }
  /* At T > 1 the helpers slept through the build: an empty job wakes them
   * (untimed), so the first run finds them spinning, as every rerun does,
   * and measures the runtime's first run rather than a futex wake-up
   * (~50 us here, which was a one-task graph's whole "first run"). */
  return g->part_count > 1 ? pw_lp_on_parts(rt, g, pw_lp_nothing, 1) : 0;
}

/* |n| submissions of |part|'s graph; only the last asks for a done event,
 * left in |*last| (a part's submissions share one slice sequence: the
 * last one completes after every earlier one has; the peers' spawns take
 * no handle per task either). */
static pw_status_t pw_lp_submit_n(pw_lp_graph_t* g, pw_lp_part_t* part, uint64_t n,
                                  pw_event_t** last) {
  for (uint64_t i = 0; i < n; ++i) {
    pw_event_t** done = i + 1 == n ? last : NULL;
    pw_status_t s =
        part->armed != NULL
            ? pw_graph_exec_submit(part->armed, NULL, 0, NULL, NULL, 0, done)
            : pw_graph_submit(g->client, part->graph, NULL, 0, NULL, NULL, 0, done);
    if (s != NULL) return s;
  }
  return NULL;
}

/* Waits for |last| and releases it; 0, or -1 (printed) if it failed. A
 * run that completed inline needs no deadline: no clock read (about 25 ns
 * on this VM's kvm-clock), as the peers' waits read none. */
static int pw_lp_wait_last(pw_event_t* last) {
  pw_time_t deadline =
      pw_event_is_ready(last) ? PW_INFINITE_FUTURE : pw_deadline_from_timeout(PW_LP_DEADLINE_NS);
  pw_status_t s = pw_event_wait(last, deadline);
  pw_event_release(last);
  return pw_lp_fail(s, "wait");
}

/* One run of |part| on the calling thread: submit, wait. */
static int pw_lp_run_part(pw_lp_graph_t* g, pw_lp_part_t* part) {
  pw_event_t* last = NULL;
  if (pw_lp_fail(pw_lp_submit_n(g, part, part->submissions, &last), "submit")) return -1;
  return pw_lp_wait_last(last);
}

/* spawn at T > 1: submits chunks taken from the shared counter until it
 * runs out (or a submission fails, which stops the others at their next
 * chunk), then waits for the last. */
static void* pw_lp_spawn_thread(void* arg) {
  pw_lp_part_t* part = arg;
  pw_lp_graph_t* g = part->owner;
  pw_event_t* last = NULL;
  part->failed = 0;
  for (;;) {
    uint64_t at = atomic_fetch_add_explicit(&g->spawn_next, PW_LP_SPAWN_CHUNK,
                                            memory_order_relaxed);
    if (at >= g->spawn_end) break;
    uint64_t n = g->spawn_end - at < PW_LP_SPAWN_CHUNK ? g->spawn_end - at : PW_LP_SPAWN_CHUNK;
    pw_event_release(last);
    last = NULL;
    part->failed = pw_lp_fail(pw_lp_submit_n(g, part, n, &last), "submit");
    if (part->failed) {
      atomic_store(&g->spawn_next, g->spawn_end);
      break;
    }
  }
  if (last != NULL && pw_lp_wait_last(last) != 0) part->failed = -1;
  return NULL;
}

static void* pw_lp_run_thread(void* arg) {
  pw_lp_part_t* part = arg;
  for (uint32_t i = 0; i < part->runs && !part->failed; ++i) {
    part->failed = pw_lp_run_part(part->owner, part);
  }
  return NULL;
}

static void* pw_lp_latency_thread(void* arg) {
  pw_lp_part_t* part = arg;
  for (uint32_t i = 0; i < part->sample_count && !part->failed; ++i) {
    int64_t t0 = pw_bench_now_ns();
    part->failed = pw_lp_run_part(part->owner, part);
    part->samples[i] = (double)(pw_bench_now_ns() - t0) / 1000.0;
  }
  return NULL;
}

/* Runs |fn| on every part: part 0 on the calling thread, the others on
 * the helpers; returns when all are done. One handoff per call: |runs| is
 * what pw_lp_run_thread repeats on each part. */
static int pw_lp_on_parts(pw_lp_ctx_t* ctx, pw_lp_graph_t* g, void* (*fn)(void*),
                          uint32_t runs) {
  if (ctx->helper_count + 1 < g->part_count) return -1;
  for (uint32_t p = 0; p < g->part_count; ++p) {
    g->parts[p].owner = g;
    g->parts[p].runs = runs;
    g->parts[p].failed = 0;
  }
  ctx->fn = fn;
  ctx->graph = g;
  atomic_store(&ctx->remaining, g->part_count - 1);
  pthread_mutex_lock(&ctx->mutex);
  atomic_fetch_add_explicit(&ctx->generation, 1, memory_order_acq_rel);
  pthread_cond_broadcast(&ctx->cond);
  pthread_mutex_unlock(&ctx->mutex);
  fn(&g->parts[0]);
  while (atomic_load_explicit(&ctx->remaining, memory_order_acquire) != 0) pw_bench_pause();
  int failed = 0;
  for (uint32_t p = 0; p < g->part_count; ++p) failed |= g->parts[p].failed;
  return failed ? -1 : 0;
}

/* |n| runs of spawn at T > 1: n times the submissions, from one counter. */
static int pw_lp_spawn_shared(pw_lp_ctx_t* ctx, pw_lp_graph_t* g, uint32_t n) {
  atomic_store(&g->spawn_next, 0);
  g->spawn_end = (uint64_t)n * g->dag->tasks;
  return pw_lp_on_parts(ctx, g, pw_lp_spawn_thread, 1);
}

static int pw_lp_run(void* rt, void* graph) {
  pw_lp_graph_t* g = graph;
  g->runs_unverified += 1;
  if (g->part_count == 1) return pw_lp_run_part(g, &g->parts[0]);
  if (g->kind == PW_BENCH_SHAPE_SPAWN) return pw_lp_spawn_shared(rt, g, 1);
  return pw_lp_on_parts(rt, g, pw_lp_run_thread, 1);
}

/* |n| runs: at T > 1 one handoff, then every thread runs its part |n|
 * times back to back (the parts are independent instances, so a thread
 * does not wait for the others between its runs). */
static int pw_lp_run_n(void* rt, void* graph, uint32_t n) {
  pw_lp_graph_t* g = graph;
  g->runs_unverified += n;
  if (g->part_count == 1) {
    for (uint32_t i = 0; i < n; ++i) {
      if (pw_lp_run_part(g, &g->parts[0]) != 0) return -1;
    }
    return 0;
  }
  if (g->kind == PW_BENCH_SHAPE_SPAWN) return pw_lp_spawn_shared(rt, g, n);
  return pw_lp_on_parts(rt, g, pw_lp_run_thread, n);
}

static int pw_lp_latency(void* rt, void* graph, uint32_t n, double* out_us) {
  pw_lp_graph_t* g = graph;
  uint32_t at = 0;
  for (uint32_t p = 0; p < g->part_count; ++p) {
    pw_lp_part_t* part = &g->parts[p];
    part->sample_count = n / g->part_count + (p < n % g->part_count ? 1 : 0);
    part->samples = out_us + at;
    at += part->sample_count;
  }
  return pw_lp_on_parts(rt, g, pw_lp_latency_thread, 1);
}

/* The no-op double cannot stamp tasks; it counts launches: every run since
 * the last verify (run or run_n) must have made each part's launches. */
static int pw_lp_verify(void* rt, void* graph) {
  (void)rt;
  pw_lp_graph_t* g = graph;
  uint64_t want = 0;
  for (uint32_t p = 0; p < g->part_count; ++p) want += g->parts[p].launches;
  want *= g->runs_unverified;
  g->runs_unverified = 0;
  uint64_t total = pw_double_backend_total_launches(g->dbl);
  uint64_t got = total - g->launches_seen;
  g->launches_seen = total;
  if (got != want) {
    fprintf(stderr, "libpathways: %s: %llu device launches, expected %llu\n", g->dag->name,
            (unsigned long long)got, (unsigned long long)want);
    return -1;
  }
  return 0;
}

static const pw_bench_runtime_t pw_lp_runtime = {
    .name = "libpathways",
    .open = pw_lp_open,
    .close = pw_lp_close,
    .prepare = pw_lp_prepare,
    .build = pw_lp_build,
    .run = pw_lp_run,
    .run_n = pw_lp_run_n,
    .latency = pw_lp_latency,
    .verify = pw_lp_verify,
    .destroy = pw_lp_destroy,
    .stamps = false,
};

static int pw_bench_shapes_run(int argc, char** argv) {
  pw_bench_runtime_t runtime = pw_lp_runtime;
  pw_lp_use_cache = pw_bench_opt_flag(argc, argv, "alloc-cache");
  pw_lp_use_trace = pw_bench_opt_flag(argc, argv, "trace");
  const char* submit = pw_bench_opt_value(argc, argv, "submit");
  if (submit != NULL && strcmp(submit, "graph") != 0 && strcmp(submit, "exec") != 0) {
    fprintf(stderr, "shapes: --submit takes exec or graph, not '%s'\n", submit);
    return 2;
  }
  pw_lp_use_armed = submit == NULL || strcmp(submit, "exec") == 0;
  if (pw_lp_use_cache) {
    runtime.name = pw_lp_use_armed ? "libpathways+cache" : "libpathways/handle+cache";
  } else if (!pw_lp_use_armed) {
    runtime.name = "libpathways/handle";
  }
  if (pw_lp_use_trace) runtime.name = pw_lp_use_armed ? "libpathways+trace" : "libpathways/handle+trace";
  return pw_bench_shapes_main(argc, argv, &runtime);
}

PW_BENCH_SUITE(shapes, "shapes",
               "task shapes (chain, fan, layered, spmd, pipeline, spawn, one, step) "
               "on the no-op backend; peers in bench/peers",
               pw_bench_shapes_run)
