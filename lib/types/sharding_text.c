/* Text forms of shardings: "replicated", "split(T over mesh axis M)" and
 * PartitionSpecs "P(data, None, (x, y)) unreduced(z)" (pathways/types.h). */
#include <stdio.h>
#include <string.h>

#include "pathways/types.h"
#include "types/types_internal.h"

typedef struct pw_text_t {
  char* buffer;
  size_t capacity;
  size_t length; /* what the whole text needs */
} pw_text_t;

static void pw_text_add(pw_text_t* t, const char* s, size_t n) {
  if (t->length < t->capacity) {
    size_t room = t->capacity - t->length - 1;
    size_t k = n < room ? n : room;
    memcpy(t->buffer + t->length, s, k);
    t->buffer[t->length + k] = '\0';
  }
  t->length += n;
}

static void pw_text_str(pw_text_t* t, const char* s) { pw_text_add(t, s, strlen(s)); }

static void pw_text_axis(pw_text_t* t, const pw_mesh_shape_t* mesh, uint32_t axis) {
  char name[PW_MESH_AXIS_NAME_MAX + 12];
  if (mesh != NULL) {
    pw_mesh_axis_format(mesh, axis, name, sizeof(name));
  } else {
    snprintf(name, sizeof(name), "%u", axis);
  }
  pw_text_str(t, name);
}

static void pw_sharding_spec_text(pw_text_t* t, const pw_sharding_t* s,
                                  const pw_mesh_shape_t* mesh) {
  uint32_t count = s->tile_count > PW_MAX_MESH_RANK ? PW_MAX_MESH_RANK : s->tile_count;
  uint32_t rank = 0;
  for (uint32_t i = 0; i < count; ++i) {
    if (s->tiles[i].tensor_axis + 1u > rank) rank = s->tiles[i].tensor_axis + 1u;
  }
  pw_text_str(t, "P(");
  for (uint32_t k = 0; k < rank; ++k) {
    if (k > 0) pw_text_str(t, ", ");
    uint32_t uses = 0;
    for (uint32_t i = 0; i < count; ++i) uses += s->tiles[i].tensor_axis == k;
    if (uses == 0) {
      pw_text_str(t, "None");
      continue;
    }
    if (uses > 1) pw_text_str(t, "(");
    uint32_t seen = 0;
    for (uint32_t i = 0; i < count; ++i) {
      if (s->tiles[i].tensor_axis != k) continue;
      if (seen++ > 0) pw_text_str(t, ", ");
      pw_text_axis(t, mesh, s->tiles[i].mesh_axis);
    }
    if (uses > 1) pw_text_str(t, ")");
  }
  pw_text_str(t, ")");
  if (s->unreduced_axes != 0) {
    pw_text_str(t, " unreduced(");
    uint32_t seen = 0;
    for (uint32_t a = 0; a < 32; ++a) {
      if (!(s->unreduced_axes >> a & 1u)) continue;
      if (seen++ > 0) pw_text_str(t, ", ");
      pw_text_axis(t, mesh, a);
    }
    pw_text_str(t, ")");
  }
}

static size_t pw_sharding_text(const pw_sharding_t* s, const pw_mesh_shape_t* mesh, char* buffer,
                               size_t capacity) {
  pw_text_t t = {buffer, capacity, 0};
  if (capacity > 0) buffer[0] = '\0';
  char text[96];
  switch (s->kind) {
    case PW_SHARDING_REPLICATED:
      pw_text_str(&t, "replicated");
      break;
    case PW_SHARDING_SPLIT:
      if (s->mesh_axis == PW_MESH_AXIS_ALL) {
        snprintf(text, sizeof(text), "split(%u over all devices)", s->tensor_axis);
        pw_text_str(&t, text);
      } else {
        snprintf(text, sizeof(text), "split(%u over mesh axis ", s->tensor_axis);
        pw_text_str(&t, text);
        pw_text_axis(&t, mesh, s->mesh_axis);
        pw_text_str(&t, ")");
      }
      break;
    case PW_SHARDING_TILED:
      pw_sharding_spec_text(&t, s, mesh);
      break;
    default:
      snprintf(text, sizeof(text), "sharding kind %d", (int)s->kind);
      pw_text_str(&t, text);
  }
  return t.length;
}

