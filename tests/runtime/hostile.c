/* Hostile plugins: see hostile.h. */
#include "runtime/hostile.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pathways/transports/inproc.h"

/* ---- two threads that deliver each completion at once ------------------- */

typedef struct delivery_t {
  void (*done)(void* user, pw_status_t status);
  void* user;
  pw_status_t status;
} delivery_t;

enum { kQueue = 4096, kLag = 32 };

typedef struct racer_t {
  pthread_t thread;
  delivery_t items[kQueue];
  size_t head, tail;
} racer_t;

static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  racer_t racers[2];
  bool running;
  bool stop;
  size_t busy; /* items taken and not delivered yet */
} g_race = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void* racer_main(void* arg) {
  racer_t* r = arg;
  pthread_mutex_lock(&g_race.lock);
  for (;;) {
    while (r->head == r->tail && !g_race.stop) pthread_cond_wait(&g_race.cond, &g_race.lock);
    if (r->head == r->tail) break;
    delivery_t item = r->items[r->head++ % kQueue];
    g_race.busy++;
    pthread_mutex_unlock(&g_race.lock);
    item.done(item.user, item.status);
    pthread_mutex_lock(&g_race.lock);
    g_race.busy--;
    pthread_cond_broadcast(&g_race.cond);
  }
  pthread_mutex_unlock(&g_race.lock);
  return NULL;
}

/* Queues |done| for both racers: the first gets |status|, the second OK. */
static void race(void (*done)(void*, pw_status_t), void* user, pw_status_t status) {
  pthread_mutex_lock(&g_race.lock);
  if (!g_race.running) {
    g_race.running = true;
    g_race.stop = false;
    for (int i = 0; i < 2; ++i) {
      g_race.racers[i].head = g_race.racers[i].tail = 0;
      pthread_create(&g_race.racers[i].thread, NULL, racer_main, &g_race.racers[i]);
    }
  }
  /* The two deliveries of one completion stay close in time: at most
   * kLag items queued per racer (a completion later than its token's 64
   * reuses would be taken for a newer launch's, by design). */
  while (g_race.racers[0].tail - g_race.racers[0].head >= kLag ||
         g_race.racers[1].tail - g_race.racers[1].head >= kLag) {
    pthread_cond_wait(&g_race.cond, &g_race.lock);
  }
  g_race.racers[0].items[g_race.racers[0].tail++ % kQueue] = (delivery_t){done, user, status};
  g_race.racers[1].items[g_race.racers[1].tail++ % kQueue] = (delivery_t){done, user, NULL};
  pthread_cond_broadcast(&g_race.cond);
  pthread_mutex_unlock(&g_race.lock);
}

void pw_hostile_quiesce(void) {
  pthread_mutex_lock(&g_race.lock);
  if (!g_race.running) {
    pthread_mutex_unlock(&g_race.lock);
    return;
  }
  g_race.stop = true;
  pthread_cond_broadcast(&g_race.cond);
  pthread_mutex_unlock(&g_race.lock);
  for (int i = 0; i < 2; ++i) pthread_join(g_race.racers[i].thread, NULL);
  pthread_mutex_lock(&g_race.lock);
  g_race.running = false;
  pthread_mutex_unlock(&g_race.lock);
}

/* ---- backend ------------------------------------------------------------- */

static pw_backend_vtable_t g_backend_vtable;
static pw_status_t (*g_inner_launch)(void* self, const pw_backend_launch_t* launch);
static _Atomic int g_backend_mode;
static atomic_llong g_backend_budget;

static bool take(_Atomic int* mode, atomic_llong* budget, int* out_mode) {
  *out_mode = atomic_load(mode);
  return *out_mode != PW_HOSTILE_OFF && atomic_fetch_sub(budget, 1) > 0;
}

static pw_status_t hostile_launch(void* self, const pw_backend_launch_t* l) {
  int mode;
  if (!take(&g_backend_mode, &g_backend_budget, &mode)) return g_inner_launch(self, l);
  switch (mode) {
    case PW_HOSTILE_DONE_TWICE:
      l->done(l->done_user, NULL);
      l->done(l->done_user, NULL);
      return NULL;
    case PW_HOSTILE_DONE_THEN_ERROR:
      l->done(l->done_user, pw_status_make(PW_STATUS_UNAVAILABLE, "hostile launch failed"));
      return pw_status_make(PW_STATUS_UNAVAILABLE, "hostile launch also returned an error");
    default:
      race(l->done, l->done_user, NULL);
      return NULL;
  }
}

