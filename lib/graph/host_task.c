#define _POSIX_C_SOURCE 200809L
/* Host tasks as objects: a refcounted copy of a caller's pw_host_task_t
 * (graph/host_task.h), and a client's registry of tasks by name
 * (pw_client_register_host_task), kept as a client attachment
 * (client->host_tasks: made on first use, published by a CAS, freed with
 * the client). Running them is lib/sched's (host_task.c there). */
#include <string.h>

#include "graph/host_task.h"
#include "pathways/struct_size.h"

void pw__host_task_release(pw_host_task_obj_t* t) {
  if (t == NULL || pw_atomic_fetch_sub_u32(&t->refs, 1) != 1) return;
  pw_atomic_fence_acquire();
  if (t->destroy != NULL) t->destroy(t->user);
  pw_allocator_free(t->allocator, t, sizeof(*t));
}

pw_status_t pw__host_task_make(pw_allocator_t allocator, const pw_host_task_t* task,
                               const char* what, pw_host_task_obj_t** out_task) {
  *out_task = NULL;
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(task, pw_host_task_t, PW_HOST_TASK_SIZE_V1, what));
  if (task->fn == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: task->fn is NULL", what);
  }
  pw_host_task_obj_t* t = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(allocator, sizeof(*t), 0, (void**)&t));
  pw_atomic_init_u32(&t->refs, 1);
  t->allocator = allocator;
  t->fn = task->fn;
  t->user = task->user;
  t->destroy = task->destroy;
  *out_task = t;
  return NULL;
}

/* ---- the registry ------------------------------------------------------ */

typedef struct pw_host_entry_s {
  struct pw_host_entry_s* next;
  pw_host_task_obj_t* task; /* one reference */
} pw_host_entry_t;

typedef struct pw_host_registry_s {
  pw_client_attachment_t attachment; /* first: freed with the client */
  pthread_mutex_t lock;
  pw_host_entry_t* entries;
} pw_host_registry_t;

static void pw_host_registry_free(pw_client_attachment_t* a, pw_client_t* client) {
  pw_host_registry_t* r = (pw_host_registry_t*)a;
  pw_allocator_t allocator = client->runtime->allocator;
  for (pw_host_entry_t* e = r->entries; e != NULL;) {
    pw_host_entry_t* next = e->next;
    pw__host_task_release(e->task);
    pw_allocator_free(allocator, e, sizeof(*e));
    e = next;
  }
  pthread_mutex_destroy(&r->lock);
  pw_allocator_free(allocator, r, sizeof(*r));
}

/* |client|'s registry, made on first use when |make| (NULL if none, or
 * if that allocation fails: |*out_status| says so). */
static pw_host_registry_t* pw_host_registry_of(pw_client_t* client, bool make,
                                               pw_status_t* out_status) {
  *out_status = NULL;
  pw_host_registry_t* r = pw_atomic_load_ptr_acquire(&client->host_tasks);
  if (r != NULL || !make) return r;
  pw_allocator_t allocator = client->runtime->allocator;
  *out_status = pw_allocator_calloc(allocator, sizeof(*r), 0, (void**)&r);
  if (*out_status != NULL) return NULL;
  r->attachment.free = pw_host_registry_free;
  pthread_mutex_init(&r->lock, NULL);
  void* expected = NULL;
  if (!pw_atomic_cas_ptr(&client->host_tasks, &expected, r)) {
    pthread_mutex_destroy(&r->lock);
    pw_allocator_free(allocator, r, sizeof(*r));
    r = expected;
  }
  return r;
}

/* Whether |name| is a valid task name: 1..63 bytes of [A-Za-z0-9_.-]. */
static bool pw_host_task_name_ok(const char* name) {
  size_t n = strnlen(name, PW_HOST_TASK_NAME_MAX + 1);
  if (n == 0 || n > PW_HOST_TASK_NAME_MAX) return false;
  for (size_t i = 0; i < n; ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

pw_status_t pw_client_register_host_task(pw_client_t* client, const char* task_name,
                                         const pw_host_task_t* task) {
  if (client == NULL || task_name == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_client_register_host_task: client or task_name is NULL");
  }
  if (!pw_host_task_name_ok(task_name)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_client_register_host_task: task name '%.*s' is not 1 to %u "
                          "bytes of [A-Za-z0-9_.-]",
                          (int)PW_HOST_TASK_NAME_MAX, task_name, PW_HOST_TASK_NAME_MAX);
  }
  pw_allocator_t allocator = client->runtime->allocator;
  pw_status_t status = NULL;
  pw_host_registry_t* r = pw_host_registry_of(client, true, &status);
  if (r == NULL) return status;
  pw_host_task_obj_t* t = NULL;
  PW_RETURN_IF_ERROR(pw__host_task_make(allocator, task, "pw_client_register_host_task", &t));
  strcpy(t->name, task_name);
  pw_host_entry_t* fresh = NULL;
  status = pw_allocator_malloc(allocator, sizeof(*fresh), 0, (void**)&fresh);
  if (status != NULL) {
    t->destroy = NULL; /* the caller still owns user */
    pw__host_task_release(t);
    return status;
  }
  pw_host_task_obj_t* old = NULL;
  pthread_mutex_lock(&r->lock);
  pw_host_entry_t* e = r->entries;
  while (e != NULL && strcmp(e->task->name, task_name) != 0) e = e->next;
  if (e != NULL) {
    old = e->task;
    e->task = t;
  } else {
    fresh->task = t;
    fresh->next = r->entries;
    r->entries = fresh;
    fresh = NULL;
  }
  pthread_mutex_unlock(&r->lock);
  if (fresh != NULL) pw_allocator_free(allocator, fresh, sizeof(*fresh));
  pw__host_task_release(old); /* outside the lock: it may run destroy */
  return NULL;
}

pw_status_t pw__host_task_lookup(pw_client_t* client, const char* task_name,
                                 pw_host_task_obj_t** out_task) {
  *out_task = NULL;
  if (client == NULL || task_name == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "client or task name is NULL");
  }
  pw_status_t status = NULL;
  pw_host_registry_t* r = pw_host_registry_of(client, false, &status);
  if (r != NULL) {
    pthread_mutex_lock(&r->lock);
    for (pw_host_entry_t* e = r->entries; e != NULL; e = e->next) {
      if (strcmp(e->task->name, task_name) == 0) {
        pw__host_task_retain(e->task);
        *out_task = e->task;
        break;
      }
    }
    pthread_mutex_unlock(&r->lock);
  }
  if (*out_task != NULL) return NULL;
  return pw_status_make(PW_STATUS_NOT_FOUND,
                        "host task '%.*s' is not registered for client '%s' "
                        "(pw_client_register_host_task)",
                        (int)PW_HOST_TASK_NAME_MAX, task_name, client->name);
}
