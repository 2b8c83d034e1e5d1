/* Shardings: how an array's blocks lie over a mesh (pathways/types.h).
 *
 * Every kind is read through one form, the tile list: REPLICATED has no
 * tiles, SPLIT(t, m) one, SPLIT(t, all) one per mesh axis in order (the
 * row-major device index is the mixed-radix number of the coordinates,
 * major axis first), TILED lists its own. Along tensor dimension k the
 * array is cut into parts(k) = the product of the sizes of the mesh axes
 * whose tiles name k, and a device's block coordinate along k is the
 * mixed-radix number of its coordinates along those axes, in tile order.
 * The text forms are in sharding_text.c. */
#include <stdio.h>
#include <string.h>

#include "pathways/types.h"
#include "types/types_internal.h"

pw_sharding_t pw_sharding_tiled(uint32_t tile_count, const pw_sharding_tile_t* tiles,
                                uint32_t unreduced_axes) {
  pw_sharding_t s;
  memset(&s, 0, sizeof(s));
  s.kind = PW_SHARDING_TILED;
  s.tile_count = tile_count;
  for (uint32_t i = 0; i < tile_count && i < PW_MAX_MESH_RANK && tiles != NULL; ++i) {
    s.tiles[i] = tiles[i];
  }
  s.unreduced_axes = unreduced_axes;
  return s;
}

uint32_t pw__sharding_tiles(const pw_sharding_t* sharding, const pw_mesh_shape_t* mesh,
                            pw_sharding_tile_t* tiles, uint32_t* out_unreduced) {
  *out_unreduced = 0;
  switch (sharding->kind) {
    case PW_SHARDING_SPLIT: {
      uint32_t t = sharding->tensor_axis > 255 ? 255 : sharding->tensor_axis;
      if (sharding->mesh_axis != PW_MESH_AXIS_ALL) {
        tiles[0].tensor_axis = (uint8_t)t;
        tiles[0].mesh_axis = (uint8_t)(sharding->mesh_axis > 255 ? 255 : sharding->mesh_axis);
        return 1;
      }
      uint32_t rank = mesh->rank > PW_MAX_MESH_RANK ? PW_MAX_MESH_RANK : mesh->rank;
      for (uint32_t a = 0; a < rank; ++a) {
        tiles[a].tensor_axis = (uint8_t)t;
        tiles[a].mesh_axis = (uint8_t)a;
      }
      return rank;
    }
    case PW_SHARDING_TILED: {
      uint32_t n =
          sharding->tile_count > PW_MAX_MESH_RANK ? PW_MAX_MESH_RANK : sharding->tile_count;
      memcpy(tiles, sharding->tiles, n * sizeof(*tiles));
      *out_unreduced = sharding->unreduced_axes;
      return n;
    }
    default:
      return 0;
  }
}

bool pw_sharding_equal(const pw_sharding_t* a, const pw_sharding_t* b) {
  if (a->kind != b->kind) return false;
  switch (a->kind) {
    case PW_SHARDING_REPLICATED:
      return true;
    case PW_SHARDING_SPLIT:
      return a->tensor_axis == b->tensor_axis && a->mesh_axis == b->mesh_axis;
    case PW_SHARDING_TILED:
      if (a->tile_count != b->tile_count || a->unreduced_axes != b->unreduced_axes) return false;
      for (uint32_t i = 0; i < a->tile_count && i < PW_MAX_MESH_RANK; ++i) {
        if (a->tiles[i].tensor_axis != b->tiles[i].tensor_axis ||
            a->tiles[i].mesh_axis != b->tiles[i].mesh_axis) {
          return false;
        }
      }
      return true;
    default:
      return false;
  }
}

/* The name (or index) of mesh axis |axis| for messages. */
static const char* pw_axis_text(const pw_mesh_shape_t* mesh, uint32_t axis, char* text,
                                size_t capacity) {
  pw_mesh_axis_format(mesh, axis, text, capacity);
  return text;
}

static pw_status_t pw_sharding_check_split(const pw_sharding_t* sharding, const pw_shape_t* shape,
                                           const pw_mesh_shape_t* mesh) {
  if (sharding->tensor_axis >= shape->rank) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "split along tensor axis %u of a rank-%u array", sharding->tensor_axis,
                          shape->rank);
  }
  uint32_t parts = pw__mesh_axis_size(mesh, sharding->mesh_axis);
  if (parts == 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "split over mesh axis %u of a rank-%u mesh",
                          sharding->mesh_axis, mesh->rank);
  }
  if (shape->dims[sharding->tensor_axis] % parts != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "dimension %u (size %lld) is not divisible into %u shards",
                          sharding->tensor_axis, (long long)shape->dims[sharding->tensor_axis],
                          parts);
  }
  return NULL;
}

