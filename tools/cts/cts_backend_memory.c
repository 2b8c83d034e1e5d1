/* CTS cases: device memory (allocate, deallocate, the synchronous copies,
 * host_pointer). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, strnlen */
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "cts_backend.h"

/* Deterministic test bytes. */
static void pw_cts_pattern(unsigned char* p, size_t size, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < size; ++i) {
    x = x * 1664525u + 1013904223u;
    p[i] = (unsigned char)(x >> 24);
  }
}

void pw_cts_case_memory_round_trip(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t count = pw_cts_backend_device_count(&b);
  static const size_t sizes[] = {1, 7, 64, 4096, 65536 + 3};
  unsigned char* src = malloc(65536 + 3);
  unsigned char* dst = malloc(65536 + 3);
  PW_CTS_ASSERT(src != NULL && dst != NULL);
  for (uint32_t d = 0; d < count && d < 8; ++d) {
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); ++k) {
      size_t size = sizes[k];
      pw_backend_memory_t m = NULL;
      PW_CTS_OK(pw_cts_backend_allocate(&b, d, size, &m));
      pw_cts_pattern(src, size, d * 31u + (uint32_t)k);
      PW_CTS_OK(pw_cts_backend_copy_to_device(&b, d, m, 0, src, size));
      memset(dst, 0, size);
      PW_CTS_OK(pw_cts_backend_copy_to_host(&b, d, m, 0, dst, size));
      PW_CTS_ASSERT_EQ(memcmp(src, dst, size), 0, "device %u, %zu bytes: round trip differs", d,
                   size);
      /* A partial write in the middle changes exactly those bytes. */
      if (size >= 16) {
        unsigned char patch[8];
        memset(patch, 0xA5, sizeof(patch));
        PW_CTS_OK(pw_cts_backend_copy_to_device(&b, d, m, 5, patch, sizeof(patch)));
        memcpy(src + 5, patch, sizeof(patch));
        PW_CTS_OK(pw_cts_backend_copy_to_host(&b, d, m, 0, dst, size));
        PW_CTS_ASSERT_EQ(memcmp(src, dst, size), 0, "device %u: partial write", d);
        PW_CTS_OK(pw_cts_backend_copy_to_host(&b, d, m, size - 3, dst, 3));
        PW_CTS_ASSERT_EQ(memcmp(src + size - 3, dst, 3), 0, "device %u: partial read", d);
      }
      pw_cts_backend_deallocate(&b, d, m);
    }
  }
  /* Allocations are independent of each other. */
  pw_backend_memory_t a = NULL;
  pw_backend_memory_t c = NULL;
  PW_CTS_OK(pw_cts_backend_allocate(&b, 0, 32, &a));
  PW_CTS_OK(pw_cts_backend_allocate(&b, 0, 32, &c));
  PW_CTS_ASSERT(a != c);
  memset(src, 1, 32);
  memset(dst, 2, 32);
  PW_CTS_OK(pw_cts_backend_copy_to_device(&b, 0, a, 0, src, 32));
  PW_CTS_OK(pw_cts_backend_copy_to_device(&b, 0, c, 0, dst, 32));
  PW_CTS_OK(pw_cts_backend_copy_to_host(&b, 0, a, 0, dst, 32));
  PW_CTS_ASSERT_EQ(memcmp(src, dst, 32), 0, "writing one allocation changed another");
  pw_cts_backend_deallocate(&b, 0, a);
  pw_cts_backend_deallocate(&b, 0, c);
  free(src);
  free(dst);
  pw_cts_destroy(&b);
}

void pw_cts_case_memory_out_of_range(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  pw_backend_memory_t m = NULL;
  PW_CTS_OK(pw_cts_backend_allocate(&b, 0, 64, &m));
  unsigned char before[64];
  unsigned char buffer[128];
  unsigned char after[64];
  pw_cts_pattern(before, sizeof(before), 7);
  memset(buffer, 0xEE, sizeof(buffer));
  PW_CTS_OK(pw_cts_backend_copy_to_device(&b, 0, m, 0, before, sizeof(before)));
  static const struct {
    size_t offset;
    size_t size;
  } bad[] = {
      {0, 65}, {60, 8}, {64, 1}, {65, 0}, {1000, 1}, {SIZE_MAX, 2}, {2, SIZE_MAX}, {SIZE_MAX, 0},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    /* Sizes may exceed |buffer|: the backend must check the range before
     * touching it. */
    PW_CTS_ERROR(pw_cts_backend_copy_to_device(&b, 0, m, bad[i].offset, buffer, bad[i].size),
                 PW_STATUS_OUT_OF_RANGE);
    PW_CTS_ERROR(pw_cts_backend_copy_to_host(&b, 0, m, bad[i].offset, buffer, bad[i].size),
                 PW_STATUS_OUT_OF_RANGE);
  }
  /* Refused writes changed nothing. */
  PW_CTS_OK(pw_cts_backend_copy_to_host(&b, 0, m, 0, after, sizeof(after)));
  PW_CTS_ASSERT_EQ(memcmp(before, after, sizeof(before)), 0, "an out-of-range write wrote");
  /* The edges themselves are in range. */
  PW_CTS_OK(pw_cts_backend_copy_to_host(&b, 0, m, 64, buffer, 0));
  PW_CTS_OK(pw_cts_backend_copy_to_device(&b, 0, m, 64, buffer, 0));
  PW_CTS_OK(pw_cts_backend_copy_to_host(&b, 0, m, 63, buffer, 1));
  PW_CTS_ASSERT_EQ(buffer[0], before[63]);
  pw_cts_backend_deallocate(&b, 0, m);
  pw_cts_destroy(&b);
}

