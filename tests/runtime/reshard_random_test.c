/* Resharding between any two shardings, checked on seeded random pairs
 * (reshard_cases.h): through the runtime on the CPU backend (the source
 * filled from the host, a graph's transfer node moving it, every
 * destination device's raw shard and the gathered array compared, the
 * plan's bytes the minimum), and through pw__reshard_plan alone (more
 * pairs, executed on host copies of the shards). Sources unreduced over
 * random mesh axes are reduced by the transfer (the backend's
 * accumulate). A failure prints the case's seed; tests/runtime/
 * reshard_seeds.c reruns seeds from the command line. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/handles.h"
#include "core/objects.h"
#include "core/runtime.h"
#include "graph/graph_obj.h"
#include "pathways/backends/cpu.h"
#include "pathways/transports/inproc.h"
#include "plugin/backend_call.h"
#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "runtime/reshard_cases.h"
#include "support/test_allocators.h"

TestSuite(reshard_random, .fini = pw_test_check_leaks);

/* Two 1-D physical slices of each device count a case uses: "s2a",
 * "s2b", ... "s8b", 40 CPU devices. */
typedef struct world_t {
  pw_runtime_t* rt;
  pw_client_t* client;
} world_t;

static const uint32_t world_counts[4] = {2, 4, 6, 8};

/* The bundled inproc transport with copy only (no copy_strided): the
 * dispatcher then issues one copy per row. */
static void rows_destroy(void* self) {
  pw_transport_t* inner = self;
  inner->vtable->destroy(inner->self);
}

static atomic_ulong rows_copies;
/* Records and rows of the plans run_case ran. */
static uint64_t planned_records, planned_rows;

static pw_status_t rows_copy(void* self, const pw_transport_copy_t* copy) {
  pw_transport_t* inner = self;
  atomic_fetch_add(&rows_copies, 1);
  return inner->vtable->copy(inner->self, copy);
}

static const pw_transport_vtable_t rows_vtable = {
    .struct_size = PW_TRANSPORT_VTABLE_SIZE_V1,
    .name = "rows",
    .version = 1,
    .destroy = rows_destroy,
    .copy = rows_copy,
};

static pw_transport_t rows_inner;

static void world_init_with(world_t* w, bool rows);

static void world_init(world_t* w) { world_init_with(w, false); }

static void world_init_with(world_t* w, bool rows) {
  memset(w, 0, sizeof(*w));
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = 40;
  o.worker_count = 2;
  pw_backend_t backend;
  OK(pw_cpu_backend_create(&o, &backend));
  pw_slice_desc_t slices[8];
  memset(slices, 0, sizeof(slices));
  char names[8][8];
  uint32_t first = 0;
  for (uint32_t i = 0; i < 8; ++i) {
    uint32_t n = world_counts[i / 2];
    snprintf(names[i], sizeof(names[i]), "s%u%c", n, 'a' + (int)(i % 2));
    slices[i].name = names[i];
    slices[i].mesh = pw_mesh_shape_make(1, &n);
    slices[i].first_device = first;
    slices[i].host = i;
    first += n;
  }
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = 8;
  ro.worker_count = 1;
  if (rows) {
    OK(pw_inproc_transport_create(NULL, &rows_inner));
    ro.transport = (pw_transport_t){&rows_vtable, &rows_inner};
  }
  OK(pw_runtime_create(&ro, &w->rt));
  OK(pw_client_create(w->rt, NULL, &w->client));
}

static void world_deinit(world_t* w) {
  pw_client_destroy(w->client);
  pw_runtime_destroy(w->rt);
}

static pw_status_t world_vslice(world_t* w, const pw_mesh_shape_t* mesh, uint32_t count,
                                char which, pw_vslice_t* out) {
  char name[8];
  snprintf(name, sizeof(name), "s%u%c", count, which);
  pw_vslice_request_t r;
  memset(&r, 0, sizeof(r));
  r.struct_size = sizeof(r);
  r.mesh = *mesh;
  r.flags = PW_VSLICE_SHARE_OWN;
  r.slice_name = name;
  r.host = PW_VSLICE_ANY_HOST;
  return pw_vslice_create_request(w->client, &r, out);
}

