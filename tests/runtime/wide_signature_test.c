#define _POSIX_C_SOURCE 200809L
/* Signatures that grow past the fixed arrays (PW_BACKEND_MAX_PARAMS): a
 * CPU executable with 300 inputs and 300 outputs (the variadic add_scalar
 * kernel: y_i = x_i + 1) compiles, loads, reports every spec (v2 pointers,
 * pw_executable_param), runs through a graph, round-trips through the
 * graph format and runs again, and compiles through the compile cache
 * (dir store) with memory and store hits. A backend that claims more than
 * the fixed arrays without pointers, or more than the hard limit, is
 * refused naming it / the executable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_util.h"
#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(wide_signature, .fini = pw_test_check_leaks);

#define WIDE 300u
#define ELEMS 4

/* "kernel add_scalar", WIDE inputs and outputs f32[4] split over the mesh,
 * value 1. Owned by the caller (free). */
static char* wide_program(uint32_t n) {
  size_t cap = 64 + (size_t)n * 2 * 40;
  char* text = malloc(cap);
  cr_assert_not_null(text);
  size_t at = (size_t)snprintf(text, cap, "kernel add_scalar\nattr value 1\n");
  for (uint32_t i = 0; i < n; ++i) {
    at += (size_t)snprintf(text + at, cap - at, "input f32[%d] split(0,all)\n", ELEMS);
  }
  for (uint32_t i = 0; i < n; ++i) {
    at += (size_t)snprintf(text + at, cap - at, "output f32[%d] split(0,all)\n", ELEMS);
  }
  return text;
}

static pw_array_spec_t wide_spec(void) {
  int64_t dims[1] = {ELEMS};
  return pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
}

/* A graph: WIDE parameters into one compute node, every output a graph
 * output. */
static pw_graph_t wide_graph(pw_fixture_t* f, pw_vslice_t vs, pw_executable_t e) {
  pw_graph_t g;
  OK(pw_graph_create(f->client, &g));
  pw_array_spec_t spec = wide_spec();
  pw_value_t* in = calloc(WIDE, sizeof(*in));
  cr_assert_not_null(in);
  for (uint32_t i = 0; i < WIDE; ++i) {
    uint32_t p;
    OK(pw_graph_add_parameter(f->client, g, vs, &spec, &p));
    in[i] = pw_value(p, 0);
  }
  uint32_t node;
  OK(pw_graph_add_compute(f->client, g, "wide", e, vs, in, WIDE, &node));
  for (uint32_t k = 0; k < WIDE; ++k) OK(pw_graph_add_output(f->client, g, pw_value(node, k)));
  free(in);
  return g;
}

/* Submits |g| with x_i = {i, i + 0.5, -i, 2i} and checks y_i = x_i + 1. */
static void run_and_check(pw_fixture_t* f, pw_vslice_t vs, pw_graph_t g) {
  pw_buffer_t* args = calloc(WIDE, sizeof(*args));
  pw_buffer_t* outs = calloc(WIDE, sizeof(*outs));
  cr_assert(args != NULL && outs != NULL);
  int64_t dims[1] = {ELEMS};
  for (uint32_t i = 0; i < WIDE; ++i) {
    float x[ELEMS] = {(float)i, (float)i + 0.5f, -(float)i, 2.0f * (float)i};
    OK(pw_fixture_f32(f, vs, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), x, &args[i]));
  }
  pw_event_t* done = NULL;
  OK(pw_graph_submit(f->client, g, args, WIDE, NULL, outs, WIDE, &done));
  OK(pw_fixture_wait(done));
  for (uint32_t i = 0; i < WIDE; ++i) {
    float y[ELEMS];
    OK(pw_buffer_to_host(f->client, outs[i], y, sizeof(y),
                         pw_deadline_from_timeout(5000000000LL)));
    float want[ELEMS] = {(float)i + 1, (float)i + 1.5f, 1 - (float)i, 2.0f * (float)i + 1};
    cr_assert(memcmp(y, want, sizeof(y)) == 0, "output %u: got {%g, %g, %g, %g}", i, y[0],
              y[1], y[2], y[3]);
    OK(pw_buffer_release(f->client, outs[i]));
    OK(pw_buffer_release(f->client, args[i]));
  }
  free(args);
  free(outs);
}

