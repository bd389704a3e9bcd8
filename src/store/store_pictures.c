/* store_pictures.c -- the reads of the pictures (see store_pictures.h).
 *
 * Each reader is one query through al_store_query and a row function
 * that copies the row into a typed struct, so the numbers and NULLs a
 * picture sees are exactly those al_store_query hands out. List readers
 * collect rows in a builder and return them as one block with their
 * strings behind them, so a caller frees one pointer. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/store_pictures.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

void al_store_rows_free(void *rows) { free(rows); }

/* A finished run: written once here, for every "latest finished" pick. */
#define RUN_DONE "r.status = 'done'"

/* ------------------------------------------------------- row builder */

/* Rows of row_size bytes; the fields at str_off are const char * that
 * point into the row's sqlite text while building and are kept as
 * offset + 1 into str (0: NULL) until rows_finish makes them pointers. */
typedef struct rows {
    unsigned char *buf;
    size_t row_size;
    int n, cap;
    const size_t *str_off;
    int n_str;
    char *str;
    size_t str_n, str_cap;
} rows;

static int rows_push(rows *b, void *row, al_err *e) {
    unsigned char *q = al_grow(b->buf, &b->cap, b->n, b->row_size, 16, e);
    if (!q) return -1;
    b->buf = q;
    for (int k = 0; k < b->n_str; k++) {
        const char *s;
        memcpy(&s, (unsigned char *)row + b->str_off[k], sizeof s);
        uintptr_t off = 0;
        if (s) {
            size_t len = strlen(s) + 1;
            if (b->str_n + len > b->str_cap) {
                size_t cap = b->str_cap ? 2 * b->str_cap : 256;
                while (cap < b->str_n + len) cap *= 2;
                char *t = realloc(b->str, cap);
                if (!t) return al_errf(e, "out of memory");
                b->str = t;
                b->str_cap = cap;
            }
            memcpy(b->str + b->str_n, s, len);
            off = (uintptr_t)b->str_n + 1;
            b->str_n += len;
        }
        const char *enc = (const char *)off; /* an offset, not a pointer, until rows_finish */
        memcpy((unsigned char *)row + b->str_off[k], &enc, sizeof enc);
    }
    memcpy(b->buf + (size_t)b->n * b->row_size, row, b->row_size);
    b->n++;
    return 0;
}

/* One block: rows, then strings; frees the builder. rc: the query's. */
static int rows_finish(rows *b, int rc, void **out, int *n, al_err *e) {
    *out = NULL;
    *n = 0;
    size_t rb = (size_t)b->n * b->row_size;
    unsigned char *blk = rc ? NULL : malloc(rb + b->str_n + 1);
    if (!rc && !blk) rc = al_errf(e, "out of memory");
    if (blk) {
        if (rb) memcpy(blk, b->buf, rb);
        if (b->str_n) memcpy(blk + rb, b->str, b->str_n);
        for (int i = 0; i < b->n; i++)
            for (int k = 0; k < b->n_str; k++) {
                unsigned char *f = blk + (size_t)i * b->row_size + b->str_off[k];
                const char *enc;
                memcpy(&enc, f, sizeof enc);
                uintptr_t off = (uintptr_t)enc;
                const char *s = off ? (const char *)blk + rb + (off - 1) : NULL;
                memcpy(f, &s, sizeof s);
            }
        *out = blk;
        *n = b->n;
    }
    free(b->buf);
    free(b->str);
    return rc ? -1 : 0;
}

/* Run sql with params, each row through fn into a builder of T rows. */
static int read_rows(al_store *s, const char *sql, const char *const *params, int np,
                     al_store_row_fn fn, size_t row_size, const size_t *str_off, int n_str,
                     void **out, int *n, al_err *e) {
    rows b = {.row_size = row_size, .str_off = str_off, .n_str = n_str};
    int rc = al_store_query(s, sql, params, np, fn, &b, e);
    return rows_finish(&b, rc, out, n, e);
}

