/* store_report.c -- the queries of the report and its explorers (see
 * store_report.h).
 *
 * Each reader is one query, moved here unchanged from the report so the
 * page keeps its bytes: same ORDER BY, same NULL handling, the same
 * rounding in SQL where the page shows SQL's rounding. Rows are read
 * through al_store_query (parameters bound as text, cells as text and
 * number), as the report always read them. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "attnlab/store_report.h"
#include "store_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/thresholds.h"

/* The one spelling of "a finished run": prefix it with the runs alias. */
#define DONE "status = 'done'"

/* ------------------------------------------------------------ rows */

int al_store_rows_collect(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    al_rows *q = ctx;
    q->nc = nc;
    if (q->nr == q->cap) {
        int cap = q->cap ? 2 * q->cap : 16;
        char **nt = realloc(q->t, sizeof(char *) * (size_t)cap * (size_t)nc);
        if (!nt) return al_errf(e, "out of memory");
        q->t = nt;
        double *nx = realloc(q->x, sizeof(double) * (size_t)cap * (size_t)nc);
        if (!nx) return al_errf(e, "out of memory");
        q->x = nx;
        q->cap = cap;
    }
    for (int c = 0; c < nc; c++) {
        size_t k = (size_t)q->nr * nc + c;
        q->t[k] = t[c] ? strdup(t[c]) : NULL;
        if (t[c] && !q->t[k]) return al_errf(e, "out of memory");
        q->x[k] = x[c];
    }
    q->nr++;
    return 0;
}

void al_rows_free(al_rows *q) {
    for (size_t i = 0; q->t && i < (size_t)q->nr * q->nc; i++) free(q->t[i]);
    free(q->t);
    free(q->x);
    memset(q, 0, sizeof *q);
}

/* All rows of sql with text parameters ?1..?3 (NULL binds NULL; extra
 * ones are ignored) into out (emptied on failure). */
static int rows3(al_store *s, const char *sql, const char *p1, const char *p2, const char *p3,
                 al_rows *out, al_err *e) {
    const char *params[3] = {p1, p2, p3};
    memset(out, 0, sizeof *out);
    if (al_store_query(s, sql, params, 3, al_store_rows_collect, out, e) == 0) return 0;
    al_rows_free(out);
    return -1;
}

static int rows(al_store *s, const char *sql, const char *p1, const char *p2, al_rows *out,
                al_err *e) {
    return rows3(s, sql, p1, p2, NULL, out, e);
}

/* The first cell of the first row (NaN if no row or NULL). */
static int num(al_store *s, const char *sql, const char *p1, const char *p2, double *v, al_err *e) {
    al_rows q;
    if (rows(s, sql, p1, p2, &q, e)) return -1;
    *v = q.nr && q.nc ? al_rows_x(&q, 0, 0) : NAN;
    al_rows_free(&q);
    return 0;
}

/* rows and num with ?3 bound to the run kind of family r: the readers of
 * one analysis's newest run spell no kind (store.h, "run kinds"). */
static int rows_k(al_store *s, const char *sql, const char *p1, const char *p2, al_store_results r,
                  al_rows *out, al_err *e) {
    const char *kind = al_store_kind_needed(r, e);
    if (kind) return rows3(s, sql, p1, p2, kind, out, e);
    memset(out, 0, sizeof *out);
    return -1;
}

static int num_k(al_store *s, const char *sql, const char *p1, const char *p2, al_store_results r,
                 double *v, al_err *e) {
    al_rows q;
    if (rows_k(s, sql, p1, p2, r, &q, e)) return -1;
    *v = q.nr && q.nc ? al_rows_x(&q, 0, 0) : NAN;
    al_rows_free(&q);
    return 0;
}

/* ------------------------------------------------- models, training */

int al_sr_model_id(al_store *s, const char *sha, double *id, al_err *e) {
    return num(s, "SELECT model_id FROM models WHERE sha256 = ?1", sha, NULL, id, e);
}

int al_sr_model_card(al_store *s, const char *mid, al_rows *out, al_err *e) {
    return rows(s,
                "SELECT n_params, trained_tokens, train_steps, final_train_loss, "
                "final_val_loss, sha256, seed, data_tokens FROM models WHERE model_id = ?1",
                mid, NULL, out, e);
}

int al_sr_warnings(al_store *s, const char *mid, al_rows *out, al_err *e) {
    return rows(s,
                "SELECT r.run_id, r.kind, w.message FROM run_warnings w JOIN runs r ON "
                "r.run_id = w.run_id WHERE w.model_id = ?1 AND r." DONE " ORDER BY r.run_id, w.seq",
                mid, NULL, out, e);
}

/* v is the metric's view of the latest finished run of model ?1 that
 * stored it (an older run's view of the same metric is left out). */
#define LATEST_VIEW_RUN                                                                            \
    " AND v.run_id = (SELECT max(w.run_id) FROM views w JOIN runs q ON q.run_id = w.run_id "       \
    "WHERE w.model_id = ?1 AND w.metric = v.metric AND q." DONE ") "

int al_sr_head_views(al_store *s, const char *mid, al_rows *out, al_err *e) {
    return rows(s,
                "SELECT r.kind, v.metric, v.title, h.layer, h.head, h.value FROM views v "
                "JOIN runs r ON r.run_id = v.run_id JOIN head_scores h ON h.run_id = v.run_id AND "
                "h.metric = v.metric WHERE v.model_id = ?1 AND v.shape = 'head' AND r." DONE
                    LATEST_VIEW_RUN "ORDER BY r.kind, v.metric, h.layer, h.head",
                mid, NULL, out, e);
}

int al_sr_shaped_views(al_store *s, const char *mid, al_rows *out, al_err *e) {
    return rows(s,
                "SELECT v.run_id, r.kind, v.metric, v.shape, v.title FROM views v "
                "JOIN runs r ON r.run_id = v.run_id WHERE v.model_id = ?1 AND "
                "v.shape IN ('pair', 'edge', 'pos') AND r." DONE LATEST_VIEW_RUN
                "ORDER BY CASE v.shape WHEN 'pair' THEN 0 WHEN 'edge' THEN 1 ELSE 2 END, r.kind, "
                "v.metric",
                mid, NULL, out, e);
}

int al_sr_view_top_cells(al_store *s, const char *run, const char *metric, al_rows *out,
                         al_err *e) {
    return rows(s,
                "SELECT row_label, col_label, value, count(*) OVER () FROM view_cells "
                "WHERE run_id = ?1 AND metric = ?2 AND value IS NOT NULL "
                "ORDER BY abs(value) DESC, row, col LIMIT 12",
                run, metric, out, e);
}