static void check_signature(pw_fixture_t* f, pw_executable_t e) {
  uint32_t count = 0;
  OK(pw_executable_param_count(f->client, e, PW_PARAM_INPUT, &count));
  cr_assert_eq(count, WIDE);
  OK(pw_executable_param_count(f->client, e, PW_PARAM_OUTPUT, &count));
  cr_assert_eq(count, WIDE);
  pw_array_spec_t want = wide_spec(), got;
  OK(pw_executable_param(f->client, e, PW_PARAM_INPUT, WIDE - 1, &got));
  cr_assert(pw_array_spec_equal(&got, &want));
  OK(pw_executable_param(f->client, e, PW_PARAM_OUTPUT, WIDE - 1, &got));
  cr_assert(pw_array_spec_equal(&got, &want));
  FAILS(pw_executable_param(f->client, e, PW_PARAM_OUTPUT, WIDE, &got), PW_STATUS_OUT_OF_RANGE,
        "executable 'add_scalar' has 300 outputs");
  /* v2: every spec through the pointers (valid while the handle lives). */
  pw_executable_signature_t sig;
  memset(&sig, 0, sizeof(sig));
  sig.struct_size = sizeof(sig);
  OK(pw_executable_signature(f->client, e, &sig));
  cr_assert_eq(sig.input_count, WIDE);
  cr_assert_eq(sig.output_count, WIDE);
  cr_assert(sig.input_specs != NULL && sig.output_specs != NULL);
  for (uint32_t i = 0; i < WIDE; ++i) {
    cr_assert(pw_array_spec_equal(&sig.input_specs[i], &want), "input %u", i);
    cr_assert(pw_array_spec_equal(&sig.output_specs[i], &want), "output %u", i);
  }
  cr_assert(pw_array_spec_equal(&sig.inputs[PW_BACKEND_MAX_PARAMS - 1], &want));
  /* A v1 caller cannot see 300 specs: refused, not truncated. */
  memset(&sig, 0, sizeof(sig));
  sig.struct_size = PW_EXECUTABLE_SIGNATURE_SIZE_V1;
  FAILS(pw_executable_signature(f->client, e, &sig), PW_STATUS_OUT_OF_RANGE,
        "PW_EXECUTABLE_SIGNATURE_SIZE_V2");
}

Test(wide_signature, cpu_compile_load_run_and_graph_format_round_trip) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_CPU, 1, "2", pw_allocator_system()));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2", &vs));
  char* text = wide_program(WIDE);
  pw_executable_t e;
  OK(pw_fixture_compile(&f, vs, text, &e));
  check_signature(&f, e);

  /* Load from the compiled bytes: the same signature. */
  const void* bytes;
  size_t size;
  OK(pw_executable_bytes(f.client, e, &bytes, &size));
  pw_executable_t loaded;
  OK(pw_executable_load(f.client, vs, bytes, size, &loaded));
  check_signature(&f, loaded);

  pw_graph_t g = wide_graph(&f, vs, loaded);
  run_and_check(&f, vs, g);

  /* Through the graph format: encode (the executable inline, with its
   * program), decode, run the decoded graph. */
  pw_graph_t g2 = wide_graph(&f, vs, e);
  void* file = NULL;
  size_t file_size = 0;
  OK(pw_graph_encode(f.client, g2, NULL, pw_allocator_system(), &file, &file_size));
  pw_graph_decode_options_t d;
  memset(&d, 0, sizeof(d));
  d.struct_size = sizeof(d);
  d.vslices = &vs;
  d.vslice_count = 1;
  pw_graph_t decoded;
  OK(pw_graph_decode(f.client, file, file_size, &d, &decoded));
  OK(pw_graph_format_check(file, file_size, pw_allocator_system(), NULL));
  run_and_check(&f, vs, decoded);

  /* By hash too: the decoder is handed the loaded executable. */
  pw_graph_encode_options_t eo;
  memset(&eo, 0, sizeof(eo));
  eo.struct_size = sizeof(eo);
  eo.executables_by_hash = true;
  void* by_hash = NULL;
  size_t by_hash_size = 0;
  OK(pw_graph_encode(f.client, g, &eo, pw_allocator_system(), &by_hash, &by_hash_size));
  d.executables = &loaded;
  d.executable_count = 1;
  pw_graph_t decoded2;
  OK(pw_graph_decode(f.client, by_hash, by_hash_size, &d, &decoded2));
  run_and_check(&f, vs, decoded2);

  pw_allocator_free(pw_allocator_system(), file, file_size);
  pw_allocator_free(pw_allocator_system(), by_hash, by_hash_size);
  OK(pw_graph_release(f.client, decoded2));
  OK(pw_graph_release(f.client, decoded));
  OK(pw_graph_release(f.client, g2));
  OK(pw_graph_release(f.client, g));
  OK(pw_executable_release(f.client, loaded));
  OK(pw_executable_release(f.client, e));
  free(text);
  pw_fixture_deinit(&f);
}

