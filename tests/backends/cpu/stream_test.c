/* CPU backend streams mode (options.stream_depth > 0): queue_info, launches
 * run and complete in order, the depth limit, queue_seq checks, done_timed
 * timestamps, collectives that block their stream, failed devices, and
 * destroy with work still queued (collectives whose peers never come
 * included). A registered "test.gate" kernel holds a stream on a flag the
 * test opens, so "everything launched before the first completes" is made,
 * not hoped for. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cpu_test_support.h"
#include "support/test_allocators.h"

TestSuite(cpu_streams, .fini = pw_test_check_leaks);

#define MAXL 64
#define WAIT_MS 20000

/*---------------------------------------------------------------------------
 * Completion records
 *-------------------------------------------------------------------------*/

typedef struct rec_t rec_t;
typedef struct slot_t {
  rec_t* rec;
  uint32_t index;
} slot_t;

struct rec_t {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  uint32_t total;
  uint32_t calls[MAXL];
  int codes[MAXL];
  char messages[MAXL][200];
  bool timed[MAXL];
  pw_backend_timing_t timing[MAXL];
  uint32_t order[MAXL]; /* slot indices in done order */
  uint32_t order_len;
  slot_t slots[MAXL];
  /* Optional: called (outside the mutex) by the done that makes |total|
   * reach |hook_at|. */
  void (*hook)(void* user);
  void* hook_user;
  uint32_t hook_at;
};

static void rec_init(rec_t* rec) {
  memset(rec, 0, sizeof(*rec));
  pthread_mutex_init(&rec->mutex, NULL);
  pthread_cond_init(&rec->cond, NULL);
  for (uint32_t i = 0; i < MAXL; ++i) rec->slots[i] = (slot_t){rec, i};
}

static void rec_free(rec_t* rec) {
  pthread_mutex_destroy(&rec->mutex);
  pthread_cond_destroy(&rec->cond);
}

static void rec_done_timed(void* user, pw_status_t status, const pw_backend_timing_t* timing) {
  slot_t* slot = user;
  rec_t* rec = slot->rec;
  pthread_mutex_lock(&rec->mutex);
  uint32_t i = slot->index;
  rec->calls[i]++;
  rec->codes[i] = (int)pw_status_code(status);
  snprintf(rec->messages[i], sizeof(rec->messages[i]), "%s",
           status != NULL ? pw_status_message(status) : "");
  if (timing != NULL) {
    rec->timed[i] = true;
    rec->timing[i] = *timing;
  }
  if (rec->order_len < MAXL) rec->order[rec->order_len++] = i;
  rec->total++;
  bool hook = rec->hook != NULL && rec->total == rec->hook_at;
  pthread_cond_broadcast(&rec->cond);
  pthread_mutex_unlock(&rec->mutex);
  pw_status_free(status);
  if (hook) rec->hook(rec->hook_user);
}

static void rec_done(void* user, pw_status_t status) { rec_done_timed(user, status, NULL); }

/* Waits until |n| dones arrived or |ms| passed; true if they all did. */
static bool rec_wait(rec_t* rec, uint32_t n, int ms) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += ms / 1000;
  deadline.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec += 1;
    deadline.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&rec->mutex);
  while (rec->total < n) {
    if (pthread_cond_timedwait(&rec->cond, &rec->mutex, &deadline) == ETIMEDOUT) break;
  }
  bool all = rec->total >= n;
  pthread_mutex_unlock(&rec->mutex);
  return all;
}

static uint32_t rec_calls(rec_t* rec, uint32_t i) {
  pthread_mutex_lock(&rec->mutex);
  uint32_t calls = rec->calls[i];
  pthread_mutex_unlock(&rec->mutex);
  return calls;
}

/*---------------------------------------------------------------------------
 * The gate kernel: copies x to y once the test opens the gate.
 *-------------------------------------------------------------------------*/

typedef struct gate_t {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  bool open;
  uint32_t entered; /* kernels that reached the gate */
} gate_t;

static gate_t g_gate;

