/* store_internal.h -- for the store layer's own files only (merge.c,
 * store_views.c, the readers):
 * the connection behind an al_store, the run kinds the readers need. Not installed, not for other
 * layers: they go through store.h so that sqlite3.h stays here. */
#ifndef ATTNLAB_STORE_INTERNAL_H
#define ATTNLAB_STORE_INTERNAL_H

#include <sqlite3.h>
#include "attnlab/store.h"

/* The open connection (owned by s; never NULL for an open store). */
sqlite3 *al_store_sqlite(al_store *s);

/* An al_store_query row callback that appends the row to the al_rows at
 * ctx (store_report.h), every cell copied: 0, or -1 with e when out of
 * memory (the rows so far stay in ctx for al_rows_free). */
int al_store_rows_collect(void *ctx, int nc, const char *const *t, const double *x, al_err *e);

/* The kind of family r (al_store_set_kind) for a reader that needs it;
 * NULL with e when none was set (a program that reads before the CLI's
 * al_registry_setup: a bug, refused rather than read as no runs). */
const char *al_store_kind_needed(al_store_results r, al_err *e);

#endif
