/* The test double backend (double_backend.h) as a plugin library
 * (libpathways_double.so), so that pathways-cts runs every backend case
 * against it as it would against an outside author's backend. It exports
 * pw_plugin_entry and the optional pw_plugin_cts_hooks (pathways/cts.h):
 * the double's program texts, its device-failure call and a create that
 * takes an allocator.
 *
 * Options ("key=value,..."): completion=inline|threaded (default
 * inline), devices=N (default 8), workers=N (threaded helpers, default
 * 1), fail_mode=launch|completion (how a FAILED device fails a launch;
 * default launch), no_op=BOOL, devices_per_host=N (0: one host),
 * host_launch=BOOL (offer launch_host), queue_depth=N (0: none; N: the
 * queue wrapper of tests/support/queue_wrapper.h makes it queue-ordered
 * with N slots per device; it allocates with malloc, so the allocator
 * cases do not apply there), misbehave=crash|hang|exit (the create
 * itself dies of SIGSEGV, never returns, or calls exit(3): for the test
 * that pathways-cts reports such a case as failed and goes on). */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cts/double_backend.h"
#include "pathways/cts.h"
#include "pathways/plugin.h"
#include "support/queue_wrapper.h"

static const char* const pw_double_plugin_keys[] = {
    "completion", "devices", "workers", "fail_mode", "no_op", "devices_per_host",
    "host_launch", "queue_depth", "misbehave", NULL};
static const char* const pw_double_plugin_completions[] = {"inline", "threaded", NULL};
static const char* const pw_double_plugin_fail_modes[] = {"launch", "completion", NULL};
static const char* const pw_double_plugin_misbehaviours[] = {"none", "crash", "hang", "exit",
                                                             NULL};

/* misbehave=...: what a broken plugin may do to the process that runs it. */
static void pw_double_plugin_misbehave(size_t how) {
  if (how == 1) raise(SIGSEGV);
  if (how == 3) exit(3);
  while (how == 2) {
    struct timespec pause = {1, 0};
    nanosleep(&pause, NULL);
  }
}

static pw_status_t pw_double_plugin_make(const char* args, pw_allocator_t allocator,
                                         pw_backend_t* out_backend) {
  memset(out_backend, 0, sizeof(*out_backend));
  pw_double_options_t o;
  pw_double_options_init(&o);
  PW_RETURN_IF_ERROR(pw_plugin_args_check(args, pw_double_plugin_keys));
  size_t choice = 0;
  PW_RETURN_IF_ERROR(
      pw_plugin_args_choice(args, "completion", pw_double_plugin_completions, 0, &choice));
  o.completion = choice == 0 ? PW_DOUBLE_COMPLETE_INLINE : PW_DOUBLE_COMPLETE_THREADED;
  PW_RETURN_IF_ERROR(
      pw_plugin_args_choice(args, "fail_mode", pw_double_plugin_fail_modes, 0, &choice));
  o.failed_device_mode = choice == 0 ? PW_DOUBLE_FAIL_AT_LAUNCH : PW_DOUBLE_FAIL_AT_COMPLETION;
  uint64_t v = 0;
  PW_RETURN_IF_ERROR(pw_plugin_args_range(args, "devices", 8, 1, 1024, &v));
  o.device_count = (uint32_t)v;
  PW_RETURN_IF_ERROR(pw_plugin_args_range(args, "workers", 1, 1, 64, &v));
  o.worker_count = (uint32_t)v;
  PW_RETURN_IF_ERROR(pw_plugin_args_u64(args, "devices_per_host", 0, 1024, &v));
  o.devices_per_host = (uint32_t)v;
  PW_RETURN_IF_ERROR(pw_plugin_args_bool(args, "no_op", false, &o.no_op));
  PW_RETURN_IF_ERROR(pw_plugin_args_bool(args, "host_launch", false, &o.host_launch));
  PW_RETURN_IF_ERROR(
      pw_plugin_args_choice(args, "misbehave", pw_double_plugin_misbehaviours, 0, &choice));
  pw_double_plugin_misbehave(choice);
  uint64_t depth = 0;
  PW_RETURN_IF_ERROR(
      pw_plugin_args_u64(args, "queue_depth", 0, PW_BACKEND_MAX_QUEUE_DEPTH, &depth));
  o.allocator = allocator;
  if (depth == 0) return pw_double_backend_create(&o, out_backend);
  o.allocator = pw_allocator_system();
  pw_backend_t inner;
  PW_RETURN_IF_ERROR(pw_double_backend_create(&o, &inner));
  pw_queue_wrapper_options_t q = {.depth = (uint32_t)depth, .ordered = true};
  return pw_queue_wrapper_create(&q, inner, out_backend);
}

