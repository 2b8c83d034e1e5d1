/* The shared shape generator and measuring harness (see shapes.h). */
#define _GNU_SOURCE
#include "shapes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

static const char* const pw_bench_shape_names[PW_BENCH_SHAPE_COUNT] = {
    "chain", "fan", "layered", "spmd", "pipeline", "spawn", "one", "step"};

const char* pw_bench_shape_name(pw_bench_shape_kind_t kind) {
  return (unsigned)kind < PW_BENCH_SHAPE_COUNT ? pw_bench_shape_names[kind] : NULL;
}

bool pw_bench_shape_parse(const char* name, pw_bench_shape_kind_t* out_kind) {
  for (int k = 0; k < PW_BENCH_SHAPE_COUNT; ++k) {
    if (strcmp(name, pw_bench_shape_names[k]) == 0) {
      *out_kind = (pw_bench_shape_kind_t)k;
      return true;
    }
  }
  return false;
}

/* ---- generator ---------------------------------------------------------- */

/* Builder: tasks are appended in order with their predecessors. */
typedef struct pw_bench_builder_t {
  pw_bench_dag_t* dag;
  uint32_t task_cap;
  uint64_t edge_cap;
  bool failed;
} pw_bench_builder_t;

static void pw_bench_builder_init(pw_bench_builder_t* b, pw_bench_dag_t* dag,
                                  uint32_t tasks, uint64_t edges) {
  b->dag = dag;
  b->task_cap = tasks;
  b->edge_cap = edges;
  dag->pred_begin = malloc(((size_t)tasks + 1) * sizeof(uint32_t));
  dag->preds = malloc((size_t)(edges ? edges : 1) * sizeof(uint32_t));
  dag->role = malloc(tasks ? tasks : 1);
  b->failed = dag->pred_begin == NULL || dag->preds == NULL || dag->role == NULL;
  if (!b->failed) dag->pred_begin[0] = 0;
}

/* Appends a task with |n| predecessors |preds| (all < the new task). */
static uint32_t pw_bench_builder_add(pw_bench_builder_t* b, pw_bench_task_role_t role,
                                     const uint32_t* preds, uint32_t n) {
  pw_bench_dag_t* dag = b->dag;
  uint32_t id = dag->tasks;
  if (b->failed || id >= b->task_cap || dag->edges + n > b->edge_cap) {
    b->failed = true;
    return id;
  }
  for (uint32_t k = 0; k < n; ++k) dag->preds[dag->edges + k] = preds[k];
  dag->edges += n;
  dag->role[id] = (uint8_t)role;
  dag->tasks = id + 1;
  dag->pred_begin[id + 1] = (uint32_t)dag->edges;
  if (n > dag->max_preds) dag->max_preds = n;
  return id;
}

static uint32_t pw_bench_scaled(double full, double scale) {
  double v = floor(full * scale + 0.5);
  return v < 1 ? 1 : (uint32_t)v;
}