/* The rows of run `run` from sql (its ?1 the run id). */
static int run_rows(al_store *s, long run, const char *sql, al_store_row_fn fn, size_t row_size,
                    const size_t *str_off, int n_str, void **out, int *n, al_err *e) {
    char rs[32];
    snprintf(rs, sizeof rs, "%ld", run);
    const char *params[1] = {rs};
    return read_rows(s, sql, params, 1, fn, row_size, str_off, n_str, out, n, e);
}

/* ------------------------------------------------------ one number */

typedef struct qval {
    double v;
    int found;
} qval;

static int row_first(void *ctx, int nc, const char *const *t, const double *num, al_err *e) {
    (void)t, (void)e;
    qval *q = ctx;
    if (nc > 0 && !q->found && !isnan(num[0])) q->v = num[0], q->found = 1;
    return 0;
}

/* The first non-NULL first column of sql over the text params a, b. */
static int query1(al_store *s, const char *sql, const char *a, const char *b, qval *out,
                  al_err *e) {
    const char *params[2] = {a, b};
    out->found = 0;
    out->v = NAN;
    return al_store_query(s, sql, params, 2, row_first, out, e);
}

int al_store_model_by_sha(al_store *s, const char *sha256, int64_t *model_id, al_err *e) {
    qval q;
    if (query1(s, "SELECT model_id FROM models WHERE sha256 = ?1", sha256, NULL, &q, e)) return -1;
    *model_id = q.found ? (int64_t)q.v : 0;
    return 0;
}

static int first_text(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    (void)nc, (void)x;
    char **out = ctx;
    if (t[0] && !*out && !(*out = strdup(t[0]))) return al_errf(e, "out of memory");
    return 0;
}

int al_store_run_model_path(al_store *s, long run, char **path, al_err *e) {
    char rs[32];
    snprintf(rs, sizeof rs, "%ld", run);
    const char *params[1] = {rs};
    *path = NULL;
    int rc = al_store_query(s,
                            "SELECT m.path FROM runs r JOIN models m ON m.model_id = "
                            "r.model_id WHERE r.run_id = ?1",
                            params, 1, first_text, path, e);
    if (rc) {
        free(*path);
        *path = NULL;
    }
    return rc;
}

/* ------------------------------------------------------- latest run */

/* MAX(x.run_id) over finished runs of the model with rows in `table` (a
 * FROM clause over alias x with x.run_id, x.model_id) meeting cond (SQL
 * over x and r, ?2 = extra; NULL: none); 0 if none. */
static int latest_done(al_store *s, const char *table, const char *cond, int64_t model_id,
                       const char *extra, long *run, al_err *e) {
    char sql[1024], mid[32];
    snprintf(sql, sizeof sql,
             "SELECT MAX(x.run_id) FROM %s JOIN runs r ON r.run_id = x.run_id "
             "WHERE x.model_id = ?1 AND " RUN_DONE "%s%s%s",
             table, cond ? " AND (" : "", cond ? cond : "", cond ? ")" : "");
    snprintf(mid, sizeof mid, "%lld", (long long)model_id);
    qval q;
    if (query1(s, sql, mid, extra, &q, e)) return -1;
    *run = q.found ? (long)q.v : 0;
    return 0;
}

int al_store_latest_composition_run(al_store *s, int64_t model_id, long *run, al_err *e) {
    return latest_done(s, "composition x", NULL, model_id, NULL, run, e);
}

int al_store_latest_svals_run(al_store *s, int64_t model_id, long *run, al_err *e) {
    return latest_done(s, "singular_values x", NULL, model_id, NULL, run, e);
}

int al_store_latest_ablation_run(al_store *s, int64_t model_id, const char *kind,
                                 const char *method, long *run, al_err *e) {
    if (strcmp(kind, "single") && strcmp(kind, "pair"))
        return al_errf(e, "ablation kind '%s': single or pair", kind);
    return latest_done(s, "ablations x",
                       strcmp(kind, "single") == 0
                           ? "x.kind = 'single' AND (?2 IS NULL OR x.method = ?2)"
                           : "x.kind = 'pair' AND (?2 IS NULL OR x.method = ?2)",
                       model_id, method, run, e);
}