static pw_status_t gate_run(const pw_cpu_kernel_call_t* call) {
  gate_t* gate = call->user;
  pthread_mutex_lock(&gate->mutex);
  gate->entered++;
  pthread_cond_broadcast(&gate->cond);
  while (!gate->open) pthread_cond_wait(&gate->cond, &gate->mutex);
  pthread_mutex_unlock(&gate->mutex);
  memcpy(call->outputs[0].data, call->inputs[0].data, call->outputs[0].size);
  return NULL;
}

static void gate_set(bool open) {
  pthread_mutex_lock(&g_gate.mutex);
  g_gate.open = open;
  pthread_cond_broadcast(&g_gate.cond);
  pthread_mutex_unlock(&g_gate.mutex);
}

/* Waits (bounded) until |n| gate kernels have entered. */
static void gate_wait_entered(uint32_t n) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += WAIT_MS / 1000;
  pthread_mutex_lock(&g_gate.mutex);
  int rc = 0;
  while (g_gate.entered < n && rc != ETIMEDOUT) {
    rc = pthread_cond_timedwait(&g_gate.cond, &g_gate.mutex, &deadline);
  }
  uint32_t entered = g_gate.entered;
  pthread_mutex_unlock(&g_gate.mutex);
  cr_assert_geq(entered, n, "only %u of %u gate kernels started", entered, n);
}

static const pw_cpu_param_spec_t gate_in[] = {{"x", PW_CPU_DTYPE_BIT(PW_DTYPE_F32), -1}};
static const pw_cpu_param_spec_t gate_out[] = {{"y", PW_CPU_DTYPE_BIT(PW_DTYPE_F32), -1}};

/*---------------------------------------------------------------------------
 * Fixture: a streams-mode backend with buffers and executables
 *-------------------------------------------------------------------------*/

#define ELEMS 16
#define GATE_TEXT "kernel test.gate\ninput f32[16] replicated\noutput f32[16] replicated\n"
#define COPY_TEXT "kernel copy\ninput f32[16] replicated\noutput f32[16] replicated\n"
#define REDUCE_TEXT \
  "kernel all_reduce_sum\ninput f32[2,16] split(0,all)\noutput f32[16] replicated\n"

typedef struct fix_t {
  pw_test_allocator_t counting;
  pw_backend_t b;
  pw_backend_executable_t gate, copy, reduce;
  pw_backend_memory_t buf[4][MAXL + 1]; /* per device */
} fix_t;

static pw_backend_executable_t fix_load(fix_t* f, const char* text, uint32_t devices) {
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &devices);
  pw_backend_executable_t e = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(sig)};
  cr_assert_null(cpu_load_text(f->b, text, &mesh, &e, &sig));
  return e;
}

/* Four devices, streams of |depth|, |buffers| buffers per device: buffer 0
 * holds 1..16, the others 0xCD bytes. */
static void fix_init(fix_t* f, uint32_t depth, uint32_t buffers) {
  memset(f, 0, sizeof(*f));
  pw_test_allocator_init(&f->counting);
  pthread_mutex_init(&g_gate.mutex, NULL);
  pthread_cond_init(&g_gate.cond, NULL);
  g_gate.open = false;
  g_gate.entered = 0;
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.allocator = pw_test_allocator(&f->counting);
  o.device_count = 4;
  o.device_memory_bytes = 1 << 20;
  o.stream_depth = depth;
  cr_assert_null(pw_cpu_backend_create(&o, &f->b));
  pw_cpu_kernel_def_t def = {
      .struct_size = sizeof(def), .name = "test.gate", .input_count = 1, .inputs = gate_in,
      .output_count = 1, .outputs = gate_out, .run = gate_run,
      .user = &g_gate};
  cr_assert_null(pw_cpu_backend_register_kernel(f->b, &def));
  f->gate = fix_load(f, GATE_TEXT, 1);
  f->copy = fix_load(f, COPY_TEXT, 1);
  f->reduce = fix_load(f, REDUCE_TEXT, 2);
  float first[ELEMS];
  for (uint32_t i = 0; i < ELEMS; ++i) first[i] = (float)(i + 1);
  unsigned char junk[ELEMS * sizeof(float)];
  memset(junk, 0xCD, sizeof(junk));
  const pw_backend_vtable_t* vt = f->b.vtable;
  for (uint32_t d = 0; d < 4; ++d) {
    for (uint32_t k = 0; k < buffers; ++k) {
      cr_assert_null(vt->allocate(f->b.self, d, sizeof(first), &f->buf[d][k]));
      cr_assert_null(vt->copy_to_device(f->b.self, d, f->buf[d][k], 0, k == 0 ? (void*)first : junk,
                                        sizeof(first)));
    }
  }
}

