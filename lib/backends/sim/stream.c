/* The sim backend's ordered devices (queue_depth > 0 or
 * blocking_collectives; sim.h, STREAMS): each device's queue of accepted
 * launches, deciding their virtual times in queue order, holding what
 * cannot start yet, releasing completions in queue order, collectives of
 * ordered devices, and the detection of collective deadlocks.
 *
 * Everything here is guarded by stream_mutex. A change (a launch
 * accepted, a gang met or failed, a completion delivered) marks devices
 * dirty; pw_sim_process pumps each dirty device (decides what it can, in
 * order) and releases its decided head parts: INLINE into one FIFO that a
 * single thread at a time delivers (so done runs in queue order even when
 * a done callback launches again), queued modes into the event heap, one
 * part per device at a time (the next is released when it is
 * delivered). */
#include <stdio.h>
#include <string.h>

#include "backends/sim/sim_internal.h"

#define PW_SIM_NO_DIRTY UINT32_MAX

pw_status_t pw_sim__streams_init(pw_sim__backend_t* b) {
  b->dirty_top = PW_SIM_NO_DIRTY;
  if (!b->ordered) return NULL;
  void* memory = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_allocator_calloc_array(b->allocator, b->device_count,
                                                   sizeof(pw_sim__stream_t),
                                                   alignof(pw_sim__stream_t), &memory),
                         "sim ordered devices: %u queues", b->device_count);
  b->streams = memory;
  return NULL;
}

static void pw_sim_dirty(pw_sim__backend_t* b, uint32_t device) {
  pw_sim__stream_t* s = &b->streams[device];
  if (s->dirty) return;
  s->dirty = true;
  s->dirty_next = b->dirty_top;
  b->dirty_top = device;
}

static pw_sim__group_t* pw_sim_ogroup_find(pw_sim__backend_t* b, uint64_t gang_id,
                                           pw_sim__group_t*** out_link) {
  pw_sim__group_t** link = &b->ogroups;
  while (*link != NULL && (*link)->gang_id != gang_id) link = &(*link)->next;
  *out_link = link;
  return *link;
}

static void pw_sim_ogroup_unlink(pw_sim__backend_t* b, pw_sim__group_t* g) {
  pw_sim__group_t** link = NULL;
  if (pw_sim_ogroup_find(b, g->gang_id, &link) == g) *link = g->next;
}

/* Counts one arrival (or refusal) at a failed group; frees it once every
 * member has come. */
static void pw_sim_tombstone_arrival(pw_sim__backend_t* b, pw_sim__group_t* g) {
  if (++g->arrived < g->expected) return;
  pw_sim_ogroup_unlink(b, g);
  pw_sim__group_free(b, g);
}

/* Decides |part| failed with a copy of |status| at max(its start, |at|). */
static void pw_sim_part_fail(pw_sim__part_t* part, const pw_status_t status, uint64_t at) {
  part->kind = PW_SIM_EVENT_FAILED;
  part->time = part->start > at ? part->start : at;
  part->begin = part->start;
  pw_status_free(part->status);
  part->status = pw_status_clone(status);
  part->decided = true;
}

/* Fails group |g| (|status| consumed; the first failure is kept): its
 * arrived parts complete at max(start, |at|), their devices resume. */
static void pw_sim_ogroup_fail(pw_sim__backend_t* b, pw_sim__group_t* g, pw_status_t status,
                               uint64_t at) {
  if (g->failure == NULL) {
    g->failure = status;
  } else {
    pw_status_free(status);
  }
  for (uint32_t m = 0; m < g->expected; ++m) {
    pw_sim__part_t* part = g->parts[m];
    if (part == NULL) continue;
    g->parts[m] = NULL;
    pw_sim_part_fail(part, g->failure, at);
    part->group = NULL;
    pw_sim__stream_t* s = &b->streams[part->device];
    if (s->waiting == part) s->waiting = NULL;
    pw_sim__device_t* d = &b->devices[part->device];
    pw_sim__device_lock(d);
    if (part->time > d->busy_until) d->busy_until = part->time;
    pw_sim__device_unlock(d);
    pw_sim_dirty(b, part->device);
  }
  if (g->arrived >= g->expected) {
    pw_sim_ogroup_unlink(b, g);
    pw_sim__group_free(b, g);
  }
}