/* splitmix64: a small, fixed, portable generator for the layered edges. */
static uint64_t pw_bench_rand(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int pw_bench_cmp_u32(const void* a, const void* b) {
  uint32_t x = *(const uint32_t*)a, y = *(const uint32_t*)b;
  return (x > y) - (x < y);
}

static void pw_bench_make_chain(pw_bench_builder_t* b, uint32_t n) {
  pw_bench_builder_add(b, PW_BENCH_ROLE_ROOT, NULL, 0);
  for (uint32_t i = 1; i < n; ++i) {
    uint32_t p = i - 1;
    pw_bench_builder_add(b, PW_BENCH_ROLE_TASK, &p, 1);
  }
}

static uint32_t pw_bench_fan_join_tasks(uint32_t leaves) {
  uint32_t total = 0;
  for (uint32_t level = leaves; level > 1;) {
    level = (level + PW_BENCH_FAN_JOIN_ARITY - 1) / PW_BENCH_FAN_JOIN_ARITY;
    total += level;
  }
  return total ? total : 1; /* one leaf still gets a join */
}

static void pw_bench_make_fan(pw_bench_builder_t* b, uint32_t leaves) {
  uint32_t root = pw_bench_builder_add(b, PW_BENCH_ROLE_ROOT, NULL, 0);
  uint32_t first = b->dag->tasks;
  for (uint32_t i = 0; i < leaves; ++i) pw_bench_builder_add(b, PW_BENCH_ROLE_TASK, &root, 1);
  uint32_t level_first = first, level_count = leaves;
  do {
    uint32_t next_first = b->dag->tasks, next_count = 0;
    for (uint32_t g = 0; g < level_count; g += PW_BENCH_FAN_JOIN_ARITY) {
      uint32_t preds[PW_BENCH_FAN_JOIN_ARITY];
      uint32_t n = 0;
      for (uint32_t k = g; k < level_count && n < PW_BENCH_FAN_JOIN_ARITY; ++k) {
        preds[n++] = level_first + k;
      }
      pw_bench_builder_add(b, PW_BENCH_ROLE_JOIN, preds, n);
      ++next_count;
    }
    level_first = next_first;
    level_count = next_count;
  } while (level_count > 1 && !b->failed);
}

static void pw_bench_make_layered(pw_bench_builder_t* b, uint32_t layers, uint32_t width) {
  uint64_t state = PW_BENCH_LAYERED_SEED;
  for (uint32_t l = 0; l < layers; ++l) {
    for (uint32_t j = 0; j < width; ++j) {
      if (l == 0) {
        pw_bench_builder_add(b, PW_BENCH_ROLE_ROOT, NULL, 0);
        continue;
      }
      uint32_t want = 1 + (uint32_t)(pw_bench_rand(&state) % 4);
      if (want > width) want = width;
      uint32_t preds[4];
      uint32_t n = 0;
      while (n < want) {
        uint32_t p = (l - 1) * width + (uint32_t)(pw_bench_rand(&state) % width);
        bool seen = false;
        for (uint32_t k = 0; k < n; ++k) seen |= preds[k] == p;
        if (!seen) preds[n++] = p;
      }
      qsort(preds, n, sizeof(preds[0]), pw_bench_cmp_u32);
      pw_bench_builder_add(b, PW_BENCH_ROLE_TASK, preds, n);
    }
  }
}

/* |with_root|: the step shape starts from a root task; spmd's first step
 * has no predecessor. */
static void pw_bench_make_spmd(pw_bench_builder_t* b, uint32_t steps, uint32_t gang,
                               bool with_root) {
  uint32_t barrier = 0;
  bool have_barrier = false;
  if (with_root) {
    barrier = pw_bench_builder_add(b, PW_BENCH_ROLE_ROOT, NULL, 0);
    have_barrier = true;
  }
  uint32_t members[64];
  for (uint32_t s = 0; s < steps; ++s) {
    for (uint32_t k = 0; k < gang; ++k) {
      members[k] = pw_bench_builder_add(b, PW_BENCH_ROLE_TASK, &barrier, have_barrier ? 1 : 0);
    }
    barrier = pw_bench_builder_add(b, PW_BENCH_ROLE_JOIN, members, gang);
    have_barrier = true;
  }
}

static void pw_bench_make_pipeline(pw_bench_builder_t* b, uint32_t stages, uint32_t mbs) {
  /* compute[s] and transfer[s] of the previous microbatch. */
  uint32_t* compute = calloc(stages, sizeof(uint32_t));
  if (compute == NULL) {
    b->failed = true;
    return;
  }
  for (uint32_t m = 0; m < mbs; ++m) {
    uint32_t xfer = 0;
    for (uint32_t s = 0; s < stages; ++s) {
      uint32_t preds[2];
      uint32_t n = 0;
      if (m > 0) preds[n++] = compute[s];
      if (s > 0) preds[n++] = xfer;
      if (n == 2 && preds[0] > preds[1]) {
        uint32_t t = preds[0];
        preds[0] = preds[1];
        preds[1] = t;
      }
      compute[s] = pw_bench_builder_add(b, n ? PW_BENCH_ROLE_TASK : PW_BENCH_ROLE_ROOT, preds, n);
      if (s + 1 < stages) xfer = pw_bench_builder_add(b, PW_BENCH_ROLE_TRANSFER, &compute[s], 1);
    }
  }
  free(compute);
}

int pw_bench_dag_make(pw_bench_dag_t* dag, pw_bench_shape_kind_t kind, double scale) {
  memset(dag, 0, sizeof(*dag));
  dag->kind = kind;
  dag->name = pw_bench_shape_name(kind);
  dag->scale = scale;
  if (dag->name == NULL) return -1;
  pw_bench_builder_t b;
  switch (kind) {
    case PW_BENCH_SHAPE_CHAIN: {
      uint32_t n = pw_bench_scaled(100000, scale);
      pw_bench_builder_init(&b, dag, n, n);
      pw_bench_make_chain(&b, n);
      break;
    }
    case PW_BENCH_SHAPE_FAN: {
      uint32_t leaves = pw_bench_scaled(100000, scale);
      uint32_t joins = pw_bench_fan_join_tasks(leaves);
      pw_bench_builder_init(&b, dag, 1 + leaves + joins, 2ull * leaves + joins);
      pw_bench_make_fan(&b, leaves);
      break;
    }
    case PW_BENCH_SHAPE_LAYERED: {
      dag->layers = pw_bench_scaled(1000, scale);
      dag->width = 100;
      uint32_t n = dag->layers * dag->width;
      pw_bench_builder_init(&b, dag, n, 4ull * n);
      pw_bench_make_layered(&b, dag->layers, dag->width);
      break;
    }
    case PW_BENCH_SHAPE_SPMD:
    case PW_BENCH_SHAPE_STEP: {
      bool step = kind == PW_BENCH_SHAPE_STEP;
      dag->steps = step ? 1 : pw_bench_scaled(3000, scale);
      dag->slices = 4;
      dag->devices = 8;
      uint32_t gang = dag->slices * dag->devices;
      uint32_t n = dag->steps * (gang + 1) + (step ? 1 : 0);
      pw_bench_builder_init(&b, dag, n, 2ull * gang * dag->steps);
      pw_bench_make_spmd(&b, dag->steps, gang, step);
      break;
    }
    case PW_BENCH_SHAPE_PIPELINE: {
      dag->stages = 16;
      dag->microbatches = pw_bench_scaled(3125, scale);
      uint32_t n = dag->microbatches * (2 * dag->stages - 1);
      pw_bench_builder_init(&b, dag, n, 2ull * n);
      pw_bench_make_pipeline(&b, dag->stages, dag->microbatches);
      break;
    }
    case PW_BENCH_SHAPE_SPAWN: {
      uint32_t n = pw_bench_scaled(100000, scale);
      pw_bench_builder_init(&b, dag, n, 0);
      for (uint32_t i = 0; i < n; ++i) pw_bench_builder_add(&b, PW_BENCH_ROLE_ROOT, NULL, 0);
      dag->independent = true;
      break;
    }
    case PW_BENCH_SHAPE_ONE:
      pw_bench_builder_init(&b, dag, 1, 0);
      pw_bench_builder_add(&b, PW_BENCH_ROLE_ROOT, NULL, 0);
      break;
    default:
      return -1;
  }
  if (b.failed) {
    pw_bench_dag_free(dag);
    return -1;
  }
  return 0;
}

void pw_bench_dag_free(pw_bench_dag_t* dag) {
  free(dag->pred_begin);
  free(dag->preds);
  free(dag->role);
  pw_bench_shape_kind_t kind = dag->kind;
  memset(dag, 0, sizeof(*dag));
  dag->kind = kind;
}

/* ---- spin calibration --------------------------------------------------- */

static double pw_bench_spin_rate;

double pw_bench_spin_per_ns(void) {
  if (pw_bench_spin_rate > 0) return pw_bench_spin_rate;
  uint64_t iters = 1u << 16;
  /* Grow until one run takes about 5 ms. */
  for (;;) {
    int64_t t0 = pw_bench_now_ns();
    (void)pw_bench_spin(iters);
    int64_t dt = pw_bench_now_ns() - t0;
    if (dt >= 5000000 || iters >= (1ull << 34)) break;
    iters *= 2;
  }
  double best = 0;
  for (int r = 0; r < 7; ++r) {
    int64_t t0 = pw_bench_now_ns();
    (void)pw_bench_spin(iters);
    int64_t dt = pw_bench_now_ns() - t0;
    double rate = (double)iters / (double)(dt > 0 ? dt : 1);
    if (rate > best) best = rate; /* the fastest run saw the least interference */
  }
  pw_bench_spin_rate = best;
  return best;
}

uint64_t pw_bench_spin_iters(double ns) {
  double it = ns * pw_bench_spin_per_ns();
  return it < 1 ? 1 : (uint64_t)(it + 0.5);
}

/* ---- verification ------------------------------------------------------- */

int pw_bench_check_init(pw_bench_check_t* check, uint32_t tasks) {
  check->counter = 0;
  check->tasks = tasks;
  check->stamp = calloc(tasks ? tasks : 1, sizeof(uint64_t));
  return check->stamp ? 0 : -1;
}

void pw_bench_check_reset(pw_bench_check_t* check) {
  check->counter = 0;
  memset(check->stamp, 0, (size_t)check->tasks * sizeof(uint64_t));
}

void pw_bench_check_free(pw_bench_check_t* check) {
  free(check->stamp);
  check->stamp = NULL;
}

/* pw_bench_check_verify after |runs| runs that did not overlap: every task
 * ran |runs| times, and in the last run (its stamps) after its predecessors. */
static int pw_bench_check_verify_runs(const pw_bench_check_t* check, const pw_bench_dag_t* dag,
                                      uint64_t runs, const char* who) {
  uint64_t ran = __atomic_load_n(&check->counter, __ATOMIC_ACQUIRE);
  if (ran != runs * dag->tasks) {
    fprintf(stderr, "%s: %s: %llu task runs for %u tasks x %llu runs\n", who, dag->name,
            (unsigned long long)ran, dag->tasks, (unsigned long long)runs);
    return -1;
  }
  for (uint32_t i = 0; i < dag->tasks; ++i) {
    uint64_t s = check->stamp[i];
    if (s == 0) {
      fprintf(stderr, "%s: %s: task %u did not run\n", who, dag->name, i);
      return -1;
    }
    for (uint32_t e = dag->pred_begin[i]; e < dag->pred_begin[i + 1]; ++e) {
      uint32_t p = dag->preds[e];
      if (check->stamp[p] >= s) {
        fprintf(stderr, "%s: %s: task %u ran before its predecessor %u\n", who,
                dag->name, i, p);
        return -1;
      }
    }
  }
  return 0;
}

int pw_bench_check_verify(const pw_bench_check_t* check, const pw_bench_dag_t* dag,
                          const char* who) {
  return pw_bench_check_verify_runs(check, dag, 1, who);
}

/* ---- harness ------------------------------------------------------------ */

#define PW_BENCH_MAX_THREADS 8

typedef struct pw_bench_shapes_config_t {
  uint32_t threads[PW_BENCH_MAX_THREADS];
  uint32_t thread_count;
  bool shapes[PW_BENCH_SHAPE_COUNT];
  uint32_t reps;
  uint32_t samples;
  double scale;
  double metg_scale;
  double budget_s; /* timed reruns of one shape stop after about this long */
  bool metg;
  bool metg_only;
  bool check;
} pw_bench_shapes_config_t;


static int pw_bench_parse_config(int argc, char** argv, const char* who,
                                 pw_bench_shapes_config_t* c) {
  memset(c, 0, sizeof(*c));
  bool quick = pw_bench_opt_flag(argc, argv, "quick");
  c->reps = quick ? 3 : 7;
  c->samples = quick ? 200 : 2000;
  c->scale = quick ? 0.02 : 1.0;
  c->metg_scale = quick ? 0.01 : 0.05;
  c->metg = !pw_bench_opt_flag(argc, argv, "no-metg");
  c->metg_only = pw_bench_opt_flag(argc, argv, "metg-only");
  c->check = !pw_bench_opt_flag(argc, argv, "no-check");
  c->budget_s = (double)pw_bench_opt_int(argc, argv, "time-budget", 60);
  c->reps = (uint32_t)pw_bench_opt_int(argc, argv, "reps", c->reps);
  c->samples = (uint32_t)pw_bench_opt_int(argc, argv, "latency-samples", c->samples);
  if (c->reps < 1) c->reps = 1;
  if (c->samples < 1) c->samples = 1;
  const char* scale = pw_bench_opt_value(argc, argv, "scale");
  if (scale != NULL) {
    char* end = NULL;
    c->scale = strtod(scale, &end);
    if (end == scale || *end != '\0' || !(c->scale > 0) || c->scale > 100) {
      fprintf(stderr, "%s: --scale expects a number in (0, 100], got '%s'\n", who, scale);
      return -1;
    }
    c->metg_scale = c->scale * 0.05;
  }
  const char* threads = pw_bench_opt_value(argc, argv, "threads");
  if (threads == NULL) threads = "1,2";
  for (const char* p = threads; *p;) {
    char* end = NULL;
    long t = strtol(p, &end, 10);
    if (end == p || t < 1 || t > 64 || c->thread_count == PW_BENCH_MAX_THREADS) {
      fprintf(stderr, "%s: --threads expects a list like 1,2 (each 1..64), got '%s'\n", who,
              threads);
      return -1;
    }
    c->threads[c->thread_count++] = (uint32_t)t;
    p = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end != '\0') {
      fprintf(stderr, "%s: --threads: bad list '%s'\n", who, threads);
      return -1;
    }
  }
  const char* shapes = pw_bench_opt_value(argc, argv, "shape");
  if (shapes == NULL || strcmp(shapes, "all") == 0) {
    for (int k = 0; k < PW_BENCH_SHAPE_COUNT; ++k) c->shapes[k] = true;
  } else {
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", shapes);
    for (char* save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
      pw_bench_shape_kind_t kind;
      if (!pw_bench_shape_parse(tok, &kind)) {
        fprintf(stderr,
                "%s: unknown shape '%s' (chain, fan, layered, spmd, pipeline, spawn, one, "
                "step, all)\n",
                who, tok);
        return -1;
      }
      c->shapes[kind] = true;
    }
  }
  return 0;
}

