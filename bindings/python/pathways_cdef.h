/* The C declarations the Python module exposes: a curated subset of the
 * public headers in include/pathways/ (and backends/cpu.h), written for
 * cffi's cdef parser. Not compiled as C: build_ffi.py hands it to cdef(),
 * and cffi checks every struct layout, enum value and signature against the
 * real headers when it compiles the module (API mode), so a drift between
 * this file and the headers fails the build, not a user.
 *
 * Rules: declare only what pathways/ (the Python layer) uses; keep the
 * header order and the names of the C API; "#define X ..." takes a
 * constant's value from the real header. Versioned and informational
 * structs end with "...;": cffi then takes their size from the compiler,
 * so fields added at the end (the ABI rule) need no change here, while the
 * offsets of the fields listed are still checked. Plain value types
 * (shapes, specs) are listed in full.
 */

/* ---- version.h ---------------------------------------------------------- */
const char* pw_version_string(void);

/* ---- status.h ----------------------------------------------------------- */
typedef enum pw_status_code_e {
  PW_STATUS_OK = 0,
  PW_STATUS_CANCELLED = 1,
  PW_STATUS_UNKNOWN = 2,
  PW_STATUS_INVALID_ARGUMENT = 3,
  PW_STATUS_DEADLINE_EXCEEDED = 4,
  PW_STATUS_NOT_FOUND = 5,
  PW_STATUS_ALREADY_EXISTS = 6,
  PW_STATUS_PERMISSION_DENIED = 7,
  PW_STATUS_RESOURCE_EXHAUSTED = 8,
  PW_STATUS_FAILED_PRECONDITION = 9,
  PW_STATUS_ABORTED = 10,
  PW_STATUS_OUT_OF_RANGE = 11,
  PW_STATUS_UNIMPLEMENTED = 12,
  PW_STATUS_INTERNAL = 13,
  PW_STATUS_UNAVAILABLE = 14,
  PW_STATUS_DATA_LOSS = 15,
  PW_STATUS_UNAUTHENTICATED = 16,
} pw_status_code_t;

#define PW_STATUS_CODE_COUNT ...

typedef struct pw_status_s* pw_status_t;

pw_status_code_t pw_status_code(pw_status_t status);
const char* pw_status_message(pw_status_t status);
const char* pw_status_code_string(pw_status_code_t code);
void pw_status_free(pw_status_t status);

/* ---- allocator.h -------------------------------------------------------- */
typedef struct pw_allocator_t {
  void* self;
  void* (*alloc)(void* self, size_t size, size_t alignment);
  void (*free)(void* self, void* ptr, size_t size);
} pw_allocator_t;

pw_allocator_t pw_allocator_system(void);

/* ---- log.h -------------------------------------------------------------- */
typedef enum pw_log_level_e {
  PW_LOG_DEBUG = 0,
  PW_LOG_INFO = 1,
  PW_LOG_WARN = 2,
  PW_LOG_ERROR = 3,
  PW_LOG_OFF = 4,
} pw_log_level_t;

typedef void (*pw_log_fn_t)(pw_log_level_t level, const char* subsystem,
                            const char* message, void* user);

typedef struct pw_logger_t {
  pw_log_fn_t fn;
  void* user;
  pw_log_level_t min_level;
} pw_logger_t;

pw_logger_t pw_logger_default(void);
const char* pw_log_level_string(pw_log_level_t level);

/* ---- clock.h ------------------------------------------------------------ */
typedef int64_t pw_time_t;
typedef int64_t pw_duration_t;

pw_time_t pw_clock_now(void);
pw_time_t pw_deadline_from_timeout(pw_duration_t timeout);

/* ---- event.h ------------------------------------------------------------ */
typedef struct pw_event_s pw_event_t;
typedef void (*pw_event_callback_fn_t)(void* user, pw_status_t status);

pw_status_t pw_event_create(pw_allocator_t allocator, pw_event_t** out_event);
void pw_event_retain(pw_event_t* event);
void pw_event_release(pw_event_t* event);
pw_status_t pw_event_signal(pw_event_t* event);
pw_status_t pw_event_fail(pw_event_t* event, pw_status_t status);
bool pw_event_is_ready(pw_event_t* event);
pw_status_t pw_event_query(pw_event_t* event, bool* out_ready);
pw_status_t pw_event_wait(pw_event_t* event, pw_time_t deadline);
pw_status_t pw_event_on_ready(pw_event_t* event, pw_event_callback_fn_t fn,
                              void* user);
pw_status_t pw_event_join(pw_allocator_t allocator, pw_event_t* const* events,
                          size_t count, pw_event_t** out_event);
pw_status_t pw_event_any(pw_allocator_t allocator, pw_event_t* const* events,
                         size_t count, pw_event_t** out_event);

/* ---- types.h ------------------------------------------------------------ */
typedef enum pw_dtype_e {
  PW_DTYPE_INVALID = 0,
  PW_DTYPE_F32 = 1,
  PW_DTYPE_F64 = 2,
  PW_DTYPE_I32 = 3,
  PW_DTYPE_I64 = 4,
  PW_DTYPE_U8 = 5,
  PW_DTYPE_BF16 = 6,
  PW_DTYPE_F16 = 7,
  PW_DTYPE_I8 = 8,
  PW_DTYPE_I16 = 9,
  PW_DTYPE_U16 = 10,
  PW_DTYPE_U32 = 11,
  PW_DTYPE_U64 = 12,
  PW_DTYPE_BOOL = 13,
  PW_DTYPE_F8E4M3FN = 14,
  PW_DTYPE_F8E5M2 = 15,
  PW_DTYPE_C64 = 16,
} pw_dtype_t;

#define PW_DTYPE_COUNT ...
size_t pw_dtype_size(pw_dtype_t dtype);
const char* pw_dtype_name(pw_dtype_t dtype);
const char* pw_dtype_numpy_name(pw_dtype_t dtype);
bool pw_dtype_parse(const char* name, size_t length, pw_dtype_t* out_dtype);
float pw_bf16_to_f32(uint16_t bits);
uint16_t pw_f32_to_bf16(float value);
float pw_f16_to_f32(uint16_t bits);
uint16_t pw_f32_to_f16(float value);
float pw_f8e4m3fn_to_f32(uint8_t bits);
uint8_t pw_f32_to_f8e4m3fn(float value);
float pw_f8e5m2_to_f32(uint8_t bits);
uint8_t pw_f32_to_f8e5m2(float value);

#define PW_MAX_RANK ...
#define PW_MAX_MESH_RANK ...
#define PW_MESH_AXIS_ALL ...

typedef struct pw_shape_t {
  uint32_t rank;
  int64_t dims[8];
} pw_shape_t;

