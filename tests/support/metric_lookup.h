/* Test support: one series of a runtime's metrics (pathways/metrics.h). */
#ifndef PW_TESTS_SUPPORT_METRIC_LOOKUP_H_
#define PW_TESTS_SUPPORT_METRIC_LOOKUP_H_

#include <stdint.h>

#include "pathways/pathways.h"

/* The value of the first series of |family| that has a label whose value
 * is |label_value| (NULL: the family's first series), and its
 * observation count in |*out_count| (histograms; may be NULL). -1 when
 * there is no such series or the read failed (metrics off). */
double pw_test_metric(pw_runtime_t* runtime, const char* family, const char* label_value,
                      uint64_t* out_count);

#endif /* PW_TESTS_SUPPORT_METRIC_LOOKUP_H_ */