/* A host launch misbehaves as a launch does: one done for the lane. */
static pw_status_t (*g_inner_launch_host)(void* self, const pw_backend_host_launch_t* launch);

static pw_status_t hostile_launch_host(void* self, const pw_backend_host_launch_t* l) {
  int mode;
  if (!take(&g_backend_mode, &g_backend_budget, &mode)) return g_inner_launch_host(self, l);
  switch (mode) {
    case PW_HOSTILE_DONE_TWICE:
      l->done(l->done_user, NULL);
      l->done(l->done_user, NULL);
      return NULL;
    case PW_HOSTILE_DONE_THEN_ERROR:
      l->done(l->done_user, pw_status_make(PW_STATUS_UNAVAILABLE, "hostile host launch failed"));
      return pw_status_make(PW_STATUS_UNAVAILABLE, "hostile host launch also returned an error");
    default:
      race(l->done, l->done_user, NULL);
      return NULL;
  }
}

void pw_hostile_backend_wrap(pw_backend_t inner, pw_backend_t* out) {
  g_backend_vtable = *inner.vtable;
  g_inner_launch = inner.vtable->launch;
  g_backend_vtable.launch = hostile_launch;
  if (inner.vtable->struct_size >= PW_BACKEND_VTABLE_SIZE_V4 &&
      inner.vtable->launch_host != NULL) {
    g_inner_launch_host = inner.vtable->launch_host;
    g_backend_vtable.launch_host = hostile_launch_host;
  }
  g_backend_vtable.name = "hostile";
  out->vtable = &g_backend_vtable;
  out->self = inner.self;
}

void pw_hostile_backend_arm(pw_hostile_mode_t mode, int64_t count) {
  atomic_store(&g_backend_budget, count);
  atomic_store(&g_backend_mode, (int)mode);
}

/* ---- transport ----------------------------------------------------------- */

static pw_transport_t g_inner_transport;
static _Atomic int g_transport_mode;
static atomic_llong g_transport_budget;

static void hostile_transport_destroy(void* self) {
  (void)self;
  g_inner_transport.vtable->destroy(g_inner_transport.self);
}

static void capture(void* user, pw_status_t status) { *(pw_status_t*)user = status; }

/* Makes |copy| through inproc (which completes inline), returning its
 * completion status instead of delivering it. */
static pw_status_t copy_now(const pw_transport_copy_t* copy) {
  pw_status_t result = NULL;
  pw_transport_copy_t c = *copy;
  c.done = capture;
  c.done_user = &result;
  pw_status_t status = g_inner_transport.vtable->copy(g_inner_transport.self, &c);
  return status != NULL ? status : result;
}

static pw_status_t hostile_copy(void* self, const pw_transport_copy_t* copy) {
  (void)self;
  int mode;
  if (!take(&g_transport_mode, &g_transport_budget, &mode)) {
    return g_inner_transport.vtable->copy(g_inner_transport.self, copy);
  }
  switch (mode) {
    case PW_HOSTILE_DONE_TWICE:
      copy->done(copy->done_user, copy_now(copy));
      copy->done(copy->done_user, NULL);
      return NULL;
    case PW_HOSTILE_DONE_THEN_ERROR:
      copy->done(copy->done_user, pw_status_make(PW_STATUS_UNAVAILABLE, "hostile copy failed"));
      return pw_status_make(PW_STATUS_UNAVAILABLE, "hostile copy also returned an error");
    default:
      race(copy->done, copy->done_user, copy_now(copy));
      return NULL;
  }
}

static const pw_transport_vtable_t g_transport_vtable = {
    .struct_size = sizeof(pw_transport_vtable_t),
    .name = "hostile-transport",
    .version = 1,
    .destroy = hostile_transport_destroy,
    .copy = hostile_copy,
};

pw_status_t pw_hostile_transport_create(pw_transport_t* out) {
  PW_RETURN_IF_ERROR(pw_inproc_transport_create(NULL, &g_inner_transport));
  out->vtable = &g_transport_vtable;
  out->self = &g_inner_transport;
  return NULL;
}

void pw_hostile_transport_arm(pw_hostile_mode_t mode, int64_t count) {
  atomic_store(&g_transport_budget, count);
  atomic_store(&g_transport_mode, (int)mode);
}
