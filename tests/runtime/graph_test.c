/* Graph validation: one test per kind of error, each checking the status
 * code and that the message names the culprit; and that the client stays
 * usable afterwards. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(graph, .fini = pw_test_check_leaks);

typedef struct env_t {
  pw_fixture_t f;
  pw_vslice_t vs;       /* 2x4 on slice 0 */
  pw_vslice_t other;    /* 2x4 on slice 1 */
  pw_executable_t copy; /* f32[8] split(0,all) -> same */
  pw_executable_t add2; /* two f32[8] split inputs */
  pw_graph_t g;
  pw_array_spec_t spec;
} env_t;

static void env_init(env_t* e) {
  OK(pw_fixture_init(&e->f, PW_FIXTURE_DOUBLE_INLINE, 2, "2x4", pw_allocator_system()));
  OK(pw_fixture_vslice(&e->f, "2x4", &e->vs));
  OK(pw_fixture_vslice(&e->f, "2x4", &e->other));
  OK(pw_fixture_compile(&e->f, e->vs,
                        "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n",
                        &e->copy));
  OK(pw_fixture_compile(&e->f, e->vs,
                        "noop\ninput f32[8] split(0,all)\ninput f32[8] split(0,all)\n"
                        "output f32[8] split(0,all)\n",
                        &e->add2));
  OK(pw_graph_create(e->f.client, &e->g));
  int64_t dims[1] = {8};
  e->spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
}

static void env_deinit(env_t* e) { pw_fixture_deinit(&e->f); }

static uint32_t add_param(env_t* e, const pw_array_spec_t* spec) {
  uint32_t id;
  OK(pw_graph_add_parameter(e->f.client, e->g, e->vs, spec, &id));
  return id;
}

Test(graph, dtype_mismatch_names_node_and_input) {
  env_t e;
  env_init(&e);
  pw_array_spec_t spec = e.spec;
  spec.dtype = PW_DTYPE_I32;
  uint32_t p = add_param(&e, &spec);
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(e.f.client, e.g, "mm", e.copy, e.vs, &in, 1, NULL));
  FAILS(pw_graph_finalize(e.f.client, e.g), PW_STATUS_INVALID_ARGUMENT,
        "graph node 1 (\"mm\"): input 0 dtype mismatch: has i32[8]");
  env_deinit(&e);
}

Test(graph, shape_mismatch) {
  env_t e;
  env_init(&e);
  pw_array_spec_t spec = e.spec;
  spec.shape.dims[0] = 16;
  uint32_t p = add_param(&e, &spec);
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(e.f.client, e.g, "mm", e.copy, e.vs, &in, 1, NULL));
  FAILS(pw_graph_finalize(e.f.client, e.g), PW_STATUS_INVALID_ARGUMENT,
        "input 0 shape mismatch: has f32[16] split(0 over all devices), executable "
        "'copy' expects f32[8] split(0 over all devices)");
  env_deinit(&e);
}

Test(graph, sharding_mismatch) {
  env_t e;
  env_init(&e);
  pw_array_spec_t spec = e.spec;
  spec.sharding = pw_sharding_replicated();
  uint32_t p = add_param(&e, &spec);
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(e.f.client, e.g, "c", e.copy, e.vs, &in, 1, NULL));
  FAILS(pw_graph_finalize(e.f.client, e.g), PW_STATUS_INVALID_ARGUMENT,
        "input 0 sharding mismatch: has f32[8] replicated");
  env_deinit(&e);
}

Test(graph, unknown_node_and_output) {
  env_t e;
  env_init(&e);
  uint32_t p = add_param(&e, &e.spec);
  pw_value_t in = pw_value(9, 0);
  OK(pw_graph_add_compute(e.f.client, e.g, "c", e.copy, e.vs, &in, 1, NULL));
  FAILS(pw_graph_finalize(e.f.client, e.g), PW_STATUS_INVALID_ARGUMENT,
        "graph node 1 (\"c\"): input 0: refers to node 9, which does not exist");
  pw_graph_t g2;
  OK(pw_graph_create(e.f.client, &g2));
  OK(pw_graph_add_parameter(e.f.client, g2, e.vs, &e.spec, &p));
  in = pw_value(p, 3);
  OK(pw_graph_add_compute(e.f.client, g2, "c", e.copy, e.vs, &in, 1, NULL));
  FAILS(pw_graph_finalize(e.f.client, g2), PW_STATUS_INVALID_ARGUMENT,
        "refers to output 3 of parameter node 0");
  pw_graph_t g3;
  OK(pw_graph_create(e.f.client, &g3));
  OK(pw_graph_add_parameter(e.f.client, g3, e.vs, &e.spec, &p));
  OK(pw_graph_add_output(e.f.client, g3, pw_value(4, 0)));
  FAILS(pw_graph_finalize(e.f.client, g3), PW_STATUS_INVALID_ARGUMENT,
        "graph output 0: refers to node 4, which does not exist");
  env_deinit(&e);
}