static pw_cache_stats_t cache_stats(pw_cache_t* c) {
  pw_cache_stats_t s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  OK(pw_cache_stats(c, &s));
  return s;
}

Test(wide_signature, cpu_compile_cache_dir_store_hits) {
  char dir[256];
  cr_assert(cu_make_dir(dir, sizeof(dir)));
  char* text = wide_program(WIDE);
  for (int round = 0; round < 2; ++round) {
    /* Round 1 is a fresh runtime and cache over the same directory: what
     * another process sees. */
    pw_fixture_t f;
    OK(pw_fixture_init(&f, PW_FIXTURE_CPU, 1, "2", pw_allocator_system()));
    pw_cache_t* cache = cu_cache(dir, 0, (pw_logger_t){0});
    cr_assert_not_null(cache);
    OK(pw_runtime_set_compile_cache(f.runtime, cache));
    pw_vslice_t vs;
    OK(pw_fixture_vslice(&f, "2", &vs));
    pw_executable_t a, b;
    OK(pw_fixture_compile(&f, vs, text, &a));
    OK(pw_fixture_compile(&f, vs, text, &b));
    pw_cache_stats_t s = cache_stats(cache);
    if (round == 0) {
      cr_assert_eq(s.misses, 1);
      cr_assert_eq(s.memory_hits, 1);
      cr_assert_eq(s.store_writes, 1);
    } else {
      cr_assert_eq(s.misses, 0);
      cr_assert_eq(s.store_hits, 1);
      cr_assert_eq(s.memory_hits, 1);
    }
    check_signature(&f, b);
    pw_graph_t g = wide_graph(&f, vs, b);
    run_and_check(&f, vs, g);
    OK(pw_graph_release(f.client, g));
    OK(pw_executable_release(f.client, a));
    OK(pw_executable_release(f.client, b));
    pw_fixture_deinit(&f);
    pw_cache_release(cache);
  }
  free(text);
  cu_remove_dir(dir);
}

/* ---- backends that lie about their signature ------------------------------ */

typedef enum liar_mode_e {
  LIAR_NULL_SPECS = 0,  /* 300 inputs, the v2 pointers cleared */
  LIAR_TOO_MANY = 1,    /* PW_EXECUTABLE_MAX_PARAMS + 1 outputs */
} liar_mode_t;

static liar_mode_t liar_mode;
static pw_backend_vtable_t liar_vtable;
static pw_status_t (*liar_inner_load)(void*, const void*, size_t, pw_backend_executable_t*,
                                      pw_executable_signature_t*);

static pw_status_t liar_load(void* self, const void* bytes, size_t size,
                             pw_backend_executable_t* out_executable,
                             pw_executable_signature_t* out_signature) {
  PW_RETURN_IF_ERROR(liar_inner_load(self, bytes, size, out_executable, out_signature));
  if (liar_mode == LIAR_NULL_SPECS) {
    out_signature->input_specs = NULL;
  } else {
    out_signature->output_count = PW_EXECUTABLE_MAX_PARAMS + 1;
  }
  return NULL;
}

static void liar_refused(liar_mode_t mode, pw_status_code_t code, const char* needle) {
  liar_mode = mode;
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = 2;
  o.worker_count = 1;
  pw_backend_t cpu;
  OK(pw_cpu_backend_create(&o, &cpu));
  liar_vtable = *cpu.vtable;
  liar_vtable.name = "liar";
  liar_inner_load = cpu.vtable->load;
  liar_vtable.load = liar_load;
  pw_backend_t liar = {.vtable = &liar_vtable, .self = cpu.self};
  pw_slice_desc_t desc;
  memset(&desc, 0, sizeof(desc));
  OK(pw_mesh_shape_parse("2", &desc.mesh));
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.worker_count = 1;
  ro.backends = &liar;
  ro.backend_count = 1;
  ro.slices = &desc;
  ro.slice_count = 1;
  pw_runtime_t* rt;
  OK(pw_runtime_create(&ro, &rt));
  pw_client_t* client;
  OK(pw_client_create(rt, NULL, &client));
  pw_mesh_shape_t mesh;
  OK(pw_mesh_shape_parse("2", &mesh));
  pw_vslice_t vs;
  OK(pw_vslice_create(client, &mesh, PW_VSLICE_DEFAULT, &vs));
  char* text = wide_program(WIDE);
  pw_executable_t e;
  pw_status_t s = pw_executable_compile(client, vs, text, strlen(text), NULL, &e);
  cr_assert_eq(pw_status_code(s), code, "%s", pw_status_message(s));
  cr_assert(strstr(pw_status_message(s), needle) != NULL, "%s", pw_status_message(s));
  cr_assert_eq(e.id, 0);
  pw_status_free(s);
  free(text);
  pw_client_destroy(client);
  pw_runtime_destroy(rt);
}

