/* Graph files without a runtime: strict decoding with path-named errors
 * (driven by the seed corpus and its expectations), the deterministic
 * encoding and canonical hash, the JSON view, the memory bound, libcbor's
 * known traps, and a failing-allocator sweep over every entry point. */
#include <stdio.h>
#include <stdlib.h>

#include "graph_format/gf_util.h"
#include "pathways/graph_format.h"
#include "support/test_allocators.h"

TestSuite(graph_format, .fini = pw_test_check_leaks);

static pw_allocator_t sys(void) { return pw_allocator_system(); }

Test(graph_format, corpus_files_meet_their_expectations) {
  FILE* f = fopen(PW_CORPUS_EXPECT, "r");
  cr_assert_not_null(f, "cannot open %s", PW_CORPUS_EXPECT);
  char line[512];
  int checked = 0, valid = 0;
  while (fgets(line, sizeof(line), f) != NULL) {
    if (line[0] == '#' || line[0] == '\n') continue;
    line[strcspn(line, "\n")] = '\0';
    char* tab = strchr(line, '\t');
    cr_assert_not_null(tab, "bad expectation line: %s", line);
    *tab = '\0';
    const char* expect = tab + 1;
    size_t size;
    uint8_t* data = gf_read_corpus(line, &size);
    pw_status_t s = pw_graph_format_check(data, size, sys(), NULL);
    if (strcmp(expect, "ok") == 0) {
      cr_assert_null(s, "%s: %s", line, pw_status_message(s));
      valid++;
    } else {
      cr_assert_not_null(s, "%s was accepted; expected \"%s\"", line, expect);
      cr_assert_eq(pw_status_code(s), PW_STATUS_INVALID_ARGUMENT, "%s: %s", line,
                   pw_status_message(s));
      cr_assert(strstr(pw_status_message(s), expect) != NULL, "%s: \"%s\" lacks \"%s\"", line,
                pw_status_message(s), expect);
    }
    pw_status_free(s);
    free(data);
    checked++;
  }
  fclose(f);
  cr_assert_geq(checked, 20);
  cr_assert_geq(valid, 5);
}

Test(graph_format, canonical_files_reencode_byte_identical) {
  const char* names[] = {"valid_minimal.cbor", "valid_chain8.cbor", "valid_diamond.cbor",
                         "valid_two_slices.cbor", "valid_by_hash.cbor", "valid_empty.cbor"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
    size_t size;
    uint8_t* data = gf_read_corpus(names[i], &size);
    void* out = NULL;
    size_t out_size = 0;
    OK(pw_graph_format_canonicalize(data, size, sys(), &out, &out_size));
    cr_assert_eq(out_size, size, "%s: %zu bytes became %zu", names[i], size, out_size);
    cr_assert(memcmp(out, data, size) == 0, "%s: canonical form differs", names[i]);
    pw_allocator_free(sys(), out, out_size);
    free(data);
  }
}

Test(graph_format, key_order_and_integer_width_do_not_change_the_hash) {
  size_t a_size, b_size;
  uint8_t* a = gf_read_corpus("valid_minimal.cbor", &a_size);
  uint8_t* b = gf_read_corpus("valid_noncanonical.cbor", &b_size);
  cr_assert_neq(a_size, b_size);
  pw_graph_format_info_t ia = {.struct_size = sizeof(pw_graph_format_info_t)},
                         ib = {.struct_size = sizeof(pw_graph_format_info_t)};
  OK(pw_graph_format_check(a, a_size, sys(), &ia));
  OK(pw_graph_format_check(b, b_size, sys(), &ib));
  cr_assert(memcmp(&ia.hash, &ib.hash, sizeof(ia.hash)) == 0);
  cr_assert_eq(ia.nodes, 1);
  cr_assert_eq(ia.buffers, 2);
  void* canon = NULL;
  size_t canon_size = 0;
  OK(pw_graph_format_canonicalize(b, b_size, sys(), &canon, &canon_size));
  cr_assert_eq(canon_size, a_size);
  cr_assert(memcmp(canon, a, a_size) == 0);
  pw_allocator_free(sys(), canon, canon_size);
  /* A different graph has a different hash. */
  size_t c_size;
  uint8_t* c = gf_read_corpus("valid_chain8.cbor", &c_size);
  pw_graph_format_info_t ic = {.struct_size = sizeof(pw_graph_format_info_t)};
  OK(pw_graph_format_check(c, c_size, sys(), &ic));
  cr_assert(memcmp(&ia.hash, &ic.hash, sizeof(ia.hash)) != 0);
  char hex[33];
  pw_graph_hash_format(&ia.hash, hex);
  cr_assert_eq(strlen(hex), 32);
  free(a);
  free(b);
  free(c);
}