int al_sr_view_cells(al_store *s, const char *run, const char *metric, al_rows *out, al_err *e) {
    return rows(s,
                "SELECT row, value FROM view_cells WHERE run_id = ?1 AND metric = ?2 "
                "ORDER BY row, col",
                run, metric, out, e);
}

int al_sr_training_log(al_store *s, const char *mid, al_rows *out, al_err *e) {
    return rows_k(
        s,
        "SELECT t.step, t.tokens, t.train_loss, t.val_loss, t.icl_gain, t.seconds, "
        "(SELECT max(value) FROM train_head_scores s WHERE s.run_id = t.run_id AND s.step = t.step "
        " AND s.metric = 'induction'), t.val_loss_se, t.icl_gain_se FROM train_log t WHERE "
        "t.run_id = "
        "(SELECT max(run_id) FROM runs WHERE kind = ?3 AND model_id = ?1) ORDER BY t.step",
        mid, NULL, AL_RESULTS_TRAINING, out, e);
}

int al_sr_final_val_loss(al_store *s, const char *mid, double *v, al_err *e) {
    return num(s, "SELECT final_val_loss FROM models WHERE model_id = ?1", mid, NULL, v, e);
}

/* ------------------------------------------------------------ heads */

int al_sr_head_table(al_store *s, const char *mid, al_rows *out, al_err *e) {
    return rows(s,
                "SELECT name, induction, prev_token, duplicate_token, copying_eigen, "
                "copying_top1, copying_ablation, copying_ablation_excess, gradient_importance, "
                "qk_rank, ov_rank, "
                "qk_effective_rank, ov_effective_rank, pos_prev_token FROM head_summary "
                "WHERE model_id = ?1 ORDER BY layer, head",
                mid, NULL, out, e);
}

/* A head_summary row's score's standard error and level, from the
 * score_intervals row of the same model, head, metric and value (the
 * newest such run's). */
#define HEAD_CI(m)                                                                                 \
    "(SELECT i.se FROM score_intervals i WHERE i.model_id = h.model_id AND i.layer = h.layer "     \
    "AND i.head = h.head AND i.metric = '" m "' AND i.value = h." m                                \
    " ORDER BY i.run_id DESC LIMIT 1), (SELECT i.level FROM score_intervals i WHERE i.model_id = " \
    "h.model_id AND i.layer = h.layer AND i.head = h.head AND i.metric = '" m "' AND i.value = "   \
    "h." m " ORDER BY i.run_id DESC LIMIT 1)"

int al_sr_heads_above(al_store *s, const char *mid, al_sr_score sc, al_rows *out, al_err *e) {
    static const char *const sql[5] =
        {/* clang-format off */
        "SELECT name, induction, " HEAD_CI("induction") " FROM head_summary h WHERE model_id = ?1 AND "
        "induction > " AL_TH_STR(AL_TH_INDUCTION) " ORDER BY induction DESC",
        "SELECT name, prev_token, " HEAD_CI("prev_token") " FROM head_summary h WHERE model_id = ?1 AND "
        "prev_token > " AL_TH_STR(AL_TH_PREV_TOKEN) " ORDER BY prev_token DESC",
        "SELECT name, copying_ablation, " HEAD_CI("copying_ablation") " FROM head_summary h WHERE "
        "model_id = ?1 AND copying_ablation > " AL_TH_STR(AL_TH_COPY_ABLATION)
        " ORDER BY copying_ablation DESC",
        "SELECT name, copying_eigen, NULL, NULL FROM head_summary WHERE model_id = ?1 AND "
        "copying_eigen > " AL_TH_STR(AL_TH_COPY_EIGEN) " ORDER BY copying_eigen DESC",
        "SELECT name, induction_all, " HEAD_CI("induction_all") " FROM head_summary h WHERE "
        "model_id = ?1 AND induction_all > " AL_TH_STR(AL_TH_INDUCTION) " ORDER BY induction_all DESC"};
    /* clang-format on */
    if ((unsigned)sc > AL_SR_INDUCTION_ALL) return al_errf(e, "heads_above: bad score");
    return rows(s, sql[sc], mid, NULL, out, e);
}

int al_sr_induction_score(al_store *s, const char *mid, al_sr_score *sc, al_err *e) {
    double text = NAN;
    *sc = AL_SR_INDUCTION;
    if (num_k(s,
              "SELECT json_extract(config_json, '$.probe_tokens') = 'text' OR "
              "json_extract(config_json, '$.probe_tokens') LIKE 'text:%' FROM runs WHERE "
              "model_id = ?1 AND kind = ?3 AND " DONE " ORDER BY run_id DESC LIMIT 1",
              mid, NULL, AL_RESULTS_SCORES, &text, e))
        return -1;
    if (text == 1) *sc = AL_SR_INDUCTION_ALL;
    return 0;
}

int al_sr_head_names_above(al_store *s, const char *mid, al_sr_score sc, al_rows *out, al_err *e) {
    /* clang-format off */
    if (sc == AL_SR_PREV_TOKEN)
        return rows(s, "SELECT name FROM head_summary WHERE model_id = ?1 AND prev_token > "
                    AL_TH_STR(AL_TH_PREV_TOKEN) " ORDER BY layer, head", mid, NULL, out, e);
    if (sc == AL_SR_INDUCTION)
        return rows(s, "SELECT name FROM head_summary WHERE model_id = ?1 AND induction > "
                    AL_TH_STR(AL_TH_INDUCTION) " ORDER BY layer, head", mid, NULL, out, e);
    if (sc == AL_SR_INDUCTION_ALL)
        return rows(s, "SELECT name FROM head_summary WHERE model_id = ?1 AND induction_all > "
                    AL_TH_STR(AL_TH_INDUCTION) " ORDER BY layer, head", mid, NULL, out, e);
    /* clang-format on */
    memset(out, 0, sizeof *out);
    return al_errf(e, "head_names_above: bad score");
}

