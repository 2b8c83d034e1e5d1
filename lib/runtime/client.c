#define _POSIX_C_SOURCE 200809L
/* Clients and virtual slices; the resource manager that binds virtual
 * slices to physical ones. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "plugin/backend_call.h"
#include "runtime/objects.h"

pw_status_t pw_client_create(pw_runtime_t* runtime,
                             const pw_client_options_t* options,
                             pw_client_t** out_client) {
  if (out_client == NULL || runtime == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_client_create: runtime or out_client is NULL");
  }
  *out_client = NULL;
  if (options != NULL && options->struct_size < PW_CLIENT_OPTIONS_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "client options struct_size %zu is smaller than v1 (%zu)",
                          options->struct_size, (size_t)PW_CLIENT_OPTIONS_SIZE_V1);
  }
  pw_client_t* client = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(runtime->allocator, sizeof(*client), 0,
                                         (void**)&client));
  client->runtime = runtime;
  pthread_mutex_lock(&runtime->lock);
  if (runtime->client_count >= 4000) {
    pthread_mutex_unlock(&runtime->lock);
    pw_allocator_free(runtime->allocator, client, sizeof(*client));
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "runtime already has %u clients", runtime->client_count);
  }
  client->tag = runtime->next_client_tag;
  runtime->next_client_tag = runtime->next_client_tag % 0xFFF + 1;
  runtime->client_count++;
  pthread_mutex_unlock(&runtime->lock);
  if (options && options->name && options->name[0]) {
    snprintf(client->name, sizeof(client->name), "%s", options->name);
  } else {
    snprintf(client->name, sizeof(client->name), "client%u", client->tag);
  }
  client->weight = options && options->weight ? options->weight : 1;
  client->priority = options ? options->priority : 0;
  pw_status_t status = pw_allocator_calloc_array(runtime->allocator, runtime->slice_count,
                                                 sizeof(pw_sched_entry_t), 64,
                                                 (void**)&client->sched_entries);
  if (status != NULL) {
    pthread_mutex_lock(&runtime->lock);
    runtime->client_count--;
    pthread_mutex_unlock(&runtime->lock);
    pw_allocator_free(runtime->allocator, client, sizeof(*client));
    return status;
  }
  for (uint32_t s = 0; s < runtime->slice_count; ++s) {
    client->sched_entries[s].client = client;
  }
  pw__handle_table_init(&client->handles);
  pw_atomic_init_u32(&client->inflight, 0);
  pw_atomic_init_u32(&client->idle_waiters, 0);
  pw_atomic_init_u32(&client->refs, 1);
  pthread_mutex_init(&client->idle_lock, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* deadlines are monotonic */
  pthread_cond_init(&client->idle_cond, &attr);
  pthread_condattr_destroy(&attr);
  *out_client = client;
  return NULL;
}

void pw_client_destroy(pw_client_t* client) {
  if (client == NULL) return;
  pw_runtime_t* runtime = client->runtime;
  /* Wait for in-flight executions: they hold references into the client's
   * objects and signal idle_cond when the count drops to zero. */
  pthread_mutex_lock(&client->idle_lock);
  pw_atomic_fetch_add_u32(&client->idle_waiters, 1);
  while (pw_atomic_load_u32_acquire(&client->inflight) != 0) {
    pthread_cond_wait(&client->idle_cond, &client->idle_lock);
  }
  pw_atomic_fetch_sub_u32(&client->idle_waiters, 1);
  pthread_mutex_unlock(&client->idle_lock);
  pw__handle_table_deinit(&client->handles, runtime->allocator);
  pw_allocator_free(runtime->allocator, client->sched_entries,
                    runtime->slice_count * sizeof(pw_sched_entry_t));
  client->sched_entries = NULL;
  pthread_mutex_lock(&runtime->lock);
  runtime->client_count--;
  pthread_mutex_unlock(&runtime->lock);
  pw__client_release(client);
}

