/* A test playing the controller with raw nng sockets and lib/wire: a rep0
 * registration listener and a pair0 session listener on loopback ports,
 * and a worker (pw_worker_run) on a thread of the test. Every wait is
 * bounded (FC_WAIT_MS) and fails the test when it runs out. */
#ifndef PW_TESTS_WORKER_FAKE_CONTROLLER_H_
#define PW_TESTS_WORKER_FAKE_CONTROLLER_H_

#include <nng/nng.h>
#include <pthread.h>
#include <stdbool.h>

#include "pathways/backends/cpu.h"
#include "pathways/worker.h"
#include "wire/wire_nng.h"

#define FC_WAIT_MS 20000

typedef struct fc_msg_t {
  nng_msg* raw;
  pw_wire_msg_t msg;
} fc_msg_t;

typedef struct fc_t {
  nng_socket rep;
  nng_socket pair;
  char reg_url[64];
  char session_url[64];
  uint8_t nonce[PW_WIRE_NONCE_SIZE];
  pw_worker_t* worker;
  pthread_t thread;
  bool running;
  pw_status_t run_status;
  uint64_t drain_ns;         /* set after fc_listen: the worker's drain_ns */
  /* The session's frames split into one nng message per wire message
   * (the worker batches DONEs), handed out in order by fc_recv. */
  nng_msg* queued[128];
  uint32_t queued_head, queued_count;
} fc_t;

/* Listens on both sockets. */
void fc_listen(fc_t* fc);
/* A CPU backend of |devices| devices in streams mode (depth 8). */
pw_backend_t fc_cpu_backend(uint32_t devices);
/* Creates a worker dialing |fc| with |token| (NULL: none) and runs it on
 * a thread. |no_data_plane| as the option. */
void fc_start_worker(fc_t* fc, const char* token, pw_backend_t backend, bool no_data_plane);
/* Receives the next registration message (a HELLO), asserting its type. */
void fc_recv_hello(fc_t* fc, fc_msg_t* out);
void fc_welcome(fc_t* fc, uint32_t index, uint64_t heartbeat_ns, uint32_t misses);
/* The worker's next HELLO, WELCOME as index 3 (200 ms x 50), its ATTACH. */
void fc_attach(fc_t* fc);
void fc_refuse(fc_t* fc, const char* reason);
/* Receives the next session message that is not a HEARTBEAT (or, with
 * |type| HEARTBEAT, the next heartbeat), asserting its type. */
void fc_recv(fc_t* fc, pw_wire_type_t type, fc_msg_t* out);
void fc_release(fc_msg_t* m);
void fc_send(fc_t* fc, const pw_wire_msg_t* msg);
/* Listen, start a worker with a CPU backend of |devices|, HELLO, WELCOME
 * (index 3; heartbeats every 200 ms, 50 misses), ATTACH checked. */
void fc_session(fc_t* fc, uint32_t devices);
/* The same with |backend| (owned by the worker). */
void fc_session_backend(fc_t* fc, pw_backend_t backend);
/* Stops the worker, joins it (asserting its run returned NULL), destroys
 * it, closes the sockets. */
void fc_stop(fc_t* fc);
/* The worker's stats. */
pw_worker_stats_t fc_stats(fc_t* fc);
/* Waits until |pred| on the stats holds (bounded). */
void fc_wait_stats(fc_t* fc, bool (*pred)(const pw_worker_stats_t*));

/* Requests in one line each; they assert the REPLY's code and return it. */
void fc_alloc(fc_t* fc, uint64_t mem, uint32_t device, uint64_t size);
void fc_write(fc_t* fc, uint64_t id, uint64_t mem, uint64_t offset, const void* bytes,
              size_t size, pw_status_code_t expect);
/* READ; the REPLY stays in |out| (payload = the bytes). */
void fc_read(fc_t* fc, uint64_t id, uint64_t mem, uint64_t offset, uint64_t size,
             pw_status_code_t expect, fc_msg_t* out);

#endif /* PW_TESTS_WORKER_FAKE_CONTROLLER_H_ */
