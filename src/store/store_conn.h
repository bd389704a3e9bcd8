/* store_conn.h -- the connection behind an al_store, shared by the files
 * that implement store.h itself (private to src/store/).
 * layer: store
 *
 * store.c opens, migrates and closes the connection; store_schema.c holds
 * the migrations it runs; store_runs.c writes models and runs;
 * store_rows.c the result rows, through statements cached in the
 * struct. The store's other files reach the connection only through
 * store_internal.h's al_store_sqlite. */
#ifndef ATTNLAB_STORE_CONN_H
#define ATTNLAB_STORE_CONN_H

#include <signal.h>
#include <sqlite3.h>
#include <stddef.h>
#include "attnlab/store.h"

/* The row writers' statements (store_rows.c), each prepared once per
 * connection on first use. */
enum {
    S_HEAD_SCORE,
    S_LAYER_SCORE,
    S_MODEL_SCORE,
    S_INTERVAL,
    S_SV,
    S_EIG,
    S_TRI,
    S_COMP,
    S_OVERLAP,
    S_ABL,
    S_PRUNE,
    S_TLOG,
    S_THS,
    S_PATCH,
    S_PATH,
    S_PATCH_RUN,
    S_ATTR_RUN,
    S_LOGIT_ATTR,
    S_PATH_TERM,
    S_LENS,
    S_AP,
    S_AP_AGREE,
    S_ATTR_TOK,
    S_CIRC_RUN,
    S_CIRC_EDGE,
    S_WARN,
    S_VIEW,
    S_SAE_RUN,
    S_SAE_FRUN,
    S_SAE_FEAT,
    S_SAE_CTX,
    S_SAE_LOGIT,
    S_SAE_HEAD,
    S_SAE_PHEAD,
    S_SAE_TRUN,
    S_SAE_TFEAT,
    S_N
};

struct al_store {
    sqlite3 *db;
    sqlite3_stmt *st[S_N]; /* NULL until first used */
    int in_tx; /* inside al_store_tx_begin's transaction */
    int readonly; /* opened by al_store_open_read(only) */
    int wal; /* 1: switched to WAL for a write (store_before_write) */
    volatile sig_atomic_t *stop; /* non-zero ends the wait for the WAL switch */
    char path[AL_PATH_MAX];
};

/* migrations[i] takes user_version i to i+1 (store_schema.c). */
extern const char *const al_store_migrations[AL_STORE_SCHEMA_VERSION];

/* "database P: what: SQLite's message" into e; returns -1. */
int store_db_err(al_store *s, al_err *e, const char *what);
/* Run sql (no rows); 0, or -1 with e. */
int store_exec(al_store *s, const char *sql, al_err *e);
/* Prepare sql into *st (finalized by the caller); 0, or -1 with e. */
int store_prepare(al_store *s, const char *sql, sqlite3_stmt **st, al_err *e);
/* Step a statement to completion (no rows expected); 0, or -1 with e. */
int store_step_done(al_store *s, sqlite3_stmt *st, al_err *e);
/* Non-finite numbers become NULL: SQLite has no NaN. */
void store_bind_real(sqlite3_stmt *st, int i, double v);
/* n bytes of t as text (they may hold NULs); NULL t (or n > INT_MAX): NULL. */
void store_bind_text(sqlite3_stmt *st, int i, const char *t, size_t n);
/* A C string as text; NULL binds NULL. */
void store_bind_str(sqlite3_stmt *st, int i, const char *t);

/* Start time of process pid (field 22 of /proc/pid/stat) as text, so a
 * recycled pid is not mistaken for the run's process. "" if unknown. */
void store_proc_start(long pid, char *buf, size_t cap);
/* This host's name ("unknown" if it has none). */
void store_host_name(char *buf, size_t cap);

#endif
