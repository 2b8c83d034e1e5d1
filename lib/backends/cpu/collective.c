/* In-slice collectives: all_reduce_sum, all_reduce_mean, all_gather, and
 * (over named mesh axes only, collective_axes.c) reduce_scatter and
 * all_to_all.
 *
 * A collective is an asynchronous rendezvous. Each device's launch arrives
 * on a pool thread, links itself into its group's record (keyed by gang id
 * and the group's coordinates on the other mesh axes) and returns the
 * thread to the pool: nobody ever waits. The last member to arrive unlinks
 * the record, computes the result from every member's input, in mesh
 * order so sums are reproducible, writes it to every member's output and
 * calls every member's done. Hence a pool of one thread runs any number of
 * devices without deadlock.
 *
 * Failure: a group whose devices include a FAILED one fails as a whole. The
 * members already there complete with UNAVAILABLE at once (also when the
 * device is marked failed while they wait); later members complete on
 * arrival. The record stays until every member has been counted, so a late
 * arrival cannot start a fresh rendezvous that would wait forever.
 *
 * Ownership: a waiting member belongs to its record; whoever takes it out
 * (the last arrival, a failure, destroy) calls its done and frees it. A
 * record is freed by whoever unlinks it. */
#include <string.h>

#include "backends/cpu/cpu_dtypes.h"
#include "backends/cpu/cpu_internal.h"

/*---------------------------------------------------------------------------
 * Group geometry
 *-------------------------------------------------------------------------*/

/* Mesh-index step between consecutive coordinates along |axis|. */
static uint32_t pw_cpu_axis_stride(const pw_mesh_shape_t* mesh, uint32_t axis) {
  uint32_t stride = 1;
  for (uint32_t i = mesh->rank; i-- > axis + 1;) stride *= mesh->dims[i];
  return stride;
}

uint32_t pw_cpu__collective_axes(const pw_cpu_program_t* program, const pw_mesh_shape_t* mesh) {
  if (program->over_axes != 0) return program->over_axes;
  if (program->input_count == 0 || program->inputs[0].sharding.kind != PW_SHARDING_SPLIT) {
    return 0;
  }
  uint32_t axis = program->inputs[0].sharding.mesh_axis;
  if (axis == PW_MESH_AXIS_ALL) return mesh->rank >= 32 ? 0 : (1u << mesh->rank) - 1u;
  return axis < mesh->rank ? 1u << axis : 0;
}

/* A group spans the devices that differ from each other only along the
 * mesh axes in |axes|. Its positions number them by their coordinates
 * along those axes, mixed radix in mesh order (the last axis varies
 * fastest), so one axis gives the coordinate and every axis the row-major
 * mesh index. */
static uint32_t pw_cpu_group_size(const pw_mesh_shape_t* mesh, uint32_t axes) {
  uint32_t size = 1;
  for (uint32_t a = 0; a < mesh->rank; ++a) {
    if (axes >> a & 1u) size *= mesh->dims[a];
  }
  return size;
}

static uint32_t pw_cpu_group_position(const pw_mesh_shape_t* mesh, uint32_t axes,
                                      uint32_t mesh_index) {
  uint32_t position = 0;
  for (uint32_t a = 0; a < mesh->rank; ++a) {
    if (axes >> a & 1u) {
      position = position * mesh->dims[a] + pw_mesh_coordinate(mesh, mesh_index, a);
    }
  }
  return position;
}

/* The mesh index of |position| in the group whose position 0 is |key|. */
static uint32_t pw_cpu_group_mesh_index(const pw_mesh_shape_t* mesh, uint32_t axes,
                                        uint32_t key, uint32_t position) {
  uint32_t index = key;
  for (uint32_t a = mesh->rank; a-- > 0;) {
    if (axes >> a & 1u) {
      index += (position % mesh->dims[a]) * pw_cpu_axis_stride(mesh, a);
      position /= mesh->dims[a];
    }
  }
  return index;
}