/* Axes in range and each used once (the checks that need no shape). */
pw_status_t pw__sharding_check_axes(const pw_sharding_t* sharding, uint32_t rank,
                                    const pw_mesh_shape_t* mesh) {
  char name[PW_MESH_AXIS_NAME_MAX + 12];
  if (sharding->tile_count > mesh->rank || sharding->tile_count > PW_MAX_MESH_RANK) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "sharding has %u tiles over a rank-%u mesh (at most one per mesh axis)",
                          sharding->tile_count, mesh->rank);
  }
  int32_t used_by[PW_MAX_MESH_RANK];
  for (uint32_t a = 0; a < PW_MAX_MESH_RANK; ++a) used_by[a] = -1;
  for (uint32_t i = 0; i < sharding->tile_count; ++i) {
    const pw_sharding_tile_t* t = &sharding->tiles[i];
    if (t->mesh_axis >= mesh->rank) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "sharding splits over mesh axis %u of a rank-%u mesh", t->mesh_axis,
                            mesh->rank);
    }
    if (t->tensor_axis >= rank) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "sharding splits tensor dimension %u of a rank-%u array over mesh "
                            "axis %s",
                            t->tensor_axis, rank,
                            pw_axis_text(mesh, t->mesh_axis, name, sizeof(name)));
    }
    if (used_by[t->mesh_axis] >= 0) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "mesh axis %s is used twice (splitting tensor dimensions %d and %u)",
                            pw_axis_text(mesh, t->mesh_axis, name, sizeof(name)),
                            (int)used_by[t->mesh_axis], t->tensor_axis);
    }
    used_by[t->mesh_axis] = (int32_t)t->tensor_axis;
  }
  if (sharding->unreduced_axes >> mesh->rank) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "unreduced axes mask 0x%x names axes beyond the rank-%u mesh",
                          sharding->unreduced_axes, mesh->rank);
  }
  for (uint32_t a = 0; a < mesh->rank; ++a) {
    if ((sharding->unreduced_axes >> a & 1u) && used_by[a] >= 0) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "mesh axis %s both splits tensor dimension %d and is unreduced",
                            pw_axis_text(mesh, a, name, sizeof(name)), (int)used_by[a]);
    }
  }
  return NULL;
}

/* parts(k) for every dimension k of a rank-|rank| array. */
static void pw_sharding_parts(const pw_sharding_tile_t* tiles, uint32_t count, uint32_t rank,
                              const pw_mesh_shape_t* mesh, uint64_t* parts) {
  for (uint32_t k = 0; k < rank; ++k) parts[k] = 1;
  for (uint32_t i = 0; i < count; ++i) {
    if (tiles[i].tensor_axis < rank) {
      parts[tiles[i].tensor_axis] *= pw__mesh_axis_size(mesh, tiles[i].mesh_axis);
    }
  }
}

pw_status_t pw_sharding_check(const pw_sharding_t* sharding, const pw_shape_t* shape,
                              const pw_mesh_shape_t* mesh) {
  if (sharding == NULL || shape == NULL || mesh == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_sharding_check: NULL argument");
  }
  switch (sharding->kind) {
    case PW_SHARDING_REPLICATED:
      return NULL;
    case PW_SHARDING_SPLIT:
      return pw_sharding_check_split(sharding, shape, mesh);
    case PW_SHARDING_TILED:
      break;
    default:
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "unknown sharding kind %d",
                            (int)sharding->kind);
  }
  if (shape->rank > PW_MAX_RANK) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "rank %u is above %d", shape->rank,
                          PW_MAX_RANK);
  }
  PW_RETURN_IF_ERROR(pw__sharding_check_axes(sharding, shape->rank, mesh));
  uint64_t parts[PW_MAX_RANK];
  pw_sharding_parts(sharding->tiles, sharding->tile_count, shape->rank, mesh, parts);
  for (uint32_t k = 0; k < shape->rank; ++k) {
    if (parts[k] > 1 && shape->dims[k] % (int64_t)parts[k] != 0) {
      char axes[PW_MAX_MESH_RANK * (PW_MESH_AXIS_NAME_MAX + 12) + 1] = "";
      size_t n = 0;
      for (uint32_t i = 0; i < sharding->tile_count; ++i) {
        if (sharding->tiles[i].tensor_axis != k) continue;
        char name[PW_MESH_AXIS_NAME_MAX + 12];
        uint32_t a = sharding->tiles[i].mesh_axis;
        n += (size_t)snprintf(axes + n, sizeof(axes) - n, "%s%s(%u)", n ? " x " : "",
                              pw_axis_text(mesh, a, name, sizeof(name)), mesh->dims[a]);
      }
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "dimension %u (size %lld) is not divisible into %llu shards over mesh "
                            "axes %s (uneven splits are refused, not padded)",
                            k, (long long)shape->dims[k], (unsigned long long)parts[k], axes);
    }
  }
  return NULL;
}