void pw_cts_case_memory_zero_size(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t count = pw_cts_backend_device_count(&b);
  pw_backend_memory_t m[2] = {NULL, NULL};
  uint32_t last = count - 1;
  PW_CTS_OK(pw_cts_backend_allocate(&b, 0, 0, &m[0]));
  PW_CTS_OK(pw_cts_backend_allocate(&b, last, 0, &m[1]));
  PW_CTS_ASSERT(m[0] != NULL && m[1] != NULL, "a zero-size allocation is a valid handle");
  unsigned char byte = 0x5A;
  for (int i = 0; i < 2; ++i) {
    uint32_t d = i == 0 ? 0 : last;
    PW_CTS_OK(pw_cts_backend_copy_to_device(&b, d, m[i], 0, &byte, 0));
    PW_CTS_OK(pw_cts_backend_copy_to_host(&b, d, m[i], 0, &byte, 0));
    PW_CTS_ERROR(pw_cts_backend_copy_to_device(&b, d, m[i], 0, &byte, 1), PW_STATUS_OUT_OF_RANGE);
    PW_CTS_ERROR(pw_cts_backend_copy_to_host(&b, d, m[i], 0, &byte, 1), PW_STATUS_OUT_OF_RANGE);
    PW_CTS_ERROR(pw_cts_backend_copy_to_host(&b, d, m[i], 1, &byte, 0), PW_STATUS_OUT_OF_RANGE);
  }
  PW_CTS_ASSERT_EQ(byte, 0x5A, "a zero-byte copy wrote");
  pw_cts_backend_deallocate(&b, 0, m[0]);
  pw_cts_backend_deallocate(&b, last, m[1]);
  pw_cts_destroy(&b);
}

void pw_cts_case_memory_too_large(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t count = pw_cts_backend_device_count(&b);
  pw_backend_memory_t m = (pw_backend_memory_t)&m;
  PW_CTS_ERROR(pw_cts_backend_allocate(&b, 0, SIZE_MAX / 2, &m), PW_STATUS_RESOURCE_EXHAUSTED);
  PW_CTS_ASSERT_NULL(m, "failed allocate left a handle");
  PW_CTS_ERROR(pw_cts_backend_allocate(&b, 0, SIZE_MAX, &m), PW_STATUS_RESOURCE_EXHAUSTED,
               PW_STATUS_OUT_OF_RANGE);
  PW_CTS_ERROR(pw_cts_backend_allocate(&b, count, 8, &m), PW_STATUS_INVALID_ARGUMENT,
               PW_STATUS_OUT_OF_RANGE, PW_STATUS_NOT_FOUND);
  /* More than the device reports as its capacity, when it reports one. */
  pw_backend_device_info_t info;
  PW_CTS_OK(pw_cts_backend_device_info(&b, 0, &info));
  if (info.memory_bytes != 0 && info.memory_bytes < SIZE_MAX / 2) {
    PW_CTS_ERROR(pw_cts_backend_allocate(&b, 0, (size_t)info.memory_bytes + 1, &m),
                 PW_STATUS_RESOURCE_EXHAUSTED);
  }
  /* Still usable. */
  PW_CTS_OK(pw_cts_backend_allocate(&b, 0, 16, &m));
  pw_cts_backend_deallocate(&b, 0, m);
  pw_cts_destroy(&b);
}

