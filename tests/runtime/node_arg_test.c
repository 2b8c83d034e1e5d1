/* Per-node kernel arguments (pw_graph_set_node_arg): one executable, many
 * nodes, each launch carrying its node's constant to the CPU backend's
 * kernel (pw_cpu_kernel_call_t.node_arg), on a plain and a queue-ordered
 * slice, through pw_graph_submit and an armed graph. Errors name the node;
 * the graph format and remote slices refuse rather than drop them. */
#include <criterion/criterion.h>
#include <string.h>

#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/queue_wrapper.h"
#include "support/test_allocators.h"

TestSuite(node_arg, .fini = pw_test_check_leaks);

/* Writes node_arg * 10 + mesh_index into its u64[1] shard. */
static pw_status_t node_arg_run(const pw_cpu_kernel_call_t* call) {
  if (call->struct_size < PW_CPU_KERNEL_CALL_SIZE_V2) {
    return pw_status_make(PW_STATUS_INTERNAL, "kernel call without node_arg");
  }
  uint64_t value = call->node_arg * 10 + call->mesh_index;
  memcpy(call->outputs[0].data, &value, sizeof(value));
  return NULL;
}

typedef struct env_t {
  pw_fixture_t f;
  pw_vslice_t vs;
  pw_executable_t exe;
  pw_graph_t g;
  uint32_t nodes[3];
} env_t;

static const uint64_t kArgs[3] = {7, 0, (1ull << 40) + 3};

/* A 2-device slice, "test.node_arg" registered and compiled, and a graph
 * of three of its nodes (args kArgs, the middle one left unset). */
static void env_init(env_t* e, pw_fixture_backend_t kind) {
  memset(e, 0, sizeof(*e));
  OK(pw_fixture_init(&e->f, kind, 1, "2", pw_allocator_system()));
  /* The fixture's backend is the CPU backend (behind the queue wrapper for
   * the queued kind: register on the one the runtime does not see then). */
  static const pw_cpu_param_spec_t out = {"y", PW_CPU_DTYPE_BIT(PW_DTYPE_U64), 1};
  pw_cpu_kernel_def_t def = {.struct_size = sizeof(def), .name = "test.node_arg",
                             .output_count = 1, .outputs = &out, .run = node_arg_run};
  pw_backend_t cpu = e->f.backend;
  if (e->f.qw != NULL) cpu = pw_queue_wrapper_inner(e->f.qw);
  OK(pw_cpu_backend_register_kernel(cpu, &def));
  OK(pw_fixture_vslice(&e->f, "2", &e->vs));
  OK(pw_fixture_compile(&e->f, e->vs, "kernel test.node_arg\noutput u64[2] split(0,all)\n",
                        &e->exe));
  OK(pw_graph_create(e->f.client, &e->g));
  for (int i = 0; i < 3; ++i) {
    OK(pw_graph_add_compute(e->f.client, e->g, "n", e->exe, e->vs, NULL, 0, &e->nodes[i]));
    if (kArgs[i] != 0) OK(pw_graph_set_node_arg(e->f.client, e->g, e->nodes[i], kArgs[i]));
    OK(pw_graph_add_output(e->f.client, e->g, pw_value(e->nodes[i], 0)));
  }
}

static void env_deinit(env_t* e) {
  OK(pw_graph_release(e->f.client, e->g));
  OK(pw_executable_release(e->f.client, e->exe));
  OK(pw_vslice_release(e->f.client, e->vs));
  pw_fixture_deinit(&e->f);
}

static void check_outputs(env_t* e, pw_buffer_t* out) {
  for (int i = 0; i < 3; ++i) {
    uint64_t back[2] = {0, 0};
    OK(pw_buffer_to_host(e->f.client, out[i], back, sizeof(back), PW_INFINITE_FUTURE));
    cr_assert_eq(back[0], kArgs[i] * 10, "node %d device 0: %llu", i,
                 (unsigned long long)back[0]);
    cr_assert_eq(back[1], kArgs[i] * 10 + 1, "node %d device 1: %llu", i,
                 (unsigned long long)back[1]);
    OK(pw_buffer_release(e->f.client, out[i]));
  }
}

static void run_kind(pw_fixture_backend_t kind) {
  env_t e;
  env_init(&e, kind);
  pw_buffer_t out[3];
  pw_event_t* done = NULL;
  OK(pw_graph_submit(e.f.client, e.g, NULL, 0, NULL, out, 3, &done));
  OK(pw_fixture_wait(done));
  check_outputs(&e, out);
  /* An armed graph's cached block keeps them, run after run. */
  pw_graph_exec_t* armed = NULL;
  OK(pw_graph_exec_create(e.f.client, e.g, &armed));
  for (int run = 0; run < 3; ++run) {
    OK(pw_graph_exec_submit(armed, NULL, 0, NULL, out, 3, &done));
    OK(pw_fixture_wait(done));
    check_outputs(&e, out);
  }
  OK(pw_graph_exec_destroy(armed));
  env_deinit(&e);
}

