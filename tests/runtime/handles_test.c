/* Handle confusion: an id is trusted only as far as what its slot holds.
 * Handles of another runtime (whose first client has the same slots),
 * ids with altered kind bits, random ids and ids left over after their
 * slot's generation or their client's tag went round must each give the
 * documented error (status code checked, message naming the call, the
 * handle and the kind), never another object. The ids' layout is
 * documented in lib/core/handles.c; these tests rely only on the kind
 * living in bits 63..60. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(handles, .fini = pw_test_check_leaks);

#define KIND_BITS (UINT64_C(0xF) << 60)

/* FAILS, with the message also naming |id| as 0x%016llx. */
#define FAILS_NAMING(expr, code, needle, id)                                         \
  do {                                                                                \
    char hex_[32];                                                                    \
    snprintf(hex_, sizeof(hex_), "0x%016llx", (unsigned long long)(id));              \
    pw_status_t st_ = (expr);                                                         \
    cr_assert_not_null(st_, "%s unexpectedly succeeded", #expr);                      \
    cr_assert_eq(pw_status_code(st_), (code), "%s: got %s: %s", #expr,                \
                 pw_status_code_string(pw_status_code(st_)), pw_status_message(st_)); \
    cr_assert(strstr(pw_status_message(st_), (needle)) != NULL,                       \
              "%s: message \"%s\" lacks \"%s\"", #expr, pw_status_message(st_),       \
              (needle));                                                              \
    cr_assert(strstr(pw_status_message(st_), hex_) != NULL,                           \
              "%s: message \"%s\" does not name handle %s", #expr,                    \
              pw_status_message(st_), hex_);                                          \
    pw_status_free(st_);                                                              \
  } while (0)

/* One runtime, its first client, and one object of each kind: the graph
 * is finalized, with one parameter and one compute node. The vslice is
 * made first, then the others in a given order, so two worlds can put
 * different kinds in the same slots. */
typedef struct world_t {
  pw_fixture_t f;
  pw_vslice_t vs;
  pw_executable_t exe;
  pw_buffer_t buf;
  pw_graph_t g;
  pw_array_spec_t spec;
} world_t;

static void make_graph(world_t* w) {
  uint32_t p, c;
  OK(pw_graph_create(w->f.client, &w->g));
  OK(pw_graph_add_parameter(w->f.client, w->g, w->vs, &w->spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(w->f.client, w->g, "c", w->exe, w->vs, &in, 1, &c));
  OK(pw_graph_add_output(w->f.client, w->g, pw_value(c, 0)));
  OK(pw_graph_finalize(w->f.client, w->g));
}

static void world_init(world_t* w, const char* order) {
  memset(w, 0, sizeof(*w));
  OK(pw_fixture_init(&w->f, PW_FIXTURE_DOUBLE_INLINE, 1, "2x4", pw_allocator_system()));
  int64_t dims[1] = {8};
  w->spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  OK(pw_fixture_vslice(&w->f, "2x4", &w->vs));
  /* |order|: 'e' executable, 'b' buffer, 'g' graph (after 'e': it runs
   * the executable). */
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  for (const char* o = order; *o; ++o) {
    if (*o == 'e') {
      OK(pw_fixture_compile(&w->f, w->vs,
                            "copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n",
                            &w->exe));
    } else if (*o == 'b') {
      OK(pw_fixture_f32(&w->f, w->vs, 1, dims, w->spec.sharding, data, &w->buf));
    } else {
      make_graph(w);
    }
  }
}

static void world_deinit(world_t* w) { pw_fixture_deinit(&w->f); }

static uint32_t slot_bits(uint64_t id) { return (uint32_t)(id & 0xFFFFF); }

/* Every public call that resolves a handle of each kind, given |other|'s
 * handles through |w|'s client: PERMISSION_DENIED naming the call (where
 * the call adds its name), the kind, the handle and "another runtime". */
static void expect_foreign_everywhere(world_t* w, const world_t* other) {
  pw_client_t* c = w->f.client;
  pw_buffer_t out;
  const char* denied = "belongs to another runtime";
  FAILS_NAMING(pw_graph_submit(c, w->g, &other->buf, 1, NULL, &out, 1, NULL),
               PW_STATUS_PERMISSION_DENIED, "pw_graph_submit: args[0]: buffer handle",
               other->buf.id);
  FAILS_NAMING(pw_graph_submit(c, w->g, &other->buf, 1, NULL, &out, 1, NULL),
               PW_STATUS_PERMISSION_DENIED, denied, other->buf.id);
  FAILS_NAMING(pw_graph_submit(c, other->g, &w->buf, 1, NULL, &out, 1, NULL),
               PW_STATUS_PERMISSION_DENIED, "pw_graph_submit: graph: graph handle",
               other->g.id);
  FAILS_NAMING(pw_graph_submit(c, other->g, &w->buf, 1, NULL, &out, 1, NULL),
               PW_STATUS_PERMISSION_DENIED, denied, other->g.id);
  pw_graph_t fresh;
  OK(pw_graph_create(c, &fresh));
  uint32_t p;
  FAILS_NAMING(pw_graph_add_parameter(c, fresh, other->vs, &w->spec, &p),
               PW_STATUS_PERMISSION_DENIED, "pw_graph_add_parameter: vslice: virtual slice",
               other->vs.id);
  OK(pw_graph_add_parameter(c, fresh, w->vs, &w->spec, &p));
  pw_value_t in = pw_value(p, 0);
  FAILS_NAMING(pw_graph_add_compute(c, fresh, "c", other->exe, w->vs, &in, 1, NULL),
               PW_STATUS_PERMISSION_DENIED, "pw_graph_add_compute: executable: executable",
               other->exe.id);
  FAILS_NAMING(pw_graph_add_compute(c, fresh, "c", w->exe, other->vs, &in, 1, NULL),
               PW_STATUS_PERMISSION_DENIED, denied, other->vs.id);
  OK(pw_graph_release(c, fresh));
  pw_graph_exec_t* exec = NULL;
  FAILS_NAMING(pw_graph_exec_create(c, other->g, &exec), PW_STATUS_PERMISSION_DENIED,
               denied, other->g.id);
  cr_assert_null(exec);
  pw_array_spec_t spec;
  FAILS_NAMING(pw_buffer_spec(c, other->buf, &spec), PW_STATUS_PERMISSION_DENIED, denied,
               other->buf.id);
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  FAILS_NAMING(pw_executable_signature(c, other->exe, &sig), PW_STATUS_PERMISSION_DENIED,
               denied, other->exe.id);
  uint32_t slice;
  pw_mesh_shape_t mesh;
  FAILS_NAMING(pw_vslice_binding(c, other->vs, &slice, &mesh), PW_STATUS_PERMISSION_DENIED,
               denied, other->vs.id);
  pw_graph_counts_t counts = {.struct_size = sizeof(pw_graph_counts_t)};
  FAILS_NAMING(pw_graph_counts(c, other->g, &counts), PW_STATUS_PERMISSION_DENIED, denied,
               other->g.id);
  /* Releases through the wrong runtime remove nothing, in either. */
  uint32_t live = pw_client_live_handles(c);
  FAILS_NAMING(pw_buffer_release(c, other->buf), PW_STATUS_PERMISSION_DENIED, "buffer handle",
               other->buf.id);
  FAILS_NAMING(pw_executable_release(c, other->exe), PW_STATUS_PERMISSION_DENIED,
               "executable handle", other->exe.id);
  FAILS_NAMING(pw_graph_release(c, other->g), PW_STATUS_PERMISSION_DENIED, "graph handle",
               other->g.id);
  FAILS_NAMING(pw_vslice_release(c, other->vs), PW_STATUS_PERMISSION_DENIED,
               "virtual slice handle", other->vs.id);
  cr_assert_eq(pw_client_live_handles(c), live);
}

Test(handles, another_runtimes_handles_are_denied_even_in_the_same_slots) {
  /* Each runtime's first client; the same slots hold different kinds:
   * A's slot 1 is its executable, B's its buffer, and so on. */
  world_t a, b;
  world_init(&a, "ebg");
  world_init(&b, "beg");
  cr_assert_eq(slot_bits(a.vs.id), slot_bits(b.vs.id));
  cr_assert_eq(slot_bits(a.exe.id), slot_bits(b.buf.id));
  cr_assert_eq(slot_bits(a.buf.id), slot_bits(b.exe.id));
  cr_assert_eq(slot_bits(a.g.id), slot_bits(b.g.id));
  expect_foreign_everywhere(&a, &b);
  expect_foreign_everywhere(&b, &a);
  /* Both still run their own graphs. */
  world_t* both[2] = {&a, &b};
  for (int i = 0; i < 2; ++i) {
    pw_buffer_t out;
    pw_event_t* done = NULL;
    OK(pw_graph_submit(both[i]->f.client, both[i]->g, &both[i]->buf, 1, NULL, &out, 1, &done));
    OK(pw_fixture_wait(done));
    OK(pw_buffer_release(both[i]->f.client, out));
  }
  world_deinit(&b);
  world_deinit(&a);
}

Test(handles, ids_with_altered_kind_bits_are_refused) {
  world_t w;
  world_init(&w, "ebg");
  pw_client_t* c = w.f.client;
  uint64_t kind_vs = w.vs.id & KIND_BITS, kind_exe = w.exe.id & KIND_BITS;
  uint64_t kind_buf = w.buf.id & KIND_BITS, kind_g = w.g.id & KIND_BITS;
  /* The executable's id, claiming to be a buffer: same owner, slot and
   * generation as a live handle. */
  pw_buffer_t exe_as_buf = {(w.exe.id & ~KIND_BITS) | kind_buf};
  pw_buffer_t out;
  FAILS_NAMING(pw_graph_submit(c, w.g, &exe_as_buf, 1, NULL, &out, 1, NULL),
               PW_STATUS_INVALID_ARGUMENT, "pw_graph_submit: args[0]: handle", exe_as_buf.id);
  FAILS_NAMING(pw_graph_submit(c, w.g, &exe_as_buf, 1, NULL, &out, 1, NULL),
               PW_STATUS_INVALID_ARGUMENT, "claims to be a buffer handle but names the executable",
               exe_as_buf.id);
  pw_array_spec_t spec;
  FAILS_NAMING(pw_buffer_spec(c, exe_as_buf, &spec), PW_STATUS_INVALID_ARGUMENT,
               "names the executable", exe_as_buf.id);
  FAILS_NAMING(pw_buffer_release(c, exe_as_buf), PW_STATUS_INVALID_ARGUMENT,
               "names the executable", exe_as_buf.id);
  /* A buffer's id as a graph, a graph's as an executable, the vslice's as
   * a buffer, a buffer's as a vslice. */
  pw_graph_t buf_as_graph = {(w.buf.id & ~KIND_BITS) | kind_g};
  FAILS_NAMING(pw_graph_submit(c, buf_as_graph, &w.buf, 1, NULL, &out, 1, NULL),
               PW_STATUS_INVALID_ARGUMENT, "pw_graph_submit: graph: handle", buf_as_graph.id);
  FAILS_NAMING(pw_graph_release(c, buf_as_graph), PW_STATUS_INVALID_ARGUMENT,
               "claims to be a graph handle but names the buffer", buf_as_graph.id);
  pw_graph_exec_t* exec = NULL;
  FAILS_NAMING(pw_graph_exec_create(c, buf_as_graph, &exec), PW_STATUS_INVALID_ARGUMENT,
               "names the buffer", buf_as_graph.id);
  pw_executable_t graph_as_exe = {(w.g.id & ~KIND_BITS) | kind_exe};
  pw_graph_t fresh;
  OK(pw_graph_create(c, &fresh));
  uint32_t p;
  OK(pw_graph_add_parameter(c, fresh, w.vs, &w.spec, &p));
  pw_value_t in = pw_value(p, 0);
  FAILS_NAMING(pw_graph_add_compute(c, fresh, "c", graph_as_exe, w.vs, &in, 1, NULL),
               PW_STATUS_INVALID_ARGUMENT,
               "pw_graph_add_compute: executable: handle", graph_as_exe.id);
  pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
  FAILS_NAMING(pw_executable_signature(c, graph_as_exe, &sig), PW_STATUS_INVALID_ARGUMENT,
               "names the graph", graph_as_exe.id);
  pw_buffer_t vs_as_buf = {(w.vs.id & ~KIND_BITS) | kind_buf};
  FAILS_NAMING(pw_graph_submit(c, w.g, &vs_as_buf, 1, NULL, &out, 1, NULL),
               PW_STATUS_INVALID_ARGUMENT, "names the virtual slice", vs_as_buf.id);
  pw_vslice_t buf_as_vs = {(w.buf.id & ~KIND_BITS) | kind_vs};
  FAILS_NAMING(pw_graph_add_parameter(c, fresh, buf_as_vs, &w.spec, &p),
               PW_STATUS_INVALID_ARGUMENT, "pw_graph_add_parameter: vslice: handle",
               buf_as_vs.id);
  FAILS_NAMING(pw_vslice_release(c, buf_as_vs), PW_STATUS_INVALID_ARGUMENT,
               "names the buffer", buf_as_vs.id);
  OK(pw_graph_release(c, fresh));
  /* Nothing was removed or run: every real handle still works. */
  cr_assert_eq(pw_double_backend_total_launches(w.f.dbl), 0);
  OK(pw_buffer_spec(c, w.buf, &spec));
  OK(pw_executable_signature(c, w.exe, &sig));
  pw_event_t* done = NULL;
  OK(pw_graph_submit(c, w.g, &w.buf, 1, NULL, &out, 1, &done));
  OK(pw_fixture_wait(done));
  OK(pw_buffer_release(c, out));
  OK(pw_buffer_release(c, w.buf));
  OK(pw_executable_release(c, w.exe));
  OK(pw_graph_release(c, w.g));
  OK(pw_vslice_release(c, w.vs));
  cr_assert_eq(pw_client_live_handles(c), 0);
  world_deinit(&w);
}

static uint64_t xorshift64(uint64_t* s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

/* Resolves |id| as a handle of |kind| (0 vslice, 1 executable, 2 buffer,
 * 3 graph) through a query that changes nothing. */
static pw_status_t query(pw_client_t* c, int kind, uint64_t id) {
  switch (kind) {
    case 0: {
      uint32_t slice;
      pw_mesh_shape_t mesh;
      return pw_vslice_binding(c, (pw_vslice_t){id}, &slice, &mesh);
    }
    case 1: {
      pw_executable_signature_t sig = {.struct_size = sizeof(pw_executable_signature_t)};
      return pw_executable_signature(c, (pw_executable_t){id}, &sig);
    }
    case 2: {
      pw_array_spec_t spec;
      return pw_buffer_spec(c, (pw_buffer_t){id}, &spec);
    }
    default: {
      pw_graph_counts_t counts = {.struct_size = sizeof(pw_graph_counts_t)};
      return pw_graph_counts(c, (pw_graph_t){id}, &counts);
    }
  }
}

Test(handles, forged_ids_get_the_documented_error) {
  world_t w, other;
  world_init(&w, "ebg");
  world_init(&other, "beg");
  const uint64_t real[4] = {w.vs.id, w.exe.id, w.buf.id, w.g.id};
  const uint64_t foreign[4] = {other.vs.id, other.exe.id, other.buf.id, other.g.id};
  uint64_t seed = UINT64_C(0x9E3779B97F4A7C15); /* fixed: a failure replays */
  uint32_t resolved = 0, refused[3] = {0};
  for (uint32_t i = 0; i < 40000; ++i) {
    uint64_t r = xorshift64(&seed);
    uint64_t base = (i & 1) ? real[r % 4] : foreign[r % 4];
    uint64_t id;
    switch (i % 5) {
      case 0: id = r; break;                                          /* anything */
      case 1: id = (base & ~KIND_BITS) | (r >> 8 & 0xF) << 60; break; /* kind bits */
      case 2: id = base ^ UINT64_C(1) << (r >> 16) % 64; break;       /* one bit */
      case 3: id = base ^ (r >> 24 & 0xFF); break;                    /* low bits */
      default: id = (real[r % 4] & ~KIND_BITS) | (real[r >> 4 & 3] & KIND_BITS); break;
    }
    if (id == 0) continue;
    for (int kind = 0; kind < 4; ++kind) {
      pw_status_t s = query(w.f.client, kind, id);
      if (id == real[kind]) {
        cr_assert_null(s, "id 0x%016llx: its own kind does not resolve",
                       (unsigned long long)id);
        ++resolved;
        continue;
      }
      cr_assert_not_null(s, "forged id 0x%016llx resolved as kind %d (seed step %u)",
                         (unsigned long long)id, kind, i);
      pw_status_code_t code = pw_status_code(s);
      cr_assert(code == PW_STATUS_INVALID_ARGUMENT || code == PW_STATUS_PERMISSION_DENIED ||
                    code == PW_STATUS_NOT_FOUND,
                "id 0x%016llx: %s: %s", (unsigned long long)id,
                pw_status_code_string(code), pw_status_message(s));
      char hex[32];
      snprintf(hex, sizeof(hex), "0x%016llx", (unsigned long long)id);
      cr_assert(strstr(pw_status_message(s), hex) != NULL, "message \"%s\" does not name %s",
                pw_status_message(s), hex);
      refused[code == PW_STATUS_INVALID_ARGUMENT ? 0 : code == PW_STATUS_NOT_FOUND ? 1 : 2]++;
      pw_status_free(s);
    }
  }
  /* Each error kind was reached, and the real handles did resolve. */
  cr_assert_gt(resolved, 0);
  cr_assert_gt(refused[0], 0);
  cr_assert_gt(refused[1], 0);
  cr_assert_gt(refused[2], 0);
  cr_assert_eq(pw_client_live_handles(w.f.client), 4);
  world_deinit(&other);
  world_deinit(&w);
}

Test(handles, a_stale_graph_handle_stays_stale_after_65536_cycles_of_its_slot) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 1, "2x4", pw_allocator_system()));
  pw_graph_t first;
  OK(pw_graph_create(f.client, &first));
  OK(pw_graph_release(f.client, first));
  /* 2 x 65,536 more graphs, one live at a time: the slot's generation
   * would have gone round (twice), and a next slot's once. */
  for (uint32_t i = 0; i < 2u * 65536u; ++i) {
    pw_graph_t g;
    OK(pw_graph_create(f.client, &g));
    cr_assert_neq(g.id, first.id, "cycle %u reissued the first graph's id 0x%016llx", i,
                  (unsigned long long)first.id);
    OK(pw_graph_release(f.client, g));
  }
  pw_graph_t live;
  OK(pw_graph_create(f.client, &live));
  cr_assert_neq(live.id, first.id);
  pw_graph_counts_t counts = {.struct_size = sizeof(pw_graph_counts_t)};
  FAILS_NAMING(pw_graph_counts(f.client, first, &counts), PW_STATUS_NOT_FOUND,
               "graph handle", first.id);
  FAILS_NAMING(pw_graph_release(f.client, first), PW_STATUS_NOT_FOUND,
               "is unknown or was released", first.id);
  OK(pw_graph_counts(f.client, live, &counts));
  cr_assert_eq(pw_client_live_handles(f.client), 1);
  OK(pw_graph_release(f.client, live));
  pw_fixture_deinit(&f);
}

