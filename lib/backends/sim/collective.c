/* The sim backend's collectives: gang rendezvous keyed by gang id.
 *
 * Each part arrives at its own start time (the device's timeline and its
 * inputs) and waits in its gang's group; the last arrival decides the
 * group: every part completes at max(arrival) + cost, or, if a member's
 * chip fails before that, with UNAVAILABLE at the failure (sim.h). No part
 * ever blocks a chip or a thread while it waits.
 *
 * A gang that can no longer complete — a member was refused at launch, a
 * member's chip failed NOW, two parts claimed one mesh position — fails
 * every part that arrived, and stays as a tombstone until all its members
 * have arrived, so the late ones fail at once too. If even the tombstone
 * cannot be allocated, a small ring of abandoned gang ids does its job. */
#include <stdio.h>
#include <string.h>

#include "backends/sim/sim_internal.h"

static pw_sim__group_t* pw_sim_group_find(pw_sim__backend_t* b, uint64_t gang_id,
                                          pw_sim__group_t*** out_link) {
  pw_sim__group_t** link = &b->groups;
  while (*link != NULL && (*link)->gang_id != gang_id) link = &(*link)->next;
  *out_link = link;
  return *link;
}

static void pw_sim_abort_gang(pw_sim__backend_t* b, uint64_t gang_id, uint32_t failed_device) {
  pw_sim__aborted_t* a = &b->aborted[b->aborted_next];
  b->aborted_next = (b->aborted_next + 1) % PW_SIM__ABORTED_RING;
  a->gang_id = gang_id;
  a->failed_device = failed_device;
  a->used = true;
}

static const pw_sim__aborted_t* pw_sim_aborted_find(pw_sim__backend_t* b, uint64_t gang_id) {
  for (uint32_t i = 0; i < PW_SIM__ABORTED_RING; ++i) {
    if (b->aborted[i].used && b->aborted[i].gang_id == gang_id) return &b->aborted[i];
  }
  return NULL;
}

pw_status_t pw_sim__group_new(pw_sim__backend_t* b, const pw_backend_launch_t* l,
                                    pw_sim__group_t** out) {
  size_t n = l->group_size;
  size_t size = sizeof(pw_sim__group_t) + n * sizeof(pw_sim__part_t*) + n * sizeof(uint32_t);
  void* memory = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_allocator_calloc(b->allocator, size, alignof(pw_sim__group_t),
                                             &memory),
                         "sim collective '%s' (gang %llu) of %zu devices",
                         l->executable->program.name, (unsigned long long)l->gang_id, n);
  pw_sim__group_t* g = memory;
  g->alloc_size = size;
  g->gang_id = l->gang_id;
  g->expected = l->group_size;
  g->kind = l->executable->program.kind;
  g->exe_cost_ns = l->executable->cost_ns;
  g->parts = (pw_sim__part_t**)(g + 1);
  g->devices = (uint32_t*)(g->parts + n);
  memcpy(g->devices, l->group_devices, n * sizeof(uint32_t));
  pw_status_t status = pw_sim__collective_cost(b, l->executable, g->devices, (uint32_t)n,
                                               &g->cost_ns);
  if (status != NULL) {
    pw_allocator_free(b->allocator, g, size);
    return status;
  }
  *out = g;
  return NULL;
}

void pw_sim__group_free(pw_sim__backend_t* b, pw_sim__group_t* g) {
  pw_status_free(g->failure);
  pw_allocator_free(b->allocator, g, g->alloc_size);
}

/* Marks |g| failed with |status| (consumed; the first failure is kept) and
 * takes out its waiting parts, each given a copy of the failure and the
 * completion time max(its start, |at|). Returns them in mesh order. With
 * groups_mutex held, or on a group the caller owns. */
static pw_sim__part_t* pw_sim_group_fail(pw_sim__group_t* g, pw_status_t status, uint64_t at,
                                         pw_sim_event_kind_t kind) {
  if (g->failure == NULL) {
    g->failure = status;
  } else {
    pw_status_free(status);
  }
  pw_sim__part_t* list = NULL;
  for (uint32_t k = g->expected; k-- > 0;) {
    pw_sim__part_t* part = g->parts[k];
    if (part == NULL) continue;
    g->parts[k] = NULL;
    part->kind = kind;
    part->time = part->start > at ? part->start : at;
    part->status = pw_status_clone(g->failure);
    part->next = list;
    list = part;
  }
  return list;
}

/* Completes failed parts (outside groups_mutex): each device's timeline
 * moves to the part's completion, then its done runs. */