static pw_buffer_obj_t* buffer_object(world_t* w, pw_buffer_t b) {
  pw_object_t* o = NULL;
  OK(pw__handle_lookup(w->client, b.id, PW_OBJECT_BUFFER, "buffer", &o));
  pw__object_release(o); /* the handle keeps it */
  return (pw_buffer_obj_t*)o;
}

/* The source of |c| on |vs|: from the host; a source of partial sums is
 * made from the host as its reduced layout and then gets each device's
 * partial sum written into its shard (no public call makes partial sums
 * from host data: a computation would). */
static void make_source(world_t* w, const reshard_case_t* c, pw_vslice_t vs, pw_buffer_t* out) {
  size_t total = 0, shard = 0;
  OK(pw_array_spec_byte_sizes(&c->src, &c->src_mesh, &total, &shard));
  pw_array_spec_t spec = c->src;
  uint32_t partials = pw_sharding_partial_count(&c->src.sharding, &c->src_mesh);
  if (partials > 1) spec.sharding.unreduced_axes = 0;
  unsigned char* host = malloc(total + shard + 1);
  cr_assert_not_null(host);
  /* The global array: one device's shard per block of a replicated view. */
  reshard_case_t whole = *c;
  whole.src.sharding = pw_sharding_replicated();
  reshard_source_shard(&whole, 0, host);
  OK(pw_buffer_from_host(w->client, vs, &spec, host, total, out));
  if (partials > 1) {
    pw_buffer_obj_t* b = buffer_object(w, *out);
    b->spec.sharding = c->src.sharding;
    for (uint32_t i = 0; i < pw_mesh_shape_device_count(&c->src_mesh); ++i) {
      reshard_source_shard(c, i, host + total);
      OK(pw__backend_copy_to_device(b->slice->backend, b->slice->group_devices[i], b->shards[i],
                                    0, host + total, shard));
    }
  }
  free(host);
}

static const pw_plan_op_t* transfer_op(world_t* w, pw_graph_t g) {
  pw_object_t* o = NULL;
  OK(pw__handle_lookup(w->client, g.id, PW_OBJECT_GRAPH, "graph", &o));
  pw__object_release(o);
  const pw_plan_t* plan = &((pw_graph_obj_t*)o)->plan;
  for (uint32_t k = 0; k < plan->op_count; ++k) {
    if (plan->ops[k].kind == PW_PLAN_TRANSFER) return &plan->ops[k];
  }
  cr_assert_fail("no transfer op in the plan");
  return NULL;
}

