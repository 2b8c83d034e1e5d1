/* The wire codec: every shape round-trips; anything else is refused with
 * a message naming the field, never a crash. */
#include <criterion/criterion.h>
#include <string.h>

#include "wire/wire.h"

static pw_allocator_t wt_alloc(void) { return pw_allocator_system(); }

static size_t wt_encode(const pw_wire_msg_t* msg, uint8_t* buf, size_t cap) {
  size_t n = pw__wire_measure(msg);
  cr_assert_gt(n, 0, "measure %s", pw__wire_type_name(msg->type));
  cr_assert_leq(n, cap);
  cr_assert_eq(pw__wire_write(msg, buf, cap), n);
  return n;
}

static void wt_expect_error(const uint8_t* buf, size_t n, uint32_t expect, const char* needle) {
  pw_wire_msg_t out;
  pw_status_t s = pw__wire_decode(buf, n, expect, wt_alloc(), &out);
  cr_assert_not_null(s, "decoded what should be refused (%s)", needle);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(pw_status_message(s), needle), "message '%s' lacks '%s'",
                     pw_status_message(s), needle);
  cr_assert_null(out.list);
  pw_status_free(s);
}

Test(wire, launch_round_trip) {
  uint64_t list[2 + 2 * 2 + 2];
  for (uint32_t i = 0; i < 8; ++i) list[i] = 1000u + i * 77777u;
  pw_wire_msg_t msg = {.type = PW_WIRE_LAUNCH, .list = list, .list_count = 8};
  for (uint32_t i = 0; i < 9; ++i) msg.u[i] = (uint64_t)i << (i * 7);
  uint8_t buf[512];
  size_t n = wt_encode(&msg, buf, sizeof(buf));
  pw_wire_msg_t out;
  pw_status_t s = pw__wire_decode(buf, n, PW_WIRE_LAUNCH, wt_alloc(), &out);
  cr_assert_null(s, "%s", pw_status_message(s));
  cr_assert_eq(out.type, PW_WIRE_LAUNCH);
  for (uint32_t i = 0; i < 9; ++i) cr_assert_eq(out.u[i], msg.u[i]);
  cr_assert_eq(out.list_count, 8);
  cr_assert_arr_eq(out.list, list, sizeof(uint64_t) * 8);
  pw__wire_msg_release(&out, wt_alloc());
  cr_assert_null(out.list);
}

Test(wire, hello_blobs_point_into_input) {
  uint64_t mem[3] = {1u << 30, 1u << 30, 0};
  pw_wire_msg_t msg = {.type = PW_WIRE_HELLO, .list = mem, .list_count = 3};
  msg.u[PW_WIRE_HELLO_DEVICES] = 3;
  msg.blob[PW_WIRE_HELLO_B_TOKEN] = (pw_wire_blob_t){"secret", 6};
  msg.blob[PW_WIRE_HELLO_B_NAME] = (pw_wire_blob_t){"w1", 2};
  msg.blob[PW_WIRE_HELLO_B_BACKEND] = (pw_wire_blob_t){"cpu", 3};
  msg.blob[PW_WIRE_HELLO_B_UCX] = (pw_wire_blob_t){"\0\1\2", 3};
  msg.blob[PW_WIRE_HELLO_B_KIND] = (pw_wire_blob_t){"cpu", 3};
  uint8_t buf[256];
  size_t n = wt_encode(&msg, buf, sizeof(buf));
  pw_wire_msg_t out;
  pw_status_t s = pw__wire_decode(buf, n, 0, wt_alloc(), &out);
  cr_assert_null(s, "%s", pw_status_message(s));
  cr_assert_eq(out.blob[PW_WIRE_HELLO_B_UCX].size, 3);
  cr_assert(memcmp(out.blob[PW_WIRE_HELLO_B_UCX].data, "\0\1\2", 3) == 0);
  cr_assert((const uint8_t*)out.blob[PW_WIRE_HELLO_B_NAME].data > buf &&
            (const uint8_t*)out.blob[PW_WIRE_HELLO_B_NAME].data < buf + n);
  char name[8];
  pw__wire_blob_text(&out.blob[PW_WIRE_HELLO_B_NAME], name, sizeof(name));
  cr_assert_str_eq(name, "w1");
  cr_assert_eq(out.list[0], 1u << 30);
  pw__wire_msg_release(&out, wt_alloc());
}

