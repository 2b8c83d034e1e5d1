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

/* Versioned structs. Every option, descriptor, vtable and out-struct whose
 * layout is public starts with `size_t struct_size`, set by whoever owns the
 * memory (the caller for options and out-structs, the plugin for its
 * vtable) to sizeof the struct it was built against. Structs only grow at
 * the end; each has a PW_<NAME>_SIZE_V1 constant (its size when first
 * published, PW_STRUCT_SIZE of its last v1 field). A struct_size below V1
 * is INVALID_ARGUMENT naming the struct and the call; a field beyond
 * struct_size is treated as absent (zero, a NULL method: UNIMPLEMENTED);
 * an out-struct is filled only as far as its struct_size reaches. Never an
 * exact-size match. */
#define PW_STRUCT_SIZE(type, last_field) \
  (offsetof(type, last_field) + sizeof(((type*)0)->last_field))

#ifdef __cplusplus
#define PW_EXTERN_C_BEGIN extern "C" {
#define PW_EXTERN_C_END }
#else
#define PW_EXTERN_C_BEGIN
#define PW_EXTERN_C_END
#endif

#endif /* PATHWAYS_API_H_ */
