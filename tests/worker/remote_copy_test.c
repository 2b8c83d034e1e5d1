/* COPY SEND/RECV between two in-process workers over the data plane
 * (lib/ucx): each worker has its own fake controller; the test hands
 * each one the other's UCX address (PEER), then copies strided rows from
 * a memory of the first into a memory of the second. Built only when
 * lib/ucx is. */
#include <criterion/criterion.h>
#include <string.h>

#include "fake_controller.h"

void pw_test_check_leaks(void);

TestSuite(worker_remote, .fini = pw_test_check_leaks, .timeout = 120);

/* A session whose HELLO's UCX address is copied into |address|. */
static size_t rc_session(fc_t* fc, uint32_t index, uint8_t* address, size_t cap) {
  fc_listen(fc);
  fc_start_worker(fc, "secret", fc_cpu_backend(1), false);
  fc_msg_t hello;
  fc_recv_hello(fc, &hello);
  size_t n = hello.msg.blob[PW_WIRE_HELLO_B_UCX].size;
  cr_assert_gt(n, 0, "a worker with a data plane sends its address");
  cr_assert_leq(n, cap);
  memcpy(address, hello.msg.blob[PW_WIRE_HELLO_B_UCX].data, n);
  fc_release(&hello);
  fc_welcome(fc, index, 200000000ull, 50);
  fc_msg_t attach;
  fc_recv(fc, PW_WIRE_ATTACH, &attach);
  fc_release(&attach);
  return n;
}

static void rc_peer(fc_t* fc, uint32_t index, const char* name, const uint8_t* address,
                    size_t size) {
  pw_wire_msg_t p = {.type = PW_WIRE_PEER};
  p.u[PW_WIRE_PEER_INDEX] = index;
  p.blob[PW_WIRE_PEER_B_NAME] = (pw_wire_blob_t){name, strlen(name)};
  p.blob[PW_WIRE_PEER_B_UCX] = (pw_wire_blob_t){address, size};
  fc_send(fc, &p);
}

static void rc_copy_n(fc_t* fc, uint64_t id, uint64_t role, uint64_t mem, uint64_t offset,
                      uint64_t peer, uint64_t tag, const uint64_t* strides, uint32_t n,
                      uint64_t size) {
  pw_wire_msg_t c = {.type = PW_WIRE_COPY, .list = strides, .list_count = n};
  c.u[PW_WIRE_COPY_ID] = id;
  c.u[PW_WIRE_COPY_ROLE] = role;
  c.u[role == PW_WIRE_COPY_SEND ? PW_WIRE_COPY_SRC_MEM : PW_WIRE_COPY_DST_MEM] = mem;
  c.u[role == PW_WIRE_COPY_SEND ? PW_WIRE_COPY_SRC_OFFSET : PW_WIRE_COPY_DST_OFFSET] = offset;
  c.u[PW_WIRE_COPY_SIZE] = size;
  c.u[PW_WIRE_COPY_PEER] = peer;
  c.u[PW_WIRE_COPY_TAG] = tag;
  fc_send(fc, &c);
}

static void rc_copy(fc_t* fc, uint64_t id, uint64_t role, uint64_t mem, uint64_t offset,
                    uint64_t peer, uint64_t tag, const uint64_t* strides, uint32_t n) {
  rc_copy_n(fc, id, role, mem, offset, peer, tag, strides, n, 4);
}

static uint64_t rc_done(fc_t* fc, uint64_t id, char* text, size_t cap) {
  fc_msg_t d;
  fc_recv(fc, PW_WIRE_DONE, &d);
  cr_assert_eq(d.msg.u[PW_WIRE_DONE_ID], id);
  pw__wire_blob_text(&d.msg.blob[PW_WIRE_DONE_B_MESSAGE], text, cap);
  uint64_t code = d.msg.u[PW_WIRE_DONE_CODE];
  fc_release(&d);
  return code;
}

