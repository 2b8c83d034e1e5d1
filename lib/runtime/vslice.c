#define _POSIX_C_SOURCE 200809L
/* Virtual slices and the resource manager that binds them to physical
 * slices; composite slices for virtual slices that span several physical
 * ones (their dispatch is in lib/sched/dispatch.c). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "plugin/backend_call.h"
#include "pathways/struct_size.h"
#include "runtime/runtime_internal.h"
#include "sched/sched.h"

/* ---- composite slices --------------------------------------------------- */

static void pw_composite_free(pw_runtime_t* rt, pw_slice_t* c) {
  pw_allocator_free(rt->allocator, c->span_position, rt->slice_count * sizeof(uint32_t));
  pw_allocator_free(rt->allocator, c->group_devices, c->device_count * sizeof(uint32_t));
  pw_allocator_free(rt->allocator, c->span, c->span_count * sizeof(pw_slice_t*));
  pw_allocator_free(rt->allocator, c, sizeof(*c));
}

pw_status_t pw__slice_composite(pw_runtime_t* rt, pw_slice_t* const* parts, uint32_t count,
                                pw_slice_t** out_slice) {
  *out_slice = NULL;
  for (pw_slice_t* c = rt->composites; c != NULL; c = c->composite_next) {
    if (c->span_count != count) continue;
    uint32_t p = 0;
    while (p < count && c->span[p] == parts[p]) ++p;
    if (p == count) {
      *out_slice = c;
      return NULL;
    }
  }
  uint32_t per = parts[0]->device_count;
  pw_slice_t* c = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(rt->allocator, sizeof(*c), PW_CACHE_LINE, (void**)&c));
  c->device_count = per * count;
  c->span_count = count;
  pw_status_t status = pw_allocator_calloc_array(rt->allocator, count, sizeof(pw_slice_t*), 0,
                                                 (void**)&c->span);
  if (status == NULL) {
    status = pw_allocator_calloc_array(rt->allocator, c->device_count, sizeof(uint32_t), 0,
                                       (void**)&c->group_devices);
  }
  if (status == NULL) {
    status = pw_allocator_calloc_array(rt->allocator, rt->slice_count, sizeof(uint32_t), 0,
                                       (void**)&c->span_position);
  }
  if (status != NULL) {
    if (c->span == NULL) c->span_count = 0;
    pw_composite_free(rt, c);
    return status;
  }
  c->runtime = rt;
  c->index = parts[0]->index;
  c->mesh = pw_mesh_shape_make(2, (const uint32_t[]){count, per});
  c->backend_index = parts[0]->backend_index;
  c->backend = parts[0]->backend;
  c->launch = parts[0]->launch;
  c->launch_host = parts[0]->launch_host;
  for (uint32_t p = 0; p < count; ++p) c->lane_count += parts[p]->lane_count;
  /* Queued when every part is (each device follows its own part's
   * queue), at the least depth. */
  c->queue_depth = parts[0]->queue_depth;
  for (uint32_t p = 1; p < count; ++p) {
    if (parts[p]->queue_depth < c->queue_depth) c->queue_depth = parts[p]->queue_depth;
  }
  c->host = parts[0]->host;
  c->first_device = parts[0]->first_device;
  size_t used = 0;
  for (uint32_t s = 0; s < rt->slice_count; ++s) c->span_position[s] = UINT32_MAX;
  for (uint32_t p = 0; p < count; ++p) {
    c->span[p] = parts[p];
    c->span_position[parts[p]->index] = p;
    memcpy(&c->group_devices[p * per], parts[p]->group_devices, per * sizeof(uint32_t));
    if (used < sizeof(c->name)) {
      int n = snprintf(c->name + used, sizeof(c->name) - used, "%s%s", p ? "+" : "",
                       parts[p]->name);
      used += n > 0 ? (size_t)n : 0;
    }
  }
  /* Its parts' losses are counted here from now on (runtime lock held,
   * as health.c's updates are). */
  uint32_t lost = 0;
  for (uint32_t p = 0; p < count; ++p) lost += pw_atomic_load_u32_relaxed(&parts[p]->lost);
  pw_atomic_init_u32(&c->lost, lost);
  pw_atomic_init_u32(&c->losses, 0);
  c->self = c;
  c->composite_next = rt->composites;
  rt->composites = c;
  *out_slice = c;
  return NULL;
}

