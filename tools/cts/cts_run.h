/* pathways-cts: running the cases, each in a forked child with a
 * deadline, and reporting them as TAP or JUnit XML. */
#ifndef PW_TOOLS_CTS_CTS_RUN_H_
#define PW_TOOLS_CTS_CTS_RUN_H_

#include <stdio.h>

#include "cts_check.h"

typedef enum pw_cts_format_t { PW_CTS_FORMAT_TAP = 0, PW_CTS_FORMAT_JUNIT = 1 } pw_cts_format_t;

typedef struct pw_cts_run_options_t {
  const char* kind;              /* "backend": the prefix of the full case names */
  const pw_cts_case_t* cases;
  size_t case_count;
  const char* filter;            /* fnmatch glob on the full name; NULL: all */
  const char* const* unsupported; /* NULL-terminated names (full or bare); may be NULL */
  const char* args;              /* the plugin's options string; "{tmp}" is replaced */
  pw_cts_format_t format;
  FILE* out;
  unsigned timeout_s;            /* per case */
  bool no_fork;                  /* run in this process (debugging): a failure ends the run */
  const char* suite_name;        /* "pathways-cts backend cpu (path)" for reports */
} pw_cts_run_options_t;

/* Runs the selected cases with |ctx| (its args and tmp_dir are set per
 * case) and writes the report. Returns the number of failed cases, or -1
 * when the report could not be written. */
int pw_cts_run(const pw_cts_run_options_t* options, pw_cts_context_t* ctx);

/* True when |name| is the bare or full ("kind.name") name of a case. */
bool pw_cts_case_matches(const char* kind, const char* bare, const char* name);

#endif /* PW_TOOLS_CTS_CTS_RUN_H_ */
