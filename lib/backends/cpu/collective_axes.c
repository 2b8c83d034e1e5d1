/* Collectives over named mesh axes: the `over AXES` forms of all_reduce_sum,
 * all_reduce_mean, all_gather, reduce_scatter and all_to_all.
 *
 * These keep the global view: input 0 and output 0 are the same global
 * array (same shape), and the collective only changes how it is laid out
 * over the axes A it runs over (JAX's psum / all_gather / psum_scatter /
 * all_to_all over named axes, in the global view of shardings):
 *
 *   all_reduce_sum/_mean   x unreduced over A -> y reduced over A (same
 *                          tiles); the mean divides the sum by |A|
 *   all_gather             x split over A (on some dimensions) -> y not
 *                          split over A
 *   reduce_scatter         x unreduced over A -> y reduced over A and split
 *                          over A
 *   all_to_all             x split over A on some dimensions -> y split
 *                          over A on other ones
 *
 * The group of a device is the devices that differ from it only along A
 * (collective.c); only they meet. For every dimension, the axes not in A
 * must split it alike in x and y (a collective over A cannot move data
 * between groups), and the axes of A come after (minor to) them, so the
 * union of the group's blocks along each dimension is one contiguous
 * range that holds every output block of the group.
 *
 * The computation (by the last member to arrive, outside the lock) is one
 * routine for every form: each member's output block is assembled row by
 * row from the members' input blocks that hold it, copying (gather forms:
 * exactly one member holds each element) or adding in position order
 * (reductions: every member holds it, a partial sum each; integers wrap,
 * f16/bf16 add in f32 and round once). */
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu_dtypes.h"
#include "backends/cpu/cpu_internal.h"

/*---------------------------------------------------------------------------
 * Signatures
 *-------------------------------------------------------------------------*/

static void pw_cpu_axis_name(const pw_mesh_shape_t* mesh, uint32_t axis, char* buffer,
                             size_t capacity) {
  pw_mesh_axis_format(mesh, axis, buffer, capacity);
}

/* The mesh axes splitting dimension |dim| of |s| (normalized), in order. */
static uint32_t pw_cpu_dim_axes(const pw_sharding_t* s, uint32_t dim, uint8_t* out_axes) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < s->tile_count; ++i) {
    if (s->tiles[i].tensor_axis == dim) out_axes[n++] = s->tiles[i].mesh_axis;
  }
  return n;
}

/* The dimension mesh axis |axis| splits in |s|, or -1. */
static int pw_cpu_axis_dim(const pw_sharding_t* s, uint32_t axis) {
  for (uint32_t i = 0; i < s->tile_count; ++i) {
    if (s->tiles[i].mesh_axis == axis) return (int)s->tiles[i].tensor_axis;
  }
  return -1;
}

/* Per dimension: the axes outside |over| split it alike in |xn| and |yn|,
 * and the axes of |over| come after them. */
static pw_status_t pw_cpu_check_groups(const pw_sharding_t* xn, const pw_sharding_t* yn,
                                       uint32_t rank, uint32_t over,
                                       const pw_mesh_shape_t* mesh) {
  for (uint32_t dim = 0; dim < rank; ++dim) {
    uint8_t lists[2][PW_MAX_MESH_RANK];
    uint32_t counts[2] = {pw_cpu_dim_axes(xn, dim, lists[0]),
                          pw_cpu_dim_axes(yn, dim, lists[1])};
    uint8_t kept[2][PW_MAX_MESH_RANK];
    uint32_t kept_counts[2] = {0, 0};
    for (int p = 0; p < 2; ++p) {
      bool seen_over = false;
      for (uint32_t i = 0; i < counts[p]; ++i) {
        uint32_t axis = lists[p][i];
        if (over >> axis & 1u) {
          seen_over = true;
          continue;
        }
        if (seen_over) {
          char name[PW_MESH_AXIS_NAME_MAX + 8];
          pw_cpu_axis_name(mesh, axis, name, sizeof(name));
          return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                                "dimension %u of %s 0: mesh axis '%s' (not in 'over') "
                                "splits it after an axis of 'over'; list the 'over' "
                                "axes last (minor) in each dimension",
                                dim, p == 0 ? "input" : "output", name);
        }
        kept[p][kept_counts[p]++] = (uint8_t)axis;
      }
    }
    if (kept_counts[0] != kept_counts[1] ||
        memcmp(kept[0], kept[1], kept_counts[0]) != 0) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "dimension %u: the mesh axes not in 'over' must split it "
                            "alike in input 0 and output 0 (a collective over these "
                            "axes cannot change them)",
                            dim);
    }
  }
  return NULL;
}

