/* Seeded random resharding cases and their checks (reshard_cases.h). */
#include "runtime/reshard_cases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t reshard_next(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint32_t reshard_below(uint64_t* state, uint32_t n) {
  return (uint32_t)(reshard_next(state) % n);
}

/* A mesh of |count| devices (2, 4, 6 or 8) of rank 1-3: its prime
 * factors spread over random axes (axes of size 1 included). */
static pw_mesh_shape_t reshard_mesh(uint64_t* rng, uint32_t count) {
  uint32_t rank = 1 + reshard_below(rng, 3);
  uint32_t dims[3] = {1, 1, 1};
  uint32_t primes[3], n = 0;
  for (uint32_t left = count, p = 2; left > 1;) {
    if (left % p == 0) {
      primes[n++] = p;
      left /= p;
    } else {
      ++p;
    }
  }
  for (uint32_t i = 0; i < n; ++i) dims[reshard_below(rng, rank)] *= primes[i];
  return pw_mesh_shape_make(rank, dims);
}

static const uint32_t reshard_counts[4] = {2, 4, 6, 8};

/* A random sharding for a rank-|rank| array over |mesh|. Tiles never use
 * the axes of |forbid|; |unreduced_from| (non-zero) makes it TILED and
 * unreduced over a random subset of those axes; |unreduced| lets a TILED
 * sharding hold partial sums over random axes. */
static pw_sharding_t reshard_sharding(uint64_t* rng, uint32_t rank, const pw_mesh_shape_t* mesh,
                                      bool unreduced, uint32_t unreduced_from) {
  uint32_t kind = unreduced || unreduced_from ? 3 : reshard_below(rng, 4);
  if (kind == 0) return pw_sharding_replicated();
  if (kind == 1) return pw_sharding_split(reshard_below(rng, rank), reshard_below(rng, mesh->rank));
  if (kind == 2) return pw_sharding_split(reshard_below(rng, rank), PW_MESH_AXIS_ALL);
  uint32_t perm[PW_MAX_MESH_RANK];
  for (uint32_t a = 0; a < mesh->rank; ++a) perm[a] = a;
  for (uint32_t a = mesh->rank; a-- > 1;) {
    uint32_t b = reshard_below(rng, a + 1), t = perm[a];
    perm[a] = perm[b];
    perm[b] = t;
  }
  pw_sharding_tile_t tiles[PW_MAX_MESH_RANK];
  uint32_t n = 0, mask = 0;
  uint32_t keep = unreduced_from ? (uint32_t)reshard_next(rng) & unreduced_from : 0;
  for (uint32_t i = 0; i < mesh->rank; ++i) {
    uint32_t a = perm[i];
    if (unreduced_from >> a & 1u) {
      mask |= keep & (1u << a);
      continue;
    }
    uint32_t r = reshard_below(rng, 20);
    if (r < (unreduced ? 8u : 11u)) {
      tiles[n].tensor_axis = (uint8_t)reshard_below(rng, rank);
      tiles[n].mesh_axis = (uint8_t)a;
      ++n;
    } else if (unreduced && r < 15) {
      mask |= 1u << a;
    }
  }
  return pw_sharding_tiled(n, tiles, mask);
}

/* How many parts |s| cuts each tensor dimension into over |mesh|. */
static void reshard_parts(const pw_sharding_t* s, const pw_mesh_shape_t* mesh, int64_t* parts) {
  if (s->kind == PW_SHARDING_SPLIT) {
    parts[s->tensor_axis] *= s->mesh_axis == PW_MESH_AXIS_ALL ? pw_mesh_shape_device_count(mesh)
                                                              : mesh->dims[s->mesh_axis];
  } else if (s->kind == PW_SHARDING_TILED) {
    for (uint32_t i = 0; i < s->tile_count; ++i) {
      parts[s->tiles[i].tensor_axis] *= mesh->dims[s->tiles[i].mesh_axis];
    }
  }
}