Test(wide_signature, backend_claiming_counts_without_specs_is_refused_by_name) {
  liar_refused(LIAR_NULL_SPECS, PW_STATUS_INTERNAL, "liar");
}

Test(wide_signature, counts_past_the_hard_limit_are_refused_naming_the_executable) {
  liar_refused(LIAR_TOO_MANY, PW_STATUS_INVALID_ARGUMENT, "executable 'add_scalar'");
}

/* A v1 reader (struct_size V1) still reads an executable that fits the
 * fixed arrays. */
Test(wide_signature, v1_reader_sees_a_narrow_executable) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_CPU, 1, "2", pw_allocator_system()));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2", &vs));
  char* text = wide_program(3);
  pw_executable_t e;
  OK(pw_fixture_compile(&f, vs, text, &e));
  pw_executable_signature_t sig;
  memset(&sig, 0, sizeof(sig));
  sig.struct_size = PW_EXECUTABLE_SIGNATURE_SIZE_V1;
  OK(pw_executable_signature(f.client, e, &sig));
  pw_array_spec_t want = wide_spec();
  cr_assert_eq(sig.input_count, 3);
  cr_assert(pw_array_spec_equal(&sig.inputs[2], &want));
  cr_assert(pw_array_spec_equal(&sig.outputs[2], &want));
  OK(pw_executable_release(f.client, e));
  free(text);
  pw_fixture_deinit(&f);
}

/* ---- the test double: a wide "fill" and a wide "noop" ----------------------- */

/* The double's "fill 7" with |n| u8[4] outputs, or "noop" with |n| inputs
 * and outputs. Owned by the caller (free). */
static char* double_program(const char* op, uint32_t inputs, uint32_t outputs) {
  size_t cap = 32 + ((size_t)inputs + outputs) * 40;
  char* text = malloc(cap);
  cr_assert_not_null(text);
  size_t at = (size_t)snprintf(text, cap, "%s\n", op);
  for (uint32_t i = 0; i < inputs + outputs; ++i) {
    at += (size_t)snprintf(text + at, cap - at, "%s u8[4] split(0,all)\n",
                           i < inputs ? "input" : "output");
  }
  return text;
}

Test(wide_signature, test_double_fill_and_noop_through_graphs_and_the_cache) {
  char dir[256];
  cr_assert(cu_make_dir(dir, sizeof(dir)));
  char* fill = double_program("fill 7", 0, WIDE);
  char* noop = double_program("noop", WIDE, WIDE);
  for (int round = 0; round < 2; ++round) {
    pw_fixture_t f;
    OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 1, "2", pw_allocator_system()));
    pw_cache_t* cache = cu_cache(dir, 0, (pw_logger_t){0});
    cr_assert_not_null(cache);
    OK(pw_runtime_set_compile_cache(f.runtime, cache));
    pw_vslice_t vs;
    OK(pw_fixture_vslice(&f, "2", &vs));
    pw_executable_t ef, en;
    OK(pw_fixture_compile(&f, vs, fill, &ef));
    OK(pw_fixture_compile(&f, vs, noop, &en));
    pw_cache_stats_t s = cache_stats(cache);
    cr_assert_eq(round == 0 ? s.misses : s.store_hits, 2);
    uint32_t count = 0;
    OK(pw_executable_param_count(f.client, en, PW_PARAM_INPUT, &count));
    cr_assert_eq(count, WIDE);
    pw_executable_signature_t sig;
    memset(&sig, 0, sizeof(sig));
    sig.struct_size = sizeof(sig);
    OK(pw_executable_signature(f.client, ef, &sig));
    cr_assert_eq(sig.output_count, WIDE);
    cr_assert_eq(sig.output_specs[WIDE - 1].dtype, PW_DTYPE_U8);
    /* fill's 300 outputs feed noop's 300 inputs; every fill output is
     * also a graph output. */
    pw_graph_t g;
    OK(pw_graph_create(f.client, &g));
    uint32_t nf, nn;
    OK(pw_graph_add_compute(f.client, g, "fill", ef, vs, NULL, 0, &nf));
    pw_value_t* in = calloc(WIDE, sizeof(*in));
    cr_assert_not_null(in);
    for (uint32_t k = 0; k < WIDE; ++k) {
      in[k] = pw_value(nf, k);
      OK(pw_graph_add_output(f.client, g, in[k]));
    }
    OK(pw_graph_add_compute(f.client, g, "noop", en, vs, in, WIDE, &nn));
    OK(pw_graph_add_output(f.client, g, pw_value(nn, WIDE - 1)));
    pw_buffer_t* outs = calloc(WIDE + 1, sizeof(*outs));
    cr_assert_not_null(outs);
    pw_event_t* done = NULL;
    OK(pw_graph_submit(f.client, g, NULL, 0, NULL, outs, WIDE + 1, &done));
    OK(pw_fixture_wait(done));
    for (uint32_t k = 0; k < WIDE; ++k) {
      uint8_t y[4];
      OK(pw_buffer_to_host(f.client, outs[k], y, sizeof(y),
                           pw_deadline_from_timeout(5000000000LL)));
      cr_assert(y[0] == 7 && y[1] == 7 && y[2] == 7 && y[3] == 7, "fill output %u", k);
    }
    for (uint32_t k = 0; k <= WIDE; ++k) OK(pw_buffer_release(f.client, outs[k]));
    free(outs);
    free(in);
    OK(pw_graph_release(f.client, g));
    OK(pw_executable_release(f.client, ef));
    OK(pw_executable_release(f.client, en));
    pw_fixture_deinit(&f);
    pw_cache_release(cache);
  }
  free(fill);
  free(noop);
  cu_remove_dir(dir);
}

