/* Helpers for the graph-format tests: status assertions (runtime/checks.h),
 * reading corpus files, and a tiny CBOR writer for hand-made (often malformed) inputs. */
#ifndef PW_TESTS_GRAPH_FORMAT_GF_UTIL_H_
#define PW_TESTS_GRAPH_FORMAT_GF_UTIL_H_

#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "pathways/pathways.h"
#include "runtime/checks.h"

/* Reads a corpus file (fuzz/corpus/graph/|name|) into malloc'd memory. */
uint8_t* gf_read_corpus(const char* name, size_t* out_size);

/* A CBOR writer into a fixed buffer (tests only). */
typedef struct gf_cbor_t {
  uint8_t data[1 << 16];
  size_t size;
} gf_cbor_t;

void gf_head(gf_cbor_t* c, int major, uint64_t value);
void gf_uint(gf_cbor_t* c, uint64_t value);
void gf_text(gf_cbor_t* c, const char* text);
void gf_bytes(gf_cbor_t* c, const void* bytes, size_t size);
void gf_raw(gf_cbor_t* c, const void* bytes, size_t size);

/* Writes the one-node graph
 *   {"v":1, "vslices":[mesh], "executables":[{inline |program|}],
 *    "buffers":[param spec, output spec], "parameters":[0],
 *    "nodes":[{"name":"c","executable":0,"vslice":0,"inputs":[0],"outputs":[1]}],
 *    "outputs":[1]}
 * with f32 shapes [|param_dim|] / [|out_dim|] split(0, all) over |mesh|
 * (rank 1 or 2 dims). */
void gf_one_node_graph(gf_cbor_t* c, uint32_t mesh_rank, const uint32_t* mesh,
                       const char* program, int64_t param_dim, int64_t out_dim);

#endif /* PW_TESTS_GRAPH_FORMAT_GF_UTIL_H_ */
