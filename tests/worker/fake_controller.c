/* The fake controller of the worker tests (see fake_controller.h). */
#include "fake_controller.h"

#include <criterion/criterion.h>
#include <nng/protocol/pair0/pair.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/supplemental/util/platform.h>
#include <stdio.h>
#include <string.h>

static pw_allocator_t fc_alloc_sys(void) { return pw_allocator_system(); }

static void fc_listen_one(nng_socket sock, char* url, size_t cap) {
  nng_listener l;
  cr_assert_eq(nng_listen(sock, "tcp://127.0.0.1:0", &l, 0), 0);
  int port = 0;
  cr_assert_eq(nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &port), 0);
  snprintf(url, cap, "tcp://127.0.0.1:%d", port);
}

void fc_listen(fc_t* fc) {
  memset(fc, 0, sizeof(*fc));
  cr_assert_eq(nng_rep0_open(&fc->rep), 0);
  cr_assert_eq(nng_pair0_open(&fc->pair), 0);
  pw_status_ignore(pw__wire_nng_limit(fc->rep));
  pw_status_ignore(pw__wire_nng_limit(fc->pair));
  nng_socket_set_ms(fc->rep, NNG_OPT_RECVTIMEO, FC_WAIT_MS);
  nng_socket_set_ms(fc->pair, NNG_OPT_RECVTIMEO, FC_WAIT_MS);
  nng_socket_set_ms(fc->rep, NNG_OPT_SENDTIMEO, FC_WAIT_MS);
  nng_socket_set_ms(fc->pair, NNG_OPT_SENDTIMEO, FC_WAIT_MS);
  fc_listen_one(fc->rep, fc->reg_url, sizeof(fc->reg_url));
  fc_listen_one(fc->pair, fc->session_url, sizeof(fc->session_url));
  for (uint32_t i = 0; i < PW_WIRE_NONCE_SIZE; ++i) fc->nonce[i] = (uint8_t)(0xA0 + i * 7);
}

pw_backend_t fc_cpu_backend(uint32_t devices) {
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = devices;
  o.device_memory_bytes = 1u << 20;
  o.stream_depth = 8;
  pw_backend_t b;
  pw_status_t s = pw_cpu_backend_create(&o, &b);
  cr_assert_null(s, "%s", pw_status_message(s));
  return b;
}

static void* fc_run(void* arg) {
  fc_t* fc = arg;
  fc->run_status = pw_worker_run(fc->worker);
  return NULL;
}

void fc_start_worker(fc_t* fc, const char* token, pw_backend_t backend, bool no_data_plane) {
  pw_worker_options_t o;
  pw_worker_options_init(&o);
  o.controller_url = fc->reg_url;
  o.token = token;
  o.token_size = token ? strlen(token) : 0;
  o.name = "w-test";
  o.backend = backend;
  o.retry_min_ns = 10000000;
  o.retry_max_ns = 50000000;
  o.no_data_plane = no_data_plane;
  o.drain_ns = fc->drain_ns;
  pw_status_t s = pw_worker_create(&o, &fc->worker);
  cr_assert_null(s, "%s", pw_status_message(s));
  cr_assert_eq(pthread_create(&fc->thread, NULL, fc_run, fc), 0);
  fc->running = true;
}

static void fc_recv_on(nng_socket sock, fc_msg_t* out) {
  pw_status_t s = pw__wire_nng_recv(sock, 0, 0, fc_alloc_sys(), "worker", &out->raw, &out->msg);
  cr_assert_null(s, "%s", pw_status_message(s));
}

void fc_recv_hello(fc_t* fc, fc_msg_t* out) {
  fc_recv_on(fc->rep, out);
  cr_assert_eq(out->msg.type, PW_WIRE_HELLO, "got %s", pw__wire_type_name(out->msg.type));
}

