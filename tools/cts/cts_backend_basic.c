/* CTS cases: the vtable itself, devices, compile and load. */
#define _POSIX_C_SOURCE 200809L /* strnlen */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cts_backend.h"

void pw_cts_case_vtable_basics(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  const pw_backend_vtable_t* v = b.vtable;
  PW_CTS_ASSERT_NOT_NULL(v);
  PW_CTS_ASSERT_GEQ(v->struct_size, PW_BACKEND_VTABLE_SIZE_V1, "struct_size %zu < v1 %zu",
                v->struct_size, (size_t)PW_BACKEND_VTABLE_SIZE_V1);
  PW_CTS_ASSERT_NOT_NULL(v->name);
  size_t length = strlen(v->name);
  PW_CTS_ASSERT(length > 0 && length < 64, "name '%s' must be 1..63 characters", v->name);
  for (size_t i = 0; i < length; ++i) {
    PW_CTS_ASSERT(v->name[i] > ' ' && v->name[i] < 0x7F, "name '%s' is not printable ASCII",
              v->name);
  }
  PW_CTS_ASSERT_STR_EQ(pw_cts_backend_name(&b), v->name);
  /* A complete backend has every required v1 method; health and
   * host_pointer are optional (the shim supplies defaults). */
  PW_CTS_ASSERT(PW_CTS_BACKEND_HAS(&b, destroy));
  PW_CTS_ASSERT(PW_CTS_BACKEND_HAS(&b, device_count));
  PW_CTS_ASSERT(PW_CTS_BACKEND_HAS(&b, device_info));
  PW_CTS_ASSERT(PW_CTS_BACKEND_HAS(&b, compile));
  PW_CTS_ASSERT(PW_CTS_BACKEND_HAS(&b, load));
  PW_CTS_ASSERT(PW_CTS_BACKEND_HAS(&b, unload));
  PW_CTS_ASSERT(PW_CTS_BACKEND_HAS(&b, allocate));
  PW_CTS_ASSERT(PW_CTS_BACKEND_HAS(&b, deallocate));
  PW_CTS_ASSERT(PW_CTS_BACKEND_HAS(&b, launch));
  PW_CTS_ASSERT(PW_CTS_BACKEND_HAS(&b, copy_to_device));
  PW_CTS_ASSERT(PW_CTS_BACKEND_HAS(&b, copy_to_host));
  /* Two instances report the same identity (it keys the compile cache). */
  pw_backend_t b2;
  pw_cts_create(f, NULL, &b2);
  PW_CTS_ASSERT_STR_EQ(b2.vtable->name, v->name);
  PW_CTS_ASSERT_EQ(b2.vtable->version, v->version);
  PW_CTS_ASSERT(b2.self != b.self, "two creates returned the same instance");
  pw_cts_destroy(&b2);
  pw_cts_destroy(&b);
}

void pw_cts_case_devices(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t count = pw_cts_backend_device_count(&b);
  PW_CTS_ASSERT_GEQ(count, 1);
  for (uint32_t d = 0; d < count; ++d) {
    pw_backend_device_info_t info;
    PW_CTS_OK(pw_cts_backend_device_info(&b, d, &info));
    size_t kind = strnlen(info.kind, sizeof(info.kind));
    PW_CTS_ASSERT(kind > 0 && kind < sizeof(info.kind), "device %u: kind must be a non-empty "
              "NUL-terminated string", d);
    PW_CTS_ASSERT_EQ(pw_cts_backend_health(&b, d), PW_DEVICE_HEALTHY, "device %u starts unhealthy", d);
  }
  pw_backend_device_info_t info;
  PW_CTS_ERROR(pw_cts_backend_device_info(&b, count, &info), PW_STATUS_INVALID_ARGUMENT,
               PW_STATUS_OUT_OF_RANGE, PW_STATUS_NOT_FOUND);
  PW_CTS_ERROR(pw_cts_backend_device_info(&b, UINT32_MAX, &info), PW_STATUS_INVALID_ARGUMENT,
               PW_STATUS_OUT_OF_RANGE, PW_STATUS_NOT_FOUND);
  /* Health of a device that does not exist: any valid value, no crash. */
  pw_device_health_t h = pw_cts_backend_health(&b, count);
  PW_CTS_ASSERT(h == PW_DEVICE_HEALTHY || h == PW_DEVICE_DEGRADED || h == PW_DEVICE_FAILED);
  pw_cts_destroy(&b);
}