Test(handles, a_live_clients_handles_stay_denied_after_4096_client_cycles) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 1, "2x4", pw_allocator_system()));
  pw_graph_t mine;
  OK(pw_graph_create(f.client, &mine)); /* slot 0, generation 1 */
  for (uint32_t i = 0; i < 4200; ++i) {
    pw_client_t* c = NULL;
    OK(pw_client_create(f.runtime, NULL, &c));
    pw_graph_t theirs;
    OK(pw_graph_create(c, &theirs)); /* also slot 0, generation 1 */
    cr_assert_neq(theirs.id, mine.id, "client %u got the live client's tag", i);
    pw_graph_counts_t counts = {.struct_size = sizeof(pw_graph_counts_t)};
    FAILS_NAMING(pw_graph_counts(c, mine, &counts), PW_STATUS_PERMISSION_DENIED,
                 "belongs to another client", mine.id);
    FAILS_NAMING(pw_graph_counts(f.client, theirs, &counts), PW_STATUS_PERMISSION_DENIED,
                 "belongs to another client", theirs.id);
    pw_client_destroy(c);
  }
  pw_graph_counts_t counts = {.struct_size = sizeof(pw_graph_counts_t)};
  OK(pw_graph_counts(f.client, mine, &counts));
  OK(pw_graph_release(f.client, mine));
  pw_fixture_deinit(&f);
}

