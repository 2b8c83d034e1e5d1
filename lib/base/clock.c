#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "pathways/clock.h"

pw_time_t pw_clock_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (pw_time_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

pw_time_t pw_deadline_from_timeout(pw_duration_t timeout) {
  if (timeout < 0) return PW_IMMEDIATE_PAST;
  pw_time_t now = pw_clock_now();
  if (timeout > PW_INFINITE_FUTURE - now) return PW_INFINITE_FUTURE;
  return now + timeout;
}

pw_duration_t pw_deadline_remaining(pw_time_t deadline) {
  if (deadline == PW_INFINITE_FUTURE) return INT64_MAX;
  pw_time_t now = pw_clock_now();
  if (deadline <= now) return 0;
  return deadline - now;
}
