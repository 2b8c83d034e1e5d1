/* The worker against a test playing the controller (fake_controller.h):
 * registration, the session's requests, launches, copies, bad input and
 * loss. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "fake_controller.h"
#include "pathways/backends/sim.h"

void pw_test_check_leaks(void);

TestSuite(worker, .fini = pw_test_check_leaks, .timeout = 120);

static uint64_t fc_done_code(fc_t* fc, uint64_t id);

static const char fc_add_program[] =
    "kernel add\n"
    "input f32[4] split(0,all)\n"
    "input f32[4] split(0,all)\n"
    "output f32[4] split(0,all)\n";

Test(worker, registers_with_token_and_attaches_with_nonce) {
  fc_t fc;
  fc_listen(&fc);
  fc_start_worker(&fc, "secret", fc_cpu_backend(2), true);
  fc_msg_t hello;
  fc_recv_hello(&fc, &hello);
  const pw_wire_msg_t* h = &hello.msg;
  cr_assert_eq(h->blob[PW_WIRE_HELLO_B_TOKEN].size, 6);
  cr_assert(memcmp(h->blob[PW_WIRE_HELLO_B_TOKEN].data, "secret", 6) == 0);
  char text[64];
  pw__wire_blob_text(&h->blob[PW_WIRE_HELLO_B_NAME], text, sizeof(text));
  cr_assert_str_eq(text, "w-test");
  pw__wire_blob_text(&h->blob[PW_WIRE_HELLO_B_BACKEND], text, sizeof(text));
  cr_assert_str_eq(text, "cpu");
  cr_assert_eq(h->u[PW_WIRE_HELLO_DEVICES], 2);
  cr_assert_eq(h->u[PW_WIRE_HELLO_QUEUE_FLAGS], PW_BACKEND_QUEUE_ORDERED);
  cr_assert_eq(h->u[PW_WIRE_HELLO_QUEUE_DEPTH], 8);
  cr_assert_eq(h->blob[PW_WIRE_HELLO_B_UCX].size, 0, "no data plane asked for");
  cr_assert_eq(h->list_count, 2);
  cr_assert_eq(h->list[1], 1u << 20);
  fc_release(&hello);
  fc_welcome(&fc, 5, 100000000ull, 100);
  fc_msg_t attach;
  fc_recv(&fc, PW_WIRE_ATTACH, &attach);
  cr_assert_eq(attach.msg.u[PW_WIRE_ATTACH_INDEX], 5);
  cr_assert_eq(attach.msg.blob[PW_WIRE_ATTACH_B_NONCE].size, PW_WIRE_NONCE_SIZE);
  cr_assert(memcmp(attach.msg.blob[PW_WIRE_ATTACH_B_NONCE].data, fc.nonce, PW_WIRE_NONCE_SIZE) ==
            0);
  fc_release(&attach);
  fc_msg_t hb;
  fc_recv(&fc, PW_WIRE_HEARTBEAT, &hb);
  cr_assert_eq(hb.msg.list_count, 2, "one health per device");
  cr_assert_eq(hb.msg.list[0], PW_DEVICE_HEALTHY);
  fc_release(&hb);
  cr_assert_eq(fc_stats(&fc).sessions, 1);
  fc_stop(&fc);
}

Test(worker, refused_worker_retries) {
  fc_t fc;
  fc_listen(&fc);
  fc_start_worker(&fc, "wrong", fc_cpu_backend(1), true);
  fc_msg_t hello;
  fc_recv_hello(&fc, &hello);
  fc_release(&hello);
  fc_refuse(&fc, "bad token");
  fc_recv_hello(&fc, &hello);
  cr_assert_eq(hello.msg.blob[PW_WIRE_HELLO_B_TOKEN].size, 5);
  fc_release(&hello);
  cr_assert_geq(fc_stats(&fc).refusals, 1);
  cr_assert_geq(fc_stats(&fc).hellos, 2);
  cr_assert_eq(fc_stats(&fc).sessions, 0);
  fc_refuse(&fc, "bad token");
  fc_stop(&fc);
}

Test(worker, alloc_write_read_round_trip) {
  fc_t fc;
  fc_session(&fc, 2);
  fc_alloc(&fc, 11, 1, 64);
  uint8_t bytes[40];
  for (uint32_t i = 0; i < sizeof(bytes); ++i) bytes[i] = (uint8_t)(i * 3 + 1);
  fc_write(&fc, 1, 11, 8, bytes, sizeof(bytes), PW_STATUS_OK);
  fc_msg_t r;
  fc_read(&fc, 2, 11, 8, sizeof(bytes), PW_STATUS_OK, &r);
  cr_assert_eq(r.msg.blob[PW_WIRE_REPLY_B_PAYLOAD].size, sizeof(bytes));
  cr_assert(memcmp(r.msg.blob[PW_WIRE_REPLY_B_PAYLOAD].data, bytes, sizeof(bytes)) == 0);
  fc_release(&r);
  /* Out of range, unknown memory, a failed ALLOC remembered. */
  fc_write(&fc, 3, 11, 60, bytes, 8, PW_STATUS_OUT_OF_RANGE);
  fc_read(&fc, 4, 999, 0, 4, PW_STATUS_NOT_FOUND, &r);
  char text[256];
  pw__wire_blob_text(&r.msg.blob[PW_WIRE_REPLY_B_MESSAGE], text, sizeof(text));
  cr_assert(strstr(text, "memory 999") != NULL, "%s", text);
  fc_release(&r);
  fc_alloc(&fc, 12, 0, 1ull << 40);
  fc_write(&fc, 5, 12, 0, bytes, 4, PW_STATUS_RESOURCE_EXHAUSTED);
  fc_alloc(&fc, 13, 7, 4);
  fc_write(&fc, 6, 13, 0, bytes, 4, PW_STATUS_INVALID_ARGUMENT);
  /* FREE: later uses are NOT_FOUND. */
  pw_wire_msg_t f = {.type = PW_WIRE_FREE};
  f.u[PW_WIRE_FREE_MEM] = 11;
  fc_send(&fc, &f);
  fc_read(&fc, 7, 11, 0, 4, PW_STATUS_NOT_FOUND, &r);
  fc_release(&r);
  fc_stop(&fc);
}

