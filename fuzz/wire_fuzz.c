/* libFuzzer target: control-plane wire messages (lib/wire), no runtime.
 *
 * Properties checked on every input, beyond "no crash, no leak, no
 * undefined behaviour" (the sanitizers' part):
 *   - a rejected input gets INVALID_ARGUMENT with a message naming a
 *     message type or field, and allocates nothing that outlives the call;
 *   - a message decoded with |expect| = its own type decodes the same way,
 *     and with any other |expect| is refused;
 *   - an accepted message re-encodes (measure == write) to bytes that
 *     decode to the same fields, and encoding those is a fixed point;
 *   - decoding allocates at most the list (8 bytes per entry);
 *   - read as a frame (pw__wire_decode_next), every step moves forward and
 *     is accepted or refused like a lone message, nothing leaks, and an
 *     input that is one message is a frame of exactly that message.
 *
 * Built as a libFuzzer binary with PW_FUZZ=ON under clang, and always as
 * pw_fuzz_wire_replay (with replay_main.c), which ctest runs over the
 * seed corpus in fuzz/corpus/wire (fuzz/make_wire_corpus.py). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

typedef struct pw_wire_fuzz_alloc_t {
  size_t live;
  size_t peak;
} pw_wire_fuzz_alloc_t;

static void* pw_wire_fuzz_alloc(void* self, size_t size, size_t alignment) {
  pw_wire_fuzz_alloc_t* t = self;
  size_t rounded = (size + alignment - 1) / alignment * alignment;
  void* p = aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
  if (p != NULL) {
    t->live += size;
    if (t->live > t->peak) t->peak = t->live;
  }
  return p;
}

static void pw_wire_fuzz_free(void* self, void* ptr, size_t size) {
  pw_wire_fuzz_alloc_t* t = self;
  t->live -= size;
  free(ptr);
}

static void pw_wire_fuzz_fail(const char* what) {
  fprintf(stderr, "wire fuzz: %s\n", what);
  abort();
}

static bool pw_wire_fuzz_same(const pw_wire_msg_t* a, const pw_wire_msg_t* b) {
  if (a->type != b->type || a->list_count != b->list_count) return false;
  if (memcmp(a->u, b->u, sizeof(a->u)) != 0) return false;
  for (uint32_t i = 0; i < PW_WIRE_MAX_BLOB; ++i) {
    if (a->blob[i].size != b->blob[i].size) return false;
    if (a->blob[i].size && memcmp(a->blob[i].data, b->blob[i].data, a->blob[i].size) != 0) {
      return false;
    }
  }
  return a->list_count == 0 || memcmp(a->list, b->list, a->list_count * sizeof(uint64_t)) == 0;
}

/* Encodes |msg|; aborts when the codec disagrees with itself. */
static uint8_t* pw_wire_fuzz_encode(const pw_wire_msg_t* msg, size_t* out_size) {
  size_t n = pw__wire_measure(msg);
  if (n == 0) pw_wire_fuzz_fail("a decoded message does not measure");
  uint8_t* bytes = malloc(n);
  if (bytes == NULL) abort();
  if (pw__wire_write(msg, bytes, n) != n) pw_wire_fuzz_fail("write differs from measure");
  if (pw__wire_write(msg, bytes, n - 1) != 0) pw_wire_fuzz_fail("write overran its capacity");
  *out_size = n;
  return bytes;
}

/* The input as a frame; returns how many messages decoded (|first|: the
 * first of them, when |first| is not NULL). */
static uint32_t pw_wire_fuzz_frame(const uint8_t* data, size_t size, pw_allocator_t a,
                                   pw_wire_fuzz_alloc_t* counter, pw_wire_msg_t* first) {
  size_t offset = 0;
  uint32_t decoded = 0;
  while (offset < size) {
    size_t before = offset;
    pw_wire_msg_t m;
    pw_status_t status = pw__wire_decode_next(data, size, &offset, 0, a, &m);
    if (offset <= before || offset > size) pw_wire_fuzz_fail("a frame step did not move on");
    if (status != NULL) {
      if (pw_status_code(status) != PW_STATUS_INVALID_ARGUMENT) {
        pw_wire_fuzz_fail(pw_status_message(status));
      }
      pw_status_free(status);
      continue;
    }
    if (decoded++ == 0 && first != NULL) {
      *first = m;
    } else {
      pw__wire_msg_release(&m, a);
    }
  }
  (void)counter;
  return decoded;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pw_wire_fuzz_alloc_t counter = {0, 0};
  pw_allocator_t a = {&counter, pw_wire_fuzz_alloc, pw_wire_fuzz_free};
  pw_wire_msg_t msg;
  pw_wire_msg_t framed;
  memset(&framed, 0, sizeof(framed));
  uint32_t in_frame = pw_wire_fuzz_frame(data, size, a, &counter, &framed);
  if (in_frame == 0 && counter.live != 0) pw_wire_fuzz_fail("a refused frame leaked a list");
  size_t base = counter.live; /* the framed copy's list */
  counter.peak = base;
  pw_status_t status = pw__wire_decode(data, size, 0, a, &msg);
  if (status != NULL) {
    if (pw_status_code(status) != PW_STATUS_INVALID_ARGUMENT ||
        pw_status_message(status)[0] == '\0') {
      pw_wire_fuzz_fail(pw_status_message(status));
    }
    pw_status_free(status);
    if (in_frame > 0) pw__wire_msg_release(&framed, a);
    if (counter.live != 0) pw_wire_fuzz_fail("a refused input leaked its list");
    return 0;
  }
  if (in_frame != 1 || !pw_wire_fuzz_same(&msg, &framed)) {
    pw_wire_fuzz_fail("one message is not a frame of that message");
  }
  pw__wire_msg_release(&framed, a);
  if (counter.peak - base > (size_t)msg.list_count * sizeof(uint64_t) + 64) {
    pw_wire_fuzz_fail("decoding allocated more than the list");
  }
  /* The same bytes with |expect| set: its own type decodes, others refuse. */
  pw_wire_msg_t typed;
  status = pw__wire_decode(data, size, msg.type, a, &typed);
  if (status != NULL) pw_wire_fuzz_fail("refused with expect = its own type");
  if (!pw_wire_fuzz_same(&msg, &typed)) pw_wire_fuzz_fail("expect changed the fields");
  pw__wire_msg_release(&typed, a);
  uint32_t other = msg.type % (PW_WIRE_TYPE_COUNT - 1) + 1;
  status = pw__wire_decode(data, size, other, a, &typed);
  if (status == NULL) pw_wire_fuzz_fail("accepted with expect = another type");
  pw_status_free(status);
  /* Round trip. */
  size_t once_size = 0, twice_size = 0;
  uint8_t* once = pw_wire_fuzz_encode(&msg, &once_size);
  pw_wire_msg_t again;
  status = pw__wire_decode(once, once_size, 0, a, &again);
  if (status != NULL) pw_wire_fuzz_fail("the re-encoded message is refused");
  if (!pw_wire_fuzz_same(&msg, &again)) pw_wire_fuzz_fail("the round trip changed a field");
  uint8_t* twice = pw_wire_fuzz_encode(&again, &twice_size);
  if (twice_size != once_size || memcmp(once, twice, once_size) != 0) {
    pw_wire_fuzz_fail("encoding is not a fixed point");
  }
  free(twice);
  pw__wire_msg_release(&again, a);
  free(once);
  pw__wire_msg_release(&msg, a);
  if (counter.live != 0) pw_wire_fuzz_fail("a decoded message leaked its list");
  return 0;
}
