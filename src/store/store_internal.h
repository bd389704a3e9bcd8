/* store_internal.h -- for the store layer's own files only (merge.c,
 * store_views.c):
 * the connection behind an al_store. Not installed, not for other
 * layers: they go through store.h so that sqlite3.h stays here. */
#ifndef ATTNLAB_STORE_INTERNAL_H
#define ATTNLAB_STORE_INTERNAL_H

#include <sqlite3.h>
#include "attnlab/store.h"

/* The open connection (owned by s; never NULL for an open store). */
sqlite3 *al_store_sqlite(al_store *s);

#endif
