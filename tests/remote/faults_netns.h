/* A network namespace and a veth pair for partition tests, made with
 * iproute2's `ip` and deleted in every exit path (tests/remote/
 * remote_faults.c).
 *
 * Names carry the test's pid: namespace "pwf<pid>", host side
 * "pwf<pid>a", namespace side "pwf<pid>b"; addresses 10.A.B.C/30 from the
 * pid (host side .1 of the /30, namespace side .2), traffic only to
 * addresses the test made. The test process first moves itself into a
 * private network namespace (unshare), where the host side lives: the
 * rest of the machine never sees the veth come and go (UCX in other
 * processes lists network devices, and one vanishing under it fails
 * ucp_worker_create), and that private namespace dies with the test's
 * processes even on SIGKILL. A named namespace of an earlier run whose
 * pid is gone (a crashed or SIGKILLed test) is swept at create. */
#ifndef PATHWAYS_TESTS_REMOTE_FAULTS_NETNS_H_
#define PATHWAYS_TESTS_REMOTE_FAULTS_NETNS_H_

#include <stdbool.h>
#include <stddef.h>

typedef struct pwf_netns_t {
  char name[16];      /* the namespace, and the veth prefix */
  char host_if[16];   /* host side of the veth */
  char peer_if[16];   /* namespace side */
  char host_ip[16];   /* e.g. "10.0.37.1" */
  char peer_ip[16];
  bool made;          /* something to delete */
} pwf_netns_t;

/* Moves the calling process into a private network namespace (call it
 * before any thread starts: children and later threads inherit it),
 * then creates the namespace and the addressed veth pair, both up.
 * False with |why| filled when this machine cannot (not root, no
 * CAP_NET_ADMIN, no `ip`, no network namespaces): the caller skips.
 * Whatever was made is deleted again on failure. */
bool pwf_netns_create(pwf_netns_t* ns, char* why, size_t why_size);

/* `ip link set <host side> up|down`; false if ip failed. */
bool pwf_netns_link(const pwf_netns_t* ns, bool up);

/* In a forked child before exec: moves it into the namespace. 0 or -1
 * (errno set). Async-signal-safe. */
int pwf_netns_enter(const pwf_netns_t* ns);

/* Deletes the veth and the namespace (idempotent). Only fork, execv,
 * waitpid: callable from a signal handler. */
void pwf_netns_destroy(pwf_netns_t* ns);

/* True if the namespace, or the host side of the veth (in this process's
 * namespace), still exists. */
bool pwf_netns_exists(const pwf_netns_t* ns);

#endif /* PATHWAYS_TESTS_REMOTE_FAULTS_NETNS_H_ */
