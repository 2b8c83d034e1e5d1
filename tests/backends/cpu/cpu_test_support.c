#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "cpu_test_support.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void cpu_waiter_init(cpu_waiter_t* waiter, uint32_t expected) {
  memset(waiter, 0, sizeof(*waiter));
  pthread_mutex_init(&waiter->mutex, NULL);
  pthread_cond_init(&waiter->cond, NULL);
  waiter->expected = expected;
}

void cpu_waiter_done(void* user, pw_status_t status) {
  cpu_waiter_t* waiter = user;
  pthread_mutex_lock(&waiter->mutex);
  ++waiter->calls;
  if (status != NULL) {
    ++waiter->errors;
    if (waiter->first_error == NULL) {
      waiter->first_error = status;
      status = NULL;
    }
  }
  pthread_cond_broadcast(&waiter->cond);
  pthread_mutex_unlock(&waiter->mutex);
  pw_status_free(status);
}

bool cpu_waiter_wait(cpu_waiter_t* waiter, int timeout_ms) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += timeout_ms / 1000;
  deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec += 1;
    deadline.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&waiter->mutex);
  while (waiter->calls < waiter->expected) {
    if (pthread_cond_timedwait(&waiter->cond, &waiter->mutex, &deadline) == ETIMEDOUT) {
      break;
    }
  }
  bool all = waiter->calls >= waiter->expected;
  pthread_mutex_unlock(&waiter->mutex);
  return all;
}

pw_status_t cpu_waiter_take_error(cpu_waiter_t* waiter) {
  pthread_mutex_lock(&waiter->mutex);
  pw_status_t status = waiter->first_error;
  waiter->first_error = NULL;
  pthread_mutex_unlock(&waiter->mutex);
  return status;
}

void cpu_waiter_destroy(cpu_waiter_t* waiter) {
  pw_status_free(waiter->first_error);
  pthread_cond_destroy(&waiter->cond);
  pthread_mutex_destroy(&waiter->mutex);
}

pw_status_t cpu_create(pw_allocator_t allocator, uint32_t devices, uint32_t workers,
                       uint64_t capacity, pw_backend_t* out_backend) {
  pw_cpu_backend_options_t options;
  pw_cpu_backend_options_init(&options);
  options.allocator = allocator;
  options.device_count = devices;
  options.worker_count = workers;
  options.device_memory_bytes = capacity;
  return pw_cpu_backend_create(&options, out_backend);
}

void cpu_destroy(pw_backend_t backend) {
  if (backend.vtable != NULL) backend.vtable->destroy(backend.self);
}

pw_status_t cpu_load_text(pw_backend_t backend, const char* text,
                          const pw_mesh_shape_t* mesh,
                          pw_backend_executable_t* out_executable,
                          pw_executable_signature_t* out_signature) {
  pw_allocator_t system = pw_allocator_system();
  void* bytes = NULL;
  size_t size = 0;
  PW_RETURN_IF_ERROR(backend.vtable->compile(backend.self, text, strlen(text), mesh,
                                             "", system, &bytes, &size));
  out_signature->struct_size = sizeof(*out_signature); /* the caller of load sets it */
  pw_status_t status =
      backend.vtable->load(backend.self, bytes, size, out_executable, out_signature);
  pw_allocator_free(system, bytes, size);
  return status;
}

size_t cpu_param_bytes(const pw_backend_param_t* param) {
  return (size_t)pw_shape_element_count(&param->shape) * pw_dtype_size(param->dtype);
}

