/* libpathways: graphs as bytes (CBOR, format versions 1 to 3).
 *
 * Runtimes hand programs over as bytes. A graph file is one CBOR map
 * (docs/formats.md has the full schema):
 *
 *   {"v": 1,
 *    "vslices":     [[2, 4], ...],          meshes the graph runs on
 *                   (version 3: [["data", 2], ["model", 4]], axes named)
 *    "executables": [{"vslice": 0, "program": h'..', "options": ""}
 *                    or {"hash": h'<16 bytes>'}, ...],
 *    "buffers":     [{"vslice": 0, "dtype": "f32", "shape": [8],
 *                     "sharding": "replicated" or
 *                                 {"split": 0, "mesh_axis": 1 or "all"} or
 *                                 (version 3, a PartitionSpec: axes by name
 *                                 from the buffer's vslice, or by index)
 *                                 {"spec": [["data"], [], ["x", "y"]],
 *                                  "unreduced": ["model"]}}, ...],
 *    "parameters":  [buffer, ...],
 *    "nodes":       [{"name": "mm", "executable": 0, "vslice": 0,
 *                     "inputs": [buffer, ...], "outputs": [buffer, ...]},
 *                    {"name": "t", "vslice": 1, "inputs": [b], "outputs": [b2]}
 *                    (no "executable": a transfer node),
 *                    {"name": "save", "host": "snapshot", "vslice": 0,
 *                     "inputs": [...], "outputs": [...]}
 *                    (version 2: a host node running the task the decoding
 *                    client registered as "snapshot"), ...],
 *    "outputs":     [buffer, ...]}
 *
 * Buffers are the edges: a parameter or a node output. The encoder writes
 * definite lengths and the deterministic encoding of RFC 8949 section 4.2
 * (shortest heads, map keys sorted), so encode -> decode -> encode gives
 * the same bytes.
 *
 * Decoding is strict and never trusts the input: an unknown version or
 * key, a wrong type, an indefinite length, a count larger than the bytes
 * left, nesting deeper than PW_GRAPH_FORMAT_MAX_DEPTH, trailing bytes, a
 * dangling reference, a buffer produced twice or never, or a cycle is
 * INVALID_ARGUMENT with a message giving the path:
 *   "nodes[3].inputs[1]: refers to buffer 9, which does not exist (7 buffers)"
 * Memory used while decoding is bounded by a small multiple of the input
 * size, and pw_graph_decode's (lowering included) by that plus a fixed
 * amount per pair of source block and destination device of each
 * transfer node, whatever the arrays' sizes (docs/formats.md gives the
 * bounds the tests check). Arrays whose byte size exceeds
 * PW_ARRAY_MAX_BYTES are rejected.
 *
 * The canonical hash of a graph is XXH3-128 over its deterministic
 * encoding: equal for equal graphs whatever key order or integer widths
 * the producer used.
 */
#ifndef PATHWAYS_GRAPH_FORMAT_H_
#define PATHWAYS_GRAPH_FORMAT_H_

#include "pathways/allocator.h"
#include "pathways/executable.h"
#include "pathways/graph.h"
#include "pathways/runtime.h"

PW_EXTERN_C_BEGIN

/* The newest format version read and written: 2 adds host nodes, 3 named
 * mesh axes and tiled shardings. A graph is written in the lowest version
 * that can say it: version 1 (byte for byte what earlier releases wrote)
 * without host nodes, names or tiled shardings; 2 with host nodes; 3 with
 * a named mesh or a tiled sharding. All three are read. */
#define PW_GRAPH_FORMAT_VERSION 3u
/* Deepest nesting of arrays and maps a graph file may use. */
#define PW_GRAPH_FORMAT_MAX_DEPTH 8u

/* A 128-bit content hash: XXH3-128, high 64 bits first, each big-endian
 * (the order of its 32-digit hex form). */
typedef struct pw_graph_hash_t {
  uint8_t bytes[16];
} pw_graph_hash_t;

/* Writes the 32 lowercase hex digits of |hash| and a NUL into |out|. */
PW_API void pw_graph_hash_format(const pw_graph_hash_t* hash, char out[33]);

/* What a graph file holds, from pw_graph_format_check (the caller sets
 * struct_size). */
typedef struct pw_graph_format_info_t {
  size_t struct_size;     /* set by the caller: sizeof(pw_graph_format_info_t) */
  uint32_t vslices;
  uint32_t executables;
  uint32_t buffers;
  uint32_t parameters;
  uint32_t nodes;
  uint32_t outputs;
  pw_graph_hash_t hash;   /* canonical hash */
  /* -- v2 fields start here -- */
  uint32_t version;          /* the file's format version (1 to 3) */
  uint32_t named_vslices;    /* vslices whose mesh names its axes */
  uint32_t tiled_buffers;    /* buffers with a TILED sharding */
  uint32_t unreduced_buffers; /* of those, the ones with unreduced axes */
} pw_graph_format_info_t;