int al_store_latest_pruning_run(al_store *s, int64_t model_id, const char *method, long *run,
                                al_err *e) {
    return latest_done(s, "pruning_steps x", "x.method = ?2", model_id, method, run, e);
}

int al_store_latest_train_run(al_store *s, int64_t model_id, long *run, al_err *e) {
    char mid[32];
    snprintf(mid, sizeof mid, "%lld", (long long)model_id);
    qval q;
    const char *kind = al_store_kind_needed(AL_RESULTS_TRAINING, e);
    if (!kind || query1(s, "SELECT MAX(run_id) FROM runs WHERE kind = ?2 AND model_id = ?1", mid,
                        kind, &q, e))
        return -1;
    *run = q.found ? (long)q.v : 0;
    return 0;
}

int al_store_train_text_probe(al_store *s, long run, int *text, al_err *e) {
    char rid[32];
    snprintf(rid, sizeof rid, "%ld", run);
    qval q;
    if (query1(s,
               "SELECT json_extract(config_json, '$.probe_tokens') LIKE 'text%' FROM runs "
               "WHERE run_id = ?1 AND json_valid(config_json)",
               rid, NULL, &q, e))
        return -1;
    *text = q.found && q.v == 1;
    return 0;
}

int al_store_latest_patch_run(al_store *s, int64_t model_id, const char *kind, long *run,
                              al_err *e) {
    return latest_done(s, "patching_runs x", "r.kind = ?2", model_id, kind, run, e);
}

int al_store_latest_attribute_run(al_store *s, int64_t model_id, al_attr_need need, long *run,
                                  al_err *e) {
    const char *cond = need == AL_ATTR_TERMS      ? "r.kind = ?2 AND (x.direct_dloss IS NOT NULL)"
                       : need == AL_ATTR_PATCHING ? "r.kind = ?2 AND (x.direction IS NOT NULL)"
                                                  : "r.kind = ?2";
    const char *kind = al_store_kind_needed(AL_RESULTS_ATTRIBUTION, e);
    return kind ? latest_done(s, "attribution_runs x", cond, model_id, kind, run, e) : -1;
}

int al_store_latest_discover_run(al_store *s, int64_t model_id, long *run, al_err *e) {
    const char *kind = al_store_kind_needed(AL_RESULTS_CIRCUIT, e);
    return kind ? latest_done(s, "circuit_runs x", "r.kind = ?2", model_id, kind, run, e) : -1;
}

int al_store_latest_interval_run(al_store *s, int64_t model_id, long *run, al_err *e) {
    const char *kind = al_store_kind_needed(AL_RESULTS_SCORES, e);
    return kind ? latest_done(s, "score_intervals x",
                              "r.kind = ?2 OR EXISTS (SELECT 1 FROM patching_runs p WHERE "
                              "p.run_id = x.run_id)",
                              model_id, kind, run, e)
                : -1;
}

/* -------------------------------------------------------- run heads */

static void run_head_read(al_store_run_head *h, const char *const *t, const double *x) {
    h->found = 1;
    snprintf(h->kind, sizeof h->kind, "%s", t[0] ? t[0] : "");
    snprintf(h->status, sizeof h->status, "%s", t[1] ? t[1] : "");
    h->model_id = isnan(x[2]) ? 0 : (int64_t)x[2];
    h->has_row = t[3] != NULL;
    snprintf(h->task, sizeof h->task, "%s", t[3] ? t[3] : "");
}

/* Run `run` from runs and `table`: the run head's four columns, then
 * cols (LEFT JOIN: a run without its row still comes back). */
