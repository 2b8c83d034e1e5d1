/* Internal: what every checked call into a host-plugged vtable shares —
 * backends (backend_call.h), transports (transport_call.h), stores
 * (store_call.h) and scheduler policies (policy_call.h). One
 * pw__plug_kind_t describes a plug; these helpers do, the same way for
 * each, the vtable version check, the required/optional method check (a
 * NULL method or one beyond struct_size is absent, never a crash), the
 * status contract of what a plugin returns, and messages that name the
 * plug kind, the plugin and the method. Each plug's own wrappers stay thin. */
#ifndef PW_PLUGIN_PLUG_H_
#define PW_PLUGIN_PLUG_H_

#include <string.h>

#include "pathways/api.h"
#include "pathways/status.h"

typedef struct pw__plug_kind_t {
  const char* kind;      /* "backend", for messages */
  const char* unnamed;   /* "(unnamed backend)": the name of a plugin without one */
  size_t size_v1;        /* PW_<KIND>_VTABLE_SIZE_V1 */
  size_t name_offset;    /* offsetof(<vtable>, name) */
  bool name_required;    /* an empty or NULL name is INVALID_ARGUMENT */
} pw__plug_kind_t;

/* The struct_size of |vtable| (every vtable starts with it). */
static inline size_t pw__plug_struct_size(const void* vtable) {
  size_t n;
  memcpy(&n, vtable, sizeof(n));
  return n;
}

/* True if the method at |offset| (|size| bytes) of |vtable| is present:
 * inside struct_size and non-NULL. NULL |vtable|: false. */
static inline bool pw__plug_has(const void* vtable, size_t offset, size_t size) {
  if (vtable == NULL || pw__plug_struct_size(vtable) < offset + size) return false;
  void (*fn)(void);
  memcpy(&fn, (const char*)vtable + offset, sizeof(fn));
  return fn != NULL;
}
#define PW__PLUG_HAS(vtable, type, method) \
  pw__plug_has((vtable), offsetof(type, method), sizeof(((type*)0)->method))

/* The plugin's name for messages; the kind's |unnamed| when |vtable| is
 * NULL, too short to hold one, or has none. */
const char* pw__plug_name(const pw__plug_kind_t* kind, const void* vtable);

/* OK when |vtable| is non-NULL, its struct_size is at least the kind's v1
 * size and (if required) it has a name; INVALID_ARGUMENT otherwise:
 * "<kind> has no vtable", "<kind> '<name>': vtable struct_size N is
 * smaller than v1 (M)", "<kind> vtable has no name". */
pw_status_t pw__plug_check(const pw__plug_kind_t* kind, const void* vtable);

/* UNIMPLEMENTED "<kind> '<name>' does not implement <method>". */
pw_status_t pw__plug_unimplemented(const pw__plug_kind_t* kind, const void* vtable,
                                   const char* method);

/* The status contract of a plugin's return: INTERNAL "<kind> '<name>'
 * <what>" (e.g. "load returned OK without an executable"), for a plugin
 * that broke its own contract. */
pw_status_t pw__plug_broken(const pw__plug_kind_t* kind, const void* vtable,
                            const char* what_fmt, ...) PW_PRINTF_ATTR(3, 4);

#endif /* PW_PLUGIN_PLUG_H_ */
