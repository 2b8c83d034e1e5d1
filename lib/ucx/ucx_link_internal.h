/* Internal to lib/ucx: the link's state, shared by ucx_link.c (lifecycle,
 * peers, the progress thread) and ucx_ops.c (sends, receives, their
 * completion).
 *
 * Locking: |mu| guards every ucp call and every field below it. UCX runs
 * the request callbacks only inside ucp calls, so they always run with
 * |mu| held: they never call a user's done, they move the op to the
 * |finished| list; whoever drops |mu| next delivers those (pw__ucx_deliver),
 * so a done may post again without deadlock. */
#ifndef PW_UCX_UCX_LINK_INTERNAL_H_
#define PW_UCX_UCX_LINK_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <ucp/api/ucp.h>

#include "ucx/ucx_link.h"

#define PW_UCX_NAME_MAX 64

typedef enum pw_ucx_peer_state_e {
  PW_UCX_PEER_CONNECTED = 0,
  PW_UCX_PEER_FAILED = 1,  /* UCX reported the endpoint failed */
  PW_UCX_PEER_CLOSED = 2,  /* disconnected by the caller */
} pw_ucx_peer_state_t;

typedef struct pw_ucx_peer_s {
  struct pw_ucx_link_s* link;
  pw_ucx_peer_t index;
  pw_ucx_peer_state_t state;
  ucp_ep_h ep;           /* NULL once its close was issued */
  void* close_request;   /* an ep close UCX has not finished; NULL if none */
  bool needs_close;      /* failed: the progress thread closes it */
  char name[PW_UCX_NAME_MAX];
  char failure[160];     /* UCX's error, once failed */
} pw_ucx_peer_s;

typedef enum pw_ucx_op_kind_e { PW_UCX_OP_SEND = 0, PW_UCX_OP_RECV = 1 } pw_ucx_op_kind_t;

typedef struct pw_ucx_op_s {
  struct pw_ucx_op_s* prev;
  struct pw_ucx_op_s* next;
  struct pw_ucx_link_s* link;
  pw_ucx_op_kind_t kind;
  bool finished;          /* on the finished list (UCX gave it back) */
  bool cancelled;         /* cancel_tag or destroy asked: report CANCELLED */
  bool abandoned;         /* destroy gave up on it: callbacks ignore it */
  pw_ucx_peer_t peer;     /* sends only */
  uint64_t tag;
  size_t capacity;        /* receives: the buffer's size */
  size_t received;        /* receives: tag_info.length */
  size_t* out_size;
  ucs_status_t ucx_status;
  void* request;          /* UCX's request; freed at delivery */
  pw_status_t result;     /* computed at delivery, handed to done */
  pw_ucx_done_fn_t done;
  void* user;
} pw_ucx_op_t;

struct pw_ucx_link_s {
  pw_allocator_t allocator;
  pw_logger_t logger;
  char name[PW_UCX_NAME_MAX];
  ucp_context_h context;
  ucp_worker_h worker;
  uint8_t* address;       /* the header and UCX's worker address */
  size_t address_size;

  pthread_mutex_t mu;
  pthread_cond_t wake;    /* the progress thread's idle wait */
  pthread_t thread;
  bool thread_started;
  bool stopping;          /* destroy began: posts are refused */
  atomic_bool stop;       /* the progress thread exits */
  pw_ucx_peer_s** peers;  /* by index; indices are never reused */
  uint32_t peer_count;
  uint32_t peer_capacity;
  pw_ucx_op_t outstanding; /* sentinel of the list of ops UCX holds */
  pw_ucx_op_t finished;    /* sentinel of the list of ops to deliver */
  uint64_t outstanding_count;
};

/* Op lists (|mu| held). */
void pw__ucx_list_init(pw_ucx_op_t* sentinel);
void pw__ucx_list_push(pw_ucx_op_t* sentinel, pw_ucx_op_t* op);
void pw__ucx_list_remove(pw_ucx_op_t* op);

/* Delivers every finished op: takes the list under |mu|, then calls the
 * dones without it. Call without |mu| held. */
void pw__ucx_deliver(struct pw_ucx_link_s* link);

/* The status an op finished with, as its done receives it (|mu| held). */
pw_status_t pw__ucx_op_status(const struct pw_ucx_link_s* link, const pw_ucx_op_t* op);

/* Marks every outstanding op CANCELLED; cancels receives in UCX (|mu|
 * held). Ops UCX still holds stay on the outstanding list. */
void pw__ucx_cancel_all(struct pw_ucx_link_s* link);

/* Destroy, past its deadline, with the progress thread stopped: calls the
 * done of every op UCX still holds with CANCELLED and marks it abandoned
 * (its memory stays until pw__ucx_free_abandoned, after the worker is
 * destroyed, in case UCX calls back while destroying). */
void pw__ucx_abandon_all(struct pw_ucx_link_s* link);
void pw__ucx_free_abandoned(struct pw_ucx_link_s* link);

#endif /* PW_UCX_UCX_LINK_INTERNAL_H_ */
