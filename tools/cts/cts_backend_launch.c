/* CTS cases: the launch contract. If launch fails, done never runs;
 * otherwise done runs exactly once, inline or from another thread; many
 * launches may be in flight from many threads; done may launch again. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, strnlen */
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "cts_backend.h"

/* Checks the outputs of a copy gang against its inputs (seed |seed|). */
static void pw_cts_check_copy(const pw_backend_t* b, const pw_cts_gang_t* gang,
                              uint32_t elements, uint32_t seed) {
  float out[64];
  PW_CTS_ASSERT_LEQ(elements, 64);
  for (uint32_t m = 0; m < gang->size; ++m) {
    pw_cts_gang_read(b, gang, m, out);
    for (uint32_t i = 0; i < elements; ++i) {
      PW_CTS_ASSERT_EQ(out[i], pw_cts_value(seed, m, i),
                   "copy: mesh position %u (device %u) element %u is %g, expected %g", m,
                   gang->devices[m], i, (double)out[i], (double)pw_cts_value(seed, m, i));
    }
  }
}

/* Runs one copy gang on |mesh| over |devices| and checks it. */
static void pw_cts_copy_on_mesh(const pw_cts_fixture_t* f, const pw_backend_t* b,
                                pw_mesh_shape_t mesh, const uint32_t* devices, bool reverse,
                                uint64_t gang_id) {
  pw_cts_run_gang(b, f->copy_program, mesh, devices, reverse, gang_id, "copy gang",
                  pw_cts_check_copy);
}

void pw_cts_case_launch_copy(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t devices[8];
  uint32_t n = 0;
  pw_mesh_shape_t mesh = pw_cts_mesh(&b, devices, &n);
  pw_cts_copy_on_mesh(f, &b, mesh, devices, false, 1);
  pw_cts_copy_on_mesh(f, &b, mesh, devices, true, 2);
  if (n >= 4 && n % 2 == 0) {
    uint32_t dims[2] = {2, n / 2};
    pw_cts_copy_on_mesh(f, &b, pw_mesh_shape_make(2, dims), devices, false, 3);
  }
  /* Each device on its own as a one-device gang. */
  uint32_t one = 1;
  for (uint32_t d = 0; d < pw_cts_backend_device_count(&b) && d < 8; ++d) {
    pw_cts_copy_on_mesh(f, &b, pw_mesh_shape_make(1, &one), &d, false, 10 + d);
  }
  pw_cts_destroy(&b);
}

void pw_cts_case_launch_rejects_bad_args(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t count = pw_cts_backend_device_count(&b);
  uint32_t one = 1;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &one);
  const uint32_t elements = 16;
  const size_t bytes = elements * sizeof(float);
  pw_backend_executable_t e = pw_cts_load(&b, f->copy_program, &mesh, elements, 1, 1);
  pw_backend_memory_t in = NULL;
  pw_backend_memory_t out = NULL;
  pw_backend_memory_t small = NULL;
  pw_backend_memory_t elsewhere = NULL;
  PW_CTS_OK(pw_cts_backend_allocate(&b, 0, bytes, &in));
  PW_CTS_OK(pw_cts_backend_allocate(&b, 0, bytes, &out));
  PW_CTS_OK(pw_cts_backend_allocate(&b, 0, bytes / 2, &small));
  if (count >= 2) PW_CTS_OK(pw_cts_backend_allocate(&b, 1, bytes, &elsewhere));
  enum { kCases = 8 };
  pw_cts_tracker_t tracker;
  pw_cts_tracker_init(&tracker, kCases + 1);
  uint32_t bad_device = count;
  uint32_t device0 = 0;
  uint32_t two[2] = {0, count >= 2 ? 1 : 0};
  for (int k = 0; k < kCases; ++k) {
    pw_backend_launch_t l;
    memset(&l, 0, sizeof(l));
    l.struct_size = sizeof(l);
    l.executable = e;
    l.device = 0;
    l.mesh_index = 0;
    l.group_devices = &device0;
    l.group_size = 1;
    l.gang_id = 100 + (uint64_t)k;
    l.inputs = &in;
    l.input_count = 1;
    l.outputs = &out;
    l.output_count = 1;
    l.done = pw_cts_done;
    l.done_user = &tracker.slots[k];
    const char* what = "";
    switch (k) {
      case 0: l.device = bad_device; l.group_devices = &bad_device; what = "device out of range"; break;
      case 1: l.executable = NULL; what = "no executable"; break;
      case 2: l.inputs = NULL; l.input_count = 0; what = "missing input"; break;
      case 3: l.outputs = &small; what = "output too small"; break;
      case 4: l.mesh_index = 1; what = "mesh index out of range"; break;
      case 5: l.group_devices = two; l.group_size = 2; what = "gang larger than the mesh"; break;
      case 6:
        if (elsewhere == NULL) continue;
        l.inputs = &elsewhere;
        what = "input on another device";
        break;
      case 7: l.output_count = 2; what = "too many outputs"; break;
    }
    pw_status_t status = pw_cts_backend_launch(&b, &l);
    pw_cts_assert_error(status,
                        (const pw_status_code_t[]){PW_STATUS_INVALID_ARGUMENT,
                                                   PW_STATUS_OUT_OF_RANGE, PW_STATUS_NOT_FOUND},
                        3, what);
  }
  /* A good launch still works and completes once. */
  pw_backend_launch_t good;
  memset(&good, 0, sizeof(good));
  good.struct_size = sizeof(good);
  good.executable = e;
  good.group_devices = &device0;
  good.group_size = 1;
  good.gang_id = 200;
  good.inputs = &in;
  good.input_count = 1;
  good.outputs = &out;
  good.output_count = 1;
  good.done = pw_cts_done;
  good.done_user = &tracker.slots[kCases];
  PW_CTS_OK(pw_cts_backend_launch(&b, &good));
  pw_cts_tracker_wait(&tracker, 1, "good launch after refused ones");
  pw_cts_backend_deallocate(&b, 0, in);
  pw_cts_backend_deallocate(&b, 0, out);
  pw_cts_backend_deallocate(&b, 0, small);
  if (elsewhere != NULL) pw_cts_backend_deallocate(&b, 1, elsewhere);
  pw_cts_backend_unload(&b, e);
  /* Destroy joins any backend thread: a late done call shows up now. */
  pw_cts_destroy(&b);
  for (int k = 0; k < kCases; ++k) pw_cts_tracker_expect_calls(&tracker, (size_t)k, 0);
  pw_cts_tracker_expect_calls(&tracker, kCases, 1);
  pw_cts_tracker_free(&tracker);
}

