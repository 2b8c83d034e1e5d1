/* The sim backend's all_reduce_sum data effect on every dtype it sums
 * (f32, f64, f16, bf16 and the integers: wrapping; f16/bf16 summed in f32
 * in mesh order and rounded once), through a runtime over a 4-device sim
 * slice, and its refusal of bool, the f8 types and c64 naming the dtype. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "sim_test_support.h"
#include "support/test_allocators.h"

TestSuite(sim_dtype, .fini = pw_test_check_leaks);

static void fleet(pw_sim_fleet_t* f) {
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.slice_count = 1;
  o.devices_per_slice = 4;
  PW_SIM_OK(pw_sim_fleet_init(f, &o, pw_allocator_system()));
}

static pw_status_t compile(pw_sim_fleet_t* f, pw_dtype_t dtype, pw_executable_t* out) {
  char text[256];
  int n = snprintf(text, sizeof(text),
                   "op ar\nkind all_reduce_sum\ntime 1us\ninput %s[4,3] split(0,all)\n"
                   "output %s[3] replicated\n",
                   pw_dtype_name(dtype), pw_dtype_name(dtype));
  return pw_executable_compile(f->client, f->vslices[0], text, (size_t)n, NULL, out);
}

/* The reference sum of column |c| of a [4,3] array, as |width| bytes. */
static void reference(pw_dtype_t dtype, const unsigned char* x, size_t c, unsigned char* out) {
  size_t w = pw_dtype_size(dtype);
  if (dtype == PW_DTYPE_F16 || dtype == PW_DTYPE_BF16) {
    float sum = 0.0f;
    for (size_t g = 0; g < 4; ++g) {
      uint16_t bits;
      memcpy(&bits, x + (g * 3 + c) * 2, 2);
      sum += dtype == PW_DTYPE_F16 ? pw_f16_to_f32(bits) : pw_bf16_to_f32(bits);
    }
    uint16_t r = dtype == PW_DTYPE_F16 ? pw_f32_to_f16(sum) : pw_f32_to_bf16(sum);
    memcpy(out, &r, 2);
  } else if (dtype == PW_DTYPE_F32) {
    float sum = 0.0f, v;
    for (size_t g = 0; g < 4; ++g) memcpy(&v, x + (g * 3 + c) * 4, 4), sum += v;
    memcpy(out, &sum, 4);
  } else if (dtype == PW_DTYPE_F64) {
    double sum = 0.0, v;
    for (size_t g = 0; g < 4; ++g) memcpy(&v, x + (g * 3 + c) * 8, 8), sum += v;
    memcpy(out, &sum, 8);
  } else {
    uint64_t sum = 0;
    for (size_t g = 0; g < 4; ++g) {
      uint64_t v = 0;
      memcpy(&v, x + (g * 3 + c) * w, w);
      sum += v;
    }
    memcpy(out, &sum, w); /* the low bytes: modulo 2^bits */
  }
}

Test(sim_dtype, all_reduce_sum_on_every_summable_dtype) {
  static const pw_dtype_t dtypes[] = {PW_DTYPE_F32, PW_DTYPE_F64, PW_DTYPE_F16, PW_DTYPE_BF16,
                                      PW_DTYPE_I8,  PW_DTYPE_I16, PW_DTYPE_I32, PW_DTYPE_I64,
                                      PW_DTYPE_U8,  PW_DTYPE_U16, PW_DTYPE_U32, PW_DTYPE_U64};
  pw_sim_fleet_t f;
  fleet(&f);
  uint64_t rng = 99;
  for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); ++d) {
    pw_dtype_t dtype = dtypes[d];
    size_t w = pw_dtype_size(dtype);
    unsigned char x[12 * 8], y[3 * 8], want[8];
    for (size_t i = 0; i < 12; ++i) {
      rng = rng * 6364136223846793005u + 1442695040888963407u;
      uint64_t bits = rng >> 11;
      if (dtype == PW_DTYPE_F16 || dtype == PW_DTYPE_BF16) {
        float v = (float)(int64_t)(bits % 20000) / 64.0f - 150.0f;
        uint16_t h = dtype == PW_DTYPE_F16 ? pw_f32_to_f16(v) : pw_f32_to_bf16(v);
        memcpy(x + i * 2, &h, 2);
      } else if (dtype == PW_DTYPE_F32) {
        float v = (float)(bits % 1000) / 8.0f;
        memcpy(x + i * 4, &v, 4);
      } else if (dtype == PW_DTYPE_F64) {
        double v = (double)(bits % 1000) / 8.0;
        memcpy(x + i * 8, &v, 8);
      } else {
        uint64_t v = i == 0 ? ~UINT64_C(0) : bits * 0x9E3779B97F4A7C15u;
        memcpy(x + i * w, &v, w);
      }
    }
    pw_executable_t e;
    PW_SIM_OK(compile(&f, dtype, &e));
    int64_t dims[2] = {4, 3};
    pw_array_spec_t spec = {dtype, pw_shape_make(2, dims), pw_sharding_split(0, PW_MESH_AXIS_ALL)};
    pw_graph_t g;
    PW_SIM_OK(pw_graph_create(f.client, &g));
    uint32_t p, node;
    PW_SIM_OK(pw_graph_add_parameter(f.client, g, f.vslices[0], &spec, &p));
    pw_value_t in = pw_value(p, 0);
    PW_SIM_OK(pw_graph_add_compute(f.client, g, "ar", e, f.vslices[0], &in, 1, &node));
    PW_SIM_OK(pw_graph_add_output(f.client, g, pw_value(node, 0)));
    pw_buffer_t arg, out;
    PW_SIM_OK(pw_buffer_from_host(f.client, f.vslices[0], &spec, x, 12 * w, &arg));
    pw_event_t* done = NULL;
    PW_SIM_OK(pw_graph_submit(f.client, g, &arg, 1, NULL, &out, 1, &done));
    PW_SIM_OK(pw_event_wait(done, pw_deadline_from_timeout(10ll * 1000 * 1000 * 1000)));
    pw_event_release(done);
    PW_SIM_OK(pw_buffer_to_host(f.client, out, y, 3 * w,
                                pw_deadline_from_timeout(10ll * 1000 * 1000 * 1000)));
    for (size_t c = 0; c < 3; ++c) {
      reference(dtype, x, c, want);
      cr_assert(memcmp(y + c * w, want, w) == 0, "%s column %zu", pw_dtype_name(dtype), c);
    }
    PW_SIM_OK(pw_buffer_release(f.client, arg));
    PW_SIM_OK(pw_buffer_release(f.client, out));
    PW_SIM_OK(pw_graph_release(f.client, g));
    PW_SIM_OK(pw_executable_release(f.client, e));
  }
  pw_sim_fleet_deinit(&f);
}

Test(sim_dtype, all_reduce_sum_refuses_what_it_cannot_add) {
  static const pw_dtype_t refused[] = {PW_DTYPE_BOOL, PW_DTYPE_F8E4M3FN, PW_DTYPE_F8E5M2,
                                       PW_DTYPE_C64};
  pw_sim_fleet_t f;
  fleet(&f);
  for (size_t d = 0; d < sizeof(refused) / sizeof(refused[0]); ++d) {
    pw_executable_t e;
    pw_status_t s = compile(&f, refused[d], &e);
    cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
    char want[64];
    snprintf(want, sizeof(want), "the integer dtypes, not %s", pw_dtype_name(refused[d]));
    cr_assert(strstr(pw_status_message(s), want) != NULL, "%s", pw_status_message(s));
    pw_status_free(s);
  }
  pw_sim_fleet_deinit(&f);
}
