/* pathways-cts: checked calls into a transport's vtable, and the
 * transport suite's fixture and case table. */
#include "cts_transport.h"

static const char* pw_cts_transport_name(const pw_transport_t* t) {
  const pw_transport_vtable_t* v = t != NULL ? t->vtable : NULL;
  if (v == NULL || v->struct_size < offsetof(pw_transport_vtable_t, name) + sizeof(v->name) ||
      v->name == NULL) {
    return "(unnamed transport)";
  }
  return v->name;
}

pw_status_t pw_cts_transport_check(const pw_transport_t* t) {
  const pw_transport_vtable_t* v = t != NULL ? t->vtable : NULL;
  if (v == NULL) return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "transport has no vtable");
  if (v->struct_size < PW_TRANSPORT_VTABLE_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "transport '%s': vtable struct_size %zu is smaller than v1 (%zu)",
                          pw_cts_transport_name(t), v->struct_size,
                          (size_t)PW_TRANSPORT_VTABLE_SIZE_V1);
  }
  if (v->name == NULL || v->name[0] == '\0') {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "transport vtable has no name");
  }
  return NULL;
}

bool pw_cts_transport_has(const pw_transport_t* t, size_t method_offset, size_t method_size) {
  if (t == NULL || t->vtable == NULL) return false;
  if (t->vtable->struct_size < method_offset + method_size) return false;
  void (*fn)(void) = NULL;
  memcpy(&fn, (const char*)t->vtable + method_offset, sizeof(fn));
  return fn != NULL;
}

void pw_cts_transport_destroy(const pw_transport_t* t) {
  if (PW_CTS_TRANSPORT_HAS(t, destroy)) t->vtable->destroy(t->self);
}

pw_status_t pw_cts_transport_copy(const pw_transport_t* t, const pw_transport_copy_t* copy) {
  if (copy == NULL || copy->struct_size < PW_TRANSPORT_COPY_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "transport '%s' copy: descriptor is NULL or below v1",
                          pw_cts_transport_name(t));
  }
  if (!PW_CTS_TRANSPORT_HAS(t, copy)) {
    return pw_status_make(PW_STATUS_UNIMPLEMENTED, "transport '%s' does not implement copy",
                          pw_cts_transport_name(t));
  }
  return t->vtable->copy(t->self, copy);
}

pw_status_t pw_cts_transport_copy_strided(const pw_transport_t* t,
                                          const pw_transport_copy_t* copy) {
  if (copy == NULL || copy->struct_size < PW_TRANSPORT_COPY_SIZE_V2) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "transport '%s' copy_strided: descriptor is NULL or below v2",
                          pw_cts_transport_name(t));
  }
  if (!PW_CTS_TRANSPORT_HAS(t, copy_strided)) {
    return pw_status_make(PW_STATUS_UNIMPLEMENTED,
                          "transport '%s' does not implement copy_strided",
                          pw_cts_transport_name(t));
  }
  return t->vtable->copy_strided(t->self, copy);
}

bool pw_cts_transport_can_copy(const pw_transport_t* t, const pw_backend_t* src,
                               uint32_t src_device, const pw_backend_t* dst,
                               uint32_t dst_device) {
  if (!PW_CTS_TRANSPORT_HAS(t, can_copy)) return true;
  return t->vtable->can_copy(t->self, src, src_device, dst, dst_device);
}

/* --- The fixture and the table. --- */

static pw_status_t pw_tcts_fixture_create(const pw_tcts_fixture_t* f, pw_allocator_t allocator,
                                          pw_transport_t* out) {
  const pw_cts_context_t* ctx = f->ctx;
  if (f->takes_allocator) return PW_CTS_HOOK(ctx, create_transport)(ctx->args, allocator, out);
  if (ctx->plugin != NULL) return pw_plugin_create_transport(ctx->plugin, ctx->args, out);
  return ctx->factory->create_transport(ctx->args, out);
}

static void pw_tcts_run_case(const pw_cts_context_t* ctx, void (*fn)(const pw_tcts_fixture_t*)) {
  pw_tcts_fixture_t f = {
      .name = ctx->factory->name,
      .create = pw_tcts_fixture_create,
      .takes_allocator = PW_CTS_HOOK(ctx, create_transport) != NULL,
      .ctx = ctx,
  };
  fn(&f);
}

#define PW_TCTS_WRAP(name) \
  static void pw_tcts_run_##name(const pw_cts_context_t* ctx) { pw_tcts_run_case(ctx, pw_tcts_case_##name); }
PW_TCTS_CASES(PW_TCTS_WRAP)
#undef PW_TCTS_WRAP

#define PW_TCTS_ENTRY(name) {#name, pw_tcts_run_##name},
static const pw_cts_case_t pw_tcts_table[] = {PW_TCTS_CASES(PW_TCTS_ENTRY)};
#undef PW_TCTS_ENTRY

const pw_cts_case_t* pw_cts_transport_cases(size_t* out_count) {
  *out_count = sizeof(pw_tcts_table) / sizeof(pw_tcts_table[0]);
  return pw_tcts_table;
}