void pw__client_release(pw_client_t* client) {
  if (pw_atomic_fetch_sub_u32(&client->refs, 1) != 1) return;
  pw_atomic_fence_acquire();
  pw_runtime_t* runtime = client->runtime;
  pw__dispatch_client_deinit(client);
  pthread_cond_destroy(&client->idle_cond);
  pthread_mutex_destroy(&client->idle_lock);
  pw_allocator_free(runtime->allocator, client, sizeof(*client));
}

pw_status_t pw_client_slice_stats(pw_client_t* client, uint32_t slice,
                                  pw_client_slice_stats_t* out_stats) {
  if (client == NULL || out_stats == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_client_slice_stats: client or out_stats is NULL");
  }
  memset(out_stats, 0, sizeof(*out_stats));
  if (slice >= client->runtime->slice_count) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE, "slice %u does not exist (%u slices)",
                          slice, client->runtime->slice_count);
  }
  pw_sched_entry_t* e = &client->sched_entries[slice];
  out_stats->ops_completed = pw_atomic_load_u64_acquire(&e->ops_completed);
  out_stats->device_ns = pw_atomic_load_u64_acquire(&e->device_ns);
  return NULL;
}

pw_status_t pw_client_wait_idle(pw_client_t* client, pw_time_t deadline) {
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_client_wait_idle: client is NULL");
  }
  pw_status_t status = NULL;
  pthread_mutex_lock(&client->idle_lock);
  pw_atomic_fetch_add_u32(&client->idle_waiters, 1);
  while (status == NULL && pw_atomic_load_u32_acquire(&client->inflight) != 0) {
    if (deadline == PW_INFINITE_FUTURE) {
      pthread_cond_wait(&client->idle_cond, &client->idle_lock);
      continue;
    }
    if (deadline <= pw_clock_now()) {
      status = pw_status_make(PW_STATUS_DEADLINE_EXCEEDED,
                              "client '%s' still has %u executions in flight", client->name,
                              pw_atomic_load_u32_acquire(&client->inflight));
      break;
    }
    struct timespec ts = {(time_t)(deadline / 1000000000), (long)(deadline % 1000000000)};
    pthread_cond_timedwait(&client->idle_cond, &client->idle_lock, &ts);
  }
  pw_atomic_fetch_sub_u32(&client->idle_waiters, 1);
  pthread_mutex_unlock(&client->idle_lock);
  return status;
}

uint32_t pw_client_live_handles(pw_client_t* client) {
  if (client == NULL) return 0;
  pthread_rwlock_rdlock(&client->handles.lock);
  uint32_t live = client->handles.live;
  pthread_rwlock_unlock(&client->handles.lock);
  return live;
}

const char* pw_client_name(const pw_client_t* client) {
  return client ? client->name : "";
}

static void pw_vslice_destroy(pw_object_t* object) {
  pw_vslice_obj_t* vs = (pw_vslice_obj_t*)object;
  pw_runtime_t* rt = object->runtime;
  pthread_mutex_lock(&rt->lock);
  vs->slice->bound_vslices--;
  pthread_mutex_unlock(&rt->lock);
  pw_allocator_free(rt->allocator, vs, sizeof(*vs));
}

/* Whether this client already has a live virtual slice on |slice|. Called
 * with the runtime lock held; reads the client's table under its lock. */
static bool pw_client_uses_slice(pw_client_t* client, pw_slice_t* slice) {
  bool used = false;
  pthread_rwlock_rdlock(&client->handles.lock);
  for (uint32_t i = 0; i < client->handles.count && !used; ++i) {
    pw_object_t* o = client->handles.slots[i].object;
    if (o && o->kind == PW_OBJECT_VSLICE && ((pw_vslice_obj_t*)o)->slice == slice) {
      used = true;
    }
  }
  pthread_rwlock_unlock(&client->handles.lock);
  return used;
}

static bool pw_slice_is_healthy(pw_slice_t* slice) {
  for (uint32_t i = 0; i < slice->device_count; ++i) {
    if (pw__backend_health(slice->backend, slice->group_devices[i]) == PW_DEVICE_FAILED) {
      return false;
    }
  }
  return true;
}