/* One result row. NAN = not measured (null). */
typedef struct pw_bench_row_t {
  const char* runtime;
  const char* shape;
  uint32_t threads;
  pw_bench_counts_t counts;
  double build_ns, first_ns, rerun_ns, p50_us, p99_us, metg_us;
  uint32_t reps;
  uint32_t runs_per_rep; /* runs in one timed rep */
} pw_bench_row_t;

static void pw_bench_num_or_null(pw_bench_json_t* j, const char* key, double v) {
  if (isfinite(v)) {
    pw_bench_json_num(j, key, v);
  } else {
    pw_bench_json_null(j, key);
  }
}

static void pw_bench_row_print(const pw_bench_row_t* r) {
  pw_bench_json_t j;
  pw_bench_json_begin(&j, "shapes");
  pw_bench_json_str(&j, "runtime", r->runtime);
  pw_bench_json_str(&j, "shape", r->shape);
  pw_bench_json_int(&j, "threads", r->threads);
  pw_bench_json_int(&j, "tasks", (long long)r->counts.tasks);
  pw_bench_json_int(&j, "edges", (long long)r->counts.edges);
  pw_bench_num_or_null(&j, "build_ns", r->build_ns);
  pw_bench_num_or_null(&j, "first_ns", r->first_ns);
  pw_bench_num_or_null(&j, "rerun_ns", r->rerun_ns);
  pw_bench_num_or_null(&j, "p50_us", r->p50_us);
  pw_bench_num_or_null(&j, "p99_us", r->p99_us);
  pw_bench_num_or_null(&j, "metg_us", r->metg_us);
  pw_bench_json_int(&j, "reps", r->reps);
  pw_bench_json_int(&j, "runs_per_rep", r->runs_per_rep);
  if (r->counts.note) {
    pw_bench_json_str(&j, "note", r->counts.note);
  } else {
    pw_bench_json_null(&j, "note");
  }
  pw_bench_json_end(&j);
  fprintf(stderr, "%-12s %-9s %2u %8llu %9.1f %9.1f %9.1f %8.2f %8.2f %7.2f %4u\n",
          r->runtime, r->shape, r->threads, (unsigned long long)r->counts.tasks, r->build_ns,
          r->first_ns, r->rerun_ns, r->p50_us, r->p99_us, r->metg_us, r->runs_per_rep);
}

