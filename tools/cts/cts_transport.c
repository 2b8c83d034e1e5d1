#include "cts_check.h"
const pw_cts_case_t* pw_cts_transport_cases(size_t* n) { *n = 0; return NULL; }