int al_sr_count_heads_above(al_store *s, const char *mid, al_sr_score sc, double *n, al_err *e) {
    /* clang-format off */
    if (sc == AL_SR_INDUCTION)
        return num(s, "SELECT count(*) FROM head_summary WHERE model_id = ?1 AND induction > "
                   AL_TH_STR(AL_TH_INDUCTION), mid, NULL, n, e);
    if (sc == AL_SR_INDUCTION_ALL)
        return num(s, "SELECT count(*) FROM head_summary WHERE model_id = ?1 AND induction_all > "
                   AL_TH_STR(AL_TH_INDUCTION), mid, NULL, n, e);
    if (sc == AL_SR_PREV_TOKEN)
        return num(s, "SELECT count(*) FROM head_summary WHERE model_id = ?1 AND prev_token > "
                   AL_TH_STR(AL_TH_PREV_TOKEN), mid, NULL, n, e);
    /* clang-format on */
    return al_errf(e, "count_heads_above: bad score");
}

int al_sr_score_metrics(al_store *s, const char *mid, al_rows *out, al_err *e) {
    return rows_k(s,
                  "SELECT metric, value FROM model_scores WHERE run_id = (SELECT run_id "
                  "FROM latest_run WHERE model_id = ?1 AND kind = ?3) ORDER BY metric",
                  mid, NULL, AL_RESULTS_SCORES, out, e);
}

int al_sr_icl_gain(al_store *s, const char *mid, double *v, al_err *e) {
    return num_k(s,
                 "SELECT value FROM model_scores WHERE metric = 'icl_gain' AND run_id = (SELECT "
                 "run_id FROM latest_run WHERE model_id = ?1 AND kind = ?3)",
                 mid, NULL, AL_RESULTS_SCORES, v, e);
}

int al_sr_copy_pairs(al_store *s, const char *mid, int excess, al_rows *out, al_err *e) {
    return rows(s,
                excess ? "SELECT name, copying_eigen, copying_ablation_excess FROM head_summary "
                         "WHERE model_id = ?1 AND copying_eigen IS NOT NULL AND "
                         "copying_ablation_excess IS NOT NULL ORDER BY layer, head"
                       : "SELECT name, copying_eigen, copying_ablation FROM head_summary "
                         "WHERE model_id = ?1 AND copying_eigen IS NOT NULL AND "
                         "copying_ablation IS NOT NULL ORDER BY layer, head",
                mid, NULL, out, e);
}

int al_sr_best_head(al_store *s, const char *mid, al_sr_pick p, int *l, int *h, al_err *e) {
    static const char *const expr[3] =
        {/* clang-format off */
        "coalesce(prev_token, pos_prev_token)",
        "CASE WHEN copying_eigen > " AL_TH_STR(AL_TH_COPY_EIGEN)
        " THEN coalesce(copying_ablation, copying_eigen) END",
        "coalesce(copying_ablation, copying_eigen)"};
    /* clang-format on */
    if ((unsigned)p > AL_SR_PICK_ANY_COPY) return al_errf(e, "best_head: bad pick");
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT layer, head FROM head_summary WHERE model_id = ?1 AND (%s) "
             "IS NOT NULL ORDER BY (%s) DESC, layer, head LIMIT 1",
             expr[p], expr[p]);
    al_rows q;
    if (rows(s, sql, mid, NULL, &q, e)) return -1;
    int found = q.nr > 0;
    if (found) *l = (int)al_rows_x(&q, 0, 0), *h = (int)al_rows_x(&q, 0, 1);
    al_rows_free(&q);
    return found;
}

int al_sr_skip_trigrams(al_store *s, const char *mid, al_rows *out, al_err *e) {
    return rows_k(s,
                  "SELECT h, tri, qk, ov, score FROM (SELECT t.layer || '.' || t.head AS h, "
                  "coalesce(t.a_str, '?') || ' … ' || coalesce(t.b_str, '?') || ' → ' || "
                  "coalesce(t.c_str, '?') AS tri, t.qk, t.ov, t.score, ROW_NUMBER() OVER "
                  "(PARTITION BY t.head ORDER BY t.score DESC) AS rn FROM skip_trigrams t JOIN "
                  "latest_run r ON r.run_id = t.run_id AND r.kind = ?3 WHERE r.model_id = ?1 "
                  "AND t.layer = 0) WHERE rn <= 2 ORDER BY score DESC",
                  mid, NULL, AL_RESULTS_WEIGHTS, out, e);
}

int al_sr_composition_top(al_store *s, const char *mid, al_rows *out, al_err *e) {
    return rows_k(
        s,
        "SELECT kind, h1, h2, score, baseline, sd FROM (SELECT c.kind, c.layer1 || '.' "
        "|| c.head1 AS h1, c.layer2 || '.' || c.head2 AS h2, c.score, c.baseline, (c.score - "
        "c.baseline) / c.baseline_sd AS sd, ROW_NUMBER() OVER (PARTITION BY c.kind ORDER BY "
        "(c.score - c.baseline) / c.baseline_sd DESC) AS rn FROM composition c JOIN latest_run r "
        "ON r.run_id = c.run_id AND r.kind = ?3 WHERE r.model_id = ?1) WHERE rn <= 5 "
        "ORDER BY kind, sd DESC",
        mid, NULL, AL_RESULTS_WEIGHTS, out, e);
}

/* ------------------------------------------------ ablation, pruning */

int al_sr_ablation_runs(al_store *s, const char *mid, al_rows *out, al_err *e) {
    return rows(s,
                "SELECT a.method, max(a.run_id) FROM ablations a JOIN runs r ON r.run_id = "
                "a.run_id WHERE a.model_id = ?1 AND r." DONE " AND a.kind = 'single' "
                "GROUP BY a.method ORDER BY a.method",
                mid, NULL, out, e);
}

int al_sr_ablation_clean(al_store *s, const char *run, const char *method, double *loss,
                         al_err *e) {
    return num(s, "SELECT loss FROM ablations WHERE run_id = ?1 AND method = ?2 AND kind = 'none'",
               run, method, loss, e);
}

int al_sr_ablation_singles(al_store *s, const char *run, const char *method, al_rows *out,
                           al_err *e) {
    return rows(s,
                "SELECT heads, loss, delta_loss, delta_loss_copy, delta_loss_probe FROM "
                "ablations WHERE run_id = ?1 AND method = ?2 AND kind = 'single' ORDER BY "
                "delta_loss DESC",
                run, method, out, e);
}

int al_sr_ablation_pairs(al_store *s, const char *run, const char *method, al_rows *out,
                         al_err *e) {
    return rows(s,
                "SELECT replace(heads, ',', ' + '), delta_loss, interaction FROM ablations "
                "WHERE run_id = ?1 AND method = ?2 AND kind = 'pair' ORDER BY abs(interaction) "
                "DESC LIMIT 8",
                run, method, out, e);
}

