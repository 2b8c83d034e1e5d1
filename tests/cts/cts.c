/* CTS driver and shared helpers: running a case for a fixture, status
 * assertions, backend creation, compile/load helpers, completion tracking
 * and gang launches. The cases live in cts_basic.c, cts_memory.c,
 * cts_launch.c, cts_collective.c, cts_queue.c and cts_host.c. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "cts/cts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PW_CTS_NAME(suite, fixture, name) #name,
static const char* const pw_cts_case_names[] = {PW_CTS_CASES(PW_CTS_NAME, _, _)};
#undef PW_CTS_NAME
#define PW_CTS_CASE_COUNT (sizeof(pw_cts_case_names) / sizeof(pw_cts_case_names[0]))

void pw_cts_run(const pw_cts_fixture_t* fixture, const char* name, pw_cts_case_fn_t fn) {
  cr_assert_not_null(fixture);
  cr_assert_not_null(fixture->create, "fixture %s has no create", fixture->name);
  cr_assert_not_null(fixture->copy_program, "fixture %s has no copy program", fixture->name);
  bool skip = false;
  for (const char* const* u = fixture->unsupported; u != NULL && *u != NULL; ++u) {
    bool known = false;
    for (size_t i = 0; i < PW_CTS_CASE_COUNT; ++i) {
      known = known || strcmp(*u, pw_cts_case_names[i]) == 0;
    }
    cr_assert(known, "fixture %s lists unknown case '%s' as unsupported", fixture->name, *u);
    skip = skip || strcmp(*u, name) == 0;
  }
  if (skip) cr_skip_test("%s: '%s' is listed as unsupported", fixture->name, name);
  fn(fixture);
}

/* --- Status assertions. --- */

void pw_cts_assert_ok(pw_status_t status, const char* what) {
  if (status == NULL) return;
  char text[512];
  pw_status_format(status, text, sizeof(text));
  pw_status_free(status);
  cr_assert_fail("%s failed: %s", what, text);
}

pw_status_code_t pw_cts_assert_error(pw_status_t status, const pw_status_code_t* allowed,
                                     size_t count, const char* what) {
  cr_assert_not_null(status, "%s succeeded; an error was expected", what);
  pw_status_code_t code = pw_status_code(status);
  char text[512];
  pw_status_format(status, text, sizeof(text));
  size_t message_length = strlen(pw_status_message(status));
  pw_status_free(status);
  bool ok = false;
  for (size_t i = 0; i < count; ++i) ok = ok || code == allowed[i];
  cr_assert(ok, "%s: unexpected error %s", what, text);
  cr_assert_gt(message_length, 0, "%s: error %s has no message", what,
               pw_status_code_string(code));
  return code;
}

/* --- Backends, programs, executables. --- */

void pw_cts_create(const pw_cts_fixture_t* fixture, pw_test_allocator_t* t,
                   pw_backend_t* out_backend) {
  pw_allocator_t allocator = t != NULL ? pw_test_allocator(t) : pw_allocator_system();
  memset(out_backend, 0, sizeof(*out_backend));
  pw_status_t status = fixture->create(fixture, allocator, out_backend);
  if (status != NULL) {
    char text[512];
    pw_status_format(status, text, sizeof(text));
    pw_status_free(status);
    cr_assert_fail("%s: create failed: %s", fixture->name, text);
  }
  PW_CTS_OK(pw__backend_check(out_backend));
}

void pw_cts_destroy(pw_backend_t* backend) {
  pw__backend_destroy(backend);
  memset(backend, 0, sizeof(*backend));
}

pw_mesh_shape_t pw_cts_mesh(const pw_backend_t* backend, uint32_t* devices,
                            uint32_t* out_count) {
  uint32_t count = pw__backend_device_count(backend);
  cr_assert_geq(count, 1, "backend has no device");
  uint32_t n = count < 8 ? count : 8;
  /* Mesh position m runs on device (m + 1) % n: backends must honour
   * group_devices/mesh_index rather than assume device == position. */
  for (uint32_t m = 0; m < n; ++m) devices[m] = (m + 1) % n;
  *out_count = n;
  return pw_mesh_shape_make(1, &n);
}