void pw_cts_case_compile_deterministic(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_backend_t other;
  pw_cts_create(f, NULL, &b);
  pw_cts_create(f, NULL, &other);
  uint32_t devices[8];
  uint32_t n = 0;
  pw_mesh_shape_t mesh = pw_cts_mesh(&b, devices, &n);
  void* first = NULL;
  size_t first_size = 0;
  pw_cts_compile(&b, f->copy_program, &mesh, 16, &first, &first_size);
  for (int round = 0; round < 3; ++round) {
    void* again = NULL;
    size_t again_size = 0;
    pw_cts_compile(round == 1 ? &other : &b, f->copy_program, &mesh, 16, &again, &again_size);
    PW_CTS_ASSERT_EQ(again_size, first_size, "round %d: %zu bytes, first compile %zu", round,
                 again_size, first_size);
    PW_CTS_ASSERT_EQ(memcmp(again, first, first_size), 0, "round %d: bytes differ", round);
    pw_cts_free_bytes(again, again_size);
  }
  /* Raw contract: NULL and "" options are the same request. */
  char text[4096];
  size_t length = f->copy_program(&mesh, 16, text, sizeof(text));
  const char* options[] = {NULL, ""};
  for (int i = 0; i < 2; ++i) {
    void* bytes = NULL;
    size_t size = 0;
    PW_CTS_OK(b.vtable->compile(b.self, text, length, &mesh, options[i], pw_allocator_system(),
                                &bytes, &size));
    PW_CTS_ASSERT(size == first_size && memcmp(bytes, first, size) == 0,
              "options %s gave different bytes", options[i] ? "\"\"" : "NULL");
    pw_cts_free_bytes(bytes, size);
  }
  /* Compile allocates the bytes from the allocator it is given. */
  pw_cts_allocator_t t;
  pw_cts_allocator_init(&t);
  void* counted = NULL;
  size_t counted_size = 0;
  PW_CTS_OK(pw_cts_backend_compile(&b, text, length, &mesh, NULL, pw_cts_allocator(&t), &counted,
                                &counted_size));
  PW_CTS_ASSERT_GEQ(pw_cts_allocator_live(&t), 1, "compile did not use the given allocator");
  pw_allocator_free(pw_cts_allocator(&t), counted, counted_size);
  PW_CTS_ASSERT_EQ(pw_cts_allocator_live(&t), 0, "compile left allocations behind");
  PW_CTS_ASSERT_EQ(atomic_load(&t.size_mismatches), 0);
  pw_cts_free_bytes(first, first_size);
  pw_cts_destroy(&other);
  pw_cts_destroy(&b);
}

/* One compile that must fail cleanly. */
static void pw_cts_expect_compile_error(const pw_backend_t* b, const void* program, size_t size,
                                        const pw_mesh_shape_t* mesh, const char* what) {
  void* bytes = (void*)&bytes;
  size_t out_size = 12345;
  pw_status_t status =
      pw_cts_backend_compile(b, program, size, mesh, NULL, pw_allocator_system(), &bytes, &out_size);
  if (status == NULL) {
    pw_cts_free_bytes(bytes, out_size);
    PW_CTS_FAIL("compile of %s succeeded; an error was expected", what);
  }
  pw_cts_assert_error(status,
                      (const pw_status_code_t[]){PW_STATUS_INVALID_ARGUMENT,
                                                 PW_STATUS_NOT_FOUND, PW_STATUS_OUT_OF_RANGE},
                      3, what);
  PW_CTS_ASSERT(bytes == NULL || out_size == 0, "%s: failed compile returned bytes", what);
}