/* Every member arrived: decide the group (sim.h, VIRTUAL TIME). */
static void pw_sim_ogroup_complete(pw_sim__backend_t* b, pw_sim__group_t* g) {
  uint64_t end = g->max_arrival + g->cost_ns;
  uint32_t failed_device = PW_SIM__NO_DEVICE;
  uint64_t first_fail = pw_sim__group_first_failure(b, g, end, &failed_device);
  if (failed_device != PW_SIM__NO_DEVICE) {
    pw_status_t status = pw_sim__unavailable(b, PW_SIM__NO_DEVICE, first_fail,
                                             g->parts[0]->executable->program.name, g->gang_id,
                                             failed_device);
    pw_sim_ogroup_fail(b, g, status, g->max_arrival > first_fail ? g->max_arrival : first_fail);
    return;
  }
  if (g->kind == PW_SIM__ALL_REDUCE_SUM) pw_sim__all_reduce(g);
  for (uint32_t m = 0; m < g->expected; ++m) {
    pw_sim__part_t* part = g->parts[m];
    part->time = end;
    part->begin = g->max_arrival;
    part->decided = true;
    part->group = NULL;
    if (part->output0 != NULL) pw_sim__raise(&part->output0->ready_at, end);
    pw_sim__device_t* d = &b->devices[part->device];
    pw_sim__device_lock(d);
    if (end > d->busy_until) d->busy_until = end;
    pw_sim__device_unlock(d);
    pw_sim__stream_t* s = &b->streams[part->device];
    if (s->waiting == part) s->waiting = NULL;
    pw_sim_dirty(b, part->device);
  }
  pw_sim_ogroup_unlink(b, g);
  pw_sim__group_free(b, g);
}

/* max(issue, every input's ready time). */
static uint64_t pw_sim_ready(const pw_sim__part_t* part) {
  uint64_t ready = part->issue;
  for (uint32_t i = 0; i < part->input_count; ++i) {
    uint64_t r = atomic_load_explicit(&part->inputs[i]->ready_at, memory_order_relaxed);
    if (r > ready) ready = r;
  }
  return ready;
}

/* Non-blocking devices: true while an earlier collective of |s| that has
 * not met writes one of |part|'s inputs (it waits for the data). */
static bool pw_sim_reads_pending(const pw_sim__stream_t* s, const pw_sim__part_t* part) {
  for (const pw_sim__part_t* q = s->head; q != NULL && q != part; q = q->qnext) {
    if (q->decided || !pw_sim__is_collective(q->executable->program.kind)) continue;
    for (uint32_t o = 0; o < q->output_count; ++o) {
      for (uint32_t i = 0; i < part->input_count; ++i) {
        if (q->outputs[o] == part->inputs[i]) return true;
      }
    }
  }
  return false;
}

/* A compute (or copy) part at its device's turn: its virtual times. */
static void pw_sim_decide_compute(pw_sim__backend_t* b, pw_sim__part_t* part) {
  pw_backend_executable_t e = part->executable;
  pw_sim__device_t* d = &b->devices[part->device];
  uint64_t ready = pw_sim_ready(part);
  pw_sim__device_lock(d);
  uint64_t start = d->busy_until > ready ? d->busy_until : ready;
  uint64_t end = start + e->cost_ns;
  uint64_t f = atomic_load_explicit(&d->fail_at, memory_order_relaxed);
  bool failed = f <= start || f < end;
  part->start = part->begin = start;
  part->time = failed ? (f > start ? f : start) : end;
  d->busy_until = part->time;
  pw_sim__device_unlock(d);
  part->decided = true;
  if (failed) {
    part->kind = PW_SIM_EVENT_FAILED;
    part->status = pw_sim__unavailable(b, part->device, f, e->program.name, part->gang_id,
                                       part->device);
    return;
  }
  if (e->program.kind == PW_SIM__COPY && part->inputs[0]->data != NULL &&
      part->outputs[0]->data != NULL && e->input_bytes[0] > 0) {
    memcpy(part->outputs[0]->data, part->inputs[0]->data, e->input_bytes[0]);
  }
  for (uint32_t o = 0; o < part->output_count; ++o) {
    pw_sim__raise(&part->outputs[o]->ready_at, part->time);
  }
}