void pw__slice_composites_free(pw_runtime_t* rt) {
  while (rt->composites != NULL) {
    pw_slice_t* c = rt->composites;
    rt->composites = c->composite_next;
    pw_composite_free(rt, c);
  }
}

/* ---- virtual slices ----------------------------------------------------- */

static void pw_vslice_destroy(pw_object_t* object) {
  pw_vslice_obj_t* vs = (pw_vslice_obj_t*)object;
  pw_runtime_t* rt = object->runtime;
  pthread_mutex_lock(&rt->lock);
  for (uint32_t p = 0; p < vs->slice->span_count; ++p) vs->slice->span[p]->bound_vslices--;
  pthread_mutex_unlock(&rt->lock);
  pw_allocator_free(rt->allocator, vs, sizeof(*vs));
}

/* Whether this client already has a live virtual slice bound to exactly
 * |slice|. Called with the runtime lock held; reads the client's table
 * under its lock. */
static bool pw_client_uses_slice(pw_client_t* client, pw_slice_t* slice) {
  bool used = false;
  uint32_t stripe = pw__handle_read_lock(&client->handles);
  for (uint32_t i = 0; i < client->handles.count && !used; ++i) {
    pw_object_t* o = client->handles.slots[i].object;
    if (o && o->kind == PW_OBJECT_VSLICE && ((pw_vslice_obj_t*)o)->slice == slice) {
      used = true;
    }
  }
  pw__handle_read_unlock(&client->handles, stripe);
  return used;
}

/* The health the resource manager goes by: the backend's, and FAILED
 * while the runtime holds the slice lost (lib/sched/health.c), whatever
 * the backend says. */
static pw_device_health_t pw_slice_health(pw_slice_t* slice) {
  if (pw_atomic_load_u32_acquire(&slice->lost) != 0) return PW_DEVICE_FAILED;
  return pw__slice_worst_health(slice);
}

/* Whether |slice| can be bound at all: no failed device. A degraded one
 * can, but only when no healthy one fits (it should be drained). */
static bool pw_slice_is_usable(pw_device_health_t health) {
  return health < PW_DEVICE_FAILED;
}

/* ", N shared with other ... (exclusive requested)" when |exclusive|,
 * else "": the count is only a reason when exclusive was asked for. */
static const char* pw_shared_reason(char* text, size_t size, bool exclusive, uint32_t shared,
                                    const char* with) {
  text[0] = '\0';
  if (exclusive) {
    snprintf(text, size, ", %u shared with other %s (exclusive requested)", shared, with);
  }
  return text;
}

static pw_status_t pw_vslice_new(pw_client_t* client, const pw_mesh_shape_t* mesh,
                                 pw_vslice_obj_t** out) {
  pw_runtime_t* rt = client->runtime;
  pw_vslice_obj_t* vs = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(rt->allocator, sizeof(*vs), 0, (void**)&vs));
  pw__object_init(&vs->header, PW_OBJECT_VSLICE, rt, pw_vslice_destroy);
  vs->mesh = *mesh;
  vs->client = client;
  *out = vs;
  return NULL;
}

/* Binds |vs| to |slice| (runtime lock held) and hands it to the client. */
static pw_status_t pw_vslice_bind(pw_client_t* client, pw_vslice_obj_t* vs, pw_slice_t* slice,
                                  pw_vslice_t* out_vslice) {
  pw_runtime_t* rt = client->runtime;
  for (uint32_t p = 0; p < slice->span_count; ++p) slice->span[p]->bound_vslices++;
  vs->slice = slice;
  vs->losses = pw_atomic_load_u32_relaxed(&slice->losses);
  pthread_mutex_unlock(&rt->lock);
  char mesh_text[32];
  pw_mesh_shape_format(&vs->mesh, mesh_text, sizeof(mesh_text));
  pw_log(&rt->logger, PW_LOG_DEBUG, "resource", "client '%s': mesh %s -> slice '%s'",
         client->name, mesh_text, slice->name);
  return pw__handle_insert(client, &vs->header, &out_vslice->id);
}

