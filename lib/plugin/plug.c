/* The shared half of every checked plug call (see plug.h): the
 * cold paths that make its messages. */
#include "plugin/plug.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char* pw__plug_name(const pw__plug_kind_t* kind, const void* vtable) {
  const char* name = NULL;
  if (vtable != NULL &&
      pw__plug_struct_size(vtable) >= kind->name_offset + sizeof(const char*)) {
    memcpy(&name, (const char*)vtable + kind->name_offset, sizeof(name));
  }
  return name != NULL ? name : kind->unnamed;
}

pw_status_t pw__plug_check(const pw__plug_kind_t* kind, const void* vtable) {
  if (vtable == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s has no vtable", kind->kind);
  }
  size_t n = pw__plug_struct_size(vtable);
  if (n < kind->size_v1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s '%s': vtable struct_size %zu is smaller than v1 (%zu)",
                          kind->kind, pw__plug_name(kind, vtable), n, kind->size_v1);
  }
  const char* name = NULL;
  memcpy(&name, (const char*)vtable + kind->name_offset, sizeof(name));
  if (kind->name_required && (name == NULL || name[0] == '\0')) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s vtable has no name", kind->kind);
  }
  return NULL;
}

pw_status_t pw__plug_unimplemented(const pw__plug_kind_t* kind, const void* vtable,
                                   const char* method) {
  return pw_status_make(PW_STATUS_UNIMPLEMENTED, "%s '%s' does not implement %s",
                        kind->kind, pw__plug_name(kind, vtable), method);
}

pw_status_t pw__plug_broken(const pw__plug_kind_t* kind, const void* vtable,
                            const char* what_fmt, ...) {
  char what[256];
  va_list args;
  va_start(args, what_fmt);
  vsnprintf(what, sizeof(what), what_fmt, args);
  va_end(args);
  return pw_status_make(PW_STATUS_INTERNAL, "%s '%s' %s", kind->kind,
                        pw__plug_name(kind, vtable), what);
}