/* A collective part at its device's turn: it arrives in its gang's group. */
static void pw_sim_arrive(pw_sim__backend_t* b, pw_sim__stream_t* s, pw_sim__part_t* part) {
  pw_backend_executable_t e = part->executable;
  pw_sim__device_t* d = &b->devices[part->device];
  uint64_t ready = pw_sim_ready(part);
  pw_sim__device_lock(d);
  part->start = part->begin = d->busy_until > ready ? d->busy_until : ready;
  d->busy_until = part->start;
  pw_sim__device_unlock(d);
  pw_sim__group_t** link = NULL;
  pw_sim__group_t* g = pw_sim_ogroup_find(b, part->gang_id, &link);
  if (g == NULL) {
    /* Its group was made at launch; gone only if the gang was abandoned
     * and every member counted (a surplus part). */
    pw_status_t status = pw_status_make(PW_STATUS_ABORTED,
                                        "sim collective '%s' (gang %llu) was abandoned before "
                                        "device %u arrived",
                                        e->program.name, (unsigned long long)part->gang_id,
                                        part->device);
    pw_sim_part_fail(part, status, part->start);
    pw_status_free(status);
    return;
  }
  if (g->failure != NULL) {
    pw_sim_part_fail(part, g->failure, part->start);
    pw_sim_tombstone_arrival(b, g);
    return;
  }
  if (g->exe_cost_ns != e->cost_ns || g->kind != e->program.kind ||
      g->parts[part->mesh_index] != NULL) {
    pw_status_t mismatch = pw_status_make(
        PW_STATUS_INVALID_ARGUMENT,
        "sim collective gang %llu: device %u launched '%s' (%s over %u devices) at mesh "
        "position %u, which does not fit the gang's other members",
        (unsigned long long)part->gang_id, part->device, e->program.name,
        pw_sim__kind_name(e->program.kind), e->group_size, part->mesh_index);
    pw_sim_part_fail(part, mismatch, g->max_arrival);
    ++g->arrived;
    pw_sim_ogroup_fail(b, g, mismatch, g->max_arrival);
    return;
  }
  g->parts[part->mesh_index] = part;
  part->group = g;
  if (part->start > g->max_arrival) g->max_arrival = part->start;
  if (++g->arrived == g->expected) {
    pw_sim_ogroup_complete(b, g);
    return;
  }
  if (b->blocking) {
    s->waiting = part;
    b->check_deadlock = true;
  }
}

/* Decides |device|'s launches in queue order as far as it can. */
static void pw_sim_pump(pw_sim__backend_t* b, uint32_t device) {
  pw_sim__stream_t* s = &b->streams[device];
  while (s->next != NULL && s->waiting == NULL) {
    pw_sim__part_t* part = s->next;
    if (pw_sim__is_collective(part->executable->program.kind)) {
      s->next = part->qnext;
      pw_sim_arrive(b, s, part);
      continue;
    }
    if (!b->blocking && pw_sim_reads_pending(s, part)) return;
    s->next = part->qnext;
    pw_sim_decide_compute(b, part);
  }
}

/* True while a direct launch of |device| has not returned from its done
 * (INLINE): its later parts wait, so done keeps queue order. */
static bool pw_sim_direct_active(pw_sim__backend_t* b, uint32_t device) {
  pw_sim__device_t* d = &b->devices[device];
  pw_sim__device_lock(d);
  bool active = atomic_load_explicit(&d->direct, memory_order_relaxed) != 0u;
  pw_sim__device_unlock(d);
  return active;
}

/* Hands |device|'s decided head parts on, in queue order. */
static void pw_sim_release(pw_sim__backend_t* b, uint32_t device) {
  pw_sim__stream_t* s = &b->streams[device];
  if (b->mode == PW_SIM_MODE_INLINE && s->head != NULL && s->head->decided &&
      pw_sim_direct_active(b, device)) {
    return;
  }
  while (s->head != NULL && s->head->decided) {
    if (b->mode != PW_SIM_MODE_INLINE && s->in_heap) return;
    pw_sim__part_t* part = s->head;
    s->head = part->qnext;
    if (s->head == NULL) s->tail = NULL;
    part->qnext = NULL;
    part->next = NULL;
    if (b->mode == PW_SIM_MODE_INLINE) {
      if (b->inline_tail != NULL) {
        b->inline_tail->next = part;
      } else {
        b->inline_head = part;
      }
      b->inline_tail = part;
    } else {
      s->in_heap = true;
      pw_sim__queue_push(b, part);
    }
  }
}