pw_status_t pw_vslice_create(pw_client_t* client, const pw_mesh_shape_t* mesh,
                             uint32_t flags, pw_vslice_t* out_vslice) {
  if (mesh == NULL) {
    if (out_vslice != NULL) out_vslice->id = 0;
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_vslice_create: mesh is NULL");
  }
  pw_vslice_request_t request = {.struct_size = sizeof(request), .mesh = *mesh, .flags = flags,
                                 .host = PW_VSLICE_ANY_HOST};
  return pw_vslice_create_request(client, &request, out_vslice);
}

/* No slice has the attributes asked for: NOT_FOUND listing them all. */
static pw_status_t pw_vslice_no_match(pw_client_t* client, const pw_vslice_request_t* request,
                                      uint32_t want) {
  char wanted[256], available[1024], mesh_text[32];
  pw__placement_wanted(request, wanted, sizeof(wanted));
  pw_mesh_shape_format(&request->mesh, mesh_text, sizeof(mesh_text));
  pthread_mutex_lock(&client->runtime->lock);
  pw__placement_available(client->runtime, available, sizeof(available));
  pthread_mutex_unlock(&client->runtime->lock);
  return pw_status_make(PW_STATUS_NOT_FOUND,
                        "no physical slice has %u devices%s%s for mesh %s of client '%s'; "
                        "the slices: %s",
                        want, wanted[0] ? " and " : "", wanted, mesh_text, client->name,
                        available);
}

pw_status_t pw_vslice_create_request(pw_client_t* client, const pw_vslice_request_t* request,
                                     pw_vslice_t* out_vslice) {
  if (out_vslice != NULL) out_vslice->id = 0;
  if (client == NULL || out_vslice == NULL || request == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_vslice_create: client, request or out_vslice is NULL");
  }
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(request, pw_vslice_request_t, PW_VSLICE_REQUEST_SIZE_V1,
                                     "pw_vslice_create_request"));
  const pw_mesh_shape_t* mesh = &request->mesh;
  uint32_t flags = request->flags;
  PW_RETURN_IF_ERROR_CTX(pw_mesh_shape_check(mesh), "pw_vslice_create");
  if (flags & ~(uint32_t)(PW_VSLICE_EXCLUSIVE | PW_VSLICE_SHARE_OWN)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_vslice_create: unknown flags 0x%x", flags);
  }
  pw_runtime_t* rt = client->runtime;
  pw__health_refresh(rt); /* slices lost by health that recovered may bind */
  uint32_t want = pw_mesh_shape_device_count(mesh);
  pw_vslice_obj_t* vs = NULL;
  PW_RETURN_IF_ERROR(pw_vslice_new(client, mesh, &vs));

  /* Choose: healthy before degraded (a degraded slice only when no
   * healthy one fits), then exact mesh before same device count, then
   * least shared, then lowest index. */
  pthread_mutex_lock(&rt->lock);
  pw_slice_t* best = NULL;
  pw_device_health_t best_health = PW_DEVICE_HEALTHY;
  bool best_exact = false;
  uint32_t fitting = 0, taken_by_client = 0, unhealthy = 0, shared = 0;
  for (uint32_t s = 0; s < rt->slice_count; ++s) {
    pw_slice_t* slice = &rt->slices[s];
    if (slice->device_count != want || !pw__placement_matches(slice, request)) continue;
    fitting++;
    pw_device_health_t health = pw_slice_health(slice);
    if (!pw_slice_is_usable(health)) { unhealthy++; continue; }
    if (!(flags & PW_VSLICE_SHARE_OWN) && pw_client_uses_slice(client, slice)) {
      taken_by_client++;
      continue;
    }
    if ((flags & PW_VSLICE_EXCLUSIVE) && slice->bound_vslices > 0) { shared++; continue; }
    bool exact = pw_mesh_shape_equal(&slice->mesh, mesh);
    bool better = best == NULL || health < best_health ||
                  (health == best_health &&
                   (exact > best_exact ||
                    (exact == best_exact && slice->bound_vslices < best->bound_vslices)));
    if (better) {
      best = slice;
      best_health = health;
      best_exact = exact;
    }
  }
  if (best == NULL) {
    pthread_mutex_unlock(&rt->lock);
    pw_allocator_free(rt->allocator, vs, sizeof(*vs));
    char wanted[256];
    pw__placement_wanted(request, wanted, sizeof(wanted));
    if (fitting == 0 && wanted[0] != '\0') return pw_vslice_no_match(client, request, want);
    char mesh_text[32], shared_text[96];
    pw_mesh_shape_format(mesh, mesh_text, sizeof(mesh_text));
    return pw_status_make(
        PW_STATUS_RESOURCE_EXHAUSTED,
        "no free physical slice fits mesh %s for client '%s': %u of %u slices "
        "have %u devices%s%s; of those %u already bound to this client, %u "
        "unhealthy%s",
        mesh_text, client->name, fitting, rt->slice_count, want, wanted[0] ? " and " : "",
        wanted, taken_by_client, unhealthy,
        pw_shared_reason(shared_text, sizeof(shared_text), flags & PW_VSLICE_EXCLUSIVE, shared,
                         "clients"));
  }
  const char* name = best->name;
  pw_status_t status = pw_vslice_bind(client, vs, best, out_vslice); /* unlocks */
  if (status == NULL && best_health == PW_DEVICE_DEGRADED) {
    pw_log(&rt->logger, PW_LOG_WARN, "resource",
           "client '%s': bound to degraded slice '%s': no healthy slice fits", client->name,
           name);
  }
  return status;
}