/* Frees every buffer (any thread: also from a done during destroy). */
static void fix_free_buffers(void* user) {
  fix_t* f = user;
  const pw_backend_vtable_t* vt = f->b.vtable;
  for (uint32_t d = 0; d < 4; ++d) {
    for (uint32_t k = 0; k <= MAXL; ++k) {
      if (f->buf[d][k] != NULL) vt->deallocate(f->b.self, d, f->buf[d][k]);
      f->buf[d][k] = NULL;
    }
  }
}

/* Unloads and destroys; buffers must be free or freed by the dones. */
static void fix_destroy_only(fix_t* f) {
  const pw_backend_vtable_t* vt = f->b.vtable;
  vt->unload(f->b.self, f->gate);
  vt->unload(f->b.self, f->copy);
  vt->unload(f->b.self, f->reduce);
  vt->destroy(f->b.self);
  f->b.vtable = NULL;
}

static void fix_destroy_backend(fix_t* f) {
  fix_free_buffers(f);
  fix_destroy_only(f);
}

static void fix_finish(fix_t* f) {
  if (f->b.vtable != NULL) fix_destroy_backend(f);
  cr_assert_eq(pw_test_allocator_live(&f->counting), 0, "the backend leaked");
  pthread_mutex_destroy(&g_gate.mutex);
  pthread_cond_destroy(&g_gate.cond);
}

/* A v2 launch on one device (mesh of one) of |e| from buffer |in| to
 * |out|, queue_seq |seq|, done_timed -> |rec| slot |slot|. */
static pw_status_t launch_one(fix_t* f, pw_backend_executable_t e, uint32_t device,
                              uint32_t in, uint32_t out, uint64_t seq, rec_t* rec,
                              uint32_t slot) {
  uint32_t group[1] = {device};
  pw_backend_launch_t l = {
      .struct_size = sizeof(l), .executable = e, .device = device, .mesh_index = 0,
      .group_devices = group, .group_size = 1, .gang_id = 0,
      .inputs = &f->buf[device][in], .input_count = 1,
      .outputs = &f->buf[device][out], .output_count = 1,
      .done = rec_done, .done_user = &rec->slots[slot],
      .queue_seq = seq, .done_timed = rec_done_timed};
  return f->b.vtable->launch(f->b.self, &l);
}

/* Part |m| (device m) of a 2-device all-reduce gang over devices 0 and 1,
 * input buffer 0, output buffer |out|. */
static pw_status_t launch_reduce_part(fix_t* f, uint32_t m, uint64_t gang, uint32_t out,
                                      uint64_t seq, rec_t* rec, uint32_t slot) {
  uint32_t group[2] = {0, 1};
  pw_backend_launch_t l = {
      .struct_size = sizeof(l), .executable = f->reduce, .device = m, .mesh_index = m,
      .group_devices = group, .group_size = 2, .gang_id = gang,
      .inputs = &f->buf[m][0], .input_count = 1,
      .outputs = &f->buf[m][out], .output_count = 1,
      .done = rec_done, .done_user = &rec->slots[slot],
      .queue_seq = seq, .done_timed = rec_done_timed};
  return f->b.vtable->launch(f->b.self, &l);
}

static void read_buf(fix_t* f, uint32_t device, uint32_t k, float* out) {
  cr_assert_null(f->b.vtable->copy_to_host(f->b.self, device, f->buf[device][k], 0, out,
                                           ELEMS * sizeof(float)));
}