typedef struct pw_mesh_shape_t {
  uint32_t rank;
  uint32_t dims[4];
  char axis_names[4][16];
} pw_mesh_shape_t;

typedef enum pw_sharding_kind_e {
  PW_SHARDING_REPLICATED = 0,
  PW_SHARDING_SPLIT = 1,
  PW_SHARDING_TILED = 2,
} pw_sharding_kind_t;

typedef struct pw_sharding_tile_t {
  uint8_t tensor_axis;
  uint8_t mesh_axis;
} pw_sharding_tile_t;

typedef struct pw_sharding_t {
  pw_sharding_kind_t kind;
  uint32_t tensor_axis;
  uint32_t mesh_axis;
  uint32_t tile_count;
  pw_sharding_tile_t tiles[4];
  uint32_t unreduced_axes;
} pw_sharding_t;

typedef struct pw_array_spec_t {
  pw_dtype_t dtype;
  pw_shape_t shape;
  pw_sharding_t sharding;
} pw_array_spec_t;

pw_status_t pw_mesh_shape_parse(const char* text, pw_mesh_shape_t* out_mesh);
pw_status_t pw_mesh_shape_check(const pw_mesh_shape_t* mesh);
pw_status_t pw_array_spec_check(const pw_array_spec_t* spec,
                                const pw_mesh_shape_t* mesh);
size_t pw_array_spec_format(const pw_array_spec_t* spec, char* buffer,
                            size_t capacity);
pw_status_t pw_mesh_shape_set_axis_names(pw_mesh_shape_t* mesh, uint32_t count,
                                         const char* const* names);
size_t pw_mesh_shape_format(const pw_mesh_shape_t* mesh, char* buffer, size_t capacity);
pw_status_t pw_sharding_parse(const char* text, size_t length, uint32_t rank,
                              const pw_mesh_shape_t* mesh, pw_sharding_t* out_sharding);
size_t pw_sharding_format_named(const pw_sharding_t* sharding, const pw_mesh_shape_t* mesh,
                                char* buffer, size_t capacity);
bool pw_sharding_equivalent(const pw_sharding_t* a, const pw_sharding_t* b,
                            const pw_shape_t* shape, const pw_mesh_shape_t* mesh);
pw_status_t pw_sharding_check(const pw_sharding_t* sharding, const pw_shape_t* shape,
                              const pw_mesh_shape_t* mesh);

/* ---- backend.h ---------------------------------------------------------- */
typedef enum pw_device_health_e {
  PW_DEVICE_HEALTHY = 0,
  PW_DEVICE_DEGRADED = 1,
  PW_DEVICE_FAILED = 2,
} pw_device_health_t;

const char* pw_device_health_name(pw_device_health_t health);

typedef struct pw_backend_vtable_t pw_backend_vtable_t;
typedef pw_array_spec_t pw_backend_param_t;

#define PW_BACKEND_MAX_PARAMS ...
#define PW_EXECUTABLE_MAX_PARAMS ...

typedef struct pw_executable_signature_t {
  size_t struct_size;
  char name[64];
  pw_mesh_shape_t mesh;
  uint32_t input_count;
  uint32_t output_count;
  pw_backend_param_t inputs[16];
  pw_backend_param_t outputs[16];
  const pw_backend_param_t* input_specs;
  const pw_backend_param_t* output_specs;
  ...;
} pw_executable_signature_t;

typedef struct pw_backend_t {
  const pw_backend_vtable_t* vtable;
  void* self;
} pw_backend_t;

/* ---- scheduler.h -------------------------------------------------------- */
typedef struct pw_sched_policy_vtable_t pw_sched_policy_vtable_t;
typedef struct pw_sched_policy_t {
  const pw_sched_policy_vtable_t* vtable;
  void* self;
} pw_sched_policy_t;
pw_sched_policy_t pw_sched_policy_fifo(void);
pw_sched_policy_t pw_sched_policy_priority(void);
pw_sched_policy_t pw_sched_policy_fair_share(void);

/* ---- runtime.h ---------------------------------------------------------- */
typedef struct pw_runtime_s pw_runtime_t;
typedef struct pw_client_s pw_client_t;

typedef struct pw_vslice_t {
  uint64_t id;
} pw_vslice_t;

typedef struct pw_slice_desc_t {
  const char* name;
  pw_mesh_shape_t mesh;
  uint32_t backend;
  uint32_t first_device;
  uint32_t host;
  ...;
} pw_slice_desc_t;

typedef struct pw_runtime_options_t {
  size_t struct_size;
  pw_allocator_t allocator;
  pw_logger_t logger;
  uint32_t worker_count;
  const pw_backend_t* backends;
  uint32_t backend_count;
  const pw_slice_desc_t* slices;
  uint32_t slice_count;
  pw_sched_policy_t sched_policy;
  uint32_t sched_window;
  uint64_t launch_deadline_ns;
  uint64_t health_poll_ns;
  bool deadline_loses_slice;
  uint64_t loss_grace_ns;
  ...;
} pw_runtime_options_t;

pw_status_t pw_runtime_create(const pw_runtime_options_t* options,
                              pw_runtime_t** out_runtime);
pw_status_t pw_runtime_destroy(pw_runtime_t* runtime);
typedef enum pw_slice_state_e {
  PW_SLICE_ONLINE = 0,
  PW_SLICE_LOST = 1,
} pw_slice_state_t;
const char* pw_slice_state_name(pw_slice_state_t state);

typedef struct pw_slice_info_t {
  size_t struct_size;
  char name[64];
  pw_mesh_shape_t mesh;
  uint32_t device_count;
  uint32_t host;
  char backend[32];
  pw_device_health_t health;
  uint32_t bound_vslices;
  pw_slice_state_t state;
  uint32_t losses;
  ...;
} pw_slice_info_t;

typedef struct pw_device_info_t {
  size_t struct_size;
  uint32_t slice;
  uint32_t mesh_index;
  uint32_t backend_device;
  uint32_t host;
  uint64_t memory_bytes;
  pw_device_health_t health;
  char kind[32];
  ...;
} pw_device_info_t;

uint32_t pw_runtime_slice_count(const pw_runtime_t* runtime);
pw_status_t pw_runtime_slice_info(pw_runtime_t* runtime, uint32_t slice,
                                  pw_slice_info_t* out_info);
pw_status_t pw_runtime_device_info(pw_runtime_t* runtime, uint32_t slice,
                                   uint32_t mesh_index,
                                   pw_device_info_t* out_info);

