/* The CPU program text format: parsing, its errors (one test per kind),
 * the builders and formatting. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cpu_test_support.h"
#include "support/test_allocators.h"

TestSuite(cpu_program, .fini = pw_test_check_leaks);

static pw_status_t parse(const char* text, pw_cpu_program_t* program) {
  return pw_cpu_program_parse(text, strlen(text), program);
}

/* Asserts |text| fails to parse with INVALID_ARGUMENT and a message that
 * contains every one of |parts| (NULL-terminated). */
static void expect_error(const char* text, const char* part1, const char* part2) {
  pw_cpu_program_t program;
  pw_status_t status = parse(text, &program);
  cr_assert_eq(pw_status_code(status), PW_STATUS_INVALID_ARGUMENT, "text: %s", text);
  const char* message = pw_status_message(status);
  cr_assert(strstr(message, part1) != NULL, "'%s' not in '%s'", part1, message);
  if (part2 != NULL) {
    cr_assert(strstr(message, part2) != NULL, "'%s' not in '%s'", part2, message);
  }
  pw_status_free(status);
}

Test(cpu_program, parses_the_documented_example) {
  const char* text =
      "# a comment\n"
      "kernel matmul\r\n"
      "\n"
      "input f32[64,16] split(0,all)\n"
      "  input\tf32[16,4]   replicated  \n"
      "output f32[64,4] split(0,1)\n"
      "attr alpha 0.5\n"
      "attr mode relu-6\n"
      "attr big -1e300\n"
      "attr hex 0x1.8p-1";
  pw_cpu_program_t p;
  cr_assert_null(parse(text, &p));
  cr_assert_str_eq(p.kernel, "matmul");
  cr_assert_eq(p.input_count, 2);
  cr_assert_eq(p.output_count, 1);
  cr_assert_eq(p.inputs[0].dtype, PW_DTYPE_F32);
  cr_assert_eq(p.inputs[0].shape.rank, 2);
  cr_assert_eq(p.inputs[0].shape.dims[0], 64);
  cr_assert_eq(p.inputs[0].shape.dims[1], 16);
  cr_assert_eq(p.inputs[0].sharding.kind, PW_SHARDING_SPLIT);
  cr_assert_eq(p.inputs[0].sharding.tensor_axis, 0);
  cr_assert_eq(p.inputs[0].sharding.mesh_axis, PW_MESH_AXIS_ALL);
  cr_assert_eq(p.inputs[1].sharding.kind, PW_SHARDING_REPLICATED);
  cr_assert_eq(p.outputs[0].sharding.mesh_axis, 1);
  cr_assert_eq(p.attr_count, 4);
  cr_assert_eq(pw_cpu_program_number_attr(&p, "alpha", 0), 0.5);
  const pw_cpu_attr_t* mode = pw_cpu_program_find_attr(&p, "mode");
  cr_assert_not_null(mode);
  cr_assert_eq(mode->kind, PW_CPU_ATTR_STRING);
  cr_assert_str_eq(mode->text, "relu-6");
  cr_assert_eq(pw_cpu_program_number_attr(&p, "big", 0), -1e300);
  cr_assert_eq(pw_cpu_program_number_attr(&p, "hex", 0), 0.75);
  cr_assert_eq(pw_cpu_program_number_attr(&p, "missing", 7), 7);
}

