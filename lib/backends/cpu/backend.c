/* The CPU backend core: creation, devices, memory, copies and launch.
 *
 * Concurrency: device health and memory accounting are atomics; the kernel
 * registry, the pool queue and the collective rendezvous table each have
 * one mutex, none held while a kernel or a done callback runs. A launch is
 * validated and copied on the caller's thread, queued, and run by a pool
 * worker, which calls done exactly once. */
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "pathways/struct_size.h"

#define PW_CPU_DEFAULT_DEVICES 8u
#define PW_CPU_DEFAULT_WORKERS 2u
#define PW_CPU_DEFAULT_MEMORY (1ull << 30)
/* Device memory is aligned for any vector load. */
#define PW_CPU_MEMORY_ALIGN 64u
#define PW_CPU_MEMORY_HEADER 64u

#define PW_CPU_LAUNCH_SIZE_V1 PW_BACKEND_LAUNCH_SIZE_V1

static const pw_backend_vtable_t pw_cpu_vtable;

pw_cpu__backend_t* pw_cpu__from_backend(pw_backend_t backend) {
  if (backend.vtable != &pw_cpu_vtable) return NULL;
  return backend.self;
}

pw_status_t pw_cpu_backend_block_cache_stats(pw_backend_t backend,
                                             pw_cpu_block_cache_stats_t* out_stats) {
  if (!pw_cpu_backend_is_cpu(backend) || backend.self == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cpu_backend_block_cache_stats: not a CPU backend");
  }
  if (out_stats == NULL || out_stats->struct_size < PW_CPU_BLOCK_CACHE_STATS_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cpu_backend_block_cache_stats: out_stats is NULL or its "
                          "struct_size is below v1");
  }
  size_t size = out_stats->struct_size;
  pw_cpu_block_cache_stats_t stats;
  memset(&stats, 0, sizeof(stats));
  pw_cpu__cache_stats(backend.self, &stats);
  stats.struct_size = size < sizeof(stats) ? size : sizeof(stats);
  memcpy(out_stats, &stats, stats.struct_size);
  return NULL;
}

bool pw_cpu_backend_is_cpu(pw_backend_t backend) {
  return backend.vtable == &pw_cpu_vtable && backend.self != NULL;
}

pw_status_t pw_cpu__device_status(pw_cpu__backend_t* backend, uint32_t device) {
  if (atomic_load(&backend->devices[device].health) == PW_DEVICE_FAILED) {
    return pw_status_make(PW_STATUS_UNAVAILABLE, "cpu device %u has failed", device);
  }
  return NULL;
}

/*---------------------------------------------------------------------------
 * Devices
 *-------------------------------------------------------------------------*/

static uint32_t pw_cpu_device_count(void* self) {
  pw_cpu__backend_t* backend = self;
  return backend->device_count;
}

static pw_status_t pw_cpu_check_device(pw_cpu__backend_t* backend, uint32_t device,
                                       const char* who) {
  if (device >= backend->device_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu %s: device %u does not exist (the backend has %u)",
                          who, device, backend->device_count);
  }
  return NULL;
}

static pw_status_t pw_cpu_device_info(void* self, uint32_t device,
                                      pw_backend_device_info_t* out_info) {
  pw_cpu__backend_t* backend = self;
  if (out_info == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "cpu device_info: out_info is NULL");
  }
  PW_RETURN_IF_ERROR(pw_cpu_check_device(backend, device, "device_info"));
  size_t v1 = PW_BACKEND_DEVICE_INFO_SIZE_V1;
  if (out_info->struct_size < v1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu device_info: out_info->struct_size %zu is below "
                          "v1 (%zu)",
                          out_info->struct_size, v1);
  }
  out_info->host = backend->host;
  out_info->memory_bytes = backend->capacity;
  memset(out_info->kind, 0, sizeof(out_info->kind));
  snprintf(out_info->kind, sizeof(out_info->kind), "cpu");
  return NULL;
}

static pw_device_health_t pw_cpu_health(void* self, uint32_t device) {
  pw_cpu__backend_t* backend = self;
  if (device >= backend->device_count) return PW_DEVICE_FAILED;
  return (pw_device_health_t)atomic_load(&backend->devices[device].health);
}

pw_status_t pw_cpu_backend_set_health(pw_backend_t backend, uint32_t device,
                                      pw_device_health_t health) {
  pw_cpu__backend_t* cpu = pw_cpu__from_backend(backend);
  if (cpu == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cpu_backend_set_health: not a cpu backend");
  }
  PW_RETURN_IF_ERROR(pw_cpu_check_device(cpu, device, "set_health"));
  if (health != PW_DEVICE_HEALTHY && health != PW_DEVICE_DEGRADED &&
      health != PW_DEVICE_FAILED) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cpu_backend_set_health: unknown health %d",
                          (int)health);
  }
  int old = atomic_exchange(&cpu->devices[device].health, (int)health);
  if (old != (int)health) {
    pw_log(&cpu->logger, PW_LOG_INFO, PW_CPU_LOG, "device %u: %s -> %s", device,
           pw_device_health_name((pw_device_health_t)old),
           pw_device_health_name(health));
  }
  if (health == PW_DEVICE_FAILED) pw_cpu__collective_device_failed(cpu, device);
  return NULL;
}

