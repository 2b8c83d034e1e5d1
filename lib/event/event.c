/* Implemented by the lock-free core work (issue 3). */
#include "pathways/event.h"
typedef int pw__event_placeholder_t;