Test(cpu_program, parses_scalars_and_numbers_exactly) {
  pw_cpu_program_t p;
  cr_assert_null(parse("kernel k\noutput f64[] replicated\n"
                       "attr a 0.1\nattr b -0\nattr c 1e22\nattr d .25\n"
                       "attr e 3.\nattr f inf\nattr g -inf\nattr h nan\n"
                       "attr i 123456789012345678901234\nattr j 2.5E-3\n",
                       &p));
  cr_assert_eq(p.outputs[0].shape.rank, 0);
  cr_assert_eq(pw_cpu_program_number_attr(&p, "a", 0), 0.1);
  double b = pw_cpu_program_number_attr(&p, "b", 1);
  cr_assert(b == 0.0 && signbit(b));
  cr_assert_eq(pw_cpu_program_number_attr(&p, "c", 0), 1e22);
  cr_assert_eq(pw_cpu_program_number_attr(&p, "d", 0), 0.25);
  cr_assert_eq(pw_cpu_program_number_attr(&p, "e", 0), 3.0);
  cr_assert(isinf(pw_cpu_program_number_attr(&p, "f", 0)));
  cr_assert(pw_cpu_program_number_attr(&p, "g", 0) < 0);
  cr_assert(isnan(pw_cpu_program_number_attr(&p, "h", 0)));
  double i = pw_cpu_program_number_attr(&p, "i", 0);
  cr_assert(fabs(i - 1.23456789012345678901234e23) <= 1.23456789012345678901234e23 * 1e-15);
  cr_assert_eq(pw_cpu_program_number_attr(&p, "j", 0), 2.5e-3);
}

Test(cpu_program, error_unknown_dtype_names_line_and_token) {
  expect_error("kernel add\ninput f32[4] replicated\ninput f128[4] replicated\n",
               "line 3", "unknown dtype 'f128'");
  expect_error("kernel add\ninput BF16[4] replicated\n", "line 2", "unknown dtype 'BF16'");
}

Test(cpu_program, error_unknown_directive) {
  expect_error("kernel add\ninptu f32[4] replicated\n", "line 2",
               "unknown directive 'inptu'");
}

Test(cpu_program, error_directive_before_kernel) {
  expect_error("# header\ninput f32[4] replicated\nkernel add\n", "line 2",
               "before the kernel line");
}

Test(cpu_program, error_missing_kernel) {
  expect_error("", "no 'kernel NAME' line", NULL);
  expect_error("# only a comment\n\n", "no 'kernel NAME' line", NULL);
}

Test(cpu_program, error_second_kernel) {
  expect_error("kernel add\nkernel sub\n", "line 2", "first is on line 1");
}

Test(cpu_program, error_bad_kernel_name) {
  expect_error("kernel 9lives\n", "line 1", "invalid kernel name '9lives'");
  char long_name[200] = "kernel ";
  memset(long_name + 7, 'k', 100);
  expect_error(long_name, "line 1", "longer than 63");
}

Test(cpu_program, error_missing_and_extra_tokens) {
  expect_error("kernel\n", "line 1", "needs a name");
  expect_error("kernel add extra\n", "line 1", "unexpected token 'extra'");
  expect_error("kernel add\ninput f32[4]\n", "line 2", "needs a type and a sharding");
  expect_error("kernel add\ninput f32[4] replicated x\n", "line 2",
               "unexpected token 'x'");
  expect_error("kernel add\nattr alpha\n", "line 2", "needs a name and a value");
}

Test(cpu_program, error_bad_shape) {
  expect_error("kernel k\ninput f32 replicated\n", "line 2", "expected DTYPE[DIMS]");
  expect_error("kernel k\ninput f32[4,0] replicated\n", "line 2", "dimension 1");
  expect_error("kernel k\ninput f32[4,x] replicated\n", "line 2",
               "bad dimension 'x'");
  expect_error("kernel k\ninput f32[4,] replicated\n", "line 2", "trailing ','");
  expect_error("kernel k\ninput f32[1,1,1,1,1,1,1,1,1] replicated\n", "line 2",
               "more than 8 dimensions");
  expect_error("kernel k\ninput f32[-4] replicated\n", "line 2", "bad dimension '-4'");
  expect_error("kernel k\ninput f32[4611686018427387904,4611686018427387904] replicated\n",
               "line 2", "overflows");
}