/* all_reduce / reduce_scatter: every axis of |over| holds partial sums in
 * x, none is left in y. */
static pw_status_t pw_cpu_check_sums(const pw_sharding_t* xn, const pw_sharding_t* yn,
                                     uint32_t over, const pw_mesh_shape_t* mesh,
                                     const char* text) {
  for (uint32_t a = 0; a < mesh->rank; ++a) {
    if (!(over >> a & 1u) || (xn->unreduced_axes >> a & 1u)) continue;
    char name[PW_MESH_AXIS_NAME_MAX + 8];
    pw_cpu_axis_name(mesh, a, name, sizeof(name));
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "over '%s': input 0 (%s) is not unreduced over '%s', so its "
                          "devices along '%s' hold no partial sums to add (write "
                          "input 0 as P(...) unreduced(%s))",
                          name, text, name, name, name);
  }
  if (yn->unreduced_axes != (xn->unreduced_axes & ~over)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "output 0 must be unreduced over exactly the axes of input 0 "
                          "that are not in 'over'");
  }
  return NULL;
}

/* all_gather / all_to_all: every axis of |over| splits x, none holds
 * partial sums; y keeps x's partial sums. */
static pw_status_t pw_cpu_check_moves(const pw_sharding_t* xn, const pw_sharding_t* yn,
                                      uint32_t over, const pw_mesh_shape_t* mesh,
                                      const char* text) {
  for (uint32_t a = 0; a < mesh->rank; ++a) {
    if (!(over >> a & 1u)) continue;
    char name[PW_MESH_AXIS_NAME_MAX + 8];
    pw_cpu_axis_name(mesh, a, name, sizeof(name));
    if (xn->unreduced_axes >> a & 1u) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "over '%s': input 0 (%s) holds partial sums over '%s'; "
                            "this collective moves blocks, it does not add them "
                            "(all_reduce_sum or reduce_scatter do)",
                            name, text, name);
    }
    if (pw_cpu_axis_dim(xn, a) < 0) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "over '%s': input 0 (%s) is not split over '%s'; there "
                            "is nothing to exchange along it",
                            name, text, name);
    }
  }
  if (yn->unreduced_axes != xn->unreduced_axes) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "output 0 must keep the unreduced axes of input 0");
  }
  return NULL;
}