/* The device at |position| of |launch|'s group. */
static uint32_t pw_cpu_group_device(const pw_cpu__rendezvous_t* record,
                                    const pw_cpu__launch_t* launch,
                                    uint32_t position) {
  const pw_mesh_shape_t* mesh = &record->executable->mesh;
  return launch->group_devices[pw_cpu_group_mesh_index(mesh, record->axes, record->group_key,
                                                       position)];
}

/*---------------------------------------------------------------------------
 * Completion batches and records
 *-------------------------------------------------------------------------*/

/* Launches whose dones are to be called, outside the lock, by the thread
 * that built the batch; it owns them and frees each after its done. */
typedef struct pw_cpu_batch_t {
  pw_cpu__launch_t* head;
  pw_cpu__launch_t* tail;
} pw_cpu_batch_t;

static void pw_cpu_batch_add(pw_cpu_batch_t* batch, pw_cpu__launch_t* launch,
                             pw_status_t status) {
  launch->complete_status = status;
  launch->complete_next = NULL;
  if (batch->tail != NULL) {
    batch->tail->complete_next = launch;
  } else {
    batch->head = launch;
  }
  batch->tail = launch;
}

static void pw_cpu_batch_run(pw_cpu_batch_t* batch) {
  pw_cpu__launch_t* launch = batch->head;
  batch->head = batch->tail = NULL;
  while (launch != NULL) {
    pw_cpu__launch_t* next = launch->complete_next;
    pw_backend_done_fn_t done = launch->done;
    void* done_user = launch->done_user;
    pw_status_t status = launch->complete_status;
    launch->complete_status = NULL;
    pw_cpu__launch_free(launch);
    done(done_user, status);
    launch = next;
  }
}

/* Fails |record| with |status| (consumed): its waiting members leave it for
 * |batch| with a copy each. Caller holds the rendezvous mutex. */
static void pw_cpu_fail_record(pw_cpu__rendezvous_t* record, pw_status_t status,
                               pw_cpu_batch_t* batch) {
  if (record->failure != NULL) {
    pw_status_free(status);
    return;
  }
  record->failure = status;
  pw_cpu__launch_t* m = record->members;
  record->members = NULL;
  while (m != NULL) {
    pw_cpu__launch_t* next = m->member_next;
    m->member_next = NULL;
    pw_cpu_batch_add(batch, m, pw_status_clone(status));
    m = next;
  }
}

/* Frees an unlinked record that has no members left. */
static void pw_cpu_record_free(pw_cpu__backend_t* backend,
                               pw_cpu__rendezvous_t* record) {
  pw_status_free(record->failure);
  pw_cpu__executable_release(record->executable);
  pw_allocator_free(backend->allocator, record, sizeof(*record));
}

static void pw_cpu_unlink(pw_cpu__backend_t* backend, pw_cpu__rendezvous_t* record) {
  pw_cpu__rendezvous_t** link = &backend->rendezvous;
  while (*link != record) link = &(*link)->next;
  *link = record->next;
}

/*---------------------------------------------------------------------------
 * The computations (run by the last member, outside the lock)
 *-------------------------------------------------------------------------*/

#define PW_CPU_SUM_LOOP(T, out, in, n, ADD)      \
  do {                                           \
    T* o_ = (T*)(out);                           \
    const T* i_ = (const T*)(in);                \
    for (size_t k_ = 0; k_ < (n); ++k_) {        \
      o_[k_] = ADD(o_[k_], i_[k_]);              \
    }                                            \
  } while (0)

#define PW_CPU_ADD(a, b) ((a) + (b))

/* Integers wrap rather than overflow (which C leaves undefined): the sum
 * runs in the unsigned type U (cpu_dtypes.h). */
#define PW_CPU_INT_SUM_CASE(DTYPE, T, U)                                      \
  case DTYPE: {                                                               \
    T* o_ = (T*)(out);                                                        \
    const T* i_ = (const T*)(in);                                             \
    for (size_t k_ = 0; k_ < n; ++k_) o_[k_] = (T)((U)o_[k_] + (U)i_[k_]);     \
    break;                                                                    \
  }

