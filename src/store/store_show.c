/* store_show.c -- a results database's contents for `attnlab db show`
 * (store_show.h). Every query is read-only and names only the tables it
 * finds in sqlite_master, so a database of an older schema shows what it
 * has rather than failing on what it lacks. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "attnlab/store_show.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/buf.h"

/* room for one more of an array (al_grow), keeping *p on failure */
static int grow(void **p, int *cap, int n, size_t size, al_err *e) {
    void *q = al_grow(*p, cap, n, size, 8, e);
    if (!q) return -1;
    *p = q;
    return 0;
}

static void cpy(char *dst, size_t cap, const char *src) {
    snprintf(dst, cap, "%s", src ? src : "");
}

static int model_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    al_show *sh = ctx;
    (void)nc;
    if (grow((void **)&sh->models, &sh->cap_[0], sh->n_models, sizeof *sh->models, e)) return -1;
    al_show_model *m = &sh->models[sh->n_models++];
    m->id = (long)x[0];
    snprintf(m->sha, sizeof m->sha, "%.12s", t[1] ? t[1] : "");
    cpy(m->path, sizeof m->path, t[2]);
    m->n_layers = isnan(x[3]) ? 0 : (int)x[3];
    m->n_heads = isnan(x[4]) ? 0 : (int)x[4];
    m->trained_tokens = x[5], m->data_tokens = x[6];
    return 0;
}

static int run_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    al_show *sh = ctx;
    (void)nc;
    if (grow((void **)&sh->runs, &sh->cap_[1], sh->n_runs, sizeof *sh->runs, e)) return -1;
    al_show_run *r = &sh->runs[sh->n_runs++];
    r->id = (long)x[0];
    cpy(r->kind, sizeof r->kind, t[1]);
    cpy(r->status, sizeof r->status, t[2]);
    r->model = isnan(x[3]) ? 0 : (long)x[3];
    cpy(r->started, sizeof r->started, t[4]);
    r->seconds = x[5];
    r->n_warnings = isnan(x[6]) ? 0 : (long)x[6];
    return 0;
}

static int table_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    al_show *sh = ctx;
    (void)nc, (void)x;
    if (grow((void **)&sh->tables, &sh->cap_[2], sh->n_tables, sizeof *sh->tables, e)) return -1;
    al_show_table *tb = &sh->tables[sh->n_tables++];
    cpy(tb->name, sizeof tb->name, t[0]);
    tb->is_view = t[1] && !strcmp(t[1], "view");
    tb->rows = tb->run_rows = -1;
    return 0;
}

static int one_number(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    (void)nc, (void)t, (void)e;
    *(double *)ctx = x[0];
    return 0;
}

static int warning_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    al_show *sh = ctx;
    (void)nc, (void)x;
    if (grow((void **)&sh->warnings, &sh->cap_[3], sh->n_warnings, sizeof *sh->warnings, e))
        return -1;
    if (!(sh->warnings[sh->n_warnings] = strdup(t[0] ? t[0] : "")))
        return al_errf(e, "out of memory");
    sh->n_warnings++;
    return 0;
}

static int detail_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    al_show *sh = ctx;
    (void)nc, (void)x;
    sh->config_json = t[0] ? strdup(t[0]) : NULL;
    sh->error = t[1] ? strdup(t[1]) : NULL;
    if ((t[0] && !sh->config_json) || (t[1] && !sh->error)) return al_errf(e, "out of memory");
    return 0;
}

/* 1 if table (a name read from sqlite_master, so safe to quote) has a
 * column named col. */
static int has_column(al_store *s, const char *table, const char *col, al_err *e) {
    char q[256];
    double n = 0;
    snprintf(q, sizeof q, "SELECT count(*) FROM pragma_table_info('%s') WHERE name = ?", table);
    const char *p[1] = {col};
    if (al_store_query(s, q, p, 1, one_number, &n, e)) return -1;
    return n > 0;
}

int al_store_show(al_store *s, long run, al_show *out, al_err *e) {
    memset(out, 0, sizeof *out);
    double v = 0;
    if (al_store_query(s, "PRAGMA user_version", NULL, 0, one_number, &v, e)) goto fail;
    out->version = (int)v;
    if (al_store_query(s,
                       "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view') "
                       "AND name NOT LIKE 'sqlite_%' ORDER BY type, name",
                       NULL, 0, table_row, out, e))
        goto fail;
    int warn_table = 0, data_tokens = 0;
    for (int i = 0; i < out->n_tables; i++)
        warn_table |= !strcmp(out->tables[i].name, "run_warnings");
    if ((data_tokens = has_column(s, "models", "data_tokens", e)) < 0) goto fail;
    char q[1024];
    snprintf(q, sizeof q,
             "SELECT model_id, sha256, path, n_layers, n_heads, trained_tokens, %s "
             "FROM models ORDER BY model_id",
             data_tokens ? "data_tokens" : "NULL");
    if (al_store_query(s, q, NULL, 0, model_row, out, e)) goto fail;
    snprintf(q, sizeof q,
             "SELECT r.run_id, r.kind, r.status, r.model_id, r.started_at, "
             "(julianday(r.finished_at) - julianday(r.started_at)) * 86400, %s FROM runs r "
             "ORDER BY r.run_id",
             warn_table ? "(SELECT count(*) FROM run_warnings w WHERE w.run_id = r.run_id)" : "0");
    if (al_store_query(s, q, NULL, 0, run_row, out, e)) goto fail;
    char rs[32];
    snprintf(rs, sizeof rs, "%ld", run);
    const char *rp[1] = {rs};
    if (run > 0) {
        int found = 0;
        for (int i = 0; i < out->n_runs; i++) found |= out->runs[i].id == run;
        if (!found) {
            al_errf(e, "%s has no run %ld (runs 1..%ld)", al_store_path(s), run,
                    out->n_runs ? out->runs[out->n_runs - 1].id : 0L);
            goto fail;
        }
        out->run = run;
        if (al_store_query(s, "SELECT config_json, error FROM runs WHERE run_id = ?", rp, 1,
                           detail_row, out, e) ||
            (warn_table && al_store_query(s,
                                          "SELECT message FROM run_warnings WHERE run_id = ? "
                                          "ORDER BY seq",
                                          rp, 1, warning_row, out, e)))
            goto fail;
    }
    for (int i = 0; i < out->n_tables; i++) {
        al_show_table *tb = &out->tables[i];
        double n = -1;
        snprintf(q, sizeof q, "SELECT count(*) FROM \"%s\"", tb->name);
        if (al_store_query(s, q, NULL, 0, one_number, &n, e)) goto fail;
        tb->rows = (long)n;
        if (run <= 0) continue;
        int hc = has_column(s, tb->name, "run_id", e);
        if (hc < 0) goto fail;
        if (!hc) continue;
        snprintf(q, sizeof q, "SELECT count(*) FROM \"%s\" WHERE run_id = ?", tb->name);
        if (al_store_query(s, q, rp, 1, one_number, &n, e)) goto fail;
        tb->run_rows = (long)n;
    }
    return 0;
fail:
    al_show_free(out);
    return -1;
}

void al_show_free(al_show *sh) {
    free(sh->models);
    free(sh->runs);
    free(sh->tables);
    free(sh->config_json);
    free(sh->error);
    for (int i = 0; i < sh->n_warnings; i++) free(sh->warnings[i]);
    free(sh->warnings);
    memset(sh, 0, sizeof *sh);
}