Test(graph_format, libcbor_traps_are_rejected_before_allocating) {
  /* cbor_load would allocate 2 GiB for this array head (docs/toolchain.md). */
  static const uint8_t huge[] = {0x9A, 0x10, 0x00, 0x00, 0x00};
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  FAILS(pw_graph_format_check(huge, sizeof(huge), pw_test_allocator(&t), NULL),
        PW_STATUS_INVALID_ARGUMENT, "offset 0: an array declares 268435456 elements, but only 0");
  cr_assert_eq(atomic_load(&t.attempts), 0);
  /* Trailing bytes after a complete item (cbor_load reports read=1). */
  static const uint8_t trailing[] = {0x01, 0x02};
  FAILS(pw_graph_format_check(trailing, sizeof(trailing), sys(), NULL),
        PW_STATUS_INVALID_ARGUMENT, "offset 1: 1 trailing bytes");
  /* Indefinite map (segfaults cbor_load under allocation failure). */
  static const uint8_t indef_map[] = {0xBF, 0x61, 'v', 0x01, 0xFF};
  FAILS(pw_graph_format_check(indef_map, sizeof(indef_map), sys(), NULL),
        PW_STATUS_INVALID_ARGUMENT, "offset 0: indefinite-length item");
  /* Indefinite text nested in a definite map. */
  static const uint8_t indef_text[] = {0xA1, 0x7F, 0x61, 'v', 0xFF, 0x01};
  FAILS(pw_graph_format_check(indef_text, sizeof(indef_text), sys(), NULL),
        PW_STATUS_INVALID_ARGUMENT, "offset 1: indefinite-length item");
  /* A string longer than the input. */
  static const uint8_t long_text[] = {0xA1, 0x7A, 0xFF, 0xFF, 0xFF, 0xFF, 'v'};
  FAILS(pw_graph_format_check(long_text, sizeof(long_text), sys(), NULL),
        PW_STATUS_INVALID_ARGUMENT, "offset 1: truncated");
  /* Reserved additional information. */
  static const uint8_t reserved[] = {0x1C};
  FAILS(pw_graph_format_check(reserved, sizeof(reserved), sys(), NULL),
        PW_STATUS_INVALID_ARGUMENT, "malformed CBOR (initial byte 0x1c)");
  FAILS(pw_graph_format_check("", 0, sys(), NULL), PW_STATUS_INVALID_ARGUMENT, "empty input");
}

Test(graph_format, nesting_limit_is_exact) {
  /* {"v":1, "parameters": [[[...0...]]]}: depth = 1 (map) + arrays. */
  for (int arrays = 6; arrays <= 9; ++arrays) {
    gf_cbor_t c;
    c.size = 0;
    gf_head(&c, 5, 2);
    gf_text(&c, "v");
    gf_uint(&c, 1);
    gf_text(&c, "parameters");
    for (int i = 0; i < arrays; ++i) gf_head(&c, 4, 1);
    gf_uint(&c, 0);
    pw_status_t s = pw_graph_format_check(c.data, c.size, sys(), NULL);
    cr_assert_not_null(s);
    bool too_deep = strstr(pw_status_message(s), "nesting deeper than 8 levels") != NULL;
    cr_assert_eq(too_deep, (unsigned)(1 + arrays) > PW_GRAPH_FORMAT_MAX_DEPTH, "%d arrays: %s", arrays,
                 pw_status_message(s));
    if (!too_deep) {
      cr_assert(strstr(pw_status_message(s),
                       "parameters[0]: expected an unsigned integer, found an array"),
                "%s", pw_status_message(s));
    }
    pw_status_free(s);
  }
}

Test(graph_format, version_is_checked_before_the_rest) {
  /* Version 4 with contents this version does not know. */
  gf_cbor_t c;
  c.size = 0;
  gf_head(&c, 5, 2);
  gf_text(&c, "future");
  gf_head(&c, 4, 0);
  gf_text(&c, "v");
  gf_uint(&c, 4);
  FAILS(pw_graph_format_check(c.data, c.size, sys(), NULL), PW_STATUS_INVALID_ARGUMENT,
        "v: unknown format version 4 (this library reads versions 1 to 3)");
}

