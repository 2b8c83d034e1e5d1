/* libpathways: export, attribute and linkage macros shared by every public
 * header. Nothing here allocates or has state. */
#ifndef PATHWAYS_API_H_
#define PATHWAYS_API_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(PW_STATIC)
#define PW_API
#elif defined(__GNUC__) || defined(__clang__)
#define PW_API __attribute__((visibility("default")))
#else
#define PW_API
#endif

#if defined(__GNUC__) || defined(__clang__)
/* The caller must consume the result (free, ignore or propagate a status). */
#define PW_MUST_USE_RESULT __attribute__((warn_unused_result))
#define PW_PRINTF_ATTR(fmt_index, first_arg) \
  __attribute__((format(printf, fmt_index, first_arg)))
#define PW_LIKELY(x) __builtin_expect(!!(x), 1)
#define PW_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define PW_MUST_USE_RESULT
#define PW_PRINTF_ATTR(fmt_index, first_arg)
#define PW_LIKELY(x) (x)
#define PW_UNLIKELY(x) (x)
#endif

#ifdef __cplusplus
#define PW_EXTERN_C_BEGIN extern "C" {
#define PW_EXTERN_C_END }
#else
#define PW_EXTERN_C_BEGIN
#define PW_EXTERN_C_END
#endif

#endif /* PATHWAYS_API_H_ */