Test(handles, client_creation_runs_out_only_when_every_tag_is_live) {
  pw_fixture_t f;
  OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 1, "2x4", pw_allocator_system()));
  enum { kTags = 4095 };
  static pw_client_t* clients[kTags];
  clients[0] = f.client;
  for (uint32_t i = 1; i < kTags; ++i) OK(pw_client_create(f.runtime, NULL, &clients[i]));
  pw_client_t* extra = (pw_client_t*)1;
  FAILS(pw_client_create(f.runtime, NULL, &extra), PW_STATUS_RESOURCE_EXHAUSTED,
        "4095 live clients");
  cr_assert_null(extra);
  /* One tag comes free: the next client gets it (its default name says
   * its tag), and handles of the others still do not resolve in it. */
  char name[64];
  snprintf(name, sizeof(name), "%s", pw_client_name(clients[2000]));
  pw_graph_t g;
  OK(pw_graph_create(clients[1], &g));
  pw_client_destroy(clients[2000]);
  OK(pw_client_create(f.runtime, NULL, &clients[2000]));
  cr_assert_str_eq(pw_client_name(clients[2000]), name);
  pw_graph_counts_t counts = {.struct_size = sizeof(pw_graph_counts_t)};
  FAILS_NAMING(pw_graph_counts(clients[2000], g, &counts), PW_STATUS_PERMISSION_DENIED,
               "belongs to another client", g.id);
  OK(pw_graph_release(clients[1], g));
  for (uint32_t i = 1; i < kTags; ++i) pw_client_destroy(clients[i]);
  pw_fixture_deinit(&f);
}

