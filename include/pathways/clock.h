/* libpathways: monotonic time and deadlines.
 *
 * Every blocking call in the library takes an absolute deadline on the
 * monotonic clock, in nanoseconds. PW_INFINITE_FUTURE never expires;
 * PW_IMMEDIATE_PAST polls.
 */
#ifndef PATHWAYS_CLOCK_H_
#define PATHWAYS_CLOCK_H_

#include "pathways/api.h"

PW_EXTERN_C_BEGIN

typedef int64_t pw_time_t;      /* nanoseconds on the monotonic clock */
typedef int64_t pw_duration_t;  /* nanoseconds */

#define PW_INFINITE_FUTURE INT64_MAX
#define PW_IMMEDIATE_PAST INT64_MIN

/* Current monotonic time (CLOCK_MONOTONIC) in ns. Thread-safe. */
PW_API pw_time_t pw_clock_now(void);

/* now + |timeout|, saturating: a negative timeout is PW_IMMEDIATE_PAST, an
 * overflowing one PW_INFINITE_FUTURE. */
PW_API pw_time_t pw_deadline_from_timeout(pw_duration_t timeout);

/* Nanoseconds left until |deadline| (0 if passed, INT64_MAX if infinite). */
PW_API pw_duration_t pw_deadline_remaining(pw_time_t deadline);

PW_EXTERN_C_END

#endif /* PATHWAYS_CLOCK_H_ */
