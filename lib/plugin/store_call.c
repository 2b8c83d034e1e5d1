/* Checked calls into a host-plugged store vtable: a vtable that is too
 * small, a NULL method or one beyond struct_size is UNIMPLEMENTED naming
 * the store and the method, never a crash; a store that returns OK without
 * its out-values is INTERNAL. */
#include <string.h>

#include "plugin/store_call.h"

#include "plugin/plug.h"

static const pw__plug_kind_t pw_store_kind = {
    "store", "(unnamed store)", PW_STORE_VTABLE_SIZE_V1, offsetof(pw_store_vtable_t, name),
    false};

static const void* pw_store_vtable(const pw_store_t* store) {
  return store ? (const void*)store->vtable : NULL;
}
#define PW_STORE_HAS(store, method) PW__PLUG_HAS(pw_store_vtable(store), pw_store_vtable_t, method)

const char* pw__store_name(const pw_store_t* store) {
  return pw__plug_name(&pw_store_kind, pw_store_vtable(store));
}

pw_status_t pw__store_check(const pw_store_t* store) {
  return pw__plug_check(&pw_store_kind, pw_store_vtable(store));
}

static pw_status_t pw_store_unimplemented(const pw_store_t* store, const char* method) {
  return pw__plug_unimplemented(&pw_store_kind, pw_store_vtable(store), method);
}

void pw__store_destroy(const pw_store_t* store) {
  if (PW_STORE_HAS(store, destroy)) store->vtable->destroy(store->self);
}

pw_status_t pw__store_get(const pw_store_t* store, const char* key, pw_allocator_t allocator,
                          void** out_bytes, size_t* out_size) {
  *out_bytes = NULL;
  *out_size = 0;
  if (!PW_STORE_HAS(store, get)) return pw_store_unimplemented(store, "get");
  pw_status_t status = store->vtable->get(store->self, key, allocator, out_bytes, out_size);
  if (status == NULL && *out_bytes == NULL && *out_size != 0) {
    return pw__plug_broken(&pw_store_kind, pw_store_vtable(store),
                           "get of '%s' returned %zu bytes at NULL", key, *out_size);
  }
  if (status != NULL) {
    *out_bytes = NULL;
    *out_size = 0;
  }
  return status;
}

pw_status_t pw__store_put(const pw_store_t* store, const char* key, const void* bytes,
                          size_t size) {
  if (!PW_STORE_HAS(store, put)) return pw_store_unimplemented(store, "put");
  return store->vtable->put(store->self, key, bytes, size);
}

pw_status_t pw__store_remove(const pw_store_t* store, const char* key) {
  if (!PW_STORE_HAS(store, remove)) return pw_store_unimplemented(store, "remove");
  return store->vtable->remove(store->self, key);
}

pw_status_t pw__store_list(const pw_store_t* store, pw_store_list_fn_t fn, void* user) {
  if (!PW_STORE_HAS(store, list)) return pw_store_unimplemented(store, "list");
  return store->vtable->list(store->self, fn, user);
}
