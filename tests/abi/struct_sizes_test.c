/* Every public struct that starts with struct_size has a PW_<NAME>_SIZE_V1
 * constant equal to PW_STRUCT_SIZE of its last v1 member. The list is
 * generated from the installed headers at build time
 * (gen_struct_sizes.py), so a struct added without its constant, or with a
 * constant that does not end at a member, fails here. */
#include <criterion/criterion.h>

#include "pathways/pathways.h"
#include "pathways/backend.h"
#include "pathways/backends/cpu.h"
#include "pathways/backends/sim.h"
#include "pathways/cts.h"
#include "pathways/graph_format.h"
#include "pathways/plugin.h"
#include "pathways/scheduler.h"
#include "pathways/store.h"
#include "pathways/stores/dir.h"
#include "pathways/transport.h"
#include "pathways/transports/inproc.h"

typedef struct pw_versioned_t {
  const char* type;
  const char* constant;
  const char* last_v1_field;
  const char* header;
  bool has_constant;
  size_t size_v1;    /* the constant's value */
  size_t expected;   /* PW_STRUCT_SIZE(type, last_v1_field) */
  size_t full;       /* sizeof(type) */
} pw_versioned_t;

static const pw_versioned_t kVersioned[] = {
#include "struct_sizes_list.h"
};

Test(abi, every_versioned_struct_has_a_correct_v1_constant) {
  size_t n = sizeof(kVersioned) / sizeof(kVersioned[0]);
  /* 29 when this test was written; fewer means the scan broke. */
  cr_assert_geq(n, 29, "found only %zu versioned structs in the headers", n);
  for (size_t i = 0; i < n; ++i) {
    const pw_versioned_t* v = &kVersioned[i];
    cr_expect(v->has_constant, "%s (%s) has struct_size but no %s", v->type, v->header,
              v->constant);
    if (!v->has_constant) continue;
    cr_expect_eq(v->size_v1, v->expected,
                 "%s is %zu, but PW_STRUCT_SIZE(%s, %s) is %zu", v->constant, v->size_v1,
                 v->type, v->last_v1_field, v->expected);
    cr_expect(v->size_v1 > sizeof(size_t) && v->size_v1 <= v->full,
              "%s (%zu) must lie past struct_size and within sizeof(%s) (%zu)", v->constant,
              v->size_v1, v->type, v->full);
  }
}

Test(abi, struct_size_macro_is_offset_plus_size) {
  cr_assert_eq(PW_STRUCT_SIZE(pw_transport_copy_t, strides),
               offsetof(pw_transport_copy_t, strides) +
                   PW_TRANSPORT_MAX_STRIDES * sizeof(pw_transport_stride_t));
  cr_assert_eq(PW_TRANSPORT_COPY_SIZE_V2, PW_STRUCT_SIZE(pw_transport_copy_t, strides));
  cr_assert_eq(PW_TRANSPORT_VTABLE_SIZE_V2, sizeof(pw_transport_vtable_t));
}