static int refused_done_calls;
static void refused_done(void* user, pw_status_t status) {
  (void)user;
  refused_done_calls++;
  pw_status_free(status);
}

/* The CPU backend's alias check for wide launches (sorted, not pairwise)
 * still names the aliased pair, and the refused launch never completes. */
Test(wide_signature, cpu_wide_launch_with_an_aliased_output_is_refused) {
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = 1;
  o.worker_count = 1;
  pw_backend_t cpu;
  OK(pw_cpu_backend_create(&o, &cpu));
  const pw_backend_vtable_t* vt = cpu.vtable;
  pw_mesh_shape_t mesh;
  OK(pw_mesh_shape_parse("1", &mesh));
  char* text = wide_program(WIDE);
  void* bytes = NULL;
  size_t size = 0;
  OK(vt->compile(cpu.self, text, strlen(text), &mesh, "", pw_allocator_system(), &bytes, &size));
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig;
  memset(&sig, 0, sizeof(sig));
  sig.struct_size = sizeof(sig);
  OK(vt->load(cpu.self, bytes, size, &exe, &sig));
  cr_assert(sig.input_specs != NULL && sig.output_specs != NULL);
  pw_backend_memory_t* mem = calloc(2 * WIDE, sizeof(*mem));
  cr_assert_not_null(mem);
  for (uint32_t i = 0; i < 2 * WIDE; ++i) OK(vt->allocate(cpu.self, 0, 16, &mem[i]));
  pw_backend_memory_t* args = calloc(2 * WIDE, sizeof(*args));
  cr_assert_not_null(args);
  memcpy(args, mem, 2 * WIDE * sizeof(*args));
  args[WIDE + 5] = args[7]; /* output 5 is input 7 */
  uint32_t group = 0;
  pw_backend_launch_t l;
  memset(&l, 0, sizeof(l));
  l.struct_size = sizeof(l);
  l.executable = exe;
  l.group_devices = &group;
  l.group_size = 1;
  l.inputs = args;
  l.input_count = WIDE;
  l.outputs = args + WIDE;
  l.output_count = WIDE;
  l.done = refused_done;
  pw_status_t s = vt->launch(cpu.self, &l);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT, "%s", pw_status_message(s));
  cr_assert(strstr(pw_status_message(s), "output 5 is the same memory as input 7") != NULL,
            "%s", pw_status_message(s));
  pw_status_free(s);
  cr_assert_eq(refused_done_calls, 0);
  for (uint32_t i = 0; i < 2 * WIDE; ++i) vt->deallocate(cpu.self, 0, mem[i]);
  vt->unload(cpu.self, exe);
  pw_allocator_free(pw_allocator_system(), bytes, size);
  vt->destroy(cpu.self);
  free(args);
  free(mem);
  free(text);
}
