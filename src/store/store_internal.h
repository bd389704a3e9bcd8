/* store_internal.h -- for the store layer's own files only (merge.c,
 * store_views.c, the readers):
 * the connection behind an al_store, the run kinds the readers need. Not installed, not for other
 * layers: they go through store.h so that sqlite3.h stays here. */
#ifndef ATTNLAB_STORE_INTERNAL_H
#define ATTNLAB_STORE_INTERNAL_H

#include <signal.h>
#include <sqlite3.h>
#include "attnlab/store.h"

/* The open connection (owned by s; never NULL for an open store). */
sqlite3 *al_store_sqlite(al_store *s);

/* Open the SQLite file at path to read only, so that reading writes
 * nothing beside it (no -wal, no -shm; see store.c for how a WAL-mode
 * file is read). 0 with *db open (busy timeout set), or -1 with e and
 * *db NULL. */
int store_sqlite_open_ro(const char *path, sqlite3 **db, al_err *e);

/* Call before running sql on the connection directly: if sql writes and
 * is the connection's first write, the file goes to WAL mode (store.c
 * says why; store_exec and store_prepare do this themselves). 0, or -1
 * with e. */
int store_before_write(al_store *s, const char *sql, al_err *e);

/* While *stop is 0 the switch to WAL waits for other connections (as
 * long as the busy timeout); once it is set, the wait ends with
 * "interrupted". stop NULL: no such flag. */
void store_set_stop(al_store *s, volatile sig_atomic_t *stop);

/* An al_store_query row callback that appends the row to the al_rows at
 * ctx (store_report.h), every cell copied: 0, or -1 with e when out of
 * memory (the rows so far stay in ctx for al_rows_free). */
int al_store_rows_collect(void *ctx, int nc, const char *const *t, const double *x, al_err *e);

/* The kind of family r (al_store_set_kind) for a reader that needs it;
 * NULL with e when none was set (a program that reads before the CLI's
 * al_registry_setup: a bug, refused rather than read as no runs). */
const char *al_store_kind_needed(al_store_results r, al_err *e);

#endif