int al_sr_ablation_count(al_store *s, const char *mid, double *n, al_err *e) {
    return num(s,
               "SELECT count(*) FROM ablations x JOIN runs r ON r.run_id = x.run_id "
               "WHERE r.model_id = ?1 AND r." DONE,
               mid, NULL, n, e);
}

int al_sr_pruning_runs(al_store *s, const char *mid, al_rows *out, al_err *e) {
    return rows(s,
                "SELECT p.method, max(p.run_id) FROM pruning_steps p JOIN runs r ON "
                "r.run_id = p.run_id WHERE p.model_id = ?1 AND r." DONE " GROUP BY p.method "
                "ORDER BY p.method",
                mid, NULL, out, e);
}

int al_sr_pruning_steps(al_store *s, const char *run, al_rows *out, al_err *e) {
    return rows(s,
                "SELECT heads_left, loss, layer || '.' || head FROM pruning_steps WHERE "
                "run_id = ?1 ORDER BY step",
                run, NULL, out, e);
}

/* ------------------------------------------------------------ names */

#define NAMES_RUN "SELECT run_id FROM latest_run WHERE model_id = ?1 AND kind = ?3"

int al_sr_names_pieces(al_store *s, const char *mid, double *n, al_err *e) {
    return num_k(s,
                 "SELECT count(*) FROM model_scores WHERE metric LIKE 'names_first_p%' AND "
                 "run_id = (" NAMES_RUN ")",
                 mid, NULL, AL_RESULTS_NAMES, n, e);
}

int al_sr_names_run(al_store *s, al_rows *out, al_err *e) {
    return rows_k(
        s,
        "SELECT json_extract(config_json, '$.name'), (SELECT value FROM model_scores s "
        "WHERE s.run_id = r.run_id AND metric = 'names_stories') FROM runs r WHERE run_id IN "
        "(SELECT run_id FROM latest_run WHERE kind = ?3) ORDER BY run_id DESC LIMIT 1",
        NULL, NULL, AL_RESULTS_NAMES, out, e);
}

int al_sr_names_value(al_store *s, const char *mid, const char *metric, double *v, al_err *e) {
    return num_k(s, "SELECT value FROM model_scores WHERE metric = ?2 AND run_id = (" NAMES_RUN ")",
                 mid, metric, AL_RESULTS_NAMES, v, e);
}

/* ---------------------------------------------------------- patching */

int al_sr_patching_runs(al_store *s, const char *mid, al_rows *out, al_err *e) {
    return rows(
        s,
        "SELECT x.run_id, x.task, x.component, x.direction, x.m_clean, x.m_corr, "
        "x.n_pairs FROM patching_runs x JOIN runs r ON r.run_id = x.run_id WHERE x.model_id "
        "= ?1 AND r." DONE " AND x.run_id = (SELECT max(y.run_id) FROM patching_runs "
        "y JOIN runs r2 ON r2.run_id = y.run_id WHERE r2." DONE " AND y.model_id = "
        "x.model_id AND y.task = x.task AND y.direction = x.direction AND y.component IS "
        "x.component) ORDER BY x.component IS NULL, x.component, x.task, x.direction",
        mid, NULL, out, e);
}

int al_sr_patching_top(al_store *s, const char *run, al_rows *out, al_err *e) {
    return rows(s,
                "SELECT CASE WHEN p.head IS NULL THEN 'resid ' || p.layer ELSE p.layer || "
                "'.' || p.head END || CASE WHEN p.pos IS NULL THEN '' ELSE ' @ ' || p.pos END, "
                "p.value, p.metric, i.se, i.ci_lo, i.ci_hi FROM patching p LEFT JOIN "
                "score_intervals i ON i.run_id = p.run_id AND i.metric LIKE 'effect\\_%' "
                "ESCAPE '\\' AND i.layer = coalesce(p.layer, -1) AND i.head = coalesce(p.head, "
                "-1) AND i.pos = coalesce(p.pos, -1) WHERE p.run_id = ?1 ORDER BY p.value IS "
                "NULL, abs(p.value) DESC, p.patch_id LIMIT 8",
                run, NULL, out, e);
}

int al_sr_paths_top(al_store *s, const char *run, al_rows *out, al_err *e) {
    return rows(s,
                "SELECT p.sender || ' -> ' || CASE WHEN p.channel = 'direct' THEN "
                "'logits' ELSE p.receiver_layer || '.' || p.receiver_head || ' ' || p.channel "
                "END, p.value, p.metric, i.se, i.ci_lo, i.ci_hi FROM path_patching p "
                "JOIN models m ON m.model_id = p.model_id LEFT JOIN score_intervals i ON "
                "i.run_id = p.run_id AND i.metric = 'path_effect_' || p.channel AND i.layer = "
                "coalesce(p.receiver_layer, -1) AND i.head = coalesce(p.receiver_head, -1) AND "
                "i.pos = CASE p.sender WHEN 'embed' THEN 0 WHEN 'pos' THEN 1 ELSE 2 + "
                "CAST(substr(p.sender, 1, instr(p.sender, '.') - 1) AS INTEGER) * m.n_heads + "
                "CAST(substr(p.sender, instr(p.sender, '.') + 1) AS INTEGER) END "
                "WHERE p.run_id = ?1 ORDER BY p.value IS NULL, abs(p.value) DESC, p.path_id "
                "LIMIT 8",
                run, NULL, out, e);
}

int al_sr_patching_run_info(al_store *s, const char *run, al_rows *out, al_err *e) {
    return rows(s,
                "SELECT r.config_json, x.task_hash, x.n_pairs, x.seq_len FROM runs r "
                "JOIN patching_runs x ON x.run_id = r.run_id WHERE r.run_id = ?1",
                run, NULL, out, e);
}

/* ------------------------------------------------------- attribution */

int al_sr_attribution_run(al_store *s, const char *mid, al_rows *out, al_err *e) {
    return rows_k(
        s,
        "SELECT x.run_id, x.task, x.metric_kind, x.n_items, x.metric, x.loss, "
        "x.direct_value, x.head_value, x.virtual_value, x.direct_dloss, x.head_dloss, "
        "x.virtual_dloss, x.direction, (SELECT count(*) FROM path_terms p WHERE p.run_id = "
        "x.run_id), (SELECT count(actual) FROM attribution_patching p WHERE p.run_id = "
        "x.run_id), x.centred FROM attribution_runs x JOIN runs r ON r.run_id = x.run_id "
        "WHERE x.model_id = ?1 AND r." DONE " AND r.kind = ?3 ORDER BY x.run_id "
        "DESC LIMIT 1",
        mid, NULL, AL_RESULTS_ATTRIBUTION, out, e);
}