static int run_read(al_store *s, long run, const char *table, const char *cols, al_store_row_fn fn,
                    void *ctx, al_err *e) {
    char rs[32], sql[1024];
    snprintf(rs, sizeof rs, "%ld", run);
    snprintf(sql, sizeof sql,
             "SELECT r.kind, r.status, r.model_id, x.task, %s FROM runs r LEFT "
             "JOIN %s x ON x.run_id = r.run_id WHERE r.run_id = ?1",
             cols, table);
    const char *params[1] = {rs};
    return al_store_query(s, sql, params, 1, fn, ctx, e);
}

static int prun_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    al_store_patch_run *r = ctx;
    (void)nc;
    run_head_read(&r->h, t, x);
    snprintf(r->direction, sizeof r->direction, "%s", t[4] ? t[4] : "");
    snprintf(r->component, sizeof r->component, "%s", t[5] ? t[5] : "");
    r->n_pairs = isnan(x[6]) ? 0 : (int)x[6];
    r->seq_len = isnan(x[7]) ? 0 : (int)x[7];
    r->m_clean = x[8], r->m_corr = x[9];
    snprintf(r->hash, sizeof r->hash, "%s", t[11] ? t[11] : "");
    free(r->config);
    r->config = t[10] ? strdup(t[10]) : NULL;
    return t[10] && !r->config ? al_errf(e, "out of memory") : 0;
}

int al_store_read_patch_run(al_store *s, long run, al_store_patch_run *out, al_err *e) {
    memset(out, 0, sizeof *out);
    out->h.run = run;
    if (run_read(s, run, "patching_runs",
                 "x.direction, x.component, x.n_pairs, x.seq_len, "
                 "x.m_clean, x.m_corr, r.config_json, x.task_hash",
                 prun_row, out, e)) {
        al_store_patch_run_free(out);
        return -1;
    }
    return 0;
}

void al_store_patch_run_free(al_store_patch_run *r) {
    free(r->config);
    r->config = NULL;
}

static int arun_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    al_store_attr_run *r = ctx;
    (void)nc, (void)e;
    run_head_read(&r->h, t, x);
    snprintf(r->metric_kind, sizeof r->metric_kind, "%s", t[4] ? t[4] : "");
    snprintf(r->direction, sizeof r->direction, "%s", t[5] ? t[5] : "");
    r->seq_len = isnan(x[6]) ? 0 : (int)x[6];
    r->n_items = isnan(x[7]) ? 0 : (int)x[7];
    for (int k = 0; k < 3; k++) r->kind_dloss[k] = x[8 + k];
    r->centred = x[11] == 1;
    return 0;
}

int al_store_read_attr_run(al_store *s, long run, al_store_attr_run *out, al_err *e) {
    memset(out, 0, sizeof *out);
    out->h.run = run;
    return run_read(s, run, "attribution_runs",
                    "x.metric_kind, x.direction, x.seq_len, "
                    "x.n_items, x.direct_dloss, x.head_dloss, x.virtual_dloss, x.centred",
                    arun_row, out, e);
}

static int crun_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    al_store_discover_run *r = ctx;
    (void)nc, (void)e;
    run_head_read(&r->h, t, x);
    r->cfg_tau = x[11];
    if (!t[4] || r->n >= AL_STORE_MAX_CIRCUITS) return 0;
    al_store_circuit *c = &r->c[r->n++];
    snprintf(c->method, sizeof c->method, "%s", t[4]);
    c->tau = x[5];
    c->n_edges = isnan(x[6]) ? 0 : (int)x[6];
    c->n_kept = isnan(x[7]) ? 0 : (int)x[7];
    c->faith = x[8], c->kl = x[9];
    snprintf(r->metric, sizeof r->metric, "%s", t[10] ? t[10] : "");
    return 0;
}

int al_store_read_discover_run(al_store *s, long run, al_store_discover_run *out, al_err *e) {
    memset(out, 0, sizeof *out);
    out->h.run = run;
    return run_read(s, run, "circuit_runs",
                    "x.method, x.tau, x.n_edges, x.n_kept, "
                    "x.faithfulness, x.kl, x.metric, CASE WHEN json_valid(r.config_json) THEN "
                    "json_extract(r.config_json, '$.tau') END",
                    crun_row, out, e);
}