void pw_cts_compile(const pw_backend_t* backend, pw_cts_program_fn_t fn,
                    const pw_mesh_shape_t* mesh, uint32_t elements, void** out_bytes,
                    size_t* out_size) {
  char text[4096];
  size_t length = fn(mesh, elements, text, sizeof(text));
  cr_assert_lt(length, sizeof(text), "program text too long");
  PW_CTS_OK(pw__backend_compile(backend, text, length, mesh, NULL, pw_allocator_system(),
                                out_bytes, out_size));
  cr_assert_not_null(*out_bytes, "compile returned no bytes");
  cr_assert_gt(*out_size, 0, "compile returned 0 bytes");
}

void pw_cts_free_bytes(void* bytes, size_t size) {
  pw_allocator_free(pw_allocator_system(), bytes, size);
}

pw_backend_executable_t pw_cts_load(const pw_backend_t* backend, pw_cts_program_fn_t fn,
                                    const pw_mesh_shape_t* mesh, uint32_t elements,
                                    uint32_t inputs, uint32_t outputs) {
  void* bytes = NULL;
  size_t size = 0;
  pw_cts_compile(backend, fn, mesh, elements, &bytes, &size);
  pw_backend_executable_t executable = NULL;
  pw_executable_signature_t signature = {.struct_size = sizeof(pw_executable_signature_t)};
  pw_status_t status = pw__backend_load(backend, bytes, size, &executable, &signature);
  pw_cts_free_bytes(bytes, size);
  PW_CTS_OK(status);
  cr_assert_not_null(executable);
  cr_assert(pw_mesh_shape_equal(&signature.mesh, mesh), "signature mesh differs");
  cr_assert_eq(signature.input_count, inputs, "signature input count");
  cr_assert_eq(signature.output_count, outputs, "signature output count");
  cr_assert_lt(strnlen(signature.name, sizeof(signature.name)), sizeof(signature.name),
               "signature name is not NUL-terminated");
  return executable;
}

/* --- Completion tracking. --- */

void pw_cts_tracker_init(pw_cts_tracker_t* tracker, size_t count) {
  memset(tracker, 0, sizeof(*tracker));
  pthread_mutex_init(&tracker->mutex, NULL);
  pthread_cond_init(&tracker->cond, NULL);
  tracker->count = count;
  tracker->slots = calloc(count ? count : 1, sizeof(pw_cts_slot_t));
  tracker->order = calloc(count ? count : 1, sizeof(size_t));
  cr_assert_not_null(tracker->slots);
  cr_assert_not_null(tracker->order);
  for (size_t i = 0; i < count; ++i) {
    tracker->slots[i].tracker = tracker;
    atomic_init(&tracker->slots[i].calls, 0);
    atomic_init(&tracker->slots[i].code, -1);
    atomic_init(&tracker->slots[i].timed, 0);
  }
}

void pw_cts_tracker_free(pw_cts_tracker_t* tracker) {
  pthread_mutex_destroy(&tracker->mutex);
  pthread_cond_destroy(&tracker->cond);
  free(tracker->slots);
  free(tracker->order);
  tracker->slots = NULL;
  tracker->order = NULL;
}

void pw_cts_done(void* user, pw_status_t status) {
  pw_cts_slot_t* slot = user;
  int expected = -1;
  atomic_compare_exchange_strong(&slot->code, &expected, (int)pw_status_code(status));
  pw_status_free(status); /* done owns the status */
  atomic_fetch_add(&slot->calls, 1);
  if (slot->then != NULL) slot->then(slot);
  pw_cts_tracker_t* tracker = slot->tracker;
  pthread_mutex_lock(&tracker->mutex);
  if (tracker->completed < tracker->count) {
    tracker->order[tracker->completed] = (size_t)(slot - tracker->slots);
  }
  tracker->completed++;
  pthread_cond_broadcast(&tracker->cond);
  pthread_mutex_unlock(&tracker->mutex);
}

void pw_cts_done_timed(void* user, pw_status_t status, const pw_backend_timing_t* timing) {
  pw_cts_slot_t* slot = user;
  if (timing != NULL) {
    slot->start_ns = timing->start_ns;
    slot->end_ns = timing->end_ns;
    atomic_store(&slot->timed, 1);
  }
  pw_cts_done(user, status);
}