static void pw_sim_complete_list(pw_sim__backend_t* b, pw_sim__part_t* list) {
  while (list != NULL) {
    pw_sim__part_t* part = list;
    list = part->next;
    part->next = NULL;
    pw_sim__device_t* d = &b->devices[part->device];
    pw_sim__device_lock(d);
    if (part->time > d->busy_until) d->busy_until = part->time;
    pw_sim__device_unlock(d);
    pw_sim__complete(b, part);
  }
}

/* Counts one more member of a failed group; unlinks it once all arrived.
 * Returns true when the caller must free it (after unlocking). */
static bool pw_sim_tombstone_arrival(pw_sim__group_t* g, pw_sim__group_t** link) {
  if (++g->arrived < g->expected) return false;
  *link = g->next;
  return true;
}

/* Adds element |at| of |in| into |acc| for the integer and full-width
 * float dtypes; integers wrap (unsigned arithmetic of their width). */
static void pw_sim_add_element(pw_dtype_t dtype, unsigned char* acc, const unsigned char* in,
                               size_t width) {
  if (dtype == PW_DTYPE_F32) {
    float a, x;
    memcpy(&a, acc, 4);
    memcpy(&x, in, 4);
    a += x;
    memcpy(acc, &a, 4);
  } else if (dtype == PW_DTYPE_F64) {
    double a, x;
    memcpy(&a, acc, 8);
    memcpy(&x, in, 8);
    a += x;
    memcpy(acc, &a, 8);
  } else if (width == 8) {
    uint64_t a, x;
    memcpy(&a, acc, 8);
    memcpy(&x, in, 8);
    a += x;
    memcpy(acc, &a, 8);
  } else { /* 1, 2 or 4 bytes: the low |width| bytes of a 32-bit sum */
    uint32_t a = 0, x = 0;
    memcpy(&a, acc, width);
    memcpy(&x, in, width);
    a += x;
    memcpy(acc, &a, width); /* little-endian hosts, as the library assumes */
  }
}

/* The data effect of all_reduce_sum: output 0 of every member = sum of
 * input 0 over the group, in mesh order (wrapping for integers; f16 and
 * bf16 summed in f32 and rounded once). */
/* True if mesh positions |a| and |b| differ only along |axes|. */
static bool pw_sim_same_group(const pw_mesh_shape_t* mesh, uint32_t axes, uint32_t a, uint32_t b) {
  for (uint32_t k = 0; k < mesh->rank; ++k) {
    if (!(axes >> k & 1u) && pw_mesh_coordinate(mesh, a, k) != pw_mesh_coordinate(mesh, b, k)) {
      return false;
    }
  }
  return true;
}

/* over named axes: each group (the parts that differ only along the over
 * axes) sums on its own, in mesh order. */
static void pw_sim_all_reduce_groups(pw_sim__group_t* g, pw_backend_executable_t e) {
  const pw_mesh_shape_t* mesh = &e->mesh;
  uint32_t axes = e->program.over_axes;
  size_t bytes = e->input_bytes[0];
  pw_dtype_t dtype = e->program.inputs[0].dtype;
  size_t width = pw_dtype_size(dtype);
  for (uint32_t m = 0; m < g->expected; ++m) {
    unsigned char* out = g->parts[m]->output0->data;
    if (dtype == PW_DTYPE_F16 || dtype == PW_DTYPE_BF16) {
      for (size_t at = 0; at < bytes; at += 2) {
        float sum = 0.0f;
        for (uint32_t o = 0; o < g->expected; ++o) {
          if (!pw_sim_same_group(mesh, axes, o, m)) continue;
          uint16_t bits;
          memcpy(&bits, (const unsigned char*)g->parts[o]->input0->data + at, 2);
          sum += dtype == PW_DTYPE_BF16 ? pw_bf16_to_f32(bits) : pw_f16_to_f32(bits);
        }
        uint16_t value = dtype == PW_DTYPE_BF16 ? pw_f32_to_bf16(sum) : pw_f32_to_f16(sum);
        memcpy(out + at, &value, 2);
      }
      continue;
    }
    bool first = true;
    for (uint32_t o = 0; o < g->expected; ++o) {
      if (!pw_sim_same_group(mesh, axes, o, m)) continue;
      const unsigned char* in = g->parts[o]->input0->data;
      if (first) {
        memcpy(out, in, bytes);
      } else {
        for (size_t at = 0; at < bytes; at += width) pw_sim_add_element(dtype, out + at, in + at, width);
      }
      first = false;
    }
  }
}