pw_status_t pw_sharding_normalize(const pw_sharding_t* sharding, const pw_shape_t* shape,
                                  const pw_mesh_shape_t* mesh, pw_sharding_t* out) {
  PW_RETURN_IF_ERROR(pw_sharding_check(sharding, shape, mesh));
  pw_sharding_tile_t tiles[PW_MAX_MESH_RANK];
  uint32_t unreduced = 0;
  uint32_t n = pw__sharding_tiles(sharding, mesh, tiles, &unreduced);
  *out = pw_sharding_tiled(n, tiles, unreduced);
  return NULL;
}

bool pw_sharding_equivalent(const pw_sharding_t* a, const pw_sharding_t* b,
                            const pw_shape_t* shape, const pw_mesh_shape_t* mesh) {
  pw_sharding_t na, nb;
  pw_status_t sa = pw_sharding_normalize(a, shape, mesh, &na);
  pw_status_t sb = pw_sharding_normalize(b, shape, mesh, &nb);
  bool ok = sa == NULL && sb == NULL;
  pw_status_free(sa);
  pw_status_free(sb);
  if (!ok) return false;
  /* Axes of size 1 cut nothing and sum nothing: leave them out. */
  uint32_t keep = 0;
  for (uint32_t a_ = 0; a_ < mesh->rank; ++a_) keep |= mesh->dims[a_] > 1 ? 1u << a_ : 0u;
  if ((na.unreduced_axes & keep) != (nb.unreduced_axes & keep)) return false;
  for (uint32_t k = 0; k < shape->rank; ++k) {
    /* The ordered axes splitting k must be the same in both. */
    uint32_t ia = 0, ib = 0;
    for (;;) {
      while (ia < na.tile_count &&
             (na.tiles[ia].tensor_axis != k || !(keep >> na.tiles[ia].mesh_axis & 1u))) {
        ++ia;
      }
      while (ib < nb.tile_count &&
             (nb.tiles[ib].tensor_axis != k || !(keep >> nb.tiles[ib].mesh_axis & 1u))) {
        ++ib;
      }
      bool ea = ia == na.tile_count, eb = ib == nb.tile_count;
      if (ea || eb) {
        if (ea != eb) return false;
        break;
      }
      if (na.tiles[ia].mesh_axis != nb.tiles[ib].mesh_axis) return false;
      ++ia;
      ++ib;
    }
  }
  return true;
}

pw_shape_t pw_sharding_shard_shape(const pw_sharding_t* sharding, const pw_shape_t* shape,
                                   const pw_mesh_shape_t* mesh) {
  pw_shape_t shard = *shape;
  if (shape->rank > PW_MAX_RANK) return shard;
  pw_sharding_tile_t tiles[PW_MAX_MESH_RANK];
  uint32_t unreduced = 0;
  uint32_t n = pw__sharding_tiles(sharding, mesh, tiles, &unreduced);
  uint64_t parts[PW_MAX_RANK];
  pw_sharding_parts(tiles, n, shape->rank, mesh, parts);
  for (uint32_t k = 0; k < shape->rank; ++k) {
    if (parts[k] > 0) shard.dims[k] /= (int64_t)parts[k];
  }
  return shard;
}

/* Device |device|'s block coordinate along every dimension. */
static void pw_sharding_coords(const pw_sharding_tile_t* tiles, uint32_t count, uint32_t rank,
                               const pw_mesh_shape_t* mesh, uint32_t device, uint64_t* coords) {
  for (uint32_t k = 0; k < rank; ++k) coords[k] = 0;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t k = tiles[i].tensor_axis;
    if (k >= rank) continue;
    uint32_t a = tiles[i].mesh_axis;
    coords[k] = coords[k] * pw__mesh_axis_size(mesh, a) + pw_mesh_coordinate(mesh, device, a);
  }
}

