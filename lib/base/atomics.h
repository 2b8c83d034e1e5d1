/* Internal: the one place the library touches atomics.
 *
 * Default build: Concurrency Kit's ck_pr (inline asm, what the library ships).
 * PW_ATOMICS_C11 (the tsan preset): C11 <stdatomic.h>, because ThreadSanitizer
 * cannot see ck_pr's inline asm and reports false races (docs/toolchain.md).
 *
 * The API is the same in both: typed wrapper structs so a plain access cannot
 * slip through, and explicit memory orders in the names:
 *   _relaxed: atomic, no ordering
 *   _acquire / _release / _acq_rel: as in C11
 * Read-modify-writes without a suffix are sequentially consistent (on x86
 * every locked instruction is). */
#ifndef PW_BASE_ATOMICS_H_
#define PW_BASE_ATOMICS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PW_CACHE_LINE 64

#if defined(PW_ATOMICS_C11)

#include <stdatomic.h>

typedef struct { _Atomic uint32_t v; } pw_atomic_u32_t;
typedef struct { _Atomic uint64_t v; } pw_atomic_u64_t;
typedef struct { _Atomic(void*) v; } pw_atomic_ptr_t;

#define PW__A_INIT(x) ATOMIC_VAR_INIT(x)

static inline void pw_atomic_init_u32(pw_atomic_u32_t* a, uint32_t x) { atomic_init(&a->v, x); }
static inline void pw_atomic_init_u64(pw_atomic_u64_t* a, uint64_t x) { atomic_init(&a->v, x); }
static inline void pw_atomic_init_ptr(pw_atomic_ptr_t* a, void* x) { atomic_init(&a->v, x); }

static inline uint32_t pw_atomic_load_u32_relaxed(pw_atomic_u32_t* a) { return atomic_load_explicit(&a->v, memory_order_relaxed); }
static inline uint32_t pw_atomic_load_u32_acquire(pw_atomic_u32_t* a) { return atomic_load_explicit(&a->v, memory_order_acquire); }
static inline void pw_atomic_store_u32_relaxed(pw_atomic_u32_t* a, uint32_t x) { atomic_store_explicit(&a->v, x, memory_order_relaxed); }
static inline void pw_atomic_store_u32_release(pw_atomic_u32_t* a, uint32_t x) { atomic_store_explicit(&a->v, x, memory_order_release); }
static inline uint32_t pw_atomic_fetch_add_u32(pw_atomic_u32_t* a, uint32_t x) { return atomic_fetch_add(&a->v, x); }
static inline uint32_t pw_atomic_fetch_sub_u32(pw_atomic_u32_t* a, uint32_t x) { return atomic_fetch_sub(&a->v, x); }
static inline uint32_t pw_atomic_fetch_or_u32(pw_atomic_u32_t* a, uint32_t x) { return atomic_fetch_or(&a->v, x); }
static inline uint32_t pw_atomic_exchange_u32(pw_atomic_u32_t* a, uint32_t x) { return atomic_exchange(&a->v, x); }
static inline bool pw_atomic_cas_u32(pw_atomic_u32_t* a, uint32_t* expected, uint32_t desired) { return atomic_compare_exchange_strong(&a->v, expected, desired); }

static inline uint64_t pw_atomic_load_u64_relaxed(pw_atomic_u64_t* a) { return atomic_load_explicit(&a->v, memory_order_relaxed); }
static inline uint64_t pw_atomic_load_u64_acquire(pw_atomic_u64_t* a) { return atomic_load_explicit(&a->v, memory_order_acquire); }
static inline void pw_atomic_store_u64_relaxed(pw_atomic_u64_t* a, uint64_t x) { atomic_store_explicit(&a->v, x, memory_order_relaxed); }
static inline void pw_atomic_store_u64_release(pw_atomic_u64_t* a, uint64_t x) { atomic_store_explicit(&a->v, x, memory_order_release); }
static inline uint64_t pw_atomic_fetch_add_u64(pw_atomic_u64_t* a, uint64_t x) { return atomic_fetch_add(&a->v, x); }
static inline uint64_t pw_atomic_fetch_sub_u64(pw_atomic_u64_t* a, uint64_t x) { return atomic_fetch_sub(&a->v, x); }
static inline uint64_t pw_atomic_exchange_u64(pw_atomic_u64_t* a, uint64_t x) { return atomic_exchange(&a->v, x); }
static inline bool pw_atomic_cas_u64(pw_atomic_u64_t* a, uint64_t* expected, uint64_t desired) { return atomic_compare_exchange_strong(&a->v, expected, desired); }

