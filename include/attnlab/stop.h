/* stop.h -- Ctrl-C and SIGTERM for long work in the CLI (train, patch,
 * paths): the signal sets a flag instead of ending the process, and the
 * work polls it and stops cleanly (a checkpoint saved, or a run marked
 * failed "interrupted"), after which the command exits 130.
 *
 * One catch at a time (the CLI runs one command); not reentrant. */
#ifndef ATTNLAB_STOP_H
#define ATTNLAB_STOP_H

#include <signal.h>

/* 0, or the number of the signal caught since al_stop_catch. */
extern volatile sig_atomic_t al_stop;

/* Clear al_stop, then install the handlers (in that order, so a signal
 * from now on is kept), remembering the previous ones. */
void al_stop_catch(void);
/* Restore the handlers al_stop_catch replaced (al_stop is kept). */
void al_stop_release(void);

#endif
