/* A complete backend plugin in one file: "example", a host-memory backend
 * with one program, a copy. Built on its own against an installed
 * libpathways (CMakeLists.txt here), loaded by path, and checked with
 * pathways-cts; docs/plugins.md ("Writing a backend") walks through it.
 *
 *   pathways-cts --args devices=4 ./libpathways_example.so
 *
 * What a backend provides (pathways/backend.h):
 *   - devices: a count, a description (device_info), a health;
 *   - compile: program text -> executable bytes, deterministic, since the
 *     runtime caches them by content; load: bytes -> an executable, and
 *     bytes that are truncated, corrupted or foreign are an error, never a
 *     crash (here: an exact size, a magic and a checksum);
 *   - memory: allocate, copies in and out with range checks, and
 *     optionally a host pointer;
 *   - launch: one part of a gang on one device; the async contract is
 *     that an error return means done never runs, otherwise done runs
 *     exactly once. This backend runs the copy inside launch and calls
 *     done before returning (inline completion is allowed).
 * What the plugin library adds (pathways/plugin.h): pw_plugin_entry
 * returning the factory (name, kind, ABI version, create from an options
 * string), and, for the conformance suite, pw_plugin_cts_hooks
 * (pathways/cts.h): the program text of the suite's copy, a way to mark a
 * device failed, and a create that takes an allocator so that the suite
 * can count and fail allocations. There is no all-reduce program: the
 * suite reports the collective cases as skipped.
 *
 * The program language: exactly "example-copy f32[N]\n", N > 0 elements
 * split over the mesh's devices (N a multiple of their count); each
 * device copies its shard of input 0 to output 0.
 *
 * Options: devices=N (1-64, default 2), memory_mib=N (per device, 1-1024,
 * default 64). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pathways/cts.h"
#include "pathways/pathways.h"
#include "pathways/plugin.h"

#define EXAMPLE_NAME "example"
#define EXAMPLE_MAX_DEVICES 64u
#define EXAMPLE_MAGIC "PWEXMPL1"

typedef struct example_backend_t {
  pw_allocator_t allocator;
  uint32_t device_count;
  uint64_t capacity;                            /* bytes per device */
  _Atomic uint64_t used[EXAMPLE_MAX_DEVICES];   /* bytes allocated per device */
  _Atomic int health[EXAMPLE_MAX_DEVICES];      /* pw_device_health_t */
} example_backend_t;

/* One allocation: its device and size, then the bytes. */
typedef struct example_memory_t {
  uint32_t device;
  size_t size;
  unsigned char data[];
} example_memory_t;

/* The executable bytes: fixed size, a magic, the shard length, the mesh
 * and a checksum over everything before it. The members are ordered so
 * that the struct has no padding: every byte is checked. */
typedef struct example_blob_t {
  char magic[8];
  uint64_t shard_elements; /* per device */
  uint32_t rank;
  uint32_t dims[PW_MAX_MESH_RANK];
  uint32_t checksum;       /* FNV-1a of the bytes before it */
} example_blob_t;
_Static_assert(sizeof(example_blob_t) == 8 + 8 + 4 + 4 * PW_MAX_MESH_RANK + 4,
               "example_blob_t has padding");

typedef struct example_executable_t {
  pw_mesh_shape_t mesh;
  uint32_t device_count; /* of the mesh */
  uint64_t shard_elements;
} example_executable_t;

static const pw_backend_vtable_t example_vtable;

/* FNV-1a: any change of one byte changes the hash, so every bit flip of a
 * blob is caught. */
static uint32_t example_checksum(const void* bytes, size_t size) {
  const unsigned char* p = bytes;
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

static pw_status_t example_check_device(const example_backend_t* b, uint32_t device) {
  if (device >= b->device_count) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE, "example: device %u does not exist (%u devices)",
                          device, b->device_count);
  }
  return NULL;
}

/* --- Devices. --- */

static void example_destroy(void* self) {
  example_backend_t* b = self;
  pw_allocator_free(b->allocator, b, sizeof(*b));
}

static uint32_t example_device_count(void* self) {
  return ((example_backend_t*)self)->device_count;
}

static pw_status_t example_device_info(void* self, uint32_t device,
                                       pw_backend_device_info_t* out_info) {
  example_backend_t* b = self;
  PW_RETURN_IF_ERROR(example_check_device(b, device));
  /* Fill only what the caller's struct has room for (it may be older). */
  pw_backend_device_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  info.host = 0;
  info.memory_bytes = b->capacity;
  snprintf(info.kind, sizeof(info.kind), "example-host");
  size_t n = out_info->struct_size < sizeof(info) ? out_info->struct_size : sizeof(info);
  memcpy((char*)out_info + sizeof(size_t), (const char*)&info + sizeof(size_t),
         n - sizeof(size_t));
  return NULL;
}