static inline void* pw_atomic_load_ptr_relaxed(pw_atomic_ptr_t* a) { return atomic_load_explicit(&a->v, memory_order_relaxed); }
static inline void* pw_atomic_load_ptr_acquire(pw_atomic_ptr_t* a) { return atomic_load_explicit(&a->v, memory_order_acquire); }
static inline void pw_atomic_store_ptr_relaxed(pw_atomic_ptr_t* a, void* x) { atomic_store_explicit(&a->v, x, memory_order_relaxed); }
static inline void pw_atomic_store_ptr_release(pw_atomic_ptr_t* a, void* x) { atomic_store_explicit(&a->v, x, memory_order_release); }
static inline void* pw_atomic_exchange_ptr(pw_atomic_ptr_t* a, void* x) { return atomic_exchange(&a->v, x); }
static inline bool pw_atomic_cas_ptr(pw_atomic_ptr_t* a, void** expected, void* desired) { return atomic_compare_exchange_strong(&a->v, expected, desired); }

static inline void pw_atomic_fence_acquire(void) { atomic_thread_fence(memory_order_acquire); }
static inline void pw_atomic_fence_release(void) { atomic_thread_fence(memory_order_release); }
static inline void pw_atomic_fence_seq_cst(void) { atomic_thread_fence(memory_order_seq_cst); }
/* For Dekker pairs (a locked RMW on one word, then this load of the
 * other, on both sides): a plain load on x86. */
static inline uint32_t pw_atomic_load_u32_seq_cst(pw_atomic_u32_t* a) { return atomic_load(&a->v); }
static inline void* pw_atomic_load_ptr_seq_cst(pw_atomic_ptr_t* a) { return atomic_load(&a->v); }

#else /* Concurrency Kit */

#include <ck_pr.h>

typedef struct { uint32_t v; } pw_atomic_u32_t;
typedef struct { uint64_t v; } pw_atomic_u64_t;
typedef struct { void* v; } pw_atomic_ptr_t;

static inline void pw_atomic_init_u32(pw_atomic_u32_t* a, uint32_t x) { a->v = x; }
static inline void pw_atomic_init_u64(pw_atomic_u64_t* a, uint64_t x) { a->v = x; }
static inline void pw_atomic_init_ptr(pw_atomic_ptr_t* a, void* x) { a->v = x; }

static inline uint32_t pw_atomic_load_u32_relaxed(pw_atomic_u32_t* a) { return ck_pr_load_32(&a->v); }
static inline uint32_t pw_atomic_load_u32_acquire(pw_atomic_u32_t* a) { uint32_t x = ck_pr_load_32(&a->v); ck_pr_fence_acquire(); return x; }
static inline void pw_atomic_store_u32_relaxed(pw_atomic_u32_t* a, uint32_t x) { ck_pr_store_32(&a->v, x); }
static inline void pw_atomic_store_u32_release(pw_atomic_u32_t* a, uint32_t x) { ck_pr_fence_release(); ck_pr_store_32(&a->v, x); }
static inline uint32_t pw_atomic_fetch_add_u32(pw_atomic_u32_t* a, uint32_t x) { return ck_pr_faa_32(&a->v, x); }
static inline uint32_t pw_atomic_fetch_sub_u32(pw_atomic_u32_t* a, uint32_t x) { return ck_pr_faa_32(&a->v, (uint32_t)0 - x); }
static inline uint32_t pw_atomic_fetch_or_u32(pw_atomic_u32_t* a, uint32_t x) {
  uint32_t old = ck_pr_load_32(&a->v);
  while (!ck_pr_cas_32_value(&a->v, old, old | x, &old)) ck_pr_stall();
  return old;
}
static inline uint32_t pw_atomic_exchange_u32(pw_atomic_u32_t* a, uint32_t x) { return ck_pr_fas_32(&a->v, x); }
static inline bool pw_atomic_cas_u32(pw_atomic_u32_t* a, uint32_t* expected, uint32_t desired) { return ck_pr_cas_32_value(&a->v, *expected, desired, expected); }

