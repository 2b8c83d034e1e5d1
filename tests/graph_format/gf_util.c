#include "graph_format/gf_util.h"

#include <stdio.h>
#include <stdlib.h>

uint8_t* gf_read_corpus(const char* name, size_t* out_size) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", PW_CORPUS_DIR, name);
  FILE* f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t* data = malloc((size_t)size + 1);
  cr_assert_eq(fread(data, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  *out_size = (size_t)size;
  return data;
}

void gf_raw(gf_cbor_t* c, const void* bytes, size_t size) {
  cr_assert(c->size + size <= sizeof(c->data), "test CBOR buffer overflow");
  memcpy(c->data + c->size, bytes, size);
  c->size += size;
}

void gf_head(gf_cbor_t* c, int major, uint64_t value) {
  uint8_t h[9];
  size_t n;
  uint8_t m = (uint8_t)(major << 5);
  if (value < 24) {
    h[0] = m | (uint8_t)value;
    n = 1;
  } else if (value < 0x100) {
    h[0] = m | 24;
    h[1] = (uint8_t)value;
    n = 2;
  } else if (value < 0x10000) {
    h[0] = m | 25;
    h[1] = (uint8_t)(value >> 8);
    h[2] = (uint8_t)value;
    n = 3;
  } else if (value < 0x100000000ull) {
    h[0] = m | 26;
    for (int i = 0; i < 4; ++i) h[1 + i] = (uint8_t)(value >> (24 - 8 * i));
    n = 5;
  } else {
    h[0] = m | 27;
    for (int i = 0; i < 8; ++i) h[1 + i] = (uint8_t)(value >> (56 - 8 * i));
    n = 9;
  }
  gf_raw(c, h, n);
}

void gf_uint(gf_cbor_t* c, uint64_t value) { gf_head(c, 0, value); }

void gf_text(gf_cbor_t* c, const char* text) {
  gf_head(c, 3, strlen(text));
  gf_raw(c, text, strlen(text));
}

void gf_bytes(gf_cbor_t* c, const void* bytes, size_t size) {
  gf_head(c, 2, size);
  gf_raw(c, bytes, size);
}

static void gf_buffer(gf_cbor_t* c, int64_t dim) {
  gf_head(c, 5, 4);
  gf_text(c, "dtype");
  gf_text(c, "f32");
  gf_text(c, "shape");
  gf_head(c, 4, 1);
  gf_uint(c, (uint64_t)dim);
  gf_text(c, "vslice");
  gf_uint(c, 0);
  gf_text(c, "sharding");
  gf_head(c, 5, 2);
  gf_text(c, "split");
  gf_uint(c, 0);
  gf_text(c, "mesh_axis");
  gf_text(c, "all");
}

void gf_one_node_graph(gf_cbor_t* c, uint32_t mesh_rank, const uint32_t* mesh,
                       const char* program, int64_t param_dim, int64_t out_dim) {
  c->size = 0;
  gf_head(c, 5, 7);
  gf_text(c, "v");
  gf_uint(c, 1);
  gf_text(c, "nodes");
  gf_head(c, 4, 1);
  gf_head(c, 5, 5);
  gf_text(c, "name");
  gf_text(c, "c");
  gf_text(c, "inputs");
  gf_head(c, 4, 1);
  gf_uint(c, 0);
  gf_text(c, "vslice");
  gf_uint(c, 0);
  gf_text(c, "outputs");
  gf_head(c, 4, 1);
  gf_uint(c, 1);
  gf_text(c, "executable");
  gf_uint(c, 0);
  gf_text(c, "buffers");
  gf_head(c, 4, 2);
  gf_buffer(c, param_dim);
  gf_buffer(c, out_dim);
  gf_text(c, "outputs");
  gf_head(c, 4, 1);
  gf_uint(c, 1);
  gf_text(c, "vslices");
  gf_head(c, 4, 1);
  gf_head(c, 4, mesh_rank);
  for (uint32_t i = 0; i < mesh_rank; ++i) gf_uint(c, mesh[i]);
  gf_text(c, "parameters");
  gf_head(c, 4, 1);
  gf_uint(c, 0);
  gf_text(c, "executables");
  gf_head(c, 4, 1);
  gf_head(c, 5, 3);
  gf_text(c, "vslice");
  gf_uint(c, 0);
  gf_text(c, "options");
  gf_text(c, "");
  gf_text(c, "program");
  gf_bytes(c, program, strlen(program));
}
