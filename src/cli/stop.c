/* stop.c -- SIGINT/SIGTERM as a stop flag (see stop.h). */
#define _POSIX_C_SOURCE 200809L /* sigaction */
#include "attnlab/stop.h"

#include <string.h>

volatile sig_atomic_t al_stop = 0;

static struct sigaction old_int, old_term;

static void on_signal(int sig) { al_stop = sig; }

void al_stop_catch(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    al_stop = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
}

void al_stop_release(void) {
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
}