static double pw_bench_time_run(const pw_bench_runtime_t* R, void* rt, void* g, int* failed) {
  int64_t t0 = pw_bench_now_ns();
  int rc = R->run(rt, g);
  int64_t t1 = pw_bench_now_ns();
  if (rc != 0) *failed = 1;
  return (double)(t1 - t0);
}

/* |n| back-to-back runs, timed together: the driver's run_n, or |run| in a
 * loop. */
static double pw_bench_time_runs(const pw_bench_runtime_t* R, void* rt, void* g, uint32_t n,
                                 int* failed) {
  int rc = 0;
  int64_t t0 = pw_bench_now_ns();
  if (R->run_n != NULL) {
    rc = R->run_n(rt, g, n);
  } else {
    for (uint32_t i = 0; i < n && rc == 0; ++i) rc = R->run(rt, g);
  }
  int64_t t1 = pw_bench_now_ns();
  if (rc != 0) *failed = 1;
  return (double)(t1 - t0);
}

/* Runs per timed rep of one and step (see shapes.h, "harness"): untimed
 * batches of the same kind as the timed reps (so that the per-call
 * overhead run_n saves is saved here too), growing at most 16-fold a
 * round until one lasts at least half the target; n is then scaled to the
 * target from the per-run time that batch showed. Each size is tried 3
 * times and the fastest counts, and the first size (n = 1) never decides
 * alone: a preemption, or a slow first few runs after the graph was
 * built, must not stop the growth early and leave reps far shorter than
 * the target. */
