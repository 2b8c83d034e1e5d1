/* Shared by the examples: CHECK(expr) runs a call returning pw_status_t
 * and, if it failed, prints the status and the call (prefixed with
 * PW_EXAMPLE_NAME, which the example defines first) and exits. Examples
 * stop at the first error; a library would return the status. */
#ifndef PW_EXAMPLES_EXAMPLE_CHECK_H_
#define PW_EXAMPLES_EXAMPLE_CHECK_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pathways/pathways.h"

#ifndef PW_EXAMPLE_NAME
#error "define PW_EXAMPLE_NAME before including example_check.h"
#endif

#define CHECK(expr)                                                         \
  do {                                                                      \
    pw_status_t status_ = (expr);                                           \
    if (status_ != NULL) {                                                  \
      char text_[512];                                                      \
      pw_status_format(status_, text_, sizeof(text_));                      \
      fprintf(stderr, "%s: %s\n  at %s\n", PW_EXAMPLE_NAME, text_, #expr);  \
      pw_status_free(status_);                                              \
      exit(1);                                                              \
    }                                                                       \
  } while (0)

/* Compiles program |text| (the backend's text format) on |vs|, or exits. */
static inline pw_executable_t pw_example_compile_text(pw_client_t* client, pw_vslice_t vs,
                                                      const char* text) {
  pw_executable_t exe;
  CHECK(pw_executable_compile(client, vs, text, strlen(text), NULL, &exe));
  return exe;
}

#endif /* PW_EXAMPLES_EXAMPLE_CHECK_H_ */
