/* store_show.h -- what a results database holds, for `attnlab db show`:
 * its models, its runs (kind, status, model, when, how many warnings),
 * every table and view with its row count, and one run in detail (its
 * options, error, warnings and the rows it wrote per table). Read only:
 * works on a database opened with al_store_open_readonly, of any schema
 * version this attnlab knows (a table an older one lacks is just absent). */
#ifndef ATTNLAB_STORE_SHOW_H
#define ATTNLAB_STORE_SHOW_H

#include "attnlab/store.h"
#include "attnlab/util.h"

typedef struct al_show_model {
    long id;
    char sha[13]; /* the first 12 hex digits */
    char path[AL_PATH_MAX];
    int n_layers, n_heads;
    double trained_tokens, data_tokens; /* NaN when unknown */
} al_show_model;

typedef struct al_show_run {
    long id, model; /* model 0: none */
    char kind[32], status[12], started[32];
    double seconds; /* NaN while running */
    long n_warnings;
} al_show_run;

typedef struct al_show_table {
    char name[64];
    int is_view;
    long rows; /* -1: could not be counted */
    long run_rows; /* with a run: its rows here (-1: the table has no run_id) */
} al_show_table;

typedef struct al_show {
    int version; /* the schema's user_version */
    al_show_model *models;
    int n_models;
    al_show_run *runs;
    int n_runs;
    al_show_table *tables;
    int n_tables;
    /* with a run (al_store_show's run > 0) */
    long run;
    char *config_json, *error; /* NULL when none */
    char **warnings;
    int n_warnings;
    int cap_[4]; /* the arrays' capacities (store_show.c) */
} al_show;

/* Fill *out from s; with run > 0 also that run's detail (its row in
 * out->runs, options, error, warnings, rows per table). 0, or -1 with e
 * (a run the database does not have, a failed query, out of memory;
 * *out is then empty). Free with al_show_free. */
int al_store_show(al_store *s, long run, al_show *out, al_err *e);
void al_show_free(al_show *sh);

#endif
