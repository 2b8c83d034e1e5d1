/* Helpers of the transport tests; see transport_cts.h. */
#define _POSIX_C_SOURCE 200809L
#include "transport_cts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pathways/backends/cpu.h"
#include "pathways/backends/sim.h"

/* --- Helpers. --- */

void pw_tcts_ok(pw_status_t status, const char* what) {
  if (status == NULL) return;
  char text[512];
  pw_status_format(status, text, sizeof(text));
  pw_status_free(status);
  cr_assert_fail("%s failed: %s", what, text);
}

void pw_tcts_expect(pw_status_t status, pw_status_code_t code, const char* what) {
  cr_assert_not_null(status, "%s succeeded; %s was expected", what, pw_status_code_string(code));
  pw_status_code_t got = pw_status_code(status);
  char text[512];
  pw_status_format(status, text, sizeof(text));
  size_t length = strlen(pw_status_message(status));
  pw_status_free(status);
  cr_assert_eq(got, code, "%s: %s, expected %s", what, text, pw_status_code_string(code));
  cr_assert_gt(length, 0, "%s: error without a message", what);
}

void pw_tcts_backend_create(pw_tcts_backend_kind_t kind, pw_tcts_backend_t* out) {
  memset(out, 0, sizeof(*out));
  out->kind = kind;
  if (kind == PW_TCTS_CPU || kind == PW_TCTS_CPU_NO_HOST) {
    pw_cpu_backend_options_t o;
    pw_cpu_backend_options_init(&o);
    o.device_count = 4;
    o.worker_count = 1;
    o.device_memory_bytes = 16u << 20;
    PW_TCTS_OK(pw_cpu_backend_create(&o, &out->backend));
    if (kind == PW_TCTS_CPU_NO_HOST) {
      out->shim = *out->backend.vtable;
      out->shim.host_pointer = NULL;
      out->backend.vtable = &out->shim;
    }
    return;
  }
  pw_sim_backend_options_t o;
  pw_sim_backend_options_init(&o);
  o.slice_count = 2;
  o.devices_per_slice = 4;
  o.memory = kind == PW_TCTS_SIM_VIRTUAL ? PW_SIM_MEMORY_VIRTUAL : PW_SIM_MEMORY_HOST;
  o.device_memory_bytes = 16u << 20;
  PW_TCTS_OK(pw_sim_backend_create(&o, &out->backend));
}

void pw_tcts_backend_destroy(pw_tcts_backend_t* b) {
  b->backend.vtable->destroy(b->backend.self);
  memset(b, 0, sizeof(*b));
}

void pw_tcts_done_init(pw_tcts_done_t* d) {
  memset(d, 0, sizeof(*d));
  atomic_init(&d->calls, 0);
  atomic_init(&d->code, -1);
}

void pw_tcts_done(void* user, pw_status_t status) {
  pw_tcts_done_t* d = user;
  int expected = -1;
  if (atomic_compare_exchange_strong(&d->code, &expected, (int)pw_status_code(status))) {
    snprintf(d->message, sizeof(d->message), "%s", pw_status_message(status));
  }
  pw_status_free(status);
  if (d->then != NULL) d->then(d);
  atomic_fetch_add(&d->calls, 1);
}

void pw_tcts_wait(pw_tcts_done_t* d, const char* what) {
  pw_time_t deadline = pw_deadline_from_timeout(20ll * 1000 * 1000 * 1000);
  while (atomic_load(&d->calls) == 0 && pw_deadline_remaining(deadline) > 0) {
    struct timespec pause = {0, 100000};
    nanosleep(&pause, NULL);
  }
  cr_assert_gt(atomic_load(&d->calls), 0, "%s: done never ran (hang)", what);
}

pw_transport_copy_t pw_tcts_describe(const pw_backend_t* src, uint32_t src_device,
                                     pw_backend_memory_t src_memory, size_t src_offset,
                                     const pw_backend_t* dst, uint32_t dst_device,
                                     pw_backend_memory_t dst_memory, size_t dst_offset,
                                     size_t size, pw_tcts_done_t* d) {
  pw_transport_copy_t c;
  memset(&c, 0, sizeof(c));
  c.struct_size = sizeof(c);
  c.src = (pw_transport_endpoint_t){src, src_device, src_memory, src_offset};
  c.dst = (pw_transport_endpoint_t){dst, dst_device, dst_memory, dst_offset};
  c.size = size;
  c.done = pw_tcts_done;
  c.done_user = d;
  c.tag = 77;
  return c;
}
