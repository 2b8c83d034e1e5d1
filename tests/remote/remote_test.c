/* The controller's side of remote slices against a worker played by the
 * test with raw nng sockets: registration and its refusals, the session
 * nonce, the proxy backend's messages, completions, heartbeats and loss,
 * re-registration, hostile bytes. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <nng/nng.h>
#include <nng/protocol/pair0/pair.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pathways/remote.h"
#include "wire/wire_nng.h"

#define RT_MS 1000000LL
static const char kToken[] = "s3cret";

typedef struct rt_worker_s {
  nng_socket session;
  uint32_t index;
  uint8_t nonce[PW_WIRE_NONCE_SIZE];
  char url[256];
} rt_worker_t;

static pw_allocator_t rt_alloc(void) { return pw_allocator_system(); }

static pw_remote_t* rt_remote(pw_duration_t heartbeat, uint32_t misses) {
  pw_remote_options_t o;
  pw_remote_options_init(&o);
  o.token = kToken;
  o.token_size = strlen(kToken);
  /* 0: long enough that a test's fake worker needs no heartbeats. */
  o.heartbeat_ns = heartbeat ? heartbeat : 1000 * RT_MS;
  o.heartbeat_misses = misses ? misses : 10;
  o.call_timeout_ns = 2000 * RT_MS;
  o.logger = pw_logger_stderr(PW_LOG_OFF);
  pw_remote_t* r = NULL;
  pw_status_t s = pw_remote_create(&o, &r);
  cr_assert_null(s, "%s", pw_status_message(s));
  return r;
}

/* Sends a HELLO and returns the decoded reply (raw kept in *raw). */
static pw_wire_msg_t rt_hello(pw_remote_t* r, const char* token, const char* name,
                              uint32_t devices, nng_msg** raw) {
  nng_socket req;
  cr_assert_eq(nng_req0_open(&req), 0);
  nng_socket_set_ms(req, NNG_OPT_RECVTIMEO, 5000);
  cr_assert_eq(nng_dial(req, pw_remote_url(r), NULL, 0), 0);
  uint64_t mem[8];
  for (uint32_t i = 0; i < 8; ++i) mem[i] = 1u << 20;
  pw_wire_msg_t hello = {.type = PW_WIRE_HELLO, .list = mem, .list_count = devices};
  hello.u[PW_WIRE_HELLO_PID] = 4242;
  hello.u[PW_WIRE_HELLO_DEVICES] = devices;
  hello.u[PW_WIRE_HELLO_QUEUE_FLAGS] = PW_BACKEND_QUEUE_ORDERED;
  hello.u[PW_WIRE_HELLO_QUEUE_DEPTH] = 4;
  hello.u[PW_WIRE_HELLO_HOST_LAUNCH] = 1;
  hello.blob[PW_WIRE_HELLO_B_TOKEN] = (pw_wire_blob_t){token, strlen(token)};
  hello.blob[PW_WIRE_HELLO_B_NAME] = (pw_wire_blob_t){name, strlen(name)};
  hello.blob[PW_WIRE_HELLO_B_BACKEND] = (pw_wire_blob_t){"fake", 4};
  hello.blob[PW_WIRE_HELLO_B_KIND] = (pw_wire_blob_t){"fake-chip", 9};
  pw_status_t s = pw__wire_nng_send(req, &hello, 0, "controller");
  cr_assert_null(s, "%s", pw_status_message(s));
  pw_wire_msg_t reply;
  s = pw__wire_nng_recv(req, 0, 0, rt_alloc(), "controller", raw, &reply);
  cr_assert_null(s, "%s", pw_status_message(s));
  pw__wire_nng_close(req);
  return reply;
}

static void rt_send(rt_worker_t* w, const pw_wire_msg_t* msg) {
  pw_status_t s = pw__wire_nng_send(w->session, msg, 0, "controller");
  cr_assert_null(s, "%s", pw_status_message(s));
}

/* Receives the next message other than a HEARTBEAT. */
static pw_wire_msg_t rt_recv(rt_worker_t* w, nng_msg** raw) {
  for (;;) {
    pw_wire_msg_t msg;
    pw_status_t s = pw__wire_nng_recv(w->session, 0, 0, rt_alloc(), "controller", raw, &msg);
    cr_assert_null(s, "%s", pw_status_message(s));
    if (msg.type != PW_WIRE_HEARTBEAT) return msg;
    pw__wire_nng_release(*raw, &msg, rt_alloc());
  }
}

static void rt_heartbeat(rt_worker_t* w, uint32_t devices) {
  uint64_t health[8] = {0};
  pw_wire_msg_t hb = {.type = PW_WIRE_HEARTBEAT, .list = health, .list_count = devices};
  rt_send(w, &hb);
}