/*---------------------------------------------------------------------------
 * Memory
 *-------------------------------------------------------------------------*/

static pw_status_t pw_cpu_check_memory(pw_cpu__backend_t* backend, uint32_t device,
                                       pw_backend_memory_t memory, const char* who) {
  PW_RETURN_IF_ERROR(pw_cpu_check_device(backend, device, who));
  if (memory == NULL || memory->magic != PW_CPU__MEMORY_MAGIC ||
      memory->backend != backend) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu %s: %p is not device memory of this backend", who,
                          (void*)memory);
  }
  if (memory->device != device) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu %s: the memory belongs to device %u, not device %u",
                          who, memory->device, device);
  }
  return NULL;
}

static pw_status_t pw_cpu_allocate(void* self, uint32_t device, size_t size,
                                   pw_backend_memory_t* out_memory) {
  pw_cpu__backend_t* backend = self;
  if (out_memory == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "cpu allocate: out_memory is NULL");
  }
  *out_memory = NULL;
  PW_RETURN_IF_ERROR(pw_cpu_check_device(backend, device, "allocate"));
  pw_cpu__device_t* d = &backend->devices[device];
  uint64_t used = atomic_load(&d->used_bytes);
  bool fits;
  do {
    fits = (uint64_t)size <= backend->capacity - used;
  } while (fits && !atomic_compare_exchange_weak(&d->used_bytes, &used,
                                                 used + (uint64_t)size));
  if (!fits) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "cpu device %u: allocating %zu bytes exceeds its memory "
                          "(capacity %llu bytes, %llu in use)",
                          device, size, (unsigned long long)backend->capacity,
                          (unsigned long long)used);
  }
  size_t total = PW_CPU_MEMORY_HEADER + size;
  void* block = NULL;
  size_t got = total;
  pw_status_t status = NULL;
  if (total < size) {
    status = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "size overflows");
  } else {
    status = pw_cpu__block_alloc(backend, total, PW_CPU_MEMORY_ALIGN, &block, &got);
  }
  if (status != NULL) {
    atomic_fetch_sub(&d->used_bytes, (uint64_t)size);
    return pw_status_annotate(status, "cpu device %u: allocating %zu bytes", device,
                              size);
  }
  pw_backend_memory_t memory = block;
  _Static_assert(sizeof(struct pw_backend_memory_s) <= PW_CPU_MEMORY_HEADER,
                 "memory header must fit before the data");
  memory->magic = PW_CPU__MEMORY_MAGIC;
  memory->device = device;
  memory->size = size;
  memory->alloc_size = got;
  memory->backend = backend;
  memory->data = (unsigned char*)block + PW_CPU_MEMORY_HEADER;
  memory->adopted = false;
  atomic_fetch_add(&backend->live_memories, 1);
  *out_memory = memory;
  return NULL;
}

/* Host memory the kernels can use as it is: aligned for the widest
 * scalar they load (8 bytes: f64, i64); device memory itself is aligned
 * further, for vector loads, but no kernel relies on that. */
#define PW_CPU_ADOPT_ALIGN 8u

static pw_status_t pw_cpu_adopt_host(void* self, uint32_t device, void* host, size_t size,
                                     pw_backend_memory_t* out_memory) {
  pw_cpu__backend_t* backend = self;
  if (out_memory == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "cpu adopt_host: out_memory is NULL");
  }
  *out_memory = NULL;
  PW_RETURN_IF_ERROR(pw_cpu_check_device(backend, device, "adopt_host"));
  if (host == NULL && size != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "cpu adopt_host: host is NULL");
  }
  if ((uintptr_t)host % PW_CPU_ADOPT_ALIGN != 0) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "cpu adopt_host: %p is not aligned to %u bytes", host,
                          PW_CPU_ADOPT_ALIGN);
  }
  void* block = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(backend->allocator, PW_CPU_MEMORY_HEADER,
                                         PW_CPU_MEMORY_ALIGN, &block));
  pw_backend_memory_t memory = block;
  memory->magic = PW_CPU__MEMORY_MAGIC;
  memory->device = device;
  memory->size = size;
  memory->alloc_size = PW_CPU_MEMORY_HEADER;
  memory->backend = backend;
  memory->data = host;
  memory->adopted = true;
  atomic_fetch_add(&backend->live_memories, 1);
  *out_memory = memory;
  return NULL;
}

