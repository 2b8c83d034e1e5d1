#define _POSIX_C_SOURCE 200809L
/* Graph files and a client's graphs: encode -> decode -> encode identity,
 * decoded graphs that run, the decoded-graph memo (no compile, validation
 * or lowering for identical bytes), errors that need a runtime (bindings,
 * signatures) with their paths and without leaked handles, executables by
 * hash, the compile cache under decode, and a failing-allocator sweep over
 * pw_graph_decode. */
#include <stdlib.h>

#include "graph_format/gf_util.h"
#include "pathways/cache.h"
#include "pathways/graph_format.h"
#include "runtime/fixture.h"
#include "core/objects.h"
#include "support/test_allocators.h"

TestSuite(graph_codec, .fini = pw_test_check_leaks);

#define COPY8 "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n"
#define ADD8                                                               \
  "noop\ninput f32[8] split(0,all)\ninput f32[8] split(0,all)\noutput f32[8] " \
  "split(0,all)\n"

typedef struct env_t {
  pw_fixture_t f;
  pw_vslice_t vs;
  pw_vslice_t other;
  pw_executable_t copy;
  pw_executable_t add;
  pw_array_spec_t spec;
} env_t;

static void env_init_with(env_t* e, pw_allocator_t allocator) {
  OK(pw_fixture_init(&e->f, PW_FIXTURE_DOUBLE_INLINE, 3, "2x4", allocator));
  OK(pw_fixture_vslice(&e->f, "2x4", &e->vs));
  OK(pw_fixture_vslice(&e->f, "2x4", &e->other));
  OK(pw_fixture_compile(&e->f, e->vs, COPY8, &e->copy));
  OK(pw_fixture_compile(&e->f, e->vs, ADD8, &e->add));
  int64_t dims[1] = {8};
  e->spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
}

static void env_init(env_t* e) { env_init_with(e, pw_allocator_system()); }

/* p -> copy "first" -> add(first, p) "join" -> copy "last"; outputs last,
 * first. Nodes are added out of order (join before first). */
static pw_graph_t build(env_t* e) {
  pw_graph_t g;
  OK(pw_graph_create(e->f.client, &g));
  uint32_t p;
  OK(pw_graph_add_parameter(e->f.client, g, e->vs, &e->spec, &p));
  pw_value_t join_in[2] = {pw_value(2, 0), pw_value(p, 0)};
  OK(pw_graph_add_compute(e->f.client, g, "join", e->add, e->vs, join_in, 2, NULL));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(e->f.client, g, "first", e->copy, e->vs, &in, 1, NULL));
  in = pw_value(1, 0);
  OK(pw_graph_add_compute(e->f.client, g, "last", e->copy, e->vs, &in, 1, NULL));
  OK(pw_graph_add_output(e->f.client, g, pw_value(3, 0)));
  OK(pw_graph_add_output(e->f.client, g, pw_value(2, 0)));
  return g;
}

static void encode(env_t* e, pw_graph_t g, const pw_graph_encode_options_t* o, void** bytes,
                   size_t* size) {
  OK(pw_graph_encode(e->f.client, g, o, pw_allocator_system(), bytes, size));
}

static pw_graph_decode_options_t decode_options(const pw_vslice_t* vslices, uint32_t n) {
  pw_graph_decode_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.vslices = vslices;
  o.vslice_count = n;
  return o;
}

Test(graph_codec, encode_decode_encode_is_byte_identical) {
  env_t e;
  env_init(&e);
  pw_graph_t g = build(&e);
  void* b1;
  size_t n1;
  encode(&e, g, NULL, &b1, &n1);
  pw_graph_format_info_t info = {.struct_size = sizeof(pw_graph_format_info_t)};
  OK(pw_graph_format_check(b1, n1, pw_allocator_system(), &info));
  cr_assert_eq(info.nodes, 3);
  cr_assert_eq(info.parameters, 1);
  cr_assert_eq(info.buffers, 4);
  cr_assert_eq(info.executables, 2);
  pw_graph_decode_options_t o = decode_options(&e.vs, 1);
  pw_graph_t g2;
  OK(pw_graph_decode(e.f.client, b1, n1, &o, &g2));
  void* b2;
  size_t n2;
  encode(&e, g2, NULL, &b2, &n2);
  cr_assert_eq(n1, n2);
  cr_assert(memcmp(b1, b2, n1) == 0, "re-encoding the decoded graph changed its bytes");
  pw_graph_counts_t c1 = {.struct_size = sizeof(pw_graph_counts_t)},
                    c2 = {.struct_size = sizeof(pw_graph_counts_t)};
  OK(pw_graph_counts(e.f.client, g, &c1));
  OK(pw_graph_counts(e.f.client, g2, &c2));
  cr_assert(memcmp(&c1, &c2, sizeof(c1)) == 0);
  pw_allocator_free(pw_allocator_system(), b1, n1);
  pw_allocator_free(pw_allocator_system(), b2, n2);
  pw_fixture_deinit(&e.f);
}

