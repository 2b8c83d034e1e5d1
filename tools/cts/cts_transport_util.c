#include "cts_check.h"