static void expect_code(pw_status_t s, pw_status_code_t code, const char* part) {
  cr_assert_not_null(s, "succeeded; %s expected", pw_status_code_string(code));
  cr_assert_eq(pw_status_code(s), code, "got %s: %s", pw_status_code_string(pw_status_code(s)),
               pw_status_message(s));
  if (part != NULL) {
    cr_assert(strstr(pw_status_message(s), part) != NULL, "'%s' not in '%s'", part,
              pw_status_message(s));
  }
  pw_status_free(s);
}

/*---------------------------------------------------------------------------
 * Tests
 *-------------------------------------------------------------------------*/

Test(cpu_streams, queue_info_both_modes) {
  pw_backend_t b;
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  cr_assert_eq(o.struct_size, sizeof(o));
  cr_assert_geq(o.struct_size, PW_CPU_BACKEND_OPTIONS_SIZE_V2);
  cr_assert_eq(o.stream_depth, 0, "pool mode is the default");
  o.device_count = 2;
  cr_assert_null(pw_cpu_backend_create(&o, &b));
  cr_assert_geq(b.vtable->struct_size, PW_BACKEND_VTABLE_SIZE_V3);
  cr_assert_not_null(b.vtable->queue_info);
  pw_backend_queue_info_t info = {.struct_size = sizeof(info), .flags = 77, .depth = 77};
  cr_assert_null(b.vtable->queue_info(b.self, 1, &info));
  cr_assert_eq(info.flags, 0, "pool mode is not queue-ordered");
  cr_assert_eq(info.depth, 0);
  cpu_destroy(b);

  /* A v1 caller's struct has no stream_depth: pool mode, whatever follows. */
  struct {
    pw_cpu_backend_options_t o;
    uint32_t tail;
  } v1;
  pw_cpu_backend_options_init(&v1.o);
  v1.o.struct_size = PW_CPU_BACKEND_OPTIONS_SIZE_V1;
  v1.o.stream_depth = 9; /* beyond the caller's struct_size: not read */
  cr_assert_null(pw_cpu_backend_create(&v1.o, &b));
  cr_assert_null(b.vtable->queue_info(b.self, 0, &info));
  cr_assert_eq(info.flags, 0);
  cpu_destroy(b);

  o.stream_depth = 4;
  cr_assert_null(pw_cpu_backend_create(&o, &b));
  cr_assert_null(b.vtable->queue_info(b.self, 0, &info));
  cr_assert_eq(info.flags, PW_BACKEND_QUEUE_ORDERED);
  cr_assert_eq(info.depth, 4);
  expect_code(b.vtable->queue_info(b.self, 2, &info), PW_STATUS_INVALID_ARGUMENT,
              "device 2 does not exist");
  expect_code(b.vtable->queue_info(b.self, 0, NULL), PW_STATUS_INVALID_ARGUMENT, NULL);
  pw_backend_queue_info_t small = {.struct_size = sizeof(size_t)};
  expect_code(b.vtable->queue_info(b.self, 0, &small), PW_STATUS_INVALID_ARGUMENT,
              "struct_size");
  cpu_destroy(b);

  o.stream_depth = PW_BACKEND_MAX_QUEUE_DEPTH * 4;
  cr_assert_null(pw_cpu_backend_create(&o, &b));
  cr_assert_null(b.vtable->queue_info(b.self, 1, &info));
  cr_assert_eq(info.depth, PW_BACKEND_MAX_QUEUE_DEPTH, "reported depth is capped");
  cpu_destroy(b);
}

/* A chain of copies through buffers, all launched behind a gated first
 * one: a wrong order leaves 0xCD bytes in some buffer. Dones come in
 * queue order with non-overlapping device intervals. */
