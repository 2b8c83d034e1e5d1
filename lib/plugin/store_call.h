/* Internal: checked calls into a host-plugged store vtable (store.h), for
 * every module that keeps bytes in a store (the compilation cache,
 * snapshots). A vtable that is too small, a NULL method or one beyond
 * struct_size is UNIMPLEMENTED naming the store and the method, never a
 * crash; a store that returns OK without its out-values is INTERNAL. */
#ifndef PW_PLUGIN_STORE_CALL_H_
#define PW_PLUGIN_STORE_CALL_H_

#include "pathways/store.h"

/* INVALID_ARGUMENT unless |store| has a vtable of at least v1 size. */
pw_status_t pw__store_check(const pw_store_t* store);
/* The store's name for messages, "(unnamed store)" if unset. */
const char* pw__store_name(const pw_store_t* store);
void pw__store_destroy(const pw_store_t* store);
/* On error |*out_bytes| is NULL and |*out_size| 0. */
pw_status_t pw__store_get(const pw_store_t* store, const char* key, pw_allocator_t allocator,
                          void** out_bytes, size_t* out_size);
pw_status_t pw__store_put(const pw_store_t* store, const char* key, const void* bytes,
                          size_t size);
pw_status_t pw__store_remove(const pw_store_t* store, const char* key);
pw_status_t pw__store_list(const pw_store_t* store, pw_store_list_fn_t fn, void* user);

#endif /* PW_PLUGIN_STORE_CALL_H_ */