pw_status_t pw_vslice_create(pw_client_t* client, const pw_mesh_shape_t* mesh,
                             uint32_t flags, pw_vslice_t* out_vslice) {
  if (client == NULL || out_vslice == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_vslice_create: client or out_vslice is NULL");
  }
  out_vslice->id = 0;
  PW_RETURN_IF_ERROR_CTX(pw_mesh_shape_check(mesh), "pw_vslice_create");
  if (flags & ~(uint32_t)PW_VSLICE_EXCLUSIVE) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_vslice_create: unknown flags 0x%x", flags);
  }
  pw_runtime_t* rt = client->runtime;
  char mesh_text[32];
  pw_mesh_shape_format(mesh, mesh_text, sizeof(mesh_text));
  uint32_t want = pw_mesh_shape_device_count(mesh);

  pw_vslice_obj_t* vs = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(rt->allocator, sizeof(*vs), 0, (void**)&vs));
  pw__object_init(&vs->header, PW_OBJECT_VSLICE, rt, pw_vslice_destroy);
  vs->mesh = *mesh;
  vs->client = client;

  /* Choose: exact mesh match before same-device-count, then least shared. */
  pthread_mutex_lock(&rt->lock);
  pw_slice_t* best = NULL;
  int best_rank = 0;
  uint32_t fitting = 0, taken_by_client = 0, unhealthy = 0, shared = 0;
  for (uint32_t s = 0; s < rt->slice_count; ++s) {
    pw_slice_t* slice = &rt->slices[s];
    if (slice->device_count != want) continue;
    fitting++;
    if (!pw_slice_is_healthy(slice)) { unhealthy++; continue; }
    if (pw_client_uses_slice(client, slice)) { taken_by_client++; continue; }
    if ((flags & PW_VSLICE_EXCLUSIVE) && slice->bound_vslices > 0) { shared++; continue; }
    bool exact = pw_mesh_shape_equal(&slice->mesh, mesh);
    int rank = (exact ? 2 : 1) * 1000000 - (int)slice->bound_vslices;
    if (best == NULL || rank > best_rank) {
      best = slice;
      best_rank = rank;
    }
  }
  if (best == NULL) {
    pthread_mutex_unlock(&rt->lock);
    pw_allocator_free(rt->allocator, vs, sizeof(*vs));
    return pw_status_make(
        PW_STATUS_RESOURCE_EXHAUSTED,
        "no free physical slice fits mesh %s for client '%s': %u of %u slices "
        "have %u devices; of those %u already bound to this client, %u "
        "unhealthy, %u shared with other clients (exclusive requested)",
        mesh_text, client->name, fitting, rt->slice_count, want, taken_by_client,
        unhealthy, shared);
  }
  best->bound_vslices++;
  vs->slice = best;
  pthread_mutex_unlock(&rt->lock);
  pw_log(&rt->logger, PW_LOG_DEBUG, "resource", "client '%s': mesh %s -> slice '%s'",
         client->name, mesh_text, best->name);
  return pw__handle_insert(client, &vs->header, &out_vslice->id);
}

pw_status_t pw_vslice_release(pw_client_t* client, pw_vslice_t vslice) {
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_vslice_release: client is NULL");
  }
  return pw__handle_remove(client, vslice.id, PW_OBJECT_VSLICE, "vslice");
}

pw_status_t pw_vslice_binding(pw_client_t* client, pw_vslice_t vslice,
                              uint32_t* out_slice, pw_mesh_shape_t* out_mesh) {
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_vslice_binding: client is NULL");
  }
  pw_object_t* o = NULL;
  PW_RETURN_IF_ERROR(pw__handle_lookup(client, vslice.id, PW_OBJECT_VSLICE, "vslice", &o));
  pw_vslice_obj_t* vs = (pw_vslice_obj_t*)o;
  if (out_slice) *out_slice = vs->slice->index;
  if (out_mesh) *out_mesh = vs->mesh;
  pw__object_release(o);
  return NULL;
}