int al_sr_path_kinds(al_store *s, const char *run, al_rows *out, al_err *e) {
    return rows(s,
                "SELECT k, v, d, CASE WHEN s > 0 THEN printf('%.1f%%', 100 * abs(d) / s) END "
                "FROM (SELECT 0 AS o, 'direct' AS k, direct_value AS v, direct_dloss AS d "
                "FROM attribution_runs WHERE run_id = ?1 UNION ALL SELECT 1, 'head', "
                "head_value, head_dloss FROM attribution_runs WHERE run_id = ?1 UNION ALL "
                "SELECT 2, 'virtual', virtual_value, virtual_dloss FROM attribution_runs "
                "WHERE run_id = ?1 AND virtual_dloss IS NOT NULL), (SELECT "
                "abs(coalesce(direct_dloss, 0)) + abs(coalesce(head_dloss, 0)) + "
                "abs(coalesce(virtual_dloss, 0)) AS s FROM attribution_runs WHERE run_id = ?1) "
                "ORDER BY o",
                run, NULL, out, e);
}

int al_sr_top_virtual_term(al_store *s, const char *run, al_rows *out, al_err *e) {
    return rows(s,
                "SELECT term, dloss FROM path_terms WHERE run_id = ?1 AND kind = 'virtual' "
                "AND dloss IS NOT NULL ORDER BY dloss DESC LIMIT 1",
                run, NULL, out, e);
}

int al_sr_logit_lens(al_store *s, const char *run, const char *n_layers, al_rows *out, al_err *e) {
    return rows(s,
                "SELECT CASE WHEN layer = 0 THEN 'embed + pos' WHEN layer = ?2 THEN "
                "'final (the model''s own)' ELSE 'entering layer ' || layer END, loss, "
                "accuracy FROM logit_lens WHERE run_id = ?1 ORDER BY layer",
                run, n_layers, out, e);
}

int al_sr_attr_agreement(al_store *s, const char *run, al_rows *out, al_err *e) {
    return rows(s,
                "SELECT grid, n, pearson, spearman, top5 FROM attribution_agreement WHERE "
                "run_id = ?1 ORDER BY CASE grid WHEN 'head' THEN 0 WHEN 'head_pos' THEN 1 "
                "ELSE 2 END",
                run, NULL, out, e);
}

/* ----------------------------------------------------------- circuit */

/* The kept edges of one circuit as table k: ?1 run, ?2 method, ?3 tau
 * (NULL for EAP; as text, exact). */
#define CIRCUIT_KEPT                                                                               \
    "WITH k AS (SELECT * FROM circuit_edges WHERE run_id = ?1 AND method = ?2 AND tau "            \
    "IS CAST(?3 AS REAL) AND kept = 1) "

int al_sr_latest_discover(al_store *s, const char *mid, double *run, al_err *e) {
    return num_k(s,
                 "SELECT max(x.run_id) FROM circuit_runs x JOIN runs r ON r.run_id = x.run_id "
                 "WHERE x.model_id = ?1 AND r." DONE " AND r.kind = ?3",
                 mid, NULL, AL_RESULTS_CIRCUIT, run, e);
}

int al_sr_latest_scores_intervals(al_store *s, const char *mid, double *run, al_err *e) {
    return num_k(s,
                 "SELECT max(x.run_id) FROM score_intervals x JOIN runs r ON r.run_id = "
                 "x.run_id WHERE x.model_id = ?1 AND r." DONE " AND r.kind = ?3",
                 mid, NULL, AL_RESULTS_SCORES, run, e);
}

int al_sr_circuit(al_store *s, const char *run, const char *method, const char *tau, al_rows *out,
                  al_err *e) {
    return rows3(s,
                 "SELECT x.task, x.n_kept, x.n_edges, x.faithfulness, x.kl, x.metric, (SELECT "
                 "count(*) FROM circuit_runs y WHERE y.run_id = x.run_id AND y.tau IS NOT "
                 "NULL), (SELECT count(*) FROM circuit_runs y WHERE y.run_id = x.run_id), "
                 "i.se, i.ci_lo, i.ci_hi FROM circuit_runs x LEFT JOIN score_intervals i ON "
                 "i.rowid = (SELECT j.rowid FROM score_intervals j WHERE j.run_id = x.run_id "
                 "AND j.metric = 'faithfulness' AND j.value IS x.faithfulness ORDER BY j.pos "
                 "LIMIT 1) WHERE x.run_id = ?1 AND x.method = ?2 AND x.tau IS CAST(?3 AS REAL)",
                 run, method, tau, out, e);
}

/* a head is in the circuit when a kept edge leaves or enters it */
int al_sr_circuit_heads(al_store *s, const char *run, const char *method, const char *tau,
                        al_rows *out, al_err *e) {
    return rows3(s,
                 CIRCUIT_KEPT
                 "SELECT sender AS name FROM k WHERE sender NOT IN "
                 "('embed', 'pos') UNION SELECT receiver_layer || '.' || receiver_head FROM k "
                 "WHERE receiver_layer IS NOT NULL ORDER BY name",
                 run, method, tau, out, e);
}

/* with the composition score and path patching's effect of the same
 * path, where the database has them */
int al_sr_circuit_k_edges(al_store *s, const char *run, const char *method, const char *tau,
                          al_rows *out, al_err *e) {
    /* any depth: sender "l0.h0" of an earlier layer into any later head */
    return rows3(s,
                 CIRCUIT_KEPT
                 "SELECT k.sender, k.receiver_layer || '.' || k.receiver_head, "
                 "k.score, c.score, c.baseline, (SELECT p.value FROM path_patching p JOIN runs r "
                 "ON r.run_id = p.run_id WHERE r." DONE " AND p.model_id = k.model_id AND "
                 "p.sender = k.sender AND p.receiver_layer = k.receiver_layer AND "
                 "p.receiver_head = k.receiver_head AND p.channel = 'k' ORDER BY p.run_id DESC "
                 "LIMIT 1) FROM k LEFT JOIN composition c ON c.run_id = (SELECT max(y.run_id) "
                 "FROM composition y JOIN runs r ON r.run_id = y.run_id WHERE r." DONE " AND "
                 "y.model_id = k.model_id AND y.kind = 'K') AND c.kind = 'K' AND c.layer1 = "
                 "CAST(substr(k.sender, 1, instr(k.sender, '.') - 1) AS INTEGER) AND c.head1 = "
                 "CAST(substr(k.sender, instr(k.sender, '.') + 1) AS INTEGER) AND c.layer2 = "
                 "k.receiver_layer AND c.head2 = k.receiver_head WHERE k.channel = 'k' AND "
                 "k.receiver_layer >= 1 AND k.sender NOT IN ('embed', 'pos') ORDER BY k.score "
                 "DESC, k.edge",
                 run, method, tau, out, e);
}

