#define _POSIX_C_SOURCE 200809L
/* Memory and executables: ALLOC FREE WRITE READ COMPILE LOAD UNLOAD
 * (docs/remote.md, "Messages and what the worker does"). */
#include <stdio.h>
#include <string.h>

#include "plugin/backend_call.h"
#include "worker/worker_internal.h"

/* The LOAD reply's signature list: at most 7 + 23 per parameter. */
#define PW_WORKER_SIGNATURE_MAX 4096u

static bool pw_worker_need_id(pw_worker_t* w, const pw_wire_msg_t* msg, uint64_t id) {
  if (id != 0) return true;
  pw__worker_drop(w, pw__wire_type_name(msg->type),
                  pw_status_make(PW_STATUS_INVALID_ARGUMENT, "id 0 (ids are never 0)"));
  return false;
}

void pw__worker_on_alloc(pw_worker_t* w, const pw_wire_msg_t* msg) {
  uint64_t id = msg->u[PW_WIRE_ALLOC_MEM];
  uint64_t device = msg->u[PW_WIRE_ALLOC_DEVICE];
  uint64_t size = msg->u[PW_WIRE_ALLOC_SIZE];
  if (!pw_worker_need_id(w, msg, id)) return;
  pw_worker_mem_t* m = NULL;
  pw_status_t s = pw_allocator_calloc(w->allocator, sizeof(*m), 0, (void**)&m);
  if (s != NULL) {
    pw__worker_drop(w, "ALLOC", s);
    return;
  }
  m->id = id;
  m->pins = 1;
  m->size = (size_t)size;
  m->device = (uint32_t)device;
  if (device >= w->device_count) {
    m->failure = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                                "ALLOC of memory %llu on device %llu: the worker has %u devices",
                                (unsigned long long)id, (unsigned long long)device,
                                w->device_count);
  } else {
    m->failure = pw__backend_allocate(&w->backend, m->device, m->size, &m->memory);
    if (m->failure != NULL) m->memory = NULL;
  }
  pthread_mutex_lock(&w->lock);
  bool put = pw__worker_table_get(&w->mems, id) == NULL &&
             pw__worker_table_put(w, &w->mems, id, m);
  pthread_mutex_unlock(&w->lock);
  if (!put) {
    pw__worker_drop(w, "ALLOC",
                    pw_status_make(PW_STATUS_ALREADY_EXISTS,
                                   "memory %llu exists (or no room in the table)",
                                   (unsigned long long)id));
    pw__worker_mem_unpin(w, m);
  }
}

void pw__worker_on_free(pw_worker_t* w, const pw_wire_msg_t* msg) {
  uint64_t id = msg->u[PW_WIRE_FREE_MEM];
  pthread_mutex_lock(&w->lock);
  pw_worker_mem_t* m = pw__worker_table_remove(&w->mems, id);
  pthread_mutex_unlock(&w->lock);
  if (m == NULL) {
    pw__worker_drop(w, "FREE", pw_status_make(PW_STATUS_NOT_FOUND, "memory %llu is not allocated",
                                              (unsigned long long)id));
    return;
  }
  pw__worker_mem_unpin(w, m);
}

/* OUT_OF_RANGE unless [offset, offset + size) lies in |m|. */
static pw_status_t pw_worker_range(const pw_worker_mem_t* m, uint64_t offset, uint64_t size) {
  if (offset > m->size || size > m->size - offset) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE,
                          "memory %llu: %llu bytes at offset %llu outside its %zu bytes",
                          (unsigned long long)m->id, (unsigned long long)size,
                          (unsigned long long)offset, m->size);
  }
  return NULL;
}

void pw__worker_on_write(pw_worker_t* w, const pw_wire_msg_t* msg) {
  uint64_t id = msg->u[PW_WIRE_WRITE_ID];
  if (!pw_worker_need_id(w, msg, id)) return;
  pw_worker_mem_t* m = NULL;
  const pw_wire_blob_t* bytes = &msg->blob[PW_WIRE_WRITE_B_BYTES];
  pw_status_t s = pw__worker_mem_pin(w, msg->u[PW_WIRE_WRITE_MEM], &m);
  if (s == NULL) s = pw_worker_range(m, msg->u[PW_WIRE_WRITE_OFFSET], bytes->size);
  if (s == NULL && bytes->size > 0) {
    s = pw__backend_copy_to_device(&w->backend, m->device, m->memory,
                                   (size_t)msg->u[PW_WIRE_WRITE_OFFSET], bytes->data,
                                   bytes->size);
  }
  pw__worker_mem_unpin(w, m);
  pw__worker_reply(w, id, s, NULL, 0, NULL, 0);
}