/* Failure (runtime.h, "Failure"). */
typedef enum pw_topology_change_e {
  PW_TOPOLOGY_SLICE_LOST = 1,
  PW_TOPOLOGY_SLICE_BACK = 2,
} pw_topology_change_t;
const char* pw_topology_change_name(pw_topology_change_t change);
typedef struct pw_topology_event_t {
  size_t struct_size;
  pw_topology_change_t change;
  uint32_t slice;
  const char* slice_name;
  uint32_t losses;
  pw_status_t cause;
  uint64_t time_ns;
  ...;
} pw_topology_event_t;
typedef void (*pw_topology_fn_t)(void* user, const pw_topology_event_t* event);
pw_status_t pw_client_set_topology_callback(pw_client_t* client, pw_topology_fn_t fn,
                                            void* user);
pw_status_t pw_runtime_check_health(pw_runtime_t* runtime, uint32_t* out_changes);
pw_status_t pw_runtime_lose_slice(pw_runtime_t* runtime, uint32_t slice, const char* reason);
pw_status_t pw_runtime_restore_slice(pw_runtime_t* runtime, uint32_t slice);

typedef struct pw_client_options_t {
  size_t struct_size;
  const char* name;
  uint32_t weight;
  int32_t priority;
  ...;
} pw_client_options_t;

pw_status_t pw_client_create(pw_runtime_t* runtime,
                             const pw_client_options_t* options,
                             pw_client_t** out_client);
pw_status_t pw_client_destroy(pw_client_t* client);
const char* pw_client_name(const pw_client_t* client);
pw_status_t pw_client_trim(pw_client_t* client);

typedef enum pw_vslice_flags_e {
  PW_VSLICE_DEFAULT = 0,
  PW_VSLICE_EXCLUSIVE = 1,
  PW_VSLICE_SHARE_OWN = 2,
} pw_vslice_flags_t;

pw_status_t pw_vslice_create(pw_client_t* client, const pw_mesh_shape_t* mesh,
                             uint32_t flags, pw_vslice_t* out_vslice);

typedef struct pw_vslice_request_t {
  size_t struct_size;
  pw_mesh_shape_t mesh;
  uint32_t flags;
  const char* backend;
  const char* device_kind;
  const char* slice_name;
  uint32_t host;
} pw_vslice_request_t;

pw_status_t pw_vslice_create_request(pw_client_t* client, const pw_vslice_request_t* request,
                                     pw_vslice_t* out_vslice);
pw_status_t pw_vslice_release(pw_client_t* client, pw_vslice_t vslice);
pw_status_t pw_vslice_binding(pw_client_t* client, pw_vslice_t vslice,
                              uint32_t* out_slice, pw_mesh_shape_t* out_mesh);

typedef struct pw_vslice_span_t {
  size_t struct_size;
  pw_mesh_shape_t mesh;
  uint32_t slice_count;
  const uint32_t* slices;
  uint32_t flags;
} pw_vslice_span_t;
pw_status_t pw_vslice_create_spanning(pw_client_t* client, const pw_vslice_span_t* span,
                                      pw_vslice_t* out_vslice);
pw_status_t pw_vslice_slices(pw_client_t* client, pw_vslice_t vslice, uint32_t* out_slices,
                             uint32_t capacity, uint32_t* out_count);
typedef struct pw_vslice_info_t {
  size_t struct_size;
  pw_mesh_shape_t mesh;
  uint32_t slice_count;
  uint32_t first_slice;
  uint32_t lost_slices;
  uint32_t first_lost_slice;
  bool lost_since_bound;
  ...;
} pw_vslice_info_t;
pw_status_t pw_vslice_info(pw_client_t* client, pw_vslice_t vslice, pw_vslice_info_t* out_info);

/* ---- buffer.h ----------------------------------------------------------- */
typedef struct pw_buffer_t {
  uint64_t id;
} pw_buffer_t;

pw_status_t pw_buffer_from_host(pw_client_t* client, pw_vslice_t vslice,
                                const pw_array_spec_t* spec, const void* data,
                                size_t size, pw_buffer_t* out_buffer);
pw_status_t pw_buffer_to_host(pw_client_t* client, pw_buffer_t buffer,
                              void* dst, size_t size, pw_time_t deadline);
pw_status_t pw_buffer_ready_event(pw_client_t* client, pw_buffer_t buffer,
                                  pw_event_t** out_event);
pw_status_t pw_buffer_spec(pw_client_t* client, pw_buffer_t buffer,
                           pw_array_spec_t* out_spec);
pw_status_t pw_buffer_release(pw_client_t* client, pw_buffer_t buffer);

typedef enum pw_host_semantics_e {
  PW_HOST_COPY_BEFORE_RETURN = 0,
  PW_HOST_IMMUTABLE_UNTIL_TRANSFER_COMPLETES = 1,
  PW_HOST_ZERO_COPY = 2,
} pw_host_semantics_t;
typedef struct pw_host_transfer_options_t {
  size_t struct_size;
  pw_host_semantics_t semantics;
} pw_host_transfer_options_t;
void pw_host_transfer_options_init(pw_host_transfer_options_t* options);
pw_status_t pw_buffer_from_host_async(pw_client_t* client, pw_vslice_t vslice,
                                      const pw_array_spec_t* spec, const void* data,
                                      size_t size, const pw_host_transfer_options_t* options,
                                      pw_buffer_t* out_buffer, pw_event_t** out_host_done);
pw_status_t pw_buffer_create_empty(pw_client_t* client, pw_vslice_t vslice,
                                   const pw_array_spec_t* spec, pw_buffer_t* out_buffer);
pw_status_t pw_buffer_fill_from_host(pw_client_t* client, pw_buffer_t buffer, const void* data,
                                     size_t size, const pw_host_transfer_options_t* options,
                                     pw_event_t** out_host_done);
pw_status_t pw_buffer_to_host_async(pw_client_t* client, pw_buffer_t buffer, void* dst,
                                    size_t size, pw_event_t** out_done);

/* ---- executable.h ------------------------------------------------------- */
typedef struct pw_executable_t {
  uint64_t id;
} pw_executable_t;

pw_status_t pw_executable_compile(pw_client_t* client, pw_vslice_t vslice,
                                  const void* program, size_t program_size,
                                  const char* options,
                                  pw_executable_t* out_executable);
pw_status_t pw_executable_load(pw_client_t* client, pw_vslice_t vslice,
                               const void* bytes, size_t size,
                               pw_executable_t* out_executable);
pw_status_t pw_executable_signature(pw_client_t* client,
                                    pw_executable_t executable,
                                    pw_executable_signature_t* out_signature);
typedef enum pw_param_role_e {
  PW_PARAM_INPUT = 0,
  PW_PARAM_OUTPUT = 1,
} pw_param_role_t;
pw_status_t pw_executable_param_count(pw_client_t* client, pw_executable_t executable,
                                      pw_param_role_t role, uint32_t* out_count);
pw_status_t pw_executable_param(pw_client_t* client, pw_executable_t executable,
                                pw_param_role_t role, uint32_t index,
                                pw_backend_param_t* out_spec);
