#define _POSIX_C_SOURCE 200809L
/* Executables: compile through the vslice's backend (or the runtime's
 * compile cache, lib/cache), load, keep the bytes. */
#include <string.h>

#include "cache/cache_internal.h"
#include "plugin/backend_call.h"
#include "pathways/struct_size.h"
#include "core/objects.h"

static void pw_executable_destroy(pw_object_t* object) {
  pw_executable_obj_t* e = (pw_executable_obj_t*)object;
  pw_runtime_t* rt = object->runtime;
  pw__backend_unload(e->backend, e->loaded);
  pw_allocator_free(rt->allocator, e->bytes, e->byte_size);
  pw_allocator_free(rt->allocator, e->program, e->program_size);
  pw_allocator_free(rt->allocator, e->options, e->options_size);
  pw_allocator_free(rt->allocator, e, sizeof(*e));
}

/* Keeps a copy of what |e| was compiled from (for pw_graph_encode). */
static pw_status_t pw_executable_keep_source(pw_executable_obj_t* e, pw_allocator_t a,
                                             const void* program, size_t program_size,
                                             const char* options) {
  if (program_size > 0) {
    PW_RETURN_IF_ERROR(pw_allocator_malloc(a, program_size, 0, &e->program));
    memcpy(e->program, program, program_size);
    e->program_size = program_size;
  }
  if (options != NULL && options[0] != '\0') {
    size_t n = strlen(options) + 1;
    PW_RETURN_IF_ERROR(pw_allocator_malloc(a, n, 1, (void**)&e->options));
    memcpy(e->options, options, n);
    e->options_size = n;
  }
  return NULL;
}

/* Loads |bytes| (ownership of the allocation passes to the executable) on
 * |vs|'s backend, checks the signature against |vs|'s mesh. */
static pw_status_t pw_executable_make(pw_client_t* client, pw_vslice_obj_t* vs,
                                      void* bytes, size_t size, const void* program,
                                      size_t program_size, const char* options,
                                      pw_executable_t* out_executable) {
  pw_runtime_t* rt = client->runtime;
  pw_executable_obj_t* e = NULL;
  pw_status_t status = pw_allocator_calloc(rt->allocator, sizeof(*e), 0, (void**)&e);
  if (status != NULL) {
    pw_allocator_free(rt->allocator, bytes, size);
    return status;
  }
  pw__object_init(&e->header, PW_OBJECT_EXECUTABLE, rt, pw_executable_destroy);
  e->backend = vs->slice->backend;
  e->bytes = bytes;
  e->byte_size = size;
  status = pw__backend_load(e->backend, bytes, size, &e->loaded, &e->signature);
  if (status == NULL && !pw_mesh_shape_equal(&e->signature.mesh, &vs->mesh)) {
    char a[32], b[32];
    pw_mesh_shape_format(&e->signature.mesh, a, sizeof(a));
    pw_mesh_shape_format(&vs->mesh, b, sizeof(b));
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "executable '%s' was compiled for mesh %s, the virtual "
                            "slice has mesh %s",
                            e->signature.name, a, b);
  }
  for (uint32_t i = 0; status == NULL && i < e->signature.input_count; ++i) {
    status = pw_array_spec_check(&e->signature.inputs[i], &vs->mesh);
    if (status) status = pw_status_annotate(status, "backend reported input %u", i);
  }
  for (uint32_t i = 0; status == NULL && i < e->signature.output_count; ++i) {
    status = pw_array_spec_check(&e->signature.outputs[i], &vs->mesh);
    if (status) status = pw_status_annotate(status, "backend reported output %u", i);
  }
  e->signature.name[sizeof(e->signature.name) - 1] = '\0';
  if (status == NULL && program != NULL) {
    status = pw_executable_keep_source(e, rt->allocator, program, program_size, options);
  }
  if (status != NULL) {
    pw__object_release(&e->header);
    return status;
  }
  return pw__handle_insert(client, &e->header, &out_executable->id);
}