/* ------------------------------------------------------ across seeds */

int al_sr_has_sweep(al_store *s, double *yes, al_err *e) {
    return num(s,
               "SELECT EXISTS (SELECT 1 FROM merge_sources) OR EXISTS (SELECT 1 FROM "
               "sweep_summary WHERE n_seeds > 1)",
               NULL, NULL, yes, e);
}

int al_sr_sweep_summary(al_store *s, al_rows *out, al_err *e) {
    /* setting '' (a database of one setting) shows as a dash */
    return rows(s,
                "SELECT nullif(setting, ''), n_layers, n_seeds, n_models, n_scored, "
                "share_with_induction_head, n_curves, n_never_crossed, first_step_mean, "
                "first_step_sd, first_step_min, first_step_max, best_induction_mean, "
                "best_induction_min, best_induction_max, n_kcomp, kcomp_matches_interaction, "
                "n_copying, copying_agreement, best_induction_sd, best_induction_lo, "
                "best_induction_hi, first_step_lo, first_step_hi FROM sweep_summary",
                NULL, NULL, out, e);
}

/* ---------------------------------------------------------- heatmaps */

/* Row and column labels shared by path patching and attribution
 * patching's edge grid. */
#define SENDER_KEY                                                                                 \
    "CASE sender WHEN 'embed' THEN -2 WHEN 'pos' THEN -1 ELSE "                                    \
    "CAST(substr(sender, 1, instr(sender, '.') - 1) AS INTEGER) * 1000 + "                         \
    "CAST(substr(sender, instr(sender, '.') + 1) AS INTEGER) END"
#define RECEIVER                                                                                   \
    "CASE WHEN channel = 'direct' THEN 'logits' ELSE receiver_layer || '.' || "                    \
    "receiver_head || ' ' || channel END"
#define RECEIVER_KEY                                                                               \
    "CASE WHEN channel = 'direct' THEN 1e9 ELSE receiver_layer * 1000 + "                          \
    "receiver_head * 4 + CASE channel WHEN 'q' THEN 0 WHEN 'k' THEN 1 ELSE 2 END END"
#define HEAD_LABEL "CASE WHEN head IS NULL THEN 'resid ' || layer ELSE layer || '.' || head END"
#define HEAD_KEY "layer * 1000 + coalesce(head, -1)"
#define POS_LABEL "CASE WHEN pos IS NULL THEN 'all' ELSE 'pos ' || pos END"
/* A patching cell's interval column (score_intervals, keyed as the row),
 * and a path's: its receiver, channel and value (the sender is stored
 * there by index; two senders of one receiver and channel with the very
 * same effect would share the first one's). */
#define PATCH_CI(col)                                                                              \
    "(SELECT i." col " FROM score_intervals i WHERE i.run_id = patching.run_id AND i.metric "      \
    "LIKE 'effect_%' AND i.layer = coalesce(patching.layer, -1) AND i.head = "                     \
    "coalesce(patching.head, -1) AND i.pos = coalesce(patching.pos, -1))"
#define PATH_CI(col)                                                                               \
    "(SELECT i." col " FROM score_intervals i WHERE i.run_id = path_patching.run_id AND "          \
    "i.metric = 'path_effect_' || path_patching.channel AND i.layer = "                            \
    "coalesce(path_patching.receiver_layer, -1) AND i.head = "                                     \
    "coalesce(path_patching.receiver_head, -1) AND i.value = path_patching.value LIMIT 1)"

int al_sr_heatmap_cells(al_store *s, al_sr_heatmap kind, const char *run, const char *grid,
                        al_rows *out, al_err *e) {
    static const char *const sql[5] =
        {"SELECT " HEAD_LABEL ", " HEAD_KEY ", " POS_LABEL ", coalesce(pos, -1), "
         "value, NULL, " PATCH_CI("se") ", " PATCH_CI("ci_lo") ", " PATCH_CI(
             "ci_hi") " FROM patching WHERE run_id = ?1",
         "SELECT sender, " SENDER_KEY ", " RECEIVER ", " RECEIVER_KEY
         ", value, NULL, " PATH_CI("se") ", " PATH_CI("ci_lo") ", " PATH_CI(
             "ci_hi") " FROM path_patching WHERE run_id = ?1",
         "SELECT l.component, CASE l.component WHEN 'embed' THEN -2 WHEN 'pos' THEN -1 "
         "ELSE CAST(substr(l.component, 1, instr(l.component, '.') - 1) AS INTEGER) * "
         "1000 + CAST(substr(l.component, instr(l.component, '.') + 1) AS INTEGER) END, "
         "CASE WHEN l.pos IS NULL THEN 'mean' ELSE 'pos ' || l.pos || coalesce(' ' || "
         "t.text, '') END, coalesce(l.pos, 1e9), l.value FROM logit_attribution l LEFT "
         "JOIN attribution_tokens t ON t.run_id = l.run_id AND t.pos = l.pos WHERE "
         "l.run_id = ?1",
         "SELECT " HEAD_LABEL ", " HEAD_KEY ", " POS_LABEL ", coalesce(pos, "
         "-1), estimate, actual FROM attribution_patching WHERE run_id = ?1 "
         "AND grid = ?2",
         "SELECT sender, " SENDER_KEY ", " RECEIVER ", " RECEIVER_KEY ", "
         "estimate, actual FROM attribution_patching WHERE run_id = ?1 AND "
         "grid = ?2"};
    if ((unsigned)kind > AL_SR_HM_ATTRPATCH_EDGE) {
        memset(out, 0, sizeof *out);
        return al_errf(e, "heatmap_cells: bad kind");
    }
    return rows(s, sql[kind], run, grid, out, e);
}

/* ---------------------------------------------------------- notebook */

