/* The backends' accumulate method (v6): dst += src on one device, for
 * every dtype with a sum; the dtype probe; refusals naming the dtype or
 * the range; the sim charges the adds as device time. */
#include <criterion/criterion.h>
#include <string.h>

#include "pathways/backends/cpu.h"
#include "pathways/backends/sim.h"
#include "plugin/backend_call.h"
#include "runtime/checks.h"
#include "support/test_allocators.h"

TestSuite(accumulate, .fini = pw_test_check_leaks);

typedef struct two_t {
  pw_backend_t backend;
  pw_backend_memory_t dst, src;
} two_t;

static void two_alloc(two_t* t, size_t bytes) {
  OK(pw__backend_allocate(&t->backend, 1, bytes, &t->dst));
  OK(pw__backend_allocate(&t->backend, 1, bytes, &t->src));
}

static void two_free(two_t* t) {
  pw__backend_deallocate(&t->backend, 1, t->dst);
  pw__backend_deallocate(&t->backend, 1, t->src);
  pw__backend_destroy(&t->backend);
}

/* dst = a, src = b, accumulate |n| elements of |dtype|, read dst to |out|. */
static void two_add(two_t* t, pw_dtype_t dtype, const void* a, const void* b, size_t n,
                    void* out) {
  size_t bytes = n * pw_dtype_size(dtype);
  OK(pw__backend_copy_to_device(&t->backend, 1, t->dst, 0, a, bytes));
  OK(pw__backend_copy_to_device(&t->backend, 1, t->src, 0, b, bytes));
  OK(pw__backend_accumulate(&t->backend, 1, dtype, t->dst, 0, t->src, 0, n));
  OK(pw__backend_copy_to_host(&t->backend, 1, t->dst, 0, out, bytes));
}

static void check_dtypes(pw_backend_t backend) {
  two_t t = {backend, NULL, NULL};
  two_alloc(&t, 64);
  float fa[3] = {1.5f, -2, 1e6f}, fb[3] = {0.25f, 2, 1}, fo[3];
  two_add(&t, PW_DTYPE_F32, fa, fb, 3, fo);
  cr_assert(fo[0] == 1.75f && fo[1] == 0 && fo[2] == 1000001.0f);
  double da[2] = {1e300, -1}, db[2] = {1e300, 0.5}, dout[2];
  two_add(&t, PW_DTYPE_F64, da, db, 2, dout);
  cr_assert(dout[0] == 2e300 && dout[1] == -0.5);
  int8_t ia[2] = {127, -128}, ib[2] = {1, -1}, io[2];
  two_add(&t, PW_DTYPE_I8, ia, ib, 2, io);
  cr_assert(io[0] == -128 && io[1] == 127, "i8 wraps");
  uint64_t ua[1] = {UINT64_MAX}, ub[1] = {2}, uo[1];
  two_add(&t, PW_DTYPE_U64, ua, ub, 1, uo);
  cr_assert_eq(uo[0], 1u, "u64 wraps");
  uint16_t ha[2] = {pw_f32_to_bf16(1.5f), pw_f32_to_bf16(-3)}, hb[2] = {pw_f32_to_bf16(2),
                                                                          pw_f32_to_bf16(1)};
  uint16_t ho[2];
  two_add(&t, PW_DTYPE_BF16, ha, hb, 2, ho);
  cr_assert(pw_bf16_to_f32(ho[0]) == 3.5f && pw_bf16_to_f32(ho[1]) == -2);
  uint16_t ga[1] = {pw_f32_to_f16(0.5f)}, gb[1] = {pw_f32_to_f16(0.25f)}, go[1];
  two_add(&t, PW_DTYPE_F16, ga, gb, 1, go);
  cr_assert(pw_f16_to_f32(go[0]) == 0.75f);
  float ca[2] = {1, 2}, cb[2] = {10, 20}, co[2];
  two_add(&t, PW_DTYPE_C64, ca, cb, 1, co);
  cr_assert(co[0] == 11 && co[1] == 22, "c64 adds both parts");
  /* Only part of the memory, at offsets. */
  int32_t base[4] = {1, 2, 3, 4}, add[4] = {10, 20, 30, 40}, got[4];
  OK(pw__backend_copy_to_device(&t.backend, 1, t.dst, 0, base, sizeof(base)));
  OK(pw__backend_copy_to_device(&t.backend, 1, t.src, 0, add, sizeof(add)));
  OK(pw__backend_accumulate(&t.backend, 1, PW_DTYPE_I32, t.dst, 4, t.src, 8, 2));
  OK(pw__backend_copy_to_host(&t.backend, 1, t.dst, 0, got, sizeof(got)));
  cr_assert(got[0] == 1 && got[1] == 32 && got[2] == 43 && got[3] == 4);
  /* The probe, and refusals naming the culprit. */
  OK(pw__backend_accumulate(&t.backend, 1, PW_DTYPE_I16, NULL, 0, NULL, 0, 0));
  FAILS(pw__backend_accumulate(&t.backend, 1, PW_DTYPE_BOOL, NULL, 0, NULL, 0, 0),
        PW_STATUS_UNIMPLEMENTED, "bool");
  FAILS(pw__backend_accumulate(&t.backend, 1, PW_DTYPE_F8E4M3FN, t.dst, 0, t.src, 0, 1),
        PW_STATUS_UNIMPLEMENTED, "f8e4m3fn");
  FAILS(pw__backend_accumulate(&t.backend, 1, PW_DTYPE_F32, t.dst, 60, t.src, 0, 2),
        PW_STATUS_OUT_OF_RANGE, "64-byte");
  FAILS(pw__backend_accumulate(&t.backend, 0, PW_DTYPE_F32, t.dst, 0, t.src, 0, 1),
        PW_STATUS_INVALID_ARGUMENT, "device");
  two_free(&t);
}

Test(accumulate, cpu_adds_every_dtype_with_a_sum) {
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = 2;
  pw_backend_t backend;
  OK(pw_cpu_backend_create(&o, &backend));
  check_dtypes(backend);
}

Test(accumulate, sim_adds_and_charges_device_time) {
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.devices_per_slice = 2;
  o.chip_flops_per_s = 1e9; /* one add per ns */
  pw_backend_t backend;
  OK(pw_sim_backend_create(&o, &backend));
  pw_sim_stats_t before = {.struct_size = sizeof(pw_sim_stats_t)};
  OK(pw_sim_backend_stats(backend, &before));
  two_t t = {backend, NULL, NULL};
  two_alloc(&t, 4096);
  float a[1000], b[1000], out[1000];
  for (int i = 0; i < 1000; ++i) a[i] = (float)i, b[i] = 1;
  two_add(&t, PW_DTYPE_F32, a, b, 1000, out);
  for (int i = 0; i < 1000; ++i) cr_assert_eq(out[i], (float)i + 1);
  pw_sim_stats_t after = {.struct_size = sizeof(pw_sim_stats_t)};
  OK(pw_sim_backend_stats(backend, &after));
  cr_assert_eq(after.busy_ns - before.busy_ns, 1000, "1000 adds at 1e9/s: %llu ns",
               (unsigned long long)(after.busy_ns - before.busy_ns));
  two_free(&t);
  pw_sim_backend_options_init(&o);
  o.devices_per_slice = 2;
  OK(pw_sim_backend_create(&o, &backend));
  check_dtypes(backend);
}
