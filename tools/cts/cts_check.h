/* pathways-cts: the assertion layer, the counting allocator and the case
 * table shared by every suite (backend, transport, store).
 *
 * Each case runs in a forked child (cts_run.c): an assertion that fails
 * prints "FILE:LINE: what failed: message" to stderr and ends the child
 * with status 1; a skip prints its reason and ends it with
 * PW_CTS_EXIT_SKIP. The parent turns that into TAP or JUnit. Only the
 * installed public headers are used. */
#ifndef PW_TOOLS_CTS_CTS_CHECK_H_
#define PW_TOOLS_CTS_CTS_CHECK_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pathways/cts.h"
#include "pathways/pathways.h"
#include "pathways/plugin.h"

#define PW_CTS_EXIT_SKIP 77

/* How long any wait for a completion may take before the case fails as a
 * hang. Generous: sanitizer builds on two busy cores are slow. */
#define PW_CTS_TIMEOUT_NS (20ull * 1000 * 1000 * 1000)

#if defined(__GNUC__) || defined(__clang__)
#define PW_CTS_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define PW_CTS_NORETURN __attribute__((noreturn))
#else
#define PW_CTS_PRINTF(f, a)
#define PW_CTS_NORETURN
#endif

/* Ends the case as failed. |fmt| starts with a "|" that is not printed
 * (so that the macros below may pass no message at all). */
PW_CTS_NORETURN void pw_cts_fail(const char* file, int line, const char* what, const char* fmt,
                                 ...) PW_CTS_PRINTF(4, 5);
/* Ends the case as skipped with a reason. */
PW_CTS_NORETURN void pw_cts_skip(const char* fmt, ...) PW_CTS_PRINTF(1, 2);

#define PW_CTS_FAIL(...) pw_cts_fail(__FILE__, __LINE__, "failure", "|" __VA_ARGS__)
#define PW_CTS_SKIP(...) pw_cts_skip(__VA_ARGS__)

#define PW_CTS_CHECK_(cond, what, ...)                                          \
  do {                                                                          \
    if (!(cond)) pw_cts_fail(__FILE__, __LINE__, what, "|" __VA_ARGS__);         \
  } while (0)