/* COMPILE with the mesh's axis names: good names compile; a bad or
 * duplicated name, or a count other than the rank, is INVALID_ARGUMENT
 * naming it. */
static uint64_t fc_compile_named(fc_t* fc, uint64_t id, const char* axes, char* text, size_t n) {
  pw_wire_msg_t c = {.type = PW_WIRE_COMPILE};
  uint64_t dims[2] = {2, 1};
  c.u[PW_WIRE_COMPILE_ID] = id;
  c.blob[PW_WIRE_COMPILE_B_PROGRAM] = (pw_wire_blob_t){fc_add_program, strlen(fc_add_program)};
  c.blob[PW_WIRE_COMPILE_B_AXES] = (pw_wire_blob_t){axes, strlen(axes)};
  c.list = dims;
  c.list_count = 2;
  fc_send(fc, &c);
  fc_msg_t r;
  fc_recv(fc, PW_WIRE_REPLY, &r);
  uint64_t code = r.msg.u[PW_WIRE_REPLY_CODE];
  pw__wire_blob_text(&r.msg.blob[PW_WIRE_REPLY_B_MESSAGE], text, n);
  fc_release(&r);
  return code;
}

Test(worker, compile_carries_the_mesh_axis_names) {
  fc_t fc;
  fc_session(&fc, 2);
  char text[256];
  cr_assert_eq(fc_compile_named(&fc, 1, "data,model", text, sizeof(text)), 0, "%s", text);
  cr_assert_eq(fc_compile_named(&fc, 2, "data,data", text, sizeof(text)),
               PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(text, "COMPILE") != NULL && strstr(text, "both named 'data'") != NULL, "%s",
            text);
  cr_assert_eq(fc_compile_named(&fc, 3, "data", text, sizeof(text)), PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(text, "1 axis names for a rank-2 mesh") != NULL, "%s", text);
  cr_assert_eq(fc_compile_named(&fc, 4, "9lives,x", text, sizeof(text)),
               PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(text, "'9lives'") != NULL, "%s", text);
  fc_stop(&fc);
}

/* COMPILE + LOAD of |program| (two f32[4] inputs, one output) for a mesh
 * of 2, ALLOC + WRITE the shards. */
static void fc_setup_program(fc_t* fc, uint64_t exe, const char* program) {
  pw_wire_msg_t c = {.type = PW_WIRE_COMPILE};
  uint64_t dims[1] = {2};
  c.u[PW_WIRE_COMPILE_ID] = 20;
  c.blob[PW_WIRE_COMPILE_B_PROGRAM] = (pw_wire_blob_t){program, strlen(program)};
  c.list = dims;
  c.list_count = 1;
  fc_send(fc, &c);
  fc_msg_t r;
  fc_recv(fc, PW_WIRE_REPLY, &r);
  cr_assert_eq(r.msg.u[PW_WIRE_REPLY_CODE], 0);
  cr_assert_gt(r.msg.blob[PW_WIRE_REPLY_B_PAYLOAD].size, 0);
  pw_wire_msg_t l = {.type = PW_WIRE_LOAD};
  l.u[PW_WIRE_LOAD_ID] = 21;
  l.u[PW_WIRE_LOAD_EXE] = exe;
  l.blob[PW_WIRE_LOAD_B_BYTES] = r.msg.blob[PW_WIRE_REPLY_B_PAYLOAD];
  fc_send(fc, &l);
  fc_release(&r);
  fc_recv(fc, PW_WIRE_REPLY, &r);
  cr_assert_eq(r.msg.u[PW_WIRE_REPLY_ID], 21);
  cr_assert_eq(r.msg.u[PW_WIRE_REPLY_CODE], 0);
  char name[64];
  pw__wire_blob_text(&r.msg.blob[PW_WIRE_REPLY_B_PAYLOAD], name, sizeof(name));
  cr_assert(name[0] != '\0' && strstr(program, name) != NULL, "signature name '%s'", name);
  /* mesh rank 1, dim 2, 2 inputs, 1 output; input 0: f32, rank 1, [4],
   * split, tensor axis 0, mesh axis all. */
  const uint64_t* s = r.msg.list;
  cr_assert_geq(r.msg.list_count, 5 + 8);
  cr_assert_eq(s[0], 1);
  cr_assert_eq(s[1], 2);
  cr_assert_eq(s[2], 2);
  cr_assert_eq(s[3], 1);
  cr_assert_eq(s[4], PW_DTYPE_F32);
  cr_assert_eq(s[5], 1);
  cr_assert_eq(s[6], 4);
  cr_assert_eq(s[7], PW_SHARDING_SPLIT);
  cr_assert_eq(s[10], 0); /* no tiles */
  cr_assert_eq(s[11], 0); /* no unreduced axes */
  cr_assert_eq(r.msg.list_count, 4 + 3 * 8);
  fc_release(&r);
  float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
  for (uint32_t d = 0; d < 2; ++d) {
    fc_alloc(fc, 100 + d, d, 8);
    fc_alloc(fc, 200 + d, d, 8);
    fc_alloc(fc, 300 + d, d, 8);
    fc_write(fc, 30 + d, 100 + d, 0, &a[2 * d], 8, PW_STATUS_OK);
    fc_write(fc, 40 + d, 200 + d, 0, &b[2 * d], 8, PW_STATUS_OK);
  }
}