void pw_sim__all_reduce(pw_sim__group_t* g) {
  pw_backend_executable_t e = g->parts[0]->executable;
  if (e->program.over_axes != 0) {
    if (e->input_bytes[0] != 0 && g->parts[0]->output0->data != NULL) {
      pw_sim_all_reduce_groups(g, e);
    }
    return;
  }
  size_t bytes = e->input_bytes[0];
  pw_dtype_t dtype = e->program.inputs[0].dtype;
  size_t width = pw_dtype_size(dtype);
  unsigned char* out0 = g->parts[0]->output0->data;
  if (out0 == NULL || bytes == 0) return;
  if (dtype == PW_DTYPE_F16 || dtype == PW_DTYPE_BF16) {
    for (size_t at = 0; at < bytes; at += 2) {
      float sum = 0.0f;
      for (uint32_t m = 0; m < g->expected; ++m) {
        uint16_t bits;
        memcpy(&bits, (const unsigned char*)g->parts[m]->input0->data + at, 2);
        sum += dtype == PW_DTYPE_BF16 ? pw_bf16_to_f32(bits) : pw_f16_to_f32(bits);
      }
      uint16_t out = dtype == PW_DTYPE_BF16 ? pw_f32_to_bf16(sum) : pw_f32_to_f16(sum);
      memcpy(out0 + at, &out, 2);
    }
  } else {
    memcpy(out0, g->parts[0]->input0->data, bytes);
    for (uint32_t m = 1; m < g->expected; ++m) {
      const unsigned char* in = g->parts[m]->input0->data;
      for (size_t at = 0; at < bytes; at += width) {
        pw_sim_add_element(dtype, out0 + at, in + at, width);
      }
    }
  }
  for (uint32_t m = 1; m < g->expected; ++m) memcpy(g->parts[m]->output0->data, out0, bytes);
}

uint64_t pw_sim__group_first_failure(pw_sim__backend_t* b, const pw_sim__group_t* g,
                                     uint64_t end, uint32_t* out_device) {
  uint64_t first_fail = PW_SIM_TIME_NEVER;
  for (uint32_t m = 0; m < g->expected; ++m) {
    const pw_sim__part_t* part = g->parts[m];
    uint64_t f = atomic_load_explicit(&b->devices[part->device].fail_at, memory_order_relaxed);
    if ((f <= part->start || f < end) && f < first_fail) {
      first_fail = f;
      *out_device = part->device;
    }
  }
  return first_fail;
}

/* Every member arrived: decide the group (unlinked, owned by the caller)
 * and hand its parts to their done in mesh order; frees it. */
static void pw_sim_group_complete(pw_sim__backend_t* b, pw_sim__group_t* g) {
  uint64_t end = g->max_arrival + g->cost_ns;
  uint32_t failed_device = PW_SIM__NO_DEVICE;
  uint64_t first_fail = pw_sim__group_first_failure(b, g, end, &failed_device);
  if (failed_device != PW_SIM__NO_DEVICE) {
    pw_status_t status = pw_sim__unavailable(b, PW_SIM__NO_DEVICE, first_fail,
                                             g->parts[0]->executable->program.name, g->gang_id,
                                             failed_device);
    uint64_t at = g->max_arrival > first_fail ? g->max_arrival : first_fail;
    pw_sim_complete_list(b, pw_sim_group_fail(g, status, at, PW_SIM_EVENT_FAILED));
    pw_sim__group_free(b, g);
    return;
  }
  if (g->kind == PW_SIM__ALL_REDUCE_SUM) pw_sim__all_reduce(g);
  for (uint32_t m = 0; m < g->expected; ++m) {
    pw_sim__part_t* part = g->parts[m];
    part->time = end;
    part->begin = g->max_arrival;
    /* Collectives produce output 0 (all_reduce_sum) or nothing. */
    if (part->output0 != NULL) pw_sim__raise(&part->output0->ready_at, end);
    pw_sim__device_t* d = &b->devices[part->device];
    pw_sim__device_lock(d);
    if (end > d->busy_until) d->busy_until = end;
    pw_sim__device_unlock(d);
  }
  for (uint32_t m = 0; m < g->expected; ++m) pw_sim__complete(b, g->parts[m]);
  pw_sim__group_free(b, g);
}