Test(graph_format, messages_name_nested_paths) {
  static const uint32_t mesh[2] = {2, 4};
  gf_cbor_t c;
  gf_one_node_graph(&c, 2, mesh, "copy", 8, 8);
  OK(pw_graph_format_check(c.data, c.size, sys(), NULL));
  gf_one_node_graph(&c, 2, mesh, "copy", 0, 8);
  FAILS(pw_graph_format_check(c.data, c.size, sys(), NULL), PW_STATUS_INVALID_ARGUMENT,
        "buffers[0].shape[0]: dimensions are at least 1");
  gf_one_node_graph(&c, 2, mesh, "copy", 12, 8);
  FAILS(pw_graph_format_check(c.data, c.size, sys(), NULL), PW_STATUS_INVALID_ARGUMENT,
        "buffers[0] (on vslice 0)");
  static const uint32_t bad_mesh[2] = {2, 0};
  gf_one_node_graph(&c, 2, bad_mesh, "copy", 8, 8);
  FAILS(pw_graph_format_check(c.data, c.size, sys(), NULL), PW_STATUS_INVALID_ARGUMENT,
        "vslices[0]");
}

Test(graph_format, json_view_shows_the_graph) {
  size_t size;
  uint8_t* data = gf_read_corpus("valid_diamond.cbor", &size);
  char* text = NULL;
  size_t text_size = 0;
  OK(pw_graph_format_dump_json(data, size, sys(), &text, &text_size));
  cr_assert_eq(strlen(text) + 1, text_size);
  const char* needles[] = {"\"v\": 1", "\"hash\": \"", "\"vslices\": [\"2x4\"]",
                           "\"name\": \"join\"", "\"inputs\": [1, 2]",
                           "\"program\": \"copy\\ninput f32[8] split(0,all)",
                           "f32[8] split(0 over all devices)", "\"outputs\": [3, 1]"};
  for (size_t i = 0; i < sizeof(needles) / sizeof(needles[0]); ++i) {
    cr_assert(strstr(text, needles[i]) != NULL, "JSON lacks %s:\n%s", needles[i], text);
  }
  pw_allocator_free(sys(), text, text_size);
  free(data);
}

/* Peak decoder memory for |data| must stay within 8 x size + 128 KiB. */
static void check_bound(const uint8_t* data, size_t size, const char* what) {
  pw_test_allocator_t t;
  pw_test_allocator_init(&t);
  pw_status_t s = pw_graph_format_check(data, size, pw_test_allocator(&t), NULL);
  pw_status_free(s);
  size_t peak = atomic_load(&t.peak_bytes);
  cr_assert_leq(peak, 8 * size + (128u << 10), "%s: %zu input bytes peaked at %zu", what, size,
                peak);
  cr_assert_eq(pw_test_allocator_live(&t), 0);
}

Test(graph_format, decoder_memory_is_bounded_by_the_input_size) {
  static gf_cbor_t c;
  /* 60000 one-byte parameter references. */
  c.size = 0;
  gf_head(&c, 5, 2);
  gf_text(&c, "v");
  gf_uint(&c, 1);
  gf_text(&c, "parameters");
  gf_head(&c, 4, 60000);
  for (int i = 0; i < 60000; ++i) gf_uint(&c, 0);
  check_bound(c.data, c.size, "parameters");
  /* Declared counts just under the bytes-left limit, with no content. */
  const char* arrays[] = {"nodes", "buffers", "executables", "vslices", "outputs"};
  for (size_t k = 0; k < sizeof(arrays) / sizeof(arrays[0]); ++k) {
    c.size = 0;
    gf_head(&c, 5, 2);
    gf_text(&c, "v");
    gf_uint(&c, 1);
    gf_text(&c, arrays[k]);
    gf_head(&c, 4, 4000);
    for (int i = 0; i < 4000; ++i) gf_uint(&c, 1);
    check_bound(c.data, c.size, arrays[k]);
  }
  /* A long valid chain. */
  size_t size;
  uint8_t* data = gf_read_corpus("valid_chain8.cbor", &size);
  check_bound(data, size, "chain");
  free(data);
}

typedef struct sweep_input_t {
  const uint8_t* data;
  size_t size;
  int which; /* 0 check, 1 canonicalize, 2 json */
} sweep_input_t;

static bool sweep_body(pw_allocator_t allocator, bool expect_failure, void* user) {
  const sweep_input_t* in = user;
  pw_status_t s;
  void* out = NULL;
  size_t out_size = 0;
  if (in->which == 0) {
    pw_graph_format_info_t info = {.struct_size = sizeof(pw_graph_format_info_t)};
    s = pw_graph_format_check(in->data, in->size, allocator, &info);
  } else if (in->which == 1) {
    s = pw_graph_format_canonicalize(in->data, in->size, allocator, &out, &out_size);
  } else {
    s = pw_graph_format_dump_json(in->data, in->size, allocator, (char**)&out, &out_size);
  }
  if (s == NULL) {
    pw_allocator_free(allocator, out, out_size);
    return !expect_failure;
  }
  bool ok = expect_failure && pw_status_code(s) == PW_STATUS_RESOURCE_EXHAUSTED && out == NULL;
  pw_status_free(s);
  return ok;
}