/* f16/bf16: each element summed over the members in mesh order in f32,
 * divided by the group size for a mean, rounded once. */
static void pw_cpu_all_reduce_half(const pw_cpu__rendezvous_t* record, pw_dtype_t dtype,
                                   size_t n, bool mean, void* out) {
  const pw_cpu__launch_t* first = record->members;
  for (size_t k = 0; k < n; ++k) {
    float sum = 0.0f;
    for (const pw_cpu__launch_t* m = first; m != NULL; m = m->member_next) {
      sum += pw_cpu__half_load(dtype, m->inputs[0]->data, k);
    }
    pw_cpu__half_store(dtype, out, k, mean ? sum / (float)record->expected : sum);
  }
}

static void pw_cpu_all_reduce(const pw_cpu__rendezvous_t* record, bool mean) {
  pw_backend_executable_t exe = record->executable;
  pw_dtype_t dtype = exe->program.outputs[0].dtype;
  size_t bytes = exe->output_bytes[0];
  size_t n = pw_cpu__elements(&exe->output_shards[0]);
  pw_cpu__launch_t* first = record->members;
  void* out = first->outputs[0]->data;
  if (pw_cpu__is_half(dtype)) {
    pw_cpu_all_reduce_half(record, dtype, n, mean, out);
  } else {
    memcpy(out, first->inputs[0]->data, bytes);
  }
  for (pw_cpu__launch_t* m = first->member_next; m != NULL && !pw_cpu__is_half(dtype);
       m = m->member_next) {
    const void* in = m->inputs[0]->data;
    switch (dtype) {
      case PW_DTYPE_F32: PW_CPU_SUM_LOOP(float, out, in, n, PW_CPU_ADD); break;
      case PW_DTYPE_F64: PW_CPU_SUM_LOOP(double, out, in, n, PW_CPU_ADD); break;
      PW_CPU__FOR_EACH_INT(PW_CPU_INT_SUM_CASE)
      default: break; /* excluded by the kernel's signature */
    }
  }
  if (mean) {
    if (dtype == PW_DTYPE_F32) {
      float* o = out;
      float g = (float)record->expected;
      for (size_t k = 0; k < n; ++k) o[k] /= g;
    } else if (dtype == PW_DTYPE_F64) {
      double* o = out;
      double g = (double)record->expected;
      for (size_t k = 0; k < n; ++k) o[k] /= g;
    }
  }
  for (pw_cpu__launch_t* m = first->member_next; m != NULL; m = m->member_next) {
    memcpy(m->outputs[0]->data, out, bytes);
  }
}

static void pw_cpu_all_gather(const pw_cpu__rendezvous_t* record) {
  pw_backend_executable_t exe = record->executable;
  const pw_backend_param_t* x = &exe->program.inputs[0];
  const pw_shape_t* shard = &exe->input_shards[0];
  size_t element = pw_dtype_size(x->dtype);
  uint32_t axis = x->sharding.tensor_axis;
  size_t outer = 1;
  for (uint32_t i = 0; i < axis; ++i) outer *= (size_t)shard->dims[i];
  size_t chunk = element;
  for (uint32_t i = axis; i < shard->rank; ++i) chunk *= (size_t)shard->dims[i];
  size_t groups = record->expected;
  pw_cpu__launch_t* first = record->members;
  unsigned char* out = first->outputs[0]->data;
  for (pw_cpu__launch_t* m = first; m != NULL; m = m->member_next) {
    const unsigned char* in = m->inputs[0]->data;
    for (size_t o = 0; o < outer; ++o) {
      memcpy(out + (o * groups + m->position) * chunk, in + o * chunk, chunk);
    }
  }
  for (pw_cpu__launch_t* m = first->member_next; m != NULL; m = m->member_next) {
    memcpy(m->outputs[0]->data, out, exe->output_bytes[0]);
  }
}

