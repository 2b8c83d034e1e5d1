/* pathways-graph: look inside graph files (docs/formats.md).
 *
 *   pathways-graph validate FILE   exit 0, or print the decoder's message
 *                                  (with the path of the bad value) and
 *                                  exit 1
 *   pathways-graph dump FILE       a readable JSON view on stdout
 *   pathways-graph hash FILE       the canonical hash (32 hex digits)
 *
 * FILE "-" reads standard input. Exit status: 0 success, 1 the file is not
 * a valid graph, 2 usage or I/O error. Checks run without a runtime, so
 * programs are not compiled: executables' signatures are checked when a
 * runtime decodes the file (pw_graph_decode). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pathways/graph_format.h"

#define PW_TOOL_MAX_FILE ((size_t)1 << 30)

static void pw_tool_usage(FILE* out) {
  fprintf(out,
          "usage: pathways-graph validate FILE   check a graph file\n"
          "       pathways-graph dump FILE       print it as JSON\n"
          "       pathways-graph hash FILE       print its canonical hash\n"
          "FILE may be - for standard input.\n");
}

/* Reads all of |path| into a malloc'd buffer; prints why not and returns
 * NULL on failure. */
static unsigned char* pw_tool_read(const char* path, size_t* out_size) {
  FILE* f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "pathways-graph: cannot open '%s': %s\n", path, strerror(errno));
    return NULL;
  }
  size_t size = 0, capacity = 1 << 16;
  unsigned char* data = malloc(capacity);
  while (data != NULL) {
    if (size == capacity) {
      if (capacity >= PW_TOOL_MAX_FILE) {
        fprintf(stderr, "pathways-graph: '%s' is larger than %zu bytes\n", path,
                PW_TOOL_MAX_FILE);
        free(data);
        data = NULL;
        break;
      }
      unsigned char* grown = realloc(data, capacity * 2);
      if (grown == NULL) {
        free(data);
        data = NULL;
        break;
      }
      data = grown;
      capacity *= 2;
    }
    size_t n = fread(data + size, 1, capacity - size, f);
    size += n;
    if (n == 0) {
      if (ferror(f)) {
        fprintf(stderr, "pathways-graph: reading '%s' failed\n", path);
        free(data);
        data = NULL;
      }
      break;
    }
  }
  if (f != stdin) fclose(f);
  if (data == NULL) return NULL;
  *out_size = size;
  return data;
}

int main(int argc, char** argv) {
  if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
    pw_tool_usage(stdout);
    return 0;
  }
  if (argc != 3 || (strcmp(argv[1], "validate") != 0 && strcmp(argv[1], "dump") != 0 &&
                    strcmp(argv[1], "hash") != 0)) {
    pw_tool_usage(stderr);
    return 2;
  }
  const char* command = argv[1];
  const char* path = argv[2];
  size_t size = 0;
  unsigned char* data = pw_tool_read(path, &size);
  if (data == NULL) return 2;
  pw_allocator_t system = pw_allocator_system();
  pw_status_t status = NULL;
  int rc = 0;
  if (strcmp(command, "dump") == 0) {
    char* text = NULL;
    size_t text_size = 0;
    status = pw_graph_format_dump_json(data, size, system, &text, &text_size);
    if (status == NULL) {
      fputs(text, stdout);
      pw_allocator_free(system, text, text_size);
    }
  } else {
    pw_graph_format_info_t info = {.struct_size = sizeof(pw_graph_format_info_t)};
    status = pw_graph_format_check(data, size, system, &info);
    if (status == NULL && strcmp(command, "hash") == 0) {
      char hex[33];
      pw_graph_hash_format(&info.hash, hex);
      printf("%s\n", hex);
    } else if (status == NULL) {
      printf("%s: ok: %u vslices, %u executables, %u buffers, %u parameters, %u nodes, "
             "%u outputs; version %u, %u named meshes, %u tiled shardings (%u unreduced)\n",
             path, info.vslices, info.executables, info.buffers, info.parameters, info.nodes,
             info.outputs, info.version, info.named_vslices, info.tiled_buffers,
             info.unreduced_buffers);
    }
  }
  if (status != NULL) {
    fprintf(stderr, "%s: %s\n", path, pw_status_message(status));
    rc = pw_status_code(status) == PW_STATUS_INVALID_ARGUMENT ? 1 : 2;
    pw_status_free(status);
  }
  free(data);
  if (fflush(stdout) != 0) rc = 2;
  return rc;
}