Test(node_arg, every_launch_carries_its_nodes_argument) { run_kind(PW_FIXTURE_CPU); }

Test(node_arg, queue_ordered_slices_carry_it_too) { run_kind(PW_FIXTURE_CPU_QUEUED); }

Test(node_arg, errors_name_the_node) {
  env_t e;
  env_init(&e, PW_FIXTURE_CPU);
  uint32_t param;
  pw_array_spec_t spec = {PW_DTYPE_F32, {1, {2}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
  OK(pw_graph_add_parameter(e.f.client, e.g, e.vs, &spec, &param));
  FAILS(pw_graph_set_node_arg(e.f.client, e.g, param, 1), PW_STATUS_INVALID_ARGUMENT,
        "is not a compute node");
  FAILS(pw_graph_set_node_arg(e.f.client, e.g, 99, 1), PW_STATUS_INVALID_ARGUMENT,
        "node 99 does not exist (the graph has 4 nodes)");
  FAILS(pw_graph_set_node_arg(NULL, e.g, 0, 1), PW_STATUS_INVALID_ARGUMENT, "client");
  /* Not in the graph format yet: refused, naming the node. */
  void* bytes = NULL;
  size_t size = 0;
  FAILS(pw_graph_encode(e.f.client, e.g, NULL, pw_allocator_system(), &bytes, &size),
        PW_STATUS_UNIMPLEMENTED, "graph node 0 (\"n\"): node arguments");
  cr_assert_null(bytes);
  /* Setting it back to 0 makes the graph encodable again. */
  OK(pw_graph_set_node_arg(e.f.client, e.g, e.nodes[0], 0));
  OK(pw_graph_set_node_arg(e.f.client, e.g, e.nodes[2], 0));
  OK(pw_graph_encode(e.f.client, e.g, NULL, pw_allocator_system(), &bytes, &size));
  pw_allocator_free(pw_allocator_system(), bytes, size);
  OK(pw_graph_finalize(e.f.client, e.g));
  FAILS(pw_graph_set_node_arg(e.f.client, e.g, e.nodes[0], 1), PW_STATUS_FAILED_PRECONDITION,
        "finalized");
  env_deinit(&e);
}

static void event_done(void* user, pw_status_t status) {
  pw_status_ignore(pw_event_fail(user, status));
}

/* A launch from an older runtime (struct_size v2) reads node_arg 0. */
Test(node_arg, a_v2_launch_has_none) {
  pw_cpu_backend_options_t o;
  pw_cpu_backend_options_init(&o);
  o.device_count = 1;
  pw_backend_t b;
  OK(pw_cpu_backend_create(&o, &b));
  static const pw_cpu_param_spec_t out = {"y", PW_CPU_DTYPE_BIT(PW_DTYPE_U64), 1};
  pw_cpu_kernel_def_t def = {.struct_size = sizeof(def), .name = "test.node_arg",
                             .output_count = 1, .outputs = &out, .run = node_arg_run};
  OK(pw_cpu_backend_register_kernel(b, &def));
  const char* text = "kernel test.node_arg\noutput u64[1] replicated\n";
  pw_mesh_shape_t one = pw_mesh_shape_make(1, (uint32_t[]){1});
  void* exe_bytes = NULL;
  size_t exe_size = 0;
  OK(b.vtable->compile(b.self, text, strlen(text), &one, "", pw_allocator_system(), &exe_bytes,
                       &exe_size));
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(sig)};
  OK(b.vtable->load(b.self, exe_bytes, exe_size, &exe, &sig));
  pw_allocator_free(pw_allocator_system(), exe_bytes, exe_size);
  pw_backend_memory_t mem;
  OK(b.vtable->allocate(b.self, 0, 8, &mem));
  uint32_t group[1] = {0};
  for (int v = 2; v <= 3; ++v) {
    pw_event_t* ev = NULL;
    OK(pw_event_create(pw_allocator_system(), &ev));
    pw_backend_launch_t l = {.struct_size = v == 2 ? PW_BACKEND_LAUNCH_SIZE_V2
                                                   : PW_BACKEND_LAUNCH_SIZE_V3,
                             .executable = exe, .device = 0, .group_devices = group,
                             .group_size = 1, .gang_id = 1, .outputs = &mem,
                             .output_count = 1, .done = event_done,
                             .done_user = ev, .node_arg = 5};
    OK(b.vtable->launch(b.self, &l));
    OK(pw_fixture_wait(ev));
    uint64_t back = 99;
    OK(b.vtable->copy_to_host(b.self, 0, mem, 0, &back, sizeof(back)));
    cr_assert_eq(back, v == 2 ? 0u : 50u, "v%d launch: %llu", v, (unsigned long long)back);
  }
  b.vtable->deallocate(b.self, 0, mem);
  b.vtable->unload(b.self, exe);
  b.vtable->destroy(b.self);
}