static void fc_setup_add(fc_t* fc, uint64_t exe) { fc_setup_program(fc, exe, fc_add_program); }

static void fc_launch(fc_t* fc, uint64_t id, uint64_t exe, uint64_t seq, uint64_t out0) {
  uint64_t list[2 + 3 * 2] = {0, 1, 100, 101, 200, 201, out0, 301};
  pw_wire_msg_t m = {.type = PW_WIRE_LAUNCH, .list = list, .list_count = 8};
  m.u[PW_WIRE_LAUNCH_ID] = id;
  m.u[PW_WIRE_LAUNCH_EXE] = exe;
  m.u[PW_WIRE_LAUNCH_MESH_START] = 0;
  m.u[PW_WIRE_LAUNCH_DEVICES] = 2;
  m.u[PW_WIRE_LAUNCH_GROUP] = 2;
  m.u[PW_WIRE_LAUNCH_GANG] = id;
  m.u[PW_WIRE_LAUNCH_QUEUE_SEQ] = seq;
  m.u[PW_WIRE_LAUNCH_INPUTS] = 2;
  m.u[PW_WIRE_LAUNCH_OUTPUTS] = 1;
  fc_send(fc, &m);
}

Test(worker, compile_load_launch_read) {
  fc_t fc;
  fc_session(&fc, 2);
  fc_setup_add(&fc, 7);
  fc_launch(&fc, 50, 7, 1, 300);
  fc_msg_t d;
  fc_recv(&fc, PW_WIRE_DONE, &d);
  cr_assert_eq(d.msg.u[PW_WIRE_DONE_ID], 50);
  cr_assert_eq(d.msg.u[PW_WIRE_DONE_CODE], 0);
  cr_assert_geq(d.msg.u[PW_WIRE_DONE_END_NS], d.msg.u[PW_WIRE_DONE_START_NS]);
  cr_assert_gt(d.msg.u[PW_WIRE_DONE_END_NS], 0, "streams mode times its launches");
  fc_release(&d);
  float want[4] = {11, 22, 33, 44};
  for (uint32_t dev = 0; dev < 2; ++dev) {
    fc_msg_t r;
    fc_read(&fc, 60 + dev, 300 + dev, 0, 8, PW_STATUS_OK, &r);
    cr_assert(memcmp(r.msg.blob[PW_WIRE_REPLY_B_PAYLOAD].data, &want[2 * dev], 8) == 0);
    fc_release(&r);
  }
  cr_assert_eq(fc_stats(&fc).launches, 1);
  fc_stop(&fc);
}

/* A 2-device CPU backend with kernel |name| (two f32 inputs, one output)
 * that runs |run| with |user|. */
static pw_backend_t kernel_backend(const char* name, pw_status_t (*run)(const pw_cpu_kernel_call_t*),
                                   void* user) {
  pw_backend_t backend = fc_cpu_backend(2);
  pw_cpu_param_spec_t p = {"x", PW_CPU_DTYPE_BIT(PW_DTYPE_F32), 1};
  pw_cpu_param_spec_t in[2] = {p, p};
  pw_cpu_kernel_def_t def = {.struct_size = sizeof(def), .name = name, .input_count = 2,
                             .inputs = in, .output_count = 1, .outputs = &p,
                             .flags = PW_CPU_KERNEL_SAME_DTYPE, .run = run, .user = user};
  pw_status_t reg = pw_cpu_backend_register_kernel(backend, &def);
  cr_assert_null(reg, "%s", pw_status_message(reg));
  return backend;
}

/* y = a + b + node_arg: the LAUNCH's node argument reaches the kernel. */
static pw_status_t arg_run(const pw_cpu_kernel_call_t* call) {
  const float* a = call->inputs[0].data;
  const float* b = call->inputs[1].data;
  float* y = call->outputs[0].data;
  for (size_t i = 0; i < call->outputs[0].size / sizeof(float); ++i) {
    y[i] = a[i] + b[i] + (float)call->node_arg;
  }
  return NULL;
}

