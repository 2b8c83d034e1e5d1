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

/* ---- the caller-memory rules, one per semantics (ASan checks them) ---- */

/* A larger array (256 KiB, f32[65536] split over the 4 devices) so that a
 * background copy spans many pages and takes a while. */
#define BIG 65536

static float* big_array(float base) {
  float* h = aligned_alloc(64, BIG * sizeof(float));
  cr_assert_not_null(h);
  for (int i = 0; i < BIG; ++i) h[i] = base + (float)i;
  return h;
}

static pw_array_spec_t big_spec(void) {
  int64_t dims[1] = {BIG};
  return pw_fixture_spec_f32(1, dims, pw_sharding_split(0, PW_MESH_AXIS_ALL));
}

static void expect_big(env_t* e, pw_buffer_t b, float base) {
  float* out = calloc(BIG, sizeof(float));
  cr_assert_not_null(out);
  OK(pw_buffer_to_host(e->f.client, b, out, BIG * sizeof(float), pw_clock_now() + DEADLINE_NS));
  for (int i = 0; i < BIG; ++i) {
    if (out[i] != base + (float)i) {
      cr_assert_fail("element %d is %g, want %g", i, (double)out[i], (double)(base + (float)i));
    }
  }
  free(out);
}

Test(host_async, copy_before_return_memory_overwritten_then_freed_at_return) {
  env_t e;
  env_init(&e);
  pw_array_spec_t spec = big_spec();
  pw_host_transfer_options_t o = options(PW_HOST_COPY_BEFORE_RETURN);
  /* from_host_async, with and without a host-done event, and NULL options. */
  for (int way = 0; way < 4; ++way) {
    float* h = big_array(10.0f * (float)way);
    pw_buffer_t b;
    pw_event_t* host_done = NULL;
    if (way == 0) {
      OK(pw_buffer_from_host_async(e.f.client, e.vs, &spec, h, BIG * 4, &o, &b, &host_done));
      cr_assert(pw_event_is_ready(host_done), "host-done complete at return");
      OK(pw_fixture_wait(host_done));
    } else if (way == 1) {
      OK(pw_buffer_from_host_async(e.f.client, e.vs, &spec, h, BIG * 4, NULL, &b, NULL));
    } else {
      /* create_empty + fill: copied before the fill returns. */
      OK(pw_buffer_create_empty(e.f.client, e.vs, &spec, &b));
      OK(pw_buffer_fill_from_host(e.f.client, b, h, BIG * 4, way == 2 ? &o : NULL,
                                  way == 2 ? &host_done : NULL));
      if (way == 2) {
        cr_assert(pw_event_is_ready(host_done));
        OK(pw_fixture_wait(host_done));
      }
    }
    /* Ready at return, and the caller's memory is its own again. */
    pw_event_t* ready = NULL;
    OK(pw_buffer_ready_event(e.f.client, b, &ready));
    cr_assert(pw_event_is_ready(ready), "way %d: ready at return", way);
    pw_event_release(ready);
    memset(h, 0xff, BIG * sizeof(float)); /* NaNs: a buffer still on |h| would show them */
    free(h);                              /* a later read of |h|: ASan fails the test */
    expect_big(&e, b, 10.0f * (float)way);
    OK(pw_buffer_release(e.f.client, b));
  }
  pw_fixture_deinit(&e.f);
}

