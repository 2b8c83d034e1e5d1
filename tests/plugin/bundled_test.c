/* The bundled plugins as loaded modules (libpathways_cpu.so, _sim, _inproc,
 * _dir): each made from an options string and used: a graph runs on the
 * cpu and on the sim backend with the inproc transport moving its result
 * between slices, the dir store keeps a value; every key each plugin
 * documents in args_help reaches its parser. */
#define _XOPEN_SOURCE 700
#include "plugin_test_util.h"

TestSuite(plugin_bundled, .fini = pw_test_check_leaks, .timeout = 120);

#define PW_PT_MODULE(name) PW_PLUGIN_BUILD_DIR "/libpathways_" name ".so"

static pw_plugin_t* pw_pt_load(const char* path) {
  pw_plugin_t* plugin = NULL;
  PW_PT_OK(pw_plugin_load(path, &plugin));
  return plugin;
}

static pw_backend_t pw_pt_backend(const char* name, const char* args) {
  pw_plugin_t* plugin = pw_pt_load(name);
  pw_backend_t backend;
  PW_PT_OK(pw_plugin_create_backend(plugin, args, &backend));
  pw_plugin_release(plugin);
  return backend;
}

/* Runs x -> |program| on slice 0 -> transfer to slice 1 -> output, on a
 * runtime of |backend| (two 1-device slices) with the inproc transport
 * from its module, and checks the output is |factor| * x. */
static void pw_pt_run_graph(pw_backend_t backend, const char* program, float factor) {
  pw_plugin_t* inproc = pw_pt_load(PW_PT_MODULE("inproc"));
  pw_transport_t transport;
  PW_PT_OK(pw_plugin_create_transport(inproc, "workers=1", &transport));
  pw_plugin_release(inproc);
  pw_slice_desc_t slices[2] = {{"s0", PW_MESH_SHAPE_INIT(1, 1), 0, 0, 0}, {"s1", PW_MESH_SHAPE_INIT(1, 1), 0, 1, 0}};
  pw_runtime_options_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.backends = &backend;
  ro.backend_count = 1;
  ro.slices = slices;
  ro.slice_count = 2;
  ro.transport = transport;
  pw_runtime_t* runtime = NULL;
  PW_PT_OK(pw_runtime_create(&ro, &runtime));
  pw_client_t* client = NULL;
  PW_PT_OK(pw_client_create(runtime, NULL, &client));
  pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(1, 1);
  pw_vslice_t vs[2];
  uint32_t bound[2];
  for (int i = 0; i < 2; ++i) {
    PW_PT_OK(pw_vslice_create(client, &mesh, PW_VSLICE_DEFAULT, &vs[i]));
    pw_mesh_shape_t bound_mesh;
    PW_PT_OK(pw_vslice_binding(client, vs[i], &bound[i], &bound_mesh));
  }
  cr_assert_neq(bound[0], bound[1], "the transfer crosses slices");
  pw_executable_t exe;
  PW_PT_OK(pw_executable_compile(client, vs[0], program, strlen(program), NULL, &exe));
  pw_array_spec_t spec = {PW_DTYPE_F32, {1, {4}}, PW_SHARDING_REPLICATED_INIT};
  pw_graph_t graph;
  PW_PT_OK(pw_graph_create(client, &graph));
  uint32_t x, y, z;
  PW_PT_OK(pw_graph_add_parameter(client, graph, vs[0], &spec, &x));
  pw_value_t in = pw_value(x, 0);
  PW_PT_OK(pw_graph_add_compute(client, graph, "op", exe, vs[0], &in, 1, &y));
  PW_PT_OK(pw_graph_add_transfer(client, graph, "move", pw_value(y, 0), vs[1], spec.sharding,
                                 &z));
  PW_PT_OK(pw_graph_add_output(client, graph, pw_value(z, 0)));
  const float data[4] = {1, 2, 3, 4};
  pw_buffer_t arg, out;
  PW_PT_OK(pw_buffer_from_host(client, vs[0], &spec, data, sizeof(data), &arg));
  pw_event_t* done = NULL;
  PW_PT_OK(pw_graph_submit(client, graph, &arg, 1, NULL, &out, 1, &done));
  PW_PT_OK(pw_event_wait(done, pw_deadline_from_timeout(30000000000LL)));
  pw_event_release(done);
  float got[4] = {0};
  PW_PT_OK(pw_buffer_to_host(client, out, got, sizeof(got), PW_INFINITE_FUTURE));
  for (int i = 0; i < 4; ++i) cr_assert_float_eq(got[i], factor * data[i], 1e-6, "element %d", i);
  PW_PT_OK(pw_buffer_release(client, arg));
  PW_PT_OK(pw_buffer_release(client, out));
  PW_PT_OK(pw_graph_release(client, graph));
  PW_PT_OK(pw_executable_release(client, exe));
  PW_PT_OK(pw_client_destroy(client));
  PW_PT_OK(pw_runtime_destroy(runtime));
}