void fc_welcome(fc_t* fc, uint32_t index, uint64_t heartbeat_ns, uint32_t misses) {
  pw_wire_msg_t w = {.type = PW_WIRE_WELCOME};
  w.u[PW_WIRE_WELCOME_INDEX] = index;
  w.u[PW_WIRE_WELCOME_HEARTBEAT_NS] = heartbeat_ns;
  w.u[PW_WIRE_WELCOME_MISSES] = misses;
  w.blob[PW_WIRE_WELCOME_B_URL] = (pw_wire_blob_t){fc->session_url, strlen(fc->session_url)};
  w.blob[PW_WIRE_WELCOME_B_NONCE] = (pw_wire_blob_t){fc->nonce, PW_WIRE_NONCE_SIZE};
  pw_status_t s = pw__wire_nng_send(fc->rep, &w, 0, "worker");
  cr_assert_null(s, "%s", pw_status_message(s));
}

void fc_refuse(fc_t* fc, const char* reason) {
  pw_wire_msg_t r = {.type = PW_WIRE_REFUSE};
  r.blob[PW_WIRE_REASON_B] = (pw_wire_blob_t){reason, strlen(reason)};
  pw_status_t s = pw__wire_nng_send(fc->rep, &r, 0, "worker");
  cr_assert_null(s, "%s", pw_status_message(s));
}

void fc_release(fc_msg_t* m) {
  pw__wire_nng_release(m->raw, &m->msg, fc_alloc_sys());
  m->raw = NULL;
}

/* The next session message: frames are split into one nng message per
 * wire message, so each fc_msg_t owns its bytes. */
static void fc_recv_session(fc_t* fc, fc_msg_t* out) {
  if (fc->queued_count == 0) {
    nng_msg* frame = NULL;
    int rv = nng_recvmsg(fc->pair, &frame, 0);
    cr_assert_eq(rv, 0, "receive from the worker: %s", nng_strerror(rv));
    const unsigned char* body = nng_msg_body(frame);
    size_t size = nng_msg_len(frame), offset = 0;
    while (offset < size) {
      size_t at = offset;
      pw_wire_msg_t m;
      pw_status_t s = pw__wire_decode_next(body, size, &offset, 0, fc_alloc_sys(), &m);
      cr_assert_null(s, "%s", pw_status_message(s));
      pw__wire_msg_release(&m, fc_alloc_sys());
      cr_assert_lt(fc->queued_count, 128);
      nng_msg* one = NULL;
      cr_assert_eq(nng_msg_alloc(&one, 0), 0);
      cr_assert_eq(nng_msg_append(one, body + at, offset - at), 0);
      nng_msg_set_pipe(one, nng_msg_get_pipe(frame)); /* tests close it */
      fc->queued[(fc->queued_head + fc->queued_count++) % 128] = one;
    }
    nng_msg_free(frame);
  }
  out->raw = fc->queued[fc->queued_head];
  fc->queued_head = (fc->queued_head + 1) % 128;
  fc->queued_count--;
  pw_status_t s = pw__wire_nng_decode(out->raw, 0, fc_alloc_sys(), "worker", &out->msg);
  if (s != NULL) out->raw = NULL; /* freed by the decode */
  cr_assert_null(s, "%s", pw_status_message(s));
}

void fc_recv(fc_t* fc, pw_wire_type_t type, fc_msg_t* out) {
  for (;;) {
    fc_recv_session(fc, out);
    if (out->msg.type == PW_WIRE_HEARTBEAT && type != PW_WIRE_HEARTBEAT) {
      fc_release(out);
      continue;
    }
    cr_assert_eq(out->msg.type, type, "got %s, expected %s", pw__wire_type_name(out->msg.type),
                 pw__wire_type_name(type));
    return;
  }
}

void fc_send(fc_t* fc, const pw_wire_msg_t* msg) {
  pw_status_t s = pw__wire_nng_send(fc->pair, msg, 0, "worker");
  cr_assert_null(s, "%s", pw_status_message(s));
}

void fc_session(fc_t* fc, uint32_t devices) { fc_session_backend(fc, fc_cpu_backend(devices)); }

void fc_attach(fc_t* fc) {
  fc_msg_t hello;
  fc_recv_hello(fc, &hello);
  fc_release(&hello);
  fc_welcome(fc, 3, 200000000ull, 50);
  fc_msg_t attach;
  fc_recv(fc, PW_WIRE_ATTACH, &attach);
  cr_assert_eq(attach.msg.u[PW_WIRE_ATTACH_INDEX], 3);
  fc_release(&attach);
}