void reshard_case_make(uint64_t seed, bool unreduced, reshard_case_t* out) {
  memset(out, 0, sizeof(*out));
  uint64_t rng = seed * 0x2545F4914F6CDD1Dull + 1;
  out->seed = seed;
  out->placement = reshard_below(&rng, 3);
  uint32_t src_count = reshard_counts[reshard_below(&rng, 4)];
  uint32_t dst_count = src_count;
  if (out->placement == RESHARD_OTHER_COUNT) {
    while (dst_count == src_count) dst_count = reshard_counts[reshard_below(&rng, 4)];
  }
  out->src_mesh = reshard_mesh(&rng, src_count);
  bool same_mesh = out->placement != RESHARD_OTHER_COUNT && reshard_below(&rng, 2) == 0;
  out->dst_mesh = same_mesh ? out->src_mesh : reshard_mesh(&rng, dst_count);
  same_mesh = pw_mesh_shape_equal(&out->src_mesh, &out->dst_mesh);
  uint32_t rank = 1 + reshard_below(&rng, 4);
  static const pw_dtype_t dtypes[4] = {PW_DTYPE_F32, PW_DTYPE_I32, PW_DTYPE_F64, PW_DTYPE_I64};
  pw_dtype_t dtype = dtypes[reshard_below(&rng, 4)];
  pw_sharding_t s = reshard_sharding(&rng, rank, &out->src_mesh, unreduced, 0);
  uint32_t su = s.kind == PW_SHARDING_TILED ? s.unreduced_axes : 0;
  /* On the same mesh, a destination may keep some unreduced axes. */
  bool keep = su != 0 && same_mesh && reshard_below(&rng, 2) == 0;
  pw_sharding_t d = reshard_sharding(&rng, rank, &out->dst_mesh, false, keep ? su : 0);
  int64_t ps[PW_MAX_RANK], pd[PW_MAX_RANK], dims[PW_MAX_RANK];
  for (uint32_t t = 0; t < rank; ++t) ps[t] = pd[t] = 1;
  reshard_parts(&s, &out->src_mesh, ps);
  reshard_parts(&d, &out->dst_mesh, pd);
  int64_t total = 1;
  for (uint32_t t = 0; t < rank; ++t) {
    dims[t] = ps[t] * pd[t] * (1 + reshard_below(&rng, 3));
    total *= dims[t];
  }
  if (total > 8192) {
    for (uint32_t t = 0; t < rank; ++t) dims[t] = ps[t] * pd[t];
  }
  out->src.dtype = out->dst.dtype = dtype;
  out->src.shape = out->dst.shape = pw_shape_make(rank, dims);
  out->src.sharding = s;
  out->dst.sharding = d;
}

void reshard_case_describe(const reshard_case_t* c, char* buffer, size_t capacity) {
  static const char* where[3] = {"same slice", "other slice", "other device count"};
  char shape[96], a[128], b[128], ma[64], mb[64];
  pw_shape_format(c->src.dtype, &c->src.shape, shape, sizeof(shape));
  pw_sharding_format(&c->src.sharding, a, sizeof(a));
  pw_sharding_format(&c->dst.sharding, b, sizeof(b));
  pw_mesh_shape_format(&c->src_mesh, ma, sizeof(ma));
  pw_mesh_shape_format(&c->dst_mesh, mb, sizeof(mb));
  snprintf(buffer, capacity, "seed %llu: %s %s over %s -> %s over %s (%s)",
           (unsigned long long)c->seed, shape, a, ma, b, mb, where[c->placement]);
}

int64_t reshard_value(int64_t e, uint32_t p, uint32_t partials) {
  if (partials <= 1) return e + 1;
  if (p > 0) return (e * 7 + p * 13) % 5 + p;
  int64_t rest = e + 1;
  for (uint32_t q = 1; q < partials; ++q) rest -= (e * 7 + q * 13) % 5 + q;
  return rest;
}

static void reshard_put(pw_dtype_t dtype, void* data, size_t i, int64_t v) {
  switch (dtype) {
    case PW_DTYPE_F32: ((float*)data)[i] = (float)v; return;
    case PW_DTYPE_F64: ((double*)data)[i] = (double)v; return;
    case PW_DTYPE_I32: ((int32_t*)data)[i] = (int32_t)v; return;
    default: ((int64_t*)data)[i] = v; return;
  }
}

