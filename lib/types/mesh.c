#define _POSIX_C_SOURCE 200809L
/* Mesh shapes: device counts, checks, axis names, text forms and
 * coordinates (pathways/types.h). */
#include <stdio.h>
#include <string.h>

#include "pathways/types.h"
#include "types/types_internal.h"

pw_mesh_shape_t pw_mesh_shape_make(uint32_t rank, const uint32_t* dims) {
  pw_mesh_shape_t mesh;
  memset(&mesh, 0, sizeof(mesh));
  mesh.rank = rank > PW_MAX_MESH_RANK ? PW_MAX_MESH_RANK : rank;
  for (uint32_t i = 0; i < mesh.rank; ++i) mesh.dims[i] = dims[i];
  return mesh;
}

uint32_t pw_mesh_shape_device_count(const pw_mesh_shape_t* mesh) {
  if (mesh == NULL || mesh->rank < 1 || mesh->rank > PW_MAX_MESH_RANK) return 0;
  uint64_t count = 1;
  for (uint32_t i = 0; i < mesh->rank; ++i) {
    if (mesh->dims[i] < 1) return 0;
    count *= mesh->dims[i];
    if (count > (1u << 20)) return 0;
  }
  return (uint32_t)count;
}

bool pw_mesh_shape_equal(const pw_mesh_shape_t* a, const pw_mesh_shape_t* b) {
  if (a->rank != b->rank) return false;
  for (uint32_t i = 0; i < a->rank && i < PW_MAX_MESH_RANK; ++i) {
    if (a->dims[i] != b->dims[i]) return false;
  }
  return true;
}

/* ---- axis names ----------------------------------------------------------- */

static bool pw_mesh_name_char(char c, bool first) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return true;
  return !first && c >= '0' && c <= '9';
}

/* Length of a valid name of at most |limit| bytes, or 0. */
static size_t pw_mesh_name_length(const char* name, size_t limit) {
  size_t n = 0;
  while (n < limit && name[n] != '\0') {
    if (!pw_mesh_name_char(name[n], n == 0)) return 0;
    ++n;
  }
  return n < PW_MESH_AXIS_NAME_MAX ? n : 0;
}

static bool pw_mesh_named(const pw_mesh_shape_t* mesh) {
  return mesh->rank >= 1 && mesh->rank <= PW_MAX_MESH_RANK && mesh->axis_names[0][0] != '\0';
}

/* The names of |count| axes: each valid, distinct; INVALID_ARGUMENT naming
 * the first bad one. |names[i]| has at most |limit| bytes to read. */
static pw_status_t pw_mesh_names_check(uint32_t count, const char* const* names, size_t limit) {
  for (uint32_t i = 0; i < count; ++i) {
    size_t n = names[i] == NULL ? 0 : pw_mesh_name_length(names[i], limit);
    if (n == 0) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "mesh axis %u's name '%.*s' is not 1..%d characters of [A-Za-z0-9_] "
                            "starting with a letter or '_'",
                            i, names[i] == NULL ? 0 : (int)strnlen(names[i], 32),
                            names[i] == NULL ? "" : names[i], PW_MESH_AXIS_NAME_MAX - 1);
    }
    for (uint32_t j = 0; j < i; ++j) {
      if (strcmp(names[i], names[j]) == 0) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "mesh axes %u and %u are both named '%s'", j, i, names[i]);
      }
    }
  }
  return NULL;
}

pw_status_t pw_mesh_shape_set_axis_names(pw_mesh_shape_t* mesh, uint32_t count,
                                         const char* const* names) {
  if (mesh == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_mesh_shape_set_axis_names: mesh is NULL");
  }
  if (names == NULL) {
    memset(mesh->axis_names, 0, sizeof(mesh->axis_names));
    return NULL;
  }
  if (count != mesh->rank || count > PW_MAX_MESH_RANK) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%u axis names for a rank-%u mesh (one per axis)", count, mesh->rank);
  }
  PW_RETURN_IF_ERROR(pw_mesh_names_check(count, names, PW_MESH_AXIS_NAME_MAX));
  memset(mesh->axis_names, 0, sizeof(mesh->axis_names));
  for (uint32_t i = 0; i < count; ++i) memcpy(mesh->axis_names[i], names[i], strlen(names[i]));
  return NULL;
}