Test(worker, a_launch_carries_its_node_argument_to_the_kernel) {
  pw_backend_t backend = kernel_backend("test.arg", arg_run, NULL);
  fc_t fc;
  fc_listen(&fc);
  fc_start_worker(&fc, "secret", backend, true);
  fc_attach(&fc);
  fc_setup_program(&fc, 7,
                   "kernel test.arg\ninput f32[4] split(0,all)\ninput f32[4] split(0,all)\n"
                   "output f32[4] split(0,all)\n");
  uint64_t list[2 + 3 * 2] = {0, 1, 100, 101, 200, 201, 300, 301};
  pw_wire_msg_t m = {.type = PW_WIRE_LAUNCH, .list = list, .list_count = 8};
  m.u[PW_WIRE_LAUNCH_ID] = 50;
  m.u[PW_WIRE_LAUNCH_EXE] = 7;
  m.u[PW_WIRE_LAUNCH_DEVICES] = 2;
  m.u[PW_WIRE_LAUNCH_GROUP] = 2;
  m.u[PW_WIRE_LAUNCH_GANG] = 50;
  m.u[PW_WIRE_LAUNCH_QUEUE_SEQ] = 1;
  m.u[PW_WIRE_LAUNCH_INPUTS] = 2;
  m.u[PW_WIRE_LAUNCH_OUTPUTS] = 1;
  m.u[PW_WIRE_LAUNCH_NODE_ARG] = 1000;
  fc_send(&fc, &m);
  fc_msg_t d;
  fc_recv(&fc, PW_WIRE_DONE, &d);
  cr_assert_eq(d.msg.u[PW_WIRE_DONE_CODE], 0);
  fc_release(&d);
  float want[4] = {1011, 1022, 1033, 1044};
  for (uint32_t dev = 0; dev < 2; ++dev) {
    fc_msg_t r;
    fc_read(&fc, 60 + dev, 300 + dev, 0, 8, PW_STATUS_OK, &r);
    cr_assert(memcmp(r.msg.blob[PW_WIRE_REPLY_B_PAYLOAD].data, &want[2 * dev], 8) == 0,
              "device %u: %g", dev, (double)((const float*)r.msg.blob[PW_WIRE_REPLY_B_PAYLOAD].data)[0]);
    fc_release(&r);
  }
  fc_stop(&fc);
}

/* A kernel that blocks on device 0 until released (then adds). */
typedef struct hang_s {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool released;
  bool entered;
} hang_t;

static pw_status_t hang_run(const pw_cpu_kernel_call_t* call) {
  hang_t* h = call->user;
  if (call->device == 0) {
    pthread_mutex_lock(&h->lock);
    h->entered = true;
    pthread_cond_broadcast(&h->cond);
    while (!h->released) pthread_cond_wait(&h->cond, &h->lock);
    pthread_mutex_unlock(&h->lock);
  }
  const float* a = call->inputs[0].data;
  const float* b = call->inputs[1].data;
  float* y = call->outputs[0].data;
  for (size_t i = 0; i < call->outputs[0].size / sizeof(float); ++i) y[i] = a[i] + b[i];
  return NULL;
}

/* A launch that never returns does not keep the worker from its next
 * controller: after drain_ns it registers again; the launch's DONE, when
 * it finally comes, is not sent into the new session, and its memory is
 * freed then (the suite's leak check). */
Test(worker, a_hung_launch_does_not_keep_the_worker_from_registering_again) {
  static hang_t h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false};
  pw_backend_t backend = kernel_backend("test.hang", hang_run, &h);
  fc_t fc;
  fc_listen(&fc);
  fc.drain_ns = 200000000ull;
  fc_start_worker(&fc, "secret", backend, true);
  fc_attach(&fc);
  fc_setup_program(&fc, 7,
                   "kernel test.hang\ninput f32[4] split(0,all)\ninput f32[4] split(0,all)\n"
                   "output f32[4] split(0,all)\n");
  fc_launch(&fc, 50, 7, 1, 300);
  pthread_mutex_lock(&h.lock);
  while (!h.entered) pthread_cond_wait(&h.cond, &h.lock);
  pthread_mutex_unlock(&h.lock);
  pw_wire_msg_t bye = {.type = PW_WIRE_BYE};
  fc_send(&fc, &bye);
  fc_attach(&fc); /* within drain_ns, not never */
  pthread_mutex_lock(&h.lock);
  h.released = true;
  pthread_cond_broadcast(&h.cond);
  pthread_mutex_unlock(&h.lock);
  struct timespec ts = {0, 100000000};
  nanosleep(&ts, NULL);
  /* The next message of the new session is this READ's REPLY, not the
   * old launch's DONE. */
  fc_msg_t m;
  fc_read(&fc, 60, 300, 0, 8, PW_STATUS_NOT_FOUND, &m);
  fc_release(&m);
  cr_assert_eq(fc_stats(&fc).launches, 1);
  fc_stop(&fc);
}

typedef struct dump_text_s {
  char text[8192];
  size_t size;
  int lines;
} dump_text_t;

static void dump_line(void* user, const char* line) {
  dump_text_t* d = user;
  int n = snprintf(d->text + d->size, sizeof(d->text) - d->size, "%s\n", line);
  if (n > 0 && d->size + (size_t)n < sizeof(d->text)) d->size += (size_t)n;
  d->lines++;
}

/* pw_worker_dump shows a launch that does not finish: its id, executable,
 * devices and the part still running; then nothing once it is answered. */