Test(graph, wrong_input_count) {
  env_t e;
  env_init(&e);
  uint32_t p = add_param(&e, &e.spec);
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(e.f.client, e.g, "pair", e.add2, e.vs, &in, 1, NULL));
  FAILS(pw_graph_finalize(e.f.client, e.g), PW_STATUS_INVALID_ARGUMENT,
        "graph node 1 (\"pair\"): 1 inputs given, executable 'noop' takes 2");
  env_deinit(&e);
}

Test(graph, cycle_is_reported_with_its_nodes) {
  env_t e;
  env_init(&e);
  uint32_t p = add_param(&e, &e.spec);
  /* node 1 = pair(p, node 3); node 2 = copy(node 1); node 3 = copy(node 2). */
  pw_value_t ins[2] = {pw_value(p, 0), pw_value(3, 0)};
  OK(pw_graph_add_compute(e.f.client, e.g, "head", e.add2, e.vs, ins, 2, NULL));
  pw_value_t in = pw_value(1, 0);
  OK(pw_graph_add_compute(e.f.client, e.g, "mid", e.copy, e.vs, &in, 1, NULL));
  in = pw_value(2, 0);
  OK(pw_graph_add_compute(e.f.client, e.g, "tail", e.copy, e.vs, &in, 1, NULL));
  pw_status_t s = pw_graph_finalize(e.f.client, e.g);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  const char* m = pw_status_message(s);
  cr_assert(strstr(m, "cycle"), "%s", m);
  cr_assert(strstr(m, "\"head\"") && strstr(m, "\"mid\"") && strstr(m, "\"tail\""), "%s", m);
  pw_status_free(s);
  env_deinit(&e);
}

Test(graph, input_from_another_slice_needs_a_transfer) {
  env_t e;
  env_init(&e);
  uint32_t p;
  OK(pw_graph_add_parameter(e.f.client, e.g, e.other, &e.spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(e.f.client, e.g, "c", e.copy, e.vs, &in, 1, NULL));
  FAILS(pw_graph_finalize(e.f.client, e.g), PW_STATUS_INVALID_ARGUMENT,
        "input 0 lives on slice 'slice1', the node runs on slice 'slice0'");
  env_deinit(&e);
}

Test(graph, mesh_mismatch_between_executable_and_vslice) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 2, "2x4", pw_allocator_system()));
  pw_vslice_t vs, flat;
  OK(pw_fixture_vslice(&f, "2x4", &vs));
  OK(pw_fixture_vslice(&f, "8", &flat)); /* same device count, other shape */
  pw_executable_t copy;
  OK(pw_fixture_compile(&f, vs, "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n",
                        &copy));
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t p;
  OK(pw_graph_add_parameter(f.client, g, flat, &spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(f.client, g, "c", copy, flat, &in, 1, NULL));
  FAILS(pw_graph_finalize(f.client, g), PW_STATUS_INVALID_ARGUMENT,
        "executable 'copy' is compiled for mesh 2x4, the node's virtual slice has mesh 8");
  pw_fixture_deinit(&f);
}

Test(graph, released_and_foreign_handles_are_rejected_at_add) {
  env_t e;
  env_init(&e);
  uint32_t p = add_param(&e, &e.spec);
  pw_value_t in = pw_value(p, 0);
  pw_executable_t gone = e.copy;
  OK(pw_executable_release(e.f.client, gone));
  FAILS(pw_graph_add_compute(e.f.client, e.g, "c", gone, e.vs, &in, 1, NULL),
        PW_STATUS_NOT_FOUND, "executable handle");
  pw_client_t* intruder = NULL;
  OK(pw_client_create(e.f.runtime, NULL, &intruder));
  FAILS(pw_graph_add_compute(intruder, e.g, "c", e.add2, e.vs, &in, 1, NULL),
        PW_STATUS_PERMISSION_DENIED, "belongs to another client");
  pw_vslice_t ivs;
  OK(pw_fixture_vslice(&(pw_fixture_t){.client = intruder}, "2x4", &ivs));
  FAILS(pw_graph_add_parameter(e.f.client, e.g, ivs, &e.spec, NULL),
        PW_STATUS_PERMISSION_DENIED, "vslice");
  /* A buffer id passed where a graph id is expected. */
  float data[8] = {0};
  pw_buffer_t buf;
  int64_t dims[1] = {8};
  OK(pw_fixture_f32(&e.f, e.vs, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), data, &buf));
  pw_graph_t fake = {buf.id};
  FAILS(pw_graph_finalize(e.f.client, fake), PW_STATUS_INVALID_ARGUMENT,
        "is a buffer handle, not a graph handle");
  pw_client_destroy(intruder);
  env_deinit(&e);
}

