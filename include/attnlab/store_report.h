/* store_report.h -- the reading side of the store for the report and its
 * explorers (docs/design.md §6, §8): every query the report runs, by
 * what it is for, so that no file outside src/store/ holds SQL text.
 *
 * Readers return a row set (al_rows): each cell as text (NULL for SQL
 * NULL) and as a number (NaN for NULL), exactly as SQLite gives them,
 * so the page prints what it always printed. The columns of each
 * reader's rows are listed at the reader. Ids (model, run) are passed as
 * text, as the page holds them. Every reader returns 0, or -1 with e set
 * (then *out is empty); rows returned are the caller's, freed with
 * al_rows_free. A scalar reader stores NaN when the query has no row or
 * gives NULL. "Finished run" means runs.status = 'done' throughout. */
#ifndef ATTNLAB_STORE_REPORT_H
#define ATTNLAB_STORE_REPORT_H

#include <stddef.h>
#include "attnlab/store.h"
#include "attnlab/util.h"

/* Rows of one query: cell (r, c) at index r * nc + c of t and x. A
 * caller may build one by hand (borrowing t's strings) to show a subset;
 * then it must not pass it to al_rows_free. */
typedef struct al_rows {
    int nr, nc, cap;
    char **t; /* text of each cell, NULL for SQL NULL */
    double *x; /* number of each cell, NaN for SQL NULL */
} al_rows;

static inline const char *al_rows_t(const al_rows *q, int r, int c) {
    return q->t[(size_t)r * q->nc + c];
}
static inline double al_rows_x(const al_rows *q, int r, int c) {
    return q->x[(size_t)r * q->nc + c];
}
void al_rows_free(al_rows *q);

/* The head_summary scores the report picks heads by. */
typedef enum al_sr_score {
    AL_SR_INDUCTION, /* induction > AL_TH_INDUCTION */
    AL_SR_PREV_TOKEN, /* prev_token > AL_TH_PREV_TOKEN */
    AL_SR_COPY_ABLATION, /* copying_ablation > AL_TH_COPY_ABLATION */
    AL_SR_COPY_EIGEN, /* copying_eigen > AL_TH_COPY_EIGEN */
    AL_SR_INDUCTION_ALL /* induction_all > AL_TH_INDUCTION: what names induction
                         * heads on a held-out text probe (docs/findings.md) */
} al_sr_score;

/* ---- models, model card, training ---- */

/* models.model_id of the weights with this sha256 (NaN: not in the db). */
int al_sr_model_id(al_store *s, const char *sha, double *id, al_err *e);
/* n_params, trained_tokens, train_steps, final_train_loss, final_val_loss,
 * sha256, seed of the model (0 or 1 row). */
int al_sr_model_card(al_store *s, const char *mid, al_rows *out, al_err *e);
/* The gap/effect warnings of the model's finished runs (run_warnings),
 * by run and order: run_id, kind, message. */
int al_sr_warnings(al_store *s, const char *mid, al_rows *out, al_err *e);
/* The per-head views (view.h, table views) of the model: for each view
 * metric its newest finished run's values, ordered by kind, metric,
 * layer, head: kind, metric, title, layer, head, value. */
int al_sr_head_views(al_store *s, const char *mid, al_rows *out, al_err *e);
/* The model's views of the other generic shapes (per head pair, per
 * edge, per position; table views), for each metric its newest finished
 * run, ordered by shape (pair, edge, pos), kind, metric: run_id, kind,
 * metric, shape, title. */
int al_sr_shaped_views(al_store *s, const char *mid, al_rows *out, al_err *e);
/* The 12 cells of a pair or edge view (view_cells) with the largest
 * |value| (ties by row, col), values only: row_label, col_label, value,
 * and the number of cells that have a value. */
int al_sr_view_top_cells(al_store *s, const char *run, const char *metric, al_rows *out, al_err *e);
/* Every cell of a view (view_cells) by row, col: row, value. */
int al_sr_view_cells(al_store *s, const char *run, const char *metric, al_rows *out, al_err *e);
/* The newest train run's log, by step: step, tokens, train_loss,
 * val_loss, icl_gain, seconds, the step's best induction score,
 * val_loss_se, icl_gain_se (NULL for a run recorded without them). */
int al_sr_training_log(al_store *s, const char *mid, al_rows *out, al_err *e);
/* models.final_val_loss (NaN: none). */
int al_sr_final_val_loss(al_store *s, const char *mid, double *v, al_err *e);

/* ---- heads (weights and scores) ---- */

/* head_summary by layer, head: name, induction, prev_token,
 * duplicate_token, copying_eigen, copying_top1, copying_ablation,
 * copying_ablation_excess, gradient_importance, qk_rank, ov_rank,
 * qk_effective_rank, ov_effective_rank, pos_prev_token. */
int al_sr_head_table(al_store *s, const char *mid, al_rows *out, al_err *e);
/* Heads above the score's threshold, strongest first: name, score, and
 * its standard error and level (score_intervals; NULL without one). */