Test(worker, the_dump_shows_a_launch_that_does_not_finish) {
  static hang_t h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false};
  pw_backend_t backend = kernel_backend("test.hang", hang_run, &h);
  fc_t fc;
  fc_listen(&fc);
  fc_start_worker(&fc, "secret", backend, true);
  fc_attach(&fc);
  fc_setup_program(&fc, 7,
                   "kernel test.hang\ninput f32[4] split(0,all)\ninput f32[4] split(0,all)\n"
                   "output f32[4] split(0,all)\n");
  fc_launch(&fc, 50, 7, 1, 300);
  pthread_mutex_lock(&h.lock);
  while (!h.entered) pthread_cond_wait(&h.cond, &h.lock);
  pthread_mutex_unlock(&h.lock);
  static dump_text_t d;
  memset(&d, 0, sizeof(d));
  cr_assert_null(pw_worker_dump(fc.worker, dump_line, &d));
  cr_assert_not_null(strstr(d.text, "in a session"), "%s", d.text);
  cr_assert_not_null(strstr(d.text, "device 1: healthy"), "%s", d.text);
  cr_assert_not_null(strstr(d.text, "launch 50: executable 7 on devices 0,1"), "%s", d.text);
  cr_assert_not_null(strstr(d.text, "running for"), "%s", d.text);
  cr_assert_not_null(strstr(d.text, "1 launch and 0 copies not answered"), "%s", d.text);
  pthread_mutex_lock(&h.lock);
  h.released = true;
  pthread_cond_broadcast(&h.cond);
  pthread_mutex_unlock(&h.lock);
  fc_msg_t m;
  fc_recv(&fc, PW_WIRE_DONE, &m);
  cr_assert_eq(m.msg.u[PW_WIRE_DONE_ID], 50);
  fc_release(&m);
  /* The DONE leaves before the launch stops counting as in flight. */
  for (int i = 0; i < 500; ++i) {
    memset(&d, 0, sizeof(d));
    cr_assert_null(pw_worker_dump(fc.worker, dump_line, &d));
    if (strstr(d.text, "0 launches and 0 copies not answered") != NULL) break;
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  cr_assert_null(strstr(d.text, "launch 50"), "%s", d.text);
  cr_assert_not_null(strstr(d.text, "0 launches and 0 copies not answered"), "%s", d.text);
  pw_status_t s = pw_worker_dump(NULL, dump_line, &d);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  s = pw_worker_dump(fc.worker, NULL, NULL);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  fc_stop(&fc);
}

Test(worker, launch_on_unknown_ids_is_not_found) {
  fc_t fc;
  fc_session(&fc, 2);
  fc_setup_add(&fc, 7);
  /* Queued (queue_seq 1, 2, 3): the ones the worker answers itself leave
   * no gap in the backend's queue, so the third runs. */
  fc_launch(&fc, 51, 7, 1, 999);
  fc_msg_t d;
  fc_recv(&fc, PW_WIRE_DONE, &d);
  cr_assert_eq(d.msg.u[PW_WIRE_DONE_ID], 51);
  cr_assert_eq(d.msg.u[PW_WIRE_DONE_CODE], PW_STATUS_NOT_FOUND);
  char text[256];
  pw__wire_blob_text(&d.msg.blob[PW_WIRE_DONE_B_MESSAGE], text, sizeof(text));
  cr_assert(strstr(text, "memory 999") != NULL, "%s", text);
  fc_release(&d);
  fc_launch(&fc, 52, 8, 2, 300);
  fc_recv(&fc, PW_WIRE_DONE, &d);
  cr_assert_eq(d.msg.u[PW_WIRE_DONE_CODE], PW_STATUS_NOT_FOUND);
  pw__wire_blob_text(&d.msg.blob[PW_WIRE_DONE_B_MESSAGE], text, sizeof(text));
  cr_assert(strstr(text, "executable 8") != NULL, "%s", text);
  fc_release(&d);
  cr_assert_eq(fc_stats(&fc).launches, 0);
  fc_launch(&fc, 53, 7, 3, 300);
  cr_assert_eq(fc_done_code(&fc, 53), 0);
  fc_stop(&fc);
}

/* The backend outlives the session: a new session's queue_seq 1 must not
 * reach it as 1 again (it would refuse it as going back). */
Test(worker, queued_launches_run_after_the_worker_registers_again) {
  fc_t fc;
  fc_session(&fc, 2);
  fc_setup_add(&fc, 7);
  fc_launch(&fc, 50, 7, 1, 300);
  cr_assert_eq(fc_done_code(&fc, 50), 0);
  fc_launch(&fc, 51, 7, 2, 300);
  cr_assert_eq(fc_done_code(&fc, 51), 0);
  pw_wire_msg_t bye = {.type = PW_WIRE_BYE};
  bye.blob[PW_WIRE_REASON_B] = (pw_wire_blob_t){"controller lost it", 18};
  fc_send(&fc, &bye);
  fc_attach(&fc);
  fc_setup_add(&fc, 7);
  fc_launch(&fc, 60, 7, 1, 300);
  cr_assert_eq(fc_done_code(&fc, 60), 0, "the new session's first queued launch runs");
  fc_launch(&fc, 61, 7, 2, 300);
  cr_assert_eq(fc_done_code(&fc, 61), 0);
  cr_assert_eq(fc_stats(&fc).launches, 4);
  fc_stop(&fc);
}

/* A CPU backend whose compile takes 400 ms, longer than the heartbeat
 * bound of the session below (20 ms x 5). */
static pw_backend_vtable_t fc_slow_vtable;
static pw_status_t (*fc_cpu_compile)(void*, const void*, size_t, const pw_mesh_shape_t*,
                                     const char*, pw_allocator_t, void**, size_t*);

static pw_status_t fc_slow_compile(void* self, const void* program, size_t size,
                                   const pw_mesh_shape_t* mesh, const char* options,
                                   pw_allocator_t allocator, void** out_bytes, size_t* out_size) {
  struct timespec ts = {0, 400000000L};
  nanosleep(&ts, NULL);
  return fc_cpu_compile(self, program, size, mesh, options, allocator, out_bytes, out_size);
}

