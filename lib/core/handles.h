/* Internal: refcounted objects and the client's handle table (lib/core,
 * handles.c). Every object a client creates (vslice, executable, buffer,
 * graph) starts with a pw_object_t and lives in its client's table, which
 * holds one reference; ids are checked for kind, owner and generation
 * (layout in handles.c). Not installed. */
#ifndef PW_CORE_HANDLES_H_
#define PW_CORE_HANDLES_H_

#include "core/runtime.h"
#include "pathways/allocator.h"

struct pw_client_s;


/* Per-thread stripes: what threads update on every submission into one
 * client (its handle lock's reader counts, its reference and in-flight
 * counts, gang id ranges) is split into this many cache lines, and a
 * thread uses stripe pw__thread_stripe(): the one of the CPU it runs on
 * (only a placement hint: two threads on one stripe are still correct,
 * and a caller gives back on the stripe it took). lib/core/handles.c. */
#define PW_THREAD_STRIPES 8
uint32_t pw__thread_stripe(void);

typedef enum pw_object_kind_e {
  PW_OBJECT_VSLICE = 1,
  PW_OBJECT_EXECUTABLE = 2,
  PW_OBJECT_BUFFER = 3,
  PW_OBJECT_GRAPH = 4,
} pw_object_kind_t;

/* Common header of every handle-table object. */
typedef struct pw_object_s {
  pw_atomic_u32_t refs;
  pw_object_kind_t kind;
  pw_runtime_t* runtime;
  void (*destroy)(struct pw_object_s* object);
} pw_object_t;

void pw__object_init(pw_object_t* object, pw_object_kind_t kind,
                     pw_runtime_t* runtime, void (*destroy)(pw_object_t*));
void pw__object_retain(pw_object_t* object);
void pw__object_release(pw_object_t* object);

typedef struct pw_handle_slot_s {
  pw_object_t* object;     /* NULL when free or retired */
  uint32_t generation;     /* 1..PW_HANDLE_GENERATION_MAX */
  uint32_t next_free;
} pw_handle_slot_t;

/* The handle table's lock is a reader-striped one: a lookup (the common
 * case, several per submission) counts itself in its thread's stripe, on
 * a cache line of its own, so that threads submitting into one client do
 * not bounce one lock word; a writer (insert, remove) sets |writer| and
 * waits for every stripe to drain. See lib/core/handles.c. */
#define PW_HANDLE_STRIPES PW_THREAD_STRIPES

typedef struct pw_handle_table_s {
  struct {
    _Alignas(PW_CACHE_LINE) pw_atomic_u32_t readers;
  } stripes[PW_HANDLE_STRIPES];
  _Alignas(PW_CACHE_LINE) pw_atomic_u32_t writer; /* 1 while a writer holds the table */
  pthread_mutex_t write_lock; /* writers; readers that met |writer| wait on it */
  pw_handle_slot_t* slots;
  uint32_t capacity;
  uint32_t count;
  uint32_t free_head;      /* UINT32_MAX = none */
  uint32_t live;
} pw_handle_table_t;

/* Adds |object| to |client|'s table, taking over one reference (on failure
 * the reference is released). */
pw_status_t pw__handle_insert(pw_client_t* client, pw_object_t* object,
                              uint64_t* out_id);
/* Looks up |id| of |kind| and returns a new reference. |what| names the
 * argument in errors ("buffer", "args[2]"). */
pw_status_t pw__handle_lookup(pw_client_t* client, uint64_t id,
                              pw_object_kind_t kind, const char* what,
                              pw_object_t** out_object);
/* As pw__handle_lookup, for a caller that holds the table's read lock
 * (pw__handle_read_lock) and so resolves several ids in one section: no
 * reference is taken, the object stays alive until the lock is released
 * (retain it to keep it longer). */
pw_status_t pw__handle_peek(pw_client_t* client, uint64_t id, pw_object_kind_t kind,
                            const char* what, pw_object_t** out_object);
/* Removes |id| and releases the table's reference. A slot whose
 * generation would wrap is retired instead of freed. */
pw_status_t pw__handle_remove(pw_client_t* client, uint64_t id,
                              pw_object_kind_t kind, const char* what);
/* Gives |client| a tag no live client of its runtime has (skipping those
 * in use; RESOURCE_EXHAUSTED when all are) and its handle owner field,
 * taking the runtime's salt first if it has none. Called with
 * runtime->lock held. */
pw_status_t pw__handle_owner_take(pw_client_t* client);
/* Gives |client|'s tag back (runtime->lock held), once its table is gone. */
void pw__handle_owner_give(pw_client_t* client);
/* Gives |runtime|'s salt back to the process (at its end; no-op for 0). */
void pw__handle_salt_give(pw_runtime_t* runtime);
void pw__handle_table_init(pw_handle_table_t* table);
/* Shared (read-only) access to |table|'s slots: returns the stripe to pass
 * to pw__handle_read_unlock. Exclusive access: pw__handle_write_lock. */
uint32_t pw__handle_read_lock(pw_handle_table_t* table);
void pw__handle_read_unlock(pw_handle_table_t* table, uint32_t stripe);
void pw__handle_write_lock(pw_handle_table_t* table);
void pw__handle_write_unlock(pw_handle_table_t* table);
/* Releases every remaining object and frees the table. */
void pw__handle_table_deinit(pw_handle_table_t* table, pw_allocator_t allocator);

#endif /* PW_CORE_HANDLES_H_ */