/*---------------------------------------------------------------------------
 * Arrival
 *-------------------------------------------------------------------------*/

/* UNAVAILABLE if a device of |launch|'s group is FAILED. */
static pw_status_t pw_cpu_group_health(const pw_cpu__rendezvous_t* geometry,
                                       const pw_cpu__launch_t* launch) {
  pw_cpu__backend_t* backend = launch->backend;
  for (uint32_t p = 0; p < geometry->expected; ++p) {
    uint32_t device = pw_cpu_group_device(geometry, launch, p);
    pw_status_t status = pw_cpu__device_status(backend, device);
    if (status != NULL) {
      return pw_status_annotate(status, "collective '%s' (gang %llu)",
                                launch->executable->program.kernel,
                                (unsigned long long)launch->gang_id);
    }
  }
  return NULL;
}

static bool pw_cpu_gang_refused_locked(const pw_cpu__backend_t* backend, uint64_t gang_id) {
  for (size_t i = 0; i < sizeof(backend->refused_gangs) / sizeof(backend->refused_gangs[0]);
       ++i) {
    if (backend->refused_gangs[i] == gang_id && gang_id != 0) return true;
  }
  return false;
}

void pw_cpu__collective_arrive(pw_cpu__launch_t* launch) {
  pw_cpu__backend_t* backend = launch->backend;
  pw_backend_executable_t exe = launch->executable;
  uint32_t axes = exe->group_axes;
  /* The group geometry, computed without the lock. */
  pw_cpu__rendezvous_t geometry;
  memset(&geometry, 0, sizeof(geometry));
  geometry.gang_id = launch->gang_id;
  geometry.expected = pw_cpu_group_size(&exe->mesh, axes);
  geometry.axes = axes;
  geometry.executable = exe;
  launch->position = pw_cpu_group_position(&exe->mesh, axes, launch->mesh_index);
  geometry.group_key = launch->mesh_index;
  for (uint32_t a = 0; a < exe->mesh.rank; ++a) {
    if (axes >> a & 1u) {
      geometry.group_key -= pw_mesh_coordinate(&exe->mesh, launch->mesh_index, a) *
                            pw_cpu_axis_stride(&exe->mesh, a);
    }
  }
  pw_status_t unhealthy = pw_cpu_group_health(&geometry, launch);
  pw_cpu__rendezvous_t* spare = launch->spare;
  launch->spare = NULL;

  pw_cpu_batch_t batch = {NULL, NULL};
  pw_cpu__rendezvous_t* finished = NULL;

  pthread_mutex_lock(&backend->rendezvous_mutex);
  pw_cpu__rendezvous_t* record = backend->rendezvous;
  while (record != NULL && (record->gang_id != geometry.gang_id ||
                            record->group_key != geometry.group_key)) {
    record = record->next;
  }
  if (record == NULL) {
    record = spare;
    spare = NULL;
    *record = geometry;
    atomic_fetch_add(&exe->refs, 1);
    record->next = backend->rendezvous;
    backend->rendezvous = record;
  }
  pw_cpu__launch_t** link = &record->members;
  while (*link != NULL && (*link)->position < launch->position) {
    link = &(*link)->member_next;
  }
  pw_status_t mismatch = NULL;
  if (record->executable->kernel != exe->kernel ||
      !pw_mesh_shape_equal(&record->executable->mesh, &exe->mesh)) {
    mismatch = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "gang %llu: device %u launched '%s' where its group "
                              "runs '%s' (another kernel or mesh)",
                              (unsigned long long)geometry.gang_id, launch->device,
                              exe->program.kernel,
                              record->executable->program.kernel);
  } else if (*link != NULL && (*link)->position == launch->position) {
    mismatch = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "gang %llu: position %u of collective '%s' arrived "
                              "twice (mesh index %u)",
                              (unsigned long long)geometry.gang_id, launch->position,
                              exe->program.kernel, launch->mesh_index);
  }
  if (mismatch != NULL) {
    /* Not counted as a member: fail the group, complete this one alone. */
    pw_cpu_fail_record(record, pw_status_clone(mismatch), &batch);
    pw_cpu_batch_add(&batch, launch, mismatch);
    pw_status_free(unhealthy);
  } else {
    ++record->arrived;
    if (unhealthy != NULL) pw_cpu_fail_record(record, unhealthy, &batch);
    if (record->failure == NULL && pw_cpu_gang_refused_locked(backend, geometry.gang_id)) {
      pw_cpu_fail_record(record,
                         pw_status_make(PW_STATUS_ABORTED,
                                        "collective gang %llu: another part was refused "
                                        "at launch",
                                        (unsigned long long)geometry.gang_id),
                         &batch);
    }
    if (record->failure != NULL) {
      pw_cpu_batch_add(&batch, launch, pw_status_clone(record->failure));
    } else {
      launch->member_next = *link;
      *link = launch;
    }
    if (record->arrived == record->expected) {
      pw_cpu_unlink(backend, record);
      finished = record;
    }
  }
  pthread_mutex_unlock(&backend->rendezvous_mutex);

  if (spare != NULL) pw_allocator_free(backend->allocator, spare, sizeof(*spare));
  if (finished != NULL && finished->failure == NULL) {
    /* Every member is here and the record unlinked: this thread owns it. */
    if (exe->program.over_axes != 0) {
      pw_cpu__collective_redistribute(finished);
    } else {
      switch (exe->kernel->collective) {
        case PW_CPU__ALL_REDUCE_SUM: pw_cpu_all_reduce(finished, false); break;
        case PW_CPU__ALL_REDUCE_MEAN: pw_cpu_all_reduce(finished, true); break;
        case PW_CPU__ALL_GATHER: pw_cpu_all_gather(finished); break;
        default: break; /* the other kinds need 'over' */
      }
    }
    pw_cpu__launch_t* m = finished->members;
    finished->members = NULL;
    while (m != NULL) {
      pw_cpu__launch_t* next = m->member_next;
      pw_cpu_batch_add(&batch, m, NULL);
      m = next;
    }
  }
  pw_cpu_batch_run(&batch);
  if (finished != NULL) pw_cpu_record_free(backend, finished);
}

