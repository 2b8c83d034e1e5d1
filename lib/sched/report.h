/* Internal to lib/sched: what the dispatcher reports to the runtime's
 * observers (lib/observe/observe.h: traces, metrics). Each pw_report_*
 * is inline and costs one load and a branch while nothing observes the
 * runtime; the event is built out of line (report.c). Reports are made
 * where the dispatcher already holds what they name: a launch's before
 * the backend can complete it, a completion's after its token's claim. */
#ifndef PW_SCHED_REPORT_H_
#define PW_SCHED_REPORT_H_

#include "observe/observe.h"
#include "sched/device.h"

struct pw_op_s;
struct pw_execution_s;

void pw__report_submit(pw_observe_t* o, struct pw_execution_s* exec);
void pw__report_admit(pw_observe_t* o, struct pw_slice_s* slice, struct pw_op_s* op);
void pw__report_launch(pw_observe_t* o, pw_device_t* d, struct pw_op_s* op, void* user,
                       uint64_t queue_seq);
/* When the launch |user| names was reported launched (0: not while
 * observed, or an earlier use's); read before its token's claim. */
uint64_t pw__report_launched_at(void* user);
void pw__report_launch_done(pw_observe_t* o, pw_device_t* d, struct pw_op_s* op, uint64_t launched_at,
                            bool queued, pw_status_t status, const pw_backend_timing_t* timing,
                            bool expired);
void pw__report_copy(pw_observe_t* o, pw_device_t* d, struct pw_op_s* op);
void pw__report_copy_done(pw_observe_t* o, pw_device_t* d, struct pw_op_s* op, pw_status_t status);
/* Host op |op|'s call starts (returns the start's ts_ns, with its graph
 * edges), or (|done|) returned with |status|, having started at
 * |since_ns| (0: not observed then). host_task.c. */
uint64_t pw__report_host(pw_observe_t* o, struct pw_op_s* op, bool done, uint64_t since_ns,
                         pw_status_t status);
void pw__report_op_done(pw_observe_t* o, struct pw_op_s* op, pw_status_t failure);
void pw__report_exec_done(pw_observe_t* o, struct pw_execution_s* exec, pw_status_t status);

#define PW_REPORT(rt, call, ...)                                   \
  do {                                                             \
    pw_observe_t* pw__o = pw_observing(rt);                        \
    if (__builtin_expect(pw__o != NULL, 0)) call(pw__o, __VA_ARGS__); \
  } while (0)

#endif /* PW_SCHED_REPORT_H_ */
