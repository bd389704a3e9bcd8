/* discover.c -- circuit discovery (discover.h). Being written. */
#include "attnlab/discover.h"