Test(cpu_streams, runs_launches_in_order) {
  enum { N = 12 };
  fix_t f;
  fix_init(&f, N, N + 1);
  rec_t rec;
  rec_init(&rec);
  cr_assert_null(launch_one(&f, f.gate, 0, 0, 1, 1, &rec, 0));
  for (uint32_t k = 1; k < N; ++k) {
    cr_assert_null(launch_one(&f, f.copy, 0, k, k + 1, k + 1, &rec, k));
  }
  /* Every launch is queued; none has completed while the gate is shut. */
  gate_wait_entered(1);
  cr_assert_eq(rec_calls(&rec, 0), 0);
  gate_set(true);
  cr_assert(rec_wait(&rec, N, WAIT_MS), "only %u of %u launches completed", rec.total, N);
  float out[ELEMS];
  for (uint32_t k = 1; k <= N; ++k) {
    read_buf(&f, 0, k, out);
    for (uint32_t i = 0; i < ELEMS; ++i) {
      cr_assert_eq(out[i], (float)(i + 1), "buffer %u element %u is %g", k, i, (double)out[i]);
    }
  }
  for (uint32_t k = 0; k < N; ++k) {
    cr_assert_eq(rec.calls[k], 1, "launch %u: %u dones", k, rec.calls[k]);
    cr_assert_eq(rec.codes[k], PW_STATUS_OK, "launch %u: %s", k, rec.messages[k]);
    cr_assert_eq(rec.order[k], k, "done %u came for launch %u", k, rec.order[k]);
    cr_assert(rec.timed[k], "launch %u: done_timed not used", k);
    cr_assert_leq(rec.timing[k].start_ns, rec.timing[k].end_ns, "launch %u", k);
    cr_assert_eq(rec.timing[k].struct_size, sizeof(pw_backend_timing_t));
    if (k > 0) {
      cr_assert_geq(rec.timing[k].start_ns, rec.timing[k - 1].end_ns,
                    "launch %u started before launch %u ended", k, k - 1);
    }
  }
  rec_free(&rec);
  fix_finish(&f);
}

Test(cpu_streams, depth_limit) {
  enum { DEPTH = 3 };
  fix_t f;
  fix_init(&f, DEPTH, 8);
  rec_t rec;
  rec_init(&rec);
  cr_assert_null(launch_one(&f, f.gate, 0, 0, 1, 1, &rec, 0));
  cr_assert_null(launch_one(&f, f.copy, 0, 0, 2, 2, &rec, 1));
  cr_assert_null(launch_one(&f, f.copy, 0, 0, 3, 3, &rec, 2));
  /* depth + 1 outstanding: refused, naming the device and the depth. */
  expect_code(launch_one(&f, f.copy, 0, 0, 4, 4, &rec, 3), PW_STATUS_RESOURCE_EXHAUSTED,
              "device 0: its stream already holds 3 launches (stream depth 3)");
  /* Another device has its own stream. */
  cr_assert_null(launch_one(&f, f.copy, 1, 0, 1, 1, &rec, 4));
  cr_assert(rec_wait(&rec, 1, WAIT_MS));
  cr_assert_eq(rec.codes[4], PW_STATUS_OK);
  /* A gang part refused for depth aborts the part already accepted (which
   * waits in its collective on device 1's stream). */
  cr_assert_null(launch_reduce_part(&f, 1, 77, 2, 2, &rec, 5));
  expect_code(launch_reduce_part(&f, 0, 77, 4, 5, &rec, 6), PW_STATUS_RESOURCE_EXHAUSTED,
              "stream depth 3");
  cr_assert(rec_wait(&rec, 2, WAIT_MS), "the accepted part of a refused gang hangs");
  cr_assert_eq(rec.codes[5], PW_STATUS_ABORTED, "%s", rec.messages[5]);
  cr_assert_eq(rec.calls[3] + rec.calls[6], 0, "a refused launch called done");
  gate_set(true);
  cr_assert(rec_wait(&rec, 5, WAIT_MS));
  /* Room again (the refused launches took queue_seq 4 and 5). */
  cr_assert_null(launch_one(&f, f.copy, 0, 0, 5, 6, &rec, 7));
  cr_assert(rec_wait(&rec, 6, WAIT_MS));
  for (uint32_t k = 0; k < 8; ++k) {
    bool refused = k == 3 || k == 6;
    cr_assert_eq(rec.calls[k], refused ? 0 : 1, "launch %u: %u dones", k, rec.calls[k]);
  }
  rec_free(&rec);
  fix_finish(&f);
}

