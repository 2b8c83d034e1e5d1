/* The controller's data plane when lib/ucx is not built: none, so every
 * host copy goes over the control plane (host_copy.c). */
#include "remote/remote_internal.h"

void pw__remote_dp_open(pw_remote_t* remote) { remote->dp = NULL; }
void pw__remote_dp_close(pw_remote_t* remote) { (void)remote; }
void pw__remote_dp_attach(pw_remote_worker_t* w) { (void)w; }
void pw__remote_dp_detach(pw_remote_worker_t* w) { (void)w; }
bool pw__remote_dp_usable(pw_remote_worker_t* w) {
  (void)w;
  return false;
}
void pw__remote_dp_cancel(pw_remote_t* remote, uint64_t tag) {
  (void)remote;
  (void)tag;
}
pw_status_t pw__remote_dp_host_copy(pw_remote_worker_t* w, const pw_remote_mem_t* mem,
                                    size_t offset, void* buf, size_t size, bool write) {
  (void)mem;
  (void)offset;
  (void)buf;
  (void)size;
  (void)write;
  return pw_status_make(PW_STATUS_UNIMPLEMENTED, "%s: no data plane in this build", w->label);
}
