#define _GNU_SOURCE /* memmem */
/* Graph files with named mesh axes and tiled shardings (format version 3):
 * a client's graph on "data=2,model=4" slices round trips through the
 * bytes with its names and its PartitionSpec shardings, the JSON view
 * shows both, a decoded transfer moves the elements, and a bound slice
 * whose axes are named otherwise is refused. */
#include <stdlib.h>

#include "graph_format/doc.h"
#include "graph_format/gf_util.h"
#include "pathways/graph_format.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(graph_named, .fini = pw_test_check_leaks);

typedef struct named_env_t {
  pw_fixture_t f;
  pw_vslice_t a;  /* data=2,model=4 */
  pw_vslice_t b;  /* data=2,model=4 */
  pw_array_spec_t spec;      /* f32[8,8] P(data, model) */
  pw_sharding_t moved;       /* P((model, data)) */
} named_env_t;

static pw_sharding_t parse(const char* text, uint32_t rank, const pw_mesh_shape_t* mesh) {
  pw_sharding_t s;
  OK(pw_sharding_parse(text, strlen(text), rank, mesh, &s));
  return s;
}

static void named_init(named_env_t* e) {
  OK(pw_fixture_init(&e->f, PW_FIXTURE_DOUBLE_INLINE, 4, "2x4", pw_allocator_system()));
  OK(pw_fixture_vslice(&e->f, "data=2,model=4", &e->a));
  OK(pw_fixture_vslice(&e->f, "data=2,model=4", &e->b));
  pw_mesh_shape_t mesh;
  OK(pw_mesh_shape_parse("data=2,model=4", &mesh));
  int64_t dims[2] = {8, 8};
  e->spec = pw_fixture_spec_f32(2, dims, parse("P(data, model)", 2, &mesh));
  e->moved = parse("P((model, data))", 2, &mesh);
}

/* parameter (on a) -> transfer "t" (onto b, P((model, data))). */
static pw_graph_t named_build(named_env_t* e) {
  pw_graph_t g;
  OK(pw_graph_create(e->f.client, &g));
  uint32_t p, t;
  OK(pw_graph_add_parameter(e->f.client, g, e->a, &e->spec, &p));
  OK(pw_graph_add_transfer(e->f.client, g, "t", pw_value(p, 0), e->b, e->moved, &t));
  OK(pw_graph_add_output(e->f.client, g, pw_value(t, 0)));
  return g;
}

Test(graph_named, names_and_tiled_shardings_round_trip) {
  named_env_t e;
  named_init(&e);
  pw_graph_t g = named_build(&e);
  void* b1;
  size_t n1;
  OK(pw_graph_encode(e.f.client, g, NULL, pw_allocator_system(), &b1, &n1));
  /* The document holds the names and the shardings exactly. */
  pw_gdoc_t doc;
  pw__gdoc_init(&doc, pw_allocator_system());
  OK(pw__gdoc_load(&doc, b1, n1));
  cr_assert_eq(doc.version, 3);
  cr_assert_eq(doc.vslice_count, 2);
  cr_assert_str_eq(doc.vslices[0].axis_names[0], "data");
  cr_assert_str_eq(doc.vslices[1].axis_names[1], "model");
  cr_assert(pw_sharding_equal(&doc.buffers[0].spec.sharding, &e.spec.sharding));
  cr_assert(pw_sharding_equal(&doc.buffers[1].spec.sharding, &e.moved));
  pw__gdoc_free(&doc);
  char* json = NULL;
  size_t json_size = 0;
  OK(pw_graph_format_dump_json(b1, n1, pw_allocator_system(), &json, &json_size));
  cr_assert(strstr(json, "\"vslices\": [\"data=2,model=4\", \"data=2,model=4\"]") != NULL, "%s",
            json);
  cr_assert(strstr(json, "\"sharding\": \"P(data, model)\"") != NULL, "%s", json);
  cr_assert(strstr(json, "\"sharding\": \"P((model, data))\"") != NULL, "%s", json);
  pw_allocator_free(pw_allocator_system(), json, json_size);
  /* Decoded and encoded again: the same bytes. */
  pw_vslice_t both[2] = {e.a, e.b};
  pw_graph_decode_options_t o = {sizeof(o), both, 2, NULL, 0};
  pw_graph_t d;
  OK(pw_graph_decode(e.f.client, b1, n1, &o, &d));
  void* b2;
  size_t n2;
  OK(pw_graph_encode(e.f.client, d, NULL, pw_allocator_system(), &b2, &n2));
  cr_assert(n1 == n2 && memcmp(b1, b2, n1) == 0, "re-encoding changed the bytes");
  pw_allocator_free(pw_allocator_system(), b2, n2);
  /* The decoded graph moves every element where the destination says. */
  float host[64], back[64];
  for (int i = 0; i < 64; ++i) host[i] = (float)i;
  pw_buffer_t arg, out;
  OK(pw_buffer_from_host(e.f.client, e.a, &e.spec, host, sizeof(host), &arg));
  pw_event_t* done = NULL;
  OK(pw_graph_submit(e.f.client, d, &arg, 1, NULL, &out, 1, &done));
  OK(pw_fixture_wait(done));
  memset(back, 0, sizeof(back));
  OK(pw_buffer_to_host(e.f.client, out, back, sizeof(back), pw_deadline_from_timeout(5000000000LL)));
  cr_assert(memcmp(host, back, sizeof(host)) == 0);
  OK(pw_graph_release(e.f.client, d));
  OK(pw_graph_release(e.f.client, g));
  pw_allocator_free(pw_allocator_system(), b1, n1);
  pw_fixture_deinit(&e.f);
}