void pw_cts_case_compile_rejects_garbage(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t devices[8];
  uint32_t n = 0;
  pw_mesh_shape_t mesh = pw_cts_mesh(&b, devices, &n);
  static const char* const garbage[] = {
      "",
      "   \n\t\n",
      "# only a comment\n",
      "kernel",
      "kernel no_such_kernel_anywhere\n",
      "no_such_operation\n",
      "copy copy copy copy copy copy copy copy copy copy\n",
      "kernel copy\ninput f32[0] replicated\noutput f32[0] replicated\n",
      "kernel copy\ninput f32[8 replicated\n",
      "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n",
  };
  for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); ++i) {
    pw_cts_expect_compile_error(&b, garbage[i], strlen(garbage[i]), &mesh, garbage[i]);
  }
  static const char binary[] = {'\xff', '\xfe', '\0', '\x01', 'b', 'i', 'n'};
  pw_cts_expect_compile_error(&b, binary, sizeof(binary), &mesh, "binary with a NUL");
  pw_cts_expect_compile_error(&b, NULL, 0, &mesh, "a NULL program");
  /* Seeded random bytes, and a long run of one character. */
  unsigned char noise[512];
  uint32_t x = 12345;
  for (size_t i = 0; i < sizeof(noise); ++i) {
    x = x * 1664525u + 1013904223u;
    noise[i] = (unsigned char)(x >> 24);
  }
  pw_cts_expect_compile_error(&b, noise, sizeof(noise), &mesh, "random bytes");
  size_t long_size = 200 * 1024;
  char* long_text = malloc(long_size);
  PW_CTS_ASSERT_NOT_NULL(long_text);
  memset(long_text, 'a', long_size);
  pw_cts_expect_compile_error(&b, long_text, long_size, &mesh, "200 KiB of 'a'");
  free(long_text);
  /* A valid program for an invalid mesh. */
  char text[4096];
  size_t length = f->copy_program(&mesh, 16, text, sizeof(text));
  pw_mesh_shape_t bad_mesh;
  memset(&bad_mesh, 0, sizeof(bad_mesh));
  pw_cts_expect_compile_error(&b, text, length, &bad_mesh, "a rank-0 mesh");
  for (const char* const* p = f->bad_programs; p != NULL && *p != NULL; ++p) {
    pw_cts_expect_compile_error(&b, *p, strlen(*p), &mesh, *p);
  }
  /* The backend is still usable. */
  pw_backend_executable_t e = pw_cts_load(&b, f->copy_program, &mesh, 16, 1, 1);
  pw_cts_backend_unload(&b, e);
  pw_cts_destroy(&b);
}

void pw_cts_case_load_unload_round_trip(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_backend_t other;
  pw_cts_create(f, NULL, &b);
  pw_cts_create(f, NULL, &other);
  uint32_t devices[8];
  uint32_t n = 0;
  pw_mesh_shape_t mesh = pw_cts_mesh(&b, devices, &n);
  void* bytes = NULL;
  size_t size = 0;
  pw_cts_compile(&other, f->copy_program, &mesh, 16, &bytes, &size);
  /* Bytes made by another instance (as from a persistent cache), loaded
   * twice, and once from an unaligned copy (as read from a file). */
  unsigned char* unaligned = malloc(size + 1);
  PW_CTS_ASSERT_NOT_NULL(unaligned);
  memcpy(unaligned + 1, bytes, size);
  pw_backend_executable_t e[3] = {NULL, NULL, NULL};
  pw_executable_signature_t sig[3] = {{.struct_size = sizeof(pw_executable_signature_t)}, {.struct_size = sizeof(pw_executable_signature_t)}, {.struct_size = sizeof(pw_executable_signature_t)}};
  PW_CTS_OK(pw_cts_backend_load(&b, bytes, size, &e[0], &sig[0]));
  PW_CTS_OK(pw_cts_backend_load(&b, bytes, size, &e[1], &sig[1]));
  PW_CTS_OK(pw_cts_backend_load(&b, unaligned + 1, size, &e[2], &sig[2]));
  PW_CTS_ASSERT(e[0] != e[1] && e[1] != e[2] && e[0] != e[2], "loads share an executable");
  for (int i = 0; i < 3; ++i) {
    PW_CTS_ASSERT(pw_mesh_shape_equal(&sig[i].mesh, &mesh), "load %d: signature mesh differs", i);
    PW_CTS_ASSERT_EQ(sig[i].input_count, 1);
    PW_CTS_ASSERT_EQ(sig[i].output_count, 1);
    PW_CTS_ASSERT_LT(strnlen(sig[i].name, sizeof(sig[i].name)), sizeof(sig[i].name));
    /* The v1 part byte for byte; the v2 pointers are each executable's
     * own storage: what they point at. */
    PW_CTS_ASSERT_EQ(memcmp(&sig[i], &sig[0], PW_EXECUTABLE_SIGNATURE_SIZE_V1), 0,
                     "load %d: signature differs", i);
    const pw_backend_param_t* in_i = sig[i].input_specs ? sig[i].input_specs : sig[i].inputs;
    const pw_backend_param_t* in_0 = sig[0].input_specs ? sig[0].input_specs : sig[0].inputs;
    const pw_backend_param_t* out_i = sig[i].output_specs ? sig[i].output_specs : sig[i].outputs;
    const pw_backend_param_t* out_0 = sig[0].output_specs ? sig[0].output_specs : sig[0].outputs;
    PW_CTS_ASSERT(pw_array_spec_equal(&in_i[0], &in_0[0]) && pw_array_spec_equal(&out_i[0], &out_0[0]),
                  "load %d: signature specs differ", i);
  }
  /* Unload in an order different from load. */
  pw_cts_backend_unload(&b, e[1]);
  pw_cts_backend_unload(&b, e[0]);
  pw_cts_backend_unload(&b, e[2]);
  free(unaligned);
  pw_cts_free_bytes(bytes, size);
  pw_cts_destroy(&other);
  pw_cts_destroy(&b);
}

