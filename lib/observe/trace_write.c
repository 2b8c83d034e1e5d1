/* Writing a stopped trace (include/pathways/trace.h): the rings' records
 * merged into one time-ordered array, the runtime's slices and clients as
 * the exporter names them (trace_record.h), then the Chrome Trace Event
 * JSON (pw__trace_export_json) through the caller's function or into a file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "observe/observe.h"
#include "observe/trace_internal.h"
#include "observe/trace_record.h"
#include "pathways/trace.h"
#include "plugin/backend_call.h"

typedef struct pw_trace_key_s {
  uint64_t ts_ns;
  uint32_t ring;   /* into the rings' array */
  uint32_t thread;
  uint64_t seq;    /* position in its ring */
} pw_trace_key_t;

static int pw_trace_key_cmp(const void* a, const void* b) {
  const pw_trace_key_t* x = a;
  const pw_trace_key_t* y = b;
  if (x->ts_ns != y->ts_ns) return x->ts_ns < y->ts_ns ? -1 : 1;
  if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Every record kept, oldest first per ring, then merged by time. */
static pw_status_t pw_trace_merge(pw_trace_t* t, pw_trace_record_t** out, size_t* out_count) {
  pw_allocator_t a = t->runtime->allocator;
  size_t total = 0;
  for (pw_trace_ring_t* r = t->rings; r != NULL; r = r->next) total += pw__trace_ring_kept(t, r);
  *out = NULL;
  *out_count = 0;
  if (total == 0) return NULL;
  pw_trace_key_t* keys = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc_array(a, total, sizeof(*keys), 0, (void**)&keys));
  size_t n = 0;
  uint32_t ring = 0;
  for (pw_trace_ring_t* r = t->rings; r != NULL; r = r->next, ++ring) {
    uint64_t head = pw_atomic_load_u64_relaxed(&r->head);
    uint64_t kept = pw__trace_ring_kept(t, r);
    for (uint64_t seq = head - kept; seq < head; ++seq) {
      const pw_trace_record_t* rec = &r->records[seq & (t->capacity - 1)];
      keys[n++] = (pw_trace_key_t){rec->ts_ns, ring, rec->thread, seq};
    }
  }
  qsort(keys, n, sizeof(*keys), pw_trace_key_cmp);
  pw_trace_ring_t** rings = NULL;
  pw_status_t status = pw_allocator_calloc_array(a, t->ring_count, sizeof(*rings), 0, (void**)&rings);
  pw_trace_record_t* records = NULL;
  if (status == NULL) {
    status = pw_allocator_calloc_array(a, n, sizeof(*records), 0, (void**)&records);
  }
  if (status == NULL) {
    ring = 0;
    for (pw_trace_ring_t* r = t->rings; r != NULL; r = r->next) rings[ring++] = r;
    for (size_t i = 0; i < n; ++i) {
      records[i] = rings[keys[i].ring]->records[keys[i].seq & (t->capacity - 1)];
    }
    *out = records;
    *out_count = n;
  }
  pw_allocator_free(a, rings, t->ring_count * sizeof(*rings));
  pw_allocator_free(a, keys, total * sizeof(*keys));
  return status;
}

/* The hosts of |slice|'s mesh devices, from its backend (0s when it
 * cannot say). */
static pw_status_t pw_trace_hosts(pw_runtime_t* rt, const pw_slice_t* slice, uint32_t** out) {
  PW_RETURN_IF_ERROR(pw_allocator_calloc_array(rt->allocator, slice->device_count,
                                               sizeof(uint32_t), 0, (void**)out));
  for (uint32_t i = 0; i < slice->device_count; ++i) {
    pw_backend_device_info_t info;
    memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    pw_status_t status = pw__backend_device_info(slice->backend, slice->group_devices[i], &info);
    if (status != NULL) {
      pw_status_free(status);
      memset(*out, 0, slice->device_count * sizeof(uint32_t));
      return NULL;
    }
    (*out)[i] = info.host;
  }
  return NULL;
}

typedef struct pw_trace_write_s {
  pw_trace_write_fn_t fn;
  void* user;
} pw_trace_write_t;

static pw_status_t pw_trace_sink(void* user, const char* bytes, size_t size) {
  pw_trace_write_t* w = user;
  return w->fn(w->user, bytes, size);
}