pw_status_t pw_executable_bytes(pw_client_t* client, pw_executable_t executable,
                                const void** out_bytes, size_t* out_size);
pw_status_t pw_executable_release(pw_client_t* client,
                                  pw_executable_t executable);

/* ---- graph.h ------------------------------------------------------------ */
typedef struct pw_graph_t {
  uint64_t id;
} pw_graph_t;

typedef struct pw_value_t {
  uint32_t node;
  uint32_t output;
} pw_value_t;

pw_status_t pw_graph_create(pw_client_t* client, pw_graph_t* out_graph);
pw_status_t pw_graph_add_parameter(pw_client_t* client, pw_graph_t graph,
                                   pw_vslice_t vslice,
                                   const pw_array_spec_t* spec,
                                   uint32_t* out_node);
pw_status_t pw_graph_add_compute(pw_client_t* client, pw_graph_t graph,
                                 const char* name, pw_executable_t executable,
                                 pw_vslice_t vslice, const pw_value_t* inputs,
                                 uint32_t input_count, uint32_t* out_node);
pw_status_t pw_graph_add_transfer(pw_client_t* client, pw_graph_t graph, const char* name,
                                  pw_value_t input, pw_vslice_t vslice, pw_sharding_t sharding,
                                  uint32_t* out_node);
pw_status_t pw_graph_add_output(pw_client_t* client, pw_graph_t graph,
                                pw_value_t value);
typedef struct pw_host_task_context_t {
  size_t struct_size;
  uint32_t node;
  const char* name;
  uint64_t gang_id;
  uint32_t device_count;
  uint32_t input_count;
  uint32_t output_count;
  const pw_array_spec_t* input_specs;
  const pw_array_spec_t* output_specs;
  void* const* const* inputs;
  const size_t* input_bytes;
  void* const* const* outputs;
  const size_t* output_bytes;
} pw_host_task_context_t;
typedef pw_status_t (*pw_host_task_fn_t)(void* user, const pw_host_task_context_t* context);
typedef struct pw_host_task_t {
  size_t struct_size;
  pw_host_task_fn_t fn;
  void* user;
  void (*destroy)(void* user);
} pw_host_task_t;
pw_status_t pw_graph_add_host(pw_client_t* client, pw_graph_t graph, const char* name,
                              const pw_host_task_t* task, pw_vslice_t vslice,
                              const pw_value_t* inputs, uint32_t input_count,
                              const pw_array_spec_t* output_specs, uint32_t output_count,
                              uint32_t* out_node);
pw_status_t pw_client_register_host_task(pw_client_t* client, const char* task_name,
                                         const pw_host_task_t* task);
pw_status_t pw_graph_add_host_by_name(pw_client_t* client, pw_graph_t graph, const char* name,
                                      const char* task_name, pw_vslice_t vslice,
                                      const pw_value_t* inputs, uint32_t input_count,
                                      const pw_array_spec_t* output_specs,
                                      uint32_t output_count, uint32_t* out_node);
pw_status_t pw_graph_finalize(pw_client_t* client, pw_graph_t graph);

typedef struct pw_graph_counts_t {
  size_t struct_size;
  uint32_t parameters;
  uint32_t computes;
  uint32_t outputs;
  uint32_t edges;
} pw_graph_counts_t;

pw_status_t pw_graph_counts(pw_client_t* client, pw_graph_t graph,
                            pw_graph_counts_t* out_counts);
pw_status_t pw_graph_release(pw_client_t* client, pw_graph_t graph);

typedef struct pw_submit_options_t {
  size_t struct_size;
  const bool* donate;
  ...;
} pw_submit_options_t;

pw_status_t pw_graph_submit(pw_client_t* client, pw_graph_t graph,
                            const pw_buffer_t* args, uint32_t arg_count,
                            const pw_submit_options_t* options,
                            pw_buffer_t* out_outputs, uint32_t output_count,
                            pw_event_t** out_done);

typedef struct pw_graph_exec_s pw_graph_exec_t;

pw_status_t pw_graph_exec_create(pw_client_t* client, pw_graph_t graph,
                                 pw_graph_exec_t** out_exec);
pw_status_t pw_graph_exec_submit(pw_graph_exec_t* exec, const pw_buffer_t* args,
                                 uint32_t arg_count, const pw_submit_options_t* options,
                                 pw_buffer_t* out_outputs, uint32_t output_count,
                                 pw_event_t** out_done);
pw_status_t pw_graph_exec_destroy(pw_graph_exec_t* exec);

/* ---- store.h, stores/dir.h ---------------------------------------------- */
typedef struct pw_store_vtable_t pw_store_vtable_t;
typedef struct pw_store_t {
  const pw_store_vtable_t* vtable;
  void* self;
} pw_store_t;
typedef struct pw_dir_store_options_t {
  size_t struct_size;
  const char* path;
  uint64_t max_bytes;
  uint32_t stale_temp_seconds;
  pw_allocator_t allocator;
  pw_logger_t logger;
  ...;
} pw_dir_store_options_t;
void pw_dir_store_options_init(pw_dir_store_options_t* options);
pw_status_t pw_dir_store_create(const pw_dir_store_options_t* options, pw_store_t* out_store);
/* ---- snapshot.h --------------------------------------------------------- */
typedef struct pw_snapshotter_s pw_snapshotter_t;
#define PW_SNAPSHOT_NAME_MAX ...
#define PW_SNAPSHOT_PREFIX_MAX ...
typedef struct pw_snapshotter_options_t {
  size_t struct_size;
  pw_allocator_t allocator;
  pw_logger_t logger;
  uint32_t keep;
  uint32_t max_in_flight;
  pw_store_t store;
  const char* key_prefix;
  int32_t compression_level;
  uint64_t chunk_bytes;
  ...;
} pw_snapshotter_options_t;
void pw_snapshotter_options_init(pw_snapshotter_options_t* out_options);
pw_status_t pw_snapshotter_create(pw_client_t* client, const pw_snapshotter_options_t* options,
                                  pw_snapshotter_t** out_snapshotter);
pw_status_t pw_snapshotter_destroy(pw_snapshotter_t* snapshotter);
pw_status_t pw_snapshot_take(pw_snapshotter_t* snapshotter, uint64_t step,
                             const pw_buffer_t* buffers, const char* const* names,
                             uint32_t count, pw_event_t** out_copied,
                             pw_event_t** out_persisted);
pw_status_t pw_snapshotter_flush(pw_snapshotter_t* snapshotter, pw_time_t deadline);
pw_status_t pw_snapshotter_latest_step(pw_snapshotter_t* snapshotter, uint64_t* out_step);
pw_status_t pw_snapshotter_steps(pw_snapshotter_t* snapshotter, uint64_t* out_steps,
                                 uint32_t capacity, uint32_t* out_count);
