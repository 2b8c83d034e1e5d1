/* compile / load: validation against kernel signatures and meshes,
 * deterministic bytes, and rejection of corrupt, truncated or foreign
 * bytes. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_test_support.h"
#include "support/test_allocators.h"

TestSuite(cpu_executable, .fini = pw_test_check_leaks);

static const char kMatmul[] =
    "kernel matmul\n"
    "input f32[64,16] split(0,all)\n"
    "input f32[16,4] replicated\n"
    "output f32[64,4] split(0,all)\n"
    "attr transpose_b 0\n";

typedef struct fixture_t {
  pw_test_allocator_t counting;
  pw_backend_t backend;
  pw_mesh_shape_t mesh8;
  pw_mesh_shape_t mesh2x4;
} fixture_t;

static void fixture_init(fixture_t* f) {
  pw_test_allocator_init(&f->counting);
  cr_assert_null(cpu_create(pw_test_allocator(&f->counting), 8, 2, 0, &f->backend));
  uint32_t one[] = {8};
  uint32_t two[] = {2, 4};
  f->mesh8 = pw_mesh_shape_make(1, one);
  f->mesh2x4 = pw_mesh_shape_make(2, two);
}

static void fixture_fini(fixture_t* f) {
  cpu_destroy(f->backend);
  cr_assert_eq(pw_test_allocator_live(&f->counting), 0, "backend leaked");
  cr_assert_eq(atomic_load(&f->counting.size_mismatches), 0);
}

static pw_status_t compile(fixture_t* f, const char* text, const pw_mesh_shape_t* mesh,
                           const char* options, void** bytes, size_t* size) {
  return f->backend.vtable->compile(f->backend.self, text, strlen(text), mesh, options,
                                    pw_allocator_system(), bytes, size);
}

/* Asserts compiling |text| fails with |code| and a message with |part|. */
static void expect_compile_error(fixture_t* f, const char* text,
                                 const pw_mesh_shape_t* mesh, pw_status_code_t code,
                                 const char* part) {
  void* bytes = (void*)1;
  size_t size = 1;
  pw_status_t s = compile(f, text, mesh, "", &bytes, &size);
  cr_assert_eq(pw_status_code(s), code, "%s -> %s", text, pw_status_message(s));
  cr_assert(strstr(pw_status_message(s), part) != NULL, "'%s' not in '%s'", part,
            pw_status_message(s));
  cr_assert_null(bytes);
  cr_assert_eq(size, 0);
  pw_status_free(s);
}

Test(cpu_executable, compile_load_round_trip_and_signature) {
  fixture_t f;
  fixture_init(&f);
  void* bytes = NULL;
  size_t size = 0;
  cr_assert_null(compile(&f, kMatmul, &f.mesh8, NULL, &bytes, &size));
  cr_assert_gt(size, 24);
  cr_assert(memcmp(bytes, "PWCPUEXE", 8) == 0);
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  cr_assert_null(f.backend.vtable->load(f.backend.self, bytes, size, &exe, &sig));
  cr_assert_not_null(exe);
  cr_assert_str_eq(sig.name, "matmul");
  cr_assert(pw_mesh_shape_equal(&sig.mesh, &f.mesh8));
  cr_assert_eq(sig.input_count, 2);
  cr_assert_eq(sig.output_count, 1);
  cr_assert_eq(sig.inputs[0].dtype, PW_DTYPE_F32);
  cr_assert_eq(sig.inputs[0].shape.dims[0], 64);
  cr_assert_eq(sig.inputs[0].sharding.mesh_axis, PW_MESH_AXIS_ALL);
  cr_assert_eq(sig.outputs[0].shape.dims[1], 4);
  f.backend.vtable->unload(f.backend.self, exe);
  pw_allocator_free(pw_allocator_system(), bytes, size);
  fixture_fini(&f);
}

