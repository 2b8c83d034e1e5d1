/* Checked calls into a host-plugged store vtable: a vtable that is too
 * small, a NULL method or one beyond struct_size is UNIMPLEMENTED naming
 * the store and the method, never a crash; a store that returns OK without
 * its out-values is INTERNAL. */
#include <string.h>

#include "cache/cache_internal.h"

static bool pw_store_has(const pw_store_t* store, size_t offset, size_t size) {
  if (store == NULL || store->vtable == NULL) return false;
  if (store->vtable->struct_size < offset + size) return false;
  void* method = NULL;
  memcpy(&method, (const char*)store->vtable + offset, sizeof(method));
  return method != NULL;
}
#define PW_STORE_HAS(store, method) \
  pw_store_has((store), offsetof(pw_store_vtable_t, method), sizeof(void*))

const char* pw__store_name(const pw_store_t* store) {
  if (store && store->vtable && store->vtable->struct_size >= offsetof(pw_store_vtable_t, name) +
                                                                  sizeof(const char*) &&
      store->vtable->name) {
    return store->vtable->name;
  }
  return "(unnamed store)";
}

pw_status_t pw__store_check(const pw_store_t* store) {
  if (store == NULL || store->vtable == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "store has no vtable");
  }
  if (store->vtable->struct_size < PW_STORE_VTABLE_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "store '%s': vtable struct_size %zu is smaller than v1 (%zu)",
                          pw__store_name(store), store->vtable->struct_size,
                          (size_t)PW_STORE_VTABLE_SIZE_V1);
  }
  return NULL;
}

static pw_status_t pw_store_unimplemented(const pw_store_t* store, const char* method) {
  return pw_status_make(PW_STATUS_UNIMPLEMENTED, "store '%s' does not implement %s",
                        pw__store_name(store), method);
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
    return pw_status_make(PW_STATUS_INTERNAL,
                          "store '%s': get of '%s' returned %zu bytes at NULL",
                          pw__store_name(store), key, *out_size);
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
