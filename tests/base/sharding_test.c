/* Named mesh axes and multi-axis (TILED) shardings: checks, geometry, text
 * forms, and that REPLICATED / SPLIT read as their TILED forms. */
#include <criterion/criterion.h>
#include <string.h>

#include "pathways/pathways.h"

#define OK(expr)                                                          \
  do {                                                                    \
    pw_status_t s_ = (expr);                                              \
    cr_assert(s_ == NULL, "%s: %s", #expr, s_ ? pw_status_message(s_) : ""); \
  } while (0)

/* The status of |expr| has |code| and its message contains |needle|. */
#define FAILS(expr, code, needle)                                                   \
  do {                                                                              \
    pw_status_t s_ = (expr);                                                        \
    cr_assert(s_ != NULL, "%s succeeded", #expr);                                  \
    cr_assert_eq(pw_status_code(s_), code, "%s: %s", #expr, pw_status_message(s_)); \
    cr_assert(strstr(pw_status_message(s_), needle) != NULL, "'%s' lacks '%s'",     \
              pw_status_message(s_), needle);                                       \
    pw_status_free(s_);                                                             \
  } while (0)

static pw_mesh_shape_t mesh_2x4(void) {
  pw_mesh_shape_t m;
  OK(pw_mesh_shape_parse("data=2,model=4", &m));
  return m;
}

Test(mesh, names_parse_format_find) {
  pw_mesh_shape_t m = mesh_2x4();
  cr_assert_eq(m.rank, 2);
  cr_assert_eq(m.dims[0], 2);
  cr_assert_eq(m.dims[1], 4);
  cr_assert_str_eq(m.axis_names[1], "model");
  char text[64];
  pw_mesh_shape_format(&m, text, sizeof(text));
  cr_assert_str_eq(text, "data=2,model=4");
  uint32_t axis = 9;
  OK(pw_mesh_axis_find(&m, "model", 5, &axis));
  cr_assert_eq(axis, 1);
  FAILS(pw_mesh_axis_find(&m, "pipe", 4, &axis), PW_STATUS_NOT_FOUND, "data, model");
  /* Names are labels: equal to the unnamed 2x4. */
  pw_mesh_shape_t plain = PW_MESH_SHAPE_INIT(2, 2, 4);
  cr_assert(pw_mesh_shape_equal(&m, &plain));
  cr_assert(!pw_mesh_shape_names_equal(&m, &plain));
  pw_mesh_shape_format(&plain, text, sizeof(text));
  cr_assert_str_eq(text, "2x4");
  OK(pw_mesh_axis_find(&plain, "1", 1, &axis));
  cr_assert_eq(axis, 1);
  FAILS(pw_mesh_axis_find(&plain, "2", 1, &axis), PW_STATUS_NOT_FOUND, "0, 1");
}

Test(mesh, bad_names_refused) {
  pw_mesh_shape_t m = PW_MESH_SHAPE_INIT(2, 2, 4);
  const char* twice[] = {"x", "x"};
  FAILS(pw_mesh_shape_set_axis_names(&m, 2, twice), PW_STATUS_INVALID_ARGUMENT, "both named 'x'");
  const char* digit[] = {"1a", "b"};
  FAILS(pw_mesh_shape_set_axis_names(&m, 2, digit), PW_STATUS_INVALID_ARGUMENT, "'1a'");
  const char* longname[] = {"a_name_far_too_long", "b"};
  FAILS(pw_mesh_shape_set_axis_names(&m, 2, longname), PW_STATUS_INVALID_ARGUMENT, "1..15");
  const char* one[] = {"a"};
  FAILS(pw_mesh_shape_set_axis_names(&m, 1, one), PW_STATUS_INVALID_ARGUMENT, "rank-2");
  cr_assert_eq(m.axis_names[0][0], '\0', "a refused call leaves the mesh unchanged");
  const char* good[] = {"a", "b"};
  OK(pw_mesh_shape_set_axis_names(&m, 2, good));
  OK(pw_mesh_shape_check(&m));
  m.axis_names[1][0] = '\0';
  FAILS(pw_mesh_shape_check(&m), PW_STATUS_INVALID_ARGUMENT, "mesh axis 1");
  pw_mesh_shape_t out;
  FAILS(pw_mesh_shape_parse("data=2,data=4", &out), PW_STATUS_INVALID_ARGUMENT, "both named");
  FAILS(pw_mesh_shape_parse("data=2x4", &out), PW_STATUS_INVALID_ARGUMENT, "unexpected 'x'");
  FAILS(pw_mesh_shape_parse("=2", &out), PW_STATUS_INVALID_ARGUMENT, "expected a number");
}

static pw_shape_t shape2(int64_t a, int64_t b) {
  int64_t d[2] = {a, b};
  return pw_shape_make(2, d);
}

Test(sharding, tiled_geometry_on_2x4) {
  pw_mesh_shape_t m = mesh_2x4();
  pw_shape_t shape = shape2(8, 12);
  /* P(data, model): rows over data, columns over model. */
  pw_sharding_tile_t tiles[2] = {{0, 0}, {1, 1}};
  pw_sharding_t s = pw_sharding_tiled(2, tiles, 0);
  OK(pw_sharding_check(&s, &shape, &m));
  pw_shape_t shard = pw_sharding_shard_shape(&s, &shape, &m);
  cr_assert_eq(shard.dims[0], 4);
  cr_assert_eq(shard.dims[1], 3);
  cr_assert_eq(pw_sharding_block_count(&s, &shape, &m), 8);
  for (uint32_t d = 0; d < 8; ++d) {
    int64_t off[2];
    pw_sharding_shard_offsets(&s, &shape, &m, d, off);
    cr_assert_eq(off[0], (int64_t)(d / 4) * 4, "device %u", d);
    cr_assert_eq(off[1], (int64_t)(d % 4) * 3, "device %u", d);
    cr_assert_eq(pw_sharding_block_index(&s, &m, d), d);
  }
  /* P((model, data)) on dimension 0: model major. */
  pw_sharding_tile_t both[2] = {{0, 1}, {0, 0}};
  pw_sharding_t t = pw_sharding_tiled(2, both, 0);
  OK(pw_sharding_check(&t, &shape, &m));
  for (uint32_t d = 0; d < 8; ++d) {
    int64_t off[2];
    pw_sharding_shard_offsets(&t, &shape, &m, d, off);
    uint32_t block = (d % 4) * 2 + d / 4;
    cr_assert_eq(off[0], (int64_t)block, "device %u", d);
    cr_assert_eq(off[1], 0);
  }
  /* P(None, model) unreduced(data): partial sums over data. */
  pw_sharding_tile_t col[1] = {{1, 1}};
  pw_sharding_t u = pw_sharding_tiled(1, col, 1u << 0);
  OK(pw_sharding_check(&u, &shape, &m));
  cr_assert_eq(pw_sharding_partial_count(&u, &m), 2);
  cr_assert_eq(pw_sharding_block_count(&u, &shape, &m), 4);
  cr_assert_eq(pw_sharding_partial_index(&u, &m, 5), 1);
  cr_assert_eq(pw_sharding_block_index(&u, &m, 5), 1);
}

Test(sharding, legacy_kinds_are_tiled_special_cases) {
  pw_mesh_shape_t m = mesh_2x4();
  pw_shape_t shape = shape2(16, 4);
  pw_sharding_t all = pw_sharding_split(0, PW_MESH_AXIS_ALL);
  pw_sharding_tile_t tiles[2] = {{0, 0}, {0, 1}};
  pw_sharding_t t = pw_sharding_tiled(2, tiles, 0);
  cr_assert(pw_sharding_equivalent(&all, &t, &shape, &m));
  cr_assert(!pw_sharding_equal(&all, &t));
  pw_sharding_t n;
  OK(pw_sharding_normalize(&all, &shape, &m, &n));
  cr_assert(pw_sharding_equal(&n, &t));
  for (uint32_t d = 0; d < 8; ++d) {
    cr_assert_eq(pw_sharding_block_index(&all, &m, d), pw_sharding_block_index(&t, &m, d));
  }
  pw_sharding_t one = pw_sharding_split(1, 1);
  pw_sharding_tile_t col[1] = {{1, 1}};
  pw_sharding_t tc = pw_sharding_tiled(1, col, 0);
  cr_assert(pw_sharding_equivalent(&one, &tc, &shape, &m));
  pw_sharding_t rep = pw_sharding_replicated();
  pw_sharding_t none = pw_sharding_tiled(0, NULL, 0);
  cr_assert(pw_sharding_equivalent(&rep, &none, &shape, &m));
  cr_assert(!pw_sharding_equivalent(&rep, &tc, &shape, &m));
  /* A size-1 axis splits nothing. */
  pw_mesh_shape_t m14 = PW_MESH_SHAPE_INIT(2, 1, 4);
  pw_sharding_tile_t row[1] = {{0, 0}};
  pw_sharding_t tr = pw_sharding_tiled(1, row, 0);
  cr_assert(pw_sharding_equivalent(&rep, &tr, &shape, &m14));
}

Test(sharding, bad_tiled_refused_naming_culprit) {
  pw_mesh_shape_t m = mesh_2x4();
  pw_shape_t shape = shape2(8, 10);
  pw_sharding_tile_t cols[1] = {{1, 1}};
  pw_sharding_t uneven = pw_sharding_tiled(1, cols, 0);
  FAILS(pw_sharding_check(&uneven, &shape, &m), PW_STATUS_INVALID_ARGUMENT,
        "dimension 1 (size 10) is not divisible into 4 shards over mesh axes model(4)");
  pw_sharding_tile_t twice[2] = {{0, 1}, {1, 1}};
  pw_sharding_t dup = pw_sharding_tiled(2, twice, 0);
  FAILS(pw_sharding_check(&dup, &shape, &m), PW_STATUS_INVALID_ARGUMENT,
        "mesh axis model is used twice");
  pw_sharding_tile_t rows[1] = {{0, 0}};
  pw_sharding_t both = pw_sharding_tiled(1, rows, 1u << 0);
  FAILS(pw_sharding_check(&both, &shape, &m), PW_STATUS_INVALID_ARGUMENT,
        "mesh axis data both splits");
  pw_sharding_tile_t far[1] = {{2, 0}};
  pw_sharding_t rank = pw_sharding_tiled(1, far, 0);
  FAILS(pw_sharding_check(&rank, &shape, &m), PW_STATUS_INVALID_ARGUMENT,
        "tensor dimension 2 of a rank-2 array");
  pw_sharding_tile_t axis[1] = {{0, 3}};
  pw_sharding_t bad_axis = pw_sharding_tiled(1, axis, 0);
  FAILS(pw_sharding_check(&bad_axis, &shape, &m), PW_STATUS_INVALID_ARGUMENT,
        "mesh axis 3 of a rank-2 mesh");
  pw_sharding_t mask = pw_sharding_tiled(0, NULL, 1u << 5);
  FAILS(pw_sharding_check(&mask, &shape, &m), PW_STATUS_INVALID_ARGUMENT, "beyond");
  pw_sharding_t many = pw_sharding_tiled(3, NULL, 0);
  FAILS(pw_sharding_check(&many, &shape, &m), PW_STATUS_INVALID_ARGUMENT, "3 tiles");
}

Test(sharding, text_round_trip) {
  pw_mesh_shape_t m = mesh_2x4();
  const char* forms[] = {"P(data, model)", "P(None, (model, data))", "P(None, model) unreduced(data)",
                         "P()", "replicated", "split(1 over mesh axis model)"};
  const char* inputs[] = {"P(data, model)", "P(None,(model,data))",
                          "P(None, model) unreduced(data)", "P()", "replicated",
                          "split(1, model)"};
  for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); ++i) {
    pw_sharding_t s;
    OK(pw_sharding_parse(inputs[i], strlen(inputs[i]), 2, &m, &s));
    char text[128];
    pw_sharding_format_named(&s, &m, text, sizeof(text));
    cr_assert_str_eq(text, forms[i], "input '%s'", inputs[i]);
  }
  pw_sharding_t s;
  /* A named mesh is addressed by name only. */
  FAILS(pw_sharding_parse("P(0, 1)", 7, 2, &m, &s), PW_STATUS_NOT_FOUND, "no mesh axis '0'");
  pw_mesh_shape_t plain = PW_MESH_SHAPE_INIT(2, 2, 4);
  OK(pw_sharding_parse("P(1, None) unreduced(0)", 23, 2, &plain, &s));
  char text[128];
  pw_sharding_format(&s, text, sizeof(text));
  cr_assert_str_eq(text, "P(1) unreduced(0)");
  FAILS(pw_sharding_parse("P(pipe)", 7, 2, &m, &s), PW_STATUS_NOT_FOUND, "no mesh axis 'pipe'");
  FAILS(pw_sharding_parse("P(data, data)", 13, 2, &m, &s), PW_STATUS_INVALID_ARGUMENT,
        "used twice");
  FAILS(pw_sharding_parse("P(data, None, None)", 19, 2, &m, &s), PW_STATUS_INVALID_ARGUMENT,
        "more PartitionSpec entries");
  FAILS(pw_sharding_parse("P(data", 6, 2, &m, &s), PW_STATUS_INVALID_ARGUMENT, "expected");
  FAILS(pw_sharding_parse("tiled", 5, 2, &m, &s), PW_STATUS_INVALID_ARGUMENT,
        "expected replicated");
  /* Truncated output still reports the full length. */
  pw_sharding_t t;
  OK(pw_sharding_parse("P(data, model)", 14, 2, &m, &t));
  char small[4];
  cr_assert_eq(pw_sharding_format_named(&t, &m, small, sizeof(small)), strlen("P(data, model)"));
  cr_assert_str_eq(small, "P(d");
}