pw_status_t pw_executable_compile(pw_client_t* client, pw_vslice_t vslice,
                                  const void* program, size_t program_size,
                                  const char* options,
                                  pw_executable_t* out_executable) {
  if (client == NULL || out_executable == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_executable_compile: client or out_executable is NULL");
  }
  out_executable->id = 0;
  if (program == NULL && program_size != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_executable_compile: program is NULL");
  }
  pw_object_t* o = NULL;
  PW_RETURN_IF_ERROR(pw__handle_lookup(client, vslice.id, PW_OBJECT_VSLICE, "vslice", &o));
  pw_vslice_obj_t* vs = (pw_vslice_obj_t*)o;
  void* bytes = NULL;
  size_t size = 0;
  pw_allocator_t a = client->runtime->allocator;
  pw_cache_t* cache = pw_atomic_load_ptr_acquire(&client->runtime->compile_cache);
  pw_cache_key_t key;
  bool cached = false;
  pw_status_t status =
      cache ? pw__cache_compile(cache, vs->slice->backend, program, program_size, &vs->mesh,
                                options, a, &bytes, &size, &key, &cached)
            : pw__backend_compile(vs->slice->backend, program, program_size, &vs->mesh, options,
                                  a, &bytes, &size);
  if (status == NULL) {
    status = pw_executable_make(client, vs, bytes, size, program, program_size, options,
                                out_executable);
  }
  if (status != NULL && cached) {
    /* Cached bytes that do not load (a backend whose output changed without
     * a version bump): drop them and compile afresh, once. */
    pw_log(pw__cache_logger(cache), PW_LOG_WARN, "cache",
           "cached executable does not load (%s); compiling again", pw_status_message(status));
    pw_status_free(status);
    pw_status_ignore(pw_cache_invalidate(cache, &key));
    status = pw__backend_compile(vs->slice->backend, program, program_size, &vs->mesh, options,
                                 a, &bytes, &size);
    if (status == NULL) {
      status = pw_executable_make(client, vs, bytes, size, program, program_size, options,
                                  out_executable);
    }
  }
  pw__object_release(o);
  return status ? pw_status_annotate(status, "compiling on slice '%s'", vs->slice->name)
                : NULL;
}

pw_status_t pw_executable_load(pw_client_t* client, pw_vslice_t vslice,
                               const void* bytes, size_t size,
                               pw_executable_t* out_executable) {
  if (client == NULL || out_executable == NULL || (bytes == NULL && size != 0)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_executable_load: client, bytes or out_executable is NULL");
  }
  out_executable->id = 0;
  if (size == 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_executable_load: 0 bytes");
  }
  pw_object_t* o = NULL;
  PW_RETURN_IF_ERROR(pw__handle_lookup(client, vslice.id, PW_OBJECT_VSLICE, "vslice", &o));
  void* copy = NULL;
  pw_status_t status = pw_allocator_malloc(client->runtime->allocator, size, 0, &copy);
  if (status == NULL) {
    memcpy(copy, bytes, size);
    status = pw_executable_make(client, (pw_vslice_obj_t*)o, copy, size, NULL, 0, NULL,
                                out_executable);
  }
  pw__object_release(o);
  return status;
}

static pw_status_t pw_executable_get(pw_client_t* client, pw_executable_t executable,
                                     pw_executable_obj_t** out) {
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "client is NULL");
  }
  return pw__handle_lookup(client, executable.id, PW_OBJECT_EXECUTABLE, "executable",
                           (pw_object_t**)out);
}

pw_status_t pw_executable_signature(pw_client_t* client, pw_executable_t executable,
                                    pw_executable_signature_t* out_signature) {
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(out_signature, pw_executable_signature_t,
                                      PW_EXECUTABLE_SIGNATURE_SIZE_V1,
                                      "pw_executable_signature"));
  pw_executable_obj_t* e = NULL;
  PW_RETURN_IF_ERROR(pw_executable_get(client, executable, &e));
  pw_struct_fill(out_signature, &e->signature, sizeof(e->signature));
  pw__object_release(&e->header);
  return NULL;
}

pw_status_t pw_executable_bytes(pw_client_t* client, pw_executable_t executable,
                                const void** out_bytes, size_t* out_size) {
  if (out_bytes == NULL || out_size == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "out_bytes or out_size is NULL");
  }
  pw_executable_obj_t* e = NULL;
  PW_RETURN_IF_ERROR(pw_executable_get(client, executable, &e));
  *out_bytes = e->bytes;
  *out_size = e->byte_size;
  /* The handle keeps |e| alive; the documented lifetime is the handle's. */
  pw__object_release(&e->header);
  return NULL;
}

pw_status_t pw_executable_release(pw_client_t* client, pw_executable_t executable) {
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "client is NULL");
  }
  return pw__handle_remove(client, executable.id, PW_OBJECT_EXECUTABLE, "executable");
}

pw_status_t pw_runtime_set_compile_cache(pw_runtime_t* runtime, pw_cache_t* cache) {
  if (runtime == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_runtime_set_compile_cache: runtime is NULL");
  }
  pw_atomic_store_ptr_release(&runtime->compile_cache, cache);
  return NULL;
}
