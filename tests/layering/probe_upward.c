/* Compiled as if part of lib/graph, which does not use lib/sched: this
 * include must not compile (tests/layering, layering_include). */
#include "sched/dispatch_internal.h"

int pw_layering_probe_upward(void);
int pw_layering_probe_upward(void) { return 0; }