/* Checks the slices a spanning request pins: in range, distinct, one
 * backend, |per| devices each. Fills |parts| in the order given. */
static pw_status_t pw_span_check_pinned(pw_runtime_t* rt, const pw_vslice_span_t* span,
                                        uint32_t per, pw_slice_t** parts) {
  for (uint32_t i = 0; i < span->slice_count; ++i) {
    uint32_t s = span->slices[i];
    if (s >= rt->slice_count) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "pw_vslice_create_spanning: slices[%u] = %u does not exist "
                            "(%u slices)", i, s, rt->slice_count);
    }
    for (uint32_t j = 0; j < i; ++j) {
      if (span->slices[j] == s) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "pw_vslice_create_spanning: slices[%u] and slices[%u] are "
                              "both slice %u", j, i, s);
      }
    }
    pw_slice_t* slice = &rt->slices[s];
    if (slice->device_count != per) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "pw_vslice_create_spanning: slices[%u] (slice '%s') has %u "
                            "devices; the mesh over %u slices needs %u on each",
                            i, slice->name, slice->device_count, span->slice_count, per);
    }
    if (slice->backend_index != rt->slices[span->slices[0]].backend_index) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "pw_vslice_create_spanning: slices[%u] (slice '%s') is on "
                            "backend '%s', slices[0] (slice '%s') on '%s': a gang cannot "
                            "span backends",
                            i, slice->name, pw__backend_name(slice->backend),
                            rt->slices[span->slices[0]].name,
                            pw__backend_name(rt->slices[span->slices[0]].backend));
    }
    parts[i] = slice;
  }
  return NULL;
}

/* Runtime lock held. Whether pinned slice |s| may take one more binding. */
static pw_status_t pw_span_check_available(pw_client_t* client, const pw_vslice_span_t* span,
                                           pw_slice_t* s) {
  if (!pw_slice_is_usable(pw_slice_health(s))) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "pw_vslice_create_spanning: slice '%s' has failed devices", s->name);
  }
  if ((span->flags & PW_VSLICE_EXCLUSIVE) && s->bound_vslices > 0) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "pw_vslice_create_spanning: slice '%s' is bound to %u virtual "
                          "slice(s) and exclusive was requested",
                          s->name, s->bound_vslices);
  }
  if (span->slice_count == 1 && pw_client_uses_slice(client, s)) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "pw_vslice_create_spanning: slice '%s' is already bound to "
                          "client '%s'", s->name, client->name);
  }
  return NULL;
}

/* Whether |a| (health |ha|) goes before |b| when picking parts: healthy
 * before degraded, then least shared. */
