#define _POSIX_C_SOURCE 200809L
/* A readable JSON view of a graph document, for `pathways-graph dump`.
 * For people, not machines: specs are printed as text ("f32[8] split(0
 * over all devices)"), programs as text when they are printable UTF-8 and
 * as hex otherwise, cut after PW_GDOC_JSON_PROGRAM_MAX bytes. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "graph_format/doc.h"

#define PW_GDOC_JSON_PROGRAM_MAX 4096u
#define PW_GDOC_JSON_HEX_MAX 64u

typedef struct pw_json_t {
  pw_allocator_t allocator;
  char* data;
  size_t size;
  size_t capacity;
  pw_status_t error;
} pw_json_t;

static void pw_json_put(pw_json_t* j, const char* text, size_t length) {
  if (j->error != NULL || length == 0) return;
  if (j->size + length + 1 > j->capacity) {
    size_t next = j->capacity ? j->capacity : 1024;
    while (next < j->size + length + 1) next *= 2;
    char* grown = NULL;
    j->error = pw_allocator_malloc(j->allocator, next, 1, (void**)&grown);
    if (j->error != NULL) return;
    if (j->size) memcpy(grown, j->data, j->size);
    pw_allocator_free(j->allocator, j->data, j->capacity);
    j->data = grown;
    j->capacity = next;
  }
  memcpy(j->data + j->size, text, length);
  j->size += length;
  j->data[j->size] = '\0';
}

static void pw_json_lit(pw_json_t* j, const char* text) { pw_json_put(j, text, strlen(text)); }

static void pw_json_printf(pw_json_t* j, const char* format, ...) PW_PRINTF_ATTR(2, 3);
static void pw_json_printf(pw_json_t* j, const char* format, ...) {
  char text[256];
  va_list args;
  va_start(args, format);
  int n = vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  if (n > 0) pw_json_put(j, text, (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1);
}

static void pw_json_string(pw_json_t* j, const char* text, size_t length) {
  pw_json_lit(j, "\"");
  size_t run = 0;
  for (size_t i = 0; i < length; ++i) {
    unsigned char c = (unsigned char)text[i];
    if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7F) continue;
    pw_json_put(j, text + run, i - run);
    run = i + 1;
    if (c == '"') pw_json_lit(j, "\\\"");
    else if (c == '\\') pw_json_lit(j, "\\\\");
    else if (c == '\n') pw_json_lit(j, "\\n");
    else if (c == '\t') pw_json_lit(j, "\\t");
    else if (c == '\r') pw_json_lit(j, "\\r");
    else pw_json_printf(j, "\\u%04x", c);
  }
  pw_json_put(j, text + run, length - run);
  pw_json_lit(j, "\"");
}

static void pw_json_refs(pw_json_t* j, const uint32_t* refs, uint32_t count) {
  pw_json_lit(j, "[");
  for (uint32_t i = 0; i < count; ++i) pw_json_printf(j, "%s%u", i ? ", " : "", refs[i]);
  pw_json_lit(j, "]");
}

/* Printable: UTF-8 (the decoder's rule is not applied to programs, so
 * check the bytes here) without control characters other than \n \t \r. */
static bool pw_json_printable(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] >= 0x80) return false; /* keep it simple: ASCII only */
    if (p[i] < 0x20 && p[i] != '\n' && p[i] != '\t' && p[i] != '\r') return false;
    if (p[i] == 0x7F) return false;
  }
  return true;
}

static void pw_json_exe(pw_json_t* j, const pw_gdoc_exe_t* e) {
  if (e->by_hash) {
    char hex[33];
    pw_graph_hash_format(&e->hash, hex);
    pw_json_printf(j, "{\"hash\": \"%s\"}", hex);
    return;
  }
  pw_json_printf(j, "{\"vslice\": %u, \"options\": ", e->vslice);
  pw_json_string(j, e->options ? e->options : "", e->options ? e->options_size : 0);
  pw_json_printf(j, ", \"program_bytes\": %zu, ", e->program_size);
  if (pw_json_printable(e->program, e->program_size)) {
    size_t shown = e->program_size < PW_GDOC_JSON_PROGRAM_MAX ? e->program_size
                                                              : PW_GDOC_JSON_PROGRAM_MAX;
    pw_json_lit(j, "\"program\": ");
    pw_json_string(j, (const char*)e->program, shown);
  } else {
    size_t shown = e->program_size < PW_GDOC_JSON_HEX_MAX ? e->program_size : PW_GDOC_JSON_HEX_MAX;
    pw_json_lit(j, "\"program_hex\": \"");
    for (size_t i = 0; i < shown; ++i) pw_json_printf(j, "%02x", e->program[i]);
    pw_json_lit(j, "\"");
  }
  if (e->program_size > (pw_json_printable(e->program, e->program_size) ? PW_GDOC_JSON_PROGRAM_MAX
                                                                        : PW_GDOC_JSON_HEX_MAX)) {
    pw_json_lit(j, ", \"program_cut\": true");
  }
  pw_json_lit(j, "}");
}