typedef struct pw_snapshot_info_t {
  size_t struct_size;
  uint64_t step;
  uint32_t buffer_count;
  uint64_t total_bytes;
  uint64_t wait_ns;
  uint64_t copy_ns;
  uint64_t persist_ns;
  uint64_t stored_bytes;
  bool persisted;
  bool loaded;
  ...;
} pw_snapshot_info_t;
pw_status_t pw_snapshot_info(pw_snapshotter_t* snapshotter, uint64_t step,
                             pw_snapshot_info_t* out_info);
typedef struct pw_snapshot_buffer_info_t {
  size_t struct_size;
  char name[64];
  pw_array_spec_t spec;
  uint64_t bytes;
  uint64_t xxh64;
  ...;
} pw_snapshot_buffer_info_t;
pw_status_t pw_snapshot_buffer_info(pw_snapshotter_t* snapshotter, uint64_t step,
                                    uint32_t index, pw_snapshot_buffer_info_t* out_info);
pw_status_t pw_snapshot_find_buffer(pw_snapshotter_t* snapshotter, uint64_t step,
                                    const char* name, uint32_t* out_index);
pw_status_t pw_snapshot_restore(pw_snapshotter_t* snapshotter, uint64_t step, uint32_t index,
                                pw_client_t* client, pw_vslice_t vslice,
                                const pw_array_spec_t* spec, pw_buffer_t* out_buffer);
pw_status_t pw_snapshot_restore_all(pw_snapshotter_t* snapshotter, uint64_t step,
                                    pw_client_t* client, pw_vslice_t vslice,
                                    const pw_array_spec_t* specs, uint32_t count,
                                    pw_buffer_t* out_buffers);
pw_status_t pw_snapshotter_load_latest(pw_snapshotter_t* snapshotter, uint64_t* out_step);
/* ---- elastic.h ---------------------------------------------------------- */
typedef struct pw_elastic_s pw_elastic_t;
typedef enum pw_elastic_event_kind_e {
  PW_ELASTIC_SNAPSHOT = 1,
  PW_ELASTIC_SLICE_LOST = 2,
  PW_ELASTIC_SLICE_BACK = 3,
  PW_ELASTIC_RESTORED = 4,
  PW_ELASTIC_REMESHED = 5,
  PW_ELASTIC_GROWN = 6,
} pw_elastic_event_kind_t;
const char* pw_elastic_event_name(pw_elastic_event_kind_t kind);
typedef struct pw_elastic_event_t {
  size_t struct_size;
  pw_elastic_event_kind_t kind;
  uint64_t step;
  uint32_t slice;
  uint32_t slice_count;
  pw_status_t cause;
  uint64_t elapsed_ns;
  ...;
} pw_elastic_event_t;
typedef struct pw_elastic_job_t {
  size_t struct_size;
  void* user;
  pw_status_t (*setup)(void* user, pw_elastic_t* elastic, const uint32_t* slices,
                       uint32_t slice_count, bool restoring);
  void (*teardown)(void* user, pw_elastic_t* elastic);
  pw_status_t (*step)(void* user, pw_elastic_t* elastic, uint64_t step);
  void (*on_event)(void* user, const pw_elastic_event_t* event);
  ...;
} pw_elastic_job_t;
typedef struct pw_elastic_options_t {
  size_t struct_size;
  pw_mesh_shape_t slice_mesh;
  uint32_t max_slices;
  uint32_t min_slices;
  uint32_t snapshot_every;
  uint64_t return_wait_ns;
  uint64_t drain_deadline_ns;
  uint32_t max_recoveries;
  uint32_t state_count;
  const char* const* state_names;
  uint32_t keep;
  pw_store_t store;
  const char* key_prefix;
  ...;
} pw_elastic_options_t;
void pw_elastic_options_init(pw_elastic_options_t* out_options);
pw_status_t pw_elastic_create(pw_client_t* client, const pw_elastic_options_t* options,
                              const pw_elastic_job_t* job, pw_elastic_t** out_elastic);
pw_status_t pw_elastic_destroy(pw_elastic_t* elastic);
pw_status_t pw_elastic_place(pw_elastic_t* elastic, uint32_t index, pw_vslice_t vslice,
                             const pw_array_spec_t* spec);
pw_status_t pw_elastic_set_state(pw_elastic_t* elastic, uint32_t index, pw_buffer_t buffer);
pw_status_t pw_elastic_state(pw_elastic_t* elastic, uint32_t index, pw_buffer_t* out_buffer);
uint32_t pw_elastic_slice_count(const pw_elastic_t* elastic);
pw_status_t pw_elastic_run(pw_elastic_t* elastic, uint64_t first_step, uint64_t step_count);
typedef struct pw_elastic_stats_t {
  size_t struct_size;
  uint64_t steps_completed;
  uint64_t steps_replayed;
  uint32_t recoveries;
  uint32_t growths;
  uint32_t snapshots;
  uint32_t slice_count;
  uint64_t last_detect_ns;
  uint64_t last_drain_ns;
  uint64_t last_restore_ns;
  uint64_t last_first_step_ns;
  ...;
} pw_elastic_stats_t;
pw_status_t pw_elastic_stats(pw_elastic_t* elastic, pw_elastic_stats_t* out_stats);
/* ---- graph_format.h ----------------------------------------------------- */
#define PW_GRAPH_FORMAT_VERSION ...
typedef struct pw_graph_hash_t {
  uint8_t bytes[16];
} pw_graph_hash_t;
void pw_graph_hash_format(const pw_graph_hash_t* hash, char out[33]);
typedef struct pw_graph_format_info_t {
  size_t struct_size;
  uint32_t vslices;
  uint32_t executables;
  uint32_t buffers;
  uint32_t parameters;
  uint32_t nodes;
  uint32_t outputs;
  pw_graph_hash_t hash;
  ...;
} pw_graph_format_info_t;
pw_status_t pw_graph_format_check(const void* bytes, size_t size, pw_allocator_t allocator,
                                  pw_graph_format_info_t* out_info);
pw_status_t pw_graph_format_canonicalize(const void* bytes, size_t size,
                                         pw_allocator_t allocator, void** out_bytes,
                                         size_t* out_size);
pw_status_t pw_graph_format_dump_json(const void* bytes, size_t size, pw_allocator_t allocator,
                                      char** out_text, size_t* out_size);
typedef struct pw_graph_encode_options_t {
  size_t struct_size;
  const pw_vslice_t* vslices;
  uint32_t vslice_count;
  bool executables_by_hash;
  ...;
} pw_graph_encode_options_t;
pw_status_t pw_graph_encode(pw_client_t* client, pw_graph_t graph,
                            const pw_graph_encode_options_t* options, pw_allocator_t allocator,
                            void** out_bytes, size_t* out_size);
