/* The runtime's checked calls into transports (lib/plugin/transport_call):
 * broken or short vtables are errors, never crashes; larger (future)
 * vtables are accepted as v1. */
#include <criterion/criterion.h>
#include <string.h>

#include "plugin/transport_call.h"
#include "support/test_allocators.h"
#include "transport_cts.h"

TestSuite(transport_call, .fini = pw_test_check_leaks);

static int pw_fake_copies;
static int pw_fake_destroys;

static pw_status_t pw_fake_copy(void* self, const pw_transport_copy_t* copy) {
  (void)self;
  pw_fake_copies++;
  copy->done(copy->done_user, NULL);
  return NULL;
}

static void pw_fake_destroy(void* self) {
  (void)self;
  pw_fake_destroys++;
}

/* A vtable "from the future": v1 plus slots this build does not know. */
typedef struct pw_future_vtable_t {
  pw_transport_vtable_t v1;
  void (*v2_method)(void);
} pw_future_vtable_t;

Test(transport_call, checks_and_unimplemented_methods) {
  pw_transport_t none = {NULL, NULL};
  pw_tcts_expect(pw__transport_check(&none), PW_STATUS_INVALID_ARGUMENT, "no vtable");
  cr_assert_str_eq(pw__transport_name(&none), "(unnamed transport)");
  pw__transport_destroy(&none); /* no crash */

  pw_transport_vtable_t short_v = {0};
  short_v.struct_size = offsetof(pw_transport_vtable_t, copy); /* copy beyond it */
  short_v.name = "short";
  short_v.copy = pw_fake_copy;
  short_v.destroy = pw_fake_destroy;
  pw_transport_t s = {&short_v, NULL};
  pw_tcts_expect(pw__transport_check(&s), PW_STATUS_INVALID_ARGUMENT, "short vtable");

  pw_tcts_backend_t a;
  pw_tcts_backend_create(PW_TCTS_CPU, &a);
  pw_backend_memory_t m = NULL;
  PW_TCTS_OK(a.backend.vtable->allocate(a.backend.self, 0, 8, &m));
  pw_tcts_done_t d;
  pw_tcts_done_init(&d);
  pw_transport_copy_t c = pw_tcts_describe(&a.backend, 0, m, 0, &a.backend, 0, m, 4, 4, &d);
  pw_tcts_expect(pw__transport_copy(&s, &c), PW_STATUS_UNIMPLEMENTED, "copy beyond struct_size");
  cr_assert(pw__transport_can_copy(&s, &a.backend, 0, &a.backend, 0), "no can_copy: assume yes");

  pw_transport_vtable_t null_v = {0};
  null_v.struct_size = sizeof(null_v);
  null_v.name = "nulls";
  pw_transport_t n = {&null_v, NULL};
  PW_TCTS_OK(pw__transport_check(&n));
  pw_tcts_expect(pw__transport_copy(&n, &c), PW_STATUS_UNIMPLEMENTED, "NULL copy");
  pw__transport_destroy(&n); /* NULL destroy: no crash */
  cr_assert_eq(atomic_load(&d.calls), 0);

  pw_future_vtable_t future;
  memset(&future, 0, sizeof(future));
  future.v1.struct_size = sizeof(future);
  future.v1.name = "future";
  future.v1.copy = pw_fake_copy;
  future.v1.destroy = pw_fake_destroy;
  pw_transport_t f = {&future.v1, NULL};
  PW_TCTS_OK(pw__transport_check(&f));
  PW_TCTS_OK(pw__transport_copy(&f, &c));
  cr_assert_eq(pw_fake_copies, 1);
  cr_assert_eq(atomic_load(&d.calls), 1);
  /* Malformed descriptors never reach the transport. */
  c.done = NULL;
  pw_tcts_expect(pw__transport_copy(&f, &c), PW_STATUS_INVALID_ARGUMENT, "no done");
  cr_assert_eq(pw_fake_copies, 1);
  pw__transport_destroy(&f);
  cr_assert_eq(pw_fake_destroys, 1);

  pw_transport_vtable_t unnamed = future.v1;
  unnamed.struct_size = sizeof(unnamed);
  unnamed.name = NULL;
  pw_transport_t u = {&unnamed, NULL};
  pw_tcts_expect(pw__transport_check(&u), PW_STATUS_INVALID_ARGUMENT, "no name");
  a.backend.vtable->deallocate(a.backend.self, 0, m);
  pw_tcts_backend_destroy(&a);
}
