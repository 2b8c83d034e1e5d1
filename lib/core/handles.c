#define _GNU_SOURCE /* sched_getcpu */
/* Checked handles: every id a client sees encodes
 *   bits 63..60  object kind (1..4)
 *   bits 59..50  runtime salt (1..1023): distinct for every runtime of the
 *                process that holds clients at the same time
 *   bits 49..38  client tag (1..4095): distinct for every live client of
 *                its runtime
 *   bits 37..22  slot generation (1..65535, bumped on release)
 *   bits 21..0   slot index + 1 (so 0 is never a valid id)
 * A resolve checks the kind bits, the salt and tag (together, the owner:
 * one compare), the slot and generation, and then the kind and runtime of
 * the object the slot holds, so a released handle (NOT_FOUND), a handle of
 * another client or another runtime (PERMISSION_DENIED), a buffer id
 * passed as an executable or an id with altered kind bits
 * (INVALID_ARGUMENT) is a clear error, never another object.
 * No counter wraps into a live handle: a slot whose generation would wrap
 * is retired (never reused; 16 bytes per 65,535 releases of one slot), a
 * client tag or runtime salt still in use is skipped, and a new one is
 * refused (RESOURCE_EXHAUSTED) only when all are in use. Tags and salts
 * are taken round-robin, so a destroyed owner's are reused as late as
 * possible. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "core/client.h"
#include "core/objects.h"

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
    if (object != NULL && object->kind == PW_OBJECT_BUFFER) {
      pw__buffer_unhandled((pw_buffer_obj_t*)object, "its client was destroyed");
    }
    pw__object_release(object);
  }
  pw_allocator_free(allocator, table->slots,
                    table->capacity * sizeof(pw_handle_slot_t));
  pthread_mutex_destroy(&table->write_lock);
  memset(table, 0, sizeof(*table));
}

/* ---- owners: runtime salts and client tags ------------------------------ */

/* The salts of the process's runtimes that hold clients (bit s). The one
 * state runtimes share: without it, two runtimes' first clients would
 * issue the same ids, and one's handle would resolve in the other. Taken
 * on cold paths only (a runtime's first client, a runtime's end). */
static pthread_mutex_t pw_handle_salts_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t pw_handle_salts[PW_HANDLE_SALTS_MAX / 64 + 1];
static uint32_t pw_handle_next_salt = 1;

/* The first clear bit of |bits| from |*cursor| on, round-robin over
 * 1..|max| (0 is never used), set and returned; the cursor moves past it.
 * 0 when every bit is set. */
static uint32_t pw_handle_bit_take(uint64_t* bits, uint32_t* cursor, uint32_t max) {
  uint32_t at = *cursor >= 1 && *cursor <= max ? *cursor : 1;
  for (uint32_t n = 0; n < max; ++n, at = at % max + 1) {
    uint64_t bit = UINT64_C(1) << (at % 64);
    if ((bits[at / 64] & bit) == 0) {
      bits[at / 64] |= bit;
      *cursor = at % max + 1;
      return at;
    }
  }
  return 0;
}

pw_status_t pw__handle_owner_take(pw_client_t* client) {
  pw_runtime_t* runtime = client->runtime;
  if (runtime->handle_salt == 0) {
    pthread_mutex_lock(&pw_handle_salts_lock);
    runtime->handle_salt =
        pw_handle_bit_take(pw_handle_salts, &pw_handle_next_salt, PW_HANDLE_SALTS_MAX);
    pthread_mutex_unlock(&pw_handle_salts_lock);
    if (runtime->handle_salt == 0) {
      return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                            "pw_client_create: %u other runtimes of this process that have "
                            "had clients still exist (the most whose handles can be told "
                            "apart)",
                            PW_HANDLE_SALTS_MAX);
    }
  }
  uint32_t tag = pw_handle_bit_take(runtime->live_client_tags, &runtime->next_client_tag,
                                    PW_HANDLE_TAGS_MAX);
  if (tag == 0) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "pw_client_create: the runtime already has %u live clients "
                          "(every client tag is in use)",
                          PW_HANDLE_TAGS_MAX);
  }
  client->tag = tag;
  client->handle_owner = runtime->handle_salt << PW_HANDLE_TAG_BITS | tag;
  return NULL;
}

