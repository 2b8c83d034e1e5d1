/* libpathways: backends loaded from a shared object (as PJRT plugins are).
 *
 * A host application ships its backend as a shared object that exports
 * two plain C symbols (not PW_API: they are the plugin's, not the
 * library's; build the object with default visibility for them):
 *
 *   uint32_t pw_backend_plugin_abi(void);
 *     returns PW_BACKEND_PLUGIN_ABI of the header it was built with.
 *
 *   pw_status_t pw_backend_plugin_create(const char* args,
 *                                        pw_backend_t* out_backend);
 *     makes one backend from |args| (the plugin's own text: the part
 *     after the path in `--backend plugin:PATH:ARGS`, "" when none; never
 *     NULL), as a create function of a bundled backend would: NULL and a
 *     filled |*out_backend| on success, which the caller then owns and
 *     frees with vtable->destroy(self); an error naming the problem
 *     otherwise, with |*out_backend| zeroed.
 *
 * The loader (the `pathways-worker` binary, docs/deploy.md) dlopens the
 * object, refuses it when either symbol is missing or the ABI is not
 * PW_BACKEND_PLUGIN_ABI (with a message naming the path, the symbol or
 * both versions), calls create once and keeps the object loaded while the
 * backend lives. The vtable itself is versioned by its struct_size
 * (pathways/backend.h): the ABI number changes only if these two
 * functions do.
 *
 * A plugin links libpathways (statuses, allocators) or carries its own
 * pw_status_t maker: the statuses it returns are freed by the loader with
 * pw_status_free, so it must make them with this library's
 * pw_status_make.
 */
#ifndef PATHWAYS_BACKEND_PLUGIN_H_
#define PATHWAYS_BACKEND_PLUGIN_H_

#include <stdint.h>

#include "pathways/api.h"
#include "pathways/backend.h"
#include "pathways/status.h"

PW_EXTERN_C_BEGIN

#define PW_BACKEND_PLUGIN_ABI 1u

#define PW_BACKEND_PLUGIN_ABI_SYMBOL "pw_backend_plugin_abi"
#define PW_BACKEND_PLUGIN_CREATE_SYMBOL "pw_backend_plugin_create"

typedef uint32_t (*pw_backend_plugin_abi_fn_t)(void);
typedef pw_status_t (*pw_backend_plugin_create_fn_t)(const char* args,
                                                     pw_backend_t* out_backend);

PW_EXTERN_C_END

#endif /* PATHWAYS_BACKEND_PLUGIN_H_ */