#define PW_BENCH_BATCH_TARGET_NS 20000.0
#define PW_BENCH_BATCH_MAX 4096u

static uint32_t pw_bench_batch_clamp(double n) {
  if (!(n >= 1)) return 1;
  return n >= PW_BENCH_BATCH_MAX ? PW_BENCH_BATCH_MAX : (uint32_t)(n + 0.5);
}

static uint32_t pw_bench_calibrate_batch(const pw_bench_runtime_t* R, void* rt, void* g,
                                         int* failed) {
  uint32_t n = 1;
  for (int round = 0; round < 8 && !*failed; ++round) {
    double batch = INFINITY;
    for (int i = 0; i < 3; ++i) batch = fmin(batch, pw_bench_time_runs(R, rt, g, n, failed));
    double per_run = batch / (double)n;
    uint32_t fit = pw_bench_batch_clamp(PW_BENCH_BATCH_TARGET_NS / (per_run > 1 ? per_run : 1));
    if (round > 0 && (batch >= PW_BENCH_BATCH_TARGET_NS / 2 || n == PW_BENCH_BATCH_MAX)) {
      return fit;
    }
    n = fit < 16 * n ? fit : pw_bench_batch_clamp(16.0 * n);
  }
  return n;
}

/* A verified run (untimed): stamps or the runtime's own count. */
static int pw_bench_checked_run(const pw_bench_runtime_t* R, void* rt,
                                const pw_bench_dag_t* dag) {
  pw_bench_check_t check;
  if (pw_bench_check_init(&check, dag->tasks) != 0) return -1;
  pw_bench_work_t work = {0, &check};
  pw_bench_counts_t counts = {dag->tasks, dag->edges, NULL};
  int rc = -1;
  void* g = R->prepare(rt, dag, &work, &counts);
  if (g != NULL) {
    rc = R->build ? R->build(rt, g) : 0;
    for (int pass = 0; rc == 0 && pass < 2; ++pass) { /* first run and a rerun */
      pw_bench_check_reset(&check);
      rc = R->run(rt, g);
      if (rc == 0 && R->stamps) rc = pw_bench_check_verify(&check, dag, R->name);
      if (rc == 0 && R->verify) rc = R->verify(rt, g);
    }
    if (rc == 0 && R->run_n) { /* the batched runs the timed reps may use */
      const uint32_t runs = 3;
      pw_bench_check_reset(&check);
      rc = R->run_n(rt, g, runs);
      if (rc == 0 && R->stamps) rc = pw_bench_check_verify_runs(&check, dag, runs, R->name);
      if (rc == 0 && R->verify) rc = R->verify(rt, g);
    }
    R->destroy(rt, g);
  }
  pw_bench_check_free(&check);
  if (rc != 0) fprintf(stderr, "%s: verified run of %s failed\n", R->name, dag->name);
  return rc;
}