Test(cpu_executable, same_program_gives_identical_bytes) {
  fixture_t f;
  fixture_init(&f);
  const char* variant =
      "# same program, other spacing\n"
      "kernel   matmul\r\n"
      "input f32[64,16]\tsplit(0,all)\n\n"
      "input f32[16,4] replicated\n"
      "output f32[64,4] split(0,all)\n"
      "attr transpose_b 0.0\n";
  void* a = NULL;
  void* b = NULL;
  void* c = NULL;
  size_t na = 0, nb = 0, nc = 0;
  cr_assert_null(compile(&f, kMatmul, &f.mesh8, "", &a, &na));
  cr_assert_null(compile(&f, kMatmul, &f.mesh8, "", &b, &nb));
  cr_assert_null(compile(&f, variant, &f.mesh8, "", &c, &nc));
  cr_assert_eq(na, nb);
  cr_assert_eq(na, nc);
  cr_assert(memcmp(a, b, na) == 0);
  cr_assert(memcmp(a, c, na) == 0);
  /* Another mesh gives other bytes. */
  void* d = NULL;
  size_t nd = 0;
  cr_assert_null(compile(&f, kMatmul, &f.mesh2x4, "", &d, &nd));
  cr_assert(nd != na || memcmp(a, d, na) != 0);
  pw_allocator_t sys = pw_allocator_system();
  pw_allocator_free(sys, a, na);
  pw_allocator_free(sys, b, nb);
  pw_allocator_free(sys, c, nc);
  pw_allocator_free(sys, d, nd);
  fixture_fini(&f);
}

Test(cpu_executable, compile_checks_signature_and_mesh) {
  fixture_t f;
  fixture_init(&f);
  expect_compile_error(&f, "kernel nope\noutput f32[8] replicated\n", &f.mesh8,
                       PW_STATUS_NOT_FOUND, "line 1: unknown kernel 'nope'");
  expect_compile_error(&f, "kernel add\ninput f32[8] replicated\noutput f32[8] replicated\n",
                       &f.mesh8, PW_STATUS_INVALID_ARGUMENT,
                       "kernel 'add' takes 2 inputs and 1 outputs; the program has 1 and 1");
  expect_compile_error(&f,
                       "kernel add\ninput bool[8] replicated\ninput bool[8] replicated\n"
                       "output bool[8] replicated\n",
                       &f.mesh8, PW_STATUS_INVALID_ARGUMENT,
                       "line 2: input 0 'a' bool[8] replicated: kernel 'add' does not take dtype "
                       "bool here (it takes f32, f64, i32, i64, u8, bf16, f16, i8, i16, u16, u32, "
                       "u64, c64)");
  expect_compile_error(&f,
                       "kernel matmul\ninput bf16[8,8] replicated\ninput bf16[8,8] replicated\n"
                       "output bf16[8,8] replicated\n",
                       &f.mesh8, PW_STATUS_INVALID_ARGUMENT,
                       "kernel 'matmul' does not take dtype bf16 here (it takes f32, f64)");
  expect_compile_error(&f,
                       "kernel reduce_mean\ninput i16[8,8] replicated\noutput i16[8] replicated\n"
                       "attr axis 1\n",
                       &f.mesh8, PW_STATUS_INVALID_ARGUMENT,
                       "kernel 'reduce_mean' does not take dtype i16 here");
  expect_compile_error(&f,
                       "kernel relu\ninput f8e4m3fn[8] replicated\noutput f8e4m3fn[8] replicated\n",
                       &f.mesh8, PW_STATUS_INVALID_ARGUMENT,
                       "kernel 'relu' does not take dtype f8e4m3fn here (it takes f32, f64, bf16, f16)");
  expect_compile_error(&f,
                       "kernel add\ninput f32[8] replicated\ninput f64[8] replicated\n"
                       "output f32[8] replicated\n",
                       &f.mesh8, PW_STATUS_INVALID_ARGUMENT, "line 3: input 1");
  expect_compile_error(&f,
                       "kernel matmul\ninput f32[2,8,4] replicated\ninput f32[4,4] replicated\n"
                       "output f32[8,4] replicated\n",
                       &f.mesh8, PW_STATUS_INVALID_ARGUMENT, "takes rank 2 here, got rank 3");
  expect_compile_error(&f,
                       "kernel relu\ninput f32[8] split(0,5)\noutput f32[8] split(0,5)\n",
                       &f.mesh2x4, PW_STATUS_INVALID_ARGUMENT,
                       "line 2: input 0 'x' f32[8] split(0,5): split over mesh axis 5");
  expect_compile_error(&f, "kernel relu\ninput f32[6] split(0,all)\noutput f32[6] split(0,all)\n",
                       &f.mesh8, PW_STATUS_INVALID_ARGUMENT, "not divisible into 8 shards");
  expect_compile_error(&f,
                       "kernel scale\ninput f32[8] replicated\noutput f32[8] replicated\n"
                       "attr alpah 2\n",
                       &f.mesh8, PW_STATUS_INVALID_ARGUMENT,
                       "line 4: kernel 'scale' has no attribute 'alpah'");
  expect_compile_error(&f, "kernel scale\ninput f32[8] replicated\noutput f32[8] replicated\n",
                       &f.mesh8, PW_STATUS_INVALID_ARGUMENT,
                       "line 1: kernel 'scale' requires attribute 'alpha'");
  expect_compile_error(&f,
                       "kernel scale\ninput f32[8] replicated\noutput f32[8] replicated\n"
                       "attr alpha big\n",
                       &f.mesh8, PW_STATUS_INVALID_ARGUMENT, "must be a number");
  expect_compile_error(&f,
                       "kernel matmul\ninput f32[8,4] replicated\ninput f32[5,4] replicated\n"
                       "output f32[8,4] replicated\n",
                       &f.mesh8, PW_STATUS_INVALID_ARGUMENT, "contracted dimensions differ");
  expect_compile_error(&f,
                       "kernel matmul\ninput f32[8,4] split(0,all)\ninput f32[4,4] replicated\n"
                       "output f32[8,4] replicated\n",
                       &f.mesh8, PW_STATUS_INVALID_ARGUMENT,
                       "output 0 must be f32[8,4] split(0,all)");
  expect_compile_error(&f,
                       "kernel add\ninput f32[8] replicated\ninput f32[8] split(0,all)\n"
                       "output f32[8] replicated\n",
                       &f.mesh8, PW_STATUS_INVALID_ARGUMENT,
                       "input 1 f32[8] split(0,all) must have the shape and sharding");
  expect_compile_error(&f,
                       "kernel all_reduce_sum\ninput f32[16,3] split(0,all)\noutput f32[3] replicated\n",
                       &f.mesh8, PW_STATUS_INVALID_ARGUMENT, "must equal the group size 8");
  expect_compile_error(&f, "kernel fill\noutput u8[4] replicated\nattr value 300\n", &f.mesh8,
                       PW_STATUS_INVALID_ARGUMENT, "integer in [0, 255]");
  expect_compile_error(&f, "kernel reduce_sum\ninput f32[4,3] replicated\noutput f32[4] replicated\nattr axis 2\n",
                       &f.mesh8, PW_STATUS_INVALID_ARGUMENT, "attribute 'axis' must be an integer in [0, 1]");
  /* Options, mesh and arguments. */
  void* bytes = NULL;
  size_t size = 0;
  pw_status_t s = compile(&f, kMatmul, &f.mesh8, "fast", &bytes, &size);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(pw_status_message(s), "unknown options 'fast'"));
  pw_status_free(s);
  pw_mesh_shape_t bad_mesh = PW_MESH_SHAPE_INIT(0, 0);
  s = compile(&f, kMatmul, &bad_mesh, "", &bytes, &size);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  s = compile(&f, kMatmul, NULL, "", &bytes, &size);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  s = f.backend.vtable->compile(f.backend.self, "kernel k\n", 9, &f.mesh8, "",
                                (pw_allocator_t){0}, &bytes, &size);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  fixture_fini(&f);
}