size_t pw_sharding_format(const pw_sharding_t* sharding, char* buffer, size_t capacity) {
  return pw_sharding_text(sharding, NULL, buffer, capacity);
}

size_t pw_sharding_format_named(const pw_sharding_t* sharding, const pw_mesh_shape_t* mesh,
                                char* buffer, size_t capacity) {
  return pw_sharding_text(sharding, mesh, buffer, capacity);
}

/* ---- parsing -------------------------------------------------------------- */

typedef struct pw_spec_reader_t {
  const char* text;
  size_t length;
  size_t pos;
  const pw_mesh_shape_t* mesh;
} pw_spec_reader_t;

static void pw_spec_skip(pw_spec_reader_t* r) {
  while (r->pos < r->length && (r->text[r->pos] == ' ' || r->text[r->pos] == '\t')) ++r->pos;
}

static bool pw_spec_eat(pw_spec_reader_t* r, char c) {
  pw_spec_skip(r);
  if (r->pos < r->length && r->text[r->pos] == c) {
    ++r->pos;
    return true;
  }
  return false;
}

static bool pw_spec_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* The next word (an axis name, index, "None", "all"); length 0 if none. */
static size_t pw_spec_word(pw_spec_reader_t* r, const char** out) {
  pw_spec_skip(r);
  size_t start = r->pos;
  while (r->pos < r->length && pw_spec_word_char(r->text[r->pos])) ++r->pos;
  *out = r->text + start;
  return r->pos - start;
}

static pw_status_t pw_spec_error(const pw_spec_reader_t* r, const char* what) {
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "sharding '%.*s': %s at offset %zu",
                        (int)(r->length > 200 ? 200 : r->length), r->text, what, r->pos);
}

static pw_status_t pw_spec_axis(pw_spec_reader_t* r, uint32_t* out_axis) {
  const char* word = NULL;
  size_t n = pw_spec_word(r, &word);
  if (n == 0) return pw_spec_error(r, "expected a mesh axis");
  PW_RETURN_IF_ERROR_CTX(pw_mesh_axis_find(r->mesh, word, n, out_axis), "sharding '%.*s'",
                         (int)(r->length > 200 ? 200 : r->length), r->text);
  return NULL;
}

static pw_status_t pw_spec_add_tile(pw_spec_reader_t* r, pw_sharding_t* s, uint32_t dim,
                                    uint32_t axis) {
  if (s->tile_count == PW_MAX_MESH_RANK) return pw_spec_error(r, "too many mesh axes");
  s->tiles[s->tile_count].tensor_axis = (uint8_t)dim;
  s->tiles[s->tile_count].mesh_axis = (uint8_t)axis;
  s->tile_count++;
  return NULL;
}

/* One PartitionSpec entry for dimension |dim|: None, an axis, (axes). */
static pw_status_t pw_spec_entry(pw_spec_reader_t* r, pw_sharding_t* s, uint32_t dim) {
  if (pw_spec_eat(r, '(')) {
    if (pw_spec_eat(r, ')')) return NULL;
    do {
      uint32_t axis = 0;
      PW_RETURN_IF_ERROR(pw_spec_axis(r, &axis));
      PW_RETURN_IF_ERROR(pw_spec_add_tile(r, s, dim, axis));
    } while (pw_spec_eat(r, ','));
    if (!pw_spec_eat(r, ')')) return pw_spec_error(r, "expected ')' closing a list of axes");
    return NULL;
  }
  size_t save = r->pos;
  const char* word = NULL;
  size_t n = pw_spec_word(r, &word);
  if (n == 4 && memcmp(word, "None", 4) == 0) return NULL;
  r->pos = save;
  uint32_t axis = 0;
  PW_RETURN_IF_ERROR(pw_spec_axis(r, &axis));
  return pw_spec_add_tile(r, s, dim, axis);
}