static inline uint64_t pw_atomic_load_u64_relaxed(pw_atomic_u64_t* a) { return ck_pr_load_64(&a->v); }
static inline uint64_t pw_atomic_load_u64_acquire(pw_atomic_u64_t* a) { uint64_t x = ck_pr_load_64(&a->v); ck_pr_fence_acquire(); return x; }
static inline void pw_atomic_store_u64_relaxed(pw_atomic_u64_t* a, uint64_t x) { ck_pr_store_64(&a->v, x); }
static inline void pw_atomic_store_u64_release(pw_atomic_u64_t* a, uint64_t x) { ck_pr_fence_release(); ck_pr_store_64(&a->v, x); }
static inline uint64_t pw_atomic_fetch_add_u64(pw_atomic_u64_t* a, uint64_t x) { return ck_pr_faa_64(&a->v, x); }
static inline uint64_t pw_atomic_fetch_sub_u64(pw_atomic_u64_t* a, uint64_t x) { return ck_pr_faa_64(&a->v, (uint64_t)0 - x); }
static inline uint64_t pw_atomic_exchange_u64(pw_atomic_u64_t* a, uint64_t x) { return ck_pr_fas_64(&a->v, x); }
static inline bool pw_atomic_cas_u64(pw_atomic_u64_t* a, uint64_t* expected, uint64_t desired) { return ck_pr_cas_64_value(&a->v, *expected, desired, expected); }

static inline void* pw_atomic_load_ptr_relaxed(pw_atomic_ptr_t* a) { return ck_pr_load_ptr(&a->v); }
static inline void* pw_atomic_load_ptr_acquire(pw_atomic_ptr_t* a) { void* x = ck_pr_load_ptr(&a->v); ck_pr_fence_acquire(); return x; }
static inline void pw_atomic_store_ptr_relaxed(pw_atomic_ptr_t* a, void* x) { ck_pr_store_ptr(&a->v, x); }
static inline void pw_atomic_store_ptr_release(pw_atomic_ptr_t* a, void* x) { ck_pr_fence_release(); ck_pr_store_ptr(&a->v, x); }
static inline void* pw_atomic_exchange_ptr(pw_atomic_ptr_t* a, void* x) { return ck_pr_fas_ptr(&a->v, x); }
static inline bool pw_atomic_cas_ptr(pw_atomic_ptr_t* a, void** expected, void* desired) { return ck_pr_cas_ptr_value(&a->v, *expected, desired, expected); }

static inline void pw_atomic_fence_acquire(void) { ck_pr_fence_acquire(); }
static inline void pw_atomic_fence_release(void) { ck_pr_fence_release(); }
static inline void pw_atomic_fence_seq_cst(void) { ck_pr_fence_memory(); }
/* For Dekker pairs (a locked RMW on one word, then this load of the
 * other, on both sides): on x86 the locked RMW orders it; a plain load. */
static inline uint32_t pw_atomic_load_u32_seq_cst(pw_atomic_u32_t* a) { return ck_pr_load_32(&a->v); }
static inline void* pw_atomic_load_ptr_seq_cst(pw_atomic_ptr_t* a) { return ck_pr_load_ptr(&a->v); }

#endif

/* Spin-wait hint (pause on x86). */
static inline void pw_atomic_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

#endif /* PW_BASE_ATOMICS_H_ */
