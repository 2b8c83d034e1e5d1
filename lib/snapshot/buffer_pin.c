/* The snapshotter's own reference to a caller's buffer: a second handle of
 * the client's table on the same buffer object. The public API has no
 * buffer retain, and a take must survive the caller releasing its handle
 * right after (the cut is the set of values at the call), so this one file
 * reaches into lib/core's handle table: a look-up returns a new reference
 * to the object, and inserting that reference gives a handle of our own
 * (released with pw_buffer_release once copied). Everything else in this
 * module uses the public API. */
#include <string.h>

#include "core/handles.h"
#include "core/objects.h"
#include "snapshot/snapshot_internal.h"

pw_status_t pw__snap_pin(pw_client_t* client, pw_buffer_t buffer, pw_buffer_t* out_pin) {
  out_pin->id = 0;
  pw_object_t* object = NULL;
  PW_RETURN_IF_ERROR(pw__handle_lookup(client, buffer.id, PW_OBJECT_BUFFER, "buffer", &object));
  return pw__handle_insert(client, object, &out_pin->id);
}

pw_status_t pw__snap_buffer_mesh(pw_client_t* client, pw_buffer_t buffer,
                                 pw_mesh_shape_t* out_mesh) {
  memset(out_mesh, 0, sizeof(*out_mesh));
  pw_object_t* object = NULL;
  PW_RETURN_IF_ERROR(pw__handle_lookup(client, buffer.id, PW_OBJECT_BUFFER, "buffer", &object));
  *out_mesh = ((const pw_buffer_obj_t*)object)->mesh;
  pw__object_release(object);
  return NULL;
}