static void pw_cpu_deallocate(void* self, uint32_t device, pw_backend_memory_t memory) {
  pw_cpu__backend_t* backend = self;
  if (memory == NULL) return;
  pw_status_t status = pw_cpu_check_memory(backend, device, memory, "deallocate");
  if (status != NULL) {
    /* A foreign handle is not ours to free; a wrong device is a caller bug
     * but the memory is still ours, so free it where it belongs. */
    pw_log(&backend->logger, PW_LOG_ERROR, PW_CPU_LOG, "%s",
           pw_status_message(status));
    pw_status_free(status);
    if (memory->magic != PW_CPU__MEMORY_MAGIC || memory->backend != backend) return;
  }
  if (!memory->adopted) {
    atomic_fetch_sub(&backend->devices[memory->device].used_bytes, (uint64_t)memory->size);
  }
  atomic_fetch_sub(&backend->live_memories, 1);
  memory->magic = 0;
  size_t alloc_size = memory->alloc_size;
  if (memory->adopted) {
    pw_allocator_free(backend->allocator, memory, alloc_size);
  } else {
    pw_cpu__block_free(backend, memory, alloc_size);
  }
}

static pw_status_t pw_cpu_check_range(pw_backend_memory_t memory, size_t offset,
                                      size_t size, const void* host,
                                      const char* who) {
  if (host == NULL && size != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "cpu %s: host pointer is NULL",
                          who);
  }
  if (offset > memory->size || size > memory->size - offset) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE,
                          "cpu %s: bytes [%zu, %zu + %zu) are outside the %zu-byte "
                          "memory of device %u",
                          who, offset, offset, size, memory->size, memory->device);
  }
  return NULL;
}

static pw_status_t pw_cpu_copy_to_device(void* self, uint32_t device,
                                         pw_backend_memory_t dst, size_t offset,
                                         const void* src, size_t size) {
  pw_cpu__backend_t* backend = self;
  PW_RETURN_IF_ERROR(pw_cpu_check_memory(backend, device, dst, "copy_to_device"));
  PW_RETURN_IF_ERROR(pw_cpu_check_range(dst, offset, size, src, "copy_to_device"));
  if (size > 0) memcpy(dst->data + offset, src, size);
  return NULL;
}

static pw_status_t pw_cpu_copy_to_host(void* self, uint32_t device,
                                       pw_backend_memory_t src, size_t offset,
                                       void* dst, size_t size) {
  pw_cpu__backend_t* backend = self;
  PW_RETURN_IF_ERROR(pw_cpu_check_memory(backend, device, src, "copy_to_host"));
  PW_RETURN_IF_ERROR(pw_cpu_check_range(src, offset, size, dst, "copy_to_host"));
  if (size > 0) memcpy(dst, src->data + offset, size);
  return NULL;
}

static void* pw_cpu_host_pointer(void* self, uint32_t device,
                                 pw_backend_memory_t memory) {
  pw_cpu__backend_t* backend = self;
  pw_status_t status = pw_cpu_check_memory(backend, device, memory, "host_pointer");
  if (status != NULL) {
    pw_status_free(status);
    return NULL;
  }
  return memory->data;
}

/*---------------------------------------------------------------------------
 * Launch
 *-------------------------------------------------------------------------*/

void pw_cpu__launch_free(pw_cpu__launch_t* launch) {
  pw_cpu__backend_t* backend = launch->backend;
  if (launch->spare != NULL) {
    pw_allocator_free(backend->allocator, launch->spare, sizeof(*launch->spare));
  }
  pw_cpu__executable_release(launch->executable);
  pw_allocator_free(backend->allocator, launch, launch->alloc_size);
}

pw_status_t pw_cpu__launch_execute(pw_cpu__launch_t* launch) {
  pw_backend_executable_t exe = launch->executable;
  const pw_cpu__kernel_t* kernel = exe->kernel;
  pw_status_t status = pw_cpu__device_status(launch->backend, launch->device);
  if (status == NULL) {
    pw_cpu_input_shard_t* inputs = launch->input_shards;
    pw_cpu_output_shard_t* outputs = launch->output_shards;
    for (uint32_t i = 0; i < launch->input_count; ++i) {
      inputs[i].data = launch->inputs[i]->data;
      inputs[i].size = exe->input_bytes[i];
      inputs[i].dtype = exe->program.inputs[i].dtype;
      inputs[i].shape = exe->input_shards[i];
    }
    for (uint32_t i = 0; i < launch->output_count; ++i) {
      outputs[i].data = launch->outputs[i]->data;
      outputs[i].size = exe->output_bytes[i];
      outputs[i].dtype = exe->program.outputs[i].dtype;
      outputs[i].shape = exe->output_shards[i];
    }
    pw_cpu_kernel_call_t call = {
        .struct_size = sizeof(call),
        .program = &exe->program,
        .mesh = &exe->mesh,
        .mesh_index = launch->mesh_index,
        .device = launch->device,
        .inputs = inputs,
        .input_count = launch->input_count,
        .outputs = outputs,
        .output_count = launch->output_count,
        .attrs = exe->program.attrs,
        .attr_count = exe->program.attr_count,
        .user = kernel->user,
        .node_arg = launch->node_arg,
    };
    status = kernel->run(&call);
  }
  if (status != NULL) {
    status = pw_status_annotate(status, "kernel '%s' on cpu device %u",
                                kernel->name, launch->device);
  }
  return status;
}