void pw__worker_on_read(pw_worker_t* w, const pw_wire_msg_t* msg) {
  uint64_t id = msg->u[PW_WIRE_READ_ID];
  if (!pw_worker_need_id(w, msg, id)) return;
  uint64_t size = msg->u[PW_WIRE_READ_SIZE];
  pw_worker_mem_t* m = NULL;
  void* buffer = NULL;
  pw_status_t s = pw__worker_mem_pin(w, msg->u[PW_WIRE_READ_MEM], &m);
  if (s == NULL) s = pw_worker_range(m, msg->u[PW_WIRE_READ_OFFSET], size);
  if (s == NULL && size > PW_WIRE_MAX_BYTES) {
    s = pw_status_make(PW_STATUS_OUT_OF_RANGE, "READ of %llu bytes (at most %u per message)",
                       (unsigned long long)size, PW_WIRE_MAX_BYTES);
  }
  if (s == NULL && size > 0) s = pw_allocator_malloc(w->allocator, (size_t)size, 0, &buffer);
  if (s == NULL && size > 0) {
    s = pw__backend_copy_to_host(&w->backend, m->device, m->memory,
                                 (size_t)msg->u[PW_WIRE_READ_OFFSET], buffer, (size_t)size);
  }
  pw__worker_mem_unpin(w, m);
  pw__worker_reply(w, id, s, s == NULL ? buffer : NULL, s == NULL ? (size_t)size : 0, NULL, 0);
  pw_allocator_free(w->allocator, buffer, (size_t)size);
}

/* COMPILE's axis names, "data,model" ("" for an unnamed mesh), onto
 * |mesh|; INVALID_ARGUMENT naming a bad one (pw_mesh_shape_set_axis_names). */
static pw_status_t pw_worker_axis_names(pw_mesh_shape_t* mesh, const pw_wire_blob_t* blob) {
  if (blob->size == 0) return NULL;
  char text[PW_MAX_MESH_RANK * PW_MESH_AXIS_NAME_MAX];
  pw__wire_blob_text(blob, text, sizeof(text));
  const char* names[PW_MAX_MESH_RANK];
  uint32_t count = 0;
  char* next = text;
  while (next != NULL && count < PW_MAX_MESH_RANK) {
    names[count++] = next;
    next = strchr(next, ',');
    if (next != NULL) *next++ = '\0';
  }
  if (next != NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "COMPILE: more than %d axis names",
                          PW_MAX_MESH_RANK);
  }
  return pw_status_annotate(pw_mesh_shape_set_axis_names(mesh, count, names), "COMPILE");
}

void pw__worker_on_compile(pw_worker_t* w, const pw_wire_msg_t* msg) {
  uint64_t id = msg->u[PW_WIRE_COMPILE_ID];
  if (!pw_worker_need_id(w, msg, id)) return;
  pw_mesh_shape_t mesh = {0};
  pw_status_t s = NULL;
  if (msg->list_count < 1 || msg->list_count > PW_MAX_MESH_RANK) {
    s = pw_status_make(PW_STATUS_INVALID_ARGUMENT, "COMPILE: mesh of rank %u (1 to %d)",
                       msg->list_count, PW_MAX_MESH_RANK);
  } else {
    mesh.rank = msg->list_count;
    for (uint32_t i = 0; i < mesh.rank; ++i) {
      mesh.dims[i] = msg->list[i] > UINT32_MAX ? 0 : (uint32_t)msg->list[i];
    }
    s = pw_mesh_shape_check(&mesh);
  }
  if (s == NULL) s = pw_worker_axis_names(&mesh, &msg->blob[PW_WIRE_COMPILE_B_AXES]);
  char options[1100];
  pw__wire_blob_text(&msg->blob[PW_WIRE_COMPILE_B_OPTIONS], options, sizeof(options));
  void* bytes = NULL;
  size_t size = 0;
  const pw_wire_blob_t* program = &msg->blob[PW_WIRE_COMPILE_B_PROGRAM];
  if (s == NULL) {
    s = pw__backend_compile(&w->backend, program->data, program->size, &mesh, options,
                            w->allocator, &bytes, &size);
  }
  if (s == NULL && size > PW_WIRE_MAX_BYTES) {
    s = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                       "COMPILE: executable of %zu bytes (a reply carries at most %u)", size,
                       PW_WIRE_MAX_BYTES);
  }
  pw__worker_reply(w, id, s, s == NULL ? bytes : NULL, s == NULL ? size : 0, NULL, 0);
  if (bytes != NULL) pw_allocator_free(w->allocator, bytes, size);
}