Test(cpu_program, error_bad_sharding) {
  expect_error("kernel k\ninput f32[4] sharded\n", "line 2", "unknown sharding 'sharded'");
  expect_error("kernel k\ninput f32[4] split(0)\n", "line 2", "bad sharding 'split(0)'");
  expect_error("kernel k\ninput f32[4] split(0,every)\n", "line 2", "bad sharding");
  expect_error("kernel k\ninput f32[4] split(0, 1)\n", "line 2", "unexpected token '1)'");
}

Test(cpu_program, error_bad_attribute) {
  expect_error("kernel k\nattr 1x 2\n", "line 2", "invalid attribute name '1x'");
  expect_error("kernel k\nattr a 1.2.3\n", "line 2", "bad value '1.2.3'");
  expect_error("kernel k\nattr a 0x1.fffffffffffff8p0\n", "line 2", "bad value");
  expect_error("kernel k\nattr a 1\nattr b 2\nattr a 3\n", "line 4",
               "duplicate attribute 'a' (first on line 2)");
}

Test(cpu_program, error_too_many_params_and_attrs) {
  static char text[PW_CPU_PROGRAM_TEXT_MAX] = "kernel k\n";
  for (int i = 0; i < PW_CPU_MAX_PARAMS + 1; ++i) strcat(text, "input f32[1] replicated\n");
  expect_error(text, "line 514", "more than 512 inputs");
  strcpy(text, "kernel k\n");
  for (int i = 0; i < 17; ++i) {
    char line[32];
    snprintf(line, sizeof(line), "attr a%d %d\n", i, i);
    strcat(text, line);
  }
  expect_error(text, "line 18", "more than 16 attributes");
}

Test(cpu_program, error_control_bytes) {
  const char text[] = "kernel k\ninput f32[4]\x01 replicated\n";
  pw_cpu_program_t p;
  pw_status_t status = pw_cpu_program_parse(text, sizeof(text) - 1, &p);
  cr_assert_eq(pw_status_code(status), PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(pw_status_message(status), "line 2: unexpected byte 0x01"));
  pw_status_free(status);
  const char nul[] = "kernel k\0\n";
  status = pw_cpu_program_parse(nul, sizeof(nul) - 1, &p);
  cr_assert_eq(pw_status_code(status), PW_STATUS_INVALID_ARGUMENT);
  cr_assert(strstr(pw_status_message(status), "unexpected byte 0x00"));
  pw_status_free(status);
  status = pw_cpu_program_parse(NULL, 4, &p);
  cr_assert_eq(pw_status_code(status), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(status);
}

Test(cpu_program, builder_and_format_round_trip) {
  pw_cpu_program_t p;
  cr_assert_null(pw_cpu_program_init(&p, "matmul"));
  int64_t a_dims[] = {64, 16};
  int64_t b_dims[] = {16, 4};
  int64_t c_dims[] = {64, 4};
  pw_shape_t a = pw_shape_make(2, a_dims);
  pw_shape_t b = pw_shape_make(2, b_dims);
  pw_shape_t c = pw_shape_make(2, c_dims);
  pw_shape_t scalar = pw_shape_make(0, NULL);
  cr_assert_null(pw_cpu_program_add_input(&p, PW_DTYPE_F32, &a,
                                          pw_sharding_split(0, PW_MESH_AXIS_ALL)));
  cr_assert_null(pw_cpu_program_add_input(&p, PW_DTYPE_F32, &b, pw_sharding_replicated()));
  cr_assert_null(pw_cpu_program_add_input(&p, PW_DTYPE_I64, &scalar, pw_sharding_replicated()));
  cr_assert_null(pw_cpu_program_add_output(&p, PW_DTYPE_F32, &c, pw_sharding_split(0, 1)));
  double values[] = {0.1, -3.0, 1e300, 5e-324, -0.0, 0.5, 1.0 / 3.0, 123456789.0,
                     9007199254740993.0, INFINITY};
  for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); ++i) {
    char name[16];
    snprintf(name, sizeof(name), "v%zu", i);
    cr_assert_null(pw_cpu_program_set_number(&p, name, values[i]));
  }
  cr_assert_null(pw_cpu_program_set_string(&p, "mode", "relu"));
  cr_assert_null(pw_cpu_program_set_number(&p, "v0", 0.25)); /* replaces */
  values[0] = 0.25;

  char text[PW_CPU_PROGRAM_TEXT_MAX];
  size_t length = 0;
  cr_assert_null(pw_cpu_program_format(&p, text, sizeof(text), &length));
  cr_assert_eq(length, strlen(text));
  cr_assert(strstr(text, "kernel matmul\ninput f32[64,16] split(0,all)\n"), "%s", text);
  cr_assert(strstr(text, "output f32[64,4] split(0,1)\n"), "%s", text);
  cr_assert(strstr(text, "attr v1 -3\n"), "%s", text);
  cr_assert(strstr(text, "attr mode relu\n"), "%s", text);

  pw_cpu_program_t q;
  cr_assert_null(parse(text, &q));
  cr_assert_str_eq(q.kernel, p.kernel);
  cr_assert_eq(q.input_count, 3);
  cr_assert_eq(q.attr_count, p.attr_count);
  for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); ++i) {
    char name[16];
    snprintf(name, sizeof(name), "v%zu", i);
    double got = pw_cpu_program_number_attr(&q, name, 42);
    cr_assert(memcmp(&got, &values[i], sizeof(got)) == 0, "%s: %a != %a", name, got,
              values[i]);
  }
  cr_assert(memcmp(&q.inputs, &p.inputs, sizeof(p.inputs)) == 0);
  cr_assert(memcmp(&q.outputs, &p.outputs, sizeof(p.outputs)) == 0);

  /* Truncation behaves like snprintf. */
  char small[10];
  size_t full = 0;
  cr_assert_null(pw_cpu_program_format(&p, small, sizeof(small), &full));
  cr_assert_eq(full, length);
  cr_assert_eq(strlen(small), sizeof(small) - 1);
  cr_assert_null(pw_cpu_program_format(&p, NULL, 0, &full));
  cr_assert_eq(full, length);
}

