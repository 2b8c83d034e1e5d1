/* Placement by attribute: which physical slices a pw_vslice_request_t
 * admits, and the words its errors use (runtime.h). The choice among the
 * admitted ones is pw_vslice_create_request's (vslice.c). */
#include <stdio.h>
#include <string.h>

#include "plugin/backend_call.h"
#include "runtime/runtime_internal.h"

static bool pw_placement_set(const char* text) { return text != NULL && text[0] != '\0'; }

static const char* pw_placement_backend(const pw_slice_t* slice) {
  const pw_backend_t* b = slice->backend;
  return b != NULL && b->vtable != NULL && b->vtable->name != NULL ? b->vtable->name : "?";
}

/* Device kind of the slice's first device ("" when the backend has none). */
static void pw_placement_kind(const pw_slice_t* slice, char* kind, size_t capacity) {
  kind[0] = '\0';
  if (slice->device_count == 0 || slice->group_devices == NULL) return;
  pw_backend_device_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  pw_status_t s = pw__backend_device_info(slice->backend, slice->group_devices[0], &info);
  if (s == NULL) snprintf(kind, capacity, "%.*s", (int)sizeof(info.kind), info.kind);
  pw_status_free(s);
}

bool pw__placement_matches(const pw_slice_t* slice, const pw_vslice_request_t* request) {
  if (pw_placement_set(request->slice_name) && strcmp(slice->name, request->slice_name) != 0) {
    return false;
  }
  if (request->host != PW_VSLICE_ANY_HOST && slice->host != request->host) return false;
  if (pw_placement_set(request->backend) &&
      strcmp(pw_placement_backend(slice), request->backend) != 0) {
    return false;
  }
  if (pw_placement_set(request->device_kind)) {
    char kind[64];
    pw_placement_kind(slice, kind, sizeof(kind));
    if (strcmp(kind, request->device_kind) != 0) return false;
  }
  return true;
}

void pw__placement_wanted(const pw_vslice_request_t* request, char* buffer, size_t capacity) {
  size_t n = 0;
  buffer[0] = '\0';
  const char* names[3] = {"backend", "device kind", "slice"};
  const char* values[3] = {request->backend, request->device_kind, request->slice_name};
  for (int i = 0; i < 3; ++i) {
    if (!pw_placement_set(values[i]) || n >= capacity) continue;
    n += (size_t)snprintf(buffer + n, capacity - n, "%s%s '%s'", n ? ", " : "", names[i],
                          values[i]);
  }
  if (request->host != PW_VSLICE_ANY_HOST && n < capacity) {
    snprintf(buffer + n, capacity - n, "%shost %u", n ? ", " : "", request->host);
  }
}

void pw__placement_available(const pw_runtime_t* runtime, char* buffer, size_t capacity) {
  size_t n = 0;
  buffer[0] = '\0';
  for (uint32_t s = 0; s < runtime->slice_count && n + 1 < capacity; ++s) {
    const pw_slice_t* slice = &runtime->slices[s];
    char mesh[32], kind[64];
    pw_mesh_shape_format(&slice->mesh, mesh, sizeof(mesh));
    pw_placement_kind(slice, kind, sizeof(kind));
    n += (size_t)snprintf(buffer + n, capacity - n, "%s%s (%s, backend %s, kind %s, host %u, %u bound)",
                          s ? "; " : "", slice->name, mesh, pw_placement_backend(slice),
                          kind[0] ? kind : "-", slice->host, slice->bound_vslices);
  }
}