/* The devices |g| waits for that are blocked in another collective form
 * its edges; a cycle of such waits can never resolve. Returns a group of
 * the cycle found (its members linked through |parent|), or NULL. */
static pw_sim__group_t* pw_sim_find_deadlock(pw_sim__backend_t* b) {
  for (pw_sim__group_t* g = b->ogroups; g != NULL; g = g->next) g->color = 0;
  for (pw_sim__group_t* root = b->ogroups; root != NULL; root = root->next) {
    if (root->color != 0 || root->failure != NULL) continue;
    root->color = 1;
    root->cursor = 0;
    root->parent = NULL;
    pw_sim__group_t* cur = root;
    while (cur != NULL) {
      if (cur->cursor >= cur->expected) {
        cur->color = 2;
        cur = cur->parent;
        continue;
      }
      uint32_t m = cur->cursor++;
      if (cur->parts[m] != NULL) continue;
      pw_sim__part_t* w = b->streams[cur->devices[m]].waiting;
      if (w == NULL || w->group == NULL || w->group == cur || w->group->failure != NULL) continue;
      pw_sim__group_t* h = w->group;
      if (h->color == 2) continue;
      cur->via_device = cur->devices[m];
      if (h->color == 1) {
        h->parent = cur; /* closes the cycle: h ... cur -> h */
        return h;
      }
      h->color = 1;
      h->cursor = 0;
      h->parent = cur;
      cur = h;
    }
  }
  return NULL;
}

/* Fails every gang of the cycle through |h| with one ABORTED message. */
static void pw_sim_break_deadlock(pw_sim__backend_t* b, pw_sim__group_t* h) {
  char message[512];
  size_t used = (size_t)snprintf(message, sizeof(message), "sim collective deadlock:");
  pw_sim__group_t* cycle[64];
  size_t count = 0;
  /* Walk back from h's closing edge: parent pointers run against the waits. */
  pw_sim__group_t* g = h->parent;
  while (count < sizeof(cycle) / sizeof(cycle[0])) {
    cycle[count++] = g;
    if (g == h) break;
    g = g->parent;
  }
  for (size_t i = count; i-- > 0;) {
    pw_sim__group_t* c = cycle[i];
    uint64_t blocked = b->streams[c->via_device].waiting->gang_id;
    if (used < sizeof(message)) {
      used += (size_t)snprintf(message + used, sizeof(message) - used,
                               "%s gang %llu waits for device %u, which is blocked in gang %llu",
                               i + 1 == count ? "" : ";", (unsigned long long)c->gang_id,
                               c->via_device, (unsigned long long)blocked);
    }
  }
  pw_log(&b->logger, PW_LOG_WARN, PW_SIM_LOG, "%s", message);
  for (size_t i = 0; i < count; ++i) {
    pw_sim_ogroup_fail(b, cycle[i], pw_status_make(PW_STATUS_ABORTED, "%s", message),
                       cycle[i]->max_arrival);
  }
}

static void pw_sim_process(pw_sim__backend_t* b) {
  for (;;) {
    while (b->dirty_top != PW_SIM_NO_DIRTY) {
      uint32_t device = b->dirty_top;
      pw_sim__stream_t* s = &b->streams[device];
      b->dirty_top = s->dirty_next;
      s->dirty = false;
      pw_sim_pump(b, device);
      pw_sim_release(b, device);
    }
    if (!b->check_deadlock) return;
    b->check_deadlock = false;
    pw_sim__group_t* h = pw_sim_find_deadlock(b);
    if (h == NULL) return;
    pw_sim_break_deadlock(b, h);
    b->check_deadlock = true; /* another cycle may remain */
  }
}