/* Runs a non-collective launch on a pool thread. */
static void pw_cpu_run_kernel(pw_cpu__launch_t* launch) {
  pw_status_t status = pw_cpu__launch_execute(launch);
  pw_backend_done_fn_t done = launch->done;
  void* done_user = launch->done_user;
  pw_cpu__launch_free(launch);
  done(done_user, status);
}

static void pw_cpu_launch_task(pw_cpu__task_t* task) {
  pw_cpu__launch_t* launch = (pw_cpu__launch_t*)task; /* task is first */
  if (launch->executable->kernel->collective != PW_CPU__NOT_COLLECTIVE) {
    pw_cpu__collective_arrive(launch);
  } else {
    pw_cpu_run_kernel(launch);
  }
}

/* Above this many (output, parameter) pairs, a launch's outputs are
 * checked for aliases by sorting (pw_cpu_check_aliases), not pairwise. */
#define PW_CPU_ALIAS_QUADRATIC 1024u

typedef struct pw_cpu_alias_t {
  uintptr_t memory;
  uint32_t output;  /* 0: an input, 1: an output */
  uint32_t index;
} pw_cpu_alias_t;

static int pw_cpu_alias_cmp(const void* a, const void* b) {
  const pw_cpu_alias_t* x = a;
  const pw_cpu_alias_t* y = b;
  if (x->memory != y->memory) return x->memory < y->memory ? -1 : 1;
  if (x->output != y->output) return x->output < y->output ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* The big launches' alias check: an output that is the memory of an input
 * or of another output is INVALID_ARGUMENT, as pw_cpu__launch_check says
 * for small ones. O(n log n) over |scratch| (n entries). */
static pw_status_t pw_cpu_check_aliases(const pw_cpu__launch_t* launch, pw_cpu_alias_t* scratch) {
  const char* name = launch->executable->program.kernel;
  size_t n = 0;
  for (uint32_t i = 0; i < launch->input_count; ++i) {
    scratch[n++] = (pw_cpu_alias_t){(uintptr_t)launch->inputs[i], 0, i};
  }
  for (uint32_t o = 0; o < launch->output_count; ++o) {
    scratch[n++] = (pw_cpu_alias_t){(uintptr_t)launch->outputs[o], 1, o};
  }
  qsort(scratch, n, sizeof(*scratch), pw_cpu_alias_cmp);
  for (size_t k = 0; k < n;) {
    size_t end = k + 1;
    while (end < n && scratch[end].memory == scratch[k].memory) ++end;
    size_t first_output = k;
    while (first_output < end && !scratch[first_output].output) ++first_output;
    if (first_output < end && end - k > 1) {
      if (first_output > k) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "cpu launch of '%s': output %u is the same memory as input %u",
                              name, scratch[first_output].index, scratch[k].index);
      }
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "cpu launch of '%s': outputs %u and %u are the same memory", name,
                            scratch[k].index, scratch[k + 1].index);
    }
    k = end;
  }
  return NULL;
}

