#define _POSIX_C_SOURCE 200809L
/* Host arrays and shards (buffer_copy.h). Host data is the global array
 * in row-major order; a split array's shard for block b along tensor axis
 * t is, for each index of the axes before t, a contiguous run of
 * block_len * inner bytes. */
#include "runtime/buffer_copy.h"

#include <string.h>

#include "core/runtime.h"
#include "plugin/backend_call.h"
#include "runtime/workers.h"

/* Geometry of a shard inside the global array. Every product here is of
 * some of the dimensions and the dtype size, so it is at most total_bytes,
 * which pw_array_spec_byte_sizes bounded: none can wrap. */
typedef struct pw_shard_geometry_t {
  size_t outer;      /* product of dims before the split axis */
  size_t run;        /* bytes of one contiguous run of the shard */
  size_t stride;     /* bytes between runs in the global array */
  size_t block_run;  /* offset step per block index */
} pw_shard_geometry_t;

static pw_shard_geometry_t pw_shard_geometry(const pw_buffer_obj_t* b) {
  pw_shard_geometry_t g = {1, b->total_bytes, b->total_bytes, 0};
  if (b->spec.sharding.kind != PW_SHARDING_SPLIT) return g;
  uint32_t t = b->spec.sharding.tensor_axis;
  size_t inner = pw_dtype_size(b->spec.dtype);
  for (uint32_t i = t + 1; i < b->spec.shape.rank; ++i) inner *= (size_t)b->spec.shape.dims[i];
  size_t outer = 1;
  for (uint32_t i = 0; i < t; ++i) outer *= (size_t)b->spec.shape.dims[i];
  pw_shape_t shard = pw_sharding_shard_shape(&b->spec.sharding, &b->spec.shape, &b->mesh);
  size_t block_len = (size_t)shard.dims[t];
  g.outer = outer;
  g.run = block_len * inner;
  g.stride = (size_t)b->spec.shape.dims[t] * inner;
  g.block_run = g.run;
  return g;
}

/* Copies between the global host array and device |d|'s shard. A shard
 * that is not contiguous in the global array is staged through a scratch
 * block of shard_bytes. */
static pw_status_t pw_buffer_copy_shard(pw_buffer_obj_t* b, uint32_t d, bool to_device,
                                        unsigned char* host) {
  const pw_backend_t* backend = b->slice->backend;
  uint32_t ordinal = b->slice->group_devices[d];
  pw_shard_geometry_t g = pw_shard_geometry(b);
  uint32_t block = pw_sharding_block_index(&b->spec.sharding, &b->mesh, d);
  size_t base = (size_t)block * g.block_run;
  if (b->shard_bytes == 0) return NULL;
  if (g.outer == 1) {
    return to_device
               ? pw__backend_copy_to_device(backend, ordinal, b->shards[d], 0, host + base,
                                            b->shard_bytes)
               : pw__backend_copy_to_host(backend, ordinal, b->shards[d], 0, host + base,
                                          b->shard_bytes);
  }
  pw_allocator_t allocator = b->header.runtime->allocator;
  unsigned char* scratch = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(allocator, b->shard_bytes, 0, (void**)&scratch));
  pw_status_t status = NULL;
  if (to_device) {
    for (size_t o = 0; o < g.outer; ++o) {
      memcpy(scratch + o * g.run, host + o * g.stride + base, g.run);
    }
    status = pw__backend_copy_to_device(backend, ordinal, b->shards[d], 0, scratch,
                                        b->shard_bytes);
  } else {
    status = pw__backend_copy_to_host(backend, ordinal, b->shards[d], 0, scratch,
                                      b->shard_bytes);
    for (size_t o = 0; status == NULL && o < g.outer; ++o) {
      memcpy(host + o * g.stride + base, scratch + o * g.run, g.run);
    }
  }
  pw_allocator_free(allocator, scratch, b->shard_bytes);
  return status;
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
  pw_buffer_copy_job_t job = {b, (unsigned char*)host, NULL};
  return pw__workers_parallel_for(parallel ? pw_buffer_workers(b) : NULL, b->slice->device_count,
                                  pw_buffer_upload_one, &job);
}

pw_status_t pw__buffer_download(pw_buffer_obj_t* b, void* dst, bool parallel) {
  pw_allocator_t allocator = b->header.runtime->allocator;
  pw_status_t status = NULL;
  /* Read each block once, from the first device that holds it. */
  uint32_t blocks = 1;
  if (b->spec.sharding.kind == PW_SHARDING_SPLIT) {
    pw_shape_t shard = pw_sharding_shard_shape(&b->spec.sharding, &b->spec.shape, &b->mesh);
    blocks = (uint32_t)(b->spec.shape.dims[b->spec.sharding.tensor_axis] /
                        shard.dims[b->spec.sharding.tensor_axis]);
  }
  uint32_t block_devices[64];
  uint32_t* devices = block_devices;
  if (blocks > 64) {
    status = pw_allocator_calloc_array(allocator, blocks, sizeof(uint32_t), 0, (void**)&devices);
  }
  for (uint32_t block = 0; status == NULL && block < blocks; ++block) {
    uint32_t d = 0;
    while (d < b->slice->device_count &&
           pw_sharding_block_index(&b->spec.sharding, &b->mesh, d) != block) {
      ++d;
    }
    if (d == b->slice->device_count || b->shards[d] == NULL) {
      status = pw_status_make(PW_STATUS_INTERNAL, "buffer block %u has no device copy", block);
    }
    devices[block] = d;
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
  return pw_shard_geometry(b).outer == 1;
}

pw_status_t pw__buffer_adopt(pw_buffer_obj_t* b, const void* host) {
  const pw_backend_t* backend = b->slice->backend;
  if (!pw__buffer_shards_contiguous(b)) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "its shards are not contiguous in the host array");
  }
  pw_shard_geometry_t g = pw_shard_geometry(b);
  pw_status_t status = NULL;
  uint32_t d = 0;
  for (; status == NULL && d < b->slice->device_count; ++d) {
    uint32_t block = pw_sharding_block_index(&b->spec.sharding, &b->mesh, d);
    unsigned char* at = (unsigned char*)host + (size_t)block * g.block_run;
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