void pw_sharding_shard_offsets(const pw_sharding_t* sharding, const pw_shape_t* shape,
                               const pw_mesh_shape_t* mesh, uint32_t device_index,
                               int64_t* out_offsets) {
  uint32_t rank = shape->rank > PW_MAX_RANK ? PW_MAX_RANK : shape->rank;
  pw_sharding_tile_t tiles[PW_MAX_MESH_RANK];
  uint32_t unreduced = 0;
  uint32_t n = pw__sharding_tiles(sharding, mesh, tiles, &unreduced);
  uint64_t coords[PW_MAX_RANK];
  pw_sharding_coords(tiles, n, rank, mesh, device_index, coords);
  pw_shape_t shard = pw_sharding_shard_shape(sharding, shape, mesh);
  for (uint32_t k = 0; k < rank; ++k) out_offsets[k] = (int64_t)coords[k] * shard.dims[k];
}

/* The highest tensor dimension a tile names, plus one. */
static uint32_t pw_sharding_tile_rank(const pw_sharding_tile_t* tiles, uint32_t count) {
  uint32_t rank = 0;
  for (uint32_t i = 0; i < count; ++i) {
    if (tiles[i].tensor_axis + 1u > rank) rank = tiles[i].tensor_axis + 1u;
  }
  return rank > PW_MAX_RANK ? PW_MAX_RANK : rank;
}

uint32_t pw_sharding_block_count(const pw_sharding_t* sharding, const pw_shape_t* shape,
                                 const pw_mesh_shape_t* mesh) {
  (void)shape;
  pw_sharding_tile_t tiles[PW_MAX_MESH_RANK];
  uint32_t unreduced = 0;
  uint32_t n = pw__sharding_tiles(sharding, mesh, tiles, &unreduced);
  uint64_t count = 1;
  for (uint32_t i = 0; i < n; ++i) count *= pw__mesh_axis_size(mesh, tiles[i].mesh_axis);
  return count > UINT32_MAX ? 0 : (uint32_t)count;
}

uint32_t pw_sharding_block_index(const pw_sharding_t* sharding, const pw_mesh_shape_t* mesh,
                                 uint32_t device_index) {
  if (sharding->kind == PW_SHARDING_SPLIT) {
    return pw_mesh_coordinate(mesh, device_index, sharding->mesh_axis);
  }
  if (sharding->kind != PW_SHARDING_TILED) return 0;
  pw_sharding_tile_t tiles[PW_MAX_MESH_RANK];
  uint32_t unreduced = 0;
  uint32_t n = pw__sharding_tiles(sharding, mesh, tiles, &unreduced);
  uint32_t rank = pw_sharding_tile_rank(tiles, n);
  uint64_t parts[PW_MAX_RANK], coords[PW_MAX_RANK];
  pw_sharding_parts(tiles, n, rank, mesh, parts);
  pw_sharding_coords(tiles, n, rank, mesh, device_index, coords);
  uint64_t index = 0;
  for (uint32_t k = 0; k < rank; ++k) index = index * parts[k] + coords[k];
  return (uint32_t)index;
}

uint32_t pw_sharding_partial_count(const pw_sharding_t* sharding, const pw_mesh_shape_t* mesh) {
  if (sharding->kind != PW_SHARDING_TILED) return 1;
  uint64_t count = 1;
  for (uint32_t a = 0; a < mesh->rank && a < PW_MAX_MESH_RANK; ++a) {
    if (sharding->unreduced_axes >> a & 1u) count *= mesh->dims[a];
  }
  return count > UINT32_MAX ? 0 : (uint32_t)count;
}

uint32_t pw_sharding_partial_index(const pw_sharding_t* sharding, const pw_mesh_shape_t* mesh,
                                   uint32_t device_index) {
  if (sharding->kind != PW_SHARDING_TILED) return 0;
  uint64_t index = 0;
  for (uint32_t a = 0; a < mesh->rank && a < PW_MAX_MESH_RANK; ++a) {
    if (sharding->unreduced_axes >> a & 1u) {
      index = index * mesh->dims[a] + pw_mesh_coordinate(mesh, device_index, a);
    }
  }
  return (uint32_t)index;
}