int al_sr_heads_above(al_store *s, const char *mid, al_sr_score sc, al_rows *out, al_err *e);
/* The score that names the model's induction heads: AL_SR_INDUCTION_ALL
 * when its newest finished scores run read held-out text (its
 * config_json's probe_tokens "text" or "text:FILE"), AL_SR_INDUCTION
 * otherwise (random ids, or no scores run). */
int al_sr_induction_score(al_store *s, const char *mid, al_sr_score *sc, al_err *e);
/* Names of the heads above the score's threshold, by layer, head
 * (only AL_SR_INDUCTION, AL_SR_INDUCTION_ALL and AL_SR_PREV_TOKEN). */
int al_sr_head_names_above(al_store *s, const char *mid, al_sr_score sc, al_rows *out, al_err *e);
/* How many heads are above the score's threshold (AL_SR_INDUCTION,
 * AL_SR_INDUCTION_ALL or AL_SR_PREV_TOKEN). */
int al_sr_count_heads_above(al_store *s, const char *mid, al_sr_score sc, double *n, al_err *e);
/* The newest scores run's model_scores by metric: metric, value. */
int al_sr_score_metrics(al_store *s, const char *mid, al_rows *out, al_err *e);
/* icl_gain of the newest scores run (NaN: none). */
int al_sr_icl_gain(al_store *s, const char *mid, double *v, al_err *e);
/* Heads with both copying_eigen and copying_ablation (excess = 0) or
 * copying_ablation_excess (excess = 1), by layer, head: name,
 * copying_eigen, the ablation score. */
int al_sr_copy_pairs(al_store *s, const char *mid, int excess, al_rows *out, al_err *e);

/* Which head the report draws a picture of. */
typedef enum al_sr_pick {
    AL_SR_PICK_PREV, /* largest coalesce(prev_token, pos_prev_token) */
    AL_SR_PICK_OWN_COPY, /* copying_eigen > AL_TH_COPY_EIGEN, by
                             coalesce(copying_ablation, copying_eigen) */
    AL_SR_PICK_ANY_COPY /* largest coalesce(copying_ablation, copying_eigen) */
} al_sr_pick;
/* The head with the largest value of the pick (ties: lowest layer, head)
 * into *l, *h: 1 if found, 0 if none, -1 on error. */
int al_sr_best_head(al_store *s, const char *mid, al_sr_pick p, int *l, int *h, al_err *e);

/* The newest circuits run, layer 0, the best two of each head, strongest
 * first: head, "A … B → C", qk, ov, score. */
int al_sr_skip_trigrams(al_store *s, const char *mid, al_rows *out, al_err *e);
/* The newest circuits run's five strongest pairs per kind (by sd above
 * baseline): kind, earlier head, later head, score, baseline, sd above. */
int al_sr_composition_top(al_store *s, const char *mid, al_rows *out, al_err *e);

/* ---- behaviour: ablation, pruning, names ---- */

/* Per method of single ablations, its newest finished run: method, run. */
int al_sr_ablation_runs(al_store *s, const char *mid, al_rows *out, al_err *e);
/* The loss with all heads of an ablation run and method. */
int al_sr_ablation_clean(al_store *s, const char *run, const char *method, double *loss, al_err *e);
/* Single ablations, most costly first: heads, loss, delta_loss,
 * delta_loss_copy, delta_loss_probe. */
int al_sr_ablation_singles(al_store *s, const char *run, const char *method, al_rows *out,
                           al_err *e);
/* The 8 pair ablations of largest |interaction|: "a + b", delta_loss,
 * interaction. */
int al_sr_ablation_pairs(al_store *s, const char *run, const char *method, al_rows *out, al_err *e);
/* ablations rows of the model's finished runs. */
int al_sr_ablation_count(al_store *s, const char *mid, double *n, al_err *e);
/* Per pruning method, its newest finished run: method, run. */
int al_sr_pruning_runs(al_store *s, const char *mid, al_rows *out, al_err *e);
/* A pruning run's steps: heads_left, loss, the removed head "l.h". */
int al_sr_pruning_steps(al_store *s, const char *run, al_rows *out, al_err *e);

/* names_first_p* metrics of the newest names run. */
int al_sr_names_pieces(al_store *s, const char *mid, double *n, al_err *e);
/* The newest names run of any model (0 or 1 row): the name it inserted
 * (NULL: invented per story), names_stories. */
int al_sr_names_run(al_store *s, al_rows *out, al_err *e);
/* One metric of the model's newest names run (NaN: none). */
int al_sr_names_value(al_store *s, const char *mid, const char *metric, double *v, al_err *e);

/* ---- patching and paths ---- */

/* The newest finished run per (task, component, direction), component
 * runs first then path runs (component NULL): run_id, task, component,
 * direction, m_clean, m_corr, n_pairs. */
int al_sr_patching_runs(al_store *s, const char *mid, al_rows *out, al_err *e);
/* A patching run's 8 strongest effects: configuration, value, metric, and
 * its interval (score_intervals: se, ci_lo, ci_hi; NULL without one). */
