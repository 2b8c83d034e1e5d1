/* Runs the transport conformance cases against the inproc transport in
 * its configurations: inline (done before copy returns), a pool of two
 * workers, and one worker with a 7-byte staging buffer (many chunks). */
#include "pathways/transports/inproc.h"
#include "transport_cts.h"

static pw_status_t pw_tcts_inproc_create(const pw_tcts_fixture_t* f, pw_allocator_t allocator,
                                         pw_transport_t* out) {
  pw_inproc_transport_options_t o = *(const pw_inproc_transport_options_t*)f->user;
  o.allocator = allocator;
  return pw_inproc_transport_create(&o, out);
}

static pw_inproc_transport_options_t pw_tcts_inline_options;
static pw_inproc_transport_options_t pw_tcts_pool_options;
static pw_inproc_transport_options_t pw_tcts_tiny_options;

__attribute__((constructor)) static void pw_tcts_init_options(void) {
  pw_inproc_transport_options_init(&pw_tcts_inline_options);
  pw_inproc_transport_options_init(&pw_tcts_pool_options);
  pw_tcts_pool_options.worker_count = 2;
  pw_inproc_transport_options_init(&pw_tcts_tiny_options);
  pw_tcts_tiny_options.worker_count = 1;
  pw_tcts_tiny_options.staging_bytes = 7;
}

static const pw_tcts_fixture_t pw_tcts_inline = {
    "inproc-inline", pw_tcts_inproc_create, false, &pw_tcts_inline_options};
static const pw_tcts_fixture_t pw_tcts_pool = {
    "inproc-pool", pw_tcts_inproc_create, true, &pw_tcts_pool_options};
static const pw_tcts_fixture_t pw_tcts_tiny = {
    "inproc-tiny-staging", pw_tcts_inproc_create, true, &pw_tcts_tiny_options};

PW_TCTS_INSTANTIATE(tcts_inproc_inline, &pw_tcts_inline)
PW_TCTS_INSTANTIATE(tcts_inproc_pool, &pw_tcts_pool)
PW_TCTS_INSTANTIATE(tcts_inproc_tiny_staging, &pw_tcts_tiny)

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