/* FNV-1a 64, as the executable header's checksum (executable.c). */
static uint64_t fnv1a64(const unsigned char* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static void reseal(unsigned char* bytes, size_t size) {
  uint64_t h = fnv1a64(bytes + 24, size - 24);
  for (int i = 0; i < 8; ++i) bytes[16 + i] = (unsigned char)(h >> (8 * i));
}

static pw_status_t try_load(fixture_t* f, const void* bytes, size_t size) {
  pw_backend_executable_t exe = (pw_backend_executable_t)1;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  pw_status_t s = f->backend.vtable->load(f->backend.self, bytes, size, &exe, &sig);
  if (s == NULL) {
    cr_assert_not_null(exe);
    f->backend.vtable->unload(f->backend.self, exe);
  } else {
    cr_assert_null(exe, "load failed but left an executable");
  }
  return s;
}

Test(cpu_executable, load_rejects_corrupt_truncated_and_foreign_bytes) {
  fixture_t f;
  fixture_init(&f);
  void* good = NULL;
  size_t size = 0;
  cr_assert_null(compile(&f, kMatmul, &f.mesh8, "", &good, &size));
  unsigned char* copy = malloc(size + 1);

  /* Every single-byte change is caught. */
  for (size_t i = 0; i < size; ++i) {
    memcpy(copy, good, size);
    copy[i] ^= 0x5a;
    pw_status_t s = try_load(&f, copy, size);
    cr_assert_not_null(s, "byte %zu flipped but load succeeded", i);
    pw_status_code_t code = pw_status_code(s);
    cr_assert(code == PW_STATUS_DATA_LOSS || code == PW_STATUS_INVALID_ARGUMENT,
              "byte %zu: %s", i, pw_status_message(s));
    pw_status_free(s);
  }
  /* Every truncation, and a trailing byte. */
  for (size_t n = 0; n < size; ++n) {
    pw_status_t s = try_load(&f, good, n);
    cr_assert_not_null(s, "truncated to %zu but load succeeded", n);
    pw_status_free(s);
  }
  memcpy(copy, good, size);
  copy[size] = 0;
  pw_status_t s = try_load(&f, copy, size + 1);
  cr_assert_eq(pw_status_code(s), PW_STATUS_DATA_LOSS);
  cr_assert(strstr(pw_status_message(s), "trailing"));
  pw_status_free(s);
  /* Specific messages. */
  s = try_load(&f, "GARBAGE!GARBAGE!GARBAGE!", 24);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(pw_status_message(s), "magic"));
  pw_status_free(s);
  memcpy(copy, good, size);
  copy[30] ^= 1;
  s = try_load(&f, copy, size);
  cr_assert_eq(pw_status_code(s), PW_STATUS_DATA_LOSS);
  cr_assert(strstr(pw_status_message(s), "checksum"));
  pw_status_free(s);
  memcpy(copy, good, size);
  copy[8] = 9;
  s = try_load(&f, copy, size);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(pw_status_message(s), "version 9"));
  pw_status_free(s);
  s = try_load(&f, good, 20);
  cr_assert_eq(pw_status_code(s), PW_STATUS_DATA_LOSS);
  cr_assert(strstr(pw_status_message(s), "truncated"));
  pw_status_free(s);
  s = try_load(&f, NULL, 0);
  cr_assert_not_null(s);
  pw_status_free(s);

  /* Forged payloads with a valid checksum: decoded strictly, never a
   * crash (ASan checks the reads). */
  uint64_t rng = 12345;
  for (int round = 0; round < 3000; ++round) {
    memcpy(copy, good, size);
    int flips = 1 + round % 4;
    for (int k = 0; k < flips; ++k) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      size_t at = 24 + (size_t)((rng >> 33) % (size - 24));
      copy[at] = (unsigned char)(rng >> 20);
    }
    reseal(copy, size);
    pw_status_free(try_load(&f, copy, size));
  }
  free(copy);
  pw_allocator_free(pw_allocator_system(), good, size);
  fixture_fini(&f);
}

