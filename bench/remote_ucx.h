/* `pw-bench remote`'s UCX peer: the plain-UCX transfer the data plane is
 * compared with, written as a UCX user would write it. Two processes
 * (this one sends; a child `pw-bench remote --ucx-peer R,W,BYTES`, exec'd from
 * this binary, receives), one ucp context and worker each, endpoints
 * with UCP_ERR_HANDLING_MODE_PEER as lib/ucx makes them, so UCX picks the
 * same transports under the same UCX_TLS (inherited; TCP on loopback in
 * UCX 1.13, docs/toolchain.md). Buffers are registered once
 * (ucp_mem_map) and passed with their memh. One transfer: an 8-byte
 * ping and pong first (the receiver then has its tagged receive,
 * ucp_tag_recv_nbx, of the registered buffer posted and busy-polls, so
 * its wakeup is not timed), then the sender busy-polls a tagged send
 * (ucp_tag_send_nbx) of the buffer and the receiver's 8-byte
 * acknowledgement (every busy-poll yields the vCPU once per 64 idle
 * progress calls, as pw-bench's own spin-waits do). Between transfers the receiver spins 1 ms after
 * its last completion, then sleeps in ucp_worker_wait (UCX's wakeup).
 * Time: send posted to ack received. */
#ifndef PW_BENCH_REMOTE_UCX_H_
#define PW_BENCH_REMOTE_UCX_H_

#include <stdbool.h>
#include <stddef.h>

typedef struct pw_rucx_s pw_rucx_t;

/* Starts the receiver process and connects, buffers of |max_bytes|.
 * NULL on failure (printed). */
pw_rucx_t* pw_rucx_start(size_t max_bytes);

/* One transfer of |bytes|: its time in ns, or -1 (printed). |fresh|: the
 * receiver receives into memory it mallocs for this transfer (new pages,
 * unregistered: what a receiver allocating its output pays, as the CPU
 * backend's device memory is), not into its registered buffer. */
double pw_rucx_transfer(pw_rucx_t* u, size_t bytes, bool fresh);

/* Tells the receiver to stop, reaps it, frees. NULL is a no-op. */
void pw_rucx_stop(pw_rucx_t* u);

/* The receiver's main (`--ucx-peer R,W,BYTES`: pipe fds to read the
 * sender's address from and to write its own to, the buffer's size). Exit status. */
int pw_rucx_peer_main(const char* fds);

#endif /* PW_BENCH_REMOTE_UCX_H_ */