static bool pw_span_part_before(pw_slice_t* a, pw_device_health_t ha, pw_slice_t* b) {
  pw_device_health_t hb = pw_slice_health(b);
  return ha < hb || (ha == hb && a->bound_vslices < b->bound_vslices);
}

/* Runtime lock held. Picks |span->slice_count| slices of one backend with
 * |per| devices each, usable and (exclusive) unbound: healthy before
 * degraded (a degraded one only when too few healthy ones fit), then
 * least shared. */
static pw_status_t pw_span_pick(pw_client_t* client, const pw_vslice_span_t* span,
                                uint32_t per, pw_slice_t** parts) {
  pw_runtime_t* rt = client->runtime;
  uint32_t fitting = 0, unhealthy = 0, shared = 0, best_backend_count = 0;
  for (uint32_t b = 0; b < rt->backend_count; ++b) {
    uint32_t n = 0;
    for (uint32_t s = 0; s < rt->slice_count; ++s) {
      pw_slice_t* slice = &rt->slices[s];
      if (slice->backend_index != b || slice->device_count != per) continue;
      fitting++;
      pw_device_health_t health = pw_slice_health(slice);
      if (!pw_slice_is_usable(health)) { unhealthy++; continue; }
      if ((span->flags & PW_VSLICE_EXCLUSIVE) && slice->bound_vslices > 0) { shared++; continue; }
      /* Keep the |slice_count| first in that order, by insertion (lowest
       * index first among equals). */
      uint32_t at = n < span->slice_count ? n : span->slice_count;
      while (at > 0 && pw_span_part_before(slice, health, parts[at - 1])) {
        if (at < span->slice_count) parts[at] = parts[at - 1];
        --at;
      }
      if (at < span->slice_count) parts[at] = slice;
      ++n;
    }
    if (n >= span->slice_count) return NULL;
    if (n > best_backend_count) best_backend_count = n;
  }
  char shared_text[96];
  return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                        "pw_vslice_create_spanning: client '%s' needs %u slices of %u "
                        "devices on one backend: %u of %u slices have %u devices; of those "
                        "%u unhealthy%s; at most %u usable on one backend",
                        client->name, span->slice_count, per, fitting, rt->slice_count, per,
                        unhealthy,
                        pw_shared_reason(shared_text, sizeof(shared_text),
                                         span->flags & PW_VSLICE_EXCLUSIVE, shared,
                                         "virtual slices"),
                        best_backend_count);
}

pw_status_t pw_vslice_create_spanning(pw_client_t* client, const pw_vslice_span_t* span,
                                      pw_vslice_t* out_vslice) {
  if (client == NULL || span == NULL || out_vslice == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_vslice_create_spanning: client, span or out_vslice is NULL");
  }
  out_vslice->id = 0;
  PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(span, pw_vslice_span_t, PW_VSLICE_SPAN_SIZE_V1,
                                      "pw_vslice_create_spanning"));
  PW_RETURN_IF_ERROR_CTX(pw_mesh_shape_check(&span->mesh), "pw_vslice_create_spanning");
  if (span->flags & ~(uint32_t)PW_VSLICE_EXCLUSIVE) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_vslice_create_spanning: unknown flags 0x%x", span->flags);
  }
  uint32_t total = pw_mesh_shape_device_count(&span->mesh);
  if (span->slice_count == 0 || total % span->slice_count != 0) {
    char mesh_text[32];
    pw_mesh_shape_format(&span->mesh, mesh_text, sizeof(mesh_text));
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_vslice_create_spanning: slice_count %u does not divide the %u "
                          "devices of mesh %s", span->slice_count, total, mesh_text);
  }
  if (span->slice_count == 1 && span->slices == NULL) {
    return pw_vslice_create(client, &span->mesh, span->flags, out_vslice);
  }
  pw_runtime_t* rt = client->runtime;
  pw__health_refresh(rt);
  if (span->slice_count > rt->slice_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_vslice_create_spanning: slice_count %u exceeds the runtime's "
                          "%u slices", span->slice_count, rt->slice_count);
  }
  uint32_t per = total / span->slice_count;
  pw_slice_t** parts = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc_array(rt->allocator, span->slice_count,
                                               sizeof(pw_slice_t*), 0, (void**)&parts));
  pw_vslice_obj_t* vs = NULL;
  pw_status_t status = span->slices ? pw_span_check_pinned(rt, span, per, parts) : NULL;
  if (status == NULL) status = pw_vslice_new(client, &span->mesh, &vs);
  if (status == NULL) {
    pthread_mutex_lock(&rt->lock);
    if (span->slices != NULL) {
      for (uint32_t i = 0; status == NULL && i < span->slice_count; ++i) {
        status = pw_span_check_available(client, span, parts[i]);
      }
    } else {
      status = pw_span_pick(client, span, per, parts);
    }
    /* Mesh order (and lock order) is ascending slice index. */
    for (uint32_t i = 1; status == NULL && i < span->slice_count; ++i) {
      pw_slice_t* s = parts[i];
      uint32_t j = i;
      for (; j > 0 && parts[j - 1]->index > s->index; --j) parts[j] = parts[j - 1];
      parts[j] = s;
    }
    pw_slice_t* bound = parts[0];
    if (status == NULL && span->slice_count > 1) {
      status = pw__slice_composite(rt, parts, span->slice_count, &bound);
    }
    if (status == NULL) {
      pw_allocator_free(rt->allocator, parts, span->slice_count * sizeof(pw_slice_t*));
      return pw_vslice_bind(client, vs, bound, out_vslice); /* unlocks */
    }
    pthread_mutex_unlock(&rt->lock);
  }
  if (vs != NULL) pw_allocator_free(rt->allocator, vs, sizeof(*vs));
  pw_allocator_free(rt->allocator, parts, span->slice_count * sizeof(pw_slice_t*));
  return status;
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
  if (out_slice) *out_slice = vs->slice->span[0]->index;
  if (out_mesh) *out_mesh = vs->mesh;
  pw__object_release(o);
  return NULL;
}