void pw__handle_owner_give(pw_client_t* client) {
  uint32_t tag = client->tag;
  if (tag == 0 || tag > PW_HANDLE_TAGS_MAX) return;
  /* client->tag stays: threads finishing the client's last executions may
   * still read it (the scheduler's candidates). */
  client->runtime->live_client_tags[tag / 64] &= ~(UINT64_C(1) << (tag % 64));
}

void pw__handle_salt_give(pw_runtime_t* runtime) {
  uint32_t salt = runtime->handle_salt;
  if (salt == 0 || salt > PW_HANDLE_SALTS_MAX) return;
  pthread_mutex_lock(&pw_handle_salts_lock);
  pw_handle_salts[salt / 64] &= ~(UINT64_C(1) << (salt % 64));
  pthread_mutex_unlock(&pw_handle_salts_lock);
  runtime->handle_salt = 0;
}

/* ---- ids ---------------------------------------------------------------- */

static uint64_t pw_handle_encode(pw_object_kind_t kind, uint32_t owner,
                                 uint32_t generation, uint32_t slot) {
  return ((uint64_t)kind << PW_HANDLE_KIND_SHIFT) |
         ((uint64_t)owner << PW_HANDLE_OWNER_SHIFT) |
         ((uint64_t)generation << PW_HANDLE_GENERATION_SHIFT) | (uint64_t)(slot + 1);
}

pw_status_t pw__handle_insert(pw_client_t* client, pw_object_t* object,
                              uint64_t* out_id) {
  pw_handle_table_t* table = &client->handles;
  pw_allocator_t allocator = client->runtime->allocator;
  if (object->runtime != client->runtime) { /* a bug of the caller: never store it */
    pw__object_release(object);
    return pw_status_make(PW_STATUS_INTERNAL,
                          "client '%s': a %s of another runtime cannot get a handle here",
                          client->name, pw_handle_kind_name(object->kind));
  }
  pw__handle_write_lock(table);
  uint32_t slot = 0;
  if (table->free_head != PW_HANDLE_NONE) {
    slot = table->free_head;
    table->free_head = table->slots[slot].next_free;
  } else {
    if (table->count == table->capacity) {
      uint32_t capacity = table->capacity ? table->capacity * 2 : 16;
      if (capacity > PW_HANDLE_SLOTS_MAX) capacity = PW_HANDLE_SLOTS_MAX;
      if (table->count == capacity) {
        pw__handle_write_unlock(table);
        pw__object_release(object);
        return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                              "client '%s' has too many handles (%u slots, live or retired)",
                              client->name, table->count);
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
  *out_id = pw_handle_encode(object->kind, client->handle_owner,
                             table->slots[slot].generation, slot);
  pw__handle_write_unlock(table);
  return NULL;
}

/* Why |id| does not resolve as a |kind| handle of |client| (the table
 * lock is held): the checks of pw_handle_resolve again, one at a time, in
 * the order that gives the most useful message. Off the hot path. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline, cold))
#endif
static pw_status_t pw_handle_refuse(pw_client_t* client, uint64_t id, pw_object_kind_t kind,
                                    const char* what) {
  const char* kind_name = pw_handle_kind_name(kind);
  unsigned long long hex = (unsigned long long)id;
  if (id == 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: null %s handle", what, kind_name);
  }
  pw_object_kind_t id_kind = (pw_object_kind_t)(id >> PW_HANDLE_KIND_SHIFT);
  if (id_kind != kind) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: handle 0x%016llx is a %s handle, not a %s handle", what, hex,
                          pw_handle_kind_name(id_kind), kind_name);
  }
  uint32_t owner = (uint32_t)(id >> PW_HANDLE_OWNER_SHIFT) & PW_HANDLE_OWNER_MASK;
  if (owner >> PW_HANDLE_TAG_BITS != client->handle_owner >> PW_HANDLE_TAG_BITS) {
    return pw_status_make(PW_STATUS_PERMISSION_DENIED,
                          "%s: %s handle 0x%016llx belongs to another runtime, not to the "
                          "runtime of client '%s'",
                          what, kind_name, hex, client->name);
  }
  if (owner != client->handle_owner) {
    return pw_status_make(PW_STATUS_PERMISSION_DENIED,
                          "%s: %s handle 0x%016llx belongs to another client, not to '%s'",
                          what, kind_name, hex, client->name);
  }
  pw_handle_table_t* table = &client->handles;
  uint32_t generation = (uint32_t)(id >> PW_HANDLE_GENERATION_SHIFT) & PW_HANDLE_GENERATION_MAX;
  uint32_t slot = ((uint32_t)id & PW_HANDLE_SLOT_MASK) - 1;
  pw_object_t* object = slot < table->count ? table->slots[slot].object : NULL;
  if (object == NULL || table->slots[slot].generation != generation) {
    return pw_status_make(PW_STATUS_NOT_FOUND, "%s: %s handle 0x%016llx is unknown or was released",
                          what, kind_name, hex);
  }
  /* The id's kind bits are only bits: a forged id that keeps a live
   * handle's owner, slot and generation but claims another kind names the
   * object of the slot, which is refused. */
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                        "%s: handle 0x%016llx claims to be a %s handle but names %s %s in its "
                        "slot (a forged or corrupted id)",
                        what, hex, kind_name,
                        object->runtime != client->runtime ? "another runtime's" : "the",
                        pw_handle_kind_name(object->kind));
}

