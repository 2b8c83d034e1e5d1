/* pw_sim_test_fail for the Criterion suites. */
#include <criterion/criterion.h>

#include "sim_test_support.h"

void pw_sim_test_fail(const char* what, const char* detail) {
  cr_assert_fail("%s failed: %s", what, detail);
}