/* Runs |c| through the runtime and checks it; |text| describes it. */
static void run_case(world_t* w, const reshard_case_t* c) {
  char text[400], why[300];
  reshard_case_describe(c, text, sizeof(text));
  uint32_t ns = pw_mesh_shape_device_count(&c->src_mesh);
  uint32_t nd = pw_mesh_shape_device_count(&c->dst_mesh);
  pw_vslice_t src_vs, dst_vs;
  OK(world_vslice(w, &c->src_mesh, ns, 'a', &src_vs));
  bool own_dst = !(c->placement == RESHARD_SAME_SLICE &&
                   pw_mesh_shape_equal(&c->src_mesh, &c->dst_mesh));
  if (own_dst) {
    OK(world_vslice(w, &c->dst_mesh, nd, c->placement == RESHARD_OTHER_SLICE ? 'b' : 'a',
                    &dst_vs));
  } else {
    dst_vs = src_vs;
  }
  pw_buffer_t arg, out;
  make_source(w, c, src_vs, &arg);
  pw_graph_t g;
  OK(pw_graph_create(w->client, &g));
  uint32_t x, y;
  OK(pw_graph_add_parameter(w->client, g, src_vs, &c->src, &x));
  OK(pw_graph_add_transfer(w->client, g, "reshard", pw_value(x, 0), dst_vs, c->dst.sharding, &y));
  OK(pw_graph_add_output(w->client, g, pw_value(y, 0)));
  pw_event_t* done = NULL;
  pw_status_t st = pw_graph_submit(w->client, g, &arg, 1, NULL, &out, 1, &done);
  if (st != NULL) cr_assert_fail("%s: submit: %s", text, pw_status_message(st));
  OK(pw_fixture_wait(done));
  /* The plan: bytes moved the minimum, executed on host copies. */
  const pw_plan_op_t* op = transfer_op(w, g);
  bool planned = reshard_plan_check(c, op->copies, op->copy_count, op->copy_start, op->reduce,
                                    why, sizeof(why));
  cr_assert(planned, "%s: plan: %s", text, why);
  for (uint32_t r = 0; r < op->copy_count; ++r) {
    uint64_t rows = 1;
    for (uint32_t k = 0; k < op->copies[r].stride_count; ++k) rows *= op->copies[r].strides[k].count;
    planned_rows += rows;
  }
  planned_records += op->copy_count;
  /* Each destination device's raw shard. */
  size_t total = 0, shard = 0;
  OK(pw_array_spec_byte_sizes(&c->dst, &c->dst_mesh, &total, &shard));
  unsigned char* got = malloc(total + 2 * shard + 1);
  cr_assert_not_null(got);
  unsigned char* want = got + total + shard;
  pw_buffer_obj_t* b = buffer_object(w, out);
  cr_assert(pw_sharding_equal(&b->spec.sharding, &c->dst.sharding), "%s: output sharding", text);
  for (uint32_t j = 0; j < nd; ++j) {
    OK(pw__backend_copy_to_host(b->slice->backend, b->slice->group_devices[j], b->shards[j], 0,
                                got + total, shard));
    reshard_expected_shard(c, j, want);
    cr_assert(memcmp(got + total, want, shard) == 0, "%s: destination device %u's shard differs",
              text, j);
  }
  /* The gathered array (a destination of partial sums has none). */
  if (pw_sharding_partial_count(&c->dst.sharding, &c->dst_mesh) <= 1) {
    OK(pw_buffer_to_host(w->client, out, got, total, PW_INFINITE_FUTURE));
    reshard_case_t whole = *c;
    whole.src.sharding = pw_sharding_replicated();
    unsigned char* expect = malloc(total + 1);
    reshard_source_shard(&whole, 0, expect);
    cr_assert(memcmp(got, expect, total) == 0, "%s: gathered array differs", text);
    free(expect);
  } else {
    FAILS(pw_buffer_to_host(w->client, out, got, total, PW_INFINITE_FUTURE),
          PW_STATUS_FAILED_PRECONDITION, "partial sums");
  }
  free(got);
  OK(pw_buffer_release(w->client, arg));
  OK(pw_buffer_release(w->client, out));
  OK(pw_graph_release(w->client, g));
  if (own_dst) OK(pw_vslice_release(w->client, dst_vs));
  OK(pw_vslice_release(w->client, src_vs));
}

Test(reshard_random, reduced_pairs_through_the_runtime) {
  world_t w;
  world_init(&w);
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    reshard_case_t c;
    reshard_case_make(seed, false, &c);
    run_case(&w, &c);
  }
  world_deinit(&w);
}

Test(reshard_random, unreduced_sources_through_the_runtime) {
  world_t w;
  world_init(&w);
  uint32_t reduced = 0, kept = 0;
  for (uint64_t seed = 1001; seed <= 1400; ++seed) {
    reshard_case_t c;
    reshard_case_make(seed, true, &c);
    uint32_t ps = pw_sharding_partial_count(&c.src.sharding, &c.src_mesh);
    uint32_t pd = pw_sharding_partial_count(&c.dst.sharding, &c.dst_mesh);
    reduced += ps > pd;
    kept += pd > 1;
    run_case(&w, &c);
  }
  /* The seeds cover both: sums taken, and partial sums kept. */
  cr_log_info("%u of 400 add up partial sums, %u keep some", reduced, kept);
  cr_assert_gt(reduced, 100);
  cr_assert_gt(kept, 10);
  world_deinit(&w);
}

Test(reshard_random, plans_alone_over_many_more_pairs) {
  char text[400], why[300];
  for (uint64_t seed = 1; seed <= 10000; ++seed) {
    reshard_case_t c;
    reshard_case_make(100000 + seed, seed % 2 == 0, &c);
    if (!reshard_plan_run(&c, why, sizeof(why))) {
      reshard_case_describe(&c, text, sizeof(text));
      cr_assert_fail("%s: %s", text, why);
    }
  }
}

/* The case of a 2x4 mesh "data" x "model" holding f32[8,4] partial sums
 * over "data" (split over "model" along dimension 1), moved to |dst|. */