typedef struct pw_graph_decode_options_t {
  size_t struct_size;
  const pw_vslice_t* vslices;
  uint32_t vslice_count;
  const pw_executable_t* executables;
  uint32_t executable_count;
  ...;
} pw_graph_decode_options_t;
pw_status_t pw_graph_decode(pw_client_t* client, const void* bytes, size_t size,
                            const pw_graph_decode_options_t* options, pw_graph_t* out_graph);
pw_status_t pw_graph_executable_hash(pw_client_t* client, pw_executable_t executable,
                                     pw_graph_hash_t* out_hash);

/* ---- cache.h ------------------------------------------------------------ */
typedef struct pw_cache_s pw_cache_t;
typedef struct pw_cache_key_t {
  uint8_t bytes[16];
} pw_cache_key_t;
void pw_cache_key_format(const pw_cache_key_t* key, char out[33]);
pw_status_t pw_cache_compile_key(const char* backend_name, uint32_t backend_version,
                                 const pw_mesh_shape_t* mesh, const void* program,
                                 size_t program_size, const char* options,
                                 pw_cache_key_t* out_key);
typedef struct pw_cache_options_t {
  size_t struct_size;
  pw_allocator_t allocator;
  pw_logger_t logger;
  uint64_t memory_bytes;
  pw_store_t store;
  int32_t compression_level;
  ...;
} pw_cache_options_t;
void pw_cache_options_init(pw_cache_options_t* options);
pw_status_t pw_cache_create(const pw_cache_options_t* options, pw_cache_t** out_cache);
void pw_cache_retain(pw_cache_t* cache);
void pw_cache_release(pw_cache_t* cache);
typedef struct pw_cache_stats_t {
  size_t struct_size;
  uint64_t lookups;
  uint64_t memory_hits;
  uint64_t store_hits;
  uint64_t misses;
  uint64_t shared;
  uint64_t fill_errors;
  uint64_t bad_entries;
  uint64_t store_errors;
  uint64_t store_writes;
  uint64_t store_bytes_written;
  uint64_t store_raw_bytes_written;
  uint64_t memory_entries;
  uint64_t memory_bytes;
  uint64_t memory_evictions;
  uint64_t fill_ns;
  uint64_t fill_ns_saved;
  ...;
} pw_cache_stats_t;
pw_status_t pw_cache_stats(pw_cache_t* cache, pw_cache_stats_t* out_stats);
pw_status_t pw_runtime_set_compile_cache(pw_runtime_t* runtime, pw_cache_t* cache);

/* ---- backends/sim.h ----------------------------------------------------- */
#define PW_SIM_MAX_DEVICES ...
typedef uint64_t pw_sim_time_t;
#define PW_SIM_TIME_NEVER ...
#define PW_SIM_TIME_NOW ...
typedef enum pw_sim_mode_e {
  PW_SIM_MODE_INLINE = 0,
  PW_SIM_MODE_THREADED = 1,
  PW_SIM_MODE_MANUAL = 2,
} pw_sim_mode_t;
typedef enum pw_sim_memory_e {
  PW_SIM_MEMORY_HOST = 0,
  PW_SIM_MEMORY_VIRTUAL = 1,
} pw_sim_memory_t;
typedef enum pw_sim_failure_kind_e {
  PW_SIM_FAIL_CHIP = 0,
  PW_SIM_FAIL_SLICE = 1,
} pw_sim_failure_kind_t;
typedef struct pw_sim_failure_t {
  pw_sim_failure_kind_t kind;
  uint32_t index;
  pw_sim_time_t at;
} pw_sim_failure_t;
typedef enum pw_sim_event_kind_e {
  PW_SIM_EVENT_DONE = 0,
  PW_SIM_EVENT_FAILED = 1,
  PW_SIM_EVENT_TRANSFER = 2,
  PW_SIM_EVENT_CANCELLED = 3,
} pw_sim_event_kind_t;
typedef struct pw_sim_event_t {
  pw_sim_time_t time;
  pw_sim_time_t start;
  uint32_t device;
  pw_sim_event_kind_t kind;
  uint64_t gang_id;
  const char* op;
} pw_sim_event_t;
typedef void (*pw_sim_trace_fn_t)(void* user, const pw_sim_event_t* event);
typedef struct pw_sim_backend_options_t {
  size_t struct_size;
  pw_allocator_t allocator;
  pw_logger_t logger;
  uint32_t slice_count;
  uint32_t devices_per_slice;
  pw_sim_mode_t mode;
  pw_sim_memory_t memory;
  uint64_t device_memory_bytes;
  double chip_flops_per_s;
  double chip_bytes_per_s;
  double ici_bytes_per_s;
  pw_sim_time_t ici_latency_ns;
  double dcn_bytes_per_s;
  pw_sim_time_t dcn_latency_ns;
  pw_sim_time_t launch_overhead_ns;
  uint64_t seed;
  uint32_t random_chip_failures;
  uint32_t random_slice_failures;
  pw_sim_time_t failure_window_ns;
  const pw_sim_failure_t* failures;
  uint32_t failure_count;
  pw_sim_trace_fn_t trace;
  void* trace_user;
  uint32_t queue_depth;
  bool blocking_collectives;
  pw_sim_time_t dispatch_latency_ns;
  uint32_t devices_per_host;
  ...;
} pw_sim_backend_options_t;
void pw_sim_backend_options_init(pw_sim_backend_options_t* out_options);
pw_status_t pw_sim_backend_create(const pw_sim_backend_options_t* options,
                                  pw_backend_t* out_backend);
bool pw_sim_backend_is_sim(pw_backend_t backend);
pw_status_t pw_sim_backend_run_until(pw_backend_t backend, pw_sim_time_t time,
                                     uint64_t* out_delivered);
pw_status_t pw_sim_backend_run_all(pw_backend_t backend, uint64_t* out_delivered);
pw_status_t pw_sim_backend_step(pw_backend_t backend, uint64_t* out_delivered);
bool pw_sim_backend_wait_idle(pw_backend_t backend, uint64_t timeout_ns);
typedef struct pw_sim_stats_t {
  size_t struct_size;
  pw_sim_time_t clock;
  uint64_t trace_hash;
  uint64_t events;
  uint64_t failed;
  uint64_t transfers;
  uint64_t queued;
  pw_sim_time_t busy_ns;
  pw_sim_time_t span_start;
  pw_sim_time_t span_end;
  uint64_t host_launches;
  ...;
} pw_sim_stats_t;
pw_status_t pw_sim_backend_stats(pw_backend_t backend, pw_sim_stats_t* out_stats);
uint64_t pw_sim_backend_trace_hash(pw_backend_t backend);
pw_sim_time_t pw_sim_backend_clock(pw_backend_t backend);
typedef struct pw_sim_device_state_t {
  size_t struct_size;
  uint32_t slice;
  uint32_t chip;
  pw_sim_time_t busy_until;
  pw_sim_time_t fail_at;
  uint64_t events;
  pw_device_health_t health;
  pw_sim_time_t busy_ns;
  pw_sim_time_t first_start;
  pw_sim_time_t last_end;
  uint32_t outstanding;
  uint64_t waiting_gang;
  ...;
} pw_sim_device_state_t;
pw_status_t pw_sim_backend_device_state(pw_backend_t backend, uint32_t device,
                                        pw_sim_device_state_t* out_state);