static int pw_bench_measure_shape(const pw_bench_runtime_t* R, void* rt, uint32_t threads,
                                  pw_bench_shape_kind_t kind,
                                  const pw_bench_shapes_config_t* c) {
  pw_bench_dag_t dag;
  if (pw_bench_dag_make(&dag, kind, c->scale) != 0) {
    fprintf(stderr, "%s: out of memory generating %s\n", R->name, pw_bench_shape_name(kind));
    return -1;
  }
  int failed = 0;
  if (c->check) {
    /* Correctness does not need the full size: verify a small instance. */
    pw_bench_dag_t small;
    double check_scale = c->scale < 0.02 ? c->scale : 0.02;
    if (pw_bench_dag_make(&small, kind, check_scale) != 0 ||
        pw_bench_checked_run(R, rt, &small) != 0) {
      failed = 1;
    }
    pw_bench_dag_free(&small);
  }
  pw_bench_row_t row = {R->name, dag.name, threads, {dag.tasks, dag.edges, NULL},
                        NAN, NAN, NAN, NAN, NAN, NAN, c->reps, 1};
  bool latency_shape = kind == PW_BENCH_SHAPE_ONE || kind == PW_BENCH_SHAPE_STEP;
  pw_bench_work_t work = {0, NULL};
  void* g = failed ? NULL : R->prepare(rt, &dag, &work, &row.counts);
  if (g == NULL) failed = 1;
  double per = 1.0 / (double)(row.counts.tasks ? row.counts.tasks : 1);
  if (!failed && R->build) {
    int64_t t0 = pw_bench_now_ns();
    if (R->build(rt, g) != 0) failed = 1;
    if (!dag.independent) row.build_ns = (double)(pw_bench_now_ns() - t0) * per;
  }
  double first = 0;
  if (!failed) {
    first = pw_bench_time_run(R, rt, g, &failed);
    row.first_ns = first * per;
  }
  /* A runtime that is very slow on a shape gets fewer reps (at least one),
   * so that a run stays bounded; "reps" and "note" say so. */
  uint32_t want = c->reps;
  if (first > 0 && (double)want * first > c->budget_s * 1e9) {
    double fit = c->budget_s * 1e9 / first;
    want = fit < 1 ? 1 : (uint32_t)fit;
  }
  /* one, step: a rep is n back-to-back runs (shapes.h, "harness"). Their
   * runs take microseconds, so the budget above never cuts their reps. */
  if (!failed && latency_shape) row.runs_per_rep = pw_bench_calibrate_batch(R, rt, g, &failed);
  double* reps = calloc(want, sizeof(double));
  for (uint32_t r = 0; !failed && reps && r < want; ++r) {
    reps[r] = latency_shape ? pw_bench_time_runs(R, rt, g, row.runs_per_rep, &failed) * per /
                                  (double)row.runs_per_rep
                            : pw_bench_time_run(R, rt, g, &failed) * per;
  }
  if (!failed && reps) row.rerun_ns = pw_bench_median(reps, want);
  free(reps);
  static char note[256];
  if (want < c->reps) {
    snprintf(note, sizeof(note), "%u reps (--time-budget %.0f s)%s%s", want, c->budget_s,
             row.counts.note ? "; " : "", row.counts.note ? row.counts.note : "");
    row.counts.note = note;
    row.reps = want;
  }
  if (!failed && latency_shape) { /* one run per sample */
    double* us = calloc(c->samples, sizeof(double));
    if (us == NULL) {
      failed = 1;
    } else if (R->latency) {
      if (R->latency(rt, g, c->samples, us) != 0) failed = 1;
    } else {
      for (uint32_t i = 0; i < c->samples && !failed; ++i) {
        us[i] = pw_bench_time_run(R, rt, g, &failed) / 1000.0;
      }
    }
    if (!failed) {
      row.p50_us = pw_bench_percentile(us, c->samples, 50);
      row.p99_us = pw_bench_percentile(us, c->samples, 99);
    }
    free(us);
  }
  if (g != NULL) R->destroy(rt, g);
  if (!failed) pw_bench_row_print(&row);
  pw_bench_dag_free(&dag);
  return failed ? -1 : 0;
}