pw_status_t pw_vslice_slices(pw_client_t* client, pw_vslice_t vslice, uint32_t* out_slices,
                             uint32_t capacity, uint32_t* out_count) {
  if (client == NULL || out_count == NULL || (out_slices == NULL && capacity != 0)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_vslice_slices: client or out_count is NULL, or out_slices is "
                          "NULL with capacity %u", capacity);
  }
  *out_count = 0;
  pw_object_t* o = NULL;
  PW_RETURN_IF_ERROR(pw__handle_lookup(client, vslice.id, PW_OBJECT_VSLICE, "vslice", &o));
  pw_slice_t* slice = ((pw_vslice_obj_t*)o)->slice;
  for (uint32_t p = 0; p < slice->span_count && p < capacity; ++p) {
    out_slices[p] = slice->span[p]->index;
  }
  *out_count = slice->span_count;
  pw__object_release(o);
  return NULL;
}

pw_status_t pw_vslice_info(pw_client_t* client, pw_vslice_t vslice, pw_vslice_info_t* out_info) {
  if (client == NULL || out_info == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_vslice_info: %s is NULL",
                          client == NULL ? "client" : "out_info");
  }
  PW_RETURN_IF_ERROR(
      PW_STRUCT_CHECK(out_info, pw_vslice_info_t, PW_VSLICE_INFO_SIZE_V1, "pw_vslice_info"));
  pw_object_t* o = NULL;
  PW_RETURN_IF_ERROR(pw__handle_lookup(client, vslice.id, PW_OBJECT_VSLICE, "vslice", &o));
  pw_vslice_obj_t* vs = (pw_vslice_obj_t*)o;
  pw_slice_t* slice = vs->slice;
  pw_vslice_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  info.mesh = vs->mesh;
  info.slice_count = slice->span_count;
  info.first_slice = slice->span[0]->index;
  info.first_lost_slice = UINT32_MAX;
  for (uint32_t p = 0; p < slice->span_count; ++p) {
    if (pw_atomic_load_u32_acquire(&slice->span[p]->lost) == 0) continue;
    if (info.lost_slices++ == 0) info.first_lost_slice = slice->span[p]->index;
  }
  info.lost_since_bound = pw_atomic_load_u32_acquire(&slice->losses) != vs->losses;
  pw__object_release(o);
  pw_struct_fill(out_info, &info, sizeof(info));
  return NULL;
}
