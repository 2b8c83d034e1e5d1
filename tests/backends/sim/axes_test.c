/* The sim backend with named mesh axes: PartitionSpec shardings and
 * collectives over a subset of the axes (`over`), priced as rings over one
 * group (no timing: the virtual times are the cost model's arithmetic). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "sim_test_support.h"
#include "support/test_allocators.h"

TestSuite(sim_axes, .fini = pw_test_check_leaks);

#define DEVICES 8u

/* One slice of 8 chips; ICI 1e9 B/s and 1000 ns per collective. */
static pw_backend_t axes_backend(pw_sim_trace_t* trace) {
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.slice_count = 1;
  o.devices_per_slice = DEVICES;
  o.ici_bytes_per_s = 1e9;
  o.ici_latency_ns = 1000;
  o.trace = pw_sim_trace_fn;
  o.trace_user = trace;
  pw_backend_t b;
  PW_SIM_OK(pw_sim_backend_create(&o, &b));
  return b;
}

static pw_status_t axes_load(pw_backend_t b, const char* text, pw_backend_executable_t* out_e,
                             pw_executable_signature_t* out_sig) {
  pw_mesh_shape_t mesh;
  PW_SIM_OK(pw_mesh_shape_parse("data=2,model=4", &mesh));
  void* bytes = NULL;
  size_t size = 0;
  PW_RETURN_IF_ERROR(b.vtable->compile(b.self, text, strlen(text), &mesh, NULL,
                                       pw_allocator_system(), &bytes, &size));
  out_sig->struct_size = sizeof(*out_sig);
  pw_status_t status = b.vtable->load(b.self, bytes, size, out_e, out_sig);
  pw_allocator_free(pw_allocator_system(), bytes, size);
  return status;
}

/* Runs the one-input one-output collective |text| on all 8 chips (inputs
 * |x[d]|, |n| floats per device, may be NULL) and returns the virtual time
 * its parts complete (all at once). Outputs land in |y[d]| when given. */
static pw_sim_time_t run_gang(const char* text, float* const* x, float* const* y, size_t n) {
  pw_sim_trace_t trace;
  pw_sim_trace_init(&trace);
  pw_backend_t b = axes_backend(&trace);
  pw_backend_executable_t e = NULL;
  pw_executable_signature_t sig;
  pw_status_t s = axes_load(b, text, &e, &sig);
  cr_assert_null(s, "%s", pw_status_message(s));
  size_t in_bytes = 0, out_bytes = 0;
  PW_SIM_OK(pw_array_spec_byte_sizes(&sig.inputs[0], &sig.mesh, NULL, &in_bytes));
  PW_SIM_OK(pw_array_spec_byte_sizes(&sig.outputs[0], &sig.mesh, NULL, &out_bytes));
  uint32_t group[DEVICES];
  pw_backend_memory_t in[DEVICES], out[DEVICES];
  pw_sim_launch_t* parts = calloc(DEVICES, sizeof(*parts));
  for (uint32_t d = 0; d < DEVICES; ++d) group[d] = d;
  for (uint32_t d = 0; d < DEVICES; ++d) {
    PW_SIM_OK(b.vtable->allocate(b.self, d, in_bytes, &in[d]));
    PW_SIM_OK(b.vtable->allocate(b.self, d, out_bytes, &out[d]));
    if (x != NULL) PW_SIM_OK(b.vtable->copy_to_device(b.self, d, in[d], 0, x[d], n * 4));
    pw_sim_test_describe(&parts[d], e, d, d, group, DEVICES, 9, &in[d], 1, &out[d], 1);
  }
  for (uint32_t d = 0; d < DEVICES; ++d) PW_SIM_OK(b.vtable->launch(b.self, &parts[d].launch));
  pw_sim_time_t time = 0;
  for (uint32_t d = 0; d < DEVICES; ++d) {
    cr_assert_eq(atomic_load(&parts[d].done.calls), 1);
    cr_assert_eq(atomic_load(&parts[d].done.code), PW_STATUS_OK);
    const pw_sim_event_t* ev = pw_sim_trace_find(&trace, d, 0);
    cr_assert_not_null(ev);
    if (d == 0) time = ev->time;
    cr_assert_eq(ev->time, time, "every part completes at the rendezvous + cost");
    if (y != NULL) PW_SIM_OK(b.vtable->copy_to_host(b.self, d, out[d], 0, y[d], n * 4));
    b.vtable->deallocate(b.self, d, in[d]);
    b.vtable->deallocate(b.self, d, out[d]);
  }
  free(parts);
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
  return time;
}