void pw_cts_tracker_wait_slots(pw_cts_tracker_t* tracker, size_t first, size_t count,
                               const char* what) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += (time_t)(PW_CTS_TIMEOUT_NS / 1000000000ull);
  pthread_mutex_lock(&tracker->mutex);
  size_t waiting = first;
  int rc = 0;
  for (;;) {
    while (waiting < first + count && atomic_load(&tracker->slots[waiting].calls) > 0) ++waiting;
    if (waiting == first + count || rc == ETIMEDOUT) break;
    rc = pthread_cond_timedwait(&tracker->cond, &tracker->mutex, &deadline);
  }
  pthread_mutex_unlock(&tracker->mutex);
  cr_assert_eq(waiting, first + count, "%s: launch %zu did not complete in %llu s (hang)",
               what, waiting, PW_CTS_TIMEOUT_NS / 1000000000ull);
}

uint32_t pw_cts_queue_depth(const pw_backend_t* backend) {
  const pw_backend_vtable_t* vt = backend->vtable;
  if (vt->struct_size < PW_BACKEND_VTABLE_SIZE_V3 || vt->queue_info == NULL) return 0;
  uint32_t count = pw__backend_device_count(backend);
  uint32_t depth = PW_BACKEND_MAX_QUEUE_DEPTH;
  for (uint32_t d = 0; d < count; ++d) {
    pw_backend_queue_info_t info;
    memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    pw_status_t status = vt->queue_info(backend->self, d, &info);
    if (status != NULL) {
      pw_status_free(status);
      return 0;
    }
    if ((info.flags & PW_BACKEND_QUEUE_ORDERED) == 0 || info.depth == 0) return 0;
    if (info.depth < depth) depth = info.depth;
  }
  return count > 0 ? depth : 0;
}

void pw_cts_tracker_wait(pw_cts_tracker_t* tracker, size_t target, const char* what) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += (time_t)(PW_CTS_TIMEOUT_NS / 1000000000ull);
  pthread_mutex_lock(&tracker->mutex);
  int rc = 0;
  while (tracker->completed < target && rc != ETIMEDOUT) {
    rc = pthread_cond_timedwait(&tracker->cond, &tracker->mutex, &deadline);
  }
  size_t completed = tracker->completed;
  pthread_mutex_unlock(&tracker->mutex);
  cr_assert_geq(completed, target, "%s: only %zu of %zu launches completed in %llu s (hang)",
                what, completed, target, PW_CTS_TIMEOUT_NS / 1000000000ull);
}

void pw_cts_tracker_expect_calls(pw_cts_tracker_t* tracker, size_t i, uint32_t want_calls) {
  uint32_t calls = atomic_load(&tracker->slots[i].calls);
  cr_assert_eq(calls, want_calls, "launch %zu: done called %u times, expected %u", i, calls,
               want_calls);
}

/* --- Gangs. --- */

void pw_cts_gang_alloc(const pw_backend_t* backend, pw_cts_gang_t* gang, uint32_t size,
                       const uint32_t* devices, uint32_t elements, uint32_t seed) {
  cr_assert_leq(size, 8);
  memset(gang, 0, sizeof(*gang));
  gang->size = size;
  gang->bytes = elements * sizeof(float);
  float* values = calloc(elements ? elements : 1, sizeof(float));
  unsigned char* garbage = malloc(gang->bytes ? gang->bytes : 1);
  cr_assert(values != NULL && garbage != NULL);
  memset(garbage, 0xCD, gang->bytes);
  for (uint32_t m = 0; m < size; ++m) {
    gang->devices[m] = devices[m];
    PW_CTS_OK(pw__backend_allocate(backend, devices[m], gang->bytes, &gang->inputs[m]));
    PW_CTS_OK(pw__backend_allocate(backend, devices[m], gang->bytes, &gang->outputs[m]));
    for (uint32_t i = 0; i < elements; ++i) values[i] = pw_cts_value(seed, m, i);
    PW_CTS_OK(pw__backend_copy_to_device(backend, devices[m], gang->inputs[m], 0, values,
                                         gang->bytes));
    PW_CTS_OK(pw__backend_copy_to_device(backend, devices[m], gang->outputs[m], 0, garbage,
                                         gang->bytes));
  }
  free(values);
  free(garbage);
}

void pw_cts_gang_free(const pw_backend_t* backend, pw_cts_gang_t* gang) {
  for (uint32_t m = 0; m < gang->size; ++m) {
    pw__backend_deallocate(backend, gang->devices[m], gang->inputs[m]);
    pw__backend_deallocate(backend, gang->devices[m], gang->outputs[m]);
  }
  gang->size = 0;
}

