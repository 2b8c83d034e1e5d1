/* Status values: a heap block with code and message, or a code-only value
 * when the heap is exhausted.
 *
 * Representation: a pw_status_t is either a pointer to a pw_status_s (low
 * bits clear; blocks come from malloc, aligned to at least 16) or a tagged
 * code: (code << 1) | 1 for codes 1-16. The tagged form needs no memory, so
 * an allocation failure can always be reported. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pathways/status.h"
#include "pathways/struct_size.h"

struct pw_status_s {
  pw_status_code_t code;
  size_t length; /* of message, excluding NUL */
  char message[]; /* NUL-terminated; context prefixes already applied */
};

static const char* const pw_status_code_names[PW_STATUS_CODE_COUNT] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

static bool pw_status_is_tagged(pw_status_t status) {
  return ((uintptr_t)status & 1u) != 0;
}

static pw_status_t pw_status_tagged(pw_status_code_t code) {
  return (pw_status_t)(((uintptr_t)code << 1) | 1u);
}

const char* pw_status_code_string(pw_status_code_t code) {
  if ((unsigned)code >= PW_STATUS_CODE_COUNT) return "UNKNOWN_CODE";
  return pw_status_code_names[code];
}

/* Allocates a status holding |prefix_len| bytes of |prefix| followed by
 * |body_len| bytes of |body|. Falls back to the tagged form. */
static pw_status_t pw_status_alloc(pw_status_code_t code, const char* prefix,
                                   size_t prefix_len, const char* body,
                                   size_t body_len) {
  size_t length = prefix_len + body_len;
  struct pw_status_s* s = malloc(sizeof(*s) + length + 1);
  if (s == NULL) return pw_status_tagged(code);
  s->code = code;
  s->length = length;
  if (prefix_len) memcpy(s->message, prefix, prefix_len);
  if (body_len) memcpy(s->message + prefix_len, body, body_len);
  s->message[length] = '\0';
  return s;
}

pw_status_t pw_status_makev(pw_status_code_t code, const char* format,
                            va_list args) {
  if (code == PW_STATUS_OK || (unsigned)code >= PW_STATUS_CODE_COUNT) {
    char note[96];
    int n = snprintf(note, sizeof(note),
                     "pw_status_make called with invalid code %d: ", (int)code);
    char body[512];
    va_list copy;
    va_copy(copy, args);
    int m = format ? vsnprintf(body, sizeof(body), format, copy) : 0;
    va_end(copy);
    if (m < 0) m = 0;
    if ((size_t)m >= sizeof(body)) m = (int)sizeof(body) - 1;
    return pw_status_alloc(PW_STATUS_UNKNOWN, note, (size_t)n, body,
                           (size_t)m);
  }
  if (format == NULL) return pw_status_alloc(code, NULL, 0, NULL, 0);
  va_list copy;
  va_copy(copy, args);
  int n = vsnprintf(NULL, 0, format, copy);
  va_end(copy);
  if (n < 0) return pw_status_tagged(code);
  struct pw_status_s* s = malloc(sizeof(*s) + (size_t)n + 1);
  if (s == NULL) return pw_status_tagged(code);
  s->code = code;
  s->length = (size_t)n;
  vsnprintf(s->message, (size_t)n + 1, format, args);
  return s;
}

pw_status_t pw_status_make(pw_status_code_t code, const char* format, ...) {
  va_list args;
  va_start(args, format);
  pw_status_t status = pw_status_makev(code, format, args);
  va_end(args);
  return status;
}

pw_status_t pw_status_annotate(pw_status_t status, const char* format, ...) {
  if (status == NULL) return NULL;
  if (format == NULL) return status;
  char context[512];
  va_list args;
  va_start(args, format);
  int n = vsnprintf(context, sizeof(context) - 2, format, args);
  va_end(args);
  if (n < 0) return status;
  size_t clen = (size_t)n < sizeof(context) - 2 ? (size_t)n : sizeof(context) - 3;
  context[clen++] = ':';
  context[clen++] = ' ';
  pw_status_code_t code = pw_status_code(status);
  const char* body = pw_status_message(status);
  size_t body_len = pw_status_is_tagged(status) ? strlen(body)
                                                : status->length;
  pw_status_t annotated = pw_status_alloc(code, context, clen, body, body_len);
  if (pw_status_is_tagged(annotated)) {
    /* Out of memory: keep the original, which carries more than the code. */
    return status;
  }
  pw_status_free(status);
  return annotated;
}

pw_status_t pw_status_clone(pw_status_t status) {
  if (status == NULL || pw_status_is_tagged(status)) return status;
  return pw_status_alloc(status->code, NULL, 0, status->message,
                         status->length);
}

pw_status_code_t pw_status_code(pw_status_t status) {
  if (status == NULL) return PW_STATUS_OK;
  if (pw_status_is_tagged(status)) {
    return (pw_status_code_t)((uintptr_t)status >> 1);
  }
  return status->code;
}

const char* pw_status_message(pw_status_t status) {
  if (status == NULL) return "";
  if (pw_status_is_tagged(status)) {
    return pw_status_code_string(pw_status_code(status));
  }
  return status->message;
}

size_t pw_status_format(pw_status_t status, char* buffer, size_t capacity) {
  int n;
  if (status == NULL) {
    n = snprintf(buffer, capacity, "OK");
  } else if (pw_status_is_tagged(status) || status->length == 0) {
    n = snprintf(buffer, capacity, "%s",
                 pw_status_code_string(pw_status_code(status)));
  } else {
    n = snprintf(buffer, capacity, "%s: %s",
                 pw_status_code_string(status->code), status->message);
  }
  return n < 0 ? 0 : (size_t)n;
}

void pw_status_free(pw_status_t status) {
  if (status == NULL || pw_status_is_tagged(status)) return;
  free(status);
}

void pw_status_ignore(pw_status_t status) { pw_status_free(status); }

/* pathways/struct_size.h: the entry check's error. */
pw_status_t pw_struct_size_error(const char* call, const char* type, const void* ptr,
                                  size_t size_v1) {
  if (ptr == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: %s is NULL", call, type);
  }
  size_t n;
  memcpy(&n, ptr, sizeof(n));
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                        "%s: %s struct_size %zu is smaller than v1 (%zu)", call, type, n,
                        size_v1);
}