typedef struct cpick {
    char method[8];
    double tau;
    int found;
} cpick;

static int cpick_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    cpick *c = ctx;
    (void)nc, (void)e;
    snprintf(c->method, sizeof c->method, "%s", t[0] ? t[0] : "");
    c->tau = x[1];
    c->found = 1;
    return 0;
}

/* One ORDER BY for the rule, so the picture and the report cannot differ. */
int al_store_default_circuit(al_store *s, long run, char *method, double *tau, al_err *e) {
    char rs[32];
    snprintf(rs, sizeof rs, "%ld", run);
    const char *params[1] = {rs};
    cpick c = {.found = 0};
    if (al_store_query(s,
                       "SELECT x.method, x.tau FROM circuit_runs x JOIN runs r ON r.run_id = "
                       "x.run_id WHERE x.run_id = ?1 ORDER BY coalesce(abs(x.tau - CASE WHEN "
                       "json_valid(r.config_json) THEN json_extract(r.config_json, '$.tau') END) "
                       "<= 1e-9 * max(1, abs(x.tau)), 0) DESC, x.tau IS NULL DESC, x.tau LIMIT 1",
                       params, 1, cpick_row, &c, e))
        return -1;
    if (!c.found) return 0;
    snprintf(method, 8, "%s", c.method);
    *tau = c.tau;
    return 1;
}

/* ------------------------------------------------------ row readers */