static pw_status_t pw_spec_partition(pw_spec_reader_t* r, uint32_t rank, pw_sharding_t* s) {
  *s = pw_sharding_tiled(0, NULL, 0);
  if (!pw_spec_eat(r, '(')) return pw_spec_error(r, "expected '(' after P");
  uint32_t dim = 0;
  if (!pw_spec_eat(r, ')')) {
    do {
      if (dim >= rank) {
        return pw_spec_error(r, "more PartitionSpec entries than the array's dimensions");
      }
      PW_RETURN_IF_ERROR(pw_spec_entry(r, s, dim++));
    } while (pw_spec_eat(r, ','));
    if (!pw_spec_eat(r, ')')) return pw_spec_error(r, "expected ',' or ')'");
  }
  size_t save = r->pos;
  const char* word = NULL;
  size_t n = pw_spec_word(r, &word);
  if (n == 9 && memcmp(word, "unreduced", 9) == 0) {
    if (!pw_spec_eat(r, '(')) return pw_spec_error(r, "expected '(' after unreduced");
    do {
      uint32_t axis = 0;
      PW_RETURN_IF_ERROR(pw_spec_axis(r, &axis));
      if (s->unreduced_axes >> axis & 1u) return pw_spec_error(r, "an axis listed twice");
      s->unreduced_axes |= 1u << axis;
    } while (pw_spec_eat(r, ','));
    if (!pw_spec_eat(r, ')')) return pw_spec_error(r, "expected ')' closing unreduced");
  } else {
    r->pos = save;
  }
  return NULL;
}

static pw_status_t pw_spec_split(pw_spec_reader_t* r, uint32_t rank, pw_sharding_t* s) {
  if (!pw_spec_eat(r, '(')) return pw_spec_error(r, "expected '(' after split");
  const char* word = NULL;
  size_t n = pw_spec_word(r, &word);
  uint32_t t = 0;
  size_t k = 0;
  while (k < n && k < 4 && word[k] >= '0' && word[k] <= '9') {
    t = t * 10 + (uint32_t)(word[k++] - '0');
  }
  if (n == 0 || k != n) return pw_spec_error(r, "expected a tensor dimension");
  if (t >= rank) return pw_spec_error(r, "tensor dimension out of range");
  if (!pw_spec_eat(r, ',')) return pw_spec_error(r, "expected ',' after the tensor dimension");
  size_t save = r->pos;
  n = pw_spec_word(r, &word);
  uint32_t axis = PW_MESH_AXIS_ALL;
  if (!(n == 3 && memcmp(word, "all", 3) == 0)) {
    r->pos = save;
    PW_RETURN_IF_ERROR(pw_spec_axis(r, &axis));
  }
  if (!pw_spec_eat(r, ')')) return pw_spec_error(r, "expected ')'");
  *s = pw_sharding_split(t, axis);
  return NULL;
}

pw_status_t pw_sharding_parse(const char* text, size_t length, uint32_t rank,
                              const pw_mesh_shape_t* mesh, pw_sharding_t* out_sharding) {
  if (text == NULL || mesh == NULL || out_sharding == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_sharding_parse: NULL argument");
  }
  PW_RETURN_IF_ERROR(pw_mesh_shape_check(mesh));
  if (rank > PW_MAX_RANK) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "rank %u is above %d", rank, PW_MAX_RANK);
  }
  pw_spec_reader_t r = {text, length, 0, mesh};
  const char* word = NULL;
  size_t n = pw_spec_word(&r, &word);
  pw_sharding_t s;
  if (n == 10 && memcmp(word, "replicated", 10) == 0) {
    s = pw_sharding_replicated();
  } else if (n == 5 && memcmp(word, "split", 5) == 0) {
    PW_RETURN_IF_ERROR(pw_spec_split(&r, rank, &s));
  } else if (n == 1 && word[0] == 'P') {
    PW_RETURN_IF_ERROR(pw_spec_partition(&r, rank, &s));
    PW_RETURN_IF_ERROR_CTX(pw__sharding_check_axes(&s, rank, mesh), "sharding '%.*s'",
                           (int)(length > 200 ? 200 : length), text);
  } else {
    r.pos = 0;
    return pw_spec_error(&r, "expected replicated, split(T, M) or P(...)");
  }
  pw_spec_skip(&r);
  if (r.pos != r.length) return pw_spec_error(&r, "unexpected text after the sharding");
  *out_sharding = s;
  return NULL;
}