static int64_t reshard_get(pw_dtype_t dtype, const void* data, size_t i) {
  switch (dtype) {
    case PW_DTYPE_F32: return (int64_t)((const float*)data)[i];
    case PW_DTYPE_F64: return (int64_t)((const double*)data)[i];
    case PW_DTYPE_I32: return ((const int32_t*)data)[i];
    default: return ((const int64_t*)data)[i];
  }
}

/* Calls |fn| for each element of device |device|'s shard in row-major
 * order with its local index and global linear index. */
typedef void (*reshard_visit_fn)(void* user, size_t local, int64_t global);
static void reshard_visit(const pw_array_spec_t* spec, const pw_mesh_shape_t* mesh,
                          uint32_t device, reshard_visit_fn fn, void* user) {
  int64_t off[PW_MAX_RANK];
  pw_sharding_shard_offsets(&spec->sharding, &spec->shape, mesh, device, off);
  pw_shape_t shard = pw_sharding_shard_shape(&spec->sharding, &spec->shape, mesh);
  uint32_t rank = spec->shape.rank;
  int64_t n = pw_shape_element_count(&shard);
  for (int64_t local = 0; local < n; ++local) {
    int64_t rest = local, global = 0, stride = 1;
    for (uint32_t k = rank; k-- > 0;) {
      int64_t idx = rest % shard.dims[k] + off[k];
      rest /= shard.dims[k];
      global += idx * stride;
      stride *= spec->shape.dims[k];
    }
    fn(user, (size_t)local, global);
  }
}

typedef struct reshard_fill_t {
  const reshard_case_t* c;
  void* out;
  uint32_t partial;
  uint32_t partials;
  uint32_t mask;        /* expected: the source partial indices added */
} reshard_fill_t;

static void reshard_fill_source(void* user, size_t local, int64_t global) {
  reshard_fill_t* f = user;
  reshard_put(f->c->src.dtype, f->out, local, reshard_value(global, f->partial, f->partials));
}

static void reshard_fill_expected(void* user, size_t local, int64_t global) {
  reshard_fill_t* f = user;
  int64_t sum = 0;
  for (uint32_t p = 0; p < f->partials; ++p) {
    if (f->mask >> p & 1u) sum += reshard_value(global, p, f->partials);
  }
  reshard_put(f->c->dst.dtype, f->out, local, sum);
}

void reshard_source_shard(const reshard_case_t* c, uint32_t i, void* out) {
  reshard_fill_t f = {c, out, pw_sharding_partial_index(&c->src.sharding, &c->src_mesh, i),
                      pw_sharding_partial_count(&c->src.sharding, &c->src_mesh), 0};
  reshard_visit(&c->src, &c->src_mesh, i, reshard_fill_source, &f);
}

void reshard_expected_shard(const reshard_case_t* c, uint32_t j, void* out) {
  reshard_fill_t f = {c, out, 0, pw_sharding_partial_count(&c->src.sharding, &c->src_mesh), 0};
  uint32_t du = c->dst.sharding.kind == PW_SHARDING_TILED ? c->dst.sharding.unreduced_axes : 0;
  /* The source partial sums device j adds: those of the source devices
   * that agree with j along the axes the destination keeps unreduced. */
  uint32_t n = pw_mesh_shape_device_count(&c->src_mesh);
  for (uint32_t i = 0; i < n; ++i) {
    bool match = true;
    for (uint32_t a = 0; a < c->dst_mesh.rank; ++a) {
      if ((du >> a & 1u) &&
          pw_mesh_coordinate(&c->src_mesh, i, a) != pw_mesh_coordinate(&c->dst_mesh, j, a)) {
        match = false;
      }
    }
    if (match) f.mask |= 1u << pw_sharding_partial_index(&c->src.sharding, &c->src_mesh, i);
  }
  reshard_visit(&c->dst, &c->dst_mesh, j, reshard_fill_expected, &f);
}