Test(wire, every_type_round_trips_empty) {
  for (uint32_t t = 1; t < PW_WIRE_TYPE_COUNT; ++t) {
    pw_wire_msg_t msg = {.type = (pw_wire_type_t)t};
    uint8_t buf[128];
    size_t n = wt_encode(&msg, buf, sizeof(buf));
    pw_wire_msg_t out;
    pw_status_t s = pw__wire_decode(buf, n, t, wt_alloc(), &out);
    cr_assert_null(s, "%s: %s", pw__wire_type_name(t), pw_status_message(s));
    cr_assert_eq(out.type, t);
    pw__wire_msg_release(&out, wt_alloc());
  }
}

Test(wire, refuses_what_does_not_fit_its_shape) {
  char big[64];
  memset(big, 'x', sizeof(big));
  pw_wire_msg_t msg = {.type = PW_WIRE_HELLO};
  msg.blob[PW_WIRE_HELLO_B_NAME] = (pw_wire_blob_t){big, 64};  /* at most 63 */
  cr_assert_eq(pw__wire_measure(&msg), 0);
  pw_wire_msg_t unknown = {.type = (pw_wire_type_t)PW_WIRE_TYPE_COUNT};
  cr_assert_eq(pw__wire_measure(&unknown), 0);
  pw_wire_msg_t list_without_type = {.type = PW_WIRE_ALLOC, .list_count = 1};
  uint64_t one = 1;
  list_without_type.list = &one;
  cr_assert_eq(pw__wire_measure(&list_without_type), 0);
}

Test(wire, strict_decoding_names_the_culprit) {
  pw_wire_msg_t msg = {.type = PW_WIRE_FREE};
  msg.u[0] = 5;
  uint8_t buf[64];
  size_t n = wt_encode(&msg, buf, sizeof(buf));  /* 83 03 0c 05 */
  cr_assert_eq(n, 4);
  uint8_t bad[16];
  memcpy(bad, buf, n);
  bad[1] = 1; /* a peer of the single-message protocol */
  wt_expect_error(bad, n, 0, "version 1 (this library speaks 3)");
  memcpy(bad, buf, n);
  bad[2] = 0x18; /* needs a following byte: truncated head */
  wt_expect_error(bad, n, 0, "wire message");
  memcpy(bad, buf, n);
  bad[2] = 0x1f - 0x0c + 0x0c; /* 31: indefinite/reserved */
  wt_expect_error(bad, n, 0, "wire message");
  memcpy(bad, buf, n);
  bad[2] = 0x14; /* type 20: unknown */
  wt_expect_error(bad, n, 0, "unknown type 20");
  memcpy(bad, buf, n);
  bad[3] = 0x60; /* a text string where an integer belongs */
  wt_expect_error(bad, n, 0, "an integer field");
  memcpy(bad, buf, n);
  bad[n] = 0x00;
  wt_expect_error(bad, n + 1, 0, "wire message");  /* trailing byte */
  wt_expect_error(buf, n, PW_WIRE_ALLOC, "FREE where ALLOC was expected");
  uint8_t four_fields[] = {0x84, (uint8_t)PW_WIRE_VERSION, 0x0c, 0x05, 0x05};
  wt_expect_error(four_fields, sizeof(four_fields), 0, "4 fields, expected 3");
  uint8_t indefinite[] = {0x9f, (uint8_t)PW_WIRE_VERSION, 0x0c, 0x05, 0xff};
  wt_expect_error(indefinite, sizeof(indefinite), 0, "wire message");
  wt_expect_error(buf, 0, 0, "empty");
}