Test(sim_axes, ring_cost_over_the_named_axes_group) {
  /* 4 x 1024 f32 = 16384 bytes per device, not split. */
  const pw_sim_time_t over_model = run_gang(
      "op ar\nkind all_reduce_sum\ninput f32[4,1024] P() unreduced(model)\n"
      "output f32[4,1024] P()\nover model\n",
      NULL, NULL, 0);
  const pw_sim_time_t over_data = run_gang(
      "op ar\nkind all_reduce_sum\ninput f32[4,1024] P() unreduced(data)\n"
      "output f32[4,1024] P()\nover data\n",
      NULL, NULL, 0);
  const pw_sim_time_t over_both = run_gang(
      "op ar\nkind all_reduce_sum\ninput f32[4,1024] P() unreduced(data, model)\n"
      "output f32[4,1024] P()\nover data, model\n",
      NULL, NULL, 0);
  /* ring(k) = 1000 + 2 (k - 1) / k * 16384. */
  cr_assert_eq(over_data, 1000u + 16384u);
  cr_assert_eq(over_model, 1000u + 24576u);
  cr_assert_eq(over_both, 1000u + 28672u);
  cr_assert(over_data < over_model && over_model < over_both, "bigger groups cost more");
  /* The original form (no over) rings over the whole mesh, like over both. */
  cr_assert_eq(run_gang("op ar\nkind all_reduce_sum\ninput f32[4,1024] replicated\n"
                        "output f32[4,1024] replicated\n",
                        NULL, NULL, 0),
               over_both);
  /* One pass: reduce_scatter (input shard) + all_gather (output shard)
   * move the all-reduce's bytes. */
  const pw_sim_time_t scatter = run_gang(
      "op rs\nkind reduce_scatter\ninput f32[4,1024] P() unreduced(model)\n"
      "output f32[4,1024] P(model)\nover model\n",
      NULL, NULL, 0);
  const pw_sim_time_t gather = run_gang(
      "op ag\nkind all_gather\ninput f32[4,1024] P(model)\noutput f32[4,1024] P()\n"
      "over model\n",
      NULL, NULL, 0);
  const pw_sim_time_t to_all = run_gang(
      "op a2a\nkind all_to_all\ninput f32[4,1024] P(model)\noutput f32[4,1024] P(None, model)\n"
      "over model\n",
      NULL, NULL, 0);
  cr_assert_eq(scatter, 1000u + 12288u);
  cr_assert_eq(gather, 1000u + 12288u);
  cr_assert_eq((scatter - 1000) + (gather - 1000), over_model - 1000);
  /* all_to_all moves its 4096-byte shard once around. */
  cr_assert_eq(to_all, 1000u + 3072u);
}

Test(sim_axes, all_reduce_over_data_sums_within_each_group) {
  float xs[DEVICES][2], ys[DEVICES][2];
  float* x[DEVICES];
  float* y[DEVICES];
  for (uint32_t d = 0; d < DEVICES; ++d) {
    xs[d][0] = (float)(d + 1);
    xs[d][1] = 0.5f * (float)d;
    x[d] = xs[d];
    y[d] = ys[d];
  }
  run_gang("op ar\nkind all_reduce_sum\ninput f32[2] P() unreduced(data)\n"
           "output f32[2] P()\nover data\n",
           x, y, 2);
  for (uint32_t d = 0; d < DEVICES; ++d) {
    uint32_t top = d % 4, bottom = d % 4 + 4; /* the two data coordinates */
    cr_assert_eq(ys[d][0], xs[top][0] + xs[bottom][0], "device %u", d);
    cr_assert_eq(ys[d][1], xs[top][1] + xs[bottom][1], "device %u", d);
  }
}

