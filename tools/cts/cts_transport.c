/* pathways-cts: the transport cases and their helpers; see cts_transport.h. */
#define _POSIX_C_SOURCE 200809L
#include "cts_transport.h"

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
  PW_CTS_FAIL("%s failed: %s", what, text);
}

void pw_tcts_expect(pw_status_t status, pw_status_code_t code, const char* what) {
  PW_CTS_ASSERT_NOT_NULL(status, "%s succeeded; %s was expected", what, pw_status_code_string(code));
  pw_status_code_t got = pw_status_code(status);
  char text[512];
  pw_status_format(status, text, sizeof(text));
  size_t length = strlen(pw_status_message(status));
  pw_status_free(status);
  PW_CTS_ASSERT_EQ(got, code, "%s: %s, expected %s", what, text, pw_status_code_string(code));
  PW_CTS_ASSERT_GT(length, 0, "%s: error without a message", what);
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
  PW_CTS_ASSERT_GT(atomic_load(&d->calls), 0, "%s: done never ran (hang)", what);
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

static pw_transport_t pw_tcts_transport(const pw_tcts_fixture_t* f) {
  pw_transport_t t;
  PW_TCTS_OK(f->create(f, pw_allocator_system(), &t));
  PW_TCTS_OK(pw_cts_transport_check(&t));
  return t;
}

static void pw_tcts_pattern(unsigned char* p, size_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    p[i] = (unsigned char)(x >> 24);
  }
}

/* Runs one copy through |t| and waits for it; returns done's code. */
static int pw_tcts_run(const pw_transport_t* t, pw_transport_copy_t* c, pw_tcts_done_t* d) {
  PW_TCTS_OK(pw_cts_transport_copy(t, c));
  pw_tcts_wait(d, "copy");
  PW_CTS_ASSERT_EQ(atomic_load(&d->calls), 1);
  return atomic_load(&d->code);
}

/* --- Cases. --- */

void pw_tcts_case_vtable_basics(const pw_tcts_fixture_t* f) {
  pw_transport_t t = pw_tcts_transport(f);
  pw_transport_t u = pw_tcts_transport(f);
  PW_CTS_ASSERT_GEQ(t.vtable->struct_size, PW_TRANSPORT_VTABLE_SIZE_V1);
  PW_CTS_ASSERT(strlen(t.vtable->name) > 0);
  PW_CTS_ASSERT(t.self != u.self, "two creates share an instance");
  PW_CTS_ASSERT(PW_CTS_TRANSPORT_HAS(&t, copy));
  PW_CTS_ASSERT(PW_CTS_TRANSPORT_HAS(&t, destroy));
  pw_tcts_backend_t a;
  pw_tcts_backend_create(PW_TCTS_CPU, &a);
  PW_CTS_ASSERT(pw_cts_transport_can_copy(&t, &a.backend, 0, &a.backend, 1));
  pw_tcts_backend_destroy(&a);
  pw_cts_transport_destroy(&u);
  pw_cts_transport_destroy(&t);
}

/* One pair of backends and whether the same instance plays both roles. */
typedef struct pw_tcts_pair_t {
  pw_tcts_backend_kind_t src;
  pw_tcts_backend_kind_t dst;
  bool same;
} pw_tcts_pair_t;

static void pw_tcts_copy_pair(const pw_transport_t* t, pw_tcts_pair_t pair, size_t size) {
  pw_tcts_backend_t sb, db_storage;
  pw_tcts_backend_create(pair.src, &sb);
  pw_tcts_backend_t* db = &sb;
  if (!pair.same) {
    pw_tcts_backend_create(pair.dst, &db_storage);
    db = &db_storage;
  }
  const size_t cap = 8192;
  pw_backend_memory_t sm = NULL, dm = NULL;
  PW_TCTS_OK(sb.backend.vtable->allocate(sb.backend.self, 1, cap, &sm));
  PW_TCTS_OK(db->backend.vtable->allocate(db->backend.self, 2, cap, &dm));
  unsigned char* src = malloc(cap);
  unsigned char* want = malloc(cap);
  unsigned char* got = malloc(cap);
  pw_tcts_pattern(src, cap, (uint32_t)size);
  memset(want, 0xEE, cap);
  PW_TCTS_OK(sb.backend.vtable->copy_to_device(sb.backend.self, 1, sm, 0, src, cap));
  PW_TCTS_OK(db->backend.vtable->copy_to_device(db->backend.self, 2, dm, 0, want, cap));
  bool src_virtual = pair.src == PW_TCTS_SIM_VIRTUAL;
  bool dst_virtual = pair.dst == PW_TCTS_SIM_VIRTUAL;
  if (src_virtual) memset(src, 0, cap); /* a VIRTUAL memory reads as zeros */
  memcpy(want + 11, src + 5, size);
  pw_tcts_done_t d;
  pw_tcts_done_init(&d);
  pw_transport_copy_t c = pw_tcts_describe(&sb.backend, 1, sm, 5, &db->backend, 2, dm, 11, size,
                                           &d);
  int code = pw_tcts_run(t, &c, &d);
  PW_CTS_ASSERT_EQ(code, PW_STATUS_OK, "pair %d -> %d (%zu bytes): %s", pair.src, pair.dst, size,
               d.message);
  if (!dst_virtual) {
    PW_TCTS_OK(db->backend.vtable->copy_to_host(db->backend.self, 2, dm, 0, got, cap));
    PW_CTS_ASSERT_EQ(memcmp(got, want, cap), 0, "pair %d -> %d (%zu bytes): wrong bytes", pair.src,
                 pair.dst, size);
  }
  sb.backend.vtable->deallocate(sb.backend.self, 1, sm);
  db->backend.vtable->deallocate(db->backend.self, 2, dm);
  free(src);
  free(want);
  free(got);
  if (!pair.same) pw_tcts_backend_destroy(db);
  pw_tcts_backend_destroy(&sb);
}