/* Registers and attaches a fake worker. */
static rt_worker_t rt_attach(pw_remote_t* r, const char* name, uint32_t devices) {
  rt_worker_t w;
  memset(&w, 0, sizeof(w));
  nng_msg* raw = NULL;
  pw_wire_msg_t reply = rt_hello(r, kToken, name, devices, &raw);
  cr_assert_eq(reply.type, PW_WIRE_WELCOME, "got %s", pw__wire_type_name(reply.type));
  w.index = (uint32_t)reply.u[PW_WIRE_WELCOME_INDEX];
  pw__wire_blob_text(&reply.blob[PW_WIRE_WELCOME_B_URL], w.url, sizeof(w.url));
  memcpy(w.nonce, reply.blob[PW_WIRE_WELCOME_B_NONCE].data, PW_WIRE_NONCE_SIZE);
  pw__wire_nng_release(raw, &reply, rt_alloc());
  cr_assert_eq(nng_pair0_open(&w.session), 0);
  nng_socket_set_ms(w.session, NNG_OPT_RECVTIMEO, 5000);
  cr_assert_eq(nng_dial(w.session, w.url, NULL, 0), 0);
  pw_wire_msg_t attach = {.type = PW_WIRE_ATTACH};
  attach.u[PW_WIRE_ATTACH_INDEX] = w.index;
  attach.blob[PW_WIRE_ATTACH_B_NONCE] = (pw_wire_blob_t){w.nonce, PW_WIRE_NONCE_SIZE};
  rt_send(&w, &attach);
  return w;
}

/* Closes a session socket after draining what it received (nng 1.5.2's
 * nng_close can hang on a socket with unread messages: docs/toolchain.md). */
static void rt_close(nng_socket s) { pw__wire_nng_close(s); }

static bool rt_attached(pw_remote_t* r, uint32_t index) {
  pw_remote_worker_info_t info = {.struct_size = sizeof(info)};
  pw_status_t s = pw_remote_worker_info(r, index, &info);
  cr_assert_null(s, "%s", pw_status_message(s));
  return info.attached;
}

static void rt_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

Test(remote, bad_token_is_refused_and_logged) {
  pw_remote_t* r = rt_remote(0, 0);
  nng_msg* raw = NULL;
  pw_wire_msg_t reply = rt_hello(r, "wrong", "w0", 2, &raw);
  cr_assert_eq(reply.type, PW_WIRE_REFUSE);
  char reason[256];
  pw__wire_blob_text(&reply.blob[PW_WIRE_REASON_B], reason, sizeof(reason));
  cr_assert_not_null(strstr(reason, "bad token"), "%s", reason);
  pw__wire_nng_release(raw, &reply, rt_alloc());
  cr_assert_eq(pw_remote_worker_count(r), 0);
  pw_remote_destroy(r);
}

Test(remote, garbage_registration_is_refused_and_the_controller_serves_on) {
  pw_remote_t* r = rt_remote(0, 0);
  nng_socket req;
  cr_assert_eq(nng_req0_open(&req), 0);
  nng_socket_set_ms(req, NNG_OPT_RECVTIMEO, 5000);
  cr_assert_eq(nng_dial(req, pw_remote_url(r), NULL, 0), 0);
  static const uint8_t junk[] = {0x9f, 0x01, 0x01, 0xff, 0x00};
  cr_assert_eq(nng_send(req, (void*)junk, sizeof(junk), 0), 0);
  nng_msg* raw = NULL;
  pw_wire_msg_t reply;
  pw_status_t s = pw__wire_nng_recv(req, PW_WIRE_REFUSE, 0, rt_alloc(), "controller", &raw, &reply);
  cr_assert_null(s, "%s", pw_status_message(s));
  char reason[256];
  pw__wire_blob_text(&reply.blob[PW_WIRE_REASON_B], reason, sizeof(reason));
  cr_assert_not_null(strstr(reason, "wire message"), "%s", reason);
  pw__wire_nng_release(raw, &reply, rt_alloc());
  pw__wire_nng_close(req);
  rt_worker_t w = rt_attach(r, "w0", 2);
  cr_assert_null(pw_remote_wait_workers(r, 1, 5000 * RT_MS));
  rt_close(w.session);
  pw_remote_destroy(r);
}

Test(remote, a_peer_without_the_nonce_cannot_attach) {
  pw_remote_t* r = rt_remote(0, 0);
  nng_msg* raw = NULL;
  pw_wire_msg_t reply = rt_hello(r, kToken, "w0", 2, &raw);
  cr_assert_eq(reply.type, PW_WIRE_WELCOME);
  char url[256];
  pw__wire_blob_text(&reply.blob[PW_WIRE_WELCOME_B_URL], url, sizeof(url));
  pw__wire_nng_release(raw, &reply, rt_alloc());
  nng_socket intruder;
  cr_assert_eq(nng_pair0_open(&intruder), 0);
  cr_assert_eq(nng_dial(intruder, url, NULL, 0), 0);
  uint8_t zeros[PW_WIRE_NONCE_SIZE] = {0};
  pw_wire_msg_t attach = {.type = PW_WIRE_ATTACH};
  attach.blob[PW_WIRE_ATTACH_B_NONCE] = (pw_wire_blob_t){zeros, sizeof(zeros)};
  cr_assert_null(pw__wire_nng_send(intruder, &attach, 0, "controller"));
  pw_status_t s = pw_remote_wait_workers(r, 1, 300 * RT_MS);
  cr_assert_eq(pw_status_code(s), PW_STATUS_DEADLINE_EXCEEDED);
  cr_assert_not_null(strstr(pw_status_message(s), "0 of 1"), "%s", pw_status_message(s));
  pw_status_free(s);
  cr_assert_not(rt_attached(r, 0));
  rt_close(intruder);
  pw_remote_destroy(r);
}