Test(plugin_bundled, cpu_runs_a_graph) {
  pw_backend_t backend =
      pw_pt_backend(PW_PT_MODULE("cpu"), "devices=2,workers=1,memory_mib=16,stream_depth=4");
  cr_assert(pw_cpu_backend_is_cpu(backend));
  cr_assert_eq(backend.vtable->device_count(backend.self), 2);
  pw_pt_run_graph(backend,
                  "kernel scale\ninput f32[4] replicated\noutput f32[4] replicated\n"
                  "attr alpha 2\n",
                  2.0f);
}

Test(plugin_bundled, sim_runs_a_graph) {
  pw_backend_t backend =
      pw_pt_backend(PW_PT_MODULE("sim"), "slices=2,devices_per_slice=1,memory_mib=16");
  cr_assert(pw_sim_backend_is_sim(backend));
  cr_assert_eq(backend.vtable->device_count(backend.self), 2);
  pw_pt_run_graph(backend,
                  "op same\nkind copy\ntime 5us\ninput f32[4] replicated\n"
                  "output f32[4] replicated\n",
                  1.0f);
}

Test(plugin_bundled, sim_options_reach_the_backend) {
  pw_backend_t backend = pw_pt_backend(
      PW_PT_MODULE("sim"),
      "slices=3,devices_per_slice=4,devices_per_host=2,mode=manual,memory=virtual,"
      "queue_depth=8,blocking_collectives=true,seed=7,ici_latency_ns=1,dcn_latency_ns=2");
  cr_assert_eq(backend.vtable->device_count(backend.self), 12);
  pw_sim_device_state_t st = {.struct_size = sizeof(st)};
  PW_PT_OK(pw_sim_backend_device_state(backend, 11, &st));
  cr_assert_eq(st.slice, 2);
  /* MANUAL mode: stepping is allowed (THREADED/INLINE would differ). */
  uint64_t delivered = 1;
  PW_PT_OK(pw_sim_backend_step(backend, &delivered));
  cr_assert_eq(delivered, 0);
  backend.vtable->destroy(backend.self);
}

Test(plugin_bundled, dir_store_puts_and_gets) {
  char tmp[64], args[160];
  pw_pt_tmpdir(tmp);
  snprintf(args, sizeof(args), "path=%s/store,max_bytes=1000,stale_temp_seconds=10", tmp);
  pw_plugin_t* plugin = pw_pt_load(PW_PT_MODULE("dir"));
  pw_store_t store;
  PW_PT_OK(pw_plugin_create_store(plugin, args, &store));
  cr_assert_str_eq(store.vtable->name, "dir");
  PW_PT_OK(store.vtable->put(store.self, "key1", "hello", 5));
  void* bytes = NULL;
  size_t size = 0;
  PW_PT_OK(store.vtable->get(store.self, "key1", pw_allocator_system(), &bytes, &size));
  cr_assert_eq(size, 5);
  cr_assert(memcmp(bytes, "hello", 5) == 0);
  pw_allocator_free(pw_allocator_system(), bytes, size);
  /* max_bytes reached the store: a value over it is refused. */
  static char big[2000];
  PW_PT_EXPECT(store.vtable->put(store.self, "key2", big, sizeof(big)),
               PW_STATUS_RESOURCE_EXHAUSTED, "key2");
  store.vtable->destroy(store.self);
  /* No path: refused, naming the key. */
  PW_PT_EXPECT(pw_plugin_create_store(plugin, "max_bytes=5", &store), PW_STATUS_INVALID_ARGUMENT,
               "plugin 'dir'", "path=DIR", "required");
  pw_plugin_release(plugin);
  pw_pt_rmtree(tmp);
}

Test(plugin_bundled, inproc_is_made_from_its_options) {
  pw_plugin_t* plugin = pw_pt_load(PW_PT_MODULE("inproc"));
  pw_transport_t t;
  PW_PT_OK(pw_plugin_create_transport(plugin, "workers=2,staging_bytes=4096", &t));
  cr_assert(pw_inproc_transport_is_inproc(t));
  cr_assert_str_eq(t.vtable->name, "inproc");
  t.vtable->destroy(t.self);
  PW_PT_EXPECT(pw_plugin_create_transport(plugin, "workers=65", &t), PW_STATUS_INVALID_ARGUMENT,
               "plugin 'inproc'", "workers=65 is above its maximum 64");
  cr_assert_null(t.vtable);
  pw_plugin_release(plugin);
}