static void pw_json_doc(pw_json_t* j, const pw_gdoc_t* doc) {
  char hex[33];
  pw_graph_hash_t hash = pw__gdoc_hash(doc);
  pw_graph_hash_format(&hash, hex);
  pw_json_printf(j, "{\n  \"v\": %u,\n  \"hash\": \"%s\",\n  \"vslices\": [", doc->version,
                 hex);
  for (uint32_t i = 0; i < doc->vslice_count; ++i) {
    char mesh[128];
    pw_mesh_shape_format(&doc->vslices[i], mesh, sizeof(mesh));
    pw_json_printf(j, "%s\"%s\"", i ? ", " : "", mesh);
  }
  pw_json_lit(j, "],\n  \"executables\": [");
  for (uint32_t i = 0; i < doc->exe_count; ++i) {
    pw_json_lit(j, i ? ",\n    " : "\n    ");
    pw_json_exe(j, &doc->exes[i]);
  }
  pw_json_lit(j, doc->exe_count ? "\n  ],\n  \"buffers\": [" : "],\n  \"buffers\": [");
  for (uint32_t i = 0; i < doc->buffer_count; ++i) {
    const pw_gdoc_buffer_t* b = &doc->buffers[i];
    char spec[200], sharding[200];
    pw_array_spec_format(&b->spec, spec, sizeof(spec));
    /* The sharding again with the mesh's axis names ("P(data, None)"). */
    pw_sharding_format_named(&b->spec.sharding,
                             b->vslice < doc->vslice_count ? &doc->vslices[b->vslice] : NULL,
                             sharding, sizeof(sharding));
    pw_json_printf(j, "%s{\"id\": %u, \"vslice\": %u, \"spec\": \"%s\", \"sharding\": \"%s\"}",
                   i ? ",\n    " : "\n    ", i, b->vslice, spec, sharding);
  }
  pw_json_lit(j, doc->buffer_count ? "\n  ],\n  \"parameters\": " : "],\n  \"parameters\": ");
  pw_json_refs(j, doc->params, doc->param_count);
  pw_json_lit(j, ",\n  \"nodes\": [");
  for (uint32_t i = 0; i < doc->node_count; ++i) {
    const pw_gdoc_node_t* n = &doc->nodes[i];
    pw_json_printf(j, "%s{\"id\": %u, \"name\": ", i ? ",\n    " : "\n    ", i);
    pw_json_string(j, n->name, n->name_size);
    if (n->transfer) {
      pw_json_printf(j, ", \"transfer\": true, \"vslice\": %u, \"inputs\": ", n->vslice);
    } else if (n->host != NULL) {
      pw_json_lit(j, ", \"host\": ");
      pw_json_string(j, n->host, n->host_size);
      pw_json_printf(j, ", \"vslice\": %u, \"inputs\": ", n->vslice);
    } else {
      pw_json_printf(j, ", \"executable\": %u, \"vslice\": %u, \"inputs\": ", n->executable,
                     n->vslice);
    }
    pw_json_refs(j, n->inputs, n->input_count);
    pw_json_lit(j, ", \"outputs\": ");
    pw_json_refs(j, n->outputs, n->output_count);
    pw_json_lit(j, "}");
  }
  pw_json_lit(j, doc->node_count ? "\n  ],\n  \"outputs\": " : "],\n  \"outputs\": ");
  pw_json_refs(j, doc->outputs, doc->output_count);
  pw_json_lit(j, "\n}\n");
}

pw_status_t pw__gdoc_to_json(const pw_gdoc_t* doc, char** out_text, size_t* out_size) {
  *out_text = NULL;
  *out_size = 0;
  pw_json_t j;
  memset(&j, 0, sizeof(j));
  j.allocator = doc->allocator;
  pw_json_doc(&j, doc);
  char* exact = NULL;
  if (j.error == NULL) j.error = pw_allocator_malloc(j.allocator, j.size + 1, 1, (void**)&exact);
  if (j.error == NULL) {
    memcpy(exact, j.data, j.size + 1);
    *out_text = exact;
    *out_size = j.size + 1;
  }
  pw_allocator_free(j.allocator, j.data, j.capacity);
  return j.error;
}
