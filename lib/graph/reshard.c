#define _POSIX_C_SOURCE 200809L
/* Resharding plans for transfer nodes: which byte rows move from which
 * source shard to which destination shard.
 *
 * Every device's shard is a box of the global array (pw_sharding_shard_offsets
 * and pw_sharding_shard_shape: the whole array when replicated, one block
 * of the grid the split dimensions cut otherwise). For each destination
 * device and each distinct source value (a block, or a block's partial sum
 * when the sharding is unreduced over some axes), the intersection of the
 * two boxes is copied as rows that are contiguous in both shards
 * (row-major): the trailing dimensions the intersection covers fully in
 * both shards fold into one row. The rows of one intersection form a grid
 * described by one record (pw_plan_copy_t) of up to PW_TRANSPORT_MAX_STRIDES
 * levels (a grid of more levels is walked into several records): a plan
 * has one record per intersecting pair of shards however many rows it
 * moves (u8[2^22,2] split(1) -> replicated is 4
 * records for 2^24 rows). Only blocks that intersect produce copies, so
 * e.g. split(0) over 4 devices -> replicated over 8 copies each source
 * block once to each destination device and nothing else, and an
 * unchanged sharding on the same mesh copies each shard once.
 *
 * Among the replicas of a source value the copy reads from replica
 * (destination index mod replica count), spreading reads over them.
 *
 * Partial sums (a source unreduced over mesh axes A): a destination
 * unreduced over the same axes on the same mesh reads its own partial
 * sum. One reduced over some of them (all of them, on any mesh; or a
 * subset B of A on the same mesh) adds up the R = |A partials| / |B
 * partials| source partial sums that agree with it along B: for each
 * source block it intersects, the first of them is copied into the
 * destination shard and the k-th (k = 1 .. R - 1) into scratch slot k,
 * a block of one shard's size at k shard sizes past the shard (the
 * record's dst_offset says it), and the dispatcher adds the slots into
 * the shard with the backend's accumulate once the copies are done
 * (lib/sched/transfer.c). Each destination byte is written once per
 * partial sum it adds. A destination cannot gain unreduced axes: a
 * reduced source has no partial sums to hand out (refused). */
#include <string.h>

#include "graph/plan.h"

typedef struct pw_box_t {
  int64_t lo[PW_MAX_RANK];
  int64_t hi[PW_MAX_RANK];
} pw_box_t;

/* Device |device|'s shard box of |spec| over |mesh|. */
static pw_box_t pw_reshard_box(const pw_array_spec_t* spec, const pw_mesh_shape_t* mesh,
                               uint32_t device) {
  pw_box_t box;
  int64_t offsets[PW_MAX_RANK];
  pw_sharding_shard_offsets(&spec->sharding, &spec->shape, mesh, device, offsets);
  pw_shape_t shard = pw_sharding_shard_shape(&spec->sharding, &spec->shape, mesh);
  for (uint32_t k = 0; k < spec->shape.rank; ++k) {
    box.lo[k] = offsets[k];
    box.hi[k] = offsets[k] + shard.dims[k];
  }
  return box;
}

/* The distinct source values: one per (block, partial sum), each with the
 * devices that hold it (its replicas) in device order, as CSR arrays. */
typedef struct pw_reshard_sources_t {
  uint32_t count;     /* blocks x partial sums */
  uint32_t* first;    /* count + 1 entries: the replicas of value v are */
  uint32_t* devices;  /* devices[first[v] .. first[v + 1] - 1] */
  uint32_t device_count;
} pw_reshard_sources_t;

static uint32_t pw_reshard_value(const pw_array_spec_t* spec, const pw_mesh_shape_t* mesh,
                                 uint32_t device) {
  return pw_sharding_block_index(&spec->sharding, mesh, device) *
             pw_sharding_partial_count(&spec->sharding, mesh) +
         pw_sharding_partial_index(&spec->sharding, mesh, device);
}

static void pw_reshard_sources_free(pw_allocator_t allocator, pw_reshard_sources_t* s) {
  if (s->first) pw_allocator_free(allocator, s->first, ((size_t)s->count + 1) * sizeof(uint32_t));
  if (s->devices) pw_allocator_free(allocator, s->devices, s->device_count * sizeof(uint32_t));
}

