/* libpathways: the one include a user needs.
 *
 * A single-controller runtime for fleets of accelerators. See
 * docs/architecture.md for the concepts and each header for its contracts. */
#ifndef PATHWAYS_PATHWAYS_H_
#define PATHWAYS_PATHWAYS_H_

#include "pathways/api.h"
#include "pathways/struct_size.h"
#include "pathways/version.h"
#include "pathways/status.h"
#include "pathways/allocator.h"
#include "pathways/log.h"
#include "pathways/clock.h"
#include "pathways/event.h"
#include "pathways/types.h"
#include "pathways/backend.h"
#include "pathways/scheduler.h"
#include "pathways/runtime.h"
#include "pathways/buffer.h"
#include "pathways/executable.h"
#include "pathways/graph.h"
#include "pathways/graph_format.h"
#include "pathways/store.h"
#include "pathways/cache.h"
#include "pathways/snapshot.h"
#include "pathways/elastic.h"
#include "pathways/metrics.h"
#include "pathways/trace.h"
#include "pathways/transport.h"
#include "pathways/backends/cpu.h"
#include "pathways/backends/sim.h"
#include "pathways/transports/inproc.h"
#include "pathways/stores/dir.h"
#include "pathways/plugin.h"
#include "pathways/cts.h"
#include "pathways/remote.h"
#include "pathways/worker.h"
#include "pathways/plugin.h"

#endif /* PATHWAYS_PATHWAYS_H_ */