static pw_status_t noop_run(const pw_cpu_kernel_call_t* call) { return NULL; }

Test(cpu_executable, load_needs_the_kernel_in_this_backend) {
  fixture_t f;
  fixture_init(&f);
  pw_cpu_param_spec_t out = {"y", PW_CPU_DTYPES_ANY, -1};
  pw_cpu_kernel_def_t def = {.struct_size = sizeof(def),
                             .name = "custom.noop",
                             .output_count = 1,
                             .outputs = &out,
                             .run = noop_run};
  cr_assert_null(pw_cpu_backend_register_kernel(f.backend, &def));
  void* bytes = NULL;
  size_t size = 0;
  cr_assert_null(compile(&f, "kernel custom.noop\noutput u8[8] replicated\n", &f.mesh8, "",
                         &bytes, &size));
  pw_backend_t other;
  cr_assert_null(cpu_create(pw_allocator_system(), 8, 1, 0, &other));
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  pw_status_t s = other.vtable->load(other.self, bytes, size, &exe, &sig);
  cr_assert_eq(pw_status_code(s), PW_STATUS_NOT_FOUND);
  cr_assert(strstr(pw_status_message(s), "kernel 'custom.noop' is not registered"));
  pw_status_free(s);
  cpu_destroy(other);
  cr_assert_null(f.backend.vtable->load(f.backend.self, bytes, size, &exe, &sig));
  f.backend.vtable->unload(f.backend.self, exe);
  pw_allocator_free(pw_allocator_system(), bytes, size);
  fixture_fini(&f);
}