typedef struct rt_done_s {
  atomic_int calls;
  _Atomic pw_status_code_t code;
  char message[256];
} rt_done_t;

static void rt_on_done(void* user, pw_status_t status, const pw_backend_timing_t* timing) {
  rt_done_t* d = user;
  (void)timing;
  atomic_store(&d->code, pw_status_code(status));
  if (status) snprintf(d->message, sizeof(d->message), "%s", pw_status_message(status));
  pw_status_free(status);
  atomic_fetch_add(&d->calls, 1);
}

static void rt_on_done_plain(void* user, pw_status_t status) { rt_on_done(user, status, NULL); }

static void rt_wait_calls(rt_done_t* d, int n) {
  for (int i = 0; i < 500 && atomic_load(&d->calls) < n; ++i) rt_sleep_ms(10);
  cr_assert_eq(atomic_load(&d->calls), n);
}

/* A proxy with one attached fake worker of 2 devices. */
typedef struct rt_fixture_s {
  pw_remote_t* remote;
  rt_worker_t worker;
  pw_backend_t proxy;
} rt_fixture_t;

static rt_fixture_t rt_setup(pw_duration_t heartbeat, uint32_t misses) {
  rt_fixture_t f;
  f.remote = rt_remote(heartbeat, misses);
  f.worker = rt_attach(f.remote, "w0", 2);
  pw_status_t s = pw_remote_wait_workers(f.remote, 1, 5000 * RT_MS);
  cr_assert_null(s, "%s", pw_status_message(s));
  s = pw_remote_backend(f.remote, 0, &f.proxy);
  cr_assert_null(s, "%s", pw_status_message(s));
  return f;
}

/* Loads a fake executable: answers the LOAD with a one-input signature. */
typedef struct rt_loader_s {
  rt_worker_t* worker;
} rt_loader_t;

static void* rt_answer_load(void* arg) {
  rt_worker_t* w = arg;
  nng_msg* raw = NULL;
  pw_wire_msg_t load = rt_recv(w, &raw);
  cr_assert_eq(load.type, PW_WIRE_LOAD);
  /* mesh 1-D of 2; 1 input f32[4] P(0) (tiled: one tile, 0 over 0, no
   * unreduced axes); 1 output f32[4] split(0,0) (no tiles). */
  uint64_t sig[] = {1, 2, 1, 1, PW_DTYPE_F32, 1, 4, PW_SHARDING_TILED, 0, 0, 1, 0, 0, 0,
                    PW_DTYPE_F32, 1, 4, PW_SHARDING_SPLIT, 0, 0, 0, 0};
  pw_wire_msg_t reply = {.type = PW_WIRE_REPLY, .list = sig, .list_count = 22};
  reply.u[PW_WIRE_REPLY_ID] = load.u[PW_WIRE_LOAD_ID];
  reply.blob[PW_WIRE_REPLY_B_PAYLOAD] = (pw_wire_blob_t){"fake_kernel", 11};
  rt_send(w, &reply);
  pw__wire_nng_release(raw, &load, rt_alloc());
  return NULL;
}

static pw_backend_executable_t rt_load(rt_fixture_t* f) {
  pthread_t t;
  pthread_create(&t, NULL, rt_answer_load, &f->worker);
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(sig)};
  pw_status_t s = f->proxy.vtable->load(f->proxy.self, "x", 1, &exe, &sig);
  pthread_join(t, NULL);
  cr_assert_null(s, "%s", pw_status_message(s));
  cr_assert_str_eq(sig.name, "fake_kernel");
  cr_assert_eq(sig.mesh.rank, 1);
  cr_assert_eq(sig.mesh.dims[0], 2);
  cr_assert_eq(sig.input_count, 1);
  cr_assert_eq(sig.inputs[0].shape.dims[0], 4);
  cr_assert_eq(sig.outputs[0].sharding.kind, PW_SHARDING_SPLIT);
  cr_assert_eq(sig.inputs[0].sharding.kind, PW_SHARDING_TILED);
  cr_assert_eq(sig.inputs[0].sharding.tile_count, 1);
  cr_assert_eq(sig.inputs[0].sharding.unreduced_axes, 0);
  return exe;
}

static pw_backend_memory_t rt_alloc_mem(rt_fixture_t* f, uint32_t device, uint64_t* out_id) {
  pw_backend_memory_t mem = NULL;
  pw_status_t s = f->proxy.vtable->allocate(f->proxy.self, device, 8, &mem);
  cr_assert_null(s, "%s", pw_status_message(s));
  nng_msg* raw = NULL;
  pw_wire_msg_t msg = rt_recv(&f->worker, &raw);
  cr_assert_eq(msg.type, PW_WIRE_ALLOC);
  cr_assert_eq(msg.u[PW_WIRE_ALLOC_DEVICE], device);
  cr_assert_eq(msg.u[PW_WIRE_ALLOC_SIZE], 8);
  *out_id = msg.u[PW_WIRE_ALLOC_MEM];
  pw__wire_nng_release(raw, &msg, rt_alloc());
  return mem;
}

