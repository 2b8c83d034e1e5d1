/* Asynchronous host transfers (include/pathways/buffer.h): each
 * semantics' host-memory rule (under ASan, host memory freed right after
 * its host-done event is never read again), to_host events carrying the
 * producer's error, empty buffers as graph arguments filled after the
 * submission, release and destroy with fills pending, bad calls. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/checks.h"
#include "runtime/fixture.h"
#include "support/test_allocators.h"

TestSuite(host_async, .fini = pw_test_check_leaks);

#define DEADLINE_NS 10000000000LL

static const char* kCopy8 = "kernel copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n";

typedef struct env_t {
  pw_fixture_t f;
  pw_vslice_t vs;
  pw_executable_t copy;
  pw_array_spec_t spec; /* f32[8] split over the 4 devices */
  pw_graph_t g;         /* one parameter, copied to the output */
} env_t;

static void env_init(env_t* e) {
  memset(e, 0, sizeof(*e));
  OK(pw_fixture_init(&e->f, PW_FIXTURE_CPU, 1, "4", pw_allocator_system()));
  OK(pw_fixture_vslice(&e->f, "4", &e->vs));
  OK(pw_fixture_compile(&e->f, e->vs, kCopy8, &e->copy));
  int64_t dims[1] = {8};
  e->spec = pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
  OK(pw_graph_create(e->f.client, &e->g));
  uint32_t p, a;
  OK(pw_graph_add_parameter(e->f.client, e->g, e->vs, &e->spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(e->f.client, e->g, "a", e->copy, e->vs, &in, 1, &a));
  OK(pw_graph_add_output(e->f.client, e->g, pw_value(a, 0)));
}

static pw_host_transfer_options_t options(pw_host_semantics_t semantics) {
  pw_host_transfer_options_t o;
  pw_host_transfer_options_init(&o);
  o.semantics = semantics;
  return o;
}

static float* host_array(void) {
  float* h = aligned_alloc(64, 64); /* C11: the size a multiple of the alignment */
  cr_assert_not_null(h);
  for (int i = 0; i < 8; ++i) h[i] = (float)(i + 1);
  return h;
}

static void expect_contents(env_t* e, pw_buffer_t b) {
  float out[8] = {0};
  OK(pw_buffer_to_host(e->f.client, b, out, sizeof(out), pw_clock_now() + DEADLINE_NS));
  for (int i = 0; i < 8; ++i) cr_assert_float_eq(out[i], (float)(i + 1), 0, "element %d", i);
}

static pw_status_t wait_ready(env_t* e, pw_buffer_t b) {
  pw_event_t* ready = NULL;
  pw_status_t s = pw_buffer_ready_event(e->f.client, b, &ready);
  if (s != NULL) return s;
  return pw_fixture_wait(ready);
}

Test(host_async, copy_before_return_host_memory_free_at_return) {
  env_t e;
  env_init(&e);
  float* h = host_array();
  pw_host_transfer_options_t o = options(PW_HOST_COPY_BEFORE_RETURN);
  pw_buffer_t b;
  pw_event_t* host_done = NULL;
  OK(pw_buffer_from_host_async(e.f.client, e.vs, &e.spec, h, 32, &o, &b, &host_done));
  cr_assert(pw_event_is_ready(host_done));
  free(h); /* read after this: ASan fails the test */
  OK(pw_fixture_wait(host_done));
  OK(wait_ready(&e, b));
  expect_contents(&e, b);
  pw_fixture_deinit(&e.f);
}

Test(host_async, immutable_until_done_reads_only_until_the_event) {
  env_t e;
  env_init(&e);
  for (int round = 0; round < 20; ++round) {
    float* h = host_array();
    pw_host_transfer_options_t o = options(PW_HOST_IMMUTABLE_UNTIL_TRANSFER_COMPLETES);
    pw_buffer_t b;
    pw_event_t* host_done = NULL;
    OK(pw_buffer_from_host_async(e.f.client, e.vs, &e.spec, h, 32, &o, &b, &host_done));
    OK(pw_fixture_wait(host_done));
    free(h); /* the runtime must not read it from here on (ASan) */
    OK(wait_ready(&e, b));
    expect_contents(&e, b);
    OK(pw_buffer_release(e.f.client, b));
  }
  pw_fixture_deinit(&e.f);
}

Test(host_async, zero_copy_host_memory_held_until_the_buffer_goes) {
  env_t e;
  env_init(&e);
  float* h = host_array();
  pw_host_transfer_options_t o = options(PW_HOST_ZERO_COPY);
  pw_buffer_t b;
  pw_event_t* host_done = NULL;
  OK(pw_buffer_from_host_async(e.f.client, e.vs, &e.spec, h, 32, &o, &b, &host_done));
  OK(wait_ready(&e, b));
  /* Adopted, not copied: the device memory is the caller's. */
  h[3] = 40.0f;
  float out[8];
  OK(pw_buffer_to_host(e.f.client, b, out, sizeof(out), pw_clock_now() + DEADLINE_NS));
  cr_assert_float_eq(out[3], 40.0f, 0);
  h[3] = 4.0f;
  /* A graph reads it in place. */
  pw_buffer_t y;
  pw_event_t* done = NULL;
  OK(pw_graph_submit(e.f.client, e.g, &b, 1, NULL, &y, 1, &done));
  OK(pw_fixture_wait(done));
  expect_contents(&e, y);
  cr_assert_not(pw_event_is_ready(host_done), "host memory released while the buffer lives");
  OK(pw_buffer_release(e.f.client, b));
  OK(pw_fixture_wait(host_done));
  free(h);
  expect_contents(&e, y);
  pw_fixture_deinit(&e.f);
}

Test(host_async, zero_copy_falls_back_to_a_copy_for_strided_shards) {
  env_t e;
  env_init(&e);
  int64_t dims[2] = {2, 4};
  pw_array_spec_t spec = pw_fixture_spec_f32(2, dims, pw_sharding_split(1, PW_MESH_AXIS_ALL));
  float* h = host_array();
  pw_host_transfer_options_t o = options(PW_HOST_ZERO_COPY);
  pw_buffer_t b;
  pw_event_t* host_done = NULL;
  OK(pw_buffer_from_host_async(e.f.client, e.vs, &spec, h, 32, &o, &b, &host_done));
  /* Copied: the host memory is free while the buffer still lives. */
  OK(pw_fixture_wait(host_done));
  free(h);
  expect_contents(&e, b);
  /* Misaligned memory is copied too. */
  unsigned char* raw = malloc(33 + 16);
  float* odd = (float*)(void*)(raw + 4);
  for (int i = 0; i < 8; ++i) {
    float v = (float)(i + 1);
    memcpy(raw + 4 + 4 * i, &v, 4);
  }
  OK(pw_buffer_from_host_async(e.f.client, e.vs, &e.spec, odd, 32, &o, &b, &host_done));
  OK(pw_fixture_wait(host_done));
  free(raw);
  expect_contents(&e, b);
  pw_fixture_deinit(&e.f);
}

Test(host_async, to_host_async_copies_once_ready) {
  env_t e;
  env_init(&e);
  pw_buffer_t x, y;
  OK(pw_buffer_create_empty(e.f.client, e.vs, &e.spec, &x));
  pw_event_t* done = NULL;
  OK(pw_graph_submit(e.f.client, e.g, &x, 1, NULL, &y, 1, &done));
  float* out = calloc(8, sizeof(float));
  pw_event_t* read = NULL;
  OK(pw_buffer_to_host_async(e.f.client, y, out, 32, &read));
  /* Nothing can run before the fill. */
  cr_assert_not(pw_event_is_ready(done));
  cr_assert_not(pw_event_is_ready(read));
  float* h = host_array();
  pw_host_transfer_options_t o = options(PW_HOST_IMMUTABLE_UNTIL_TRANSFER_COMPLETES);
  pw_event_t* host_done = NULL;
  OK(pw_buffer_fill_from_host(e.f.client, x, h, 32, &o, &host_done));
  OK(pw_fixture_wait(host_done));
  free(h);
  OK(pw_fixture_wait(done));
  OK(pw_fixture_wait(read));
  for (int i = 0; i < 8; ++i) cr_assert_float_eq(out[i], (float)(i + 1), 0);
  free(out);
  pw_fixture_deinit(&e.f);
}

Test(host_async, to_host_async_carries_the_producers_error) {
  env_t e;
  env_init(&e);
  pw_buffer_t x, y;
  OK(pw_buffer_create_empty(e.f.client, e.vs, &e.spec, &x));
  pw_event_t* done = NULL;
  OK(pw_graph_submit(e.f.client, e.g, &x, 1, NULL, &y, 1, &done));
  float out[8];
  pw_event_t* read = NULL;
  OK(pw_buffer_to_host_async(e.f.client, y, out, sizeof(out), &read));
  /* The empty argument goes unfilled: the graph fails, and so the read. */
  OK(pw_buffer_release(e.f.client, x));
  FAILS(pw_fixture_wait(done), PW_STATUS_CANCELLED, "released before it was filled");
  pw_status_t s = pw_fixture_wait(read);
  cr_assert_eq(pw_status_code(s), PW_STATUS_CANCELLED, "%s", pw_status_message(s));
  cr_assert(strstr(pw_status_message(s), "pw_buffer_to_host_async") != NULL);
  cr_assert(strstr(pw_status_message(s), "created empty") != NULL, "%s", pw_status_message(s));
  pw_status_free(s);
  pw_fixture_deinit(&e.f);
}

Test(host_async, client_destroy_with_pending_fill_fails_dependents) {
  env_t e;
  env_init(&e);
  pw_buffer_t x, y;
  OK(pw_buffer_create_empty(e.f.client, e.vs, &e.spec, &x));
  pw_event_t* done = NULL;
  OK(pw_graph_submit(e.f.client, e.g, &x, 1, NULL, &y, 1, &done));
  pw_event_t* x_ready = NULL;
  OK(pw_buffer_ready_event(e.f.client, x, &x_ready));
  float out[8];
  pw_event_t* read = NULL;
  OK(pw_buffer_to_host_async(e.f.client, x, out, sizeof(out), &read));
  pw_fixture_deinit(&e.f); /* must not hang */
  FAILS(pw_fixture_wait(x_ready), PW_STATUS_CANCELLED, "was destroyed");
  FAILS(pw_fixture_wait(done), PW_STATUS_CANCELLED, "before it was filled");
  FAILS(pw_fixture_wait(read), PW_STATUS_CANCELLED, "before it was filled");
}

Test(host_async, runtime_destroy_with_transfers_in_flight) {
  env_t e;
  env_init(&e);
  float* h[16];
  pw_buffer_t b[16];
  pw_event_t* host_done[16];
  pw_host_transfer_options_t o = options(PW_HOST_IMMUTABLE_UNTIL_TRANSFER_COMPLETES);
  for (int i = 0; i < 16; ++i) {
    h[i] = host_array();
    OK(pw_buffer_from_host_async(e.f.client, e.vs, &e.spec, h[i], 32, &o, &b[i], &host_done[i]));
  }
  pw_fixture_deinit(&e.f); /* waits for the copies */
  for (int i = 0; i < 16; ++i) {
    cr_assert(pw_event_is_ready(host_done[i]));
    OK(pw_fixture_wait(host_done[i]));
    free(h[i]);
  }
}

Test(host_async, bad_calls) {
  env_t e;
  env_init(&e);
  float* h = host_array();
  pw_host_transfer_options_t o = options(PW_HOST_IMMUTABLE_UNTIL_TRANSFER_COMPLETES);
  pw_buffer_t b = {0}, x = {0};
  pw_event_t* ev = NULL;
  FAILS(pw_buffer_from_host_async(e.f.client, e.vs, &e.spec, h, 32, &o, &b, NULL),
        PW_STATUS_INVALID_ARGUMENT, "out_host_done is NULL");
  FAILS(pw_buffer_from_host_async(e.f.client, e.vs, &e.spec, h, 28, &o, &b, &ev),
        PW_STATUS_INVALID_ARGUMENT, "28 bytes given");
  cr_assert_null(ev);
  cr_assert_eq(b.id, 0);
  pw_host_transfer_options_t bad = o;
  bad.struct_size = 4;
  FAILS(pw_buffer_from_host_async(e.f.client, e.vs, &e.spec, h, 32, &bad, &b, &ev),
        PW_STATUS_INVALID_ARGUMENT, "struct_size");
  bad = o;
  bad.semantics = (pw_host_semantics_t)7;
  FAILS(pw_buffer_from_host_async(e.f.client, e.vs, &e.spec, h, 32, &bad, &b, &ev),
        PW_STATUS_INVALID_ARGUMENT, "unknown host semantics 7");
  OK(pw_buffer_create_empty(e.f.client, e.vs, &e.spec, &x));
  /* Wrong size: refused, still fillable. */
  FAILS(pw_buffer_fill_from_host(e.f.client, x, h, 16, &o, &ev), PW_STATUS_INVALID_ARGUMENT,
        "16 bytes given");
  OK(pw_buffer_fill_from_host(e.f.client, x, h, 32, NULL, NULL));
  FAILS(pw_buffer_fill_from_host(e.f.client, x, h, 32, NULL, NULL),
        PW_STATUS_FAILED_PRECONDITION, "filled already");
  expect_contents(&e, x);
  /* A submission's output, and a from_host buffer. */
  pw_buffer_t y;
  pw_event_t* done = NULL;
  OK(pw_graph_submit(e.f.client, e.g, &x, 1, NULL, &y, 1, &done));
  OK(pw_fixture_wait(done));
  FAILS(pw_buffer_fill_from_host(e.f.client, y, h, 32, NULL, NULL),
        PW_STATUS_FAILED_PRECONDITION, "not made by pw_buffer_create_empty");
  OK(pw_buffer_from_host(e.f.client, e.vs, &e.spec, h, 32, &b));
  FAILS(pw_buffer_fill_from_host(e.f.client, b, h, 32, NULL, NULL),
        PW_STATUS_FAILED_PRECONDITION, "filled already");
  /* Released handles, NULLs. */
  OK(pw_buffer_release(e.f.client, y));
  FAILS(pw_buffer_fill_from_host(e.f.client, y, h, 32, NULL, NULL), PW_STATUS_NOT_FOUND, "");
  float out[8];
  FAILS(pw_buffer_to_host_async(e.f.client, y, out, 32, &ev), PW_STATUS_NOT_FOUND, "");
  FAILS(pw_buffer_to_host_async(e.f.client, x, out, 31, &ev), PW_STATUS_INVALID_ARGUMENT,
        "31 bytes given");
  FAILS(pw_buffer_to_host_async(e.f.client, x, NULL, 32, &ev), PW_STATUS_INVALID_ARGUMENT,
        "NULL");
  FAILS(pw_buffer_to_host_async(e.f.client, x, out, 32, NULL), PW_STATUS_INVALID_ARGUMENT,
        "NULL");
  FAILS(pw_buffer_create_empty(e.f.client, e.vs, NULL, &b), PW_STATUS_INVALID_ARGUMENT, "NULL");
  FAILS(pw_buffer_fill_from_host(NULL, x, h, 32, NULL, NULL), PW_STATUS_INVALID_ARGUMENT,
        "NULL");
  free(h);
  pw_fixture_deinit(&e.f);
}
