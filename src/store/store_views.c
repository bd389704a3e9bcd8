/* store_views.c -- generic result shapes as rows, written and read back
 * (store_views.h). Per-head and per-model views go through store_rows.c's
 * row writers; the cells of the other shapes are inserted here with one
 * statement prepared per call (store_rows.c's statement table stays the
 * fixed tables'), which is why this file reaches the connection through
 * store_internal.h. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "attnlab/store_views.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"
#include "attnlab/stats.h"

static const char *const shape_names[] = {[AL_VIEW_HEAD] = "head",
                                          [AL_VIEW_MODEL] = "model",
                                          [AL_VIEW_PAIR] = "pair",
                                          [AL_VIEW_EDGE] = "edge",
                                          [AL_VIEW_POS] = "pos"};
#define N_SHAPES ((int)(sizeof shape_names / sizeof shape_names[0]))

const char *al_view_shape_name(al_view_shape s) {
    return (int)s >= 0 && (int)s < N_SHAPES ? shape_names[s] : NULL;
}

int al_view_shape_of(const char *t) {
    for (int i = 0; t && i < N_SHAPES; i++)
        if (strcmp(t, shape_names[i]) == 0) return i;
    return -1;
}

/* ------------------------------------------------------------- write */

/* One view_cells row through q (prepared by put_cells). */
static int put_cell(al_store *s, sqlite3_stmt *q, int64_t run, int64_t mid, const char *metric,
                    int row, int col, const char *rl, const char *cl, double v, al_err *e) {
    sqlite3 *db = al_store_sqlite(s);
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    sqlite3_bind_int64(q, 1, run);
    sqlite3_bind_int64(q, 2, mid);
    sqlite3_bind_text(q, 3, metric, -1, SQLITE_STATIC);
    sqlite3_bind_int(q, 4, row);
    sqlite3_bind_int(q, 5, col);
    if (rl) sqlite3_bind_text(q, 6, rl, -1, SQLITE_STATIC); /* else NULL */
    if (cl) sqlite3_bind_text(q, 7, cl, -1, SQLITE_STATIC);
    if (isfinite(v)) sqlite3_bind_double(q, 8, v); /* NaN and inf as NULL, as store.c does */
    if (sqlite3_step(q) != SQLITE_DONE)
        return al_errf(e, "database %s: write failed: %s", al_store_path(s), sqlite3_errmsg(db));
    return 0;
}

/* The view_cells rows of a pair, edge or pos view. */
static int put_cells(al_store *s, sqlite3_stmt *q, int64_t run, int64_t mid, const al_view *w,
                     al_err *e) {
    if (w->shape == AL_VIEW_PAIR) {
        int LH = w->L * w->H;
        for (int i = 0; i < LH; i++)
            for (int j = 0; j < LH; j++) {
                double x = w->v[(size_t)i * LH + j];
                if (isnan(x)) continue; /* no value: no row */
                char a[24], b[24];
                snprintf(a, sizeof a, "%d.%d", i / w->H, i % w->H);
                snprintf(b, sizeof b, "%d.%d", j / w->H, j % w->H);
                if (put_cell(s, q, run, mid, w->metric, i, j, a, b, x, e)) return -1;
            }
        return 0;
    }
    for (int i = 0; i < w->n; i++)
        if (put_cell(s, q, run, mid, w->metric, i, 0, w->shape == AL_VIEW_EDGE ? w->from[i] : NULL,
                     w->shape == AL_VIEW_EDGE ? w->to[i] : NULL, w->v[i], e))
            return -1;
    return 0;
}

/* Why w cannot be stored, or NULL. */
static const char *bad_view(const al_view *w) {
    if (!w->metric || !w->metric[0] || !w->title) return "no metric or title";
    switch (w->shape) {
    case AL_VIEW_MODEL: return w->v ? NULL : "no value";
    case AL_VIEW_HEAD:
    case AL_VIEW_PAIR:
        return w->L < 1 || w->H < 1 ? "no layers or heads" : !w->v ? "no values" : NULL;
    case AL_VIEW_POS: return w->n < 0 ? "a negative size" : w->n && !w->v ? "no values" : NULL;
    case AL_VIEW_EDGE:
        if (w->n < 0) return "a negative size";
        if (w->n && (!w->v || !w->from || !w->to)) return "no values or labels";
        for (int i = 0; i < w->n; i++)
            if (!w->from[i] || !w->to[i]) return "an edge without a label";
        return NULL;
    }
    return "an unknown shape";
}