Test(remote, a_host_launch_is_one_message_and_its_done_completes_it_once) {
  rt_fixture_t f = rt_setup(0, 0);
  pw_backend_device_info_t info = {.struct_size = sizeof(info)};
  cr_assert_null(f.proxy.vtable->device_info(f.proxy.self, 1, &info));
  cr_assert_eq(info.host, 1);
  cr_assert_str_eq(info.kind, "fake-chip");
  pw_backend_queue_info_t q = {.struct_size = sizeof(q)};
  cr_assert_null(f.proxy.vtable->queue_info(f.proxy.self, 0, &q));
  cr_assert_eq(q.flags, PW_BACKEND_QUEUE_ORDERED);
  cr_assert_eq(q.depth, 4);
  pw_backend_executable_t exe = rt_load(&f);
  uint64_t ids[4];
  pw_backend_memory_t in0 = rt_alloc_mem(&f, 0, &ids[0]);
  pw_backend_memory_t in1 = rt_alloc_mem(&f, 1, &ids[1]);
  pw_backend_memory_t out0 = rt_alloc_mem(&f, 0, &ids[2]);
  pw_backend_memory_t out1 = rt_alloc_mem(&f, 1, &ids[3]);
  uint32_t group[2] = {0, 1};
  pw_backend_memory_t ins[2] = {in0, in1}, outs[2] = {out0, out1};
  const pw_backend_memory_t* in_lanes[1] = {ins};
  const pw_backend_memory_t* out_lanes[1] = {outs};
  rt_done_t d = {0};
  pw_backend_host_launch_t l = {.struct_size = sizeof(l), .executable = exe, .host = 1,
                                .mesh_start = 0, .device_count = 2, .group_devices = group,
                                .group_size = 2, .gang_id = 77, .inputs = in_lanes,
                                .input_count = 1, .outputs = out_lanes, .output_count = 1,
                                .queue_seq = 3, .done = rt_on_done_plain,
                                .done_timed = rt_on_done, .done_user = &d};
  pw_status_t s = f.proxy.vtable->launch_host(f.proxy.self, &l);
  cr_assert_null(s, "%s", pw_status_message(s));
  nng_msg* raw = NULL;
  pw_wire_msg_t msg = rt_recv(&f.worker, &raw);
  cr_assert_eq(msg.type, PW_WIRE_LAUNCH);
  cr_assert_eq(msg.u[PW_WIRE_LAUNCH_DEVICES], 2);
  cr_assert_eq(msg.u[PW_WIRE_LAUNCH_GANG], 77);
  cr_assert_eq(msg.u[PW_WIRE_LAUNCH_QUEUE_SEQ], 3);
  cr_assert_eq(msg.list_count, 6);
  uint64_t want[6] = {0, 1, ids[0], ids[1], ids[2], ids[3]};
  for (int i = 0; i < 6; ++i) cr_assert_eq(msg.list[i], want[i], "list[%d]", i);
  uint64_t launch_id = msg.u[PW_WIRE_LAUNCH_ID];
  pw__wire_nng_release(raw, &msg, rt_alloc());
  cr_assert_eq(atomic_load(&d.calls), 0);
  pw_wire_msg_t done = {.type = PW_WIRE_DONE};
  done.u[PW_WIRE_DONE_ID] = launch_id;
  done.u[PW_WIRE_DONE_START_NS] = 10;
  done.u[PW_WIRE_DONE_END_NS] = 20;
  rt_send(&f.worker, &done);
  rt_send(&f.worker, &done); /* a duplicate is ignored */
  rt_wait_calls(&d, 1);
  rt_sleep_ms(50);
  cr_assert_eq(atomic_load(&d.calls), 1);
  cr_assert_eq(atomic_load(&d.code), PW_STATUS_OK);
  /* A refused launch: memory of another proxy is not accepted silently. */
  f.proxy.vtable->deallocate(f.proxy.self, 0, in0);
  f.proxy.vtable->deallocate(f.proxy.self, 1, in1);
  f.proxy.vtable->deallocate(f.proxy.self, 0, out0);
  f.proxy.vtable->deallocate(f.proxy.self, 1, out1);
  for (int i = 0; i < 4; ++i) {
    pw_wire_msg_t m = rt_recv(&f.worker, &raw);
    cr_assert_eq(m.type, PW_WIRE_FREE);
    cr_assert_eq(m.u[PW_WIRE_FREE_MEM], ids[i]);
    pw__wire_nng_release(raw, &m, rt_alloc());
  }
  f.proxy.vtable->unload(f.proxy.self, exe);
  rt_close(f.worker.session);
  pw_remote_destroy(f.remote);
}

/* Each completion of the first round launches one more op, from the
 * controller's reader thread (as the runtime's dispatch does). */
typedef struct rt_chain_s {
  pw_backend_t proxy;
  pw_backend_executable_t exe;
  pw_backend_memory_t in, out;
  uint32_t group[2];
  atomic_int first_done, second_done;
  atomic_int refused;
} rt_chain_t;