pw_status_t pw_sim__refusal_status(pw_sim__backend_t* b, const pw_backend_launch_t* l) {
  pw_backend_executable_t e = l->executable;
  if (e == NULL || e->magic != PW_SIM__EXECUTABLE_MAGIC || e->backend != b ||
      !pw_sim__is_collective(e->program.kind)) {
    return NULL;
  }
  return pw_status_make(PW_STATUS_ABORTED,
                        "sim collective '%s' (gang %llu): the part for device %u was refused "
                        "at launch",
                        e->program.name, (unsigned long long)l->gang_id, l->device);
}

void pw_sim__collective_refused(pw_sim__backend_t* b, const pw_backend_launch_t* l) {
  if (l == NULL || l->struct_size < PW_BACKEND_LAUNCH_SIZE_V1) {
    return;
  }
  pw_status_t status = pw_sim__refusal_status(b, l);
  if (status == NULL) return;
  pw_backend_executable_t e = l->executable;
  pthread_mutex_lock(&b->groups_mutex);
  pw_sim__group_t** link = NULL;
  pw_sim__group_t* g = pw_sim_group_find(b, l->gang_id, &link);
  if (g == NULL) {
    /* The first member to show up was refused: leave a tombstone. */
    if (pw_sim_aborted_find(b, l->gang_id) == NULL) {
      pw_status_t oom = NULL;
      if (l->group_size == e->group_size && l->group_devices != NULL && l->group_size > 1) {
        oom = pw_sim__group_new(b, l, &g);
      }
      if (g != NULL) {
        g->next = b->groups;
        b->groups = g;
        g->failure = status;
        g->arrived = 1;
        status = NULL;
      } else {
        pw_sim_abort_gang(b, l->gang_id, PW_SIM__NO_DEVICE);
      }
      pw_status_free(oom);
    }
    pthread_mutex_unlock(&b->groups_mutex);
    pw_status_free(status);
    return;
  }
  pw_sim__part_t* list = pw_sim_group_fail(g, status, g->max_arrival, PW_SIM_EVENT_FAILED);
  bool free_group = pw_sim_tombstone_arrival(g, link);
  pthread_mutex_unlock(&b->groups_mutex);
  pw_sim_complete_list(b, list);
  if (free_group) pw_sim__group_free(b, g);
}

/* A part that arrives for a gang already abandoned (the ring). */
static void pw_sim_arrive_abandoned(pw_sim__backend_t* b, const pw_backend_launch_t* l,
                                    pw_sim__part_t* part, uint32_t failed) {
  part->kind = PW_SIM_EVENT_FAILED;
  part->time = part->start;
  if (failed != PW_SIM__NO_DEVICE) {
    uint64_t f = atomic_load_explicit(&b->devices[failed].fail_at, memory_order_relaxed);
    part->status = pw_sim__unavailable(b, PW_SIM__NO_DEVICE, f, l->executable->program.name,
                                       l->gang_id, failed);
  } else {
    part->status = pw_status_make(PW_STATUS_ABORTED,
                                  "sim collective '%s' (gang %llu) was abandoned before device "
                                  "%u arrived",
                                  l->executable->program.name, (unsigned long long)l->gang_id,
                                  l->device);
  }
  pw_sim__complete(b, part);
}