Test(graph, finalized_graph_is_frozen_and_submit_checks_arguments) {
  env_t e;
  env_init(&e);
  uint32_t p = add_param(&e, &e.spec);
  pw_value_t in = pw_value(p, 0);
  uint32_t c;
  OK(pw_graph_add_compute(e.f.client, e.g, "c", e.copy, e.vs, &in, 1, &c));
  OK(pw_graph_add_output(e.f.client, e.g, pw_value(c, 0)));
  OK(pw_graph_finalize(e.f.client, e.g));
  OK(pw_graph_finalize(e.f.client, e.g)); /* idempotent */
  FAILS(pw_graph_add_output(e.f.client, e.g, pw_value(c, 0)), PW_STATUS_FAILED_PRECONDITION,
        "finalized");
  pw_graph_counts_t counts = {.struct_size = sizeof(pw_graph_counts_t)};
  OK(pw_graph_counts(e.f.client, e.g, &counts));
  cr_assert_eq(counts.parameters, 1);
  cr_assert_eq(counts.computes, 1);
  cr_assert_eq(counts.outputs, 1);
  pw_buffer_t out;
  FAILS(pw_graph_submit(e.f.client, e.g, NULL, 0, NULL, &out, 1, NULL),
        PW_STATUS_INVALID_ARGUMENT, "0 arguments given, the graph has 1 parameters");
  float data[16] = {0};
  int64_t dims[1] = {16};
  pw_buffer_t wrong;
  OK(pw_fixture_f32(&e.f, e.vs, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), data, &wrong));
  FAILS(pw_graph_submit(e.f.client, e.g, &wrong, 1, NULL, &out, 1, NULL),
        PW_STATUS_INVALID_ARGUMENT, "args[0]: buffer is f32[16]");
  pw_buffer_t released = wrong;
  OK(pw_buffer_release(e.f.client, released));
  FAILS(pw_graph_submit(e.f.client, e.g, &released, 1, NULL, &out, 1, NULL),
        PW_STATUS_NOT_FOUND, "args[0]");
  pw_buffer_t two[2];
  FAILS(pw_graph_submit(e.f.client, e.g, &wrong, 1, NULL, two, 2, NULL),
        PW_STATUS_INVALID_ARGUMENT, "room for 2 outputs");
  /* Nothing was enqueued by the failed submits. */
  cr_assert_eq(pw_double_backend_total_launches(e.f.dbl), 0);
  env_deinit(&e);
}

/* Inputs may name nodes added later: such a graph is sorted (the usual
 * in-order graph takes a one-pass path), and runs the same. A consumer
 * that reads one producer twice counts it once among its dependencies. */
Test(graph, nodes_may_name_later_nodes) {
  env_t e;
  env_init(&e);
  uint32_t p = add_param(&e, &e.spec);
  /* nodes 1..4: node k copies node k + 1, node 4 copies the parameter. */
  for (uint32_t k = 1; k <= 4; ++k) {
    pw_value_t in = pw_value(k < 4 ? k + 1 : p, 0);
    OK(pw_graph_add_compute(e.f.client, e.g, NULL, e.copy, e.vs, &in, 1, NULL));
  }
  pw_value_t twice[2] = {pw_value(1, 0), pw_value(1, 0)};
  uint32_t pair;
  OK(pw_graph_add_compute(e.f.client, e.g, "pair", e.add2, e.vs, twice, 2, &pair));
  OK(pw_graph_add_output(e.f.client, e.g, pw_value(1, 0)));
  OK(pw_graph_add_output(e.f.client, e.g, pw_value(pair, 0)));
  OK(pw_graph_finalize(e.f.client, e.g));
  pw_graph_counts_t counts = {.struct_size = sizeof(pw_graph_counts_t)};
  OK(pw_graph_counts(e.f.client, e.g, &counts));
  cr_assert_eq(counts.computes, 5);
  cr_assert_eq(counts.edges, 5);
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t dims[1] = {8};
  pw_buffer_t arg, out[2];
  OK(pw_fixture_f32(&e.f, e.vs, 1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL), data, &arg));
  pw_event_t* done = NULL;
  OK(pw_graph_submit(e.f.client, e.g, &arg, 1, NULL, out, 2, &done));
  OK(pw_fixture_wait(done));
  float back[8] = {0};
  OK(pw_buffer_to_host(e.f.client, out[0], back, sizeof(back), PW_INFINITE_FUTURE));
  cr_assert_eq(memcmp(back, data, sizeof(data)), 0);
  cr_assert_eq(pw_double_backend_launch_count(e.f.dbl, 0), 5);
  env_deinit(&e);
}