pw_status_t pw_cpu__launch_check(pw_cpu__backend_t* backend, const pw_backend_launch_t* l) {
  if (l == NULL || l->struct_size < PW_CPU_LAUNCH_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu launch: launch is NULL or its struct_size is below v1");
  }
  pw_backend_executable_t exe = l->executable;
  if (exe == NULL || exe->magic != PW_CPU__EXECUTABLE_MAGIC || exe->backend != backend) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu launch: %p is not a loaded executable of this backend",
                          (void*)exe);
  }
  const char* name = exe->program.kernel;
  if (l->done == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "cpu launch of '%s': done is NULL",
                          name);
  }
  PW_RETURN_IF_ERROR_CTX(pw_cpu_check_device(backend, l->device, "launch"),
                         "kernel '%s'", name);
  uint32_t mesh_devices = pw_mesh_shape_device_count(&exe->mesh);
  if (l->group_size != mesh_devices || l->group_devices == NULL ||
      l->mesh_index >= l->group_size || l->group_devices[l->mesh_index] != l->device) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu launch of '%s' on device %u: group of %u devices, "
                          "mesh index %u, does not match the executable's mesh of "
                          "%u devices with this device at that index",
                          name, l->device, l->group_size, l->mesh_index, mesh_devices);
  }
  /* Group devices exist and are distinct (collectives write to each). */
  uint64_t seen[PW_CPU_MAX_DEVICES / 64];
  memset(seen, 0, sizeof(seen));
  for (uint32_t i = 0; i < l->group_size; ++i) {
    uint32_t d = l->group_devices[i];
    if (d >= backend->device_count || (seen[d / 64] >> (d % 64)) & 1u) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "cpu launch of '%s': group device %u (mesh index %u) "
                            "is out of range or repeated",
                            name, d, i);
    }
    seen[d / 64] |= 1ull << (d % 64);
  }
  if (l->input_count != exe->program.input_count ||
      l->output_count != exe->program.output_count ||
      (l->input_count > 0 && l->inputs == NULL) ||
      (l->output_count > 0 && l->outputs == NULL)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "cpu launch of '%s': %u inputs and %u outputs given, the "
                          "executable takes %u and %u",
                          name, l->input_count, l->output_count,
                          exe->program.input_count, exe->program.output_count);
  }
  for (int pass = 0; pass < 2; ++pass) {
    uint32_t count = pass == 0 ? l->input_count : l->output_count;
    const pw_backend_memory_t* memories = pass == 0 ? l->inputs : l->outputs;
    const size_t* need = pass == 0 ? exe->input_bytes : exe->output_bytes;
    const char* role = pass == 0 ? "input" : "output";
    for (uint32_t i = 0; i < count; ++i) {
      PW_RETURN_IF_ERROR_CTX(pw_cpu_check_memory(backend, l->device, memories[i], "launch"),
                             "kernel '%s' %s %u", name, role, i);
      if (memories[i]->size < need[i]) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "cpu launch of '%s' on device %u: %s %u has %zu bytes, "
                              "its shard needs %zu",
                              name, l->device, role, i, memories[i]->size, need[i]);
      }
    }
  }
  if ((uint64_t)l->output_count * (l->input_count + l->output_count) > PW_CPU_ALIAS_QUADRATIC) {
    return NULL; /* pw_cpu_check_aliases, on the launch's copy */
  }
  for (uint32_t o = 0; o < l->output_count; ++o) {
    for (uint32_t i = 0; i < l->input_count; ++i) {
      if (l->outputs[o] == l->inputs[i]) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "cpu launch of '%s': output %u is the same memory as "
                              "input %u",
                              name, o, i);
      }
    }
    for (uint32_t j = 0; j < o; ++j) {
      if (l->outputs[o] == l->outputs[j]) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "cpu launch of '%s': outputs %u and %u are the same memory",
                              name, j, o);
      }
    }
  }
  return NULL;
}

pw_status_t pw_cpu__launch_copy(pw_cpu__backend_t* backend, const pw_backend_launch_t* l,
                                pw_cpu__launch_t** out_launch) {
  *out_launch = NULL;
  /* Trailing: the memories (inputs, outputs), the kernel call's shards,
   * the alias check's scratch (big launches), the group's devices. */
  size_t n = (size_t)l->input_count + l->output_count;
  bool sorted_check =
      (uint64_t)l->output_count * (l->input_count + l->output_count) > PW_CPU_ALIAS_QUADRATIC;
  size_t memories_at = (sizeof(pw_cpu__launch_t) + 15) & ~(size_t)15;
  size_t in_shards_at = memories_at + n * sizeof(pw_backend_memory_t);
  in_shards_at = (in_shards_at + 15) & ~(size_t)15;
  size_t out_shards_at = in_shards_at + l->input_count * sizeof(pw_cpu_input_shard_t);
  size_t scratch_at = out_shards_at + l->output_count * sizeof(pw_cpu_output_shard_t);
  size_t devices_at = scratch_at + (sorted_check ? n * sizeof(pw_cpu_alias_t) : 0);
  size_t size = devices_at + (size_t)l->group_size * sizeof(uint32_t);
  void* memory = NULL;
  pw_status_t status =
      pw_allocator_malloc(backend->allocator, size, alignof(pw_cpu__launch_t), &memory);
  if (status != NULL) {
    return pw_status_annotate(status, "cpu launch of '%s' on device %u",
                              l->executable->program.kernel, l->device);
  }
  pw_cpu__launch_t* launch = memory;
  memset(launch, 0, sizeof(*launch));
  if (l->executable->kernel->collective != PW_CPU__NOT_COLLECTIVE) {
    void* spare = NULL;
    status = pw_allocator_calloc(backend->allocator, sizeof(pw_cpu__rendezvous_t),
                                 alignof(pw_cpu__rendezvous_t), &spare);
    if (status != NULL) {
      pw_allocator_free(backend->allocator, memory, size);
      return pw_status_annotate(status, "cpu launch of '%s' on device %u",
                                l->executable->program.kernel, l->device);
    }
    launch->spare = spare;
  }
  launch->task.fn = pw_cpu_launch_task;
  launch->backend = backend;
  launch->executable = l->executable;
  atomic_fetch_add(&l->executable->refs, 1);
  launch->alloc_size = size;
  launch->device = l->device;
  launch->mesh_index = l->mesh_index;
  launch->group_size = l->group_size;
  launch->gang_id = l->gang_id;
  launch->input_count = l->input_count;
  launch->output_count = l->output_count;
  unsigned char* base = memory;
  launch->inputs = (pw_backend_memory_t*)(base + memories_at);
  launch->outputs = launch->inputs + l->input_count;
  launch->input_shards = (pw_cpu_input_shard_t*)(base + in_shards_at);
  launch->output_shards = (pw_cpu_output_shard_t*)(base + out_shards_at);
  for (uint32_t i = 0; i < l->input_count; ++i) launch->inputs[i] = l->inputs[i];
  for (uint32_t i = 0; i < l->output_count; ++i) launch->outputs[i] = l->outputs[i];
  launch->done = l->done;
  launch->done_user = l->done_user;
  if (PW_STRUCT_HAS_FIELD(l, pw_backend_launch_t, done_timed)) {
    launch->done_timed = l->done_timed;
    launch->queue_seq = l->queue_seq;
  }
  if (PW_STRUCT_HAS_FIELD(l, pw_backend_launch_t, node_arg)) launch->node_arg = l->node_arg;
  launch->group_devices = (uint32_t*)(base + devices_at);
  memcpy(launch->group_devices, l->group_devices, (size_t)l->group_size * sizeof(uint32_t));
  if (sorted_check) {
    status = pw_cpu_check_aliases(launch, (pw_cpu_alias_t*)(base + scratch_at));
    if (status != NULL) {
      pw_cpu__launch_free(launch);
      return status;
    }
  }
  *out_launch = launch;
  return NULL;
}