/* A row function filling struct T from columns, then pushing it. */
#define ROW_FN(name, T, ...)                                                                       \
    static int name(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {         \
        (void)nc, (void)t, (void)x;                                                                \
        T r = {__VA_ARGS__};                                                                       \
        return rows_push(ctx, &r, e);                                                              \
    }
/* The offsets of a row type's string fields, and how many there are. */
#define STRS(...)                                                                                  \
    (const size_t[]){__VA_ARGS__}, (int)(sizeof((const size_t[]){__VA_ARGS__}) / sizeof(size_t))
#define NO_STRS NULL, 0
/* The block of a list reader into *rows (typed), the reader's result returned. */
#define BLOCK(rows, ...)                                                                           \
    do {                                                                                           \
        void *blk_ = NULL;                                                                         \
        int rc_ = (__VA_ARGS__);                                                                   \
        *(rows) = blk_;                                                                            \
        return rc_;                                                                                \
    } while (0)

ROW_FN(comp_row, al_store_comp_row, t[0], x[1], x[2], x[3], x[4], x[5], x[6])
int al_store_read_composition(al_store *s, long run, al_store_comp_row **rows, int *n, al_err *e) {
    BLOCK(rows,
          run_rows(s, run,
                   "SELECT kind, layer1, head1, layer2, head2, score, baseline "
                   "FROM composition WHERE run_id = ?1",
                   comp_row, sizeof **rows, STRS(offsetof(al_store_comp_row, kind)), &blk_, n, e));
}

ROW_FN(sval_row, al_store_sval_row, x[0], x[1], t[2], x[3], x[4])
int al_store_read_svals(al_store *s, long run, al_store_sval_row **rows, int *n, al_err *e) {
    BLOCK(rows, run_rows(s, run,
                         "SELECT layer, head, circuit, idx, value FROM singular_values "
                         "WHERE run_id = ?1",
                         sval_row, sizeof **rows, STRS(offsetof(al_store_sval_row, circuit)), &blk_,
                         n, e));
}

ROW_FN(abl_row, al_store_ablation_row, t[0], t[1], x[2], x[3], t[4])
int al_store_read_ablations(al_store *s, long run, const char *metric, const char *method,
                            al_store_ablation_row **rows, int *n, al_err *e) {
    *rows = NULL;
    *n = 0;
    /* a column name cannot be a parameter: only these three go into the text */
    if (strcmp(metric, "delta_loss") && strcmp(metric, "delta_loss_copy") &&
        strcmp(metric, "delta_loss_probe"))
        return al_errf(e, "ablation metric '%s': delta_loss, delta_loss_copy or delta_loss_probe",
                       metric);
    char sql[512], rs[32];
    snprintf(sql, sizeof sql,
             "SELECT kind, heads, %s, interaction, method FROM ablations WHERE "
             "run_id = ?1 AND (?2 IS NULL OR method = ?2)",
             metric);
    snprintf(rs, sizeof rs, "%ld", run);
    const char *params[2] = {rs, method};
    BLOCK(rows, read_rows(s, sql, params, 2, abl_row, sizeof **rows,
                          STRS(offsetof(al_store_ablation_row, kind),
                               offsetof(al_store_ablation_row, heads),
                               offsetof(al_store_ablation_row, method)),
                          &blk_, n, e));
}

ROW_FN(prune_row, al_store_prune_row, x[0], x[1])
int al_store_read_pruning(al_store *s, long run, const char *method, al_store_prune_row **rows,
                          int *n, al_err *e) {
    char rs[32];
    snprintf(rs, sizeof rs, "%ld", run);
    const char *params[2] = {rs, method};
    BLOCK(rows, read_rows(s,
                          "SELECT heads_left, loss FROM pruning_steps WHERE run_id = ?1 AND "
                          "method = ?2 ORDER BY step",
                          params, 2, prune_row, sizeof **rows, NO_STRS, &blk_, n, e));
}

ROW_FN(train_row, al_store_train_row, x[0], x[1], x[2])
int al_store_read_train_log(al_store *s, long run, al_store_train_row **rows, int *n, al_err *e) {
    BLOCK(rows, run_rows(s, run,
                         "SELECT step, train_loss, val_loss FROM train_log WHERE run_id "
                         "= ?1 ORDER BY step",
                         train_row, sizeof **rows, NO_STRS, &blk_, n, e));
}

ROW_FN(head_step_row, al_store_head_step_row, x[0], x[1], x[2], x[3])
int al_store_read_train_head_scores(al_store *s, long run, const char *metric,
                                    al_store_head_step_row **rows, int *n, al_err *e) {
    char rs[32];
    snprintf(rs, sizeof rs, "%ld", run);
    const char *params[2] = {rs, metric};
    BLOCK(rows, read_rows(s,
                          "SELECT step, layer, head, value FROM train_head_scores WHERE run_id = "
                          "?1 AND metric = ?2",
                          params, 2, head_step_row, sizeof **rows, NO_STRS, &blk_, n, e));
}

ROW_FN(patching_row, al_store_patching_row, x[0], x[1], x[2], x[3])
int al_store_read_patching(al_store *s, long run, al_store_patching_row **rows, int *n, al_err *e) {
    BLOCK(rows, run_rows(s, run, "SELECT layer, head, pos, value FROM patching WHERE run_id = ?1",
                         patching_row, sizeof **rows, NO_STRS, &blk_, n, e));
}

ROW_FN(path_row, al_store_path_row, t[0], x[1], x[2], t[3], x[4])
int al_store_read_path_patching(al_store *s, long run, al_store_path_row **rows, int *n,
                                al_err *e) {
    BLOCK(rows,
          run_rows(s, run,
                   "SELECT sender, receiver_layer, receiver_head, channel, value FROM "
                   "path_patching WHERE run_id = ?1",
                   path_row, sizeof **rows,
                   STRS(offsetof(al_store_path_row, sender), offsetof(al_store_path_row, channel)),
                   &blk_, n, e));
}

static int irun_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    (void)nc, (void)e;
    run_head_read(ctx, t, x);
    return 0;
}

int al_store_read_interval_run(al_store *s, long run, al_store_run_head *out, al_err *e) {
    char rs[32];
    memset(out, 0, sizeof *out);
    out->run = run;
    snprintf(rs, sizeof rs, "%ld", run);
    const char *params[1] = {rs};
    /* the fourth column stands for run_read's task: NULL without intervals */
    return al_store_query(s,
                          "SELECT r.kind, r.status, r.model_id, CASE WHEN EXISTS (SELECT 1 FROM "
                          "score_intervals i WHERE i.run_id = r.run_id) THEN '' END FROM runs r "
                          "WHERE r.run_id = ?1",
                          params, 1, irun_row, out, e);
}