static pw_device_health_t example_health(void* self, uint32_t device) {
  example_backend_t* b = self;
  if (device >= b->device_count) return PW_DEVICE_FAILED;
  return (pw_device_health_t)atomic_load(&b->health[device]);
}

/* --- Programs. --- */

static pw_status_t example_compile(void* self, const void* program, size_t program_size,
                                   const pw_mesh_shape_t* mesh, const char* options,
                                   pw_allocator_t allocator, void** out_bytes,
                                   size_t* out_size) {
  (void)self;
  (void)options;
  *out_bytes = NULL;
  *out_size = 0;
  PW_RETURN_IF_ERROR(pw_mesh_shape_check(mesh));
  static const char prefix[] = "example-copy f32[";
  const size_t p = sizeof(prefix) - 1;
  const char* text = program;
  if (text == NULL || program_size <= p + 2 || memcmp(text, prefix, p) != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "example: a program is \"example-copy f32[N]\\n\"");
  }
  uint64_t total = 0;
  size_t i = p;
  for (; i < program_size && text[i] >= '0' && text[i] <= '9' && total < (1ull << 40); ++i) {
    total = total * 10 + (uint64_t)(text[i] - '0');
  }
  if (i == p || i + 2 != program_size || text[i] != ']' || text[i + 1] != '\n') {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "example: a program is \"example-copy f32[N]\\n\"");
  }
  uint32_t devices = pw_mesh_shape_device_count(mesh);
  if (total == 0 || total % devices != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "example: %llu elements do not split over %u devices",
                          (unsigned long long)total, devices);
  }
  example_blob_t blob;
  memset(&blob, 0, sizeof(blob)); /* padding included: the bytes are deterministic */
  memcpy(blob.magic, EXAMPLE_MAGIC, sizeof(blob.magic));
  blob.rank = mesh->rank;
  memcpy(blob.dims, mesh->dims, sizeof(blob.dims));
  blob.shard_elements = total / devices;
  blob.checksum = example_checksum(&blob, offsetof(example_blob_t, checksum));
  void* bytes = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(allocator, sizeof(blob), 0, &bytes));
  memcpy(bytes, &blob, sizeof(blob));
  *out_bytes = bytes;
  *out_size = sizeof(blob);
  return NULL;
}

static pw_status_t example_load(void* self, const void* bytes, size_t size,
                                pw_backend_executable_t* out_executable,
                                pw_executable_signature_t* out_signature) {
  example_backend_t* b = self;
  *out_executable = NULL;
  example_blob_t blob;
  if (bytes == NULL || size != sizeof(blob)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "example: executable bytes are %zu bytes, not %zu", size, sizeof(blob));
  }
  memcpy(&blob, bytes, sizeof(blob)); /* |bytes| may be unaligned */
  if (memcmp(blob.magic, EXAMPLE_MAGIC, sizeof(blob.magic)) != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "example: not an example executable");
  }
  if (blob.checksum != example_checksum(&blob, offsetof(example_blob_t, checksum))) {
    return pw_status_make(PW_STATUS_DATA_LOSS, "example: executable checksum mismatch");
  }
  pw_mesh_shape_t mesh = {.rank = blob.rank};
  memcpy(mesh.dims, blob.dims, sizeof(mesh.dims));
  pw_status_t status = pw_mesh_shape_check(&mesh);
  if (status != NULL || blob.shard_elements == 0 || blob.shard_elements > (1ull << 40)) {
    pw_status_free(status);
    return pw_status_make(PW_STATUS_DATA_LOSS, "example: executable holds a bad mesh or size");
  }
  example_executable_t* e = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(b->allocator, sizeof(*e), 0, (void**)&e));
  e->mesh = mesh;
  e->device_count = pw_mesh_shape_device_count(&mesh);
  e->shard_elements = blob.shard_elements;
  /* The signature: one f32 input and output, split over every device. */
  int64_t total = (int64_t)(e->shard_elements * e->device_count);
  pw_backend_param_t param = {PW_DTYPE_F32, pw_shape_make(1, &total),
                              pw_sharding_split(0, PW_MESH_AXIS_ALL)};
  snprintf(out_signature->name, sizeof(out_signature->name), "example-copy");
  out_signature->mesh = mesh;
  out_signature->input_count = 1;
  out_signature->output_count = 1;
  out_signature->inputs[0] = param;
  out_signature->outputs[0] = param;
  *out_executable = (pw_backend_executable_t)e;
  return NULL;
}

static void example_unload(void* self, pw_backend_executable_t executable) {
  example_backend_t* b = self;
  pw_allocator_free(b->allocator, executable, sizeof(example_executable_t));
}

/* --- Memory. --- */