/* The queries of docs/sql.md (its Circuits and Behaviour sections, patching
 * included). They are text for the reader, copied into the notebook to be
 * run and edited by hand, so they spell the run kinds they filter on
 * ('circuits', 'prune', 'paths') as docs/sql.md does: a query that bound
 * them would not run in the notebook as shown. */
static const al_sr_nb_query nb_queries[] = {
    {"The most positive copying heads of every model, with the second copying score beside it",
     "SELECT m.path, s.name, round(s.copying_eigen, 3) AS copying_eigen,\n"
     "       round(s.copying_top1, 3) AS copying_top1\n"
     "FROM head_summary s JOIN models m USING (model_id)\n"
     "ORDER BY s.copying_eigen DESC LIMIT 5"},
    {"The top skip-trigrams of head 0.4 in the newest circuits run of each model",
     "SELECT t.model_id, t.rank, t.a_str || ' … ' || t.b_str || ' → ' || t.c_str AS trigram,\n"
     "       round(t.qk, 2) AS qk, round(t.ov, 2) AS ov, round(t.score, 2) AS score\n"
     "FROM skip_trigrams t JOIN latest_run r ON r.run_id = t.run_id AND r.kind = 'circuits'\n"
     "WHERE t.layer = 0 AND t.head = 4\n"
     "ORDER BY t.model_id, t.rank LIMIT 10"},
    {"The strongest K-composition pairs, with how many baseline standard deviations they stand out",
     "SELECT c.model_id, c.layer1 || '.' || c.head1 AS earlier, c.layer2 || '.' || c.head2 AS later,\n"
     "       round(c.score, 3) AS score, round(c.baseline, 3) AS random,\n"
     "       round((c.score - c.baseline) / c.baseline_sd, 1) AS sd_above\n"
     "FROM composition c JOIN latest_run r ON r.run_id = c.run_id AND r.kind = 'circuits'\n"
     "WHERE c.kind = 'K'\n"
     "ORDER BY sd_above DESC LIMIT 5"},
    {"Ranks per layer: each head's own (min/max over the layer's heads) and all heads together",
     "SELECT s.model_id, s.layer, min(s.qk_rank) AS qk_min, max(s.qk_rank) AS qk_max,\n"
     "       min(s.ov_rank) AS ov_min, round(avg(s.qk_effective_rank), 1) AS qk_eff,\n"
     "       (SELECT value FROM layer_scores l JOIN latest_run r ON r.run_id = l.run_id\n"
     "        WHERE r.kind = 'circuits' AND l.model_id = s.model_id AND l.layer = s.layer\n"
     "          AND l.metric = 'read_qk_rank') AS union_qk,\n"
     "       (SELECT value FROM layer_scores l JOIN latest_run r ON r.run_id = l.run_id\n"
     "        WHERE r.kind = 'circuits' AND l.model_id = s.model_id AND l.layer = s.layer\n"
     "          AND l.metric = 'write_o_rank') AS union_o\n"
     "FROM head_summary s GROUP BY s.model_id, s.layer"},
    {"Head-overlap matrix of layer 0's value spaces (row = head, columns = heads 0..7)",
     "SELECT head1 AS head, group_concat(printf('%.2f', value), ' ') AS overlap_with_0_to_7\n"
     "FROM (SELECT o.* FROM head_overlap o JOIN latest_run r ON r.run_id = o.run_id\n"
     "      WHERE r.kind = 'circuits' AND r.model_id = 1 AND o.layer = 0 AND o.space = 'v'\n"
     "      ORDER BY o.head1, o.head2)\n"
     "GROUP BY head1"},
    {"The singular-value spectrum of head 1.6's QK circuit, relative to its largest",
     "SELECT v.idx, round(v.value, 4) AS sigma,\n"
     "       round(v.value / first_value(v.value) OVER (ORDER BY v.idx), 4) AS relative\n"
     "FROM singular_values v JOIN latest_run r ON r.run_id = v.run_id AND r.kind = 'circuits'\n"
     "WHERE r.model_id = 1 AND v.layer = 1 AND v.head = 6 AND v.circuit = 'qk'\n"
     "ORDER BY v.idx"},
    {"Eigenvalues of a head's full OV circuit, and how much of their weight is real and positive",
     "SELECT e.layer || '.' || e.head AS head,\n"
     "       round(sum(e.re) / sum(sqrt(e.re * e.re + e.im * e.im)), 3) AS copying_eigen,\n"
     "       sum(e.im != 0) AS complex_ones, round(max(e.re), 2) AS largest_re\n"
     "FROM eigenvalues e JOIN latest_run r ON r.run_id = e.run_id AND r.kind = 'circuits'\n"
     "WHERE r.model_id = 1\n"
     "GROUP BY e.layer, e.head ORDER BY copying_eigen DESC"},
    {"Copying skip-trigrams (the output is the attended-to token, A = C) per head",
     "SELECT t.layer || '.' || t.head AS head, count(*) AS copying_trigrams,\n"
     "       group_concat(DISTINCT t.a_str) AS tokens\n"
     "FROM skip_trigrams t JOIN latest_run r ON r.run_id = t.run_id AND r.kind = 'circuits'\n"
     "WHERE r.model_id = 1 AND t.a = t.c\n"
     "GROUP BY t.layer, t.head ORDER BY copying_trigrams DESC"},
    {"Every trigram that predicts a given token (strings are stored exactly; ␣ is a leading space)",
     "SELECT t.layer || '.' || t.head AS head, t.a_str, t.b_str, round(t.score, 2) AS score\n"
     "FROM skip_trigrams t JOIN latest_run r ON r.run_id = t.run_id AND r.kind = 'circuits'\n"
     "WHERE t.c_str = '␣the' ORDER BY t.score DESC LIMIT 10"},
    {"Two models side by side (e.g. tied vs untied embeddings): mean copying score per layer",
     /* clang-format off */
     "SELECT m.path, m.tied_embeddings, s.layer, round(avg(s.copying_eigen), 3) AS mean_copying,\n"
     "       sum(s.copying_eigen > " AL_TH_STR(AL_TH_COPY_EIGEN) ") AS copying_heads\n"
     "FROM head_summary s JOIN models m USING (model_id)\n"
     "GROUP BY m.model_id, s.layer ORDER BY m.model_id, s.layer"},
    /* clang-format on */
    {"What ran, when, and what failed",
     "SELECT r.run_id, r.kind, r.status, r.started_at, r.finished_at, m.path, r.error\n"
     "FROM runs r LEFT JOIN models m USING (model_id)\n"
     "ORDER BY r.run_id DESC LIMIT 10"},
    {"How a metric changed between two analyses of the same model",
     "SELECT a.name, round(a.copying_eigen, 3) AS first, round(b.copying_eigen, 3) AS last\n"
     "FROM head_summary a JOIN head_summary b ON a.layer = b.layer AND a.head = b.head\n"
     "WHERE a.model_id = (SELECT min(model_id) FROM models)\n"
     "  AND b.model_id = (SELECT max(model_id) FROM models)\n"
     "ORDER BY abs(b.copying_eigen - a.copying_eigen) DESC LIMIT 5"},
    {"Induction heads (latest scores of each model)",
     /* clang-format off */
     "SELECT m.path, h.name, round(h.induction, 3) AS induction, round(h.prev_token, 3) AS prev_token\n"
     "FROM head_summary h JOIN models m USING (model_id)\n"
     "WHERE h.induction > " AL_TH_STR(AL_TH_INDUCTION) " ORDER BY h.induction DESC"},
    /* clang-format on */
    {"The pruning curve of the latest prune run: loss against heads left",
     "SELECT step, heads_left, layer || '.' || head AS removed, round(importance, 4) AS importance,\n"
     "       round(loss, 4) AS loss, round(delta_loss, 4) AS delta_loss\n"
     "FROM pruning_steps WHERE run_id = (SELECT max(run_id) FROM runs WHERE kind = 'prune' AND " DONE
     ")\n"
     "ORDER BY step"},
    {"Pair interactions on the probe, largest first, from the singles of the same run",
     "SELECT p.heads, round(p.delta_loss_probe - s1.delta_loss_probe - s2.delta_loss_probe, 4) AS interaction_probe\n"
     "FROM ablations p\n"
     "JOIN ablations s1 ON s1.run_id = p.run_id AND s1.kind = 'single'\n"
     "JOIN ablations s2 ON s2.run_id = p.run_id AND s2.kind = 'single'\n"
     "WHERE p.kind = 'pair' AND p.heads = s1.heads || ',' || s2.heads\n"
     "ORDER BY abs(interaction_probe) DESC LIMIT 10"},
    {"Heads whose three copying scores disagree",
     /* clang-format off */
     "SELECT model_id, name, round(copying_eigen, 3) AS eigen, round(copying_top1, 3) AS top1,\n"
     "       round(copying_ablation, 4) AS ablation\n"
     "FROM head_summary\n"
     "WHERE copying_eigen IS NOT NULL AND copying_ablation IS NOT NULL\n"
     "  AND ((copying_eigen > " AL_TH_STR(AL_TH_COPY_EIGEN) ") != (copying_top1 > "
     AL_TH_STR(AL_TH_COPY_EIGEN) ")\n"
     "       OR (copying_eigen > " AL_TH_STR(AL_TH_COPY_EIGEN) " OR copying_top1 > "
     AL_TH_STR(AL_TH_COPY_EIGEN) ") != (copying_ablation > " AL_TH_STR(AL_TH_COPY_ABLATION) "))\n"
     "ORDER BY copying_ablation DESC"},
    /* clang-format on */
    {"Which layer-0 head's path into which layer-1 head's keys carries the induction effect",
     "SELECT sender, receiver_layer || '.' || receiver_head AS receiver, round(value, 3) AS effect\n"
     "FROM path_patching\n"
     "WHERE channel = 'k' AND direction = 'noise' AND task = 'induction'\n"
     "  AND run_id = (SELECT max(run_id) FROM runs WHERE kind = 'paths' AND " DONE ")\n"
     "ORDER BY value DESC LIMIT 5"},
    {"The heads whose output restores induction on the corrupted input, per model",
     "SELECT p.model_id, p.layer || '.' || p.head AS head, round(p.value, 3) AS effect\n"
     "FROM patching p JOIN runs r ON r.run_id = p.run_id AND r." DONE "\n"
     "WHERE p.component = 'head' AND p.direction = 'denoise' AND p.task = 'induction'\n"
     "ORDER BY p.value DESC LIMIT 5"},
    {"Where a head's output matters: the strongest (head, position) of the newest head_pos run",
     "SELECT p.layer || '.' || p.head AS head, p.pos, round(p.value, 3) AS effect\n"
     "FROM patching p\n"
     "WHERE p.run_id = (SELECT max(x.run_id) FROM patching_runs x JOIN runs r USING (run_id)\n"
     "                  WHERE r." DONE " AND x.component = 'head_pos')\n"
     "ORDER BY abs(p.value) DESC LIMIT 10"},
    {"Findings across seeds: per setting and layer count (view sweep_summary)",
     "SELECT * FROM sweep_summary"},
    {"Every patching run with its two unpatched metrics",
     "SELECT x.run_id, r.kind, x.task, x.component, x.direction, x.n_pairs,\n"
     "       round(x.m_clean, 4) AS m_clean, round(x.m_corr, 4) AS m_corr\n"
     "FROM patching_runs x JOIN runs r USING (run_id) WHERE r." DONE " ORDER BY x.run_id"},
    {"Circuit discovery: kept edges against faithfulness, every circuit of every discover run",
     "SELECT x.run_id, x.method, x.tau, x.n_kept, x.n_edges, round(x.faithfulness, 3) AS faithfulness,\n"
     "       round(x.kl, 4) AS kl FROM circuit_runs x JOIN runs r USING (run_id)\n"
     "WHERE r." DONE " ORDER BY x.run_id, x.method, x.tau"},
    {"The newest ACDC circuit (its run's own --tau): kept edges, strongest first",
     "SELECT e.sender, coalesce(e.receiver_layer || '.' || e.receiver_head, 'logits') AS receiver,\n"
     "       e.channel, round(e.score, 4) AS score\n"
     "FROM circuit_edges e JOIN runs r USING (run_id)\n"
     "WHERE r.run_id = (SELECT max(x.run_id) FROM circuit_runs x JOIN runs q USING (run_id)\n"
     "                  WHERE q." DONE " AND x.method = 'acdc')\n"
     "  AND e.tau = json_extract(r.config_json, '$.tau') AND e.kept = 1\n"
     "ORDER BY e.score DESC"},
};

const al_sr_nb_query *al_sr_notebook_queries(size_t *n) {
    *n = sizeof nb_queries / sizeof nb_queries[0];
    return nb_queries;
}

const char *al_sr_notebook_models_query(void) {
    return "SELECT model_id, path, n_layers, tied_embeddings, n_params, final_val_loss FROM models";
}