static uint32_t pw_worker_param_list(const pw_backend_param_t* p, uint64_t* out) {
  uint32_t n = 0;
  out[n++] = (uint64_t)p->dtype;
  out[n++] = p->shape.rank;
  for (uint32_t d = 0; d < p->shape.rank && d < PW_MAX_RANK; ++d) out[n++] = (uint64_t)p->shape.dims[d];
  out[n++] = (uint64_t)p->sharding.kind;
  out[n++] = p->sharding.tensor_axis;
  out[n++] = p->sharding.mesh_axis;
  /* Wire version 3: the tiles and unreduced axes (none for REPLICATED and
   * SPLIT). */
  bool tiled = p->sharding.kind == PW_SHARDING_TILED;
  uint32_t tiles = tiled && p->sharding.tile_count <= PW_MAX_MESH_RANK ? p->sharding.tile_count : 0;
  out[n++] = tiles;
  for (uint32_t i = 0; i < tiles; ++i) {
    out[n++] = p->sharding.tiles[i].tensor_axis;
    out[n++] = p->sharding.tiles[i].mesh_axis;
  }
  out[n++] = tiled ? p->sharding.unreduced_axes & ((1u << PW_MAX_MESH_RANK) - 1) : 0;
  return n;
}

/* Words pw_worker_param_list writes for |p|. */
static size_t pw_worker_param_words(const pw_backend_param_t* p) {
  bool tiled = p->sharding.kind == PW_SHARDING_TILED;
  uint32_t tiles = tiled && p->sharding.tile_count <= PW_MAX_MESH_RANK ? p->sharding.tile_count : 0;
  return 7 + (p->shape.rank < PW_MAX_RANK ? p->shape.rank : PW_MAX_RANK) + 2 * (size_t)tiles;
}

/* Words pw_worker_signature_list writes for |sig| (pw__backend_load
 * checked its counts and pointers). */
static size_t pw_worker_signature_words(const pw_executable_signature_t* sig) {
  size_t n = 3 + (sig->mesh.rank <= PW_MAX_MESH_RANK ? sig->mesh.rank : PW_MAX_MESH_RANK);
  const pw_backend_param_t* in = pw__signature_inputs(sig);
  const pw_backend_param_t* out = pw__signature_outputs(sig);
  for (uint32_t i = 0; i < sig->input_count; ++i) n += pw_worker_param_words(&in[i]);
  for (uint32_t i = 0; i < sig->output_count; ++i) n += pw_worker_param_words(&out[i]);
  return n;
}

/* docs/remote.md: mesh rank, dims..., input count, output count, then per
 * parameter dtype, rank, dims..., sharding kind, tensor axis, mesh axis,
 * tile count, (tensor axis, mesh axis) per tile, unreduced mask (every parameter: the v2 specs past the
 * fixed arrays too). */
static uint32_t pw_worker_signature_list(const pw_executable_signature_t* sig, uint64_t* out) {
  uint32_t n = 0;
  uint32_t rank = sig->mesh.rank <= PW_MAX_MESH_RANK ? sig->mesh.rank : PW_MAX_MESH_RANK;
  out[n++] = rank;
  for (uint32_t i = 0; i < rank; ++i) out[n++] = sig->mesh.dims[i];
  out[n++] = sig->input_count;
  out[n++] = sig->output_count;
  const pw_backend_param_t* in = pw__signature_inputs(sig);
  const pw_backend_param_t* outs = pw__signature_outputs(sig);
  for (uint32_t i = 0; i < sig->input_count; ++i) n += pw_worker_param_list(&in[i], out + n);
  for (uint32_t i = 0; i < sig->output_count; ++i) n += pw_worker_param_list(&outs[i], out + n);
  return n;
}