static pw_status_t pw_reshard_sources(pw_allocator_t allocator, const pw_array_spec_t* src,
                                      const pw_mesh_shape_t* mesh, pw_reshard_sources_t* out) {
  memset(out, 0, sizeof(*out));
  uint64_t count = (uint64_t)pw_sharding_block_count(&src->sharding, &src->shape, mesh) *
                   pw_sharding_partial_count(&src->sharding, mesh);
  out->device_count = pw_mesh_shape_device_count(mesh);
  if (count == 0 || count > out->device_count) {
    return pw_status_make(PW_STATUS_INTERNAL, "resharding: %llu source values on %u devices",
                          (unsigned long long)count, out->device_count);
  }
  out->count = (uint32_t)count;
  PW_RETURN_IF_ERROR(pw_allocator_calloc_array(allocator, out->count + 1, sizeof(uint32_t), 0,
                                               (void**)&out->first));
  pw_status_t status = pw_allocator_calloc_array(allocator, out->device_count, sizeof(uint32_t),
                                                 0, (void**)&out->devices);
  if (status != NULL) {
    pw_allocator_free(allocator, out->first, ((size_t)out->count + 1) * sizeof(uint32_t));
    out->first = NULL;
    return status;
  }
  for (uint32_t d = 0; d < out->device_count; ++d) {
    uint32_t v = pw_reshard_value(src, mesh, d);
    if (v >= out->count) {
      pw_reshard_sources_free(allocator, out);
      return pw_status_make(PW_STATUS_INTERNAL, "resharding: device %u holds value %u of %u", d,
                            v, out->count);
    }
    out->first[v + 1]++;
  }
  for (uint32_t v = 0; v < out->count; ++v) out->first[v + 1] += out->first[v];
  /* Fill in device order: next[v] counts the replicas of v placed. */
  uint32_t* next = NULL;
  status = pw_allocator_calloc_array(allocator, out->count, sizeof(uint32_t), 0, (void**)&next);
  if (status != NULL) {
    pw_reshard_sources_free(allocator, out);
    return status;
  }
  for (uint32_t d = 0; d < out->device_count; ++d) {
    uint32_t v = pw_reshard_value(src, mesh, d);
    out->devices[out->first[v] + next[v]++] = d;
  }
  pw_allocator_free(allocator, next, out->count * sizeof(uint32_t));
  return NULL;
}

static uint32_t pw_reshard_unreduced(const pw_sharding_t* s) {
  return s->kind == PW_SHARDING_TILED ? s->unreduced_axes : 0;
}

/* Partial sums: the destination may keep some of the source's unreduced
 * axes (on the same mesh, where an axis is the same axis) and reduce the
 * others; it cannot gain any (a reduced value has no partial sums to
 * hand out). |*out_reduce|: how many source partial sums add up to each
 * destination element (1: none are added). */
pw_status_t pw__reshard_check_partials(const pw_array_spec_t* src,
                                       const pw_mesh_shape_t* src_mesh,
                                       const pw_array_spec_t* dst,
                                       const pw_mesh_shape_t* dst_mesh, uint32_t* out_reduce) {
  *out_reduce = 1;
  uint32_t ps = pw_sharding_partial_count(&src->sharding, src_mesh);
  uint32_t pd = pw_sharding_partial_count(&dst->sharding, dst_mesh);
  if (ps <= 1 && pd <= 1) return NULL;
  uint32_t su = pw_reshard_unreduced(&src->sharding);
  uint32_t du = pw_reshard_unreduced(&dst->sharding);
  bool same_mesh = pw_mesh_shape_equal(src_mesh, dst_mesh);
  if (pd <= 1 || (same_mesh && (du & ~su) == 0)) {
    *out_reduce = ps / (pd ? pd : 1);
    return NULL;
  }
  char a[128], b[128];
  pw_sharding_format_named(&src->sharding, src_mesh, a, sizeof(a));
  pw_sharding_format_named(&dst->sharding, dst_mesh, b, sizeof(b));
  if (ps <= 1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "resharding %s -> %s: the source is reduced and the destination holds "
                          "partial sums; a transfer does not split a value into partial sums "
                          "(a computation makes them)",
                          a, b);
  }
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                        "resharding %s -> %s: the destination holds partial sums over axes the "
                        "source does not%s; a transfer may keep or reduce the source's "
                        "unreduced axes, not add others",
                        a, b, same_mesh ? "" : " (or over another mesh)");
}