Test(plugin_bundled, unknown_and_repeated_keys_are_refused) {
  pw_plugin_t* plugin = pw_pt_load(PW_PT_MODULE("cpu"));
  pw_backend_t b;
  PW_PT_EXPECT(pw_plugin_create_backend(plugin, "device=2", &b), PW_STATUS_INVALID_ARGUMENT,
               "plugin 'cpu' (", "libpathways_cpu.so): options 'device=2': unknown key 'device'",
               "known keys: devices, workers, memory_mib, host, stream_depth");
  PW_PT_EXPECT(pw_plugin_create_backend(plugin, "devices=2,devices=3", &b),
               PW_STATUS_INVALID_ARGUMENT, "key 'devices' is given twice");
  PW_PT_EXPECT(pw_plugin_create_backend(plugin, "devices=0", &b), PW_STATUS_INVALID_ARGUMENT,
               "devices=0 is below its minimum 1");
  PW_PT_EXPECT(pw_plugin_create_backend(plugin, "devices=4097", &b), PW_STATUS_INVALID_ARGUMENT,
               "devices=4097 is above its maximum 4096");
  pw_plugin_release(plugin);
}

/* Every key in |keys| is named in args_help, and "KEY=x" reaches the
 * plugin's parser (refused for its value, not as an unknown key). */
static void pw_pt_keys_documented(const char* name, const char* const* keys) {
  char path[256];
  snprintf(path, sizeof(path), "%s/libpathways_%s.so", PW_PLUGIN_BUILD_DIR, name);
  pw_plugin_t* plugin = pw_pt_load(path);
  const pw_plugin_factory_t* f = pw_plugin_factory(plugin);
  for (size_t i = 0; keys[i] != NULL; ++i) {
    char key_eq[64];
    snprintf(key_eq, sizeof(key_eq), "%s=", keys[i]);
    cr_assert(strstr(f->args_help, key_eq) != NULL, "%s: args_help lacks %s", name, key_eq);
    char args[80];
    snprintf(args, sizeof(args), "%sx", key_eq);
    pw_backend_t b;
    pw_transport_t t;
    pw_status_t s = f->kind == PW_PLUGIN_KIND_BACKEND
                        ? pw_plugin_create_backend(plugin, args, &b)
                        : pw_plugin_create_transport(plugin, args, &t);
    cr_assert_not_null(s, "%s: '%s' accepted", name, args);
    cr_assert_null(strstr(pw_status_message(s), "unknown key"), "%s", pw_status_message(s));
    cr_assert(strstr(pw_status_message(s), keys[i]) != NULL, "%s", pw_status_message(s));
    pw_status_free(s);
  }
  pw_plugin_release(plugin);
}

Test(plugin_bundled, every_key_is_documented_and_parsed) {
  static const char* const cpu[] = {"devices", "workers", "memory_mib", "host", "stream_depth",
                                    NULL};
  static const char* const sim[] = {
      "slices", "devices_per_slice", "devices_per_host", "memory_mib", "mode", "memory",
      "queue_depth", "blocking_collectives", "dispatch_latency_ns", "launch_overhead_ns",
      "ici_latency_ns", "dcn_latency_ns", "seed", "random_chip_failures",
      "random_slice_failures", "failure_window_ns", NULL};
  static const char* const inproc[] = {"workers", "staging_bytes", NULL};
  pw_pt_keys_documented("cpu", cpu);
  pw_pt_keys_documented("sim", sim);
  pw_pt_keys_documented("inproc", inproc);
  /* dir: path takes any text; the other two are numbers. */
  pw_plugin_t* plugin = pw_pt_load(PW_PT_MODULE("dir"));
  const char* help = pw_plugin_factory(plugin)->args_help;
  cr_assert(strstr(help, "path=") && strstr(help, "max_bytes=") &&
            strstr(help, "stale_temp_seconds="));
  pw_store_t store;
  PW_PT_EXPECT(pw_plugin_create_store(plugin, "path=/nonexistent-x,max_bytes=x", &store),
               PW_STATUS_INVALID_ARGUMENT, "max_bytes='x'");
  PW_PT_EXPECT(pw_plugin_create_store(plugin, "path=/nonexistent-x,stale_temp_seconds=x", &store),
               PW_STATUS_INVALID_ARGUMENT, "stale_temp_seconds='x'");
  pw_plugin_release(plugin);
}