/* INLINE: delivers the released FIFO, one thread at a time. */
static void pw_sim_drain_inline(pw_sim__backend_t* b) {
  if (b->mode != PW_SIM_MODE_INLINE) return;
  pthread_mutex_lock(&b->stream_mutex);
  if (b->inline_draining) {
    pthread_mutex_unlock(&b->stream_mutex);
    return;
  }
  b->inline_draining = true;
  for (;;) {
    pw_sim__part_t* part = b->inline_head;
    if (part == NULL) break;
    b->inline_head = part->next;
    if (b->inline_head == NULL) b->inline_tail = NULL;
    part->next = NULL;
    pthread_mutex_unlock(&b->stream_mutex);
    pw_sim__device_t* d = &b->devices[part->device];
    pw_sim__deliver(b, part);
    pw_sim__device_lock(d);
    d->slow_parts--;
    pw_sim__device_unlock(d);
    pthread_mutex_lock(&b->stream_mutex);
  }
  b->inline_draining = false;
  pthread_mutex_unlock(&b->stream_mutex);
}

/* A refused launch of a collective fails its gang; stream_mutex held. */
static void pw_sim_refused_locked(pw_sim__backend_t* b, const pw_backend_launch_t* l) {
  pw_status_t status = pw_sim__refusal_status(b, l);
  if (status == NULL) return;
  pw_backend_executable_t e = l->executable;
  pw_sim__group_t** link = NULL;
  pw_sim__group_t* g = pw_sim_ogroup_find(b, l->gang_id, &link);
  if (g == NULL) {
    if (l->group_size != e->group_size || l->group_devices == NULL || l->group_size < 2 ||
        pw_sim__group_new(b, l, &g) != NULL) {
      /* No tombstone (a bad group, or no memory): members already
       * launched keep waiting for the gang, as real chips would. */
      pw_status_free(status);
      return;
    }
    g->next = b->ogroups;
    b->ogroups = g;
    g->failure = status;
    g->arrived = 1;
    return;
  }
  ++g->arrived;
  pw_sim_ogroup_fail(b, g, status, g->max_arrival);
}

void pw_sim__stream_refused(pw_sim__backend_t* b, const pw_backend_launch_t* l) {
  if (l == NULL || l->struct_size < PW_BACKEND_LAUNCH_SIZE_V1) return;
  pthread_mutex_lock(&b->stream_mutex);
  pw_sim_refused_locked(b, l);
  pw_sim_process(b);
  pthread_mutex_unlock(&b->stream_mutex);
  pw_sim_drain_inline(b);
}

/*---------------------------------------------------------------------------
 * INLINE direct launch: a compute (or copy) launch on a device that has
 * nothing in the stream machinery (every earlier launch of it delivered)
 * is decided when it arrives and completed at once, as the unordered
 * INLINE path does: no part, no stream_mutex. Its virtual times, trace
 * event and chain fold are the ones the queue would give it (it would be
 * the device's head, decided at once and released first). It is taken
 * only outside done callbacks, so a launch made from a done still queues
 * behind it and its done runs after this one returns; launches that
 * arrive (from other threads) while it runs go through the queue, whose
 * release of the device waits until this done has returned.
 *-------------------------------------------------------------------------*/

/* Kicks |device|'s queue after a direct launch held it. */
static void pw_sim_direct_kick(pw_sim__backend_t* b, uint32_t device) {
  pthread_mutex_lock(&b->stream_mutex);
  pw_sim_dirty(b, device);
  pw_sim_process(b);
  pthread_mutex_unlock(&b->stream_mutex);
  pw_sim_drain_inline(b);
}

/* True if it took |l| (and ran its done). */
static bool pw_sim_launch_direct(pw_sim__backend_t* b, const pw_backend_launch_t* l,
                                 uint64_t issue) {
  pw_backend_executable_t e = l->executable;
  if (b->mode != PW_SIM_MODE_INLINE || pw_sim__is_collective(e->program.kind) ||
      pw_sim__in_done_callback()) {
    return false;
  }
  bool v2 = l->struct_size >= PW_BACKEND_LAUNCH_SIZE_V2;
  uint64_t seq = v2 ? l->queue_seq : 0;
  uint64_t ready = issue;
  for (uint32_t i = 0; i < l->input_count; ++i) {
    uint64_t r = atomic_load_explicit(&l->inputs[i]->ready_at, memory_order_relaxed);
    if (r > ready) ready = r;
  }
  pw_sim__device_t* d = &b->devices[l->device];
  pw_sim__device_lock(d);
  if (d->slow_parts != 0 || atomic_load_explicit(&d->direct, memory_order_relaxed) != 0u ||
      (seq != 0 && seq <= d->last_seq)) {
    pw_sim__device_unlock(d);
    return false; /* the queue decides (or refuses) it */
  }
  if (seq > d->last_seq) d->last_seq = seq;
  atomic_store_explicit(&d->direct, 2u, memory_order_relaxed);
  pw_sim__decision_t c;
  pw_sim__decide_locked(d, l, ready, &c);
  pw_sim__device_unlock(d);
  pw_status_t status = pw_sim__decided(b, l, &c);
  atomic_store_explicit(&d->direct, 1u, memory_order_relaxed); /* no longer outstanding */
  pw_sim__call_done(b, l->done, v2 ? l->done_timed : NULL, l->done_user, status, true, c.start,
                    c.time);
  pw_sim__device_lock(d);
  atomic_store_explicit(&d->direct, 0u, memory_order_relaxed);
  bool held = d->slow_parts != 0;
  pw_sim__device_unlock(d);
  if (held) pw_sim_direct_kick(b, l->device);
  return true;
}