/* A request slower than the bound keeps the session: the worker's
 * heartbeats go on meanwhile, and the controller's that queued behind the
 * request count as signs of life. */
Test(worker, slow_request_keeps_the_session) {
  pw_backend_t b = fc_cpu_backend(1);
  fc_slow_vtable = *b.vtable;
  fc_cpu_compile = b.vtable->compile;
  fc_slow_vtable.compile = fc_slow_compile;
  b.vtable = &fc_slow_vtable;
  fc_t fc;
  fc_listen(&fc);
  fc_start_worker(&fc, "secret", b, true);
  fc_msg_t m;
  fc_recv_hello(&fc, &m);
  fc_release(&m);
  fc_welcome(&fc, 3, 20000000ull, 5);
  fc_recv(&fc, PW_WIRE_ATTACH, &m);
  fc_release(&m);
  pw_wire_msg_t c = {.type = PW_WIRE_COMPILE};
  uint64_t dims[1] = {1};
  c.u[PW_WIRE_COMPILE_ID] = 20;
  c.blob[PW_WIRE_COMPILE_B_PROGRAM] = (pw_wire_blob_t){fc_add_program, strlen(fc_add_program)};
  c.list = dims;
  c.list_count = 1;
  fc_send(&fc, &c);
  /* Play the controller: a heartbeat every 10 ms until the REPLY. */
  nng_socket_set_ms(fc.pair, NNG_OPT_RECVTIMEO, 10);
  uint32_t heartbeats = 0;
  bool replied = false;
  for (int i = 0; i < 1000 && !replied; ++i) {
    pw_wire_msg_t hb = {.type = PW_WIRE_HEARTBEAT};
    fc_send(&fc, &hb);
    pw_status_t s = pw__wire_nng_recv(fc.pair, 0, 0, pw_allocator_system(), "worker", &m.raw,
                                      &m.msg);
    if (pw_status_code(s) == PW_STATUS_DEADLINE_EXCEEDED) {
      pw_status_free(s);
      continue;
    }
    cr_assert_null(s, "%s", pw_status_message(s));
    if (m.msg.type == PW_WIRE_HEARTBEAT) heartbeats++;
    if (m.msg.type == PW_WIRE_REPLY) {
      cr_assert_eq(m.msg.u[PW_WIRE_REPLY_CODE], 0);
      replied = true;
    }
    fc_release(&m);
  }
  nng_socket_set_ms(fc.pair, NNG_OPT_RECVTIMEO, FC_WAIT_MS);
  cr_assert(replied, "no REPLY to the slow COMPILE");
  cr_assert_geq(heartbeats, 5, "%u heartbeats during a 400 ms compile (period 20 ms)",
                heartbeats);
  pw_worker_stats_t st = fc_stats(&fc);
  cr_assert_eq(st.losses, 0, "the worker dropped the session during the compile");
  cr_assert_eq(st.sessions, 1);
  fc_alloc(&fc, 1, 0, 4);
  fc_write(&fc, 2, 1, 0, "abcd", 4, PW_STATUS_OK);
  fc_stop(&fc);
}

Test(worker, malformed_messages_are_counted_and_dropped) {
  fc_t fc;
  fc_session(&fc, 1);
  const uint8_t junk[] = {0x9f, 0x01, 0xff, 0x00, 0x42};
  nng_msg* raw = NULL;
  cr_assert_eq(nng_msg_alloc(&raw, sizeof(junk)), 0);
  memcpy(nng_msg_body(raw), junk, sizeof(junk));
  cr_assert_eq(nng_sendmsg(fc.pair, raw, 0), 0);
  /* A message a controller never sends on a session, and a bad LAUNCH. */
  pw_wire_msg_t hello = {.type = PW_WIRE_HELLO};
  fc_send(&fc, &hello);
  pw_wire_msg_t l = {.type = PW_WIRE_LAUNCH};
  l.u[PW_WIRE_LAUNCH_ID] = 9;
  l.u[PW_WIRE_LAUNCH_DEVICES] = 3;
  l.u[PW_WIRE_LAUNCH_GROUP] = 2;
  fc_send(&fc, &l);
  fc_msg_t d;
  fc_recv(&fc, PW_WIRE_DONE, &d);
  cr_assert_eq(d.msg.u[PW_WIRE_DONE_CODE], PW_STATUS_INVALID_ARGUMENT);
  fc_release(&d);
  fc_alloc(&fc, 1, 0, 4);
  fc_write(&fc, 2, 1, 0, "abcd", 4, PW_STATUS_OK);
  cr_assert_geq(fc_stats(&fc).refused, 3);
  fc_stop(&fc);
}

static bool fc_lost_once(const pw_worker_stats_t* s) { return s->losses >= 1; }

Test(worker, silent_controller_is_lost_and_worker_registers_again) {
  fc_t fc;
  fc_listen(&fc);
  fc_start_worker(&fc, NULL, fc_cpu_backend(1), true);
  fc_msg_t hello;
  fc_recv_hello(&fc, &hello);
  fc_release(&hello);
  fc_welcome(&fc, 1, 20000000ull, 3);
  fc_msg_t attach;
  fc_recv(&fc, PW_WIRE_ATTACH, &attach);
  fc_release(&attach);
  fc_alloc(&fc, 1, 0, 4);
  /* Say nothing: after 3 periods the worker gives up and says HELLO. */
  fc_recv_hello(&fc, &hello);
  fc_release(&hello);
  fc_wait_stats(&fc, fc_lost_once);
  cr_assert_eq(fc_stats(&fc).sessions, 1);
  fc_welcome(&fc, 1, 200000000ull, 50);
  fc_recv(&fc, PW_WIRE_ATTACH, &attach);
  fc_release(&attach);
  /* The old session's memory is gone. */
  fc_msg_t r;
  fc_read(&fc, 2, 1, 0, 4, PW_STATUS_NOT_FOUND, &r);
  fc_release(&r);
  fc_stop(&fc);
}