Test(cpu_streams, queue_seq_checks) {
  fix_t f;
  fix_init(&f, 16, 4);
  rec_t rec;
  rec_init(&rec);
  cr_assert_null(launch_one(&f, f.copy, 2, 0, 1, 1, &rec, 0));
  cr_assert_null(launch_one(&f, f.copy, 2, 0, 1, 2, &rec, 1));
  expect_code(launch_one(&f, f.copy, 2, 0, 1, 2, &rec, 2), PW_STATUS_INVALID_ARGUMENT,
              "device 2: queue_seq 2 repeats or goes back (the device's last was 2");
  expect_code(launch_one(&f, f.copy, 2, 0, 1, 1, &rec, 2), PW_STATUS_INVALID_ARGUMENT,
              "queue_seq 1 repeats or goes back");
  expect_code(launch_one(&f, f.copy, 2, 0, 1, 5, &rec, 2), PW_STATUS_INVALID_ARGUMENT,
              "device 2: queue_seq 5 skips from 2 (expected 3");
  /* After a gap the count goes on from it. */
  cr_assert_null(launch_one(&f, f.copy, 2, 0, 1, 6, &rec, 3));
  /* A launch refused for its arguments still takes its number. */
  expect_code(launch_one(&f, f.copy, 2, 1, 1, 7, &rec, 4), PW_STATUS_INVALID_ARGUMENT,
              "same memory");
  cr_assert_null(launch_one(&f, f.copy, 2, 0, 1, 8, &rec, 5));
  /* queue_seq 0 is not checked, nor counted; other devices count alone. */
  cr_assert_null(launch_one(&f, f.copy, 2, 0, 2, 0, &rec, 6));
  cr_assert_null(launch_one(&f, f.copy, 2, 0, 2, 9, &rec, 7));
  cr_assert_null(launch_one(&f, f.copy, 3, 0, 1, 1, &rec, 8));
  /* A v1 launch (no queue_seq, no done_timed) completes through done. */
  uint32_t group[1] = {2};
  pw_backend_launch_t v1 = {
      .struct_size = PW_BACKEND_LAUNCH_SIZE_V1, .executable = f.copy, .device = 2,
      .group_devices = group, .group_size = 1, .inputs = &f.buf[2][0], .input_count = 1,
      .outputs = &f.buf[2][3], .output_count = 1, .done = rec_done,
      .done_user = &rec.slots[9], .queue_seq = 1, .done_timed = rec_done_timed};
  cr_assert_null(f.b.vtable->launch(f.b.self, &v1));
  /* A v2 launch without done_timed uses done. */
  pw_backend_launch_t v2 = v1;
  v2.struct_size = sizeof(v2);
  v2.queue_seq = 10;
  v2.done_timed = NULL;
  v2.done_user = &rec.slots[10];
  cr_assert_null(f.b.vtable->launch(f.b.self, &v2));
  cr_assert(rec_wait(&rec, 9, WAIT_MS));
  const uint32_t accepted[] = {0, 1, 3, 5, 6, 7, 8, 9, 10};
  for (size_t k = 0; k < sizeof(accepted) / sizeof(accepted[0]); ++k) {
    uint32_t i = accepted[k];
    cr_assert_eq(rec.calls[i], 1, "launch %u", i);
    cr_assert_eq(rec.codes[i], PW_STATUS_OK, "launch %u: %s", i, rec.messages[i]);
    cr_assert_eq(rec.timed[i], i != 9 && i != 10, "launch %u: done_timed use", i);
  }
  cr_assert_eq(rec.calls[2] + rec.calls[4], 0, "a refused launch called done");
  rec_free(&rec);
  fix_finish(&f);
}

/* Device 0 queues its all-reduce part, then a copy; device 1's part comes
 * later. The copy must not start before the collective completes. */