static reshard_case_t data_model_case(pw_sharding_t dst, uint32_t placement) {
  reshard_case_t c;
  memset(&c, 0, sizeof(c));
  c.seed = 0;
  c.placement = placement;
  c.src_mesh = (pw_mesh_shape_t)PW_MESH_SHAPE_INIT(2, 2, 4);
  const char* names[2] = {"data", "model"};
  OK(pw_mesh_shape_set_axis_names(&c.src_mesh, 2, names));
  c.dst_mesh = c.src_mesh;
  c.src.dtype = c.dst.dtype = PW_DTYPE_F32;
  int64_t dims[2] = {8, 4};
  c.src.shape = c.dst.shape = pw_shape_make(2, dims);
  OK(pw_sharding_parse("P(None, model) unreduced(data)", 30, 2, &c.src_mesh, &c.src.sharding));
  c.dst.sharding = dst;
  return c;
}

Test(reshard_random, unreduced_data_over_2x4_to_replicated_and_split_sums) {
  world_t w;
  world_init(&w);
  /* Replicated on the same vslice, split over "model" (axis 1) and over
   * every device on another slice: each element is the sum of the two
   * partial sums (run_case compares every device's shard with the sums
   * and the gathered array with e + 1). */
  reshard_case_t rep = data_model_case(pw_sharding_replicated(), RESHARD_SAME_SLICE);
  run_case(&w, &rep);
  reshard_case_t split = data_model_case(pw_sharding_split(0, 1), RESHARD_OTHER_SLICE);
  run_case(&w, &split);
  reshard_case_t all = data_model_case(pw_sharding_split(0, PW_MESH_AXIS_ALL), RESHARD_SAME_SLICE);
  run_case(&w, &all);
  /* The values are really sums: partial 1 alone is not the array. */
  cr_assert_neq(reshard_value(5, 0, 2), 6);
  cr_assert_eq(reshard_value(5, 0, 2) + reshard_value(5, 1, 2), 6);
  world_deinit(&w);
}

/* Finalizes a graph moving |src| on a vslice of |mesh| on slice s8a to
 * |dst| on one of the same mesh on s8b; returns the status. */
static pw_status_t finalize_transfer(world_t* w, const pw_mesh_shape_t* mesh,
                                     const pw_array_spec_t* src, pw_sharding_t dst) {
  pw_vslice_t a, b;
  OK(world_vslice(w, mesh, 8, 'a', &a));
  OK(world_vslice(w, mesh, 8, 'b', &b));
  pw_graph_t g;
  OK(pw_graph_create(w->client, &g));
  uint32_t x, y;
  OK(pw_graph_add_parameter(w->client, g, a, src, &x));
  OK(pw_graph_add_transfer(w->client, g, "move", pw_value(x, 0), b, dst, &y));
  OK(pw_graph_add_output(w->client, g, pw_value(y, 0)));
  pw_status_t status = pw_graph_finalize(w->client, g);
  OK(pw_graph_release(w->client, g));
  OK(pw_vslice_release(w->client, b));
  OK(pw_vslice_release(w->client, a));
  return status;
}

Test(reshard_random, transfers_that_cannot_move_partial_sums_are_refused_naming_them) {
  world_t w;
  world_init(&w);
  reshard_case_t c = data_model_case(pw_sharding_replicated(), RESHARD_OTHER_SLICE);
  pw_sharding_t unreduced_model;
  OK(pw_sharding_parse("P() unreduced(model)", 20, 2, &c.src_mesh, &unreduced_model));
  /* A reduced source cannot become partial sums. */
  pw_array_spec_t reduced = c.src;
  reduced.sharding = pw_sharding_replicated();
  FAILS(finalize_transfer(&w, &c.src_mesh, &reduced, c.src.sharding), PW_STATUS_INVALID_ARGUMENT,
        "does not split a value into partial sums");
  /* Nor gain an unreduced axis it did not have ("model"). */
  FAILS(finalize_transfer(&w, &c.src_mesh, &c.src, unreduced_model), PW_STATUS_INVALID_ARGUMENT,
        "unreduced(model)");
  /* bool has no sum on the CPU backend: refused at validation. */
  pw_array_spec_t flags = c.src;
  flags.dtype = PW_DTYPE_BOOL;
  FAILS(finalize_transfer(&w, &c.src_mesh, &flags, pw_sharding_replicated()),
        PW_STATUS_UNIMPLEMENTED, "dtype bool has no sum");
  /* Keeping them (same mesh) and reducing them are fine. */
  OK(finalize_transfer(&w, &c.src_mesh, &c.src, c.src.sharding));
  OK(finalize_transfer(&w, &c.src_mesh, &c.src, pw_sharding_split(0, 0)));
  world_deinit(&w);
}

