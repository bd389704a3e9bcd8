/* store_sae_read.c -- the reads of the SAE tables for the pictures, the
 * report and its explorers (see store_sae_read.h). Every query names the
 * columns it reads, so columns added to these tables later change nothing
 * here. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "attnlab/store_sae_read.h"
#include "store_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DONE "r.status = 'done'"

/* ------------------------------------------------------------ helpers */

static char *dup_or_null(const char *s, int *oom) {
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *oom = 1;
    return d;
}

static int to_int(double x, int dflt) { return isnan(x) ? dflt : (int)x; }

static int rows2(al_store *s, const char *sql, const char *p1, const char *p2, al_rows *out,
                 al_err *e) {
    const char *params[2] = {p1, p2};
    memset(out, 0, sizeof *out);
    if (al_store_query(s, sql, params, 2, al_store_rows_collect, out, e) == 0) return 0;
    al_rows_free(out);
    return -1;
}

/* ------------------------------------------------------------- a run */

static int frun_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    al_sae_frun *r = ctx;
    (void)nc;
    int oom = 0;
    r->found = 1;
    snprintf(r->kind, sizeof r->kind, "%s", t[0] ? t[0] : "");
    snprintf(r->status, sizeof r->status, "%s", t[1] ? t[1] : "");
    r->model_id = isnan(x[2]) ? 0 : (int64_t)x[2];
    r->data = dup_or_null(t[3], &oom);
    r->has_row = t[4] != NULL;
    r->sae_dir = dup_or_null(t[4], &oom);
    r->hook_name = dup_or_null(t[5], &oom);
    r->layer = to_int(x[6], -1);
    r->d_sae = to_int(x[7], 0);
    r->n_live = to_int(x[8], 0);
    r->windows = to_int(x[9], 0);
    r->seq_len = to_int(x[10], 0);
    r->positions = isnan(x[11]) ? 0 : (long)x[11];
    r->probe_r = to_int(x[12], 0);
    r->probe_n = to_int(x[13], 0);
    return oom ? al_errf(e, "out of memory") : 0;
}

int al_store_read_sae_frun(al_store *s, long run, al_sae_frun *out, al_err *e) {
    memset(out, 0, sizeof *out);
    out->run = run;
    out->layer = -1;
    char rs[32];
    snprintf(rs, sizeof rs, "%ld", run);
    const char *params[1] = {rs};
    int rc = al_store_query(
        s,
        "SELECT r.kind, r.status, r.model_id, "
        "       CASE WHEN json_valid(r.config_json) THEN json_extract(r.config_json, '$.data') END, "
        "       f.sae_dir, f.hook_name, f.layer, f.d_sae, f.n_live, f.windows, f.seq_len, "
        "       f.positions, f.probe_r, f.probe_n "
        "FROM runs r LEFT JOIN sae_feature_runs f ON f.run_id = r.run_id WHERE r.run_id = ?1",
        params, 1, frun_row, out, e);
    if (rc) {
        al_sae_frun_free(out);
        out->run = run;
        return -1;
    }
    return 0;
}

void al_sae_frun_free(al_sae_frun *r) {
    free(r->sae_dir);
    free(r->hook_name);
    free(r->data);
    memset(r, 0, sizeof *r);
}

typedef struct idlist {
    long *v;
    int n, cap;
} idlist;

static int id_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    idlist *l = ctx;
    (void)nc, (void)t;
    long *q = al_grow(l->v, &l->cap, l->n, sizeof *l->v, 8, e);
    if (!q) return -1;
    l->v = q;
    l->v[l->n++] = (long)x[0];
    return 0;
}

int al_store_sae_fruns_of_model(al_store *s, int64_t model_id, long **runs, int *n, al_err *e) {
    char ms[32];
    snprintf(ms, sizeof ms, "%lld", (long long)model_id);
    const char *params[2] = {ms, al_store_kind_needed(AL_RESULTS_SAE_FEATURES, e)};
    idlist l = {0};
    *runs = NULL;
    *n = 0;
    if (!params[1]) return -1;
    if (al_store_query(s,
                       "SELECT r.run_id FROM runs r JOIN sae_feature_runs f ON f.run_id = r.run_id "
                       "WHERE r.model_id = ?1 AND r.kind = ?2 AND " DONE
                       " ORDER BY f.layer, r.run_id DESC",
                       params, 2, id_row, &l, e)) {
        free(l.v);
        return -1;
    }
    *runs = l.v;
    *n = l.n;
    return 0;
}

int al_store_latest_sae_frun(al_store *s, int64_t model_id, long *run, al_err *e) {
    char ms[32];
    snprintf(ms, sizeof ms, "%lld", (long long)model_id);
    const char *params[2] = {ms, al_store_kind_needed(AL_RESULTS_SAE_FEATURES, e)};
    idlist l = {0};
    *run = 0;
    if (!params[1]) return -1;
    int rc = al_store_query(s,
                            "SELECT r.run_id FROM runs r JOIN sae_feature_runs f ON f.run_id = "
                            "r.run_id WHERE r.model_id = ?1 AND r.kind = ?2 AND " DONE
                            " ORDER BY r.run_id DESC LIMIT 1",
                            params, 2, id_row, &l, e);
    if (rc == 0 && l.n) *run = l.v[0];
    free(l.v);
    return rc ? -1 : 0;
}

