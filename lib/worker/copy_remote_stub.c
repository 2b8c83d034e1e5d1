#define _POSIX_C_SOURCE 200809L
/* The data plane's seam when lib/ucx is not built into the library: the
 * worker registers without a UCX address, PEER and CANCEL are ignored, and
 * COPY SEND/RECV answer DONE with UNIMPLEMENTED ("data plane not built").
 * copy_remote.c is the real one (lib/worker/CMakeLists.txt picks). */
#include "worker/worker_internal.h"

pw_status_t pw__worker_dp_open(pw_worker_t* w) {
  (void)w;
  return NULL;
}

void pw__worker_dp_address(pw_worker_t* w, const void** out_bytes, size_t* out_size) {
  (void)w;
  *out_bytes = NULL;
  *out_size = 0;
}

void pw__worker_dp_close(pw_worker_t* w) { (void)w; }

void pw__worker_on_peer(pw_worker_t* w, const pw_wire_msg_t* msg) {
  pw_log(&w->logger, PW_LOG_DEBUG, "worker", "worker %s: PEER %llu ignored: data plane not built",
         w->name, (unsigned long long)msg->u[PW_WIRE_PEER_INDEX]);
}

void pw__worker_copy_remote(pw_worker_t* w, const pw_wire_msg_t* msg,
                            const pw_worker_rows_t* rows) {
  (void)rows;
  pw_atomic_fetch_add_u64(&w->n_copies, 1);
  pw__worker_done(w, msg->u[PW_WIRE_COPY_ID],
                  pw_status_make(PW_STATUS_UNIMPLEMENTED,
                                 "worker %s: COPY %llu: data plane not built", w->name,
                                 (unsigned long long)msg->u[PW_WIRE_COPY_ID]));
}

void pw__worker_on_cancel(pw_worker_t* w, const pw_wire_msg_t* msg) { (void)w; (void)msg; }