static void rt_chain_second(void* user, pw_status_t status) {
  rt_chain_t* c = user;
  pw_status_free(status);
  atomic_fetch_add(&c->second_done, 1);
}

static pw_status_t rt_chain_launch(rt_chain_t* c, pw_backend_done_fn_t done) {
  pw_backend_launch_t l = {.struct_size = sizeof(l), .executable = c->exe, .device = 0,
                           .mesh_index = 0, .group_devices = c->group, .group_size = 2,
                           .inputs = &c->in, .input_count = 1, .outputs = &c->out,
                           .output_count = 1, .done = done, .done_user = c};
  return c->proxy.vtable->launch(c->proxy.self, &l);
}

static void rt_chain_first(void* user, pw_status_t status) {
  rt_chain_t* c = user;
  pw_status_free(status);
  pw_status_t s = rt_chain_launch(c, rt_chain_second);
  if (s != NULL) atomic_fetch_add(&c->refused, 1);
  pw_status_free(s);
  atomic_fetch_add(&c->first_done, 1);
}

/* Appends |msg|'s encoding to |frame|. */
static void rt_frame_add(nng_msg* frame, const pw_wire_msg_t* msg) {
  size_t n = pw__wire_measure(msg);
  uint8_t buf[512];
  cr_assert(n > 0 && n <= sizeof(buf));
  cr_assert_eq(pw__wire_write(msg, buf, sizeof(buf)), n);
  cr_assert_eq(nng_msg_append(frame, buf, n), 0);
}

/* Receives one frame and decodes every message in it (HEARTBEATs left
 * out) into |out| (up to |cap|); returns how many. */
static int rt_recv_frame(rt_worker_t* w, pw_wire_msg_t* out, int cap) {
  for (;;) {
    nng_msg* raw = NULL;
    cr_assert_eq(nng_recvmsg(w->session, &raw, 0), 0);
    size_t offset = 0, size = nng_msg_len(raw);
    int n = 0;
    while (offset < size) {
      pw_wire_msg_t m;
      pw_status_t s = pw__wire_decode_next(nng_msg_body(raw), size, &offset, 0, rt_alloc(), &m);
      cr_assert_null(s, "%s", pw_status_message(s));
      if (m.type != PW_WIRE_HEARTBEAT && n < cap) {
        out[n++] = m; /* no blobs are read: the frame can go */
      } else {
        pw__wire_msg_release(&m, rt_alloc());
      }
    }
    nng_msg_free(raw);
    if (n > 0) return n;
  }
}

Test(remote, a_frame_of_completions_releases_its_launches_in_one_frame) {
  rt_fixture_t f = rt_setup(0, 0);
  static rt_chain_t c;
  memset(&c, 0, sizeof(c));
  c.proxy = f.proxy;
  c.exe = rt_load(&f);
  uint64_t in_id, out_id;
  c.in = rt_alloc_mem(&f, 0, &in_id);
  c.out = rt_alloc_mem(&f, 0, &out_id);
  c.group[0] = 0;
  c.group[1] = 1;
  enum { kOps = 5 };
  uint64_t first_ids[kOps];
  for (int i = 0; i < kOps; ++i) {
    pw_status_t s = rt_chain_launch(&c, rt_chain_first);
    cr_assert_null(s, "%s", pw_status_message(s));
    /* Sent from this (uncorked) thread: one frame each. */
    pw_wire_msg_t m[4];
    cr_assert_eq(rt_recv_frame(&f.worker, m, 4), 1);
    cr_assert_eq(m[0].type, PW_WIRE_LAUNCH);
    first_ids[i] = m[0].u[PW_WIRE_LAUNCH_ID];
    pw__wire_msg_release(&m[0], rt_alloc());
  }
  pw_remote_worker_info_t before = {.struct_size = sizeof(before)};
  cr_assert_null(pw_remote_worker_info(f.remote, 0, &before));
  /* One frame: the five DONEs, a malformed message and a stray DONE. */
  nng_msg* frame = NULL;
  cr_assert_eq(nng_msg_alloc(&frame, 0), 0);
  for (int i = 0; i < kOps; ++i) {
    pw_wire_msg_t done = {.type = PW_WIRE_DONE};
    done.u[PW_WIRE_DONE_ID] = first_ids[i];
    rt_frame_add(frame, &done);
    if (i == 2) {
      static const uint8_t wrong_shape[] = {0x82, (uint8_t)PW_WIRE_VERSION, 0x10};
      cr_assert_eq(nng_msg_append(frame, wrong_shape, sizeof(wrong_shape)), 0);
    }
  }
  pw_wire_msg_t stray = {.type = PW_WIRE_DONE};
  stray.u[PW_WIRE_DONE_ID] = 987654;
  rt_frame_add(frame, &stray);
  cr_assert_eq(nng_sendmsg(f.worker.session, frame, 0), 0);
  /* The five launches the completions released arrive in one frame. */
  pw_wire_msg_t m[8];
  int got = rt_recv_frame(&f.worker, m, 8);
  cr_assert_eq(got, kOps, "the released launches came in frames of %d", got);
  uint64_t second_ids[kOps];
  for (int i = 0; i < got; ++i) {
    cr_assert_eq(m[i].type, PW_WIRE_LAUNCH);
    second_ids[i] = m[i].u[PW_WIRE_LAUNCH_ID];
    pw__wire_msg_release(&m[i], rt_alloc());
  }
  cr_assert_eq(atomic_load(&c.first_done), kOps);
  cr_assert_eq(atomic_load(&c.refused), 0);
  /* The sender counts a frame once nng took it: maybe after it arrived. */
  pw_remote_worker_info_t after = {.struct_size = sizeof(after)};
  for (int i = 0; i < 500; ++i) {
    cr_assert_null(pw_remote_worker_info(f.remote, 0, &after));
    if (after.frames_sent > before.frames_sent) break;
    rt_sleep_ms(10);
  }
  cr_assert_eq(after.frames_received - before.frames_received, 1);
  cr_assert_eq(after.messages_received - before.messages_received, kOps + 1,
               "the malformed message is not counted, the stray DONE is");
  cr_assert_eq(after.frames_sent - before.frames_sent, 1);
  cr_assert_eq(after.messages_sent - before.messages_sent, kOps);
  /* Their DONEs one per frame: each completes once. */
  for (int i = 0; i < kOps; ++i) {
    pw_wire_msg_t done = {.type = PW_WIRE_DONE};
    done.u[PW_WIRE_DONE_ID] = second_ids[i];
    rt_send(&f.worker, &done);
  }
  for (int i = 0; i < 500 && atomic_load(&c.second_done) < kOps; ++i) rt_sleep_ms(10);
  cr_assert_eq(atomic_load(&c.second_done), kOps);
  cr_assert(rt_attached(f.remote, 0));
  f.proxy.vtable->deallocate(f.proxy.self, 0, c.in);
  f.proxy.vtable->deallocate(f.proxy.self, 0, c.out);
  f.proxy.vtable->unload(f.proxy.self, c.exe);
  rt_close(f.worker.session);
  pw_remote_destroy(f.remote);
}