/* Whether device |j| of |dst_mesh| (holding partial |du| coordinates)
 * adds up the partial sum that source device |i| holds: they agree along
 * every axis the destination keeps unreduced (the same mesh then). */
static bool pw_reshard_partial_matches(const pw_mesh_shape_t* mesh, uint32_t du, uint32_t i,
                                       uint32_t j) {
  for (uint32_t a = 0; du != 0 && a < mesh->rank; ++a) {
    if ((du >> a & 1u) && pw_mesh_coordinate(mesh, i, a) != pw_mesh_coordinate(mesh, j, a)) {
      return false;
    }
  }
  return true;
}

/* Copy records one transfer may have (88 bytes each): 2^22 is e.g. 2,048
 * destination devices each reading from 2,048 source blocks. */
#define PW_RESHARD_MAX_COPIES (1u << 22)

/* The copies found so far: in |embedded| until there are more (a transfer
 * between equal or simple shardings has a few per destination). */
typedef struct pw_copy_list_t {
  pw_allocator_t allocator;
  pw_plan_copy_t* items;
  uint32_t count;
  uint32_t capacity;
  pw_plan_copy_t embedded[8];
} pw_copy_list_t;

static void pw_copy_list_free(pw_copy_list_t* list) {
  if (list->items != list->embedded) {
    pw_allocator_free(list->allocator, list->items, list->capacity * sizeof(pw_plan_copy_t));
  }
}

static pw_status_t pw_copy_list_add(pw_copy_list_t* list, pw_plan_copy_t copy) {
  if (list->count > 0 && copy.stride_count == 0) {
    pw_plan_copy_t* last = &list->items[list->count - 1];
    if (last->stride_count == 0 && last->src_index == copy.src_index &&
        last->dst_index == copy.dst_index &&
        last->src_offset + last->size == copy.src_offset &&
        last->dst_offset + last->size == copy.dst_offset) {
      last->size += copy.size;
      return NULL;
    }
  }
  if (list->count == list->capacity) {
    if (list->capacity >= PW_RESHARD_MAX_COPIES) {
      return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                            "resharding needs more than 2^22 copy records (one per pair of "
                            "intersecting shards)");
    }
    uint32_t capacity = list->capacity * 2;
    pw_plan_copy_t* grown = NULL;
    PW_RETURN_IF_ERROR(pw_allocator_malloc(list->allocator, capacity * sizeof(pw_plan_copy_t),
                                           0, (void**)&grown));
    if (list->count) memcpy(grown, list->items, list->count * sizeof(pw_plan_copy_t));
    pw_copy_list_free(list);
    list->items = grown;
    list->capacity = capacity;
  }
  list->items[list->count++] = copy;
  return NULL;
}

/* Emits the copies of |region| from the source shard box |sbox| to the
 * destination shard box |dbox| as one strided record (more only if the
 * region needs more levels than a record has, which two boxes of
 * one-axis splits never do). Offsets and strides are in bytes and below
 * the shards' byte sizes, which pw_array_spec_byte_sizes bounded, so
 * none of the products wraps. */