void pw_cpu__collective_refused(pw_cpu__backend_t* backend, uint64_t gang_id,
                                pw_status_t reason) {
  pw_cpu_batch_t batch = {NULL, NULL};
  pthread_mutex_lock(&backend->rendezvous_mutex);
  size_t slots = sizeof(backend->refused_gangs) / sizeof(backend->refused_gangs[0]);
  backend->refused_gangs[backend->refused_next++ % slots] = gang_id;
  for (pw_cpu__rendezvous_t* r = backend->rendezvous; r != NULL; r = r->next) {
    if (r->gang_id == gang_id) {
      pw_cpu_fail_record(r,
                         pw_status_make(PW_STATUS_ABORTED,
                                        "collective gang %llu: another part was refused "
                                        "at launch: %s",
                                        (unsigned long long)gang_id,
                                        pw_status_message(reason)),
                         &batch);
    }
  }
  pthread_mutex_unlock(&backend->rendezvous_mutex);
  pw_cpu_batch_run(&batch);
}

void pw_cpu__collective_device_failed(pw_cpu__backend_t* backend, uint32_t device) {
  pw_cpu_batch_t batch = {NULL, NULL};
  pthread_mutex_lock(&backend->rendezvous_mutex);
  for (pw_cpu__rendezvous_t* r = backend->rendezvous; r != NULL; r = r->next) {
    if (r->failure != NULL || r->members == NULL) continue;
    for (uint32_t p = 0; p < r->expected; ++p) {
      if (pw_cpu_group_device(r, r->members, p) == device) {
        pw_cpu_fail_record(
            r,
            pw_status_make(PW_STATUS_UNAVAILABLE,
                           "collective '%s' (gang %llu): cpu device %u of its "
                           "group has failed",
                           r->executable->program.kernel,
                           (unsigned long long)r->gang_id, device),
            &batch);
        break;
      }
    }
  }
  pthread_mutex_unlock(&backend->rendezvous_mutex);
  pw_cpu_batch_run(&batch);
}

