#include "pathways/version.h"

const char* pw_version_string(void) { return PW_VERSION_STRING; }

unsigned pw_version_number(void) { return PW_VERSION_NUMBER; }