bool pw_mesh_shape_names_equal(const pw_mesh_shape_t* a, const pw_mesh_shape_t* b) {
  if (a->rank != b->rank) return false;
  for (uint32_t i = 0; i < a->rank && i < PW_MAX_MESH_RANK; ++i) {
    if (strncmp(a->axis_names[i], b->axis_names[i], PW_MESH_AXIS_NAME_MAX) != 0) return false;
  }
  return true;
}

size_t pw_mesh_axis_format(const pw_mesh_shape_t* mesh, uint32_t axis, char* buffer,
                           size_t capacity) {
  int n;
  if (axis < PW_MAX_MESH_RANK && axis < mesh->rank && mesh->axis_names[axis][0] != '\0') {
    n = snprintf(buffer, capacity, "%.*s", PW_MESH_AXIS_NAME_MAX - 1, mesh->axis_names[axis]);
  } else {
    n = snprintf(buffer, capacity, "%u", axis);
  }
  return n < 0 ? 0 : (size_t)n;
}

/* "data, model" or "0, 1": the axes of |mesh| for messages. */
static void pw_mesh_axes_list(const pw_mesh_shape_t* mesh, char* text, size_t capacity) {
  size_t n = 0;
  text[0] = '\0';
  uint32_t rank = mesh->rank > PW_MAX_MESH_RANK ? PW_MAX_MESH_RANK : mesh->rank;
  for (uint32_t i = 0; i < rank && n + 1 < capacity; ++i) {
    if (i > 0) n += (size_t)snprintf(text + n, capacity - n, ", ");
    if (n + 1 >= capacity) break;
    size_t w = pw_mesh_axis_format(mesh, i, text + n, capacity - n);
    n = n + w < capacity ? n + w : capacity - 1;
  }
}

pw_status_t pw_mesh_axis_find(const pw_mesh_shape_t* mesh, const char* name, size_t length,
                              uint32_t* out_axis) {
  if (mesh == NULL || name == NULL || out_axis == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_mesh_axis_find: NULL argument");
  }
  uint32_t rank = mesh->rank > PW_MAX_MESH_RANK ? PW_MAX_MESH_RANK : mesh->rank;
  bool named = pw_mesh_named(mesh);
  for (uint32_t i = 0; i < rank && named; ++i) {
    if (strnlen(mesh->axis_names[i], PW_MESH_AXIS_NAME_MAX) == (size_t)length &&
        memcmp(mesh->axis_names[i], name, length) == 0) {
      *out_axis = i;
      return NULL;
    }
  }
  if (!named && length > 0 && length < 4) {
    uint32_t v = 0;
    size_t k = 0;
    while (k < length && name[k] >= '0' && name[k] <= '9') v = v * 10 + (uint32_t)(name[k++] - '0');
    if (k == length && v < rank) {
      *out_axis = v;
      return NULL;
    }
  }
  char axes[PW_MAX_MESH_RANK * (PW_MESH_AXIS_NAME_MAX + 2) + 1];
  pw_mesh_axes_list(mesh, axes, sizeof(axes));
  return pw_status_make(PW_STATUS_NOT_FOUND, "no mesh axis '%.*s' (the mesh's axes: %s)",
                        (int)(length > 64 ? 64 : length), name, axes);
}

/* ---- checks and text ------------------------------------------------------ */

pw_status_t pw_mesh_shape_check(const pw_mesh_shape_t* mesh) {
  if (mesh == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "mesh shape is NULL");
  }
  if (mesh->rank < 1 || mesh->rank > PW_MAX_MESH_RANK) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "mesh rank %u is outside 1..%d", mesh->rank,
                          PW_MAX_MESH_RANK);
  }
  for (uint32_t i = 0; i < mesh->rank; ++i) {
    if (mesh->dims[i] < 1) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "mesh dimension %u is 0", i);
    }
  }
  if (pw_mesh_shape_device_count(mesh) == 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "mesh has more than 2^20 devices");
  }
  if (pw_mesh_named(mesh)) {
    const char* names[PW_MAX_MESH_RANK];
    for (uint32_t i = 0; i < mesh->rank; ++i) names[i] = mesh->axis_names[i];
    PW_RETURN_IF_ERROR(pw_mesh_names_check(mesh->rank, names, PW_MESH_AXIS_NAME_MAX));
  } else {
    for (uint32_t i = 1; i < mesh->rank; ++i) {
      if (mesh->axis_names[i][0] != '\0') {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "mesh axis %u is named but axis 0 is not (name every axis or none)",
                              i);
      }
    }
  }
  return NULL;
}