Test(wire, list_counts_are_checked_before_allocation) {
  /* HEARTBEAT [2, 5, seq, list] with a list claiming 60000 items in 8 bytes. */
  uint8_t lie[] = {0x84, (uint8_t)PW_WIRE_VERSION, 0x05, 0x00, 0x99, 0xea, 0x60, 0x00};
  wt_expect_error(lie, sizeof(lie), 0, "wire message");
  /* A nested array inside the list: depth 3. */
  uint8_t deep[] = {0x84, (uint8_t)PW_WIRE_VERSION, 0x05, 0x00, 0x81, 0x80};
  wt_expect_error(deep, sizeof(deep), 0, "wire message");
}

Test(wire, oversized_strings_are_refused_on_decode) {
  /* BYE [3, 19, text of 1025 bytes]: the reason's maximum is 1024. */
  static uint8_t msg[3 + 3 + 1025];
  msg[0] = 0x83; msg[1] = (uint8_t)PW_WIRE_VERSION; msg[2] = 0x13;
  msg[3] = 0x79; msg[4] = 0x04; msg[5] = 0x01;
  memset(msg + 6, 'a', 1025);
  wt_expect_error(msg, sizeof(msg), 0, "reason of 1025 bytes");
}

/* A frame: messages back to back. Each decodes in turn; a refused one in
 * the middle is skipped when its end is known; a truncated tail ends the
 * frame. */
Test(wire, frames_decode_message_by_message) {
  uint8_t buf[1024];
  size_t n = 0;
  uint64_t ids[3] = {7, 8, 9};
  for (int i = 0; i < 2; ++i) {
    pw_wire_msg_t done = {.type = PW_WIRE_DONE};
    done.u[PW_WIRE_DONE_ID] = ids[i];
    n += wt_encode(&done, buf + n, sizeof(buf) - n);
  }
  /* Well-formed CBOR of the wrong shape: [1, 16] (a DONE without fields). */
  buf[n++] = 0x82;
  buf[n++] = (uint8_t)PW_WIRE_VERSION;
  buf[n++] = 0x10;
  pw_wire_msg_t last = {.type = PW_WIRE_DONE};
  last.u[PW_WIRE_DONE_ID] = ids[2];
  n += wt_encode(&last, buf + n, sizeof(buf) - n);
  size_t whole = n;
  buf[n++] = 0x83; /* a truncated message */
  buf[n++] = (uint8_t)PW_WIRE_VERSION;

  size_t offset = 0;
  uint64_t got[3];
  int decoded = 0, refused = 0;
  pw_status_t truncated = NULL;
  while (offset < n) {
    pw_wire_msg_t out;
    size_t before = offset;
    pw_status_t s = pw__wire_decode_next(buf, n, &offset, PW_WIRE_DONE, wt_alloc(), &out);
    cr_assert_gt(offset, before, "the offset moves on");
    if (s == NULL) {
      cr_assert_lt(decoded, 3);
      got[decoded++] = out.u[PW_WIRE_DONE_ID];
      pw__wire_msg_release(&out, wt_alloc());
    } else if (offset == n && before == whole) {
      truncated = s;
    } else {
      cr_assert_not_null(strstr(pw_status_message(s), "fields"), "%s", pw_status_message(s));
      cr_assert_not_null(strstr(pw_status_message(s), "of its frame"), "%s",
                         pw_status_message(s));
      ++refused;
      pw_status_free(s);
    }
  }
  cr_assert_eq(decoded, 3);
  cr_assert_arr_eq(got, ids, sizeof(ids));
  cr_assert_eq(refused, 1);
  cr_assert_not_null(truncated, "the truncated tail is refused");
  cr_assert_eq(pw_status_code(truncated), PW_STATUS_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(pw_status_message(truncated), "wire frame"), "%s",
                     pw_status_message(truncated));
  pw_status_free(truncated);
  /* Past the end, and an empty frame. */
  pw_wire_msg_t out;
  offset = n;
  pw_status_t s = pw__wire_decode_next(buf, n, &offset, 0, wt_alloc(), &out);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  offset = 0;
  s = pw__wire_decode_next(buf, 0, &offset, 0, wt_alloc(), &out);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
}