pw_status_t pw_sim_backend_fail(pw_backend_t backend, pw_sim_failure_kind_t kind,
                                uint32_t index, pw_sim_time_t at);
pw_status_t pw_sim_backend_repair(pw_backend_t backend, pw_sim_failure_kind_t kind,
                                  uint32_t index);

/* ---- plugin.h ----------------------------------------------------------- */
#define PW_PLUGIN_ABI_VERSION ...
typedef enum pw_plugin_kind_t {
  PW_PLUGIN_KIND_BACKEND = 1,
  PW_PLUGIN_KIND_TRANSPORT = 2,
  PW_PLUGIN_KIND_STORE = 3,
} pw_plugin_kind_t;
const char* pw_plugin_kind_name(pw_plugin_kind_t kind);
typedef struct pw_plugin_factory_t {
  size_t struct_size;
  uint32_t abi_version;
  pw_plugin_kind_t kind;
  const char* name;
  const char* version;
  const char* description;
  const char* args_help;
  ...;
} pw_plugin_factory_t;
typedef struct pw_plugin_t pw_plugin_t;
pw_status_t pw_plugin_load(const char* path_or_name, pw_plugin_t** out_plugin);
void pw_plugin_release(pw_plugin_t* plugin);
const pw_plugin_factory_t* pw_plugin_factory(const pw_plugin_t* plugin);
const char* pw_plugin_path(const pw_plugin_t* plugin);
pw_status_t pw_plugin_create_backend(pw_plugin_t* plugin, const char* args,
                                     pw_backend_t* out_backend);
pw_status_t pw_plugin_create_store(pw_plugin_t* plugin, const char* args,
                                   pw_store_t* out_store);
const char* pw_plugin_dir(void);

/* ---- backends/cpu.h ----------------------------------------------------- */
#define PW_CPU_MAX_DEVICES ...
#define PW_CPU_MAX_WORKERS ...
#define PW_CPU_PROGRAM_TEXT_MAX ...
#define PW_CPU_MAX_PARAMS ...

typedef struct pw_cpu_backend_options_t {
  size_t struct_size;
  pw_allocator_t allocator;
  pw_logger_t logger;
  uint32_t device_count;
  uint32_t worker_count;
  uint64_t device_memory_bytes;
  uint32_t host;
  ...;
} pw_cpu_backend_options_t;

void pw_cpu_backend_options_init(pw_cpu_backend_options_t* out_options);
pw_status_t pw_cpu_backend_create(const pw_cpu_backend_options_t* options,
                                  pw_backend_t* out_backend);
pw_status_t pw_cpu_backend_set_health(pw_backend_t backend, uint32_t device,
                                      pw_device_health_t health);

typedef enum pw_cpu_attr_kind_e {
  PW_CPU_ATTR_NUMBER = 1,
  PW_CPU_ATTR_STRING = 2,
} pw_cpu_attr_kind_t;

typedef struct pw_cpu_attr_t {
  char name[32];
  pw_cpu_attr_kind_t kind;
  double number;
  char text[64];
} pw_cpu_attr_t;

typedef struct pw_cpu_program_t {
  char kernel[64];
  uint32_t input_count;
  uint32_t output_count;
  uint32_t attr_count;
  pw_backend_param_t inputs[...];
  pw_backend_param_t outputs[...];
  pw_cpu_attr_t attrs[16];
  uint32_t over_axes;
} pw_cpu_program_t;

pw_status_t pw_cpu_program_init(pw_cpu_program_t* program, const char* kernel);
pw_status_t pw_cpu_program_add_input(pw_cpu_program_t* program,
                                     pw_dtype_t dtype, const pw_shape_t* shape,
                                     pw_sharding_t sharding);
pw_status_t pw_cpu_program_add_output(pw_cpu_program_t* program,
                                      pw_dtype_t dtype, const pw_shape_t* shape,
                                      pw_sharding_t sharding);
pw_status_t pw_cpu_program_set_number(pw_cpu_program_t* program,
                                      const char* name, double value);
pw_status_t pw_cpu_program_set_string(pw_cpu_program_t* program,
                                      const char* name, const char* text);
pw_status_t pw_cpu_program_format(const pw_cpu_program_t* program,
                                  char* buffer, size_t capacity,
                                  size_t* out_length);
pw_status_t pw_cpu_program_parse(const char* text, size_t size,
                                 pw_cpu_program_t* out_program);

#define PW_CPU_DTYPES_ANY ...
#define PW_CPU_KERNEL_SAME_DTYPE ...
#define PW_CPU_KERNEL_OPEN_ATTRS ...

typedef struct pw_cpu_param_spec_t {
  const char* name;
  uint32_t dtypes;
  int32_t rank;
} pw_cpu_param_spec_t;

typedef struct pw_cpu_attr_spec_t {
  const char* name;
  pw_cpu_attr_kind_t kind;
  bool required;
} pw_cpu_attr_spec_t;

typedef struct pw_cpu_input_shard_t {
  const void* data;
  size_t size;
  pw_dtype_t dtype;
  pw_shape_t shape;
} pw_cpu_input_shard_t;

typedef struct pw_cpu_output_shard_t {
  void* data;
  size_t size;
  pw_dtype_t dtype;
  pw_shape_t shape;
} pw_cpu_output_shard_t;

typedef struct pw_cpu_kernel_call_t {
  size_t struct_size;
  const pw_cpu_program_t* program;
  const pw_mesh_shape_t* mesh;
  uint32_t mesh_index;
  uint32_t device;
  const pw_cpu_input_shard_t* inputs;
  uint32_t input_count;
  const pw_cpu_output_shard_t* outputs;
  uint32_t output_count;
  const pw_cpu_attr_t* attrs;
  uint32_t attr_count;
  void* user;
  ...;
} pw_cpu_kernel_call_t;

typedef pw_status_t (*pw_cpu_kernel_run_fn_t)(const pw_cpu_kernel_call_t* call);
typedef pw_status_t (*pw_cpu_kernel_check_fn_t)(void* user,
                                                const pw_cpu_program_t* program,
                                                const pw_mesh_shape_t* mesh);