static pw_status_t pw_trace_export(pw_trace_t* t, pw_trace_write_fn_t fn, void* user) {
  pw_runtime_t* rt = t->runtime;
  pw_allocator_t a = rt->allocator;
  pw_trace_dump_t dump;
  memset(&dump, 0, sizeof(dump));
  pw_trace_record_t* records = NULL;
  size_t count = 0;
  PW_RETURN_IF_ERROR(pw_trace_merge(t, &records, &count));
  pw_trace_stats_t stats;
  memset(&stats, 0, sizeof(stats));
  pw__trace_counts(t, &stats);
  pw_trace_slice_t* slices = NULL;
  pw_status_t status =
      pw_allocator_calloc_array(a, rt->slice_count, sizeof(*slices), 0, (void**)&slices);
  for (uint32_t s = 0; status == NULL && s < rt->slice_count; ++s) {
    const pw_slice_t* slice = &rt->slices[s];
    uint32_t* hosts = NULL;
    status = pw_trace_hosts(rt, slice, &hosts);
    slices[s] = (pw_trace_slice_t){slice->name, pw__backend_name(slice->backend),
                                   slice->device_count, hosts};
  }
  static const char no_names[1][64];
  pw_observe_t* o = rt->observer;
  if (status == NULL) {
    dump.records = records;
    dump.record_count = count;
    dump.dropped = stats.dropped;
    dump.thread_count = stats.threads;
    dump.slices = slices;
    dump.slice_count = rt->slice_count;
    /* Filled only at SUBMITs, which this trace no longer records. */
    pthread_mutex_lock(&o->lock);
    dump.client_names = o->client_names != NULL ? (const char(*)[64])o->client_names : no_names;
    dump.client_count = o->client_names != NULL ? PW_HANDLE_TAGS_MAX + 1 : 1;
    pthread_mutex_unlock(&o->lock);
    dump.origin_ns = t->origin_ns;
    dump.clock = t->clock_name;
    pw_trace_write_t w = {fn, user};
    status = pw__trace_export_json(&dump, pw_trace_sink, &w);
  }
  for (uint32_t s = 0; slices != NULL && s < rt->slice_count; ++s) {
    pw_allocator_free(a, (void*)slices[s].device_hosts,
                      rt->slices[s].device_count * sizeof(uint32_t));
  }
  pw_allocator_free(a, slices, rt->slice_count * sizeof(*slices));
  pw_allocator_free(a, records, count * sizeof(*records));
  return status;
}

pw_status_t pw_runtime_trace_write(pw_runtime_t* runtime, pw_trace_write_fn_t fn, void* user) {
  if (runtime == NULL || fn == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_runtime_trace_write: %s is NULL",
                          runtime == NULL ? "runtime" : "fn");
  }
  pw_observe_t* o = runtime->observer;
  pthread_mutex_lock(&o->control_lock);
  pthread_mutex_lock(&o->lock);
  pw_trace_t* t = (pw_trace_t*)o->kept_trace;
  bool recording = pw_atomic_load_ptr_relaxed(&o->trace) != NULL;
  pthread_mutex_unlock(&o->lock);
  pw_status_t status = NULL;
  if (t == NULL) {
    status = pw_status_make(PW_STATUS_NOT_FOUND, "pw_runtime_trace_write: no trace was started");
  } else if (recording) {
    status = pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                            "pw_runtime_trace_write: the trace is still recording (stop it first)");
  } else {
    status = pw_trace_export(t, fn, user);
    if (status != NULL) status = pw_status_annotate(status, "pw_runtime_trace_write");
  }
  pthread_mutex_unlock(&o->control_lock);
  return status;
}

static pw_status_t pw_trace_file_write(void* user, const char* bytes, size_t size) {
  FILE* f = user;
  if (size != 0 && fwrite(bytes, 1, size, f) != size) {
    return pw_status_make(PW_STATUS_UNAVAILABLE, "write failed: %s", strerror(errno));
  }
  return NULL;
}

pw_status_t pw_runtime_trace_write_file(pw_runtime_t* runtime, const char* path) {
  if (runtime == NULL || path == NULL || path[0] == '\0') {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_runtime_trace_write_file: %s",
                          runtime == NULL ? "runtime is NULL" : "path is NULL or empty");
  }
  size_t n = strlen(path);
  char* tmp = malloc(n + 5);
  if (tmp == NULL) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "pw_runtime_trace_write_file: out of memory");
  }
  memcpy(tmp, path, n);
  memcpy(tmp + n, ".tmp", 5);
  FILE* f = fopen(tmp, "wb");
  if (f == NULL) {
    pw_status_t status = pw_status_make(PW_STATUS_UNAVAILABLE,
                                        "pw_runtime_trace_write_file: cannot create '%s': %s",
                                        tmp, strerror(errno));
    free(tmp);
    return status;
  }
  pw_status_t status = pw_runtime_trace_write(runtime, pw_trace_file_write, f);
  if (fclose(f) != 0 && status == NULL) {
    status = pw_status_make(PW_STATUS_UNAVAILABLE, "pw_runtime_trace_write_file: closing '%s': %s",
                            tmp, strerror(errno));
  }
  if (status == NULL && rename(tmp, path) != 0) {
    status = pw_status_make(PW_STATUS_UNAVAILABLE,
                            "pw_runtime_trace_write_file: renaming '%s' to '%s': %s", tmp, path,
                            strerror(errno));
  }
  if (status != NULL) {
    remove(tmp);
    status = pw_status_annotate(status, "'%s'", path);
  }
  free(tmp);
  return status;
}
