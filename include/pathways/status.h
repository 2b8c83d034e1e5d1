/* libpathways: errors as values.
 *
 * A pw_status_t is a pointer-sized handle. NULL means OK. Any other value
 * carries a code (absl's 0-16 set, as in IREE and PJRT) and a message that may
 * have been prefixed with context by the callers it travelled through:
 *
 *   "while decoding graph: nodes[3].inputs[1]: refers to buffer 9, which does
 *    not exist"
 *
 * Ownership: a function that returns a status hands the caller one status
 * that the caller must free (pw_status_free), ignore (pw_status_ignore) or
 * return to its own caller. Statuses are independent values: any thread may
 * free a status it owns.
 *
 * Statuses are the one thing the library allocates with the C library's
 * malloc rather than a pw_allocator_t, because an error must be reportable
 * when allocation is exactly what failed. If malloc fails, the status still
 * carries its code; only the message degrades to the code's name.
 */
#ifndef PATHWAYS_STATUS_H_
#define PATHWAYS_STATUS_H_

#include <stdarg.h>

#include "pathways/api.h"

PW_EXTERN_C_BEGIN

typedef enum pw_status_code_e {
  PW_STATUS_OK = 0,
  PW_STATUS_CANCELLED = 1,
  PW_STATUS_UNKNOWN = 2,
  PW_STATUS_INVALID_ARGUMENT = 3,
  PW_STATUS_DEADLINE_EXCEEDED = 4,
  PW_STATUS_NOT_FOUND = 5,
  PW_STATUS_ALREADY_EXISTS = 6,
  PW_STATUS_PERMISSION_DENIED = 7,
  PW_STATUS_RESOURCE_EXHAUSTED = 8,
  PW_STATUS_FAILED_PRECONDITION = 9,
  PW_STATUS_ABORTED = 10,
  PW_STATUS_OUT_OF_RANGE = 11,
  PW_STATUS_UNIMPLEMENTED = 12,
  PW_STATUS_INTERNAL = 13,
  PW_STATUS_UNAVAILABLE = 14,
  PW_STATUS_DATA_LOSS = 15,
  PW_STATUS_UNAUTHENTICATED = 16,
} pw_status_code_t;

#define PW_STATUS_CODE_COUNT 17

typedef struct pw_status_s* pw_status_t;

#define pw_ok_status() ((pw_status_t)NULL)

/* Creates a status with |code| and a printf-formatted message. |code| must
 * not be PW_STATUS_OK (an OK status is NULL); an out-of-range code becomes
 * PW_STATUS_UNKNOWN with the bad value in the message. Never returns NULL. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_status_make(pw_status_code_t code,
                                                     const char* format, ...)
    PW_PRINTF_ATTR(2, 3);

/* va_list form of pw_status_make. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_status_makev(pw_status_code_t code,
                                                      const char* format,
                                                      va_list args)
    PW_PRINTF_ATTR(2, 0);

/* Prefixes |status|'s message with formatted context followed by ": ".
 * Consumes |status| and returns the annotated one (possibly the same handle).
 * OK in, OK out: annotating NULL returns NULL and formats nothing. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_status_annotate(pw_status_t status,
                                                         const char* format,
                                                         ...)
    PW_PRINTF_ATTR(2, 3);

/* Returns an independent copy of |status| (NULL for OK). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_status_clone(pw_status_t status);

/* The code of |status|; PW_STATUS_OK for NULL. */
PW_API pw_status_code_t pw_status_code(pw_status_t status);

/* The message with its context chain; "" for OK. Valid while |status| lives. */
PW_API const char* pw_status_message(pw_status_t status);

/* "OK", "INVALID_ARGUMENT", ...; "UNKNOWN_CODE" outside 0-16. Static storage. */
PW_API const char* pw_status_code_string(pw_status_code_t code);

/* Writes "CODE: message" (or "OK") into |buffer| of |capacity| bytes,
 * NUL-terminated and truncated if needed. Returns the length the full text
 * needs, excluding the NUL, as snprintf does. */
PW_API size_t pw_status_format(pw_status_t status, char* buffer,
                               size_t capacity);

/* Frees |status|. NULL is a no-op. */
PW_API void pw_status_free(pw_status_t status);

/* Frees |status|, saying at the call site that the error is deliberately
 * dropped. */
PW_API void pw_status_ignore(pw_status_t status);

static inline bool pw_status_is_ok(pw_status_t status) { return status == NULL; }

/* Returns from the enclosing function if |expr| yields an error. */
#define PW_RETURN_IF_ERROR(expr)                 \
  do {                                           \
    pw_status_t pw__status_tmp = (expr);         \
    if (PW_UNLIKELY(pw__status_tmp != NULL)) {   \
      return pw__status_tmp;                     \
    }                                            \
  } while (0)

/* As PW_RETURN_IF_ERROR, prefixing the error with formatted context. */
#define PW_RETURN_IF_ERROR_CTX(expr, ...)                         \
  do {                                                            \
    pw_status_t pw__status_tmp = (expr);                          \
    if (PW_UNLIKELY(pw__status_tmp != NULL)) {                    \
      return pw_status_annotate(pw__status_tmp, __VA_ARGS__);     \
    }                                                             \
  } while (0)

PW_EXTERN_C_END

#endif /* PATHWAYS_STATUS_H_ */