void pw_cpu__collective_shutdown(pw_cpu__backend_t* backend) {
  pw_cpu_batch_t batch = {NULL, NULL};
  pthread_mutex_lock(&backend->rendezvous_mutex);
  pw_cpu__rendezvous_t* records = backend->rendezvous;
  backend->rendezvous = NULL;
  for (pw_cpu__rendezvous_t* r = records; r != NULL; r = r->next) {
    pw_cpu_fail_record(
        r,
        pw_status_make(PW_STATUS_CANCELLED,
                       "collective '%s' (gang %llu): the backend was destroyed "
                       "with %u of %u devices arrived",
                       r->executable->program.kernel,
                       (unsigned long long)r->gang_id, r->arrived, r->expected),
        &batch);
  }
  pthread_mutex_unlock(&backend->rendezvous_mutex);
  if (batch.head != NULL) {
    pw_log(&backend->logger, PW_LOG_WARN, PW_CPU_LOG,
           "destroy: cancelled collectives still waiting for devices");
  }
  pw_cpu_batch_run(&batch);
  while (records != NULL) {
    pw_cpu__rendezvous_t* next = records->next;
    pw_cpu_record_free(backend, records);
    records = next;
  }
}

/*---------------------------------------------------------------------------
 * Signatures
 *-------------------------------------------------------------------------*/

/* A form over named axes needs 'over'; UNIMPLEMENTED-free: a clear
 * INVALID_ARGUMENT. */
static pw_status_t pw_cpu_need_over(const pw_cpu_program_t* program, const char* form) {
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                        "%s: name the mesh axes it runs over with an 'over AXES' line "
                        "(e.g. 'over data')",
                        form);
}

/* all_reduce_*(x[G,...] split(0,M)) -> y[...] replicated, or the 'over'
 * form (collective_axes.c). */
static pw_status_t pw_cpu_check_all_reduce(void* user, const pw_cpu_program_t* program,
                                           const pw_mesh_shape_t* mesh) {
  if (program->over_axes != 0) {
    return pw_cpu__check_collective_axes(
        program, mesh, user != NULL ? PW_CPU__ALL_REDUCE_MEAN : PW_CPU__ALL_REDUCE_SUM);
  }
  const pw_backend_param_t* x = &program->inputs[0];
  if (x->sharding.kind == PW_SHARDING_TILED) {
    return pw_cpu_need_over(program, "input 0 is a PartitionSpec");
  }
  const pw_backend_param_t* y = &program->outputs[0];
  if (x->shape.rank < 1 || x->sharding.kind != PW_SHARDING_SPLIT ||
      x->sharding.tensor_axis != 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "input 0 must be split along axis 0 (one block per "
                          "device of the group): [G,...] split(0,M)");
  }
  uint32_t group = pw_cpu__mesh_axis_size(mesh, x->sharding.mesh_axis);
  if (x->shape.dims[0] != (int64_t)group) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "input 0 dimension 0 is %lld; it must equal the group "
                          "size %u (one block per device)",
                          (long long)x->shape.dims[0], group);
  }
  bool same = y->shape.rank + 1 == x->shape.rank;
  for (uint32_t i = 0; same && i < y->shape.rank; ++i) {
    same = y->shape.dims[i] == x->shape.dims[i + 1];
  }
  if (!same) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "output 0 must have input 0's shape without its "
                          "first dimension");
  }
  if (y->sharding.kind != PW_SHARDING_REPLICATED) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "output 0 must be replicated");
  }
  return NULL;
}