typedef struct pw_cpu_kernel_def_t {
  size_t struct_size;
  const char* name;
  uint32_t input_count;
  const pw_cpu_param_spec_t* inputs;
  uint32_t output_count;
  const pw_cpu_param_spec_t* outputs;
  uint32_t attr_count;
  const pw_cpu_attr_spec_t* attrs;
  uint32_t flags;
  pw_cpu_kernel_check_fn_t check;
  pw_cpu_kernel_run_fn_t run;
  void* user;
  ...;
} pw_cpu_kernel_def_t;

pw_status_t pw_cpu_backend_register_kernel(pw_backend_t backend,
                                           const pw_cpu_kernel_def_t* def);

/* ---- trace.h, runtime dump ---------------------------------------------- */
typedef struct pw_trace_options_t {
  size_t struct_size;
  uint32_t events_per_thread;
  uint64_t (*clock)(void* clock_user);
  void* clock_user;
  const char* clock_name;
  ...;
} pw_trace_options_t;

typedef struct pw_trace_stats_t {
  size_t struct_size;
  uint64_t events;
  uint64_t dropped;
  uint32_t threads;
  uint32_t recording;
  ...;
} pw_trace_stats_t;

pw_status_t pw_runtime_trace_start(pw_runtime_t* runtime, const pw_trace_options_t* options);
pw_status_t pw_runtime_trace_stop(pw_runtime_t* runtime);
pw_status_t pw_runtime_trace_stats(pw_runtime_t* runtime, pw_trace_stats_t* out_stats);
pw_status_t pw_runtime_trace_write_file(pw_runtime_t* runtime, const char* path);

typedef void (*pw_dump_line_fn_t)(void* user, const char* line);
pw_status_t pw_runtime_dump(pw_runtime_t* runtime, pw_dump_line_fn_t fn, void* user);

/* ---- metrics.h ------------------------------------------------------------ */
typedef struct pw_metrics_options_t {
  size_t struct_size;
  uint32_t flags;
  ...;
} pw_metrics_options_t;
pw_status_t pw_runtime_metrics_enable(pw_runtime_t* runtime, const pw_metrics_options_t* options);
pw_status_t pw_runtime_metrics_disable(pw_runtime_t* runtime);

typedef enum pw_metric_type_e {
  PW_METRIC_COUNTER = 0,
  PW_METRIC_GAUGE = 1,
  PW_METRIC_HISTOGRAM = 2,
} pw_metric_type_t;
typedef struct pw_metric_label_t {
  const char* name;
  const char* value;
} pw_metric_label_t;
typedef struct pw_metric_sample_t {
  size_t struct_size;
  const char* family;
  const char* help;
  pw_metric_type_t type;
  uint32_t label_count;
  const pw_metric_label_t* labels;
  double value;
  uint32_t bucket_count;
  const double* bucket_bounds;
  const uint64_t* bucket_counts;
  uint64_t count;
  ...;
} pw_metric_sample_t;
typedef pw_status_t (*pw_metrics_visit_fn_t)(void* user, const pw_metric_sample_t* sample);
pw_status_t pw_runtime_metrics_visit(pw_runtime_t* runtime, pw_metrics_visit_fn_t fn, void* user);
typedef pw_status_t (*pw_metrics_sink_fn_t)(void* user, const char* data, size_t size);
pw_status_t pw_runtime_metrics_write_prometheus(pw_runtime_t* runtime, pw_metrics_sink_fn_t sink,
                                                void* user);
typedef struct pw_metrics_server_s pw_metrics_server_t;
typedef struct pw_metrics_server_options_t {
  size_t struct_size;
  const char* address;
  uint16_t port;
  ...;
} pw_metrics_server_options_t;
pw_status_t pw_metrics_server_start(pw_runtime_t* runtime,
                                    const pw_metrics_server_options_t* options,
                                    pw_metrics_server_t** out_server);
uint16_t pw_metrics_server_port(const pw_metrics_server_t* server);
void pw_metrics_server_stop(pw_metrics_server_t* server);

/* ---- the module's own support code (src/pwpy_support.h) ----------------- */

/* A thread-safe counting allocator over the system one (leak checks,
 * memory statistics). */
typedef struct pwpy_counting_allocator_s pwpy_counting_allocator_t;

typedef struct pwpy_memory_stats_t {
  int64_t live_blocks;
  int64_t live_bytes;
  int64_t peak_bytes;
  int64_t allocations;
  int64_t failed_allocations;
  int64_t mismatched_frees;
} pwpy_memory_stats_t;

pwpy_counting_allocator_t* pwpy_counting_allocator_create(void);
void pwpy_counting_allocator_destroy(pwpy_counting_allocator_t* counter);
pw_allocator_t pwpy_counting_allocator_get(pwpy_counting_allocator_t* counter);
void pwpy_counting_allocator_stats(const pwpy_counting_allocator_t* counter,
                                   pwpy_memory_stats_t* out_stats);

/* pw_status_make(code, "%s", message) without varargs. */
pw_status_t pwpy_status_make(pw_status_code_t code, const char* message);
void pwpy_backend_destroy(pw_backend_t backend);

/* ---- callbacks into Python (extern "Python", any thread) ---------------- */
extern "Python" pw_status_t pwpy_kernel_run(const pw_cpu_kernel_call_t* call);
extern "Python" pw_status_t pwpy_kernel_check(void* user,
                                              const pw_cpu_program_t* program,
                                              const pw_mesh_shape_t* mesh);
extern "Python" void pwpy_event_callback(void* user, pw_status_t status);
extern "Python" void pwpy_log(pw_log_level_t level, const char* subsystem,
                              const char* message, void* user);
extern "Python" void pwpy_dump_line(void* user, const char* line);
extern "Python" void pwpy_sim_trace(void* user, const pw_sim_event_t* event);
extern "Python" pw_status_t pwpy_metric_sample(void* user, const pw_metric_sample_t* sample);
extern "Python" pw_status_t pwpy_metrics_text(void* user, const char* data, size_t size);
extern "Python" pw_status_t pwpy_host_task_run(void* user, const pw_host_task_context_t* context);
extern "Python" void pwpy_host_task_destroy(void* user);
extern "Python" void pwpy_topology(void* user, const pw_topology_event_t* event);
extern "Python" pw_status_t pwpy_elastic_setup(void* user, pw_elastic_t* elastic,
                                               const uint32_t* slices, uint32_t slice_count,
                                               bool restoring);
extern "Python" void pwpy_elastic_teardown(void* user, pw_elastic_t* elastic);
extern "Python" pw_status_t pwpy_elastic_step(void* user, pw_elastic_t* elastic, uint64_t step);
extern "Python" void pwpy_elastic_event(void* user, const pw_elastic_event_t* event);