void pw_tcts_case_copy_every_path(const pw_tcts_fixture_t* f) {
  pw_transport_t t = pw_tcts_transport(f);
  static const pw_tcts_pair_t pairs[] = {
      {PW_TCTS_CPU, PW_TCTS_CPU, false},          {PW_TCTS_CPU, PW_TCTS_CPU, true},
      {PW_TCTS_CPU, PW_TCTS_SIM, false},          {PW_TCTS_SIM, PW_TCTS_CPU, false},
      {PW_TCTS_SIM, PW_TCTS_SIM, true},           {PW_TCTS_CPU_NO_HOST, PW_TCTS_CPU, false},
      {PW_TCTS_CPU, PW_TCTS_CPU_NO_HOST, false},  {PW_TCTS_CPU_NO_HOST, PW_TCTS_CPU_NO_HOST, false},
      {PW_TCTS_CPU_NO_HOST, PW_TCTS_CPU_NO_HOST, true}, {PW_TCTS_SIM_VIRTUAL, PW_TCTS_CPU, false},
      {PW_TCTS_CPU, PW_TCTS_SIM_VIRTUAL, false},  {PW_TCTS_SIM_VIRTUAL, PW_TCTS_CPU_NO_HOST, false},
      {PW_TCTS_SIM_VIRTUAL, PW_TCTS_SIM_VIRTUAL, true},
  };
  static const size_t sizes[] = {1, 7, 4096 + 3};
  for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); ++p) {
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
      pw_tcts_copy_pair(&t, pairs[p], sizes[s]);
    }
  }
  pw_cts_transport_destroy(&t);
}

void pw_tcts_case_zero_size(const pw_tcts_fixture_t* f) {
  pw_transport_t t = pw_tcts_transport(f);
  pw_tcts_backend_t a;
  pw_tcts_backend_create(PW_TCTS_CPU_NO_HOST, &a);
  pw_backend_memory_t m = NULL;
  PW_TCTS_OK(a.backend.vtable->allocate(a.backend.self, 0, 16, &m));
  pw_tcts_done_t d;
  pw_tcts_done_init(&d);
  pw_transport_copy_t c = pw_tcts_describe(&a.backend, 0, m, 16, &a.backend, 0, m, 0, 0, &d);
  PW_CTS_ASSERT_EQ(pw_tcts_run(&t, &c, &d), PW_STATUS_OK);
  pw_tcts_done_init(&d);
  c = pw_tcts_describe(&a.backend, 0, m, 17, &a.backend, 0, m, 0, 0, &d);
  pw_tcts_expect(pw_cts_transport_copy(&t, &c), PW_STATUS_OUT_OF_RANGE, "empty copy past the end");
  a.backend.vtable->deallocate(a.backend.self, 0, m);
  pw_cts_transport_destroy(&t);
  pw_tcts_backend_destroy(&a);
  PW_CTS_ASSERT_EQ(atomic_load(&d.calls), 0, "a refused copy ran its done");
}