/* Building costs allocations per chunk of nodes, not per node: a chain of
 * 20000 nodes (named, so names are copied too) takes a few dozen. */
static size_t chain_build_allocations(uint32_t n) {
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 1, "2x4", pw_test_allocator(&t)));
  pw_vslice_t vs;
  OK(pw_fixture_vslice(&f, "2x4", &vs));
  pw_executable_t copy;
  OK(pw_fixture_compile(&f, vs, "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n",
                        &copy));
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  size_t before = atomic_load(&t.allocations);
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  uint32_t prev;
  OK(pw_graph_add_parameter(f.client, g, vs, &spec, &prev));
  for (uint32_t i = 0; i < n; ++i) {
    char name[32];
    snprintf(name, sizeof(name), "step%u", i);
    pw_value_t in = pw_value(prev, 0);
    OK(pw_graph_add_compute(f.client, g, i % 2 ? name : NULL, copy, vs, &in, 1, &prev));
  }
  OK(pw_graph_add_output(f.client, g, pw_value(prev, 0)));
  OK(pw_graph_finalize(f.client, g));
  size_t used = atomic_load(&t.allocations) - before;
  pw_graph_counts_t counts = {.struct_size = sizeof(pw_graph_counts_t)};
  OK(pw_graph_counts(f.client, g, &counts));
  cr_assert_eq(counts.computes, n);
  cr_assert_eq(counts.edges, n - 1);
  OK(pw_graph_release(f.client, g));
  pw_fixture_deinit(&f);
  cr_assert_eq(pw_test_allocator_live(&t), 0);
  cr_assert_eq(atomic_load(&t.size_mismatches), 0);
  return used;
}

Test(graph, building_a_long_chain_allocates_per_chunk_not_per_node) {
  size_t small = chain_build_allocations(100);
  size_t big = chain_build_allocations(20000);
  cr_assert_lt(small, 16, "%zu allocations for 100 nodes", small);
  cr_assert_lt(big, 100, "%zu allocations for 20000 nodes", big);
}

/* Building and lowering a graph with transfers (their copies come from the
 * plan's arena), one allocation failing at a time: every failure is a
 * clean RESOURCE_EXHAUSTED and nothing leaks. */
static bool transfer_build_path(pw_allocator_t a, bool expect_failure, void* user) {
  (void)user;
  pw_fixture_t f;
  pw_status_t s = pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 2, "2x4", a);
  bool have_fixture = s == NULL;
  pw_vslice_t vs = {0}, other = {0};
  pw_graph_t g = {0};
  if (s == NULL) s = pw_fixture_vslice(&f, "2x4", &vs);
  if (s == NULL) s = pw_fixture_vslice(&f, "2x4", &other);
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  uint32_t prev = 0;
  if (s == NULL) s = pw_graph_create(f.client, &g);
  if (s == NULL) s = pw_graph_add_parameter(f.client, g, vs, &spec, &prev);
  for (uint32_t i = 0; s == NULL && i < 40; ++i) {
    pw_sharding_t to = i % 2 ? pw_sharding_split(0, PW_MESH_AXIS_ALL) : pw_sharding_replicated();
    s = pw_graph_add_transfer(f.client, g, i % 3 ? NULL : "move", pw_value(prev, 0),
                              i % 2 ? vs : other, to, &prev);
  }
  if (s == NULL) s = pw_graph_add_output(f.client, g, pw_value(prev, 0));
  if (s == NULL) s = pw_graph_finalize(f.client, g);
  bool ok = pw_sweep_path_end(s, expect_failure, true, "transfer_build_path");
  if (have_fixture) pw_fixture_deinit(&f);
  return ok;
}

Test(graph, failing_allocator_sweep_over_building_transfers) {
  char why[256] = "";
  int points = pw_test_allocator_sweep(transfer_build_path, NULL, why);
  cr_assert_gt(points, 10, "%s", why);
}