static pw_status_t pw_double_plugin_create(const char* args, pw_backend_t* out_backend) {
  return pw_double_plugin_make(args, pw_allocator_system(), out_backend);
}

static size_t pw_double_plugin_copy(const pw_mesh_shape_t* mesh, uint32_t elements,
                                    char* buffer, size_t capacity) {
  unsigned total = pw_mesh_shape_device_count(mesh) * elements;
  int n = snprintf(buffer, capacity,
                   "# CTS copy\ncopy\ninput f32[%u] split(0,all)\noutput f32[%u] split(0,all)\n",
                   total, total);
  return n < 0 ? 0 : (size_t)n;
}

static size_t pw_double_plugin_all_reduce(const pw_mesh_shape_t* mesh, uint32_t elements,
                                          char* buffer, size_t capacity) {
  int n = snprintf(buffer, capacity,
                   "all_reduce_sum\ninput f32[%u,%u] split(0,all)\noutput f32[%u] replicated\n",
                   pw_mesh_shape_device_count(mesh), elements, elements);
  return n < 0 ? 0 : (size_t)n;
}

static pw_status_t pw_double_plugin_fail_device(pw_backend_t* backend, uint32_t device) {
  pw_double_backend_t* d = pw_double_backend_from(backend);
  if (d == NULL) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "double plugin: cannot fail a device through the queue wrapper");
  }
  pw_double_backend_set_health(d, device, PW_DEVICE_FAILED);
  return NULL;
}

static const char* const pw_double_plugin_bad_programs[] = {
    "fill 256\n",
    "fail 0\n",
    "fail 17\n",
    "copy\ninput f32[8] replicated\n",
    "fill 1\ninput u8[1] replicated\noutput u8[1] replicated\n",
    "copy\ninput f32[8] split(0,3)\noutput f32[8] split(0,3)\n",
    "copy\ninput f32[8] replicated\noutput f64[8] replicated\n",
    "noop\ninput f32[-1] replicated\n",
    NULL,
};

static const pw_plugin_factory_t pw_double_plugin_factory = {
    .struct_size = sizeof(pw_plugin_factory_t),
    .abi_version = PW_PLUGIN_ABI_VERSION,
    .kind = PW_PLUGIN_KIND_BACKEND,
    .name = "double",
    .version = "1",
    .description = "the deterministic test double backend (tests only)",
    .args_help = "completion=inline|threaded, devices=N, workers=N, fail_mode=launch|completion, "
                 "no_op=BOOL, devices_per_host=N, host_launch=BOOL, queue_depth=N, "
                 "misbehave=none|crash|hang|exit",
    .create_backend = pw_double_plugin_create,
};

static const pw_cts_hooks_t pw_double_plugin_hooks = {
    .struct_size = sizeof(pw_cts_hooks_t),
    .copy_program = pw_double_plugin_copy,
    .all_reduce_program = pw_double_plugin_all_reduce,
    .fail_device = pw_double_plugin_fail_device,
    .bad_programs = pw_double_plugin_bad_programs,
    .create_backend = pw_double_plugin_make,
};

PW_PLUGIN_EXPORT const pw_plugin_factory_t* pw_plugin_entry(uint32_t loader_abi);
PW_PLUGIN_EXPORT const pw_cts_hooks_t* pw_plugin_cts_hooks(uint32_t cts_abi);

const pw_plugin_factory_t* pw_plugin_entry(uint32_t loader_abi) {
  (void)loader_abi;
  return &pw_double_plugin_factory;
}

const pw_cts_hooks_t* pw_plugin_cts_hooks(uint32_t cts_abi) {
  return cts_abi == PW_CTS_ABI_VERSION ? &pw_double_plugin_hooks : NULL;
}