/* A view's intervals (view.h: ci), keyed by its shape. */
static int put_view_intervals(al_store *s, int64_t run, int64_t mid, const al_view *w, al_err *e) {
    int n = w->shape == AL_VIEW_MODEL  ? 1
            : w->shape == AL_VIEW_HEAD ? w->L * w->H
            : w->shape == AL_VIEW_PAIR ? w->L * w->H * w->L * w->H
                                       : w->n;
    int LH = w->L * w->H;
    for (int i = 0; w->ci && i < n; i++) {
        int l = -1, h = -1, pos = -1;
        if (w->shape == AL_VIEW_HEAD) l = i / w->H, h = i % w->H;
        if (w->shape == AL_VIEW_PAIR) {
            if (isnan(w->v[i])) continue;
            l = i % LH / w->H, h = i % LH % w->H, pos = i / LH;
        }
        if (w->shape == AL_VIEW_POS || w->shape == AL_VIEW_EDGE) pos = i;
        if (al_store_put_interval(s, run, mid, l, h, pos, w->metric, w->v[i], &w->ci[i],
                                  w->ci_level, w->ci_n, w->ci_boot, e))
            return -1;
    }
    return 0;
}

int al_store_put_views(al_store *s, int64_t run, int64_t mid, const al_view *v, int n, al_err *e) {
    sqlite3_stmt *q = NULL; /* the cells' insert, prepared at the first view that has cells */
    int rc = 0;
    for (int k = 0; k < n && !rc; k++) {
        const al_view *w = &v[k];
        const char *why = bad_view(w);
        if (why) {
            rc = al_errf(e, "view %s: %s", w->metric ? w->metric : "(no name)", why);
            break;
        }
        if (put_view_intervals(s, run, mid, w, e)) {
            rc = -1;
            break;
        }
        if (w->shape == AL_VIEW_MODEL) {
            rc = al_store_put_model_score(s, run, mid, w->metric, w->v[0], e) ||
                         al_store_put_view_row(s, run, mid, w->metric, "model", w->title, e)
                     ? -1
                     : 0;
            continue;
        }
        if (w->shape == AL_VIEW_HEAD) {
            if (al_store_put_view_row(s, run, mid, w->metric, "head", w->title, e)) rc = -1;
            for (int l = 0; !rc && l < w->L; l++)
                for (int h = 0; !rc && h < w->H; h++)
                    rc = al_store_put_head_score(s, run, mid, l, h, w->metric, w->v[l * w->H + h],
                                                 e);
            continue;
        }
        if (!q && sqlite3_prepare_v2(al_store_sqlite(s),
                                     "INSERT OR REPLACE INTO view_cells(run_id, model_id, metric, "
                                     "row, col, row_label, col_label, value) "
                                     "VALUES(?,?,?,?,?,?,?,?)",
                                     -1, &q, NULL) != SQLITE_OK) {
            rc = al_errf(e, "database %s: cannot prepare statement: %s", al_store_path(s),
                         sqlite3_errmsg(al_store_sqlite(s)));
            break;
        }
        rc = al_store_put_view_row(s, run, mid, w->metric, al_view_shape_name(w->shape), w->title,
                                   e) ||
                     put_cells(s, q, run, mid, w, e)
                 ? -1
                 : 0;
    }
    sqlite3_finalize(q);
    return rc;
}

/* -------------------------------------------------------------- read */

void al_view_read_free(al_view_read *r) {
    for (int i = 0; r->from && i < r->v.n; i++) free(r->from[i]);
    for (int i = 0; r->to && i < r->v.n; i++) free(r->to[i]);
    free(r->from);
    free(r->to);
    free(r->val);
    free(r->metric);
    free(r->title);
    memset(r, 0, sizeof *r);
}

/* shape and title of the views row */
typedef struct head_ctx {
    char shape[16];
    char *title;
    int found;
} head_ctx;

static int head_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    head_ctx *c = ctx;
    (void)nc, (void)x;
    if (c->found) return 0;
    snprintf(c->shape, sizeof c->shape, "%s", t[0] ? t[0] : "");
    if (!(c->title = strdup(t[1] ? t[1] : ""))) return al_errf(e, "out of memory");
    c->found = 1;
    return 0;
}

/* Values read into r: the grid shapes into a fixed array (index from
 * two columns), the list shapes grown row by row. */
typedef struct cells_ctx {
    al_view_read *r;
    int L, H, cap;
} cells_ctx;

static int grid_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    cells_ctx *c = ctx;
    (void)nc, (void)t, (void)e;
    al_view_read *r = c->r;
    if (r->v.shape == AL_VIEW_MODEL) {
        r->val[0] = x[0];
        return 0;
    }
    /* head: (layer, head) of L x H; pair: (sender, receiver) of LH x LH */
    int pair = r->v.shape == AL_VIEW_PAIR;
    int rows = pair ? c->L * c->H : c->L, cols = pair ? rows : c->H;
    if (x[0] >= 0 && x[0] < rows && x[1] >= 0 && x[1] < cols)
        r->val[(size_t)x[0] * cols + (size_t)x[1]] = x[2];
    return 0;
}