/* A runtime without clients holds no salt, and a freed one gives its salt
 * back: more runtimes than there are salts come and go. */
Test(handles, runtime_salts_come_back_when_runtimes_go) {
  for (uint32_t i = 0; i < 1100; ++i) {
    pw_fixture_t f;
    OK(pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 1, "1", pw_allocator_system()));
    pw_fixture_deinit(&f);
  }
}

/* pw_buffer_retain: a second handle keeps the buffer alive after the first
 * is released; each handle releases once; foreign, stale and released
 * handles are refused like every other use. */
Test(handles, a_retained_buffer_outlives_its_first_handle) {
  world_t w, other;
  world_init(&w, "eb");
  world_init(&other, "eb");
  pw_client_t* c = w.f.client;
  uint32_t live = pw_client_live_handles(c);
  pw_buffer_t second;
  OK(pw_buffer_retain(c, w.buf, &second));
  cr_assert_neq(second.id, w.buf.id);
  cr_assert_eq(pw_client_live_handles(c), live + 1);
  OK(pw_buffer_release(c, w.buf));
  pw_mesh_shape_t mesh;
  OK(pw_buffer_mesh(c, second, &mesh));
  cr_assert_eq(mesh.rank, 2);
  cr_assert_eq(mesh.dims[1], 4);
  float back[8] = {0};
  OK(pw_buffer_to_host(c, second, back, sizeof(back), PW_INFINITE_FUTURE));
  for (int i = 0; i < 8; ++i) cr_assert_eq(back[i], (float)(i + 1));
  pw_buffer_t third;
  FAILS_NAMING(pw_buffer_retain(c, w.buf, &third), PW_STATUS_NOT_FOUND, "buffer handle",
               w.buf.id);
  cr_assert_eq(third.id, 0u);
  FAILS_NAMING(pw_buffer_retain(c, other.buf, &third), PW_STATUS_PERMISSION_DENIED,
               "another runtime", other.buf.id);
  FAILS(pw_buffer_retain(c, second, NULL), PW_STATUS_INVALID_ARGUMENT, "out_buffer");
  OK(pw_buffer_release(c, second));
  FAILS_NAMING(pw_buffer_release(c, second), PW_STATUS_NOT_FOUND, "buffer handle", second.id);
  cr_assert_eq(pw_client_live_handles(c), live - 1);
  world_deinit(&other);
  world_deinit(&w);
}
