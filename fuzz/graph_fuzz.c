/* libFuzzer target: graph files (pw_graph_format_*), no runtime.
 *
 * Properties checked on every input, beyond "no crash, no leak, no
 * undefined behaviour" (the sanitizers' part):
 *   - a rejected input gets INVALID_ARGUMENT (or RESOURCE_EXHAUSTED) with
 *     a non-empty message;
 *   - an accepted input canonicalizes to bytes that are accepted, have the
 *     same canonical hash and counts, and canonicalize to themselves
 *     (encode -> decode -> encode is the identity);
 *   - the JSON view of an accepted input can be made.
 * Memory goes through a counting allocator whose peak is checked against
 * the documented bound (8 x input + 512 KiB).
 *
 * Built as a libFuzzer binary with PW_FUZZ=ON under clang, and always as
 * pw_fuzz_graph_replay (with replay_main.c), which ctest runs over the
 * seed corpus in fuzz/corpus/graph. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pathways/graph_format.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

typedef struct pw_fuzz_alloc_t {
  size_t live;
  size_t peak;
} pw_fuzz_alloc_t;

static void* pw_fuzz_alloc(void* self, size_t size, size_t alignment) {
  pw_fuzz_alloc_t* t = self;
  size_t rounded = (size + alignment - 1) / alignment * alignment;
  void* p = aligned_alloc(alignment, rounded);
  if (p != NULL) {
    t->live += size;
    if (t->live > t->peak) t->peak = t->live;
  }
  return p;
}

static void pw_fuzz_free(void* self, void* ptr, size_t size) {
  pw_fuzz_alloc_t* t = self;
  t->live -= size;
  free(ptr);
}

static void pw_fuzz_fail(const char* what, pw_status_t status) {
  fprintf(stderr, "graph fuzz: %s: %s\n", what, pw_status_message(status));
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pw_fuzz_alloc_t counter = {0, 0};
  pw_allocator_t a = {&counter, pw_fuzz_alloc, pw_fuzz_free};
  pw_graph_format_info_t info = {.struct_size = sizeof(pw_graph_format_info_t)};
  pw_status_t status = pw_graph_format_check(data, size, a, &info);
  if (counter.peak > 8 * size + (512u << 10)) {
    fprintf(stderr, "graph fuzz: decoding %zu bytes peaked at %zu bytes\n", size, counter.peak);
    abort();
  }
  if (status != NULL) {
    pw_status_code_t code = pw_status_code(status);
    if ((code != PW_STATUS_INVALID_ARGUMENT && code != PW_STATUS_RESOURCE_EXHAUSTED) ||
        pw_status_message(status)[0] == '\0') {
      pw_fuzz_fail("unexpected rejection", status);
    }
    pw_status_free(status);
    if (counter.live != 0) abort();
    return 0;
  }
  void* canonical = NULL;
  size_t canonical_size = 0;
  status = pw_graph_format_canonicalize(data, size, a, &canonical, &canonical_size);
  if (status != NULL) pw_fuzz_fail("canonicalize of an accepted input", status);
  pw_graph_format_info_t again = {.struct_size = sizeof(pw_graph_format_info_t)};
  status = pw_graph_format_check(canonical, canonical_size, a, &again);
  if (status != NULL) pw_fuzz_fail("check of the canonical form", status);
  if (memcmp(&info, &again, sizeof(info)) != 0) {
    fprintf(stderr, "graph fuzz: canonical form differs in counts or hash\n");
    abort();
  }
  void* twice = NULL;
  size_t twice_size = 0;
  status = pw_graph_format_canonicalize(canonical, canonical_size, a, &twice, &twice_size);
  if (status != NULL) pw_fuzz_fail("canonicalize of the canonical form", status);
  if (twice_size != canonical_size || memcmp(twice, canonical, canonical_size) != 0) {
    fprintf(stderr, "graph fuzz: canonical form is not a fixed point\n");
    abort();
  }
  char* json = NULL;
  size_t json_size = 0;
  status = pw_graph_format_dump_json(data, size, a, &json, &json_size);
  if (status != NULL) pw_fuzz_fail("JSON view of an accepted input", status);
  if (strlen(json) + 1 != json_size) abort();
  pw_allocator_free(a, json, json_size);
  pw_allocator_free(a, twice, twice_size);
  pw_allocator_free(a, canonical, canonical_size);
  if (counter.live != 0) abort();
  return 0;
}
