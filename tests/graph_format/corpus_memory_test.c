/* Decoding every corpus file into a client's graph (binding, compiling
 * and lowering included) stays inside the documented memory bound
 * (docs/formats.md, "Memory bound"): 16 x the input size + 256 KiB, plus
 * 128 bytes per pair of source block and destination device of each
 * transfer node. Memory is counted by the runtime's allocator, which the
 * backend, the decoder and the plan all use. */
#include <dirent.h>
#include <stdlib.h>

#include "graph_format/doc.h"
#include "graph_format/gf_util.h"
#include "pathways/graph_format.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(graph_corpus_memory, .fini = pw_test_check_leaks);

/* Source blocks of buffer |b| of |doc|: the parts of its split axes. */
static uint64_t doc_blocks(const pw_gdoc_t* doc, uint32_t b) {
  const pw_gdoc_buffer_t* buffer = &doc->buffers[b];
  return pw_sharding_block_count(&buffer->spec.sharding, &buffer->spec.shape,
                                 &doc->vslices[buffer->vslice]);
}

/* The bound for a file of |size| bytes whose (checked) document is |doc|
 * (NULL when it does not pass the check). */
static size_t memory_bound(const pw_gdoc_t* doc, size_t size) {
  uint64_t pairs = 0;
  for (uint32_t i = 0; doc != NULL && i < doc->node_count; ++i) {
    const pw_gdoc_node_t* n = &doc->nodes[i];
    if (!n->transfer) continue;
    pairs += doc_blocks(doc, n->inputs[0]) * pw_mesh_shape_device_count(&doc->vslices[n->vslice]);
  }
  return 16 * size + (256u << 10) + 128 * (size_t)pairs;
}

static pw_status_t noop_task(void* user, const pw_host_task_context_t* context) {
  (void)user;
  (void)context;
  return NULL;
}

Test(graph_corpus_memory, decoding_and_lowering_every_corpus_file_stays_in_the_bound) {
  pw_test_allocator_t counter;
  pw_test_allocator_init(&counter);
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 4, "2x4", pw_test_allocator(&counter)));
  DIR* dir = opendir(PW_CORPUS_DIR);
  cr_assert_not_null(dir);
  struct dirent* entry;
  int files = 0, decoded = 0;
  while ((entry = readdir(dir)) != NULL) {
    size_t len = strlen(entry->d_name);
    if (len < 5 || strcmp(entry->d_name + len - 5, ".cbor") != 0) continue;
    size_t size = 0;
    uint8_t* data = gf_read_corpus(entry->d_name, &size);
    /* What the file asks for: its meshes, and its transfers' shard pairs. */
    pw_gdoc_t doc;
    pw__gdoc_init(&doc, pw_allocator_system());
    pw_status_t s = pw__gdoc_load(&doc, data, size);
    bool checked = s == NULL;
    pw_status_free(s);
    size_t bound = memory_bound(checked ? &doc : NULL, size);
    /* A client of its own, with the file's vslices where the runtime has
     * them (four 8-device slices). */
    pw_client_t* client = NULL;
    OK(pw_client_create(f.runtime, NULL, &client));
    pw_host_task_t snapshot = {sizeof(snapshot), noop_task, NULL, NULL};
    OK(pw_client_register_host_task(client, "snapshot", &snapshot)); /* the corpus's host nodes */
    pw_vslice_t vslices[4];
    uint32_t bound_count = 0;
    for (uint32_t i = 0; checked && i < doc.vslice_count && i < 4; ++i) {
      s = pw_vslice_create(client, &doc.vslices[i], PW_VSLICE_DEFAULT, &vslices[i]);
      if (s != NULL) {
        pw_status_free(s);
        break;
      }
      bound_count = i + 1;
    }
    pw_graph_decode_options_t o = {sizeof(o), vslices, bound_count, NULL, 0};
    size_t before = atomic_load(&counter.live_bytes);
    atomic_store(&counter.peak_bytes, before);
    pw_graph_t g = {0};
    s = pw_graph_decode(client, data, size, &o, &g);
    size_t peak = atomic_load(&counter.peak_bytes) - before;
    cr_log_info("%s: %zu bytes, %s, peak %zu (bound %zu)", entry->d_name, size,
                s == NULL ? "decoded" : "rejected", peak, bound);
    cr_assert_leq(peak, bound, "%s (%zu bytes, %s) peaked at %zu bytes; the bound is %zu",
                  entry->d_name, size, s == NULL ? "decoded" : pw_status_message(s), peak, bound);
    if (s == NULL) {
      ++decoded;
      OK(pw_graph_release(client, g));
    }
    /* Decoding what the file check accepts fails only for what needs a
     * runtime (a hash no executable has). */
    if (checked && bound_count == doc.vslice_count && s != NULL) {
      cr_assert(strstr(pw_status_message(s), "executables[") != NULL, "%s: %s", entry->d_name,
                pw_status_message(s));
    }
    pw_status_free(s);
    pw_client_destroy(client);
    if (checked) pw__gdoc_free(&doc);
    free(data);
    ++files;
  }
  closedir(dir);
  cr_assert_geq(files, 35);
  cr_assert_geq(decoded, 12);
  pw_fixture_deinit(&f);
}