static void* rt_answer_read(void* arg) {
  rt_worker_t* w = arg;
  nng_msg* raw = NULL;
  pw_wire_msg_t read = rt_recv(w, &raw);
  cr_assert_eq(read.type, PW_WIRE_READ);
  cr_assert_eq(read.u[PW_WIRE_READ_SIZE], 8);
  pw_wire_msg_t reply = {.type = PW_WIRE_REPLY};
  reply.u[PW_WIRE_REPLY_ID] = read.u[PW_WIRE_READ_ID];
  reply.blob[PW_WIRE_REPLY_B_PAYLOAD] = (pw_wire_blob_t){"ABCDEFGH", 8};
  rt_send(w, &reply);
  pw__wire_nng_release(raw, &read, rt_alloc());
  /* The second read gets an error reply. */
  read = rt_recv(w, &raw);
  reply.u[PW_WIRE_REPLY_ID] = read.u[PW_WIRE_READ_ID];
  reply.u[PW_WIRE_REPLY_CODE] = PW_STATUS_NOT_FOUND;
  reply.blob[PW_WIRE_REPLY_B_PAYLOAD] = (pw_wire_blob_t){NULL, 0};
  reply.blob[PW_WIRE_REPLY_B_MESSAGE] = (pw_wire_blob_t){"memory 9 unknown", 16};
  rt_send(w, &reply);
  pw__wire_nng_release(raw, &read, rt_alloc());
  return NULL;
}

Test(remote, host_reads_are_requests_and_their_errors_name_the_worker) {
  rt_fixture_t f = rt_setup(0, 0);
  uint64_t id;
  pw_backend_memory_t mem = rt_alloc_mem(&f, 0, &id);
  pthread_t t;
  pthread_create(&t, NULL, rt_answer_read, &f.worker);
  char buf[8];
  pw_status_t s = f.proxy.vtable->copy_to_host(f.proxy.self, 0, mem, 0, buf, 8);
  cr_assert_null(s, "%s", pw_status_message(s));
  cr_assert_eq(memcmp(buf, "ABCDEFGH", 8), 0);
  s = f.proxy.vtable->copy_to_host(f.proxy.self, 0, mem, 0, buf, 8);
  pthread_join(t, NULL);
  cr_assert_eq(pw_status_code(s), PW_STATUS_NOT_FOUND);
  cr_assert_not_null(strstr(pw_status_message(s), "worker w0: memory 9 unknown"), "%s",
                     pw_status_message(s));
  pw_status_free(s);
  s = f.proxy.vtable->copy_to_host(f.proxy.self, 0, mem, 4, buf, 8);
  cr_assert_eq(pw_status_code(s), PW_STATUS_OUT_OF_RANGE);
  pw_status_free(s);
  f.proxy.vtable->deallocate(f.proxy.self, 0, mem);
  rt_close(f.worker.session);
  pw_remote_destroy(f.remote);
}