void pw__worker_on_load(pw_worker_t* w, const pw_wire_msg_t* msg) {
  uint64_t id = msg->u[PW_WIRE_LOAD_ID];
  uint64_t exe_id = msg->u[PW_WIRE_LOAD_EXE];
  if (!pw_worker_need_id(w, msg, id)) return;
  pw_worker_exe_t* e = NULL;
  pw_status_t s = NULL;
  if (exe_id == 0) {
    s = pw_status_make(PW_STATUS_INVALID_ARGUMENT, "LOAD: executable id 0");
  } else {
    pthread_mutex_lock(&w->lock);
    bool exists = pw__worker_table_get(&w->exes, exe_id) != NULL;
    pthread_mutex_unlock(&w->lock);
    if (exists) {
      s = pw_status_make(PW_STATUS_ALREADY_EXISTS, "LOAD: executable %llu is loaded",
                         (unsigned long long)exe_id);
    }
  }
  if (s == NULL) s = pw_allocator_calloc(w->allocator, sizeof(*e), 0, (void**)&e);
  const pw_wire_blob_t* bytes = &msg->blob[PW_WIRE_LOAD_B_BYTES];
  if (s == NULL) {
    e->id = exe_id;
    e->pins = 1;
    e->signature.struct_size = sizeof(e->signature);
    s = pw__backend_load(&w->backend, bytes->data, bytes->size, &e->executable, &e->signature);
    if (s != NULL) {
      pw_allocator_free(w->allocator, e, sizeof(*e));
      e = NULL;
    }
  }
  if (s == NULL) {
    pthread_mutex_lock(&w->lock);
    bool put = pw__worker_table_put(w, &w->exes, exe_id, e);
    pthread_mutex_unlock(&w->lock);
    if (!put) {
      pw__worker_exe_unpin(w, e);
      e = NULL;
      s = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "LOAD: no room for executable %llu",
                         (unsigned long long)exe_id);
    }
  }
  uint64_t stack[PW_WORKER_SIGNATURE_MAX / 8];
  uint64_t* list = stack;
  size_t words = s == NULL ? pw_worker_signature_words(&e->signature) : 0;
  uint32_t count = 0;
  const char* name = "";
  if (s == NULL && words > PW_WIRE_MAX_LIST) {
    /* Refused, not cut short: the controller could not run it. */
    s = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                       "LOAD: the signature of executable '%s' (%u inputs, %u outputs) needs "
                       "%zu list words, a reply carries at most %u",
                       e->signature.name, e->signature.input_count, e->signature.output_count,
                       words, PW_WIRE_MAX_LIST);
  } else if (s == NULL && words > sizeof(stack) / sizeof(stack[0])) {
    s = pw_allocator_malloc(w->allocator, words * sizeof(uint64_t), 0, (void**)&list);
    if (s != NULL) list = stack;
  }
  if (s != NULL && e != NULL) {
    pthread_mutex_lock(&w->lock);
    pw_worker_exe_t* taken = pw__worker_table_remove(&w->exes, exe_id);
    pthread_mutex_unlock(&w->lock);
    if (taken != NULL) pw__worker_exe_unpin(w, taken);
    e = NULL;
  }
  if (s == NULL) {
    count = pw_worker_signature_list(&e->signature, list);
    name = e->signature.name;
  }
  pw__worker_reply(w, id, s, name, strlen(name), list, count);
  if (list != stack) pw_allocator_free(w->allocator, list, words * sizeof(uint64_t));
}

void pw__worker_on_unload(pw_worker_t* w, const pw_wire_msg_t* msg) {
  uint64_t id = msg->u[PW_WIRE_UNLOAD_EXE];
  pthread_mutex_lock(&w->lock);
  pw_worker_exe_t* e = pw__worker_table_remove(&w->exes, id);
  pthread_mutex_unlock(&w->lock);
  if (e == NULL) {
    pw__worker_drop(w, "UNLOAD", pw_status_make(PW_STATUS_NOT_FOUND,
                                                "executable %llu is not loaded",
                                                (unsigned long long)id));
    return;
  }
  pw__worker_exe_unpin(w, e);
}