static void expect_refused(const char* text, const char* fragment) {
  pw_sim_trace_t trace;
  pw_sim_trace_init(&trace);
  pw_backend_t b = axes_backend(&trace);
  pw_backend_executable_t e = NULL;
  pw_executable_signature_t sig;
  pw_status_t s = axes_load(b, text, &e, &sig);
  cr_assert_not_null(s, "accepted:\n%s", text);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT, "%s", pw_status_message(s));
  cr_assert(strstr(pw_status_message(s), fragment) != NULL, "'%s' lacks '%s'",
            pw_status_message(s), fragment);
  pw_status_free(s);
  b.vtable->destroy(b.self);
}

Test(sim_axes, bad_axes_are_named) {
  expect_refused("op a\nkind collective\ninput f32[4] P()\noutput f32[4] P()\nover batch\n",
                 "batch");
  expect_refused("op a\ninput f32[4] P(batch)\noutput f32[4] P()\n", "batch");
  expect_refused("op a\nkind collective\ninput f32[4] P()\noutput f32[4] P()\n"
                 "over model, model\n",
                 "twice");
  expect_refused("op a\ninput f32[4] P()\noutput f32[4] P()\nover data\n", "not one");
  expect_refused("op a\ninput f32[3] P(model)\noutput f32[4] P()\n", "divisible");
}

static void put(unsigned char* b, size_t* n, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) b[(*n)++] = (unsigned char)(v >> (8 * i));
}

static uint64_t fnv1a64(const unsigned char* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

Test(sim_axes, version_2_bytes_carry_tiles_and_version_1_still_loads) {
  pw_sim_trace_t trace;
  pw_sim_trace_init(&trace);
  pw_backend_t b = axes_backend(&trace);
  pw_backend_executable_t e = NULL;
  pw_executable_signature_t sig;
  pw_status_t s = axes_load(b,
                            "op g\nkind all_gather\ninput f32[8] P((data, model))\n"
                            "output f32[8] P(data)\nover model\n",
                            &e, &sig);
  cr_assert_null(s, "%s", pw_status_message(s));
  pw_sharding_t want = pw_sharding_tiled(2, (pw_sharding_tile_t[]){{0, 0}, {0, 1}}, 0);
  cr_assert(pw_sharding_equal(&sig.inputs[0].sharding, &want));
  b.vtable->unload(b.self, e);

  /* Version 1: op "c", kind copy, f32[8] split(0,1) in and out, 2x4 mesh. */
  unsigned char v1[512];
  size_t n = 24;
  put(v1, &n, 2, 4);
  put(v1, &n, 2, 4);
  put(v1, &n, 4, 4);
  put(v1, &n, 0, 4);
  put(v1, &n, 0, 4);
  put(v1, &n, 1, 4);
  v1[n++] = 'c';
  put(v1, &n, 1, 4); /* kind copy */
  put(v1, &n, 0, 8);
  put(v1, &n, 0, 8);
  put(v1, &n, 0, 8);
  put(v1, &n, 0, 8);
  put(v1, &n, 0, 4);
  put(v1, &n, 1, 4);
  put(v1, &n, 1, 4);
  for (int p = 0; p < 2; ++p) {
    put(v1, &n, PW_DTYPE_F32, 4);
    put(v1, &n, 1, 4);
    put(v1, &n, 8, 8);
    for (int i = 1; i < PW_MAX_RANK; ++i) put(v1, &n, 0, 8);
    put(v1, &n, PW_SHARDING_SPLIT, 4);
    put(v1, &n, 0, 4);
    put(v1, &n, 1, 4);
  }
  size_t end = n;
  memcpy(v1, "PWSIMEXE", 8);
  n = 8;
  put(v1, &n, 1, 4);
  put(v1, &n, end - 24, 4);
  put(v1, &n, fnv1a64(v1 + 24, end - 24), 8);
  sig.struct_size = sizeof(sig);
  s = b.vtable->load(b.self, v1, end, &e, &sig);
  cr_assert_null(s, "%s", pw_status_message(s));
  cr_assert_eq(sig.inputs[0].sharding.kind, PW_SHARDING_SPLIT);
  cr_assert_eq(sig.inputs[0].sharding.mesh_axis, 1u);
  b.vtable->unload(b.self, e);
  b.vtable->destroy(b.self);
}
