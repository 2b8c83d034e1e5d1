/* libpathways: what a plugin tells the conformance suite (pathways-cts).
 *
 * pathways-cts (docs/plugins.md, "The conformance suite") loads a plugin
 * library with pw_plugin_load and runs every case of the plugin's kind.
 * Most cases need nothing but the factory. Some need to know more than a
 * vtable can say: a backend's cases must compile a copy and an all-reduce
 * program in the backend's own language, may mark a device FAILED, and
 * count allocations only when the backend can be created with a given
 * allocator. A plugin says so by exporting, beside pw_plugin_entry, an
 * optional second plain C function:
 *
 *   PW_PLUGIN_EXPORT const pw_cts_hooks_t* pw_plugin_cts_hooks(
 *       uint32_t cts_abi);
 *
 * |cts_abi| is the PW_CTS_ABI_VERSION of the suite; the plugin returns a
 * static constant (struct_size set, unused members NULL) or NULL when it
 * has none for that version. Without the symbol (or with NULL) the cases
 * that need a hook are reported as skipped, naming the hook: a plugin
 * without hooks still passes, with less coverage.
 *
 * The suite itself never links a plugin's code: the hooks are its whole
 * view of the plugin beyond the factory and the vtables. The bundled cpu,
 * sim, inproc and dir modules get theirs from pathways-cts itself.
 *
 * ABI: the struct starts with struct_size and only grows at the end;
 * members beyond struct_size are treated as NULL. */
#ifndef PATHWAYS_CTS_H_
#define PATHWAYS_CTS_H_

#include <stddef.h>
#include <stdint.h>

#include "pathways/allocator.h"
#include "pathways/api.h"
#include "pathways/backend.h"
#include "pathways/status.h"
#include "pathways/store.h"
#include "pathways/struct_size.h"
#include "pathways/transport.h"
#include "pathways/types.h"

PW_EXTERN_C_BEGIN

#define PW_CTS_ABI_VERSION 1u
#define PW_CTS_HOOKS_SYMBOL "pw_plugin_cts_hooks"

/* Writes the program text for |mesh| into |buffer| (NUL-terminated,
 * truncated like snprintf) and returns its full length.
 *
 * The data model of the backend cases: f32 arrays on a 1-D mesh, each
 * device holding |elements| values of each parameter.
 *   copy:        one input, one output; output 0 on each device = input 0
 *                on that device (the mesh splits an f32[n * elements]
 *                array along axis 0).
 *   all-reduce:  one input, one output; output 0 on each device = the
 *                element-wise sum of input 0 over every device. */
typedef size_t (*pw_cts_program_fn_t)(const pw_mesh_shape_t* mesh, uint32_t elements,
                                      char* buffer, size_t capacity);

typedef struct pw_cts_hooks_t {
  size_t struct_size; /* sizeof(pw_cts_hooks_t) of the plugin's build */

  /* --- Backends. --- */

  /* The copy program (see above). Without it only the cases that need no
   * program run (vtable, devices, memory). */
  pw_cts_program_fn_t copy_program;
  /* The all-reduce program; NULL skips the collective cases. */
  pw_cts_program_fn_t all_reduce_program;
  /* Marks |device| of |backend| (made by this plugin) FAILED, so that
   * launches on it fail; NULL skips the failure cases. */
  pw_status_t (*fail_device)(pw_backend_t* backend, uint32_t device);
  /* NULL-terminated programs in the backend's own syntax that compile must
   * reject (beyond the suite's generic garbage); may be NULL. */
  const char* const* bad_programs;
  /* As the factory's create_backend, with everything the backend
   * allocates taken from |allocator|. NULL skips the leak and
   * allocation-failure cases. */
  pw_status_t (*create_backend)(const char* args, pw_allocator_t allocator,
                                pw_backend_t* out_backend);

  /* --- Transports. --- */

  /* As the factory's create_transport, allocating from |allocator|; NULL
   * skips the transport's allocation-failure case. */
  pw_status_t (*create_transport)(const char* args, pw_allocator_t allocator,
                                  pw_transport_t* out_transport);

  /* --- Stores. --- */

  /* As the factory's create_store, allocating from |allocator|; NULL
   * skips the store's allocation-failure case. */
  pw_status_t (*create_store)(const char* args, pw_allocator_t allocator,
                              pw_store_t* out_store);
  /* The largest value the store accepts with these args (0: no bound the
   * suite should respect beyond its own 8 MiB large-value case). */
  uint64_t max_value_bytes;

  /* Names of cases this plugin does not support, NULL-terminated (may be
   * NULL); added to the command line's --unsupported list. */
  const char* const* unsupported;
} pw_cts_hooks_t;

#define PW_CTS_HOOKS_SIZE_V1 PW_STRUCT_SIZE(pw_cts_hooks_t, unsupported)

typedef const pw_cts_hooks_t* (*pw_cts_hooks_fn_t)(uint32_t cts_abi);

PW_EXTERN_C_END

#endif /* PATHWAYS_CTS_H_ */
