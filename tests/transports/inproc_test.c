/* The inproc transport's own behaviour: inline really is inline, options
 * are checked, the copy recorder. The transport conformance cases run
 * against its configurations through pathways-cts on the loaded module
 * (tests/cts/CMakeLists.txt: cts_inproc_*). */
#include <stdio.h>
#include <string.h>

#include "pathways/transports/inproc.h"
#include "transport_cts.h"

/* Inline really is inline; options are checked. */
TestSuite(inproc, .fini = pw_test_check_leaks);

Test(inproc, inline_completes_before_copy_returns) {
  pw_transport_t t;
  PW_TCTS_OK(pw_inproc_transport_create(NULL, &t));
  cr_assert(pw_inproc_transport_is_inproc(t));
  cr_assert_str_eq(t.vtable->name, PW_INPROC_TRANSPORT_NAME);
  pw_tcts_backend_t a;
  pw_tcts_backend_create(PW_TCTS_CPU, &a);
  pw_backend_memory_t m = NULL;
  PW_TCTS_OK(a.backend.vtable->allocate(a.backend.self, 0, 8, &m));
  pw_tcts_done_t d;
  pw_tcts_done_init(&d);
  pw_transport_copy_t c = pw_tcts_describe(&a.backend, 0, m, 0, &a.backend, 0, m, 4, 4, &d);
  PW_TCTS_OK(pw__transport_copy(&t, &c));
  cr_assert_eq(atomic_load(&d.calls), 1, "done ran before copy returned");
  a.backend.vtable->deallocate(a.backend.self, 0, m);
  pw_tcts_backend_destroy(&a);
  pw__transport_destroy(&t);
}

Test(inproc, bad_options) {
  pw_transport_t t;
  pw_inproc_transport_options_t o;
  pw_inproc_transport_options_init(&o);
  o.worker_count = PW_INPROC_MAX_WORKERS + 1;
  pw_tcts_expect(pw_inproc_transport_create(&o, &t), PW_STATUS_INVALID_ARGUMENT, "65 workers");
  cr_assert_null(t.vtable);
  o.worker_count = 0;
  o.struct_size = 4;
  pw_tcts_expect(pw_inproc_transport_create(&o, &t), PW_STATUS_INVALID_ARGUMENT, "struct_size 4");
  pw_tcts_expect(pw_inproc_transport_create(NULL, NULL), PW_STATUS_INVALID_ARGUMENT,
                 "no out_transport");
  cr_assert(!pw_inproc_transport_is_inproc(t));
}

/* record_copy (backend vtable v2): a backend at both ends of a copy the
 * transport makes through host pointers is told of it first, with the
 * bytes; its error fails the copy; a v1-sized vtable is never asked. The
 * backend is the CPU one with record_copy added to a copy of its vtable,
 * as a third party's backend would have it. */
static struct {
  _Atomic uint32_t calls;
  uint32_t src_device, dst_device;
  size_t bytes;
  bool fail;
} g_record;

static pw_status_t record_copy(void* self, uint32_t src_device, pw_backend_memory_t src,
                               uint32_t dst_device, pw_backend_memory_t dst, size_t bytes) {
  (void)self, (void)src, (void)dst;
  atomic_fetch_add(&g_record.calls, 1);
  g_record.src_device = src_device;
  g_record.dst_device = dst_device;
  g_record.bytes = bytes;
  return g_record.fail ? pw_status_make(PW_STATUS_UNAVAILABLE, "link between %u and %u is down",
                                        src_device, dst_device)
                       : NULL;
}

/* Copies 4 bytes from device 0 to device 1 of |a| seen through |vtable|;
 * returns the done's status code, its message in |message|. */
static int copy_through(pw_tcts_backend_t* a, const pw_backend_vtable_t* vtable,
                        char* message, size_t message_size) {
  pw_transport_t t;
  PW_TCTS_OK(pw_inproc_transport_create(NULL, &t));
  pw_backend_t b = {vtable, a->backend.self};
  pw_backend_memory_t m0 = NULL, m1 = NULL;
  PW_TCTS_OK(vtable->allocate(b.self, 0, 8, &m0));
  PW_TCTS_OK(vtable->allocate(b.self, 1, 8, &m1));
  pw_tcts_done_t d;
  pw_tcts_done_init(&d);
  pw_transport_copy_t c = pw_tcts_describe(&b, 0, m0, 0, &b, 1, m1, 4, 4, &d);
  PW_TCTS_OK(pw__transport_copy(&t, &c));
  pw_tcts_wait(&d, "copy");
  snprintf(message, message_size, "%s", d.message);
  vtable->deallocate(b.self, 0, m0);
  vtable->deallocate(b.self, 1, m1);
  pw__transport_destroy(&t);
  return atomic_load(&d.code);
}

Test(inproc, record_copy_is_told_of_each_copy_and_can_fail_it) {
  pw_tcts_backend_t a;
  pw_tcts_backend_create(PW_TCTS_CPU, &a);
  pw_backend_vtable_t v2 = *a.backend.vtable;
  v2.struct_size = PW_BACKEND_VTABLE_SIZE_V2;
  v2.record_copy = record_copy;
  char message[256];
  memset(&g_record, 0, sizeof(g_record));
  cr_assert_eq(copy_through(&a, &v2, message, sizeof(message)), PW_STATUS_OK, "%s", message);
  cr_assert_eq(atomic_load(&g_record.calls), 1);
  cr_assert_eq(g_record.src_device, 0);
  cr_assert_eq(g_record.dst_device, 1);
  cr_assert_eq(g_record.bytes, 4);
  g_record.fail = true;
  cr_assert_eq(copy_through(&a, &v2, message, sizeof(message)), PW_STATUS_UNAVAILABLE);
  cr_assert(strstr(message, "link between 0 and 1 is down") != NULL, "%s", message);
  cr_assert(strstr(message, "record_copy") != NULL, "%s", message);
  /* A v1 vtable: the method lies beyond struct_size and is never called. */
  pw_backend_vtable_t v1 = v2;
  v1.struct_size = PW_BACKEND_VTABLE_SIZE_V1;
  atomic_store(&g_record.calls, 0);
  cr_assert_eq(copy_through(&a, &v1, message, sizeof(message)), PW_STATUS_OK, "%s", message);
  cr_assert_eq(atomic_load(&g_record.calls), 0);
  pw_tcts_backend_destroy(&a);
}