/* ------------------------------------------------------- one feature */

static int feat_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    al_sae_feature *f = ctx;
    (void)nc, (void)t, (void)e;
    f->found = 1;
    f->fired = isnan(x[0]) ? 0 : (long)x[0];
    f->density = x[1];
    f->mean_act = x[2];
    f->max_act = x[3];
    f->first_mean = x[4];
    f->second_mean = x[5];
    f->induction_index = x[6];
    f->top_layer = to_int(x[7], -1);
    f->top_head = to_int(x[8], -1);
    f->top_share = x[9];
    f->first_fired = isnan(x[10]) ? -1 : (long)x[10];
    f->second_fired = isnan(x[11]) ? -1 : (long)x[11];
    f->induction_p = x[12];
    f->auroc = x[13];
    f->induction = to_int(x[14], -1);
    f->next_token = to_int(x[15], -1);
    snprintf(f->next_str, sizeof f->next_str, "%s", t[16] ? t[16] : "");
    f->next_share = x[17];
    return 0;
}

static int ctx_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    al_sae_feature *f = ctx;
    (void)nc;
    int cap = f->n_ctx; /* grown one at a time: at most 100 contexts */
    al_sae_fctx *q = realloc(f->ctx, sizeof *q * (size_t)(cap + 1));
    if (!q) return al_errf(e, "out of memory");
    f->ctx = q;
    int oom = 0;
    q[f->n_ctx++] = (al_sae_fctx){.rank = to_int(x[0], 0),
                                  .window = to_int(x[1], -1),
                                  .offset = isnan(x[2]) ? -1 : (long)x[2],
                                  .pos = to_int(x[3], -1),
                                  .token = to_int(x[4], -1),
                                  .token_str = dup_or_null(t[5], &oom),
                                  .act = x[6]};
    return oom ? al_errf(e, "out of memory") : 0;
}

static int logit_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    al_sae_feature *f = ctx;
    (void)nc;
    int up = t[0] && strcmp(t[0], "up") == 0;
    al_sae_flogit **l = up ? &f->up : &f->down;
    int *n = up ? &f->n_up : &f->n_down;
    al_sae_flogit *q = realloc(*l, sizeof *q * (size_t)(*n + 1));
    if (!q) return al_errf(e, "out of memory");
    *l = q;
    int oom = 0;
    q[(*n)++] = (al_sae_flogit){.rank = to_int(x[1], 0),
                                .token = to_int(x[2], -1),
                                .token_str = dup_or_null(t[3], &oom),
                                .value = x[4]};
    return oom ? al_errf(e, "out of memory") : 0;
}

static int head_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    al_sae_feature *f = ctx;
    (void)nc, (void)t;
    al_sae_fhead *q = realloc(f->heads, sizeof *q * (size_t)(f->n_heads + 1));
    if (!q) return al_errf(e, "out of memory");
    f->heads = q;
    q[f->n_heads++] = (al_sae_fhead){.layer = to_int(x[0], -1),
                                     .head = to_int(x[1], -1),
                                     .contribution = x[2],
                                     .share = x[3]};
    return 0;
}

int al_store_read_sae_feature(al_store *s, long run, int feature, al_sae_feature *out, al_err *e) {
    memset(out, 0, sizeof *out);
    out->feature = feature;
    out->top_layer = out->top_head = -1;
    char rs[32], fs[32];
    snprintf(rs, sizeof rs, "%ld", run);
    snprintf(fs, sizeof fs, "%d", feature);
    const char *params[2] = {rs, fs};
    int rc = al_store_query(
        s,
        "SELECT fired, density, mean_act, max_act, first_mean, second_mean, induction_index, "
        "top_layer, top_head, top_share, first_fired, second_fired, induction_p, auroc, "
        "induction, next_token, next_token_str, next_share FROM sae_features "
        "WHERE run_id = ?1 AND feature = ?2",
        params, 2, feat_row, out, e);
    if (rc == 0 && out->found)
        rc = al_store_query(s,
                            "SELECT rank, window, offset, pos, token, token_str, activation "
                            "FROM sae_feature_contexts WHERE run_id = ?1 AND feature = ?2 "
                            "ORDER BY rank",
                            params, 2, ctx_row, out, e);
    if (rc == 0 && out->found)
        rc = al_store_query(s,
                            "SELECT direction, rank, token, token_str, value "
                            "FROM sae_feature_logits WHERE run_id = ?1 AND feature = ?2 "
                            "ORDER BY direction DESC, rank",
                            params, 2, logit_row, out, e);
    if (rc == 0 && out->found)
        rc = al_store_query(s,
                            "SELECT layer, head, contribution, share FROM sae_feature_heads "
                            "WHERE run_id = ?1 AND feature = ?2 ORDER BY layer, head",
                            params, 2, head_row, out, e);
    if (rc) {
        al_sae_feature_free(out);
        out->feature = feature;
        return -1;
    }
    return 0;
}