Test(cpu_program, builder_rejects_bad_values) {
  pw_cpu_program_t p;
  pw_status_t s = pw_cpu_program_init(&p, "bad name");
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  cr_assert_null(pw_cpu_program_init(&p, "k"));
  int64_t dims[] = {4, 0};
  pw_shape_t bad = pw_shape_make(2, dims);
  s = pw_cpu_program_add_input(&p, PW_DTYPE_F32, &bad, pw_sharding_replicated());
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  pw_shape_t ok = pw_shape_make(1, dims);
  s = pw_cpu_program_add_input(&p, (pw_dtype_t)99, &ok, pw_sharding_replicated());
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  s = pw_cpu_program_set_string(&p, "mode", "has space");
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  s = pw_cpu_program_set_string(&p, "mode", "inf");
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
  for (int i = 0; i < PW_CPU_MAX_PARAMS; ++i) {
    cr_assert_null(pw_cpu_program_add_output(&p, PW_DTYPE_U8, &ok, pw_sharding_replicated()));
  }
  s = pw_cpu_program_add_output(&p, PW_DTYPE_U8, &ok, pw_sharding_replicated());
  cr_assert_eq(pw_status_code(s), PW_STATUS_RESOURCE_EXHAUSTED);
  pw_status_free(s);
  /* A hand-corrupted value is refused by format, naming the field. */
  p.inputs[0].dtype = PW_DTYPE_F32;
  p.inputs[0].shape = ok;
  p.inputs[0].sharding.kind = (pw_sharding_kind_t)7;
  p.input_count = 1;
  size_t n = 0;
  s = pw_cpu_program_format(&p, NULL, 0, &n);
  cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT);
  pw_status_free(s);
}