void pw_tcts_case_bad_descriptors(const pw_tcts_fixture_t* f) {
  pw_transport_t t = pw_tcts_transport(f);
  pw_tcts_backend_t a;
  pw_tcts_backend_create(PW_TCTS_CPU, &a);
  pw_backend_memory_t m = NULL;
  PW_TCTS_OK(a.backend.vtable->allocate(a.backend.self, 0, 64, &m));
  pw_tcts_done_t d;
  pw_tcts_done_init(&d);
  pw_transport_copy_t good = pw_tcts_describe(&a.backend, 0, m, 0, &a.backend, 0, m, 32, 8, &d);
  pw_transport_copy_t c;
  pw_tcts_expect(pw_cts_transport_copy(&t, NULL), PW_STATUS_INVALID_ARGUMENT, "NULL descriptor");
  pw_tcts_expect(t.vtable->copy(t.self, NULL), PW_STATUS_INVALID_ARGUMENT, "raw NULL descriptor");
  c = good;
  c.struct_size = 8;
  pw_tcts_expect(pw_cts_transport_copy(&t, &c), PW_STATUS_INVALID_ARGUMENT, "struct_size 8");
  pw_tcts_expect(t.vtable->copy(t.self, &c), PW_STATUS_INVALID_ARGUMENT, "raw struct_size 8");
  c = good;
  c.done = NULL;
  pw_tcts_expect(pw_cts_transport_copy(&t, &c), PW_STATUS_INVALID_ARGUMENT, "no done");
  c = good;
  c.src.backend = NULL;
  pw_tcts_expect(pw_cts_transport_copy(&t, &c), PW_STATUS_INVALID_ARGUMENT, "no source backend");
  pw_tcts_expect(t.vtable->copy(t.self, &c), PW_STATUS_INVALID_ARGUMENT, "raw: no backend");
  c = good;
  c.dst.memory = NULL;
  pw_tcts_expect(pw_cts_transport_copy(&t, &c), PW_STATUS_INVALID_ARGUMENT, "no dst memory");
  pw_tcts_expect(t.vtable->copy(t.self, &c), PW_STATUS_INVALID_ARGUMENT, "raw: no memory");
  c = good;
  c.dst.device = 1; /* the memory is device 0's */
  pw_tcts_expect(pw_cts_transport_copy(&t, &c), PW_STATUS_INVALID_ARGUMENT, "memory of another device");
  a.backend.vtable->deallocate(a.backend.self, 0, m);
  pw_cts_transport_destroy(&t);
  pw_tcts_backend_destroy(&a);
  PW_CTS_ASSERT_EQ(atomic_load(&d.calls), 0, "a refused copy ran its done");
}