/* PW_CTS_ASSERT*(..., [fmt, args...]): the message is optional. */
#define PW_CTS_ASSERT(cond, ...) PW_CTS_CHECK_((cond), #cond, __VA_ARGS__)
#define PW_CTS_ASSERT_EQ(a, b, ...) PW_CTS_CHECK_((a) == (b), #a " == " #b, __VA_ARGS__)
#define PW_CTS_ASSERT_NE(a, b, ...) PW_CTS_CHECK_((a) != (b), #a " != " #b, __VA_ARGS__)
#define PW_CTS_ASSERT_LT(a, b, ...) PW_CTS_CHECK_((a) < (b), #a " < " #b, __VA_ARGS__)
#define PW_CTS_ASSERT_LEQ(a, b, ...) PW_CTS_CHECK_((a) <= (b), #a " <= " #b, __VA_ARGS__)
#define PW_CTS_ASSERT_GT(a, b, ...) PW_CTS_CHECK_((a) > (b), #a " > " #b, __VA_ARGS__)
#define PW_CTS_ASSERT_GEQ(a, b, ...) PW_CTS_CHECK_((a) >= (b), #a " >= " #b, __VA_ARGS__)
#define PW_CTS_ASSERT_NULL(p, ...) PW_CTS_CHECK_((p) == NULL, #p " is NULL", __VA_ARGS__)
#define PW_CTS_ASSERT_NOT_NULL(p, ...) PW_CTS_CHECK_((p) != NULL, #p " is not NULL", __VA_ARGS__)
#define PW_CTS_ASSERT_STR_EQ(a, b, ...) \
  PW_CTS_CHECK_(strcmp((a), (b)) == 0, #a " equals " #b, __VA_ARGS__)

/* Fails the case unless |status| is OK (the status is freed). */
void pw_cts_assert_ok(pw_status_t status, const char* what, const char* file, int line);
#define PW_CTS_OK(expr) pw_cts_assert_ok((expr), #expr, __FILE__, __LINE__)

/* Fails the case unless |status| is an error whose code is one of the
 * |count| codes in |allowed| and whose message is not empty; frees it.
 * Returns the code. */
pw_status_code_t pw_cts_assert_error(pw_status_t status, const pw_status_code_t* allowed,
                                     size_t count, const char* what);
#define PW_CTS_ERROR(expr, ...)                                               \
  pw_cts_assert_error((expr), (const pw_status_code_t[]){__VA_ARGS__},         \
                      sizeof((const pw_status_code_t[]){__VA_ARGS__}) /       \
                          sizeof(pw_status_code_t),                           \
                      #expr)

/* --- A counting allocator: leaks, double frees, size mismatches, and
 * failure injection (the Nth attempt fails). Thread-safe. --- */

typedef struct pw_cts_allocator_t {
  atomic_size_t allocations;
  atomic_size_t frees;
  atomic_size_t live_bytes;
  atomic_size_t attempts;
  atomic_size_t size_mismatches;
  size_t fail_at;   /* 1-based attempt that fails; 0 = never */
  bool fail_after;  /* every attempt from fail_at on fails */
} pw_cts_allocator_t;

void pw_cts_allocator_init(pw_cts_allocator_t* t);
pw_allocator_t pw_cts_allocator(pw_cts_allocator_t* t);
size_t pw_cts_allocator_live(pw_cts_allocator_t* t);

/* Runs |body(allocator, expect_failure, user)| once without failures to
 * count its allocation attempts N, then N times failing attempt 1..N in
 * turn; |body| returns true when it behaved (an injected failure reported
 * RESOURCE_EXHAUSTED and cleaned up). Nothing may stay allocated after
 * each run. Returns N, or -1 with |why| (256 bytes) filled. */
typedef bool (*pw_cts_sweep_fn_t)(pw_allocator_t allocator, bool expect_failure, void* user);
int pw_cts_allocator_sweep(pw_cts_sweep_fn_t body, void* user, char* why);

/* --- The run's context and the case tables. --- */

typedef struct pw_cts_context_t {
  pw_plugin_t* plugin;                 /* NULL when a suite is run on a linked factory */
  const pw_plugin_factory_t* factory;
  const pw_cts_hooks_t* hooks;         /* never NULL: a zero struct when the plugin has none */
  const char* args;                    /* per case, with {tmp} replaced */
  const char* tmp_dir;                 /* a fresh directory per case */
} pw_cts_context_t;

/* A hook of the context, or NULL when beyond the plugin's struct_size. */
#define PW_CTS_HOOK(ctx, member)                                                          \
  ((ctx)->hooks->struct_size >= PW_STRUCT_SIZE(pw_cts_hooks_t, member) ? (ctx)->hooks->member \
                                                                        : 0)

typedef void (*pw_cts_case_fn_t)(const pw_cts_context_t* ctx);

typedef struct pw_cts_case_t {
  const char* name; /* "memory_round_trip"; the full name is "backend.memory_round_trip" */
  pw_cts_case_fn_t fn;
} pw_cts_case_t;

/* The cases of each kind, in run order; |*out_count| entries. */
const pw_cts_case_t* pw_cts_backend_cases(size_t* out_count);
const pw_cts_case_t* pw_cts_transport_cases(size_t* out_count);
const pw_cts_case_t* pw_cts_store_cases(size_t* out_count);

/* The hooks pathways-cts supplies for the bundled modules (by factory
 * name: "cpu", "sim", "inproc", "dir"), or NULL. */
const pw_cts_hooks_t* pw_cts_builtin_hooks(const pw_plugin_factory_t* factory);

/* Elapsed monotonic time, for bounded waits only (never asserted on). */
uint64_t pw_cts_now_ns(void);

#endif /* PW_TOOLS_CTS_CTS_CHECK_H_ */
