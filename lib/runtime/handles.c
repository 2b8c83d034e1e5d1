#define _GNU_SOURCE /* sched_getcpu */
/* Checked handles: every id a client sees encodes
 *   bits 63..60  object kind
 *   bits 59..48  client tag
 *   bits 47..32  slot generation (bumped on release)
 *   bits 31..0   slot index + 1 (so 0 is never a valid id)
 * A lookup checks all four, so a released handle, a handle of another
 * client, or a buffer id passed as an executable is a clear error. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/objects.h"

#define PW_HANDLE_NONE UINT32_MAX

static const char* pw_handle_kind_name(pw_object_kind_t kind) {
  switch (kind) {
    case PW_OBJECT_VSLICE: return "virtual slice";
    case PW_OBJECT_EXECUTABLE: return "executable";
    case PW_OBJECT_BUFFER: return "buffer";
    case PW_OBJECT_GRAPH: return "graph";
  }
  return "object";
}

void pw__object_init(pw_object_t* object, pw_object_kind_t kind,
                     pw_runtime_t* runtime, void (*destroy)(pw_object_t*)) {
  pw_atomic_init_u32(&object->refs, 1);
  object->kind = kind;
  object->runtime = runtime;
  object->destroy = destroy;
}

void pw__object_retain(pw_object_t* object) {
  if (object) pw_atomic_fetch_add_u32(&object->refs, 1);
}

void pw__object_release(pw_object_t* object) {
  if (object == NULL) return;
  if (pw_atomic_fetch_sub_u32(&object->refs, 1) == 1) {
    pw_atomic_fence_acquire();
    object->destroy(object);
  }
}

void pw__handle_table_init(pw_handle_table_t* table) {
  memset(table, 0, sizeof(*table));
  pthread_mutex_init(&table->write_lock, NULL);
  table->free_head = PW_HANDLE_NONE;
}

/* ---- reader-striped lock ------------------------------------------------
 * A reader counts itself in its thread's stripe (a locked add on a line
 * no other thread of the first PW_HANDLE_STRIPES writes), then checks
 * |writer|; a writer sets |writer| (xchg), then waits until every stripe
 * reads 0. Both sides do a locked RMW, then load the other side's word,
 * so at least one sees the other: a reader that sees the writer backs out
 * and waits for it on |write_lock|; a writer waits for readers already
 * in. Readers' sections are a few loads and a retain. */

/* The stripe of the CPU the thread runs on (glibc reads it from the rseq
 * area: a few instructions): threads running at the same time are on
 * different CPUs, so they get different stripes however many threads come
 * and go. A thread that migrates just changes stripe; callers keep the
 * stripe they used (read lock, execution) to give back there. Without
 * sched_getcpu, threads are numbered in the order they first ask. */
uint32_t pw__thread_stripe(void) {
  int cpu = sched_getcpu();
  if (cpu >= 0) return (uint32_t)cpu % PW_THREAD_STRIPES;
  static pw_atomic_u32_t next_thread;
  static _Thread_local uint32_t stripe_plus_one;
  if (stripe_plus_one == 0) {
    stripe_plus_one = pw_atomic_fetch_add_u32(&next_thread, 1) % PW_THREAD_STRIPES + 1;
  }
  return stripe_plus_one - 1;
}

uint32_t pw__handle_read_lock(pw_handle_table_t* table) {
  uint32_t stripe = pw__thread_stripe();
  pw_atomic_u32_t* readers = &table->stripes[stripe].readers;
  for (;;) {
    pw_atomic_fetch_add_u32(readers, 1);
    if (pw_atomic_load_u32_seq_cst(&table->writer) == 0) return stripe;
    pw_atomic_fetch_sub_u32(readers, 1);
    pthread_mutex_lock(&table->write_lock); /* the writer holds it */
    pthread_mutex_unlock(&table->write_lock);
  }
}

void pw__handle_read_unlock(pw_handle_table_t* table, uint32_t stripe) {
  pw_atomic_fetch_sub_u32(&table->stripes[stripe].readers, 1);
}

void pw__handle_write_lock(pw_handle_table_t* table) {
  pthread_mutex_lock(&table->write_lock);
  pw_atomic_exchange_u32(&table->writer, 1);
  for (uint32_t i = 0; i < PW_HANDLE_STRIPES; ++i) {
    for (uint32_t spin = 0; pw_atomic_load_u32_seq_cst(&table->stripes[i].readers) != 0;
         ++spin) {
      if ((spin & 63) == 63) {
        sched_yield(); /* a reader was preempted inside its section */
      } else {
        pw_atomic_cpu_relax();
      }
    }
  }
}

void pw__handle_write_unlock(pw_handle_table_t* table) {
  pw_atomic_store_u32_release(&table->writer, 0);
  pthread_mutex_unlock(&table->write_lock);
}

void pw__handle_table_deinit(pw_handle_table_t* table, pw_allocator_t allocator) {
  /* Release in reverse creation order so that graphs go before the
   * executables and buffers they reference (they hold their own references
   * anyway; the order only makes destruction predictable). */
  for (uint32_t i = table->count; i-- > 0;) {
    pw_object_t* object = table->slots[i].object;
    table->slots[i].object = NULL;
    pw__object_release(object);
  }
  pw_allocator_free(allocator, table->slots,
                    table->capacity * sizeof(pw_handle_slot_t));
  pthread_mutex_destroy(&table->write_lock);
  memset(table, 0, sizeof(*table));
}