/* Loads |bytes| expecting INVALID_ARGUMENT or DATA_LOSS and no executable. */
static void pw_cts_expect_load_error(const pw_backend_t* b, const void* bytes, size_t size,
                                     const char* what) {
  pw_backend_executable_t e = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  pw_status_t status = pw_cts_backend_load(b, bytes, size, &e, &sig);
  if (status == NULL) {
    pw_cts_backend_unload(b, e);
    PW_CTS_FAIL("load of %s succeeded; an error was expected", what);
  }
  pw_cts_assert_error(status,
                      (const pw_status_code_t[]){PW_STATUS_INVALID_ARGUMENT,
                                                 PW_STATUS_DATA_LOSS},
                      2, what);
  PW_CTS_ASSERT_NULL(e, "%s: failed load returned an executable", what);
}

void pw_cts_case_load_rejects_corrupt(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t devices[8];
  uint32_t n = 0;
  pw_mesh_shape_t mesh = pw_cts_mesh(&b, devices, &n);
  void* bytes = NULL;
  size_t size = 0;
  pw_cts_compile(&b, f->copy_program, &mesh, 16, &bytes, &size);
  /* Each truncation, from a fresh heap copy of exactly that many bytes so
   * an over-read is caught by ASan. */
  size_t step = size > 2048 ? size / 1024 : 1;
  char what[64];
  for (size_t keep = 0; keep < size; keep += step) {
    unsigned char* copy = malloc(keep ? keep : 1);
    PW_CTS_ASSERT_NOT_NULL(copy);
    memcpy(copy, bytes, keep);
    snprintf(what, sizeof(what), "bytes truncated to %zu of %zu", keep, size);
    pw_cts_expect_load_error(&b, copy, keep, what);
    free(copy);
  }
  /* A trailing extra byte. */
  unsigned char* longer = malloc(size + 1);
  PW_CTS_ASSERT_NOT_NULL(longer);
  memcpy(longer, bytes, size);
  longer[size] = 0;
  pw_cts_expect_load_error(&b, longer, size + 1, "bytes with a trailing byte");
  /* Every single-bit flip (one bit per byte position). */
  for (size_t i = 0; i < size; i += step) {
    memcpy(longer, bytes, size);
    longer[i] ^= (unsigned char)(1u << (i % 8));
    snprintf(what, sizeof(what), "bytes with bit %zu of byte %zu flipped", i % 8, i);
    pw_cts_expect_load_error(&b, longer, size, what);
  }
  free(longer);
  /* The intact bytes still load. */
  pw_backend_executable_t e = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  PW_CTS_OK(pw_cts_backend_load(&b, bytes, size, &e, &sig));
  pw_cts_backend_unload(&b, e);
  pw_cts_free_bytes(bytes, size);
  pw_cts_destroy(&b);
}

void pw_cts_case_load_rejects_foreign(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t devices[8];
  uint32_t n = 0;
  pw_mesh_shape_t mesh = pw_cts_mesh(&b, devices, &n);
  pw_cts_expect_load_error(&b, NULL, 0, "NULL bytes");
  unsigned char block[256];
  memset(block, 0, sizeof(block));
  pw_cts_expect_load_error(&b, block, sizeof(block), "zeros");
  memset(block, 0xFF, sizeof(block));
  pw_cts_expect_load_error(&b, block, sizeof(block), "0xFF bytes");
  static const unsigned char elf[] = {0x7F, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  pw_cts_expect_load_error(&b, elf, sizeof(elf), "an ELF header");
  static const unsigned char zstd[] = {0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x58, 0x01, 0x00, 0x00};
  pw_cts_expect_load_error(&b, zstd, sizeof(zstd), "a zstd frame");
  /* The program text itself is not executable bytes. */
  char text[4096];
  size_t length = f->copy_program(&mesh, 16, text, sizeof(text));
  pw_cts_expect_load_error(&b, text, length, "uncompiled program text");
  /* Another backend's executable: the bundled cpu backend's (the sim's
   * when this is the cpu backend), made for the same mesh. */
  void* bytes = NULL;
  size_t size = 0;
  const char* other = pw_cts_foreign_executable(b.vtable->name, &mesh, &bytes, &size);
  PW_CTS_ASSERT_NOT_NULL(other, "the suite could not make another backend's executable");
  {
    char what[96];
    snprintf(what, sizeof(what), "the bundled %s backend's executable", other);
    pw_cts_expect_load_error(&b, bytes, size, what);
    pw_cts_free_bytes(bytes, size);
  }
  pw_cts_destroy(&b);
}