Test(worker, bye_ends_the_session) {
  fc_t fc;
  fc_session(&fc, 1);
  pw_wire_msg_t bye = {.type = PW_WIRE_BYE};
  bye.blob[PW_WIRE_REASON_B] = (pw_wire_blob_t){"controller stopping", 19};
  fc_send(&fc, &bye);
  fc_msg_t hello;
  fc_recv_hello(&fc, &hello);
  fc_release(&hello);
  fc_wait_stats(&fc, fc_lost_once);
  fc_refuse(&fc, "go away");
  fc_stop(&fc);
}

static void fc_copy(fc_t* fc, uint64_t id, uint64_t role, uint64_t src, uint64_t src_off,
                    uint64_t dst, uint64_t dst_off, uint64_t size, const uint64_t* strides,
                    uint32_t n) {
  pw_wire_msg_t c = {.type = PW_WIRE_COPY, .list = strides, .list_count = n};
  c.u[PW_WIRE_COPY_ID] = id;
  c.u[PW_WIRE_COPY_ROLE] = role;
  c.u[PW_WIRE_COPY_SRC_MEM] = src;
  c.u[PW_WIRE_COPY_SRC_OFFSET] = src_off;
  c.u[PW_WIRE_COPY_DST_MEM] = dst;
  c.u[PW_WIRE_COPY_DST_OFFSET] = dst_off;
  c.u[PW_WIRE_COPY_SIZE] = size;
  c.u[PW_WIRE_COPY_TAG] = id;
  fc_send(fc, &c);
}

static uint64_t fc_done_code(fc_t* fc, uint64_t id) {
  fc_msg_t d;
  fc_recv(fc, PW_WIRE_DONE, &d);
  cr_assert_eq(d.msg.u[PW_WIRE_DONE_ID], id);
  uint64_t code = d.msg.u[PW_WIRE_DONE_CODE];
  fc_release(&d);
  return code;
}

Test(worker, copy_local_with_strides) {
  fc_t fc;
  fc_session(&fc, 2);
  uint8_t src[32];
  for (uint32_t i = 0; i < sizeof(src); ++i) src[i] = (uint8_t)i;
  fc_alloc(&fc, 1, 0, 32);
  fc_alloc(&fc, 2, 1, 32);
  fc_write(&fc, 3, 1, 0, src, sizeof(src), PW_STATUS_OK);
  fc_write(&fc, 4, 2, 0, (uint8_t[32]){0}, 32, PW_STATUS_OK);
  /* 2 x 3 rows of 2 bytes: source rows 16 and 4 apart from offset 1,
   * destination rows 8 and 2 apart from offset 2. */
  const uint64_t strides[6] = {2, 16, 8, 3, 4, 2};
  fc_copy(&fc, 10, PW_WIRE_COPY_LOCAL, 1, 1, 2, 2, 2, strides, 6);
  cr_assert_eq(fc_done_code(&fc, 10), 0);
  fc_msg_t r;
  fc_read(&fc, 5, 2, 0, 32, PW_STATUS_OK, &r);
  uint8_t want[32] = {0};
  for (uint32_t i = 0; i < 2; ++i) {
    for (uint32_t j = 0; j < 3; ++j) {
      memcpy(&want[2 + i * 8 + j * 2], &src[1 + i * 16 + j * 4], 2);
    }
  }
  cr_assert(memcmp(r.msg.blob[PW_WIRE_REPLY_B_PAYLOAD].data, want, 32) == 0);
  fc_release(&r);
  /* Rows past the end, an unknown memory, a bad stride list. */
  fc_copy(&fc, 11, PW_WIRE_COPY_LOCAL, 1, 20, 2, 0, 2, strides, 6);
  cr_assert_eq(fc_done_code(&fc, 11), PW_STATUS_OUT_OF_RANGE);
  fc_copy(&fc, 12, PW_WIRE_COPY_LOCAL, 1, 0, 77, 0, 2, NULL, 0);
  cr_assert_eq(fc_done_code(&fc, 12), PW_STATUS_NOT_FOUND);
  fc_copy(&fc, 13, PW_WIRE_COPY_LOCAL, 1, 0, 2, 0, 2, strides, 4);
  cr_assert_eq(fc_done_code(&fc, 13), PW_STATUS_INVALID_ARGUMENT);
  /* No data plane: a remote copy is UNIMPLEMENTED, still answered. */
  fc_copy(&fc, 14, PW_WIRE_COPY_SEND, 1, 0, 0, 0, 8, NULL, 0);
  cr_assert_eq(fc_done_code(&fc, 14), PW_STATUS_UNIMPLEMENTED);
  cr_assert_eq(fc_stats(&fc).copies, 5);
  fc_stop(&fc);
}

