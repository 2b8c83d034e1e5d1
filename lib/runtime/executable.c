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
  pw_allocator_free(rt->allocator, e->params,
                    e->param_count * sizeof(pw_backend_param_t));
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

/* Copies the specs the backend reported (its v2 pointers or its fixed
 * arrays, storage it owns until unload) into |e|'s own array, and points
 * the signature's v2 fields at it; the fixed arrays keep the first
 * PW_BACKEND_MAX_PARAMS of each. */
static pw_status_t pw_executable_own_specs(pw_executable_obj_t* e, pw_allocator_t a) {
  pw_executable_signature_t* sig = &e->signature;
  size_t n = (size_t)sig->input_count + sig->output_count;
  if (n == 0) {
    sig->input_specs = sig->output_specs = NULL;
    return NULL;
  }
  pw_backend_param_t* specs = NULL;
  pw_status_t status = pw_allocator_calloc_array(a, n, sizeof(*specs), 0, (void**)&specs);
  if (status != NULL) {
    sig->input_specs = sig->output_specs = NULL; /* the backend's: not ours to keep */
    return pw_status_annotate(status, "executable '%s': %zu parameter specs", sig->name, n);
  }
  if (sig->input_count) {
    memcpy(specs, pw__signature_inputs(sig), sig->input_count * sizeof(*specs));
  }
  if (sig->output_count) {
    memcpy(specs + sig->input_count, pw__signature_outputs(sig),
           sig->output_count * sizeof(*specs));
  }
  e->params = specs;
  e->param_count = n;
  sig->input_specs = specs;
  sig->output_specs = specs + sig->input_count;
  for (uint32_t i = 0; i < sig->input_count && i < PW_BACKEND_MAX_PARAMS; ++i) {
    sig->inputs[i] = specs[i];
  }
  for (uint32_t i = 0; i < sig->output_count && i < PW_BACKEND_MAX_PARAMS; ++i) {
    sig->outputs[i] = specs[sig->input_count + i];
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
  if (status == NULL) status = pw_executable_own_specs(e, rt->allocator);
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
    status = pw_array_spec_check(&e->signature.input_specs[i], &vs->mesh);
    if (status) status = pw_status_annotate(status, "backend reported input %u", i);
  }
  for (uint32_t i = 0; status == NULL && i < e->signature.output_count; ++i) {
    status = pw_array_spec_check(&e->signature.output_specs[i], &vs->mesh);
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
  const pw_executable_signature_t* sig = &e->signature;
  pw_status_t status = NULL;
  if (!PW_STRUCT_HAS_FIELD(out_signature, pw_executable_signature_t, output_specs) &&
      (sig->input_count > PW_BACKEND_MAX_PARAMS || sig->output_count > PW_BACKEND_MAX_PARAMS)) {
    status = pw_status_make(PW_STATUS_OUT_OF_RANGE,
                            "pw_executable_signature: executable '%s' has %u inputs and %u "
                            "outputs; a v1 pw_executable_signature_t holds %d of each (pass "
                            "struct_size >= PW_EXECUTABLE_SIGNATURE_SIZE_V2, or read them with "
                            "pw_executable_param)",
                            sig->name, sig->input_count, sig->output_count,
                            PW_BACKEND_MAX_PARAMS);
  } else {
    pw_struct_fill(out_signature, sig, sizeof(*sig));
  }
  pw__object_release(&e->header);
  return status;
}

pw_status_t pw_executable_param(pw_client_t* client, pw_executable_t executable,
                                pw_param_role_t role, uint32_t index,
                                pw_backend_param_t* out_spec) {
  if (out_spec == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_executable_param: out_spec is NULL");
  }
  memset(out_spec, 0, sizeof(*out_spec));
  if (role != PW_PARAM_INPUT && role != PW_PARAM_OUTPUT) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_executable_param: role %d is neither "
                          "PW_PARAM_INPUT nor PW_PARAM_OUTPUT", (int)role);
  }
  pw_executable_obj_t* e = NULL;
  PW_RETURN_IF_ERROR(pw_executable_get(client, executable, &e));
  const pw_executable_signature_t* sig = &e->signature;
  bool input = role == PW_PARAM_INPUT;
  uint32_t count = input ? sig->input_count : sig->output_count;
  pw_status_t status = NULL;
  if (index >= count) {
    status = pw_status_make(PW_STATUS_OUT_OF_RANGE,
                            "pw_executable_param: executable '%s' has %u %ss, asked for %u",
                            sig->name, count, input ? "input" : "output", index);
  } else {
    *out_spec = input ? sig->input_specs[index] : sig->output_specs[index];
  }
  pw__object_release(&e->header);
  return status;
}

pw_status_t pw_executable_param_count(pw_client_t* client, pw_executable_t executable,
                                      pw_param_role_t role, uint32_t* out_count) {
  if (out_count == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_executable_param_count: out_count is NULL");
  }
  *out_count = 0;
  if (role != PW_PARAM_INPUT && role != PW_PARAM_OUTPUT) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_executable_param_count: role %d is "
                          "neither PW_PARAM_INPUT nor PW_PARAM_OUTPUT", (int)role);
  }
  pw_executable_obj_t* e = NULL;
  PW_RETURN_IF_ERROR(pw_executable_get(client, executable, &e));
  *out_count = role == PW_PARAM_INPUT ? e->signature.input_count : e->signature.output_count;
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
