/* store_runs_read.h -- typed reads of the runs table, for callers that
 * decide from the database whether work is done (the experiment runner's
 * stamps): no SQL outside src/store/. */
#ifndef ATTNLAB_STORE_RUNS_READ_H
#define ATTNLAB_STORE_RUNS_READ_H

#include "attnlab/store.h"
#include "attnlab/util.h"

/* *n = the finished ('done') runs of kind of the model whose weights have
 * sha256 sha. 0, or −1 with e. */
int al_store_count_done(al_store *s, const char *sha, const char *kind, long *n, al_err *e);
/* *done = 1 if run (a decimal run id, as a stamp holds it) is 'done' and
 * belongs to the model of sha256 sha, else 0 (no such run included).
 * 0, or −1 with e. */
int al_store_run_done(al_store *s, const char *run, const char *sha, int *done, al_err *e);

#endif
