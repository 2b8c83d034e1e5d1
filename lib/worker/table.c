#define _POSIX_C_SOURCE 200809L
/* The id tables of a session (controller-assigned ids -> memories and
 * executables) and the pins that keep an entry alive while an op uses it:
 * a FREE or UNLOAD of something in use takes the table's pin away, the
 * last op's unpin releases it. */
#include <string.h>

#include "plugin/backend_call.h"
#include "worker/worker_internal.h"

static size_t pw_worker_slot(uint64_t id, size_t capacity) {
  uint64_t h = id * 0x9E3779B97F4A7C15ull;
  return (size_t)(h >> 17) & (capacity - 1);
}

static bool pw_worker_table_grow(pw_worker_t* w, pw_worker_table_t* t) {
  size_t capacity = t->capacity ? t->capacity * 2 : 64;
  uint64_t* keys = NULL;
  void** values = NULL;
  pw_status_t s = pw_allocator_calloc_array(w->allocator, capacity, sizeof(uint64_t), 0,
                                            (void**)&keys);
  if (s == NULL) {
    s = pw_allocator_calloc_array(w->allocator, capacity, sizeof(void*), 0, (void**)&values);
  }
  if (s != NULL) {
    pw_status_free(s);
    pw_allocator_free(w->allocator, keys, capacity * sizeof(uint64_t));
    return false;
  }
  for (size_t i = 0; i < t->capacity; ++i) {
    if (t->keys[i] == 0) continue;
    size_t j = pw_worker_slot(t->keys[i], capacity);
    while (keys[j] != 0) j = (j + 1) & (capacity - 1);
    keys[j] = t->keys[i];
    values[j] = t->values[i];
  }
  pw__worker_table_free(w, t);
  t->keys = keys;
  t->values = values;
  t->capacity = capacity;
  return true;
}

bool pw__worker_table_put(pw_worker_t* w, pw_worker_table_t* t, uint64_t id, void* value) {
  if (id == 0) return false;
  if ((t->count + 1) * 2 > t->capacity) {
    size_t count = t->count;
    if (!pw_worker_table_grow(w, t)) return false;
    t->count = count;
  }
  size_t j = pw_worker_slot(id, t->capacity);
  while (t->keys[j] != 0) {
    if (t->keys[j] == id) return false;
    j = (j + 1) & (t->capacity - 1);
  }
  t->keys[j] = id;
  t->values[j] = value;
  t->count++;
  return true;
}

static size_t pw_worker_find(const pw_worker_table_t* t, uint64_t id) {
  if (id == 0 || t->capacity == 0) return SIZE_MAX;
  size_t j = pw_worker_slot(id, t->capacity);
  while (t->keys[j] != 0) {
    if (t->keys[j] == id) return j;
    j = (j + 1) & (t->capacity - 1);
  }
  return SIZE_MAX;
}

void* pw__worker_table_get(pw_worker_table_t* t, uint64_t id) {
  size_t j = pw_worker_find(t, id);
  return j == SIZE_MAX ? NULL : t->values[j];
}

/* Linear probing deletion by backward shift: no tombstones. */
static void* pw_worker_remove_at(pw_worker_table_t* t, size_t j) {
  void* value = t->values[j];
  size_t mask = t->capacity - 1;
  size_t hole = j;
  for (size_t k = (j + 1) & mask; t->keys[k] != 0; k = (k + 1) & mask) {
    size_t home = pw_worker_slot(t->keys[k], t->capacity);
    /* Move k into the hole unless its home lies cyclically in (hole, k]. */
    bool stays = hole <= k ? (home > hole && home <= k) : (home > hole || home <= k);
    if (!stays) {
      t->keys[hole] = t->keys[k];
      t->values[hole] = t->values[k];
      hole = k;
    }
  }
  t->keys[hole] = 0;
  t->values[hole] = NULL;
  t->count--;
  return value;
}

void* pw__worker_table_remove(pw_worker_table_t* t, uint64_t id) {
  size_t j = pw_worker_find(t, id);
  return j == SIZE_MAX ? NULL : pw_worker_remove_at(t, j);
}

void* pw__worker_table_pop(pw_worker_table_t* t) {
  for (size_t j = 0; j < t->capacity && t->count > 0; ++j) {
    if (t->keys[j] != 0) return pw_worker_remove_at(t, j);
  }
  return NULL;
}

void pw__worker_table_free(pw_worker_t* w, pw_worker_table_t* t) {
  pw_allocator_free(w->allocator, t->keys, t->capacity * sizeof(uint64_t));
  pw_allocator_free(w->allocator, t->values, t->capacity * sizeof(void*));
  memset(t, 0, sizeof(*t));
}

pw_status_t pw__worker_mem_pin(pw_worker_t* w, uint64_t id, pw_worker_mem_t** out_mem) {
  *out_mem = NULL;
  pthread_mutex_lock(&w->lock);
  pw_worker_mem_t* m = pw__worker_table_get(&w->mems, id);
  pw_status_t s = NULL;
  if (m == NULL) {
    s = pw_status_make(PW_STATUS_NOT_FOUND, "worker %s: memory %llu is not allocated", w->name,
                       (unsigned long long)id);
  } else if (m->failure != NULL) {
    s = pw_status_annotate(pw_status_clone(m->failure), "worker %s: memory %llu", w->name,
                           (unsigned long long)id);
  } else {
    m->pins++;
    *out_mem = m;
  }
  pthread_mutex_unlock(&w->lock);
  return s;
}

void pw__worker_mem_unpin(pw_worker_t* w, pw_worker_mem_t* mem) {
  if (mem == NULL) return;
  pthread_mutex_lock(&w->lock);
  bool last = --mem->pins == 0;
  pthread_mutex_unlock(&w->lock);
  if (!last) return;
  if (mem->memory != NULL) pw__backend_deallocate(&w->backend, mem->device, mem->memory);
  pw_status_free(mem->failure);
  pw_allocator_free(w->allocator, mem, sizeof(*mem));
}

pw_status_t pw__worker_exe_pin(pw_worker_t* w, uint64_t id, pw_worker_exe_t** out_exe) {
  *out_exe = NULL;
  pthread_mutex_lock(&w->lock);
  pw_worker_exe_t* e = pw__worker_table_get(&w->exes, id);
  if (e != NULL) e->pins++;
  pthread_mutex_unlock(&w->lock);
  if (e == NULL) {
    return pw_status_make(PW_STATUS_NOT_FOUND, "worker %s: executable %llu is not loaded",
                          w->name, (unsigned long long)id);
  }
  *out_exe = e;
  return NULL;
}

void pw__worker_exe_unpin(pw_worker_t* w, pw_worker_exe_t* exe) {
  if (exe == NULL) return;
  pthread_mutex_lock(&w->lock);
  bool last = --exe->pins == 0;
  pthread_mutex_unlock(&w->lock);
  if (!last) return;
  pw__backend_unload(&w->backend, exe->executable);
  pw_allocator_free(w->allocator, exe, sizeof(*exe));
}

void pw__worker_tables_clear(pw_worker_t* w) {
  for (;;) {
    pthread_mutex_lock(&w->lock);
    pw_worker_mem_t* m = pw__worker_table_pop(&w->mems);
    pthread_mutex_unlock(&w->lock);
    if (m == NULL) break;
    pw__worker_mem_unpin(w, m);
  }
  for (;;) {
    pthread_mutex_lock(&w->lock);
    pw_worker_exe_t* e = pw__worker_table_pop(&w->exes);
    pthread_mutex_unlock(&w->lock);
    if (e == NULL) break;
    pw__worker_exe_unpin(w, e);
  }
}
