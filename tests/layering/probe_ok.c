/* Compiled as if part of lib/graph: a header of a module graph uses. */
#include "graph/graph_internal.h"

int pw_layering_probe_ok(void);
int pw_layering_probe_ok(void) { return 0; }