/* The rows of record |r|: calls |fn| with each row's offsets. */
typedef bool (*reshard_row_fn)(void* user, const pw_plan_copy_t* r, size_t src, size_t dst);
static bool reshard_rows(const pw_plan_copy_t* r, reshard_row_fn fn, void* user) {
  size_t c0 = r->stride_count > 0 ? r->strides[0].count : 1;
  size_t c1 = r->stride_count > 1 ? r->strides[1].count : 1;
  for (size_t a = 0; a < c0; ++a) {
    for (size_t b = 0; b < c1; ++b) {
      size_t so = r->src_offset, d = r->dst_offset;
      if (r->stride_count > 0) so += a * r->strides[0].src_stride, d += a * r->strides[0].dst_stride;
      if (r->stride_count > 1) so += b * r->strides[1].src_stride, d += b * r->strides[1].dst_stride;
      if (!fn(user, r, so, d)) return false;
    }
  }
  return true;
}

typedef struct reshard_exec_t {
  size_t src_bytes, dst_bytes;      /* one source shard; one destination shard x reduce */
  unsigned char* src;               /* every source shard */
  unsigned char* dst;               /* this destination's shard and scratch slots */
  unsigned char* written;           /* per destination byte */
  char* why;
  size_t why_size;
} reshard_exec_t;

static bool reshard_exec_row(void* user, const pw_plan_copy_t* r, size_t so, size_t d) {
  reshard_exec_t* x = user;
  if (so > x->src_bytes || r->size > x->src_bytes - so || d > x->dst_bytes ||
      r->size > x->dst_bytes - d) {
    snprintf(x->why, x->why_size,
             "record %u -> %u: row src [%zu, +%zu) of %zu or dst [%zu, +%zu) of %zu is outside",
             r->src_index, r->dst_index, so, r->size, x->src_bytes, d, r->size, x->dst_bytes);
    return false;
  }
  for (size_t k = 0; k < r->size; ++k) {
    if (x->written[d + k]++) {
      snprintf(x->why, x->why_size, "destination %u byte %zu written twice", r->dst_index, d + k);
      return false;
    }
  }
  memcpy(x->dst + d, x->src + (size_t)r->src_index * x->src_bytes + so, r->size);
  return true;
}