static pw_status_t pw_cpu_launch(void* self, const pw_backend_launch_t* l) {
  pw_cpu__backend_t* backend = self;
  if (backend->streams != NULL) return pw_cpu__streams_launch(backend, l);
  pw_cpu__launch_t* launch = NULL;
  pw_status_t refused = pw_cpu__launch_check(backend, l);
  if (refused == NULL) refused = pw_cpu__launch_copy(backend, l, &launch);
  if (refused != NULL) {
    /* The other parts of a gang must not wait for this one. */
    if (l != NULL && l->struct_size >= PW_CPU_LAUNCH_SIZE_V1 && l->group_size > 1) {
      pw_cpu__collective_refused(backend, l->gang_id, refused);
    }
    return refused;
  }
  pw_cpu__pool_push(&backend->pool, &launch->task);
  return NULL;
}

/*---------------------------------------------------------------------------
 * Creation and destruction
 *-------------------------------------------------------------------------*/

static void pw_cpu_free(pw_cpu__backend_t* backend) {
  pw_cpu__cache_deinit(backend);
  pw_cpu__kernels_free(backend);
  pthread_mutex_destroy(&backend->rendezvous_mutex);
  pthread_mutex_destroy(&backend->kernels_mutex);
  pw_allocator_t allocator = backend->allocator;
  if (backend->devices != NULL) {
    pw_allocator_free(allocator, backend->devices,
                      backend->device_count * sizeof(pw_cpu__device_t));
  }
  pw_allocator_free(allocator, backend, sizeof(*backend));
}

static void pw_cpu_destroy(void* self) {
  pw_cpu__backend_t* backend = self;
  if (backend == NULL) return;
  if (pw_cpu__pool_is_worker(&backend->pool) || pw_cpu__streams_is_worker(backend)) {
    /* Joining ourselves would hang; leaking is the lesser harm. */
    pw_log(&backend->logger, PW_LOG_ERROR, PW_CPU_LOG,
           "destroy called from a pool or stream thread (a done callback); the "
           "backend is leaked");
    return;
  }
  pw_cpu__streams_stop(backend);
  pw_cpu__pool_stop(&backend->pool);
  pw_cpu__collective_shutdown(backend);
  uint64_t memories = atomic_load(&backend->live_memories);
  uint64_t executables = atomic_load(&backend->live_executables);
  if (memories != 0 || executables != 0) {
    pw_log(&backend->logger, PW_LOG_WARN, PW_CPU_LOG,
           "destroyed with %llu device allocations and %llu executables still "
           "live (they are leaked)",
           (unsigned long long)memories, (unsigned long long)executables);
  }
  pw_cpu_free(backend);
}

void pw_cpu_backend_options_init(pw_cpu_backend_options_t* out_options) {
  if (out_options == NULL) return;
  memset(out_options, 0, sizeof(*out_options));
  out_options->struct_size = sizeof(*out_options);
  out_options->allocator = pw_allocator_system();
  out_options->logger = pw_logger_default();
  out_options->device_count = PW_CPU_DEFAULT_DEVICES;
  out_options->worker_count = PW_CPU_DEFAULT_WORKERS;
  out_options->device_memory_bytes = PW_CPU_DEFAULT_MEMORY;
  out_options->spin_us = PW_CPU_DEFAULT_SPIN_US;
}