void pw_cts_case_host_pointer(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  pw_backend_memory_t m = NULL;
  PW_CTS_OK(pw_cts_backend_allocate(&b, 0, 256, &m));
  unsigned char src[256];
  unsigned char dst[256];
  pw_cts_pattern(src, sizeof(src), 3);
  PW_CTS_OK(pw_cts_backend_copy_to_device(&b, 0, m, 0, src, sizeof(src)));
  unsigned char* p = pw_cts_backend_host_pointer(&b, 0, m);
  if (p == NULL) {
    /* Not host accessible: fine, but then consistently so. */
    PW_CTS_ASSERT_NULL(pw_cts_backend_host_pointer(&b, 0, m));
  } else {
    PW_CTS_ASSERT_EQ(memcmp(p, src, sizeof(src)), 0, "host pointer does not show the memory");
    memset(p, 0x3C, 16);
    PW_CTS_OK(pw_cts_backend_copy_to_host(&b, 0, m, 0, dst, sizeof(dst)));
    PW_CTS_ASSERT_EQ(dst[0], 0x3C, "writes through the host pointer are not seen by copies");
    PW_CTS_ASSERT_EQ(dst[15], 0x3C);
    PW_CTS_ASSERT_EQ(memcmp(dst + 16, src + 16, sizeof(src) - 16), 0);
    PW_CTS_ASSERT_EQ(pw_cts_backend_host_pointer(&b, 0, m), p, "host pointer is not stable");
  }
  pw_cts_backend_deallocate(&b, 0, m);
  pw_cts_destroy(&b);
}

static void pw_cts_require_allocator(const pw_cts_fixture_t* f) {
  if (!f->takes_allocator) {
    PW_CTS_SKIP("%s: the backend does not take an allocator", f->name);
  }
}

void pw_cts_case_destroy_frees_everything(const pw_cts_fixture_t* f) {
  pw_cts_require_allocator(f);
  pw_cts_allocator_t t;
  pw_cts_allocator_init(&t);
  pw_backend_t b;
  pw_cts_create(f, &t, &b);
  uint32_t devices[8];
  uint32_t n = 0;
  pw_mesh_shape_t mesh = pw_cts_mesh(&b, devices, &n);
  pw_backend_executable_t e = pw_cts_load(&b, f->copy_program, &mesh, 8, 1, 1);
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, n);
  pw_cts_gang_t gang;
  pw_cts_gang_alloc(&b, &gang, n, devices, 8, 4);
  pw_cts_gang_launch(&b, &gang, e, 1, &tracker, 0, false);
  pw_cts_tracker_wait(&tracker, n, "copy before destroy");
  PW_CTS_ASSERT_GT(atomic_load(&t.allocations), 0, "the backend never used its allocator");
  pw_cts_gang_free(&b, &gang);
  pw_cts_backend_unload(&b, e);
  pw_cts_destroy(&b);
  PW_CTS_ASSERT_EQ(pw_cts_allocator_live(&t), 0, "%zu allocations (%zu bytes) outlived destroy",
               pw_cts_allocator_live(&t), atomic_load(&t.live_bytes));
  PW_CTS_ASSERT_EQ(atomic_load(&t.size_mismatches), 0, "frees with the wrong size");
  pw_cts_tracker_free(&tracker);
}

/* One create + allocate + compile + load + teardown under |allocator|; an
 * injected allocation failure must surface as RESOURCE_EXHAUSTED and leave
 * nothing behind. */
static bool pw_cts_sweep_body(pw_allocator_t allocator, bool expect_failure, void* user) {
  const pw_cts_fixture_t* f = user;
  pw_backend_t b;
  memset(&b, 0, sizeof(b));
  pw_backend_memory_t m = NULL;
  void* bytes = NULL;
  size_t size = 0;
  pw_backend_executable_t e = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  char text[4096];
  uint32_t one = 1;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &one);
  size_t length = f->copy_program(&mesh, 4, text, sizeof(text));
  pw_status_t status = f->create(f, allocator, &b);
  if (status == NULL) status = pw_cts_backend_allocate(&b, 0, 64, &m);
  if (status == NULL) {
    status = pw_cts_backend_compile(&b, text, length, &mesh, NULL, allocator, &bytes, &size);
  }
  if (status == NULL) status = pw_cts_backend_load(&b, bytes, size, &e, &sig);
  pw_cts_backend_unload(&b, e);
  pw_allocator_free(allocator, bytes, size);
  pw_cts_backend_deallocate(&b, 0, m);
  if (b.vtable != NULL) pw_cts_backend_destroy(&b);
  pw_status_code_t code = pw_status_code(status);
  pw_status_free(status);
  return expect_failure ? code == PW_STATUS_RESOURCE_EXHAUSTED : code == PW_STATUS_OK;
}

void pw_cts_case_create_allocation_failures(const pw_cts_fixture_t* f) {
  pw_cts_require_allocator(f);
  char why[256] = "";
  int swept = pw_cts_allocator_sweep(pw_cts_sweep_body, (void*)f, why);
  PW_CTS_ASSERT_GEQ(swept, 1, "%s: %s", f->name, why);
}
