/* Buffer objects (core/objects.h): made without shards by
 * pw__buffer_create for the runtime's buffer calls and for the outputs the
 * dispatcher allocates; freed with their last reference, device memory
 * included. The public buffer calls are lib/runtime/buffer.c. */
#include "core/objects.h"

#include <stdio.h>

#include "event/event_internal.h"
#include "plugin/backend_call.h"

static void pw_buffer_destroy(pw_object_t* object) {
  pw_buffer_obj_t* b = (pw_buffer_obj_t*)object;
  pw_runtime_t* rt = object->runtime;
  if (b->shards) {
    for (uint32_t d = 0; d < b->slice->device_count; ++d) {
      pw__backend_deallocate(b->slice->backend, b->slice->group_devices[d], b->shards[d]);
    }
    if (b->shards != b->inline_shards) {
      pw_allocator_free(rt->allocator, b->shards,
                        b->slice->device_count * sizeof(pw_backend_memory_t));
    }
  }
  pw_event_release(b->ready);
  if (b->host_release != NULL) {
    /* Adopted host memory: the backend let go of it with the shards. */
    pw__event_complete_runtime(b->host_release, NULL);
    pw_event_release(b->host_release);
  }
  pw__object_release(b->vslice ? &b->vslice->header : NULL);
  pw_allocator_free(rt->allocator, b, sizeof(*b));
}

pw_status_t pw__buffer_create(pw_vslice_obj_t* vslice, const pw_array_spec_t* spec,
                              size_t total_bytes, size_t shard_bytes,
                              pw_buffer_obj_t** out_buffer) {
  *out_buffer = NULL;
  pw_runtime_t* rt = vslice->header.runtime;
  pw_buffer_obj_t* b = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(rt->allocator, sizeof(*b), 0, (void**)&b));
  pw__object_init(&b->header, PW_OBJECT_BUFFER, rt, pw_buffer_destroy);
  b->slice = vslice->slice;
  b->losses = pw_atomic_load_u32_acquire(&vslice->slice->losses);
  b->mesh = vslice->mesh;
  b->spec = *spec;
  b->shard_bytes = shard_bytes;
  b->total_bytes = total_bytes;
  pw_status_t status = NULL;
  if (vslice->slice->device_count <= PW_BUFFER_INLINE_SHARDS) {
    b->shards = b->inline_shards; /* zeroed with the object */
  } else {
    status = pw_allocator_calloc_array(rt->allocator, vslice->slice->device_count,
                                       sizeof(pw_backend_memory_t), 0, (void**)&b->shards);
  }
  if (status == NULL) status = pw__event_create_runtime(rt->allocator, 1, &b->ready);
  if (status != NULL) {
    pw_buffer_destroy(&b->header);
    return status;
  }
  pw__object_retain(&vslice->header);
  b->vslice = vslice;
  *out_buffer = b;
  return NULL;
}

void pw__buffer_unhandled(pw_buffer_obj_t* b, const char* why) {
  uint32_t expected = PW_BUFFER_FILL_EMPTY;
  if (pw_atomic_load_u32_acquire(&b->fill) != PW_BUFFER_FILL_EMPTY ||
      !pw_atomic_cas_u32(&b->fill, &expected, PW_BUFFER_FILL_CANCELLED)) {
    return;
  }
  char spec[160];
  pw_array_spec_format(&b->spec, spec, sizeof(spec));
  pw__event_complete_runtime(
      b->ready, pw_status_make(PW_STATUS_CANCELLED,
                               "buffer 0x%llx (%s on slice '%s', created empty): %s before "
                               "it was filled",
                               (unsigned long long)b->handle, spec, b->slice->name, why));
}

void pw__buffer_cancel_unfilled(pw_client_t* client) {
  /* Collect under the read lock (references), cancel outside it: the
   * ready callbacks run dispatch, which may look handles up. */
  pw_buffer_obj_t* list = NULL;
  pw_handle_table_t* table = &client->handles;
  uint32_t stripe = pw__handle_read_lock(table);
  for (uint32_t i = 0; i < table->count; ++i) {
    pw_object_t* o = table->slots[i].object;
    if (o == NULL || o->kind != PW_OBJECT_BUFFER) continue;
    pw_buffer_obj_t* b = (pw_buffer_obj_t*)o;
    if (pw_atomic_load_u32_acquire(&b->fill) != PW_BUFFER_FILL_EMPTY) continue;
    pw__object_retain(o);
    b->cancel_next = list;
    list = b;
  }
  pw__handle_read_unlock(table, stripe);
  while (list != NULL) {
    pw_buffer_obj_t* b = list;
    list = b->cancel_next;
    char why[96];
    snprintf(why, sizeof(why), "client '%s' was destroyed", client->name);
    pw__buffer_unhandled(b, why);
    pw__object_release(&b->header);
  }
}