pw_status_t pw_sim__launch_collective(pw_sim__backend_t* b, const pw_backend_launch_t* l,
                                      uint64_t ready) {
  pw_sim__part_t* part = NULL;
  pw_status_t status = pw_sim__part_new(b, l, &part);
  if (status != NULL) {
    pw_sim__collective_refused(b, l);
    return status;
  }
  pw_sim__device_t* d = &b->devices[l->device];
  pw_sim__device_lock(d);
  part->start = d->busy_until > ready ? d->busy_until : ready;
  d->busy_until = part->start;
  pw_sim__device_unlock(d);
  part->begin = part->start;

  pthread_mutex_lock(&b->groups_mutex);
  pw_sim__group_t** link = NULL;
  pw_sim__group_t* g = pw_sim_group_find(b, l->gang_id, &link);
  if (g == NULL) {
    const pw_sim__aborted_t* aborted = pw_sim_aborted_find(b, l->gang_id);
    if (aborted != NULL) {
      uint32_t failed = aborted->failed_device;
      pthread_mutex_unlock(&b->groups_mutex);
      pw_sim_arrive_abandoned(b, l, part, failed);
      return NULL;
    }
    status = pw_sim__group_new(b, l, &g);
    if (status != NULL) {
      pw_sim_abort_gang(b, l->gang_id, PW_SIM__NO_DEVICE);
      pthread_mutex_unlock(&b->groups_mutex);
      pw_sim__part_discard(b, part);
      return status;
    }
    g->next = b->groups;
    b->groups = g;
    link = &b->groups;
  }
  if (g->failure != NULL) {
    /* A tombstone: fail at once with the gang's failure. */
    part->kind = PW_SIM_EVENT_FAILED;
    part->time = part->start;
    part->status = pw_status_clone(g->failure);
    bool free_group = pw_sim_tombstone_arrival(g, link);
    pthread_mutex_unlock(&b->groups_mutex);
    if (free_group) pw_sim__group_free(b, g);
    pw_sim__complete(b, part);
    return NULL;
  }
  pw_status_t mismatch = NULL;
  if (g->expected != l->group_size || g->kind != l->executable->program.kind ||
      g->exe_cost_ns != l->executable->cost_ns) {
    mismatch = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "sim collective gang %llu: device %u launched '%s' (%s over %u "
                              "devices), which differs from the gang's other members",
                              (unsigned long long)l->gang_id, l->device,
                              l->executable->program.name,
                              pw_sim__kind_name(l->executable->program.kind), l->group_size);
  } else if (g->parts[l->mesh_index] != NULL) {
    mismatch = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "sim collective '%s' (gang %llu): mesh position %u arrived twice",
                              l->executable->program.name, (unsigned long long)l->gang_id,
                              l->mesh_index);
  }
  if (mismatch != NULL) {
    part->kind = PW_SIM_EVENT_FAILED;
    part->time = part->start;
    part->status = pw_status_clone(mismatch);
    pw_sim__part_t* list = pw_sim_group_fail(g, mismatch, g->max_arrival, PW_SIM_EVENT_FAILED);
    bool free_group = pw_sim_tombstone_arrival(g, link);
    pthread_mutex_unlock(&b->groups_mutex);
    pw_sim_complete_list(b, list);
    if (free_group) pw_sim__group_free(b, g);
    pw_sim__complete(b, part);
    return NULL;
  }
  g->parts[l->mesh_index] = part;
  if (part->start > g->max_arrival) g->max_arrival = part->start;
  if (++g->arrived < g->expected) {
    pthread_mutex_unlock(&b->groups_mutex);
    return NULL;
  }
  *link = g->next;
  pthread_mutex_unlock(&b->groups_mutex);
  pw_sim_group_complete(b, g);
  return NULL;
}

void pw_sim__groups_device_failed(pw_sim__backend_t* b, uint32_t device, uint64_t fail_at) {
  /* Parts of several groups, each group's in mesh order. */
  pw_sim__part_t* lists[16];
  size_t count = 0;
  bool more = true;
  while (more) {
    more = false;
    pthread_mutex_lock(&b->groups_mutex);
    for (pw_sim__group_t* g = b->groups; g != NULL; g = g->next) {
      if (g->failure != NULL) continue;
      bool member = false;
      for (uint32_t m = 0; m < g->expected && !member; ++m) member = g->devices[m] == device;
      if (!member) continue;
      if (count == sizeof(lists) / sizeof(lists[0])) {
        more = true;
        break;
      }
      const char* op = "?";
      for (uint32_t m = 0; m < g->expected; ++m) {
        if (g->parts[m] != NULL) op = g->parts[m]->executable->program.name;
      }
      pw_status_t status = pw_sim__unavailable(b, PW_SIM__NO_DEVICE, fail_at, op, g->gang_id,
                                               device);
      lists[count++] = pw_sim_group_fail(g, status, fail_at, PW_SIM_EVENT_FAILED);
    }
    pthread_mutex_unlock(&b->groups_mutex);
    for (size_t i = 0; i < count; ++i) pw_sim_complete_list(b, lists[i]);
    count = 0;
  }
}

void pw_sim__groups_shutdown(pw_sim__backend_t* b) {
  pthread_mutex_lock(&b->groups_mutex);
  pw_sim__group_t* groups = b->groups;
  b->groups = NULL;
  pthread_mutex_unlock(&b->groups_mutex);
  while (groups != NULL) {
    pw_sim__group_t* g = groups;
    groups = g->next;
    if (g->failure == NULL) {
      pw_status_t status = pw_status_make(PW_STATUS_CANCELLED,
                                          "sim backend destroyed while collective gang %llu "
                                          "waited for %u of %u members",
                                          (unsigned long long)g->gang_id,
                                          g->expected - g->arrived, g->expected);
      pw_sim_complete_list(b, pw_sim_group_fail(g, status, g->max_arrival,
                                                PW_SIM_EVENT_CANCELLED));
    }
    pw_sim__group_free(b, g);
  }
}
