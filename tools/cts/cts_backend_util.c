/* pathways-cts backend suite: shared helpers (backend creation,
 * compile/load, completion tracking, gang launches). The cases live in
 * cts_backend_basic.c, _memory.c, _launch.c, _collective.c, _queue.c,
 * _host.c and _stress.c. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "cts_backend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --- Backends, programs, executables. --- */

void pw_cts_create(const pw_cts_fixture_t* fixture, pw_cts_allocator_t* t,
                   pw_backend_t* out_backend) {
  pw_allocator_t allocator = t != NULL ? pw_cts_allocator(t) : pw_allocator_system();
  memset(out_backend, 0, sizeof(*out_backend));
  pw_status_t status = fixture->create(fixture, allocator, out_backend);
  if (status != NULL) {
    char text[512];
    pw_status_format(status, text, sizeof(text));
    pw_status_free(status);
    PW_CTS_FAIL("%s: create failed: %s", fixture->name, text);
  }
  PW_CTS_OK(pw_cts_backend_check(out_backend));
}

void pw_cts_destroy(pw_backend_t* backend) {
  pw_cts_backend_destroy(backend);
  memset(backend, 0, sizeof(*backend));
}

pw_mesh_shape_t pw_cts_mesh(const pw_backend_t* backend, uint32_t* devices,
                            uint32_t* out_count) {
  uint32_t count = pw_cts_backend_device_count(backend);
  PW_CTS_ASSERT_GEQ(count, 1, "backend has no device");
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
  if (fn == NULL) PW_CTS_SKIP("the plugin has no copy_program hook (pathways/cts.h)");
  char text[4096];
  size_t length = fn(mesh, elements, text, sizeof(text));
  PW_CTS_ASSERT_LT(length, sizeof(text), "program text too long");
  PW_CTS_OK(pw_cts_backend_compile(backend, text, length, mesh, NULL, pw_allocator_system(),
                                out_bytes, out_size));
  PW_CTS_ASSERT_NOT_NULL(*out_bytes, "compile returned no bytes");
  PW_CTS_ASSERT_GT(*out_size, 0, "compile returned 0 bytes");
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
  pw_status_t status = pw_cts_backend_load(backend, bytes, size, &executable, &signature);
  pw_cts_free_bytes(bytes, size);
  PW_CTS_OK(status);
  PW_CTS_ASSERT_NOT_NULL(executable);
  PW_CTS_ASSERT(pw_mesh_shape_equal(&signature.mesh, mesh), "signature mesh differs");
  PW_CTS_ASSERT_EQ(signature.input_count, inputs, "signature input count");
  PW_CTS_ASSERT_EQ(signature.output_count, outputs, "signature output count");
  PW_CTS_ASSERT_LT(strnlen(signature.name, sizeof(signature.name)), sizeof(signature.name),
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
  PW_CTS_ASSERT_NOT_NULL(tracker->slots);
  PW_CTS_ASSERT_NOT_NULL(tracker->order);
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
  PW_CTS_ASSERT_EQ(waiting, first + count, "%s: launch %zu did not complete in %llu s (hang)",
               what, waiting, PW_CTS_TIMEOUT_NS / 1000000000ull);
}

uint32_t pw_cts_queue_depth(const pw_backend_t* backend) {
  const pw_backend_vtable_t* vt = backend->vtable;
  if (vt->struct_size < PW_BACKEND_VTABLE_SIZE_V3 || vt->queue_info == NULL) return 0;
  uint32_t count = pw_cts_backend_device_count(backend);
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
  PW_CTS_ASSERT_GEQ(completed, target, "%s: only %zu of %zu launches completed in %llu s (hang)",
                what, completed, target, PW_CTS_TIMEOUT_NS / 1000000000ull);
}

void pw_cts_tracker_expect_calls(pw_cts_tracker_t* tracker, size_t i, uint32_t want_calls) {
  uint32_t calls = atomic_load(&tracker->slots[i].calls);
  PW_CTS_ASSERT_EQ(calls, want_calls, "launch %zu: done called %u times, expected %u", i, calls,
               want_calls);
}

/* --- Gangs. --- */

void pw_cts_gang_alloc(const pw_backend_t* backend, pw_cts_gang_t* gang, uint32_t size,
                       const uint32_t* devices, uint32_t elements, uint32_t seed) {
  PW_CTS_ASSERT_LEQ(size, 8);
  memset(gang, 0, sizeof(*gang));
  gang->size = size;
  gang->bytes = elements * sizeof(float);
  float* values = calloc(elements ? elements : 1, sizeof(float));
  unsigned char* garbage = malloc(gang->bytes ? gang->bytes : 1);
  PW_CTS_ASSERT(values != NULL && garbage != NULL);
  memset(garbage, 0xCD, gang->bytes);
  for (uint32_t m = 0; m < size; ++m) {
    gang->devices[m] = devices[m];
    PW_CTS_OK(pw_cts_backend_allocate(backend, devices[m], gang->bytes, &gang->inputs[m]));
    PW_CTS_OK(pw_cts_backend_allocate(backend, devices[m], gang->bytes, &gang->outputs[m]));
    for (uint32_t i = 0; i < elements; ++i) values[i] = pw_cts_value(seed, m, i);
    PW_CTS_OK(pw_cts_backend_copy_to_device(backend, devices[m], gang->inputs[m], 0, values,
                                         gang->bytes));
    PW_CTS_OK(pw_cts_backend_copy_to_device(backend, devices[m], gang->outputs[m], 0, garbage,
                                         gang->bytes));
  }
  free(values);
  free(garbage);
}

void pw_cts_gang_free(const pw_backend_t* backend, pw_cts_gang_t* gang) {
  for (uint32_t m = 0; m < gang->size; ++m) {
    pw_cts_backend_deallocate(backend, gang->devices[m], gang->inputs[m]);
    pw_cts_backend_deallocate(backend, gang->devices[m], gang->outputs[m]);
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
    pw_status_t status = pw_cts_backend_launch(backend, &gang->launches[m]);
    if (status != NULL) ++failures;
    pw_status_free(status);
  }
  return failures;
}

void pw_cts_gang_launch(const pw_backend_t* backend, pw_cts_gang_t* gang,
                        pw_backend_executable_t executable, uint64_t gang_id,
                        pw_cts_tracker_t* tracker, size_t first_slot, bool reverse) {
  PW_CTS_ASSERT_LEQ(first_slot + gang->size, tracker->count);
  pw_cts_gang_describe(gang, executable, gang_id, tracker, first_slot);
  for (uint32_t k = 0; k < gang->size; ++k) {
    uint32_t m = reverse ? gang->size - 1 - k : k;
    pw_status_t status = pw_cts_backend_launch(backend, &gang->launches[m]);
    if (status != NULL) {
      char text[512];
      pw_status_format(status, text, sizeof(text));
      pw_status_free(status);
      PW_CTS_FAIL("launch of gang %llu part %u (device %u) failed: %s",
                     (unsigned long long)gang_id, m, gang->devices[m], text);
    }
  }
}

void pw_cts_gang_read(const pw_backend_t* backend, const pw_cts_gang_t* gang, uint32_t m,
                      float* out) {
  PW_CTS_OK(pw_cts_backend_copy_to_host(backend, gang->devices[m], gang->outputs[m], 0, out,
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
    PW_CTS_ASSERT_EQ(atomic_load(&tracker.slots[m].code), PW_STATUS_OK, "%s: part %u failed", what, m);
  }
  check(backend, &gang, elements, (uint32_t)gang_id);
  pw_cts_gang_free(backend, &gang);
  pw_cts_backend_unload(backend, e);
  pw_cts_tracker_free(&tracker);
}