ROW_FN(interval_row, al_store_interval_row, x[0], x[1], x[2], t[3], x[4], x[5], x[6], x[7])
int al_store_read_intervals(al_store *s, long run, al_store_interval_row **rows, int *n,
                            al_err *e) {
    BLOCK(rows, run_rows(s, run,
                         "SELECT layer, head, pos, metric, value, se, ci_lo, ci_hi FROM "
                         "score_intervals WHERE run_id = ?1 ORDER BY metric, layer, head, pos",
                         interval_row, sizeof **rows, STRS(offsetof(al_store_interval_row, metric)),
                         &blk_, n, e));
}

ROW_FN(dla_row, al_store_dla_row, t[0], x[1], x[2])
int al_store_read_dla(al_store *s, long run, al_store_dla_row **rows, int *n, al_err *e) {
    BLOCK(rows, run_rows(s, run,
                         "SELECT component, pos, value FROM logit_attribution WHERE "
                         "run_id = ?1 AND pos IS NOT NULL",
                         dla_row, sizeof **rows, STRS(offsetof(al_store_dla_row, component)), &blk_,
                         n, e));
}

/* pos is NULL in these rows: value is column 1, pos stays NaN */
ROW_FN(dla_top_row, al_store_dla_row, t[0], NAN, x[1])
int al_store_read_dla_top(al_store *s, long run, al_store_dla_row **rows, int *n, al_err *e) {
    BLOCK(rows,
          run_rows(s, run,
                   "SELECT component, value FROM logit_attribution WHERE run_id = "
                   "?1 AND pos IS NULL AND value IS NOT NULL ORDER BY abs(value) DESC LIMIT 4",
                   dla_top_row, sizeof **rows, STRS(offsetof(al_store_dla_row, component)), &blk_,
                   n, e));
}

ROW_FN(token_row, al_store_token_row, x[0], t[1])
int al_store_read_attr_tokens(al_store *s, long run, al_store_token_row **rows, int *n, al_err *e) {
    BLOCK(rows,
          run_rows(s, run, "SELECT pos, text FROM attribution_tokens WHERE run_id = ?1", token_row,
                   sizeof **rows, STRS(offsetof(al_store_token_row, text)), &blk_, n, e));
}

ROW_FN(term_row, al_store_term_row, t[0], t[1], x[2], x[3])
int al_store_read_path_terms(al_store *s, long run, al_store_term_row **rows, int *n, al_err *e) {
    BLOCK(rows,
          run_rows(s, run,
                   "SELECT term, kind, layer, dloss FROM path_terms WHERE run_id = "
                   "?1 ORDER BY CASE kind WHEN 'direct' THEN 0 WHEN 'head' THEN 1 ELSE 2 END, "
                   "layer IS NULL, layer, src_head, head",
                   term_row, sizeof **rows,
                   STRS(offsetof(al_store_term_row, term), offsetof(al_store_term_row, kind)),
                   &blk_, n, e));
}

ROW_FN(ap_row, al_store_ap_row, t[0], x[1], x[2], t[2] != NULL)
int al_store_read_attr_patching(al_store *s, long run, al_store_ap_row **rows, int *n, al_err *e) {
    BLOCK(rows,
          run_rows(s, run,
                   "SELECT grid, estimate, actual FROM attribution_patching WHERE "
                   "run_id = ?1",
                   ap_row, sizeof **rows, STRS(offsetof(al_store_ap_row, grid)), &blk_, n, e));
}

ROW_FN(agree_row, al_store_agree_row, t[0], x[1], x[2], x[3], x[4])
int al_store_read_attr_agreement(al_store *s, long run, al_store_agree_row **rows, int *n,
                                 al_err *e) {
    BLOCK(rows, run_rows(s, run,
                         "SELECT grid, n, pearson, spearman, top5 FROM "
                         "attribution_agreement WHERE run_id = ?1",
                         agree_row, sizeof **rows, STRS(offsetof(al_store_agree_row, grid)), &blk_,
                         n, e));
}