int al_sr_patching_top(al_store *s, const char *run, al_rows *out, al_err *e);
/* A path patching run's 8 strongest effects: path, value, metric, se,
 * ci_lo, ci_hi (as patching). */
int al_sr_paths_top(al_store *s, const char *run, al_rows *out, al_err *e);
/* A patching run's config_json, task_hash, n_pairs, seq_len (0 or 1 row). */
int al_sr_patching_run_info(al_store *s, const char *run, al_rows *out, al_err *e);

/* ---- attribution ---- */

/* The newest finished attribute run (0 or 1 row): run_id, task,
 * metric_kind, n_items, metric, loss, direct_value, head_value,
 * virtual_value, direct_dloss, head_dloss, virtual_dloss, direction,
 * path_terms rows, attribution_patching rows with an actual value. */
int al_sr_attribution_run(al_store *s, const char *mid, al_rows *out, al_err *e);
/* Path-expansion kinds: kind, value, Δloss, share of Σ|Δloss| as text. */
int al_sr_path_kinds(al_store *s, const char *run, al_rows *out, al_err *e);
/* The virtual term of largest Δloss (0 or 1 row): term, dloss. */
int al_sr_top_virtual_term(al_store *s, const char *run, al_rows *out, al_err *e);
/* Logit lens by layer (n_layers as text names the final stream): stream,
 * loss, accuracy. */
int al_sr_logit_lens(al_store *s, const char *run, const char *n_layers, al_rows *out, al_err *e);
/* attribution_agreement, grids head, head_pos, edge: grid, n, pearson,
 * spearman, top5. */
int al_sr_attr_agreement(al_store *s, const char *run, al_rows *out, al_err *e);

/* ---- circuit discovery ---- */

/* The newest finished scores run that stored intervals (NaN: none). */
int al_sr_latest_scores_intervals(al_store *s, const char *mid, double *run, al_err *e);
/* The newest finished discover run (NaN: none). */
int al_sr_latest_discover(al_store *s, const char *mid, double *run, al_err *e);
/* One circuit (tau NULL for EAP, as text exactly) of a run (0 or 1 row):
 * task, n_kept, n_edges, faithfulness, kl, metric, the run's circuits
 * with a tau, all the run's circuits, and the faithfulness's se, ci_lo,
 * ci_hi (score_intervals; NULL for a run made without them). */
int al_sr_circuit(al_store *s, const char *run, const char *method, const char *tau, al_rows *out,
                  al_err *e);
/* Heads in a kept edge of the circuit, by name: name. */
int al_sr_circuit_heads(al_store *s, const char *run, const char *method, const char *tau,
                        al_rows *out, al_err *e);
/* Kept head -> later head K edges (any layers), strongest first: sender, "l.h",
 * score, K-composition score, its baseline, path patching's effect. */
int al_sr_circuit_k_edges(al_store *s, const char *run, const char *method, const char *tau,
                          al_rows *out, al_err *e);

/* ---- across seeds ---- */

/* Whether the database holds rows merged from others or a setting with
 * several seeds (1 or 0). */
int al_sr_has_sweep(al_store *s, double *yes, al_err *e);
/* View sweep_summary: setting ('' as NULL), n_layers, n_seeds, n_models,
 * n_scored, share_with_induction_head, n_curves, n_never_crossed,
 * first_step_mean, _sd, _min, _max, best_induction_mean, _min, _max,
 * n_kcomp, kcomp_matches_interaction, n_copying, copying_agreement,
 * best_induction_sd, _lo, _hi, first_step_lo, _hi. */
int al_sr_sweep_summary(al_store *s, al_rows *out, al_err *e);

/* ---- the explorers' heatmaps (viewer.h) ---- */

typedef enum al_sr_heatmap {
    AL_SR_HM_PATCHING, /* patching of a run */
    AL_SR_HM_PATHS, /* path_patching of a run */
    AL_SR_HM_DLA, /* logit_attribution of a run */
    AL_SR_HM_ATTRPATCH_HEAD, /* attribution_patching, a head or head_pos grid */
    AL_SR_HM_ATTRPATCH_EDGE /* attribution_patching, the edge grid */
} al_sr_heatmap;
/* Cells of one heatmap of a run (grid: the attribution patching grid,
 * else NULL): row label, row order key, column label, column order key,
 * value[, actual value for attribution patching], in table order. */
int al_sr_heatmap_cells(al_store *s, al_sr_heatmap kind, const char *run, const char *grid,
                        al_rows *out, al_err *e);

/* ---- the notebook's queries (text shown to the user, not run here) ---- */

typedef struct al_sr_nb_query {
    const char *title; /* a markdown heading */
    const char *sql; /* the query, as the notebook shows it */
} al_sr_nb_query;
/* The queries of docs/sql.md the notebook carries, in order; *n of them.
 * Static storage. */
const al_sr_nb_query *al_sr_notebook_queries(size_t *n);
/* The query of the notebook's first cell, listing the models. */
const char *al_sr_notebook_models_query(void);

#endif
