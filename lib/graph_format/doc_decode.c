#define _POSIX_C_SOURCE 200809L
/* Graph files -> documents: the schema decoder.
 *
 * Runs after pw__cbor_prescan, so every count fits the input and nothing
 * nests deeper than the format allows. Every error names the path of the
 * offending value ("nodes[3].inputs[1]", "buffers[0].sharding.spec[1][0]");
 * the top level is "graph". Map keys may come in any order (the canonical
 * order is the encoder's business); unknown and duplicate keys are
 * errors, and every key of the schema is required. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "graph_format/doc.h"

/* Smallest encodings of one element, for the count-versus-bytes check that
 * bounds memory (see doc.h). */
#define PW_GDOC_MIN_MESH 2u     /* [1] */
#define PW_GDOC_MIN_EXE 23u     /* {"hash": h'16 bytes'} */
#define PW_GDOC_MIN_BUFFER 45u  /* {"vslice":0,"dtype":"u8","shape":[],"sharding":"replicated"} */
#define PW_GDOC_MIN_NODE 35u    /* {"name":"a","vslice":0,"inputs":[0],"outputs":[1]} */
#define PW_GDOC_MIN_REF 1u

typedef struct pw_gpath_t {
  char text[160];
  size_t len;
} pw_gpath_t;

typedef struct pw_gdec_t {
  pw_cbor_reader_t r;
  pw_gpath_t path;
  pw_gdoc_t* doc;
} pw_gdec_t;

static size_t pw_gpath_push(pw_gpath_t* p, const char* format, ...) PW_PRINTF_ATTR(2, 3);
static size_t pw_gpath_push(pw_gpath_t* p, const char* format, ...) {
  size_t old = p->len;
  va_list args;
  va_start(args, format);
  int n = vsnprintf(p->text + p->len, sizeof(p->text) - p->len, format, args);
  va_end(args);
  if (n > 0) p->len = p->len + (size_t)n < sizeof(p->text) ? p->len + (size_t)n : sizeof(p->text) - 1;
  return old;
}
static size_t pw_gpath_key(pw_gpath_t* p, const char* key) {
  return pw_gpath_push(p, p->len ? ".%s" : "%s", key);
}
static size_t pw_gpath_index(pw_gpath_t* p, uint64_t index) {
  return pw_gpath_push(p, "[%" PRIu64 "]", index);
}
static void pw_gpath_pop(pw_gpath_t* p, size_t old) {
  p->len = old;
  p->text[old] = '\0';
}
static const char* pw_gpath_str(const pw_gpath_t* p) { return p->len ? p->text : "graph"; }

static pw_status_t pw_gdec_error(pw_gdec_t* d, const char* format, ...) PW_PRINTF_ATTR(2, 3);
static pw_status_t pw_gdec_error(pw_gdec_t* d, const char* format, ...) {
  char message[256];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: %s", pw_gpath_str(&d->path), message);
}

/* Reads the next item and checks its type. */
static pw_status_t pw_gdec_expect(pw_gdec_t* d, pw_cbor_type_t type, pw_cbor_item_t* item) {
  PW_RETURN_IF_ERROR_CTX(pw__cbor_next(&d->r, item), "%s", pw_gpath_str(&d->path));
  if (item->type != type) {
    return pw_gdec_error(d, "expected %s, found %s", pw__cbor_type_name(type),
                         pw__cbor_type_name(item->type));
  }
  return NULL;
}

static pw_status_t pw_gdec_uint(pw_gdec_t* d, uint64_t max, uint64_t* out) {
  pw_cbor_item_t item;
  PW_RETURN_IF_ERROR(pw_gdec_expect(d, PW_CBOR_UINT, &item));
  if (item.value > max) {
    return pw_gdec_error(d, "%" PRIu64 " is out of range (at most %" PRIu64 ")", item.value, max);
  }
  *out = item.value;
  return NULL;
}

/* A reference to another element (checked against its array later). */
static pw_status_t pw_gdec_ref(pw_gdec_t* d, uint32_t* out) {
  uint64_t v = 0;
  PW_RETURN_IF_ERROR(pw_gdec_uint(d, UINT32_MAX - 1, &v));
  *out = (uint32_t)v;
  return NULL;
}