Test(graph_codec, decoded_graph_runs) {
  env_t e;
  env_init(&e);
  pw_graph_t g;
  OK(pw_graph_create(e.f.client, &g));
  uint32_t p;
  OK(pw_graph_add_parameter(e.f.client, g, e.vs, &e.spec, &p));
  pw_value_t in = pw_value(p, 0);
  uint32_t a, b;
  OK(pw_graph_add_compute(e.f.client, g, "a", e.copy, e.vs, &in, 1, &a));
  in = pw_value(a, 0);
  OK(pw_graph_add_compute(e.f.client, g, "b", e.copy, e.vs, &in, 1, &b));
  OK(pw_graph_add_output(e.f.client, g, pw_value(b, 0)));
  void* bytes;
  size_t size;
  encode(&e, g, NULL, &bytes, &size);
  OK(pw_graph_release(e.f.client, g));
  pw_graph_decode_options_t o = decode_options(&e.vs, 1);
  pw_graph_t d;
  OK(pw_graph_decode(e.f.client, bytes, size, &o, &d));
  float host[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t dims[1] = {8};
  pw_buffer_t arg, out;
  OK(pw_fixture_f32(&e.f, e.vs, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), host, &arg));
  pw_event_t* done = NULL;
  OK(pw_graph_submit(e.f.client, d, &arg, 1, NULL, &out, 1, &done));
  OK(pw_fixture_wait(done));
  float back[8] = {0};
  OK(pw_buffer_to_host(e.f.client, out, back, sizeof(back), pw_deadline_from_timeout(5000000000LL)));
  cr_assert(memcmp(host, back, sizeof(host)) == 0);
  pw_allocator_free(pw_allocator_system(), bytes, size);
  pw_fixture_deinit(&e.f);
}

Test(graph_codec, transfer_nodes_round_trip_and_run) {
  env_t e;
  env_init(&e);
  /* p (split over vs) -> copy "a" -> transfer "t" onto other, replicated,
   * added before "a" exists. */
  pw_graph_t g;
  OK(pw_graph_create(e.f.client, &g));
  uint32_t p, t, a;
  OK(pw_graph_add_parameter(e.f.client, g, e.vs, &e.spec, &p));
  OK(pw_graph_add_transfer(e.f.client, g, "t", pw_value(2, 0), e.other, pw_sharding_replicated(),
                           &t));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(e.f.client, g, "a", e.copy, e.vs, &in, 1, &a));
  OK(pw_graph_add_output(e.f.client, g, pw_value(t, 0)));
  void* b1;
  size_t n1;
  encode(&e, g, NULL, &b1, &n1);
  char* json = NULL;
  size_t json_size = 0;
  OK(pw_graph_format_dump_json(b1, n1, pw_allocator_system(), &json, &json_size));
  cr_assert(strstr(json, "\"name\": \"t\", \"transfer\": true, \"vslice\": 1") != NULL, "%s",
            json);
  cr_assert(strstr(json, "f32[8] replicated") != NULL, "%s", json);
  pw_allocator_free(pw_allocator_system(), json, json_size);
  pw_vslice_t both[2] = {e.vs, e.other};
  pw_graph_decode_options_t o = decode_options(both, 2);
  pw_graph_t d;
  OK(pw_graph_decode(e.f.client, b1, n1, &o, &d));
  void* b2;
  size_t n2;
  encode(&e, d, NULL, &b2, &n2);
  cr_assert(n1 == n2 && memcmp(b1, b2, n1) == 0, "re-encoding changed the bytes");
  float host[8] = {1, 2, 3, 4, 5, 6, 7, 8}, back[8] = {0};
  int64_t dims[1] = {8};
  pw_buffer_t arg, out;
  OK(pw_fixture_f32(&e.f, e.vs, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), host, &arg));
  pw_event_t* done = NULL;
  OK(pw_graph_submit(e.f.client, d, &arg, 1, NULL, &out, 1, &done));
  OK(pw_fixture_wait(done));
  OK(pw_buffer_to_host(e.f.client, out, back, sizeof(back), pw_deadline_from_timeout(5000000000LL)));
  cr_assert(memcmp(host, back, sizeof(host)) == 0);
  pw_allocator_free(pw_allocator_system(), b1, n1);
  pw_allocator_free(pw_allocator_system(), b2, n2);
  pw_fixture_deinit(&e.f);
}

