/* pathways-cts: the backend suite's case table and its fixture, made from
 * the loaded plugin's factory and hooks. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, strnlen */
#include <time.h>
#include "cts_backend.h"

static pw_status_t pw_cts_fixture_create(const pw_cts_fixture_t* fixture,
                                         pw_allocator_t allocator, pw_backend_t* out_backend) {
  const pw_cts_context_t* ctx = fixture->ctx;
  if (fixture->takes_allocator) {
    return PW_CTS_HOOK(ctx, create_backend)(ctx->args, allocator, out_backend);
  }
  if (ctx->plugin != NULL) return pw_plugin_create_backend(ctx->plugin, ctx->args, out_backend);
  return ctx->factory->create_backend(ctx->args, out_backend);
}

static pw_cts_fixture_t pw_cts_fixture_from(const pw_cts_context_t* ctx) {
  pw_cts_fixture_t f = {
      .name = ctx->factory->name,
      .create = pw_cts_fixture_create,
      .takes_allocator = PW_CTS_HOOK(ctx, create_backend) != NULL,
      .copy_program = PW_CTS_HOOK(ctx, copy_program),
      .all_reduce_program = PW_CTS_HOOK(ctx, all_reduce_program),
      .fail_device = PW_CTS_HOOK(ctx, fail_device),
      .bad_programs = PW_CTS_HOOK(ctx, bad_programs),
      .ctx = ctx,
  };
  return f;
}

/* The cases that need no program. */
static bool pw_cts_needs_no_program(const char* name) {
  static const char* const names[] = {"vtable_basics",      "devices",
                                      "memory_round_trip",  "memory_out_of_range",
                                      "memory_zero_size",   "memory_too_large",
                                      "host_pointer"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
    if (strcmp(names[i], name) == 0) return true;
  }
  return false;
}

static void pw_cts_backend_run(const pw_cts_context_t* ctx, const char* name,
                               void (*fn)(const pw_cts_fixture_t*)) {
  pw_cts_fixture_t f = pw_cts_fixture_from(ctx);
  if (f.copy_program == NULL && !pw_cts_needs_no_program(name)) {
    PW_CTS_SKIP("the plugin has no copy_program hook (pathways/cts.h)");
  }
  fn(&f);
}

#define PW_CTS_WRAP(name)                                  \
  static void pw_cts_run_##name(const pw_cts_context_t* ctx) { \
    pw_cts_backend_run(ctx, #name, pw_cts_case_##name);    \
  }
PW_CTS_BACKEND_CASES(PW_CTS_WRAP)
#undef PW_CTS_WRAP

#define PW_CTS_ENTRY(name) {#name, pw_cts_run_##name},
static const pw_cts_case_t pw_cts_backend_table[] = {PW_CTS_BACKEND_CASES(PW_CTS_ENTRY)};
#undef PW_CTS_ENTRY

const pw_cts_case_t* pw_cts_backend_cases(size_t* out_count) {
  *out_count = sizeof(pw_cts_backend_table) / sizeof(pw_cts_backend_table[0]);
  return pw_cts_backend_table;
}