ROW_FN(edge_row, al_store_edge_row, t[0], x[1], x[2], t[3], x[4], x[5])
int al_store_read_circuit_edges(al_store *s, long run, const char *method, double tau,
                                al_store_edge_row **rows, int *n, al_err *e) {
    char rs[32], ts[40], sql[512];
    snprintf(rs, sizeof rs, "%ld", run);
    /* tau as exact text: the parameter is bound as text and the column's
     * REAL affinity converts it back to the same double */
    snprintf(ts, sizeof ts, "%.17g", tau);
    snprintf(sql, sizeof sql,
             "SELECT sender, receiver_layer, receiver_head, channel, score, kept "
             "FROM circuit_edges WHERE run_id = ?1 AND method = ?2 AND %s ORDER BY edge",
             isnan(tau) ? "tau IS NULL" : "tau = ?3");
    const char *params[3] = {rs, method, ts};
    BLOCK(rows,
          read_rows(s, sql, params, isnan(tau) ? 2 : 3, edge_row, sizeof **rows,
                    STRS(offsetof(al_store_edge_row, sender), offsetof(al_store_edge_row, channel)),
                    &blk_, n, e));
}

ROW_FN(sweep_row, al_store_sweep_row, t[0], x[1], x[2], x[3], x[4], x[5])
int al_store_read_sweep_induction(al_store *s, al_store_sweep_row **rows, int *n, al_err *e) {
    const char *params[1] = {al_store_kind_needed(AL_RESULTS_TRAINING, e)};
    *rows = NULL;
    *n = 0;
    if (!params[0]) return -1;
    BLOCK(rows,
          read_rows(s,
                    "SELECT sm.setting, sm.n_layers, sm.model_id, sm.seed, t.step, "
                    "max(t.value) FROM sweep_models sm "
                    "JOIN latest_run lr ON lr.model_id = sm.model_id AND lr.kind = ?1 "
                    "JOIN train_head_scores t ON t.run_id = lr.run_id AND t.metric = 'induction' "
                    "GROUP BY sm.model_id, t.step "
                    "ORDER BY sm.setting, sm.n_layers, sm.seed, sm.model_id, t.step",
                    params, 1, sweep_row, sizeof **rows,
                    STRS(offsetof(al_store_sweep_row, setting)), &blk_, n, e));
}

int al_store_latest_view_any_run(al_store *s, int64_t model_id, const char *metric, long *run,
                                 al_err *e) {
    return latest_done(s, "views x", "x.metric = ?2", model_id, metric, run, e);
}

typedef struct view_ctx {
    double *v;
    int L, H;
    char *title;
    size_t cap;
} view_ctx;

static int view_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    view_ctx *c = ctx;
    (void)nc, (void)e;
    if (t[0]) snprintf(c->title, c->cap, "%s", t[0]);
    int l = (int)x[1], h = (int)x[2];
    if (l >= 0 && l < c->L && h >= 0 && h < c->H) c->v[l * c->H + h] = x[3];
    return 0;
}

int al_store_read_head_view(al_store *s, long run, const char *metric, int L, int H, double *v,
                            char *title, size_t cap, al_err *e) {
    char r[32];
    snprintf(r, sizeof r, "%ld", run);
    const char *params[2] = {r, metric};
    view_ctx c = {v, L, H, title, cap};
    for (int i = 0; i < L * H; i++) v[i] = NAN;
    if (cap) title[0] = 0;
    return al_store_query(s,
                          "SELECT v.title, h.layer, h.head, h.value FROM views v JOIN "
                          "head_scores h ON h.run_id = v.run_id AND h.metric = v.metric "
                          "WHERE v.run_id = ?1 AND v.metric = ?2",
                          params, 2, view_row, &c, e);
}