static const void* graph_object(env_t* e, pw_graph_t g) {
  pw_object_t* o = NULL;
  OK(pw__handle_lookup(e->f.client, g.id, PW_OBJECT_GRAPH, "g", &o));
  pw__object_release(o);
  return o;
}

Test(graph_codec, identical_bytes_reuse_the_validated_lowered_graph) {
  env_t e;
  env_init(&e);
  pw_graph_t g = build(&e);
  void* bytes;
  size_t size;
  encode(&e, g, NULL, &bytes, &size);
  OK(pw_graph_release(e.f.client, g));
  pw_graph_decode_options_t o = decode_options(&e.vs, 1);
  pw_graph_t h1, h2, h3, h4;
  OK(pw_graph_decode(e.f.client, bytes, size, &o, &h1));
  size_t loaded = pw_double_backend_live_executables(e.f.dbl);
  OK(pw_graph_decode(e.f.client, bytes, size, &o, &h2));
  cr_assert_neq(h1.id, h2.id);
  cr_assert_eq(graph_object(&e, h1), graph_object(&e, h2), "second decode made a new graph");
  cr_assert_eq(pw_double_backend_live_executables(e.f.dbl), loaded, "second decode compiled");
  /* The memo follows the newest handle. */
  OK(pw_graph_release(e.f.client, h1));
  OK(pw_graph_decode(e.f.client, bytes, size, &o, &h3));
  cr_assert_eq(graph_object(&e, h2), graph_object(&e, h3));
  /* Other bindings are another graph. */
  pw_graph_decode_options_t o2 = decode_options(&e.other, 1);
  pw_graph_t other;
  OK(pw_graph_decode(e.f.client, bytes, size, &o2, &other));
  cr_assert_neq(graph_object(&e, other), graph_object(&e, h2));
  /* The memo holds no reference: once every handle is gone, decoding
   * builds (and compiles) again. */
  OK(pw_graph_release(e.f.client, h2));
  OK(pw_graph_release(e.f.client, h3));
  size_t before = pw_double_backend_live_executables(e.f.dbl);
  OK(pw_graph_decode(e.f.client, bytes, size, &o, &h4));
  cr_assert_gt(pw_double_backend_live_executables(e.f.dbl), before);
  pw_allocator_free(pw_allocator_system(), bytes, size);
  pw_fixture_deinit(&e.f);
}

/* Decodes |bytes| expecting |code| and |needle|, and checks that the
 * failure left no handle and no loaded executable behind. */
static void decode_fails(env_t* e, const void* bytes, size_t size,
                         const pw_graph_decode_options_t* o, pw_status_code_t code,
                         const char* needle) {
  uint32_t handles = e->f.client->handles.live;
  size_t loaded = pw_double_backend_live_executables(e->f.dbl);
  pw_graph_t g = {0};
  FAILS(pw_graph_decode(e->f.client, bytes, size, o, &g), code, needle);
  cr_assert_eq(g.id, 0);
  cr_assert_eq(e->f.client->handles.live, handles, "a failed decode left a handle");
  cr_assert_eq(pw_double_backend_live_executables(e->f.dbl), loaded,
               "a failed decode left an executable loaded");
}