enum { kConcurrentThreads = 4, kConcurrentGangs = 12 };

typedef struct pw_cts_launcher_t {
  const pw_backend_t* backend;
  pw_backend_executable_t executable;
  pw_cts_gang_t* gangs;
  pw_cts_tracker_t* tracker;
  uint32_t thread;
  _Atomic uint32_t* start;
  uint32_t failures;
  /* Queue-ordered backends: gangs this thread may have in flight (0: no
   * limit), and a lock serialising whole gangs when the depth is below the
   * thread count. */
  uint32_t window;
  pthread_mutex_t* serial;
} pw_cts_launcher_t;

static void* pw_cts_launcher_main(void* arg) {
  pw_cts_launcher_t* l = arg;
  /* Start together to maximise overlap; spinning is a start line, not a
   * synchronisation of results. */
  atomic_fetch_add(l->start, 1);
  while (atomic_load(l->start) < kConcurrentThreads) {
  }
  for (uint32_t g = 0; g < kConcurrentGangs; ++g) {
    pw_cts_gang_t* gang = &l->gangs[g];
    size_t first = (size_t)g * gang->size;
    if (l->window > 0 && g >= l->window) {
      pw_cts_tracker_wait_slots(l->tracker, (size_t)(g - l->window) * gang->size, gang->size,
                                "concurrent launches within the queue depth");
    }
    if (l->serial != NULL) pthread_mutex_lock(l->serial);
    l->failures += pw_cts_gang_launch_try(l->backend, gang, l->executable,
                                          1000u * (l->thread + 1) + g, l->tracker, first,
                                          g % 2 == 1);
    if (l->serial != NULL) {
      pw_cts_tracker_wait_slots(l->tracker, first, gang->size, "serialised gang");
      pthread_mutex_unlock(l->serial);
    }
  }
  return NULL;
}