/* Resolves |id| as a |kind| handle of |client| (the table lock is held).
 * The hot path (several per submission): the id's kind, owner, slot and
 * generation, then the kind and runtime of the object the slot holds,
 * all compared before any message is thought of. */
static inline pw_status_t pw_handle_resolve(pw_client_t* client, uint64_t id,
                                            pw_object_kind_t kind, const char* what,
                                            pw_object_t** out_object, uint32_t* out_slot) {
  uint32_t owner = (uint32_t)(id >> PW_HANDLE_OWNER_SHIFT) & PW_HANDLE_OWNER_MASK;
  uint32_t generation = (uint32_t)(id >> PW_HANDLE_GENERATION_SHIFT) & PW_HANDLE_GENERATION_MAX;
  uint32_t slot = ((uint32_t)id & PW_HANDLE_SLOT_MASK) - 1;
  pw_handle_table_t* table = &client->handles;
  pw_object_t* object = slot < table->count ? table->slots[slot].object : NULL;
  if (PW_LIKELY(id >> PW_HANDLE_KIND_SHIFT == (uint64_t)kind &&
                owner == client->handle_owner && object != NULL &&
                table->slots[slot].generation == generation && object->kind == kind &&
                object->runtime == client->runtime)) {
    *out_object = object;
    *out_slot = slot;
    return NULL;
  }
  return pw_handle_refuse(client, id, kind, what);
}

pw_status_t pw__handle_lookup(pw_client_t* client, uint64_t id,
                              pw_object_kind_t kind, const char* what,
                              pw_object_t** out_object) {
  *out_object = NULL;
  pw_handle_table_t* table = &client->handles;
  uint32_t stripe = pw__handle_read_lock(table);
  uint32_t slot = 0;
  pw_object_t* object = NULL;
  pw_status_t status = pw_handle_resolve(client, id, kind, what, &object, &slot);
  if (status == NULL) {
    pw__object_retain(object);
    *out_object = object;
  }
  pw__handle_read_unlock(table, stripe);
  return status;
}

pw_status_t pw__handle_peek(pw_client_t* client, uint64_t id, pw_object_kind_t kind,
                            const char* what, pw_object_t** out_object) {
  *out_object = NULL;
  uint32_t slot = 0;
  return pw_handle_resolve(client, id, kind, what, out_object, &slot);
}

pw_status_t pw__handle_remove(pw_client_t* client, uint64_t id,
                              pw_object_kind_t kind, const char* what) {
  pw_handle_table_t* table = &client->handles;
  pw__handle_write_lock(table);
  uint32_t slot = 0;
  pw_object_t* object = NULL;
  pw_status_t status = pw_handle_resolve(client, id, kind, what, &object, &slot);
  if (status == NULL) {
    pw_handle_slot_t* s = &table->slots[slot];
    s->object = NULL;
    table->live--;
    if (s->generation < PW_HANDLE_GENERATION_MAX) {
      s->generation++;
      s->next_free = table->free_head;
      table->free_head = slot;
    }
    /* Else the slot is retired: a next generation would wrap to one whose
     * old handles may still be held, and name the new object. */
  }
  pw__handle_write_unlock(table);
  if (object != NULL && object->kind == PW_OBJECT_BUFFER) {
    pw__buffer_unhandled((pw_buffer_obj_t*)object, "its last handle was released");
  }
  pw__object_release(object);
  return status;
}