Test(graph_codec, runtime_errors_name_the_path_and_leak_nothing) {
  env_t e;
  env_init(&e);
  static const uint32_t mesh24[2] = {2, 4};
  static const uint32_t mesh8[1] = {8};
  gf_cbor_t c;
  pw_graph_decode_options_t o = decode_options(&e.vs, 1);
  gf_one_node_graph(&c, 2, mesh24, COPY8, 8, 8);
  pw_graph_t ok;
  OK(pw_graph_decode(e.f.client, c.data, c.size, &o, &ok));
  OK(pw_graph_release(e.f.client, ok));

  pw_graph_decode_options_t none = decode_options(NULL, 0);
  decode_fails(&e, c.data, c.size, &none, PW_STATUS_INVALID_ARGUMENT,
               "the graph has 1 vslices, 0 virtual slices were supplied");
  pw_vslice_t flat;
  OK(pw_vslice_create(e.f.client, &(pw_mesh_shape_t)PW_MESH_SHAPE_INIT(1, 8, 0, 0, 0), 0, &flat));
  pw_graph_decode_options_t wrong_mesh = decode_options(&flat, 1);
  decode_fails(&e, c.data, c.size, &wrong_mesh, PW_STATUS_INVALID_ARGUMENT,
               "vslices[0]: the graph expects mesh 2x4, the supplied virtual slice has mesh 8");
  gf_one_node_graph(&c, 2, mesh24, COPY8, 16, 8);
  decode_fails(&e, c.data, c.size, &o, PW_STATUS_INVALID_ARGUMENT,
               "nodes[0].inputs[0]: buffer 0 is f32[16] split(0 over all devices), executable "
               "'copy' expects f32[8] split(0 over all devices)");
  gf_one_node_graph(&c, 2, mesh24, "copy\ninput f32[16] split(0,all)\noutput f32[16] split(0,all)\n",
                    16, 8);
  decode_fails(&e, c.data, c.size, &o, PW_STATUS_INVALID_ARGUMENT,
               "nodes[0].outputs[0]: buffer 1 is f32[8] split(0 over all devices), executable "
               "'copy' produces f32[16]");
  gf_one_node_graph(&c, 2, mesh24, "fill 7\noutput f32[8] split(0,all)\n", 8, 8);
  decode_fails(&e, c.data, c.size, &o, PW_STATUS_INVALID_ARGUMENT,
               "nodes[0].inputs: 1 buffers given, executable 'fill' takes 0");
  gf_one_node_graph(&c, 2, mesh24, "frobnicate\n", 8, 8);
  decode_fails(&e, c.data, c.size, &o, PW_STATUS_INVALID_ARGUMENT, "executables[0]: compiling");
  gf_one_node_graph(&c, 1, mesh8, COPY8, 8, 8);
  OK(pw_graph_decode(e.f.client, c.data, c.size, &wrong_mesh, &ok));
  /* A file error is reported before anything is bound. */
  decode_fails(&e, "\xa0", 1, &o, PW_STATUS_INVALID_ARGUMENT, "graph: missing key \"v\"");
  pw_fixture_deinit(&e.f);
}

Test(graph_codec, executables_by_hash) {
  env_t e;
  env_init(&e);
  pw_graph_t g = build(&e);
  pw_graph_encode_options_t eo;
  memset(&eo, 0, sizeof(eo));
  eo.struct_size = sizeof(eo);
  eo.executables_by_hash = true;
  void* bytes;
  size_t size;
  encode(&e, g, &eo, &bytes, &size);
  char* json = NULL;
  size_t json_size = 0;
  OK(pw_graph_format_dump_json(bytes, size, pw_allocator_system(), &json, &json_size));
  pw_graph_hash_t h;
  OK(pw_graph_executable_hash(e.f.client, e.add, &h));
  char hex[33];
  pw_graph_hash_format(&h, hex);
  cr_assert(strstr(json, hex) != NULL && strstr(json, "program") == NULL, "%s", json);
  pw_allocator_free(pw_allocator_system(), json, json_size);

  pw_graph_decode_options_t o = decode_options(&e.vs, 1);
  decode_fails(&e, bytes, size, &o, PW_STATUS_NOT_FOUND, "no supplied executable has hash");
  pw_executable_t exes[3] = {e.add, e.add, e.copy};
  o.executables = exes;
  o.executable_count = 3;
  pw_graph_t d;
  OK(pw_graph_decode(e.f.client, bytes, size, &o, &d));
  void* again;
  size_t again_size;
  encode(&e, d, &eo, &again, &again_size);
  cr_assert(again_size == size && memcmp(again, bytes, size) == 0);
  pw_allocator_free(pw_allocator_system(), bytes, size);
  pw_allocator_free(pw_allocator_system(), again, again_size);
  pw_fixture_deinit(&e.f);
}