pw_status_t pw_cpu__check_collective_axes(const pw_cpu_program_t* program,
                                          const pw_mesh_shape_t* mesh,
                                          pw_cpu__collective_t kind) {
  const pw_backend_param_t* x = &program->inputs[0];
  const pw_backend_param_t* y = &program->outputs[0];
  uint32_t over = program->over_axes;
  if (!pw_shape_equal(&x->shape, &y->shape)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "output 0 must have input 0's global shape (a collective "
                          "'over' axes changes the layout, not the array)");
  }
  pw_sharding_t xn;
  pw_sharding_t yn;
  PW_RETURN_IF_ERROR_CTX(pw_sharding_normalize(&x->sharding, &x->shape, mesh, &xn), "input 0");
  PW_RETURN_IF_ERROR_CTX(pw_sharding_normalize(&y->sharding, &y->shape, mesh, &yn), "output 0");
  char text[160];
  pw_cpu__sharding_text(&x->sharding, mesh, text, sizeof(text));
  bool sums = kind == PW_CPU__ALL_REDUCE_SUM || kind == PW_CPU__ALL_REDUCE_MEAN ||
              kind == PW_CPU__REDUCE_SCATTER;
  if (sums) {
    PW_RETURN_IF_ERROR(pw_cpu_check_sums(&xn, &yn, over, mesh, text));
  } else {
    PW_RETURN_IF_ERROR(pw_cpu_check_moves(&xn, &yn, over, mesh, text));
  }
  if (kind == PW_CPU__ALL_REDUCE_SUM || kind == PW_CPU__ALL_REDUCE_MEAN ||
      kind == PW_CPU__ALL_GATHER) {
    /* One result layout: x's tiles without those of |over|, x's partial
     * sums without |over|. */
    pw_sharding_tile_t tiles[PW_MAX_MESH_RANK];
    uint32_t count = 0;
    for (uint32_t i = 0; i < xn.tile_count; ++i) {
      if (!(over >> xn.tiles[i].mesh_axis & 1u)) tiles[count++] = xn.tiles[i];
    }
    pw_sharding_t want = pw_sharding_tiled(count, tiles, xn.unreduced_axes & ~over);
    if (!pw_sharding_equivalent(&y->sharding, &want, &y->shape, mesh)) {
      char want_text[160];
      pw_cpu__sharding_text(&want, mesh, want_text, sizeof(want_text));
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "output 0 must be %s for input 0 %s", want_text, text);
    }
  }
  for (uint32_t a = 0; a < mesh->rank; ++a) {
    if (!(over >> a & 1u)) continue;
    char name[PW_MESH_AXIS_NAME_MAX + 8];
    pw_cpu_axis_name(mesh, a, name, sizeof(name));
    int from = pw_cpu_axis_dim(&xn, a);
    int to = pw_cpu_axis_dim(&yn, a);
    if (kind == PW_CPU__REDUCE_SCATTER && to < 0) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "over '%s': output 0 must be split over '%s' (the sums "
                            "are scattered along it)",
                            name, name);
    }
    if (kind == PW_CPU__ALL_TO_ALL && (to < 0 || to == from)) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "over '%s': input 0 splits dimension %d over '%s'; "
                            "output 0 must split another dimension over it "
                            "(all_to_all moves an axis between dimensions)",
                            name, from, name);
    }
  }
  return pw_cpu_check_groups(&xn, &yn, x->shape.rank, over, mesh);
}

/*---------------------------------------------------------------------------
 * The computation
 *-------------------------------------------------------------------------*/

/* Adds |n| elements of |in| into |out| (the reductions' dtypes). */
static void pw_cpu_add_run(pw_dtype_t dtype, unsigned char* out, const unsigned char* in,
                           size_t n) {
  switch (dtype) {
    case PW_DTYPE_F32: {
      float* o = (float*)out;
      const float* i = (const float*)in;
      for (size_t k = 0; k < n; ++k) o[k] += i[k];
      break;
    }
    case PW_DTYPE_F64: {
      double* o = (double*)out;
      const double* i = (const double*)in;
      for (size_t k = 0; k < n; ++k) o[k] += i[k];
      break;
    }
#define PW_CPU_ADD_INT_CASE(DTYPE, T, U)                                \
  case DTYPE: {                                                         \
    T* o = (T*)out;                                                     \
    const T* i = (const T*)in;                                          \
    for (size_t k = 0; k < n; ++k) o[k] = (T)((U)o[k] + (U)i[k]);        \
    break;                                                              \
  }
      PW_CPU__FOR_EACH_INT(PW_CPU_ADD_INT_CASE)
#undef PW_CPU_ADD_INT_CASE
    default: break; /* half: pw_cpu_half_run; others excluded by signature */
  }
}

static void pw_cpu_divide_run(pw_dtype_t dtype, unsigned char* out, size_t n, uint32_t count) {
  if (dtype == PW_DTYPE_F32) {
    float* o = (float*)out;
    for (size_t k = 0; k < n; ++k) o[k] /= (float)count;
  } else if (dtype == PW_DTYPE_F64) {
    double* o = (double*)out;
    for (size_t k = 0; k < n; ++k) o[k] /= (double)count;
  }
}

/* f16/bf16 reductions: element by element over every member, in f32. */
static void pw_cpu_half_run(pw_dtype_t dtype, unsigned char* out, const pw_cpu__launch_t* first,
                            uint32_t members, size_t source, size_t n, bool mean) {
  for (size_t k = 0; k < n; ++k) {
    float sum = 0.0f;
    for (const pw_cpu__launch_t* m = first; m != NULL; m = m->member_next) {
      sum += pw_cpu__half_load(dtype, m->inputs[0]->data, source + k);
    }
    pw_cpu__half_store(dtype, out, k, mean ? sum / (float)members : sum);
  }
}

/* Fills one member's output block |out| (at |out_offsets|) from the
 * group's input blocks (each member's at its block_offsets). */