void cpu_shard_copy(bool to_shard, void* global, void* shard, pw_dtype_t dtype,
                    const pw_shape_t* shape, const pw_sharding_t* sharding,
                    const pw_mesh_shape_t* mesh, uint32_t mesh_index) {
  size_t element = pw_dtype_size(dtype);
  pw_shape_t block = pw_sharding_shard_shape(sharding, shape, mesh);
  size_t bytes = (size_t)pw_shape_element_count(&block) * element;
  if (sharding->kind != PW_SHARDING_SPLIT) {
    if (to_shard) {
      memcpy(shard, global, bytes);
    } else {
      memcpy(global, shard, bytes);
    }
    return;
  }
  uint32_t axis = sharding->tensor_axis;
  uint32_t index = pw_sharding_block_index(sharding, mesh, mesh_index);
  size_t parts = (size_t)(shape->dims[axis] / block.dims[axis]);
  size_t outer = 1;
  for (uint32_t i = 0; i < axis; ++i) outer *= (size_t)shape->dims[i];
  size_t chunk = bytes / outer;
  unsigned char* g = global;
  unsigned char* s = shard;
  for (size_t o = 0; o < outer; ++o) {
    unsigned char* gp = g + (o * parts + index) * chunk;
    if (to_shard) {
      memcpy(s + o * chunk, gp, chunk);
    } else {
      memcpy(gp, s + o * chunk, chunk);
    }
  }
}