/* Launches one op on device 0 (no reply is sent by the test). */
static void rt_launch_one(rt_fixture_t* f, pw_backend_executable_t exe, pw_backend_memory_t in,
                          pw_backend_memory_t out, rt_done_t* d) {
  uint32_t group[2] = {0, 1};
  pw_backend_launch_t l = {.struct_size = sizeof(l), .executable = exe, .device = 0,
                           .mesh_index = 0, .group_devices = group, .group_size = 2,
                           .gang_id = 1, .inputs = &in, .input_count = 1, .outputs = &out,
                           .output_count = 1, .done = rt_on_done_plain, .done_user = d,
                           .done_timed = rt_on_done};
  pw_status_t s = f->proxy.vtable->launch(f->proxy.self, &l);
  cr_assert_null(s, "%s", pw_status_message(s));
}

Test(remote, a_silent_worker_is_lost_within_the_bound_and_its_launches_fail_unavailable) {
  rt_fixture_t f = rt_setup(20 * RT_MS, 5);
  rt_heartbeat(&f.worker, 2);
  pw_backend_executable_t exe = rt_load(&f);
  uint64_t a, b;
  pw_backend_memory_t in = rt_alloc_mem(&f, 0, &a);
  pw_backend_memory_t out = rt_alloc_mem(&f, 0, &b);
  rt_done_t d = {0};
  rt_launch_one(&f, exe, in, out, &d);
  cr_assert_eq(f.proxy.vtable->health(f.proxy.self, 0), PW_DEVICE_HEALTHY);
  /* Silence: no heartbeat from the test. */
  rt_wait_calls(&d, 1);
  cr_assert_eq(atomic_load(&d.code), PW_STATUS_UNAVAILABLE);
  cr_assert_not_null(strstr(d.message, "worker w0 lost: no message"), "%s", d.message);
  cr_assert_eq(f.proxy.vtable->health(f.proxy.self, 0), PW_DEVICE_FAILED);
  cr_assert_not(rt_attached(f.remote, 0));
  /* New work is refused at once, with a typed status. */
  pw_backend_memory_t m = NULL;
  pw_status_t s = f.proxy.vtable->allocate(f.proxy.self, 0, 8, &m);
  cr_assert_eq(pw_status_code(s), PW_STATUS_UNAVAILABLE);
  pw_status_free(s);
  /* The worker registers again under its name: same index, healthy. */
  rt_close(f.worker.session);
  rt_worker_t again = rt_attach(f.remote, "w0", 2);
  cr_assert_eq(again.index, 0);
  s = pw_remote_wait_workers(f.remote, 1, 5000 * RT_MS);
  cr_assert_null(s, "%s", pw_status_message(s));
  rt_heartbeat(&again, 2);
  cr_assert_eq(f.proxy.vtable->health(f.proxy.self, 0), PW_DEVICE_HEALTHY);
  pw_remote_worker_info_t info = {.struct_size = sizeof(info)};
  cr_assert_null(pw_remote_worker_info(f.remote, 0, &info));
  cr_assert_eq(info.sessions, 2);
  cr_assert_eq(info.losses, 1);
  /* Memory of the first session stays lost. */
  rt_done_t d2 = {0};
  uint32_t group[2] = {0, 1};
  pw_backend_launch_t l = {.struct_size = sizeof(l), .executable = exe, .group_devices = group,
                           .group_size = 2, .inputs = &in, .input_count = 1, .outputs = &out,
                           .output_count = 1, .done = rt_on_done_plain, .done_user = &d2};
  s = f.proxy.vtable->launch(f.proxy.self, &l);
  cr_assert_eq(pw_status_code(s), PW_STATUS_UNAVAILABLE);
  pw_status_free(s);
  cr_assert_eq(atomic_load(&d2.calls), 0);
  f.proxy.vtable->deallocate(f.proxy.self, 0, in);
  f.proxy.vtable->deallocate(f.proxy.self, 0, out);
  f.proxy.vtable->unload(f.proxy.self, exe);
  rt_close(again.session);
  pw_remote_destroy(f.remote);
}

Test(remote, a_closed_connection_is_lost_at_once) {
  rt_fixture_t f = rt_setup(1000 * RT_MS, 30); /* silence alone would take 30 s */
  pw_backend_executable_t exe = rt_load(&f);
  uint64_t a, b;
  pw_backend_memory_t in = rt_alloc_mem(&f, 0, &a);
  pw_backend_memory_t out = rt_alloc_mem(&f, 0, &b);
  rt_done_t d = {0};
  rt_launch_one(&f, exe, in, out, &d);
  rt_close(f.worker.session);
  rt_wait_calls(&d, 1); /* within 5 s, far below the silence bound */
  cr_assert_eq(atomic_load(&d.code), PW_STATUS_UNAVAILABLE);
  cr_assert_not_null(strstr(d.message, "connection closed"), "%s", d.message);
  f.proxy.vtable->deallocate(f.proxy.self, 0, in);
  f.proxy.vtable->deallocate(f.proxy.self, 0, out);
  f.proxy.vtable->unload(f.proxy.self, exe);
  pw_remote_destroy(f.remote);
}