static void pw_cpu_fill_block(const pw_backend_executable_t exe, const pw_cpu__launch_t* first,
                              uint32_t members, const int64_t* out_offsets, unsigned char* out,
                              bool sum, bool mean) {
  const pw_shape_t* ys = &exe->output_shards[0];
  const pw_shape_t* xs = &exe->input_shards[0];
  const pw_dtype_t dtype = exe->program.outputs[0].dtype;
  const size_t element = pw_dtype_size(dtype);
  const uint32_t rank = ys->rank;
  /* A scalar is one row of one element. */
  const uint32_t last = rank ? rank - 1 : 0;
  const int64_t y_width = rank ? ys->dims[last] : 1;
  const int64_t x_width = rank ? xs->dims[last] : 1;
  const size_t rows = pw_cpu__elements(ys) / (size_t)y_width;
  int64_t coords[PW_MAX_RANK] = {0}; /* local row coordinates in y, dims < last */
  for (size_t row = 0; row < rows; ++row) {
    unsigned char* dst_row = out + row * (size_t)y_width * element;
    uint32_t position = 0;
    for (const pw_cpu__launch_t* m = first; m != NULL; m = m->member_next, ++position) {
      const int64_t* x_offsets = m->block_offsets;
      /* Does member m's x block hold this row, and at which of its rows? */
      bool holds = true;
      size_t x_row = 0;
      for (uint32_t d = 0; d < last && holds; ++d) {
        int64_t local = out_offsets[d] + coords[d] - x_offsets[d];
        holds = local >= 0 && local < xs->dims[d];
        x_row = x_row * (size_t)xs->dims[d] + (size_t)local;
      }
      if (!holds) continue;
      int64_t y_lo = rank ? out_offsets[last] : 0;
      int64_t x_lo = rank ? x_offsets[last] : 0;
      int64_t lo = y_lo > x_lo ? y_lo : x_lo;
      int64_t hi = y_lo + y_width < x_lo + x_width ? y_lo + y_width : x_lo + x_width;
      if (lo >= hi) continue;
      size_t n = (size_t)(hi - lo);
      size_t source = x_row * (size_t)x_width + (size_t)(lo - x_lo);
      unsigned char* dst = dst_row + (size_t)(lo - y_lo) * element;
      const unsigned char* src = (const unsigned char*)m->inputs[0]->data + source * element;
      if (sum && pw_cpu__is_half(dtype)) {
        /* Every member holds the run (sums: x is not split over 'over'). */
        pw_cpu_half_run(dtype, dst, first, members, source, n, mean);
        break;
      }
      if (!sum || position == 0) {
        memcpy(dst, src, n * element);
      } else {
        pw_cpu_add_run(dtype, dst, src, n);
      }
      if (sum && mean && position + 1 == members) pw_cpu_divide_run(dtype, dst, n, members);
    }
    for (uint32_t d = last; d-- > 0;) {
      if (++coords[d] < ys->dims[d]) break;
      coords[d] = 0;
    }
  }
}

void pw_cpu__collective_redistribute(pw_cpu__rendezvous_t* record) {
  pw_backend_executable_t exe = record->executable;
  const pw_backend_param_t* x = &exe->program.inputs[0];
  const pw_backend_param_t* y = &exe->program.outputs[0];
  pw_cpu__collective_t kind = exe->kernel->collective;
  bool sum = kind == PW_CPU__ALL_REDUCE_SUM || kind == PW_CPU__ALL_REDUCE_MEAN ||
             kind == PW_CPU__REDUCE_SCATTER;
  bool mean = kind == PW_CPU__ALL_REDUCE_MEAN;
  for (pw_cpu__launch_t* m = record->members; m != NULL; m = m->member_next) {
    pw_sharding_shard_offsets(&x->sharding, &x->shape, &exe->mesh, m->mesh_index,
                              m->block_offsets);
  }
  for (pw_cpu__launch_t* m = record->members; m != NULL; m = m->member_next) {
    int64_t out_offsets[PW_MAX_RANK];
    pw_sharding_shard_offsets(&y->sharding, &y->shape, &exe->mesh, m->mesh_index, out_offsets);
    pw_cpu_fill_block(exe, record->members, record->expected, out_offsets,
                      m->outputs[0]->data, sum, mean);
  }
}