void pw_cts_gang_describe(pw_cts_gang_t* gang, pw_backend_executable_t executable,
                                 uint64_t gang_id, pw_cts_tracker_t* tracker,
                                 size_t first_slot) {
  for (uint32_t m = 0; m < gang->size; ++m) {
    pw_backend_launch_t* l = &gang->launches[m];
    memset(l, 0, sizeof(*l));
    l->struct_size = sizeof(*l);
    l->executable = executable;
    l->device = gang->devices[m];
    l->mesh_index = m;
    l->group_devices = gang->devices;
    l->group_size = gang->size;
    l->gang_id = gang_id;
    l->inputs = &gang->inputs[m];
    l->input_count = 1;
    l->outputs = &gang->outputs[m];
    l->output_count = 1;
    l->done = pw_cts_done;
    l->done_user = &tracker->slots[first_slot + m];
  }
}

uint32_t pw_cts_gang_launch_try(const pw_backend_t* backend, pw_cts_gang_t* gang,
                                pw_backend_executable_t executable, uint64_t gang_id,
                                pw_cts_tracker_t* tracker, size_t first_slot, bool reverse) {
  /* Every descriptor is filled first: an inline backend may complete
   * earlier parts while later ones are launched. */
  pw_cts_gang_describe(gang, executable, gang_id, tracker, first_slot);
  uint32_t failures = 0;
  for (uint32_t k = 0; k < gang->size; ++k) {
    uint32_t m = reverse ? gang->size - 1 - k : k;
    pw_status_t status = pw__backend_launch(backend, &gang->launches[m]);
    if (status != NULL) ++failures;
    pw_status_free(status);
  }
  return failures;
}

void pw_cts_gang_launch(const pw_backend_t* backend, pw_cts_gang_t* gang,
                        pw_backend_executable_t executable, uint64_t gang_id,
                        pw_cts_tracker_t* tracker, size_t first_slot, bool reverse) {
  cr_assert_leq(first_slot + gang->size, tracker->count);
  pw_cts_gang_describe(gang, executable, gang_id, tracker, first_slot);
  for (uint32_t k = 0; k < gang->size; ++k) {
    uint32_t m = reverse ? gang->size - 1 - k : k;
    pw_status_t status = pw__backend_launch(backend, &gang->launches[m]);
    if (status != NULL) {
      char text[512];
      pw_status_format(status, text, sizeof(text));
      pw_status_free(status);
      cr_assert_fail("launch of gang %llu part %u (device %u) failed: %s",
                     (unsigned long long)gang_id, m, gang->devices[m], text);
    }
  }
}

void pw_cts_gang_read(const pw_backend_t* backend, const pw_cts_gang_t* gang, uint32_t m,
                      float* out) {
  PW_CTS_OK(pw__backend_copy_to_host(backend, gang->devices[m], gang->outputs[m], 0, out,
                                     gang->bytes));
}

void pw_cts_run_gang(const pw_backend_t* backend, pw_cts_program_fn_t program,
                     pw_mesh_shape_t mesh, const uint32_t* devices, bool reverse,
                     uint64_t gang_id, const char* what, pw_cts_gang_check_fn_t check) {
  uint32_t n = pw_mesh_shape_device_count(&mesh);
  const uint32_t elements = 16;
  pw_backend_executable_t e = pw_cts_load(backend, program, &mesh, elements, 1, 1);
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, n);
  pw_cts_gang_t gang;
  pw_cts_gang_alloc(backend, &gang, n, devices, elements, (uint32_t)gang_id);
  pw_cts_gang_launch(backend, &gang, e, gang_id, &tracker, 0, reverse);
  pw_cts_tracker_wait(&tracker, n, what);
  for (uint32_t m = 0; m < n; ++m) {
    pw_cts_tracker_expect_calls(&tracker, m, 1);
    cr_assert_eq(atomic_load(&tracker.slots[m].code), PW_STATUS_OK, "%s: part %u failed", what, m);
  }
  check(backend, &gang, elements, (uint32_t)gang_id);
  pw_cts_gang_free(backend, &gang);
  pw__backend_unload(backend, e);
  pw_cts_tracker_free(&tracker);
}