void pw_tcts_case_bad_ranges(const pw_tcts_fixture_t* f) {
  pw_transport_t t = pw_tcts_transport(f);
  pw_tcts_backend_kind_t kinds[3] = {PW_TCTS_CPU, PW_TCTS_CPU_NO_HOST, PW_TCTS_SIM_VIRTUAL};
  pw_tcts_done_t d;
  pw_tcts_done_init(&d);
  for (int k = 0; k < 3; ++k) {
    pw_tcts_backend_t a;
    pw_tcts_backend_create(kinds[k], &a);
    const pw_backend_t* b = &a.backend;
    pw_backend_memory_t m = NULL, n = NULL;
    PW_TCTS_OK(b->vtable->allocate(b->self, 0, 64, &m));
    PW_TCTS_OK(b->vtable->allocate(b->self, 1, 32, &n));
    unsigned char before[32], after[32];
    memset(before, 0x5A, sizeof(before));
    PW_TCTS_OK(b->vtable->copy_to_device(b->self, 1, n, 0, before, sizeof(before)));
    static const struct {
      size_t src_offset, dst_offset, size;
      const char* what;
    } bad[] = {
        {60, 0, 8, "source past its end"},     {0, 30, 4, "destination past its end"},
        {0, 0, 33, "larger than the destination"}, {65, 0, 0, "empty source past its end"},
        {0, 33, 0, "empty destination past its end"}, {SIZE_MAX, 0, 2, "source offset overflow"},
        {0, SIZE_MAX - 1, 4, "destination offset overflow"}, {1, 1, SIZE_MAX, "size overflow"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
      pw_transport_copy_t c = pw_tcts_describe(b, 0, m, bad[i].src_offset, b, 1, n,
                                               bad[i].dst_offset, bad[i].size, &d);
      pw_tcts_expect(pw_cts_transport_copy(&t, &c), PW_STATUS_OUT_OF_RANGE, bad[i].what);
      pw_tcts_expect(t.vtable->copy(t.self, &c), PW_STATUS_OUT_OF_RANGE, bad[i].what);
    }
    if (kinds[k] != PW_TCTS_SIM_VIRTUAL) {
      PW_TCTS_OK(b->vtable->copy_to_host(b->self, 1, n, 0, after, sizeof(after)));
      PW_CTS_ASSERT_EQ(memcmp(before, after, sizeof(after)), 0, "a refused copy wrote");
    }
    b->vtable->deallocate(b->self, 0, m);
    b->vtable->deallocate(b->self, 1, n);
    pw_tcts_backend_destroy(&a);
  }
  pw_cts_transport_destroy(&t);
  PW_CTS_ASSERT_EQ(atomic_load(&d.calls), 0, "a refused copy ran its done");
}

void pw_tcts_case_overlap_in_one_memory(const pw_tcts_fixture_t* f) {
  pw_transport_t t = pw_tcts_transport(f);
  pw_tcts_backend_kind_t kinds[2] = {PW_TCTS_CPU, PW_TCTS_CPU_NO_HOST};
  static const struct {
    size_t src, dst, size;
  } moves[] = {{0, 10, 40}, {20, 5, 40}, {3, 3, 20}, {0, 32, 32}};
  for (int k = 0; k < 2; ++k) {
    for (size_t i = 0; i < sizeof(moves) / sizeof(moves[0]); ++i) {
      pw_tcts_backend_t a;
      pw_tcts_backend_create(kinds[k], &a);
      const pw_backend_t* b = &a.backend;
      pw_backend_memory_t m = NULL;
      PW_TCTS_OK(b->vtable->allocate(b->self, 3, 64, &m));
      unsigned char want[64], got[64];
      pw_tcts_pattern(want, sizeof(want), (uint32_t)i);
      PW_TCTS_OK(b->vtable->copy_to_device(b->self, 3, m, 0, want, sizeof(want)));
      memmove(want + moves[i].dst, want + moves[i].src, moves[i].size);
      pw_tcts_done_t d;
      pw_tcts_done_init(&d);
      pw_transport_copy_t c =
          pw_tcts_describe(b, 3, m, moves[i].src, b, 3, m, moves[i].dst, moves[i].size, &d);
      PW_CTS_ASSERT_EQ(pw_tcts_run(&t, &c, &d), PW_STATUS_OK, "%s", d.message);
      PW_TCTS_OK(b->vtable->copy_to_host(b->self, 3, m, 0, got, sizeof(got)));
      PW_CTS_ASSERT_EQ(memcmp(got, want, sizeof(got)), 0,
                   "backend kind %d: [%zu,+%zu) -> %zu is not a memmove", kinds[k], moves[i].src,
                   moves[i].size, moves[i].dst);
      b->vtable->deallocate(b->self, 3, m);
      pw_tcts_backend_destroy(&a);
    }
  }
  pw_cts_transport_destroy(&t);
}

void pw_tcts_case_lost_peer(const pw_tcts_fixture_t* f) {
  pw_transport_t t = pw_tcts_transport(f);
  pw_tcts_backend_t cpu, sim;
  pw_tcts_backend_create(PW_TCTS_CPU, &cpu);
  pw_tcts_backend_create(PW_TCTS_SIM, &sim);
  pw_backend_memory_t cm = NULL, sm = NULL;
  PW_TCTS_OK(cpu.backend.vtable->allocate(cpu.backend.self, 2, 64, &cm));
  PW_TCTS_OK(sim.backend.vtable->allocate(sim.backend.self, 5, 64, &sm));
  PW_TCTS_OK(pw_cpu_backend_set_health(cpu.backend, 2, PW_DEVICE_FAILED));
  pw_tcts_done_t d;
  pw_tcts_done_init(&d);
  pw_transport_copy_t c = pw_tcts_describe(&sim.backend, 5, sm, 0, &cpu.backend, 2, cm, 0, 64, &d);
  PW_CTS_ASSERT_EQ(pw_tcts_run(&t, &c, &d), PW_STATUS_UNAVAILABLE, "%s", d.message);
  /* The message names the lost side: the device and the backend. */
  PW_CTS_ASSERT(strstr(d.message, "device 2") != NULL && strstr(d.message, "cpu") != NULL,
                "the error does not name device 2 of backend 'cpu': %s", d.message);
  PW_TCTS_OK(pw_cpu_backend_set_health(cpu.backend, 2, PW_DEVICE_HEALTHY));
  PW_TCTS_OK(pw_sim_backend_fail(sim.backend, PW_SIM_FAIL_CHIP, 5, PW_SIM_TIME_NOW));
  pw_tcts_done_init(&d);
  c = pw_tcts_describe(&sim.backend, 5, sm, 0, &cpu.backend, 2, cm, 0, 64, &d);
  PW_CTS_ASSERT_EQ(pw_tcts_run(&t, &c, &d), PW_STATUS_UNAVAILABLE, "%s", d.message);
  PW_CTS_ASSERT(strstr(d.message, "device 5") != NULL && strstr(d.message, "sim") != NULL,
                "the error does not name device 5 of backend 'sim': %s", d.message);
  cpu.backend.vtable->deallocate(cpu.backend.self, 2, cm);
  sim.backend.vtable->deallocate(sim.backend.self, 5, sm);
  pw_cts_transport_destroy(&t);
  pw_tcts_backend_destroy(&cpu);
  pw_tcts_backend_destroy(&sim);
}

void pw_tcts_case_sim_virtual_time(const pw_tcts_fixture_t* f) {
  pw_transport_t t = pw_tcts_transport(f);
  pw_tcts_backend_t sim;
  pw_tcts_backend_create(PW_TCTS_SIM, &sim);
  const pw_backend_t* b = &sim.backend;
  pw_backend_memory_t m0 = NULL, m4 = NULL;
  PW_TCTS_OK(b->vtable->allocate(b->self, 0, 1000000, &m0));
  PW_TCTS_OK(b->vtable->allocate(b->self, 4, 1000000, &m4));
  pw_tcts_done_t d;
  pw_tcts_done_init(&d);
  /* Across slices: dcn latency 10 us + 1e6 bytes at 2.5e10 B/s = 50 us. */
  pw_transport_copy_t c = pw_tcts_describe(b, 0, m0, 0, b, 4, m4, 0, 1000000, &d);
  PW_CTS_ASSERT_EQ(pw_tcts_run(&t, &c, &d), PW_STATUS_OK, "%s", d.message);
  pw_sim_stats_t stats = {.struct_size = sizeof(pw_sim_stats_t)};
  PW_TCTS_OK(pw_sim_backend_stats(*b, &stats));
  PW_CTS_ASSERT_EQ(stats.transfers, 1);
  PW_CTS_ASSERT_EQ(stats.clock, 50000, "clock %llu", (unsigned long long)stats.clock);
  /* A chip that has failed by the end of the transfer loses it. */
  PW_TCTS_OK(pw_sim_backend_fail(*b, PW_SIM_FAIL_CHIP, 4, 60000));
  pw_tcts_done_init(&d);
  c = pw_tcts_describe(b, 4, m4, 0, b, 0, m0, 0, 1000000, &d);
  PW_CTS_ASSERT_EQ(pw_tcts_run(&t, &c, &d), PW_STATUS_UNAVAILABLE, "%s", d.message);
  PW_CTS_ASSERT(strstr(d.message, "device 4 (slice 1 chip 0)") != NULL, "%s", d.message);
  b->vtable->deallocate(b->self, 0, m0);
  b->vtable->deallocate(b->self, 4, m4);
  pw_cts_transport_destroy(&t);
  pw_tcts_backend_destroy(&sim);
}

/* A chain: each copy's done starts the next. */
enum { kChain = 24 };

typedef struct pw_tcts_chain_t {
  const pw_transport_t* transport;
  pw_transport_copy_t copies[kChain];
  pw_tcts_done_t dones[kChain];
  _Atomic uint32_t failures;
} pw_tcts_chain_t;

static void pw_tcts_chain_next(pw_tcts_done_t* d) {
  pw_tcts_chain_t* chain = d->user;
  size_t next = (size_t)(d - chain->dones) + 1;
  if (next >= kChain) return;
  pw_status_t status = pw_cts_transport_copy(chain->transport, &chain->copies[next]);
  if (status != NULL) {
    atomic_fetch_add(&chain->failures, 1);
    pw_status_free(status);
  }
}

void pw_tcts_case_copy_from_done(const pw_tcts_fixture_t* f) {
  pw_transport_t t = pw_tcts_transport(f);
  pw_tcts_backend_t a;
  pw_tcts_backend_create(PW_TCTS_CPU_NO_HOST, &a);
  const pw_backend_t* b = &a.backend;
  pw_backend_memory_t m[kChain + 1];
  for (int i = 0; i <= kChain; ++i) PW_TCTS_OK(b->vtable->allocate(b->self, (uint32_t)i % 4, 32, &m[i]));
  unsigned char first[32], got[32];
  pw_tcts_pattern(first, sizeof(first), 9);
  PW_TCTS_OK(b->vtable->copy_to_device(b->self, 0, m[0], 0, first, sizeof(first)));
  pw_tcts_chain_t* chain = calloc(1, sizeof(*chain));
  chain->transport = &t;
  for (int i = 0; i < kChain; ++i) {
    pw_tcts_done_init(&chain->dones[i]);
    chain->dones[i].then = pw_tcts_chain_next;
    chain->dones[i].user = chain;
    chain->copies[i] = pw_tcts_describe(b, (uint32_t)i % 4, m[i], 0, b, (uint32_t)(i + 1) % 4,
                                        m[i + 1], 0, 32, &chain->dones[i]);
  }
  PW_TCTS_OK(pw_cts_transport_copy(&t, &chain->copies[0]));
  pw_tcts_wait(&chain->dones[kChain - 1], "the last copy of the chain");
  PW_CTS_ASSERT_EQ(atomic_load(&chain->failures), 0);
  PW_TCTS_OK(b->vtable->copy_to_host(b->self, kChain % 4, m[kChain], 0, got, sizeof(got)));
  PW_CTS_ASSERT_EQ(memcmp(first, got, sizeof(got)), 0, "bytes changed along the chain");
  pw_cts_transport_destroy(&t);
  for (int i = 0; i < kChain; ++i) PW_CTS_ASSERT_EQ(atomic_load(&chain->dones[i].calls), 1);
  for (int i = 0; i <= kChain; ++i) b->vtable->deallocate(b->self, (uint32_t)i % 4, m[i]);
  free(chain);
  pw_tcts_backend_destroy(&a);
}

void pw_tcts_case_many_in_flight(const pw_tcts_fixture_t* f) {
  pw_transport_t t = pw_tcts_transport(f);
  pw_tcts_backend_t a, c;
  pw_tcts_backend_create(PW_TCTS_CPU, &a);
  pw_tcts_backend_create(PW_TCTS_CPU_NO_HOST, &c);
  enum { kCopies = 200 };
  pw_backend_memory_t src = NULL, dst = NULL;
  PW_TCTS_OK(a.backend.vtable->allocate(a.backend.self, 0, kCopies * 16, &src));
  PW_TCTS_OK(c.backend.vtable->allocate(c.backend.self, 1, kCopies * 16, &dst));
  unsigned char* want = malloc(kCopies * 16);
  unsigned char* got = malloc(kCopies * 16);
  pw_tcts_pattern(want, kCopies * 16, 3);
  PW_TCTS_OK(a.backend.vtable->copy_to_device(a.backend.self, 0, src, 0, want, kCopies * 16));
  pw_tcts_done_t* dones = calloc(kCopies, sizeof(*dones));
  for (size_t i = 0; i < kCopies; ++i) {
    pw_tcts_done_init(&dones[i]);
    pw_transport_copy_t copy =
        pw_tcts_describe(&a.backend, 0, src, i * 16, &c.backend, 1, dst, i * 16, 16, &dones[i]);
    PW_TCTS_OK(pw_cts_transport_copy(&t, &copy)); /* the descriptor is not kept */
  }
  pw_cts_transport_destroy(&t); /* runs what is still queued */
  for (size_t i = 0; i < kCopies; ++i) {
    PW_CTS_ASSERT_EQ(atomic_load(&dones[i].calls), 1, "copy %zu", i);
    PW_CTS_ASSERT_EQ(atomic_load(&dones[i].code), PW_STATUS_OK, "copy %zu: %s", i, dones[i].message);
  }
  PW_TCTS_OK(c.backend.vtable->copy_to_host(c.backend.self, 1, dst, 0, got, kCopies * 16));
  PW_CTS_ASSERT_EQ(memcmp(want, got, kCopies * 16), 0);
  a.backend.vtable->deallocate(a.backend.self, 0, src);
  c.backend.vtable->deallocate(c.backend.self, 1, dst);
  free(want);
  free(got);
  free(dones);
  pw_tcts_backend_destroy(&a);
  pw_tcts_backend_destroy(&c);
}

/* Bytes copied by the allocation sweep. */
#define PW_TCTS_SWEEP_BYTES 4096

typedef struct pw_tcts_sweep_t {
  const pw_tcts_fixture_t* fixture;
  pw_tcts_backend_t* backend;
  pw_backend_memory_t m[2];
} pw_tcts_sweep_t;

static bool pw_tcts_sweep_body(pw_allocator_t allocator, bool expect_failure, void* user) {
  pw_tcts_sweep_t* s = user;
  pw_transport_t t;
  memset(&t, 0, sizeof(t));
  pw_tcts_done_t d;
  pw_tcts_done_init(&d);
  const pw_backend_t* b = &s->backend->backend;
  pw_status_t status = s->fixture->create(s->fixture, allocator, &t);
  bool accepted = false;
  if (status == NULL) {
    /* Both sides lack host pointers: the copy needs a staging buffer (an
     * allocation even inline: larger than what inproc stages on the
     * stack). */
    pw_transport_copy_t c = pw_tcts_describe(b, 0, s->m[0], 0, b, 1, s->m[1], 0,
                                             PW_TCTS_SWEEP_BYTES, &d);
    status = pw_cts_transport_copy(&t, &c);
    accepted = status == NULL;
  }
  if (t.vtable != NULL) pw_cts_transport_destroy(&t);
  bool ok = atomic_load(&d.calls) == (accepted ? 1u : 0u);
  if (accepted) ok = ok && atomic_load(&d.code) == PW_STATUS_OK;
  pw_status_code_t code = pw_status_code(status);
  pw_status_free(status);
  return ok && (expect_failure ? code == PW_STATUS_RESOURCE_EXHAUSTED : code == PW_STATUS_OK);
}

void pw_tcts_case_allocation_failures(const pw_tcts_fixture_t* f) {
  if (!f->takes_allocator) {
    PW_CTS_SKIP("%s: the plugin has no create_transport hook (pathways/cts.h)", f->name);
  }
  pw_tcts_backend_t a;
  pw_tcts_backend_create(PW_TCTS_CPU_NO_HOST, &a);
  pw_tcts_sweep_t s = {f, &a, {NULL, NULL}};
  PW_TCTS_OK(a.backend.vtable->allocate(a.backend.self, 0, PW_TCTS_SWEEP_BYTES, &s.m[0]));
  PW_TCTS_OK(a.backend.vtable->allocate(a.backend.self, 1, PW_TCTS_SWEEP_BYTES, &s.m[1]));
  char why[256] = "";
  int swept = pw_cts_allocator_sweep(pw_tcts_sweep_body, &s, why);
  PW_CTS_ASSERT_GEQ(swept, 2, "%s: %s", f->name, why);
  a.backend.vtable->deallocate(a.backend.self, 0, s.m[0]);
  a.backend.vtable->deallocate(a.backend.self, 1, s.m[1]);
  pw_tcts_backend_destroy(&a);
}

/* Strided copies (v2): a grid of rows lands where the same rows copied one
 * by one would, on every path; a grid that leaves either memory, whose
 * arithmetic overflows, or whose levels are malformed is refused before
 * anything moves. A transport without copy_strided is UNIMPLEMENTED
 * through the shim (the runtime then copies row by row). */
void pw_tcts_case_strided_copies(const pw_tcts_fixture_t* f) {
  pw_transport_t t = pw_tcts_transport(f);
  if (!PW_CTS_TRANSPORT_HAS(&t, copy_strided)) {
    pw_tcts_done_t d;
    pw_tcts_done_init(&d);
    pw_tcts_backend_t a;
    pw_tcts_backend_create(PW_TCTS_CPU, &a);
    pw_backend_memory_t m = NULL;
    PW_TCTS_OK(a.backend.vtable->allocate(a.backend.self, 0, 64, &m));
    pw_transport_copy_t c = pw_tcts_describe(&a.backend, 0, m, 0, &a.backend, 0, m, 32, 8, &d);
    pw_tcts_expect(pw_cts_transport_copy_strided(&t, &c), PW_STATUS_UNIMPLEMENTED, "no copy_strided");
    a.backend.vtable->deallocate(a.backend.self, 0, m);
    pw_tcts_backend_destroy(&a);
    pw_cts_transport_destroy(&t);
    return;
  }
  static const pw_tcts_pair_t pairs[] = {
      {PW_TCTS_CPU, PW_TCTS_CPU, false},
      {PW_TCTS_CPU, PW_TCTS_CPU_NO_HOST, false},
      {PW_TCTS_CPU_NO_HOST, PW_TCTS_CPU, false},
      {PW_TCTS_CPU_NO_HOST, PW_TCTS_CPU_NO_HOST, false},
      {PW_TCTS_SIM, PW_TCTS_SIM, true},
      {PW_TCTS_SIM_VIRTUAL, PW_TCTS_SIM_VIRTUAL, true},
  };
  const size_t cap = 4096;
  unsigned char* src = malloc(cap);
  unsigned char* want = malloc(cap);
  unsigned char* got = malloc(cap);
  for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); ++p) {
    pw_tcts_backend_t sb, db_storage;
    pw_tcts_backend_create(pairs[p].src, &sb);
    pw_tcts_backend_t* db = &sb;
    if (!pairs[p].same) {
      pw_tcts_backend_create(pairs[p].dst, &db_storage);
      db = &db_storage;
    }
    pw_backend_memory_t sm = NULL, dm = NULL;
    PW_TCTS_OK(sb.backend.vtable->allocate(sb.backend.self, 1, cap, &sm));
    PW_TCTS_OK(db->backend.vtable->allocate(db->backend.self, 2, cap, &dm));
    bool virtual_memory = pairs[p].src == PW_TCTS_SIM_VIRTUAL;
    pw_tcts_pattern(src, cap, (uint32_t)p + 3);
    memset(want, 0xEE, cap);
    PW_TCTS_OK(sb.backend.vtable->copy_to_device(sb.backend.self, 1, sm, 0, src, cap));
    PW_TCTS_OK(db->backend.vtable->copy_to_device(db->backend.self, 2, dm, 0, want, cap));
    /* 5 x 3 rows of 7 bytes: source rows 40 apart in blocks 300 apart,
     * destination rows 9 apart in blocks 30 apart. */
    pw_tcts_done_t d;
    pw_tcts_done_init(&d);
    pw_transport_copy_t c = pw_tcts_describe(&sb.backend, 1, sm, 13, &db->backend, 2, dm, 100, 7,
                                             &d);
    c.stride_count = 2;
    c.strides[0] = (pw_transport_stride_t){5, 300, 30};
    c.strides[1] = (pw_transport_stride_t){3, 40, 9};
    for (size_t i = 0; i < 5; ++i) {
      for (size_t j = 0; j < 3; ++j) memcpy(want + 100 + i * 30 + j * 9, src + 13 + i * 300 + j * 40, 7);
    }
    PW_TCTS_OK(pw_cts_transport_copy_strided(&t, &c));
    pw_tcts_wait(&d, "strided copy");
    PW_CTS_ASSERT_EQ(atomic_load(&d.calls), 1);
    PW_CTS_ASSERT_EQ(atomic_load(&d.code), PW_STATUS_OK, "pair %zu: %s", p, d.message);
    if (!virtual_memory) {
      PW_TCTS_OK(db->backend.vtable->copy_to_host(db->backend.self, 2, dm, 0, got, cap));
      PW_CTS_ASSERT_EQ(memcmp(got, want, cap), 0, "pair %zu: wrong bytes", p);
    }
    /* Refused grids: nothing moves and done never runs. */
    pw_tcts_done_t never;
    pw_tcts_done_init(&never);
    pw_transport_copy_t good = c;
    good.done_user = &never;
    static const struct {
      size_t count0, src0, dst0;
      uint32_t levels;
      pw_status_code_t code;
      const char* what;
    } bad[] = {
        {15, 300, 30, 2, PW_STATUS_OUT_OF_RANGE, "last source row past the end"},
        {5, 300, 1000, 2, PW_STATUS_OUT_OF_RANGE, "last destination row past the end"},
        {SIZE_MAX, 300, 30, 2, PW_STATUS_OUT_OF_RANGE, "rows overflow"},
        {3, SIZE_MAX / 2, 30, 2, PW_STATUS_OUT_OF_RANGE, "stride overflow"},
        {0, 300, 30, 2, PW_STATUS_INVALID_ARGUMENT, "a count of 0"},
        {5, 300, 30, 3, PW_STATUS_INVALID_ARGUMENT, "three levels"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
      pw_transport_copy_t b = good;
      b.strides[0] = (pw_transport_stride_t){bad[i].count0, bad[i].src0, bad[i].dst0};
      b.stride_count = bad[i].levels;
      pw_tcts_expect(pw_cts_transport_copy_strided(&t, &b), bad[i].code, bad[i].what);
      pw_tcts_expect(t.vtable->copy_strided(t.self, &b), bad[i].code, bad[i].what);
    }
    pw_transport_copy_t v1 = good;
    v1.struct_size = PW_TRANSPORT_COPY_SIZE_V1;
    pw_tcts_expect(pw_cts_transport_copy_strided(&t, &v1), PW_STATUS_INVALID_ARGUMENT, "a v1 descriptor");
    pw_tcts_expect(t.vtable->copy_strided(t.self, &v1), PW_STATUS_INVALID_ARGUMENT, "raw: v1");
    PW_CTS_ASSERT_EQ(atomic_load(&never.calls), 0, "a refused copy ran its done");
    if (!virtual_memory) {
      PW_TCTS_OK(db->backend.vtable->copy_to_host(db->backend.self, 2, dm, 0, got, cap));
      PW_CTS_ASSERT_EQ(memcmp(got, want, cap), 0, "pair %zu: a refused copy wrote", p);
    }
    sb.backend.vtable->deallocate(sb.backend.self, 1, sm);
    db->backend.vtable->deallocate(db->backend.self, 2, dm);
    if (!pairs[p].same) pw_tcts_backend_destroy(db);
    pw_tcts_backend_destroy(&sb);
  }
  free(src);
  free(want);
  free(got);
  pw_cts_transport_destroy(&t);
}