Test(graph_format, every_allocation_failure_is_reported_cleanly) {
  const char* names[] = {"valid_diamond.cbor", "valid_two_slices.cbor", "bad_cycle.cbor"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
    size_t size;
    uint8_t* data = gf_read_corpus(names[i], &size);
    for (int which = 0; which < 3; ++which) {
      if (strncmp(names[i], "bad", 3) == 0 && which > 0) continue;
      sweep_input_t in = {data, size, which};
      char why[256] = "";
      if (strncmp(names[i], "bad", 3) == 0) {
        /* Invalid input: every run fails; with an injected failure it must
         * be RESOURCE_EXHAUSTED or the validation error, never a leak. */
        pw_test_allocator_t t;
        for (size_t n = 1; n < 64; ++n) {
          pw_test_allocator_init(&t);
          t.fail_at = n;
          pw_status_t s = pw_graph_format_check(data, size, pw_test_allocator(&t), NULL);
          cr_assert_not_null(s);
          pw_status_free(s);
          cr_assert_eq(pw_test_allocator_live(&t), 0, "%s: failure %zu leaked", names[i], n);
        }
        continue;
      }
      int points = pw_test_allocator_sweep(sweep_body, &in, why);
      cr_assert_gt(points, 0, "%s (entry point %d): %s", names[i], which, why);
    }
    free(data);
  }
}

/* {"v":1,"vslices":[[8]],"executables":[],"buffers":[{dtype |name|, [4],
 * replicated}],"parameters":[0],"nodes":[],"outputs":[0]} */
static void params_only_graph(gf_cbor_t* c, const char* dtype_name) {
  c->size = 0;
  gf_head(c, 5, 7);
  gf_text(c, "v");
  gf_uint(c, 1);
  gf_text(c, "vslices");
  gf_head(c, 4, 1);
  gf_head(c, 4, 1);
  gf_uint(c, 8);
  gf_text(c, "executables");
  gf_head(c, 4, 0);
  gf_text(c, "buffers");
  gf_head(c, 4, 1);
  gf_head(c, 5, 4);
  gf_text(c, "vslice");
  gf_uint(c, 0);
  gf_text(c, "dtype");
  if (dtype_name != NULL) {
    gf_text(c, dtype_name);
  } else {
    gf_uint(c, PW_DTYPE_BF16); /* a number where the name belongs */
  }
  gf_text(c, "shape");
  gf_head(c, 4, 1);
  gf_uint(c, 4);
  gf_text(c, "sharding");
  gf_text(c, "replicated");
  gf_text(c, "parameters");
  gf_head(c, 4, 1);
  gf_uint(c, 0);
  gf_text(c, "nodes");
  gf_head(c, 4, 0);
  gf_text(c, "outputs");
  gf_head(c, 4, 1);
  gf_uint(c, 0);
}

Test(graph_format, every_dtype_is_accepted_by_either_name_and_unknown_ones_are_named) {
  gf_cbor_t c;
  for (int d = 1; d < PW_DTYPE_COUNT; ++d) {
    const char* names[2] = {pw_dtype_name((pw_dtype_t)d), pw_dtype_numpy_name((pw_dtype_t)d)};
    for (int k = 0; k < 2; ++k) {
      params_only_graph(&c, names[k]);
      OK(pw_graph_format_check(c.data, c.size, sys(), NULL));
      /* The JSON view shows the short name whichever was written. */
      char* text = NULL;
      size_t text_size = 0;
      OK(pw_graph_format_dump_json(c.data, c.size, sys(), &text, &text_size));
      char want[32];
      snprintf(want, sizeof(want), "%s[4] replicated", pw_dtype_name((pw_dtype_t)d));
      cr_assert(strstr(text, want) != NULL, "JSON lacks %s:\n%s", want, text);
      pw_allocator_free(sys(), text, text_size);
    }
  }
  static const char* bad[] = {"f128", "invalid", "BF16", "float8_e4m3", "c128", ""};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    params_only_graph(&c, bad[i]);
    char want[64];
    snprintf(want, sizeof(want), "buffers[0].dtype: unknown dtype \"%s\"", bad[i]);
    if (bad[i][0] == '\0') snprintf(want, sizeof(want), "buffers[0].dtype");
    FAILS(pw_graph_format_check(c.data, c.size, sys(), NULL), PW_STATUS_INVALID_ARGUMENT,
          want);
  }
  params_only_graph(&c, NULL);
  FAILS(pw_graph_format_check(c.data, c.size, sys(), NULL), PW_STATUS_INVALID_ARGUMENT,
        "buffers[0].dtype: expected a text string, found an unsigned integer");
}