Test(host_async, immutable_memory_freed_after_host_done_with_graphs_reading) {
  env_t e;
  env_init(&e);
  pw_array_spec_t spec = big_spec();
  const char* kCopyBig =
      "kernel copy\ninput f32[65536] split(0,all)\noutput f32[65536] split(0,all)\n";
  pw_executable_t copy;
  OK(pw_fixture_compile(&e.f, e.vs, kCopyBig, &copy));
  pw_graph_t g;
  OK(pw_graph_create(e.f.client, &g));
  uint32_t p, a;
  OK(pw_graph_add_parameter(e.f.client, g, e.vs, &spec, &p));
  pw_value_t in = pw_value(p, 0);
  OK(pw_graph_add_compute(e.f.client, g, "a", copy, e.vs, &in, 1, &a));
  OK(pw_graph_add_output(e.f.client, g, pw_value(a, 0)));
  pw_host_transfer_options_t o = options(PW_HOST_IMMUTABLE_UNTIL_TRANSFER_COMPLETES);
  for (int round = 0; round < 8; ++round) {
    float base = 1000.0f * (float)round;
    float* h = big_array(base);
    pw_buffer_t x, y;
    pw_event_t* host_done = NULL;
    if (round % 2 == 0) {
      OK(pw_buffer_from_host_async(e.f.client, e.vs, &spec, h, BIG * 4, &o, &x, &host_done));
    } else {
      OK(pw_buffer_create_empty(e.f.client, e.vs, &spec, &x));
      OK(pw_buffer_fill_from_host(e.f.client, x, h, BIG * 4, &o, &host_done));
    }
    /* A graph reads the buffer, submitted before the copy may be done; the
     * handle goes at once (the submission keeps the buffer). */
    pw_event_t* done = NULL;
    OK(pw_graph_submit(e.f.client, g, &x, 1, NULL, &y, 1, &done));
    OK(pw_buffer_release(e.f.client, x));
    OK(pw_fixture_wait(host_done));
    memset(h, 0xff, BIG * sizeof(float)); /* the runtime reads |h| no more */
    free(h);
    OK(pw_fixture_wait(done));
    expect_big(&e, y, base);
    OK(pw_buffer_release(e.f.client, y));
  }
  OK(pw_graph_release(e.f.client, g));
  pw_fixture_deinit(&e.f);
}

Test(host_async, zero_copy_reads_callers_memory_freed_after_release_and_work) {
  env_t e;
  env_init(&e);
  pw_host_transfer_options_t o = options(PW_HOST_ZERO_COPY);
  for (int way = 0; way < 2; ++way) {
    float* h = host_array();
    pw_buffer_t b, y;
    pw_event_t* host_done = NULL;
    if (way == 0) {
      OK(pw_buffer_from_host_async(e.f.client, e.vs, &e.spec, h, 32, &o, &b, &host_done));
    } else {
      OK(pw_buffer_create_empty(e.f.client, e.vs, &e.spec, &b));
      OK(pw_buffer_fill_from_host(e.f.client, b, h, 32, &o, &host_done));
    }
    /* The buffer is the caller's memory: a write shows through. */
    h[0] = 100.0f;
    float out[8];
    OK(pw_buffer_to_host(e.f.client, b, out, sizeof(out), pw_clock_now() + DEADLINE_NS));
    cr_assert_float_eq(out[0], 100.0f, 0, "way %d: adopted, not copied", way);
    h[0] = 1.0f;
    /* A graph and an asynchronous read still use it after the handle
     * goes: the memory stays the runtime's until both are done. */
    pw_event_t* done = NULL;
    OK(pw_graph_submit(e.f.client, e.g, &b, 1, NULL, &y, 1, &done));
    float* back = calloc(8, sizeof(float));
    pw_event_t* read = NULL;
    OK(pw_buffer_to_host_async(e.f.client, b, back, 32, &read));
    cr_assert_not(pw_event_is_ready(host_done), "way %d: host memory released while the "
                  "buffer has a handle", way);
    OK(pw_buffer_release(e.f.client, b));
    OK(pw_fixture_wait(host_done));
    /* Every user of the memory is done with it: NaNs written now reach
     * neither the graph's output nor the read, and any later access to
     * |h| by the runtime fails the test under ASan. */
    memset(h, 0xff, 32);
    free(h);
    OK(pw_fixture_wait(done));
    OK(pw_fixture_wait(read));
    for (int i = 0; i < 8; ++i) cr_assert_float_eq(back[i], (float)(i + 1), 0);
    free(back);
    expect_contents(&e, y);
    OK(pw_buffer_release(e.f.client, y));
  }
  pw_fixture_deinit(&e.f);
}

Test(host_async, zero_copy_memory_released_by_client_destroy) {
  env_t e;
  env_init(&e);
  float* h = host_array();
  pw_host_transfer_options_t o = options(PW_HOST_ZERO_COPY);
  pw_buffer_t b;
  pw_event_t* host_done = NULL;
  OK(pw_buffer_from_host_async(e.f.client, e.vs, &e.spec, h, 32, &o, &b, &host_done));
  expect_contents(&e, b);
  cr_assert_not(pw_event_is_ready(host_done));
  /* The handle is never released: the client's destroy lets the memory go. */
  pw_fixture_deinit(&e.f);
  cr_assert(pw_event_is_ready(host_done), "host-done pending after the client is gone");
  OK(pw_fixture_wait(host_done));
  free(h);
}