Test(cpu_streams, collective_blocks_its_stream) {
  fix_t f;
  fix_init(&f, 8, 4);
  rec_t rec;
  rec_init(&rec);
  cr_assert_null(launch_reduce_part(&f, 0, 5, 1, 1, &rec, 0));
  cr_assert_null(launch_one(&f, f.copy, 0, 0, 2, 2, &rec, 1));
  /* A window in which a stream that does not block would run the copy: the
   * copy must not complete (nothing else can complete either). */
  cr_assert(!rec_wait(&rec, 1, 200), "the copy behind a waiting collective completed");
  uint64_t peer_launched = (uint64_t)pw_clock_now();
  cr_assert_null(launch_reduce_part(&f, 1, 5, 1, 1, &rec, 2));
  cr_assert(rec_wait(&rec, 3, WAIT_MS));
  for (uint32_t k = 0; k < 3; ++k) {
    cr_assert_eq(rec.calls[k], 1, "launch %u", k);
    cr_assert_eq(rec.codes[k], PW_STATUS_OK, "launch %u: %s", k, rec.messages[k]);
  }
  cr_assert_geq(rec.timing[1].start_ns, rec.timing[0].end_ns,
                "device 0's copy started before its all-reduce ended");
  cr_assert_geq(rec.timing[1].start_ns, peer_launched,
                "device 0's copy started before the all-reduce's last part was launched");
  uint32_t position[3] = {0, 0, 0};
  for (uint32_t k = 0; k < 3; ++k) position[rec.order[k]] = k;
  cr_assert_gt(position[1], position[0], "device 0's copy completed before its all-reduce");
  float out[ELEMS];
  for (uint32_t d = 0; d < 2; ++d) {
    read_buf(&f, d, 1, out);
    for (uint32_t i = 0; i < ELEMS; ++i) {
      cr_assert_eq(out[i], 2.0f * (float)(i + 1), "device %u element %u", d, i);
    }
  }
  rec_free(&rec);
  fix_finish(&f);
}

Test(cpu_streams, failed_device) {
  fix_t f;
  fix_init(&f, 8, 4);
  rec_t rec;
  rec_init(&rec);
  /* Device 0 waits in a collective with device 1; marking device 1 failed
   * ends it with UNAVAILABLE, and device 0's queued copy then runs. */
  cr_assert_null(launch_reduce_part(&f, 0, 9, 1, 1, &rec, 0));
  cr_assert_null(launch_one(&f, f.copy, 0, 0, 2, 2, &rec, 1));
  cr_assert_null(pw_cpu_backend_set_health(f.b, 1, PW_DEVICE_FAILED));
  cr_assert(rec_wait(&rec, 2, WAIT_MS), "a collective with a failed device hangs");
  cr_assert_eq(rec.codes[0], PW_STATUS_UNAVAILABLE, "%s", rec.messages[0]);
  cr_assert(strstr(rec.messages[0], "device 1") != NULL, "%s", rec.messages[0]);
  cr_assert_eq(rec.codes[1], PW_STATUS_OK, "%s", rec.messages[1]);
  /* Launches on the failed device are accepted and fail UNAVAILABLE. */
  cr_assert_null(launch_one(&f, f.copy, 1, 0, 1, 1, &rec, 2));
  cr_assert_null(launch_one(&f, f.copy, 1, 0, 2, 2, &rec, 3));
  cr_assert(rec_wait(&rec, 4, WAIT_MS));
  for (uint32_t k = 2; k < 4; ++k) {
    cr_assert_eq(rec.calls[k], 1);
    cr_assert_eq(rec.codes[k], PW_STATUS_UNAVAILABLE, "%s", rec.messages[k]);
    cr_assert(strstr(rec.messages[k], "cpu device 1 has failed") != NULL, "%s",
              rec.messages[k]);
  }
  cr_assert_null(pw_cpu_backend_set_health(f.b, 1, PW_DEVICE_HEALTHY));
  cr_assert_null(launch_one(&f, f.copy, 1, 0, 3, 3, &rec, 4));
  cr_assert(rec_wait(&rec, 5, WAIT_MS));
  cr_assert_eq(rec.codes[4], PW_STATUS_OK, "%s", rec.messages[4]);
  rec_free(&rec);
  fix_finish(&f);
}

typedef struct destroyer_t {
  fix_t* f;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  bool finished;
} destroyer_t;

static void* destroyer_main(void* arg) {
  destroyer_t* d = arg;
  /* The queued launches still use the buffers: the last done frees them. */
  fix_destroy_only(d->f);
  pthread_mutex_lock(&d->mutex);
  d->finished = true;
  pthread_cond_broadcast(&d->cond);
  pthread_mutex_unlock(&d->mutex);
  return NULL;
}