void pw_cts_case_launch_concurrent(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t devices[8];
  uint32_t n = 0;
  pw_mesh_shape_t mesh = pw_cts_mesh(&b, devices, &n);
  const uint32_t elements = 8;
  pw_backend_executable_t e = pw_cts_load(&b, f->copy_program, &mesh, elements, 1, 1);
  pw_cts_launcher_t launchers[kConcurrentThreads];
  pw_cts_tracker_t trackers[kConcurrentThreads];
  pthread_t threads[kConcurrentThreads];
  _Atomic uint32_t start = 0;
  /* A queue-ordered backend holds at most |depth| launches per device:
   * each thread keeps its share in flight (every gang spans every device). */
  uint32_t depth = pw_cts_queue_depth(&b);
  pthread_mutex_t serial;
  pthread_mutex_init(&serial, NULL);
  uint32_t window = depth / kConcurrentThreads;
  bool serialise = depth > 0 && window == 0;
  for (uint32_t t = 0; t < kConcurrentThreads; ++t) {
    pw_cts_tracker_init(&trackers[t], (size_t)kConcurrentGangs * n);
    launchers[t] = (pw_cts_launcher_t){&b, e, calloc(kConcurrentGangs, sizeof(pw_cts_gang_t)),
                                       &trackers[t], t, &start, 0, window,
                                       serialise ? &serial : NULL};
    PW_CTS_ASSERT_NOT_NULL(launchers[t].gangs);
    for (uint32_t g = 0; g < kConcurrentGangs; ++g) {
      pw_cts_gang_alloc(&b, &launchers[t].gangs[g], n, devices, elements, t * 100 + g);
    }
  }
  for (uint32_t t = 0; t < kConcurrentThreads; ++t) {
    PW_CTS_ASSERT_EQ(pthread_create(&threads[t], NULL, pw_cts_launcher_main, &launchers[t]), 0);
  }
  for (uint32_t t = 0; t < kConcurrentThreads; ++t) pthread_join(threads[t], NULL);
  for (uint32_t t = 0; t < kConcurrentThreads; ++t) {
    PW_CTS_ASSERT_EQ(launchers[t].failures, 0, "thread %u: %u launches failed", t,
                 launchers[t].failures);
    pw_cts_tracker_wait(&trackers[t], (size_t)kConcurrentGangs * n, "concurrent launches");
    for (uint32_t g = 0; g < kConcurrentGangs; ++g) {
      pw_cts_check_copy(&b, &launchers[t].gangs[g], elements, t * 100 + g);
      pw_cts_gang_free(&b, &launchers[t].gangs[g]);
    }
  }
  pw_cts_backend_unload(&b, e);
  pw_cts_destroy(&b);
  pthread_mutex_destroy(&serial);
  for (uint32_t t = 0; t < kConcurrentThreads; ++t) {
    for (size_t i = 0; i < trackers[t].count; ++i) {
      pw_cts_tracker_expect_calls(&trackers[t], i, 1);
      PW_CTS_ASSERT_EQ(atomic_load(&trackers[t].slots[i].code), PW_STATUS_OK);
    }
    pw_cts_tracker_free(&trackers[t]);
    free(launchers[t].gangs);
  }
}

/* launch_from_done: every completion launches the next step of a chain,
 * from inside done (as the runtime's dispatcher does). */
enum { kChainLength = 48 };

typedef struct pw_cts_chain_t {
  const pw_backend_t* backend;
  pw_cts_tracker_t tracker;
  pw_cts_gang_t gangs[kChainLength];
  pw_backend_executable_t executable;
  _Atomic uint32_t failures;
} pw_cts_chain_t;

static void pw_cts_chain_next(pw_cts_slot_t* slot) {
  pw_cts_chain_t* chain = slot->user;
  size_t step = (size_t)(slot - chain->tracker.slots) + 1;
  if (step >= kChainLength) return;
  if (pw_cts_gang_launch_try(chain->backend, &chain->gangs[step], chain->executable,
                             5000 + step, &chain->tracker, step, false) != 0) {
    atomic_fetch_add(&chain->failures, 1);
  }
}

void pw_cts_case_launch_from_done(const pw_cts_fixture_t* f) {
  pw_backend_t b;
  pw_cts_create(f, NULL, &b);
  uint32_t count = pw_cts_backend_device_count(&b);
  uint32_t one = 1;
  pw_mesh_shape_t mesh = pw_mesh_shape_make(1, &one);
  const uint32_t elements = 4;
  pw_cts_chain_t* chain = calloc(1, sizeof(*chain));
  PW_CTS_ASSERT_NOT_NULL(chain);
  chain->backend = &b;
  chain->executable = pw_cts_load(&b, f->copy_program, &mesh, elements, 1, 1);
  pw_cts_tracker_init(&chain->tracker, kChainLength);
  for (uint32_t s = 0; s < kChainLength; ++s) {
    uint32_t device = s % (count < 8 ? count : 8);
    pw_cts_gang_alloc(&b, &chain->gangs[s], 1, &device, elements, s);
    chain->tracker.slots[s].then = pw_cts_chain_next;
    chain->tracker.slots[s].user = chain;
  }
  pw_cts_gang_launch(&b, &chain->gangs[0], chain->executable, 5000, &chain->tracker, 0, false);
  pw_cts_tracker_wait(&chain->tracker, kChainLength, "launch chain from done callbacks");
  PW_CTS_ASSERT_EQ(atomic_load(&chain->failures), 0, "a launch from inside done failed");
  for (uint32_t s = 0; s < kChainLength; ++s) {
    PW_CTS_ASSERT_EQ(atomic_load(&chain->tracker.slots[s].code), PW_STATUS_OK, "step %u", s);
    pw_cts_check_copy(&b, &chain->gangs[s], elements, s);
    pw_cts_gang_free(&b, &chain->gangs[s]);
  }
  pw_cts_backend_unload(&b, chain->executable);
  pw_cts_destroy(&b);
  for (uint32_t s = 0; s < kChainLength; ++s) pw_cts_tracker_expect_calls(&chain->tracker, s, 1);
  pw_cts_tracker_free(&chain->tracker);
  free(chain);
}
