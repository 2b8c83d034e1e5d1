/* Hostile plugins for the runtime tests: a backend (over the test double)
 * and a transport (over inproc) that complete work twice, on purpose, a
 * set number of times. One of each per process (the state is global:
 * Criterion runs each test in its own process). */
#ifndef PW_TESTS_RUNTIME_HOSTILE_H_
#define PW_TESTS_RUNTIME_HOSTILE_H_

#include <stdint.h>

#include "pathways/pathways.h"

typedef enum pw_hostile_mode_e {
  PW_HOSTILE_OFF = 0,
  /* Calls done twice inside launch / copy (the copy is made once). */
  PW_HOSTILE_DONE_TWICE = 1,
  /* Calls done with an error, then returns another error. */
  PW_HOSTILE_DONE_THEN_ERROR = 2,
  /* Hands the completion to two threads that call done at once. */
  PW_HOSTILE_DONE_TWICE_RACING = 3,
} pw_hostile_mode_t;

/* Wraps |inner| (taken over): launches behave as |inner|'s, except the
 * next |count| launches, which complete as |mode| says without running
 * (their outputs are left as they are). Name "hostile". When |inner|
 * offers launch_host, host launches are wrapped the same way: one counts
 * as one launch and misbehaves with its one done. */
void pw_hostile_backend_wrap(pw_backend_t inner, pw_backend_t* out);
void pw_hostile_backend_arm(pw_hostile_mode_t mode, int64_t count);

/* An inproc transport whose next |count| copies misbehave as |mode| says.
 * Name "hostile-transport". */
pw_status_t pw_hostile_transport_create(pw_transport_t* out);
void pw_hostile_transport_arm(pw_hostile_mode_t mode, int64_t count);

/* Joins the threads of PW_HOSTILE_DONE_TWICE_RACING (both plugins) once
 * every completion they were handed has been delivered. */
void pw_hostile_quiesce(void);

#endif /* PW_TESTS_RUNTIME_HOSTILE_H_ */