#define PW_GRAPH_FORMAT_INFO_SIZE_V1 PW_STRUCT_SIZE(pw_graph_format_info_t, hash)
#define PW_GRAPH_FORMAT_INFO_SIZE_V2 PW_STRUCT_SIZE(pw_graph_format_info_t, unreduced_buffers)

/* ---- files, without a runtime (thread-safe, no shared state) ------------ */

/* Decodes and checks |bytes| as a graph file: syntax, schema, references,
 * specs against their meshes, one producer per buffer, no cycle. Does not
 * compile programs, so executable signatures are checked only by
 * pw_graph_decode. |out_info| may be NULL. |allocator| holds the decoder's
 * temporary memory (zero = system). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_format_check(
    const void* bytes, size_t size, pw_allocator_t allocator,
    pw_graph_format_info_t* out_info);

/* Checks |bytes| as pw_graph_format_check does and writes the
 * deterministic encoding of the same graph into |*out_bytes| (allocated
 * from |allocator|, |*out_size| bytes; free with the same allocator). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_format_canonicalize(
    const void* bytes, size_t size, pw_allocator_t allocator,
    void** out_bytes, size_t* out_size);

/* Checks |bytes| and writes a readable JSON view (for humans: programs
 * shown as text when printable, else as hex, long ones cut) into
 * |*out_text|, NUL-terminated, allocated from |allocator| with
 * |*out_size| = its length + 1 bytes. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_format_dump_json(
    const void* bytes, size_t size, pw_allocator_t allocator,
    char** out_text, size_t* out_size);

/* ---- graphs of a client --------------------------------------------------- */

typedef struct pw_graph_encode_options_t {
  size_t struct_size;  /* sizeof(pw_graph_encode_options_t) */
  /* The graph's virtual slices in the order to number them (the decoder is
   * handed them in the same order); every one the graph uses must be
   * listed. NULL: numbered by first use, in node order. */
  const pw_vslice_t* vslices;
  uint32_t vslice_count;
  /* Write every executable by hash (pw_graph_executable_hash) rather than
   * inline; executables loaded from bytes are always written by hash,
   * compiled ones inline with their program and options. */
  bool executables_by_hash;
} pw_graph_encode_options_t;

#define PW_GRAPH_ENCODE_OPTIONS_SIZE_V1 \
  PW_STRUCT_SIZE(pw_graph_encode_options_t, executables_by_hash)

/* Encodes |graph| (parameter, compute, transfer and host nodes, the last
 * only with tasks added by name: pw_graph_add_host_by_name; it need not be
 * finalized, but must be valid as a file: no dangling or cyclic inputs)
 * into |*out_bytes|, allocated from |allocator| (zero = system; free with
 * the same allocator and |*out_size|). Buffers are numbered parameters
 * first, then node outputs in node order; nodes are the compute and
 * transfer nodes in node order. Thread-safe; the graph is locked while it
 * is read. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_encode(
    pw_client_t* client, pw_graph_t graph,
    const pw_graph_encode_options_t* options, pw_allocator_t allocator,
    void** out_bytes, size_t* out_size);

typedef struct pw_graph_decode_options_t {
  size_t struct_size;  /* sizeof(pw_graph_decode_options_t) */
  /* vslices[i] binds the file's vslices[i]; the meshes must be equal. */
  const pw_vslice_t* vslices;
  uint32_t vslice_count;
  /* Candidates for executables written by hash (others are ignored). */
  const pw_executable_t* executables;
  uint32_t executable_count;
} pw_graph_decode_options_t;

#define PW_GRAPH_DECODE_OPTIONS_SIZE_V1 \
  PW_STRUCT_SIZE(pw_graph_decode_options_t, executable_count)

/* Decodes |bytes| into a new, finalized graph of |client|: checks the file
 * (as pw_graph_format_check), binds its virtual slices to |options|,
 * compiles inline programs (through the runtime's compile cache if it has
 * one), resolves executables by hash, checks every node against its
 * executable's signature (input count, specs, output buffers, slices) and
 * lowers the graph. Errors name the path ("nodes[2].inputs[0]: ...").
 *
 * Decoding identical bytes (same canonical hash) with the same bindings
 * while a handle to the graph decoded before is live returns a new handle
 * to that graph: no compile, validation or lowering. The memo holds no
 * reference, so it never keeps a released graph, executable or virtual
 * slice alive.
 *
 * |bytes| are not retained. On failure no handle was created. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_decode(
    pw_client_t* client, const void* bytes, size_t size,
    const pw_graph_decode_options_t* options, pw_graph_t* out_graph);

/* The content hash by which graph files name |executable|: XXH3-128 of its
 * compiled bytes (pw_executable_bytes). */
PW_API PW_MUST_USE_RESULT pw_status_t pw_graph_executable_hash(
    pw_client_t* client, pw_executable_t executable, pw_graph_hash_t* out_hash);

PW_EXTERN_C_END

#endif /* PATHWAYS_GRAPH_FORMAT_H_ */
