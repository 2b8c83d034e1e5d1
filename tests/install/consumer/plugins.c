/* Includes only <pathways/pathways.h> and uses every bundled plugin's
 * options: the one include reaches all of them. It also decodes a graph
 * file, so the static consumer needs the library's own dependencies
 * (libcbor and the rest) from pathways::pathways_static's interface. */
#include <pathways/pathways.h>

int consumer_plugins(void) {
  pw_cpu_backend_options_t cpu;
  pw_cpu_backend_options_init(&cpu);
  pw_sim_backend_options_t sim;
  pw_sim_backend_options_init(&sim);
  pw_inproc_transport_options_t inproc;
  pw_inproc_transport_options_init(&inproc);
  pw_dir_store_options_t dir;
  pw_dir_store_options_init(&dir);
  if (cpu.struct_size < PW_CPU_BACKEND_OPTIONS_SIZE_V1 || sim.struct_size == 0 ||
      inproc.struct_size == 0 || dir.struct_size < PW_DIR_STORE_OPTIONS_SIZE_V1) {
    return 1;
  }
  /* One real backend through the link (its worker pool: threads). */
  cpu.device_count = 2;
  cpu.worker_count = 1;
  pw_backend_t backend;
  pw_status_t s = pw_cpu_backend_create(&cpu, &backend);
  if (s != NULL) {
    pw_status_free(s);
    return 1;
  }
  backend.vtable->destroy(backend.self);
  /* Not a graph file: refused, through the decoder. */
  static const unsigned char kNotAGraph[] = {0x01};
  s = pw_graph_format_check(kNotAGraph, sizeof(kNotAGraph), pw_allocator_system(), NULL);
  int refused = s != NULL && pw_status_code(s) == PW_STATUS_INVALID_ARGUMENT;
  pw_status_free(s);
  return refused ? 0 : 1;
}