/* The v3 fields (spin-then-park, affinity). As for every field beyond
 * struct_size, an older struct reads them as zero: the default spin, no
 * pinning. */
static pw_status_t pw_cpu_read_pool_options(const pw_cpu_backend_options_t* options,
                                            pw_cpu_backend_options_t* out) {
  if (PW_STRUCT_HAS_FIELD(options, pw_cpu_backend_options_t, spin_us)) {
    out->spin_us = options->spin_us == 0 ? PW_CPU_DEFAULT_SPIN_US : options->spin_us;
    if (out->spin_us != PW_CPU_SPIN_OFF && out->spin_us > PW_CPU_MAX_SPIN_US) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "pw_cpu_backend_create: spin_us %u is above the maximum "
                            "%u (PW_CPU_SPIN_OFF parks at once)",
                            out->spin_us, PW_CPU_MAX_SPIN_US);
    }
  }
  if (PW_STRUCT_HAS_FIELD(options, pw_cpu_backend_options_t, affinity)) {
    out->affinity = options->affinity;
  }
  if (out->affinity != PW_CPU_AFFINITY_NONE && out->affinity != PW_CPU_AFFINITY_ROUND_ROBIN &&
      out->affinity != PW_CPU_AFFINITY_LIST) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cpu_backend_create: affinity %u is not a "
                          "PW_CPU_AFFINITY_* value",
                          out->affinity);
  }
  if (out->affinity != PW_CPU_AFFINITY_LIST) return NULL;
  if (!PW_STRUCT_HAS_FIELD(options, pw_cpu_backend_options_t, affinity_cpus)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cpu_backend_create: affinity is PW_CPU_AFFINITY_LIST but "
                          "struct_size %zu does not reach affinity_cpus",
                          options->struct_size);
  }
  out->affinity_cpu_count = options->affinity_cpu_count;
  out->affinity_cpus = options->affinity_cpus;
  if (out->affinity_cpu_count == 0 || out->affinity_cpu_count > PW_CPU_MAX_WORKERS ||
      out->affinity_cpus == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cpu_backend_create: PW_CPU_AFFINITY_LIST needs "
                          "affinity_cpus with 1 .. %u entries (affinity_cpu_count %u, "
                          "affinity_cpus %s)",
                          PW_CPU_MAX_WORKERS, out->affinity_cpu_count,
                          out->affinity_cpus == NULL ? "NULL" : "set");
  }
  return NULL;
}

/* Address-sanitized builds keep no freed blocks by default. */
#if defined(__SANITIZE_ADDRESS__)
#define PW_CPU_CACHE_DEFAULT_ON 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PW_CPU_CACHE_DEFAULT_ON 0
#endif
#endif
#ifndef PW_CPU_CACHE_DEFAULT_ON
#define PW_CPU_CACHE_DEFAULT_ON 1
#endif

/* block_cache_bytes 0 is the default: one device's memory. */
static pw_status_t pw_cpu_resolve_cache(pw_cpu_backend_options_t* o) {
  if (o->block_cache_bytes == 0) {
    o->block_cache_bytes = PW_CPU_CACHE_DEFAULT_ON ? o->device_memory_bytes : PW_CPU_BLOCK_CACHE_OFF;
  }
  return NULL;
}

static pw_status_t pw_cpu_read_options(const pw_cpu_backend_options_t* options,
                                       pw_cpu_backend_options_t* out) {
  pw_cpu_backend_options_init(out);
  if (options == NULL) return pw_cpu_resolve_cache(out);
  if (options->struct_size < PW_CPU_BACKEND_OPTIONS_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cpu_backend_create: options struct_size %zu is below "
                          "v1 (%zu)",
                          options->struct_size, (size_t)PW_CPU_BACKEND_OPTIONS_SIZE_V1);
  }
  if (options->allocator.alloc != NULL || options->allocator.free != NULL) {
    if (!pw_allocator_is_valid(options->allocator)) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "pw_cpu_backend_create: allocator has only one of "
                            "alloc/free");
    }
    out->allocator = options->allocator;
  }
  if (options->logger.fn != NULL) out->logger = options->logger;
  if (options->device_count != 0) out->device_count = options->device_count;
  if (options->worker_count != 0) out->worker_count = options->worker_count;
  if (options->device_memory_bytes != 0) {
    out->device_memory_bytes = options->device_memory_bytes;
  }
  out->host = options->host;
  if (PW_STRUCT_HAS_FIELD(options, pw_cpu_backend_options_t, stream_depth)) {
    out->stream_depth = options->stream_depth;
  }
  if (out->device_count > PW_CPU_MAX_DEVICES || out->worker_count > PW_CPU_MAX_WORKERS) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cpu_backend_create: %u devices and %u workers "
                          "(maxima %u and %u)",
                          out->device_count, out->worker_count, PW_CPU_MAX_DEVICES,
                          PW_CPU_MAX_WORKERS);
  }
  if (PW_STRUCT_HAS_FIELD(options, pw_cpu_backend_options_t, block_cache_bytes)) {
    out->block_cache_bytes = options->block_cache_bytes;
  }
  PW_RETURN_IF_ERROR(pw_cpu_resolve_cache(out));
  return pw_cpu_read_pool_options(options, out);
}

