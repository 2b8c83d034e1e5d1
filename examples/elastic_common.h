/* Shared by the elastic examples: the event log line of each
 * pw_elastic_event_t. */
#ifndef PW_EXAMPLES_ELASTIC_COMMON_H_
#define PW_EXAMPLES_ELASTIC_COMMON_H_

#include <stdio.h>

#include "pathways/elastic.h"

/* The helper's options of both elastic examples: slices of |per| devices,
 * at least 2 of them, a snapshot every 5 steps, one state buffer (the
 * weights; |names| holds its name and must outlive the helper's create). */
static inline pw_elastic_options_t pw_example_elastic_options(uint32_t per, const char** names) {
  pw_elastic_options_t eo;
  pw_elastic_options_init(&eo);
  eo.slice_mesh = (pw_mesh_shape_t)PW_MESH_SHAPE_INIT(1, per);
  eo.min_slices = 2;
  eo.snapshot_every = 5;
  eo.state_count = 1;
  names[0] = "weights";
  eo.state_names = names;
  return eo;
}

static inline void pw_example_elastic_print_event(const pw_elastic_event_t* ev) {
  switch (ev->kind) {
    case PW_ELASTIC_SNAPSHOT:
      printf("event: snapshot of step %llu\n", (unsigned long long)ev->step);
      break;
    case PW_ELASTIC_SLICE_LOST:
      printf("event: slice %u lost at step %llu (%s)\n", ev->slice, (unsigned long long)ev->step,
             ev->cause != NULL ? pw_status_message(ev->cause) : "a step failed");
      break;
    case PW_ELASTIC_SLICE_BACK:
      printf("event: slice %u back\n", ev->slice);
      break;
    case PW_ELASTIC_RESTORED:
      printf("event: restored from snapshot of step %llu (%.1f ms)\n",
             (unsigned long long)ev->step, (double)ev->elapsed_ns / 1e6);
      break;
    case PW_ELASTIC_REMESHED:
      printf("event: re-meshed to %u slices\n", ev->slice_count);
      break;
    case PW_ELASTIC_GROWN:
      printf("event: grown back to %u slices at step %llu\n", ev->slice_count,
             (unsigned long long)ev->step);
      break;
  }
}

#endif /* PW_EXAMPLES_ELASTIC_COMMON_H_ */
