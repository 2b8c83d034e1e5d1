/* Internal: a graph file as data (the "document"), between the CBOR bytes
 * and a client's graph. No runtime objects: the CLI, the fuzz target and
 * pw_graph_format_* work on documents alone.
 *
 * Strings and programs point into the bytes the document was decoded from
 * (or, when encoding a graph, into the graph's own storage): a document is
 * valid while those live. Arrays are allocated from |allocator| at their
 * exact counts; pw__gdoc_free releases them.
 *
 * Memory bound (decoding): every array is allocated only after its count
 * was checked against the bytes left divided by the smallest encoding of
 * one element, so each array costs at most (element struct size / smallest
 * element encoding) times the bytes it came from; docs/formats.md states
 * the resulting bound and tests/graph_format checks it. */
#ifndef PW_GRAPH_FORMAT_DOC_H_
#define PW_GRAPH_FORMAT_DOC_H_

#include "base/hash.h"
#include "cborio/cbor_io.h"
#include "pathways/backend.h"
#include "pathways/graph_format.h"
#include "pathways/types.h"

/* Longest node name (bytes, without NUL) and compile options text. */
#define PW_GDOC_NAME_MAX 63u
#define PW_GDOC_OPTIONS_MAX 1024u
/* At most this many virtual slices (a client binds each physical slice
 * once; runtimes have at most 4096). */
#define PW_GDOC_VSLICES_MAX 4096u

typedef struct pw_gdoc_exe_t {
  bool by_hash;
  pw_graph_hash_t hash;           /* by_hash */
  uint32_t vslice;                /* inline: compile on this vslice */
  const uint8_t* program;         /* inline */
  size_t program_size;
  const char* options;            /* inline; not NUL-terminated */
  size_t options_size;
} pw_gdoc_exe_t;

typedef struct pw_gdoc_buffer_t {
  uint32_t vslice;
  pw_array_spec_t spec;
  size_t sharding_at;             /* decoding: where its "sharding" value starts */
} pw_gdoc_buffer_t;

/* A compute node, a transfer node (no executable: one input moved onto
 * the node's vslice; its output buffer's sharding is the destination's),
 * or a host node (|host| names its task: version 2). */
typedef struct pw_gdoc_node_t {
  const char* name;               /* not NUL-terminated */
  size_t name_size;
  const char* host;               /* host node: its task's name; else NULL */
  size_t host_size;
  bool transfer;
  uint32_t executable;            /* compute */
  uint32_t vslice;
  uint32_t input_count;
  uint32_t output_count;
  /* Buffer ids, input_count and output_count of them: each its own
   * allocation from the doc's allocator (NULL for none; pw__gdoc_free
   * frees them), at most PW_EXECUTABLE_MAX_PARAMS. */
  uint32_t* inputs;
  uint32_t* outputs;
} pw_gdoc_node_t;

typedef struct pw_gdoc_t {
  pw_allocator_t allocator;
  uint32_t version;               /* pw__gdoc_version_needed */
  uint32_t vslice_count;
  pw_mesh_shape_t* vslices;
  uint32_t exe_count;
  pw_gdoc_exe_t* exes;
  uint32_t buffer_count;
  pw_gdoc_buffer_t* buffers;
  uint32_t param_count;
  uint32_t* params;               /* buffer ids */
  uint32_t node_count;
  pw_gdoc_node_t* nodes;
  uint32_t output_count;
  uint32_t* outputs;              /* buffer ids */
} pw_gdoc_t;

/* Allocates |node|'s input and output arrays for |inputs| and |outputs|
 * ids (setting the counts; both 0 when it fails). */
pw_status_t pw__gdoc_node_alloc(pw_gdoc_t* doc, pw_gdoc_node_t* node, uint32_t inputs,
                                uint32_t outputs);


/* Where a buffer comes from, as found by pw__gdoc_check. */
#define PW_GDOC_NO_PRODUCER UINT32_MAX

/* Zeroes |doc| and sets its allocator. */
void pw__gdoc_init(pw_gdoc_t* doc, pw_allocator_t allocator);
/* Frees the arrays (not what they point into). */
void pw__gdoc_free(pw_gdoc_t* doc);

/* Allocates the arrays for the given counts (zeroed). */
pw_status_t pw__gdoc_alloc(pw_gdoc_t* doc, uint32_t vslices, uint32_t exes,
                           uint32_t buffers, uint32_t params, uint32_t nodes,
                           uint32_t outputs);

/* Decodes |bytes| (prescan, then schema) into |doc| (initialised with
 * pw__gdoc_init). On error |doc| is freed. Errors name the path. */
pw_status_t pw__gdoc_decode(pw_gdoc_t* doc, const void* bytes, size_t size);

/* Checks references, specs against meshes, producers and cycles. Errors
 * name the path. Uses temporary memory from the document's allocator. */
pw_status_t pw__gdoc_check(const pw_gdoc_t* doc);

/* Decode + check in one, for callers that need both. */
pw_status_t pw__gdoc_load(pw_gdoc_t* doc, const void* bytes, size_t size);

/* The format version |doc| is written in: 3 when a mesh names its axes
 * or a buffer has a TILED sharding, else 2 when it has host nodes, else 1
 * (files say exactly that version). */
uint32_t pw__gdoc_version_needed(const pw_gdoc_t* doc);

/* Writes the deterministic encoding of |doc|. */
void pw__gdoc_emit(pw_cbor_writer_t* w, const pw_gdoc_t* doc);
/* Encodes into an exact-size allocation from the document's allocator. */
pw_status_t pw__gdoc_encode(const pw_gdoc_t* doc, void** out_bytes, size_t* out_size);
/* XXH3-128 of the deterministic encoding (allocates nothing). */
pw_graph_hash_t pw__gdoc_hash(const pw_gdoc_t* doc);

/* True when [s, s + n) is valid UTF-8 (no overlong forms or surrogates). */
bool pw__utf8_valid(const uint8_t* s, size_t n);

/* Converts between the public byte order and the internal hash value. */
pw_graph_hash_t pw__graph_hash_from(pw_hash128_t hash);

/* A readable JSON view, NUL-terminated, allocated from the document's
 * allocator (|*out_size| = length + 1). */
pw_status_t pw__gdoc_to_json(const pw_gdoc_t* doc, char** out_text, size_t* out_size);

#endif /* PW_GRAPH_FORMAT_DOC_H_ */