Test(worker_remote, strided_rows_cross_between_workers) {
  static uint8_t addr_a[64 << 10], addr_b[64 << 10];
  fc_t a, b;
  size_t na = rc_session(&a, 0, addr_a, sizeof(addr_a));
  size_t nb = rc_session(&b, 1, addr_b, sizeof(addr_b));
  rc_peer(&a, 1, "wb", addr_b, nb);
  rc_peer(&b, 0, "wa", addr_a, na);
  uint8_t src[64];
  for (uint32_t i = 0; i < sizeof(src); ++i) src[i] = (uint8_t)(200 - i);
  fc_alloc(&a, 1, 0, 64);
  fc_write(&a, 2, 1, 0, src, sizeof(src), PW_STATUS_OK);
  fc_alloc(&b, 1, 0, 64);
  fc_write(&b, 2, 1, 0, (uint8_t[64]){0}, 64, PW_STATUS_OK);
  /* 4 rows of 4 bytes: every 16th byte from offset 2 on A, every 8th
   * from offset 4 on B. The receive is posted first, the send after. */
  const uint64_t recv_strides[3] = {4, 0, 8};
  const uint64_t send_strides[3] = {4, 16, 0};
  rc_copy(&b, 10, PW_WIRE_COPY_RECV, 1, 4, 0, 777, recv_strides, 3);
  rc_copy(&a, 10, PW_WIRE_COPY_SEND, 1, 2, 1, 777, send_strides, 3);
  char text[256];
  cr_assert_eq(rc_done(&a, 10, text, sizeof(text)), 0, "send: %s", text);
  cr_assert_eq(rc_done(&b, 10, text, sizeof(text)), 0, "recv: %s", text);
  fc_msg_t r;
  fc_read(&b, 3, 1, 0, 64, PW_STATUS_OK, &r);
  uint8_t want[64] = {0};
  for (uint32_t i = 0; i < 4; ++i) memcpy(&want[4 + 8 * i], &src[2 + 16 * i], 4);
  cr_assert(memcmp(r.msg.blob[PW_WIRE_REPLY_B_PAYLOAD].data, want, 64) == 0);
  fc_release(&r);
  /* A receive that cannot place its bytes (no memory 99) still takes the
   * message, so a large send (rendezvous) completes instead of waiting
   * for a receive that never comes. */
  fc_alloc(&a, 5, 0, 512u << 10);
  rc_copy_n(&b, 14, PW_WIRE_COPY_RECV, 99, 0, 0, 781, NULL, 0, 512u << 10);
  rc_copy_n(&a, 14, PW_WIRE_COPY_SEND, 5, 0, 1, 781, NULL, 0, 512u << 10);
  cr_assert_eq(rc_done(&b, 14, text, sizeof(text)), PW_STATUS_NOT_FOUND, "%s", text);
  cr_assert_eq(rc_done(&a, 14, text, sizeof(text)), 0, "send: %s", text);
  /* No PEER for the controller yet: a send to it is refused. */
  rc_copy(&a, 15, PW_WIRE_COPY_SEND, 1, 0, PW_WIRE_PEER_CONTROLLER, 782, NULL, 0);
  cr_assert_eq(rc_done(&a, 15, text, sizeof(text)), PW_STATUS_NOT_FOUND, "%s", text);
  cr_assert(strstr(text, "controller") != NULL, "%s", text);
  /* A send to a worker that is no peer; a receive cancelled. */
  rc_copy(&a, 11, PW_WIRE_COPY_SEND, 1, 0, 9, 778, NULL, 0);
  cr_assert_eq(rc_done(&a, 11, text, sizeof(text)), PW_STATUS_NOT_FOUND, "%s", text);
  rc_copy(&b, 12, PW_WIRE_COPY_RECV, 1, 0, 0, 779, NULL, 0);
  pw_wire_msg_t cancel = {.type = PW_WIRE_CANCEL};
  cancel.u[PW_WIRE_CANCEL_TAG] = 779;
  fc_send(&b, &cancel);
  cr_assert_eq(rc_done(&b, 12, text, sizeof(text)), PW_STATUS_CANCELLED, "%s", text);
  /* A receive outstanding when the session ends: the cleanup cancels it
   * (the link closes), waits for it and registers again. */
  rc_copy(&b, 13, PW_WIRE_COPY_RECV, 1, 0, 0, 780, NULL, 0);
  pw_wire_msg_t bye = {.type = PW_WIRE_BYE};
  fc_send(&b, &bye);
  fc_msg_t hello;
  fc_recv_hello(&b, &hello);
  cr_assert_gt(hello.msg.blob[PW_WIRE_HELLO_B_UCX].size, 0);
  fc_release(&hello);
  cr_assert_eq(fc_stats(&b).losses, 1);
  cr_assert_eq(fc_stats(&b).copies, 4, "the cancelled receive counts as completed");
  fc_refuse(&b, "done");
  fc_stop(&a);
  fc_stop(&b);
}