pw_status_t cpu_run(pw_backend_t backend, pw_backend_executable_t executable,
                    const pw_executable_signature_t* signature,
                    const uint32_t* devices, uint64_t gang_id,
                    const void* const* inputs, void* const* outputs) {
  const pw_backend_vtable_t* vt = backend.vtable;
  const pw_mesh_shape_t* mesh = &signature->mesh;
  uint32_t group = pw_mesh_shape_device_count(mesh);
  uint32_t* ids = calloc(group, sizeof(uint32_t));
  pw_backend_memory_t* in_mem = calloc((size_t)group * PW_BACKEND_MAX_PARAMS, sizeof(void*));
  pw_backend_memory_t* out_mem = calloc((size_t)group * PW_BACKEND_MAX_PARAMS, sizeof(void*));
  size_t scratch_size = 1;
  for (uint32_t i = 0; i < signature->input_count; ++i) {
    size_t n = cpu_param_bytes(&signature->inputs[i]);
    if (n > scratch_size) scratch_size = n;
  }
  for (uint32_t i = 0; i < signature->output_count; ++i) {
    size_t n = cpu_param_bytes(&signature->outputs[i]);
    if (n > scratch_size) scratch_size = n;
  }
  unsigned char* scratch = malloc(scratch_size);
  unsigned char* first = malloc(scratch_size);
  pw_status_t status = NULL;
  for (uint32_t d = 0; d < group; ++d) ids[d] = devices ? devices[d] : d;

  /* Allocate and fill the shards. */
  for (uint32_t d = 0; d < group && status == NULL; ++d) {
    for (uint32_t i = 0; i < signature->input_count && status == NULL; ++i) {
      const pw_backend_param_t* p = &signature->inputs[i];
      pw_shape_t block = pw_sharding_shard_shape(&p->sharding, &p->shape, mesh);
      size_t bytes = (size_t)pw_shape_element_count(&block) * pw_dtype_size(p->dtype);
      status = vt->allocate(backend.self, ids[d], bytes, &in_mem[d * PW_BACKEND_MAX_PARAMS + i]);
      if (status != NULL) break;
      cpu_shard_copy(true, (void*)inputs[i], scratch, p->dtype, &p->shape, &p->sharding,
                     mesh, d);
      status = vt->copy_to_device(backend.self, ids[d], in_mem[d * PW_BACKEND_MAX_PARAMS + i],
                                  0, scratch, bytes);
    }
    for (uint32_t i = 0; i < signature->output_count && status == NULL; ++i) {
      const pw_backend_param_t* p = &signature->outputs[i];
      pw_shape_t block = pw_sharding_shard_shape(&p->sharding, &p->shape, mesh);
      size_t bytes = (size_t)pw_shape_element_count(&block) * pw_dtype_size(p->dtype);
      status = vt->allocate(backend.self, ids[d], bytes, &out_mem[d * PW_BACKEND_MAX_PARAMS + i]);
    }
  }
  /* Launch every device. */
  cpu_waiter_t waiter;
  cpu_waiter_init(&waiter, 0);
  uint32_t launched = 0;
  for (uint32_t d = 0; d < group && status == NULL; ++d) {
    pw_backend_launch_t launch = {
        .struct_size = sizeof(launch),
        .executable = executable,
        .device = ids[d],
        .mesh_index = d,
        .group_devices = ids,
        .group_size = group,
        .gang_id = gang_id,
        .inputs = &in_mem[d * PW_BACKEND_MAX_PARAMS],
        .input_count = signature->input_count,
        .outputs = &out_mem[d * PW_BACKEND_MAX_PARAMS],
        .output_count = signature->output_count,
        .done = cpu_waiter_done,
        .done_user = &waiter,
    };
    pthread_mutex_lock(&waiter.mutex);
    waiter.expected++;
    pthread_mutex_unlock(&waiter.mutex);
    status = vt->launch(backend.self, &launch);
    if (status != NULL) {
      pthread_mutex_lock(&waiter.mutex);
      waiter.expected--;
      pthread_mutex_unlock(&waiter.mutex);
    } else {
      ++launched;
    }
  }
  if (!cpu_waiter_wait(&waiter, 20000)) {
    /* Leave the memory and waiter alive: a late done would use them. */
    pw_status_free(status);
    return pw_status_make(PW_STATUS_INTERNAL, "run did not finish in 20 s (%u/%u dones)",
                          waiter.calls, launched);
  }
  if (status == NULL) status = cpu_waiter_take_error(&waiter);
  /* Gather the outputs; replicas must agree. */
  for (uint32_t i = 0; i < signature->output_count && status == NULL; ++i) {
    const pw_backend_param_t* p = &signature->outputs[i];
    pw_shape_t block = pw_sharding_shard_shape(&p->sharding, &p->shape, mesh);
    size_t bytes = (size_t)pw_shape_element_count(&block) * pw_dtype_size(p->dtype);
    for (uint32_t d = 0; d < group && status == NULL; ++d) {
      status = vt->copy_to_host(backend.self, ids[d], out_mem[d * PW_BACKEND_MAX_PARAMS + i], 0,
                                scratch, bytes);
      if (status != NULL) break;
      if (p->sharding.kind == PW_SHARDING_REPLICATED) {
        if (d == 0) {
          memcpy(first, scratch, bytes);
          memcpy(outputs[i], scratch, bytes);
        } else if (memcmp(first, scratch, bytes) != 0) {
          status = pw_status_make(PW_STATUS_INTERNAL,
                                  "output %u: device %u's replica differs from device %u's",
                                  i, ids[d], ids[0]);
        }
      } else {
        cpu_shard_copy(false, outputs[i], scratch, p->dtype, &p->shape, &p->sharding, mesh, d);
      }
    }
  }
  cpu_waiter_destroy(&waiter);
  for (uint32_t d = 0; d < group; ++d) {
    for (uint32_t i = 0; i < PW_BACKEND_MAX_PARAMS; ++i) {
      if (in_mem[d * PW_BACKEND_MAX_PARAMS + i]) {
        vt->deallocate(backend.self, ids[d], in_mem[d * PW_BACKEND_MAX_PARAMS + i]);
      }
      if (out_mem[d * PW_BACKEND_MAX_PARAMS + i]) {
        vt->deallocate(backend.self, ids[d], out_mem[d * PW_BACKEND_MAX_PARAMS + i]);
      }
    }
  }
  free(first);
  free(scratch);
  free(out_mem);
  free(in_mem);
  free(ids);
  return status;
}

pw_status_t cpu_run_text(pw_backend_t backend, const char* text,
                         const pw_mesh_shape_t* mesh, const void* const* inputs,
                         void* const* outputs) {
  pw_backend_executable_t exe = NULL;
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  PW_RETURN_IF_ERROR(cpu_load_text(backend, text, mesh, &exe, &sig));
  static atomic_uint_fast64_t gang = 1000;
  pw_status_t status =
      cpu_run(backend, exe, &sig, NULL, atomic_fetch_add(&gang, 1), inputs, outputs);
  backend.vtable->unload(backend.self, exe);
  return status;
}

static uint32_t cpu_random_next(uint64_t* state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*state >> 40); /* 24 bits */
}

void cpu_random_fill(uint64_t* state, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    out[i] = (float)cpu_random_next(state) / (float)(1u << 23) - 1.0f;
  }
}

void cpu_random_fill_f64(uint64_t* state, double* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    out[i] = (double)cpu_random_next(state) / (double)(1u << 23) - 1.0;
  }
}