/* METG(50%): the smallest task body (calibrated spin) for which a run of
 * the layered shape keeps at least half of the ideal throughput
 * tasks * spin / threads; interpolated (in log spin) between the grid points
 * around 50%. null when even 10 us misses it. */
static int pw_bench_measure_metg(const pw_bench_runtime_t* R, void* rt, uint32_t threads,
                                 const pw_bench_shapes_config_t* c) {
  static const double grid_us[] = {0.25, 0.5, 1, 2, 4, 8, 10};
  const size_t points = sizeof(grid_us) / sizeof(grid_us[0]);
  pw_bench_dag_t dag;
  if (pw_bench_dag_make(&dag, PW_BENCH_SHAPE_LAYERED, c->metg_scale) != 0) return -1;
  pw_bench_row_t row = {R->name, "metg", threads, {dag.tasks, dag.edges, NULL},
                        NAN, NAN, NAN, NAN, NAN, NAN, 3, 1};
  double prev_eff = NAN, prev_us = NAN;
  int failed = 0;
  for (size_t i = 0; i < points && !failed; ++i) {
    pw_bench_work_t work = {pw_bench_spin_iters(grid_us[i] * 1000.0), NULL};
    pw_bench_counts_t counts = {dag.tasks, dag.edges, NULL};
    void* g = R->prepare(rt, &dag, &work, &counts);
    if (g == NULL || (R->build && R->build(rt, g) != 0)) {
      failed = 1;
      if (g) R->destroy(rt, g);
      break;
    }
    row.counts = counts;
    double t[3];
    (void)pw_bench_time_run(R, rt, g, &failed); /* warm-up */
    for (int r = 0; r < 3 && !failed; ++r) t[r] = pw_bench_time_run(R, rt, g, &failed);
    R->destroy(rt, g);
    if (failed) break;
    double wall = pw_bench_median(t, 3);
    double eff = (double)counts.tasks * grid_us[i] * 1000.0 / ((double)threads * wall);
    fprintf(stderr, "%-12s metg      %2u spin %5.2f us: efficiency %.2f\n", R->name, threads,
            grid_us[i], eff);
    if (eff >= 0.5) {
      if (i == 0 || !(prev_eff < 0.5)) {
        row.metg_us = grid_us[i];
      } else {
        double f = (0.5 - prev_eff) / (eff - prev_eff);
        row.metg_us = exp(log(prev_us) + f * (log(grid_us[i]) - log(prev_us)));
      }
      break;
    }
    prev_eff = eff;
    prev_us = grid_us[i];
  }
  if (!failed) {
    if (!isfinite(row.metg_us)) row.counts.note = "efficiency below 50% even at 10 us";
    pw_bench_row_print(&row);
  }
  pw_bench_dag_free(&dag);
  return failed ? -1 : 0;
}