Test(remote, malformed_session_messages_are_dropped_and_the_session_lives) {
  rt_fixture_t f = rt_setup(0, 0);
  static const uint8_t junk[] = {0x83, 0x01, 0x10, 0x61};
  cr_assert_eq(nng_send(f.worker.session, (void*)junk, sizeof(junk), 0), 0);
  pw_wire_msg_t stray = {.type = PW_WIRE_DONE};
  stray.u[PW_WIRE_DONE_ID] = 123456;
  rt_send(&f.worker, &stray);
  rt_sleep_ms(100);
  cr_assert(rt_attached(f.remote, 0));
  pw_backend_executable_t exe = rt_load(&f); /* still serves requests */
  f.proxy.vtable->unload(f.proxy.self, exe);
  rt_close(f.worker.session);
  pw_remote_destroy(f.remote);
}

/* A launch's node argument (pw_graph_set_node_arg) travels in its
 * LAUNCH, for a single-device launch and a lane alike. */
Test(remote, node_arguments_travel_in_the_launch) {
  rt_fixture_t f = rt_setup(0, 0);
  pw_backend_executable_t exe = rt_load(&f);
  uint64_t a, b;
  pw_backend_memory_t in = rt_alloc_mem(&f, 0, &a);
  pw_backend_memory_t out = rt_alloc_mem(&f, 0, &b);
  uint32_t group[2] = {0, 1};
  rt_done_t d = {0};
  pw_backend_launch_t l = {.struct_size = sizeof(l), .executable = exe, .device = 0,
                           .mesh_index = 0, .group_devices = group, .group_size = 2,
                           .gang_id = 1, .inputs = &in, .input_count = 1, .outputs = &out,
                           .output_count = 1, .done = rt_on_done_plain, .done_user = &d,
                           .done_timed = rt_on_done, .node_arg = 9};
  pw_status_t s = f.proxy.vtable->launch(f.proxy.self, &l);
  cr_assert_null(s, "%s", pw_status_message(s));
  const pw_backend_memory_t* ins[1] = {&in};
  const pw_backend_memory_t* outs[1] = {&out};
  pw_backend_host_launch_t h = {.struct_size = sizeof(h), .executable = exe, .host = 1,
                                .mesh_start = 0, .device_count = 1, .group_devices = group,
                                .group_size = 2, .gang_id = 2, .inputs = ins, .input_count = 1,
                                .outputs = outs, .output_count = 1, .done = rt_on_done_plain,
                                .done_timed = rt_on_done, .done_user = &d,
                                .node_arg = UINT64_MAX};
  s = f.proxy.vtable->launch_host(f.proxy.self, &h);
  cr_assert_null(s, "%s", pw_status_message(s));
  /* An older launch struct (v2) has none: 0. */
  pw_backend_launch_t old = l;
  old.struct_size = PW_BACKEND_LAUNCH_SIZE_V2;
  s = f.proxy.vtable->launch(f.proxy.self, &old);
  cr_assert_null(s, "%s", pw_status_message(s));
  uint64_t want[3] = {9, UINT64_MAX, 0};
  for (int i = 0; i < 3; ++i) {
    nng_msg* raw = NULL;
    pw_wire_msg_t m = rt_recv(&f.worker, &raw);
    cr_assert_eq(m.type, PW_WIRE_LAUNCH);
    cr_assert_eq(m.u[PW_WIRE_LAUNCH_NODE_ARG], want[i], "launch %d: %llu", i,
                 (unsigned long long)m.u[PW_WIRE_LAUNCH_NODE_ARG]);
    pw_wire_msg_t done = {.type = PW_WIRE_DONE};
    done.u[PW_WIRE_DONE_ID] = m.u[PW_WIRE_LAUNCH_ID];
    pw__wire_nng_release(raw, &m, rt_alloc());
    rt_send(&f.worker, &done);
  }
  rt_wait_calls(&d, 3);
  f.proxy.vtable->deallocate(f.proxy.self, 0, in);
  f.proxy.vtable->deallocate(f.proxy.self, 0, out);
  f.proxy.vtable->unload(f.proxy.self, exe);
  rt_close(f.worker.session);
  pw_remote_destroy(f.remote);
}

Test(remote, bad_calls_get_clear_statuses) {
  pw_remote_t* r = NULL;
  pw_status_t s = pw_remote_create(NULL, &r);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  pw_remote_options_t o;
  pw_remote_options_init(&o);
  o.listen_url = "udp://nowhere";
  s = pw_remote_create(&o, &r);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(pw_status_message(s), "tcp://HOST:PORT"));
  pw_status_free(s);
  r = rt_remote(0, 0);
  pw_backend_t b;
  s = pw_remote_backend(r, 3, &b);
  cr_assert_eq(pw_status_code(s), PW_STATUS_NOT_FOUND);
  pw_status_free(s);
  pw_remote_worker_info_t info = {.struct_size = 4};
  s = pw_remote_worker_info(r, 0, &info);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  s = pw_remote_wait_workers(r, 1, 10 * RT_MS);
  cr_assert_eq(pw_status_code(s), PW_STATUS_DEADLINE_EXCEEDED);
  pw_status_free(s);
  pw_remote_destroy(r);
  pw_remote_destroy(NULL);
}