/* Destroy with queued copies, a collective whose peer never comes and two
 * gangs launched in conflicting orders (a deadlock on real chips): it runs
 * the copies, cancels the collectives and returns, within a bound. */
Test(cpu_streams, destroy_with_queued_work) {
  fix_t f;
  fix_init(&f, 16, 8);
  rec_t rec;
  rec_init(&rec);
  uint32_t slot = 0;
  /* Device 2: copies only. */
  for (uint32_t k = 0; k < 6; ++k) {
    cr_assert_null(launch_one(&f, f.copy, 2, 0, 1 + k, k + 1, &rec, slot++));
  }
  /* Devices 0 and 1: gang 20 then 21 on device 0, 21 then 20 on device 1,
   * each followed by a copy. */
  cr_assert_null(launch_reduce_part(&f, 0, 20, 1, 1, &rec, slot++)); /* 6 */
  cr_assert_null(launch_reduce_part(&f, 0, 21, 2, 2, &rec, slot++)); /* 7 */
  cr_assert_null(launch_one(&f, f.copy, 0, 0, 3, 3, &rec, slot++));  /* 8 */
  cr_assert_null(launch_reduce_part(&f, 1, 21, 1, 1, &rec, slot++)); /* 9 */
  cr_assert_null(launch_reduce_part(&f, 1, 20, 2, 2, &rec, slot++)); /* 10 */
  cr_assert_null(launch_one(&f, f.copy, 1, 0, 3, 3, &rec, slot++));  /* 11 */
  /* Device 0 again: a part of gang 30, whose device 1 part is never
   * launched, then a copy. */
  cr_assert_null(launch_reduce_part(&f, 0, 30, 4, 4, &rec, slot++)); /* 12 */
  cr_assert_null(launch_one(&f, f.copy, 0, 0, 5, 5, &rec, slot++));  /* 13 */
  pthread_mutex_lock(&rec.mutex);
  rec.hook = fix_free_buffers;
  rec.hook_user = &f;
  rec.hook_at = slot;
  bool all_done = rec.total == slot;
  pthread_mutex_unlock(&rec.mutex);
  if (all_done) fix_free_buffers(&f); /* not reached: gang 30 waits for destroy */
  destroyer_t d = {.f = &f, .finished = false};
  pthread_mutex_init(&d.mutex, NULL);
  pthread_cond_init(&d.cond, NULL);
  pthread_t thread;
  cr_assert_eq(pthread_create(&thread, NULL, destroyer_main, &d), 0);
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += WAIT_MS / 1000;
  pthread_mutex_lock(&d.mutex);
  int rc = 0;
  while (!d.finished && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&d.cond, &d.mutex, &deadline);
  bool finished = d.finished;
  pthread_mutex_unlock(&d.mutex);
  cr_assert(finished, "destroy with queued work did not return in %d ms", WAIT_MS);
  pthread_join(thread, NULL);
  cr_assert_eq(rec.total, slot, "%u of %u launches completed", rec.total, slot);
  for (uint32_t k = 0; k < slot; ++k) {
    cr_assert_eq(rec.calls[k], 1, "launch %u: %u dones", k, rec.calls[k]);
    bool collective = k == 6 || k == 7 || k == 9 || k == 10 || k == 12;
    /* The conflicting gangs may meet once one is cancelled; the lone part
     * cannot. */
    if (k == 12) {
      cr_assert_eq(rec.codes[k], PW_STATUS_CANCELLED, "launch %u: %s", k, rec.messages[k]);
    } else if (collective) {
      cr_assert(rec.codes[k] == PW_STATUS_CANCELLED || rec.codes[k] == PW_STATUS_OK,
                "launch %u: %s", k, rec.messages[k]);
    } else {
      cr_assert_eq(rec.codes[k], PW_STATUS_OK, "launch %u: %s", k, rec.messages[k]);
    }
  }
  pthread_mutex_destroy(&d.mutex);
  pthread_cond_destroy(&d.cond);
  rec_free(&rec);
  fix_finish(&f);
}