int pw_bench_shapes_main(int argc, char** argv, const pw_bench_runtime_t* R) {
  if (pw_bench_opt_flag(argc, argv, "help")) {
    printf("usage: [--threads 1,2] [--shape NAME,...|all] [--reps R] [--latency-samples N]\n"
           "       [--scale X] [--quick] [--no-metg|--metg-only] [--no-check]\n"
           "       [--time-budget SECONDS]\n"
           "libpathways only: [--submit exec|graph] [--alloc-cache] [--trace]\n"
           "Shapes: chain fan layered spmd pipeline spawn one step (see bench/shapes.h).\n"
           "Results: one JSON object per line on stdout; a table on stderr.\n");
    return 0;
  }
  pw_bench_shapes_config_t c;
  if (pw_bench_parse_config(argc, argv, R->name, &c) != 0) return 2;
  (void)pw_bench_spin_per_ns();
  fprintf(stderr, "%s: spin %.3f iterations/ns; scale %g, %u reps\n", R->name,
          pw_bench_spin_per_ns(), c.scale, c.reps);
  fprintf(stderr, "%-12s %-9s %2s %8s %9s %9s %9s %8s %8s %7s %4s\n", "runtime", "shape", "T",
          "tasks", "build_ns", "first_ns", "rerun_ns", "p50_us", "p99_us", "metg_us", "runs");
  int failures = 0;
  for (uint32_t ti = 0; ti < c.thread_count; ++ti) {
    uint32_t threads = c.threads[ti];
    void* rt = R->open(threads);
    if (rt == NULL) {
      fprintf(stderr, "%s: could not start with %u threads\n", R->name, threads);
      ++failures;
      continue;
    }
    for (int k = 0; k < PW_BENCH_SHAPE_COUNT && !c.metg_only; ++k) {
      if (!c.shapes[k]) continue;
      if (pw_bench_measure_shape(R, rt, threads, (pw_bench_shape_kind_t)k, &c) != 0) {
        fprintf(stderr, "%s: shape %s at %u threads failed\n", R->name,
                pw_bench_shape_name((pw_bench_shape_kind_t)k), threads);
        ++failures;
      }
    }
    if (c.metg && pw_bench_measure_metg(R, rt, threads, &c) != 0) {
      fprintf(stderr, "%s: METG at %u threads failed\n", R->name, threads);
      ++failures;
    }
    R->close(rt);
  }
  return failures ? 1 : 0;
}