Test(graph_codec, listed_vslice_order_and_encode_errors) {
  env_t e;
  env_init(&e);
  pw_graph_t g = build(&e);
  pw_vslice_t order[2] = {e.other, e.vs};
  pw_graph_encode_options_t eo;
  memset(&eo, 0, sizeof(eo));
  eo.struct_size = sizeof(eo);
  eo.vslices = order;
  eo.vslice_count = 2;
  void* bytes;
  size_t size;
  encode(&e, g, &eo, &bytes, &size);
  pw_graph_decode_options_t o = decode_options(order, 2);
  pw_graph_t d;
  OK(pw_graph_decode(e.f.client, bytes, size, &o, &d));
  pw_allocator_free(pw_allocator_system(), bytes, size);
  eo.vslices = &e.other;
  eo.vslice_count = 1;
  FAILS(pw_graph_encode(e.f.client, g, &eo, pw_allocator_system(), &bytes, &size),
        PW_STATUS_INVALID_ARGUMENT, "graph node 0 (\"param0\"): its virtual slice is not among");
  pw_graph_t bad;
  OK(pw_graph_create(e.f.client, &bad));
  uint32_t p;
  OK(pw_graph_add_parameter(e.f.client, bad, e.vs, &e.spec, &p));
  pw_value_t in = pw_value(9, 0);
  OK(pw_graph_add_compute(e.f.client, bad, "c", e.copy, e.vs, &in, 1, NULL));
  FAILS(pw_graph_encode(e.f.client, bad, NULL, pw_allocator_system(), &bytes, &size),
        PW_STATUS_INVALID_ARGUMENT,
        "graph node 1 (\"c\") input 0: refers to node 9, which does not exist");
  pw_fixture_deinit(&e.f);
}

Test(graph_codec, decoding_compiles_through_the_runtime_cache) {
  env_t e;
  env_init(&e);
  pw_cache_options_t co;
  pw_cache_options_init(&co);
  pw_cache_t* cache;
  OK(pw_cache_create(&co, &cache));
  OK(pw_runtime_set_compile_cache(e.f.runtime, cache));
  pw_graph_t g = build(&e);
  void* bytes;
  size_t size;
  encode(&e, g, NULL, &bytes, &size);
  /* Another client has its own memo: it decodes and compiles, and the
   * compiles are cache hits for the second one. */
  pw_client_t* clients[2];
  for (int i = 0; i < 2; ++i) {
    OK(pw_client_create(e.f.runtime, NULL, &clients[i]));
    pw_vslice_t vs;
    OK(pw_vslice_create(clients[i], &(pw_mesh_shape_t)PW_MESH_SHAPE_INIT(2, 2, 4, 0, 0), 0, &vs));
    pw_graph_decode_options_t o = decode_options(&vs, 1);
    pw_graph_t d;
    OK(pw_graph_decode(clients[i], bytes, size, &o, &d));
  }
  pw_cache_stats_t st;
  memset(&st, 0, sizeof(st));
  st.struct_size = sizeof(st);
  OK(pw_cache_stats(cache, &st));
  cr_assert_eq(st.misses, 2, "misses %llu", (unsigned long long)st.misses);
  cr_assert_eq(st.memory_hits, 2, "hits %llu", (unsigned long long)st.memory_hits);
  for (int i = 0; i < 2; ++i) pw_client_destroy(clients[i]);
  pw_allocator_free(pw_allocator_system(), bytes, size);
  pw_fixture_deinit(&e.f);
  pw_cache_release(cache);
}

Test(graph_codec, every_allocation_failure_in_decode_is_reported_cleanly) {
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  env_t e;
  env_init_with(&e, pw_test_allocator(&t));
  pw_graph_t g = build(&e);
  void* bytes;
  size_t size;
  encode(&e, g, NULL, &bytes, &size);
  OK(pw_graph_release(e.f.client, g));
  pw_graph_decode_options_t o = decode_options(&e.vs, 1);
  /* One decode first: the client makes its decoded-graph memo on its first
   * decode and keeps it until it is destroyed. */
  pw_graph_t warm;
  OK(pw_graph_decode(e.f.client, bytes, size, &o, &warm));
  OK(pw_graph_release(e.f.client, warm));
  /* Count the attempts of one successful decode. */
  size_t live = pw_test_allocator_live(&t);
  size_t before = atomic_load(&t.attempts);
  pw_graph_t d;
  OK(pw_graph_decode(e.f.client, bytes, size, &o, &d));
  size_t points = atomic_load(&t.attempts) - before;
  OK(pw_graph_release(e.f.client, d));
  cr_assert_eq(pw_test_allocator_live(&t), live);
  cr_assert_gt(points, 10);
  for (size_t n = 1; n <= points; ++n) {
    t.fail_at = atomic_load(&t.attempts) + n;
    pw_status_t s = pw_graph_decode(e.f.client, bytes, size, &o, &d);
    t.fail_at = 0;
    if (s == NULL) {
      /* Only an optional allocation failed (e.g. the handle table did not
       * need to grow); the result must be complete. */
      OK(pw_graph_finalize(e.f.client, d));
      OK(pw_graph_release(e.f.client, d));
    } else {
      cr_assert_eq(pw_status_code(s), PW_STATUS_RESOURCE_EXHAUSTED, "failure %zu: %s", n,
                   pw_status_message(s));
      cr_assert_eq(d.id, 0);
      pw_status_free(s);
    }
    cr_assert_eq(pw_test_allocator_live(&t), live, "failure %zu of %zu leaked %zu blocks", n,
                 points, pw_test_allocator_live(&t) - live);
  }
  pw_allocator_free(pw_allocator_system(), bytes, size);
  pw_fixture_deinit(&e.f);
  cr_assert_eq(pw_test_allocator_live(&t), 0);
  cr_assert_eq(atomic_load(&t.size_mismatches), 0);
}