/* Grow r's arrays to hold index i (new values NaN). */
static int list_grow(cells_ctx *c, int i, int edge, al_err *e) {
    al_view_read *r = c->r;
    if (i < c->cap) return 0;
    int cap = c->cap ? 2 * c->cap : 16;
    while (cap <= i) cap *= 2;
    double *v = realloc(r->val, sizeof *v * (size_t)cap);
    if (!v) return al_errf(e, "out of memory");
    r->val = v;
    for (int k = c->cap; k < cap; k++) v[k] = NAN;
    if (edge) {
        char **f = realloc(r->from, sizeof *f * (size_t)cap);
        if (!f) return al_errf(e, "out of memory");
        r->from = f;
        char **g = realloc(r->to, sizeof *g * (size_t)cap);
        if (!g) return al_errf(e, "out of memory");
        r->to = g;
    }
    c->cap = cap;
    return 0;
}

static int list_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    cells_ctx *c = ctx;
    (void)nc;
    al_view_read *r = c->r;
    int edge = r->v.shape == AL_VIEW_EDGE;
    if (!(x[0] >= 0 && x[0] < 1e8)) return 0; /* not a row this writer makes */
    int i = edge ? r->v.n : (int)x[0]; /* edges: in order; positions: where they are */
    if (list_grow(c, i, edge, e)) return -1;
    r->val[i] = x[4];
    if (edge) {
        r->from[i] = strdup(t[2] ? t[2] : "");
        r->to[i] = strdup(t[3] ? t[3] : "");
        r->v.n = i + 1; /* counted before the check, so that free sees both */
        if (!r->from[i] || !r->to[i]) return al_errf(e, "out of memory");
    } else if (i + 1 > r->v.n) {
        r->v.n = i + 1;
    }
    return 0;
}

int al_store_read_view(al_store *s, long run, const char *metric, int L, int H, al_view_read *out,
                       int *found, al_err *e) {
    memset(out, 0, sizeof *out);
    *found = 0;
    char rs[32];
    snprintf(rs, sizeof rs, "%ld", run);
    const char *params[2] = {rs, metric};
    head_ctx hc = {0};
    if (al_store_query(s, "SELECT shape, title FROM views WHERE run_id = ?1 AND metric = ?2",
                       params, 2, head_row, &hc, e)) {
        free(hc.title);
        return -1;
    }
    out->title = hc.title;
    if (!hc.found) return 0;
    int shape = al_view_shape_of(hc.shape);
    if (shape < 0) {
        al_view_read_free(out);
        return al_errf(e, "database %s: run %ld: view %s has an unknown shape '%s'",
                       al_store_path(s), run, metric, hc.shape);
    }
    if (!(out->metric = strdup(metric))) {
        al_view_read_free(out);
        return al_errf(e, "out of memory");
    }
    al_view *v = &out->v;
    v->metric = out->metric, v->title = out->title, v->shape = (al_view_shape)shape;
    cells_ctx c = {out, L, H, 0};
    int rc;
    if (shape == AL_VIEW_EDGE || shape == AL_VIEW_POS) {
        rc = al_store_query(s,
                            "SELECT row, col, row_label, col_label, value FROM view_cells "
                            "WHERE run_id = ?1 AND metric = ?2 ORDER BY row, col",
                            params, 2, list_row, &c, e);
    } else {
        size_t cnt = shape == AL_VIEW_MODEL  ? 1
                     : shape == AL_VIEW_HEAD ? (size_t)L * H
                                             : (size_t)L * H * L * H;
        if (shape != AL_VIEW_MODEL && (L < 1 || H < 1)) {
            al_view_read_free(out);
            return al_errf(e, "view %s: no layers or heads given to read it", metric);
        }
        if (!(out->val = malloc(sizeof *out->val * cnt))) {
            al_view_read_free(out);
            return al_errf(e, "out of memory");
        }
        for (size_t i = 0; i < cnt; i++) out->val[i] = NAN;
        v->L = shape == AL_VIEW_MODEL ? 0 : L, v->H = shape == AL_VIEW_MODEL ? 0 : H;
        rc = al_store_query(s,
                            shape == AL_VIEW_MODEL
                                ? "SELECT value FROM model_scores WHERE run_id = ?1 AND metric = ?2"
                            : shape == AL_VIEW_HEAD ? "SELECT layer, head, value FROM head_scores "
                                                      "WHERE run_id = ?1 AND metric = ?2"
                                                    : "SELECT row, col, value FROM view_cells "
                                                      "WHERE run_id = ?1 AND metric = ?2",
                            params, 2, grid_row, &c, e);
    }
    if (rc) {
        al_view_read_free(out);
        return -1;
    }
    v->v = out->val;
    v->from = (const char *const *)out->from, v->to = (const char *const *)out->to;
    *found = 1;
    return 0;
}
