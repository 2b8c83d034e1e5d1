/* Helpers of the transport tests (inproc_test.c, transport_call_test.c):
 * endpoint backends, completion records, descriptors and status checks.
 * The transport conformance cases live in pathways-cts (tools/cts,
 * cts_transport.c), run on the loaded inproc module by ctest. */
#ifndef PW_TESTS_TRANSPORTS_TRANSPORT_CTS_H_
#define PW_TESTS_TRANSPORTS_TRANSPORT_CTS_H_

#include <criterion/criterion.h>
#include <stdatomic.h>

#include "pathways/pathways.h"
#include "pathways/transport.h"
#include "plugin/transport_call.h"
#include "support/test_allocators.h"

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

#endif /* PW_TESTS_TRANSPORTS_TRANSPORT_CTS_H_ */