void fc_session_backend(fc_t* fc, pw_backend_t backend) {
  fc_listen(fc);
  fc_start_worker(fc, "secret", backend, true);
  fc_attach(fc);
}

void fc_stop(fc_t* fc) {
  if (fc->running) {
    pw_worker_stop(fc->worker);
    pthread_join(fc->thread, NULL);
    fc->running = false;
    cr_assert_null(fc->run_status, "%s", pw_status_message(fc->run_status));
  }
  pw_worker_destroy(fc->worker);
  fc->worker = NULL;
  pw__wire_nng_close(fc->rep);
  pw__wire_nng_close(fc->pair);
  while (fc->queued_count > 0) {
    nng_msg_free(fc->queued[fc->queued_head]);
    fc->queued_head = (fc->queued_head + 1) % 128;
    fc->queued_count--;
  }
}

pw_worker_stats_t fc_stats(fc_t* fc) {
  pw_worker_stats_t st = {.struct_size = sizeof(st)};
  pw_status_t s = pw_worker_stats(fc->worker, &st);
  cr_assert_null(s, "%s", pw_status_message(s));
  return st;
}

void fc_wait_stats(fc_t* fc, bool (*pred)(const pw_worker_stats_t*)) {
  for (int i = 0; i < FC_WAIT_MS; ++i) {
    pw_worker_stats_t st = fc_stats(fc);
    if (pred(&st)) return;
    nng_msleep(1);
  }
  cr_assert_fail("the worker's stats never reached the expected state");
}

void fc_alloc(fc_t* fc, uint64_t mem, uint32_t device, uint64_t size) {
  pw_wire_msg_t m = {.type = PW_WIRE_ALLOC};
  m.u[PW_WIRE_ALLOC_MEM] = mem;
  m.u[PW_WIRE_ALLOC_DEVICE] = device;
  m.u[PW_WIRE_ALLOC_SIZE] = size;
  fc_send(fc, &m);
}

static void fc_expect_reply(fc_msg_t* r, uint64_t id, pw_status_code_t expect) {
  cr_assert_eq(r->msg.u[PW_WIRE_REPLY_ID], id);
  char text[512];
  pw__wire_blob_text(&r->msg.blob[PW_WIRE_REPLY_B_MESSAGE], text, sizeof(text));
  cr_assert_eq(r->msg.u[PW_WIRE_REPLY_CODE], (uint64_t)expect, "reply %llu: code %llu (%s)",
               (unsigned long long)id, (unsigned long long)r->msg.u[PW_WIRE_REPLY_CODE], text);
}

void fc_write(fc_t* fc, uint64_t id, uint64_t mem, uint64_t offset, const void* bytes,
              size_t size, pw_status_code_t expect) {
  pw_wire_msg_t m = {.type = PW_WIRE_WRITE};
  m.u[PW_WIRE_WRITE_ID] = id;
  m.u[PW_WIRE_WRITE_MEM] = mem;
  m.u[PW_WIRE_WRITE_OFFSET] = offset;
  m.blob[PW_WIRE_WRITE_B_BYTES] = (pw_wire_blob_t){bytes, size};
  fc_send(fc, &m);
  fc_msg_t r;
  fc_recv(fc, PW_WIRE_REPLY, &r);
  fc_expect_reply(&r, id, expect);
  fc_release(&r);
}

void fc_read(fc_t* fc, uint64_t id, uint64_t mem, uint64_t offset, uint64_t size,
             pw_status_code_t expect, fc_msg_t* out) {
  pw_wire_msg_t m = {.type = PW_WIRE_READ};
  m.u[PW_WIRE_READ_ID] = id;
  m.u[PW_WIRE_READ_MEM] = mem;
  m.u[PW_WIRE_READ_OFFSET] = offset;
  m.u[PW_WIRE_READ_SIZE] = size;
  fc_send(fc, &m);
  fc_recv(fc, PW_WIRE_REPLY, out);
  fc_expect_reply(out, id, expect);
}
