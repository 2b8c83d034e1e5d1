#define _POSIX_C_SOURCE 200809L
/* Host arrays and shards (buffer_copy.h). Host data is the global array
 * in row-major order; a device's shard is a box of it (pw_sharding_shard_offsets,
 * pw_sharding_shard_shape), which is a grid of contiguous runs: the
 * trailing dimensions the box covers in full fold into the run together
 * with the first one it does not, and the dimensions before that are the
 * grid's levels. */
#include "runtime/buffer_copy.h"

#include <string.h>

#include "core/runtime.h"
#include "plugin/backend_call.h"
#include "runtime/workers.h"

/* Geometry of device d's shard inside the global array. Every product here
 * is of some of the dimensions and the dtype size, so it is at most
 * total_bytes, which pw_array_spec_byte_sizes bounded: none can wrap. */
typedef struct pw_shard_geometry_t {
  uint32_t levels;            /* outer dimensions walked, of extent > 1 */
  size_t count[PW_MAX_RANK];  /* the shard's extent along each level */
  size_t stride[PW_MAX_RANK]; /* bytes between its indices in the global array */
  size_t outer;               /* runs per shard: the product of count */
  size_t run;                 /* bytes of one contiguous run */
  size_t base;                /* the shard's first byte in the global array */
} pw_shard_geometry_t;

static pw_shard_geometry_t pw_shard_geometry(const pw_buffer_obj_t* b, uint32_t d) {
  pw_shard_geometry_t g;
  memset(&g, 0, sizeof(g));
  g.outer = 1;
  g.run = b->total_bytes;
  const pw_shape_t* shape = &b->spec.shape;
  uint32_t rank = shape->rank;
  if (rank == 0 || b->spec.sharding.kind == PW_SHARDING_REPLICATED) return g;
  pw_shape_t shard = pw_sharding_shard_shape(&b->spec.sharding, shape, &b->mesh);
  int64_t offsets[PW_MAX_RANK];
  pw_sharding_shard_offsets(&b->spec.sharding, shape, &b->mesh, d, offsets);
  size_t gstride[PW_MAX_RANK];
  gstride[rank - 1] = pw_dtype_size(b->spec.dtype);
  for (uint32_t j = rank - 1; j-- > 0;) gstride[j] = gstride[j + 1] * (size_t)shape->dims[j + 1];
  uint32_t k = rank;
  while (k > 0 && shard.dims[k - 1] == shape->dims[k - 1]) --k;
  for (uint32_t j = 0; j < rank; ++j) g.base += (size_t)offsets[j] * gstride[j];
  if (k == 0) return g; /* the whole array */
  g.run = (size_t)shard.dims[k - 1] * gstride[k - 1];
  for (uint32_t j = 0; j + 1 < k; ++j) {
    if (shard.dims[j] == 1) continue;
    g.count[g.levels] = (size_t)shard.dims[j];
    g.stride[g.levels] = gstride[j];
    g.outer *= (size_t)shard.dims[j];
    g.levels++;
  }
  return g;
}

/* The global array's offset of run |o| of a shard. */
static size_t pw_shard_run_offset(const pw_shard_geometry_t* g, size_t o) {
  size_t at = g->base;
  for (uint32_t j = g->levels; j-- > 0;) {
    at += (o % g->count[j]) * g->stride[j];
    o /= g->count[j];
  }
  return at;
}

/* Copies between the global host array and device |d|'s shard. A shard
 * that is not contiguous in the global array is staged through a scratch
 * block of shard_bytes. */
static pw_status_t pw_buffer_copy_shard(pw_buffer_obj_t* b, uint32_t d, bool to_device,
                                        unsigned char* host) {
  const pw_backend_t* backend = b->slice->backend;
  uint32_t ordinal = b->slice->group_devices[d];
  pw_shard_geometry_t g = pw_shard_geometry(b, d);
  if (b->shard_bytes == 0) return NULL;
  if (g.outer == 1) {
    return to_device
               ? pw__backend_copy_to_device(backend, ordinal, b->shards[d], 0, host + g.base,
                                            b->shard_bytes)
               : pw__backend_copy_to_host(backend, ordinal, b->shards[d], 0, host + g.base,
                                          b->shard_bytes);
  }
  pw_allocator_t allocator = b->header.runtime->allocator;
  unsigned char* scratch = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(allocator, b->shard_bytes, 0, (void**)&scratch));
  pw_status_t status = NULL;
  if (to_device) {
    for (size_t o = 0; o < g.outer; ++o) {
      memcpy(scratch + o * g.run, host + pw_shard_run_offset(&g, o), g.run);
    }
    status = pw__backend_copy_to_device(backend, ordinal, b->shards[d], 0, scratch,
                                        b->shard_bytes);
  } else {
    status = pw__backend_copy_to_host(backend, ordinal, b->shards[d], 0, scratch,
                                      b->shard_bytes);
    for (size_t o = 0; status == NULL && o < g.outer; ++o) {
      memcpy(host + pw_shard_run_offset(&g, o), scratch + o * g.run, g.run);
    }
  }
  pw_allocator_free(allocator, scratch, b->shard_bytes);
  return status;
}

/* Host data is the array itself: a buffer of partial sums has no single
 * host value to read or write. */
