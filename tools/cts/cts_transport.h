/* pathways-cts: the transport suite (pathways/transport.h), ported from
 * the in-tree transport cases. Each case moves bytes between pairs of
 * backends covering every path a transport may take: both memories host
 * accessible (cpu <-> cpu, cpu <-> sim), one of them (a cpu backend behind
 * a vtable without host_pointer), neither (two of those, and sim VIRTUAL
 * memory). The endpoint backends are the bundled cpu and sim backends,
 * made through their public create functions; the transport under test
 * comes from the plugin. */
#ifndef PW_TOOLS_CTS_CTS_TRANSPORT_H_
#define PW_TOOLS_CTS_CTS_TRANSPORT_H_

#include <stdatomic.h>

#include "cts_check.h"

typedef struct pw_tcts_fixture_t {
  const char* name;
  /* Creates a transport; with |takes_allocator| everything it allocates
   * comes from |allocator| (otherwise it is ignored). */
  pw_status_t (*create)(const struct pw_tcts_fixture_t* fixture, pw_allocator_t allocator,
                        pw_transport_t* out_transport);
  bool takes_allocator;
  const pw_cts_context_t* ctx;
} pw_tcts_fixture_t;

#define PW_TCTS_CASES(X)     \
  X(vtable_basics)           \
  X(copy_every_path)         \
  X(zero_size)               \
  X(bad_descriptors)         \
  X(bad_ranges)              \
  X(overlap_in_one_memory)   \
  X(lost_peer)               \
  X(sim_virtual_time)        \
  X(copy_from_done)          \
  X(many_in_flight)          \
  X(allocation_failures)     \
  X(strided_copies)

#define PW_TCTS_DECLARE(name) void pw_tcts_case_##name(const pw_tcts_fixture_t* f);
PW_TCTS_CASES(PW_TCTS_DECLARE)
#undef PW_TCTS_DECLARE

/* Checked calls, as the runtime makes them: a NULL descriptor or one
 * below its version, and a missing method, are refused here; everything
 * else the transport itself must check (pathways/transport.h). */
pw_status_t pw_cts_transport_check(const pw_transport_t* transport);
bool pw_cts_transport_has(const pw_transport_t* transport, size_t method_offset,
                          size_t method_size);
#define PW_CTS_TRANSPORT_HAS(transport, method)                              \
  pw_cts_transport_has((transport), offsetof(pw_transport_vtable_t, method), \
                       sizeof(((pw_transport_vtable_t*)0)->method))
void pw_cts_transport_destroy(const pw_transport_t* transport);
pw_status_t pw_cts_transport_copy(const pw_transport_t* transport, const pw_transport_copy_t* copy);
pw_status_t pw_cts_transport_copy_strided(const pw_transport_t* transport,
                                          const pw_transport_copy_t* copy);
bool pw_cts_transport_can_copy(const pw_transport_t* transport, const pw_backend_t* src,
                               uint32_t src_device, const pw_backend_t* dst, uint32_t dst_device);

/* --- Backends for the cases. --- */

typedef enum pw_tcts_backend_kind_e {
  PW_TCTS_CPU = 0,          /* host pointers */
  PW_TCTS_CPU_NO_HOST = 1,  /* a CPU backend whose vtable has no host_pointer */
  PW_TCTS_SIM = 2,          /* sim, HOST memory: host pointers */
  PW_TCTS_SIM_VIRTUAL = 3,  /* sim, VIRTUAL memory: no bytes, no host pointers */
} pw_tcts_backend_kind_t;

/* A backend the test owns (destroy with pw_tcts_backend_destroy). */
typedef struct pw_tcts_backend_t {
  pw_backend_t backend;
  pw_backend_vtable_t shim;   /* PW_TCTS_CPU_NO_HOST: the wrapped vtable */
  pw_tcts_backend_kind_t kind;
} pw_tcts_backend_t;

void pw_tcts_backend_create(pw_tcts_backend_kind_t kind, pw_tcts_backend_t* out);
void pw_tcts_backend_destroy(pw_tcts_backend_t* b);

/* Completion record of one copy. */
typedef struct pw_tcts_done_t {
  _Atomic uint32_t calls;
  _Atomic int code;
  char message[256];
  void (*then)(struct pw_tcts_done_t* done);
  void* user;
} pw_tcts_done_t;

void pw_tcts_done_init(pw_tcts_done_t* d);
void pw_tcts_done(void* user, pw_status_t status);
/* Waits (20 s) until |d| was called; fails the test on timeout. */
void pw_tcts_wait(pw_tcts_done_t* d, const char* what);

/* A copy descriptor of |size| bytes between two endpoints, done -> |d|. */
pw_transport_copy_t pw_tcts_describe(const pw_backend_t* src, uint32_t src_device,
                                     pw_backend_memory_t src_memory, size_t src_offset,
                                     const pw_backend_t* dst, uint32_t dst_device,
                                     pw_backend_memory_t dst_memory, size_t dst_offset,
                                     size_t size, pw_tcts_done_t* d);

void pw_tcts_ok(pw_status_t status, const char* what);
#define PW_TCTS_OK(expr) pw_tcts_ok((expr), #expr)
/* Frees |status| and fails unless its code is |code|. */
void pw_tcts_expect(pw_status_t status, pw_status_code_t code, const char* what);

#endif /* PW_TOOLS_CTS_CTS_TRANSPORT_H_ */