static pw_status_t pw_reshard_region(pw_copy_list_t* list, uint32_t rank, size_t elem,
                                     const pw_box_t* region, const pw_box_t* sbox,
                                     const pw_box_t* dbox, uint32_t src_index,
                                     uint32_t dst_index) {
  pw_plan_copy_t c;
  memset(&c, 0, sizeof(c));
  c.src_index = src_index;
  c.dst_index = dst_index;
  c.size = elem;
  if (rank == 0) return pw_copy_list_add(list, c);
  int64_t ext[PW_MAX_RANK], sdim[PW_MAX_RANK], ddim[PW_MAX_RANK];
  for (uint32_t m = 0; m < rank; ++m) {
    ext[m] = region->hi[m] - region->lo[m];
    sdim[m] = sbox->hi[m] - sbox->lo[m];
    ddim[m] = dbox->hi[m] - dbox->lo[m];
  }
  /* k: the first dimension of the row; everything after it is covered in
   * full by the region in both shards. */
  uint32_t k = rank - 1;
  while (k > 0 && ext[k] == sdim[k] && ext[k] == ddim[k]) --k;
  for (uint32_t m = k; m < rank; ++m) c.size *= (size_t)ext[m];
  size_t sstride[PW_MAX_RANK], dstride[PW_MAX_RANK];
  sstride[rank - 1] = dstride[rank - 1] = elem;
  for (uint32_t m = rank - 1; m-- > 0;) {
    sstride[m] = sstride[m + 1] * (size_t)sdim[m + 1];
    dstride[m] = dstride[m + 1] * (size_t)ddim[m + 1];
  }
  for (uint32_t m = 0; m < rank; ++m) {
    c.src_offset += (size_t)(region->lo[m] - sbox->lo[m]) * sstride[m];
    c.dst_offset += (size_t)(region->lo[m] - dbox->lo[m]) * dstride[m];
  }
  /* The dimensions before k are the levels: drop those of one index and
   * merge a level into the one outside it when they are one arithmetic
   * progression in both shards. */
  pw_transport_stride_t levels[PW_MAX_RANK];
  uint32_t n = 0;
  for (uint32_t m = 0; m < k; ++m) {
    if (ext[m] == 1) continue;
    pw_transport_stride_t l = {(size_t)ext[m], sstride[m], dstride[m]};
    levels[n++] = l;
    while (n >= 2 && levels[n - 2].src_stride == levels[n - 1].count * levels[n - 1].src_stride &&
           levels[n - 2].dst_stride == levels[n - 1].count * levels[n - 1].dst_stride) {
      levels[n - 2].count *= levels[n - 1].count;
      levels[n - 2].src_stride = levels[n - 1].src_stride;
      levels[n - 2].dst_stride = levels[n - 1].dst_stride;
      --n;
    }
  }
  /* Rows that follow each other in both shards are one longer row. */
  if (n > 0 && levels[n - 1].src_stride == c.size && levels[n - 1].dst_stride == c.size) {
    c.size *= levels[--n].count;
  }
  /* Levels beyond a record's are walked here, one record per index. */
  uint32_t outer = n > PW_TRANSPORT_MAX_STRIDES ? n - PW_TRANSPORT_MAX_STRIDES : 0;
  c.stride_count = n - outer;
  for (uint32_t i = 0; i < c.stride_count; ++i) c.strides[i] = levels[outer + i];
  size_t idx[PW_MAX_RANK] = {0};
  size_t src_base = c.src_offset, dst_base = c.dst_offset;
  for (;;) {
    PW_RETURN_IF_ERROR(pw_copy_list_add(list, c));
    uint32_t m = outer;
    while (m-- > 0) {
      if (++idx[m] < levels[m].count) break;
      idx[m] = 0;
      if (m == 0) return NULL;
    }
    if (outer == 0) return NULL;
    c.src_offset = src_base;
    c.dst_offset = dst_base;
    for (uint32_t i = 0; i < outer; ++i) {
      c.src_offset += idx[i] * levels[i].src_stride;
      c.dst_offset += idx[i] * levels[i].dst_stride;
    }
  }
}

