/* pathways-cts: assertions, the counting allocator and the sweep; see
 * cts_check.h. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "cts_check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void pw_cts_fail(const char* file, int line, const char* what, const char* fmt, ...) {
  fprintf(stderr, "%s:%d: %s", file, line, what);
  if (fmt != NULL && fmt[0] == '|') ++fmt;
  if (fmt != NULL && fmt[0] != '\0') {
    fputs(": ", stderr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
  }
  fputc('\n', stderr);
  fflush(stderr);
  _Exit(1);
}

void pw_cts_skip(const char* fmt, ...) {
  fputs("SKIP: ", stderr);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  fflush(stderr);
  _Exit(PW_CTS_EXIT_SKIP);
}

void pw_cts_assert_ok(pw_status_t status, const char* what, const char* file, int line) {
  if (status == NULL) return;
  char text[512];
  pw_status_format(status, text, sizeof(text));
  pw_status_free(status);
  pw_cts_fail(file, line, what, "|failed: %s", text);
}

pw_status_code_t pw_cts_assert_error(pw_status_t status, const pw_status_code_t* allowed,
                                     size_t count, const char* what) {
  PW_CTS_ASSERT_NOT_NULL(status, "%s succeeded; an error was expected", what);
  pw_status_code_t code = pw_status_code(status);
  char text[512];
  pw_status_format(status, text, sizeof(text));
  size_t message_length = strlen(pw_status_message(status));
  pw_status_free(status);
  bool ok = false;
  for (size_t i = 0; i < count; ++i) ok = ok || code == allowed[i];
  PW_CTS_ASSERT(ok, "%s: unexpected error %s", what, text);
  PW_CTS_ASSERT_GT(message_length, 0, "%s: error %s has no message", what,
                   pw_status_code_string(code));
  return code;
}

/* Each block carries its size so that a mismatched free size shows. */
typedef struct pw_cts_block_t {
  size_t size;
  size_t offset; /* from the raw pointer to the user pointer */
} pw_cts_block_t;

void pw_cts_allocator_init(pw_cts_allocator_t* t) { memset(t, 0, sizeof(*t)); }

static void* pw_cts_allocator_alloc(void* self, size_t size, size_t alignment) {
  pw_cts_allocator_t* t = self;
  size_t attempt = atomic_fetch_add(&t->attempts, 1) + 1;
  if (t->fail_at != 0 && (attempt == t->fail_at || (t->fail_after && attempt > t->fail_at))) {
    return NULL;
  }
  if (alignment < sizeof(pw_cts_block_t)) alignment = sizeof(pw_cts_block_t);
  size_t offset = alignment;
  unsigned char* raw =
      aligned_alloc(alignment, ((offset + size + alignment - 1) / alignment) * alignment);
  if (raw == NULL) return NULL;
  unsigned char* user = raw + offset;
  pw_cts_block_t* h = (pw_cts_block_t*)(user - sizeof(*h));
  h->size = size;
  h->offset = offset;
  atomic_fetch_add(&t->allocations, 1);
  atomic_fetch_add(&t->live_bytes, size);
  return user;
}

static void pw_cts_allocator_free(void* self, void* ptr, size_t size) {
  pw_cts_allocator_t* t = self;
  unsigned char* user = ptr;
  pw_cts_block_t* h = (pw_cts_block_t*)(user - sizeof(*h));
  if (h->size != size) atomic_fetch_add(&t->size_mismatches, 1);
  atomic_fetch_add(&t->frees, 1);
  atomic_fetch_sub(&t->live_bytes, h->size);
  free(user - h->offset);
}

pw_allocator_t pw_cts_allocator(pw_cts_allocator_t* t) {
  pw_allocator_t a = {t, pw_cts_allocator_alloc, pw_cts_allocator_free};
  return a;
}

size_t pw_cts_allocator_live(pw_cts_allocator_t* t) {
  return atomic_load(&t->allocations) - atomic_load(&t->frees);
}

int pw_cts_allocator_sweep(pw_cts_sweep_fn_t body, void* user, char* why) {
  pw_cts_allocator_t t;
  pw_cts_allocator_init(&t);
  if (!body(pw_cts_allocator(&t), false, user)) {
    snprintf(why, 256, "body failed without any injected failure");
    return -1;
  }
  if (pw_cts_allocator_live(&t) != 0) {
    snprintf(why, 256, "%zu allocations leaked without injected failure",
             pw_cts_allocator_live(&t));
    return -1;
  }
  size_t total = atomic_load(&t.attempts);
  for (size_t n = 1; n <= total; ++n) {
    pw_cts_allocator_init(&t);
    t.fail_at = n;
    if (!body(pw_cts_allocator(&t), true, user)) {
      snprintf(why, 256, "body misbehaved when allocation %zu of %zu failed", n, total);
      return -1;
    }
    if (pw_cts_allocator_live(&t) != 0 || atomic_load(&t.size_mismatches) != 0) {
      snprintf(why, 256, "allocation %zu of %zu failed: %zu leaked, %zu size mismatches", n,
               total, pw_cts_allocator_live(&t), atomic_load(&t.size_mismatches));
      return -1;
    }
  }
  return (int)total;
}

uint64_t pw_cts_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