bool reshard_plan_check(const reshard_case_t* c, const pw_plan_copy_t* copies, uint32_t count,
                        const uint32_t* start, uint32_t reduce, char* why, size_t why_size) {
  uint32_t ns = pw_mesh_shape_device_count(&c->src_mesh);
  uint32_t nd = pw_mesh_shape_device_count(&c->dst_mesh);
  uint32_t ps = pw_sharding_partial_count(&c->src.sharding, &c->src_mesh);
  uint32_t pd = pw_sharding_partial_count(&c->dst.sharding, &c->dst_mesh);
  if (reduce != ps / pd) {
    snprintf(why, why_size, "reduce %u, expected %u", reduce, ps / pd);
    return false;
  }
  size_t ss = 0, sd = 0;
  pw_status_t st = pw_array_spec_byte_sizes(&c->src, &c->src_mesh, NULL, &ss);
  if (st == NULL) st = pw_array_spec_byte_sizes(&c->dst, &c->dst_mesh, NULL, &sd);
  if (st != NULL) {
    snprintf(why, why_size, "spec: %s", pw_status_message(st));
    pw_status_free(st);
    return false;
  }
  size_t elem = pw_dtype_size(c->src.dtype);
  reshard_exec_t x = {ss, sd * reduce, malloc(ns * ss + 1), malloc(sd * reduce + 1),
                      malloc(sd * reduce + 1), why, why_size};
  unsigned char* want = malloc(sd + 1);
  uint32_t* pairs = calloc(ns, sizeof(uint32_t));
  bool ok = x.src && x.dst && x.written && want && pairs;
  for (uint32_t i = 0; ok && i < ns; ++i) reshard_source_shard(c, i, x.src + (size_t)i * ss);
  uint64_t moved = 0;
  if (ok && (start[0] != 0 || start[nd] != count)) {
    snprintf(why, why_size, "start[0] %u, start[%u] %u of %u records", start[0], nd, start[nd],
             count);
    ok = false;
  }
  /* A region needs more levels than a record has only past rank 3. */
  uint32_t per_pair = 1;
  for (uint32_t k = 0; k < c->src.shape.rank; ++k) {
    if (c->src.shape.rank > 3 && (uint32_t)c->src.shape.dims[k] > per_pair) {
      per_pair = (uint32_t)c->src.shape.dims[k];
    }
  }
  for (uint32_t j = 0; ok && j < nd; ++j) {
    memset(x.dst, 0, sd * reduce);
    memset(x.written, 0, sd * reduce);
    memset(pairs, 0, ns * sizeof(uint32_t));
    for (uint32_t r = start[j]; ok && r < start[j + 1]; ++r) {
      const pw_plan_copy_t* rec = &copies[r];
      if (rec->dst_index != j || rec->src_index >= ns || rec->stride_count > 2) {
        snprintf(why, why_size, "record %u: %u -> %u (%u levels) under destination %u", r,
                 rec->src_index, rec->dst_index, rec->stride_count, j);
        ok = false;
        break;
      }
      if (++pairs[rec->src_index] > per_pair) {
        snprintf(why, why_size, "%u records from source %u to destination %u (at most %u)",
                 pairs[rec->src_index], rec->src_index, j, per_pair);
        ok = false;
        break;
      }
      uint64_t rows = 1;
      for (uint32_t k = 0; k < rec->stride_count; ++k) rows *= rec->strides[k].count;
      moved += rows * rec->size;
      ok = reshard_rows(rec, reshard_exec_row, &x);
    }
    for (size_t b = 0; ok && b < sd * reduce; ++b) {
      if (!x.written[b]) {
        snprintf(why, why_size, "destination %u byte %zu (slot %zu) never written", j, b % sd,
                 b / sd);
        ok = false;
      }
    }
    /* The scratch slots added into the shard, as accumulate does. */
    for (uint32_t k = 1; ok && k < reduce; ++k) {
      for (size_t e = 0; e < sd / elem; ++e) {
        int64_t v = reshard_get(c->dst.dtype, x.dst, e) +
                    reshard_get(c->dst.dtype, x.dst + k * sd, e);
        reshard_put(c->dst.dtype, x.dst, e, v);
      }
    }
    if (ok) {
      reshard_expected_shard(c, j, want);
      for (size_t e = 0; e < sd / elem; ++e) {
        if (reshard_get(c->dst.dtype, x.dst, e) != reshard_get(c->dst.dtype, want, e)) {
          snprintf(why, why_size, "destination %u element %zu: plan gives %lld, expected %lld", j,
                   e, (long long)reshard_get(c->dst.dtype, x.dst, e),
                   (long long)reshard_get(c->dst.dtype, want, e));
          ok = false;
          break;
        }
      }
    }
  }
  if (ok && moved != (uint64_t)nd * sd * reduce) {
    snprintf(why, why_size, "%llu bytes moved, the minimum is %llu", (unsigned long long)moved,
             (unsigned long long)nd * sd * reduce);
    ok = false;
  }
  free(x.src);
  free(x.dst);
  free(x.written);
  free(want);
  free(pairs);
  return ok;
}

bool reshard_plan_run(const reshard_case_t* c, char* why, size_t why_size) {
  pw_plan_copy_t* copies = NULL;
  uint32_t count = 0, reduce = 0;
  uint32_t* start = NULL;
  pw_allocator_t a = pw_allocator_system();
  pw_status_t st = pw__reshard_plan(a, &c->src, &c->src_mesh, &c->dst, &c->dst_mesh, &copies,
                                    &count, &start, &reduce);
  if (st != NULL) {
    snprintf(why, why_size, "pw__reshard_plan: %s", pw_status_message(st));
    pw_status_free(st);
    return false;
  }
  bool ok = reshard_plan_check(c, copies, count, start, reduce, why, why_size);
  if (copies) pw_allocator_free(a, copies, count * sizeof(pw_plan_copy_t));
  pw_allocator_free(a, start, (pw_mesh_shape_device_count(&c->dst_mesh) + 1) * sizeof(uint32_t));
  return ok;
}
