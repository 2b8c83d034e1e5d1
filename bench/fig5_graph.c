/* The Fig. 5 computation's executables and graph pieces (fig5_graph.h). */
#include "fig5_graph.h"

#include <stdio.h>
#include <string.h>

#include "bench_try.h"

pw_array_spec_t pw_fig5_spec(uint32_t devices) {
  int64_t n = devices;
  return (pw_array_spec_t){PW_DTYPE_F32, pw_shape_make(1, &n), pw_sharding_split(0, 0)};
}

static int pw_fig5_compile(const char* suite, pw_client_t* c, pw_vslice_t vs, bool noop,
                           uint32_t devices, const char* name, const char* kind, uint64_t ns,
                           pw_executable_t* out) {
  char text[256];
  if (noop) {
    /* The double's program text: the no-op backend runs nothing. */
    snprintf(text, sizeof(text), "noop\ninput f32[%u] split(0,0)\noutput f32[%u] split(0,0)\n",
             devices, devices);
  } else {
    snprintf(text, sizeof(text),
             "op %s\nkind %s\ntime %lluns\ninput f32[%u] split(0,0)\noutput f32[%u] "
             "split(0,0)\n",
             name, kind, (unsigned long long)ns, devices, devices);
  }
  PW_BENCH_TRY(suite, pw_executable_compile(c, vs, text, strlen(text), NULL, out), name);
  return 0;
}

int pw_fig5_compile_all(const char* suite, pw_client_t* c, pw_vslice_t vs, bool noop,
                        uint32_t devices, uint64_t kernel_ns, uint32_t computations,
                        pw_fig5_exes_t* out) {
  memset(out, 0, sizeof(*out));
  if (pw_fig5_compile(suite, c, vs, noop, devices, "reduce", "all_reduce_sum", kernel_ns,
                      &out->reduce) != 0 ||
      pw_fig5_compile(suite, c, vs, noop, devices, "add", "compute", kernel_ns, &out->add) != 0 ||
      pw_fig5_compile(suite, c, vs, noop, devices, "fused", "all_reduce_sum",
                      2 * kernel_ns * computations, &out->fused) != 0) {
    return -1;
  }
  return 0;
}

int pw_fig5_release_all(const char* suite, pw_client_t* c, pw_fig5_exes_t* exes) {
  pw_executable_t* all[] = {&exes->reduce, &exes->add, &exes->fused};
  for (size_t k = 0; k < 3; ++k) {
    if (all[k]->id != 0) PW_BENCH_TRY(suite, pw_executable_release(c, *all[k]), "release");
    all[k]->id = 0;
  }
  return 0;
}

int pw_fig5_add_chain(const char* suite, pw_client_t* c, pw_graph_t g, pw_vslice_t vs,
                      const pw_fig5_exes_t* exes, uint32_t count, bool fused, uint32_t from,
                      uint32_t* out_node) {
  uint32_t node = from;
  if (fused) {
    pw_value_t v = pw_value(node, 0);
    PW_BENCH_TRY(suite, pw_graph_add_compute(c, g, "fused", exes->fused, vs, &v, 1, &node),
                 "fused");
    *out_node = node;
    return 0;
  }
  for (uint32_t i = 0; i < count; ++i) {
    pw_value_t v = pw_value(node, 0);
    PW_BENCH_TRY(suite, pw_graph_add_compute(c, g, "reduce", exes->reduce, vs, &v, 1, &node),
                 "reduce");
    v = pw_value(node, 0);
    PW_BENCH_TRY(suite, pw_graph_add_compute(c, g, "add", exes->add, vs, &v, 1, &node), "add");
  }
  *out_node = node;
  return 0;
}