static uint64_t pw_handle_encode(pw_object_kind_t kind, uint32_t tag,
                                 uint32_t generation, uint32_t slot) {
  return ((uint64_t)kind << 60) | ((uint64_t)(tag & 0xFFF) << 48) |
         ((uint64_t)(generation & 0xFFFF) << 32) | (uint64_t)(slot + 1);
}

pw_status_t pw__handle_insert(pw_client_t* client, pw_object_t* object,
                              uint64_t* out_id) {
  pw_handle_table_t* table = &client->handles;
  pw_allocator_t allocator = client->runtime->allocator;
  pw__handle_write_lock(table);
  uint32_t slot;
  if (table->free_head != PW_HANDLE_NONE) {
    slot = table->free_head;
    table->free_head = table->slots[slot].next_free;
  } else {
    if (table->count == table->capacity) {
      uint32_t capacity = table->capacity ? table->capacity * 2 : 16;
      if (capacity > (1u << 30)) {
        pw__handle_write_unlock(table);
        pw__object_release(object);
        return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                              "client '%s' has too many live handles", client->name);
      }
      pw_handle_slot_t* slots = NULL;
      pw_status_t status = pw_allocator_malloc(
          allocator, capacity * sizeof(pw_handle_slot_t), 0, (void**)&slots);
      if (status != NULL) {
        pw__handle_write_unlock(table);
        pw__object_release(object);
        return status;
      }
      if (table->count) {
        memcpy(slots, table->slots, table->count * sizeof(pw_handle_slot_t));
      }
      pw_allocator_free(allocator, table->slots,
                        table->capacity * sizeof(pw_handle_slot_t));
      table->slots = slots;
      table->capacity = capacity;
    }
    slot = table->count++;
    table->slots[slot].generation = 1;
  }
  table->slots[slot].object = object;
  table->slots[slot].next_free = PW_HANDLE_NONE;
  table->live++;
  *out_id = pw_handle_encode(object->kind, client->tag,
                             table->slots[slot].generation, slot);
  pw__handle_write_unlock(table);
  return NULL;
}

/* Decodes |id| and checks it against |table|; the table lock is held. */
static pw_status_t pw_handle_resolve(pw_client_t* client, uint64_t id,
                                     pw_object_kind_t kind, const char* what,
                                     uint32_t* out_slot) {
  const char* kind_name = pw_handle_kind_name(kind);
  if (id == 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: null %s handle", what, kind_name);
  }
  pw_object_kind_t id_kind = (pw_object_kind_t)(id >> 60);
  uint32_t tag = (uint32_t)(id >> 48) & 0xFFF;
  uint32_t generation = (uint32_t)(id >> 32) & 0xFFFF;
  uint32_t slot = (uint32_t)id - 1;
  if (id_kind != kind) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: handle 0x%016llx is a %s handle, not a %s handle",
                          what, (unsigned long long)id,
                          pw_handle_kind_name(id_kind), kind_name);
  }
  if (tag != (client->tag & 0xFFF)) {
    return pw_status_make(PW_STATUS_PERMISSION_DENIED,
                          "%s: %s handle 0x%016llx belongs to another client, "
                          "not to '%s'",
                          what, kind_name, (unsigned long long)id, client->name);
  }
  pw_handle_table_t* table = &client->handles;
  if (slot >= table->count || table->slots[slot].object == NULL ||
      (table->slots[slot].generation & 0xFFFF) != generation) {
    return pw_status_make(PW_STATUS_NOT_FOUND,
                          "%s: %s handle 0x%016llx is unknown or was released",
                          what, kind_name, (unsigned long long)id);
  }
  *out_slot = slot;
  return NULL;
}

pw_status_t pw__handle_lookup(pw_client_t* client, uint64_t id,
                              pw_object_kind_t kind, const char* what,
                              pw_object_t** out_object) {
  *out_object = NULL;
  pw_handle_table_t* table = &client->handles;
  uint32_t stripe = pw__handle_read_lock(table);
  uint32_t slot;
  pw_status_t status = pw_handle_resolve(client, id, kind, what, &slot);
  if (status == NULL) {
    *out_object = table->slots[slot].object;
    pw__object_retain(*out_object);
  }
  pw__handle_read_unlock(table, stripe);
  return status;
}

pw_status_t pw__handle_peek(pw_client_t* client, uint64_t id, pw_object_kind_t kind,
                            const char* what, pw_object_t** out_object) {
  *out_object = NULL;
  uint32_t slot;
  PW_RETURN_IF_ERROR(pw_handle_resolve(client, id, kind, what, &slot));
  *out_object = client->handles.slots[slot].object;
  return NULL;
}

pw_status_t pw__handle_remove(pw_client_t* client, uint64_t id,
                              pw_object_kind_t kind, const char* what) {
  pw_handle_table_t* table = &client->handles;
  pw__handle_write_lock(table);
  uint32_t slot;
  pw_status_t status = pw_handle_resolve(client, id, kind, what, &slot);
  pw_object_t* object = NULL;
  if (status == NULL) {
    object = table->slots[slot].object;
    table->slots[slot].object = NULL;
    table->slots[slot].generation = (table->slots[slot].generation + 1) & 0xFFFF;
    if (table->slots[slot].generation == 0) table->slots[slot].generation = 1;
    table->slots[slot].next_free = table->free_head;
    table->free_head = slot;
    table->live--;
  }
  pw__handle_write_unlock(table);
  pw__object_release(object);
  return status;
}