Test(reshard_random, a_backend_without_accumulate_is_refused_at_validation) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 2, "2x4", pw_allocator_system()));
  pw_vslice_t a, b;
  OK(pw_fixture_vslice(&f, "2x4", &a));
  OK(pw_fixture_vslice(&f, "2x4", &b));
  pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(2, 2, 4);
  int64_t dims[1] = {8};
  pw_array_spec_t spec = pw_fixture_spec_f32(1, dims, pw_sharding_tiled(0, NULL, 1u));
  OK(pw_array_spec_check(&spec, &mesh));
  pw_graph_t g;
  OK(pw_graph_create(f.client, &g));
  uint32_t x, y;
  OK(pw_graph_add_parameter(f.client, g, a, &spec, &x));
  OK(pw_graph_add_transfer(f.client, g, "sum", pw_value(x, 0), b, pw_sharding_replicated(), &y));
  OK(pw_graph_add_output(f.client, g, pw_value(y, 0)));
  FAILS(pw_graph_finalize(f.client, g), PW_STATUS_UNIMPLEMENTED,
        "its backend 'double' has no accumulate method");
  OK(pw_graph_release(f.client, g));
  pw_fixture_deinit(&f);
}

Test(reshard_random, the_plan_check_catches_wrong_plans) {
  char why[300];
  reshard_case_t c = data_model_case(pw_sharding_split(0, 1), RESHARD_OTHER_SLICE);
  pw_allocator_t a = pw_allocator_system();
  pw_plan_copy_t* copies = NULL;
  uint32_t n = 0, reduce = 0, nd = 8;
  uint32_t* start = NULL;
  OK(pw__reshard_plan(a, &c.src, &c.src_mesh, &c.dst, &c.dst_mesh, &copies, &n, &start, &reduce));
  cr_assert_eq(reduce, 2);
  cr_assert(reshard_plan_check(&c, copies, n, start, reduce, why, sizeof(why)), "%s", why);
  cr_assert_not(reshard_plan_check(&c, copies, n, start, 1, why, sizeof(why)));
  cr_assert(strstr(why, "reduce 1") != NULL, "%s", why);
  pw_plan_copy_t saved = copies[n - 1];
  copies[n - 1].src_offset += sizeof(float);           /* reads the wrong element */
  cr_assert_not(reshard_plan_check(&c, copies, n, start, reduce, why, sizeof(why)));
  copies[n - 1] = saved;
  copies[n - 1].dst_offset = copies[n - 2].dst_offset; /* writes a byte twice */
  copies[n - 1].dst_index = copies[n - 2].dst_index;
  cr_assert_not(reshard_plan_check(&c, copies, n, start, reduce, why, sizeof(why)));
  copies[n - 1] = saved;
  start[nd]--;                                         /* drops the last record */
  start[nd - 1] = start[nd - 1] > start[nd] ? start[nd] : start[nd - 1];
  cr_assert_not(reshard_plan_check(&c, copies, n, start, reduce, why, sizeof(why)));
  pw_allocator_free(a, copies, n * sizeof(pw_plan_copy_t));
  pw_allocator_free(a, start, (nd + 1) * sizeof(uint32_t));
}

Test(reshard_random, unreduced_sources_with_one_copy_per_row) {
  /* A transport without copy_strided: the rows into scratch slots are
   * issued one by one, at the slot's offsets. */
  world_t w;
  world_init_with(&w, true);
  planned_records = planned_rows = 0;
  for (uint64_t seed = 2001; seed <= 2100; ++seed) {
    reshard_case_t c;
    reshard_case_make(seed, true, &c);
    run_case(&w, &c);
  }
  /* One copy per row, and some records had several rows. */
  cr_assert_eq(atomic_load(&rows_copies), planned_rows);
  cr_assert_gt(planned_rows, planned_records);
  world_deinit(&w);
}