pw_status_t pw__reshard_plan(pw_allocator_t allocator, const pw_array_spec_t* src,
                             const pw_mesh_shape_t* src_mesh, const pw_array_spec_t* dst,
                             const pw_mesh_shape_t* dst_mesh, pw_plan_copy_t** out_copies,
                             uint32_t* out_count, uint32_t** out_start, uint32_t* out_reduce) {
  *out_copies = NULL;
  *out_count = 0;
  *out_start = NULL;
  *out_reduce = 1;
  uint32_t reduce = 1;
  PW_RETURN_IF_ERROR(pw__reshard_check_partials(src, src_mesh, dst, dst_mesh, &reduce));
  uint32_t rank = src->shape.rank;
  size_t elem = pw_dtype_size(src->dtype);
  uint32_t dst_devices = pw_mesh_shape_device_count(dst_mesh);
  uint32_t partials = pw_sharding_partial_count(&src->sharding, src_mesh);
  uint32_t du = pw_reshard_unreduced(&dst->sharding);
  size_t dst_shard_bytes = elem;
  pw_shape_t dshape = pw_sharding_shard_shape(&dst->sharding, &dst->shape, dst_mesh);
  for (uint32_t m = 0; m < rank; ++m) dst_shard_bytes *= (size_t)dshape.dims[m];
  pw_reshard_sources_t sources;
  PW_RETURN_IF_ERROR(pw_reshard_sources(allocator, src, src_mesh, &sources));
  pw_copy_list_t list;
  list.allocator = allocator;
  list.items = list.embedded;
  list.count = 0;
  list.capacity = sizeof(list.embedded) / sizeof(list.embedded[0]);
  uint32_t* start = NULL;
  pw_status_t status = pw_allocator_calloc_array(allocator, dst_devices + 1, sizeof(uint32_t), 0,
                                                 (void**)&start);
  for (uint32_t j = 0; status == NULL && j < dst_devices; ++j) {
    start[j] = list.count;
    pw_box_t dbox = pw_reshard_box(dst, dst_mesh, j);
    /* The partial sums of one block that j adds up, in order: the first
     * lands in the shard, the k-th in scratch slot k (at k shard sizes,
     * pw_plan_op_t.reduce). */
    uint32_t block = UINT32_MAX, slot = 0;
    for (uint32_t v = 0; status == NULL && v < sources.count; ++v) {
      const uint32_t* replicas = &sources.devices[sources.first[v]];
      uint32_t replica_count = sources.first[v + 1] - sources.first[v];
      if (partials > 1 && !pw_reshard_partial_matches(dst_mesh, du, replicas[0], j)) continue;
      if (v / partials != block) {
        block = v / partials;
        slot = 0;
      } else {
        ++slot;
      }
      pw_box_t sbox = pw_reshard_box(src, src_mesh, replicas[0]);
      pw_box_t region;
      bool empty = false;
      for (uint32_t m = 0; m < rank; ++m) {
        region.lo[m] = sbox.lo[m] > dbox.lo[m] ? sbox.lo[m] : dbox.lo[m];
        region.hi[m] = sbox.hi[m] < dbox.hi[m] ? sbox.hi[m] : dbox.hi[m];
        empty |= region.lo[m] >= region.hi[m];
      }
      if (empty) continue;
      /* Among the replicas of the value, read from replica j mod count. */
      uint32_t i = replicas[j % replica_count];
      uint32_t first = list.count;
      status = pw_reshard_region(&list, rank, elem, &region, &sbox, &dbox, i, j);
      for (uint32_t c = first; status == NULL && slot > 0 && c < list.count; ++c) {
        list.items[c].dst_offset += slot * dst_shard_bytes;
      }
    }
  }
  pw_reshard_sources_free(allocator, &sources);
  if (status != NULL) {
    pw_copy_list_free(&list);
    pw_allocator_free(allocator, start, (dst_devices + 1) * sizeof(uint32_t));
    return status;
  }
  start[dst_devices] = list.count;
  /* Shrink to the exact size so the plan frees with a known size. */
  pw_plan_copy_t* exact = NULL;
  if (list.count > 0) {
    status = pw_allocator_malloc(allocator, list.count * sizeof(pw_plan_copy_t), 0,
                                 (void**)&exact);
    if (status == NULL) memcpy(exact, list.items, list.count * sizeof(pw_plan_copy_t));
  }
  pw_copy_list_free(&list);
  if (status != NULL) {
    pw_allocator_free(allocator, start, (dst_devices + 1) * sizeof(uint32_t));
    return status;
  }
  *out_copies = exact;
  *out_count = list.count;
  *out_start = start;
  *out_reduce = reduce;
  return NULL;
}