Test(worker, closed_session_is_lost_at_once) {
  fc_t fc;
  fc_session(&fc, 1);
  /* Drop the worker's connection (closing the whole socket instead can
   * hang in nng 1.5.2's nng_close, nanomsg/nng#1543). */
  fc_msg_t hb;
  fc_recv(&fc, PW_WIRE_HEARTBEAT, &hb);
  nng_pipe pipe = nng_msg_get_pipe(hb.raw);
  fc_release(&hb);
  cr_assert_eq(nng_pipe_close(pipe), 0);
  fc_msg_t hello;
  fc_recv_hello(&fc, &hello);
  fc_release(&hello);
  fc_wait_stats(&fc, fc_lost_once);
  fc_refuse(&fc, "go away");
  fc_stop(&fc);
}

/* The sim backend has launch_host: a lane is one call, one DONE. */
Test(worker, host_launch_through_the_sim) {
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.devices_per_slice = 2;
  o.device_memory_bytes = 1u << 20;
  pw_backend_t sim;
  pw_status_t st = pw_sim_backend_create(&o, &sim);
  cr_assert_null(st, "%s", pw_status_message(st));
  fc_t fc;
  fc_session_backend(&fc, sim);
  static const char program[] =
      "op cp\nkind copy\ntime 1us\ninput f32[4] split(0,all)\noutput f32[4] split(0,all)\n";
  pw_wire_msg_t c = {.type = PW_WIRE_COMPILE};
  uint64_t dims[1] = {2};
  c.u[PW_WIRE_COMPILE_ID] = 1;
  c.blob[PW_WIRE_COMPILE_B_PROGRAM] = (pw_wire_blob_t){program, strlen(program)};
  c.list = dims;
  c.list_count = 1;
  fc_send(&fc, &c);
  fc_msg_t r;
  fc_recv(&fc, PW_WIRE_REPLY, &r);
  cr_assert_eq(r.msg.u[PW_WIRE_REPLY_CODE], 0);
  pw_wire_msg_t l = {.type = PW_WIRE_LOAD};
  l.u[PW_WIRE_LOAD_ID] = 2;
  l.u[PW_WIRE_LOAD_EXE] = 5;
  l.blob[PW_WIRE_LOAD_B_BYTES] = r.msg.blob[PW_WIRE_REPLY_B_PAYLOAD];
  fc_send(&fc, &l);
  fc_release(&r);
  fc_recv(&fc, PW_WIRE_REPLY, &r);
  cr_assert_eq(r.msg.u[PW_WIRE_REPLY_CODE], 0);
  fc_release(&r);
  float x[4] = {1.5f, -2, 3, 4.25f};
  for (uint32_t d = 0; d < 2; ++d) {
    fc_alloc(&fc, 10 + d, d, 8);
    fc_alloc(&fc, 20 + d, d, 8);
    fc_write(&fc, 3 + d, 10 + d, 0, &x[2 * d], 8, PW_STATUS_OK);
  }
  uint64_t list[2 + 2 * 2] = {0, 1, 10, 11, 20, 21};
  pw_wire_msg_t m = {.type = PW_WIRE_LAUNCH, .list = list, .list_count = 6};
  m.u[PW_WIRE_LAUNCH_ID] = 30;
  m.u[PW_WIRE_LAUNCH_EXE] = 5;
  m.u[PW_WIRE_LAUNCH_DEVICES] = 2;
  m.u[PW_WIRE_LAUNCH_GROUP] = 2;
  m.u[PW_WIRE_LAUNCH_GANG] = 1;
  m.u[PW_WIRE_LAUNCH_INPUTS] = 1;
  m.u[PW_WIRE_LAUNCH_OUTPUTS] = 1;
  fc_send(&fc, &m);
  cr_assert_eq(fc_done_code(&fc, 30), 0);
  for (uint32_t d = 0; d < 2; ++d) {
    fc_read(&fc, 40 + d, 20 + d, 0, 8, PW_STATUS_OK, &r);
    cr_assert(memcmp(r.msg.blob[PW_WIRE_REPLY_B_PAYLOAD].data, &x[2 * d], 8) == 0);
    fc_release(&r);
  }
  cr_assert_eq(fc_stats(&fc).launches, 1);
  fc_stop(&fc);
}

/* Enough ids to grow the table several times, half of them freed in
 * between: every survivor still holds its own bytes. */
Test(worker, many_memories_survive_frees) {
  fc_t fc;
  fc_session(&fc, 2);
  const uint64_t n = 600;
  for (uint64_t id = 1; id <= n; ++id) fc_alloc(&fc, id * 7919, (uint32_t)(id % 2), 8);
  for (uint64_t id = 1; id <= n; ++id) {
    uint64_t v = id * 31;
    fc_write(&fc, id, id * 7919, 0, &v, 8, PW_STATUS_OK);
  }
  for (uint64_t id = 1; id <= n; id += 2) {
    pw_wire_msg_t f = {.type = PW_WIRE_FREE};
    f.u[PW_WIRE_FREE_MEM] = id * 7919;
    fc_send(&fc, &f);
  }
  for (uint64_t id = 1; id <= n; ++id) {
    fc_msg_t r;
    bool freed = id % 2 == 1;
    fc_read(&fc, n + id, id * 7919, 0, 8, freed ? PW_STATUS_NOT_FOUND : PW_STATUS_OK, &r);
    if (!freed) {
      uint64_t v = id * 31;
      cr_assert(memcmp(r.msg.blob[PW_WIRE_REPLY_B_PAYLOAD].data, &v, 8) == 0, "memory %llu",
                (unsigned long long)(id * 7919));
    }
    fc_release(&r);
  }
  cr_assert_eq(fc_stats(&fc).refused, 0);
  fc_stop(&fc);
}
