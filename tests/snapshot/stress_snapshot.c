/* Stress: several threads take snapshots while buffers are being produced
 * (each round: a buffer from host, a copy kernel over it, a take of the
 * kernel's output with a unique step, released at once), another thread
 * restores the latest snapshot and checks its contents, and the persist
 * thread writes through a dir store. Every step's state is a function of
 * the step, so any restored state is checked exactly. Runs under TSan and
 * ASan. Usage: stress_snapshot ROUNDS */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot/snap_fixture.h"

enum { THREADS = 3, ELEMS = 96 };

typedef struct shared_t {
  snap_world_t w;
  pw_vslice_t vs;
  pw_snapshotter_t* s;
  int rounds;
  atomic_int failures;
  atomic_int taken;
  atomic_int restored;
  atomic_bool done;
} shared_t;

typedef struct worker_t {
  shared_t* sh;
  int index;
} worker_t;

static const pw_array_spec_t spec = {PW_DTYPE_I32, {1, {ELEMS}}, PW_SHARDING_SPLIT_INIT(0, 0)};

static void fill_state(int32_t* v, uint64_t step) {
  for (int i = 0; i < ELEMS; ++i) v[i] = (int32_t)(step * 131 + (uint64_t)i);
}

static void fail(shared_t* sh, const char* what, pw_status_t st) {
  fprintf(stderr, "stress_snapshot: %s: %s\n", what, pw_status_message(st));
  pw_status_free(st);
  atomic_fetch_add(&sh->failures, 1);
}

static void* producer(void* arg) {
  worker_t* wk = arg;
  shared_t* sh = wk->sh;
  for (int r = 0; r < sh->rounds; ++r) {
    uint64_t step = (uint64_t)(wk->index + 1) * 1000000u + (uint64_t)r;
    int32_t v[ELEMS];
    fill_state(v, step);
    pw_buffer_t in, out;
    pw_status_t st = pw_buffer_from_host(sh->w.client, sh->vs, &spec, v, sizeof(v), &in);
    if (st != NULL) { fail(sh, "from_host", st); continue; }
    st = snap_produce(&sh->w, sh->vs, &spec, "copy", in, &out);
    pw_status_ignore(pw_buffer_release(sh->w.client, in));
    if (st != NULL) { fail(sh, "produce", st); continue; }
    pw_event_t* copied = NULL;
    st = pw_snapshot_take(sh->s, step, &out, NULL, 1, r % 3 == 0 ? &copied : NULL, NULL);
    pw_status_ignore(pw_buffer_release(sh->w.client, out));
    if (st != NULL && pw_status_code(st) == PW_STATUS_RESOURCE_EXHAUSTED) {
      pw_status_free(st); /* max_in_flight: back-pressure, not a failure */
      continue;
    }
    if (st != NULL) { fail(sh, "take", st); continue; }
    atomic_fetch_add(&sh->taken, 1);
    if (copied != NULL) {
      st = pw_event_wait(copied, PW_INFINITE_FUTURE);
      pw_event_release(copied);
      if (st != NULL) fail(sh, "copy", st);
    }
  }
  return NULL;
}

static void* restorer(void* arg) {
  shared_t* sh = arg;
  while (!atomic_load(&sh->done)) {
    uint64_t step;
    pw_status_t st = pw_snapshotter_latest_step(sh->s, &step);
    if (st != NULL) { pw_status_free(st); continue; }
    pw_buffer_t r;
    st = pw_snapshot_restore(sh->s, step, 0, sh->w.client, sh->vs, NULL, &r);
    /* Dropped from the ring between the two calls: fine. */
    if (st != NULL && pw_status_code(st) == PW_STATUS_NOT_FOUND) { pw_status_free(st); continue; }
    if (st != NULL) { fail(sh, "restore", st); continue; }
    int32_t got[ELEMS], want[ELEMS];
    st = pw_buffer_to_host(sh->w.client, r, got, sizeof(got), PW_INFINITE_FUTURE);
    pw_status_ignore(pw_buffer_release(sh->w.client, r));
    if (st != NULL) { fail(sh, "to_host", st); continue; }
    fill_state(want, step);
    if (memcmp(got, want, sizeof(got)) != 0) {
      fprintf(stderr, "stress_snapshot: step %llu restored wrong bytes\n", (unsigned long long)step);
      atomic_fetch_add(&sh->failures, 1);
    }
    atomic_fetch_add(&sh->restored, 1);
  }
  return NULL;
}

int main(int argc, char** argv) {
  static shared_t sh;
  sh.rounds = argc > 1 ? atoi(argv[1]) : 100;
  char dir[256];
  snap_tempdir(dir);
  pw_status_t st = snap_world_init(&sh.w, 2, 2);
  if (st == NULL) st = snap_vslice(&sh.w, 0, 1, &sh.vs);
  pw_snapshotter_options_t o;
  pw_snapshotter_options_init(&o);
  o.keep = 3;
  o.max_in_flight = 8;
  o.chunk_bytes = 4096;
  if (st == NULL) st = snap_dir_store(dir, &o.store);
  if (st == NULL) st = pw_snapshotter_create(sh.w.client, &o, &sh.s);
  if (st != NULL) {
    fprintf(stderr, "stress_snapshot: setup: %s\n", pw_status_message(st));
    return 1;
  }
  pthread_t threads[THREADS], restore_thread;
  worker_t workers[THREADS];
  for (int i = 0; i < THREADS; ++i) {
    workers[i] = (worker_t){&sh, i};
    pthread_create(&threads[i], NULL, producer, &workers[i]);
  }
  pthread_create(&restore_thread, NULL, restorer, &sh);
  for (int i = 0; i < THREADS; ++i) pthread_join(threads[i], NULL);
  st = pw_snapshotter_flush(sh.s, PW_INFINITE_FUTURE);
  if (st != NULL) fail(&sh, "flush", st);
  atomic_store(&sh.done, true);
  pthread_join(restore_thread, NULL);
  st = pw_snapshotter_destroy(sh.s);
  if (st != NULL) fail(&sh, "destroy", st);
  /* What was persisted loads back intact. */
  pw_snapshotter_options_init(&o);
  st = snap_dir_store(dir, &o.store);
  if (st == NULL) st = pw_snapshotter_create(sh.w.client, &o, &sh.s);
  uint64_t step = 0;
  if (st == NULL) st = pw_snapshotter_load_latest(sh.s, &step);
  if (st != NULL) fail(&sh, "load", st);
  pw_status_ignore(pw_snapshotter_destroy(sh.s));
  snap_world_deinit(&sh.w);
  snap_rmdir(dir);
  int failures = atomic_load(&sh.failures);
  printf("stress_snapshot: %d taken, %d restored, latest stored step %llu, %d failures\n",
         atomic_load(&sh.taken), atomic_load(&sh.restored), (unsigned long long)step, failures);
  return failures == 0 && atomic_load(&sh.taken) > 0 ? 0 : 1;
}