Test(graph_named, bound_slices_must_not_name_their_axes_otherwise) {
  named_env_t e;
  named_init(&e);
  pw_graph_t g = named_build(&e);
  void* bytes;
  size_t size;
  OK(pw_graph_encode(e.f.client, g, NULL, pw_allocator_system(), &bytes, &size));
  pw_vslice_t renamed, unnamed;
  OK(pw_fixture_vslice(&e.f, "x=2,y=4", &renamed));
  OK(pw_fixture_vslice(&e.f, "2x4", &unnamed));
  pw_vslice_t clash[2] = {e.a, renamed};
  pw_graph_decode_options_t o = {sizeof(o), clash, 2, NULL, 0};
  pw_graph_t d = {0};
  FAILS(pw_graph_decode(e.f.client, bytes, size, &o, &d), PW_STATUS_INVALID_ARGUMENT,
        "vslices[1]: the graph expects mesh data=2,model=4, the supplied virtual slice has "
        "mesh x=2,y=4 (the axis names differ)");
  /* An unnamed slice of the same shape binds: the file's names are labels. */
  pw_vslice_t plain[2] = {e.a, unnamed};
  o.vslices = plain;
  OK(pw_graph_decode(e.f.client, bytes, size, &o, &d));
  OK(pw_graph_release(e.f.client, d));
  OK(pw_graph_release(e.f.client, g));
  pw_allocator_free(pw_allocator_system(), bytes, size);
  pw_fixture_deinit(&e.f);
}

Test(graph_named, replicated_and_split_keep_the_old_encoding) {
  /* A graph with neither names nor tiled shardings is version 1, byte for
   * byte; naming its mesh makes it version 3 with the same sharding forms. */
  named_env_t e;
  named_init(&e);
  pw_vslice_t plain;
  OK(pw_fixture_vslice(&e.f, "2x4", &plain));
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, 1));
  pw_vslice_t slices[2] = {plain, e.a};
  for (int k = 0; k < 2; ++k) {
    pw_graph_t g;
    OK(pw_graph_create(e.f.client, &g));
    uint32_t p;
    OK(pw_graph_add_parameter(e.f.client, g, slices[k], &spec, &p));
    OK(pw_graph_add_output(e.f.client, g, pw_value(p, 0)));
    void* bytes;
    size_t size;
    OK(pw_graph_encode(e.f.client, g, NULL, pw_allocator_system(), &bytes, &size));
    pw_gdoc_t doc;
    pw__gdoc_init(&doc, pw_allocator_system());
    OK(pw__gdoc_load(&doc, bytes, size));
    cr_assert_eq(doc.version, k == 0 ? 1u : 3u);
    cr_assert(pw_sharding_equal(&doc.buffers[0].spec.sharding, &spec.sharding));
    pw__gdoc_free(&doc);
    /* "split" and "mesh_axis" as text in the bytes: the old map. */
    cr_assert(memmem(bytes, size, "mesh_axis", 9) != NULL);
    cr_assert(memmem(bytes, size, "spec", 4) == NULL);
    cr_assert((memmem(bytes, size, "model", 5) != NULL) == (k == 1));
    pw_allocator_free(pw_allocator_system(), bytes, size);
    OK(pw_graph_release(e.f.client, g));
  }
  pw_fixture_deinit(&e.f);
}