static pw_status_t example_allocate(void* self, uint32_t device, size_t size,
                                    pw_backend_memory_t* out_memory) {
  example_backend_t* b = self;
  *out_memory = NULL;
  PW_RETURN_IF_ERROR(example_check_device(b, device));
  /* Reserve the bytes first, so that concurrent allocations cannot
   * together exceed the capacity. */
  uint64_t used = atomic_load(&b->used[device]);
  do {
    if (size > b->capacity - used) {
      return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                            "example: device %u: %zu bytes do not fit (%llu of %llu free)",
                            device, size, (unsigned long long)(b->capacity - used),
                            (unsigned long long)b->capacity);
    }
  } while (!atomic_compare_exchange_weak(&b->used[device], &used, used + size));
  example_memory_t* m = NULL;
  pw_status_t status = pw_allocator_malloc(b->allocator, sizeof(*m) + size, 0, (void**)&m);
  if (status != NULL) {
    atomic_fetch_sub(&b->used[device], size);
    return status;
  }
  m->device = device;
  m->size = size;
  *out_memory = (pw_backend_memory_t)m;
  return NULL;
}

static void example_deallocate(void* self, uint32_t device, pw_backend_memory_t memory) {
  example_backend_t* b = self;
  example_memory_t* m = (example_memory_t*)memory;
  (void)device;
  atomic_fetch_sub(&b->used[m->device], m->size);
  pw_allocator_free(b->allocator, m, sizeof(*m) + m->size);
}

/* |offset| + |size| inside |m|, |m| on |device|. */
static pw_status_t example_check_range(const example_backend_t* b, uint32_t device,
                                       const example_memory_t* m, size_t offset, size_t size) {
  PW_RETURN_IF_ERROR(example_check_device(b, device));
  if (m == NULL || m->device != device) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "example: memory is not device %u's",
                          device);
  }
  if (offset > m->size || size > m->size - offset) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE,
                          "example: %zu bytes at offset %zu do not fit in %zu bytes", size,
                          offset, m->size);
  }
  return NULL;
}

static pw_status_t example_copy_to_device(void* self, uint32_t device, pw_backend_memory_t dst,
                                          size_t offset, const void* src, size_t size) {
  example_memory_t* m = (example_memory_t*)dst;
  PW_RETURN_IF_ERROR(example_check_range(self, device, m, offset, size));
  if (size != 0) memcpy(m->data + offset, src, size);
  return NULL;
}

static pw_status_t example_copy_to_host(void* self, uint32_t device, pw_backend_memory_t src,
                                        size_t offset, void* dst, size_t size) {
  example_memory_t* m = (example_memory_t*)src;
  PW_RETURN_IF_ERROR(example_check_range(self, device, m, offset, size));
  if (size != 0) memcpy(dst, m->data + offset, size);
  return NULL;
}

static void* example_host_pointer(void* self, uint32_t device, pw_backend_memory_t memory) {
  (void)self;
  example_memory_t* m = (example_memory_t*)memory;
  return m != NULL && m->device == device ? m->data : NULL;
}

/* --- Launch. --- */

static pw_status_t example_check_launch(const example_backend_t* b, const pw_backend_launch_t* l) {
  if (l->struct_size < PW_BACKEND_LAUNCH_SIZE_V1 || l->executable == NULL || l->done == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "example: launch descriptor without executable or done");
  }
  const example_executable_t* e = (const example_executable_t*)l->executable;
  PW_RETURN_IF_ERROR(example_check_device(b, l->device));
  if (l->group_size != e->device_count || l->mesh_index >= l->group_size ||
      l->group_devices == NULL || l->group_devices[l->mesh_index] != l->device) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "example: gang of %u at mesh index %u does not fit the executable's "
                          "%u devices", l->group_size, l->mesh_index, e->device_count);
  }
  if (l->input_count != 1 || l->output_count != 1 || l->inputs == NULL || l->outputs == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "example: the copy takes 1 input and 1 output, not %u and %u",
                          l->input_count, l->output_count);
  }
  size_t bytes = (size_t)e->shard_elements * sizeof(float);
  PW_RETURN_IF_ERROR(example_check_range(b, l->device, (const example_memory_t*)l->inputs[0], 0,
                                         bytes));
  return example_check_range(b, l->device, (const example_memory_t*)l->outputs[0], 0, bytes);
}

static pw_status_t example_launch(void* self, const pw_backend_launch_t* l) {
  example_backend_t* b = self;
  PW_RETURN_IF_ERROR(example_check_launch(b, l));
  if (atomic_load(&b->health[l->device]) == PW_DEVICE_FAILED) {
    return pw_status_make(PW_STATUS_UNAVAILABLE, "example: device %u has failed", l->device);
  }
  const example_executable_t* e = (const example_executable_t*)l->executable;
  example_memory_t* in = (example_memory_t*)l->inputs[0];
  example_memory_t* out = (example_memory_t*)l->outputs[0];
  memmove(out->data, in->data, (size_t)e->shard_elements * sizeof(float));
  /* Done exactly once, here, before launch returns. A v2 runtime asks for
   * the timed completion. */
  if (l->struct_size >= PW_BACKEND_LAUNCH_SIZE_V2 && l->done_timed != NULL) {
    pw_backend_timing_t timing = {.struct_size = sizeof(timing)};
    l->done_timed(l->done_user, NULL, &timing);
  } else {
    l->done(l->done_user, NULL);
  }
  return NULL;
}