pw_status_t pw_sim__stream_launch(pw_sim__backend_t* b, const pw_backend_launch_t* l,
                                  uint64_t issue) {
  if (pw_sim_launch_direct(b, l, issue)) return NULL;
  pw_sim__part_t* part = NULL;
  pw_status_t status = pw_sim__part_new(b, l, &part);
  if (status != NULL) {
    pw_sim__stream_refused(b, l);
    return status;
  }
  part->ordered = true;
  part->issue = issue;
  uint64_t seq = l->struct_size >= PW_BACKEND_LAUNCH_SIZE_V2 ? l->queue_seq : 0;
  const char* name = l->executable->program.name;
  pthread_mutex_lock(&b->stream_mutex);
  pw_sim__stream_t* s = &b->streams[l->device];
  pw_sim__device_t* d = &b->devices[l->device];
  pw_sim__device_lock(d);
  uint64_t last_seq = d->last_seq;
  /* A direct launch counts until its done is called, as a part does. */
  uint32_t outstanding =
      s->outstanding + (atomic_load_explicit(&d->direct, memory_order_relaxed) == 2u);
  bool seq_ok = seq == 0 || seq > last_seq;
  bool room = b->queue_depth == 0 || outstanding < b->queue_depth;
  if (seq > last_seq) d->last_seq = seq;
  bool inline_mode = b->mode == PW_SIM_MODE_INLINE;
  if (seq_ok && room && inline_mode) d->slow_parts++;
  pw_sim__device_unlock(d);
  if (!seq_ok) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "sim launch of '%s' (gang %llu) on device %u: queue_seq %llu comes "
                            "after %llu (a device's launches must come in increasing queue_seq)",
                            name, (unsigned long long)l->gang_id, l->device,
                            (unsigned long long)seq, (unsigned long long)last_seq);
  } else if (!room) {
    char device[64];
    pw_sim__device_name(b, l->device, device, sizeof(device));
    status = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                            "sim %s: queue full (depth %u, %u launches outstanding); launch of "
                            "'%s' (gang %llu, queue_seq %llu) refused",
                            device, b->queue_depth, outstanding, name,
                            (unsigned long long)l->gang_id, (unsigned long long)seq);
  }
  pw_sim__group_t* g = NULL;
  if (status == NULL && pw_sim__is_collective(l->executable->program.kind)) {
    pw_sim__group_t** link = NULL;
    g = pw_sim_ogroup_find(b, l->gang_id, &link);
    if (g == NULL) {
      status = pw_sim__group_new(b, l, &g);
      if (status == NULL) {
        g->next = b->ogroups;
        b->ogroups = g;
      }
    }
  }
  if (status != NULL) {
    if (seq_ok && room && inline_mode) {
      pw_sim__device_lock(d);
      d->slow_parts--;
      pw_sim__device_unlock(d);
    }
    pw_sim_refused_locked(b, l);
    pw_sim_process(b);
    pthread_mutex_unlock(&b->stream_mutex);
    pw_sim__part_discard(b, part);
    pw_sim_drain_inline(b);
    return status;
  }
  if (s->tail != NULL) {
    s->tail->qnext = part;
  } else {
    s->head = part;
  }
  s->tail = part;
  if (s->next == NULL) s->next = part;
  s->outstanding++;
  /* A part queued behind a blocked device may close a cycle of waits. */
  if (g != NULL && b->blocking) b->check_deadlock = true;
  pw_sim_dirty(b, l->device);
  pw_sim_process(b);
  pthread_mutex_unlock(&b->stream_mutex);
  pw_sim_drain_inline(b);
  return NULL;
}