/* all_gather(x split(T,M)) -> y (same shape) replicated */
static pw_status_t pw_cpu_check_all_gather(void* user, const pw_cpu_program_t* program,
                                           const pw_mesh_shape_t* mesh) {
  if (program->over_axes != 0) {
    return pw_cpu__check_collective_axes(program, mesh, PW_CPU__ALL_GATHER);
  }
  const pw_backend_param_t* x = &program->inputs[0];
  if (x->sharding.kind == PW_SHARDING_TILED) {
    return pw_cpu_need_over(program, "input 0 is a PartitionSpec");
  }
  const pw_backend_param_t* y = &program->outputs[0];
  if (x->sharding.kind != PW_SHARDING_SPLIT) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "input 0 must be split");
  }
  if (!pw_shape_equal(&x->shape, &y->shape) ||
      y->sharding.kind != PW_SHARDING_REPLICATED) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "output 0 must have input 0's global shape, replicated");
  }
  return NULL;
}

static pw_status_t pw_cpu_check_reduce_scatter(void* user, const pw_cpu_program_t* program,
                                               const pw_mesh_shape_t* mesh) {
  if (program->over_axes == 0) return pw_cpu_need_over(program, "reduce_scatter");
  return pw_cpu__check_collective_axes(program, mesh, PW_CPU__REDUCE_SCATTER);
}

static pw_status_t pw_cpu_check_all_to_all(void* user, const pw_cpu_program_t* program,
                                           const pw_mesh_shape_t* mesh) {
  if (program->over_axes == 0) return pw_cpu_need_over(program, "all_to_all");
  return pw_cpu__check_collective_axes(program, mesh, PW_CPU__ALL_TO_ALL);
}

static const pw_cpu_param_spec_t pw_cpu_reduce_numeric[] = {
    {"x", PW_CPU_DTYPES_FLOAT | PW_CPU_DTYPES_HALF | PW_CPU_DTYPES_INTEGER, -1}};
static const pw_cpu_param_spec_t pw_cpu_reduce_float[] = {
    {"x", PW_CPU_DTYPES_FLOAT | PW_CPU_DTYPES_HALF, -1}};
static const pw_cpu_param_spec_t pw_cpu_any_x[] = {{"x", PW_CPU_DTYPES_ANY, -1}};
static const pw_cpu_param_spec_t pw_cpu_any_y[] = {{"y", PW_CPU_DTYPES_ANY, -1}};

/* Non-NULL user marks the mean. */
static const char pw_cpu_mean_tag[] = "mean";

#define PW_CPU_COLLECTIVE(NAME, INPUTS, CHECK, USER, KIND)                       \
  {{.struct_size = sizeof(pw_cpu_kernel_def_t), .name = NAME, .input_count = 1, \
    .inputs = INPUTS, .output_count = 1, .outputs = pw_cpu_any_y,               \
    .flags = PW_CPU_KERNEL_SAME_DTYPE, .check = CHECK, .user = USER},           \
   KIND}

const pw_cpu__builtin_t pw_cpu__collective_kernels[] = {
    PW_CPU_COLLECTIVE("all_reduce_sum", pw_cpu_reduce_numeric, pw_cpu_check_all_reduce, NULL,
                      PW_CPU__ALL_REDUCE_SUM),
    PW_CPU_COLLECTIVE("all_reduce_mean", pw_cpu_reduce_float, pw_cpu_check_all_reduce,
                      (void*)pw_cpu_mean_tag, PW_CPU__ALL_REDUCE_MEAN),
    PW_CPU_COLLECTIVE("all_gather", pw_cpu_any_x, pw_cpu_check_all_gather, NULL,
                      PW_CPU__ALL_GATHER),
    PW_CPU_COLLECTIVE("reduce_scatter", pw_cpu_reduce_numeric, pw_cpu_check_reduce_scatter,
                      NULL, PW_CPU__REDUCE_SCATTER),
    PW_CPU_COLLECTIVE("all_to_all", pw_cpu_any_x, pw_cpu_check_all_to_all, NULL,
                      PW_CPU__ALL_TO_ALL),
};
const size_t pw_cpu__collective_kernel_count =
    sizeof(pw_cpu__collective_kernels) / sizeof(pw_cpu__collective_kernels[0]);
