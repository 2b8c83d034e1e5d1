#define _POSIX_C_SOURCE 200809L
/* Buffers: one object per logical array; shards live in device memory.
 * The blocking host transfers and the buffer queries; the copies
 * themselves are buffer_copy.c's, the asynchronous transfers
 * buffer_async.c's. */
#include <string.h>

#include "plugin/backend_call.h"
#include "runtime/buffer_copy.h"
#include "runtime/buffer_internal.h"
#include "sched/sched.h"

pw_status_t pw__buffer_make(pw_client_t* client, pw_vslice_t vslice,
                            const pw_array_spec_t* spec, const char* who,
                            pw_buffer_obj_t** out_buffer) {
  *out_buffer = NULL;
  pw_object_t* o = NULL;
  PW_RETURN_IF_ERROR(pw__handle_lookup(client, vslice.id, PW_OBJECT_VSLICE, "vslice", &o));
  pw_vslice_obj_t* vs = (pw_vslice_obj_t*)o;
  size_t total_bytes = 0, shard_bytes = 0;
  pw_status_t status = pw_array_spec_byte_sizes(spec, &vs->mesh, &total_bytes, &shard_bytes);
  if (status == NULL && pw_atomic_load_u32_acquire(&vs->slice->lost) != 0 &&
      pw__health_still_lost(vs->slice)) {
    status = pw_status_make(PW_STATUS_UNAVAILABLE,
                            "the vslice is bound to slice '%s', which has a lost part",
                            vs->slice->name);
  }
  if (status == NULL) status = pw__buffer_create(vs, spec, total_bytes, shard_bytes, out_buffer);
  pw__object_release(o);
  return status != NULL ? pw_status_annotate(status, "%s", who) : NULL;
}

pw_status_t pw__buffer_check_size(const pw_buffer_obj_t* b, size_t size, const char* who) {
  if (size == b->total_bytes) return NULL;
  char text[128];
  pw_array_spec_format(&b->spec, text, sizeof(text));
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: %zu bytes given, %s needs %zu", who,
                        size, text, b->total_bytes);
}

pw_status_t pw_buffer_from_host(pw_client_t* client, pw_vslice_t vslice,
                                const pw_array_spec_t* spec, const void* data,
                                size_t size, pw_buffer_t* out_buffer) {
  static const char who[] = "pw_buffer_from_host";
  if (client == NULL || spec == NULL || out_buffer == NULL || data == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_buffer_from_host: client, spec, data or out_buffer is NULL");
  }
  out_buffer->id = 0;
  pw_buffer_obj_t* b = NULL;
  PW_RETURN_IF_ERROR(pw__buffer_make(client, vslice, spec, who, &b));
  pw_status_t status = pw__buffer_check_size(b, size, who);
  if (status == NULL) status = pw__buffer_upload(b, data, true);
  if (status != NULL) {
    pw__object_release(&b->header);
    return status;
  }
  pw_atomic_store_u32_release(&b->fill, PW_BUFFER_FILL_CLAIMED);
  pw__event_complete_runtime(b->ready, NULL);
  return pw__handle_insert(client, &b->header, &out_buffer->id);
}

pw_status_t pw__buffer_get(pw_client_t* client, pw_buffer_t buffer, pw_buffer_obj_t** out) {
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "client is NULL");
  }
  return pw__handle_lookup(client, buffer.id, PW_OBJECT_BUFFER, "buffer",
                           (pw_object_t**)out);
}

pw_status_t pw_buffer_to_host(pw_client_t* client, pw_buffer_t buffer, void* dst,
                              size_t size, pw_time_t deadline) {
  if (dst == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_buffer_to_host: dst is NULL");
  }
  pw_buffer_obj_t* b = NULL;
  PW_RETURN_IF_ERROR(pw__buffer_get(client, buffer, &b));
  pw_status_t status = NULL;
  if (size != b->total_bytes) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "pw_buffer_to_host: %zu bytes given, the buffer holds %zu",
                            size, b->total_bytes);
  }
  if (status == NULL) status = pw_event_wait(b->ready, deadline);
  if (status == NULL) status = pw__buffer_lost(b, "pw_buffer_to_host");
  if (status == NULL) status = pw__buffer_download(b, dst, true);
  pw__object_release(&b->header);
  return status;
}

pw_status_t pw_buffer_ready_event(pw_client_t* client, pw_buffer_t buffer,
                                  pw_event_t** out_event) {
  if (out_event == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "out_event is NULL");
  }
  *out_event = NULL;
  pw_buffer_obj_t* b = NULL;
  PW_RETURN_IF_ERROR(pw__buffer_get(client, buffer, &b));
  pw_event_retain(b->ready);
  *out_event = b->ready;
  pw__object_release(&b->header);
  return NULL;
}

pw_status_t pw_buffer_spec(pw_client_t* client, pw_buffer_t buffer,
                           pw_array_spec_t* out_spec) {
  if (out_spec == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "out_spec is NULL");
  }
  pw_buffer_obj_t* b = NULL;
  PW_RETURN_IF_ERROR(pw__buffer_get(client, buffer, &b));
  *out_spec = b->spec;
  pw__object_release(&b->header);
  return NULL;
}

pw_status_t pw_buffer_mesh(pw_client_t* client, pw_buffer_t buffer, pw_mesh_shape_t* out_mesh) {
  if (out_mesh == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "out_mesh is NULL");
  }
  pw_buffer_obj_t* b = NULL;
  PW_RETURN_IF_ERROR(pw__buffer_get(client, buffer, &b));
  *out_mesh = b->mesh;
  pw__object_release(&b->header);
  return NULL;
}

pw_status_t pw_buffer_byte_size(pw_client_t* client, pw_buffer_t buffer,
                                size_t* out_size) {
  if (out_size == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "out_size is NULL");
  }
  pw_buffer_obj_t* b = NULL;
  PW_RETURN_IF_ERROR(pw__buffer_get(client, buffer, &b));
  *out_size = b->total_bytes;
  pw__object_release(&b->header);
  return NULL;
}

pw_status_t pw_buffer_retain(pw_client_t* client, pw_buffer_t buffer, pw_buffer_t* out_buffer) {
  if (client == NULL || out_buffer == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_buffer_retain: client or out_buffer is NULL");
  }
  out_buffer->id = 0;
  pw_object_t* object = NULL;
  PW_RETURN_IF_ERROR(pw__handle_lookup(client, buffer.id, PW_OBJECT_BUFFER, "buffer", &object));
  /* The insert takes over the looked-up reference (released on failure). */
  return pw__handle_insert(client, object, &out_buffer->id);
}

pw_status_t pw_buffer_release(pw_client_t* client, pw_buffer_t buffer) {
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "client is NULL");
  }
  return pw__handle_remove(client, buffer.id, PW_OBJECT_BUFFER, "buffer");
}