static const pw_backend_vtable_t example_vtable = {
    .struct_size = sizeof(pw_backend_vtable_t),
    .name = EXAMPLE_NAME,
    .version = 1,
    .destroy = example_destroy,
    .device_count = example_device_count,
    .device_info = example_device_info,
    .health = example_health,
    .compile = example_compile,
    .load = example_load,
    .unload = example_unload,
    .allocate = example_allocate,
    .deallocate = example_deallocate,
    .launch = example_launch,
    .copy_to_device = example_copy_to_device,
    .copy_to_host = example_copy_to_host,
    .host_pointer = example_host_pointer,
};

/* --- The plugin. --- */

static const char* const example_keys[] = {"devices", "memory_mib", NULL};

static pw_status_t example_create_with(const char* args, pw_allocator_t allocator,
                                       pw_backend_t* out_backend) {
  memset(out_backend, 0, sizeof(*out_backend));
  uint64_t devices = 0, memory_mib = 0;
  PW_RETURN_IF_ERROR(pw_plugin_args_check(args, example_keys));
  PW_RETURN_IF_ERROR(pw_plugin_args_range(args, "devices", 2, 1, EXAMPLE_MAX_DEVICES, &devices));
  PW_RETURN_IF_ERROR(pw_plugin_args_range(args, "memory_mib", 64, 1, 1024, &memory_mib));
  example_backend_t* b = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(allocator, sizeof(*b), 0, (void**)&b));
  b->allocator = allocator;
  b->device_count = (uint32_t)devices;
  b->capacity = memory_mib << 20;
  out_backend->vtable = &example_vtable;
  out_backend->self = b;
  return NULL;
}

static pw_status_t example_create(const char* args, pw_backend_t* out_backend) {
  return example_create_with(args, pw_allocator_system(), out_backend);
}

static const pw_plugin_factory_t example_factory = {
    .struct_size = sizeof(pw_plugin_factory_t),
    .abi_version = PW_PLUGIN_ABI_VERSION,
    .kind = PW_PLUGIN_KIND_BACKEND,
    .name = EXAMPLE_NAME,
    .version = "1.0",
    .description = "an example host-memory backend with one copy program",
    .args_help = "devices=N (1-64, default 2), memory_mib=N (per device, default 64)",
    .create_backend = example_create,
};

/* --- What the conformance suite needs beyond the factory. --- */

static size_t example_copy_program(const pw_mesh_shape_t* mesh, uint32_t elements, char* buffer,
                                   size_t capacity) {
  unsigned total = pw_mesh_shape_device_count(mesh) * elements;
  int n = snprintf(buffer, capacity, "example-copy f32[%u]\n", total);
  return n < 0 ? 0 : (size_t)n;
}

static pw_status_t example_fail_device(pw_backend_t* backend, uint32_t device) {
  if (backend->vtable != &example_vtable) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "example: not an example backend");
  }
  example_backend_t* b = backend->self;
  PW_RETURN_IF_ERROR(example_check_device(b, device));
  atomic_store(&b->health[device], PW_DEVICE_FAILED);
  return NULL;
}

static const char* const example_bad_programs[] = {
    "example-copy f32[0]\n",  "example-copy f32[ 8]\n", "example-copy f64[8]\n",
    "example-copy f32[8]",    "example-copy f32[8]\n\n", "example-copy f32[-8]\n",
    "example-copy f32[99999999999999999999]\n",
    NULL,
};

static const pw_cts_hooks_t example_cts_hooks = {
    .struct_size = sizeof(pw_cts_hooks_t),
    .copy_program = example_copy_program,
    .fail_device = example_fail_device,
    .bad_programs = example_bad_programs,
    .create_backend = example_create_with,
};

PW_PLUGIN_EXPORT const pw_plugin_factory_t* pw_plugin_entry(uint32_t loader_abi);
PW_PLUGIN_EXPORT const pw_cts_hooks_t* pw_plugin_cts_hooks(uint32_t cts_abi);

const pw_plugin_factory_t* pw_plugin_entry(uint32_t loader_abi) {
  (void)loader_abi; /* one ABI so far */
  return &example_factory;
}

const pw_cts_hooks_t* pw_plugin_cts_hooks(uint32_t cts_abi) {
  return cts_abi == PW_CTS_ABI_VERSION ? &example_cts_hooks : NULL;
}