size_t pw_mesh_shape_format(const pw_mesh_shape_t* mesh, char* buffer, size_t capacity) {
  char text[PW_MAX_MESH_RANK * (PW_MESH_AXIS_NAME_MAX + 12) + 1] = "";
  size_t n = 0;
  uint32_t rank = mesh->rank > PW_MAX_MESH_RANK ? PW_MAX_MESH_RANK : mesh->rank;
  bool named = pw_mesh_named(mesh);
  for (uint32_t i = 0; i < rank; ++i) {
    if (named) {
      n += (size_t)snprintf(text + n, sizeof(text) - n, "%s%.*s=%u", i ? "," : "",
                            PW_MESH_AXIS_NAME_MAX - 1, mesh->axis_names[i], mesh->dims[i]);
    } else {
      n += (size_t)snprintf(text + n, sizeof(text) - n, "%s%u", i ? "x" : "", mesh->dims[i]);
    }
  }
  int total = snprintf(buffer, capacity, "%s", text);
  return total < 0 ? 0 : (size_t)total;
}

/* Reads a decimal dimension at |*p| (advancing it). */
static pw_status_t pw_mesh_parse_dim(const char* text, const char** p, uint32_t* out) {
  if (**p < '0' || **p > '9') {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "mesh shape '%s': expected a number at offset %d", text,
                          (int)(*p - text));
  }
  uint64_t v = 0;
  while (**p >= '0' && **p <= '9') {
    v = v * 10 + (uint64_t)(**p - '0');
    if (v > (1u << 20)) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "mesh shape '%s': dimension too large",
                            text);
    }
    ++*p;
  }
  *out = (uint32_t)v;
  return NULL;
}

pw_status_t pw_mesh_shape_parse(const char* text, pw_mesh_shape_t* out_mesh) {
  if (text == NULL || out_mesh == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_mesh_shape_parse: NULL argument");
  }
  pw_mesh_shape_t mesh;
  memset(&mesh, 0, sizeof(mesh));
  bool named = pw_mesh_name_char(text[0], true);
  char separator = named ? ',' : 'x';
  const char* p = text;
  while (1) {
    if (mesh.rank == PW_MAX_MESH_RANK) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "mesh shape '%s' has more than %d axes",
                            text, PW_MAX_MESH_RANK);
    }
    if (named) {
      const char* start = p;
      while (*p != '\0' && *p != '=') ++p;
      size_t n = (size_t)(p - start);
      if (*p != '=' || n == 0 || n >= PW_MESH_AXIS_NAME_MAX) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "mesh shape '%s': expected name=size at offset %d (a name of 1..%d "
                              "characters)",
                              text, (int)(start - text), PW_MESH_AXIS_NAME_MAX - 1);
      }
      memcpy(mesh.axis_names[mesh.rank], start, n);
      ++p;
    }
    PW_RETURN_IF_ERROR(pw_mesh_parse_dim(text, &p, &mesh.dims[mesh.rank]));
    mesh.rank++;
    if (*p == '\0') break;
    if (*p != separator) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "mesh shape '%s': unexpected '%c' at offset %d", text, *p,
                            (int)(p - text));
    }
    ++p;
  }
  PW_RETURN_IF_ERROR_CTX(pw_mesh_shape_check(&mesh), "mesh shape '%s'", text);
  *out_mesh = mesh;
  return NULL;
}

uint32_t pw_mesh_coordinate(const pw_mesh_shape_t* mesh, uint32_t index, uint32_t axis) {
  if (axis == PW_MESH_AXIS_ALL) return index;
  if (axis >= mesh->rank) return 0;
  uint32_t stride = 1;
  for (uint32_t i = mesh->rank; i-- > axis + 1;) stride *= mesh->dims[i];
  return (index / stride) % mesh->dims[axis];
}

uint32_t pw__mesh_axis_size(const pw_mesh_shape_t* mesh, uint32_t axis) {
  if (axis == PW_MESH_AXIS_ALL) return pw_mesh_shape_device_count(mesh);
  return axis < mesh->rank && axis < PW_MAX_MESH_RANK ? mesh->dims[axis] : 0;
}