/* A parameter of every dtype, each moved to the other slice (split over
 * 2x4 -> replicated over 2x4) and output: the file round-trips byte for
 * byte, its JSON names every dtype, and the decoded graph moves each
 * array's bytes unchanged (element sizes 1, 2, 4 and 8). */
Test(graph_codec, every_dtype_round_trips_and_moves_its_bytes) {
  env_t e;
  env_init(&e);
  enum { N = PW_DTYPE_COUNT - 1 };
  pw_graph_t g;
  OK(pw_graph_create(e.f.client, &g));
  pw_array_spec_t specs[N];
  for (int i = 0; i < N; ++i) {
    specs[i] = e.spec;
    specs[i].dtype = (pw_dtype_t)(i + 1);
    uint32_t p, t;
    OK(pw_graph_add_parameter(e.f.client, g, e.vs, &specs[i], &p));
    OK(pw_graph_add_transfer(e.f.client, g, pw_dtype_name(specs[i].dtype), pw_value(p, 0),
                             e.other, pw_sharding_replicated(), &t));
    OK(pw_graph_add_output(e.f.client, g, pw_value(t, 0)));
  }
  void* b1;
  size_t n1;
  encode(&e, g, NULL, &b1, &n1);
  char* json = NULL;
  size_t json_size = 0;
  OK(pw_graph_format_dump_json(b1, n1, pw_allocator_system(), &json, &json_size));
  for (int i = 0; i < N; ++i) {
    char want[64];
    snprintf(want, sizeof(want), "%s[8] split(0 over all devices)",
             pw_dtype_name(specs[i].dtype));
    cr_assert(strstr(json, want) != NULL, "JSON lacks %s:\n%s", want, json);
  }
  pw_allocator_free(pw_allocator_system(), json, json_size);
  pw_vslice_t both[2] = {e.vs, e.other};
  pw_graph_decode_options_t o = decode_options(both, 2);
  pw_graph_t d;
  OK(pw_graph_decode(e.f.client, b1, n1, &o, &d));
  void* b2;
  size_t n2;
  encode(&e, d, NULL, &b2, &n2);
  cr_assert(n1 == n2 && memcmp(b1, b2, n1) == 0, "re-encoding changed the bytes");
  pw_buffer_t args[N], outs[N];
  unsigned char host[N][64], back[64];
  for (int i = 0; i < N; ++i) {
    size_t bytes = 8 * pw_dtype_size(specs[i].dtype);
    for (size_t k = 0; k < bytes; ++k) host[i][k] = (unsigned char)(i * 31 + k * 7 + 1);
    OK(pw_buffer_from_host(e.f.client, e.vs, &specs[i], host[i], bytes, &args[i]));
  }
  pw_event_t* done = NULL;
  OK(pw_graph_submit(e.f.client, d, args, N, NULL, outs, N, &done));
  OK(pw_fixture_wait(done));
  for (int i = 0; i < N; ++i) {
    size_t bytes = 8 * pw_dtype_size(specs[i].dtype);
    memset(back, 0, sizeof(back));
    OK(pw_buffer_to_host(e.f.client, outs[i], back, bytes,
                         pw_deadline_from_timeout(5000000000LL)));
    cr_assert(memcmp(host[i], back, bytes) == 0, "%s changed in transit",
              pw_dtype_name(specs[i].dtype));
  }
  pw_allocator_free(pw_allocator_system(), b1, n1);
  pw_allocator_free(pw_allocator_system(), b2, n2);
  pw_fixture_deinit(&e.f);
}