void al_sae_feature_free(al_sae_feature *f) {
    for (int i = 0; i < f->n_ctx; i++) free(f->ctx[i].token_str);
    for (int i = 0; i < f->n_up; i++) free(f->up[i].token_str);
    for (int i = 0; i < f->n_down; i++) free(f->down[i].token_str);
    free(f->ctx);
    free(f->up);
    free(f->down);
    free(f->heads);
    memset(f, 0, sizeof *f);
    f->top_layer = f->top_head = -1;
}

/* ------------------------------------------------------------ lists */

int al_store_sae_top_features(al_store *s, long run, al_sae_order order, int limit, al_rows *out,
                              al_err *e) {
    char rs[32], ls[32];
    snprintf(rs, sizeof rs, "%ld", run);
    snprintf(ls, sizeof ls, "%d", limit > 0 ? limit : -1);
    static const char *const sql[2] =
        {"SELECT f.feature, f.density, f.mean_act, f.max_act, f.induction_index, f.top_layer, "
         "       f.top_head, f.top_share, l.token_str, l.value, f.fired "
         "FROM sae_features f LEFT JOIN sae_feature_logits l ON l.run_id = f.run_id AND "
         "     l.feature = f.feature AND l.direction = 'up' AND l.rank = 1 "
         "WHERE f.run_id = ?1 ORDER BY f.density DESC, f.feature LIMIT ?2",
         "SELECT f.feature, f.density, f.mean_act, f.max_act, f.induction_index, f.top_layer, "
         "       f.top_head, f.top_share, l.token_str, l.value, f.fired "
         "FROM sae_features f LEFT JOIN sae_feature_logits l ON l.run_id = f.run_id AND "
         "     l.feature = f.feature AND l.direction = 'up' AND l.rank = 1 "
         "WHERE f.run_id = ?1 "
         "ORDER BY f.induction_index IS NULL, f.induction_index DESC, f.density DESC, f.feature "
         "LIMIT ?2"};
    return rows2(s, sql[order == AL_SAE_BY_INDUCTION], rs, ls, out, e);
}

int al_store_sae_top_shares(al_store *s, long run, int limit, al_rows *out, al_err *e) {
    char rs[32], ls[32];
    snprintf(rs, sizeof rs, "%ld", run);
    snprintf(ls, sizeof ls, "%d", limit > 0 ? limit : -1);
    return rows2(s,
                 "SELECT h.feature, h.head, h.share FROM sae_feature_heads h JOIN "
                 "  (SELECT feature, density FROM sae_features WHERE run_id = ?1 "
                 "   ORDER BY density DESC, feature LIMIT ?2) t ON t.feature = h.feature "
                 "WHERE h.run_id = ?1 ORDER BY t.density DESC, h.feature, h.head",
                 rs, ls, out, e);
}

int al_store_sae_task_run(al_store *s, long run, al_rows *out, al_err *e) {
    char rs[32];
    snprintf(rs, sizeof rs, "%ld", run);
    return rows2(s,
                 "SELECT task, direction, n_pairs, n_items, m_clean, m_corr, n_moved, "
                 "error_effect, error_se, site_effect, site_se FROM sae_task_runs "
                 "WHERE run_id = ?1",
                 rs, NULL, out, e);
}

int al_store_sae_task_features(al_store *s, long run, int limit, al_rows *out, al_err *e) {
    char rs[32], ls[32];
    snprintf(rs, sizeof rs, "%ld", run);
    snprintf(ls, sizeof ls, "%d", limit > 0 ? limit : -1);
    return rows2(s,
                 "SELECT t.feature, t.effect, t.se, t.ci_lo, t.ci_hi, t.act_clean, t.act_corr, "
                 "       f.induction_index, f.induction, f.top_layer, f.top_head, f.top_share "
                 "FROM sae_task_features t LEFT JOIN sae_features f "
                 "  ON f.run_id = t.run_id AND f.feature = t.feature "
                 "WHERE t.run_id = ?1 ORDER BY abs(t.effect) DESC, t.feature LIMIT ?2",
                 rs, ls, out, e);
}

int al_store_sae_train_runs(al_store *s, const char *mid, al_rows *out, al_err *e) {
    return rows2(s,
                 "SELECT t.run_id, t.layer, t.site, t.arch, t.d_in, t.d_sae, t.k, t.l1_coeff, "
                 "       t.steps, t.activations, t.l0, t.fve, t.mse, t.ce_clean, t.ce_sae, "
                 "       t.ce_zero, t.ce_recovered, t.dead_frac, t.dense_frac, t.rate, "
                 "       t.out_dir, t.eval_n "
                 "FROM sae_runs t JOIN runs r ON r.run_id = t.run_id "
                 "WHERE t.model_id = ?1 AND " DONE " ORDER BY t.layer, t.run_id",
                 mid, NULL, out, e);
}