void pw_sim__stream_delivered(pw_sim__backend_t* b, pw_sim__part_t* part) {
  pthread_mutex_lock(&b->stream_mutex);
  pw_sim__stream_t* s = &b->streams[part->device];
  s->outstanding--;
  if (b->mode != PW_SIM_MODE_INLINE) {
    s->in_heap = false;
    pw_sim_dirty(b, part->device);
    pw_sim_process(b);
  }
  pthread_mutex_unlock(&b->stream_mutex);
}

void pw_sim__stream_device_failed(pw_sim__backend_t* b, uint32_t device, uint64_t fail_at) {
  pthread_mutex_lock(&b->stream_mutex);
  bool again = true;
  while (again) {
    again = false;
    for (pw_sim__group_t* g = b->ogroups; g != NULL; g = g->next) {
      if (g->failure != NULL) continue;
      bool member = false;
      for (uint32_t m = 0; m < g->expected && !member; ++m) member = g->devices[m] == device;
      if (!member) continue;
      const char* op = "?";
      for (uint32_t m = 0; m < g->expected; ++m) {
        if (g->parts[m] != NULL) op = g->parts[m]->executable->program.name;
      }
      /* Failing may free g (and unlink it): restart the walk. */
      pw_sim_ogroup_fail(b, g,
                         pw_sim__unavailable(b, PW_SIM__NO_DEVICE, fail_at, op, g->gang_id,
                                             device),
                         fail_at);
      again = true;
      break;
    }
  }
  pw_sim_process(b);
  pthread_mutex_unlock(&b->stream_mutex);
  pw_sim_drain_inline(b);
}

void pw_sim__streams_shutdown(pw_sim__backend_t* b) {
  if (b->streams == NULL) {
    pw_sim__parts_shutdown(b);
    return;
  }
  pw_sim__part_t* list = NULL;
  pw_sim__part_t** tail = &list;
  pthread_mutex_lock(&b->stream_mutex);
  for (uint32_t device = 0; device < b->device_count; ++device) {
    pw_sim__stream_t* s = &b->streams[device];
    for (pw_sim__part_t* part = s->head; part != NULL;) {
      pw_sim__part_t* next = part->qnext;
      part->qnext = NULL;
      part->ordered = false;
      pw_status_free(part->status);
      part->status = pw_status_make(PW_STATUS_CANCELLED,
                                    "sim backend destroyed before op '%s' (gang %llu) on "
                                    "device %u completed",
                                    part->executable->program.name,
                                    (unsigned long long)part->gang_id, part->device);
      part->kind = PW_SIM_EVENT_CANCELLED;
      if (!part->decided) part->time = part->start;
      *tail = part;
      tail = &part->next;
      part = next;
    }
    s->head = s->tail = s->next = s->waiting = NULL;
  }
  while (b->ogroups != NULL) {
    pw_sim__group_t* g = b->ogroups;
    b->ogroups = g->next;
    pw_sim__group_free(b, g);
  }
  pthread_mutex_unlock(&b->stream_mutex);
  while (list != NULL) {
    pw_sim__part_t* part = list;
    list = part->next;
    part->next = NULL;
    if (b->mode != PW_SIM_MODE_INLINE) pw_sim__queue_unreserve(b);
    pw_sim__deliver(b, part);
  }
  pw_sim__parts_shutdown(b);
}

void pw_sim__stream_state(pw_sim__backend_t* b, uint32_t device, uint32_t* out_outstanding,
                          uint64_t* out_waiting_gang) {
  *out_outstanding = 0;
  *out_waiting_gang = 0;
  if (b->streams == NULL) return;
  pthread_mutex_lock(&b->stream_mutex);
  *out_outstanding = b->streams[device].outstanding;
  if (b->streams[device].waiting != NULL) {
    *out_waiting_gang = b->streams[device].waiting->gang_id;
  }
  pthread_mutex_unlock(&b->stream_mutex);
}
