/* Flushes deferred to the end of a thread's batch (see defer.h). */
#include "base/defer.h"

#include <stdint.h>

typedef struct pw_defer_entry_s {
  pw_defer_fn_t fn;
  void* ctx;
} pw_defer_entry_t;

static _Thread_local uint32_t pw_defer_depth;
static _Thread_local uint32_t pw_defer_count;
static _Thread_local pw_defer_entry_t pw_defer_list[PW_DEFER_MAX];

void pw__defer_begin(void) { ++pw_defer_depth; }

bool pw__defer_active(void) { return pw_defer_depth > 0; }

bool pw__defer_add(pw_defer_fn_t fn, void* ctx) {
  if (pw_defer_depth == 0) return false;
  for (uint32_t i = 0; i < pw_defer_count; ++i) {
    if (pw_defer_list[i].fn == fn && pw_defer_list[i].ctx == ctx) return true;
  }
  if (pw_defer_count == PW_DEFER_MAX) return false;
  pw_defer_list[pw_defer_count++] = (pw_defer_entry_t){fn, ctx};
  return true;
}

void pw__defer_end(void) {
  if (--pw_defer_depth != 0 || pw_defer_count == 0) return;
  /* Taken first: a flush that opens a batch of its own runs that batch's
   * flushes at its end, not these again. */
  pw_defer_entry_t run[PW_DEFER_MAX];
  uint32_t n = pw_defer_count;
  for (uint32_t i = 0; i < n; ++i) run[i] = pw_defer_list[i];
  pw_defer_count = 0;
  for (uint32_t i = 0; i < n; ++i) run[i].fn(run[i].ctx);
}