static pw_status_t pw_buffer_check_reduced(const pw_buffer_obj_t* b, bool to_device) {
  if (pw_sharding_partial_count(&b->spec.sharding, &b->mesh) <= 1) return NULL;
  char sharding[128];
  pw_sharding_format_named(&b->spec.sharding, &b->mesh, sharding, sizeof(sharding));
  return to_device ? pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                                    "a buffer of sharding %s holds partial sums: it cannot be "
                                    "made from host data",
                                    sharding)
                   : pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                                    "the buffer's sharding %s holds partial sums: transfer it "
                                    "to a reduced sharding before reading it to the host",
                                    sharding);
}

/* Transfers smaller than this are copied on the calling thread: handing
 * them to the workers costs more than the copy. */
#define PW_BUFFER_PARALLEL_BYTES ((size_t)1 << 18)

typedef struct pw_buffer_copy_job_t {
  pw_buffer_obj_t* buffer;
  unsigned char* host;
  const uint32_t* devices;  /* to_host: the device read for each block */
} pw_buffer_copy_job_t;

static pw_status_t pw_buffer_upload_one(void* user, uint32_t d) {
  pw_buffer_copy_job_t* job = user;
  pw_buffer_obj_t* b = job->buffer;
  pw_status_t status = pw__backend_allocate(b->slice->backend, b->slice->group_devices[d],
                                            b->shard_bytes, &b->shards[d]);
  if (status == NULL) status = pw_buffer_copy_shard(b, d, true, job->host);
  if (status) status = pw_status_annotate(status, "device %u of slice '%s'", d, b->slice->name);
  return status;
}

static pw_status_t pw_buffer_download_one(void* user, uint32_t block) {
  pw_buffer_copy_job_t* job = user;
  return pw_buffer_copy_shard(job->buffer, job->devices[block], false, job->host);
}

static struct pw_workers_s* pw_buffer_workers(pw_buffer_obj_t* b) {
  return b->total_bytes >= PW_BUFFER_PARALLEL_BYTES ? b->header.runtime->workers : NULL;
}

pw_status_t pw__buffer_upload(pw_buffer_obj_t* b, const void* host, bool parallel) {
  PW_RETURN_IF_ERROR(pw_buffer_check_reduced(b, true));
  pw_buffer_copy_job_t job = {b, (unsigned char*)host, NULL};
  return pw__workers_parallel_for(parallel ? pw_buffer_workers(b) : NULL, b->slice->device_count,
                                  pw_buffer_upload_one, &job);
}

pw_status_t pw__buffer_download(pw_buffer_obj_t* b, void* dst, bool parallel) {
  PW_RETURN_IF_ERROR(pw_buffer_check_reduced(b, false));
  pw_allocator_t allocator = b->header.runtime->allocator;
  pw_status_t status = NULL;
  /* Read each block once, from the first device that holds it. */
  uint32_t blocks = pw_sharding_block_count(&b->spec.sharding, &b->spec.shape, &b->mesh);
  uint32_t block_devices[64];
  uint32_t* devices = block_devices;
  if (blocks > 64) {
    status = pw_allocator_calloc_array(allocator, blocks, sizeof(uint32_t), 0, (void**)&devices);
  }
  for (uint32_t block = 0; status == NULL && block < blocks; ++block) devices[block] = UINT32_MAX;
  for (uint32_t d = 0; status == NULL && d < b->slice->device_count; ++d) {
    uint32_t block = pw_sharding_block_index(&b->spec.sharding, &b->mesh, d);
    if (block < blocks && devices[block] == UINT32_MAX && b->shards[d] != NULL) devices[block] = d;
  }
  for (uint32_t block = 0; status == NULL && block < blocks; ++block) {
    if (devices[block] == UINT32_MAX) {
      status = pw_status_make(PW_STATUS_INTERNAL, "buffer block %u has no device copy", block);
    }
  }
  if (status == NULL) {
    pw_buffer_copy_job_t job = {b, dst, devices};
    status = pw__workers_parallel_for(parallel ? pw_buffer_workers(b) : NULL, blocks,
                                      pw_buffer_download_one, &job);
  }
  if (devices != block_devices) pw_allocator_free(allocator, devices, blocks * sizeof(uint32_t));
  return status;
}

bool pw__buffer_shards_contiguous(const pw_buffer_obj_t* b) {
  /* Every shard has the same shape, so the same grid of runs. */
  return pw_shard_geometry(b, 0).outer == 1;
}

pw_status_t pw__buffer_adopt(pw_buffer_obj_t* b, const void* host) {
  const pw_backend_t* backend = b->slice->backend;
  PW_RETURN_IF_ERROR(pw_buffer_check_reduced(b, true));
  if (!pw__buffer_shards_contiguous(b)) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "its shards are not contiguous in the host array");
  }
  pw_status_t status = NULL;
  uint32_t d = 0;
  for (; status == NULL && d < b->slice->device_count; ++d) {
    unsigned char* at = (unsigned char*)host + pw_shard_geometry(b, d).base;
    status = pw__backend_adopt_host(backend, b->slice->group_devices[d], at, b->shard_bytes,
                                    &b->shards[d]);
    if (status) status = pw_status_annotate(status, "device %u of slice '%s'", d, b->slice->name);
  }
  if (status != NULL) {
    for (uint32_t k = 0; k < d; ++k) {
      pw__backend_deallocate(backend, b->slice->group_devices[k], b->shards[k]);
      b->shards[k] = NULL;
    }
  }
  return status;
}
