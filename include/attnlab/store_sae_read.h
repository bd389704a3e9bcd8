/* store_sae_read.h -- what the pictures, the report and its explorers read
 * of the SAE tables (sae_runs, sae_feature_runs, sae_features and the
 * per-feature tables; docs/design.md §6): typed readers, so that no file
 * outside src/store/ holds their SQL.
 *
 * Why a file of its own: the writers (store_sae.h) and the schema change
 * with the analysis; these readers name every column they read, so a
 * column added to a table changes nothing here.
 *
 * Every reader returns 0, or -1 with e set on a database error (the output
 * is then empty and safe to free). A NULL number comes back as NaN, a NULL
 * string as NULL. Strings are malloc'd copies owned by the struct they are
 * in, freed with its free function. "Finished" is runs.status = 'done'. */
#ifndef ATTNLAB_STORE_SAE_READ_H
#define ATTNLAB_STORE_SAE_READ_H

#include <stdint.h>

#include "attnlab/store.h"
#include "attnlab/store_report.h"
#include "attnlab/util.h"

/* One `sae features` run: runs + sae_feature_runs, and the --data path
 * the run read (runs.config_json "data", as typed on its command line:
 * relative to where it ran). found 0: no run of that id; has_row 0: no
 * sae_feature_runs row (the run did not finish). */
typedef struct al_sae_frun {
    long run;
    int found, has_row;
    char kind[32], status[16];
    int64_t model_id;
    char *sae_dir, *hook_name, *data; /* NULL when absent */
    int layer, d_sae, n_live, windows, seq_len, probe_r, probe_n;
    long positions;
} al_sae_frun;
int al_store_read_sae_frun(al_store *s, long run, al_sae_frun *out, al_err *e);
void al_sae_frun_free(al_sae_frun *r);

/* The newest finished `sae features` run of model_id (with its row), 0 if
 * none. */
int al_store_latest_sae_frun(al_store *s, int64_t model_id, long *run, al_err *e);
/* Every finished `sae features` run of model_id with its row, by layer
 * then newest first: *runs malloc'd (caller frees), *n of them. */
int al_store_sae_fruns_of_model(al_store *s, int64_t model_id, long **runs, int *n, al_err *e);

/* One feature of a run, with everything a dashboard shows. */
typedef struct al_sae_fctx {
    int rank, window, pos, token;
    long offset;
    char *token_str;
    double act;
} al_sae_fctx;
typedef struct al_sae_flogit {
    int rank, token;
    char *token_str;
    double value;
} al_sae_flogit;
typedef struct al_sae_fhead {
    int layer, head;
    double contribution, share;
} al_sae_fhead;
typedef struct al_sae_feature {
    int found; /* 0: the run has no row for this feature (dead, or no such id) */
    int feature;
    long fired;
    double density, mean_act, max_act, first_mean, second_mean, induction_index;
    int top_layer, top_head; /* -1 when NULL */
    double top_share;
    long first_fired, second_fired; /* probe firings on each occurrence; -1: NULL (an older
                                     * file) */
    double induction_p, auroc, next_share; /* NaN when NULL */
    int induction; /* 1: an induction feature (sae_features.h); -1: NULL */
    int next_token; /* -1 when NULL */
    char next_str[64]; /* its token string ("" when NULL) */
    al_sae_fctx *ctx; /* by rank */
    int n_ctx;
    al_sae_flogit *up, *down; /* by rank: the largest and the smallest logit effects */
    int n_up, n_down;
    al_sae_fhead *heads; /* by head */
    int n_heads;
} al_sae_feature;
/* Feature `feature` of run `run`: its sae_features row and its contexts,
 * logit effects and heads (out->found 0 and empty lists when there is no
 * row). */
int al_store_read_sae_feature(al_store *s, long run, int feature, al_sae_feature *out, al_err *e);
void al_sae_feature_free(al_sae_feature *f);

/* How the feature lists are ordered. */
typedef enum {
    AL_SAE_BY_DENSITY, /* density descending, then feature */
    AL_SAE_BY_INDUCTION /* induction index descending (NULL last), then density, feature */
} al_sae_order;

/* A run's live features, at most limit (<= 0: all) in `order`, as rows:
 * feature, density, mean_act, max_act, induction_index, top_layer,
 * top_head, top_share, up1 (the token_str of the largest logit effect),
 * up1_value, fired. */
int al_store_sae_top_features(al_store *s, long run, al_sae_order order, int limit, al_rows *out,
                              al_err *e);

/* The DFA shares of the `limit` densest features of a run (<= 0: all), as
 * rows feature, head, share, ordered by density descending, feature, head. */
int al_store_sae_top_shares(al_store *s, long run, int limit, al_rows *out, al_err *e);

/* A `sae features --task` run's task attribution (sae_task_runs): one row
 * task, direction, n_pairs, n_items, m_clean, m_corr, n_moved,
 * error_effect, error_se, site_effect, site_se; no rows without a task. */
int al_store_sae_task_run(al_store *s, long run, al_rows *out, al_err *e);
/* Its features by |effect| descending (then feature), at most limit (<= 0:
 * all): feature, effect, se, ci_lo, ci_hi, act_clean, act_corr,
 * induction_index, induction, top_layer, top_head, top_share (the last
 * five from sae_features; NULL for a feature that never fired on the
 * text). */
int al_store_sae_task_features(al_store *s, long run, int limit, al_rows *out, al_err *e);

/* Every finished `sae train` run of model (model_id as text), by layer
 * then run: run_id, layer, site, arch, d_in, d_sae, k, l1_coeff, steps,
 * activations, l0, fve, mse, ce_clean, ce_sae, ce_zero, ce_recovered,
 * dead_frac, dense_frac, rate, out_dir, eval_n. */
int al_store_sae_train_runs(al_store *s, const char *mid, al_rows *out, al_err *e);

#endif