bool pw__utf8_valid(const uint8_t* s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    size_t extra;
    uint32_t cp;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { extra = 1; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { extra = 2; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { extra = 3; cp = c & 0x07; }
    else return false;
    if (n - i <= extra) return false;
    for (size_t k = 1; k <= extra; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) ||
        (extra == 3 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

/* A text string of |min|..|max| bytes, valid UTF-8 without NUL. */
static pw_status_t pw_gdec_text(pw_gdec_t* d, size_t min, size_t max, const char** out,
                                size_t* out_size) {
  pw_cbor_item_t item;
  PW_RETURN_IF_ERROR(pw_gdec_expect(d, PW_CBOR_TEXT, &item));
  if (item.length < min) return pw_gdec_error(d, "empty text (at least %zu bytes)", min);
  if (item.length > max) {
    return pw_gdec_error(d, "text of %zu bytes (at most %zu)", item.length, max);
  }
  if (!pw__utf8_valid(item.data, item.length)) return pw_gdec_error(d, "text is not valid UTF-8");
  if (memchr(item.data, 0, item.length) != NULL) return pw_gdec_error(d, "text contains a NUL");
  *out = (const char*)item.data;
  *out_size = item.length;
  return NULL;
}

/* An array head whose count is at most |max| and fits the bytes left at
 * |min_element| bytes per element. */
static pw_status_t pw_gdec_array(pw_gdec_t* d, size_t min_element, uint64_t max,
                                 uint32_t* out_count) {
  pw_cbor_item_t item;
  PW_RETURN_IF_ERROR(pw_gdec_expect(d, PW_CBOR_ARRAY, &item));
  size_t left = d->r.size - d->r.pos;
  if (item.value > left / min_element) {
    return pw_gdec_error(d, "declares %" PRIu64 " elements, but at most %zu fit in the %zu "
                         "bytes left", item.value, left / min_element, left);
  }
  if (item.value > max) {
    return pw_gdec_error(d, "%" PRIu64 " elements (at most %" PRIu64 ")", item.value, max);
  }
  *out_count = (uint32_t)item.value;
  return NULL;
}

/* Zeroed array of |count| elements, NULL for none. */
static pw_status_t pw_gdec_alloc(pw_gdec_t* d, uint32_t count, size_t size, void** out) {
  *out = NULL;
  if (count == 0) return NULL;
  return pw_allocator_calloc_array(d->doc->allocator, count, size, 0, out);
}

typedef pw_status_t (*pw_gdec_field_fn_t)(pw_gdec_t* d, uint32_t key, void* object);

/* Reads a map whose keys are among |keys| (each at most once), calling
 * |field| for each value; returns the set of keys seen in |*out_seen|. */
static pw_status_t pw_gdec_map(pw_gdec_t* d, const char* const* keys, uint32_t key_count,
                               pw_gdec_field_fn_t field, void* object, uint32_t* out_seen) {
  pw_cbor_item_t item;
  PW_RETURN_IF_ERROR(pw_gdec_expect(d, PW_CBOR_MAP, &item));
  uint32_t seen = 0;
  for (uint64_t pair = 0; pair < item.value; ++pair) {
    pw_cbor_item_t key;
    PW_RETURN_IF_ERROR_CTX(pw__cbor_next(&d->r, &key), "%s", pw_gpath_str(&d->path));
    if (key.type != PW_CBOR_TEXT) {
      return pw_gdec_error(d, "map keys are text strings, found %s", pw__cbor_type_name(key.type));
    }
    uint32_t k = 0;
    while (k < key_count && !(strlen(keys[k]) == key.length &&
                              memcmp(keys[k], key.data, key.length) == 0)) {
      ++k;
    }
    if (k == key_count) {
      char shown[40];
      size_t n = key.length < sizeof(shown) - 1 ? key.length : sizeof(shown) - 1;
      for (size_t i = 0; i < n; ++i) {
        shown[i] = key.data[i] >= 0x20 && key.data[i] < 0x7F ? (char)key.data[i] : '?';
      }
      shown[n] = '\0';
      return pw_gdec_error(d, "unknown key \"%s%s\"", shown, key.length > n ? "..." : "");
    }
    if (seen & (1u << k)) return pw_gdec_error(d, "duplicate key \"%s\"", keys[k]);
    seen |= 1u << k;
    size_t old = pw_gpath_key(&d->path, keys[k]);
    PW_RETURN_IF_ERROR(field(d, k, object));
    pw_gpath_pop(&d->path, old);
  }
  *out_seen = seen;
  return NULL;
}

static pw_status_t pw_gdec_require(pw_gdec_t* d, const char* const* keys, uint32_t key_count,
                                   uint32_t seen, uint32_t required) {
  for (uint32_t k = 0; k < key_count; ++k) {
    if ((required & (1u << k)) && !(seen & (1u << k))) {
      return pw_gdec_error(d, "missing key \"%s\"", keys[k]);
    }
  }
  return NULL;
}

/* ---- element decoders ----------------------------------------------------- */

/* One axis of a mesh: a size, or ["name", size] (version 3). |*named| is
 * set by the first axis; the others must agree. */
static pw_status_t pw_gdec_mesh_axis(pw_gdec_t* d, pw_mesh_shape_t* mesh, uint32_t i,
                                     int* named) {
  size_t saved = d->r.pos;
  pw_cbor_item_t item;
  PW_RETURN_IF_ERROR_CTX(pw__cbor_next(&d->r, &item), "%s", pw_gpath_str(&d->path));
  int is_named = item.type == PW_CBOR_ARRAY;
  if (*named < 0) *named = is_named;
  if (*named != is_named) {
    return pw_gdec_error(d, "either every mesh axis is named ([\"data\", 2]) or none is (2)");
  }
  uint64_t v = 0;
  if (!is_named) {
    d->r.pos = saved;
    PW_RETURN_IF_ERROR(pw_gdec_uint(d, 1u << 20, &v));
    mesh->dims[i] = (uint32_t)v;
    return NULL;
  }
  if (d->doc->version < 3) {
    return pw_gdec_error(d, "mesh axis names need format version 3 (the file says %u)",
                         d->doc->version);
  }
  if (item.value != 2) {
    return pw_gdec_error(d, "a named mesh axis is [name, size], not %" PRIu64 " elements",
                         item.value);
  }
  const char* name;
  size_t size;
  size_t old = pw_gpath_index(&d->path, 0);
  PW_RETURN_IF_ERROR(pw_gdec_text(d, 1, PW_MESH_AXIS_NAME_MAX - 1, &name, &size));
  memcpy(mesh->axis_names[i], name, size);
  pw_gpath_pop(&d->path, old);
  old = pw_gpath_index(&d->path, 1);
  PW_RETURN_IF_ERROR(pw_gdec_uint(d, 1u << 20, &v));
  mesh->dims[i] = (uint32_t)v;
  pw_gpath_pop(&d->path, old);
  return NULL;
}

static pw_status_t pw_gdec_mesh(pw_gdec_t* d, pw_mesh_shape_t* mesh) {
  uint32_t rank;
  PW_RETURN_IF_ERROR(pw_gdec_array(d, 1, PW_MAX_MESH_RANK, &rank));
  if (rank == 0) return pw_gdec_error(d, "a mesh has at least one dimension");
  memset(mesh, 0, sizeof(*mesh));
  mesh->rank = rank;
  int named = -1;
  for (uint32_t i = 0; i < rank; ++i) {
    size_t old = pw_gpath_index(&d->path, i);
    PW_RETURN_IF_ERROR(pw_gdec_mesh_axis(d, mesh, i, &named));
    pw_gpath_pop(&d->path, old);
  }
  PW_RETURN_IF_ERROR_CTX(pw_mesh_shape_check(mesh), "%s", pw_gpath_str(&d->path));
  if (named == 1) {
    /* The names were copied as read; the mesh check validates them (the
     * characters, a leading digit, a name used twice). */
    char copies[PW_MAX_MESH_RANK][PW_MESH_AXIS_NAME_MAX];
    const char* names[PW_MAX_MESH_RANK];
    for (uint32_t i = 0; i < rank; ++i) {
      memcpy(copies[i], mesh->axis_names[i], PW_MESH_AXIS_NAME_MAX);
      names[i] = copies[i];
    }
    PW_RETURN_IF_ERROR_CTX(pw_mesh_shape_set_axis_names(mesh, rank, names), "%s",
                           pw_gpath_str(&d->path));
  }
  return NULL;
}

static const char* const pw_gdoc_exe_keys[] = {"hash", "vslice", "program", "options"};

static pw_status_t pw_gdec_exe_field(pw_gdec_t* d, uint32_t key, void* object) {
  pw_gdoc_exe_t* e = object;
  pw_cbor_item_t item;
  switch (key) {
    case 0:
      PW_RETURN_IF_ERROR(pw_gdec_expect(d, PW_CBOR_BYTES, &item));
      if (item.length != sizeof(e->hash.bytes)) {
        return pw_gdec_error(d, "%zu bytes (a hash has 16)", item.length);
      }
      memcpy(e->hash.bytes, item.data, sizeof(e->hash.bytes));
      e->by_hash = true;
      return NULL;
    case 1: return pw_gdec_ref(d, &e->vslice);
    case 2:
      PW_RETURN_IF_ERROR(pw_gdec_expect(d, PW_CBOR_BYTES, &item));
      if (item.length == 0) return pw_gdec_error(d, "empty program");
      e->program = item.data;
      e->program_size = item.length;
      return NULL;
    default:
      return pw_gdec_text(d, 0, PW_GDOC_OPTIONS_MAX, &e->options, &e->options_size);
  }
}

static pw_status_t pw_gdec_exe(pw_gdec_t* d, pw_gdoc_exe_t* e) {
  uint32_t seen;
  PW_RETURN_IF_ERROR(pw_gdec_map(d, pw_gdoc_exe_keys, 4, pw_gdec_exe_field, e, &seen));
  if ((seen & 1u) && (seen & ~1u)) {
    return pw_gdec_error(d, "has both \"hash\" and an inline program (\"vslice\", "
                         "\"program\", \"options\"); give one");
  }
  if (seen & 1u) return NULL;
  return pw_gdec_require(d, pw_gdoc_exe_keys, 4, seen, 0xEu);
}

static const char* const pw_gdoc_buffer_keys[] = {"vslice", "dtype", "shape", "sharding"};

static pw_status_t pw_gdec_buffer_field(pw_gdec_t* d, uint32_t key, void* object) {
  pw_gdoc_buffer_t* b = object;
  switch (key) {
    case 0: return pw_gdec_ref(d, &b->vslice);
    case 1: {
      const char* text;
      size_t size;
      PW_RETURN_IF_ERROR(pw_gdec_text(d, 1, 16, &text, &size));
      if (!pw_dtype_parse(text, size, &b->spec.dtype)) {
        return pw_gdec_error(d, "unknown dtype \"%.*s\"", (int)size, text);
      }
      return NULL;
    }
    case 2: {
      uint32_t rank;
      PW_RETURN_IF_ERROR(pw_gdec_array(d, 1, PW_MAX_RANK, &rank));
      b->spec.shape.rank = rank;
      for (uint32_t i = 0; i < rank; ++i) {
        size_t old = pw_gpath_index(&d->path, i);
        uint64_t v = 0;
        PW_RETURN_IF_ERROR(pw_gdec_uint(d, INT64_MAX, &v));
        if (v == 0) return pw_gdec_error(d, "dimensions are at least 1");
        b->spec.shape.dims[i] = (int64_t)v;
        pw_gpath_pop(&d->path, old);
      }
      return NULL;
    }
    default:
      /* Read in a second pass (pw_gdec_shardings): axis names resolve
       * against the buffer's mesh, and "vslice" and "vslices" may come later. */
      b->sharding_at = d->r.pos;
      PW_RETURN_IF_ERROR_CTX(pw__cbor_skip(&d->r), "%s", pw_gpath_str(&d->path));
      return NULL;
  }
}

static const char* const pw_gdoc_node_keys[] = {"name", "executable", "vslice", "inputs",
                                                "outputs", "host"};

/* A node's inputs or outputs: |*refs| allocated (doc allocator) with
 * |*out_count| ids; the count stays 0 until the array is allocated, so
 * pw__gdoc_free frees what was made. */
static pw_status_t pw_gdec_refs(pw_gdec_t* d, uint32_t** refs, uint32_t* out_count) {
  uint32_t count = 0;
  PW_RETURN_IF_ERROR(pw_gdec_array(d, PW_GDOC_MIN_REF, PW_EXECUTABLE_MAX_PARAMS, &count));
  PW_RETURN_IF_ERROR(pw_gdec_alloc(d, count, sizeof(uint32_t), (void**)refs));
  *out_count = count;
  for (uint32_t i = 0; i < *out_count; ++i) {
    size_t old = pw_gpath_index(&d->path, i);
    PW_RETURN_IF_ERROR(pw_gdec_ref(d, &(*refs)[i]));
    pw_gpath_pop(&d->path, old);
  }
  return NULL;
}

static pw_status_t pw_gdec_node_field(pw_gdec_t* d, uint32_t key, void* object) {
  pw_gdoc_node_t* n = object;
  switch (key) {
    case 0: return pw_gdec_text(d, 1, PW_GDOC_NAME_MAX, &n->name, &n->name_size);
    case 1: return pw_gdec_ref(d, &n->executable);
    case 2: return pw_gdec_ref(d, &n->vslice);
    case 3: return pw_gdec_refs(d, &n->inputs, &n->input_count);
    case 4: return pw_gdec_refs(d, &n->outputs, &n->output_count);
    default: {
      if (d->doc->version < 2) {
        return pw_gdec_error(d, "host nodes need format version 2 (the file says %u)",
                             d->doc->version);
      }
      PW_RETURN_IF_ERROR(pw_gdec_text(d, 1, PW_GDOC_NAME_MAX, &n->host, &n->host_size));
      for (size_t i = 0; i < n->host_size; ++i) {
        char c = n->host[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-')) {
          return pw_gdec_error(d, "a host task name is [A-Za-z0-9_.-], not \"%.*s\"",
                               (int)n->host_size, n->host);
        }
      }
      return NULL;
    }
  }
}

/* ---- shardings ------------------------------------------------------------ */

/* A sharding being decoded: the buffer's shape and mesh (NULL when its
 * vslice does not exist) and, per mesh axis, its first use. */
#define PW_GDEC_AXIS_FREE 0xFFu
#define PW_GDEC_AXIS_UNREDUCED 0xFEu

typedef struct pw_gdec_shard_t {
  pw_sharding_t s;
  const pw_shape_t* shape;
  const pw_mesh_shape_t* mesh;
  uint32_t vslice;
  uint8_t use[PW_MAX_MESH_RANK];  /* tensor dimension, or a PW_GDEC_AXIS_* */
} pw_gdec_shard_t;

static void pw_gdec_axis_text(const pw_gdec_shard_t* sh, uint32_t axis, char* out, size_t n) {
  if (sh->mesh != NULL && axis < sh->mesh->rank) {
    pw_mesh_axis_format(sh->mesh, axis, out, n);
  } else {
    snprintf(out, n, "%u", axis);
  }
}

/* One mesh axis, by name (resolved against the buffer's mesh) or by index;
 * |tensor_dim| is what uses it (a dimension, or PW_GDEC_AXIS_UNREDUCED). */
static pw_status_t pw_gdec_shard_axis(pw_gdec_t* d, pw_gdec_shard_t* sh, uint8_t tensor_dim,
                                      uint32_t* out_axis) {
  size_t saved = d->r.pos;
  pw_cbor_item_t item;
  PW_RETURN_IF_ERROR_CTX(pw__cbor_next(&d->r, &item), "%s", pw_gpath_str(&d->path));
  uint32_t axis = 0;
  if (item.type == PW_CBOR_TEXT) {
    d->r.pos = saved;
    const char* name;
    size_t size;
    PW_RETURN_IF_ERROR(pw_gdec_text(d, 1, 64, &name, &size));
    if (sh->mesh == NULL) {
      return pw_gdec_error(d, "mesh axis '%.*s' names an axis of vslice %u, which does not "
                           "exist (%u vslices)", (int)size, name, sh->vslice,
                           d->doc->vslice_count);
    }
    pw_status_t found = pw_mesh_axis_find(sh->mesh, name, size, &axis);
    if (found != NULL) {
      pw_status_t error = pw_gdec_error(d, "%s", pw_status_message(found));
      pw_status_free(found);
      return error;
    }
  } else if (item.type == PW_CBOR_UINT) {
    uint32_t rank = sh->mesh != NULL ? sh->mesh->rank : PW_MAX_MESH_RANK;
    if (item.value >= rank) {
      return pw_gdec_error(d, "mesh axis %" PRIu64 " is out of range (the mesh has %u axes)",
                           item.value, rank);
    }
    axis = (uint32_t)item.value;
  } else {
    return pw_gdec_error(d, "expected a mesh axis name or number, found %s",
                         pw__cbor_type_name(item.type));
  }
  uint8_t first = sh->use[axis];
  if (first != PW_GDEC_AXIS_FREE) {
    char text[PW_MESH_AXIS_NAME_MAX + 8];
    pw_gdec_axis_text(sh, axis, text, sizeof(text));
    if (first == PW_GDEC_AXIS_UNREDUCED || tensor_dim == PW_GDEC_AXIS_UNREDUCED) {
      uint32_t dim = first == PW_GDEC_AXIS_UNREDUCED ? tensor_dim : first;
      if (first == tensor_dim) {
        return pw_gdec_error(d, "mesh axis '%s' is listed as unreduced twice", text);
      }
      return pw_gdec_error(d, "mesh axis '%s' splits dimension %u and is also unreduced (an "
                           "axis either splits a dimension or holds partial sums)", text, dim);
    }
    return pw_gdec_error(d, "mesh axis '%s' is used twice (it already splits dimension %u)",
                         text, first);
  }
  sh->use[axis] = tensor_dim;
  *out_axis = axis;
  return NULL;
}

/* "spec": one entry per tensor dimension (at most the rank; missing ones
 * are not split), each an array of the mesh axes splitting it, major to
 * minor. */
static pw_status_t pw_gdec_shard_spec(pw_gdec_t* d, pw_gdec_shard_t* sh) {
  uint32_t dims;
  PW_RETURN_IF_ERROR(pw_gdec_array(d, 1, PW_MAX_RANK, &dims));
  if (dims > sh->shape->rank) {
    return pw_gdec_error(d, "%u entries for an array of rank %u (one per dimension at most)",
                         dims, sh->shape->rank);
  }
  for (uint32_t t = 0; t < dims; ++t) {
    size_t old = pw_gpath_index(&d->path, t);
    uint32_t count;
    PW_RETURN_IF_ERROR(pw_gdec_array(d, 1, PW_MAX_MESH_RANK, &count));
    for (uint32_t k = 0; k < count; ++k) {
      size_t inner = pw_gpath_index(&d->path, k);
      uint32_t axis = 0;
      PW_RETURN_IF_ERROR(pw_gdec_shard_axis(d, sh, (uint8_t)t, &axis));
      /* Each axis is used once and there are at most PW_MAX_MESH_RANK. */
      sh->s.tiles[sh->s.tile_count].tensor_axis = (uint8_t)t;
      sh->s.tiles[sh->s.tile_count].mesh_axis = (uint8_t)axis;
      sh->s.tile_count++;
      pw_gpath_pop(&d->path, inner);
    }
    pw_gpath_pop(&d->path, old);
  }
  return NULL;
}

static const char* const pw_gdoc_sharding_keys[] = {"split", "mesh_axis", "spec", "unreduced"};

static pw_status_t pw_gdec_sharding_field(pw_gdec_t* d, uint32_t key, void* object) {
  pw_gdec_shard_t* sh = object;
  pw_sharding_t* s = &sh->s;
  uint64_t v = 0;
  if (key >= 2 && d->doc->version < 3) {
    return pw_gdec_error(d, "tiled shardings (\"spec\", \"unreduced\") need format version 3 "
                         "(the file says %u)", d->doc->version);
  }
  if (key == 2) return pw_gdec_shard_spec(d, sh);
  if (key == 3) {
    uint32_t count;
    PW_RETURN_IF_ERROR(pw_gdec_array(d, 1, PW_MAX_MESH_RANK, &count));
    for (uint32_t k = 0; k < count; ++k) {
      size_t old = pw_gpath_index(&d->path, k);
      uint32_t axis = 0;
      PW_RETURN_IF_ERROR(pw_gdec_shard_axis(d, sh, PW_GDEC_AXIS_UNREDUCED, &axis));
      s->unreduced_axes |= 1u << axis;
      pw_gpath_pop(&d->path, old);
    }
    return NULL;
  }
  if (key == 0) {
    PW_RETURN_IF_ERROR(pw_gdec_uint(d, PW_MAX_RANK - 1, &v));
    s->tensor_axis = (uint32_t)v;
    return NULL;
  }
  size_t saved = d->r.pos;
  pw_cbor_item_t item;
  PW_RETURN_IF_ERROR_CTX(pw__cbor_next(&d->r, &item), "%s", pw_gpath_str(&d->path));
  if (item.type == PW_CBOR_TEXT && item.length == 3 && memcmp(item.data, "all", 3) == 0) {
    s->mesh_axis = PW_MESH_AXIS_ALL;
    return NULL;
  }
  if (item.type != PW_CBOR_UINT) {
    return pw_gdec_error(d, "expected a mesh axis number or \"all\", found %s",
                         pw__cbor_type_name(item.type));
  }
  d->r.pos = saved;
  PW_RETURN_IF_ERROR(pw_gdec_uint(d, PW_MAX_MESH_RANK - 1, &v));
  s->mesh_axis = (uint32_t)v;
  return NULL;
}

/* "replicated", {"split": T, "mesh_axis": M or "all"}, or (version 3)
 * {"spec": [[axes of dimension 0], ...], "unreduced": [axes]} with axes by
 * name or index. Runs after the rest of the file, when the buffer's shape
 * and mesh are known. */
static pw_status_t pw_gdec_sharding(pw_gdec_t* d, const pw_gdoc_buffer_t* b, pw_sharding_t* out) {
  size_t saved = d->r.pos;
  pw_cbor_item_t item;
  PW_RETURN_IF_ERROR_CTX(pw__cbor_next(&d->r, &item), "%s", pw_gpath_str(&d->path));
  if (item.type == PW_CBOR_TEXT) {
    if (item.length == 10 && memcmp(item.data, "replicated", 10) == 0) {
      *out = pw_sharding_replicated();
      return NULL;
    }
    return pw_gdec_error(d, "unknown sharding text (expected \"replicated\", a "
                         "{\"split\", \"mesh_axis\"} or a {\"spec\"} map)");
  }
  if (item.type != PW_CBOR_MAP) {
    return pw_gdec_error(d, "expected \"replicated\" or a map, found %s",
                         pw__cbor_type_name(item.type));
  }
  d->r.pos = saved;
  pw_gdec_shard_t sh;
  memset(&sh, 0, sizeof(sh));
  memset(sh.use, PW_GDEC_AXIS_FREE, sizeof(sh.use));
  sh.shape = &b->spec.shape;
  sh.vslice = b->vslice;
  sh.mesh = b->vslice < d->doc->vslice_count ? &d->doc->vslices[b->vslice] : NULL;
  uint32_t seen;
  PW_RETURN_IF_ERROR(pw_gdec_map(d, pw_gdoc_sharding_keys, 4, pw_gdec_sharding_field, &sh, &seen));
  if (seen & 0xCu) {
    if (seen & 0x3u) {
      return pw_gdec_error(d, "has both \"split\"/\"mesh_axis\" and \"spec\"/\"unreduced\"; "
                           "give one form");
    }
    PW_RETURN_IF_ERROR(pw_gdec_require(d, pw_gdoc_sharding_keys, 4, seen, 0x4u));
    *out = pw_sharding_tiled(sh.s.tile_count, sh.s.tiles, sh.s.unreduced_axes);
    return NULL;
  }
  PW_RETURN_IF_ERROR(pw_gdec_require(d, pw_gdoc_sharding_keys, 4, seen, 0x3u));
  *out = pw_sharding_split(sh.s.tensor_axis, sh.s.mesh_axis);
  return NULL;
}

/* Second pass: every buffer's sharding, from where the first pass left it. */
static pw_status_t pw_gdec_shardings(pw_gdec_t* d) {
  size_t end = d->r.pos;
  for (uint32_t i = 0; i < d->doc->buffer_count; ++i) {
    pw_gdoc_buffer_t* b = &d->doc->buffers[i];
    pw_gpath_pop(&d->path, 0);
    pw_gpath_push(&d->path, "buffers[%u].sharding", i);
    d->r.pos = b->sharding_at;
    PW_RETURN_IF_ERROR(pw_gdec_sharding(d, b, &b->spec.sharding));
  }
  pw_gpath_pop(&d->path, 0);
  d->r.pos = end;
  return NULL;
}

/* ---- top level ------------------------------------------------------------ */

static const char* const pw_gdoc_top_keys[] = {"v", "vslices", "executables", "buffers",
                                               "parameters", "nodes", "outputs"};

static pw_status_t pw_gdec_top_field(pw_gdec_t* d, uint32_t key, void* object) {
  (void)object;
  pw_gdoc_t* doc = d->doc;
  uint32_t count = 0;
  uint64_t v = 0;
  switch (key) {
    case 0: return pw_gdec_uint(d, UINT64_MAX, &v); /* checked by the first pass */
    case 1:
      PW_RETURN_IF_ERROR(pw_gdec_array(d, PW_GDOC_MIN_MESH, PW_GDOC_VSLICES_MAX, &count));
      PW_RETURN_IF_ERROR(pw_gdec_alloc(d, count, sizeof(pw_mesh_shape_t), (void**)&doc->vslices));
      doc->vslice_count = count;
      for (uint32_t i = 0; i < count; ++i) {
        size_t old = pw_gpath_index(&d->path, i);
        PW_RETURN_IF_ERROR(pw_gdec_mesh(d, &doc->vslices[i]));
        pw_gpath_pop(&d->path, old);
      }
      return NULL;
    case 2:
      PW_RETURN_IF_ERROR(pw_gdec_array(d, PW_GDOC_MIN_EXE, UINT32_MAX - 1, &count));
      PW_RETURN_IF_ERROR(pw_gdec_alloc(d, count, sizeof(pw_gdoc_exe_t), (void**)&doc->exes));
      doc->exe_count = count;
      for (uint32_t i = 0; i < count; ++i) {
        size_t old = pw_gpath_index(&d->path, i);
        PW_RETURN_IF_ERROR(pw_gdec_exe(d, &doc->exes[i]));
        pw_gpath_pop(&d->path, old);
      }
      return NULL;
    case 3:
      PW_RETURN_IF_ERROR(pw_gdec_array(d, PW_GDOC_MIN_BUFFER, UINT32_MAX - 1, &count));
      PW_RETURN_IF_ERROR(pw_gdec_alloc(d, count, sizeof(pw_gdoc_buffer_t), (void**)&doc->buffers));
      doc->buffer_count = count;
      for (uint32_t i = 0; i < count; ++i) {
        size_t old = pw_gpath_index(&d->path, i);
        uint32_t seen;
        PW_RETURN_IF_ERROR(pw_gdec_map(d, pw_gdoc_buffer_keys, 4, pw_gdec_buffer_field,
                                       &doc->buffers[i], &seen));
        PW_RETURN_IF_ERROR(pw_gdec_require(d, pw_gdoc_buffer_keys, 4, seen, 0xFu));
        pw_gpath_pop(&d->path, old);
      }
      return NULL;
    case 5:
      PW_RETURN_IF_ERROR(pw_gdec_array(d, PW_GDOC_MIN_NODE, 1u << 24, &count));
      PW_RETURN_IF_ERROR(pw_gdec_alloc(d, count, sizeof(pw_gdoc_node_t), (void**)&doc->nodes));
      doc->node_count = count;
      for (uint32_t i = 0; i < count; ++i) {
        size_t old = pw_gpath_index(&d->path, i);
        uint32_t seen;
        PW_RETURN_IF_ERROR(pw_gdec_map(d, pw_gdoc_node_keys, 6, pw_gdec_node_field,
                                       &doc->nodes[i], &seen));
        /* Without "executable" (or "host") the node is a transfer. */
        PW_RETURN_IF_ERROR(pw_gdec_require(d, pw_gdoc_node_keys, 6, seen, 0x1Du));
        pw_gdoc_node_t* node = &doc->nodes[i];
        if ((seen & 0x2u) && (seen & 0x20u)) {
          return pw_gdec_error(d, "has both \"executable\" and \"host\" (a node is a compute "
                               "or a host node)");
        }
        node->transfer = !(seen & 0x22u);
        if (node->transfer && (node->input_count != 1 || node->output_count != 1)) {
          return pw_gdec_error(d, "a transfer node (one without \"executable\") has one input "
                               "and one output, not %u and %u",
                               node->input_count, node->output_count);
        }
        pw_gpath_pop(&d->path, old);
      }
      return NULL;
    default: {
      uint32_t** refs = key == 4 ? &doc->params : &doc->outputs;
      uint32_t* ref_count = key == 4 ? &doc->param_count : &doc->output_count;
      PW_RETURN_IF_ERROR(pw_gdec_array(d, PW_GDOC_MIN_REF, UINT32_MAX - 1, &count));
      PW_RETURN_IF_ERROR(pw_gdec_alloc(d, count, sizeof(uint32_t), (void**)refs));
      *ref_count = count;
      for (uint32_t i = 0; i < count; ++i) {
        size_t old = pw_gpath_index(&d->path, i);
        PW_RETURN_IF_ERROR(pw_gdec_ref(d, &(*refs)[i]));
        pw_gpath_pop(&d->path, old);
      }
      return NULL;
    }
  }
}

/* First pass: find and check "v" before anything else, so that a file of
 * another version gets that error rather than one about its contents. */
static pw_status_t pw_gdec_version(pw_gdec_t* d) {
  pw_cbor_item_t map;
  PW_RETURN_IF_ERROR(pw_gdec_expect(d, PW_CBOR_MAP, &map));
  for (uint64_t pair = 0; pair < map.value; ++pair) {
    pw_cbor_item_t key;
    PW_RETURN_IF_ERROR(pw__cbor_next(&d->r, &key));
    if (key.type == PW_CBOR_TEXT && key.length == 1 && key.data[0] == 'v') {
      size_t old = pw_gpath_key(&d->path, "v");
      uint64_t version;
      PW_RETURN_IF_ERROR(pw_gdec_uint(d, UINT64_MAX, &version));
      if (version == 0 || version > PW_GRAPH_FORMAT_VERSION) {
        return pw_gdec_error(d, "unknown format version %" PRIu64 " (this library reads "
                             "versions 1 to %u)", version, PW_GRAPH_FORMAT_VERSION);
      }
      d->doc->version = (uint32_t)version;
      pw_gpath_pop(&d->path, old);
      return NULL;
    }
    PW_RETURN_IF_ERROR(pw__cbor_skip(&d->r));
  }
  return pw_gdec_error(d, "missing key \"v\" (the format version)");
}

pw_status_t pw__gdoc_decode(pw_gdoc_t* doc, const void* bytes, size_t size) {
  if (bytes == NULL && size != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "graph bytes are NULL");
  }
  PW_RETURN_IF_ERROR(pw__cbor_prescan(bytes, size, PW_GRAPH_FORMAT_MAX_DEPTH));
  pw_gdec_t d;
  memset(&d, 0, sizeof(d));
  d.r.data = bytes;
  d.r.size = size;
  d.doc = doc;
  pw_status_t status = pw_gdec_version(&d);
  if (status == NULL) {
    d.r.pos = 0;
    uint32_t seen = 0;
    status = pw_gdec_map(&d, pw_gdoc_top_keys, 7, pw_gdec_top_field, NULL, &seen);
    if (status == NULL) status = pw_gdec_require(&d, pw_gdoc_top_keys, 7, seen, 0x7Fu);
    if (status == NULL) status = pw_gdec_shardings(&d);
  }
  /* One encoding per graph: the lowest version that can say it. */
  uint32_t needed = status == NULL ? pw__gdoc_version_needed(doc) : doc->version;
  if (status == NULL && doc->version == 3 && needed < 3) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "v: version 3 is for graphs with named mesh axes or tiled "
                            "shardings, and this one has none (it is written as version %u)",
                            needed);
  } else if (status == NULL && doc->version == 2 && needed < 2) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "v: version 2 is for graphs with host nodes, and this one has "
                            "none (it is written as version 1)");
  }
  if (status != NULL) pw__gdoc_free(doc);
  return status;
}