pw_status_t pw_cpu_backend_create(const pw_cpu_backend_options_t* options,
                                  pw_backend_t* out_backend) {
  if (out_backend == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_cpu_backend_create: out_backend is NULL");
  }
  memset(out_backend, 0, sizeof(*out_backend));
  pw_cpu_backend_options_t o;
  PW_RETURN_IF_ERROR(pw_cpu_read_options(options, &o));
  void* memory = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_allocator_calloc(o.allocator, sizeof(pw_cpu__backend_t),
                                             alignof(pw_cpu__backend_t), &memory),
                         "pw_cpu_backend_create");
  pw_cpu__backend_t* backend = memory;
  backend->allocator = o.allocator;
  backend->logger = o.logger;
  backend->device_count = o.device_count;
  backend->capacity = o.device_memory_bytes;
  backend->host = o.host;
  atomic_init(&backend->live_memories, 0);
  atomic_init(&backend->live_executables, 0);
  pthread_mutex_init(&backend->kernels_mutex, NULL);
  pthread_mutex_init(&backend->rendezvous_mutex, NULL);
  pw_cpu__cache_init(&backend->cache,
                     o.block_cache_bytes == PW_CPU_BLOCK_CACHE_OFF ? 0 : o.block_cache_bytes);
  void* devices = NULL;
  pw_status_t status = pw_allocator_calloc_array(
      o.allocator, o.device_count, sizeof(pw_cpu__device_t),
      alignof(pw_cpu__device_t), &devices);
  if (status == NULL) {
    backend->devices = devices;
    for (uint32_t i = 0; i < o.device_count; ++i) {
      atomic_init(&backend->devices[i].health, PW_DEVICE_HEALTHY);
      atomic_init(&backend->devices[i].used_bytes, 0);
    }
    status = pw_cpu__register_builtins(backend);
  }
  if (status == NULL) {
    status = o.stream_depth > 0
                 ? pw_cpu__streams_start(backend, o.stream_depth)
                 : pw_cpu__pool_start(&backend->pool, o.allocator,
                                      &(pw_cpu__pool_config_t){
                                          .thread_count = o.worker_count,
                                          .spin_us = o.spin_us == PW_CPU_SPIN_OFF ? 0 : o.spin_us,
                                          .affinity = o.affinity,
                                          .cpu_count = o.affinity_cpu_count,
                                          .cpus = o.affinity_cpus,
                                          .logger = &backend->logger});
  }
  if (status != NULL) {
    pw_cpu_free(backend);
    return pw_status_annotate(status, "pw_cpu_backend_create");
  }
  if (o.stream_depth > 0) {
    pw_log(&backend->logger, PW_LOG_DEBUG, PW_CPU_LOG,
           "created: %u devices of %llu bytes, one stream each of depth %u",
           o.device_count, (unsigned long long)o.device_memory_bytes, o.stream_depth);
  } else {
    pw_log(&backend->logger, PW_LOG_DEBUG, PW_CPU_LOG,
           "created: %u devices of %llu bytes, %u workers (spin %u us, affinity %u)",
           o.device_count, (unsigned long long)o.device_memory_bytes, o.worker_count,
           o.spin_us == PW_CPU_SPIN_OFF ? 0 : o.spin_us, o.affinity);
  }
  out_backend->vtable = &pw_cpu_vtable;
  out_backend->self = backend;
  return NULL;
}

static const pw_backend_vtable_t pw_cpu_vtable = {
    .struct_size = sizeof(pw_backend_vtable_t),
    .name = PW_CPU_BACKEND_NAME,
    .version = PW_CPU_BACKEND_VERSION,
    .destroy = pw_cpu_destroy,
    .device_count = pw_cpu_device_count,
    .device_info = pw_cpu_device_info,
    .health = pw_cpu_health,
    .compile = pw_cpu__compile,
    .load = pw_cpu__load,
    .unload = pw_cpu__unload,
    .allocate = pw_cpu_allocate,
    .deallocate = pw_cpu_deallocate,
    .launch = pw_cpu_launch,
    .copy_to_device = pw_cpu_copy_to_device,
    .copy_to_host = pw_cpu_copy_to_host,
    .host_pointer = pw_cpu_host_pointer,
    .queue_info = pw_cpu__queue_info,
    .adopt_host = pw_cpu_adopt_host,
    .accumulate = pw_cpu__accumulate,
};
